//! One TCP connection to one server, shared by many requests at once: each request gets a
//! message id, is written whole under the writer's lock, and waits for the response with that
//! id, which a reader task matches (Hot Rod servers may answer out of order). Listener events
//! arriving on the connection go to its event handler, in the order received.
//!
//! A connection that breaks (the server closed it, a read or write failed, a response was
//! malformed) fails every request waiting on it and is never used again: the pool opens
//! another.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::time::Duration;

use bytes::BytesMut;
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::{Semaphore, oneshot, watch};
use tokio::task::JoinHandle;
use weft_hotrod::{Body, Event, Reply, ReplyDecoder, Request, RequestHeader};

use crate::error::{Error, Result};

/// Bytes read from the socket at once at least.
const READ_CHUNK_BYTES: usize = 16 * 1024;

/// What to do with each listener event received on a connection. Called on the
/// connection's reader task, before any response read after the event is handed over.
pub(crate) type EventHandler = Arc<dyn Fn(Event) + Send + Sync>;

/// How a connection is opened.
#[derive(Clone)]
pub(crate) struct ConnectionSettings {
    /// Protocol version to ask for; the server's PING may lower it.
    pub(crate) version: u8,
    /// Intelligence sent with every request (decides the topology layout).
    pub(crate) intelligence: u8,
    pub(crate) connect_timeout: Duration,
    pub(crate) request_timeout: Duration,
    pub(crate) in_flight_max: usize,
}

impl std::fmt::Debug for ConnectionSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionSettings")
            .field("version", &self.version)
            .field("intelligence", &self.intelligence)
            .finish_non_exhaustive()
    }
}

/// State the reader task shares with the connection.
struct Shared {
    address: SocketAddr,
    /// Requests waiting for their response, by message id.
    pending: Mutex<HashMap<u64, oneshot::Sender<Reply>>>,
    /// The version responses are read at (changed only by the handshake, with nothing else
    /// in flight).
    version: AtomicU8,
    /// `Some(reason)` once the connection broke.
    closed: watch::Sender<Option<String>>,
    /// Whether it broke because the server sent something unreadable.
    malformed: AtomicBool,
    on_event: Option<EventHandler>,
}

impl Shared {
    fn close(&self, reason: &str) {
        self.closed.send_if_modified(|closed| {
            if closed.is_some() {
                return false;
            }
            *closed = Some(reason.to_owned());
            true
        });
        // Dropping the senders wakes every waiter, which then reads the reason.
        self.pending.lock().clear();
    }

    fn close_reason(&self) -> String {
        self.closed
            .borrow()
            .clone()
            .unwrap_or_else(|| "connection closed".to_owned())
    }
}

