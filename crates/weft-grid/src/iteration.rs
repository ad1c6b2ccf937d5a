//! Cluster-wide iteration: a cursor over chosen segments of a clustered cache that reads each
//! segment from the member that reads it now, in pages ordered by key, and returns every entry
//! exactly once even while segments move between members.
//!
//! Exactly once comes from the page cursor being a key, not a position: a page is "the keys of
//! segment `s` after `k`", which every copy of the segment answers the same way. When the
//! segment's reader changes between two pages (a join, a leave, a crash), the next page is
//! asked of the new reader and resumes after the same key — nothing is skipped, nothing
//! repeated. Entries written or removed while the iteration runs may or may not be seen, as
//! in any weakly consistent iterator (Infinispan's included).

use std::collections::VecDeque;
use std::time::Duration;

use weft_cluster::wire::{Request, Response};
use weft_core::{Cache, CacheEntry};

use super::node::Node;
use super::routing::Route;

/// How long a page may keep failing (its reader unreachable, or no reader agreed yet)
/// before the iteration gives up.
const PAGE_RETRY_FOR: Duration = Duration::from_secs(15);
const PAGE_RETRY_PAUSE: Duration = Duration::from_millis(100);
/// A page is at least this share of its segment, so that reading a segment costs a bounded
/// number of passes over it whatever batch size the client asks for.
pub(crate) const PAGE_SHARE_OF_SEGMENT: usize = 16;
/// And at most this many entries.
pub const PAGE_MAX: usize = 100_000;

/// The segment being read.
struct Current {
    segment: u32,
    /// The last key received.
    after: Option<Vec<u8>>,
    /// Whether the last page of the segment was received.
    fetched: bool,
}

/// A pull-based, batched, segment-aware cursor over a clustered cache.
pub struct SegmentCursor {
    cache: Cache,
    pending: VecDeque<u32>,
    current: Option<Current>,
    /// Entries received and not yet returned, all of the current segment.
    buffer: VecDeque<CacheEntry>,
}

impl std::fmt::Debug for SegmentCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SegmentCursor")
            .field("cache", &self.cache.name())
            .field("pending", &self.pending.len())
            .field("segment", &self.current.as_ref().map(|c| c.segment))
            .field("buffered", &self.buffer.len())
            .finish()
    }
}

impl SegmentCursor {
    /// A cursor over `segments` of `cache`, in the order given (duplicates and segments past
    /// the last are left out).
    #[must_use]
    pub fn new(cache: Cache, segments: impl IntoIterator<Item = u32>) -> Self {
        let count = cache.segment_count();
        let mut seen = std::collections::HashSet::new();
        let pending = segments
            .into_iter()
            .filter(|&s| s < count && seen.insert(s))
            .collect();
        Self {
            cache,
            pending,
            current: None,
            buffer: VecDeque::new(),
        }
    }

    /// The next batch: up to `max` entries that `keep` accepts, and the segments finished
    /// with it (every entry of theirs returned). An empty batch with no segment left means
    /// the iteration is over.
    ///
    /// # Errors
    /// When a segment's reader could not be reached for a while, or refused (a DEGRADED
    /// cache that denies reads). The cursor stays where it was: the call can be repeated.
    pub async fn next_batch(
        &mut self,
        node: &Node,
        max: usize,
        keep: impl Fn(&CacheEntry) -> bool,
    ) -> crate::Result<(Vec<CacheEntry>, Vec<u32>)> {
        let max = max.max(1);
        let mut entries = Vec::new();
        let mut finished = Vec::new();
        loop {
            while entries.len() < max {
                let Some(entry) = self.buffer.pop_front() else {
                    break;
                };
                if keep(&entry) {
                    entries.push(entry);
                }
            }
            if let Some(current) = &self.current
                && current.fetched
                && self.buffer.is_empty()
            {
                finished.push(current.segment);
                self.current = None;
            }
            if entries.len() >= max {
                break;
            }
            let current = match &mut self.current {
                Some(current) => current,
                None => match self.pending.pop_front() {
                    Some(segment) => self.current.insert(Current {
                        segment,
                        after: None,
                        fetched: false,
                    }),
                    None => break,
                },
            };
            let (page, last) = node
                .segment_page(
                    &self.cache,
                    current.segment,
                    current.after.clone(),
                    max - entries.len(),
                )
                .await?;
            if let Some(entry) = page.last() {
                current.after = Some(entry.key().to_vec());
            }
            current.fetched = last;
            self.buffer.extend(page);
        }
        Ok((entries, finished))
    }
}

impl Node {
    /// A page of `segment` of `cache` in key order (see [`Cache::segment_page`]), from the
    /// member that reads the segment now: here, or asked over the network. A reader that
    /// is unreachable, or no longer the reader, is asked again after the topology moves on.
    ///
    /// # Errors
    /// When no reader answered for `PAGE_RETRY_FOR`, or the reader refused.
    pub async fn segment_page(
        &self,
        cache: &Cache,
        segment: u32,
        after: Option<Vec<u8>>,
        limit: usize,
    ) -> crate::Result<(Vec<CacheEntry>, bool)> {
        let started = tokio::time::Instant::now();
        let limit = u32::try_from(limit).unwrap_or(u32::MAX);
        loop {
            let failure = match self.routing().read_route(cache.name(), segment) {
                Route::Local => {
                    let limit = page_limit(cache, segment, limit);
                    return Ok(cache.segment_page(segment, after.as_deref(), limit)?);
                }
                Route::Remote(member, address) => {
                    let request = Request::Page {
                        cache: cache.name().to_owned(),
                        segment,
                        after: after.clone(),
                        limit,
                    };
                    match self.call(address, request).await {
                        Ok(Response::Entries { entries, done }) => {
                            let entries = entries
                                .iter()
                                .map(weft_cluster::wire::EntryImage::to_entry)
                                .collect::<Result<Vec<_>, _>>()?;
                            return Ok((entries, done));
                        }
                        Ok(Response::Error(reason)) => crate::error::bail!("{member}: {reason}"),
                        Ok(other) => format!("{member} answered {other:?}"),
                        Err(error) => format!("{member}: {error}"),
                    }
                }
            };
            if started.elapsed() >= PAGE_RETRY_FOR {
                crate::error::bail!("segment {segment} of `{}`: {failure}", cache.name());
            }
            tokio::time::sleep(PAGE_RETRY_PAUSE).await;
        }
    }
}

/// How many entries a page of `segment` holds: what was asked, but at least a fixed share
/// of the segment, and at most [`PAGE_MAX`].
pub(crate) fn page_limit(cache: &Cache, segment: u32, asked: u32) -> usize {
    let share = cache.segment_size(segment) / PAGE_SHARE_OF_SEGMENT;
    (asked as usize).max(share).clamp(1, PAGE_MAX)
}
