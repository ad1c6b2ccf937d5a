//! SORT, SORT_RO, DUMP, RESTORE and LCS over real sockets, answered as redis-server 7.0.15
//! answers them: the expected replies were recorded from redis-server 7.0.15 running the
//! same commands on an empty database (DUMP payloads too, byte for byte; the long ones by
//! size and footer, which is the CRC-64 of the rest). RESTORE is checked with payloads
//! redis-server wrote, its options and its refusals, and DUMP → RESTORE round trips of
//! every type. (The random differential run against redis-server, both directions of
//! DUMP/RESTORE included, is interop/resp-python/differential.py.)

#![allow(clippy::unwrap_used)]

mod common;

use common::{Client, Frame, TestServer};

/// A command line as the recordings write them: arguments separated by single spaces, `""`
/// an empty one, `\xNN` a byte; `@CMD|key prefix N x` is CMD key prefix0 … prefix(N-1).
fn args(line: &str) -> Vec<Vec<u8>> {
    if let Some(spec) = line.strip_prefix('@') {
        let parts: Vec<&str> = spec.split(' ').collect();
        let mut out: Vec<Vec<u8>> = parts[0].split('|').map(|p| p.as_bytes().to_vec()).collect();
        let count: usize = parts[2].parse().unwrap();
        out.extend((0..count).map(|i| format!("{}{i}", parts[1]).into_bytes()));
        return out;
    }
    line.split(' ')
        .map(|arg| {
            if arg == "\"\"" {
                return Vec::new();
            }
            let mut out = Vec::new();
            let bytes = arg.as_bytes();
            let mut i = 0;
            while i < bytes.len() {
                if bytes[i] == b'\\' && bytes.get(i + 1) == Some(&b'x') {
                    out.push(u8::from_str_radix(&arg[i + 2..i + 4], 16).unwrap());
                    i += 4;
                } else {
                    out.push(bytes[i]);
                    i += 1;
                }
            }
            out
        })
        .collect()
}

/// A long DUMP payload as recorded: its size and its last 10 bytes (version and CRC-64).
fn footer(len: usize, tail: &[u8]) -> Frame {
    let mut marker = format!("payload of {len} bytes ending ").into_bytes();
    marker.extend_from_slice(tail);
    Frame::Bulk(marker)
}

/// Runs each recorded command and compares the reply (a long payload by size and footer).
fn replay(client: &mut Client, script: &[(&str, Frame)]) {
    for (line, expected) in script {
        let mut got = client.call(&args(line));
        if let (Frame::Bulk(bytes), Frame::Bulk(marker)) = (&got, expected)
            && marker.starts_with(b"payload of ")
        {
            got = footer(bytes.len(), &bytes[bytes.len().saturating_sub(10)..]);
        }
        assert_eq!(&got, expected, "{line}");
    }
}

