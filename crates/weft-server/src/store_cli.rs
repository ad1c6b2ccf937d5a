//! `weft store check|repair`: the file stores under a directory, examined and cut while no
//! server has them open.
//!
//! Both first lock everything they find — every data directory a server locks and every
//! store — and refuse, touching nothing, if any of it is in use, naming the process that
//! has it. `check` reads every record of every data file (`weft_store::file::check`);
//! `repair` cuts each damaged file back to its intact records (`weft_store::file::repair`)
//! and says what was lost.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;
use weft_store::file::{self, DamageKind, FileCheck, StoreCheck};
use weft_store::lock::{DATA_DIR_LOCK_NAME, DirLock};

/// What `weft store check` found: its report for people, and whether a store is damaged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckOutcome {
    /// The report, one line per store and per data file.
    pub report: String,
    /// Whether a data file holds a torn tail or corruption.
    pub damaged: bool,
}

/// The locks `check` and `repair` hold while they work.
struct Locked {
    /// Held only to keep servers out meanwhile.
    _data_dirs: Vec<DirLock>,
    stores: Vec<DirLock>,
}

/// Locks every data directory and store at or below `root`, or none.
fn lock_everything(root: &Path, holder: &str) -> anyhow::Result<Locked> {
    let survey = file::survey(root)
        .with_context(|| format!("look for file stores in {}", root.display()))?;
    let mut data_dirs = Vec::with_capacity(survey.data_dirs.len());
    for dir in &survey.data_dirs {
        data_dirs.push(
            DirLock::acquire(dir, DATA_DIR_LOCK_NAME, holder)
                .context("stop the process that has the data directory first")?,
        );
    }
    let mut stores = Vec::with_capacity(survey.stores.len());
    for dir in &survey.stores {
        stores.push(
            file::lock_store(dir, holder)
                .context("stop the process that has the store open first")?,
        );
    }
    Ok(Locked {
        _data_dirs: data_dirs,
        stores,
    })
}

/// Checks every file store at or below `root`.
///
/// # Errors
/// If `root` cannot be read, a data directory or store is in use by a process (named), or a
/// data file cannot be read.
pub fn check(root: &Path) -> anyhow::Result<CheckOutcome> {
    let locked = lock_everything(root, "weft store check")?;
    let mut report = String::new();
    let mut damaged = 0;
    for lock in &locked.stores {
        let checked = file::check(lock)
            .with_context(|| format!("check the store in {}", lock.dir().display()))?;
        describe_store(&mut report, &checked);
        damaged += usize::from(checked.is_damaged());
    }
    let stores = locked.stores.len();
    if stores == 0 {
        let _ = writeln!(report, "no file store in {}", root.display());
    } else if damaged == 0 {
        let _ = writeln!(report, "{} checked: no damage", count(stores, "store"));
    } else {
        let _ = writeln!(
            report,
            "{damaged} of {} damaged: `weft store repair` cuts each damaged file back to its intact records (what it cuts is lost)",
            count(stores, "store")
        );
    }
    Ok(CheckOutcome {
        report,
        damaged: damaged > 0,
    })
}

