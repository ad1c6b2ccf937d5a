//! Pub/sub over real sockets, RESP2 and RESP3: subscription replies and counts, messages
//! and pattern messages, PUBSUB introspection, the subscribed-RESP2 restrictions, RESET,
//! and a slow subscriber closed at `pubsub-output-bytes-max` while its publisher goes on.

#![allow(clippy::unwrap_used)]

mod common;

use std::io::Read;
use std::time::{Duration, Instant};

use common::{Client, Frame, TestServer};

fn bulk(text: &str) -> Frame {
    Frame::bulk(text)
}

fn int(n: i64) -> Frame {
    Frame::Integer(n)
}

/// A RESP2 subscription reply: `*3 kind name count`.
fn sub2(kind: &str, name: &str, count: i64) -> Frame {
    Frame::Array(vec![bulk(kind), bulk(name), int(count)])
}

/// A RESP3 subscription reply: `>3 kind name count`.
fn sub3(kind: &str, name: &str, count: i64) -> Frame {
    Frame::Push(vec![bulk(kind), bulk(name), int(count)])
}

fn hello3(client: &mut Client) {
    assert!(matches!(client.cmd("HELLO 3"), Frame::Map(_)));
}

/// Waits until PUBSUB NUMSUB reports `count` subscribers of `channel`.
fn wait_for_subscribers(client: &mut Client, channel: &str, count: i64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let reply = client.cmd(&format!("PUBSUB NUMSUB {channel}"));
        if reply.items()[1] == int(count) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{channel} never had {count} subscribers"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

// Proves SUBSCRIBE and UNSUBSCRIBE reply per channel with the running count (a repeated
// channel counted once), UNSUBSCRIBE without arguments leaves every channel and, when
// there is none, answers with a null channel, as Redis does.
#[test]
fn subscribe_and_unsubscribe_reply_with_running_counts() {
    let server = TestServer::start();
    let mut c = server.client();
    c.send_raw(&common::encode(&["SUBSCRIBE", "a", "b", "a"]));
    assert_eq!(c.read_frame(), sub2("subscribe", "a", 1));
    assert_eq!(c.read_frame(), sub2("subscribe", "b", 2));
    assert_eq!(c.read_frame(), sub2("subscribe", "a", 2));
    c.send_raw(&common::encode(&["PSUBSCRIBE", "x*"]));
    assert_eq!(c.read_frame(), sub2("psubscribe", "x*", 3));
    c.send_raw(&common::encode(&["UNSUBSCRIBE", "zz"]));
    assert_eq!(c.read_frame(), sub2("unsubscribe", "zz", 3));
    c.send_raw(&common::encode(&["UNSUBSCRIBE"]));
    let mut left = [c.read_frame(), c.read_frame()];
    left.sort_by_key(|frame| frame.items()[2].int());
    assert_eq!(left[1].items()[0], bulk("unsubscribe"));
    assert_eq!(left[1].items()[2], int(2));
    assert_eq!(left[0].items()[2], int(1));
    c.send_raw(&common::encode(&["PUNSUBSCRIBE"]));
    assert_eq!(c.read_frame(), sub2("punsubscribe", "x*", 0));
    c.send_raw(&common::encode(&["PUNSUBSCRIBE"]));
    assert_eq!(
        c.read_frame(),
        Frame::Array(vec![bulk("punsubscribe"), Frame::NullBulk, int(0)])
    );
    // No subscription left: back to normal commands.
    assert_eq!(c.cmd("PING"), Frame::Simple("PONG".into()));
}

// Proves PUBLISH reaches channel and pattern subscribers (RESP2 arrays, RESP3 pushes),
// counts every receiver, and that shard channels are apart from channels and patterns.
#[test]
fn publish_reaches_channel_and_pattern_subscribers() {
    let server = TestServer::start();
    let mut resp2 = server.client();
    let mut resp3 = server.client();
    hello3(&mut resp3);
    let mut publisher = server.client();
    assert_eq!(resp2.cmd("SUBSCRIBE news"), sub2("subscribe", "news", 1));
    assert_eq!(
        resp3.cmd("PSUBSCRIBE n[aeiou]ws"),
        sub3("psubscribe", "n[aeiou]ws", 1)
    );
    assert_eq!(publisher.cmd("PUBLISH news hello"), int(2));
    assert_eq!(
        resp2.read_frame(),
        Frame::Array(vec![bulk("message"), bulk("news"), bulk("hello")])
    );
    assert_eq!(
        resp3.read_frame(),
        Frame::Push(vec![
            bulk("pmessage"),
            bulk("n[aeiou]ws"),
            bulk("news"),
            bulk("hello")
        ])
    );
    assert_eq!(publisher.cmd("PUBLISH nothing x"), int(0));
    // Binary-safe channel and message.
    assert_eq!(
        resp2.call(&[&b"SUBSCRIBE"[..], b"bin\x00\xff"]).items()[2],
        int(2)
    );
    assert_eq!(
        publisher.call(&[&b"PUBLISH"[..], b"bin\x00\xff", b"\r\n\x00"]),
        int(1)
    );
    assert_eq!(
        resp2.read_frame(),
        Frame::Array(vec![
            bulk("message"),
            Frame::bulk(b"bin\x00\xff"),
            Frame::bulk(b"\r\n\x00")
        ])
    );
    // Shard channels: their own namespace, not matched by patterns.
    assert_eq!(resp3.cmd("SSUBSCRIBE news"), sub3("ssubscribe", "news", 1));
    assert_eq!(publisher.cmd("SPUBLISH news s"), int(1));
    assert_eq!(
        resp3.read_frame(),
        Frame::Push(vec![bulk("smessage"), bulk("news"), bulk("s")])
    );
    assert_eq!(publisher.cmd("PUBSUB SHARDNUMSUB news").items()[1], int(1));
    assert_eq!(publisher.cmd("PUBSUB NUMSUB news").items()[1], int(1));
    assert_eq!(resp3.cmd("SUNSUBSCRIBE"), sub3("sunsubscribe", "news", 0));
}

// Proves a RESP3 connection receives its own messages before PUBLISH's reply, as Redis
// writes them, and may run any command while subscribed.
#[test]
fn resp3_subscriber_publishing_to_itself_gets_message_then_count() {
    let server = TestServer::start();
    let mut c = server.client();
    hello3(&mut c);
    assert_eq!(c.cmd("SUBSCRIBE me"), sub3("subscribe", "me", 1));
    assert_eq!(c.cmd("SET k v"), Frame::ok());
    assert_eq!(
        c.cmd("PUBLISH me hi"),
        Frame::Push(vec![bulk("message"), bulk("me"), bulk("hi")])
    );
    assert_eq!(c.read_frame(), int(1));
    assert_eq!(c.cmd("PING"), Frame::Simple("PONG".into()));
}

// Proves a subscribed RESP2 connection may only (un)subscribe, PING (answered `*2 pong`),
// QUIT or RESET, with Redis 7's error (naming subcommands as `client|id`), that unknown
// commands and wrong arity keep their own errors, and that SUBSCRIBE run by EXEC puts the
// connection in that mode too.
#[test]
fn subscribed_resp2_connection_is_restricted() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(c.cmd("SUBSCRIBE ch"), sub2("subscribe", "ch", 1));
    let refused = |name: &str| {
        Frame::error(&format!(
            "ERR Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
        ))
    };
    assert_eq!(c.cmd("GET k"), refused("get"));
    assert_eq!(c.cmd("CLIENT ID"), refused("client|id"));
    assert_eq!(
        c.cmd("CLIENT nosuch"),
        Frame::error("ERR unknown subcommand 'nosuch'. Try CLIENT HELP.")
    );
    assert_eq!(
        c.cmd("GET"),
        Frame::error("ERR wrong number of arguments for 'get' command")
    );
    assert_eq!(c.cmd("PING"), Frame::Array(vec![bulk("pong"), bulk("")]));
    assert_eq!(
        c.cmd("PING hello"),
        Frame::Array(vec![bulk("pong"), bulk("hello")])
    );
    assert_eq!(c.cmd("RESET"), Frame::Simple("RESET".into()));
    assert_eq!(c.cmd("GET k"), Frame::NullBulk);

    // Through a transaction.
    let mut t = server.client();
    assert_eq!(t.cmd("MULTI"), Frame::ok());
    assert_eq!(t.cmd("SUBSCRIBE q"), Frame::Simple("QUEUED".into()));
    assert_eq!(t.cmd("EXEC"), Frame::Array(vec![sub2("subscribe", "q", 1)]));
    assert_eq!(t.cmd("GET k"), refused("get"));
    // EXEC refused there answers Redis' EXECABORT.
    assert_eq!(t.cmd("MULTI"), refused("multi"));
    assert_eq!(
        t.cmd("EXEC"),
        Frame::error(
            "EXECABORT Transaction discarded because of: Can't execute 'exec': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
        )
    );
}

