//! The interpreter scripts run in, the script cache, and one script's run.
//!
//! One [`Engine`] holds one Lua interpreter, as a Redis server does: scripts are compiled
//! once and kept by the SHA1 of their body (EVAL, EVALSHA, SCRIPT LOAD), and run one at a
//! time — the server runs each alone, which makes scripts atomic. A run reaches the server
//! through [`Host`]: each `redis.call` is one command, answered in RESP and converted into
//! Lua values as Redis converts them. [`RunState`] is what other connections see of a run:
//! whether it has been running past `busy-reply-threshold` (they then get `BUSY`), and the
//! flag SCRIPT KILL and FUNCTION KILL raise.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use mlua::{Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value, VmState};
use weft_resp::Protocol;

use crate::convert::{self, error_table, error_text};

/// The Redis version scripts see in `redis.REDIS_VERSION`.
pub const REDIS_VERSION: &str = "7.0.15";
/// `redis.REDIS_VERSION_NUM`: 7.0.15 as 0x00MMmmpp.
pub const REDIS_VERSION_NUM: u32 = 0x0007_000f;

/// How often (in Lua instructions) a running script checks the clock and the kill flag:
/// Redis' count hook.
const HOOK_INSTRUCTIONS: u32 = 100_000;

/// Redis runs a Lua garbage-collection step every this many scripts.
const GC_EVERY_RUNS: u32 = 50;

/// Stack levels searched for the script's own frame when an error is raised.
const ERROR_FRAMES_MAX: usize = 32;

/// How long a library's top level may run in FUNCTION LOAD (Redis' `LOAD_TIMEOUT_MS`).
pub const LOAD_TIMEOUT: Duration = Duration::from_millis(500);

/// The text of the error a killed script ends with.
const KILLED: &str = "ERR Script killed by user with SCRIPT KILL...";

/// The error `redis.call` raises: the Redis error table itself waits in the internal
/// table's `raised` slot. (`redis.call` is a Rust function so that the script's own frame
/// stays on the stack even when it is tail-called — `return redis.call(...)` — and the
/// error names the script's line; an mlua function cannot raise a table, so it raises
/// this marker and the error handler and `pcall` swap the table back in.)
#[derive(Debug, Clone, Copy)]
struct Raised;

impl std::fmt::Display for Raised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("redis error")
    }
}

impl std::error::Error for Raised {}

/// Whether `error` is (or wraps) [`Raised`].
fn is_raised(error: &mlua::Error) -> bool {
    match error {
        mlua::Error::ExternalError(inner) => inner.is::<Raised>(),
        mlua::Error::CallbackError { cause, .. } | mlua::Error::WithContext { cause, .. } => {
            is_raised(cause)
        }
        _ => false,
    }
}

/// What a command a script calls does, as the server answers it.
#[derive(Debug)]
pub enum CallOutcome {
    /// It ran (or was refused by the command itself): its reply in RESP, and whether it was
    /// a write (a script that wrote cannot be killed).
    Reply {
        /// The reply, one whole RESP value.
        bytes: BytesMut,
        /// Whether the command may have changed data.
        wrote: bool,
    },
    /// The script may not run it: Redis' reason, such as "This Redis command is not
    /// allowed from script" (`ERR ` is added).
    Refused(String),
}

/// The server, as a running script reaches it.
pub trait Host {
    /// Runs the command `args` for the script; its reply in RESP3 when `resp3`, else RESP2.
    /// `read_only` is set for EVAL_RO, FCALL_RO and `no-writes` scripts: the host refuses
    /// writes with "Write commands are not allowed from read-only scripts.".
    fn call(&mut self, args: &[Bytes], resp3: bool, read_only: bool) -> CallOutcome;

    /// `redis.acl_check_cmd`: whether the calling user may run `args`; `None` when no such
    /// command exists.
    fn acl_check(&mut self, args: &[Bytes]) -> Option<bool>;
}

/// A script's flags from its `#!lua flags=...` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[allow(clippy::struct_excessive_bools)]
pub struct ScriptFlags {
    /// No shebang: the script runs as before Redis 7 (flags do not apply).
    pub compat: bool,
    /// `no-writes`.
    pub no_writes: bool,
    /// `allow-oom`.
    pub allow_oom: bool,
    /// `allow-stale`.
    pub allow_stale: bool,
    /// `no-cluster`.
    pub no_cluster: bool,
    /// `allow-cross-slot-keys`.
    pub allow_cross_slot: bool,
}

impl ScriptFlags {
    /// Sets the flag named `name` (`no-writes`, ...); false for an unknown name.
    pub fn set(&mut self, name: &str) -> bool {
        match name {
            "no-writes" => self.no_writes = true,
            "allow-oom" => self.allow_oom = true,
            "allow-stale" => self.allow_stale = true,
            "no-cluster" => self.no_cluster = true,
            "allow-cross-slot-keys" => self.allow_cross_slot = true,
            _ => return false,
        }
        true
    }

    /// The flags' names, in Redis' order.
    #[must_use]
    pub fn names(&self) -> Vec<&'static str> {
        let mut names = Vec::new();
        for (set, name) in [
            (self.no_writes, "no-writes"),
            (self.allow_oom, "allow-oom"),
            (self.allow_stale, "allow-stale"),
            (self.no_cluster, "no-cluster"),
            (self.allow_cross_slot, "allow-cross-slot-keys"),
        ] {
            if set {
                names.push(name);
            }
        }
        names
    }
}

