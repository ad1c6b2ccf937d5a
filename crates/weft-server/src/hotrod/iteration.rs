//! Iteration (start / next / end): a cursor over chosen segments, served in batches, that
//! reports which segments it has finished so a client can resume elsewhere.
//!
//! "Segment" here is the client's: the Java client checks every entry it receives against the
//! segments reported finished, hashing the key bytes it received (or, when the cache
//! advertises `text/plain` or ProtoStream storage, the key converted to that stored form),
//! and fails with "Segment N already completed" on an entry of a segment reported before.
//! Where that is the server's own segment (the client hashes the stored bytes, and the cache
//! partitions by Hot Rod's hash) the iteration goes segment by segment. Where it is not — the Java client
//! on an octet-stream cache hashes the ProtoStream bytes while the server stores raw bytes; a
//! `redis-slots` cache hashes by CRC16 — a client segment's entries are spread over every
//! stored segment: the iteration then reads them all, sends the entries whose client segment
//! was asked for, and reports the asked segments finished once everything has been read.

use std::collections::{HashMap, VecDeque};
use std::iter::Peekable;
use std::sync::Arc;

use bytes::{BufMut, BytesMut};
use parking_lot::Mutex;
use weft_core::{Cache, CacheEntry, CacheIter, Format, KeyPartitioner};
use weft_hotrod::response::put_metadata;
use weft_hotrod::wire::{put_array, put_vint};
use weft_hotrod::{Factory, Frame, Status};

use super::Connection;
use super::ops::{Failure, Formats, Target, metadata_of};
use crate::cluster::iteration::SegmentCursor;

/// Iterations open at once on the server; more are refused until some end.
const ITERATIONS_MAX: usize = 4096;
/// Largest batch served at once, whatever the client asks.
const BATCH_MAX: usize = 100_000;

/// The filter the Java client uses to iterate keys only (values come back empty).
fn keys_only_filter(factory: &Factory) -> bool {
    factory
        .name
        .ends_with("ToEmptyBytesKeyValueFilterConverter")
}

struct Iteration {
    connection: u64,
    /// The user that started it: only that user's connections may continue or end it (the
    /// Java client may do so on another pooled connection).
    owner: Option<Arc<str>>,
    cache: Cache,
    encoding: Encoding,
    pending: VecDeque<u32>,
    current: Option<(u32, Peekable<CacheIter>)>,
    batch: usize,
    /// A clustered cache's iteration reads each segment from the member that reads it now;
    /// `Some` unless a batch is being fetched. `clustered` says which kind this is.
    cursor: Option<SegmentCursor>,
    clustered: bool,
    /// `Some` when the client's segments are not the server's (see the module's doc).
    client: Option<ClientSegments>,
}

/// How an iteration's entries are written.
#[derive(Clone, Copy)]
struct Encoding {
    formats: Formats,
    metadata: bool,
    keys_only: bool,
}

/// The segments of an iteration whose client places keys in other segments than the
/// server: which it asked for, and whether they were reported finished.
#[derive(Clone)]
struct ClientSegments {
    asked: Arc<[u32]>,
    /// Per segment, whether the client asked for it; `None` when it asked for every segment
    /// (then no key need be hashed).
    wanted: Option<Arc<[bool]>>,
    formats: Formats,
    reported: bool,
}

impl ClientSegments {
    /// Whether the client asked for the segment it computes for `entry`'s key.
    fn wants(&self, entry: &CacheEntry) -> bool {
        let Some(wanted) = &self.wanted else {
            return true;
        };
        let count = u32::try_from(wanted.len()).unwrap_or(u32::MAX);
        // A key the client cannot receive fails the batch when it is encoded; the filter lets
        // it through so that the failure is reported, not hidden.
        let Ok(received) = self.formats.key_out(entry.key()) else {
            return true;
        };
        // A cache advertising text/plain or ProtoStream storage has the Java client convert
        // the key it received to that type before hashing it: to the bytes stored.
        let hashed = match self.formats.stored_key {
            Format::Text | Format::Protostream => entry.key(),
            _ => &received,
        };
        let segment = weft_core::hash::segment_of(hashed, count);
        wanted.get(segment as usize).copied().unwrap_or(false)
    }

