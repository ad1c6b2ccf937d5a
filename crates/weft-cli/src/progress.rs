//! The cluster commands' output: members, topology, and the rebalance followed live —
//! progress bars on a terminal (indicatif), a line per change anywhere else (a log, a CI
//! job, a test), and one final table or JSON document on stdout either way.

use std::io::Write;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::client::{Client, Method, Request};
use crate::error::CliError;
use crate::output::{Output, Table, cell};

/// How often `cluster rebalance` asks for progress.
pub const POLL_INTERVAL: Duration = Duration::from_millis(250);
/// Resolution of a progress bar (the report's 0–1 progress times this).
const BAR_STEPS: u64 = 1_000;

/// Where live progress goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Display {
    /// Progress bars on stderr, a terminal.
    Bars,
    /// A line on stderr each time a cache's progress changes.
    Lines,
    /// Nothing (`--json` runs, which print the final report only).
    Quiet,
}

impl Display {
    /// Bars when stderr is a terminal, lines otherwise.
    #[must_use]
    pub fn for_stderr() -> Self {
        use std::io::IsTerminal;
        if std::io::stderr().is_terminal() {
            Self::Bars
        } else {
            Self::Lines
        }
    }
}

/// `cluster members`: who is in the cluster as the node asked sees it.
#[must_use]
pub fn members_output(report: &Value) -> Output {
    let coordinator = report["coordinator"].as_str().unwrap_or_default();
    let mut table = Table::new(&["NAME", "ADDRESS", "ROLE"]);
    let members: Vec<Value> = report["members"].as_array().cloned().unwrap_or_default();
    for member in &members {
        let name = cell(&member["name"]);
        let role = if name == coordinator {
            "coordinator"
        } else {
            ""
        };
        table.row(vec![name, cell(&member["address"]), role.to_owned()]);
    }
    let text = format!(
        "As seen by {}; coordinator: {}\n{}",
        cell(&report["node_name"]),
        if coordinator.is_empty() {
            "(electing)"
        } else {
            coordinator
        },
        table.render()
    );
    let json = json!({
        "node_name": report["node_name"],
        "coordinator": report["coordinator"],
        "members": members,
    });
    Output::new(text, json)
}

/// `cluster topology`: each clustered cache's topology; with `segments`, every segment's
/// owners. The JSON is the server's report as it is.
#[must_use]
pub fn topology_output(report: &Value, segments: bool) -> Output {
    let mut out = members_output(report).text;
    let caches: Vec<Value> = report["caches"].as_array().cloned().unwrap_or_default();
    if caches.is_empty() {
        out.push_str("\nNo clustered caches.\n");
    }
    for cache in &caches {
        let owners: Vec<Vec<String>> = cache["owners"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|ids| ids.as_array().into_iter().flatten().map(cell).collect())
            .collect();
        out.push_str(&format!(
            "\nCache {}: topology {}, {}{}, {} segments\n",
            cell(&cache["cache"]),
            cell(&cache["topology_id"]),
            cell(&cache["phase"]),
            if cache["degraded"].as_bool() == Some(true) {
                ", DEGRADED"
            } else {
                ""
            },
            owners.len()
        ));
        let mut table = Table::new(&["MEMBER", "PRIMARY OF", "OWNER OF"]);
        for member in cache["members"].as_array().into_iter().flatten() {
            let name = cell(member);
            let primary = owners
                .iter()
                .filter(|ids| ids.first() == Some(&name))
                .count();
            let owner = owners.iter().filter(|ids| ids.contains(&name)).count();
            table.row(vec![name, primary.to_string(), owner.to_string()]);
        }
        out.push_str(&table.render());
        let transfer = &cache["transfer"];
        if transfer["segments_total"].as_u64().unwrap_or(0) > 0 {
            out.push_str(&format!(
                "State transfer here: {}/{} segments, {} entries\n",
                cell(&transfer["segments_done"]),
                cell(&transfer["segments_total"]),
                cell(&transfer["entries"])
            ));
        }
        if segments {
            let mut table = Table::new(&["SEGMENT", "OWNERS"]);
            for (segment, ids) in owners.iter().enumerate() {
                table.row(vec![segment.to_string(), ids.join(", ")]);
            }
            out.push_str(&table.render());
        }
    }
    Output::new(out, report.clone())
}

