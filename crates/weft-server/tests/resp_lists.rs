//! Lists over real sockets, RESP2 and RESP3: every list command with Redis 7.0's replies and
//! error texts, WRONGTYPE, emptied lists deleted, and the blocking commands — woken by a push
//! from another connection, timing out with Redis' null shapes, served in the order they
//! blocked, forgotten when their client leaves, closed by a shutdown, not blocking in MULTI.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{Client, Frame, TestServer};

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_INTEGER: &str = "ERR value is not an integer or out of range";

fn int(n: i64) -> Frame {
    Frame::Integer(n)
}

fn bulk(text: &str) -> Frame {
    Frame::bulk(text)
}

fn bulks(items: &[&str]) -> Frame {
    Frame::Array(items.iter().map(|item| bulk(item)).collect())
}

fn ints(items: &[i64]) -> Frame {
    Frame::Array(items.iter().map(|&n| int(n)).collect())
}

/// A client speaking `protocol` (2 or 3).
fn client(server: &TestServer, protocol: u8) -> Client {
    let mut client = server.client();
    if protocol == 3 {
        assert!(matches!(client.cmd("HELLO 3"), Frame::Map(_)));
    }
    client
}

/// Redis' null bulk: RESP2 `$-1`, RESP3 `_`.
fn nil(protocol: u8) -> Frame {
    if protocol == 3 {
        Frame::Null
    } else {
        Frame::NullBulk
    }
}

/// Redis' null array: RESP2 `*-1`, RESP3 `_`.
fn nil_array(protocol: u8) -> Frame {
    if protocol == 3 {
        Frame::Null
    } else {
        Frame::NullArray
    }
}

