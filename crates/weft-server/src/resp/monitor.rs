//! MONITOR: connections that see every command the server runs, as Redis shows them —
//! `+<seconds>.<micros> [<db> <client address>|lua] "name" "arg" …`.
//!
//! Commands are shown after they ran (the commands of a transaction when EXEC runs them,
//! then `exec`), except scripts (EVAL, EVALSHA, FCALL and their `_RO` forms), which are shown
//! before the commands they call, and administrative commands, never shown. Each line goes
//! to the monitors' mailboxes; nothing is formatted while no connection monitors.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use parking_lot::RwLock;

use super::push::Mailbox;
use super::table::CommandSpec;

/// The connections in MONITOR mode.
#[derive(Debug, Default)]
pub struct Monitors {
    mailboxes: RwLock<Vec<Arc<Mailbox>>>,
    count: AtomicUsize,
}

impl Monitors {
    /// Adds a connection (once).
    pub fn add(&self, mailbox: &Arc<Mailbox>) {
        let mut mailboxes = self.mailboxes.write();
        if !mailboxes
            .iter()
            .any(|known| known.client_id() == mailbox.client_id())
        {
            mailboxes.push(Arc::clone(mailbox));
            self.count.store(mailboxes.len(), Ordering::Release);
        }
    }

    /// Removes a connection (it closed).
    pub fn remove(&self, client_id: u64) {
        if self.count.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut mailboxes = self.mailboxes.write();
        mailboxes.retain(|mailbox| mailbox.client_id() != client_id);
        self.count.store(mailboxes.len(), Ordering::Release);
    }

    /// Whether any connection monitors (one atomic load).
    #[must_use]
    pub fn any(&self) -> bool {
        self.count.load(Ordering::Acquire) > 0
    }

    /// Shows a command to every monitor: `origin` is the client's address, or `None` for a
    /// command a script called.
    pub fn feed(&self, database: u32, origin: Option<std::net::SocketAddr>, args: &[Bytes]) {
        if !self.any() {
            return;
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let mut line = format!("+{}.{:06} [{database} ", now.as_secs(), now.subsec_micros());
        match origin {
            Some(address) => {
                let _ = write!(line, "{address}] ");
            }
            None => line.push_str("lua] "),
        }
        for (at, arg) in args.iter().enumerate() {
            if at > 0 {
                line.push(' ');
            }
            quote(&mut line, arg);
        }
        line.push_str("\r\n");
        for mailbox in self.mailboxes.read().iter() {
            mailbox.push(|out, _| out.extend_from_slice(line.as_bytes()));
        }
    }
}

/// Whether a command is shown after it runs (scripts are shown before, by their own
/// handler; administrative commands never).
#[must_use]
pub fn shown_after(spec: &CommandSpec) -> bool {
    !spec.flags.contains(&"admin") && !is_script(spec)
}

/// EVAL, EVALSHA, FCALL and their read-only forms: shown before the commands they call.
#[must_use]
pub fn is_script(spec: &CommandSpec) -> bool {
    matches!(
        spec.name,
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro"
    )
}

/// Appends `bytes` quoted as Redis' `sdscatrepr` does: `"…"` with `\\`, `\"`, `\n`, `\r`,
/// `\t`, `\a`, `\b` and `\xHH` for other unprintable bytes.
fn quote(out: &mut String, bytes: &[u8]) {
    out.push('"');
    for &byte in bytes {
        match byte {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x07 => out.push_str("\\a"),
            0x08 => out.push_str("\\b"),
            0x20..=0x7e => out.push(char::from(byte)),
            other => {
                let _ = write!(out, "\\x{other:02x}");
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves arguments are quoted as Redis' sdscatrepr quotes them.
    #[test]
    fn quotes_as_redis() {
        let mut out = String::new();
        quote(&mut out, b"a\"b\\c\r\n\t\x07\x08\x01\xff z");
        assert_eq!(out, "\"a\\\"b\\\\c\\r\\n\\t\\a\\b\\x01\\xff z\"");
    }
}
