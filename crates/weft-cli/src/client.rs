//! HTTP/1.1 to one server's REST API, plaintext or TLS, with HTTP Basic credentials: one
//! connection per request (the shell sends a request every few seconds at most, and a
//! connection of its own per request survives a server restart between two commands).
//! Blocking on the outside, so the shell stays a plain loop; hyper and rustls inside, on a
//! runtime of one thread.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};

use crate::error::CliError;

/// Port of a server URL that names none: Weft's (and Infinispan's) single port.
pub const PORT_DEFAULT: u16 = 11222;
/// How long a connection may take to open (TCP and TLS).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a request may take, from sending it to the last byte of the answer.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// Largest answer read: the largest value a cache holds (512 MiB) and room for its headers;
/// listings are cut by the server's `limit`.
pub const RESPONSE_BYTES_MAX: usize = 513 << 20;

/// A server's address as the user gave it: `host:port`, `http://host[:port]` or
/// `https://host[:port]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerUrl {
    /// Whether to speak TLS.
    pub tls: bool,
    /// Host name or IP address (without brackets).
    pub host: String,
    /// Port.
    pub port: u16,
}

impl ServerUrl {
    /// Parses `text`; a missing scheme means `http`, a missing port [`PORT_DEFAULT`].
    ///
    /// # Errors
    /// [`CliError::Usage`] for another scheme, a path, or a malformed port.
    pub fn parse(text: &str) -> Result<Self, CliError> {
        let text = text.trim();
        let (tls, rest) = if let Some(rest) = text.strip_prefix("https://") {
            (true, rest)
        } else if let Some(rest) = text.strip_prefix("http://") {
            (false, rest)
        } else if text.contains("://") {
            return Err(CliError::usage(format!(
                "`{text}`: the server URL must start with http:// or https://"
            )));
        } else {
            (false, text)
        };
        let authority = rest.trim_end_matches('/');
        if authority.is_empty() || authority.contains('/') {
            return Err(CliError::usage(format!(
                "`{text}`: expected a server address such as http://127.0.0.1:11222 (no path)"
            )));
        }
        let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
            // An IPv6 address: `[::1]` or `[::1]:11222`.
            let Some((host, after)) = bracketed.split_once(']') else {
                return Err(CliError::usage(format!("`{text}`: unclosed `[`")));
            };
            (host, after.strip_prefix(':'))
        } else {
            match authority.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (authority, None),
            }
        };
        let port = match port {
            None => PORT_DEFAULT,
            Some(port) => port
                .parse()
                .map_err(|_| CliError::usage(format!("`{text}`: `{port}` is not a port number")))?,
        };
        Ok(Self {
            tls,
            host: host.to_owned(),
            port,
        })
    }

    /// `host:port`, as the `Host` header and messages write it.
    #[must_use]
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl std::fmt::Display for ServerUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.tls { "https" } else { "http" };
        write!(f, "{scheme}://{}", self.authority())
    }
}

/// An HTTP method the commands use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// GET.
    Get,
    /// PUT.
    Put,
    /// POST.
    Post,
    /// DELETE.
    Delete,
}

