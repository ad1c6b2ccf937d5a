//! Output a Hot Rod client makes the server hold: a client that pipelines requests and does
//! not read the responses must not make the server buffer them without bound. Alone in its
//! file because it measures the test process's resident memory, where the server runs.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use bytes::BytesMut;
use common::TestServer;
use common::hotrod::{HotRod, b};
use weft_hotrod::{Expiration, Request, Status};

/// Resident memory of this process (and so of the server in it), in MiB.
fn resident_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        / 1024
}

// Proves a client that pipelines 200 bulk reads of a 1 MiB cache (under 3 KiB of requests)
// and reads nothing does not make the server hold their 200 MiB of responses: the server
// buffers about `client-output-bytes-max` (16 MiB here) and then stops reading that
// client's requests or closes its connection, as the RESP endpoint bounds its replies.
#[test]
fn unread_responses_are_bounded() {
    let server = TestServer::start_with("client-output-bytes-max = 16777216", "");
    let mut c = HotRod::connect(server.addr, 40);
    let entries = (0..1024)
        .map(|i| (b(format!("k{i}")), b(vec![b'v'; 1024])))
        .collect();
    let request = Request::PutAll {
        expiration: Expiration::DEFAULT,
        entries,
    };
    assert_eq!(c.call(request).status(), Status::Success);

    let before_mib = resident_mib();
    let mut slow = HotRod::connect(server.addr, 40);
    let mut bytes = BytesMut::new();
    let requests = 200;
    for _ in 0..requests {
        let header = slow.header();
        slow.encode_into(&mut bytes, &header, &Request::BulkGet { count: 0 });
    }
    slow.send_raw(&bytes);
    let mut peak_mib = before_mib;
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        peak_mib = peak_mib.max(resident_mib());
    }
    let grown_mib = peak_mib - before_mib;
    assert!(
        grown_mib < 100,
        "the server holds {grown_mib} MiB for a client that reads nothing"
    );
}
