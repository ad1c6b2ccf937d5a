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
//! - [`tokens`]: bearer tokens (JWTs) checked against an OpenID provider's JWKS file.
//! - [`authorization`]: permissions, roles, and the roles a user's groups grant (RBAC as
//!   Infinispan defines it).
//! - [`Subject`]: who a connection authenticated as, with the roles its groups grant.

pub mod authorization;
pub mod credentials;
pub mod files;
pub mod sasl;
pub mod tokens;
pub mod users;

use std::collections::BTreeSet;
use std::sync::Arc;

use authorization::Permissions;

/// Who a connection is: the user it authenticated as, and the roles that grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    /// The user's name.
    pub name: Arc<str>,
    /// Its groups, as the users file lists them.
    pub groups: BTreeSet<String>,
    /// Its roles, as an [`authorization::Policy`] maps its groups (none until one does).
    roles: BTreeSet<String>,
    /// Each role the policy defines, with what it grants.
    granted: Vec<(String, Permissions)>,
    /// What all its roles grant.
    permissions: Permissions,
}

impl Subject {
    /// A subject named `name` in `groups`, with no role yet: [`authorization::Policy::resolve`]
    /// grants its roles.
    #[must_use]
    pub fn new(name: &str, groups: impl IntoIterator<Item = String>) -> Self {
        Self {
            name: name.into(),
            groups: groups.into_iter().collect(),
            roles: BTreeSet::new(),
            granted: Vec::new(),
            permissions: Permissions::NONE,
        }
    }

    /// Its roles, as an [`authorization::Policy`] granted them.
    #[must_use]
    pub fn roles(&self) -> &BTreeSet<String> {
        &self.roles
    }
}
