//! How two nodes prove to each other, when a cluster connection opens, that they belong to
//! the same cluster and which process each of them is — before either decodes anything else
//! the other sends.
//!
//! Both know the cluster secret; neither sends it. The node that accepted the connection
//! sends a challenge (a random nonce); the node that opened it answers with its own nonce,
//! its identity and an HMAC-SHA256, keyed by the secret, over both nonces and that identity;
//! the acceptor, once the code checks out, answers the same way for itself. A process that
//! does not know the secret gets no further than the challenge, and a code cannot be
//! replayed on another connection (each side's nonce is in the other's code).
//!
//! The identity is the node's name and its *incarnation*: the consensus id of this start of
//! the process. A process restarted under the same name is a new incarnation, so a peer
//! that expects the old one refuses the connection instead of sending it what was meant
//! for its predecessor.
//!
//! The messages (all lengths big-endian):
//! ```text
//! challenge  acceptor → opener   "WEFT" | version (1) | nonce (32)
//! answer     opener → acceptor   nonce (32) | identity length (2) | identity | code (32)
//! reply      acceptor → opener   identity length (2) | identity | code (32)
//! identity                       incarnation (8) | name (UTF-8)
//! ```
//! This module only builds and checks messages; the server does the reading and writing.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use thiserror::Error;

/// The first bytes of a challenge.
pub const MAGIC: &[u8; 4] = b"WEFT";
/// The handshake's version.
pub const VERSION: u8 = 1;
/// Bytes of a nonce.
pub const NONCE_BYTES: usize = 32;
/// Bytes of an authentication code.
pub const CODE_BYTES: usize = 32;
/// Bytes of a challenge.
pub const CHALLENGE_BYTES: usize = MAGIC.len() + 1 + NONCE_BYTES;
/// The longest identity accepted (a name of up to 255 bytes and its incarnation, with room
/// to spare); a longer announced length ends the handshake before anything is read.
pub const IDENTITY_BYTES_MAX: usize = 512;

/// Which side of the connection computes a code (each side's code is bound to its role, so
/// one side's code is never valid as the other's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Opener,
    Acceptor,
}

/// A node as it presents itself on a cluster connection.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Identity {
    /// Its name (the member id).
    pub name: String,
    /// This start of the process (its consensus id).
    pub incarnation: u64,
}

impl Identity {
    /// The identity's bytes.
    #[must_use]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + self.name.len());
        out.extend_from_slice(&self.incarnation.to_be_bytes());
        out.extend_from_slice(self.name.as_bytes());
        out
    }

    /// Reads an identity's bytes.
    ///
    /// # Errors
    /// [`HandshakeError::Malformed`] when they are not one.
    pub fn decode(bytes: &[u8]) -> Result<Self, HandshakeError> {
        let (incarnation, name) = bytes
            .split_first_chunk::<8>()
            .ok_or(HandshakeError::Malformed("identity too short"))?;
        let name = std::str::from_utf8(name)
            .map_err(|_| HandshakeError::Malformed("node name is not UTF-8"))?;
        Ok(Self {
            name: name.to_owned(),
            incarnation: u64::from_be_bytes(*incarnation),
        })
    }
}

/// The cluster secret: the key of every code. Without a configured secret it is empty —
/// connections still exchange identities, but anyone can make them.
#[derive(Clone, Default)]
pub struct Secret(Vec<u8>);

impl Secret {
    /// A secret of these bytes.
    #[must_use]
    pub fn new(bytes: impl Into<Vec<u8>>) -> Self {
        Self(bytes.into())
    }

    /// Whether no secret was configured.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn code(&self, role: Role, theirs: &[u8], mine: &[u8], identity: &[u8]) -> Hmac<Sha256> {
        // HMAC takes keys of any length, the empty one included.
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC accepts keys of any length"));
        mac.update(match role {
            Role::Opener => b"weft-cluster-opener",
            Role::Acceptor => b"weft-cluster-acceptor",
        });
        mac.update(theirs);
        mac.update(mine);
        mac.update(&(identity.len() as u64).to_be_bytes());
        mac.update(identity);
        mac
    }
}

