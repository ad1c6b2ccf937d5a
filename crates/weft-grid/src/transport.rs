//! Node-to-node messaging over TCP: one outbound connection per peer, requests tagged with
//! an id and matched to their responses, frames from `weft_cluster::wire`.
//!
//! Every connection opens with `weft_cluster::handshake`: both ends prove they know the
//! cluster secret and say which process (name and incarnation) they are, and nothing else
//! is read from a peer before it has. Each request is addressed to the incarnation the
//! sender expects at that address ([`Transport::expect`]): a process restarted on the same
//! address is another incarnation, and what was meant for its predecessor never reaches it.
//!
//! Requests to one peer leave in the order they were sent, over one connection, and the
//! receiver applies replicated changes in that order before reading the next frame: that is
//! what keeps a key's changes in the primary's order on every backup. Everything else a
//! node is asked runs concurrently.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use parking_lot::{Mutex, RwLock};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc, oneshot, watch};
use weft_cluster::handshake::{self, HandshakeError, Identity, Secret};
use weft_cluster::wire::{self, Envelope, Request, Response};

use weft_core::persistence::BoxFuture;

use crate::tls::ClusterTls;

/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the handshake of a new connection may take, either way.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Bytes read at a time (and the most memory a frame takes ahead of its bytes).
const READ_CHUNK: usize = 64 * 1024;
/// Requests queued for a peer are written together, up to about this many bytes at once.
const WRITE_BATCH_BYTES_MAX: usize = 1 << 20;

/// What the transport accepts from the cluster port.
#[derive(Debug, Clone)]
pub struct Limits {
    /// The largest frame accepted (at most `wire::FRAME_BYTES_MAX`).
    pub frame_bytes_max: usize,
    /// Inbound connections open at once; more are closed as they arrive.
    pub connections_max: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            frame_bytes_max: wire::FRAME_BYTES_MAX,
            connections_max: CONNECTIONS_MAX_DEFAULT,
        }
    }
}

/// Inbound cluster connections open at once, by default (a node holds one from each peer,
/// plus short-lived ones from nodes starting).
pub const CONNECTIONS_MAX_DEFAULT: usize = 256;

/// Why a request got no response.
///
/// Whether the peer may have run the request is what a caller must know before it sends a
/// write again: [`TransportError::Unreachable`] says it certainly did not (no byte of the
/// request left this process), the others that it may have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// The request was not sent: no connection to the peer could be opened (refused, timed
    /// out, or its handshake failed), the connection broke before the request's turn to be
    /// written came, or the process found at the address is not the incarnation the request
    /// was meant for.
    #[error("node {0} unreachable")]
    Unreachable(SocketAddr),
    /// The connection broke after the request was written (or while it was being written),
    /// before its response arrived: the peer may have run it.
    #[error("connection to node {0} lost before it answered; the request may have been run")]
    ConnectionLost(SocketAddr),
    /// No response in time: the peer may have run the request, or may still.
    #[error("node {0} did not answer in time")]
    Timeout(SocketAddr),
}

impl TransportError {
    /// Whether the request certainly never reached the peer, so that sending it again cannot
    /// run it twice.
    #[must_use]
    pub fn not_sent(&self) -> bool {
        matches!(self, Self::Unreachable(_))
    }
}

/// The response to a request queued with [`Transport::send`], once it arrives.
#[derive(Debug)]
pub struct Answer {
    to: SocketAddr,
    receiver: oneshot::Receiver<Result<Response, TransportError>>,
}

impl Future for Answer {
    type Output = Result<Response, TransportError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let to = self.to;
        // Every path that gives up on a request says why (see `run_peer`); a waiter dropped
        // without a word (the runtime shutting down) may have had its request written.
        Pin::new(&mut self.receiver)
            .poll(cx)
            .map(|received| received.unwrap_or(Err(TransportError::ConnectionLost(to))))
    }
}

/// Why a connection's handshake failed.
#[derive(Debug, thiserror::Error)]
enum HandshakeFailure {
    #[error("{0}")]
    Refused(#[from] HandshakeError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("no handshake in time")]
    Timeout,
}

/// What a node does with the requests it receives.
pub trait Handler: Send + Sync + 'static {
    /// Answers a request from the node `from` (as its handshake proved). Called in the
    /// order requests arrive on a connection; what it does before returning its future
    /// happens in that order, the rest concurrently.
    fn handle(&self, from: &Identity, request: Request) -> BoxFuture<Response>;

    /// Applies changes `from` replicated on its stream `stream`, in the order they arrive
    /// (called on the connection's reader, before the next frame is read).
    fn apply(
        &self,
        from: &Identity,
        stream: u64,
        restart: bool,
        replicas: Vec<(u64, std::sync::Arc<wire::Replica>)>,
    ) -> Response;
}

/// Where a request's outcome goes.
enum Reply {
    /// To an [`Answer`] someone awaits.
    Channel(oneshot::Sender<Result<Response, TransportError>>),
    /// To a function run where the outcome becomes known (the connection's response
    /// reader, or whoever found the connection gone), with no task woken for it.
    Then(Box<dyn FnOnce(Result<Response, TransportError>) + Send>),
}

impl Reply {
    fn deliver(self, outcome: Result<Response, TransportError>) {
        match self {
            Self::Channel(sender) => {
                let _ = sender.send(outcome);
            }
            Self::Then(then) => then(outcome),
        }
    }
}

/// A request's waiter, until its response arrives or its connection fails.
struct Waiter {
    reply: Reply,
    /// Set before the first byte of the request is handed to the socket: from then on, a
    /// failed connection leaves its outcome unknown.
    written: bool,
}

impl Waiter {
    /// Tells the waiter its request got no response: not sent, or lost once written.
    fn fail(self, to: SocketAddr) {
        let error = if self.written {
            TransportError::ConnectionLost(to)
        } else {
            TransportError::Unreachable(to)
        };
        self.reply.deliver(Err(error));
    }
}

