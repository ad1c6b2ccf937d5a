//! End-to-end tests of every RESP command over a real socket: replies and error texts as
//! Redis 7 gives them.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashSet;
use std::time::Duration;

use common::{Client, Frame, TestServer};

const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
const NOT_FLOAT: &str = "ERR value is not a valid float";
const SYNTAX: &str = "ERR syntax error";

fn int(n: i64) -> Frame {
    Frame::Integer(n)
}

fn bulk(text: &str) -> Frame {
    Frame::bulk(text)
}

fn err(text: &str) -> Frame {
    Frame::error(text)
}

fn sorted_texts(frame: &Frame) -> Vec<String> {
    let mut texts: Vec<String> = frame.items().iter().map(Frame::text).collect();
    texts.sort();
    texts
}

/// A server with a second cache on database 1.
fn two_databases() -> TestServer {
    TestServer::start_with("", "[caches.second]\nresp-database = 1\n")
}

// ---------------------------------------------------------------------------------------
// Connection and server commands

// Proves PING and ECHO reply as Redis does, with and without a message.
#[test]
fn ping_and_echo() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(c.cmd("PING"), Frame::Simple("PONG".into()));
    assert_eq!(c.cmd("ping hello"), bulk("hello"));
    assert_eq!(
        c.cmd("PING a b"),
        err("ERR wrong number of arguments for 'ping' command")
    );
    assert_eq!(
        c.call(&[&b"ECHO"[..], b"bin\x00\xffary"]),
        Frame::bulk(b"bin\x00\xffary")
    );
    assert_eq!(
        c.cmd("ECHO"),
        err("ERR wrong number of arguments for 'echo' command")
    );
}

// Proves HELLO switches between RESP2 and RESP3 and that maps and nulls change encoding.
#[test]
fn hello_switches_protocol() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(c.cmd("GET missing"), Frame::NullBulk);
    let hello = c.cmd("HELLO 3");
    let Frame::Map(pairs) = hello else {
        panic!("HELLO 3 is not a map: {hello:?}")
    };
    assert_eq!(pairs.len(), 8);
    assert!(pairs.contains(&(bulk("server"), bulk("redis"))));
    assert!(pairs.contains(&(bulk("proto"), int(3))));
    assert!(pairs.contains(&(bulk("version"), bulk("7.2.0"))));
    assert_eq!(c.cmd("GET missing"), Frame::Null);
    assert_eq!(c.cmd("CLIENT GETNAME"), Frame::Null);
    // INCRBYFLOAT answers a bulk string even in RESP3, like Redis.
    assert_eq!(c.cmd("INCRBYFLOAT f 1.5"), bulk("1.5"));
    assert!(matches!(c.cmd("INFO server"), Frame::Verbatim(format, _) if format == "txt"));
    let hello = c.cmd("HELLO 2");
    let items = hello.items();
    assert_eq!(items.len(), 16);
    assert!(items.windows(2).any(|w| w == [bulk("proto"), int(2)]));
    assert_eq!(c.cmd("GET missing"), Frame::NullBulk);
    assert_eq!(
        c.cmd("HELLO 4"),
        err("NOPROTO unsupported protocol version")
    );
    assert_eq!(
        c.cmd("HELLO x"),
        err("ERR Protocol version is not an integer or out of range")
    );
    assert_eq!(
        c.cmd("HELLO 3 FOO"),
        err("ERR Syntax error in HELLO option 'FOO'")
    );
    // HELLO without a version keeps the current one.
    assert!(
        c.cmd("HELLO")
            .items()
            .windows(2)
            .any(|w| w == [bulk("proto"), int(2)])
    );
}

// Proves AUTH's replies when no password is configured.
#[test]
fn auth_without_password() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(
        c.cmd("AUTH secret"),
        err(
            "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
        )
    );
    assert_eq!(c.cmd("AUTH default anything"), Frame::ok());
    assert_eq!(
        c.cmd("AUTH someone x"),
        err("WRONGPASS invalid username-password pair or user is disabled.")
    );
    assert_eq!(c.cmd("SET k v"), Frame::ok());
}

// Proves a configured password is required before any data command, and accepted by AUTH
// and by HELLO ... AUTH.
#[test]
fn auth_with_password() {
    let server = TestServer::start_with("password = \"s3cret\"", "");
    let mut c = server.client();
    assert_eq!(c.cmd("GET k"), err("NOAUTH Authentication required."));
    assert_eq!(c.cmd("PING"), err("NOAUTH Authentication required."));
    assert_eq!(
        c.cmd("AUTH wrong"),
        err("WRONGPASS invalid username-password pair or user is disabled.")
    );
    assert_eq!(c.cmd("SET k v"), err("NOAUTH Authentication required."));
    assert!(
        matches!(c.cmd("HELLO 3"), Frame::Error(e) if e.starts_with("NOAUTH HELLO must be called"))
    );
    assert_eq!(c.cmd("AUTH s3cret"), Frame::ok());
    assert_eq!(c.cmd("SET k v"), Frame::ok());

    let mut other = server.client();
    assert!(matches!(
        other.cmd("HELLO 3 AUTH default s3cret"),
        Frame::Map(_)
    ));
    assert_eq!(other.cmd("GET k"), bulk("v"));
    let mut third = server.client();
    assert_eq!(third.cmd("AUTH default s3cret"), Frame::ok());
    assert_eq!(third.cmd("GET k"), bulk("v"));

    // A HELLO that fails on its SETNAME authenticates nothing, as in Redis, where the
    // name is checked before the credentials.
    let mut fourth = server.client();
    assert_eq!(
        fourth.call(&["HELLO", "3", "AUTH", "default", "s3cret", "SETNAME", "a b"]),
        err("ERR Client names cannot contain spaces, newlines or special characters.")
    );
    assert_eq!(fourth.cmd("GET k"), err("NOAUTH Authentication required."));
}

// Proves QUIT replies OK and then the server closes the connection.
#[test]
fn quit_closes() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(c.cmd("QUIT"), Frame::ok());
    assert!(c.closed_by_server());
    assert_eq!(server.client().cmd("PING"), Frame::Simple("PONG".into()));
}

// Proves SELECT switches to the cache mapped to that database and refuses unmapped ones.
#[test]
fn select_databases() {
    let server = two_databases();
    let mut c = server.client();
    assert_eq!(c.cmd("SET k zero"), Frame::ok());
    assert_eq!(c.cmd("SELECT 1"), Frame::ok());
    assert_eq!(c.cmd("GET k"), Frame::NullBulk);
    assert_eq!(c.cmd("SET k one"), Frame::ok());
    assert_eq!(c.cmd("SELECT 16"), err("ERR DB index is out of range"));
    assert_eq!(c.cmd("SELECT -1"), err("ERR DB index is out of range"));
    assert_eq!(c.cmd("SELECT x"), err(NOT_INTEGER));
    // Redis reads the index as a C int before looking the database up.
    let int_range = "ERR value is out of range, value must between -2147483648 and 2147483647";
    assert_eq!(c.cmd("SELECT 2147483648"), err(int_range));
    assert_eq!(c.cmd("SELECT -2147483649"), err(int_range));
    assert_eq!(
        c.cmd("SELECT 2147483647"),
        err("ERR DB index is out of range")
    );
    assert_eq!(c.cmd("GET k"), bulk("one"));
    assert_eq!(c.cmd("SELECT 0"), Frame::ok());
    assert_eq!(c.cmd("GET k"), bulk("zero"));
    // Another connection starts on database 0.
    assert_eq!(server.client().cmd("GET k"), bulk("zero"));
}

