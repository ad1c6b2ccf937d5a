//! Client-side caching over real sockets: CLIENT TRACKING in default, OPTIN, BCAST and
//! NOLOOP modes with RESP3 push invalidations, REDIRECT to a RESP2 subscriber, broken
//! redirects, flushes, writes by another protocol and by expiration, and the listeners that
//! exist only while someone tracks.

#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::{Client, Frame, TestServer};
use weft_core::EventKind;

/// How long a test waits to be sure no push arrives.
const QUIET: Duration = Duration::from_millis(150);

fn bulk(text: &str) -> Frame {
    Frame::bulk(text)
}

fn resp3(server: &TestServer) -> Client {
    let mut client = server.client();
    assert!(matches!(client.cmd("HELLO 3"), Frame::Map(_)));
    client
}

/// The RESP3 invalidation of `keys`.
fn invalidate(keys: &[&str]) -> Frame {
    Frame::Push(vec![
        bulk("invalidate"),
        Frame::Array(keys.iter().map(|key| bulk(key)).collect()),
    ])
}

/// Asserts nothing more arrives for a while.
fn assert_quiet(client: &mut Client) {
    if let Some(frame) = client.read_frame_within(QUIET) {
        panic!("unexpected frame {frame:?}");
    }
}

fn client_id(client: &mut Client) -> i64 {
    client.cmd("CLIENT ID").int()
}

/// `PUT /rest/v2/caches/default/{key}`; returns the status line.
fn rest_put(addr: SocketAddr, key: &str, value: &str) -> String {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "PUT /rest/v2/caches/default/{key} HTTP/1.1\r\nHost: weft\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{value}",
        value.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response.lines().next().unwrap_or_default().to_owned()
}

// Proves default mode: keys read by a RESP3 tracking client are invalidated once when
// another connection writes them (a later write sends nothing until the key is read
// again), other keys are not, and the push comes before the next reply.
#[test]
fn default_mode_invalidates_keys_read_once() {
    let server = TestServer::start();
    let mut tracker = resp3(&server);
    let mut writer = server.client();
    assert_eq!(tracker.cmd("CLIENT TRACKING ON"), Frame::ok());
    assert_eq!(tracker.cmd("GET k"), Frame::Null);
    assert_eq!(tracker.cmd("MGET k2 k3").items().len(), 2);
    assert_eq!(writer.cmd("SET k 1"), Frame::ok());
    assert_eq!(tracker.read_frame(), invalidate(&["k"]));
    assert_eq!(writer.cmd("SET k 2"), Frame::ok());
    assert_eq!(writer.cmd("SET untracked 2"), Frame::ok());
    assert_quiet(&mut tracker);
    // Pushes queued while the client was idle come before the reply to its next command.
    assert_eq!(writer.cmd("DEL k3"), Frame::Integer(0));
    assert_eq!(writer.cmd("SET k3 v"), Frame::ok());
    assert_eq!(writer.cmd("SET k2 v"), Frame::ok());
    std::thread::sleep(QUIET);
    assert_eq!(tracker.read_frame(), invalidate(&["k3"]));
    assert_eq!(tracker.read_frame(), invalidate(&["k2"]));
    assert_eq!(tracker.cmd("PING"), Frame::Simple("PONG".into()));
    // Data-structure commands are tracked too.
    assert_eq!(tracker.cmd("HGET h f"), Frame::Null);
    assert_eq!(writer.cmd("HSET h f v"), Frame::Integer(1));
    assert_eq!(tracker.read_frame(), invalidate(&["h"]));
}

