//! The cluster membership service: `weft_cluster::membership` driven by a UDP socket and the
//! tokio clock. It finds the nodes named by `join` (resolving names at start), keeps the live
//! member list that the node's coordination reads (notified on every change), and says
//! goodbye on a graceful shutdown so the others need not wait for failure detection.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use tokio::net::UdpSocket;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use weft_cluster::membership::{MemberEvent, Membership, MembershipTimer, NodeIdentity, Output};

use crate::GridError;
use crate::config::GridConfig;

/// Largest membership datagram accepted (foca's packets stay under 1400 bytes).
const DATAGRAM_BYTES_MAX: usize = 64 * 1024;

/// A running membership service.
#[derive(Debug)]
pub struct MembershipService {
    peers: Arc<RwLock<Vec<NodeIdentity>>>,
    changed: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl MembershipService {
    /// Binds the cluster socket at `address` and starts joining the seeds as `name`.
    ///
    /// # Errors
    /// If the failure-detection timings do not pass [`FailureDetection::check`], the socket
    /// cannot be bound or a seed name cannot be resolved.
    ///
    /// [`FailureDetection::check`]: crate::config::FailureDetection::check
    pub async fn start(
        settings: &GridConfig,
        address: SocketAddr,
        name: String,
        secret: weft_cluster::handshake::Secret,
        shutdown: watch::Receiver<bool>,
    ) -> crate::Result<Self> {
        settings.failure_detection.check().map_err(|error| {
            GridError::io("check the failure-detection settings")(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                error,
            ))
        })?;
        let socket = UdpSocket::bind(address)
            .await
            .map_err(GridError::io(format!(
                "listen on {address} (cluster-listen)"
            )))?;
        let address = socket
            .local_addr()
            .map_err(GridError::io("read the cluster address"))?;
        let mut seeds = Vec::new();
        for seed in &settings.join {
            let resolved = tokio::net::lookup_host(seed.as_str())
                .await
                .map_err(GridError::io(format!(
                    "resolve the cluster seed `{seed}` (join)"
                )))?;
            seeds.extend(resolved.filter(|seed| *seed != address));
        }
        let location = settings.location.clone();
        let identity = NodeIdentity::new(name, address, location);
        let timing = settings.failure_detection.membership();
        let membership = Membership::new(identity.clone(), &timing, rand_seed());
        let peers = Arc::new(RwLock::new(Vec::new()));
        let changed = Arc::new(Notify::new());
        let driver = Driver {
            changed: Arc::clone(&changed),
            socket,
            membership,
            timers: BinaryHeap::new(),
            pending: BTreeMap::new(),
            sequence: 0,
            peers: Arc::clone(&peers),
            secret,
        };
        tracing::info!(node = %identity.name, %address, ?seeds, "cluster membership starting");
        let task = tokio::spawn(driver.run(seeds, shutdown));
        Ok(Self {
            peers,
            changed,
            task,
        })
    }

    /// The live peers (this node excluded), shared.
    #[must_use]
    pub fn peers(&self) -> Arc<RwLock<Vec<NodeIdentity>>> {
        Arc::clone(&self.peers)
    }

    /// Notified whenever the peers change.
    #[must_use]
    pub fn changed(&self) -> Arc<Notify> {
        Arc::clone(&self.changed)
    }

    /// Waits for the service to have said goodbye (after the shutdown signal).
    pub async fn stopped(self) {
        let _ = tokio::time::timeout(Duration::from_secs(2), self.task).await;
    }
}

/// A seed for the protocol's randomness (probe order): unpredictable per process.
fn rand_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos()),
    );
    hasher.write_u32(std::process::id());
    hasher.finish()
}

struct Driver {
    socket: UdpSocket,
    membership: Membership,
    timers: BinaryHeap<Reverse<(Instant, u64)>>,
    pending: BTreeMap<u64, MembershipTimer>,
    sequence: u64,
    peers: Arc<RwLock<Vec<NodeIdentity>>>,
    changed: Arc<Notify>,
    /// Signs and checks every datagram (see `weft_cluster::handshake::seal_datagram`).
    secret: weft_cluster::handshake::Secret,
}

impl Driver {
    async fn run(mut self, seeds: Vec<SocketAddr>, mut shutdown: watch::Receiver<bool>) {
        if !seeds.is_empty() {
            let joined = self.membership.join(&seeds);
            self.apply(joined).await;
        }
        let mut buffer = vec![0u8; DATAGRAM_BYTES_MAX];
        loop {
            let next_timer = self.timers.peek().map(|Reverse((at, _))| *at);
            tokio::select! {
                received = self.socket.recv_from(&mut buffer) => match received {
                    Ok((len, from)) => {
                        let Some(datagram) = weft_cluster::handshake::open_datagram(&self.secret, &buffer[..len]) else {
                            tracing::debug!(%from, "ignored a cluster datagram without a valid tag");
                            continue;
                        };
                        let handled = self.membership.handle_datagram(datagram);
                        if let Err(error) = &handled {
                            tracing::debug!(%from, %error, "ignored a cluster datagram");
                        }
                        self.apply(handled).await;
                    }
                    Err(error) => tracing::debug!(%error, "cluster socket receive failed"),
                },
                () = sleep_until(next_timer) => {
                    let now = Instant::now();
                    while let Some(&Reverse((at, sequence))) = self.timers.peek() {
                        if at > now {
                            break;
                        }
                        self.timers.pop();
                        if let Some(timer) = self.pending.remove(&sequence) {
                            let handled = self.membership.handle_timer(timer);
                            self.apply(handled).await;
                        }
                    }
                }
                _ = shutdown.changed() => {
                    let left = self.membership.leave();
                    self.apply(left).await;
                    tracing::info!("left the cluster");
                    return;
                }
            }
        }
    }

    async fn apply(&mut self, output: Result<Output, weft_cluster::membership::MembershipError>) {
        let output = match output {
            Ok(output) => output,
            Err(error) => {
                tracing::debug!(%error, "membership");
                return;
            }
        };
        for (to, data) in &output.send {
            let sealed = weft_cluster::handshake::seal_datagram(&self.secret, data);
            if let Err(error) = self.socket.send_to(&sealed, to).await {
                tracing::debug!(%to, %error, "cluster datagram not sent");
            }
        }
        let now = Instant::now();
        for (after, timer) in output.timers {
            self.sequence += 1;
            self.timers.push(Reverse((now + after, self.sequence)));
            self.pending.insert(self.sequence, timer);
        }
        if output.events.is_empty() {
            return;
        }
        for event in &output.events {
            match event {
                MemberEvent::Up(node) => {
                    tracing::info!(node = %node.name, address = %node.addr, "cluster member up")
                }
                MemberEvent::Down(node) => {
                    tracing::warn!(node = %node.name, address = %node.addr, "cluster member down")
                }
                MemberEvent::Isolated => tracing::warn!("no other cluster member reachable"),
                MemberEvent::Rejoined(node) => tracing::warn!(
                    generation = node.generation,
                    "declared down by the others; rejoined"
                ),
            }
        }
        *self.peers.write() = self.membership.peers();
        self.changed.notify_one();
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
