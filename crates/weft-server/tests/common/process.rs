//! `weft` as a real process, for tests of what a process does: a server started with any
//! arguments in any working directory (its output kept in files, read after it exits), and
//! short commands (`weft store check`) run to completion within a time limit.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

/// How long a short `weft` command may take.
pub const COMMAND_TIME_LIMIT: Duration = Duration::from_secs(60);

/// A `weft` process whose stdout and stderr go to files; killed on drop.
pub struct Weft {
    child: Child,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Weft {
    /// Starts `weft ARGS` in `cwd`, its output in `logs/NAME.stdout` and `.stderr`.
    pub fn spawn(cwd: &Path, args: &[&str], logs: &Path, name: &str) -> Self {
        let stdout = logs.join(format!("{name}.stdout"));
        let stderr = logs.join(format!("{name}.stderr"));
        let child = Command::new(env!("CARGO_BIN_EXE_weft"))
            .args(args)
            .current_dir(cwd)
            .stdout(std::fs::File::create(&stdout).expect("a stdout file"))
            .stderr(std::fs::File::create(&stderr).expect("a stderr file"))
            .spawn()
            .expect("start weft");
        Self {
            child,
            stdout,
            stderr,
        }
    }

    /// Its process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` (`-TERM`, `-KILL`).
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill {signal} {}", self.child.id());
    }

    /// Waits up to `limit` for the process to exit; its status, or `None` if it still runs.
    pub fn exit_within(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for weft") {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What it wrote to stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// What it wrote to stdout so far (its log).
    pub fn stdout(&self) -> String {
        std::fs::read_to_string(&self.stdout).unwrap_or_default()
    }
}

impl Drop for Weft {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a short `weft` command did.
#[derive(Debug)]
pub struct Finished {
    /// Its exit code (`None`: killed by a signal).
    pub code: Option<i32>,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

/// Runs `weft ARGS` in `cwd` to completion, failing the test past [`COMMAND_TIME_LIMIT`].
pub fn run(cwd: &Path, args: &[&str]) -> Finished {
    let logs = tempfile::tempdir().expect("a directory for the output");
    let mut weft = Weft::spawn(cwd, args, logs.path(), "command");
    let status = weft.exit_within(COMMAND_TIME_LIMIT).unwrap_or_else(|| {
        panic!(
            "`weft {}` still runs after {COMMAND_TIME_LIMIT:?}",
            args.join(" ")
        )
    });
    Finished {
        code: status.code(),
        stdout: weft.stdout(),
        stderr: weft.stderr(),
    }
}

/// Waits until something accepts connections at `addr`; panics after `limit`.
pub fn wait_listening(addr: SocketAddr, limit: Duration) {
    let deadline = Instant::now() + limit;
    while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        assert!(
            Instant::now() < deadline,
            "nothing listens on {addr} after {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
