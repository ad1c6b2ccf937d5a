//! Bitmap and bit-field commands on string values: SETBIT GETBIT BITCOUNT (BYTE|BIT) BITPOS
//! (BYTE|BIT) BITOP (AND OR XOR NOT) BITFIELD (GET SET INCRBY, OVERFLOW WRAP|SAT|FAIL, `#n`
//! offsets) BITFIELD_RO.
//!
//! Bit 0 is the most significant bit of the first byte, as in Redis (`bitops.c`); a string is
//! read as if zero-padded on the right. Arguments are checked in the order redis-server 7.0
//! checks them, with its error texts. Writes go through `Cache::compute`, so each is atomic
//! per key; a string grown or changed by a write is marked edited (OBJECT ENCODING `raw`, as
//! Redis' bit commands leave it) and keeps the key's time to live.

use bytes::Bytes;
use weft_core::{CacheEntry, Compute, Expiry, NewValue, WriteOptions};

use super::collections::WRONGTYPE;
use super::strings::cache_error;
use super::{arg_i64, errors};
use crate::resp::{Reply, Session};

const BAD_OFFSET: &str = "ERR bit offset is not an integer or out of range";
const BAD_BIT: &str = "ERR bit is not an integer or out of range";
const BAD_BIT_ARGUMENT: &str = "ERR The bit argument must be 1 or 0.";
const BAD_TYPE: &str = "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";
const BAD_OVERFLOW: &str = "ERR Invalid OVERFLOW type specified";
const READ_ONLY_BITFIELD: &str = "ERR BITFIELD_RO only supports the GET subcommand";
const NOT_SINGLE_SOURCE: &str = "ERR BITOP NOT must be called with a single source key.";

/// An argument as C's string functions see it (Redis compares keywords with `strcasecmp`,
/// which stops at a NUL byte).
fn c_string(arg: &[u8]) -> &[u8] {
    &arg[..arg.iter().position(|&b| b == 0).unwrap_or(arg.len())]
}

/// Case-insensitive keyword comparison with C string rules.
fn is_c(arg: &[u8], keyword: &str) -> bool {
    c_string(arg).eq_ignore_ascii_case(keyword.as_bytes())
}

/// The string at `key` for a read: `Ok(None)` when missing, `Err` (already replied) when the
/// key holds another type or the cache failed.
pub(crate) fn read_string(
    session: &Session,
    key: &[u8],
    reply: &mut Reply<'_>,
) -> Result<Option<CacheEntry>, ()> {
    match session.cache.get_entry(key) {
        Ok(Some(entry)) if entry.structure().is_some() => {
            reply.error(WRONGTYPE);
            Err(())
        }
        Ok(entry) => Ok(entry),
        Err(error) => {
            cache_error(reply, &error);
            Err(())
        }
    }
}

/// A string value rewritten by a bit command: client flags kept, marked edited.
pub(crate) fn edited_value(value: Vec<u8>, entry: Option<&CacheEntry>) -> NewValue {
    NewValue::Bytes {
        value,
        user_flags: entry.map_or(0, CacheEntry::user_flags),
        edited: true,
    }
}

/// What an edit of a string decided.
pub(crate) enum Edit<R> {
    /// Leave the key as it is.
    Keep(R),
    /// Leave the bytes as they are, but as Redis' `dbUnshareStringValue` leaves a string its
    /// write commands looked at: `raw` (a string stored whole as `int` or `embstr` is
    /// rewritten, which gives it a new version; an edited one is left alone).
    Unshare(R),
    /// Store these bytes (keeping the TTL).
    Store(Vec<u8>, R),
}

/// Edits the string at `key` atomically: `f` gets its bytes (`None` when missing) and says
/// what to store. `Ok(Err(()))` when the key holds another type.
///
/// # Errors
/// A cache failure.
pub(crate) fn edit_string<R>(
    session: &Session,
    key: &[u8],
    f: impl FnOnce(Option<&[u8]>) -> Edit<R>,
) -> Result<Result<R, ()>, weft_core::CacheError> {
    session
        .cache
        .compute(key, &WriteOptions::default(), |existing| {
            if existing.is_some_and(|entry| entry.structure().is_some()) {
                return Compute::Keep(Err(()));
            }
            match f(existing.map(CacheEntry::value)) {
                Edit::Keep(result) => Compute::Keep(Ok(result)),
                Edit::Unshare(result) => match existing {
                    Some(entry) if !entry.is_edited() => Compute::PutValue(
                        edited_value(entry.value().to_vec(), existing),
                        Expiry::KEEP,
                        Ok(result),
                    ),
                    _ => Compute::Keep(Ok(result)),
                },
                Edit::Store(value, result) => {
                    Compute::PutValue(edited_value(value, existing), Expiry::KEEP, Ok(result))
                }
            }
        })
}

