//! Connection robustness: the per-connection input and output limits, the request deadlines
//! (first request, partial requests, HTTP heads and bodies), the per-address connection
//! limit, who may stop the server over REST, and shutdown with connections that have not
//! sent anything yet.

#![allow(clippy::unwrap_used)]

mod common;

use std::io::Read;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{Frame, TestServer, encode};

// Proves a request that outgrows client-input-bytes-max closes its connection, while the
// same bytes as many small pipelined requests, and other clients' data, are unaffected.
#[test]
fn input_limit_closes_only_the_oversized_request() {
    let server = TestServer::start_with("client-input-bytes-max = 65536", "");
    let mut c = server.client();
    assert_eq!(c.cmd("SET kept safe"), Frame::ok());
    // 200 kB of small requests in one write: each completes long before the limit.
    let mut batch = Vec::new();
    for i in 0..2000 {
        batch.extend_from_slice(&encode(&[
            "SET".to_owned(),
            format!("k{i}"),
            "x".repeat(80),
        ]));
    }
    let mut writer = c.writer();
    let sender = std::thread::spawn(move || std::io::Write::write_all(&mut writer, &batch));
    for i in 0..2000 {
        assert_eq!(c.read_frame(), Frame::ok(), "SET {i}");
    }
    sender.join().unwrap().unwrap();

    // One request declaring 1 MB of arguments (each bulk within proto-max-bulk-len): the
    // server keeps at most the limit of it, then closes the connection.
    let mut c = server.client();
    let arg = vec![b'a'; 16 * 1024];
    let mut request = b"*65\r\n$3\r\nDEL\r\n".to_vec();
    for _ in 0..64 {
        request.extend_from_slice(&encode(&[&arg])[4..]);
    }
    let mut writer = c.writer();
    // The write fails once the server has closed; what matters is what the client reads.
    let sender = std::thread::spawn(move || std::io::Write::write_all(&mut writer, &request));
    assert!(c.closed_by_server(), "an oversized request was buffered");
    let _ = sender.join();

    let mut other = server.client();
    assert_eq!(other.cmd("GET kept"), Frame::bulk("safe"));
    assert_eq!(other.cmd("DBSIZE"), Frame::Integer(2001));
}

// Proves a reply that outgrows client-output-bytes-max closes the connection after the
// replies before it, instead of being buffered whole (MGET of one value many times would
// otherwise make a small request allocate without bound); a reply of one value larger than
// the limit is still served, or a stored value could not be read back.
#[test]
fn output_limit_closes_instead_of_buffering() {
    let server = TestServer::start_with("client-output-bytes-max = 100000", "");
    let mut c = server.client();
    let big = "v".repeat(150_000);
    assert_eq!(c.call(&["SET", "big", &big]), Frame::ok());
    assert_eq!(c.cmd("GET big"), Frame::bulk(&big));
    c.cmd("SET small s");
    let mut mget = vec!["MGET".to_owned()];
    mget.extend(std::iter::repeat_n("small".to_owned(), 1000));
    assert_eq!(c.call(&mget).items().len(), 1000);

    let mut pipeline = encode(&["PING"]);
    pipeline.extend_from_slice(&encode(&["MGET", "big", "big", "big"]));
    pipeline.extend_from_slice(&encode(&["PING"]));
    c.send_raw(&pipeline);
    assert_eq!(c.read_frame(), Frame::Simple("PONG".into()));
    assert!(
        c.closed_by_server(),
        "a reply over the limit was sent, in part or whole"
    );

    let mut other = server.client();
    assert_eq!(other.cmd("STRLEN big"), Frame::Integer(150_000));
}

