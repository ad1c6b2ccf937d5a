//! CONFIG GET/SET/RESETSTAT/REWRITE over Redis 7.0's parameters, as clients and tools read
//! and set them.
//!
//! Every parameter redis-server 7.0 has is here with its default, so that clients, tools and
//! tests that read or set one get the answer they expect. Some mirror Weft's own settings and
//! are read from them (`port`, `bind`, `databases`, `maxclients`, `requirepass`, `dir`).
//! The others are accepted and remembered — validated as Redis validates them — but Weft's
//! behaviour does not follow them: its encodings have fixed thresholds, it has no RDB/AOF
//! persistence of its own (its stores are configured per cache) and no replication
//! (docs/protocols.md lists them). `busy-reply-threshold` (`lua-time-limit`) applies to
//! scripts.

use std::collections::BTreeMap;

use bytes::Bytes;
use parking_lot::Mutex;

use super::glob;
use crate::resp::{Reply, Session};

/// How a parameter's value is checked.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// `yes` or `no`.
    Bool,
    /// A signed integer.
    Int,
    /// A number of bytes, with Redis' unit suffixes (`1gb`, `100mb`, `5k`).
    Memory,
    /// A number of bytes, or a percentage of `maxmemory` (`10%`).
    MemoryOrPercent,
    /// One of these words.
    Enum(&'static [&'static str]),
    /// Any text.
    Text,
    /// Set at start only.
    Immutable,
}

/// The parameters redis-server hides from CONFIG GET patterns (its debugging knobs).
const HIDDEN: &[&str] = &[
    "key-load-delay",
    "loading-process-events-interval-bytes",
    "rdb-key-save-delay",
];

