//! `weft cli` as a real process: commands given as arguments or piped to its standard
//! input, its output and exit status collected, within a time limit.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one `weft cli` run may take.
pub const CLI_TIME_LIMIT: Duration = Duration::from_secs(120);

/// What a `weft cli` run did.
#[derive(Debug)]
pub struct Ran {
    /// Its exit status (`None`: killed by a signal).
    pub code: Option<i32>,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

impl Ran {
    /// Stdout's lines parsed as JSON documents (one per command with `--json`).
    pub fn json_lines(&self) -> Vec<serde_json::Value> {
        self.stdout
            .lines()
            .map(|line| {
                serde_json::from_str(line)
                    .unwrap_or_else(|error| panic!("not JSON ({error}): {line}\n{self:?}"))
            })
            .collect()
    }
}

/// Runs `weft cli ARGS` with `input` on its standard input (a pipe, never a terminal) and
/// `env` added to its environment (WEFT_* variables of the test's own environment removed).
pub fn cli(args: &[&str], input: &str, env: &[(&str, &str)]) -> Ran {
    let mut command = Command::new(env!("CARGO_BIN_EXE_weft"));
    command
        .arg("cli")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (name, _) in std::env::vars() {
        if name.starts_with("WEFT_") {
            command.env_remove(name);
        }
    }
    command.envs(env.iter().copied());
    let mut child = command.spawn().expect("start weft cli");
    let mut stdin = child.stdin.take().expect("a stdin pipe");
    let input = input.to_owned();
    let writer = std::thread::spawn(move || {
        // The CLI may exit before reading everything (a failed -c): that is not an error.
        let _ = stdin.write_all(input.as_bytes());
    });
    let mut stdout = child.stdout.take().expect("a stdout pipe");
    let mut stderr = child.stderr.take().expect("a stderr pipe");
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + CLI_TIME_LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for weft cli") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            panic!(
                "`weft cli {}` still runs after {CLI_TIME_LIMIT:?}",
                args.join(" ")
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let _ = writer.join();
    Ran {
        code: status.code(),
        stdout: out.join().expect("stdout read"),
        stderr: err.join().expect("stderr read"),
    }
}

/// Runs `weft cli --server URL -c COMMAND …` for each of `commands`.
pub fn commands(url: &str, commands: &[&str]) -> Ran {
    let mut args = vec!["--server", url];
    for command in commands {
        args.extend(["-c", command]);
    }
    cli(&args, "", &[])
}
