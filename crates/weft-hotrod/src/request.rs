//! Request frames: the header every request carries and the operation bodies this codec
//! understands, decoded from a buffer that may hold part of a frame, one frame or many.

use std::time::Duration;

use bytes::{Bytes, BytesMut};

use crate::media::MediaType;
use crate::opcode;
use crate::status::Status;
use crate::wire::{ReadError, ReadResult, Reader, Span};

mod encoder;

pub use encoder::{EncodeError, RequestHeader, encode};

/// The magic byte that starts every request.
pub const REQUEST_MAGIC: u8 = 0xA0;
/// Oldest protocol version served (2.0). 1.x headers have another layout.
pub const VERSION_MIN: u8 = 20;
/// Newest protocol version this codec knows (4.1); higher versions parse as 4.1.
pub const VERSION_MAX: u8 = 41;

/// Request header flags.
pub mod flags {
    /// Return the previous value of a write.
    pub const FORCE_RETURN_VALUE: u32 = 0x01;
    /// Use the cache's default lifespan (protocols before 2.2).
    pub const DEFAULT_LIFESPAN: u32 = 0x02;
    /// Use the cache's default max idle (protocols before 2.2).
    pub const DEFAULT_MAXIDLE: u32 = 0x04;
    /// Do not load from a store.
    pub const SKIP_CACHE_LOAD: u32 = 0x08;
    /// Do not index.
    pub const SKIP_INDEXING: u32 = 0x10;
    /// Raise no listener events.
    pub const SKIP_LISTENER_NOTIFICATION: u32 = 0x20;
}

/// Limits on what one request may declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest key or value (byte array).
    pub array_bytes_max: usize,
    /// Longest string (cache names, task names, ids, parameter names).
    pub string_bytes_max: usize,
    /// Most elements in one collection (put-all entries, get-all keys, task parameters).
    pub count_max: usize,
    /// Longest whole frame.
    pub frame_bytes_max: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            array_bytes_max: 512 << 20,
            string_bytes_max: 64 << 10,
            count_max: 1 << 20,
            frame_bytes_max: 1 << 30,
        }
    }
}

/// The header of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Chosen by the client; echoed in the response.
    pub message_id: u64,
    /// Protocol version (`major * 10 + minor`), as sent.
    pub version: u8,
    /// Operation code.
    pub opcode: u8,
    /// Cache name (empty = the server's default cache).
    pub cache_name: Span,
    /// Flags (see [`flags`]).
    pub flags: u32,
    /// 1 basic, 2 topology-aware, 3 hash-distribution-aware.
    pub intelligence: u8,
    /// The client's topology id (−1 when it has none).
    pub topology_id: i32,
    /// Media type of the keys the request carries (2.8+).
    pub key_type: MediaType,
    /// Media type of the values the request carries (2.8+).
    pub value_type: MediaType,
}

impl Header {
    /// The version this server answers in: the request's, capped at [`VERSION_MAX`].
    #[must_use]
    pub fn effective_version(&self) -> u8 {
        self.version.min(VERSION_MAX)
    }

    /// True when `flag` is set.
    #[must_use]
    pub fn has_flag(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }
}

/// One lifetime of an expiration parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifetime {
    /// The cache's configured default.
    Default,
    /// Never.
    Infinite,
    /// This long from now.
    After(Duration),
    /// Until this Unix time (pre-3.0 clients sent values over 30 days as absolute times).
    Until(Duration),
}

/// The expiration a write asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expiration {
    /// Lifespan.
    pub lifespan: Lifetime,
    /// Max idle.
    pub max_idle: Lifetime,
}

impl Expiration {
    /// Both lifetimes default.
    pub const DEFAULT: Self = Self {
        lifespan: Lifetime::Default,
        max_idle: Lifetime::Default,
    };
}

/// A named factory with its parameters (listener filters and converters, iteration filters).
/// `B` is the byte type of the parameters, as in [`Request`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Factory<B = Span> {
    /// Factory name as registered on the server.
    pub name: String,
    /// Parameters, marshalled by the client.
    pub params: Vec<B>,
}

