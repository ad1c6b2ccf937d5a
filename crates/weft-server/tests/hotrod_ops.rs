//! Hot Rod operations against a real server over loopback, checked byte for byte against the
//! layouts of protocols.md §1.7–1.10: version negotiation, every cache operation with and
//! without previous values at 3.1 and 4.0, metadata and expiration units, bulk operations,
//! iteration by segment, listener events, pipelining, large values, and the same entries
//! seen through RESP. Every read has a timeout, so a hang fails the test.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{BufMut, Bytes, BytesMut};
use common::hotrod::{HotRod, Response, b, get, iteration_batch, put};
use common::{Frame, TestServer};
use weft_hotrod::wire::put_vlong;
use weft_hotrod::{
    Expiration, Lifetime, MediaType, Metadata, Request, RequestHeader, Status, flags, opcode,
};

const FORCE: u32 = flags::FORCE_RETURN_VALUE;

/// `array` of `bytes`.
fn array(bytes: &[u8]) -> Vec<u8> {
    let mut out = BytesMut::new();
    weft_hotrod::wire::put_array(&mut out, bytes);
    out.to_vec()
}

/// The previous-value block the server must send (§1.9): from 4.0 the metadata block of an
/// immortal entry (flags 03, its version) or `03 ff..ff` for none, then the value.
fn previous(version: u8, entry: Option<(u64, &[u8])>) -> Vec<u8> {
    let mut out = Vec::new();
    if version >= 40 {
        out.push(0x03);
        out.extend_from_slice(&entry.map_or(u64::MAX, |(v, _)| v).to_be_bytes());
    }
    out.extend_from_slice(&array(entry.map_or(&[][..], |(_, value)| value)));
    out
}

/// Asserts two large byte strings are equal without printing them.
#[track_caller]
fn assert_bytes(actual: &[u8], expected: &[u8], what: &str) {
    if actual != expected {
        let first_difference = actual.iter().zip(expected).position(|(a, e)| a != e);
        panic!(
            "{what}: {} bytes where {} were expected; first difference at {first_difference:?}",
            actual.len(),
            expected.len()
        );
    }
}

