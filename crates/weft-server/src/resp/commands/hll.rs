//! Redis' HyperLogLog representation, byte for byte (`hyperloglog.c`), so that a value PFADD
//! writes here reads back with GET exactly as redis-server's, and redis-server's values work
//! here.
//!
//! A value is a 16-byte header — `HYLL`, the encoding (0 dense, 1 sparse), three reserved
//! bytes, the cached cardinality as a little-endian u64 whose top bit marks it stale — then
//! 16384 six-bit registers: dense, packed least significant bit first; or sparse, as run
//! opcodes (`00xxxxxx` ZERO of 1–64 registers, `01xxxxxx yyyyyyyy` XZERO of 1–16384,
//! `1vvvvvxx` VAL: 1–4 registers of value 1–32). Elements hash with MurmurHash64A (seed
//! `0xadc83b19`); the low 14 bits pick a register, the run of zeros above them (plus one)
//! is its candidate value. The cardinality is Ertl's improved estimator, computed with the
//! same floating-point operations as Redis so the results agree exactly.
//!
//! Values come from users (SET can store anything that starts with `HYLL`), so every
//! opcode walk is bounded by the value's length, every index is checked, and a value whose
//! runs do not cover exactly 16384 registers is reported as corrupt, never trusted.

/// Bytes of the header.
pub const HEADER_BYTES: usize = 16;
/// Registers per HyperLogLog (Redis' P = 14).
pub const REGISTERS: usize = 1 << 14;
/// Bits per dense register.
const REGISTER_BITS: usize = 6;
/// Largest register value.
const REGISTER_MAX: u8 = (1 << REGISTER_BITS) - 1;
/// Bytes of a dense value: header and packed registers.
pub const DENSE_BYTES: usize = HEADER_BYTES + (REGISTERS * REGISTER_BITS).div_ceil(8);
/// Bits of the hash above the register index (Redis' Q).
const HASH_BITS_ABOVE_INDEX: usize = 64 - 14;
/// Redis' MurmurHash64A seed for HyperLogLog elements.
const HASH_SEED: u64 = 0xadc8_3b19;
/// Largest value a sparse VAL opcode holds.
const SPARSE_VALUE_MAX: u8 = 32;
/// Most registers one VAL opcode covers.
const SPARSE_VALUE_RUN_MAX: usize = 4;
/// Most registers one ZERO opcode covers.
const SPARSE_ZERO_RUN_MAX: usize = 64;
/// Most registers one XZERO opcode covers.
const SPARSE_XZERO_RUN_MAX: usize = 16384;
/// The estimator's constant, 0.5 / ln 2.
const ALPHA_INFINITY: f64 = 0.721_347_520_444_481_7;
/// Iterations after which the estimator's series are cut off. They converge within about
/// sixty steps for every histogram a valid value can produce; the bound only keeps a
/// corrupt value from looping.
const SERIES_STEPS_MAX: usize = 1_000;

/// The encoding byte of a dense value.
const DENSE: u8 = 0;
/// The encoding byte of a sparse value.
const SPARSE: u8 = 1;

/// A value that claims to be a HyperLogLog but whose registers are not readable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("corrupted HyperLogLog value")]
pub struct Corrupt;

/// Redis' `MurmurHash64A`, reading eight-byte blocks little-endian as Redis does on every
/// architecture.
#[must_use]
pub fn murmur_hash_64a(data: &[u8], seed: u64) -> u64 {
    const MULTIPLIER: u64 = 0xc6a4_a793_5bd1_e995;
    const SHIFT: u32 = 47;
    let len = u64::try_from(data.len()).unwrap_or(u64::MAX);
    let mut hash = seed ^ len.wrapping_mul(MULTIPLIER);
    let mut blocks = data.chunks_exact(8);
    for block in &mut blocks {
        let mut k = u64::from_le_bytes(block.try_into().unwrap_or([0; 8]));
        k = k.wrapping_mul(MULTIPLIER);
        k ^= k >> SHIFT;
        k = k.wrapping_mul(MULTIPLIER);
        hash ^= k;
        hash = hash.wrapping_mul(MULTIPLIER);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        for (index, &byte) in tail.iter().enumerate() {
            hash ^= u64::from(byte) << (8 * index);
        }
        hash = hash.wrapping_mul(MULTIPLIER);
    }
    hash ^= hash >> SHIFT;
    hash = hash.wrapping_mul(MULTIPLIER);
    hash ^= hash >> SHIFT;
    hash
}