// Proves INFO returns Redis-style sections, all by default or the ones asked for.
#[test]
fn info_sections() {
    let server = two_databases();
    let mut c = server.client();
    c.cmd("SET a 1");
    c.cmd("SET b 2");
    let all = c.cmd("INFO").text();
    for section in ["# Server", "# Clients", "# Memory", "# Stats", "# Keyspace"] {
        assert!(all.contains(section), "{section} missing from {all}");
    }
    assert!(all.contains("redis_version:7.2.0\r\n"));
    assert!(all.contains("db0:keys=2,expires=0,avg_ttl=0"));
    assert!(!all.contains("db1:"), "empty databases are not listed");
    let keyspace = c.cmd("INFO keyspace").text();
    assert!(keyspace.starts_with("# Keyspace\r\n") && !keyspace.contains("# Server"));
    let two = c.cmd("INFO server clients").text();
    assert!(
        two.contains("# Server") && two.contains("connected_clients:") && !two.contains("# Stats")
    );
    assert!(
        c.cmd("INFO stats")
            .text()
            .contains("total_commands_processed:")
    );
}

// Proves COMMAND COUNT, COMMAND INFO and COMMAND LIST describe the command table.
#[test]
fn command_introspection() {
    let server = TestServer::start();
    let mut c = server.client();
    let count = c.cmd("COMMAND COUNT").int();
    assert!(count >= 50, "{count}");
    // COMMAND LIST names subcommands too (`client|list`), COMMAND COUNT only commands.
    let listed = c.cmd("COMMAND LIST").items();
    let commands = listed
        .iter()
        .filter(|name| !name.text().contains('|'))
        .count();
    assert_eq!(commands, count as usize);
    assert!(listed.len() > commands);
    assert_eq!(c.cmd("COMMAND").items().len(), count as usize);
    let info = c.cmd("COMMAND INFO get nosuch mset").items();
    assert_eq!(info.len(), 3);
    let get = info[0].items();
    assert_eq!(get.len(), 10);
    assert_eq!(get[0], bulk("get"));
    assert_eq!(get[1], int(2));
    assert_eq!(get[3..6], [int(1), int(1), int(1)]);
    assert_eq!(info[1], Frame::NullArray);
    assert_eq!(info[2].items()[1], int(-3));
    assert_eq!(info[2].items()[5], int(2));
    assert_eq!(
        c.cmd("COMMAND NOPE"),
        err("ERR unknown subcommand 'NOPE'. Try COMMAND HELP.")
    );
    assert_eq!(
        sorted_texts(&c.cmd("COMMAND LIST FILTERBY PATTERN GET*")),
        ["get", "getbit", "getdel", "getex", "getrange", "getset"]
    );
    assert_eq!(
        c.cmd("COMMAND LIST FILTERBY pattern nosuch*").items(),
        Vec::<Frame>::new()
    );
    assert_eq!(
        c.cmd("COMMAND LIST FILTERBY MODULE json").items(),
        Vec::<Frame>::new()
    );
    assert_eq!(c.cmd("COMMAND LIST FILTERBY COLOR red"), err(SYNTAX));
    assert_eq!(c.cmd("COMMAND LIST FILTERBY PATTERN"), err(SYNTAX));
    assert_eq!(
        c.cmd("COMMAND COUNT x"),
        err("ERR wrong number of arguments for 'command|count' command")
    );
    // In RESP3, flags, ACL categories, tips, key specs and subcommands are all sets.
    assert!(matches!(c.cmd("HELLO 3"), Frame::Map(_)));
    let get = c.cmd("COMMAND INFO get").items()[0].items();
    assert!(
        matches!(&get[2], Frame::Set(flags) if !flags.is_empty()),
        "{get:?}"
    );
    assert_eq!(
        get[6],
        Frame::Set(vec![
            Frame::Simple("@read".into()),
            Frame::Simple("@string".into()),
            Frame::Simple("@fast".into())
        ])
    );
    assert_eq!(
        get[7..],
        [
            Frame::Set(Vec::new()),
            Frame::Set(Vec::new()),
            Frame::Set(Vec::new())
        ]
    );
}

// Proves CLIENT SETNAME/GETNAME/ID/SETINFO and their errors.
#[test]
fn client_subcommands() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(c.cmd("CLIENT GETNAME"), Frame::NullBulk);
    assert_eq!(c.cmd("CLIENT SETNAME worker-1"), Frame::ok());
    assert_eq!(c.cmd("CLIENT GETNAME"), bulk("worker-1"));
    assert_eq!(
        c.call(&["CLIENT", "SETNAME", "has space"]),
        err("ERR Client names cannot contain spaces, newlines or special characters.")
    );
    assert_eq!(c.call(&["CLIENT", "SETNAME", ""]), Frame::ok());
    assert_eq!(c.cmd("CLIENT GETNAME"), Frame::NullBulk);
    let id = c.cmd("CLIENT ID").int();
    assert!(id > 0);
    assert!(server.client().cmd("CLIENT ID").int() > id);
    assert_eq!(c.cmd("CLIENT SETINFO lib-name redis-py"), Frame::ok());
    assert_eq!(c.cmd("CLIENT SETINFO LIB-VER 5.0"), Frame::ok());
    assert_eq!(
        c.cmd("CLIENT SETINFO color blue"),
        err("ERR Unrecognized option 'color'")
    );
    assert_eq!(
        c.cmd("CLIENT SETNAME"),
        err("ERR wrong number of arguments for 'client|setname' command")
    );
    assert_eq!(
        c.cmd("CLIENT NOPE"),
        err("ERR unknown subcommand 'NOPE'. Try CLIENT HELP.")
    );
    assert!(c.cmd("CLIENT INFO").text().contains(&format!("id={id} ")));
    assert_eq!(
        c.call(&["CLIENT", "SETINFO", "lib-name", "has space"]),
        err("ERR lib-name cannot contain spaces, newlines or special characters.")
    );
    assert_eq!(
        c.cmd("CLIENT HELP x"),
        err("ERR wrong number of arguments for 'client|help' command")
    );
}

