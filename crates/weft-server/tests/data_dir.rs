//! One process per data directory, and the offline tools for what a crash or a damaged disk
//! leaves in it: a second server on a directory in use refuses to start and names the
//! holder; an embedded cache manager cannot open a store a server has; `weft store check`
//! finds a torn tail and corruption, `weft store repair` cuts them, and the server then
//! starts with everything before the damage. Real `weft` processes, except where noted.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::cluster::{Resp, free_tcp_port};
use common::process::{Weft, run, wait_listening};

const START_LIMIT: Duration = Duration::from_secs(30);

/// A server configuration with a `sync` file store in `data` (small data files, so that a
/// few hundred keys fill several).
fn write_config(dir: &Path, addr: SocketAddr, data: &Path) -> String {
    let path = dir.join(format!("weft-{}.toml", addr.port()));
    std::fs::write(
        &path,
        format!(
            "[server]\nbind = \"{addr}\"\ndata-dir = \"{}\"\n\n\
             [caches.default]\n\
             [[caches.default.persistence.store]]\ntype = \"file\"\ndurability = \"sync\"\n\
             file-size-max = \"4KiB\"\ncompaction-threshold-percent = 0\n",
            data.display()
        ),
    )
    .unwrap();
    path.display().to_string()
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn set_keys(addr: SocketAddr, keys: std::ops::Range<usize>) {
    let mut client = Resp::connect(addr).unwrap();
    for i in keys {
        let reply = client
            .command(&[
                b"SET",
                format!("key-{i}").as_bytes(),
                format!("value-{i}").as_bytes(),
            ])
            .unwrap();
        assert_eq!(reply.as_deref(), Some(&b"OK"[..]));
    }
}

fn get(client: &mut Resp, i: usize) -> Option<String> {
    client
        .command(&[b"GET", format!("key-{i}").as_bytes()])
        .unwrap()
        .map(|value| String::from_utf8_lossy(&value).into_owned())
}

/// Stops `server` with SIGTERM; it must exit 0.
fn stop(server: &mut Weft) {
    server.signal("-TERM");
    let status = server.exit_within(START_LIMIT).expect("the server stops");
    assert!(status.success(), "{status:?}: {}", server.stderr());
}

// Proves a second server given a data directory a running server has does not start, and
// names the process that has it (pid, node, address); the first goes on serving, and once it
// stops the second starts on the same directory with its data.
#[test]
fn a_second_server_on_a_used_data_directory_refuses_to_start_and_names_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (first_addr, second_addr) = (loopback(free_tcp_port()), loopback(free_tcp_port()));
    let first_config = write_config(dir.path(), first_addr, &data);
    let second_config = write_config(dir.path(), second_addr, &data);
    let mut first = Weft::spawn(
        dir.path(),
        &["server", "--config", &first_config],
        dir.path(),
        "first",
    );
    wait_listening(first_addr, START_LIMIT);
    set_keys(first_addr, 0..10);

    let mut second = Weft::spawn(
        dir.path(),
        &["server", "--config", &second_config],
        dir.path(),
        "second",
    );
    let status = second
        .exit_within(START_LIMIT)
        .expect("the second server gives up");
    assert!(!status.success());
    let refusal = second.stderr();
    assert!(
        refusal.contains(&format!("{} is in use by another process", data.display()))
            && refusal.contains(&format!(
                "pid {}, weft server, node {first_addr}",
                first.id()
            ))
            && refusal.contains(&format!("listening on {first_addr}")),
        "{refusal}"
    );
    // `--data-dir` names the same directory another way: refused too.
    let mut third = Weft::spawn(
        dir.path(),
        &[
            "server",
            "--bind",
            &second_addr.to_string(),
            "--data-dir",
            &data.display().to_string(),
            "--config",
            &second_config,
        ],
        dir.path(),
        "third",
    );
    assert!(!third.exit_within(START_LIMIT).expect("refused").success());
    assert!(
        third.stderr().contains(&format!("pid {}", first.id())),
        "{}",
        third.stderr()
    );

    let mut client = Resp::connect(first_addr).unwrap();
    assert_eq!(get(&mut client, 9).as_deref(), Some("value-9"));
    drop(client);
    stop(&mut first);
    let mut second = Weft::spawn(
        dir.path(),
        &["server", "--config", &second_config],
        dir.path(),
        "second-again",
    );
    wait_listening(second_addr, START_LIMIT);
    let mut client = Resp::connect(second_addr).unwrap();
    assert_eq!(get(&mut client, 9).as_deref(), Some("value-9"));
    drop(client);
    stop(&mut second);
}

// Proves (in one process) that a cache manager embedding Weft cannot open the file store of
// a cache a server has open in the same data directory: creating the cache fails, naming
// the server.
#[test]
fn an_embedded_manager_cannot_open_a_store_a_server_has() {
    let dir = tempfile::tempdir().unwrap();
    let server = common::TestServer::start_with(
        &format!("data-dir = \"{}\"", dir.path().display()),
        "[caches.default]\n[[caches.default.persistence.store]]\ntype = \"file\"\n",
    );
    let factory: Arc<dyn weft_core::PersistenceFactory> =
        Arc::new(weft_store::StoreFactory::new(dir.path()));
    let mut config = weft_core::ManagerConfig::default();
    let stored = server.manager().cache("default").unwrap().config().clone();
    config.caches.insert("default".to_owned(), stored);
    let opened = weft_core::CacheManager::with_persistence(
        config,
        Arc::new(weft_core::SystemClock),
        Some(factory),
    );
    let error = opened.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        error.contains("is in use by another process")
            && error.contains(&format!("pid {}, weft server", std::process::id())),
        "{error}"
    );
    drop(server);
}

