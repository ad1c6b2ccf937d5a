//! Serves one decoded request against its cache and appends the response.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use std::sync::atomic::Ordering;
use weft_core::media::{key_from_stored, key_to_stored, value_from_stored, value_to_stored};
use weft_core::operation::{Applied, Functions, Operation, WriteSpec};
use weft_core::{Cache, CacheEntry, EntryMetadata, Expiry, Format, VersionedOutcome, WriteOptions};
use weft_grid::GridCache;

use weft_hotrod::opcode;
use weft_hotrod::response::{put_metadata, put_ping_body, put_previous, write_error, write_header};
use weft_hotrod::wire::{put_array, put_string, put_vint, put_vlong};
use weft_hotrod::{
    Expiration, Frame, Lifetime, MediaType, Metadata, Request, Status, Topology, VERSION_MAX, flags,
};

use super::Connection;

/// Number of request opcodes PING advertises.
const SERVER_VERSION: u8 = VERSION_MAX;

/// A failed request: the status and message of its error response.
pub(super) struct Failure {
    pub(super) status: Status,
    pub(super) message: String,
}

impl Failure {
    pub(super) fn server(message: impl Into<String>) -> Self {
        Self {
            status: Status::ServerError,
            message: message.into(),
        }
    }
}

impl From<weft_core::CacheError> for Failure {
    fn from(error: weft_core::CacheError) -> Self {
        let status = match error {
            weft_core::CacheError::Removed { .. } => Status::IllegalLifecycleState,
            _ => Status::ServerError,
        };
        Self {
            status,
            message: error.to_string(),
        }
    }
}

impl From<weft_core::operation::Failure> for Failure {
    fn from(failure: weft_core::operation::Failure) -> Self {
        match failure {
            weft_core::operation::Failure::Cache(error) => Self::from(error),
            other => Self::server(other.to_string()),
        }
    }
}

impl From<weft_core::TranscodeError> for Failure {
    fn from(error: weft_core::TranscodeError) -> Self {
        Self::server(error.to_string())
    }
}

/// The failure of a read of a key that holds a Redis data structure (written over RESP by
/// LPUSH, HSET, SADD, ZADD…): Hot Rod has no form for it, and an empty value would be a lie.
/// Writes are not refused: they replace the structure, as Redis' SET does.
pub(super) fn holds_structure(entry: &CacheEntry) -> Option<Failure> {
    let kind = entry.structure()?.lock().kind();
    Some(Failure::server(kind.unreadable_message()))
}

/// The message clients search for to detect a missing cache.
pub(super) fn cache_not_found(name: &str) -> Failure {
    Failure {
        status: Status::RequestParsingError,
        message: format!(
            "org.infinispan.server.hotrod.CacheNotFoundException: Cache with name '{name}' not found amongst the configured caches"
        ),
    }
}

/// The request's view of its cache: the cache, and the formats keys and values travel in.
pub(super) struct Target {
    pub(super) cache: Cache,
    pub(super) formats: Formats,
}

/// The formats a request's keys and values are stored in and travel in, and the conversions
/// between them (`weft_core::media`'s Hot Rod ones, which keep a ProtoStream client's Java
/// types in a text or octet-stream cache).
#[derive(Debug, Clone, Copy)]
pub(super) struct Formats {
    pub(super) stored_key: Format,
    pub(super) stored_value: Format,
    pub(super) wire_key: Format,
    pub(super) wire_value: Format,
}

impl Target {
    pub(super) fn new(cache: Cache, frame: &Frame) -> Self {
        let stored_key = cache.key_format();
        let stored_value = cache.value_format();
        // A request that names no media type speaks the cache's own.
        let wire = |media: &MediaType, stored: Format| {
            media.essence().map_or(stored, Format::from_media_type)
        };
        Self {
            formats: Formats {
                wire_key: wire(&frame.header.key_type, stored_key),
                wire_value: wire(&frame.header.value_type, stored_value),
                stored_key,
                stored_value,
            },
            cache,
        }
    }

    pub(super) fn key_in<'a>(&self, key: &'a [u8]) -> Result<Cow<'a, [u8]>, Failure> {
        self.formats.key_in(key)
    }

    fn value_in<'a>(&self, value: &'a [u8]) -> Result<(Cow<'a, [u8]>, u32), Failure> {
        self.formats.value_in(value)
    }

    pub(super) fn key_out<'a>(&self, key: &'a [u8]) -> Result<Cow<'a, [u8]>, Failure> {
        self.formats.key_out(key)
    }

    pub(super) fn value_out<'a>(&self, entry: &'a CacheEntry) -> Result<Cow<'a, [u8]>, Failure> {
        self.formats.value_out(entry)
    }
}

impl Formats {
    /// A key as the cache stores it.
    pub(super) fn key_in<'a>(&self, key: &'a [u8]) -> Result<Cow<'a, [u8]>, Failure> {
        Ok(key_to_stored(key, self.wire_key, self.stored_key)?)
    }

    /// A value as the cache stores it, and the client flags that keep its type.
    pub(super) fn value_in<'a>(&self, value: &'a [u8]) -> Result<(Cow<'a, [u8]>, u32), Failure> {
        Ok(value_to_stored(value, self.wire_value, self.stored_value)?)
    }

    /// A stored key as the request sends it.
    pub(super) fn key_out<'a>(&self, key: &'a [u8]) -> Result<Cow<'a, [u8]>, Failure> {
        Ok(key_from_stored(key, self.stored_key, self.wire_key)?)
    }

    /// A stored entry's value as the request reads it.
    pub(super) fn value_out<'a>(&self, entry: &'a CacheEntry) -> Result<Cow<'a, [u8]>, Failure> {
        Ok(value_from_stored(
            entry.value(),
            entry.user_flags(),
            self.stored_value,
            self.wire_value,
        )?)
    }
}

