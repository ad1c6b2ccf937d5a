//! Key → segment functions.

use std::ops::Range;

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use weft_core::hash::{REDIS_SLOTS, crc16, redis_hash_tag};

/// How a cache maps keys to segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Partitioner {
    /// Infinispan's: MurmurHash3 (its variant) of the key's bytes, each segment a contiguous
    /// range of the 31-bit hash. What the official Hot Rod clients compute to route keys.
    #[default]
    HotRod,
    /// Redis Cluster's: CRC16 of the key (or of its `{hash tag}`) modulo 16384 slots, each
    /// segment a contiguous run of slots. What Redis cluster clients compute; the segment
    /// count must be a power of two up to 16384.
    RedisSlots,
}

/// A segment count a partitioner cannot use.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PartitionerError {
    /// Zero segments.
    #[error("the segment count must be at least 1")]
    NoSegments,
    /// Redis slots need a power-of-two count up to 16384.
    #[error(
        "a cache partitioned by Redis slots needs a power-of-two segment count up to 16384, not {0}"
    )]
    NotSlotAligned(u32),
}

impl Partitioner {
    /// Checks that `segments` suits this partitioner.
    ///
    /// # Errors
    /// [`PartitionerError`] when it does not.
    pub fn check(self, segments: u32) -> Result<(), PartitionerError> {
        if segments == 0 {
            return Err(PartitionerError::NoSegments);
        }
        if self == Self::RedisSlots && (!segments.is_power_of_two() || segments > REDIS_SLOTS) {
            return Err(PartitionerError::NotSlotAligned(segments));
        }
        Ok(())
    }

    /// The segment of `key` among `segments` (which [`Partitioner::check`] accepted).
    #[must_use]
    pub fn segment_of(self, key: &[u8], segments: u32) -> u32 {
        match self {
            Self::HotRod => weft_core::hash::segment_of(key, segments),
            Self::RedisSlots => weft_core::hash::slot_segment_of(key, segments),
        }
    }

    /// The Redis slots of `segment` (for CLUSTER SLOTS / SHARDS); `None` for Hot Rod's
    /// partitioner, whose segments are not slots.
    #[must_use]
    pub fn slots_of(self, segment: u32, segments: u32) -> Option<Range<u32>> {
        match self {
            Self::HotRod => None,
            Self::RedisSlots => {
                let width = REDIS_SLOTS / segments.clamp(1, REDIS_SLOTS);
                let start = segment.checked_mul(width)?;
                (start < REDIS_SLOTS).then(|| start..start + width)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves CRC16 and the slot rule against Redis' cluster specification and its examples.
    #[test]
    fn redis_slots_match_the_cluster_spec() {
        assert_eq!(crc16(b"123456789"), 0x31c3);
        let slot = |key: &[u8]| Partitioner::RedisSlots.segment_of(key, REDIS_SLOTS);
        assert_eq!(slot(b"foo"), 12_182);
        assert_eq!(slot(b"bar"), 5_061);
        assert_eq!(slot(b"{user1000}.following"), slot(b"{user1000}.followers"));
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
        // Empty tags and unclosed braces hash the whole key.
        assert_eq!(redis_hash_tag(b"foo{}{bar}"), b"foo{}{bar}");
        assert_eq!(redis_hash_tag(b"foo{{bar}}zap"), b"{bar");
        assert_eq!(redis_hash_tag(b"foo{bar}{zap}"), b"bar");
        assert_eq!(redis_hash_tag(b"{"), b"{");
        // Fewer segments group consecutive slots.
        assert_eq!(Partitioner::RedisSlots.segment_of(b"foo", 256), 12_182 / 64);
        assert_eq!(
            Partitioner::RedisSlots.slots_of(190, 256),
            Some(12_160..12_224)
        );
        assert_eq!(Partitioner::RedisSlots.slots_of(256, 256), None);
        assert_eq!(Partitioner::HotRod.slots_of(0, 256), None);
    }

    // Proves the Hot Rod partitioner is Infinispan's (proto "key1" → 115 of 256).
    #[test]
    fn hot_rod_segments_match_infinispan() {
        let key1 = [0x4a, 0x04, 0x6b, 0x65, 0x79, 0x31];
        assert_eq!(Partitioner::HotRod.segment_of(&key1, 256), 115);
        assert_eq!(Partitioner::HotRod.segment_of(&key1, 8), 3);
    }

    #[test]
    fn segment_counts_are_checked() {
        assert_eq!(
            Partitioner::HotRod.check(0),
            Err(PartitionerError::NoSegments)
        );
        assert!(Partitioner::HotRod.check(1000).is_ok());
        assert!(Partitioner::RedisSlots.check(256).is_ok());
        assert!(Partitioner::RedisSlots.check(16_384).is_ok());
        assert_eq!(
            Partitioner::RedisSlots.check(1000),
            Err(PartitionerError::NotSlotAligned(1000))
        );
        assert_eq!(
            Partitioner::RedisSlots.check(32_768),
            Err(PartitionerError::NotSlotAligned(32_768))
        );
    }
}