/// One cache's rebalance in a line: `default: 40% phase 1/3 read-old-write-all, 68/171
/// segments, 1/3 members confirmed`, or `default: stable`.
#[must_use]
pub fn progress_line(cache: &Value) -> String {
    let name = cell(&cache["cache"]);
    let phase_number = cache["phase_number"].as_u64().unwrap_or(0);
    let degraded = if cache["degraded"].as_bool() == Some(true) {
        ", DEGRADED"
    } else {
        ""
    };
    if phase_number == 0 {
        return format!("{name}: stable{degraded}");
    }
    format!(
        "{name}: {} phase {phase_number}/3 {}, {}/{} segments, {}/{} members confirmed{degraded}",
        percent(cache),
        cell(&cache["phase"]),
        cell(&cache["segments_done"]),
        cell(&cache["segments_total"]),
        cell(&cache["members_confirmed"]),
        cell(&cache["members_total"]),
    )
}

fn percent(cache: &Value) -> String {
    let progress = cache["progress"].as_f64().unwrap_or(0.0).clamp(0.0, 1.0);
    format!("{:.0}%", progress * 100.0)
}

/// The final report of `cluster rebalance`: a table for people, the server's report as it
/// is for scripts.
#[must_use]
pub fn rebalance_output(report: &Value) -> Output {
    let caches: Vec<Value> = report["caches"].as_array().cloned().unwrap_or_default();
    let mut table = Table::new(&[
        "CACHE",
        "PHASE",
        "PROGRESS",
        "SEGMENTS",
        "CONFIRMED",
        "DEGRADED",
    ]);
    for cache in &caches {
        let phase_number = cache["phase_number"].as_u64().unwrap_or(0);
        let phase = if phase_number == 0 {
            "stable".to_owned()
        } else {
            format!("{phase_number}/3 {}", cell(&cache["phase"]))
        };
        let counts = |done: &str, total: &str| {
            if phase_number == 0 {
                "-".to_owned()
            } else {
                format!("{}/{}", cell(&cache[done]), cell(&cache[total]))
            }
        };
        table.row(vec![
            cell(&cache["cache"]),
            phase,
            percent(cache),
            counts("segments_done", "segments_total"),
            counts("members_confirmed", "members_total"),
            if cache["degraded"].as_bool() == Some(true) {
                "yes"
            } else {
                "no"
            }
            .to_owned(),
        ]);
    }
    let text = if caches.is_empty() {
        "No clustered caches.\n".to_owned()
    } else if report["rebalancing"].as_bool() == Some(true) {
        table.render()
    } else {
        format!("{}No rebalance under way.\n", table.render())
    };
    Output::new(text, report.clone())
}

/// Draws live progress.
trait Live {
    fn show(&mut self, report: &Value);
    fn finish(&mut self);
}

/// A line per change.
struct Lines<'a> {
    out: &'a mut dyn Write,
    last: std::collections::BTreeMap<String, String>,
}

impl Live for Lines<'_> {
    fn show(&mut self, report: &Value) {
        for cache in report["caches"].as_array().into_iter().flatten() {
            let line = progress_line(cache);
            let name = cell(&cache["cache"]);
            if self.last.get(&name) != Some(&line) {
                let _ = writeln!(self.out, "{line}");
                self.last.insert(name, line);
            }
        }
        let _ = self.out.flush();
    }

    fn finish(&mut self) {}
}

/// A bar per cache.
struct Bars {
    bars: indicatif::MultiProgress,
    by_cache: std::collections::BTreeMap<String, indicatif::ProgressBar>,
}

impl Live for Bars {
    fn show(&mut self, report: &Value) {
        for cache in report["caches"].as_array().into_iter().flatten() {
            let name = cell(&cache["cache"]);
            let bar = self.by_cache.entry(name.clone()).or_insert_with(|| {
                let bar = self.bars.add(indicatif::ProgressBar::new(BAR_STEPS));
                let style = indicatif::ProgressStyle::with_template(
                    "{prefix:>12} [{bar:30}] {percent:>3}% {msg}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> ");
                bar.set_style(style);
                bar.set_prefix(name.clone());
                bar
            });
            let progress = cache["progress"].as_f64().unwrap_or(0.0).clamp(0.0, 1.0);
            bar.set_position((progress * BAR_STEPS as f64) as u64);
            let line = progress_line(cache);
            let detail = line
                .split_once(": ")
                .map_or(line.as_str(), |(_, rest)| rest);
            // The percentage is drawn by the bar itself.
            let detail = detail.split_once("% ").map_or(detail, |(_, rest)| rest);
            bar.set_message(detail.to_owned());
        }
    }

