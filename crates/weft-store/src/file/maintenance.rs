//! The file store's background and whole-store work: recovery at open, the checkpoint
//! written at a clean stop, compaction, clear and segment removal. Reading a data file's
//! records (`scan_records`) and judging where they stop (`TailKind`) are shared with the
//! offline check and repair (`super::check`), so both see a file the same way.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::record::{self, DecodeError, Kind, Record};
use super::{
    CHECKPOINT_MAGIC, CHECKPOINT_NAME, COMPACTION_BURST_BYTES, COMPACTION_PAUSE, COMPACTION_TICK,
    DATA_SUFFIX, DataFile, Inner, Recovery, SegmentIndex, Slot, file_name, now_ms,
};
use crate::store::StoreError;
use weft_core::entry::StoredExpiration;

/// A little-endian reader over checkpoint bytes.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let end = self.at.checked_add(n)?;
        let slice = self.bytes.get(self.at..end)?;
        self.at = end;
        Some(slice)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u32(&mut self) -> Option<u32> {
        let mut w = [0; 4];
        w.copy_from_slice(self.take(4)?);
        Some(u32::from_le_bytes(w))
    }
    fn u64(&mut self) -> Option<u64> {
        let mut w = [0; 8];
        w.copy_from_slice(self.take(8)?);
        Some(u64::from_le_bytes(w))
    }
}

/// What a checkpoint holds.
struct Checkpoint {
    sequence: u64,
    max_version: u64,
    /// (file, length covered, lowest sequence)
    files: Vec<(u32, u64, u64)>,
    /// (segment, key, slot)
    entries: Vec<(u32, Box<[u8]>, Slot)>,
}

/// Where a data file's records stop: the first bytes that are not a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Tail {
    /// Offset in the file of the first byte that is not part of a record.
    pub(super) offset: u64,
    /// Why the bytes there are not a record.
    pub(super) error: DecodeError,
    /// Bytes from `offset` up to and including the last non-zero byte of the file (0: only
    /// zeros follow the records).
    pub(super) junk_bytes: u64,
}

/// What the store makes of a file's tail at open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TailKind {
    /// Only zeros after the records: space zero-filled ahead of writes, left by a crash
    /// before the file was cut back. Cut without a word.
    ZeroFilled,
    /// A torn record at the end of the last file: a write a crash interrupted, which was
    /// never acknowledged (the sync it waited for did not finish). Cut, with a warning.
    Torn,
    /// Anything else: the store refuses to open rather than serve half-read data.
    Corrupt,
}

impl Tail {
    /// How the store treats this tail of a file, `last` saying whether it is the newest.
    pub(super) fn kind(&self, last: bool) -> TailKind {
        if self.junk_bytes == 0 {
            TailKind::ZeroFilled
        } else if last {
            TailKind::Torn
        } else {
            // Only the last file is written to when a crash can strike: every earlier one
            // was synced and cut back to its records before the next was started.
            TailKind::Corrupt
        }
    }

    /// The reason the bytes at `offset` are not a record, for people.
    pub(super) fn reason(&self) -> String {
        match self.error {
            DecodeError::Truncated { .. } => "the file ends inside a record".to_owned(),
            DecodeError::Invalid(reason) => reason.to_owned(),
        }
    }
}

