//! Bearer tokens: JSON Web Tokens an OpenID provider signed, checked against the public keys
//! of its JWKS document (a file the server reads, and re-reads when it changes).
//!
//! A token is accepted when its signature verifies with the key its header names (`kid`;
//! without one, any key of the token's algorithm family), it has not expired (`exp` is
//! required; a minute of clock skew is tolerated), it is already valid (`nbf`), and — when
//! configured — its issuer and audience are the expected ones. The user is a claim
//! (`preferred_username` by default, else `sub`); its groups another (`groups`; a dotted path
//! such as `realm_access.roles` reaches into objects), which the authorization policy maps to
//! roles as it does a users file's groups.

use std::path::{Path, PathBuf};

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{DecodingKey, Validation};
use parking_lot::RwLock;
use serde_json::Value;

use crate::Subject;
use crate::files::{Stamp, stamp};

/// Seconds of clock skew tolerated on `exp` and `nbf`.
const LEEWAY_SECS: u64 = 60;
/// Largest token accepted (providers' tokens are a few KiB).
pub const TOKEN_BYTES_MAX: usize = 16 * 1024;

/// Where keys come from and what a token must say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenSettings {
    /// The JWKS document (`{"keys": [...]}`), as an OpenID provider publishes it.
    pub jwks_file: PathBuf,
    /// The issuer tokens must name (`iss`), if any.
    pub issuer: Option<String>,
    /// An audience tokens must name (`aud`), if any.
    pub audience: Option<String>,
    /// The claim that names the user.
    pub user_claim: String,
    /// The claim that lists the user's groups (a dotted path reaches into objects).
    pub groups_claim: String,
}

/// Why keys cannot be read or a token is refused.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The JWKS file cannot be read or parsed.
    #[error("JWKS file {path}: {reason}")]
    Keys {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The token is refused (malformed, unsigned by a known key, expired, wrong issuer…).
    #[error("invalid token: {0}")]
    Invalid(String),
}

/// A key of the JWKS document, ready to verify with.
struct Key {
    kid: Option<String>,
    key: DecodingKey,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key")
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

/// The keys in force and the stamp of the file they came from.
#[derive(Debug)]
struct Keys {
    stamp: Option<Stamp>,
    keys: Vec<Key>,
}

/// Checks bearer tokens against a JWKS file.
#[derive(Debug)]
pub struct Tokens {
    settings: TokenSettings,
    keys: RwLock<Keys>,
}

fn read_keys(path: &Path) -> Result<Keys, TokenError> {
    let keys_error = |reason: String| TokenError::Keys {
        path: path.to_owned(),
        reason,
    };
    let stamp = stamp(path);
    let text = std::fs::read_to_string(path).map_err(|e| keys_error(e.to_string()))?;
    let set: JwkSet = serde_json::from_str(&text).map_err(|e| keys_error(e.to_string()))?;
    let mut keys = Vec::new();
    for jwk in &set.keys {
        // A key for encryption is not one to verify with; nor is a symmetric one: a JWKS
        // document is public, and anyone holding an HMAC secret can sign with it.
        if matches!(
            jwk.common.public_key_use,
            Some(jsonwebtoken::jwk::PublicKeyUse::Encryption)
        ) || matches!(
            jwk.algorithm,
            jsonwebtoken::jwk::AlgorithmParameters::OctetKey(_)
        ) {
            continue;
        }
        // A key of a kind not supported is passed over; the token's own algorithm is checked
        // against each key's family when it is verified (keys without `alg` are common).
        let Ok(key) = DecodingKey::from_jwk(jwk) else {
            continue;
        };
        keys.push(Key {
            kid: jwk.common.key_id.clone(),
            key,
        });
    }
    if keys.is_empty() {
        return Err(keys_error("no signature key".to_owned()));
    }
    Ok(Keys { stamp, keys })
}

impl Tokens {
    /// Reads the JWKS file.
    ///
    /// # Errors
    /// If it cannot be read, is not a JWKS document, or holds no signature key.
    pub fn open(settings: TokenSettings) -> Result<Self, TokenError> {
        let keys = read_keys(&settings.jwks_file)?;
        Ok(Self {
            settings,
            keys: RwLock::new(keys),
        })
    }

    /// Re-reads the JWKS file if it changed; whether it did. Keys that do not load leave the
    /// previous ones in force.
    ///
    /// # Errors
    /// If the changed file does not load.
    pub fn reload_if_changed(&self) -> Result<bool, TokenError> {
        let now = stamp(&self.settings.jwks_file);
        if now.is_some() && now == self.keys.read().stamp {
            return Ok(false);
        }
        let keys = read_keys(&self.settings.jwks_file)?;
        *self.keys.write() = keys;
        Ok(true)
    }

