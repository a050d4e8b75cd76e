//! HTTP and HTTPS for the worker: gix's smart-HTTP transport (gix-transport's [`Http`] trait)
//! over our own client — hyper's HTTP/1.1, one connection per request, TLS by rustls (ring) with
//! the system's roots plus the GitRepo's `caBundle`. Every connection goes through
//! [`net::connect`] (each resolved address checked, design §9 row 21) and every byte received is
//! counted against the transfer cap (row 1).
//!
//! Requests go to the repository's own origin only: a redirect is followed within it (never
//! from https to http) and refused to anywhere else, so credentials never leave for another
//! host. What the worker says of a failed answer names its status and content type, never its
//! body: the GitRepo's status must not become a way to read internal pages (row 22).
//!
//! gix's protocol: a `401` is handed back as a *headers reader* failing with
//! [`io::ErrorKind::PermissionDenied`] (gix then asks its credentials callback and tries again;
//! an error from `get` itself is never retried with credentials), and a POST's body is written
//! before its answer is read — here it is buffered and sent on the first read of the answer.

use std::{
    io::{self, BufRead, Read, Write},
    pin::Pin,
    sync::{Arc, Mutex},
    task::{Context, Poll},
};

use bytes::{Buf, Bytes};
use gix::protocol::transport::client::{
    AuthenticationRequired,
    blocking_io::http::{GetResponse, Http, PostBodyDataKind, PostResponse},
};
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, ServerName, pem::PemObject};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::{
    Failure,
    net::{self, IO_TIMEOUT, Received, TransferCapExceeded},
};
use crate::protocol::ErrorKind;

/// Redirects followed for one request.
const MAX_REDIRECTS: usize = 5;
/// Bytes of one request body: a fetch's negotiation is a few lines per ref and commit.
const MAX_POST_BYTES: usize = 4 * 1024 * 1024;
/// Bytes of a `caBundle`.
pub const MAX_CA_BUNDLE_BYTES: usize = 64 * 1024;

/// Where requests may go: the scheme, host and port of the repository URL.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Origin {
    tls: bool,
    host: String,
    port: u16,
}

impl Origin {
    fn of(uri: &Uri) -> Option<Origin> {
        let tls = match uri.scheme_str()? {
            "https" => true,
            "http" => false,
            _ => return None,
        };
        let host = uri.host()?.trim_start_matches('[').trim_end_matches(']');
        let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
        Some(Origin {
            tls,
            host: host.to_ascii_lowercase(),
            port,
        })
    }
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.tls { "https" } else { "http" };
        if self.host.contains(':') {
            write!(f, "{scheme}://[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{scheme}://{}:{}", self.host, self.port)
        }
    }
}

/// What one fetch's requests share: the runtime driving hyper, the origin, TLS, the byte count
/// and the failure to report.
pub struct Client {
    rt: tokio::runtime::Runtime,
    origin: Origin,
    tls: Option<tokio_rustls::TlsConnector>,
    allow_loopback: bool,
    received: Received,
    cap: u64,
    /// Where the credentials come from (`Secret ns/name`), for messages; `None`: no credentials.
    credentials: Option<String>,
    /// The last failure, worded for the GitRepo's status (better than gix's chain of causes).
    failure: Mutex<Option<Failure>>,
    /// The repository's base URL after a redirect, for gix's next requests.
    redirected: Mutex<Option<String>>,
}

impl Client {
    /// The last failure recorded, if any.
    pub fn failure(&self) -> Option<Failure> {
        self.failure.lock().expect("failure lock").clone()
    }

    fn fail(&self, failure: Failure) -> io::Error {
        let e = io::Error::other(failure.message.clone());
        *self.failure.lock().expect("failure lock") = Some(failure);
        e
    }
}

/// gix's HTTP backend: requests through one [`Client`].
pub struct Remote {
    client: Arc<Client>,
}

