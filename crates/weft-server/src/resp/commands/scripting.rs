//! Scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT, and function libraries
//! (FUNCTION, FCALL, FCALL_RO), over `weft_lua`.
//!
//! One interpreter serves EVAL and another the function libraries, as in Redis. Scripts
//! reach this module through `resp::script_queue`, which runs them one connection's batch at
//! a time. A script runs with the transaction gate
//! held exclusively (see `Session::execute`), so no other RESP command runs while it does:
//! scripts are atomic as MULTI/EXEC transactions are, with the same limit — writes through
//! Hot Rod, REST or memcached do not take the gate. Each `redis.call` is dispatched as the
//! client's own command (authorized as the client), answered in the RESP version the
//! script chose, and converted into Lua values by the engine. A script running past
//! `busy-reply-threshold` makes other clients' commands answer `BUSY`, and SCRIPT KILL
//! stops it unless it wrote. On a clustered cache a script runs at the member that owns
//! all its declared keys (CROSSSLOT otherwise), and a key it did not declare must be
//! owned there too.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use parking_lot::{Mutex, MutexGuard};
use weft_lua::{CallOutcome, Engine, Functions, Host, Invocation, RestorePolicy, RunState};
use weft_resp::Protocol;

use crate::resp::{Reply, Session, table};

/// The server's interpreter and what other connections see of the script it runs.
#[derive(Debug)]
pub struct Scripting {
    /// Made on first use (most servers never run a script).
    engine: Mutex<Option<Engine>>,
    /// The function libraries, made on first use too.
    functions: Mutex<Option<Functions>>,
    /// The running script's state: busy, killed.
    pub run: Arc<RunState>,
    /// The scripts waiting to run after the running one (see `resp::script_queue`).
    pub queue: Arc<crate::resp::script_queue::ScriptQueue>,
    /// What [`Self::memory`] found last.
    last_memory: Mutex<(usize, usize, usize)>,
}

impl Default for Scripting {
    fn default() -> Self {
        let run = Arc::new(RunState::new(std::time::Duration::from_millis(
            BUSY_REPLY_THRESHOLD_MS,
        )));
        Self {
            engine: Mutex::new(None),
            functions: Mutex::new(None),
            run,
            queue: Arc::default(),
            last_memory: Mutex::new((0, 0, 0)),
        }
    }
}

/// Redis' default `busy-reply-threshold` (`lua-time-limit`).
const BUSY_REPLY_THRESHOLD_MS: u64 = 5000;

impl Scripting {
    /// The engine, made now if this is the first script.
    ///
    /// # Errors
    /// The error reply's text when the interpreter cannot be made.
    pub fn engine(&self) -> Result<MutexGuard<'_, Option<Engine>>, String> {
        let mut engine = self.engine.lock();
        if engine.is_none() {
            *engine = Some(
                Engine::new(Arc::clone(&self.run))
                    .map_err(|e| format!("ERR the Lua interpreter could not start: {e}"))?,
            );
        }
        Ok(engine)
    }

    /// The function libraries, made now if this is the first use.
    ///
    /// # Errors
    /// The error reply's text when the interpreter cannot be made.
    pub fn functions(&self) -> Result<MutexGuard<'_, Option<Functions>>, String> {
        let mut functions = self.functions.lock();
        if functions.is_none() {
            *functions = Some(
                Functions::new(Arc::clone(&self.run))
                    .map_err(|e| format!("ERR the Lua interpreter could not start: {e}"))?,
            );
        }
        Ok(functions)
    }

    /// CONFIG SET `busy-reply-threshold` or `lua-time-limit`.
    pub fn configure(&self, name: &str, value: &str) {
        if matches!(name, "busy-reply-threshold" | "lua-time-limit")
            && let Ok(ms) = value.parse::<u64>()
        {
            self.run.set_threshold(std::time::Duration::from_millis(ms));
        }
    }

    /// Bytes the interpreter uses, scripts cached and their bytes, for INFO and MEMORY STATS
    /// (0 before the first script). While a script runs — one may call INFO itself, holding
    /// the interpreter — the figures of the last look.
    #[must_use]
    pub fn memory(&self) -> (usize, usize, usize) {
        let Some(engine) = self.engine.try_lock() else {
            return *self.last_memory.lock();
        };
        let memory = engine.as_ref().map_or((0, 0, 0), |engine| {
            (engine.memory(), engine.scripts(), engine.scripts_bytes())
        });
        *self.last_memory.lock() = memory;
        memory
    }
}

