//! Role-based authorization, as Infinispan defines it: permissions, roles that grant them,
//! and the mapping from a user's groups (and name) to roles.
//!
//! - [`Permissions`]: a set of Infinispan's permissions (READ, WRITE, BULK_READ,
//!   BULK_WRITE, LISTEN, EXEC, ADMIN, CREATE, MONITOR, LIFECYCLE, and the unions ALL,
//!   ALL_READ, ALL_WRITE), one bit each.
//! - [`Policy`]: the roles in force — the predefined `admin`, `deployer`, `application`,
//!   `observer` and `monitor`, plus or overridden by the configuration's — and which roles a
//!   group grants. By default a group grants the role of its name, and a user whose name is
//!   a role's has it (Infinispan's cluster role mapper).
//! - [`Subject::allows`](crate::Subject::allows): whether a subject holds a permission on a
//!   cache that may admit only some roles.
//!
//! What each protocol's operations need is the server's table; this module only decides.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::Subject;

/// A set of permissions.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Permissions(u16);

impl Permissions {
    /// No permission.
    pub const NONE: Self = Self(0);
    /// Read one entry (or a few named ones).
    pub const READ: Self = Self(1);
    /// Write one entry (or a few named ones).
    pub const WRITE: Self = Self(1 << 1);
    /// Read many entries at once: iterate, list keys, size.
    pub const BULK_READ: Self = Self(1 << 2);
    /// Change many entries at once: clear.
    pub const BULK_WRITE: Self = Self(1 << 3);
    /// Register listeners, subscribe.
    pub const LISTEN: Self = Self(1 << 4);
    /// Run tasks and scripts.
    pub const EXEC: Self = Self(1 << 5);
    /// Administer: configuration, clients, users, members.
    pub const ADMIN: Self = Self(1 << 6);
    /// Create and remove caches.
    pub const CREATE: Self = Self(1 << 7);
    /// Read statistics and metrics.
    pub const MONITOR: Self = Self(1 << 8);
    /// Start and stop caches and the server.
    pub const LIFECYCLE: Self = Self(1 << 9);
    /// READ and BULK_READ.
    pub const ALL_READ: Self = Self(Self::READ.0 | Self::BULK_READ.0);
    /// WRITE and BULK_WRITE.
    pub const ALL_WRITE: Self = Self(Self::WRITE.0 | Self::BULK_WRITE.0);
    /// Every permission.
    pub const ALL: Self = Self((1 << 10) - 1);

    /// The single permissions, with their names, in Infinispan's order.
    pub const NAMED: [(&'static str, Self); 10] = [
        ("LIFECYCLE", Self::LIFECYCLE),
        ("READ", Self::READ),
        ("WRITE", Self::WRITE),
        ("EXEC", Self::EXEC),
        ("LISTEN", Self::LISTEN),
        ("BULK_READ", Self::BULK_READ),
        ("BULK_WRITE", Self::BULK_WRITE),
        ("ADMIN", Self::ADMIN),
        ("CREATE", Self::CREATE),
        ("MONITOR", Self::MONITOR),
    ];

    /// A permission by its name (any case): one of [`Permissions::NAMED`], or `ALL`,
    /// `ALL_READ`, `ALL_WRITE`, `NONE`.
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        let upper = name.trim().to_ascii_uppercase().replace('-', "_");
        match upper.as_str() {
            "ALL" => Some(Self::ALL),
            "ALL_READ" => Some(Self::ALL_READ),
            "ALL_WRITE" => Some(Self::ALL_WRITE),
            "NONE" => Some(Self::NONE),
            _ => Self::NAMED
                .iter()
                .find(|(named, _)| *named == upper)
                .map(|&(_, permission)| permission),
        }
    }

    /// Whether every permission of `other` is in this set.
    #[must_use]
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// Both sets' permissions.
    #[must_use]
    pub const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    /// The names of the single permissions in the set, as Infinispan prints them (`ALL`
    /// for every one).
    #[must_use]
    pub fn names(self) -> Vec<&'static str> {
        if self == Self::ALL {
            return vec!["ALL"];
        }
        Self::NAMED
            .iter()
            .filter(|&&(_, permission)| self.contains(permission) && permission != Self::NONE)
            .map(|&(name, _)| name)
            .collect()
    }
}