/// The version of `key`, from getWithVersion.
fn version_of(c: &mut HotRod, key: &str) -> u64 {
    let response = c.call(Request::GetWithVersion { key: b(key) });
    assert_eq!(response.status(), Status::Success, "{key}");
    response.reader().u64().unwrap()
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The expected PING body from 2.9 on: storage types, then (3.0+) version 41 and the
/// served opcodes as u16.
fn ping_body(version: u8, media_types: &[u8]) -> Vec<u8> {
    let mut out = media_types.to_vec();
    if version >= 30 {
        out.push(41);
        out.push(opcode::SERVED.len() as u8);
        for op in opcode::SERVED {
            out.extend_from_slice(&u16::from(op).to_be_bytes());
        }
    }
    out
}

// Proves version negotiation: PING at 3.1 then 4.0 answers version 41, the served opcodes
// and the cache's storage types (none for the raw-byte default cache, protostream for a
// protostream cache); 2.8 has an empty body and 2.9 only the types. A hash-aware PING gets
// this server as owner of every segment, and no update once it sends that topology id.
#[test]
fn ping_negotiation() {
    let server = TestServer::start_with("", "[caches.proto]\nstatistics = true\n");
    for version in [31u8, 40] {
        let mut c = HotRod::connect(server.addr, version);
        let response = c.call(Request::Ping);
        assert_eq!(response.header.opcode, 0x18);
        assert_eq!(
            response.shape(),
            (Status::Success, ping_body(version, &[0x00, 0x00]))
        );
        c.cache = "proto".into();
        let response = c.call(Request::Ping);
        assert_eq!(
            response.shape(),
            (
                Status::Success,
                ping_body(version, &[0x01, 0x0c, 0x00, 0x01, 0x0c, 0x00])
            )
        );
    }
    let mut c = HotRod::connect(server.addr, 28);
    assert_eq!(c.call(Request::Ping).shape(), (Status::Success, vec![]));
    let mut c = HotRod::connect(server.addr, 29);
    c.cache = "proto".into();
    assert_eq!(
        c.call(Request::Ping).shape(),
        (Status::Success, vec![0x01, 0x0c, 0x00, 0x01, 0x0c, 0x00])
    );

    let mut c = HotRod::connect(server.addr, 31);
    let header = RequestHeader {
        intelligence: 3,
        ..c.header()
    };
    let id = c.send(&header, &Request::Ping);
    let response = c.response_to(id);
    let topology = response.header.topology.clone().expect("a topology update");
    assert_eq!(
        topology.servers,
        vec![("127.0.0.1".to_owned(), server.addr.port())]
    );
    let segments = server.manager().cache("default").unwrap().segment_count();
    assert_eq!(
        topology.segment_owners,
        Some(vec![vec![0]; segments as usize])
    );
    assert_eq!(response.body, ping_body(31, &[0x00, 0x00]));
    let header = RequestHeader {
        intelligence: 3,
        topology_id: topology.id,
        ..c.header()
    };
    let id = c.send(&header, &Request::Ping);
    assert_eq!(c.response_to(id).header.topology, None);
    // Topology-aware clients get the servers only.
    let header = RequestHeader {
        intelligence: 2,
        ..c.header()
    };
    let id = c.send(&header, &Request::Ping);
    let topology = c
        .response_to(id)
        .header
        .topology
        .expect("a topology update");
    assert_eq!((topology.servers.len(), topology.segment_owners), (1, None));

    // Versions above 4.1 are served as 4.1.
    let mut c = HotRod::connect(server.addr, 50);
    assert_eq!(
        c.call(Request::Ping).shape(),
        (Status::Success, ping_body(41, &[0x00, 0x00]))
    );
    assert_eq!(c.call(put("future", "v")).status(), Status::Success);
    assert_eq!(c.call(get("future")).value(), b"v");
}

// Proves the version-dependent layouts from 2.0 to 4.1 (and a future 5.0): the PING body,
// expiration before and after 2.2, previous values before and after 4.0, iteration batches
// before and after 2.4 (projections) and 2.5 (metadata flag) are what each version's
// clients read, so a whole session at every version stays in step.
#[test]
fn every_version_stays_in_step() {
    let server = TestServer::start();
    for version in (20..=41).chain([50]) {
        let effective = version.min(41);
        let mut c = HotRod::connect(server.addr, version);
        let expected_ping = match effective {
            ..=28 => vec![],
            29 => vec![0x00, 0x00],
            _ => ping_body(effective, &[0x00, 0x00]),
        };
        assert_eq!(
            c.call(Request::Ping).shape(),
            (Status::Success, expected_ping),
            "version {version}"
        );
        let key = format!("v{version}");
        let expiration = Expiration {
            lifespan: Lifetime::After(Duration::from_secs(3600)),
            max_idle: Lifetime::Default,
        };
        let request = Request::Put {
            key: b(&key),
            expiration,
            value: b("one"),
        };
        assert_eq!(
            c.call_with(FORCE, request).shape(),
            (Status::SuccessWithPrevious, previous(effective, None)),
            "version {version}"
        );
        let entry_version = version_of(&mut c, &key);
        let response = c.call_with(FORCE, put(&key, "two"));
        assert_eq!(response.status(), Status::SuccessWithPrevious);
        let mut reader = response.reader();
        if effective >= 40 {
            let metadata = reader.metadata().unwrap();
            assert_eq!(
                (metadata.lifespan.map(|(_, s)| s), metadata.max_idle),
                (Some(3600), None),
                "version {version}"
            );
            assert_eq!(metadata.version, entry_version, "version {version}");
        }
        assert_eq!(reader.array().unwrap(), b"one", "version {version}");
        assert_eq!(reader.position(), response.body.len(), "version {version}");
        assert_eq!(c.call(get(&key)).value(), b"two", "version {version}");

        let response = c.call(Request::IterationStart {
            segments: None,
            filter: None,
            batch_size: 7,
            metadata: false,
        });
        assert_eq!(response.status(), Status::Success, "version {version}");
        let id = response.reader().string().unwrap();
        let mut entries = 0;
        loop {
            let response = c.call(Request::IterationNext { id: id.clone() });
            let mut reader = response.reader();
            reader.array().unwrap();
            let count = reader.vint().unwrap();
            if count == 0 {
                break;
            }
            entries += count;
        }
        assert_eq!(
            u64::from(entries),
            c.call(Request::Size).reader().vlong().unwrap(),
            "version {version}"
        );
        assert_eq!(
            c.call(Request::IterationEnd { id }).status(),
            Status::Success
        );
    }
}

// Proves every keyed operation's status and body at 3.1 and 4.0, with and without
// FORCE_RETURN_VALUE (§1.7, §1.9): previous values only with the flag, status 3/4 then;
// put-if-absent that stores answers a bare 0 even with the flag; a put with the flag and no
// previous entry answers 3 with an empty previous value.
#[test]
fn keyed_operations_with_and_without_previous_values() {
    let server = TestServer::start();
    for version in [31u8, 40] {
        for flag in [0, FORCE] {
            let mut c = HotRod::connect(server.addr, version);
            let with = flag == FORCE;
            let k = &format!("k-{version}-{flag}");
            let absent = &format!("absent-{version}-{flag}");
            let context = format!("version {version}, flags {flag}");
            let prev = |entry: Option<(u64, &[u8])>| previous(version, entry);
            let written = |status: Status, entry: Option<(u64, &[u8])>| {
                if with {
                    (status, prev(entry))
                } else {
                    (Status::Success, vec![])
                }
            };

            // put on an absent key, then on a present one.
            let response = c.call_with(flag, put(k, "v1"));
            assert_eq!(response.header.opcode, 0x02);
            assert_eq!(
                response.shape(),
                written(Status::SuccessWithPrevious, None),
                "{context}"
            );
            let v1 = version_of(&mut c, k);
            assert_eq!(c.call(get(k)).shape(), (Status::Success, array(b"v1")));
            assert_eq!(
                c.call_with(flag, put(k, "v2")).shape(),
                written(Status::SuccessWithPrevious, Some((v1, b"v1"))),
                "{context}"
            );
            let v2 = version_of(&mut c, k);
            assert!(v2 > v1);

            // containsKey.
            let response = c.call_with(flag, Request::ContainsKey { key: b(k) });
            assert_eq!(
                (response.header.opcode, response.shape()),
                (0x10, (Status::Success, vec![]))
            );
            let response = c.call_with(flag, Request::ContainsKey { key: b(absent) });
            assert_eq!(response.shape(), (Status::KeyDoesNotExist, vec![]));

            // putIfAbsent: refused on a present key (4 + the current value with the flag);
            // a bare 0 when it stores, flag or not.
            let put_if_absent = |key: &str, value: &str| Request::PutIfAbsent {
                key: b(key),
                expiration: Expiration::DEFAULT,
                value: b(value),
            };
            let expected = if with {
                (Status::NotExecutedWithPrevious, prev(Some((v2, b"v2"))))
            } else {
                (Status::NotExecuted, vec![])
            };
            let response = c.call_with(flag, put_if_absent(k, "v3"));
            assert_eq!(response.header.opcode, 0x06);
            assert_eq!(response.shape(), expected, "{context}");
            let fresh = &format!("fresh-{version}-{flag}");
            assert_eq!(
                c.call_with(flag, put_if_absent(fresh, "f")).shape(),
                (Status::Success, vec![]),
                "{context}"
            );
            assert_eq!(c.call(get(fresh)).value(), b"f");

            // replace: applies to a present key; 1 (bare) on an absent one.
            let replace = |key: &str, value: &str| Request::Replace {
                key: b(key),
                expiration: Expiration::DEFAULT,
                value: b(value),
            };
            let response = c.call_with(flag, replace(k, "v4"));
            assert_eq!(response.header.opcode, 0x08);
            assert_eq!(
                response.shape(),
                written(Status::SuccessWithPrevious, Some((v2, b"v2"))),
                "{context}"
            );
            let v4 = version_of(&mut c, k);
            assert_eq!(
                c.call_with(flag, replace(absent, "x")).shape(),
                (Status::NotExecuted, vec![]),
                "{context}"
            );
            assert_eq!(
                c.call(get(absent)).shape(),
                (Status::KeyDoesNotExist, vec![])
            );

            // replaceIfUnmodified: version mismatch, match, absent key.
            let replace_if =
                |key: &str, entry_version: u64, value: &str| Request::ReplaceIfUnmodified {
                    key: b(key),
                    expiration: Expiration::DEFAULT,
                    version: entry_version,
                    value: b(value),
                };
            let expected = if with {
                (Status::NotExecutedWithPrevious, prev(Some((v4, b"v4"))))
            } else {
                (Status::NotExecuted, vec![])
            };
            let response = c.call_with(flag, replace_if(k, v4 + 1000, "no"));
            assert_eq!(response.header.opcode, 0x0a);
            assert_eq!(response.shape(), expected, "{context}");
            assert_eq!(c.call(get(k)).value(), b"v4");
            assert_eq!(
                c.call_with(flag, replace_if(k, v4, "v5")).shape(),
                written(Status::SuccessWithPrevious, Some((v4, b"v4"))),
                "{context}"
            );
            let v5 = version_of(&mut c, k);
            assert_eq!(c.call(get(k)).value(), b"v5");
            assert_eq!(
                c.call_with(flag, replace_if(absent, 1, "x")).shape(),
                (Status::KeyDoesNotExist, vec![]),
                "{context}"
            );

            // removeIfUnmodified: mismatch, match, absent.
            let remove_if = |key: &str, entry_version: u64| Request::RemoveIfUnmodified {
                key: b(key),
                version: entry_version,
            };
            let expected = if with {
                (Status::NotExecutedWithPrevious, prev(Some((v5, b"v5"))))
            } else {
                (Status::NotExecuted, vec![])
            };
            let response = c.call_with(flag, remove_if(k, v5 + 1000));
            assert_eq!(response.header.opcode, 0x0e);
            assert_eq!(response.shape(), expected, "{context}");
            assert_eq!(
                c.call_with(flag, remove_if(k, v5)).shape(),
                written(Status::SuccessWithPrevious, Some((v5, b"v5"))),
                "{context}"
            );
            assert_eq!(c.call(get(k)).shape(), (Status::KeyDoesNotExist, vec![]));
            assert_eq!(
                c.call_with(flag, remove_if(absent, 1)).shape(),
                (Status::KeyDoesNotExist, vec![]),
                "{context}"
            );

            // remove: present, then absent.
            assert_eq!(c.call(put(k, "v6")).status(), Status::Success);
            let v6 = version_of(&mut c, k);
            let response = c.call_with(flag, Request::Remove { key: b(k) });
            assert_eq!(response.header.opcode, 0x0c);
            assert_eq!(
                response.shape(),
                written(Status::SuccessWithPrevious, Some((v6, b"v6"))),
                "{context}"
            );
            assert_eq!(
                c.call_with(flag, Request::Remove { key: b(k) }).shape(),
                (Status::KeyDoesNotExist, vec![]),
                "{context}"
            );
            let response = c.call(get(k));
            assert_eq!(
                (response.header.opcode, response.shape()),
                (0x04, (Status::KeyDoesNotExist, vec![]))
            );
        }
    }
}

/// Sends a 4.0 put of `key` whose expiration block is `units` followed by `values`, written
/// by hand so the exact time units go on the wire.
fn put_with_units(c: &mut HotRod, key: &str, units: u8, values: &[u64]) {
    let header = c.header();
    assert!(header.message_id < 0x80, "the opcode must be byte 3");
    let mut bytes = BytesMut::new();
    weft_hotrod::encode(
        &mut bytes,
        &header,
        &Request::Get {
            key: b(key), // the header and key of a get...
        },
    )
    .unwrap();
    bytes[3] = opcode::PUT; // ...turned into a put's.
    bytes.put_u8(units);
    for &value in values {
        put_vlong(&mut bytes, value);
    }
    bytes.extend_from_slice(&array(b"value"));
    c.expect_response(header.message_id, header.version, opcode::PUT);
    c.send_raw(&bytes);
    assert_eq!(c.response_to(header.message_id).status(), Status::Success);
}

/// getWithMetadata of `key`: the metadata block and the value.
fn metadata_of(c: &mut HotRod, key: &str) -> (Metadata, Vec<u8>) {
    let response = c.call(Request::GetWithMetadata { key: b(key) });
    assert_eq!(
        (response.header.opcode, response.status()),
        (0x1c, Status::Success),
        "{key}"
    );
    let mut reader = response.reader();
    let metadata = reader.metadata().unwrap();
    let value = reader.array().unwrap().to_vec();
    assert_eq!(reader.position(), response.body.len());
    (metadata, value)
}

// Proves getWithMetadata reports lifespan and max idle in seconds with their timestamps and
// the entry version, and that every time unit (s, ms, ns, µs, min, h, days, default,
// infinite) is read as its duration; the cache default applies to unit 7; pre-2.2 seconds
// and pre-3.0 absolute times are honoured.
#[test]
fn metadata_and_expiration_units() {
    let server = TestServer::start_with(
        "",
        "[caches.expiring]\nresp-database = 1\n[caches.expiring.expiration]\nlifespan = \"10m\"\n",
    );
    let mut c = HotRod::connect(server.addr, 40);
    assert_eq!(
        c.call(Request::GetWithMetadata { key: b("nothing") })
            .shape(),
        (Status::KeyDoesNotExist, vec![])
    );
    // Units byte (lifespan in the high nibble, max idle in the low one), the values, and
    // the lifespan and max idle getWithMetadata must report, in seconds.
    type Case = (u8, &'static [u64], Option<u32>, Option<u32>);
    let cases: [Case; 9] = [
        (0x00, &[90, 45], Some(90), Some(45)),
        (0x11, &[90_500, 45_000], Some(90), Some(45)),
        (0x22, &[90_000_000_001, 45_000_000_000], Some(90), Some(45)),
        (0x33, &[90_000_001, 45_000_000], Some(90), Some(45)),
        (0x44, &[3, 2], Some(180), Some(120)),
        (0x55, &[2, 1], Some(7200), Some(3600)),
        (0x66, &[2, 1], Some(172_800), Some(86_400)),
        (0x78, &[], None, None),
        (0x87, &[], None, None),
    ];
    for (units, values, lifespan, max_idle) in cases {
        let key = format!("units-{units:02x}");
        let before = now_ms();
        put_with_units(&mut c, &key, units, values);
        let (metadata, value) = metadata_of(&mut c, &key);
        assert_eq!(value, b"value");
        assert_eq!(
            metadata.lifespan.map(|(_, seconds)| seconds),
            lifespan,
            "units {units:02x}"
        );
        assert_eq!(
            metadata.max_idle.map(|(_, seconds)| seconds),
            max_idle,
            "units {units:02x}"
        );
        for (at_ms, _) in metadata.lifespan.iter().chain(&metadata.max_idle) {
            assert!(
                (before - 60_000..=now_ms() + 60_000).contains(at_ms),
                "units {units:02x}: timestamp {at_ms}"
            );
        }
        assert_eq!(metadata.version, version_of(&mut c, &key));
    }
    // Unit 7 takes the cache's default lifespan; unit 8 overrides it.
    c.cache = "expiring".into();
    put_with_units(&mut c, "defaulted", 0x77, &[]);
    assert_eq!(
        metadata_of(&mut c, "defaulted").0.lifespan.map(|(_, s)| s),
        Some(600)
    );
    put_with_units(&mut c, "immortal", 0x88, &[]);
    let (metadata, _) = metadata_of(&mut c, "immortal");
    assert_eq!((metadata.lifespan, metadata.max_idle), (None, None));

    // Before 2.2: two vInts of seconds.
    let mut old = HotRod::connect(server.addr, 21);
    let request = Request::Put {
        key: b("old"),
        expiration: Expiration {
            lifespan: Lifetime::After(Duration::from_secs(45)),
            max_idle: Lifetime::Infinite,
        },
        value: b("v"),
    };
    assert_eq!(old.call(request).status(), Status::Success);
    let (metadata, _) = metadata_of(&mut c_default(&server), "old");
    assert_eq!(metadata.lifespan.map(|(_, s)| s), Some(45));
    assert_eq!(metadata.max_idle, None);

    // Before 3.0, over 30 days is a Unix time: two hours from now.
    let mut pre30 = HotRod::connect(server.addr, 29);
    let until = SystemTime::now().duration_since(UNIX_EPOCH).unwrap() + Duration::from_secs(7200);
    let request = Request::Put {
        key: b("absolute"),
        expiration: Expiration {
            lifespan: Lifetime::Until(Duration::from_secs(until.as_secs())),
            max_idle: Lifetime::Infinite,
        },
        value: b("v"),
    };
    assert_eq!(pre30.call(request).status(), Status::Success);
    let (metadata, _) = metadata_of(&mut c_default(&server), "absolute");
    let seconds = metadata.lifespan.map(|(_, s)| s).unwrap();
    assert!((7000..=7200).contains(&seconds), "{seconds}");
}

fn c_default(server: &TestServer) -> HotRod {
    HotRod::connect(server.addr, 40)
}

// Proves size counts entries (a vLong) and clear empties the cache, at 3.1 and 4.0.
#[test]
fn size_and_clear() {
    let server = TestServer::start();
    for version in [31u8, 40] {
        let mut c = HotRod::connect(server.addr, version);
        assert_eq!(c.call(Request::Size).shape(), (Status::Success, vec![0]));
        for i in 0..200 {
            assert_eq!(c.call(put(format!("k{i}"), "v")).status(), Status::Success);
        }
        let response = c.call(Request::Size);
        assert_eq!(response.header.opcode, 0x2a);
        assert_eq!(response.shape(), (Status::Success, vec![0xc8, 0x01]));
        let response = c.call(Request::Clear);
        assert_eq!(
            (response.header.opcode, response.shape()),
            (0x14, (Status::Success, vec![]))
        );
        assert_eq!(c.call(Request::Size).shape(), (Status::Success, vec![0]));
        assert_eq!(c.call(get("k1")).shape(), (Status::KeyDoesNotExist, vec![]));
    }
}

// Proves stats lists name/value strings including the entry count, and bulk reads return
// all entries (or the number asked for) and all keys, each once.
#[test]
fn stats_and_bulk_reads() {
    let server = TestServer::start();
    let mut c = HotRod::connect(server.addr, 31);
    for i in 0..20 {
        assert_eq!(
            c.call(put(format!("s{i}"), format!("v{i}"))).status(),
            Status::Success
        );
    }
    let response = c.call(Request::Stats);
    assert_eq!(
        (response.header.opcode, response.status()),
        (0x16, Status::Success)
    );
    let mut reader = response.reader();
    let stats: HashMap<String, String> = (0..reader.vint().unwrap())
        .map(|_| (reader.string().unwrap(), reader.string().unwrap()))
        .collect();
    assert_eq!(reader.position(), response.body.len());
    assert_eq!(stats["currentNumberOfEntries"], "20");
    assert_eq!(stats["stores"], "20");

    let response = c.call(Request::BulkGet { count: 0 });
    assert_eq!(response.header.opcode, 0x1a);
    let mut reader = response.reader();
    let mut all = HashMap::new();
    while reader.u8().unwrap() == 1 {
        let key = reader.array().unwrap().to_vec();
        let value = reader.array().unwrap().to_vec();
        assert!(all.insert(key, value).is_none());
    }
    assert_eq!(reader.position(), response.body.len());
    let expected: HashMap<Vec<u8>, Vec<u8>> = (0..20)
        .map(|i| (format!("s{i}").into_bytes(), format!("v{i}").into_bytes()))
        .collect();
    assert_eq!(all, expected);
    let response = c.call(Request::BulkGet { count: 5 });
    let mut reader = response.reader();
    let mut n = 0;
    while reader.u8().unwrap() == 1 {
        let (key, value) = (reader.array().unwrap(), reader.array().unwrap());
        assert_eq!(expected.get(key).map(Vec::as_slice), Some(value));
        n += 1;
    }
    assert_eq!(n, 5);

    let response = c.call(Request::BulkGetKeys { scope: 0 });
    assert_eq!(response.header.opcode, 0x1e);
    let mut reader = response.reader();
    let mut keys = BTreeSet::new();
    while reader.u8().unwrap() == 1 {
        assert!(keys.insert(reader.array().unwrap().to_vec()));
    }
    assert_eq!(keys, expected.keys().cloned().collect());
}

// Proves putAll of 1000 entries stores them all and getAll returns exactly the present
// ones with their values.
#[test]
fn put_all_and_get_all_of_1000() {
    let server = TestServer::start();
    let mut c = HotRod::connect(server.addr, 40);
    let entries: Vec<(Bytes, Bytes)> = (0..1000)
        .map(|i| (b(format!("key-{i}")), b(format!("value-{i}"))))
        .collect();
    let response = c.call(Request::PutAll {
        expiration: Expiration::DEFAULT,
        entries: entries.clone(),
    });
    assert_eq!(
        (response.header.opcode, response.shape()),
        (0x2e, (Status::Success, vec![]))
    );
    assert_eq!(
        c.call(Request::Size).reader().vlong().unwrap(),
        1000,
        "size after put-all"
    );
    let mut keys: Vec<Bytes> = entries.iter().map(|(k, _)| k.clone()).collect();
    keys.extend((0..10).map(|i| b(format!("missing-{i}"))));
    let response = c.call(Request::GetAll { keys });
    assert_eq!(
        (response.header.opcode, response.status()),
        (0x30, Status::Success)
    );
    let mut reader = response.reader();
    let count = reader.vint().unwrap();
    let mut found = HashMap::new();
    for _ in 0..count {
        let key = reader.array().unwrap().to_vec();
        let value = reader.array().unwrap().to_vec();
        assert!(found.insert(key, value).is_none(), "a key twice");
    }
    assert_eq!(reader.position(), response.body.len());
    let expected: HashMap<Vec<u8>, Vec<u8>> = entries
        .iter()
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect();
    assert_eq!(found, expected);
}

// Proves iteration over chosen segments: the finished segments add up to exactly those
// asked for, each reported once and after its last entry; every stored key of those
// segments comes once with its value and no other key comes; ending twice or continuing an
// ended iteration is status 5.
#[test]
fn iteration_over_some_segments() {
    let server = TestServer::start();
    let cache = server.manager().cache("default").unwrap();
    let mut c = HotRod::connect(server.addr, 40);
    let entries: Vec<(Bytes, Bytes)> = (0..3000)
        .map(|i| (b(format!("it-{i}")), b(format!("v{i}"))))
        .collect();
    assert_eq!(
        c.call(Request::PutAll {
            expiration: Expiration::DEFAULT,
            entries: entries.clone(),
        })
        .status(),
        Status::Success
    );
    let segment_count = cache.segment_count();
    let wanted: BTreeSet<u32> = (0..segment_count).filter(|s| s % 3 == 1).collect();
    let mut bits = vec![0u8; segment_count.div_ceil(8) as usize];
    for s in &wanted {
        bits[(s / 8) as usize] |= 1 << (s % 8);
    }
    let response = c.call(Request::IterationStart {
        segments: Some(b(&bits)),
        filter: None,
        batch_size: 100,
        metadata: false,
    });
    assert_eq!(
        (response.header.opcode, response.status()),
        (0x32, Status::Success)
    );
    let id = response.reader().string().unwrap();

    let mut finished = BTreeSet::new();
    let mut seen = HashMap::new();
    loop {
        let response = c.call(Request::IterationNext { id: id.clone() });
        assert_eq!(
            (response.header.opcode, response.status()),
            (0x34, Status::Success)
        );
        let batch = iteration_batch(&response);
        assert!(batch.entries.len() <= 100);
        for (key, value) in &batch.entries {
            let segment = cache.segment_of(key);
            assert!(wanted.contains(&segment), "key of segment {segment}");
            assert!(
                !finished.contains(&segment),
                "entry of segment {segment} after it was finished"
            );
            assert!(
                seen.insert(key.clone(), value.clone()).is_none(),
                "key twice"
            );
        }
        for segment in batch.finished {
            assert!(finished.insert(segment), "segment {segment} finished twice");
        }
        if batch.entries.is_empty() {
            break;
        }
    }
    assert_eq!(finished, wanted);
    let expected: HashMap<Vec<u8>, Vec<u8>> = entries
        .iter()
        .filter(|(k, _)| wanted.contains(&cache.segment_of(k)))
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect();
    assert!(expected.len() > 500, "{}", expected.len());
    assert_eq!(seen, expected);

    let end = Request::IterationEnd { id: id.clone() };
    let response = c.call(end.clone());
    assert_eq!(
        (response.header.opcode, response.shape()),
        (0x36, (Status::Success, vec![]))
    );
    assert_eq!(c.call(end).status(), Status::InvalidIteration);
    assert_eq!(
        c.call(Request::IterationNext { id }).status(),
        Status::InvalidIteration
    );
}

/// An event's listener id, key and (for created and modified) version.
fn event_fields(event: &Response) -> (Vec<u8>, Vec<u8>, Option<u64>) {
    let mut reader = event.reader();
    let listener = reader.array().unwrap().to_vec();
    assert_eq!(reader.u8().unwrap(), 0, "not custom");
    assert_eq!(reader.u8().unwrap(), 0, "not retried");
    let key = reader.array().unwrap().to_vec();
    let version = matches!(
        event.header.opcode,
        opcode::EVENT_CREATED | opcode::EVENT_MODIFIED
    )
    .then(|| reader.u64().unwrap());
    assert_eq!(reader.position(), event.body.len());
    (listener, key, version)
}

fn add_listener(id: &[u8], include_current_state: bool, interests: u32) -> Request<Bytes> {
    Request::AddClientListener {
        listener_id: b(id),
        include_current_state,
        filter: None,
        converter: None,
        raw_data: false,
        interests,
    }
}

// Proves client listeners: writes on another connection reach the registering one as
// created/modified/removed events with message id 0, the listener id, the key and the new
// version, in order, interleaved with that connection's own responses; the interest mask
// filters kinds; include-current-state sends the existing entries (with the request's
// message id) before the response; after removal no events come.
#[test]
fn listener_events() {
    let server = TestServer::start();
    let listener_id = [0x5a_u8; 16];
    let mut listening = HotRod::connect(server.addr, 40);
    let mut writer = HotRod::connect(server.addr, 40);
    let response = listening.call(add_listener(&listener_id, false, 0));
    assert_eq!(
        (response.header.opcode, response.shape()),
        (0x26, (Status::Success, vec![]))
    );

    assert_eq!(writer.call(put("watched", "1")).status(), Status::Success);
    let created = version_of(&mut writer, "watched");
    // A request of the listening connection between the writes: its response and the
    // events share the connection.
    assert_eq!(
        listening.call(get("watched")).value(),
        b"1",
        "own response among events"
    );
    assert_eq!(writer.call(put("watched", "2")).status(), Status::Success);
    let modified = version_of(&mut writer, "watched");
    assert_eq!(listening.call(Request::Size).status(), Status::Success);
    assert_eq!(
        writer.call(Request::Remove { key: b("watched") }).status(),
        Status::Success
    );

    let mut events = Vec::new();
    for _ in 0..3 {
        let event = listening.next_event();
        assert_eq!(event.header.message_id, 0);
        assert_eq!(event.status(), Status::Success);
        assert_eq!(event.header.topology, None);
        let (id, key, version) = event_fields(&event);
        assert_eq!(id, listener_id);
        events.push((event.header.opcode, key, version));
    }
    assert_eq!(
        events,
        vec![
            (opcode::EVENT_CREATED, b"watched".to_vec(), Some(created)),
            (opcode::EVENT_MODIFIED, b"watched".to_vec(), Some(modified)),
            (opcode::EVENT_REMOVED, b"watched".to_vec(), None),
        ]
    );

    // Interests: created only (bit 1).
    let mut creations = HotRod::connect(server.addr, 40);
    assert_eq!(
        creations
            .call(add_listener(b"creations", false, 1))
            .status(),
        Status::Success
    );
    assert_eq!(writer.call(put("c", "1")).status(), Status::Success);
    assert_eq!(writer.call(put("c", "2")).status(), Status::Success);
    assert_eq!(writer.call(put("d", "1")).status(), Status::Success);
    let keys: Vec<Vec<u8>> = (0..2)
        .map(|_| {
            let event = creations.next_event();
            assert_eq!(event.header.opcode, opcode::EVENT_CREATED);
            event_fields(&event).1
        })
        .collect();
    assert_eq!(keys, vec![b"c".to_vec(), b"d".to_vec()]);
    assert_eq!(creations.read_within(Duration::from_millis(200)), None);

    // Include current state: one created event per entry, before the response.
    let mut late = HotRod::connect(server.addr, 40);
    let header = late.header();
    let id = late.send(&header, &add_listener(b"late", true, 0));
    let mut state = BTreeSet::new();
    loop {
        let frame = late.read();
        if frame.header.opcode == opcode::EVENT_CREATED {
            assert_eq!(frame.header.message_id, id);
            state.insert(event_fields(&frame).1);
            continue;
        }
        assert_eq!(
            (frame.header.message_id, frame.shape()),
            (id, (Status::Success, vec![]))
        );
        break;
    }
    assert_eq!(state, BTreeSet::from([b"c".to_vec(), b"d".to_vec()]));

    // The first listener saw those writes too, in order.
    let seen: Vec<(u8, Vec<u8>)> = (0..3)
        .map(|_| {
            let event = listening.next_event();
            (event.header.opcode, event_fields(&event).1)
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            (opcode::EVENT_CREATED, b"c".to_vec()),
            (opcode::EVENT_MODIFIED, b"c".to_vec()),
            (opcode::EVENT_CREATED, b"d".to_vec()),
        ]
    );

    // Writes flagged SKIP_LISTENER_NOTIFICATION raise no events.
    assert_eq!(
        writer
            .call_with(flags::SKIP_LISTENER_NOTIFICATION, put("quiet", "1"))
            .status(),
        Status::Success
    );
    assert_eq!(creations.read_within(Duration::from_millis(200)), None);
    // A filter factory the server does not have is a request error; the connection goes on.
    let response = creations.call(Request::AddClientListener {
        listener_id: b("filtered"),
        include_current_state: false,
        filter: Some(weft_hotrod::Factory {
            name: "no-such-filter".into(),
            params: vec![],
        }),
        converter: None,
        raw_data: false,
        interests: 0,
    });
    assert_eq!(
        (response.header.opcode, response.status()),
        (opcode::ERROR, Status::ServerError)
    );
    assert!(response.error_message().contains("no-such-filter"));
    assert_eq!(creations.call(Request::Ping).status(), Status::Success);

    // Removal: 0, then 1 when unknown; no more events.
    let remove = Request::RemoveClientListener {
        listener_id: b(listener_id),
    };
    let response = listening.call(remove.clone());
    assert_eq!(
        (response.header.opcode, response.shape()),
        (0x28, (Status::Success, vec![]))
    );
    assert_eq!(listening.call(remove).status(), Status::NotExecuted);
    assert_eq!(writer.call(put("watched", "3")).status(), Status::Success);
    assert_eq!(listening.read_within(Duration::from_millis(200)), None);
    assert!(listening.events.is_empty(), "{:?}", listening.events);
}

// Proves 1000 requests pipelined in one write are all answered, each matched by its message
// id (large ids included), with the results of sequential execution.
#[test]
fn pipelining_1000_requests() {
    let server = TestServer::start();
    let mut c = HotRod::connect(server.addr, 40);
    let mut bytes = BytesMut::new();
    let mut expected = HashMap::new();
    for i in 0..500u64 {
        let key = format!("p{i}");
        let value = format!("value {i}");
        let id = if i % 2 == 0 {
            i * 1_000_003 + 17
        } else {
            u64::MAX - i
        };
        let header = RequestHeader::new(40, id, "");
        c.encode_into(&mut bytes, &header, &put(&key, &value));
        expected.insert(id, (Status::Success, vec![]));
        let header = RequestHeader::new(40, id ^ (1 << 62), "");
        c.encode_into(&mut bytes, &header, &get(&key));
        expected.insert(id ^ (1 << 62), (Status::Success, array(value.as_bytes())));
    }
    assert_eq!(expected.len(), 1000);
    c.send_raw(&bytes);
    let mut answered = HashMap::new();
    for _ in 0..1000 {
        let response = c.read();
        assert!(
            answered
                .insert(response.header.message_id, response.shape())
                .is_none(),
            "two responses to {}",
            response.header.message_id
        );
    }
    assert_eq!(answered, expected);
    assert_eq!(c.read_within(Duration::from_millis(100)), None);
}

// Proves a 5 MiB value is stored and read back whole, is returned whole as a previous value,
// and does not hold up a small request pipelined behind it.
#[test]
fn five_mib_value() {
    let server = TestServer::start();
    let mut c = HotRod::connect(server.addr, 40);
    let big: Vec<u8> = (0..5 << 20).map(|i: u32| (i % 251) as u8).collect();
    assert_eq!(c.call(put("big", &big)).status(), Status::Success);
    assert_bytes(&c.call(get("big")).value(), &big, "get");
    let version = version_of(&mut c, "big");
    let response = c.call_with(FORCE, put("big", "small"));
    assert_eq!(response.status(), Status::SuccessWithPrevious);
    assert_bytes(
        &response.body,
        &previous(40, Some((version, &big))),
        "previous value",
    );

    let mut bytes = BytesMut::new();
    let header = c.header();
    let big_id = c.encode_into(&mut bytes, &header, &put("big2", &big));
    let header = c.header();
    let small_id = c.encode_into(&mut bytes, &header, &get("big"));
    c.send_raw(&bytes);
    let mut answered = HashMap::new();
    for _ in 0..2 {
        let response = c.read();
        answered.insert(response.header.message_id, response.shape());
    }
    assert_eq!(answered[&big_id], (Status::Success, vec![]));
    assert_eq!(answered[&small_id], (Status::Success, array(b"small")));
    assert_bytes(
        &c.call(get("big2")).value(),
        &big,
        "get of the pipelined put",
    );
}

/// Sends `requests` in one write and returns their responses by message id.
fn pipeline(c: &mut HotRod, requests: &[Request<Bytes>]) -> (Vec<u64>, HashMap<u64, Response>) {
    let mut bytes = BytesMut::new();
    let mut ids = Vec::new();
    for request in requests {
        let header = c.header();
        ids.push(c.encode_into(&mut bytes, &header, request));
    }
    c.send_raw(&bytes);
    let responses = (0..requests.len())
        .map(|_| {
            let response = c.read();
            (response.header.message_id, response)
        })
        .collect::<HashMap<_, _>>();
    assert_eq!(responses.len(), requests.len());
    (ids, responses)
}

// Proves two writes of one key pipelined on one connection take effect in the order sent,
// even when the first is large enough to be served on the blocking pool: after
// put(k, 2 MiB), put(k, "small"), k holds "small" (as in Infinispan, whose local-cache
// writes complete in order on the connection's event loop).
#[test]
fn pipelined_large_put_then_small_put_apply_in_order() {
    let server = TestServer::start();
    let mut c = HotRod::connect(server.addr, 40);
    let big = vec![b'b'; 2 << 20];
    for round in 0..20 {
        let key = format!("ordered-{round}");
        pipeline(&mut c, &[put(&key, &big), put(&key, "small")]);
        assert_bytes(
            &c.call(get(&key)).value(),
            b"small",
            &format!("round {round}: value after put(2 MiB), put(\"small\")"),
        );
    }
}

// Proves a write pipelined behind a clear survives it: after clear, put(k) in one write, k
// is present. (An acknowledged write must not be undone by a request sent before it.)
#[test]
fn pipelined_put_after_clear_survives() {
    let server = TestServer::start();
    let mut c = HotRod::connect(server.addr, 40);
    for round in 0..20 {
        let key = format!("after-clear-{round}");
        let (ids, responses) = pipeline(&mut c, &[Request::Clear, put(&key, "kept")]);
        assert_eq!(responses[&ids[1]].status(), Status::Success);
        assert_eq!(
            c.call(get(&key)).shape(),
            (Status::Success, array(b"kept")),
            "round {round}: the put acknowledged after the clear was undone by it"
        );
    }
}

// Proves a read pipelined behind a bulk write sees it: put-all of 300 entries, then size,
// in one write, counts the 300.
#[test]
fn pipelined_size_after_put_all_sees_it() {
    let server = TestServer::start();
    let mut c = HotRod::connect(server.addr, 40);
    for round in 0..20 {
        let entries = (0..300)
            .map(|i| (b(format!("bulk-{round}-{i}")), b("v")))
            .collect();
        let put_all = Request::PutAll {
            expiration: Expiration::DEFAULT,
            entries,
        };
        let (ids, responses) = pipeline(&mut c, &[put_all, Request::Size]);
        let count = responses[&ids[1]].reader().vlong().unwrap();
        assert_eq!(count, 300, "round {round}: size before the put-all");
        assert_eq!(c.call(Request::Clear).status(), Status::Success);
    }
}

// Proves Hot Rod and RESP see the same entries on the same port: a ProtoStream string key
// and value sent over Hot Rod to the raw-byte `default` cache (RESP database 0) are stored
// as their text, which RESP reads; a value set over RESP comes back to Hot Rod as a
// ProtoStream string.
#[test]
fn hotrod_and_resp_share_entries() {
    let server = TestServer::start();
    let mut c = HotRod::connect(server.addr, 40);
    let protostream = MediaType::Predefined {
        id: 12,
        params: vec![],
    };
    let header = RequestHeader {
        key_type: protostream.clone(),
        value_type: protostream.clone(),
        ..c.header()
    };
    let id = c.send(&header, &put(b"\x4a\x03abc", b"\x4a\x05hello"));
    assert_eq!(c.response_to(id).status(), Status::Success);

    let mut resp = server.client();
    assert_eq!(resp.cmd("GET abc"), Frame::bulk("hello"));
    assert_eq!(resp.cmd("SET abc world"), Frame::ok());

    let header = RequestHeader {
        key_type: protostream.clone(),
        value_type: protostream,
        ..c.header()
    };
    let id = c.send(&header, &get(b"\x4a\x03abc"));
    assert_eq!(c.response_to(id).value(), b"\x4a\x05world");
    // With no media type the request speaks the cache's own: raw bytes.
    assert_eq!(c.call(get("abc")).value(), b"world");
}

// Proves the four reads of one key answer in their own shapes: get (value), getWithVersion
// (version, value), getStream (metadata, value from an offset), and a miss for each; and
// that the SASL mechanism list is empty (no authentication configured).
#[test]
fn read_shapes_and_mechanism_list() {
    let server = TestServer::start();
    let mut c = HotRod::connect(server.addr, 40);
    assert_eq!(c.call(put("shapes", "abcdef")).status(), Status::Success);
    let value = b"abcdef";
    assert_eq!(
        c.call(get("shapes")).shape(),
        (Status::Success, array(value))
    );
    let version = version_of(&mut c, "shapes");
    let with_version = c.call(Request::GetWithVersion { key: b("shapes") });
    let mut reader = with_version.reader();
    assert_eq!(reader.u64().unwrap(), version);
    assert_eq!(reader.array().unwrap(), value);
    let stream = c.call(Request::GetStream {
        key: b("shapes"),
        offset: 2,
    });
    assert_eq!(stream.status(), Status::Success);
    let mut reader = stream.reader();
    assert_eq!(reader.metadata().unwrap().version, version);
    assert_eq!(reader.array().unwrap(), &value[2..]);
    assert_eq!(reader.position(), stream.body.len());
    for miss in [
        Request::GetWithVersion { key: b("none") },
        Request::GetStream {
            key: b("none"),
            offset: 0,
        },
        get("none"),
    ] {
        assert_eq!(c.call(miss).shape(), (Status::KeyDoesNotExist, vec![]));
    }
    let mechanisms = c.call(Request::AuthMechList);
    assert_eq!(mechanisms.shape(), (Status::Success, vec![0]));
}

// Proves a client listener may name a filter factory registered in the server's cache
// manager (`filterFactoryName`, with its marshalled parameters): it sees only the events
// passing the filter, include-current-state lists only the entries passing it, and a
// factory that is not registered, or a converter, is refused with an error.
#[test]
fn listeners_name_registered_filter_factories() {
    use std::sync::Arc;
    use weft_core::listener::EventFilter;
    use weft_hotrod::request::Factory;

    let server = TestServer::start();
    server.manager().event_filters().register(
        "key-prefix",
        Arc::new(|params: &[Vec<u8>]| -> Result<EventFilter, String> {
            let prefix = params.first().cloned().ok_or("a prefix parameter")?;
            Ok(Arc::new(move |event: &weft_core::CacheEvent| {
                event.key().starts_with(&prefix)
            }))
        }),
    );
    let mut writer = HotRod::connect(server.addr, 40);
    for key in ["keep-1", "drop-1"] {
        assert_eq!(writer.call(put(key, "v")).status(), Status::Success);
    }
    let filtered = |id: &[u8], name: &str, current: bool| Request::AddClientListener {
        listener_id: b(id),
        include_current_state: current,
        filter: Some(Factory {
            name: name.to_owned(),
            params: vec![b("keep-")],
        }),
        converter: None,
        raw_data: false,
        interests: 0,
    };

    let mut listening = HotRod::connect(server.addr, 40);
    let header = listening.header();
    let id = listening.send(&header, &filtered(b"filtered", "key-prefix", true));
    let state = listening.read();
    assert_eq!(state.header.opcode, opcode::EVENT_CREATED);
    assert_eq!(state.header.message_id, id);
    assert_eq!(event_fields(&state).1, b"keep-1".to_vec());
    assert_eq!(listening.response_to(id).status(), Status::Success);

    for key in ["drop-2", "keep-2", "drop-3"] {
        assert_eq!(writer.call(put(key, "v")).status(), Status::Success);
    }
    let event = listening.next_event();
    assert_eq!(event_fields(&event).1, b"keep-2".to_vec());
    assert_eq!(listening.read_within(Duration::from_millis(200)), None);

    let refused = listening.call(filtered(b"unknown", "no-such-factory", false));
    assert!(
        refused.error_message().contains("no-such-factory"),
        "{refused:?}"
    );
    let converted = listening.call(Request::AddClientListener {
        listener_id: b(b"converted"),
        include_current_state: false,
        filter: None,
        converter: Some(Factory {
            name: "key-prefix".to_owned(),
            params: Vec::new(),
        }),
        raw_data: false,
        interests: 0,
    });
    assert!(
        converted.error_message().contains("converter"),
        "{converted:?}"
    );
}
