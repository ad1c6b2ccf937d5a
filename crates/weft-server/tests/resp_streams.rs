//! Streams over real sockets: every stream command with Redis 7.0's replies and error texts,
//! WRONGTYPE, consumer groups and their pending lists, and the blocking reads — woken by an
//! XADD from another connection (every reader of the key, `$` meaning the ID when it
//! blocked), timing out with a null, failing when the group or the stream goes away.
//! (The random differential run against redis-server is interop/resp-python/differential.py.)

#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{Client, Frame, TestServer};

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";

fn int(n: i64) -> Frame {
    Frame::Integer(n)
}

fn bulk(text: &str) -> Frame {
    Frame::bulk(text)
}

fn err(text: &str) -> Frame {
    Frame::error(text)
}

/// An entry as XRANGE answers it: `[id, [field, value, ...]]`.
fn entry(id: &str, items: &[&str]) -> Frame {
    Frame::Array(vec![
        bulk(id),
        Frame::Array(items.iter().map(|item| bulk(item)).collect()),
    ])
}

fn entries(list: &[(&str, &[&str])]) -> Frame {
    Frame::Array(list.iter().map(|(id, items)| entry(id, items)).collect())
}

/// One stream of a RESP2 XREAD reply: `[key, entries]`.
fn stream(key: &str, list: &[(&str, &[&str])]) -> Frame {
    Frame::Array(vec![bulk(key), entries(list)])
}

