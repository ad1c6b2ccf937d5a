//! How commands arrive: `-c` arguments, a script file, or the shell — a line editor with
//! history and Tab completion on a terminal, plain lines from a pipe — and the exit status
//! each way ends with.

use std::cell::RefCell;
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

use rustyline::completion::{Completer, FilenameCompleter, Pair};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::Validator;

use crate::command;
use crate::error::{CliError, EXIT_FAILED, EXIT_OK, EXIT_USAGE};
use crate::progress::Display;
use crate::session::{Outcome, Session, TEMPLATES, UsersFile};

/// Lines of history kept.
const HISTORY_LINES_MAX: usize = 1_000;
/// How long cache names fetched for completion are reused before asking again.
const CACHE_NAMES_FRESH_FOR: Duration = Duration::from_secs(2);

/// `weft cli`'s options.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// The server: `host:port`, `http://host:port` or `https://host:port`.
    #[arg(
        long,
        short,
        env = "WEFT_SERVER",
        default_value = "http://127.0.0.1:11222"
    )]
    pub server: String,
    /// The user to authenticate as (HTTP Basic), where the server has users.
    #[arg(long, short, env = "WEFT_USER")]
    pub user: Option<String>,
    /// Its password (prefer the environment variable: a command line is visible to other
    /// users). Asked for on a terminal when a user is given without one.
    #[arg(long, env = "WEFT_PASSWORD", hide_env_values = true)]
    pub password: Option<String>,
    /// PEM file of the CA that signed the server's certificate (for `https://`).
    #[arg(long, env = "WEFT_CACERT", value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// Run this command and exit (repeatable: run in order, stopping at the first that
    /// fails). Without -c or --file, a shell starts.
    #[arg(short = 'c', long = "command", value_name = "COMMAND")]
    pub commands: Vec<String>,
    /// Run the commands of this file, one per line (`-` for standard input), stopping at
    /// the first that fails; blank lines and lines starting with `#` are skipped.
    #[arg(long, short, value_name = "FILE", conflicts_with = "commands")]
    pub file: Option<PathBuf>,
    /// Print every result as JSON (one document per command, on one line).
    #[arg(long)]
    pub json: bool,
    /// The shell's history file (default: `weft/cli-history` in the user's data directory,
    /// `$XDG_DATA_HOME` or `~/.local/share`).
    #[arg(long, env = "WEFT_CLI_HISTORY", value_name = "FILE")]
    pub history: Option<PathBuf>,
}

/// Runs `weft cli` as `options` say; `users` edits users files for `user …` commands.
/// Returns the exit status: 0 when every command succeeded, 1 when one failed, 2 when one
/// was not understood (for the shell: the last failure's).
#[must_use]
pub fn run(options: Options, users: Option<UsersFile>) -> u8 {
    let mut session = match open_session(&options, users) {
        Ok(session) => session,
        Err(error) => {
            eprintln!("Error: {error}");
            return error.exit_code();
        }
    };
    if !options.commands.is_empty() {
        return run_lines(
            &mut session,
            options.commands.iter().map(String::as_str),
            options.json,
        );
    }
    if let Some(file) = &options.file {
        return match script_lines(file) {
            Ok(lines) => run_lines(&mut session, lines.iter().map(String::as_str), options.json),
            Err(error) => {
                eprintln!("Error: {error}");
                error.exit_code()
            }
        };
    }
    shell(session, &options)
}

fn open_session(options: &Options, users: Option<UsersFile>) -> Result<Session, CliError> {
    let credentials = match (&options.user, &options.password) {
        (Some(user), Some(password)) => Some((user.clone(), password.clone())),
        (Some(user), None) => Some((user.clone(), ask_password(user)?)),
        (None, _) => None,
    };
    let display = if options.json {
        Display::Quiet
    } else {
        Display::for_stderr()
    };
    Session::new(
        &options.server,
        credentials,
        options.cacert.clone(),
        users,
        display,
    )
}

/// Reads a password from a terminal (shown as typed, as `weft user` does); refuses to read
/// one from a pipe, which carries commands.
fn ask_password(user: &str) -> Result<String, CliError> {
    if !std::io::stdin().is_terminal() {
        return Err(CliError::usage(format!(
            "give the password of `{user}` with --password or WEFT_PASSWORD"
        )));
    }
    eprint!("Password of {user} (shown as typed): ");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .map_err(|error| CliError::Local(format!("read the password: {error}")))?;
    Ok(line.trim_end_matches(['\r', '\n']).to_owned())
}

