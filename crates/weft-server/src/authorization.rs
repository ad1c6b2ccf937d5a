//! What each protocol's operations need, in one table, and the one check every protocol
//! makes before running one.
//!
//! Each protocol names its operations its own way (Hot Rod opcodes, RESP commands by their
//! ACL categories, memcached commands, REST routes); the functions here map every one of
//! them to a [`Need`]: nothing beyond being authenticated, a permission on the request's
//! cache (checked against the roles the cache admits), or a permission on the server
//! (container-wide: creating caches, administration, metrics, stopping). A permission means
//! the same whichever protocol asks: `READ` is a Hot Rod GET, a RESP GET, a memcached `get`
//! and an HTTP GET of an entry alike.
//!
//! [`Security::authorize`] decides, logs denials to the audit log, and is the only place
//! that does. A request is authorized where the client connected; a RESP command another
//! member runs for it carries the client's user and roles and is checked again there.

use axum::http::Method;
use weft_core::CacheConfig;
use weft_hotrod::Request;
use weft_memcached::BinaryCommand;
use weft_memcached::text::{GetKind, TextCommand};
use weft_security::Subject;
use weft_security::authorization::Permissions;

use crate::resp::table::CommandSpec;
use crate::security::{AUDIT, Login, Security};

/// What an operation needs beyond an authenticated client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Nothing: connection housekeeping (PING, SELECT, SASL, topology a client routes by).
    Nothing,
    /// A permission on the cache the request addresses.
    Cache(Permissions),
    /// A permission on every RESP database's cache (FLUSHALL): the caller asks
    /// [`Security::authorize`] for each in turn.
    EveryDatabase(Permissions),
    /// A permission on the server: creating and removing caches, administration, metrics,
    /// the lifecycle.
    Server(Permissions),
}

/// A request refused for want of a permission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    /// The user refused.
    pub user: String,
    /// The permission it lacks.
    pub permission: Permissions,
    /// The cache, when the permission was on one.
    pub cache: Option<String>,
}

impl std::fmt::Display for Denied {
    /// Infinispan's words (ISPN000287).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ISPN000287: Unauthorized access: subject '{}' lacks '{}' permission",
            self.user, self.permission
        )?;
        if let Some(cache) = &self.cache {
            write!(f, " on cache '{cache}'")?;
        }
        Ok(())
    }
}

impl Security {
    /// Whether `subject` may run an operation (`protocol`'s `operation`, for the audit log)
    /// that needs `need`, on `cache` (its name and configuration) when it addresses one.
    /// Always when authorization is not in force (no users file, or `[security]
    /// authorization = false`).
    ///
    /// # Errors
    /// The permission lacking; the denial is in the audit log.
    pub(crate) fn authorize(
        &self,
        subject: Option<&Subject>,
        protocol: &'static str,
        operation: impl std::fmt::Display,
        need: Need,
        cache: Option<(&str, &CacheConfig)>,
    ) -> Result<(), Denied> {
        if self.permits(subject, need, cache) {
            return Ok(());
        }
        let (permission, on_cache) = match need {
            Need::Nothing => return Ok(()),
            Need::Cache(permission) | Need::EveryDatabase(permission) => (permission, cache),
            Need::Server(permission) => (permission, None),
        };
        let denied = Denied {
            user: subject.map_or_else(|| "(anonymous)".to_owned(), |s| s.name.to_string()),
            permission,
            cache: on_cache.map(|(name, _)| name.to_owned()),
        };
        tracing::info!(
            target: AUDIT,
            user = %denied.user,
            protocol,
            operation = %operation,
            cache = denied.cache.as_deref().unwrap_or("-"),
            permission = %permission,
            "denied"
        );
        Err(denied)
    }
}

impl Security {
    /// [`Security::authorize`]'s decision alone, with nothing logged: for a caller that acts
    /// ahead of the request (and leaves the request's own check to refuse and log).
    pub(crate) fn permits(
        &self,
        subject: Option<&Subject>,
        need: Need,
        cache: Option<(&str, &CacheConfig)>,
    ) -> bool {
        if !self.authorizes() {
            return true;
        }
        let (permission, on_cache) = match need {
            Need::Nothing => return true,
            // The caller asks for each database's cache in turn.
            Need::Cache(permission) | Need::EveryDatabase(permission) => (permission, cache),
            Need::Server(permission) => (permission, None),
        };
        let admitted = match on_cache {
            Some((_, config)) if !config.security.authorization.enabled => return true,
            Some((_, config)) => config.security.authorization.admitted(),
            None => None,
        };
        subject.is_some_and(|subject| subject.allows(permission, admitted))
    }
}

