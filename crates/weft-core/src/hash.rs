//! Key → segment mapping, identical to Infinispan's so that Hot Rod clients and Weft agree on
//! which segment (and later which owner) holds a key.
//!
//! Infinispan hashes keys with an early "x64_128 with evolving constants" draft of MurmurHash3,
//! not the final public algorithm, and no crate implements that variant; hence this port. The
//! tail bytes are sign-extended before mixing, a Java quirk that changes the result for bytes
//! ≥ 0x80. See `docs/protocols.md` and the test vectors below, taken from the Java library.

/// The seed Infinispan uses for `MurmurHash3.hash(byte[])`.
pub const MURMUR3_SEED: u64 = 9001;

/// Infinispan's 32-bit MurmurHash3 of `bytes` (the top half of `h1`).
#[must_use]
pub fn murmur3_hash32(bytes: &[u8]) -> i32 {
    (murmur3_h1(bytes, MURMUR3_SEED) >> 32) as i32
}

fn fmix(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

struct State {
    h1: u64,
    h2: u64,
    c1: u64,
    c2: u64,
}

impl State {
    fn bmix(&mut self, mut k1: u64, mut k2: u64) {
        k1 = k1.wrapping_mul(self.c1);
        k1 = k1.rotate_left(23);
        k1 = k1.wrapping_mul(self.c2);
        self.h1 ^= k1;
        self.h1 = self.h1.wrapping_add(self.h2);

        self.h2 = self.h2.rotate_left(41);

        k2 = k2.wrapping_mul(self.c2);
        k2 = k2.rotate_left(23);
        k2 = k2.wrapping_mul(self.c1);
        self.h2 ^= k2;
        self.h2 = self.h2.wrapping_add(self.h1);

        self.h1 = self.h1.wrapping_mul(3).wrapping_add(0x52dc_e729);
        self.h2 = self.h2.wrapping_mul(3).wrapping_add(0x3849_5ab5);

        self.c1 = self.c1.wrapping_mul(5).wrapping_add(0x7b7d_159c);
        self.c2 = self.c2.wrapping_mul(5).wrapping_add(0x6bce_6396);
    }
}

fn murmur3_h1(bytes: &[u8], seed: u64) -> u64 {
    let mut state = State {
        h1: 0x9368_e53c_2f6a_f274 ^ seed,
        h2: 0x586d_cd20_8f7c_d3fd ^ seed,
        c1: 0x87c3_7b91_1142_53d5,
        c2: 0x4cf5_ad43_2745_937f,
    };
    let mut blocks = bytes.chunks_exact(16);
    for block in blocks.by_ref() {
        let (low, high) = block.split_at(8);
        let mut k1 = [0u8; 8];
        let mut k2 = [0u8; 8];
        k1.copy_from_slice(low);
        k2.copy_from_slice(high);
        state.bmix(u64::from_le_bytes(k1), u64::from_le_bytes(k2));
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        let mut k1 = 0u64;
        let mut k2 = 0u64;
        for (j, &byte) in tail.iter().enumerate() {
            // Java bytes are signed: the shift operates on the sign-extended value.
            let extended = (byte as i8) as i64 as u64;
            if j >= 8 {
                k2 ^= extended << (8 * (j % 8));
            } else {
                k1 ^= extended << (8 * j);
            }
        }
        state.bmix(k1, k2);
    }
    state.h2 ^= bytes.len() as u64;
    state.h1 = state.h1.wrapping_add(state.h2);
    state.h2 = state.h2.wrapping_add(state.h1);
    state.h1 = fmix(state.h1);
    state.h2 = fmix(state.h2);
    state.h1.wrapping_add(state.h2)
}

/// Width of one segment's slice of the 31-bit normalized hash space (Infinispan's
/// `Util.getSegmentSize`): `ceil(2^31 / segment_count)`, saturated for one segment.
#[must_use]
pub fn segment_width(segment_count: u32) -> u32 {
    debug_assert!(
        segment_count > 0,
        "segment count is validated by the configuration"
    );
    let count = u64::from(segment_count.max(1));
    let width = (1u64 << 31).div_ceil(count);
    u32::try_from(width)
        .unwrap_or(i32::MAX as u32)
        .min(i32::MAX as u32)
}

/// The segment (0-based) of a key's bytes, as an Infinispan `HashFunctionPartitioner` with
/// MurmurHash3 computes it. The division (not a modulus) keeps each segment a contiguous
/// hash range, which is what the Hot Rod topology describes to clients.
#[must_use]
pub fn segment_of(key: &[u8], segment_count: u32) -> u32 {
    let normalized = (murmur3_hash32(key) as u32) & 0x7fff_ffff;
    let segment = normalized / segment_width(segment_count);
    // With a saturated width the quotient can reach the count only for one segment.
    segment.min(segment_count.saturating_sub(1))
}

/// Redis Cluster's hash slots.
pub const REDIS_SLOTS: u32 = 16_384;

/// The part of a key Redis Cluster hashes: the bytes between the first `{` and the first
/// `}` after it, when that is not empty; otherwise the whole key.
#[must_use]
pub fn redis_hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{')
        && let Some(len) = key[open + 1..].iter().position(|&b| b == b'}')
        && len > 0
    {
        return &key[open + 1..open + 1 + len];
    }
    key
}

/// CRC-16/XMODEM (polynomial 0x1021, initial value 0, no reflection), as Redis Cluster uses.
#[must_use]
pub fn crc16(bytes: &[u8]) -> u16 {
    bytes.iter().fold(0u16, |crc, &byte| {
        (crc << 8) ^ CRC16_TABLE[usize::from((crc >> 8) as u8 ^ byte)]
    })
}

const CRC16_TABLE: [u16; 256] = {
    let mut table = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
            bit += 1;
        }
        table[i] = crc;
        i += 1;
    }
    table
};