// Proves a client's own write to a key it tracks is invalidated after the write's reply
// (Redis 7), and not at all with NOLOOP.
#[test]
fn own_writes_invalidate_after_the_reply_unless_noloop() {
    let server = TestServer::start();
    let mut c = resp3(&server);
    assert_eq!(c.cmd("CLIENT TRACKING ON"), Frame::ok());
    assert_eq!(c.cmd("GET mine"), Frame::Null);
    assert_eq!(c.cmd("SET mine 1"), Frame::ok());
    assert_eq!(c.read_frame(), invalidate(&["mine"]));
    assert_eq!(c.cmd("CLIENT TRACKING ON NOLOOP"), Frame::ok());
    assert_eq!(c.cmd("GET mine"), Frame::bulk("1"));
    assert_eq!(c.cmd("SET mine 2"), Frame::ok());
    assert_quiet(&mut c);
    // NOLOOP only skips the client's own writes.
    assert_eq!(c.cmd("GET mine"), Frame::bulk("2"));
    assert_eq!(server.client().cmd("SET mine 3"), Frame::ok());
    assert_eq!(c.read_frame(), invalidate(&["mine"]));
}

// Proves writes through another protocol (REST PUT), deletion, and expiration all
// invalidate a tracked key.
#[test]
fn writes_by_rest_deletes_and_expiry_invalidate() {
    let server = TestServer::start();
    let mut tracker = resp3(&server);
    let mut writer = server.client();
    assert_eq!(tracker.cmd("CLIENT TRACKING ON"), Frame::ok());
    assert_eq!(tracker.cmd("GET viarest"), Frame::Null);
    let status = rest_put(server.addr, "viarest", "hello");
    assert!(
        status.contains(" 204") || status.contains(" 200"),
        "{status}"
    );
    assert_eq!(tracker.read_frame(), invalidate(&["viarest"]));
    assert_eq!(tracker.cmd("GET viarest"), Frame::bulk("hello"));
    assert_eq!(writer.cmd("DEL viarest"), Frame::Integer(1));
    assert_eq!(tracker.read_frame(), invalidate(&["viarest"]));
    assert_eq!(writer.cmd("SET brief v PX 50"), Frame::ok());
    assert_eq!(tracker.cmd("GET brief"), Frame::bulk("v"));
    std::thread::sleep(Duration::from_millis(120));
    // Reading the expired key (from anywhere) removes it: that is a change.
    assert_eq!(writer.cmd("GET brief"), Frame::NullBulk);
    assert_eq!(tracker.read_frame(), invalidate(&["brief"]));
}

// Proves OPTIN tracks only the command after CLIENT CACHING YES, and OPTOUT all but the
// command after CLIENT CACHING NO.
#[test]
fn optin_and_optout_follow_client_caching() {
    let server = TestServer::start();
    let mut writer = server.client();
    let mut c = resp3(&server);
    assert_eq!(c.cmd("CLIENT TRACKING ON OPTIN"), Frame::ok());
    assert_eq!(c.cmd("GET a"), Frame::Null);
    assert_eq!(c.cmd("CLIENT CACHING YES"), Frame::ok());
    assert_eq!(c.cmd("GET b"), Frame::Null);
    assert_eq!(c.cmd("GET c"), Frame::Null);
    assert_eq!(writer.cmd("MSET a 1 b 1 c 1"), Frame::ok());
    assert_eq!(c.read_frame(), invalidate(&["b"]));
    assert_quiet(&mut c);
    assert_eq!(c.cmd("CLIENT TRACKING OFF"), Frame::ok());
    assert_eq!(c.cmd("CLIENT TRACKING ON OPTOUT"), Frame::ok());
    assert_eq!(c.cmd("GET a"), Frame::bulk("1"));
    assert_eq!(c.cmd("CLIENT CACHING NO"), Frame::ok());
    assert_eq!(c.cmd("GET b"), Frame::bulk("1"));
    assert_eq!(writer.cmd("MSET a 2 b 2"), Frame::ok());
    assert_eq!(c.read_frame(), invalidate(&["a"]));
    assert_quiet(&mut c);
}

