//! What Redis' specification says of each command beyond the command table: its ACL
//! categories and its key specs (which arguments are keys, and how each is used). The data
//! are generated from Redis' own command descriptions into `meta_table.rs`; this module
//! reads them: ACL rules by category (`+@read`), COMMAND INFO's categories, COMMAND LIST
//! FILTERBY ACLCAT, and the keys with their flags that ACL key patterns (`%R~`, `%W~`) and
//! COMMAND GETKEYSANDFLAGS need.

use bytes::Bytes;

use super::meta_table::META;
use super::table::CommandSpec;

/// One command's (or `container|sub`command's) description.
#[derive(Debug)]
pub struct CommandMeta {
    /// Lower-case name; `container|sub` for a subcommand.
    pub name: &'static str,
    /// Its ACL categories, one bit each in [`CATEGORIES`]' order.
    pub categories: u32,
    /// Whether Redis refuses it in scripts (`noscript`): CLUSTER RESET is, CLUSTER INFO
    /// is not.
    pub noscript: bool,
    /// Where its keys are and how it uses them.
    pub key_specs: &'static [KeySpec],
}

/// A key spec: where a run of keys begins, how far it goes, and what is done to them.
#[derive(Debug)]
pub struct KeySpec {
    /// [`key`] flags.
    pub flags: u16,
    /// Where the search begins.
    pub begin: Begin,
    /// Which arguments from there are keys.
    pub find: Find,
}

/// Where a key spec's keys begin.
#[derive(Debug)]
pub enum Begin {
    /// At this argument.
    Index(i32),
    /// After this keyword, searched from this argument (backwards when negative).
    Keyword(&'static str, i32),
    /// Only the command knows.
    Unknown,
}

/// Which arguments are keys, from where the search began.
#[derive(Debug)]
pub enum Find {
    /// Up to `last` (relative; negative counts from the end), each `step`th; with `limit`,
    /// one `limit`th of what remains.
    Range { last: i32, step: i32, limit: i32 },
    /// A count at `index` (relative), then that many keys from `first`, each `step`th.
    Keynum { index: i32, first: i32, step: i32 },
    /// Only the command knows.
    Unknown,
}

/// Key-spec flags, as Redis names them.
pub mod key {
    pub const RO: u16 = 1;
    pub const RW: u16 = 1 << 1;
    pub const OW: u16 = 1 << 2;
    pub const RM: u16 = 1 << 3;
    pub const ACCESS: u16 = 1 << 4;
    pub const UPDATE: u16 = 1 << 5;
    pub const INSERT: u16 = 1 << 6;
    pub const DELETE: u16 = 1 << 7;
    pub const NOT_KEY: u16 = 1 << 8;
    pub const INCOMPLETE: u16 = 1 << 9;
    pub const VARIABLE_FLAGS: u16 = 1 << 10;
    /// Their names, in the order COMMAND GETKEYSANDFLAGS lists them.
    pub const NAMES: [(u16, &str); 11] = [
        (RO, "RO"),
        (RW, "RW"),
        (OW, "OW"),
        (RM, "RM"),
        (ACCESS, "access"),
        (UPDATE, "update"),
        (INSERT, "insert"),
        (DELETE, "delete"),
        (NOT_KEY, "not_key"),
        (INCOMPLETE, "incomplete"),
        (VARIABLE_FLAGS, "variable_flags"),
    ];
}

/// Redis' ACL categories, in its order (bit `i` of [`CommandMeta::categories`] is
/// `CATEGORIES[i]`).
pub const CATEGORIES: [&str; 21] = [
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// The bit of category `name` (case-insensitive), if it is one.
#[must_use]
pub fn category(name: &[u8]) -> Option<u32> {
    CATEGORIES
        .iter()
        .position(|c| c.as_bytes().eq_ignore_ascii_case(name))
        .map(|i| 1 << i)
}

/// Every description.
#[must_use]
pub fn all() -> &'static [CommandMeta] {
    META
}

/// The description of `name` (lower case; `container|sub` for a subcommand).
#[must_use]
pub fn lookup(name: &str) -> Option<&'static CommandMeta> {
    META.binary_search_by(|meta| meta.name.cmp(name))
        .ok()
        .map(|i| &META[i])
}

