//! A linearizability checker for the history of one key, seen as a read/write register that
//! starts empty and whose every write writes a value no other write writes.
//!
//! # Source
//!
//! Checking linearizability is NP-complete in general, but Gibbons and Korach ("Testing shared
//! memories", SIAM J. Comput. 26(4), 1997) showed that it takes polynomial time for a register
//! history in which every read can be mapped to the one write it returns, which unique written
//! values give us. The test below is their characterization in the vocabulary of *clusters* and
//! *zones* (as Golab, Li and Shah restate it in "Analyzing consistency properties for fun and
//! profit", PODC 2011), with the boundary cases settled for timestamps that can tie.
//!
//! # The rule for equal timestamps
//!
//! Operation `a` happens before operation `b` in real time only when `a` completed *strictly
//! before* `b` was invoked (`a.completed < b.invoked`). Two operations that touch at one instant,
//! one completing at `t` and the other invoked at `t`, count as concurrent, and so does an
//! operation invoked and completed at the same `t` with anything else at `t`. The reason is that
//! a clock coarser than the events it stamps (milliseconds, say) does not keep their order: an
//! operation stamped "invoked at `t`" may really have started before another one stamped
//! "completed at `t`" ended. Ordering them would let the checker report a violation that did not
//! happen; treating them as concurrent can only let a violation confined to a single tick go
//! unreported. The simulator stamps every invocation and answer with a step of its own, so its
//! operations never tie.
//!
//! # The test
//!
//! A *cluster* is one write together with every read that returned its value. The empty initial
//! state is a virtual write that completed before time 0, so the reads that saw the key empty form
//! its cluster. For a cluster `C`, let `f(C)` be the earliest completion among its operations and
//! `s(C)` the latest invocation. Its *zone* is the span between the two: a *forward* zone
//! `[f, s]` when `f < s`, and a *backward* zone `[s, f]` otherwise. A history is linearizable if
//! and only if
//! 1. every read returns a value that some write wrote (or the initial empty state);
//! 2. no read completes before the write of its value is invoked;
//! 3. no two forward zones overlap in more than one point, that is, their open interiors are
//!    disjoint; and
//! 4. no backward zone lies inside the open interior of a forward zone.
//!
//! # Why it suffices
//!
//! Because a value is written only once, in any linearization a cluster's operations sit together:
//! its write comes first, then its reads, and no other write can come between them, since the
//! reads after it would then return the other value. So a linearization is an order of whole
//! clusters, each starting with its write, and within a cluster condition 2 is all that is needed
//! to put the write first and the reads after it in real-time order (reads of one value may go in
//! any order among themselves). Between clusters, if some
//! operation of `C` completes before some operation of `D` is invoked, then all of `C` must come
//! before all of `D`; such a pair of operations exists exactly when `f(C) < s(D)`. The history is
//! therefore linearizable exactly when conditions 1 and 2 hold and the relation "`f(C) < s(D)`"
//! between distinct clusters has no cycle, because any order of clusters that follows that
//! relation also follows real time for every pair of operations.
//!
//! A cycle always contains a cycle of two. Take the cluster `M` on the cycle with the smallest
//! `f`; every cluster `X` on the cycle has a predecessor `P` with `f(P) < s(X)`, so
//! `f(M) <= f(P) < s(X)`, which means `M` precedes every other cluster on the cycle, including
//! its own predecessor, which also precedes `M`. A cycle of two, `f(C) < s(D)` and
//! `f(D) < s(C)`, is exactly condition 3 when both zones are forward (the open intervals `(f, s)`
//! intersect), exactly condition 4 when one is backward (`f(C) < s(D) <= f(D) < s(C)`), and
//! impossible when both are backward (it would need `f(C) < s(D) <= f(D) < s(C) <= f(C)`). The
//! strict inequalities come from the rule for equal timestamps, which is why zones that share
//! only an endpoint do not conflict.
//!
//! # Writes whose answer never came
//!
//! A write that never completed may have taken effect at any time after its invocation, or never.
//! Its completion is taken to be infinitely late. If no read returned its value it imposes
//! nothing, since it can always be placed after everything else, so it is left out.
//!
//! The test sorts the zones once and looks each backward zone up by binary search, so a history
//! of `n` operations takes `O(n log n)` time.

use std::collections::HashMap;
use std::fmt;

/// One operation on one key, as a client saw it. Times are ticks of one clock shared by the
/// history (the simulator's steps).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    /// When the client sent the request.
    pub invoked: u64,
    /// When the client got the answer. `None` means the answer never came: a write that may or
    /// may not have taken effect. Reads without an answer are not recorded.
    pub completed: Option<u64>,
    /// What the operation did.
    pub kind: Kind,
}