/// The commands a client may run while a script is busy (Redis' `allow-busy` flag).
#[must_use]
pub fn allowed_while_busy(args: &[Bytes]) -> bool {
    let Some(name) = args.first() else {
        return true;
    };
    let is = |word: &[u8]| name.eq_ignore_ascii_case(word);
    let sub = |word: &[u8]| args.get(1).is_some_and(|s| s.eq_ignore_ascii_case(word));
    is(b"auth")
        || is(b"hello")
        || is(b"multi")
        || is(b"discard")
        || is(b"watch")
        || is(b"unwatch")
        || is(b"quit")
        || is(b"reset")
        || is(b"shutdown")
        || (is(b"script") && sub(b"kill"))
        || (is(b"function") && (sub(b"kill") || sub(b"stats")))
}

/// Whether the command runs a script (EVAL, EVALSHA, FCALL and their `_RO` forms).
#[must_use]
pub fn runs_script(name: &[u8]) -> bool {
    [
        &b"evalsha"[..],
        b"eval",
        b"fcall",
        b"evalsha_ro",
        b"eval_ro",
        b"fcall_ro",
    ]
    .iter()
    .any(|script| name.eq_ignore_ascii_case(script))
}

/// Whether the command runs alone, holding the transaction gate exclusively: scripts, EXEC,
/// and SWAPDB (clients see the two databases exchanged between two of their commands).
#[must_use]
pub fn runs_alone(name: &[u8]) -> bool {
    runs_script(name) || name.eq_ignore_ascii_case(b"exec") || name.eq_ignore_ascii_case(b"swapdb")
}

/// The server as a running script reaches it: the calling client's session.
struct ScriptHost<'s> {
    session: &'s mut Session,
}

impl Host for ScriptHost<'_> {
    fn call(&mut self, args: &[Bytes], resp3: bool, read_only: bool) -> CallOutcome {
        let Some(spec) = args.first().and_then(|name| table::lookup(name)) else {
            return CallOutcome::Refused("Unknown Redis command called from script".to_owned());
        };
        if !spec.arity_ok(args.len()) {
            return CallOutcome::Refused(
                "Wrong number of args calling Redis command from script".to_owned(),
            );
        }
        if spec.flags.contains(&"noscript")
            || crate::resp::meta::of_call(spec, args).is_some_and(|meta| meta.noscript)
        {
            return CallOutcome::Refused(
                "This Redis command is not allowed from script".to_owned(),
            );
        }
        let write = spec.flags.contains(&"write");
        // As Redis: a command that may replicate (PUBLISH, PFCOUNT) is refused here too.
        if read_only && (write || spec.flags.contains(&"may_replicate")) {
            return CallOutcome::Refused(
                "Write commands are not allowed from read-only scripts.".to_owned(),
            );
        }
        let protocol = if resp3 {
            Protocol::Resp3
        } else {
            Protocol::Resp2
        };
        let session = &mut *self.session;
        let saved = (session.protocol, session.executing, session.in_script);
        session.protocol = protocol;
        session.executing = true;
        session.in_script = true;
        let mut bytes = BytesMut::new();
        {
            let mut reply = Reply::new(&mut bytes, protocol);
            session.dispatch_queued_command(spec, args, &mut reply);
        }
        (session.protocol, session.executing, session.in_script) = saved;
        if bytes.is_empty() {
            // A command that answers nothing (none should, here): nil, as a null reply.
            weft_resp::write_null(&mut bytes, protocol);
        }
        CallOutcome::Reply {
            bytes,
            wrote: write,
        }
    }

    fn acl_check(&mut self, args: &[Bytes]) -> Option<bool> {
        let spec = args.first().and_then(|name| table::lookup(name))?;
        // Asked, not refused: nothing reaches the ACL log.
        Some(
            self.session.authorize_roles(spec, args).is_ok()
                && self.session.acl_check(spec, args).is_ok(),
        )
    }
}

