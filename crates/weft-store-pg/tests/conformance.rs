//! The store conformance suite against a real PostgreSQL, plus what only this store has
//! (connection failures, configuration, malformed rows, tables from an older Weft). The server is `WEFT_TEST_POSTGRES_URL`; without it
//! every test that needs one prints why it is skipped and passes (`.ci/run` sets it).

use std::io::Write;
use std::sync::Once;
use std::time::{Duration, Instant};

use weft_core::entry::StoredExpiration;
use weft_core::{CacheEntry, Payload, StoreConfig, StoreKind, Structure, StructureKind};
use weft_store::testing::{Case, Reopen};
use weft_store::{Store, StoreError};
use weft_store_pg::PgStore;

const URL_VARIABLE: &str = "WEFT_TEST_POSTGRES_URL";

fn server_url(test: &str) -> Option<String> {
    match std::env::var(URL_VARIABLE) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            // Straight to stderr, past the test harness's capture, and once per run, so the
            // skip is seen without drowning the output.
            static TOLD: Once = Once::new();
            TOLD.call_once(|| {
                let _ = writeln!(
                    std::io::stderr(),
                    "skipping the PostgreSQL store tests ({test} and the others): \
                     {URL_VARIABLE} is not set"
                );
            });
            None
        }
    }
}

/// A table name unique to this test and this process, under 63 bytes whatever the test's
/// name: tests of one run, and runs sharing a server, never see each other's rows.
fn table_for(test: &str) -> String {
    // FNV-1a: stable across runs, unlike the standard hasher.
    let hash = test.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    });
    let prefix: String = test.chars().take(24).collect();
    format!("weft_test_{prefix}_{hash:012x}_{}", std::process::id())
}

fn config(url: String, table: String) -> StoreConfig {
    StoreConfig {
        kind: StoreKind::Postgres,
        connection_url: Some(url),
        table: Some(table),
        pool_size: 2,
        ..StoreConfig::default()
    }
}

/// Drops the test's table when the test ends, passed or failed.
struct DropTable(StoreConfig);

impl Drop for DropTable {
    fn drop(&mut self) {
        match PgStore::open("conformance", &self.0) {
            Ok(store) => store.destroy(),
            Err(error) => eprintln!("could not drop the test table: {error}"),
        }
    }
}

fn with_store(case_name: &'static str, case: Case) {
    let Some(url) = server_url(case_name) else {
        return;
    };
    let config = config(url, table_for(case_name));
    let _drop_table = DropTable(config.clone());
    let open = |reopen: Reopen| -> Box<dyn Store> {
        if reopen == Reopen::Fresh {
            // A table left by an earlier run that died would not be empty.
            PgStore::open("conformance", &config)
                .expect("open the PostgreSQL store")
                .destroy();
        }
        Box::new(PgStore::open("conformance", &config).expect("open the PostgreSQL store"))
    };
    case(&open);
}

weft_store::store_conformance_tests!(with_store);

/// An unreachable server fails `open` within seconds, naming the server it tried.
#[test]
fn an_unreachable_server_fails_fast_with_a_clear_error() {
    let config = config(
        "postgres://weft@127.0.0.1:1/weft".to_owned(),
        "t".to_owned(),
    );
    let started = Instant::now();
    let error = PgStore::open("unreachable", &config).expect_err("nothing listens on port 1");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    match error {
        StoreError::Io { context, reason } => {
            assert_eq!(context, "connect to PostgreSQL at 127.0.0.1:1");
            assert!(
                reason.contains("error connecting to server"),
                "reason: {reason}"
            );
        }
        other => panic!("expected an I/O error, got {other:?}"),
    }
}

/// A store without a connection URL, or with an unsafe table name, is refused before any
/// connection is tried.
#[test]
fn bad_configuration_is_refused_before_connecting() {
    let missing_url = StoreConfig {
        kind: StoreKind::Postgres,
        ..StoreConfig::default()
    };
    let error = PgStore::open("c", &missing_url).expect_err("no URL");
    assert!(error.to_string().contains("no connection-url"), "{error}");
    let bad_table = config(
        "postgres://weft@127.0.0.1:1/weft".to_owned(),
        "x; DROP TABLE y".to_owned(),
    );
    let error = PgStore::open("c", &bad_table).expect_err("unsafe table name");
    assert!(error.to_string().contains("table"), "{error}");
}

