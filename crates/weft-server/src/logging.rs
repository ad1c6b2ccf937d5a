//! How the `weft` command logs: which events (`WEFT_LOG`, a `tracing` filter), in which form
//! (`WEFT_LOG_FORMAT`: `text` for people, `json` for log collectors), and whether in colour
//! (only on a terminal).
//!
//! Both variables are checked before anything else runs: a filter that does not parse, or
//! that names a target where a level was meant (`WEFT_LOG=degub` would otherwise enable a
//! target called `degub` and silence everything else), stops the command with the reason,
//! rather than leaving the server silent.
//!
//! Consensus (openraft) logs with raw numeric node ids and repeats itself many times a
//! second while a member is unreachable; Weft logs what matters of it in its own words
//! (members up and down, the coordinator, topologies), with node names. Its target is
//! therefore off unless the filter names it (`WEFT_LOG=info,openraft=warn`).

use std::fmt::Write as _;
use std::io::IsTerminal;

/// The environment variable holding the filter.
pub const FILTER_VARIABLE: &str = "WEFT_LOG";
/// The environment variable holding the format.
pub const FORMAT_VARIABLE: &str = "WEFT_LOG_FORMAT";
/// The filter when `WEFT_LOG` is unset or empty: starts, stops, members, topologies and
/// warnings.
pub const DEFAULT_FILTER: &str = "info";
/// Targets of dependencies that are off unless the filter names them, and why.
const QUIETED_TARGETS: &[&str] = &[
    // Raft's own log: numeric ids, and a line per failed heartbeat while a member is down.
    "openraft",
];
/// The levels a bare directive may name.
const LEVELS: &[&str] = &["trace", "debug", "info", "warn", "error", "off"];

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// One line per event for people: time, level, message, fields.
    Text,
    /// One JSON object per line (`timestamp`, `level`, `target`, `message` and the event's
    /// fields at the top level), for log collectors.
    Json,
}

/// Why logging could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoggingError {
    /// `WEFT_LOG` does not parse, or names a target where a level was meant.
    #[error(
        "{FILTER_VARIABLE}=`{value}` is not a log filter: {reason} (examples: `info`, `debug`, `warn,weft::audit=info`, `info,weft_grid=debug`)"
    )]
    Filter {
        /// The variable's value.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `WEFT_LOG_FORMAT` is neither `text` nor `json`.
    #[error("{FORMAT_VARIABLE}=`{0}` is not a log format: use `text` (the default) or `json`")]
    Format(String),
}

/// What logging was asked for, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogSettings {
    /// The filter in force: the one asked for (or the default) plus the quieted targets it
    /// does not name.
    pub filter: String,
    /// How lines are written.
    pub format: LogFormat,
    /// Whether text lines carry ANSI colour codes.
    pub colour: bool,
}

impl LogSettings {
    /// The settings the environment asks for: `WEFT_LOG`, `WEFT_LOG_FORMAT`, and colour
    /// when standard output (where the log goes) is a terminal and `NO_COLOR` is unset.
    ///
    /// # Errors
    /// If `WEFT_LOG` or `WEFT_LOG_FORMAT` holds something invalid (see [`LoggingError`]).
    pub fn from_environment() -> Result<Self, LoggingError> {
        let filter = std::env::var(FILTER_VARIABLE).ok();
        let format = std::env::var(FORMAT_VARIABLE).ok();
        // https://no-color.org: set to anything but the empty string, colour is off.
        let no_colour = std::env::var_os("NO_COLOR").is_some_and(|value| !value.is_empty());
        Self::new(
            filter.as_deref(),
            format.as_deref(),
            std::io::stdout().is_terminal() && !no_colour,
        )
    }

    /// The settings for a filter and a format as the variables would hold them (`None` or
    /// empty: the defaults), writing to a terminal when `terminal`.
    ///
    /// # Errors
    /// If the filter or the format is invalid (see [`LoggingError`]).
    pub fn new(
        filter: Option<&str>,
        format: Option<&str>,
        terminal: bool,
    ) -> Result<Self, LoggingError> {
        let format = match format.map(str::trim).unwrap_or_default() {
            "" | "text" => LogFormat::Text,
            "json" => LogFormat::Json,
            other => return Err(LoggingError::Format(other.to_owned())),
        };
        let asked = filter.map(str::trim).unwrap_or_default();
        let asked = if asked.is_empty() {
            DEFAULT_FILTER
        } else {
            asked
        };
        let filter = effective_filter(asked).map_err(|reason| LoggingError::Filter {
            value: asked.to_owned(),
            reason,
        })?;
        Ok(Self {
            filter,
            format,
            // Collectors parse JSON lines; colour codes would only corrupt them.
            colour: terminal && format == LogFormat::Text,
        })
    }

