//! Disk access for the file store, behind a trait so tests can fail or tear what the store
//! writes and syncs.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

/// One open file.
#[allow(clippy::len_without_is_empty)] // a file's length, not a collection's
pub trait DiskFile: Send + Sync + fmt::Debug {
    /// Reads exactly `buf.len()` bytes at `offset`.
    ///
    /// # Errors
    /// I/O errors, including a short file.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Writes all of `data` at `offset`.
    ///
    /// # Errors
    /// I/O errors.
    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()>;
    /// Makes written data durable (fdatasync).
    ///
    /// # Errors
    /// I/O errors; after one, written data may or may not be on disk.
    fn sync_data(&self) -> io::Result<()>;
    /// The file's length.
    ///
    /// # Errors
    /// I/O errors.
    fn len(&self) -> io::Result<u64>;
    /// Cuts the file to `len` bytes.
    ///
    /// # Errors
    /// I/O errors.
    fn truncate(&self, len: u64) -> io::Result<()>;
}

/// A directory of files.
pub trait Disk: Send + Sync + fmt::Debug {
    /// Opens (creating if asked) a file for reading and writing.
    ///
    /// # Errors
    /// I/O errors.
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn DiskFile>>;
    /// Names of the files in `dir`.
    ///
    /// # Errors
    /// I/O errors.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Deletes a file (absent is fine).
    ///
    /// # Errors
    /// I/O errors.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Writes a whole file atomically: a temporary file, synced, renamed over `path`, and the
    /// directory synced.
    ///
    /// # Errors
    /// I/O errors.
    fn write_atomic(&self, path: &Path, data: &[u8]) -> io::Result<()>;
    /// Reads a whole file, or `None` if it does not exist.
    ///
    /// # Errors
    /// I/O errors.
    fn read_all(&self, path: &Path) -> io::Result<Option<Vec<u8>>>;
    /// Creates a directory and its parents.
    ///
    /// # Errors
    /// I/O errors.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Makes a directory's entries (created and removed files) durable.
    ///
    /// # Errors
    /// I/O errors.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Deletes a directory and everything in it.
    ///
    /// # Errors
    /// I/O errors.
    fn remove_dir_all(&self, dir: &Path) -> io::Result<()>;
}

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealDisk;

#[derive(Debug)]
struct RealFile {
    file: File,
}

impl DiskFile for RealFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }

    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        self.file.write_all_at(data, offset)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    fn truncate(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)?;
        self.file.sync_all()
    }
}

impl Disk for RealDisk {
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn DiskFile>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .open(path)?;
        Ok(Arc::new(RealFile { file }))
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(dir)? {
            let entry = entry?;
            if let Some(name) = entry.file_name().to_str() {
                names.push(name.to_owned());
            }
        }
        Ok(names)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        match fs::remove_file(path) {
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    fn write_atomic(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        let temporary = path.with_extension("tmp");
        {
            let mut file = File::create(&temporary)?;
            file.write_all(data)?;
            file.sync_all()?;
        }
        fs::rename(&temporary, path)?;
        match path.parent() {
            Some(dir) => self.sync_dir(dir),
            None => Ok(()),
        }
    }

    fn read_all(&self, path: &Path) -> io::Result<Option<Vec<u8>>> {
        match fs::read(path) {
            Ok(data) => Ok(Some(data)),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(error),
        }
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        fs::create_dir_all(dir)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    fn remove_dir_all(&self, dir: &Path) -> io::Result<()> {
        match fs::remove_dir_all(dir) {
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }
}

/// A disk that fails on command: syncs can be made to fail, and an append can be torn
/// (only part of it written, as a crash mid-write leaves it). For tests.
#[derive(Debug, Clone, Default)]
pub struct FaultyDisk {
    faults: Arc<Faults>,
}

#[derive(Debug, Default)]
struct Faults {
    fail_syncs: AtomicBool,
    /// When ≥ 0: the next write of data writes only this many bytes, then every later write
    /// is dropped (the process is considered crashed). Writes of zeros (preallocation) are
    /// not counted.
    tear_next_append_at: AtomicI64,
    crashed: AtomicBool,
}

impl FaultyDisk {
    /// A disk that behaves until told otherwise.
    #[must_use]
    pub fn new() -> Self {
        let disk = Self::default();
        disk.faults.tear_next_append_at.store(-1, Ordering::SeqCst);
        disk
    }

    /// Makes every later sync fail.
    pub fn fail_syncs(&self) {
        self.faults.fail_syncs.store(true, Ordering::SeqCst);
    }

    /// Tears the next write after `bytes` bytes; later writes and syncs are lost, as if the
    /// machine stopped there.
    pub fn tear_next_write(&self, bytes: usize) {
        self.faults
            .tear_next_append_at
            .store(i64::try_from(bytes).unwrap_or(i64::MAX), Ordering::SeqCst);
    }

    /// Whether a torn write happened.
    #[must_use]
    pub fn crashed(&self) -> bool {
        self.faults.crashed.load(Ordering::SeqCst)
    }
}

#[derive(Debug)]
struct FaultyFile {
    inner: Arc<dyn DiskFile>,
    faults: Arc<Faults>,
}

impl DiskFile for FaultyFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner.read_exact_at(buf, offset)
    }

    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        if self.faults.crashed.load(Ordering::SeqCst) {
            return Ok(());
        }
        if data.iter().all(|&byte| byte == 0) {
            return self.inner.write_at(data, offset);
        }
        let tear = self.faults.tear_next_append_at.swap(-1, Ordering::SeqCst);
        if tear >= 0 {
            let keep = usize::try_from(tear).unwrap_or(usize::MAX).min(data.len());
            self.faults.crashed.store(true, Ordering::SeqCst);
            return self.inner.write_at(&data[..keep], offset);
        }
        self.inner.write_at(data, offset)
    }

    fn sync_data(&self) -> io::Result<()> {
        if self.faults.fail_syncs.load(Ordering::SeqCst) {
            return Err(io::Error::other("injected fsync failure"));
        }
        if self.faults.crashed.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.inner.sync_data()
    }

    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }

    fn truncate(&self, len: u64) -> io::Result<()> {
        self.inner.truncate(len)
    }
}

impl Disk for FaultyDisk {
    fn open(&self, path: &Path, create: bool) -> io::Result<Arc<dyn DiskFile>> {
        Ok(Arc::new(FaultyFile {
            inner: RealDisk.open(path, create)?,
            faults: Arc::clone(&self.faults),
        }))
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        RealDisk.list(dir)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        if self.crashed() {
            return Ok(());
        }
        RealDisk.remove(path)
    }

    fn write_atomic(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        if self.crashed() {
            return Ok(());
        }
        if self.faults.fail_syncs.load(Ordering::SeqCst) {
            return Err(io::Error::other("injected fsync failure"));
        }
        RealDisk.write_atomic(path, data)
    }

    fn read_all(&self, path: &Path) -> io::Result<Option<Vec<u8>>> {
        RealDisk.read_all(path)
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        RealDisk.create_dir_all(dir)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        RealDisk.sync_dir(dir)
    }

    fn remove_dir_all(&self, dir: &Path) -> io::Result<()> {
        RealDisk.remove_dir_all(dir)
    }
}
