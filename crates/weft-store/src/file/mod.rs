//! The file store: a log-structured store of cache entries.
//!
//! Every change is appended as a checksummed record (see `record`) to the active data file;
//! files are numbered and never rewritten, only appended to, compacted into the active file
//! and deleted. An in-memory index per segment maps each key to the file, offset and length of
//! its newest record, with its sequence number and expiry. At start the index is rebuilt from
//! the checkpoint written at the last clean stop (if it is still valid) plus every record
//! written after it; a torn record at the end of the last file is cut off.
//!
//! Writers append records to an in-memory buffer under a mutex and return a sequence number;
//! one flusher thread writes the buffer to the file and syncs it. In `sync` durability a
//! writer waits until the flusher has synced past its sequence, so every writer that arrived
//! while a sync was running shares the next one: group commit. A failed write or sync
//! poisons the store: it refuses writes from then on and fails every waiter that is not yet
//! durable, since retrying an fsync after a failure cannot tell what reached the disk.
//!
//! An open store holds the lock of its directory (`store.lock`, see [`crate::lock`]) until
//! it is stopped or dropped: a second open of the directory, by this process or another, is
//! refused with the holder's process id. [`check`] and [`repair`] examine and cut damaged
//! data files of a store nobody has open (`weft store check|repair`).

mod check;
mod maintenance;
mod record;
#[cfg(test)]
mod tests;

pub use check::{
    Damage, DamageKind, FileCheck, StoreCheck, StoreRepair, Survey, check, lock_store, repair,
    survey,
};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hashbrown::HashMap;
use parking_lot::{Condvar, Mutex, RwLock};
use tokio::sync::watch;
use weft_core::CacheEntry;
use weft_core::DurabilityMode;
use weft_core::entry::StoredExpiration;
use weft_core::persistence::BoxFuture;

use crate::disk::{Disk, DiskFile, RealDisk};
use crate::lock::DirLock;
use crate::store::{Characteristics, Store, StoreError};
use record::Kind;

/// The checkpoint file's name.
const CHECKPOINT_NAME: &str = "index.ckpt";
const CHECKPOINT_MAGIC: &[u8; 8] = b"WEFTIDX1";
const DATA_SUFFIX: &str = ".log";
/// How often the compactor looks for files worth compacting.
const COMPACTION_TICK: Duration = Duration::from_secs(1);
/// Compaction sleeps this long after copying `COMPACTION_BURST_BYTES`, so it never takes the
/// disk from writers for long.
const COMPACTION_PAUSE: Duration = Duration::from_millis(5);
const COMPACTION_BURST_BYTES: u64 = 4 << 20;
/// In `sync` durability, how often the flusher thread sweeps up records no writer flushed.
const SYNC_SWEEP_INTERVAL: Duration = Duration::from_millis(5);
/// In `none` durability, the longest a record waits in the buffer before it is written.
const NONE_WRITE_INTERVAL: Duration = Duration::from_millis(1);
/// The active file is zero-filled this far ahead of its records, so that syncing a write
/// does not also have to commit a new file size (a metadata journal commit on ext4 and XFS):
/// measured here, `fdatasync` of writes into zero-filled space ran 1.2–1.3× as often per
/// second as of appends. A sealed file is cut back to its records.
const PREALLOCATE_BYTES: u64 = 4 << 20;
/// A file's records are read in one call by `publish` when it wants at least this many.
const PUBLISH_SPAN_SLOTS_MIN: usize = 256;
/// Bytes the flusher writes in one call at most.
const PENDING_FLUSH_BYTES_MAX: usize = 64 << 20;

/// How a file store is set up.
#[derive(Debug, Clone)]
pub struct FileStoreConfig {
    /// Its directory (created if missing).
    pub dir: PathBuf,
    /// The cache's segment count.
    pub segments: u32,
    /// When writes are durable.
    pub durability: DurabilityMode,
    /// Sync interval of `Periodic`.
    pub sync_interval: Duration,
    /// Largest data file before the next is started.
    pub file_size_max: u64,
    /// Compact a sealed file when its live bytes fall below this percentage.
    pub compaction_threshold_percent: u8,
    /// Refuse writes.
    pub read_only: bool,
    /// Who opens the store, written into its lock file after the process id (for example
    /// `weft server, node a`), so that a process refused the store can say who has it.
    pub holder: String,
}

impl FileStoreConfig {
    /// Defaults for a store in `dir` with `segments` segments.
    #[must_use]
    pub fn new(dir: impl Into<PathBuf>, segments: u32) -> Self {
        Self {
            dir: dir.into(),
            segments: segments.max(1),
            durability: DurabilityMode::Sync,
            sync_interval: Duration::from_secs(1),
            file_size_max: 64 << 20,
            compaction_threshold_percent: 50,
            read_only: false,
            holder: String::new(),
        }
    }
}

/// Where a key's newest record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    file: u32,
    offset: u64,
    len: u32,
    sequence: u64,
    /// `u64::MAX` when it never expires.
    expires_at_ms: u64,
    tombstone: bool,
}