/// The cache a request names (empty = the default cache).
pub(super) fn lookup(connection: &Connection, name: &str) -> Option<Cache> {
    let name = if name.is_empty() {
        weft_core::DEFAULT_CACHE_NAME
    } else {
        name
    };
    connection.context.manager.cache(name)
}

/// Serves `frame`, appending its response (or error response) to `out`.
pub(super) fn process(connection: &Arc<Connection>, frame: &Frame, out: &mut BytesMut) {
    let start = out.len();
    if let Err(failure) = serve(connection, frame, out) {
        out.truncate(start);
        write_error(
            out,
            frame.header.message_id,
            failure.status,
            &failure.message,
        );
    }
}

/// Requests a client may send before it authenticates: PING, and the SASL exchange.
pub(super) fn allowed_unauthenticated(frame: &Frame) -> bool {
    matches!(
        frame.request,
        Request::Ping | Request::AuthMechList | Request::Auth { .. }
    )
}

/// Whether the client's user may make this request (`crate::authorization`'s table), on the
/// cache it names; Infinispan's ISPN000287 error response otherwise. Called only when the
/// server authorizes.
pub(super) fn authorize(connection: &Connection, frame: &Frame, out: &mut BytesMut) -> bool {
    use crate::authorization::{self, Need};
    let need = authorization::hotrod(&frame.request);
    if need == Need::Nothing {
        return true;
    }
    let cache = lookup(connection, frame.cache_name());
    let subject = connection.subject.lock();
    let opcode = frame.request.opcode();
    match connection.context.security.authorize(
        subject.as_ref(),
        "Hot Rod",
        format_args!("{opcode:#04x}"),
        need,
        cache.as_ref().map(|cache| (cache.name(), cache.config())),
    ) {
        Ok(()) => true,
        Err(denied) => {
            let text = unauthorized(&denied, subject.as_ref(), connection.peer.ip());
            // Infinispan's admin tasks wrap the denial in a CacheException.
            let message = if matches!(&frame.request, Request::Exec { task, .. } if task.starts_with("@@"))
            {
                format!(
                    "org.infinispan.commons.CacheException: {text}\njava.lang.SecurityException: {text}"
                )
            } else {
                format!("java.lang.SecurityException: {text}")
            };
            write_error(out, frame.header.message_id, Status::ServerError, &message);
            false
        }
    }
}

/// Infinispan's ISPN000287 text, with the subject as its server prints one to a Hot Rod
/// client: the user, a principal per role, and the client's address.
fn unauthorized(
    denied: &crate::authorization::Denied,
    subject: Option<&weft_security::Subject>,
    peer: std::net::IpAddr,
) -> String {
    let mut principals = vec![denied.user.clone()];
    if let Some(subject) = subject {
        principals.extend(
            subject
                .roles()
                .iter()
                .map(|role| format!("RolePrincipal{{name='{role}'}}")),
        );
    }
    principals.push(format!("InetAddressPrincipal [address={peer}/{peer}]"));
    format!(
        "ISPN000287: Unauthorized access: subject 'Subject with principal(s): [{}]' lacks '{}' permission",
        principals.join(", "),
        denied.permission
    )
}

/// Answers a request sent before authenticating, as Infinispan does: an error naming it.
pub(super) fn refuse_unauthenticated(connection: &Connection, frame: &Frame, out: &mut BytesMut) {
    tracing::debug!(
        connection = connection.id,
        opcode = frame.request.opcode(),
        "Hot Rod request refused: not authenticated"
    );
    let opcode = frame.request.opcode();
    let operation =
        weft_hotrod::opcode::name(opcode).map_or_else(|| format!("{opcode:#04x}"), str::to_owned);
    write_error(
        out,
        frame.header.message_id,
        Status::ServerError,
        &format!(
            "java.lang.SecurityException: ISPN006017: Operation '{operation}' requires authentication"
        ),
    );
}

use crate::security::SaslStep;

/// A failed SASL exchange as Infinispan's server (WildFly Elytron) answers it: a wrong
/// PLAIN password with status 0x84 and Elytron's words; a SCRAM proof (or a bearer token,
/// or a certificate's identity) that does not check out with 0x85 and ISPN028027. An unknown
/// user fails as a wrong password does — where Infinispan names it unknown (ELY05161) at
/// the first SCRAM step, Weft runs the exchange against a decoy, so that nobody can tell
/// which users exist.
fn sasl_failure(mechanism: &str, error: &weft_security::sasl::SaslError) -> Failure {
    use weft_security::sasl::SaslError;
    match error {
        SaslError::Failed if mechanism == weft_security::sasl::PLAIN => Failure {
            status: Status::RequestParsingError,
            message: "javax.security.sasl.SaslException: ELY05013: Authentication mechanism password not verified".to_owned(),
        },
        SaslError::Failed => Failure::server(
            "java.lang.SecurityException: ISPN028027: Invalid credentials\njavax.security.sasl.SaslException: ELY05055: Authentication rejected (invalid proof)",
        ),
        other => Failure {
            status: Status::RequestParsingError,
            message: format!("javax.security.sasl.SaslException: {other}"),
        },
    }
}

