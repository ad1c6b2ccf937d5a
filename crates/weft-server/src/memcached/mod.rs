//! The memcached endpoint, text and binary protocols: one task per connection that decodes
//! every complete request in its input buffer (`weft-memcached`), runs each against the
//! configured cache (`[server] memcached-cache`, by default the cache RESP database 0 uses),
//! appends every reply to one output buffer and writes it with a single call. Retrievals of
//! many keys write their output in pieces of [`OUTPUT_FLUSH_BYTES`], so no reply needs more
//! memory than that plus one item.
//!
//! Errors come in the three kinds of `style.md`: a request error is memcached's error line
//! (`ERROR`, `CLIENT_ERROR …`, `SERVER_ERROR …`) or binary error status and the connection
//! goes on, positioned where memcached would be; a protocol error (a line too long, a bad
//! binary packet) closes the connection after memcached's answer, if it has one; I/O errors
//! just close it. Writes are acknowledged only once durable, as on RESP (`crate::settle`).

mod binary;
mod ops;
mod stats;
mod text;

use std::cell::RefCell;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::stream::Conn;
use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use weft_core::{Cache, CacheError, Durability, collect_durability};
use weft_memcached::{
    BinaryDecoder, BinaryProtocolError, BinaryRequest, Limits, TextDecoder, TextProtocolError,
    TextRequest,
};

use crate::ServerContext;
use crate::deadline::RequestDeadline;
use ops::{Expiration, Script, Store};
use stats::{Counters, bump};
use weft_grid::GridCache;

/// Replies buffered beyond this are written out before more requests run (and a multi-key
/// retrieval pauses to write them).
pub const OUTPUT_FLUSH_BYTES: usize = 64 * 1024;
/// What a write that meets a key holding a Redis data structure answers.
pub(crate) const STRUCTURE_MESSAGE: &str = "key holds a Redis data structure";

/// Which memcached protocol a connection speaks; fixed by its first byte, as in memcached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// The text ("ASCII") protocol.
    Text,
    /// The binary protocol (first byte `0x80`).
    Binary,
}

impl Dialect {
    /// The dialect a connection's first byte announces.
    #[must_use]
    pub fn of_first_byte(byte: u8) -> Self {
        if byte == weft_memcached::binary::REQUEST_MAGIC {
            Self::Binary
        } else {
            Self::Text
        }
    }
}

/// State of the memcached endpoint shared by its connections.
#[derive(Debug, Default)]
pub(crate) struct MemcachedState {
    /// Counters for `stats`.
    pub(crate) counters: Counters,
    /// The last `verbosity` level set (reported by `stats settings`; logging is unaffected).
    pub(crate) verbosity: AtomicU32,
    /// Bumped by every `flush_all`, so that a delayed flush still pending is superseded by a
    /// later one, as memcached's single `oldest_live` setting is.
    flush_generation: Arc<AtomicU64>,
}

/// One connection's state.
#[derive(Debug)]
pub(crate) struct Connection {
    pub(crate) context: Arc<ServerContext>,
    pub(crate) cache: Cache,
    pub(crate) limits: Limits,
    /// Set by `quit`: close after writing the replies before it.
    pub(crate) quit: bool,
    /// The CAS unique of the item this connection's last write stored.
    pub(crate) written_cas: AtomicU64,
    /// Whether calls run here, are recorded, or replay answers from their keys' owners.
    pub(crate) script: RefCell<Script>,
    /// Where a recording's statistics go (nowhere: the replay counts).
    uncounted: Counters,
    /// Whether the client may run commands: it authenticated, or no users file is
    /// configured.
    pub(crate) authenticated: bool,
    /// Who the client is.
    pub(crate) subject: Option<weft_security::Subject>,
    /// A binary SASL exchange in progress.
    pub(crate) sasl: Option<crate::security::SaslExchange>,
    /// The text protocol's credentials, while they wait for the throttle's turn.
    pub(crate) auth_attempt: crate::security::Attempt,
    /// When the request just run is to run again: the throttle deferred its credentials
    /// (the connection loop waits, then runs it).
    pub(crate) auth_wait: Option<std::time::Instant>,
    /// Whether the SASL request run again after such a wait continues the exchange in
    /// progress rather than starting one.
    pub(crate) auth_wait_resumes: bool,
    /// What the connection may authenticate with (PLAIN always: memcached's clients know no
    /// other mechanism; OAUTHBEARER on TLS; EXTERNAL with a client certificate).
    pub(crate) offer: crate::security::SaslOffer,
    /// The client's address.
    pub(crate) peer: SocketAddr,
}