    /// The segments to report finished with a batch: none until the iteration has read
    /// every stored segment, then (once) every segment the client asked for.
    fn finished(&mut self, read_everything: bool) -> Vec<u32> {
        if read_everything && !self.reported {
            self.reported = true;
            self.asked.to_vec()
        } else {
            Vec::new()
        }
    }
}

/// True when the client computes the segment of every key as this server does: the Java
/// client hashes with Hot Rod's MurmurHash3 either the key bytes it receives, or (on a cache
/// advertising text/plain or ProtoStream storage) the key converted to the stored type.
fn same_segments(cache: &Cache, formats: Formats) -> bool {
    let hashes_stored_bytes = formats.stored_key == formats.wire_key
        || matches!(formats.stored_key, Format::Text | Format::Protostream)
        || matches!(
            (formats.stored_key, formats.wire_key),
            (Format::Opaque, _) | (_, Format::Opaque) | (Format::Octet, Format::Text)
        );
    cache.config().key_partitioner == KeyPartitioner::HotRod && hashes_stored_bytes
}

/// The server's open iterations, by id.
#[derive(Default)]
pub(crate) struct Iterations {
    open: Mutex<HashMap<String, Arc<Mutex<Iteration>>>>,
}

impl std::fmt::Debug for Iterations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Iterations")
            .field("open", &self.open.lock().len())
            .finish()
    }
}

impl Iterations {
    /// Iteration `id`, if `connection`'s user started it.
    fn get(&self, id: &str, connection: &Connection) -> Option<Arc<Mutex<Iteration>>> {
        let iteration = self.open.lock().get(id).cloned()?;
        let owner = iteration.lock().owner.clone();
        let user = connection
            .subject
            .lock()
            .as_ref()
            .map(|subject| Arc::clone(&subject.name));
        (owner == user).then_some(iteration)
    }

    /// Ends iteration `id` if `connection`'s user started it; false otherwise, or if the id
    /// is unknown.
    pub(crate) fn end(&self, id: &str, connection: &Connection) -> bool {
        if self.get(id, connection).is_none() {
            return false;
        }
        self.open.lock().remove(id).is_some()
    }

    /// Ends every iteration a closed connection left open.
    pub(crate) fn remove_connection(&self, connection: u64) {
        self.open
            .lock()
            .retain(|_, iteration| iteration.lock().connection != connection);
    }
}

/// Segments named by a `java.util.BitSet` byte array (bit `i` of byte `j` = segment `8j+i`).
fn segments_of(bits: &[u8], count: u32) -> Vec<u32> {
    (0..count)
        .filter(|&s| {
            bits.get((s / 8) as usize)
                .is_some_and(|b| b & (1 << (s % 8)) != 0)
        })
        .collect()
}

/// `java.util.BitSet#toByteArray` of `segments`.
fn bitset_of(segments: &[u32]) -> Vec<u8> {
    let Some(&max) = segments.iter().max() else {
        return Vec::new();
    };
    let mut bits = vec![0u8; max as usize / 8 + 1];
    for &s in segments {
        bits[s as usize / 8] |= 1 << (s % 8);
    }
    bits
}

