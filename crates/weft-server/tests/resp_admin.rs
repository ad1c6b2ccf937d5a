//! Server and client administration over real sockets: MEMORY, and the CLIENT subcommands
//! that act on other connections.

#![allow(clippy::unwrap_used)]

mod common;

use common::{Frame, TestServer};

// Proves MEMORY USAGE charges a key what its entry and structure cost (a hash of many
// fields more than a short string), answers nil for a missing key, accepts SAMPLES, and
// refuses bad options; MEMORY STATS answers Redis' fields; COMMAND GETKEYS knows its key.
#[test]
fn memory_usage_and_stats() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(c.cmd("SET s v"), Frame::ok());
    for i in 0..200 {
        c.cmd(&format!("HSET h field{i} value{i}"));
    }
    let string = c.cmd("MEMORY USAGE s").int();
    let hash = c.cmd("MEMORY USAGE h SAMPLES 0").int();
    assert!(string > 0 && string < 200, "{string}");
    assert!(hash > 200 * 10, "{hash}");
    assert_eq!(c.cmd("MEMORY USAGE missing"), Frame::NullBulk);
    assert_eq!(
        c.cmd("MEMORY USAGE s SAMPLES x"),
        Frame::error("ERR value is not an integer or out of range")
    );
    assert_eq!(
        c.cmd("MEMORY USAGE s BOGUS 1"),
        Frame::error("ERR syntax error")
    );
    assert!(matches!(c.cmd("MEMORY USAGE"), Frame::Error(_)));
    let Frame::Array(stats) = c.cmd("MEMORY STATS") else {
        panic!("MEMORY STATS is an array in RESP2");
    };
    let names: Vec<String> = stats.iter().step_by(2).map(Frame::text).collect();
    for field in [
        "peak.allocated",
        "total.allocated",
        "keys.count",
        "dataset.bytes",
        "db.0",
    ] {
        assert!(
            names.iter().any(|name| name == field),
            "{field} in {names:?}"
        );
    }
    assert_eq!(
        c.cmd("COMMAND GETKEYS MEMORY USAGE key"),
        Frame::Array(vec![Frame::bulk("key")])
    );
    assert_eq!(c.cmd("MEMORY PURGE"), Frame::ok());
}

fn info_field(c: &mut common::Client, field: &str) -> String {
    let info = c.cmd("INFO").text();
    info.lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .unwrap_or_default()
        .trim()
        .to_owned()
}

// Proves CLIENT LIST lists every connection (another's name, database and last command
// as it published them), filters by ID and TYPE, and reports the running request's size.
#[test]
fn client_list_shows_every_connection() {
    let server = TestServer::start();
    let mut me = server.client();
    let mut other = server.client();
    assert_eq!(other.cmd("CLIENT SETNAME worker"), Frame::ok());
    assert_eq!(other.cmd("SELECT 3"), Frame::ok());
    assert_eq!(other.cmd("GET k"), Frame::NullBulk);
    let other_id = other.cmd("CLIENT ID").int();
    let list = me.cmd("CLIENT LIST").text();
    assert_eq!(list.lines().count(), 2, "{list}");
    let line = list
        .lines()
        .find(|line| line.starts_with(&format!("id={other_id} ")))
        .unwrap();
    assert!(line.contains(" name=worker "), "{line}");
    assert!(line.contains(" db=3 "), "{line}");
    assert!(line.contains(" cmd=client "), "{line}");
    let mine = me.cmd("CLIENT INFO").text();
    assert!(mine.contains(" qbuf=26 "), "{mine}");
    let by_id = me.cmd(&format!("CLIENT LIST ID {other_id}")).text();
    assert!(by_id.contains("name=worker"), "{by_id}");
    assert_eq!(by_id.lines().count(), 1);
    assert_eq!(other.cmd("SUBSCRIBE news").items().len(), 3);
    let pubsub = me.cmd("CLIENT LIST TYPE pubsub").text();
    assert!(pubsub.contains(&format!("id={other_id} ")), "{pubsub}");
    assert_eq!(pubsub.lines().count(), 1);
}