/// The register an element hashes to and its candidate value (1..=51).
#[must_use]
pub fn pattern(element: &[u8]) -> (usize, u8) {
    let hash = murmur_hash_64a(element, HASH_SEED);
    let index = usize::try_from(hash & (REGISTERS as u64 - 1)).unwrap_or(0);
    // A bit set above the used ones bounds the run at Q + 1.
    let rest = (hash >> 14) | (1u64 << HASH_BITS_ABOVE_INDEX);
    let count = u8::try_from(rest.trailing_zeros() + 1).unwrap_or(REGISTER_MAX);
    (index, count)
}

/// A new, empty HyperLogLog as Redis creates it: sparse, one XZERO covering every register,
/// cached cardinality 0.
#[must_use]
pub fn new_sparse() -> Vec<u8> {
    let mut value = Vec::with_capacity(HEADER_BYTES + 2);
    value.extend_from_slice(b"HYLL");
    value.extend_from_slice(&[SPARSE, 0, 0, 0]);
    value.extend_from_slice(&[0; 8]);
    let mut remaining = REGISTERS;
    while remaining > 0 {
        let run = remaining.min(SPARSE_XZERO_RUN_MAX);
        push_xzero(&mut value, run);
        remaining -= run;
    }
    value
}

/// Whether `value` is a HyperLogLog as Redis' `isHLLObjectOrReply` judges it: long enough,
/// the magic, a known encoding, and a dense value of exactly the dense size. (A sparse
/// value's opcodes are checked only as they are read.)
#[must_use]
pub fn is_hyperloglog(value: &[u8]) -> bool {
    value.len() >= HEADER_BYTES
        && value.starts_with(b"HYLL")
        && value[4] <= SPARSE
        && (value[4] != DENSE || value.len() == DENSE_BYTES)
}

/// Whether the value is dense.
#[must_use]
pub fn is_dense(value: &[u8]) -> bool {
    value.get(4) == Some(&DENSE)
}

/// The cached cardinality, unless marked stale.
#[must_use]
pub fn cached_cardinality(value: &[u8]) -> Option<u64> {
    let bytes: [u8; 8] = value.get(8..16)?.try_into().ok()?;
    (bytes[7] & 0x80 == 0).then(|| u64::from_le_bytes(bytes))
}

/// Stores `cardinality` as the cached one.
pub fn set_cached_cardinality(value: &mut [u8], cardinality: u64) {
    if let Some(slot) = value.get_mut(8..16) {
        slot.copy_from_slice(&cardinality.to_le_bytes());
    }
}

/// Marks the cached cardinality stale.
pub fn invalidate_cache(value: &mut [u8]) {
    if let Some(byte) = value.get_mut(15) {
        *byte |= 0x80;
    }
}

// ---------------------------------------------------------------------------------------
// Dense registers.

/// Dense register `index` of `registers` (the bytes after the header).
fn dense_get(registers: &[u8], index: usize) -> u8 {
    let byte = index * REGISTER_BITS / 8;
    let shift = (index * REGISTER_BITS) & 7;
    let low = u16::from(registers.get(byte).copied().unwrap_or(0));
    let high = u16::from(registers.get(byte + 1).copied().unwrap_or(0));
    let both = (low >> shift) | (high << (8 - shift));
    u8::try_from(both & u16::from(REGISTER_MAX)).unwrap_or(0)
}

/// Sets dense register `index`.
fn dense_put(registers: &mut [u8], index: usize, value: u8) {
    let byte = index * REGISTER_BITS / 8;
    let shift = (index * REGISTER_BITS) & 7;
    let value = u16::from(value & REGISTER_MAX);
    let mask = u16::from(REGISTER_MAX);
    if let Some(low) = registers.get_mut(byte) {
        let cleared = u16::from(*low) & !(mask << shift);
        *low = u8::try_from((cleared | (value << shift)) & 0xff).unwrap_or(0);
    }
    // The last register ends inside its first byte; Redis' write to the byte after it
    // changes nothing then.
    if let Some(high) = registers.get_mut(byte + 1) {
        let cleared = u16::from(*high) & !(mask >> (8 - shift));
        *high = u8::try_from((cleared | (value >> (8 - shift))) & 0xff).unwrap_or(0);
    }
}

