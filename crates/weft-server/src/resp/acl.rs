//! Redis ACL users: the `default` user and the users ACL SETUSER makes, with Redis' rules —
//! which commands (`+get`, `-@write`, `+config|get`, `+select|0`), which keys (`~x*`,
//! `%R~r*`, `%W~w*`, `allkeys`) and which pub/sub channels (`&news.*`, `allchannels`) each
//! may touch, and its passwords (SHA-256, as Redis keeps them), plus selectors (`(~k* +get)`)
//! that each grant a set of rules of their own.
//!
//! Rules are Redis-command-shaped, so they are checked in the RESP adapter
//! ([`super::Session::authorize`]), after — not instead of — the role check every protocol
//! makes (`crate::authorization`). ACL users are RESP users: they authenticate with AUTH or
//! HELLO and are kept in memory, on each member, as Redis keeps them without an ACL file.
//! Users of a users file (`[security] users-file`) are not ACL users; they authenticate and
//! are authorized by their roles, on every protocol.
//!
//! The checks read the user's rules under a read lock; a user with every command, key and
//! channel (the `default` user, out of the box) is not checked at all (one atomic load).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Instant;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};

use super::commands::glob;
use super::meta::{self, key};
use super::table::{COMMANDS, CommandSpec};

/// SHA-256 of a password, as 64 lower-case hex digits (what ACL GETUSER shows and `#`
/// takes).
pub(crate) fn hash_password(password: &[u8]) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, password);
    hex(digest.as_ref())
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

/// `bits` random bits as hex digits (ACL GENPASS).
pub(crate) fn random_hex(bits: usize) -> Option<String> {
    use aws_lc_rs::rand::SecureRandom as _;
    let chars = bits.div_ceil(4);
    let mut bytes = vec![0u8; chars.div_ceil(2)];
    aws_lc_rs::rand::SystemRandom::new().fill(&mut bytes).ok()?;
    let mut out = hex(&bytes);
    out.truncate(chars);
    Some(out)
}

/// One command or subcommand rules can name.
struct Known {
    /// `name` or `container|sub`.
    name: String,
    categories: u32,
    /// The container's index, for a subcommand.
    parent: Option<usize>,
}

/// Every command and subcommand Weft serves or Redis describes.
static KNOWN: LazyLock<(Vec<Known>, HashMap<String, usize>)> = LazyLock::new(|| {
    let mut known: Vec<Known> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut add = |name: String, categories: u32, known: &mut Vec<Known>| -> usize {
        if let Some(&at) = index.get(&name) {
            return at;
        }
        let parent = name
            .split_once('|')
            .and_then(|(container, _)| index.get(container).copied());
        known.push(Known {
            name: name.clone(),
            categories,
            parent,
        });
        index.insert(name, known.len() - 1);
        known.len() - 1
    };
    for spec in COMMANDS {
        let categories = meta::categories_of(spec, &[]);
        add(spec.name.to_owned(), categories, &mut known);
        for (sub, _) in spec.subcommands {
            let full = format!("{}|{}", spec.name, sub.to_ascii_lowercase());
            let categories = meta::lookup(&full).map_or(categories, |m| m.categories);
            add(full, categories, &mut known);
        }
    }
    for described in super::meta_table::META {
        add(described.name.to_owned(), described.categories, &mut known);
    }
    let index = known
        .iter()
        .enumerate()
        .map(|(i, k)| (k.name.clone(), i))
        .collect();
    (known, index)
});

fn known() -> &'static [Known] {
    &KNOWN.0
}

fn known_index(name: &str) -> Option<usize> {
    KNOWN.1.get(name).copied()
}

/// The commands of category `bit`, as ACL CAT lists them.
pub(crate) fn commands_in(bit: u32) -> Vec<&'static str> {
    known()
        .iter()
        .filter(|k| k.categories & bit != 0)
        .map(|k| k.name.as_str())
        .collect()
}

/// The index of the command a call runs (its subcommand's for a container).
fn call_index(spec: &CommandSpec, args: &[Bytes]) -> Option<usize> {
    meta::subcommand_name(spec, args)
        .and_then(|full| known_index(&full))
        .or_else(|| known_index(spec.name))
}

/// A key pattern with the access it grants.
#[derive(Debug, Clone, PartialEq, Eq)]
struct KeyPattern {
    pattern: Vec<u8>,
    read: bool,
    write: bool,
}

/// A set of rules: the user's own (its root selector) or one of its selectors.
#[derive(Debug, Clone, Default)]
struct Selector {
    all_keys: bool,
    keys: Vec<KeyPattern>,
    all_channels: bool,
    channels: Vec<Vec<u8>>,
    all_commands: bool,
    /// Allowed commands, by [`KNOWN`] index.
    allowed: Vec<bool>,
    /// First arguments allowed of a command otherwise not (`+select|0`).
    first_args: HashMap<usize, Vec<String>>,
    /// Whether the last `+@all`/`-@all` was `+@all` (what the description starts with).
    base_all: bool,
    /// The command rules as given since the last `+@all`/`-@all`, for GETUSER and LIST.
    rules: Vec<String>,
}