// Proves SORT and SORT_RO answer as Redis: numeric and ALPHA order, DESC, LIMIT's clamping,
// native order with BY nosort (lists, intsets, sorted sets, DESC and LIMIT on them), weights
// from string keys and hash fields (missing ones as 0 or first), GET with #, hash fields and
// missing keys, patterns cut at their NUL, STORE (replacing, deleting when empty, sets sorted
// when stored), and every error in Redis' words and order.
#[test]
fn sort_answers_as_redis() {
    let server = TestServer::start();
    let mut client = server.client();
    replay(
        &mut client,
        &[
            // numbers, ALPHA, DESC, LIMIT
            ("RPUSH nums 3 1 2 10 -5 1.5 3e0", Frame::Integer(7)),
            (
                "SORT nums",
                Frame::Array(vec![
                    Frame::bulk(b"-5"),
                    Frame::bulk(b"1"),
                    Frame::bulk(b"1.5"),
                    Frame::bulk(b"2"),
                    Frame::bulk(b"3"),
                    Frame::bulk(b"3e0"),
                    Frame::bulk(b"10"),
                ]),
            ),
            (
                "SORT nums DESC",
                Frame::Array(vec![
                    Frame::bulk(b"10"),
                    Frame::bulk(b"3e0"),
                    Frame::bulk(b"3"),
                    Frame::bulk(b"2"),
                    Frame::bulk(b"1.5"),
                    Frame::bulk(b"1"),
                    Frame::bulk(b"-5"),
                ]),
            ),
            (
                "SORT nums ALPHA",
                Frame::Array(vec![
                    Frame::bulk(b"-5"),
                    Frame::bulk(b"1"),
                    Frame::bulk(b"1.5"),
                    Frame::bulk(b"10"),
                    Frame::bulk(b"2"),
                    Frame::bulk(b"3"),
                    Frame::bulk(b"3e0"),
                ]),
            ),
            (
                "SORT nums ALPHA DESC LIMIT 1 3",
                Frame::Array(vec![
                    Frame::bulk(b"3"),
                    Frame::bulk(b"2"),
                    Frame::bulk(b"10"),
                ]),
            ),
            (
                "SORT nums LIMIT 2 -1",
                Frame::Array(vec![
                    Frame::bulk(b"1.5"),
                    Frame::bulk(b"2"),
                    Frame::bulk(b"3"),
                    Frame::bulk(b"3e0"),
                    Frame::bulk(b"10"),
                ]),
            ),
            (
                "SORT nums LIMIT -3 2",
                Frame::Array(vec![Frame::bulk(b"-5"), Frame::bulk(b"1")]),
            ),
            ("SORT nums LIMIT 7 1", Frame::Array(vec![])),
            ("SORT nums LIMIT 0 0", Frame::Array(vec![])),
            // lists, sets and sorted sets left unsorted
            ("RPUSH letters c a b", Frame::Integer(3)),
            (
                "SORT letters BY nosort",
                Frame::Array(vec![
                    Frame::bulk(b"c"),
                    Frame::bulk(b"a"),
                    Frame::bulk(b"b"),
                ]),
            ),
            (
                "SORT letters BY nosort DESC",
                Frame::Array(vec![
                    Frame::bulk(b"b"),
                    Frame::bulk(b"a"),
                    Frame::bulk(b"c"),
                ]),
            ),
            (
                "SORT letters BY nosort LIMIT 1 5",
                Frame::Array(vec![Frame::bulk(b"a"), Frame::bulk(b"b")]),
            ),
            (
                "SORT letters BY nosort DESC LIMIT 1 1",
                Frame::Array(vec![Frame::bulk(b"a")]),
            ),
            ("SADD ints 5 -2 9 0", Frame::Integer(4)),
            (
                "SORT ints",
                Frame::Array(vec![
                    Frame::bulk(b"-2"),
                    Frame::bulk(b"0"),
                    Frame::bulk(b"5"),
                    Frame::bulk(b"9"),
                ]),
            ),
            (
                "SORT ints BY nosort DESC",
                Frame::Array(vec![
                    Frame::bulk(b"-2"),
                    Frame::bulk(b"0"),
                    Frame::bulk(b"5"),
                    Frame::bulk(b"9"),
                ]),
            ),
            ("ZADD z 1 a 5 b 2 c 10 d 3 e", Frame::Integer(5)),
            (
                "SORT z BY nosort",
                Frame::Array(vec![
                    Frame::bulk(b"a"),
                    Frame::bulk(b"c"),
                    Frame::bulk(b"e"),
                    Frame::bulk(b"b"),
                    Frame::bulk(b"d"),
                ]),
            ),
            (
                "SORT z BY nosort DESC LIMIT 1 2",
                Frame::Array(vec![Frame::bulk(b"b"), Frame::bulk(b"e")]),
            ),
            (
                "SORT z ALPHA DESC",
                Frame::Array(vec![
                    Frame::bulk(b"e"),
                    Frame::bulk(b"d"),
                    Frame::bulk(b"c"),
                    Frame::bulk(b"b"),
                    Frame::bulk(b"a"),
                ]),
            ),
            // SORT leaves a sorted set in the skiplist encoding.
            ("OBJECT ENCODING z", Frame::bulk(b"skiplist")),
            // weights from keys and hash fields, GET, #
            ("MSET w_a 3 w_b 1 w_c 2", Frame::Simple("OK".into())),
            ("HSET o_a weight 30 name A", Frame::Integer(2)),
            ("HSET o_b weight 10 name B", Frame::Integer(2)),
            (
                "SORT letters BY w_*",
                Frame::Array(vec![
                    Frame::bulk(b"b"),
                    Frame::bulk(b"c"),
                    Frame::bulk(b"a"),
                ]),
            ),
            (
                "SORT letters BY o_*->weight GET # GET o_*->name GET w_* GET nokey_*",
                Frame::Array(vec![
                    Frame::bulk(b"c"),
                    Frame::NullBulk,
                    Frame::bulk(b"2"),
                    Frame::NullBulk,
                    Frame::bulk(b"b"),
                    Frame::bulk(b"B"),
                    Frame::bulk(b"1"),
                    Frame::NullBulk,
                    Frame::bulk(b"a"),
                    Frame::bulk(b"A"),
                    Frame::bulk(b"3"),
                    Frame::NullBulk,
                ]),
            ),
            (
                "SORT letters BY missing_*",
                Frame::Array(vec![
                    Frame::bulk(b"a"),
                    Frame::bulk(b"b"),
                    Frame::bulk(b"c"),
                ]),
            ),
            (
                "SORT letters BY missing_* ALPHA DESC",
                Frame::Array(vec![
                    Frame::bulk(b"c"),
                    Frame::bulk(b"a"),
                    Frame::bulk(b"b"),
                ]),
            ),
            (
                "SORT letters BY o_*->weight ALPHA",
                Frame::Array(vec![
                    Frame::bulk(b"c"),
                    Frame::bulk(b"b"),
                    Frame::bulk(b"a"),
                ]),
            ),
            (
                "SORT letters BY w_* BY nosort",
                Frame::Array(vec![
                    Frame::bulk(b"c"),
                    Frame::bulk(b"a"),
                    Frame::bulk(b"b"),
                ]),
            ),
            (
                "SORT letters BY nosort BY w_*",
                Frame::Array(vec![
                    Frame::bulk(b"c"),
                    Frame::bulk(b"a"),
                    Frame::bulk(b"b"),
                ]),
            ),
            (
                "SORT letters ALPHA GET #",
                Frame::Array(vec![
                    Frame::bulk(b"a"),
                    Frame::bulk(b"b"),
                    Frame::bulk(b"c"),
                ]),
            ),
            ("SET x:a-> 100", Frame::Simple("OK".into())),
            (
                "SORT letters BY nosort GET x:*->",
                Frame::Array(vec![Frame::NullBulk, Frame::bulk(b"100"), Frame::NullBulk]),
            ),
            (
                "SORT letters ALPHA GET constant",
                Frame::Array(vec![Frame::NullBulk, Frame::NullBulk, Frame::NullBulk]),
            ),
            // STORE
            ("SORT letters BY w_* STORE out", Frame::Integer(3)),
            (
                "LRANGE out 0 -1",
                Frame::Array(vec![
                    Frame::bulk(b"b"),
                    Frame::bulk(b"c"),
                    Frame::bulk(b"a"),
                ]),
            ),
            (
                "SORT letters ALPHA GET o_*->name STORE out2",
                Frame::Integer(3),
            ),
            (
                "LRANGE out2 0 -1",
                Frame::Array(vec![Frame::bulk(b"A"), Frame::bulk(b"B"), Frame::bulk(b"")]),
            ),
            ("SET keep me", Frame::Simple("OK".into())),
            ("SORT emptylist STORE keep", Frame::Integer(0)),
            ("EXISTS keep", Frame::Integer(0)),
            ("SORT letters ALPHA LIMIT 5 5 STORE out", Frame::Integer(0)),
            ("EXISTS out", Frame::Integer(0)),
            ("SADD words b a c aa", Frame::Integer(4)),
            ("SORT words BY nosort STORE sorted", Frame::Integer(4)),
            (
                "LRANGE sorted 0 -1",
                Frame::Array(vec![
                    Frame::bulk(b"a"),
                    Frame::bulk(b"aa"),
                    Frame::bulk(b"b"),
                    Frame::bulk(b"c"),
                ]),
            ),
            // errors
            ("SADD bad 1 2 x", Frame::Integer(3)),
            (
                "SORT bad",
                Frame::error("ERR One or more scores can't be converted into double"),
            ),
            ("MSET s_1 10 s_2 x", Frame::Simple("OK".into())),
            (
                "SORT ints BY s_*",
                Frame::Array(vec![
                    Frame::bulk(b"-2"),
                    Frame::bulk(b"0"),
                    Frame::bulk(b"5"),
                    Frame::bulk(b"9"),
                ]),
            ),
            ("SORT nums LIMIT 1", Frame::error("ERR syntax error")),
            (
                "SORT nums LIMIT a 1",
                Frame::error("ERR value is not an integer or out of range"),
            ),
            ("SORT nums FOO", Frame::error("ERR syntax error")),
            ("SORT_RO nums STORE dst", Frame::error("ERR syntax error")),
            (
                "SORT_RO nums BY nosort",
                Frame::Array(vec![
                    Frame::bulk(b"3"),
                    Frame::bulk(b"1"),
                    Frame::bulk(b"2"),
                    Frame::bulk(b"10"),
                    Frame::bulk(b"-5"),
                    Frame::bulk(b"1.5"),
                    Frame::bulk(b"3e0"),
                ]),
            ),
            ("SET str hello", Frame::Simple("OK".into())),
            (
                "SORT str",
                Frame::error("WRONGTYPE Operation against a key holding the wrong kind of value"),
            ),
            ("HSET h f v", Frame::Integer(1)),
            (
                "SORT h",
                Frame::error("WRONGTYPE Operation against a key holding the wrong kind of value"),
            ),
            ("SORT nums STORE", Frame::error("ERR syntax error")),
            ("RPUSH blanks \\x201 \"\" 2", Frame::Integer(3)),
            ("RPUSH blanks2 1 1\\x20", Frame::Integer(2)),
            (
                "SORT blanks",
                Frame::Array(vec![
                    Frame::bulk(b""),
                    Frame::bulk(b" 1"),
                    Frame::bulk(b"2"),
                ]),
            ),
            (
                "SORT blanks2",
                Frame::error("ERR One or more scores can't be converted into double"),
            ),
            ("SET n:1 1\\x00zz", Frame::Simple("OK".into())),
            ("RPUSH one 1", Frame::Integer(1)),
            ("SORT one BY n:*", Frame::Array(vec![Frame::bulk(b"1")])),
            ("MSET w_x 1 w_y 1 w_z 1", Frame::Simple("OK".into())),
            ("RPUSH ties z x y", Frame::Integer(3)),
            (
                "SORT ties BY w_*",
                Frame::Array(vec![
                    Frame::bulk(b"x"),
                    Frame::bulk(b"y"),
                    Frame::bulk(b"z"),
                ]),
            ),
            (
                "SORT ties BY w_* DESC",
                Frame::Array(vec![
                    Frame::bulk(b"z"),
                    Frame::bulk(b"y"),
                    Frame::bulk(b"x"),
                ]),
            ),
            ("RPUSH nulls a\\x00b a\\x00a a", Frame::Integer(3)),
            (
                "SORT nulls ALPHA",
                Frame::Array(vec![
                    Frame::bulk(b"a\x00b"),
                    Frame::bulk(b"a\x00a"),
                    Frame::bulk(b"a"),
                ]),
            ),
            ("SORT nulls ALPHA STORE nulls_sorted", Frame::Integer(3)),
            (
                "LRANGE nulls_sorted 0 -1",
                Frame::Array(vec![
                    Frame::bulk(b"a"),
                    Frame::bulk(b"a\x00a"),
                    Frame::bulk(b"a\x00b"),
                ]),
            ),
            // A subnormal score read from a listpack as SORT converts the sorted set leaves
            // errno at ERANGE, which fails the weights SORT then reads as text (not the
            // integers). ZADD of a valid score clears errno, as Redis' getDoubleFromObject does.
            ("ZADD zsub 5e-324 1 2 2", Frame::Integer(2)),
            ("ZADD reset 1 x", Frame::Integer(1)),
            (
                "SORT zsub",
                Frame::error("ERR One or more scores can't be converted into double"),
            ),
            ("ZADD reset 1 x", Frame::Integer(0)),
            ("OBJECT ENCODING zsub", Frame::bulk(b"skiplist")),
            (
                "SORT zsub",
                Frame::Array(vec![Frame::bulk(b"1"), Frame::bulk(b"2")]),
            ),
            ("ZADD zsub2 5e-324 1 2 2", Frame::Integer(2)),
            (
                "MSET w_1 10 w_2 5.5 v_1 10 v_2 7",
                Frame::Simple("OK".into()),
            ),
            ("ZADD reset 1 x", Frame::Integer(0)),
            (
                "SORT zsub2 BY v_*",
                Frame::Array(vec![Frame::bulk(b"2"), Frame::bulk(b"1")]),
            ),
            ("ZADD zsub3 5e-324 1 2 2", Frame::Integer(2)),
            ("ZADD reset 1 x", Frame::Integer(0)),
            (
                "SORT zsub3 BY w_*",
                Frame::error("ERR One or more scores can't be converted into double"),
            ),
            ("ZADD zsub4 5e-324 1 2 2", Frame::Integer(2)),
            ("ZADD reset 1 x", Frame::Integer(0)),
            (
                "SORT zsub4 BY nosort",
                Frame::Array(vec![Frame::bulk(b"1"), Frame::bulk(b"2")]),
            ),
            ("ZADD reset 1 x", Frame::Integer(0)),
            (
                "SORT zsub4 ALPHA",
                Frame::Array(vec![Frame::bulk(b"1"), Frame::bulk(b"2")]),
            ),
            // last: an out-of-range weight (Redis then keeps errno at ERANGE, see the docs)
            ("RPUSH floats 1e400 2", Frame::Integer(2)),
            (
                "SORT floats",
                Frame::error("ERR One or more scores can't be converted into double"),
            ),
        ],
    );
}

