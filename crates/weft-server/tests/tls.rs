//! TLS on the shared port: TLS and plaintext clients of every protocol side by side, client
//! certificates, refusals that leave the server serving, and certificates reloaded while
//! running. Certificates are made per test (rcgen); clients are rustls over blocking sockets.

#![allow(clippy::unwrap_used, clippy::missing_panics_doc)]

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::TestServer;
use common::certificates::{Ca, Files};
use rcgen::{CertificateParams, ExtendedKeyUsagePurpose, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

const READ_TIMEOUT: Duration = Duration::from_secs(10);

fn start(files: &Files, extra: &str) -> TestServer {
    TestServer::start_with("", &files.section(extra))
}

/// A client configuration trusting `ca`, offering `alpn`, with `identity` as its certificate.
fn client_config(ca: &Ca, alpn: &[&[u8]], identity: Option<(String, String)>) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca.pem().as_bytes()).unwrap())
        .unwrap();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let mut config = match identity {
        Some((certificate, key)) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_slice(certificate.as_bytes()).unwrap()],
                PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

type Tls = StreamOwned<ClientConnection, TcpStream>;

/// Connects and completes the handshake (writing nothing else).
fn connect(addr: SocketAddr, config: Arc<ClientConfig>) -> std::io::Result<Tls> {
    let socket = TcpStream::connect(addr)?;
    socket.set_read_timeout(Some(READ_TIMEOUT))?;
    let name = ServerName::try_from("localhost").unwrap();
    let connection = ClientConnection::new(config, name).map_err(std::io::Error::other)?;
    let mut stream = StreamOwned::new(connection, socket);
    while stream.conn.is_handshaking() {
        stream.conn.complete_io(&mut stream.sock)?;
    }
    Ok(stream)
}

/// Sends `request` and reads until `done` says the answer is whole.
fn exchange<S: Read + Write>(
    stream: &mut S,
    request: &[u8],
    done: impl Fn(&[u8]) -> bool,
) -> Vec<u8> {
    stream.write_all(request).unwrap();
    stream.flush().unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    while !done(&answer) {
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "closed after {:?}", String::from_utf8_lossy(&answer));
        answer.extend_from_slice(&buf[..n]);
    }
    answer
}

fn ends_with_crlf(answer: &[u8]) -> bool {
    answer.ends_with(b"\r\n")
}

fn resp_ping<S: Read + Write>(stream: &mut S) {
    let answer = exchange(stream, b"*1\r\n$4\r\nPING\r\n", ends_with_crlf);
    assert_eq!(answer, b"+PONG\r\n");
}

/// Whether a handshake with `config` is refused, or the connection is closed right after it
/// (TLS 1.3 servers reject a client certificate after the client's handshake is done).
fn refused(addr: SocketAddr, config: Arc<ClientConfig>) -> bool {
    let Ok(mut stream) = connect(addr, config) else {
        return true;
    };
    if stream.write_all(b"*1\r\n$4\r\nPING\r\n").is_err() || stream.flush().is_err() {
        return true;
    }
    let mut buf = [0u8; 64];
    match stream.read(&mut buf) {
        Ok(0) | Err(_) => true,
        Ok(_) => false,
    }
}

