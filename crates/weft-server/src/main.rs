//! The `weft` command: `weft server [--config FILE]` runs a server; `weft cluster members`
//! and `weft cluster topology` show a running cluster through a node's REST endpoint;
//! `weft store check` and `weft store repair` examine and cut the file stores of a data
//! directory no server has open; `weft cli` is a shell (and scriptable commands) over a
//! server's REST API.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use weft_server::config::ServerConfig;

/// The server's allocator: mimalloc (measured in `docs/benchmarks.md`: glibc's malloc was a
/// sixth of a cluster's CPU, contended between worker threads). Applications embedding the
/// crates choose their own.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Weft, a distributed in-memory data grid: one port speaks Hot Rod (Infinispan's clients),
/// RESP (Redis clients), memcached and REST.
#[derive(Debug, Parser)]
#[command(name = "weft", version, after_help = AFTER_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// What `weft --help` ends with: a first command, the logging variables, the manuals.
const AFTER_HELP: &str = "\
Start here:
  weft server                      a server on 127.0.0.1:11222 with one cache, `default`
  redis-cli -p 11222 SET k v       then any Redis, memcached, Hot Rod or HTTP client
  curl localhost:11222/metrics     Prometheus metrics

Logging (every command):
  WEFT_LOG=debug                   a tracing filter: a level, or `target=level` pairs
                                   (default `info`; e.g. `warn,weft::audit=info`)
  WEFT_LOG_FORMAT=json             one JSON object per line, for log collectors
  NO_COLOR=1                       no colour even on a terminal (never in files and pipes)

Documentation: docs/configuration.md, docs/operations.md.";

/// What `weft server --help` ends with.
const SERVER_AFTER_HELP: &str = "\
Examples:
  weft server
  weft server --config weft.toml
  weft server --bind 127.0.0.1:11223 --node-name b --cluster-listen 127.0.0.1:7801 \\
      --join 127.0.0.1:7800,127.0.0.1:7801,127.0.0.1:7802

