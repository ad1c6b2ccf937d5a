//! The RESP endpoint: one task per connection that decodes every complete request in its
//! input buffer, executes each against the session's cache, appends every reply to one
//! output buffer and writes it with a single call — pipelining costs nothing extra.
//! Pushes from elsewhere (pub/sub messages, tracking invalidations) wait in the connection's
//! mailbox (`push.rs`) and go out ahead of the next batch's replies, or at once when idle.
//!
//! Errors come in the three kinds of `style.md`: a request error is a `-ERR …` reply and the
//! connection goes on; a protocol error (malformed frame) gets Redis' `-ERR Protocol error`
//! reply and closes the connection, as Redis does; I/O errors just close it.

pub(crate) mod commands;
pub(crate) mod push;
mod reply;
mod session;
mod table;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use weft_core::{Durability, collect_durability};
use weft_resp::{Limits, RequestDecoder};

use commands::lists::Retry;

pub use reply::Reply;
pub use session::{OutputLimitExceeded, Session};

use crate::ServerContext;
use crate::deadline::RequestDeadline;

/// Replies buffered beyond this are written out before decoding further requests, so a long
/// pipeline of large replies does not pile up in memory.
pub const OUTPUT_FLUSH_BYTES: usize = 64 * 1024;

/// Serves one RESP connection until the client quits, the connection fails, a protocol
/// error occurs, or the server shuts down.
pub async fn serve(
    mut stream: TcpStream,
    prefix: BytesMut,
    peer: SocketAddr,
    context: Arc<ServerContext>,
    deadline: RequestDeadline,
) {
    let Some(session) = Session::new(Arc::clone(&context), peer) else {
        let _ = stream
            .write_all(b"-ERR no cache is mapped to RESP database 0\r\n")
            .await;
        return;
    };
    let mailbox = Arc::clone(&session.mailbox);
    // A connection that leaves more pushes unread than `pubsub-output-bytes-max` is closed
    // wherever it waits — even in the middle of a write, since its client does not read —
    // by dropping the serving future, and with it the session and its subscriptions. A
    // blocked command notices first and unregisters itself (`Blocked::wait`).
    tokio::select! {
        biased;
        () = serve_session(stream, prefix, peer, context, session, deadline) => {}
        () = mailbox.overflowed() => {
            tracing::warn!(%peer, limit = mailbox.limit_bytes(), "closing RESP connection: unread pushes exceed pubsub-output-bytes-max");
        }
    }
}

