//! Server-side SASL: PLAIN (RFC 4616), SCRAM-SHA-256/512 (RFC 5802, RFC 7677) and
//! OAUTHBEARER (RFC 7628, a bearer token checked by [`Tokens`]) and EXTERNAL (the TLS client
//! certificate's identity), as exchanges stepped with each client message. Protocols carry the messages (Hot Rod's
//! `AUTH`, memcached's `SASL_AUTH`/`SASL_STEP`) and act on the outcome.
//!
//! SCRAM without channel binding (`n` or `y` flags; `p=` is refused), user names as RFC 5802
//! escapes them (`=2C`, `=3D`) and compared as bytes (no SASLprep). An unknown user runs the
//! whole exchange against a decoy credential that is the same every time for that name, and
//! fails where a wrong password would, so the exchange does not tell who exists.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;

use std::sync::Arc;

use crate::Subject;
use crate::credentials::{ScramCredential, ScramHash};
use crate::tokens::Tokens;
use crate::users::Realm;

/// The PLAIN mechanism's name.
pub const PLAIN: &str = "PLAIN";
/// The OAUTHBEARER mechanism's name.
pub const OAUTHBEARER: &str = "OAUTHBEARER";
/// The EXTERNAL mechanism's name (RFC 4422 appendix A): the identity the TLS client
/// certificate proved.
pub const EXTERNAL: &str = "EXTERNAL";
/// Bytes of randomness in the server's part of a SCRAM nonce.
const SERVER_NONCE_BYTES: usize = 18;
/// The name a bearer token's attempts are counted under before its user is known.
pub const BEARER_USER: &str = "(bearer token)";

/// Largest client message accepted (a user name and a proof are far smaller; an OAUTHBEARER
/// message holds a token of up to [`crate::tokens::TOKEN_BYTES_MAX`]).
pub const MESSAGE_BYTES_MAX: usize = crate::tokens::TOKEN_BYTES_MAX + 1024;

/// The mechanisms offered, strongest first: the SCRAMs always, PLAIN only where the password
/// cannot be read on the way (`plain_allowed`: TLS, or configured so).
#[must_use]
pub fn mechanisms(plain_allowed: bool) -> Vec<&'static str> {
    let mut names: Vec<&'static str> = ScramHash::ALL.iter().map(|h| h.mechanism()).collect();
    if plain_allowed {
        names.push(PLAIN);
    }
    names
}

/// Why an exchange failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SaslError {
    /// The mechanism is not offered.
    #[error("unsupported SASL mechanism `{0}`")]
    Unsupported(String),
    /// The client's message is not one of the mechanism's.
    #[error("malformed SASL message: {0}")]
    Malformed(&'static str),
    /// The credentials are wrong, or the user unknown (not told apart).
    #[error("authentication failed")]
    Failed,
    /// A message arrived after the exchange ended.
    #[error("the SASL exchange is over")]
    Over,
}

/// What an exchange answers a client message with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Send this challenge and wait for the client's next message.
    Continue(Vec<u8>),
    /// Authenticated as `subject`; send `last` (possibly empty) with the success.
    Done {
        /// Who the client is.
        subject: Subject,
        /// The mechanism's final message (SCRAM's server signature).
        last: Vec<u8>,
    },
}

/// One SASL exchange, server side.
#[derive(Debug)]
pub struct Exchange {
    state: State,
}

#[derive(Debug)]
enum State {
    Plain,
    Bearer(Arc<Tokens>),
    External(Subject),
    ScramFirst(ScramHash),
    ScramFinal(Box<ScramPending>),
    Over,
}

#[derive(Debug)]
struct ScramPending {
    /// The user the client claims to be (known or not).
    name: String,
    credential: ScramCredential,
    /// `None` for an unknown user (its decoy credential fails the proof anyway).
    subject: Option<Subject>,
    gs2_header: String,
    client_first_bare: String,
    server_first: String,
    nonce: String,
}

