//! Credentials derived from a password; the password itself is never kept.
//!
//! - [`PasswordHash`]: Argon2id in PHC string form (`$argon2id$v=19$m=…,t=…,p=…$salt$hash`),
//!   for mechanisms that send the password (SASL PLAIN, HTTP Basic, Redis `AUTH`).
//! - [`ScramCredential`]: RFC 5802's salt, iteration count, `StoredKey` and `ServerKey`,
//!   written as RFC 5803 does (`SCRAM-SHA-256$4096:salt$StoredKey:ServerKey`, base64), per
//!   hash function: the server can check a SCRAM client's proof, and prove itself, without
//!   being able to log in as the user.

use std::fmt;
use std::num::NonZeroU32;
use std::str::FromStr;

use argon2::password_hash::{PasswordHasher, PasswordVerifier};
use aws_lc_rs::{constant_time, digest, hmac, pbkdf2};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;

/// SCRAM's iteration count for new credentials (RFC 7677's minimum for SHA-256 is 4096).
pub const SCRAM_ITERATIONS_DEFAULT: u32 = 4096;
/// Bytes of salt for new SCRAM credentials.
const SCRAM_SALT_BYTES: usize = 16;
/// Fewest iterations accepted from a users file (below it a stolen file is cheap to attack).
pub const SCRAM_ITERATIONS_MIN: u32 = 4096;

/// Why a credential could not be made or read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum CredentialError {
    /// The text is not a credential of the expected form.
    #[error("malformed {what}: {reason}")]
    Malformed {
        /// What was being read.
        what: &'static str,
        /// Why it is not one.
        reason: String,
    },
    /// Hashing failed (the system's random source, or the hash's own limits).
    #[error("hashing failed: {0}")]
    Hashing(String),
}

fn malformed(what: &'static str, reason: impl Into<String>) -> CredentialError {
    CredentialError::Malformed {
        what,
        reason: reason.into(),
    }
}

/// Whether `a` and `b` are equal, compared so that the time taken does not tell how much of
/// a guess was right.
#[must_use]
pub fn equal_in_constant_time(a: &[u8], b: &[u8]) -> bool {
    constant_time::verify_slices_are_equal(a, b).is_ok()
}

/// An Argon2id hash of a password, in PHC string form.
#[derive(Clone, PartialEq, Eq)]
pub struct PasswordHash(String);

impl fmt::Debug for PasswordHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PasswordHash(argon2id)")
    }
}

impl PasswordHash {
    /// Hashes `password` with a fresh salt and Argon2id's recommended parameters.
    ///
    /// # Errors
    /// If the system's random source fails.
    pub fn new(password: &str) -> Result<Self, CredentialError> {
        argon2::Argon2::default()
            .hash_password(password.as_bytes())
            .map(|hash| Self(hash.to_string()))
            .map_err(|e| CredentialError::Hashing(e.to_string()))
    }

    /// Whether `password` is the one hashed (slow on purpose: tens of milliseconds).
    #[must_use]
    pub fn verify(&self, password: &[u8]) -> bool {
        argon2::Argon2::default()
            .verify_password(password, self.0.as_str())
            .is_ok()
    }

    /// The PHC string.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for PasswordHash {
    type Err = CredentialError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let phc = argon2::password_hash::phc::PasswordHash::new(text)
            .map_err(|e| malformed("password hash", e.to_string()))?;
        if phc.algorithm.as_str() != "argon2id" {
            return Err(malformed(
                "password hash",
                format!("`{}` is not argon2id", phc.algorithm.as_str()),
            ));
        }
        Ok(Self(text.to_owned()))
    }
}

/// The hash function of a SCRAM mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScramHash {
    /// SCRAM-SHA-256 (RFC 7677).
    Sha256,
    /// SCRAM-SHA-512.
    Sha512,
}

impl ScramHash {
    /// Every SCRAM mechanism Weft offers, strongest first.
    pub const ALL: [Self; 2] = [Self::Sha512, Self::Sha256];

