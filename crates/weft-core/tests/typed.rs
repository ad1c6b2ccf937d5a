//! The typed view: codecs round-trip, and every typed operation maps onto the byte cache.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::default_cache;
use serde::{Deserialize, Serialize};
use weft_core::{Codec, Json, TypedCache, TypedError, WriteOptions};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Account {
    owner: String,
    balance: i64,
    tags: Vec<String>,
}

fn account(owner: &str, balance: i64) -> Json<Account> {
    Json(Account {
        owner: owner.to_owned(),
        balance,
        tags: vec!["a".to_owned()],
    })
}

// Proves the built-in codecs round-trip and that stored bytes are the plain encodings.
#[test]
fn codecs_round_trip() {
    let text = "héllo".to_owned();
    assert_eq!(String::decode(&text.encode().unwrap()).unwrap(), text);
    let raw = vec![0u8, 255, 7];
    assert_eq!(Vec::<u8>::decode(&raw.encode().unwrap()).unwrap(), raw);
    let bytes = Bytes::from_static(b"xyz");
    assert_eq!(Bytes::decode(&bytes.encode().unwrap()).unwrap(), bytes);
    let value = account("ann", -5);
    assert_eq!(
        Json::<Account>::decode(&value.encode().unwrap()).unwrap(),
        value
    );
    assert!(String::decode(&[0xff, 0xfe]).is_err());
    assert!(Json::<Account>::decode(b"{not json").is_err());
}

// Proves typed put/get/replace/put_if_absent/remove/contains/entries behave as the byte API.
#[test]
fn typed_operations() {
    let (_m, cache, _clock) = default_cache();
    let typed: TypedCache<String, Json<Account>> = TypedCache::new(cache.clone());
    let ann = "ann".to_owned();
    assert_eq!(typed.get(&ann).unwrap(), None);
    assert_eq!(typed.put(&ann, &account("ann", 10)).unwrap(), None);
    assert_eq!(
        typed.put(&ann, &account("ann", 20)).unwrap(),
        Some(account("ann", 10))
    );
    assert_eq!(typed.get(&ann).unwrap(), Some(account("ann", 20)));
    // Stored as JSON, readable by byte-level users.
    let raw = cache.get(b"ann").unwrap().unwrap();
    assert_eq!(
        serde_json::from_slice::<Account>(&raw).unwrap(),
        account("ann", 20).0
    );

    assert_eq!(
        typed.put_if_absent(&ann, &account("ann", 30)).unwrap(),
        Some(account("ann", 20))
    );
    let bob = "bob".to_owned();
    assert_eq!(typed.replace(&bob, &account("bob", 1)).unwrap(), None);
    assert!(!typed.contains(&bob).unwrap());
    assert_eq!(typed.put_if_absent(&bob, &account("bob", 1)).unwrap(), None);
    assert_eq!(
        typed.replace(&bob, &account("bob", 2)).unwrap(),
        Some(account("bob", 1))
    );
    assert_eq!(typed.size().unwrap(), 2);
    let mut entries = typed.entries().unwrap();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        entries,
        vec![
            (ann.clone(), account("ann", 20)),
            (bob.clone(), account("bob", 2))
        ]
    );
    assert_eq!(typed.remove(&bob).unwrap(), Some(account("bob", 2)));
    assert!(!typed.contains(&bob).unwrap());
    assert_eq!(typed.raw().name(), "test");
}

// Proves typed writes with options keep their expiration and metadata is reported.
#[test]
fn typed_metadata_and_options() {
    let (_m, cache, clock) = default_cache();
    let typed: TypedCache<String, String> = TypedCache::new(cache);
    let k = "k".to_owned();
    typed
        .put_with(
            &k,
            &"v".to_owned(),
            &WriteOptions::default().lifespan(Duration::from_millis(100)),
        )
        .unwrap();
    let (value, meta) = typed.get_with_metadata(&k).unwrap().unwrap();
    assert_eq!(value, "v");
    assert_eq!(meta.lifespan_ms, Some(100));
    clock.advance_ms(101);
    assert_eq!(typed.get(&k).unwrap(), None);
    assert!(typed.get_with_metadata(&k).unwrap().is_none());
}

// Proves bytes that do not decode give a codec error, not a panic or a wrong value.
#[test]
fn undecodable_values_are_errors() {
    let (_m, cache, _clock) = default_cache();
    cache
        .put(b"bad", &[0xff, 0x00, 0xfe], &WriteOptions::default())
        .unwrap();
    let text: TypedCache<String, String> = TypedCache::new(cache.clone());
    assert!(matches!(
        text.get(&"bad".to_owned()),
        Err(TypedError::Codec(_))
    ));
    assert!(matches!(text.entries(), Err(TypedError::Codec(_))));
    let json: TypedCache<String, Json<Account>> = TypedCache::new(cache);
    assert!(matches!(
        json.get(&"bad".to_owned()),
        Err(TypedError::Codec(_))
    ));
}