impl Slot {
    fn is_dead(&self, now_ms: u64) -> bool {
        self.tombstone || self.expires_at_ms <= now_ms
    }
}

type SegmentIndex = HashMap<Box<[u8]>, Slot, foldhash::fast::RandomState>;

/// One data file.
#[derive(Debug)]
struct DataFile {
    handle: Mutex<Option<Arc<dyn DiskFile>>>,
    /// Bytes of records the index points to.
    live_bytes: AtomicU64,
    /// Bytes of records appended.
    total_bytes: AtomicU64,
    /// The lowest sequence number of a record in the file.
    min_sequence: AtomicU64,
}

impl DataFile {
    fn new() -> Self {
        Self {
            handle: Mutex::new(None),
            live_bytes: AtomicU64::new(0),
            total_bytes: AtomicU64::new(0),
            min_sequence: AtomicU64::new(u64::MAX),
        }
    }
}

/// Records appended but not yet written to their file.
#[derive(Debug)]
struct Chunk {
    file: u32,
    start: u64,
    data: Vec<u8>,
    last_sequence: u64,
}

#[derive(Debug)]
struct Log {
    /// The last sequence number handed out.
    sequence: u64,
    active_file: u32,
    /// Length of the active file once everything pending is written.
    active_len: u64,
    pending: Vec<Chunk>,
    /// Chunks the flusher is writing (kept readable until they are in the file).
    in_flight: Option<Arc<Vec<Chunk>>>,
    /// A sync was asked for outside `sync` durability (compaction, clear, stop).
    sync_requested: bool,
    stopping: bool,
}

/// What the writer of the log (whoever flushes: a waiting writer or the flusher thread)
/// keeps between flushes. Holding its mutex is what makes a thread the one that flushes.
#[derive(Debug)]
struct FlushState {
    /// The file written to since the last sync.
    unsynced: Option<Arc<dyn DiskFile>>,
    last_sync: Instant,
    /// The file being written: its id, handle, and how far it is zero-filled.
    current: Option<(u32, Arc<dyn DiskFile>, u64)>,
}

/// Durable progress: the highest durable sequence and how many flushes have ended.
#[derive(Debug, Clone, Copy, Default)]
struct Durable {
    position: u64,
    flushes: u64,
}

#[derive(Debug)]
struct Inner {
    config: FileStoreConfig,
    disk: Arc<dyn Disk>,
    index: Box<[RwLock<SegmentIndex>]>,
    log: Mutex<Log>,
    flusher_wake: Condvar,
    /// The data files. Taken after `log` when both are held (an append counts its record in
    /// its file before the log lets anyone else see it); never held while taking `log`.
    files: RwLock<BTreeMap<u32, Arc<DataFile>>>,
    flush: Mutex<FlushState>,
    durable: Mutex<Durable>,
    durable_changed: Condvar,
    durable_watch: watch::Sender<(u64, bool)>,
    poison: Mutex<Option<String>>,
    poisoned: AtomicBool,
    stopped: AtomicBool,
    max_version: AtomicU64,
    /// Held by compaction and clear, which must not interleave.
    compaction: Mutex<()>,
    /// Where a test stops a writer just after its record joined the log.
    #[cfg(test)]
    append_pause: tests::Pause,
    /// Where a test stops compaction as it chooses the files to compact.
    #[cfg(test)]
    candidates_pause: tests::Pause,
    compactor_wake: Condvar,
    compactor_stop: Mutex<bool>,
    /// The directory's lock, held until the store is stopped or dropped (nothing is
    /// written after either).
    lock: Mutex<Option<DirLock>>,
}

/// The log-structured file store.
#[derive(Debug)]
pub struct FileStore {
    inner: Arc<Inner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

/// Counts of what recovery found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Keys with a live entry.
    pub entries: u64,
    /// Records read from data files (the checkpoint's are not counted).
    pub records_replayed: u64,
    /// Whether a checkpoint was used.
    pub from_checkpoint: bool,
    /// Bytes cut from the end of the last file (a torn write).
    pub truncated_bytes: u64,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn file_name(id: u32) -> String {
    format!("{id:08}{DATA_SUFFIX}")
}

impl FileStore {
    /// Opens (or creates) the store in `config.dir` on the real disk.
    ///
    /// # Errors
    /// [`StoreError::Locked`] if another process (or another open store in this one) has
    /// the directory; otherwise if the directory cannot be used, or data files are corrupt
    /// other than at the tail.
    pub fn open(config: FileStoreConfig) -> Result<Self, StoreError> {
        Self::open_on(config, Arc::new(RealDisk)).map(|(store, _)| store)
    }