/// `EVAL script numkeys [key ...] [arg ...]`
pub fn eval(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    invoke(session, args, reply, false, false);
}

/// `EVALSHA sha1 numkeys [key ...] [arg ...]`
pub fn evalsha(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    invoke(session, args, reply, true, false);
}

/// `EVAL_RO script numkeys [key ...] [arg ...]`
pub fn eval_ro(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    invoke(session, args, reply, false, true);
}

/// `EVALSHA_RO sha1 numkeys [key ...] [arg ...]`
pub fn evalsha_ro(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    invoke(session, args, reply, true, true);
}

/// The keys and arguments of EVAL and FCALL (`name numkeys keys... args...`); Redis' error
/// otherwise.
pub fn split_keys(args: &[Bytes]) -> Result<(&[Bytes], &[Bytes]), &'static str> {
    let numkeys = weft_resp::parse_i64_strict(&args[2])
        .ok_or("ERR value is not an integer or out of range")?;
    let available = args.len() - 3;
    if numkeys < 0 {
        return Err("ERR Number of keys can't be negative");
    }
    let numkeys = usize::try_from(numkeys).unwrap_or(usize::MAX);
    if numkeys > available {
        return Err("ERR Number of keys can't be greater than number of args");
    }
    Ok((&args[3..3 + numkeys], &args[3 + numkeys..]))
}

/// Where a script with these keys runs: here (`Ok(true)`), or at their owner — the
/// command is then forwarded (`Ok(false)`); an error when they live on different members.
pub fn route(session: &mut Session, keys: &[Bytes], args: &[Bytes]) -> Result<bool, &'static str> {
    match session.owner_of_keys(keys)? {
        None => Ok(true),
        Some(key) => {
            session.forward = Some(crate::resp::session::Elsewhere {
                key,
                write: true,
                args: args.to_vec(),
            });
            Ok(false)
        }
    }
}

/// Runs a script for the session's client with its database restored afterwards (a
/// SELECT inside a script is the script's own).
pub fn run_for(
    session: &mut Session,
    reply: &mut Reply<'_>,
    run: impl FnOnce(&mut Engine, &mut dyn Host, &mut BytesMut, Protocol),
) {
    let context = Arc::clone(&session.context);
    let mut engine = match context.scripting.engine() {
        Ok(engine) => engine,
        Err(error) => return reply.error(&error),
    };
    let Some(engine) = engine.as_mut() else {
        return reply.error("ERR the Lua interpreter is not available");
    };
    let (cache, database) = (session.cache.clone(), session.database);
    let protocol = session.protocol;
    let mut out = BytesMut::new();
    {
        let mut host = ScriptHost {
            session: &mut *session,
        };
        run(engine, &mut host, &mut out, protocol);
    }
    session.script_keys.clear();
    session.cache = cache;
    session.database = database;
    reply.raw(&out);
}