/// One step of a SASL exchange: a mechanism name starts one (the Java client sends it with
/// every step; an empty name continues the exchange in progress). Answers `complete` and
/// the server's challenge; a failed exchange is an error response, and the client may start
/// again.
fn auth(
    connection: &Connection,
    frame: &Frame,
    mechanism: &str,
    response: &[u8],
    out: &mut BytesMut,
) -> Result<(), Failure> {
    let security = &connection.context.security;
    let mut sasl = connection.sasl.lock();
    if sasl.is_none() {
        if connection.authenticated.load(Ordering::Acquire) && security.required() {
            return Err(Failure::server("ISPN006016: already authenticated"));
        }
        match security.start_sasl(
            connection.peer.ip(),
            "Hot Rod",
            mechanism,
            &connection.offer,
        ) {
            Ok(exchange) => *sasl = Some(exchange),
            // Infinispan's words for a mechanism it does not offer.
            Err(weft_security::sasl::SaslError::Unsupported(name)) => {
                return Err(Failure::server(format!(
                    "java.lang.IllegalArgumentException: ISPN028028: Invalid mech '{name}'"
                )));
            }
            Err(error) => return Err(Failure::server(format!("ISPN006010: {error}"))),
        }
    }
    let Some(exchange) = sasl.as_mut() else {
        return Err(Failure::server("ISPN006010: no SASL exchange"));
    };
    match exchange.step(response) {
        SaslStep::Wait(due) => {
            // Nothing answered yet: the connection loop waits, then runs this again.
            *connection.auth_wait.lock() = Some(due);
            Ok(())
        }
        SaslStep::Throttled(message) => {
            *sasl = None;
            Err(Failure::server(message))
        }
        SaslStep::Continue(challenge) => {
            plain_header(out, frame, Status::Success);
            out.extend_from_slice(&[0]);
            put_array(out, &challenge);
            Ok(())
        }
        SaslStep::Done { subject, last } => {
            *sasl = None;
            tracing::debug!(connection = connection.id, user = %subject.name, "Hot Rod client authenticated");
            *connection.subject.lock() = Some(subject);
            connection.authenticated.store(true, Ordering::Release);
            // As Infinispan answers: `complete` only when the mechanism has nothing more to
            // say. SCRAM's last message (the server's signature) goes with `complete = 0`;
            // the client checks it and sends nothing more (the Java client reads a complete
            // answer's challenge as none, and its SCRAM would never finish). Its OAUTHBEARER
            // (WildFly Elytron's) likewise completes only on reading the server's (empty)
            // answer, so that one goes with `complete = 0` too.
            let complete = last.is_empty() && mechanism != weft_security::sasl::OAUTHBEARER;
            plain_header(out, frame, Status::Success);
            out.extend_from_slice(&[u8::from(complete)]);
            put_array(out, &last);
            Ok(())
        }
        SaslStep::Failed(error) => {
            *sasl = None;
            Err(sasl_failure(mechanism, &error))
        }
    }
}

/// The topology to send with a response, if the client's view is out of date.
///
/// A clustered cache's is the agreed one: every member's Hot Rod endpoint, and each
/// segment's owners with the one that orders its writes first, so that a client sends each
/// key where it runs without a hop. Any other cache lives on this node alone: the topology
/// lists this server (at the address the client reached) as the owner of every segment.
fn topology(connection: &Connection, frame: &Frame, cache: &Cache) -> Option<(Topology, u8)> {
    let intelligence = frame.header.intelligence;
    if intelligence < 2 {
        return None;
    }
    if let Some(topology) = clustered_topology(connection, frame, cache) {
        return topology.map(|topology| (topology, intelligence));
    }
    // A cache of this node alone on a clustered server: no topology, as Infinispan sends
    // none for a local cache. Each node's own single-server list would contradict the
    // others', and a client would drop the connections it shares with clustered caches.
    if connection.context.cluster.is_some() {
        return None;
    }
    let segments = cache.segment_count();
    let (host, port) = &connection.advertised;
    let id = topology_id(host, *port, segments);
    if frame.header.topology_id == id {
        return None;
    }
    Some((
        Topology {
            id,
            servers: vec![(host.clone(), *port)],
            segment_owners: Some(vec![vec![0]; segments as usize]),
        },
        intelligence,
    ))
}

/// The agreed topology of a clustered cache (`Some(None)` when the client has it already),
/// or `None` when the cache is not clustered here.
fn clustered_topology(
    connection: &Connection,
    frame: &Frame,
    cache: &Cache,
) -> Option<Option<Topology>> {
    if !cache.config().mode.is_clustered() {
        return None;
    }
    let node = connection.context.cluster.as_ref()?;
    let routing = node.routing();
    let route = routing.cache(cache.name())?;
    // The agreed ids count up from 1; clients reserve -1 and -2.
    let id = i32::try_from(route.topology.id()).unwrap_or(i32::MAX);
    if frame.header.topology_id == id {
        return Some(None);
    }
    let members = route.topology.members();
    let mut servers = Vec::with_capacity(members.len());
    for member in &members {
        let endpoint = routing.node(member)?.endpoint;
        servers.push((endpoint.ip().to_string(), endpoint.port()));
    }
    let index = |id: &weft_cluster::MemberId| {
        members
            .iter()
            .position(|member| member == id)
            .and_then(|i| u32::try_from(i).ok())
    };
    let owners = route
        .segments
        .iter()
        .map(|segment| segment.write.iter().filter_map(index).collect())
        .collect();
    Some(Some(Topology {
        id,
        servers,
        segment_owners: Some(owners),
    }))
}

