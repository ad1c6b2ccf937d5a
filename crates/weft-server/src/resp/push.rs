//! Pushes: what a RESP connection receives from other connections and from writes by any
//! protocol — pub/sub messages and client-tracking invalidations.
//!
//! Each connection has a [`Mailbox`]: a byte buffer that senders append encoded pushes to
//! (in the receiving connection's protocol, as Redis appends them to the client's output
//! buffer), and that the connection loop drains into its socket writes. A sender never
//! waits: when a connection lets more than `pubsub-output-bytes-max` bytes pile up (it does
//! not read them), its mailbox is emptied, refuses further pushes and signals the
//! connection to close — Redis' `client-output-buffer-limit pubsub` hard limit.
//!
//! [`Clients`] finds a connection's mailbox by client id (CLIENT TRACKING REDIRECT, the
//! tracking table's client ids). [`PushHub`] gathers the server-wide registries.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::BytesMut;
use parking_lot::{Mutex, RwLock};
use tokio::sync::Notify;
use weft_resp::Protocol;

use super::commands::pubsub::PubSub;
use super::commands::tracking::Tracking;

/// A mailbox whose buffer grew beyond this is given a fresh one once drained.
const MAILBOX_KEEP_BYTES: usize = 1 << 20;

/// One connection's queue of pushes.
#[derive(Debug)]
pub struct Mailbox {
    client_id: u64,
    limit_bytes: usize,
    state: Mutex<MailboxState>,
    /// Signalled when pushes were queued.
    ready: Notify,
    /// Signalled (to every waiter) when the mailbox overflowed.
    overflowed: Notify,
    /// Whether the connection has a pub/sub subscription (Redis' `CLIENT_PUBSUB` flag):
    /// RESP2 connections receive redirected invalidations only then.
    subscribed: AtomicBool,
    /// What other connections see of and do to this one (CLIENT LIST, KILL, UNBLOCK).
    pub client: super::clients::ClientShared,
}

#[derive(Debug)]
struct MailboxState {
    queued: BytesMut,
    protocol: Protocol,
    overflowed: bool,
}

impl Mailbox {
    /// An empty mailbox for client `client_id` that overflows past `limit_bytes`.
    #[must_use]
    pub fn new(client_id: u64, limit_bytes: usize) -> Self {
        let nowhere = std::net::SocketAddr::from(([0, 0, 0, 0], 0));
        Self::for_connection(client_id, limit_bytes, nowhere, nowhere)
    }

    /// [`Mailbox::new`] for a connection from `peer` to `local`.
    #[must_use]
    pub fn for_connection(
        client_id: u64,
        limit_bytes: usize,
        peer: std::net::SocketAddr,
        local: std::net::SocketAddr,
    ) -> Self {
        Self {
            client_id,
            limit_bytes,
            state: Mutex::new(MailboxState {
                queued: BytesMut::new(),
                protocol: Protocol::Resp2,
                overflowed: false,
            }),
            ready: Notify::new(),
            overflowed: Notify::new(),
            subscribed: AtomicBool::new(false),
            client: super::clients::ClientShared::new(peer, local),
        }
    }

    /// CLIENT KILL: drops the pushes and has the connection close, wherever it waits (as an
    /// overflow does).
    pub fn kill(&self) {
        self.client.kill();
        {
            let mut state = self.state.lock();
            state.overflowed = true;
            state.queued = BytesMut::new();
        }
        self.overflowed.notify_waiters();
    }

    /// The connection's client id.
    #[must_use]
    pub fn client_id(&self) -> u64 {
        self.client_id
    }

    /// The limit in force, in bytes.
    #[must_use]
    pub fn limit_bytes(&self) -> usize {
        self.limit_bytes
    }

    /// The protocol pushes are encoded in (the connection's, kept up to date by the session).
    #[must_use]
    pub fn protocol(&self) -> Protocol {
        self.state.lock().protocol
    }

    /// Records the connection's protocol (after HELLO or RESET).
    pub fn set_protocol(&self, protocol: Protocol) {
        self.state.lock().protocol = protocol;
    }

    /// Whether the connection has a pub/sub subscription.
    #[must_use]
    pub fn is_subscribed(&self) -> bool {
        self.subscribed.load(Ordering::Relaxed)
    }

    /// Records whether the connection has a pub/sub subscription.
    pub fn set_subscribed(&self, subscribed: bool) {
        self.subscribed.store(subscribed, Ordering::Relaxed);
    }

    /// Appends what `encode` writes, in the connection's protocol (it may write nothing).
    /// Never waits. Past the limit the mailbox overflows: its pushes are dropped, it takes
    /// no more, and the connection is told to close.
    pub fn push(&self, encode: impl FnOnce(&mut BytesMut, Protocol)) {
        let mut state = self.state.lock();
        if state.overflowed {
            return;
        }
        let before = state.queued.len();
        let protocol = state.protocol;
        encode(&mut state.queued, protocol);
        if state.queued.len() == before {
            return;
        }
        if state.queued.len() > self.limit_bytes {
            state.overflowed = true;
            state.queued = BytesMut::new();
            drop(state);
            self.overflowed.notify_waiters();
            return;
        }
        drop(state);
        self.ready.notify_one();
    }