/// Whether a request ran to its end or paused for its output to be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Progress {
    Done,
    /// A multi-key retrieval to be resumed at this key once the output is written.
    More(usize),
}

impl Connection {
    /// Whether the client's user may run a command that needs `need` on this connection's
    /// cache (`crate::authorization`'s table); the denial's message otherwise.
    pub(crate) fn authorize(
        &self,
        need: crate::authorization::Need,
        operation: &str,
    ) -> Result<(), String> {
        let security = &self.context.security;
        if !security.authorizes() {
            return Ok(());
        }
        security
            .authorize(
                self.subject.as_ref(),
                "memcached",
                operation,
                need,
                Some((self.cache.name(), self.cache.config())),
            )
            .map_err(|denied| denied.to_string())
    }

    /// Whether the client's user may run a command that needs `need` on this connection's
    /// cache, with nothing logged.
    pub(crate) fn permits(&self, need: crate::authorization::Need) -> bool {
        self.context.security.permits(
            self.subject.as_ref(),
            need,
            Some((self.cache.name(), self.cache.config())),
        )
    }

    pub(crate) fn store(&self) -> Store<'_> {
        let recording = matches!(*self.script.borrow(), Script::Recording(_));
        Store {
            cache: &self.cache,
            limits: &self.limits,
            counters: if recording {
                &self.uncounted
            } else {
                &self.context.memcached.counters
            },
            written_cas: &self.written_cas,
            script: &self.script,
        }
    }

    pub(crate) fn set_verbosity(&self, level: u32) {
        self.context
            .memcached
            .verbosity
            .store(level, Ordering::Relaxed);
    }

    /// `flush_all [delay]`: clears the cache now, or schedules the clear for `delay` (an
    /// expiration time). Every item present when the clear runs goes, including items
    /// stored after the command, as in memcached. A later `flush_all` supersedes a pending
    /// one. Only the memcached cache is cleared.
    pub(crate) fn flush_all(&self, delay: i64) -> Result<(), CacheError> {
        let state = &self.context.memcached;
        bump(&state.counters.cmd_flush);
        let generation = state.flush_generation.fetch_add(1, Ordering::SeqCst) + 1;
        let when = if delay > 0 {
            Expiration::of(delay, || self.cache.clock().now_ms())
        } else {
            Expiration::None
        };
        let Expiration::After(wait) = when else {
            return self.cache.clear();
        };
        let cache = self.cache.clone();
        let current = Arc::clone(&state.flush_generation);
        tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            if current.load(Ordering::SeqCst) == generation {
                if let Err(error) = cache.clear() {
                    tracing::warn!(%error, cache = cache.name(), "delayed flush_all failed");
                }
            }
        });
        Ok(())
    }
}

/// A decoded request of either dialect.
enum Request {
    Text(TextRequest),
    Binary(BinaryRequest),
}

/// A stream memcached stops reading.
enum ProtocolError {
    Text(TextProtocolError),
    Binary(BinaryProtocolError),
}

enum Decoder {
    Text(TextDecoder),
    Binary(BinaryDecoder),
}