/// The store reports what the configuration says: shared or not, read-only or not, and
/// always segmented and expiration-aware.
#[test]
fn characteristics_follow_the_configuration() {
    let test = "characteristics_follow_the_configuration";
    let Some(url) = server_url(test) else {
        return;
    };
    let config = config(url, table_for(test));
    let _drop_table = DropTable(config.clone());
    let store = PgStore::open("c", &config).expect("open");
    let plain = store.characteristics();
    assert!(!plain.shared && !plain.read_only && plain.segmented && plain.expiration_aware);
    store.stop().expect("stop");
    drop(store);
    let shared_read_only = StoreConfig {
        shared: true,
        read_only: true,
        ..config
    };
    let store = PgStore::open("c", &shared_read_only).expect("open read-only");
    let characteristics = store.characteristics();
    assert!(characteristics.shared && characteristics.read_only);
    assert!(matches!(store.clear(), Err(StoreError::ReadOnly)));
}

/// Every call works from a thread of another tokio runtime (the server's workers call the
/// store): nothing blocks on a runtime it is inside of, and dropping the store there is safe.
#[test]
fn calls_from_inside_another_runtime_work() {
    let test = "calls_from_inside_another_runtime_work";
    let Some(url) = server_url(test) else {
        return;
    };
    let config = config(url, table_for(test));
    let _drop_table = DropTable(config.clone());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let store = PgStore::open("c", &config).expect("open");
        let entry = CacheEntry::restored(b"k", b"v", StoredExpiration::IMMORTAL, 0, 1);
        let position = store.write(1, &entry).expect("write");
        store
            .wait_durable_async(position)
            .await
            .expect("wait_durable_async");
        store.wait_durable(position).expect("wait_durable");
        let loaded = store.load(1, b"k").expect("load").expect("present");
        assert_eq!(loaded.value(), b"v");
        assert_eq!(store.size(None).expect("size"), 1);
        let mut published = 0;
        store
            .publish(&[1], &mut |_| published += 1)
            .expect("publish");
        assert_eq!(published, 1);
        drop(store);
    });
}

/// Runs one SQL statement on the test server, beside the store.
fn execute_sql(url: &str, sql: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .expect("connect");
        let connection = tokio::spawn(connection);
        client.batch_execute(sql).await.expect("execute");
        drop(client);
        let _ = connection.await;
    });
}

/// A batch the database rejects fails its own waiters with the database's error, is not
/// visible afterwards, and the store goes on writing later batches.
#[test]
fn a_failed_batch_fails_its_waiters_and_the_store_goes_on() {
    let test = "a_failed_batch_fails_its_waiters_and_the_store_goes_on";
    let Some(url) = server_url(test) else {
        return;
    };
    let table = table_for(test);
    let config = config(url.clone(), table.clone());
    let _drop_table = DropTable(config.clone());
    let store = PgStore::open("c", &config).expect("open");
    execute_sql(
        &url,
        &format!("ALTER TABLE \"{table}\" ADD CONSTRAINT no_bad CHECK (value <> 'bad'::bytea)"),
    );
    let entry = |key: &[u8], value: &[u8]| {
        CacheEntry::restored(key, value, StoredExpiration::IMMORTAL, 0, 1)
    };
    let rejected = store.write(0, &entry(b"a", b"bad")).expect("submit");
    match store.wait_durable(rejected) {
        Err(StoreError::Io { context, reason }) => {
            assert!(context.contains(&table), "{context}");
            assert!(reason.contains("no_bad"), "{reason}");
        }
        other => panic!("expected the constraint violation, got {other:?}"),
    }
    assert!(store.load(0, b"a").expect("load").is_none());
    let accepted = store.write(0, &entry(b"b", b"good")).expect("submit");
    store.wait_durable(accepted).expect("a later batch commits");
    assert_eq!(
        store
            .load(0, b"b")
            .expect("load")
            .map(|e| e.value().to_vec()),
        Some(b"good".to_vec())
    );
    assert!(
        store.wait_durable(rejected).is_err(),
        "the failure is still reported afterwards"
    );
    store.stop().expect("stop: the last batch committed");
}