impl Remote {
    /// A backend for the repository at `url` (`http://` or `https://`), trusting the system's
    /// roots and the PEM certificates of `ca_bundle`. Returns the client too, to read its
    /// failure after gix gave up.
    pub fn new(
        url: &str,
        ca_bundle: &[u8],
        allow_loopback: bool,
        received: Received,
        cap: u64,
        credentials: Option<String>,
    ) -> Result<(Remote, Arc<Client>), Failure> {
        let uri: Uri = url
            .parse()
            .map_err(|e| Failure::request(format!("repo {url:?}: not an HTTP URL: {e}")))?;
        let origin = Origin::of(&uri)
            .ok_or_else(|| Failure::request(format!("repo {url:?}: not an HTTP URL")))?;
        if !origin.tls && !ca_bundle.is_empty() {
            return Err(Failure::request(
                "spec.caBundle: given for an http:// repository (it applies to https:// only)",
            ));
        }
        let tls = if origin.tls {
            let config = tls_config(ca_bundle)?;
            Some(tokio_rustls::TlsConnector::from(Arc::new(config)))
        } else {
            None
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| Failure::transport(format!("starting the HTTP client: {e}")))?;
        let client = Arc::new(Client {
            rt,
            origin,
            tls,
            allow_loopback,
            received,
            cap,
            credentials,
            failure: Mutex::new(None),
            redirected: Mutex::new(None),
        });
        Ok((
            Remote {
                client: client.clone(),
            },
            client,
        ))
    }
}

/// The TLS settings: TLS 1.2 and 1.3 (ring), the system's roots and `ca_bundle`'s certificates,
/// HTTP/1.1 offered by ALPN.
pub fn tls_config(ca_bundle: &[u8]) -> Result<rustls::ClientConfig, Failure> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_native_certs::load_native_certs().certs {
        // A system root rustls cannot parse is skipped, as every client does.
        let _ = roots.add(cert);
    }
    if ca_bundle.len() > MAX_CA_BUNDLE_BYTES {
        return Err(Failure::request(format!(
            "spec.caBundle: {} bytes; at most {MAX_CA_BUNDLE_BYTES}",
            ca_bundle.len()
        )));
    }
    let mut given = 0;
    for (i, cert) in CertificateDer::pem_slice_iter(ca_bundle).enumerate() {
        let bad = |e: &dyn std::fmt::Display| {
            Failure::request(format!("spec.caBundle: certificate {}: {e}", i + 1))
        };
        let cert = cert.map_err(|e| bad(&e))?;
        roots.add(cert).map_err(|e| bad(&e))?;
        given += 1;
    }
    if !ca_bundle.is_empty() && given == 0 {
        return Err(Failure::request(
            "spec.caBundle: no PEM certificate (-----BEGIN CERTIFICATE-----) in it",
        ));
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| Failure::request(format!("TLS settings: {e}")))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// A request's answer: its status, headers and body (still to be read).
struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Incoming,
}

/// Why an answer is not handed to gix, as the io error gix expects for it.
#[derive(Debug, Clone)]
enum Refusal {
    /// `401`: gix asks its credentials callback on this one.
    Unauthorized(Vec<Vec<u8>>),
    /// Anything else (the client's recorded failure says it in full).
    Other(String),
}

impl Refusal {
    fn to_io(&self) -> io::Error {
        match self {
            Refusal::Unauthorized(challenges) => io::Error::new(
                io::ErrorKind::PermissionDenied,
                AuthenticationRequired {
                    www_authenticate: challenges.iter().map(|c| c.clone().into()).collect(),
                },
            ),
            Refusal::Other(message) => io::Error::other(message.clone()),
        }
    }
}

/// One request's exchange, shared by the readers gix holds for its headers and body (and, for a
/// POST, the writer of its body).
#[derive(Default)]
struct Exchange {
    /// A POST not sent yet: its URL and headers (the body is in `post`).
    pending: Option<(String, HeaderMap)>,
    /// The POST body written so far.
    post: Vec<u8>,
    /// The answer's header lines (`name: value\n`), or why it is refused.
    head: Option<Result<Vec<u8>, Refusal>>,
    /// The answer's body, not read yet.
    body: Option<Incoming>,
}

impl Client {
    /// Sends the pending POST of `exchange` if there is one, and judges its answer.
    fn answer(&self, exchange: &mut Exchange) {
        let Some((url, headers)) = exchange.pending.take() else {
            return;
        };
        let body = Bytes::from(std::mem::take(&mut exchange.post));
        let authorized = headers.contains_key(header::AUTHORIZATION);
        match self.send(Method::POST, &url, headers, body) {
            Ok(answer) => {
                exchange.head = Some(self.judge(&url, &answer, authorized, None));
                exchange.body = Some(answer.body);
            }
            Err(failure) => {
                let e = self.fail(failure);
                exchange.head = Some(Err(Refusal::Other(e.to_string())));
            }
        }
    }

