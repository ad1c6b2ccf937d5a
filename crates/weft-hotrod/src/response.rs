//! Response frames: the header (with an optional topology update), error responses, the
//! metadata block, previous values, the PING body and events. Written by the server's
//! functions here, read back by a client with [`ResponseReader`].

use bytes::{BufMut, BytesMut};

use crate::media::MediaType;
use crate::opcode;
use crate::request::Limits;
use crate::status::Status;
use crate::wire::{ReadError, Reader, put_array, put_string, put_vint, put_vlong};

mod decoder;

pub use decoder::{Body, Event, PingInfo, Reply, ReplyDecoder};

/// The magic byte that starts every response.
pub const RESPONSE_MAGIC: u8 = 0xA1;
/// The consistent-hash function clients must use (Infinispan's MurmurHash3 variant).
pub const HASH_FUNCTION_VERSION: u8 = 3;

/// A cluster view as clients see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// Changes whenever membership or ownership changes.
    pub id: i32,
    /// Hot Rod endpoints (`host`, `port`); a member's index is its position here.
    pub servers: Vec<(String, u16)>,
    /// Owners of each segment by member index, primary first; `None` when keys are not
    /// routed by hash.
    pub segment_owners: Option<Vec<Vec<u32>>>,
}

/// Appends a response header. `topology` is sent when the client's intelligence asks for
/// it (2: servers; 3: servers and segment owners) — the caller decides whether it is due.
pub fn write_header(
    out: &mut BytesMut,
    message_id: u64,
    response_opcode: u8,
    status: Status,
    topology: Option<(&Topology, u8)>,
) {
    out.put_u8(RESPONSE_MAGIC);
    put_vlong(out, message_id);
    out.put_u8(response_opcode);
    out.put_u8(status.code());
    match topology {
        Some((topology, intelligence)) if intelligence >= 2 => {
            out.put_u8(1);
            put_topology(out, topology, intelligence);
        }
        _ => out.put_u8(0),
    }
}

fn put_topology(out: &mut BytesMut, topology: &Topology, intelligence: u8) {
    put_vint(out, topology.id as u32);
    put_vint(out, topology.servers.len() as u32);
    for (host, port) in &topology.servers {
        put_string(out, host);
        out.put_u16(*port);
    }
    if intelligence < 3 {
        return;
    }
    match &topology.segment_owners {
        Some(owners) => {
            out.put_u8(HASH_FUNCTION_VERSION);
            put_vint(out, owners.len() as u32);
            for segment in owners {
                if segment.is_empty() {
                    // No known owner: the member at index 0.
                    out.put_slice(&[1, 0]);
                    continue;
                }
                out.put_u8(segment.len().min(255) as u8);
                for &member in segment.iter().take(255) {
                    put_vint(out, member);
                }
            }
        }
        None => {
            out.put_u8(0);
            put_vint(out, 0);
        }
    }
}

/// Appends an error response: the error opcode, `status`, and `message` (clients search it,
/// e.g. for `CacheNotFoundException`).
pub fn write_error(out: &mut BytesMut, message_id: u64, status: Status, message: &str) {
    write_header(out, message_id, opcode::ERROR, status, None);
    put_string(out, message);
}

/// Expiration and version of an entry, as the metadata block carries them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Metadata {
    /// Creation time (epoch ms) and lifespan in seconds, for entries with a lifespan.
    pub lifespan: Option<(i64, u32)>,
    /// Last use (epoch ms) and max idle in seconds, for entries with a max idle.
    pub max_idle: Option<(i64, u32)>,
    /// Entry version.
    pub version: u64,
}

/// Appends the metadata block: flags, finite lifetimes, version.
pub fn put_metadata(out: &mut BytesMut, metadata: &Metadata) {
    let flags =
        u8::from(metadata.lifespan.is_none()) | (u8::from(metadata.max_idle.is_none()) << 1);
    out.put_u8(flags);
    if let Some((created, seconds)) = metadata.lifespan {
        out.put_i64(created);
        put_vint(out, seconds);
    }
    if let Some((last_used, seconds)) = metadata.max_idle {
        out.put_i64(last_used);
        put_vint(out, seconds);
    }
    out.put_u64(metadata.version);
}

