//! A blocking Hot Rod test client over `std::net::TcpStream`: requests are written with
//! `weft_hotrod::encode`; responses are read back by the shape their request implies (Hot
//! Rod bodies carry no length) and kept as raw body bytes, so tests can check exact bytes.
//! Events met while waiting for a response are kept aside in arrival order.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use weft_hotrod::opcode;
use weft_hotrod::{
    Expiration, MediaType, Request, RequestHeader, ResponseError, ResponseHeader, ResponseReader,
    Status, encode,
};

/// How long any read waits before the test fails: a hang fails instead of blocking.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Bytes as a request holds them.
pub fn b(bytes: impl AsRef<[u8]>) -> Bytes {
    Bytes::copy_from_slice(bytes.as_ref())
}

/// `application/x-protostream`, the media type the Java client declares for keys and values.
pub fn protostream() -> MediaType {
    MediaType::Predefined {
        id: 12,
        params: vec![],
    }
}

/// A put of `key` = `value` with the cache's default expiration.
pub fn put(key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Request<Bytes> {
    Request::Put {
        key: b(key),
        expiration: Expiration::DEFAULT,
        value: b(value),
    }
}

/// A get of `key`.
pub fn get(key: impl AsRef<[u8]>) -> Request<Bytes> {
    Request::Get { key: b(key) }
}

/// A server task (`@@cache@create` and the other administration tasks) with text
/// parameters, as `RemoteCacheManagerAdmin` sends it.
pub fn exec(task: &str, params: &[(&str, &str)]) -> Request<Bytes> {
    Request::Exec {
        task: task.to_owned(),
        params: params
            .iter()
            .map(|(name, value)| ((*name).to_owned(), b(value)))
            .collect(),
    }
}

/// One response or event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// Its header.
    pub header: ResponseHeader,
    /// Everything after the header (and its topology update).
    pub body: Vec<u8>,
}

impl Response {
    /// The status.
    pub fn status(&self) -> Status {
        self.header.status
    }

    /// A reader over the body.
    pub fn reader(&self) -> ResponseReader<'_> {
        ResponseReader::new(&self.body)
    }

    /// The message of an error response; panics if it is not one.
    pub fn error_message(&self) -> String {
        assert_eq!(self.header.opcode, opcode::ERROR, "not an error: {self:?}");
        self.reader().string().unwrap()
    }

    /// The value of a successful get (the body's one array).
    pub fn value(&self) -> Vec<u8> {
        assert_eq!(self.status(), Status::Success, "{self:?}");
        let mut reader = self.reader();
        let value = reader.array().unwrap().to_vec();
        assert_eq!(reader.position(), self.body.len());
        value
    }

    /// `(status, body)`: what most assertions compare.
    pub fn shape(&self) -> (Status, Vec<u8>) {
        (self.status(), self.body.clone())
    }
}

/// What is needed to read the response to a request: its shape depends on all three.
#[derive(Debug, Clone, Copy)]
struct Sent {
    version: u8,
    opcode: u8,
    intelligence: u8,
}

/// A Hot Rod connection.
pub struct HotRod {
    stream: TcpStream,
    buf: Vec<u8>,
    next_id: u64,
    sent: HashMap<u64, Sent>,
    /// Protocol version of the requests `call` sends.
    pub version: u8,
    /// Cache the requests `call` name (empty = the default cache).
    pub cache: String,
    /// Key and value media type the requests `call` declare (none: the cache's own). The
    /// Java client declares `application/x-protostream` ([`protostream`]).
    pub media_type: MediaType,
    /// Events that arrived while waiting for a response, oldest first.
    pub events: VecDeque<Response>,
}

