//! Clients' side of authentication for the tests: a users file, HTTP with Basic
//! credentials, SCRAM over Hot Rod's AUTH, and memcached binary packets.

use std::num::NonZeroU32;
use std::path::Path;
use std::time::Duration;

use base64::Engine;
use weft_hotrod::{Request, Status};
use weft_security::credentials::ScramHash;
use weft_security::users::{User, Users};

use super::TestServer;
use super::hotrod::{HotRod, b};

/// A users file in `dir` with these users (name, password, groups).
pub fn users_file(dir: &Path, users: &[(&str, &str, &[&str])]) -> std::path::PathBuf {
    let path = dir.join("users.toml");
    let mut file = Users::load(&path).unwrap();
    for (name, password, groups) in users {
        file.insert(User::new(name, password, groups.iter().map(|g| (*g).to_owned())).unwrap());
    }
    file.save(&path).unwrap();
    path
}

/// `GET path` with optional Basic credentials: the status and the whole answer.
pub fn http(server: &TestServer, path: &str, credentials: Option<(&str, &str)>) -> (u16, String) {
    http_request(server, "GET", path, credentials, "")
}

/// A request with optional Basic credentials and a text body: the status and the whole
/// answer.
pub fn http_request(
    server: &TestServer,
    method: &str,
    path: &str,
    credentials: Option<(&str, &str)>,
    body: &str,
) -> (u16, String) {
    let authorization = credentials.map_or_else(String::new, |(user, password)| {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        format!("Authorization: Basic {token}\r\n")
    });
    http_with_headers(server, method, path, &authorization, body)
}

/// A request with extra header lines (each ending in CRLF) and a text body: the status and
/// the whole answer.
pub fn http_with_headers(
    server: &TestServer,
    method: &str,
    path: &str,
    headers: &str,
    body: &str,
) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(server.addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: x\r\n{headers}Content-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status = answer[9..12].parse().unwrap();
    (status, answer)
}

/// The client side of SCRAM over Hot Rod's AUTH; returns the final response.
pub fn scram(
    client: &mut HotRod,
    mechanism: &str,
    user: &str,
    password: &str,
) -> super::hotrod::Response {
    let hash = ScramHash::of_mechanism(mechanism).unwrap();
    let bare = format!("n={user},r=clientnonce123");
    let first = client.call(Request::Auth {
        mechanism: mechanism.to_owned(),
        response: b(format!("n,,{bare}")),
    });
    assert_eq!(first.status(), Status::Success, "{first:?}");
    let mut reader = first.reader();
    assert_eq!(
        reader.u8().unwrap(),
        0,
        "not complete after the first message"
    );
    let server_first = String::from_utf8(reader.array().unwrap().to_vec()).unwrap();
    let mut fields = server_first.split(',');
    let nonce = fields
        .next()
        .unwrap()
        .strip_prefix("r=")
        .unwrap()
        .to_owned();
    let salt = base64::engine::general_purpose::STANDARD
        .decode(fields.next().unwrap().strip_prefix("s=").unwrap())
        .unwrap();
    let iterations: u32 = fields
        .next()
        .unwrap()
        .strip_prefix("i=")
        .unwrap()
        .parse()
        .unwrap();
    let salted = hash.salted_password(
        password.as_bytes(),
        &salt,
        NonZeroU32::new(iterations).unwrap(),
    );
    let client_key = hash.hmac_of(&salted, b"Client Key");
    let without_proof = format!("c=biws,r={nonce}");
    let auth = format!("{bare},{server_first},{without_proof}");
    let signature = hash.hmac_of(&hash.hash(&client_key), auth.as_bytes());
    let proof: Vec<u8> = client_key
        .iter()
        .zip(&signature)
        .map(|(k, s)| k ^ s)
        .collect();
    let last = format!(
        "{without_proof},p={}",
        base64::engine::general_purpose::STANDARD.encode(proof)
    );
    client.call(Request::Auth {
        mechanism: mechanism.to_owned(),
        response: b(last),
    })
}

pub fn exchange(
    stream: &mut std::net::TcpStream,
    request: &[u8],
    done: impl Fn(&[u8]) -> bool,
) -> Vec<u8> {
    use std::io::{Read, Write};
    stream.write_all(request).unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    while !done(&answer) {
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "closed after {answer:?}");
        answer.extend_from_slice(&buf[..n]);
    }
    answer
}

/// A memcached binary request packet.
pub fn binary(opcode: u8, key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut packet = vec![0x80, opcode];
    packet.extend_from_slice(&u16::try_from(key.len()).unwrap().to_be_bytes());
    packet.extend_from_slice(&[0, 0, 0, 0]);
    packet.extend_from_slice(
        &u32::try_from(key.len() + value.len())
            .unwrap()
            .to_be_bytes(),
    );
    packet.extend_from_slice(&[0; 12]);
    packet.extend_from_slice(key);
    packet.extend_from_slice(value);
    packet
}

/// `(status, value)` of one binary response.
pub fn binary_answer(answer: &[u8]) -> (u16, Vec<u8>) {
    let status = u16::from_be_bytes([answer[6], answer[7]]);
    let body = u32::from_be_bytes([answer[8], answer[9], answer[10], answer[11]]) as usize;
    let extras = answer[4] as usize;
    let key = u16::from_be_bytes([answer[2], answer[3]]) as usize;
    (status, answer[24 + extras + key..24 + body].to_vec())
}

pub fn whole_binary(answer: &[u8]) -> bool {
    answer.len() >= 24
        && answer.len()
            >= 24 + u32::from_be_bytes([answer[8], answer[9], answer[10], answer[11]]) as usize
}
