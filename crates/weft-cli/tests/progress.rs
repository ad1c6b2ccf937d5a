//! `cluster rebalance` followed against a fake server whose rebalance report advances
//! request by request: what the live progress shows, when it stops, and when it gives up.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

use serde_json::{Value, json};
use weft_cli::client::{Client, ServerUrl};
use weft_cli::progress::follow_lines;

/// Serves `reports` in order to successive requests (the last one again once they run
/// out), `requests_max` requests at most; the server's address.
fn fake_server(reports: Vec<Value>, requests_max: usize) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for served in 0..requests_max {
            let Ok((mut stream, _)) = listener.accept() else {
                return;
            };
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            assert!(
                head.starts_with(b"GET /rest/v2/cluster/rebalance HTTP/1.1\r\n"),
                "{}",
                String::from_utf8_lossy(&head)
            );
            let body = reports[served.min(reports.len() - 1)].to_string();
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    address
}

fn report(phase_number: u64, done: u64, confirmed: u64, progress: f64) -> Value {
    let phase = [
        "stable",
        "read-old-write-all",
        "read-all-write-all",
        "read-new-write-all",
    ][usize::try_from(phase_number).unwrap()];
    json!({
        "node_name": "c",
        "rebalancing": phase_number != 0,
        "caches": [
            {"cache": "default", "phase": phase, "phase_number": phase_number,
             "segments_total": if phase_number == 0 { 0 } else { 100 }, "segments_done": done,
             "members_total": if phase_number == 0 { 0 } else { 3 }, "members_confirmed": confirmed,
             "progress": progress, "degraded": false, "members": []},
            {"cache": "still", "phase": "stable", "phase_number": 0, "segments_total": 0,
             "segments_done": 0, "members_total": 0, "members_confirmed": 0, "progress": 1.0,
             "degraded": false, "members": []}
        ]
    })
}

fn client(address: &str) -> Client {
    Client::new(ServerUrl::parse(address).unwrap(), None, None).unwrap()
}

// Proves the live progress prints a line each time a cache's rebalance moves (not on every
// poll), up to its end, and that the final report says no rebalance is under way.
#[test]
fn progress_lines_follow_the_rebalance_to_its_end() {
    let reports = vec![
        report(1, 10, 0, 0.033),
        report(1, 10, 0, 0.033),
        report(1, 60, 1, 0.2),
        report(2, 100, 0, 0.333),
        report(3, 100, 2, 0.889),
        report(0, 0, 0, 1.0),
    ];
    let address = fake_server(reports, 10);
    let mut lines = Vec::new();
    let output = follow_lines(
        &client(&address),
        Duration::from_secs(30),
        Duration::from_millis(1),
        &mut lines,
    )
    .unwrap();
    assert_eq!(
        String::from_utf8(lines).unwrap(),
        "default: 3% phase 1/3 read-old-write-all, 10/100 segments, 0/3 members confirmed\n\
         still: stable\n\
         default: 20% phase 1/3 read-old-write-all, 60/100 segments, 1/3 members confirmed\n\
         default: 33% phase 2/3 read-all-write-all, 100/100 segments, 0/3 members confirmed\n\
         default: 89% phase 3/3 read-new-write-all, 100/100 segments, 2/3 members confirmed\n\
         default: stable\n"
    );
    assert!(
        output.text.ends_with("No rebalance under way.\n"),
        "{}",
        output.text
    );
    assert_eq!(output.json["rebalancing"], false);
}

// Proves a rebalance that does not end within the time given is a failure naming where it
// stands, and that polling stops there.
#[test]
fn a_rebalance_that_does_not_end_times_out() {
    let address = fake_server(vec![report(1, 10, 0, 0.033)], 1_000);
    let mut lines = Vec::new();
    let error = follow_lines(
        &client(&address),
        Duration::from_millis(100),
        Duration::from_millis(10),
        &mut lines,
    )
    .unwrap_err();
    assert_eq!(error.exit_code(), weft_cli::EXIT_FAILED);
    assert!(
        error
            .to_string()
            .starts_with("still rebalancing after 0.1 s: default: 3% phase 1/3"),
        "{error}"
    );
}
