//! A Git smart-HTTP server for tests: the real `git http-backend` run as a CGI per request
//! behind a small hyper server on a free loopback port, with optional basic authentication and
//! TLS (a CA and a server certificate for `127.0.0.1` and `localhost`, made with rcgen), so the
//! fetch worker is tested against the protocol git itself serves.
//!
//! The server runs on its own thread (any test, async or not, can use it) and stops when the
//! [`GitHttp`] is dropped. Besides the repositories under its base directory it answers:
//! `/html/…` with a web page (not a Git server), `/moved/<path>` with a redirect to `/<path>`
//! on the same origin, and `/away/<path>` with a redirect to another origin. A test can
//! [`GitHttp::hold`] every answer until it has looked at the client (its processes), and read
//! the requests seen ([`GitHttp::requests`]).

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{Request, Response, StatusCode, body::Incoming, service::service_fn};
use hyper_util::rt::TokioIo;
use tokio::{io::AsyncWriteExt, sync::watch};

/// The largest request body served (a fetch negotiation is a few KiB).
const MAX_REQUEST_BYTES: usize = 8 * 1024 * 1024;

/// How the server is set up.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Serve HTTPS with a certificate of a test CA ([`GitHttp::ca_pem`]).
    pub tls: bool,
    /// Require this user name and password (basic authentication) for every Git request.
    pub basic_auth: Option<(String, String)>,
}

/// One request the server saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// `GET` or `POST`.
    pub method: String,
    /// The path and query.
    pub path: String,
    /// Whether it carried the right credentials (`false` also when none were required).
    pub authorized: bool,
    /// The status answered.
    pub status: u16,
}

/// A running server; stopped when dropped.
pub struct GitHttp {
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// The test CA's certificate (PEM), with [`Options::tls`].
    pub ca_pem: Option<String>,
    tls: bool,
    hold: watch::Sender<bool>,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// What every connection's handler shares.
struct Shared {
    base: PathBuf,
    auth: Option<String>,
    origin: String,
    hold: watch::Receiver<bool>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl GitHttp {
    /// Serves every repository under `base` (`git http-backend`, `GIT_HTTP_EXPORT_ALL`).
    pub fn serve(base: &Path, options: Options) -> GitHttp {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        std_listener.set_nonblocking(true).expect("nonblocking");
        let port = std_listener.local_addr().expect("local addr").port();
        let (ca_pem, acceptor) = if options.tls {
            let (ca, acceptor) = tls();
            (Some(ca), Some(acceptor))
        } else {
            (None, None)
        };
        let scheme = if options.tls { "https" } else { "http" };
        let (hold, hold_rx) = watch::channel(false);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let shared = Arc::new(Shared {
            base: base.to_path_buf(),
            auth: options.basic_auth.as_ref().map(|(u, p)| {
                format!(
                    "Basic {}",
                    data_encoding::BASE64.encode(format!("{u}:{p}").as_bytes())
                )
            }),
            origin: format!("{scheme}://127.0.0.1:{port}"),
            hold: hold_rx,
            seen: seen.clone(),
        });
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(accept(std_listener, acceptor, shared, stopped));
        });
        GitHttp {
            port,
            ca_pem,
            tls: options.tls,
            hold,
            seen,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// The URL of a repository directory under the base (`https://127.0.0.1:<port>/<name>`).
    pub fn url(&self, name: &str) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}/{name}", self.port)
    }

    /// Holds every answer (requests wait) until [`GitHttp::release`].
    pub fn hold(&self) {
        self.hold.send_replace(true);
    }

    /// Answers held requests and every later one.
    pub fn release(&self) {
        self.hold.send_replace(false);
    }

    /// The requests seen so far.
    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().expect("seen lock").clone()
    }
}

impl Drop for GitHttp {
    fn drop(&mut self) {
        self.release();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A test CA (its PEM) and a TLS acceptor with a server certificate it signed for
/// `127.0.0.1` and `localhost`.
fn tls() -> (String, tokio_rustls::TlsAcceptor) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "flotilla test git CA");
    let ca_cert = ca.self_signed(&ca_key).expect("CA certificate");
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().expect("server key");
    let params = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .expect("server params");
    let cert = params.signed_by(&key, &issuer).expect("server certificate");
    let key_der = rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS versions")
    .with_no_client_auth()
    .with_single_cert(vec![cert.der().clone()], key_der)
    .expect("server certificate and key");
    (
        ca_cert.pem(),
        tokio_rustls::TlsAcceptor::from(Arc::new(config)),
    )
}

async fn accept(
    listener: std::net::TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    shared: Arc<Shared>,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let (stream, peer) = tokio::select! {
            _ = &mut stopped => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(_) => continue,
            },
        };
        let shared = shared.clone();
        let tls = tls.clone();
        connections.spawn(async move {
            let service = service_fn(move |req| answer(shared.clone(), peer, req));
            let http = hyper::server::conn::http1::Builder::new();
            match tls {
                Some(tls) => {
                    // A client refusing the certificate ends here (the refusal test).
                    if let Ok(stream) = tls.accept(stream).await {
                        let _ = http.serve_connection(TokioIo::new(stream), service).await;
                    }
                }
                None => {
                    let _ = http.serve_connection(TokioIo::new(stream), service).await;
                }
            }
        });
    }
    connections.shutdown().await;
}

type Answer = Response<Full<Bytes>>;