// Proves DUMP writes the bytes redis-server 7.0.15 writes for strings (each integer width,
// LZF), lists (one node, and LZF-compressed nodes filled by RPUSH and by LPUSH), intsets of
// each width, sorted sets (listpack with integer, text and infinite scores; skiplist;
// a long member), hashes (listpack after an overwrite and a delete) and streams (several
// nodes, entries with and without the master's fields, groups).
#[test]
fn dump_writes_redis_payloads() {
    let server = TestServer::start();
    let mut client = server.client();
    replay(
        &mut client,
        &[
        // strings: raw, integers of each width, a long integer, LZF
        ("SET s0 bar", Frame::Simple("OK".into())),
        ("DUMP s0", Frame::bulk(b"\x00\x03bar\x0a\x00\xe6\xbeI`\xeef\xfd\x17")),
        ("SET s1 12", Frame::Simple("OK".into())),
        ("DUMP s1", Frame::bulk(b"\x00\xc0\x0c\x0a\x00<*\xf8Q\x5c\x04\xbc\xd5")),
        ("SET s2 -129", Frame::Simple("OK".into())),
        ("DUMP s2", Frame::bulk(b"\x00\xc1\x7f\xff\x0a\x00\x17`\x82(T\x80\x84\x80")),
        ("SET s3 70000", Frame::Simple("OK".into())),
        ("DUMP s3", Frame::bulk(b"\x00\xc2p\x11\x01\x00\x0a\x00\x01\xa4\x08\xfe\x950\x95\xa5")),
        ("SET s4 12345678901", Frame::Simple("OK".into())),
        ("DUMP s4", Frame::bulk(b"\x00\x0b12345678901\x0a\x000NR\xd7'\x17e\x10")),
        ("SET s5 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", Frame::Simple("OK".into())),
        ("DUMP s5", Frame::bulk(b"\x00\xc3\x09$\x01aa\xe0\x17\x00\x01aa\x0a\x00]\xb2\xd5\xd7\xf1\x99\xc5\x11")),
        ("SET s6 hello\\x20world,\\x20hello\\x20world,\\x20hello\\x20world!", Frame::Simple("OK".into())),
        ("DUMP s6", Frame::bulk(b"\x00\xc3\x15&\x0dhello world, h\xe0\x0d\x0c\x01d!\x0a\x00\x95\x01!:\xd3\xfd\xe9\x80")),
        ("SET s7 -0", Frame::Simple("OK".into())),
        ("DUMP s7", Frame::bulk(b"\x00\x02-0\x0a\x00\xd5A\x1f\xd9\xd6\xd0P\xcc")),
        ("SET s8 007", Frame::Simple("OK".into())),
        ("DUMP s8", Frame::bulk(b"\x00\x03007\x0a\x00rX\xe2{Li\xba\xd9")),
        ("SET s9 9223372036854775807", Frame::Simple("OK".into())),
        ("DUMP s9", Frame::bulk(b"\x00\x139223372036854775807\x0a\x00:e~\x94\x81\xe8_\x22")),
        ("SET s10 \"\"", Frame::Simple("OK".into())),
        ("DUMP s10", Frame::bulk(b"\x00\x00\x0a\x00]\x9b\x5c@\x0f\x7f\xa2\xda")),
        // lists: one node, and three LZF-compressed nodes
        ("RPUSH l1 a 1 hello 1000 -7 70000 -4096 4095 -32768 8388607 -2147483648 9223372036854775807", Frame::Integer(12)),
        ("DUMP l1", Frame::bulk(b"\x12\x01\x02==\x00\x00\x00\x0c\x00\x81a\x02\x01\x01\x85hello\x06\xc3\xe8\x02\xdf\xf9\x02\xf2p\x11\x01\x04\xd0\x00\x02\xcf\xff\x02\xf1\x00\x80\x03\xf2\xff\xff\x7f\x04\xf3\x00\x00\x00\x80\x05\xf4\xff\xff\xff\xff\xff\xff\xff\x7f\x09\xff\x0a\x00@\x0f=W0g7\x0d")),
        ("@RPUSH|l2 item- 1500 x", Frame::Integer(1500)),
        ("DUMP l2", footer(7446, b"\x0a\x00\xe1*SI\xd6\x0el9")),
        ("@LPUSH|l3 x 900 x", Frame::Integer(900)),
        ("DUMP l3", footer(3667, b"\x0a\x00\xc3\x09\xdb\xe7\xc4\x00\x07p")),
        // sets: intsets of each width
        ("SADD i1 5 -2 9 0", Frame::Integer(4)),
        ("DUMP i1", Frame::bulk(b"\x0b\x10\x02\x00\x00\x00\x04\x00\x00\x00\xfe\xff\x00\x00\x05\x00\x09\x00\x0a\x00'\x05\x86\x823\x1f]\x8b")),
        ("SADD i2 1 100000", Frame::Integer(2)),
        ("DUMP i2", Frame::bulk(b"\x0b\x10\x04\x00\x00\x00\x02\x00\x00\x00\x01\x00\x00\x00\xa0\x86\x01\x00\x0a\x00\xd7\xb5H\xc0\x07ye\x15")),
        ("SADD i3 1 -9223372036854775808", Frame::Integer(2)),
        ("DUMP i3", Frame::bulk(b"\x0b\xc3\x12\x18\x04\x08\x00\x00\x00\x02 \x03\xa0\x00\x01\x80\x01`\x08\x01\x00\x00\x0a\x00#\xc8m\x02#@R\x5c")),
        // sorted sets: listpack (integer, text and special scores), skiplist
        ("ZADD z1 1 a 2.5 b -0 c inf d 1e20 e 0.1 f -inf g 4611686018427387904 h 4611686018427387905 i 5e-324 j", Frame::Integer(10)),
        ("DUMP z1", Frame::bulk(b"\x11\xc3@p@\x82\x1f\x82\x00\x00\x00\x14\x00\x81g\x02\x84-inf\x05\x81c\x02\x00\x01\x81j\x02\x974.940656\x174584124654e-324\x18\x81f\x02\x930.10\xe0\x05\x00\x121\x14\x81a\x02\x01\x01\x81b\x02\x832.5\x04\x81h\x02\xf4 W@\x00\x03@\x09\x81i\xe0\x03\x0c\x0ce\x02\x851e+20\x06\x81d\x02\x83 q\x01\x04\xff\x0a\x00\xbd\x07\xcf\xe7 \x14\xcd\x92")),
        ("ZADD z2 1 m1 2 m2 3 m3 1.5 m4 2.5 m5 100 m6 -100 m7 0 m8 1e-5 m9 3.25 m10 0 n0 1 n1 2 n2 3 n3 4 n4 5 n5 6 n6 7 n7 8 n8 9 n9 10 n10 11 n11 12 n12 13 n13 14 n14 15 n15 16 n16 17 n17 18 n18 19 n19 20 n20 21 n21 22 n22 23 n23 24 n24 25 n25 26 n26 27 n27 28 n28 29 n29 30 n30 31 n31 32 n32 33 n33 34 n34 35 n35 36 n36 37 n37 38 n38 39 n39 40 n40 41 n41 42 n42 43 n43 44 n44 45 n45 46 n46 47 n47 48 n48 49 n49 50 n50 51 n51 52 n52 53 n53 54 n54 55 n55 56 n56 57 n57 58 n58 59 n59 60 n60 61 n61 62 n62 63 n63 64 n64 65 n65 66 n66 67 n67 68 n68 69 n69 70 n70 71 n71 72 n72 73 n73 74 n74 75 n75 76 n76 77 n77 78 n78 79 n79 80 n80 81 n81 82 n82 83 n83 84 n84 85 n85 86 n86 87 n87 88 n88 89 n89 90 n90 91 n91 92 n92 93 n93 94 n94 95 n95 96 n96 97 n97 98 n98 99 n99 100 n100 101 n101 102 n102 103 n103 104 n104 105 n105 106 n106 107 n107 108 n108 109 n109 110 n110 111 n111 112 n112 113 n113 114 n114 115 n115 116 n116 117 n117 118 n118 119 n119 120 n120 121 n121 122 n122 123 n123 124 n124 125 n125 126 n126 127 n127 128 n128 129 n129", Frame::Integer(140)),
        ("DUMP z2", footer(1704, b"\x0a\x00\x17\x1bs\x9e\x12\xe6a3")),
        ("ZADD z3 1 LLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLLL", Frame::Integer(1)),
        ("DUMP z3", Frame::bulk(b"\x05\x01\xc3\x09@F\x01LL\xe09\x00\x01LL\x00\x00\x00\x00\x00\x00\xf0?\x0a\x00{{\x04\xa0\xdc\xa2\x12v")),
        // hashes: listpack, with a field overwritten and one deleted
        ("HSET h1 a 1 b hello c 300 d x", Frame::Integer(4)),
        ("HSET h1 a 2", Frame::Integer(0)),
        ("HDEL h1 c", Frame::Integer(1)),
        ("DUMP h1", Frame::bulk(b"\x10\x1c\x1c\x00\x00\x00\x06\x00\x81a\x02\x02\x01\x81b\x02\x85hello\x06\x81d\x02\x81x\x02\xff\x0a\x000\x97$eiYK8")),
        // streams: several nodes, fields like the master's or not, groups without consumers
        ("CONFIG SET stream-node-max-entries 3", Frame::Simple("OK".into())),
        ("XADD x1 1-1 f v1", Frame::bulk(b"1-1")),
        ("XADD x1 2-2 f v2", Frame::bulk(b"2-2")),
        ("XADD x1 3-0 f v3", Frame::bulk(b"3-0")),
        ("XADD x1 4-1 f v4 g 12", Frame::bulk(b"4-1")),
        ("XADD x1 5-2 f v5", Frame::bulk(b"5-2")),
        ("XADD x1 6-0 f v6", Frame::bulk(b"6-0")),
        ("XADD x1 7-1 f v7", Frame::bulk(b"7-1")),
        ("XADD x1 8-2 f v8 g 12", Frame::bulk(b"8-2")),
        ("XGROUP CREATE x1 g1 3-0", Frame::Simple("OK".into())),
        ("XGROUP CREATE x1 g0 $ ENTRIESREAD 8", Frame::Simple("OK".into())),
        ("DUMP x1", Frame::bulk(b"\x13\x03\x10\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x0177\x00\x00\x00\x14\x00\x03\x01\x00\x01\x01\x01\x81f\x02\x00\x01\x02\x01\x00\x01\x00\x01\x82v1\x03\x04\x01\x02\x01\x01\x01\x01\x01\x82v2\x03\x04\x01\x02\x01\x02\x01\xdf\xff\x02\x82v3\x03\x04\x01\xff\x10\x00\x00\x00\x00\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00\x01\xc3=@F\x11F\x00\x00\x00\x1a\x00\x03\x01\x00\x01\x02\x01\x81f\x02\x81g\x02@\x09\x00\x00 \x01\x06\x82v4\x03\x0c\x01\x05 \x09\x80\x00 \x1d\x04\x82v5\x03\x06 \x10\x04\x02\x01\xdf\xff\x02\xa0\x11\x006 \x11\x00\xff\x10\x00\x00\x00\x00\x00\x00\x00\x07\x00\x00\x00\x00\x00\x00\x00\x0144\x00\x00\x00\x13\x00\x02\x01\x00\x01\x01\x01\x81f\x02\x00\x01\x02\x01\x00\x01\x00\x01\x82v7\x03\x04\x01\x00\x01\x01\x01\x01\x01\x02\x01\x81f\x02\x82v8\x03\x81g\x02\x0c\x01\x08\x01\xff\x08\x08\x02\x01\x01\x00\x00\x08\x02\x02g0\x08\x02\x08\x00\x00\x02g1\x03\x00\x81\xff\xff\xff\xff\xff\xff\xff\xff\x00\x00\x0a\x00\xf4l\xee\xa8u\x9fZ\xc2")),
        ("CONFIG SET stream-node-max-entries 100", Frame::Simple("OK".into())),
        ("DUMP nosuchkey", Frame::NullBulk),
        ],
    );
}