type Pending = Arc<Mutex<HashMap<u64, Waiter>>>;

struct Outgoing {
    id: u64,
    request: Request,
}

#[derive(Clone)]
struct Peer {
    queue: mpsc::UnboundedSender<Outgoing>,
    pending: Pending,
}

/// Messaging with the other nodes. Cloning shares it.
#[derive(Clone)]
pub struct Transport {
    inner: Arc<Inner>,
}

struct Inner {
    me: Identity,
    secret: Secret,
    limits: Limits,
    /// Mutual TLS on every connection, when configured.
    tls: Option<ClusterTls>,
    peers: Mutex<HashMap<SocketAddr, Peer>>,
    /// The incarnation each member's address belongs to, as the agreed members say; a
    /// connection to another process at that address carries nothing.
    expected: RwLock<HashMap<SocketAddr, u64>>,
    inbound: Arc<Semaphore>,
    next_id: AtomicU64,
    sent_bytes: AtomicU64,
    received_bytes: AtomicU64,
    /// Requests other members sent that are being handled now (see [`Transport::quiesce`]).
    handling: AtomicU64,
    /// Requests other members sent, since start.
    received: AtomicU64,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("peers", &self.inner.peers.lock().len())
            .finish()
    }
}

impl Transport {
    /// A transport for the process `me`, proving itself with `secret` (inside a TLS
    /// session when `tls` is given), with no connections yet.
    #[must_use]
    pub fn new(me: Identity, secret: Secret, limits: Limits, tls: Option<ClusterTls>) -> Self {
        let inbound = Arc::new(Semaphore::new(limits.connections_max.max(1)));
        Self {
            inner: Arc::new(Inner {
                me,
                secret,
                limits,
                tls,
                peers: Mutex::new(HashMap::new()),
                expected: RwLock::new(HashMap::new()),
                inbound,
                next_id: AtomicU64::new(1),
                sent_bytes: AtomicU64::new(0),
                received_bytes: AtomicU64::new(0),
                handling: AtomicU64::new(0),
                received: AtomicU64::new(0),
            }),
        }
    }

    /// This process, as it presents itself.
    #[must_use]
    pub fn identity(&self) -> &Identity {
        &self.inner.me
    }

    /// From now on, requests to each of these addresses are for the given incarnation
    /// only (the agreed members); addresses not listed take whoever answers there (seeds,
    /// nodes not admitted yet). A connection to another process at a listed address is
    /// closed, and its waiters see the peer as unreachable.
    pub fn expect(&self, peers: impl IntoIterator<Item = (SocketAddr, u64)>) {
        let peers: HashMap<SocketAddr, u64> = peers.into_iter().collect();
        *self.inner.expected.write() = peers;
    }

    fn expected(&self, addr: SocketAddr) -> Option<u64> {
        self.inner.expected.read().get(&addr).copied()
    }

    /// Bytes sent and received over cluster connections.
    #[must_use]
    pub fn bytes(&self) -> (u64, u64) {
        (
            self.inner.sent_bytes.load(Ordering::Relaxed),
            self.inner.received_bytes.load(Ordering::Relaxed),
        )
    }

    /// Waits until no request other members sent is being handled and none has come for
    /// `quiet`, at most `max`: a member that left the agreed members answers what the
    /// others sent it before they installed the topology without it, instead of dropping
    /// it with its connections. Returns whether it went quiet in time.
    pub async fn quiesce(&self, quiet: Duration, max: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + max;
        let step = (quiet / 4).max(Duration::from_millis(5));
        let mut seen = self.inner.received.load(Ordering::Acquire);
        let mut quiet_since = tokio::time::Instant::now();
        loop {
            let received = self.inner.received.load(Ordering::Acquire);
            let now = tokio::time::Instant::now();
            if received != seen || self.inner.handling.load(Ordering::Acquire) > 0 {
                seen = received;
                quiet_since = now;
            } else if now.duration_since(quiet_since) >= quiet {
                return true;
            }
            if now >= deadline {
                return false;
            }
            tokio::time::sleep(step).await;
        }
    }