// Proves a connection that has sent nothing does not hold up shutdown until the detection
// timeout (or the grace period): it is closed as soon as shutdown starts.
#[test]
fn silent_connection_does_not_delay_shutdown() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let config = weft_server::config::ServerConfig::parse(
        "test.toml",
        "[server]\nbind = \"127.0.0.1:0\"\nshutdown-grace-secs = 20\n",
    )
    .unwrap();
    let server = runtime
        .block_on(weft_server::Server::start(config))
        .unwrap();
    let mut silent = TcpStream::connect(server.local_addr()).unwrap();
    // Let the server accept it and start detection.
    std::thread::sleep(Duration::from_millis(100));
    let started = Instant::now();
    runtime.block_on(server.shutdown());
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "shutdown waited {:?} for a silent connection",
        started.elapsed()
    );
    silent
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut byte = [0u8; 1];
    assert!(matches!(silent.read(&mut byte), Ok(0) | Err(_)));
}

// Proves a client that never stops sending does not keep its connection open through a
// shutdown: the requests already read are answered, then the connection closes.
#[test]
fn busy_connection_does_not_delay_shutdown() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let config = weft_server::config::ServerConfig::parse(
        "test.toml",
        "[server]\nbind = \"127.0.0.1:0\"\nshutdown-grace-secs = 20\n",
    )
    .unwrap();
    let server = runtime
        .block_on(weft_server::Server::start(config))
        .unwrap();
    let stream = TcpStream::connect(server.local_addr()).unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = stream;
    // Pipelines PINGs without pause until the server closes, and drains the replies.
    let sending = std::thread::spawn(move || {
        let batch = encode(&["PING"]).repeat(20_000);
        while std::io::Write::write_all(&mut writer, &batch).is_ok() {}
    });
    let draining = std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        let mut received = 0usize;
        while let Ok(n @ 1..) = reader.read(&mut buf) {
            received += n;
        }
        received
    });
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    runtime.block_on(server.shutdown());
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "shutdown waited {:?} for a busy connection",
        started.elapsed()
    );
    assert!(draining.join().unwrap() > 0, "no PING was answered");
    sending.join().unwrap();
}

// Proves an HTTP client that sends part of a request head, or idles on a kept-alive
// connection, is closed after the head timeout rather than held forever (the clock is
// paused: tokio advances it while every task waits).
#[tokio::test(start_paused = true)]
async fn http_head_timeout_closes_slow_clients() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let config = weft_server::config::ServerConfig::parse(
        "test.toml",
        "[server]\nbind = \"127.0.0.1:0\"\nshutdown-grace-secs = 1\n",
    )
    .unwrap();
    let server = weft_server::Server::start(config).await.unwrap();
    let addr = server.local_addr();
    // Longer than the head timeout, shorter than forever.
    let patience = Duration::from_secs(300);

    let mut partial = tokio::net::TcpStream::connect(addr).await.unwrap();
    partial
        .write_all(b"GET /rest/v2/caches HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let mut buf = vec![0u8; 4096];
    let read = tokio::time::timeout(patience, partial.read(&mut buf)).await;
    assert!(
        matches!(read, Ok(Ok(0) | Err(_))),
        "a partial request head kept the connection open: {read:?}"
    );

    let mut idle = tokio::net::TcpStream::connect(addr).await.unwrap();
    idle.write_all(b"GET /rest/v2/caches HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut response = Vec::new();
    while !response.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = idle.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed before answering");
        response.extend_from_slice(&buf[..n]);
    }
    assert!(response.starts_with(b"HTTP/1.1 200"));
    let mut rest = Vec::new();
    let read = tokio::time::timeout(patience, idle.read_to_end(&mut rest)).await;
    assert!(
        matches!(read, Ok(Ok(_) | Err(_))),
        "an idle kept-alive connection was held open: {read:?}"
    );
    server.shutdown().await;
}

/// A server on `127.0.0.1:0` with `server_lines` in `[server]`, on the test's runtime (whose
/// clock the paused tests control).
async fn start_here(server_lines: &str) -> weft_server::Server {
    let text =
        format!("[server]\nbind = \"127.0.0.1:0\"\nshutdown-grace-secs = 1\n{server_lines}\n");
    let config = weft_server::config::ServerConfig::parse("test.toml", &text).unwrap();
    weft_server::Server::start(config).await.unwrap()
}