fn invoke(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>, sha: bool, ro: bool) {
    let (keys, argv) = match split_keys(args) {
        Ok(split) => split,
        Err(error) => return reply.error(error),
    };
    if sha && args[1].len() != 40 {
        return reply.error("NOSCRIPT No matching script. Please use EVAL.");
    }
    match route(session, keys, args) {
        Ok(true) => {}
        Ok(false) => return,
        Err(error) => return reply.error(error),
    }
    let clustered = session.cache.config().mode.is_clustered();
    let body = args[1].clone();
    let name = if sha {
        String::from_utf8_lossy(&body).to_ascii_lowercase()
    } else {
        weft_lua::sha1_hex(&body)
    };
    session.context.scripting.run.set_command(&name, args);
    session.script_keys.clear();
    session.script_keys.extend_from_slice(keys);
    run_for(session, reply, |engine, host, out, protocol| {
        let invocation = Invocation {
            keys,
            args: argv,
            read_only: ro,
            clustered,
        };
        // Code that may run long (loops, functions) runs off the async worker, whose other
        // connections and I/O driver go to another thread meanwhile; straight-line code,
        // the common case, does not pay for the hand-off.
        let long = engine
            .runs_long(&name)
            .unwrap_or_else(|| !sha && weft_lua::may_run_long(&body));
        let mut run = || {
            if sha {
                engine.evalsha(host, &body, invocation, out, protocol);
            } else {
                engine.eval(host, &body, invocation, out, protocol);
            }
        };
        if long {
            crate::off_worker(run);
        } else {
            run();
        }
    });
}

/// `SCRIPT LOAD|EXISTS|FLUSH|KILL|DEBUG|HELP`
pub fn script(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    let context = Arc::clone(&session.context);
    match sub.as_str() {
        "kill" => match context.scripting.run.kill(true) {
            Ok(()) => reply.ok(),
            Err(refused) => reply.error(refused.text(true)),
        },
        "load" => match context.scripting.engine() {
            Ok(mut engine) => match engine.as_mut().map(|e| e.load(&args[2])) {
                Some(Ok(sha)) => reply.bulk(sha.as_bytes()),
                Some(Err(error)) => reply.error(&error),
                None => reply.error("ERR the Lua interpreter is not available"),
            },
            Err(error) => reply.error(&error),
        },
        "exists" => {
            let engine = context.scripting.engine();
            let engine = engine.as_ref().ok().and_then(|e| e.as_ref());
            reply.array(args.len() - 2);
            for sha in &args[2..] {
                reply.integer(i64::from(engine.is_some_and(|e| e.exists(sha))));
            }
        }
        "flush" => {
            if args.len() > 3
                || args.get(2).is_some_and(|mode| {
                    !mode.eq_ignore_ascii_case(b"sync") && !mode.eq_ignore_ascii_case(b"async")
                })
            {
                return reply.error("ERR SCRIPT FLUSH only support SYNC|ASYNC option");
            }
            match context.scripting.engine() {
                Ok(mut engine) => match engine.as_mut().map(Engine::flush) {
                    Some(Ok(())) => reply.ok(),
                    Some(Err(error)) => reply.error(&format!("ERR {error}")),
                    None => reply.error("ERR the Lua interpreter is not available"),
                },
                Err(error) => reply.error(&error),
            }
        }
        "debug" => {
            if args[2].eq_ignore_ascii_case(b"no") {
                reply.ok();
            } else if args[2].eq_ignore_ascii_case(b"yes") || args[2].eq_ignore_ascii_case(b"sync")
            {
                reply.error("ERR SCRIPT DEBUG: Weft has no Lua debugger");
            } else {
                reply.error("ERR Use SCRIPT DEBUG YES/SYNC/NO");
            }
        }
        _ => {
            let help = [
                "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "DEBUG (YES|SYNC|NO)",
                "    Set the debug mode for subsequent scripts executed (Weft has no debugger).",
                "EXISTS <sha1> [<sha1> ...]",
                "    Return information about the existence of the scripts in the script cache.",
                "FLUSH [ASYNC|SYNC]",
                "    Flush the Lua scripts cache.",
                "KILL",
                "    Kill the currently executing Lua script.",
                "LOAD <script>",
                "    Load a script into the scripts cache without executing it.",
                "HELP",
                "    Print this help.",
            ];
            reply.array(help.len());
            for line in help {
                reply.simple(line);
            }
        }
    }
}

