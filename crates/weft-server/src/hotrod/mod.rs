//! The Hot Rod endpoint: one task per connection decodes every complete request frame in its
//! input buffer, serves each against its cache, and writes the responses with one call.
//!
//! * Reads whose cost grows with the data (get-all of many keys, bulk reads, iteration
//!   batches) run on the blocking pool and answer through the connection's outbound queue,
//!   so a slow read does not stall the requests pipelined behind it; responses carry the
//!   request's message id and clients match them (the 15.1+ Java client pipelines on one
//!   connection). At most four run at once per connection, responses included until
//!   written. Writes are served in order, so their effects follow the order sent.
//! * Client-listener events are encoded on the writer's thread and queued on the
//!   registering connection, interleaved with responses; events queued before a request is
//!   read are written ahead of its answer, so an answered PING confirms every earlier event
//!   (what a near cache's staleness bound rests on). A client that stops reading until
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

use crate::stream::Conn;
use bytes::{Bytes, BytesMut};
use tokio::io::AsyncReadExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use weft_core::{Durability, collect_durability};
use weft_hotrod::response::write_error;
use weft_hotrod::{Decoder, Frame, Limits};

use crate::ServerContext;
use crate::deadline::RequestDeadline;

pub(crate) use iteration::Iterations;
pub(crate) use listeners::ClientListeners;

/// Responses buffered beyond this are written before decoding further requests.
const OUTPUT_FLUSH_BYTES: usize = 64 * 1024;
/// Messages (responses of offloaded requests, events) queued per connection before the
/// connection is considered stuck.
pub(crate) const OUTBOUND_QUEUE_CAPACITY: usize = 16 * 1024;
/// Collections at least this long are served on the blocking pool.
const LARGE_COUNT: usize = 256;
/// Requests of one connection served on the blocking pool at once, their responses included
/// until written: what bounds the memory a client that pipelines bulk reads and does not read
/// the answers can make the server hold. Further such requests wait (and the connection stops
/// reading) until one is written.
const OFFLOADED_IN_FLIGHT_MAX: usize = 4;
/// Responses of one connection waiting for their writes to replicate (or for the writes in
/// flight that their reads saw) while the connection goes on: more wait with the rest.
const REPLICATING_IN_FLIGHT_MAX: usize = 1024;

/// A message for the connection's writer: a response of an offloaded request (holding its
/// in-flight permit until written) or an event.
pub(crate) struct Outbound {
    pub(crate) bytes: Bytes,
    pub(crate) _permit: Option<OwnedSemaphorePermit>,
}

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
    pub(crate) outbound: mpsc::Sender<Outbound>,
    /// Permits for offloaded requests in flight.
    offloaded: Arc<Semaphore>,
    /// Set when the outbound queue overflowed: the connection closes.
    pub(crate) overflowed: Arc<AtomicBool>,
    /// Permits for responses waiting for replication on their own.
    replicating: Arc<Semaphore>,
    /// Set when a response's writes were not made durable: the connection closes without
    /// acknowledging them.
    undurable: AtomicBool,
    /// Who the client authenticated as (`default` when no authentication is required).
    pub(crate) subject: parking_lot::Mutex<Option<weft_security::Subject>>,
    /// Whether `subject` is set: read by every request.
    pub(crate) authenticated: AtomicBool,
    /// A SASL exchange in progress (AUTH sent, not complete).
    pub(crate) sasl: parking_lot::Mutex<Option<crate::security::SaslExchange>>,
    /// When the AUTH just processed is to be processed again: the throttle deferred its
    /// credentials (the connection loop waits, then runs the same frame).
    pub(crate) auth_wait: parking_lot::Mutex<Option<std::time::Instant>>,
    /// What the connection may authenticate with: TLS (SASL PLAIN and OAUTHBEARER are
    /// offered only then), a client certificate (EXTERNAL).
    pub(crate) offer: crate::security::SaslOffer,
    /// The client's address.
    pub(crate) peer: SocketAddr,
}