// Proves CLIENT INFO/LIST name the running command and LIST applies Redis' TYPE and ID
// filters and argument errors.
#[test]
fn client_info_and_list() {
    let server = TestServer::start();
    let mut c = server.client();
    let id = c.cmd("CLIENT ID").int();
    let info = c.cmd("CLIENT INFO").text();
    assert!(
        info.contains(" cmd=client|info ") && info.ends_with('\n'),
        "{info}"
    );
    let list = c.cmd("CLIENT LIST").text();
    assert!(
        list.starts_with(&format!("id={id} ")) && list.contains(" cmd=client|list "),
        "{list}"
    );
    // The lines differ only in the size of the request running (`qbuf`).
    let without_qbuf = |text: String| {
        text.split(' ')
            .filter(|field| !field.starts_with("qbuf="))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let list = without_qbuf(list);
    assert_eq!(without_qbuf(c.cmd("CLIENT LIST TYPE normal").text()), list);
    assert_eq!(c.cmd("CLIENT LIST TYPE pubsub").text(), "");
    assert_eq!(
        c.cmd("CLIENT LIST TYPE nope"),
        err("ERR Unknown client type 'nope'")
    );
    assert_eq!(
        without_qbuf(c.cmd(&format!("CLIENT LIST ID {id}")).text()),
        list
    );
    assert_eq!(
        c.cmd(&format!("CLIENT LIST ID {} -1", id + 1000)).text(),
        ""
    );
    assert_eq!(c.cmd("CLIENT LIST ID x"), err("ERR Invalid client ID"));
    assert_eq!(c.cmd("CLIENT LIST ID"), err(SYNTAX));
    assert_eq!(c.cmd("CLIENT LIST FOO bar"), err(SYNTAX));
}

// Proves DBSIZE counts the selected database, FLUSHDB clears only it, FLUSHALL clears all.
#[test]
fn dbsize_flushdb_flushall() {
    let server = two_databases();
    let mut c = server.client();
    c.cmd("MSET a 1 b 2 c 3");
    assert_eq!(c.cmd("DBSIZE"), int(3));
    c.cmd("SELECT 1");
    c.cmd("SET x 1");
    assert_eq!(c.cmd("DBSIZE"), int(1));
    assert_eq!(c.cmd("FLUSHDB"), Frame::ok());
    assert_eq!(c.cmd("DBSIZE"), int(0));
    c.cmd("SET x 1");
    c.cmd("SELECT 0");
    assert_eq!(c.cmd("DBSIZE"), int(3));
    assert_eq!(c.cmd("FLUSHDB NOW"), err(SYNTAX));
    assert_eq!(c.cmd("FLUSHALL ASYNC"), Frame::ok());
    assert_eq!(c.cmd("DBSIZE"), int(0));
    c.cmd("SELECT 1");
    assert_eq!(c.cmd("DBSIZE"), int(0));
    assert_eq!(c.cmd("FLUSHDB SYNC"), Frame::ok());
}

// Proves unknown commands and wrong arities get Redis' exact texts.
#[test]
fn unknown_commands_and_arity() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(
        c.cmd("FOO a b"),
        err("ERR unknown command 'FOO', with args beginning with: 'a' 'b' ")
    );
    assert_eq!(
        c.cmd("NOPE"),
        err("ERR unknown command 'NOPE', with args beginning with: ")
    );
    for (line, name) in [
        ("GET", "get"),
        ("get a b", "get"),
        ("SET k", "set"),
        ("SETNX k", "setnx"),
        ("SETEX k 1", "setex"),
        ("GETSET k", "getset"),
        ("MGET", "mget"),
        ("MSET k", "mset"),
        ("MSET a 1 b", "mset"),
        ("MSETNX a 1 b", "msetnx"),
        ("INCR", "incr"),
        ("INCRBY k", "incrby"),
        ("GETRANGE k 0", "getrange"),
        ("SETRANGE k 0", "setrange"),
        ("DEL", "del"),
        ("EXPIRE k", "expire"),
        ("TTL", "ttl"),
        ("RENAME a", "rename"),
        ("SCAN", "scan"),
        ("KEYS", "keys"),
        ("RANDOMKEY x", "randomkey"),
        ("DBSIZE x", "dbsize"),
    ] {
        assert_eq!(
            c.cmd(line),
            err(&format!(
                "ERR wrong number of arguments for '{name}' command"
            )),
            "{line}"
        );
    }
    // Command names are case-insensitive.
    assert_eq!(c.cmd("sEt k v"), Frame::ok());
    assert_eq!(c.cmd("GeT k"), bulk("v"));
}

// ---------------------------------------------------------------------------------------
// Strings

// Proves SET/GET with NX, XX, GET and KEEPTTL, and SET's option errors.
#[test]
fn set_options() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(c.cmd("SET k v1 NX"), Frame::ok());
    assert_eq!(c.cmd("SET k v2 NX"), Frame::NullBulk);
    assert_eq!(c.cmd("SET other v XX"), Frame::NullBulk);
    assert_eq!(c.cmd("SET k v3 XX GET"), bulk("v1"));
    assert_eq!(c.cmd("SET new v GET"), Frame::NullBulk);
    assert_eq!(c.cmd("SET k v4 EX 100"), Frame::ok());
    assert_eq!(c.cmd("SET k v5 KEEPTTL"), Frame::ok());
    assert!((99..=100).contains(&c.cmd("TTL k").int()));
    assert_eq!(c.cmd("SET k v6"), Frame::ok());
    assert_eq!(c.cmd("TTL k"), int(-1));
    assert_eq!(c.cmd("SET k v NX XX"), err(SYNTAX));
    assert_eq!(c.cmd("SET k v EX 10 PX 100"), err(SYNTAX));
    assert_eq!(c.cmd("SET k v EX"), err(SYNTAX));
    assert_eq!(
        c.cmd("SET k v EX 0"),
        err("ERR invalid expire time in 'set' command")
    );
    assert_eq!(c.cmd("SET k v EX x"), err(NOT_INTEGER));
    assert_eq!(c.cmd("SET k v EX 1 EX 100"), Frame::ok());
    assert!((99..=100).contains(&c.cmd("TTL k").int()));
    assert_eq!(c.cmd("GET k"), bulk("v"));
}

// Proves SETNX, GETSET (which drops the TTL) and GETDEL.
#[test]
fn setnx_getset_getdel() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(c.cmd("SETNX k a"), int(1));
    assert_eq!(c.cmd("SETNX k b"), int(0));
    assert_eq!(c.cmd("GET k"), bulk("a"));
    assert_eq!(c.cmd("EXPIRE k 100"), int(1));
    assert_eq!(c.cmd("GETSET k b"), bulk("a"));
    assert_eq!(c.cmd("TTL k"), int(-1));
    assert_eq!(c.cmd("GETSET fresh x"), Frame::NullBulk);
    assert_eq!(c.cmd("GETDEL k"), bulk("b"));
    assert_eq!(c.cmd("GETDEL k"), Frame::NullBulk);
    assert_eq!(c.cmd("EXISTS k"), int(0));
}

// Proves SETEX/PSETEX set value and TTL, with Redis' error texts for bad times.
#[test]
fn setex_psetex() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(c.cmd("SETEX k 100 v"), Frame::ok());
    assert_eq!(c.cmd("GET k"), bulk("v"));
    assert!((99..=100).contains(&c.cmd("TTL k").int()));
    assert_eq!(c.cmd("PSETEX p 50000 v"), Frame::ok());
    let pttl = c.cmd("PTTL p").int();
    assert!((49_000..=50_000).contains(&pttl), "{pttl}");
    assert_eq!(
        c.cmd("SETEX k 0 v"),
        err("ERR invalid expire time in 'setex' command")
    );
    assert_eq!(
        c.cmd("SETEX k -5 v"),
        err("ERR invalid expire time in 'setex' command")
    );
    assert_eq!(
        c.cmd("PSETEX k 0 v"),
        err("ERR invalid expire time in 'psetex' command")
    );
    assert_eq!(
        c.cmd("SETEX k 9223372036854775807 v"),
        err("ERR invalid expire time in 'setex' command")
    );
    assert_eq!(
        c.cmd("PSETEX k 9223372036854775807 v"),
        err("ERR invalid expire time in 'psetex' command")
    );
    assert_eq!(c.cmd("SETEX k ten v"), err(NOT_INTEGER));
    assert_eq!(c.cmd("GET k"), bulk("v"));
}

