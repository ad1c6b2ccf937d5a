//! Authentication with a users file: RESP (AUTH, HELLO AUTH, ACL), REST (HTTP Basic, 401
//! with a challenge, anonymous health probes), Hot Rod (SASL SCRAM-SHA-256/512; PLAIN only
//! over TLS), and a users file changed while the server runs.

#![allow(clippy::unwrap_used, clippy::missing_panics_doc)]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::auth::{
    binary, binary_answer, exchange, http, http_request, scram, users_file, whole_binary,
};
use common::hotrod::{HotRod, b, get, put};
use common::{Frame, TestServer};
use weft_hotrod::{Request, Status};
use weft_security::users::{User, Users};

fn start(users: &Path) -> TestServer {
    TestServer::start_with(
        "",
        &format!("[security]\nusers-file = \"{}\"\n", users.display()),
    )
}

/// Infinispan 15.0's answer to a wrong SCRAM proof (captured from its server; see
/// docs/protocols.md).
const SCRAM_REFUSED: &str = "java.lang.SecurityException: ISPN028027: Invalid credentials\njavax.security.sasl.SaslException: ELY05055: Authentication rejected (invalid proof)";

fn error_text(frame: &Frame) -> String {
    match frame {
        Frame::Error(text) => text.clone(),
        other => panic!("not an error: {other:?}"),
    }
}

// Proves RESP clients must authenticate as a users-file user, with Redis' errors for no
// credentials and wrong ones, and that ACL WHOAMI/USERS report them.
#[test]
fn resp_clients_authenticate_as_users() {
    let dir = tempfile::tempdir().unwrap();
    let users = users_file(
        dir.path(),
        &[("alice", "alice-pw", &["admin"]), ("bob", "bob-pw", &[])],
    );
    let server = start(&users);
    let mut client = server.client();
    assert_eq!(
        error_text(&client.call(&["GET", "k"])),
        "NOAUTH Authentication required."
    );
    assert_eq!(
        error_text(&client.call(&["PING"])),
        "NOAUTH Authentication required."
    );
    let wrongpass = "WRONGPASS invalid username-password pair or user is disabled.";
    assert_eq!(
        error_text(&client.call(&["AUTH", "alice", "bob-pw"])),
        wrongpass
    );
    assert_eq!(
        error_text(&client.call(&["AUTH", "mallory", "alice-pw"])),
        wrongpass
    );
    assert_eq!(
        error_text(&client.call(&["AUTH", "alice-pw"])),
        wrongpass,
        "AUTH with one argument is the user `default`"
    );
    assert_eq!(client.call(&["AUTH", "alice", "alice-pw"]), Frame::ok());
    assert_eq!(client.call(&["SET", "k", "v"]), Frame::ok());
    assert_eq!(client.call(&["ACL", "WHOAMI"]), Frame::bulk("alice"));
    assert_eq!(
        client.call(&["ACL", "USERS"]),
        Frame::Array(vec![Frame::bulk("alice"), Frame::bulk("bob")])
    );
    let mut hello = server.client();
    let answer = hello.call(&["HELLO", "3", "AUTH", "bob", "wrong"]);
    assert_eq!(error_text(&answer), wrongpass);
    assert!(matches!(
        hello.call(&["HELLO", "3", "AUTH", "bob", "bob-pw"]),
        Frame::Map(_)
    ));
    // bob is in no group: no role, no permission (but who he is).
    assert_eq!(
        error_text(&hello.call(&["GET", "k"])),
        "NOPERM this user has no permissions to run the 'get' command"
    );
    assert_eq!(hello.call(&["ACL", "WHOAMI"]), Frame::bulk("bob"));
    // RESET forgets who the client was.
    assert_eq!(hello.call(&["RESET"]), Frame::Simple("RESET".into()));
    assert_eq!(
        error_text(&hello.call(&["GET", "k"])),
        "NOAUTH Authentication required."
    );
}