    /// Opens the store on the given disk; also reports what recovery found.
    ///
    /// # Errors
    /// As [`FileStore::open`].
    pub fn open_on(
        config: FileStoreConfig,
        disk: Arc<dyn Disk>,
    ) -> Result<(Self, Recovery), StoreError> {
        let dir = config.dir.clone();
        disk.create_dir_all(&dir)
            .map_err(|e| StoreError::io(format!("create {}", dir.display()), e))?;
        // Before recovery, which may cut a file another process is still writing. The lock
        // is taken on the real file system whatever the disk: it keeps processes apart, it
        // is not data a test would tear.
        let lock = lock_store(&dir, &config.holder)?;
        let segments = config.segments.max(1) as usize;
        let index: Box<[RwLock<SegmentIndex>]> = (0..segments)
            .map(|_| RwLock::new(HashMap::default()))
            .collect();
        let (durable_watch, _) = watch::channel((0, false));
        let inner = Inner {
            config,
            disk,
            index,
            log: Mutex::new(Log {
                sequence: 0,
                active_file: 0,
                active_len: 0,
                pending: Vec::new(),
                in_flight: None,
                sync_requested: false,
                stopping: false,
            }),
            flusher_wake: Condvar::new(),
            files: RwLock::new(BTreeMap::new()),
            flush: Mutex::new(FlushState {
                unsynced: None,
                last_sync: Instant::now(),
                current: None,
            }),
            durable: Mutex::new(Durable::default()),
            durable_changed: Condvar::new(),
            durable_watch,
            poison: Mutex::new(None),
            poisoned: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            max_version: AtomicU64::new(0),
            compaction: Mutex::new(()),
            #[cfg(test)]
            append_pause: tests::Pause::default(),
            #[cfg(test)]
            candidates_pause: tests::Pause::default(),
            compactor_wake: Condvar::new(),
            compactor_stop: Mutex::new(false),
            lock: Mutex::new(Some(lock)),
        };
        let recovery = inner.recover()?;
        let inner = Arc::new(inner);
        let mut threads = Vec::new();
        let flusher = Arc::clone(&inner);
        threads.push(
            std::thread::Builder::new()
                .name("weft-store-flush".to_owned())
                .spawn(move || flusher.flush_loop())
                .map_err(|e| StoreError::io("start the flusher thread", e))?,
        );
        if !inner.config.read_only {
            let compactor = Arc::clone(&inner);
            threads.push(
                std::thread::Builder::new()
                    .name("weft-store-compact".to_owned())
                    .spawn(move || compactor.compaction_loop())
                    .map_err(|e| StoreError::io("start the compaction thread", e))?,
            );
        }
        Ok((
            Self {
                inner,
                threads: Mutex::new(threads),
            },
            recovery,
        ))
    }

    /// Compacts every sealed file under the threshold now (tests and tools).
    ///
    /// # Errors
    /// If reading or writing failed.
    pub fn compact_now(&self) -> Result<usize, StoreError> {
        self.inner.compact_eligible(true)
    }

    /// Data files and their live and total bytes (tests and tools).
    #[must_use]
    pub fn file_usage(&self) -> Vec<(u32, u64, u64)> {
        self.inner
            .files
            .read()
            .iter()
            .map(|(id, f)| {
                (
                    *id,
                    f.live_bytes.load(Ordering::Relaxed),
                    f.total_bytes.load(Ordering::Relaxed),
                )
            })
            .collect()
    }

    /// Whether a failure poisoned the store.
    #[must_use]
    pub fn is_poisoned(&self) -> bool {
        self.inner.poisoned.load(Ordering::Acquire)
    }
}

impl Inner {
    fn path(&self, name: &str) -> PathBuf {
        self.config.dir.join(name)
    }

    fn data_file(&self, id: u32) -> Arc<DataFile> {
        if let Some(file) = self.files.read().get(&id) {
            return Arc::clone(file);
        }
        let mut files = self.files.write();
        Arc::clone(files.entry(id).or_insert_with(|| Arc::new(DataFile::new())))
    }

    fn handle(&self, id: u32, create: bool) -> Result<Arc<dyn DiskFile>, StoreError> {
        let file = self
            .files
            .read()
            .get(&id)
            .cloned()
            .ok_or_else(|| StoreError::io(format!("read {}", file_name(id)), "no such file"))?;
        let mut handle = file.handle.lock();
        if let Some(handle) = handle.as_ref() {
            return Ok(Arc::clone(handle));
        }
        let path = self.path(&file_name(id));
        let opened = self
            .disk
            .open(&path, create)
            .map_err(|e| StoreError::io(format!("open {}", path.display()), e))?;
        *handle = Some(Arc::clone(&opened));
        Ok(opened)
    }

    fn check_writable(&self) -> Result<(), StoreError> {
        if self.poisoned.load(Ordering::Acquire) {
            let reason = self.poison.lock().clone().unwrap_or_default();
            return Err(StoreError::Poisoned(reason));
        }
        if self.stopped.load(Ordering::Acquire) {
            return Err(StoreError::Stopped);
        }
        if self.config.read_only {
            return Err(StoreError::ReadOnly);
        }
        Ok(())
    }