/// An operation. `B` is how its byte arrays (keys, values, ids) are held: the [`Decoder`]
/// produces `Request<Span>`, spans of [`Frame::data`]; [`encode`] writes a request holding
/// any byte type (`Request<Bytes>`, `Request<&[u8]>`, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Request<B = Span> {
    /// Liveness and version negotiation.
    Ping,
    /// Value of a key.
    Get { key: B },
    /// Value and version of a key.
    GetWithVersion { key: B },
    /// Value and metadata of a key.
    GetWithMetadata { key: B },
    /// Whether a key is present.
    ContainsKey { key: B },
    /// Store a value.
    Put {
        key: B,
        expiration: Expiration,
        value: B,
    },
    /// Store unless present.
    PutIfAbsent {
        key: B,
        expiration: Expiration,
        value: B,
    },
    /// Store only if present.
    Replace {
        key: B,
        expiration: Expiration,
        value: B,
    },
    /// Store only if the entry has this version.
    ReplaceIfUnmodified {
        key: B,
        expiration: Expiration,
        version: u64,
        value: B,
    },
    /// Remove a key.
    Remove { key: B },
    /// Remove only if the entry has this version.
    RemoveIfUnmodified { key: B, version: u64 },
    /// Remove every entry.
    Clear,
    /// Count entries.
    Size,
    /// Server statistics.
    Stats,
    /// Store many entries.
    PutAll {
        expiration: Expiration,
        entries: Vec<(B, B)>,
    },
    /// Values of many keys.
    GetAll { keys: Vec<B> },
    /// Up to `count` entries (0 = all).
    BulkGet { count: u32 },
    /// Every key (`scope` is ignored by a single node).
    BulkGetKeys { scope: u32 },
    /// Start iterating.
    IterationStart {
        /// `java.util.BitSet` bytes of the segments wanted; `None` = all.
        segments: Option<B>,
        /// Filter/converter factory.
        filter: Option<Factory<B>>,
        /// Entries per batch.
        batch_size: u32,
        /// Send metadata with each entry (2.5+).
        metadata: bool,
    },
    /// Next batch of an iteration.
    IterationNext { id: String },
    /// End an iteration.
    IterationEnd { id: String },
    /// Register a client listener on this connection.
    AddClientListener {
        listener_id: B,
        include_current_state: bool,
        filter: Option<Factory<B>>,
        converter: Option<Factory<B>>,
        raw_data: bool,
        /// Event kinds (bit 1 created, 2 modified, 4 removed, 8 expired); 0 = all (before 2.6).
        interests: u32,
    },
    /// Unregister a client listener.
    RemoveClientListener { listener_id: B },
    /// Register a near-cache listener whose events a bloom filter narrows (3.1+).
    AddBloomFilterListener { listener_id: B, bloom_bits: u32 },
    /// Replace a near cache's bloom filter.
    UpdateBloomFilter { bits: B },
    /// Run a server task (admin operations are tasks named `@@context@operation`).
    Exec {
        task: String,
        params: Vec<(String, B)>,
    },
    /// A query (not served; parsed to answer it with an error).
    Query { query: B },
    /// SASL mechanisms.
    AuthMechList,
    /// A SASL step.
    Auth { mechanism: String, response: B },
    /// Read a value from an offset (2.6 to 4.0).
    GetStream { key: B, offset: u32 },
}

impl<B> Factory<B> {
    /// The same factory with each parameter converted by `f`.
    pub fn map<C>(&self, f: impl FnMut(&B) -> C) -> Factory<C> {
        Factory {
            name: self.name.clone(),
            params: self.params.iter().map(f).collect(),
        }
    }
}

impl<B> Request<B> {
    /// The request opcode of this operation.
    #[must_use]
    pub fn opcode(&self) -> u8 {
        match self {
            Self::Ping => opcode::PING,
            Self::Get { .. } => opcode::GET,
            Self::GetWithVersion { .. } => opcode::GET_WITH_VERSION,
            Self::GetWithMetadata { .. } => opcode::GET_WITH_METADATA,
            Self::ContainsKey { .. } => opcode::CONTAINS_KEY,
            Self::Put { .. } => opcode::PUT,
            Self::PutIfAbsent { .. } => opcode::PUT_IF_ABSENT,
            Self::Replace { .. } => opcode::REPLACE,
            Self::ReplaceIfUnmodified { .. } => opcode::REPLACE_IF_UNMODIFIED,
            Self::Remove { .. } => opcode::REMOVE,
            Self::RemoveIfUnmodified { .. } => opcode::REMOVE_IF_UNMODIFIED,
            Self::Clear => opcode::CLEAR,
            Self::Size => opcode::SIZE,
            Self::Stats => opcode::STATS,
            Self::PutAll { .. } => opcode::PUT_ALL,
            Self::GetAll { .. } => opcode::GET_ALL,
            Self::BulkGet { .. } => opcode::BULK_GET,
            Self::BulkGetKeys { .. } => opcode::BULK_GET_KEYS,
            Self::IterationStart { .. } => opcode::ITERATION_START,
            Self::IterationNext { .. } => opcode::ITERATION_NEXT,
            Self::IterationEnd { .. } => opcode::ITERATION_END,
            Self::AddClientListener { .. } => opcode::ADD_CLIENT_LISTENER,
            Self::RemoveClientListener { .. } => opcode::REMOVE_CLIENT_LISTENER,
            Self::AddBloomFilterListener { .. } => opcode::ADD_BLOOM_FILTER_LISTENER,
            Self::UpdateBloomFilter { .. } => opcode::UPDATE_BLOOM_FILTER,
            Self::Exec { .. } => opcode::EXEC,
            Self::Query { .. } => opcode::QUERY,
            Self::AuthMechList => opcode::AUTH_MECH_LIST,
            Self::Auth { .. } => opcode::AUTH,
            Self::GetStream { .. } => opcode::GET_STREAM,
        }
    }

