//! A linearizability checker for histories of one register: `write(v)` and `read() -> v`,
//! values unique per write, initially empty (`None`).
//!
//! The search is Wing & Gong's, with Lowe's just-in-time linearization and memoization of
//! (set of linearized operations, register state) — the algorithm of Knossos and Porcupine.
//! Calls and returns form one list in time order; the search walks it from the start,
//! linearizing any pending call the register accepts next (and lifting it out of the list),
//! and backtracks when it meets the return of an operation it has not linearized. A
//! configuration already explored is not explored again.
//!
//! An operation whose outcome is unknown (timed out, connection lost) may take effect at any
//! point after its invocation, or never: its completion is at infinity. Before the search:
//! * an unknown read constrains nothing and is dropped;
//! * an unknown write no read observed is dropped (it can always be placed last, where nobody
//!   sees it);
//! * an unknown write some read observed must take effect before each of those reads, so it
//!   completes, at the latest, when the first of them completed.
//!
//! Equal times count as concurrent: at one instant, calls come before returns.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

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

/// How many search steps [`check`] takes before giving up (an error, never a pass).
pub const STEP_LIMIT: u64 = 50_000_000;

/// What a successful check looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checked {
    /// Operations searched (after dropping unknown reads and unobserved unknown writes).
    pub ops: usize,
    /// Search steps taken.
    pub steps: u64,
}

/// Checks that `history` is linearizable; on failure, says where and why not.
pub fn check(history: &[Op]) -> Result<Checked, String> {
    check_with_limit(history, STEP_LIMIT)
}

/// [`check`] with a bound on the search.
pub fn check_with_limit(history: &[Op], step_limit: u64) -> Result<Checked, String> {
    let origin = history.iter().map(|op| op.invoke).min().unwrap_or(0);
    let show = |op: &Op| describe(op, origin);

    // Writes by value; every value read must have been written.
    let mut writes: HashMap<u64, usize> = HashMap::new();
    for (index, op) in history.iter().enumerate() {
        if op.outcome != Outcome::Unknown && op.complete < op.invoke {
            return Err(format!("completes before its invocation: {}", show(op)));
        }
        if let Action::Write(value) = op.action
            && let Some(previous) = writes.insert(value, index)
        {
            return Err(format!(
                "value {value} written twice: {} and {}",
                show(&history[previous]),
                show(op)
            ));
        }
    }
    // The earliest completion of a read of each value.
    let mut first_read: HashMap<u64, u64> = HashMap::new();
    for op in history {
        if let (Action::Read, Outcome::Ok(Some(value))) = (op.action, op.outcome) {
            let Some(&write) = writes.get(&value) else {
                return Err(format!(
                    "not linearizable: a read returned {value}, which was never written: {}",
                    show(op)
                ));
            };
            if op.complete < history[write].invoke {
                return Err(format!(
                    "not linearizable: a read returned {value} before anyone wrote it: {} \
                     completed before {} was invoked",
                    show(op),
                    show(&history[write])
                ));
            }
            let first = first_read.entry(value).or_insert(op.complete);
            *first = (*first).min(op.complete);
        }
    }

    // The operations searched, each with a finite completion.
    let mut ops: Vec<Entry> = Vec::with_capacity(history.len());
    for (index, op) in history.iter().enumerate() {
        let (kind, complete) = match (op.action, op.outcome) {
            (Action::Read, Outcome::Unknown) => continue,
            (Action::Read, Outcome::Ok(value)) => (Kind::Read(value), op.complete),
            (Action::Write(value), Outcome::Ok(_)) => (Kind::Write(value), op.complete),
            (Action::Write(value), Outcome::Unknown) => match first_read.get(&value) {
                None => continue,
                Some(&read) => (Kind::Write(value), read),
            },
        };
        ops.push(Entry {
            kind,
            invoke: op.invoke,
            complete,
            index,
        });
    }
    ops.sort_by_key(|op| (op.invoke, op.index));
    let n = ops.len();
    let search = Search::new(&ops);
    match search.run(step_limit) {
        Ok(steps) => Ok(Checked { ops: n, steps }),
        Err(Failure::GaveUp(steps)) => Err(format!(
            "gave up after {steps} search steps on {n} operations (too much concurrency to \
             check); this is not a pass"
        )),
        Err(Failure::Stuck(stuck)) => Err(explain(history, &ops, &stuck, origin)),
    }
}