/// Sends a request without reading its reply.
fn send(client: &mut Client, line: &str) {
    let args: Vec<&str> = line.split(' ').collect();
    client.send_raw(&common::encode(&args));
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

/// Waits until `count` clients are blocked.
fn wait_for_blocked(client: &mut Client, count: i64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while blocked_clients(client) != count {
        assert!(Instant::now() < deadline, "never {count} blocked clients");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The value after `name` in a flat RESP2 map reply.
fn field(reply: &Frame, name: &str) -> Frame {
    let items = reply.items();
    let at = items
        .iter()
        .position(|item| *item == bulk(name))
        .unwrap_or_else(|| panic!("no {name} in {reply:?}"));
    items[at + 1].clone()
}

// Proves XADD's ID forms (explicit, ms-*, ms) and errors, XLEN, XRANGE/XREVRANGE with
// exclusive bounds and COUNT, TYPE and OBJECT ENCODING, as redis-server 7.0 answers.
#[test]
fn xadd_and_ranges_answer_as_redis() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(c.cmd("XADD s 1-1 a 1 b 2"), bulk("1-1"));
    assert_eq!(c.cmd("XADD s 1-* c 3"), bulk("1-2"));
    assert_eq!(c.cmd("XADD s 5 d 4"), bulk("5-0"));
    assert_eq!(
        c.cmd("XADD s 5-0 e 5"),
        err("ERR The ID specified in XADD is equal or smaller than the target stream top item")
    );
    assert_eq!(
        c.cmd("XADD s 0-0 e 5"),
        err("ERR The ID specified in XADD must be greater than 0-0")
    );
    assert_eq!(
        c.cmd("XADD s 6 e"),
        err("ERR wrong number of arguments for 'xadd' command")
    );
    assert_eq!(c.cmd("XADD s x-1 e 5"), err(INVALID_ID));
    assert_eq!(c.cmd("XADD s NOMKSTREAM 7 e 5"), bulk("7-0"));
    assert_eq!(c.cmd("XADD missing NOMKSTREAM 1 e 5"), Frame::NullBulk);
    let auto = c.cmd("XADD s * f v").text();
    let (ms, seq) = auto.split_once('-').unwrap();
    assert!(
        ms.parse::<u64>().unwrap() > 1_600_000_000_000 && seq == "0",
        "{auto}"
    );
    assert_eq!(c.cmd("XLEN s"), int(5));
    assert_eq!(c.cmd("XLEN missing"), int(0));
    assert_eq!(
        c.cmd("XRANGE s - 5"),
        entries(&[
            ("1-1", &["a", "1", "b", "2"]),
            ("1-2", &["c", "3"]),
            ("5-0", &["d", "4"])
        ])
    );
    assert_eq!(
        c.cmd("XRANGE s (1-1 (7-0"),
        entries(&[("1-2", &["c", "3"]), ("5-0", &["d", "4"])])
    );
    assert_eq!(
        c.cmd("XRANGE s (5 (7").items().len(),
        1,
        "(7 ends below 7-18446744073709551615, 7-0 included"
    );
    assert_eq!(
        c.cmd("XREVRANGE s 7 - COUNT 2"),
        entries(&[("7-0", &["e", "5"]), ("5-0", &["d", "4"])])
    );
    assert_eq!(c.cmd("XRANGE s - + COUNT 0"), Frame::NullArray);
    assert_eq!(c.cmd("XRANGE missing - +"), Frame::Array(vec![]));
    assert_eq!(
        c.cmd("XRANGE s (0-0 +"),
        c.cmd("XRANGE s - +"),
        "an exclusive 0-0 starts at 0-1"
    );
    assert_eq!(
        c.cmd("XRANGE s (18446744073709551615-18446744073709551615 +"),
        err("ERR invalid start ID for the interval")
    );
    assert_eq!(c.cmd("XRANGE s - + COUNT"), err("ERR syntax error"));
    assert_eq!(c.cmd("TYPE s"), Frame::Simple("stream".into()));
    assert_eq!(c.cmd("OBJECT ENCODING s"), bulk("stream"));
    c.cmd("SET str v");
    assert_eq!(c.cmd("XADD str 1 a b"), err(WRONGTYPE));
    assert_eq!(c.cmd("XRANGE str - +"), err(WRONGTYPE));
    assert_eq!(c.cmd("XLEN str"), err(WRONGTYPE));
}

// Proves XDEL and XTRIM (exact and `~` on 100-entry nodes, LIMIT), XADD's trimming options
// and their errors, and that a stream emptied by them stays as a key with its last ID.
#[test]
fn deletes_and_trims_answer_as_redis() {
    let server = TestServer::start();
    let mut c = server.client();
    for ms in 1..=1000 {
        c.cmd(&format!("XADD s MAXLEN ~ 555 {ms} f {ms}"));
    }
    assert_eq!(c.cmd("XLEN s"), int(600), "~ removes whole 100-entry nodes");
    assert_eq!(c.cmd("XTRIM s MAXLEN 444"), int(156));
    // The node 501-600 keeps 44 live entries (56 marked deleted): `~` removes it and the
    // next whole node, then stops at 300.
    assert_eq!(c.cmd("XTRIM s MAXLEN ~ 300"), int(144));
    assert_eq!(c.cmd("XTRIM s MINID = 900"), int(199));
    assert_eq!(
        c.cmd("XTRIM s MAXLEN ~ 0 LIMIT 50"),
        int(1),
        "the next node exceeds LIMIT"
    );
    assert_eq!(c.cmd("XDEL s 900 901-0 5"), int(1));
    assert_eq!(c.cmd("XDEL s bad"), err(INVALID_ID));
    assert_eq!(c.cmd("XDEL missing bad"), int(0));
    assert_eq!(
        c.cmd("XTRIM s MAXLEN 1 LIMIT 10"),
        err("ERR syntax error, LIMIT cannot be used without the special ~ option")
    );
    assert_eq!(
        c.cmd("XTRIM s LIMIT 10"),
        err("ERR syntax error, LIMIT cannot be used without specifying a trimming strategy")
    );
    assert_eq!(c.cmd("XTRIM s FOO 1"), err("ERR syntax error"));
    assert_eq!(
        c.cmd("XADD s MAXLEN 1 MINID 1 2000 f v"),
        err("ERR syntax error, MAXLEN and MINID options at the same time are not compatible")
    );
    assert_eq!(
        c.cmd("XADD s MAXLEN -1 2000 f v"),
        err("ERR The MAXLEN argument must be >= 0.")
    );
    assert_eq!(c.cmd("XTRIM s MAXLEN 0"), int(99));
    assert_eq!(c.cmd("EXISTS s"), int(1), "an empty stream stays");
    let info = c.cmd("XINFO STREAM s");
    assert_eq!(field(&info, "length"), int(0));
    assert_eq!(field(&info, "last-generated-id"), bulk("1000-0"));
    assert_eq!(field(&info, "entries-added"), int(1000));
    assert_eq!(field(&info, "max-deleted-entry-id"), bulk("901-0"));
    assert_eq!(field(&info, "first-entry"), Frame::NullBulk);
    assert_eq!(
        c.cmd("XADD s 999 f v"),
        err("ERR The ID specified in XADD is equal or smaller than the target stream top item")
    );
}

// Proves XSETID's checks and effect, as Redis 7.0 answers them.
#[test]
fn xsetid_answers_as_redis() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(c.cmd("XSETID missing 1-1"), err("ERR no such key"));
    c.cmd("XADD s 5-5 f v");
    assert_eq!(
        c.cmd("XSETID s 5-4"),
        err("ERR The ID specified in XSETID is smaller than the target stream top item")
    );
    assert_eq!(
        c.cmd("XSETID s 9 ENTRIESADDED 0"),
        err("ERR The entries_added specified in XSETID is smaller than the target stream length")
    );
    assert_eq!(
        c.cmd("XSETID s 9 MAXDELETEDID 10"),
        err("ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id")
    );
    assert_eq!(
        c.cmd("XSETID s 9 ENTRIESADDED -1"),
        err("ERR entries_added must be positive")
    );
    assert_eq!(
        c.cmd("XSETID s 9 ENTRIESADDED 7 MAXDELETEDID 3"),
        Frame::ok()
    );
    let info = c.cmd("XINFO STREAM s");
    assert_eq!(field(&info, "last-generated-id"), bulk("9-0"));
    assert_eq!(field(&info, "entries-added"), int(7));
    assert_eq!(field(&info, "max-deleted-entry-id"), bulk("3-0"));
    assert_eq!(c.cmd("XADD s 9-* f v"), bulk("9-1"));
}

// Proves consumer groups as Redis 7.0 answers them: XGROUP's subcommands and errors,
// XREADGROUP with `>` and with history, XACK, XPENDING (summary, range, IDLE, consumer),
// XINFO GROUPS/CONSUMERS/STREAM FULL, entries-read and lag.
#[test]
fn consumer_groups_answer_as_redis() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(
        c.cmd("XGROUP CREATE s g $"),
        err(
            "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may \
             want to use the MKSTREAM option to create an empty stream automatically."
        )
    );
    assert_eq!(c.cmd("XGROUP CREATE s g $ MKSTREAM"), Frame::ok());
    assert_eq!(
        c.cmd("XGROUP CREATE s g $"),
        err("BUSYGROUP Consumer Group name already exists")
    );
    for ms in 1..=4 {
        c.cmd(&format!("XADD s {ms} f {ms}"));
    }
    assert_eq!(
        c.cmd("XREADGROUP GROUP g alice COUNT 3 STREAMS s >"),
        Frame::Array(vec![stream(
            "s",
            &[
                ("1-0", &["f", "1"]),
                ("2-0", &["f", "2"]),
                ("3-0", &["f", "3"])
            ]
        )])
    );
    assert_eq!(
        c.cmd("XREADGROUP GROUP g bob STREAMS s >"),
        Frame::Array(vec![stream("s", &[("4-0", &["f", "4"])])])
    );
    assert_eq!(
        c.cmd("XREADGROUP GROUP g bob STREAMS s >"),
        Frame::NullArray
    );
    assert_eq!(
        c.cmd("XREADGROUP GROUP g alice STREAMS s 1"),
        Frame::Array(vec![stream(
            "s",
            &[("2-0", &["f", "2"]), ("3-0", &["f", "3"])]
        )])
    );
    c.cmd("XDEL s 3");
    assert_eq!(
        c.cmd("XREADGROUP GROUP g alice STREAMS s 2").items()[0].items()[1],
        Frame::Array(vec![Frame::Array(vec![bulk("3-0"), Frame::NullArray])]),
        "a pending entry deleted from the stream reads as a null"
    );
    assert_eq!(c.cmd("XACK s g 1 1 9"), int(1));
    assert_eq!(c.cmd("XACK s nogroup 1"), int(0));
    assert_eq!(c.cmd("XACK s g bad"), err(INVALID_ID));
    assert_eq!(
        c.cmd("XPENDING s g"),
        Frame::Array(vec![
            int(3),
            bulk("2-0"),
            bulk("4-0"),
            Frame::Array(vec![
                Frame::Array(vec![bulk("alice"), bulk("2")]),
                Frame::Array(vec![bulk("bob"), bulk("1")]),
            ]),
        ])
    );
    let rows = c.cmd("XPENDING s g - + 10 alice").items();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].items()[0], bulk("2-0"));
    assert_eq!(rows[0].items()[1], bulk("alice"));
    assert_eq!(rows[0].items()[3], int(2), "delivered twice (history read)");
    assert_eq!(c.cmd("XPENDING s g IDLE 3600000 - + 10").items().len(), 0);
    assert_eq!(c.cmd("XPENDING s g (2 + 10").items().len(), 2);
    assert_eq!(
        c.cmd("XPENDING s nogroup"),
        err("NOGROUP No such key 's' or consumer group 'nogroup'")
    );
    assert_eq!(c.cmd("XPENDING s g - +"), err("ERR syntax error"));
    let groups = c.cmd("XINFO GROUPS s").items();
    assert_eq!(groups.len(), 1);
    assert_eq!(field(&groups[0], "consumers"), int(2));
    assert_eq!(field(&groups[0], "pending"), int(3));
    assert_eq!(field(&groups[0], "last-delivered-id"), bulk("4-0"));
    assert_eq!(field(&groups[0], "entries-read"), int(4));
    assert_eq!(field(&groups[0], "lag"), int(0));
    let consumers = c.cmd("XINFO CONSUMERS s g").items();
    assert_eq!(field(&consumers[0], "name"), bulk("alice"));
    assert_eq!(field(&consumers[0], "pending"), int(2));
    assert_eq!(
        c.cmd("XINFO CONSUMERS s nogroup"),
        err("NOGROUP No such consumer group 'nogroup' for key name 's'")
    );
    let full = c.cmd("XINFO STREAM s FULL COUNT 1");
    assert_eq!(field(&full, "entries").items().len(), 1);
    let group = field(&full, "groups").items()[0].clone();
    assert_eq!(field(&group, "pel-count"), int(3));
    assert_eq!(field(&group, "pending").items().len(), 1);
    assert_eq!(c.cmd("XGROUP CREATECONSUMER s g carol"), int(1));
    assert_eq!(c.cmd("XGROUP CREATECONSUMER s g carol"), int(0));
    assert_eq!(c.cmd("XGROUP DELCONSUMER s g alice"), int(2));
    assert_eq!(
        c.cmd("XGROUP SETID s nogroup 0"),
        err("NOGROUP No such consumer group 'nogroup' for key name 's'")
    );
    assert_eq!(c.cmd("XGROUP SETID s g 0 ENTRIESREAD 0"), Frame::ok());
    assert_eq!(
        c.cmd("XGROUP SETID s g 0 ENTRIESREAD -2"),
        err("ERR value for ENTRIESREAD must be positive or -1")
    );
    assert_eq!(
        c.cmd("XGROUP FOO s"),
        err("ERR unknown subcommand 'FOO'. Try XGROUP HELP.")
    );
    assert_eq!(c.cmd("XGROUP DESTROY s g"), int(1));
    assert_eq!(c.cmd("XGROUP DESTROY s g"), int(0));
    assert_eq!(
        c.cmd("XREADGROUP GROUP g alice STREAMS s >"),
        err("NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with GROUP option")
    );
    assert_eq!(
        c.cmd("XREADGROUP GROUP g alice STREAMS s $"),
        err("NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with GROUP option")
    );
    assert_eq!(
        c.cmd("XREADGROUP STREAMS s >"),
        err("ERR wrong number of arguments for 'xreadgroup' command")
    );
}

