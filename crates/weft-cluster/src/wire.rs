//! What nodes say to each other over their TCP connections, and how it is framed.
//!
//! A frame is `length (u32 BE) | body`, the body a postcard-encoded [`Envelope`]: a request
//! with the id its response will carry, or that response. Entries travel as
//! [`EntryImage`]s, which keep everything a node needs to hold the same entry: version,
//! expiration, last use, client flags, or a data structure's encoding.

use serde::{Deserialize, Serialize};
use thiserror::Error;
use weft_core::entry::StoredExpiration;
use weft_core::{CacheEntry, Payload, Structure, StructureCell};

use crate::member::MemberId;
use crate::state::NodeRecord;

/// The largest frame a node can be configured to accept: room for one entry of the largest
/// key and value a cache takes (512 MiB each) and its framing. A node's own limit
/// (`cluster-frame-bytes-max`) may be lower; batches of replicated changes and chunks of
/// segments are cut well below it ([`BATCH_BYTES_MAX`]), so only a single huge entry needs
/// a frame this large.
pub const FRAME_BYTES_MAX: usize = (1 << 30) + (16 << 20);

/// How many bytes of entries a sender puts in one batch of replicated changes or one chunk
/// of a segment before it starts another (one entry is always sent, whatever its size).
pub const BATCH_BYTES_MAX: usize = 4 << 20;

/// Bytes of the length prefix.
pub const FRAME_HEADER_BYTES: usize = 4;

/// One frame's body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Envelope {
    /// A request; the response carries the same id.
    Request(u64, Request),
    /// The response to request `id`.
    Response(u64, Response),
}

/// Which Raft message a [`Request::Raft`] carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RaftRpc {
    /// Log replication and heartbeats.
    AppendEntries,
    /// Elections.
    Vote,
    /// A snapshot for a member far behind.
    InstallSnapshot,
}

