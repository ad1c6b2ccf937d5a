//! Writing request frames, the client's side of the [`Decoder`](super::Decoder): whatever
//! [`encode`] writes, the decoder reads back as the same header and request, up to the
//! normalisations the protocol itself imposes (documented on [`encode`]).

use std::time::Duration;

use bytes::{BufMut, BytesMut};

use super::{Expiration, Factory, Lifetime, REQUEST_MAGIC, Request, VERSION_MIN, flags};
use crate::media::MediaType;
use crate::opcode;
use crate::wire::{put_signed_vint, put_vint, put_vlong};

/// Longest byte array, string or collection a request may carry: Java's largest array,
/// which is what servers and clients index lengths with.
const LENGTH_MAX: usize = i32::MAX as usize;
/// Most parameters of one filter or converter factory (their count is one byte).
const FACTORY_PARAMS_MAX: usize = u8::MAX as usize;

/// The header of a request to encode: the owned form of [`Header`](super::Header), minus
/// the opcode, which the request decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHeader {
    /// Chosen by the client; the response carries it back.
    pub message_id: u64,
    /// Protocol version (`major * 10 + minor`), 20 or more.
    pub version: u8,
    /// Cache name (empty = the server's default cache).
    pub cache_name: String,
    /// Flags (see [`flags`]).
    pub flags: u32,
    /// 1 basic, 2 topology-aware, 3 hash-distribution-aware.
    pub intelligence: u8,
    /// The client's topology id (−1 when it has none).
    pub topology_id: i32,
    /// Media type of the keys the request carries (sent from 2.8).
    pub key_type: MediaType,
    /// Media type of the values the request carries (sent from 2.8).
    pub value_type: MediaType,
}

impl RequestHeader {
    /// A header for `cache_name` at `version`: no flags, basic intelligence (so responses
    /// carry no topology), no topology id (−1), no media types.
    #[must_use]
    pub fn new(version: u8, message_id: u64, cache_name: impl Into<String>) -> Self {
        Self {
            message_id,
            version,
            cache_name: cache_name.into(),
            flags: 0,
            intelligence: 1,
            topology_id: -1,
            key_type: MediaType::Unspecified,
            value_type: MediaType::Unspecified,
        }
    }
}

/// A request that cannot be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The version is older than 2.0, whose header has another layout.
    #[error("protocol version {0} cannot be encoded; the oldest supported is 20 (2.0)")]
    Version(u8),
    /// The operation does not exist in the header's version.
    #[error("operation 0x{opcode:02x} does not exist in protocol version {version}")]
    Operation {
        /// The request opcode.
        opcode: u8,
        /// The header's version.
        version: u8,
    },
    /// A byte array, string or collection is longer than the protocol can carry.
    #[error("{what} of {len} is longer than the protocol allows ({max})")]
    TooLong {
        /// What was too long.
        what: &'static str,
        /// Its length (bytes or elements).
        len: usize,
        /// The most allowed.
        max: usize,
    },
}

/// Appends `request` with `header` to `out`: one frame, as a client sends it.
///
/// The frame is written in the layout of `header.version` (versions above 4.1 in the 4.1
/// layout, as the decoder reads them), so what a version lacks is not sent and decodes as
/// its default: media types before 2.8, `raw_data` before 2.1, `interests` before 2.6,
/// iteration filter parameters before 2.4 and `metadata` before 2.5. A listener filter or
/// converter with an empty name is "none".
///
/// Lifetimes are written in the largest time unit that holds them exactly (one hour goes out
/// as `1` in hours), except that:
/// * a zero duration is sent as the cache default, which is what every server reads zero as;
/// * before 2.2, lifetimes are whole seconds (truncated, at most `i32::MAX`), and a lifetime
///   that is the default (or truncates to zero) sets the header's `DEFAULT_LIFESPAN` /
///   `DEFAULT_MAXIDLE` flag, without which those versions read zero as "never";
/// * [`Lifetime::Until`] is sent as its Unix time: servers read durations over 30 days as
///   Unix times before 3.0, and as durations from 3.0 (where `Until` has no encoding).
///   Before 3.0, [`Lifetime::After`] over 30 days is read as a Unix time too.
///
/// # Errors
/// If the version is older than 2.0, the operation does not exist in it (get-stream from
/// 4.1), or a length is past what the protocol carries. Nothing is appended then.
pub fn encode<B: AsRef<[u8]>>(
    out: &mut BytesMut,
    header: &RequestHeader,
    request: &Request<B>,
) -> Result<(), EncodeError> {
    let start = out.len();
    let result = write_frame(out, header, request);
    if result.is_err() {
        out.truncate(start);
    }
    result
}