/// Sends the response to `frame` that a task off the reading loop produced, through the
/// connection's outbound queue: the bytes written, or the failure's error response.
pub(super) async fn send_later(
    connection: &Connection,
    frame: &Frame,
    response: Result<BytesMut, Failure>,
) {
    let bytes = match response {
        Ok(out) => out.freeze(),
        Err(failure) => {
            let mut out = BytesMut::new();
            write_error(
                &mut out,
                frame.header.message_id,
                failure.status,
                &failure.message,
            );
            out.freeze()
        }
    };
    let message = super::Outbound {
        bytes,
        _permit: None,
    };
    let _ = connection.outbound.send(message).await;
}

/// Answers SIZE and CLEAR on a clustered cache across the cluster, through the connection's
/// outbound queue; returns false for any other request (served as usual).
pub(super) fn cluster_wide(connection: &Arc<Connection>, frame: &Frame) -> bool {
    if !matches!(frame.request, Request::Size | Request::Clear) {
        return false;
    }
    let Some(node) = connection.context.cluster.clone() else {
        return false;
    };
    let Some(cache) = lookup(connection, frame.cache_name()) else {
        return false;
    };
    if !cache.config().mode.is_clustered() {
        return false;
    }
    let connection = Arc::clone(connection);
    let frame = frame.clone();
    tokio::spawn(async move {
        let outcome = match frame.request {
            Request::Size => node.cluster_size(&cache).await.map(Some),
            _ => node.cluster_clear(&cache).await.map(|()| None),
        };
        let response = outcome
            .map(|size| {
                let mut out = BytesMut::new();
                header(&mut out, &connection, &frame, &cache, Status::Success);
                if let Some(size) = size {
                    put_vlong(&mut out, size);
                }
                out
            })
            .map_err(Failure::from);
        send_later(&connection, &frame, response).await;
    });
    true
}

/// Serves PUT_ALL and GET_ALL on a clustered cache whose keys are not all this node's:
/// each key is written or read at its primary, off the connection's reading loop, and the
/// response goes through the connection's outbound queue. False for any other request, or
/// when every key is this node's (served as usual).
pub(super) fn multi_key_clustered(connection: &Arc<Connection>, frame: &Frame) -> bool {
    use crate::cluster::routing::Route;
    let (keys, write) = match &frame.request {
        Request::GetAll { keys } => (keys.clone(), false),
        Request::PutAll { entries, .. } => (entries.iter().map(|(k, _)| *k).collect(), true),
        _ => return false,
    };
    let Some(node) = connection.context.cluster.clone() else {
        return false;
    };
    let Some(cache) = lookup(connection, frame.cache_name()) else {
        return false;
    };
    if !cache.config().mode.is_clustered() {
        return false;
    }
    let target = Target::new(cache.clone(), frame);
    let routing = node.routing();
    let all_here = keys.iter().all(|&key| {
        // A key that does not convert fails on the usual path, with the usual error.
        let Ok(stored) = target.key_in(frame.slice(key)) else {
            return true;
        };
        let segment = cache.segment_of(&stored);
        let route = if write {
            routing.write_route(cache.name(), segment)
        } else {
            routing.read_route(cache.name(), segment)
        };
        route == Route::Local
    });
    if all_here {
        return false;
    }
    let connection = Arc::clone(connection);
    let frame = frame.clone();
    tokio::spawn(async move {
        let target = Target::new(cache.clone(), &frame);
        let outcome = match &frame.request {
            Request::PutAll {
                expiration,
                entries,
            } => put_all_at_primaries(&node, &target, &frame, *expiration, entries).await,
            Request::GetAll { keys } => get_all_at_primaries(&node, &target, &frame, keys).await,
            _ => Ok(Vec::new()),
        };
        let response = outcome.map(|body| {
            let mut out = BytesMut::new();
            header(&mut out, &connection, &frame, &cache, Status::Success);
            out.extend_from_slice(&body);
            out
        });
        send_later(&connection, &frame, response).await;
    });
    true
}

/// PUT_ALL over the keys' primaries; the response body (none). Client flags are per write:
/// one write per flags value (one, unless the client mixed value types).
async fn put_all_at_primaries(
    node: &weft_grid::node::Node,
    target: &Target,
    frame: &Frame,
    expiration: Expiration,
    entries: &[(weft_hotrod::Span, weft_hotrod::Span)],
) -> Result<Vec<u8>, Failure> {
    let mut converted = Vec::with_capacity(entries.len());
    for &(key, value) in entries {
        let (value, flags) = target.value_in(frame.slice(value))?;
        converted.push((
            target.key_in(frame.slice(key))?.into_owned(),
            value.into_owned(),
            flags,
        ));
    }
    let now = target.cache.clock().now_ms();
    let options = write_options(frame, expiration, now);
    for flags in distinct_flags(&converted) {
        let group = converted
            .iter()
            .filter(|(_, _, f)| *f == flags)
            .map(|(k, v, _)| (k.clone(), v.clone()))
            .collect();
        node.put_at_primaries(&target.cache, group, &options.user_flags(flags))
            .await?;
    }
    Ok(Vec::new())
}

/// GET_ALL over the keys' primaries; the response body (count, then key/value pairs).
async fn get_all_at_primaries(
    node: &weft_grid::node::Node,
    target: &Target,
    frame: &Frame,
    keys: &[weft_hotrod::Span],
) -> Result<Vec<u8>, Failure> {
    let mut stored = Vec::with_capacity(keys.len());
    for key in keys {
        stored.push(target.key_in(frame.slice(*key))?.into_owned());
    }
    let found = node.get_at_primaries(&target.cache, stored.clone()).await?;
    let mut pairs = Vec::new();
    for (key, stored_key) in keys.iter().zip(&stored) {
        // A key holding a Redis structure is left out, as an absent key is.
        if let Some(entry) = found.get(stored_key)
            && entry.structure().is_none()
        {
            pairs.push((frame.slice(*key), target.value_out(entry)?.into_owned()));
        }
    }
    let mut body = BytesMut::new();
    put_vint(&mut body, pairs.len() as u32);
    for (key, value) in pairs {
        put_array(&mut body, key);
        put_array(&mut body, &value);
    }
    Ok(body.to_vec())
}

