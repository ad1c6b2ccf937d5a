//! LATENCY: Redis' latency monitor and per-command latency histograms.
//!
//! The monitor records, when `latency-monitor-threshold` (CONFIG, milliseconds) is above 0,
//! every command that took at least that long, as the event `command` (or `fast-command`
//! for commands Redis flags fast): per event the 160 latest seconds that had one (the
//! worst of each second) and the worst ever, as redis-server keeps them. Weft has no fork,
//! AOF or eviction cycles to time, so those events never appear.
//!
//! The histograms (`LATENCY HISTOGRAM`) come from the command statistics: every call's
//! duration in power-of-two buckets from 1 µs, shown as Redis shows its HDR histograms'
//! logarithmic iteration (cumulative counts at 1, 2, 4, 8, 16, 32, 65, 131 … µs).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use parking_lot::Mutex;

use crate::resp::table::{COMMANDS, CommandSpec, lookup};
use crate::resp::{Reply, Session};

/// Samples kept per event (Redis' `LATENCY_TS_LEN`).
const SAMPLES_MAX: usize = 160;

/// One event's samples: (second, worst milliseconds in it), oldest first.
#[derive(Debug, Default)]
struct Series {
    samples: std::collections::VecDeque<(u64, u64)>,
    max: u64,
}

/// The latency monitor.
#[derive(Debug, Default)]
pub struct LatencyMonitor {
    /// `latency-monitor-threshold` in milliseconds; 0 records nothing.
    threshold_ms: AtomicU64,
    events: Mutex<BTreeMap<&'static str, Series>>,
}

impl LatencyMonitor {
    /// Follows CONFIG SET of `latency-monitor-threshold`.
    pub fn configure(&self, name: &str, value: &str) {
        if name == "latency-monitor-threshold"
            && let Ok(ms) = value.parse::<u64>()
        {
            self.threshold_ms.store(ms, Ordering::Relaxed);
        }
    }

    /// A command that took `took`: an event if the monitor is on and it took long enough.
    pub fn command(&self, spec: &CommandSpec, took: Duration) {
        let threshold = self.threshold_ms.load(Ordering::Relaxed);
        if threshold == 0 {
            return;
        }
        let ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
        if ms < threshold {
            return;
        }
        let event = if spec.flags.contains(&"fast") {
            "fast-command"
        } else {
            "command"
        };
        self.add(event, ms, now_secs());
    }

