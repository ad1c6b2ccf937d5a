//! The users file: who may connect, with what credentials, in which groups.
//!
//! ```toml
//! [users.alice]
//! groups = ["admin"]
//! password = "$argon2id$v=19$m=19456,t=2,p=1$…$…"
//! scram = ["SCRAM-SHA-256$4096:…$…:…", "SCRAM-SHA-512$4096:…$…:…"]
//! ```
//!
//! `weft user create|password|groups|remove|list` edit it ([`Users`]); the server reads it
//! through a [`Realm`], which re-reads it when it changes. It holds no password, only what
//! checks one, and is written atomically with owner-only permissions.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};

use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};

use crate::Subject;
use crate::credentials::{CredentialError, PasswordHash, ScramCredential, ScramHash};
use crate::files::{Stamp, stamp};

/// Most bytes in a user name.
pub const NAME_BYTES_MAX: usize = 256;
/// Password checks remembered (so an HTTP client sending Basic credentials with every request
/// pays the slow hash once), before the memory is cleared.
const VERIFIED_MAX: usize = 4096;

/// Why the users file could not be read, changed or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UsersError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a users file.
    #[error("{source_name}: {reason}")]
    Syntax {
        /// The file (or what stood for it).
        source_name: String,
        /// Why.
        reason: String,
    },
    /// A user's entry is unusable.
    #[error("user `{user}`: {reason}")]
    User {
        /// The user.
        user: String,
        /// Why.
        reason: String,
    },
    /// A credential could not be made.
    #[error(transparent)]
    Credential(#[from] CredentialError),
}

/// One user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// Its name.
    pub name: String,
    /// Its groups.
    pub groups: BTreeSet<String>,
    /// What checks a password sent whole.
    pub password: Option<PasswordHash>,
    /// What runs SCRAM, per hash function.
    pub scram: BTreeMap<ScramHash, ScramCredential>,
}

impl User {
    /// User `name` in `groups` with the credentials of `password` (every kind).
    ///
    /// # Errors
    /// If the name or a group is invalid, or hashing fails.
    pub fn new(
        name: &str,
        password: &str,
        groups: impl IntoIterator<Item = String>,
    ) -> Result<Self, UsersError> {
        check_name(name)?;
        let mut user = Self {
            name: name.to_owned(),
            groups: BTreeSet::new(),
            password: None,
            scram: BTreeMap::new(),
        };
        user.set_groups(groups)?;
        user.set_password(password)?;
        Ok(user)
    }

    /// Replaces every credential with those of `password`.
    ///
    /// # Errors
    /// If hashing fails.
    pub fn set_password(&mut self, password: &str) -> Result<(), UsersError> {
        if password.is_empty() {
            return Err(UsersError::User {
                user: self.name.clone(),
                reason: "an empty password".to_owned(),
            });
        }
        self.password = Some(PasswordHash::new(password)?);
        self.scram = ScramHash::ALL
            .into_iter()
            .map(|hash| ScramCredential::new(hash, password).map(|c| (hash, c)))
            .collect::<Result<_, _>>()?;
        Ok(())
    }

    /// Replaces the groups.
    ///
    /// # Errors
    /// If a group name is invalid.
    pub fn set_groups(
        &mut self,
        groups: impl IntoIterator<Item = String>,
    ) -> Result<(), UsersError> {
        let groups: BTreeSet<String> = groups
            .into_iter()
            .map(|g| g.trim().to_owned())
            .filter(|g| !g.is_empty())
            .collect();
        if let Some(bad) = groups.iter().find(|g| !valid_group(g)) {
            return Err(UsersError::User {
                user: self.name.clone(),
                reason: format!("group `{bad}`: use letters, digits, `-`, `_` and `.`"),
            });
        }
        self.groups = groups;
        Ok(())
    }

    /// Who this user is once authenticated.
    #[must_use]
    pub fn subject(&self) -> Subject {
        Subject::new(&self.name, self.groups.iter().cloned())
    }
}

fn check_name(name: &str) -> Result<(), UsersError> {
    let reason = if name.is_empty() {
        "an empty name"
    } else if name.len() > NAME_BYTES_MAX {
        "a name longer than 256 bytes"
    } else if name
        .chars()
        .any(|c| c.is_control() || c.is_whitespace() || c == ':')
    {
        "a name with a space, a control character or `:` (HTTP Basic splits at the first `:`)"
    } else {
        return Ok(());
    };
    Err(UsersError::User {
        user: name.escape_debug().to_string(),
        reason: reason.to_owned(),
    })
}