// Proves REST needs HTTP Basic credentials of a user (401 with a challenge otherwise), but
// health probes read the status anonymously.
#[test]
fn rest_clients_authenticate_with_basic() {
    let dir = tempfile::tempdir().unwrap();
    let users = users_file(dir.path(), &[("alice", "alice-pw", &["admin"])]);
    let server = start(&users);
    let (status, answer) = http(&server, "/rest/v2/caches", None);
    assert_eq!(status, 401, "{answer}");
    assert!(
        answer.contains("www-authenticate: Basic realm=\"weft\""),
        "{answer}"
    );
    assert_eq!(
        http(&server, "/rest/v2/caches", Some(("alice", "nope"))).0,
        401
    );
    assert_eq!(
        http(&server, "/rest/v2/caches", Some(("nobody", "alice-pw"))).0,
        401
    );
    assert_eq!(http(&server, "/metrics", None).0, 401);
    assert_eq!(
        http(&server, "/rest/v2/caches", Some(("alice", "alice-pw"))).0,
        200
    );
    assert_eq!(
        http(&server, "/rest/v2/container/health/status", None).0,
        200
    );
}

// Proves Hot Rod clients must authenticate with SASL before anything but PING, that SCRAM
// works with both hashes, that a wrong password is refused and the client may try again, and
// that PLAIN is not offered over plaintext.
#[test]
fn hotrod_clients_authenticate_with_scram() {
    let dir = tempfile::tempdir().unwrap();
    let users = users_file(dir.path(), &[("alice", "alice-pw", &["admin"])]);
    let server = start(&users);
    for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-512"] {
        let mut client = HotRod::connect(server.addr, 31);
        assert_eq!(client.call(Request::Ping).status(), Status::Success);
        let refused = client.call(put("k", "v"));
        assert_eq!(
            refused.error_message(),
            "java.lang.SecurityException: ISPN006017: Operation 'PUT' requires authentication"
        );
        let mechanisms = client.call(Request::AuthMechList);
        let mut reader = mechanisms.reader();
        let offered: Vec<String> = (0..reader.vint().unwrap())
            .map(|_| reader.string().unwrap())
            .collect();
        assert_eq!(offered, ["SCRAM-SHA-512", "SCRAM-SHA-256"]);
        let wrong = scram(&mut client, mechanism, "alice", "wrong-pw");
        assert_eq!(wrong.status(), Status::ServerError);
        assert_eq!(
            wrong.error_message(),
            SCRAM_REFUSED,
            "as Infinispan 15.0 answers"
        );
        // An unknown user is refused alike (at the same step: a decoy runs the exchange).
        let unknown = scram(&mut client, mechanism, "mallory", "wrong-pw");
        assert_eq!(unknown.error_message(), SCRAM_REFUSED);
        assert!(
            client
                .call(get("k"))
                .error_message()
                .contains("requires authentication")
        );
        let done = scram(&mut client, mechanism, "alice", "alice-pw");
        let mut reader = done.reader();
        // As Infinispan: the server's signature goes with `complete = 0`, and the client,
        // having checked it, sends nothing more.
        assert_eq!(reader.u8().unwrap(), 0);
        assert!(reader.array().unwrap().starts_with(b"v="));
        assert_eq!(client.call(put("k", "v")).status(), Status::Success);
        assert_eq!(client.call(get("k")).value(), b"v");
    }
    let mut plain = HotRod::connect(server.addr, 31);
    let refused = plain.call(Request::Auth {
        mechanism: "PLAIN".to_owned(),
        response: b("\0alice\0alice-pw"),
    });
    assert_eq!(
        refused.error_message(),
        "java.lang.IllegalArgumentException: ISPN028028: Invalid mech 'PLAIN'"
    );
}

// Proves users added to the file while the server runs can authenticate within seconds,
// and removed ones cannot.
#[test]
fn the_users_file_is_followed_while_running() {
    let dir = tempfile::tempdir().unwrap();
    let users = users_file(dir.path(), &[("alice", "alice-pw", &["admin"])]);
    let server = start(&users);
    let mut file = Users::load(&users).unwrap();
    file.insert(User::new("carol", "carol-pw", ["application".to_owned()]).unwrap());
    file.remove("alice");
    file.save(&users).unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if server.client().call(&["AUTH", "carol", "carol-pw"]) == Frame::ok() {
            break;
        }
        assert!(Instant::now() < deadline, "carol was not picked up");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(matches!(
        server.client().call(&["AUTH", "alice", "alice-pw"]),
        Frame::Error(_)
    ));
}