/// Why a call is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Denial {
    Command,
    Key(usize),
    Channel(usize),
}

impl Denial {
    fn rank(self) -> (u8, usize) {
        match self {
            Self::Command => (0, 0),
            Self::Key(at) => (1, at),
            Self::Channel(at) => (2, at),
        }
    }
}

/// Why an ACL SETUSER modifier is refused (Redis' words).
#[derive(Debug)]
enum RuleError {
    Unknown,
    Syntax,
    AfterAllKeys,
    AfterAllChannels,
    NoSuchPassword,
    BadHash,
    SubcommandFirstArg,
}

impl RuleError {
    fn message(&self) -> &'static str {
        match self {
            Self::Unknown => "Unknown command or category name in ACL",
            Self::Syntax => "Syntax error",
            Self::AfterAllKeys => {
                "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns"
            }
            Self::AfterAllChannels => {
                "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels"
            }
            Self::NoSuchPassword => {
                "The password you are trying to remove from the user does not exist"
            }
            Self::BadHash => {
                "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters"
            }
            Self::SubcommandFirstArg => "Allowing first-arg of a subcommand is not supported",
        }
    }
}

fn has_spaces(bytes: &[u8]) -> bool {
    bytes.iter().any(|&b| b.is_ascii_whitespace() || b == 0)
}

impl Selector {
    fn new() -> Self {
        Self {
            allowed: vec![false; known().len()],
            ..Self::default()
        }
    }

    fn set_command(&mut self, at: usize, allow: bool) {
        self.allowed[at] = allow;
        self.first_args.remove(&at);
        if !allow {
            self.all_commands = false;
        }
        // A command brings its subcommands along.
        for (i, k) in known().iter().enumerate() {
            if k.parent == Some(at) {
                self.allowed[i] = allow;
            }
        }
    }

    /// Notes a command rule for the description, replacing an earlier one of the same
    /// command (as Redis 7.2 keeps them).
    fn note(&mut self, rule: String) {
        if !rule.starts_with("+@") && !rule.starts_with("-@") {
            let name = &rule[1..];
            self.rules.retain(|r| &r[1..] != name);
        }
        self.rules.push(rule);
    }

    fn apply(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let lower = String::from_utf8_lossy(op).to_ascii_lowercase();
        match lower.as_str() {
            "allkeys" | "~*" => {
                self.all_keys = true;
                self.keys.clear();
                return Ok(());
            }
            "resetkeys" => {
                self.all_keys = false;
                self.keys.clear();
                return Ok(());
            }
            "allchannels" | "&*" => {
                self.all_channels = true;
                self.channels.clear();
                return Ok(());
            }
            "resetchannels" => {
                self.all_channels = false;
                self.channels.clear();
                return Ok(());
            }
            "allcommands" | "+@all" => {
                self.allowed.fill(true);
                self.all_commands = true;
                self.first_args.clear();
                self.rules.clear();
                self.base_all = true;
                return Ok(());
            }
            "nocommands" | "-@all" => {
                self.allowed.fill(false);
                self.all_commands = false;
                self.first_args.clear();
                self.rules.clear();
                self.base_all = false;
                return Ok(());
            }
            _ => {}
        }
        match op.first() {
            Some(b'~' | b'%') => self.add_key_pattern(op),
            Some(b'&') => {
                if self.all_channels {
                    return Err(RuleError::AfterAllChannels);
                }
                let pattern = &op[1..];
                if has_spaces(pattern) {
                    return Err(RuleError::Syntax);
                }
                if !self.channels.iter().any(|c| c == pattern) {
                    self.channels.push(pattern.to_vec());
                }
                Ok(())
            }
            Some(b'+' | b'-') if op.get(1) == Some(&b'@') => {
                let bit = meta::category(&op[2..]).ok_or(RuleError::Unknown)?;
                let allow = op[0] == b'+';
                for (i, k) in known().iter().enumerate() {
                    if k.categories & bit != 0 {
                        self.allowed[i] = allow;
                        self.first_args.remove(&i);
                    }
                }
                if !allow {
                    self.all_commands = false;
                }
                self.note(lower);
                Ok(())
            }
            Some(b'+') => {
                let name = &lower[1..];
                if let Some((container, sub)) = name.rsplit_once('|') {
                    let at = known_index(container).ok_or(RuleError::Unknown)?;
                    if known()[at].parent.is_some() || container.contains('|') {
                        return Err(RuleError::SubcommandFirstArg);
                    }
                    if sub.is_empty() {
                        return Err(RuleError::Syntax);
                    }
                    let has_subcommands = known().iter().any(|k| k.parent == Some(at));
                    if has_subcommands {
                        let sub_at = known_index(name).ok_or(RuleError::Unknown)?;
                        self.set_command(sub_at, true);
                    } else if !self.allowed[at] {
                        let args = self.first_args.entry(at).or_default();
                        if !args.iter().any(|a| a == sub) {
                            args.push(sub.to_owned());
                        }
                    }
                } else {
                    let at = known_index(name).ok_or(RuleError::Unknown)?;
                    self.set_command(at, true);
                }
                self.note(lower);
                Ok(())
            }
            Some(b'-') => {
                let at = known_index(&lower[1..]).ok_or(RuleError::Unknown)?;
                self.set_command(at, false);
                self.note(lower);
                Ok(())
            }
            _ => Err(RuleError::Syntax),
        }
    }