/// Raises dense register `index` to `count`; whether it changed.
fn dense_set(value: &mut [u8], index: usize, count: u8) -> bool {
    let Some(registers) = value.get_mut(HEADER_BYTES..) else {
        return false;
    };
    if count > dense_get(registers, index) {
        dense_put(registers, index, count);
        true
    } else {
        false
    }
}

// ---------------------------------------------------------------------------------------
// Sparse opcodes.

fn is_zero(opcode: u8) -> bool {
    opcode & 0xc0 == 0
}

fn is_xzero(opcode: u8) -> bool {
    opcode & 0xc0 == 0x40
}

fn is_value(opcode: u8) -> bool {
    opcode & 0x80 != 0
}

fn zero_run(opcode: u8) -> usize {
    usize::from(opcode & 0x3f) + 1
}

/// An XZERO's run. Its second byte, past the value's end, is the byte Redis' buffer holds
/// there (`after_end`): the string's terminator, 0, unless Redis' own last write left a
/// byte there (see [`Working`]).
fn xzero_run(opcode: u8, next: Option<&u8>, after_end: u8) -> usize {
    ((usize::from(opcode & 0x3f) << 8) | usize::from(next.copied().unwrap_or(after_end))) + 1
}

fn value_of(opcode: u8) -> u8 {
    ((opcode >> 2) & 0x1f) + 1
}

fn value_run(opcode: u8) -> usize {
    usize::from(opcode & 0x3) + 1
}

/// A VAL opcode (value 1..=32, run 1..=4).
fn value_opcode(value: u8, run: usize) -> u8 {
    let run = u8::try_from(run.clamp(1, SPARSE_VALUE_RUN_MAX) - 1).unwrap_or(0);
    0x80 | ((value.clamp(1, SPARSE_VALUE_MAX) - 1) << 2) | run
}

fn push_zero_run(out: &mut Vec<u8>, run: usize) {
    if run > SPARSE_ZERO_RUN_MAX {
        push_xzero(out, run);
    } else {
        out.push(u8::try_from(run - 1).unwrap_or(0));
    }
}

fn push_xzero(out: &mut Vec<u8>, run: usize) {
    let encoded = run.clamp(1, SPARSE_XZERO_RUN_MAX) - 1;
    out.push(0x40 | u8::try_from(encoded >> 8).unwrap_or(0x3f));
    out.push(u8::try_from(encoded & 0xff).unwrap_or(0));
}

/// Calls `f(first register, run, value)` for each opcode of a sparse value's body, in
/// order; stops early (returning false) when `f` does.
fn walk_sparse(body: &[u8], after_end: u8, mut f: impl FnMut(usize, usize, u8) -> bool) {
    let mut position = 0;
    let mut register = 0usize;
    while position < body.len() {
        let opcode = body[position];
        let (run, value, length) = if is_zero(opcode) {
            (zero_run(opcode), 0, 1)
        } else if is_xzero(opcode) {
            (xzero_run(opcode, body.get(position + 1), after_end), 0, 2)
        } else {
            (value_run(opcode), value_of(opcode), 1)
        };
        if !f(register, run, value) {
            return;
        }
        register = register.saturating_add(run);
        position += length;
    }
}

/// Calls `f(register, value)` for every register of a sparse value that a VAL opcode sets,
/// checking — as Redis' conversion and merge do since the fix of CVE-2025-32023, which
/// redis-server 7.0.15 as packaged carries — that no opcode runs past the last register
/// and that the runs cover exactly all of them.
///
/// # Errors
/// [`Corrupt`] otherwise.
fn sparse_registers(
    body: &[u8],
    after_end: u8,
    mut f: impl FnMut(usize, u8),
) -> Result<(), Corrupt> {
    let mut covered = 0usize;
    let mut overflow = false;
    walk_sparse(body, after_end, |first, run, value| {
        if first.saturating_add(run) > REGISTERS {
            overflow = true;
            return false;
        }
        if value > 0 {
            for register in first..first + run {
                f(register, value);
            }
        }
        covered = first + run;
        true
    });
    if !overflow && covered == REGISTERS {
        Ok(())
    } else {
        Err(Corrupt)
    }
}