/// Something one node asks another.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Request {
    /// Who are you, and do you belong to a cluster already?
    Hello(NodeRecord),
    /// A Raft message for consensus member `to` (a process restarted on the same address is
    /// another member and refuses it), JSON-encoded (openraft's types).
    Raft(RaftRpc, u64, Vec<u8>),
    /// Asks the consensus leader to propose a metadata command (JSON-encoded).
    Propose(Vec<u8>),
    /// Asks the consensus leader to let a node go: out of the members (its segments move
    /// to the others) and out of the consensus group (which keeps its quorum).
    Leave {
        /// The node's name.
        name: String,
        /// Its consensus id.
        raft_id: u64,
    },
    /// Changes the primary owner applied, for the receiver to apply in order, each with its
    /// sequence number in the sender's stream to this receiver. The receiver applies a
    /// stream's changes only in order: once it refuses one, it refuses every later batch of
    /// the stream until the sender starts again from the first change not acknowledged
    /// (`restart`), so that an acknowledged batch never covers a refused change.
    Replicate {
        /// The sender's stream (a new one after the sender started afresh).
        stream: u64,
        /// This batch starts a resend of everything not acknowledged.
        restart: bool,
        /// The changes and their sequence numbers, increasing.
        replicas: Vec<(u64, std::sync::Arc<Replica>)>,
    },
    /// A keyed operation for this node to run as the key's owner (its primary for a
    /// write). Answered by `Outcome`, or `NotOwner` when this member does not own the key
    /// (the sender retries once it installed a newer topology).
    Execute {
        /// The cache.
        cache: String,
        /// The operation.
        operation: weft_core::operation::Operation,
        /// The sender could not reach the key's primary: a read is answered by any owner
        /// of the key (every acknowledged write is on each of them).
        owner_down: bool,
    },
    /// The caches whose listeners on the sender want the events of writes other members
    /// apply, and which events: all, or those passing named filters the receiver runs
    /// before relaying (all of them: it replaces what the sender said before). Answered by
    /// `Ok`.
    Interest {
        /// The caches, and what the sender's listeners want of each.
        caches: Vec<(String, weft_core::RelayInterest)>,
    },
    /// Events of writes the sender applied as the keys' primary, in order, for the
    /// receiver's listeners. Answered by `Ok`.
    Events {
        /// The cache.
        cache: String,
        /// The events.
        events: Vec<RelayedEvent>,
    },
    /// Messages the sender broadcast on a topic, in order, for the receiver's handler of it.
    /// Answered by `Ok`.
    Messages {
        /// The topic.
        topic: String,
        /// The messages.
        payloads: Vec<Vec<u8>>,
    },
    /// The entries of one segment, for state transfer to a new owner in rebalance
    /// `rebalance`, in key order after `after`: answered by the segment's primary once it
    /// installed that rebalance (`placement::FetchAnswer`), `NotOwner` by any other member.
    Fetch {
        /// The cache.
        cache: String,
        /// The segment.
        segment: u32,
        /// The asker's rebalance.
        rebalance: u32,
        /// The last key of the previous page, `None` for the first.
        after: Option<Vec<u8>>,
        /// At most this many entries.
        limit: u32,
    },
    /// How many entries of the cache this node holds in the given segments.
    Size {
        /// The cache.
        cache: String,
        /// The segments.
        segments: Vec<u32>,
    },
    /// The topology id of the cache this node installed (a node back from a partition
    /// compares it with its own to know whether it missed changes).
    TopologyId {
        /// The cache.
        cache: String,
    },
    /// Remove `key` as its primary owner (a merge removing a conflicting entry).
    Remove {
        /// The cache.
        cache: String,
        /// The key, as stored.
        key: Vec<u8>,
    },
    /// Remove every entry of the cache this node holds.
    Clear {
        /// The cache.
        cache: String,
    },
    /// The keys of the given segments this node holds (for KEYS and SCAN).
    Keys {
        /// The cache.
        cache: String,
        /// The segments.
        segments: Vec<u32>,
    },
    /// Write these entries as their keys' primary (a multi-key write whose keys another
    /// member received). Answered by `Ok`, or `NotOwner` when this member is not the
    /// primary of them all.
    PutEntries {
        /// The cache.
        cache: String,
        /// Keys and values, as stored.
        entries: Vec<(Vec<u8>, Vec<u8>)>,
        /// Their lifespan.
        lifespan: WireLifetime,
        /// Their max idle time.
        max_idle: WireLifetime,
        /// Client flags stored with every value (0 = none).
        flags: u32,
        /// Raise no listener events.
        skip_listeners: bool,
    },
    /// Read these keys as their primary (a multi-key read whose keys another member
    /// received). Answered by `Entries` (those found), or `NotOwner`.
    GetEntries {
        /// The cache.
        cache: String,
        /// The keys, as stored.
        keys: Vec<Vec<u8>>,
    },
    /// Merge entries another node held into the cluster, as their keys' primary (a node
    /// merging what it stored into a cluster formed anew, or what it held through a
    /// partition). Answered by `Ok`, or `NotOwner` by a member that is not the primary of
    /// them all.
    Reconcile {
        /// The cache.
        cache: String,
        /// The entries, all of one segment.
        segment: u32,
        /// The entries.
        entries: Vec<EntryImage>,
        /// How each entry is merged.
        how: MergeHow,
    },
    /// A page of one segment's entries in key order, from the member that reads it now
    /// (for iteration): the keys after `after`, at least `limit` of them when there are
    /// that many. Answered by `Entries`, or `NotOwner` by a member that does not read it.
    Page {
        /// The cache.
        cache: String,
        /// The segment.
        segment: u32,
        /// The last key of the previous page, `None` for the first.
        after: Option<Vec<u8>>,
        /// How many entries the asker wants.
        limit: u32,
    },
}