/// Appends a previous value (sent with status 3 or 4): from 4.0 the metadata block and the
/// value; before, the value alone. `None` is written as "no previous value" (an empty value,
/// which clients read as null).
pub fn put_previous(out: &mut BytesMut, version: u8, previous: Option<(&Metadata, &[u8])>) {
    if version >= 40 {
        match previous {
            Some((metadata, _)) => put_metadata(out, metadata),
            None => put_metadata(
                out,
                &Metadata {
                    version: u64::MAX,
                    ..Metadata::default()
                },
            ),
        }
    }
    put_array(out, previous.map_or(&[][..], |(_, value)| value));
}

/// Appends a PING response body: the cache's storage media types (2.9+), then this server's
/// version and the operations it serves (3.0+).
pub fn put_ping_body(
    out: &mut BytesMut,
    version: u8,
    key_type: &MediaType,
    value_type: &MediaType,
    server_version: u8,
    opcodes: &[u8],
) {
    if version >= 29 {
        key_type.write(out);
        value_type.write(out);
    }
    if version >= 30 {
        out.put_u8(server_version);
        put_vint(out, opcodes.len() as u32);
        for &op in opcodes {
            out.put_u16(u16::from(op));
        }
    }
}

/// What happened to an entry, for a client listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// Created (carries the new version).
    Created,
    /// Modified (carries the new version).
    Modified,
    /// Removed.
    Removed,
    /// Expired.
    Expired,
}

impl EventKind {
    /// The event's opcode.
    #[must_use]
    pub const fn opcode(self) -> u8 {
        match self {
            Self::Created => opcode::EVENT_CREATED,
            Self::Modified => opcode::EVENT_MODIFIED,
            Self::Removed => opcode::EVENT_REMOVED,
            Self::Expired => opcode::EVENT_EXPIRED,
        }
    }

    /// The interest bit a listener registers for it (2.6+).
    #[must_use]
    pub const fn interest(self) -> u32 {
        match self {
            Self::Created => 1,
            Self::Modified => 2,
            Self::Removed => 4,
            Self::Expired => 8,
        }
    }
}

/// Appends an event frame. `message_id` is 0 for live events and the registering request's
/// id for include-current-state events; `version` is the entry version (created and
/// modified events only).
pub fn write_event(
    out: &mut BytesMut,
    message_id: u64,
    kind: EventKind,
    listener_id: &[u8],
    key: &[u8],
    version: u64,
    retried: bool,
) {
    write_header(out, message_id, kind.opcode(), Status::Success, None);
    put_array(out, listener_id);
    out.put_u8(0); // not custom
    out.put_u8(u8::from(retried));
    put_array(out, key);
    if matches!(kind, EventKind::Created | EventKind::Modified) {
        out.put_u64(version);
    }
}

/// Why a response could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResponseError {
    /// The buffer ends first; the response is at least this many bytes long.
    #[error("incomplete response: at least {0} bytes needed")]
    Incomplete(usize),
    /// The bytes break the grammar.
    #[error("malformed response: {0}")]
    Invalid(String),
}

impl From<ReadError> for ResponseError {
    fn from(error: ReadError) -> Self {
        match error {
            ReadError::Incomplete(need) => Self::Incomplete(need),
            ReadError::Invalid(reason) => Self::Invalid(reason),
        }
    }
}

/// The header of a response, as a client reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHeader {
    /// The request's message id (0 for live events).
    pub message_id: u64,
    /// The response opcode ([`opcode::response_of`] the request's, [`opcode::ERROR`], or an
    /// event's).
    pub opcode: u8,
    /// The status.
    pub status: Status,
    /// The topology update that came with the response, if any.
    pub topology: Option<Topology>,
}

/// Reads responses from the front of a buffer, as a client does: the header, then the
/// primitives bodies are made of. A body carries no length, so its reader must know the
/// request it answers. Every read reports [`ResponseError::Incomplete`] when the buffer
/// ends first; reading from the frame's start again once more bytes arrived is the caller's
/// business (no I/O here).
pub struct ResponseReader<'a> {
    reader: Reader<'a>,
}

impl std::fmt::Debug for ResponseReader<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseReader")
            .field("position", &self.reader.position())
            .finish_non_exhaustive()
    }
}

impl<'a> ResponseReader<'a> {
    /// A reader at the start of `buf`, accepting arrays and strings up to the decoder's
    /// default limits.
    #[must_use]
    pub fn new(buf: &'a [u8]) -> Self {
        let limits = Limits::default();
        Self {
            reader: Reader::new(buf, limits.array_bytes_max, limits.string_bytes_max),
        }
    }