// Proves BCAST: every change to a key under a registered prefix is announced, with or
// without a prior read, and other keys are not.
#[test]
fn bcast_announces_changes_under_prefixes() {
    let server = TestServer::start();
    let mut writer = server.client();
    let mut c = resp3(&server);
    assert_eq!(
        c.cmd("CLIENT TRACKING ON BCAST PREFIX user: PREFIX cart:"),
        Frame::ok()
    );
    assert_eq!(writer.cmd("SET user:1 a"), Frame::ok());
    assert_eq!(c.read_frame(), invalidate(&["user:1"]));
    assert_eq!(writer.cmd("SET other 1"), Frame::ok());
    assert_eq!(writer.cmd("SET cart:9 x"), Frame::ok());
    assert_eq!(c.read_frame(), invalidate(&["cart:9"]));
    assert_eq!(writer.cmd("SET user:1 b"), Frame::ok());
    assert_eq!(c.read_frame(), invalidate(&["user:1"]));
    assert_quiet(&mut c);
    assert_eq!(
        c.cmd("CLIENT TRACKINGINFO"),
        Frame::Map(vec![
            (bulk("flags"), Frame::Set(vec![bulk("on"), bulk("bcast")])),
            (bulk("redirect"), Frame::Integer(0)),
            (
                bulk("prefixes"),
                Frame::Array(vec![bulk("cart:"), bulk("user:")])
            ),
        ])
    );
}

// Proves REDIRECT to a RESP2 client subscribed to __redis__:invalidate delivers
// invalidations as pub/sub messages (FLUSHDB as a null), and that once that client is gone
// a RESP3 tracking client is told its redirect broke.
#[test]
fn redirect_to_resp2_subscriber_and_broken_redirect() {
    let server = TestServer::start();
    let mut receiver = server.client();
    let receiver_id = client_id(&mut receiver);
    assert_eq!(
        receiver.cmd("SUBSCRIBE __redis__:invalidate").items()[2],
        Frame::Integer(1)
    );
    let mut tracker = server.client();
    assert_eq!(
        tracker.cmd(&format!("CLIENT TRACKING ON REDIRECT {receiver_id}")),
        Frame::ok()
    );
    assert_eq!(tracker.cmd("CLIENT GETREDIR"), Frame::Integer(receiver_id));
    assert_eq!(tracker.cmd("GET r"), Frame::NullBulk);
    assert_eq!(server.client().cmd("SET r 1"), Frame::ok());
    assert_eq!(
        receiver.read_frame(),
        Frame::Array(vec![
            bulk("message"),
            bulk("__redis__:invalidate"),
            Frame::Array(vec![bulk("r")])
        ])
    );
    assert_eq!(tracker.cmd("FLUSHDB"), Frame::ok());
    assert_eq!(
        receiver.read_frame(),
        Frame::Array(vec![
            bulk("message"),
            bulk("__redis__:invalidate"),
            Frame::NullBulk
        ])
    );
    // The tracking client itself (RESP2, redirecting) got nothing.
    assert_quiet(&mut tracker);
    drop(receiver);
    assert!(matches!(tracker.cmd("HELLO 3"), Frame::Map(_)));
    assert_eq!(tracker.cmd("GET r"), Frame::Null);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut writer = server.client();
    // Wait until the server has noticed the receiver left.
    loop {
        assert_eq!(writer.cmd("SET r 2"), Frame::ok());
        let frame = tracker.read_frame_within(QUIET);
        if let Some(frame) = frame {
            assert_eq!(
                frame,
                Frame::Push(vec![
                    bulk("tracking-redir-broken"),
                    Frame::Integer(receiver_id)
                ])
            );
            break;
        }
        assert!(Instant::now() < deadline, "no tracking-redir-broken push");
        assert_eq!(tracker.cmd("GET r"), Frame::bulk("2"));
    }
    let info = tracker.cmd("CLIENT TRACKINGINFO");
    let Frame::Map(fields) = info else {
        panic!("{info:?}")
    };
    assert_eq!(
        fields[0].1,
        Frame::Set(vec![bulk("on"), bulk("broken_redirect")])
    );
}