impl fmt::Debug for Permissions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Permissions({})", self.names().join("|"))
    }
}

impl fmt::Display for Permissions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = self.names();
        if names.is_empty() {
            f.write_str("NONE")
        } else {
            f.write_str(&names.join(", "))
        }
    }
}

/// The roles every server has unless its configuration redefines them, as Infinispan's.
#[must_use]
pub fn predefined_roles() -> BTreeMap<String, Permissions> {
    let application = Permissions::ALL_READ
        .union(Permissions::ALL_WRITE)
        .union(Permissions::LISTEN)
        .union(Permissions::EXEC)
        .union(Permissions::MONITOR);
    [
        ("admin", Permissions::ALL),
        ("deployer", application.union(Permissions::CREATE)),
        ("application", application),
        (
            "observer",
            Permissions::ALL_READ.union(Permissions::MONITOR),
        ),
        ("monitor", Permissions::MONITOR),
    ]
    .into_iter()
    .map(|(name, permissions)| (name.to_owned(), permissions))
    .collect()
}

/// A configured role or mapping that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PolicyError {
    /// A permission name that is not one.
    #[error(
        "role `{role}`: `{permission}` is not a permission (one of LIFECYCLE, READ, WRITE, EXEC, LISTEN, BULK_READ, BULK_WRITE, ADMIN, CREATE, MONITOR, ALL, ALL_READ, ALL_WRITE, NONE)"
    )]
    UnknownPermission {
        /// The role.
        role: String,
        /// What was written.
        permission: String,
    },
    /// A group mapped to a role that is not defined.
    #[error("group `{group}` grants role `{role}`, which is neither predefined nor configured")]
    UnknownRole {
        /// The group.
        group: String,
        /// The role.
        role: String,
    },
}

/// The roles in force and how users get them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    roles: BTreeMap<String, Permissions>,
    /// Groups whose roles are configured; any other group grants the role of its name.
    group_roles: BTreeMap<String, Vec<String>>,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            roles: predefined_roles(),
            group_roles: BTreeMap::new(),
        }
    }
}

impl Policy {
    /// The predefined roles, plus (or redefined by) `roles` (a role's name and its
    /// permissions' names), with the groups of `group_roles` granting the roles listed
    /// (instead of the role of their name).
    ///
    /// # Errors
    /// A permission's name that is not one, or a group mapped to a role that does not exist.
    pub fn new<P: AsRef<str>>(
        roles: impl IntoIterator<Item = (String, Vec<P>)>,
        group_roles: impl IntoIterator<Item = (String, Vec<String>)>,
    ) -> Result<Self, PolicyError> {
        let mut policy = Self::default();
        for (role, names) in roles {
            let mut permissions = Permissions::NONE;
            for name in names {
                let name = name.as_ref();
                permissions = permissions.union(Permissions::parse(name).ok_or_else(|| {
                    PolicyError::UnknownPermission {
                        role: role.clone(),
                        permission: name.to_owned(),
                    }
                })?);
            }
            policy.roles.insert(role, permissions);
        }
        for (group, roles) in group_roles {
            if let Some(role) = roles.iter().find(|role| !policy.roles.contains_key(*role)) {
                return Err(PolicyError::UnknownRole {
                    group,
                    role: role.clone(),
                });
            }
            policy.group_roles.insert(group, roles);
        }
        Ok(policy)
    }

    /// The roles, with what each grants.
    #[must_use]
    pub fn roles(&self) -> &BTreeMap<String, Permissions> {
        &self.roles
    }

    /// What a role grants; nothing for a role that is not defined.
    #[must_use]
    pub fn permissions(&self, role: &str) -> Permissions {
        self.roles.get(role).copied().unwrap_or_default()
    }