impl HotRod {
    /// Connects to `addr`; requests go to the default cache at `version`.
    pub fn connect(addr: SocketAddr, version: u8) -> Self {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_nodelay(true).unwrap();
        stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(READ_TIMEOUT)).unwrap();
        Self {
            stream,
            buf: Vec::new(),
            next_id: 1,
            sent: HashMap::new(),
            version,
            cache: String::new(),
            media_type: MediaType::Unspecified,
            events: VecDeque::new(),
        }
    }

    /// A header for the next request: a fresh message id, this connection's version and
    /// cache, no flags, basic intelligence.
    pub fn header(&mut self) -> RequestHeader {
        let id = self.next_id;
        self.next_id += 1;
        RequestHeader {
            key_type: self.media_type.clone(),
            value_type: self.media_type.clone(),
            ..RequestHeader::new(self.version, id, self.cache.clone())
        }
    }

    /// Appends a request to `out` without sending it, and remembers how to read its
    /// response; returns its message id.
    pub fn encode_into(
        &mut self,
        out: &mut BytesMut,
        header: &RequestHeader,
        request: &Request<Bytes>,
    ) -> u64 {
        encode(out, header, request).unwrap();
        self.sent.insert(
            header.message_id,
            Sent {
                version: header.version.min(weft_hotrod::VERSION_MAX),
                opcode: request.opcode(),
                intelligence: header.intelligence,
            },
        );
        header.message_id
    }

    /// Remembers how to read the response to a request sent as raw bytes.
    pub fn expect_response(&mut self, message_id: u64, version: u8, request_opcode: u8) {
        self.sent.insert(
            message_id,
            Sent {
                version,
                opcode: request_opcode,
                intelligence: 1,
            },
        );
    }

    /// Sends a request; returns its message id.
    pub fn send(&mut self, header: &RequestHeader, request: &Request<Bytes>) -> u64 {
        let mut out = BytesMut::new();
        let id = self.encode_into(&mut out, header, request);
        self.send_raw(&out);
        id
    }

    /// Sends raw bytes.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    /// Sends `request` with `flags` and waits for its response.
    pub fn call_with(&mut self, flags: u32, request: Request<Bytes>) -> Response {
        let header = RequestHeader {
            flags,
            ..self.header()
        };
        let id = self.send(&header, &request);
        self.response_to(id)
    }

    /// Sends `request` and waits for its response.
    pub fn call(&mut self, request: Request<Bytes>) -> Response {
        self.call_with(0, request)
    }

    /// Waits for the response to message `id`; events that come first are kept in
    /// [`HotRod::events`]. Panics on another response, a close or a timeout.
    pub fn response_to(&mut self, id: u64) -> Response {
        loop {
            let response = self.read();
            if is_event(response.header.opcode) {
                self.events.push_back(response);
                continue;
            }
            assert_eq!(
                response.header.message_id, id,
                "expected the response to {id}, got {response:?}"
            );
            return response;
        }
    }

    /// The next event, taken from those kept aside or read (responses met meanwhile are
    /// unexpected and fail the test).
    pub fn next_event(&mut self) -> Response {
        if let Some(event) = self.events.pop_front() {
            return event;
        }
        let response = self.read();
        assert!(
            is_event(response.header.opcode),
            "expected an event, got {response:?}"
        );
        response
    }

    /// Reads the next response or event, waiting up to [`READ_TIMEOUT`]; panics if the
    /// connection closes or nothing arrives.
    pub fn read(&mut self) -> Response {
        match self.read_within(READ_TIMEOUT) {
            Some(response) => response,
            None => panic!(
                "nothing within {READ_TIMEOUT:?}; buffered {:02x?}",
                &self.buf[..self.buf.len().min(64)]
            ),
        }
    }

    /// Reads the next response or event if one arrives within `timeout`.
    pub fn read_within(&mut self, timeout: Duration) -> Option<Response> {
        let deadline = Instant::now() + timeout;
        loop {
            match parse(&self.buf, &self.sent) {
                Ok(Some((response, used))) => {
                    self.buf.drain(..used);
                    if !is_event(response.header.opcode) {
                        self.sent.remove(&response.header.message_id);
                    }
                    return Some(response);
                }
                Ok(None) => {}
                Err(error) => panic!("unreadable response: {error}; buffered {:02x?}", self.buf),
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            self.stream.set_read_timeout(Some(left)).unwrap();
            let mut chunk = vec![0u8; 256 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => panic!("connection closed; buffered {:02x?}", self.buf),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return None;
                }
                Err(e) => panic!("read failed: {e}"),
            }
        }
    }

    /// Reads responses and events until the server closes the connection; returns how many
    /// came. Panics if nothing arrives for [`READ_TIMEOUT`].
    pub fn count_until_closed(&mut self) -> usize {
        let mut count = 0;
        loop {
            while let Some((response, used)) = parse(&self.buf, &self.sent).unwrap() {
                self.buf.drain(..used);
                if !is_event(response.header.opcode) {
                    self.sent.remove(&response.header.message_id);
                }
                count += 1;
            }
            self.stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
            let mut chunk = vec![0u8; 256 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => return count,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::ConnectionReset) => return count,
                Err(e) => panic!("still open after {count} frames: {e}"),
            }
        }
    }

    /// Whether the server closes the connection (EOF or reset) within [`READ_TIMEOUT`] with
    /// nothing more arriving first.
    pub fn closed_by_server(&mut self) -> bool {
        if !self.buf.is_empty() {
            return false;
        }
        self.stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        let mut chunk = [0u8; 1024];
        match self.stream.read(&mut chunk) {
            Ok(0) => true,
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                false
            }
            Err(e) => matches!(
                e.kind(),
                ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted
            ),
        }
    }

    /// Sends raw bytes and expects one error response with `status`, then the close.
    /// Returns the error message.
    pub fn expect_error_and_close(&mut self, bytes: &[u8], status: Status) -> String {
        self.send_raw(bytes);
        let response = self.read();
        assert_eq!(response.header.opcode, opcode::ERROR, "{response:?}");
        assert_eq!(response.status(), status, "{response:?}");
        assert_eq!(response.header.topology, None);
        let message = response.error_message();
        assert!(
            self.closed_by_server(),
            "connection left open after {status:?}"
        );
        message
    }

    /// Closes the writing half.
    pub fn shutdown_write(&self) {
        let _ = self.stream.shutdown(Shutdown::Write);
    }
}

