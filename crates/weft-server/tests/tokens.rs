//! Bearer tokens (`[security.jwt]`): REST's `Authorization: Bearer` with tokens an OpenID
//! provider would sign, checked against its JWKS file; the groups a token lists map to roles;
//! expired, foreign and malformed tokens get `401` with RFC 6750's challenge; OAUTHBEARER is
//! offered to Hot Rod clients only over TLS.

#![allow(clippy::unwrap_used, clippy::missing_panics_doc)]

mod common;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use common::TestServer;
use common::auth::{http_with_headers, users_file};
use common::hotrod::HotRod;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use weft_hotrod::Request;

/// A provider's signing key and the JWKS document that publishes it.
struct Provider {
    key: EncodingKey,
    jwks: String,
}

impl Provider {
    fn new(kid: &str) -> Self {
        let pair = rcgen::KeyPair::generate().unwrap();
        let point = pair.public_key_raw();
        let (x, y) = (&point[1..33], &point[33..65]);
        let jwks = format!(
            r#"{{"keys":[{{"kty":"EC","crv":"P-256","use":"sig","alg":"ES256","kid":"{kid}","x":"{}","y":"{}"}}]}}"#,
            URL_SAFE_NO_PAD.encode(x),
            URL_SAFE_NO_PAD.encode(y)
        );
        Self {
            key: EncodingKey::from_ec_der(&pair.serialize_der()),
            jwks,
        }
    }

    fn token(&self, kid: &str, user: &str, groups: &[&str], expires_in: i64) -> String {
        let now = i64::try_from(jsonwebtoken::get_current_timestamp()).unwrap();
        let claims = serde_json::json!({
            "iss": "https://idp.test", "aud": "weft", "exp": now + expires_in,
            "preferred_username": user, "groups": groups,
        });
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(kid.to_owned());
        jsonwebtoken::encode(&header, &claims, &self.key).unwrap()
    }
}

fn bearer(server: &TestServer, method: &str, path: &str, token: &str, body: &str) -> (u16, String) {
    http_with_headers(
        server,
        method,
        path,
        &format!("Authorization: Bearer {token}\r\n"),
        body,
    )
}

// Proves a valid token authenticates REST requests as its user with the roles of its groups
// (an observer reads, may not write: 403), and expired, unknown-key, foreign-provider and
// malformed tokens are answered 401 with `error="invalid_token"`; Basic credentials of the
// users file still work beside tokens, and a 401 offers both schemes.
#[test]
fn rest_takes_bearer_tokens_from_the_provider() {
    let dir = tempfile::tempdir().unwrap();
    let provider = Provider::new("k1");
    std::fs::write(dir.path().join("jwks.json"), &provider.jwks).unwrap();
    let users = users_file(dir.path(), &[("ada", "ada-pw", &["admin"])]);
    let server = TestServer::start_with(
        "",
        &format!(
            "[security]\nusers-file = \"{}\"\n[security.jwt]\njwks-file = \"{}\"\nissuer = \"https://idp.test\"\naudience = \"weft\"\n",
            users.display(),
            dir.path().join("jwks.json").display()
        ),
    );
    let writer = provider.token("k1", "svc", &["application"], 600);
    let (status, answer) = bearer(&server, "PUT", "/rest/v2/caches/default/k", &writer, "v");
    assert!(status == 204 || status == 200, "{answer}");
    let reader = provider.token("k1", "carol", &["observer"], 600);
    let (status, answer) = bearer(&server, "GET", "/rest/v2/caches/default/k", &reader, "");
    assert_eq!(status, 200, "{answer}");
    assert!(answer.ends_with("v"), "{answer}");
    let (status, answer) = bearer(&server, "PUT", "/rest/v2/caches/default/k", &reader, "w");
    assert_eq!(status, 403, "{answer}");
    assert!(
        answer.contains("ISPN000287") && answer.contains("carol"),
        "{answer}"
    );

    let other = Provider::new("k1");
    for (token, what) in [
        (provider.token("k1", "svc", &["admin"], -3600), "expired"),
        (
            provider.token("k2", "svc", &["admin"], 600),
            "unknown key id",
        ),
        (
            other.token("k1", "svc", &["admin"], 600),
            "another provider's key",
        ),
        ("e30.e30.e30".to_owned(), "malformed"),
    ] {
        let (status, answer) = bearer(&server, "GET", "/rest/v2/caches", &token, "");
        assert_eq!(status, 401, "{what}: {answer}");
        assert!(
            answer.contains("www-authenticate: Bearer realm=\"weft\", error=\"invalid_token\""),
            "{what}: {answer}"
        );
    }
    let (status, answer) = http_with_headers(&server, "GET", "/rest/v2/caches", "", "");
    assert_eq!(status, 401);
    assert!(answer.contains("Basic realm=\"weft\""), "{answer}");
    assert!(answer.contains("Bearer realm=\"weft\""), "{answer}");
    let basic = format!(
        "Authorization: Basic {}\r\n",
        base64::engine::general_purpose::STANDARD.encode("ada:ada-pw")
    );
    assert_eq!(
        http_with_headers(&server, "GET", "/rest/v2/caches", &basic, "").0,
        200
    );
}

// Proves a server with tokens and no users file requires them (protected mode counts them as
// authentication), and offers OAUTHBEARER to Hot Rod clients only over TLS: a plaintext
// client is offered no mechanism it could send a token with.
#[test]
fn tokens_alone_authenticate_and_oauthbearer_needs_tls() {
    let dir = tempfile::tempdir().unwrap();
    let provider = Provider::new("k1");
    std::fs::write(dir.path().join("jwks.json"), &provider.jwks).unwrap();
    let server = TestServer::start_with(
        "",
        &format!(
            "[security]\n[security.jwt]\njwks-file = \"{}\"\n",
            dir.path().join("jwks.json").display()
        ),
    );
    assert_eq!(
        http_with_headers(&server, "GET", "/rest/v2/caches", "", "").0,
        401
    );
    let token = provider.token("k1", "svc", &["observer"], 600);
    assert_eq!(bearer(&server, "GET", "/rest/v2/caches", &token, "").0, 200);
    let mut client = HotRod::connect(server.addr, 31);
    let mechanisms = client.call(Request::AuthMechList);
    let mut reader = mechanisms.reader();
    assert_eq!(
        reader.vint().unwrap(),
        0,
        "nothing to authenticate with in plaintext"
    );

    let config = weft_server::config::ServerConfig::parse(
        "t.toml",
        "[server]\nbind = \"0.0.0.0:0\"\n[security.jwt]\njwks-file = \"jwks.json\"\n",
    )
    .unwrap();
    assert_eq!(config.protected_mode_refusal(), None);
}