    /// The header lines of a good answer, or why it is refused (recorded as the failure).
    /// `expect` is the content type prefix an answer must have (`GET info/refs`: a Git
    /// advertisement, not a web page).
    fn judge(
        &self,
        url: &str,
        answer: &Answer,
        authorized: bool,
        expect: Option<&str>,
    ) -> Result<Vec<u8>, Refusal> {
        let at = shown(url);
        let status = answer.status;
        let content_type = answer
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("no content type")
            .to_owned();
        let refuse = |kind: ErrorKind, message: String| {
            self.fail(Failure::new(kind, message.clone()));
            Err(Refusal::Other(message))
        };
        if status == StatusCode::UNAUTHORIZED {
            let message = match (&self.credentials, authorized) {
                (Some(from), true) => format!(
                    "{at}: authentication failed: the server refused the credentials of {from}"
                ),
                (Some(_), false) if !self.origin.tls => format!(
                    "{at}: the server asks for credentials (HTTP 401), which are never sent \
                     over http://: use https://"
                ),
                _ => format!(
                    "{at}: the server asks for credentials (HTTP 401): name a \
                     kubernetes.io/basic-auth Secret in spec.clientSecretName"
                ),
            };
            self.fail(Failure::transport(message));
            let challenges = answer
                .headers
                .get_all(header::WWW_AUTHENTICATE)
                .iter()
                .map(|v| v.as_bytes().to_vec())
                .collect();
            return Err(Refusal::Unauthorized(challenges));
        }
        if status == StatusCode::NOT_FOUND {
            return refuse(
                ErrorKind::NotFound,
                format!("{at}: no repository there (HTTP 404)"),
            );
        }
        if !status.is_success() {
            return refuse(
                ErrorKind::Transport,
                format!("{at}: HTTP {status} ({content_type})"),
            );
        }
        if let Some(prefix) = expect
            && !content_type.starts_with(prefix)
        {
            return refuse(
                ErrorKind::Request,
                format!("{at}: not a Git smart-HTTP server (HTTP {status}, {content_type})"),
            );
        }
        // A good answer: an earlier 401 (before the credentials were sent) is not the story.
        *self.failure.lock().expect("failure lock") = None;
        let mut lines = Vec::new();
        for (name, value) in &answer.headers {
            lines.extend_from_slice(name.as_str().as_bytes());
            lines.extend_from_slice(b": ");
            lines.extend_from_slice(value.as_bytes());
            lines.push(b'\n');
        }
        Ok(lines)
    }

