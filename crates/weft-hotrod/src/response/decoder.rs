//! Whole responses as a client reads them, the inverse of the server's writers in
//! [`super`]: a [`ReplyDecoder`] takes complete response frames (headers, bodies, events)
//! from the front of a byte stream.
//!
//! A Hot Rod response carries no length: its body's layout follows from its opcode, its
//! status and the protocol version the client speaks on the connection. The decoder knows
//! all three, so it needs no memory of the requests sent; only the body of ITERATION_NEXT
//! depends on its request (whether it asked for metadata), and it is not read here.
//!
//! Robustness: as the request decoder, every length and count is checked against [`Limits`]
//! before anything is read for it, the frame against `frame_bytes_max`, and a malformed
//! frame is an error after which the stream cannot be resynchronised.

use bytes::{Bytes, BytesMut};

use super::{EventKind, Metadata, ResponseError, ResponseHeader, ResponseReader};
use crate::media::MediaType;
use crate::opcode;
use crate::request::Limits;
use crate::status::Status;
use crate::wire::Span;

/// What a PING answers: the cache's storage media types (2.9+), and the server's newest
/// protocol version and the operations it serves (3.0+).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PingInfo {
    /// How the cache stores keys (`Unspecified` when it does not say).
    pub key_type: MediaType,
    /// How the cache stores values.
    pub value_type: MediaType,
    /// The newest protocol version the server speaks (`major * 10 + minor`), from 3.0.
    pub server_version: Option<u8>,
    /// The request opcodes the server serves, from 3.0.
    pub opcodes: Vec<u16>,
}

/// A client-listener event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// What happened.
    pub kind: EventKind,
    /// The id the listener was registered with.
    pub listener_id: Bytes,
    /// The key (`None` for a custom event, whose data is in `custom`).
    pub key: Option<Bytes>,
    /// The entry's new version (created and modified events).
    pub version: Option<u64>,
    /// Whether the write was retried (the event may repeat an earlier one).
    pub retried: bool,
    /// A converter's output, for custom events.
    pub custom: Option<Bytes>,
}

/// The body of a response.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Body {
    /// Nothing follows the header (a write without previous value, a miss, CLEAR, PUT_ALL,
    /// listener registration, ...).
    Empty,
    /// A value (GET).
    Value(Bytes),
    /// A value and its version (GET_WITH_VERSION).
    Versioned {
        /// The entry's version.
        version: u64,
        /// The value.
        value: Bytes,
    },
    /// A value and its metadata (GET_WITH_METADATA, GET_STREAM).
    WithMetadata {
        /// Expiration and version.
        metadata: Metadata,
        /// The value.
        value: Bytes,
    },
    /// The previous (status 3) or current (status 4) entry of a conditional write.
    /// `value` is `None` when there was none; `metadata` is sent from 4.0.
    Previous {
        /// Its metadata (4.0+); version `u64::MAX` when there was no entry.
        metadata: Option<Metadata>,
        /// Its value.
        value: Option<Bytes>,
    },
    /// A count (SIZE).
    Size(u64),
    /// Named statistics (STATS).
    Stats(Vec<(String, String)>),
    /// What a PING says.
    Ping(PingInfo),
    /// Keys and values (GET_ALL, BULK_GET).
    Entries(Vec<(Bytes, Bytes)>),
    /// Keys (BULK_GET_KEYS).
    Keys(Vec<Bytes>),
    /// A string (ITERATION_START's id).
    Text(String),
    /// A byte array (EXEC's result, QUERY's).
    Bytes(Bytes),
    /// SASL mechanisms (AUTH_MECH_LIST).
    Mechanisms(Vec<String>),
    /// A SASL step's answer (AUTH).
    Auth {
        /// The exchange is complete.
        complete: bool,
        /// The server's challenge.
        challenge: Bytes,
    },
    /// An error response's message.
    Error(String),
    /// A listener event.
    Event(Event),
}

/// A decoded response: its header and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// Header (message id, opcode, status, topology update).
    pub header: ResponseHeader,
    /// Body.
    pub body: Body,
}

