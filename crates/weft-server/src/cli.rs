//! `weft cluster …`: reads a node's `GET /rest/v2/cluster/topology` and prints it for people.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::Value;

/// The topology report of the node at `server` (`host:port`, or an `http://` URL), asked
/// with HTTP Basic `credentials` (user, password) when given (a server with users needs them).
///
/// # Errors
/// If the node cannot be reached or does not answer with a report.
pub fn topology(server: &str, credentials: Option<(&str, &str)>) -> anyhow::Result<Value> {
    let address = server
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let mut stream =
        TcpStream::connect(&address).with_context(|| format!("connect to {address}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let authorization = credentials.map_or_else(String::new, |(user, password)| {
        use base64::Engine;
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        format!("Authorization: Basic {token}\r\n")
    });
    let request = format!(
        "GET /rest/v2/cluster/topology HTTP/1.1\r\nHost: {address}\r\n{authorization}Connection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes())?;
    let mut response = Vec::new();
    stream
        .read_to_end(&mut response)
        .with_context(|| format!("read the answer of {address}"))?;
    let response = String::from_utf8_lossy(&response);
    let Some((head, body)) = response.split_once("\r\n\r\n") else {
        bail!("{address} answered something that is not HTTP");
    };
    if !head.starts_with("HTTP/1.1 200") {
        let status = head.lines().next().unwrap_or_default();
        bail!("{address} answered {status}: {body}");
    }
    serde_json::from_str(body).with_context(|| format!("{address} answered malformed JSON"))
}

/// Members, their cluster addresses, and the coordinator.
#[must_use]
pub fn members_text(report: &Value) -> String {
    let coordinator = report["coordinator"].as_str().unwrap_or("(electing)");
    let mut out = String::new();
    let _ = writeln!(
        out,
        "as seen by {}; coordinator: {coordinator}",
        report["node_name"].as_str().unwrap_or("?")
    );
    for member in report["members"].as_array().into_iter().flatten() {
        let name = member["name"].as_str().unwrap_or("?");
        let marker = if name == coordinator { " *" } else { "" };
        let _ = writeln!(
            out,
            "  {name}{marker}\t{}",
            member["address"].as_str().unwrap_or("")
        );
    }
    out
}

/// Each clustered cache's topology; with `segments`, every segment's owners too.
#[must_use]
pub fn topology_text(report: &Value, segments: bool) -> String {
    let mut out = members_text(report);
    for cache in report["caches"].as_array().into_iter().flatten() {
        let owners = cache["owners"].as_array().cloned().unwrap_or_default();
        let _ = writeln!(
            out,
            "cache {}: topology {} ({}){}, {} segments",
            cache["cache"].as_str().unwrap_or("?"),
            cache["topology_id"],
            cache["phase"].as_str().unwrap_or("?"),
            if cache["degraded"].as_bool() == Some(true) {
                ", DEGRADED"
            } else {
                ""
            },
            owners.len()
        );
        for member in cache["members"].as_array().into_iter().flatten() {
            let name = member.as_str().unwrap_or("?");
            let count = |primary: bool| {
                owners
                    .iter()
                    .filter(|segment| {
                        let ids = segment.as_array().cloned().unwrap_or_default();
                        if primary {
                            ids.first().and_then(Value::as_str) == Some(name)
                        } else {
                            ids.iter().any(|id| id.as_str() == Some(name))
                        }
                    })
                    .count()
            };
            let _ = writeln!(
                out,
                "  {name}: primary of {}, owner of {}",
                count(true),
                count(false)
            );
        }
        let transfer = &cache["transfer"];
        if transfer["segments_total"].as_u64().unwrap_or(0) > 0 {
            let _ = writeln!(
                out,
                "  state transfer here: {}/{} segments, {} entries",
                transfer["segments_done"], transfer["segments_total"], transfer["entries"]
            );
        }
        if segments {
            for (segment, ids) in owners.iter().enumerate() {
                let ids: Vec<&str> = ids
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                let _ = writeln!(out, "  segment {segment}: {}", ids.join(", "));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the report of a rebalancing, DEGRADED cache reads as a person expects.
    #[test]
    fn topology_reads_well() {
        let report = serde_json::json!({
            "node_name": "a",
            "coordinator": "b",
            "members": [{"name": "a", "address": "127.0.0.1:7800"}, {"name": "b", "address": "127.0.0.1:7801"}],
            "caches": [{
                "cache": "default", "topology_id": 7, "phase": "read-old-write-all", "degraded": true,
                "members": ["a", "b"], "owners": [["a", "b"], ["b", "a"], ["b"]],
                "transfer": {"segments_total": 2, "segments_done": 1, "entries": 10}
            }]
        });
        let text = topology_text(&report, true);
        assert!(text.contains("coordinator: b"), "{text}");
        assert!(text.contains("  b *\t127.0.0.1:7801"), "{text}");
        assert!(
            text.contains("topology 7 (read-old-write-all), DEGRADED, 3 segments"),
            "{text}"
        );
        assert!(text.contains("  a: primary of 1, owner of 2"), "{text}");
        assert!(text.contains("  b: primary of 2, owner of 3"), "{text}");
        assert!(text.contains("1/2 segments, 10 entries"), "{text}");
        assert!(text.contains("  segment 2: b"), "{text}");
    }
}