/// Splits a shebang line into words as Redis' `sdssplitargs` does: spaces separate words,
/// `"..."` (with `\n`, `\t`, `\\`, `\"`, `\xHH` escapes) and `'...'` quote parts of a
/// word; `None` for unbalanced quotes or a closing quote not followed by a space.
#[must_use]
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut words = Vec::new();
    let mut at = 0;
    loop {
        while at < line.len() && line[at].is_ascii_whitespace() {
            at += 1;
        }
        if at >= line.len() {
            return Some(words);
        }
        let mut word = Vec::new();
        let mut double = false;
        let mut single = false;
        loop {
            let Some(&c) = line.get(at) else {
                if double || single {
                    return None;
                }
                break;
            };
            if double {
                if c == b'\\' && line.get(at + 1) == Some(&b'x') {
                    let hex = line
                        .get(at + 2..at + 4)
                        .and_then(|h| std::str::from_utf8(h).ok());
                    if let Some(byte) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                        word.push(byte);
                        at += 4;
                        continue;
                    }
                }
                if c == b'\\' && at + 1 < line.len() {
                    word.push(match line[at + 1] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        other => other,
                    });
                    at += 2;
                    continue;
                }
                if c == b'"' {
                    if line.get(at + 1).is_some_and(|n| !n.is_ascii_whitespace()) {
                        return None;
                    }
                    at += 1;
                    break;
                }
                word.push(c);
            } else if single {
                if c == b'\\' && line.get(at + 1) == Some(&b'\'') {
                    word.push(b'\'');
                    at += 2;
                    continue;
                }
                if c == b'\'' {
                    if line.get(at + 1).is_some_and(|n| !n.is_ascii_whitespace()) {
                        return None;
                    }
                    at += 1;
                    break;
                }
                word.push(c);
            } else if c.is_ascii_whitespace() {
                break;
            } else if c == b'"' {
                double = true;
            } else if c == b'\'' {
                single = true;
            } else {
                word.push(c);
            }
            at += 1;
        }
        words.push(word);
    }
}

/// Whether Lua code may run for long: it has a loop (`while`, `for`, `repeat`), defines
/// a function (which may recurse), or loads code or sets metatables (which may do either).
/// Code without any of these runs a number of instructions bounded by its length, so a
/// server may run it on an async worker; the rest it runs off the worker (a script that
/// loops forever must not keep other connections from being served, or told BUSY).
#[must_use]
pub fn may_run_long(code: &[u8]) -> bool {
    const WORDS: [&[u8]; 7] = [
        b"while",
        b"for",
        b"repeat",
        b"function",
        b"load",
        b"loadstring",
        b"setmetatable",
    ];
    words(code).any(|(start, end)| WORDS.contains(&&code[start..end]))
}

/// Where each word (a run of letters, digits and `_`) of `code` starts and ends.
fn words(code: &[u8]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let is_word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut at = 0;
    std::iter::from_fn(move || {
        while at < code.len() && !is_word(code[at]) {
            at += 1;
        }
        if at >= code.len() {
            return None;
        }
        let start = at;
        while at < code.len() && is_word(code[at]) {
            at += 1;
        }
        Some((start, at))
    })
}

/// [`may_run_long`] for a library's code, where `function` is how functions are registered:
/// it may run long if it has a loop, loads code or sets metatables, or defines any function
/// other than one passed straight to `redis.register_function` (as its second argument, or
/// as `callback =`). Such functions are anonymous and their library names no other, so
/// none can call itself or another: each runs a number of instructions bounded by its
/// length.
#[must_use]
pub fn library_may_run_long(code: &[u8]) -> bool {
    const WORDS: [&[u8]; 8] = [
        b"while",
        b"for",
        b"repeat",
        b"goto",
        b"load",
        b"loadstring",
        b"setmetatable",
        b"debug",
    ];
    words(code).any(|(start, end)| {
        let word = &code[start..end];
        if word == b"function" {
            let before = code[..start].trim_ascii_end();
            let registered = before.ends_with(b",")
                || before
                    .strip_suffix(b"=")
                    .is_some_and(|rest| rest.trim_ascii_end().ends_with(b"callback"));
            return !registered;
        }
        WORDS.contains(&word)
    })
}

/// Reads an EVAL script's shebang (`#!lua flags=no-writes,allow-oom`): its flags and how
/// many bytes it takes (the line feed stays, so line numbers hold).
///
/// # Errors
/// Redis' text for a shebang it refuses.
pub fn shebang(body: &[u8]) -> Result<(ScriptFlags, usize), String> {
    let mut flags = ScriptFlags {
        compat: true,
        ..ScriptFlags::default()
    };
    if !body.starts_with(b"#!") {
        return Ok((flags, 0));
    }
    let Some(end) = body.iter().position(|&b| b == b'\n') else {
        return Err("Invalid script shebang".to_owned());
    };
    let words = split_args(&body[..end]).unwrap_or_default();
    let words: Vec<String> = words
        .iter()
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect();
    let mut parts = words.iter().map(String::as_str);
    let Some(engine) = parts.next() else {
        return Err("Invalid engine in script shebang".to_owned());
    };
    if engine != "#!lua" {
        return Err(format!("Unexpected engine in script shebang: {engine}"));
    }
    flags.compat = false;
    for part in parts {
        let Some(list) = part.strip_prefix("flags=") else {
            return Err(format!("Unknown lua shebang option: {part}"));
        };
        for name in list.split(',') {
            if name.is_empty() {
                continue;
            }
            if !flags.set(name) {
                return Err(format!("Unexpected flag in script shebang: {name}"));
            }
        }
    }
    Ok((flags, end))
}

/// What the rest of the server sees of the script that runs now.
#[derive(Debug, Default)]
pub struct RunState {
    active: AtomicBool,
    killed: AtomicBool,
    timed_out: AtomicBool,
    wrote: AtomicBool,
    eval_mode: AtomicBool,
    resp3: AtomicBool,
    /// FUNCTION LOAD runs a library's top level: it may take [`LOAD_TIMEOUT`], and is
    /// never busy.
    loading: AtomicBool,
    /// The function or script running and the command that runs it (FUNCTION STATS).
    running: Mutex<Option<(String, Vec<Bytes>)>>,
    /// `busy-reply-threshold` in milliseconds (0: never busy).
    threshold_ms: AtomicU64,
    started: Mutex<Option<Instant>>,
}

/// Why SCRIPT KILL or FUNCTION KILL did not kill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillRefused {
    /// Nothing runs.
    NotBusy,
    /// The script wrote: killing it would leave half its writes.
    Unkillable,
    /// SCRIPT KILL for a function, or FUNCTION KILL for a script.
    WrongKind,
}

