//! Authentication, once for every protocol: whether clients must authenticate, and checking
//! what they present. Each protocol carries credentials its own way (RESP `AUTH`/`HELLO`,
//! HTTP `Authorization`, Hot Rod and memcached SASL) and asks here.
//!
//! Two sources, in order of precedence:
//! - `[security] users-file`: the users of a users file (`weft_security::users::Realm`),
//!   re-read when it changes.
//! - `[server] password`: the one shared password of the user `default` (as Redis'
//!   `requirepass`), on every protocol: SASL runs against a one-user realm derived from it.
//!   Never together with a users file; RESP's `CONFIG SET requirepass` changes it.
//!
//! With neither, clients are anonymous and everything is allowed (the server listens on
//! loopback by default).
//!
//! Users of a users file are authorized by role (`crate::authorization`): an authenticated
//! subject carries the roles its groups grant under the configured
//! [`Policy`].

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};

use weft_security::Subject;
use weft_security::authorization::{Policy, PolicyError};
use weft_security::sasl::{self, Exchange, SaslError, Step};
use weft_security::tokens::{TokenError, TokenSettings, Tokens};
use weft_security::users::{Realm, UsersError};

/// The user the shared `password` authenticates, and an anonymous client is (Redis' name).
pub const DEFAULT_USER: &str = "default";
/// How often the users file is checked for a change.
const USERS_CHECK_PERIOD: Duration = Duration::from_secs(2);

/// Attempts one user may make from one address in a burst before it is slowed down.
const ATTEMPTS_BURST: f64 = 10.0;
/// How fast a user's failed attempts from an address are forgiven: one every this many
/// seconds (and all of them by a success).
const ATTEMPT_FORGIVEN_SECS: f64 = 3.0;
/// Longest an attempt waits for its turn; one that would wait longer is refused, unchecked,
/// with a refusal that says it was throttled.
const ATTEMPT_WAIT_MAX: Duration = Duration::from_secs(10);
/// (address, user) pairs remembered; past it, a new pair shares its address' one allowance
/// (its overflow bucket), so that memory stays bounded and a flood of names buys no guesses.
const THROTTLED_PAIRS_MAX: usize = 100_000;
/// The `tracing` target of authentication outcomes (`WEFT_LOG=info,weft::audit=debug` shows
/// them all; failures and refusals are logged at info, successes at debug).
pub const AUDIT: &str = "weft::audit";

/// How clients authenticate.
#[derive(Debug)]
pub struct Security {
    realm: Option<Arc<Realm>>,
    /// Bearer tokens' keys, when `[security.jwt]` is configured.
    tokens: Option<Arc<Tokens>>,
    /// The shared password of the user `default` (`[server] password`, or RESP's `CONFIG
    /// SET requirepass`), on every protocol; never with a users file.
    password: RwLock<Option<SharedPassword>>,
    throttle: Throttle,
    /// The roles users get; requests are authorized only when `authorizing`.
    policy: Policy,
    authorizing: bool,
    metrics_anonymous: bool,
}

/// The shared password and the one-user realm that runs SASL for it (SCRAM credentials and
/// a hash derived from it at start, or when it is changed).
struct SharedPassword {
    text: String,
    realm: Arc<Realm>,
}

impl std::fmt::Debug for SharedPassword {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedPassword(..)")
    }
}

impl SharedPassword {
    fn new(text: &str) -> Result<Self, UsersError> {
        let mut users = weft_security::users::Users::default();
        users.insert(weft_security::users::User::new(
            DEFAULT_USER,
            text,
            ["admin".to_owned()],
        )?);
        Ok(Self {
            text: text.to_owned(),
            realm: Arc::new(Realm::of(users)),
        })
    }
}

/// Why the security configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum SecurityError {
    /// The users file.
    #[error("read the users file ([security] users-file): {0}")]
    Users(#[from] UsersError),
    /// The roles or the group mapping.
    #[error("[security] roles / group-roles: {0}")]
    Policy(#[from] PolicyError),
    /// The bearer tokens' keys.
    #[error("[security.jwt]: {0}")]
    Tokens(#[from] TokenError),
    /// Both a shared password and a users file: the password would guard nothing.
    #[error(
        "[server] password and [security] users-file are both set: with a users file, clients authenticate as its users and the shared password would be ignored. \
         Remove `password`, or give the user `default` a password in the users file (`weft user create default --groups admin --users-file ...`)"
    )]
    PasswordWithUsers,
}