    fn add_key_pattern(&mut self, op: &[u8]) -> Result<(), RuleError> {
        if self.all_keys {
            return Err(RuleError::AfterAllKeys);
        }
        let (read, write, pattern) = if op[0] == b'%' {
            let mut read = false;
            let mut write = false;
            let mut at = 1;
            loop {
                match op.get(at).map(u8::to_ascii_uppercase) {
                    Some(b'R') if !read => read = true,
                    Some(b'W') if !write => write = true,
                    Some(b'~') => {
                        at += 1;
                        break;
                    }
                    _ => return Err(RuleError::Syntax),
                }
                at += 1;
            }
            (read, write, &op[at..])
        } else {
            (true, true, &op[1..])
        };
        if has_spaces(pattern) {
            return Err(RuleError::Syntax);
        }
        match self.keys.iter_mut().find(|k| k.pattern == pattern) {
            Some(existing) => {
                existing.read |= read;
                existing.write |= write;
            }
            None => self.keys.push(KeyPattern {
                pattern: pattern.to_vec(),
                read,
                write,
            }),
        }
        Ok(())
    }

    fn unrestricted(&self) -> bool {
        self.all_commands && self.all_keys && self.all_channels
    }

    /// Whether this selector lets the call run; why not otherwise.
    fn check(&self, spec: &CommandSpec, args: &[Bytes]) -> Result<(), Denial> {
        if !self.all_commands && !spec.allowed_unauthenticated() {
            let at = call_index(spec, args).ok_or(Denial::Command)?;
            if !self.allowed[at] {
                let arg = if known()[at].parent.is_some() { 2 } else { 1 };
                let first_ok = args.get(arg).is_some_and(|given| {
                    self.first_args.get(&at).is_some_and(|allowed| {
                        allowed
                            .iter()
                            .any(|a| a.as_bytes().eq_ignore_ascii_case(given))
                    })
                });
                if !first_ok {
                    return Err(Denial::Command);
                }
            }
        }
        if !self.all_keys
            && let Some(keys) = meta::keys_with_flags(spec, args)
        {
            for (at, flags) in keys {
                if !self.key_allowed(&args[at], flags) {
                    return Err(Denial::Key(at));
                }
            }
        }
        if !self.all_channels {
            for (at, pattern) in channels(spec.name, args) {
                if !self.channel_allowed(&args[at], pattern) {
                    return Err(Denial::Channel(at));
                }
            }
        }
        Ok(())
    }

    fn key_allowed(&self, name: &[u8], flags: u16) -> bool {
        if self.all_keys {
            return true;
        }
        let read = flags & key::ACCESS != 0;
        let write = flags & (key::INSERT | key::DELETE | key::UPDATE) != 0;
        self.keys
            .iter()
            .any(|p| (p.read || !read) && (p.write || !write) && glob::matches(&p.pattern, name))
    }

    fn channel_allowed(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.all_channels
            || self.channels.iter().any(|p| {
                if is_pattern {
                    p == channel
                } else {
                    glob::matches(p, channel)
                }
            })
    }

    /// Redis' description: keys, channels, then command rules.
    fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.all_keys {
            parts.push("~*".to_owned());
        } else {
            parts.extend(self.keys.iter().map(describe_key));
        }
        if self.all_channels {
            parts.push("&*".to_owned());
        } else {
            parts.push("resetchannels".to_owned());
            parts.extend(
                self.channels
                    .iter()
                    .map(|c| format!("&{}", String::from_utf8_lossy(c))),
            );
        }
        parts.push(self.describe_commands());
        parts.join(" ")
    }

    fn describe_commands(&self) -> String {
        let mut out = if self.base_all { "+@all" } else { "-@all" }.to_owned();
        for rule in &self.rules {
            out.push(' ');
            out.push_str(rule);
        }
        out
    }

    fn describe_keys(&self) -> String {
        if self.all_keys {
            "~*".to_owned()
        } else {
            self.keys
                .iter()
                .map(describe_key)
                .collect::<Vec<_>>()
                .join(" ")
        }
    }

    fn describe_channels(&self) -> String {
        if self.all_channels {
            "&*".to_owned()
        } else {
            self.channels
                .iter()
                .map(|c| format!("&{}", String::from_utf8_lossy(c)))
                .collect::<Vec<_>>()
                .join(" ")
        }
    }
}