impl KillRefused {
    /// Redis' reply text.
    #[must_use]
    pub fn text(self, eval: bool) -> &'static str {
        match self {
            Self::NotBusy => "NOTBUSY No scripts in execution right now.",
            Self::Unkillable => {
                "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command."
            }
            // Asking to kill the other kind gets the other kind's BUSY text.
            Self::WrongKind if eval => {
                "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
            }
            Self::WrongKind => {
                "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
            }
        }
    }
}

impl RunState {
    /// A state with `busy-reply-threshold` of `threshold`.
    #[must_use]
    pub fn new(threshold: Duration) -> Self {
        let state = Self::default();
        state.set_threshold(threshold);
        state
    }

    /// Changes `busy-reply-threshold` (CONFIG SET `lua-time-limit`).
    pub fn set_threshold(&self, threshold: Duration) {
        self.threshold_ms.store(
            u64::try_from(threshold.as_millis()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    /// `busy-reply-threshold`.
    #[must_use]
    pub fn threshold(&self) -> Duration {
        Duration::from_millis(self.threshold_ms.load(Ordering::Relaxed))
    }

    /// When a script has run past `busy-reply-threshold`: the `BUSY` error other clients
    /// get (it names SCRIPT KILL for EVAL, FUNCTION KILL for FCALL).
    #[must_use]
    pub fn busy(&self) -> Option<&'static str> {
        if !self.active.load(Ordering::Acquire) || !self.timed_out.load(Ordering::Acquire) {
            return None;
        }
        Some(if self.eval_mode.load(Ordering::Relaxed) {
            "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
        } else {
            "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."
        })
    }

    /// Whether a script runs now.
    #[must_use]
    pub fn active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// SCRIPT KILL (`eval`) or FUNCTION KILL: asks the running script to stop.
    ///
    /// # Errors
    /// [`KillRefused`] when nothing runs, the script wrote, or it is of the other kind.
    pub fn kill(&self, eval: bool) -> Result<(), KillRefused> {
        if !self.active.load(Ordering::Acquire) {
            return Err(KillRefused::NotBusy);
        }
        if self.wrote.load(Ordering::Acquire) {
            return Err(KillRefused::Unkillable);
        }
        if self.eval_mode.load(Ordering::Relaxed) != eval {
            return Err(KillRefused::WrongKind);
        }
        self.killed.store(true, Ordering::Release);
        Ok(())
    }

    fn begin(&self, eval_mode: bool) {
        *self.started.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
        self.killed.store(false, Ordering::Relaxed);
        self.timed_out.store(false, Ordering::Relaxed);
        self.wrote.store(false, Ordering::Relaxed);
        self.resp3.store(false, Ordering::Relaxed);
        self.eval_mode.store(eval_mode, Ordering::Relaxed);
        self.active.store(true, Ordering::Release);
    }

    /// What runs now: the function's name (a script's SHA1), the command that runs it, and
    /// for how long (FUNCTION STATS).
    #[must_use]
    pub fn running(&self) -> Option<(String, Vec<Bytes>, Duration)> {
        if !self.active() || self.loading.load(Ordering::Acquire) {
            return None;
        }
        let started = (*self.started.lock().unwrap_or_else(PoisonError::into_inner))?;
        let (name, command) = self
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()?;
        Some((name, command, started.elapsed()))
    }

    /// Whether the running script is a function (FCALL) rather than EVAL.
    #[must_use]
    pub fn is_eval(&self) -> bool {
        self.eval_mode.load(Ordering::Relaxed)
    }

    /// Records the command that runs the next script (FUNCTION STATS shows it).
    pub fn set_command(&self, name: &str, command: &[Bytes]) {
        *self.running.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((name.to_owned(), command.to_vec()));
    }

    pub(crate) fn begin_load(&self) {
        self.loading.store(true, Ordering::Release);
        self.begin(false);
    }

    pub(crate) fn end_load(&self) {
        self.end();
        self.loading.store(false, Ordering::Release);
    }

    fn end(&self) {
        *self.running.lock().unwrap_or_else(PoisonError::into_inner) = None;
        self.active.store(false, Ordering::Release);
        self.timed_out.store(false, Ordering::Release);
        self.killed.store(false, Ordering::Release);
    }

    /// The count hook: marks the run busy past the threshold; stops it when killed.
    fn check(&self) -> mlua::Result<VmState> {
        if !self.active.load(Ordering::Acquire) {
            return Ok(VmState::Continue);
        }
        if self.killed.load(Ordering::Acquire) {
            return Err(mlua::Error::runtime(KILLED));
        }
        if self.loading.load(Ordering::Acquire) {
            let started = *self.started.lock().unwrap_or_else(PoisonError::into_inner);
            if started.is_some_and(|started| started.elapsed() > LOAD_TIMEOUT) {
                return Err(mlua::Error::runtime("FUNCTION LOAD timeout"));
            }
            return Ok(VmState::Continue);
        }
        let threshold = self.threshold_ms.load(Ordering::Relaxed);
        if threshold > 0 && !self.timed_out.load(Ordering::Relaxed) {
            let started = *self.started.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(started) = started
                && started.elapsed() >= Duration::from_millis(threshold)
            {
                tracing::warn!(
                    target: "weft::script",
                    "Slow script detected: still in execution after {} milliseconds. You can try killing the script using the {} command.",
                    started.elapsed().as_millis(),
                    if self.eval_mode.load(Ordering::Relaxed) { "SCRIPT KILL" } else { "FUNCTION KILL" }
                );
                self.timed_out.store(true, Ordering::Release);
            }
        }
        Ok(VmState::Continue)
    }
}

/// One compiled script of the cache.
#[derive(Debug)]
struct Script {
    body: Bytes,
    flags: ScriptFlags,
    function: Function,
    /// [`may_run_long`] of its body, read once when it was loaded.
    long: bool,
}

/// A script's invocation: its keys and arguments and how it was called.
#[derive(Debug, Clone, Copy)]
pub struct Invocation<'a> {
    /// KEYS.
    pub keys: &'a [Bytes],
    /// ARGV.
    pub args: &'a [Bytes],
    /// EVAL_RO, EVALSHA_RO or FCALL_RO.
    pub read_only: bool,
    /// The data lives on a cluster (`no-cluster` scripts refuse to run).
    pub clustered: bool,
}

/// The interpreter, its sandbox and the script cache.
#[derive(Debug)]
pub struct Engine {
    lua: Lua,
    /// The real globals (KEYS and ARGV are set there).
    globals: Table,
    /// What scripts see as their globals.
    env: Table,
    handler: Function,
    raw_xpcall: Function,
    fcall_runner: Function,
    /// The running script's host (none between runs).
    host: HostSlot,
    scripts: HashMap<String, Script>,
    scripts_bytes: usize,
    run: Arc<RunState>,
    runs: u32,
}

/// Where `redis.call`'s C half finds its Rust half (the Lua registry).
const REDIS_CALL_KEY: &std::ffi::CStr = c"weft.redis_call";

/// The running script's host, reached by `redis.call`, `redis.pcall` and
/// `redis.acl_check_cmd` — functions made once with the interpreter rather than for each run
/// (making and unmaking them per run was a tenth of a short script's cost).
#[derive(Debug, Clone, Default)]
struct HostSlot(Arc<Mutex<Option<Current>>>);

/// The host of the script that runs now, and whether the run may not write.
#[derive(Debug)]
struct Current {
    host: std::ptr::NonNull<dyn Host>,
    read_only: bool,
}

// SAFETY: the pointer is dereferenced only by `HostSlot::with`, on the thread running the
// script, while `HostSlot::lend` holds the host's exclusive borrow.
unsafe impl Send for Current {}

/// Empties the slot when dropped (see [`HostSlot::lend`]).
struct Lent<'s>(&'s HostSlot);

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        self.0.put(None);
    }
}