// Proves CLIENT KILL: the old address form, the ID filter, SKIPME (killing all others, then
// the caller after its reply), a blocked client freed from its wait, and Redis' errors.
#[test]
fn client_kill_closes_connections() {
    let server = TestServer::start();
    let mut me = server.client();
    let mut a = server.client();
    let mut b = server.client();
    let a_id = a.cmd("CLIENT ID").int();
    assert_eq!(me.cmd(&format!("CLIENT KILL ID {a_id}")), Frame::Integer(1));
    assert!(a.closed_by_server());
    // The server knows a connection's protocol from its first bytes.
    assert_eq!(b.cmd("PING"), Frame::Simple("PONG".into()));
    let b_addr = me
        .cmd("CLIENT LIST")
        .text()
        .lines()
        .filter(|line| !line.contains("cmd=client|list"))
        .find_map(|line| {
            line.split(' ')
                .find_map(|field| field.strip_prefix("addr="))
                .map(str::to_owned)
        })
        .unwrap();
    assert_eq!(me.cmd(&format!("CLIENT KILL {b_addr}")), Frame::ok());
    assert!(b.closed_by_server());
    assert_eq!(
        me.cmd("CLIENT KILL 127.0.0.1:1"),
        Frame::error("ERR No such client")
    );
    assert_eq!(
        me.cmd("CLIENT KILL ID 0"),
        Frame::error("ERR client-id should be greater than 0")
    );
    assert_eq!(
        me.cmd("CLIENT KILL ID 10 wrong"),
        Frame::error("ERR syntax error")
    );
    assert_eq!(
        me.cmd("CLIENT KILL TYPE wrong"),
        Frame::error("ERR Unknown client type 'wrong'")
    );
    assert_eq!(
        me.cmd("CLIENT KILL USER nobody"),
        Frame::error("ERR No such user 'nobody'")
    );
    assert_eq!(
        me.cmd("CLIENT KILL SKIPME maybe"),
        Frame::error("ERR syntax error")
    );
    let mut blocked = server.client();
    blocked.send_raw(&common::encode(&["BLPOP", "nothing", "0"]));
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(info_field(&mut me, "blocked_clients"), "1");
    assert_eq!(me.cmd("CLIENT KILL SKIPME yes"), Frame::Integer(1));
    assert!(blocked.closed_by_server());
    assert_eq!(me.cmd("CLIENT KILL SKIPME no"), Frame::Integer(1));
    assert!(me.closed_by_server());
}

// Proves CLIENT UNBLOCK ends a blocked command as its timeout would, or with Redis'
// UNBLOCKED error, and answers 0 for a client that is not blocked.
#[test]
fn client_unblock() {
    let server = TestServer::start();
    let mut me = server.client();
    let mut blocked = server.client();
    let id = blocked.cmd("CLIENT ID").int();
    assert_eq!(me.cmd(&format!("CLIENT UNBLOCK {id}")), Frame::Integer(0));
    blocked.send_raw(&common::encode(&["BRPOP", "nothing", "0"]));
    std::thread::sleep(std::time::Duration::from_millis(100));
    let line = me.cmd(&format!("CLIENT LIST ID {id}")).text();
    assert!(line.contains("flags=b"), "{line}");
    assert_eq!(me.cmd(&format!("CLIENT UNBLOCK {id}")), Frame::Integer(1));
    assert_eq!(blocked.read_frame(), Frame::NullArray);
    blocked.send_raw(&common::encode(&["BLPOP", "nothing", "0"]));
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(
        me.cmd(&format!("CLIENT UNBLOCK {id} ERROR")),
        Frame::Integer(1)
    );
    assert_eq!(
        blocked.read_frame(),
        Frame::error("UNBLOCKED client unblocked via CLIENT UNBLOCK")
    );
    assert_eq!(blocked.cmd("PING"), Frame::Simple("PONG".into()));
}

