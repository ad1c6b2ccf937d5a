//! Certificates for the TLS tests, made per test with rcgen: a CA, and a server certificate
//! and key it signed, in files a `[server.tls]` section names.

use std::path::PathBuf;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};

/// A certificate authority that signs server and client certificates.
pub struct Ca {
    /// The CA's certificate and key.
    pub issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    /// A self-signed CA named `name`.
    pub fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        Self { issuer }
    }

    /// Its certificate, PEM.
    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A certificate for `names` (DNS names or IP addresses), and its key, both PEM.
    pub fn sign(&self, names: &[&str], purpose: ExtendedKeyUsagePurpose) -> (String, String) {
        let mut params =
            CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>())
                .unwrap();
        params.distinguished_name.push(
            DnType::CommonName,
            names.first().copied().unwrap_or("client"),
        );
        params.extended_key_usages = vec![purpose];
        let key = KeyPair::generate().unwrap();
        let certificate = params.signed_by(&key, &self.issuer).unwrap();
        (certificate.pem(), key.serialize_pem())
    }
}

/// Server files in a directory: `server.pem`, `server.key`, `ca.pem` (the CA clients use).
pub struct Files {
    /// The directory.
    pub dir: tempfile::TempDir,
}

impl Files {
    /// A server certificate for `localhost` and 127.0.0.1, signed by `ca`, and its key.
    pub fn new(ca: &Ca) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let files = Self { dir };
        files.write_server(ca);
        files
    }

    /// A file in the directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes a new server certificate and key signed by `ca`.
    pub fn write_server(&self, ca: &Ca) {
        let (certificate, key) = ca.sign(
            &["localhost", "127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        std::fs::write(self.path("server.pem"), certificate).unwrap();
        std::fs::write(self.path("server.key"), key).unwrap();
    }

    /// The `[server.tls]` table naming these files, plus `extra` lines.
    pub fn section(&self, extra: &str) -> String {
        format!(
            "[server.tls]\ncertificate = \"{}\"\nkey = \"{}\"\n{extra}\n",
            self.path("server.pem").display(),
            self.path("server.key").display()
        )
    }
}
