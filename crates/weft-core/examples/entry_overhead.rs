//! Memory overhead per entry, measured in-process: inserts 1,000,000 entries with 10-byte keys
//! and 512-byte values into a default (unbounded) cache and prints the resident-set growth
//! per entry beyond the payload, next to what the cache charges itself (`memory_bytes`).
//!
//! Run in release: `cargo run --release -p weft-core --example entry_overhead`. Linux only
//! (reads `/proc/self/statm`); the figure depends on the allocator (glibc malloc here).

use std::io::Write as _;

use weft_core::{CacheManager, ManagerConfig, WriteOptions};

const ENTRIES: usize = 1_000_000;
const KEY_BYTES: usize = 10;
const VALUE_BYTES: usize = 512;
/// x86-64 Linux base page size; `statm` counts pages.
const PAGE_BYTES: usize = 4096;

/// Resident set size in bytes, from the second field of `/proc/self/statm`.
fn rss_bytes() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|field| field.parse().ok())
        .unwrap_or(0);
    pages * PAGE_BYTES
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let manager = CacheManager::new(ManagerConfig::default())?;
    let cache = manager.cache("default").ok_or("no default cache")?;
    let value = vec![0x5au8; VALUE_BYTES];
    let options = WriteOptions::default().ignore_return_values();
    let mut key = [0u8; KEY_BYTES];

    let before = rss_bytes();
    if before == 0 {
        return Err("cannot read /proc/self/statm".into());
    }
    for i in 0..ENTRIES {
        // "k" and nine digits: ten bytes, built in place so no key outlives its insert.
        write!(&mut key[..], "k{i:09}")?;
        cache.put(&key, &value, &options)?;
    }
    let after = rss_bytes();

    let entries = cache.size();
    let payload = KEY_BYTES + VALUE_BYTES;
    let growth_per_entry = (after - before) as f64 / entries as f64;
    let charged_per_entry = cache.memory_bytes() as f64 / entries as f64;
    println!("entries:                      {entries}");
    println!("payload per entry:            {payload} B (key {KEY_BYTES} + value {VALUE_BYTES})");
    println!(
        "RSS growth:                   {:.1} MiB",
        (after - before) as f64 / f64::from(1 << 20)
    );
    println!("RSS growth per entry:         {growth_per_entry:.1} B");
    println!(
        "overhead per entry (RSS):     {:.1} B",
        growth_per_entry - payload as f64
    );
    println!("memory_bytes() per entry:     {charged_per_entry:.1} B");
    println!(
        "overhead per entry (charged): {:.1} B",
        charged_per_entry - payload as f64
    );
    Ok(())
}