/// `container|sub` of a call to a container command (one with subcommands), in lower case.
#[must_use]
pub fn subcommand_name(spec: &CommandSpec, args: &[Bytes]) -> Option<String> {
    let sub = args.get(1).filter(|_| !spec.subcommands.is_empty())?;
    Some(format!(
        "{}|{}",
        spec.name,
        String::from_utf8_lossy(sub).to_ascii_lowercase()
    ))
}

/// The description of the command `spec` runs with `args`: its subcommand's for a
/// container command, else its own.
#[must_use]
pub fn of_call(spec: &CommandSpec, args: &[Bytes]) -> Option<&'static CommandMeta> {
    subcommand_name(spec, args)
        .and_then(|full| lookup(&full))
        .or_else(|| lookup(spec.name))
}

/// The categories of a command Weft serves that Redis does not describe (none of Weft's
/// own commands are): from its flags, as Redis derives a command's categories.
#[must_use]
pub fn categories_of(spec: &CommandSpec, args: &[Bytes]) -> u32 {
    if let Some(meta) = of_call(spec, args) {
        return meta.categories;
    }
    let bit = |name: &str| category(name.as_bytes()).unwrap_or(0);
    let mut categories = 0;
    for (flag, name) in [
        ("write", "write"),
        ("readonly", "read"),
        ("admin", "admin"),
        ("pubsub", "pubsub"),
        ("fast", "fast"),
        ("blocking", "blocking"),
    ] {
        if spec.flags.contains(&flag) {
            categories |= bit(name);
        }
    }
    if spec.flags.contains(&"admin") {
        categories |= bit("dangerous");
    }
    if categories & bit("fast") == 0 {
        categories |= bit("slow");
    }
    categories
}

/// The keys of a call with how each is used: positions in `args` (the name at 0) with
/// [`key`] flags, as Redis finds them (its key specs, else the command's own syntax);
/// `None` when the arguments do not say.
#[must_use]
pub fn keys_with_flags(spec: &CommandSpec, args: &[Bytes]) -> Option<Vec<(usize, u16)>> {
    let meta = of_call(spec, args);
    let specs = meta.map_or(&[][..], |meta| meta.key_specs);
    let any_key = specs.iter().any(|s| s.flags & key::NOT_KEY == 0);
    let variable = specs.iter().any(|s| s.flags & key::VARIABLE_FLAGS != 0);
    if any_key
        && !variable
        && let Some(keys) = by_specs(specs, args)
    {
        return Some(keys);
    }
    let positions = super::commands::server::key_positions(spec, args)?;
    Some(
        positions
            .into_iter()
            .enumerate()
            .map(|(i, at)| (at, own_flags(spec.name, specs, i, args)))
            .collect(),
    )
}

/// The flags of the `i`th key found by a command's own syntax: by what the call does for
/// the commands whose flags vary (SET with GET, BITFIELD with only GETs), else the spec at
/// `i`: the first spec's for the first key, the last spec's for the others (SORT's and
/// GEORADIUS' source, then their STORE destination).
fn own_flags(name: &str, specs: &[KeySpec], i: usize, args: &[Bytes]) -> u16 {
    use key::{ACCESS, OW, RO, RW, UPDATE};
    let has = |word: &str| {
        args.iter()
            .skip(2)
            .any(|a| a.eq_ignore_ascii_case(word.as_bytes()))
    };
    match name {
        "set" if has("GET") => RW | ACCESS | UPDATE,
        "set" => OW | UPDATE,
        "bitfield" => {
            let writes = ["SET", "INCRBY"].iter().any(|w| has(w));
            if writes {
                RW | ACCESS | UPDATE
            } else {
                RO | ACCESS
            }
        }
        _ => if i == 0 { specs.first() } else { specs.last() }
            .map_or(RW | ACCESS | UPDATE, |s| s.flags & !key::INCOMPLETE),
    }
}