// Proves XCLAIM (min idle, FORCE, JUSTID, RETRYCOUNT, LASTID, deleted entries) and
// XAUTOCLAIM (cursor, COUNT, JUSTID, deleted entries) as Redis 7.0 answers them.
#[test]
fn claims_answer_as_redis() {
    let server = TestServer::start();
    let mut c = server.client();
    c.cmd("XGROUP CREATE s g 0 MKSTREAM");
    for ms in 1..=5 {
        c.cmd(&format!("XADD s {ms} f {ms}"));
    }
    c.cmd("XREADGROUP GROUP g alice STREAMS s >");
    assert_eq!(
        c.cmd("XCLAIM s g bob 3600000 1"),
        Frame::Array(vec![]),
        "not idle long enough"
    );
    assert_eq!(
        c.cmd("XCLAIM s g bob 0 1 2"),
        entries(&[("1-0", &["f", "1"]), ("2-0", &["f", "2"])])
    );
    assert_eq!(
        c.cmd("XCLAIM s g bob 0 3 JUSTID RETRYCOUNT 7 LASTID 9"),
        Frame::Array(vec![bulk("3-0")])
    );
    let row = c.cmd("XPENDING s g 3 3 1").items()[0].items();
    assert_eq!((row[1].clone(), row[3].clone()), (bulk("bob"), int(7)));
    assert_eq!(
        field(&c.cmd("XINFO GROUPS s").items()[0], "last-delivered-id"),
        bulk("9-0")
    );
    c.cmd("XDEL s 4");
    assert_eq!(
        c.cmd("XCLAIM s g bob 0 4"),
        Frame::Array(vec![]),
        "a deleted entry is dropped"
    );
    assert_eq!(c.cmd("XPENDING s g").items()[0], int(4));
    c.cmd("XACK s g 5");
    assert_eq!(
        c.cmd("XCLAIM s g carol 0 5 FORCE JUSTID"),
        Frame::Array(vec![bulk("5-0")])
    );
    assert_eq!(
        c.cmd("XCLAIM s g bob x 1"),
        err("ERR Invalid min-idle-time argument for XCLAIM")
    );
    assert_eq!(
        c.cmd("XCLAIM s g bob 0 1 FOO"),
        err("ERR Unrecognized XCLAIM option 'FOO'")
    );
    assert_eq!(
        c.cmd("XCLAIM s nogroup bob 0 1"),
        err("NOGROUP No such key 's' or consumer group 'nogroup'")
    );
    c.cmd("XADD s 10 f 10");
    c.cmd("XREADGROUP GROUP g alice STREAMS s >");
    c.cmd("XDEL s 2");
    assert_eq!(
        c.cmd("XAUTOCLAIM s g dave 0 0 COUNT 2 JUSTID"),
        Frame::Array(vec![
            bulk("3-0"),
            Frame::Array(vec![bulk("1-0")]),
            Frame::Array(vec![bulk("2-0")]),
        ])
    );
    assert_eq!(
        c.cmd("XAUTOCLAIM s g dave 0 3-0"),
        Frame::Array(vec![
            bulk("0-0"),
            entries(&[
                ("3-0", &["f", "3"]),
                ("5-0", &["f", "5"]),
                ("10-0", &["f", "10"])
            ]),
            Frame::Array(vec![]),
        ])
    );
    assert_eq!(
        c.cmd("XAUTOCLAIM s g dave 0 0 COUNT 0"),
        err("ERR COUNT must be > 0")
    );
}