impl Decoder {
    /// Whether part of a request has arrived and the rest is awaited: bytes left in `input`
    /// once complete requests are taken, or a refused data block still being discarded as
    /// it arrives (which leaves nothing in `input`).
    fn is_mid_request(&self, input: &BytesMut) -> bool {
        !input.is_empty()
            || match self {
                Self::Text(decoder) => decoder.is_mid_request(),
                Self::Binary(decoder) => decoder.is_discarding(),
            }
    }

    fn decode(&mut self, input: &mut BytesMut) -> Result<Option<Request>, ProtocolError> {
        match self {
            Self::Text(decoder) => decoder
                .decode(input)
                .map(|request| request.map(Request::Text))
                .map_err(ProtocolError::Text),
            Self::Binary(decoder) => decoder
                .decode(input)
                .map(|request| request.map(Request::Binary))
                .map_err(ProtocolError::Binary),
        }
    }
}

/// Counts a connection in `curr_connections` while it lives.
struct Open<'a>(&'a Counters);

impl<'a> Open<'a> {
    fn new(counters: &'a Counters) -> Self {
        bump(&counters.curr_connections);
        bump(&counters.total_connections);
        Self(counters)
    }
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        self.0.curr_connections.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Serves one memcached connection until the client quits, the connection fails, a protocol
/// error occurs, or the server shuts down. `prefix` holds the bytes already read.
pub async fn serve(
    mut stream: Conn,
    prefix: BytesMut,
    peer: SocketAddr,
    context: Arc<ServerContext>,
    dialect: Dialect,
    deadline: RequestDeadline,
) {
    let cache_name = &context.settings.memcached_cache;
    let Some(cache) = context.manager.cache(cache_name) else {
        tracing::warn!(%peer, cache = %cache_name, "memcached connection refused: memcached-cache names no cache");
        if dialect == Dialect::Text {
            let _ = stream
                .send(format!("SERVER_ERROR no cache named {cache_name}\r\n").as_bytes())
                .await;
        }
        return;
    };
    let _open = Open::new(&context.memcached.counters);
    let limits = Limits {
        item_bytes_max: context.settings.memcached_item_bytes_max,
        ..Limits::default()
    };
    let decoder = match dialect {
        Dialect::Text => Decoder::Text(TextDecoder::new(limits)),
        Dialect::Binary => Decoder::Binary(BinaryDecoder::new(limits)),
    };
    let connection = Connection {
        context: Arc::clone(&context),
        cache,
        limits,
        quit: false,
        written_cas: AtomicU64::new(0),
        script: RefCell::new(Script::Off),
        uncounted: Counters::default(),
        authenticated: context.security.anonymous().is_some(),
        subject: context.security.anonymous(),
        sasl: None,
        auth_attempt: crate::security::Attempt::default(),
        auth_wait: None,
        auth_wait_resumes: false,
        offer: crate::security::SaslOffer {
            tls: stream.is_tls(),
            plain_in_clear: true,
            certificate: context
                .security
                .certificate_user(stream.peer_certificates()),
        },
        peer,
    };
    serve_connection(stream, prefix, peer, connection, decoder, deadline).await;
}

/// Settles the batch's writes, then writes `output` and empties it; false if the connection
/// must close.
async fn flush(
    stream: &mut Conn,
    output: &mut BytesMut,
    unsettled: &mut Durability,
    peer: SocketAddr,
    counters: &Counters,
) -> bool {
    if output.is_empty() {
        return true;
    }
    if !crate::settle(unsettled, peer).await || stream.send(output).await.is_err() {
        return false;
    }
    counters
        .bytes_written
        .fetch_add(output.len() as u64, Ordering::Relaxed);
    output.clear();
    true
}

async fn serve_connection(
    mut stream: Conn,
    prefix: BytesMut,
    peer: SocketAddr,
    mut connection: Connection,
    mut decoder: Decoder,
    mut deadline: RequestDeadline,
) {
    let context = Arc::clone(&connection.context);
    let counters = &context.memcached.counters;
    counters
        .bytes_read
        .fetch_add(prefix.len() as u64, Ordering::Relaxed);
    let mut input = prefix;
    input.reserve(crate::buffers::INITIAL_BYTES);
    let mut output = crate::buffers::new();
    let mut shutdown = context.shutdown_signal();
    // Writes to caches with stores not yet durable; no reply leaves before they are.
    let mut unsettled = Durability::default();
    loop {
        let mut processed = 0u64;
        loop {
            let request = match decoder.decode(&mut input) {
                Ok(Some(request)) => request,
                Ok(None) => break,
                Err(error) => {
                    match &error {
                        ProtocolError::Text(error) => {
                            tracing::debug!(%peer, %error, "closing memcached connection on protocol error");
                            error.write_reply(&mut output);
                        }
                        ProtocolError::Binary(error) => {
                            tracing::debug!(%peer, %error, "closing memcached connection on protocol error");
                            error.write_reply(&mut output);
                        }
                    }
                    let _ = flush(&mut stream, &mut output, &mut unsettled, peer, counters).await;
                    return;
                }
            };
            processed += 1;
            let started = std::time::Instant::now();
            let operation = operation_of(&request);
            // The other members are cleared ahead of the request, so only for a client that
            // may (the request's own check then refuses the others, and logs it).
            if let Some(node) = &context.cluster
                && connection.cache.config().mode.is_clustered()
                && flushes_now(&request)
                && connection.authenticated
                && connection.permits(crate::authorization::Need::Cache(
                    weft_security::authorization::Permissions::BULK_WRITE,
                ))
                && let Err(error) = node.clear_others(&connection.cache).await
            {
                tracing::warn!(%error, "flush_all did not reach every node");
            }
            if let Some(grid) = elsewhere(&connection, &request) {
                run_at_owners(&mut connection, &grid, &request, &mut output).await;
                context.telemetry.observe(
                    crate::telemetry::Protocol::Memcached,
                    operation,
                    started.elapsed(),
                );
                if connection.quit {
                    break;
                }
                continue;
            }
            let mut resume = 0;
            loop {
                let (progress, durability) = collect_durability(|| {
                    // No command runs in the middle of a RESP transaction (EXEC).
                    let _shared = context.transaction_gate.read();
                    match &request {
                        Request::Text(request) => {
                            text::execute(&mut connection, request, resume, &mut output)
                        }
                        Request::Binary(request) => {
                            binary::execute(&mut connection, request, &mut output);
                            Progress::Done
                        }
                    }
                });
                unsettled.merge(durability);
                if let Some(due) = connection.auth_wait.take() {
                    // Credentials waiting for the throttle's turn: what is ready goes out,
                    // and the request runs again when due.
                    if !flush(&mut stream, &mut output, &mut unsettled, peer, counters).await {
                        return;
                    }
                    tokio::select! {
                        biased;
                        () = crate::stopped(&mut shutdown) => return,
                        () = tokio::time::sleep_until(due.into()) => {}
                    }
                    continue;
                }
                match progress {
                    Progress::Done => break,
                    Progress::More(next) => {
                        resume = next;
                        if !flush(&mut stream, &mut output, &mut unsettled, peer, counters).await {
                            return;
                        }
                    }
                }
            }
            context.telemetry.observe(
                crate::telemetry::Protocol::Memcached,
                operation,
                started.elapsed(),
            );
            if connection.quit {
                break;
            }
            if output.len() >= OUTPUT_FLUSH_BYTES
                && !flush(&mut stream, &mut output, &mut unsettled, peer, counters).await
            {
                return;
            }
        }
        context
            .total_commands
            .fetch_add(processed, Ordering::Relaxed);
        deadline.decoded(processed > 0, decoder.is_mid_request(&input));
        if !flush(&mut stream, &mut output, &mut unsettled, peer, counters).await {
            return;
        }
        crate::buffers::release_output(&mut output);
        if connection.quit {
            let _ = stream.shutdown().await;
            return;
        }
        if input.len() >= context.settings.client_input_bytes_max {
            // What is left is one unfinished request (complete ones were executed above).
            tracing::warn!(%peer, pending = input.len(), limit = context.settings.client_input_bytes_max, "closing memcached connection: request exceeds client-input-bytes-max");
            return;
        }
        crate::buffers::prepare_input(&mut input, 0);
        // Shutdown first: requests already read have been answered above.
        tokio::select! {
            biased;
            () = crate::stopped(&mut shutdown) => {
                stream.close_gracefully().await;
                return;
            }
            read = stream.read_buf(&mut input) => match read {
                Ok(0) | Err(_) => return,
                Ok(read) => {
                    counters.bytes_read.fetch_add(read as u64, Ordering::Relaxed);
                    deadline.received(read);
                }
            },
            () = deadline.expired() => {
                tracing::debug!(%peer, pending = input.len(), "closing memcached connection: request not received within its deadline");
                return;
            }
        }
    }
}

/// The operation label of a request in the latency metrics: memcached's command name
/// (binary commands by the text command they match).
fn operation_of(request: &Request) -> &'static str {
    use weft_memcached::BinaryCommand as B;
    use weft_memcached::TextCommand as T;
    match request {
        Request::Text(request) => match &request.command {
            T::Get { kind, .. } => kind.name(),
            T::Store { mode, .. } | T::TooLarge { mode, .. } => mode.name(),
            T::Delete { .. } => "delete",
            T::Arithmetic { incr: true, .. } => "incr",
            T::Arithmetic { incr: false, .. } => "decr",
            T::Touch { .. } => "touch",
            T::FlushAll { .. } => "flush_all",
            T::Version => "version",
            T::Verbosity { .. } => "verbosity",
            T::Stats { .. } => "stats",
            _ => "other",
        },
        Request::Binary(request) => match &request.command {
            B::Get { .. } => "get",
            B::Touch { .. } => "touch",
            B::GetAndTouch { .. } => "gat",
            B::Store { mode, .. } => match mode {
                weft_memcached::binary::StoreMode::Set => "set",
                weft_memcached::binary::StoreMode::Add => "add",
                weft_memcached::binary::StoreMode::Replace => "replace",
            },
            B::Concat { append: true, .. } => "append",
            B::Concat { append: false, .. } => "prepend",
            B::Delete { .. } => "delete",
            B::Arithmetic { incr: true, .. } => "incr",
            B::Arithmetic { incr: false, .. } => "decr",
            B::Quit { .. } => "quit",
            B::Flush { .. } => "flush_all",
            B::Noop => "noop",
            B::Version => "version",
            B::Stat { .. } => "stats",
            B::Verbosity { .. } => "verbosity",
            B::SaslListMechs | B::Sasl { .. } => "sasl",
            _ => "other",
        },
    }
}