// Proves TLS clients of every protocol and plaintext clients share one port: RESP, HTTP
// (chosen by ALPN, and by its bytes without ALPN), Hot Rod and memcached inside TLS, and
// RESP in plaintext, all against the same data.
#[test]
fn tls_and_plaintext_clients_share_the_port() {
    let ca = Ca::new("Weft test CA");
    let files = Files::new(&ca);
    let server = start(&files, "");
    let config = client_config(&ca, &[], None);

    let mut resp = connect(server.addr, Arc::clone(&config)).unwrap();
    assert!(resp.conn.alpn_protocol().is_none());
    resp_ping(&mut resp);
    let answer = exchange(
        &mut resp,
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nover-\r\n",
        ends_with_crlf,
    );
    assert_eq!(answer, b"+OK\r\n");

    let mut plain = server.client();
    assert_eq!(
        plain.call(&["GET", "k"]),
        common::Frame::bulk("over-"),
        "plaintext clients read what TLS clients wrote"
    );

    let http_request =
        b"GET /rest/v2/caches/default/k HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    for alpn in [&[b"h2".as_slice(), b"http/1.1"][..], &[]] {
        let mut http = connect(server.addr, client_config(&ca, alpn, None)).unwrap();
        let expected_alpn = (!alpn.is_empty()).then_some(b"http/1.1".as_slice());
        assert_eq!(http.conn.alpn_protocol(), expected_alpn);
        http.write_all(http_request).unwrap();
        http.flush().unwrap();
        let mut answer = Vec::new();
        let _ = http.read_to_end(&mut answer);
        let text = String::from_utf8_lossy(&answer);
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        assert!(text.ends_with("over-"), "{text}");
    }

    let mut memcached = connect(server.addr, Arc::clone(&config)).unwrap();
    let answer = exchange(&mut memcached, b"version\r\n", ends_with_crlf);
    assert!(answer.starts_with(b"VERSION "), "{answer:?}");

    let mut hotrod = connect(server.addr, Arc::clone(&config)).unwrap();
    let mut ping = bytes::BytesMut::new();
    let header = weft_hotrod::RequestHeader::new(31, 7, String::new());
    weft_hotrod::encode(
        &mut ping,
        &header,
        &weft_hotrod::Request::<bytes::Bytes>::Ping,
    )
    .unwrap();
    // Magic 0xA1, message id 7, opcode 0x18 (ping response), status 0 (ok).
    let answer = exchange(&mut hotrod, &ping, |a| a.len() >= 5);
    assert_eq!(&answer[..4], &[0xA1, 7, 0x18, 0]);

    // An answer spanning several TLS records arrives whole.
    let value = "v".repeat(100_000);
    let mut big = connect(server.addr, Arc::clone(&config)).unwrap();
    let set = format!(
        "*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n${}\r\n{value}\r\n",
        value.len()
    );
    assert_eq!(
        exchange(&mut big, set.as_bytes(), ends_with_crlf),
        b"+OK\r\n"
    );
    let expected = format!("${}\r\n{value}\r\n", value.len());
    let answer = exchange(&mut big, b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n", |a| {
        a.len() >= expected.len()
    });
    assert_eq!(answer, expected.as_bytes());
}

// Proves client certificates are checked when a client CA is configured: none, or one from
// another CA, is refused; one the CA signed is served; and a refused client leaves the server
// serving the others.
#[test]
fn client_certificates_must_chain_to_the_client_ca() {
    let ca = Ca::new("Weft test CA");
    let other = Ca::new("Someone else's CA");
    let files = Files::new(&ca);
    std::fs::write(files.path("clients.pem"), ca.pem()).unwrap();
    let client_ca = format!("client-ca = \"{}\"", files.path("clients.pem").display());
    let server = start(&files, &client_ca);

    let ours = ca.sign(&["app"], ExtendedKeyUsagePurpose::ClientAuth);
    let theirs = other.sign(&["app"], ExtendedKeyUsagePurpose::ClientAuth);
    assert!(refused(server.addr, client_config(&ca, &[], None)));
    assert!(refused(server.addr, client_config(&ca, &[], Some(theirs))));
    let mut served = connect(server.addr, client_config(&ca, &[], Some(ours))).unwrap();
    resp_ping(&mut served);
    assert_eq!(
        server.client().call(&["PING"]),
        common::Frame::Simple("PONG".into())
    );
}

// Proves `client-auth = "optional"` serves clients without a certificate but still refuses
// one from another CA.
#[test]
fn optional_client_certificates_are_still_checked() {
    let ca = Ca::new("Weft test CA");
    let other = Ca::new("Someone else's CA");
    let files = Files::new(&ca);
    std::fs::write(files.path("clients.pem"), ca.pem()).unwrap();
    let extra = format!(
        "client-ca = \"{}\"\nclient-auth = \"optional\"",
        files.path("clients.pem").display()
    );
    let server = start(&files, &extra);
    resp_ping(&mut connect(server.addr, client_config(&ca, &[], None)).unwrap());
    let theirs = other.sign(&["app"], ExtendedKeyUsagePurpose::ClientAuth);
    assert!(refused(server.addr, client_config(&ca, &[], Some(theirs))));
}

