//! `weft cli` as its users run it: the built binary against a real server, with commands
//! given by `-c`, in a script, piped to the shell, and typed on a terminal (tmux). Covers
//! every command, the exit statuses (0 ok, 1 failed, 2 not understood), the JSON shapes,
//! errors that name what went wrong, credentials, TLS and shutdown.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::TestServer;
use common::certificates::{Ca, Files};
use common::cli::{Ran, cli, commands};
use serde_json::{Value, json};

fn url(server: &TestServer) -> String {
    format!("http://{}", server.addr)
}

#[track_caller]
fn succeeded(ran: &Ran) {
    assert_eq!(ran.code, Some(0), "{ran:#?}");
}

#[track_caller]
fn failed_with(ran: &Ran, code: i32, message: &str) {
    assert_eq!(ran.code, Some(code), "{ran:#?}");
    assert!(ran.stderr.contains(message), "{message:?} not in {ran:#?}");
}

/// The one JSON document a `--json` run printed.
#[track_caller]
fn json_of(ran: &Ran) -> Value {
    succeeded(ran);
    let mut documents = ran.json_lines();
    assert_eq!(documents.len(), 1, "{ran:#?}");
    documents.remove(0)
}

// Proves caches are listed, created from a template and from JSON and TOML files,
// described (configuration, size, statistics), cleared and removed, with the JSON shapes
// docs/cli.md documents and the server's message when it refuses.
#[test]
fn caches_are_created_described_and_removed() {
    let server = TestServer::start();
    let url = url(&server);
    let dir = tempfile::tempdir().unwrap();
    let json_file = dir.path().join("orders.json");
    std::fs::write(
        &json_file,
        r#"{"local-cache": {"memory": {"max-count": "100"}}}"#,
    )
    .unwrap();
    let toml_file = dir.path().join("sessions.conf");
    std::fs::write(
        &toml_file,
        "segments = 64\n[expiration]\nlifespan = \"10m\"\n",
    )
    .unwrap();

    assert_eq!(
        json_of(&commands(&url, &["cache list --json"])),
        json!(["default"])
    );
    let created = commands(
        &url,
        &[
            "cache create plain --template LOCAL --json",
            &format!("cache create orders --file {}", json_file.display()),
            &format!("cache create sessions -f {}", toml_file.display()),
        ],
    );
    succeeded(&created);
    assert!(
        created
            .stdout
            .starts_with("{\"cache\":\"plain\",\"created\":true}\n"),
        "{created:#?}"
    );
    assert!(
        created.stdout.contains("Created cache `sessions`."),
        "{created:#?}"
    );
    let listed = commands(&url, &["cache list"]);
    succeeded(&listed);
    assert_eq!(listed.stdout, "default\norders\nplain\nsessions\n");

    let described = json_of(&commands(
        &url,
        &["put sessions k v", "cache describe sessions --json"],
    ));
    assert_eq!(described["cache"], "sessions");
    assert_eq!(described["size"], 1);
    assert_eq!(described["mode"], "LOCAL");
    assert_eq!(described["configuration"]["local-cache"]["segments"], 64);
    assert_eq!(described["statistics"]["stores"], 1);
    let described = commands(&url, &["cache describe orders"]);
    succeeded(&described);
    for part in [
        "CACHE   MODE   SIZE  BOUNDED  STATISTICS",
        "orders  LOCAL  0     true",
        "Configuration:",
        "\"max-count\": 100",
        "Statistics:",
        "stores ",
    ] {
        assert!(
            described.stdout.contains(part),
            "{part:?} not in {described:#?}"
        );
    }

    succeeded(&commands(
        &url,
        &["cache clear sessions", "cache remove orders"],
    ));
    assert_eq!(
        json_of(&commands(&url, &["cache describe sessions --json"]))["size"],
        0
    );
    failed_with(
        &commands(&url, &["cache remove orders"]),
        1,
        "404 Not Found: cache `orders` does not exist",
    );
    failed_with(
        &commands(&url, &["cache create x --template NOPE"]),
        1,
        "ISPN000436",
    );
    failed_with(
        &commands(&url, &["cache create x --file /nonexistent.json"]),
        1,
        "read /nonexistent.json",
    );
}

