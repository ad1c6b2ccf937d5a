//! Mutual TLS between members: every cluster connection is a TLS session in which each end
//! presents a certificate signed by the cluster's CA and checks the other's against it.
//!
//! Members are reached by address, and addresses change (containers, restarts elsewhere), so
//! a member's certificate is not checked against the address dialled: the cluster CA signing
//! it is what makes it a member. Use a CA that signs member certificates only. A member's
//! certificate is used both ways (it accepts and opens connections), so it needs both the
//! `serverAuth` and `clientAuth` extended key usages, or neither.
//!
//! Membership datagrams (UDP) are not TLS: they are signed with the cluster secret, so set
//! `secret` too.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig};
use weft_security::files::{self, FileError};

/// Why the cluster's TLS files could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClusterTlsError {
    /// A file could not be read or holds nothing usable.
    #[error(transparent)]
    File(#[from] FileError),
    /// rustls refused what the files hold.
    #[error("cluster TLS configuration: {0}")]
    Rustls(String),
}

/// TLS for a member's cluster connections: how it accepts and how it connects.
#[derive(Clone)]
pub struct ClusterTls {
    pub(crate) acceptor: tokio_rustls::TlsAcceptor,
    pub(crate) connector: tokio_rustls::TlsConnector,
}

impl std::fmt::Debug for ClusterTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterTls").finish_non_exhaustive()
    }
}

impl PartialEq for ClusterTls {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(self.acceptor.config(), other.acceptor.config())
    }
}

impl Eq for ClusterTls {}

impl ClusterTls {
    /// From rustls configurations made by the application (both should require and check
    /// the other end's certificate).
    #[must_use]
    pub fn new(server: Arc<ServerConfig>, client: Arc<ClientConfig>) -> Self {
        Self {
            acceptor: tokio_rustls::TlsAcceptor::from(server),
            connector: tokio_rustls::TlsConnector::from(client),
        }
    }

    /// Mutual TLS with this member's `certificate` chain and `key`, trusting members whose
    /// certificates chain to the CA certificate(s) in `ca` (all PEM files).
    ///
    /// # Errors
    /// If a file cannot be read or parsed, or rustls refuses what it holds.
    pub fn from_pem_files(
        certificate: &Path,
        key: &Path,
        ca: &Path,
    ) -> Result<Self, ClusterTlsError> {
        let chain = files::certificates("certificate", certificate)?;
        let mut roots = RootCertStore::empty();
        for root in files::certificates("ca", ca)? {
            roots
                .add(root)
                .map_err(|e| FileError::new("ca", ca, e.to_string()))?;
        }
        let roots = Arc::new(roots);
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let rustls_error = |e: rustls::Error| ClusterTlsError::Rustls(e.to_string());
        let client_verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::clone(&roots), Arc::clone(&provider))
                .build()
                .map_err(|e| ClusterTlsError::Rustls(e.to_string()))?;
        let server = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(rustls_error)?
            .with_client_cert_verifier(client_verifier)
            .with_single_cert(chain.clone(), files::private_key(key)?)
            .map_err(rustls_error)?;
        let server_verifier =
            WebPkiServerVerifier::builder_with_provider(roots, Arc::clone(&provider))
                .build()
                .map_err(|e| ClusterTlsError::Rustls(e.to_string()))?;
        let client = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(rustls_error)?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(MemberVerifier(server_verifier)))
            .with_client_auth_cert(chain, files::private_key(key)?)
            .map_err(rustls_error)?;
        Ok(Self::new(Arc::new(server), Arc::new(client)))
    }

    /// The name a connection to `to` asks for (members are not checked against it).
    pub(crate) fn server_name(to: SocketAddr) -> ServerName<'static> {
        ServerName::IpAddress(to.ip().into())
    }
}

/// Checks a member's certificate chain against the cluster CA (validity, usage, signatures)
/// but not against the address dialled: see the module's documentation.
#[derive(Debug)]
struct MemberVerifier(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for MemberVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}
