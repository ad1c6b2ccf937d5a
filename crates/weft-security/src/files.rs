//! The files credentials and certificates live in: PEM certificates and keys (for TLS on the
//! client port and between members), and a file's [`Stamp`], by which a server notices it
//! changed (users file, certificates) without watching the file system.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Why a file could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} {path}: {reason}")]
pub struct FileError {
    /// What the file was for (`certificate`, `key`, `client-ca` …).
    pub what: &'static str,
    /// The file.
    pub path: PathBuf,
    /// Why.
    pub reason: String,
}

impl FileError {
    /// `path`, read as `what`, is unusable for `reason`.
    #[must_use]
    pub fn new(what: &'static str, path: &Path, reason: impl Into<String>) -> Self {
        Self {
            what,
            path: path.to_owned(),
            reason: reason.into(),
        }
    }
}

/// The certificates of a PEM file, in order (a chain: leaf first); at least one.
///
/// # Errors
/// If it cannot be read, is not PEM, or holds no certificate.
pub fn certificates(
    what: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, FileError> {
    let certificates = CertificateDer::pem_file_iter(path)
        .map_err(|e| FileError::new(what, path, e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| FileError::new(what, path, e.to_string()))?;
    if certificates.is_empty() {
        return Err(FileError::new(
            what,
            path,
            "no PEM certificate (-----BEGIN CERTIFICATE-----) in it",
        ));
    }
    Ok(certificates)
}

/// The private key of a PEM file (PKCS#8, PKCS#1 or SEC1).
///
/// # Errors
/// If it cannot be read or holds no key.
pub fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, FileError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| FileError::new("key", path, e.to_string()))
}

/// The common name (CN) of a DER certificate's subject: who a client certificate names, for
/// SASL EXTERNAL. `None` if it cannot be parsed or names none (the first CN when several).
#[must_use]
pub fn common_name(certificate: &[u8]) -> Option<String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(certificate).ok()?;
    let name = parsed
        .subject()
        .iter_common_name()
        .next()?
        .as_str()
        .ok()?
        .to_owned();
    (!name.is_empty()).then_some(name)
}

/// A file's modification time and size: when either changes, it was rewritten.
pub type Stamp = (SystemTime, u64);

/// `path`'s [`Stamp`]; `None` if it cannot be read.
#[must_use]
pub fn stamp(path: &Path) -> Option<Stamp> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}