// Proves entries are written, read, listed and removed in every encoding (text, hex,
// Base64, JSON; keys as text, hex or Base64), with lifespans and put-if-absent, and that
// statistics follow.
#[test]
fn entries_round_trip_in_every_encoding() {
    let server = TestServer::start();
    let url = url(&server);
    let ran = commands(
        &url,
        &[
            "put default greeting hello",
            "get default greeting",
            "put default bin 00ff61 --encoding hex",
            "get default bin --encoding base64",
            "get default bin",
            "put default 0x6b31 one --key-encoding hex",
            "get default k1",
            "get default azE= --key-encoding base64",
            "put default doc '{\"a\": [1, 2]}' --encoding json",
            "get default doc --encoding json",
            "put default 'with space/slash' x",
            "get default 'with space/slash'",
        ],
    );
    succeeded(&ran);
    assert_eq!(
        ran.stdout,
        "hello\nAP9h\n\u{0}\\xffa\none\none\n{\n  \"a\": [\n    1,\n    2\n  ]\n}\nx\n"
    );
    assert_eq!(
        json_of(&commands(&url, &["get default doc --encoding json --json"])),
        json!({"cache": "default", "key": "doc", "value": {"a": [1, 2]}, "encoding": "json"})
    );
    assert_eq!(
        json_of(&commands(
            &url,
            &["put default ttl v --lifespan 10m --max-idle 90 --json"]
        )),
        json!({"cache": "default", "key": "ttl", "stored": true})
    );
    let listed = json_of(&commands(&url, &["entries default --metadata --json"]));
    let ttl = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["key"] == "ttl")
        .unwrap();
    assert_eq!(
        (
            ttl["timeToLiveSeconds"].as_i64(),
            ttl["maxIdleTimeSeconds"].as_i64()
        ),
        (Some(600), Some(90))
    );
    let table = commands(&url, &["entries default --metadata"]);
    succeeded(&table);
    assert!(table.stdout.starts_with("KEY "), "{table:#?}");
    assert!(
        table
            .stdout
            .lines()
            .any(|line| line.starts_with("ttl") && line.contains("600s") && line.contains("90s")),
        "{table:#?}"
    );
    let hex = json_of(&commands(&url, &["entries default --encoding hex --json"]));
    assert!(
        hex.as_array()
            .unwrap()
            .contains(&json!({"key": "62696e", "value": "00ff61"})),
        "{hex}"
    );
    let hex_keys = json_of(&commands(&url, &["keys default --key-encoding hex --json"]));
    assert!(
        hex_keys.as_array().unwrap().contains(&json!("62696e")),
        "{hex_keys}"
    );
    // A text key that happens to start with `0x` is shown as it is.
    let literal = json_of(&commands(
        &url,
        &[
            "put default 0xkey literal",
            "entries default --json",
            "remove default 0xkey",
        ],
    ));
    assert!(
        literal
            .as_array()
            .unwrap()
            .contains(&json!({"key": "0xkey", "value": "literal"})),
        "{literal}"
    );

    failed_with(
        &commands(&url, &["put default greeting other --if-absent"]),
        1,
        "409",
    );
    let mut keys: Vec<String> =
        serde_json::from_value(json_of(&commands(&url, &["keys default --json"]))).unwrap();
    keys.sort();
    assert_eq!(
        keys,
        ["bin", "doc", "greeting", "k1", "ttl", "with space/slash"]
    );
    assert_eq!(
        json_of(&commands(&url, &["keys default --limit 2 --json"]))
            .as_array()
            .unwrap()
            .len(),
        2
    );

    assert_eq!(
        json_of(&commands(&url, &["remove default greeting --json"])),
        json!({"cache": "default", "key": "greeting", "removed": true})
    );
    failed_with(
        &commands(&url, &["get default greeting"]),
        1,
        "no entry for key `greeting` in cache `default`",
    );
    failed_with(
        &commands(&url, &["remove default greeting"]),
        1,
        "404 Not Found",
    );
    failed_with(
        &commands(&url, &["get nowhere k"]),
        1,
        "cache `nowhere` does not exist",
    );

    let stats = json_of(&commands(&url, &["stats default --json"]));
    assert_eq!(stats["current_number_of_entries"], 5);
    assert!(stats["stores"].as_u64().unwrap() >= 6, "{stats}");
    let container = commands(&url, &["stats"]);
    succeeded(&container);
    assert!(container.stdout.starts_with("FIELD "), "{container:#?}");
    assert!(container.stdout.contains("\nhits "), "{container:#?}");
}