/// Decodes response frames for one connection: the protocol version and intelligence it
/// sends requests with decide the layouts.
#[derive(Debug, Clone)]
pub struct ReplyDecoder {
    version: u8,
    intelligence: u8,
    limits: Limits,
    /// Bytes the frame at the head of the buffer needs at least.
    need: usize,
}

impl ReplyDecoder {
    /// A decoder for responses to requests sent at `version` with `intelligence`, with the
    /// default limits.
    #[must_use]
    pub fn new(version: u8, intelligence: u8) -> Self {
        Self::with_limits(version, intelligence, Limits::default())
    }

    /// A decoder with these limits.
    #[must_use]
    pub fn with_limits(version: u8, intelligence: u8, limits: Limits) -> Self {
        Self {
            version,
            intelligence,
            limits,
            need: 0,
        }
    }

    /// Switches to another protocol version (after a PING negotiated it).
    pub fn set_version(&mut self, version: u8) {
        self.version = version;
    }

    /// Takes the next complete response from the front of `buf`; `Ok(None)` means more bytes
    /// are needed (the buffer is untouched).
    ///
    /// # Errors
    /// If the frame is malformed or longer than the limits allow; the stream cannot be read
    /// further then.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Reply>, ResponseError> {
        if buf.is_empty() || buf.len() < self.need {
            return Ok(None);
        }
        let parsed = {
            let mut reader = ResponseReader::limited(buf, &self.limits);
            self.parse(&mut reader)
                .map(|parsed| (parsed, reader.position()))
        };
        match parsed {
            Ok(((header, body), len)) => {
                self.need = 0;
                let frame = buf.split_to(len).freeze();
                Ok(Some(Reply {
                    header,
                    body: body.resolve(&frame),
                }))
            }
            Err(ResponseError::Incomplete(need)) => {
                self.need = need;
                Ok(None)
            }
            Err(error) => Err(error),
        }
    }

    fn parse(
        &self,
        r: &mut ResponseReader<'_>,
    ) -> Result<(ResponseHeader, SpanBody), ResponseError> {
        let header = r.header(self.intelligence)?;
        let status = header.status;
        let body = match header.opcode {
            opcode::ERROR => SpanBody::Error(r.string()?),
            opcode::EVENT_CREATED
            | opcode::EVENT_MODIFIED
            | opcode::EVENT_REMOVED
            | opcode::EVENT_EXPIRED => self.event(r, header.opcode)?,
            _ if status.is_error() => SpanBody::Error(r.string()?),
            op => self.body(r, op, status)?,
        };
        Ok((header, body))
    }

    fn event(&self, r: &mut ResponseReader<'_>, code: u8) -> Result<SpanBody, ResponseError> {
        let kind = match code {
            opcode::EVENT_CREATED => EventKind::Created,
            opcode::EVENT_MODIFIED => EventKind::Modified,
            opcode::EVENT_REMOVED => EventKind::Removed,
            _ => EventKind::Expired,
        };
        let listener_id = r.reader.array()?;
        let custom = r.u8()?;
        let retried = r.u8()? != 0;
        if custom != 0 {
            let data = r.reader.array()?;
            return Ok(SpanBody::Event {
                kind,
                listener_id,
                key: None,
                version: None,
                retried,
                custom: Some(data),
            });
        }
        let key = r.reader.array()?;
        let version = match kind {
            EventKind::Created | EventKind::Modified => Some(r.u64()?),
            EventKind::Removed | EventKind::Expired => None,
        };
        Ok(SpanBody::Event {
            kind,
            listener_id,
            key: Some(key),
            version,
            retried,
            custom: None,
        })
    }

    fn body(
        &self,
        r: &mut ResponseReader<'_>,
        response_opcode: u8,
        status: Status,
    ) -> Result<SpanBody, ResponseError> {
        let request = response_opcode.wrapping_sub(1);
        let found = status == Status::Success;
        Ok(match request {
            opcode::PUT
            | opcode::PUT_IF_ABSENT
            | opcode::REPLACE
            | opcode::REPLACE_IF_UNMODIFIED
            | opcode::REMOVE
            | opcode::REMOVE_IF_UNMODIFIED => match status {
                Status::SuccessWithPrevious | Status::NotExecutedWithPrevious => {
                    let metadata = if self.version >= 40 {
                        Some(r.metadata()?)
                    } else {
                        None
                    };
                    let value = r.reader.array()?;
                    // An empty value is "no previous entry" (the Java client reads it as null).
                    SpanBody::Previous {
                        metadata,
                        value: (!value.is_empty()).then_some(value),
                    }
                }
                _ => SpanBody::Empty,
            },
            opcode::GET if found => SpanBody::Value(r.reader.array()?),
            opcode::GET_WITH_VERSION if found => {
                let version = r.u64()?;
                SpanBody::Versioned {
                    version,
                    value: r.reader.array()?,
                }
            }
            opcode::GET_WITH_METADATA | opcode::GET_STREAM if found => {
                let metadata = r.metadata()?;
                SpanBody::WithMetadata {
                    metadata,
                    value: r.reader.array()?,
                }
            }
            opcode::GET
            | opcode::GET_WITH_VERSION
            | opcode::GET_WITH_METADATA
            | opcode::GET_STREAM
            | opcode::CONTAINS_KEY
            | opcode::CLEAR
            | opcode::PUT_ALL
            | opcode::ADD_CLIENT_LISTENER
            | opcode::REMOVE_CLIENT_LISTENER
            | opcode::ADD_BLOOM_FILTER_LISTENER
            | opcode::UPDATE_BLOOM_FILTER
            | opcode::ITERATION_END => SpanBody::Empty,
            opcode::SIZE => SpanBody::Size(r.vlong()?),
            opcode::STATS => {
                let n = r.reader.count(self.limits.count_max, "statistic")?;
                let mut stats = Vec::with_capacity(n.min(64));
                for _ in 0..n {
                    let name = r.string()?;
                    stats.push((name, r.string()?));
                }
                SpanBody::Stats(stats)
            }
            opcode::PING => SpanBody::Ping(self.ping(r)?),
            opcode::GET_ALL => {
                let n = r.reader.count(self.limits.count_max, "get-all entry")?;
                let mut entries = Vec::with_capacity(n.min(1024));
                for _ in 0..n {
                    let key = r.reader.array()?;
                    entries.push((key, r.reader.array()?));
                }
                SpanBody::Entries(entries)
            }
            opcode::BULK_GET => {
                let mut entries = Vec::new();
                while r.u8()? != 0 {
                    self.check_count(entries.len(), "bulk-get entry")?;
                    let key = r.reader.array()?;
                    entries.push((key, r.reader.array()?));
                }
                SpanBody::Entries(entries)
            }
            opcode::BULK_GET_KEYS => {
                let mut keys = Vec::new();
                while r.u8()? != 0 {
                    self.check_count(keys.len(), "bulk-get key")?;
                    keys.push(r.reader.array()?);
                }
                SpanBody::Keys(keys)
            }
            opcode::ITERATION_START if found => SpanBody::Text(r.string()?),
            opcode::ITERATION_START => SpanBody::Empty,
            opcode::EXEC | opcode::QUERY => SpanBody::Bytes(r.reader.array()?),
            opcode::AUTH_MECH_LIST => {
                let n = r.reader.count(self.limits.count_max, "SASL mechanism")?;
                let mut mechanisms = Vec::with_capacity(n.min(16));
                for _ in 0..n {
                    mechanisms.push(r.string()?);
                }
                SpanBody::Mechanisms(mechanisms)
            }
            opcode::AUTH => {
                let complete = r.u8()? != 0;
                SpanBody::Auth {
                    complete,
                    challenge: r.reader.array()?,
                }
            }
            _ => {
                return Err(ResponseError::Invalid(format!(
                    "response opcode 0x{response_opcode:02x} is not read by this decoder"
                )));
            }
        })
    }

    fn check_count(&self, so_far: usize, what: &str) -> Result<(), ResponseError> {
        if so_far >= self.limits.count_max {
            return Err(ResponseError::Invalid(format!(
                "{what} count is above the limit of {}",
                self.limits.count_max
            )));
        }
        Ok(())
    }

    fn ping(&self, r: &mut ResponseReader<'_>) -> Result<PingInfo, ResponseError> {
        let mut info = PingInfo::default();
        if self.version >= 29 {
            info.key_type = r.media_type()?;
            info.value_type = r.media_type()?;
        }
        if self.version >= 30 {
            info.server_version = Some(r.u8()?);
            let n = r.reader.count(self.limits.count_max, "opcode")?;
            info.opcodes.reserve(n.min(256));
            for _ in 0..n {
                info.opcodes.push(r.u16()?);
            }
        }
        Ok(info)
    }
}