/// The commands of a script: its lines but blank ones and comments.
fn script_lines(file: &Path) -> Result<Vec<String>, CliError> {
    let text = if file == Path::new("-") {
        let mut lines = Vec::new();
        for line in std::io::stdin().lock().lines() {
            lines.push(
                line.map_err(|error| CliError::Local(format!("read standard input: {error}")))?,
            );
        }
        lines.join("\n")
    } else {
        std::fs::read_to_string(file)
            .map_err(|error| CliError::Local(format!("read {}: {error}", file.display())))?
    };
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(str::to_owned)
        .collect())
}

/// Runs `lines` in order, stopping at the first that fails (its status) or at `quit`.
fn run_lines<'a>(session: &mut Session, lines: impl Iterator<Item = &'a str>, json: bool) -> u8 {
    for line in lines {
        match execute(session, line, json) {
            Step::Continue(EXIT_OK) => {}
            Step::Continue(code) => return code,
            Step::Quit => break,
        }
    }
    EXIT_OK
}

/// What a line led to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Go on; the line's exit status.
    Continue(u8),
    /// `quit`.
    Quit,
}

/// Parses and runs one line, printing its result on stdout and any error on stderr.
fn execute(session: &mut Session, line: &str, json_default: bool) -> Step {
    let Some(words) = shlex::split(line) else {
        eprintln!("Error: unbalanced quotes in `{line}`");
        return Step::Continue(EXIT_USAGE);
    };
    if words.is_empty() {
        return Step::Continue(EXIT_OK);
    }
    if words[0] == "query" {
        eprintln!(
            "Error: Weft has no query language (Infinispan's Ickle); list entries with \
             `entries CACHE` or keys with `keys CACHE`"
        );
        return Step::Continue(EXIT_USAGE);
    }
    let parsed = match command::parse(&words) {
        Ok(parsed) => parsed,
        Err(error) => {
            use clap::error::ErrorKind;
            // clap's hint names `--help`; in the shell `help` reads better.
            let shown = error.render().to_string().replace(
                "For more information, try '--help'.",
                "`help` lists the commands; `help COMMAND` explains one.",
            );
            return match error.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                    print!("{shown}");
                    if !shown.ends_with('\n') {
                        println!();
                    }
                    let _ = std::io::stdout().flush();
                    if error.kind() == ErrorKind::DisplayHelp {
                        Step::Continue(EXIT_OK)
                    } else {
                        Step::Continue(EXIT_USAGE)
                    }
                }
                _ => {
                    eprint!("{shown}");
                    Step::Continue(EXIT_USAGE)
                }
            };
        }
    };
    let json = parsed.json || json_default;
    match session.run(parsed.command) {
        Ok(Outcome::Done(output)) => {
            let mut stdout = std::io::stdout().lock();
            let _ = stdout.write_all(output.render(json).as_bytes());
            let _ = stdout.flush();
            Step::Continue(EXIT_OK)
        }
        Ok(Outcome::Quit) => Step::Quit,
        Err(error) => {
            eprintln!("Error: {error}");
            Step::Continue(error.exit_code())
        }
    }
}

/// The shell: reads lines until `quit` or end of input, going on after a failed command.
fn shell(session: Session, options: &Options) -> u8 {
    let terminal = std::io::stdin().is_terminal();
    let session = Rc::new(RefCell::new(session));
    let config = rustyline::Config::builder()
        .max_history_size(HISTORY_LINES_MAX)
        .and_then(|builder| builder.history_ignore_dups(true))
        .map(|builder| {
            builder
                .completion_type(rustyline::CompletionType::List)
                .auto_add_history(false)
                .build()
        });
    let editor =
        config.and_then(rustyline::Editor::<Helper, rustyline::history::FileHistory>::with_config);
    let mut editor = match editor {
        Ok(editor) => editor,
        Err(error) => {
            eprintln!("Error: cannot start the line editor: {error}");
            return EXIT_FAILED;
        }
    };
    editor.set_helper(Some(Helper::new(Rc::clone(&session))));
    // History is a terminal's: a script piped in is not something to recall later.
    let history = if terminal {
        history_file(options.history.as_deref())
    } else {
        None
    };
    if let Some(history) = &history {
        // A first session has no history yet.
        let _ = editor.load_history(history);
        eprintln!(
            "Weft CLI, talking to {}. `help` lists the commands, Tab completes, `quit` leaves.",
            session.borrow().url()
        );
    }
    let mut status = EXIT_OK;
    loop {
        let prompt = if terminal {
            format!("[{}]> ", session.borrow().url().authority())
        } else {
            String::new()
        };
        match editor.readline(&prompt) {
            Ok(line) => {
                if terminal && !line.trim().is_empty() {
                    let _ = editor.add_history_entry(line.trim_end());
                }
                match execute(&mut session.borrow_mut(), &line, options.json) {
                    Step::Continue(EXIT_OK) => {}
                    Step::Continue(code) => status = code,
                    Step::Quit => break,
                }
            }
            // Ctrl-C drops the line being typed, as in a shell.
            Err(ReadlineError::Interrupted) => {}
            Err(ReadlineError::Eof) => break,
            Err(error) => {
                eprintln!("Error: reading the command line: {error}");
                status = EXIT_FAILED;
                break;
            }
        }
    }
    if let Some(history) = &history {
        if let Some(directory) = history.parent() {
            let _ = std::fs::create_dir_all(directory);
        }
        if let Err(error) = editor.save_history(history) {
            eprintln!(
                "Warning: cannot save the history in {}: {error}",
                history.display()
            );
        }
    }
    status
}

