//! Sans-IO codec for Weft's memcached endpoint: the text protocol and the binary protocol of
//! memcached 1.6.
//!
//! What this crate owns:
//!
//! - **Text protocol** ([`text`]): [`TextDecoder`], an incremental, zero-copy request decoder
//!   over a connection's read buffer (storage commands with their data block, multi-key
//!   retrievals, every other command of the classic protocol), with memcached's tokenizer,
//!   number parsing, limits and exact error lines; and the writers of every reply line
//!   (`VALUE`, `STORED`, `STAT`, `CLIENT_ERROR …`). A client-side request writer
//!   ([`text::write_request`]) serves tests and tools.
//! - **Binary protocol** ([`binary`]): [`BinaryDecoder`] for 24-byte-header request packets
//!   (every opcode memcached 1.6 serves, quiet variants included), response writers, status
//!   codes and their standard texts, and for the client side a request writer and a response
//!   reader.
//! - **Protocol sniffing** ([`text::looks_like_text_command`]) for the server's single-port
//!   detector.
//! - **Limits** ([`Limits`], [`KEY_BYTES_MAX`], [`item_size`]): memcached's 250-byte keys,
//!   2048-byte command lines and its item-size rule (`-I`, 1 MiB by default).
//!
//! What it must not do: perform I/O, depend on an async runtime, know about caches or
//! commands' effects, or keep state beyond one connection's partial request. Which reply a
//! command gets, statistics, expiration and CAS values belong to the server.
//!
//! Robustness contract for untrusted input: no panics; `Ok(None)` for any prefix of a valid
//! request; a verdict that depends only on the bytes, never on how they were split into reads;
//! and no buffering beyond one request, whose size is bounded by [`Limits`] — data blocks of
//! refused items are discarded as they arrive rather than buffered.
//!
//! ```
//! use bytes::BytesMut;
//! use weft_memcached::{TextDecoder, text::{TextCommand, StoreMode}};
//!
//! let mut buf = BytesMut::from(&b"set greeting 5 0 5\r\nhello\r\n"[..]);
//! let request = TextDecoder::default().decode(&mut buf).unwrap().unwrap();
//! let TextCommand::Store { mode, key, flags, value, .. } = request.command else { panic!() };
//! assert_eq!((mode, &key[..], flags, &value[..]), (StoreMode::Set, &b"greeting"[..], 5, &b"hello"[..]));
//! assert!(buf.is_empty());
//! ```

pub mod binary;
mod decimal;
mod limits;
pub mod number;
pub mod text;

pub use binary::{BinaryCommand, BinaryDecoder, BinaryProtocolError, BinaryRequest};
pub use limits::{
    DEFAULT_ITEM_BYTES_MAX, DEFAULT_LINE_BYTES_MAX, DEFAULT_MULTIGET_LINE_BYTES_MAX,
    ITEM_HEADER_BYTES, KEY_BYTES_MAX, Limits, item_size,
};
pub use text::{TextCommand, TextDecoder, TextError, TextProtocolError, TextRequest};

/// The version memcached clients are told (`version`, binary `VERSION`, `stats`). Clients
/// check it for feature support, so it names the memcached release whose behaviour this
/// codec follows.
pub const MEMCACHED_VERSION: &str = "1.6.18";