// Proves client certificates are identities (SASL EXTERNAL, and HTTPS without other
// credentials): the certificate's common name is the user, its users-file groups give its
// roles (an observer reads, may not write), and a connection without a certificate is offered
// no EXTERNAL and must authenticate otherwise.
#[test]
fn client_certificates_are_identities() {
    use common::auth::{binary, binary_answer, users_file, whole_binary};
    let ca = Ca::new("Weft test CA");
    let files = Files::new(&ca);
    std::fs::write(files.path("clients.pem"), ca.pem()).unwrap();
    let users = users_file(files.dir.path(), &[("carol", "carol-pw", &["observer"])]);
    let server = TestServer::start_with(
        "",
        &format!(
            "{}[security]\nusers-file = \"{}\"\n",
            files.section(&format!(
                "client-ca = \"{}\"\nclient-auth = \"optional\"",
                files.path("clients.pem").display()
            )),
            users.display()
        ),
    );
    let carol = || {
        client_config(
            &ca,
            &[],
            Some(ca.sign(&["carol"], ExtendedKeyUsagePurpose::ClientAuth)),
        )
    };

    // memcached binary SASL: EXTERNAL offered and accepted with the certificate's user.
    let mut bin = connect(server.addr, carol()).unwrap();
    let mechanisms = exchange(&mut bin, &binary(0x20, b"", b""), whole_binary);
    let (status, offered) = binary_answer(&mechanisms);
    assert_eq!(status, 0);
    assert!(
        String::from_utf8_lossy(&offered)
            .split(' ')
            .any(|m| m == "EXTERNAL"),
        "{offered:?}"
    );
    let done = exchange(&mut bin, &binary(0x21, b"EXTERNAL", b""), whole_binary);
    assert_eq!(binary_answer(&done), (0, b"Authenticated".to_vec()));
    let miss = exchange(&mut bin, &binary(0x00, b"k", b""), whole_binary);
    assert_eq!(binary_answer(&miss).0, 0x01, "a read: allowed, a miss");
    let mut set = binary(0x01, b"k", b"v");
    // SET's 8 bytes of extras (flags, expiration) come before the key.
    set[4] = 8;
    set.splice(24..24, [0u8; 8]);
    let body = u32::try_from(set.len() - 24).unwrap().to_be_bytes();
    set[8..12].copy_from_slice(&body);
    let refused = exchange(&mut bin, &set, whole_binary);
    let (status, text) = binary_answer(&refused);
    assert_eq!(status, 0x20, "an observer may not write");
    assert!(String::from_utf8_lossy(&text).contains("'carol' lacks 'WRITE'"));
    // An authorization identity other than the certificate's is refused.
    let mut other = connect(server.addr, carol()).unwrap();
    let wrong = exchange(
        &mut other,
        &binary(0x21, b"EXTERNAL", b"admin"),
        whole_binary,
    );
    assert_eq!(binary_answer(&wrong).0, 0x20);

    // HTTPS without credentials is the certificate's user.
    let get = |config: Arc<ClientConfig>, request: &str| {
        let mut stream = connect(server.addr, config).unwrap();
        let answer = exchange(&mut stream, request.as_bytes(), |a| {
            a.windows(4).any(|w| w == b"\r\n\r\n")
        });
        String::from_utf8_lossy(&answer[9..12]).into_owned()
    };
    let list = "GET /rest/v2/caches HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
    assert_eq!(get(carol(), list), "200");
    let put = "PUT /rest/v2/caches/default/k HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1\r\nConnection: close\r\n\r\nv";
    assert_eq!(get(carol(), put), "403");

    // Without a certificate: no EXTERNAL, and HTTPS needs credentials.
    let anonymous = || client_config(&ca, &[], None);
    assert_eq!(get(anonymous(), list), "401");
    let mut plain = connect(server.addr, anonymous()).unwrap();
    let mechanisms = exchange(&mut plain, &binary(0x20, b"", b""), whole_binary);
    assert!(!String::from_utf8_lossy(&binary_answer(&mechanisms).1).contains("EXTERNAL"));
}

