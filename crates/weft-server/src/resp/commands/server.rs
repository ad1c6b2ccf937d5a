//! Server commands: INFO COMMAND DBSIZE FLUSHDB FLUSHALL TIME.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;

use super::connection::REDIS_COMPATIBLE_VERSION;
use super::{errors, glob, is};
use crate::resp::table::{COMMANDS, CommandSpec, lookup};
use crate::resp::{Reply, Session};

/// The sections plain `INFO` (and `INFO default`) answers: Redis' default set.
const DEFAULT_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "errorstats",
    "cluster",
    "keyspace",
];

/// Seconds of CPU the process spent in user and system mode, and its children did
/// (`/proc/self/stat`, in clock ticks of 1/100 s); zeros where unknown.
fn cpu_seconds() -> [f64; 4] {
    const TICKS_PER_SECOND: f64 = 100.0;
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return [0.0; 4];
    };
    // Fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // utime, stime, cutime, cstime are fields 14-17, i.e. 11-14 after the name.
    let tick = |at: usize| {
        fields
            .get(at)
            .and_then(|field| field.parse::<f64>().ok())
            .map_or(0.0, |ticks| ticks / TICKS_PER_SECOND)
    };
    [tick(11), tick(12), tick(13), tick(14)]
}

/// `INFO [section ...]`: Redis' sections and the fields of theirs that apply to Weft, with
/// Weft's numbers (replication and persistence as a primary without RDB or AOF).
pub fn info(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let wanted: Vec<String> = args[1..]
        .iter()
        .map(|a| String::from_utf8_lossy(a).to_ascii_lowercase())
        .collect();
    let everything = wanted.iter().any(|w| w == "all" || w == "everything");
    let default = wanted.is_empty() || wanted.iter().any(|w| w == "default");
    let want = |section: &str| {
        everything
            || (default && DEFAULT_SECTIONS.contains(&section))
            || wanted.iter().any(|w| w == section)
    };
    let context = &session.context;
    // As a Redis Cluster node says it is one (tools check `cluster_enabled`).
    let clustered = context.cluster.is_some();
    let uptime = context.started.elapsed().as_secs();
    let mut text = String::new();
    if want("server") {
        let executable = std::env::current_exe()
            .map(|path| path.display().to_string())
            .unwrap_or_default();
        let _ = write!(
            text,
            "# Server\r\nredis_version:{REDIS_COMPATIBLE_VERSION}\r\nweft_version:{}\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\nredis_build_id:0\r\nredis_mode:{}\r\nos:{} {}\r\narch_bits:64\r\nmonotonic_clock:POSIX clock_gettime\r\nmultiplexing_api:epoll\r\nprocess_id:{}\r\nprocess_supervised:no\r\nrun_id:{:040x}\r\ntcp_port:{}\r\nserver_time_usec:{}\r\nuptime_in_seconds:{uptime}\r\nuptime_in_days:{}\r\nhz:10\r\nconfigured_hz:10\r\nexecutable:{executable}\r\nconfig_file:\r\n\r\n",
            env!("CARGO_PKG_VERSION"),
            if clustered { "cluster" } else { "standalone" },
            std::env::consts::OS,
            std::env::consts::ARCH,
            std::process::id(),
            // Stable for the process' life, different between runs and servers.
            (u128::from(std::process::id()) << 64) | u128::from(context.local_addr.port()),
            context.local_addr.port(),
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |since| since.as_micros()),
            uptime / 86_400,
        );
    }
    if want("clients") {
        let _ = write!(
            text,
            "# Clients\r\nconnected_clients:{}\r\ncluster_connections:0\r\nmaxclients:{}\r\nclient_recent_max_input_buffer:0\r\nclient_recent_max_output_buffer:0\r\nblocked_clients:{}\r\ntracking_clients:{}\r\nclients_in_timeout_table:0\r\n\r\n",
            context.connected_clients.load(Ordering::Relaxed),
            context.settings.connections_max,
            context.push.clients.blocked() + context.pause.waiting(),
            context.push.tracking.counts().clients,
        );
    }
    let stats = context.manager.statistics();
    if want("memory") {
        let (lua, scripts, scripts_bytes) = context.scripting.memory();
        let used = stats.memory_bytes + lua as u64;
        let resident = crate::telemetry::resident_bytes();
        let _ = write!(
            text,
            "# Memory\r\nused_memory:{used}\r\nused_memory_human:{1}\r\nused_memory_rss:{resident}\r\nused_memory_rss_human:{2}\r\nused_memory_peak:{used}\r\nused_memory_peak_human:{3}\r\nused_memory_dataset:{0}\r\nused_memory_lua:{lua}\r\nused_memory_vm_eval:{lua}\r\nused_memory_scripts_eval:{scripts_bytes}\r\nnumber_of_cached_scripts:{scripts}\r\nmaxmemory:0\r\nmaxmemory_human:0B\r\nmaxmemory_policy:noeviction\r\nmem_not_counted_for_evict:0\r\nmem_fragmentation_ratio:{4:.2}\r\nmem_allocator:libc\r\nlazyfree_pending_objects:0\r\n\r\n",
            stats.memory_bytes,
            human_bytes(used),
            human_bytes(resident),
            human_bytes(used),
            if used == 0 {
                0.0
            } else {
                resident as f64 / used as f64
            },
        );
    }
    if want("persistence") {
        let _ = write!(
            text,
            "# Persistence\r\nloading:0\r\nasync_loading:0\r\ncurrent_cow_peak:0\r\ncurrent_cow_size:0\r\ncurrent_fork_perc:0.00\r\ncurrent_save_keys_processed:0\r\ncurrent_save_keys_total:0\r\nrdb_changes_since_last_save:0\r\nrdb_bgsave_in_progress:0\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:ok\r\naof_enabled:0\r\naof_rewrite_in_progress:0\r\naof_rewrite_scheduled:0\r\naof_last_bgrewrite_status:ok\r\naof_last_write_status:ok\r\nmodule_fork_in_progress:0\r\n\r\n",
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |since| since.as_secs())
                .saturating_sub(uptime),
        );
    }
    if want("stats") {
        let (pubsub_channels, pubsub_patterns) = context.push.pubsub.counts();
        let tracking = context.push.tracking.counts();
        let errors: u64 = context
            .command_stats
            .errors()
            .iter()
            .map(|(_, count)| count)
            .sum();
        let _ = write!(
            text,
            "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\ninstantaneous_ops_per_sec:0\r\nrejected_connections:0\r\nexpired_keys:{}\r\nevicted_keys:{}\r\nkeyspace_hits:{}\r\nkeyspace_misses:{}\r\npubsub_channels:{}\r\npubsub_patterns:{}\r\nlatest_fork_usec:0\r\ntotal_forks:0\r\nmigrate_cached_sockets:0\r\ntracking_total_keys:{}\r\ntracking_total_items:{}\r\ntracking_total_prefixes:{}\r\ntotal_error_replies:{errors}\r\ntotal_blocking_keys:0\r\n\r\n",
            context.total_connections.load(Ordering::Relaxed),
            context.total_commands.load(Ordering::Relaxed),
            stats.expirations,
            stats.evictions,
            stats.hits,
            stats.misses,
            pubsub_channels,
            pubsub_patterns,
            tracking.keys,
            tracking.items,
            tracking.prefixes,
        );
    }
    if want("replication") {
        text.push_str("# Replication\r\nrole:master\r\nconnected_slaves:0\r\nmaster_failover_state:no-failover\r\nmaster_replid:0000000000000000000000000000000000000000\r\nmaster_repl_offset:0\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:0\r\nrepl_backlog_size:0\r\n\r\n");
    }
    if want("cpu") {
        let [user, system, user_children, system_children] = cpu_seconds();
        let _ = write!(
            text,
            "# CPU\r\nused_cpu_sys:{system:.6}\r\nused_cpu_user:{user:.6}\r\nused_cpu_sys_children:{system_children:.6}\r\nused_cpu_user_children:{user_children:.6}\r\n\r\n",
        );
    }
    if want("modules") {
        text.push_str("# Modules\r\n\r\n");
    }
    if want("commandstats") {
        text.push_str("# Commandstats\r\n");
        for (name, figures) in context.command_stats.commands() {
            let per_call = if figures.calls == 0 {
                0.0
            } else {
                figures.micros as f64 / figures.calls as f64
            };
            let _ = write!(
                text,
                "cmdstat_{name}:calls={},usec={},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}\r\n",
                figures.calls, figures.micros, figures.rejected, figures.failed,
            );
        }
        text.push_str("\r\n");
    }
    if want("errorstats") {
        text.push_str("# Errorstats\r\n");
        for (code, count) in context.command_stats.errors() {
            let _ = write!(text, "errorstat_{code}:count={count}\r\n");
        }
        text.push_str("\r\n");
    }
    if want("cluster") {
        let _ = write!(
            text,
            "# Cluster\r\ncluster_enabled:{}\r\n\r\n",
            u8::from(clustered)
        );
    }
    if want("keyspace") {
        text.push_str("# Keyspace\r\n");
        let mut databases: Vec<(u32, usize)> = context
            .manager
            .caches()
            .iter()
            .filter_map(|cache| {
                context
                    .manager
                    .resp_database_of(cache)
                    .map(|db| (db, cache.size()))
            })
            .filter(|&(_, size)| size > 0)
            .collect();
        databases.sort_unstable();
        for (database, size) in databases {
            let _ = write!(text, "db{database}:keys={size},expires=0,avg_ttl=0\r\n");
        }
        text.push_str("\r\n");
    }
    while text.ends_with("\r\n\r\n") {
        text.truncate(text.len() - 2);
    }
    reply.verbatim(&text);
}