// Proves memcached clients must authenticate: binary SASL (PLAIN and SCRAM listed; PLAIN
// used here) with memcached's status codes, and the text protocol's `set` login of
// memcached 1.6; everything else is refused until then.
#[test]
fn memcached_clients_authenticate() {
    let dir = tempfile::tempdir().unwrap();
    let users = users_file(dir.path(), &[("alice", "alice pw", &["admin"])]);
    let server = start(&users);

    let mut bin = std::net::TcpStream::connect(server.addr).unwrap();
    bin.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let refused = exchange(&mut bin, &binary(0x00, b"k", b""), whole_binary);
    assert_eq!(binary_answer(&refused).0, 0x20, "GET before authenticating");
    let mechanisms = exchange(&mut bin, &binary(0x20, b"", b""), whole_binary);
    assert_eq!(
        binary_answer(&mechanisms),
        (0, b"SCRAM-SHA-512 SCRAM-SHA-256 PLAIN".to_vec())
    );
    let wrong = exchange(
        &mut bin,
        &binary(0x21, b"PLAIN", b"\0alice\0nope"),
        whole_binary,
    );
    assert_eq!(binary_answer(&wrong).0, 0x20);
    let right = exchange(
        &mut bin,
        &binary(0x21, b"PLAIN", b"\0alice\0alice pw"),
        whole_binary,
    );
    assert_eq!(binary_answer(&right), (0, b"Authenticated".to_vec()));
    let miss = exchange(&mut bin, &binary(0x00, b"k", b""), whole_binary);
    assert_eq!(binary_answer(&miss).0, 0x01, "a miss once authenticated");

    let mut text = std::net::TcpStream::connect(server.addr).unwrap();
    text.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let crlf = |a: &[u8]| a.ends_with(b"\r\n");
    assert_eq!(
        exchange(&mut text, b"get k\r\n", crlf),
        b"CLIENT_ERROR unauthenticated\r\n"
    );
    assert_eq!(
        exchange(&mut text, b"set x 0 0 10\r\nalice nope\r\n", crlf),
        b"CLIENT_ERROR authentication failure\r\n"
    );
    assert_eq!(
        exchange(&mut text, b"set x 0 0 14\r\nalice alice pw\r\n", crlf),
        b"STORED\r\n"
    );
    assert_eq!(
        exchange(&mut text, b"set k 0 0 1\r\nv\r\n", crlf),
        b"STORED\r\n"
    );
    assert_eq!(
        exchange(&mut text, b"get k\r\n", |a| a.ends_with(b"END\r\n")),
        b"VALUE k 0 1\r\nv\r\nEND\r\n"
    );
}