/// The keys a request names, and whether it writes.
fn keys_of(request: &Request) -> (Vec<bytes::Bytes>, bool) {
    use weft_memcached::BinaryCommand as B;
    use weft_memcached::TextCommand as T;
    match request {
        Request::Text(request) => match &request.command {
            T::Get { kind, keys } => (keys.iter_bytes().collect(), kind.touch().is_some()),
            T::Store { key, .. }
            | T::TooLarge { key, .. }
            | T::Delete { key }
            | T::Arithmetic { key, .. }
            | T::Touch { key, .. } => (vec![key.clone()], true),
            _ => (Vec::new(), false),
        },
        Request::Binary(request) => match &request.command {
            B::Get { key, .. } => (vec![key.clone()], false),
            B::Touch { key, .. }
            | B::GetAndTouch { key, .. }
            | B::Store { key, .. }
            | B::Concat { key, .. }
            | B::Delete { key, .. }
            | B::Arithmetic { key, .. }
            | B::TooLarge { key, .. } => (vec![key.clone()], true),
            _ => (Vec::new(), false),
        },
    }
}

/// Registers the grid functions memcached's calls run as at their keys' owners.
pub fn register_functions(
    functions: &weft_core::operation::Functions,
    settings: &crate::config::ServerSection,
) {
    let limits = Limits {
        item_bytes_max: settings.memcached_item_bytes_max,
        ..Limits::default()
    };
    functions.register(ops::FUNCTION, Arc::new(ops::CallFunction { limits }));
}