    /// The SASL mechanism's name.
    #[must_use]
    pub fn mechanism(self) -> &'static str {
        match self {
            Self::Sha256 => "SCRAM-SHA-256",
            Self::Sha512 => "SCRAM-SHA-512",
        }
    }

    /// The hash of mechanism `name`.
    #[must_use]
    pub fn of_mechanism(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|h| h.mechanism() == name)
    }

    fn digest(self) -> &'static digest::Algorithm {
        match self {
            Self::Sha256 => &digest::SHA256,
            Self::Sha512 => &digest::SHA512,
        }
    }

    fn hmac(self) -> hmac::Algorithm {
        match self {
            Self::Sha256 => hmac::HMAC_SHA256,
            Self::Sha512 => hmac::HMAC_SHA512,
        }
    }

    fn pbkdf2(self) -> pbkdf2::Algorithm {
        match self {
            Self::Sha256 => pbkdf2::PBKDF2_HMAC_SHA256,
            Self::Sha512 => pbkdf2::PBKDF2_HMAC_SHA512,
        }
    }

    /// Bytes of the hash's output.
    #[must_use]
    pub fn output_len(self) -> usize {
        self.digest().output_len()
    }

    /// `H(data)`.
    #[must_use]
    pub fn hash(self, data: &[u8]) -> Vec<u8> {
        digest::digest(self.digest(), data).as_ref().to_vec()
    }

    /// `HMAC(key, data)`.
    #[must_use]
    pub fn hmac_of(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        hmac::sign(&hmac::Key::new(self.hmac(), key), data)
            .as_ref()
            .to_vec()
    }

    /// RFC 5802's `Hi(password, salt, iterations)`: PBKDF2 with this hash's HMAC.
    #[must_use]
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: NonZeroU32) -> Vec<u8> {
        let mut out = vec![0; self.output_len()];
        pbkdf2::derive(self.pbkdf2(), iterations, salt, password, &mut out);
        out
    }
}

/// What a server keeps to run SCRAM with a user: never enough to log in as it.
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredential {
    /// The hash function.
    pub hash: ScramHash,
    /// `Hi`'s iteration count.
    pub iterations: NonZeroU32,
    /// The salt.
    pub salt: Vec<u8>,
    /// `H(HMAC(SaltedPassword, "Client Key"))`.
    pub stored_key: Vec<u8>,
    /// `HMAC(SaltedPassword, "Server Key")`.
    pub server_key: Vec<u8>,
}

impl fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScramCredential")
            .field("hash", &self.hash)
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

/// An identifier nobody can guess: 128 random bits, as 32 hex digits (for handles a client
/// holds, such as an iteration's id, that must not be reachable by counting).
///
/// # Errors
/// If the system's random source fails.
pub fn unguessable_id() -> Result<String, CredentialError> {
    let mut bytes = [0u8; 16];
    aws_lc_rs::rand::fill(&mut bytes)
        .map_err(|_| CredentialError::Hashing("no random bytes".to_owned()))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

impl ScramCredential {
    /// Derives the credential of `password` with a fresh salt.
    ///
    /// # Errors
    /// If the system's random source fails.
    pub fn new(hash: ScramHash, password: &str) -> Result<Self, CredentialError> {
        let mut salt = vec![0; SCRAM_SALT_BYTES];
        aws_lc_rs::rand::fill(&mut salt)
            .map_err(|_| CredentialError::Hashing("no random bytes".to_owned()))?;
        let iterations = NonZeroU32::new(SCRAM_ITERATIONS_DEFAULT).unwrap_or(NonZeroU32::MIN);
        Ok(Self::derive(hash, password.as_bytes(), salt, iterations))
    }

    /// The credential of `password` with `salt` and `iterations`.
    #[must_use]
    pub fn derive(hash: ScramHash, password: &[u8], salt: Vec<u8>, iterations: NonZeroU32) -> Self {
        let salted = hash.salted_password(password, &salt, iterations);
        let client_key = hash.hmac_of(&salted, b"Client Key");
        Self {
            hash,
            iterations,
            stored_key: hash.hash(&client_key),
            server_key: hash.hmac_of(&salted, b"Server Key"),
            salt,
        }
    }

    /// Whether `client_key` (a SCRAM client's proof XOR its signature) is this user's: its
    /// hash is `StoredKey`, compared in constant time.
    #[must_use]
    pub fn matches_client_key(&self, client_key: &[u8]) -> bool {
        equal_in_constant_time(&self.hash.hash(client_key), &self.stored_key)
    }
}

impl fmt::Display for ScramCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}${}:{}${}:{}",
            self.hash.mechanism(),
            self.iterations,
            BASE64.encode(&self.salt),
            BASE64.encode(&self.stored_key),
            BASE64.encode(&self.server_key)
        )
    }
}