    fn add(&self, event: &'static str, ms: u64, now: u64) {
        let mut events = self.events.lock();
        let series = events.entry(event).or_default();
        series.max = series.max.max(ms);
        if let Some(last) = series.samples.back_mut()
            && last.0 == now
        {
            last.1 = last.1.max(ms);
            return;
        }
        if series.samples.len() == SAMPLES_MAX {
            series.samples.pop_front();
        }
        series.samples.push_back((now, ms));
    }
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// `LATENCY LATEST | HISTORY event | RESET [event ...] | GRAPH event | DOCTOR |
/// HISTOGRAM [command ...] | HELP`.
pub fn latency(session: &mut Session, args: &[Bytes], reply: &mut Reply<'_>) {
    let monitor = &session.context.latency;
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    match (sub.as_str(), args.len()) {
        ("latest", 2) => {
            let events = monitor.events.lock();
            reply.array(events.len());
            for (event, series) in events.iter() {
                let (at, ms) = series.samples.back().copied().unwrap_or_default();
                reply.array(4);
                reply.bulk(event.as_bytes());
                reply.integer(int(at));
                reply.integer(int(ms));
                reply.integer(int(series.max));
            }
        }
        ("history", 3) => {
            let events = monitor.events.lock();
            let event = String::from_utf8_lossy(&args[2]);
            match events.get(event.as_ref()) {
                None => reply.array(0),
                Some(series) => {
                    reply.array(series.samples.len());
                    for (at, ms) in &series.samples {
                        reply.array(2);
                        reply.integer(int(*at));
                        reply.integer(int(*ms));
                    }
                }
            }
        }
        ("reset", _) => {
            let mut events = monitor.events.lock();
            let reset = if args.len() == 2 {
                let count = events.len();
                events.clear();
                count
            } else {
                args[2..]
                    .iter()
                    .filter(|event| {
                        events
                            .remove(String::from_utf8_lossy(event).as_ref())
                            .is_some()
                    })
                    .count()
            };
            reply.integer(i64::try_from(reset).unwrap_or(i64::MAX));
        }
        ("graph", 3) => {
            let events = monitor.events.lock();
            let event = String::from_utf8_lossy(&args[2]);
            match events.get(event.as_ref()) {
                Some(series) if !series.samples.is_empty() => {
                    reply.verbatim(&graph(&event, series, now_secs()));
                }
                _ => reply.error(&format!("ERR No samples available for event '{event}'")),
            }
        }
        ("doctor", 2) => {
            let events = monitor.events.lock();
            reply.verbatim(&doctor(
                &events,
                monitor.threshold_ms.load(Ordering::Relaxed),
            ));
        }
        ("histogram", _) => histogram(session, &args[2..], reply),
        ("help", 2) => {
            let help = [
                "LATENCY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "DOCTOR",
                "    Return a human readable latency analysis report.",
                "GRAPH <event>",
                "    Return an ASCII latency graph for the <event> class.",
                "HISTORY <event>",
                "    Return time-latency samples for the <event> class.",
                "LATEST",
                "    Return the latest latency samples for all events.",
                "RESET [<event> ...]",
                "    Reset latency data of one or more <event> classes.",
                "    (default: reset all data for all event classes)",
                "HISTOGRAM [COMMAND ...]",
                "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
                "    If no commands are specified then all histograms are replied.",
                "HELP",
                "    Print this help.",
            ];
            reply.array(help.len());
            for line in help {
                reply.simple(line);
            }
        }
        _ => reply.error(&format!(
            "ERR unknown subcommand or wrong number of arguments for '{sub}'. Try LATENCY HELP."
        )),
    }
}

/// A command's name, calls, and points of its cumulative distribution (µs, calls).
type Histogram = (&'static str, u64, Vec<(u64, u64)>);

/// `LATENCY HISTOGRAM [command ...]`: per command that ran, its calls and the cumulative
/// distribution of their durations; the named commands only, when some are named (unknown
/// names are left out, as Redis does).
fn histogram(session: &Session, names: &[Bytes], reply: &mut Reply<'_>) {
    let stats = &session.context.command_stats;
    let chosen: Vec<(usize, &'static CommandSpec)> = if names.is_empty() {
        COMMANDS.iter().enumerate().collect()
    } else {
        let mut chosen: Vec<(usize, &'static CommandSpec)> = Vec::new();
        for name in names {
            if let Some(spec) = lookup(name)
                && let Some(at) = crate::resp::table::index_of(spec)
                && !chosen.iter().any(|(seen, _)| *seen == at)
            {
                chosen.push((at, spec));
            }
        }
        chosen
    };
    let shown: Vec<Histogram> = chosen
        .into_iter()
        .filter_map(|(at, spec)| {
            let (calls, buckets) = stats.histogram(at);
            (calls > 0).then(|| (spec.name, calls, cumulative(&buckets)))
        })
        .collect();
    reply.map(shown.len());
    for (name, calls, points) in shown {
        reply.bulk(name.as_bytes());
        reply.map(2);
        reply.bulk(b"calls");
        reply.integer(int(calls));
        reply.bulk(b"histogram_usec");
        reply.map(points.len());
        for (micros, count) in points {
            reply.integer(int(micros));
            reply.integer(int(count));
        }
    }
}

/// The points Redis shows of a histogram: at each bucket's bound (1024 ns · 2^k, in whole
/// microseconds), the count of calls up to it, where that count grew.
fn cumulative(buckets: &[u64]) -> Vec<(u64, u64)> {
    let mut points = Vec::new();
    let mut total = 0;
    for (k, count) in buckets.iter().enumerate() {
        if *count == 0 {
            continue;
        }
        total += count;
        let bound_ns = 1024u64.saturating_mul(1u64 << k.min(50)) - 1;
        points.push((bound_ns / 1000, total));
    }
    points
}

/// An ASCII chart of an event's samples, newest on the right: one column per sample, its
/// height the milliseconds relative to the worst shown, with each sample's age below.
fn graph(event: &str, series: &Series, now: u64) -> String {
    const ROWS: u64 = 8;
    let worst = series.samples.iter().map(|(_, ms)| *ms).max().unwrap_or(0);
    let least = series.samples.iter().map(|(_, ms)| *ms).min().unwrap_or(0);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{event} - high {worst} ms, low {least} ms (all time high {} ms)",
        series.max
    );
    let _ = writeln!(out, "{}", "-".repeat(80));
    for row in (1..=ROWS).rev() {
        let line: String = series
            .samples
            .iter()
            .map(|(_, ms)| {
                let height = (ms * ROWS).checked_div(worst).unwrap_or(0);
                if height >= row { '#' } else { ' ' }
            })
            .collect();
        let _ = writeln!(out, "{}", line.trim_end());
    }
    let _ = writeln!(out, "{}", "_".repeat(series.samples.len()));
    let ages: Vec<String> = series
        .samples
        .iter()
        .map(|(at, _)| {
            let age = now.saturating_sub(*at);
            if age < 60 {
                format!("{age}s")
            } else if age < 3600 {
                format!("{}m", age / 60)
            } else {
                format!("{}h", age / 3600)
            }
        })
        .collect();
    let _ = writeln!(out, "ages, oldest first: {}", ages.join(" "));
    out
}

/// LATENCY DOCTOR's report: what each event recorded, and what to look at.
fn doctor(events: &BTreeMap<&'static str, Series>, threshold_ms: u64) -> String {
    if events.is_empty() {
        return if threshold_ms == 0 {
            "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Weft \
             server. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in \
             order to enable it.\n"
                .to_owned()
        } else {
            "Dave, no latency spike was observed during the lifetime of this Weft server, not \
             in the slightest bit. I honestly think you ought to sleep better tonight.\n"
                .to_owned()
        };
    }
    let mut out = String::from(
        "Dave, I have observed latency spikes in this Weft server. What follows is a report.\n\n",
    );
    for (n, (event, series)) in events.iter().enumerate() {
        let count = series.samples.len() as u64;
        let sum: u64 = series.samples.iter().map(|(_, ms)| ms).sum();
        let average = sum / count.max(1);
        let deviation = series
            .samples
            .iter()
            .map(|(_, ms)| ms.abs_diff(average))
            .sum::<u64>()
            / count.max(1);
        let period = match (series.samples.front(), series.samples.back()) {
            (Some(first), Some(last)) if count > 1 => (last.0 - first.0) / (count - 1),
            _ => 0,
        };
        let _ = writeln!(
            out,
            "{}. {event}: {count} latency spikes (average {average}ms, mean deviation \
             {deviation}ms, period {period} sec). Worst all time event {}ms.",
            n + 1,
            series.max
        );
    }
    out.push_str(
        "\nI have a few advices for you:\n\n- Check your Slow Log to understand what are the \
         commands you are running which are too slow to execute. Please check \
         https://redis.io/commands/slowlog for more information.\n- Commands over large \
         collections (KEYS, SORT, set operations, long scripts) run alone on their keys; \
         prefer SCAN and smaller batches.\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_sample_per_second_keeps_the_worst() {
        let monitor = LatencyMonitor::default();
        monitor.add("command", 5, 100);
        monitor.add("command", 9, 100);
        monitor.add("command", 3, 100);
        monitor.add("command", 4, 101);
        let events = monitor.events.lock();
        let series = &events["command"];
        assert_eq!(series.samples, [(100, 9), (101, 4)]);
        assert_eq!(series.max, 9);
    }

    #[test]
    fn at_most_160_samples() {
        let monitor = LatencyMonitor::default();
        for second in 0..200 {
            monitor.add("command", 1, second);
        }
        let events = monitor.events.lock();
        assert_eq!(events["command"].samples.len(), SAMPLES_MAX);
        assert_eq!(events["command"].samples.front(), Some(&(40, 1)));
    }

    #[test]
    fn cumulative_points_are_at_redis_bounds() {
        let mut buckets = vec![0; 12];
        buckets[0] = 3;
        buckets[2] = 1;
        buckets[6] = 2;
        assert_eq!(cumulative(&buckets), [(1, 3), (4, 4), (65, 6)]);
    }
}