// Proves FLUSHALL tells every RESP3 tracking client that every key changed (a null key
// list), after the flushing client's own reply.
#[test]
fn flush_invalidates_everything() {
    let server = TestServer::start();
    let mut c = resp3(&server);
    let mut other = resp3(&server);
    assert_eq!(c.cmd("CLIENT TRACKING ON"), Frame::ok());
    assert_eq!(other.cmd("CLIENT TRACKING ON BCAST"), Frame::ok());
    assert_eq!(c.cmd("FLUSHALL"), Frame::ok());
    let all = Frame::Push(vec![bulk("invalidate"), Frame::Null]);
    assert_eq!(c.read_frame(), all);
    assert_eq!(other.read_frame(), all);
}

// Proves Redis' argument rules and texts for CLIENT TRACKING, CACHING, GETREDIR and
// TRACKINGINFO in RESP2.
#[test]
fn tracking_commands_answer_redis_errors() {
    let server = TestServer::start();
    let mut c = server.client();
    let err = Frame::error;
    assert_eq!(c.cmd("CLIENT GETREDIR"), Frame::Integer(-1));
    assert_eq!(
        c.cmd("CLIENT TRACKINGINFO"),
        Frame::Array(vec![
            bulk("flags"),
            Frame::Array(vec![bulk("off")]),
            bulk("redirect"),
            Frame::Integer(-1),
            bulk("prefixes"),
            Frame::Array(vec![]),
        ])
    );
    assert_eq!(
        c.cmd("CLIENT TRACKING"),
        err("ERR wrong number of arguments for 'client|tracking' command")
    );
    assert_eq!(c.cmd("CLIENT TRACKING maybe"), err("ERR syntax error"));
    assert_eq!(c.cmd("CLIENT TRACKING on bogus"), err("ERR syntax error"));
    assert_eq!(
        c.cmd("CLIENT TRACKING on PREFIX x"),
        err("ERR PREFIX option requires BCAST mode to be enabled")
    );
    assert_eq!(
        c.cmd("CLIENT TRACKING on REDIRECT 999999"),
        err("ERR The client ID you want redirect to does not exist")
    );
    assert_eq!(
        c.cmd("CLIENT TRACKING on REDIRECT x"),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        c.cmd("CLIENT TRACKING on BCAST OPTIN"),
        err("ERR OPTIN and OPTOUT are not compatible with BCAST")
    );
    assert_eq!(
        c.cmd("CLIENT TRACKING on OPTIN OPTOUT"),
        err("ERR You can't specify both OPTIN mode and OPTOUT mode")
    );
    assert_eq!(
        c.cmd("CLIENT TRACKING on BCAST PREFIX a PREFIX ab"),
        err(
            "ERR Prefix 'a' overlaps with another provided prefix 'ab'. Prefixes for a single client must not overlap."
        )
    );
    assert_eq!(
        c.cmd("CLIENT CACHING yes"),
        err(
            "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled"
        )
    );
    assert_eq!(c.cmd("CLIENT TRACKING on OPTIN"), Frame::ok());
    assert_eq!(
        c.cmd("CLIENT TRACKING on BCAST"),
        err(
            "ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode."
        )
    );
    assert_eq!(
        c.cmd("CLIENT TRACKING on OPTOUT"),
        err(
            "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode."
        )
    );
    assert_eq!(
        c.cmd("CLIENT CACHING no"),
        err("ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.")
    );
    assert_eq!(c.cmd("CLIENT CACHING maybe"), err("ERR syntax error"));
    assert_eq!(c.cmd("CLIENT CACHING yes"), Frame::ok());
    assert_eq!(
        c.cmd("CLIENT TRACKINGINFO").items()[1],
        Frame::Array(vec![bulk("on"), bulk("optin"), bulk("caching-yes")])
    );
    assert_eq!(c.cmd("CLIENT GETREDIR"), Frame::Integer(0));
    assert_eq!(
        c.cmd("CLIENT GETREDIR x"),
        err("ERR wrong number of arguments for 'client|getredir' command")
    );
}

