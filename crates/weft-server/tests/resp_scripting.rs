//! Scripting over real sockets: EVAL and EVALSHA with the script cache, RESP3 replies from
//! scripts, atomicity against other clients, BUSY and SCRIPT KILL, a SELECT inside a script
//! staying inside it, function libraries with FCALL, FUNCTION DUMP/RESTORE, and blocking
//! sorted-set pops woken by ZADD.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{Frame, TestServer};

fn int(n: i64) -> Frame {
    Frame::Integer(n)
}

/// Lowers `busy-reply-threshold` to 50 ms and starts a script that never ends on a
/// connection of its own; returns once another client is answered BUSY: (that client, the
/// script's connection).
fn start_busy_script(server: &TestServer) -> (common::Client, common::Client) {
    let mut admin = server.client();
    assert_eq!(admin.cmd("CONFIG SET busy-reply-threshold 50"), Frame::ok());
    let mut runner = server.client();
    runner.send_raw(&common::encode(&[
        "EVAL",
        "local a = 0 while true do a = a + 1 end",
        "0",
    ]));
    let started = Instant::now();
    loop {
        match admin.cmd("PING") {
            Frame::Error(text) if text.starts_with("BUSY") => return (admin, runner),
            _ if started.elapsed() > Duration::from_secs(10) => panic!("never busy"),
            _ => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

// Proves EVAL runs a script with KEYS and ARGV, caches it under its SHA1 for EVALSHA, and
// answers NOSCRIPT for an unknown SHA1 and Redis' errors with the script's line.
#[test]
fn eval_and_the_script_cache() {
    let server = TestServer::start();
    let mut c = server.client();
    let reply = c.call(&[
        "EVAL",
        "redis.call('set', KEYS[1], ARGV[1]); return redis.call('get', KEYS[1])",
        "1",
        "k",
        "v",
    ]);
    assert_eq!(reply, Frame::bulk("v"));
    let sha = c.call(&["SCRIPT", "LOAD", "return ARGV[1] .. '!'"]).text();
    assert_eq!(sha.len(), 40);
    assert_eq!(c.call(&["EVALSHA", &sha, "0", "hi"]), Frame::bulk("hi!"));
    assert_eq!(
        c.call(&[
            "SCRIPT",
            "EXISTS",
            &sha,
            "0000000000000000000000000000000000000000"
        ]),
        Frame::Array(vec![int(1), int(0)])
    );
    let Frame::Error(text) = c.call(&["EVALSHA", "0000000000000000000000000000000000000000", "0"])
    else {
        panic!("NOSCRIPT expected");
    };
    assert_eq!(text, "NOSCRIPT No matching script. Please use EVAL.");
    let Frame::Error(text) = c.call(&["EVAL", "return redis.call('incr', KEYS[1])", "1", "k"])
    else {
        panic!("error expected");
    };
    assert!(
        text.starts_with("ERR value is not an integer or out of range script: ")
            && text.ends_with("on @user_script:1."),
        "{text}"
    );
    assert_eq!(c.cmd("SCRIPT FLUSH"), Frame::ok());
    assert!(matches!(c.call(&["EVALSHA", &sha, "0"]), Frame::Error(_)));
    let Frame::Error(text) = c.call(&["EVAL", "return 1", "2", "a"]) else {
        panic!("error expected");
    };
    assert_eq!(
        text,
        "ERR Number of keys can't be greater than number of args"
    );
}

// Proves a RESP3 script sees maps and doubles and returns them, and a RESP2 client gets
// the RESP2 forms.
#[test]
fn resp3_inside_scripts() {
    let server = TestServer::start();
    let mut c = server.client();
    assert!(matches!(c.cmd("HELLO 3"), Frame::Map(_)));
    let reply = c.call(&[
        "EVAL",
        "redis.setresp(3); redis.call('hset', KEYS[1], 'f', 'v'); local m = redis.call('hgetall', KEYS[1]); return {map={f=m.map.f}, double=nil, 1}",
        "1",
        "h",
    ]);
    // A table with a `map` field is the map.
    assert_eq!(
        reply,
        Frame::Map(vec![(Frame::bulk("f"), Frame::bulk("v"))])
    );
    assert_eq!(
        c.call(&["EVAL", "return {double=3.5}", "0"]),
        Frame::Double("3.5".into())
    );
    let mut two = server.client();
    assert_eq!(
        two.call(&["EVAL", "return {double=3.5}", "0"]),
        Frame::bulk("3.5")
    );
}

// Proves a script is atomic: another client's INCRs land before or after it, never between
// its reads and writes.
#[test]
fn scripts_are_atomic() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(c.cmd("SET n 0"), Frame::ok());
    let addr = server.addr;
    let writer = std::thread::spawn(move || {
        let mut w = common::Client::connect(addr);
        for _ in 0..500 {
            assert!(matches!(w.cmd("INCR n"), Frame::Integer(_)));
        }
    });
    for _ in 0..200 {
        // Reads n twice around a busy loop: equal if nothing ran in between.
        let reply = c.call(&[
            "EVAL",
            "local a = redis.call('get', KEYS[1]); for i = 1, 2000 do end; local b = redis.call('get', KEYS[1]); return a == b and 1 or 0",
            "1",
            "n",
        ]);
        assert_eq!(reply, int(1));
    }
    writer.join().unwrap();
}

// Proves a script past busy-reply-threshold makes other clients answer BUSY, SCRIPT KILL
// stops it, and the server answers normally again.
#[test]
fn busy_scripts_can_be_killed() {
    let server = TestServer::start();
    let (mut admin, mut runner) = start_busy_script(&server);
    // A transaction queued meanwhile is aborted by the BUSY refusals, never half run.
    let mut queued = server.client();
    assert_eq!(
        queued.cmd("MULTI"),
        Frame::ok(),
        "MULTI is allowed while busy"
    );
    assert!(matches!(queued.cmd("INCR counter"), Frame::Error(text) if text.starts_with("BUSY")));
    let mut exec_busy = server.client();
    exec_busy.cmd("MULTI");
    assert!(matches!(
        exec_busy.cmd("EXEC"),
        Frame::Error(text) if text.starts_with("EXECABORT Transaction discarded because of: BUSY")
    ));
    assert_eq!(admin.cmd("SCRIPT KILL"), Frame::ok());
    let Frame::Error(text) = runner.read_frame() else {
        panic!("the killed script answers an error");
    };
    assert!(matches!(
        queued.cmd("EXEC"),
        Frame::Error(text) if text.starts_with("EXECABORT Transaction discarded because of previous errors")
    ));
    assert_eq!(admin.cmd("GET counter"), Frame::NullBulk);
    assert!(
        text.starts_with("ERR Script killed by user with SCRIPT KILL"),
        "{text}"
    );
    assert_eq!(admin.cmd("PING"), Frame::Simple("PONG".into()));
    assert_eq!(
        admin.cmd("SCRIPT KILL"),
        Frame::error("NOTBUSY No scripts in execution right now.")
    );
}

// Proves SELECT inside a script is the script's own, and commands scripts may not run are
// refused with Redis' text.
#[test]
fn scripts_keep_their_selects_and_limits() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(
        c.call(&[
            "EVAL",
            "redis.call('select', 1); redis.call('set', 'x', 'one'); return 1",
            "0"
        ]),
        int(1)
    );
    assert_eq!(c.cmd("GET x"), Frame::NullBulk);
    assert_eq!(c.cmd("SELECT 1"), Frame::ok());
    assert_eq!(c.cmd("GET x"), Frame::bulk("one"));
    let Frame::Error(text) = c.call(&["EVAL", "return redis.call('blpop', 'l', 0)", "0"]) else {
        panic!("error expected");
    };
    assert!(
        text.contains("This Redis command is not allowed from script"),
        "{text}"
    );
    let Frame::Error(text) = c.call(&["EVAL_RO", "return redis.call('set', 'k', 'v')", "0"]) else {
        panic!("error expected");
    };
    assert!(
        text.contains("Write commands are not allowed from read-only scripts"),
        "{text}"
    );
}

// Proves function libraries: FUNCTION LOAD, FCALL and FCALL_RO with flags, case-insensitive
// names, FUNCTION LIST, and DUMP then RESTORE after a FLUSH.
#[test]
fn function_libraries() {
    let server = TestServer::start();
    let mut c = server.client();
    let code = "#!lua name=lib\nredis.register_function('setget', function(keys, args) redis.call('set', keys[1], args[1]) return redis.call('get', keys[1]) end)\nredis.register_function{function_name='peek', callback=function(keys) return redis.call('get', keys[1]) end, flags={'no-writes'}}";
    assert_eq!(c.call(&["FUNCTION", "LOAD", code]), Frame::bulk("lib"));
    assert_eq!(
        c.call(&["FCALL", "SETGET", "1", "k", "v"]),
        Frame::bulk("v")
    );
    assert_eq!(c.call(&["FCALL_RO", "peek", "1", "k"]), Frame::bulk("v"));
    let Frame::Error(text) = c.call(&["FCALL_RO", "setget", "1", "k", "w"]) else {
        panic!("error expected");
    };
    assert_eq!(
        text,
        "ERR Can not execute a script with write flag using *_ro command."
    );
    let Frame::Error(text) = c.call(&["FUNCTION", "LOAD", code]) else {
        panic!("error expected");
    };
    assert_eq!(text, "ERR Library 'lib' already exists");
    let dump = c.cmd("FUNCTION DUMP").bytes();
    assert_eq!(c.cmd("FUNCTION FLUSH"), Frame::ok());
    assert!(matches!(
        c.call(&["FCALL", "peek", "1", "k"]),
        Frame::Error(_)
    ));
    assert_eq!(c.call(&[&b"FUNCTION"[..], b"RESTORE", &dump]), Frame::ok());
    assert_eq!(c.call(&["FCALL", "peek", "1", "k"]), Frame::bulk("v"));
    let listed = c.cmd("FUNCTION LIST").items();
    assert_eq!(listed.len(), 1);
    let Frame::Error(text) = c.call(&["FUNCTION", "LOAD", "#!lua name=bad\nreturn math.pi"]) else {
        panic!("error expected");
    };
    assert!(
        text.contains("nonexistent global variable 'math'"),
        "{text}"
    );
}

// Proves BZPOPMIN blocks until a ZADD gives it a member, and BZMPOP pops several.
#[test]
fn blocking_sorted_set_pops() {
    let server = TestServer::start();
    let mut waiter = server.client();
    waiter.send_raw(&common::encode(&["BZPOPMIN", "z", "5"]));
    std::thread::sleep(Duration::from_millis(100));
    let mut c = server.client();
    assert_eq!(c.cmd("ZADD z 2 b 1 a"), int(2));
    assert_eq!(
        waiter.read_frame(),
        Frame::Array(vec![Frame::bulk("z"), Frame::bulk("a"), Frame::bulk("1")])
    );
    assert_eq!(
        c.cmd("BZMPOP 1 1 z MAX COUNT 5"),
        Frame::Array(vec![
            Frame::bulk("z"),
            Frame::Array(vec![Frame::Array(vec![Frame::bulk("b"), Frame::bulk("2")])])
        ])
    );
    assert_eq!(c.cmd("BZPOPMAX z 0.05"), Frame::NullArray);
}

// Proves a looping script or function leaves the async worker it started on: with one
// worker, other clients are still served (told BUSY), and SCRIPT KILL / FUNCTION KILL stop
// it. Before the fix the worker kept the I/O driver and PING never got an answer.
#[test]
fn looping_scripts_do_not_starve_a_single_worker() {
    let server = TestServer::start_on_workers(1, "", "");
    let mut admin = server.client();
    assert_eq!(admin.cmd("CONFIG SET busy-reply-threshold 50"), Frame::ok());
    let library = "#!lua name=spin\nredis.register_function('spin', function() local a = 0 while true do a = a + 1 end end)";
    assert_eq!(
        admin.call(&["FUNCTION", "LOAD", library]),
        Frame::bulk("spin")
    );
    for (run, kill) in [
        (
            vec!["EVAL", "local a = 0 while true do a = a + 1 end", "0"],
            "SCRIPT KILL",
        ),
        (vec!["FCALL", "spin", "0"], "FUNCTION KILL"),
    ] {
        let mut runner = server.client();
        runner.send_raw(&common::encode(&run));
        let started = Instant::now();
        loop {
            match admin.cmd("PING") {
                Frame::Error(text) if text.starts_with("BUSY") => break,
                _ if started.elapsed() > Duration::from_secs(10) => panic!("never busy"),
                _ => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        assert_eq!(admin.cmd(kill), Frame::ok());
        assert!(matches!(runner.read_frame(), Frame::Error(_)));
        assert_eq!(admin.cmd("PING"), Frame::Simple("PONG".into()));
    }
}

// Proves a read-only script (EVAL_RO, or a `no-writes` shebang) may not call a command that
// may replicate (PUBLISH, PFCOUNT), as Redis refuses it (CLIENT PAUSE WRITE counts on it),
// while a script that may write calls PUBLISH.
#[test]
fn read_only_scripts_refuse_commands_that_may_replicate() {
    let server = TestServer::start();
    let mut c = server.client();
    for script in [
        "return redis.call('publish','ch','msg')",
        "return redis.call('pfcount','hll')",
    ] {
        let refused = c.call(&["EVAL_RO", script, "0"]);
        assert!(
            matches!(&refused, Frame::Error(text)
                if text.starts_with("ERR Write commands are not allowed from read-only scripts. script:")),
            "{refused:?}"
        );
    }
    let shebang = "#!lua flags=no-writes\nreturn redis.call('publish','ch','msg')";
    let refused = c.call(&["EVAL", shebang, "0"]);
    assert!(
        matches!(&refused, Frame::Error(text)
            if text.starts_with("ERR Write commands are not allowed from read-only scripts.")),
        "{refused:?}"
    );
    assert_eq!(
        c.call(&["EVAL", "return redis.call('publish','ch','msg')", "0"]),
        Frame::Integer(0)
    );
}

// Proves scripts pipelined by many clients at once — which run one batch at a time, each
// connection's on whichever thread runs scripts then — are atomic and answered in each
// client's order: a script's error or a plain command between scripts changes neither, and
// every increment lands once.
#[test]
fn pipelined_scripts_from_many_clients_run_in_order() {
    const CLIENTS: usize = 8;
    const ROUNDS: usize = 40;
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(c.cmd("SET text x"), Frame::ok());
    let sha = c
        .call(&[
            "SCRIPT",
            "LOAD",
            "local n = redis.call('incr', KEYS[1]); redis.call('rpush', KEYS[2], n); return n",
        ])
        .text();
    let addr = server.addr;
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let sha = sha.clone();
            std::thread::spawn(move || {
                let mut w = common::Client::connect(addr);
                let mut last = 0;
                for _ in 0..ROUNDS {
                    // One write: five scripts, a failing script, a plain command, a script.
                    let mut pipeline = Vec::new();
                    for _ in 0..5 {
                        pipeline.extend(common::encode(&["EVALSHA", &sha, "2", "n", "seen"]));
                    }
                    pipeline.extend(common::encode(&[
                        "EVAL",
                        "return redis.call('incr', KEYS[1])",
                        "1",
                        "text",
                    ]));
                    pipeline.extend(common::encode(&["INCR", &format!("plain:{client}")]));
                    pipeline.extend(common::encode(&["EVALSHA", &sha, "2", "n", "seen"]));
                    w.send_raw(&pipeline);
                    for at in 0..8 {
                        match (at, w.read_frame()) {
                            (5, Frame::Error(text)) => {
                                assert!(text.starts_with("ERR value is not an integer"), "{text}");
                            }
                            (6, Frame::Integer(_)) => {}
                            (_, Frame::Integer(n)) if at != 5 && at != 6 => {
                                assert!(n > last, "replies out of order: {n} after {last}");
                                last = n;
                            }
                            (at, other) => panic!("reply {at}: {other:?}"),
                        }
                    }
                }
            })
        })
        .collect();
    for client in clients {
        client.join().unwrap();
    }
    let total = i64::try_from(CLIENTS * ROUNDS * 6).unwrap();
    assert_eq!(c.cmd("GET n"), Frame::bulk(total.to_string()));
    // Each script pushed the value it incremented to: every one of them once.
    let Frame::Array(seen) = c.cmd("LRANGE seen 0 -1") else {
        panic!("a list expected");
    };
    let mut seen: Vec<i64> = seen
        .into_iter()
        .map(|frame| frame.text().parse().unwrap())
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, (1..=total).collect::<Vec<_>>());
}

