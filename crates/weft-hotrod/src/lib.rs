//! `weft-hotrod` is a sans-IO codec for Infinispan's Hot Rod protocol, versions 2.0 to 4.1:
//! it turns bytes into request [`Frame`]s ([`Decoder`]) and writes response frames
//! ([`response`]); for the client side it writes requests ([`encode`]) and reads response
//! headers and the primitives of their bodies ([`ResponseReader`]) or whole responses and
//! events ([`ReplyDecoder`]). It does no I/O and knows nothing of caches, so the server and
//! the Rust client (`weft-client`) share it.
//!
//! It owns the wire format: primitive encodings ([`wire`]), the header and body layout of
//! each version, media types, status codes, the metadata block, topology updates and
//! events. Every length and count is checked against [`Limits`] before anything is
//! buffered for it; a malformed frame is a [`DecodeError`] carrying the status to answer.
//!
//! ```
//! use bytes::BytesMut;
//! use weft_hotrod::{Decoder, Request};
//! // A PING sent with a 3.1 header, as the Java client's handshake does.
//! let mut buf = BytesMut::from(&[0xa0, 0x02, 0x1f, 0x17, 0x00, 0x00, 0x03, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x00, 0x00][..]);
//! let frame = Decoder::default().decode(&mut buf).unwrap().unwrap();
//! assert_eq!(frame.request, Request::Ping);
//! assert_eq!(frame.header.version, 31);
//! ```

pub mod media;
pub mod opcode;
pub mod request;
pub mod response;
pub mod status;
pub mod wire;

pub use media::MediaType;
pub use request::{
    DecodeError, Decoder, EncodeError, Expiration, Factory, Frame, Header, Lifetime, Limits,
    Request, RequestHeader, VERSION_MAX, VERSION_MIN, encode, flags,
};
pub use response::{
    Body, Event, EventKind, Metadata, PingInfo, Reply, ReplyDecoder, ResponseError, ResponseHeader,
    ResponseReader, Topology,
};
pub use status::Status;
pub use wire::Span;
