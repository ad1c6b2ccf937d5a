//! What other connections may see of, and do to, a RESP connection: its CLIENT LIST line,
//! CLIENT KILL, CLIENT UNBLOCK, and CLIENT PAUSE of the whole server.
//!
//! A session owns its state; it publishes the part CLIENT LIST shows ([`Shown`]) into its
//! [`ClientShared`] after the commands that change it (SELECT, CLIENT SETNAME, HELLO, AUTH,
//! MULTI, (un)subscriptions, ...), and records its last command (one relaxed atomic store
//! per command) and when it last read a request. The shared half lives in the connection's
//! mailbox, which [`super::push::Clients`] finds by client id.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::Notify;

use super::table::{COMMANDS, CommandSpec};

/// The fields of a CLIENT LIST line that change only with the connection's state.
#[derive(Debug, Clone, Default)]
pub struct Shown {
    /// CLIENT SETNAME's name (empty: none).
    pub name: String,
    /// The user the connection authenticated as.
    pub user: String,
    /// The selected database.
    pub database: u32,
    /// Redis' flag letters (`N` for none).
    pub flags: String,
    /// Channels, patterns and shard channels subscribed to.
    pub subscriptions: (usize, usize, usize),
    /// Commands queued since MULTI (-1: not in MULTI).
    pub multi: i64,
    /// 2 or 3.
    pub protocol: u8,
    /// CLIENT TRACKING's redirect (-1: none).
    pub redirect: i64,
}

/// How CLIENT UNBLOCK ends a blocked command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unblock {
    /// As if its timeout passed.
    Timeout,
    /// With Redis' `-UNBLOCKED` error.
    Error,
}

/// The part of a connection other connections read and act on.
#[derive(Debug)]
pub struct ClientShared {
    /// The client's address.
    pub peer: SocketAddr,
    /// The server address it connected to.
    pub local: SocketAddr,
    /// When it connected.
    pub connected_at: Instant,
    /// Index in [`COMMANDS`] of its last command, plus one (0: none yet).
    last_command: AtomicUsize,
    /// Milliseconds after `connected_at` when it last sent a request.
    last_active_ms: AtomicU64,
    /// True while a blocking command waits (CLIENT LIST flag `b`, INFO blocked_clients).
    blocked: AtomicBool,
    shown: Mutex<Shown>,
    /// Set by CLIENT KILL: the connection closes.
    killed: AtomicBool,
    /// A session running commands another member forwarded, not a client's connection:
    /// CLIENT LIST and KILL leave it out.
    internal: AtomicBool,
    /// Set by CLIENT UNBLOCK for the blocked command to end so.
    unblock: Mutex<Option<Unblock>>,
    unblocked: Notify,
}

impl ClientShared {
    /// A connection from `peer` to `local`, connected now.
    #[must_use]
    pub fn new(peer: SocketAddr, local: SocketAddr) -> Self {
        Self {
            peer,
            local,
            connected_at: Instant::now(),
            last_command: AtomicUsize::new(0),
            last_active_ms: AtomicU64::new(0),
            blocked: AtomicBool::new(false),
            shown: Mutex::new(Shown {
                user: "default".to_owned(),
                flags: "N".to_owned(),
                multi: -1,
                protocol: 2,
                redirect: -1,
                ..Shown::default()
            }),
            killed: AtomicBool::new(false),
            internal: AtomicBool::new(false),
            unblock: Mutex::new(None),
            unblocked: Notify::new(),
        }
    }

    /// Records the command the connection runs now.
    pub fn ran(&self, spec: &'static CommandSpec) {
        if let Some(at) = super::table::index_of(spec) {
            self.last_command.store(at + 1, Ordering::Relaxed);
        }
    }

