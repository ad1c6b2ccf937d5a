//! LZF, the compression RDB strings use: Redis' `lzf_c.c` and `lzf_d.c` (liblzf 3.6 with
//! `HLOG` 16 and `VERY_FAST`), written again so that a string Weft dumps compresses to the
//! bytes redis-server's DUMP writes.
//!
//! One difference: liblzf does not clear its hash table between calls (`INIT_HTAB` 0), so a
//! slot this call has not written yet may hold an offset a previous call left there, and a
//! 3-byte sequence whose earlier occurrence was skipped inside a match can then be matched
//! against it. A fresh table never offers such a match; the output is valid LZF either way,
//! and differs from Redis' only in those rare cases.

use super::RdbError;

/// `log2` of the hash table's slots.
const HASH_BITS: u32 = 16;
/// Hash table slots.
const HASH_SLOTS: usize = 1 << HASH_BITS;
/// Longest literal run.
const LITERAL_MAX: usize = 1 << 5;
/// Farthest back-reference.
const OFFSET_MAX: usize = 1 << 13;
/// Longest back-reference (in the encoder's `len` units).
const REFERENCE_MAX: usize = (1 << 8) + (1 << 3);

/// liblzf's `IDX` for `VERY_FAST`.
fn slot(hash: u32) -> usize {
    ((hash >> (3 * 8 - HASH_BITS)).wrapping_sub(hash.wrapping_mul(5)) as usize) & (HASH_SLOTS - 1)
}

/// `lzf_compress(input, out_len)`: the compressed bytes, or `None` when they would not fit
/// in `out_len` bytes (or the input is empty), exactly when liblzf returns 0.
#[must_use]
pub fn compress(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    let in_len = input.len();
    if in_len == 0 || out_len == 0 {
        return None;
    }
    let byte = |at: usize| u32::from(input.get(at).copied().unwrap_or(0));
    let first = |at: usize| (byte(at) << 8) | byte(at + 1);
    let next = |hash: u32, at: usize| (hash << 8) | byte(at + 2);
    // Offsets from the input's start; 0 is "empty", as in liblzf (position 0 can never be
    // matched: a reference must lie after the input's first byte).
    let mut table = vec![0u32; HASH_SLOTS];
    // liblzf writes a run's length byte before it knows the run, and may step past `out_len`
    // by a few bytes before it checks: room for that.
    let mut out = vec![0u8; out_len + 8];
    let out_end = out_len;
    let mut ip = 0usize;
    let mut op = 1usize; // the first literal run's length byte is at 0
    let mut literal = 0usize;
    let mut hash = first(ip);
    while ip + 2 < in_len {
        hash = next(hash, ip);
        let index = slot(hash);
        let reference = table[index] as usize;
        table[index] = u32::try_from(ip).unwrap_or(0);
        let matched = reference > 0
            && reference < ip
            && ip - reference - 1 < OFFSET_MAX
            && input[reference + 2] == input[ip + 2]
            && input[reference] == input[ip]
            && input[reference + 1] == input[ip + 1];
        if matched {
            let offset = ip - reference - 1;
            let mut len = 2usize;
            let maxlen = (in_len - ip - len).min(REFERENCE_MAX);
            if op + 3 + 1 >= out_end && op - usize::from(literal == 0) + 3 + 1 >= out_end {
                return None;
            }
            out[op - literal - 1] = (literal as u8).wrapping_sub(1); // stop the run
            op -= usize::from(literal == 0); // no run at all: forget its length byte
            'extend: {
                if maxlen > 16 {
                    for _ in 0..16 {
                        len += 1;
                        if input[reference + len] != input[ip + len] {
                            break 'extend;
                        }
                    }
                }
                loop {
                    len += 1;
                    if !(len < maxlen && input[reference + len] == input[ip + len]) {
                        break;
                    }
                }
            }
            len -= 2; // the encoded length: octets - 2
            ip += 1;
            if len < 7 {
                out[op] = ((offset >> 8) + (len << 5)) as u8;
                op += 1;
            } else {
                out[op] = ((offset >> 8) + (7 << 5)) as u8;
                out[op + 1] = (len - 7) as u8;
                op += 2;
            }
            out[op] = offset as u8;
            op += 1;
            literal = 0;
            op += 1; // the next run's length byte
            ip += len + 1;
            if ip + 2 >= in_len {
                break;
            }
            // VERY_FAST: hash the two positions before the next one.
            ip -= 2;
            hash = first(ip);
            hash = next(hash, ip);
            table[slot(hash)] = u32::try_from(ip).unwrap_or(0);
            ip += 1;
            hash = next(hash, ip);
            table[slot(hash)] = u32::try_from(ip).unwrap_or(0);
            ip += 1;
        } else {
            if op >= out_end {
                return None;
            }
            literal += 1;
            out[op] = input[ip];
            op += 1;
            ip += 1;
            if literal == LITERAL_MAX {
                out[op - literal - 1] = (literal - 1) as u8;
                literal = 0;
                op += 1;
            }
        }
    }
    if op + 3 > out_end {
        return None;
    }
    while ip < in_len {
        literal += 1;
        out[op] = input[ip];
        op += 1;
        ip += 1;
        if literal == LITERAL_MAX {
            out[op - literal - 1] = (literal - 1) as u8;
            literal = 0;
            op += 1;
        }
    }
    out[op - literal - 1] = (literal as u8).wrapping_sub(1);
    op -= usize::from(literal == 0);
    out.truncate(op);
    Some(out)
}