// Proves CLIENT REPLY OFF silences replies until ON, and SKIP silences only the next one.
#[test]
fn client_reply_modes() {
    let server = TestServer::start();
    let mut c = server.client();
    c.send_raw(&common::encode(&["CLIENT", "REPLY", "OFF"]));
    c.send_raw(&common::encode(&["PING", "one"]));
    c.send_raw(&common::encode(&["SET", "k", "v"]));
    c.send_raw(&common::encode(&["CLIENT", "REPLY", "ON"]));
    assert_eq!(c.read_frame(), Frame::ok());
    assert_eq!(c.cmd("GET k"), Frame::bulk("v"));
    c.send_raw(&common::encode(&["CLIENT", "REPLY", "SKIP"]));
    c.send_raw(&common::encode(&["PING", "skipped"]));
    assert_eq!(c.cmd("PING after"), Frame::bulk("after"));
    // CLIENT REPLY ON right after SKIP clears the skip and answers, as Redis does.
    c.send_raw(&common::encode(&["CLIENT", "REPLY", "SKIP"]));
    assert_eq!(c.cmd("CLIENT REPLY ON"), Frame::ok());
    assert_eq!(c.cmd("PING"), Frame::Simple("PONG".into()));
    // CLIENT REPLY SKIP twice: the second's own reply is skipped, and the next command's.
    c.send_raw(&common::encode(&["CLIENT", "REPLY", "SKIP"]));
    c.send_raw(&common::encode(&["CLIENT", "REPLY", "SKIP"]));
    c.send_raw(&common::encode(&["PING", "skipped"]));
    assert_eq!(c.cmd("PING last"), Frame::bulk("last"));
}

// Proves CLIENT PAUSE WRITE holds back writes (and counts them as blocked) while reads
// run, UNPAUSE releases them, and PAUSE ALL holds reads until its timeout ends it.
#[test]
fn client_pause_and_unpause() {
    let server = TestServer::start();
    let mut admin = server.client();
    let mut writer = server.client();
    let mut reader = server.client();
    assert_eq!(admin.cmd("CLIENT PAUSE 60000 WRITE"), Frame::ok());
    assert_eq!(reader.cmd("GET k"), Frame::NullBulk);
    writer.send_raw(&common::encode(&["SET", "k", "v"]));
    assert_eq!(
        writer.read_frame_within(std::time::Duration::from_millis(200)),
        None
    );
    assert_eq!(info_field(&mut reader, "blocked_clients"), "1");
    assert_eq!(admin.cmd("CLIENT UNPAUSE"), Frame::ok());
    assert_eq!(writer.read_frame(), Frame::ok());
    assert_eq!(admin.cmd("CLIENT PAUSE 300 ALL"), Frame::ok());
    let started = std::time::Instant::now();
    assert_eq!(reader.cmd("GET k"), Frame::bulk("v"));
    assert!(started.elapsed() >= std::time::Duration::from_millis(200));
    assert_eq!(
        admin.cmd("CLIENT PAUSE -1"),
        Frame::error("ERR timeout is negative")
    );
    assert_eq!(
        admin.cmd("CLIENT PAUSE 10 SOME"),
        Frame::error("ERR syntax error")
    );
}

// Proves INFO's sections: the default set without commandstats, `all` with it, one section
// alone, and commandstats/errorstats counting calls, refusals (wrong arity) and failures
// (WRONGTYPE) until CONFIG RESETSTAT.
#[test]
fn info_sections_and_command_statistics() {
    let server = TestServer::start();
    let mut c = server.client();
    let default = c.cmd("INFO").text();
    for field in [
        "redis_version",
        "used_cpu_user",
        "used_memory",
        "master_repl_offset",
        "loading:0",
    ] {
        assert!(default.contains(field), "{field} in default INFO");
    }
    assert!(!default.contains("rejected_calls"));
    let cpu = c.cmd("INFO cpu").text();
    assert!(
        cpu.contains("used_cpu_user") && !cpu.contains("used_memory"),
        "{cpu}"
    );
    assert_eq!(c.cmd("SET s v"), Frame::ok());
    assert!(matches!(c.cmd("LPUSH s x"), Frame::Error(_)));
    assert!(matches!(c.cmd("GET"), Frame::Error(_)));
    let all = c.cmd("INFO all").text();
    assert!(all.contains("cmdstat_set:calls=1,"), "{all}");
    assert!(
        all.contains("cmdstat_lpush:calls=1,") && all.contains(",failed_calls=1"),
        "{all}"
    );
    assert!(
        all.contains("cmdstat_get:calls=0,") && all.contains("rejected_calls=1"),
        "{all}"
    );
    assert!(all.contains("errorstat_WRONGTYPE:count=1"), "{all}");
    assert!(all.contains("errorstat_ERR:count=1"), "{all}");
    assert_eq!(all.matches("used_cpu_user_children").count(), 1);
    assert_eq!(c.cmd("CONFIG RESETSTAT"), Frame::ok());
    let stats = c.cmd("INFO commandstats").text();
    assert!(!stats.contains("cmdstat_set"), "{stats}");
}