/// redis-server 7.0.15's parameters: name, default, kind (aliases included, as CONFIG GET
/// lists them).
const PARAMETERS: &[(&str, &str, Kind)] = &[
    ("key-load-delay", "0", Kind::Int),
    (
        "loading-process-events-interval-bytes",
        "2097152",
        Kind::Int,
    ),
    ("rdb-key-save-delay", "0", Kind::Int),
    ("acl-pubsub-default", "resetchannels", Kind::Text),
    ("aclfile", "", Kind::Immutable),
    ("acllog-max-len", "128", Kind::Int),
    ("active-defrag-cycle-max", "25", Kind::Int),
    ("active-defrag-cycle-min", "1", Kind::Int),
    ("active-defrag-ignore-bytes", "104857600", Kind::Memory),
    ("active-defrag-max-scan-fields", "1000", Kind::Int),
    ("active-defrag-threshold-lower", "10", Kind::Int),
    ("active-defrag-threshold-upper", "100", Kind::Int),
    ("active-expire-effort", "1", Kind::Int),
    ("activedefrag", "no", Kind::Bool),
    ("activerehashing", "yes", Kind::Bool),
    ("always-show-logo", "no", Kind::Immutable),
    ("aof-disable-auto-gc", "no", Kind::Bool),
    ("aof-load-truncated", "yes", Kind::Bool),
    ("aof-rewrite-incremental-fsync", "yes", Kind::Bool),
    ("aof-timestamp-enabled", "no", Kind::Bool),
    ("aof-use-rdb-preamble", "yes", Kind::Bool),
    ("aof_rewrite_cpulist", "", Kind::Text),
    ("appenddirname", "appendonlydir", Kind::Immutable),
    ("appendfilename", "appendonly.aof", Kind::Immutable),
    (
        "appendfsync",
        "everysec",
        Kind::Enum(&["always", "everysec", "no"]),
    ),
    ("appendonly", "no", Kind::Bool),
    ("auto-aof-rewrite-min-size", "67108864", Kind::Memory),
    ("auto-aof-rewrite-percentage", "100", Kind::Int),
    ("bgsave_cpulist", "", Kind::Text),
    ("bind", "* -::*", Kind::Text),
    ("bind-source-addr", "", Kind::Text),
    ("bio_cpulist", "", Kind::Text),
    ("busy-reply-threshold", "5000", Kind::Int),
    (
        "client-output-buffer-limit",
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
        Kind::Text,
    ),
    ("client-query-buffer-limit", "1073741824", Kind::Memory),
    ("cluster-allow-pubsubshard-when-down", "yes", Kind::Bool),
    ("cluster-allow-reads-when-down", "no", Kind::Bool),
    ("cluster-allow-replica-migration", "yes", Kind::Bool),
    ("cluster-announce-bus-port", "0", Kind::Int),
    ("cluster-announce-hostname", "", Kind::Text),
    ("cluster-announce-ip", "", Kind::Text),
    ("cluster-announce-port", "0", Kind::Int),
    ("cluster-announce-tls-port", "0", Kind::Int),
    ("cluster-config-file", "nodes.conf", Kind::Immutable),
    ("cluster-enabled", "no", Kind::Immutable),
    ("cluster-link-sendbuf-limit", "0", Kind::Int),
    ("cluster-migration-barrier", "1", Kind::Int),
    ("cluster-node-timeout", "15000", Kind::Int),
    ("cluster-port", "0", Kind::Immutable),
    (
        "cluster-preferred-endpoint-type",
        "ip",
        Kind::Enum(&["ip", "hostname", "unknown-endpoint"]),
    ),
    ("cluster-replica-no-failover", "no", Kind::Bool),
    ("cluster-replica-validity-factor", "10", Kind::Int),
    ("cluster-require-full-coverage", "yes", Kind::Bool),
    ("cluster-slave-no-failover", "no", Kind::Bool),
    ("cluster-slave-validity-factor", "10", Kind::Int),
    ("crash-log-enabled", "yes", Kind::Bool),
    ("crash-memcheck-enabled", "yes", Kind::Bool),
    ("daemonize", "yes", Kind::Immutable),
    ("databases", "16", Kind::Immutable),
    ("dbfilename", "dump.rdb", Kind::Text),
    ("dir", "/tmp", Kind::Text),
    ("disable-thp", "yes", Kind::Immutable),
    ("dynamic-hz", "yes", Kind::Bool),
    ("enable-debug-command", "no", Kind::Immutable),
    ("enable-module-command", "no", Kind::Immutable),
    ("enable-protected-configs", "no", Kind::Immutable),
    ("hash-max-listpack-entries", "512", Kind::Int),
    ("hash-max-listpack-value", "64", Kind::Int),
    ("hll-sparse-max-bytes", "3000", Kind::Int),
    ("hz", "10", Kind::Int),
    ("ignore-warnings", "", Kind::Text),
    ("io-threads", "1", Kind::Immutable),
    ("io-threads-do-reads", "no", Kind::Immutable),
    ("jemalloc-bg-thread", "yes", Kind::Bool),
    ("latency-monitor-threshold", "0", Kind::Int),
    ("latency-tracking", "yes", Kind::Bool),
    (
        "latency-tracking-info-percentiles",
        "50 99 99.9",
        Kind::Text,
    ),
    ("lazyfree-lazy-eviction", "no", Kind::Bool),
    ("lazyfree-lazy-expire", "no", Kind::Bool),
    ("lazyfree-lazy-server-del", "no", Kind::Bool),
    ("lazyfree-lazy-user-del", "no", Kind::Bool),
    ("lazyfree-lazy-user-flush", "no", Kind::Bool),
    ("lfu-decay-time", "1", Kind::Int),
    ("lfu-log-factor", "10", Kind::Int),
    ("list-compress-depth", "0", Kind::Int),
    ("list-max-listpack-size", "-2", Kind::Int),
    ("logfile", "", Kind::Immutable),
    (
        "loglevel",
        "notice",
        Kind::Enum(&["debug", "verbose", "notice", "warning"]),
    ),
    ("lua-time-limit", "5000", Kind::Int),
    ("masterauth", "", Kind::Text),
    ("masteruser", "", Kind::Text),
    ("maxclients", "10000", Kind::Int),
    ("maxmemory", "0", Kind::Memory),
    ("maxmemory-clients", "0", Kind::MemoryOrPercent),
    ("maxmemory-eviction-tenacity", "10", Kind::Int),
    (
        "maxmemory-policy",
        "noeviction",
        Kind::Enum(&[
            "volatile-lru",
            "volatile-lfu",
            "volatile-random",
            "volatile-ttl",
            "allkeys-lru",
            "allkeys-lfu",
            "allkeys-random",
            "noeviction",
        ]),
    ),
    ("maxmemory-samples", "5", Kind::Int),
    ("min-replicas-max-lag", "10", Kind::Int),
    ("min-replicas-to-write", "0", Kind::Int),
    ("min-slaves-max-lag", "10", Kind::Int),
    ("min-slaves-to-write", "0", Kind::Int),
    ("no-appendfsync-on-rewrite", "no", Kind::Bool),
    ("notify-keyspace-events", "", Kind::Text),
    (
        "oom-score-adj",
        "no",
        Kind::Enum(&["no", "yes", "relative", "absolute"]),
    ),
    ("oom-score-adj-values", "0 200 800", Kind::Immutable),
    ("pidfile", "/var/run/redis.pid", Kind::Immutable),
    ("port", "7399", Kind::Int),
    (
        "proc-title-template",
        "{title} {listen-addr} {server-mode}",
        Kind::Text,
    ),
    (
        "propagation-error-behavior",
        "ignore",
        Kind::Enum(&["ignore", "panic", "panic-on-replicas"]),
    ),
    ("protected-mode", "yes", Kind::Bool),
    ("proto-max-bulk-len", "536870912", Kind::Memory),
    ("rdb-del-sync-files", "no", Kind::Bool),
    ("rdb-save-incremental-fsync", "yes", Kind::Bool),
    ("rdbchecksum", "yes", Kind::Bool),
    ("rdbcompression", "yes", Kind::Bool),
    ("repl-backlog-size", "1048576", Kind::Memory),
    ("repl-backlog-ttl", "3600", Kind::Int),
    ("repl-disable-tcp-nodelay", "no", Kind::Bool),
    (
        "repl-diskless-load",
        "disabled",
        Kind::Enum(&["disabled", "on-empty-db", "swapdb"]),
    ),
    ("repl-diskless-sync", "yes", Kind::Bool),
    ("repl-diskless-sync-delay", "5", Kind::Int),
    ("repl-diskless-sync-max-replicas", "0", Kind::Int),
    ("repl-ping-replica-period", "10", Kind::Int),
    ("repl-ping-slave-period", "10", Kind::Int),
    ("repl-timeout", "60", Kind::Int),
    ("replica-announce-ip", "", Kind::Text),
    ("replica-announce-port", "0", Kind::Int),
    ("replica-announced", "yes", Kind::Bool),
    ("replica-ignore-disk-write-errors", "no", Kind::Bool),
    ("replica-ignore-maxmemory", "yes", Kind::Bool),
    ("replica-lazy-flush", "no", Kind::Bool),
    ("replica-priority", "100", Kind::Int),
    ("replica-read-only", "yes", Kind::Bool),
    ("replica-serve-stale-data", "yes", Kind::Bool),
    ("replicaof", "", Kind::Text),
    ("requirepass", "", Kind::Text),
    (
        "sanitize-dump-payload",
        "no",
        Kind::Enum(&["no", "yes", "clients"]),
    ),
    ("save", "", Kind::Text),
    ("server_cpulist", "", Kind::Text),
    ("set-max-intset-entries", "512", Kind::Int),
    ("set-proc-title", "yes", Kind::Immutable),
    (
        "shutdown-on-sigint",
        "default",
        Kind::Enum(&["default", "save", "nosave", "now", "force"]),
    ),
    (
        "shutdown-on-sigterm",
        "default",
        Kind::Enum(&["default", "save", "nosave", "now", "force"]),
    ),
    ("shutdown-timeout", "10", Kind::Int),
    ("slowlog-log-slower-than", "10000", Kind::Int),
    ("slowlog-max-len", "128", Kind::Int),
    ("socket-mark-id", "0", Kind::Int),
    ("stop-writes-on-bgsave-error", "yes", Kind::Bool),
    ("stream-node-max-bytes", "4096", Kind::Memory),
    ("stream-node-max-entries", "100", Kind::Int),
    ("supervised", "no", Kind::Immutable),
    ("syslog-enabled", "no", Kind::Immutable),
    ("syslog-facility", "local0", Kind::Immutable),
    ("syslog-ident", "redis", Kind::Immutable),
    ("tcp-backlog", "511", Kind::Immutable),
    ("tcp-keepalive", "300", Kind::Int),
    ("timeout", "0", Kind::Int),
    ("tls-auth-clients", "yes", Kind::Bool),
    ("tls-ca-cert-dir", "", Kind::Text),
    ("tls-ca-cert-file", "", Kind::Text),
    ("tls-cert-file", "", Kind::Text),
    ("tls-ciphers", "", Kind::Text),
    ("tls-ciphersuites", "", Kind::Text),
    ("tls-client-cert-file", "", Kind::Text),
    ("tls-client-key-file", "", Kind::Text),
    ("tls-client-key-file-pass", "", Kind::Text),
    ("tls-cluster", "no", Kind::Bool),
    ("tls-dh-params-file", "", Kind::Text),
    ("tls-key-file", "", Kind::Text),
    ("tls-key-file-pass", "", Kind::Text),
    ("tls-port", "0", Kind::Int),
    ("tls-prefer-server-ciphers", "no", Kind::Bool),
    ("tls-protocols", "", Kind::Text),
    ("tls-replication", "no", Kind::Bool),
    ("tls-session-cache-size", "20480", Kind::Int),
    ("tls-session-cache-timeout", "300", Kind::Int),
    ("tls-session-caching", "yes", Kind::Bool),
    ("tracking-table-max-keys", "1000000", Kind::Int),
    ("unixsocket", "", Kind::Immutable),
    ("unixsocketperm", "0", Kind::Immutable),
    ("zset-max-listpack-entries", "128", Kind::Int),
    ("zset-max-listpack-value", "64", Kind::Int),
];