// Proves `plaintext = false` refuses plaintext clients and serves TLS ones.
#[test]
fn plaintext_can_be_refused() {
    let ca = Ca::new("Weft test CA");
    let files = Files::new(&ca);
    let server = start(&files, "plaintext = false");
    let mut plain = TcpStream::connect(server.addr).unwrap();
    plain.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    plain.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    let mut buf = [0u8; 16];
    assert!(
        matches!(plain.read(&mut buf), Ok(0) | Err(_)),
        "a plaintext client was answered"
    );
    resp_ping(&mut connect(server.addr, client_config(&ca, &[], None)).unwrap());
}

// Proves a ClientHello cut short (the peer stops or closes mid-record), garbage after the
// handshake byte, and a TLS client of a server without TLS are refused without disturbing
// anyone else.
#[test]
fn broken_handshakes_leave_the_server_serving() {
    let ca = Ca::new("Weft test CA");
    let files = Files::new(&ca);
    let server = TestServer::start_with("first-request-timeout-secs = 1", &files.section(""));
    // A real ClientHello's first bytes, captured from a rustls client.
    let mut hello = Vec::new();
    {
        let name = ServerName::try_from("localhost").unwrap();
        let mut connection = ClientConnection::new(client_config(&ca, &[], None), name).unwrap();
        connection.write_tls(&mut hello).unwrap();
    }
    assert!(hello.len() > 50);
    let mut stalled = TcpStream::connect(server.addr).unwrap();
    stalled.write_all(&hello[..hello.len() / 2]).unwrap();
    let mut closed = TcpStream::connect(server.addr).unwrap();
    closed.write_all(&hello[..20]).unwrap();
    drop(closed);
    let mut garbage = TcpStream::connect(server.addr).unwrap();
    garbage.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    garbage
        .write_all(&[0x16, 0xff, 0xff, 0xff, 0xff, 0, 1, 2, 3])
        .unwrap();
    let mut buf = [0u8; 64];
    // rustls answers with an alert, then closes.
    let mut answered = Vec::new();
    loop {
        match garbage.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => answered.extend_from_slice(&buf[..n]),
        }
    }
    assert!(answered.is_empty() || answered[0] == 0x15, "{answered:?}");
    resp_ping(&mut connect(server.addr, client_config(&ca, &[], None)).unwrap());
    assert_eq!(
        server.client().call(&["PING"]),
        common::Frame::Simple("PONG".into())
    );
    // The stalled handshake is cut at the first-request deadline.
    stalled.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    let started = Instant::now();
    assert!(matches!(stalled.read(&mut buf), Ok(0) | Err(_)));
    assert!(started.elapsed() < READ_TIMEOUT);
    // Closed by the server at its 1 s deadline, not by this read's own timeout.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );

    let plain_server = TestServer::start();
    assert!(refused(plain_server.addr, client_config(&ca, &[], None)));
    assert_eq!(
        plain_server.client().call(&["PING"]),
        common::Frame::Simple("PONG".into())
    );
}