/// Opens an iteration and returns its id.
pub(super) fn start(
    connection: &Connection,
    target: &Target,
    segments: Option<&[u8]>,
    filter: Option<&Factory>,
    batch_size: u32,
    metadata: bool,
) -> Result<String, Failure> {
    let keys_only = match filter {
        None => false,
        Some(factory) if keys_only_filter(factory) => true,
        Some(factory) => {
            return Err(Failure::server(format!(
                "iteration filter factory '{}' is not registered on this server",
                factory.name
            )));
        }
    };
    let count = target.cache.segment_count();
    let asked: Vec<u32> = match segments {
        Some(bits) => segments_of(bits, count),
        None => (0..count).collect(),
    };
    let client = (!same_segments(&target.cache, target.formats)).then(|| {
        let wanted = (asked.len() < count as usize).then(|| {
            let mut wanted = vec![false; count as usize];
            for &segment in &asked {
                wanted[segment as usize] = true;
            }
            Arc::from(wanted)
        });
        ClientSegments {
            asked: Arc::from(asked.as_slice()),
            wanted,
            formats: target.formats,
            reported: false,
        }
    });
    // The client's segments are spread over every stored segment: all of them are read.
    let pending = if client.is_some() {
        (0..count).collect()
    } else {
        asked
    };
    let clustered =
        connection.context.cluster.is_some() && target.cache.config().mode.is_clustered();
    let iteration = Iteration {
        connection: connection.id,
        owner: connection
            .subject
            .lock()
            .as_ref()
            .map(|subject| Arc::clone(&subject.name)),
        cache: target.cache.clone(),
        encoding: Encoding {
            formats: target.formats,
            metadata,
            keys_only,
        },
        cursor: clustered.then(|| SegmentCursor::new(target.cache.clone(), pending.clone())),
        clustered,
        client,
        pending: pending.into(),
        current: None,
        batch: (batch_size as usize).clamp(1, BATCH_MAX),
    };
    let iterations = &connection.context.hotrod.iterations;
    // Unguessable: an id is all another client would need to read the iteration's cache.
    let id = weft_security::credentials::unguessable_id()
        .map_err(|error| Failure::server(error.to_string()))?;
    let mut open = iterations.open.lock();
    if open.len() >= ITERATIONS_MAX {
        return Err(Failure::server(format!(
            "too many open iterations ({ITERATIONS_MAX}); end some first"
        )));
    }
    open.insert(id.clone(), Arc::new(Mutex::new(iteration)));
    Ok(id)
}

/// Serves the next batch of iteration `id`.
pub(super) fn next(
    connection: &Connection,
    frame: &Frame,
    id: &str,
    out: &mut BytesMut,
) -> Result<(), Failure> {
    let Some(iteration) = connection.context.hotrod.iterations.get(id, connection) else {
        super::ops::plain_header(out, frame, Status::InvalidIteration);
        put_array(out, &[]);
        put_vint(out, 0);
        return Ok(());
    };
    let mut iteration = iteration.lock();
    let keys_only = iteration.encoding.keys_only;
    let client = iteration.client.clone();
    let keep = |entry: &CacheEntry| {
        sendable(entry, keys_only) && client.as_ref().is_none_or(|client| client.wants(entry))
    };
    let mut entries = Vec::new();
    let mut finished = Vec::new();
    while entries.len() < iteration.batch {
        if iteration.current.is_none() {
            let Some(segment) = iteration.pending.pop_front() else {
                break;
            };
            let entries_of_segment = iteration.cache.iter_segments(vec![segment]).peekable();
            iteration.current = Some((segment, entries_of_segment));
        }
        let Some((segment, cursor)) = iteration.current.as_mut() else {
            break;
        };
        match cursor.next() {
            Some(entry) if !keep(&entry) => {}
            Some(entry) => entries.push(entry),
            None => {
                finished.push(*segment);
                iteration.current = None;
            }
        }
    }
    // A segment whose last entry went out in this batch is finished now.
    if let Some((segment, cursor)) = iteration.current.as_mut()
        && cursor.peek().is_none()
    {
        finished.push(*segment);
        iteration.current = None;
    }
    let read_everything = iteration.pending.is_empty() && iteration.current.is_none();
    if let Some(client) = iteration.client.as_mut() {
        finished = client.finished(read_everything);
    }
    let now = iteration.cache.clock().now_ms();
    encode(out, frame, iteration.encoding, now, &entries, &finished)
}

/// A key holding a Redis structure has no value to send: an entry iteration leaves it out,
/// a key-only one (the Java client's `keySet`) keeps it.
fn sendable(entry: &CacheEntry, keys_only: bool) -> bool {
    keys_only || entry.structure().is_none()
}

