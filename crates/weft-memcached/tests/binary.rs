//! Binary-protocol decoding and response writing: opcodes, quiet variants, length checks,
//! refused bodies, and error responses as memcached 1.6.18 sends them.
#![allow(clippy::unwrap_used)]

use bytes::{BufMut, BytesMut};
use weft_memcached::Limits;
use weft_memcached::binary::{
    BinaryCommand, BinaryDecoder, BinaryProtocolError, BinaryRequest, ResponseHeader, Status,
    StoreMode, opcode, read_response, write_error, write_request, write_response,
};

fn packet(op: u8, extras: &[u8], key: &[u8], value: &[u8], opaque: u32, cas: u64) -> Vec<u8> {
    let mut out = BytesMut::new();
    out.put_u8(0x80);
    out.put_u8(op);
    out.put_u16(key.len() as u16);
    out.put_u8(extras.len() as u8);
    out.put_u8(0);
    out.put_u16(0);
    out.put_u32((extras.len() + key.len() + value.len()) as u32);
    out.put_u32(opaque);
    out.put_u64(cas);
    out.put_slice(extras);
    out.put_slice(key);
    out.put_slice(value);
    out.to_vec()
}

fn decode_one(input: &[u8]) -> Result<Option<BinaryRequest>, BinaryProtocolError> {
    BinaryDecoder::default().decode(&mut BytesMut::from(input))
}

// Proves a SET packet decodes with flags, expiration, CAS, opaque, and its quiet form.
#[test]
fn set_decodes_extras_and_header() {
    let mut extras = 0xdead_beef_u32.to_be_bytes().to_vec();
    extras.extend_from_slice(&100u32.to_be_bytes());
    let request = decode_one(&packet(opcode::SETQ, &extras, b"k", b"value", 7, 99))
        .unwrap()
        .unwrap();
    assert_eq!(
        (request.opcode, request.opaque, request.cas),
        (opcode::SETQ, 7, 99)
    );
    assert_eq!(
        request.command,
        BinaryCommand::Store {
            mode: StoreMode::Set,
            key: "k".into(),
            value: "value".into(),
            flags: 0xdead_beef,
            exptime: 100,
            quiet: true
        }
    );
    assert!(request.is_quiet());
}

// Proves the get family and incr decode their flavours (key returned, quiet, initial value).
#[test]
fn gets_and_arithmetic_decode() {
    for (op, with_key, quiet) in [
        (opcode::GET, false, false),
        (opcode::GETQ, false, true),
        (opcode::GETK, true, false),
        (opcode::GETKQ, true, true),
    ] {
        let request = decode_one(&packet(op, &[], b"key", &[], 1, 0))
            .unwrap()
            .unwrap();
        assert_eq!(
            request.command,
            BinaryCommand::Get {
                key: "key".into(),
                with_key,
                quiet
            }
        );
    }
    let mut extras = 5u64.to_be_bytes().to_vec();
    extras.extend_from_slice(&10u64.to_be_bytes());
    extras.extend_from_slice(&u32::MAX.to_be_bytes());
    let request = decode_one(&packet(opcode::DECREMENTQ, &extras, b"n", &[], 1, 0))
        .unwrap()
        .unwrap();
    assert_eq!(
        request.command,
        BinaryCommand::Arithmetic {
            incr: false,
            key: "n".into(),
            delta: 5,
            initial: 10,
            exptime: u32::MAX,
            quiet: true
        }
    );
    let request = decode_one(&packet(opcode::GATKQ, &9u32.to_be_bytes(), b"t", &[], 1, 0))
        .unwrap()
        .unwrap();
    assert_eq!(
        request.command,
        BinaryCommand::GetAndTouch {
            key: "t".into(),
            exptime: 9,
            with_key: true,
            quiet: true
        }
    );
    let request = decode_one(&packet(opcode::FLUSH, &[], &[], &[], 1, 0))
        .unwrap()
        .unwrap();
    assert_eq!(
        request.command,
        BinaryCommand::Flush {
            exptime: None,
            quiet: false
        }
    );
    let request = decode_one(&packet(opcode::STAT, &[], b"items", &[], 1, 0))
        .unwrap()
        .unwrap();
    assert_eq!(
        request.command,
        BinaryCommand::Stat {
            group: "items".into()
        }
    );
}