/// The keyed operation of `frame` and the clustered cache it runs on, when another member
/// owns its key (a client without the topology, or one a change overtook); `None` when it
/// runs here.
pub(super) fn elsewhere(connection: &Connection, frame: &Frame) -> Option<(GridCache, Operation)> {
    let node = connection.context.cluster.as_ref()?;
    let cache = lookup(connection, frame.cache_name())?;
    if !cache.config().mode.is_clustered() {
        return None;
    }
    let target = Target::new(cache, frame);
    let now = target.cache.clock().now_ms();
    // A request that does not convert fails here, with the usual error.
    let operation = operation_of(frame, &target, now).ok()??;
    // Elsewhere also when this member is starting (not joined), leaving, or handing the
    // key's segment over: the grid runs it at the owner, or waits until a topology does.
    let segment = target.cache.segment_of(operation.key());
    if node
        .routing()
        .runs_here(target.cache.name(), segment, !operation.is_write())
    {
        return None;
    }
    Some((GridCache::new(Arc::clone(node), target.cache), operation))
}

/// Runs `operation` at its key's owner and sends the response to `frame` through the
/// connection's outbound queue (Hot Rod clients match responses by message id).
pub(super) fn run_elsewhere(
    connection: &Arc<Connection>,
    frame: Frame,
    grid: GridCache,
    operation: Operation,
) {
    connection
        .context
        .routed
        .count(crate::cluster::Origin::HotRod);
    let connection = Arc::clone(connection);
    let started = std::time::Instant::now();
    tokio::spawn(async move {
        let response = match grid.apply(operation).await {
            Ok(applied) => {
                let target = Target::new(grid.local().clone(), &frame);
                let now = target.cache.clock().now_ms();
                let mut out = BytesMut::new();
                respond(&mut out, &connection, &frame, &target, applied, now).map(|()| out)
            }
            Err(error) => Err(Failure::from(error)),
        };
        connection.context.telemetry.observe(
            crate::telemetry::Protocol::HotRod,
            crate::telemetry::hotrod_operation(frame.header.opcode),
            started.elapsed(),
        );
        send_later(&connection, &frame, response).await;
    });
}

impl From<weft_grid::GridError> for Failure {
    /// Hot Rod's form of a grid failure: an owner that cannot be reached is a suspected node
    /// (the client retries elsewhere once its topology changes); what the owner's cache
    /// refused reads as the local refusal would.
    fn from(error: weft_grid::GridError) -> Self {
        match error {
            weft_grid::GridError::Cache(error) => Self::from(error),
            weft_grid::GridError::Transport(error) => Self {
                status: Status::NodeSuspected,
                message: format!("the owner of this key is unreachable ({error}); retry"),
            },
            other => Self::server(other.to_string()),
        }
    }
}

/// A stable id for a membership: never −1 or −2, which clients use as "none" and "switch".
fn topology_id(host: &str, port: u16, segments: u32) -> i32 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in host
        .bytes()
        .chain(port.to_be_bytes())
        .chain(segments.to_be_bytes())
    {
        hash = (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193);
    }
    (hash & 0x3fff_ffff) as i32 + 1
}

/// Appends a response header with no topology (for requests that name no cache).
pub(super) fn plain_header(out: &mut BytesMut, frame: &Frame, status: Status) {
    let response_opcode = opcode::response_of(frame.header.opcode);
    write_header(out, frame.header.message_id, response_opcode, status, None);
}

pub(super) fn header(
    out: &mut BytesMut,
    connection: &Connection,
    frame: &Frame,
    cache: &Cache,
    status: Status,
) {
    let topology = topology(connection, frame, cache);
    write_header(
        out,
        frame.header.message_id,
        opcode::response_of(frame.header.opcode),
        status,
        topology
            .as_ref()
            .map(|(t, intelligence)| (t, *intelligence)),
    );
}

pub(super) fn metadata_of(metadata: &EntryMetadata, now_ms: u64) -> Metadata {
    let seconds = |ms: u64| u32::try_from(ms / 1000).unwrap_or(u32::MAX);
    let millis = |ms: u64| i64::try_from(ms).unwrap_or(i64::MAX);
    Metadata {
        lifespan: metadata
            .lifespan_ms
            .map(|l| (millis(metadata.created_ms.unwrap_or(now_ms)), seconds(l))),
        max_idle: metadata
            .max_idle_ms
            .map(|i| (millis(metadata.last_used_ms.unwrap_or(now_ms)), seconds(i))),
        version: metadata.version,
    }
}

pub(super) fn expiry_of(expiration: Expiration, now_ms: u64) -> Expiry {
    let lifetime = |lifetime: Lifetime| match lifetime {
        Lifetime::Default => weft_core::Lifetime::Default,
        Lifetime::Infinite => weft_core::Lifetime::Never,
        Lifetime::After(duration) => weft_core::Lifetime::After(duration),
        Lifetime::Until(at) => {
            let at_ms = u64::try_from(at.as_millis()).unwrap_or(u64::MAX);
            weft_core::Lifetime::After(Duration::from_millis(at_ms.saturating_sub(now_ms).max(1)))
        }
    };
    Expiry {
        lifespan: lifetime(expiration.lifespan),
        max_idle: lifetime(expiration.max_idle),
    }
}