    fn poison_with(&self, reason: String) {
        tracing::error!(dir = %self.config.dir.display(), %reason, "file store poisoned: it refuses writes from now on");
        *self.poison.lock() = Some(reason);
        self.poisoned.store(true, Ordering::Release);
        let durable = self.durable.lock().position;
        self.durable_changed.notify_all();
        self.durable_watch.send_replace((durable, true));
    }

    /// Appends one record under the log lock; returns (file, offset, len, sequence).
    fn append(
        &self,
        sequence: Option<u64>,
        encode: impl FnOnce(&mut Vec<u8>, u64) -> usize,
    ) -> (u32, u64, u32, u64) {
        let mut log = self.log.lock();
        let sequence = sequence.unwrap_or_else(|| {
            log.sequence += 1;
            log.sequence
        });
        if log.active_len >= self.config.file_size_max {
            log.active_file += 1;
            log.active_len = 0;
        }
        let file = log.active_file;
        let start_new_chunk = log
            .pending
            .last()
            .is_none_or(|chunk| chunk.file != file || chunk.data.len() >= PENDING_FLUSH_BYTES_MAX);
        if start_new_chunk {
            let start = log.active_len;
            log.pending.push(Chunk {
                file,
                start,
                data: Vec::new(),
                last_sequence: sequence,
            });
        }
        let offset = log.active_len;
        let chunk = log.pending.last_mut().unwrap_or_else(|| unreachable!());
        let len = encode(&mut chunk.data, sequence);
        chunk.last_sequence = chunk.last_sequence.max(sequence);
        log.active_len += len as u64;
        // The record's file is known and counts the record before the log lock is released:
        // from then on a flush may write the record — a flush that found no such file would
        // poison the store — and, once a later record starts the next file, seal this one,
        // cutting it to `total_bytes`. A record counted after that would be cut off the disk
        // though acknowledged, and compaction would read the file past its end.
        let data_file = self.data_file(file);
        data_file
            .total_bytes
            .fetch_add(len as u64, Ordering::Relaxed);
        data_file
            .min_sequence
            .fetch_min(sequence, Ordering::Relaxed);
        drop(log);
        #[cfg(test)]
        self.append_pause.point();
        // In `sync` durability the writers waiting for their records flush them; the flusher
        // thread only sweeps up what nobody waits for.
        if self.config.durability != DurabilityMode::Sync {
            self.flusher_wake.notify_one();
        }
        (
            file,
            offset,
            u32::try_from(len).unwrap_or(u32::MAX),
            sequence,
        )
    }

    /// Points `key` at `slot`, moving live-byte accounting from its previous record.
    fn place(&self, index: &mut SegmentIndex, key: &[u8], slot: Slot) {
        let previous = match index.get_mut(key) {
            Some(existing) => Some(std::mem::replace(existing, slot)),
            None => {
                index.insert(key.into(), slot);
                None
            }
        };
        let files = self.files.read();
        if let Some(previous) = previous
            && let Some(file) = files.get(&previous.file)
        {
            file.live_bytes
                .fetch_sub(u64::from(previous.len), Ordering::Relaxed);
        }
        if let Some(file) = files.get(&slot.file) {
            file.live_bytes
                .fetch_add(u64::from(slot.len), Ordering::Relaxed);
        }
    }

    fn unplace(&self, index: &mut SegmentIndex, key: &[u8]) {
        if let Some(previous) = index.remove(key)
            && let Some(file) = self.files.read().get(&previous.file)
        {
            file.live_bytes
                .fetch_sub(u64::from(previous.len), Ordering::Relaxed);
        }
    }

    fn segment_index(&self, segment: u32) -> Result<&RwLock<SegmentIndex>, StoreError> {
        self.index.get(segment as usize).ok_or_else(|| {
            StoreError::io(
                "locate segment",
                format!(
                    "segment {segment} out of range (the store has {})",
                    self.index.len()
                ),
            )
        })
    }

    fn write(&self, segment: u32, entry: &CacheEntry) -> Result<u64, StoreError> {
        self.check_writable()?;
        let mut index = self.segment_index(segment)?.write();
        let (file, offset, len, sequence) = self.append(None, |out, sequence| {
            record::encode_entry(out, segment, sequence, entry)
        });
        let expires_at_ms =
            record::expires_at(&entry.expiration(), entry.last_used_ms().unwrap_or(0))
                .unwrap_or(u64::MAX);
        self.place(
            &mut index,
            entry.key(),
            Slot {
                file,
                offset,
                len,
                sequence,
                expires_at_ms,
                tombstone: false,
            },
        );
        self.max_version
            .fetch_max(entry.version(), Ordering::Relaxed);
        Ok(sequence)
    }