impl Secret {
    fn datagram_code(&self, datagram: &[u8]) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC accepts keys of any length"));
        mac.update(b"weft-cluster-datagram");
        mac.update(datagram);
        mac
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the secret itself.
        f.debug_struct("Secret")
            .field("configured", &!self.is_empty())
            .finish()
    }
}

/// Bytes of the tag a membership datagram carries after its body.
pub const DATAGRAM_TAG_BYTES: usize = 16;

/// `datagram` followed by its tag: an HMAC-SHA256 of it keyed by the cluster secret,
/// truncated to [`DATAGRAM_TAG_BYTES`], so that a process without the secret cannot make
/// members believe a node joined, left or is suspect.
#[must_use]
pub fn seal_datagram(secret: &Secret, datagram: &[u8]) -> Vec<u8> {
    let tag = secret.datagram_code(datagram).finalize().into_bytes();
    let mut out = Vec::with_capacity(datagram.len() + DATAGRAM_TAG_BYTES);
    out.extend_from_slice(datagram);
    out.extend_from_slice(&tag[..DATAGRAM_TAG_BYTES]);
    out
}

/// The body of a sealed datagram, if its tag is right.
#[must_use]
pub fn open_datagram<'a>(secret: &Secret, sealed: &'a [u8]) -> Option<&'a [u8]> {
    let body_len = sealed.len().checked_sub(DATAGRAM_TAG_BYTES)?;
    let (body, tag) = sealed.split_at(body_len);
    secret
        .datagram_code(body)
        .verify_truncated_left(tag)
        .ok()
        .map(|()| body)
}

/// Why a handshake failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HandshakeError {
    /// The peer does not speak this handshake (or another version of it).
    #[error("not a Weft cluster handshake")]
    NotWeft,
    /// A length or field is out of bounds.
    #[error("malformed handshake: {0}")]
    Malformed(&'static str),
    /// The peer's code is wrong: it does not know the cluster secret.
    #[error("the peer does not know the cluster secret")]
    BadCode,
}

/// A fresh random nonce.
#[must_use]
pub fn nonce() -> [u8; NONCE_BYTES] {
    rand::random()
}

/// The challenge the acceptor sends first.
#[must_use]
pub fn challenge(nonce: &[u8; NONCE_BYTES]) -> [u8; CHALLENGE_BYTES] {
    let mut out = [0; CHALLENGE_BYTES];
    out[..MAGIC.len()].copy_from_slice(MAGIC);
    out[MAGIC.len()] = VERSION;
    out[MAGIC.len() + 1..].copy_from_slice(nonce);
    out
}

/// The acceptor's nonce, read from a challenge.
///
/// # Errors
/// [`HandshakeError::NotWeft`] when it is not a challenge of this version.
pub fn read_challenge(bytes: &[u8; CHALLENGE_BYTES]) -> Result<[u8; NONCE_BYTES], HandshakeError> {
    if &bytes[..MAGIC.len()] != MAGIC || bytes[MAGIC.len()] != VERSION {
        return Err(HandshakeError::NotWeft);
    }
    let mut nonce = [0; NONCE_BYTES];
    nonce.copy_from_slice(&bytes[MAGIC.len() + 1..]);
    Ok(nonce)
}

/// The opener's answer to a challenge: its nonce, identity and code.
#[must_use]
pub fn answer(
    secret: &Secret,
    theirs: &[u8; NONCE_BYTES],
    mine: &[u8; NONCE_BYTES],
    identity: &Identity,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(NONCE_BYTES);
    out.extend_from_slice(mine);
    prove(&mut out, secret, Role::Opener, theirs, mine, identity);
    out
}

/// The acceptor's reply once the answer checked out: its identity and code.
#[must_use]
pub fn reply(
    secret: &Secret,
    theirs: &[u8; NONCE_BYTES],
    mine: &[u8; NONCE_BYTES],
    identity: &Identity,
) -> Vec<u8> {
    let mut out = Vec::new();
    prove(&mut out, secret, Role::Acceptor, theirs, mine, identity);
    out
}