    /// Serves the requests other nodes send to `listener` with `handler`, until shutdown.
    pub fn serve(
        &self,
        listener: TcpListener,
        handler: Arc<dyn Handler>,
        mut shutdown: watch::Receiver<bool>,
    ) -> tokio::task::JoinHandle<()> {
        let transport = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    accepted = listener.accept() => match accepted {
                        Ok((stream, from)) => {
                            let Ok(permit) = Arc::clone(&transport.inner.inbound).try_acquire_owned() else {
                                tracing::warn!(%from, limit = transport.inner.limits.connections_max, "too many cluster connections; closing a new one");
                                continue;
                            };
                            let _ = stream.set_nodelay(true);
                            let transport = transport.clone();
                            let handler = Arc::clone(&handler);
                            tokio::spawn(async move {
                                let _permit = permit;
                                transport.accept_connection(stream, from, handler).await;
                            });
                        }
                        Err(error) => {
                            tracing::debug!(%error, "cluster accept failed");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    },
                    _ = shutdown.changed() => return,
                }
            }
        })
    }

    /// Proves both ends of a new inbound connection, then serves it.
    async fn accept_connection(
        self,
        stream: TcpStream,
        from: SocketAddr,
        handler: Arc<dyn Handler>,
    ) {
        let Some(tls) = self.inner.tls.clone() else {
            return self.prove_and_serve(stream, from, handler).await;
        };
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.acceptor.accept(stream)).await {
            Ok(Ok(session)) => self.prove_and_serve(session, from, handler).await,
            Ok(Err(error)) => {
                tracing::warn!(%from, %error, "refused a cluster connection: TLS handshake failed");
            }
            Err(_) => tracing::debug!(%from, "cluster connection: no TLS handshake in time"),
        }
    }

    /// [`Transport::accept_connection`] once the connection is plaintext or TLS.
    async fn prove_and_serve<S: Link>(
        self,
        mut stream: S,
        from: SocketAddr,
        handler: Arc<dyn Handler>,
    ) {
        let proven = tokio::time::timeout(
            HANDSHAKE_TIMEOUT,
            accept_handshake(&mut stream, &self.inner.me, &self.inner.secret),
        )
        .await
        .unwrap_or(Err(HandshakeFailure::Timeout));
        match proven {
            Ok(peer) => {
                let (reader, writer) = stream.halves();
                self.serve_connection(reader, writer, from, peer, handler)
                    .await;
            }
            Err(HandshakeFailure::Refused(HandshakeError::BadCode)) => {
                tracing::warn!(%from, "refused a cluster connection: the peer does not know the cluster secret");
            }
            Err(error) => tracing::debug!(%from, %error, "cluster connection handshake failed"),
        }
    }

    /// Answers the requests of one inbound connection. Replicated changes are applied
    /// here, in the order they arrive, and answered from here too: the frames already
    /// received are handled first, then their answers written at once (no task is woken to
    /// write them). Every other request runs concurrently and its answer comes back through
    /// `outbox`. While this writes, it does not read; the peer's responses are read by a
    /// task that does nothing else, so the two cannot wait on each other.
    async fn serve_connection(
        self,
        mut reader: impl AsyncRead + Unpin,
        mut writer: impl AsyncWrite + Unpin,
        from: SocketAddr,
        peer: Identity,
        handler: Arc<dyn Handler>,
    ) {
        let (replies, mut outbox) = mpsc::unbounded_channel::<(u64, Response)>();
        let mut buffer = BytesMut::with_capacity(READ_CHUNK);
        let mut out = Vec::new();
        let limit = self.inner.limits.frame_bytes_max;
        loop {
            tokio::select! {
                read = read_frame(&mut reader, &mut buffer, limit, &self.inner.received_bytes) => {
                    let mut next = read;
                    loop {
                        match next {
                            Ok(Some(envelope)) => {
                                take_request(envelope, from, &peer, &handler, &replies, &mut out, &self.inner);
                            }
                            Ok(None) => return,
                            Err(error) => {
                                tracing::debug!(%from, %error, "closing cluster connection");
                                return;
                            }
                        }
                        next = match buffered_frame(&mut buffer, limit) {
                            Ok(None) => break,
                            frame => frame,
                        };
                    }
                }
                Some((id, response)) = outbox.recv() => {
                    wire::encode(&Envelope::Response(id, response), &mut out);
                }
            }
            while let Ok((id, response)) = outbox.try_recv() {
                wire::encode(&Envelope::Response(id, response), &mut out);
            }
            if !out.is_empty() {
                self.inner
                    .sent_bytes
                    .fetch_add(out.len() as u64, Ordering::Relaxed);
                if writer.write_all(&out).await.is_err() || writer.flush().await.is_err() {
                    return;
                }
                out.clear();
                if out.capacity() > WRITE_BATCH_BYTES_MAX {
                    out = Vec::new();
                }
            }
        }
    }

    /// Sends `request` to `to` and waits up to `timeout` for the response.
    ///
    /// # Errors
    /// [`TransportError::Unreachable`] when the request was not sent,
    /// [`TransportError::ConnectionLost`] when the connection broke after it was, and
    /// [`TransportError::Timeout`] when no response came in time.
    pub async fn call(
        &self,
        to: SocketAddr,
        request: Request,
        timeout: Duration,
    ) -> Result<Response, TransportError> {
        tokio::time::timeout(timeout, self.send(to, request))
            .await
            .unwrap_or(Err(TransportError::Timeout(to)))
    }

    /// Queues `request` for `to` (after everything queued for it before) and returns its
    /// answer: the response, or why there is none (see [`Transport::call`]).
    pub fn send(&self, to: SocketAddr, request: Request) -> Answer {
        let (sender, receiver) = oneshot::channel();
        self.queue(to, request, Reply::Channel(sender));
        Answer { to, receiver }
    }

    /// Queues `request` for `to` like [`Transport::send`], and runs `then` with its outcome
    /// where that becomes known: on the connection's response reader, or on whichever task
    /// finds the request unsendable (this one, if the connection is gone already). `then`
    /// must be quick and must not block; it saves the task an `Answer` would wake.
    pub fn send_then(
        &self,
        to: SocketAddr,
        request: Request,
        then: impl FnOnce(Result<Response, TransportError>) + Send + 'static,
    ) {
        self.queue(to, request, Reply::Then(Box::new(then)));
    }

    fn queue(&self, to: SocketAddr, request: Request, reply: Reply) {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let peer = self.peer(to);
        // The waiter goes in before the request is queued, so that the connection's end
        // (`run_peer`) finds every request it took in `pending`.
        peer.pending.lock().insert(
            id,
            Waiter {
                reply,
                written: false,
            },
        );
        if peer.queue.send(Outgoing { id, request }).is_err() {
            // The connection stopped taking requests before this one: it was not sent. (Its
            // end may have told the waiter already, then it is no longer pending.)
            let waiter = peer.pending.lock().remove(&id);
            if let Some(waiter) = waiter {
                waiter.fail(to);
            }
        }
    }

    fn peer(&self, to: SocketAddr) -> Peer {
        let mut peers = self.inner.peers.lock();
        if let Some(peer) = peers.get(&to)
            && !peer.queue.is_closed()
        {
            return peer.clone();
        }
        let (queue, outgoing) = mpsc::unbounded_channel();
        let peer = Peer {
            queue,
            pending: Arc::new(Mutex::new(HashMap::new())),
        };
        peers.insert(to, peer.clone());
        tokio::spawn(
            self.clone()
                .run_peer(to, outgoing, Arc::clone(&peer.pending)),
        );
        peer
    }

    /// One outbound connection: writes queued requests in order, routes responses to their
    /// waiters. When the connection fails, every waiter learns whether its request was
    /// written (see [`TransportError`]), and the next request opens a new connection.
    async fn run_peer(
        self,
        to: SocketAddr,
        mut outgoing: mpsc::UnboundedReceiver<Outgoing>,
        pending: Pending,
    ) {
        self.connect_and_serve(to, &mut outgoing, &pending).await;
        // Why a request left unanswered here was surely not sent: a waiter is pending from
        // before its request is queued until it is answered or told; every request taken
        // from the queue is marked written before its first byte goes to the socket, and
        // requests still queued are never taken once the queue is closed. Closing comes
        // before `forget` tells the waiters, so a request queued from now on is refused
        // (and its sender tells its waiter), never left in a queue no one reads.
        outgoing.close();
        self.forget(to, &pending);
    }

    /// Opens the connection to `to`, proves both ends, then writes queued requests and
    /// routes responses until the connection fails or the transport is dropped.
    async fn connect_and_serve(
        &self,
        to: SocketAddr,
        outgoing: &mut mpsc::UnboundedReceiver<Outgoing>,
        pending: &Pending,
    ) {
        let connected = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(to)).await;
        let stream = match connected {
            Ok(Ok(stream)) if is_self_connected(&stream) => {
                // Connecting to a port nobody listens on, from the same port: TCP's
                // simultaneous open joined the socket to itself. Dropped at once, or it
                // would hold the port that the member meant to listen there (restarting)
                // cannot bind.
                tracing::debug!(%to, "cluster connection joined itself; nobody listens there");
                return;
            }
            Ok(Ok(stream)) => stream,
            Ok(Err(error)) => {
                tracing::debug!(%to, %error, "cluster connection failed");
                return;
            }
            Err(_) => {
                tracing::debug!(%to, "cluster connection timed out");
                return;
            }
        };
        let _ = stream.set_nodelay(true);
        let Some(tls) = self.inner.tls.clone() else {
            return self.prove_and_send(stream, to, outgoing, pending).await;
        };
        let session = tokio::time::timeout(
            HANDSHAKE_TIMEOUT,
            tls.connector.connect(ClusterTls::server_name(to), stream),
        )
        .await;
        match session {
            Ok(Ok(session)) => self.prove_and_send(session, to, outgoing, pending).await,
            Ok(Err(error)) => {
                tracing::warn!(%to, %error, "cluster connection: TLS handshake failed");
            }
            Err(_) => tracing::debug!(%to, "cluster connection: no TLS handshake in time"),
        }
    }

    /// [`Transport::connect_and_serve`] once the connection is plaintext or TLS.
    async fn prove_and_send<S: Link>(
        &self,
        mut stream: S,
        to: SocketAddr,
        outgoing: &mut mpsc::UnboundedReceiver<Outgoing>,
        pending: &Pending,
    ) {
        let proven = tokio::time::timeout(
            HANDSHAKE_TIMEOUT,
            open_handshake(&mut stream, &self.inner.me, &self.inner.secret),
        )
        .await
        .unwrap_or(Err(HandshakeFailure::Timeout));
        let peer = match proven {
            Ok(peer) => peer,
            Err(error) => {
                tracing::debug!(%to, %error, "cluster connection handshake failed");
                return;
            }
        };
        let (mut reader, mut writer) = stream.halves();
        // Dropped when the response reader ends (the connection broke).
        let (reading, mut read_ended) = oneshot::channel::<()>();
        let responses = {
            let pending = Arc::clone(pending);
            let received = Arc::clone(&self.inner);
            tokio::spawn(async move {
                let _reading = reading;
                let mut buffer = BytesMut::with_capacity(READ_CHUNK);
                let limit = received.limits.frame_bytes_max;
                loop {
                    match read_frame(&mut reader, &mut buffer, limit, &received.received_bytes)
                        .await
                    {
                        Ok(Some(Envelope::Response(id, response))) => {
                            let waiter = pending.lock().remove(&id);
                            if let Some(waiter) = waiter {
                                waiter.reply.deliver(Ok(response));
                            }
                        }
                        Ok(Some(Envelope::Request(..))) => {
                            tracing::debug!(%to, "unexpected request on an outbound cluster connection");
                        }
                        Ok(None) | Err(_) => return,
                    }
                }
            })
        };
        let mut out = Vec::new();
        let mut batch = Vec::new();
        loop {
            tokio::select! {
                next = outgoing.recv() => {
                    let Some(first) = next else { break };
                    let expected = self.expected(to);
                    batch.extend(self.encode_for(to, &peer, expected, first, &mut out, pending));
                    while out.len() < WRITE_BATCH_BYTES_MAX
                        && let Ok(more) = outgoing.try_recv()
                    {
                        batch.extend(self.encode_for(to, &peer, expected, more, &mut out, pending));
                    }
                    if out.is_empty() {
                        continue;
                    }
                    // From here the peer may receive any part of the batch, even if the
                    // write fails.
                    {
                        let mut pending = pending.lock();
                        for id in batch.drain(..) {
                            if let Some(waiter) = pending.get_mut(&id) {
                                waiter.written = true;
                            }
                        }
                    }
                    self.inner.sent_bytes.fetch_add(out.len() as u64, Ordering::Relaxed);
                    if writer.write_all(&out).await.is_err() || writer.flush().await.is_err() {
                        break;
                    }
                    out.clear();
                }
                _ = &mut read_ended => break,
            }
        }
        responses.abort();
    }

    /// Appends `outgoing` to `out` and returns its id — unless it is meant for a member (a
    /// request about the data, see [`fenced`]) and `peer` is another incarnation than the
    /// one the agreed members name at this address: a process restarted there, not admitted
    /// yet, gets nothing meant for its predecessor, and the waiter sees the member as
    /// unreachable (the request was not sent).
    fn encode_for(
        &self,
        to: SocketAddr,
        peer: &Identity,
        expected: Option<u64>,
        outgoing: Outgoing,
        out: &mut Vec<u8>,
        pending: &Pending,
    ) -> Option<u64> {
        if fenced(&outgoing.request)
            && expected.is_some_and(|expected| expected != peer.incarnation)
        {
            tracing::debug!(peer = %peer.name, "request for a previous incarnation not sent");
            let waiter = pending.lock().remove(&outgoing.id);
            if let Some(waiter) = waiter {
                waiter.fail(to);
            }
            return None;
        }
        wire::encode(&Envelope::Request(outgoing.id, outgoing.request), out);
        Some(outgoing.id)
    }

    /// Drops a failed connection: each of its waiters learns whether its request was sent.
    fn forget(&self, to: SocketAddr, pending: &Pending) {
        {
            let mut peers = self.inner.peers.lock();
            if peers
                .get(&to)
                .is_some_and(|peer| Arc::ptr_eq(&peer.pending, pending))
            {
                peers.remove(&to);
            }
        }
        let waiters: Vec<Waiter> = pending.lock().drain().map(|(_, waiter)| waiter).collect();
        for waiter in waiters {
            waiter.fail(to);
        }
    }
}