    fn delete_locked(&self, index: &mut SegmentIndex, segment: u32, key: &[u8]) -> u64 {
        let (file, offset, len, sequence) = self.append(None, |out, sequence| {
            record::encode(
                out,
                Kind::Tombstone,
                segment,
                sequence,
                0,
                StoredExpiration::IMMORTAL,
                0,
                key,
                &[],
            )
        });
        self.place(
            index,
            key,
            Slot {
                file,
                offset,
                len,
                sequence,
                expires_at_ms: u64::MAX,
                tombstone: true,
            },
        );
        sequence
    }

    fn delete(&self, segment: u32, key: &[u8]) -> Result<u64, StoreError> {
        self.check_writable()?;
        let mut index = self.segment_index(segment)?.write();
        if index.get(key).is_none_or(|slot| slot.tombstone) {
            // Nothing stored: no record needed (recovery would find nothing either).
            return Ok(self.log.lock().sequence);
        }
        Ok(self.delete_locked(&mut index, segment, key))
    }

    /// The bytes of the record a slot points to, from the pending buffer or the file.
    fn read_slot(&self, slot: &Slot) -> Result<Vec<u8>, StoreError> {
        let len = slot.len as usize;
        {
            let log = self.log.lock();
            let in_flight = log.in_flight.as_deref().map(Vec::as_slice).unwrap_or(&[]);
            for chunk in log.pending.iter().chain(in_flight.iter()) {
                if chunk.file == slot.file
                    && chunk.start <= slot.offset
                    && slot.offset + len as u64 <= chunk.start + chunk.data.len() as u64
                {
                    let at = usize::try_from(slot.offset - chunk.start).unwrap_or(usize::MAX);
                    return Ok(chunk.data[at..at + len].to_vec());
                }
            }
        }
        let handle = self.handle(slot.file, false)?;
        let mut buf = vec![0; len];
        handle.read_exact_at(&mut buf, slot.offset).map_err(|e| {
            StoreError::io(
                format!("read {} at {}", file_name(slot.file), slot.offset),
                e,
            )
        })?;
        Ok(buf)
    }

    fn entry_at(&self, slot: &Slot) -> Result<CacheEntry, StoreError> {
        let bytes = self.read_slot(slot)?;
        match record::decode(&bytes) {
            Ok((record, _)) if record.kind == Kind::Put => {
                record.to_entry().map_err(|_| StoreError::Corrupt {
                    file: file_name(slot.file),
                    offset: slot.offset,
                    reason: "malformed structure value".to_owned(),
                })
            }
            Ok(_) => Err(StoreError::Corrupt {
                file: file_name(slot.file),
                offset: slot.offset,
                reason: "index points at a record that is not an entry".to_owned(),
            }),
            Err(error) => Err(StoreError::Corrupt {
                file: file_name(slot.file),
                offset: slot.offset,
                reason: format!("{error:?}"),
            }),
        }
    }

    fn load(&self, segment: u32, key: &[u8]) -> Result<Option<CacheEntry>, StoreError> {
        // Compaction may move the record and delete its file between the index lookup and
        // the read; then the index has the new place.
        let mut attempts = 0;
        loop {
            let slot = match self.segment_index(segment)?.read().get(key) {
                Some(slot) if !slot.is_dead(now_ms()) => *slot,
                _ => return Ok(None),
            };
            match self.entry_at(&slot) {
                Err(StoreError::Io { .. }) if attempts < 3 => attempts += 1,
                other => return other.map(Some),
            }
        }
    }

    fn publish(
        &self,
        segments: &[u32],
        visit: &mut dyn FnMut(CacheEntry),
    ) -> Result<(), StoreError> {
        let now = now_ms();
        let mut slots: Vec<(u32, Box<[u8]>, Slot)> = Vec::new();
        for &segment in segments {
            slots.extend(
                self.segment_index(segment)?
                    .read()
                    .iter()
                    .filter(|(_, slot)| !slot.is_dead(now))
                    .map(|(key, slot)| (segment, key.clone(), *slot)),
            );
        }
        // In file order, and a file's records read with one call when there are many: a
        // preload then reads each data file once, front to back.
        slots.sort_unstable_by_key(|(_, _, slot)| (slot.file, slot.offset));
        let mut start = 0;
        while start < slots.len() {
            let file = slots[start].2.file;
            let end = start + slots[start..].partition_point(|(_, _, slot)| slot.file == file);
            let group = &slots[start..end];
            let span = if group.len() >= PUBLISH_SPAN_SLOTS_MIN {
                self.read_span(group)
            } else {
                None
            };
            for (segment, key, slot) in group {
                let from_span = span.as_ref().and_then(|(base, bytes)| {
                    let at = usize::try_from(slot.offset - base).ok()?;
                    let record = bytes.get(at..at + slot.len as usize)?;
                    match record::decode(record) {
                        Ok((record, _)) if record.kind == Kind::Put && record.key == &key[..] => {
                            record.to_entry().ok()
                        }
                        _ => None,
                    }
                });
                if let Some(entry) = from_span {
                    visit(entry);
                    continue;
                }
                match self.entry_at(slot) {
                    Ok(entry) => visit(entry),
                    // Moved by compaction meanwhile: read it where it is now.
                    Err(StoreError::Io { .. }) => {
                        if let Some(entry) = self.load(*segment, key)? {
                            visit(entry);
                        }
                    }
                    Err(error) => return Err(error),
                }
            }
            start = end;
        }
        Ok(())
    }

