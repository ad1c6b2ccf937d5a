//! The command table: every RESP command's name, arity, flags and key positions (what
//! COMMAND reports and redis-cli relies on), and its handler.

use std::sync::LazyLock;

use bytes::Bytes;

use super::commands::{
    acl, admin, bits, cluster, config, connection, counters, dump, expire, geo, hashes,
    hyperloglog, keys, latency, lcs, lists, pubsub, scripting, server, sets, slowlog, sort,
    stream_groups, streams, strings, transactions, zsets, zsets_algebra,
};
use super::{Reply, Session};

/// A command handler.
pub type Handler = fn(&mut Session, &[Bytes], &mut Reply<'_>);

/// One command's description.
#[derive(Debug)]
pub struct CommandSpec {
    /// Lower-case name.
    pub name: &'static str,
    /// Redis' arity: `n` exactly n arguments (name included), `-n` at least n.
    pub arity: i32,
    /// Redis' command flags, as COMMAND reports them.
    pub flags: &'static [&'static str],
    /// Position of the first key (0 = none).
    pub first_key: i32,
    /// Position of the last key (-1 = last argument).
    pub last_key: i32,
    /// Step between keys.
    pub step: i32,
    /// The implementation.
    pub handler: Handler,
    /// For a container command (Redis' `OBJECT`): its subcommands with their arities
    /// (counting the container's name), checked before the command runs or is queued.
    pub subcommands: &'static [(&'static str, i32)],
}

impl CommandSpec {
    /// Whether `len` arguments (name included) satisfy the arity.
    #[must_use]
    pub fn arity_ok(&self, len: usize) -> bool {
        arity_ok(self.arity, len)
    }

    /// Checks the arguments' count, and for a container command the subcommand and its
    /// count, as Redis does before running or queueing a command; the error otherwise.
    pub fn check_arguments(&self, args: &[Bytes]) -> Result<(), String> {
        if !self.arity_ok(args.len()) {
            return Err(format!(
                "ERR wrong number of arguments for '{}' command",
                self.name
            ));
        }
        if self.subcommands.is_empty() {
            return Ok(());
        }
        let sub = args.get(1).map_or(&[][..], |sub| &sub[..]);
        let Some((name, arity)) = self
            .subcommands
            .iter()
            .find(|(name, _)| sub.eq_ignore_ascii_case(name.as_bytes()))
        else {
            return Err(format!(
                "ERR unknown subcommand '{}'. Try {} HELP.",
                sanitize(sub, 128),
                self.name.to_ascii_uppercase()
            ));
        };
        if !arity_ok(*arity, args.len()) {
            return Err(format!(
                "ERR wrong number of arguments for '{}|{}' command",
                self.name,
                name.to_ascii_lowercase()
            ));
        }
        Ok(())
    }

    /// Commands run at once rather than queued while MULTI is open.
    #[must_use]
    pub fn runs_inside_multi(&self) -> bool {
        matches!(
            self.name,
            "exec" | "discard" | "multi" | "watch" | "quit" | "reset"
        )
    }

    /// Commands a client may run before authenticating.
    #[must_use]
    pub fn allowed_unauthenticated(&self) -> bool {
        self.flags.contains(&"no_auth")
    }
}

/// Whether `len` arguments satisfy Redis' `arity` (`n` exactly, `-n` at least n).
fn arity_ok(arity: i32, len: usize) -> bool {
    let len = i64::try_from(len).unwrap_or(i64::MAX);
    let arity = i64::from(arity);
    if arity >= 0 {
        len == arity
    } else {
        len >= -arity
    }
}

const fn spec(
    name: &'static str,
    arity: i32,
    flags: &'static [&'static str],
    keys: (i32, i32, i32),
    handler: Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        first_key: keys.0,
        last_key: keys.1,
        step: keys.2,
        handler,
        subcommands: &[],
    }
}

impl CommandSpec {
    /// A container command with these subcommands and arities.
    const fn with_subcommands(mut self, subcommands: &'static [(&'static str, i32)]) -> Self {
        self.subcommands = subcommands;
        self
    }
}

const NO_KEYS: (i32, i32, i32) = (0, 0, 0);
const ONE_KEY: (i32, i32, i32) = (1, 1, 1);
const ALL_KEYS: (i32, i32, i32) = (1, -1, 1);
const PAIRS: (i32, i32, i32) = (1, -1, 2);
const TWO_KEYS: (i32, i32, i32) = (1, 2, 1);