// Proves PUBSUB CHANNELS (with a glob), NUMSUB and NUMPAT count server-wide, forget a
// channel with its last subscriber (RESET, a closed connection), and answer Redis' errors.
#[test]
fn pubsub_introspection_counts_and_forgets() {
    let server = TestServer::start_with("", "[caches.second]\nresp-database = 1\n");
    let mut a = server.client();
    let mut b = server.client();
    let mut admin = server.client();
    assert_eq!(
        a.cmd("SUBSCRIBE news.tech news.art"),
        sub2("subscribe", "news.tech", 1)
    );
    assert_eq!(a.read_frame(), sub2("subscribe", "news.art", 2));
    // Another database, same channels: pub/sub ignores databases.
    assert_eq!(b.cmd("SELECT 1"), Frame::ok());
    assert_eq!(
        b.cmd("SUBSCRIBE news.tech"),
        sub2("subscribe", "news.tech", 1)
    );
    assert_eq!(
        b.cmd("PSUBSCRIBE news.* x"),
        sub2("psubscribe", "news.*", 2)
    );
    assert_eq!(b.read_frame(), sub2("psubscribe", "x", 3));
    let mut channels: Vec<String> = admin
        .cmd("PUBSUB CHANNELS")
        .items()
        .iter()
        .map(Frame::text)
        .collect();
    channels.sort();
    assert_eq!(channels, ["news.art", "news.tech"]);
    assert_eq!(
        admin.cmd("PUBSUB CHANNELS *tech"),
        Frame::Array(vec![bulk("news.tech")])
    );
    assert_eq!(
        admin.cmd("PUBSUB NUMSUB news.tech news.art none"),
        Frame::Array(vec![
            bulk("news.tech"),
            int(2),
            bulk("news.art"),
            int(1),
            bulk("none"),
            int(0)
        ])
    );
    assert_eq!(admin.cmd("PUBSUB NUMSUB"), Frame::Array(vec![]));
    assert_eq!(admin.cmd("PUBSUB NUMPAT"), int(2));
    // b hears it twice: through its channel and through its pattern.
    assert_eq!(admin.cmd("PUBLISH news.tech m"), int(3));
    assert_eq!(a.read_frame().items()[0], bulk("message"));
    assert_eq!(b.read_frame().items()[0], bulk("message"));
    assert_eq!(b.read_frame().items()[0], bulk("pmessage"));
    assert_eq!(
        admin.cmd("PUBSUB CHANNELS a b"),
        Frame::error(
            "ERR unknown subcommand or wrong number of arguments for 'CHANNELS'. Try PUBSUB HELP."
        )
    );
    assert_eq!(
        admin.cmd("PUBSUB NUMPAT x"),
        Frame::error("ERR wrong number of arguments for 'pubsub|numpat' command")
    );
    assert_eq!(
        admin.cmd("PUBSUB nope"),
        Frame::error("ERR unknown subcommand 'nope'. Try PUBSUB HELP.")
    );
    assert_eq!(admin.cmd("PUBSUB HELP").items().len(), 14);
    // RESET drops b's subscriptions; closing a drops a's.
    assert_eq!(b.cmd("RESET"), Frame::Simple("RESET".into()));
    assert_eq!(admin.cmd("PUBSUB NUMPAT"), int(0));
    drop(a);
    wait_for_subscribers(&mut admin, "news.tech", 0);
    assert_eq!(admin.cmd("PUBSUB CHANNELS"), Frame::Array(vec![]));
}