/// Whether a response opcode is an event's.
pub fn is_event(response_opcode: u8) -> bool {
    (opcode::EVENT_CREATED..=opcode::EVENT_EXPIRED).contains(&response_opcode)
}

/// Parses one response or event from the start of `buf`: `Ok(None)` if incomplete.
fn parse(
    buf: &[u8],
    sent: &HashMap<u64, Sent>,
) -> Result<Option<(Response, usize)>, ResponseError> {
    // The message id decides which request this answers, and so how to read the rest.
    let mut peek = ResponseReader::new(buf);
    let id = match peek.u8().and_then(|_| peek.vlong()) {
        Ok(id) => id,
        Err(ResponseError::Incomplete(_)) => return Ok(None),
        Err(error) => return Err(error),
    };
    let request = sent.get(&id).copied();
    let intelligence = request.map_or(1, |r| r.intelligence);
    let mut reader = ResponseReader::new(buf);
    let result = (|| {
        let header = reader.header(intelligence)?;
        let body_start = reader.position();
        skip_body(&mut reader, &header, request)?;
        Ok((header, body_start))
    })();
    match result {
        Ok((header, body_start)) => {
            let end = reader.position();
            let body = buf[body_start..end].to_vec();
            Ok(Some((Response { header, body }, end)))
        }
        Err(ResponseError::Incomplete(_)) => Ok(None),
        Err(error) => Err(error),
    }
}

fn skip_body(
    r: &mut ResponseReader<'_>,
    header: &ResponseHeader,
    request: Option<Sent>,
) -> Result<(), ResponseError> {
    let invalid = |what: String| Err(ResponseError::Invalid(what));
    match header.opcode {
        opcode::ERROR => {
            r.string()?;
            return Ok(());
        }
        opcode::EVENT_CREATED | opcode::EVENT_MODIFIED => {
            r.array()?;
            r.u8()?;
            r.u8()?;
            r.array()?;
            r.u64()?;
            return Ok(());
        }
        opcode::EVENT_REMOVED | opcode::EVENT_EXPIRED => {
            r.array()?;
            r.u8()?;
            r.u8()?;
            r.array()?;
            return Ok(());
        }
        _ => {}
    }
    let Some(request) = request else {
        return invalid(format!(
            "response {header:?} to a message id that was not sent"
        ));
    };
    if header.opcode != opcode::response_of(request.opcode) {
        return invalid(format!(
            "response opcode 0x{:02x} to request 0x{:02x}",
            header.opcode, request.opcode
        ));
    }
    let version = request.version;
    let success = header.status == Status::Success;
    match request.opcode {
        opcode::PUT
        | opcode::PUT_IF_ABSENT
        | opcode::REPLACE
        | opcode::REPLACE_IF_UNMODIFIED
        | opcode::REMOVE
        | opcode::REMOVE_IF_UNMODIFIED => {
            if matches!(
                header.status,
                Status::SuccessWithPrevious | Status::NotExecutedWithPrevious
            ) {
                if version >= 40 {
                    r.metadata()?;
                }
                r.array()?;
            }
        }
        opcode::GET | opcode::QUERY | opcode::EXEC => {
            if success {
                r.array()?;
            }
        }
        opcode::GET_WITH_VERSION => {
            if success {
                r.u64()?;
                r.array()?;
            }
        }
        opcode::GET_WITH_METADATA | opcode::GET_STREAM => {
            if success {
                r.metadata()?;
                r.array()?;
            }
        }
        opcode::CONTAINS_KEY
        | opcode::CLEAR
        | opcode::PUT_ALL
        | opcode::ITERATION_END
        | opcode::ADD_CLIENT_LISTENER
        | opcode::REMOVE_CLIENT_LISTENER
        | opcode::ADD_BLOOM_FILTER_LISTENER
        | opcode::UPDATE_BLOOM_FILTER => {}
        opcode::SIZE => {
            r.vlong()?;
        }
        opcode::STATS => {
            for _ in 0..r.vint()? {
                r.string()?;
                r.string()?;
            }
        }
        opcode::PING => {
            if version >= 29 {
                r.media_type()?;
                r.media_type()?;
            }
            if version >= 30 {
                r.u8()?;
                for _ in 0..r.vint()? {
                    r.u16()?;
                }
            }
        }
        opcode::BULK_GET => {
            while r.u8()? != 0 {
                r.array()?;
                r.array()?;
            }
        }
        opcode::BULK_GET_KEYS => {
            while r.u8()? != 0 {
                r.array()?;
            }
        }
        opcode::GET_ALL => {
            for _ in 0..r.vint()? {
                r.array()?;
                r.array()?;
            }
        }
        opcode::ITERATION_START => {
            if success {
                r.string()?;
            }
        }
        opcode::ITERATION_NEXT => {
            r.array()?;
            let count = r.vint()?;
            let projections = if count > 0 && version >= 24 {
                r.vint()?
            } else {
                1
            };
            for _ in 0..count {
                if version >= 25 && r.u8()? == 1 {
                    r.metadata()?;
                }
                r.array()?;
                for _ in 0..projections {
                    r.array()?;
                }
            }
        }
        opcode::AUTH_MECH_LIST => {
            for _ in 0..r.vint()? {
                r.string()?;
            }
        }
        opcode::AUTH => {
            r.u8()?;
            r.array()?;
        }
        other => return invalid(format!("no reader for responses to 0x{other:02x}")),
    }
    Ok(())
}

