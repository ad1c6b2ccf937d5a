//! The engine against a host that keeps strings in a map: what scripts return, how errors
//! read, and what the sandbox refuses, as redis-server 7.0 answers the same scripts.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use weft_lua::{CallOutcome, Engine, Host, Invocation, RunState};
use weft_resp::Protocol;

#[derive(Default)]
struct MapHost {
    data: HashMap<Vec<u8>, Vec<u8>>,
}

impl Host for MapHost {
    fn call(&mut self, args: &[Bytes], _resp3: bool, read_only: bool) -> CallOutcome {
        let mut out = BytesMut::new();
        let name = args[0].to_ascii_lowercase();
        match (name.as_slice(), args.len()) {
            (b"set", 3) => {
                if read_only {
                    return CallOutcome::Refused(
                        "Write commands are not allowed from read-only scripts.".into(),
                    );
                }
                self.data.insert(args[1].to_vec(), args[2].to_vec());
                weft_resp::write_simple(&mut out, "OK");
                return CallOutcome::Reply {
                    bytes: out,
                    wrote: true,
                };
            }
            (b"get", 2) => match self.data.get(args[1].as_ref()) {
                Some(v) => weft_resp::write_bulk(&mut out, v),
                None => weft_resp::write_null(&mut out, Protocol::Resp2),
            },
            (b"ping", 1) => weft_resp::write_simple(&mut out, "PONG"),
            (b"lpush", n) if n >= 3 => weft_resp::write_integer(&mut out, (n - 2) as i64),
            (b"incr", 2) => {
                weft_resp::write_error(&mut out, "ERR value is not an integer or out of range")
            }
            _ => return CallOutcome::Refused("Unknown Redis command called from script".into()),
        }
        CallOutcome::Reply {
            bytes: out,
            wrote: false,
        }
    }

    fn acl_check(&mut self, _args: &[Bytes]) -> Option<bool> {
        Some(true)
    }
}

fn engine() -> Engine {
    Engine::new(Arc::new(RunState::new(Duration::from_secs(5)))).expect("engine")
}

fn eval(
    engine: &mut Engine,
    host: &mut MapHost,
    script: &str,
    keys: &[&str],
    args: &[&str],
) -> String {
    let keys: Vec<Bytes> = keys
        .iter()
        .map(|k| Bytes::copy_from_slice(k.as_bytes()))
        .collect();
    let args: Vec<Bytes> = args
        .iter()
        .map(|k| Bytes::copy_from_slice(k.as_bytes()))
        .collect();
    let mut out = BytesMut::new();
    engine.eval(
        host,
        script.as_bytes(),
        Invocation {
            keys: &keys,
            args: &args,
            read_only: false,
            clustered: false,
        },
        &mut out,
        Protocol::Resp2,
    );
    String::from_utf8_lossy(&out).into_owned()
}

// Proves Lua values become Redis' replies: numbers truncate, tables stop at the first nil,
// booleans, status and error tables.
#[test]
fn results_convert_as_redis_does() {
    let (mut e, mut h) = (engine(), MapHost::default());
    assert_eq!(eval(&mut e, &mut h, "return 3.99", &[], &[]), ":3\r\n");
    assert_eq!(eval(&mut e, &mut h, "return 'x'", &[], &[]), "$1\r\nx\r\n");
    assert_eq!(
        eval(&mut e, &mut h, "return {1,2,nil,4}", &[], &[]),
        "*2\r\n:1\r\n:2\r\n"
    );
    assert_eq!(eval(&mut e, &mut h, "return true", &[], &[]), ":1\r\n");
    assert_eq!(eval(&mut e, &mut h, "return false", &[], &[]), "$-1\r\n");
    assert_eq!(
        eval(&mut e, &mut h, "return {ok='fine'}", &[], &[]),
        "+fine\r\n"
    );
    assert_eq!(
        eval(&mut e, &mut h, "return {err='My Error'}", &[], &[]),
        "-My Error\r\n"
    );
    assert_eq!(
        eval(
            &mut e,
            &mut h,
            "return redis.error_reply('My Error')",
            &[],
            &[]
        ),
        "-My Error\r\n"
    );
    assert_eq!(
        eval(
            &mut e,
            &mut h,
            "return redis.status_reply('fine')",
            &[],
            &[]
        ),
        "+fine\r\n"
    );
    assert_eq!(
        eval(&mut e, &mut h, "return {KEYS[1], ARGV[1]}", &["k"], &["a"]),
        "*2\r\n$1\r\nk\r\n$1\r\na\r\n"
    );
}

