//! Protocol sniffing for the single-port listener: HTTP first, then RESP.

use weft_resp::{DETECT_LINE_MAX, Detection, looks_like_http, looks_like_resp};

#[test]
fn http_request_lines_are_recognised_once_complete() {
    // `METHOD SP target SP HTTP/1.x` + line end is HTTP; a valid prefix waits.
    assert_eq!(
        looks_like_http(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
        Detection::Yes
    );
    assert_eq!(
        looks_like_http(b"PUT /rest/v2/caches/c/k HTTP/1.0\n"),
        Detection::Yes
    );
    assert_eq!(looks_like_http(b"OPTIONS * HTTP/1.1\r\n"), Detection::Yes);
    for prefix in [
        &b""[..],
        b"G",
        b"GET",
        b"GET ",
        b"GET /",
        b"GET / HTTP/1",
        b"GET / HTTP/1.1",
        b"GET / HTTP/1.1\r",
    ] {
        assert_eq!(looks_like_http(prefix), Detection::NeedMore, "{prefix:?}");
    }
}

#[test]
fn resp_traffic_is_not_http() {
    // RESP requests, including inline commands that start like HTTP, fail the
    // HTTP shape as soon as a byte breaks it.
    assert_eq!(looks_like_http(b"*1\r\n$4\r\nPING\r\n"), Detection::No);
    assert_eq!(looks_like_http(b"*"), Detection::No);
    assert_eq!(looks_like_http(b"PING\r\n"), Detection::No);
    assert_eq!(looks_like_http(b"SET k v"), Detection::No);
    assert_eq!(looks_like_http(b"GET key\r\n"), Detection::No);
    assert_eq!(looks_like_http(b"GET / HTTP/2.0\r\n"), Detection::No);
    assert_eq!(looks_like_http(b"GET  / HTTP/1.1\r\n"), Detection::No);
    assert_eq!(looks_like_http(b"GET / HTTP/1.1 \r\n"), Detection::No);
    assert_eq!(looks_like_http(b"\xa0\x01"), Detection::No);
    assert_eq!(looks_like_http(b"\x16\x03\x01"), Detection::No);
}

#[test]
fn http_gives_up_after_the_line_limit() {
    // A valid-looking but endless request line is not HTTP.
    let mut line = b"GET /".to_vec();
    line.resize(DETECT_LINE_MAX, b'a');
    assert_eq!(looks_like_http(&line), Detection::No);
    line.truncate(DETECT_LINE_MAX - 1);
    assert_eq!(looks_like_http(&line), Detection::NeedMore);
}

#[test]
fn multibulk_and_dollar_starts_are_resp_at_once() {
    // `*` or `$` as the first byte decides immediately.
    assert_eq!(looks_like_resp(b"*"), Detection::Yes);
    assert_eq!(looks_like_resp(b"*3\r\n$3\r\nSET"), Detection::Yes);
    assert_eq!(looks_like_resp(b"$"), Detection::Yes);
}

#[test]
fn inline_commands_need_a_printable_line_starting_with_a_letter() {
    // Inline: a letter, printable bytes (UTF-8 allowed), then the newline.
    assert_eq!(looks_like_resp(b"PING\r\n"), Detection::Yes);
    assert_eq!(looks_like_resp(b"set k \"v\\x00\"\n"), Detection::Yes);
    assert_eq!(looks_like_resp("SET k ñ\r\n".as_bytes()), Detection::Yes);
    assert_eq!(looks_like_resp(b""), Detection::NeedMore);
    assert_eq!(looks_like_resp(b"PIN"), Detection::NeedMore);
    assert_eq!(looks_like_resp(b"PING\r"), Detection::NeedMore);
    assert_eq!(looks_like_resp(b"PING\rX"), Detection::No);
    assert_eq!(looks_like_resp(b"PI\x00NG\r\n"), Detection::No);
    assert_eq!(looks_like_resp(b"1PING\r\n"), Detection::No);
    assert_eq!(looks_like_resp(b"\r\nPING\r\n"), Detection::No);
    assert_eq!(looks_like_resp(b"\xa0\x01\x02"), Detection::No);
    let mut long = b"SET k ".to_vec();
    long.resize(DETECT_LINE_MAX, b'v');
    assert_eq!(looks_like_resp(&long), Detection::Yes);
}

#[test]
fn http_request_line_also_passes_resp_check() {
    // Documents why the server must ask looks_like_http first.
    let line = b"GET / HTTP/1.1\r\n";
    assert_eq!(looks_like_http(line), Detection::Yes);
    assert_eq!(looks_like_resp(line), Detection::Yes);
}

mod stability {
    use proptest::prelude::*;
    use weft_resp::{Detection, looks_like_http, looks_like_resp};

    fn arb_first_bytes() -> impl Strategy<Value = Vec<u8>> {
        let fragment = prop_oneof![
            Just(b"GET".to_vec()),
            Just(b" ".to_vec()),
            Just(b"/".to_vec()),
            Just(b"HTTP/1.".to_vec()),
            Just(b"1".to_vec()),
            Just(b"\r".to_vec()),
            Just(b"\n".to_vec()),
            Just(b"*".to_vec()),
            prop::collection::vec(any::<u8>(), 1..4),
        ];
        prop::collection::vec(fragment, 0..12).prop_map(|parts| parts.concat())
    }

    proptest! {
        #[test]
        fn a_verdict_never_changes_as_more_bytes_arrive(data in arb_first_bytes()) {
            // Once a sniffer says Yes or No for a prefix, every longer input
            // gets the same answer, so the server may decide early.
            for sniff in [looks_like_http as fn(&[u8]) -> Detection, looks_like_resp] {
                let full = sniff(&data);
                for len in 0..=data.len() {
                    let early = sniff(&data[..len]);
                    if early != Detection::NeedMore {
                        prop_assert_eq!(early, full, "prefix of {} bytes", len);
                    }
                }
            }
        }
    }
}