// Proves the exit statuses: 0 when every command succeeded, 1 when the server refused or
// could not be reached (the URL named), 2 when a command was not understood; `-c` stops at
// the first failure; `help` helps.
#[test]
fn exit_statuses_and_errors_speak_to_users() {
    let server = TestServer::start();
    let url = url(&server);
    failed_with(
        &commands(&url, &["bogus"]),
        2,
        "unrecognized subcommand 'bogus'",
    );
    failed_with(&commands(&url, &["get default"]), 2, "<KEY>");
    failed_with(
        &commands(&url, &["put default k zz --encoding hex"]),
        2,
        "the value is not hex",
    );
    failed_with(
        &commands(&url, &["put default k v --lifespan soon"]),
        2,
        "--lifespan `soon`",
    );
    failed_with(
        &commands(&url, &["get default 'open"]),
        2,
        "unbalanced quotes",
    );
    failed_with(&commands(&url, &["query default"]), 2, "no query language");
    failed_with(
        &cli(&["--server", "ftp://x", "-c", "cache list"], "", &[]),
        2,
        "http:// or https://",
    );
    failed_with(&cli(&["--bogus"], "", &[]), 2, "--bogus");

    // Nothing listens on a port just released.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let nowhere = format!("http://127.0.0.1:{port}");
    failed_with(
        &commands(&nowhere, &["cache list"]),
        1,
        &format!("cannot connect to {nowhere}: Connection refused"),
    );

    let stopped = commands(
        &url,
        &["put default a 1", "get default nope", "put default b 2"],
    );
    failed_with(&stopped, 1, "no entry for key `nope`");
    failed_with(
        &commands(&url, &["get default b"]),
        1,
        "no entry for key `b`",
    );
    succeeded(&commands(&url, &["get default a", "quit", "bogus"]));

    let help = commands(&url, &["help"]);
    succeeded(&help);
    assert!(
        help.stdout.starts_with("Commands:\n  connect "),
        "{help:#?}"
    );
    let help = commands(&url, &["help put"]);
    succeeded(&help);
    assert!(help.stdout.contains("--lifespan"), "{help:#?}");
    let connected = json_of(&commands(&url, &["connect --json"]));
    assert_eq!(
        connected,
        json!({"url": url, "version": format!("Weft {}", env!("CARGO_PKG_VERSION")), "user": null})
    );
    let several = commands(&url, &["cache list", "keys default", "connect"]);
    succeeded(&several);
    let several = cli(
        &[
            "--server",
            &url,
            "--json",
            "-c",
            "cache list",
            "-c",
            "keys default",
        ],
        "",
        &[],
    );
    assert_eq!(several.json_lines(), [json!(["default"]), json!(["a"])]);
}