impl Exchange {
    /// Starts mechanism `name` (one of [`mechanisms`]; the caller checks it is offered).
    ///
    /// # Errors
    /// [`SaslError::Unsupported`] for another name.
    pub fn start(name: &str) -> Result<Self, SaslError> {
        let state = if name == PLAIN {
            State::Plain
        } else if let Some(hash) = ScramHash::of_mechanism(name) {
            State::ScramFirst(hash)
        } else {
            return Err(SaslError::Unsupported(name.to_owned()));
        };
        Ok(Self { state })
    }

    /// Starts EXTERNAL for `subject`, the user the connection's client certificate names.
    #[must_use]
    pub fn start_external(subject: Subject) -> Self {
        Self {
            state: State::External(subject),
        }
    }

    /// Starts OAUTHBEARER, whose token `tokens` checks.
    #[must_use]
    pub fn start_bearer(tokens: Arc<Tokens>) -> Self {
        Self {
            state: State::Bearer(tokens),
        }
    }

    /// Whose credential `message`, as the exchange's next message, would be checked for:
    /// the user a throttle counts the attempt against (`(bearer token)` for a token, whose
    /// user is known only once it is verified; an empty name for a PLAIN message that does
    /// not parse). `None` when this step checks nothing (SCRAM's first message, EXTERNAL,
    /// an exchange that is over).
    #[must_use]
    pub fn checks(&self, message: &[u8]) -> Option<String> {
        match &self.state {
            State::Plain => Some(
                message
                    .split(|&b| b == 0)
                    .nth(1)
                    .map(|name| String::from_utf8_lossy(name).into_owned())
                    .unwrap_or_default(),
            ),
            State::Bearer(_) if message.is_empty() => None,
            State::Bearer(_) => Some(BEARER_USER.to_owned()),
            State::ScramFinal(pending) => Some(pending.name.clone()),
            State::External(_) | State::ScramFirst(_) | State::Over => None,
        }
    }

    /// Takes the client's next message.
    ///
    /// # Errors
    /// The exchange fails for good: the client must start again.
    pub fn step(&mut self, realm: &Realm, message: &[u8]) -> Result<Step, SaslError> {
        if message.len() > MESSAGE_BYTES_MAX {
            self.state = State::Over;
            return Err(SaslError::Malformed("message too long"));
        }
        match std::mem::replace(&mut self.state, State::Over) {
            State::Plain => plain(realm, message),
            // A client that sends no initial response is asked for it with an empty
            // challenge (RFC 4422 §5); the Java client does so.
            State::Bearer(tokens) if message.is_empty() => {
                self.state = State::Bearer(tokens);
                Ok(Step::Continue(Vec::new()))
            }
            State::Bearer(tokens) => bearer(&tokens, message),
            // The message is an authorization identity: none, or the certificate's own.
            State::External(subject) => {
                if message.is_empty() || message == subject.name.as_bytes() {
                    Ok(Step::Done {
                        subject,
                        last: Vec::new(),
                    })
                } else {
                    Err(SaslError::Failed)
                }
            }
            State::ScramFirst(hash) => {
                let pending = scram_first(realm, hash, message)?;
                let challenge = pending.server_first.clone().into_bytes();
                self.state = State::ScramFinal(Box::new(pending));
                Ok(Step::Continue(challenge))
            }
            State::ScramFinal(pending) => scram_final(&pending, message),
            State::Over => Err(SaslError::Over),
        }
    }
}

/// `[authzid] NUL authcid NUL password`.
fn plain(realm: &Realm, message: &[u8]) -> Result<Step, SaslError> {
    let mut parts = message.split(|&b| b == 0);
    let (Some(authzid), Some(authcid), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(SaslError::Malformed(
            "PLAIN expects authzid NUL authcid NUL password",
        ));
    };
    let name =
        std::str::from_utf8(authcid).map_err(|_| SaslError::Malformed("user name not UTF-8"))?;
    if !authzid.is_empty() && authzid != authcid {
        return Err(SaslError::Failed);
    }
    let subject = realm
        .authenticate_password(name, password)
        .ok_or(SaslError::Failed)?;
    Ok(Step::Done {
        subject,
        last: Vec::new(),
    })
}