// Proves lengths an opcode does not allow close the connection with memcached's statuses.
#[test]
fn invalid_lengths_are_protocol_errors() {
    let invalid = |op, extras: &[u8], key: &[u8], value: &[u8]| {
        decode_one(&packet(op, extras, key, value, 3, 0))
    };
    assert_eq!(
        invalid(opcode::GET, b"1234", b"a", &[]),
        Err(BinaryProtocolError::InvalidArguments {
            opcode: opcode::GET,
            opaque: 3
        })
    );
    assert_eq!(
        invalid(opcode::GET, &[], &[b'k'; 251], &[]),
        Err(BinaryProtocolError::InvalidArguments {
            opcode: opcode::GET,
            opaque: 3
        })
    );
    assert_eq!(
        invalid(opcode::NOOP, &[], b"a", &[]),
        Err(BinaryProtocolError::InvalidArguments {
            opcode: opcode::NOOP,
            opaque: 3
        })
    );
    assert_eq!(
        invalid(opcode::SET, b"1234", b"a", b"v"),
        Err(BinaryProtocolError::InvalidArguments {
            opcode: opcode::SET,
            opaque: 3
        })
    );
    assert_eq!(
        invalid(opcode::TOUCH, &1u32.to_be_bytes(), b"a", b"zz"),
        Err(BinaryProtocolError::InvalidArguments {
            opcode: opcode::TOUCH,
            opaque: 3
        })
    );
    // Key longer than the body: "unknown command", as memcached answers.
    let mut bad = packet(opcode::GET, &[], b"abcdefghij", &[], 1, 0);
    bad[8..12].copy_from_slice(&5u32.to_be_bytes());
    assert_eq!(
        decode_one(&bad),
        Err(BinaryProtocolError::BodyTooShort {
            opcode: opcode::GET,
            opaque: 1
        })
    );
    let mut out = BytesMut::new();
    BinaryProtocolError::BodyTooShort {
        opcode: 0,
        opaque: 1,
    }
    .write_reply(&mut out);
    let response = read_response(&mut out, 1024).unwrap().unwrap();
    assert_eq!(
        (response.status, &response.value[..]),
        (0x81, &b"Unknown command"[..])
    );
    assert_eq!(
        decode_one(&[0x81; 24]),
        Err(BinaryProtocolError::BadMagic(0x81))
    );
}

// Proves unknown opcodes are answerable and their bodies skipped exactly, keeping sync, and
// SASL packets decode to their mechanism and data.
#[test]
fn unsupported_opcodes_skip_their_body() {
    let mut input = packet(0x60, &[], b"k", b"value", 3, 0);
    input.extend(packet(opcode::SASL_AUTH, &[], b"PLAIN", b"\0u\0p", 4, 0));
    input.extend(packet(opcode::SASL_LIST_MECHS, &[], &[], &[], 5, 0));
    input.extend(packet(opcode::VERSION, &[], &[], &[], 6, 0));
    let mut decoder = BinaryDecoder::default();
    let mut buf = BytesMut::from(&input[..]);
    let mut seen = Vec::new();
    while let Some(request) = decoder.decode(&mut buf).unwrap() {
        seen.push((request.opcode, request.opaque, request.command));
    }
    assert_eq!(
        seen,
        vec![
            (0x60, 3, BinaryCommand::Unsupported),
            (
                opcode::SASL_AUTH,
                4,
                BinaryCommand::Sasl {
                    mechanism: bytes::Bytes::from_static(b"PLAIN"),
                    data: bytes::Bytes::from_static(b"\0u\0p"),
                    step: false
                }
            ),
            (opcode::SASL_LIST_MECHS, 5, BinaryCommand::SaslListMechs),
            (opcode::VERSION, 6, BinaryCommand::Version),
        ]
    );
}