/// A connection to `addr` from the loopback address `from`, so that a test can play two
/// client machines. Without Nagle's algorithm: a small write waiting for the server's
/// delayed acknowledgement (40 ms of real time) would arrive long after a paused clock has
/// moved on.
async fn connect_from(from: [u8; 4], addr: std::net::SocketAddr) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(std::net::SocketAddr::from((from, 0))).unwrap();
    socket.set_nodelay(true).unwrap();
    socket.connect(addr).await.unwrap()
}

/// When (on tokio's clock) the server closed `stream`, reading and dropping what it sends;
/// `None` if it is still open at `until`.
async fn closed_at(
    stream: &mut tokio::net::TcpStream,
    until: tokio::time::Instant,
) -> Option<tokio::time::Instant> {
    use tokio::io::AsyncReadExt;
    let mut buf = vec![0u8; 4096];
    loop {
        match tokio::time::timeout_at(until, stream.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => return Some(tokio::time::Instant::now()),
            Ok(Ok(_)) => {}
            Err(_) => return None,
        }
    }
}

/// Sends `request` and reads until `until` appears in the answer, which it returns.
async fn exchange(stream: &mut tokio::net::TcpStream, request: &[u8], until: &[u8]) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    let mut buf = vec![0u8; 4096];
    while !answer.windows(until.len()).any(|w| w == until) {
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
            .await
            .expect("an answer")
            .unwrap();
        assert!(n > 0, "closed after {:?}", String::from_utf8_lossy(&answer));
        answer.extend_from_slice(&buf[..n]);
    }
    answer
}

// Proves a connection that does not send a whole first request within
// first-request-timeout-secs is closed — silent, stuck in detection, or with part of a RESP,
// HTTP, memcached or Hot Rod request — while established clients may idle for as long as
// they like; and that on an established connection a half-sent request is closed after
// request-timeout-secs.
#[tokio::test(start_paused = true)]
async fn request_deadlines_close_stalled_connections_only() {
    use tokio::io::AsyncWriteExt;
    let server = start_here("").await;
    let addr = server.local_addr();

    let partial_first_requests: [&[u8]; 6] = [
        b"",
        b"PIN",
        b"*1\r\n$4\r\nPI",
        b"GET /rest/v2/caches HTTP/1.1\r\nHost: x\r\n",
        b"set k 0 0 5\r\nab",
        &[0xA0, 0x01],
    ];
    let opened = tokio::time::Instant::now();
    let mut stalled = Vec::new();
    for bytes in partial_first_requests {
        let mut stream = connect_from([127, 0, 0, 1], addr).await;
        stream.write_all(bytes).await.unwrap();
        stalled.push((bytes, stream));
    }
    let mut resp = connect_from([127, 0, 0, 1], addr).await;
    assert!(
        exchange(&mut resp, b"PING\r\n", b"\r\n")
            .await
            .starts_with(b"+PONG")
    );
    let mut memcached = connect_from([127, 0, 0, 1], addr).await;
    exchange(&mut memcached, b"version\r\n", b"\r\n").await;

    for (bytes, stream) in &mut stalled {
        let closed = closed_at(stream, opened + Duration::from_secs(60)).await;
        let after = closed.map(|at| at - opened);
        assert!(
            after.is_some_and(
                |after| after >= Duration::from_secs(10) && after < Duration::from_secs(12)
            ),
            "{:?}: closed after {after:?}, not at the 10 s first-request deadline",
            String::from_utf8_lossy(bytes)
        );
    }

    // Established clients idle for ten minutes and are still served.
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert!(
        exchange(&mut resp, b"PING\r\n", b"\r\n")
            .await
            .starts_with(b"+PONG")
    );
    assert!(
        exchange(&mut memcached, b"version\r\n", b"\r\n")
            .await
            .starts_with(b"VERSION")
    );
    // A request left half-sent on an established connection is closed after 30 s.
    resp.write_all(b"*1\r\n$4\r\nPI").await.unwrap();
    let started = tokio::time::Instant::now();
    let closed = closed_at(&mut resp, started + Duration::from_secs(120)).await;
    let after = closed.map(|at| at - started);
    assert!(
        after.is_some_and(
            |after| after >= Duration::from_secs(30) && after < Duration::from_secs(32)
        ),
        "a stalled request was closed after {after:?}"
    );
    server.shutdown().await;
}

