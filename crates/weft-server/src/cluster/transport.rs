//! Node-to-node messaging over TCP: one outbound connection per peer, requests tagged with
//! an id and matched to their responses, frames from `weft_cluster::wire`.
//!
//! Requests to one peer leave in the order they were sent, over one connection, and the
//! receiver applies replicated changes in that order before reading the next frame: that is
//! what keeps a key's changes in the primary's order on every backup. Everything else a
//! node is asked runs concurrently.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};
use weft_cluster::wire::{self, Envelope, Request, Response};

use weft_core::persistence::BoxFuture;

/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Bytes read at a time.
const READ_CHUNK: usize = 64 * 1024;

/// Why a request got no response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    /// The peer could not be reached, or the connection broke before it answered.
    #[error("node {0} unreachable")]
    Unreachable(SocketAddr),
    /// No response in time.
    #[error("node {0} did not answer in time")]
    Timeout(SocketAddr),
}

/// What a node does with the requests it receives.
pub trait Handler: Send + Sync + 'static {
    /// Answers a request. Called in the order requests arrive on a connection; what it does
    /// before returning its future happens in that order, the rest concurrently.
    fn handle(&self, from: SocketAddr, request: Request) -> BoxFuture<Response>;

    /// Applies replicated changes, in the order they arrive (called on the connection's
    /// reader, before the next frame is read).
    fn apply(&self, replicas: Vec<wire::Replica>) -> Response;
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Response>>>>;

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
    peers: Mutex<HashMap<SocketAddr, Peer>>,
    next_id: AtomicU64,
    sent_bytes: AtomicU64,
    received_bytes: AtomicU64,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("peers", &self.inner.peers.lock().len())
            .finish()
    }
}

impl Transport {
    /// A transport with no connections yet.
    #[must_use]
    pub fn new() -> Self {
        Self {
            inner: Arc::new(Inner {
                peers: Mutex::new(HashMap::new()),
                next_id: AtomicU64::new(1),
                sent_bytes: AtomicU64::new(0),
                received_bytes: AtomicU64::new(0),
            }),
        }
    }