/// Redis' `getBitOffsetFromArgument`: a bit offset below `proto-max-bulk-len` bytes; with
/// `hash_bits`, `#n` means `n` times that width (the multiplication wraps as C's does, and
/// a wrapped negative offset is refused).
fn bit_offset(arg: &[u8], hash_bits: Option<u32>, bytes_max: usize) -> Option<u64> {
    let (digits, multiplier) = match (arg.first(), hash_bits) {
        (Some(b'#'), Some(bits)) => (&arg[1..], Some(bits)),
        _ => (arg, None),
    };
    let mut offset = weft_resp::parse_i64_strict(digits)?;
    if let Some(bits) = multiplier {
        offset = offset.wrapping_mul(i64::from(bits));
    }
    let offset = u64::try_from(offset).ok()?;
    let bytes_max = u64::try_from(bytes_max).unwrap_or(u64::MAX);
    (offset >> 3 < bytes_max).then_some(offset)
}

/// The byte index of a bit offset that was checked against the string size limit (which
/// fits in memory, so in `usize`).
fn byte_of(offset: u64) -> usize {
    usize::try_from(offset >> 3).unwrap_or(usize::MAX)
}

/// The bit at `offset` (0 past the end).
fn get_bit(value: &[u8], offset: u64) -> u8 {
    value
        .get(byte_of(offset))
        .map_or(0, |byte| (byte >> (7 - (offset & 7))) & 1)
}

/// Sets the bit at `offset`, which must be inside `value`.
fn set_bit(value: &mut [u8], offset: u64, on: bool) {
    let mask = 1u8 << (7 - (offset & 7));
    let byte = &mut value[byte_of(offset)];
    if on {
        *byte |= mask;
    } else {
        *byte &= !mask;
    }
}

/// `SETBIT key offset value`: the previous bit.
pub fn setbit(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let bytes_max = session.context.settings.resp_bulk_bytes_max;
    let Some(offset) = bit_offset(&args[2], None, bytes_max) else {
        return reply.error(BAD_OFFSET);
    };
    let on = match arg_i64(args, 3) {
        Some(0) => false,
        Some(1) => true,
        _ => return reply.error(BAD_BIT),
    };
    let byte = byte_of(offset);
    let result = edit_string(session, &args[1], |existing| {
        let old = existing.map_or(0, |value| get_bit(value, offset));
        let grows = existing.is_none_or(|value| value.len() <= byte);
        if !grows && (old == 1) == on {
            return Edit::Unshare(old);
        }
        let mut value = existing.map_or_else(Vec::new, <[u8]>::to_vec);
        if value.len() <= byte {
            value.resize(byte + 1, 0);
        }
        set_bit(&mut value, offset, on);
        Edit::Store(value, old)
    });
    match result {
        Ok(Ok(old)) => reply.integer(i64::from(old)),
        Ok(Err(())) => reply.error(WRONGTYPE),
        Err(error) => cache_error(reply, &error),
    }
}

/// `GETBIT key offset`
pub fn getbit(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let bytes_max = session.context.settings.resp_bulk_bytes_max;
    let Some(offset) = bit_offset(&args[2], None, bytes_max) else {
        return reply.error(BAD_OFFSET);
    };
    if let Ok(entry) = read_string(session, &args[1], reply) {
        let bit = entry.map_or(0, |entry| get_bit(entry.value(), offset));
        reply.integer(i64::from(bit));
    }
}

/// A BITCOUNT/BITPOS range's unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unit {
    Byte,
    Bit,
}

fn parse_unit(arg: &[u8]) -> Option<Unit> {
    if is_c(arg, "bit") {
        Some(Unit::Bit)
    } else if is_c(arg, "byte") {
        Some(Unit::Byte)
    } else {
        None
    }
}