fn write_frame<B: AsRef<[u8]>>(
    out: &mut BytesMut,
    header: &RequestHeader,
    request: &Request<B>,
) -> Result<(), EncodeError> {
    let version = header.version;
    if version < VERSION_MIN {
        return Err(EncodeError::Version(version));
    }
    let opcode = request.opcode();
    if opcode == opcode::GET_STREAM && version >= 41 {
        return Err(EncodeError::Operation { opcode, version });
    }
    out.put_u8(REQUEST_MAGIC);
    put_vlong(out, header.message_id);
    out.put_u8(version);
    out.put_u8(opcode);
    string(out, "cache name", &header.cache_name)?;
    put_vint(out, header.flags | default_flags(request, version));
    out.put_u8(header.intelligence);
    put_vint(out, header.topology_id as u32);
    if version >= 28 {
        media_type(out, &header.key_type)?;
        media_type(out, &header.value_type)?;
    }
    if version >= 40 {
        // No other parameters (tracing context).
        put_vint(out, 0);
    }
    write_body(out, request, version)
}

fn write_body<B: AsRef<[u8]>>(
    out: &mut BytesMut,
    request: &Request<B>,
    version: u8,
) -> Result<(), EncodeError> {
    match request {
        Request::Ping | Request::Clear | Request::Size | Request::Stats | Request::AuthMechList => {
        }
        Request::Get { key }
        | Request::GetWithVersion { key }
        | Request::GetWithMetadata { key }
        | Request::ContainsKey { key }
        | Request::Remove { key } => array(out, "key", key)?,
        Request::Put {
            key,
            expiration,
            value,
        }
        | Request::PutIfAbsent {
            key,
            expiration,
            value,
        }
        | Request::Replace {
            key,
            expiration,
            value,
        } => {
            array(out, "key", key)?;
            put_expiration(out, *expiration, version);
            array(out, "value", value)?;
        }
        Request::ReplaceIfUnmodified {
            key,
            expiration,
            version: entry_version,
            value,
        } => {
            array(out, "key", key)?;
            put_expiration(out, *expiration, version);
            out.put_u64(*entry_version);
            array(out, "value", value)?;
        }
        Request::RemoveIfUnmodified {
            key,
            version: entry_version,
        } => {
            array(out, "key", key)?;
            out.put_u64(*entry_version);
        }
        Request::PutAll {
            expiration,
            entries,
        } => {
            put_expiration(out, *expiration, version);
            count(out, "put-all entries", entries.len(), LENGTH_MAX)?;
            for (key, value) in entries {
                array(out, "key", key)?;
                array(out, "value", value)?;
            }
        }
        Request::GetAll { keys } => {
            count(out, "get-all keys", keys.len(), LENGTH_MAX)?;
            for key in keys {
                array(out, "key", key)?;
            }
        }
        Request::BulkGet { count } => put_vint(out, *count),
        Request::BulkGetKeys { scope } => put_vint(out, *scope),
        Request::IterationStart {
            segments,
            filter,
            batch_size,
            metadata,
        } => {
            match segments {
                Some(bits) => optional_length(out, "segment bit set", bits.as_ref().len())
                    .map(|()| out.put_slice(bits.as_ref()))?,
                None => put_signed_vint(out, -1),
            }
            match filter {
                Some(factory) => {
                    optional_length(out, "filter factory name", factory.name.len())?;
                    out.put_slice(factory.name.as_bytes());
                    if version >= 24 {
                        factory_params(out, factory)?;
                    }
                }
                None => put_signed_vint(out, -1),
            }
            put_vint(out, *batch_size);
            if version >= 25 {
                out.put_u8(u8::from(*metadata));
            }
        }
        Request::IterationNext { id } | Request::IterationEnd { id } => {
            string(out, "iteration id", id)?;
        }
        Request::AddClientListener {
            listener_id,
            include_current_state,
            filter,
            converter,
            raw_data,
            interests,
        } => {
            array(out, "listener id", listener_id)?;
            out.put_u8(u8::from(*include_current_state));
            named_factory(out, filter.as_ref())?;
            named_factory(out, converter.as_ref())?;
            if version >= 21 {
                out.put_u8(u8::from(*raw_data));
            }
            if version >= 26 {
                put_vint(out, *interests);
            }
        }
        Request::RemoveClientListener { listener_id } => {
            array(out, "listener id", listener_id)?;
        }
        Request::AddBloomFilterListener {
            listener_id,
            bloom_bits,
        } => {
            array(out, "listener id", listener_id)?;
            put_vint(out, *bloom_bits);
        }
        Request::UpdateBloomFilter { bits } => array(out, "bloom filter", bits)?,
        Request::Exec { task, params } => {
            string(out, "task name", task)?;
            count(out, "task parameters", params.len(), LENGTH_MAX)?;
            for (name, value) in params {
                string(out, "task parameter name", name)?;
                array(out, "task parameter", value)?;
            }
        }
        Request::Query { query } => array(out, "query", query)?,
        Request::Auth {
            mechanism,
            response,
        } => {
            string(out, "SASL mechanism", mechanism)?;
            array(out, "SASL response", response)?;
        }
        Request::GetStream { key, offset } => {
            array(out, "key", key)?;
            put_vint(out, *offset);
        }
    }
    Ok(())
}

