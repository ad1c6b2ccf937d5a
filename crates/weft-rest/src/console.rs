//! The web console at `/console/`: a single page (HTML, one script, one stylesheet, an icon)
//! compiled into the binary, which reads and writes through the REST API and `/metrics`
//! like any other client. Nothing is fetched from elsewhere at run time, and the page gets
//! no power of its own: the files are public, the data behind them needs what every REST
//! request needs (see `docs/console.md`).
//!
//! The responses forbid what the page does not need (a Content-Security-Policy allowing only
//! this origin's script, style and connections, no framing) and are revalidated on each
//! load (`no-cache` with an ETag), so a new server version is never shown stale files.

use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};

/// The mount point; the page's own links are relative to it.
pub(crate) const ROOT: &str = "/console/";

/// One embedded file.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

const ASSETS: &[Asset] = &[
    Asset {
        name: "index.html",
        content_type: "text/html; charset=utf-8",
        body: include_bytes!("../console/index.html"),
    },
    Asset {
        name: "console.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../console/console.js"),
    },
    Asset {
        name: "console.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("../console/console.css"),
    },
    Asset {
        name: "favicon.svg",
        content_type: "image/svg+xml",
        body: include_bytes!("../console/favicon.svg"),
    },
];

/// What the page may load and where it may connect: this origin only.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; \
     base-uri 'none'; frame-ancestors 'none'";

/// Whether `GET`/`HEAD` of `path` is the console's (served to anyone: the files hold no data).
pub(crate) fn is_console_path(path: &str) -> bool {
    path == "/console" || path.starts_with(ROOT)
}

/// `/console`: to `/console/`, so that the page's relative links resolve under it.
pub(crate) async fn redirect() -> Redirect {
    Redirect::permanent(ROOT)
}

/// `/console/`: the page.
pub(crate) async fn index(headers: HeaderMap) -> Response {
    serve("index.html", &headers)
}

/// `/console/{file}`: one of the page's files, else 404.
pub(crate) async fn file(Path(name): Path<String>, headers: HeaderMap) -> Response {
    serve(&name, &headers)
}

fn serve(name: &str, request: &HeaderMap) -> Response {
    let Some(asset) = ASSETS.iter().find(|asset| asset.name == name) else {
        return (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("the console has no file `{name}`"),
        )
            .into_response();
    };
    let etag = etag(asset.body);
    let fresh = request
        .get(header::IF_NONE_MATCH)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|tags| {
            tags.split(',')
                .any(|tag| tag.trim() == etag || tag.trim() == "*")
        });
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(asset.content_type),
            )],
            asset.body,
        )
            .into_response()
    };
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&etag) {
        headers.insert(header::ETAG, value);
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    response
}

/// A strong validator from the file's bytes (FNV-1a: the files are ours, not adversarial).
fn etag(body: &[u8]) -> String {
    let hash = body.iter().fold(0xcbf2_9ce4_8422_2325_u64, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("\"{hash:016x}-{}\"", body.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_the_page_names_is_embedded() {
        let page = std::str::from_utf8(ASSETS[0].body).expect("the page is UTF-8");
        for asset in &ASSETS[1..] {
            assert!(
                page.contains(&format!("\"{}\"", asset.name)),
                "index.html does not load {}",
                asset.name
            );
        }
    }

    #[test]
    fn the_page_builds_nothing_from_html_strings() {
        // Values from the server must reach the page as text, never as markup.
        let script = std::str::from_utf8(ASSETS[1].body).expect("the script is UTF-8");
        for sink in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
        ] {
            assert!(!script.contains(sink), "console.js uses {sink}");
        }
    }

    #[test]
    fn etags_differ_with_content() {
        assert_ne!(etag(b"a"), etag(b"b"));
        assert_eq!(etag(b"a"), etag(b"a"));
    }
}