fn valid_group(group: &str) -> bool {
    group.len() <= NAME_BYTES_MAX
        && group
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// The file's form.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileForm {
    #[serde(default)]
    users: BTreeMap<String, UserForm>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct UserForm {
    #[serde(default)]
    groups: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    password: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    scram: Vec<String>,
}

/// Every user of a users file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Users {
    users: BTreeMap<String, User>,
}

impl Users {
    /// Parses a users file's text; `source_name` appears in errors.
    ///
    /// # Errors
    /// The first problem, with the user it is in.
    pub fn parse(source_name: &str, text: &str) -> Result<Self, UsersError> {
        let form: FileForm = toml::from_str(text).map_err(|e| UsersError::Syntax {
            source_name: source_name.to_owned(),
            reason: e.to_string(),
        })?;
        let mut users = BTreeMap::new();
        for (name, entry) in form.users {
            check_name(&name)?;
            let bad = |reason: String| UsersError::User {
                user: name.clone(),
                reason,
            };
            let password = entry
                .password
                .as_deref()
                .map(str::parse::<PasswordHash>)
                .transpose()
                .map_err(|e| bad(e.to_string()))?;
            let mut scram = BTreeMap::new();
            for text in &entry.scram {
                let credential: ScramCredential = text
                    .parse()
                    .map_err(|e: CredentialError| bad(e.to_string()))?;
                if scram.insert(credential.hash, credential).is_some() {
                    return Err(bad("two SCRAM credentials of one mechanism".to_owned()));
                }
            }
            let mut user = User {
                name: name.clone(),
                groups: BTreeSet::new(),
                password,
                scram,
            };
            user.set_groups(entry.groups)?;
            users.insert(name, user);
        }
        Ok(Self { users })
    }

    /// Reads a users file; a file that does not exist is no users.
    ///
    /// # Errors
    /// If it cannot be read or parsed.
    pub fn load(path: &Path) -> Result<Self, UsersError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(&path.display().to_string(), &text),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(source) => Err(UsersError::Io {
                path: path.to_owned(),
                source,
            }),
        }
    }

    /// The file's text.
    #[must_use]
    pub fn to_toml(&self) -> String {
        let form = FileForm {
            users: self
                .users
                .values()
                .map(|user| {
                    (
                        user.name.clone(),
                        UserForm {
                            groups: user.groups.iter().cloned().collect(),
                            password: user.password.as_ref().map(|p| p.as_str().to_owned()),
                            scram: user.scram.values().map(ToString::to_string).collect(),
                        },
                    )
                })
                .collect(),
        };
        let body = toml::to_string(&form).unwrap_or_default();
        format!(
            "# Weft users: edit with `weft user create|password|groups|remove|list`.\n\
             # No password is kept here, only what checks one (Argon2id, SCRAM keys).\n\n{body}"
        )
    }

    /// Writes the file atomically (a temporary file renamed over it), readable by its owner
    /// only.
    ///
    /// # Errors
    /// If it cannot be written.
    pub fn save(&self, path: &Path) -> Result<(), UsersError> {
        let io = |source| UsersError::Io {
            path: path.to_owned(),
            source,
        };
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        let file_name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "users.toml".to_owned());
        let temporary = dir.join(format!(".{file_name}.tmp"));
        {
            use std::io::Write;
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create(true).truncate(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                options.mode(0o600);
            }
            let mut file = options.open(&temporary).map_err(io)?;
            file.write_all(self.to_toml().as_bytes()).map_err(io)?;
            file.sync_all().map_err(io)?;
        }
        std::fs::rename(&temporary, path).map_err(io)?;
        Ok(())
    }

    /// User `name`.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&User> {
        self.users.get(name)
    }

    /// User `name`, to change.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut User> {
        self.users.get_mut(name)
    }

    /// Adds or replaces a user; returns the one replaced.
    pub fn insert(&mut self, user: User) -> Option<User> {
        self.users.insert(user.name.clone(), user)
    }

    /// Removes user `name`.
    pub fn remove(&mut self, name: &str) -> Option<User> {
        self.users.remove(name)
    }

    /// Every user, by name.
    pub fn iter(&self) -> impl Iterator<Item = &User> {
        self.users.values()
    }

    /// How many users there are.
    #[must_use]
    pub fn len(&self) -> usize {
        self.users.len()
    }

    /// Whether there are none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }
}