/// `FCALL function numkeys [key ...] [arg ...]`
pub fn fcall(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    call_function(session, args, reply, false);
}

/// `FCALL_RO function numkeys [key ...] [arg ...]`
pub fn fcall_ro(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    call_function(session, args, reply, true);
}

fn call_function(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>, ro: bool) {
    let name = String::from_utf8_lossy(&args[1]).into_owned();
    let context = Arc::clone(&session.context);
    let mut functions = match context.scripting.functions() {
        Ok(functions) => functions,
        Err(error) => return reply.error(&error),
    };
    let Some(functions) = functions.as_mut() else {
        return reply.error("ERR the Lua interpreter is not available");
    };
    if functions.function(&name).is_none() {
        return reply.error("ERR Function not found");
    }
    if weft_resp::parse_i64_strict(&args[2]).is_none() {
        return reply.error("ERR Bad number of keys provided");
    }
    let (keys, argv) = match split_keys(args) {
        Ok(split) => split,
        Err(error) => return reply.error(error),
    };
    match route(session, keys, args) {
        Ok(true) => {}
        Ok(false) => return,
        Err(error) => return reply.error(error),
    }
    let clustered = session.cache.config().mode.is_clustered();
    context.scripting.run.set_command(&name, args);
    session.script_keys.clear();
    session.script_keys.extend_from_slice(keys);
    let (cache, database) = (session.cache.clone(), session.database);
    let protocol = session.protocol;
    let mut out = BytesMut::new();
    {
        let mut host = ScriptHost {
            session: &mut *session,
        };
        let invocation = Invocation {
            keys,
            args: argv,
            read_only: ro,
            clustered,
        };
        // A function that may loop or recurse runs off the async worker (see `invoke`);
        // one whose library only registers straight-line functions does not pay for it.
        if functions.runs_long(&name) {
            crate::off_worker(|| functions.call(&mut host, &name, invocation, &mut out, protocol));
        } else {
            functions.call(&mut host, &name, invocation, &mut out, protocol);
        }
    }
    session.script_keys.clear();
    session.cache = cache;
    session.database = database;
    reply.raw(&out);
}