// Proves LCS answers as Redis: the subsequence, LEN, IDX with ranges in Redis' order,
// MINMATCHLEN (negative as 0) and WITHMATCHLEN, missing keys as empty strings, and its
// errors in Redis' order (the keys' type before the options).
#[test]
fn lcs_answers_as_redis() {
    let server = TestServer::start();
    let mut client = server.client();
    replay(
        &mut client,
        &[
            (
                "MSET key1 ohmytext key2 mynewtext",
                Frame::Simple("OK".into()),
            ),
            ("LCS key1 key2", Frame::bulk(b"mytext")),
            ("LCS key1 key2 LEN", Frame::Integer(6)),
            (
                "LCS key1 key2 IDX",
                Frame::Array(vec![
                    Frame::bulk(b"matches"),
                    Frame::Array(vec![
                        Frame::Array(vec![
                            Frame::Array(vec![Frame::Integer(4), Frame::Integer(7)]),
                            Frame::Array(vec![Frame::Integer(5), Frame::Integer(8)]),
                        ]),
                        Frame::Array(vec![
                            Frame::Array(vec![Frame::Integer(2), Frame::Integer(3)]),
                            Frame::Array(vec![Frame::Integer(0), Frame::Integer(1)]),
                        ]),
                    ]),
                    Frame::bulk(b"len"),
                    Frame::Integer(6),
                ]),
            ),
            (
                "LCS key1 key2 IDX MINMATCHLEN 4 WITHMATCHLEN",
                Frame::Array(vec![
                    Frame::bulk(b"matches"),
                    Frame::Array(vec![Frame::Array(vec![
                        Frame::Array(vec![Frame::Integer(4), Frame::Integer(7)]),
                        Frame::Array(vec![Frame::Integer(5), Frame::Integer(8)]),
                        Frame::Integer(4),
                    ])]),
                    Frame::bulk(b"len"),
                    Frame::Integer(6),
                ]),
            ),
            (
                "LCS key1 key2 IDX WITHMATCHLEN MINMATCHLEN -5",
                Frame::Array(vec![
                    Frame::bulk(b"matches"),
                    Frame::Array(vec![
                        Frame::Array(vec![
                            Frame::Array(vec![Frame::Integer(4), Frame::Integer(7)]),
                            Frame::Array(vec![Frame::Integer(5), Frame::Integer(8)]),
                            Frame::Integer(4),
                        ]),
                        Frame::Array(vec![
                            Frame::Array(vec![Frame::Integer(2), Frame::Integer(3)]),
                            Frame::Array(vec![Frame::Integer(0), Frame::Integer(1)]),
                            Frame::Integer(2),
                        ]),
                    ]),
                    Frame::bulk(b"len"),
                    Frame::Integer(6),
                ]),
            ),
            (
                "LCS key1 key2 IDX LEN",
                Frame::error("ERR If you want both the length and indexes, please just use IDX."),
            ),
            ("LCS key1 key2 FOO", Frame::error("ERR syntax error")),
            (
                "LCS key1 key2 MINMATCHLEN",
                Frame::error("ERR syntax error"),
            ),
            (
                "LCS key1 key2 MINMATCHLEN x",
                Frame::error("ERR value is not an integer or out of range"),
            ),
            ("LCS key1 nokey", Frame::bulk(b"")),
            (
                "LCS nokey nokey IDX",
                Frame::Array(vec![
                    Frame::bulk(b"matches"),
                    Frame::Array(vec![]),
                    Frame::bulk(b"len"),
                    Frame::Integer(0),
                ]),
            ),
            (
                "MSET a abcabcabcXYZ b XYZabcabc",
                Frame::Simple("OK".into()),
            ),
            (
                "LCS a b IDX WITHMATCHLEN",
                Frame::Array(vec![
                    Frame::bulk(b"matches"),
                    Frame::Array(vec![Frame::Array(vec![
                        Frame::Array(vec![Frame::Integer(3), Frame::Integer(8)]),
                        Frame::Array(vec![Frame::Integer(3), Frame::Integer(8)]),
                        Frame::Integer(6),
                    ])]),
                    Frame::bulk(b"len"),
                    Frame::Integer(6),
                ]),
            ),
            ("LCS b a", Frame::bulk(b"abcabc")),
            ("RPUSH list x", Frame::Integer(1)),
            (
                "LCS key1 list",
                Frame::error("ERR The specified keys must contain string values"),
            ),
            (
                "LCS list key1 FOO",
                Frame::error("ERR The specified keys must contain string values"),
            ),
            ("SET d1 GTTCGAAGCTTACAAGCTTAG", Frame::Simple("OK".into())),
            ("SET d2 GTAAGATCTCGAACCTTAC", Frame::Simple("OK".into())),
            (
                "LCS d1 d2 IDX WITHMATCHLEN",
                Frame::Array(vec![
                    Frame::bulk(b"matches"),
                    Frame::Array(vec![
                        Frame::Array(vec![
                            Frame::Array(vec![Frame::Integer(16), Frame::Integer(19)]),
                            Frame::Array(vec![Frame::Integer(14), Frame::Integer(17)]),
                            Frame::Integer(4),
                        ]),
                        Frame::Array(vec![
                            Frame::Array(vec![Frame::Integer(13), Frame::Integer(14)]),
                            Frame::Array(vec![Frame::Integer(11), Frame::Integer(12)]),
                            Frame::Integer(2),
                        ]),
                        Frame::Array(vec![
                            Frame::Array(vec![Frame::Integer(12), Frame::Integer(12)]),
                            Frame::Array(vec![Frame::Integer(9), Frame::Integer(9)]),
                            Frame::Integer(1),
                        ]),
                        Frame::Array(vec![
                            Frame::Array(vec![Frame::Integer(10), Frame::Integer(10)]),
                            Frame::Array(vec![Frame::Integer(8), Frame::Integer(8)]),
                            Frame::Integer(1),
                        ]),
                        Frame::Array(vec![
                            Frame::Array(vec![Frame::Integer(9), Frame::Integer(9)]),
                            Frame::Array(vec![Frame::Integer(6), Frame::Integer(6)]),
                            Frame::Integer(1),
                        ]),
                        Frame::Array(vec![
                            Frame::Array(vec![Frame::Integer(5), Frame::Integer(7)]),
                            Frame::Array(vec![Frame::Integer(2), Frame::Integer(4)]),
                            Frame::Integer(3),
                        ]),
                        Frame::Array(vec![
                            Frame::Array(vec![Frame::Integer(2), Frame::Integer(2)]),
                            Frame::Array(vec![Frame::Integer(1), Frame::Integer(1)]),
                            Frame::Integer(1),
                        ]),
                        Frame::Array(vec![
                            Frame::Array(vec![Frame::Integer(0), Frame::Integer(0)]),
                            Frame::Array(vec![Frame::Integer(0), Frame::Integer(0)]),
                            Frame::Integer(1),
                        ]),
                    ]),
                    Frame::bulk(b"len"),
                    Frame::Integer(14),
                ]),
            ),
            ("LCS d1 d2", Frame::bulk(b"GTAAGTTCAACTTA")),
        ],
    );
}

