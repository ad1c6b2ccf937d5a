//! Server-side SASL exchanges (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) fed arbitrary client
//! messages: the first byte picks the mechanism, the rest is split at 0xFF bytes into messages.
//!
//! Checks: no panic; an exchange that failed or ended refuses every later message; nothing
//! authenticates without the password (the fuzzer does not know it).
#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use weft_security::sasl::{Exchange, Step};
use weft_security::users::{Realm, User, Users};

static REALM: LazyLock<Realm> = LazyLock::new(|| {
    let mut users = Users::default();
    if let Ok(user) = User::new("user", "a password no fuzzer guesses 7f3a", ["app".to_owned()]) {
        users.insert(user);
    }
    Realm::of(users)
});

fuzz_target!(|data: &[u8]| {
    let Some((&choice, rest)) = data.split_first() else {
        return;
    };
    let mechanism = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"][usize::from(choice % 3)];
    let Ok(mut exchange) = Exchange::start(mechanism) else {
        return;
    };
    let mut over = false;
    for message in rest.split(|&b| b == 0xff) {
        match exchange.step(&REALM, message) {
            Ok(Step::Continue(_)) => assert!(!over, "answered after the end"),
            Ok(Step::Done { .. }) => panic!("authenticated without the password"),
            Err(_) => over = true,
        }
    }
});