// Proves GETEX with each option, Redis' order of checks, and deletion on a past deadline.
#[test]
fn getex_options() {
    let server = TestServer::start();
    let mut c = server.client();
    c.cmd("SET k v");
    assert_eq!(c.cmd("GETEX k"), bulk("v"));
    assert_eq!(c.cmd("TTL k"), int(-1));
    assert_eq!(c.cmd("GETEX k EX 100"), bulk("v"));
    assert!((99..=100).contains(&c.cmd("TTL k").int()));
    assert_eq!(c.cmd("GETEX k PX 200000"), bulk("v"));
    assert!((199..=200).contains(&c.cmd("TTL k").int()));
    assert_eq!(c.cmd("GETEX k PERSIST"), bulk("v"));
    assert_eq!(c.cmd("TTL k"), int(-1));
    assert_eq!(c.cmd("GETEX k EXAT 4102444800"), bulk("v"));
    assert_eq!(c.cmd("EXPIRETIME k"), int(4_102_444_800));
    assert_eq!(c.cmd("GETEX k PXAT 4102444800123"), bulk("v"));
    let at = c.cmd("PEXPIRETIME k").int();
    assert!(
        (4_102_444_800_123..=4_102_444_800_133).contains(&at),
        "{at}"
    );
    assert_eq!(c.cmd("GETEX k PXAT 1000"), bulk("v"));
    assert_eq!(c.cmd("EXISTS k"), int(0));
    // Syntax first, then a missing key answers nil before the time is checked.
    assert_eq!(c.cmd("GETEX k KEEPTTL"), err(SYNTAX));
    assert_eq!(c.cmd("GETEX k EX 1 PX 1"), err(SYNTAX));
    assert_eq!(c.cmd("GETEX k PERSIST EX 1"), err(SYNTAX));
    assert_eq!(c.cmd("GETEX k EX 0"), Frame::NullBulk);
    c.cmd("SET k v");
    assert_eq!(
        c.cmd("GETEX k EX 0"),
        err("ERR invalid expire time in 'getex' command")
    );
    assert_eq!(c.cmd("GETEX k EX x"), err(NOT_INTEGER));
    assert_eq!(
        c.cmd("GETEX k EXAT 9223372036854775807"),
        err("ERR invalid expire time in 'getex' command")
    );
}

// Proves MGET/MSET/MSETNX, including MSETNX's all-or-nothing rule.
#[test]
fn mget_mset_msetnx() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(c.cmd("MSET a 1 b 2"), Frame::ok());
    assert_eq!(
        c.cmd("MGET a b c a").items(),
        vec![bulk("1"), bulk("2"), Frame::NullBulk, bulk("1")]
    );
    c.cmd("EXPIRE a 100");
    assert_eq!(c.cmd("MSET a 9"), Frame::ok());
    assert_eq!(c.cmd("TTL a"), int(-1), "MSET drops the TTL like SET");
    assert_eq!(c.cmd("MSETNX a 1 c 3"), int(0));
    assert_eq!(c.cmd("EXISTS c"), int(0));
    assert_eq!(c.cmd("MSETNX c 3 d 4"), int(1));
    assert_eq!(c.cmd("MGET c d").items(), vec![bulk("3"), bulk("4")]);
    assert_eq!(c.cmd("MSETNX e 1 e 2"), int(1));
    assert_eq!(c.cmd("GET e"), bulk("2"));
}

// Proves INCR/DECR/INCRBY/DECRBY: Redis' integer rules, overflow texts, TTL kept.
#[test]
fn incr_family() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(c.cmd("INCR n"), int(1));
    assert_eq!(c.cmd("INCRBY n 41"), int(42));
    assert_eq!(c.cmd("DECR n"), int(41));
    assert_eq!(c.cmd("DECRBY n 50"), int(-9));
    assert_eq!(c.cmd("GET n"), bulk("-9"));
    assert_eq!(c.cmd("DECR fresh"), int(-1));
    for bad in [
        "abc",
        " 1",
        "1 ",
        "01",
        "+1",
        "1.0",
        "",
        "99999999999999999999",
    ] {
        c.call(&["SET", "s", bad]);
        assert_eq!(c.cmd("INCR s"), err(NOT_INTEGER), "{bad:?}");
    }
    assert_eq!(c.cmd("INCRBY n x"), err(NOT_INTEGER));
    assert_eq!(c.cmd("INCRBY n 1.5"), err(NOT_INTEGER));
    assert_eq!(c.cmd("DECRBY n 9223372036854775808"), err(NOT_INTEGER));
    c.cmd("SET max 9223372036854775807");
    assert_eq!(
        c.cmd("INCR max"),
        err("ERR increment or decrement would overflow")
    );
    assert_eq!(c.cmd("GET max"), bulk("9223372036854775807"));
    c.cmd("SET min -9223372036854775808");
    assert_eq!(
        c.cmd("DECR min"),
        err("ERR increment or decrement would overflow")
    );
    assert_eq!(
        c.cmd("INCRBY min -1"),
        err("ERR increment or decrement would overflow")
    );
    assert_eq!(
        c.cmd("DECRBY n -9223372036854775808"),
        err("ERR decrement would overflow")
    );
    assert_eq!(c.cmd("INCRBY min 9223372036854775807"), int(-1));
    c.cmd("SET t 10 EX 100");
    assert_eq!(c.cmd("INCR t"), int(11));
    assert!(
        (99..=100).contains(&c.cmd("TTL t").int()),
        "INCR keeps the TTL"
    );
}

// Proves INCRBYFLOAT's formatting, errors and that it keeps the TTL.
#[test]
fn incrbyfloat() {
    let server = TestServer::start();
    let mut c = server.client();
    c.cmd("SET f 10.50");
    assert_eq!(c.cmd("INCRBYFLOAT f 0.1"), bulk("10.6"));
    assert_eq!(c.cmd("INCRBYFLOAT f -5"), bulk("5.6"));
    c.cmd("SET f 5.0e3");
    assert_eq!(c.cmd("INCRBYFLOAT f 2.0e2"), bulk("5200"));
    assert_eq!(c.cmd("GET f"), bulk("5200"));
    assert_eq!(c.cmd("INCRBYFLOAT new 3"), bulk("3"));
    assert_eq!(c.cmd("INCRBYFLOAT f abc"), err(NOT_FLOAT));
    assert_eq!(c.cmd("INCRBYFLOAT f nan"), err(NOT_FLOAT));
    c.cmd("SET s hello");
    assert_eq!(c.cmd("INCRBYFLOAT s 1"), err(NOT_FLOAT));
    assert_eq!(
        c.cmd("INCRBYFLOAT f inf"),
        err("ERR increment would produce NaN or Infinity")
    );
    // Redis adds in `long double` (x87 extended): no f64 rounding noise, and far more range.
    c.cmd("SET d 0.2");
    assert_eq!(c.cmd("INCRBYFLOAT d 0.1"), bulk("0.3"));
    c.cmd("SET d 1.1");
    assert_eq!(c.cmd("INCRBYFLOAT d 2.2"), bulk("3.3"));
    assert_eq!(c.cmd("INCRBYFLOAT e 200.1"), bulk("200.10000000000000001"));
    c.cmd("SET big 1.7e308");
    let sum = c.cmd("INCRBYFLOAT big 1.7e308").text();
    assert!(
        sum.len() == 309 && sum.starts_with("34000000000000000000627355605039519359"),
        "{sum}"
    );
    c.cmd("SET big 1e4932");
    assert_eq!(
        c.cmd("INCRBYFLOAT big 1e4932"),
        err("ERR increment would produce NaN or Infinity")
    );
    c.cmd("SET t 1 PX 100000");
    assert_eq!(c.cmd("INCRBYFLOAT t 0.25"), bulk("1.25"));
    assert!(
        (99..=100).contains(&c.cmd("TTL t").int()),
        "INCRBYFLOAT keeps the TTL"
    );
}

// Proves APPEND and STRLEN, and that APPEND keeps the TTL.
#[test]
fn append_strlen() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(c.cmd("APPEND k Hello"), int(5));
    assert_eq!(c.call(&["APPEND", "k", " World"]), int(11));
    assert_eq!(c.cmd("GET k"), bulk("Hello World"));
    assert_eq!(c.cmd("STRLEN k"), int(11));
    assert_eq!(c.cmd("STRLEN missing"), int(0));
    c.cmd("EXPIRE k 100");
    assert_eq!(c.cmd("APPEND k !"), int(12));
    assert!((99..=100).contains(&c.cmd("TTL k").int()));
    assert_eq!(c.call(&["APPEND", "e", ""]), int(0));
    assert_eq!(c.cmd("EXISTS e"), int(1));
}

