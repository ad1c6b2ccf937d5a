//! Where the server is in its life, as clients and probes see it: starting (not ready until a
//! clustered node serves its caches), serving, draining (a stop was asked: no new
//! connection, the node hands its data over while the open connections are still answered),
//! then closing.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::watch;
use weft_rest::Readiness;

/// The server's stop request, drain and readiness.
#[derive(Debug)]
pub struct Lifecycle {
    /// A stop was asked (SIGTERM, REST's stop action, RESP SHUTDOWN): the server drains,
    /// then closes.
    stop: watch::Sender<bool>,
    /// The server is draining: it accepts no connection, and reports not ready.
    draining: watch::Sender<bool>,
    /// Once ready, ready until the drain: a later rebalance does not take a serving node
    /// out of its load balancer.
    ready: AtomicBool,
    node: Option<Arc<crate::cluster::node::Node>>,
}

impl Lifecycle {
    /// The lifecycle of a server, clustered as `node` (ready once it serves its caches) or
    /// alone (ready at once).
    #[must_use]
    pub fn new(node: Option<Arc<crate::cluster::node::Node>>) -> Self {
        Self {
            stop: watch::channel(false).0,
            draining: watch::channel(false).0,
            ready: AtomicBool::new(node.is_none()),
            node,
        }
    }

    /// Asks the server to stop (as SIGTERM does); returns at once.
    pub fn request_stop(&self) {
        self.stop.send_replace(true);
    }

    /// Whether a stop was asked.
    #[must_use]
    pub fn is_stop_requested(&self) -> bool {
        *self.stop.borrow()
    }

    /// Resolves once a stop was asked.
    pub async fn stop_requested(&self) {
        let mut stop = self.stop.subscribe();
        let _ = stop.wait_for(|&stop| stop).await;
    }

    /// From now on the server takes no new connection and reports not ready.
    pub fn start_draining(&self) {
        self.draining.send_replace(true);
    }

    /// Turns true when the server starts draining.
    #[must_use]
    pub fn draining_signal(&self) -> watch::Receiver<bool> {
        self.draining.subscribe()
    }

    /// Whether the server takes client traffic now.
    #[must_use]
    pub fn readiness(&self) -> Readiness {
        if *self.draining.borrow() {
            return Readiness::Draining;
        }
        if self.ready.load(Ordering::Acquire) {
            return Readiness::Ready;
        }
        if self.node.as_ref().is_none_or(|node| node.serves()) {
            self.ready.store(true, Ordering::Release);
            return Readiness::Ready;
        }
        Readiness::Starting
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a server alone is ready at once and not once it drains, and that a stop
    // request is seen by a waiter that came before it and by one that came after.
    #[tokio::test]
    async fn a_lone_server_is_ready_until_it_drains() {
        let lifecycle = Arc::new(Lifecycle::new(None));
        assert_eq!(lifecycle.readiness(), Readiness::Ready);
        let early = tokio::spawn({
            let lifecycle = Arc::clone(&lifecycle);
            async move { lifecycle.stop_requested().await }
        });
        assert!(!lifecycle.is_stop_requested());
        lifecycle.request_stop();
        assert!(lifecycle.is_stop_requested());
        let waited = tokio::time::timeout(std::time::Duration::from_secs(5), early).await;
        assert!(matches!(waited, Ok(Ok(()))));
        let late = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            lifecycle.stop_requested(),
        )
        .await;
        assert!(late.is_ok());
        let mut draining = lifecycle.draining_signal();
        assert!(!*draining.borrow_and_update());
        lifecycle.start_draining();
        assert!(*draining.borrow_and_update());
        assert_eq!(lifecycle.readiness(), Readiness::Draining);
    }
}