/// The answer to a [`Request`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Response {
    /// Answers [`Request::Hello`].
    Hello {
        /// The node.
        node: NodeRecord,
        /// Whether it belongs to an initialized consensus group.
        initialized: bool,
    },
    /// A Raft response, JSON-encoded.
    Raft(Vec<u8>),
    /// Done.
    Ok,
    /// The replicated changes were applied.
    Applied,
    /// What an executed operation answered.
    Outcome(crate::operation::Outcome),
    /// The owner refused the operation.
    Refused(crate::operation::Refusal),
    /// A chunk of a segment; `done` when it was the last.
    Entries {
        /// The entries.
        entries: Vec<EntryImage>,
        /// No entries follow.
        done: bool,
    },
    /// A count.
    Count(u64),
    /// Keys.
    Keys(Vec<Vec<u8>>),
    /// The request failed; the reason.
    Error(String),
    /// This node is not (or no longer) the owner the request needs: retry after a topology
    /// update.
    NotOwner {
        /// Who this node thinks is.
        owner: Option<MemberId>,
    },
}

/// How the primary merges an entry another node held (see [`Request::Reconcile`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MergeHow {
    /// Keep it unless the key holds the same or a newer version (a cluster formed anew from
    /// stores; the `NONE` merge policy).
    Newest,
    /// Keep it only where the key holds nothing (`PREFERRED_NON_NULL`).
    IfAbsent,
    /// Remove the key everywhere where it holds something else, or nothing (`REMOVE_ALL`).
    RemoveIfDifferent,
}

/// The event of one write, as it travels to a member whose listeners want it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelayedEvent {
    /// What happened: 0 created, 1 modified, 2 removed, 3 expired.
    pub kind: u8,
    /// The entry the write replaced or removed.
    pub old: Option<EntryImage>,
    /// The entry the write stored.
    pub new: Option<EntryImage>,
}

/// A lifespan or max idle time, as a write asks for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireLifetime {
    /// The cache's default.
    Default,
    /// Never expires.
    Never,
    /// After this many milliseconds.
    AfterMs(u64),
    /// What the overwritten entry had.
    Keep,
}

/// One change a primary owner applied to a key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Replica {
    /// The cache (shared by the changes a primary makes to it).
    pub cache: std::sync::Arc<str>,
    /// The key's segment.
    pub segment: u32,
    /// The key.
    #[serde(with = "weft_core::bytes_serde")]
    pub key: Vec<u8>,
    /// The entry the key now holds, or `None` when it was removed.
    pub entry: Option<EntryImage>,
}

/// What an entry's value bytes hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Form {
    /// Bytes.
    Bytes,
    /// Bytes edited in place (Redis' `raw` encoding).
    EditedBytes,
    /// A data structure's encoding.
    Structure,
}

/// An entry as it travels between nodes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryImage {
    /// The key.
    #[serde(with = "weft_core::bytes_serde")]
    pub key: Vec<u8>,
    /// What `value` holds.
    pub form: Form,
    /// The value, or the structure's encoding.
    #[serde(with = "weft_core::bytes_serde")]
    pub value: Vec<u8>,
    /// Client flags (memcached's).
    pub flags: u32,
    /// The version its primary owner gave it.
    pub version: u64,
    /// When it was written, if mortal (ms since the epoch).
    pub created_ms: Option<u64>,
    /// Lifespan.
    pub lifespan_ms: Option<u64>,
    /// Maximum idle time.
    pub max_idle_ms: Option<u64>,
    /// Last use (ms since the epoch), for max-idle.
    pub last_used_ms: u64,
}

