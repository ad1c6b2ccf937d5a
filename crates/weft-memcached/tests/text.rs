//! Text-protocol decoding: every command, memcached's validation order and error lines, and
//! where the stream resumes after each error (checked against memcached 1.6.18's answers).
#![allow(clippy::unwrap_used)]

use bytes::BytesMut;
use weft_memcached::text::{GetKind, StoreMode, TextCommand, TextError, TextProtocolError};
use weft_memcached::{Limits, TextDecoder, TextRequest};

/// Decodes everything in `input` (all at once), returning the requests and the final error.
fn decode_all(input: &[u8]) -> (Vec<TextRequest>, Option<TextProtocolError>, usize) {
    decode_with(input, Limits::default())
}

fn decode_with(
    input: &[u8],
    limits: Limits,
) -> (Vec<TextRequest>, Option<TextProtocolError>, usize) {
    let mut decoder = TextDecoder::new(limits);
    let mut buf = BytesMut::from(input);
    let mut requests = Vec::new();
    loop {
        match decoder.decode(&mut buf) {
            Ok(Some(request)) => requests.push(request),
            Ok(None) => return (requests, None, buf.len()),
            Err(error) => return (requests, Some(error), buf.len()),
        }
    }
}

fn commands(input: &[u8]) -> Vec<TextCommand> {
    decode_all(input).0.into_iter().map(|r| r.command).collect()
}

fn one(input: &[u8]) -> TextRequest {
    let (requests, error, rest) = decode_all(input);
    assert_eq!(error, None);
    assert_eq!(rest, 0, "left over");
    assert_eq!(requests.len(), 1, "{requests:?}");
    requests.into_iter().next().unwrap()
}

fn rejected(error: TextError) -> TextCommand {
    TextCommand::Rejected(error)
}

// Proves every storage command is decoded with its key, flags, expiration and data.
#[test]
fn storage_commands_carry_their_data_block() {
    for (line, mode) in [
        (&b"set"[..], StoreMode::Set),
        (b"add", StoreMode::Add),
        (b"replace", StoreMode::Replace),
        (b"append", StoreMode::Append),
        (b"prepend", StoreMode::Prepend),
    ] {
        let mut input = line.to_vec();
        input.extend_from_slice(b" k 4294967295 -5 3\r\na\r\n\r\n");
        let request = one(&input);
        assert!(!request.noreply);
        let TextCommand::Store {
            mode: got,
            key,
            flags,
            exptime,
            value,
        } = request.command
        else {
            panic!("{:?}", request.command)
        };
        assert_eq!(
            (got, &key[..], flags, exptime, &value[..]),
            (mode, &b"k"[..], u32::MAX, -5, &b"a\r\n"[..])
        );
    }
    let request = one(b"cas k 1 2 3 18446744073709551615 noreply\r\nabc\r\n");
    assert!(request.noreply);
    assert!(matches!(
        request.command,
        TextCommand::Store {
            mode: StoreMode::Cas(u64::MAX),
            ..
        }
    ));
}

// Proves `noreply` is recognised only as the last token, and any sixth token is accepted.
#[test]
fn noreply_is_the_last_token() {
    assert!(one(b"set k 0 0 1 noreply\r\nx\r\n").noreply);
    let other = one(b"set k 0 0 1 foo\r\nx\r\n");
    assert!(!other.noreply);
    assert!(matches!(other.command, TextCommand::Store { .. }));
    assert!(one(b"delete k noreply\r\n").noreply);
    assert!(one(b"incr k 1 noreply\r\n").noreply);
    assert!(one(b"touch k 1 noreply\r\n").noreply);
    assert!(one(b"flush_all noreply\r\n").noreply);
    assert!(one(b"flush_all 5 noreply\r\n").noreply);
    assert!(one(b"verbosity 1 noreply\r\n").noreply);
}

