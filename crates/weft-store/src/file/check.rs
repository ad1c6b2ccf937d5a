//! Offline check and repair of file stores (`weft store check|repair`).
//!
//! [`check`] reads every data file of a store from its first byte and verifies every
//! record's checksum the way recovery reads them (`maintenance::scan_records`), reporting per
//! file the intact records and where the first bad bytes are, judged as recovery would judge
//! them (zero-filled space, a torn tail it cuts itself, or corruption it refuses to open).
//! [`repair`] cuts each damaged file back to its intact records. Both take a [`DirLock`] on
//! the store's directory, which only [`lock_store`] gives: they never read a store a process
//! is writing, nor cut one it has open.

use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};

use super::maintenance::{TailKind, checkpoint_is_valid, scan_records};
use super::record;
use super::{CHECKPOINT_NAME, DATA_SUFFIX};
use crate::lock::{DATA_DIR_LOCK_NAME, DirLock, STORE_LOCK_NAME};
use crate::store::StoreError;

/// How deep [`survey`] looks below its root for stores (a data directory holds stores one
/// level down; a directory of per-node data directories, two).
const SURVEY_DEPTH_MAX: usize = 4;
/// Counting the intact records past a file's damage checksums candidate records at every
/// offset; past this many checksummed bytes the count stops (and is reported as a lower
/// bound), so that no input makes a check take quadratic time.
const RESYNC_CHECKSUM_BYTES_MAX: u64 = 256 << 20;

/// Locks the store in `dir` as an open store does, with `holder` in its lock file.
///
/// # Errors
/// [`StoreError::Locked`] if a process (or an open store in this one) has it; an I/O error
/// if the directory or its lock file cannot be created.
pub fn lock_store(dir: &Path, holder: &str) -> Result<DirLock, StoreError> {
    Ok(DirLock::acquire(dir, STORE_LOCK_NAME, holder)?)
}

/// The data directories and file stores under a directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Survey {
    /// Directories a server locks as its data directory (they hold its lock file).
    pub data_dirs: Vec<PathBuf>,
    /// Directories holding a file store (data files, a checkpoint or a store lock file).
    pub stores: Vec<PathBuf>,
}

/// Finds the data directories and file stores at or below `root` (a store's own directory,
/// a data directory, or a directory of per-node data directories), a few levels deep.
///
/// # Errors
/// If a directory cannot be read.
pub fn survey(root: &Path) -> Result<Survey, StoreError> {
    let mut survey = Survey::default();
    let mut pending = vec![(root.to_path_buf(), 0)];
    while let Some((dir, depth)) = pending.pop() {
        let entries =
            fs::read_dir(&dir).map_err(|e| StoreError::io(format!("list {}", dir.display()), e))?;
        let mut subdirs = Vec::new();
        let mut is_store = false;
        for entry in entries {
            let entry = entry.map_err(|e| StoreError::io(format!("list {}", dir.display()), e))?;
            // Not followed through symbolic links: no loops, and each store seen once.
            let kind = entry
                .file_type()
                .map_err(|e| StoreError::io(format!("stat {}", entry.path().display()), e))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if kind.is_dir() {
                subdirs.push(entry.path());
            } else if kind.is_file() {
                if name == DATA_DIR_LOCK_NAME {
                    survey.data_dirs.push(dir.clone());
                }
                if data_file_id(&name).is_some()
                    || name == CHECKPOINT_NAME
                    || name == STORE_LOCK_NAME
                {
                    is_store = true;
                }
            }
        }
        if is_store {
            survey.stores.push(dir);
        } else if depth < SURVEY_DEPTH_MAX {
            pending.extend(subdirs.into_iter().map(|sub| (sub, depth + 1)));
        }
    }
    survey.data_dirs.sort();
    survey.stores.sort();
    Ok(survey)
}

/// What is wrong with a data file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DamageKind {
    /// Zeros after the last record: space the store fills ahead of its writes, left by a
    /// crash before the file was cut back. Nothing is lost; a start cuts it silently.
    ZeroFilled,
    /// A torn record at the end of the newest file: a write a crash interrupted, never
    /// acknowledged. A start cuts it (with a warning).
    TornTail,
    /// Bad bytes anywhere else: the store does not open until they are cut.
    Corrupt,
}

/// Where a data file stops holding intact records, and what follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// Offset of the first byte that is not part of an intact record.
    pub offset: u64,
    /// How a store opening the file treats it.
    pub kind: DamageKind,
    /// Why the bytes there are not a record.
    pub reason: String,
    /// Bytes from `offset` to the end of the file (what a repair cuts).
    pub cut_bytes: u64,
    /// Intact records found past `offset` by trying every offset: a repair loses them.
    pub records_after: u64,
    /// Whether `records_after` is exact (false: the search stopped at its limit and the
    /// count is a lower bound).
    pub records_after_exact: bool,
}

/// What checking one data file found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileCheck {
    /// Its name (`00000003.log`).
    pub name: String,
    /// Its length in bytes.
    pub bytes: u64,
    /// Intact records from its start up to the damage, or to its end.
    pub records: u64,
    /// The first bad bytes, if any.
    pub damage: Option<Damage>,
}

/// What checking a store found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreCheck {
    /// The store's directory.
    pub dir: PathBuf,
    /// Its data files, oldest first.
    pub files: Vec<FileCheck>,
    /// The index checkpoint: `None` when there is none, else whether it is intact (a
    /// damaged one is ignored at start: the index is rebuilt from the data files).
    pub checkpoint_valid: Option<bool>,
}