fn describe_key(pattern: &KeyPattern) -> String {
    let name = String::from_utf8_lossy(&pattern.pattern);
    match (pattern.read, pattern.write) {
        (true, true) => format!("~{name}"),
        (true, false) => format!("%R~{name}"),
        _ => format!("%W~{name}"),
    }
}

/// The channels a call names, with whether each is a pattern (PSUBSCRIBE's, matched
/// literally against the user's channel rules).
fn channels(name: &str, args: &[Bytes]) -> Vec<(usize, bool)> {
    match name {
        "publish" | "spublish" if args.len() > 1 => vec![(1, false)],
        "subscribe" | "ssubscribe" => (1..args.len()).map(|at| (at, false)).collect(),
        "psubscribe" => (1..args.len()).map(|at| (at, true)).collect(),
        _ => Vec::new(),
    }
}

/// A user's rules and credentials.
#[derive(Debug, Clone)]
struct Rules {
    enabled: bool,
    nopass: bool,
    /// SHA-256 hex of each password.
    passwords: Vec<String>,
    sanitize_payload: bool,
    skip_sanitize_payload: bool,
    root: Selector,
    selectors: Vec<Selector>,
}

impl Rules {
    fn new(pubsub_all: bool) -> Self {
        let mut root = Selector::new();
        root.all_channels = pubsub_all;
        Self {
            enabled: false,
            nopass: false,
            passwords: Vec::new(),
            sanitize_payload: true,
            skip_sanitize_payload: false,
            root,
            selectors: Vec::new(),
        }
    }

    fn apply(&mut self, op: &[u8], pubsub_all: bool) -> Result<(), RuleError> {
        if op.is_empty() {
            return Ok(());
        }
        let lower = String::from_utf8_lossy(op).to_ascii_lowercase();
        match lower.as_str() {
            "on" => self.enabled = true,
            "off" => self.enabled = false,
            "skip-sanitize-payload" => {
                self.skip_sanitize_payload = true;
                self.sanitize_payload = false;
            }
            "sanitize-payload" => {
                self.skip_sanitize_payload = false;
                self.sanitize_payload = true;
            }
            "nopass" => {
                self.nopass = true;
                self.passwords.clear();
            }
            "resetpass" => {
                self.nopass = false;
                self.passwords.clear();
            }
            "clearselectors" => self.selectors.clear(),
            "reset" => {
                *self = Self::new(pubsub_all);
                self.root.apply(b"-@all")?;
            }
            _ => match op[0] {
                b'>' | b'#' => {
                    let hash = if op[0] == b'>' {
                        hash_password(&op[1..])
                    } else {
                        valid_hash(&op[1..])?
                    };
                    if !self.passwords.contains(&hash) {
                        self.passwords.push(hash);
                    }
                    self.nopass = false;
                }
                b'<' | b'!' => {
                    let hash = if op[0] == b'<' {
                        hash_password(&op[1..])
                    } else {
                        valid_hash(&op[1..])?
                    };
                    let at = self
                        .passwords
                        .iter()
                        .position(|p| *p == hash)
                        .ok_or(RuleError::NoSuchPassword)?;
                    self.passwords.remove(at);
                }
                b'(' if op.last() == Some(&b')') => {
                    let mut selector = Selector::new();
                    selector.all_channels = pubsub_all;
                    for word in op[1..op.len() - 1]
                        .split(|b| *b == b' ')
                        .filter(|w| !w.is_empty())
                    {
                        selector.apply(word)?;
                    }
                    self.selectors.push(selector);
                }
                _ => self.root.apply(op)?,
            },
        }
        Ok(())
    }

    fn unrestricted(&self) -> bool {
        self.root.unrestricted()
    }

    fn check(&self, spec: &CommandSpec, args: &[Bytes]) -> Result<(), Denial> {
        let mut worst = Denial::Command;
        for selector in std::iter::once(&self.root).chain(&self.selectors) {
            match selector.check(spec, args) {
                Ok(()) => return Ok(()),
                Err(denial) if denial.rank() > worst.rank() => worst = denial,
                Err(_) => {}
            }
        }
        Err(worst)
    }

    fn flags(&self) -> Vec<&'static str> {
        let mut flags = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            flags.push("nopass");
        }
        if self.skip_sanitize_payload {
            flags.push("skip-sanitize-payload");
        }
        if self.sanitize_payload {
            flags.push("sanitize-payload");
        }
        flags
    }

    fn describe(&self) -> String {
        let mut parts: Vec<String> = self.flags().iter().map(|f| (*f).to_owned()).collect();
        parts.extend(self.passwords.iter().map(|p| format!("#{p}")));
        parts.push(self.root.describe());
        parts.extend(self.selectors.iter().map(|s| format!("({})", s.describe())));
        parts.join(" ")
    }
}

fn valid_hash(hash: &[u8]) -> Result<String, RuleError> {
    if hash.len() == 64 && hash.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        Ok(String::from_utf8_lossy(hash).into_owned())
    } else {
        Err(RuleError::BadHash)
    }
}