/// Bytes as Redis' `*_human` fields show them (`1.50M`).
fn human_bytes(bytes: u64) -> String {
    const UNITS: [(&str, f64); 4] = [
        ("G", 1024.0 * 1024.0 * 1024.0),
        ("M", 1024.0 * 1024.0),
        ("K", 1024.0),
        ("B", 1.0),
    ];
    let value = bytes as f64;
    for (unit, size) in UNITS {
        if value >= size || unit == "B" {
            return if unit == "B" {
                format!("{bytes}B")
            } else {
                format!("{:.2}{unit}", value / size)
            };
        }
    }
    format!("{bytes}B")
}

fn write_command_info(spec: &CommandSpec, reply: &mut Reply<'_>) {
    reply.array(10);
    reply.bulk(spec.name.as_bytes());
    reply.integer(i64::from(spec.arity));
    reply.set(spec.flags.len());
    for flag in spec.flags {
        reply.simple(flag);
    }
    reply.integer(i64::from(spec.first_key));
    reply.integer(i64::from(spec.last_key));
    reply.integer(i64::from(spec.step));
    // Redis 7 sends all four as sets (RESP3 `~`), even when empty.
    let categories = crate::resp::meta::categories_of(spec, &[]);
    let names: Vec<&str> = crate::resp::meta::CATEGORIES
        .iter()
        .enumerate()
        .filter(|(i, _)| categories & (1 << i) != 0)
        .map(|(_, name)| *name)
        .collect();
    reply.set(names.len());
    for name in names {
        reply.simple(&format!("@{name}"));
    }
    reply.set(0); // tips
    reply.set(0); // key specs
    reply.set(0); // subcommands
}