// Proves retrievals take any number of keys (beyond 23 tokens), with repeats and extra spaces.
#[test]
fn retrievals_take_many_keys() {
    let keys: Vec<String> = (0..40).map(|i| format!("key{i}")).collect();
    let line = format!("get {}\r\n", keys.join(" "));
    let TextCommand::Get { kind, keys: got } = one(line.as_bytes()).command else {
        panic!()
    };
    assert_eq!(kind, GetKind::Get);
    assert_eq!(
        got.iter()
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .collect::<Vec<_>>(),
        keys
    );

    let TextCommand::Get { kind, keys } = one(b"gets  a   a  \r\n").command else {
        panic!()
    };
    assert_eq!((kind, keys.len()), (GetKind::Gets, 2));
    let TextCommand::Get { kind, keys } = one(b"gat 10\r\n").command else {
        panic!()
    };
    assert_eq!((kind, keys.is_empty()), (GetKind::Gat(10), true));
    let TextCommand::Get { kind, keys } = one(b"gats -1 x y\r\n").command else {
        panic!()
    };
    assert_eq!((kind, keys.len()), (GetKind::Gats(-1), 2));
}

// Proves keys may hold tabs and control bytes (only spaces split), and a NUL ends the line.
#[test]
fn keys_split_on_spaces_only_and_nul_ends_the_line() {
    let TextCommand::Get { keys, .. } = one(b"get a\tb c\x01d\r\n").command else {
        panic!()
    };
    assert_eq!(
        keys.iter().collect::<Vec<_>>(),
        vec![&b"a\tb"[..], &b"c\x01d"[..]]
    );
    let TextCommand::Get { keys, .. } = one(b"get k\x00junk more\r\n").command else {
        panic!()
    };
    assert_eq!(keys.iter().collect::<Vec<_>>(), vec![&b"k"[..]]);
    // A lone `\n` line ends commands too, and `\r` before it is dropped.
    assert!(matches!(one(b"version\n").command, TextCommand::Version));
    assert!(matches!(
        one(b"set k 0 0 3\r\r\nabc\r\n").command,
        TextCommand::Store { .. }
    ));
}

// Proves the answers to malformed lines are memcached's, in memcached's order.
#[test]
fn malformed_lines_get_memcached_errors() {
    let long_key = "k".repeat(251);
    let cases: Vec<(Vec<u8>, TextCommand)> = vec![
        (b"\r\n".to_vec(), rejected(TextError::Error)),
        (b"\n".to_vec(), rejected(TextError::Error)),
        (b"x\r\n".to_vec(), rejected(TextError::Error)),
        (b"GET k\r\n".to_vec(), rejected(TextError::Error)),
        (b"get\r\n".to_vec(), rejected(TextError::Error)),
        (b"mn\r\n".to_vec(), rejected(TextError::Error)),
        (
            format!("get a {long_key}\r\n").into_bytes(),
            rejected(TextError::BadCommandLineFormat),
        ),
        (
            b"gat abc k\r\n".to_vec(),
            rejected(TextError::InvalidExptime),
        ),
        (b"incr k -1\r\n".to_vec(), rejected(TextError::InvalidDelta)),
        (
            b"incr k 18446744073709551616\r\n".to_vec(),
            rejected(TextError::InvalidDelta),
        ),
        (b"incr\r\n".to_vec(), rejected(TextError::Error)),
        (b"decr k\r\n".to_vec(), rejected(TextError::Error)),
        (
            b"touch k abc\r\n".to_vec(),
            rejected(TextError::InvalidExptime),
        ),
        (b"touch k\r\n".to_vec(), rejected(TextError::Error)),
        (b"delete\r\n".to_vec(), rejected(TextError::Error)),
        (b"delete k 1\r\n".to_vec(), rejected(TextError::DeleteUsage)),
        (
            b"delete k 0 x\r\n".to_vec(),
            rejected(TextError::DeleteUsage),
        ),
        (
            format!("delete {long_key}\r\n").into_bytes(),
            rejected(TextError::BadCommandLineFormat),
        ),
        (
            b"flush_all abc\r\n".to_vec(),
            rejected(TextError::InvalidExptime),
        ),
        (b"flush_all 1 2 3\r\n".to_vec(), rejected(TextError::Error)),
        (b"verbosity\r\n".to_vec(), rejected(TextError::Error)),
        (
            b"verbosity abc\r\n".to_vec(),
            rejected(TextError::BadCommandLineFormat),
        ),
        (
            b"set a b c d e f g h i j k l m n o p q r s t u v w x y z\r\n".to_vec(),
            rejected(TextError::Error),
        ),
    ];
    for (input, expected) in cases {
        let (requests, error, _) = decode_all(&input);
        assert_eq!(error, None, "{}", String::from_utf8_lossy(&input));
        assert_eq!(
            requests.first().map(|r| &r.command),
            Some(&expected),
            "{}",
            String::from_utf8_lossy(&input)
        );
    }
}