/// Inclusive bit range `[first, last]` from Redis' `start`/`end` (possibly negative, in
/// `unit`s) over a string of `len` bytes, or `None` when it selects nothing.
fn bit_range(start: i64, end: i64, unit: Unit, len: usize) -> Option<(u64, u64)> {
    let bytes = i64::try_from(len).unwrap_or(i64::MAX >> 3);
    let total = match unit {
        Unit::Byte => bytes,
        Unit::Bit => bytes << 3,
    };
    let mut start = if start < 0 {
        total.saturating_add(start)
    } else {
        start
    };
    let mut end = if end < 0 {
        total.saturating_add(end)
    } else {
        end
    };
    start = start.max(0);
    end = end.max(0);
    if end >= total {
        end = total - 1;
    }
    if start > end {
        return None;
    }
    let (start, end) = (start.unsigned_abs(), end.unsigned_abs());
    Some(match unit {
        Unit::Byte => (start << 3, (end << 3) | 7),
        Unit::Bit => (start, end),
    })
}

/// Set bits in the inclusive bit range.
fn count_bits(value: &[u8], first: u64, last: u64) -> u64 {
    let (first_byte, last_byte) = (byte_of(first), byte_of(last));
    let mut count: u64 = value[first_byte..=last_byte]
        .iter()
        .map(|byte| u64::from(byte.count_ones()))
        .sum();
    // Take out the bits of the end bytes that lie outside the range.
    count -= u64::from((value[first_byte] & !(0xffu8 >> (first & 7))).count_ones());
    count -= u64::from((value[last_byte] & !(0xffu8 << (7 - (last & 7)))).count_ones());
    count
}

/// The first bit equal to `bit` in the inclusive bit range.
fn find_bit(value: &[u8], first: u64, last: u64, bit: bool) -> Option<u64> {
    let (first_byte, last_byte) = (byte_of(first), byte_of(last));
    for (index, &byte) in value[first_byte..=last_byte].iter().enumerate() {
        let index = first_byte + index;
        // Searching for a one in the (possibly inverted) byte.
        let mut byte = if bit { byte } else { !byte };
        if index == first_byte {
            byte &= 0xff >> (first & 7);
        }
        if index == last_byte {
            byte &= 0xff << (7 - (last & 7));
        }
        if byte != 0 {
            let index = u64::try_from(index).unwrap_or(u64::MAX);
            return Some((index << 3) + u64::from(byte.leading_zeros()));
        }
    }
    None
}

/// `BITCOUNT key [start end [BYTE|BIT]]`
pub fn bitcount(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let Ok(entry) = read_string(session, &args[1], reply) else {
        return;
    };
    let Some(entry) = entry else {
        return reply.integer(0);
    };
    let value = entry.value();
    let range = match args.len() {
        2 => bit_range(0, -1, Unit::Byte, value.len()),
        4 | 5 => {
            let (Some(start), Some(end)) = (arg_i64(args, 2), arg_i64(args, 3)) else {
                return reply.error(errors::NOT_INTEGER);
            };
            if start < 0 && end < 0 && start > end {
                return reply.integer(0);
            }
            let unit = match args.get(4) {
                None => Unit::Byte,
                Some(arg) => match parse_unit(arg) {
                    Some(unit) => unit,
                    None => return reply.error(errors::SYNTAX),
                },
            };
            bit_range(start, end, unit, value.len())
        }
        _ => return reply.error(errors::SYNTAX),
    };
    let count = range.map_or(0, |(first, last)| count_bits(value, first, last));
    reply.integer(i64::try_from(count).unwrap_or(i64::MAX));
}

/// `BITPOS key bit [start [end [BYTE|BIT]]]`
pub fn bitpos(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let bit = match arg_i64(args, 2) {
        Some(0) => false,
        Some(1) => true,
        Some(_) => return reply.error(BAD_BIT_ARGUMENT),
        None => return reply.error(errors::NOT_INTEGER),
    };
    let Ok(entry) = read_string(session, &args[1], reply) else {
        return;
    };
    let Some(entry) = entry else {
        return reply.integer(if bit { -1 } else { 0 });
    };
    let value = entry.value();
    let mut end_given = false;
    let range = match args.len() {
        3 => bit_range(0, -1, Unit::Byte, value.len()),
        4..=6 => {
            let Some(start) = arg_i64(args, 3) else {
                return reply.error(errors::NOT_INTEGER);
            };
            let unit = match args.get(5) {
                None => Unit::Byte,
                Some(arg) => match parse_unit(arg) {
                    Some(unit) => unit,
                    None => return reply.error(errors::SYNTAX),
                },
            };
            let end = if args.len() >= 5 {
                let Some(end) = arg_i64(args, 4) else {
                    return reply.error(errors::NOT_INTEGER);
                };
                end_given = true;
                end
            } else {
                -1
            };
            bit_range(start, end, unit, value.len())
        }
        _ => return reply.error(errors::SYNTAX),
    };
    let Some((first, last)) = range else {
        return reply.integer(-1);
    };
    let position = match find_bit(value, first, last, bit) {
        Some(position) => i64::try_from(position).unwrap_or(i64::MAX),
        // No clear bit in a range open to the right: the string is read as zero-padded, so
        // the first clear bit is the one after its last byte.
        None if !bit && !end_given => i64::try_from((last >> 3) + 1).unwrap_or(i64::MAX) << 3,
        None => -1,
    };
    reply.integer(position);
}