// Proves keyspace notifications: masks by class, keyspace and keyevent channels, `new`
// only for keys that appeared, nothing for a command that changed nothing, expirations
// from the reaper, and CONFIG GET writing the letters back in Redis' order.
#[test]
fn keyspace_notifications() {
    use std::time::Duration;
    let server = TestServer::start();
    let mut c = server.client();
    let mut sub = server.client();
    let pmessage = |channel: &str, message: &str| {
        Frame::Array(vec![
            Frame::bulk("pmessage"),
            Frame::bulk("*"),
            Frame::bulk(channel),
            Frame::bulk(message),
        ])
    };
    assert_eq!(sub.cmd("PSUBSCRIBE *").items().len(), 3);
    assert_eq!(c.cmd("CONFIG SET notify-keyspace-events KEl"), Frame::ok());
    assert_eq!(c.cmd("SET foo bar"), Frame::ok());
    assert_eq!(c.cmd("LPUSH mylist a"), Frame::Integer(1));
    assert_eq!(sub.read_frame(), pmessage("__keyspace@0__:mylist", "lpush"));
    assert_eq!(sub.read_frame(), pmessage("__keyevent@0__:lpush", "mylist"));
    assert_eq!(c.cmd("CONFIG SET notify-keyspace-events Ks"), Frame::ok());
    assert_eq!(c.cmd("SREM myset x"), Frame::Integer(0));
    assert_eq!(c.cmd("SADD myset a"), Frame::Integer(1));
    assert_eq!(sub.read_frame(), pmessage("__keyspace@0__:myset", "sadd"));
    assert_eq!(c.cmd("CONFIG SET notify-keyspace-events En"), Frame::ok());
    assert_eq!(c.cmd("SET foo baz"), Frame::ok());
    assert_eq!(c.cmd("SET fresh v"), Frame::ok());
    assert_eq!(sub.read_frame(), pmessage("__keyevent@0__:new", "fresh"));
    assert_eq!(c.cmd("CONFIG SET notify-keyspace-events Ex"), Frame::ok());
    assert_eq!(c.cmd("PSETEX mortal 50 v"), Frame::ok());
    assert_eq!(
        sub.read_frame_within(Duration::from_secs(3)),
        Some(pmessage("__keyevent@0__:expired", "mortal"))
    );
    assert_eq!(c.cmd("CONFIG SET notify-keyspace-events KA"), Frame::ok());
    assert_eq!(
        c.cmd("CONFIG GET notify-keyspace-events").items()[1],
        Frame::bulk("AK")
    );
    assert!(matches!(
        c.cmd("CONFIG SET notify-keyspace-events Kq"),
        Frame::Error(_)
    ));
}

