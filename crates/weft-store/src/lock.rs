//! Directory locks: one process at a time uses a data directory or a file store.
//!
//! A lock is an exclusive, non-blocking advisory lock (`flock`) on a file in the directory,
//! held by an open file until it is dropped; the operating system releases it when the
//! process ends, however it ends, so a crash never leaves a stale lock behind. The file also
//! says who holds it (process id, then what the holder said of itself), so that a process
//! refused the lock can name the one that has it. The file is never deleted: deleting a lock
//! file while another process waits to lock it would let two processes hold "the" lock.
//!
//! `flock` locks belong to an open file, not to a process: a second open of the same lock
//! file in the same process is refused too, so in-process users (embedded caches, tests)
//! are kept apart as well as processes are.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// The lock file of a data directory, held by the server that uses it.
pub const DATA_DIR_LOCK_NAME: &str = "weft.lock";
/// The lock file of a file store's directory, held by whoever has the store open.
pub const STORE_LOCK_NAME: &str = "store.lock";
/// The most of a lock file read to say who holds it.
const HOLDER_BYTES_MAX: u64 = 1024;

/// Why a directory could not be locked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// Another process (or another user in this process) holds the lock.
    #[error("{} is in use by another process ({holder}; lock file {})", dir.display(), lock_file.display())]
    Held {
        /// The directory.
        dir: PathBuf,
        /// The lock file.
        lock_file: PathBuf,
        /// What the holder wrote into the lock file.
        holder: String,
    },
    /// The directory or the lock file could not be used.
    #[error("lock {}: {source}", path.display())]
    Io {
        /// The directory or lock file.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
}

/// A held directory lock; released when dropped.
#[derive(Debug)]
pub struct DirLock {
    dir: PathBuf,
    /// Holding the open file is holding the lock.
    _file: File,
}

impl DirLock {
    /// Locks `dir` (created if missing) through its lock file `name`, and writes `holder`
    /// into the lock file after the process id, for whoever is refused it later.
    ///
    /// # Errors
    /// [`LockError::Held`] when another open file holds the lock, in this process or any
    /// other; [`LockError::Io`] when the directory or the file cannot be created or locked.
    pub fn acquire(dir: &Path, name: &str, holder: &str) -> Result<Self, LockError> {
        std::fs::create_dir_all(dir).map_err(|source| LockError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = dir.join(name);
        let io_error = |source| LockError::Io {
            path: path.clone(),
            source,
        };
        // Not truncated at open: the holder's text must stay readable to those refused.
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io_error)?;
        // `File::try_lock` is Rust 1.89's; `rust-version` still says 1.85, though the
        // workspace already needs 1.88 for its `if let` chains.
        #[allow(clippy::incompatible_msrv)]
        let locked = file.try_lock();
        match locked {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(LockError::Held {
                    dir: dir.to_path_buf(),
                    holder: read_holder(&mut file),
                    lock_file: path,
                });
            }
            Err(TryLockError::Error(source)) => return Err(io_error(source)),
        }
        let mut text = format!("pid {}", std::process::id());
        if !holder.is_empty() {
            text.push_str(", ");
            text.push_str(holder);
        }
        text.push('\n');
        file.set_len(0).map_err(io_error)?;
        file.write_all(text.as_bytes()).map_err(io_error)?;
        Ok(Self {
            dir: dir.to_path_buf(),
            _file: file,
        })
    }

    /// The locked directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// The first line of a lock file, printable, or a note that it says nothing.
fn read_holder(file: &mut File) -> String {
    let mut bytes = Vec::new();
    if file.take(HOLDER_BYTES_MAX).read_to_end(&mut bytes).is_err() {
        return "its lock file cannot be read".to_owned();
    }
    let text = String::from_utf8_lossy(&bytes);
    let line: String = text
        .lines()
        .next()
        .unwrap_or_default()
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if line.trim().is_empty() {
        // The holder locked the file and has not written its name yet.
        "the holder has not written its name yet".to_owned()
    } else {
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a second lock of a directory is refused while the first is held — in the same
    // process too — and names the holder; and that dropping the first releases it.
    #[test]
    fn a_held_lock_refuses_others_and_names_its_holder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("data");
        let first = DirLock::acquire(&path, DATA_DIR_LOCK_NAME, "node a").expect("first lock");
        assert_eq!(first.dir(), path);
        match DirLock::acquire(&path, DATA_DIR_LOCK_NAME, "node b") {
            Err(LockError::Held { holder, .. }) => {
                assert_eq!(holder, format!("pid {}, node a", std::process::id()));
            }
            other => panic!("expected the lock to be held: {other:?}"),
        }
        // Another lock file in the same directory is another lock.
        let store = DirLock::acquire(&path, STORE_LOCK_NAME, "").expect("store lock");
        drop(first);
        let again = DirLock::acquire(&path, DATA_DIR_LOCK_NAME, "node b").expect("released");
        drop(again);
        drop(store);
        let text = std::fs::read_to_string(path.join(DATA_DIR_LOCK_NAME)).expect("read");
        assert_eq!(text, format!("pid {}, node b\n", std::process::id()));
    }
}