/// An ACL user.
#[derive(Debug)]
pub(crate) struct User {
    name: Vec<u8>,
    rules: RwLock<Rules>,
    /// Whether any call may be refused (not `+@all ~* &*`).
    restricted: AtomicBool,
}

impl User {
    /// The user's name.
    pub(crate) fn name(&self) -> &[u8] {
        &self.name
    }

    /// Whether the call is allowed; why not otherwise.
    pub(crate) fn check(&self, spec: &CommandSpec, args: &[Bytes]) -> Result<(), Denial> {
        if !self.restricted.load(Ordering::Relaxed) {
            return Ok(());
        }
        self.rules.read().check(spec, args)
    }

    /// Whether the user may still use every channel in `channels` (matched against its
    /// channel rules) and pattern in `patterns` (compared literally, as PSUBSCRIBE's are).
    pub(crate) fn keeps_channels(&self, channels: &[Bytes], patterns: &[Bytes]) -> bool {
        let rules = self.rules.read();
        let selectors = || std::iter::once(&rules.root).chain(&rules.selectors);
        channels
            .iter()
            .all(|c| selectors().any(|s| s.channel_allowed(c, false)))
            && patterns
                .iter()
                .all(|p| selectors().any(|s| s.channel_allowed(p, true)))
    }

    /// Whether the user may be authenticated as with `password`.
    pub(crate) fn accepts(&self, password: &[u8]) -> bool {
        let rules = self.rules.read();
        if !rules.enabled {
            return false;
        }
        if rules.nopass {
            return true;
        }
        let hash = hash_password(password);
        rules.passwords.iter().any(|p| {
            weft_security::credentials::equal_in_constant_time(p.as_bytes(), hash.as_bytes())
        })
    }

    /// Whether a new connection is this user without AUTH (on, no password).
    fn open(&self) -> bool {
        let rules = self.rules.read();
        rules.enabled && rules.nopass
    }

    fn replace(&self, rules: Rules) {
        self.restricted
            .store(!rules.unrestricted(), Ordering::Relaxed);
        *self.rules.write() = rules;
    }

    fn new(name: &[u8], rules: Rules) -> Self {
        Self {
            name: name.to_vec(),
            restricted: AtomicBool::new(!rules.unrestricted()),
            rules: RwLock::new(rules),
        }
    }
}

/// Where a refusal happened, for the ACL log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Context {
    Toplevel,
    Multi,
    Lua,
}

impl Context {
    fn name(self) -> &'static str {
        match self {
            Self::Toplevel => "toplevel",
            Self::Multi => "multi",
            Self::Lua => "lua",
        }
    }
}

/// Why an entry was logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    Command,
    Key,
    Channel,
    Auth,
}

impl Reason {
    fn name(self) -> &'static str {
        match self {
            Self::Command => "command",
            Self::Key => "key",
            Self::Channel => "channel",
            Self::Auth => "auth",
        }
    }
}

/// One ACL LOG entry.
#[derive(Debug, Clone)]
pub(crate) struct LogEntry {
    count: u64,
    reason: Reason,
    context: Context,
    object: Vec<u8>,
    username: Vec<u8>,
    at: Instant,
    client_info: String,
}

/// Entries closer in time than this are counted as one (Redis' grouping window).
const LOG_GROUPING_MS: u128 = 60_000;

/// The ACL users of a server and its ACL log.
#[derive(Debug)]
pub(crate) struct Acl {
    users: RwLock<BTreeMap<Vec<u8>, Arc<User>>>,
    /// Whether `default` is an ACL user: without a users file (or bearer tokens), or once
    /// ACL SETUSER changed it. With one, `default` is whoever the users file says.
    default_managed: AtomicBool,
    log: Mutex<VecDeque<LogEntry>>,
    log_max: AtomicUsize,
    /// `acl-pubsub-default allchannels`.
    pubsub_all: AtomicBool,
}

impl Acl {
    /// The users at startup: `default` with every permission, and no password — or the
    /// shared `password`, when one is set. With a users file `default` is not an ACL user
    /// until ACL SETUSER makes it one.
    pub(crate) fn new(password: Option<&str>, has_users: bool) -> Self {
        let mut rules = Rules::new(true);
        for op in ["+@all", "~*", "&*", "on"] {
            let _ = rules.apply(op.as_bytes(), false);
        }
        match password {
            Some(password) => {
                let _ = rules.apply(format!(">{password}").as_bytes(), false);
            }
            None => {
                let _ = rules.apply(b"nopass", false);
            }
        }
        if has_users {
            rules.enabled = false;
        }
        let mut users = BTreeMap::new();
        users.insert(b"default".to_vec(), Arc::new(User::new(b"default", rules)));
        Self {
            users: RwLock::new(users),
            default_managed: AtomicBool::new(!has_users),
            log: Mutex::new(VecDeque::new()),
            log_max: AtomicUsize::new(128),
            pubsub_all: AtomicBool::new(false),
        }
    }

