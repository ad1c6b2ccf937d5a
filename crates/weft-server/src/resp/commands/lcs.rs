//! LCS: the longest common subsequence of two strings, as Redis 7.0's `lcsCommand` computes
//! it — the classic dynamic-programming table, then a walk back from its end that prefers
//! stepping along the first string on ties, so the subsequence and the ranges IDX reports
//! are the ones Redis reports.
//!
//! The table takes 4 bytes per pair of positions; as in Redis it may not exceed
//! `proto-max-bulk-len`, and an allocation that fails is an error reply, not an abort.

use bytes::Bytes;

use super::strings::cache_error;
use super::{errors, is};
use crate::resp::{Reply, Session};

/// `LCS key1 key2 [LEN] [IDX] [MINMATCHLEN min-match-len] [WITHMATCHLEN]`
pub fn lcs(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    // Keys first, as Redis reads them before the options.
    let mut strings = Vec::with_capacity(2);
    for key in &args[1..3] {
        match session.cache.get_entry(key) {
            Ok(None) => strings.push(Bytes::new()),
            Ok(Some(entry)) if entry.structure().is_none() => strings.push(entry.value_bytes()),
            Ok(Some(_)) => {
                return reply.error("ERR The specified keys must contain string values");
            }
            Err(error) => return cache_error(reply, &error),
        }
    }
    let (mut get_len, mut get_idx, mut with_match_len) = (false, false, false);
    let mut min_match_len: i64 = 0;
    let mut j = 3;
    while j < args.len() {
        let option = &args[j];
        let more = j + 1 < args.len();
        if is(option, "IDX") {
            get_idx = true;
        } else if is(option, "LEN") {
            get_len = true;
        } else if is(option, "WITHMATCHLEN") {
            with_match_len = true;
        } else if is(option, "MINMATCHLEN") && more {
            let Some(value) = weft_resp::parse_i64_strict(&args[j + 1]) else {
                return reply.error(errors::NOT_INTEGER);
            };
            min_match_len = value.max(0);
            j += 1;
        } else {
            return reply.error(errors::SYNTAX);
        }
        j += 1;
    }
    if get_len && get_idx {
        return reply.error("ERR If you want both the length and indexes, please just use IDX.");
    }
    let (a, b) = (&strings[0][..], &strings[1][..]);
    if a.len() >= u32::MAX as usize - 1 || b.len() >= u32::MAX as usize - 1 {
        return reply.error("ERR String too long for LCS");
    }
    let (alen, blen) = (a.len(), b.len());
    let cells = (alen + 1).saturating_mul(blen + 1);
    let table_bytes = cells.saturating_mul(std::mem::size_of::<u32>());
    if table_bytes > session.context.settings.resp_bulk_bytes_max {
        return reply
            .error("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len");
    }
    let mut table: Vec<u32> = Vec::new();
    if table.try_reserve_exact(cells).is_err() {
        return reply.error("ERR Insufficient memory, failed allocating transient memory for LCS");
    }
    table.resize(cells, 0);
    let at = |i: usize, j: usize| j + i * (blen + 1);
    for i in 1..=alen {
        for j in 1..=blen {
            table[at(i, j)] = if a[i - 1] == b[j - 1] {
                table[at(i - 1, j - 1)] + 1
            } else {
                table[at(i - 1, j)].max(table[at(i, j - 1)])
            };
        }
    }
    let total = table[at(alen, blen)];
    let compute = get_idx || !get_len;
    let mut result = vec![0u8; if compute { total as usize } else { 0 }];
    // The ranges IDX reports: (a start, a end, b start, b end, length).
    let mut ranges: Vec<[u32; 5]> = Vec::new();
    // `alen` as the range's start means no range is open, as in Redis.
    let unset = alen as u32;
    let (mut a_start, mut a_end, mut b_start, mut b_end) = (unset, 0u32, 0u32, 0u32);
    let (mut i, mut j) = (alen, blen);
    let mut index = total as usize;
    while compute && i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            result[index - 1] = a[i - 1];
            let (i32_, j32) = ((i - 1) as u32, (j - 1) as u32);
            if a_start == unset {
                a_start = i32_;
                a_end = i32_;
                b_start = j32;
                b_end = j32;
            } else if a_start == i as u32 && b_start == j as u32 {
                // Contiguous with the open range: extend it backwards.
                a_start -= 1;
                b_start -= 1;
            } else {
                emit = true;
            }
            if a_start == 0 || b_start == 0 {
                emit = true;
            }
            index -= 1;
            i -= 1;
            j -= 1;
        } else {
            if table[at(i - 1, j)] > table[at(i, j - 1)] {
                i -= 1;
            } else {
                j -= 1;
            }
            if a_start != unset {
                emit = true;
            }
        }
        let match_len = a_end.wrapping_sub(a_start).wrapping_add(1);
        if emit {
            if (min_match_len == 0 || i64::from(match_len) >= min_match_len) && get_idx {
                ranges.push([a_start, a_end, b_start, b_end, match_len]);
            }
            a_start = unset;
        }
    }
    if get_idx {
        reply.map(2);
        reply.bulk(b"matches");
        reply.array(ranges.len());
        for [a_start, a_end, b_start, b_end, len] in ranges {
            reply.array(if with_match_len { 3 } else { 2 });
            reply.array(2);
            reply.integer(i64::from(a_start));
            reply.integer(i64::from(a_end));
            reply.array(2);
            reply.integer(i64::from(b_start));
            reply.integer(i64::from(b_end));
            if with_match_len {
                reply.integer(i64::from(len));
            }
        }
        reply.bulk(b"len");
        reply.integer(i64::from(total));
    } else if get_len {
        reply.integer(i64::from(total));
    } else {
        reply.bulk(&result);
    }
}