    /// The roles a user named `name` in `groups` has: each group's mapped roles (the role
    /// of the group's name by default), and the role of the user's own name.
    #[must_use]
    pub fn roles_of<'a>(
        &self,
        name: &str,
        groups: impl IntoIterator<Item = &'a String>,
    ) -> BTreeSet<String> {
        let mut roles = self.roles_of_groups(groups);
        if self.roles.contains_key(name) {
            roles.insert(name.to_owned());
        }
        roles
    }

    /// The roles `groups` grant: each group's mapped roles (the role of the group's name by
    /// default).
    fn roles_of_groups<'a>(
        &self,
        groups: impl IntoIterator<Item = &'a String>,
    ) -> BTreeSet<String> {
        let mut roles = BTreeSet::new();
        for group in groups {
            match self.group_roles.get(group) {
                Some(mapped) => roles.extend(mapped.iter().cloned()),
                None if self.roles.contains_key(group) => {
                    roles.insert(group.clone());
                }
                None => {}
            }
        }
        roles
    }

    /// `subject` with its roles and permissions as this policy grants them to its groups and
    /// name.
    #[must_use]
    pub fn resolve(&self, mut subject: Subject) -> Subject {
        let roles = self.roles_of(&subject.name, &subject.groups);
        subject.grant(self, roles);
        subject
    }

    /// `subject` with the roles its groups grant, not its name: for names the operator does
    /// not choose (a bearer token's user, which an identity provider may let anyone register).
    #[must_use]
    pub fn resolve_groups(&self, mut subject: Subject) -> Subject {
        let roles = self.roles_of_groups(&subject.groups);
        subject.grant(self, roles);
        subject
    }

    /// A subject named `name` that holds `roles` (those this policy defines): a user
    /// authenticated elsewhere, whose roles came with it.
    #[must_use]
    pub fn with_roles(&self, name: &str, roles: impl IntoIterator<Item = String>) -> Subject {
        let mut subject = Subject::new(name, []);
        subject.grant(self, roles.into_iter().collect());
        subject
    }
}

/// Whether a cache's configuration lets a role touch it: `None` admits every role, a list
/// only the roles it names.
pub type CacheRoles<'a> = Option<&'a [String]>;

impl Subject {
    /// Sets the roles (those `policy` defines) and what they grant.
    pub(crate) fn grant(&mut self, policy: &Policy, roles: BTreeSet<String>) {
        self.granted = roles
            .iter()
            .filter_map(|role| {
                policy
                    .roles
                    .get(role)
                    .map(|&permissions| (role.clone(), permissions))
            })
            .collect();
        self.permissions = self
            .granted
            .iter()
            .fold(Permissions::NONE, |all, (_, granted)| all.union(*granted));
        self.roles = roles;
    }

    /// Whether the subject holds `permission` on a cache that admits `cache_roles`
    /// (`None`: every role; a list: only those, whatever the others grant).
    #[must_use]
    pub fn allows(&self, permission: Permissions, cache_roles: CacheRoles<'_>) -> bool {
        if !self.permissions.contains(permission) {
            return false;
        }
        match cache_roles {
            None => true,
            Some(admitted) => self.granted.iter().any(|(role, granted)| {
                granted.contains(permission) && admitted.iter().any(|name| name == role)
            }),
        }
    }