// Proves the invalidation listener exists on a cache only while some client tracks:
// registered by CLIENT TRACKING ON, removed when the last tracking client turns it off or
// disconnects.
#[test]
fn listeners_exist_only_while_someone_tracks() {
    let server = TestServer::start();
    let cache = server.manager().cache("default").unwrap();
    assert!(!cache.has_listener_for(EventKind::Modified));
    let mut a = resp3(&server);
    let mut b = resp3(&server);
    assert_eq!(a.cmd("CLIENT TRACKING ON"), Frame::ok());
    assert!(cache.has_listener_for(EventKind::Modified));
    assert_eq!(b.cmd("CLIENT TRACKING ON BCAST"), Frame::ok());
    assert_eq!(a.cmd("CLIENT TRACKING OFF"), Frame::ok());
    assert!(cache.has_listener_for(EventKind::Modified));
    drop(b);
    let deadline = Instant::now() + Duration::from_secs(10);
    while cache.has_listener_for(EventKind::Modified) {
        assert!(Instant::now() < deadline, "listener left behind");
        std::thread::sleep(Duration::from_millis(10));
    }
    // RESET turns tracking off too.
    assert_eq!(a.cmd("CLIENT TRACKING ON"), Frame::ok());
    assert!(cache.has_listener_for(EventKind::Modified));
    assert_eq!(a.cmd("RESET"), Frame::Simple("RESET".into()));
    assert!(!cache.has_listener_for(EventKind::Modified));
}

// Proves a BCAST client hears one message per prefix for all the keys one command (MSET, an
// EXEC) changed, as Redis gathers them; a script that reads remembers the keys it declared,
// not those its commands named; and INFO counts what is tracked.
#[test]
fn bcast_batches_per_command_and_scripts_track_declared_keys() {
    let server = TestServer::start();
    let mut writer = server.client();
    let mut bcast = resp3(&server);
    assert_eq!(
        bcast.cmd("CLIENT TRACKING ON BCAST PREFIX a: PREFIX b:"),
        Frame::ok()
    );
    assert_eq!(writer.cmd("MSET a:1 1 a:2 2 c:1 3"), Frame::ok());
    assert_eq!(bcast.read_frame(), invalidate(&["a:1", "a:2"]));
    assert_quiet(&mut bcast);
    writer.cmd("MULTI");
    writer.cmd("INCR a:1");
    writer.cmd("INCR b:1");
    writer.cmd("INCR a:2");
    writer.cmd("EXEC");
    let mut heard = vec![bcast.read_frame(), bcast.read_frame()];
    heard.sort_by_key(|frame| format!("{frame:?}"));
    assert_eq!(heard, [invalidate(&["a:1", "a:2"]), invalidate(&["b:1"])]);
    assert_quiet(&mut bcast);

    let mut reader = resp3(&server);
    assert_eq!(reader.cmd("CLIENT TRACKING ON"), Frame::ok());
    // A script that only writes remembers nothing.
    reader.call(&["EVAL", "redis.call('set', 'k3', 'bar')", "2", "k1", "k2"]);
    writer.cmd("MSET k1 1 k2 1 k3 1");
    assert_quiet(&mut reader);
    // One that reads remembers its declared keys.
    reader.call(&["EVAL", "redis.call('get', 'k3')", "2", "k1", "k2"]);
    let info = writer.cmd("INFO stats").text();
    assert!(info.contains("tracking_total_keys:2"), "{info}");
    assert!(info.contains("tracking_total_items:2"), "{info}");
    assert!(info.contains("tracking_total_prefixes:2"), "{info}");
    writer.cmd("MSET k2 2 k1 2 k3 2");
    assert_eq!(reader.read_frame(), invalidate(&["k2"]));
    assert_eq!(reader.read_frame(), invalidate(&["k1"]));
    assert_quiet(&mut reader);

    // Lowering tracking-table-max-keys forgets (and invalidates) keys at once.
    reader.cmd("MGET x1 x2 x3");
    assert_eq!(
        writer.cmd("CONFIG SET tracking-table-max-keys 1"),
        Frame::ok()
    );
    for _ in 0..2 {
        assert!(matches!(reader.read_frame(), Frame::Push(_)));
    }
    assert!(
        writer
            .cmd("INFO stats")
            .text()
            .contains("tracking_total_keys:1")
    );
}