// Proves MONITOR shows other clients' commands as Redis does: quoted arguments after the
// database and address, a script's own calls as `lua` after the script, a transaction's
// commands between `multi` and `exec`, and no administrative command.
#[test]
fn monitor_shows_commands() {
    use std::time::Duration;
    let server = TestServer::start();
    let mut c = server.client();
    let mut monitor = server.client();
    assert_eq!(monitor.cmd("MONITOR"), Frame::ok());
    let mut next = || match monitor.read_frame_within(Duration::from_secs(3)) {
        Some(Frame::Simple(line)) => line,
        other => panic!("a monitor line expected, got {other:?}"),
    };
    assert_eq!(c.cmd("SET foo bar"), Frame::ok());
    let line = next();
    assert!(
        line.contains("[0 127.0.0.1:") && line.ends_with("\"SET\" \"foo\" \"bar\""),
        "{line}"
    );
    assert_eq!(c.cmd("CONFIG GET maxmemory").items().len(), 2);
    c.call(&["EVAL", "return redis.call('get', KEYS[1])", "1", "foo"]);
    assert!(next().contains("\"EVAL\""));
    let inner = next();
    assert!(inner.contains("[0 lua] \"get\" \"foo\""), "{inner}");
    assert_eq!(c.cmd("MULTI"), Frame::ok());
    c.call(&["SET", "a\"b", "1\n"]);
    c.cmd("EXEC");
    assert!(next().ends_with("\"MULTI\""));
    let queued = next();
    assert!(queued.ends_with("\"SET\" \"a\\\"b\" \"1\\n\""), "{queued}");
    assert!(next().ends_with("\"EXEC\""));
    // A blocking command is shown once, as sent, however often it is tried while it waits.
    let mut waiter = server.client();
    waiter.send_raw(&common::encode(&["BLPOP", "queue", "5"]));
    let blpop = next();
    assert!(blpop.ends_with("\"BLPOP\" \"queue\" \"5\""), "{blpop}");
    std::thread::sleep(Duration::from_millis(100));
    c.cmd("RPUSH queue job");
    assert!(next().ends_with("\"RPUSH\" \"queue\" \"job\""));
    assert_eq!(waiter.read_frame().items().len(), 2);
    assert!(monitor_quiet(&mut monitor), "BLPOP shown again");
}

fn monitor_quiet(monitor: &mut common::Client) -> bool {
    monitor
        .read_frame_within(std::time::Duration::from_millis(200))
        .is_none()
}

// Proves LATENCY records commands at or over `latency-monitor-threshold` as Redis does
// (LATEST, HISTORY, RESET, GRAPH, DOCTOR), nothing while the threshold is 0, and that
// LATENCY HISTOGRAM shows each command's calls and cumulative latency distribution.
#[test]
fn latency_monitor_and_histograms() {
    let server = TestServer::start();
    let mut c = server.client();
    // A script that runs for 30 ms.
    let slow = [
        "EVAL",
        "local t = redis.call('TIME') local s = t[1] * 1000000 + t[2] \
         repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] - s > 30000 return 1",
        "0",
    ];
    assert_eq!(c.call(&slow).int(), 1);
    assert_eq!(c.cmd("LATENCY LATEST"), Frame::Array(vec![]));
    assert!(c.cmd("LATENCY DOCTOR").text().contains("disabled"));

    assert_eq!(
        c.cmd("CONFIG SET latency-monitor-threshold 20"),
        Frame::ok()
    );
    assert_eq!(c.call(&slow).int(), 1);
    c.cmd("GET fast");
    let latest = c.cmd("LATENCY LATEST").items();
    assert_eq!(latest.len(), 1, "{latest:?}");
    let event = latest[0].items();
    assert_eq!(event[0], Frame::bulk("command"));
    assert!(
        event[2].int() >= 30 && event[3].int() >= event[2].int(),
        "{event:?}"
    );
    let history = c.cmd("LATENCY HISTORY command").items();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].items()[1], event[2]);
    assert_eq!(c.cmd("LATENCY HISTORY nothing"), Frame::Array(vec![]));
    assert!(
        c.cmd("LATENCY GRAPH command")
            .text()
            .contains("command - high")
    );
    assert_eq!(
        c.cmd("LATENCY GRAPH nothing"),
        Frame::error("ERR No samples available for event 'nothing'")
    );
    assert!(
        c.cmd("LATENCY DOCTOR")
            .text()
            .contains("1. command: 1 latency spikes")
    );
    assert_eq!(c.cmd("LATENCY RESET nothing").int(), 0);
    assert_eq!(c.cmd("LATENCY RESET").int(), 1);
    assert_eq!(c.cmd("LATENCY LATEST"), Frame::Array(vec![]));

    // Histograms: calls, and counts that only grow, ending at the calls.
    for _ in 0..10 {
        c.cmd("SET k v");
    }
    let histogram = c.cmd("LATENCY HISTOGRAM set nosuchcommand").items();
    assert_eq!(histogram.len(), 2, "{histogram:?}");
    assert_eq!(histogram[0], Frame::bulk("set"));
    let figures = histogram[1].items();
    assert_eq!(figures[0], Frame::bulk("calls"));
    assert_eq!(figures[1].int(), 10);
    assert_eq!(figures[2], Frame::bulk("histogram_usec"));
    let points: Vec<i64> = figures[3].items().iter().map(Frame::int).collect();
    let counts: Vec<i64> = points.iter().skip(1).step_by(2).copied().collect();
    assert!(counts.windows(2).all(|w| w[0] < w[1]), "{points:?}");
    assert_eq!(counts.last(), Some(&10));
    assert_eq!(
        c.cmd("LATENCY NOPE"),
        Frame::error("ERR unknown subcommand 'NOPE'. Try LATENCY HELP.")
    );
}

