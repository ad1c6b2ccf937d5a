//! Connections per server: up to `connections_per_server` multiplexed connections to each,
//! opened on demand, used in turn, replaced when they break. A server whose connection
//! failed is remembered for a while so that routing tries it last.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use crate::connection::{Connection, ConnectionSettings};
use crate::error::Result;

/// How long a server that failed is tried after the others.
pub(crate) const SUSPECT_DURATION: Duration = Duration::from_secs(2);

#[derive(Default)]
struct Slot {
    connections: Mutex<Vec<Arc<Connection>>>,
    next: AtomicUsize,
    /// Held while a connection is being opened, so that a burst of requests opens one at a
    /// time rather than a connection each.
    opening: tokio::sync::Mutex<()>,
}

/// The client's connections.
pub(crate) struct Pool {
    settings: ConnectionSettings,
    per_server: usize,
    slots: Mutex<HashMap<SocketAddr, Arc<Slot>>>,
    /// Servers whose connection failed, and when.
    suspects: Mutex<HashMap<SocketAddr, Instant>>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("servers", &self.slots.lock().len())
            .finish_non_exhaustive()
    }
}

impl Pool {
    pub(crate) fn new(settings: ConnectionSettings, per_server: usize) -> Self {
        Self {
            settings,
            per_server,
            slots: Mutex::new(HashMap::new()),
            suspects: Mutex::new(HashMap::new()),
        }
    }

    /// The settings connections are opened with.
    pub(crate) fn settings(&self) -> &ConnectionSettings {
        &self.settings
    }

    /// A connection to `address`: an open one in turn once there are enough, else a new one.
    ///
    /// # Errors
    /// [`crate::Error::Connect`] when a new connection cannot be opened and none is open.
    pub(crate) async fn get(&self, address: SocketAddr) -> Result<Arc<Connection>> {
        let slot = Arc::clone(self.slots.lock().entry(address).or_default());
        if let Some(connection) = self.pick(&slot, true) {
            return Ok(connection);
        }
        let _opening = slot.opening.lock().await;
        if let Some(connection) = self.pick(&slot, true) {
            return Ok(connection);
        }
        match Connection::open(address, self.settings.clone(), None).await {
            Ok(connection) => {
                let connection = Arc::new(connection);
                slot.connections.lock().push(Arc::clone(&connection));
                self.suspects.lock().remove(&address);
                Ok(connection)
            }
            Err(error) => {
                // A connection still open may serve while new ones cannot be made.
                if let Some(connection) = self.pick(&slot, false) {
                    return Ok(connection);
                }
                self.suspect(address);
                Err(error)
            }
        }
    }

    /// An open connection in turn; with `only_when_full`, only once the slot holds as many
    /// as it may.
    fn pick(&self, slot: &Slot, only_when_full: bool) -> Option<Arc<Connection>> {
        let mut connections = slot.connections.lock();
        connections.retain(|connection| !connection.is_closed());
        if connections.is_empty() || (only_when_full && connections.len() < self.per_server) {
            return None;
        }
        let turn = slot.next.fetch_add(1, Ordering::Relaxed) % connections.len();
        Some(Arc::clone(&connections[turn]))
    }

    /// Marks `address` as failing: its connections are closed and routing tries it last for
    /// a while.
    pub(crate) fn suspect(&self, address: SocketAddr) {
        self.suspects.lock().insert(address, Instant::now());
        let slot = self.slots.lock().get(&address).cloned();
        if let Some(slot) = slot {
            for connection in slot.connections.lock().drain(..) {
                connection.close("the server failed a request");
            }
        }
    }

    /// Whether `address` failed recently.
    pub(crate) fn is_suspect(&self, address: SocketAddr) -> bool {
        let mut suspects = self.suspects.lock();
        match suspects.get(&address) {
            Some(since) if since.elapsed() < SUSPECT_DURATION => true,
            Some(_) => {
                suspects.remove(&address);
                false
            }
            None => false,
        }
    }

    /// Closes every connection.
    pub(crate) fn close_all(&self) {
        let slots: Vec<_> = self.slots.lock().drain().map(|(_, slot)| slot).collect();
        for slot in slots {
            for connection in slot.connections.lock().drain(..) {
                connection.close("the client was closed");
            }
        }
    }
}
