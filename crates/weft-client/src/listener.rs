//! Client listeners: a listener registered on a cache, on a connection of its own (the server
//! sends its events there), re-registered on another server when that connection breaks.
//!
//! Events reach the application through a bounded queue. When the queue is full, or the
//! connection had to be re-established, events may have been missed; the next item the
//! application reads is then [`ListenerEvent::Missed`], so that it can resynchronise (re-read
//! what it tracks) rather than silently drift.

use std::hash::{BuildHasher, Hasher};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use weft_hotrod::{Event, EventKind, Request, Status};

use crate::cache::CacheContext;
use crate::connection::{Connection, EventHandler};
use crate::error::{Error, Result};

/// Longest pause between attempts to re-register a listener whose connection broke.
const REREGISTER_BACKOFF_MAX: Duration = Duration::from_secs(2);
/// Longest wait for a listener's removal to be answered when it is dropped.
const REMOVE_TIMEOUT: Duration = Duration::from_secs(2);

/// The interest bits of a near cache's invalidation listener: modified, removed, expired
/// (a created key held nothing in the near cache).
pub(crate) const INVALIDATION_INTERESTS: u32 = 0x0e;

/// Which events a listener asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenerOptions {
    /// Entries created.
    pub created: bool,
    /// Entries modified.
    pub modified: bool,
    /// Entries removed.
    pub removed: bool,
    /// Entries expired.
    pub expired: bool,
    /// Also a created event for every entry present when the listener is registered.
    pub include_current_state: bool,
}

impl Default for ListenerOptions {
    /// Every kind of event; no current state.
    fn default() -> Self {
        Self {
            created: true,
            modified: true,
            removed: true,
            expired: true,
            include_current_state: false,
        }
    }
}

impl ListenerOptions {
    fn interests(self) -> u32 {
        [
            (self.created, EventKind::Created),
            (self.modified, EventKind::Modified),
            (self.removed, EventKind::Removed),
            (self.expired, EventKind::Expired),
        ]
        .into_iter()
        .filter(|(wanted, _)| *wanted)
        .map(|(_, kind)| kind.interest())
        .sum()
    }
}

/// What a listener receives.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ListenerEvent {
    /// A key got a value it did not have.
    Created {
        /// The key.
        key: Bytes,
        /// The entry's version.
        version: u64,
    },
    /// A key's value changed.
    Modified {
        /// The key.
        key: Bytes,
        /// The entry's new version.
        version: u64,
    },
    /// A key was removed.
    Removed {
        /// The key.
        key: Bytes,
    },
    /// A key's entry expired.
    Expired {
        /// The key.
        key: Bytes,
    },
    /// Events may have been missed since the previous item: the listener's connection broke
    /// and the listener was registered again (on the same or another server), or the
    /// application did not keep up with the queue.
    Missed,
}

impl ListenerEvent {
    fn of(event: Event) -> Option<Self> {
        let key = event.key?;
        let version = event.version.unwrap_or_default();
        Some(match event.kind {
            EventKind::Created => Self::Created { key, version },
            EventKind::Modified => Self::Modified { key, version },
            EventKind::Removed => Self::Removed { key },
            EventKind::Expired => Self::Expired { key },
        })
    }
}