    /// The bytes from the first to the end of the last of `group`'s records (one file), or
    /// `None` if they cannot be read in one go (records are then read one by one).
    fn read_span(&self, group: &[(u32, Box<[u8]>, Slot)]) -> Option<(u64, Vec<u8>)> {
        let first = group.first()?.2;
        let last = group.last()?.2;
        let base = first.offset;
        let len = usize::try_from(last.offset + u64::from(last.len) - base).ok()?;
        let handle = self.handle(first.file, false).ok()?;
        let mut bytes = vec![0; len];
        handle.read_exact_at(&mut bytes, base).ok()?;
        Some((base, bytes))
    }

    fn position(&self) -> u64 {
        self.log.lock().sequence
    }

    fn durable_position(&self) -> u64 {
        self.durable.lock().position
    }

    fn poisoned_error(&self) -> StoreError {
        StoreError::Poisoned(self.poison.lock().clone().unwrap_or_default())
    }

    /// Waits until `position` is synced, flushing the log itself when no one else is: the
    /// first waiter writes and syncs everything appended so far, and the writers that
    /// arrive meanwhile share its next sync (group commit without a hand-off to a thread).
    fn wait_synced(&self, position: u64) -> Result<(), StoreError> {
        loop {
            let flushes = {
                let durable = self.durable.lock();
                if durable.position >= position {
                    return Ok(());
                }
                durable.flushes
            };
            if self.poisoned.load(Ordering::Acquire) {
                return Err(self.poisoned_error());
            }
            if let Some(state) = self.flush.try_lock() {
                self.flush_locked(state, true);
                continue;
            }
            let mut durable = self.durable.lock();
            while durable.flushes == flushes
                && durable.position < position
                && !self.poisoned.load(Ordering::Acquire)
            {
                self.durable_changed
                    .wait_for(&mut durable, Duration::from_millis(50));
            }
        }
    }

    /// The handle to write `file` through. Moving to a new file first syncs the previous one
    /// and cuts it back to its records (its zero-filled tail), so that only the last file can
    /// end in a torn record or in zeros.
    fn switch_to(&self, state: &mut FlushState, file: u32) -> Result<Arc<dyn DiskFile>, String> {
        if let Some((id, handle, _)) = &state.current
            && *id == file
        {
            return Ok(Arc::clone(handle));
        }
        if let Some((id, handle, _)) = state.current.take() {
            self.seal(id, &handle)?;
            state.unsynced = None;
        }
        let handle = self.handle(file, true).map_err(|e| e.to_string())?;
        let allocated = handle
            .len()
            .map_err(|e| format!("stat {}: {e}", file_name(file)))?;
        state.current = Some((file, Arc::clone(&handle), allocated));
        state.unsynced = Some(Arc::clone(&handle));
        Ok(handle)
    }

    /// Syncs a file and cuts it to the length of its records.
    fn seal(&self, id: u32, handle: &Arc<dyn DiskFile>) -> Result<(), String> {
        let len = self
            .files
            .read()
            .get(&id)
            .map(|file| file.total_bytes.load(Ordering::Relaxed));
        if self.config.durability != DurabilityMode::None {
            handle
                .sync_data()
                .map_err(|e| format!("sync {}: {e}", file_name(id)))?;
        }
        if let Some(len) = len {
            handle
                .truncate(len)
                .map_err(|e| format!("seal {}: {e}", file_name(id)))?;
        }
        Ok(())
    }

    /// Zero-fills the current file up to past `end`, a few MiB at a time.
    fn preallocate(&self, state: &mut FlushState, end: u64) -> Result<(), String> {
        let Some((id, handle, allocated)) = state.current.as_mut() else {
            return Ok(());
        };
        if end <= *allocated || self.config.durability == DurabilityMode::None {
            return Ok(());
        }
        let target = end + PREALLOCATE_BYTES.min(self.config.file_size_max);
        let zeros = vec![0u8; usize::try_from(target - *allocated).unwrap_or(0)];
        handle
            .write_at(&zeros, *allocated)
            .map_err(|e| format!("preallocate {}: {e}", file_name(*id)))?;
        *allocated = target;
        Ok(())
    }

    /// Cuts the file being written back to its records (at a clean stop).
    fn seal_current(&self) -> Result<(), StoreError> {
        let mut state = self.flush.lock();
        if let Some((id, handle, _)) = state.current.take() {
            self.seal(id, &handle)
                .map_err(|e| StoreError::io("seal the log", e))?;
        }
        state.unsynced = None;
        Ok(())
    }

