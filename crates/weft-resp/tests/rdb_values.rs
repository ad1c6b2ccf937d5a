//! DUMP payloads as redis-server 7.0.15 wrote them (captured from `DUMP` on a fresh
//! server): each reads back as its value, and Weft's writers produce the same bytes.

use weft_resp::rdb::value::{self, Value};
use weft_resp::rdb::{RdbError, stream::Stream};

fn bytes(items: &[&str]) -> Vec<Vec<u8>> {
    items.iter().map(|item| item.as_bytes().to_vec()).collect()
}

// Proves strings in each RDB string encoding (raw, 8/16/32-bit integers, a long integer
// kept as text, LZF) read back, and Weft writes the bytes Redis writes.
#[test]
fn strings() {
    let cases: &[(&[u8], &[u8])] = &[
        (b"bar", b"\x00\x03bar\x0a\x00\xe6\xbeI`\xeef\xfd\x17"),
        (b"12", b"\x00\xc0\x0c\x0a\x00<*\xf8Q\x5c\x04\xbc\xd5"),
        (b"-129", b"\x00\xc1\x7f\xff\x0a\x00\x17`\x82(T\x80\x84\x80"),
        (
            b"70000",
            b"\x00\xc2p\x11\x01\x00\x0a\x00\x01\xa4\x08\xfe\x950\x95\xa5",
        ),
        (
            b"12345678901",
            b"\x00\x0b12345678901\x0a\x000NR\xd7'\x17e\x10",
        ),
        (
            b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            b"\x00\xc3\x09$\x01aa\xe0\x17\x00\x01aa\x0a\x00]\xb2\xd5\xd7\xf1\x99\xc5\x11",
        ),
        (
            b"hello world, hello world, hello world!",
            b"\x00\xc3\x15&\x0dhello world, h\xe0\x0d\x0c\x01d!\x0a\x00\x95\x01!:\xd3\xfd\xe9\x80",
        ),
    ];
    for (text, payload) in cases {
        assert_eq!(value::read(payload), Ok(Value::String(text.to_vec())));
        assert_eq!(
            value::dump_string(text),
            *payload,
            "{}",
            String::from_utf8_lossy(text)
        );
    }
    let raw: Vec<u8> = (0..50).collect();
    let payload = value::dump_string(&raw);
    assert_eq!(&payload[..2], b"\x00\x32");
    assert_eq!(&payload[payload.len() - 8..], b"\x96\xdfM\x87\xb2\xd0ML");
}

