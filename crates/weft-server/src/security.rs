//! Authentication, once for every protocol: whether clients must authenticate, and checking
//! what they present. Each protocol carries credentials its own way (RESP `AUTH`/`HELLO`,
//! HTTP `Authorization`, Hot Rod and memcached SASL) and asks here.
//!
//! Two sources, in order of precedence:
//! - `[security] users-file`: the users of a users file (`weft_security::users::Realm`),
//!   re-read when it changes.
//! - `[server] password`: the one shared password of before users existed, for the user
//!   `default` (as Redis' `requirepass`).
//!
//! With neither, clients are anonymous and everything is allowed (the server listens on
//! loopback by default).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use weft_security::Subject;
use weft_security::sasl::{self, Exchange, SaslError, Step};
use weft_security::users::{Realm, UsersError};

/// The user the shared `password` authenticates, and an anonymous client is (Redis' name).
pub const DEFAULT_USER: &str = "default";
/// How often the users file is checked for a change.
const USERS_CHECK_PERIOD: Duration = Duration::from_secs(2);

/// How clients authenticate.
#[derive(Debug)]
pub struct Security {
    realm: Option<Arc<Realm>>,
    password: Option<String>,
}

impl Security {
    /// From the configuration: a users file (opened now), else the shared password, else
    /// none.
    ///
    /// # Errors
    /// If the users file cannot be read or parsed.
    pub fn new(users_file: Option<&Path>, password: Option<String>) -> Result<Self, UsersError> {
        let realm = match users_file {
            Some(path) => {
                let realm = Realm::open(path)?;
                if realm.users().is_empty() {
                    tracing::warn!(users_file = %path.display(), "the users file has no users yet: no client can authenticate until one is created (`weft user create NAME --users-file ...`)");
                }
                Some(Arc::new(realm))
            }
            None => None,
        };
        Ok(Self { realm, password })
    }

    /// Whether clients must authenticate.
    #[must_use]
    pub fn required(&self) -> bool {
        self.realm.is_some() || self.password.is_some()
    }

    /// Whether clients authenticate as users of a users file (not with the shared password).
    #[must_use]
    pub fn has_users(&self) -> bool {
        self.realm.is_some()
    }

    /// The users clients may authenticate as, with their groups: a users file's, or
    /// `default` alone.
    #[must_use]
    pub fn user_names(&self) -> Vec<(String, Vec<String>)> {
        match &self.realm {
            Some(realm) => realm
                .users()
                .iter()
                .map(|user| (user.name.clone(), user.groups.iter().cloned().collect()))
                .collect(),
            None => vec![(DEFAULT_USER.to_owned(), vec!["admin".to_owned()])],
        }
    }

    /// Who a client of a protocol that authenticates only users-file users (Hot Rod,
    /// memcached, REST; the shared `password` is RESP's alone) is before it authenticates:
    /// `default` with every role without a users file, nobody with one.
    #[must_use]
    pub fn anonymous_without_users(&self) -> Option<Subject> {
        (!self.has_users()).then(|| Subject::new(DEFAULT_USER, ["admin".to_owned()]))
    }

    /// Who a client is before it authenticates: `default` with every role when no
    /// authentication is required, nobody otherwise.
    #[must_use]
    pub fn anonymous(&self) -> Option<Subject> {
        (!self.required()).then(|| Subject::new(DEFAULT_USER, ["admin".to_owned()]))
    }

    /// Checks a user name and a password sent whole. Slow on purpose for users-file users (a
    /// memory of recent successes spares repeats); it runs off the async workers' queue when
    /// it can.
    #[must_use]
    pub fn authenticate_password(&self, user: &[u8], password: &[u8]) -> Option<Subject> {
        let user = std::str::from_utf8(user).ok()?;
        if let Some(realm) = &self.realm {
            return off_the_workers(|| realm.authenticate_password(user, password));
        }
        let expected = self.password.as_ref()?;
        (user == DEFAULT_USER && constant_time_eq(expected.as_bytes(), password))
            .then(|| Subject::new(DEFAULT_USER, ["admin".to_owned()]))
    }

    /// The SASL mechanisms offered: none without a users file (SASL needs users); the SCRAMs,
    /// and PLAIN where `plain_allowed` (the connection is TLS).
    #[must_use]
    pub fn sasl_mechanisms(&self, plain_allowed: bool) -> Vec<&'static str> {
        if self.realm.is_some() {
            sasl::mechanisms(plain_allowed)
        } else {
            Vec::new()
        }
    }

    /// Starts a SASL exchange with `mechanism`, which must be one of [`Security::sasl_mechanisms`].
    ///
    /// # Errors
    /// If it is not offered.
    pub fn start_sasl(
        &self,
        mechanism: &str,
        plain_allowed: bool,
    ) -> Result<SaslExchange, SaslError> {
        let Some(realm) = &self.realm else {
            return Err(SaslError::Unsupported(mechanism.to_owned()));
        };
        if !self.sasl_mechanisms(plain_allowed).contains(&mechanism) {
            return Err(SaslError::Unsupported(mechanism.to_owned()));
        }
        Ok(SaslExchange {
            realm: Arc::clone(realm),
            exchange: Exchange::start(mechanism)?,
        })
    }

    /// Re-reads the users file whenever it changes, until `shutdown`.
    pub(crate) async fn watch(self: Arc<Self>, mut shutdown: tokio::sync::watch::Receiver<bool>) {
        let Some(realm) = self.realm.clone() else {
            return;
        };
        let mut ticks = tokio::time::interval(USERS_CHECK_PERIOD);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                () = crate::stopped(&mut shutdown) => return,
            }
            let checked = Arc::clone(&realm);
            let reloaded = tokio::task::spawn_blocking(move || checked.reload_if_changed()).await;
            match reloaded {
                Ok(Ok(true)) => tracing::info!(users = realm.users().len(), "users file re-read"),
                Ok(Ok(false)) | Err(_) => {}
                Ok(Err(error)) => {
                    tracing::error!(%error, "users file not re-read; the users before stay in force");
                }
            }
        }
    }
}

/// A SASL exchange in progress on a connection.
#[derive(Debug)]
pub struct SaslExchange {
    realm: Arc<Realm>,
    exchange: Exchange,
}

impl SaslExchange {
    /// Takes the client's next message.
    ///
    /// # Errors
    /// When the exchange fails; the client must start another.
    pub fn step(&mut self, message: &[u8]) -> Result<Step, SaslError> {
        let (realm, exchange) = (&self.realm, &mut self.exchange);
        off_the_workers(|| exchange.step(realm, message))
    }
}

/// Runs `work` (slow hashing) so that the other tasks of this async worker move elsewhere
/// meanwhile, on a multi-threaded runtime; directly otherwise.
fn off_the_workers<T>(work: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