/// Redis' key-spec search; `None` when a spec cannot be followed on these arguments (its
/// keyword is missing is not that: that spec then names no key).
fn by_specs(specs: &[KeySpec], args: &[Bytes]) -> Option<Vec<(usize, u16)>> {
    let argc = i64::try_from(args.len()).ok()?;
    let mut keys = Vec::new();
    for spec in specs {
        if spec.flags & key::NOT_KEY != 0 {
            continue;
        }
        let mut first: i64 = match spec.begin {
            Begin::Index(at) => i64::from(at),
            Begin::Keyword(word, from) => {
                let from = i64::from(from);
                let (start, end) = if from > 0 {
                    (from, argc - 1)
                } else {
                    (argc + from, 1)
                };
                let mut found = 0;
                let mut at = start;
                loop {
                    if at >= argc || at < 1 {
                        break;
                    }
                    if args[usize::try_from(at).ok()?].eq_ignore_ascii_case(word.as_bytes()) {
                        found = at + 1;
                        break;
                    }
                    if at == end {
                        break;
                    }
                    at += if start <= end { 1 } else { -1 };
                }
                if found == 0 {
                    continue;
                }
                found
            }
            Begin::Unknown => return None,
        };
        let (last, step) = match spec.find {
            Find::Range { last, step, limit } => {
                let last = i64::from(last);
                let limit = i64::from(limit);
                let end = if last >= 0 {
                    first + last
                } else if limit == 0 {
                    argc + last
                } else {
                    first + ((argc - first) / limit + last)
                };
                (end, i64::from(step))
            }
            Find::Keynum {
                index,
                first: from,
                step,
            } => {
                let at = usize::try_from(first + i64::from(index)).ok()?;
                let count = weft_resp::parse_i64_strict(args.get(at)?)?;
                if count < 0 {
                    return None;
                }
                first += i64::from(from);
                (first + count - 1, i64::from(step))
            }
            Find::Unknown => return None,
        };
        if last >= argc || first >= argc {
            return None;
        }
        if last < first {
            // No keys (a count of 0), which Redis calls invalid too.
            return None;
        }
        let mut at = first;
        while at <= last {
            keys.push((usize::try_from(at).ok()?, spec.flags));
            at += step.max(1);
        }
        if spec.flags & key::INCOMPLETE != 0 {
            return None;
        }
    }
    Some(keys)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resp::table::lookup as command;

    fn call(words: &[&str]) -> Vec<(String, Vec<&'static str>)> {
        let args: Vec<Bytes> = words.iter().map(|w| Bytes::from(w.to_string())).collect();
        let spec = command(&args[0]).expect("a command");
        keys_with_flags(spec, &args)
            .expect("keys")
            .into_iter()
            .map(|(at, flags)| {
                let names = key::NAMES
                    .iter()
                    .filter(|(bit, _)| flags & bit != 0)
                    .map(|(_, name)| *name)
                    .collect();
                (words[at].to_owned(), names)
            })
            .collect()
    }

    #[test]
    fn keys_are_found_with_the_flags_redis_gives_them() {
        assert_eq!(
            call(&["set", "k1", "v"]),
            [("k1".into(), vec!["OW", "update"])]
        );
        assert_eq!(
            call(&["set", "k1", "v", "get"]),
            [("k1".into(), vec!["RW", "access", "update"])]
        );
        assert_eq!(
            call(&["lmove", "a", "b", "left", "right"]),
            [
                ("a".into(), vec!["RW", "access", "delete"]),
                ("b".into(), vec!["RW", "insert"])
            ]
        );
        assert_eq!(
            call(&["sort", "a", "store", "b"]),
            [
                ("a".into(), vec!["RO", "access"]),
                ("b".into(), vec!["OW", "update"])
            ]
        );
        assert_eq!(
            call(&["mset", "a", "1", "b", "2"]),
            [
                ("a".into(), vec!["OW", "update"]),
                ("b".into(), vec!["OW", "update"])
            ]
        );
        assert_eq!(
            call(&["eval", "return 1", "2", "a", "b", "x"]).len(),
            2,
            "EVAL's keys are counted"
        );
        assert_eq!(call(&["xread", "streams", "s1", "s2", "0", "0"]).len(), 2);
        assert_eq!(call(&["memory", "usage", "k"]), [("k".into(), vec!["RO"])]);
    }

    #[test]
    fn categories_are_redis_and_derived() {
        let get = lookup("get").expect("get");
        for name in ["read", "string", "fast"] {
            assert_ne!(
                get.categories & category(name.as_bytes()).unwrap_or(0),
                0,
                "{name}"
            );
        }
        let config_get = lookup("config|get").expect("config|get");
        assert_ne!(
            config_get.categories & category(b"dangerous").unwrap_or(0),
            0
        );
        assert!(category(b"nonsense").is_none());
    }
}
