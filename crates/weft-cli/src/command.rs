//! The shell's command language, as clap parses it: every line of the shell, every `-c`
//! and every line of a script is one [`Line`]. `help` and `help COMMAND` come from here too.

use clap::{Args, Parser, Subcommand, ValueEnum};

/// One command line.
#[derive(Debug, Parser)]
#[command(
    name = "weft",
    no_binary_name = true,
    disable_version_flag = true,
    override_usage = "COMMAND [ARGS] [--json]",
    help_template = "Commands:\n{subcommands}\n\nEvery command takes --json: one JSON document on one line instead of text.\n`help COMMAND` tells more, e.g. `help put` or `help cache create`.\n"
)]
pub struct Line {
    /// What to do.
    #[command(subcommand)]
    pub command: ShellCommand,
    /// Print the result as one JSON document (see docs/cli.md for each command's shape).
    #[arg(long, global = true)]
    pub json: bool,
}

/// A command.
#[derive(Debug, Subcommand)]
pub enum ShellCommand {
    /// Connect to a server (checks that it answers, and with the credentials given).
    Connect(Connect),
    /// List, create, describe, clear and remove caches.
    #[command(subcommand)]
    Cache(CacheCommand),
    /// Read an entry's value.
    Get(Get),
    /// Write an entry.
    Put(Put),
    /// Remove an entry.
    Remove(Remove),
    /// List a cache's keys.
    Keys(Listing),
    /// List a cache's entries (keys and values).
    Entries(Entries),
    /// Statistics of the server (all caches summed) or of one cache.
    Stats(Stats),
    /// Members, topology and rebalancing of the cluster.
    #[command(subcommand)]
    Cluster(ClusterCommand),
    /// Create, change, remove and list the users of a users file, on this machine (the
    /// server has no REST API for users; it re-reads the file within 2 s of a change).
    #[command(subcommand)]
    User(UserCommand),
    /// Stop the server (`POST /rest/v2/server?action=stop`; needs the admin role, a
    /// loopback connection, or the server's password).
    Shutdown,
    /// Leave the shell.
    #[command(alias = "exit")]
    Quit,
}

/// `connect`.
#[derive(Debug, Args, Clone, Default)]
pub struct Connect {
    /// The server: `host:port`, `http://host:port` or `https://host:port` (default: the
    /// one connected to, or given to `weft cli --server`).
    pub url: Option<String>,
    /// The user to authenticate as (HTTP Basic), where the server has users.
    #[arg(long)]
    pub user: Option<String>,
    /// Its password.
    #[arg(long)]
    pub password: Option<String>,
    /// PEM file of the CA that signed the server's certificate (for `https://`).
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<std::path::PathBuf>,
}

/// `cache …`.
#[derive(Debug, Subcommand)]
pub enum CacheCommand {
    /// The caches' names.
    List,
    /// Create a cache from a template or a configuration file (neither: the defaults).
    #[command(group(clap::ArgGroup::new("source").args(["template", "file"])))]
    Create {
        /// Its name.
        name: String,
        /// A template: org.infinispan.LOCAL, REPL_SYNC, REPL_ASYNC, DIST_SYNC, DIST_ASYNC
        /// (the `org.infinispan.` prefix may be left out).
        #[arg(long, short)]
        template: Option<String>,
        /// A configuration file: JSON (Infinispan's or Weft's shape) or TOML (by its
        /// extension, else by its first character).
        #[arg(long, short, value_name = "FILE")]
        file: Option<std::path::PathBuf>,
    },
    /// A cache's configuration, size and statistics.
    Describe {
        /// The cache.
        name: String,
    },
    /// Remove every entry of a cache.
    Clear {
        /// The cache.
        name: String,
    },
    /// Remove a cache and its data.
    Remove {
        /// The cache.
        name: String,
    },
}

/// How values are written on the command line and shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum Encoding {
    /// UTF-8 text (stored as its bytes, labelled `text/plain`).
    #[default]
    Text,
    /// JSON: checked and stored as compact JSON, labelled `application/json`, shown pretty.
    Json,
    /// Bytes as hex digits (`application/octet-stream`).
    Hex,
    /// Bytes as Base64 (`application/octet-stream`).
    Base64,
}

/// How keys are written on the command line and shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum KeyEncoding {
    /// UTF-8 text.
    #[default]
    Text,
    /// Bytes as hex digits (with or without `0x`).
    Hex,
    /// Bytes as Base64.
    Base64,
}

/// `get`.
#[derive(Debug, Args)]
pub struct Get {
    /// The cache.
    pub cache: String,
    /// The key.
    pub key: String,
    /// How to show the value.
    #[arg(long, short, value_enum, default_value_t)]
    pub encoding: Encoding,
    /// How the key is written.
    #[arg(long, value_enum, default_value_t)]
    pub key_encoding: KeyEncoding,
}

/// `put`.
#[derive(Debug, Args)]
pub struct Put {
    /// The cache.
    pub cache: String,
    /// The key.
    pub key: String,
    /// The value, in the `--encoding` given (or `--file`).
    #[arg(required_unless_present = "file", conflicts_with = "file")]
    pub value: Option<String>,
    /// Take the value's bytes from a file instead.
    #[arg(long, short, value_name = "FILE")]
    pub file: Option<std::path::PathBuf>,
    /// How the value is written.
    #[arg(long, short, value_enum, default_value_t)]
    pub encoding: Encoding,
    /// How the key is written.
    #[arg(long, value_enum, default_value_t)]
    pub key_encoding: KeyEncoding,
    /// Lifespan: whole seconds, or with a unit (`90s`, `10m`, `2h`, `1d`); `-1` never.
    #[arg(long, allow_hyphen_values = true)]
    pub lifespan: Option<String>,
    /// Maximum idle time, as `--lifespan`.
    #[arg(long, allow_hyphen_values = true)]
    pub max_idle: Option<String>,
    /// Write only if the key has no entry (fails otherwise).
    #[arg(long)]
    pub if_absent: bool,
}