// Proves the shell reads commands piped to it (no terminal: no prompt, no history), goes on
// after a failed command, stops at `quit`, and exits with the last failure's status; and
// that scripts (`--file`, `-f -`) skip comments and stop at the first failure.
#[test]
fn the_shell_and_scripts_read_commands() {
    let server = TestServer::start();
    let url = url(&server);
    let history = tempfile::tempdir().unwrap();
    let history_file = history.path().join("history");
    let history_var = history_file.to_str().unwrap();
    let ran = cli(
        &["--server", &url],
        "put default p v1\nget default p\nbogus\n\nget default p --json\nquit\nput default never x\n",
        &[("WEFT_CLI_HISTORY", history_var)],
    );
    assert_eq!(ran.code, Some(2), "{ran:#?}");
    assert_eq!(
        ran.stdout,
        "v1\n{\"cache\":\"default\",\"encoding\":\"text\",\"key\":\"p\",\"value\":\"v1\"}\n"
    );
    assert!(
        ran.stderr.contains("unrecognized subcommand 'bogus'"),
        "{ran:#?}"
    );
    assert!(!history_file.exists(), "a piped session wrote history");
    failed_with(&commands(&url, &["get default never"]), 1, "no entry");
    let ran = cli(&["--server", &url, "--json"], "get default p\n", &[]);
    assert_eq!(json_of(&ran)["value"], "v1");

    let script = history.path().join("script.weft");
    std::fs::write(
        &script,
        "# a comment\n\nput default s1 x\nget default nothing\nput default s2 y\n",
    )
    .unwrap();
    failed_with(
        &cli(
            &["--server", &url, "--file", script.to_str().unwrap()],
            "",
            &[],
        ),
        1,
        "no entry for key `nothing`",
    );
    succeeded(&commands(&url, &["get default s1"]));
    failed_with(&commands(&url, &["get default s2"]), 1, "no entry");
    let ran = cli(
        &["--server", &url, "-f", "-"],
        "# piped script\nget default s1\n",
        &[],
    );
    succeeded(&ran);
    assert_eq!(ran.stdout, "x\n");
}

// Proves the CLI authenticates where the server has users (from options, the environment
// or `connect`), says what to do when it is refused, and edits users files with `user …`.
#[test]
fn credentials_and_users() {
    let dir = tempfile::tempdir().unwrap();
    let users = common::auth::users_file(dir.path(), &[("alice", "alice-pw", &["admin"])]);
    let server = TestServer::start_with(
        "",
        &format!("[security]\nusers-file = \"{}\"\n", users.display()),
    );
    let url = url(&server);
    let refused = commands(&url, &["cache list"]);
    failed_with(&refused, 1, "401 Unauthorized");
    assert!(refused.stderr.contains("--user NAME"), "{refused:#?}");
    succeeded(&cli(
        &["--server", &url, "--user", "alice", "-c", "cache list"],
        "",
        &[("WEFT_PASSWORD", "alice-pw")],
    ));
    succeeded(&cli(
        &["--server", &url, "-c", "cache list"],
        "",
        &[("WEFT_USER", "alice"), ("WEFT_PASSWORD", "alice-pw")],
    ));
    failed_with(
        &cli(
            &["--server", &url, "--user", "alice", "-c", "cache list"],
            "",
            &[],
        ),
        2,
        "give the password of `alice`",
    );
    failed_with(
        &cli(
            &[
                "--server",
                &url,
                "--user",
                "alice",
                "--password",
                "wrong",
                "-c",
                "cache list",
            ],
            "",
            &[],
        ),
        1,
        "401",
    );
    let connected = commands(
        &url,
        &[
            &format!("connect {url} --user alice --password alice-pw --json"),
            "put default k v",
            "get default k",
        ],
    );
    succeeded(&connected);
    let first: Value = serde_json::from_str(connected.stdout.lines().next().unwrap()).unwrap();
    assert_eq!(first["user"], "alice");
    assert!(connected.stdout.ends_with("\nv\n"), "{connected:#?}");

    let file = users.to_str().unwrap();
    let created = commands(
        &url,
        &[&format!(
            "user create bob --password bob-pw --groups observer,application --users-file {file} --json"
        )],
    );
    assert_eq!(json_of(&created)["user"], "bob");
    let listed = json_of(&commands(
        &url,
        &[&format!("user list --users-file {file} --json")],
    ));
    assert_eq!(
        listed,
        json!({"users": [{"name": "alice", "groups": ["admin"]}, {"name": "bob", "groups": ["application", "observer"]}]})
    );
    let listed = cli(&["-c", "user list"], "", &[("WEFT_USERS_FILE", file)]);
    succeeded(&listed);
    assert_eq!(listed.stdout, "alice\tadmin\nbob\tapplication,observer\n");
    failed_with(
        &commands(&url, &[&format!("user remove carol --users-file {file}")]),
        1,
        "no user `carol`",
    );
}