    /// The same operation with every byte array converted by `f` (for example from the
    /// decoder's spans to owned [`Bytes`], see [`Frame::owned_request`]).
    pub fn map<C>(&self, mut f: impl FnMut(&B) -> C) -> Request<C> {
        match self {
            Self::Ping => Request::Ping,
            Self::Get { key } => Request::Get { key: f(key) },
            Self::GetWithVersion { key } => Request::GetWithVersion { key: f(key) },
            Self::GetWithMetadata { key } => Request::GetWithMetadata { key: f(key) },
            Self::ContainsKey { key } => Request::ContainsKey { key: f(key) },
            Self::Put {
                key,
                expiration,
                value,
            } => Request::Put {
                key: f(key),
                expiration: *expiration,
                value: f(value),
            },
            Self::PutIfAbsent {
                key,
                expiration,
                value,
            } => Request::PutIfAbsent {
                key: f(key),
                expiration: *expiration,
                value: f(value),
            },
            Self::Replace {
                key,
                expiration,
                value,
            } => Request::Replace {
                key: f(key),
                expiration: *expiration,
                value: f(value),
            },
            Self::ReplaceIfUnmodified {
                key,
                expiration,
                version,
                value,
            } => Request::ReplaceIfUnmodified {
                key: f(key),
                expiration: *expiration,
                version: *version,
                value: f(value),
            },
            Self::Remove { key } => Request::Remove { key: f(key) },
            Self::RemoveIfUnmodified { key, version } => Request::RemoveIfUnmodified {
                key: f(key),
                version: *version,
            },
            Self::Clear => Request::Clear,
            Self::Size => Request::Size,
            Self::Stats => Request::Stats,
            Self::PutAll {
                expiration,
                entries,
            } => Request::PutAll {
                expiration: *expiration,
                entries: entries.iter().map(|(k, v)| (f(k), f(v))).collect(),
            },
            Self::GetAll { keys } => Request::GetAll {
                keys: keys.iter().map(&mut f).collect(),
            },
            Self::BulkGet { count } => Request::BulkGet { count: *count },
            Self::BulkGetKeys { scope } => Request::BulkGetKeys { scope: *scope },
            Self::IterationStart {
                segments,
                filter,
                batch_size,
                metadata,
            } => Request::IterationStart {
                segments: segments.as_ref().map(&mut f),
                filter: filter.as_ref().map(|factory| factory.map(&mut f)),
                batch_size: *batch_size,
                metadata: *metadata,
            },
            Self::IterationNext { id } => Request::IterationNext { id: id.clone() },
            Self::IterationEnd { id } => Request::IterationEnd { id: id.clone() },
            Self::AddClientListener {
                listener_id,
                include_current_state,
                filter,
                converter,
                raw_data,
                interests,
            } => Request::AddClientListener {
                listener_id: f(listener_id),
                include_current_state: *include_current_state,
                filter: filter.as_ref().map(|factory| factory.map(&mut f)),
                converter: converter.as_ref().map(|factory| factory.map(&mut f)),
                raw_data: *raw_data,
                interests: *interests,
            },
            Self::RemoveClientListener { listener_id } => Request::RemoveClientListener {
                listener_id: f(listener_id),
            },
            Self::AddBloomFilterListener {
                listener_id,
                bloom_bits,
            } => Request::AddBloomFilterListener {
                listener_id: f(listener_id),
                bloom_bits: *bloom_bits,
            },
            Self::UpdateBloomFilter { bits } => Request::UpdateBloomFilter { bits: f(bits) },
            Self::Exec { task, params } => Request::Exec {
                task: task.clone(),
                params: params
                    .iter()
                    .map(|(name, value)| (name.clone(), f(value)))
                    .collect(),
            },
            Self::Query { query } => Request::Query { query: f(query) },
            Self::AuthMechList => Request::AuthMechList,
            Self::Auth {
                mechanism,
                response,
            } => Request::Auth {
                mechanism: mechanism.clone(),
                response: f(response),
            },
            Self::GetStream { key, offset } => Request::GetStream {
                key: f(key),
                offset: *offset,
            },
        }
    }
}