/// [`Working::make_dense`] for a value of its own.
#[cfg(test)]
fn to_dense(value: &mut Vec<u8>) -> Result<(), Corrupt> {
    to_dense_with(value, 0)
}

fn to_dense_with(value: &mut Vec<u8>, after_end: u8) -> Result<(), Corrupt> {
    if is_dense(value) {
        return Ok(());
    }
    let mut dense = vec![0u8; DENSE_BYTES];
    dense[..HEADER_BYTES].copy_from_slice(value.get(..HEADER_BYTES).ok_or(Corrupt)?);
    dense[4] = DENSE;
    let registers = &mut dense[HEADER_BYTES..];
    sparse_registers(&value[HEADER_BYTES..], after_end, |register, count| {
        dense_put(registers, register, count);
    })?;
    *value = dense;
    Ok(())
}

/// Raises register `index` of a HyperLogLog to `count` (Redis' `hllDenseSet` or
/// `hllSparseSet`): whether it changed. A sparse value grows past `sparse_bytes_max`, or
/// takes a value above 32, only by turning dense.
///
/// # Errors
/// [`Corrupt`] when a sparse value's opcodes do not reach the register or cannot be turned
/// dense. Changes made before the error stay, as in Redis.
fn set_register(
    value: &mut Vec<u8>,
    after_end: &mut u8,
    index: usize,
    count: u8,
    sparse_bytes_max: usize,
) -> Result<bool, Corrupt> {
    if is_dense(value) {
        return Ok(dense_set(value, index, count));
    }
    if count > SPARSE_VALUE_MAX {
        return promote(value, after_end, index, count);
    }
    // Step 1: the opcode covering the register.
    let end = value.len();
    let mut position = HEADER_BYTES;
    let mut first = 0usize;
    let mut previous = None;
    let mut span = 0usize;
    let mut length = 1;
    while position < end {
        let opcode = value[position];
        length = 1;
        span = if is_zero(opcode) {
            zero_run(opcode)
        } else if is_value(opcode) {
            value_run(opcode)
        } else {
            length = 2;
            xzero_run(opcode, value.get(position + 1), *after_end)
        };
        if index < first + span {
            break;
        }
        previous = Some(position);
        position += length;
        first += span;
    }
    if span == 0 || position >= end {
        return Err(Corrupt);
    }
    let opcode = value[position];
    let last = first + span - 1;

    // Step 2: the trivial updates in place, else the replacement sequence.
    if is_value(opcode) {
        if value_of(opcode) >= count {
            return Ok(false);
        }
        if span == 1 {
            value[position] = value_opcode(count, 1);
            merge_adjacent_values(value, after_end, previous.unwrap_or(HEADER_BYTES));
            return Ok(true);
        }
    }
    if is_zero(opcode) && span == 1 {
        value[position] = value_opcode(count, 1);
        merge_adjacent_values(value, after_end, previous.unwrap_or(HEADER_BYTES));
        return Ok(true);
    }
    let mut sequence = Vec::with_capacity(5);
    if is_value(opcode) {
        let current = value_of(opcode);
        if index != first {
            sequence.push(value_opcode(current, index - first));
        }
        sequence.push(value_opcode(count, 1));
        if index != last {
            sequence.push(value_opcode(current, last - index));
        }
    } else {
        if index != first {
            push_zero_run(&mut sequence, index - first);
        }
        sequence.push(value_opcode(count, 1));
        if index != last {
            push_zero_run(&mut sequence, last - index);
        }
    }

    // Step 3: the sequence replaces the opcode, unless the value would grow too large.
    if sequence.len() > length && end + sequence.len() - length > sparse_bytes_max {
        return promote(value, after_end, index, count);
    }
    if position + length <= end {
        value.splice(position..position + length, sequence);
        // Redis sets the new length, which writes the terminator after it.
        *after_end = 0;
    } else {
        // An XZERO cut short by the end of the value: Redis writes the sequence over its
        // two bytes but sizes the value as if both were there, which drops the last byte
        // from the value — it stays in Redis' buffer, just past the end.
        value.truncate(position);
        value.extend_from_slice(&sequence[..sequence.len() - 1]);
        *after_end = sequence[sequence.len() - 1];
    }
    merge_adjacent_values(value, after_end, previous.unwrap_or(HEADER_BYTES));
    Ok(true)
}

