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
//!
//! Users of a users file are authorized by role (`crate::authorization`): an authenticated
//! subject carries the roles its groups grant under the configured
//! [`Policy`].

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use weft_security::Subject;
use weft_security::authorization::{Policy, PolicyError};
use weft_security::sasl::{self, Exchange, SaslError, Step};
use weft_security::tokens::{TokenError, TokenSettings, Tokens};
use weft_security::users::{Realm, UsersError};

/// The user the shared `password` authenticates, and an anonymous client is (Redis' name).
pub const DEFAULT_USER: &str = "default";
/// How often the users file is checked for a change.
const USERS_CHECK_PERIOD: Duration = Duration::from_secs(2);

/// Failed authentications an address may make in a burst before it is slowed down.
const FAILURES_BURST: f64 = 10.0;
/// How fast an address' failures are forgiven: one every this many seconds.
const FAILURE_FORGIVEN_SECS: f64 = 3.0;
/// Addresses remembered before the fully forgiven ones are forgotten.
const THROTTLED_ADDRESSES_MAX: usize = 10_000;
/// The `tracing` target of authentication outcomes (`WEFT_LOG=info,weft::audit=debug` shows
/// them all; failures and refusals are logged at info, successes at debug).
pub const AUDIT: &str = "weft::audit";

/// How clients authenticate.
#[derive(Debug)]
pub struct Security {
    realm: Option<Arc<Realm>>,
    /// Bearer tokens' keys, when `[security.jwt]` is configured.
    tokens: Option<Arc<Tokens>>,
    password: Option<String>,
    throttle: Throttle,
    /// The roles users get; requests are authorized only when `authorizing`.
    policy: Policy,
    authorizing: bool,
    metrics_anonymous: bool,
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
}

/// Slows down addresses that fail to authenticate again and again: after a burst of
/// [`FAILURES_BURST`] failures, an address gets one attempt every [`FAILURE_FORGIVEN_SECS`];
/// attempts beyond that are refused at once, without checking (so they cost no hashing),
/// whatever they present. Failures are forgiven with time only, not by a success.
#[derive(Debug, Default)]
struct Throttle {
    addresses: Mutex<HashMap<IpAddr, (f64, Instant)>>,
}

impl Throttle {
    fn decayed(failures: f64, since: Instant, now: Instant) -> f64 {
        (failures - now.duration_since(since).as_secs_f64() / FAILURE_FORGIVEN_SECS).max(0.0)
    }

    /// Whether `address` may try now.
    fn allows(&self, address: IpAddr) -> bool {
        let now = Instant::now();
        self.addresses
            .lock()
            .get(&address)
            .is_none_or(|&(failures, since)| {
                Self::decayed(failures, since, now) + 1.0 <= FAILURES_BURST
            })
    }

    fn failed(&self, address: IpAddr) {
        let now = Instant::now();
        let mut addresses = self.addresses.lock();
        if addresses.len() >= THROTTLED_ADDRESSES_MAX && !addresses.contains_key(&address) {
            addresses.retain(|_, &mut (failures, since)| Self::decayed(failures, since, now) > 0.0);
            if addresses.len() >= THROTTLED_ADDRESSES_MAX {
                // Failing from more addresses than are remembered: the newest are not
                // tracked (memory stays bounded; each of their attempts still costs a hash).
                return;
            }
        }
        let entry = addresses.entry(address).or_insert((0.0, now));
        let failures = Self::decayed(entry.0, entry.1, now) + 1.0;
        *entry = (failures, now);
        if failures + 1.0 > FAILURES_BURST {
            tracing::warn!(target: AUDIT, %address, "repeated failed authentications: this address is slowed down");
        }
    }

    /// A success does not forgive earlier failures: a client with one valid credential (its
    /// own password, a token, a client certificate) could otherwise interleave it with
    /// guesses and guess without limit. Failures are forgiven with time alone.
    fn succeeded(&self, _address: IpAddr) {}
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
            password,
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