/// A publish callback may write and wait for durability even with a pool of one
/// connection: the writer has its own, so the publish holding one never starves it.
#[test]
fn a_publish_callback_may_write_and_wait() {
    let test = "a_publish_callback_may_write_and_wait";
    let Some(url) = server_url(test) else {
        return;
    };
    let config = StoreConfig {
        pool_size: 1,
        ..config(url, table_for(test))
    };
    let _drop_table = DropTable(config.clone());
    let store = PgStore::open("c", &config).expect("open");
    for i in 0..600u32 {
        let key = format!("k{i}");
        store
            .write(
                3,
                &CacheEntry::restored(key.as_bytes(), b"v", StoredExpiration::IMMORTAL, 0, 1),
            )
            .expect("write");
    }
    let started = Instant::now();
    let mut visited = 0;
    store
        .publish(&[3], &mut |entry| {
            visited += 1;
            let copy = [b"copy-", entry.key()].concat();
            let position = store
                .write(
                    4,
                    &CacheEntry::restored(&copy, b"v", StoredExpiration::IMMORTAL, 0, 2),
                )
                .expect("write from the callback");
            store
                .wait_durable(position)
                .expect("durable from the callback");
        })
        .expect("publish");
    assert_eq!(visited, 600);
    assert_eq!(store.size(Some(&[4])).expect("size"), 600);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
}

/// A row whose `form` says structure but whose value does not decode, or whose `form` is
/// unknown, fails the load and the publish with an error naming the table and the key; the
/// other rows still load.
#[test]
fn a_malformed_structure_row_is_an_error_naming_the_table() {
    let test = "a_malformed_structure_row_is_an_error_naming_the_table";
    let Some(url) = server_url(test) else {
        return;
    };
    let table = table_for(test);
    let config = config(url.clone(), table.clone());
    let _drop_table = DropTable(config.clone());
    let store = PgStore::open("c", &config).expect("open");
    let good = CacheEntry::restored(b"good", b"v", StoredExpiration::IMMORTAL, 0, 1);
    let position = store.write(3, &good).expect("write");
    store.wait_durable(position).expect("durable");
    execute_sql(
        &url,
        &format!(
            "INSERT INTO \"{table}\" (key, segment, value, version, last_used_ms, form) VALUES \
             ('bad-structure'::bytea, 3, '\\x02ff'::bytea, 2, 0, 1), \
             ('from-the-future'::bytea, 4, 'v'::bytea, 3, 0, 7)"
        ),
    );
    for (segment, key, what) in [
        (3, &b"bad-structure"[..], "not one"),
        (4, &b"from-the-future"[..], "form 7"),
    ] {
        match store.load(segment, key) {
            Err(StoreError::Io { context, reason }) => {
                assert_eq!(context, format!("load from PostgreSQL table {table}"));
                assert!(
                    reason.contains(&String::from_utf8_lossy(key).into_owned()),
                    "{reason}"
                );
                assert!(reason.contains(what), "{reason}");
            }
            other => panic!("expected an error for {key:?}, got {other:?}"),
        }
        match store.publish(&[segment], &mut |_| {}) {
            Err(StoreError::Io { context, .. }) => {
                assert_eq!(context, format!("publish from PostgreSQL table {table}"));
            }
            other => panic!("expected a publish error for {key:?}, got {other:?}"),
        }
    }
    let found = store.load(3, b"good").expect("load").expect("present");
    assert_eq!(found.value(), b"v");
}