fn write_options(frame: &Frame, expiration: Expiration, now_ms: u64) -> WriteOptions {
    WriteOptions {
        expiry: expiry_of(expiration, now_ms),
        ignore_return_values: !frame.header.has_flag(flags::FORCE_RETURN_VALUE),
        skip_listeners: frame.header.has_flag(flags::SKIP_LISTENER_NOTIFICATION),
        ..WriteOptions::default()
    }
}

/// Appends status 3/4 and the previous entry when the client asked for previous values,
/// else the bare `plain` status.
///
/// A previous entry holding a Redis structure has no value to send: when the write replaced
/// it, it is reported as no previous value; when nothing was written (`plain` is
/// `NotExecuted`, the client asked for the current value instead), the request fails as a
/// read of it would.
fn previous(
    out: &mut BytesMut,
    connection: &Connection,
    frame: &Frame,
    target: &Target,
    plain: Status,
    with_value: Status,
    entry: Option<&CacheEntry>,
) -> Result<(), Failure> {
    if !frame.header.has_flag(flags::FORCE_RETURN_VALUE) {
        header(out, connection, frame, &target.cache, plain);
        return Ok(());
    }
    let entry = match entry {
        Some(current) if current.structure().is_some() => {
            if plain == Status::NotExecuted
                && let Some(failure) = holds_structure(current)
            {
                return Err(failure);
            }
            None
        }
        other => other,
    };
    let now = target.cache.clock().now_ms();
    let value = entry.map(|e| target.value_out(e)).transpose()?;
    header(out, connection, frame, &target.cache, with_value);
    let metadata = entry.map(|e| metadata_of(&e.metadata(), now));
    put_previous(
        out,
        frame.header.effective_version(),
        metadata.as_ref().zip(value.as_deref()),
    );
    Ok(())
}