impl FromStr for ScramCredential {
    type Err = CredentialError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        const WHAT: &str = "SCRAM credential";
        let mut parts = text.split('$');
        let (Some(mechanism), Some(salting), Some(keys), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(malformed(
                WHAT,
                "expected MECHANISM$ITERATIONS:SALT$STOREDKEY:SERVERKEY",
            ));
        };
        let hash = ScramHash::of_mechanism(mechanism)
            .ok_or_else(|| malformed(WHAT, format!("unknown mechanism `{mechanism}`")))?;
        let (iterations, salt) = salting
            .split_once(':')
            .ok_or_else(|| malformed(WHAT, "expected ITERATIONS:SALT"))?;
        let iterations: u32 = iterations
            .parse()
            .map_err(|_| malformed(WHAT, format!("iteration count `{iterations}`")))?;
        if iterations < SCRAM_ITERATIONS_MIN {
            return Err(malformed(
                WHAT,
                format!("{iterations} iterations, fewer than {SCRAM_ITERATIONS_MIN}"),
            ));
        }
        let (stored, server) = keys
            .split_once(':')
            .ok_or_else(|| malformed(WHAT, "expected STOREDKEY:SERVERKEY"))?;
        let decode = |field: &str, what: &str| {
            BASE64
                .decode(field)
                .map_err(|e| malformed(WHAT, format!("{what}: {e}")))
        };
        let credential = Self {
            hash,
            iterations: NonZeroU32::new(iterations).unwrap_or(NonZeroU32::MIN),
            salt: decode(salt, "salt")?,
            stored_key: decode(stored, "StoredKey")?,
            server_key: decode(server, "ServerKey")?,
        };
        if credential.stored_key.len() != hash.output_len()
            || credential.server_key.len() != hash.output_len()
        {
            return Err(malformed(WHAT, "keys of the wrong length for the hash"));
        }
        if credential.salt.is_empty() {
            return Err(malformed(WHAT, "empty salt"));
        }
        Ok(credential)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves RFC 7677's SCRAM-SHA-256 test vector: password "pencil", its salt and 4096
    // iterations give the server signature of the RFC's exchange.
    #[test]
    fn scram_sha_256_matches_rfc_7677() {
        let salt = BASE64
            .decode("W22ZaJ0SNY7soEsUEjb6gQ==")
            .unwrap_or_else(|e| panic!("{e}"));
        let credential = ScramCredential::derive(
            ScramHash::Sha256,
            b"pencil",
            salt,
            NonZeroU32::new(4096).unwrap_or(NonZeroU32::MIN),
        );
        let auth_message = "n=user,r=rOprNGfwEbeRWgbNEkqO,\
             r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,\
             c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
        let signature = ScramHash::Sha256.hmac_of(&credential.server_key, auth_message.as_bytes());
        assert_eq!(
            BASE64.encode(signature),
            "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
        let text = credential.to_string();
        assert!(text.starts_with("SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==$"));
        assert_eq!(text.parse::<ScramCredential>(), Ok(credential));
    }

    // Proves malformed SCRAM credentials are refused with a reason, never taken.
    #[test]
    fn malformed_scram_credentials_are_refused() {
        let good = ScramCredential::new(ScramHash::Sha512, "secret")
            .unwrap_or_else(|e| panic!("{e}"))
            .to_string();
        assert!(good.parse::<ScramCredential>().is_ok());
        for bad in [
            "",
            "SCRAM-SHA-1$4096:c2FsdA==$a:b",
            "SCRAM-SHA-256$10:c2FsdA==$a:b",
            "SCRAM-SHA-256$4096:c2FsdA==$AAAA:AAAA",
            "SCRAM-SHA-256$4096:!!$a:b",
            "SCRAM-SHA-256$x:c2FsdA==$a:b",
            &good.replace('$', "#"),
        ] {
            assert!(bad.parse::<ScramCredential>().is_err(), "{bad}");
        }
    }

    // Proves a password hash verifies its password only, survives its text form, and that
    // other algorithms' hashes are refused.
    #[test]
    fn password_hashes_verify_only_their_password() {
        let hash = PasswordHash::new("correct horse").unwrap_or_else(|e| panic!("{e}"));
        assert!(hash.verify(b"correct horse"));
        assert!(!hash.verify(b"correct horsf"));
        let again: PasswordHash = hash.as_str().parse().unwrap_or_else(|e| panic!("{e}"));
        assert!(again.verify(b"correct horse"));
        assert!("plaintext".parse::<PasswordHash>().is_err());
        assert!(
            "$argon2i$v=19$m=16,t=2,p=1$c29tZXNhbHQ$iWh06vD8Fy27wf9npn6FXWiCX4K6pW6Ue1Bnzz07Z8A"
                .parse::<PasswordHash>()
                .is_err()
        );
    }
}