/// Puts the host back when dropped (see [`HostSlot::with`]).
struct Taken<'s>(&'s HostSlot, Option<Current>);

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        self.0.put(self.1.take());
    }
}

impl HostSlot {
    fn put(&self, current: Option<Current>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = current;
    }

    /// Runs `f` (a script) with `host` reachable from the script's calls.
    fn lend<R>(&self, host: &mut dyn Host, read_only: bool, f: impl FnOnce() -> R) -> R {
        let host: std::ptr::NonNull<dyn Host + '_> = std::ptr::NonNull::from(host);
        // SAFETY: only the lifetime changes. `Lent` empties the slot before this function
        // returns or unwinds, while the borrow of `host` it holds is live: the pointer is
        // never used past the borrow.
        let host: std::ptr::NonNull<dyn Host + 'static> = unsafe { std::mem::transmute(host) };
        self.put(Some(Current { host, read_only }));
        let _lent = Lent(self);
        f()
    }

    /// Runs `f` with the running script's host and its read-only flag; `None` between runs.
    /// The host is out of the slot while `f` runs: a call reaching here again meanwhile (none
    /// should: a command a script calls cannot run a script) finds no host, never a second
    /// reference to it.
    fn with<R>(&self, f: impl FnOnce(&mut dyn Host, bool) -> R) -> Option<R> {
        let current = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()?;
        let (host, read_only) = (current.host, current.read_only);
        let _taken = Taken(self, Some(current));
        // SAFETY: the slot holds a host only within `lend`, which has borrowed it exclusively
        // for the run on this thread, and it was taken out of the slot above: this is the
        // only reference made from it until `_taken` puts it back.
        Some(f(unsafe { &mut *host.as_ptr() }, read_only))
    }
}

/// Ends the run when dropped.
struct Ending<'r>(&'r RunState);

impl Drop for Ending<'_> {
    fn drop(&mut self) {
        self.0.end();
    }
}

/// The error of `redis.call`/`redis.pcall` between runs.
const OUTSIDE_A_RUN: &[u8] = b"ERR redis.call/pcall can only be called inside a script invocation";

/// `redis.call`/`redis.pcall` with the packed arguments: the reply converted to Lua, and
/// whether it is an error.
fn call_host(
    lua: &Lua,
    slot: &HostSlot,
    state: &RunState,
    packed: &Table,
) -> mlua::Result<(Value, bool)> {
    let called = slot.with(|host, read_only| {
        let args = match packed_command_args(packed) {
            Ok(args) => args,
            Err(text) => {
                return Ok((
                    Value::Table(error_table(lua, text.as_bytes(), false)?),
                    true,
                ));
            }
        };
        let resp3 = state.resp3.load(Ordering::Relaxed);
        match host.call(&args, resp3, read_only) {
            CallOutcome::Refused(reason) => {
                let text = error_text(reason.as_bytes());
                Ok((Value::Table(error_table(lua, &text, true)?), true))
            }
            CallOutcome::Reply { bytes, wrote } => {
                if wrote {
                    state.wrote.store(true, Ordering::Release);
                }
                let failed = bytes.first() == Some(&b'-');
                match convert::reply_to_lua(lua, &bytes) {
                    Ok(value) => Ok((value, failed)),
                    Err(error) => {
                        let text = format!("ERR reading the reply: {error}");
                        Ok((
                            Value::Table(error_table(lua, text.as_bytes(), false)?),
                            true,
                        ))
                    }
                }
            }
        }
    });
    called.unwrap_or_else(|| Ok((Value::Table(error_table(lua, OUTSIDE_A_RUN, false)?), true)))
}

/// Packs the C function's arguments into a new table `{..., n = count}` at stack index 1,
/// leaving only it. Uses two stack slots beyond the arguments, within the `LUA_MINSTACK`
/// every C function is given — no `lua_checkstack`, whose limit (`LUAI_MAXCSTACK`, 8000
/// values) a script's `redis.call(cmd, unpack(t))` with thousands of arguments reaches. That
/// limit is why `redis.call` cannot be an mlua function, whose entry checks the stack.
///
/// # Safety
/// `state` is the running C function's state.
unsafe fn pack_arguments(state: *mut mlua::ffi::lua_State) {
    // SAFETY: the stack holds `count` arguments and room for two more values (see above);
    // the new table has no metatable, so the raw sets and `setfield` call nothing.
    unsafe {
        let count = mlua::ffi::lua_gettop(state);
        mlua::ffi::lua_createtable(state, count, 1);
        for index in 1..=count {
            mlua::ffi::lua_pushvalue(state, index);
            mlua::ffi::lua_rawseti_(state, -2, index);
        }
        mlua::ffi::lua_pushinteger(state, mlua::ffi::lua_Integer::from(count));
        mlua::ffi::lua_setfield(state, -2, c"n".as_ptr());
        mlua::ffi::lua_insert(state, 1);
        mlua::ffi::lua_settop(state, 1);
    }
}

