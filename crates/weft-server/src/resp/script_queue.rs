//! Scripts from every connection run one after another on one thread at a time.
//!
//! A script holds the transaction gate exclusively (see `Session::execute`). When
//! connections served by two async workers both run scripts, each script used to wait for
//! the gate the other worker held: its thread parked and was woken again, a pair of system
//! calls and two context switches per script, a third of the time at pipeline 16.
//!
//! Now the first connection that wants to run a script while none runs becomes the
//! *runner*: it runs its own script inline as before. A connection that wants one while
//! another runs queues it — its session and output buffer travel with it — and waits
//! without holding its thread. When the runner is done with its own, it runs everything
//! queued meanwhile, each with its own connection's session, and wakes each connection with
//! its reply; if more was queued while it ran those, it hands the role to the connection
//! at the head of the queue rather than keep going, so that its own connection's next
//! request does not wait behind an endless stream of others'. The gate then changes hands
//! only between scripts and other commands, not between two scripts.
//!
//! A connection queues the scripts its client pipelined one after another together (up to
//! [`BATCH_MAX`]), as Redis runs a client's whole pipeline in one pass: the thread hand-offs
//! are paid once per batch, not once per script.
//!
//! A panic in a script ends its own connection only, wherever it ran.
//!
//! A queued connection still answers `BUSY` as Redis does: while it waits it looks every
//! [`BUSY_CHECK`] whether the running script has turned busy, and then takes its script
//! back and runs it itself, which refuses it.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use tokio::sync::oneshot;
use weft_core::{Durability, collect_durability};

use super::session::{OutputLimitExceeded, Session};

/// Most scripts a connection runs as one batch.
pub const BATCH_MAX: usize = 64;

/// How often a queued connection looks whether the running script turned busy.
const BUSY_CHECK: std::time::Duration = std::time::Duration::from_millis(10);

/// The commands that run through the queue: the ones that run a script.
#[must_use]
pub fn queues(args: &[Bytes]) -> bool {
    args.first()
        .is_some_and(|name| super::commands::scripting::runs_script(name))
}

/// The scripts waiting for the runner.
#[derive(Debug, Default)]
pub struct ScriptQueue {
    /// A connection is the runner.
    running: AtomicBool,
    queued: Mutex<VecDeque<Queued>>,
    next_id: AtomicU64,
}

/// A connection's scripts queued with what they run with.
#[derive(Debug)]
struct Job {
    id: u64,
    session: Box<Session>,
    batch: Vec<Vec<Bytes>>,
    output: BytesMut,
}

#[derive(Debug)]
struct Queued {
    job: Job,
    turn: oneshot::Sender<Turn>,
}

/// What a queued connection is woken with.
#[derive(Debug)]
enum Turn {
    /// Its script ran.
    Ran(Ran),
    /// It is the runner now (the role goes on to the next connection if this one is gone
    /// before it takes it): its script has not run.
    Run(Job, Runner),
}

/// A batch run, and the session it ran with, given back to its connection.
#[derive(Debug)]
pub struct Ran {
    /// The connection's session.
    pub session: Box<Session>,
    /// The connection's output, the replies appended.
    pub output: BytesMut,
    /// [`Session::execute`]'s outcome for the last script run.
    pub executed: Result<(), OutputLimitExceeded>,
    /// The writes whose durability the replies wait for.
    pub durability: Durability,
    /// The scripts of the batch not run: the last one run left something for the connection
    /// to do first (send what the output holds, forward the script to its keys' owner, close
    /// on an oversized reply).
    pub rest: Vec<Vec<Bytes>>,
}

/// Runs a connection's batch with its session.
fn run(mut session: Box<Session>, mut batch: Vec<Vec<Bytes>>, mut output: BytesMut) -> Ran {
    let mut durability = Durability::default();
    let mut executed = Ok(());
    let mut ran = 0;
    for args in &batch {
        let (outcome, written) = collect_durability(|| session.execute(args, &mut output));
        durability.merge(written);
        executed = outcome;
        ran += 1;
        if executed.is_err()
            || output.len() >= super::OUTPUT_FLUSH_BYTES
            // CLIENT PAUSE, in force since: the rest wait for it as any request does.
            || session.context.pause.in_force().is_some()
            || session.forward.is_some()
            || session.cluster_wide.is_some()
            || session.blocked.is_some()
            || session.quit
        {
            break;
        }
    }
    batch.drain(..ran);
    Ran {
        session,
        output,
        executed,
        durability,
        rest: batch,
    }
}