// Proves a list, an intset, a listpack sorted set (integer, text and LZF-compressed
// scores) and a listpack hash read back and are written as Redis writes them.
#[test]
fn compact_collections() {
    let list = b"\x12\x01\x02\x1e\x1e\x00\x00\x00\x06\x00\x81a\x02\x01\x01\x85hello\x06\xc3\xe8\x02\xdf\xf9\x02\xf2p\x11\x01\x04\xff\x0a\x00\xe1\x8c;\xdb?5\xb1\x8c";
    let items = bytes(&["a", "1", "hello", "1000", "-7", "70000"]);
    assert_eq!(value::read(list), Ok(Value::List(items.clone())));
    assert_eq!(value::dump_list(items.iter().map(Vec::as_slice)), list);

    let intset = b"\x0b\x1c\x04\x00\x00\x00\x05\x00\x00\x00\xfb\xff\xff\xff\x01\x00\x00\x00\x02\x00\x00\x00\x03\x00\x00\x00p\x11\x01\x00\x0a\x00#\xe5\xf3vU\x98a}";
    assert_eq!(
        value::read(intset),
        Ok(Value::Set(bytes(&["-5", "1", "2", "3", "70000"])))
    );
    assert_eq!(value::dump_intset(&[-5, 1, 2, 3, 70000]), intset);

    let zset = b"\x11\xc3;@C\x12C\x00\x00\x00\x0c\x00\x81c\x02\x00\x01\x81f\x02\x930.10\xe0\x05\x00\x1f1\x14\x81a\x02\x01\x01\x81b\x02\x832.5\x04\x81e\x02\x851e+20\x06\x81d\x02\x83inf\x01\x04\xff\x0a\x00\xcf!\xc9\xb7\x98\xd25\x80";
    let members: Vec<(Vec<u8>, f64)> = vec![
        (b"c".to_vec(), 0.0),
        (b"f".to_vec(), 0.1),
        (b"a".to_vec(), 1.0),
        (b"b".to_vec(), 2.5),
        (b"e".to_vec(), 1e20),
        (b"d".to_vec(), f64::INFINITY),
    ];
    assert_eq!(value::read(zset), Ok(Value::SortedSet(members.clone())));
    let mut written: Vec<(&[u8], f64)> = members.iter().map(|(m, s)| (m.as_slice(), *s)).collect();
    written[0].1 = -0.0;
    assert_eq!(value::dump_zset_listpack(written), zset);

    let hash = b"\x10\x16\x16\x00\x00\x00\x04\x00\x81a\x02\x01\x01\x81b\x02\x85hello\x06\xff\x0a\x00\xe8\xc5\xfe\x99\xee\x07\x95]";
    let pairs = vec![
        (b"a".to_vec(), b"1".to_vec()),
        (b"b".to_vec(), b"hello".to_vec()),
    ];
    assert_eq!(value::read(hash), Ok(Value::Hash(pairs.clone())));
    assert_eq!(
        value::dump_hash_listpack(pairs.iter().map(|(f, v)| (f.as_slice(), v.as_slice()))),
        hash
    );
}

// Proves the large encodings are written as Redis writes them: a list of 2,000 elements
// in three LZF-compressed nodes (RPUSH item-0 … item-1999) and a skiplist sorted set of
// 200 members (ZADD i*1.5 m<i>), compared by size and footer (the footer is the CRC-64 of
// everything before it).
#[test]
fn large_encodings() {
    let items: Vec<String> = (0..2000).map(|i| format!("item-{i}")).collect();
    let list = value::dump_list(items.iter().map(String::as_bytes));
    assert_eq!(list.len(), 9976);
    assert_eq!(&list[..4], b"\x12\x03\x02\xc3");
    assert_eq!(&list[list.len() - 10..], b"\x0a\x00\x832\x97\xaf8V\x8au");
    match value::read(&list) {
        Ok(Value::List(read)) => assert_eq!(read.len(), 2000),
        other => panic!("list read back as {other:?}"),
    }

    let members: Vec<(String, f64)> = (0..200)
        .map(|i| (format!("m{i}"), f64::from(i) * 1.5))
        .collect();
    let zset = value::dump_zset(
        members.len(),
        members.iter().rev().map(|(m, s)| (m.as_bytes(), *s)),
    );
    assert_eq!(zset.len(), 2503);
    assert_eq!(
        &zset[zset.len() - 10..],
        b"\x0a\x00\x1a\xbf\xd4N\x13\x07\xef\xf6"
    );
}