/// Whether `request` is about the data a member holds, and so only for the incarnation the
/// agreed members name (introductions, consensus and membership requests go to whoever
/// listens at an address: that is how a restarted process is found and admitted; consensus
/// messages name their recipient themselves).
fn fenced(request: &Request) -> bool {
    !matches!(
        request,
        Request::Hello(_)
            | Request::Raft(..)
            | Request::Propose(_)
            | Request::Leave { .. }
            | Request::TopologyId { .. }
    )
}

/// A connection, plaintext or TLS, and how it splits into a half that reads and one that
/// writes (a socket's halves need no lock; a TLS session's share one).
trait Link: AsyncRead + AsyncWrite + Unpin + Send + 'static {
    type Reader: AsyncRead + Unpin + Send + 'static;
    type Writer: AsyncWrite + Unpin + Send + 'static;

    fn halves(self) -> (Self::Reader, Self::Writer);
}

impl Link for TcpStream {
    type Reader = tokio::net::tcp::OwnedReadHalf;
    type Writer = tokio::net::tcp::OwnedWriteHalf;

    fn halves(self) -> (Self::Reader, Self::Writer) {
        self.into_split()
    }
}

impl Link for tokio_rustls::server::TlsStream<TcpStream> {
    type Reader = tokio::io::ReadHalf<Self>;
    type Writer = tokio::io::WriteHalf<Self>;