    /// The name of the connection's last command (`NULL` before its first, as Redis).
    #[must_use]
    pub fn last_command(&self) -> &'static str {
        match self.last_command.load(Ordering::Relaxed) {
            0 => "NULL",
            at => COMMANDS.get(at - 1).map_or("NULL", |spec| spec.name),
        }
    }

    /// Records that the connection sent requests now.
    pub fn active(&self, now: Instant) {
        let ms = now.saturating_duration_since(self.connected_at).as_millis();
        self.last_active_ms
            .store(u64::try_from(ms).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// Time since the connection last sent a request.
    #[must_use]
    pub fn idle(&self) -> Duration {
        let active =
            self.connected_at + Duration::from_millis(self.last_active_ms.load(Ordering::Relaxed));
        Instant::now().saturating_duration_since(active)
    }

    /// Publishes what CLIENT LIST shows of the connection.
    pub fn show(&self, shown: Shown) {
        *self.shown.lock() = shown;
    }

    /// What CLIENT LIST shows of the connection.
    #[must_use]
    pub fn shown(&self) -> Shown {
        self.shown.lock().clone()
    }

    /// Marks the connection blocked (or not).
    pub fn set_blocked(&self, blocked: bool) {
        self.blocked.store(blocked, Ordering::Relaxed);
        if !blocked {
            *self.unblock.lock() = None;
        }
    }

    /// Whether a blocking command of the connection waits now.
    #[must_use]
    pub fn is_blocked(&self) -> bool {
        self.blocked.load(Ordering::Relaxed)
    }

    /// Marks the session one that runs forwarded commands (see [`ClientShared::is_internal`]).
    pub fn set_internal(&self) {
        self.internal.store(true, Ordering::Relaxed);
    }

    /// Whether the session runs commands another member forwarded (not a client's).
    #[must_use]
    pub fn is_internal(&self) -> bool {
        self.internal.load(Ordering::Relaxed)
    }

    /// CLIENT KILL: the connection is to close.
    pub fn kill(&self) {
        self.killed.store(true, Ordering::Release);
    }

    /// Whether CLIENT KILL closed the connection.
    #[must_use]
    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::Acquire)
    }

    /// CLIENT UNBLOCK: ends the connection's blocked command so; false if none waits.
    pub fn unblock(&self, how: Unblock) -> bool {
        if !self.is_blocked() {
            return false;
        }
        *self.unblock.lock() = Some(how);
        self.unblocked.notify_one();
        true
    }

    /// Resolves when CLIENT UNBLOCK asked the blocked command to end, with how.
    pub async fn unblocked(&self) -> Unblock {
        loop {
            if let Some(how) = *self.unblock.lock() {
                return how;
            }
            self.unblocked.notified().await;
        }
    }
}

/// CLIENT PAUSE: until when, and whether only writes wait.
#[derive(Debug, Default)]
pub struct Pause {
    /// Whether a pause may be in force (one load on every request when none is).
    active: AtomicBool,
    until: Mutex<Option<(Instant, bool)>>,
    lifted: Notify,
    /// Connections waiting for the pause to end (INFO blocked_clients counts them).
    waiting: AtomicUsize,
}

impl Pause {
    /// Pauses clients until `until`; `writes_only` for PAUSE WRITE. A pause in force is
    /// replaced only by a longer one or one that pauses more, as in Redis.
    pub fn pause(&self, until: Instant, writes_only: bool) {
        let mut current = self.until.lock();
        *current = Some(match *current {
            Some((end, only)) if end > Instant::now() => (end.max(until), only && writes_only),
            _ => (until, writes_only),
        });
        self.active.store(true, Ordering::Release);
    }

    /// CLIENT UNPAUSE.
    pub fn unpause(&self) {
        *self.until.lock() = None;
        self.active.store(false, Ordering::Release);
        self.lifted.notify_waiters();
    }

    /// The pause in force: whether only writes wait, and until when; `None` when there
    /// is none.
    #[must_use]
    pub fn in_force(&self) -> Option<(bool, Instant)> {
        if !self.active.load(Ordering::Acquire) {
            return None;
        }
        let mut current = self.until.lock();
        match *current {
            Some((until, writes_only)) if until > Instant::now() => Some((writes_only, until)),
            _ => {
                *current = None;
                self.active.store(false, Ordering::Release);
                None
            }
        }
    }

    /// Waits until no pause holds back a command (`write`: whether it writes).
    pub async fn wait(&self, write: bool) {
        self.waiting.fetch_add(1, Ordering::Relaxed);
        loop {
            let lifted = self.lifted.notified();
            tokio::pin!(lifted);
            lifted.as_mut().enable();
            match self.in_force() {
                Some((writes_only, until)) if write || !writes_only => {
                    tokio::select! {
                        () = lifted => {}
                        () = tokio::time::sleep_until(until.into()) => {}
                    }
                }
                _ => break,
            }
        }
        self.waiting.fetch_sub(1, Ordering::Relaxed);
    }

    /// Connections waiting for the pause to end.
    #[must_use]
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }
}

/// Whether CLIENT PAUSE WRITE holds back `args` from `session`: commands that write or may
/// replicate in Redis' sense (PFCOUNT may rewrite its cache, PUBLISH is replicated), scripts
/// that may write, and EXEC of a transaction with any of these queued.
#[must_use]
pub fn paused_as_write(session: &super::Session, args: &[bytes::Bytes]) -> bool {
    let Some(spec) = args.first().and_then(|name| super::table::lookup(name)) else {
        return false;
    };
    match spec.name {
        "exec" => session.multi.as_ref().is_some_and(|multi| {
            multi
                .queued
                .iter()
                .any(|queued| !queued.is_empty() && writes(&session.context, queued))
        }),
        // Queued, not run: EXEC is what waits.
        _ if session.multi.is_some() => false,
        _ => writes(&session.context, args),
    }
}

fn writes(context: &crate::ServerContext, args: &[bytes::Bytes]) -> bool {
    let Some(spec) = args.first().and_then(|name| super::table::lookup(name)) else {
        return false;
    };
    match spec.name {
        "pfcount" | "publish" | "spublish" => true,
        "eval" | "evalsha" | "fcall" => super::commands::scripting::may_write(context, args),
        _ => spec.flags.contains(&"write"),
    }
}