/// Redis' old names for parameters, and the name each stands for.
const ALIASES: &[(&str, &str)] = &[
    ("hash-max-ziplist-entries", "hash-max-listpack-entries"),
    ("hash-max-ziplist-value", "hash-max-listpack-value"),
    ("list-max-ziplist-size", "list-max-listpack-size"),
    ("zset-max-ziplist-entries", "zset-max-listpack-entries"),
    ("zset-max-ziplist-value", "zset-max-listpack-value"),
    ("slave-announce-ip", "replica-announce-ip"),
    ("slave-announce-port", "replica-announce-port"),
    ("slave-ignore-maxmemory", "replica-ignore-maxmemory"),
    ("slave-lazy-flush", "replica-lazy-flush"),
    ("slave-priority", "replica-priority"),
    ("slave-read-only", "replica-read-only"),
    ("slave-serve-stale-data", "replica-serve-stale-data"),
    ("slaveof", "replicaof"),
];

/// The values in force, by parameter name.
#[derive(Debug)]
pub struct RedisConfig {
    values: Mutex<BTreeMap<&'static str, String>>,
}

impl RedisConfig {
    /// Redis' defaults, with the parameters Weft's own settings answer for read from them.
    #[must_use]
    pub fn new(settings: &crate::config::ServerSection, local: std::net::SocketAddr) -> Self {
        let mut values: BTreeMap<&'static str, String> = PARAMETERS
            .iter()
            .map(|&(name, default, _)| (name, default.to_owned()))
            .collect();
        let mut own = |name: &'static str, value: String| {
            values.insert(name, value);
        };
        own("port", local.port().to_string());
        own("bind", local.ip().to_string());
        own("databases", settings.resp_databases.to_string());
        own("maxclients", settings.connections_max.to_string());
        own("requirepass", settings.password.clone().unwrap_or_default());
        own("save", String::new());
        own("appendonly", "no".to_owned());
        own(
            "dir",
            std::env::current_dir()
                .map(|dir| dir.display().to_string())
                .unwrap_or_default(),
        );
        Self {
            values: Mutex::new(values),
        }
    }
}

