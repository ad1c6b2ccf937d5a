//! The RESP endpoint: one task per connection that decodes every complete request in its
//! input buffer, executes each against the session's cache, appends every reply to one
//! output buffer and writes it with a single call — pipelining costs nothing extra.
//! Pushes from elsewhere (pub/sub messages, tracking invalidations) wait in the connection's
//! mailbox (`push.rs`) and go out ahead of the next batch's replies, or at once when idle.
//!
//! Errors come in the three kinds of `style.md`: a request error is a `-ERR …` reply and the
//! connection goes on; a protocol error (malformed frame) gets Redis' `-ERR Protocol error`
//! reply and closes the connection, as Redis does; I/O errors just close it.

pub(crate) mod acl;
pub(crate) mod clients;
pub(crate) mod commands;
pub(crate) mod databases;
pub(crate) mod meta;
mod meta_table;
pub(crate) mod monitor;
pub(crate) mod push;
mod reply;
pub(crate) mod script_queue;
pub(crate) mod session;
pub(crate) mod table;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::stream::Conn;
use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use weft_core::{Durability, collect_durability};
use weft_resp::{Limits, ProtocolError, Request, RequestDecoder};

use commands::lists::Retry;
use session::Elsewhere;

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
    mut stream: Conn,
    prefix: BytesMut,
    peer: SocketAddr,
    context: Arc<ServerContext>,
    deadline: RequestDeadline,
) {
    let Some(session) = Session::new(Arc::clone(&context), peer) else {
        let _ = stream
            .send(b"-ERR no cache is mapped to RESP database 0\r\n")
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
            if mailbox.client.is_killed() {
                tracing::debug!(%peer, "closing RESP connection: CLIENT KILL");
            } else {
                tracing::warn!(%peer, limit = mailbox.limit_bytes(), "closing RESP connection: unread pushes exceed pubsub-output-bytes-max");
            }
        }
    }
}