    fn halves(self) -> (Self::Reader, Self::Writer) {
        tokio::io::split(self)
    }
}

impl Link for tokio_rustls::client::TlsStream<TcpStream> {
    type Reader = tokio::io::ReadHalf<Self>;
    type Writer = tokio::io::WriteHalf<Self>;

    fn halves(self) -> (Self::Reader, Self::Writer) {
        tokio::io::split(self)
    }
}

/// Whether `stream`'s two ends are one address: a connection to a port nobody listens on
/// that the kernel happened to make from that same port (TCP simultaneous open).
fn is_self_connected(stream: &TcpStream) -> bool {
    matches!(
        (stream.local_addr(), stream.peer_addr()),
        (Ok(local), Ok(peer)) if local == peer
    )
}

/// The acceptor's side of the handshake: challenge, check the answer, reply.
async fn accept_handshake(
    stream: &mut (impl AsyncRead + AsyncWrite + Unpin),
    me: &Identity,
    secret: &Secret,
) -> Result<Identity, HandshakeFailure> {
    let mine = handshake::nonce();
    stream.write_all(&handshake::challenge(&mine)).await?;
    stream.flush().await?;
    let mut theirs = [0; handshake::NONCE_BYTES];
    stream.read_exact(&mut theirs).await?;
    let (identity, code) = read_proof(stream).await?;
    let peer = handshake::check_answer(secret, &mine, &theirs, &identity, &code)?;
    stream
        .write_all(&handshake::reply(secret, &theirs, &mine, me))
        .await?;
    stream.flush().await?;
    Ok(peer)
}

/// The opener's side of the handshake: read the challenge, answer, check the reply.
async fn open_handshake(
    stream: &mut (impl AsyncRead + AsyncWrite + Unpin),
    me: &Identity,
    secret: &Secret,
) -> Result<Identity, HandshakeFailure> {
    let mut challenge = [0; handshake::CHALLENGE_BYTES];
    stream.read_exact(&mut challenge).await?;
    let theirs = handshake::read_challenge(&challenge)?;
    let mine = handshake::nonce();
    stream
        .write_all(&handshake::answer(secret, &theirs, &mine, me))
        .await?;
    stream.flush().await?;
    let (identity, code) = read_proof(stream).await?;
    Ok(handshake::check_reply(
        secret, &mine, &theirs, &identity, &code,
    )?)
}

/// Reads an identity (its length checked first) and the code that proves it.
async fn read_proof(
    stream: &mut (impl AsyncRead + Unpin),
) -> Result<(Vec<u8>, [u8; handshake::CODE_BYTES]), HandshakeFailure> {
    let mut len = [0; 2];
    stream.read_exact(&mut len).await?;
    let mut identity = vec![0; handshake::identity_len(len)?];
    stream.read_exact(&mut identity).await?;
    let mut code = [0; handshake::CODE_BYTES];
    stream.read_exact(&mut code).await?;
    Ok((identity, code))
}