    /// Applies a CONFIG SET of an ACL parameter (`acllog-max-len`, `acl-pubsub-default`,
    /// `requirepass`).
    pub(crate) fn configure(&self, name: &str, value: &str) {
        match name {
            "acllog-max-len" => {
                let max = value.parse::<usize>().unwrap_or(128);
                self.log_max.store(max, Ordering::Relaxed);
                let mut log = self.log.lock();
                log.truncate(max);
            }
            "acl-pubsub-default" => self
                .pubsub_all
                .store(value.eq_ignore_ascii_case("allchannels"), Ordering::Relaxed),
            "requirepass" => {
                if let Some(user) = self.get(b"default") {
                    let mut rules = user.rules.read().clone();
                    let _ = rules.apply(b"resetpass", false);
                    if value.is_empty() {
                        let _ = rules.apply(b"nopass", false);
                    } else {
                        let _ = rules.apply(format!(">{value}").as_bytes(), false);
                    }
                    user.replace(rules);
                }
            }
            _ => {}
        }
    }

    /// The ACL user `name`, if it is one.
    pub(crate) fn get(&self, name: &[u8]) -> Option<Arc<User>> {
        if name == b"default" && !self.default_managed.load(Ordering::Relaxed) {
            return None;
        }
        self.users.read().get(name).cloned()
    }

    /// Who a new connection is before AUTH: `Some(default)` when `default` is an ACL user
    /// (authenticated when it is on with no password), `None` otherwise.
    pub(crate) fn on_connect(&self) -> Option<(Arc<User>, bool)> {
        let user = self.get(b"default")?;
        let open = user.open();
        Some((user, open))
    }

    /// Whether `default` has no password (AUTH with one argument is then an error).
    pub(crate) fn default_nopass(&self) -> Option<bool> {
        self.get(b"default").map(|u| u.rules.read().nopass)
    }

    /// ACL SETUSER: applies `ops` to `name` (made if new), all or nothing.
    ///
    /// # Errors
    /// Redis' message for the first modifier refused.
    pub(crate) fn set_user(&self, name: &[u8], ops: &[Bytes]) -> Result<Arc<User>, String> {
        if has_spaces(name) {
            return Err("ERR Usernames can't contain spaces or null characters".to_owned());
        }
        let merged = merge_selectors(ops)?;
        let pubsub_all = self.pubsub_all.load(Ordering::Relaxed);
        let existing = if name == b"default" {
            self.users.read().get(name).cloned()
        } else {
            self.get(name)
        };
        let mut rules = match &existing {
            Some(user) => user.rules.read().clone(),
            None => {
                let mut rules = Rules::new(pubsub_all);
                let _ = rules.root.apply(b"-@all");
                rules
            }
        };
        for op in &merged {
            rules.apply(op, pubsub_all).map_err(|error| {
                format!(
                    "ERR Error in ACL SETUSER modifier '{}': {}",
                    String::from_utf8_lossy(op),
                    error.message()
                )
            })?;
        }
        let user = match existing {
            Some(user) => {
                user.replace(rules);
                user
            }
            None => {
                let user = Arc::new(User::new(name, rules));
                self.users.write().insert(name.to_vec(), Arc::clone(&user));
                user
            }
        };
        if name == b"default" {
            self.default_managed.store(true, Ordering::Relaxed);
        }
        Ok(user)
    }

    /// ACL DELUSER: removes the users named (not `default`); how many were.
    pub(crate) fn delete(&self, names: &[Bytes]) -> Vec<Arc<User>> {
        let mut users = self.users.write();
        names
            .iter()
            .filter_map(|name| users.remove(&name[..]))
            .collect()
    }

    /// The ACL users' names, sorted.
    pub(crate) fn names(&self) -> Vec<Vec<u8>> {
        let managed = self.default_managed.load(Ordering::Relaxed);
        self.users
            .read()
            .keys()
            .filter(|name| managed || name.as_slice() != b"default")
            .cloned()
            .collect()
    }

    /// ACL LIST's line of `name`.
    pub(crate) fn describe(&self, name: &[u8]) -> Option<String> {
        let user = self.get(name)?;
        let rules = user.rules.read();
        Some(format!(
            "user {} {}",
            String::from_utf8_lossy(name),
            rules.describe()
        ))
    }

    /// ACL GETUSER's fields of `name`.
    pub(crate) fn details(&self, name: &[u8]) -> Option<UserDetails> {
        let user = self.get(name)?;
        let rules = user.rules.read();
        let describe = |s: &Selector| SelectorDetails {
            commands: s.describe_commands(),
            keys: s.describe_keys(),
            channels: s.describe_channels(),
        };
        Some(UserDetails {
            flags: rules.flags(),
            passwords: rules.passwords.clone(),
            root: describe(&rules.root),
            selectors: rules.selectors.iter().map(describe).collect(),
        })
    }