/// Where the history lives: the file named, else `weft/cli-history` under
/// `$XDG_DATA_HOME`, else under `~/.local/share`; none without a home.
fn history_file(named: Option<&Path>) -> Option<PathBuf> {
    if let Some(named) = named {
        return Some(named.to_owned());
    }
    let data = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .filter(|path| path.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".local/share")))?;
    Some(data.join("weft").join("cli-history"))
}

/// Completion for the shell: commands, options, cache names, templates, encodings, files.
struct Helper {
    session: Rc<RefCell<Session>>,
    definition: clap::Command,
    cache_names: RefCell<Option<(Instant, Vec<String>)>>,
    files: FilenameCompleter,
}

impl Helper {
    fn new(session: Rc<RefCell<Session>>) -> Self {
        let mut definition = command::definition();
        definition.build();
        Self {
            session,
            definition,
            cache_names: RefCell::new(None),
            files: FilenameCompleter::new(),
        }
    }

    fn cache_names(&self) -> Vec<String> {
        let mut cached = self.cache_names.borrow_mut();
        if let Some((when, names)) = cached.as_ref()
            && when.elapsed() < CACHE_NAMES_FRESH_FOR
        {
            return names.clone();
        }
        // The shell is between commands while completing, so the session is free.
        let names = self
            .session
            .try_borrow()
            .map(|session| session.cache_names_quickly())
            .unwrap_or_default();
        *cached = Some((Instant::now(), names.clone()));
        names
    }
}

/// What completes the word being typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completion {
    /// These words.
    Words(Vec<String>),
    /// A file name.
    File,
}

/// The completions of `partial` after `words` (the words before it on the line), using
/// `definition` (the command language) and `cache_names` (asked only when a cache name
/// comes next).
#[must_use]
pub fn complete_words(
    definition: &clap::Command,
    words: &[&str],
    partial: &str,
    cache_names: &dyn Fn() -> Vec<String>,
) -> Completion {
    let mut current = definition;
    // The subcommands walked through, e.g. `["cache", "describe"]`.
    let mut path: Vec<&str> = Vec::new();
    let mut positional = 0;
    let mut pending_value: Option<&clap::Arg> = None;
    let mut help = false;
    for word in words {
        if pending_value.take().is_some() {
            // The word was an option's value.
            continue;
        }
        if word.starts_with('-') && word.len() > 1 {
            let option = |arg: &&clap::Arg| match word.strip_prefix("--") {
                Some(long) => arg.get_long() == Some(long),
                None => arg.get_short() == word.chars().nth(1),
            };
            pending_value = current
                .get_arguments()
                .find(option)
                .filter(|arg| arg.get_action().takes_values());
            continue;
        }
        if *word == "help" && path.is_empty() && !help {
            help = true;
            continue;
        }
        if let Some(sub) = current.find_subcommand(word) {
            current = sub;
            path.push(sub.get_name());
            positional = 0;
        } else {
            positional += 1;
        }
    }
    let matching = |candidates: Vec<String>| {
        let mut words: Vec<String> = candidates
            .into_iter()
            .filter(|candidate| candidate.starts_with(partial))
            .collect();
        words.sort();
        words.dedup();
        Completion::Words(words)
    };
    if let Some(arg) = pending_value {
        let id = arg.get_id().as_str();
        if id == "template" {
            return matching(TEMPLATES.iter().map(|t| (*t).to_owned()).collect());
        }
        let values: Vec<String> = arg
            .get_possible_values()
            .iter()
            .map(|value| value.get_name().to_owned())
            .collect();
        if !values.is_empty() {
            return matching(values);
        }
        if arg.get_value_hint() == clap::ValueHint::AnyPath
            || matches!(id, "file" | "cacert" | "users_file")
        {
            return Completion::File;
        }
        return Completion::Words(Vec::new());
    }
    if partial.starts_with('-') {
        let mut flags: Vec<String> = current
            .get_arguments()
            .filter_map(|arg| arg.get_long().map(|long| format!("--{long}")))
            .collect();
        flags.push("--json".to_owned());
        return matching(flags);
    }
    let subcommands: Vec<String> = current
        .get_subcommands()
        .filter(|sub| !sub.is_hide_set() && (!help || sub.get_name() != "help"))
        .map(|sub| sub.get_name().to_owned())
        .collect();
    if !subcommands.is_empty() {
        return matching(subcommands);
    }
    if help {
        return Completion::Words(Vec::new());
    }
    let names_a_cache = |arg: &clap::Arg| match arg.get_id().as_str() {
        "cache" => true,
        "name" => matches!(path.as_slice(), ["cache", "describe" | "clear" | "remove"]),
        _ => false,
    };
    match current.get_positionals().nth(positional) {
        Some(arg) if names_a_cache(arg) => matching(cache_names()),
        _ => Completion::Words(Vec::new()),
    }
}