    /// Sends one request on a new connection to the origin and reads the answer's head.
    fn send(
        &self,
        method: Method,
        url: &str,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<Answer, Failure> {
        let uri: Uri = url
            .parse()
            .map_err(|e| Failure::request(format!("{}: not an HTTP URL: {e}", shown(url))))?;
        if Origin::of(&uri).as_ref() != Some(&self.origin) {
            return Err(Failure::request(format!(
                "{}: refused: requests go to {} (the GitRepo's repository) only",
                shown(url),
                self.origin
            )));
        }
        let path = uri
            .path_and_query()
            .map_or_else(|| "/".to_owned(), |p| p.as_str().to_owned());
        let mut request = http::Request::builder()
            .method(method)
            .uri(path)
            .body(Full::new(body))
            .map_err(|e| Failure::request(format!("{}: {e}", shown(url))))?;
        *request.headers_mut() = headers;
        let host = match (self.origin.tls, self.origin.port) {
            (true, 443) | (false, 80) => self.origin.host.clone(),
            (_, port) => format!("{}:{port}", self.origin.host),
        };
        let host = HeaderValue::from_str(&host)
            .map_err(|e| Failure::request(format!("{}: {e}", shown(url))))?;
        request.headers_mut().insert(header::HOST, host);
        let origin = &self.origin;
        let stream = net::connect(&origin.host, origin.port, self.allow_loopback)?;
        let at = origin.to_string();
        let failed = |what: &str, e: &(dyn std::error::Error + 'static)| {
            if self.received.get() > self.cap {
                Failure::refused(TransferCapExceeded(self.cap).to_string())
            } else {
                Failure::transport(format!("{at}: {what}: {}", super::fetch::chain(e)))
            }
        };
        stream
            .set_nonblocking(true)
            .map_err(|e| failed("connecting", &e))?;
        let counted = self.rt.block_on(async {
            tokio::net::TcpStream::from_std(stream).map(|tcp| Counted {
                inner: tcp,
                received: self.received.clone(),
                cap: self.cap,
            })
        });
        let counted = counted.map_err(|e| failed("connecting", &e))?;
        let response = self.rt.block_on(async {
            match &self.tls {
                Some(tls) => {
                    let name = ServerName::try_from(origin.host.clone())
                        .map_err(|e| failed("TLS server name", &e))?;
                    let tls = tokio::time::timeout(IO_TIMEOUT, tls.connect(name, counted))
                        .await
                        .map_err(|_| failed("TLS handshake", &Elapsed))?
                        .map_err(|e| tls_failed(&at, &e))?;
                    exchange(tls, request).await
                }
                None => exchange(counted, request).await,
            }
            .map_err(|e| match e {
                Exchanged::Hyper(e) => failed("HTTP", &e),
                Exchanged::Timeout => failed("HTTP", &Elapsed),
            })
        })?;
        let (parts, body) = response.into_parts();
        Ok(Answer {
            status: parts.status,
            headers: parts.headers,
            body,
        })
    }

    /// Where a redirect answer leads, if it stays within the origin and keeps the request's
    /// path after the repository's base (as gix's own backends require); records the new base.
    fn redirect(&self, url: &str, base_url: &str, answer: &Answer) -> Result<String, Failure> {
        let location = answer
            .headers
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| {
                Failure::transport(format!(
                    "{}: HTTP {} without a Location",
                    shown(url),
                    answer.status
                ))
            })?;
        let next = if location.starts_with('/') {
            format!("{}{location}", self.origin)
        } else {
            location.to_owned()
        };
        let target: Option<Origin> = next.parse::<Uri>().ok().as_ref().and_then(Origin::of);
        if target.as_ref() != Some(&self.origin) {
            let to = target.map_or_else(|| "an unusable location".to_owned(), |o| o.to_string());
            return Err(Failure::request(format!(
                "{}: redirected to {to}: refused (only {} is asked): name the repository's \
                 final URL in spec.repo",
                shown(url),
                self.origin
            )));
        }
        let tail = url.strip_prefix(base_url).unwrap_or_default();
        let Some(base) = next.strip_suffix(tail) else {
            return Err(Failure::request(format!(
                "{}: redirected to {}: the new location does not keep the request's path",
                shown(url),
                shown(&next)
            )));
        };
        *self.redirected.lock().expect("redirect lock") = Some(base.to_owned());
        Ok(next)
    }
}

/// A URL as messages show it: without its query (and never with user-info: refused earlier).
fn shown(url: &str) -> &str {
    url.split('?').next().unwrap_or(url)
}

/// A timeout, as an error.
#[derive(Debug, thiserror::Error)]
#[error("no answer within {} s", IO_TIMEOUT.as_secs())]
struct Elapsed;

/// What a TLS handshake failure says, with what to do about an unknown certificate.
fn tls_failed(at: &str, e: &io::Error) -> Failure {
    let certificate = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .is_some_and(|e| {
            matches!(
                e,
                rustls::Error::InvalidCertificate(_) | rustls::Error::NoCertificatesPresented
            )
        });
    let hint = if certificate {
        " (is the server's CA in spec.caBundle?)"
    } else {
        ""
    };
    Failure::transport(format!("{at}: TLS: {e}{hint}"))
}

enum Exchanged {
    Hyper(hyper::Error),
    Timeout,
}

/// One HTTP/1.1 request on `io`; the connection is driven by a task on the worker's runtime
/// (run while the worker blocks on this exchange and on its body).
async fn exchange<S>(
    io: S,
    request: http::Request<Full<Bytes>>,
) -> Result<http::Response<Incoming>, Exchanged>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let handshake = hyper::client::conn::http1::handshake(TokioIo::new(io));
    let (mut sender, connection) = tokio::time::timeout(IO_TIMEOUT, handshake)
        .await
        .map_err(|_| Exchanged::Timeout)?
        .map_err(Exchanged::Hyper)?;
    tokio::spawn(async move {
        // Its errors reach the request or the body, where they are reported.
        let _ = connection.await;
    });
    tokio::time::timeout(IO_TIMEOUT, sender.send_request(request))
        .await
        .map_err(|_| Exchanged::Timeout)?
        .map_err(Exchanged::Hyper)
}

impl Http for Remote {
    type Headers = Head;
    type ResponseBody = BodyReader;
    type PostBody = PostBody;