/// The next frame if `buffer` holds all of it (taken out of `buffer`), `None` if not.
fn buffered_frame(
    buffer: &mut BytesMut,
    limit: usize,
) -> Result<Option<Envelope>, wire::FrameError> {
    let Some(len) = wire::body_len_within(buffer, limit)? else {
        return Ok(None);
    };
    let end = wire::FRAME_HEADER_BYTES + len;
    if buffer.len() < end {
        return Ok(None);
    }
    let envelope = wire::decode(&buffer[wire::FRAME_HEADER_BYTES..end]);
    buffer.advance(end);
    envelope.map(Some)
}

/// Reads the next frame: `None` at the end of the stream. A frame's memory is taken as its
/// bytes arrive, not as its header announces them. Cancelling it loses nothing: what was
/// read stays in `buffer`.
async fn read_frame(
    reader: &mut (impl AsyncReadExt + Unpin),
    buffer: &mut BytesMut,
    limit: usize,
    received: &AtomicU64,
) -> Result<Option<Envelope>, wire::FrameError> {
    loop {
        if let Some(envelope) = buffered_frame(buffer, limit)? {
            return Ok(Some(envelope));
        }
        match wire::body_len_within(buffer, limit)? {
            Some(len) => {
                let end = wire::FRAME_HEADER_BYTES + len;
                buffer.reserve((end - buffer.len()).min(READ_CHUNK));
            }
            None => buffer.reserve(READ_CHUNK),
        }
        match reader.read_buf(buffer).await {
            Ok(0) | Err(_) => return Ok(None),
            Ok(n) => {
                received.fetch_add(n as u64, Ordering::Relaxed);
            }
        }
    }
}

