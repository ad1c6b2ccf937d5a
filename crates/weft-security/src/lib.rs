//! `weft-security` owns who may connect: users and their credentials, the users file they
//! live in, and the server side of the SASL mechanisms the protocols authenticate with. It
//! knows no protocol and opens no socket: the server's protocol adapters carry its messages.
//!
//! - [`credentials`]: what is stored for a password — never the password. A slow hash
//!   (Argon2id) checks passwords sent whole (SASL PLAIN, HTTP Basic, Redis `AUTH`); SCRAM's
//!   `StoredKey`/`ServerKey` (SHA-256 and SHA-512) let SCRAM clients prove they know it.
//! - [`users`]: the users file (`users.toml`): users, their credentials and groups; read,
//!   edited (`weft user …`), written atomically, re-read when it changes.
//! - [`sasl`]: server-side PLAIN and SCRAM-SHA-256/512 exchanges as values stepped with the
//!   client's messages.
//! - [`files`]: PEM certificates and keys, and noticing that a file changed.
//! - [`Subject`]: who a connection authenticated as, with the roles its groups grant.

pub mod credentials;
pub mod files;
pub mod sasl;
pub mod users;

use std::collections::BTreeSet;
use std::sync::Arc;

/// Who a connection is: the user it authenticated as, and the roles that grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    /// The user's name.
    pub name: Arc<str>,
    /// Its groups, as the users file lists them.
    pub groups: BTreeSet<String>,
    /// Its roles: by default each group grants the role of the same name.
    pub roles: BTreeSet<String>,
}

impl Subject {
    /// A subject named `name` in `groups`, each granting the role of its name.
    #[must_use]
    pub fn new(name: &str, groups: impl IntoIterator<Item = String>) -> Self {
        let groups: BTreeSet<String> = groups.into_iter().collect();
        Self {
            name: name.into(),
            roles: groups.clone(),
            groups,
        }
    }
}