async fn serve_session(
    mut stream: TcpStream,
    prefix: BytesMut,
    peer: SocketAddr,
    context: Arc<ServerContext>,
    mut session: Session,
    mut deadline: RequestDeadline,
) {
    let limits = Limits {
        bulk_bytes_max: context.settings.resp_bulk_bytes_max,
        multibulk_length_max: context.settings.resp_multibulk_length_max,
        ..Limits::default()
    };
    let mut decoder = RequestDecoder::new(limits);
    let mut input = prefix;
    input.reserve(crate::buffers::INITIAL_BYTES);
    let mut output = crate::buffers::new();
    let mut shutdown = context.shutdown_signal();
    // Writes to caches with stores not yet durable; no reply leaves before they are.
    let mut unsettled = Durability::default();
    loop {
        // Pushes queued before this batch go before its replies (an invalidation before
        // the reply that reads the new value); those its commands cause go after them.
        session.mailbox.drain_into(&mut output);
        let mut processed = 0u64;
        loop {
            match decoder.decode(&mut input) {
                Ok(Some(request)) => {
                    processed += 1;
                    let (executed, durability) =
                        collect_durability(|| session.execute(&request.args, &mut output));
                    unsettled.merge(durability);
                    if let Some((owner, args)) = session.forward.take() {
                        forward(&session, owner, args, &mut output).await;
                    }
                    if let Some(args) = session.cluster_wide.take() {
                        cluster_wide(&session, &args, &mut output).await;
                    }
                    if let Err(exceeded) = executed {
                        // As Redis does for a client over its output-buffer limit: the
                        // replies before this one are sent, then the connection is closed.
                        tracing::warn!(%peer, limit = exceeded.limit, "closing RESP connection: reply exceeds client-output-bytes-max");
                        if crate::settle(&mut unsettled, peer).await {
                            let _ = stream.write_all(&output).await;
                        }
                        return;
                    }
                    if session.blocked.is_some() {
                        // Replies to earlier requests go out before the client waits.
                        if !output.is_empty() {
                            if !crate::settle(&mut unsettled, peer).await
                                || stream.write_all(&output).await.is_err()
                            {
                                return;
                            }
                            output.clear();
                        }
                        let mut blocked = Blocked {
                            stream: &mut stream,
                            input: &mut input,
                            output: &mut output,
                            shutdown: &mut shutdown,
                            unsettled: &mut unsettled,
                        };
                        if !blocked.wait(&mut session, &request.args).await {
                            return;
                        }
                    }
                    if session.quit {
                        break;
                    }
                    if output.len() >= OUTPUT_FLUSH_BYTES {
                        if !crate::settle(&mut unsettled, peer).await
                            || stream.write_all(&output).await.is_err()
                        {
                            return;
                        }
                        output.clear();
                    }
                }
                Ok(None) => break,
                Err(error) => {
                    tracing::debug!(%peer, %error, "closing RESP connection on protocol error");
                    error.write_reply(&mut output);
                    if crate::settle(&mut unsettled, peer).await {
                        let _ = stream.write_all(&output).await;
                    }
                    return;
                }
            }
        }
        context
            .total_commands
            .fetch_add(processed, Ordering::Relaxed);
        // Complete requests leave the buffer as they are decoded: what remains is part of one.
        deadline.decoded(processed > 0, !input.is_empty());
        if !output.is_empty() {
            if !crate::settle(&mut unsettled, peer).await
                || stream.write_all(&output).await.is_err()
            {
                return;
            }
            output.clear();
            crate::buffers::release_output(&mut output);
        }
        if session.quit {
            let _ = stream.shutdown().await;
            return;
        }
        if input.len() >= context.settings.client_input_bytes_max {
            // What is left is one unfinished request (complete ones were executed above).
            // Redis closes a client whose query buffer passes its limit, without a reply.
            tracing::warn!(%peer, pending = input.len(), limit = context.settings.client_input_bytes_max, "closing RESP connection: request exceeds client-input-bytes-max");
            return;
        }
        crate::buffers::prepare_input(&mut input, 0);
        // Shutdown first: requests already read have been answered above, and a client that
        // never stops sending must not keep the connection open through a shutdown.
        tokio::select! {
            biased;
            () = crate::stopped(&mut shutdown) => return,
            read = stream.read_buf(&mut input) => match read {
                Ok(0) | Err(_) => return,
                Ok(read) => deadline.received(read),
            },
            () = session.mailbox.ready() => {}
            () = deadline.expired() => {
                tracing::debug!(%peer, pending = input.len(), "closing RESP connection: request not received within its deadline");
                return;
            }
        }
    }
}