/// `I.pack(...)`: the arguments as one table with `n` (see [`pack_arguments`]).
unsafe extern "C-unwind" fn pack_raw(state: *mut mlua::ffi::lua_State) -> std::ffi::c_int {
    // SAFETY: called by Lua as a C function.
    unsafe { pack_arguments(state) };
    1
}

/// `redis.call(...)`: packs the arguments (see [`pack_arguments`]) and calls the Rust half
/// with the table. An error it raises unwinds through this frame as any Lua error does;
/// the frame owns nothing to drop. Being a C function, not Lua, a script's tail call
/// `return redis.call(...)` keeps the script's frame, so errors still name its line.
unsafe extern "C-unwind" fn redis_call_raw(state: *mut mlua::ffi::lua_State) -> std::ffi::c_int {
    // SAFETY: called by Lua as a C function; the registry holds the Rust half (set by
    // `Engine::new`), and pushing it takes the second of the slots `pack_arguments` leaves.
    unsafe {
        pack_arguments(state);
        mlua::ffi::lua_getfield(state, mlua::ffi::LUA_REGISTRYINDEX, REDIS_CALL_KEY.as_ptr());
        mlua::ffi::lua_insert(state, 1);
        mlua::ffi::lua_call(state, 1, 1);
    }
    1
}