/// A multiplexed connection to one server.
pub(crate) struct Connection {
    shared: Arc<Shared>,
    writer: tokio::sync::Mutex<OwnedWriteHalf>,
    permits: Semaphore,
    next_id: AtomicU64,
    settings: ConnectionSettings,
    /// What the server's PING said when the connection opened.
    server_version: Option<u8>,
    reader: JoinHandle<()>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("address", &self.shared.address)
            .field("version", &self.version())
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Connection {
    /// Connects to `address` and shakes hands: a PING that tells the server's version, of
    /// which the lower of it and ours is spoken from then on. Events received go to
    /// `on_event`.
    ///
    /// # Errors
    /// [`Error::Connect`] if the connection or the PING fails or takes longer than the
    /// connect timeout.
    pub(crate) async fn open(
        address: SocketAddr,
        settings: ConnectionSettings,
        on_event: Option<EventHandler>,
    ) -> Result<Self> {
        let connect_error = |reason: String| Error::Connect { address, reason };
        let stream = tokio::time::timeout(settings.connect_timeout, TcpStream::connect(address))
            .await
            .map_err(|_| {
                connect_error(format!(
                    "not connected within {:?}",
                    settings.connect_timeout
                ))
            })?
            .map_err(|error| connect_error(error.to_string()))?;
        // Requests are small and latency matters more than packet count.
        let _ = stream.set_nodelay(true);
        let (read, write) = stream.into_split();
        let shared = Arc::new(Shared {
            address,
            pending: Mutex::new(HashMap::new()),
            version: AtomicU8::new(settings.version),
            closed: watch::Sender::new(None),
            malformed: AtomicBool::new(false),
            on_event,
        });
        let decoder = ReplyDecoder::new(settings.version, settings.intelligence);
        let reader = tokio::spawn(read_loop(read, Arc::clone(&shared), decoder));
        let mut connection = Self {
            shared,
            writer: tokio::sync::Mutex::new(write),
            permits: Semaphore::new(settings.in_flight_max),
            next_id: AtomicU64::new(1),
            settings,
            server_version: None,
            reader,
        };
        let header = RequestHeader::new(connection.settings.version, 0, "");
        let ping = tokio::time::timeout(
            connection.settings.connect_timeout,
            connection.call(header, &Request::<&[u8]>::Ping),
        )
        .await
        .map_err(|_| connect_error("no answer to the handshake PING".into()))?
        .map_err(|error| connect_error(format!("handshake PING failed: {error}")))?;
        if let Body::Ping(info) = ping.body
            && let Some(server) = info.server_version
        {
            connection.server_version = Some(server);
            let spoken = connection
                .settings
                .version
                .min(server)
                .max(weft_hotrod::VERSION_MIN);
            connection.settings.version = spoken;
            connection.shared.version.store(spoken, Ordering::Release);
        }
        Ok(connection)
    }

    /// The server this connection reaches.
    pub(crate) fn address(&self) -> SocketAddr {
        self.shared.address
    }

    /// The protocol version spoken.
    pub(crate) fn version(&self) -> u8 {
        self.settings.version
    }

    /// The newest version the server said it speaks.
    pub(crate) fn server_version(&self) -> Option<u8> {
        self.server_version
    }

    /// Whether the connection broke.
    pub(crate) fn is_closed(&self) -> bool {
        self.shared.closed.borrow().is_some()
    }

    /// Waits until the connection breaks; the reason.
    pub(crate) async fn closed(&self) -> String {
        let mut closed = self.shared.closed.subscribe();
        let _ = closed.wait_for(Option::is_some).await;
        self.shared.close_reason()
    }

    /// Sends `request` with `header` (its message id and version are set here) and waits for
    /// the response, up to the request timeout.
    ///
    /// # Errors
    /// [`Error::ConnectionLost`] if the connection is or becomes broken,
    /// [`Error::Timeout`] if no response came in time, [`Error::Encode`] if the request
    /// cannot be written.
    pub(crate) async fn call<B: AsRef<[u8]>>(
        &self,
        mut header: RequestHeader,
        request: &Request<B>,
    ) -> Result<Reply> {
        let address = self.shared.address;
        let timeout = self.settings.request_timeout;
        let deadline = tokio::time::Instant::now() + timeout;
        let lost = |shared: &Shared| {
            let reason = shared.close_reason();
            if shared.malformed.load(Ordering::Acquire) {
                Error::Protocol { address, reason }
            } else {
                Error::ConnectionLost { address, reason }
            }
        };
        if self.is_closed() {
            return Err(lost(&self.shared));
        }
        let _permit = tokio::time::timeout_at(deadline, self.permits.acquire())
            .await
            .map_err(|_| Error::Timeout { address, timeout })?
            .map_err(|_| lost(&self.shared))?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        header.message_id = id;
        header.version = self.settings.version;
        let mut frame = BytesMut::new();
        weft_hotrod::encode(&mut frame, &header, request)?;
        let (sender, receiver) = oneshot::channel();
        self.shared.pending.lock().insert(id, sender);
        // The connection may have broken between the check and the insert: its reader no
        // longer clears the map.
        if self.is_closed() {
            self.shared.pending.lock().remove(&id);
            return Err(lost(&self.shared));
        }
        let written = tokio::time::timeout_at(deadline, async {
            let mut writer = self.writer.lock().await;
            writer.write_all(&frame).await
        })
        .await;
        match written {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                self.shared.close(&format!("write failed: {error}"));
                return Err(lost(&self.shared));
            }
            Err(_) => {
                // Part of the frame may be on the wire (or another request's, stuck ahead of
                // it): the stream cannot be trusted again.
                self.shared.pending.lock().remove(&id);
                self.shared.close("a request could not be written in time");
                return Err(Error::Timeout { address, timeout });
            }
        }
        match tokio::time::timeout_at(deadline, receiver).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(_)) => Err(lost(&self.shared)),
            Err(_) => {
                self.shared.pending.lock().remove(&id);
                Err(Error::Timeout { address, timeout })
            }
        }
    }

    /// Breaks the connection: waiting requests fail, the socket closes.
    pub(crate) fn close(&self, reason: &str) {
        self.shared.close(reason);
        self.reader.abort();
    }
}

/// Reads responses until the connection breaks, handing each to its waiting request and
/// each event to the handler.
async fn read_loop(
    mut read: tokio::net::tcp::OwnedReadHalf,
    shared: Arc<Shared>,
    mut decoder: ReplyDecoder,
) {
    let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
    let reason = 'read: loop {
        loop {
            decoder.set_version(shared.version.load(Ordering::Acquire));
            match decoder.decode(&mut buf) {
                Ok(Some(reply)) => dispatch(&shared, reply),
                Ok(None) => break,
                Err(error) => {
                    tracing::debug!(address = %shared.address, %error, "malformed Hot Rod response; closing");
                    shared.malformed.store(true, Ordering::Release);
                    break 'read format!("malformed response: {error}");
                }
            }
        }
        buf.reserve(READ_CHUNK_BYTES);
        match read.read_buf(&mut buf).await {
            Ok(0) => break "closed by the server".to_owned(),
            Ok(_) => {}
            Err(error) => break format!("read failed: {error}"),
        }
    };
    shared.close(&reason);
}

fn dispatch(shared: &Shared, reply: Reply) {
    if let Body::Event(event) = reply.body {
        if let Some(handler) = &shared.on_event {
            handler(event);
        }
        return;
    }
    let waiter = shared.pending.lock().remove(&reply.header.message_id);
    // No waiter: the request timed out; its late answer is dropped.
    if let Some(waiter) = waiter {
        let _ = waiter.send(reply);
    }
}