/// A Hot Rod request's need. Admin tasks (`@@cache@create`…) are on the server.
#[must_use]
pub fn hotrod<B>(request: &Request<B>) -> Need {
    use Need::{Cache, Nothing, Server};
    match request {
        Request::Ping | Request::AuthMechList | Request::Auth { .. } => Nothing,
        Request::Get { .. }
        | Request::GetWithVersion { .. }
        | Request::GetWithMetadata { .. }
        | Request::ContainsKey { .. }
        | Request::GetStream { .. } => Cache(Permissions::READ),
        // As Infinispan's secure cache: many entries at once.
        Request::GetAll { .. } => Cache(Permissions::BULK_READ),
        // A listener that asks for the current state is sent every entry first.
        Request::AddClientListener {
            include_current_state: true,
            ..
        } => Cache(Permissions::LISTEN.union(Permissions::BULK_READ)),
        Request::Put { .. }
        | Request::PutIfAbsent { .. }
        | Request::Replace { .. }
        | Request::ReplaceIfUnmodified { .. }
        | Request::Remove { .. }
        | Request::RemoveIfUnmodified { .. }
        | Request::PutAll { .. } => Cache(Permissions::WRITE),
        Request::Clear => Cache(Permissions::BULK_WRITE),
        Request::Size
        | Request::BulkGet { .. }
        | Request::BulkGetKeys { .. }
        | Request::IterationStart { .. }
        | Request::IterationNext { .. }
        | Request::IterationEnd { .. }
        | Request::Query { .. } => Cache(Permissions::BULK_READ),
        Request::Stats => Cache(Permissions::MONITOR),
        Request::AddClientListener { .. }
        | Request::RemoveClientListener { .. }
        | Request::AddBloomFilterListener { .. }
        | Request::UpdateBloomFilter { .. } => Cache(Permissions::LISTEN),
        Request::Exec { task, params } => match task.as_str() {
            // As Infinispan: a cache from a configuration of the client's own needs ADMIN,
            // one from a template (or none) CREATE.
            "@@cache@create" | "@@cache@getorcreate"
                if params.iter().any(|(name, _)| name == "configuration") =>
            {
                Server(Permissions::ADMIN)
            }
            "@@cache@create" | "@@cache@getorcreate" | "@@cache@remove" => {
                Server(Permissions::CREATE)
            }
            "@@cache@names" | "@@cache@templates" => Nothing,
            _ => Cache(Permissions::EXEC),
        },
        // A request this table does not know yet: only administrators.
        _ => Server(Permissions::ADMIN),
    }
}