// Proves the CLI speaks TLS to a server whose CA it is given, refuses https without a CA,
// and names the URL when the certificate is not trusted.
#[test]
fn tls_with_a_ca_file() {
    let ca = Ca::new("Weft CLI test CA");
    let files = Files::new(&ca);
    std::fs::write(files.path("ca.pem"), ca.pem()).unwrap();
    let other = Ca::new("Someone else");
    std::fs::write(files.path("other.pem"), other.pem()).unwrap();
    let server = TestServer::start_with("", &files.section(""));
    let https = format!("https://localhost:{}", server.addr.port());
    let ca_file = files.path("ca.pem");
    let ran = cli(
        &[
            "--server",
            &https,
            "--cacert",
            ca_file.to_str().unwrap(),
            "-c",
            "put default t over-tls",
            "-c",
            "get default t",
        ],
        "",
        &[],
    );
    succeeded(&ran);
    assert_eq!(ran.stdout, "over-tls\n");
    failed_with(&commands(&https, &["cache list"]), 2, "--cacert FILE");
    let untrusted = cli(
        &[
            "--server",
            &https,
            "--cacert",
            files.path("other.pem").to_str().unwrap(),
            "-c",
            "cache list",
        ],
        "",
        &[],
    );
    failed_with(
        &untrusted,
        1,
        &format!("cannot connect to {https}: TLS: invalid peer certificate"),
    );
    // `connect` switches to TLS and back.
    let switched = commands(
        &format!("http://{}", server.addr),
        &[
            &format!("connect {https} --cacert {} --json", ca_file.display()),
            "get default t",
        ],
    );
    succeeded(&switched);
    assert!(switched.stdout.ends_with("over-tls\n"), "{switched:#?}");
}

// Proves `shutdown` stops a running server process.
#[test]
fn shutdown_stops_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let port = common::cluster::free_tcp_port();
    let address = format!("127.0.0.1:{port}");
    let mut server = common::process::Weft::spawn(
        dir.path(),
        &["server", "--bind", &address],
        dir.path(),
        "server",
    );
    common::process::wait_listening(address.parse().unwrap(), Duration::from_secs(30));
    let url = format!("http://{address}");
    let ran = commands(&url, &["shutdown"]);
    succeeded(&ran);
    assert_eq!(ran.stdout, format!("Asked {url} to stop.\n"));
    let status = server
        .exit_within(Duration::from_secs(30))
        .expect("the server stops");
    assert!(status.success(), "{status:?}: {}", server.stderr());
}

/// How long the terminal test waits for the screen to show something.
const SCREEN_WAIT_MAX: Duration = Duration::from_secs(20);

/// A shell in a terminal of its own (tmux, on a server of its own) for one test.
struct Terminal {
    socket: String,
}

impl Terminal {
    fn start(command: &str) -> Self {
        assert!(
            Command::new("tmux")
                .arg("-V")
                .output()
                .is_ok_and(|o| o.status.success()),
            "the terminal test needs tmux (apt-get install tmux)"
        );
        let socket = format!("weft-cli-test-{}", std::process::id());
        let status = Command::new("tmux")
            .args([
                "-L",
                &socket,
                "new-session",
                "-d",
                "-x",
                "160",
                "-y",
                "40",
                command,
            ])
            .status()
            .unwrap();
        assert!(status.success());
        Self { socket }
    }

