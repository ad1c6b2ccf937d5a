//! Declared lengths from untrusted input never drive allocation size.
#![allow(clippy::unwrap_used)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::BytesMut;
use weft_resp::{Limits, RequestDecoder, parse_request};

/// Records the largest single allocation made while armed.
struct LargestAllocation;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

// SAFETY: delegates every call to the system allocator unchanged.
unsafe impl GlobalAlloc for LargestAllocation {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: LargestAllocation = LargestAllocation;

#[test]
fn huge_declared_counts_and_lengths_allocate_little() {
    // `*1048576` and `$536870912` headers with no data behind them make the
    // decoder allocate at most a few KiB, not slots or bytes for the declared
    // sizes. (One test per binary: the allocator counter is process-wide.)
    let mut buf = BytesMut::with_capacity(64);
    buf.extend_from_slice(b"*1048576\r\n$536870912\r\n");
    let mut decoder = RequestDecoder::default();
    LARGEST.store(0, Ordering::Relaxed);
    assert_eq!(decoder.decode(&mut buf).unwrap(), None);
    assert_eq!(
        parse_request(
            b"*1048576\r\n$3\r\nabc\r\n$536870912\r\n",
            &Limits::default()
        )
        .unwrap(),
        None
    );
    let largest = LARGEST.load(Ordering::Relaxed);
    assert!(
        largest <= 64 * 1024,
        "largest allocation was {largest} bytes"
    );
}
