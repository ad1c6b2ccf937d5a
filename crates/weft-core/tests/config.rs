//! Configuration: TOML and JSON round trips of the manager and cache models, errors that name
//! the file and line, and what the manager refuses.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use weft_core::config::{from_toml, parse_duration, parse_size};
use weft_core::{CacheConfig, CacheManager, ManagerConfig, ManagerError, MemoryConfig, WhenFull};

fn several_caches() -> ManagerConfig {
    let mut caches = BTreeMap::new();
    caches.insert(
        "default".to_owned(),
        CacheConfig {
            resp_database: Some(0),
            ..CacheConfig::default()
        },
    );
    let mut sessions = CacheConfig {
        segments: 64,
        statistics: false,
        resp_database: Some(1),
        ..CacheConfig::default()
    };
    sessions.expiration.lifespan = Some(Duration::from_secs(1_800));
    sessions.expiration.max_idle = Some(Duration::from_millis(250));
    sessions.expiration.interval = Duration::from_secs(5);
    sessions.memory = MemoryConfig {
        max_count: Some(10_000),
        max_size_bytes: None,
        when_full: WhenFull::Remove,
    };
    caches.insert("sessions".to_owned(), sessions);
    let mut blobs = CacheConfig {
        segments: 1,
        ..CacheConfig::default()
    };
    blobs.memory.max_size_bytes = Some(64 << 20);
    blobs.memory.when_full = WhenFull::Exception;
    caches.insert("blobs".to_owned(), blobs);
    ManagerConfig { caches }
}

// Proves a manager configuration with several caches survives a TOML round trip unchanged.
#[test]
fn manager_config_toml_round_trip() {
    let config = several_caches();
    let text = toml::to_string(&config).unwrap();
    let parsed: ManagerConfig = from_toml("weft.toml", &text).unwrap();
    assert_eq!(parsed, config, "round trip through:\n{text}");
    // And the manager accepts it.
    let manager = CacheManager::new(parsed).unwrap();
    assert_eq!(manager.cache_names(), ["blobs", "default", "sessions"]);
    assert_eq!(
        manager.cache_for_resp_database(1).unwrap().name(),
        "sessions"
    );
    assert_eq!(manager.cache("sessions").unwrap().segment_count(), 64);
}

// Proves cache configurations survive a JSON round trip too.
#[test]
fn cache_config_json_round_trip() {
    for config in several_caches().caches.into_values() {
        let text = serde_json::to_string(&config).unwrap();
        let parsed = CacheConfig::from_json("<json>", &text).unwrap();
        assert_eq!(parsed, config, "{text}");
    }
}

// Proves a hand-written TOML file with units parses into the expected model.
#[test]
fn hand_written_toml() {
    let text = r#"
[caches.default]
resp-database = 0

[caches.sessions]
segments = 32
[caches.sessions.expiration]
lifespan = "30m"
max-idle = "90s"
[caches.sessions.memory]
max-count = 1000
when-full = "REMOVE"

[caches.blobs.memory]
max-size = "1GiB"
"#;
    let config: ManagerConfig = from_toml("weft.toml", text).unwrap();
    assert_eq!(config.caches.len(), 3);
    let sessions = &config.caches["sessions"];
    assert_eq!(sessions.segments, 32);
    assert_eq!(
        sessions.expiration.lifespan,
        Some(Duration::from_secs(1_800))
    );
    assert_eq!(sessions.expiration.max_idle, Some(Duration::from_secs(90)));
    assert_eq!(sessions.memory.max_count, Some(1_000));
    assert_eq!(config.caches["blobs"].memory.max_size_bytes, Some(1 << 30));
    assert_eq!(config.caches["blobs"].segments, 256);
    assert_eq!(config.caches["default"].resp_database, Some(0));
}

// Proves errors deep in a multi-cache file name the file, the line and the problem.
#[test]
fn errors_name_file_and_line() {
    let cases = [
        (
            "[caches.a]\nsegments = 8\n\n[caches.b]\nsegments = 99999\n",
            5,
            "segments must be between 1 and",
        ),
        (
            "[caches.a]\n[caches.a.expiration]\nlifespan = \"5 fortnights\"\n",
            3,
            "invalid duration",
        ),
        (
            "[caches.a]\n[caches.a.memory]\nmax-size = \"12 parsecs\"\n",
            3,
            "invalid size",
        ),
        (
            "[caches.a]\nstatistcs = true\n",
            2,
            "unknown field `statistcs`",
        ),
        ("[cache.a]\n", 1, "unknown field `cache`"),
        (
            "[caches.a]\n[caches.a.expiration]\ninterval = -1\n",
            3,
            "interval must be a positive duration",
        ),
        (
            "[caches.a]\n[caches.a.memory]\nmax-count = 0\n",
            3,
            "max-count must be positive",
        ),
    ];
    for (text, line, reason) in cases {
        let error = from_toml::<ManagerConfig>("conf/weft.toml", text).unwrap_err();
        assert_eq!(error.source_name, "conf/weft.toml");
        assert_eq!(error.line, line, "{error}\n{text}");
        assert!(error.column >= 1, "{error}");
        assert!(error.reason.contains(reason), "{error}");
        assert!(
            error
                .to_string()
                .starts_with(&format!("conf/weft.toml:{line}:")),
            "{error}"
        );
    }
}