/// What an operation did to the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// Wrote this value; every write in a history writes a different value.
    Write(u64),
    /// Read this value; `None` means the key held nothing (the initial state, before any write).
    Read(Option<u64>),
}

/// Why a history is not linearizable, in words a person debugging a seed can use: it names the
/// operations, values and times involved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation(pub String);

impl fmt::Display for Violation {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.0)
    }
}

impl std::error::Error for Violation {}

/// Checks that the history of one key is linearizable for a register that starts empty. The
/// operations may come in any order; the answer, and the wording of a violation, do not depend on
/// it. A read whose answer never came (`completed: None`) imposes nothing and is ignored.
///
/// # Errors
///
/// Returns a [`Violation`] naming the operations involved when no linearization exists: a read
/// returned a value nobody wrote, a read completed before the write of its value was invoked, a
/// read returned the empty initial state after a write had completed, or two values each had to
/// be overwritten by the other. It also returns a [`Violation`] saying the history is malformed
/// when an operation completed before it was invoked or two writes wrote the same value, because
/// the checker cannot judge such a history.
pub fn check(ops: &[Op]) -> Result<(), Violation> {
    // Walk the operations in one canonical order so that, whatever order the caller used, the same
    // history always yields the same violation.
    let mut order: Vec<usize> = (0..ops.len()).collect();
    order.sort_by_key(|&index| canonical_key(&ops[index]));

    for &index in &order {
        let op = &ops[index];
        if let Some(completed) = op.completed
            && completed < op.invoked
        {
            return Err(Violation(format!(
                "malformed history: {} completed before it was invoked",
                describe(ops, Some(index))
            )));
        }
    }

    let clusters = build_clusters(ops, &order)?;
    check_zones(ops, &clusters)
}

/// A moment on the checker's time line: a tick of the history's clock, widened so that there is room
/// for a moment before time 0 and one after every real time.
type Instant = i128;

/// When the virtual initial write was invoked and completed: before every real operation, even
/// one invoked at time 0.
const BEFORE_ALL: Instant = -1;

/// The completion time of a write whose answer never came: after every real time.
const NEVER: Instant = 1 << 64;

/// A write and the reads that returned its value.
#[derive(Debug)]
struct Cluster {
    /// The value written; `None` is the virtual write of the initial empty state.
    value: Option<u64>,
    /// Index of the write in the caller's operations; `None` for the virtual initial write.
    write: Option<usize>,
    /// Whether any read returned this value.
    read: bool,
    /// `f`: the earliest completion among the cluster's operations.
    first_completed: Instant,
    /// The operation that completed at `first_completed` (`None`: the virtual initial write).
    first_completed_op: Option<usize>,
    /// `s`: the latest invocation among the cluster's operations.
    last_invoked: Instant,
    /// The operation invoked at `last_invoked` (`None`: the virtual initial write).
    last_invoked_op: Option<usize>,
}

impl Cluster {
    fn new(value: Option<u64>, write: Option<usize>, invoked: Instant, completed: Instant) -> Self {
        Self {
            value,
            write,
            read: false,
            first_completed: completed,
            first_completed_op: write,
            last_invoked: invoked,
            last_invoked_op: write,
        }
    }

    /// Whether the zone is forward, `f < s`: some operation of the cluster completed strictly
    /// before another one was invoked.
    fn is_forward(&self) -> bool {
        self.first_completed < self.last_invoked
    }
}