/// RFC 7628's client response: a GS2 header (`n,a=user,` or `n,,`), then `key=value` pairs
/// each ended by 0x01, `auth=Bearer <token>` among them, then a last 0x01. An authorization
/// identity, when given, must be the token's user.
fn bearer(tokens: &Tokens, message: &[u8]) -> Result<Step, SaslError> {
    let text =
        std::str::from_utf8(message).map_err(|_| SaslError::Malformed("OAUTHBEARER not UTF-8"))?;
    // WildFly Elytron (the Infinispan clients' SASL, and Infinispan's server) writes the
    // separator as the four characters `%x01`, the RFC's ABNF notation: taken as 0x01 when
    // the message has no real one.
    let text: std::borrow::Cow<'_, str> = if !text.contains('\x01') && text.contains("%x01") {
        text.replace("%x01", "\x01").into()
    } else {
        text.into()
    };
    let (gs2, pairs) = text.split_once('\x01').ok_or(SaslError::Malformed(
        "OAUTHBEARER expects a GS2 header and key=value pairs",
    ))?;
    let mut gs2_fields = gs2.split(',');
    let (Some(binding), Some(authzid)) = (gs2_fields.next(), gs2_fields.next()) else {
        return Err(SaslError::Malformed("OAUTHBEARER GS2 header"));
    };
    if binding != "n" && binding != "y" {
        return Err(SaslError::Malformed(
            "OAUTHBEARER without channel binding only",
        ));
    }
    let authzid = match authzid.strip_prefix("a=") {
        Some(name) => Some(unescape_name(name)?),
        None if authzid.is_empty() => None,
        None => return Err(SaslError::Malformed("OAUTHBEARER GS2 header")),
    };
    let token = pairs
        .split('\x01')
        .find_map(|pair| pair.strip_prefix("auth="))
        .and_then(|auth| {
            let (scheme, token) = auth.split_once(' ')?;
            scheme
                .eq_ignore_ascii_case("bearer")
                .then_some(token.trim())
        })
        .ok_or(SaslError::Malformed("OAUTHBEARER without auth=Bearer"))?;
    let subject = tokens.verify(token).map_err(|_| SaslError::Failed)?;
    if authzid.is_some_and(|name| *name != *subject.name) {
        return Err(SaslError::Failed);
    }
    Ok(Step::Done {
        subject,
        last: Vec::new(),
    })
}

/// RFC 5802's `saslname` unescaped: `=2C` is `,`, `=3D` is `=`, any other `=` is malformed.
fn unescape_name(name: &str) -> Result<String, SaslError> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        let escape = rest
            .get(at..at + 3)
            .ok_or(SaslError::Malformed("bad escape in user name"))?;
        out.push(match escape {
            "=2C" => ',',
            "=3D" => '=',
            _ => return Err(SaslError::Malformed("bad escape in user name")),
        });
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Ok(out)
}

fn scram_first(realm: &Realm, hash: ScramHash, message: &[u8]) -> Result<ScramPending, SaslError> {
    let text = std::str::from_utf8(message).map_err(|_| SaslError::Malformed("not UTF-8"))?;
    // gs2-header = cbind-flag "," [authzid] ","
    let (flag, rest) = text
        .split_once(',')
        .ok_or(SaslError::Malformed("no GS2 header"))?;
    match flag {
        "n" | "y" => {}
        _ if flag.starts_with("p=") => {
            return Err(SaslError::Malformed("channel binding is not supported"));
        }
        _ => return Err(SaslError::Malformed("bad channel-binding flag")),
    }
    let (authzid, bare) = rest
        .split_once(',')
        .ok_or(SaslError::Malformed("no GS2 header"))?;
    let gs2_header = format!("{flag},{authzid},");
    let mut attributes = bare.split(',');
    let name = attributes
        .next()
        .and_then(|a| a.strip_prefix("n="))
        .ok_or(SaslError::Malformed("no user name"))?;
    let client_nonce = attributes
        .next()
        .and_then(|a| a.strip_prefix("r="))
        .filter(|n| !n.is_empty() && n.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b','))
        .ok_or(SaslError::Malformed("no client nonce"))?;
    if bare.starts_with("m=") || attributes.any(|a| a.starts_with("m=")) {
        return Err(SaslError::Malformed(
            "mandatory extensions are not supported",
        ));
    }
    let name = unescape_name(name)?;
    if !authzid.is_empty() {
        let authzid = authzid
            .strip_prefix("a=")
            .ok_or(SaslError::Malformed("bad authzid"))?;
        if unescape_name(authzid)? != name {
            return Err(SaslError::Failed);
        }
    }
    let users = realm.users();
    let (credential, subject) = match users
        .get(&name)
        .and_then(|u| Some((u.scram.get(&hash)?.clone(), u.subject())))
    {
        Some((credential, subject)) => (credential, Some(subject)),
        None => (realm.decoy_scram(hash, &name), None),
    };
    let mut random = [0u8; SERVER_NONCE_BYTES];
    aws_lc_rs::rand::fill(&mut random).map_err(|_| SaslError::Failed)?;
    let nonce = format!("{client_nonce}{}", BASE64.encode(random));
    let server_first = format!(
        "r={nonce},s={},i={}",
        BASE64.encode(&credential.salt),
        credential.iterations
    );
    Ok(ScramPending {
        name,
        credential,
        subject,
        gs2_header,
        client_first_bare: bare.to_owned(),
        server_first,
        nonce,
    })
}