// Proves OBJECT ENCODING follows Redis 7.0 for strings: `int` and `embstr` when written
// whole, `raw` once APPEND or SETRANGE edited them (however short), kept through EXPIRE
// and RENAME, and forgotten by the next whole write; and that OBJECT checks its
// subcommand and argument count before looking at the key.
#[test]
fn object_encoding_of_strings() {
    let server = TestServer::start();
    let mut c = server.client();
    c.cmd("SET n 12");
    assert_eq!(c.cmd("OBJECT ENCODING n"), bulk("int"));
    assert_eq!(c.cmd("APPEND n 3"), int(3));
    assert_eq!(c.cmd("OBJECT ENCODING n"), bulk("raw"));
    c.cmd("EXPIRE n 100");
    c.cmd("RENAME n m");
    assert_eq!(c.cmd("OBJECT ENCODING m"), bulk("raw"));
    assert_eq!(c.cmd("INCR m"), int(124));
    assert_eq!(c.cmd("OBJECT ENCODING m"), bulk("int"));
    assert_eq!(c.cmd("APPEND fresh abc"), int(3));
    assert_eq!(c.cmd("OBJECT ENCODING fresh"), bulk("embstr"));
    assert_eq!(c.cmd("SETRANGE padded 1 x"), int(2));
    assert_eq!(c.cmd("OBJECT ENCODING padded"), bulk("raw"));
    c.cmd("SET padded short");
    assert_eq!(c.cmd("OBJECT ENCODING padded"), bulk("embstr"));
    c.call(&["SET", "long", &"x".repeat(45)]);
    assert_eq!(c.cmd("OBJECT ENCODING long"), bulk("raw"));
    assert_eq!(c.cmd("OBJECT ENCODING missing"), Frame::NullBulk);
    assert_eq!(
        c.cmd("OBJECT ENCODING"),
        err("ERR wrong number of arguments for 'object|encoding' command")
    );
    assert_eq!(
        c.cmd("OBJECT NOPE k"),
        err("ERR unknown subcommand 'NOPE'. Try OBJECT HELP.")
    );
    assert_eq!(
        c.cmd("OBJECT"),
        err("ERR wrong number of arguments for 'object' command")
    );
}

// Proves GETRANGE/SUBSTR with Redis' negative-index rules.
#[test]
fn getrange_substr() {
    let server = TestServer::start();
    let mut c = server.client();
    c.call(&["SET", "k", "This is a string"]);
    assert_eq!(c.cmd("GETRANGE k 0 3"), bulk("This"));
    assert_eq!(c.cmd("GETRANGE k -3 -1"), bulk("ing"));
    assert_eq!(c.cmd("GETRANGE k 0 -1"), bulk("This is a string"));
    assert_eq!(c.cmd("GETRANGE k 10 100"), bulk("string"));
    assert_eq!(c.cmd("GETRANGE k -1 -5"), bulk(""));
    assert_eq!(c.cmd("GETRANGE k 5 2"), bulk(""));
    assert_eq!(c.cmd("GETRANGE k -100 -100"), bulk("T"));
    assert_eq!(c.cmd("SUBSTR k 0 3"), bulk("This"));
    assert_eq!(c.cmd("GETRANGE missing 0 -1"), bulk(""));
    assert_eq!(c.cmd("GETRANGE k a 1"), err(NOT_INTEGER));
    assert_eq!(c.cmd("GETRANGE k 0 1.5"), err(NOT_INTEGER));
}

// Proves SETRANGE: padding, TTL kept, empty values, and both size/offset errors.
#[test]
fn setrange() {
    let server = TestServer::start();
    let mut c = server.client();
    c.call(&["SET", "k", "Hello World"]);
    assert_eq!(c.cmd("SETRANGE k 6 Redis"), int(11));
    assert_eq!(c.cmd("GET k"), bulk("Hello Redis"));
    assert_eq!(c.cmd("SETRANGE pad 5 x"), int(6));
    assert_eq!(c.cmd("GET pad"), Frame::bulk(b"\0\0\0\0\0x"));
    assert_eq!(c.call(&["SETRANGE", "nothing", "3", ""]), int(0));
    assert_eq!(c.cmd("EXISTS nothing"), int(0));
    assert_eq!(c.call(&["SETRANGE", "k", "100", ""]), int(11));
    assert_eq!(c.cmd("SETRANGE k -1 x"), err("ERR offset is out of range"));
    assert_eq!(c.cmd("SETRANGE k x x"), err(NOT_INTEGER));
    let too_long = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";
    assert_eq!(c.cmd("SETRANGE k 536870911 xx"), err(too_long));
    assert_eq!(c.cmd("SETRANGE new 536870912 x"), err(too_long));
    assert_eq!(c.cmd("EXISTS new"), int(0));
    c.cmd("EXPIRE k 100");
    assert_eq!(c.cmd("SETRANGE k 0 J"), int(11));
    assert_eq!(c.cmd("GET k"), bulk("Jello Redis"));
    assert!((99..=100).contains(&c.cmd("TTL k").int()));
}

// ---------------------------------------------------------------------------------------
// Keys

// Proves DEL/UNLINK count removals and EXISTS/TOUCH count present keys (duplicates too).
#[test]
fn del_unlink_exists_touch() {
    let server = TestServer::start();
    let mut c = server.client();
    c.cmd("MSET a 1 b 2 c 3");
    assert_eq!(c.cmd("EXISTS a a b missing"), int(3));
    assert_eq!(c.cmd("TOUCH a b missing"), int(2));
    assert_eq!(c.cmd("DEL a missing"), int(1));
    assert_eq!(c.cmd("UNLINK b c c"), int(2));
    assert_eq!(c.cmd("EXISTS a b c"), int(0));
    assert_eq!(c.cmd("DEL a"), int(0));
}

// Proves TYPE answers string or none.
#[test]
fn type_of_keys() {
    let server = TestServer::start();
    let mut c = server.client();
    c.cmd("SET k v");
    assert_eq!(c.cmd("TYPE k"), Frame::Simple("string".into()));
    assert_eq!(c.cmd("TYPE missing"), Frame::Simple("none".into()));
}

// Proves EXPIRE/PEXPIRE/EXPIREAT/PEXPIREAT set deadlines that TTL/PTTL/EXPIRETIME read back.
#[test]
fn expire_and_ttl() {
    let server = TestServer::start();
    let mut c = server.client();
    c.cmd("SET k v");
    assert_eq!(c.cmd("TTL missing"), int(-2));
    assert_eq!(c.cmd("PTTL missing"), int(-2));
    assert_eq!(c.cmd("EXPIRETIME missing"), int(-2));
    assert_eq!(c.cmd("TTL k"), int(-1));
    assert_eq!(c.cmd("PEXPIRETIME k"), int(-1));
    assert_eq!(c.cmd("EXPIRE missing 100"), int(0));
    assert_eq!(c.cmd("EXPIRE k 100"), int(1));
    assert_eq!(
        c.cmd("TTL k"),
        int(100),
        "(ttl + 500) / 1000 rounds to nearest"
    );
    let pttl = c.cmd("PTTL k").int();
    assert!((99_000..=100_000).contains(&pttl), "{pttl}");
    assert_eq!(c.cmd("PEXPIRE k 2600"), int(1));
    assert_eq!(c.cmd("TTL k"), int(3), "2.6 s rounds to 3 s");
    assert_eq!(c.cmd("EXPIREAT k 4102444800"), int(1));
    assert_eq!(c.cmd("EXPIRETIME k"), int(4_102_444_800));
    let at = c.cmd("PEXPIRETIME k").int();
    assert!(
        (4_102_444_800_000..=4_102_444_800_010).contains(&at),
        "{at}"
    );
    assert_eq!(c.cmd("PEXPIREAT k 4102444800555"), int(1));
    assert_eq!(c.cmd("EXPIRETIME k"), int(4_102_444_801));
    assert_eq!(c.cmd("GET k"), bulk("v"), "the value is kept");
    assert_eq!(c.cmd("PERSIST k"), int(1));
    assert_eq!(c.cmd("PERSIST k"), int(0));
    assert_eq!(c.cmd("PERSIST missing"), int(0));
    assert_eq!(c.cmd("TTL k"), int(-1));
}