    /// Installs the global subscriber. Lines go to standard output.
    ///
    /// # Errors
    /// If the filter does not parse (checked already by [`LogSettings::new`]) or a global
    /// subscriber is installed already.
    pub fn init(&self) -> Result<(), LoggingError> {
        let filter = tracing_subscriber::EnvFilter::builder()
            .parse(&self.filter)
            .map_err(|error| LoggingError::Filter {
                value: self.filter.clone(),
                reason: error.to_string(),
            })?;
        let installed = match self.format {
            LogFormat::Text => tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_target(false)
                .with_ansi(self.colour)
                .try_init(),
            LogFormat::Json => tracing_subscriber::fmt()
                .with_env_filter(filter)
                .json()
                .flatten_event(true)
                .with_current_span(false)
                .with_span_list(false)
                .with_ansi(false)
                .try_init(),
        };
        installed.map_err(|error| LoggingError::Filter {
            value: self.filter.clone(),
            reason: format!("cannot install it: {error}"),
        })
    }
}

/// `asked` checked, with `target=off` added for each quieted target it does not name.
fn effective_filter(asked: &str) -> Result<String, String> {
    let directives: Vec<&str> = asked
        .split(',')
        .map(str::trim)
        .filter(|directive| !directive.is_empty())
        .collect();
    for directive in &directives {
        // `target`, `target[span]` or `[span]` without `=`: tracing reads a bare word as a
        // target enabled at every level, which silences everything else. That is almost
        // always a misspelt level, so it is refused; `target=trace` says it explicitly.
        if !directive.contains('=') && !LEVELS.contains(&directive.to_ascii_lowercase().as_str()) {
            return Err(format!(
                "`{directive}` is not a level ({}); to choose a target's level write `{directive}=debug`",
                LEVELS.join(", ")
            ));
        }
    }
    let mut filter = directives.join(",");
    tracing_subscriber::EnvFilter::builder()
        .parse(&filter)
        .map_err(|error| error.to_string())?;
    for target in QUIETED_TARGETS {
        let named = directives
            .iter()
            .any(|directive| directive.starts_with(target));
        if !named {
            // `fmt::Write` for `String` cannot fail.
            let _ = write!(filter, ",{target}=off");
        }
    }
    Ok(filter)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the defaults: `info` with openraft off, text, colour only on a terminal.
    #[test]
    fn defaults() {
        let settings = LogSettings::new(None, None, true).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(settings.filter, "info,openraft=off");
        assert_eq!(settings.format, LogFormat::Text);
        assert!(settings.colour);
        let piped =
            LogSettings::new(Some(""), Some("text"), false).unwrap_or_else(|e| panic!("{e}"));
        assert!(!piped.colour);
        let json = LogSettings::new(None, Some("json"), true).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(json.format, LogFormat::Json);
        assert!(!json.colour, "JSON lines never carry colour codes");
    }

    // Proves a filter naming openraft keeps it, and others get it quieted.
    #[test]
    fn openraft_is_off_unless_named() {
        let named = LogSettings::new(Some("debug,openraft=warn"), None, false)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(named.filter, "debug,openraft=warn");
        let other = LogSettings::new(Some("warn, weft::audit=info"), None, false)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(other.filter, "warn,weft::audit=info,openraft=off");
    }

    // Proves invalid filters and formats are refused with the reason, not ignored.
    #[test]
    fn invalid_settings_are_refused() {
        for (filter, fragment) in [
            ("degub", "`degub` is not a level"),
            ("info,weft_server=loud", "weft_server=loud"),
            ("weft_grid", "write `weft_grid=debug`"),
        ] {
            let error = LogSettings::new(Some(filter), None, false)
                .err()
                .unwrap_or_else(|| panic!("{filter} accepted"));
            let text = error.to_string();
            assert!(text.starts_with("WEFT_LOG=`"), "{text}");
            assert!(
                text.contains(fragment) || text.contains("invalid"),
                "{filter}: {text}"
            );
        }
        let error = LogSettings::new(None, Some("xml"), false)
            .err()
            .unwrap_or_else(|| panic!("xml accepted"));
        assert!(error.to_string().contains("use `text`"), "{error}");
    }
}