    /// Records a refusal in the ACL log.
    pub(crate) fn log(
        &self,
        reason: Reason,
        context: Context,
        object: &[u8],
        username: &[u8],
        client_info: String,
    ) {
        let max = self.log_max.load(Ordering::Relaxed);
        let now = Instant::now();
        let mut log = self.log.lock();
        let similar = log.iter().take(10).position(|e| {
            e.reason == reason
                && e.context == context
                && e.object == object
                && e.username == username
                && now.duration_since(e.at).as_millis() <= LOG_GROUPING_MS
        });
        if let Some(at) = similar
            && let Some(mut entry) = log.remove(at)
        {
            entry.count += 1;
            entry.at = now;
            entry.client_info = client_info;
            log.push_front(entry);
            return;
        }
        log.push_front(LogEntry {
            count: 1,
            reason,
            context,
            object: object.to_vec(),
            username: username.to_vec(),
            at: now,
            client_info,
        });
        log.truncate(max);
    }

    /// ACL LOG's newest `count` entries.
    pub(crate) fn log_entries(&self, count: usize) -> Vec<LogEntry> {
        self.log.lock().iter().take(count).cloned().collect()
    }

    /// ACL LOG RESET.
    pub(crate) fn log_reset(&self) {
        self.log.lock().clear();
    }
}

impl LogEntry {
    /// The entry's fields as ACL LOG lists them.
    pub(crate) fn fields(&self) -> (u64, &'static str, &'static str, &[u8], &[u8], f64, &str) {
        (
            self.count,
            self.reason.name(),
            self.context.name(),
            &self.object,
            &self.username,
            self.at.elapsed().as_secs_f64(),
            &self.client_info,
        )
    }
}

/// ACL GETUSER's answer.
pub(crate) struct UserDetails {
    pub flags: Vec<&'static str>,
    pub passwords: Vec<String>,
    pub root: SelectorDetails,
    pub selectors: Vec<SelectorDetails>,
}

/// One selector in ACL GETUSER's answer.
pub(crate) struct SelectorDetails {
    pub commands: String,
    pub keys: String,
    pub channels: String,
}

/// Joins the words of a selector given across several arguments (`(~k*` `+get)`).
fn merge_selectors(ops: &[Bytes]) -> Result<Vec<Vec<u8>>, String> {
    let mut merged = Vec::new();
    let mut open: Option<(Vec<u8>, usize)> = None;
    for (i, op) in ops.iter().enumerate() {
        if let Some((selector, _)) = &mut open {
            selector.push(b' ');
            selector.extend_from_slice(op);
            if op.last() == Some(&b')') {
                if let Some((done, _)) = open.take() {
                    merged.push(done);
                }
            }
            continue;
        }
        if op.first() == Some(&b'(') && op.last() != Some(&b')') {
            open = Some((op.to_vec(), i));
            continue;
        }
        merged.push(op.to_vec());
    }
    if let Some((_, at)) = open {
        return Err(format!(
            "ERR Unmatched parenthesis in acl selector starting at '{}'.",
            String::from_utf8_lossy(&ops[at])
        ));
    }
    Ok(merged)
}

/// NOPERM's words for a refusal at the top level (and in MULTI).
pub(crate) fn refusal(denial: Denial, spec: &CommandSpec, args: &[Bytes]) -> String {
    match denial {
        Denial::Command => format!(
            "NOPERM this user has no permissions to run the '{}' command",
            full_name(spec, args)
        ),
        Denial::Key(_) => {
            "NOPERM this user has no permissions to access one of the keys used as arguments"
                .to_owned()
        }
        Denial::Channel(_) => {
            "NOPERM this user has no permissions to access one of the channels used as arguments"
                .to_owned()
        }
    }
}

/// The words of a refusal inside a script.
pub(crate) fn script_refusal(denial: Denial) -> &'static str {
    match denial {
        Denial::Command => "The user executing the script can't run this command or subcommand",
        Denial::Key(_) => {
            "The user executing the script can't access at least one of the keys mentioned in the command"
        }
        Denial::Channel(_) => {
            "The user executing the script can't publish to the channel mentioned in the command"
        }
    }
}

/// ACL DRYRUN's words.
pub(crate) fn dry_run_refusal(denial: Denial, spec: &CommandSpec, args: &[Bytes]) -> String {
    match denial {
        Denial::Command => format!(
            "This user has no permissions to run the '{}' command",
            full_name(spec, args)
        ),
        Denial::Key(at) => format!(
            "This user has no permissions to access the '{}' key",
            String::from_utf8_lossy(&args[at])
        ),
        Denial::Channel(at) => format!(
            "This user has no permissions to access the '{}' channel",
            String::from_utf8_lossy(&args[at])
        ),
    }
}

/// What the ACL log records of a refusal: its reason and object.
pub(crate) fn logged(denial: Denial, spec: &CommandSpec, args: &[Bytes]) -> (Reason, Vec<u8>) {
    match denial {
        Denial::Command => (Reason::Command, full_name(spec, args).into_bytes()),
        Denial::Key(at) => (Reason::Key, args[at].to_vec()),
        Denial::Channel(at) => (Reason::Channel, args[at].to_vec()),
    }
}