/// Bytes that are not an entry.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("malformed entry: {0}")]
pub struct EntryError(&'static str);

impl EntryImage {
    /// The image of `entry`.
    #[must_use]
    pub fn of(entry: &CacheEntry) -> Self {
        let expiration = entry.expiration();
        let (form, value, flags) = match entry.payload() {
            Payload::Bytes(value, flags) => (Form::Bytes, value.to_vec(), flags),
            Payload::EditedBytes(value, flags) => (Form::EditedBytes, value.to_vec(), flags),
            Payload::Structure(cell, _) => (Form::Structure, cell.lock().encode(), 0),
        };
        Self {
            key: entry.key().to_vec(),
            form,
            value,
            flags,
            version: entry.version(),
            created_ms: expiration.created_ms,
            lifespan_ms: expiration.lifespan_ms,
            max_idle_ms: expiration.max_idle_ms,
            last_used_ms: entry.last_used_ms().unwrap_or(0),
        }
    }

    /// The entry this image holds.
    ///
    /// # Errors
    /// A structure encoding that does not decode.
    pub fn to_entry(&self) -> Result<CacheEntry, EntryError> {
        let expiration = StoredExpiration {
            created_ms: self.created_ms,
            lifespan_ms: self.lifespan_ms,
            max_idle_ms: self.max_idle_ms,
        };
        let cell;
        let payload = match self.form {
            Form::Bytes => Payload::Bytes(&self.value, self.flags),
            Form::EditedBytes => Payload::EditedBytes(&self.value, self.flags),
            Form::Structure => {
                let structure =
                    Structure::decode(&self.value).map_err(|_| EntryError("structure encoding"))?;
                let charge = structure.heap_bytes();
                cell = StructureCell::new(structure);
                Payload::Structure(&cell, charge)
            }
        };
        Ok(CacheEntry::restored_payload(
            &self.key,
            payload,
            expiration,
            self.last_used_ms,
            self.version,
        ))
    }
}

/// Why a frame could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FrameError {
    /// The length prefix exceeds [`FRAME_BYTES_MAX`].
    #[error("frame of {0} bytes exceeds the limit")]
    TooLarge(usize),
    /// The body is not an envelope.
    #[error("malformed frame: {0}")]
    Malformed(String),
}

/// Appends the frame of `envelope` to `out`.
pub fn encode(envelope: &Envelope, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&[0; FRAME_HEADER_BYTES]);
    // Writing into a Vec cannot fail; a serializer error would mean a bug in the types.
    if let Ok(body) = postcard::to_extend(envelope, std::mem::take(out)) {
        *out = body;
    }
    let len = u32::try_from(out.len() - start - FRAME_HEADER_BYTES).unwrap_or(u32::MAX);
    out[start..start + FRAME_HEADER_BYTES].copy_from_slice(&len.to_be_bytes());
}

/// The body length a frame announces, once its header is in `buffer`.
///
/// # Errors
/// [`FrameError::TooLarge`] past [`FRAME_BYTES_MAX`].
pub fn body_len(buffer: &[u8]) -> Result<Option<usize>, FrameError> {
    body_len_within(buffer, FRAME_BYTES_MAX)
}

/// The body length a frame announces, once its header is in `buffer`, refusing lengths
/// past `limit` (a node's configured frame limit, at most [`FRAME_BYTES_MAX`]).
///
/// # Errors
/// [`FrameError::TooLarge`] past `limit`.
pub fn body_len_within(buffer: &[u8], limit: usize) -> Result<Option<usize>, FrameError> {
    let Some(header) = buffer.first_chunk::<FRAME_HEADER_BYTES>() else {
        return Ok(None);
    };
    let len = u32::from_be_bytes(*header) as usize;
    if len > limit.min(FRAME_BYTES_MAX) {
        return Err(FrameError::TooLarge(len));
    }
    Ok(Some(len))
}

/// Bytes an entry image takes in a frame, roughly (for cutting batches by size).
#[must_use]
pub fn image_bytes(image: &EntryImage) -> usize {
    image.key.len() + image.value.len() + 64
}