// Proves a request that takes longer than request-timeout-secs to arrive is still served
// when it keeps coming at request-min-bytes-per-second or faster, on RESP and HTTP alike
// (small rates and sizes: the paused clock outruns the kernel on bulk transfers).
#[tokio::test(start_paused = true)]
async fn requests_arriving_at_the_minimum_rate_earn_time() {
    use tokio::io::AsyncWriteExt;
    let server = start_here("request-timeout-secs = 5\nrequest-min-bytes-per-second = 10").await;
    let addr = server.local_addr();
    // 200 bytes of value at 20 bytes a second: 10 s, twice the timeout, but 200 bytes earn
    // 20 s.
    let value = vec![b'v'; 200];

    let mut resp = connect_from([127, 0, 0, 1], addr).await;
    assert!(
        exchange(&mut resp, b"PING\r\n", b"\r\n")
            .await
            .starts_with(b"+PONG")
    );
    let mut request = format!("*3\r\n$3\r\nSET\r\n$4\r\nslow\r\n${}\r\n", value.len()).into_bytes();
    request.extend_from_slice(&value);
    request.extend_from_slice(b"\r\n");
    let (head, tail) = request.split_at(request.len() - 2);
    for chunk in head.chunks(20) {
        resp.write_all(chunk).await.unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert!(exchange(&mut resp, tail, b"\r\n").await.starts_with(b"+OK"));

    let mut http = connect_from([127, 0, 0, 1], addr).await;
    http.write_all(
        format!(
            "PUT /rest/v2/caches/default/steady HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n",
            value.len()
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let (head, tail) = value.split_at(value.len() - 1);
    for chunk in head.chunks(20) {
        http.write_all(chunk).await.unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let answer = exchange(&mut http, tail, b"\r\n\r\n").await;
    assert!(
        answer.starts_with(b"HTTP/1.1 204"),
        "{}",
        String::from_utf8_lossy(&answer)
    );

    let cache = server.context().manager.cache("default").unwrap();
    assert_eq!(
        cache.get(b"slow").unwrap().map(|v| v.len()),
        Some(value.len())
    );
    assert_eq!(
        cache.get(b"steady").unwrap().map(|v| v.len()),
        Some(value.len())
    );
    server.shutdown().await;
}

// Proves one address opening idle sockets cannot take every connection slot: with
// connections-max = 8 each address holds at most 2, so a client from 127.0.0.2 is served
// while 127.0.0.1 tries to hold eight; and the idle sockets are closed at the first-request
// deadline, freeing their slots.
#[tokio::test(start_paused = true)]
async fn idle_sockets_cannot_lock_out_other_clients() {
    let server = start_here("connections-max = 8").await;
    let addr = server.local_addr();

    let mut admitted = Vec::new();
    let mut refused = 0;
    for _ in 0..8 {
        let mut stream = connect_from([127, 0, 0, 1], addr).await;
        let probe = tokio::time::Instant::now() + Duration::from_millis(100);
        match closed_at(&mut stream, probe).await {
            Some(_) => refused += 1,
            None => admitted.push(stream),
        }
    }
    assert_eq!((admitted.len(), refused), (2, 6));

    let mut other = connect_from([127, 0, 0, 2], addr).await;
    assert!(
        exchange(&mut other, b"PING\r\n", b"\r\n")
            .await
            .starts_with(b"+PONG"),
        "another address was locked out"
    );

    let until = tokio::time::Instant::now() + Duration::from_secs(30);
    for stream in &mut admitted {
        assert!(
            closed_at(stream, until).await.is_some(),
            "an idle socket kept its slot"
        );
    }
    let mut again = connect_from([127, 0, 0, 1], addr).await;
    assert!(
        exchange(&mut again, b"PING\r\n", b"\r\n")
            .await
            .starts_with(b"+PONG")
    );
    assert!(
        exchange(&mut other, b"PING\r\n", b"\r\n")
            .await
            .starts_with(b"+PONG")
    );
    server.shutdown().await;
}

// Proves an HTTP request body trickled at a byte every 2 s is answered 408 and its
// connection closed at the 30 s request timeout, without being stored.
#[tokio::test(start_paused = true)]
async fn http_slow_body_times_out() {
    use tokio::io::AsyncWriteExt;
    let server = start_here("").await;
    let addr = server.local_addr();

    let mut slow = connect_from([127, 0, 0, 1], addr).await;
    slow.write_all(
        b"PUT /rest/v2/caches/default/slow HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 200\r\n\r\n",
    )
    .await
    .unwrap();
    let started = tokio::time::Instant::now();
    let mut answer = Vec::new();
    let mut buf = vec![0u8; 4096];
    let mut sent = 0;
    let closed = loop {
        use tokio::io::AsyncReadExt;
        match tokio::time::timeout(Duration::from_secs(2), slow.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => break tokio::time::Instant::now(),
            Ok(Ok(n)) => answer.extend_from_slice(&buf[..n]),
            Err(_) => {
                assert!(sent < 200, "the whole body was read");
                // The write fails once the server has closed; the answer is what matters.
                let _ = slow.write_all(b"x").await;
                sent += 1;
            }
        }
    };
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    let after = closed - started;
    assert!(
        after >= Duration::from_secs(30) && after < Duration::from_secs(34),
        "closed after {after:?}"
    );

    let cache = server.context().manager.cache("default").unwrap();
    assert_eq!(cache.get(b"slow").unwrap(), None);
    server.shutdown().await;
}

/// `POST path` with `extra` header lines from `from`; the status.
async fn post_from(from: [u8; 4], addr: std::net::SocketAddr, path: &str, extra: &str) -> u16 {
    let mut stream = connect_from(from, addr).await;
    let request = format!("POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n{extra}\r\n");
    let answer = exchange(&mut stream, request.as_bytes(), b"\r\n\r\n").await;
    String::from_utf8_lossy(&answer)
        .split(' ')
        .nth(1)
        .and_then(|status| status.parse().ok())
        .unwrap_or(0)
}

// Proves the server tells the REST router where a request comes from: stopping the server
// over REST without credentials is refused from 127.0.0.2 (403) and accepted from 127.0.0.1
// on a server that asks for none; on one with a password it needs the password (HTTP Basic,
// user `default`) from loopback too.
#[tokio::test]
async fn rest_stop_needs_loopback_or_the_password() {
    let stop = "/rest/v2/server?action=stop";

    let server = start_here("").await;
    let lifecycle = std::sync::Arc::clone(&server.context().lifecycle);
    let stopped = || lifecycle.is_stop_requested();
    assert_eq!(
        post_from([127, 0, 0, 2], server.local_addr(), stop, "").await,
        403
    );
    assert!(!stopped(), "stopped from elsewhere than loopback");
    assert_eq!(
        post_from([127, 0, 0, 1], server.local_addr(), stop, "").await,
        204
    );
    assert!(stopped());
    server.shutdown().await;

    let server = start_here("password = \"s3cret\"").await;
    let lifecycle = std::sync::Arc::clone(&server.context().lifecycle);
    let stopped = || lifecycle.is_stop_requested();
    let addr = server.local_addr();
    let basic = |credentials: &str| {
        use base64::Engine;
        format!(
            "Authorization: Basic {}\r\n",
            base64::engine::general_purpose::STANDARD.encode(credentials)
        )
    };
    for from in [[127, 0, 0, 1], [127, 0, 0, 2]] {
        assert_eq!(post_from(from, addr, stop, "").await, 401, "{from:?}");
        for wrong in [
            "Authorization: Bearer s3cret\r\n".to_owned(),
            basic("default:guess"),
        ] {
            assert_eq!(post_from(from, addr, stop, &wrong).await, 401, "{from:?}");
        }
    }
    assert!(!stopped(), "stopped without the password");
    let right = basic("default:s3cret");
    assert_eq!(post_from([127, 0, 0, 2], addr, stop, &right).await, 204);
    assert!(stopped());
    server.shutdown().await;
}
