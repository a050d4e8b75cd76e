//! HTTP to the issuer: GET a document, POST a form (the code exchange). No redirects followed
//! (a redirect could send the hub anywhere), a timeout, a size cap, the issuer's CA pinned
//! when `--oidc-ca-file` is given, and `Cache-Control: max-age` read.

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// How long one request may take, connection included.
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// Largest body read.
pub const MAX_BODY: usize = 256 * 1024;

/// A failed request.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The CA file cannot be read or has no certificate.
    #[error("--oidc-ca-file {path}: {why}")]
    CaFile {
        /// The file.
        path: String,
        /// What is wrong.
        why: String,
    },
    /// The URL cannot be requested.
    #[error("{url}: {why}")]
    Request {
        /// The URL.
        url: String,
        /// What is wrong.
        why: String,
    },
    /// No answer in time.
    #[error("{url}: no answer within {}s", TIMEOUT.as_secs())]
    Timeout {
        /// The URL.
        url: String,
    },
    /// The connection failed.
    #[error("{url}: {source}")]
    Connect {
        /// The URL.
        url: String,
        /// Why.
        #[source]
        source: hyper_util::client::legacy::Error,
    },
    /// An answer other than 200.
    #[error("{url}: HTTP {status}{}", if status.is_redirection() { " (redirects are not followed)" } else { "" })]
    Status {
        /// The URL.
        url: String,
        /// The status.
        status: http::StatusCode,
    },
    /// The body is over [`MAX_BODY`] or broke off.
    #[error("{url}: the answer is larger than {MAX_BODY} bytes or broke off")]
    Body {
        /// The URL.
        url: String,
    },
}

/// An answer: its body and how long it may be cached.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The body.
    pub body: Bytes,
    /// `Cache-Control: max-age`, if the answer had one.
    pub max_age: Option<Duration>,
}

/// A client for the issuer's URLs.
#[derive(Clone)]
pub struct Fetcher {
    client: Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl std::fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Fetcher")
    }
}

impl Fetcher {
    /// A client trusting the CAs in `ca_file`, else the system's roots.
    pub fn new(ca_file: Option<&Path>) -> Result<Self, FetchError> {
        let mut roots = rustls::RootCertStore::empty();
        match ca_file {
            Some(path) => {
                let bad = |why: String| FetchError::CaFile {
                    path: path.display().to_string(),
                    why,
                };
                let pem = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
                for cert in CertificateDer::pem_slice_iter(&pem) {
                    let cert = cert.map_err(|e| bad(e.to_string()))?;
                    roots.add(cert).map_err(|e| bad(e.to_string()))?;
                }
                if roots.is_empty() {
                    return Err(bad("no PEM certificate in it".into()));
                }
            }
            None => {
                for cert in rustls_native_certs::load_native_certs().certs {
                    // A system root rustls cannot parse is skipped, as every client does.
                    let _ = roots.add(cert);
                }
            }
        }
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| FetchError::CaFile {
            path: String::new(),
            why: e.to_string(),
        })?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(TIMEOUT));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new()).build(connector);
        Ok(Self { client })
    }

    /// GETs `url` (checked by the caller: https or loopback).
    pub async fn get(&self, url: &str) -> Result<Fetched, FetchError> {
        let request = http::Request::get(url)
            .header(http::header::ACCEPT, "application/json")
            .body(Full::new(Bytes::new()))
            .map_err(|e| FetchError::Request {
                url: url.into(),
                why: e.to_string(),
            })?;
        self.send(url, request).await
    }

    /// POSTs an `application/x-www-form-urlencoded` body to `url`.
    pub async fn post_form(
        &self,
        url: &str,
        form: &[(&str, &str)],
        basic_auth: Option<&str>,
    ) -> Result<Fetched, FetchError> {
        let body = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        let mut request = http::Request::post(url)
            .header(http::header::ACCEPT, "application/json")
            .header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            );
        if let Some(auth) = basic_auth {
            request = request.header(http::header::AUTHORIZATION, auth);
        }
        let request =
            request
                .body(Full::new(Bytes::from(body)))
                .map_err(|e| FetchError::Request {
                    url: url.into(),
                    why: e.to_string(),
                })?;
        self.send(url, request).await
    }

    /// Sends `request` as it is and returns the answer whatever its status (the code flow's
    /// token endpoint answers errors as JSON that `oauth2` reads); redirects are not followed,
    /// the body is capped as every answer's.
    pub async fn exchange(
        &self,
        request: http::Request<Vec<u8>>,
    ) -> Result<http::Response<Vec<u8>>, FetchError> {
        let url = request.uri().to_string();
        let (parts, body) = request.into_parts();
        let request = http::Request::from_parts(parts, Full::new(Bytes::from(body)));
        let exchange = async {
            let response =
                self.client
                    .request(request)
                    .await
                    .map_err(|source| FetchError::Connect {
                        url: url.clone(),
                        source,
                    })?;
            let (parts, body) = response.into_parts();
            let body = Limited::new(body, MAX_BODY)
                .collect()
                .await
                .map_err(|_| FetchError::Body { url: url.clone() })?
                .to_bytes();
            Ok(http::Response::from_parts(parts, body.to_vec()))
        };
        tokio::time::timeout(TIMEOUT, exchange)
            .await
            .map_err(|_| FetchError::Timeout { url: url.clone() })?
    }

    async fn send(
        &self,
        url: &str,
        request: http::Request<Full<Bytes>>,
    ) -> Result<Fetched, FetchError> {
        let exchange = async {
            let response =
                self.client
                    .request(request)
                    .await
                    .map_err(|source| FetchError::Connect {
                        url: url.into(),
                        source,
                    })?;
            let status = response.status();
            if status != http::StatusCode::OK {
                return Err(FetchError::Status {
                    url: url.into(),
                    status,
                });
            }
            let max_age = response
                .headers()
                .get(http::header::CACHE_CONTROL)
                .and_then(|v| v.to_str().ok())
                .and_then(max_age);
            let body = Limited::new(response.into_body(), MAX_BODY)
                .collect()
                .await
                .map_err(|_| FetchError::Body { url: url.into() })?
                .to_bytes();
            Ok(Fetched { body, max_age })
        };
        tokio::time::timeout(TIMEOUT, exchange)
            .await
            .map_err(|_| FetchError::Timeout { url: url.into() })?
    }
}

/// `max-age` of a `Cache-Control` value (`no-store`/`no-cache`: zero).
pub fn max_age(value: &str) -> Option<Duration> {
    let mut age = None;
    for directive in value.split(',').map(str::trim) {
        let lower = directive.to_ascii_lowercase();
        if lower == "no-store" || lower == "no-cache" {
            return Some(Duration::ZERO);
        }
        if let Some(secs) = lower.strip_prefix("max-age=") {
            age = secs.trim_matches('"').parse().ok().map(Duration::from_secs);
        }
    }
    age
}