/// A BITOP operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BitOp {
    And,
    Or,
    Xor,
    Not,
}

/// `BITOP AND|OR|XOR|NOT destkey key [key ...]`: the destination's length. Sources are read
/// one after the other, then the destination is replaced (no TTL) or, when the result is
/// empty, deleted.
pub fn bitop(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let op = if is_c(&args[1], "and") {
        BitOp::And
    } else if is_c(&args[1], "or") {
        BitOp::Or
    } else if is_c(&args[1], "xor") {
        BitOp::Xor
    } else if is_c(&args[1], "not") {
        BitOp::Not
    } else {
        return reply.error(errors::SYNTAX);
    };
    if op == BitOp::Not && args.len() != 4 {
        return reply.error(NOT_SINGLE_SOURCE);
    }
    let mut sources = Vec::with_capacity(args.len() - 3);
    for key in &args[3..] {
        let Ok(entry) = read_string(session, key, reply) else {
            return;
        };
        sources.push(entry);
    }
    let values: Vec<&[u8]> = sources
        .iter()
        .map(|entry| entry.as_ref().map_or(&[][..], CacheEntry::value))
        .collect();
    let len = values.iter().map(|value| value.len()).max().unwrap_or(0);
    let result = if len == 0 {
        session.cache.delete(&args[2]).map(|_| ())
    } else {
        let byte = |value: &[u8], index: usize| value.get(index).copied().unwrap_or(0);
        let mut out = Vec::with_capacity(len);
        for index in 0..len {
            let first = byte(values[0], index);
            let rest = values[1..].iter().map(|value| byte(value, index));
            out.push(match op {
                BitOp::Not => !first,
                BitOp::And => rest.fold(first, |acc, b| acc & b),
                BitOp::Or => rest.fold(first, |acc, b| acc | b),
                BitOp::Xor => rest.fold(first, |acc, b| acc ^ b),
            });
        }
        session
            .cache
            .compute(&args[2], &WriteOptions::default(), |_| {
                Compute::PutValue(edited_value(out, None), Expiry::default(), ())
            })
    };
    match result {
        Ok(()) => reply.integer(i64::try_from(len).unwrap_or(i64::MAX)),
        Err(error) => cache_error(reply, &error),
    }
}

// ---------------------------------------------------------------------------------------
// BITFIELD

/// What a bit field does when a value does not fit its width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

/// An integer type of a bit field: signed or not, and its width (1..=64 signed, 1..=63
/// unsigned, so every value fits an `i64` reply).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FieldType {
    signed: bool,
    bits: u32,
}

