//! SLOWLOG: the commands that took longer than `slowlog-log-slower-than` microseconds (CONFIG),
//! newest first, at most `slowlog-max-len` of them, as redis-server 7.0 records and shows them.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use parking_lot::Mutex;

use crate::resp::{Reply, Session};

/// Arguments an entry keeps (Redis' `SLOWLOG_ENTRY_MAX_ARGC`); the last says how many more.
const ARGUMENTS_MAX: usize = 32;
/// Bytes an argument keeps (Redis' `SLOWLOG_ENTRY_MAX_STRING`).
const ARGUMENT_BYTES_MAX: usize = 128;
/// Redis' defaults.
const SLOWER_THAN_DEFAULT_MICROS: i64 = 10_000;
const LENGTH_DEFAULT: usize = 128;

/// One slow command.
#[derive(Debug)]
struct Entry {
    id: u64,
    at_secs: u64,
    micros: u64,
    arguments: Vec<Bytes>,
    client: String,
    name: Bytes,
}

/// The server's slow log.
#[derive(Debug)]
pub struct SlowLog {
    entries: Mutex<VecDeque<Entry>>,
    next_id: AtomicU64,
    /// `slowlog-log-slower-than`: negative logs nothing, 0 everything.
    slower_than_micros: AtomicI64,
    /// `slowlog-max-len`.
    length_max: AtomicUsize,
}

impl Default for SlowLog {
    fn default() -> Self {
        Self {
            entries: Mutex::new(VecDeque::new()),
            next_id: AtomicU64::new(0),
            slower_than_micros: AtomicI64::new(SLOWER_THAN_DEFAULT_MICROS),
            length_max: AtomicUsize::new(LENGTH_DEFAULT),
        }
    }
}

impl SlowLog {
    /// Whether commands are timed at all.
    #[must_use]
    pub fn enabled(&self) -> bool {
        self.slower_than_micros.load(Ordering::Relaxed) >= 0
    }

    /// Follows CONFIG SET of `slowlog-log-slower-than` and `slowlog-max-len`.
    pub fn configure(&self, name: &str, value: &str) {
        match name {
            "slowlog-log-slower-than" => {
                if let Ok(micros) = value.parse() {
                    self.slower_than_micros.store(micros, Ordering::Relaxed);
                }
            }
            "slowlog-max-len" => {
                if let Ok(length) = value.parse::<usize>() {
                    self.length_max.store(length, Ordering::Relaxed);
                    let mut entries = self.entries.lock();
                    entries.truncate(length);
                }
            }
            _ => {}
        }
    }

    /// Records a command that took `took`, if that is slow enough.
    pub fn record(&self, session: &Session, args: &[Bytes], took: Duration) {
        let threshold = self.slower_than_micros.load(Ordering::Relaxed);
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        if threshold < 0 || micros < u64::try_from(threshold).unwrap_or(u64::MAX) {
            return;
        }
        let length_max = self.length_max.load(Ordering::Relaxed);
        if length_max == 0 {
            return;
        }
        let kept = args.len().min(ARGUMENTS_MAX);
        let mut arguments: Vec<Bytes> = Vec::with_capacity(kept);
        for (i, argument) in args.iter().take(kept).enumerate() {
            if i == ARGUMENTS_MAX - 1 && args.len() > ARGUMENTS_MAX {
                let more = args.len() - ARGUMENTS_MAX + 1;
                arguments.push(Bytes::from(format!("... ({more} more arguments)")));
            } else if argument.len() > ARGUMENT_BYTES_MAX {
                let mut shown = argument[..ARGUMENT_BYTES_MAX].to_vec();
                shown.extend_from_slice(
                    format!("... ({} more bytes)", argument.len() - ARGUMENT_BYTES_MAX).as_bytes(),
                );
                arguments.push(Bytes::from(shown));
            } else {
                arguments.push(argument.clone());
            }
        }
        let entry = Entry {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            at_secs: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |since| since.as_secs()),
            micros,
            arguments,
            client: session.peer.to_string(),
            name: session.client_name.clone().unwrap_or_default(),
        };
        let mut entries = self.entries.lock();
        entries.push_front(entry);
        entries.truncate(length_max);
    }
}

/// SLOWLOG GET [count] | LEN | RESET | HELP.
pub fn slowlog(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let log = &session.context.slowlog;
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    match (sub.as_str(), args.len()) {
        ("get", 2 | 3) => {
            let count = match args.get(2) {
                None => 10,
                Some(raw) => match weft_resp::parse_i64_strict(raw) {
                    Some(-1) => usize::MAX,
                    Some(n) if n >= 0 => usize::try_from(n).unwrap_or(usize::MAX),
                    _ => {
                        return reply.error("ERR count should be greater than or equal to -1");
                    }
                },
            };
            let entries = log.entries.lock();
            let shown = entries.len().min(count);
            reply.array(shown);
            for entry in entries.iter().take(shown) {
                reply.array(6);
                reply.integer(i64::try_from(entry.id).unwrap_or(i64::MAX));
                reply.integer(i64::try_from(entry.at_secs).unwrap_or(i64::MAX));
                reply.integer(i64::try_from(entry.micros).unwrap_or(i64::MAX));
                reply.array(entry.arguments.len());
                for argument in &entry.arguments {
                    reply.bulk(argument);
                }
                reply.bulk(entry.client.as_bytes());
                reply.bulk(&entry.name);
            }
        }
        ("len", 2) => {
            let length = log.entries.lock().len();
            reply.integer(i64::try_from(length).unwrap_or(i64::MAX));
        }
        ("reset", 2) => {
            log.entries.lock().clear();
            reply.ok();
        }
        ("help", 2) => {
            let help = [
                "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "GET [<count>]",
                "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
                "    Entries are made of:",
                "    id, timestamp, time in microseconds, arguments array, client IP and port,",
                "    client name",
                "LEN",
                "    Return the length of the slowlog.",
                "RESET",
                "    Reset the slowlog.",
                "HELP",
                "    Print this help.",
            ];
            reply.array(help.len());
            for line in help {
                reply.simple(line);
            }
        }
        _ => reply.error(&format!(
            "ERR unknown subcommand or wrong number of arguments for '{sub}'. Try SLOWLOG HELP."
        )),
    }
}