/// A request: a path with its query, headers and body.
#[derive(Debug, Clone)]
pub struct Request {
    /// The method.
    pub method: Method,
    /// Path and query, already percent-encoded (`/rest/v2/caches/a%2Fb?action=keys`).
    pub path: String,
    /// Extra headers.
    pub headers: Vec<(&'static str, String)>,
    /// The body (empty for none).
    pub body: Vec<u8>,
}

impl Request {
    /// A request without headers or body.
    #[must_use]
    pub fn new(method: Method, path: impl Into<String>) -> Self {
        Self {
            method,
            path: path.into(),
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// Adds a header.
    #[must_use]
    pub fn header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    /// Sets the body.
    #[must_use]
    pub fn body(mut self, body: Vec<u8>) -> Self {
        self.body = body;
        self
    }
}

/// An answer.
#[derive(Debug, Clone)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Its reason phrase, e.g. `Not Found`.
    pub reason: String,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// Whether the status is 2xx.
    #[must_use]
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The body as text (invalid UTF-8 replaced).
    #[must_use]
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON.
    ///
    /// # Errors
    /// [`CliError::Answer`] if it is not JSON.
    pub fn json(&self) -> Result<serde_json::Value, CliError> {
        serde_json::from_slice(&self.body)
            .map_err(|error| CliError::Answer(format!("malformed JSON ({error}): {}", self.text())))
    }

    /// This answer as an error: the status and the server's message.
    #[must_use]
    pub fn into_error(self) -> CliError {
        let message = self.text().trim().to_owned();
        let message = match (self.status, message.is_empty()) {
            (401, _) => format!(
                "{}{}give a user and password (`connect URL --user NAME --password …`, or \
                 `weft cli --user NAME` with the password in WEFT_PASSWORD)",
                message,
                if message.is_empty() { "" } else { "; " }
            ),
            (_, true) => "(no message)".to_owned(),
            (_, false) => message,
        };
        CliError::Http {
            status: format!("{} {}", self.status, self.reason),
            message,
        }
    }
}

/// A client of one server.
pub struct Client {
    url: ServerUrl,
    credentials: Option<(String, String)>,
    tls: Option<tokio_rustls::TlsConnector>,
    runtime: tokio::runtime::Runtime,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("url", &self.url)
            .field("user", &self.credentials.as_ref().map(|(user, _)| user))
            .field("tls", &self.tls.is_some())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client of `url`.
    ///
    /// # Errors
    /// [`CliError::Usage`] for `https` without a CA file, or a CA file given for `http`;
    /// [`CliError::Local`] if the CA file cannot be read or the runtime cannot start.
    pub fn new(
        url: ServerUrl,
        credentials: Option<(String, String)>,
        ca_file: Option<&std::path::Path>,
    ) -> Result<Self, CliError> {
        let tls = match (url.tls, ca_file) {
            (true, Some(ca_file)) => Some(tls_connector(ca_file)?),
            (true, None) => {
                return Err(CliError::usage(format!(
                    "{url} is TLS: give the CA that signed its certificate with --cacert FILE"
                )));
            }
            (false, Some(_)) => {
                return Err(CliError::usage(format!(
                    "--cacert is for TLS: write the server as https://{}",
                    url.authority()
                )));
            }
            (false, None) => None,
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|error| CliError::Local(format!("start the network runtime: {error}")))?;
        Ok(Self {
            url,
            credentials,
            tls,
            runtime,
        })
    }

    /// The server.
    #[must_use]
    pub fn url(&self) -> &ServerUrl {
        &self.url
    }

    /// The user and password requests authenticate with, if any.
    #[must_use]
    pub fn credentials(&self) -> Option<&(String, String)> {
        self.credentials.as_ref()
    }

    /// The user requests authenticate as, if any.
    #[must_use]
    pub fn user(&self) -> Option<&str> {
        self.credentials.as_ref().map(|(user, _)| user.as_str())
    }

    /// Sends `request` and reads the whole answer, whatever its status, within
    /// [`REQUEST_TIMEOUT`] (`timeout` when shorter).
    ///
    /// # Errors
    /// [`CliError::Connect`] when no connection opens, [`CliError::Exchange`] when it breaks
    /// or the answer is not HTTP.
    pub fn send_within(&self, request: Request, timeout: Duration) -> Result<Response, CliError> {
        let limit = timeout.min(REQUEST_TIMEOUT);
        self.runtime.block_on(async {
            match tokio::time::timeout(limit, self.exchange(request)).await {
                Ok(result) => result,
                Err(_) => Err(CliError::Exchange {
                    url: self.url.to_string(),
                    reason: format!("no complete answer within {} s", limit.as_secs_f64()),
                }),
            }
        })
    }

    /// As [`Client::send_within`] with [`REQUEST_TIMEOUT`].
    ///
    /// # Errors
    /// As [`Client::send_within`].
    pub fn send(&self, request: Request) -> Result<Response, CliError> {
        self.send_within(request, REQUEST_TIMEOUT)
    }

    /// Sends `request`; a 2xx answer, or the server's error as [`CliError::Http`].
    ///
    /// # Errors
    /// As [`Client::send`], and [`CliError::Http`] for any other status.
    pub fn call(&self, request: Request) -> Result<Response, CliError> {
        let response = self.send(request)?;
        if response.is_success() {
            Ok(response)
        } else {
            Err(response.into_error())
        }
    }