// Proves a non-positive relative time or a past absolute time deletes the key and returns 1.
#[test]
fn expire_in_the_past_deletes() {
    let server = TestServer::start();
    let mut c = server.client();
    for line in [
        "EXPIRE k 0",
        "EXPIRE k -10",
        "PEXPIRE k -1",
        "EXPIREAT k 1000",
        "PEXPIREAT k 0",
        "EXPIREAT k -5",
    ] {
        c.cmd("SET k v");
        assert_eq!(c.cmd(line), int(1), "{line}");
        assert_eq!(c.cmd("EXISTS k"), int(0), "{line}");
    }
}

// Proves NX XX GT LT decide like Redis 7, and their error texts.
#[test]
fn expire_conditions() {
    let server = TestServer::start();
    let mut c = server.client();
    c.cmd("SET k v");
    assert_eq!(c.cmd("EXPIRE k 100 XX"), int(0));
    assert_eq!(
        c.cmd("EXPIRE k 100 GT"),
        int(0),
        "no TTL counts as infinite for GT"
    );
    assert_eq!(c.cmd("EXPIRE k 100 NX"), int(1));
    assert_eq!(c.cmd("EXPIRE k 200 NX"), int(0));
    assert_eq!(c.cmd("EXPIRE k 200 XX"), int(1));
    assert_eq!(c.cmd("EXPIRE k 100 GT"), int(0));
    assert_eq!(c.cmd("EXPIRE k 300 GT"), int(1));
    assert_eq!(c.cmd("EXPIRE k 400 LT"), int(0));
    assert_eq!(c.cmd("EXPIRE k 50 lt"), int(1));
    assert_eq!(c.cmd("EXPIRE k 60 XX GT"), int(1));
    assert!((59..=60).contains(&c.cmd("TTL k").int()));
    c.cmd("PERSIST k");
    assert_eq!(
        c.cmd("EXPIRE k 70 LT"),
        int(1),
        "no TTL counts as infinite for LT"
    );
    let nx = "ERR NX and XX, GT or LT options at the same time are not compatible";
    assert_eq!(c.cmd("EXPIRE k 1 NX XX"), err(nx));
    assert_eq!(c.cmd("PEXPIRE k 1 GT NX"), err(nx));
    assert_eq!(
        c.cmd("EXPIRE k 1 GT LT"),
        err("ERR GT and LT options at the same time are not compatible")
    );
    assert_eq!(c.cmd("EXPIRE k 1 FOO"), err("ERR Unsupported option FOO"));
    assert_eq!(
        c.cmd("EXPIRE k 1 NX FOO"),
        err("ERR Unsupported option FOO")
    );
    assert_eq!(c.cmd("EXISTS k"), int(1));
}

// Proves EXPIRE-family argument errors: non-integers and overflow on conversion.
#[test]
fn expire_errors() {
    let server = TestServer::start();
    let mut c = server.client();
    c.cmd("SET k v");
    assert_eq!(c.cmd("EXPIRE k ten"), err(NOT_INTEGER));
    assert_eq!(c.cmd("EXPIRE k 1.5"), err(NOT_INTEGER));
    for (line, name) in [
        ("EXPIRE k 9223372036854775807", "expire"),
        ("EXPIRE k -9223372036854775807", "expire"),
        ("EXPIRE k 9223372036854775", "expire"),
        ("PEXPIRE k 9223372036854775807", "pexpire"),
        ("EXPIREAT k 9223372036854776", "expireat"),
    ] {
        assert_eq!(
            c.cmd(line),
            err(&format!("ERR invalid expire time in '{name}' command")),
            "{line}"
        );
    }
    assert_eq!(c.cmd("TTL k"), int(-1));
    // The largest absolute times are accepted.
    assert_eq!(c.cmd("PEXPIREAT k 9223372036854775807"), int(1));
    assert_eq!(c.cmd("PEXPIRETIME k"), int(9_223_372_036_854_775_807));
}

// Proves a key written with PX 1 is gone shortly after (one short real-time wait).
#[test]
fn short_expiry_end_to_end() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(c.cmd("SET k v PX 1"), Frame::ok());
    c.cmd("SET k2 v");
    assert_eq!(c.cmd("PEXPIRE k2 1"), int(1));
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(c.cmd("GET k"), Frame::NullBulk);
    assert_eq!(c.cmd("EXISTS k k2"), int(0));
    assert_eq!(c.cmd("TTL k2"), int(-2));
}

// Proves KEYS applies Redis glob patterns.
#[test]
fn keys_patterns() {
    let server = TestServer::start();
    let mut c = server.client();
    c.cmd("MSET user:1 a user:2 b admin:1 c hello d hallo e hxllo f h*llo g");
    assert_eq!(sorted_texts(&c.cmd("KEYS user:*")), ["user:1", "user:2"]);
    assert_eq!(c.cmd("KEYS *").items().len(), 7);
    assert_eq!(sorted_texts(&c.cmd("KEYS h[ae]llo")), ["hallo", "hello"]);
    assert_eq!(
        sorted_texts(&c.cmd("KEYS h[^e]llo")),
        ["h*llo", "hallo", "hxllo"]
    );
    assert_eq!(sorted_texts(&c.cmd("KEYS h[a-f]llo")), ["hallo", "hello"]);
    assert_eq!(
        sorted_texts(&c.cmd("KEYS h?llo")),
        ["h*llo", "hallo", "hello", "hxllo"]
    );
    assert_eq!(sorted_texts(&c.cmd("KEYS h\\*llo")), ["h*llo"]);
    assert_eq!(c.cmd("KEYS nomatch*").items(), Vec::<Frame>::new());
}

fn scan_all(c: &mut Client, options: &str) -> Vec<String> {
    let mut cursor = "0".to_owned();
    let mut keys = Vec::new();
    let mut calls = 0;
    loop {
        let reply = c.cmd(&format!("SCAN {cursor} {options}")).items();
        calls += 1;
        assert!(calls < 10_000, "SCAN does not terminate");
        cursor = reply[0].text();
        keys.extend(reply[1].items().iter().map(Frame::text));
        if cursor == "0" {
            return keys;
        }
    }
}