/// What became of credentials a client presented.
#[derive(Debug, Clone)]
pub enum Login {
    /// Right: the client is this subject.
    Accepted(Subject),
    /// Wrong, or an unknown user (not told apart).
    Refused,
    /// Not checked yet: this user failed too often from this address lately. Present the
    /// same credentials again at this instant (the connection waits; nothing was checked).
    Wait(Instant),
    /// Not checked: the wait would have been longer than the longest allowed (10 s). The client
    /// may try again after this long; the refusal must say it was throttled, not wrong.
    Throttled(Duration),
}

impl Login {
    /// The subject, when accepted.
    #[must_use]
    pub fn accepted(self) -> Option<Subject> {
        match self {
            Self::Accepted(subject) => Some(subject),
            _ => None,
        }
    }

    /// The text of a throttled refusal, for protocols that carry one.
    #[must_use]
    pub fn throttled_message(user: &str, retry_after: Duration) -> String {
        format!(
            "too many failed authentications as '{user}' from this address: not checked; try again in {} s",
            retry_after.as_secs().max(1)
        )
    }
}

/// Where a connection is in presenting one set of credentials: the first attempt's instant,
/// while it waits for its turn (see [`Login::Wait`]). Each protocol keeps one per
/// connection (REST per request).
#[derive(Debug, Default, Clone, Copy)]
pub struct Attempt {
    since: Option<Instant>,
}

impl Attempt {
    /// One first presented at `since`.
    #[must_use]
    pub fn starting(since: Instant) -> Self {
        Self { since: Some(since) }
    }

    fn since(&mut self, now: Instant) -> Instant {
        *self.since.get_or_insert(now)
    }

    fn settle(&mut self, login: &Login) {
        if !matches!(login, Login::Wait(_)) {
            self.since = None;
        }
    }
}

/// Slows password guessing down without locking anyone out. Attempts are counted per
/// (client address, user name): a user's own mistakes, or someone guessing one user's
/// password, never slow another user down, wherever they connect from. Each pair may make
/// [`ATTEMPTS_BURST`] attempts at once; then one every [`ATTEMPT_FORGIVEN_SECS`], and an
/// attempt beyond that *waits* for its turn rather than being refused — so a right password
/// always gets in, at worst a few seconds late. Only one that would wait longer than
/// [`ATTEMPT_WAIT_MAX`] (someone else is guessing the same user from the same address, as
/// fast as they can) is refused unchecked, and told why. An attempt counts as a failure
/// until it succeeds (so parallel attempts cannot overrun the burst); a success forgets the
/// pair's failures (it proves the password known, so guessing it further is moot).
#[derive(Debug, Default)]
pub(crate) struct Throttle {
    pairs: Mutex<HashMap<PairKey, Bucket>>,
}

/// A client address and the user name it presents (`None`: the address' shared allowance,
/// for names past [`THROTTLED_PAIRS_MAX`]).
type PairKey = (IpAddr, Option<Box<str>>);

/// One pair's attempts not yet forgiven, as of `at`.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    attempts: f64,
    at: Instant,
    /// Whether reaching the burst was logged (once per episode).
    warned: bool,
}

impl Bucket {
    fn now(self, now: Instant) -> f64 {
        (self.attempts
            - now.saturating_duration_since(self.at).as_secs_f64() / ATTEMPT_FORGIVEN_SECS)
            .max(0.0)
    }
}

/// What the throttle says of an attempt.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Turn {
    /// Check it now.
    Now,
    /// Ask again at this instant.
    At(Instant),
    /// Refused unchecked: its turn is too far off; it may come back after this long.
    Refused(Duration),
}

impl Throttle {
    /// The key of `user` from `address`: its own pair, or — when the table is full — the
    /// address' shared one.
    fn key(
        pairs: &mut HashMap<PairKey, Bucket>,
        address: IpAddr,
        user: &str,
        now: Instant,
    ) -> PairKey {
        let own = (address, Some(Box::<str>::from(user)));
        if pairs.len() < THROTTLED_PAIRS_MAX || pairs.contains_key(&own) {
            return own;
        }
        pairs.retain(|_, bucket| bucket.now(now) > 0.0);
        if pairs.len() < THROTTLED_PAIRS_MAX {
            own
        } else {
            (address, None)
        }
    }