fn canonical(name: &str) -> Option<&'static str> {
    let lower = name.to_ascii_lowercase();
    if let Some(&(_, target)) = ALIASES.iter().find(|(alias, _)| *alias == lower) {
        return Some(target);
    }
    PARAMETERS
        .iter()
        .find(|(known, _, _)| *known == lower)
        .map(|&(known, _, _)| known)
}

fn kind(name: &str) -> Kind {
    PARAMETERS
        .iter()
        .find(|(known, _, _)| *known == name)
        .map_or(Kind::Text, |&(_, _, kind)| kind)
}

/// Redis' `memtoull`: digits with an optional unit (`b`, `k`, `kb`, `m`, `mb`, `g`, `gb`,
/// any case; `k` is 1000, `kb` 1024).
fn memory(value: &str) -> Option<u64> {
    let lower = value.to_ascii_lowercase();
    let digits = lower.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit = &lower[digits.len()..];
    let factor: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<u64>().ok()?.checked_mul(factor)
}

/// The value to store for `name`, or why not (Redis' words after the parameter's name).
fn check(name: &str, value: &str) -> Result<String, String> {
    if name == "notify-keyspace-events" {
        return super::notify::parse(value)
            .map(super::notify::letters)
            .ok_or_else(|| "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".to_owned());
    }
    match kind(name) {
        Kind::Immutable => Err("can't set immutable config".to_owned()),
        Kind::Bool => match value.to_ascii_lowercase().as_str() {
            "yes" | "no" => Ok(value.to_ascii_lowercase()),
            _ => Err("argument must be 'yes' or 'no'".to_owned()),
        },
        Kind::Int => value
            .parse::<i64>()
            .map(|n| n.to_string())
            .map_err(|_| "argument couldn't be parsed into an integer".to_owned()),
        Kind::Memory => memory(value)
            .map(|n| n.to_string())
            .ok_or_else(|| "argument must be a memory value".to_owned()),
        Kind::MemoryOrPercent => match value.strip_suffix('%') {
            Some(percent) => match percent.parse::<u64>() {
                Ok(n) if n <= 100 => Ok(format!("{n}%")),
                Ok(_) => Err("percentage argument must be less or equal to 100".to_owned()),
                Err(_) => Err("argument must be a memory or percent value".to_owned()),
            },
            None => memory(value)
                .map(|n| n.to_string())
                .ok_or_else(|| "argument must be a memory or percent value".to_owned()),
        },
        Kind::Enum(choices) => {
            let lower = value.to_ascii_lowercase();
            if choices.contains(&lower.as_str()) {
                Ok(lower)
            } else {
                Err(format!(
                    "argument(s) must be one of the following: {}",
                    choices.join(", ")
                ))
            }
        }
        Kind::Text => Ok(value.to_owned()),
    }
}

