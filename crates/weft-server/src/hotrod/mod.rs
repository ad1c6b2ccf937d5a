//! The Hot Rod endpoint: one task per connection decodes every complete request frame in its
//! input buffer, serves each against its cache, and writes the responses with one call.
//!
//! * Requests whose cost grows with the data (put-all and get-all of many entries, bulk
//!   reads, iteration batches, clear, admin tasks, very large values) run on the blocking
//!   pool and answer through the connection's outbound queue, so a slow request does not
//!   stall the requests pipelined behind it. Responses carry the request's message id;
//!   clients match them (the 15.1+ Java client pipelines on one connection).
//! * Client-listener events are encoded on the writer's thread and queued on the
//!   registering connection, interleaved with responses. A client that stops reading until
//!   its queue overflows is disconnected (its near cache is then invalid and the client
//!   clears it on reconnect) rather than buffered without bound.
//! * A malformed frame gets an error response and closes the connection: Hot Rod frames
//!   carry no length, so the stream cannot be resynchronised.

mod admin;
mod iteration;
mod listeners;
mod ops;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use weft_hotrod::response::write_error;
use weft_hotrod::{Decoder, Frame, Limits};

use crate::ServerContext;

pub(crate) use iteration::Iterations;
pub(crate) use listeners::ClientListeners;

/// Responses buffered beyond this are written before decoding further requests.
const OUTPUT_FLUSH_BYTES: usize = 64 * 1024;
/// Buffers that grew beyond this for one big frame are released afterwards.
const BUFFER_KEEP_BYTES: usize = 1 << 20;
const BUFFER_INITIAL_BYTES: usize = 16 * 1024;
/// Messages (responses of offloaded requests, events) queued per connection before the
/// connection is considered stuck.
pub(crate) const OUTBOUND_QUEUE_CAPACITY: usize = 16 * 1024;
/// Frames at least this long are served on the blocking pool.
const LARGE_FRAME_BYTES: usize = 1 << 20;
/// Collections at least this long are served on the blocking pool.
const LARGE_COUNT: usize = 256;

/// Server-wide Hot Rod state: open iterations, registered client listeners, counters.
#[derive(Debug, Default)]
pub(crate) struct HotRodState {
    pub(crate) iterations: Iterations,
    pub(crate) listeners: ClientListeners,
    pub(crate) bytes_read: AtomicU64,
    pub(crate) bytes_written: AtomicU64,
}

/// What every request of one connection needs, shared with its offloaded requests and its
/// listeners.
pub(crate) struct Connection {
    pub(crate) context: Arc<ServerContext>,
    pub(crate) id: u64,
    /// The address the client reached us at (host, port): what the topology advertises.
    pub(crate) advertised: (String, u16),
    pub(crate) outbound: mpsc::Sender<Bytes>,
    /// Set when the outbound queue overflowed: the connection closes.
    pub(crate) overflowed: Arc<AtomicBool>,
}