/// Writes an ITERATION_NEXT response: the finished segments, then the entries.
fn encode(
    out: &mut BytesMut,
    frame: &Frame,
    encoding: Encoding,
    now: u64,
    entries: &[CacheEntry],
    finished: &[u32],
) -> Result<(), Failure> {
    let version = frame.header.effective_version();
    let mut body = BytesMut::new();
    put_array(&mut body, &bitset_of(finished));
    put_vint(&mut body, entries.len() as u32);
    if !entries.is_empty() && version >= 24 {
        put_vint(&mut body, 1);
    }
    for entry in entries {
        if version >= 25 {
            if encoding.metadata {
                body.put_u8(1);
                put_metadata(&mut body, &metadata_of(&entry.metadata(), now));
            } else {
                body.put_u8(0);
            }
        }
        put_array(&mut body, &encoding.formats.key_out(entry.key())?);
        if encoding.keys_only {
            put_array(&mut body, &[]);
        } else {
            put_array(&mut body, &encoding.formats.value_out(entry)?);
        }
    }
    super::ops::plain_header(out, frame, Status::Success);
    out.extend_from_slice(&body);
    Ok(())
}

/// Serves ITERATION_NEXT of an iteration over a clustered cache: the batch is read from the
/// members that read its segments, off the connection's reading loop, and the response goes
/// through the connection's outbound queue. False when `frame` is not such a request.
pub(super) fn next_clustered(connection: &Arc<Connection>, frame: &Frame) -> bool {
    let weft_hotrod::Request::IterationNext { id } = &frame.request else {
        return false;
    };
    let Some(node) = connection.context.cluster.clone() else {
        return false;
    };
    let id = (*id).to_owned();
    let Some(iteration) = connection.context.hotrod.iterations.get(&id, connection) else {
        return false;
    };
    let (cursor, batch, encoding, cache, client) = {
        let mut iteration = iteration.lock();
        if !iteration.clustered {
            return false;
        }
        (
            iteration.cursor.take(),
            iteration.batch,
            iteration.encoding,
            iteration.cache.clone(),
            iteration.client.clone(),
        )
    };
    let connection = Arc::clone(connection);
    let frame = frame.clone();
    tokio::spawn(async move {
        let outcome = match cursor {
            None => Err(Failure::server(format!(
                "iteration {id} is already fetching a batch; wait for it"
            ))),
            Some(mut cursor) => {
                let keep = |entry: &CacheEntry| {
                    sendable(entry, encoding.keys_only)
                        && client.as_ref().is_none_or(|client| client.wants(entry))
                };
                let batch = cursor.next_batch(&node, batch, keep).await;
                let mut iteration = iteration.lock();
                iteration.cursor = Some(cursor);
                batch
                    .map(|(entries, finished)| {
                        // The cursor's batch is empty only once every segment is read.
                        match iteration.client.as_mut() {
                            Some(client) => {
                                let read_everything = entries.is_empty();
                                (entries, client.finished(read_everything))
                            }
                            None => (entries, finished),
                        }
                    })
                    .map_err(|error| Failure::server(format!("{error:#}")))
            }
        };
        let response = outcome.and_then(|(entries, finished)| {
            let mut out = BytesMut::new();
            let now = cache.clock().now_ms();
            encode(&mut out, &frame, encoding, now, &entries, &finished).map(|()| out)
        });
        super::ops::send_later(&connection, &frame, response).await;
    });
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the BitSet byte layout both ways (bit i of byte j is segment 8j+i).
    #[test]
    fn bitsets() {
        assert_eq!(
            segments_of(&[0b0000_0101, 0b1000_0000], 256),
            vec![0, 2, 15]
        );
        assert_eq!(segments_of(&[0xff], 4), vec![0, 1, 2, 3]);
        assert_eq!(bitset_of(&[0, 2, 15]), vec![0b0000_0101, 0b1000_0000]);
        assert_eq!(bitset_of(&[]), Vec::<u8>::new());
    }
}