/// Groups each write with the reads of its value, checking conditions 1 and 2 of the module doc
/// on the way. Writes that never completed and were never read are left out.
fn build_clusters(ops: &[Op], order: &[usize]) -> Result<Vec<Cluster>, Violation> {
    let mut clusters = vec![Cluster::new(None, None, BEFORE_ALL, BEFORE_ALL)];
    let mut cluster_of_value: HashMap<u64, usize> = HashMap::new();

    for &index in order {
        let op = &ops[index];
        if let Kind::Write(value) = op.kind {
            if let Some(&earlier) = cluster_of_value.get(&value) {
                return Err(Violation(format!(
                    "malformed history: value {value} was written twice, by {} and by {}; the \
                     checker needs every write to write a different value",
                    describe(ops, clusters[earlier].write),
                    describe(ops, Some(index))
                )));
            }
            cluster_of_value.insert(value, clusters.len());
            clusters.push(Cluster::new(
                Some(value),
                Some(index),
                Instant::from(op.invoked),
                completion(op),
            ));
        }
    }

    for &index in order {
        let op = &ops[index];
        let Kind::Read(value) = op.kind else {
            continue;
        };
        let Some(completed) = op.completed else {
            // A read that never answered could have returned anything, so it constrains nothing.
            continue;
        };
        let cluster_index = match value {
            None => 0,
            Some(value) => match cluster_of_value.get(&value) {
                Some(&cluster_index) => cluster_index,
                None => {
                    return Err(Violation(format!(
                        "{} returned value {value}, which no write in the history wrote",
                        describe(ops, Some(index))
                    )));
                }
            },
        };
        let cluster = &mut clusters[cluster_index];
        if let Some(write) = cluster.write
            && completed < ops[write].invoked
        {
            return Err(Violation(format!(
                "{} completed before {} was invoked, so it returned {} before anyone wrote it",
                describe(ops, Some(index)),
                describe(ops, Some(write)),
                value_text(cluster.value)
            )));
        }
        cluster.read = true;
        // Strict comparisons keep the first operation in canonical order among equals.
        if Instant::from(completed) < cluster.first_completed {
            cluster.first_completed = Instant::from(completed);
            cluster.first_completed_op = Some(index);
        }
        if Instant::from(op.invoked) > cluster.last_invoked {
            cluster.last_invoked = Instant::from(op.invoked);
            cluster.last_invoked_op = Some(index);
        }
    }

    clusters.retain(|cluster| {
        cluster.read
            || cluster
                .write
                .is_none_or(|write| ops[write].completed.is_some())
    });
    Ok(clusters)
}

/// Checks conditions 3 and 4 of the module doc: forward zones have disjoint open interiors, and no
/// backward zone lies inside the open interior of a forward zone.
fn check_zones(ops: &[Op], clusters: &[Cluster]) -> Result<(), Violation> {
    let (mut forward, mut backward): (Vec<&Cluster>, Vec<&Cluster>) =
        clusters.iter().partition(|cluster| cluster.is_forward());
    forward.sort_by_key(|cluster| (cluster.first_completed, cluster.last_invoked, cluster.value));
    backward.sort_by_key(|cluster| (cluster.last_invoked, cluster.first_completed, cluster.value));

    // Sorted by start, the open interiors are disjoint exactly when each zone ends no later than
    // the next one starts; if two zones overlap at all, some neighbouring pair does.
    for pair in forward.windows(2) {
        let (earlier, later) = (pair[0], pair[1]);
        if later.first_completed < earlier.last_invoked {
            return Err(conflict(ops, earlier, later));
        }
    }

    // With disjoint interiors, the only forward zone whose interior can contain a backward zone
    // is the last one starting strictly before it: any earlier one ends no later than that one
    // starts, which is before the backward zone starts.
    for zone in backward {
        let starts_before =
            forward.partition_point(|candidate| candidate.first_completed < zone.last_invoked);
        if let Some(index) = starts_before.checked_sub(1) {
            let around = forward[index];
            if zone.first_completed < around.last_invoked {
                return Err(conflict(ops, around, zone));
            }
        }
    }
    Ok(())
}

/// Explains two clusters that each must come before the other: `f(a) < s(b)` and `f(b) < s(a)`,
/// where `a` has a forward zone.
fn conflict(ops: &[Op], a: &Cluster, b: &Cluster) -> Violation {
    debug_assert!(a.first_completed < b.last_invoked && b.first_completed < a.last_invoked);
    // The initial cluster always has the smallest `f`, so when it is involved it is `a`, and the
    // only interesting half is the one that makes a read of the empty state come too late.
    if a.value.is_none() {
        return Violation(format!(
            "{} completed before {} was invoked, yet that read returned the empty initial state; \
             the register starts empty and no write empties it again (the forward zone {} of the \
             initial state conflicts with the {} zone {} of {})",
            describe(ops, b.first_completed_op),
            describe(ops, a.last_invoked_op),
            zone_text(a),
            zone_kind(b),
            zone_text(b),
            value_text(b.value),
        ));
    }
    Violation(format!(
        "{value_a} and {value_b} each had to come before the other: {} completed before {} was \
         invoked, so every operation on {value_a} comes before the write of {value_b}; and {} \
         completed before {} was invoked, so every operation on {value_b} comes before the write \
         of {value_a}; since every value is written only once, neither can return after the \
         other replaced it (the forward zone {} of {value_a} conflicts with the {} zone {} of \
         {value_b})",
        describe(ops, a.first_completed_op),
        describe(ops, b.last_invoked_op),
        describe(ops, b.first_completed_op),
        describe(ops, a.last_invoked_op),
        zone_text(a),
        zone_kind(b),
        zone_text(b),
        value_a = value_text(a.value),
        value_b = value_text(b.value),
    ))
}