fn serve(connection: &Arc<Connection>, frame: &Frame, out: &mut BytesMut) -> Result<(), Failure> {
    let name = frame.cache_name();
    // Requests that need no cache.
    match &frame.request {
        Request::Exec { task, .. } => {
            return super::admin::exec(connection, frame, task, out);
        }
        Request::AuthMechList => {
            let mechanisms = connection
                .context
                .security
                .sasl_mechanisms(&connection.offer);
            plain_header(out, frame, Status::Success);
            put_vint(out, u32::try_from(mechanisms.len()).unwrap_or(0));
            for mechanism in mechanisms {
                put_string(out, mechanism);
            }
            return Ok(());
        }
        Request::Auth {
            mechanism,
            response,
        } => {
            return auth(connection, frame, mechanism, &frame.bytes(*response), out);
        }
        Request::IterationNext { id } => {
            return super::iteration::next(connection, frame, id, out);
        }
        Request::IterationEnd { id } => {
            let status = if connection.context.hotrod.iterations.end(id, connection) {
                Status::Success
            } else {
                Status::InvalidIteration
            };
            plain_header(out, frame, status);
            return Ok(());
        }
        Request::RemoveClientListener { listener_id } => {
            let removed = connection
                .context
                .hotrod
                .listeners
                .remove(connection.id, frame.slice(*listener_id));
            let status = if removed {
                Status::Success
            } else {
                Status::NotExecuted
            };
            plain_header(out, frame, status);
            return Ok(());
        }
        _ => {}
    }
    let cache = lookup(connection, name).ok_or_else(|| cache_not_found(name))?;
    let target = Target::new(cache, frame);
    let cache = &target.cache;
    let now = cache.clock().now_ms();
    if let Some(operation) = operation_of(frame, &target, now)? {
        // Hot Rod's keyed requests are built-in operations: no function to look up.
        let applied = operation.apply(cache, Functions::none())?;
        return respond(out, connection, frame, &target, applied, now);
    }
    match &frame.request {
        Request::Ping => {
            header(out, connection, frame, cache, Status::Success);
            let key_type = advertised_media_type(target.formats.stored_key);
            let value_type = advertised_media_type(target.formats.stored_value);
            put_ping_body(
                out,
                frame.header.effective_version(),
                &key_type,
                &value_type,
                SERVER_VERSION,
                &opcode::SERVED,
            );
        }
        Request::Clear => {
            cache.clear()?;
            header(out, connection, frame, cache, Status::Success);
        }
        Request::Size => {
            header(out, connection, frame, cache, Status::Success);
            put_vlong(out, cache.size() as u64);
        }
        Request::Stats => {
            let stats = cache.statistics();
            let hotrod = &connection.context.hotrod;
            let entries = cache.size() as u64;
            let pairs: [(&str, u64); 13] = [
                ("timeSinceStart", cache.uptime().as_secs()),
                ("currentNumberOfEntries", entries),
                ("approximateEntries", entries),
                ("approximateEntriesUnique", entries),
                ("totalNumberOfEntries", stats.stores),
                ("stores", stats.stores),
                ("retrievals", stats.hits + stats.misses),
                ("hits", stats.hits),
                ("misses", stats.misses),
                ("removeHits", stats.remove_hits),
                ("removeMisses", stats.remove_misses),
                (
                    "totalBytesRead",
                    hotrod.bytes_read.load(std::sync::atomic::Ordering::Relaxed),
                ),
                (
                    "totalBytesWritten",
                    hotrod
                        .bytes_written
                        .load(std::sync::atomic::Ordering::Relaxed),
                ),
            ];
            header(out, connection, frame, cache, Status::Success);
            put_vint(out, pairs.len() as u32);
            for (name, value) in pairs {
                put_string(out, name);
                put_string(out, &value.to_string());
            }
        }
        Request::PutAll {
            expiration,
            entries,
        } => {
            let mut converted = Vec::with_capacity(entries.len());
            for (key, value) in entries {
                let (value, flags) = target.value_in(frame.slice(*value))?;
                converted.push((target.key_in(frame.slice(*key))?, value, flags));
            }
            let options = write_options(frame, *expiration, now);
            // Client flags are per write: one put-all per flags value (one, unless the
            // client mixed value types).
            for flags in distinct_flags(&converted) {
                cache.put_all(
                    converted
                        .iter()
                        .filter(|(_, _, f)| *f == flags)
                        .map(|(k, v, _)| (k.as_ref(), v.as_ref())),
                    &options.user_flags(flags),
                )?;
            }
            header(out, connection, frame, cache, Status::Success);
        }
        Request::GetAll { keys } => {
            let mut found = Vec::new();
            for key in keys {
                let wire_key = frame.slice(*key);
                // A key holding a Redis structure is left out, as an absent key is.
                if let Some(entry) = cache.get_entry(&target.key_in(wire_key)?)?
                    && entry.structure().is_none()
                {
                    found.push((wire_key, target.value_out(&entry)?.into_owned()));
                }
            }
            header(out, connection, frame, cache, Status::Success);
            put_vint(out, found.len() as u32);
            for (key, value) in found {
                put_array(out, key);
                put_array(out, &value);
            }
        }
        Request::BulkGet { count } => {
            let limit = if *count == 0 {
                usize::MAX
            } else {
                *count as usize
            };
            let mut body = BytesMut::new();
            // Keys holding Redis structures have no value to send: left out. (Key listings
            // and key-only iterations keep them: the keys exist, and can be removed.)
            let readable = cache.iter().filter(|entry| entry.structure().is_none());
            for entry in readable.take(limit) {
                body.put_u8(1);
                put_array(&mut body, &target.key_out(entry.key())?);
                put_array(&mut body, &target.value_out(&entry)?);
            }
            body.put_u8(0);
            header(out, connection, frame, cache, Status::Success);
            out.extend_from_slice(&body);
        }
        Request::BulkGetKeys { .. } => {
            let mut body = BytesMut::new();
            for entry in cache.iter() {
                body.put_u8(1);
                put_array(&mut body, &target.key_out(entry.key())?);
            }
            body.put_u8(0);
            header(out, connection, frame, cache, Status::Success);
            out.extend_from_slice(&body);
        }
        Request::IterationStart {
            segments,
            filter,
            batch_size,
            metadata,
        } => {
            let id = super::iteration::start(
                connection,
                &target,
                segments.map(|s| frame.slice(s)),
                filter.as_ref(),
                *batch_size,
                *metadata,
            )?;
            header(out, connection, frame, cache, Status::Success);
            put_string(out, &id);
        }
        Request::AddClientListener {
            listener_id,
            include_current_state,
            filter,
            converter,
            interests,
            ..
        } => {
            if let Some(factory) = converter {
                return Err(Failure::server(format!(
                    "listener converter factory '{}' is not registered on this server",
                    factory.name
                )));
            }
            super::listeners::add(
                connection,
                frame,
                &target,
                frame.slice(*listener_id),
                *include_current_state,
                *interests,
                super::listeners::source_filter(frame, filter.as_ref()),
                out,
            )?;
            header(out, connection, frame, cache, Status::Success);
        }
        Request::AddBloomFilterListener { listener_id, .. } => {
            // Events are not narrowed by the bloom filter: the near cache gets them all,
            // which is correct, only chattier.
            super::listeners::add(
                connection,
                frame,
                &target,
                frame.slice(*listener_id),
                false,
                0x0e,
                None,
                out,
            )?;
            header(out, connection, frame, cache, Status::Success);
        }
        Request::UpdateBloomFilter { .. } => header(out, connection, frame, cache, Status::Success),
        Request::Query { .. } => {
            return Err(Failure::server(
                "queries are not supported by this server yet",
            ));
        }
        _ => {
            return Err(Failure {
                status: Status::UnknownCommand,
                message: format!("operation 0x{:02x} is not supported", frame.header.opcode),
            });
        }
    }
    Ok(())
}

/// The client flags among `entries` (key, value, flags), each once.
fn distinct_flags<K, V>(entries: &[(K, V, u32)]) -> Vec<u32> {
    let mut flags: Vec<u32> = entries.iter().map(|(_, _, f)| *f).collect();
    flags.sort_unstable();
    flags.dedup();
    flags
}

/// The storage type PING reports. Raw bytes are reported as "none": the Java client would
/// otherwise switch to a `byte[]`-only marshaller and refuse `String` keys, while the server
/// converts whatever the client sends anyway.
fn advertised_media_type(stored: Format) -> MediaType {
    match stored {
        Format::Octet | Format::Opaque => MediaType::Unspecified,
        other => MediaType::from_essence(other.media_type()),
    }
}

