//! The permission matrix: every predefined role (and a configured one, and a user in no
//! group) against operations of every protocol, each needing one permission. An operation
//! runs when one of the user's roles grants its permission, and is refused otherwise with
//! its protocol's error: RESP's NOPERM, Hot Rod's ISPN000287 error response, memcached's
//! `CLIENT_ERROR` (text) and authentication-error status (binary), HTTP 403. A cache that
//! admits only some roles refuses the others whatever they grant.

#![allow(clippy::unwrap_used, clippy::missing_panics_doc)]

mod common;

use std::time::Duration;

use common::auth::{
    binary, binary_answer, exchange, http_request, scram, users_file, whole_binary,
};
use common::hotrod::{HotRod, b, exec, get, put};
use common::{Client, Frame, TestServer};
use weft_hotrod::{Request, Status};

/// The permissions, as the test spells them (independently of the server's tables).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum P {
    Read,
    Write,
    BulkRead,
    BulkWrite,
    Listen,
    Monitor,
    Create,
    Admin,
    Lifecycle,
    /// Any authenticated user.
    Connect,
}

/// What each role grants, as Infinispan documents its predefined roles (and `reader`, this
/// test's own role).
fn grants(role: &str, permission: P) -> bool {
    use P::{Admin, BulkRead, BulkWrite, Connect, Create, Lifecycle, Listen, Monitor, Read, Write};
    if permission == Connect {
        return true;
    }
    let granted: &[P] = match role {
        "admin" => &[
            Read, Write, BulkRead, BulkWrite, Listen, Monitor, Create, Admin, Lifecycle,
        ],
        "deployer" => &[Read, Write, BulkRead, BulkWrite, Listen, Monitor, Create],
        "application" => &[Read, Write, BulkRead, BulkWrite, Listen, Monitor],
        "observer" => &[Read, BulkRead, Monitor],
        "monitor" => &[Monitor],
        "reader" => &[Read],
        _ => &[],
    };
    granted.contains(&permission)
}

const USERS: [(&str, &str); 7] = [
    ("ada", "admin"),
    ("dev", "deployer"),
    ("app", "application"),
    ("obs", "observer"),
    ("mon", "monitor"),
    ("rita", "reader"),
    ("nobody", "none"),
];

fn password(user: &str) -> String {
    format!("{user}-pw")
}

fn start(dir: &std::path::Path) -> TestServer {
    let users = users_file(
        dir,
        &[
            ("ada", "ada-pw", &["admin"]),
            ("dev", "dev-pw", &["deployer"]),
            ("app", "app-pw", &["application"]),
            ("obs", "obs-pw", &["observer"]),
            ("mon", "mon-pw", &["monitor"]),
            // A group mapped to a configured role.
            ("rita", "rita-pw", &["readers"]),
            // A group that grants no role.
            ("nobody", "nobody-pw", &["strangers"]),
        ],
    );
    TestServer::start_with(
        "",
        &format!(
            "[security]\nusers-file = \"{}\"\n\
             [security.roles]\nreader = [\"READ\"]\n\
             [security.group-roles]\nreaders = [\"reader\"]\n\
             [caches.default]\nresp-database = 0\n\
             [caches.secret]\nresp-database = 1\n\
             [caches.secret.security.authorization]\nroles = [\"admin\", \"observer\"]\n\
             [caches.open]\nresp-database = 2\n\
             [caches.open.security.authorization]\nenabled = false\n",
            users.display()
        ),
    )
}

/// A RESP connection authenticated as `user`.
fn resp(server: &TestServer, user: &str) -> Client {
    let mut client = server.client();
    assert_eq!(
        client.call(&["AUTH", user, &password(user)]),
        Frame::ok(),
        "{user}"
    );
    client
}

/// Whether a RESP reply is the refusal for want of a permission (anything else ran).
fn resp_denied(reply: &Frame, command: &str) -> bool {
    match reply {
        Frame::Error(text) if text.starts_with("NOPERM") => {
            assert_eq!(
                text,
                &format!("NOPERM this user has no permissions to run the '{command}' command")
            );
            true
        }
        _ => false,
    }
}

/// A Hot Rod connection authenticated as `user` with SCRAM-SHA-512.
fn hotrod(server: &TestServer, user: &str) -> HotRod {
    let mut client = HotRod::connect(server.addr, 31);
    let done = scram(&mut client, "SCRAM-SHA-512", user, &password(user));
    assert_eq!(done.status(), Status::Success, "{user}: {done:?}");
    client
}