// Proves new certificate files are used for new handshakes without a restart (on a change
// of the files), while sessions opened before keep working.
#[test]
fn certificates_reload_when_their_files_change() {
    let first = Ca::new("First CA");
    let second = Ca::new("Second CA");
    let files = Files::new(&first);
    let server = start(&files, "reload-check-secs = 1");
    let mut before = connect(server.addr, client_config(&first, &[], None)).unwrap();
    resp_ping(&mut before);
    assert!(refused(server.addr, client_config(&second, &[], None)));

    // Modification times may have a coarse granularity: make sure the new files differ in
    // time as well as content.
    std::thread::sleep(Duration::from_millis(1100));
    files.write_server(&second);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Ok(mut after) = connect(server.addr, client_config(&second, &[], None)) {
            resp_ping(&mut after);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the new certificate was not picked up"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    resp_ping(&mut before);
    assert!(refused(server.addr, client_config(&first, &[], None)));
}

// Proves unusable TLS settings stop the server at start with a message naming the problem.
#[test]
fn unusable_tls_settings_are_refused_at_start() {
    let ca = Ca::new("Weft test CA");
    let files = Files::new(&ca);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let start_with = |tls: &str| {
        let text = format!("[server]\nbind = \"127.0.0.1:0\"\n{tls}");
        let config = weft_server::config::ServerConfig::parse("t.toml", &text).unwrap();
        runtime
            .block_on(weft_server::Server::start(config))
            .map(|_| ())
            .map_err(|e| format!("{e:#}"))
    };
    let missing = start_with(&format!(
        "[server.tls]\ncertificate = \"{}\"\nkey = \"{}\"\n",
        files.path("nowhere.pem").display(),
        files.path("server.key").display()
    ))
    .unwrap_err();
    assert!(missing.contains("nowhere.pem"), "{missing}");
    std::fs::write(files.path("empty.pem"), "not a certificate\n").unwrap();
    let empty = start_with(&format!(
        "[server.tls]\ncertificate = \"{}\"\nkey = \"{}\"\n",
        files.path("empty.pem").display(),
        files.path("server.key").display()
    ))
    .unwrap_err();
    assert!(empty.contains("no PEM certificate"), "{empty}");
    let no_ca = start_with(&format!(
        "{}client-auth = \"required\"\n",
        files.section("")
    ))
    .unwrap_err();
    assert!(no_ca.contains("client-ca"), "{no_ca}");
    // A key that is not the certificate's.
    let (_, other_key) = ca.sign(&["localhost"], ExtendedKeyUsagePurpose::ServerAuth);
    std::fs::write(files.path("other.key"), other_key).unwrap();
    let mismatch = start_with(&format!(
        "[server.tls]\ncertificate = \"{}\"\nkey = \"{}\"\n",
        files.path("server.pem").display(),
        files.path("other.key").display()
    ));
    assert!(
        mismatch.is_err(),
        "a key that does not match the certificate was taken"
    );
}

// Proves relative paths in `[server.tls]` are relative to the configuration file.
#[test]
fn tls_paths_are_relative_to_the_configuration_file() {
    let ca = Ca::new("Weft test CA");
    let files = Files::new(&ca);
    let path = files.path("weft.toml");
    std::fs::write(
        &path,
        "[server]\nbind = \"127.0.0.1:0\"\n[server.tls]\ncertificate = \"server.pem\"\nkey = \"server.key\"\n",
    )
    .unwrap();
    let config = weft_server::config::ServerConfig::load(&path).unwrap();
    let tls = config.server.tls.unwrap();
    assert_eq!(tls.certificate, files.path("server.pem"));
    assert_eq!(tls.key, files.path("server.key"));
}

// Proves two member processes with `[server.cluster-tls]` form a cluster over mutual TLS and
// replicate: a key written through one is read through the other, and read back from the
// second after the first is gone.
#[test]
fn members_replicate_over_mutual_tls() {
    use common::cluster::{Addresses, Node, wait_stable};
    let ca = Ca::new("Weft cluster CA");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ca.pem"), ca.pem()).unwrap();
    let mut configs = Vec::new();
    for name in ["a", "b"] {
        let mut params = CertificateParams::new(vec![format!("{name}.weft.test")]).unwrap();
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let key = KeyPair::generate().unwrap();
        let certificate = params.signed_by(&key, &ca.issuer).unwrap();
        std::fs::write(dir.path().join(format!("{name}.pem")), certificate.pem()).unwrap();
        std::fs::write(dir.path().join(format!("{name}.key")), key.serialize_pem()).unwrap();
        let config = dir.path().join(format!("{name}.toml"));
        std::fs::write(
            &config,
            format!(
                "[server]\ncluster-secret = \"tls-test-secret\"\ndata-dir = \"{}\"\n\
                 [server.cluster-tls]\ncertificate = \"{name}.pem\"\nkey = \"{name}.key\"\nca = \"ca.pem\"\n\
                 [caches.default]\nmode = \"distributed\"\nowners = 2\nresp-database = 0\n",
                dir.path().join(format!("data-{name}")).display()
            ),
        )
        .unwrap();
        configs.push(config);
    }
    let (at_a, at_b) = (Addresses::free(), Addresses::free());
    let a = Node::start("a", &configs[0], at_a, &[]);
    let b = Node::start("b", &configs[1], at_b, &[at_a]);
    wait_stable(&[&a, &b], "default", Duration::from_secs(60));
    // The cluster port speaks TLS: a plaintext member would send its challenge at once; this
    // one waits for a ClientHello.
    let mut raw = TcpStream::connect(at_a.cluster).unwrap();
    raw.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let mut byte = [0u8; 1];
    assert!(
        !matches!(raw.read(&mut byte), Ok(n) if n > 0),
        "the cluster port answered a plaintext connection"
    );
    for i in 0..20 {
        let key = format!("k{i}");
        assert_eq!(
            a.command(&[b"SET", key.as_bytes(), b"over-mtls"])
                .as_deref(),
            Some(b"OK".as_slice())
        );
    }
    for i in 0..20 {
        let key = format!("k{i}");
        assert_eq!(
            b.command(&[b"GET", key.as_bytes()]).as_deref(),
            Some(b"over-mtls".as_slice()),
            "{key} through b"
        );
    }
    drop(a);
    for i in 0..20 {
        let key = format!("k{i}");
        assert_eq!(
            b.command(&[b"GET", key.as_bytes()]).as_deref(),
            Some(b"over-mtls".as_slice()),
            "{key} after a is gone"
        );
    }
}

// Proves SIGHUP reloads the certificate of a running `weft server` process (with the periodic
// check off), that a server without a change keeps serving through it, and that the process
// does not exit on SIGHUP.
#[test]
fn sighup_reloads_the_certificate() {
    use common::cluster::{Node, free_tcp_port};
    let first = Ca::new("First CA");
    let second = Ca::new("Second CA");
    let files = Files::new(&first);
    let config = files.path("weft.toml");
    std::fs::write(
        &config,
        "[server.tls]\ncertificate = \"server.pem\"\nkey = \"server.key\"\nreload-check-secs = 0\n",
    )
    .unwrap();
    let client = SocketAddr::from(([127, 0, 0, 1], free_tcp_port()));
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_weft"));
    command
        .args(["server", "--config", config.to_str().unwrap()])
        .args(["--bind", &client.to_string()])
        .current_dir(files.dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut node = Node::spawn("tls", client, &mut command);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut before = loop {
        if let Ok(stream) = connect(client, client_config(&first, &[], None)) {
            break stream;
        }
        assert!(Instant::now() < deadline, "the server never served TLS");
        std::thread::sleep(Duration::from_millis(100));
    };
    resp_ping(&mut before);
    node.signal("-HUP");
    std::thread::sleep(Duration::from_millis(300));
    resp_ping(&mut connect(client, client_config(&first, &[], None)).unwrap());
    files.write_server(&second);
    // No periodic check: the new files wait for the signal.
    std::thread::sleep(Duration::from_millis(500));
    assert!(refused(client, client_config(&second, &[], None)));
    node.signal("-HUP");
    let deadline = Instant::now() + Duration::from_secs(10);
    while refused(client, client_config(&second, &[], None)) {
        assert!(
            Instant::now() < deadline,
            "SIGHUP did not reload the certificate"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    resp_ping(&mut before);
    assert!(
        node.exit_within(Duration::from_millis(200)).is_none(),
        "SIGHUP stopped the server"
    );
}