/// `COMMAND [COUNT | INFO name ... | LIST | DOCS [name ...]]`
pub fn command(_session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let Some(sub) = args.get(1) else {
        reply.array(COMMANDS.len());
        for spec in COMMANDS {
            write_command_info(spec, reply);
        }
        return;
    };
    if is(sub, "COUNT") {
        if args.len() != 2 {
            reply.error("ERR wrong number of arguments for 'command|count' command");
            return;
        }
        reply.integer(i64::try_from(COMMANDS.len()).unwrap_or(i64::MAX));
    } else if is(sub, "LIST") {
        command_list(&args[2..], reply);
    } else if is(sub, "INFO") {
        let names: Vec<&Bytes> = args[2..].iter().collect();
        if names.is_empty() {
            reply.array(COMMANDS.len());
            for spec in COMMANDS {
                write_command_info(spec, reply);
            }
            return;
        }
        reply.array(names.len());
        for name in names {
            match lookup(name) {
                Some(spec) => write_command_info(spec, reply),
                None => reply.null_array(),
            }
        }
    } else if is(sub, "GETKEYS") || is(sub, "GETKEYSANDFLAGS") {
        getkeys(&args[2..], is(sub, "GETKEYSANDFLAGS"), reply);
    } else if is(sub, "DOCS") {
        // No documentation is served; clients (redis-cli) fall back to their own help.
        reply.map(0);
    } else {
        reply.error(&format!(
            "ERR unknown subcommand '{}'. Try COMMAND HELP.",
            String::from_utf8_lossy(sub)
        ));
    }
}