    /// Whether `user` may present credentials from `address` now (`since`: when this set of
    /// credentials was first presented). Counts the attempt when it may.
    pub(crate) fn turn(&self, address: IpAddr, user: &str, since: Instant, now: Instant) -> Turn {
        let mut pairs = self.pairs.lock();
        let key = Self::key(&mut pairs, address, user, now);
        let bucket = pairs.entry(key).or_insert(Bucket {
            attempts: 0.0,
            at: now,
            warned: false,
        });
        let attempts = bucket.now(now);
        if attempts + 1.0 <= ATTEMPTS_BURST {
            *bucket = Bucket {
                attempts: attempts + 1.0,
                at: now,
                warned: bucket.warned && attempts + 1.0 > ATTEMPTS_BURST / 2.0,
            };
            return Turn::Now;
        }
        if !bucket.warned {
            bucket.warned = true;
            tracing::warn!(target: AUDIT, %address, user, "repeated failed authentications: this user is slowed down from this address");
        }
        let due = now
            + Duration::from_secs_f64((attempts + 1.0 - ATTEMPTS_BURST) * ATTEMPT_FORGIVEN_SECS);
        // A little past the instant the allowance comes back, so that the attempt finds it.
        let due = due + Duration::from_millis(5);
        if due.saturating_duration_since(since) > ATTEMPT_WAIT_MAX {
            return Turn::Refused(due.saturating_duration_since(now));
        }
        Turn::At(due)
    }

    /// A success: the pair's failures are forgotten.
    pub(crate) fn succeeded(&self, address: IpAddr, user: &str) {
        let mut pairs = self.pairs.lock();
        pairs.remove(&(address, Some(Box::<str>::from(user))));
    }
}

impl Security {
    /// From the configuration: a users file (opened now), else the shared password, else
    /// none; and the roles users get.
    ///
    /// # Errors
    /// If the users file cannot be read or parsed, or a role is not well defined.
    pub fn new(
        section: &crate::config::SecuritySection,
        password: Option<String>,
    ) -> Result<Self, SecurityError> {
        let policy = Policy::new(
            section
                .roles
                .iter()
                .map(|(role, permissions)| (role.clone(), permissions.clone())),
            section
                .group_roles
                .iter()
                .map(|(group, roles)| (group.clone(), roles.clone())),
        )?;
        // An empty password is none, as Redis' `requirepass ""`.
        let password = password.filter(|password| !password.is_empty());
        if section.users_file.is_some() && password.is_some() {
            return Err(SecurityError::PasswordWithUsers);
        }
        let password = password.as_deref().map(SharedPassword::new).transpose()?;
        let realm = match section.users_file.as_deref() {
            Some(path) => {
                let realm = Realm::open(path)?;
                if realm.users().is_empty() {
                    tracing::warn!(users_file = %path.display(), "the users file has no users yet: no client can authenticate until one is created (`weft user create NAME --users-file ...`)");
                }
                Some(Arc::new(realm))
            }
            None => None,
        };
        if let Some(jwt) = &section.jwt
            && (jwt.audience.is_none() || jwt.issuer.is_none())
        {
            tracing::warn!(
                "[security.jwt] names no issuer or no audience: tokens the provider issued for other applications are accepted too; set both"
            );
        }
        let tokens = match &section.jwt {
            Some(jwt) => Some(Arc::new(Tokens::open(TokenSettings {
                jwks_file: jwt.jwks_file.clone(),
                issuer: jwt.issuer.clone(),
                audience: jwt.audience.clone(),
                user_claim: jwt.user_claim.clone(),
                groups_claim: jwt.groups_claim.clone(),
            })?)),
            None => None,
        };
        Ok(Self {
            authorizing: (realm.is_some() || tokens.is_some()) && section.authorization,
            realm,
            tokens,
            password: RwLock::new(password),
            throttle: Throttle::default(),
            policy,
            metrics_anonymous: section.metrics_anonymous,
        })
    }

    /// Whether requests are authorized by role (a users file, and `[security]
    /// authorization` not turned off).
    #[must_use]
    pub fn authorizes(&self) -> bool {
        self.authorizing
    }