/// One decoded iteration batch.
#[derive(Debug, Default)]
pub struct Batch {
    /// Segments finished with this batch.
    pub finished: Vec<u32>,
    /// `(key, value)` pairs.
    pub entries: Vec<(Vec<u8>, Vec<u8>)>,
}

/// Reads an iteration-next body (protocol 2.5+, one projection, no metadata requested).
pub fn iteration_batch(response: &Response) -> Batch {
    let mut r = response.reader();
    let bits = r.array().unwrap();
    let finished = (0..bits.len() as u32 * 8)
        .filter(|s| bits[(s / 8) as usize] & (1 << (s % 8)) != 0)
        .collect();
    let count = r.vint().unwrap();
    let mut entries = Vec::new();
    if count > 0 {
        assert_eq!(r.vint().unwrap(), 1, "projections");
    }
    for _ in 0..count {
        assert_eq!(r.u8().unwrap(), 0, "metadata was not asked for");
        let key = r.array().unwrap().to_vec();
        let value = r.array().unwrap().to_vec();
        entries.push((key, value));
    }
    assert_eq!(r.position(), response.body.len());
    Batch { finished, entries }
}

/// Iterates a cache of `segment_count` segments in batches of `batch_size` over `segments`
/// (all if `None`), checking what the Java client checks: no entry of a segment already
/// reported finished, by the segment it computes from the key bytes it receives (as on an
/// octet-stream cache; the server's own segment on a ProtoStream one), no key twice, and the
/// finished segments adding up to those asked for. Returns the entries.
pub fn iterate_as_java_client(
    c: &mut HotRod,
    segments: Option<&BTreeSet<u32>>,
    batch_size: u32,
    segment_count: u32,
) -> HashMap<Vec<u8>, Vec<u8>> {
    let bits = segments.map(|segments| {
        let mut bits = vec![0u8; segment_count.div_ceil(8) as usize];
        for s in segments {
            bits[(s / 8) as usize] |= 1 << (s % 8);
        }
        Bytes::from(bits)
    });
    let response = c.call(Request::IterationStart {
        segments: bits,
        filter: None,
        batch_size,
        metadata: false,
    });
    assert_eq!(response.status(), Status::Success);
    let id = response.reader().string().unwrap();
    let mut finished = BTreeSet::new();
    let mut seen = HashMap::new();
    loop {
        let batch = iteration_batch(&c.call(Request::IterationNext { id: id.clone() }));
        assert!(batch.entries.len() <= batch_size as usize);
        for (key, value) in &batch.entries {
            let segment = weft_core::hash::segment_of(key, segment_count);
            assert!(
                segments.is_none_or(|asked| asked.contains(&segment)),
                "an entry of segment {segment}, which was not asked for"
            );
            assert!(
                !finished.contains(&segment),
                "Segment {segment} already completed"
            );
            assert!(
                seen.insert(key.clone(), value.clone()).is_none(),
                "a key twice"
            );
        }
        for segment in batch.finished {
            assert!(finished.insert(segment), "segment {segment} finished twice");
        }
        if batch.entries.is_empty() {
            break;
        }
    }
    let asked = segments
        .cloned()
        .unwrap_or_else(|| (0..segment_count).collect());
    assert_eq!(finished, asked);
    assert_eq!(
        c.call(Request::IterationEnd { id }).status(),
        Status::Success
    );
    seen
}