// Proves streams read back with their nodes (tombstones included), counters and groups,
// and are written back byte for byte; and that Redis 6's stream encoding is upgraded as
// Redis 7.0 upgrades it (entries added, first ID, the groups' read counters).
#[test]
fn streams() {
    let payload = b"\x13\x01\x10\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01??\x00\x00\x00\x18\x00\x02\x01\x01\x01\x01\x01\x81f\x02\x00\x01\x02\x01\x00\x01\x00\x01\x81v\x02\x04\x01\x03\x01\x00\x01\x01\x01\x82v2\x03\x04\x01\x00\x01\x01\x01\xdf\xff\x02\x02\x01\x81g\x02\x81x\x02\x81h\x02\x0c\x01\x08\x01\xff\x02\x02\x00\x01\x01\x01\x02\x03\x01\x02g1\x01\x01\x81\xff\xff\xff\xff\xff\xff\xff\xff\x01\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\x02\xd1v\x1b\xa2\x01\x00\x00\x01\x01\x05alice\x02\xd1v\x1b\xa2\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\x0a\x00\xc1\x96\xba\x0e\xa4\xf0\x83\xfd";
    let Ok(Value::Stream(stream)) = value::read(payload) else {
        panic!("not a stream");
    };
    assert_eq!(stream.length, 2);
    assert_eq!(stream.nodes.len(), 1);
    let node = &stream.nodes[0];
    assert_eq!(node.entries.len(), 3);
    assert!(node.entries[1].deleted);
    assert_eq!(
        node.entries[2].fields,
        vec![
            (b"g".to_vec(), b"x".to_vec()),
            (b"h".to_vec(), b"12".to_vec())
        ]
    );
    assert_eq!(node.listpack_bytes, 63);
    assert_eq!(stream.groups[0].entries_read, None);
    assert_eq!(stream.groups[0].consumers[0].name, b"alice");
    assert_eq!(value::dump_stream(&stream), payload);

    // Redis 5's payload from Redis' own test (stream-cgroups.tcl, "Loading from legacy"),
    // and what redis-server 7.0 DUMPs after RESTOREing it.
    let legacy = b"\x0F\x01\x10\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\xC3\x40\x4A\x40\x57\x16\x57\x00\x00\x00\x23\x00\x02\x01\x04\x01\x01\x01\x84\x64\x61\x74\x61\x05\x00\x01\x03\x01\x00\x20\x01\x03\x81\x61\x02\x04\x20\x0A\x00\x01\x40\x0A\x00\x62\x60\x0A\x00\x02\x40\x0A\x00\x63\x60\x0A\x40\x22\x01\x81\x64\x20\x0A\x40\x39\x20\x0A\x00\x65\x60\x0A\x00\x05\x40\x0A\x00\x66\x20\x0A\x00\xFF\x02\x06\x00\x02\x02\x67\x31\x05\x00\x04\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x3E\xF7\x83\x43\x7A\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x3E\xF7\x83\x43\x7A\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x3E\xF7\x83\x43\x7A\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\x00\x3E\xF7\x83\x43\x7A\x01\x00\x00\x01\x01\x03\x63\x31\x31\x3E\xF7\x83\x43\x7A\x01\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\x00\x02\x67\x32\x00\x00\x00\x00\x09\x00\x3D\x52\xEF\x68\x67\x52\x1D\xFA";
    let upgraded = b"\x13\x01\x10\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\xc3@J@W\x16W\x00\x00\x00#\x00\x02\x01\x04\x01\x01\x01\x84data\x05\x00\x01\x03\x01\x00 \x01\x03\x81a\x02\x04 \x0a\x00\x01@\x0a\x00b`\x0a\x00\x02@\x0a\x00c`\x0a@\x22\x01\x81d \x0a@9 \x0a\x00e`\x0a\x00\x05@\x0a\x00f \x0a\x00\xff\x02\x06\x00\x05\x00\x00\x00\x02\x02\x02g1\x05\x00\x01\x04\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00>\xf7\x83Cz\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00>\xf7\x83Cz\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00>\xf7\x83Cz\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\x00>\xf7\x83Cz\x01\x00\x00\x01\x01\x03c11>\xf7\x83Cz\x01\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\x00\x02g2\x00\x00\x00\x00\x00\x0a\x00_s\xcbF\xce\x90x\x89";
    let Ok(Value::Stream(old)) = value::read(legacy) else {
        panic!("not a stream");
    };
    assert_eq!(old.entries_added, 2);
    assert_eq!(old.groups[0].entries_read, Some(1));
    assert_eq!(old.groups[1].entries_read, Some(0));
    assert_eq!(value::dump_stream(&old), upgraded);
    assert!(matches!(value::read(upgraded), Ok(Value::Stream(again)) if again == old));
    let _ = Stream::default();
}