async fn serve_session(
    mut stream: Conn,
    prefix: BytesMut,
    peer: SocketAddr,
    context: Arc<ServerContext>,
    session: Session,
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
    // Boxed: a script may run on another connection's task (see `script_queue`).
    let mut session = Box::new(session);
    // Writes to caches with stores not yet durable; no reply leaves before they are.
    let mut unsettled = Durability::default();
    loop {
        // Pushes queued before this batch go before its replies (an invalidation before
        // the reply that reads the new value); those its commands cause go after them.
        session.mailbox.drain_into(&mut output);
        session.mailbox.client.active(std::time::Instant::now());
        let mut processed = 0u64;
        // Requests decoded ahead while scripts were batched, and not yet run.
        let mut pending: VecDeque<Result<Request, ProtocolError>> = VecDeque::new();
        loop {
            let decoded = match pending.pop_front() {
                Some(request) => request.map(Some),
                None => decoder.decode(&mut input).inspect(|request| {
                    processed += u64::from(request.is_some());
                }),
            };
            match decoded {
                Ok(Some(mut request)) => {
                    if let Some(node) = &context.cluster
                        && session.cache.config().mode.is_clustered()
                        && !node.routing().is_routed(session.cache.name())
                    {
                        // A starting node that has not joined yet: the command waits until
                        // it can be routed to its keys' owner, instead of being refused.
                        if !send_settled(&mut stream, &mut output, &mut unsettled, peer).await {
                            return;
                        }
                        tokio::select! {
                            biased;
                            () = crate::stopped(&mut shutdown) => return,
                            _ = node.wait_routed(session.cache.name(), weft_grid::cache::SETTLE_TIMEOUT) => {}
                        }
                    }
                    if context.pause.in_force().is_some() {
                        // CLIENT PAUSE: what came before goes out, then this waits.
                        let write = clients::paused_as_write(&session, &request.args);
                        if !send_settled(&mut stream, &mut output, &mut unsettled, peer).await {
                            return;
                        }
                        tokio::select! {
                            biased;
                            () = crate::stopped(&mut shutdown) => return,
                            () = context.pause.wait(write) => {}
                        }
                    }
                    let (executed, durability) = if session.multi.is_none()
                        && script_queue::queues(&request.args)
                    {
                        // The scripts pipelined right after this one run with it.
                        let mut batch = vec![std::mem::take(&mut request.args)];
                        while pending.is_empty()
                            && batch.len() < script_queue::BATCH_MAX
                            && context.pause.in_force().is_none()
                        {
                            match decoder.decode(&mut input) {
                                Ok(Some(next)) => {
                                    processed += 1;
                                    if script_queue::queues(&next.args) {
                                        batch.push(next.args);
                                    } else {
                                        pending.push_back(Ok(next));
                                    }
                                }
                                Ok(None) => break,
                                Err(error) => pending.push_back(Err(error)),
                            }
                        }
                        let scripting = &context.scripting;
                        let busy = || scripting.run.busy().is_some();
                        let queued = std::mem::take(&mut output);
                        let Some(ran) = scripting.queue.execute(session, batch, queued, busy).await
                        else {
                            return;
                        };
                        session = ran.session;
                        output = ran.output;
                        for (at, args) in ran.rest.into_iter().enumerate() {
                            pending.insert(at, Ok(Request { args }));
                        }
                        (ran.executed, ran.durability)
                    } else {
                        let (mut executed, mut durability) =
                            collect_durability(|| session.execute(&request.args, &mut output));
                        // AUTH or HELLO whose credentials wait for the throttle's turn: the
                        // replies before go out, and the command runs again when due.
                        while let Some(due) = session.auth_wait.take() {
                            unsettled.merge(durability);
                            if !send_settled(&mut stream, &mut output, &mut unsettled, peer).await {
                                return;
                            }
                            tokio::select! {
                                biased;
                                () = crate::stopped(&mut shutdown) => return,
                                () = tokio::time::sleep_until(due.into()) => {}
                            }
                            (executed, durability) =
                                collect_durability(|| session.execute(&request.args, &mut output));
                        }
                        (executed, durability)
                    };
                    unsettled.merge(durability);
                    let mut blocked_elsewhere = None;
                    if let Some(elsewhere) = session.forward.take()
                        && let Some(block) =
                            run_at_owner(&mut session, &elsewhere, &mut output).await
                    {
                        blocked_elsewhere = Some((elsewhere, block));
                    }
                    if let Some(args) = session.cluster_wide.take() {
                        cluster_wide(&session, &args, &mut output).await;
                    }
                    if let Err(exceeded) = executed {
                        // As Redis does for a client over its output-buffer limit: the
                        // replies before this one are sent, then the connection is closed.
                        tracing::warn!(%peer, limit = exceeded.limit, "closing RESP connection: reply exceeds client-output-bytes-max");
                        if crate::settle(&mut unsettled, peer).await {
                            let _ = stream.send(&output).await;
                        }
                        return;
                    }
                    if session.blocked.is_some() || blocked_elsewhere.is_some() {
                        // Replies to earlier requests go out before the client waits.
                        if !send_settled(&mut stream, &mut output, &mut unsettled, peer).await {
                            return;
                        }
                        let mut blocked = Blocked {
                            stream: &mut stream,
                            input: &mut input,
                            output: &mut output,
                            shutdown: &mut shutdown,
                            unsettled: &mut unsettled,
                        };
                        let open = match blocked_elsewhere {
                            Some((elsewhere, block)) => {
                                blocked
                                    .wait_elsewhere(&mut session, &elsewhere, block)
                                    .await
                            }
                            None => blocked.wait(&mut session, &request.args).await,
                        };
                        if !open {
                            return;
                        }
                    }
                    if session.quit {
                        break;
                    }
                    if output.len() >= OUTPUT_FLUSH_BYTES {
                        if !crate::settle(&mut unsettled, peer).await
                            || stream.send(&output).await.is_err()
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
                        let _ = stream.send(&output).await;
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
            if !crate::settle(&mut unsettled, peer).await || stream.send(&output).await.is_err() {
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
            () = crate::stopped(&mut shutdown) => {
                stream.close_gracefully().await;
                return;
            }
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

/// Sends the replies in `output`, if any, once the writes they acknowledge are durable;
/// false when the connection must close (a write not made durable, or a failed send).
async fn send_settled(
    stream: &mut Conn,
    output: &mut BytesMut,
    unsettled: &mut Durability,
    peer: SocketAddr,
) -> bool {
    if output.is_empty() {
        return true;
    }
    if !crate::settle(unsettled, peer).await || stream.send(output).await.is_err() {
        return false;
    }
    output.clear();
    true
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

/// The name RESP commands run under, as a grid function, at their keys' owner.
pub const FUNCTION: &str = "weft.resp";

/// Runs a command at the member that owns its keys (as the grid function [`FUNCTION`]) and
/// appends that member's reply; a blocking command that found nothing there appends nothing
/// and returns what the client waits for.
async fn run_at_owner(
    session: &mut Session,
    elsewhere: &Elsewhere,
    output: &mut BytesMut,
) -> Option<commands::lists::Block> {
    let node = Arc::clone(session.context.cluster.as_ref()?);
    session.context.routed.count(crate::cluster::Origin::Resp);
    let grid = weft_grid::GridCache::new(node, session.cache.clone());
    if elsewhere
        .args
        .first()
        .is_some_and(|name| name.eq_ignore_ascii_case(b"watch"))
    {
        watch_at_owner(session, &grid, &elsewhere.args[1..], output).await;
        return None;
    }
    let transaction = session
        .transaction_elsewhere
        .take()
        .map(|(multi, watched)| RemoteTransaction {
            queued: multi
                .queued
                .iter()
                .map(|args| args.iter().map(|arg| arg.to_vec()).collect())
                .collect(),
            watched: watched
                .into_iter()
                .map(|(key, version)| (key.to_vec(), version))
                .collect(),
        });
    let command = RemoteCommand {
        resp3: session.protocol == weft_resp::Protocol::Resp3,
        args: elsewhere.args.iter().map(|arg| arg.to_vec()).collect(),
        transaction,
        user: session.subject.as_ref().map(|subject| {
            (
                subject.name.to_string(),
                subject.roles().iter().cloned().collect(),
            )
        }),
    };
    let argument = postcard::to_stdvec(&command).unwrap_or_default();
    let answer = grid
        .invoke(FUNCTION, &elsewhere.key, argument, elsewhere.write)
        .await
        .map(|bytes| postcard::from_bytes::<RemoteAnswer>(&bytes));
    match answer {
        Ok(Ok(RemoteAnswer::Reply(reply))) => output.extend_from_slice(&reply),
        Ok(Ok(RemoteAnswer::Blocked { keys, wait_ms })) => {
            return Some(commands::lists::Block::new(
                keys.into_iter().map(bytes::Bytes::from).collect(),
                wait_ms.map(|ms| std::time::Instant::now() + std::time::Duration::from_millis(ms)),
            ));
        }
        Ok(Err(_)) => output.extend_from_slice(b"-ERR a malformed answer from the key's owner\r\n"),
        Err(weft_grid::GridError::Cache(error)) => {
            commands::strings::cache_error(&mut Reply::new(output, session.protocol), &error);
        }
        Err(error) => {
            let reason = error.to_string().replace(['\r', '\n'], " ");
            output.extend_from_slice(format!("-CLUSTERDOWN {reason}\r\n").as_bytes());
        }
    }
    None
}

/// What the owner answers a command.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
enum RemoteAnswer {
    /// Its reply.
    Reply(Vec<u8>),
    /// A blocking command found nothing: the client waits for pushes to `keys`, at most
    /// `wait_ms` (none: forever).
    Blocked {
        keys: Vec<Vec<u8>>,
        wait_ms: Option<u64>,
    },
}

/// WATCH of keys another member owns: their versions there, remembered here for EXEC,
/// which then runs the transaction at that member and checks them there.
async fn watch_at_owner(
    session: &mut Session,
    grid: &weft_grid::GridCache,
    keys: &[bytes::Bytes],
    output: &mut BytesMut,
) {
    let mut reply = Reply::new(output, session.protocol);
    for key in keys {
        let version = match grid.get_entry(key).await {
            Ok(entry) => entry.map(|entry| entry.version()),
            Err(weft_grid::GridError::Cache(error)) => {
                return commands::strings::cache_error(&mut reply, &error);
            }
            Err(error) => {
                let reason = error.to_string().replace(['\r', '\n'], " ");
                return reply.error(&format!("CLUSTERDOWN {reason}"));
            }
        };
        let cache = session.cache.clone();
        if !session
            .watched
            .iter()
            .any(|(c, _, k, _)| c.name() == cache.name() && k == key)
        {
            let database = session.database;
            session
                .watched
                .push((cache, database, key.clone(), version));
        }
    }
    reply.ok();
}

/// A command as it travels to its keys' owner.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct RemoteCommand {
    resp3: bool,
    args: Vec<Vec<u8>>,
    /// For EXEC: the transaction, run at the owner of all its keys.
    transaction: Option<RemoteTransaction>,
    /// Who sent it: the client's user and roles, authenticated where it connected (the
    /// member it came from proved itself on the cluster port).
    user: Option<(String, Vec<String>)>,
}

/// A transaction whose keys all live on one other member.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct RemoteTransaction {
    queued: Vec<Vec<Vec<u8>>>,
    /// Watched keys and the versions WATCH saw (at this same owner).
    watched: Vec<(Vec<u8>, Option<u64>)>,
}

/// Runs the RESP commands other members send to their keys' owner: on a session of its own
/// over the owner's cache, answering the command's reply.
#[derive(Debug, Default)]
pub struct CommandFunction {
    context: std::sync::OnceLock<std::sync::Weak<ServerContext>>,
}

impl CommandFunction {
    /// Gives the function the server it runs commands in (once the server exists; until
    /// then, commands are refused as not joined here and their sender retries).
    pub fn attach(&self, context: &Arc<ServerContext>) {
        let _ = self.context.set(Arc::downgrade(context));
    }
}

impl weft_core::operation::Function for CommandFunction {
    fn apply(
        &self,
        cache: &weft_core::Cache,
        _key: &[u8],
        argument: &[u8],
    ) -> Result<Vec<u8>, weft_core::CacheError> {
        let refused = |reason: &str| weft_core::PersistenceError::Failed {
            cache: cache.name().to_owned(),
            reason: reason.to_owned(),
        };
        let Some(context) = self.context.get().and_then(std::sync::Weak::upgrade) else {
            return Err(weft_core::PersistenceError::NotJoined {
                cache: cache.name().to_owned(),
            }
            .into());
        };
        let command: RemoteCommand = postcard::from_bytes(argument)
            .map_err(|_| refused("a malformed RESP command from another member"))?;
        let Some(mut session) = Session::forwarded(context, cache.clone(), command.resp3) else {
            return Err(refused("no RESP database").into());
        };
        // The client authenticated at the member it connected to; it is who it said there.
        session.authenticated = true;
        if let Some((name, roles)) = command.user {
            session.subject = Some(session.context.security.subject_with_roles(&name, roles));
        }
        let args: Vec<bytes::Bytes> = command.args.into_iter().map(bytes::Bytes::from).collect();
        if let Some(transaction) = command.transaction {
            // EXEC here, as the client's own node would run it: the watched keys checked
            // against this member's entries, the queue run under the transaction gate.
            session.multi = Some(session::Multi {
                queued: transaction
                    .queued
                    .into_iter()
                    .map(|args| args.into_iter().map(bytes::Bytes::from).collect())
                    .collect(),
                failed: false,
            });
            session.watched = transaction
                .watched
                .into_iter()
                .map(|(key, version)| {
                    (
                        cache.clone(),
                        session.database,
                        bytes::Bytes::from(key),
                        version,
                    )
                })
                .collect();
        }
        let mut output = BytesMut::new();
        if session.execute(&args, &mut output).is_err() {
            return Err(refused("reply exceeds client-output-bytes-max").into());
        }
        let answer = match session.blocked.take() {
            // A blocking command that found nothing blocks where its client is, woken by the
            // events of pushes here (see `Blocked::wait_elsewhere`).
            Some(block) => RemoteAnswer::Blocked {
                keys: block.keys.iter().map(|key| key.to_vec()).collect(),
                wait_ms: block.deadline.map(|deadline| {
                    let left = deadline.saturating_duration_since(std::time::Instant::now());
                    u64::try_from(left.as_millis()).unwrap_or(u64::MAX)
                }),
            },
            None => RemoteAnswer::Reply(output.to_vec()),
        };
        Ok(postcard::to_stdvec(&answer).unwrap_or_default())
    }
}

/// Registers the grid function RESP commands run as at their keys' owner; the server
/// attaches itself to the returned function once it exists.
pub fn register_functions(functions: &weft_core::operation::Functions) -> Arc<CommandFunction> {
    let function = Arc::new(CommandFunction::default());
    functions.register(
        FUNCTION,
        Arc::clone(&function) as Arc<dyn weft_core::operation::Function>,
    );
    function
}

/// A connection whose current command blocks (BLPOP and friends).
struct Blocked<'a> {
    stream: &'a mut Conn,
    input: &'a mut BytesMut,
    output: &'a mut BytesMut,
    shutdown: &'a mut tokio::sync::watch::Receiver<bool>,
    unsettled: &'a mut Durability,
}

/// The reply of a blocked command CLIENT UNBLOCK ended: its timeout's, or Redis' error.
fn unblocked_reply(
    output: &mut BytesMut,
    protocol: weft_resp::Protocol,
    how: clients::Unblock,
    on_timeout: commands::lists::TimeoutReply,
) {
    let mut reply = Reply::new(output, protocol);
    match how {
        clients::Unblock::Timeout => on_timeout.write(&mut reply),
        clients::Unblock::Error => reply.error("UNBLOCKED client unblocked via CLIENT UNBLOCK"),
    }
}

/// How often a client blocked on keys another member owns asks again, whatever it heard:
/// a push that raced the start of its wait is noticed within this.
const BLOCKED_ELSEWHERE_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

impl Blocked<'_> {
    /// [`Blocked::wait`] for a command whose keys another member owns: the client waits
    /// here, in line with the clients blocked here on the same keys, woken by the events the
    /// owner relays for pushes to them (and at least every [`BLOCKED_ELSEWHERE_RETRY`]); each
    /// time, the command runs again at the owner. It pops only when it runs there on behalf
    /// of a client still waiting here, so a client that leaves loses nothing.
    async fn wait_elsewhere(
        &mut self,
        session: &mut Session,
        elsewhere: &Elsewhere,
        block: commands::lists::Block,
    ) -> bool {
        let context = Arc::clone(&session.context);
        let cache = session.cache.clone();
        let mut registration = context
            .list_waiters
            .register(cache.name(), block.keys.clone());
        let watched: std::collections::HashSet<bytes::Bytes> = block.keys.iter().cloned().collect();
        let weak = Arc::downgrade(&context);
        let name = cache.name().to_owned();
        let listener = cache.add_listener(weft_core::ListenerOptions::default(), move |event| {
            if event.is_relayed()
                && watched.contains(event.key())
                && let Some(context) = weak.upgrade()
            {
                context.list_waiters.signal(&name, event.key());
            }
        });
        let deadline = block.deadline.map(tokio::time::Instant::from_std);
        let on_timeout = block.on_timeout;
        let limit = context.settings.client_input_bytes_max;
        let mailbox = Arc::clone(&session.mailbox);
        mailbox.client.set_blocked(true);
        let open = loop {
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
                _ = registration.notified() => {}
                () = tokio::time::sleep(BLOCKED_ELSEWHERE_RETRY) => {}
                () = timeout => {
                    on_timeout.write(&mut Reply::new(self.output, session.protocol));
                    break true;
                }
                how = mailbox.client.unblocked() => {
                    unblocked_reply(self.output, session.protocol, how, on_timeout);
                    break true;
                }
                read = self.stream.read_buf(self.input) => match read {
                    Ok(0) | Err(_) => break false,
                    Ok(_) if self.input.len() >= limit => break false,
                    Ok(_) => continue,
                },
            }
            if run_at_owner(session, elsewhere, self.output)
                .await
                .is_none()
            {
                registration.served();
                break true;
            }
        };
        cache.remove_listener(listener);
        mailbox.client.set_blocked(false);
        drop(registration);
        open
    }

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
        let retry_args = block.retry_args;
        let args = retry_args.as_deref().unwrap_or(args);
        let recheck = block.recheck;
        let context = Arc::clone(&session.context);
        let keys = block.keys;
        let mut registration = context
            .list_waiters
            .register(session.cache.name(), keys.clone());
        let mut registered = session.cache.clone();
        session.block_retry = Some(Retry {
            deadline: block.deadline,
            ready: None,
        });
        let deadline = block.deadline.map(tokio::time::Instant::from_std);
        let on_timeout = block.on_timeout;
        let limit = context.settings.client_input_bytes_max;
        // Pushes wait in the mailbox until the command answers; if they overflow it, the
        // connection closes from here so that the registration above is undone.
        let mailbox = Arc::clone(&session.mailbox);
        mailbox.client.set_blocked(true);
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
            if session.cache.name() != registered.name() {
                // SWAPDB gave the database another cache: wait in line on its keys.
                registered = session.cache.clone();
                drop(registration);
                registration = context
                    .list_waiters
                    .register(registered.name(), keys.clone());
            }
            let timeout = async {
                match deadline {
                    Some(deadline) => tokio::time::sleep_until(deadline).await,
                    None => std::future::pending().await,
                }
            };
            let recheck = async {
                match recheck {
                    Some(every) => tokio::time::sleep(every).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                () = crate::stopped(self.shutdown) => break false,
                () = mailbox.overflowed() => break false,
                () = recheck => {}
                ready = registration.notified() => {
                    if let Some(retry) = &mut session.block_retry {
                        retry.ready = Some(ready);
                    }
                }
                () = timeout => {
                    on_timeout.write(&mut Reply::new(self.output, session.protocol));
                    break true;
                }
                how = mailbox.client.unblocked() => {
                    unblocked_reply(self.output, session.protocol, how, on_timeout);
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
        mailbox.client.set_blocked(false);
        drop(registration);
        open
    }
}