/// A RESP command's need, by its ACL categories as Redis gives them: `@read` commands READ,
/// `@write` WRITE, `@keyspace` commands over the whole database (KEYS, SCAN, DBSIZE,
/// RANDOMKEY) BULK_READ, FLUSHDB and FLUSHALL BULK_WRITE, `@pubsub` subscriptions LISTEN
/// and publishing WRITE (on the server: channels are not a database's), CLIENT TRACKING
/// LISTEN on every database, `@admin` commands ADMIN, INFO MONITOR; `@connection` and
/// `@transaction` housekeeping nothing.
#[must_use]
pub fn resp(spec: &CommandSpec, args: &[bytes::Bytes]) -> Need {
    use Need::{Cache, EveryDatabase, Nothing, Server};
    let sub = |name: &str| {
        args.get(1)
            .is_some_and(|sub| sub.eq_ignore_ascii_case(name.as_bytes()))
    };
    match spec.name {
        // Tracking is told of writes to every database's keys (BCAST: any key at all).
        "client" if sub("tracking") => EveryDatabase(Permissions::LISTEN),
        "ping" | "echo" | "hello" | "auth" | "quit" | "reset" | "select" | "time" | "command"
        | "multi" | "exec" | "discard" | "unwatch" | "cluster" | "client" | "unsubscribe"
        | "punsubscribe" | "sunsubscribe" => Nothing,
        // Who the connection is, the categories, a random password: nothing of the server's.
        "acl" if sub("whoami") || sub("cat") || sub("genpass") || sub("help") => Nothing,
        // MONITOR shows every client's commands and arguments: administrators only.
        "acl" | "config" | "slowlog" | "latency" | "monitor" => Server(Permissions::ADMIN),
        "shutdown" => Server(Permissions::LIFECYCLE),
        // How many members hold the client's own writes: a question about the connection.
        "wait" => Nothing,
        // A script is run on the database (each command it calls is checked as well);
        // the script cache is the server's.
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" => {
            Cache(Permissions::EXEC)
        }
        "script" if sub("load") || sub("exists") || sub("help") => Server(Permissions::EXEC),
        "script" => Server(Permissions::ADMIN),
        // Function libraries are the server's: flushing them is a write of its, listing a read.
        "function" if sub("list") || sub("stats") || sub("dump") || sub("help") => {
            Server(Permissions::EXEC)
        }
        "function" => Server(Permissions::ADMIN),
        "info" | "pubsub" => Server(Permissions::MONITOR),
        "dbsize" | "keys" | "scan" | "randomkey" => Cache(Permissions::BULK_READ),
        "flushdb" => Cache(Permissions::BULK_WRITE),
        "flushall" | "swapdb" => EveryDatabase(Permissions::BULK_WRITE),
        // Channels are the server's, not a database's.
        "subscribe" | "psubscribe" | "ssubscribe" => Server(Permissions::LISTEN),
        "publish" | "spublish" => Server(Permissions::WRITE),
        "watch" => Cache(Permissions::READ),
        // Streams: the containers by what their subcommands do (@read and @write).
        "xinfo" | "xread" => Cache(Permissions::READ),
        "xgroup" | "xreadgroup" => Cache(Permissions::WRITE),
        _ if spec.flags.contains(&"write") => Cache(Permissions::WRITE),
        _ if spec.flags.contains(&"readonly") => Cache(Permissions::READ),
        // A command of no known category: only administrators, until it is given one.
        _ => Server(Permissions::ADMIN),
    }
}

/// A memcached text command's name, for the audit log.
#[must_use]
pub fn memcached_text_name(command: &TextCommand) -> &'static str {
    match command {
        TextCommand::Get { kind, .. } => kind.name(),
        TextCommand::Store { mode, .. } | TextCommand::TooLarge { mode, .. } => mode.name(),
        TextCommand::Delete { .. } => "delete",
        TextCommand::Arithmetic { incr: true, .. } => "incr",
        TextCommand::Arithmetic { incr: false, .. } => "decr",
        TextCommand::Touch { .. } => "touch",
        TextCommand::FlushAll { .. } => "flush_all",
        TextCommand::Stats { .. } => "stats",
        TextCommand::Verbosity { .. } => "verbosity",
        TextCommand::Version => "version",
        TextCommand::Quit => "quit",
        TextCommand::Rejected(_) => "(rejected)",
        _ => "(other)",
    }
}

/// A memcached text command's need.
#[must_use]
pub fn memcached_text(command: &TextCommand) -> Need {
    use Need::{Cache, Nothing, Server};
    match command {
        // `gat` and `gats` change the expiration of what they read.
        TextCommand::Get { kind, .. } => match kind {
            GetKind::Get | GetKind::Gets => Cache(Permissions::READ),
            GetKind::Gat(_) | GetKind::Gats(_) => Cache(Permissions::WRITE),
        },
        TextCommand::Store { .. }
        | TextCommand::TooLarge { .. }
        | TextCommand::Delete { .. }
        | TextCommand::Arithmetic { .. }
        | TextCommand::Touch { .. } => Cache(Permissions::WRITE),
        TextCommand::FlushAll { .. } => Cache(Permissions::BULK_WRITE),
        TextCommand::Stats { group, .. } => {
            if group.as_deref() == Some(b"reset") {
                Server(Permissions::ADMIN)
            } else {
                Server(Permissions::MONITOR)
            }
        }
        TextCommand::Verbosity { .. } => Server(Permissions::ADMIN),
        TextCommand::Version | TextCommand::Quit | TextCommand::Rejected(_) => Nothing,
        // A command this table does not know yet: only administrators.
        _ => Server(Permissions::ADMIN),
    }
}