/// Redis' step 4 of `hllSparseSet`: from `start`, over at most five opcodes, merges adjacent
/// VAL opcodes of equal value whose runs fit one opcode; then marks the cache stale.
fn merge_adjacent_values(value: &mut Vec<u8>, after_end: &mut u8, start: usize) {
    let mut position = start;
    let mut steps = 5;
    while position < value.len() && steps > 0 {
        steps -= 1;
        let opcode = value[position];
        if is_xzero(opcode) {
            position += 2;
            continue;
        }
        if is_zero(opcode) {
            position += 1;
            continue;
        }
        if let Some(&next) = value.get(position + 1)
            && is_value(next)
            && value_of(opcode) == value_of(next)
        {
            let run = value_run(opcode) + value_run(next);
            if run <= SPARSE_VALUE_RUN_MAX {
                value[position + 1] = value_opcode(value_of(opcode), run);
                value.remove(position);
                // Shrinking the value writes the terminator after it.
                *after_end = 0;
                continue;
            }
        }
        position += 1;
    }
    invalidate_cache(value);
}

/// Turns a sparse value dense, then sets the register there.
fn promote(
    value: &mut Vec<u8>,
    after_end: &mut u8,
    index: usize,
    count: u8,
) -> Result<bool, Corrupt> {
    to_dense_with(value, *after_end)?;
    *after_end = 0;
    Ok(dense_set(value, index, count))
}

/// A HyperLogLog one command changes, step by step, with the byte Redis' buffer holds just
/// past the value's end. That byte is the string's terminator (0) except after one corner
/// of a corrupt sparse value (an XZERO cut short at the very end, which Redis reads and
/// rewrites past the end); the next step of the same command reads it, as Redis does.
/// (Between commands only the value is kept: Redis would go on reading that byte.)
#[derive(Debug, Clone)]
pub struct Working {
    value: Vec<u8>,
    after_end: u8,
}

impl Working {
    /// Starts changing `value`.
    #[must_use]
    pub fn new(value: Vec<u8>) -> Self {
        Self {
            value,
            after_end: 0,
        }
    }

    /// The value as it is now.
    #[must_use]
    pub fn value(&self) -> &[u8] {
        &self.value
    }

    /// The value, done.
    #[must_use]
    pub fn into_value(self) -> Vec<u8> {
        self.value
    }

    /// Adds `element` (Redis' `hllAdd`): whether a register changed.
    ///
    /// # Errors
    /// [`Corrupt`], as [`Working::set_register`].
    pub fn add(&mut self, element: &[u8], sparse_bytes_max: usize) -> Result<bool, Corrupt> {
        let (index, count) = pattern(element);
        self.set_register(index, count, sparse_bytes_max)
    }

    /// Raises register `index` to `count` (Redis' `hllDenseSet` or `hllSparseSet`): whether
    /// it changed. A sparse value grows past `sparse_bytes_max`, or takes a value above 32,
    /// only by turning dense.
    ///
    /// # Errors
    /// [`Corrupt`] when a sparse value's opcodes do not reach the register or cannot be
    /// turned dense. Changes made before the error stay, as in Redis.
    pub fn set_register(
        &mut self,
        index: usize,
        count: u8,
        sparse_bytes_max: usize,
    ) -> Result<bool, Corrupt> {
        set_register(
            &mut self.value,
            &mut self.after_end,
            index,
            count,
            sparse_bytes_max,
        )
    }

    /// Turns a sparse value dense (Redis' `hllSparseToDense`), keeping the header (magic,
    /// reserved bytes, cached cardinality); a dense value is left alone.
    ///
    /// # Errors
    /// [`Corrupt`] when the sparse runs do not cover exactly the registers; the value is
    /// then unchanged.
    pub fn make_dense(&mut self) -> Result<(), Corrupt> {
        if !is_dense(&self.value) {
            to_dense_with(&mut self.value, self.after_end)?;
            self.after_end = 0;
        }
        Ok(())
    }

    /// Marks the cached cardinality stale.
    pub fn invalidate_cache(&mut self) {
        invalidate_cache(&mut self.value);
    }
}

