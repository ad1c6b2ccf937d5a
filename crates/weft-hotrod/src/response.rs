//! Response frames: the header (with an optional topology update), error responses, the
//! metadata block, previous values, the PING body and events.

use bytes::{BufMut, BytesMut};

use crate::media::MediaType;
use crate::opcode;
use crate::status::Status;
use crate::wire::{put_array, put_string, put_vint, put_vlong};

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
}