The log goes to standard output (WEFT_LOG, WEFT_LOG_FORMAT: see `weft --help`).";

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a server (every protocol on one port); Ctrl-C or SIGTERM stops it cleanly.
    #[command(after_help = SERVER_AFTER_HELP)]
    Server {
        /// Configuration file (TOML). Without one: cache `default` on 127.0.0.1:11222.
        #[arg(short, long, env = "WEFT_CONFIG")]
        config: Option<PathBuf>,
        /// Address (IP:PORT) every protocol listens on, overriding the configuration file
        /// (default 127.0.0.1:11222; another than loopback needs users or a password).
        #[arg(short, long, env = "WEFT_BIND")]
        bind: Option<std::net::SocketAddr>,
        /// Nodes to join (`host:port` of their cluster address, comma-separated), adding to
        /// the configuration file's `join`.
        #[arg(long, env = "WEFT_JOIN", value_delimiter = ',')]
        join: Vec<String>,
        /// Cluster address: UDP for membership, TCP for the rest, on one port number
        /// (default 127.0.0.1:7800 when joining).
        #[arg(long, env = "WEFT_CLUSTER_LISTEN")]
        cluster_listen: Option<std::net::SocketAddr>,
        /// This node's name in the cluster (default: its bind address).
        #[arg(long, env = "WEFT_NODE_NAME")]
        node_name: Option<String>,
        /// The secret every node of the cluster shares, overriding `cluster-secret`
        /// (prefer the environment variable: a command line is visible to other users).
        #[arg(long, env = "WEFT_CLUSTER_SECRET", hide_env_values = true)]
        cluster_secret: Option<String>,
        /// Directory for file stores, overriding the configuration file's `data-dir`
        /// (default: ./weft-data on a node on its own, ./weft-data/NODE-NAME in a cluster).
        #[arg(long, env = "WEFT_DATA_DIR")]
        data_dir: Option<PathBuf>,
    },
    /// Check or repair the file stores of a data directory no server has open.
    Store {
        /// What to do.
        #[command(subcommand)]
        action: StoreAction,
        /// A data directory, a directory of per-node data directories, or one store's
        /// directory: every file store in it is checked.
        #[arg(
            long,
            global = true,
            env = "WEFT_DATA_DIR",
            default_value = weft_server::config::DATA_DIR_DEFAULT
        )]
        data_dir: PathBuf,
    },
    /// Create, change, remove and list the users of a users file (`[security] users-file`);
    /// a running server picks changes up by itself.
    User {
        /// What to do.
        #[command(subcommand)]
        action: UserAction,
        /// The users file.
        #[arg(
            long,
            global = true,
            env = "WEFT_USERS_FILE",
            default_value = "users.toml"
        )]
        users_file: PathBuf,
    },
    /// A shell for a running server: caches, entries, statistics, the cluster and its
    /// rebalancing, users, shutdown (`weft cli -c "cache list"` runs one command and exits;
    /// see docs/cli.md).
    Cli(weft_cli::Options),
    /// Show a running cluster, as one of its nodes sees it.
    Cluster {
        /// What to show.
        #[command(subcommand)]
        show: ClusterShow,
        /// A node's address: its client port, where REST is served (default
        /// 127.0.0.1:11222, a server on this machine).
        #[arg(long, global = true, env = "WEFT_SERVER")]
        server: Option<String>,
        /// The user to authenticate as (a server with a users file needs one).
        #[arg(long, global = true, env = "WEFT_USER")]
        user: Option<String>,
        /// Its password.
        #[arg(long, global = true, env = "WEFT_PASSWORD", hide_env_values = true)]
        password: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum UserAction {
    /// Add a user.
    Create {
        /// Its name.
        name: String,
        /// Its password (read from standard input when absent; prefer that or the
        /// environment variable: a command line is visible to other users).
        #[arg(long, env = "WEFT_USER_PASSWORD", hide_env_values = true)]
        password: Option<String>,
        /// Its groups, comma-separated (each grants the role of its name, e.g. admin,
        /// application, observer).
        #[arg(long, value_delimiter = ',')]
        groups: Vec<String>,
    },
    /// Set a user's password.
    Password {
        /// The user.
        name: String,
        /// The new password (read from standard input when absent).
        #[arg(long, env = "WEFT_USER_PASSWORD", hide_env_values = true)]
        password: Option<String>,
    },
    /// Set a user's groups (replacing those it had).
    Groups {
        /// The user.
        name: String,
        /// Its groups, comma-separated.
        #[arg(long, value_delimiter = ',')]
        groups: Vec<String>,
    },
    /// Remove a user.
    Remove {
        /// The user.
        name: String,
    },
    /// List the users and their groups.
    List,
}

/// The password given, or one line read from standard input.
fn password_or_stdin(password: Option<String>) -> anyhow::Result<String> {
    if let Some(password) = password {
        return Ok(password);
    }
    use std::io::IsTerminal;
    if std::io::stdin().is_terminal() {
        eprint!("Password (shown as typed): ");
    }
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .context("read the password from standard input")?;
    Ok(line.trim_end_matches(['\r', '\n']).to_owned())
}

#[derive(Debug, Subcommand)]
enum StoreAction {
    /// Read every record of every data file and verify its checksum; report per file what
    /// is intact and where the first bad bytes are. Exit status 1 when a store is damaged,
    /// 2 when the check could not be made (a store in use, an unreadable file).
    Check,
    /// Cut each damaged data file back to its intact records and report what was cut.
    /// Exit status 2 when the repair could not be made.
    Repair,
}

/// The node `weft cluster` asks when told none.
const CLUSTER_SERVER_DEFAULT: &str = "127.0.0.1:11222";

/// Exit status of `weft store` when it could not do its work.
const STORE_FAILED: u8 = 2;

#[derive(Debug, Subcommand)]
enum ClusterShow {
    /// Members and the coordinator.
    Members,
    /// Every clustered cache's topology: phase, segments per member, transfer progress,
    /// DEGRADED state.
    Topology {
        /// Also list each segment's owners (primary first).
        #[arg(long)]
        segments: bool,
    },
}

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(error) => {
            eprintln!("Error: {error:?}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    weft_server::logging::LogSettings::from_environment()?.init()?;
    match cli.command {
        Command::Server {
            config,
            bind,
            join,
            cluster_listen,
            node_name,
            cluster_secret,
            data_dir,
        } => {
            let mut config = match config {
                Some(path) => ServerConfig::load(&path)?,
                None => ServerConfig::default(),
            };
            if let Some(bind) = bind {
                config.server.bind = bind;
            }
            config.server.join.extend(join);
            if cluster_listen.is_some() {
                config.server.cluster_listen = cluster_listen;
            }
            if node_name.is_some() {
                config.server.node_name = node_name;
            }
            if cluster_secret.is_some() {
                config.server.cluster_secret = cluster_secret;
            }
            if data_dir.is_some() {
                config.server.data_dir = data_dir;
            }
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .thread_name("weft-worker")
                .build()
                .context("start the async runtime")?;
            runtime.block_on(weft_server::run_until_signal(config))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Store { action, data_dir } => {
            let outcome = match action {
                StoreAction::Check => weft_server::store_cli::check(&data_dir)
                    .map(|outcome| (outcome.report, u8::from(outcome.damaged))),
                StoreAction::Repair => weft_server::store_cli::repair(&data_dir).map(|r| (r, 0)),
            };
            match outcome {
                Ok((report, code)) => {
                    print!("{report}");
                    Ok(ExitCode::from(code))
                }
                Err(error) => {
                    eprintln!("Error: {error:?}");
                    Ok(ExitCode::from(STORE_FAILED))
                }
            }
        }
        Command::User { action, users_file } => {
            use weft_server::users_cli;
            let text = match action {
                UserAction::Create {
                    name,
                    password,
                    groups,
                } => users_cli::create(&users_file, &name, &password_or_stdin(password)?, groups)?,
                UserAction::Password { name, password } => {
                    users_cli::password(&users_file, &name, &password_or_stdin(password)?)?
                }
                UserAction::Groups { name, groups } => {
                    users_cli::groups(&users_file, &name, groups)?
                }
                UserAction::Remove { name } => users_cli::remove(&users_file, &name)?,
                UserAction::List => users_cli::list(&users_file)?,
            };
            print!("{text}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Cli(options) => {
            let users: weft_cli::UsersFile = Box::new(weft_server::users_cli::shell_command);
            Ok(ExitCode::from(weft_cli::run(options, Some(users))))
        }
        Command::Cluster {
            show,
            server,
            user,
            password,
        } => {
            let credentials = user
                .as_deref()
                .map(|user| (user, password.as_deref().unwrap_or_default()));
            // Without --server, say which node was asked: a person expecting their
            // cluster may be reading a local test server's answer, or its absence.
            let server = server.unwrap_or_else(|| {
                eprintln!("asking {CLUSTER_SERVER_DEFAULT} (no --server or WEFT_SERVER given)");
                CLUSTER_SERVER_DEFAULT.to_owned()
            });
            let report = weft_server::cli::topology(&server, credentials)?;
            let text = match show {
                ClusterShow::Members => weft_server::cli::members_text(&report),
                ClusterShow::Topology { segments } => {
                    weft_server::cli::topology_text(&report, segments)
                }
            };
            print!("{text}");
            Ok(ExitCode::SUCCESS)
        }
    }
}