    /// A reader at the start of `buf` that holds arrays, strings and the whole frame to
    /// `limits`.
    pub(crate) fn limited(buf: &'a [u8], limits: &Limits) -> Self {
        Self {
            reader: Reader::new(buf, limits.array_bytes_max, limits.string_bytes_max)
                .with_frame_max(limits.frame_bytes_max),
        }
    }

    /// Bytes read so far.
    #[must_use]
    pub fn position(&self) -> usize {
        self.reader.position()
    }

    /// A response header. `intelligence` is the one the request declared: it decides the
    /// layout of a topology update (2: servers; 3: servers and segment owners).
    ///
    /// # Errors
    /// If the buffer ends first, or the magic or status byte is wrong.
    pub fn header(&mut self, intelligence: u8) -> Result<ResponseHeader, ResponseError> {
        let magic = self.reader.u8()?;
        if magic != RESPONSE_MAGIC {
            return Err(ResponseError::Invalid(format!(
                "magic byte 0x{magic:02x}, expected 0x{RESPONSE_MAGIC:02x}"
            )));
        }
        let message_id = self.reader.vlong()?;
        let opcode = self.reader.u8()?;
        let code = self.reader.u8()?;
        let status = Status::from_code(code)
            .ok_or_else(|| ResponseError::Invalid(format!("unknown status 0x{code:02x}")))?;
        let topology = match self.reader.u8()? {
            0 => None,
            1 => Some(self.topology(intelligence)?),
            other => {
                return Err(ResponseError::Invalid(format!(
                    "topology marker {other}, expected 0 or 1"
                )));
            }
        };
        Ok(ResponseHeader {
            message_id,
            opcode,
            status,
            topology,
        })
    }

    fn topology(&mut self, intelligence: u8) -> Result<Topology, ResponseError> {
        let id = self.reader.vint()? as i32;
        let server_count = self.reader.vint()? as usize;
        let mut servers = Vec::with_capacity(server_count.min(1024));
        for _ in 0..server_count {
            let host = self.reader.string()?;
            servers.push((host, self.reader.u16()?));
        }
        if intelligence < 3 {
            return Ok(Topology {
                id,
                servers,
                segment_owners: None,
            });
        }
        let hash_function = self.reader.u8()?;
        let segment_count = self.reader.vint()? as usize;
        let mut owners = Vec::with_capacity(segment_count.min(1 << 16));
        for _ in 0..segment_count {
            let n = self.reader.u8()?;
            let mut segment = Vec::with_capacity(usize::from(n));
            for _ in 0..n {
                segment.push(self.reader.vint()?);
            }
            owners.push(segment);
        }
        Ok(Topology {
            id,
            servers,
            segment_owners: (hash_function != 0).then_some(owners),
        })
    }

    /// A byte.
    ///
    /// # Errors
    /// If the buffer ends first.
    pub fn u8(&mut self) -> Result<u8, ResponseError> {
        Ok(self.reader.u8()?)
    }

    /// A big-endian `u16` (the opcodes a PING lists).
    ///
    /// # Errors
    /// If the buffer ends first.
    pub fn u16(&mut self) -> Result<u16, ResponseError> {
        Ok(self.reader.u16()?)
    }

    /// A big-endian `u64` (entry versions).
    ///
    /// # Errors
    /// If the buffer ends first.
    pub fn u64(&mut self) -> Result<u64, ResponseError> {
        Ok(self.reader.u64()?)
    }

    /// A vInt.
    ///
    /// # Errors
    /// If the buffer ends first or the vInt overflows.
    pub fn vint(&mut self) -> Result<u32, ResponseError> {
        Ok(self.reader.vint()?)
    }

    /// A vLong.
    ///
    /// # Errors
    /// If the buffer ends first or the vLong overflows.
    pub fn vlong(&mut self) -> Result<u64, ResponseError> {
        Ok(self.reader.vlong()?)
    }