/// A registered client listener. Read its events with [`ClientListener::next`]; dropping it
/// (or [`ClientListener::remove`]) unregisters it.
#[derive(Debug)]
pub struct ClientListener {
    id: Bytes,
    events: mpsc::Receiver<ListenerEvent>,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl ClientListener {
    /// The listener's id (16 random bytes), as the server knows it.
    #[must_use]
    pub fn id(&self) -> &Bytes {
        &self.id
    }

    /// The next event; `None` once the listener is removed.
    pub async fn next(&mut self) -> Option<ListenerEvent> {
        self.events.recv().await
    }

    /// Unregisters the listener on the server and closes its connection.
    ///
    /// # Errors
    /// None today: a removal the server does not answer is dropped with the connection, which
    /// the server then unregisters. Kept fallible for future transports.
    pub async fn remove(mut self) -> Result<()> {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        Ok(())
    }
}

impl Drop for ClientListener {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// Waits until `stopped` turns true (or its sender is gone).
pub(crate) async fn stop_requested(stopped: &mut watch::Receiver<bool>) {
    // The guard `wait_for` returns must not live across later awaits.
    let _ = stopped.wait_for(|stop| *stop).await.map(|_| ());
}

/// 16 random bytes, as the Java client's listener ids are.
pub(crate) fn random_id() -> Bytes {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut id = Vec::with_capacity(16);
    for _ in 0..2 {
        // `RandomState` is seeded from the operating system's randomness.
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        id.extend_from_slice(&hasher.finish().to_be_bytes());
    }
    Bytes::from(id)
}

/// Opens a connection to `address` and registers listener `id` on it; events go to
/// `on_event`. The connection, once the server acknowledged the registration.
///
/// # Errors
/// If the connection cannot be opened or the server refuses the registration.
pub(crate) async fn register(
    context: &CacheContext,
    address: SocketAddr,
    id: &Bytes,
    interests: u32,
    include_current_state: bool,
    on_event: EventHandler,
) -> Result<Arc<Connection>> {
    let connection = Connection::open(address, context.settings.clone(), Some(on_event)).await?;
    let request = Request::AddClientListener {
        listener_id: id.clone(),
        include_current_state,
        filter: None,
        converter: None,
        raw_data: false,
        interests,
    };
    let reply = connection.call(context.header(0), &request).await?;
    if let Some(topology) = &reply.header.topology {
        context.routing.update(topology);
    }
    context.check(reply)?;
    Ok(Arc::new(connection))
}

/// Registers a listener, returning once the server acknowledged it.
pub(crate) async fn start(
    context: Arc<CacheContext>,
    options: ListenerOptions,
) -> Result<ClientListener> {
    let id = random_id();
    let (sender, events) = mpsc::channel(context.listener_queue_capacity);
    let (stop, stopped) = watch::channel(false);
    let (ready, registered) = oneshot::channel();
    let task = tokio::spawn(supervise(
        context,
        id.clone(),
        options,
        sender,
        ready,
        stopped,
    ));
    match registered.await {
        Ok(Ok(())) => Ok(ClientListener {
            id,
            events,
            stop,
            task: Some(task),
        }),
        Ok(Err(error)) => Err(error),
        Err(_) => Err(Error::Closed),
    }
}

/// Keeps a listener registered until it is stopped: registers it on the first server that
/// takes it, and again elsewhere whenever its connection breaks.
async fn supervise(
    context: Arc<CacheContext>,
    id: Bytes,
    options: ListenerOptions,
    sender: mpsc::Sender<ListenerEvent>,
    ready: oneshot::Sender<Result<()>>,
    mut stopped: watch::Receiver<bool>,
) {
    let missed = Arc::new(AtomicBool::new(false));
    let handler: EventHandler = {
        let sender = sender.clone();
        let missed = Arc::clone(&missed);
        let id = id.clone();
        Arc::new(move |event: Event| {
            if event.listener_id != id {
                return;
            }
            let Some(event) = ListenerEvent::of(event) else {
                return;
            };
            if missed.load(Ordering::Relaxed) {
                if sender.try_send(ListenerEvent::Missed).is_err() {
                    return;
                }
                missed.store(false, Ordering::Relaxed);
            }
            if sender.try_send(event).is_err() {
                missed.store(true, Ordering::Relaxed);
            }
        })
    };
    let mut ready = Some(ready);
    let mut backoff = context.retry_backoff;
    loop {
        let mut last_error = None;
        let mut registered = None;
        for address in context.routing.candidates(None) {
            let attempt = register(
                &context,
                address,
                &id,
                options.interests(),
                options.include_current_state && ready.is_some(),
                Arc::clone(&handler),
            )
            .await;
            match attempt {
                Ok(connection) => {
                    registered = Some(connection);
                    break;
                }
                Err(error) => last_error = Some(error),
            }
        }
        let Some(connection) = registered else {
            if let Some(ready) = ready.take() {
                let error = last_error.unwrap_or(Error::Closed);
                let _ = ready.send(Err(error));
                return;
            }
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = stop_requested(&mut stopped) => return,
            }
            backoff = (backoff * 2).min(REREGISTER_BACKOFF_MAX);
            continue;
        };
        match ready.take() {
            Some(ready) => {
                let _ = ready.send(Ok(()));
            }
            // Whatever happened while the listener was away is unknown.
            None => missed.store(true, Ordering::Relaxed),
        }
        backoff = context.retry_backoff;
        tokio::select! {
            reason = connection.closed() => {
                tracing::debug!(address = %connection.address(), reason, "listener connection lost; registering again");
            }
            () = stop_requested(&mut stopped) => {
                let request = Request::RemoveClientListener { listener_id: id.clone() };
                let removal = connection.call(context.header(0), &request);
                match tokio::time::timeout(REMOVE_TIMEOUT, removal).await {
                    Ok(Ok(reply)) if reply.header.status == Status::Success => {}
                    other => tracing::debug!(?other, "listener removal not acknowledged; closing its connection"),
                }
                connection.close("listener removed");
                return;
            }
        }
    }
}