// Proves SCAN visits every key exactly once, with MATCH, COUNT and TYPE, and its errors.
#[test]
fn scan_cursor() {
    let server = TestServer::start();
    let mut c = server.client();
    let mut mset = vec!["MSET".to_owned()];
    for i in 0..1000 {
        mset.push(format!("key:{i}"));
        mset.push(i.to_string());
    }
    assert_eq!(c.call(&mset), Frame::ok());
    let keys = scan_all(&mut c, "COUNT 20");
    assert_eq!(keys.len(), 1000);
    assert_eq!(keys.iter().collect::<HashSet<_>>().len(), 1000);
    let first = c.cmd("SCAN 0 COUNT 1").items();
    assert_ne!(
        first[0].text(),
        "0",
        "a small COUNT takes more than one call"
    );
    let matched = scan_all(&mut c, "MATCH key:1?? COUNT 100");
    assert_eq!(matched.len(), 100);
    assert!(
        matched
            .iter()
            .all(|k| k.len() == 7 && k.starts_with("key:1"))
    );
    assert_eq!(scan_all(&mut c, "TYPE string COUNT 1000").len(), 1000);
    assert_eq!(scan_all(&mut c, "TYPE hash").len(), 0);
    let whole = c.cmd("SCAN 0 COUNT 100000").items();
    assert_eq!(
        (whole[0].text(), whole[1].items().len()),
        ("0".to_owned(), 1000)
    );
    let beyond = c.cmd("SCAN 123456789").items();
    assert_eq!(
        (beyond[0].text(), beyond[1].items().len()),
        ("0".to_owned(), 0)
    );
    assert_eq!(c.cmd("SCAN abc"), err("ERR invalid cursor"));
    assert_eq!(c.cmd("SCAN 1.5"), err("ERR invalid cursor"));
    assert_eq!(c.cmd("SCAN 0 COUNT 0"), err(SYNTAX));
    assert_eq!(c.cmd("SCAN 0 COUNT -1"), err(SYNTAX));
    assert_eq!(c.cmd("SCAN 0 COUNT x"), err(NOT_INTEGER));
    assert_eq!(c.cmd("SCAN 0 MATCH"), err(SYNTAX));
    assert_eq!(c.cmd("SCAN 0 FOO bar"), err(SYNTAX));
}

// Proves RANDOMKEY returns nil on an empty database and an existing key otherwise.
#[test]
fn randomkey() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(c.cmd("RANDOMKEY"), Frame::NullBulk);
    c.cmd("MSET a 1 b 2 c 3");
    let mut seen = HashSet::new();
    for _ in 0..200 {
        let key = c.cmd("RANDOMKEY").text();
        assert!(["a", "b", "c"].contains(&key.as_str()), "{key}");
        seen.insert(key);
    }
    assert!(seen.len() >= 2, "RANDOMKEY always returned {seen:?}");
}

// Proves RENAME/RENAMENX move the value with its TTL, and their special cases.
#[test]
fn rename_and_renamenx() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(c.cmd("RENAME missing x"), err("ERR no such key"));
    assert_eq!(c.cmd("RENAMENX missing x"), err("ERR no such key"));
    c.cmd("SET a 1 EX 100");
    assert_eq!(c.cmd("RENAME a b"), Frame::ok());
    assert_eq!(c.cmd("EXISTS a"), int(0));
    assert_eq!(c.cmd("GET b"), bulk("1"));
    assert!(
        (99..=100).contains(&c.cmd("TTL b").int()),
        "RENAME keeps the TTL"
    );
    assert_eq!(c.cmd("RENAME b b"), Frame::ok());
    assert_eq!(c.cmd("RENAMENX b b"), int(0));
    assert_eq!(c.cmd("GET b"), bulk("1"));
    c.cmd("SET c 3");
    assert_eq!(c.cmd("RENAMENX b c"), int(0));
    assert_eq!(c.cmd("GET b"), bulk("1"));
    assert_eq!(c.cmd("RENAMENX b d"), int(1));
    assert_eq!(c.cmd("GET d"), bulk("1"));
    assert_eq!(c.cmd("RENAME c d"), Frame::ok());
    assert_eq!(c.cmd("GET d"), bulk("3"));
    assert_eq!(
        c.cmd("TTL d"),
        int(-1),
        "the target's TTL is replaced by the source's"
    );
    assert_eq!(c.cmd("DBSIZE"), int(1));
}