fn describe(op: &Op, origin: u64) -> String {
    let ms = |t: u64| t.saturating_sub(origin) as f64 / 1e6;
    let what = match (op.action, op.outcome) {
        (Action::Write(value), Outcome::Ok(_)) => format!("write({value}) -> ok"),
        (Action::Write(value), Outcome::Unknown) => format!("write({value}) -> unknown"),
        (Action::Read, Outcome::Ok(value)) => format!("read() -> {value:?}"),
        (Action::Read, Outcome::Unknown) => "read() -> unknown".to_owned(),
    };
    let end = match op.outcome {
        Outcome::Ok(_) => format!("{:.3}", ms(op.complete)),
        Outcome::Unknown => "inf".to_owned(),
    };
    let note = if op.note.is_empty() {
        String::new()
    } else {
        format!(" ({})", op.note)
    };
    format!("{what} [{:.3} ms .. {end} ms]{note}", ms(op.invoke))
}

fn explain(history: &[Op], ops: &[Entry], stuck: &Stuck, origin: u64) -> String {
    let culprit = &ops[stuck.op];
    let mut text = format!(
        "not linearizable ({} operations searched): no linearization of the history up to \
         {:.3} ms places this operation before its completion:\n  {}\n",
        ops.len(),
        culprit.complete.saturating_sub(origin) as f64 / 1e6,
        describe(&history[culprit.index], origin),
    );
    let _ = writeln!(
        text,
        "the longest partial linearizations reaching it ({} operations linearized) leave the \
         register at {:?}; the last ones linearized (oldest first):",
        stuck.depth, stuck.states
    );
    for &op in &stuck.tail {
        let _ = writeln!(text, "  {}", describe(&history[ops[op].index], origin));
    }
    let _ = writeln!(
        text,
        "operations overlapping it (by invocation; unknown writes with the completion of the \
         first read that saw them):"
    );
    let overlapping: Vec<&Entry> = ops
        .iter()
        .filter(|op| op.invoke <= culprit.complete && op.complete >= culprit.invoke)
        .collect();
    for op in overlapping.iter().take(40) {
        let _ = writeln!(text, "  {}", describe(&history[op.index], origin));
    }
    if overlapping.len() > 40 {
        let _ = writeln!(text, "  ... and {} more", overlapping.len() - 40);
    }
    text
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Write(u64),
    Read(Option<u64>),
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    kind: Kind,
    invoke: u64,
    complete: u64,
    /// Position in the caller's history.
    index: usize,
}

enum Failure {
    GaveUp(u64),
    Stuck(Stuck),
}

/// The farthest the search got: the first return it could not get past.
struct Stuck {
    /// The operation of that return.
    op: usize,
    /// Its position among the events.
    event: usize,
    /// Operations linearized when it was reached.
    depth: usize,
    /// Register states it was reached with (a few).
    states: Vec<Option<u64>>,
    /// The last operations linearized the first time it was reached.
    tail: Vec<usize>,
}

const NIL: usize = usize::MAX;

/// The event list (calls and returns in time order) as a doubly linked list over arrays,
/// so operations can be lifted out and put back in O(1).
struct Search<'a> {
    ops: &'a [Entry],
    /// Per event: its operation, whether it is the call, and its partner event.
    op_of: Vec<usize>,
    is_call: Vec<bool>,
    partner: Vec<usize>,
    next: Vec<usize>,
    prev: Vec<usize>,
    head: usize,
}

impl<'a> Search<'a> {
    fn new(ops: &'a [Entry]) -> Self {
        // (time, returns after calls at one instant, operation)
        let mut events: Vec<(u64, bool, usize)> = Vec::with_capacity(ops.len() * 2);
        for (id, op) in ops.iter().enumerate() {
            events.push((op.invoke, false, id));
            events.push((op.complete, true, id));
        }
        events.sort_unstable();
        let count = events.len();
        let mut op_of = vec![0; count];
        let mut is_call = vec![false; count];
        let mut partner = vec![NIL; count];
        let mut call_event = vec![NIL; ops.len()];
        for (e, &(_, is_return, id)) in events.iter().enumerate() {
            op_of[e] = id;
            is_call[e] = !is_return;
            if is_return {
                partner[e] = call_event[id];
                partner[call_event[id]] = e;
            } else {
                call_event[id] = e;
            }
        }
        let head = count;
        // Events 0..count in order, then the head, which points at the first.
        let mut next: Vec<usize> = (1..=count).collect();
        if count > 0 {
            next[count - 1] = NIL;
        }
        next.push(if count == 0 { NIL } else { 0 });
        let mut prev: Vec<usize> = (0..count)
            .map(|e| e.checked_sub(1).unwrap_or(head))
            .collect();
        prev.push(NIL);
        Self {
            ops,
            op_of,
            is_call,
            partner,
            next,
            prev,
            head,
        }
    }