    fn finish(&mut self) {
        for bar in self.by_cache.values() {
            bar.finish();
        }
    }
}

/// `cluster rebalance`: asks the server for each clustered cache's rebalance every
/// `interval`, drawing progress on `display`, until no cache is rebalancing (or at once with
/// `once`); then the final report.
///
/// # Errors
/// When the server cannot be asked, or a rebalance is still under way after `timeout`.
pub fn follow(
    client: &Client,
    once: bool,
    timeout: Duration,
    interval: Duration,
    display: &Display,
) -> Result<Output, CliError> {
    let mut stderr = std::io::stderr();
    let mut live: Option<Box<dyn Live + '_>> = match display {
        Display::Quiet => None,
        Display::Lines => Some(Box::new(Lines {
            out: &mut stderr,
            last: std::collections::BTreeMap::new(),
        })),
        Display::Bars => Some(Box::new(Bars {
            bars: indicatif::MultiProgress::with_draw_target(
                indicatif::ProgressDrawTarget::stderr(),
            ),
            by_cache: std::collections::BTreeMap::new(),
        })),
    };
    follow_with(client, once, timeout, interval, live.as_deref_mut())
}

/// As [`follow`], drawing progress as lines on `out`.
///
/// # Errors
/// As [`follow`].
pub fn follow_lines(
    client: &Client,
    timeout: Duration,
    interval: Duration,
    out: &mut dyn Write,
) -> Result<Output, CliError> {
    let mut lines = Lines {
        out,
        last: std::collections::BTreeMap::new(),
    };
    follow_with(client, false, timeout, interval, Some(&mut lines))
}

fn follow_with(
    client: &Client,
    once: bool,
    timeout: Duration,
    interval: Duration,
    mut live: Option<&mut (dyn Live + '_)>,
) -> Result<Output, CliError> {
    let deadline = Instant::now() + timeout;
    loop {
        let report = client
            .call(Request::new(Method::Get, "/rest/v2/cluster/rebalance"))?
            .json()?;
        let rebalancing = report["rebalancing"].as_bool() == Some(true);
        if once {
            return Ok(rebalance_output(&report));
        }
        if let Some(live) = live.as_deref_mut() {
            live.show(&report);
        }
        if !rebalancing {
            if let Some(live) = live.as_deref_mut() {
                live.finish();
            }
            return Ok(rebalance_output(&report));
        }
        if Instant::now() + interval > deadline {
            if let Some(live) = live.as_deref_mut() {
                live.finish();
            }
            let still: Vec<String> = report["caches"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|cache| cache["phase_number"].as_u64().unwrap_or(0) != 0)
                .map(progress_line)
                .collect();
            return Err(CliError::Local(format!(
                "still rebalancing after {} s: {}",
                timeout.as_secs_f64(),
                still.join("; ")
            )));
        }
        std::thread::sleep(interval);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a rebalance reads as one line per cache, and a stable cache as just that.
    #[test]
    fn progress_reads_as_lines() {
        let moving = json!({
            "cache": "default", "phase": "read-old-write-all", "phase_number": 1,
            "segments_total": 171, "segments_done": 68, "members_total": 3,
            "members_confirmed": 1, "progress": 0.1326, "degraded": false
        });
        assert_eq!(
            progress_line(&moving),
            "default: 13% phase 1/3 read-old-write-all, 68/171 segments, 1/3 members confirmed"
        );
        let stable = json!({"cache": "x", "phase": "stable", "phase_number": 0, "progress": 1.0});
        assert_eq!(progress_line(&stable), "x: stable");
        let report = json!({"rebalancing": false, "caches": [stable]});
        let output = rebalance_output(&report);
        assert!(
            output.text.contains("No rebalance under way."),
            "{}",
            output.text
        );
        assert!(
            output.text.contains("x      stable  100%"),
            "{}",
            output.text
        );
    }
}