    /// Bytes sent and received over cluster connections.
    #[must_use]
    pub fn bytes(&self) -> (u64, u64) {
        (
            self.inner.sent_bytes.load(Ordering::Relaxed),
            self.inner.received_bytes.load(Ordering::Relaxed),
        )
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
                            let _ = stream.set_nodelay(true);
                            tokio::spawn(transport.clone().serve_connection(stream, from, Arc::clone(&handler)));
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

    async fn serve_connection(
        self,
        stream: TcpStream,
        from: SocketAddr,
        handler: Arc<dyn Handler>,
    ) {
        let (mut reader, mut writer) = stream.into_split();
        let (replies, mut outbox) = mpsc::unbounded_channel::<(u64, Response)>();
        let inner = Arc::clone(&self.inner);
        let writing = tokio::spawn(async move {
            let mut out = Vec::new();
            while let Some((id, response)) = outbox.recv().await {
                wire::encode(&Envelope::Response(id, response), &mut out);
                while let Ok((id, response)) = outbox.try_recv() {
                    wire::encode(&Envelope::Response(id, response), &mut out);
                }
                inner
                    .sent_bytes
                    .fetch_add(out.len() as u64, Ordering::Relaxed);
                if writer.write_all(&out).await.is_err() {
                    return;
                }
                out.clear();
            }
        });
        let mut buffer = BytesMut::with_capacity(READ_CHUNK);
        loop {
            match read_frame(&mut reader, &mut buffer, &self.inner.received_bytes).await {
                Ok(Some(Envelope::Request(id, Request::Replicate(replicas)))) => {
                    let response = handler.apply(replicas);
                    if replies.send((id, response)).is_err() {
                        break;
                    }
                }
                Ok(Some(Envelope::Request(id, request))) => {
                    let replies = replies.clone();
                    let handling = handler.handle(from, request);
                    tokio::spawn(async move {
                        let response = handling.await;
                        let _ = replies.send((id, response));
                    });
                }
                Ok(Some(Envelope::Response(..))) => {
                    tracing::debug!(%from, "unexpected response on an inbound cluster connection");
                }
                Ok(None) => break,
                Err(error) => {
                    tracing::debug!(%from, %error, "closing cluster connection");
                    break;
                }
            }
        }
        drop(replies);
        let _ = writing.await;
    }

    /// Sends `request` to `to` and waits up to `timeout` for the response.
    ///
    /// # Errors
    /// [`TransportError`] when the peer cannot be reached or does not answer in time.
    pub async fn call(
        &self,
        to: SocketAddr,
        request: Request,
        timeout: Duration,
    ) -> Result<Response, TransportError> {
        let receiver = self.send(to, request);
        match tokio::time::timeout(timeout, receiver).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(_)) => Err(TransportError::Unreachable(to)),
            Err(_) => Err(TransportError::Timeout(to)),
        }
    }

    /// Queues `request` for `to` (after everything queued for it before) and returns where
    /// its response will arrive; the sender is dropped if the connection fails first.
    pub fn send(&self, to: SocketAddr, request: Request) -> oneshot::Receiver<Response> {
        let (sender, receiver) = oneshot::channel();
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let peer = self.peer(to);
        peer.pending.lock().insert(id, sender);
        if peer.queue.send(Outgoing { id, request }).is_err() {
            peer.pending.lock().remove(&id);
        }
        receiver
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
    /// waiters. When the connection fails, every waiter is dropped (they see the peer as
    /// unreachable) and the next request opens a new connection.
    async fn run_peer(
        self,
        to: SocketAddr,
        mut outgoing: mpsc::UnboundedReceiver<Outgoing>,
        pending: Pending,
    ) {
        let connected = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(to)).await;
        let stream = match connected {
            Ok(Ok(stream)) => stream,
            Ok(Err(error)) => {
                tracing::debug!(%to, %error, "cluster connection failed");
                self.forget(to, &pending);
                return;
            }
            Err(_) => {
                tracing::debug!(%to, "cluster connection timed out");
                self.forget(to, &pending);
                return;
            }
        };
        let _ = stream.set_nodelay(true);
        let (mut reader, mut writer) = stream.into_split();
        // Dropped when the response reader ends (the connection broke).
        let (reading, mut read_ended) = oneshot::channel::<()>();
        let responses = {
            let pending = Arc::clone(&pending);
            let received = Arc::clone(&self.inner);
            tokio::spawn(async move {
                let _reading = reading;
                let mut buffer = BytesMut::with_capacity(READ_CHUNK);
                loop {
                    match read_frame(&mut reader, &mut buffer, &received.received_bytes).await {
                        Ok(Some(Envelope::Response(id, response))) => {
                            if let Some(waiter) = pending.lock().remove(&id) {
                                let _ = waiter.send(response);
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
        loop {
            tokio::select! {
                next = outgoing.recv() => {
                    let Some(first) = next else { break };
                    wire::encode(&Envelope::Request(first.id, first.request), &mut out);
                    while out.len() < (1 << 20)
                        && let Ok(more) = outgoing.try_recv()
                    {
                        wire::encode(&Envelope::Request(more.id, more.request), &mut out);
                    }
                    self.inner.sent_bytes.fetch_add(out.len() as u64, Ordering::Relaxed);
                    if writer.write_all(&out).await.is_err() {
                        break;
                    }
                    out.clear();
                }
                _ = &mut read_ended => break,
            }
        }
        responses.abort();
        self.forget(to, &pending);
    }

    /// Drops a failed connection: its waiters learn the peer is unreachable.
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
        pending.lock().clear();
    }
}

impl Default for Transport {
    fn default() -> Self {
        Self::new()
    }
}

/// Reads the next frame: `None` at the end of the stream.
async fn read_frame(
    reader: &mut (impl AsyncReadExt + Unpin),
    buffer: &mut BytesMut,
    received: &AtomicU64,
) -> Result<Option<Envelope>, wire::FrameError> {
    loop {
        if let Some(len) = wire::body_len(buffer)? {
            let end = wire::FRAME_HEADER_BYTES + len;
            if buffer.len() >= end {
                let envelope = wire::decode(&buffer[wire::FRAME_HEADER_BYTES..end]);
                buffer.advance(end);
                return envelope.map(Some);
            }
            buffer.reserve(end - buffer.len());
        } else {
            buffer.reserve(READ_CHUNK);
        }
        match reader.read_buf(buffer).await {
            Ok(0) | Err(_) => return Ok(None),
            Ok(n) => {
                received.fetch_add(n as u64, Ordering::Relaxed);
            }
        }
    }
}