/// Serves one Hot Rod connection until the client closes it, a frame is malformed, or the
/// server shuts down.
pub async fn serve(
    mut stream: Conn,
    prefix: BytesMut,
    peer: SocketAddr,
    context: Arc<ServerContext>,
    mut deadline: RequestDeadline,
) {
    let local_addr = stream.local_addr().unwrap_or(context.local_addr);
    let (outbound, mut inbound) = mpsc::channel::<Outbound>(OUTBOUND_QUEUE_CAPACITY);
    let connection = Arc::new(Connection {
        id: context.next_client_id(),
        context: Arc::clone(&context),
        advertised: (local_addr.ip().to_string(), local_addr.port()),
        outbound,
        offloaded: Arc::new(Semaphore::new(OFFLOADED_IN_FLIGHT_MAX)),
        overflowed: Arc::new(AtomicBool::new(false)),
        replicating: Arc::new(Semaphore::new(REPLICATING_IN_FLIGHT_MAX)),
        undurable: AtomicBool::new(false),
        authenticated: AtomicBool::new(context.security.anonymous().is_some()),
        subject: parking_lot::Mutex::new(context.security.anonymous()),
        sasl: parking_lot::Mutex::new(None),
        auth_wait: parking_lot::Mutex::new(None),
        offer: crate::security::SaslOffer {
            tls: stream.is_tls(),
            plain_in_clear: false,
            certificate: context
                .security
                .certificate_user(stream.peer_certificates()),
        },
        peer,
    });
    let limits = Limits {
        array_bytes_max: context.settings.hotrod_value_bytes_max,
        frame_bytes_max: context.settings.client_input_bytes_max,
        ..Limits::default()
    };
    let mut decoder = Decoder::new(limits);
    let mut input = prefix;
    input.reserve(crate::buffers::INITIAL_BYTES);
    let mut output = crate::buffers::new();
    let mut shutdown = context.shutdown_signal();
    // Writes to caches with stores not yet durable; no response leaves before they are.
    let mut unsettled = Durability::default();
    let reason = loop {
        let mut failed = false;
        let mut completed = false;
        // Whatever was queued before the requests just read (listener events, offloaded
        // answers) goes out ahead of their answers: an answered PING then proves to a near
        // cache that every event raised before the PING was sent has reached it (the bounded
        // staleness of `weft-client`'s near cache rests on this). The queue is bounded.
        while let Ok(message) = inbound.try_recv() {
            output.extend_from_slice(&message.bytes);
        }
        loop {
            let decoded = decoder.decode(&mut input);
            completed |= matches!(decoded, Ok(Some(_)));
            match decoded {
                Ok(Some(frame))
                    if !connection.authenticated.load(Ordering::Acquire)
                        && !ops::allowed_unauthenticated(&frame) =>
                {
                    context.total_commands.fetch_add(1, Ordering::Relaxed);
                    ops::refuse_unauthenticated(&connection, &frame, &mut output);
                }
                Ok(Some(frame))
                    if context.security.authorizes()
                        && !ops::authorize(&connection, &frame, &mut output) =>
                {
                    context.total_commands.fetch_add(1, Ordering::Relaxed);
                }
                Ok(Some(frame)) if admin::changes_caches(&connection, &frame) => {
                    context.total_commands.fetch_add(1, Ordering::Relaxed);
                }
                Ok(Some(frame))
                    if context.cluster.is_some()
                        && (ops::cluster_wide(&connection, &frame)
                            || iteration::next_clustered(&connection, &frame)
                            || listeners::add_with_cluster_state(&connection, &frame)
                            || ops::multi_key_clustered(&connection, &frame)) =>
                {
                    context.total_commands.fetch_add(1, Ordering::Relaxed);
                }
                Ok(Some(frame)) if is_heavy(&frame) => {
                    context.total_commands.fetch_add(1, Ordering::Relaxed);
                    let permit = match Arc::clone(&connection.offloaded).try_acquire_owned() {
                        Ok(permit) => permit,
                        Err(_) => {
                            // Every slot is taken: write what is ready, then wait for a slot
                            // while writing the responses that free them.
                            if flush(&mut stream, &mut output, &context, &mut unsettled, peer)
                                .await
                                .is_err()
                            {
                                break;
                            }
                            match wait_for_slot(&connection, &mut inbound, &mut stream, &context)
                                .await
                            {
                                Some(permit) => permit,
                                None => break,
                            }
                        }
                    };
                    offload(&connection, frame, permit);
                }
                Ok(Some(frame))
                    if context.cluster.is_some()
                        && let Some((grid, operation)) = ops::elsewhere(&connection, &frame) =>
                {
                    context.total_commands.fetch_add(1, Ordering::Relaxed);
                    ops::run_elsewhere(&connection, frame, grid, operation);
                }
                Ok(Some(frame)) => {
                    context.total_commands.fetch_add(1, Ordering::Relaxed);
                    let mut start = output.len();
                    let started = std::time::Instant::now();
                    let ((), mut durability) =
                        collect_durability(|| ops::process(&connection, &frame, &mut output));
                    // An AUTH whose credentials wait for the throttle's turn: what is ready
                    // goes out, and the same step runs again when due.
                    loop {
                        let Some(due) = connection.auth_wait.lock().take() else {
                            break;
                        };
                        if flush(&mut stream, &mut output, &context, &mut unsettled, peer)
                            .await
                            .is_err()
                        {
                            break;
                        }
                        start = output.len();
                        tokio::select! {
                            biased;
                            () = crate::stopped(&mut shutdown) => break,
                            () = tokio::time::sleep_until(due.into()) => {}
                        }
                        let ((), again) =
                            collect_durability(|| ops::process(&connection, &frame, &mut output));
                        durability = again;
                    }
                    context.telemetry.observe(
                        crate::telemetry::Protocol::HotRod,
                        crate::telemetry::hotrod_operation(frame.header.opcode),
                        started.elapsed(),
                    );
                    answer_when_durable(
                        &connection,
                        durability,
                        &mut output,
                        start,
                        &mut unsettled,
                    );
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
                && flush(&mut stream, &mut output, &context, &mut unsettled, peer)
                    .await
                    .is_err()
            {
                break;
            }
        }
        if flush(&mut stream, &mut output, &context, &mut unsettled, peer)
            .await
            .is_err()
        {
            break "write failed";
        }
        if failed {
            break "malformed frame";
        }
        // Complete frames leave the buffer as they are decoded: what remains is part of one.
        deadline.decoded(completed, !input.is_empty());
        if connection.overflowed.load(Ordering::Relaxed) {
            tracing::warn!(%peer, "Hot Rod client does not read its events; closing the connection");
            break "outbound queue overflow";
        }
        if connection.undurable.load(Ordering::Relaxed) {
            break "writes not durable";
        }
        crate::buffers::prepare_input(&mut input, decoder.bytes_needed());
        tokio::select! {
            biased;
            () = crate::stopped(&mut shutdown) => {
                // Requests read before are answered (those run elsewhere, offloaded or
                // waiting for their backups), then the connection closes.
                finish_in_flight(&connection, &mut inbound, &mut stream, &context).await;
                break "server shutting down";
            }
            message = inbound.recv() => {
                if let Some(message) = message {
                    output.extend_from_slice(&message.bytes);
                    while output.len() < OUTPUT_FLUSH_BYTES {
                        match inbound.try_recv() {
                            Ok(message) => output.extend_from_slice(&message.bytes),
                            Err(_) => break,
                        }
                    }
                }
            }
            read = stream.read_buf(&mut input) => match read {
                Ok(0) => break "closed by the client",
                Ok(n) => {
                    context.hotrod.bytes_read.fetch_add(n as u64, Ordering::Relaxed);
                    deadline.received(n);
                }
                Err(_) => break "read failed",
            },
            () = deadline.expired() => break "request not received within its deadline",
        }
    };
    tracing::debug!(%peer, reason, "Hot Rod connection closed");
    context.hotrod.listeners.remove_connection(connection.id);
    context.hotrod.iterations.remove_connection(connection.id);
    stream.close_gracefully().await;
}

/// At shutdown: writes the responses of requests still running off the reading loop (each
/// holds the connection until its response is queued) as they come, until none runs.
async fn finish_in_flight(
    connection: &Arc<Connection>,
    inbound: &mut mpsc::Receiver<Outbound>,
    stream: &mut Conn,
    context: &ServerContext,
) {
    loop {
        let running = Arc::strong_count(connection) > 1;
        while let Ok(message) = inbound.try_recv() {
            if stream.send(&message.bytes).await.is_err() {
                return;
            }
            context
                .hotrod
                .bytes_written
                .fetch_add(message.bytes.len() as u64, Ordering::Relaxed);
        }
        if !running {
            return;
        }
        tokio::select! {
            message = inbound.recv() => {
                let Some(message) = message else { return };
                if stream.send(&message.bytes).await.is_err() {
                    return;
                }
            }
            () = tokio::time::sleep(std::time::Duration::from_millis(5)) => {}
        }
    }
}

async fn flush(
    stream: &mut Conn,
    output: &mut BytesMut,
    context: &ServerContext,
    unsettled: &mut Durability,
    peer: SocketAddr,
) -> std::io::Result<()> {
    if output.is_empty() {
        return Ok(());
    }
    if !crate::settle(unsettled, peer).await {
        return Err(std::io::Error::other("writes not durable"));
    }
    stream.send(output).await?;
    context
        .hotrod
        .bytes_written
        .fetch_add(output.len() as u64, Ordering::Relaxed);
    output.clear();
    crate::buffers::release_output(output);
    Ok(())
}

/// Waits for an offloaded-request slot, writing queued messages (which free slots) meanwhile.
/// `None` when the connection failed.
async fn wait_for_slot(
    connection: &Connection,
    inbound: &mut mpsc::Receiver<Outbound>,
    stream: &mut Conn,
    context: &ServerContext,
) -> Option<OwnedSemaphorePermit> {
    loop {
        tokio::select! {
            permit = Arc::clone(&connection.offloaded).acquire_owned() => return permit.ok(),
            message = inbound.recv() => {
                let message = message?;
                stream.send(&message.bytes).await.ok()?;
                context
                    .hotrod
                    .bytes_written
                    .fetch_add(message.bytes.len() as u64, Ordering::Relaxed);
            }
        }
    }
}

/// Serves `frame` on the blocking pool; its response goes through the outbound queue with
/// `permit`, released once written.
/// Sends the response at `output[start..]` once `durability` (its writes, or the writes in
/// flight its read saw) is settled — at once if it is already, as it is for most reads.
/// Otherwise the response leaves `output` and waits on its own, and the requests after it are
/// answered meanwhile: Hot Rod clients match responses by message id, and a 15.x client
/// multiplexes all its threads over one connection, so a write waiting for its backups must
/// not hold back reads that do not depend on it. (Requests are still applied in the order
/// they arrive; only answers wait.) When too many wait already, this one waits with the
/// connection's (`unsettled`, before the next flush). A response whose writes fail to
/// become durable is never sent, and the connection closes.
fn answer_when_durable(
    connection: &Arc<Connection>,
    durability: Durability,
    output: &mut BytesMut,
    start: usize,
    unsettled: &mut Durability,
) {
    if durability.is_empty() {
        return;
    }
    let Ok(permit) = Arc::clone(&connection.replicating).try_acquire_owned() else {
        unsettled.merge(durability);
        return;
    };
    let mut waiting = Box::pin(durability.wait());
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match waiting.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(Ok(())) => {}
        std::task::Poll::Ready(Err(error)) => {
            tracing::error!(%error, "closing a Hot Rod connection without acknowledging writes that were not made durable");
            output.truncate(start);
            connection.undurable.store(true, Ordering::Relaxed);
        }
        std::task::Poll::Pending => {
            let response = Bytes::copy_from_slice(&output[start..]);
            output.truncate(start);
            let connection = Arc::clone(connection);
            tokio::spawn(async move {
                let message = match waiting.await {
                    Ok(()) => Outbound {
                        bytes: response,
                        _permit: Some(permit),
                    },
                    Err(error) => {
                        tracing::error!(%error, "closing a Hot Rod connection without acknowledging writes that were not made durable");
                        connection.undurable.store(true, Ordering::Relaxed);
                        // Wakes the connection, which then closes.
                        Outbound {
                            bytes: Bytes::new(),
                            _permit: None,
                        }
                    }
                };
                let _ = connection.outbound.send(message).await;
            });
        }
    }
}

fn offload(connection: &Arc<Connection>, frame: Frame, permit: OwnedSemaphorePermit) {
    let connection = Arc::clone(connection);
    tokio::task::spawn_blocking(move || {
        let mut response = BytesMut::new();
        ops::process(&connection, &frame, &mut response);
        let message = Outbound {
            bytes: response.freeze(),
            _permit: Some(permit),
        };
        if connection.outbound.blocking_send(message).is_err() {
            tracing::debug!("Hot Rod connection closed before a response was ready");
        }
    });
}

/// Reads whose cost grows with the data are served on the blocking pool. Writes never are:
/// writes pipelined on one connection take effect in the order sent (a put after a clear
/// survives it; a read after a put-all sees it), as in Infinispan.
fn is_heavy(frame: &Frame) -> bool {
    use weft_hotrod::Request;
    match &frame.request {
        Request::GetAll { keys } => keys.len() >= LARGE_COUNT,
        Request::BulkGet { .. } | Request::BulkGetKeys { .. } | Request::IterationNext { .. } => {
            true
        }
        _ => false,
    }
}