// Proves XREAD answers synchronously (several streams, `$`, COUNT), and XINFO/XREAD errors.
#[test]
fn xread_answers_as_redis() {
    let server = TestServer::start();
    let mut c = server.client();
    c.cmd("XADD a 1 f 1");
    c.cmd("XADD a 2 f 2");
    c.cmd("XADD b 3 f 3");
    assert_eq!(
        c.cmd("XREAD COUNT 1 STREAMS a b missing 0 0 0"),
        Frame::Array(vec![
            stream("a", &[("1-0", &["f", "1"])]),
            stream("b", &[("3-0", &["f", "3"])]),
        ])
    );
    assert_eq!(c.cmd("XREAD STREAMS a $"), Frame::NullArray);
    assert_eq!(
        c.cmd("XREAD STREAMS a b 0"),
        err(
            "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be \
             specified."
        )
    );
    assert_eq!(
        c.cmd("XREAD STREAMS a >"),
        err(
            "ERR The > ID can be specified only when calling XREADGROUP using the GROUP \
             <group> <consumer> option."
        )
    );
    assert_eq!(
        c.cmd("XREAD GROUP g c STREAMS a 0"),
        err("ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.")
    );
    assert_eq!(
        c.cmd("XREAD BLOCK -1 STREAMS a 0"),
        err("ERR timeout is negative")
    );
    assert_eq!(
        c.cmd("XREAD BLOCK x STREAMS a 0"),
        err("ERR timeout is not an integer or out of range")
    );
    c.cmd("SET str v");
    assert_eq!(c.cmd("XREAD STREAMS str 0"), err(WRONGTYPE));
    assert_eq!(c.cmd("XINFO STREAM missing"), err("ERR no such key"));
    assert_eq!(
        c.cmd("XINFO STREAM a FOO"),
        err("ERR unknown subcommand or wrong number of arguments for 'STREAM'. Try XINFO HELP.")
    );
    c.cmd("HELLO 3");
    assert_eq!(
        c.cmd("XREAD STREAMS a 1"),
        Frame::Map(vec![(bulk("a"), entries(&[("2-0", &["f", "2"])]))])
    );
}