// Proves protected mode: a client port or cluster port reachable from other machines without
// authentication refuses to start (saying what to do), unless users, a password, a cluster
// secret or cluster TLS protect it, or protected mode is switched off.
#[test]
fn protected_mode_refuses_open_ports() {
    use weft_server::config::ServerConfig;
    let refusal = |text: &str| {
        ServerConfig::parse("t.toml", text)
            .unwrap()
            .protected_mode_refusal()
    };
    assert_eq!(refusal(""), None, "the default binds loopback");
    let open = refusal("[server]\nbind = \"0.0.0.0:11222\"\n").unwrap();
    assert!(
        open.contains("weft user create") && open.contains("protected-mode = false"),
        "{open}"
    );
    assert_eq!(
        refusal("[server]\nbind = \"0.0.0.0:11222\"\n[security]\nusers-file = \"u.toml\"\n"),
        None
    );
    assert_eq!(
        refusal("[server]\nbind = \"0.0.0.0:11222\"\npassword = \"p\"\n"),
        None
    );
    assert_eq!(
        refusal("[server]\nbind = \"0.0.0.0:11222\"\n[security]\nprotected-mode = false\n"),
        None
    );
    let cluster = refusal("[server]\ncluster-listen = \"10.0.0.1:7800\"\n").unwrap();
    assert!(cluster.contains("cluster-secret"), "{cluster}");
    assert_eq!(
        refusal("[server]\ncluster-listen = \"10.0.0.1:7800\"\ncluster-secret = \"s\"\n"),
        None
    );
    assert_eq!(
        refusal("[server]\ncluster-listen = \"127.0.0.1:7800\"\n"),
        None
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let config = ServerConfig::parse("t.toml", "[server]\nbind = \"0.0.0.0:0\"\n").unwrap();
    let error = runtime
        .block_on(weft_server::Server::start(config))
        .map(|_| ())
        .unwrap_err();
    assert!(format!("{error:#}").contains("protected mode"), "{error:#}");
}

// Proves an authenticated RESP client reaches keys other members own: the command runs at
// the owner as the client's user (ACL WHOAMI there would name it), not as an
// unauthenticated session answering NOAUTH; and an unauthenticated client gets NOAUTH for
// them too. A memcached flush_all from a client that may not clear the cache clears no
// member (the others used to be cleared before the request was checked).
#[test]
fn authenticated_clients_reach_keys_other_members_own() {
    use common::cluster::{Addresses, Node, Resp};
    let dir = tempfile::tempdir().unwrap();
    users_file(
        dir.path(),
        &[
            ("alice", "alice-pw", &["application"]),
            ("olga", "olga-pw", &["observer"]),
        ],
    );
    let mut configs = Vec::new();
    for name in ["a", "b"] {
        let config = dir.path().join(format!("{name}.toml"));
        std::fs::write(
            &config,
            format!(
                "[server]\ncluster-secret = \"s\"\ndata-dir = \"{}\"\n[security]\nusers-file = \"users.toml\"\n\
                 [caches.default]\nmode = \"distributed\"\nowners = 1\nresp-database = 0\n",
                dir.path().join(format!("data-{name}")).display()
            ),
        )
        .unwrap();
        configs.push(config);
    }
    let (at_a, at_b) = (Addresses::free(), Addresses::free());
    let a = Node::start("a", &configs[0], at_a, &[]);
    let _b = Node::start("b", &configs[1], at_b, &[at_a]);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut client = loop {
        if let Ok(mut client) = Resp::connect(a.client)
            && client.command(&[b"AUTH", b"alice", b"alice-pw"]).is_ok()
        {
            break client;
        }
        assert!(Instant::now() < deadline, "node a never served");
        std::thread::sleep(Duration::from_millis(200));
    };
    // With one owner per key over two members, about half of these live on b; wait for the
    // cluster to be whole (a key of b's answers once b is a member).
    for i in 0..40 {
        let key = format!("k{i}");
        loop {
            match client.command(&[b"SET", key.as_bytes(), b"v"]) {
                Ok(reply) => {
                    assert_eq!(reply.as_deref(), Some(b"OK".as_slice()));
                    break;
                }
                Err(error) => {
                    assert!(!error.to_string().contains("NOAUTH"), "{key}: {error}");
                    assert!(Instant::now() < deadline, "{key}: {error}");
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
        assert_eq!(
            client
                .command(&[b"GET", key.as_bytes()])
                .unwrap()
                .as_deref(),
            Some(b"v".as_slice())
        );
    }
    let mut anonymous = Resp::connect(a.client).unwrap();
    let error = anonymous.command(&[b"GET", b"k1"]).unwrap_err();
    assert!(error.to_string().contains("NOAUTH"), "{error}");

    // memcached's flush_all clears the other members too: not for a client that may not.
    let crlf = |answer: &[u8]| answer.ends_with(b"\r\n");
    let mut nobody = std::net::TcpStream::connect(a.client).unwrap();
    nobody
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    assert_eq!(
        exchange(&mut nobody, b"flush_all\r\n", crlf),
        b"CLIENT_ERROR unauthenticated\r\n"
    );
    let mut olga = std::net::TcpStream::connect(a.client).unwrap();
    olga.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    assert_eq!(
        exchange(&mut olga, b"set login 0 0 12\r\nolga olga-pw\r\n", crlf),
        b"STORED\r\n"
    );
    let refused = exchange(&mut olga, b"flush_all\r\n", crlf);
    assert!(
        refused.starts_with(b"CLIENT_ERROR ISPN000287"),
        "{refused:?}"
    );
    for i in 0..40 {
        let key = format!("k{i}");
        assert_eq!(
            client
                .command(&[b"GET", key.as_bytes()])
                .unwrap()
                .as_deref(),
            Some(b"v".as_slice()),
            "{key} survives refused flushes"
        );
    }
}

// Proves attempts are counted per (address, user): one user guessing another's password in a
// loop, from the same address and on several connections, never slows a second user down —
// that user logs in at once every time, on every protocol — while the guessed user's
// attempts past the burst wait for their turn instead of being checked at once.
#[test]
fn a_user_guessing_from_one_address_does_not_lock_another_out() {
    let dir = tempfile::tempdir().unwrap();
    let users = users_file(
        dir.path(),
        &[
            ("alice", "alice-pw", &["admin"]),
            ("bob", "bob-pw", &["admin"]),
        ],
    );
    let server = start(&users);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let guessers: Vec<_> = (0..4)
        .map(|n| {
            let mut client = server.client();
            let stop = std::sync::Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut guesses = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let guess = format!("guess-{n}-{guesses}");
                    let answer = client.call(&["AUTH", "bob", guess.as_str()]);
                    assert!(matches!(answer, Frame::Error(_)), "{answer:?}");
                    guesses += 1;
                }
                guesses
            })
        })
        .collect();
    // Let the guessers exhaust bob's burst.
    std::thread::sleep(Duration::from_millis(300));
    for round in 0..20 {
        let started = Instant::now();
        assert_eq!(
            server.client().call(&["AUTH", "alice", "alice-pw"]),
            Frame::ok(),
            "RESP, round {round}"
        );
        assert_eq!(
            http(&server, "/rest/v2/caches", Some(("alice", "alice-pw"))).0,
            200,
            "HTTP, round {round}"
        );
        let mut hotrod = HotRod::connect(server.addr, 31);
        let done = scram(&mut hotrod, "SCRAM-SHA-256", "alice", "alice-pw");
        assert_eq!(done.status(), Status::Success, "Hot Rod, round {round}");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "alice was held up ({:?}) in round {round}",
            started.elapsed()
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let guesses: usize = guessers.into_iter().map(|g| g.join().unwrap()).sum();
    // The burst, and one every 3 s after it: not one per round trip.
    assert!(
        guesses <= 20,
        "bob's password was checked {guesses} times in a few seconds"
    );
}

// Proves the right password is never refused for someone else's failures: after the
// burst of wrong guesses of alice's password from this address, her right one waits for its
// turn and gets in (where it was refused before), and once in, her failures are forgotten.
#[test]
fn the_right_password_waits_its_turn_rather_than_being_refused() {
    let dir = tempfile::tempdir().unwrap();
    let users = users_file(dir.path(), &[("alice", "alice-pw", &["admin"])]);
    let server = start(&users);
    let mut client = server.client();
    for _ in 0..10 {
        assert!(matches!(
            client.call(&["AUTH", "alice", "guess"]),
            Frame::Error(_)
        ));
    }
    let started = Instant::now();
    assert_eq!(client.call(&["AUTH", "alice", "alice-pw"]), Frame::ok());
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(2500) && waited < Duration::from_secs(8),
        "waited {waited:?}"
    );
    // Forgotten: at once now, on every protocol.
    let started = Instant::now();
    assert_eq!(
        server.client().call(&["AUTH", "alice", "alice-pw"]),
        Frame::ok()
    );
    assert_eq!(
        http(&server, "/rest/v2/caches", Some(("alice", "alice-pw"))).0,
        200
    );
    assert!(started.elapsed() < Duration::from_secs(2));
}

// Proves `[server] password` guards every protocol of the shared port, as the password of
// the user `default`: RESP AUTH, Hot Rod SASL (SCRAM), memcached (binary SASL PLAIN and the
// text protocol's login), REST (HTTP Basic) — and that stopping the server over REST or
// RESP needs it, from loopback too.
#[test]
fn the_password_guards_every_protocol() {
    let server = TestServer::start_with("password = \"s3cret\"", "");
    let mut resp = server.client();
    assert_eq!(
        error_text(&resp.call(&["SHUTDOWN"])),
        "NOAUTH Authentication required."
    );
    assert_eq!(resp.call(&["AUTH", "s3cret"]), Frame::ok());
    assert_eq!(resp.call(&["SET", "k", "v"]), Frame::ok());

    // Hot Rod: nothing but PING before SASL; SCRAM as `default`.
    let mut hotrod = HotRod::connect(server.addr, 31);
    assert!(
        hotrod
            .call(get("k"))
            .error_message()
            .contains("requires authentication")
    );
    let wrong = scram(&mut hotrod, "SCRAM-SHA-512", "default", "guess");
    assert_eq!(wrong.error_message(), SCRAM_REFUSED);
    let done = scram(&mut hotrod, "SCRAM-SHA-512", "default", "s3cret");
    assert_eq!(done.status(), Status::Success);
    assert_eq!(hotrod.call(get("k")).value(), b"v");

    // memcached, binary and text.
    let mut bin = std::net::TcpStream::connect(server.addr).unwrap();
    bin.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let refused = exchange(&mut bin, &binary(0x00, b"k", b""), whole_binary);
    assert_eq!(binary_answer(&refused).0, 0x20, "GET before authenticating");
    let right = exchange(
        &mut bin,
        &binary(0x21, b"PLAIN", b"\0default\0s3cret"),
        whole_binary,
    );
    assert_eq!(binary_answer(&right), (0, b"Authenticated".to_vec()));
    assert_eq!(
        binary_answer(&exchange(&mut bin, &binary(0x00, b"k", b""), whole_binary)),
        (0, b"v".to_vec())
    );
    let mut text = std::net::TcpStream::connect(server.addr).unwrap();
    text.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let crlf = |a: &[u8]| a.ends_with(b"\r\n");
    assert_eq!(
        exchange(&mut text, b"get k\r\n", crlf),
        b"CLIENT_ERROR unauthenticated\r\n"
    );
    assert_eq!(
        exchange(&mut text, b"set x 0 0 14\r\ndefault s3cret\r\n", crlf),
        b"STORED\r\n"
    );
    assert_eq!(
        exchange(&mut text, b"get k\r\n", |a| a.ends_with(b"END\r\n")),
        b"VALUE k 0 1\r\nv\r\nEND\r\n"
    );

    // REST: 401 without credentials (even from loopback), the entry with them.
    let entry = "/rest/v2/caches/default/k";
    assert_eq!(http(&server, entry, None).0, 401);
    assert_eq!(http(&server, entry, Some(("default", "guess"))).0, 401);
    let (status, answer) = http(&server, entry, Some(("default", "s3cret")));
    assert_eq!(status, 200);
    assert!(answer.ends_with("\r\n\r\nv"), "{answer}");
    let stop = "/rest/v2/server?action=stop";
    assert_eq!(http_request(&server, "POST", stop, None, "").0, 401);
    assert_eq!(resp.call(&["GET", "k"]), Frame::bulk("v"), "still serving");
}

// Proves RESP's CONFIG SET requirepass sets the password of `default` on every protocol,
// for connections opened after it (those already open stay as they were, as in Redis), and
// that setting it to "" opens the server again.
#[test]
fn config_set_requirepass_guards_every_protocol() {
    let server = TestServer::start();
    let mut admin = server.client();
    assert_eq!(admin.call(&["SET", "k", "v"]), Frame::ok());
    let mut early = HotRod::connect(server.addr, 31);
    assert_eq!(early.call(get("k")).value(), b"v");
    assert_eq!(http(&server, "/rest/v2/caches/default/k", None).0, 200);

    assert_eq!(
        admin.call(&["CONFIG", "SET", "requirepass", "s3cret"]),
        Frame::ok()
    );
    assert_eq!(admin.call(&["GET", "k"]), Frame::bulk("v"), "still in");
    assert_eq!(early.call(get("k")).value(), b"v", "still in");
    assert_eq!(
        error_text(&server.client().call(&["GET", "k"])),
        "NOAUTH Authentication required."
    );
    let mut late = HotRod::connect(server.addr, 31);
    assert!(
        late.call(get("k"))
            .error_message()
            .contains("requires authentication")
    );
    assert_eq!(
        scram(&mut late, "SCRAM-SHA-256", "default", "s3cret").status(),
        Status::Success
    );
    assert_eq!(late.call(get("k")).value(), b"v");
    assert_eq!(http(&server, "/rest/v2/caches/default/k", None).0, 401);
    assert_eq!(
        http(
            &server,
            "/rest/v2/caches/default/k",
            Some(("default", "s3cret"))
        )
        .0,
        200
    );
    let mut text = std::net::TcpStream::connect(server.addr).unwrap();
    text.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    assert_eq!(
        exchange(&mut text, b"get k\r\n", |a| a.ends_with(b"\r\n")),
        b"CLIENT_ERROR unauthenticated\r\n"
    );

    assert_eq!(
        admin.call(&["CONFIG", "SET", "requirepass", ""]),
        Frame::ok()
    );
    assert_eq!(server.client().call(&["GET", "k"]), Frame::bulk("v"));
    assert_eq!(http(&server, "/rest/v2/caches/default/k", None).0, 200);
    assert_eq!(
        HotRod::connect(server.addr, 31).call(get("k")).value(),
        b"v"
    );
}