/// `FUNCTION LOAD|DELETE|FLUSH|LIST|KILL|STATS|DUMP|RESTORE|HELP`
pub fn function(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    let context = Arc::clone(&session.context);
    let run = &context.scripting.run;
    match sub.as_str() {
        "kill" => {
            return match run.kill(false) {
                Ok(()) => reply.ok(),
                Err(refused) => reply.error(refused.text(false)),
            };
        }
        "stats" => return function_stats(&context, reply),
        "help" => return function_help(reply),
        _ => {}
    }
    let mut functions = match context.scripting.functions() {
        Ok(functions) => functions,
        Err(error) => return reply.error(&error),
    };
    let Some(functions) = functions.as_mut() else {
        return reply.error("ERR the Lua interpreter is not available");
    };
    match sub.as_str() {
        "load" => {
            let mut replace = false;
            let mut at = 2;
            while at < args.len() - 1 {
                if args[at].eq_ignore_ascii_case(b"replace") {
                    replace = true;
                    at += 1;
                    continue;
                }
                return reply.error(&format!(
                    "ERR Unknown option given: {}",
                    String::from_utf8_lossy(&args[at])
                ));
            }
            let Some(code) = args.get(at) else {
                return reply.error("ERR Function code is missing");
            };
            match functions.load(code, replace) {
                Ok(name) => reply.bulk(name.as_bytes()),
                Err(error) => reply.error(&error),
            }
        }
        "delete" => match functions.delete(&String::from_utf8_lossy(&args[2])) {
            Ok(()) => reply.ok(),
            Err(error) => reply.error(error),
        },
        "flush" => {
            if args.len() > 3 {
                return reply.error("ERR unknown subcommand or wrong number of arguments for 'flush'. Try FUNCTION HELP.");
            }
            if args.get(2).is_some_and(|mode| {
                !mode.eq_ignore_ascii_case(b"sync") && !mode.eq_ignore_ascii_case(b"async")
            }) {
                return reply.error("ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
            }
            functions.flush();
            reply.ok();
        }
        "list" => function_list(functions, args, reply),
        "dump" => {
            let mut payload = Vec::new();
            for code in functions.codes() {
                payload.push(weft_resp::rdb::OPCODE_FUNCTION2);
                weft_resp::rdb::write_string(&mut payload, &code);
            }
            weft_resp::rdb::seal(&mut payload);
            reply.bulk(&payload);
        }
        "restore" => {
            if args.len() > 4 {
                return reply.error("ERR unknown subcommand or wrong number of arguments for 'restore'. Try FUNCTION HELP.");
            }
            let policy = match args.get(3) {
                None => RestorePolicy::Append,
                Some(p) if p.eq_ignore_ascii_case(b"append") => RestorePolicy::Append,
                Some(p) if p.eq_ignore_ascii_case(b"replace") => RestorePolicy::Replace,
                Some(p) if p.eq_ignore_ascii_case(b"flush") => RestorePolicy::Flush,
                Some(_) => {
                    return reply.error("ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.");
                }
            };
            let codes = match restore_codes(&args[2]) {
                Ok(codes) => codes,
                Err(error) => return reply.error(error),
            };
            match functions.restore(&codes, policy) {
                Ok(()) => reply.ok(),
                Err(error) => reply.error(&error),
            }
        }
        _ => function_help(reply),
    }
}

/// The libraries' codes in a FUNCTION DUMP payload.
fn restore_codes(payload: &[u8]) -> Result<Vec<Bytes>, &'static str> {
    use weft_resp::rdb;
    let (body, _) =
        rdb::open(payload).map_err(|_| "ERR DUMP payload version or checksum are wrong")?;
    let mut reader = rdb::Reader::new(body);
    let mut codes = Vec::new();
    while !reader.is_empty() {
        let kind = reader.byte().map_err(|_| "ERR can not read data type")?;
        if kind != rdb::OPCODE_FUNCTION2 {
            return Err("ERR given type is not a function");
        }
        let code = reader
            .string()
            .map_err(|_| "ERR failed loading the given functions payload")?;
        codes.push(Bytes::from(code));
    }
    Ok(codes)
}

fn function_list(functions: &Functions, args: &[Bytes], reply: &mut Reply<'_>) {
    let mut with_code = false;
    let mut pattern: Option<&Bytes> = None;
    let mut at = 2;
    while at < args.len() {
        let arg = &args[at];
        if !with_code && arg.eq_ignore_ascii_case(b"withcode") {
            with_code = true;
        } else if pattern.is_none() && arg.eq_ignore_ascii_case(b"libraryname") {
            let Some(next) = args.get(at + 1) else {
                return reply.error("ERR library name argument was not given");
            };
            pattern = Some(next);
            at += 1;
        } else {
            return reply.error(&format!(
                "ERR Unknown argument {}",
                String::from_utf8_lossy(arg)
            ));
        }
        at += 1;
    }
    let libraries: Vec<_> = functions
        .libraries()
        .values()
        .filter(|library| {
            pattern.is_none_or(|p| {
                super::glob::matches(
                    &p.to_ascii_lowercase(),
                    &library.name.to_ascii_lowercase().into_bytes(),
                )
            })
        })
        .collect();
    reply.array(libraries.len());
    for library in libraries {
        reply.map(if with_code { 4 } else { 3 });
        reply.bulk(b"library_name");
        reply.bulk(library.name.as_bytes());
        reply.bulk(b"engine");
        reply.bulk(library.engine.as_bytes());
        reply.bulk(b"functions");
        reply.array(library.functions.len());
        for function in library.functions.values() {
            reply.map(3);
            reply.bulk(b"name");
            reply.bulk(function.name.as_bytes());
            reply.bulk(b"description");
            match &function.description {
                Some(text) => reply.bulk(text.as_bytes()),
                None => reply.null(),
            }
            reply.bulk(b"flags");
            let names = function.flags.names();
            reply.set(names.len());
            for name in names {
                reply.simple(name);
            }
        }
        if with_code {
            reply.bulk(b"library_code");
            reply.bulk(&library.code);
        }
    }
}