/// Before 2.2 a zero lifetime means "the default" only with these header flags.
fn default_flags<B>(request: &Request<B>, version: u8) -> u32 {
    if version >= 22 {
        return 0;
    }
    let expiration = match request {
        Request::Put { expiration, .. }
        | Request::PutIfAbsent { expiration, .. }
        | Request::Replace { expiration, .. }
        | Request::ReplaceIfUnmodified { expiration, .. }
        | Request::PutAll { expiration, .. } => expiration,
        _ => return 0,
    };
    let mut defaults = 0;
    if seconds_before_2_2(expiration.lifespan) == 0 {
        defaults |= flags::DEFAULT_LIFESPAN;
    }
    if seconds_before_2_2(expiration.max_idle) == 0 {
        defaults |= flags::DEFAULT_MAXIDLE;
    }
    defaults
}

/// A lifetime as protocols before 2.2 carry it: seconds, 0 = default, −1 = never.
fn seconds_before_2_2(lifetime: Lifetime) -> i32 {
    match lifetime {
        Lifetime::Default => 0,
        Lifetime::Infinite => -1,
        Lifetime::After(duration) | Lifetime::Until(duration) => {
            i32::try_from(duration.as_secs()).unwrap_or(i32::MAX)
        }
    }
}

fn put_expiration(out: &mut BytesMut, expiration: Expiration, version: u8) {
    if version < 22 {
        put_vint(out, seconds_before_2_2(expiration.lifespan) as u32);
        put_vint(out, seconds_before_2_2(expiration.max_idle) as u32);
        return;
    }
    let (lifespan_unit, lifespan) = unit_and_value(expiration.lifespan);
    let (max_idle_unit, max_idle) = unit_and_value(expiration.max_idle);
    out.put_u8(lifespan_unit << 4 | max_idle_unit);
    for value in [lifespan, max_idle].into_iter().flatten() {
        put_vlong(out, value);
    }
}

/// Time units by wire code, largest first, with their length in nanoseconds.
const UNITS: [(u8, u128); 7] = [
    (6, 86_400_000_000_000),
    (5, 3_600_000_000_000),
    (4, 60_000_000_000),
    (0, 1_000_000_000),
    (1, 1_000_000),
    (3, 1_000),
    (2, 1),
];
const UNIT_DEFAULT: u8 = 7;
const UNIT_INFINITE: u8 = 8;