    fn keys(&self, keys: &[&str]) {
        let status = Command::new("tmux")
            .args(["-L", &self.socket, "send-keys", "-t", "0"])
            .args(keys)
            .status()
            .unwrap();
        assert!(status.success());
    }

    fn screen(&self) -> String {
        let output = Command::new("tmux")
            .args(["-L", &self.socket, "capture-pane", "-p", "-t", "0"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Waits until the screen shows `text` (`SCREEN_WAIT_MAX` at most).
    #[track_caller]
    fn shows(&self, text: &str) {
        let deadline = Instant::now() + SCREEN_WAIT_MAX;
        while !self.screen().contains(text) {
            assert!(
                Instant::now() < deadline,
                "{text:?} never shown:\n{}",
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until `count` lines start with `prompt` (`SCREEN_WAIT_MAX` at most).
    #[track_caller]
    fn prompts(&self, prompt: &str, count: usize) {
        let deadline = Instant::now() + SCREEN_WAIT_MAX;
        while self
            .screen()
            .lines()
            .filter(|line| line.starts_with(prompt))
            .count()
            < count
        {
            assert!(
                Instant::now() < deadline,
                "no prompt #{count}:\n{}",
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn running(&self) -> bool {
        Command::new("tmux")
            .args(["-L", &self.socket, "has-session"])
            .output()
            .is_ok_and(|o| o.status.success())
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

// Proves the shell on a terminal: a prompt naming the server, Tab completing commands and
// cache names, Up recalling the last command, and the history saved to its file at `quit`.
#[test]
fn terminal_shell_completes_and_keeps_history() {
    let server = TestServer::start();
    let url = url(&server);
    succeeded(&commands(&url, &["cache create sessions --template LOCAL"]));
    let dir = tempfile::tempdir().unwrap();
    let history = dir.path().join("data/weft-history");
    let weft = env!("CARGO_BIN_EXE_weft");
    let terminal = Terminal::start(&format!(
        "WEFT_CLI_HISTORY={} {weft} cli --server {url}",
        history.display()
    ));
    // The screen as captured has no trailing spaces.
    let prompt = format!("[{}]> ", server.addr);
    terminal.shows(prompt.trim_end());
    terminal.keys(&["pu", "Tab"]);
    terminal.shows(&format!("{prompt}put"));
    terminal.keys(&["se", "Tab"]);
    terminal.shows(&format!("{prompt}put sessions"));
    terminal.keys(&["k tabbed", "Enter"]);
    // Typed only once the shell asks for it: what is typed while a command runs is the
    // terminal's to echo, and would muddle the screen read below.
    terminal.prompts(prompt.trim_end(), 2);
    terminal.keys(&["get sessions k", "Enter"]);
    terminal.shows("\ntabbed\n");
    terminal.keys(&["Up"]);
    let recalled = format!("{prompt}get sessions k");
    let deadline = Instant::now() + SCREEN_WAIT_MAX;
    while terminal
        .screen()
        .lines()
        .filter(|line| line.trim_end() == recalled)
        .count()
        < 2
    {
        assert!(
            Instant::now() < deadline,
            "Up recalled nothing:\n{}",
            terminal.screen()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    terminal.keys(&["C-u", "quit", "Enter"]);
    let deadline = Instant::now() + SCREEN_WAIT_MAX;
    while terminal.running() {
        assert!(
            Instant::now() < deadline,
            "the shell did not quit:\n{}",
            terminal.screen()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let saved = std::fs::read_to_string(&history).unwrap();
    assert!(
        saved.contains("put sessions k tabbed\nget sessions k\nquit"),
        "{saved}"
    );
}