// Proves damaged payloads are refused with Redis' two errors and never panic: every
// truncation, every single-bit flip (checksum), and forged bodies with good checksums.
#[test]
fn malformed_payloads() {
    let payload = value::dump_hash_listpack([(&b"a"[..], &b"1"[..])]);
    for cut in 0..payload.len() {
        assert!(value::read(&payload[..cut]).is_err());
    }
    for bit in 0..payload.len() * 8 {
        let mut flipped = payload.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        assert!(value::read(&flipped).is_err(), "bit {bit}");
    }
    let forged = |body: &[u8]| {
        let mut out = body.to_vec();
        weft_resp::rdb::seal(&mut out);
        out
    };
    // A newer RDB version.
    let mut newer = b"\x00\x01a".to_vec();
    newer.extend_from_slice(&11u16.to_le_bytes());
    let crc = weft_resp::rdb::crc64(0, &newer);
    newer.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(value::read(&newer), Err(RdbError::Footer));
    for body in [
        &b"\x08"[..],                                // not an object type
        b"\x06\x01",                                 // a module value
        b"\x09\x00",                                 // a zipmap
        b"\x01\x00",                                 // an empty list
        b"\x02\x00",                                 // an empty set
        b"\x12\x01\x03\x01x",                        // an unknown quicklist container
        b"\x03\x01\x01a\xfd",                        // a NaN score
        b"\x0b\x08\x02\x00\x00\x00\x00\x00\x00\x00", // an empty intset
        b"\x04\x02\x01a\x01b\x01c",                  // a hash cut short
        b"\x00\xc4",                                 // an unknown string encoding
    ] {
        assert_eq!(
            value::read(&forged(body)),
            Err(RdbError::Format),
            "{body:?}"
        );
    }
    // Redis reads into the footer: a string whose length reaches into it still loads.
    assert!(value::read(&forged(b"\x00\x03ab")).is_ok());
}

// Proves tombstones padded for a node whose deleted entries Weft only counts bring its
// listpack to the size Redis' had, for every size in reach, keep the node's last ID, and
// read back as deleted entries that count as the node's deleted ones.
#[test]
fn tombstones_fill_a_node_to_its_size() {
    use weft_resp::rdb::stream::{Entry, Node, StreamId, write_node};
    let master = StreamId { ms: 5, seq: 0 };
    let live = Node {
        master,
        master_fields: vec![b"f".to_vec(), b"g".to_vec()],
        entries: vec![Entry {
            id: master,
            deleted: false,
            fields: vec![
                (b"f".to_vec(), b"1".to_vec()),
                (b"g".to_vec(), b"x".to_vec()),
            ],
        }],
        listpack_bytes: 0,
    };
    let last = StreamId { ms: 9, seq: 3 };
    for deleted in [1usize, 2, 5] {
        let mut smallest = live.clone();
        smallest.add_tombstones(deleted, last, 0);
        let floor = write_node(&smallest).len();
        for target in floor..floor + 5000 {
            let mut node = live.clone();
            node.add_tombstones(deleted, last, target);
            let bytes = write_node(&node);
            assert_eq!(bytes.len(), target, "{deleted} tombstones, {target} bytes");
            assert_eq!(node.entries.last().map(|entry| entry.id), Some(last));
            let mut body = vec![0x13, 1];
            weft_resp::rdb::write_blob(&mut body, &master.to_key());
            weft_resp::rdb::write_blob(&mut body, &bytes);
            body.extend_from_slice(&[1, 9, 3, 5, 0, 9, 3, deleted as u8 + 1, 0]);
            weft_resp::rdb::seal(&mut body);
            let Ok(Value::Stream(stream)) = value::read(&body) else {
                panic!("the padded node reads back");
            };
            let read = &stream.nodes[0];
            assert_eq!(read.entries.iter().filter(|e| e.deleted).count(), deleted);
            assert_eq!(read.listpack_bytes, target);
        }
    }
}
