//! Reply encoding: exact bytes for every type in RESP2 and RESP3.
#![allow(clippy::unwrap_used)]

use bytes::{Bytes, BytesMut};
use weft_resp::{
    Protocol, Reply, RequestDecoder, write_array_len, write_big_number, write_bool, write_bulk,
    write_bulk_header, write_double, write_error, write_integer, write_map_len, write_null,
    write_null_array, write_push_len, write_request, write_set_len, write_simple, write_verbatim,
};

use Protocol::{Resp2, Resp3};

fn written(write: impl FnOnce(&mut BytesMut)) -> Vec<u8> {
    let mut out = BytesMut::new();
    write(&mut out);
    out.to_vec()
}

#[test]
fn scalar_frames_match_the_spec() {
    // Simple strings, errors, integers and bulks are the same in both versions.
    assert_eq!(written(|o| write_simple(o, "OK")), b"+OK\r\n");
    assert_eq!(
        written(|o| write_error(o, "ERR syntax error")),
        b"-ERR syntax error\r\n"
    );
    assert_eq!(written(|o| write_integer(o, 0)), b":0\r\n");
    assert_eq!(
        written(|o| write_integer(o, i64::MIN)),
        b":-9223372036854775808\r\n"
    );
    assert_eq!(written(|o| write_bulk(o, b"a\r\nb")), b"$4\r\na\r\nb\r\n");
    assert_eq!(written(|o| write_bulk(o, b"")), b"$0\r\n\r\n");
    assert_eq!(written(|o| write_bulk_header(o, 12)), b"$12\r\n");
}

#[test]
fn line_frames_cannot_be_broken_by_embedded_newlines() {
    // CR/LF inside simple strings and errors become spaces; a leading `-` in
    // an error is not doubled.
    assert_eq!(written(|o| write_simple(o, "a\r\nb")), b"+a  b\r\n");
    assert_eq!(
        written(|o| write_error(o, "ERR bad\nthing")),
        b"-ERR bad thing\r\n"
    );
    assert_eq!(
        written(|o| write_error(o, "-WRONGTYPE x")),
        b"-WRONGTYPE x\r\n"
    );
}

#[test]
fn nulls_differ_by_protocol() {
    // RESP2 has typed nulls; RESP3 has one `_`.
    assert_eq!(written(|o| write_null(o, Resp2)), b"$-1\r\n");
    assert_eq!(written(|o| write_null_array(o, Resp2)), b"*-1\r\n");
    assert_eq!(written(|o| write_null(o, Resp3)), b"_\r\n");
    assert_eq!(written(|o| write_null_array(o, Resp3)), b"_\r\n");
}

#[test]
fn aggregate_headers_degrade_to_arrays_in_resp2() {
    // Maps flatten to 2n-element arrays; sets and pushes become arrays.
    assert_eq!(written(|o| write_array_len(o, 3)), b"*3\r\n");
    assert_eq!(written(|o| write_map_len(o, 2, Resp2)), b"*4\r\n");
    assert_eq!(written(|o| write_map_len(o, 2, Resp3)), b"%2\r\n");
    assert_eq!(written(|o| write_set_len(o, 5, Resp2)), b"*5\r\n");
    assert_eq!(written(|o| write_set_len(o, 5, Resp3)), b"~5\r\n");
    assert_eq!(written(|o| write_push_len(o, 3, Resp2)), b"*3\r\n");
    assert_eq!(written(|o| write_push_len(o, 3, Resp3)), b">3\r\n");
}