/// Handles one frame that arrived on an inbound connection: replicated changes are applied
/// now and their answer appended to `out`; any other request runs concurrently and answers
/// through `replies`.
fn take_request(
    envelope: Envelope,
    from: SocketAddr,
    peer: &Identity,
    handler: &Arc<dyn Handler>,
    replies: &mpsc::UnboundedSender<(u64, Response)>,
    out: &mut Vec<u8>,
    counts: &Arc<Inner>,
) {
    if matches!(envelope, Envelope::Request(..)) {
        counts.received.fetch_add(1, Ordering::AcqRel);
    }
    match envelope {
        Envelope::Request(
            id,
            Request::Replicate {
                stream,
                restart,
                replicas,
            },
        ) => {
            let response = handler.apply(peer, stream, restart, replicas);
            wire::encode(&Envelope::Response(id, response), out);
        }
        Envelope::Request(id, request) => {
            let replies = replies.clone();
            let handling = handler.handle(peer, request);
            counts.handling.fetch_add(1, Ordering::AcqRel);
            let counts = Arc::clone(counts);
            tokio::spawn(async move {
                let response = handling.await;
                let _ = replies.send((id, response));
                counts.handling.fetch_sub(1, Ordering::AcqRel);
            });
        }
        Envelope::Response(..) => {
            tracing::debug!(%from, "unexpected response on an inbound cluster connection");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a connection the kernel joined to itself (a connect to a port nobody listens
    // on, made from that same port) is recognised, so the transport drops it at once instead
    // of holding the port a restarting member must bind.
    #[tokio::test]
    async fn a_connection_joined_to_itself_is_recognised() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .map(|address| address.port())
            .unwrap_or_else(|error| panic!("{error}"));
        let address = SocketAddr::from(([127, 0, 0, 1], port));
        let socket = tokio::net::TcpSocket::new_v4().unwrap_or_else(|error| panic!("{error}"));
        socket
            .bind(address)
            .unwrap_or_else(|error| panic!("{error}"));
        let stream = socket
            .connect(address)
            .await
            .unwrap_or_else(|error| panic!("{error}"));
        assert!(is_self_connected(&stream));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let other = TcpStream::connect(listener.local_addr().unwrap_or_else(|e| panic!("{e}")))
            .await
            .unwrap_or_else(|error| panic!("{error}"));
        assert!(!is_self_connected(&other));
    }

    const SECRET: &[u8] = b"transport-test-secret";
    /// Long enough for loopback on a loaded machine; the tests end well before it unless
    /// the transport is broken.
    const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

    fn identity(name: &str, incarnation: u64) -> Identity {
        Identity {
            name: name.to_owned(),
            incarnation,
        }
    }

    fn transport() -> Transport {
        Transport::new(
            identity("sender", 1),
            Secret::new(SECRET.to_vec()),
            Limits::default(),
            None,
        )
    }

    /// A request about the data (fenced: only for the incarnation expected).
    fn clear() -> Request {
        Request::Clear {
            cache: "c".to_owned(),
        }
    }

    async fn listener() -> (TcpListener, SocketAddr) {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        let address = listener.local_addr().expect("a local address");
        (listener, address)
    }

    /// Accepts one connection as the process `me` and returns it proven.
    async fn accept_proven(listener: &TcpListener, me: &Identity) -> TcpStream {
        let (mut stream, _) = listener.accept().await.expect("a connection");
        accept_handshake(&mut stream, me, &Secret::new(SECRET.to_vec()))
            .await
            .expect("the sender proves itself");
        stream
    }

    // Proves requests to an address nothing listens at fail as not sent (so a write may be
    // sent again), every request queued behind the failed connection included.
    #[tokio::test]
    async fn requests_to_a_closed_port_are_not_sent() {
        let (listener, address) = listener().await;
        drop(listener);
        let transport = transport();
        let answers: Vec<Answer> = (0..3).map(|_| transport.send(address, clear())).collect();
        for answer in answers {
            let error = tokio::time::timeout(ANSWER_TIMEOUT, answer)
                .await
                .expect("an answer in time")
                .expect_err("no one listens");
            assert_eq!(error, TransportError::Unreachable(address));
            assert!(error.not_sent());
        }
    }

    // Proves requests queued while the connection's handshake fails are not sent.
    #[tokio::test]
    async fn requests_whose_handshake_fails_are_not_sent() {
        let (listener, address) = listener().await;
        let closing = tokio::spawn(async move {
            // Not a node: accepts, then closes without a challenge.
            let (stream, _) = listener.accept().await.expect("a connection");
            drop(stream);
        });
        let transport = transport();
        let answers: Vec<Answer> = (0..3).map(|_| transport.send(address, clear())).collect();
        for answer in answers {
            let error = tokio::time::timeout(ANSWER_TIMEOUT, answer)
                .await
                .expect("an answer in time")
                .expect_err("the handshake failed");
            assert_eq!(error, TransportError::Unreachable(address));
        }
        closing.await.expect("the listener task");
    }

    // Proves a request the peer received before the connection broke fails as lost — the
    // peer may have run it, so a write must not be sent again — and that the next request
    // opens a new connection.
    #[tokio::test]
    async fn a_request_written_before_the_connection_broke_may_have_run() {
        let (listener, address) = listener().await;
        let peer = tokio::spawn(async move {
            let mut stream = accept_proven(&listener, &identity("peer", 7)).await;
            let mut buffer = BytesMut::new();
            let received = AtomicU64::new(0);
            let first = read_frame(&mut stream, &mut buffer, wire::FRAME_BYTES_MAX, &received)
                .await
                .expect("a frame");
            // Closes without answering, as a process killed after reading the request.
            drop(stream);
            let mut stream = accept_proven(&listener, &identity("peer", 7)).await;
            let second = read_frame(&mut stream, &mut buffer, wire::FRAME_BYTES_MAX, &received)
                .await
                .expect("a frame");
            if let Some(Envelope::Request(id, _)) = &second {
                let mut out = Vec::new();
                wire::encode(&Envelope::Response(*id, Response::Ok), &mut out);
                stream.write_all(&out).await.expect("answer");
            }
            (first, second)
        });
        let transport = transport();
        let error = transport
            .call(address, clear(), ANSWER_TIMEOUT)
            .await
            .expect_err("the connection broke");
        assert_eq!(error, TransportError::ConnectionLost(address));
        assert!(!error.not_sent());
        assert_eq!(
            transport.call(address, clear(), ANSWER_TIMEOUT).await,
            Ok(Response::Ok)
        );
        let (first, second) = peer.await.expect("the peer task");
        assert!(matches!(
            first,
            Some(Envelope::Request(_, Request::Clear { .. }))
        ));
        assert!(matches!(
            second,
            Some(Envelope::Request(_, Request::Clear { .. }))
        ));
    }

    // Proves a request the peer never answers times out, as one whose outcome is unknown.
    #[tokio::test]
    async fn a_request_not_answered_in_time_may_have_run() {
        let (listener, address) = listener().await;
        let peer = tokio::spawn(async move {
            let mut stream = accept_proven(&listener, &identity("peer", 7)).await;
            // Reads everything, answers nothing, until the sender closes.
            let mut sink = Vec::new();
            let _ = stream.read_to_end(&mut sink).await;
        });
        let transport = transport();
        let error = transport
            .call(address, clear(), Duration::from_millis(200))
            .await
            .expect_err("no answer");
        assert_eq!(error, TransportError::Timeout(address));
        assert!(!error.not_sent());
        drop(transport);
        peer.abort();
    }

    // Proves a request about the data withheld from another incarnation than the one
    // expected at the address fails as not sent.
    #[tokio::test]
    async fn a_request_withheld_from_another_incarnation_is_not_sent() {
        let (listener, address) = listener().await;
        let peer = tokio::spawn(async move {
            let mut stream = accept_proven(&listener, &identity("peer", 8)).await;
            let mut sink = Vec::new();
            let _ = stream.read_to_end(&mut sink).await;
            sink
        });
        let transport = transport();
        transport.expect([(address, 7)]);
        let error = transport
            .call(address, clear(), ANSWER_TIMEOUT)
            .await
            .expect_err("withheld");
        assert_eq!(error, TransportError::Unreachable(address));
        drop(transport);
        peer.abort();
    }

    /// A peer that applies replicated batches at once (recording their first sequence
    /// numbers) and answers every other request after `slow`.
    struct Recorder {
        applied: Mutex<Vec<u64>>,
        slow: Duration,
    }

    impl Handler for Recorder {
        fn handle(&self, _from: &Identity, _request: Request) -> BoxFuture<Response> {
            let slow = self.slow;
            Box::pin(async move {
                tokio::time::sleep(slow).await;
                Response::Ok
            })
        }

        fn apply(
            &self,
            _from: &Identity,
            _stream: u64,
            _restart: bool,
            replicas: Vec<(u64, Arc<wire::Replica>)>,
        ) -> Response {
            self.applied
                .lock()
                .extend(replicas.first().map(|(sequence, _)| *sequence));
            Response::Applied
        }
    }

    fn batch(sequence: u64) -> Request {
        Request::Replicate {
            stream: 1,
            restart: sequence == 1,
            replicas: vec![(
                sequence,
                Arc::new(wire::Replica {
                    cache: "c".into(),
                    segment: 0,
                    key: sequence.to_be_bytes().to_vec(),
                    entry: None,
                }),
            )],
        }
    }

    // Proves replicated batches are applied and answered in the order sent, not held up
    // behind a slow request sent before them on the same connection, and that `send_then`
    // hands each outcome to its function: the answer, or `Unreachable` when nothing listens.
    // (That the receiver writes these answers without a writer task is not observable here;
    // the order and the not-waiting are what callers rely on.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn replicated_batches_are_answered_in_order_past_slow_requests() {
        let (serving_at, address) = listener().await;
        let recorder = Arc::new(Recorder {
            applied: Mutex::new(Vec::new()),
            slow: Duration::from_secs(5),
        });
        let receiver = Transport::new(
            identity("peer", 7),
            Secret::new(SECRET.to_vec()),
            Limits::default(),
            None,
        );
        let (_stop, shutdown) = watch::channel(false);
        let serving = receiver.serve(
            serving_at,
            Arc::clone(&recorder) as Arc<dyn Handler>,
            shutdown,
        );
        let transport = transport();
        let slow = transport.send(address, clear());
        let (outcomes, mut answered) = mpsc::unbounded_channel();
        for sequence in 1..=5_u64 {
            let outcomes = outcomes.clone();
            transport.send_then(address, batch(sequence), move |outcome| {
                let _ = outcomes.send((sequence, outcome));
            });
        }
        for expected in 1..=5_u64 {
            let (sequence, outcome) = tokio::time::timeout(ANSWER_TIMEOUT, answered.recv())
                .await
                .expect("an answer in time")
                .expect("an outcome");
            assert_eq!(sequence, expected, "answers come in the order sent");
            assert_eq!(outcome, Ok(Response::Applied));
        }
        // Every batch was answered while the slow request was still running.
        assert!(tokio::time::timeout(Duration::ZERO, slow).await.is_err());
        assert_eq!(*recorder.applied.lock(), vec![1, 2, 3, 4, 5]);

        let (closed, nowhere) = listener().await;
        drop(closed);
        transport.send_then(nowhere, batch(1), move |outcome| {
            let _ = outcomes.send((0, outcome));
        });
        let (_, outcome) = tokio::time::timeout(ANSWER_TIMEOUT, answered.recv())
            .await
            .expect("an answer in time")
            .expect("an outcome");
        assert_eq!(outcome, Err(TransportError::Unreachable(nowhere)));
        serving.abort();
    }

    /// Member certificates (serverAuth and clientAuth) of a CA, as files in `dir`; returns
    /// the member's TLS.
    fn member_tls(
        dir: &std::path::Path,
        name: &str,
        ca: &rcgen::CertifiedIssuer<'static, rcgen::KeyPair>,
    ) -> ClusterTls {
        let mut params =
            rcgen::CertificateParams::new(vec![name.to_owned()]).unwrap_or_else(|e| panic!("{e}"));
        params.extended_key_usages = vec![
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
            rcgen::ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let key = rcgen::KeyPair::generate().unwrap_or_else(|e| panic!("{e}"));
        let certificate = params.signed_by(&key, ca).unwrap_or_else(|e| panic!("{e}"));
        let write = |file: &str, text: String| {
            let path = dir.join(format!("{name}-{file}"));
            std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
            path
        };
        let certificate = write("cert.pem", certificate.pem());
        let key = write("key.pem", key.serialize_pem());
        let ca = write("ca.pem", ca.pem());
        ClusterTls::from_pem_files(&certificate, &key, &ca).unwrap_or_else(|e| panic!("{e}"))
    }

    fn ca(name: &str) -> rcgen::CertifiedIssuer<'static, rcgen::KeyPair> {
        let mut params =
            rcgen::CertificateParams::new(Vec::<String>::new()).unwrap_or_else(|e| panic!("{e}"));
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let key = rcgen::KeyPair::generate().unwrap_or_else(|e| panic!("{e}"));
        rcgen::CertifiedIssuer::self_signed(params, key).unwrap_or_else(|e| panic!("{e}"))
    }

    // Proves members with certificates of the cluster's CA talk over mutual TLS (a request
    // and replicated batches are answered; the certificate's name need not be the address),
    // while a member whose certificate another CA signed, and a member without TLS, are
    // refused before anything is read from them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn members_talk_over_mutual_tls_and_strangers_are_refused() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let cluster_ca = ca("cluster CA");
        let (serving_at, address) = listener().await;
        let recorder = Arc::new(Recorder {
            applied: Mutex::new(Vec::new()),
            slow: Duration::from_millis(1),
        });
        let receiver = Transport::new(
            identity("peer", 7),
            Secret::new(SECRET.to_vec()),
            Limits::default(),
            Some(member_tls(dir.path(), "node-b.example", &cluster_ca)),
        );
        let (_stop, shutdown) = watch::channel(false);
        let serving = receiver.serve(
            serving_at,
            Arc::clone(&recorder) as Arc<dyn Handler>,
            shutdown,
        );
        let member = Transport::new(
            identity("sender", 1),
            Secret::new(SECRET.to_vec()),
            Limits::default(),
            Some(member_tls(dir.path(), "node-a.example", &cluster_ca)),
        );
        let answer = tokio::time::timeout(ANSWER_TIMEOUT, member.send(address, clear()))
            .await
            .expect("an answer in time");
        assert!(answer.is_ok(), "{answer:?}");
        for sequence in 1..=3_u64 {
            let answer =
                tokio::time::timeout(ANSWER_TIMEOUT, member.send(address, batch(sequence)))
                    .await
                    .expect("an answer in time");
            assert_eq!(answer, Ok(Response::Applied));
        }
        assert_eq!(*recorder.applied.lock(), vec![1, 2, 3]);

        let stranger = Transport::new(
            identity("stranger", 2),
            Secret::new(SECRET.to_vec()),
            Limits::default(),
            Some(member_tls(dir.path(), "node-x.example", &ca("another CA"))),
        );
        let plaintext = transport();
        for outsider in [stranger, plaintext] {
            let answer = tokio::time::timeout(ANSWER_TIMEOUT, outsider.send(address, batch(9)))
                .await
                .expect("an answer in time");
            assert!(answer.is_err(), "an outsider was answered: {answer:?}");
        }
        assert_eq!(
            *recorder.applied.lock(),
            vec![1, 2, 3],
            "nothing from outsiders applied"
        );
        serving.abort();
    }
}
