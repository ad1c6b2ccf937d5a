//! Server-side SASL exchanges (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER) fed
//! arbitrary client messages: the first byte picks the mechanism, the rest is split at 0xFF
//! bytes into messages. OAUTHBEARER's tokens are checked against a JWKS holding a public key
//! whose private key nobody has (the P-256 generator point).
//!
//! Checks: no panic (reading whose credential a message presents, nor stepping); an exchange that failed or ended refuses every later message; nothing
//! authenticates without the password or a token the key signed (the fuzzer has neither).
#![no_main]

use std::sync::{Arc, LazyLock};

use libfuzzer_sys::fuzz_target;
use weft_security::sasl::{Exchange, Step};
use weft_security::tokens::{TokenSettings, Tokens};
use weft_security::users::{Realm, User, Users};

static REALM: LazyLock<Realm> = LazyLock::new(|| {
    let mut users = Users::default();
    if let Ok(user) = User::new("user", "a password no fuzzer guesses 7f3a", ["app".to_owned()]) {
        users.insert(user);
    }
    Realm::of(users)
});

/// The JWKS: one ES256 key, the curve's generator as its public point.
const JWKS: &str = r#"{"keys":[{"kty":"EC","crv":"P-256","use":"sig","alg":"ES256","kid":"k","x":"axfR8uEsQkf4vOblY6RA8ncDfYEt6zOg9KE5RdiYwpY","y":"T-NC4v4af5uO5-tKfA-eFivOM1drMV7Oy7ZAaDe_UfU"}]}"#;

static TOKENS: LazyLock<Option<Arc<Tokens>>> = LazyLock::new(|| {
    let path = std::env::temp_dir().join(format!("weft-fuzz-jwks-{}.json", std::process::id()));
    std::fs::write(&path, JWKS).ok()?;
    let tokens = Tokens::open(TokenSettings {
        jwks_file: path,
        issuer: None,
        audience: None,
        user_claim: "preferred_username".to_owned(),
        groups_claim: "groups".to_owned(),
    })
    .ok()?;
    Some(Arc::new(tokens))
});

fuzz_target!(|data: &[u8]| {
    let Some((&choice, rest)) = data.split_first() else {
        return;
    };
    let exchange = match choice % 4 {
        3 => TOKENS.as_ref().map(|tokens| Exchange::start_bearer(Arc::clone(tokens))),
        pick => {
            let mechanism = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"][usize::from(pick)];
            Exchange::start(mechanism).ok()
        }
    };
    let Some(mut exchange) = exchange else {
        return;
    };
    let mut over = false;
    for message in rest.split(|&b| b == 0xff) {
        // Whose credential the step would check (the throttle's key): any message is read
        // without a panic.
        let _ = exchange.checks(message);
        match exchange.step(&REALM, message) {
            Ok(Step::Continue(_)) => assert!(!over, "answered after the end"),
            Ok(Step::Done { .. }) => panic!("authenticated without the password or a signed token"),
            Err(_) => over = true,
        }
    }
});