/// Orders operations by time first, so that reports name the earliest operations involved.
fn canonical_key(op: &Op) -> (u64, Instant, u8, Option<u64>) {
    let (kind_rank, value) = match op.kind {
        Kind::Write(value) => (0, Some(value)),
        Kind::Read(value) => (1, value),
    };
    (op.invoked, completion(op), kind_rank, value)
}

/// The completion of an operation on the checker's time line, [`NEVER`] if the answer never came.
fn completion(op: &Op) -> Instant {
    op.completed.map_or(NEVER, Instant::from)
}

/// Names an operation and its times, or the virtual initial write when `index` is `None`.
fn describe(ops: &[Op], index: Option<usize>) -> String {
    let Some(op) = index.and_then(|index| ops.get(index)) else {
        return "the initial empty state (in place before time 0)".to_owned();
    };
    let what = match op.kind {
        Kind::Write(value) => format!("write of {value}"),
        Kind::Read(Some(value)) => format!("read returning {value}"),
        Kind::Read(None) => "read returning empty".to_owned(),
    };
    match op.completed {
        Some(completed) => format!(
            "{what} (invoked at {}, completed at {completed})",
            op.invoked
        ),
        None => format!("{what} (invoked at {}, never completed)", op.invoked),
    }
}

/// Names a cluster's value for messages.
fn value_text(value: Option<u64>) -> String {
    value.map_or_else(
        || "the initial empty state".to_owned(),
        |value| format!("value {value}"),
    )
}

/// Says which way a cluster's zone points, for messages.
fn zone_kind(cluster: &Cluster) -> &'static str {
    if cluster.is_forward() {
        "forward"
    } else {
        "backward"
    }
}

/// Writes a cluster's zone as a closed interval, low end first.
fn zone_text(cluster: &Cluster) -> String {
    let (low, high) = if cluster.is_forward() {
        (cluster.first_completed, cluster.last_invoked)
    } else {
        (cluster.last_invoked, cluster.first_completed)
    };
    format!("[{}, {}]", instant_text(low), instant_text(high))
}