    /// Moves the queued pushes to the end of `out`.
    pub fn drain_into(&self, out: &mut BytesMut) {
        let mut state = self.state.lock();
        if state.queued.is_empty() {
            return;
        }
        out.extend_from_slice(&state.queued);
        state.queued.clear();
        if state.queued.capacity() > MAILBOX_KEEP_BYTES {
            state.queued = BytesMut::new();
        }
    }

    /// Resolves when pushes may have been queued (spurious wake-ups are possible).
    pub async fn ready(&self) {
        self.ready.notified().await;
    }

    /// Whether the mailbox overflowed.
    #[must_use]
    pub fn is_overflowed(&self) -> bool {
        self.state.lock().overflowed
    }

    /// Resolves once the mailbox has overflowed (at once if it already has).
    pub async fn overflowed(&self) {
        loop {
            let notified = self.overflowed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_overflowed() {
                return;
            }
            notified.await;
        }
    }
}

/// The mailboxes of the RESP connections open now, by client id.
#[derive(Debug, Default)]
pub struct Clients {
    by_id: RwLock<HashMap<u64, Arc<Mailbox>>>,
}

impl Clients {
    /// Adds a connection.
    pub fn register(&self, mailbox: &Arc<Mailbox>) {
        self.by_id
            .write()
            .insert(mailbox.client_id(), Arc::clone(mailbox));
    }

    /// Removes a connection.
    pub fn unregister(&self, client_id: u64) {
        self.by_id.write().remove(&client_id);
    }

    /// The mailbox of the connection with this id, if it is open.
    #[must_use]
    pub fn get(&self, client_id: u64) -> Option<Arc<Mailbox>> {
        self.by_id.read().get(&client_id).cloned()
    }

    /// Every open connection's mailbox, by client id.
    #[must_use]
    pub fn all(&self) -> Vec<Arc<Mailbox>> {
        let mut all: Vec<Arc<Mailbox>> = self.by_id.read().values().cloned().collect();
        all.sort_unstable_by_key(|mailbox| mailbox.client_id());
        all
    }

    /// Connections with a blocking command waiting now.
    #[must_use]
    pub fn blocked(&self) -> usize {
        self.by_id
            .read()
            .values()
            .filter(|mailbox| mailbox.client.is_blocked())
            .count()
    }
}

/// Server-wide push state: open connections, pub/sub subscriptions, tracked keys.
#[derive(Debug)]
pub struct PushHub {
    /// Open RESP connections by client id.
    pub clients: Arc<Clients>,
    /// Channels and patterns and their subscribers.
    pub pubsub: PubSub,
    /// CLIENT TRACKING: tracked keys, prefixes and the caches' listeners.
    pub tracking: Arc<Tracking>,
    /// Connections in MONITOR mode.
    pub monitors: super::monitor::Monitors,
}

impl Default for PushHub {
    fn default() -> Self {
        let clients = Arc::new(Clients::default());
        Self {
            tracking: Arc::new(Tracking::new(Arc::clone(&clients))),
            clients,
            pubsub: PubSub::default(),
            monitors: super::monitor::Monitors::default(),
        }
    }
}

/// Encodes a pub/sub message (`message`, `smessage`) in `protocol`: RESP2 an array,
/// RESP3 a push.
pub fn write_message(
    out: &mut BytesMut,
    protocol: Protocol,
    kind: &[u8],
    channel: &[u8],
    message: &[u8],
) {
    weft_resp::write_push_len(out, 3, protocol);
    weft_resp::write_bulk(out, kind);
    weft_resp::write_bulk(out, channel);
    weft_resp::write_bulk(out, message);
}

/// Encodes a `pmessage` in `protocol`.
pub fn write_pattern_message(
    out: &mut BytesMut,
    protocol: Protocol,
    pattern: &[u8],
    channel: &[u8],
    message: &[u8],
) {
    weft_resp::write_push_len(out, 4, protocol);
    weft_resp::write_bulk(out, b"pmessage");
    weft_resp::write_bulk(out, pattern);
    weft_resp::write_bulk(out, channel);
    weft_resp::write_bulk(out, message);
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a push is encoded in the mailbox's current protocol and drained in order.
    #[test]
    fn pushes_follow_the_protocol_and_drain_in_order() {
        let mailbox = Mailbox::new(1, 1 << 20);
        mailbox.push(|out, p| write_message(out, p, b"message", b"c", b"1"));
        mailbox.set_protocol(Protocol::Resp3);
        mailbox.push(|out, p| write_message(out, p, b"message", b"c", b"2"));
        let mut out = BytesMut::new();
        mailbox.drain_into(&mut out);
        assert_eq!(
            &out[..],
            b"*3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\n1\r\n>3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\n2\r\n"
        );
        let mut again = BytesMut::new();
        mailbox.drain_into(&mut again);
        assert!(again.is_empty());
    }

    // Proves a mailbox past its limit drops what it held, refuses more and reports it.
    #[test]
    fn overflow_drops_pushes_and_refuses_more() {
        let mailbox = Mailbox::new(1, 100);
        for _ in 0..3 {
            mailbox.push(|out, p| write_message(out, p, b"message", b"c", &[b'x'; 40]));
        }
        assert!(mailbox.is_overflowed());
        mailbox.push(|out, p| write_message(out, p, b"message", b"c", b"late"));
        let mut out = BytesMut::new();
        mailbox.drain_into(&mut out);
        assert!(out.is_empty());
    }
}