const READ: &[&str] = &["readonly", "fast"];
const WRITE: &[&str] = &["write", "denyoom"];
const WRITE_FAST: &[&str] = &["write", "denyoom", "fast"];
const WRITE_REMOVE: &[&str] = &["write"];
const WRITE_FAST_NOOOM: &[&str] = &["write", "fast"];
const BLOCKING: &[&str] = &["write", "noscript", "blocking"];
const BLOCKING_DENYOOM: &[&str] = &["write", "denyoom", "noscript", "blocking"];
const CONNECTION: &[&str] = &["noscript", "loading", "stale", "fast", "no_auth"];
const ADMIN: &[&str] = &["loading", "stale"];
const SUBSCRIBE: &[&str] = &["pubsub", "noscript", "loading", "stale"];
const PUBLISH: &[&str] = &["pubsub", "loading", "stale", "fast", "may_replicate"];
const SCRIPT_RUN: &[&str] = &[
    "noscript",
    "stale",
    "skip_monitor",
    "may_replicate",
    "no_mandatory_keys",
    "movablekeys",
];
const SCRIPT_RUN_RO: &[&str] = &[
    "readonly",
    "noscript",
    "stale",
    "skip_monitor",
    "no_mandatory_keys",
    "movablekeys",
];

/// Every command served.
pub static COMMANDS: &[CommandSpec] = &[
    // connection
    spec("ping", -1, &["fast"], NO_KEYS, connection::ping),
    spec("echo", 2, &["fast"], NO_KEYS, connection::echo),
    spec("hello", -1, CONNECTION, NO_KEYS, connection::hello),
    spec("auth", -2, CONNECTION, NO_KEYS, connection::auth),
    spec("quit", -1, CONNECTION, NO_KEYS, connection::quit),
    spec("acl", -2, &["loading", "stale"], NO_KEYS, acl::acl).with_subcommands(&[
        ("CAT", -2),
        ("DELUSER", -3),
        ("DRYRUN", -4),
        ("GENPASS", -2),
        ("GETUSER", 3),
        ("HELP", 2),
        ("LIST", 2),
        ("LOAD", 2),
        ("LOG", -2),
        ("SAVE", 2),
        ("SETUSER", -3),
        ("USERS", 2),
        ("WHOAMI", 2),
    ]),
    spec(
        "select",
        2,
        &["loading", "stale", "fast"],
        NO_KEYS,
        connection::select,
    ),
    spec(
        "client",
        -2,
        &["loading", "stale"],
        NO_KEYS,
        connection::client,
    ),
    spec(
        "reset",
        1,
        &[
            "noscript",
            "loading",
            "stale",
            "fast",
            "no_auth",
            "allow-busy",
        ],
        NO_KEYS,
        connection::reset,
    ),
    // pub/sub
    spec("subscribe", -2, SUBSCRIBE, NO_KEYS, pubsub::subscribe),
    spec("psubscribe", -2, SUBSCRIBE, NO_KEYS, pubsub::psubscribe),
    spec("ssubscribe", -2, SUBSCRIBE, ALL_KEYS, pubsub::ssubscribe),
    spec("unsubscribe", -1, SUBSCRIBE, NO_KEYS, pubsub::unsubscribe),
    spec("punsubscribe", -1, SUBSCRIBE, NO_KEYS, pubsub::punsubscribe),
    spec(
        "sunsubscribe",
        -1,
        SUBSCRIBE,
        ALL_KEYS,
        pubsub::sunsubscribe,
    ),
    spec("publish", 3, PUBLISH, NO_KEYS, pubsub::publish),
    spec("spublish", 3, PUBLISH, ONE_KEY, pubsub::spublish),
    spec("pubsub", -2, &[], NO_KEYS, pubsub::pubsub),
    // scripting
    spec("eval", -3, SCRIPT_RUN, NO_KEYS, scripting::eval),
    spec("evalsha", -3, SCRIPT_RUN, NO_KEYS, scripting::evalsha),
    spec("eval_ro", -3, SCRIPT_RUN_RO, NO_KEYS, scripting::eval_ro),
    spec(
        "evalsha_ro",
        -3,
        SCRIPT_RUN_RO,
        NO_KEYS,
        scripting::evalsha_ro,
    ),
    spec("script", -2, &["noscript"], NO_KEYS, scripting::script).with_subcommands(&[
        ("DEBUG", 3),
        ("EXISTS", -3),
        ("FLUSH", -2),
        ("HELP", 2),
        ("KILL", 2),
        ("LOAD", 3),
    ]),
    // server
    spec("info", -1, ADMIN, NO_KEYS, server::info),
    spec("function", -2, &["noscript"], NO_KEYS, scripting::function).with_subcommands(&[
        ("DELETE", 3),
        ("DUMP", 2),
        ("FLUSH", -2),
        ("HELP", 2),
        ("KILL", 2),
        ("LIST", -2),
        ("LOAD", -3),
        ("RESTORE", -3),
        ("STATS", 2),
    ]),
    spec("fcall", -3, SCRIPT_RUN, NO_KEYS, scripting::fcall),
    spec("fcall_ro", -3, SCRIPT_RUN_RO, NO_KEYS, scripting::fcall_ro),
    spec(
        "slowlog",
        -2,
        &["admin", "loading", "stale"],
        NO_KEYS,
        slowlog::slowlog,
    )
    .with_subcommands(&[("GET", -2), ("HELP", 2), ("LEN", 2), ("RESET", 2)]),
    spec(
        "latency",
        -2,
        &["admin", "noscript", "loading", "stale"],
        NO_KEYS,
        latency::latency,
    )
    .with_subcommands(&[
        ("DOCTOR", 2),
        ("GRAPH", 3),
        ("HELP", 2),
        ("HISTOGRAM", -2),
        ("HISTORY", 3),
        ("LATEST", 2),
        ("RESET", -2),
    ]),
    spec(
        "shutdown",
        -1,
        &[
            "admin",
            "noscript",
            "loading",
            "stale",
            "no_multi",
            "allow_busy",
        ],
        NO_KEYS,
        admin::shutdown,
    ),
    spec("wait", 3, &["noscript"], NO_KEYS, admin::wait),
    spec(
        "config",
        -2,
        &["admin", "noscript", "loading", "stale"],
        NO_KEYS,
        config::config,
    )
    .with_subcommands(&[
        ("GET", -3),
        ("HELP", 2),
        ("RESETSTAT", 2),
        ("REWRITE", 2),
        ("SET", -4),
    ]),
    spec("command", -1, ADMIN, NO_KEYS, server::command),
    spec("dbsize", 1, READ, NO_KEYS, server::dbsize),
    spec(
        "cluster",
        -2,
        &["loading", "stale"],
        NO_KEYS,
        cluster::cluster,
    )
    .with_subcommands(&[
        ("HELP", 2),
        ("INFO", 2),
        ("KEYSLOT", 3),
        ("MYID", 2),
        ("NODES", 2),
        ("SHARDS", 2),
        ("SLOTS", 2),
    ]),
    spec("flushdb", -1, WRITE_REMOVE, NO_KEYS, server::flushdb),
    spec("flushall", -1, WRITE_REMOVE, NO_KEYS, server::flushall),
    spec(
        "time",
        1,
        &["loading", "stale", "fast"],
        NO_KEYS,
        server::time,
    ),
    // strings
    spec("get", 2, READ, ONE_KEY, strings::get),
    spec("set", -3, WRITE, ONE_KEY, strings::set),
    spec("setnx", 3, WRITE_FAST, ONE_KEY, strings::setnx),
    spec("setex", 4, WRITE, ONE_KEY, strings::setex),
    spec("psetex", 4, WRITE, ONE_KEY, strings::psetex),
    spec("getdel", 2, WRITE_FAST, ONE_KEY, strings::getdel),
    spec("getex", -2, WRITE_FAST, ONE_KEY, strings::getex),
    spec("getset", 3, WRITE_FAST, ONE_KEY, strings::getset),
    spec("mget", -2, READ, ALL_KEYS, strings::mget),
    spec("mset", -3, WRITE, PAIRS, strings::mset),
    spec("msetnx", -3, WRITE, PAIRS, strings::msetnx),
    spec("incr", 2, WRITE_FAST, ONE_KEY, counters::incr),
    spec("decr", 2, WRITE_FAST, ONE_KEY, counters::decr),
    spec("incrby", 3, WRITE_FAST, ONE_KEY, counters::incrby),
    spec("decrby", 3, WRITE_FAST, ONE_KEY, counters::decrby),
    spec("incrbyfloat", 3, WRITE_FAST, ONE_KEY, counters::incrbyfloat),
    spec("append", 3, WRITE_FAST, ONE_KEY, strings::append),
    spec("strlen", 2, READ, ONE_KEY, strings::strlen),
    spec("getrange", 4, &["readonly"], ONE_KEY, strings::getrange),
    spec("substr", 4, &["readonly"], ONE_KEY, strings::getrange),
    spec("setrange", 4, WRITE, ONE_KEY, strings::setrange),
    spec("lcs", -3, &["readonly"], TWO_KEYS, lcs::lcs),
    // bitmaps and bit fields
    spec("setbit", 4, WRITE, ONE_KEY, bits::setbit),
    spec("getbit", 3, READ, ONE_KEY, bits::getbit),
    spec("bitcount", -2, &["readonly"], ONE_KEY, bits::bitcount),
    spec("bitpos", -3, &["readonly"], ONE_KEY, bits::bitpos),
    spec("bitop", -4, WRITE, (2, -1, 1), bits::bitop),
    spec("bitfield", -2, WRITE, ONE_KEY, bits::bitfield),
    spec("bitfield_ro", -2, READ, ONE_KEY, bits::bitfield_ro),
    // HyperLogLog
    spec("pfadd", -2, WRITE_FAST, ONE_KEY, hyperloglog::pfadd),
    spec(
        "pfcount",
        -2,
        &["readonly", "may_replicate"],
        ALL_KEYS,
        hyperloglog::pfcount,
    ),
    spec("pfmerge", -2, WRITE, ALL_KEYS, hyperloglog::pfmerge),
    // geo (sorted sets of geohash scores)
    spec("geoadd", -5, WRITE, ONE_KEY, geo::geoadd),
    spec("geodist", -4, &["readonly"], ONE_KEY, geo::geodist),
    spec("geohash", -2, &["readonly"], ONE_KEY, geo::geohash),
    spec("geopos", -2, &["readonly"], ONE_KEY, geo::geopos),
    spec("geosearch", -7, &["readonly"], ONE_KEY, geo::geosearch),
    spec("geosearchstore", -8, WRITE, TWO_KEYS, geo::geosearchstore),
    spec(
        "georadius",
        -6,
        &["write", "denyoom", "movablekeys"],
        ONE_KEY,
        geo::georadius,
    ),
    spec(
        "georadius_ro",
        -6,
        &["readonly"],
        ONE_KEY,
        geo::georadius_ro,
    ),
    spec(
        "georadiusbymember",
        -5,
        &["write", "denyoom", "movablekeys"],
        ONE_KEY,
        geo::georadiusbymember,
    ),
    spec(
        "georadiusbymember_ro",
        -5,
        &["readonly"],
        ONE_KEY,
        geo::georadiusbymember_ro,
    ),
    // keys
    spec("del", -2, WRITE_REMOVE, ALL_KEYS, keys::del),
    spec("unlink", -2, &["write", "fast"], ALL_KEYS, keys::del),
    spec("exists", -2, READ, ALL_KEYS, keys::exists),
    spec("expire", -3, &["write", "fast"], ONE_KEY, expire::expire),
    spec("pexpire", -3, &["write", "fast"], ONE_KEY, expire::pexpire),
    spec(
        "expireat",
        -3,
        &["write", "fast"],
        ONE_KEY,
        expire::expireat,
    ),
    spec(
        "pexpireat",
        -3,
        &["write", "fast"],
        ONE_KEY,
        expire::pexpireat,
    ),
    spec("ttl", 2, READ, ONE_KEY, expire::ttl),
    spec("pttl", 2, READ, ONE_KEY, expire::pttl),
    spec("expiretime", 2, READ, ONE_KEY, expire::expiretime),
    spec("pexpiretime", 2, READ, ONE_KEY, expire::pexpiretime),
    spec("persist", 2, &["write", "fast"], ONE_KEY, expire::persist),
    spec("type", 2, READ, ONE_KEY, keys::type_),
    spec("object", -2, &["readonly"], (2, 2, 1), keys::object).with_subcommands(&[
        ("ENCODING", 3),
        ("FREQ", 3),
        ("HELP", 2),
        ("IDLETIME", 3),
        ("REFCOUNT", 3),
    ]),
    spec(
        "monitor",
        1,
        &["admin", "noscript", "loading", "stale"],
        NO_KEYS,
        server::monitor,
    ),
    spec("memory", -2, &["readonly"], (2, 2, 1), server::memory).with_subcommands(&[
        ("DOCTOR", 2),
        ("HELP", 2),
        ("MALLOC-STATS", 2),
        ("PURGE", 2),
        ("STATS", 2),
        ("USAGE", -3),
    ]),
    spec("keys", 2, &["readonly"], NO_KEYS, keys::keys),
    spec("scan", -2, &["readonly"], NO_KEYS, keys::scan),
    spec("randomkey", 1, &["readonly"], NO_KEYS, keys::randomkey),
    spec("rename", 3, &["write"], TWO_KEYS, keys::rename),
    spec("renamenx", 3, &["write", "fast"], TWO_KEYS, keys::renamenx),
    spec("touch", -2, READ, ALL_KEYS, keys::touch),
    spec("copy", -3, WRITE, TWO_KEYS, keys::copy),
    spec("move", 3, &["write", "fast"], ONE_KEY, keys::move_),
    spec("swapdb", 3, &["write", "fast"], NO_KEYS, keys::swapdb),
    spec("dump", 2, &["readonly"], ONE_KEY, dump::dump),
    spec("restore", -4, WRITE, ONE_KEY, dump::restore),
    spec(
        "sort",
        -2,
        &["write", "denyoom", "movablekeys"],
        ONE_KEY,
        sort::sort,
    ),
    spec(
        "sort_ro",
        -2,
        &["readonly", "movablekeys"],
        ONE_KEY,
        sort::sort_ro,
    ),
    // lists
    spec("lpush", -3, WRITE_FAST, ONE_KEY, lists::lpush),
    spec("rpush", -3, WRITE_FAST, ONE_KEY, lists::rpush),
    spec("lpushx", -3, WRITE_FAST, ONE_KEY, lists::lpushx),
    spec("rpushx", -3, WRITE_FAST, ONE_KEY, lists::rpushx),
    spec("lpop", -2, WRITE_FAST_NOOOM, ONE_KEY, lists::lpop),
    spec("rpop", -2, WRITE_FAST_NOOOM, ONE_KEY, lists::rpop),
    spec("llen", 2, READ, ONE_KEY, lists::llen),
    spec("lrange", 4, &["readonly"], ONE_KEY, lists::lrange),
    spec("lindex", 3, &["readonly"], ONE_KEY, lists::lindex),
    spec("lpos", -3, &["readonly"], ONE_KEY, lists::lpos),
    spec("lset", 4, WRITE, ONE_KEY, lists::lset),
    spec("lrem", 4, WRITE_REMOVE, ONE_KEY, lists::lrem),
    spec("ltrim", 4, WRITE_REMOVE, ONE_KEY, lists::ltrim),
    spec("linsert", 5, WRITE, ONE_KEY, lists::linsert),
    spec("lmove", 5, WRITE, TWO_KEYS, lists::lmove),
    spec("rpoplpush", 3, WRITE, TWO_KEYS, lists::rpoplpush),
    spec(
        "lmpop",
        -4,
        &["write", "movablekeys"],
        NO_KEYS,
        lists::lmpop,
    ),
    spec("blpop", -3, BLOCKING, (1, -2, 1), lists::blpop),
    spec("brpop", -3, BLOCKING, (1, -2, 1), lists::brpop),
    spec("blmove", 6, BLOCKING_DENYOOM, TWO_KEYS, lists::blmove),
    spec(
        "brpoplpush",
        4,
        BLOCKING_DENYOOM,
        TWO_KEYS,
        lists::brpoplpush,
    ),
    spec(
        "blmpop",
        -5,
        &["write", "blocking", "movablekeys"],
        NO_KEYS,
        lists::blmpop,
    ),
    // hashes
    spec("hset", -4, WRITE_FAST, ONE_KEY, hashes::hset),
    spec("hmset", -4, WRITE_FAST, ONE_KEY, hashes::hmset),
    spec("hsetnx", 4, WRITE_FAST, ONE_KEY, hashes::hsetnx),
    spec("hget", 3, READ, ONE_KEY, hashes::hget),
    spec("hmget", -3, READ, ONE_KEY, hashes::hmget),
    spec("hgetall", 2, &["readonly"], ONE_KEY, hashes::hgetall),
    spec("hkeys", 2, &["readonly"], ONE_KEY, hashes::hkeys),
    spec("hvals", 2, &["readonly"], ONE_KEY, hashes::hvals),
    spec("hdel", -3, WRITE_FAST_NOOOM, ONE_KEY, hashes::hdel),
    spec("hlen", 2, READ, ONE_KEY, hashes::hlen),
    spec("hexists", 3, READ, ONE_KEY, hashes::hexists),
    spec("hstrlen", 3, READ, ONE_KEY, hashes::hstrlen),
    spec("hincrby", 4, WRITE_FAST, ONE_KEY, hashes::hincrby),
    spec("hincrbyfloat", 4, WRITE_FAST, ONE_KEY, hashes::hincrbyfloat),
    spec("hrandfield", -2, &["readonly"], ONE_KEY, hashes::hrandfield),
    spec("hscan", -3, &["readonly"], ONE_KEY, hashes::hscan),
    // sets
    spec("sadd", -3, WRITE_FAST, ONE_KEY, sets::sadd),
    spec("srem", -3, WRITE_FAST_NOOOM, ONE_KEY, sets::srem),
    spec("smembers", 2, &["readonly"], ONE_KEY, sets::smembers),
    spec("sismember", 3, READ, ONE_KEY, sets::sismember),
    spec("smismember", -3, READ, ONE_KEY, sets::smismember),
    spec("scard", 2, READ, ONE_KEY, sets::scard),
    spec("spop", -2, WRITE_FAST_NOOOM, ONE_KEY, sets::spop),
    spec("srandmember", -2, &["readonly"], ONE_KEY, sets::srandmember),
    spec("sinter", -2, &["readonly"], ALL_KEYS, sets::sinter),
    spec("sunion", -2, &["readonly"], ALL_KEYS, sets::sunion),
    spec("sdiff", -2, &["readonly"], ALL_KEYS, sets::sdiff),
    spec("sinterstore", -3, WRITE, ALL_KEYS, sets::sinterstore),
    spec("sunionstore", -3, WRITE, ALL_KEYS, sets::sunionstore),
    spec("sdiffstore", -3, WRITE, ALL_KEYS, sets::sdiffstore),
    spec(
        "sintercard",
        -3,
        &["readonly", "movablekeys"],
        NO_KEYS,
        sets::sintercard,
    ),
    spec("smove", 4, WRITE_FAST_NOOOM, TWO_KEYS, sets::smove),
    spec("sscan", -3, &["readonly"], ONE_KEY, sets::sscan),
    // transactions
    spec(
        "multi",
        1,
        &["noscript", "loading", "stale", "fast", "allow-busy"],
        NO_KEYS,
        transactions::multi,
    ),
    spec(
        "exec",
        1,
        &["noscript", "loading", "stale", "skip-slowlog"],
        NO_KEYS,
        transactions::exec,
    ),
    spec(
        "discard",
        1,
        &["noscript", "loading", "stale", "fast", "allow-busy"],
        NO_KEYS,
        transactions::discard,
    ),
    spec(
        "watch",
        -2,
        &["noscript", "loading", "stale", "fast", "allow-busy"],
        ALL_KEYS,
        transactions::watch,
    ),
    spec(
        "unwatch",
        1,
        &["noscript", "loading", "stale", "fast", "allow-busy"],
        NO_KEYS,
        transactions::unwatch,
    ),
    // sorted sets
    spec("zadd", -4, WRITE_FAST, ONE_KEY, zsets::zadd),
    spec("zincrby", 4, WRITE_FAST, ONE_KEY, zsets::zincrby),
    spec("zrem", -3, WRITE_FAST_NOOOM, ONE_KEY, zsets::zrem),
    spec("zscore", 3, READ, ONE_KEY, zsets::zscore),
    spec("zmscore", -3, READ, ONE_KEY, zsets::zmscore),
    spec("zcard", 2, READ, ONE_KEY, zsets::zcard),
    spec("zcount", 4, READ, ONE_KEY, zsets::zcount),
    spec("zlexcount", 4, READ, ONE_KEY, zsets::zlexcount),
    spec("zrank", 3, READ, ONE_KEY, zsets::zrank),
    spec("zrevrank", 3, READ, ONE_KEY, zsets::zrevrank),
    spec("zrange", -4, &["readonly"], ONE_KEY, zsets::zrange),
    spec("zrevrange", -4, &["readonly"], ONE_KEY, zsets::zrevrange),
    spec(
        "zrangebyscore",
        -4,
        &["readonly"],
        ONE_KEY,
        zsets::zrangebyscore,
    ),
    spec(
        "zrevrangebyscore",
        -4,
        &["readonly"],
        ONE_KEY,
        zsets::zrevrangebyscore,
    ),
    spec(
        "zrangebylex",
        -4,
        &["readonly"],
        ONE_KEY,
        zsets::zrangebylex,
    ),
    spec(
        "zrevrangebylex",
        -4,
        &["readonly"],
        ONE_KEY,
        zsets::zrevrangebylex,
    ),
    spec("zrangestore", -5, WRITE, TWO_KEYS, zsets::zrangestore),
    spec(
        "zremrangebyscore",
        4,
        WRITE_REMOVE,
        ONE_KEY,
        zsets::zremrangebyscore,
    ),
    spec(
        "zremrangebyrank",
        4,
        WRITE_REMOVE,
        ONE_KEY,
        zsets::zremrangebyrank,
    ),
    spec(
        "zremrangebylex",
        4,
        WRITE_REMOVE,
        ONE_KEY,
        zsets::zremrangebylex,
    ),
    spec("zpopmin", -2, WRITE_FAST_NOOOM, ONE_KEY, zsets::zpopmin),
    spec(
        "zmpop",
        -4,
        &["write", "movablekeys"],
        NO_KEYS,
        zsets::zmpop,
    ),
    spec("zpopmax", -2, WRITE_FAST_NOOOM, ONE_KEY, zsets::zpopmax),
    spec(
        "bzpopmin",
        -3,
        &["write", "noscript", "blocking", "fast"],
        (1, -2, 1),
        zsets::bzpopmin,
    ),
    spec(
        "bzpopmax",
        -3,
        &["write", "noscript", "blocking", "fast"],
        (1, -2, 1),
        zsets::bzpopmax,
    ),
    spec(
        "bzmpop",
        -5,
        &["write", "blocking", "movablekeys"],
        NO_KEYS,
        zsets::bzmpop,
    ),
    spec(
        "zrandmember",
        -2,
        &["readonly"],
        ONE_KEY,
        zsets::zrandmember,
    ),
    spec("zscan", -3, &["readonly"], ONE_KEY, zsets::zscan),
    spec(
        "zunionstore",
        -4,
        &["write", "denyoom", "movablekeys"],
        ONE_KEY,
        zsets_algebra::zunionstore,
    ),
    spec(
        "zinterstore",
        -4,
        &["write", "denyoom", "movablekeys"],
        ONE_KEY,
        zsets_algebra::zinterstore,
    ),
    spec(
        "zdiffstore",
        -4,
        &["write", "denyoom", "movablekeys"],
        ONE_KEY,
        zsets_algebra::zdiffstore,
    ),
    spec(
        "zunion",
        -3,
        &["readonly", "movablekeys"],
        NO_KEYS,
        zsets_algebra::zunion,
    ),
    spec(
        "zinter",
        -3,
        &["readonly", "movablekeys"],
        NO_KEYS,
        zsets_algebra::zinter,
    ),
    spec(
        "zdiff",
        -3,
        &["readonly", "movablekeys"],
        NO_KEYS,
        zsets_algebra::zdiff,
    ),
    spec(
        "zintercard",
        -3,
        &["readonly", "movablekeys"],
        NO_KEYS,
        zsets_algebra::zintercard,
    ),
    // streams (flags as Redis' COMMAND INFO; XGROUP and XINFO, containers without flags in
    // Redis, carry their subcommands' flag and key position, as OBJECT does, so that they
    // are authorized and routed by their key)
    spec("xadd", -5, WRITE_FAST, ONE_KEY, streams::xadd),
    spec("xrange", -4, &["readonly"], ONE_KEY, streams::xrange),
    spec("xrevrange", -4, &["readonly"], ONE_KEY, streams::xrevrange),
    spec("xlen", 2, READ, ONE_KEY, streams::xlen),
    spec("xdel", -3, WRITE_FAST_NOOOM, ONE_KEY, streams::xdel),
    spec("xtrim", -4, WRITE_REMOVE, ONE_KEY, streams::xtrim),
    spec("xsetid", -3, WRITE_FAST, ONE_KEY, streams::xsetid),
    spec(
        "xread",
        -4,
        &["readonly", "blocking", "movablekeys"],
        NO_KEYS,
        streams::xread,
    ),
    spec(
        "xreadgroup",
        -7,
        &["write", "blocking", "movablekeys"],
        NO_KEYS,
        stream_groups::xreadgroup,
    ),
    spec("xgroup", -2, &["write"], (2, 2, 1), stream_groups::xgroup).with_subcommands(&[
        ("CREATE", -5),
        ("CREATECONSUMER", 5),
        ("DELCONSUMER", 5),
        ("DESTROY", 4),
        ("HELP", 2),
        ("SETID", -5),
    ]),
    spec("xack", -4, WRITE_FAST_NOOOM, ONE_KEY, stream_groups::xack),
    spec(
        "xpending",
        -3,
        &["readonly"],
        ONE_KEY,
        stream_groups::xpending,
    ),
    spec(
        "xclaim",
        -6,
        WRITE_FAST_NOOOM,
        ONE_KEY,
        stream_groups::xclaim,
    ),
    spec(
        "xautoclaim",
        -6,
        WRITE_FAST_NOOOM,
        ONE_KEY,
        stream_groups::xautoclaim,
    ),
    spec("xinfo", -2, &["readonly"], (2, 2, 1), streams::xinfo).with_subcommands(&[
        ("CONSUMERS", 4),
        ("GROUPS", 3),
        ("HELP", 2),
        ("STREAM", -3),
    ]),
];

