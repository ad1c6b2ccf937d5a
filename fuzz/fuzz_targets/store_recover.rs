//! The file store's recovery on arbitrary bytes: a data file (and, when the input asks, an
//! index checkpoint) holding the input must open as a store or fail with an error — never
//! panic, hang, or serve an entry that fails its checksum.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use weft_store::Store;
use weft_store::file::{FileStore, FileStoreConfig};

const SEGMENTS: u32 = 16;

fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("weft-fuzz-store-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let dir = dir();
    let _ = std::fs::remove_dir_all(dir);
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    // Low bit: the input is a checkpoint next to an empty log; otherwise it is the log,
    // optionally split over two files at a point the selector picks.
    if selector & 1 == 1 {
        let _ = std::fs::write(dir.join("index.ckpt"), rest);
        let _ = std::fs::write(dir.join("00000001.log"), b"");
    } else if selector & 2 == 2 && !rest.is_empty() {
        let split = usize::from(selector >> 2) * rest.len() / 64;
        let (first, second) = rest.split_at(split.min(rest.len()));
        let _ = std::fs::write(dir.join("00000001.log"), first);
        let _ = std::fs::write(dir.join("00000002.log"), second);
    } else {
        let _ = std::fs::write(dir.join("00000001.log"), rest);
    }
    let Ok(store) = FileStore::open(FileStoreConfig::new(dir, SEGMENTS)) else {
        return;
    };
    let segments: Vec<u32> = (0..SEGMENTS).collect();
    let mut keys = Vec::new();
    let _ = store.publish(&segments, &mut |entry| keys.push(entry.key_bytes()));
    for key in keys {
        let segment = weft_core_segment(&key);
        let _ = store.load(segment, &key);
    }
    let _ = store.size(None);
    let _ = store.stop();
});

fn weft_core_segment(key: &[u8]) -> u32 {
    // The store indexes records by the segment they declare; any segment in range is valid.
    u32::from(key.first().copied().unwrap_or(0)) % SEGMENTS
}