/// Writes a moment of the time line, naming the two moments that are not real times.
fn instant_text(instant: Instant) -> String {
    if instant == BEFORE_ALL {
        "before 0".to_owned()
    } else if instant == NEVER {
        "never".to_owned()
    } else {
        format!("{instant}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn write(value: u64, invoked: u64, completed: u64) -> Op {
        Op {
            invoked,
            completed: Some(completed),
            kind: Kind::Write(value),
        }
    }

    fn write_unanswered(value: u64, invoked: u64) -> Op {
        Op {
            invoked,
            completed: None,
            kind: Kind::Write(value),
        }
    }

    fn read(value: Option<u64>, invoked: u64, completed: u64) -> Op {
        Op {
            invoked,
            completed: Some(completed),
            kind: Kind::Read(value),
        }
    }

    /// Asserts that both checkers reject the history and returns the fast checker's explanation.
    fn assert_violation(ops: &[Op]) -> String {
        assert!(!reference_check(ops), "the reference accepts {ops:?}");
        match check(ops) {
            Ok(()) => panic!("check accepts {ops:?}"),
            Err(violation) => violation.to_string(),
        }
    }

    /// Asserts that both checkers accept the history.
    fn assert_linearizable(ops: &[Op]) {
        assert!(reference_check(ops), "the reference rejects {ops:?}");
        assert_eq!(check(ops), Ok(()), "for {ops:?}");
    }

    // The exhaustive reference, after Wing and Gong: try every order of operations that respects
    // real time, applying each to a sequential register, and remember the (done set, register
    // value) pairs that lead nowhere. It shares nothing with `check` but the precedence rule.

    /// Whether some order of the history's operations respects real time and register semantics.
    fn reference_check(ops: &[Op]) -> bool {
        let ops: Vec<&Op> = ops
            .iter()
            .filter(|op| matches!(op.kind, Kind::Write(_)) || op.completed.is_some())
            .collect();
        assert!(
            ops.len() <= 20,
            "the reference is exponential; keep histories small"
        );
        // Writes whose answer never came may be left out; everything else must be placed.
        let required = ops
            .iter()
            .enumerate()
            .filter(|(_, op)| op.completed.is_some())
            .fold(0_u32, |mask, (index, _)| mask | 1 << index);
        reference_search(&ops, 0, None, required, &mut HashSet::new())
    }

    fn reference_search(
        ops: &[&Op],
        done: u32,
        register: Option<u64>,
        required: u32,
        dead_ends: &mut HashSet<(u32, Option<u64>)>,
    ) -> bool {
        if done & required == required {
            return true;
        }
        if dead_ends.contains(&(done, register)) {
            return false;
        }
        for (index, op) in ops.iter().enumerate() {
            if done & 1 << index != 0 {
                continue;
            }
            // An operation may go next only if no other pending one completed strictly before it
            // was invoked.
            let must_wait = ops.iter().enumerate().any(|(other, earlier)| {
                other != index
                    && done & 1 << other == 0
                    && earlier
                        .completed
                        .is_some_and(|completed| completed < op.invoked)
            });
            if must_wait {
                continue;
            }
            let next = match op.kind {
                Kind::Write(value) => Some(value),
                Kind::Read(value) if value == register => register,
                Kind::Read(_) => continue,
            };
            if reference_search(ops, done | 1 << index, next, required, dead_ends) {
                return true;
            }
        }
        dead_ends.insert((done, register));
        false
    }

    /// A tiny deterministic xorshift generator, so that every random history replays by seed.
    struct Rng(u64);

    impl Rng {
        fn new(seed: u64) -> Self {
            // Xorshift must not start at zero; mixing the seed also decorrelates nearby seeds.
            Self(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
        }

        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        /// A number in `0..bound`.
        fn below(&mut self, bound: u64) -> u64 {
            self.next() % bound
        }

        fn index(&mut self, length: usize) -> usize {
            usize::try_from(self.below(length as u64)).expect("an index fits in usize")
        }

        fn chance(&mut self, numerator: u64, denominator: u64) -> bool {
            self.below(denominator) < numerator
        }

        fn shuffle<T>(&mut self, items: &mut [T]) {
            for high in (1..items.len()).rev() {
                let low = self.index(high + 1);
                items.swap(low, high);
            }
        }
    }

    /// Simulates a linearizable register: each operation takes effect at a random instant between
    /// its invocation and completion (ties in random order), and reads return what the register
    /// holds then. Some writes never answer; of those, half take effect and half never do.
    /// Times are few and durations short so that ties are common.
    fn linearizable_history(rng: &mut Rng, op_count: usize, time_max: u64) -> Vec<Op> {
        let mut ops = Vec::with_capacity(op_count);
        // (instant of effect, random tie break, index of the operation)
        let mut effects: Vec<(u64, u64, usize)> = Vec::with_capacity(op_count);
        for value in 1..=op_count as u64 {
            let invoked = rng.below(time_max + 1);
            let completed = invoked + rng.below(4);
            let index = ops.len();
            if rng.chance(1, 2) {
                if rng.chance(1, 5) {
                    ops.push(write_unanswered(value, invoked));
                    if rng.chance(1, 2) {
                        effects.push((invoked + rng.below(8), rng.next(), index));
                    }
                    continue;
                }
                ops.push(write(value, invoked, completed));
            } else {
                ops.push(read(None, invoked, completed));
            }
            effects.push((
                invoked + rng.below(completed - invoked + 1),
                rng.next(),
                index,
            ));
        }
        effects.sort_unstable();
        let mut register = None;
        for (_, _, index) in effects {
            match ops[index].kind {
                Kind::Write(value) => register = Some(value),
                Kind::Read(ref mut value) => *value = register,
            }
        }
        rng.shuffle(&mut ops);
        ops
    }

    /// Values a read may return in a history: the empty state, every written value, and rarely
    /// one that nobody wrote.
    fn some_value(rng: &mut Rng, ops: &[Op]) -> Option<u64> {
        if rng.chance(1, 20) {
            return Some(1_000);
        }
        let written: Vec<u64> = ops
            .iter()
            .filter_map(|op| match op.kind {
                Kind::Write(value) => Some(value),
                Kind::Read(_) => None,
            })
            .collect();
        if written.is_empty() || rng.chance(1, written.len() as u64 + 1) {
            None
        } else {
            Some(written[rng.index(written.len())])
        }
    }

    /// Applies one to three small changes to a history, which may or may not break it.
    fn perturb(rng: &mut Rng, ops: &mut [Op], time_max: u64) {
        for _ in 0..=rng.below(3) {
            let index = rng.index(ops.len());
            match rng.below(5) {
                0 | 1 => {
                    // Make some read, not necessarily the chosen operation, return another value.
                    let reads: Vec<usize> = (0..ops.len())
                        .filter(|&read| matches!(ops[read].kind, Kind::Read(_)))
                        .collect();
                    if !reads.is_empty() {
                        let read = reads[rng.index(reads.len())];
                        ops[read].kind = Kind::Read(some_value(rng, ops));
                    }
                }
                2 => {
                    // Move the operation in time, keeping its duration.
                    let op = &mut ops[index];
                    let duration = op.completed.map(|completed| completed - op.invoked);
                    op.invoked = rng.below(time_max + 1);
                    op.completed = duration.map(|duration| op.invoked + duration);
                }
                3 => {
                    // Change how long the operation took.
                    let op = &mut ops[index];
                    if op.completed.is_some() {
                        op.completed = Some(op.invoked + rng.below(5));
                    }
                }
                _ => {
                    // Lose a write's answer, or give an unanswered write one.
                    let op = &mut ops[index];
                    if let Kind::Write(_) = op.kind {
                        op.completed = match op.completed {
                            Some(_) => None,
                            None => Some(op.invoked + rng.below(4)),
                        };
                    }
                }
            }
        }
    }

    /// A history with random times and reads returning random values: mostly not linearizable.
    fn random_history(rng: &mut Rng, op_count: usize, time_max: u64) -> Vec<Op> {
        let mut ops: Vec<Op> = (1..=op_count as u64)
            .map(|value| {
                let invoked = rng.below(time_max + 1);
                let completed = invoked + rng.below(4);
                if rng.chance(1, 2) {
                    if rng.chance(1, 6) {
                        write_unanswered(value, invoked)
                    } else {
                        write(value, invoked, completed)
                    }
                } else {
                    read(None, invoked, completed)
                }
            })
            .collect();
        for index in 0..ops.len() {
            if let Kind::Read(_) = ops[index].kind {
                ops[index].kind = Kind::Read(some_value(rng, &ops));
            }
        }
        ops
    }

    #[test]
    fn an_empty_history_is_linearizable() {
        // Proves the checker accepts the trivial history.
        assert_linearizable(&[]);
    }

    #[test]
    fn a_stale_read_after_a_completed_write_fails() {
        // Proves that once a newer write has completed, a later read cannot return the old value.
        let message = assert_violation(&[write(1, 0, 5), write(2, 10, 15), read(Some(1), 20, 25)]);
        assert!(
            message.contains("value 1 and value 2 each had to come before"),
            "{message}"
        );
        assert!(
            message.contains("write of 2 (invoked at 10, completed at 15)"),
            "{message}"
        );
        assert!(
            message.contains("read returning 1 (invoked at 20, completed at 25)"),
            "{message}"
        );
    }

    #[test]
    fn reading_new_then_old_during_a_concurrent_write_fails() {
        // Proves that after one read saw a concurrent write's value, a later read cannot go back.
        let ops = [
            write(1, 0, 1),
            write(2, 5, 30),
            read(Some(2), 10, 12),
            read(Some(1), 15, 17),
        ];
        let message = assert_violation(&ops);
        assert!(
            message.contains("read returning 2 (invoked at 10, completed at 12)"),
            "{message}"
        );
        assert!(
            message.contains("read returning 1 (invoked at 15, completed at 17)"),
            "{message}"
        );
    }

    #[test]
    fn reading_empty_after_a_completed_write_fails() {
        // Proves the register cannot return to its initial empty state once written.
        let message = assert_violation(&[write(1, 0, 5), read(None, 6, 7)]);
        assert!(
            message.contains("read returning empty (invoked at 6"),
            "{message}"
        );
        assert!(
            message.contains("write of 1 (invoked at 0, completed at 5)"),
            "{message}"
        );
    }

    #[test]
    fn concurrent_reads_may_see_either_value() {
        // Proves reads overlapping a write and each other may return the old or the new value.
        assert_linearizable(&[
            write(1, 0, 1),
            write(2, 5, 20),
            read(Some(2), 6, 12),
            read(Some(1), 8, 14),
        ]);
        assert_linearizable(&[
            write(1, 0, 1),
            write(2, 5, 20),
            read(Some(1), 6, 7),
            read(Some(2), 8, 9),
        ]);
        assert_linearizable(&[
            write(1, 0, 10),
            read(None, 1, 2),
            read(Some(1), 3, 4),
            read(Some(1), 5, 6),
        ]);
    }

    #[test]
    fn an_unanswered_write_that_is_read_later_passes() {
        // Proves a write whose answer never came may have taken effect at any time after it began.
        assert_linearizable(&[write_unanswered(1, 0), read(Some(1), 100, 101)]);
        assert_linearizable(&[
            write_unanswered(1, 0),
            read(None, 1, 2),
            read(Some(1), 50, 51),
        ]);
        assert_linearizable(&[
            write(1, 0, 1),
            write_unanswered(2, 5),
            read(Some(2), 10, 11),
        ]);
    }

    #[test]
    fn an_unanswered_write_that_is_never_read_passes() {
        // Proves a write whose answer never came may also never have taken effect.
        assert_linearizable(&[
            write(1, 0, 5),
            write_unanswered(2, 6),
            read(Some(1), 10, 11),
        ]);
        assert_linearizable(&[write_unanswered(1, 0), read(None, 10, 11)]);
    }

    #[test]
    fn an_unanswered_write_read_before_it_began_fails() {
        // Proves an unanswered write still cannot take effect before it was invoked.
        let message = assert_violation(&[read(Some(1), 0, 2), write_unanswered(1, 3)]);
        assert!(
            message.contains("write of 1 (invoked at 3, never completed)"),
            "{message}"
        );
    }

    #[test]
    fn an_unanswered_write_read_once_cannot_be_undone() {
        // Proves that once a read saw an unanswered write's value, the older value cannot return.
        assert_violation(&[
            write(1, 0, 1),
            write_unanswered(2, 5),
            read(Some(2), 10, 11),
            read(Some(1), 12, 13),
        ]);
    }

    #[test]
    fn a_read_of_a_value_never_written_fails() {
        // Proves a read must return a value some write wrote.
        let message = assert_violation(&[write(1, 0, 1), read(Some(7), 2, 3)]);
        assert!(
            message.contains("returned value 7, which no write in the history wrote"),
            "{message}"
        );
    }

    #[test]
    fn a_read_that_completed_before_its_write_began_fails() {
        // Proves a read cannot return a value before the write of it was invoked.
        let message = assert_violation(&[read(Some(1), 0, 4), write(1, 5, 6)]);
        assert!(message.contains("before anyone wrote it"), "{message}");
    }

    #[test]
    fn operations_touching_at_one_instant_are_concurrent() {
        // Proves the rule for equal timestamps: completing at t and being invoked at t does not
        // order two operations, but completing at t and being invoked at t + 1 does.
        assert_linearizable(&[write(1, 0, 10), read(None, 10, 10)]);
        assert_violation(&[write(1, 0, 10), read(None, 11, 11)]);

        assert_linearizable(&[read(Some(1), 0, 5), write(1, 5, 6)]);
        assert_violation(&[read(Some(1), 0, 5), write(1, 6, 6)]);

        // Forward zones [5, 10] and [10, 15] share only their endpoint.
        let touching = [
            write(1, 0, 5),
            read(Some(1), 10, 10),
            write(2, 6, 10),
            read(Some(2), 15, 15),
        ];
        assert_linearizable(&touching);
        let overlapping = [
            write(1, 0, 5),
            read(Some(1), 11, 11),
            write(2, 6, 10),
            read(Some(2), 15, 15),
        ];
        assert_violation(&overlapping);
    }

    #[test]
    fn operations_at_the_same_instant_may_take_effect_in_any_order() {
        // Proves that operations invoked and completed at one instant can be ordered either way.
        assert_linearizable(&[write(1, 3, 3), read(Some(1), 3, 3), read(None, 3, 3)]);
        assert_linearizable(&[
            write(1, 3, 3),
            write(2, 3, 3),
            read(Some(1), 3, 3),
            read(Some(2), 3, 3),
        ]);
        // Either write may be last at instant 3, but not both: reads at 4 must agree.
        assert_linearizable(&[
            write(1, 3, 3),
            write(2, 3, 3),
            read(Some(1), 3, 3),
            read(Some(2), 3, 3),
            read(Some(1), 4, 4),
        ]);
        assert_violation(&[
            write(1, 3, 3),
            write(2, 3, 3),
            read(Some(1), 4, 4),
            read(Some(2), 4, 4),
        ]);
    }

    #[test]
    fn the_initial_state_comes_before_time_zero() {
        // Proves that the virtual initial write does not collide with operations at time 0.
        assert_linearizable(&[read(None, 0, 0)]);
        assert_linearizable(&[write(1, 0, 0), read(None, 0, 0)]);
        assert_violation(&[write(1, 0, 0), read(None, 1, 1)]);
        assert_linearizable(&[read(Some(1), 0, 0), write(1, 0, 0)]);
    }

    #[test]
    fn a_backward_zone_inside_a_forward_zone_fails() {
        // Proves condition 4: value 2's cluster, backward zone [6, 9], lies inside value 1's
        // forward zone [2, 20]; with value 1's last read moved to 9 the zones only touch.
        let message = assert_violation(&[
            write(1, 0, 2),
            read(Some(1), 20, 21),
            write(2, 5, 10),
            read(Some(2), 6, 9),
        ]);
        assert!(
            message.contains(
                "forward zone [2, 20] of value 1 conflicts with the backward zone [6, 9] of value 2"
            ),
            "{message}"
        );
        assert_linearizable(&[
            write(1, 0, 2),
            read(Some(1), 9, 21),
            write(2, 5, 10),
            read(Some(2), 6, 9),
        ]);
    }

    #[test]
    fn an_unanswered_read_is_ignored() {
        // Proves that a read without an answer, which cannot have been seen, constrains nothing.
        let unanswered = Op {
            invoked: 20,
            completed: None,
            kind: Kind::Read(Some(7)),
        };
        assert_eq!(check(&[write(1, 0, 5), unanswered]), Ok(()));
    }

    #[test]
    fn malformed_histories_are_reported_as_such() {
        // Proves that inputs outside the checker's contract get an explanation, not a panic.
        let backwards = check(&[write(1, 5, 4)]).map_err(|violation| violation.0);
        assert_eq!(backwards, Err("malformed history: write of 1 (invoked at 5, completed at 4) completed before it was invoked".to_owned()));
        let twice = check(&[write(1, 0, 1), write(1, 2, 3)]).map_err(|violation| violation.0);
        assert!(
            twice
                .as_ref()
                .is_err_and(|message| message.contains("value 1 was written twice")),
            "{twice:?}"
        );
    }

    #[test]
    fn times_at_the_end_of_the_clock_work() {
        // Proves that the widened time line leaves room after the largest simulated time.
        let end = u64::MAX;
        assert_linearizable(&[
            write(1, end - 2, end),
            write_unanswered(2, end),
            read(Some(2), end, end),
        ]);
        assert_violation(&[write(1, end - 3, end - 2), read(None, end - 1, end)]);
    }

    #[test]
    fn a_long_linearizable_history_passes_quickly() {
        // Proves the check scales to simulator-sized histories (the reference could not).
        let mut rng = Rng::new(7);
        let ops = linearizable_history(&mut rng, 20_000, 5_000);
        assert_eq!(check(&ops), Ok(()));
        let mut stale = ops;
        let written_last = stale
            .iter()
            .filter_map(|op| match op.kind {
                Kind::Write(value) if op.completed.is_some() => Some((op.completed, value)),
                _ => None,
            })
            .max();
        if let Some((_, value)) = written_last {
            // The last write to complete is read back long after, then the first value written.
            stale.push(read(Some(value), 10_000, 10_000));
            let first = stale.iter().find_map(|op| match op.kind {
                Kind::Write(other) if other != value => Some(other),
                _ => None,
            });
            stale.push(read(first, 10_001, 10_001));
            assert!(check(&stale).is_err());
        }
    }

    #[test]
    fn agrees_with_the_exhaustive_reference_on_small_random_histories() {
        // Proves the fast check and the exhaustive search agree on every small history, that
        // simulated linearizable registers always pass, and that enough histories fail for the
        // comparison to mean something.
        let mut passed = [0; 3];
        let mut failed = [0; 3];
        for seed in 0..30_000_u64 {
            let mut rng = Rng::new(seed);
            let op_count = 1 + rng.index(7).max(rng.index(7));
            let time_max = 1 + rng.below(12);
            let generator = seed % 3;
            let ops = match generator {
                0 => linearizable_history(&mut rng, op_count, time_max),
                1 => {
                    let mut ops = linearizable_history(&mut rng, op_count, time_max);
                    perturb(&mut rng, &mut ops, time_max);
                    ops
                }
                _ => random_history(&mut rng, op_count, time_max),
            };
            let expected = reference_check(&ops);
            let actual = check(&ops);
            assert_eq!(
                actual.is_ok(),
                expected,
                "seed {seed}: check says {actual:?}, the reference says {expected}, for {ops:?}"
            );
            if generator == 0 {
                assert!(expected, "seed {seed}: a simulated register gave {ops:?}");
            }
            let mut shuffled = ops.clone();
            rng.shuffle(&mut shuffled);
            assert_eq!(
                check(&shuffled),
                actual,
                "seed {seed}: the answer depends on op order"
            );
            if expected {
                passed[generator as usize] += 1;
            } else {
                failed[generator as usize] += 1;
            }
        }
        let counts = format!("passed {passed:?}, failed {failed:?} (simulated, perturbed, random)");
        assert!(passed[1] > 5_000 && failed[1] > 1_500, "{counts}");
        assert!(passed[2] > 3_000 && failed[2] > 4_000, "{counts}");
    }
}