/// The clustered cache a request's calls run on, when another member owns one of its keys
/// (a client that is not cluster-aware, or one a topology change overtook); `None` when
/// every key is this member's.
fn elsewhere(connection: &Connection, request: &Request) -> Option<GridCache> {
    let node = connection.context.cluster.as_ref()?;
    if !connection.cache.config().mode.is_clustered() {
        return None;
    }
    let (keys, write) = keys_of(request);
    let routing = node.routing();
    // Elsewhere also when this member is starting (not joined), leaving, or handing a key's
    // segment over: the grid runs each call at its owner, or waits until a topology does.
    let remote = keys.iter().any(|key| {
        let segment = connection.cache.segment_of(key);
        !routing.runs_here(connection.cache.name(), segment, !write)
    });
    remote.then(|| GridCache::new(Arc::clone(node), connection.cache.clone()))
}

/// Runs `request` with each of its calls at its key's owner (see [`Script`]), appending
/// its replies.
async fn run_at_owners(
    connection: &mut Connection,
    grid: &GridCache,
    request: &Request,
    out: &mut BytesMut,
) {
    connection
        .context
        .routed
        .count(crate::cluster::Origin::Memcached);
    *connection.script.borrow_mut() = Script::Recording(Vec::new());
    execute_whole(connection, request, &mut BytesMut::new());
    let calls = match std::mem::take(&mut *connection.script.borrow_mut()) {
        Script::Recording(calls) => calls,
        _ => Vec::new(),
    };
    let mut answers = std::collections::VecDeque::with_capacity(calls.len());
    for call in &calls {
        let argument = ops::encode_call(call);
        let answer = grid
            .invoke(ops::FUNCTION, call.key(), argument, call.writes())
            .await
            .map_err(|error| crate::cluster::cache_error_of(grid.name(), error))
            .and_then(|bytes| {
                ops::decode_answer(&bytes).ok_or_else(|| {
                    crate::cluster::cache_error_of(
                        grid.name(),
                        weft_grid::GridError::Cluster(
                            "a malformed answer from the key's owner".to_owned(),
                        ),
                    )
                })
            });
        answers.push_back(answer);
    }
    *connection.script.borrow_mut() = Script::Replaying(answers);
    execute_whole(connection, request, out);
    *connection.script.borrow_mut() = Script::Off;
}

/// Runs `request` to its end (a retrieval is not paused for output here).
fn execute_whole(connection: &mut Connection, request: &Request, out: &mut BytesMut) {
    let context = Arc::clone(&connection.context);
    let _shared = context.transaction_gate.read();
    match request {
        Request::Text(request) => {
            let mut resume = 0;
            while let Progress::More(next) = text::execute(connection, request, resume, out) {
                resume = next;
            }
        }
        Request::Binary(request) => binary::execute(connection, request, out),
    }
}

/// Whether the request is a `flush_all` that clears at once (a delayed one clears only
/// this node when its time comes).
fn flushes_now(request: &Request) -> bool {
    match request {
        Request::Text(request) => {
            matches!(request.command, weft_memcached::TextCommand::FlushAll { delay } if delay <= 0)
        }
        Request::Binary(request) => matches!(
            request.command,
            weft_memcached::BinaryCommand::Flush { exptime, .. } if exptime.is_none_or(|at| at == 0)
        ),
    }
}