/// Runs DBSIZE, KEYS, FLUSHDB or FLUSHALL across the cluster and appends the reply.
async fn cluster_wide(session: &Session, args: &[bytes::Bytes], output: &mut BytesMut) {
    let Some(node) = &session.context.cluster else {
        return;
    };
    let mut reply = Reply::new(output, session.protocol);
    let name = args
        .first()
        .map(|name| name.to_ascii_lowercase())
        .unwrap_or_default();
    let failed = |reply: &mut Reply<'_>, error: weft_grid::GridError| {
        reply.error(&format!(
            "CLUSTERDOWN {}",
            error.to_string().replace(['\r', '\n'], " ")
        ));
    };
    match name.as_slice() {
        b"dbsize" => match node.cluster_size(&session.cache).await {
            Ok(size) => reply.integer(i64::try_from(size).unwrap_or(i64::MAX)),
            Err(error) => failed(&mut reply, error),
        },
        b"keys" => {
            let pattern = args.get(1).map_or(&b"*"[..], |p| &p[..]);
            match node.cluster_keys(&session.cache).await {
                Ok(keys) => {
                    let matching: Vec<Vec<u8>> = keys
                        .into_iter()
                        .filter(|key| commands::glob::matches(pattern, key))
                        .collect();
                    reply.array(matching.len());
                    for key in &matching {
                        reply.bulk(key);
                    }
                }
                Err(error) => failed(&mut reply, error),
            }
        }
        b"scan" => {
            let Some(cursor) = args.get(1).and_then(|c| commands::keys::parse_cursor(c)) else {
                reply.error("ERR invalid cursor");
                return;
            };
            let options = match commands::keys::ScanOptions::parse(&args[2..]) {
                Ok(options) => options,
                Err(text) => return reply.error(text),
            };
            match cluster_scan(node, &session.cache, cursor, &options).await {
                Ok((next, found)) => commands::keys::scan_reply(&mut reply, next, &found),
                Err(error) => failed(&mut reply, error),
            }
        }
        b"flushdb" | b"flushall" => {
            if !commands::server::flush_mode_ok(args) {
                reply.error(commands::errors::SYNTAX);
                return;
            }
            let caches: Vec<weft_core::Cache> = if name.as_slice() == b"flushdb" {
                vec![session.cache.clone()]
            } else {
                session
                    .context
                    .manager
                    .caches()
                    .into_iter()
                    .filter(|cache| cache.config().resp_database.is_some())
                    .collect()
            };
            let mut outcome = Ok(());
            for cache in caches {
                outcome = if cache.config().mode.is_clustered() {
                    node.cluster_clear(&cache).await
                } else {
                    cache.clear().map_err(weft_grid::GridError::from)
                };
                if outcome.is_err() {
                    break;
                }
            }
            session.context.push.tracking.flushed();
            match outcome {
                Ok(()) => reply.ok(),
                Err(error) => failed(&mut reply, error),
            }
        }
        _ => reply.error("ERR unknown cluster-wide command"),
    }
}

/// SCAN over a whole clustered cache: whole segments from `cursor` on, each read from the
/// member that reads it now, until COUNT keys were looked at; the next cursor (0 at the
/// end) and the keys found.
async fn cluster_scan(
    node: &crate::cluster::node::Node,
    cache: &weft_core::Cache,
    cursor: u64,
    options: &commands::keys::ScanOptions<'_>,
) -> weft_grid::Result<(u64, Vec<bytes::Bytes>)> {
    use crate::cluster::iteration::{PAGE_MAX, SegmentCursor};
    let segments = cache.segment_count();
    let mut found = Vec::new();
    let Ok(mut segment) = u32::try_from(cursor) else {
        return Ok((0, found));
    };
    let mut visited = 0usize;
    while segment < segments {
        let mut pages = SegmentCursor::new(cache.clone(), [segment]);
        loop {
            let (entries, finished) = pages.next_batch(node, PAGE_MAX, |_| true).await?;
            visited += entries.len();
            found.extend(
                entries
                    .iter()
                    .filter(|entry| options.wanted(entry))
                    .map(weft_core::CacheEntry::key_bytes),
            );
            if !finished.is_empty() || entries.is_empty() {
                break;
            }
        }
        segment += 1;
        if segment < segments && visited >= options.count() {
            return Ok((u64::from(segment), found));
        }
    }
    Ok((0, found))
}

/// Runs a command on the node that owns its keys and appends that node's reply.
async fn forward(
    session: &Session,
    owner: SocketAddr,
    args: Vec<bytes::Bytes>,
    output: &mut BytesMut,
) {
    use weft_cluster::wire::{Protocol as Wire, Request, Response};
    let Some(node) = &session.context.cluster else {
        return;
    };
    let protocol = match session.protocol {
        weft_resp::Protocol::Resp3 => Wire::Resp3,
        weft_resp::Protocol::Resp2 => Wire::Resp2,
    };
    session.context.routed.count(crate::cluster::Origin::Resp);
    let request = Request::Forward {
        protocol,
        cache: session.cache.name().to_owned(),
        args: args.iter().map(|arg| arg.to_vec()).collect(),
    };
    let answer = node
        .transport()
        .call(owner, request, std::time::Duration::from_secs(20))
        .await;
    match answer {
        Ok(Response::Reply(reply)) => output.extend_from_slice(&reply),
        Ok(Response::Error(reason)) => {
            output.extend_from_slice(
                format!("-ERR {}\r\n", reason.replace(['\r', '\n'], " ")).as_bytes(),
            );
        }
        Ok(_) | Err(_) => {
            output
                .extend_from_slice(b"-CLUSTERDOWN the owner of this key is unreachable; retry\r\n");
        }
    }
}