fn function_stats(context: &crate::ServerContext, reply: &mut Reply<'_>) {
    let run = &context.scripting.run;
    if run.active() && run.is_eval() {
        return reply.error(
            "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.",
        );
    }
    reply.map(2);
    reply.bulk(b"running_script");
    match run.running() {
        None => reply.null(),
        Some((name, command, duration)) => {
            reply.map(3);
            reply.bulk(b"name");
            reply.bulk(name.as_bytes());
            reply.bulk(b"command");
            reply.array(command.len());
            for arg in &command {
                reply.bulk(arg);
            }
            reply.bulk(b"duration_ms");
            reply.integer(i64::try_from(duration.as_millis()).unwrap_or(i64::MAX));
        }
    }
    // The libraries' lock is held by a running function: counts are read only when free.
    let counts = context
        .scripting
        .functions
        .try_lock()
        .and_then(|f| {
            f.as_ref()
                .map(|f| (f.libraries().len(), f.function_count()))
        })
        .unwrap_or((0, 0));
    reply.bulk(b"engines");
    reply.map(1);
    reply.bulk(b"LUA");
    reply.map(2);
    reply.bulk(b"libraries_count");
    reply.integer(i64::try_from(counts.0).unwrap_or(i64::MAX));
    reply.bulk(b"functions_count");
    reply.integer(i64::try_from(counts.1).unwrap_or(i64::MAX));
}

fn function_help(reply: &mut Reply<'_>) {
    let help = [
        "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "LOAD [REPLACE] <FUNCTION CODE>",
        "    Create a new library with the given library name and code.",
        "DELETE <LIBRARY NAME>",
        "    Delete the given library.",
        "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
        "    Return general information on all the libraries.",
        "FLUSH [ASYNC|SYNC]",
        "    Delete all the libraries.",
        "KILL",
        "    Kill the current running function.",
        "STATS",
        "    Return information about the current function running.",
        "DUMP",
        "    Return a serialized payload representing the current libraries.",
        "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
        "    Restore the libraries represented by the given payload.",
        "HELP",
        "    Print this help.",
    ];
    reply.array(help.len());
    for line in help {
        reply.simple(line);
    }
}

/// Whether a script command may write (CLIENT PAUSE WRITE holds it back): EVAL and EVALSHA
/// unless the script's shebang says `no-writes`, FCALL unless the function was registered
/// so; the `_RO` variants never.
#[must_use]
pub fn may_write(context: &crate::ServerContext, args: &[Bytes]) -> bool {
    let Some(name) = args.first() else {
        return false;
    };
    let body_flags = |body: &[u8]| weft_lua::shebang(body).is_ok_and(|(flags, _)| flags.no_writes);
    if name.eq_ignore_ascii_case(b"eval") {
        return !args.get(1).is_some_and(|body| body_flags(body));
    }
    if name.eq_ignore_ascii_case(b"evalsha") {
        let Some(sha) = args.get(1) else { return true };
        let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
        let no_writes = context.scripting.engine().is_ok_and(|engine| {
            engine
                .as_ref()
                .and_then(|engine| engine.body(&sha))
                .is_some_and(|body| body_flags(body))
        });
        return !no_writes;
    }
    if name.eq_ignore_ascii_case(b"fcall") {
        let Some(function) = args.get(1) else {
            return true;
        };
        let function = String::from_utf8_lossy(function);
        let no_writes = context.scripting.functions().is_ok_and(|functions| {
            functions
                .as_ref()
                .and_then(|functions| functions.function(&function))
                .is_some_and(|info| info.flags.no_writes)
        });
        return !no_writes;
    }
    false
}