    fn get(
        &mut self,
        url: &str,
        base_url: &str,
        headers: impl IntoIterator<Item = impl AsRef<str>>,
    ) -> gix::Result<GetResponse<Head, BodyReader>> {
        let headers = header_map(headers);
        let authorized = headers.contains_key(header::AUTHORIZATION);
        let client = &self.client;
        let mut url = url.to_owned();
        let mut redirects = 0;
        let answer = loop {
            let answer = client
                .send(Method::GET, &url, headers.clone(), Bytes::new())
                .map_err(|f| gix::Error::from_error(client.fail(f)))?;
            if !answer.status.is_redirection() || answer.status == StatusCode::NOT_MODIFIED {
                break answer;
            }
            redirects += 1;
            if redirects > MAX_REDIRECTS {
                let f = Failure::transport(format!(
                    "{}: more than {MAX_REDIRECTS} redirects",
                    shown(&url)
                ));
                return Err(gix::Error::from_error(client.fail(f)));
            }
            url = client
                .redirect(&url, base_url, &answer)
                .map_err(|f| gix::Error::from_error(client.fail(f)))?;
        };
        let head = client.judge(&url, &answer, authorized, Some("application/x-git-"));
        let ok = head.is_ok();
        let exchange = Arc::new(Mutex::new(Exchange {
            head: Some(head),
            body: ok.then_some(answer.body),
            ..Default::default()
        }));
        Ok(GetResponse {
            headers: Head::new(client.clone(), exchange.clone()),
            body: BodyReader::new(client.clone(), exchange),
        })
    }

    fn post(
        &mut self,
        url: &str,
        _base_url: &str,
        headers: impl IntoIterator<Item = impl AsRef<str>>,
        _body: PostBodyDataKind,
    ) -> gix::Result<PostResponse<Head, BodyReader, PostBody>> {
        let exchange = Arc::new(Mutex::new(Exchange {
            pending: Some((url.to_owned(), header_map(headers))),
            ..Default::default()
        }));
        Ok(PostResponse {
            post_body: PostBody {
                exchange: exchange.clone(),
            },
            headers: Head::new(self.client.clone(), exchange.clone()),
            body: BodyReader::new(self.client.clone(), exchange),
        })
    }

    fn configure(&mut self, _config: &dyn std::any::Any) -> gix::Result {
        // gix's http options come from git configuration, which the worker never reads.
        Ok(())
    }

    fn redirected_base_url(&self) -> Option<String> {
        self.client
            .redirected
            .lock()
            .expect("redirect lock")
            .clone()
    }
}

/// gix's request headers (`Name: value` lines) as a header map; a malformed line is dropped.
fn header_map(lines: impl IntoIterator<Item = impl AsRef<str>>) -> HeaderMap {
    let mut map = HeaderMap::new();
    for line in lines {
        let Some((name, value)) = line.as_ref().split_once(':') else {
            continue;
        };
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.trim().as_bytes()),
            HeaderValue::from_str(value.trim()),
        ) {
            map.append(name, value);
        }
    }
    map
}

/// A POST's body as gix writes it: buffered, sent when the answer is first read.
pub struct PostBody {
    exchange: Arc<Mutex<Exchange>>,
}

impl Write for PostBody {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut exchange = self.exchange.lock().expect("exchange lock");
        if exchange.pending.is_none() {
            return Err(io::Error::other("the request was already sent"));
        }
        if exchange.post.len() + buf.len() > MAX_POST_BYTES {
            return Err(io::Error::other(format!(
                "a request body over {MAX_POST_BYTES} bytes"
            )));
        }
        exchange.post.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// An answer's header lines as gix reads them (sending a pending POST first).
pub struct Head {
    client: Arc<Client>,
    exchange: Arc<Mutex<Exchange>>,
    lines: Option<io::Cursor<Vec<u8>>>,
}

impl Head {
    fn new(client: Arc<Client>, exchange: Arc<Mutex<Exchange>>) -> Self {
        Head {
            client,
            exchange,
            lines: None,
        }
    }
}

impl BufRead for Head {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.lines.is_none() {
            let mut exchange = self.exchange.lock().expect("exchange lock");
            self.client.answer(&mut exchange);
            match exchange.head.as_ref() {
                Some(Ok(lines)) => self.lines = Some(io::Cursor::new(lines.clone())),
                Some(Err(refusal)) => return Err(refusal.to_io()),
                None => return Err(io::Error::other("no answer")),
            }
        }
        self.lines.as_mut().expect("lines set").fill_buf()
    }