/// `COMMAND GETKEYS command [arg ...]` (and GETKEYSANDFLAGS): the keys a command names,
/// with Redis' errors for an unknown command, a command without keys, and a wrong count.
fn getkeys(command: &[Bytes], with_flags: bool, reply: &mut Reply<'_>) {
    let Some(spec) = command.first().and_then(|name| lookup(name)) else {
        return reply.error("ERR Invalid command specified");
    };
    let movable = spec.flags.contains(&"movablekeys");
    if spec.first_key <= 0 && !movable && !has_subcommand_key(spec.name) {
        return reply.error("ERR The command has no key arguments");
    }
    if !spec.arity_ok(command.len()) {
        return reply.error("ERR Invalid number of arguments specified for command");
    }
    match crate::resp::meta::keys_with_flags(spec, command) {
        Some(keys) => {
            reply.array(keys.len());
            for (at, flags) in keys {
                if with_flags {
                    reply.array(2);
                    reply.bulk(&command[at]);
                    let names: Vec<&str> = crate::resp::meta::key::NAMES
                        .iter()
                        .filter(|(bit, _)| flags & bit != 0)
                        .map(|(_, name)| *name)
                        .collect();
                    reply.set(names.len());
                    for name in names {
                        reply.simple(name);
                    }
                } else {
                    reply.bulk(&command[at]);
                }
            }
        }
        None if spec.flags.contains(&"no_mandatory_keys") => reply.array(0),
        None => reply.error("ERR Invalid arguments specified for command"),
    }
}

/// Container commands whose subcommand names a key right after it.
fn has_subcommand_key(name: &str) -> bool {
    matches!(name, "object" | "memory" | "xinfo" | "xgroup")
}

/// Where a command's keys are in `command` (its name at 0): by the table's positions, or
/// for commands whose keys move (a count argument, a STORE option, STREAMS) by their
/// syntax; `None` when the arguments do not say.
pub fn key_positions(
    spec: &crate::resp::table::CommandSpec,
    command: &[Bytes],
) -> Option<Vec<usize>> {
    let numkeys = |at: usize, from: usize| -> Option<Vec<usize>> {
        let n = usize::try_from(weft_resp::parse_i64_strict(command.get(at)?)?).ok()?;
        (from + n <= command.len()).then(|| (from..from + n).collect())
    };
    match spec.name {
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" => numkeys(2, 3),
        "zunion" | "zinter" | "zdiff" | "zintercard" | "sintercard" | "lmpop" | "zmpop" => {
            numkeys(1, 2).filter(|keys| !keys.is_empty())
        }
        "blmpop" | "bzmpop" => numkeys(2, 3).filter(|keys| !keys.is_empty()),
        "zunionstore" | "zinterstore" | "zdiffstore" => {
            let mut keys = numkeys(2, 3).filter(|keys| !keys.is_empty())?;
            keys.insert(0, 1);
            Some(keys)
        }
        "sort" | "sort_ro" | "georadius" | "georadiusbymember" => {
            let mut keys = vec![1];
            let mut at = 2;
            while at < command.len() {
                let word = &command[at];
                if (is(word, "STORE") || is(word, "STOREDIST")) && at + 1 < command.len() {
                    keys.truncate(1);
                    keys.push(at + 1);
                    at += 2;
                } else {
                    at += 1;
                }
            }
            Some(keys)
        }
        "xread" | "xreadgroup" => {
            let streams = command.iter().position(|word| is(word, "STREAMS"))?;
            let rest = command.len() - streams - 1;
            (rest > 0 && rest % 2 == 0).then(|| (streams + 1..streams + 1 + rest / 2).collect())
        }
        name if has_subcommand_key(name) => (command.len() > 2).then(|| vec![2]),
        _ if spec.first_key > 0 => {
            let len = i32::try_from(command.len()).ok()?;
            let last = if spec.last_key < 0 {
                len + spec.last_key
            } else {
                spec.last_key
            };
            let step = spec.step.max(1);
            let mut keys = Vec::new();
            let mut at = spec.first_key;
            while at <= last && at < len {
                keys.push(usize::try_from(at).ok()?);
                at += step;
            }
            Some(keys)
        }
        _ => None,
    }
}