/// Payloads redis-server 7.0.15 DUMPed (and, last, the Redis 5 payload of Redis' own
/// stream-cgroups test).
const REDIS_LZF_STRING: &[u8] =
    b"\x00\xc3\x09$\x01aa\xe0\x17\x00\x01aa\x0a\x00]\xb2\xd5\xd7\xf1\x99\xc5\x11";
const REDIS_LIST: &[u8] = b"\x12\x01\x02\x1e\x1e\x00\x00\x00\x06\x00\x81a\x02\x01\x01\x85hello\x06\xc3\xe8\x02\xdf\xf9\x02\xf2p\x11\x01\x04\xff\x0a\x00\xe1\x8c;\xdb?5\xb1\x8c";
const REDIS_INTSET: &[u8] = b"\x0b\x1c\x04\x00\x00\x00\x05\x00\x00\x00\xfb\xff\xff\xff\x01\x00\x00\x00\x02\x00\x00\x00\x03\x00\x00\x00p\x11\x01\x00\x0a\x00#\xe5\xf3vU\x98a}";
const REDIS_ZSET: &[u8] = b"\x11\xc3;@C\x12C\x00\x00\x00\x0c\x00\x81c\x02\x00\x01\x81f\x02\x930.10\xe0\x05\x00\x1f1\x14\x81a\x02\x01\x01\x81b\x02\x832.5\x04\x81e\x02\x851e+20\x06\x81d\x02\x83inf\x01\x04\xff\x0a\x00\xcf!\xc9\xb7\x98\xd25\x80";
const REDIS_HASH: &[u8] = b"\x10\x16\x16\x00\x00\x00\x04\x00\x81a\x02\x01\x01\x81b\x02\x85hello\x06\xff\x0a\x00\xe8\xc5\xfe\x99\xee\x07\x95]";
/// XADD 1-1 f v, 1-2 f v2, 2-0 g x h 12; XDEL 1-2; XGROUP CREATE g1 0; XREADGROUP alice.
const REDIS_STREAM: &[u8] = b"\x13\x01\x10\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01??\x00\x00\x00\x18\x00\x02\x01\x01\x01\x01\x01\x81f\x02\x00\x01\x02\x01\x00\x01\x00\x01\x81v\x02\x04\x01\x03\x01\x00\x01\x01\x01\x82v2\x03\x04\x01\x00\x01\x01\x01\xdf\xff\x02\x02\x01\x81g\x02\x81x\x02\x81h\x02\x0c\x01\x08\x01\xff\x02\x02\x00\x01\x01\x01\x02\x03\x01\x02g1\x01\x01\x81\xff\xff\xff\xff\xff\xff\xff\xff\x01\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\xa9Mw\x1b\xa2\x01\x00\x00\x01\x01\x05alice\xa9Mw\x1b\xa2\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\x0a\x00~\xe9s\xb8\x04\x9a\x7fm";
const REDIS5_STREAM: &[u8] = b"\x0F\x01\x10\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\xC3\x40\x4A\x40\x57\x16\x57\x00\x00\x00\x23\x00\x02\x01\x04\x01\x01\x01\x84\x64\x61\x74\x61\x05\x00\x01\x03\x01\x00\x20\x01\x03\x81\x61\x02\x04\x20\x0A\x00\x01\x40\x0A\x00\x62\x60\x0A\x00\x02\x40\x0A\x00\x63\x60\x0A\x40\x22\x01\x81\x64\x20\x0A\x40\x39\x20\x0A\x00\x65\x60\x0A\x00\x05\x40\x0A\x00\x66\x20\x0A\x00\xFF\x02\x06\x00\x02\x02\x67\x31\x05\x00\x04\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x3E\xF7\x83\x43\x7A\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x3E\xF7\x83\x43\x7A\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x3E\xF7\x83\x43\x7A\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\x00\x3E\xF7\x83\x43\x7A\x01\x00\x00\x01\x01\x03\x63\x31\x31\x3E\xF7\x83\x43\x7A\x01\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\x00\x02\x67\x32\x00\x00\x00\x00\x09\x00\x3D\x52\xEF\x68\x67\x52\x1D\xFA";