    fn consume(&mut self, amount: usize) {
        if let Some(lines) = self.lines.as_mut() {
            lines.consume(amount);
        }
    }
}

impl Read for Head {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(buf.len());
        buf[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

/// An answer's body as gix reads it, frame by frame, each read bounded in time.
pub struct BodyReader {
    client: Arc<Client>,
    exchange: Arc<Mutex<Exchange>>,
    chunk: Bytes,
}

impl BodyReader {
    fn new(client: Arc<Client>, exchange: Arc<Mutex<Exchange>>) -> Self {
        BodyReader {
            client,
            exchange,
            chunk: Bytes::new(),
        }
    }
}

impl BufRead for BodyReader {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        while self.chunk.is_empty() {
            let mut exchange = self.exchange.lock().expect("exchange lock");
            self.client.answer(&mut exchange);
            if let Some(Err(refusal)) = exchange.head.as_ref() {
                return Err(refusal.to_io());
            }
            let Some(body) = exchange.body.as_mut() else {
                return Ok(&[]);
            };
            let client = &self.client;
            let frame = client
                .rt
                // The timer is made inside the runtime (it needs its context).
                .block_on(async { tokio::time::timeout(IO_TIMEOUT, body.frame()).await });
            match frame {
                Err(_) => {
                    let f = Failure::transport(format!(
                        "{}: the answer stopped (no data within {} s)",
                        client.origin,
                        IO_TIMEOUT.as_secs()
                    ));
                    return Err(client.fail(f));
                }
                Ok(None) => {
                    exchange.body = None;
                    return Ok(&[]);
                }
                Ok(Some(Err(e))) => {
                    let f = if client.received.get() > client.cap {
                        Failure::refused(TransferCapExceeded(client.cap).to_string())
                    } else {
                        Failure::transport(format!(
                            "{}: reading the answer: {}",
                            client.origin,
                            super::fetch::chain(&e)
                        ))
                    };
                    return Err(client.fail(f));
                }
                Ok(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        self.chunk = data;
                    }
                }
            }
        }
        Ok(&self.chunk)
    }

    fn consume(&mut self, amount: usize) {
        self.chunk.advance(amount.min(self.chunk.len()));
    }
}

impl Read for BodyReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let available = self.fill_buf()?;
        let n = available.len().min(buf.len());
        buf[..n].copy_from_slice(&available[..n]);
        self.consume(n);
        Ok(n)
    }
}

/// A connection that counts what it reads and fails past the transfer cap.
struct Counted<S> {
    inner: S,
    received: Received,
    cap: u64,
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.received.get() > self.cap {
            return Poll::Ready(Err(io::Error::other(TransferCapExceeded(self.cap))));
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            let n = (buf.filled().len() - before) as u64;
            if self.received.add(n) > self.cap {
                return Poll::Ready(Err(io::Error::other(TransferCapExceeded(self.cap))));
            }
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gix_header_lines_become_a_header_map_and_malformed_ones_are_dropped() {
        let map = header_map([
            "User-Agent: git/oxide",
            "Git-Protocol: version=2",
            "no colon here",
            "Bad Name: x",
        ]);
        assert_eq!(map.len(), 2);
        assert_eq!(map["git-protocol"], "version=2");
    }

    #[test]
    fn an_origin_is_scheme_host_and_port_with_their_defaults() {
        let o = |s: &str| Origin::of(&s.parse::<Uri>().unwrap());
        assert_eq!(
            o("https://Git.Example.com/a.git"),
            o("https://git.example.com:443/b")
        );
        assert_ne!(o("https://h/a"), o("http://h/a"));
        assert_ne!(o("https://h/a"), o("https://h:8443/a"));
        assert_eq!(o("ftp://h/a"), None);
        assert_eq!(
            o("https://[::1]:8443/a").unwrap().to_string(),
            "https://[::1]:8443"
        );
    }

    #[test]
    fn a_ca_bundle_without_a_certificate_or_with_a_broken_one_is_refused_by_name() {
        let err = tls_config(b"hello").unwrap_err();
        assert_eq!(err.kind, ErrorKind::Request);
        assert!(
            err.message.starts_with("spec.caBundle: no PEM"),
            "{}",
            err.message
        );
        let broken = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        let err = tls_config(broken).unwrap_err();
        assert!(
            err.message.starts_with("spec.caBundle: certificate 1:"),
            "{}",
            err.message
        );
        assert!(tls_config(b"").is_ok());
    }
}