impl Completer for Helper {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        context: &rustyline::Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let before = &line[..pos];
        let start = before.rfind(char::is_whitespace).map_or(0, |at| {
            at + before[at..].chars().next().map_or(1, char::len_utf8)
        });
        let words: Vec<&str> = before[..start].split_whitespace().collect();
        let partial = &before[start..];
        match complete_words(&self.definition, &words, partial, &|| self.cache_names()) {
            Completion::Words(words) => Ok((
                start,
                words
                    .into_iter()
                    .map(|word| Pair {
                        display: word.clone(),
                        replacement: format!("{word} "),
                    })
                    .collect(),
            )),
            Completion::File => self.files.complete(line, pos, context),
        }
    }
}

impl Hinter for Helper {
    type Hint = String;
}

impl Highlighter for Helper {}

impl Validator for Helper {}

impl rustyline::Helper for Helper {}

#[cfg(test)]
mod tests {
    use super::*;

    fn complete(line: &str) -> Completion {
        let mut definition = command::definition();
        definition.build();
        let (before, partial) = match line.rfind(' ') {
            Some(at) => (&line[..at], &line[at + 1..]),
            None => ("", line),
        };
        let words: Vec<&str> = before.split_whitespace().collect();
        complete_words(&definition, &words, partial, &|| {
            vec!["default".to_owned(), "sessions".to_owned()]
        })
    }

    fn words(list: &[&str]) -> Completion {
        Completion::Words(list.iter().map(|word| (*word).to_owned()).collect())
    }

    // Proves Tab offers what may come next: commands, subcommands, cache names where a cache
    // is named, templates, encodings, options, and files.
    #[test]
    fn completes_what_comes_next() {
        assert_eq!(complete("ca"), words(&["cache"]));
        assert_eq!(complete("cl"), words(&["cluster"]));
        assert_eq!(
            complete("cache "),
            words(&["clear", "create", "describe", "help", "list", "remove"])
        );
        assert_eq!(complete("get "), words(&["default", "sessions"]));
        assert_eq!(complete("get s"), words(&["sessions"]));
        assert_eq!(complete("get default "), words(&[]));
        assert_eq!(complete("cache describe d"), words(&["default"]));
        assert_eq!(
            complete("cache create x --template org.infinispan.D"),
            words(&["org.infinispan.DIST_ASYNC", "org.infinispan.DIST_SYNC"])
        );
        assert_eq!(
            complete("get default k --encoding "),
            words(&["base64", "hex", "json", "text"])
        );
        assert_eq!(complete("put default k v --li"), words(&["--lifespan"]));
        assert_eq!(complete("cache create x --file "), Completion::File);
        assert_eq!(complete("help cl"), words(&["cluster"]));
        assert_eq!(complete("cluster r"), words(&["rebalance"]));
    }

    // Proves the history goes to the user's data directory unless a file is named.
    #[test]
    fn history_lives_in_the_data_directory() {
        let named = history_file(Some(Path::new("/tmp/h")));
        assert_eq!(named.as_deref(), Some(Path::new("/tmp/h")));
        if let Some(default) = history_file(None) {
            assert!(
                default.ends_with("weft/cli-history"),
                "{}",
                default.display()
            );
        }
    }
}