/// `i<n>` or `u<n>`, as Redis reads it.
fn parse_field_type(arg: &[u8]) -> Option<FieldType> {
    let signed = match arg.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return None,
    };
    let bits = weft_resp::parse_i64_strict(c_string(&arg[1..]))?;
    let max = if signed { 64 } else { 63 };
    if !(1..=max).contains(&bits) {
        return None;
    }
    Some(FieldType {
        signed,
        bits: u32::try_from(bits).ok()?,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FieldOp {
    Get,
    Set(i64),
    IncrBy(i64),
}

#[derive(Debug, Clone, Copy)]
struct Field {
    op: FieldOp,
    kind: FieldType,
    offset: u64,
    overflow: Overflow,
}

/// The `bits`-wide unsigned integer at bit `offset` (zeros past the end).
fn get_unsigned(value: &[u8], offset: u64, bits: u32) -> u64 {
    (0..u64::from(bits)).fold(0u64, |acc, index| {
        (acc << 1) | u64::from(get_bit(value, offset + index))
    })
}

/// The `bits`-wide two's-complement integer at bit `offset`.
fn get_signed(value: &[u8], offset: u64, bits: u32) -> i64 {
    let raw = get_unsigned(value, offset, bits);
    // Reinterpreting the bits, then extending the sign of a narrower field.
    #[allow(clippy::cast_possible_wrap)]
    let mut signed = raw as i64;
    if bits < 64 && raw & (1u64 << (bits - 1)) != 0 {
        signed |= -1i64 << bits;
    }
    signed
}

/// Writes the low `bits` bits of `field` at bit `offset`, which must lie inside `value`.
fn set_field(value: &mut [u8], offset: u64, bits: u32, field: u64) {
    for index in 0..bits {
        let on = field & (1u64 << (bits - 1 - index)) != 0;
        set_bit(value, offset + u64::from(index), on);
    }
}

/// Whether `value + incr` fits an unsigned field of `bits` bits; the value to store instead
/// when it does not (wrapped or saturated; `None` for FAIL), as Redis'
/// `checkUnsignedBitfieldOverflow` decides it.
fn unsigned_overflow(value: u64, incr: i64, bits: u32, overflow: Overflow) -> Option<Option<u64>> {
    let max = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    // Redis computes both bounds with C's wrapping conversions; so does this.
    #[allow(clippy::cast_possible_wrap)]
    let (max_incr, min_incr) = (max.wrapping_sub(value) as i64, value.wrapping_neg() as i64);
    #[allow(clippy::cast_sign_loss)]
    let wrapped = value.wrapping_add(incr as u64) & !(u64::MAX.checked_shl(bits).unwrap_or(0));
    if value > max || (incr > 0 && incr > max_incr) {
        Some(match overflow {
            Overflow::Wrap => Some(wrapped),
            Overflow::Sat => Some(max),
            Overflow::Fail => None,
        })
    } else if incr < 0 && incr < min_incr {
        Some(match overflow {
            Overflow::Wrap => Some(wrapped),
            Overflow::Sat => Some(0),
            Overflow::Fail => None,
        })
    } else {
        None
    }
}

/// The signed counterpart of [`unsigned_overflow`] (Redis' `checkSignedBitfieldOverflow`).
fn signed_overflow(value: i64, incr: i64, bits: u32, overflow: Overflow) -> Option<Option<i64>> {
    let max = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    #[allow(clippy::cast_possible_wrap, clippy::cast_sign_loss)]
    let max_incr = (max as u64).wrapping_sub(value as u64) as i64;
    let min_incr = min.wrapping_sub(value);
    #[allow(clippy::cast_possible_wrap, clippy::cast_sign_loss)]
    let wrapped = {
        let mut sum = (value as u64).wrapping_add(incr as u64);
        if bits < 64 {
            let mask = u64::MAX << bits;
            if sum & (1u64 << (bits - 1)) != 0 {
                sum |= mask;
            } else {
                sum &= !mask;
            }
        }
        sum as i64
    };
    let limit = |saturated: i64| match overflow {
        Overflow::Wrap => Some(wrapped),
        Overflow::Sat => Some(saturated),
        Overflow::Fail => None,
    };
    if value > max || (bits != 64 && incr > max_incr) || (value >= 0 && incr > 0 && incr > max_incr)
    {
        Some(limit(max))
    } else if value < min
        || (bits != 64 && incr < min_incr)
        || (value < 0 && incr < 0 && incr < min_incr)
    {
        Some(limit(min))
    } else {
        None
    }
}

/// Parses BITFIELD's operations; the error text otherwise.
fn parse_fields(args: &[Bytes], bytes_max: usize) -> Result<Vec<Field>, &'static str> {
    let mut fields = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut index = 2;
    while index < args.len() {
        let remaining = args.len() - index - 1;
        let name = &args[index];
        let op = if is_c(name, "get") && remaining >= 2 {
            FieldOp::Get
        } else if is_c(name, "set") && remaining >= 3 {
            FieldOp::Set(0)
        } else if is_c(name, "incrby") && remaining >= 3 {
            FieldOp::IncrBy(0)
        } else if is_c(name, "overflow") && remaining >= 1 {
            let kind = &args[index + 1];
            overflow = if is_c(kind, "wrap") {
                Overflow::Wrap
            } else if is_c(kind, "sat") {
                Overflow::Sat
            } else if is_c(kind, "fail") {
                Overflow::Fail
            } else {
                return Err(BAD_OVERFLOW);
            };
            index += 2;
            continue;
        } else {
            return Err(errors::SYNTAX);
        };
        let kind = parse_field_type(&args[index + 1]).ok_or(BAD_TYPE)?;
        let offset = bit_offset(&args[index + 2], Some(kind.bits), bytes_max).ok_or(BAD_OFFSET)?;
        let op = match op {
            FieldOp::Get => FieldOp::Get,
            FieldOp::Set(_) => FieldOp::Set(arg_i64(args, index + 3).ok_or(errors::NOT_INTEGER)?),
            FieldOp::IncrBy(_) => {
                FieldOp::IncrBy(arg_i64(args, index + 3).ok_or(errors::NOT_INTEGER)?)
            }
        };
        fields.push(Field {
            op,
            kind,
            offset,
            overflow,
        });
        index += if op == FieldOp::Get { 3 } else { 4 };
    }
    Ok(fields)
}

/// Runs one SET or INCRBY on `value` (already long enough); its reply (`None`: FAIL).
#[allow(clippy::cast_possible_wrap, clippy::cast_sign_loss)]
fn apply_field(value: &mut [u8], field: &Field) -> Option<i64> {
    let FieldType { signed, bits } = field.kind;
    let (stored, answer) = if signed {
        let old = get_signed(value, field.offset, bits);
        match field.op {
            FieldOp::IncrBy(incr) => {
                let new = match signed_overflow(old, incr, bits, field.overflow) {
                    Some(limit) => limit?,
                    None => old.wrapping_add(incr),
                };
                (new as u64, new)
            }
            FieldOp::Set(new) => {
                let new = match signed_overflow(new, 0, bits, field.overflow) {
                    Some(limit) => limit?,
                    None => new,
                };
                (new as u64, old)
            }
            FieldOp::Get => return Some(old),
        }
    } else {
        let old = get_unsigned(value, field.offset, bits);
        match field.op {
            FieldOp::IncrBy(incr) => {
                let new = match unsigned_overflow(old, incr, bits, field.overflow) {
                    Some(limit) => limit?,
                    None => old.wrapping_add(incr as u64),
                };
                (new, new as i64)
            }
            FieldOp::Set(new) => {
                let new = match unsigned_overflow(new as u64, 0, bits, field.overflow) {
                    Some(limit) => limit?,
                    None => new as u64,
                };
                (new, old as i64)
            }
            FieldOp::Get => return Some(old as i64),
        }
    };
    set_field(value, field.offset, bits, stored);
    Some(answer)
}

/// A GET's reply (unsigned fields are at most 63 bits wide, so they fit).
#[allow(clippy::cast_possible_wrap)]
fn read_field(value: &[u8], field: &Field) -> i64 {
    if field.kind.signed {
        get_signed(value, field.offset, field.kind.bits)
    } else {
        get_unsigned(value, field.offset, field.kind.bits) as i64
    }
}

fn bitfield_generic(session: &Session, args: &[Bytes], reply: &mut Reply<'_>, read_only: bool) {
    let bytes_max = session.context.settings.resp_bulk_bytes_max;
    let fields = match parse_fields(args, bytes_max) {
        Ok(fields) => fields,
        Err(text) => return reply.error(text),
    };
    let writes = fields.iter().any(|field| field.op != FieldOp::Get);
    if !writes {
        let Ok(entry) = read_string(session, &args[1], reply) else {
            return;
        };
        let value = entry.as_ref().map_or(&[][..], CacheEntry::value);
        reply.array(fields.len());
        for field in &fields {
            reply.integer(read_field(value, field));
        }
        return;
    }
    if read_only {
        return reply.error(READ_ONLY_BITFIELD);
    }
    // The string grows to hold the highest bit written before any operation runs, as in
    // Redis (so even operations that all FAIL leave it grown).
    let highest = fields
        .iter()
        .filter(|field| field.op != FieldOp::Get)
        .map(|field| field.offset + u64::from(field.kind.bits) - 1)
        .max()
        .unwrap_or(0);
    let len = byte_of(highest) + 1;
    let result = edit_string(session, &args[1], |existing| {
        let mut value = existing.map_or_else(Vec::new, <[u8]>::to_vec);
        if value.len() < len {
            value.resize(len, 0);
        }
        let answers: Vec<Option<i64>> = fields
            .iter()
            .map(|field| apply_field(&mut value, field))
            .collect();
        if existing == Some(&value[..]) {
            Edit::Unshare(answers)
        } else {
            Edit::Store(value, answers)
        }
    });
    match result {
        Ok(Ok(answers)) => {
            reply.array(answers.len());
            for answer in answers {
                match answer {
                    Some(answer) => reply.integer(answer),
                    None => reply.null(),
                }
            }
        }
        Ok(Err(())) => reply.error(WRONGTYPE),
        Err(error) => cache_error(reply, &error),
    }
}

/// `BITFIELD key [GET type offset | SET type offset value | INCRBY type offset increment |
/// OVERFLOW WRAP|SAT|FAIL] ...`
pub fn bitfield(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    bitfield_generic(session, args, reply, false);
}

/// `BITFIELD_RO key [GET type offset ...]`
pub fn bitfield_ro(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    bitfield_generic(session, args, reply, true);
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves bit offsets follow Redis: `#n` scales by the width only where allowed, the limit
    // is in bytes, and negative or wrapped offsets are refused.
    #[test]
    fn offsets() {
        assert_eq!(bit_offset(b"7", None, 1), Some(7));
        assert_eq!(bit_offset(b"8", None, 1), None);
        assert_eq!(bit_offset(b"-1", None, 1 << 20), None);
        assert_eq!(bit_offset(b"#2", None, 1 << 20), None);
        assert_eq!(bit_offset(b"#2", Some(8), 1 << 20), Some(16));
        assert_eq!(
            bit_offset(b"#2305843009213693952", Some(4), usize::MAX),
            None
        );
        assert_eq!(bit_offset(b"01", None, 1 << 20), None);
    }

    // Proves BITCOUNT/BITPOS ranges count only the bits inside them, in both units.
    #[test]
    fn ranges_count_and_find() {
        let value = [0b1111_0000u8, 0b0000_1111];
        let (first, last) = bit_range(2, 12, Unit::Bit, 2).expect("a range");
        assert_eq!((first, last), (2, 12));
        assert_eq!(count_bits(&value, first, last), 2 + 1);
        assert_eq!(find_bit(&value, 5, 15, true), Some(12));
        assert_eq!(find_bit(&value, 0, 15, false), Some(4));
        assert_eq!(find_bit(&[0xff], 0, 7, false), None);
        assert_eq!(bit_range(0, -1, Unit::Byte, 0), None);
        assert_eq!(bit_range(-100, 100, Unit::Byte, 2), Some((0, 15)));
    }

    // Proves the overflow rules on the corner cases of Redis' bitfield tests.
    #[test]
    fn overflows() {
        assert_eq!(unsigned_overflow(255, 1, 8, Overflow::Wrap), Some(Some(0)));
        assert_eq!(unsigned_overflow(255, 1, 8, Overflow::Sat), Some(Some(255)));
        assert_eq!(unsigned_overflow(0, -1, 8, Overflow::Sat), Some(Some(0)));
        assert_eq!(unsigned_overflow(0, -1, 8, Overflow::Fail), Some(None));
        assert_eq!(unsigned_overflow(3, 1, 8, Overflow::Fail), None);
        assert_eq!(signed_overflow(127, 1, 8, Overflow::Wrap), Some(Some(-128)));
        assert_eq!(
            signed_overflow(-128, -1, 8, Overflow::Sat),
            Some(Some(-128))
        );
        assert_eq!(
            signed_overflow(i64::MAX, 1, 64, Overflow::Wrap),
            Some(Some(i64::MIN))
        );
        assert_eq!(signed_overflow(5, -3, 4, Overflow::Fail), None);
    }

    // Proves fields read and write big-endian across byte boundaries, signed and not.
    #[test]
    fn fields_round_trip() {
        let mut value = vec![0u8; 3];
        set_field(&mut value, 7, 5, 23);
        assert_eq!(value, [0b0000_0001, 0b0111_0000, 0]);
        assert_eq!(get_unsigned(&value, 7, 5), 23);
        set_field(&mut value, 8, 8, 0xff);
        assert_eq!(get_signed(&value, 8, 8), -1);
        assert_eq!(get_signed(&value, 8, 4), -1);
        assert_eq!(get_unsigned(&value, 100, 8), 0);
    }
}