    /// Whether `/metrics` answers without credentials.
    #[must_use]
    pub fn metrics_anonymous(&self) -> bool {
        self.metrics_anonymous
    }

    /// A user authenticated by another member, with the roles it had there.
    #[must_use]
    pub fn subject_with_roles(
        &self,
        name: &str,
        roles: impl IntoIterator<Item = String>,
    ) -> Subject {
        self.policy.with_roles(name, roles)
    }

    /// `default`, the user every client is when no authentication is required (and the
    /// shared password's): an administrator.
    fn default_user(&self) -> Subject {
        self.policy.with_roles(DEFAULT_USER, ["admin".to_owned()])
    }

    /// Whether clients must authenticate (now: RESP's `CONFIG SET requirepass` may change
    /// it; a connection is anonymous or not from when it opens).
    #[must_use]
    pub fn required(&self) -> bool {
        self.has_users() || self.password.read().is_some()
    }

    /// Whether a users file is configured (RESP's `requirepass` is then not a setting of
    /// its own: `default` is whoever the users file says).
    #[must_use]
    pub fn has_users_file(&self) -> bool {
        self.realm.is_some()
    }

    /// Sets or removes (`""`) the shared password of the user `default`, on every protocol
    /// (RESP's `CONFIG SET requirepass`). Connections already open keep who they are.
    ///
    /// # Errors
    /// With a users file (`default` is one of its users, managed there), or if the
    /// password's credentials cannot be derived.
    pub fn set_password(&self, password: &str) -> Result<(), SecurityError> {
        if self.realm.is_some() {
            return Err(SecurityError::PasswordWithUsers);
        }
        let shared = if password.is_empty() {
            None
        } else {
            Some(SharedPassword::new(password)?)
        };
        *self.password.write() = shared;
        tracing::info!(
            set = !password.is_empty(),
            "the shared password of `default` changed (CONFIG SET requirepass)"
        );
        Ok(())
    }

    /// Whether clients authenticate as users — of a users file, or named by bearer tokens —
    /// not with the shared password.
    #[must_use]
    pub fn has_users(&self) -> bool {
        self.realm.is_some() || self.tokens.is_some()
    }

    /// Whether bearer tokens are accepted.
    #[must_use]
    pub fn has_tokens(&self) -> bool {
        self.tokens.is_some()
    }

    /// Checks a bearer token (a JWT): the subject it names, with the roles its groups grant.
    /// `peer` is the client's address: one that failed again and again is slowed down.
    #[must_use]
    pub fn authenticate_token(
        &self,
        peer: IpAddr,
        protocol: &'static str,
        token: &str,
        attempt: &mut Attempt,
    ) -> Login {
        let Some(tokens) = self.tokens.as_ref() else {
            return Login::Refused;
        };
        self.attempt(peer, protocol, sasl::BEARER_USER, attempt, || {
            match tokens.verify(token) {
                // Its groups grant roles, not its name: a provider may let anyone pick one.
                Ok(subject) => Some(self.policy.resolve_groups(subject)),
                Err(error) => {
                    tracing::debug!(target: AUDIT, %peer, protocol, %error, "bearer token refused");
                    None
                }
            }
        })
    }

    /// Runs `check` of credentials `user` presents from `peer` when the throttle gives it a
    /// turn, and notes the outcome (the audit log, the throttle).
    fn attempt(
        &self,
        peer: IpAddr,
        protocol: &'static str,
        user: &str,
        attempt: &mut Attempt,
        check: impl FnOnce() -> Option<Subject>,
    ) -> Login {
        let now = Instant::now();
        let login = match self.throttle.turn(peer, user, attempt.since(now), now) {
            Turn::Now => {
                let subject = check();
                self.record(peer, protocol, user, subject.as_ref());
                subject.map_or(Login::Refused, Login::Accepted)
            }
            Turn::At(due) => {
                tracing::debug!(target: AUDIT, %peer, protocol, user, "authentication waits its turn: repeated failures of this user from this address");
                Login::Wait(due)
            }
            Turn::Refused(retry_after) => {
                tracing::info!(target: AUDIT, %peer, protocol, user, "authentication refused unchecked: too many failures of this user from this address");
                Login::Throttled(retry_after)
            }
        };
        attempt.settle(&login);
        login
    }