/// `COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern]`, with Redis 7's
/// rules: commands and their subcommands (`client|list`); the pattern is a case-insensitive
/// glob; no command belongs to a module.
fn command_list(options: &[Bytes], reply: &mut Reply<'_>) {
    enum Filter {
        All,
        Pattern(Vec<u8>),
        Category(Option<u32>),
        Module,
    }
    let filter = match options {
        [] => Filter::All,
        [filterby, kind, argument] if is(filterby, "FILTERBY") => {
            if is(kind, "PATTERN") {
                Filter::Pattern(argument.to_ascii_lowercase())
            } else if is(kind, "ACLCAT") {
                Filter::Category(crate::resp::meta::category(argument))
            } else if is(kind, "MODULE") {
                Filter::Module
            } else {
                reply.error(errors::SYNTAX);
                return;
            }
        }
        _ => {
            reply.error(errors::SYNTAX);
            return;
        }
    };
    let mut names: Vec<(String, u32)> = Vec::new();
    for spec in COMMANDS {
        names.push((
            spec.name.to_owned(),
            crate::resp::meta::categories_of(spec, &[]),
        ));
        // Its subcommands: those it checks, and those Redis describes of it (the containers
        // that check their own, as CLIENT, answer them or say why not).
        let mut subs: Vec<String> = spec
            .subcommands
            .iter()
            .map(|(sub, _)| format!("{}|{}", spec.name, sub.to_ascii_lowercase()))
            .collect();
        if spec.subcommands.is_empty() {
            let prefix = format!("{}|", spec.name);
            subs.extend(
                crate::resp::meta::all()
                    .iter()
                    .filter(|meta| meta.name.starts_with(&prefix))
                    .map(|meta| meta.name.to_owned()),
            );
        }
        for full in subs {
            let categories = crate::resp::meta::lookup(&full).map_or_else(
                || crate::resp::meta::categories_of(spec, &[]),
                |m| m.categories,
            );
            names.push((full, categories));
        }
    }
    names.retain(|(name, categories)| match &filter {
        Filter::All => true,
        Filter::Pattern(pattern) => glob::matches(pattern, name.as_bytes()),
        Filter::Category(bit) => bit.is_some_and(|bit| categories & bit != 0),
        Filter::Module => false,
    });
    reply.array(names.len());
    for (name, _) in names {
        reply.bulk(name.as_bytes());
    }
}

/// `DBSIZE`
pub fn dbsize(session: &mut Session, _args: &[Bytes], reply: &mut Reply<'_>) {
    reply.integer(i64::try_from(session.cache.size()).unwrap_or(i64::MAX));
}

pub(crate) fn flush_mode_ok(args: &[Bytes]) -> bool {
    match args {
        [_] => true,
        [_, mode] => is(mode, "ASYNC") || is(mode, "SYNC"),
        _ => false,
    }
}

/// `FLUSHDB [ASYNC|SYNC]`
pub fn flushdb(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    if !flush_mode_ok(args) {
        reply.error(errors::SYNTAX);
        return;
    }
    let cleared = session.cache.clear();
    // Clearing raises no per-key events: tracking clients hear of it here, as in Redis.
    session.context.push.tracking.flushed();
    match cleared {
        Ok(()) => reply.ok(),
        Err(error) => reply.error(&format!("ERR {error}")),
    }
}

/// `FLUSHALL [ASYNC|SYNC]`: clears every cache mapped to a RESP database.
pub fn flushall(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    if !flush_mode_ok(args) {
        reply.error(errors::SYNTAX);
        return;
    }
    let mut cleared = Ok(());
    for cache in session.context.manager.caches() {
        if cache.config().resp_database.is_some() {
            cleared = cache.clear();
            if cleared.is_err() {
                break;
            }
        }
    }
    session.context.push.tracking.flushed();
    match cleared {
        Ok(()) => reply.ok(),
        Err(error) => reply.error(&format!("ERR {error}")),
    }
}

/// `TIME`
pub fn time(_session: &mut Session, _args: &[Bytes], reply: &mut Reply<'_>) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    reply.array(2);
    reply.bulk(now.as_secs().to_string().as_bytes());
    reply.bulk(now.subsec_micros().to_string().as_bytes());
}