// Proves a refused storage line leaves its data block to be read as a command, as memcached does.
#[test]
fn refused_storage_line_does_not_consume_the_data() {
    let long_key = "k".repeat(251);
    for line in [
        format!("set {long_key} 0 0 3\r\n"),
        "set k 0 0 -1\r\n".to_owned(),
        "set k abc 0 3\r\n".to_owned(),
        "set k -1 0 3\r\n".to_owned(),
        "cas k 0 0 3 abc\r\n".to_owned(),
    ] {
        let input = format!("{line}abc\r\n");
        assert_eq!(
            commands(input.as_bytes()),
            vec![
                rejected(TextError::BadCommandLineFormat),
                rejected(TextError::Error)
            ],
            "{line}"
        );
    }
    assert_eq!(
        commands(b"cas k 0 0 1\r\nx\r\n"),
        vec![rejected(TextError::Error), rejected(TextError::Error)]
    );
}

// Proves a data block of the wrong length is consumed by its declared length, then reading resumes.
#[test]
fn bad_data_chunk_consumes_the_declared_length() {
    let (requests, error, rest) = decode_all(b"set k 0 0 3 noreply\r\nabcde\r\nget k\r\n");
    assert_eq!((error, rest), (None, 0));
    assert_eq!(
        requests[0],
        TextRequest {
            command: rejected(TextError::BadDataChunk),
            noreply: true
        }
    );
    assert_eq!(requests[1].command, rejected(TextError::Error));
    assert!(matches!(requests[2].command, TextCommand::Get { .. }));
}

// Proves a too-large item is refused at once and its data discarded as it arrives, even in pieces.
#[test]
fn too_large_item_is_swallowed() {
    let limits = Limits {
        item_bytes_max: 1024,
        ..Limits::default()
    };
    let mut decoder = TextDecoder::new(limits);
    let mut buf = BytesMut::from(&b"set big 0 0 5000\r\n"[..]);
    let request = decoder.decode(&mut buf).unwrap().unwrap();
    assert!(
        matches!(request.command, TextCommand::TooLarge { mode: StoreMode::Set, ref key } if &key[..] == b"big")
    );
    for _ in 0..5 {
        buf.extend_from_slice(&[b'x'; 1000]);
        assert_eq!(decoder.decode(&mut buf).unwrap(), None);
        assert!(buf.is_empty(), "data is discarded, not buffered");
    }
    buf.extend_from_slice(b"\r\nversion\r\n");
    assert_eq!(
        decoder.decode(&mut buf).unwrap().unwrap().command,
        TextCommand::Version
    );
    // The boundary is memcached's item rule.
    let largest = 1024 - 56 - 2 - 2;
    let mut fits = format!("set k 0 0 {largest}\r\n").into_bytes();
    fits.extend(std::iter::repeat_n(b'x', largest));
    fits.extend_from_slice(b"\r\n");
    assert!(matches!(
        decode_with(&fits, limits).0[0].command,
        TextCommand::Store { .. }
    ));
    let over = format!("set k 0 0 {}\r\n", 1024 - 56 - 2 - 1);
    assert!(matches!(
        decode_with(over.as_bytes(), limits).0[0].command,
        TextCommand::TooLarge { .. }
    ));
}