    /// The subject a token names, with its groups (no roles yet: the policy grants them).
    ///
    /// # Errors
    /// [`TokenError::Invalid`] with why the token is refused.
    pub fn verify(&self, token: &str) -> Result<Subject, TokenError> {
        let invalid = |reason: &str| TokenError::Invalid(reason.to_owned());
        if token.len() > TOKEN_BYTES_MAX {
            return Err(invalid("too long"));
        }
        let header =
            jsonwebtoken::decode_header(token).map_err(|e| TokenError::Invalid(e.to_string()))?;
        let mut validation = Validation::new(header.alg);
        validation.leeway = LEEWAY_SECS;
        validation.validate_nbf = true;
        match &self.settings.audience {
            Some(audience) => validation.set_audience(&[audience]),
            None => validation.validate_aud = false,
        }
        if let Some(issuer) = &self.settings.issuer {
            validation.set_issuer(&[issuer]);
        }
        let keys = self.keys.read();
        let candidates = keys
            .keys
            .iter()
            .filter(|key| match (&header.kid, &key.kid) {
                (Some(wanted), Some(kid)) => wanted == kid,
                (Some(_), None) => false,
                (None, _) => true,
            });
        let mut last = invalid("no key of the JWKS file matches the token");
        // A key of another family than the token's algorithm refuses it (no algorithm
        // confusion: an RSA public key is never taken for an HMAC secret).
        for key in candidates {
            match jsonwebtoken::decode::<Value>(token, &key.key, &validation) {
                Ok(data) => return self.subject(&data.claims),
                Err(error) => last = TokenError::Invalid(error.to_string()),
            }
        }
        Err(last)
    }

    fn subject(&self, claims: &Value) -> Result<Subject, TokenError> {
        let name = claim(claims, &self.settings.user_claim)
            .and_then(Value::as_str)
            .or_else(|| claims.get("sub").and_then(Value::as_str))
            .filter(|name| !name.is_empty())
            .ok_or_else(|| {
                TokenError::Invalid(format!(
                    "the token names no user (claim `{}`)",
                    self.settings.user_claim
                ))
            })?;
        let groups = match claim(claims, &self.settings.groups_claim) {
            Some(Value::Array(groups)) => groups
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            Some(Value::String(group)) => vec![group.clone()],
            _ => Vec::new(),
        };
        Ok(Subject::new(name, groups))
    }
}

/// A claim by a dotted path (`realm_access.roles`); a claim whose own name has dots is found
/// first.
fn claim<'a>(claims: &'a Value, path: &str) -> Option<&'a Value> {
    if let Some(value) = claims.get(path) {
        return Some(value);
    }
    path.split('.')
        .try_fold(claims, |value, part| value.get(part))
}

