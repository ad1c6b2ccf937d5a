//! Sans-IO RESP2/RESP3 codec for Weft's Redis-compatible endpoint.
//!
//! What this crate owns:
//!
//! - **Request framing** ([`RequestDecoder`], [`parse_request`]): multibulk
//!   and inline requests from a byte buffer, with Redis's rules, limits
//!   ([`Limits`]) and exact error texts ([`ProtocolError`]).
//! - **Reply encoding** ([`Reply`], `write_*`): every RESP3 type, degraded to
//!   RESP2 the way Redis does when the connection speaks [`Protocol::Resp2`].
//! - **Redis number rules** ([`parse_i64_strict`], [`parse_f64_redis`],
//!   [`format_double`], [`format_double_g17`], [`format_double_reply`]), shared by the codec and the
//!   command implementations so both agree with Redis byte for byte, and
//!   [`LongDouble`], Redis' x87 `long double` arithmetic for `INCRBYFLOAT`.
//! - **Protocol sniffing** ([`looks_like_http`], [`looks_like_resp`]) for the
//!   server's single-port detector.
//! - **Redis' RDB value format** ([`rdb`]): DUMP/RESTORE and FUNCTION DUMP/RESTORE
//!   payloads, read with every check Redis' deep sanitization makes and written as
//!   redis-server 7.0 writes them.
//!
//! What it must not do: perform I/O, spawn tasks, depend on an async runtime,
//! know about commands or the cache, or keep any state beyond one
//! connection's partial request. Bytes come in as buffers and frames go out
//! as buffers; sockets, timeouts and closing the connection after a
//! [`ProtocolError`] belong to the server.
//!
//! Robustness contract for untrusted input: no panics, `Ok(None)` (never an
//! error) for any prefix of a valid request, work linear in the bytes
//! received however they are split into reads, and no allocation sized by a
//! declared length beyond a small fixed cap.

mod decode;
mod detect;
mod encode;
mod error;
mod inline;
mod long_double;
mod number;

pub use decode::{
    DEFAULT_BULK_BYTES_MAX, DEFAULT_INLINE_BYTES_MAX, DEFAULT_MULTIBULK_LENGTH_MAX, Limits,
    Request, RequestDecoder, parse_request,
};
pub use detect::{DETECT_LINE_MAX, Detection, looks_like_http, looks_like_resp};
pub use encode::{
    Protocol, Reply, write_array_len, write_big_number, write_bool, write_bulk, write_bulk_header,
    write_double, write_error, write_integer, write_map_len, write_null, write_null_array,
    write_push_len, write_request, write_set_len, write_simple, write_verbatim,
};
pub use error::ProtocolError;
pub mod rdb;
pub use long_double::{LONG_DOUBLE_TEXT_BYTES_MAX, LongDouble};
pub use number::{
    format_double, format_double_g17, format_double_reply, parse_f64_redis, parse_f64_strtod,
    parse_i64_strict, strtod,
};