// Proves the duration and size parsers accept their units and refuse the rest.
#[test]
fn duration_and_size_units() {
    assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
    assert_eq!(parse_duration("250").unwrap(), Duration::from_millis(250));
    assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
    assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
    assert_eq!(parse_duration("2h").unwrap(), Duration::from_secs(7_200));
    assert_eq!(parse_duration("1d").unwrap(), Duration::from_secs(86_400));
    assert!(parse_duration("1w").is_err());
    assert!(parse_duration("s").is_err());
    assert!(parse_duration("99999999999999999999d").is_err());
    assert_eq!(parse_size("512KiB").unwrap(), 512 << 10);
    assert_eq!(parse_size("64MiB").unwrap(), 64 << 20);
    assert_eq!(parse_size("1GB").unwrap(), 1_000_000_000);
    assert_eq!(parse_size("100").unwrap(), 100);
    assert!(parse_size("1TiB").is_err());
    assert!(parse_size("MiB").is_err());
}

// Proves the manager refuses duplicate names, invalid names and shared RESP databases.
#[test]
fn manager_refusals() {
    let manager = CacheManager::new(ManagerConfig::default()).unwrap();
    assert!(matches!(
        manager.create_cache("default", CacheConfig::default()),
        Err(ManagerError::AlreadyExists(_))
    ));
    for name in ["", "a/b", "___internal", "tab\there"] {
        assert!(
            matches!(
                manager.create_cache(name, CacheConfig::default()),
                Err(ManagerError::InvalidName { .. })
            ),
            "{name:?}"
        );
    }
    let taken = CacheConfig {
        resp_database: Some(0),
        ..CacheConfig::default()
    };
    assert!(matches!(
        manager.create_cache("other", taken),
        Err(ManagerError::DatabaseTaken { database: 0, ref cache }) if cache == "default"
    ));
    let existing = manager
        .get_or_create_cache("default", CacheConfig::default())
        .unwrap();
    assert_eq!(existing.name(), "default");
    let created = manager
        .get_or_create_cache("fresh", CacheConfig::default())
        .unwrap();
    assert_eq!(created.name(), "fresh");
    assert_eq!(manager.cache_names(), ["default", "fresh"]);
}

// Proves SWAPDB's exchanges compose (swapping back restores the declared mapping, a chain of
// swaps is a permutation), each changes the epoch, and restoring refuses a list that is not
// a permutation.
#[test]
fn resp_database_swaps() {
    let manager = CacheManager::new(several_caches()).unwrap();
    let name = |database| {
        manager
            .cache_for_resp_database(database)
            .map(|cache| cache.name().to_owned())
    };
    let epoch = manager.resp_epoch();
    manager.swap_resp_databases(0, 1);
    assert_ne!(manager.resp_epoch(), epoch);
    assert_eq!(name(0).as_deref(), Some("sessions"));
    assert_eq!(name(1).as_deref(), Some("default"));
    let sessions = manager.cache("sessions").unwrap();
    assert_eq!(manager.resp_database_of(&sessions), Some(0));
    manager.swap_resp_databases(1, 5);
    assert_eq!(name(5).as_deref(), Some("default"));
    assert_eq!(name(1), None, "declared database 5 has no cache");
    assert_eq!(manager.resp_declared_database(1), 5);
    assert_eq!(manager.resp_swaps(), [(0, 1), (1, 5), (5, 0)]);
    manager.swap_resp_databases(5, 1);
    manager.swap_resp_databases(0, 1);
    assert!(manager.resp_swaps().is_empty());
    assert_eq!(name(0).as_deref(), Some("default"));
    assert!(manager.restore_resp_swaps(&[(0, 1), (1, 0)]));
    assert_eq!(name(0).as_deref(), Some("sessions"));
    assert!(!manager.restore_resp_swaps(&[(0, 1)]));
    assert!(!manager.restore_resp_swaps(&[(0, 1), (2, 1)]));
    assert!(manager.restore_resp_swaps(&[]));
    assert_eq!(name(0).as_deref(), Some("default"));
}