    /// The users clients may authenticate as, with their groups: a users file's, or
    /// `default` alone.
    #[must_use]
    pub fn user_names(&self) -> Vec<(String, Vec<String>)> {
        match &self.realm {
            None if self.tokens.is_some() => Vec::new(),
            Some(realm) => realm
                .users()
                .iter()
                .map(|user| (user.name.clone(), user.groups.iter().cloned().collect()))
                .collect(),
            None => vec![(DEFAULT_USER.to_owned(), vec!["admin".to_owned()])],
        }
    }

    /// A Redis ACL user (RESP's `crate::resp::acl`): its ACL rules restrict it, so its
    /// roles do not — it has the administrator's, as `default` has.
    #[must_use]
    pub fn acl_subject(&self, name: &[u8]) -> Subject {
        self.policy
            .with_roles(&String::from_utf8_lossy(name), ["admin".to_owned()])
    }

    /// Authenticates by `check` (a credential this module does not keep, as a Redis ACL
    /// user's password), with the same throttle and audit log as a password: `user` is who
    /// the client claims to be.
    pub fn authenticate_with(
        &self,
        peer: IpAddr,
        protocol: &'static str,
        user: &[u8],
        attempt: &mut Attempt,
        check: impl FnOnce() -> Option<Subject>,
    ) -> Login {
        let name = String::from_utf8_lossy(user);
        self.attempt(peer, protocol, &name, attempt, check)
    }

    /// Who a client is before it authenticates: `default` with every role when no
    /// authentication is required, nobody otherwise.
    #[must_use]
    pub fn anonymous(&self) -> Option<Subject> {
        (!self.required()).then(|| self.default_user())
    }

    /// Checks a user name and a password sent whole. Slow on purpose for users-file users (a
    /// memory of recent successes spares repeats); it runs off the async workers' queue when
    /// it can.
    /// `peer` is the client's address: one that failed again and again is slowed down.
    #[must_use]
    pub fn authenticate_password(
        &self,
        peer: IpAddr,
        protocol: &'static str,
        user: &[u8],
        password: &[u8],
        attempt: &mut Attempt,
    ) -> Login {
        let name = String::from_utf8_lossy(user);
        self.attempt(peer, protocol, &name, attempt, || {
            self.check_password(&name, password)
        })
    }

    fn check_password(&self, user: &str, password: &[u8]) -> Option<Subject> {
        if let Some(realm) = &self.realm {
            // Only the slow hash moves off the workers' queue: an HTTP client sends its
            // credentials with every request, and they are remembered once checked.
            return realm
                .remembered(user, password)
                .or_else(|| off_the_workers(|| realm.authenticate_password(user, password)))
                .map(|subject| self.policy.resolve(subject));
        }
        // The shared password, compared as it is kept (in the configuration, in the clear):
        // no slow hash to spare.
        let shared = self.password.read();
        let expected = &shared.as_ref()?.text;
        (user == DEFAULT_USER
            && weft_security::credentials::equal_in_constant_time(expected.as_bytes(), password))
        .then(|| self.default_user())
    }

    /// Notes an authentication's outcome: the audit log, and the throttle.
    fn record(&self, peer: IpAddr, protocol: &'static str, user: &str, subject: Option<&Subject>) {
        match subject {
            Some(subject) => {
                self.throttle.succeeded(peer, user);
                tracing::debug!(target: AUDIT, %peer, protocol, user = %subject.name, "authenticated");
            }
            None => {
                tracing::info!(target: AUDIT, %peer, protocol, user, "authentication failed");
            }
        }
    }