/// Signing keys and tokens for tests.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use jsonwebtoken::{Algorithm, EncodingKey, Header};

    /// A P-256 signing key, and its JWKS document.
    pub(crate) fn signer(kid: &str) -> (EncodingKey, String) {
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
                .unwrap_or_else(|e| panic!("{e}"));
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref())
            .unwrap_or_else(|e| panic!("{e}"));
        let point = pair.public_key().as_ref();
        let (x, y) = (&point[1..33], &point[33..65]);
        let jwks = format!(
            r#"{{"keys":[{{"kty":"EC","crv":"P-256","use":"sig","alg":"ES256","kid":"{kid}","x":"{}","y":"{}"}}]}}"#,
            URL_SAFE_NO_PAD.encode(x),
            URL_SAFE_NO_PAD.encode(y)
        );
        (EncodingKey::from_ec_der(pkcs8.as_ref()), jwks)
    }

    pub(crate) fn now() -> u64 {
        jsonwebtoken::get_current_timestamp()
    }

    pub(crate) fn token(key: &EncodingKey, kid: &str, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(kid.to_owned());
        jsonwebtoken::encode(&header, claims, key).unwrap_or_else(|e| panic!("{e}"))
    }

    pub(crate) fn tokens(jwks: &str, dir: &Path) -> Tokens {
        let path = dir.join("jwks.json");
        std::fs::write(&path, jwks).unwrap_or_else(|e| panic!("{e}"));
        Tokens::open(TokenSettings {
            jwks_file: path,
            issuer: Some("https://idp.example".into()),
            audience: Some("weft".into()),
            user_claim: "preferred_username".into(),
            groups_claim: "realm_access.roles".into(),
        })
        .unwrap_or_else(|e| panic!("{e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{now, signer, token, tokens};
    use super::*;

    // Proves a provider's token is accepted, with the user and groups its claims name, and
    // that expired, premature, foreign-issuer, wrong-audience, tampered and unknown-key
    // tokens are refused.
    #[test]
    fn tokens_are_checked_against_the_providers_keys() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let (key, jwks) = signer("k1");
        let tokens = tokens(&jwks, dir.path());
        let good = serde_json::json!({
            "iss": "https://idp.example", "aud": "weft", "exp": now() + 600,
            "preferred_username": "alice", "realm_access": {"roles": ["observer", "x"]},
        });
        let subject = tokens
            .verify(&token(&key, "k1", &good))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(&*subject.name, "alice");
        assert!(subject.groups.contains("observer"));

        let with = |change: &dyn Fn(&mut Value)| {
            let mut claims = good.clone();
            change(&mut claims);
            tokens.verify(&token(&key, "k1", &claims))
        };
        assert!(
            with(&|c| c["exp"] = (now() - 3600).into()).is_err(),
            "expired"
        );
        assert!(
            with(&|c| c["nbf"] = (now() + 3600).into()).is_err(),
            "not yet valid"
        );
        assert!(with(&|c| c["iss"] = "https://evil.example".into()).is_err());
        assert!(with(&|c| c["aud"] = "other".into()).is_err());
        assert!(
            with(&|c| {
                if let Some(map) = c.as_object_mut() {
                    map.remove("exp");
                }
            })
            .is_err(),
            "exp is required"
        );
        let mut tampered = token(&key, "k1", &good);
        tampered.insert(tampered.len() - 3, 'A');
        assert!(tokens.verify(&tampered).is_err());
        let (other, _) = signer("k1");
        assert!(
            tokens.verify(&token(&other, "k1", &good)).is_err(),
            "another key"
        );
        assert!(
            tokens.verify(&token(&key, "k2", &good)).is_err(),
            "unknown kid"
        );
        assert!(tokens.verify("not.a.token").is_err());
        assert!(tokens.verify(&"x".repeat(TOKEN_BYTES_MAX + 1)).is_err());
    }

    // Proves a symmetric (`oct`) key in a JWKS file is never used — a JWKS document is public,
    // so an HMAC token signed with it is refused — and that a key without `alg` is used.
    #[test]
    fn public_keys_only_and_alg_optional() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let (key, jwks) = signer("ec");
        let without_alg = jwks.replace(r#""alg":"ES256","#, "");
        let secret = b"a secret published in the JWKS file";
        let with_oct = without_alg.replace(
            "]}",
            &format!(
                r#",{{"kty":"oct","kid":"hs","k":"{}"}}]}}"#,
                base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, secret)
            ),
        );
        let tokens = tokens(&with_oct, dir.path());
        let claims = serde_json::json!({
            "iss": "https://idp.example", "aud": "weft", "exp": now() + 600, "sub": "x",
        });
        assert!(tokens.verify(&token(&key, "ec", &claims)).is_ok());
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
        header.kid = Some("hs".to_owned());
        let forged = jsonwebtoken::encode(
            &header,
            &claims,
            &jsonwebtoken::EncodingKey::from_secret(secret),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(tokens.verify(&forged).is_err());
    }

    // Proves a rotated JWKS file is picked up, and one that does not load keeps the keys
    // before.
    #[test]
    fn the_keys_follow_their_file() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let (old_key, old_jwks) = signer("old");
        let tokens = tokens(&old_jwks, dir.path());
        let claims = serde_json::json!({
            "iss": "https://idp.example", "aud": "weft", "exp": now() + 600, "sub": "svc",
        });
        assert!(tokens.verify(&token(&old_key, "old", &claims)).is_ok());
        let (new_key, new_jwks) = signer("new");
        // A different length makes the change visible whatever the clock's granularity.
        std::fs::write(dir.path().join("jwks.json"), format!("{new_jwks}\n\n"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(tokens.reload_if_changed().unwrap_or_else(|e| panic!("{e}")));
        let subject = tokens
            .verify(&token(&new_key, "new", &claims))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(&*subject.name, "svc", "sub when the user claim is absent");
        assert!(tokens.verify(&token(&old_key, "old", &claims)).is_err());
        std::fs::write(dir.path().join("jwks.json"), "{not json").unwrap_or_else(|e| panic!("{e}"));
        assert!(tokens.reload_if_changed().is_err());
        assert!(tokens.verify(&token(&new_key, "new", &claims)).is_ok());
    }
}