fn scram_final(pending: &ScramPending, message: &[u8]) -> Result<Step, SaslError> {
    let text = std::str::from_utf8(message).map_err(|_| SaslError::Malformed("not UTF-8"))?;
    let (without_proof, proof) = text
        .rsplit_once(",p=")
        .ok_or(SaslError::Malformed("no proof"))?;
    let mut attributes = without_proof.split(',');
    let binding = attributes
        .next()
        .and_then(|a| a.strip_prefix("c="))
        .ok_or(SaslError::Malformed("no channel binding"))?;
    if BASE64.decode(binding).ok().as_deref() != Some(pending.gs2_header.as_bytes()) {
        return Err(SaslError::Malformed(
            "channel binding differs from the GS2 header",
        ));
    }
    let nonce = attributes
        .next()
        .and_then(|a| a.strip_prefix("r="))
        .ok_or(SaslError::Malformed("no nonce"))?;
    if nonce != pending.nonce {
        return Err(SaslError::Failed);
    }
    let proof = BASE64
        .decode(proof)
        .map_err(|_| SaslError::Malformed("proof not base64"))?;
    let hash = pending.credential.hash;
    if proof.len() != hash.output_len() {
        return Err(SaslError::Malformed("proof of the wrong length"));
    }
    let auth_message = format!(
        "{},{},{without_proof}",
        pending.client_first_bare, pending.server_first
    );
    let signature = hash.hmac_of(&pending.credential.stored_key, auth_message.as_bytes());
    let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(p, s)| p ^ s).collect();
    if !pending.credential.matches_client_key(&client_key) {
        return Err(SaslError::Failed);
    }
    let subject = pending.subject.clone().ok_or(SaslError::Failed)?;
    let server_signature = hash.hmac_of(&pending.credential.server_key, auth_message.as_bytes());
    Ok(Step::Done {
        subject,
        last: format!("v={}", BASE64.encode(server_signature)).into_bytes(),
    })
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU32;

    use super::*;
    use crate::users::{User, Users};

    fn realm() -> Realm {
        let mut users = Users::default();
        let mut user =
            User::new("user", "pencil", ["app".to_owned()]).unwrap_or_else(|e| panic!("{e}"));
        // RFC 7677's salt, so its exchange can be replayed.
        let salt = BASE64
            .decode("W22ZaJ0SNY7soEsUEjb6gQ==")
            .unwrap_or_else(|e| panic!("{e}"));
        user.scram.insert(
            ScramHash::Sha256,
            ScramCredential::derive(
                ScramHash::Sha256,
                b"pencil",
                salt,
                NonZeroU32::new(4096).unwrap_or(NonZeroU32::MIN),
            ),
        );
        users.insert(user);
        Realm::of(users)
    }

    /// A client's side of SCRAM, as RFC 5802 computes it.
    fn client_final(
        hash: ScramHash,
        password: &str,
        client_first_bare: &str,
        server_first: &str,
    ) -> String {
        let mut fields = server_first.split(',');
        let nonce = fields
            .next()
            .and_then(|f| f.strip_prefix("r="))
            .unwrap_or_default();
        let salt = BASE64
            .decode(
                fields
                    .next()
                    .and_then(|f| f.strip_prefix("s="))
                    .unwrap_or_default(),
            )
            .unwrap_or_default();
        let iterations: u32 = fields
            .next()
            .and_then(|f| f.strip_prefix("i="))
            .and_then(|i| i.parse().ok())
            .unwrap_or(1);
        let salted = hash.salted_password(
            password.as_bytes(),
            &salt,
            NonZeroU32::new(iterations).unwrap_or(NonZeroU32::MIN),
        );
        let client_key = hash.hmac_of(&salted, b"Client Key");
        let stored_key = hash.hash(&client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth = format!("{client_first_bare},{server_first},{without_proof}");
        let signature = hash.hmac_of(&stored_key, auth.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(k, s)| k ^ s)
            .collect();
        format!("{without_proof},p={}", BASE64.encode(proof))
    }

    fn run(realm: &Realm, mechanism: &str, user: &str, password: &str) -> Result<Step, SaslError> {
        let mut exchange = Exchange::start(mechanism)?;
        let bare = format!("n={user},r=fyko+d2lbbFgONRv9qkxdawL");
        let Step::Continue(server_first) = exchange.step(realm, format!("n,,{bare}").as_bytes())?
        else {
            panic!("SCRAM answers the first message with a challenge");
        };
        let server_first = String::from_utf8(server_first).unwrap_or_default();
        let hash = ScramHash::of_mechanism(mechanism).unwrap_or(ScramHash::Sha256);
        exchange.step(
            realm,
            client_final(hash, password, &bare, &server_first).as_bytes(),
        )
    }

    // Proves SCRAM-SHA-256 and SCRAM-SHA-512 authenticate the right password, with the
    // server's signature a client can check, and refuse a wrong one, an unknown user (after
    // a full exchange with a decoy salt that is the same each time), and replays.
    #[test]
    fn scram_authenticates_and_refuses() {
        let realm = realm();
        for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-512"] {
            match run(&realm, mechanism, "user", "pencil") {
                Ok(Step::Done { subject, last }) => {
                    assert_eq!(&*subject.name, "user");
                    assert!(last.starts_with(b"v="));
                }
                other => panic!("{mechanism}: {other:?}"),
            }
            assert_eq!(
                run(&realm, mechanism, "user", "pencil!"),
                Err(SaslError::Failed)
            );
            assert_eq!(
                run(&realm, mechanism, "nobody", "pencil"),
                Err(SaslError::Failed)
            );
        }
        let salt_of = |name: &str| {
            let mut exchange = Exchange::start("SCRAM-SHA-256").unwrap_or_else(|e| panic!("{e}"));
            match exchange.step(&realm, format!("n,,n={name},r=abc").as_bytes()) {
                Ok(Step::Continue(first)) => String::from_utf8(first)
                    .unwrap_or_default()
                    .split(',')
                    .nth(1)
                    .unwrap_or_default()
                    .to_owned(),
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(
            salt_of("nobody"),
            salt_of("nobody"),
            "a decoy salt changes, telling unknown users apart"
        );
        assert_eq!(salt_of("user"), "s=W22ZaJ0SNY7soEsUEjb6gQ==");
    }

    // Proves malformed or unsupported SCRAM messages end the exchange with an error.
    #[test]
    fn malformed_scram_messages_are_refused() {
        let realm = realm();
        for first in [
            &b"p=tls-unique,,n=user,r=abc"[..],
            b"x,,n=user,r=abc",
            b"n,,r=abc",
            b"n,,n=user",
            b"n,,n=us=4Ser,r=abc",
            b"n,,m=ext,n=user,r=abc",
            b"n,a=other,n=user,r=abc",
            b"\xff",
            b"",
        ] {
            let mut exchange = Exchange::start("SCRAM-SHA-256").unwrap_or_else(|e| panic!("{e}"));
            assert!(exchange.step(&realm, first).is_err(), "{first:?}");
            assert_eq!(exchange.step(&realm, b"anything"), Err(SaslError::Over));
        }
        let mut exchange = Exchange::start("SCRAM-SHA-256").unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            exchange.step(&realm, b"n,,n=user,r=abc"),
            Ok(Step::Continue(_))
        ));
        assert!(exchange.step(&realm, b"c=biws,r=abcWRONG,p=AAAA").is_err());
        assert!(Exchange::start("DIGEST-MD5").is_err());
    }

    // Proves PLAIN authenticates with and without an authorization id equal to the user, and
    // refuses wrong passwords, impersonation and malformed messages.
    #[test]
    fn plain_authenticates_and_refuses() {
        let realm = realm();
        let step =
            |message: &[u8]| Exchange::start(PLAIN).and_then(|mut e| e.step(&realm, message));
        assert!(matches!(step(b"\0user\0pencil"), Ok(Step::Done { .. })));
        assert!(matches!(step(b"user\0user\0pencil"), Ok(Step::Done { .. })));
        assert_eq!(step(b"\0user\0pencilx"), Err(SaslError::Failed));
        assert_eq!(step(b"admin\0user\0pencil"), Err(SaslError::Failed));
        assert!(matches!(
            step(b"user\0pencil"),
            Err(SaslError::Malformed(_))
        ));
        assert_eq!(mechanisms(false), vec!["SCRAM-SHA-512", "SCRAM-SHA-256"]);
        assert!(mechanisms(true).contains(&PLAIN));
    }

    // Proves OAUTHBEARER (RFC 7628) authenticates the user a valid token names, refuses an
    // authorization identity that is not the token's user and an invalid token, and reports a
    // message that is not OAUTHBEARER's as malformed.
    #[test]
    fn oauthbearer_takes_a_valid_token() {
        use crate::tokens::testing::{now, signer, token, tokens};
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let (key, jwks) = signer("k");
        let tokens = Arc::new(tokens(&jwks, dir.path()));
        let claims = serde_json::json!({
            "iss": "https://idp.example", "aud": "weft", "exp": now() + 600,
            "preferred_username": "alice",
        });
        let good = token(&key, "k", &claims);
        let step = |message: String| {
            Exchange::start_bearer(Arc::clone(&tokens)).step(&realm(), message.as_bytes())
        };
        match step(format!(
            "n,a=alice,\x01host=h\x01auth=Bearer {good}\x01\x01"
        )) {
            Ok(Step::Done { subject, last }) => {
                assert_eq!(&*subject.name, "alice");
                assert!(last.is_empty());
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            step(format!("n,,\x01auth=Bearer {good}\x01\x01")),
            Ok(Step::Done { .. })
        ));
        // WildFly Elytron's separator, the characters `%x01`.
        assert!(matches!(
            step(format!("n,a=alice,%x01auth=Bearer {good}%x01%x01")),
            Ok(Step::Done { .. })
        ));
        // No initial response: an empty challenge asks for it.
        let mut exchange = Exchange::start_bearer(Arc::clone(&tokens));
        assert_eq!(exchange.step(&realm(), b""), Ok(Step::Continue(Vec::new())));
        let message = format!("n,,\x01auth=Bearer {good}\x01\x01");
        assert!(matches!(
            exchange.step(&realm(), message.as_bytes()),
            Ok(Step::Done { .. })
        ));
        assert_eq!(
            step(format!("n,a=bob,\x01auth=Bearer {good}\x01\x01")),
            Err(SaslError::Failed)
        );
        assert_eq!(
            step("n,,\x01auth=Bearer not.a.token\x01\x01".to_owned()),
            Err(SaslError::Failed)
        );
        assert!(matches!(
            step("n,,auth=Bearer x".to_owned()),
            Err(SaslError::Malformed(_))
        ));
        assert!(matches!(
            step("n,,\x01auth=Basic x\x01\x01".to_owned()),
            Err(SaslError::Malformed(_))
        ));
    }
}