/// Reads the records of `bytes`, the contents of a data file from offset `start`, in order:
/// hands each to `visit` with its offset in the file and its length, and stops at the first
/// bytes that are not a record, which it returns (`None`: the records fill `bytes`).
///
/// # Errors
/// What `visit` returns.
pub(super) fn scan_records<E>(
    bytes: &[u8],
    start: u64,
    mut visit: impl FnMut(&Record<'_>, u64, usize) -> Result<(), E>,
) -> Result<Option<Tail>, E> {
    let mut at = 0;
    while at < bytes.len() {
        match record::decode(&bytes[at..]) {
            Ok((record, used)) => {
                visit(&record, start + at as u64, used)?;
                at += used;
            }
            Err(error) => {
                let junk_bytes = bytes[at..]
                    .iter()
                    .rposition(|&byte| byte != 0)
                    .map_or(0, |last| last as u64 + 1);
                return Ok(Some(Tail {
                    offset: start + at as u64,
                    error,
                    junk_bytes,
                }));
            }
        }
    }
    Ok(None)
}

/// Whether `bytes` are a valid checkpoint (its checksum and layout; not whether it agrees
/// with the data files).
pub(super) fn checkpoint_is_valid(bytes: &[u8]) -> bool {
    parse_checkpoint(bytes).is_some()
}

fn parse_checkpoint(bytes: &[u8]) -> Option<Checkpoint> {
    let body_len = bytes.len().checked_sub(4)?;
    let mut crc = [0; 4];
    crc.copy_from_slice(&bytes[body_len..]);
    if crc32c::crc32c(&bytes[..body_len]) != u32::from_le_bytes(crc) {
        return None;
    }
    let mut r = Reader {
        bytes: &bytes[..body_len],
        at: 0,
    };
    if r.take(8)? != CHECKPOINT_MAGIC {
        return None;
    }
    let sequence = r.u64()?;
    let max_version = r.u64()?;
    let file_count = r.u32()?;
    let mut files = Vec::new();
    for _ in 0..file_count {
        files.push((r.u32()?, r.u64()?, r.u64()?));
    }
    let entry_count = r.u64()?;
    let mut entries = Vec::new();
    for _ in 0..entry_count {
        let segment = r.u32()?;
        let key_len = r.u32()? as usize;
        let key: Box<[u8]> = r.take(key_len)?.into();
        let slot = Slot {
            file: r.u32()?,
            offset: r.u64()?,
            len: r.u32()?,
            sequence: r.u64()?,
            expires_at_ms: r.u64()?,
            tombstone: r.u8()? != 0,
        };
        entries.push((segment, key, slot));
    }
    Some(Checkpoint {
        sequence,
        max_version,
        files,
        entries,
    })
}

impl Inner {
    /// Rebuilds the index from the checkpoint (if valid) and the data files.
    pub(super) fn recover(&self) -> Result<Recovery, StoreError> {
        let dir = &self.config.dir;
        let mut ids: Vec<u32> = self
            .disk
            .list(dir)
            .map_err(|e| StoreError::io(format!("list {}", dir.display()), e))?
            .iter()
            .filter_map(|name| name.strip_suffix(DATA_SUFFIX)?.parse().ok())
            .collect();
        ids.sort_unstable();
        let mut recovery = Recovery::default();
        let mut lengths = std::collections::HashMap::new();
        for &id in &ids {
            self.data_file(id);
            let handle = self.handle(id, false)?;
            let len = handle
                .len()
                .map_err(|e| StoreError::io(format!("stat {}", file_name(id)), e))?;
            lengths.insert(id, len);
        }
        let checkpoint = self
            .disk
            .read_all(&self.path(CHECKPOINT_NAME))
            .map_err(|e| StoreError::io("read the index checkpoint", e))?
            .and_then(|bytes| parse_checkpoint(&bytes))
            .filter(|checkpoint| {
                checkpoint
                    .files
                    .iter()
                    .all(|(id, len, _)| lengths.get(id).is_some_and(|actual| actual >= len))
                    && checkpoint
                        .entries
                        .iter()
                        .all(|(segment, _, _)| (*segment as usize) < self.index.len())
            });
        let mut covered = std::collections::HashMap::new();
        let mut sequence = 0;
        let mut clear_sequence = 0;
        if let Some(checkpoint) = checkpoint {
            recovery.from_checkpoint = true;
            sequence = checkpoint.sequence;
            self.max_version
                .fetch_max(checkpoint.max_version, Ordering::Relaxed);
            for (id, len, min_sequence) in checkpoint.files {
                covered.insert(id, len);
                let file = self.data_file(id);
                file.total_bytes.store(len, Ordering::Relaxed);
                file.min_sequence.store(min_sequence, Ordering::Relaxed);
            }
            for (segment, key, slot) in checkpoint.entries {
                self.index[segment as usize].write().insert(key, slot);
            }
        }
        let last = ids.last().copied();
        for &id in &ids {
            let start = covered.get(&id).copied().unwrap_or(0);
            let handle = self.handle(id, false)?;
            let len = lengths.get(&id).copied().unwrap_or(0);
            let mut bytes = vec![0; usize::try_from(len - start).unwrap_or(0)];
            handle
                .read_exact_at(&mut bytes, start)
                .map_err(|e| StoreError::io(format!("read {}", file_name(id)), e))?;
            let file = self.data_file(id);
            let tail = scan_records(&bytes, start, |record, offset, used| {
                recovery.records_replayed += 1;
                sequence = sequence.max(record.sequence);
                file.min_sequence
                    .fetch_min(record.sequence, Ordering::Relaxed);
                match record.kind {
                    Kind::Clear => clear_sequence = clear_sequence.max(record.sequence),
                    Kind::Put | Kind::Tombstone => {
                        let Some(index) = self.index.get(record.segment as usize) else {
                            return Err(StoreError::Corrupt {
                                file: file_name(id),
                                offset,
                                reason: format!(
                                    "segment {} beyond the store's {}",
                                    record.segment,
                                    self.index.len()
                                ),
                            });
                        };
                        let slot = Slot {
                            file: id,
                            offset,
                            len: u32::try_from(used).unwrap_or(u32::MAX),
                            sequence: record.sequence,
                            expires_at_ms: record.expires_at_ms().unwrap_or(u64::MAX),
                            tombstone: record.kind == Kind::Tombstone,
                        };
                        if record.kind == Kind::Put {
                            self.max_version
                                .fetch_max(record.version, Ordering::Relaxed);
                        }
                        let mut index = index.write();
                        let newer = index
                            .get(record.key)
                            .is_none_or(|existing| existing.sequence < record.sequence);
                        if newer {
                            index.insert(record.key.into(), slot);
                        }
                    }
                }
                Ok(())
            })?;
            if let Some(tail) = tail {
                match tail.kind(Some(id) == last) {
                    TailKind::ZeroFilled => {}
                    TailKind::Torn => {
                        tracing::warn!(
                            file = %file_name(id),
                            offset = tail.offset,
                            cut_bytes = tail.junk_bytes,
                            "cutting a torn record off the end of the log"
                        );
                        recovery.truncated_bytes = tail.junk_bytes;
                    }
                    TailKind::Corrupt => {
                        return Err(StoreError::Corrupt {
                            file: file_name(id),
                            offset: tail.offset,
                            reason: tail.reason(),
                        });
                    }
                }
                handle
                    .truncate(tail.offset)
                    .map_err(|e| StoreError::io(format!("truncate {}", file_name(id)), e))?;
                lengths.insert(id, tail.offset);
            }
            file.total_bytes
                .store(lengths.get(&id).copied().unwrap_or(0), Ordering::Relaxed);
        }
        // Live bytes from the final index; drop what a clear made void.
        for index in self.index.iter() {
            let mut index = index.write();
            if clear_sequence > 0 {
                index.retain(|_, slot| slot.sequence > clear_sequence);
            }
            let files = self.files.read();
            for slot in index.values() {
                if let Some(file) = files.get(&slot.file) {
                    file.live_bytes
                        .fetch_add(u64::from(slot.len), Ordering::Relaxed);
                }
                if !slot.tombstone {
                    recovery.entries += 1;
                }
            }
        }
        let mut log = self.log.lock();
        log.sequence = sequence;
        log.active_file = last.map_or(1, |id| id + 1);
        log.active_len = 0;
        drop(log);
        self.durable.lock().position = sequence;
        self.durable_watch.send_replace((sequence, false));
        Ok(recovery)
    }

    /// Writes the index checkpoint (at a clean stop, when nothing is pending).
    pub(super) fn write_checkpoint(&self) -> Result<(), StoreError> {
        let mut out = Vec::new();
        out.extend_from_slice(CHECKPOINT_MAGIC);
        out.extend_from_slice(&self.log.lock().sequence.to_le_bytes());
        out.extend_from_slice(&self.max_version.load(Ordering::Relaxed).to_le_bytes());
        let files: Vec<(u32, Arc<DataFile>)> = self
            .files
            .read()
            .iter()
            .map(|(id, file)| (*id, Arc::clone(file)))
            .collect();
        let mut present = Vec::new();
        for (id, file) in &files {
            if file.handle.lock().is_none() {
                continue; // never written (a rotation that got no record)
            }
            present.push((
                *id,
                file.total_bytes.load(Ordering::Relaxed),
                file.min_sequence.load(Ordering::Relaxed),
            ));
        }
        out.extend_from_slice(
            &u32::try_from(present.len())
                .unwrap_or(u32::MAX)
                .to_le_bytes(),
        );
        for (id, len, min_sequence) in &present {
            out.extend_from_slice(&id.to_le_bytes());
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(&min_sequence.to_le_bytes());
        }
        let count_at = out.len();
        out.extend_from_slice(&0u64.to_le_bytes());
        let mut count: u64 = 0;
        for (segment, index) in self.index.iter().enumerate() {
            for (key, slot) in index.read().iter() {
                count += 1;
                out.extend_from_slice(&u32::try_from(segment).unwrap_or(u32::MAX).to_le_bytes());
                out.extend_from_slice(&u32::try_from(key.len()).unwrap_or(u32::MAX).to_le_bytes());
                out.extend_from_slice(key);
                out.extend_from_slice(&slot.file.to_le_bytes());
                out.extend_from_slice(&slot.offset.to_le_bytes());
                out.extend_from_slice(&slot.len.to_le_bytes());
                out.extend_from_slice(&slot.sequence.to_le_bytes());
                out.extend_from_slice(&slot.expires_at_ms.to_le_bytes());
                out.push(u8::from(slot.tombstone));
            }
        }
        out[count_at..count_at + 8].copy_from_slice(&count.to_le_bytes());
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        self.disk
            .write_atomic(&self.path(CHECKPOINT_NAME), &out)
            .map_err(|e| StoreError::io("write the index checkpoint", e))
    }

    /// Deletes the checkpoint before a data file it may point into is deleted.
    fn invalidate_checkpoint(&self) -> Result<(), StoreError> {
        self.disk
            .remove(&self.path(CHECKPOINT_NAME))
            .and_then(|()| self.disk.sync_dir(&self.config.dir))
            .map_err(|e| StoreError::io("remove the index checkpoint", e))
    }

    fn delete_files(&self, ids: &[u32]) -> Result<(), StoreError> {
        if ids.is_empty() {
            return Ok(());
        }
        self.invalidate_checkpoint()?;
        for id in ids {
            self.files.write().remove(id);
            self.disk
                .remove(&self.path(&file_name(*id)))
                .map_err(|e| StoreError::io(format!("delete {}", file_name(*id)), e))?;
        }
        self.disk
            .sync_dir(&self.config.dir)
            .map_err(|e| StoreError::io("sync the store directory", e))
    }

    pub(super) fn compaction_loop(&self) {
        loop {
            {
                let mut stop = self.compactor_stop.lock();
                if *stop {
                    return;
                }
                self.compactor_wake.wait_for(&mut stop, COMPACTION_TICK);
                if *stop {
                    return;
                }
            }
            if self.poisoned.load(Ordering::Acquire) {
                continue;
            }
            if let Err(error) = self.compact_eligible(false) {
                tracing::warn!(dir = %self.config.dir.display(), %error, "compaction failed");
            }
        }
    }

    /// Compacts sealed files whose live share is under the threshold; returns how many.
    pub(super) fn compact_eligible(&self, all: bool) -> Result<usize, StoreError> {
        #[cfg(test)]
        self.candidates_pause.point();
        let threshold = u64::from(self.config.compaction_threshold_percent.min(100));
        // Chosen under the log lock, so that no write starts a new file meanwhile: the file
        // being written, whose records are not all in it yet, would otherwise be taken for
        // a sealed one (and deleted once compacted, with its writers still appending). Every
        // file below the active one has all its records appended and counted.
        let log = self.log.lock();
        let mut candidates: Vec<(u32, u64, u64)> = self
            .files
            .read()
            .range(..log.active_file)
            .map(|(id, f)| {
                (
                    *id,
                    f.live_bytes.load(Ordering::Relaxed),
                    f.total_bytes.load(Ordering::Relaxed),
                )
            })
            .filter(|(_, live, total)| *total > 0 && live * 100 < total * threshold)
            .collect();
        drop(log);
        candidates.sort_by_key(|(_, live, total)| live * 1000 / (*total).max(1));
        if !all {
            candidates.truncate(1);
        }
        if candidates.is_empty() {
            return Ok(0);
        }
        // A sealed file may still have records waiting in the flusher's buffer.
        self.sync_now()?;
        let mut done = 0;
        for (id, _, _) in candidates {
            if self.stopped.load(Ordering::Acquire) {
                break;
            }
            self.compact_file(id)?;
            done += 1;
        }
        Ok(done)
    }

    /// Whether no file but `id` holds a record older than `sequence`, so that a tombstone
    /// (or an expired entry) with that sequence shadows nothing and can go.
    fn shadows_nothing(&self, id: u32, sequence: u64) -> bool {
        self.files
            .read()
            .iter()
            .filter(|(other, _)| **other != id)
            .all(|(_, file)| file.min_sequence.load(Ordering::Relaxed) > sequence)
    }

    fn compact_file(&self, id: u32) -> Result<(), StoreError> {
        let _exclusive = self.compaction.lock();
        let Some(file) = self.files.read().get(&id).cloned() else {
            return Ok(());
        };
        let handle = self.handle(id, false)?;
        let len = file.total_bytes.load(Ordering::Relaxed);
        let mut bytes = vec![0; usize::try_from(len).unwrap_or(0)];
        handle
            .read_exact_at(&mut bytes, 0)
            .map_err(|e| StoreError::io(format!("read {}", file_name(id)), e))?;
        let now = now_ms();
        let mut at = 0;
        let mut copied_since_pause = 0;
        let mut copied = 0u64;
        while at < bytes.len() {
            let (record, used) = match record::decode(&bytes[at..]) {
                Ok(decoded) => decoded,
                Err(error) => {
                    return Err(StoreError::Corrupt {
                        file: file_name(id),
                        offset: at as u64,
                        reason: format!("{error:?}"),
                    });
                }
            };
            let offset = at as u64;
            at += used;
            if record.kind == Kind::Clear {
                if !self.shadows_nothing(id, record.sequence) {
                    let raw = &bytes[offset as usize..at];
                    self.append(Some(record.sequence), |out, _| {
                        out.extend_from_slice(raw);
                        raw.len()
                    });
                }
                continue;
            }
            let Some(index) = self.index.get(record.segment as usize) else {
                continue;
            };
            let mut index = index.write();
            let Some(slot) = index.get(record.key).copied() else {
                continue;
            };
            if slot.file != id || slot.offset != offset {
                continue; // superseded: dead
            }
            if slot.is_dead(now) && self.shadows_nothing(id, slot.sequence) {
                self.unplace(&mut index, record.key);
                continue;
            }
            let raw = &bytes[offset as usize..at];
            let (file, new_offset, new_len, _) = self.append(Some(record.sequence), |out, _| {
                out.extend_from_slice(raw);
                raw.len()
            });
            self.place(
                &mut index,
                record.key,
                Slot {
                    file,
                    offset: new_offset,
                    len: new_len,
                    ..slot
                },
            );
            drop(index);
            copied += used as u64;
            copied_since_pause += used as u64;
            if copied_since_pause >= COMPACTION_BURST_BYTES {
                copied_since_pause = 0;
                std::thread::sleep(COMPACTION_PAUSE);
            }
        }
        // The copies must be durable before the originals go.
        self.sync_now()?;
        self.delete_files(&[id])?;
        tracing::debug!(file = %file_name(id), copied, total = len, "compacted");
        Ok(())
    }

    /// Removes every entry: a clear record, then the older files.
    pub(super) fn clear(&self) -> Result<u64, StoreError> {
        self.check_writable()?;
        let _exclusive = self.compaction.lock();
        let mut guards: Vec<_> = self.index.iter().map(|index| index.write()).collect();
        let (_, _, _, sequence) = self.append(None, |out, sequence| {
            record::encode(
                out,
                Kind::Clear,
                0,
                sequence,
                0,
                StoredExpiration::IMMORTAL,
                0,
                &[],
                &[],
            )
        });
        for guard in &mut guards {
            guard.clear();
        }
        let active = self.log.lock().active_file;
        for file in self.files.read().values() {
            file.live_bytes.store(0, Ordering::Relaxed);
        }
        drop(guards);
        self.sync_now()?;
        let old: Vec<u32> = self
            .files
            .read()
            .keys()
            .copied()
            .filter(|id| *id < active)
            .collect();
        self.delete_files(&old)?;
        Ok(sequence)
    }

    /// Writes tombstones for every key of `segments`.
    pub(super) fn remove_segments(&self, segments: &[u32]) -> Result<u64, StoreError> {
        self.check_writable()?;
        let mut position = self.log.lock().sequence;
        for &segment in segments {
            let mut index = self.segment_index(segment)?.write();
            let keys: Vec<Box<[u8]>> = index
                .iter()
                .filter(|(_, slot)| !slot.tombstone)
                .map(|(key, _)| key.clone())
                .collect();
            for key in keys {
                position = self.delete_locked(&mut index, segment, &key);
            }
        }
        Ok(position)
    }

    /// Writes tombstones for expired entries; returns how many.
    pub(super) fn purge_expired(&self, now_ms: u64) -> Result<usize, StoreError> {
        self.check_writable()?;
        let mut purged = 0;
        for (segment, index) in self.index.iter().enumerate() {
            let mut index = index.write();
            let expired: Vec<Box<[u8]>> = index
                .iter()
                .filter(|(_, slot)| !slot.tombstone && slot.expires_at_ms <= now_ms)
                .map(|(key, _)| key.clone())
                .collect();
            for key in expired {
                self.delete_locked(&mut index, u32::try_from(segment).unwrap_or(u32::MAX), &key);
                purged += 1;
            }
        }
        Ok(purged)
    }

    pub(super) fn size(&self, segments: Option<&[u32]>) -> Result<usize, StoreError> {
        let count = |index: &SegmentIndex| index.values().filter(|slot| !slot.tombstone).count();
        match segments {
            None => Ok(self.index.iter().map(|index| count(&index.read())).sum()),
            Some(segments) => {
                let mut total = 0;
                for &segment in segments {
                    total += count(&self.segment_index(segment)?.read());
                }
                Ok(total)
            }
        }
    }
}