    /// The SASL mechanisms offered on a connection: none without users; with a users file the
    /// SCRAMs, and PLAIN on TLS (or in the clear where `offer.plain_in_clear`); with bearer
    /// tokens, OAUTHBEARER on TLS; EXTERNAL where a client certificate names the client.
    #[must_use]
    pub fn sasl_mechanisms(&self, offer: &SaslOffer) -> Vec<&'static str> {
        let mut mechanisms = if self.realm.is_some() || self.password.read().is_some() {
            sasl::mechanisms(offer.tls || offer.plain_in_clear)
        } else {
            Vec::new()
        };
        // A bearer token is as good as a password to whoever reads it: TLS only.
        if self.tokens.is_some() && offer.tls {
            mechanisms.push(sasl::OAUTHBEARER);
        }
        if offer.certificate.is_some() && self.has_users() {
            mechanisms.push(sasl::EXTERNAL);
        }
        mechanisms
    }

    /// The user a verified TLS client certificate names (its subject's common name), when
    /// clients authenticate as users: what SASL EXTERNAL and an HTTP request without other
    /// credentials authenticate as.
    #[must_use]
    pub fn certificate_user(
        &self,
        certificates: Option<&[rustls::pki_types::CertificateDer<'static>]>,
    ) -> Option<String> {
        if !self.has_users() {
            return None;
        }
        weft_security::files::common_name(certificates?.first()?)
    }

    /// The subject a client certificate's user is: the groups of the users-file user of that
    /// name, if any, and the roles they grant — plus the role of its own name, when there is
    /// one (Infinispan's common-name role mapper).
    #[must_use]
    pub fn certificate_subject(&self, user: &str) -> Subject {
        let groups = self
            .realm
            .as_ref()
            .and_then(|realm| realm.users().get(user).map(|known| known.groups.clone()))
            .unwrap_or_default();
        self.policy.resolve(Subject::new(user, groups))
    }

    /// Authenticates an HTTP request by its connection's client certificate.
    #[must_use]
    pub fn authenticate_certificate(
        &self,
        peer: IpAddr,
        protocol: &'static str,
        user: &str,
    ) -> Subject {
        let subject = self.certificate_subject(user);
        self.record(peer, protocol, user, Some(&subject));
        subject
    }

    /// Starts a SASL exchange with `mechanism`, which must be one of
    /// [`Security::sasl_mechanisms`] for `offer`.
    ///
    /// # Errors
    /// If it is not offered.
    pub fn start_sasl(
        self: &Arc<Self>,
        peer: IpAddr,
        protocol: &'static str,
        mechanism: &str,
        offer: &SaslOffer,
    ) -> Result<SaslExchange, SaslError> {
        if !self.sasl_mechanisms(offer).contains(&mechanism) {
            return Err(SaslError::Unsupported(mechanism.to_owned()));
        }
        let exchange = match (&self.tokens, &offer.certificate, mechanism) {
            (Some(tokens), _, sasl::OAUTHBEARER) => Exchange::start_bearer(Arc::clone(tokens)),
            (_, Some(user), sasl::EXTERNAL) => {
                Exchange::start_external(self.certificate_subject(user))
            }
            _ => Exchange::start(mechanism)?,
        };
        Ok(SaslExchange {
            security: Arc::clone(self),
            // Bearer tokens and certificates need no users: an empty realm stands in.
            realm: self
                .realm
                .clone()
                .or_else(|| {
                    self.password
                        .read()
                        .as_ref()
                        .map(|shared| Arc::clone(&shared.realm))
                })
                .unwrap_or_else(|| Arc::new(Realm::of(weft_security::users::Users::default()))),
            exchange,
            slow: mechanism == sasl::PLAIN,
            bearer: mechanism == sasl::OAUTHBEARER,
            peer,
            protocol,
            attempt: Attempt::default(),
        })
    }

    /// Re-reads the users file and the JWKS file whenever they change, until `shutdown`.
    pub(crate) async fn watch(self: Arc<Self>, mut shutdown: tokio::sync::watch::Receiver<bool>) {
        if self.realm.is_none() && self.tokens.is_none() {
            return;
        }
        let mut ticks = tokio::time::interval(USERS_CHECK_PERIOD);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                () = crate::stopped(&mut shutdown) => return,
            }
            if let Some(realm) = self.realm.clone() {
                let checked = Arc::clone(&realm);
                let reloaded =
                    tokio::task::spawn_blocking(move || checked.reload_if_changed()).await;
                match reloaded {
                    Ok(Ok(true)) => {
                        tracing::info!(users = realm.users().len(), "users file re-read");
                    }
                    Ok(Ok(false)) | Err(_) => {}
                    Ok(Err(error)) => {
                        tracing::error!(%error, "users file not re-read; the users before stay in force");
                    }
                }
            }
            if let Some(tokens) = self.tokens.clone() {
                let reloaded =
                    tokio::task::spawn_blocking(move || tokens.reload_if_changed()).await;
                match reloaded {
                    Ok(Ok(true)) => tracing::info!("JWKS file re-read"),
                    Ok(Ok(false)) | Err(_) => {}
                    Ok(Err(error)) => {
                        tracing::error!(%error, "JWKS file not re-read; the keys before stay in force");
                    }
                }
            }
        }
    }
}

