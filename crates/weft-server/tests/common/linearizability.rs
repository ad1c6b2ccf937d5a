//! Linearizability of the histories the real-process tests record, one register per key:
//! `write(v)` and `read() -> v`, values unique per write, initially empty (`None`).
//!
//! The check itself is the simulator's ([`weft_sim::linearizable`]: Gibbons and Korach's
//! zones, exact for unique-value registers, in O(n log n)); this module records what the
//! clients saw, with a note per operation (client, node), and names the operations a
//! violation involves.
//!
//! An operation whose outcome is unknown (timed out, connection lost) may take effect at any
//! point after its invocation, or never: an unknown read constrains nothing; an unknown
//! write is one that never completed. Equal times count as concurrent.

/// What a client asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Store this value (unique across the history).
    Write(u64),
    /// Read the register.
    Read,
}

/// What it got back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Completed: for a read, the value read (`None`: empty); ignored for a write.
    Ok(Option<u64>),
    /// No answer (timeout, connection error, error reply): it may or may not have taken
    /// effect, at any time after its invocation.
    Unknown,
}

/// One operation of a history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    pub action: Action,
    /// When it was sent (nanoseconds on any monotonic clock shared by the history).
    pub invoke: u64,
    /// When its answer arrived (for an unknown outcome: when the client gave up; unused).
    pub complete: u64,
    pub outcome: Outcome,
    /// Free text for reports (client, node, ...).
    pub note: String,
}

impl Op {
    pub fn write(value: u64, invoke: u64, complete: u64) -> Self {
        Self {
            action: Action::Write(value),
            invoke,
            complete,
            outcome: Outcome::Ok(None),
            note: String::new(),
        }
    }

    pub fn unknown_write(value: u64, invoke: u64) -> Self {
        Self {
            action: Action::Write(value),
            invoke,
            complete: invoke,
            outcome: Outcome::Unknown,
            note: String::new(),
        }
    }

    pub fn read(value: Option<u64>, invoke: u64, complete: u64) -> Self {
        Self {
            action: Action::Read,
            invoke,
            complete,
            outcome: Outcome::Ok(value),
            note: String::new(),
        }
    }

    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.note = note.into();
        self
    }
}

/// What a successful check looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checked {
    /// Operations checked (unknown reads are left out).
    pub ops: usize,
}

/// Checks that `history` is linearizable; on failure, says why, with the notes of the
/// operations on the values the violation names.
pub fn check(history: &[Op]) -> Result<Checked, String> {
    use weft_sim::linearizable::{self as lin, Kind};
    let ops: Vec<lin::Op> = history
        .iter()
        .filter_map(|op| {
            let (kind, completed) = match (op.action, op.outcome) {
                (Action::Write(value), Outcome::Ok(_)) => (Kind::Write(value), Some(op.complete)),
                (Action::Write(value), Outcome::Unknown) => (Kind::Write(value), None),
                (Action::Read, Outcome::Ok(value)) => (Kind::Read(value), Some(op.complete)),
                (Action::Read, Outcome::Unknown) => return None,
            };
            Some(lin::Op {
                invoked: op.invoke,
                completed,
                kind,
            })
        })
        .collect();
    match lin::check(&ops) {
        Ok(()) => Ok(Checked { ops: ops.len() }),
        Err(violation) => {
            let text = violation.to_string();
            let named = |value: u64| {
                text.split(|c: char| !c.is_ascii_digit())
                    .any(|word| word == value.to_string())
            };
            let notes: Vec<String> = history
                .iter()
                .filter(|op| match (op.action, op.outcome) {
                    (Action::Write(value), _) | (Action::Read, Outcome::Ok(Some(value))) => {
                        named(value)
                    }
                    _ => false,
                })
                .map(|op| {
                    format!(
                        "  {:?} {:?} [{}..{}] {}",
                        op.action, op.outcome, op.invoke, op.complete, op.note
                    )
                })
                .collect();
            Err(format!("{text}\n{}", notes.join("\n")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the adapter: a stale read after a completed write fails and names the
    // operations; concurrent reads seeing either value, and unknown operations, pass.
    #[test]
    fn adapts_histories_to_the_checker() {
        let stale = [
            Op::write(1, 0, 10).with_note("client a"),
            Op::write(2, 20, 30).with_note("client b"),
            Op::read(Some(1), 40, 50).with_note("client c"),
        ];
        let why = check(&stale).unwrap_err();
        assert!(
            why.contains("client c") && why.contains("client b"),
            "{why}"
        );
        let fine = [
            Op::write(1, 0, 10),
            Op::write(2, 20, 60),
            Op::read(Some(1), 25, 30),
            Op::read(Some(2), 35, 40),
            Op::unknown_write(3, 70),
        ];
        assert_eq!(check(&fine).map(|c| c.ops), Ok(5));
    }
}