fn restore(client: &mut Client, key: &str, payload: &[u8], options: &[&str]) -> Frame {
    let mut command: Vec<Vec<u8>> =
        vec![b"RESTORE".to_vec(), key.as_bytes().to_vec(), b"0".to_vec()];
    command.push(payload.to_vec());
    command.extend(options.iter().map(|option| option.as_bytes().to_vec()));
    client.call(&command)
}

fn strings(items: &[&str]) -> Frame {
    Frame::Array(items.iter().map(Frame::bulk).collect())
}

// Proves RESTORE loads what redis-server DUMPed — an LZF string, a list, an intset, a
// listpack sorted set (integer, text and infinite scores), a listpack hash, a stream with a
// tombstone, a group and a pending entry, and a Redis 5 stream upgraded as Redis 7.0 does —
// into values that read, and report their encodings, as Redis' do.
#[test]
fn restore_reads_redis_payloads() {
    let server = TestServer::start();
    let mut client = server.client();
    for (key, payload) in [
        ("s", REDIS_LZF_STRING),
        ("l", REDIS_LIST),
        ("i", REDIS_INTSET),
        ("z", REDIS_ZSET),
        ("h", REDIS_HASH),
        ("x", REDIS_STREAM),
        ("old", REDIS5_STREAM),
    ] {
        assert_eq!(
            restore(&mut client, key, payload, &[]),
            Frame::ok(),
            "{key}"
        );
    }
    assert_eq!(client.cmd("GET s"), Frame::bulk("a".repeat(36)));
    assert_eq!(client.cmd("OBJECT ENCODING s"), Frame::bulk("embstr"));
    assert_eq!(
        client.cmd("LRANGE l 0 -1"),
        strings(&["a", "1", "hello", "1000", "-7", "70000"])
    );
    assert_eq!(
        client.cmd("SMEMBERS i"),
        strings(&["-5", "1", "2", "3", "70000"])
    );
    assert_eq!(client.cmd("OBJECT ENCODING i"), Frame::bulk("intset"));
    assert_eq!(
        client.cmd("ZRANGE z 0 -1 WITHSCORES"),
        strings(&[
            "c",
            "0",
            "f",
            "0.10000000000000001",
            "a",
            "1",
            "b",
            "2.5",
            "e",
            "1e+20",
            "d",
            "inf"
        ])
    );
    assert_eq!(client.cmd("OBJECT ENCODING z"), Frame::bulk("listpack"));
    assert_eq!(client.cmd("HGETALL h"), strings(&["a", "1", "b", "hello"]));
    assert_eq!(
        client.cmd("XRANGE x - +"),
        Frame::Array(vec![
            Frame::Array(vec![Frame::bulk("1-1"), strings(&["f", "v"])]),
            Frame::Array(vec![Frame::bulk("2-0"), strings(&["g", "x", "h", "12"])]),
        ])
    );
    let info = client.cmd("XINFO STREAM x").items();
    let field = |info: &[Frame], name: &str| {
        let at = info
            .iter()
            .position(|item| *item == Frame::bulk(name))
            .unwrap();
        info[at + 1].clone()
    };
    assert_eq!(field(&info, "max-deleted-entry-id"), Frame::bulk("1-2"));
    assert_eq!(field(&info, "entries-added"), Frame::Integer(3));
    assert_eq!(field(&info, "radix-tree-keys"), Frame::Integer(1));
    let pending = client.cmd("XPENDING x g1 - + 10").items();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].items()[1], Frame::bulk("alice"));
    // The legacy payload, as Redis' stream-cgroups test checks it.
    let info = client.cmd("XINFO STREAM old FULL").items();
    assert_eq!(field(&info, "max-deleted-entry-id"), Frame::bulk("0-0"));
    assert_eq!(field(&info, "entries-added"), Frame::Integer(2));
    let groups = field(&info, "groups").items();
    let first = groups[0].items();
    assert_eq!(field(&first, "entries-read"), Frame::Integer(1));
    assert_eq!(field(&first, "lag"), Frame::Integer(1));
    let second = groups[1].items();
    assert_eq!(field(&second, "entries-read"), Frame::Integer(0));
    assert_eq!(field(&second, "lag"), Frame::Integer(2));
}

