//! What can go wrong in a command, said for the person who typed it, and the exit status
//! each kind of failure maps to.

/// Exit status of a command (or a whole run) that succeeded.
pub const EXIT_OK: u8 = 0;
/// Exit status of a command that was understood but failed: the server refused it, could
/// not be reached, or the entry or cache does not exist.
pub const EXIT_FAILED: u8 = 1;
/// Exit status of a command that was not understood: unknown command, missing or malformed
/// arguments, a value that does not decode in the encoding named.
pub const EXIT_USAGE: u8 = 2;

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CliError {
    /// The command line is wrong; the message says how.
    #[error("{0}")]
    Usage(String),
    /// No connection could be made to the server.
    #[error("cannot connect to {url}: {reason}")]
    Connect {
        /// The URL tried.
        url: String,
        /// What the operating system or TLS said.
        reason: String,
    },
    /// The connection broke, or the answer was not HTTP we understand.
    #[error("no answer from {url}: {reason}")]
    Exchange {
        /// The URL tried.
        url: String,
        /// What went wrong.
        reason: String,
    },
    /// The server answered with an error status.
    #[error("the server answered {status}: {message}")]
    Http {
        /// The status line's code and reason, e.g. `404 Not Found`.
        status: String,
        /// The server's own message (its response body), or a hint when it sent none.
        message: String,
    },
    /// The server answered, but not what the command expected.
    #[error("unexpected answer from the server: {0}")]
    Answer(String),
    /// Something on this machine failed (reading a file, the terminal).
    #[error("{0}")]
    Local(String),
}

impl CliError {
    /// The exit status this failure maps to.
    #[must_use]
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Usage(_) => EXIT_USAGE,
            _ => EXIT_FAILED,
        }
    }

    /// A usage error with `message`.
    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Self::Usage(message.into())
    }
}