/// The users a server authenticates against: a users file, re-read when it changes.
#[derive(Debug)]
pub struct Realm {
    path: Option<PathBuf>,
    users: RwLock<Arc<Users>>,
    stamp: Mutex<Option<Stamp>>,
    /// Password checks that passed, by a keyed hash of name and password (never the
    /// password), so repeated Basic or AUTH credentials skip the slow hash.
    verified: Mutex<BTreeMap<Vec<u8>, Subject>>,
    /// The key of those hashes: random per process.
    verified_key: [u8; 32],
}

/// A hash every failed password check of an unknown user is run against, so that an unknown
/// user takes as long to refuse as a wrong password.
static DECOY: LazyLock<Option<PasswordHash>> =
    LazyLock::new(|| PasswordHash::new("decoy password").ok());

impl Realm {
    /// The users of the file at `path` (none if it does not exist yet).
    ///
    /// # Errors
    /// If it cannot be read or parsed.
    pub fn open(path: &Path) -> Result<Self, UsersError> {
        let stamp = stamp(path);
        let users = Users::load(path)?;
        Ok(Self::with(Some(path.to_owned()), users, stamp))
    }

    /// A realm of `users`, with no file behind it.
    #[must_use]
    pub fn of(users: Users) -> Self {
        Self::with(None, users, None)
    }

    fn with(path: Option<PathBuf>, users: Users, stamp: Option<Stamp>) -> Self {
        let mut verified_key = [0; 32];
        if aws_lc_rs::rand::fill(&mut verified_key).is_err() {
            // Without randomness the memory of checks would be keyed predictably: keep none.
            tracing::warn!("no random bytes for the password-check memory; every check hashes");
        }
        Self {
            path,
            users: RwLock::new(Arc::new(users)),
            stamp: Mutex::new(stamp),
            verified: Mutex::new(BTreeMap::new()),
            verified_key,
        }
    }

    /// The file, if any.
    #[must_use]
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The users now.
    #[must_use]
    pub fn users(&self) -> Arc<Users> {
        Arc::clone(&self.users.read())
    }

    /// Re-reads the file if its size or modification time changed; returns whether it did.
    /// A file that does not parse leaves the users as they were.
    ///
    /// # Errors
    /// If the changed file cannot be read or parsed.
    pub fn reload_if_changed(&self) -> Result<bool, UsersError> {
        let Some(path) = &self.path else {
            return Ok(false);
        };
        let now = stamp(path);
        if *self.stamp.lock() == now {
            return Ok(false);
        }
        let users = Users::load(path)?;
        *self.users.write() = Arc::new(users);
        *self.stamp.lock() = now;
        self.verified.lock().clear();
        Ok(true)
    }

    /// Checks a password sent whole (SASL PLAIN, HTTP Basic, Redis AUTH).
    #[must_use]
    pub fn authenticate_password(&self, name: &str, password: &[u8]) -> Option<Subject> {
        if let Some(subject) = self.remembered(name, password) {
            return Some(subject);
        }
        let key = self.verified_key(name, password);
        let users = self.users();
        let Some(user) = users.get(name) else {
            if let Some(decoy) = DECOY.as_ref() {
                let _ = decoy.verify(password);
            }
            return None;
        };
        let hash = user.password.as_ref()?;
        if !hash.verify(password) {
            return None;
        }
        let subject = user.subject();
        let mut verified = self.verified.lock();
        if verified.len() >= VERIFIED_MAX {
            verified.clear();
        }
        verified.insert(key, subject.clone());
        Some(subject)
    }

    /// The user these credentials authenticated as recently, if they did (a few HMACs, no
    /// slow hash): [`Realm::authenticate_password`] without its cost when it would pass.
    #[must_use]
    pub fn remembered(&self, name: &str, password: &[u8]) -> Option<Subject> {
        let key = self.verified_key(name, password);
        self.verified.lock().get(&key).cloned()
    }

    /// A SCRAM credential for a user that does not exist: derived from its name and this
    /// process' key, so the same name always gets the same salt, and no password matches.
    pub(crate) fn decoy_scram(&self, hash: ScramHash, name: &str) -> ScramCredential {
        let derive = |label: &str| {
            let mut data = label.as_bytes().to_vec();
            data.extend_from_slice(name.as_bytes());
            hash.hmac_of(&self.verified_key, &data)
        };
        let mut salt = derive("salt");
        salt.truncate(16);
        ScramCredential {
            hash,
            iterations: std::num::NonZeroU32::new(crate::credentials::SCRAM_ITERATIONS_DEFAULT)
                .unwrap_or(std::num::NonZeroU32::MIN),
            salt,
            stored_key: derive("stored"),
            server_key: derive("server"),
        }
    }