// Proves redis.call reaches the host, raises the command's error with the script's place,
// and redis.pcall and pcall hand it back.
#[test]
fn calls_and_errors() {
    let (mut e, mut h) = (engine(), MapHost::default());
    assert_eq!(
        eval(
            &mut e,
            &mut h,
            "redis.call('set', KEYS[1], 12.5) return redis.call('get', KEYS[1])",
            &["k"],
            &[]
        ),
        "$4\r\n12.5\r\n"
    );
    let reply = eval(&mut e, &mut h, "return redis.call('incr', 'k')", &[], &[]);
    assert!(
        reply.starts_with("-ERR value is not an integer or out of range script: "),
        "{reply}"
    );
    assert!(reply.ends_with(", on @user_script:1.\r\n"), "{reply}");
    assert_eq!(
        eval(&mut e, &mut h, "return redis.pcall('incr', 'k')", &[], &[]),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(
        eval(
            &mut e,
            &mut h,
            "local ok, err = pcall(function() redis.call('incr','k') end) return err",
            &[],
            &[]
        ),
        "$43\r\nERR value is not an integer or out of range\r\n"
    );
    let reply = eval(&mut e, &mut h, "return redis.call('nosuch')", &[], &[]);
    assert!(
        reply.starts_with("-ERR Unknown Redis command called from script script:"),
        "{reply}"
    );
    let reply = eval(&mut e, &mut h, "return redis.call()", &[], &[]);
    assert!(
        reply.starts_with("-ERR Please specify at least one argument for this redis lib call"),
        "{reply}"
    );
}

// Proves redis.call and redis.pcall take thousands of arguments (`unpack` of a big table),
// past the 8000 values Lua's C API lets a C function check for, as Redis' do; and that an
// argument that is neither string nor number is still refused among them.
#[test]
fn calls_with_thousands_of_arguments() {
    let (mut e, mut h) = (engine(), MapHost::default());
    for call in ["call", "pcall"] {
        let script = format!(
            "local a = {{}} for i = 1, 7999 do a[i] = 1 end \
             return redis.{call}('lpush', 'l', unpack(a))"
        );
        assert_eq!(
            eval(&mut e, &mut h, &script, &[], &[]),
            ":7999\r\n",
            "{call}"
        );
    }
    let reply = eval(
        &mut e,
        &mut h,
        "local a = {} for i = 1, 7999 do a[i] = 1 end a[5000] = {} \
         return redis.pcall('lpush', 'l', unpack(a))",
        &[],
        &[],
    );
    assert_eq!(
        reply,
        "-ERR Lua redis lib command arguments must be strings or integers\r\n"
    );
    // A nil among the arguments is refused too, not taken as their end.
    let reply = eval(
        &mut e,
        &mut h,
        "return redis.pcall('lpush', 'l', nil, 'x')",
        &[],
        &[],
    );
    assert_eq!(
        reply,
        "-ERR Lua redis lib command arguments must be strings or integers\r\n"
    );
}

// Proves the sandbox: no new globals, no undefined reads, read-only libraries, no
// loadfile/dofile/print, no binary chunks.
#[test]
fn sandbox_refuses() {
    let (mut e, mut h) = (engine(), MapHost::default());
    for (script, expected) in [
        (
            "return a",
            "Script attempted to access nonexistent global variable 'a'",
        ),
        ("a = 10", "Attempt to modify a readonly table"),
        ("setmetatable(_G, {})", "Attempt to modify a readonly table"),
        (
            "local g = getmetatable(_G) g.__index = {}",
            "Attempt to modify a readonly table",
        ),
        (
            "redis = function() return 1 end",
            "Attempt to modify a readonly table",
        ),
        ("_G = {}", "Attempt to modify a readonly table"),
        (
            "redis.call = function() return 1 end",
            "Attempt to modify a readonly table",
        ),
        ("rawset(_G, 'x', 1)", "Attempt to modify a readonly table"),
        ("getfenv(0).x = 1", "Attempt to modify a readonly table"),
        (
            "getmetatable('').__index = {}",
            "Attempt to modify a readonly table",
        ),
        ("loadfile('x')", "nonexistent global variable 'loadfile'"),
        ("print('x')", "nonexistent global variable 'print'"),
        (
            "return loadstring(string.dump(function() return 1 end))()",
            "attempt to call a nil value",
        ),
    ] {
        let reply = eval(&mut e, &mut h, script, &[], &[]);
        assert!(
            reply.starts_with("-ERR") && reply.contains(expected),
            "{script}: {reply}"
        );
    }
    // Nothing leaked: a script after them sees the same globals.
    assert!(eval(&mut e, &mut h, "return type(a)", &[], &[]).contains("nonexistent"));
    assert_eq!(
        eval(&mut e, &mut h, "return redis.sha1hex('')", &[], &[]),
        "$40\r\nda39a3ee5e6b4b0d3255bfef95601890afd80709\r\n"
    );
}

// Proves compile errors and shebang flags read as Redis' do, and that a no-writes script
// cannot write.
#[test]
fn compile_errors_and_flags() {
    let (mut e, mut h) = (engine(), MapHost::default());
    let reply = eval(&mut e, &mut h, "return (", &[], &[]);
    assert!(
        reply.starts_with("-ERR Error compiling script (new function): user_script:1:"),
        "{reply}"
    );
    let reply = eval(&mut e, &mut h, "#!lua flags=bogus\nreturn 1", &[], &[]);
    assert_eq!(reply, "-ERR Unexpected flag in script shebang: bogus\r\n");
    let reply = eval(
        &mut e,
        &mut h,
        "#!lua flags=no-writes\nreturn redis.call('set','k','v')",
        &[],
        &[],
    );
    assert!(
        reply.starts_with("-ERR Write commands are not allowed from read-only scripts."),
        "{reply}"
    );
    assert_eq!(eval(&mut e, &mut h, "#!lua\nreturn 1", &[], &[]), ":1\r\n");
}

// Proves SCRIPT KILL stops a busy script that wrote nothing, even one that catches errors.
#[test]
fn kill_stops_a_loop() {
    let run = Arc::new(RunState::new(Duration::from_millis(10)));
    let mut e = Engine::new(Arc::clone(&run)).expect("engine");
    let killer = std::thread::spawn(move || {
        for _ in 0..500 {
            std::thread::sleep(Duration::from_millis(10));
            if run.busy().is_some() && run.kill(true).is_ok() {
                return true;
            }
        }
        false
    });
    let mut h = MapHost::default();
    let reply = eval(
        &mut e,
        &mut h,
        "while true do pcall(function() end) end",
        &[],
        &[],
    );
    assert!(killer.join().expect("joins"));
    assert!(
        reply.starts_with("-ERR Script killed by user with SCRIPT KILL..."),
        "{reply}"
    );
}

// Proves shebang words split as Redis' sdssplitargs splits them: quotes inside a word,
// escapes, and unbalanced quotes refused.
#[test]
fn shebang_words_split_as_redis() {
    let words = weft_lua::split_args(br#"#!lua name="foo" flags='no-writes'"#).expect("splits");
    assert_eq!(
        words,
        vec![
            b"#!lua".to_vec(),
            b"name=foo".to_vec(),
            b"flags=no-writes".to_vec()
        ]
    );
    assert_eq!(
        weft_lua::split_args(br#"a "\x41\n" b"#).expect("splits"),
        vec![b"a".to_vec(), b"A\n".to_vec(), b"b".to_vec()]
    );
    assert!(weft_lua::split_args(br#"name="foo"#).is_none());
    assert!(weft_lua::split_args(br#""a"b"#).is_none());
}

// Proves FUNCTION KILL stops a busy function, as SCRIPT KILL stops a script.
#[test]
fn kill_stops_a_looping_function() {
    let run = Arc::new(RunState::new(Duration::from_millis(10)));
    let mut functions = weft_lua::Functions::new(Arc::clone(&run)).expect("functions");
    functions
        .load(
            b"#!lua name=test\nredis.register_function('test', function(keys, args) local a = 1 while true do a = a + 1 end end)",
            false,
        )
        .expect("loads");
    let killer = std::thread::spawn(move || {
        for _ in 0..500 {
            std::thread::sleep(Duration::from_millis(10));
            if run.busy().is_some() && run.kill(false).is_ok() {
                return true;
            }
        }
        false
    });
    let mut h = MapHost::default();
    let mut out = BytesMut::new();
    functions.call(
        &mut h,
        "test",
        Invocation {
            keys: &[],
            args: &[],
            read_only: false,
            clustered: false,
        },
        &mut out,
        Protocol::Resp2,
    );
    assert!(killer.join().expect("joins"));
    let reply = String::from_utf8_lossy(&out).into_owned();
    assert!(reply.starts_with("-ERR Script killed by user"), "{reply}");
}

// Proves straight-line scripts are told apart from ones that may loop or recurse.
#[test]
fn code_that_may_run_long() {
    assert!(!weft_lua::may_run_long(
        b"return redis.call('incr', KEYS[1])"
    ));
    assert!(!weft_lua::may_run_long(b"local format = 1 return forward"));
    for code in [
        &b"while true do end"[..],
        b"for i = 1, 10 do end",
        b"repeat until false",
        b"local function f() return f() end return f()",
        b"return loadstring('x')",
    ] {
        assert!(
            weft_lua::may_run_long(code),
            "{}",
            String::from_utf8_lossy(code)
        );
    }
}

// Proves which code a server may run on its async worker: straight-line scripts, and
// libraries whose only functions are the anonymous ones they register; anything that
// loops, defines a function it could call again, or loads code may run long.
#[test]
fn what_may_run_long() {
    assert!(!weft_lua::may_run_long(
        b"return redis.call('incr', KEYS[1])"
    ));
    assert!(weft_lua::may_run_long(b"while true do end"));
    assert!(weft_lua::may_run_long(
        b"local function f() return f() end return f()"
    ));
    let short = b"#!lua name=lib\nredis.register_function('hit', function(keys, args) \
        local n = redis.call('incr', keys[1]) return n end)\n\
        redis.register_function{function_name='two', callback = function(keys) return 2 end}";
    assert!(!weft_lua::library_may_run_long(short));
    for long in [
        &b"#!lua name=l\nredis.register_function('f', function() while true do end end)"[..],
        b"#!lua name=l\nlocal function g() return g() end\nredis.register_function('f', g)",
        b"#!lua name=l\nlocal t = {}\nt.g = function() return t.g() end\nredis.register_function('f', function() return t.g() end)",
        b"#!lua name=l\nredis.register_function('f', function() return loadstring('x')() end)",
        b"#!lua name=l\nfunction g() return g() end\nredis.register_function('f', function() return g() end)",
    ] {
        assert!(weft_lua::library_may_run_long(long), "{}", String::from_utf8_lossy(long));
    }
}