/// A complete request frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The frame's bytes; spans index into them.
    pub data: Bytes,
    /// Header.
    pub header: Header,
    /// Operation.
    pub request: Request,
}

impl Frame {
    /// The bytes of `span`.
    #[must_use]
    pub fn slice(&self, span: Span) -> &[u8] {
        &self.data[span.range()]
    }

    /// The bytes of `span`, sharing the frame's buffer.
    #[must_use]
    pub fn bytes(&self, span: Span) -> Bytes {
        self.data.slice(span.range())
    }

    /// The cache name (UTF-8, checked when decoded).
    #[must_use]
    pub fn cache_name(&self) -> &str {
        std::str::from_utf8(self.slice(self.header.cache_name)).unwrap_or_default()
    }

    /// The request with its byte arrays as [`Bytes`] sharing the frame's buffer, detached
    /// from the frame (what [`encode`] takes).
    #[must_use]
    pub fn owned_request(&self) -> Request<Bytes> {
        self.request.map(|span| self.bytes(*span))
    }

    /// The header in the form [`encode`] takes (the opcode is the request's).
    #[must_use]
    pub fn owned_header(&self) -> RequestHeader {
        RequestHeader {
            message_id: self.header.message_id,
            version: self.header.version,
            cache_name: self.cache_name().to_owned(),
            flags: self.header.flags,
            intelligence: self.header.intelligence,
            topology_id: self.header.topology_id,
            key_type: self.header.key_type.clone(),
            value_type: self.header.value_type.clone(),
        }
    }
}

/// A frame that cannot be decoded. The stream cannot be resynchronised after one (Hot Rod
/// frames carry no length), so the connection answers with [`DecodeError::status`] and closes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct DecodeError {
    /// The request's message id, when the header got that far.
    pub message_id: u64,
    /// The status to answer with.
    pub status: Status,
    /// What was wrong.
    pub reason: String,
}

/// Decodes request frames from a byte stream.
#[derive(Debug, Clone, Default)]
pub struct Decoder {
    limits: Limits,
    /// Bytes the frame at the head of the buffer needs at least.
    need: usize,
}

impl Decoder {
    /// A decoder with these limits.
    #[must_use]
    pub fn new(limits: Limits) -> Self {
        Self { limits, need: 0 }
    }

    /// The limits in force.
    #[must_use]
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Bytes the frame at the head of the buffer is known to need (0 when unknown).
    #[must_use]
    pub fn bytes_needed(&self) -> usize {
        self.need
    }

    /// Takes the next complete frame from the front of `buf`; `Ok(None)` means more bytes are
    /// needed (the buffer is untouched).
    ///
    /// # Errors
    /// If the frame is malformed; the connection must then close.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Frame>, DecodeError> {
        if buf.is_empty() || buf.len() < self.need {
            return Ok(None);
        }
        let mut reader = Reader::new(
            buf,
            self.limits.array_bytes_max,
            self.limits.string_bytes_max,
        )
        .with_frame_max(self.limits.frame_bytes_max);
        let mut message_id = 0;
        match parse(&mut reader, &self.limits, &mut message_id) {
            Ok((header, request)) => {
                let len = reader.position();
                self.need = 0;
                let data = buf.split_to(len).freeze();
                Ok(Some(Frame {
                    data,
                    header,
                    request,
                }))
            }
            Err(Failure::Read(ReadError::Incomplete(need))) => {
                // The reader refused to look past the frame limit, so `need` is within it.
                self.need = need;
                Ok(None)
            }
            Err(Failure::Read(ReadError::Invalid(reason))) => Err(DecodeError {
                message_id,
                status: Status::RequestParsingError,
                reason,
            }),
            Err(Failure::Status(status, reason)) => Err(DecodeError {
                message_id,
                status,
                reason,
            }),
        }
    }
}

enum Failure {
    Read(ReadError),
    Status(Status, String),
}