fn plain(status: StatusCode, body: &str) -> Answer {
    let mut r = Response::new(Full::new(Bytes::from(body.to_owned())));
    *r.status_mut() = status;
    r
}

async fn answer(
    shared: Arc<Shared>,
    peer: SocketAddr,
    req: Request<Incoming>,
) -> Result<Answer, std::convert::Infallible> {
    let mut hold = shared.hold.clone();
    while *hold.borrow_and_update() {
        if hold.changed().await.is_err() {
            break;
        }
    }
    let method = req.method().to_string();
    let path = req
        .uri()
        .path_and_query()
        .map_or("/".to_owned(), |p| p.to_string());
    let authorized = shared.auth.as_ref().is_some_and(|want| {
        req.headers()
            .get(hyper::header::AUTHORIZATION)
            .is_some_and(|got| got.as_bytes() == want.as_bytes())
    });
    let response = route(&shared, peer, req, authorized).await;
    shared.seen.lock().expect("seen lock").push(Seen {
        method,
        path,
        authorized,
        status: response.status().as_u16(),
    });
    Ok(response)
}

async fn route(
    shared: &Shared,
    peer: SocketAddr,
    req: Request<Incoming>,
    authorized: bool,
) -> Answer {
    let path = req.uri().path().to_owned();
    let query = req.uri().query().unwrap_or_default().to_owned();
    let tail = if query.is_empty() {
        String::new()
    } else {
        format!("?{query}")
    };
    if path.starts_with("/html/") {
        let mut r = plain(
            StatusCode::OK,
            "<html><body>internal page: secret-marker-4711</body></html>",
        );
        r.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            "text/html".parse().expect("header"),
        );
        return r;
    }
    for (prefix, to) in [
        ("/moved/", shared.origin.clone()),
        ("/away/", "https://127.0.0.2:9".to_owned()),
    ] {
        if let Some(rest) = path.strip_prefix(prefix) {
            let mut r = plain(StatusCode::MOVED_PERMANENTLY, "");
            let location = format!("{to}/{rest}{tail}");
            r.headers_mut()
                .insert(hyper::header::LOCATION, location.parse().expect("location"));
            return r;
        }
    }
    if shared.auth.is_some() && !authorized {
        let mut r = plain(StatusCode::UNAUTHORIZED, "authentication required");
        r.headers_mut().insert(
            hyper::header::WWW_AUTHENTICATE,
            "Basic realm=\"git\"".parse().expect("header"),
        );
        return r;
    }
    cgi(&shared.base, peer, req, &path, &query).await
}

/// Runs `git http-backend` for one request and turns its CGI answer into a response.
async fn cgi(
    base: &Path,
    peer: SocketAddr,
    req: Request<Incoming>,
    path: &str,
    query: &str,
) -> Answer {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let (content_type, protocol, encoding) = (
        header("content-type"),
        header("git-protocol"),
        header("content-encoding"),
    );
    let method = req.method().to_string();
    let body = match Limited::new(req.into_body(), MAX_REQUEST_BYTES)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(_) => return plain(StatusCode::PAYLOAD_TOO_LARGE, "request too large"),
    };
    let mut cmd = tokio::process::Command::new("git");
    cmd.arg("http-backend")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", base)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_PROJECT_ROOT", base)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("PATH_INFO", path)
        .env("QUERY_STRING", query)
        .env("REQUEST_METHOD", &method)
        .env("CONTENT_TYPE", &content_type)
        .env("CONTENT_LENGTH", body.len().to_string())
        .env("REMOTE_ADDR", peer.ip().to_string())
        .env("REMOTE_USER", "tester")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    if !protocol.is_empty() {
        cmd.env("GIT_PROTOCOL", &protocol);
    }
    if !encoding.is_empty() {
        cmd.env("HTTP_CONTENT_ENCODING", &encoding);
    }
    let Ok(mut child) = cmd.spawn() else {
        return plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            "git http-backend did not start",
        );
    };
    let mut stdin = child.stdin.take().expect("stdin piped");
    let write = async move {
        let _ = stdin.write_all(&body).await;
        drop(stdin);
    };
    let (_, out) = tokio::join!(write, child.wait_with_output());
    match out {
        Ok(out) => parse_cgi(&out.stdout),
        Err(_) => plain(StatusCode::INTERNAL_SERVER_ERROR, "git http-backend failed"),
    }
}

/// A CGI answer: header lines up to a blank line (`Status:` gives the status), then the body.
fn parse_cgi(out: &[u8]) -> Answer {
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, i + 4))
        .or_else(|| {
            out.windows(2)
                .position(|w| w == b"\n\n")
                .map(|i| (i, i + 2))
        });
    let Some((head_end, body_start)) = split else {
        return plain(StatusCode::BAD_GATEWAY, "no CGI header");
    };
    let mut response = Response::new(Full::new(Bytes::copy_from_slice(&out[body_start..])));
    for line in String::from_utf8_lossy(&out[..head_end]).lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            let code = value.split(' ').next().and_then(|c| c.parse().ok());
            if let Some(code) = code.and_then(|c| StatusCode::from_u16(c).ok()) {
                *response.status_mut() = code;
            }
        } else if let (Ok(name), Ok(value)) = (
            hyper::header::HeaderName::from_bytes(name.trim().as_bytes()),
            hyper::header::HeaderValue::from_str(value),
        ) {
            response.headers_mut().append(name, value);
        }
    }
    response
}
