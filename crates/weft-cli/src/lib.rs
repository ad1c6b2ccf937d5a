//! `weft-cli` is `weft cli`: an interactive shell (history, Tab completion) and the same
//! commands non-interactively (`-c`, scripts, exit statuses), for a person or a script
//! managing a Weft server — caches, entries, statistics, the cluster and its rebalancing,
//! users, shutdown. `docs/cli.md` lists every command and its JSON shape.
//!
//! It owns the command language ([`command`]), how results are shown ([`output`]: aligned
//! tables, or one JSON document per command), and the HTTP client it talks through
//! ([`client`]).
//!
//! It must not reach into a server: it knows Weft only through the REST API (`/rest/v2`,
//! `docs/rest.md`), as any remote tool would, so it depends on no other Weft crate. The one
//! thing REST does not offer, editing a users file, is handed in by the binary
//! ([`UsersFile`]).

pub mod client;
pub mod command;
pub mod encoding;
pub mod error;
pub mod output;
pub mod progress;
pub mod session;
pub mod shell;

pub use error::{CliError, EXIT_FAILED, EXIT_OK, EXIT_USAGE};
pub use session::UsersFile;
pub use shell::{Options, run};