#[test]
fn resp3_scalars_degrade_like_redis() {
    // Doubles become bulks, booleans integers, verbatim and big numbers bulks.
    assert_eq!(written(|o| write_double(o, 1.5, Resp3)), b",1.5\r\n");
    assert_eq!(written(|o| write_double(o, 1.5, Resp2)), b"$3\r\n1.5\r\n");
    assert_eq!(
        written(|o| write_double(o, f64::INFINITY, Resp3)),
        b",inf\r\n"
    );
    assert_eq!(
        written(|o| write_double(o, f64::NEG_INFINITY, Resp3)),
        b",-inf\r\n"
    );
    assert_eq!(written(|o| write_double(o, f64::NAN, Resp3)), b",nan\r\n");
    assert_eq!(
        written(|o| write_double(o, 3000.0, Resp2)),
        b"$4\r\n3000\r\n"
    );
    assert_eq!(
        written(|o| write_double(o, 1.1, Resp2)),
        b"$18\r\n1.1000000000000001\r\n"
    );
    assert_eq!(written(|o| write_double(o, 1e20, Resp3)), b",1e+20\r\n");
    assert_eq!(written(|o| write_bool(o, true, Resp3)), b"#t\r\n");
    assert_eq!(written(|o| write_bool(o, false, Resp3)), b"#f\r\n");
    assert_eq!(written(|o| write_bool(o, true, Resp2)), b":1\r\n");
    assert_eq!(written(|o| write_bool(o, false, Resp2)), b":0\r\n");
    assert_eq!(
        written(|o| write_verbatim(o, b"txt", b"Some string", Resp3)),
        b"=15\r\ntxt:Some string\r\n"
    );
    assert_eq!(
        written(|o| write_verbatim(o, b"txt", b"Some string", Resp2)),
        b"$11\r\nSome string\r\n"
    );
    assert_eq!(
        written(|o| write_big_number(o, "3492890328409238509324850943850943825024385", Resp3)),
        b"(3492890328409238509324850943850943825024385\r\n"
    );
    assert_eq!(
        written(|o| write_big_number(o, "-12", Resp2)),
        b"$3\r\n-12\r\n"
    );
}

#[test]
fn reply_tree_encodes_nested_values_in_both_protocols() {
    // A tree encodes through the same writers, nested aggregates included.
    let reply = Reply::Map(vec![
        (
            Reply::bulk("name"),
            Reply::Array(vec![Reply::Integer(1), Reply::Null]),
        ),
        (
            Reply::simple("flags"),
            Reply::Set(vec![Reply::Boolean(true), Reply::Double(0.5)]),
        ),
    ]);
    assert_eq!(
        &reply.to_bytes(Resp3)[..],
        b"%2\r\n$4\r\nname\r\n*2\r\n:1\r\n_\r\n+flags\r\n~2\r\n#t\r\n,0.5\r\n"
    );
    assert_eq!(
        &reply.to_bytes(Resp2)[..],
        b"*4\r\n$4\r\nname\r\n*2\r\n:1\r\n$-1\r\n+flags\r\n*2\r\n:1\r\n$3\r\n0.5\r\n"
    );
    let push = Reply::Push(vec![Reply::bulk("message"), Reply::NullArray]);
    assert_eq!(&push.to_bytes(Resp3)[..], b">2\r\n$7\r\nmessage\r\n_\r\n");
    assert_eq!(&push.to_bytes(Resp2)[..], b"*2\r\n$7\r\nmessage\r\n*-1\r\n");
}

#[test]
fn reply_constructors_and_conversions() {
    // The helpers build the variants their names promise.
    assert_eq!(&Reply::ok().to_bytes(Resp2)[..], b"+OK\r\n");
    assert_eq!(&Reply::error("ERR x").to_bytes(Resp3)[..], b"-ERR x\r\n");
    assert_eq!(Reply::from(7_i64), Reply::Integer(7));
    assert_eq!(Reply::from(None::<Bytes>), Reply::Null);
    assert_eq!(
        Reply::from(Some(Bytes::from_static(b"v"))),
        Reply::bulk("v")
    );
    let verbatim = Reply::Verbatim {
        format: *b"mkd",
        text: Bytes::from_static(b"# x"),
    };
    assert_eq!(&verbatim.to_bytes(Resp3)[..], b"=7\r\nmkd:# x\r\n");
}

#[test]
fn encoded_requests_decode_back() {
    // write_request and RequestDecoder are inverses, binary args included.
    let args: Vec<&[u8]> = vec![b"HSET", b"h", b"\x00\xff\r\n", b""];
    let mut buf = BytesMut::new();
    write_request(&mut buf, &args);
    let request = RequestDecoder::default().decode(&mut buf).unwrap().unwrap();
    assert_eq!(
        request.args,
        args.iter()
            .map(|a| Bytes::copy_from_slice(a))
            .collect::<Vec<_>>()
    );
}