/// Cuts the damaged data files of every file store at or below `root`; the report of what
/// was cut and lost.
///
/// # Errors
/// If `root` cannot be read, a data directory or store is in use by a process (named), or a
/// data file cannot be read or cut.
pub fn repair(root: &Path) -> anyhow::Result<String> {
    let locked = lock_everything(root, "weft store repair")?;
    let mut report = String::new();
    let (mut repaired, mut bytes_cut, mut records_lost, mut lower_bound) = (0, 0, 0, false);
    for lock in &locked.stores {
        let repair = file::repair(lock)
            .with_context(|| format!("repair the store in {}", lock.dir().display()))?;
        let dir = lock.dir().display();
        for file in &repair.before.files {
            let Some(damage) = &file.damage else {
                continue;
            };
            let what = match damage.kind {
                DamageKind::ZeroFilled => "zero-filled space".to_owned(),
                DamageKind::TornTail => format!("torn tail: {}", damage.reason),
                DamageKind::Corrupt => format!("corrupt: {}", damage.reason),
            };
            let _ = writeln!(
                report,
                "{dir}/{}: cut {} bytes at offset {} ({what}); {}",
                file.name,
                damage.cut_bytes,
                damage.offset,
                lost_records(damage.records_after, damage.records_after_exact)
            );
            bytes_cut += damage.cut_bytes;
            records_lost += damage.records_after;
            lower_bound |= !damage.records_after_exact;
        }
        if repair.checkpoint_removed {
            let _ = writeln!(
                report,
                "{dir}: index checkpoint deleted (the next start rebuilds the index from the records left)"
            );
        }
        repaired += usize::from(repair.before.is_damaged());
    }
    let stores = locked.stores.len();
    if repaired == 0 {
        let _ = writeln!(report, "nothing to repair in {}", count(stores, "store"));
    } else {
        let _ = writeln!(
            report,
            "{repaired} of {} repaired: {bytes_cut} bytes cut, {}. A key whose newest record was cut reads as its previous stored value, or as absent.",
            count(stores, "store"),
            lost_records(records_lost, !lower_bound)
        );
    }
    Ok(report)
}

/// `1 store`, `2 stores`.
fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

fn lost_records(records: u64, exact: bool) -> String {
    match (records, exact) {
        (0, true) => "no intact record lost".to_owned(),
        (1, true) => "1 intact record lost".to_owned(),
        (records, true) => format!("{records} intact records lost"),
        (records, false) => format!("at least {records} intact records lost"),
    }
}

fn describe_store(report: &mut String, checked: &StoreCheck) {
    let checkpoint = match checkpoint_state(checked.checkpoint_valid) {
        Some(state) => format!(", {state}"),
        None => String::new(),
    };
    let _ = writeln!(
        report,
        "{}: {}{checkpoint}",
        checked.dir.display(),
        count(checked.files.len(), "data file")
    );
    for file in &checked.files {
        describe_file(report, file);
    }
}

fn checkpoint_state(valid: Option<bool>) -> Option<&'static str> {
    match valid {
        None => Some("no index checkpoint (a start reads every record)"),
        Some(true) => None,
        Some(false) => Some("index checkpoint damaged (ignored: a start reads every record)"),
    }
}

fn describe_file(report: &mut String, file: &FileCheck) {
    let Some(damage) = &file.damage else {
        let _ = writeln!(
            report,
            "  {}: {} records, {} bytes: intact",
            file.name, file.records, file.bytes
        );
        return;
    };
    let after = match damage.kind {
        DamageKind::ZeroFilled => format!(
            "then {} bytes of zero-filled space (left by a crash; nothing lost, a start cuts it)",
            damage.cut_bytes
        ),
        DamageKind::TornTail => format!(
            "then a torn tail at offset {} ({}): {} bytes, {}; a start cuts it",
            damage.offset,
            damage.reason,
            damage.cut_bytes,
            intact_after(damage.records_after, damage.records_after_exact)
        ),
        DamageKind::Corrupt => format!(
            "then corruption at offset {} ({}): {} bytes, {}; the store does not open until it is repaired",
            damage.offset,
            damage.reason,
            damage.cut_bytes,
            intact_after(damage.records_after, damage.records_after_exact)
        ),
    };
    let _ = writeln!(report, "  {}: {} records, {after}", file.name, file.records);
}

fn intact_after(records: u64, exact: bool) -> String {
    match (records, exact) {
        (0, true) => "no intact record among them".to_owned(),
        (1, true) => "1 intact record among them".to_owned(),
        (records, true) => format!("{records} intact records among them"),
        (records, false) => format!("at least {records} intact records among them"),
    }
}