fn hotrod_denied(response: &common::hotrod::Response) -> bool {
    response.status() == Status::ServerError && response.error_message().contains("ISPN000287")
}

/// A memcached text connection logged in as `user`.
fn memcached_text(server: &TestServer, user: &str) -> std::net::TcpStream {
    let mut stream = std::net::TcpStream::connect(server.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let credentials = format!("{user} {}", password(user));
    let login = format!("set login 0 0 {}\r\n{credentials}\r\n", credentials.len());
    assert_eq!(
        exchange(&mut stream, login.as_bytes(), crlf),
        b"STORED\r\n",
        "{user}"
    );
    stream
}

fn crlf(answer: &[u8]) -> bool {
    answer.ends_with(b"\r\n")
}

/// Sends a text command and reads its answer up to the line `last` ends with.
fn text_command(stream: &mut std::net::TcpStream, command: &str, done: &[u8]) -> String {
    let answer = exchange(stream, command.as_bytes(), |answer| {
        answer.ends_with(done) || answer.starts_with(b"CLIENT_ERROR") && crlf(answer)
    });
    String::from_utf8(answer).unwrap()
}

/// A memcached binary connection authenticated as `user` with SASL PLAIN.
fn memcached_binary(server: &TestServer, user: &str) -> std::net::TcpStream {
    let mut stream = std::net::TcpStream::connect(server.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let plain = format!("\0{user}\0{}", password(user));
    let answer = exchange(
        &mut stream,
        &binary(0x21, b"PLAIN", plain.as_bytes()),
        whole_binary,
    );
    assert_eq!(binary_answer(&answer).0, 0, "{user}");
    stream
}

/// A binary SET (flags 0, no expiration) of `key`.
fn binary_set(key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut packet = vec![0x80, 0x01];
    packet.extend_from_slice(&u16::try_from(key.len()).unwrap().to_be_bytes());
    packet.extend_from_slice(&[8, 0, 0, 0]);
    packet.extend_from_slice(
        &u32::try_from(8 + key.len() + value.len())
            .unwrap()
            .to_be_bytes(),
    );
    packet.extend_from_slice(&[0; 12]);
    packet.extend_from_slice(&[0; 8]);
    packet.extend_from_slice(key);
    packet.extend_from_slice(value);
    packet
}

fn binary_denied(answer: &[u8]) -> bool {
    let (status, body) = binary_answer(answer);
    status == 0x20 && String::from_utf8_lossy(&body).contains("ISPN000287")
}

fn rest(server: &TestServer, user: &str, method: &str, path: &str, body: &str) -> u16 {
    let pw = password(user);
    http_request(server, method, path, Some((user, &pw)), body).0
}

/// Checks one cell: `denied` is what the server did, `permission` what the operation needs.
fn check(
    failures: &mut Vec<String>,
    user: &str,
    role: &str,
    protocol: &str,
    operation: &str,
    permission: P,
    denied: bool,
) {
    let expected = !grants(role, permission);
    if denied != expected {
        failures.push(format!(
            "{protocol} {operation} ({permission:?}) as {user} ({role}): {}",
            if denied { "denied" } else { "allowed" }
        ));
    }
}

// Proves the matrix: role × operation × protocol, every cell allowed exactly when the role
// grants the operation's permission, and refused with the protocol's own error otherwise.
#[test]
fn every_role_may_do_what_its_permissions_grant_on_every_protocol() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut failures = Vec::new();
    for (user, role) in USERS {
        let mut cell = |protocol: &str, operation: &str, permission: P, denied: bool| {
            check(
                &mut failures,
                user,
                role,
                protocol,
                operation,
                permission,
                denied,
            );
        };

        // RESP.
        let mut client = resp(&server, user);
        let resp_cases: [(&[&str], &str, P); 11] = [
            (&["PING"], "ping", P::Connect),
            (&["ACL", "WHOAMI"], "acl|whoami", P::Connect),
            (&["SET", "k", "v"], "set", P::Write),
            (&["GET", "k"], "get", P::Read),
            (&["INCR", "n"], "incr", P::Write),
            (&["DBSIZE"], "dbsize", P::BulkRead),
            (&["KEYS", "*"], "keys", P::BulkRead),
            (&["PUBLISH", "ch", "m"], "publish", P::Write),
            (&["INFO"], "info", P::Monitor),
            (&["ACL", "LIST"], "acl|list", P::Admin),
            (&["FLUSHDB"], "flushdb", P::BulkWrite),
        ];
        for (command, name, permission) in resp_cases {
            let reply = client.call(command);
            cell("RESP", name, permission, resp_denied(&reply, name));
        }
        let mut subscriber = resp(&server, user);
        let reply = subscriber.call(&["SUBSCRIBE", "ch"]);
        cell(
            "RESP",
            "subscribe",
            P::Listen,
            resp_denied(&reply, "subscribe"),
        );
        // Refused while queueing: the transaction aborts, as Redis' does.
        let mut transaction = resp(&server, user);
        assert_eq!(transaction.call(&["MULTI"]), Frame::ok());
        let queued = transaction.call(&["SET", "t", "1"]);
        let executed = transaction.call(&["EXEC"]);
        if resp_denied(&queued, "set") {
            assert!(
                matches!(&executed, Frame::Error(text) if text.starts_with("EXECABORT")),
                "{executed:?}"
            );
        }
        cell("RESP", "multi/set", P::Write, resp_denied(&queued, "set"));

        // Hot Rod.
        let mut client = hotrod(&server, user);
        let made = format!("made-by-{user}");
        let hotrod_cases: [(Request<bytes::Bytes>, &str, P); 7] = [
            (Request::Ping, "PING", P::Connect),
            (put("k", "v"), "PUT", P::Write),
            (get("k"), "GET", P::Read),
            (Request::Size, "SIZE", P::BulkRead),
            (Request::Stats, "STATS", P::Monitor),
            (
                exec(
                    "@@cache@create",
                    &[
                        ("name", made.as_str()),
                        ("template", "org.infinispan.LOCAL"),
                    ],
                ),
                "@@cache@create",
                P::Create,
            ),
            (Request::Clear, "CLEAR", P::BulkWrite),
        ];
        for (request, name, permission) in hotrod_cases {
            let response = client.call(request);
            cell("Hot Rod", name, permission, hotrod_denied(&response));
        }
        let response = client.call(Request::AddClientListener {
            listener_id: b([7u8; 16]),
            include_current_state: false,
            filter: None,
            converter: None,
            raw_data: false,
            interests: 0,
        });
        cell(
            "Hot Rod",
            "ADD_CLIENT_LISTENER",
            P::Listen,
            hotrod_denied(&response),
        );

        // memcached, text.
        let mut text = memcached_text(&server, user);
        let text_cases: [(&str, &[u8], &str, P); 6] = [
            ("version\r\n", b"\r\n", "version", P::Connect),
            ("set m 0 0 1\r\nv\r\n", b"\r\n", "set", P::Write),
            ("get m\r\n", b"END\r\n", "get", P::Read),
            ("stats\r\n", b"END\r\n", "stats", P::Monitor),
            ("verbosity 1\r\n", b"\r\n", "verbosity", P::Admin),
            ("flush_all\r\n", b"\r\n", "flush_all", P::BulkWrite),
        ];
        for (command, done, name, permission) in text_cases {
            let answer = text_command(&mut text, command, done);
            let denied = answer.starts_with("CLIENT_ERROR ISPN000287");
            cell("memcached text", name, permission, denied);
        }

        // memcached, binary.
        let mut bin = memcached_binary(&server, user);
        let answer = exchange(&mut bin, &binary_set(b"m", b"v"), whole_binary);
        cell("memcached binary", "set", P::Write, binary_denied(&answer));
        let answer = exchange(&mut bin, &binary(0x00, b"m", b""), whole_binary);
        cell("memcached binary", "get", P::Read, binary_denied(&answer));
        let answer = exchange(&mut bin, &binary(0x08, b"", b""), whole_binary);
        cell(
            "memcached binary",
            "flush",
            P::BulkWrite,
            binary_denied(&answer),
        );

        // REST.
        let rest_cases: [(&str, String, &str, P); 9] = [
            ("GET", "/rest/v2/server".into(), "", P::Connect),
            ("PUT", "/rest/v2/caches/default/r".into(), "v", P::Write),
            ("GET", "/rest/v2/caches/default/r".into(), "", P::Read),
            (
                "GET",
                "/rest/v2/caches/default?action=keys".into(),
                "",
                P::BulkRead,
            ),
            ("GET", "/metrics".into(), "", P::Monitor),
            ("GET", "/rest/v2/container/stats".into(), "", P::Monitor),
            (
                "POST",
                format!("/rest/v2/caches/rest-made-by-{user}"),
                "{\"local-cache\":{}}",
                P::Create,
            ),
            (
                "POST",
                "/rest/v2/caches/default?action=clear".into(),
                "",
                P::BulkWrite,
            ),
            (
                "DELETE",
                format!("/rest/v2/caches/made-by-{user}"),
                "",
                P::Create,
            ),
        ];
        for (method, path, body, permission) in rest_cases {
            let status = rest(&server, user, method, &path, body);
            assert_ne!(status, 401, "{method} {path} as {user}");
            cell(
                "REST",
                &format!("{method} {path}"),
                permission,
                status == 403,
            );
        }
        if role != "admin" {
            // Stopping the server: only the administrator, tried last below.
            let status = rest(&server, user, "POST", "/rest/v2/server?action=stop", "");
            cell("REST", "stop", P::Lifecycle, status == 403);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let status = rest(&server, "ada", "POST", "/rest/v2/server?action=stop", "");
    assert_eq!(status, 204, "the administrator may stop the server");
}

// Proves a cache that admits only some roles refuses the others on every protocol, even
// for what their permissions grant elsewhere, and admits its roles as far as they go.
#[test]
fn a_cache_admits_only_its_roles() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let mut ada = resp(&server, "ada");
    assert_eq!(ada.call(&["SELECT", "1"]), Frame::ok());
    assert_eq!(ada.call(&["SET", "s", "secret"]), Frame::ok());

    // application: READ and WRITE elsewhere, nothing here.
    let mut app = resp(&server, "app");
    assert_eq!(app.call(&["SET", "s", "mine"]), Frame::ok());
    assert_eq!(app.call(&["SELECT", "1"]), Frame::ok());
    assert!(resp_denied(&app.call(&["GET", "s"]), "get"));
    let mut app_hotrod = hotrod(&server, "app");
    app_hotrod.cache = "secret".into();
    assert!(hotrod_denied(&app_hotrod.call(get("s"))));
    assert_eq!(
        rest(&server, "app", "GET", "/rest/v2/caches/secret/s", ""),
        403
    );
    // FLUSHALL needs BULK_WRITE on every database: refused for the one it may not touch.
    assert!(resp_denied(&app.call(&["FLUSHALL"]), "flushall"));

    // observer: admitted, as far as it goes (reads, not writes).
    let mut obs = resp(&server, "obs");
    assert_eq!(obs.call(&["SELECT", "1"]), Frame::ok());
    assert_eq!(obs.call(&["GET", "s"]), Frame::bulk("secret"));
    assert!(resp_denied(&obs.call(&["SET", "s", "x"]), "set"));
    assert_eq!(
        rest(&server, "obs", "GET", "/rest/v2/caches/secret/s", ""),
        200
    );

    // monitor: MONITOR elsewhere, but not admitted here.
    let mut mon_hotrod = hotrod(&server, "mon");
    assert_eq!(mon_hotrod.call(Request::Stats).status(), Status::Success);
    mon_hotrod.cache = "secret".into();
    assert!(hotrod_denied(&mon_hotrod.call(Request::Stats)));

    // The administrator is admitted, and FLUSHALL works for it.
    assert_eq!(ada.call(&["FLUSHALL"]), Frame::ok());
}

// Proves `/metrics` can be opened to scrapers without credentials, everything else still
// needing them, and that with `authorization = false` every authenticated user may do
// everything.
#[test]
fn metrics_may_be_anonymous_and_authorization_may_be_off() {
    let dir = tempfile::tempdir().unwrap();
    let users = users_file(dir.path(), &[("nobody", "nobody-pw", &[])]);
    let server = TestServer::start_with(
        "",
        &format!(
            "[security]\nusers-file = \"{}\"\nmetrics-anonymous = true\nauthorization = false\n",
            users.display()
        ),
    );
    assert_eq!(http_request(&server, "GET", "/metrics", None, "").0, 200);
    assert_eq!(
        http_request(&server, "GET", "/rest/v2/caches", None, "").0,
        401
    );
    let mut client = resp(&server, "nobody");
    assert_eq!(client.call(&["SET", "k", "v"]), Frame::ok());
    assert_eq!(client.call(&["FLUSHALL"]), Frame::ok());
}

// Proves a configuration naming a permission that does not exist, or mapping a group to a
// role that does not, refuses to start with a message that names it.
#[test]
fn bad_roles_refuse_to_start() {
    use weft_server::config::ServerConfig;
    let dir = tempfile::tempdir().unwrap();
    let users = users_file(dir.path(), &[("ada", "ada-pw", &["admin"])]);
    for (section, expected) in [
        (
            "[security.roles]\nr = [\"READS\"]\n",
            "`READS` is not a permission",
        ),
        (
            "[security.group-roles]\nops = [\"root\"]\n",
            "grants role `root`",
        ),
    ] {
        let text = format!(
            "[server]\nbind = \"127.0.0.1:0\"\n[security]\nusers-file = \"{}\"\n{section}",
            users.display()
        );
        let config = ServerConfig::parse("t.toml", &text).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let error = runtime
            .block_on(weft_server::Server::start(config))
            .err()
            .unwrap();
        assert!(format!("{error:#}").contains(expected), "{error:#}");
    }
}

// Proves the ways around the table a review found are closed: a REST `action` given twice is
// refused and an encoded one is read as the handlers read it; a Hot Rod iteration's id is
// unguessable and useless to another user; CLIENT TRACKING (told of every database's writes)
// needs LISTEN on every database; channels are the server's, whatever database is selected;
// GET_ALL needs BULK_READ, as Infinispan's.
#[test]
fn tricks_do_not_get_around_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());

    for path in [
        "/rest/v2/caches/default?action=stats&action=entries",
        "/rest/v2/caches/default?action=entries&action=stats",
    ] {
        assert_eq!(rest(&server, "mon", "GET", path, ""), 400, "{path}");
    }
    assert_eq!(
        rest(
            &server,
            "mon",
            "GET",
            "/rest/v2/caches/default?%61ction=entries",
            ""
        ),
        403
    );
    assert_eq!(
        rest(
            &server,
            "obs",
            "GET",
            "/rest/v2/caches/default?%61ction=entries",
            ""
        ),
        200
    );

    let mut ada = hotrod(&server, "ada");
    let started = ada.call(Request::IterationStart {
        segments: None,
        filter: None,
        batch_size: 10,
        metadata: false,
    });
    assert_eq!(started.status(), Status::Success);
    let id = started.reader().string().unwrap();
    assert_eq!(id.len(), 32, "128 random bits: {id}");
    let mut obs = hotrod(&server, "obs");
    let stolen = obs.call(Request::IterationNext { id: id.clone() });
    assert_eq!(stolen.status(), Status::InvalidIteration);
    assert_eq!(
        obs.call(Request::IterationEnd { id: id.clone() }).status(),
        Status::InvalidIteration
    );
    assert_eq!(
        ada.call(Request::IterationNext { id: id.clone() }).status(),
        Status::Success,
        "its owner goes on"
    );
    assert_eq!(
        ada.call(Request::IterationEnd { id }).status(),
        Status::Success
    );
    let get_all = Request::GetAll { keys: vec![b("k")] };
    assert!(hotrod_denied(
        &hotrod(&server, "rita").call(get_all.clone())
    ));
    assert_eq!(obs.call(get_all).status(), Status::Success);

    // `app` may listen to database 0 but not to `secret` (database 1).
    let mut app = resp(&server, "app");
    assert!(resp_denied(
        &app.call(&["CLIENT", "TRACKING", "ON", "BCAST"]),
        "client|tracking"
    ));
    let mut ada_resp = resp(&server, "ada");
    assert_eq!(
        ada_resp.call(&["CLIENT", "TRACKING", "ON", "BCAST"]),
        Frame::ok()
    );
    // `nobody` may do anything to `open` (authorization off for it), but channels are not
    // that database's: no subscribing or publishing from it.
    let mut nobody = resp(&server, "nobody");
    assert_eq!(nobody.call(&["SELECT", "2"]), Frame::ok());
    assert_eq!(nobody.call(&["SET", "mine", "v"]), Frame::ok());
    assert!(resp_denied(
        &nobody.call(&["PSUBSCRIBE", "*"]),
        "psubscribe"
    ));
    assert!(resp_denied(
        &nobody.call(&["PUBLISH", "ch", "forged"]),
        "publish"
    ));
}