/// The table sorted by name, for a binary search: cheaper than hashing the name on every
/// request, and no hasher to choose.
static BY_NAME: LazyLock<Vec<(&'static [u8], &'static CommandSpec)>> = LazyLock::new(|| {
    let mut sorted: Vec<_> = COMMANDS
        .iter()
        .map(|spec| (spec.name.as_bytes(), spec))
        .collect();
    sorted.sort_unstable_by_key(|(name, _)| *name);
    sorted
});

/// Longest command name, to lower-case names on the stack.
const NAME_BYTES_MAX: usize = 32;

/// The command called `name` (any case).
#[must_use]
pub fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    if name.len() > NAME_BYTES_MAX {
        return None;
    }
    let mut lower = [0u8; NAME_BYTES_MAX];
    let lower = &mut lower[..name.len()];
    lower.copy_from_slice(name);
    lower.make_ascii_lowercase();
    BY_NAME
        .binary_search_by(|(name, _)| (*name).cmp(&*lower))
        .ok()
        .map(|index| BY_NAME[index].1)
}

/// Redis' reply to an unknown command, quoting (at most 128 bytes of) its arguments.
#[must_use]
pub fn unknown_command_error(args: &[Bytes]) -> String {
    let name = args.first().map(|n| sanitize(n, 128)).unwrap_or_default();
    let mut quoted = String::new();
    for arg in args.iter().skip(1) {
        if quoted.len() >= 128 {
            break;
        }
        let room = 128 - quoted.len();
        quoted.push('\'');
        quoted.push_str(&sanitize(arg, room));
        quoted.push_str("' ");
    }
    format!("ERR unknown command '{name}', with args beginning with: {quoted}")
}