/// Serves one Hot Rod connection until the client closes it, a frame is malformed, or the
/// server shuts down.
pub async fn serve(
    mut stream: TcpStream,
    prefix: BytesMut,
    peer: SocketAddr,
    context: Arc<ServerContext>,
) {
    let local_addr = stream.local_addr().unwrap_or(context.local_addr);
    let (outbound, mut inbound) = mpsc::channel::<Bytes>(OUTBOUND_QUEUE_CAPACITY);
    let connection = Arc::new(Connection {
        id: context.next_client_id(),
        context: Arc::clone(&context),
        advertised: (local_addr.ip().to_string(), local_addr.port()),
        outbound,
        overflowed: Arc::new(AtomicBool::new(false)),
    });
    let limits = Limits {
        array_bytes_max: context.settings.hotrod_value_bytes_max,
        frame_bytes_max: context.settings.client_input_bytes_max,
        ..Limits::default()
    };
    let mut decoder = Decoder::new(limits);
    let mut input = prefix;
    input.reserve(BUFFER_INITIAL_BYTES);
    let mut output = BytesMut::with_capacity(BUFFER_INITIAL_BYTES);
    let mut shutdown = context.shutdown_signal();
    let reason = loop {
        let mut failed = false;
        loop {
            match decoder.decode(&mut input) {
                Ok(Some(frame)) => {
                    context.total_commands.fetch_add(1, Ordering::Relaxed);
                    dispatch(&connection, frame, &mut output);
                }
                Ok(None) => break,
                Err(error) => {
                    tracing::debug!(%peer, %error, "malformed Hot Rod frame; closing");
                    write_error(&mut output, error.message_id, error.status, &error.reason);
                    failed = true;
                    break;
                }
            }
            if output.len() >= OUTPUT_FLUSH_BYTES
                && flush(&mut stream, &mut output, &context).await.is_err()
            {
                break;
            }
        }
        if flush(&mut stream, &mut output, &context).await.is_err() {
            break "write failed";
        }
        if failed {
            break "malformed frame";
        }
        if connection.overflowed.load(Ordering::Relaxed) {
            tracing::warn!(%peer, "Hot Rod client does not read its events; closing the connection");
            break "outbound queue overflow";
        }
        if input.capacity() > BUFFER_KEEP_BYTES && input.is_empty() {
            input = BytesMut::with_capacity(BUFFER_INITIAL_BYTES);
        }
        let needed = decoder.bytes_needed();
        if needed > input.len() {
            input.reserve(needed - input.len());
        } else if input.capacity() - input.len() < 4096 {
            input.reserve(BUFFER_INITIAL_BYTES);
        }
        tokio::select! {
            biased;
            () = crate::stopped(&mut shutdown) => break "server shutting down",
            message = inbound.recv() => {
                if let Some(message) = message {
                    output.extend_from_slice(&message);
                    while output.len() < OUTPUT_FLUSH_BYTES {
                        match inbound.try_recv() {
                            Ok(message) => output.extend_from_slice(&message),
                            Err(_) => break,
                        }
                    }
                }
            }
            read = stream.read_buf(&mut input) => match read {
                Ok(0) => break "closed by the client",
                Ok(n) => {
                    context.hotrod.bytes_read.fetch_add(n as u64, Ordering::Relaxed);
                }
                Err(_) => break "read failed",
            },
        }
    };
    tracing::debug!(%peer, reason, "Hot Rod connection closed");
    context.hotrod.listeners.remove_connection(connection.id);
    context.hotrod.iterations.remove_connection(connection.id);
    let _ = stream.shutdown().await;
}

async fn flush(
    stream: &mut TcpStream,
    output: &mut BytesMut,
    context: &ServerContext,
) -> std::io::Result<()> {
    if output.is_empty() {
        return Ok(());
    }
    stream.write_all(output).await?;
    context
        .hotrod
        .bytes_written
        .fetch_add(output.len() as u64, Ordering::Relaxed);
    output.clear();
    if output.capacity() > BUFFER_KEEP_BYTES {
        *output = BytesMut::with_capacity(BUFFER_INITIAL_BYTES);
    }
    Ok(())
}

/// Serves `frame` here, or on the blocking pool when its cost grows with its data.
fn dispatch(connection: &Arc<Connection>, frame: Frame, output: &mut BytesMut) {
    if !is_heavy(&frame) {
        ops::process(connection, &frame, output);
        return;
    }
    let connection = Arc::clone(connection);
    tokio::task::spawn_blocking(move || {
        let mut response = BytesMut::new();
        ops::process(&connection, &frame, &mut response);
        if connection
            .outbound
            .blocking_send(response.freeze())
            .is_err()
        {
            tracing::debug!("Hot Rod connection closed before a response was ready");
        }
    });
}

fn is_heavy(frame: &Frame) -> bool {
    use weft_hotrod::Request;
    if frame.data.len() >= LARGE_FRAME_BYTES {
        return true;
    }
    match &frame.request {
        Request::PutAll { entries, .. } => entries.len() >= LARGE_COUNT,
        Request::GetAll { keys } => keys.len() >= LARGE_COUNT,
        Request::BulkGet { .. }
        | Request::BulkGetKeys { .. }
        | Request::IterationNext { .. }
        | Request::Clear
        | Request::Exec { .. } => true,
        _ => false,
    }
}