/// The unit code and value of a lifetime (2.2+): the largest unit that holds it exactly,
/// else the smallest whose value fits (servers read values as signed 64-bit).
fn unit_and_value(lifetime: Lifetime) -> (u8, Option<u64>) {
    let duration = match lifetime {
        Lifetime::Default => return (UNIT_DEFAULT, None),
        Lifetime::Infinite => return (UNIT_INFINITE, None),
        Lifetime::After(duration) | Lifetime::Until(duration) => duration,
    };
    if duration == Duration::ZERO {
        return (UNIT_DEFAULT, None);
    }
    let nanos = duration.as_nanos();
    let fits = |value: u128| value <= i64::MAX as u128;
    let exact = UNITS
        .iter()
        .find(|&&(_, per)| nanos % per == 0 && fits(nanos / per));
    let (unit, per) = exact
        .or_else(|| UNITS.iter().rev().find(|&&(_, per)| fits(nanos / per)))
        .copied()
        // Days always fit: u64::MAX seconds is about 2^47 days.
        .unwrap_or(UNITS[0]);
    (unit, Some((nanos / per) as u64))
}

fn check_length(what: &'static str, len: usize, max: usize) -> Result<(), EncodeError> {
    if len > max {
        return Err(EncodeError::TooLong { what, len, max });
    }
    Ok(())
}

fn count(out: &mut BytesMut, what: &'static str, n: usize, max: usize) -> Result<(), EncodeError> {
    check_length(what, n, max)?;
    put_vint(out, n as u32);
    Ok(())
}

fn array(
    out: &mut BytesMut,
    what: &'static str,
    bytes: impl AsRef<[u8]>,
) -> Result<(), EncodeError> {
    let bytes = bytes.as_ref();
    count(out, what, bytes.len(), LENGTH_MAX)?;
    out.put_slice(bytes);
    Ok(())
}

fn string(out: &mut BytesMut, what: &'static str, text: &str) -> Result<(), EncodeError> {
    array(out, what, text.as_bytes())
}

/// The signed length of an optional array or string (−1 is "absent").
fn optional_length(out: &mut BytesMut, what: &'static str, len: usize) -> Result<(), EncodeError> {
    check_length(what, len, LENGTH_MAX)?;
    put_signed_vint(out, len as i32);
    Ok(())
}

fn factory_params<B: AsRef<[u8]>>(
    out: &mut BytesMut,
    factory: &Factory<B>,
) -> Result<(), EncodeError> {
    check_length(
        "factory parameters",
        factory.params.len(),
        FACTORY_PARAMS_MAX,
    )?;
    out.put_u8(factory.params.len() as u8);
    for param in &factory.params {
        array(out, "factory parameter", param)?;
    }
    Ok(())
}

/// A listener's filter or converter: its name (empty = none), then its parameters.
fn named_factory<B: AsRef<[u8]>>(
    out: &mut BytesMut,
    factory: Option<&Factory<B>>,
) -> Result<(), EncodeError> {
    match factory {
        Some(factory) if !factory.name.is_empty() => {
            string(out, "factory name", &factory.name)?;
            factory_params(out, factory)
        }
        _ => string(out, "factory name", ""),
    }
}