// Proves a too-large SET is refused from its header and its value discarded without buffering.
#[test]
fn too_large_value_is_discarded() {
    let limits = Limits {
        item_bytes_max: 1024,
        ..Limits::default()
    };
    let mut decoder = BinaryDecoder::new(limits);
    let full = packet(opcode::SET, &[0; 8], b"big", &[b'x'; 4000], 1, 0);
    let mut buf = BytesMut::from(&full[..40]);
    let request = decoder.decode(&mut buf).unwrap().unwrap();
    assert_eq!(
        request.command,
        BinaryCommand::TooLarge {
            key: "big".into(),
            set: true
        }
    );
    for chunk in full[40..].chunks(500) {
        buf.extend_from_slice(chunk);
        assert_eq!(decoder.decode(&mut buf).unwrap(), None);
        assert!(buf.is_empty());
    }
    buf.extend(packet(opcode::NOOP, &[], &[], &[], 2, 0));
    assert_eq!(
        decoder.decode(&mut buf).unwrap().unwrap().command,
        BinaryCommand::Noop
    );
    let request = BinaryDecoder::new(limits)
        .decode(&mut BytesMut::from(
            &packet(opcode::APPENDQ, &[], b"a", &[b'x'; 2000], 1, 0)[..],
        ))
        .unwrap()
        .unwrap();
    assert_eq!(
        request.command,
        BinaryCommand::TooLarge {
            key: "a".into(),
            set: false
        }
    );
}

// Proves error responses carry memcached's texts and echo opcode and opaque.
#[test]
fn error_responses_match_memcached() {
    for (status, code, text) in [
        (Status::KeyNotFound, 1, "Not found"),
        (Status::KeyExists, 2, "Data exists for key."),
        (Status::ValueTooLarge, 3, "Too large."),
        (Status::InvalidArguments, 4, "Invalid arguments"),
        (Status::ItemNotStored, 5, "Not stored."),
        (
            Status::NonNumeric,
            6,
            "Non-numeric server-side value for incr or decr",
        ),
        (Status::UnknownCommand, 0x81, "Unknown command"),
    ] {
        let mut out = BytesMut::new();
        write_error(&mut out, opcode::ADDQ, 42, status);
        let response = read_response(&mut out, 1024).unwrap().unwrap();
        assert_eq!(
            (
                response.opcode,
                response.status,
                response.opaque,
                response.cas,
                &response.value[..]
            ),
            (opcode::ADDQ, code, 42, 0, text.as_bytes())
        );
        assert_eq!(Status::from_code(code), Some(status));
    }
    let mut out = BytesMut::new();
    let header = ResponseHeader {
        opcode: opcode::GETK,
        status: Status::NoError,
        opaque: 9,
        cas: 77,
    };
    write_response(&mut out, &header, &5u32.to_be_bytes(), b"key", b"value");
    let response = read_response(&mut out, 1024).unwrap().unwrap();
    assert_eq!(
        (
            &response.extras[..],
            &response.key[..],
            &response.value[..],
            response.cas
        ),
        (&5u32.to_be_bytes()[..], &b"key"[..], &b"value"[..], 77)
    );
}

// Proves the request writer produces what the decoder reads back.
#[test]
fn request_writer_round_trips() {
    let request = BinaryRequest::new(
        BinaryCommand::Flush {
            exptime: Some(30),
            quiet: true,
        },
        11,
        0,
    )
    .unwrap();
    let mut out = BytesMut::new();
    write_request(&mut out, &request).unwrap();
    assert_eq!(
        BinaryDecoder::default().decode(&mut out).unwrap(),
        Some(request)
    );
}