// Proves RESTORE's options and refusals follow Redis in words and order: BUSYKEY before a
// bad TTL, REPLACE, relative and absolute TTLs, a TTL already past (nothing stored, an
// existing key deleted with REPLACE), IDLETIME and FREQ checked then excluding each other,
// unknown options, a wrong checksum or version, and a value that does not load.
#[test]
fn restore_options_and_refusals() {
    let server = TestServer::start();
    let mut client = server.client();
    let payload = client.cmd("DUMP nothing");
    assert_eq!(payload, Frame::NullBulk);
    client.cmd("SET foo bar");
    let payload = client.cmd("DUMP foo").bytes();
    let busy = Frame::error("BUSYKEY Target key name already exists.");
    assert_eq!(restore(&mut client, "foo", &payload, &[]), busy);
    let mut command: Vec<Vec<u8>> = args("RESTORE foo -1 x");
    assert_eq!(client.call(&command), busy);
    command[2] = b"-1".to_vec();
    command.push(b"REPLACE".to_vec());
    assert_eq!(
        client.call(&command),
        Frame::error("ERR Invalid TTL value, must be >= 0")
    );
    command[2] = b"abc".to_vec();
    assert_eq!(
        client.call(&command),
        Frame::error("ERR value is not an integer or out of range")
    );
    command[2] = b"0".to_vec();
    assert_eq!(
        client.call(&command),
        Frame::error("ERR DUMP payload version or checksum are wrong")
    );
    for (options, error) in [
        (
            vec!["IDLETIME", "-1"],
            "ERR Invalid IDLETIME value, must be >= 0",
        ),
        (
            vec!["IDLETIME", "x"],
            "ERR value is not an integer or out of range",
        ),
        (
            vec!["FREQ", "256"],
            "ERR Invalid FREQ value, must be >= 0 and <= 255",
        ),
        (vec!["FREQ", "1", "IDLETIME", "1"], "ERR syntax error"),
        (vec!["IDLETIME", "1", "FREQ", "1"], "ERR syntax error"),
        (vec!["FREQ"], "ERR syntax error"),
        (vec!["BOGUS"], "ERR syntax error"),
    ] {
        assert_eq!(
            restore(&mut client, "foo", &payload, &options),
            Frame::error(error)
        );
    }
    assert_eq!(
        restore(
            &mut client,
            "foo",
            &payload,
            &["REPLACE", "IDLETIME", "1000"]
        ),
        Frame::ok()
    );
    assert_eq!(
        restore(&mut client, "foo", &payload, &["replace", "freq", "100"]),
        Frame::ok()
    );
    client.cmd("DEL foo");
    let mut command = args("RESTORE foo 5000 x");
    command[3] = payload.clone();
    assert_eq!(client.call(&command), Frame::ok());
    let ttl = client.cmd("PTTL foo").int();
    assert!((3000..=5000).contains(&ttl), "{ttl}");
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    command[2] = (now_ms + 3000).to_string().into_bytes();
    command.extend([b"ABSTTL".to_vec(), b"REPLACE".to_vec()]);
    assert_eq!(client.call(&command), Frame::ok());
    let ttl = client.cmd("PTTL foo").int();
    assert!((1000..=3100).contains(&ttl), "{ttl}");
    // A deadline already past: OK, nothing stored, the replaced key gone.
    command[2] = (now_ms - 3000).to_string().into_bytes();
    assert_eq!(client.call(&command), Frame::ok());
    assert_eq!(client.cmd("EXISTS foo"), Frame::Integer(0));
    command.truncate(4);
    command[2] = b"9223372036854775807".to_vec();
    assert_eq!(client.call(&command), Frame::ok());
    assert_eq!(
        client.cmd("EXISTS foo"),
        Frame::Integer(0),
        "the deadline wrapped into the past, as in Redis"
    );
    // Damage: a flipped byte fails the checksum; a good checksum over a bad value does not load.
    let mut flipped = payload.clone();
    flipped[1] ^= 1;
    assert_eq!(
        restore(&mut client, "foo", &flipped, &[]),
        Frame::error("ERR DUMP payload version or checksum are wrong")
    );
    let mut forged = b"\x02\x00".to_vec();
    weft_resp::rdb::seal(&mut forged);
    assert_eq!(
        restore(&mut client, "foo", &forged, &[]),
        Frame::error("ERR Bad data format")
    );
    let mut duplicate = b"\x02\x02\x01a\x01a".to_vec();
    weft_resp::rdb::seal(&mut duplicate);
    assert_eq!(
        restore(&mut client, "foo", &duplicate, &[]),
        Frame::error("ERR Bad data format")
    );
    assert_eq!(client.cmd("EXISTS foo"), Frame::Integer(0));
    // A RESTOREd key is a write WATCH sees.
    let mut other = server.client();
    client.cmd("WATCH bar");
    assert_eq!(restore(&mut other, "bar", &payload, &[]), Frame::ok());
    client.cmd("MULTI");
    client.cmd("PING");
    assert_eq!(client.cmd("EXEC"), Frame::NullArray);
}