/// `MEMORY USAGE key [SAMPLES count] | STATS | DOCTOR | MALLOC-STATS | PURGE | HELP`.
///
/// USAGE is what the key costs Weft: its entry's allocation rounded as the allocator rounds
/// it, its slot in the segment's index, and its structure's heap (a list's, a hash's …),
/// the same charge memory-bounded caches count. SAMPLES is accepted and needs no sampling:
/// the structures keep their size. STATS answers Redis' fields with Weft's numbers, where
/// Weft has no such thing (replication backlog, AOF buffer) 0.
pub fn memory(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let sub = &args[1];
    if is(sub, "HELP") {
        let lines = [
            "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "DOCTOR",
            "    Return memory problems reports.",
            "MALLOC-STATS",
            "    Return internal statistics report from the memory allocator.",
            "PURGE",
            "    Attempt to purge dirty pages for reclamation by the allocator.",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
            "HELP",
            "    Print this help.",
        ];
        reply.array(lines.len());
        for line in lines {
            reply.simple(line);
        }
    } else if is(sub, "USAGE") {
        match &args[3..] {
            [] => {}
            [option, count] if is(option, "SAMPLES") => {
                if weft_resp::parse_i64_strict(count).is_none() {
                    return reply.error(errors::NOT_INTEGER);
                }
            }
            _ => return reply.error(errors::SYNTAX),
        }
        match session.cache.get_entry(&args[2]) {
            Ok(Some(entry)) => {
                reply.integer(i64::try_from(weft_core::entry_charge(&entry)).unwrap_or(i64::MAX));
            }
            Ok(None) => reply.null(),
            Err(error) => super::strings::cache_error(reply, &error),
        }
    } else if is(sub, "STATS") {
        memory_stats(session, reply);
    } else if is(sub, "DOCTOR") {
        reply.verbatim("Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.");
    } else if is(sub, "MALLOC-STATS") {
        reply.verbatim("Stats not supported for the current allocator");
    } else if is(sub, "PURGE") {
        reply.ok();
    } else {
        reply.error(&format!(
            "ERR unknown subcommand '{}'. Try MEMORY HELP.",
            String::from_utf8_lossy(sub)
        ));
    }
}

/// `MEMORY STATS`: Redis' fields, in Redis' order, with Weft's numbers.
fn memory_stats(session: &Session, reply: &mut Reply<'_>) {
    let context = &session.context;
    let stats = context.manager.statistics();
    let (lua, _, scripts_bytes) = context.scripting.memory();
    let dataset = stats.memory_bytes;
    let lua = (lua + scripts_bytes) as u64;
    let resident = crate::telemetry::resident_bytes();
    let total = dataset + lua;
    let keys = stats.entries;
    let databases: Vec<(u32, weft_core::Cache)> = context
        .manager
        .caches()
        .into_iter()
        .filter_map(|cache| Some((context.manager.resp_database_of(&cache)?, cache)))
        .filter(|(_, cache)| cache.size() > 0)
        .collect();
    let fields: [(&str, Option<u64>, Option<f64>); 16] = [
        ("peak.allocated", Some(total), None),
        ("total.allocated", Some(total), None),
        ("startup.allocated", Some(0), None),
        ("replication.backlog", Some(0), None),
        ("clients.slaves", Some(0), None),
        ("clients.normal", Some(0), None),
        ("cluster.links", Some(0), None),
        ("aof.buffer", Some(0), None),
        ("lua.caches", Some(scripts_bytes as u64), None),
        ("functions.caches", Some(0), None),
        ("overhead.total", Some(lua), None),
        ("keys.count", Some(keys), None),
        (
            "keys.bytes-per-key",
            Some(dataset.checked_div(keys).unwrap_or(0)),
            None,
        ),
        ("dataset.bytes", Some(dataset), None),
        (
            "dataset.percentage",
            None,
            Some(if total == 0 {
                0.0
            } else {
                dataset as f64 * 100.0 / total as f64
            }),
        ),
        (
            "fragmentation",
            None,
            Some(if total == 0 {
                0.0
            } else {
                resident as f64 / total as f64
            }),
        ),
    ];
    reply.map(fields.len() + databases.len());
    for (name, integer, double) in fields {
        reply.bulk(name.as_bytes());
        match (integer, double) {
            (Some(value), _) => reply.integer(i64::try_from(value).unwrap_or(i64::MAX)),
            (None, Some(value)) => reply.double(value),
            (None, None) => reply.null(),
        }
    }
    for (database, cache) in databases {
        reply.bulk(format!("db.{database}").as_bytes());
        reply.map(2);
        reply.bulk(b"overhead.hashtable.main");
        let index = cache.size().saturating_mul(weft_core::TABLE_SLOT_BYTES);
        reply.integer(i64::try_from(index).unwrap_or(i64::MAX));
        reply.bulk(b"overhead.hashtable.expires");
        reply.integer(0);
    }
}

/// `MONITOR`: from now on the connection is shown every command the server runs (see
/// [`crate::resp::monitor`]).
pub fn monitor(session: &mut Session, _args: &[Bytes], reply: &mut Reply<'_>) {
    if session.in_transaction() {
        return reply.error("ERR Command not allowed inside a transaction");
    }
    session.context.push.monitors.add(&session.mailbox);
    reply.ok();
}