/// `name` or `container|sub`, as Redis names the command in its errors.
pub(crate) fn full_name(spec: &CommandSpec, args: &[Bytes]) -> String {
    call_index(spec, args).map_or_else(|| spec.name.to_owned(), |at| known()[at].name.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resp::table::lookup;

    fn run(user: &User, words: &[&str]) -> Result<(), Denial> {
        let args: Vec<Bytes> = words.iter().map(|w| Bytes::from(w.to_string())).collect();
        let spec = lookup(&args[0]).expect("command");
        user.check(spec, &args)
    }

    fn user(acl: &Acl, name: &str, ops: &[&str]) -> Arc<User> {
        let ops: Vec<Bytes> = ops.iter().map(|w| Bytes::from(w.to_string())).collect();
        acl.set_user(name.as_bytes(), &ops).expect("valid rules")
    }

    #[test]
    fn default_runs_everything_and_new_users_nothing() {
        let acl = Acl::new(None, false);
        let (default, open) = acl.on_connect().expect("default");
        assert!(open);
        assert_eq!(run(&default, &["flushall"]), Ok(()));
        let bob = user(&acl, "bob", &[]);
        assert_eq!(run(&bob, &["get", "k"]), Err(Denial::Command));
        assert!(!bob.accepts(b"x"), "new users are off");
        assert_eq!(
            acl.describe(b"bob").as_deref(),
            Some("user bob off sanitize-payload resetchannels -@all")
        );
    }

    #[test]
    fn commands_keys_and_channels_are_checked() {
        let acl = Acl::new(None, false);
        let bob = user(
            &acl,
            "bob",
            &["on", ">123", "+@scripting", "+set", "~x*", "&news.*"],
        );
        assert!(bob.accepts(b"123"));
        assert!(!bob.accepts(b"124"));
        assert_eq!(run(&bob, &["set", "xx", "1"]), Ok(()));
        assert_eq!(run(&bob, &["set", "yy", "1"]), Err(Denial::Key(1)));
        assert_eq!(run(&bob, &["hset", "xx", "f", "1"]), Err(Denial::Command));
        assert_eq!(run(&bob, &["eval", "return 1", "0"]), Ok(()));
        assert_eq!(run(&bob, &["publish", "news.a", "m"]), Err(Denial::Command));
        let carol = user(
            &acl,
            "carol",
            &["on", "nopass", "+@all", "&news.*", "%R~r*"],
        );
        assert_eq!(run(&carol, &["publish", "news.a", "m"]), Ok(()));
        assert_eq!(
            run(&carol, &["publish", "sport", "m"]),
            Err(Denial::Channel(1))
        );
        assert_eq!(run(&carol, &["psubscribe", "news.*"]), Ok(()));
        assert_eq!(
            run(&carol, &["psubscribe", "news.a*"]),
            Err(Denial::Channel(1))
        );
        assert_eq!(run(&carol, &["get", "r1"]), Ok(()));
        assert_eq!(run(&carol, &["set", "r1", "v"]), Err(Denial::Key(1)));
        assert_eq!(run(&carol, &["ping"]), Ok(()));
    }

    #[test]
    fn subcommands_first_args_and_selectors() {
        let acl = Acl::new(None, false);
        let u = user(
            &acl,
            "u",
            &["on", "nopass", "allkeys", "+config|get", "+select|0"],
        );
        assert_eq!(run(&u, &["config", "get", "x"]), Ok(()));
        assert_eq!(run(&u, &["config", "set", "x", "y"]), Err(Denial::Command));
        assert_eq!(run(&u, &["select", "0"]), Ok(()));
        assert_eq!(run(&u, &["select", "1"]), Err(Denial::Command));
        let s = user(&acl, "s", &["on", "nopass", "+get", "~a*", "(+set", "~b*)"]);
        assert_eq!(run(&s, &["get", "a1"]), Ok(()));
        assert_eq!(run(&s, &["set", "b1", "v"]), Ok(()));
        assert_eq!(run(&s, &["set", "a1", "v"]), Err(Denial::Key(1)));
        let details = acl.details(b"s").expect("s");
        assert_eq!(details.selectors.len(), 1);
        assert_eq!(details.selectors[0].keys, "~b*");
    }

    #[test]
    fn bad_modifiers_change_nothing() {
        let acl = Acl::new(None, false);
        user(&acl, "bob", &["on", "+get"]);
        let error = acl
            .set_user(b"bob", &[Bytes::from("off"), Bytes::from("+nosuchcommand")])
            .expect_err("unknown command");
        assert!(
            error.contains("Unknown command or category name in ACL"),
            "{error}"
        );
        assert!(acl.get(b"bob").is_some_and(|b| b.rules.read().enabled));
        assert!(acl.set_user(b"a b", &[]).is_err());
        assert!(acl.set_user(b"x", &[Bytes::from("(+get")]).is_err());
        assert!(acl.set_user(b"x", &[Bytes::from("#abc")]).is_err());
    }
}