/// INFO's `blocked_clients`.
fn blocked_clients(client: &mut Client) -> i64 {
    let info = client.cmd("INFO clients").text();
    info.lines()
        .find_map(|line| line.strip_prefix("blocked_clients:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Waits until `count` clients are blocked (registered in the queues of their keys).
fn wait_for_blocked(client: &mut Client, count: i64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while blocked_clients(client) != count {
        assert!(Instant::now() < deadline, "never {count} blocked clients");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Sends a request without reading its reply.
fn send(client: &mut Client, line: &str) {
    let args: Vec<&str> = line.split(' ').collect();
    client.send_raw(&common::encode(&args));
}

// Proves pushes, pops and reads answer as Redis 7.0: lengths, order, ranges with negative and
// out-of-range indexes, LINDEX/LSET/LINSERT/LREM/LTRIM, in RESP2 and RESP3.
#[test]
fn pushes_pops_and_reads_answer_as_redis() {
    let server = TestServer::start();
    for protocol in [2, 3] {
        let mut c = client(&server, protocol);
        c.cmd("DEL l");
        assert_eq!(c.cmd("LPUSH l a b c"), int(3));
        assert_eq!(c.cmd("RPUSH l d e"), int(5));
        assert_eq!(c.cmd("LRANGE l 0 -1"), bulks(&["c", "b", "a", "d", "e"]));
        assert_eq!(c.cmd("LRANGE l -2 100"), bulks(&["d", "e"]));
        assert_eq!(c.cmd("LRANGE l 3 1"), bulks(&[]));
        assert_eq!(
            c.cmd("LRANGE l -9223372036854775808 9223372036854775807"),
            bulks(&["c", "b", "a", "d", "e"])
        );
        assert_eq!(c.cmd("LLEN l"), int(5));
        assert_eq!(c.cmd("LPUSHX nolist x"), int(0));
        assert_eq!(c.cmd("RPUSHX nolist x"), int(0));
        assert_eq!(c.cmd("EXISTS nolist"), int(0));
        assert_eq!(c.cmd("RPUSHX l f"), int(6));
        assert_eq!(c.cmd("LINDEX l 0"), bulk("c"));
        assert_eq!(c.cmd("LINDEX l -1"), bulk("f"));
        assert_eq!(c.cmd("LINDEX l 6"), nil(protocol));
        assert_eq!(c.cmd("LINDEX nolist x"), nil(protocol));
        assert_eq!(c.cmd("LINDEX l x"), Frame::error(NOT_INTEGER));
        assert_eq!(c.cmd("LSET l -1 F"), Frame::ok());
        assert_eq!(c.cmd("LSET l 6 x"), Frame::error("ERR index out of range"));
        assert_eq!(c.cmd("LSET nolist 0 x"), Frame::error("ERR no such key"));
        assert_eq!(c.cmd("LINSERT l BEFORE a x"), int(7));
        assert_eq!(c.cmd("LINSERT l after a y"), int(8));
        assert_eq!(c.cmd("LINSERT l BEFORE zz x"), int(-1));
        assert_eq!(c.cmd("LINSERT nolist BEFORE a x"), int(0));
        assert_eq!(
            c.cmd("LINSERT l MIDDLE a x"),
            Frame::error("ERR syntax error")
        );
        assert_eq!(
            c.cmd("LRANGE l 0 -1"),
            bulks(&["c", "b", "x", "a", "y", "d", "e", "F"])
        );
        assert_eq!(c.cmd("LTRIM l 1 -2"), Frame::ok());
        assert_eq!(
            c.cmd("LRANGE l 0 -1"),
            bulks(&["b", "x", "a", "y", "d", "e"])
        );
        c.cmd("DEL r");
        c.cmd("RPUSH r a b a c a b a");
        assert_eq!(c.cmd("LREM r -2 a"), int(2));
        assert_eq!(c.cmd("LRANGE r 0 -1"), bulks(&["a", "b", "a", "c", "b"]));
        assert_eq!(c.cmd("LREM r 1 b"), int(1));
        assert_eq!(c.cmd("LREM r 0 a"), int(2));
        assert_eq!(c.cmd("LRANGE r 0 -1"), bulks(&["c", "b"]));
        assert_eq!(c.cmd("LREM r 0 zz"), int(0));
        assert_eq!(c.cmd("LREM nolist 0 a"), int(0));
        assert_eq!(c.cmd("TYPE r"), Frame::Simple("list".into()));
        assert_eq!(c.cmd("OBJECT ENCODING r"), bulk("quicklist"));
        // Empty elements are elements.
        assert_eq!(c.call(&["RPUSH", "r", ""]), int(3));
        assert_eq!(c.call(&["LPOS", "r", ""]), int(2));
    }
}

// Proves LPOP/RPOP with and without a count: RESP2 and RESP3 null shapes for a missing key
// (nil bulk without a count, nil array with one), count 0, counts past the length, and the
// errors for negative, non-integer counts and extra arguments.
#[test]
fn pops_with_counts_answer_as_redis() {
    let server = TestServer::start();
    for protocol in [2, 3] {
        let mut c = client(&server, protocol);
        c.cmd("DEL l");
        assert_eq!(c.cmd("LPOP l"), nil(protocol));
        assert_eq!(c.cmd("LPOP l 1"), nil_array(protocol));
        assert_eq!(c.cmd("LPOP l 0"), nil_array(protocol));
        c.cmd("RPUSH l a b c d e");
        assert_eq!(c.cmd("LPOP l"), bulk("a"));
        assert_eq!(c.cmd("RPOP l"), bulk("e"));
        assert_eq!(c.cmd("LPOP l 0"), bulks(&[]));
        assert_eq!(c.cmd("RPOP l 2"), bulks(&["d", "c"]));
        assert_eq!(c.cmd("LPOP l 10"), bulks(&["b"]));
        assert_eq!(c.cmd("EXISTS l"), int(0));
        let positive = Frame::error("ERR value is out of range, must be positive");
        assert_eq!(c.cmd("LPOP l -1"), positive);
        assert_eq!(c.cmd("RPOP l x"), positive);
        assert_eq!(
            c.cmd("LPOP l 1 2"),
            Frame::error("ERR wrong number of arguments for 'lpop' command")
        );
        assert_eq!(
            c.cmd("LPOP"),
            Frame::error("ERR wrong number of arguments for 'lpop' command")
        );
    }
}

// Proves every list command refuses a key holding a string with WRONGTYPE, and leaves it.
#[test]
fn list_commands_on_another_type_answer_wrongtype() {
    let server = TestServer::start();
    let mut c = server.client();
    c.cmd("SET s v");
    c.cmd("RPUSH l a");
    for line in [
        "LPUSH s a",
        "RPUSH s a",
        "LPUSHX s a",
        "RPUSHX s a",
        "LPOP s",
        "RPOP s 2",
        "LRANGE s 0 -1",
        "LINDEX s 0",
        "LLEN s",
        "LSET s 0 a",
        "LREM s 0 a",
        "LTRIM s 0 1",
        "LINSERT s BEFORE a b",
        "LPOS s a",
        "LMOVE s l LEFT RIGHT",
        "LMOVE l s LEFT RIGHT",
        "RPOPLPUSH l s",
        "LMPOP 1 s LEFT",
        "BLPOP s 0",
        "BRPOP l2 s 0",
        "BLMOVE s l LEFT RIGHT 0",
        "BLMOVE l s LEFT RIGHT 0",
        "BRPOPLPUSH l s 0",
        "BLMPOP 0 1 s LEFT",
    ] {
        assert_eq!(c.cmd(line), Frame::error(WRONGTYPE), "{line}");
    }
    assert_eq!(c.cmd("GET s"), bulk("v"));
    assert_eq!(c.cmd("LRANGE l 0 -1"), bulks(&["a"]));
}

// Proves a list emptied by any command is deleted, as Redis never keeps empty lists.
#[test]
fn emptied_lists_are_deleted() {
    let server = TestServer::start();
    let mut c = server.client();
    for (fill, empty) in [
        ("RPUSH k a", "LPOP k"),
        ("RPUSH k a b", "RPOP k 5"),
        ("RPUSH k a a", "LREM k 0 a"),
        ("RPUSH k a b", "LTRIM k 5 10"),
        ("RPUSH k a", "LMOVE k other LEFT RIGHT"),
        ("RPUSH k a", "RPOPLPUSH k other"),
        ("RPUSH k a b", "LMPOP 1 k LEFT COUNT 2"),
        ("RPUSH k a", "BLPOP k 0"),
        ("RPUSH k a", "BLMOVE k other LEFT LEFT 0"),
        ("RPUSH k a", "BLMPOP 0 1 k RIGHT"),
    ] {
        c.cmd(fill);
        assert_ne!(c.cmd(empty), Frame::NullArray, "{empty}");
        assert_eq!(c.cmd("EXISTS k"), int(0), "{empty}");
    }
}

// Proves LMOVE/RPOPLPUSH: nil for a missing source, WRONGTYPE checked before popping, and a
// rotation of one list in place that keeps the list (and its TTL) even with one element.
#[test]
fn moves_answer_as_redis() {
    let server = TestServer::start();
    for protocol in [2, 3] {
        let mut c = client(&server, protocol);
        c.cmd("DEL src dst k");
        assert_eq!(c.cmd("LMOVE src dst LEFT RIGHT"), nil(protocol));
        assert_eq!(c.cmd("RPOPLPUSH src dst"), nil(protocol));
        assert_eq!(
            c.cmd("LMOVE src dst UP RIGHT"),
            Frame::error("ERR syntax error")
        );
        c.cmd("RPUSH src a b c");
        assert_eq!(c.cmd("LMOVE src dst left right"), bulk("a"));
        assert_eq!(c.cmd("RPOPLPUSH src dst"), bulk("c"));
        assert_eq!(c.cmd("LRANGE dst 0 -1"), bulks(&["c", "a"]));
        c.cmd("RPUSH k only");
        c.cmd("EXPIRE k 100");
        assert_eq!(c.cmd("LMOVE k k LEFT RIGHT"), bulk("only"));
        assert_eq!(c.cmd("TTL k"), int(100));
        c.cmd("RPUSH k x y");
        assert_eq!(c.cmd("RPOPLPUSH k k"), bulk("y"));
        assert_eq!(c.cmd("LRANGE k 0 -1"), bulks(&["y", "only", "x"]));
    }
}

// Proves LMPOP's argument checks in Redis' order and its reply shapes.
#[test]
fn lmpop_answers_as_redis() {
    let server = TestServer::start();
    for protocol in [2, 3] {
        let mut c = client(&server, protocol);
        c.cmd("DEL a b");
        let numkeys = Frame::error("ERR numkeys should be greater than 0");
        assert_eq!(c.cmd("LMPOP 0 a LEFT"), numkeys);
        assert_eq!(c.cmd("LMPOP x a LEFT"), numkeys);
        assert_eq!(c.cmd("LMPOP 2 a LEFT"), Frame::error("ERR syntax error"));
        assert_eq!(c.cmd("LMPOP 1 a MIDDLE"), Frame::error("ERR syntax error"));
        assert_eq!(
            c.cmd("LMPOP 1 a LEFT COUNT 0"),
            Frame::error("ERR count should be greater than 0")
        );
        assert_eq!(
            c.cmd("LMPOP 1 a LEFT COUNT 1 COUNT 1"),
            Frame::error("ERR syntax error")
        );
        assert_eq!(c.cmd("LMPOP 2 a b LEFT"), nil_array(protocol));
        c.cmd("RPUSH b x y z");
        assert_eq!(
            c.cmd("LMPOP 2 a b RIGHT COUNT 2"),
            Frame::Array(vec![bulk("b"), bulks(&["z", "y"])])
        );
    }
}

// Proves LPOS with RANK, COUNT and MAXLEN, including RANK -9223372036854775808, which Redis
// treats as "from the tail, every match" (its negation overflows), and the option errors.
#[test]
fn lpos_answers_as_redis() {
    let server = TestServer::start();
    for protocol in [2, 3] {
        let mut c = client(&server, protocol);
        c.cmd("DEL p");
        c.cmd("RPUSH p a b a c a b a");
        assert_eq!(c.cmd("LPOS p a"), int(0));
        assert_eq!(c.cmd("LPOS p a RANK 2"), int(2));
        assert_eq!(c.cmd("LPOS p a RANK -1"), int(6));
        assert_eq!(c.cmd("LPOS p a RANK -2 COUNT 2"), ints(&[4, 2]));
        assert_eq!(c.cmd("LPOS p a COUNT 0"), ints(&[0, 2, 4, 6]));
        assert_eq!(c.cmd("LPOS p a COUNT 0 MAXLEN 3"), ints(&[0, 2]));
        assert_eq!(c.cmd("LPOS p a RANK 9223372036854775807"), nil(protocol));
        assert_eq!(
            c.cmd("LPOS p a RANK -9223372036854775808 COUNT 1"),
            ints(&[6, 4, 2, 0])
        );
        assert_eq!(c.cmd("LPOS p z"), nil(protocol));
        assert_eq!(c.cmd("LPOS p z COUNT 1"), ints(&[]));
        assert_eq!(c.cmd("LPOS nolist z COUNT 1"), ints(&[]));
        assert_eq!(
            c.cmd("LPOS p a COUNT -1"),
            Frame::error("ERR COUNT can't be negative")
        );
        assert_eq!(
            c.cmd("LPOS p a MAXLEN x"),
            Frame::error("ERR MAXLEN can't be negative")
        );
        assert_eq!(c.cmd("LPOS p a RANK x"), Frame::error(NOT_INTEGER));
        assert!(
            c.cmd("LPOS p a RANK 0")
                .text_error()
                .starts_with("ERR RANK can't be zero")
        );
        assert_eq!(c.cmd("LPOS p a FOO 1"), Frame::error("ERR syntax error"));
    }
}

trait ErrorText {
    fn text_error(&self) -> String;
}

impl ErrorText for Frame {
    fn text_error(&self) -> String {
        match self {
            Frame::Error(text) => text.clone(),
            other => panic!("not an error: {other:?}"),
        }
    }
}

// Proves timeouts are read as Redis 7.0 reads them: float seconds (hex too), "timeout is
// negative" for negatives and for values too large for its millisecond clock (inf, 1e400),
// "not a float" for junk, and BLMPOP checking its keys and options before its timeout.
#[test]
fn timeouts_are_checked_as_redis() {
    let server = TestServer::start();
    let mut c = server.client();
    let negative = Frame::error("ERR timeout is negative");
    let not_float = Frame::error("ERR timeout is not a float or out of range");
    for timeout in ["-1", "-0.01", "inf", "1e400", "9223372036854776"] {
        assert_eq!(c.cmd(&format!("BLPOP k {timeout}")), negative, "{timeout}");
    }
    for timeout in ["abc", "nan", "1e", "0.5s"] {
        assert_eq!(c.cmd(&format!("BRPOP k {timeout}")), not_float, "{timeout}");
    }
    assert_eq!(c.cmd("BLMOVE k d LEFT RIGHT -1"), negative);
    assert_eq!(
        c.cmd("BLMOVE k d UP RIGHT -1"),
        Frame::error("ERR syntax error")
    );
    assert_eq!(c.cmd("BRPOPLPUSH k d x"), not_float);
    assert_eq!(
        c.cmd("BLMPOP -1 x k LEFT"),
        Frame::error("ERR numkeys should be greater than 0")
    );
    assert_eq!(c.cmd("BLMPOP -1 1 k LEFT"), negative);
    // Accepted spellings answer at once when there is data.
    for timeout in ["0x10", "-0.0001", "9e15", ".5", "0"] {
        c.cmd("RPUSH k a");
        assert_eq!(
            c.cmd(&format!("BLPOP k {timeout}")),
            bulks(&["k", "a"]),
            "{timeout}"
        );
    }
}

// Proves BLPOP (RESP2 and RESP3) waits for a push from another connection and answers
// [key, element], and the pusher's own reply is not held up.
#[test]
fn blpop_is_woken_by_a_push_from_another_connection() {
    let server = TestServer::start();
    for protocol in [2, 3] {
        let mut blocked = client(&server, protocol);
        let mut pusher = server.client();
        pusher.cmd("DEL k");
        send(&mut blocked, "BLPOP nothing k 0");
        wait_for_blocked(&mut pusher, 1);
        assert_eq!(blocked.read_frame_within(Duration::from_millis(50)), None);
        assert_eq!(pusher.cmd("RPUSH k a b"), int(2));
        assert_eq!(blocked.read_frame(), bulks(&["k", "a"]));
        assert_eq!(pusher.cmd("LRANGE k 0 -1"), bulks(&["b"]));
        wait_for_blocked(&mut pusher, 0);
        // BRPOP takes from the tail.
        send(&mut blocked, "BRPOP k2 5");
        wait_for_blocked(&mut pusher, 1);
        pusher.cmd("RPUSH k2 x y");
        assert_eq!(blocked.read_frame(), bulks(&["k2", "y"]));
        pusher.cmd("DEL k k2");
    }
}

// Proves a BLPOP that nobody pushes to times out no earlier than its timeout, with RESP2
// `*-1` or RESP3 `_` — for BLMOVE too, as Redis 7.0 answers every timed-out list command.
#[test]
fn blocking_commands_time_out_with_a_null() {
    let server = TestServer::start();
    for protocol in [2, 3] {
        let mut c = client(&server, protocol);
        for line in [
            "BLPOP k 0.2",
            "BRPOP k k2 0.2",
            "BLMOVE k d LEFT RIGHT 0.2",
            "BRPOPLPUSH k d 0.2",
            "BLMPOP 0.2 1 k LEFT",
        ] {
            let started = Instant::now();
            assert_eq!(c.cmd(line), nil_array(protocol), "{line}");
            assert!(started.elapsed() >= Duration::from_millis(200), "{line}");
        }
        assert_eq!(blocked_clients(&mut c), 0);
    }
}

// Proves BLMOVE and BRPOPLPUSH wait for their source, move the element, and wake a client
// blocked on their destination in turn.
#[test]
fn blmove_waits_then_moves_and_wakes_the_destination() {
    let server = TestServer::start();
    let mut first = server.client();
    let mut second = server.client();
    let mut pusher = server.client();
    send(&mut first, "BLMOVE src mid RIGHT LEFT 0");
    wait_for_blocked(&mut pusher, 1);
    send(&mut second, "BRPOPLPUSH mid dst 0");
    wait_for_blocked(&mut pusher, 2);
    assert_eq!(pusher.cmd("RPUSH src a b"), int(2));
    assert_eq!(first.read_frame(), bulk("b"));
    assert_eq!(second.read_frame(), bulk("b"));
    assert_eq!(pusher.cmd("LRANGE src 0 -1"), bulks(&["a"]));
    assert_eq!(pusher.cmd("EXISTS mid"), int(0));
    assert_eq!(pusher.cmd("LRANGE dst 0 -1"), bulks(&["b"]));
}

// Proves a blocked BLMOVE whose destination has meanwhile become another type gets
// WRONGTYPE when its source is pushed to, and the element stays in the source (Redis).
#[test]
fn blmove_onto_a_key_of_another_type_answers_wrongtype() {
    let server = TestServer::start();
    let mut blocked = server.client();
    let mut other = server.client();
    send(&mut blocked, "BLMOVE src dst LEFT RIGHT 0");
    wait_for_blocked(&mut other, 1);
    other.cmd("SET dst string");
    other.cmd("RPUSH src x");
    assert_eq!(blocked.read_frame(), Frame::error(WRONGTYPE));
    assert_eq!(other.cmd("LRANGE src 0 -1"), bulks(&["x"]));
}

// Proves clients blocked on one key are served in the order they blocked, one element each,
// whether the elements come in one push or several.
#[test]
fn blocked_clients_are_served_in_the_order_they_blocked() {
    let server = TestServer::start();
    let mut pusher = server.client();
    let mut clients: Vec<Client> = (0..3).map(|_| server.client()).collect();
    for (at, c) in clients.iter_mut().enumerate() {
        send(c, "BLPOP k 0");
        wait_for_blocked(&mut pusher, i64::try_from(at).unwrap() + 1);
    }
    assert_eq!(pusher.cmd("RPUSH k a b"), int(2));
    assert_eq!(clients[0].read_frame(), bulks(&["k", "a"]));
    assert_eq!(clients[1].read_frame(), bulks(&["k", "b"]));
    wait_for_blocked(&mut pusher, 1);
    assert_eq!(
        clients[2].read_frame_within(Duration::from_millis(50)),
        None
    );
    assert_eq!(pusher.cmd("RPUSH k c"), int(1));
    assert_eq!(clients[2].read_frame(), bulks(&["k", "c"]));
    assert_eq!(pusher.cmd("EXISTS k"), int(0));
}

// Proves a client blocked on several keys is served from the key pushed to first, and a key
// that meanwhile holds another type is passed over rather than answered with WRONGTYPE.
#[test]
fn a_woken_client_is_served_from_the_key_pushed_to() {
    let server = TestServer::start();
    let mut blocked = server.client();
    let mut other = server.client();
    send(&mut blocked, "BLPOP k1 k2 0");
    wait_for_blocked(&mut other, 1);
    other.cmd("MULTI");
    other.cmd("RPUSH k2 x");
    other.cmd("RPUSH k1 y");
    other.cmd("EXEC");
    assert_eq!(blocked.read_frame(), bulks(&["k2", "x"]));
    other.cmd("DEL k1 k2");
    send(&mut blocked, "BLPOP k1 k2 0");
    wait_for_blocked(&mut other, 1);
    other.cmd("SET k1 string");
    other.cmd("RPUSH k2 z");
    assert_eq!(blocked.read_frame(), bulks(&["k2", "z"]));
}

// Proves BLMPOP blocks, then pops up to COUNT elements from the key pushed to.
#[test]
fn blmpop_blocks_then_pops_a_count() {
    let server = TestServer::start();
    for protocol in [2, 3] {
        let mut blocked = client(&server, protocol);
        let mut pusher = server.client();
        send(&mut blocked, "BLMPOP 0 2 a b RIGHT COUNT 3");
        wait_for_blocked(&mut pusher, 1);
        pusher.cmd("RPUSH b 1 2 3 4");
        assert_eq!(
            blocked.read_frame(),
            Frame::Array(vec![bulk("b"), bulks(&["4", "3", "2"])])
        );
        pusher.cmd("DEL b");
    }
}

// Proves a list renamed onto, or moved onto, a key a client blocks on wakes it, as Redis does.
#[test]
fn rename_and_lmove_onto_a_blocked_key_wake_it() {
    let server = TestServer::start();
    let mut blocked = server.client();
    let mut other = server.client();
    send(&mut blocked, "BLPOP k 0");
    wait_for_blocked(&mut other, 1);
    other.cmd("RPUSH tmp x");
    assert_eq!(other.cmd("RENAME tmp k"), Frame::ok());
    assert_eq!(blocked.read_frame(), bulks(&["k", "x"]));
    send(&mut blocked, "BLPOP k 0");
    wait_for_blocked(&mut other, 1);
    other.cmd("RPUSH tmp y");
    other.cmd("LMOVE tmp k LEFT LEFT");
    assert_eq!(blocked.read_frame(), bulks(&["k", "y"]));
}

// Proves requests pipelined behind a blocking command wait for it and then run in order.
#[test]
fn requests_behind_a_blocked_command_run_after_it() {
    let server = TestServer::start();
    let mut blocked = server.client();
    let mut other = server.client();
    let mut pipeline = common::encode(&["BLPOP", "k", "0"]);
    pipeline.extend(common::encode(&["LLEN", "k"]));
    pipeline.extend(common::encode(&["PING"]));
    blocked.send_raw(&pipeline);
    wait_for_blocked(&mut other, 1);
    assert_eq!(blocked.read_frame_within(Duration::from_millis(50)), None);
    other.cmd("RPUSH k a b");
    assert_eq!(blocked.read_frame(), bulks(&["k", "a"]));
    assert_eq!(blocked.read_frame(), int(1));
    assert_eq!(blocked.read_frame(), Frame::Simple("PONG".into()));
}

// Proves a blocked client that disconnects is forgotten: a later push is neither taken by
// it nor lost, and goes to the next client in line.
#[test]
fn a_blocked_client_that_disconnects_is_forgotten() {
    let server = TestServer::start();
    let mut other = server.client();
    let mut gone = server.client();
    send(&mut gone, "BLPOP k 0");
    wait_for_blocked(&mut other, 1);
    let mut next = server.client();
    send(&mut next, "BLPOP k 0");
    wait_for_blocked(&mut other, 2);
    drop(gone);
    wait_for_blocked(&mut other, 1);
    other.cmd("RPUSH k a");
    assert_eq!(next.read_frame(), bulks(&["k", "a"]));
    let mut gone = server.client();
    send(&mut gone, "BLPOP k 0");
    wait_for_blocked(&mut other, 1);
    drop(gone);
    wait_for_blocked(&mut other, 0);
    other.cmd("RPUSH k b");
    assert_eq!(other.cmd("LRANGE k 0 -1"), bulks(&["b"]));
}

// Proves blocking commands inside MULTI do not block: EXEC answers them as timed out
// (BLMOVE and BRPOPLPUSH with a nil bulk, the others with a nil array), as Redis does.
#[test]
fn blocking_commands_inside_multi_do_not_block() {
    let server = TestServer::start();
    for protocol in [2, 3] {
        let mut c = client(&server, protocol);
        c.cmd("MULTI");
        for line in [
            "BLPOP k 0",
            "BRPOP k 0",
            "BLMOVE k d LEFT LEFT 0",
            "BRPOPLPUSH k d 0",
            "BLMPOP 0 1 k LEFT",
        ] {
            assert_eq!(c.cmd(line), Frame::Simple("QUEUED".into()));
        }
        assert_eq!(
            c.cmd("EXEC"),
            Frame::Array(vec![
                nil_array(protocol),
                nil_array(protocol),
                nil(protocol),
                nil(protocol),
                nil_array(protocol),
            ])
        );
    }
}

// Proves a server shutting down closes a connection blocked forever at once, without
// waiting out the shutdown grace period.
#[test]
fn shutdown_closes_a_blocked_connection() {
    let server = TestServer::start();
    let mut blocked = server.client();
    let mut other = server.client();
    send(&mut blocked, "BLPOP k 0");
    wait_for_blocked(&mut other, 1);
    drop(other);
    let started = Instant::now();
    drop(server);
    assert!(blocked.closed_by_server());
    // The test server's grace period is 1 s; a blocked connection must not need it.
    assert!(started.elapsed() < Duration::from_millis(900));
}

// Proves many clients blocked on two keys and several pushers lose and duplicate nothing.
#[test]
fn concurrent_pushes_and_blocked_pops_lose_nothing() {
    const PUSHERS: usize = 3;
    const PUSHES_PER_PUSHER: usize = 200;
    const BLOCKERS: usize = 8;
    let server = TestServer::start();
    let addr = server.addr;
    let blockers: Vec<_> = (0..BLOCKERS)
        .map(|_| {
            std::thread::spawn(move || {
                let mut c = Client::connect(addr);
                let mut got = Vec::new();
                loop {
                    match c.cmd("BLPOP x y 1") {
                        Frame::Array(items) => got.push(items[1].text()),
                        Frame::NullArray => return got,
                        other => panic!("{other:?}"),
                    }
                }
            })
        })
        .collect();
    let pushers: Vec<_> = (0..PUSHERS)
        .map(|p| {
            std::thread::spawn(move || {
                let mut c = Client::connect(addr);
                for n in 0..PUSHES_PER_PUSHER {
                    let key = if n % 3 == 0 { "x" } else { "y" };
                    assert!(c.cmd(&format!("RPUSH {key} {p}-{n}")).int() >= 1);
                }
            })
        })
        .collect();
    for pusher in pushers {
        pusher.join().unwrap();
    }
    let mut got: Vec<String> = blockers
        .into_iter()
        .flat_map(|blocker| blocker.join().unwrap())
        .collect();
    got.sort();
    let before = got.len();
    got.dedup();
    assert_eq!(before, got.len(), "an element was served twice");
    assert_eq!(got.len(), PUSHERS * PUSHES_PER_PUSHER);
    let mut c = server.client();
    assert_eq!(c.cmd("EXISTS x y"), int(0));
}