// Proves a subscriber that stops reading is disconnected once its unread messages pass
// pubsub-output-bytes-max, while its publisher is never held up and keeps publishing.
#[test]
fn slow_subscriber_is_disconnected_and_publisher_goes_on() {
    // The reading subscriber may lag its publisher by up to 256 messages.
    const LIMIT_BYTES: usize = 4 << 20;
    const MESSAGE_BYTES: usize = 16 * 1024;
    const PUBLISHES_MAX: usize = 20_000;
    let server = TestServer::start_with(&format!("pubsub-output-bytes-max = {LIMIT_BYTES}"), "");
    let mut subscriber = server.client();
    assert_eq!(
        subscriber.cmd("SUBSCRIBE firehose"),
        sub2("subscribe", "firehose", 1)
    );
    // A second subscriber that reads everything stays connected.
    let mut reader = server.client();
    assert_eq!(
        reader.cmd("SUBSCRIBE firehose"),
        sub2("subscribe", "firehose", 1)
    );
    let mut reader_stream = reader.writer();
    let reader_thread = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        let mut total = 0usize;
        reader_stream
            .set_read_timeout(Some(Duration::from_secs(3)))
            .unwrap();
        while let Ok(n) = reader_stream.read(&mut buf) {
            if n == 0 {
                break;
            }
            total += n;
        }
        total
    });
    let mut publisher = server.client();
    let message = "m".repeat(MESSAGE_BYTES);
    let started = Instant::now();
    let mut published = 0;
    let mut dropped_at = None;
    while published < PUBLISHES_MAX {
        let receivers = publisher.call(&["PUBLISH", "firehose", &message]).int();
        published += 1;
        if receivers == 1 {
            dropped_at = Some(published);
            break;
        }
        assert_eq!(receivers, 2);
    }
    let dropped_at = dropped_at.expect("the slow subscriber was never disconnected");
    // Not before its unread messages could pass the limit.
    assert!(dropped_at * MESSAGE_BYTES > LIMIT_BYTES);
    for _ in 0..100 {
        assert_eq!(publisher.call(&["PUBLISH", "firehose", &message]).int(), 1);
    }
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "the publisher was held up: {:?}",
        started.elapsed()
    );
    // The slow subscriber finds its connection closed after what the sockets held.
    let mut stream = subscriber.writer();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut received = 0usize;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => received += n,
            Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(error) => panic!("the slow subscriber was not closed: {error}"),
        }
    }
    assert!(received < dropped_at * MESSAGE_BYTES);
    assert_eq!(publisher.cmd("PUBSUB NUMSUB firehose").items()[1], int(1));
    drop(reader);
    let read_by_reader = reader_thread.join().unwrap();
    assert!(read_by_reader >= (dropped_at + 100) * MESSAGE_BYTES);
}