/// The runner's role, given up (released or handed over) when dropped — on unwinding too,
/// so that a panic in one script cannot leave every later one waiting.
#[derive(Debug)]
struct Runner(Option<Arc<ScriptQueue>>);

impl Runner {
    /// The role is not given up by this value (it was never handed over).
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        if let Some(queue) = self.0.take() {
            queue.give_up();
        }
    }
}

impl ScriptQueue {
    fn try_run(self: &Arc<Self>) -> Option<Runner> {
        self.running
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
            .then(|| Runner(Some(Arc::clone(self))))
    }

    /// Runs a connection's scripts (`batch`, in order): now if no other runs, else after
    /// those queued before them. `busy` says whether the running script has turned busy. `None` when its
    /// session was lost (its script panicked on the runner): the connection is to be closed.
    pub async fn execute(
        self: &Arc<Self>,
        session: Box<Session>,
        batch: Vec<Vec<Bytes>>,
        output: BytesMut,
        busy: impl Fn() -> bool,
    ) -> Option<Ran> {
        if let Some(runner) = self.try_run() {
            let ran = run(session, batch, output);
            self.run_queued(&runner);
            return Some(ran);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (turn, mut woken) = oneshot::channel();
        self.queued.lock().push_back(Queued {
            job: Job {
                id,
                session,
                batch,
                output,
            },
            turn,
        });
        // The runner may have given up between the first try and the push: then nobody
        // would run the queue.
        if let Some(runner) = self.try_run() {
            self.run_queued(&runner);
        }
        loop {
            tokio::select! {
                biased;
                turn = &mut woken => return match turn {
                    Ok(Turn::Ran(ran)) => Some(ran),
                    Ok(Turn::Run(job, runner)) => {
                        let ran = run(job.session, job.batch, job.output);
                        self.run_queued(&runner);
                        Some(ran)
                    }
                    Err(_) => None,
                },
                () = tokio::time::sleep(BUSY_CHECK) => {
                    if let Some(job) = self.withdraw_if_busy(id, &busy) {
                        // Refused with BUSY by `Session::execute` (or run, if the script
                        // ended meanwhile).
                        return Some(run(job.session, job.batch, job.output));
                    }
                }
            }
        }
    }

    /// Runs the scripts queued so far (the runner's role is held), one at a time: one not
    /// yet started can still be taken back (see [`Self::withdraw_if_busy`]).
    fn run_queued(&self, _runner: &Runner) {
        let count = self.queued.lock().len();
        for _ in 0..count {
            let Some(Queued { job, turn }) = self.queued.lock().pop_front() else {
                return;
            };
            if turn.is_closed() {
                // The connection is gone (its session is dropped here).
                continue;
            }
            // A panic in another connection's script ends that connection (its turn is
            // dropped), not the runner's.
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run(job.session, job.batch, job.output)
            }));
            if let Ok(ran) = ran {
                let _ = turn.send(Turn::Ran(ran));
            }
        }
    }

    /// Gives up the runner's role: to the connection at the head of the queue when scripts
    /// are waiting, else to whoever wants it next.
    fn give_up(self: &Arc<Self>) {
        loop {
            let head = self.queued.lock().pop_front();
            match head {
                Some(Queued { job, turn }) => {
                    // The role travels with the message: if that connection is gone, the
                    // message is dropped and the role goes on from there.
                    let runner = Runner(Some(Arc::clone(self)));
                    match turn.send(Turn::Run(job, runner)) {
                        Ok(()) => return,
                        // Gone already: not handed over, so this loop goes on.
                        Err(turn) => {
                            if let Turn::Run(_, runner) = turn {
                                runner.disarm();
                            }
                        }
                    }
                }
                None => {
                    self.running.store(false, Ordering::SeqCst);
                    // A script queued after the look above, whose connection found the role
                    // still taken, would wait for nobody: look again.
                    if self.queued.lock().is_empty()
                        || self
                            .running
                            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
                            .is_err()
                    {
                        return;
                    }
                }
            }
        }
    }

    /// Takes a queued script back when the running one has turned busy.
    fn withdraw_if_busy(&self, id: u64, busy: &dyn Fn() -> bool) -> Option<Job> {
        if !busy() {
            return None;
        }
        let mut queued = self.queued.lock();
        let at = queued.iter().position(|queued| queued.job.id == id)?;
        queued.remove(at).map(|queued| queued.job)
    }
}