/// The keyed operation `frame` asks for, its key and value as the cache stores them; `None`
/// for any other request.
pub(super) fn operation_of(
    frame: &Frame,
    target: &Target,
    now: u64,
) -> Result<Option<Operation>, Failure> {
    let key = |key: &weft_hotrod::Span| -> Result<Vec<u8>, Failure> {
        Ok(target.key_in(frame.slice(*key))?.into_owned())
    };
    let value = |value: &weft_hotrod::Span| -> Result<(Vec<u8>, u32), Failure> {
        let (value, flags) = target.value_in(frame.slice(*value))?;
        Ok((value.into_owned(), flags))
    };
    let spec = |expiration: Expiration, flags: u32, previous: bool| {
        let mut options = write_options(frame, expiration, now).user_flags(flags);
        // Replace and remove need what they replaced to tell "done" from "absent".
        options.ignore_return_values &= !previous;
        WriteSpec::of(&options)
    };
    Ok(Some(match &frame.request {
        Request::Get { key: k }
        | Request::GetWithVersion { key: k }
        | Request::GetWithMetadata { key: k }
        | Request::GetStream { key: k, .. }
        | Request::ContainsKey { key: k } => Operation::Get { key: key(k)? },
        Request::Put {
            key: k,
            expiration,
            value: v,
        } => {
            let (value, flags) = value(v)?;
            Operation::Put {
                key: key(k)?,
                value,
                spec: spec(*expiration, flags, false),
            }
        }
        Request::PutIfAbsent {
            key: k,
            expiration,
            value: v,
        } => {
            let (value, flags) = value(v)?;
            Operation::PutIfAbsent {
                key: key(k)?,
                value,
                spec: spec(*expiration, flags, false),
            }
        }
        Request::Replace {
            key: k,
            expiration,
            value: v,
        } => {
            let (value, flags) = value(v)?;
            Operation::Replace {
                key: key(k)?,
                value,
                spec: spec(*expiration, flags, true),
            }
        }
        Request::ReplaceIfUnmodified {
            key: k,
            expiration,
            version,
            value: v,
        } => {
            let (value, flags) = value(v)?;
            Operation::ReplaceIfVersion {
                key: key(k)?,
                version: *version,
                value,
                spec: spec(*expiration, flags, false),
            }
        }
        Request::Remove { key: k } => Operation::Remove {
            key: key(k)?,
            spec: spec(Expiration::DEFAULT, 0, true),
        },
        Request::RemoveIfUnmodified { key: k, version } => Operation::RemoveIfVersion {
            key: key(k)?,
            version: *version,
            spec: spec(Expiration::DEFAULT, 0, false),
        },
        _ => return Ok(None),
    }))
}

/// Appends the response to keyed `frame` from what its operation did (here, or at the key's
/// owner).
pub(super) fn respond(
    out: &mut BytesMut,
    connection: &Connection,
    frame: &Frame,
    target: &Target,
    applied: Applied,
    now: u64,
) -> Result<(), Failure> {
    let cache = &target.cache;
    let entry = match applied {
        Applied::Versioned(outcome) => return versioned(out, connection, frame, target, outcome),
        Applied::Entry(entry) => entry,
        Applied::Bytes(_) => return Err(Failure::server("not a keyed request")),
    };
    match &frame.request {
        Request::ContainsKey { .. } => {
            let status = if entry.is_some() {
                Status::Success
            } else {
                Status::KeyDoesNotExist
            };
            header(out, connection, frame, cache, status);
        }
        Request::Get { .. }
        | Request::GetWithVersion { .. }
        | Request::GetWithMetadata { .. }
        | Request::GetStream { .. } => {
            let Some(entry) = entry else {
                header(out, connection, frame, cache, Status::KeyDoesNotExist);
                return Ok(());
            };
            if let Some(failure) = holds_structure(&entry) {
                return Err(failure);
            }
            let value = target.value_out(&entry)?;
            header(out, connection, frame, cache, Status::Success);
            let mut offset = 0;
            match &frame.request {
                Request::GetWithVersion { .. } => out.put_u64(entry.version()),
                Request::GetWithMetadata { .. } => {
                    put_metadata(out, &metadata_of(&entry.metadata(), now));
                }
                Request::GetStream { offset: from, .. } => {
                    put_metadata(out, &metadata_of(&entry.metadata(), now));
                    offset = *from as usize;
                }
                _ => {}
            }
            put_array(out, value.get(offset..).unwrap_or_default());
        }
        Request::Put { .. } => previous(
            out,
            connection,
            frame,
            target,
            Status::Success,
            Status::SuccessWithPrevious,
            entry.as_ref(),
        )?,
        Request::PutIfAbsent { .. } => match entry {
            Some(existing) => previous(
                out,
                connection,
                frame,
                target,
                Status::NotExecuted,
                Status::NotExecutedWithPrevious,
                Some(&existing),
            )?,
            // Nothing was there: a bare success, even when previous values were asked for.
            None => header(out, connection, frame, cache, Status::Success),
        },
        Request::Replace { .. } | Request::Remove { .. } => match entry {
            Some(old) => previous(
                out,
                connection,
                frame,
                target,
                Status::Success,
                Status::SuccessWithPrevious,
                Some(&old),
            )?,
            None if matches!(frame.request, Request::Remove { .. }) => {
                header(out, connection, frame, cache, Status::KeyDoesNotExist);
            }
            None => header(out, connection, frame, cache, Status::NotExecuted),
        },
        _ => return Err(Failure::server("not a keyed request")),
    }
    Ok(())
}

fn versioned(
    out: &mut BytesMut,
    connection: &Connection,
    frame: &Frame,
    target: &Target,
    outcome: VersionedOutcome,
) -> Result<(), Failure> {
    match outcome {
        VersionedOutcome::Done(old) => previous(
            out,
            connection,
            frame,
            target,
            Status::Success,
            Status::SuccessWithPrevious,
            Some(&old),
        ),
        VersionedOutcome::Mismatch(current) => previous(
            out,
            connection,
            frame,
            target,
            Status::NotExecuted,
            Status::NotExecutedWithPrevious,
            Some(&current),
        ),
        VersionedOutcome::Absent => {
            header(
                out,
                connection,
                frame,
                &target.cache,
                Status::KeyDoesNotExist,
            );
            Ok(())
        }
    }
}