impl From<ReadError> for Failure {
    fn from(error: ReadError) -> Self {
        Self::Read(error)
    }
}

fn parse(
    r: &mut Reader<'_>,
    limits: &Limits,
    message_id: &mut u64,
) -> Result<(Header, Request), Failure> {
    let magic = r.u8()?;
    if magic != REQUEST_MAGIC {
        return Err(Failure::Status(
            Status::InvalidMagicOrMessageId,
            format!("invalid magic byte 0x{magic:02x}, expected 0xa0"),
        ));
    }
    *message_id = match r.vlong() {
        Ok(id) => id,
        // Status 0x81 is "invalid magic or message id".
        Err(ReadError::Invalid(reason)) => {
            return Err(Failure::Status(
                Status::InvalidMagicOrMessageId,
                format!("invalid message id: {reason}"),
            ));
        }
        Err(incomplete) => return Err(incomplete.into()),
    };
    let version = r.u8()?;
    if version < VERSION_MIN {
        return Err(Failure::Status(
            Status::UnknownVersion,
            format!(
                "protocol version {}.{} is not supported; use 2.0 or later",
                version / 10,
                version % 10
            ),
        ));
    }
    let opcode = r.u8()?;
    let cache_name = r.string_span()?;
    let flags = r.vint()?;
    let intelligence = r.u8()?;
    let topology_id = r.vint()? as i32;
    let (key_type, value_type) = if version >= 28 {
        (MediaType::read(r)?, MediaType::read(r)?)
    } else {
        (MediaType::Unspecified, MediaType::Unspecified)
    };
    if version >= 40 {
        // Other parameters (tracing context): read and dropped.
        let n = r.count(limits.count_max, "header parameter")?;
        for _ in 0..n {
            r.string_span()?;
            r.array()?;
        }
    }
    let header = Header {
        message_id: *message_id,
        version,
        opcode,
        cache_name,
        flags,
        intelligence,
        topology_id,
        key_type,
        value_type,
    };
    let request = parse_body(r, &header, limits)?;
    Ok((header, request))
}