// Proves a RESP2 client with CLIENT REPLY OFF still hears its (un)subscribe confirmations and
// its messages (Redis sends them whatever the reply mode), and that XREADGROUP and XCLAIM
// creating a consumer publish `xgroup-createconsumer`.
#[test]
fn subscriptions_under_reply_off_and_consumer_creation_events() {
    let server = TestServer::start();
    let mut admin = server.client();
    assert_eq!(
        admin.cmd("CONFIG SET notify-keyspace-events Kt"),
        Frame::ok()
    );
    let mut sub = server.client();
    sub.send_raw(b"*3\r\n$6\r\nCLIENT\r\n$5\r\nREPLY\r\n$3\r\nOFF\r\n");
    assert_eq!(sub.cmd("PSUBSCRIBE *"), sub2("psubscribe", "*", 1));
    admin.cmd("XGROUP CREATE s g $ MKSTREAM");
    admin.cmd("XADD s 1 f v");
    admin.cmd("XREADGROUP GROUP g alice STREAMS s >");
    admin.cmd("XREADGROUP GROUP g alice STREAMS s >");
    admin.cmd("XCLAIM s g bob 0 1-0 FORCE");
    let event = |name: &str| {
        Frame::Array(vec![
            bulk("pmessage"),
            bulk("*"),
            bulk("__keyspace@0__:s"),
            bulk(name),
        ])
    };
    for name in [
        "xgroup-create",
        "xadd",
        "xgroup-createconsumer",
        "xgroup-createconsumer",
    ] {
        assert_eq!(sub.read_frame(), event(name));
    }
    assert!(sub.read_frame_within(Duration::from_millis(150)).is_none());
}