// Proves lines over 2048 bytes close the connection, except get/gets which may be longer.
#[test]
fn long_lines_are_refused_except_multigets() {
    let long = format!("set {}\r\n", "x".repeat(3000));
    assert_eq!(
        decode_all(long.as_bytes()).1,
        Some(TextProtocolError::LineTooLong)
    );
    // Without a newline at all, the verdict comes once the limit is passed.
    assert_eq!(
        decode_all(&[b'a'; 2049]).1,
        Some(TextProtocolError::LineTooLong)
    );
    assert_eq!(decode_all(&[b'a'; 2048]).1, None);
    let keys: Vec<String> = (0..1000).map(|i| format!("key{i:05}")).collect();
    for command in ["get", "gets", "   get"] {
        let line = format!("{command} {}\r\n", keys.join(" "));
        let TextCommand::Get { keys: got, .. } = one(line.as_bytes()).command else {
            panic!()
        };
        assert_eq!(got.len(), 1000);
    }
    let gat = format!("gat 0 {}\r\n", keys.join(" "));
    assert_eq!(
        decode_all(gat.as_bytes()).1,
        Some(TextProtocolError::LineTooLong)
    );
}

// Proves an HTTP request line on a memcached connection is a protocol error (memcached hangs up).
#[test]
fn http_request_line_is_refused() {
    assert_eq!(
        decode_all(b"GET / HTTP/1.1\r\n").1,
        Some(TextProtocolError::HttpRequest)
    );
}

// Proves stats, flush_all, version, quit and verbosity decode with their arguments.
#[test]
fn other_commands_decode() {
    assert_eq!(
        one(b"stats\r\n").command,
        TextCommand::Stats {
            group: None,
            argument: None
        }
    );
    let TextCommand::Stats { group, argument } = one(b"stats detail on\r\n").command else {
        panic!()
    };
    assert_eq!(
        (group.as_deref(), argument.as_deref()),
        (Some(&b"detail"[..]), Some(&b"on"[..]))
    );
    assert_eq!(
        one(b"flush_all\r\n").command,
        TextCommand::FlushAll { delay: 0 }
    );
    assert_eq!(
        one(b"flush_all 10 20\r\n").command,
        TextCommand::FlushAll { delay: 10 }
    );
    assert_eq!(one(b"version foo\r\n").command, TextCommand::Version);
    assert_eq!(one(b"quit\r\n").command, TextCommand::Quit);
    assert_eq!(
        one(b"verbosity 4294967296\r\n").command,
        TextCommand::Verbosity { level: 0 }
    );
    assert_eq!(
        one(b"incr k +3\r\n").command,
        TextCommand::Arithmetic {
            incr: true,
            key: "k".into(),
            delta: 3
        }
    );
}

// Proves a request split at every possible point decodes the same as when sent whole.
#[test]
fn split_reads_give_the_same_requests() {
    let input = b"set k 1 2 5\r\nhello\r\nget k a\r\nincr n 5 noreply\r\nset k 0 0 3\r\nabcde\r\nversion\r\n";
    let (whole, error, _) = decode_all(input);
    assert_eq!(error, None);
    for split in 0..input.len() {
        let mut decoder = TextDecoder::default();
        let mut buf = BytesMut::from(&input[..split]);
        let mut got = Vec::new();
        while let Some(request) = decoder.decode(&mut buf).unwrap() {
            got.push(request);
        }
        buf.extend_from_slice(&input[split..]);
        while let Some(request) = decoder.decode(&mut buf).unwrap() {
            got.push(request);
        }
        assert_eq!(got, whole, "split at {split}");
    }
}