    /// Takes everything appended, writes it and, if asked, syncs it; then publishes the new
    /// durable position. Consumes the flush lock so that it is released before waiters are
    /// woken (a woken waiter may have to flush next).
    fn flush_locked(&self, mut state: parking_lot::MutexGuard<'_, FlushState>, sync: bool) {
        if self.poisoned.load(Ordering::Acquire) {
            // Nothing more reaches the disk; waiters only need to hear that.
            drop(state);
            self.publish_durable(None);
            return;
        }
        let (chunks, taken_up_to) = {
            let mut log = self.log.lock();
            let chunks = Arc::new(std::mem::take(&mut log.pending));
            log.in_flight = Some(Arc::clone(&chunks));
            (chunks, log.sequence)
        };
        let mut failure = None;
        for chunk in chunks.iter() {
            if failure.is_some() {
                break;
            }
            let handle = match self.switch_to(&mut state, chunk.file) {
                Ok(handle) => handle,
                Err(error) => {
                    failure = Some(error);
                    break;
                }
            };
            let end = chunk.start + chunk.data.len() as u64;
            if let Err(error) = self.preallocate(&mut state, end) {
                failure = Some(error);
                break;
            }
            if let Err(error) = handle.write_at(&chunk.data, chunk.start) {
                failure = Some(format!("write {}: {error}", file_name(chunk.file)));
                break;
            }
            state.unsynced = Some(handle);
        }
        self.log.lock().in_flight = None;
        let mut synced = false;
        if failure.is_none() && sync {
            if let Some(handle) = state.unsynced.take()
                && let Err(error) = handle.sync_data()
            {
                failure = Some(format!("fsync {}: {error}", self.config.dir.display()));
            }
            state.last_sync = Instant::now();
            synced = failure.is_none();
        }
        drop(state);
        if let Some(reason) = failure {
            self.poison_with(reason);
        }
        self.publish_durable(synced.then_some(taken_up_to));
    }

    /// Ends a flush: advances the durable position (if the flush synced) and wakes every
    /// waiter, blocking and async.
    fn publish_durable(&self, synced_up_to: Option<u64>) {
        let mut durable = self.durable.lock();
        if let Some(position) = synced_up_to
            && position > durable.position
        {
            durable.position = position;
        }
        durable.flushes += 1;
        let position = durable.position;
        drop(durable);
        self.durable_changed.notify_all();
        self.durable_watch
            .send_replace((position, self.poisoned.load(Ordering::Acquire)));
    }

    fn request_sync(&self) {
        self.log.lock().sync_requested = true;
        self.flusher_wake.notify_one();
    }

    /// Writes everything appended so far and syncs it, whatever the durability mode
    /// (compaction copies reuse old sequence numbers, so this cannot go by position).
    fn sync_now(&self) -> Result<(), StoreError> {
        let state = self.flush.lock();
        self.flush_locked(state, true);
        if self.poisoned.load(Ordering::Acquire) {
            return Err(self.poisoned_error());
        }
        Ok(())
    }

    /// The flusher thread: writes and syncs on the schedule of `periodic` and `none`, serves
    /// sync requests (compaction, clear, stop), and in `sync` mode sweeps up records nobody
    /// waits for.
    fn flush_loop(&self) {
        loop {
            let (sync_requested, stopping) = {
                let mut log = self.log.lock();
                loop {
                    if log.stopping || log.sync_requested {
                        break;
                    }
                    let wait = match self.config.durability {
                        DurabilityMode::Sync => SYNC_SWEEP_INTERVAL,
                        DurabilityMode::Periodic => self.config.sync_interval,
                        DurabilityMode::None => NONE_WRITE_INTERVAL,
                    };
                    let woken = !self.flusher_wake.wait_for(&mut log, wait).timed_out();
                    let due = match self.config.durability {
                        DurabilityMode::Sync => !log.pending.is_empty(),
                        DurabilityMode::Periodic => true,
                        DurabilityMode::None => !log.pending.is_empty(),
                    };
                    if due || (woken && self.config.durability == DurabilityMode::None) {
                        break;
                    }
                }
                (std::mem::take(&mut log.sync_requested), log.stopping)
            };
            let state = self.flush.lock();
            let sync = match self.config.durability {
                DurabilityMode::Sync => true,
                DurabilityMode::Periodic => state.last_sync.elapsed() >= self.config.sync_interval,
                DurabilityMode::None => false,
            } || sync_requested
                || stopping;
            self.flush_locked(state, sync);
            // A poisoned store writes nothing more: what is pending stays unwritten.
            if stopping
                && (self.log.lock().pending.is_empty() || self.poisoned.load(Ordering::Acquire))
            {
                return;
            }
        }
    }
}

impl FileStore {
    fn stop_threads(&self) {
        self.inner.log.lock().stopping = true;
        self.inner.flusher_wake.notify_all();
        *self.inner.compactor_stop.lock() = true;
        self.inner.compactor_wake.notify_all();
        for thread in self.threads.lock().drain(..) {
            if thread.join().is_err() {
                tracing::error!("a file store thread panicked");
            }
        }
    }
}

impl Drop for FileStore {
    fn drop(&mut self) {
        // Without a stop (a crash, or a test dropping the store), pending writes are still
        // written and synced, but no checkpoint is made.
        self.stop_threads();
        self.inner.lock.lock().take();
    }
}

impl Store for FileStore {
    fn characteristics(&self) -> Characteristics {
        Characteristics {
            shared: false,
            read_only: self.inner.config.read_only,
            transactional: false,
            segmented: true,
            expiration_aware: true,
        }
    }

