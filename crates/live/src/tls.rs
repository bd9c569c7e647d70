//! TLS for the NBD server (`NBD_OPT_STARTTLS`), with rustls and the *ring* provider.
//!
//! Certificates only: the server presents a certificate chain and key (PEM files, as
//! `nbdkit --tls-certificates` and qemu-nbd's `tls-creds-x509` take them). TLS-PSK (what
//! `nbdkit --tls-psk` and qemu's `tls-creds-psk` offer) is not supported: rustls has no
//! external-PSK support (rustls issue #174; the PSK pull requests #2424 and #2524 are
//! unmerged), and taking OpenSSL or GnuTLS in for it would add a C TLS stack next to the
//! maintained Rust one. Client certificates are not asked for.

use crate::proto::TlsMode;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::Path;
use std::sync::Arc;

/// TLS as a server offers it: the mode and the rustls configuration.
#[derive(Clone, Debug)]
pub struct TlsOptions {
    pub mode: TlsMode,
    pub config: Arc<rustls::ServerConfig>,
}

impl TlsOptions {
    /// Load a PEM certificate chain and its PEM private key.
    pub fn load(cert: &Path, key: &Path, mode: TlsMode) -> Result<TlsOptions, String> {
        if mode == TlsMode::Off {
            return Err("TLS mode `off` needs no certificate".into());
        }
        let certs = CertificateDer::pem_file_iter(cert)
            .and_then(|it| it.collect::<Result<Vec<_>, _>>())
            .map_err(|e| format!("{}: cannot read the certificate chain: {e}", cert.display()))?;
        if certs.is_empty() {
            return Err(format!("{}: no PEM certificate in it", cert.display()));
        }
        let key = PrivateKeyDer::from_pem_file(key)
            .map_err(|e| format!("{}: cannot read the private key: {e}", key.display()))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS: {e}"))?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| format!("{}: {e}", cert.display()))?;
        Ok(TlsOptions {
            mode,
            config: Arc::new(config),
        })
    }
}

/// The `--tls MODE --tls-certificate PEM --tls-key PEM` flags: `None` for `off`.
pub fn from_flags(
    mode: &str,
    cert: Option<&Path>,
    key: Option<&Path>,
) -> Result<Option<TlsOptions>, String> {
    let mode = parse_mode(mode)?;
    match (mode, cert, key) {
        (TlsMode::Off, None, None) => Ok(None),
        (TlsMode::Off, _, _) => {
            Err("--tls-certificate/--tls-key given without --tls on or --tls require".into())
        }
        (m, Some(c), Some(k)) => TlsOptions::load(c, k, m).map(Some),
        _ => Err("--tls on/require needs --tls-certificate PEM and --tls-key PEM".into()),
    }
}

/// `--tls` values: `off`, `on` (offered), `require`.
pub fn parse_mode(s: &str) -> Result<TlsMode, String> {
    match s {
        "off" => Ok(TlsMode::Off),
        "on" => Ok(TlsMode::Optional),
        "require" => Ok(TlsMode::Require),
        _ => Err(format!(
            "--tls {s:?}: expected off, on (offered to clients) or require (plain clients refused)"
        )),
    }
}