/// The SHA1 of `body` in lower-case hexadecimal, as Redis names scripts.
#[must_use]
pub fn sha1_hex(body: &[u8]) -> String {
    use std::fmt::Write as _;
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA1_FOR_LEGACY_USE_ONLY, body);
    let mut hex = String::with_capacity(40);
    for byte in digest.as_ref() {
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

impl Engine {
    /// A fresh interpreter with Redis' libraries and sandbox, reporting runs to `run`.
    ///
    /// # Errors
    /// Lua's error if the interpreter cannot be set up (out of memory).
    pub fn new(run: Arc<RunState>) -> mlua::Result<Self> {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::default(),
        )?;
        crate::libs::open_all(&lua)?;
        let internal = lua.create_table()?;
        internal.raw_set("version", REDIS_VERSION)?;
        internal.raw_set("version_num", REDIS_VERSION_NUM)?;
        let state = Arc::clone(&run);
        internal.raw_set(
            "killed",
            lua.create_function(move |_, ()| Ok(state.killed.load(Ordering::Acquire)))?,
        )?;
        internal.raw_set(
            "sha1hex",
            lua.create_function(|_, text: Value| {
                let bytes = match &text {
                    Value::String(s) => s.as_bytes().to_vec(),
                    Value::Number(n) => lua_number_text(*n).into_bytes(),
                    Value::Integer(n) => n.to_string().into_bytes(),
                    _ => Vec::new(),
                };
                Ok(sha1_hex(&bytes))
            })?,
        )?;
        internal.raw_set(
            "error_text",
            lua.create_function(|lua, text: mlua::String| {
                lua.create_string(error_text(&text.as_bytes()))
            })?,
        )?;
        internal.raw_set("log", lua.create_function(log)?)?;
        let state = Arc::clone(&run);
        internal.raw_set(
            "setresp",
            lua.create_function(move |_, args: MultiValue| {
                if !state.active() {
                    return Ok(Some(
                        "ERR redis.setresp can only be called inside a script invocation"
                            .to_owned(),
                    ));
                }
                if args.len() != 1 {
                    return Ok(Some(
                        "ERR redis.setresp() requires one argument.".to_owned(),
                    ));
                }
                #[allow(clippy::cast_possible_truncation)]
                let version = match args.front() {
                    Some(Value::Number(n)) => *n as i64,
                    Some(Value::Integer(n)) => *n,
                    Some(Value::String(s)) => s
                        .to_str()
                        .ok()
                        .and_then(|s| s.trim().parse::<f64>().ok())
                        .map_or(0, |n| n as i64),
                    _ => 0,
                };
                match version {
                    2 => state.resp3.store(false, Ordering::Relaxed),
                    3 => state.resp3.store(true, Ordering::Relaxed),
                    _ => return Ok(Some("ERR RESP version must be 2 or 3.".to_owned())),
                }
                Ok(None)
            })?,
        )?;
        let state = Arc::clone(&run);
        internal.raw_set(
            "set_repl",
            lua.create_function(move |_, args: MultiValue| {
                if !state.active() {
                    return Ok(Some(
                        "ERR redis.set_repl can only be called inside a script invocation"
                            .to_owned(),
                    ));
                }
                if args.len() != 1 {
                    return Ok(Some(
                        "ERR redis.set_repl() requires two arguments.".to_owned(),
                    ));
                }
                #[allow(clippy::cast_possible_truncation)]
                let flags = match args.front() {
                    Some(Value::Number(n)) => *n as i64,
                    Some(Value::Integer(n)) => *n,
                    _ => 0,
                };
                if flags & !3 != 0 {
                    return Ok(Some(
                        "ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE."
                            .to_owned(),
                    ));
                }
                Ok(None)
            })?,
        )?;
        // `redis.pcall`'s Rust half (`redis.call`'s is below): the reply, and whether it is
        // an error.
        let host = HostSlot::default();
        let (slot, state) = (host.clone(), Arc::clone(&run));
        internal.raw_set(
            "call",
            lua.create_function(move |lua, packed: Table| call_host(lua, &slot, &state, &packed))?,
        )?;
        let slot = host.clone();
        internal.raw_set(
            "acl_check_cmd",
            lua.create_function(move |_, values: MultiValue| {
                let checked = slot.with(|host, _| match command_args(values) {
                    Err(text) => (Value::Nil, Some(text)),
                    Ok(args) => match host.acl_check(&args) {
                        Some(allowed) => (Value::Boolean(allowed), None),
                        None => (
                            Value::Nil,
                            Some("ERR Invalid command passed to redis.acl_check_cmd()".to_owned()),
                        ),
                    },
                });
                Ok(checked.unwrap_or_else(|| {
                    (
                        Value::Nil,
                        Some(
                            "ERR redis.acl_check_cmd can only be called inside a script invocation"
                                .to_owned(),
                        ),
                    )
                }))
            })?,
        )?;

        // `redis.call`'s Rust half: raises the error reply instead of returning it.
        let (slot, state, raised) = (host.clone(), Arc::clone(&run), internal.clone());
        let redis_call = lua.create_function(move |lua, packed: Table| {
            let (value, failed) = call_host(lua, &slot, &state, &packed)?;
            if failed {
                raised.raw_set("raised", value)?;
                return Err(mlua::Error::external(Raised));
            }
            Ok(value)
        })?;
        lua.set_named_registry_value(REDIS_CALL_KEY.to_str().unwrap_or_default(), redis_call)?;
        // SAFETY: both are C functions as Lua expects them (see their documentation).
        let (redis_call_raw, pack_raw) = unsafe {
            (
                lua.create_c_function(redis_call_raw)?,
                lua.create_c_function(pack_raw)?,
            )
        };
        internal.raw_set("redis_call", redis_call_raw)?;
        internal.raw_set("pack", pack_raw)?;
        let slot = internal.clone();
        internal.raw_set(
            "unraise",
            lua.create_function(move |_, error: Value| match &error {
                Value::Error(e) if is_raised(e) => slot.raw_get::<Value>("raised"),
                _ => Ok(error),
            })?,
        )?;

        let env: Table = lua
            .load(include_str!("sandbox.lua"))
            .set_name("=sandbox")
            .call(internal.clone())?;
        let raw_xpcall: Function = internal.raw_get("raw_xpcall")?;
        let fcall_runner: Function = lua
            .load(
                "local xpcall = ...
                 return function(f, keys, args, handler)
                   return xpcall(function() return f(keys, args) end, handler)
                 end",
            )
            .set_name("=fcall")
            .call(raw_xpcall.clone())?;
        let state = Arc::clone(&run);
        let slot = internal.clone();
        let handler = lua.create_function(move |lua, error: Value| {
            let error = match &error {
                Value::Error(e) if is_raised(e) => slot.raw_get::<Value>("raised")?,
                _ => error,
            };
            error_with_place(lua, error, &state)
        })?;
        let state = Arc::clone(&run);
        lua.set_hook(
            HookTriggers::new().every_nth_instruction(HOOK_INSTRUCTIONS),
            move |_, _| state.check(),
        )?;
        let globals = lua.globals();
        Ok(Self {
            lua,
            globals,
            env,
            handler,
            raw_xpcall,
            fcall_runner,
            host,
            scripts: HashMap::new(),
            scripts_bytes: 0,
            run,
            runs: 0,
        })
    }

    /// What other connections see of the running script.
    #[must_use]
    pub fn run_state(&self) -> &Arc<RunState> {
        &self.run
    }

    /// The interpreter (for the function libraries, which share it).
    #[must_use]
    pub fn lua(&self) -> &Lua {
        &self.lua
    }

    /// What scripts see as their globals.
    #[must_use]
    pub fn env(&self) -> &Table {
        &self.env
    }

    /// Runs `function` with no arguments as a run of its own (FUNCTION LOAD runs a
    /// library's top level so), under the load timeout: whether it ended well, and its
    /// result or Redis error table.
    ///
    /// # Errors
    /// Lua's error when the call cannot be made.
    pub fn run_loading(&self, function: &Function) -> mlua::Result<(bool, Value)> {
        self.run.begin_load();
        let results: mlua::Result<MultiValue> = self
            .raw_xpcall
            .call((function.clone(), self.handler.clone()));
        self.run.end_load();
        let mut results = results?.into_iter();
        let ok = matches!(results.next(), Some(Value::Boolean(true)));
        Ok((ok, results.next().unwrap_or(Value::Nil)))
    }

    /// SCRIPT FLUSH: forgets every script and starts a new interpreter.
    ///
    /// # Errors
    /// Lua's error if the new interpreter cannot be set up.
    pub fn flush(&mut self) -> mlua::Result<()> {
        *self = Self::new(Arc::clone(&self.run))?;
        Ok(())
    }

    /// How many scripts the cache holds (INFO's `number_of_cached_scripts`).
    #[must_use]
    pub fn scripts(&self) -> usize {
        self.scripts.len()
    }

    /// Bytes of script bodies cached (INFO's `used_memory_scripts_eval`).
    #[must_use]
    pub fn scripts_bytes(&self) -> usize {
        self.scripts_bytes
    }

    /// Bytes the interpreter uses (INFO's `used_memory_lua`).
    #[must_use]
    pub fn memory(&self) -> usize {
        self.lua.used_memory()
    }

    /// SCRIPT EXISTS for one SHA1 (either case).
    #[must_use]
    pub fn exists(&self, sha: &[u8]) -> bool {
        std::str::from_utf8(sha)
            .is_ok_and(|sha| self.scripts.contains_key(&sha.to_ascii_lowercase()))
    }

    /// SCRIPT LOAD: compiles and caches `body`; its SHA1.
    ///
    /// # Errors
    /// The error reply's text (without `-`): a refused shebang or Lua's compile error.
    pub fn load(&mut self, body: &[u8]) -> Result<String, String> {
        let sha = sha1_hex(body);
        if self.scripts.contains_key(&sha) {
            return Ok(sha);
        }
        let (flags, skip) = shebang(body).map_err(|e| format!("ERR {e}"))?;
        let function = self
            .compile(&body[skip..], "@user_script")
            .map_err(|e| format!("ERR Error compiling script (new function): {e}"))?;
        self.scripts_bytes += body.len() + sha.len();
        self.scripts.insert(
            sha.clone(),
            Script {
                body: Bytes::copy_from_slice(body),
                flags,
                function,
                long: may_run_long(body),
            },
        );
        Ok(sha)
    }

    /// The body of a cached script.
    #[must_use]
    pub fn body(&self, sha: &str) -> Option<&Bytes> {
        self.scripts.get(sha).map(|script| &script.body)
    }

    /// Whether a cached script may run for long ([`may_run_long`] of its body, read when
    /// it was loaded); `None` when there is no such script.
    #[must_use]
    pub fn runs_long(&self, sha: &str) -> Option<bool> {
        self.scripts.get(sha).map(|script| script.long)
    }

    /// Compiles `code` as a function whose globals are the sandbox's.
    ///
    /// # Errors
    /// Lua's message for code that does not compile.
    pub fn compile(&self, code: &[u8], name: &str) -> Result<Function, String> {
        let function = self
            .lua
            .load(code)
            .set_name(name)
            .set_mode(mlua::ChunkMode::Text)
            .into_function()
            .map_err(|e| match e {
                mlua::Error::SyntaxError { message, .. } => message,
                other => other.to_string(),
            })?;
        function
            .set_environment(self.env.clone())
            .map_err(|e| e.to_string())?;
        Ok(function)
    }

    /// EVAL: caches `body` if new, then runs it; the reply goes to `out` in `protocol`.
    pub fn eval(
        &mut self,
        host: &mut dyn Host,
        body: &[u8],
        invocation: Invocation<'_>,
        out: &mut BytesMut,
        protocol: Protocol,
    ) {
        match self.load(body) {
            Ok(sha) => self.evalsha(host, sha.as_bytes(), invocation, out, protocol),
            Err(error) => weft_resp::write_error(out, &error),
        }
    }

    /// EVALSHA: runs a cached script; NOSCRIPT when there is none.
    pub fn evalsha(
        &mut self,
        host: &mut dyn Host,
        sha: &[u8],
        invocation: Invocation<'_>,
        out: &mut BytesMut,
        protocol: Protocol,
    ) {
        let script = std::str::from_utf8(sha)
            .ok()
            .map(str::to_ascii_lowercase)
            .and_then(|sha| self.scripts.get(&sha).map(|s| (sha, s)));
        let Some((sha, script)) = script else {
            weft_resp::write_error(out, "NOSCRIPT No matching script. Please use EVAL.");
            return;
        };
        let function = script.function.clone();
        let flags = script.flags;
        self.run(
            host,
            &Runnable {
                function: &function,
                name: &sha,
                flags,
                eval: true,
            },
            invocation,
            out,
            protocol,
        );
    }

    /// Runs a script or a library's function; the reply goes to `out`.
    pub fn run(
        &mut self,
        host: &mut dyn Host,
        runnable: &Runnable<'_>,
        invocation: Invocation<'_>,
        out: &mut BytesMut,
        protocol: Protocol,
    ) {
        let flags = runnable.flags;
        if !flags.compat {
            if flags.no_cluster && invocation.clustered {
                weft_resp::write_error(
                    out,
                    "ERR Can not run script on cluster, 'no-cluster' flag is set.",
                );
                return;
            }
            if !flags.no_writes && invocation.read_only {
                weft_resp::write_error(
                    out,
                    "ERR Can not execute a script with write flag using *_ro command.",
                );
                return;
            }
        }
        let read_only = invocation.read_only || (!flags.compat && flags.no_writes);
        let result = self.call(host, runnable, invocation, read_only);
        self.runs += 1;
        if self.runs >= GC_EVERY_RUNS {
            self.runs = 0;
            let _ = self
                .lua
                .gc_step_kbytes(i32::try_from(GC_EVERY_RUNS).unwrap_or(50));
        }
        let resp3 = self.run.resp3.load(Ordering::Relaxed);
        match result {
            Ok((true, value)) => {
                if let Err(error) = convert::lua_to_reply(&value, out, protocol, resp3) {
                    weft_resp::write_error(out, &format!("ERR {error}"));
                }
            }
            Ok((false, error)) => write_script_error(&error, runnable.name, out),
            Err(error) => weft_resp::write_error(
                out,
                &format!(
                    "ERR Error running script {}, {:.100}",
                    runnable.name,
                    error.to_string()
                ),
            ),
        }
    }

    fn call(
        &mut self,
        host: &mut dyn Host,
        runnable: &Runnable<'_>,
        invocation: Invocation<'_>,
        read_only: bool,
    ) -> mlua::Result<(bool, Value)> {
        let keys = self.array(invocation.keys)?;
        let args = self.array(invocation.args)?;
        if runnable.eval {
            self.globals.raw_set("KEYS", keys.clone())?;
            self.globals.raw_set("ARGV", args.clone())?;
        }
        self.run.begin(runnable.eval);
        // The run ends however the call does, a panic included: a run left busy would
        // have every other command answered BUSY for good.
        let _ending = Ending(&self.run);
        self.host.lend(host, read_only, || {
            let results: mlua::Result<MultiValue> = if runnable.eval {
                self.raw_xpcall
                    .call((runnable.function.clone(), self.handler.clone()))
            } else {
                self.fcall_runner.call((
                    runnable.function.clone(),
                    keys,
                    args,
                    self.handler.clone(),
                ))
            };
            results.map(|results| {
                let mut results = results.into_iter();
                let ok = matches!(results.next(), Some(Value::Boolean(true)));
                (ok, results.next().unwrap_or(Value::Nil))
            })
        })
    }

    fn array(&self, items: &[Bytes]) -> mlua::Result<Table> {
        let table = self.lua.create_table_with_capacity(items.len(), 0)?;
        for (i, item) in items.iter().enumerate() {
            table.raw_set(i + 1, self.lua.create_string(item)?)?;
        }
        Ok(table)
    }
}