/// CONFIG.
pub fn config(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    match sub.as_str() {
        "get" => get(session, &args[2..], reply),
        "set" => set(session, &args[2..], reply),
        "resetstat" => {
            session.context.reset_statistics();
            reply.ok();
        }
        "rewrite" => reply.error("ERR The server is running without a config file"),
        _ => {
            let help = [
                "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "GET <pattern>",
                "    Return parameters matching the glob-like <pattern> and their values.",
                "SET <directive> <value>",
                "    Set the configuration <directive> to <value>.",
                "RESETSTAT",
                "    Reset statistics reported by the INFO command.",
                "REWRITE",
                "    Rewrite the configuration file.",
                "HELP",
                "    Print this help.",
            ];
            reply.array(help.len());
            for line in help {
                reply.simple(line);
            }
        }
    }
}

fn get(session: &Session, patterns: &[Bytes], reply: &mut Reply<'_>) {
    let values = session.context.redis_config.values.lock();
    let mut found: BTreeMap<&str, &str> = BTreeMap::new();
    for pattern in patterns {
        let lower = pattern.to_ascii_lowercase();
        for (name, value) in values.iter() {
            // Redis' hidden (debugging) parameters answer only when named.
            let shown = !HIDDEN.contains(name) || lower == name.as_bytes();
            if shown && glob::matches(&lower, name.as_bytes()) {
                found.insert(name, value);
            }
        }
        for &(alias, target) in ALIASES {
            if glob::matches(&lower, alias.as_bytes())
                && let Some(value) = values.get(target)
            {
                found.insert(alias, value);
            }
        }
    }
    reply.map(found.len());
    for (name, value) in found {
        reply.bulk(name.as_bytes());
        reply.bulk(value.as_bytes());
    }
}