/// Redis Cluster's slot of `key`: CRC16 of its hash tag, modulo 16384.
#[must_use]
pub fn redis_slot(key: &[u8]) -> u32 {
    u32::from(crc16(redis_hash_tag(key))) % REDIS_SLOTS
}

/// The segment of `key` among `segment_count` when segments are runs of Redis slots
/// (`segment_count` a power of two up to 16384).
#[must_use]
pub fn slot_segment_of(key: &[u8], segment_count: u32) -> u32 {
    redis_slot(key) / (REDIS_SLOTS / segment_count.clamp(1, REDIS_SLOTS))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhex(text: &str) -> Vec<u8> {
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap_or_default())
            .collect()
    }

    // Proves the port reproduces every vector computed by Infinispan's own Java MurmurHash3.
    #[test]
    fn murmur3_matches_java_vectors() {
        let vectors: [(&str, i32); 11] = [
            ("", 89_125_410),
            ("61", -1_119_243_492),
            ("616263", 1_809_745_788),
            ("6b657931", -1_758_694_083),
            ("30313233343536373839616263646566", 26_898_387),
            ("3031323334353637383961626364656658", 166_285_569),
            ("c3bfc3be", -309_424_512),
            ("80ff7f900102030405060708090a0b0c0d0efe", 1_865_355_805),
            ("4a046b657931", -1_178_833_119),
            ("5203010203", -1_445_666_372),
            ("282a", 1_100_404_995),
        ];
        for (input, expected) in vectors {
            assert_eq!(murmur3_hash32(&unhex(input)), expected, "input {input}");
        }
    }

    // Proves segment assignment matches the segments the Java client computes.
    #[test]
    fn segment_matches_java_client() {
        assert_eq!(segment_width(256), 8_388_608);
        assert_eq!(segment_width(1), i32::MAX as u32);
        assert_eq!(segment_of(&unhex("4a046b657931"), 256), 115);
        assert_eq!(segment_of(&unhex("4a046b657931"), 8), 3);
        assert_eq!(segment_of(&unhex("282a"), 256), 131);
        assert_eq!(segment_of(b"anything", 1), 0);
    }

    // Proves every key lands inside the segment range for awkward segment counts.
    #[test]
    fn segment_always_in_range() {
        for count in [1u32, 2, 3, 7, 255, 256, 1000, 65_536] {
            for i in 0u32..2000 {
                let key = i.to_le_bytes();
                assert!(segment_of(&key, count) < count);
            }
        }
    }
}