// Proves a client's pipelined scripts whose replies outgrow the output buffer are all
// answered, in order: the batch stops to send what it holds and the rest follow.
#[test]
fn pipelined_scripts_with_large_replies_are_answered_in_order() {
    let server = TestServer::start();
    let mut c = server.client();
    let script = [
        "EVAL",
        "return {redis.call('incr', KEYS[1]), string.rep('x', 4000)}",
        "1",
        "c",
    ];
    let mut pipeline = Vec::new();
    for _ in 0..40 {
        pipeline.extend(common::encode(&script));
    }
    c.send_raw(&pipeline);
    for n in 1..=40 {
        let items = c.read_frame().items();
        assert_eq!(items.first(), Some(&int(n)));
        assert_eq!(items.get(1).map(|s| s.text().len()), Some(4000));
    }
}

// Proves scripts pipelined while another script is busy are each answered BUSY (not held
// until it ends), and run once it is killed.
#[test]
fn pipelined_scripts_answer_busy_while_a_script_runs_long() {
    let server = TestServer::start();
    let (mut admin, mut runner) = start_busy_script(&server);
    let mut other = server.client();
    let script = ["EVAL", "return redis.call('incr', KEYS[1])", "1", "k"];
    let mut pipeline = Vec::new();
    for _ in 0..3 {
        pipeline.extend(common::encode(&script));
    }
    other.send_raw(&pipeline);
    for _ in 0..3 {
        let reply = other.read_frame_within(Duration::from_secs(2));
        assert!(
            matches!(&reply, Some(Frame::Error(text)) if text.starts_with("BUSY")),
            "{reply:?}"
        );
    }
    assert_eq!(admin.cmd("SCRIPT KILL"), Frame::ok());
    assert!(matches!(runner.read_frame(), Frame::Error(_)));
    other.send_raw(&pipeline);
    for n in 1..=3 {
        assert_eq!(other.read_frame(), int(n));
    }
}

// Proves a script may call INFO and MEMORY STATS, which report the interpreter the script
// itself holds (once a deadlock of the whole server).
#[test]
fn scripts_may_call_info_and_memory_stats() {
    let server = TestServer::start();
    let mut c = server.client();
    let info = c.call(&["EVAL", "return redis.call('info')", "0"]).text();
    assert!(info.contains("used_memory_lua:"), "{info}");
    let Frame::Array(stats) = c.call(&["EVAL", "return redis.call('memory', 'stats')", "0"]) else {
        panic!("an array expected");
    };
    assert!(!stats.is_empty());
    assert_eq!(c.cmd("PING"), Frame::Simple("PONG".into()));
}
