//! Which cache serves each RESP database after SWAPDB, kept across restarts.
//!
//! Redis' SWAPDB exchanges two databases' contents; its RDB file then stores each key under
//! its new number. Weft's databases are caches with their own stores, so a swap exchanges
//! which cache serves each number (see [`weft_core::CacheManager::swap_resp_databases`]) and
//! the server writes the exchanged numbers to a small file in the data directory, read back
//! at start: after a restart each number still shows the data SWAPDB gave it.
//!
//! The file is text, one `database declared-database` pair per line, replaced atomically
//! (written beside, synced, renamed). Only servers with a file store keep it: without one
//! nothing survives a restart anyway.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use weft_core::CacheManager;

/// The file's name in the data directory.
pub const SWAPS_FILE: &str = "resp-databases.swapped";

/// The longest swaps file read (16 KiB is thousands of swapped databases).
const SWAPS_FILE_BYTES_MAX: u64 = 16 * 1024;

/// Why the swaps file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum SwapsError {
    /// Reading or writing the file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// The file is not what this module writes.
    #[error("{path}: {reason}; remove the file to start with every RESP database unswapped")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// Reads the swaps saved in `path` (none when the file does not exist) into `manager`.
///
/// # Errors
/// The file cannot be read, or is not a list of swaps (a permutation of database numbers).
pub fn load(path: &Path, manager: &CacheManager) -> Result<(), SwapsError> {
    let io = |source| SwapsError::Io {
        path: path.to_owned(),
        source,
    };
    let malformed = |reason: String| SwapsError::Malformed {
        path: path.to_owned(),
        reason,
    };
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(io(error)),
    };
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut std::io::Read::take(file, SWAPS_FILE_BYTES_MAX + 1),
        &mut text,
    )
    .map_err(io)?;
    if text.len() as u64 > SWAPS_FILE_BYTES_MAX {
        return Err(malformed(format!(
            "longer than {SWAPS_FILE_BYTES_MAX} bytes"
        )));
    }
    let swaps = parse(&text).map_err(malformed)?;
    if !manager.restore_resp_swaps(&swaps) {
        return Err(malformed(
            "the pairs do not exchange database numbers among themselves".to_owned(),
        ));
    }
    if !swaps.is_empty() {
        tracing::info!(file = %path.display(), ?swaps, "RESP databases swapped by SWAPDB restored");
    }
    Ok(())
}

/// The pairs of a swaps file.
fn parse(text: &str) -> Result<Vec<(u32, u32)>, String> {
    let mut swaps = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let mut fields = line.split_ascii_whitespace().map(str::parse::<u32>);
        match (fields.next(), fields.next(), fields.next()) {
            (Some(Ok(database)), Some(Ok(declared)), None) => swaps.push((database, declared)),
            _ => {
                return Err(format!(
                    "line {} is not two database numbers: {line:?}",
                    number + 1
                ));
            }
        }
    }
    Ok(swaps)
}

/// Writes `manager`'s swaps to `path`, replacing the file atomically (removing it when
/// nothing is swapped).
///
/// # Errors
/// Writing, syncing or renaming fails.
pub fn save(path: &Path, manager: &CacheManager) -> Result<(), SwapsError> {
    let io = |source| SwapsError::Io {
        path: path.to_owned(),
        source,
    };
    let swaps = manager.resp_swaps();
    if swaps.is_empty() {
        return match std::fs::remove_file(path) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(io(error)),
            _ => Ok(()),
        };
    }
    let mut text = String::new();
    for (database, declared) in swaps {
        let _ = writeln!(text, "{database} {declared}");
    }
    let beside = path.with_extension("new");
    let mut file = std::fs::File::create(&beside).map_err(io)?;
    file.write_all(text.as_bytes()).map_err(io)?;
    file.sync_all().map_err(io)?;
    std::fs::rename(&beside, path).map_err(io)?;
    if let Some(directory) = path.parent()
        && let Ok(directory) = std::fs::File::open(directory)
    {
        // The rename is durable once the directory is synced.
        directory.sync_all().map_err(io)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the file format is read back as written and malformed lines are refused.
    #[test]
    fn parses_pairs_and_refuses_the_rest() {
        assert_eq!(parse("0 9\n9 0\n"), Ok(vec![(0, 9), (9, 0)]));
        assert_eq!(parse("\n 1 2 \n2 1"), Ok(vec![(1, 2), (2, 1)]));
        assert!(parse("0\n").is_err());
        assert!(parse("0 1 2\n").is_err());
        assert!(parse("a b\n").is_err());
        assert!(parse("-1 0\n").is_err());
    }
}