fn parse_body(r: &mut Reader<'_>, header: &Header, limits: &Limits) -> Result<Request, Failure> {
    let version = header.version;
    let request = match header.opcode {
        opcode::PING => Request::Ping,
        opcode::GET => Request::Get { key: r.array()? },
        opcode::GET_WITH_VERSION => Request::GetWithVersion { key: r.array()? },
        opcode::GET_WITH_METADATA => Request::GetWithMetadata { key: r.array()? },
        opcode::CONTAINS_KEY => Request::ContainsKey { key: r.array()? },
        opcode::PUT | opcode::PUT_IF_ABSENT | opcode::REPLACE => {
            let key = r.array()?;
            let expiration = expiration(r, header)?;
            let value = r.array()?;
            match header.opcode {
                opcode::PUT => Request::Put {
                    key,
                    expiration,
                    value,
                },
                opcode::PUT_IF_ABSENT => Request::PutIfAbsent {
                    key,
                    expiration,
                    value,
                },
                _ => Request::Replace {
                    key,
                    expiration,
                    value,
                },
            }
        }
        opcode::REPLACE_IF_UNMODIFIED => {
            let key = r.array()?;
            let expiration = expiration(r, header)?;
            let version = r.u64()?;
            Request::ReplaceIfUnmodified {
                key,
                expiration,
                version,
                value: r.array()?,
            }
        }
        opcode::REMOVE => Request::Remove { key: r.array()? },
        opcode::REMOVE_IF_UNMODIFIED => {
            let key = r.array()?;
            Request::RemoveIfUnmodified {
                key,
                version: r.u64()?,
            }
        }
        opcode::CLEAR => Request::Clear,
        opcode::SIZE => Request::Size,
        opcode::STATS => Request::Stats,
        opcode::PUT_ALL => {
            let expiration = expiration(r, header)?;
            let n = r.count(limits.count_max, "put-all entry")?;
            let mut entries = Vec::with_capacity(n.min(1024));
            for _ in 0..n {
                let key = r.array()?;
                entries.push((key, r.array()?));
            }
            Request::PutAll {
                expiration,
                entries,
            }
        }
        opcode::GET_ALL => {
            let n = r.count(limits.count_max, "get-all key")?;
            let mut keys = Vec::with_capacity(n.min(1024));
            for _ in 0..n {
                keys.push(r.array()?);
            }
            Request::GetAll { keys }
        }
        opcode::BULK_GET => Request::BulkGet { count: r.vint()? },
        opcode::BULK_GET_KEYS => Request::BulkGetKeys { scope: r.vint()? },
        opcode::ITERATION_START => {
            let segments = r.optional_array()?;
            let filter = match r.optional_string()? {
                Some(name) if version >= 24 => Some(Factory {
                    name,
                    params: factory_params(r, limits)?,
                }),
                Some(name) => Some(Factory {
                    name,
                    params: Vec::new(),
                }),
                None => None,
            };
            let batch_size = r.vint()?;
            let metadata = if version >= 25 { r.u8()? != 0 } else { false };
            Request::IterationStart {
                segments,
                filter,
                batch_size,
                metadata,
            }
        }
        opcode::ITERATION_NEXT => Request::IterationNext { id: r.string()? },
        opcode::ITERATION_END => Request::IterationEnd { id: r.string()? },
        opcode::ADD_CLIENT_LISTENER => {
            let listener_id = r.array()?;
            let include_current_state = r.u8()? != 0;
            let filter = named_factory(r, limits)?;
            let converter = named_factory(r, limits)?;
            let raw_data = if version >= 21 { r.u8()? != 0 } else { false };
            let interests = if version >= 26 { r.vint()? } else { 0 };
            Request::AddClientListener {
                listener_id,
                include_current_state,
                filter,
                converter,
                raw_data,
                interests,
            }
        }
        opcode::REMOVE_CLIENT_LISTENER => Request::RemoveClientListener {
            listener_id: r.array()?,
        },
        opcode::ADD_BLOOM_FILTER_LISTENER => {
            let listener_id = r.array()?;
            Request::AddBloomFilterListener {
                listener_id,
                bloom_bits: r.vint()?,
            }
        }
        opcode::UPDATE_BLOOM_FILTER => Request::UpdateBloomFilter { bits: r.array()? },
        opcode::EXEC => {
            let task = r.string()?;
            let n = r.count(limits.count_max, "task parameter")?;
            let mut params = Vec::with_capacity(n.min(64));
            for _ in 0..n {
                let name = r.string()?;
                params.push((name, r.array()?));
            }
            Request::Exec { task, params }
        }
        opcode::QUERY => Request::Query { query: r.array()? },
        opcode::AUTH_MECH_LIST => Request::AuthMechList,
        opcode::AUTH => {
            let mechanism = r.string()?;
            Request::Auth {
                mechanism,
                response: r.array()?,
            }
        }
        opcode::GET_STREAM if version < 41 => {
            let key = r.array()?;
            Request::GetStream {
                key,
                offset: r.vint()?,
            }
        }
        other => {
            return Err(Failure::Status(
                Status::UnknownCommand,
                format!("unknown or unsupported operation 0x{other:02x}"),
            ));
        }
    };
    Ok(request)
}

/// A factory name (empty = none) with its parameters.
fn named_factory(r: &mut Reader<'_>, limits: &Limits) -> ReadResult<Option<Factory>> {
    let name = r.string()?;
    if name.is_empty() {
        return Ok(None);
    }
    Ok(Some(Factory {
        name,
        params: factory_params(r, limits)?,
    }))
}

fn factory_params(r: &mut Reader<'_>, limits: &Limits) -> ReadResult<Vec<Span>> {
    let n = usize::from(r.u8()?).min(limits.count_max);
    let mut params = Vec::with_capacity(n);
    for _ in 0..n {
        params.push(r.array()?);
    }
    Ok(params)
}

const THIRTY_DAYS: Duration = Duration::from_secs(30 * 24 * 3600);

fn expiration(r: &mut Reader<'_>, header: &Header) -> ReadResult<Expiration> {
    if header.version < 22 {
        let lifespan = r.vint()? as i32;
        let max_idle = r.vint()? as i32;
        let old = |value: i32, default_flag: u32| {
            if value < 0 {
                Lifetime::Infinite
            } else if value == 0 {
                if header.has_flag(default_flag) {
                    Lifetime::Default
                } else {
                    Lifetime::Infinite
                }
            } else {
                absolute_if_long(Duration::from_secs(value as u64), header.version)
            }
        };
        return Ok(Expiration {
            lifespan: old(lifespan, flags::DEFAULT_LIFESPAN),
            max_idle: old(max_idle, flags::DEFAULT_MAXIDLE),
        });
    }
    let units = r.u8()?;
    let lifespan = lifetime(r, units >> 4, header.version)?;
    let max_idle = lifetime(r, units & 0x0f, header.version)?;
    Ok(Expiration { lifespan, max_idle })
}