/// A memcached binary command's need.
#[must_use]
pub fn memcached_binary(command: &BinaryCommand) -> Need {
    use Need::{Cache, Nothing, Server};
    match command {
        BinaryCommand::Get { .. } => Cache(Permissions::READ),
        BinaryCommand::Touch { .. }
        | BinaryCommand::GetAndTouch { .. }
        | BinaryCommand::Store { .. }
        | BinaryCommand::Concat { .. }
        | BinaryCommand::Delete { .. }
        | BinaryCommand::Arithmetic { .. } => Cache(Permissions::WRITE),
        BinaryCommand::Flush { .. } => Cache(Permissions::BULK_WRITE),
        BinaryCommand::Stat { group } => {
            if &group[..] == b"reset" {
                Server(Permissions::ADMIN)
            } else {
                Server(Permissions::MONITOR)
            }
        }
        BinaryCommand::Verbosity { .. } => Server(Permissions::ADMIN),
        BinaryCommand::Quit { .. }
        | BinaryCommand::Noop
        | BinaryCommand::Version
        | BinaryCommand::SaslListMechs
        | BinaryCommand::Sasl { .. }
        | BinaryCommand::Unsupported => Nothing,
        // A command this table does not know yet: only administrators.
        _ => Server(Permissions::ADMIN),
    }
}

/// What a REST request addresses: its need, and the cache it names (percent-decoded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestTarget {
    /// What it needs.
    pub need: Need,
    /// The cache named in its path, if any.
    pub cache: Option<String>,
}

/// A REST request's need, from its method, path and `action` parameter.
#[must_use]
pub fn rest(method: &Method, path: &str, action: Option<&str>) -> RestTarget {
    use Need::{Cache, Nothing, Server};
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let is_read = matches!(*method, Method::GET | Method::HEAD);
    let (need, cache) = match segments.as_slice() {
        ["metrics"] => (Server(Permissions::MONITOR), None),
        ["rest", "v2", "caches"] => match action {
            Some("detailed") => (Server(Permissions::MONITOR), None),
            _ => (Nothing, None),
        },
        ["rest", "v2", "caches", cache] => {
            let need = match (method, action) {
                (&Method::GET, Some("size" | "keys" | "entries")) => Cache(Permissions::BULK_READ),
                (&Method::POST, Some("clear")) => Cache(Permissions::BULK_WRITE),
                (&Method::POST, Some("stats-reset")) => Cache(Permissions::ADMIN),
                (&Method::GET | &Method::HEAD, _) => Cache(Permissions::MONITOR),
                // Create (POST, PUT) and remove (DELETE).
                _ => Server(Permissions::CREATE),
            };
            (need, Some(*cache))
        }
        ["rest", "v2", "caches", cache, _key] => {
            let need = if is_read {
                Cache(Permissions::READ)
            } else {
                Cache(Permissions::WRITE)
            };
            (need, Some(*cache))
        }
        ["rest", "v2", "container" | "server"] | ["rest", "v2", "cache-managers", "default"]
            if !is_read =>
        {
            (Server(Permissions::LIFECYCLE), None)
        }
        ["rest", "v2", "container", "stats"]
        | ["rest", "v2", "cache-managers", "default", "stats"]
        | ["rest", "v2", "cluster", ..] => (Server(Permissions::MONITOR), None),
        // What the server is, and its health.
        ["rest", "v2", "container" | "server"]
        | ["rest", "v2", "cache-managers", "default"]
        | ["rest", "v2", "container", "health", ..]
        | ["rest", "v2", "cache-managers", "default", "health", ..] => (Nothing, None),
        // A route this table does not know yet: only administrators.
        _ => (Server(Permissions::ADMIN), None),
    };
    RestTarget {
        need,
        cache: cache.map(|cache| {
            percent_encoding::percent_decode_str(cache)
                .decode_utf8_lossy()
                .into_owned()
        }),
    }
}