    /// A byte array, borrowed from the buffer.
    ///
    /// # Errors
    /// If the buffer ends first or the length is past the limit.
    pub fn array(&mut self) -> Result<&'a [u8], ResponseError> {
        let span = self.reader.array()?;
        Ok(self.reader.slice(span))
    }

    /// A UTF-8 string.
    ///
    /// # Errors
    /// If the buffer ends first, the length is past the limit or the bytes are not UTF-8.
    pub fn string(&mut self) -> Result<String, ResponseError> {
        Ok(self.reader.string()?)
    }

    /// A media type (the PING body's storage types).
    ///
    /// # Errors
    /// If the buffer ends first or the media type is malformed.
    pub fn media_type(&mut self) -> Result<MediaType, ResponseError> {
        Ok(MediaType::read(&mut self.reader)?)
    }

    /// A metadata block, as [`put_metadata`] writes it.
    ///
    /// # Errors
    /// If the buffer ends first.
    pub fn metadata(&mut self) -> Result<Metadata, ResponseError> {
        let flags = self.reader.u8()?;
        let mut lifetime = |infinite_bit: u8| -> Result<Option<(i64, u32)>, ResponseError> {
            if flags & infinite_bit != 0 {
                return Ok(None);
            }
            let at_ms = self.reader.u64()? as i64;
            Ok(Some((at_ms, self.reader.vint()?)))
        };
        let lifespan = lifetime(0x01)?;
        let max_idle = lifetime(0x02)?;
        Ok(Metadata {
            lifespan,
            max_idle,
            version: self.reader.u64()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the traced put-with-previous response at 4.0 byte for byte.
    #[test]
    fn traced_previous_value() {
        let mut out = BytesMut::new();
        write_header(
            &mut out,
            7,
            opcode::response_of(opcode::PUT),
            Status::SuccessWithPrevious,
            None,
        );
        let metadata = Metadata {
            version: 1,
            ..Metadata::default()
        };
        put_previous(&mut out, 40, Some((&metadata, b"\x4a\x06value1")));
        let mut expected = vec![
            0xa1, 0x07, 0x02, 0x03, 0x00, 0x03, 0, 0, 0, 0, 0, 0, 0, 1, 0x08, 0x4a, 0x06,
        ];
        expected.extend_from_slice(b"value1");
        assert_eq!(&out[..], &expected[..]);
        let mut out = BytesMut::new();
        put_previous(&mut out, 40, None);
        assert_eq!(
            &out[..],
            &[0x03, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00]
        );
        let mut out = BytesMut::new();
        put_previous(&mut out, 30, None);
        assert_eq!(&out[..], &[0x00]);
    }

    // Proves the traced getWithMetadata block: both lifetimes finite, version 3.
    #[test]
    fn traced_metadata() {
        let metadata = Metadata {
            lifespan: Some((0x0000_01a2_0131_2da3, 10)),
            max_idle: Some((0x0000_01a2_0131_2e0d, 300)),
            version: 3,
        };
        let mut out = BytesMut::new();
        put_metadata(&mut out, &metadata);
        let expected = [
            0x00, 0, 0, 0x01, 0xa2, 0x01, 0x31, 0x2d, 0xa3, 0x0a, 0, 0, 0x01, 0xa2, 0x01, 0x31,
            0x2e, 0x0d, 0xac, 0x02, 0, 0, 0, 0, 0, 0, 0, 3,
        ];
        assert_eq!(&out[..], &expected[..]);
    }

    // Proves the traced hash-aware topology layout (two servers, eight segments).
    #[test]
    fn traced_topology() {
        let topology = Topology {
            id: -1_124_633_760,
            servers: vec![("127.0.0.1".into(), 11323), ("127.0.0.1".into(), 11322)],
            segment_owners: Some(vec![
                vec![1, 0],
                vec![0, 1],
                vec![0, 1],
                vec![0, 1],
                vec![0, 1],
                vec![1, 0],
                vec![1, 0],
                vec![1, 0],
            ]),
        };
        let mut out = BytesMut::new();
        write_header(&mut out, 3, 0x18, Status::Success, Some((&topology, 3)));
        let mut expected = vec![
            0xa1, 0x03, 0x18, 0x00, 0x01, 0xe0, 0xe6, 0xdd, 0xe7, 0x0b, 0x02,
        ];
        for port in [0x2c3b_u16, 0x2c3a] {
            expected.push(9);
            expected.extend_from_slice(b"127.0.0.1");
            expected.extend_from_slice(&port.to_be_bytes());
        }
        expected.extend_from_slice(&[0x03, 0x08]);
        for owners in [
            [1, 0],
            [0, 1],
            [0, 1],
            [0, 1],
            [0, 1],
            [1, 0],
            [1, 0],
            [1, 0],
        ] {
            expected.push(2);
            expected.extend_from_slice(&owners);
        }
        assert_eq!(&out[..], &expected[..]);
        let mut out = BytesMut::new();
        write_header(&mut out, 3, 0x18, Status::Success, Some((&topology, 1)));
        assert_eq!(&out[..], &[0xa1, 0x03, 0x18, 0x00, 0x00]);
    }

    // Proves the error and event layouts.
    #[test]
    fn errors_and_events() {
        let mut out = BytesMut::new();
        write_error(
            &mut out,
            0x19,
            Status::RequestParsingError,
            "CacheNotFoundException",
        );
        assert_eq!(&out[..5], &[0xa1, 0x19, 0x50, 0x84, 0x00]);
        assert_eq!(out[5] as usize, "CacheNotFoundException".len());
        let mut out = BytesMut::new();
        write_event(&mut out, 0, EventKind::Modified, &[7; 16], b"k", 5, false);
        let mut expected = vec![0xa1, 0x00, 0x61, 0x00, 0x00, 0x10];
        expected.extend_from_slice(&[7; 16]);
        expected.extend_from_slice(&[0x00, 0x00, 0x01, b'k', 0, 0, 0, 0, 0, 0, 0, 5]);
        assert_eq!(&out[..], &expected[..]);
        let mut out = BytesMut::new();
        write_event(&mut out, 0, EventKind::Removed, &[1], b"k", 5, true);
        assert_eq!(
            &out[..],
            &[
                0xa1, 0x00, 0x62, 0x00, 0x00, 0x01, 0x01, 0x00, 0x01, 0x01, b'k'
            ]
        );
    }

    // Proves the reader reads back what the writers write: headers with both topology
    // layouts, metadata with and without lifetimes, error messages; and that a cut response
    // is incomplete rather than wrong.
    #[test]
    fn reader_reads_what_writers_write() {
        let topology = Topology {
            id: 7,
            servers: vec![("127.0.0.1".into(), 11222)],
            segment_owners: Some(vec![vec![0]; 4]),
        };
        for intelligence in [1, 2, 3] {
            let mut out = BytesMut::new();
            write_header(
                &mut out,
                300,
                0x18,
                Status::Success,
                Some((&topology, intelligence)),
            );
            let metadata = Metadata {
                lifespan: Some((1_700_000_000_000, 10)),
                max_idle: None,
                version: 9,
            };
            put_metadata(&mut out, &metadata);
            put_metadata(&mut out, &Metadata::default());
            let mut reader = ResponseReader::new(&out);
            let header = reader.header(intelligence).expect("valid");
            let expected = match intelligence {
                1 => None,
                2 => Some(Topology {
                    segment_owners: None,
                    ..topology.clone()
                }),
                _ => Some(topology.clone()),
            };
            assert_eq!(
                header,
                ResponseHeader {
                    message_id: 300,
                    opcode: 0x18,
                    status: Status::Success,
                    topology: expected,
                }
            );
            assert_eq!(reader.metadata(), Ok(metadata));
            assert_eq!(reader.metadata(), Ok(Metadata::default()));
            assert_eq!(reader.position(), out.len());
            for cut in 0..out.len() {
                let mut reader = ResponseReader::new(&out[..cut]);
                let result = reader
                    .header(intelligence)
                    .and_then(|_| reader.metadata())
                    .and_then(|_| reader.metadata());
                assert!(
                    matches!(result, Err(ResponseError::Incomplete(n)) if n > cut),
                    "cut at {cut}: {result:?}"
                );
            }
        }
        let mut out = BytesMut::new();
        write_error(&mut out, 5, Status::UnknownCommand, "no such op");
        let mut reader = ResponseReader::new(&out);
        let header = reader.header(3).expect("valid");
        assert_eq!(
            (header.opcode, header.status),
            (opcode::ERROR, Status::UnknownCommand)
        );
        assert_eq!(reader.string().as_deref(), Ok("no such op"));
        assert!(matches!(
            ResponseReader::new(&[0xa0, 0x00]).header(1),
            Err(ResponseError::Invalid(_))
        ));
        assert!(matches!(
            ResponseReader::new(&[0xa1, 0x00, 0x04, 0x77, 0x00]).header(1),
            Err(ResponseError::Invalid(_))
        ));
    }
}