fn lifetime(r: &mut Reader<'_>, unit: u8, version: u8) -> ReadResult<Lifetime> {
    let scale: fn(u64) -> Duration = match unit {
        0 => Duration::from_secs,
        1 => Duration::from_millis,
        2 => Duration::from_nanos,
        3 => Duration::from_micros,
        4 => |v| Duration::from_secs(v.saturating_mul(60)),
        5 => |v| Duration::from_secs(v.saturating_mul(3600)),
        6 => |v| Duration::from_secs(v.saturating_mul(86_400)),
        7 => return Ok(Lifetime::Default),
        8 => return Ok(Lifetime::Infinite),
        other => return Err(ReadError::Invalid(format!("unknown time unit {other}"))),
    };
    let value = r.vlong()?;
    // A negative duration (as Java sends it) never expires; zero is what the clients send
    // for "the default".
    if value as i64 <= 0 {
        return Ok(if value == 0 {
            Lifetime::Default
        } else {
            Lifetime::Infinite
        });
    }
    Ok(absolute_if_long(scale(value), version))
}

/// Before 3.0, durations over 30 days were Unix times.
fn absolute_if_long(duration: Duration, version: u8) -> Lifetime {
    if version < 30 && duration > THIRTY_DAYS {
        Lifetime::Until(duration)
    } else {
        Lifetime::After(duration)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_all(bytes: &[u8]) -> Result<Option<Frame>, DecodeError> {
        Decoder::default().decode(&mut BytesMut::from(bytes))
    }

    // Proves the traced handshake PING at 3.1 and the 4.0 PING with other-params decode.
    #[test]
    fn traced_pings() {
        let frame = decode_all(&[
            0xa0, 0x02, 0x1f, 0x17, 0x00, 0x00, 0x03, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x00, 0x00,
        ])
        .expect("valid")
        .expect("complete");
        assert_eq!(frame.header.message_id, 2);
        assert_eq!(frame.header.version, 31);
        assert_eq!(frame.header.intelligence, 3);
        assert_eq!(frame.header.topology_id, -1);
        assert_eq!(frame.request, Request::Ping);
        assert_eq!(frame.cache_name(), "");
        let frame = decode_all(&[
            0xa0, 0x03, 0x28, 0x17, 0x01, b'x', 0x00, 0x03, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x00,
            0x00, 0x00,
        ])
        .expect("valid")
        .expect("complete");
        assert_eq!(frame.cache_name(), "x");
        assert_eq!(frame.header.version, 40);
    }

    fn put_frame(units_and_values: &[u8]) -> Vec<u8> {
        let mut bytes = vec![0xa0, 0x07, 0x28, opcode::PUT, 0x01, b'x', 0x01, 0x03, 0x00];
        bytes.extend_from_slice(&[0x01, 0x0c, 0x00, 0x01, 0x0c, 0x00, 0x00]);
        bytes.extend_from_slice(&[0x06, 0x4a, 0x04, b'k', b'e', b'y', b'1']);
        bytes.extend_from_slice(units_and_values);
        bytes.extend_from_slice(&[0x02, 0x4a, 0x00]);
        bytes
    }

    // Proves expiration units: `77` is default/default; `04 0a 05` is 10 s and 5 min.
    #[test]
    fn put_with_expiration() {
        let frame = decode_all(&put_frame(&[0x77]))
            .expect("valid")
            .expect("complete");
        let Request::Put {
            key,
            expiration,
            value,
        } = frame.request.clone()
        else {
            panic!("not a put: {:?}", frame.request)
        };
        assert_eq!(frame.slice(key), b"\x4a\x04key1");
        assert_eq!(frame.slice(value), b"\x4a\x00");
        assert_eq!(expiration, Expiration::DEFAULT);
        assert!(frame.header.has_flag(flags::FORCE_RETURN_VALUE));
        let frame = decode_all(&put_frame(&[0x04, 0x0a, 0x05]))
            .expect("valid")
            .expect("complete");
        let Request::Put { expiration, .. } = frame.request else {
            panic!("not a put")
        };
        assert_eq!(
            expiration.lifespan,
            Lifetime::After(Duration::from_secs(10))
        );
        assert_eq!(
            expiration.max_idle,
            Lifetime::After(Duration::from_secs(300))
        );
        let frame = decode_all(&put_frame(&[0x68, 0x05]))
            .expect("valid")
            .expect("complete");
        let Request::Put { expiration, .. } = frame.request else {
            panic!("not a put")
        };
        assert_eq!(
            expiration.lifespan,
            Lifetime::After(Duration::from_secs(5 * 86_400))
        );
        assert_eq!(expiration.max_idle, Lifetime::Infinite);
    }

    // Proves every prefix of a frame asks for more bytes and the whole frame then decodes,
    // leaving the next frame's bytes in the buffer.
    #[test]
    fn split_frames() {
        let frame = put_frame(&[0x04, 0x0a, 0x05]);
        for cut in 0..frame.len() {
            let mut decoder = Decoder::default();
            let mut buf = BytesMut::from(&frame[..cut]);
            assert_eq!(decoder.decode(&mut buf), Ok(None), "cut at {cut}");
            buf.extend_from_slice(&frame[cut..]);
            buf.extend_from_slice(&[0xa0]);
            assert!(
                decoder.decode(&mut buf).expect("valid").is_some(),
                "cut at {cut}"
            );
            assert_eq!(&buf[..], &[0xa0]);
        }
    }

    // Proves malformed frames get the right status and the message id when it was read.
    #[test]
    fn malformed_frames() {
        let error = decode_all(&[0x41, 0x42]).expect_err("bad magic");
        assert_eq!(error.status, Status::InvalidMagicOrMessageId);
        let mut overlong_id = vec![0xa0];
        overlong_id.extend_from_slice(&[0xff; 10]);
        overlong_id.extend_from_slice(&[0x01, 0x28, 0x17]);
        let error = decode_all(&overlong_id).expect_err("11-byte message id");
        assert_eq!(
            (error.status, error.message_id),
            (Status::InvalidMagicOrMessageId, 0)
        );
        let error = decode_all(&[0xa0, 0x09, 0x0a, 0x17]).expect_err("1.0");
        assert_eq!(
            (error.status, error.message_id),
            (Status::UnknownVersion, 9)
        );
        let error = decode_all(&[
            0xa0, 0x05, 0x28, 0x99, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00,
        ])
        .expect_err("unknown op");
        assert_eq!(
            (error.status, error.message_id),
            (Status::UnknownCommand, 5)
        );
        let mut frame = put_frame(&[0x77]);
        frame.truncate(frame.len() - 3);
        frame.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x07]); // a 2 GiB value
        let error = decode_all(&frame).expect_err("value too long");
        assert_eq!(error.status, Status::RequestParsingError);
        let error = decode_all(&put_frame(&[0x99])).expect_err("bad unit");
        assert_eq!(error.status, Status::RequestParsingError);
    }

    // Proves a frame longer than the limit is refused even when it arrives whole, with the
    // same error as when it arrives in pieces (found by the hotrod_decode fuzzer: a complete
    // frame over the limit used to decode, and the error named a split-dependent length).
    #[test]
    fn frame_limit_does_not_depend_on_reads() {
        let limits = Limits {
            frame_bytes_max: 16,
            ..Limits::default()
        };
        let frame = put_frame(&[0x77]);
        assert!(frame.len() > 16);
        let whole = Decoder::new(limits).decode(&mut BytesMut::from(&frame[..]));
        assert_eq!(
            whole.as_ref().map_err(|e| e.status),
            Err(Status::RequestParsingError)
        );
        for cut in 1..frame.len() {
            let mut decoder = Decoder::new(limits);
            let mut buf = BytesMut::from(&frame[..cut]);
            let first = decoder.decode(&mut buf);
            if first == Ok(None) {
                buf.extend_from_slice(&frame[cut..]);
                assert_eq!(decoder.decode(&mut buf), whole, "cut at {cut}");
            } else {
                assert_eq!(first, whole, "cut at {cut}");
            }
        }
        // At the limit exactly, it decodes.
        let limits = Limits {
            frame_bytes_max: frame.len(),
            ..Limits::default()
        };
        assert!(matches!(
            Decoder::new(limits).decode(&mut BytesMut::from(&frame[..])),
            Ok(Some(_))
        ));
    }

    // Proves a frame longer than the limit is refused as soon as its length is known.
    #[test]
    fn frame_limit() {
        let limits = Limits {
            frame_bytes_max: 64,
            ..Limits::default()
        };
        let mut decoder = Decoder::new(limits);
        let mut frame = put_frame(&[0x77]);
        frame.truncate(frame.len() - 3);
        frame.extend_from_slice(&[0x80, 0x01]); // a 128-byte value, not sent yet
        let error = decoder
            .decode(&mut BytesMut::from(&frame[..]))
            .expect_err("too long");
        assert_eq!(error.status, Status::RequestParsingError);
    }
}
