//! Size limits, as memcached 1.6 applies them.

/// Longest key, in bytes, in both protocols (memcached's `KEY_MAX_LENGTH`).
pub const KEY_BYTES_MAX: usize = 250;
/// memcached's default largest item (`-I 1m`).
pub const DEFAULT_ITEM_BYTES_MAX: usize = 1 << 20;
/// Longest command line, without its `\n`, of every command but `get` and `gets`: memcached
/// closes a connection that sends more than 2048 bytes without a newline.
pub const DEFAULT_LINE_BYTES_MAX: usize = 2048;
/// Longest `get`/`gets` line. memcached lets multi-gets grow without bound; Weft bounds them
/// so that one line cannot take unbounded memory (1 MiB is over 4000 keys of 250 bytes).
pub const DEFAULT_MULTIGET_LINE_BYTES_MAX: usize = 1 << 20;
/// What memcached 1.6 adds to every item besides key, flags and data: the 48-byte item
/// header and the 8-byte CAS value.
pub const ITEM_HEADER_BYTES: usize = 56;

/// Bounds on what a client may send in one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest item, counted as memcached counts it ([`item_size`]); a larger store is
    /// refused with `SERVER_ERROR object too large for cache` (binary: `E2BIG`) and its data
    /// discarded.
    pub item_bytes_max: usize,
    /// Longest text command line ([`DEFAULT_LINE_BYTES_MAX`]).
    pub line_bytes_max: usize,
    /// Longest `get`/`gets` line ([`DEFAULT_MULTIGET_LINE_BYTES_MAX`]).
    pub multiget_line_bytes_max: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            item_bytes_max: DEFAULT_ITEM_BYTES_MAX,
            line_bytes_max: DEFAULT_LINE_BYTES_MAX,
            multiget_line_bytes_max: DEFAULT_MULTIGET_LINE_BYTES_MAX,
        }
    }
}

impl Limits {
    /// Whether an item of this key length, flags and value length fits
    /// [`item_bytes_max`](Self::item_bytes_max).
    #[must_use]
    pub fn item_fits(&self, key_bytes: usize, flags: u32, value_bytes: usize) -> bool {
        item_size(key_bytes, flags, value_bytes) <= self.item_bytes_max
    }
}

/// The size memcached 1.6 charges an item against its item-size limit: header and CAS
/// ([`ITEM_HEADER_BYTES`]), the key and its terminator, 4 bytes of flags unless they are 0,
/// and the data with its `\r\n`. With the default 1 MiB limit and a one-byte key, the
/// largest value is 1 048 516 bytes, as with the real daemon.
#[must_use]
pub fn item_size(key_bytes: usize, flags: u32, value_bytes: usize) -> usize {
    let flags_bytes = if flags == 0 { 0 } else { 4 };
    ITEM_HEADER_BYTES
        .saturating_add(key_bytes)
        .saturating_add(1)
        .saturating_add(flags_bytes)
        .saturating_add(value_bytes)
        .saturating_add(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the item rule matches the daemon's measured boundary (1 MiB, key of 1, 100, 250 bytes).
    #[test]
    fn item_rule_matches_memcached_boundary() {
        let limits = Limits::default();
        for (key, largest) in [(1, 1_048_516), (100, 1_048_417), (250, 1_048_267)] {
            assert!(limits.item_fits(key, 0, largest), "key {key}");
            assert!(!limits.item_fits(key, 0, largest + 1), "key {key}");
        }
        assert!(
            !limits.item_fits(1, 7, 1_048_516),
            "non-zero flags cost 4 bytes"
        );
    }
}