/// What [`Engine::run`] runs: a cached script or a library's function.
#[derive(Debug)]
pub struct Runnable<'a> {
    /// The compiled function.
    pub function: &'a Function,
    /// The script's SHA1 or the function's name, for error messages.
    pub name: &'a str,
    /// Its flags.
    pub flags: ScriptFlags,
    /// EVAL (KEYS and ARGV are globals) rather than FCALL (they are arguments).
    pub eval: bool,
}

/// Lua's `%.14g` of a number, as `tostring` writes it.
fn lua_number_text(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        #[allow(clippy::cast_possible_truncation)]
        return (n as i64).to_string();
    }
    format!("{n}")
}

/// A `redis.call`'s arguments as a command: numbers as `%.17g`, strings as they are.
/// [`command_args`] of the table `I.pack` made.
fn packed_command_args(packed: &Table) -> Result<Vec<Bytes>, String> {
    let count: i64 = packed.raw_get("n").unwrap_or(0);
    let mut values = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
    for index in 1..=count {
        values.push(packed.raw_get::<Value>(index).unwrap_or(Value::Nil));
    }
    command_args(MultiValue::from_vec(values))
}

fn command_args(values: MultiValue) -> Result<Vec<Bytes>, String> {
    if values.is_empty() {
        return Err("ERR Please specify at least one argument for this redis lib call".to_owned());
    }
    let mut args = Vec::with_capacity(values.len());
    for value in values {
        args.push(match value {
            Value::String(s) => Bytes::copy_from_slice(&s.as_bytes()),
            Value::Number(n) => Bytes::from(weft_resp::format_double_g17(n)),
            Value::Integer(n) => Bytes::from(n.to_string()),
            _ => {
                return Err(
                    "ERR Lua redis lib command arguments must be strings or integers".to_owned(),
                );
            }
        });
    }
    Ok(args)
}