/// Every read of `key` that shows its content, for comparing two keys' values.
fn content(client: &mut Client, key: &str) -> Vec<Frame> {
    let mut seen = Vec::new();
    for command in [
        "TYPE",
        "OBJECT ENCODING",
        "GET",
        "LRANGE * 0 -1",
        "SMEMBERS",
        "ZRANGE * 0 -1 WITHSCORES",
        "HGETALL",
        "XRANGE * - +",
        "XINFO STREAM * FULL",
    ] {
        let line = if command.contains('*') {
            command.replace('*', key)
        } else {
            format!("{command} {key}")
        };
        let mut reply = client.cmd(&line);
        if command == "SMEMBERS" {
            if let Frame::Array(items) = &mut reply {
                items.sort_by_key(|item| format!("{item:?}"));
            }
        }
        if command == "HGETALL" {
            if let Frame::Array(items) = &reply {
                let mut pairs: Vec<Vec<Frame>> = items.chunks(2).map(<[Frame]>::to_vec).collect();
                pairs.sort_by_key(|pair| format!("{pair:?}"));
                reply = Frame::Array(pairs.concat());
            }
        }
        seen.push(reply);
    }
    seen
}

// Proves every type DUMPs into a payload that RESTOREs to the same value, encoding and
// stream state: compact and large sets, hashes and sorted sets, lists, and a stream with
// deleted entries, several nodes, groups, consumers and pending entries — whose restored
// copy then takes the same XADDs and trims into the same nodes as the original.
#[test]
fn dump_restore_round_trips() {
    let server = TestServer::start();
    let mut client = server.client();
    let mut setup: Vec<String> = vec![
        "SET str hello".into(),
        "SET num 123456".into(),
        "RPUSH list a b 3 -4".into(),
        "SADD iset 3 1 2".into(),
        "SADD set a b c".into(),
        "ZADD zset 1 a 2.5 b -0 c".into(),
        "HSET hash f v g 12".into(),
    ];
    setup.push(format!(
        "SADD bigset {}",
        (0..600)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(" ")
    ));
    setup.push(format!(
        "ZADD bigzset {}",
        (0..200)
            .map(|i| format!("{i} m{i}"))
            .collect::<Vec<_>>()
            .join(" ")
    ));
    setup.push(format!(
        "HSET bighash {}",
        (0..600)
            .map(|i| format!("f{i} {i}"))
            .collect::<Vec<_>>()
            .join(" ")
    ));
    setup.push(format!(
        "RPUSH biglist {}",
        (0..3000)
            .map(|i| format!("item{i}"))
            .collect::<Vec<_>>()
            .join(" ")
    ));
    for i in 1..=250 {
        setup.push(format!("XADD stream {i}-0 f {i} g x"));
    }
    setup.push("XADD stream 251-0 other 1".into());
    for i in [3, 50, 99, 100, 101, 200, 251] {
        setup.push(format!("XDEL stream {i}-0"));
    }
    setup.push("XGROUP CREATE stream readers 0".into());
    setup.push("XREADGROUP GROUP readers alice COUNT 5 STREAMS stream >".into());
    setup.push("XREADGROUP GROUP readers bob COUNT 3 STREAMS stream >".into());
    setup.push("XGROUP CREATE stream idle $".into());
    for line in &setup {
        let reply = client.cmd(line);
        assert!(!matches!(reply, Frame::Error(_)), "{line}: {reply:?}");
    }
    for key in [
        "str", "num", "list", "iset", "set", "zset", "hash", "bigset", "bigzset", "bighash",
        "biglist", "stream",
    ] {
        let before = content(&mut client, key);
        let payload = client
            .call(&[b"DUMP".to_vec(), key.as_bytes().to_vec()])
            .bytes();
        let copy = format!("{key}-copy");
        assert_eq!(
            restore(&mut client, &copy, &payload, &[]),
            Frame::ok(),
            "{key}"
        );
        let mut after = content(&mut client, &copy);
        // XINFO STREAM FULL names no key: the restored copy must match field for field.
        assert_eq!(before, std::mem::take(&mut after), "{key}");
        // And the copy dumps to the same payload.
        let again = client
            .call(&[b"DUMP".to_vec(), copy.as_bytes().to_vec()])
            .bytes();
        if key != "set" && key != "bigset" && key != "bighash" {
            assert_eq!(payload, again, "{key}");
        }
    }
    // The same later writes shape the original and the copy alike.
    for key in ["stream", "stream-copy"] {
        for i in 300..420 {
            client.cmd(&format!("XADD {key} {i}-0 f {i} g x"));
        }
        client.cmd(&format!("XTRIM {key} MAXLEN ~ 150"));
        client.cmd(&format!("XDEL {key} 305-0"));
        client.cmd(&format!("XTRIM {key} MINID 310-0"));
    }
    assert_eq!(
        content(&mut client, "stream"),
        content(&mut client, "stream-copy")
    );
}
