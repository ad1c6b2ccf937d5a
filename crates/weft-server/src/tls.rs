//! TLS on the client ports (rustls, aws-lc-rs; TLS 1.2 and 1.3).
//!
//! A connection whose first byte is `0x16` (a TLS handshake record) is handed to [`Tls::accept`];
//! the protocol is then detected again from the first decrypted bytes, so TLS and plaintext
//! clients share port 11222. A client that offers ALPN `http/1.1` gets it (and is served
//! HTTP); a client offering only protocols Weft does not name (or none) gets no ALPN and is
//! told apart by its bytes, as on plaintext — refusing it would break clients that offer
//! ALPN for their own reasons.
//!
//! The certificate, key and client CA are files named by `[server.tls]`. [`Tls::reload`]
//! reads them again (on SIGHUP, and when their size or modification time changes): new
//! handshakes use the new files, established sessions keep theirs, and files that do not
//! load leave the previous ones in use.

use std::path::Path;
use std::sync::Arc;

use bytes::BytesMut;
use parking_lot::{Mutex, RwLock};
use rustls::RootCertStore;
use rustls::server::{ServerConfig, WebPkiClientVerifier};
use tokio::net::TcpStream;
use tokio_rustls::LazyConfigAcceptor;
use weft_security::files::{self, FileError, Stamp};

use crate::config::{ClientAuth, TlsSection};
use crate::stream::Rewind;

/// The first byte of a TLS record carrying a handshake message (a ClientHello opens with it).
pub const HANDSHAKE_RECORD: u8 = 0x16;

/// The ALPN name of the only protocol a client can choose that way (HTTP/1.1).
pub const ALPN_HTTP1: &[u8] = b"http/1.1";

/// A server-side TLS session over an accepted socket (whose first bytes were read during
/// detection, hence the [`Rewind`]).
pub type TlsStream = tokio_rustls::server::TlsStream<Rewind<TcpStream>>;

/// Why the TLS files could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A file could not be read or holds no PEM object of the expected kind.
    #[error(transparent)]
    File(#[from] FileError),
    /// The settings contradict each other.
    #[error("[server.tls]: {0}")]
    Settings(String),
    /// rustls refused the certificate, key or CA.
    #[error("TLS configuration: {0}")]
    Rustls(String),
}

/// The server's TLS state: the configuration new handshakes use, and what it was read from.
#[derive(Debug)]
pub struct Tls {
    settings: TlsSection,
    configs: RwLock<Configs>,
    /// Size and modification time of each file when last loaded.
    stamps: Mutex<Vec<Option<Stamp>>>,
}

/// One `ServerConfig` per ALPN answer: HTTP/1.1 for a client offering it, none otherwise.
#[derive(Debug, Clone)]
struct Configs {
    http1: Arc<ServerConfig>,
    detect: Arc<ServerConfig>,
}

impl Tls {
    /// Reads the files `settings` names.
    ///
    /// # Errors
    /// If a file cannot be read or parsed, or rustls refuses what it holds.
    pub fn load(settings: &TlsSection) -> Result<Self, TlsError> {
        settings.check().map_err(TlsError::Settings)?;
        let configs = build(settings)?;
        Ok(Self {
            stamps: Mutex::new(stamps(settings)),
            settings: settings.clone(),
            configs: RwLock::new(configs),
        })
    }

    /// The settings the files were named by.
    #[must_use]
    pub fn settings(&self) -> &TlsSection {
        &self.settings
    }

    /// Reads the files again and uses them for new handshakes; on error the previous ones stay
    /// in use.
    ///
    /// # Errors
    /// As [`Tls::load`].
    pub fn reload(&self) -> Result<(), TlsError> {
        let stamps = stamps(&self.settings);
        let configs = build(&self.settings)?;
        *self.configs.write() = configs;
        *self.stamps.lock() = stamps;
        Ok(())
    }

    /// Whether a file's size or modification time differs from when it was last loaded.
    #[must_use]
    pub fn changed(&self) -> bool {
        *self.stamps.lock() != stamps(&self.settings)
    }