// Proves WAIT answers at once when no more replicas are asked for than a local cache has
// (none), waits out its timeout otherwise and then answers 0, answers at once inside MULTI,
// and refuses malformed arguments with Redis' errors.
#[test]
fn wait_on_a_local_cache() {
    let server = TestServer::start();
    let mut c = server.client();
    c.cmd("SET k v");
    assert_eq!(c.cmd("WAIT 0 0").int(), 0);
    let started = std::time::Instant::now();
    assert_eq!(c.cmd("WAIT 1 200").int(), 0);
    assert!(started.elapsed() >= std::time::Duration::from_millis(190));
    assert_eq!(c.cmd("MULTI"), Frame::ok());
    assert_eq!(c.cmd("WAIT 1 0"), Frame::Simple("QUEUED".into()));
    assert_eq!(c.cmd("EXEC"), Frame::Array(vec![Frame::Integer(0)]));
    assert_eq!(
        c.cmd("WAIT x 0"),
        Frame::error("ERR value is not an integer or out of range")
    );
    assert_eq!(c.cmd("WAIT 1 -1"), Frame::error("ERR timeout is negative"));
    assert_eq!(
        c.cmd("WAIT 1 x"),
        Frame::error("ERR timeout is not an integer or out of range")
    );
    // A client blocked in WAIT is answered as timed out by CLIENT UNBLOCK.
    let id = c.cmd("CLIENT ID").int();
    let mut other = server.client();
    c.send_raw(&common::encode(&["WAIT", "1", "0"]));
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(other.cmd(&format!("CLIENT UNBLOCK {id}")).int(), 1);
    assert_eq!(c.read_frame(), Frame::Integer(0));
}

// Proves SHUTDOWN stops a server process gracefully (exit status 0) and closes the asking
// connection without a reply, while its malformed forms, ABORT with no shutdown under way
// and SHUTDOWN inside MULTI are refused and change nothing.
#[test]
fn shutdown_stops_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let port = common::cluster::free_tcp_port();
    let address = format!("127.0.0.1:{port}");
    let mut server = common::process::Weft::spawn(
        dir.path(),
        &["server", "--bind", &address],
        dir.path(),
        "server",
    );
    common::process::wait_listening(address.parse().unwrap(), std::time::Duration::from_secs(30));
    let mut c = common::Client::connect(address.parse().unwrap());
    assert_eq!(
        c.cmd("SHUTDOWN NOSAVE SAVE"),
        Frame::error("ERR syntax error")
    );
    assert_eq!(c.cmd("SHUTDOWN LATER"), Frame::error("ERR syntax error"));
    assert_eq!(
        c.cmd("SHUTDOWN ABORT NOW"),
        Frame::error("ERR syntax error")
    );
    assert_eq!(
        c.cmd("SHUTDOWN ABORT"),
        Frame::error("ERR No shutdown in progress.")
    );
    assert_eq!(c.cmd("MULTI"), Frame::ok());
    assert_eq!(
        c.cmd("SHUTDOWN"),
        Frame::error("ERR Command not allowed inside a transaction")
    );
    assert_eq!(
        c.cmd("EXEC"),
        Frame::error("EXECABORT Transaction discarded because of previous errors.")
    );
    assert_eq!(c.cmd("SET k v"), Frame::ok());
    c.send_raw(&common::encode(&["SHUTDOWN", "NOW"]));
    assert!(
        c.closed_by_server(),
        "the connection closes without a reply"
    );
    let status = server
        .exit_within(std::time::Duration::from_secs(30))
        .expect("the server stops");
    assert!(status.success(), "{status:?}: {}", server.stderr());
}