/// Decodes one frame's body.
///
/// # Errors
/// [`FrameError::Malformed`] when it is not an envelope.
pub fn decode(body: &[u8]) -> Result<Envelope, FrameError> {
    postcard::from_bytes(body).map_err(|error| FrameError::Malformed(error.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a frame reads back as what was written, and bad frames are refused.
    #[test]
    fn frames_round_trip_and_bad_ones_are_refused() {
        let envelope = Envelope::Request(
            7,
            Request::Execute {
                cache: "c".into(),
                operation: weft_core::operation::Operation::Put {
                    key: b"k".to_vec(),
                    value: b"v".to_vec(),
                    spec: weft_core::operation::WriteSpec::default(),
                },
                owner_down: false,
            },
        );
        let mut out = Vec::new();
        encode(&envelope, &mut out);
        let len = body_len(&out).ok().flatten().unwrap_or(0);
        assert_eq!(len + FRAME_HEADER_BYTES, out.len());
        assert_eq!(decode(&out[FRAME_HEADER_BYTES..]), Ok(envelope));
        assert!(decode(&[0xff, 0xff, 0xff]).is_err());
        assert!(body_len(&[0xff, 0xff, 0xff, 0xff]).is_err());
        assert_eq!(body_len(&[0, 0]), Ok(None));
    }

    // Proves an entry keeps its version, expiration, flags and structure across the wire.
    #[test]
    fn entries_keep_what_they_hold() {
        let expiration = StoredExpiration {
            created_ms: Some(1_000),
            lifespan_ms: Some(5_000),
            max_idle_ms: None,
        };
        let entry = CacheEntry::restored_payload(
            b"key",
            Payload::Bytes(b"value", 7),
            expiration,
            1_500,
            42,
        );
        let image = EntryImage::of(&entry);
        let back = image.to_entry().ok();
        assert!(back.as_ref().is_some_and(|back| back.key() == b"key"
            && back.value() == b"value"
            && back.user_flags() == 7
            && back.version() == 42
            && back.expiration() == expiration));
        let bad = EntryImage {
            form: Form::Structure,
            value: vec![0xff],
            ..image
        };
        assert!(bad.to_entry().is_err());
    }

    // Proves byte fields written as bytes are the very bytes serde's sequence of numbers
    // makes in postcard: members built before and after the change read each other.
    #[test]
    fn byte_fields_keep_their_encoding() {
        #[derive(Debug, PartialEq, Serialize, Deserialize)]
        struct Before {
            cache: String,
            segment: u32,
            key: Vec<u8>,
            entry: Option<EntryImageBefore>,
        }
        #[derive(Debug, PartialEq, Serialize, Deserialize)]
        struct EntryImageBefore {
            key: Vec<u8>,
            form: Form,
            value: Vec<u8>,
            flags: u32,
            version: u64,
            created_ms: Option<u64>,
            lifespan_ms: Option<u64>,
            max_idle_ms: Option<u64>,
            last_used_ms: u64,
        }
        let key: Vec<u8> = (0..=255).collect();
        let value = vec![0xab; 300];
        let now = Replica {
            cache: "c".into(),
            segment: 9,
            key: key.clone(),
            entry: Some(EntryImage {
                key: key.clone(),
                form: Form::Bytes,
                value: value.clone(),
                flags: 3,
                version: 77,
                created_ms: None,
                lifespan_ms: Some(5),
                max_idle_ms: None,
                last_used_ms: 1,
            }),
        };
        let before = Before {
            cache: "c".into(),
            segment: 9,
            key: key.clone(),
            entry: Some(EntryImageBefore {
                key,
                form: Form::Bytes,
                value,
                flags: 3,
                version: 77,
                created_ms: None,
                lifespan_ms: Some(5),
                max_idle_ms: None,
                last_used_ms: 1,
            }),
        };
        let written = postcard::to_allocvec(&now).unwrap_or_default();
        assert_eq!(written, postcard::to_allocvec(&before).unwrap_or_default());
        assert_eq!(postcard::from_bytes::<Replica>(&written).ok(), Some(now));
    }
}