/// A table an older Weft created (no `flags`, no `form`) keeps working: a read-only store
/// reads its rows as plain bytes, a writable store adds the two columns and then keeps
/// client flags and structures in it, and its old rows still read as plain bytes.
#[test]
fn a_table_from_an_older_weft_gains_the_new_columns() {
    let test = "a_table_from_an_older_weft_gains_the_new_columns";
    let Some(url) = server_url(test) else {
        return;
    };
    let table = table_for(test);
    let config = config(url.clone(), table.clone());
    let _drop_table = DropTable(config.clone());
    execute_sql(
        &url,
        &format!(
            "DROP TABLE IF EXISTS \"{table}\"; \
             CREATE TABLE \"{table}\" (key bytea PRIMARY KEY, segment integer NOT NULL, \
             value bytea NOT NULL, version bigint NOT NULL, created_ms bigint NULL, \
             lifespan_ms bigint NULL, max_idle_ms bigint NULL, last_used_ms bigint NOT NULL, \
             expires_at_ms bigint NULL); \
             INSERT INTO \"{table}\" (key, segment, value, version, last_used_ms) \
             VALUES ('old'::bytea, 5, 'old value'::bytea, 7, 0)"
        ),
    );
    let old = CacheEntry::restored(b"old", b"old value", StoredExpiration::IMMORTAL, 0, 7);
    let read_only = StoreConfig {
        read_only: true,
        ..config.clone()
    };
    {
        let store = PgStore::open("c", &read_only).expect("open read-only over the old table");
        let found = store.load(5, b"old").expect("load").expect("present");
        weft_store::testing::expect_same_entry(&found, &old);
        let mut published = 0;
        store
            .publish(&[5], &mut |found| {
                weft_store::testing::expect_same_entry(&found, &old);
                published += 1;
            })
            .expect("publish");
        assert_eq!(published, 1);
    }
    let flagged = CacheEntry::restored_payload(
        b"flagged",
        Payload::Bytes(b"f", 0xfeed_f00d),
        StoredExpiration::IMMORTAL,
        0,
        8,
    );
    let structure = weft_store::testing::sample_structures().swap_remove(0);
    let hash =
        weft_store::testing::structure_entry(b"hash", structure, StoredExpiration::IMMORTAL, 0, 9);
    {
        let store = PgStore::open("c", &config).expect("open writable over the old table");
        let found = store.load(5, b"old").expect("load").expect("present");
        weft_store::testing::expect_same_entry(&found, &old);
        store.write(5, &flagged).expect("write");
        let position = store.write(5, &hash).expect("write");
        store.wait_durable(position).expect("durable");
        store.stop().expect("stop");
    }
    // Read-only again: now with the columns, so flags and structures come back.
    let store = PgStore::open("c", &read_only).expect("reopen read-only");
    for written in [&old, &flagged, &hash] {
        let found = store
            .load(5, written.key())
            .expect("load")
            .expect("present");
        weft_store::testing::expect_same_entry(&found, written);
    }
}

/// A structure with no element left is not a value (Redis deletes such keys): writing one
/// leaves no row, and replaces the row of an earlier write of the key.
#[test]
fn an_empty_structure_leaves_no_row() {
    let test = "an_empty_structure_leaves_no_row";
    let Some(url) = server_url(test) else {
        return;
    };
    let config = config(url, table_for(test));
    let _drop_table = DropTable(config.clone());
    let store = PgStore::open("c", &config).expect("open");
    let list = weft_store::testing::sample_structures().swap_remove(1);
    let full =
        weft_store::testing::structure_entry(b"list", list, StoredExpiration::IMMORTAL, 0, 1);
    let position = store.write(6, &full).expect("write");
    store.wait_durable(position).expect("durable");
    assert_eq!(store.size(None).expect("size"), 1);
    let empty = weft_store::testing::structure_entry(
        b"list",
        Structure::empty(StructureKind::List),
        StoredExpiration::IMMORTAL,
        0,
        2,
    );
    let position = store.write(6, &empty).expect("write");
    store.wait_durable(position).expect("durable");
    assert_eq!(store.size(None).expect("size"), 0);
    assert!(store.load(6, b"list").expect("load").is_none());
}