    async fn exchange(&self, request: Request) -> Result<Response, CliError> {
        let url = self.url.to_string();
        let connect_failed = |reason: String| CliError::Connect {
            url: url.clone(),
            reason,
        };
        let connect = tokio::net::TcpStream::connect((self.url.host.as_str(), self.url.port));
        let tcp = tokio::time::timeout(CONNECT_TIMEOUT, connect)
            .await
            .map_err(|_| {
                connect_failed(format!(
                    "no connection within {} s",
                    CONNECT_TIMEOUT.as_secs()
                ))
            })?
            .map_err(|error| connect_failed(error.to_string()))?;
        // Requests are small and each waits for its answer: do not hold them back.
        let _ = tcp.set_nodelay(true);
        let http = self.http_request(request)?;
        match &self.tls {
            None => self.over(TokioIo::new(tcp), http).await,
            Some(connector) => {
                let name = ServerName::try_from(self.url.host.clone())
                    .map_err(|error| connect_failed(format!("invalid TLS server name: {error}")))?;
                let handshake = connector.connect(name, tcp);
                let stream = tokio::time::timeout(CONNECT_TIMEOUT, handshake)
                    .await
                    .map_err(|_| connect_failed("no TLS handshake within 5 s".to_owned()))?
                    .map_err(|error| connect_failed(format!("TLS: {error}")))?;
                self.over(TokioIo::new(stream), http).await
            }
        }
    }

    fn http_request(&self, request: Request) -> Result<hyper::Request<Full<Bytes>>, CliError> {
        let method = match request.method {
            Method::Get => hyper::Method::GET,
            Method::Put => hyper::Method::PUT,
            Method::Post => hyper::Method::POST,
            Method::Delete => hyper::Method::DELETE,
        };
        let mut builder = hyper::Request::builder()
            .method(method)
            .uri(request.path.as_str())
            .header(hyper::header::HOST, self.url.authority());
        if let Some((user, password)) = &self.credentials {
            use base64::Engine;
            let token =
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
            builder = builder.header(hyper::header::AUTHORIZATION, format!("Basic {token}"));
        }
        for (name, value) in request.headers {
            builder = builder.header(name, value);
        }
        builder
            .body(Full::new(Bytes::from(request.body)))
            .map_err(|error| CliError::usage(format!("cannot make that request: {error}")))
    }

    async fn over<S>(
        &self,
        io: TokioIo<S>,
        request: hyper::Request<Full<Bytes>>,
    ) -> Result<Response, CliError>
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let failed = |reason: String| CliError::Exchange {
            url: self.url.to_string(),
            reason,
        };
        let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
            .await
            .map_err(|error| failed(error.to_string()))?;
        // The connection is driven beside the request; it ends when the sender is dropped.
        let driver = tokio::spawn(connection);
        let response = sender
            .send_request(request)
            .await
            .map_err(|error| failed(error.to_string()))?;
        let status = response.status();
        let body = Limited::new(response.into_body(), RESPONSE_BYTES_MAX)
            .collect()
            .await
            .map_err(|error| failed(format!("reading the answer: {error}")))?
            .to_bytes();
        drop(sender);
        driver.abort();
        Ok(Response {
            status: status.as_u16(),
            reason: status.canonical_reason().unwrap_or_default().to_owned(),
            body: body.to_vec(),
        })
    }
}

/// A TLS connector trusting the CA certificates of `ca_file` only, offering `http/1.1`.
fn tls_connector(ca_file: &std::path::Path) -> Result<tokio_rustls::TlsConnector, CliError> {
    let unreadable = |reason: String| {
        CliError::Local(format!("read the CA file {}: {reason}", ca_file.display()))
    };
    let mut roots = rustls::RootCertStore::empty();
    let certificates =
        CertificateDer::pem_file_iter(ca_file).map_err(|error| unreadable(error.to_string()))?;
    for certificate in certificates {
        let certificate = certificate.map_err(|error| unreadable(error.to_string()))?;
        roots
            .add(certificate)
            .map_err(|error| unreadable(error.to_string()))?;
    }
    if roots.is_empty() {
        return Err(unreadable("no certificate in it".to_owned()));
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| CliError::Local(format!("TLS setup: {error}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the address forms people type parse to the server meant, and others are refused.
    #[test]
    fn server_urls_parse() {
        let parse = |text: &str| ServerUrl::parse(text).map(|url| url.to_string());
        assert_eq!(
            parse("127.0.0.1:11222").ok().as_deref(),
            Some("http://127.0.0.1:11222")
        );
        assert_eq!(
            parse("localhost").ok().as_deref(),
            Some("http://localhost:11222")
        );
        assert_eq!(
            parse("https://db.example:443/").ok().as_deref(),
            Some("https://db.example:443")
        );
        assert_eq!(
            parse("http://[::1]:8080").ok().as_deref(),
            Some("http://[::1]:8080")
        );
        assert_eq!(parse("[::1]").ok().as_deref(), Some("http://[::1]:11222"));
        for wrong in ["ftp://x", "http://x/rest", "x:port", "", "[::1"] {
            assert!(
                matches!(ServerUrl::parse(wrong), Err(CliError::Usage(_))),
                "{wrong} accepted"
            );
        }
    }
}