    /// Whether clients must authenticate.
    #[must_use]
    pub fn required(&self) -> bool {
        self.has_users() || self.password.is_some()
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
    ) -> Option<Subject> {
        let tokens = self.tokens.as_ref()?;
        if !self.throttle.allows(peer) {
            tracing::info!(target: AUDIT, %peer, protocol, "authentication refused: too many failures from this address");
            return None;
        }
        let subject = match tokens.verify(token) {
            // Its groups grant roles, not its name: a provider may let anyone pick one.
            Ok(subject) => Some(self.policy.resolve_groups(subject)),
            Err(error) => {
                tracing::debug!(target: AUDIT, %peer, protocol, %error, "bearer token refused");
                None
            }
        };
        self.record(peer, protocol, "(bearer token)", subject.as_ref());
        subject
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
        check: impl FnOnce() -> Option<Subject>,
    ) -> Option<Subject> {
        let name = String::from_utf8_lossy(user);
        if !self.throttle.allows(peer) {
            tracing::info!(target: AUDIT, %peer, protocol, user = %name, "authentication refused: too many failures from this address");
            return None;
        }
        let subject = check();
        self.record(peer, protocol, &name, subject.as_ref());
        subject
    }

    /// Who a client of a protocol that authenticates only users-file users (Hot Rod,
    /// memcached, REST; the shared `password` is RESP's alone) is before it authenticates:
    /// `default` with every role without a users file, nobody with one.
    #[must_use]
    pub fn anonymous_without_users(&self) -> Option<Subject> {
        (!self.has_users()).then(|| self.default_user())
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
    ) -> Option<Subject> {
        let name = String::from_utf8_lossy(user);
        if !self.throttle.allows(peer) {
            tracing::info!(target: AUDIT, %peer, protocol, user = %name, "authentication refused: too many failures from this address");
            return None;
        }
        let subject = self.check_password(&name, password);
        self.record(peer, protocol, &name, subject.as_ref());
        subject
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
        // The shared password is RESP's, for servers without users; with bearer tokens (and
        // no users file) it is not a login of its own on the other protocols.
        if self.tokens.is_some() {
            return None;
        }
        let expected = self.password.as_ref()?;
        (user == DEFAULT_USER
            && weft_security::credentials::equal_in_constant_time(expected.as_bytes(), password))
        .then(|| self.default_user())
    }

    /// Notes an authentication's outcome: the audit log, and the throttle.
    fn record(&self, peer: IpAddr, protocol: &'static str, user: &str, subject: Option<&Subject>) {
        match subject {
            Some(subject) => {
                self.throttle.succeeded(peer);
                tracing::debug!(target: AUDIT, %peer, protocol, user = %subject.name, "authenticated");
            }
            None => {
                self.throttle.failed(peer);
                tracing::info!(target: AUDIT, %peer, protocol, user, "authentication failed");
            }
        }
    }

    /// The SASL mechanisms offered on a connection: none without users; with a users file the
    /// SCRAMs, and PLAIN on TLS (or in the clear where `offer.plain_in_clear`); with bearer
    /// tokens, OAUTHBEARER on TLS; EXTERNAL where a client certificate names the client.
    #[must_use]
    pub fn sasl_mechanisms(&self, offer: &SaslOffer) -> Vec<&'static str> {
        let mut mechanisms = if self.realm.is_some() {
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
                .unwrap_or_else(|| Arc::new(Realm::of(weft_security::users::Users::default()))),
            exchange,
            slow: mechanism == sasl::PLAIN,
            bearer: mechanism == sasl::OAUTHBEARER,
            peer,
            protocol,
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
}

impl SaslExchange {
    /// Takes the client's next message.
    ///
    /// # Errors
    /// When the exchange fails (or its address is slowed down); the client must start
    /// another.
    pub fn step(&mut self, message: &[u8]) -> Result<Step, SaslError> {
        if !self.security.throttle.allows(self.peer) {
            tracing::info!(target: AUDIT, peer = %self.peer, protocol = self.protocol, "authentication refused: too many failures from this address");
            return Err(SaslError::Failed);
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
        match &outcome {
            Ok(Step::Done { subject, .. }) => {
                self.security
                    .record(self.peer, self.protocol, &subject.name, Some(subject));
            }
            Ok(Step::Continue(_)) => {}
            Err(_) => self
                .security
                .record(self.peer, self.protocol, "(SASL)", None),
        }
        outcome
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