    fn load(&self, segment: u32, key: &[u8]) -> Result<Option<CacheEntry>, StoreError> {
        self.inner.load(segment, key)
    }

    fn write(&self, segment: u32, entry: &CacheEntry) -> Result<u64, StoreError> {
        self.inner.write(segment, entry)
    }

    fn delete(&self, segment: u32, key: &[u8]) -> Result<u64, StoreError> {
        self.inner.delete(segment, key)
    }

    fn position(&self) -> u64 {
        self.inner.position()
    }

    fn wait_durable(&self, position: u64) -> Result<(), StoreError> {
        if self.inner.config.durability != DurabilityMode::Sync {
            return match self.inner.check_writable() {
                Err(error @ StoreError::Poisoned(_)) => Err(error),
                _ => Ok(()),
            };
        }
        self.inner.wait_synced(position)
    }

    fn wait_durable_async(&self, position: u64) -> BoxFuture<Result<(), StoreError>> {
        let inner = Arc::clone(&self.inner);
        Box::pin(async move {
            if inner.config.durability != DurabilityMode::Sync {
                return match inner.check_writable() {
                    Err(error @ StoreError::Poisoned(_)) => Err(error),
                    _ => Ok(()),
                };
            }
            // Only a multi-threaded runtime can lend this thread to a blocking flush; on any
            // other, the flusher thread does the work.
            let may_lead = tokio::runtime::Handle::try_current().is_ok_and(|handle| {
                handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread
            });
            let mut receiver = inner.durable_watch.subscribe();
            loop {
                if inner.durable_position() >= position {
                    return Ok(());
                }
                if inner.poisoned.load(Ordering::Acquire) {
                    return Err(inner.poisoned_error());
                }
                if may_lead {
                    if let Some(state) = inner.flush.try_lock() {
                        inner.flush_locked(state, true);
                        continue;
                    }
                } else {
                    inner.request_sync();
                }
                if receiver.changed().await.is_err() {
                    return Err(StoreError::Stopped);
                }
            }
        })
    }

    fn publish(
        &self,
        segments: &[u32],
        visit: &mut dyn FnMut(CacheEntry),
    ) -> Result<(), StoreError> {
        self.inner.publish(segments, visit)
    }

    fn remove_segments(&self, segments: &[u32]) -> Result<u64, StoreError> {
        self.inner.remove_segments(segments)
    }

    fn purge_expired(&self, now_ms: u64) -> Result<usize, StoreError> {
        self.inner.purge_expired(now_ms)
    }

    fn size(&self, segments: Option<&[u32]>) -> Result<usize, StoreError> {
        self.inner.size(segments)
    }

    fn clear(&self) -> Result<u64, StoreError> {
        self.inner.clear()
    }

    fn max_version(&self) -> u64 {
        self.inner.max_version.load(Ordering::Relaxed)
    }

    fn stop(&self) -> Result<(), StoreError> {
        let stopped = self.stop_keeping_lock();
        // Nothing is written after a stop: another process may have the directory now.
        self.inner.lock.lock().take();
        stopped
    }

    fn destroy(&self) {
        let _ = self.stop_keeping_lock();
        if let Err(error) = self.inner.disk.remove_dir_all(&self.inner.config.dir) {
            tracing::warn!(dir = %self.inner.config.dir.display(), %error, "deleting the store failed");
        }
        self.inner.lock.lock().take();
    }
}

impl FileStore {
    /// Stops the threads, seals the log and writes the checkpoint; the directory stays
    /// locked.
    fn stop_keeping_lock(&self) -> Result<(), StoreError> {
        if self.inner.stopped.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.stop_threads();
        if !self.inner.poisoned.load(Ordering::Acquire) {
            self.inner.seal_current()?;
        }
        if self.inner.poisoned.load(Ordering::Acquire) {
            return Err(StoreError::Poisoned(
                self.inner.poison.lock().clone().unwrap_or_default(),
            ));
        }
        if !self.inner.config.read_only {
            self.inner.write_checkpoint()?;
        }
        Ok(())
    }
}

/// The directory of a cache's file store under `data_dir`.
#[must_use]
pub fn store_dir(data_dir: &Path, cache: &str, configured: Option<&str>) -> PathBuf {
    match configured {
        Some(path) if Path::new(path).is_absolute() => PathBuf::from(path),
        Some(path) => data_dir.join(path),
        None => data_dir.join(cache),
    }
}