/// Starts a server on `config` and waits until it listens.
fn start(dir: &Path, config: &str, addr: SocketAddr, name: &str) -> Weft {
    let server = Weft::spawn(dir, &["server", "--config", config], dir, name);
    wait_listening(addr, START_LIMIT);
    server
}

// Proves `weft store check` finds a torn tail (the newest data file cut inside its last
// record, as a crash mid-write leaves it) — and refuses while the server runs —, that
// `weft store repair` cuts it and says so, and that the server then starts with every key
// written before the tear.
#[test]
fn store_check_finds_and_repair_cuts_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data_arg = data.display().to_string();
    let addr = loopback(free_tcp_port());
    let config = write_config(dir.path(), addr, &data);
    let mut server = start(dir.path(), &config, addr, "server");
    set_keys(addr, 0..100);

    let refused = run(dir.path(), &["store", "check", "--data-dir", &data_arg]);
    assert_eq!(refused.code, Some(2), "{refused:?}");
    assert!(
        refused
            .stderr
            .contains(&format!("pid {}, weft server", server.id())),
        "{refused:?}"
    );
    stop(&mut server);
    let clean = run(dir.path(), &["store", "check", "--data-dir", &data_arg]);
    assert_eq!(clean.code, Some(0), "{clean:?}");
    assert!(
        clean.stdout.contains("1 store checked: no damage"),
        "{clean:?}"
    );

    // Tear the newest data file inside its last record (`key-99`'s).
    let store = data.join("default");
    let newest = std::fs::read_dir(&store)
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".log"))
        .max()
        .unwrap();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(store.join(&newest))
        .unwrap();
    let length = file.metadata().unwrap().len();
    file.set_len(length - 5).unwrap();
    drop(file);

    let found = run(dir.path(), &["store", "check", "--data-dir", &data_arg]);
    assert_eq!(found.code, Some(1), "{found:?}");
    assert!(
        found.stdout.contains(&format!("{newest}: "))
            && found.stdout.contains("then a torn tail at offset")
            && found.stdout.contains("(the file ends inside a record)")
            && found.stdout.contains("1 of 1 store damaged"),
        "{found:?}"
    );
    let repaired = run(dir.path(), &["store", "repair", "--data-dir", &data_arg]);
    assert_eq!(repaired.code, Some(0), "{repaired:?}");
    assert!(
        repaired.stdout.contains(&format!("default/{newest}: cut "))
            && repaired
                .stdout
                .contains("(torn tail: the file ends inside a record); no intact record lost"),
        "{repaired:?}"
    );
    let after = run(dir.path(), &["store", "check", "--data-dir", &data_arg]);
    assert_eq!(after.code, Some(0), "{after:?}");

    let mut server = start(dir.path(), &config, addr, "server-again");
    let mut client = Resp::connect(addr).unwrap();
    for i in 0..99 {
        assert_eq!(get(&mut client, i), Some(format!("value-{i}")), "key-{i}");
    }
    assert_eq!(get(&mut client, 99), None, "the torn write is gone");
    drop(client);
    stop(&mut server);
}

// Proves a server refused by a corrupt record in an older data file (after a crash, so no
// checkpoint skips it) starts again after `weft store repair`, which reports the intact
// records it had to cut with it; every key outside the cut part is served.
#[test]
fn repair_lets_a_server_refused_by_corruption_start() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data_arg = data.display().to_string();
    let addr = loopback(free_tcp_port());
    let config = write_config(dir.path(), addr, &data);
    let mut server = start(dir.path(), &config, addr, "server");
    set_keys(addr, 0..200);
    server.signal("-KILL");
    server.exit_within(START_LIMIT).expect("killed");

    let first = data.join("default/00000001.log");
    let mut bytes = std::fs::read(&first).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x20;
    std::fs::write(&first, &bytes).unwrap();
    let mut refused = Weft::spawn(
        dir.path(),
        &["server", "--config", &config],
        dir.path(),
        "refused",
    );
    assert!(!refused.exit_within(START_LIMIT).expect("refused").success());
    assert!(
        refused
            .stderr()
            .contains("corrupt data in 00000001.log at offset"),
        "{}",
        refused.stderr()
    );

    let found = run(dir.path(), &["store", "check", "--data-dir", &data_arg]);
    assert_eq!(found.code, Some(1), "{found:?}");
    assert!(
        found.stdout.contains("00000001.log: ")
            && found.stdout.contains("then corruption at offset")
            && found.stdout.contains("(checksum mismatch)")
            && found
                .stdout
                .contains("the store does not open until it is repaired"),
        "{found:?}"
    );
    let repaired = run(dir.path(), &["store", "repair", "--data-dir", &data_arg]);
    assert_eq!(repaired.code, Some(0), "{repaired:?}");
    assert!(
        repaired.stdout.contains("00000001.log: cut ")
            && repaired.stdout.contains("(corrupt: checksum mismatch)")
            && repaired.stdout.contains("intact records lost"),
        "{repaired:?}"
    );

    let mut server = start(dir.path(), &config, addr, "server-again");
    let mut client = Resp::connect(addr).unwrap();
    let missing: Vec<usize> = (0..200)
        .filter(|&i| get(&mut client, i).is_none())
        .collect();
    assert!(!missing.is_empty() && missing.len() < 100, "{missing:?}");
    // Keys are written in order: the cut part of the first file is one run of keys.
    assert!(
        missing.windows(2).all(|pair| pair[1] == pair[0] + 1),
        "{missing:?}"
    );
    assert_eq!(get(&mut client, 199).as_deref(), Some("value-199"));
    drop(client);
    stop(&mut server);
}