    /// Everything the subject's roles grant, wherever.
    #[must_use]
    pub fn permissions(&self) -> Permissions {
        self.permissions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn predefined_roles_grant_what_infinispan_documents() {
        let policy = Policy::default();
        assert_eq!(policy.permissions("admin"), Permissions::ALL);
        let deployer = policy.permissions("deployer");
        assert!(deployer.contains(Permissions::CREATE));
        assert!(!deployer.contains(Permissions::ADMIN));
        assert!(!deployer.contains(Permissions::LIFECYCLE));
        let application = policy.permissions("application");
        for permission in [
            Permissions::READ,
            Permissions::WRITE,
            Permissions::BULK_READ,
            Permissions::BULK_WRITE,
            Permissions::LISTEN,
            Permissions::EXEC,
            Permissions::MONITOR,
        ] {
            assert!(application.contains(permission), "{permission}");
        }
        assert!(!application.contains(Permissions::CREATE));
        let observer = policy.permissions("observer");
        assert!(observer.contains(Permissions::BULK_READ));
        assert!(!observer.contains(Permissions::WRITE));
        assert_eq!(policy.permissions("monitor"), Permissions::MONITOR);
        assert_eq!(policy.permissions("nobody"), Permissions::NONE);
    }

    #[test]
    fn names_parse_and_print() {
        for (name, permission) in Permissions::NAMED {
            assert_eq!(Permissions::parse(name), Some(permission));
            assert_eq!(Permissions::parse(&name.to_lowercase()), Some(permission));
            assert_eq!(permission.names(), vec![name]);
        }
        assert_eq!(Permissions::parse("all-read"), Some(Permissions::ALL_READ));
        assert_eq!(Permissions::parse("ALL"), Some(Permissions::ALL));
        assert_eq!(Permissions::parse("WRITES"), None);
        assert_eq!(Permissions::ALL.to_string(), "ALL");
        assert_eq!(Permissions::ALL_READ.to_string(), "READ, BULK_READ");
        assert_eq!(Permissions::NONE.to_string(), "NONE");
    }

    #[test]
    fn groups_grant_roles_of_their_names_unless_mapped() {
        let policy = Policy::new(
            [("reader".to_owned(), vec!["READ", "MONITOR"])],
            [("ops".to_owned(), vec!["admin".to_owned()])],
        )
        .expect("valid");
        let subject = policy.resolve(Subject::new(
            "alice",
            ["ops".to_owned(), "reader".to_owned(), "nothing".to_owned()],
        ));
        assert_eq!(
            subject
                .roles()
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
            vec!["admin", "reader"]
        );
        assert_eq!(subject.permissions(), Permissions::ALL);
        // Cluster role mapper: the user named like a role has it.
        let observer = policy.resolve(Subject::new("observer", []));
        assert!(observer.allows(Permissions::READ, None));
        assert!(!observer.allows(Permissions::WRITE, None));
    }

    #[test]
    fn a_name_grants_no_role_where_only_groups_count() {
        let policy = Policy::default();
        let named = policy.resolve_groups(Subject::new("admin", ["observer".to_owned()]));
        assert!(named.allows(Permissions::READ, None));
        assert!(!named.allows(Permissions::WRITE, None));
        assert!(
            policy
                .resolve(Subject::new("admin", []))
                .allows(Permissions::ALL, None)
        );
    }

    #[test]
    fn a_cache_admits_only_its_roles() {
        let policy = Policy::default();
        let subject = policy.resolve(Subject::new(
            "bob",
            ["observer".to_owned(), "monitor".to_owned()],
        ));
        let only_monitor = ["monitor".to_owned()];
        assert!(subject.allows(Permissions::READ, None));
        assert!(!subject.allows(Permissions::READ, Some(&only_monitor)));
        assert!(subject.allows(Permissions::MONITOR, Some(&only_monitor)));
        assert!(!subject.allows(Permissions::READ, Some(&[])));
        let forwarded = policy.with_roles("bob", ["observer".to_owned()]);
        assert!(forwarded.allows(Permissions::BULK_READ, None));
        assert!(!forwarded.allows(Permissions::WRITE, None));
    }

    #[test]
    fn bad_policies_are_refused_with_their_names() {
        let error = Policy::new([("r".to_owned(), vec!["READS"])], []).expect_err("bad");
        assert!(error.to_string().contains("`READS` is not a permission"));
        let error = Policy::new(
            Vec::<(String, Vec<String>)>::new(),
            [("ops".to_owned(), vec!["root".to_owned()])],
        )
        .expect_err("bad");
        assert_eq!(
            error,
            PolicyError::UnknownRole {
                group: "ops".into(),
                role: "root".into()
            }
        );
    }
}