    fn verified_key(&self, name: &str, password: &[u8]) -> Vec<u8> {
        let mut data = Vec::with_capacity(name.len() + 1 + password.len());
        data.extend_from_slice(name.as_bytes());
        data.push(0);
        data.extend_from_slice(password);
        ScramHash::Sha256.hmac_of(&self.verified_key, &data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a users file round-trips: users made with passwords are written and read back
    // equal, the password appears nowhere in it, and the file is owner-only.
    #[test]
    fn users_files_round_trip_without_passwords() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("users.toml");
        let mut users = Users::default();
        users.insert(
            User::new("alice", "wonderland-secret", ["admin".to_owned()])
                .unwrap_or_else(|e| panic!("{e}")),
        );
        users.insert(
            User::new(
                "bob",
                "builder-secret",
                ["observer".to_owned(), "app".to_owned()],
            )
            .unwrap_or_else(|e| panic!("{e}")),
        );
        users.save(&path).unwrap_or_else(|e| panic!("{e}"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
        assert!(!text.contains("wonderland-secret") && !text.contains("builder-secret"));
        assert_eq!(Users::load(&path).unwrap_or_else(|e| panic!("{e}")), users);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path)
                .unwrap_or_else(|e| panic!("{e}"))
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert!(Users::load(&dir.path().join("absent.toml")).is_ok_and(|u| u.is_empty()));
    }

    // Proves bad users files and names are refused with the user named.
    #[test]
    fn bad_users_are_refused() {
        for (text, expected) in [
            ("[users.a]\npassword = \"plain\"\n", "user `a`"),
            (
                "[users.a]\nscram = [\"SCRAM-SHA-256$1:AA==$AA==:AA==\"]\n",
                "user `a`",
            ),
            ("[users.a]\ngroups = [\"no spaces\"]\n", "group"),
            ("[users.\"a:b\"]\n", "`:`"),
            ("[users.a]\ncolour = \"red\"\n", "unknown field"),
            ("users = 3\n", "t.toml"),
        ] {
            let error = Users::parse("t.toml", text)
                .map(|_| ())
                .expect_err("a bad users file")
                .to_string();
            assert!(error.contains(expected), "{text}: {error}");
        }
        assert!(User::new("", "p", []).is_err());
        assert!(User::new("a b", "p", []).is_err());
        assert!(User::new("a", "", []).is_err());
    }

    // Proves the realm checks passwords (remembering successes), re-reads its file when it
    // changes, and forgets removed users at once.
    #[test]
    fn the_realm_follows_its_file() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("users.toml");
        let mut users = Users::default();
        users.insert(
            User::new("alice", "pw-1", ["admin".to_owned()]).unwrap_or_else(|e| panic!("{e}")),
        );
        users.save(&path).unwrap_or_else(|e| panic!("{e}"));
        let realm = Realm::open(&path).unwrap_or_else(|e| panic!("{e}"));
        let alice = realm
            .authenticate_password("alice", b"pw-1")
            .map(|s| s.groups);
        assert_eq!(alice, Some(BTreeSet::from(["admin".to_owned()])));
        assert!(realm.authenticate_password("alice", b"pw-2").is_none());
        assert!(realm.authenticate_password("nobody", b"pw-1").is_none());
        assert!(!realm.reload_if_changed().unwrap_or_else(|e| panic!("{e}")));

        users.get_mut("alice").map(|u| u.set_password("pw-2"));
        users.insert(User::new("carol", "pw-3", []).unwrap_or_else(|e| panic!("{e}")));
        users.save(&path).unwrap_or_else(|e| panic!("{e}"));
        // The size changes with carol's entry, whatever the clock's granularity.
        assert!(realm.reload_if_changed().unwrap_or_else(|e| panic!("{e}")));
        assert!(
            realm.authenticate_password("alice", b"pw-1").is_none(),
            "old password remembered"
        );
        assert!(realm.authenticate_password("alice", b"pw-2").is_some());
        assert!(realm.authenticate_password("carol", b"pw-3").is_some());

        std::fs::write(&path, "not toml [").unwrap_or_else(|e| panic!("{e}"));
        assert!(realm.reload_if_changed().is_err());
        assert!(
            realm.authenticate_password("carol", b"pw-3").is_some(),
            "a broken file keeps the users"
        );
    }
}