/// What a connection may authenticate with, beyond the users' passwords.
#[derive(Debug, Clone, Default)]
pub struct SaslOffer {
    /// The connection is TLS (PLAIN and OAUTHBEARER are offered).
    pub tls: bool,
    /// PLAIN is offered in the clear too (memcached, whose clients know no other mechanism).
    pub plain_in_clear: bool,
    /// The user the connection's client certificate names (EXTERNAL is offered).
    pub certificate: Option<String>,
}

/// A SASL exchange in progress on a connection.
#[derive(Debug)]
pub struct SaslExchange {
    security: Arc<Security>,
    realm: Arc<Realm>,
    exchange: Exchange,
    /// PLAIN: its one step hashes a password; SCRAM's steps are a few HMACs.
    slow: bool,
    /// OAUTHBEARER: the user is a token's.
    bearer: bool,
    peer: IpAddr,
    protocol: &'static str,
    /// The credential being presented, while it waits for its turn.
    attempt: Attempt,
}

/// What a SASL step answers.
#[derive(Debug)]
pub enum SaslStep {
    /// Send this challenge; the exchange goes on.
    Continue(Vec<u8>),
    /// Authenticated as `subject`; send `last` with the success.
    Done {
        /// Who the client is.
        subject: Subject,
        /// The mechanism's final message.
        last: Vec<u8>,
    },
    /// The exchange failed (wrong credentials, a malformed message): the client must start
    /// another.
    Failed(SaslError),
    /// Repeated failures of this user from this address: give the same message to
    /// [`SaslExchange::step`] again at this instant (nothing was checked).
    Wait(Instant),
    /// Refused unchecked, throttled: this text says so. The client must start another.
    Throttled(String),
}