// Proves a blocked XREAD is woken by an XADD from another connection, every reader of the
// key at once, with `$` meaning the last ID when it blocked; a timeout answers a null; MULTI
// does not block.
#[test]
fn blocked_xread_is_woken_by_xadd() {
    let server = TestServer::start();
    let mut c = server.client();
    c.cmd("XADD s 1 f 1");
    let mut readers = [server.client(), server.client()];
    send(&mut readers[0], "XREAD BLOCK 0 STREAMS s $");
    send(&mut readers[1], "XREAD BLOCK 0 STREAMS other s 0 1");
    wait_for_blocked(&mut c, 2);
    assert_eq!(c.cmd("XADD s 2 f 2"), bulk("2-0"));
    for reader in &mut readers {
        assert_eq!(
            reader.read_frame_within(Duration::from_secs(5)),
            Some(Frame::Array(vec![stream("s", &[("2-0", &["f", "2"])])]))
        );
    }
    wait_for_blocked(&mut c, 0);
    let started = Instant::now();
    assert_eq!(c.cmd("XREAD BLOCK 50 STREAMS s $"), Frame::NullArray);
    assert!(started.elapsed() >= Duration::from_millis(50));
    c.cmd("MULTI");
    c.cmd("XREAD BLOCK 0 STREAMS s $");
    assert_eq!(c.cmd("EXEC"), Frame::Array(vec![Frame::NullArray]));
}