/// Adds `element` to `value`, a command of its own.
///
/// # Errors
/// [`Corrupt`], as [`Working::set_register`].
#[cfg(test)]
fn add(value: &mut Vec<u8>, element: &[u8], sparse_bytes_max: usize) -> Result<bool, Corrupt> {
    let mut working = Working::new(std::mem::take(value));
    let result = working.add(element, sparse_bytes_max);
    *value = working.into_value();
    result
}

/// Raises each of `registers` (one byte per register) to this HyperLogLog's value (Redis'
/// `hllMerge`).
///
/// # Errors
/// [`Corrupt`] for a sparse value whose runs do not cover exactly the registers.
pub fn merge_into(registers: &mut [u8; REGISTERS], value: &[u8]) -> Result<(), Corrupt> {
    let body = value.get(HEADER_BYTES..).ok_or(Corrupt)?;
    if is_dense(value) {
        for (index, register) in registers.iter_mut().enumerate() {
            *register = (*register).max(dense_get(body, index));
        }
        Ok(())
    } else {
        sparse_registers(body, 0, |index, count| {
            registers[index] = registers[index].max(count);
        })
    }
}

/// How many registers hold each value.
type Histogram = [u32; 64];

/// The histogram of a HyperLogLog's registers.
///
/// # Errors
/// [`Corrupt`] for a sparse value whose runs do not add up to the registers (Redis'
/// `hllSparseRegHisto` then sets `invalid`).
fn histogram(value: &[u8]) -> Result<Histogram, Corrupt> {
    let mut histogram = [0u32; 64];
    let body = value.get(HEADER_BYTES..).ok_or(Corrupt)?;
    if is_dense(value) {
        for index in 0..REGISTERS {
            histogram[usize::from(dense_get(body, index))] += 1;
        }
        return Ok(histogram);
    }
    let mut covered = 0usize;
    walk_sparse(body, 0, |first, run, value| {
        let run32 = u32::try_from(run).unwrap_or(u32::MAX);
        histogram[usize::from(value)] = histogram[usize::from(value)].saturating_add(run32);
        covered = first.saturating_add(run);
        true
    });
    if covered == REGISTERS {
        Ok(histogram)
    } else {
        Err(Corrupt)
    }
}

/// The estimated cardinality of a HyperLogLog (Redis' `hllCount`).
///
/// # Errors
/// [`Corrupt`] for an unreadable sparse value.
pub fn count(value: &[u8]) -> Result<u64, Corrupt> {
    Ok(estimate(&histogram(value)?))
}

/// The estimated cardinality of registers held one per byte (PFCOUNT of several keys).
#[must_use]
pub fn count_registers(registers: &[u8; REGISTERS]) -> u64 {
    let mut histogram = [0u32; 64];
    for &register in registers {
        histogram[usize::from(register & 63)] += 1;
    }
    estimate(&histogram)
}

/// Ertl's sigma function, as Redis computes it.
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    for _ in 0..SERIES_STEPS_MAX {
        x *= x;
        let previous = z;
        z += x * y;
        y += y;
        if previous == z {
            break;
        }
    }
    z
}

/// Ertl's tau function, as Redis computes it.
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    for _ in 0..SERIES_STEPS_MAX {
        x = x.sqrt();
        let previous = z;
        y *= 0.5;
        let gap = 1.0 - x;
        z -= gap * gap * y;
        if previous == z {
            break;
        }
    }
    z / 3.0
}