/// A body whose byte arrays are still spans of the frame being read.
enum SpanBody {
    Empty,
    Value(Span),
    Versioned {
        version: u64,
        value: Span,
    },
    WithMetadata {
        metadata: Metadata,
        value: Span,
    },
    Previous {
        metadata: Option<Metadata>,
        value: Option<Span>,
    },
    Size(u64),
    Stats(Vec<(String, String)>),
    Ping(PingInfo),
    Entries(Vec<(Span, Span)>),
    Keys(Vec<Span>),
    Text(String),
    Bytes(Span),
    Mechanisms(Vec<String>),
    Auth {
        complete: bool,
        challenge: Span,
    },
    Error(String),
    Event {
        kind: EventKind,
        listener_id: Span,
        key: Option<Span>,
        version: Option<u64>,
        retried: bool,
        custom: Option<Span>,
    },
}

impl SpanBody {
    /// The body with its spans as [`Bytes`] sharing `frame`'s buffer.
    fn resolve(self, frame: &Bytes) -> Body {
        let bytes = |span: Span| frame.slice(span.range());
        match self {
            Self::Empty => Body::Empty,
            Self::Value(value) => Body::Value(bytes(value)),
            Self::Versioned { version, value } => Body::Versioned {
                version,
                value: bytes(value),
            },
            Self::WithMetadata { metadata, value } => Body::WithMetadata {
                metadata,
                value: bytes(value),
            },
            Self::Previous { metadata, value } => Body::Previous {
                metadata,
                value: value.map(bytes),
            },
            Self::Size(size) => Body::Size(size),
            Self::Stats(stats) => Body::Stats(stats),
            Self::Ping(info) => Body::Ping(info),
            Self::Entries(entries) => Body::Entries(
                entries
                    .into_iter()
                    .map(|(key, value)| (bytes(key), bytes(value)))
                    .collect(),
            ),
            Self::Keys(keys) => Body::Keys(keys.into_iter().map(bytes).collect()),
            Self::Text(text) => Body::Text(text),
            Self::Bytes(data) => Body::Bytes(bytes(data)),
            Self::Mechanisms(mechanisms) => Body::Mechanisms(mechanisms),
            Self::Auth {
                complete,
                challenge,
            } => Body::Auth {
                complete,
                challenge: bytes(challenge),
            },
            Self::Error(message) => Body::Error(message),
            Self::Event {
                kind,
                listener_id,
                key,
                version,
                retried,
                custom,
            } => Body::Event(Event {
                kind,
                listener_id: bytes(listener_id),
                key: key.map(bytes),
                version,
                retried,
                custom: custom.map(bytes),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::BufMut;

    use super::super::{
        Topology, put_metadata, put_ping_body, put_previous, write_error, write_event, write_header,
    };
    use super::*;
    use crate::wire::{put_array, put_string, put_vint, put_vlong};

    fn reply_of(op: u8, status: Status, body: impl FnOnce(&mut BytesMut)) -> BytesMut {
        let mut out = BytesMut::new();
        write_header(&mut out, 9, opcode::response_of(op), status, None);
        body(&mut out);
        out
    }

    fn decode_one(version: u8, bytes: &[u8]) -> Reply {
        let mut buf = BytesMut::from(bytes);
        let reply = ReplyDecoder::new(version, 3)
            .decode(&mut buf)
            .expect("valid")
            .expect("complete");
        assert!(buf.is_empty(), "{} bytes left over", buf.len());
        reply
    }

    // Proves every body the server writes reads back as what was written, at 4.0 and 3.0.
    #[test]
    fn reads_what_the_server_writes() {
        let metadata = Metadata {
            lifespan: Some((1_700_000_000_000, 60)),
            max_idle: None,
            version: 42,
        };
        let cases: Vec<(u8, u8, BytesMut, Body)> = vec![
            (
                40,
                opcode::GET,
                reply_of(opcode::GET, Status::Success, |o| put_array(o, b"v")),
                Body::Value(Bytes::from_static(b"v")),
            ),
            (
                40,
                opcode::GET,
                reply_of(opcode::GET, Status::KeyDoesNotExist, |_| {}),
                Body::Empty,
            ),
            (
                40,
                opcode::GET_WITH_VERSION,
                reply_of(opcode::GET_WITH_VERSION, Status::Success, |o| {
                    o.put_u64(7);
                    put_array(o, b"v");
                }),
                Body::Versioned {
                    version: 7,
                    value: Bytes::from_static(b"v"),
                },
            ),
            (
                40,
                opcode::GET_WITH_METADATA,
                reply_of(opcode::GET_WITH_METADATA, Status::Success, |o| {
                    put_metadata(o, &metadata);
                    put_array(o, b"value");
                }),
                Body::WithMetadata {
                    metadata,
                    value: Bytes::from_static(b"value"),
                },
            ),
            (
                40,
                opcode::PUT,
                reply_of(opcode::PUT, Status::SuccessWithPrevious, |o| {
                    put_previous(o, 40, Some((&metadata, b"old")));
                }),
                Body::Previous {
                    metadata: Some(metadata),
                    value: Some(Bytes::from_static(b"old")),
                },
            ),
            (
                40,
                opcode::PUT,
                reply_of(opcode::PUT, Status::SuccessWithPrevious, |o| {
                    put_previous(o, 40, None);
                }),
                Body::Previous {
                    metadata: Some(Metadata {
                        version: u64::MAX,
                        ..Metadata::default()
                    }),
                    value: None,
                },
            ),
            (
                30,
                opcode::REPLACE_IF_UNMODIFIED,
                reply_of(
                    opcode::REPLACE_IF_UNMODIFIED,
                    Status::NotExecutedWithPrevious,
                    |o| put_previous(o, 30, Some((&metadata, b"cur"))),
                ),
                Body::Previous {
                    metadata: None,
                    value: Some(Bytes::from_static(b"cur")),
                },
            ),
            (
                40,
                opcode::REMOVE,
                reply_of(opcode::REMOVE, Status::KeyDoesNotExist, |_| {}),
                Body::Empty,
            ),
            (
                40,
                opcode::SIZE,
                reply_of(opcode::SIZE, Status::Success, |o| put_vlong(o, 300)),
                Body::Size(300),
            ),
            (
                40,
                opcode::STATS,
                reply_of(opcode::STATS, Status::Success, |o| {
                    put_vint(o, 1);
                    put_string(o, "hits");
                    put_string(o, "3");
                }),
                Body::Stats(vec![("hits".into(), "3".into())]),
            ),
            (
                40,
                opcode::PING,
                reply_of(opcode::PING, Status::Success, |o| {
                    put_ping_body(
                        o,
                        40,
                        &MediaType::from_essence("text/plain"),
                        &MediaType::Unspecified,
                        41,
                        &[opcode::GET, opcode::PUT],
                    );
                }),
                Body::Ping(PingInfo {
                    key_type: MediaType::from_essence("text/plain"),
                    value_type: MediaType::Unspecified,
                    server_version: Some(41),
                    opcodes: vec![3, 1],
                }),
            ),
            (
                40,
                opcode::GET_ALL,
                reply_of(opcode::GET_ALL, Status::Success, |o| {
                    put_vint(o, 2);
                    for (k, v) in [(b"a", b"1"), (b"b", b"2")] {
                        put_array(o, k);
                        put_array(o, v);
                    }
                }),
                Body::Entries(vec![
                    (Bytes::from_static(b"a"), Bytes::from_static(b"1")),
                    (Bytes::from_static(b"b"), Bytes::from_static(b"2")),
                ]),
            ),
            (
                40,
                opcode::BULK_GET_KEYS,
                reply_of(opcode::BULK_GET_KEYS, Status::Success, |o| {
                    o.put_u8(1);
                    put_array(o, b"a");
                    o.put_u8(0);
                }),
                Body::Keys(vec![Bytes::from_static(b"a")]),
            ),
            (
                40,
                opcode::EXEC,
                reply_of(opcode::EXEC, Status::Success, |o| put_array(o, b"[]")),
                Body::Bytes(Bytes::from_static(b"[]")),
            ),
        ];
        for (version, op, bytes, expected) in cases {
            let reply = decode_one(version, &bytes);
            assert_eq!(reply.body, expected, "opcode 0x{op:02x}");
            assert_eq!(reply.header.message_id, 9);
            // Every cut is incomplete, never wrong.
            for cut in 0..bytes.len() {
                let mut buf = BytesMut::from(&bytes[..cut]);
                assert_eq!(
                    ReplyDecoder::new(version, 3).decode(&mut buf),
                    Ok(None),
                    "opcode 0x{op:02x} cut at {cut}"
                );
                assert_eq!(buf.len(), cut);
            }
        }
    }

    // Proves errors, events and a topology update read back, and frames that follow one
    // another in a buffer come out one at a time.
    #[test]
    fn errors_events_and_topology() {
        let mut out = BytesMut::new();
        write_error(&mut out, 4, Status::NodeSuspected, "node gone");
        write_event(&mut out, 0, EventKind::Modified, b"id", b"k", 5, true);
        write_event(&mut out, 0, EventKind::Removed, b"id", b"k", 0, false);
        let topology = Topology {
            id: 3,
            servers: vec![("127.0.0.1".into(), 11222)],
            segment_owners: Some(vec![vec![0]; 2]),
        };
        write_header(
            &mut out,
            5,
            opcode::response_of(opcode::CLEAR),
            Status::Success,
            Some((&topology, 3)),
        );
        let mut decoder = ReplyDecoder::new(40, 3);
        let error = decoder.decode(&mut out).expect("valid").expect("complete");
        assert_eq!(error.header.status, Status::NodeSuspected);
        assert_eq!(error.body, Body::Error("node gone".into()));
        let modified = decoder.decode(&mut out).expect("valid").expect("complete");
        assert_eq!(
            modified.body,
            Body::Event(Event {
                kind: EventKind::Modified,
                listener_id: Bytes::from_static(b"id"),
                key: Some(Bytes::from_static(b"k")),
                version: Some(5),
                retried: true,
                custom: None,
            })
        );
        let removed = decoder.decode(&mut out).expect("valid").expect("complete");
        assert!(matches!(
            removed.body,
            Body::Event(Event {
                kind: EventKind::Removed,
                version: None,
                ..
            })
        ));
        let clear = decoder.decode(&mut out).expect("valid").expect("complete");
        assert_eq!(clear.header.topology, Some(topology));
        assert_eq!(clear.body, Body::Empty);
        assert!(out.is_empty());
        assert_eq!(decoder.decode(&mut out), Ok(None));
    }

    // Proves malformed and oversized responses are errors, not panics or waits.
    #[test]
    fn malformed_responses() {
        let mut decoder = ReplyDecoder::new(40, 3);
        assert!(matches!(
            decoder.decode(&mut BytesMut::from(&[0xa0, 0x00, 0x04, 0x00, 0x00][..])),
            Err(ResponseError::Invalid(_))
        ));
        let unknown = reply_of(0x7e, Status::Success, |_| {});
        assert!(matches!(
            ReplyDecoder::new(40, 3).decode(&mut BytesMut::from(&unknown[..])),
            Err(ResponseError::Invalid(_))
        ));
        let limits = Limits {
            array_bytes_max: 4,
            ..Limits::default()
        };
        let long = reply_of(opcode::GET, Status::Success, |o| put_array(o, b"12345"));
        assert!(matches!(
            ReplyDecoder::with_limits(40, 3, limits).decode(&mut BytesMut::from(&long[..])),
            Err(ResponseError::Invalid(_))
        ));
        let limits = Limits {
            count_max: 1,
            ..Limits::default()
        };
        let many = reply_of(opcode::BULK_GET_KEYS, Status::Success, |o| {
            for _ in 0..2 {
                o.put_u8(1);
                put_array(o, b"k");
            }
            o.put_u8(0);
        });
        assert!(matches!(
            ReplyDecoder::with_limits(40, 3, limits).decode(&mut BytesMut::from(&many[..])),
            Err(ResponseError::Invalid(_))
        ));
    }
}