// Proves a blocked XREADGROUP is served by an XADD (entries after the group's last ID), and
// fails when its group is destroyed or its key deleted, as Redis 7.0 unblocks it.
#[test]
fn blocked_xreadgroup_is_served_or_fails() {
    let server = TestServer::start();
    let mut c = server.client();
    c.cmd("XGROUP CREATE s g $ MKSTREAM");
    let mut reader = server.client();
    send(&mut reader, "XREADGROUP GROUP g alice BLOCK 0 STREAMS s >");
    wait_for_blocked(&mut c, 1);
    c.cmd("XADD s 7 f v");
    assert_eq!(
        reader.read_frame_within(Duration::from_secs(5)),
        Some(Frame::Array(vec![stream("s", &[("7-0", &["f", "v"])])]))
    );
    assert_eq!(c.cmd("XPENDING s g").items()[0], int(1));

    send(&mut reader, "XREADGROUP GROUP g alice BLOCK 0 STREAMS s >");
    wait_for_blocked(&mut c, 1);
    c.cmd("XGROUP DESTROY s g");
    assert_eq!(
        reader.read_frame_within(Duration::from_secs(5)),
        Some(err(
            "NOGROUP the consumer group this client was blocked on no longer exists"
        ))
    );

    c.cmd("XGROUP CREATE s g $");
    send(&mut reader, "XREADGROUP GROUP g alice BLOCK 0 STREAMS s >");
    wait_for_blocked(&mut c, 1);
    c.cmd("DEL s");
    assert_eq!(
        reader.read_frame_within(Duration::from_secs(5)),
        Some(err("UNBLOCKED the stream key no longer exists"))
    );
    wait_for_blocked(&mut c, 0);
}

// Proves the stream commands are in the command table with Redis' arity, flags and keys,
// and an XREADGROUP's keys come after STREAMS (movable keys).
#[test]
fn command_info_matches_redis() {
    let server = TestServer::start();
    let mut c = server.client();
    let info = c.cmd("COMMAND INFO xadd xread xreadgroup xlen");
    let rows = info.items();
    assert_eq!(rows[0].items()[1], int(-5));
    assert_eq!(
        rows[0].items()[2],
        Frame::Array(vec![
            Frame::Simple("write".into()),
            Frame::Simple("denyoom".into()),
            Frame::Simple("fast".into())
        ])
    );
    assert_eq!(rows[1].items()[1], int(-4));
    assert!(
        rows[1].items()[2]
            .items()
            .contains(&Frame::Simple("movablekeys".into()))
    );
    assert_eq!(rows[2].items()[1], int(-7));
    assert_eq!(rows[3].items()[3], int(1));
}