/// The cardinality estimate from a register histogram.
fn estimate(histogram: &Histogram) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - f64::from(histogram[HASH_BITS_ABOVE_INDEX + 1])) / m);
    for value in (1..=HASH_BITS_ABOVE_INDEX).rev() {
        z += f64::from(histogram[value]);
        z *= 0.5;
    }
    z += m * sigma(f64::from(histogram[0]) / m);
    let estimate = (ALPHA_INFINITY * m * m / z).round();
    // A non-negative finite estimate well inside u64 (at most about 2^64 / 2^14 · m).
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let estimate = estimate as u64;
    estimate
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the hash's shape: no input and seed 0 hash to 0, and a tail byte changes the
    // hash (agreement with Redis' values is proven end to end, by the bytes PFADD stores in
    // tests/resp_bits_hll_geo.rs).
    #[test]
    fn murmur_shape() {
        assert_eq!(murmur_hash_64a(b"", 0), 0);
        let a = murmur_hash_64a(b"hello", HASH_SEED);
        let b = murmur_hash_64a(b"hello", HASH_SEED);
        assert_eq!(a, b);
        assert_ne!(murmur_hash_64a(b"hellp", HASH_SEED), a);
    }

    // Proves a new value is Redis' 18-byte empty sparse HyperLogLog and counts 0.
    #[test]
    fn empty_sparse() {
        let value = new_sparse();
        assert_eq!(
            value,
            b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x7f\xff"
        );
        assert!(is_hyperloglog(&value));
        assert_eq!(count(&value), Ok(0));
    }

    // Proves sparse and dense encodings of the same registers count the same, that adding
    // grows the sparse value until it must turn dense, and that dense registers round-trip.
    #[test]
    fn sparse_and_dense_agree() {
        let mut sparse = new_sparse();
        for n in 0..1_000u32 {
            add(&mut sparse, n.to_string().as_bytes(), 3000).expect("valid");
        }
        assert!(!is_dense(&sparse));
        let mut dense = sparse.clone();
        to_dense(&mut dense).expect("valid");
        assert_eq!(dense.len(), DENSE_BYTES);
        assert_eq!(count(&sparse), count(&dense));
        let estimate = count(&dense).expect("valid");
        assert!((950..1_050).contains(&estimate), "{estimate}");
        for n in 1_000..20_000u32 {
            add(&mut sparse, n.to_string().as_bytes(), 3000).expect("valid");
        }
        assert!(is_dense(&sparse));
        let mut registers = vec![0u8; REGISTERS * 6 / 8];
        for index in [0, 1, 2, 3, 4, REGISTERS - 1] {
            dense_put(&mut registers, index, 63);
            assert_eq!(dense_get(&registers, index), 63);
        }
        assert_eq!(dense_get(&registers, 5), 0);
    }

    // Proves random sparse bodies (a bounded, seeded sample) never panic any operation, and
    // that whatever PFADD leaves behind still reads without panicking.
    #[test]
    fn random_sparse_bodies_never_panic() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..3_000u32 {
            let mut value = new_sparse();
            value.truncate(HEADER_BYTES);
            let len = usize::try_from(next() % 24).unwrap_or(0);
            value.extend((0..len).map(|_| u8::try_from(next() & 0xff).unwrap_or(0)));
            let mut registers = [0u8; REGISTERS];
            let _ = merge_into(&mut registers, &value);
            let _ = count(&value);
            let _ = to_dense(&mut value.clone());
            let limit = [0, 20, 3000][usize::try_from(round % 3).unwrap_or(0)];
            for element in 0..4u32 {
                let _ = add(&mut value, &element.to_le_bytes(), limit);
            }
            let _ = count(&value);
            assert!(value.len() >= HEADER_BYTES);
        }
    }

    // Proves corrupt sparse values are reported, never trusted or panicked on.
    #[test]
    fn corrupt_values_are_errors() {
        let mut short = new_sparse();
        short.pop();
        assert_eq!(count(&short), Err(Corrupt));
        let mut long = new_sparse();
        long.push(0x00);
        assert_eq!(count(&long), Err(Corrupt));
        assert_eq!(to_dense(&mut long.clone()), Err(Corrupt));
        let mut registers = [0u8; REGISTERS];
        assert_eq!(merge_into(&mut registers, &long), Err(Corrupt));
        // A VAL past the last register, even after runs that add up, is corrupt (as in
        // redis-server 7.0.15 with the CVE-2025-32023 fix).
        let mut trailing =
            b"HYLL\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x80\x7f\xfe\xfc\xfc".to_vec();
        assert_eq!(merge_into(&mut registers, &trailing), Err(Corrupt));
        assert_eq!(to_dense(&mut trailing), Err(Corrupt));
        let mut header_only = new_sparse();
        header_only.truncate(HEADER_BYTES);
        assert_eq!(add(&mut header_only, b"x", 3000), Err(Corrupt));
        for byte in 0..=255u8 {
            let mut odd = new_sparse();
            odd.extend_from_slice(&[byte; 7]);
            let _ = add(&mut odd, b"element", 3000);
            let _ = count(&odd);
        }
    }
}
