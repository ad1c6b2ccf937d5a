//! RESP command implementations, one file per command family. Each handler parses its
//! arguments, calls the `Cache` API, and writes its reply; errors are replies in Redis'
//! own words.

pub mod acl;
pub mod admin;
pub mod bits;
pub mod cluster;
pub mod collections;
pub mod config;
pub mod connection;
pub mod counters;
pub mod dump;
pub mod expire;
pub mod geo;
pub mod geohash;
pub mod glob;
pub mod hashes;
pub mod hll;
pub mod hyperloglog;
pub mod keys;
pub mod latency;
pub mod lcs;
pub mod lists;
pub mod notify;
pub mod pubsub;
pub mod scripting;
pub mod server;
pub mod sets;
pub mod slowlog;
pub mod sort;
pub mod stats;
pub mod stream_groups;
pub mod streams;
pub mod strings;
pub mod tracking;
pub mod transactions;
pub mod zsets;
pub mod zsets_algebra;

use bytes::Bytes;

/// Redis' error texts, shared by commands.
pub mod errors {
    /// An argument that should be an integer is not, or overflows.
    pub const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
    /// An argument that should be a float is not.
    pub const NOT_FLOAT: &str = "ERR value is not a valid float";
    /// Options that do not combine.
    pub const SYNTAX: &str = "ERR syntax error";
    /// INCR/DECR overflow.
    pub const OVERFLOW: &str = "ERR increment or decrement would overflow";
}

/// The argument at `index` as an i64 with Redis' strict rules.
#[must_use]
pub fn arg_i64(args: &[Bytes], index: usize) -> Option<i64> {
    args.get(index)
        .and_then(|arg| weft_resp::parse_i64_strict(arg))
}

/// Case-insensitive comparison of an argument with an ASCII keyword.
#[must_use]
pub fn is(arg: &[u8], keyword: &str) -> bool {
    arg.eq_ignore_ascii_case(keyword.as_bytes())
}