impl StoreCheck {
    /// Whether a data file holds a torn tail or corruption (zero-filled space is not damage).
    #[must_use]
    pub fn is_damaged(&self) -> bool {
        self.files.iter().any(|file| {
            file.damage
                .as_ref()
                .is_some_and(|damage| damage.kind != DamageKind::ZeroFilled)
        })
    }
}

/// What a repair did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreRepair {
    /// The check it acted on: each damaged file was cut at its damage's offset.
    pub before: StoreCheck,
    /// Whether the index checkpoint was deleted (after a cut, so that the next start
    /// rebuilds the index from the records that are left).
    pub checkpoint_removed: bool,
}

fn data_file_id(name: &str) -> Option<u32> {
    name.strip_suffix(DATA_SUFFIX)?.parse().ok()
}

/// Checks every data file of the store whose lock the caller holds.
///
/// # Errors
/// If a file cannot be listed or read.
pub fn check(lock: &DirLock) -> Result<StoreCheck, StoreError> {
    let dir = lock.dir();
    let mut ids: Vec<u32> = fs::read_dir(dir)
        .map_err(|e| StoreError::io(format!("list {}", dir.display()), e))?
        .filter_map(|entry| data_file_id(&entry.ok()?.file_name().to_string_lossy()))
        .collect();
    ids.sort_unstable();
    let checkpoint_valid = match fs::read(dir.join(CHECKPOINT_NAME)) {
        Ok(bytes) => Some(checkpoint_is_valid(&bytes)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        Err(error) => return Err(StoreError::io("read the index checkpoint", error)),
    };
    let last = ids.last().copied();
    let mut files = Vec::with_capacity(ids.len());
    for id in ids {
        let name = super::file_name(id);
        let bytes =
            fs::read(dir.join(&name)).map_err(|e| StoreError::io(format!("read {name}"), e))?;
        let mut records = 0u64;
        let tail = scan_records(&bytes, 0, |_, _, _| {
            records += 1;
            Ok::<(), std::convert::Infallible>(())
        });
        let tail = match tail {
            Ok(tail) => tail,
            Err(never) => match never {},
        };
        let damage = tail.map(|tail| {
            let kind = match tail.kind(Some(id) == last) {
                TailKind::ZeroFilled => DamageKind::ZeroFilled,
                TailKind::Torn => DamageKind::TornTail,
                TailKind::Corrupt => DamageKind::Corrupt,
            };
            let after = usize::try_from(tail.offset)
                .ok()
                .and_then(|offset| bytes.get(offset..))
                .unwrap_or_default();
            let (records_after, records_after_exact) = if kind == DamageKind::ZeroFilled {
                (0, true)
            } else {
                intact_records_in(after)
            };
            Damage {
                offset: tail.offset,
                kind,
                reason: tail.reason(),
                cut_bytes: bytes.len() as u64 - tail.offset,
                records_after,
                records_after_exact,
            }
        });
        files.push(FileCheck {
            name,
            bytes: bytes.len() as u64,
            records,
            damage,
        });
    }
    Ok(StoreCheck {
        dir: dir.to_path_buf(),
        files,
        checkpoint_valid,
    })
}

/// Counts the intact records anywhere in `bytes` (bytes that do not start with one),
/// trying each offset; whether the count is exact.
fn intact_records_in(bytes: &[u8]) -> (u64, bool) {
    let mut found = 0;
    let mut checksummed = 0u64;
    let mut at = 0;
    while at < bytes.len() {
        let rest = &bytes[at..];
        if let Ok(len) = record::framed_len(rest)
            && len <= rest.len()
        {
            checksummed += len as u64;
            if checksummed > RESYNC_CHECKSUM_BYTES_MAX {
                return (found, false);
            }
            if let Ok((_, used)) = record::decode(rest) {
                found += 1;
                at += used;
                continue;
            }
        }
        at += 1;
    }
    (found, true)
}

/// Checks the store whose lock the caller holds, then cuts every damaged data file back to
/// its intact records (zero-filled tails too) and syncs it. After a cut of a torn or
/// corrupt tail the index checkpoint is deleted, so that the next start rebuilds the index
/// from what is left.
///
/// # Errors
/// If a file cannot be read, cut or synced, or the checkpoint cannot be deleted.
pub fn repair(lock: &DirLock) -> Result<StoreRepair, StoreError> {
    let before = check(lock)?;
    let dir = lock.dir();
    for file in &before.files {
        let Some(damage) = &file.damage else {
            continue;
        };
        let path = dir.join(&file.name);
        let cut = || -> std::io::Result<()> {
            let handle = OpenOptions::new().write(true).open(&path)?;
            handle.set_len(damage.offset)?;
            handle.sync_all()
        };
        cut().map_err(|e| StoreError::io(format!("cut {}", path.display()), e))?;
    }
    let checkpoint = dir.join(CHECKPOINT_NAME);
    let checkpoint_removed = before.is_damaged() && before.checkpoint_valid.is_some();
    if checkpoint_removed {
        fs::remove_file(&checkpoint)
            .map_err(|e| StoreError::io(format!("delete {}", checkpoint.display()), e))?;
        fs::File::open(dir)
            .and_then(|handle| handle.sync_all())
            .map_err(|e| StoreError::io(format!("sync {}", dir.display()), e))?;
    }
    Ok(StoreRepair {
        before,
        checkpoint_removed,
    })
}