fn media_type(out: &mut BytesMut, media_type: &MediaType) -> Result<(), EncodeError> {
    if let MediaType::Custom { name, .. } = media_type {
        check_length("media type name", name.len(), LENGTH_MAX)?;
    }
    for (name, value) in media_type.params() {
        check_length(
            "media type parameter",
            name.len().max(value.len()),
            LENGTH_MAX,
        )?;
    }
    check_length(
        "media type parameters",
        media_type.params().len(),
        LENGTH_MAX,
    )?;
    media_type.write(out);
    Ok(())
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::request::Decoder;

    fn encoded(header: &RequestHeader, request: &Request<&[u8]>) -> Vec<u8> {
        let mut out = BytesMut::new();
        encode(&mut out, header, request).expect("encodable");
        out.to_vec()
    }

    // Proves the encoder writes the traced handshake PING and the 4.0 PING byte for byte.
    #[test]
    fn traced_pings() {
        let header = RequestHeader {
            intelligence: 3,
            ..RequestHeader::new(31, 2, "")
        };
        assert_eq!(
            encoded(&header, &Request::Ping),
            [
                0xa0, 0x02, 0x1f, 0x17, 0x00, 0x00, 0x03, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x00, 0x00
            ]
        );
        let header = RequestHeader {
            intelligence: 3,
            ..RequestHeader::new(40, 3, "x")
        };
        assert_eq!(
            encoded(&header, &Request::Ping),
            [
                0xa0, 0x03, 0x28, 0x17, 0x01, b'x', 0x00, 0x03, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x00,
                0x00, 0x00
            ]
        );
    }

    // Proves the traced expirations: default/default is `77`; 10 s and 5 min is `04 0a 05`;
    // an hour goes out in hours and 1.5 s in milliseconds.
    #[test]
    fn expiration_units() {
        let mut out = BytesMut::new();
        put_expiration(&mut out, Expiration::DEFAULT, 40);
        assert_eq!(&out[..], &[0x77]);
        let mut out = BytesMut::new();
        let expiration = Expiration {
            lifespan: Lifetime::After(Duration::from_secs(10)),
            max_idle: Lifetime::After(Duration::from_secs(300)),
        };
        put_expiration(&mut out, expiration, 40);
        assert_eq!(&out[..], &[0x04, 0x0a, 0x05]);
        let mut out = BytesMut::new();
        let expiration = Expiration {
            lifespan: Lifetime::After(Duration::from_secs(3600)),
            max_idle: Lifetime::After(Duration::from_millis(1500)),
        };
        put_expiration(&mut out, expiration, 40);
        assert_eq!(&out[..], &[0x51, 0x01, 0xdc, 0x0b]);
        // Too long for nanoseconds, and not whole seconds: the smallest unit that fits.
        assert_eq!(
            unit_and_value(Lifetime::After(Duration::MAX)),
            (4, Some(u64::MAX / 60))
        );
    }

    // Proves a pre-2.2 write with default lifetimes sets the flags that make 0 mean default.
    #[test]
    fn default_flags_before_2_2() {
        let header = RequestHeader::new(21, 1, "");
        let request: Request<&[u8]> = Request::Put {
            key: b"k",
            expiration: Expiration {
                lifespan: Lifetime::Default,
                max_idle: Lifetime::Infinite,
            },
            value: b"v",
        };
        let mut buf = BytesMut::from(&encoded(&header, &request)[..]);
        let frame = Decoder::default()
            .decode(&mut buf)
            .expect("valid")
            .expect("complete");
        assert_eq!(frame.header.flags, flags::DEFAULT_LIFESPAN);
        assert_eq!(
            frame.owned_request(),
            Request::Put {
                key: Bytes::from_static(b"k"),
                expiration: Expiration {
                    lifespan: Lifetime::Default,
                    max_idle: Lifetime::Infinite,
                },
                value: Bytes::from_static(b"v"),
            }
        );
    }

    // Proves what cannot be written is refused and leaves the buffer as it was.
    #[test]
    fn refusals() {
        let mut out = BytesMut::from(&b"before"[..]);
        let request: Request<&[u8]> = Request::GetStream {
            key: b"k",
            offset: 0,
        };
        assert_eq!(
            encode(&mut out, &RequestHeader::new(41, 1, "c"), &request),
            Err(EncodeError::Operation {
                opcode: opcode::GET_STREAM,
                version: 41
            })
        );
        assert_eq!(
            encode(
                &mut out,
                &RequestHeader::new(13, 1, "c"),
                &Request::<&[u8]>::Ping
            ),
            Err(EncodeError::Version(13))
        );
        let params = vec![&b""[..]; 256];
        let request: Request<&[u8]> = Request::AddClientListener {
            listener_id: b"id",
            include_current_state: false,
            filter: Some(Factory {
                name: "f".into(),
                params,
            }),
            converter: None,
            raw_data: false,
            interests: 0,
        };
        assert!(matches!(
            encode(&mut out, &RequestHeader::new(40, 1, "c"), &request),
            Err(EncodeError::TooLong { max: 255, .. })
        ));
        assert_eq!(&out[..], b"before");
    }
}