impl SaslExchange {
    /// Takes the client's next message. A step that checks a credential does so when the
    /// throttle gives it a turn: [`SaslStep::Wait`] asks for the same message again later
    /// (the exchange has not moved).
    pub fn step(&mut self, message: &[u8]) -> SaslStep {
        let claimed = self.exchange.checks(message);
        if let Some(user) = &claimed {
            let now = Instant::now();
            let since = self.attempt.since(now);
            match self.security.throttle.turn(self.peer, user, since, now) {
                Turn::Now => {}
                Turn::At(due) => {
                    tracing::debug!(target: AUDIT, peer = %self.peer, protocol = self.protocol, user, "authentication waits its turn: repeated failures of this user from this address");
                    return SaslStep::Wait(due);
                }
                Turn::Refused(retry_after) => {
                    self.attempt.settle(&Login::Throttled(retry_after));
                    tracing::info!(target: AUDIT, peer = %self.peer, protocol = self.protocol, user, "authentication refused unchecked: too many failures of this user from this address");
                    return SaslStep::Throttled(Login::throttled_message(user, retry_after));
                }
            }
            self.attempt.settle(&Login::Refused);
        }
        let (realm, exchange) = (&self.realm, &mut self.exchange);
        let outcome = if self.slow {
            off_the_workers(|| exchange.step(realm, message))
        } else {
            exchange.step(realm, message)
        };
        let outcome = match outcome {
            Ok(Step::Done { subject, last }) => Ok(Step::Done {
                // A bearer token's user gets the roles of its groups only (see
                // `Security::authenticate_token`).
                subject: if self.bearer {
                    self.security.policy.resolve_groups(subject)
                } else {
                    self.security.policy.resolve(subject)
                },
                last,
            }),
            other => other,
        };
        let counted = claimed.as_deref().unwrap_or("(SASL)");
        match outcome {
            Ok(Step::Done { subject, last }) => {
                // The throttle forgets the name the attempt was counted under (a bearer
                // token's is not its user's).
                self.security
                    .record(self.peer, self.protocol, counted, Some(&subject));
                SaslStep::Done { subject, last }
            }
            Ok(Step::Continue(challenge)) => SaslStep::Continue(challenge),
            Err(error) => {
                self.security
                    .record(self.peer, self.protocol, counted, None);
                SaslStep::Failed(error)
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    const HERE: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
    const THERE: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2));

    fn burst(throttle: &Throttle, address: IpAddr, user: &str, now: Instant) {
        for _ in 0..10 {
            assert_eq!(throttle.turn(address, user, now, now), Turn::Now);
        }
    }

    /// Ten attempts at once, then one every 3 s: the eleventh is told to come back then, and
    /// gets its turn when it does.
    #[test]
    fn a_burst_then_one_attempt_every_three_seconds() {
        let throttle = Throttle::default();
        let start = Instant::now();
        burst(&throttle, HERE, "bob", start);
        let Turn::At(due) = throttle.turn(HERE, "bob", start, start) else {
            panic!("not deferred");
        };
        let wait = due - start;
        assert!(
            wait >= Duration::from_secs(3) && wait < Duration::from_millis(3100),
            "{wait:?}"
        );
        assert!(matches!(
            throttle.turn(HERE, "bob", start, due - Duration::from_millis(10)),
            Turn::At(_)
        ));
        assert_eq!(throttle.turn(HERE, "bob", start, due), Turn::Now);
        assert!(matches!(throttle.turn(HERE, "bob", due, due), Turn::At(_)));
    }

    /// Another user from the same address, and the same user from another, are not held up
    /// by one user's failures.
    #[test]
    fn attempts_count_per_address_and_user() {
        let throttle = Throttle::default();
        let now = Instant::now();
        burst(&throttle, HERE, "bob", now);
        assert!(matches!(throttle.turn(HERE, "bob", now, now), Turn::At(_)));
        assert_eq!(throttle.turn(HERE, "alice", now, now), Turn::Now);
        assert_eq!(throttle.turn(THERE, "bob", now, now), Turn::Now);
    }

    /// A success forgets the pair's failures: the password is known, guessing it is moot.
    #[test]
    fn a_success_forgets_the_failures() {
        let throttle = Throttle::default();
        let now = Instant::now();
        burst(&throttle, HERE, "bob", now);
        throttle.succeeded(HERE, "bob");
        burst(&throttle, HERE, "bob", now);
    }

    /// Credentials that would wait past the longest wait are refused unchecked, with how
    /// long until they may come back; waiting counts from the first presentation.
    #[test]
    fn a_wait_too_long_is_refused_as_throttled() {
        let throttle = Throttle::default();
        let now = Instant::now();
        burst(&throttle, HERE, "bob", now);
        // Three more waiting (each counted once admitted): the queue is 3 s deep per attempt.
        let mut at = now;
        for _ in 0..3 {
            let Turn::At(due) = throttle.turn(HERE, "bob", at, at) else {
                panic!("not deferred");
            };
            assert_eq!(throttle.turn(HERE, "bob", at, due), Turn::Now);
            at = due;
        }
        // One first presented at `now` would get its turn ~12 s after it: refused.
        match throttle.turn(HERE, "bob", now, at) {
            Turn::Refused(retry_after) => assert!(retry_after <= Duration::from_secs(4)),
            other => panic!("{other:?}"),
        }
        let message = Login::throttled_message("bob", Duration::from_millis(2500));
        assert!(message.contains("too many failed authentications as 'bob'"));
        assert!(message.contains("try again in 2 s"));
    }

    /// Failures are forgiven with time: a burst again after 30 s.
    #[test]
    fn failures_are_forgiven_with_time() {
        let throttle = Throttle::default();
        let now = Instant::now();
        burst(&throttle, HERE, "bob", now);
        burst(&throttle, HERE, "bob", now + Duration::from_secs(31));
    }

    /// A password with a users file is refused at start: it would guard nothing.
    #[test]
    fn a_password_with_a_users_file_is_refused() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let section = crate::config::SecuritySection {
            users_file: Some(dir.path().join("users.toml")),
            ..crate::config::SecuritySection::default()
        };
        let refused = Security::new(&section, Some("p".to_owned()));
        assert!(matches!(refused, Err(SecurityError::PasswordWithUsers)));
        assert!(Security::new(&section, Some(String::new())).is_ok());
    }
}