    /// Completes the handshake of a client whose first bytes, `prefix`, opened a TLS
    /// record.
    ///
    /// # Errors
    /// If the handshake fails (the client is refused; rustls has sent it an alert).
    pub async fn accept(&self, stream: TcpStream, prefix: BytesMut) -> std::io::Result<TlsStream> {
        let io = Rewind::new(prefix, stream);
        let start = LazyConfigAcceptor::new(rustls::server::Acceptor::default(), io).await?;
        let offers_http1 = start
            .client_hello()
            .alpn()
            .is_some_and(|mut offered| offered.any(|name| name == ALPN_HTTP1));
        let config = {
            let configs = self.configs.read();
            if offers_http1 {
                Arc::clone(&configs.http1)
            } else {
                Arc::clone(&configs.detect)
            }
        };
        start.into_stream(config).await
    }
}

fn stamps(settings: &TlsSection) -> Vec<Option<Stamp>> {
    paths(settings).map(files::stamp).collect()
}

fn paths(settings: &TlsSection) -> impl Iterator<Item = &Path> {
    [settings.certificate.as_path(), settings.key.as_path()]
        .into_iter()
        .chain(settings.client_ca.as_deref())
}

fn build(settings: &TlsSection) -> Result<Configs, TlsError> {
    let chain = files::certificates("certificate", &settings.certificate)?;
    let key = files::private_key(&settings.key)?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| TlsError::Rustls(e.to_string()))?;
    let builder = match (&settings.client_ca, settings.client_auth()) {
        (Some(ca), mode) if mode != ClientAuth::None => {
            let mut roots = RootCertStore::empty();
            for certificate in files::certificates("client-ca", ca)? {
                roots
                    .add(certificate)
                    .map_err(|e| FileError::new("client-ca", ca, e.to_string()))?;
            }
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider));
            let verifier = if mode == ClientAuth::Optional {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            builder.with_client_cert_verifier(
                verifier
                    .build()
                    .map_err(|e| TlsError::Rustls(e.to_string()))?,
            )
        }
        _ => builder.with_no_client_auth(),
    };
    let detect = builder
        .with_single_cert(chain, key)
        .map_err(|e| TlsError::Rustls(format!("certificate and key: {e}")))?;
    let mut http1 = detect.clone();
    http1.alpn_protocols = vec![ALPN_HTTP1.to_vec()];
    Ok(Configs {
        http1: Arc::new(http1),
        detect: Arc::new(detect),
    })
}

/// Reloads the TLS files on SIGHUP and, every `reload-check-secs`, when they changed, until
/// `shutdown`.
pub(crate) async fn watch(tls: Arc<Tls>, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    let period = std::time::Duration::from_secs(tls.settings.reload_check_secs);
    let mut ticks = (!period.is_zero()).then(|| {
        let mut interval = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        interval
    });
    #[cfg(unix)]
    let mut hangup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(signal) => Some(signal),
        Err(error) => {
            tracing::warn!(%error, "cannot watch SIGHUP; TLS files reload only when they change");
            None
        }
    };
    loop {
        let tick = async {
            match ticks.as_mut() {
                Some(ticks) => {
                    ticks.tick().await;
                }
                None => std::future::pending().await,
            }
        };
        #[cfg(unix)]
        let hangup_signal = async {
            match hangup.as_mut() {
                Some(signal) => {
                    signal.recv().await;
                }
                None => std::future::pending().await,
            }
        };
        #[cfg(not(unix))]
        let hangup_signal = std::future::pending::<()>();
        let forced = tokio::select! {
            () = tick => false,
            () = hangup_signal => true,
            () = crate::stopped(&mut shutdown) => return,
        };
        if !forced && !tls.changed() {
            continue;
        }
        match tls.reload() {
            Ok(()) => tracing::info!(
                certificate = %tls.settings.certificate.display(),
                reason = if forced { "SIGHUP" } else { "files changed" },
                "TLS certificate reloaded"
            ),
            Err(error) => {
                tracing::error!(%error, "TLS files not reloaded; the previous ones stay in use")
            }
        }
    }
}