/// Runs a command another node forwarded here, now (so that commands forwarded over one
/// connection apply in the order sent), and returns the future of its reply: ready once the
/// write it made (if any) is as replicated and durable as the cache promises.
pub fn execute_forwarded(
    context: &Arc<ServerContext>,
    cache: &str,
    resp3: bool,
    args: Vec<Vec<u8>>,
) -> weft_core::persistence::BoxFuture<weft_cluster::wire::Response> {
    use weft_cluster::wire::Response;
    let ready = |response: Response| -> weft_core::persistence::BoxFuture<Response> {
        Box::pin(std::future::ready(response))
    };
    let Some(cache) = context.manager.cache(cache) else {
        return ready(Response::Error(format!("no cache `{cache}`")));
    };
    let Some(mut session) = Session::forwarded(Arc::clone(context), cache, resp3) else {
        return ready(Response::Error("no RESP database".to_owned()));
    };
    let args: Vec<bytes::Bytes> = args.into_iter().map(bytes::Bytes::from).collect();
    let mut output = BytesMut::new();
    let (executed, durability) = collect_durability(|| session.execute(&args, &mut output));
    drop(session);
    if executed.is_err() {
        return ready(Response::Error(
            "reply exceeds client-output-bytes-max".to_owned(),
        ));
    }
    Box::pin(async move {
        if let Err(error) = durability.wait().await {
            return Response::Error(error.to_string());
        }
        Response::Reply(output.to_vec())
    })
}

/// A connection whose current command blocks (BLPOP and friends).
struct Blocked<'a> {
    stream: &'a mut TcpStream,
    input: &'a mut BytesMut,
    output: &'a mut BytesMut,
    shutdown: &'a mut tokio::sync::watch::Receiver<bool>,
    unsettled: &'a mut Durability,
}

impl Blocked<'_> {
    /// Waits until the blocked command can answer, then leaves its reply in `output`:
    /// queues the client on its keys, runs it again (a push may have come in between), and
    /// while it still finds nothing waits for a push (then runs it again on the keys pushed
    /// to), its deadline (a null reply), more input (kept for later), the client leaving or
    /// the server stopping. False when the connection is to be closed. Leaving the queues
    /// (the registration's drop, whichever way this ends) hands an unconsumed push on to the
    /// next client in line.
    async fn wait(&mut self, session: &mut Session, args: &[bytes::Bytes]) -> bool {
        let Some(block) = session.blocked.take() else {
            return true;
        };
        let context = Arc::clone(&session.context);
        let mut registration = context
            .list_waiters
            .register(session.cache.name(), block.keys);
        session.block_retry = Some(Retry {
            deadline: block.deadline,
            ready: None,
        });
        let deadline = block.deadline.map(tokio::time::Instant::from_std);
        let limit = context.settings.client_input_bytes_max;
        // Pushes wait in the mailbox until the command answers; if they overflow it, the
        // connection closes from here so that the registration above is undone.
        let mailbox = Arc::clone(&session.mailbox);
        let open = loop {
            let (executed, durability) = collect_durability(|| session.execute(args, self.output));
            self.unsettled.merge(durability);
            if executed.is_err() {
                break false;
            }
            if session.blocked.take().is_none() {
                registration.served();
                break true;
            }
            let timeout = async {
                match deadline {
                    Some(deadline) => tokio::time::sleep_until(deadline).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                () = crate::stopped(self.shutdown) => break false,
                () = mailbox.overflowed() => break false,
                ready = registration.notified() => {
                    if let Some(retry) = &mut session.block_retry {
                        retry.ready = Some(ready);
                    }
                }
                () = timeout => {
                    Reply::new(self.output, session.protocol).null_array();
                    break true;
                }
                read = self.stream.read_buf(self.input) => match read {
                    Ok(0) | Err(_) => break false,
                    Ok(_) if self.input.len() >= limit => break false,
                    Ok(_) => {}
                },
            }
        };
        session.block_retry = None;
        drop(registration);
        open
    }
}