/// Error texts must stay on one line: Redis replaces CR and LF with spaces.
fn sanitize(bytes: &[u8], limit: usize) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(limit)]);
    text.replace(['\r', '\n'], " ")
}

/// Where `spec` is in [`COMMANDS`] (`None` for a spec that is not one of its entries):
/// per-command counters and records index by it.
#[must_use]
pub fn index_of(spec: &CommandSpec) -> Option<usize> {
    let at = (std::ptr::from_ref(spec) as usize).wrapping_sub(COMMANDS.as_ptr() as usize)
        / std::mem::size_of::<CommandSpec>();
    (at < COMMANDS.len()).then_some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves every command is found by name in any case, names are unique and lower case,
    // and unknown or over-long names are not found.
    #[test]
    fn lookup_finds_every_command() {
        let mut names: Vec<&str> = COMMANDS.iter().map(|spec| spec.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), COMMANDS.len(), "duplicate command names");
        for spec in COMMANDS {
            assert_eq!(spec.name, spec.name.to_ascii_lowercase());
            assert!(spec.name.len() <= NAME_BYTES_MAX);
            for variant in [spec.name.to_owned(), spec.name.to_ascii_uppercase()] {
                let found = lookup(variant.as_bytes()).map(|found| found.name);
                assert_eq!(found, Some(spec.name));
            }
        }
        assert!(lookup(b"nosuchcommand").is_none());
        assert!(lookup(&[b'g'; 100]).is_none());
        assert!(lookup(b"").is_none());
    }
}
