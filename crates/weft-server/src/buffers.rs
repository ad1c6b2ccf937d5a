//! The buffer policy every protocol's connection loop follows: buffers start small, grow
//! for a big request or reply, and are released once it is done, so that an idle connection
//! holds little memory however large its past traffic.

use bytes::BytesMut;

/// A buffer's starting size.
pub(crate) const INITIAL_BYTES: usize = 16 * 1024;
/// Buffers that grew beyond this for one big request or reply are released afterwards.
const KEEP_BYTES: usize = 1 << 20;
/// Room below which the input buffer grows before the next read.
const READ_ROOM_MIN_BYTES: usize = 4096;

/// A fresh buffer.
pub(crate) fn new() -> BytesMut {
    BytesMut::with_capacity(INITIAL_BYTES)
}

/// After the output was written and cleared: releases it if one big reply grew it.
pub(crate) fn release_output(output: &mut BytesMut) {
    if output.capacity() > KEEP_BYTES {
        *output = new();
    }
}

/// Before a read: releases an emptied input buffer that one big request grew, then makes
/// room for the `needed` bytes the decoder waits for (0 when it does not know), and at least
/// for a read of a few KiB.
pub(crate) fn prepare_input(input: &mut BytesMut, needed: usize) {
    if input.is_empty() && input.capacity() > KEEP_BYTES {
        *input = new();
    }
    if needed > input.len() {
        input.reserve(needed - input.len());
    } else if input.capacity() - input.len() < READ_ROOM_MIN_BYTES {
        input.reserve(INITIAL_BYTES);
    }
}