/// The REST guard: authenticates a request's Basic credentials, then authorizes what its
/// route needs. `/metrics` answers without credentials when `[security] metrics-anonymous`.
pub(crate) fn rest_verdict(
    security: &Security,
    manager: &weft_core::CacheManager,
    access: weft_rest::Access<'_>,
) -> weft_rest::Verdict {
    use weft_rest::{Challenge, Verdict};
    if !security.required() {
        // No users and no password (now: RESP's CONFIG SET requirepass may set one).
        return Verdict::Allowed(None);
    }
    let target = rest(access.method, access.path, access.action);
    let challenge = if security.has_tokens() {
        Challenge::BasicOrBearer
    } else {
        Challenge::Basic
    };
    let peer = access
        .client
        .map_or(std::net::IpAddr::from([0, 0, 0, 0]), |client| client.ip());
    let mut attempt = crate::security::Attempt::starting(access.first_attempt);
    let subject = match (access.credentials, access.bearer) {
        (Some((user, password)), _) => {
            match security.authenticate_password(peer, "HTTP", user, password, &mut attempt) {
                Login::Accepted(subject) => subject,
                Login::Refused => {
                    return Verdict::Unauthenticated("wrong user name or password", challenge);
                }
                Login::Wait(due) => return Verdict::Wait(due),
                Login::Throttled(retry_after) => {
                    return Verdict::Throttled(
                        Login::throttled_message(&String::from_utf8_lossy(user), retry_after),
                        retry_after,
                    );
                }
            }
        }
        (None, Some(token)) if security.has_tokens() => {
            match security.authenticate_token(peer, "HTTP", token, &mut attempt) {
                Login::Accepted(subject) => subject,
                Login::Refused => {
                    return Verdict::Unauthenticated(
                        "invalid bearer token",
                        Challenge::InvalidBearer,
                    );
                }
                Login::Wait(due) => return Verdict::Wait(due),
                Login::Throttled(retry_after) => {
                    return Verdict::Throttled(
                        Login::throttled_message(weft_security::sasl::BEARER_USER, retry_after),
                        retry_after,
                    );
                }
            }
        }
        // No credentials in the request: the connection's client certificate, if any.
        _ => match access.certificate {
            Some(user) => security.authenticate_certificate(peer, "HTTP", user),
            None if security.metrics_anonymous() && access.path == "/metrics" => {
                return Verdict::Allowed(None);
            }
            None => return Verdict::Unauthenticated("authentication required", challenge),
        },
    };
    let cache = target
        .cache
        .as_deref()
        .and_then(|name| manager.cache(name).map(|cache| (name, cache)));
    let operation = format!("{} {}", access.method, access.path);
    match security.authorize(
        Some(&subject),
        "HTTP",
        &operation,
        target.need,
        cache.as_ref().map(|(name, cache)| (*name, cache.config())),
    ) {
        Ok(()) => Verdict::Allowed(Some(subject.name.to_string())),
        Err(denied) => Verdict::Forbidden(denied.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resp::table::COMMANDS;

    /// Every RESP command has a category's need: none falls through to the administrators'
    /// default unnoticed.
    #[test]
    fn every_resp_command_has_a_need() {
        for spec in COMMANDS {
            let need = resp(spec, &[bytes::Bytes::from_static(spec.name.as_bytes())]);
            if !matches!(
                spec.name,
                "acl" | "config" | "slowlog" | "latency" | "monitor" | "function" | "script"
            ) {
                assert_ne!(
                    need,
                    Need::Server(Permissions::ADMIN),
                    "{} has no category",
                    spec.name
                );
            }
        }
    }

    #[test]
    fn rest_routes_need_what_their_operation_does() {
        let get = Method::GET;
        let post = Method::POST;
        let entry = rest(&get, "/rest/v2/caches/my%20cache/k", None);
        assert_eq!(entry.need, Need::Cache(Permissions::READ));
        assert_eq!(entry.cache.as_deref(), Some("my cache"));
        assert_eq!(
            rest(&Method::PUT, "/rest/v2/caches/c/k", None).need,
            Need::Cache(Permissions::WRITE)
        );
        assert_eq!(
            rest(&get, "/rest/v2/caches/c", Some("keys")).need,
            Need::Cache(Permissions::BULK_READ)
        );
        assert_eq!(
            rest(&post, "/rest/v2/caches/c", Some("clear")).need,
            Need::Cache(Permissions::BULK_WRITE)
        );
        assert_eq!(
            rest(&post, "/rest/v2/caches/c", None).need,
            Need::Server(Permissions::CREATE)
        );
        assert_eq!(
            rest(&Method::DELETE, "/rest/v2/caches/c", None).need,
            Need::Server(Permissions::CREATE)
        );
        assert_eq!(
            rest(&post, "/rest/v2/server", Some("stop")).need,
            Need::Server(Permissions::LIFECYCLE)
        );
        assert_eq!(
            rest(&get, "/metrics", None).need,
            Need::Server(Permissions::MONITOR)
        );
        assert_eq!(rest(&get, "/rest/v2/server", None).need, Need::Nothing);
    }

    #[test]
    fn denials_speak_infinispans_words() {
        let denied = Denied {
            user: "bob".into(),
            permission: Permissions::WRITE,
            cache: Some("c".into()),
        };
        assert_eq!(
            denied.to_string(),
            "ISPN000287: Unauthorized access: subject 'bob' lacks 'WRITE' permission on cache 'c'"
        );
    }
}