fn set(session: &Session, pairs: &[Bytes], reply: &mut Reply<'_>) {
    if pairs.len() % 2 != 0 {
        reply.error("ERR wrong number of arguments for 'config|set' command");
        return;
    }
    let mut changes: Vec<(&'static str, String)> = Vec::new();
    for pair in pairs.chunks(2) {
        let raw = String::from_utf8_lossy(&pair[0]);
        let Some(name) = canonical(&raw) else {
            reply.error(&format!(
                "ERR Unknown option or number of arguments for CONFIG SET - '{raw}'"
            ));
            return;
        };
        if changes.iter().any(|(seen, _)| *seen == name) {
            reply.error(&format!(
                "ERR CONFIG SET failed (possibly related to argument '{raw}') - duplicate parameter"
            ));
            return;
        }
        let value = String::from_utf8_lossy(&pair[1]);
        match check(name, &value) {
            Ok(value) => changes.push((name, value)),
            Err(why) => {
                reply.error(&format!(
                    "ERR CONFIG SET failed (possibly related to argument '{raw}') - {why}"
                ));
                return;
            }
        }
    }
    // `requirepass` is the password of `default` on every protocol, not RESP's alone.
    if let Some((_, password)) = changes.iter().find(|(name, _)| *name == "requirepass")
        && let Err(error) = session.context.security.set_password(password)
    {
        let why = if session.context.security.has_users_file() {
            "this server authenticates the users of its users file; give `default` its password there".to_owned()
        } else {
            error.to_string()
        };
        reply.error(&format!(
            "ERR CONFIG SET failed (possibly related to argument 'requirepass') - {why}"
        ));
        return;
    }
    let mut values = session.context.redis_config.values.lock();
    for (name, value) in changes {
        // The encoding thresholds Weft's structures follow (the rest is remembered only).
        if let Ok(limit) = value.parse::<usize>() {
            weft_core::structure::limits::set(name, limit);
        }
        session.context.slowlog.configure(name, &value);
        session.context.latency.configure(name, &value);
        session.context.acl.configure(name, &value);
        session.context.push.tracking.configure(name, &value);
        session.context.scripting.configure(name, &value);
        super::hyperloglog::configure(name, &value);
        if name == "notify-keyspace-events" {
            session
                .context
                .keyspace_events
                .set(super::notify::parse(&value).unwrap_or(0));
        }
        values.insert(name, value);
    }
    reply.ok();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_values_read_as_redis_reads_them() {
        assert_eq!(memory("100"), Some(100));
        assert_eq!(memory("1kb"), Some(1024));
        assert_eq!(memory("1K"), Some(1000));
        assert_eq!(memory("2GB"), Some(2 * 1024 * 1024 * 1024));
        assert_eq!(memory("abc"), None);
        assert_eq!(memory("-1"), None);
        assert_eq!(memory("mb"), None);
    }

    #[test]
    fn values_are_checked_by_kind() {
        assert_eq!(check("appendonly", "YES"), Ok("yes".to_owned()));
        assert!(check("appendonly", "maybe").is_err());
        assert!(check("databases", "3").is_err());
        assert_eq!(check("maxmemory", "1mb"), Ok("1048576".to_owned()));
        assert!(check("maxmemory-policy", "nope").is_err());
        assert_eq!(
            canonical("HASH-MAX-ZIPLIST-ENTRIES"),
            Some("hash-max-listpack-entries")
        );
        assert_eq!(canonical("nope"), None);
    }
}