// Proves read-modify-writes are atomic per key: concurrent INCRs and APPENDs from several
// connections lose no update.
#[test]
fn concurrent_read_modify_writes() {
    let server = TestServer::start();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let mut c = server.client();
            std::thread::spawn(move || {
                for _ in 0..250 {
                    assert!(matches!(c.cmd("INCR counter"), Frame::Integer(_)));
                    assert!(matches!(c.cmd("INCRBYFLOAT float 0.5"), Frame::Bulk(_)));
                    assert!(matches!(c.cmd("APPEND log x"), Frame::Integer(_)));
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let mut c = server.client();
    assert_eq!(c.cmd("GET counter"), bulk("1000"));
    assert_eq!(c.cmd("GET float"), bulk("500"));
    assert_eq!(c.cmd("STRLEN log"), int(1000));
}

// Proves RESP expiration commands keep Infinispan's max idle apart from the lifespan: EXPIRE
// changes only the lifespan, SET EX takes the cache's default max idle, RENAME carries both
// over, and PERSIST clears both.
#[test]
fn expiration_commands_respect_max_idle() {
    let server = TestServer::start_with(
        "",
        "[caches.default]\nresp-database = 0\n[caches.default.expiration]\nmax-idle = \"1h\"\n",
    );
    let mut c = server.client();
    let cache = server.manager().cache("default").unwrap();
    let metadata = |key: &str| cache.get_metadata(key.as_bytes()).unwrap().unwrap();
    let hour = Some(3_600_000);

    assert_eq!(c.cmd("SET k v"), Frame::ok());
    assert_eq!(
        metadata("k").max_idle_ms,
        hour,
        "plain SET takes the default max idle"
    );
    assert_eq!(c.cmd("EXPIRE k 100").int(), 1);
    // EXPIRE keeps an absolute deadline (now + 100 s) as a lifespan from the entry's write:
    // a millisecond may pass between the two clock readings.
    assert!(
        metadata("k")
            .lifespan_ms
            .is_some_and(|l| (99_999..=100_000).contains(&l))
    );
    assert_eq!(metadata("k").max_idle_ms, hour, "EXPIRE keeps the max idle");

    assert_eq!(c.cmd("SET s v EX 50"), Frame::ok());
    assert_eq!(metadata("s").lifespan_ms, Some(50_000));
    assert_eq!(
        metadata("s").max_idle_ms,
        hour,
        "SET EX takes the default max idle"
    );

    assert_eq!(c.cmd("RENAME k moved"), Frame::ok());
    let moved = metadata("moved");
    assert_eq!(moved.max_idle_ms, hour, "RENAME keeps the max idle");
    assert!(
        moved
            .lifespan_ms
            .is_some_and(|l| (99_000..=100_000).contains(&l))
    );

    assert_eq!(c.cmd("PERSIST moved").int(), 1);
    let persisted = metadata("moved");
    assert_eq!((persisted.lifespan_ms, persisted.max_idle_ms), (None, None));
    assert_eq!(c.cmd("TTL moved").int(), -1);
}

// Proves a server has Redis' 16 databases out of the box: each a cache of its own created
// when first selected, FLUSHALL and INFO keyspace covering them, and database 16 out of range.
#[test]
fn sixteen_databases_by_default() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(c.call(&["SET", "k", "zero"]), Frame::ok());
    assert_eq!(c.call(&["SELECT", "15"]), Frame::ok());
    assert_eq!(c.call(&["GET", "k"]), Frame::NullBulk);
    assert_eq!(c.call(&["SET", "k", "fifteen"]), Frame::ok());
    assert_eq!(
        c.call(&["SELECT", "16"]),
        err("ERR DB index is out of range")
    );
    let mut other = server.client();
    assert_eq!(other.call(&["SELECT", "15"]), Frame::ok());
    assert_eq!(other.call(&["GET", "k"]), bulk("fifteen"));
    let info = other.call(&["INFO", "keyspace"]).text();
    assert!(info.contains("db0:keys=1"), "{info}");
    assert!(info.contains("db15:keys=1"), "{info}");
    assert_eq!(other.call(&["FLUSHALL"]), Frame::ok());
    assert_eq!(other.call(&["DBSIZE"]), int(0));
    assert_eq!(c.call(&["SELECT", "0"]), Frame::ok());
    assert_eq!(c.call(&["DBSIZE"]), int(0));
}

// Proves COPY and MOVE as redis-server 7.0: values and structures copied with their time to
// live, REPLACE, another database, and Redis' answers for a missing source, an existing
// destination, the same object, a bad database and a syntax error.
#[test]
fn copy_and_move() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(c.cmd("SET s v EX 100"), Frame::ok());
    assert_eq!(c.cmd("RPUSH l a b"), int(2));
    assert_eq!(c.cmd("COPY s s2"), int(1));
    assert_eq!(c.cmd("GET s2"), bulk("v"));
    assert!(matches!(c.cmd("TTL s2"), Frame::Integer(t) if t > 90));
    assert_eq!(c.cmd("COPY s s2"), int(0));
    assert_eq!(c.cmd("COPY l s2 REPLACE"), int(1));
    assert_eq!(c.cmd("RPUSH s2 c"), int(3));
    assert_eq!(
        c.cmd("LLEN l"),
        int(2),
        "the copy is a structure of its own"
    );
    assert_eq!(c.cmd("COPY nothing x"), int(0));
    assert_eq!(
        c.cmd("COPY s s"),
        err("ERR source and destination objects are the same")
    );
    assert_eq!(c.cmd("COPY s s DB 3"), int(1));
    assert_eq!(c.cmd("COPY s x DB 16"), err("ERR DB index is out of range"));
    assert_eq!(c.cmd("COPY s x FOO"), err(SYNTAX));
    assert_eq!(c.cmd("MOVE l 3"), int(1));
    assert_eq!(c.cmd("EXISTS l"), int(0));
    assert_eq!(c.cmd("MOVE s 3"), int(0), "s exists in database 3");
    assert_eq!(c.cmd("EXISTS s"), int(1));
    assert_eq!(
        c.cmd("MOVE s 0"),
        err("ERR source and destination objects are the same")
    );
    assert_eq!(c.cmd("MOVE s x"), err(NOT_INTEGER));
    assert_eq!(c.cmd("MOVE nothing 3"), int(0));
    assert_eq!(c.cmd("SELECT 3"), Frame::ok());
    assert_eq!(
        c.cmd("LRANGE l 0 -1"),
        Frame::Array(vec![bulk("a"), bulk("b")])
    );
    assert_eq!(c.cmd("GET s"), bulk("v"));
}

// Proves SLOWLOG as redis-server 7.0: with `slowlog-log-slower-than 0` every command is kept,
// newest first, as [id, time, microseconds, arguments, client address, client name], long
// arguments and long argument lists cut as Redis cuts them; `slowlog-max-len` bounds it,
// RESET empties it, a negative threshold keeps nothing.
#[test]
fn slowlog_keeps_slow_commands() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(
        c.call(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]),
        Frame::ok()
    );
    assert_eq!(c.call(&["SLOWLOG", "RESET"]), Frame::ok());
    c.call(&["CLIENT", "SETNAME", "tester"]);
    let long = "x".repeat(200);
    c.call(&["SET", "k", &long]);
    let entries = c.call(&["SLOWLOG", "GET", "1"]);
    let entry = &entries.items()[0];
    let fields = entry.items();
    assert_eq!(fields.len(), 6);
    let arguments = fields[3].items();
    assert_eq!(arguments[0], bulk("SET"));
    assert_eq!(
        arguments[2].text(),
        format!("{}... (72 more bytes)", "x".repeat(128))
    );
    assert_eq!(fields[5], bulk("tester"));
    let many: Vec<String> = std::iter::once("DEL".to_owned())
        .chain((0..40).map(|i| format!("k{i}")))
        .collect();
    c.call(&many);
    let entries = c.call(&["SLOWLOG", "GET", "1"]);
    let arguments = entries.items()[0].items()[3].items();
    assert_eq!(arguments.len(), 32);
    assert_eq!(arguments[31], bulk("... (10 more arguments)"));
    assert!(matches!(c.call(&["SLOWLOG", "LEN"]), Frame::Integer(n) if n >= 2));
    assert_eq!(
        c.call(&["SLOWLOG", "GET", "-2"]),
        err("ERR count should be greater than or equal to -1")
    );
    assert_eq!(
        c.call(&["CONFIG", "SET", "slowlog-max-len", "2"]),
        Frame::ok()
    );
    for _ in 0..5 {
        c.call(&["PING"]);
    }
    assert_eq!(c.call(&["SLOWLOG", "LEN"]), int(2));
    assert_eq!(
        c.call(&["CONFIG", "SET", "slowlog-log-slower-than", "-1"]),
        Frame::ok()
    );
    assert_eq!(c.call(&["SLOWLOG", "RESET"]), Frame::ok());
    c.call(&["PING"]);
    assert_eq!(c.call(&["SLOWLOG", "LEN"]), int(0));
}

// Proves FUNCTION FLUSH and LIST answer as redis-server 7.0 with no libraries loaded (Weft
// loads none yet), and FUNCTION LOAD is an unknown subcommand rather than a pretence.
#[test]
fn function_flush_and_list() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(c.cmd("FUNCTION FLUSH"), Frame::ok());
    assert_eq!(c.cmd("FUNCTION FLUSH ASYNC"), Frame::ok());
    assert_eq!(
        c.cmd("FUNCTION FLUSH NOW"),
        err("ERR FUNCTION FLUSH only supports SYNC|ASYNC option")
    );
    assert_eq!(c.cmd("FUNCTION LIST"), Frame::Array(vec![]));
    assert_eq!(
        c.cmd("FUNCTION LOAD x"),
        err("ERR Missing library metadata")
    );
    assert_eq!(
        c.cmd("FUNCTION NOPE"),
        err("ERR unknown subcommand 'NOPE'. Try FUNCTION HELP.")
    );
}

// Proves ZMPOP as redis-server 7.0: from the first key holding a sorted set, MIN or MAX,
// COUNT, nil when every key is empty, and Redis' errors for numkeys, count, the end and a key
// of another type.
#[test]
fn zmpop_pops_from_the_first_sorted_set() {
    let server = TestServer::start();
    let mut c = server.client();
    assert_eq!(c.cmd("ZADD z 1 a 2 b 3 c"), int(3));
    let pair = |member: &str, score: &str| Frame::Array(vec![bulk(member), bulk(score)]);
    assert_eq!(
        c.cmd("ZMPOP 2 nokey z MIN COUNT 2"),
        Frame::Array(vec![
            bulk("z"),
            Frame::Array(vec![pair("a", "1"), pair("b", "2")])
        ])
    );
    assert_eq!(
        c.cmd("ZMPOP 1 z MAX"),
        Frame::Array(vec![bulk("z"), Frame::Array(vec![pair("c", "3")])])
    );
    assert_eq!(c.cmd("EXISTS z"), int(0), "emptied, removed");
    assert_eq!(c.cmd("ZMPOP 1 z MIN"), Frame::NullArray);
    assert_eq!(
        c.cmd("ZMPOP 0 z MIN"),
        err("ERR numkeys should be greater than 0")
    );
    assert_eq!(
        c.cmd("ZMPOP 1 z MIN COUNT 0"),
        err("ERR count should be greater than 0")
    );
    assert_eq!(c.cmd("ZMPOP 1 z MIDDLE"), err(SYNTAX));
    assert_eq!(c.cmd("SET s x"), Frame::ok());
    assert_eq!(c.cmd("ZADD z 1 a"), int(1));
    assert_eq!(
        c.cmd("ZMPOP 2 s z MIN"),
        err("WRONGTYPE Operation against a key holding the wrong kind of value")
    );
}
