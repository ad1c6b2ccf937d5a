//! Feeds arbitrary bytes to the acceptor's side of the cluster handshake, as a peer that
//! does not know the secret would send them: the challenge reader, the identity length, the
//! code check and the identity decoder, and to the datagram tag check.
//!
//! Checks: no panic; nothing is accepted without the right code (arbitrary bytes never pass
//! as an answer made with the secret); an identity that decodes encodes back to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_cluster::handshake::{self, Identity, Secret};

fuzz_target!(|data: &[u8]| {
    let secret = Secret::new(b"fuzz-secret".to_vec());
    if let Some(challenge) = data.first_chunk::<{ handshake::CHALLENGE_BYTES }>() {
        let _ = handshake::read_challenge(challenge);
    }
    let _ = handshake::open_datagram(&secret, data);
    if let Ok(identity) = Identity::decode(data) {
        assert_eq!(identity.encode(), data);
    }
    // An answer: nonce, length, identity, code.
    let Some((nonce, rest)) = data.split_first_chunk::<{ handshake::NONCE_BYTES }>() else {
        return;
    };
    let Some((len, rest)) = rest.split_first_chunk::<2>() else {
        return;
    };
    let Ok(len) = handshake::identity_len(*len) else {
        return;
    };
    if rest.len() < len + handshake::CODE_BYTES {
        return;
    }
    let (identity, rest) = rest.split_at(len);
    let Some(code) = rest.first_chunk::<{ handshake::CODE_BYTES }>() else {
        return;
    };
    let challenge = [7u8; handshake::NONCE_BYTES];
    assert!(handshake::check_answer(&secret, &challenge, nonce, identity, code).is_err());
});
