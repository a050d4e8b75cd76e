//! When the hub's own credentials expire: `flotilla_hub_credential_expiry_timestamp_seconds{what}`
//! (Unix seconds, the Prometheus convention for expiries), one series per file the hub was
//! given — `nats-ca` (the earliest certificate of the bundle), `nats-client-cert`,
//! `api-tls-cert` (X.509 `notAfter`), `hub-creds` and `sys-creds` (the user JWT's `exp`, only
//! when it has one: `init` writes the hub's without). Alerts `FlotillaCredentialExpiring` (14
//! days) and `FlotillaCredentialExpiringSoon` (2 days).
//!
//! The files are read at the start (an expiry within 14 days is logged then) and again at each
//! scrape: they are a few KiB, and a rotated file (`flotilla-hub rotate hub`, a renewed
//! certificate a Secret mounts anew) shows without a restart. A file that cannot be read or
//! parsed exports no series and is logged, naming the file. Clusters' credentials are not here:
//! they live `--credentials-ttl-seconds` and agents renew them, so a near expiry there is an
//! offline site, not an alert.

use crate::Config;
use flotilla_auth::jwt::{Claims, User};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;
use std::path::{Path, PathBuf};

/// An expiry closer than this is logged at the start (the warning alert's threshold).
pub const WARN_WITHIN_SECONDS: i64 = 14 * 24 * 3600;

/// The hub's and the system user's credentials in a secure directory (the names `init` writes:
/// `flotilla_auth::SecureDir`).
const HUB_CREDS: &str = "hub.creds";
const SYS_CREDS: &str = "sys.creds";

/// What a file holds, and so how its expiry is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// PEM certificates: the earliest `notAfter`.
    Certificates,
    /// A NATS `.creds` file: its user JWT's `exp`.
    Creds,
}

/// One file of the hub's own material.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    /// The `what` label.
    pub what: &'static str,
    /// The file.
    pub path: PathBuf,
    /// What it holds.
    pub format: Format,
}

/// Why a file's expiry could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ExpiryError {
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// No certificate in it parses.
    #[error("{}: {message}", path.display())]
    Certificate {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        message: String,
    },
    /// It is not a credentials file.
    #[error("{}: {source}", path.display())]
    Creds {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: flotilla_auth::creds::CredsError,
    },
    /// Its JWT does not decode or verify.
    #[error("{}: the user JWT: {source}", path.display())]
    Jwt {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: flotilla_auth::jwt::JwtError,
    },
}

/// The files of the hub's own material that `config` names.
pub fn sources(config: &Config) -> Vec<Source> {
    let mut sources = Vec::new();
    let mut add = |what, path: Option<&Path>, format| {
        if let Some(path) = path {
            sources.push(Source {
                what,
                path: path.to_path_buf(),
                format,
            });
        }
    };
    let nats = &config.nats;
    add("nats-ca", nats.tls_ca_file.as_deref(), Format::Certificates);
    let client = nats
        .tls_client_cert
        .as_ref()
        .map(|(cert, _)| cert.as_path());
    add("nats-client-cert", client, Format::Certificates);
    let api = config.api.tls.as_ref().map(|t| t.cert.as_path());
    add("api-tls-cert", api, Format::Certificates);
    let secure = config.security.as_ref().map(|s| s.dir.as_path());
    // `--nats-creds` names the hub's credentials; without it, secure mode reads the directory's.
    let hub = nats.credentials_file.clone();
    let hub = hub.or_else(|| secure.map(|d| d.join(HUB_CREDS)));
    add("hub-creds", hub.as_deref(), Format::Creds);
    let sys = secure.map(|d| d.join(SYS_CREDS));
    add("sys-creds", sys.as_deref(), Format::Creds);
    sources
}

/// The earliest `notAfter` (Unix seconds) of the certificates in `pem`.
pub fn certificates_expire(pem: &[u8]) -> Result<i64, String> {
    let mut earliest: Option<i64> = None;
    for block in x509_parser::pem::Pem::iter_from_buffer(pem) {
        let block = block.map_err(|e| format!("not PEM: {e}"))?;
        if block.label != "CERTIFICATE" {
            continue;
        }
        let cert = block
            .parse_x509()
            .map_err(|e| format!("a certificate does not parse: {e}"))?;
        let at = cert.validity().not_after.timestamp();
        earliest = Some(earliest.map_or(at, |e| e.min(at)));
    }
    earliest.ok_or_else(|| "no CERTIFICATE block".to_string())
}

/// When `source` expires (`None`: never, a JWT without `exp`).
pub fn read(source: &Source) -> Result<Option<i64>, ExpiryError> {
    let path = &source.path;
    let bytes = std::fs::read(path).map_err(|e| ExpiryError::Read {
        path: path.clone(),
        source: e,
    })?;
    match source.format {
        Format::Certificates => {
            certificates_expire(&bytes)
                .map(Some)
                .map_err(|message| ExpiryError::Certificate {
                    path: path.clone(),
                    message,
                })
        }
        Format::Creds => {
            let creds =
                flotilla_auth::Creds::parse(&String::from_utf8_lossy(&bytes)).map_err(|e| {
                    ExpiryError::Creds {
                        path: path.clone(),
                        source: e,
                    }
                })?;
            let claims = Claims::<User>::decode(&creds.jwt).map_err(|e| ExpiryError::Jwt {
                path: path.clone(),
                source: e,
            })?;
            Ok(claims.exp)
        }
    }
}

/// Logs, at the start, each file that cannot be read and each expiry within
/// [`WARN_WITHIN_SECONDS`] of `now`.
pub fn check_at_start(sources: &[Source], now: i64) {
    for s in sources {
        match read(s) {
            Ok(Some(at)) if at - now < WARN_WITHIN_SECONDS => tracing::warn!(
                what = s.what,
                path = %s.path.display(),
                days_left = (at - now) / 86_400,
                "a credential of the hub expires soon: renew it (docs/operations.md, FlotillaCredentialExpiring)"
            ),
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(what = s.what, error = %e, "cannot read when a credential expires")
            }
        }
    }
}

/// Labels of the expiry gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WhatLabels {
    what: &'static str,
}

/// `flotilla_hub_credential_expiry_timestamp_seconds{what}`, read at each scrape.
#[derive(Debug)]
pub struct ExpiryMetrics(pub Vec<Source>);

impl Collector for ExpiryMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut family = encoder.encode_descriptor(
            "credential_expiry_timestamp_seconds",
            "When the hub's own certificates and NATS credentials expire (Unix seconds; no series for a JWT without exp)",
            None,
            MetricType::Gauge,
        )?;
        for s in &self.0 {
            match read(s) {
                Ok(Some(at)) => {
                    let labels = WhatLabels { what: s.what };
                    ConstGauge::new(at).encode(family.encode_family(&labels)?)?;
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(what = s.what, error = %e, "cannot read when a credential expires")
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