/// `redis.log(level, ...)`: the message at Redis' level, through `tracing`; an error text
/// for bad arguments.
fn log(_: &Lua, args: MultiValue) -> mlua::Result<Option<String>> {
    if args.len() < 2 {
        return Ok(Some(
            "ERR redis.log() requires two arguments or more.".to_owned(),
        ));
    }
    let mut args = args.into_iter();
    #[allow(clippy::cast_possible_truncation)]
    let level = match args.next() {
        Some(Value::Number(n)) => n as i64,
        Some(Value::Integer(n)) => n,
        _ => {
            return Ok(Some(
                "ERR First argument must be a number (log level).".to_owned(),
            ));
        }
    };
    if !(0..=3).contains(&level) {
        return Ok(Some("ERR Invalid debug level.".to_owned()));
    }
    let mut message = String::new();
    for value in args {
        let text = match value {
            Value::String(s) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
            Value::Number(n) => lua_number_text(n),
            Value::Integer(n) => n.to_string(),
            _ => continue,
        };
        if !message.is_empty() {
            message.push(' ');
        }
        message.push_str(&text);
    }
    match level {
        0 => tracing::debug!(target: "weft::script", "{message}"),
        1 | 2 => tracing::info!(target: "weft::script", "{message}"),
        _ => tracing::warn!(target: "weft::script", "{message}"),
    }
    Ok(None)
}

/// The error handler every run uses (Redis' `__redis__err__handler`): the error as a Redis
/// error table, with the script's source and line where it was raised.
fn error_with_place(lua: &Lua, error: Value, run: &RunState) -> mlua::Result<Value> {
    let table = match error {
        Value::Table(table) if matches!(table.raw_get::<Value>("err")?, Value::String(_)) => table,
        Value::Table(table) => table,
        Value::String(text) => {
            let mut buffer = b"ERR ".to_vec();
            buffer.extend_from_slice(&text.as_bytes());
            error_table(lua, &buffer, false)?
        }
        Value::Error(error) => {
            let text = if run.killed.load(Ordering::Acquire) {
                KILLED.to_owned()
            } else {
                format!("ERR {}", lua_error_text(&error))
            };
            error_table(lua, text.as_bytes(), false)?
        }
        other => {
            let text = match other {
                Value::Nil => "nil".to_owned(),
                Value::Boolean(b) => b.to_string(),
                Value::Number(n) => lua_number_text(n),
                Value::Integer(n) => n.to_string(),
                _ => "execution failure".to_owned(),
            };
            error_table(lua, format!("ERR {text}").as_bytes(), false)?
        }
    };
    if !matches!(table.raw_get::<Value>("err")?, Value::String(_)) {
        table.raw_set("err", "ERR execution failure")?;
    }
    for level in 1..ERROR_FRAMES_MAX {
        let place = lua.inspect_stack(level, |debug| {
            let source = debug.source();
            let name = source.source.as_deref().unwrap_or_default().to_owned();
            (name, debug.current_line())
        });
        let Some((source, line)) = place else { break };
        if source.starts_with("@user_") {
            table.raw_set("source", source)?;
            if let Some(line) = line {
                table.raw_set("line", line)?;
            }
            break;
        }
    }
    Ok(Value::Table(table))
}

/// The message of an error a Rust function raised, without mlua's decoration.
fn lua_error_text(error: &mlua::Error) -> String {
    match error {
        mlua::Error::RuntimeError(message) => message.clone(),
        mlua::Error::CallbackError { cause, .. } => lua_error_text(cause),
        mlua::Error::WithContext { cause, .. } => lua_error_text(cause),
        other => other.to_string(),
    }
}

/// A run's error as the client's error reply: Redis' `msg script: name, on source:line.`
fn write_script_error(error: &Value, name: &str, out: &mut BytesMut) {
    let Value::Table(table) = error else {
        weft_resp::write_error(
            out,
            &format!("ERR Error running script {name}, execution failure"),
        );
        return;
    };
    let text = |field: &str| -> Option<String> {
        match table.raw_get::<Value>(field).ok()? {
            Value::String(s) => Some(String::from_utf8_lossy(&s.as_bytes()).into_owned()),
            Value::Number(n) => Some(lua_number_text(n)),
            Value::Integer(n) => Some(n.to_string()),
            _ => None,
        }
    };
    let mut message = text("err").unwrap_or_else(|| "ERR execution failure".to_owned());
    if let (Some(source), Some(line)) = (text("source"), text("line")) {
        message.push_str(&format!(" script: {name}, on {source}:{line}."));
    }
    let message: String = message
        .chars()
        .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
        .collect();
    weft_resp::write_error(out, &message);
}