/// LZF decompression into exactly `len` bytes, as Redis checks it (`lzf_decompress(…) !=
/// len` is an error). liblzf reports every error as 0 bytes written, so a declared length
/// of 0 accepts any input, as in Redis.
///
/// # Errors
/// [`RdbError::Format`] when the input is malformed or does not decompress to `len` bytes.
pub fn decompress(input: &[u8], len: usize) -> Result<Vec<u8>, RdbError> {
    if len == 0 {
        return Ok(Vec::new());
    }
    let mut out: Vec<u8> = Vec::with_capacity(len.min(input.len().saturating_mul(64)));
    let mut i = 0;
    while i < input.len() {
        let ctrl = usize::from(input[i]);
        i += 1;
        if ctrl < 32 {
            let run = ctrl + 1;
            if out.len() + run > len {
                return Err(RdbError::Format);
            }
            let literal = input.get(i..i + run).ok_or(RdbError::Format)?;
            out.extend_from_slice(literal);
            i += run;
        } else {
            let mut run = ctrl >> 5;
            if run == 7 {
                run += usize::from(*input.get(i).ok_or(RdbError::Format)?);
                i += 1;
            }
            run += 2;
            let low = usize::from(*input.get(i).ok_or(RdbError::Format)?);
            i += 1;
            let back = ((ctrl & 0x1f) << 8) + low + 1;
            if out.len() + run > len {
                return Err(RdbError::Format);
            }
            let from = out.len().checked_sub(back).ok_or(RdbError::Format)?;
            for k in 0..run {
                let byte = out[from + k];
                out.push(byte);
            }
        }
    }
    if out.len() != len {
        return Err(RdbError::Format);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves back-references decode, malformed input is refused, and a declared length of
    // 0 accepts anything as liblzf's error value does.
    #[test]
    fn decompression() {
        // "aaaaaaaaaa": one literal 'a', then a back-reference of 9 at distance 1.
        let compressed = [0x00, b'a', 0xe0, 0x00, 0x00];
        assert_eq!(decompress(&compressed, 10).expect("lzf"), b"aaaaaaaaaa");
        assert!(decompress(&[0x20, 0x05], 3).is_err());
        assert!(decompress(&[0x05, b'a'], 6).is_err());
        assert!(decompress(&[0x00, b'a'], 2).is_err());
        assert_eq!(decompress(&[0x1f], 0).expect("anything"), b"");
    }

    // Proves compression round-trips over varied inputs, refuses to grow past the room it
    // is given, and compresses runs.
    #[test]
    fn compression_round_trips() {
        let mut inputs: Vec<Vec<u8>> = vec![
            b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".to_vec(),
            b"abcabcabcabcabcabcabcabcabcabcabcabcabcabc".to_vec(),
            (0..=255u8).cycle().take(3000).collect(),
        ];
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for len in [21usize, 64, 300, 5000, 70_000] {
            let text: Vec<u8> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    b"abcde"[(state % 5) as usize]
                })
                .collect();
            inputs.push(text);
        }
        for input in inputs {
            let out = compress(&input, input.len() + 64).expect("fits");
            assert_eq!(decompress(&out, input.len()).expect("decodes"), input);
            if let Some(smaller) = compress(&input, input.len() - 4) {
                assert!(smaller.len() <= input.len() - 4);
                assert_eq!(decompress(&smaller, input.len()).expect("decodes"), input);
            }
        }
        let noise: Vec<u8> = (0..200u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        assert!(compress(&noise, noise.len() - 4).is_none());
        assert!(compress(b"", 10).is_none());
        let run = vec![b'L'; 70];
        assert!(compress(&run, 66).expect("a run compresses").len() < 10);
    }
}