/// Appends `identity` and the code that proves it for `role` (the part of an answer or a
/// reply after the opener's nonce).
fn prove(
    out: &mut Vec<u8>,
    secret: &Secret,
    role: Role,
    theirs: &[u8; NONCE_BYTES],
    mine: &[u8; NONCE_BYTES],
    identity: &Identity,
) {
    let identity = identity.encode();
    let code = secret
        .code(role, theirs, mine, &identity)
        .finalize()
        .into_bytes();
    push_identity(out, &identity);
    out.extend_from_slice(&code);
}

fn push_identity(out: &mut Vec<u8>, identity: &[u8]) {
    let len = u16::try_from(identity.len()).unwrap_or(u16::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(identity);
}

/// The identity length a message announces (read before the identity itself).
///
/// # Errors
/// [`HandshakeError::Malformed`] past [`IDENTITY_BYTES_MAX`] or when empty.
pub fn identity_len(bytes: [u8; 2]) -> Result<usize, HandshakeError> {
    let len = usize::from(u16::from_be_bytes(bytes));
    if len > IDENTITY_BYTES_MAX {
        return Err(HandshakeError::Malformed("identity too long"));
    }
    if len < 8 {
        return Err(HandshakeError::Malformed("identity too short"));
    }
    Ok(len)
}

/// Checks the code of an opener's answer (`identity` as received, `code` as received) and
/// only then decodes the identity.
///
/// # Errors
/// [`HandshakeError::BadCode`] when the code is wrong; [`HandshakeError::Malformed`] when
/// the identity, though authentic, does not decode.
pub fn check_answer(
    secret: &Secret,
    challenge_nonce: &[u8; NONCE_BYTES],
    their_nonce: &[u8; NONCE_BYTES],
    identity: &[u8],
    code: &[u8; CODE_BYTES],
) -> Result<Identity, HandshakeError> {
    check(
        secret,
        Role::Opener,
        challenge_nonce,
        their_nonce,
        identity,
        code,
    )
}

/// Checks the code of an acceptor's reply and only then decodes its identity.
///
/// # Errors
/// As [`check_answer`].
pub fn check_reply(
    secret: &Secret,
    my_nonce: &[u8; NONCE_BYTES],
    challenge_nonce: &[u8; NONCE_BYTES],
    identity: &[u8],
    code: &[u8; CODE_BYTES],
) -> Result<Identity, HandshakeError> {
    check(
        secret,
        Role::Acceptor,
        my_nonce,
        challenge_nonce,
        identity,
        code,
    )
}

/// Checks `code` as `role`'s proof of `identity` (the nonces in the order that role's code
/// takes them), then decodes the identity.
fn check(
    secret: &Secret,
    role: Role,
    theirs: &[u8; NONCE_BYTES],
    mine: &[u8; NONCE_BYTES],
    identity: &[u8],
    code: &[u8; CODE_BYTES],
) -> Result<Identity, HandshakeError> {
    secret
        .code(role, theirs, mine, identity)
        .verify_slice(code)
        .map_err(|_| HandshakeError::BadCode)?;
    Identity::decode(identity)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split_answer(bytes: &[u8]) -> ([u8; NONCE_BYTES], Vec<u8>, [u8; CODE_BYTES]) {
        let mut nonce = [0; NONCE_BYTES];
        nonce.copy_from_slice(&bytes[..NONCE_BYTES]);
        let len = identity_len([bytes[NONCE_BYTES], bytes[NONCE_BYTES + 1]]).unwrap_or(0);
        let identity = bytes[NONCE_BYTES + 2..NONCE_BYTES + 2 + len].to_vec();
        let mut code = [0; CODE_BYTES];
        code.copy_from_slice(&bytes[NONCE_BYTES + 2 + len..]);
        (nonce, identity, code)
    }

    fn split_reply(bytes: &[u8]) -> (Vec<u8>, [u8; CODE_BYTES]) {
        let len = identity_len([bytes[0], bytes[1]]).unwrap_or(0);
        let identity = bytes[2..2 + len].to_vec();
        let mut code = [0; CODE_BYTES];
        code.copy_from_slice(&bytes[2 + len..]);
        (identity, code)
    }

    // Proves two nodes with the same secret learn each other's identity, and that a wrong
    // secret, a replayed answer or a tampered identity is refused.
    #[test]
    fn both_sides_prove_themselves_and_impostors_are_refused() {
        let secret = Secret::new(b"s3cret".to_vec());
        let opener = Identity {
            name: "node-a".into(),
            incarnation: 7,
        };
        let acceptor = Identity {
            name: "node-b".into(),
            incarnation: 9,
        };
        let challenge_nonce = nonce();
        let sent = challenge(&challenge_nonce);
        let theirs = read_challenge(&sent).ok();
        assert_eq!(theirs, Some(challenge_nonce));
        let opener_nonce = nonce();
        let message = answer(&secret, &challenge_nonce, &opener_nonce, &opener);
        let (nonce_read, identity, code) = split_answer(&message);
        assert_eq!(
            check_answer(&secret, &challenge_nonce, &nonce_read, &identity, &code),
            Ok(opener.clone())
        );
        // Another secret: refused.
        let other = Secret::new(b"other".to_vec());
        assert_eq!(
            check_answer(&other, &challenge_nonce, &nonce_read, &identity, &code),
            Err(HandshakeError::BadCode)
        );
        // Replayed on a connection with another challenge: refused.
        assert_eq!(
            check_answer(&secret, &nonce(), &nonce_read, &identity, &code),
            Err(HandshakeError::BadCode)
        );
        // Another incarnation claimed with the same code: refused.
        let mut forged = identity.clone();
        forged[7] ^= 1;
        assert_eq!(
            check_answer(&secret, &challenge_nonce, &nonce_read, &forged, &code),
            Err(HandshakeError::BadCode)
        );
        // The acceptor's reply, and the opener's code never passes as the acceptor's.
        let message = reply(&secret, &opener_nonce, &challenge_nonce, &acceptor);
        let (identity, code) = split_reply(&message);
        assert_eq!(
            check_reply(&secret, &opener_nonce, &challenge_nonce, &identity, &code),
            Ok(acceptor)
        );
        let (_, opener_identity, opener_code) =
            split_answer(&answer(&secret, &challenge_nonce, &opener_nonce, &opener));
        assert!(
            check_reply(
                &secret,
                &opener_nonce,
                &challenge_nonce,
                &opener_identity,
                &opener_code
            )
            .is_err()
        );
    }

    // Proves a sealed datagram opens with the same secret only, and not once changed.
    #[test]
    fn datagrams_open_only_with_the_secret() {
        let secret = Secret::new(b"s".to_vec());
        let sealed = seal_datagram(&secret, b"ping");
        assert_eq!(open_datagram(&secret, &sealed), Some(&b"ping"[..]));
        assert_eq!(open_datagram(&Secret::new(b"t".to_vec()), &sealed), None);
        let mut changed = sealed.clone();
        changed[0] ^= 1;
        assert_eq!(open_datagram(&secret, &changed), None);
        assert_eq!(open_datagram(&secret, &sealed[..3]), None);
    }

    // Proves bad lengths and foreign first bytes are refused before anything is decoded.
    #[test]
    fn bad_lengths_and_foreign_peers_are_refused() {
        assert!(identity_len(u16::MAX.to_be_bytes()).is_err());
        assert!(identity_len(3u16.to_be_bytes()).is_err());
        assert_eq!(identity_len(20u16.to_be_bytes()), Ok(20));
        let mut wrong = challenge(&nonce());
        wrong[0] = b'*';
        assert_eq!(read_challenge(&wrong), Err(HandshakeError::NotWeft));
        assert!(Identity::decode(&[1, 2, 3]).is_err());
        assert!(Identity::decode(&[0, 0, 0, 0, 0, 0, 0, 1, 0xff]).is_err());
        let empty = Secret::default();
        assert!(empty.is_empty());
        assert_eq!(
            format!("{:?}", Secret::new(b"x".to_vec())),
            "Secret { configured: true }"
        );
    }
}