    fn unlink(&mut self, e: usize) {
        let (p, n) = (self.prev[e], self.next[e]);
        self.next[p] = n;
        if n != NIL {
            self.prev[n] = p;
        }
    }

    fn relink(&mut self, e: usize) {
        let (p, n) = (self.prev[e], self.next[e]);
        self.next[p] = e;
        if n != NIL {
            self.prev[n] = e;
        }
    }

    fn lift(&mut self, call: usize) {
        self.unlink(call);
        self.unlink(self.partner[call]);
    }

    fn unlift(&mut self, call: usize) {
        self.relink(self.partner[call]);
        self.relink(call);
    }

    fn run(mut self, step_limit: u64) -> Result<u64, Failure> {
        let n = self.ops.len();
        let mut linearized = vec![0u64; n.div_ceil(64)];
        // Memo: (first operation not linearized, register, words of the linearized set from
        // that operation's word up to the highest linearized operation's). Every operation
        // before the first not linearized is linearized, so this names the set exactly, and
        // stays a word or two long however long the history.
        let mut seen: HashSet<(usize, Option<u64>, Box<[u64]>)> = HashSet::new();
        // (call event, register before it, highest linearized operation before it)
        let mut stack: Vec<(usize, Option<u64>, Option<usize>)> = Vec::new();
        let mut state: Option<u64> = None;
        let mut highest: Option<usize> = None;
        let mut stuck: Option<Stuck> = None;
        let mut steps = 0u64;
        let mut entry = self.next[self.head];
        while self.next[self.head] != NIL {
            steps += 1;
            if steps > step_limit {
                return Err(Failure::GaveUp(steps));
            }
            let op = self.op_of[entry];
            if self.is_call[entry] {
                let after = match self.ops[op].kind {
                    Kind::Write(value) => Some(Some(value)),
                    Kind::Read(value) => (value == state).then_some(state),
                };
                if let Some(after) = after {
                    linearized[op / 64] |= 1 << (op % 64);
                    self.lift(entry);
                    let top = highest.max(Some(op));
                    let first = match self.next[self.head] {
                        NIL => n,
                        e => self.op_of[e],
                    };
                    let words: Box<[u64]> = match top {
                        Some(top) if top >= first => linearized[first / 64..=top / 64].into(),
                        _ => Box::default(),
                    };
                    if seen.insert((first, after, words)) {
                        stack.push((entry, state, highest));
                        state = after;
                        highest = top;
                        entry = self.next[self.head];
                        continue;
                    }
                    self.unlift(entry);
                    linearized[op / 64] &= !(1 << (op % 64));
                }
                entry = self.next[entry];
            } else {
                // The return of an operation not linearized: back up.
                match &mut stuck {
                    Some(s) if s.event > entry => {}
                    Some(s) if s.event == entry => {
                        if s.states.len() < 8 && !s.states.contains(&state) {
                            s.states.push(state);
                        }
                        s.depth = s.depth.max(stack.len());
                    }
                    _ => {
                        stuck = Some(Stuck {
                            op,
                            event: entry,
                            depth: stack.len(),
                            states: vec![state],
                            tail: stack[stack.len().saturating_sub(10)..]
                                .iter()
                                .map(|&(call, _, _)| self.op_of[call])
                                .collect(),
                        });
                    }
                }
                let Some((call, before, high)) = stack.pop() else {
                    return Err(Failure::Stuck(stuck.expect("set above")));
                };
                let undone = self.op_of[call];
                linearized[undone / 64] &= !(1 << (undone % 64));
                self.unlift(call);
                state = before;
                highest = high;
                entry = self.next[call];
            }
        }
        Ok(steps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(value: u64, invoke: u64, complete: u64) -> Op {
        Op::write(value, invoke, complete)
    }

    fn r(value: Option<u64>, invoke: u64, complete: u64) -> Op {
        Op::read(value, invoke, complete)
    }

    fn lost(value: u64, invoke: u64) -> Op {
        Op::unknown_write(value, invoke)
    }

    fn accepts(history: &[Op]) {
        if let Err(why) = check(history) {
            panic!("rejected a linearizable history: {why}");
        }
    }

    fn rejects(history: &[Op]) -> String {
        match check(history) {
            Ok(checked) => panic!("accepted a non-linearizable history ({checked:?})"),
            Err(why) => why,
        }
    }

    #[test]
    fn accepts_empty_and_sequential_histories() {
        accepts(&[]);
        accepts(&[r(None, 0, 1)]);
        accepts(&[
            r(None, 0, 1),
            w(1, 2, 3),
            r(Some(1), 4, 5),
            w(2, 6, 7),
            r(Some(2), 8, 9),
            r(Some(2), 10, 11),
        ]);
    }

    #[test]
    fn accepts_concurrent_writes_read_in_either_order() {
        // Two overlapping writes; later reads may see them in either order, but consistently.
        for (first, second) in [(1, 2), (2, 1)] {
            accepts(&[
                w(1, 0, 10),
                w(2, 5, 15),
                r(Some(first), 6, 12),
                r(Some(second), 13, 20),
                r(Some(second), 21, 22),
            ]);
        }
        // A read overlapping a write may see the old or the new value.
        accepts(&[
            w(1, 0, 1),
            w(2, 10, 20),
            r(Some(1), 11, 12),
            r(Some(2), 13, 14),
        ]);
        accepts(&[
            w(1, 0, 1),
            w(2, 10, 20),
            r(Some(2), 11, 12),
            r(Some(2), 21, 22),
        ]);
        // Reads may complete in any order while they overlap.
        accepts(&[w(1, 0, 100), r(Some(1), 10, 20), r(None, 5, 30)]);
        // Equal times are concurrent.
        accepts(&[w(1, 0, 10), r(None, 10, 12)]);
    }

    #[test]
    fn accepts_unknown_writes_that_took_effect_late_or_never() {
        // Took effect long after its invocation (and after a completed read of the old value).
        accepts(&[
            w(1, 0, 10),
            lost(2, 5),
            r(Some(1), 20, 30),
            r(Some(1), 40, 50),
            r(Some(2), 60, 70),
            r(Some(2), 80, 90),
        ]);
        // Never took effect.
        accepts(&[
            w(1, 0, 10),
            lost(2, 5),
            r(Some(1), 20, 30),
            r(Some(1), 900, 901),
        ]);
        // Took effect before a later write, which then overwrote it.
        accepts(&[
            lost(1, 0),
            r(Some(1), 5, 6),
            w(2, 10, 11),
            r(Some(2), 12, 13),
        ]);
        // Unknown reads constrain nothing.
        accepts(&[
            w(1, 0, 10),
            Op {
                action: Action::Read,
                invoke: 20,
                complete: 30,
                outcome: Outcome::Unknown,
                note: String::new(),
            },
        ]);
    }

    #[test]
    fn rejects_a_stale_read_after_a_completed_write() {
        let why = rejects(&[w(1, 0, 10), w(2, 20, 30), r(Some(1), 40, 50)]);
        assert!(why.contains("read() -> Some(1)"), "{why}");
        rejects(&[w(1, 0, 10), r(None, 20, 30)]);
    }

    #[test]
    fn rejects_a_read_of_a_value_never_written() {
        let why = rejects(&[w(1, 0, 10), r(Some(7), 20, 30)]);
        assert!(why.contains("never written"), "{why}");
        // ... or not written yet.
        let why = rejects(&[r(Some(1), 0, 10), w(1, 20, 30)]);
        assert!(why.contains("before anyone wrote it"), "{why}");
    }

    #[test]
    fn rejects_reads_observing_writes_in_contradictory_orders() {
        // Two concurrent writes: one reader sees 1 then 2, another (after) sees 2 then 1.
        let why = rejects(&[
            w(1, 0, 100),
            w(2, 0, 100),
            r(Some(1), 10, 20),
            r(Some(2), 30, 40),
            r(Some(1), 50, 60),
        ]);
        assert!(why.contains("not linearizable"), "{why}");
        // Both orders observed with overlapping reads, but completed in an impossible order.
        rejects(&[
            w(1, 0, 5),
            w(2, 0, 5),
            r(Some(1), 10, 20),
            r(Some(2), 10, 20),
            r(Some(1), 30, 40),
            r(Some(2), 30, 40),
        ]);
    }

    #[test]
    fn rejects_a_read_of_an_unknown_write_followed_by_a_read_of_the_older_value() {
        rejects(&[
            w(1, 0, 10),
            lost(2, 20),
            r(Some(2), 30, 40),
            r(Some(1), 50, 60),
        ]);
        // Even when the older write overlapped the unknown one: once a read saw 2 and a
        // later read saw 1, 1 must have come after 2, so no read may see 2 again.
        rejects(&[
            w(1, 0, 100),
            lost(2, 0),
            r(Some(2), 10, 20),
            r(Some(1), 30, 40),
            r(Some(2), 50, 60),
        ]);
    }

    #[test]
    fn rejects_malformed_histories() {
        assert!(rejects(&[w(1, 0, 1), w(1, 2, 3)]).contains("written twice"));
        assert!(rejects(&[w(1, 5, 1)]).contains("before its invocation"));
    }

    /// A tiny PRNG (splitmix64).
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// A linearizable history: `clients` clients each run operations back to back, each
    /// taking effect atomically at a random instant inside its interval; some writes lose
    /// their answer (after taking effect or not).
    fn simulated(seed: u64, clients: usize, ops: usize) -> Vec<Op> {
        let mut rng = Rng(seed);
        // Per client: (invoke, effect, complete) planned in advance.
        let mut planned: Vec<(u64, u64, u64, usize)> = Vec::new();
        for client in 0..clients {
            let mut t = rng.below(100);
            for _ in 0..ops / clients {
                let invoke = t + 1 + rng.below(50);
                let effect = invoke + rng.below(200);
                let complete = effect + rng.below(200);
                planned.push((invoke, effect, complete, client));
                t = complete;
            }
        }
        planned.sort_by_key(|&(_, effect, _, _)| effect);
        let mut register = None;
        let mut history = Vec::new();
        for (value, &(invoke, effect, complete, client)) in planned.iter().enumerate() {
            let value = value as u64 + 1;
            let _ = effect;
            let note = format!("client {client}");
            if rng.below(2) == 0 {
                register = Some(value);
                if rng.below(50) == 0 {
                    history.push(Op::unknown_write(value, invoke).with_note(note));
                } else {
                    history.push(Op::write(value, invoke, complete).with_note(note));
                }
            } else if rng.below(100) == 0 {
                // A write whose answer was lost and which never took effect.
                history.push(Op::unknown_write(1_000_000 + value, invoke).with_note(note));
            } else {
                history.push(Op::read(register, invoke, complete).with_note(note));
            }
        }
        history
    }

    #[test]
    fn accepts_long_concurrent_histories_quickly_and_rejects_them_once_broken() {
        for seed in 0..5 {
            let history = simulated(seed, 6, 4000);
            let start = std::time::Instant::now();
            let checked = match check(&history) {
                Ok(checked) => checked,
                Err(why) => panic!("seed {seed}: {why}"),
            };
            let took = start.elapsed();
            assert!(checked.ops > 3500, "{checked:?}");
            assert!(
                took.as_secs_f64() < 5.0,
                "seed {seed}: {took:?} for {checked:?}"
            );

            // Break it: a late read returns the value of a write that completed well before
            // another write (completed too) that precedes the read.
            let mut broken = history.clone();
            let late = broken.len() * 3 / 4;
            let read = (late..broken.len())
                .find(|&i| {
                    broken[i].action == Action::Read && broken[i].outcome != Outcome::Unknown
                })
                .unwrap();
            let invoke = broken[read].invoke;
            let stale = broken
                .iter()
                .filter_map(|op| match (op.action, op.outcome) {
                    (Action::Write(value), Outcome::Ok(_)) if op.complete + 10_000 < invoke => {
                        Some((op.complete, value))
                    }
                    _ => None,
                })
                .min()
                .unwrap()
                .1;
            broken[read].outcome = Outcome::Ok(Some(stale));
            check(&broken).expect_err("a stale read accepted");
        }
    }
}