/// `remove`.
#[derive(Debug, Args)]
pub struct Remove {
    /// The cache.
    pub cache: String,
    /// The key.
    pub key: String,
    /// How the key is written.
    #[arg(long, value_enum, default_value_t)]
    pub key_encoding: KeyEncoding,
}

/// `keys`.
#[derive(Debug, Args)]
pub struct Listing {
    /// The cache.
    pub cache: String,
    /// At most this many.
    #[arg(long, short)]
    pub limit: Option<u64>,
    /// How to show keys.
    #[arg(long, value_enum, default_value_t)]
    pub key_encoding: KeyEncoding,
}

/// `entries`.
#[derive(Debug, Args)]
pub struct Entries {
    /// The cache.
    pub cache: String,
    /// At most this many.
    #[arg(long, short)]
    pub limit: Option<u64>,
    /// How to show keys and values: text, or exact bytes as hex or Base64 (both), or values
    /// as JSON.
    #[arg(long, short, value_enum, default_value_t)]
    pub encoding: Encoding,
    /// Also each entry's lifespan, max idle and version.
    #[arg(long)]
    pub metadata: bool,
}

/// `stats`.
#[derive(Debug, Args)]
pub struct Stats {
    /// The cache (default: every cache, summed).
    pub cache: Option<String>,
}

/// `cluster …`.
#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// The members and the coordinator.
    Members,
    /// Each clustered cache's topology: phase, members, segments, state transfer here.
    Topology {
        /// Also each segment's owners (primary first).
        #[arg(long)]
        segments: bool,
    },
    /// Follow the rebalance of every clustered cache with progress bars until all are
    /// stable (a rebalance starts when members join, leave or die).
    Rebalance {
        /// Show where it stands now and return.
        #[arg(long)]
        once: bool,
        /// Give up (exit status 1) after this many seconds.
        #[arg(long, default_value_t = 600)]
        timeout: u64,
    },
}

/// `user …`: the users file lives beside the server, so these run on this machine.
#[derive(Debug, Subcommand, Clone)]
pub enum UserCommand {
    /// Add a user.
    Create {
        /// Its name.
        name: String,
        /// Its password.
        #[arg(long)]
        password: String,
        /// Its groups, comma-separated (each grants the role of its name: admin,
        /// application, observer, …).
        #[arg(long, value_delimiter = ',')]
        groups: Vec<String>,
        /// The users file.
        #[arg(long, env = "WEFT_USERS_FILE", default_value = "users.toml")]
        users_file: std::path::PathBuf,
    },
    /// Set a user's password.
    Password {
        /// The user.
        name: String,
        /// The new password.
        #[arg(long)]
        password: String,
        /// The users file.
        #[arg(long, env = "WEFT_USERS_FILE", default_value = "users.toml")]
        users_file: std::path::PathBuf,
    },
    /// Set a user's groups (replacing those it had).
    Groups {
        /// The user.
        name: String,
        /// Its groups, comma-separated.
        #[arg(long, value_delimiter = ',')]
        groups: Vec<String>,
        /// The users file.
        #[arg(long, env = "WEFT_USERS_FILE", default_value = "users.toml")]
        users_file: std::path::PathBuf,
    },
    /// Remove a user.
    Remove {
        /// The user.
        name: String,
        /// The users file.
        #[arg(long, env = "WEFT_USERS_FILE", default_value = "users.toml")]
        users_file: std::path::PathBuf,
    },
    /// List the users and their groups.
    List {
        /// The users file.
        #[arg(long, env = "WEFT_USERS_FILE", default_value = "users.toml")]
        users_file: std::path::PathBuf,
    },
}

/// Parses one command line's words.
///
/// # Errors
/// clap's error: a usage error, or the help asked for (`help`, `--help`), which the
/// caller prints as it is.
pub fn parse(words: &[String]) -> Result<Line, clap::Error> {
    Line::try_parse_from(words)
}

/// The clap description of the language, for completion.
#[must_use]
pub fn definition() -> clap::Command {
    <Line as clap::CommandFactory>::command()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    // Proves the grammar is consistent (clap's own checks) and reads typical lines.
    #[test]
    fn grammar_reads_lines() {
        definition().debug_assert();
        let line = parse(&words("put c k v --lifespan 10m --json")).expect("a put");
        assert!(line.json);
        let ShellCommand::Put(put) = line.command else {
            panic!("not a put");
        };
        assert_eq!(put.lifespan.as_deref(), Some("10m"));
        assert!(
            parse(&words("put c k")).is_err(),
            "a put needs a value or --file"
        );
        assert!(parse(&words("cache create x --template a --file b")).is_err());
        assert!(matches!(
            parse(&words("exit")).map(|line| line.command),
            Ok(ShellCommand::Quit)
        ));
        let help = parse(&words("help")).expect_err("help is shown as an error");
        assert_eq!(help.kind(), clap::error::ErrorKind::DisplayHelp);
    }
}
