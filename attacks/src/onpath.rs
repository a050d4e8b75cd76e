//! A man in the middle of the NATS link (issue 42, finding 1): a TCP relay that passes every
//! byte through but rewrites the server's first line — the plaintext `INFO` NATS sends before
//! TLS starts — to advertise a server of the attacker's, then resets the link; and the TLS
//! material an attacker and a plain fleet need (a CA, a server certificate, a server that
//! serves it).

use flotilla_testkit::{NatsServer, free_port};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A certificate authority of the test's making.
pub struct Ca {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    pem: String,
}

impl Ca {
    /// A new CA named `name`.
    pub fn new(name: &str) -> Self {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let key = KeyPair::generate().expect("a CA key");
        let cert = params.self_signed(&key).expect("a self-signed CA");
        Self {
            pem: cert.pem(),
            issuer: rcgen::Issuer::new(params, key),
        }
    }

    /// The CA certificate (PEM).
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// Writes a server certificate for `127.0.0.1` and `localhost` and its key into `dir` as
    /// `<name>.pem` and `<name>-key.pem`.
    pub fn server_cert(&self, dir: &Path, name: &str) -> (PathBuf, PathBuf) {
        let key = rcgen::KeyPair::generate().expect("a server key");
        let params =
            rcgen::CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
                .expect("server parameters");
        let cert = params.signed_by(&key, &self.issuer).expect("a server cert");
        let (cert_path, key_path) = (
            dir.join(format!("{name}.pem")),
            dir.join(format!("{name}-key.pem")),
        );
        std::fs::write(&cert_path, cert.pem()).expect("write the server cert");
        std::fs::write(&key_path, key.serialize_pem()).expect("write the server key");
        (cert_path, key_path)
    }
}

/// A nats-server without authentication serving TLS with a certificate of `ca`, with its
/// monitoring port open (`/connz` lists who connected).
pub struct TlsServer {
    /// The server.
    pub nats: NatsServer,
    /// Its monitoring port.
    pub monitor_port: u16,
}

impl TlsServer {
    /// Starts `binary` with a certificate of `ca` (files under `dir`, named after `name`).
    pub fn start(binary: &Path, dir: &Path, name: &str, ca: &Ca) -> Self {
        let (cert, key) = ca.server_cert(dir, name);
        let (port, monitor_port) = (free_port(), free_port());
        let conf = dir.join(format!("{name}.conf"));
        std::fs::write(
            &conf,
            format!(
                "listen: \"127.0.0.1:{port}\"\nhttp: \"127.0.0.1:{monitor_port}\"\n\
                 tls: {{\n  cert_file: {cert:?}\n  key_file: {key:?}\n  timeout: 5\n}}\n"
            ),
        )
        .expect("write the server config");
        Self {
            nats: NatsServer::start_from_config_with(binary, conf, port),
            monitor_port,
        }
    }

    /// `tls://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("tls://127.0.0.1:{}", self.nats.port())
    }

    /// The names of the clients connected now (`/connz`).
    pub async fn client_names(&self) -> Vec<String> {
        let body = crate::fleet::http_get(self.monitor_port, "/connz")
            .await
            .unwrap_or_default();
        let connz: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        connz["connections"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["name"].as_str().map(str::to_string))
            .collect()
    }
}

/// A relay in front of a NATS server that adds `advertise` to the `connect_urls` of the
/// server's plaintext `INFO` line, and passes everything else through unchanged. After
/// [`InfoRelay::cut`] it resets every link and refuses new ones, so a client can only go where
/// the injected line told it.
pub struct InfoRelay {
    /// Where clients reach it.
    pub port: u16,
    injected: Arc<AtomicUsize>,
    cut: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl InfoRelay {
    /// Relays `127.0.0.1:<port>` to the server at `upstream_port`.
    pub async fn start(upstream_port: u16, advertise: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a relay");
        let port = listener.local_addr().expect("relay address").port();
        let injected = Arc::new(AtomicUsize::new(0));
        let (cut, cut_rx) = watch::channel(false);
        let counter = injected.clone();
        let task = tokio::spawn(async move {
            let mut stop = cut_rx.clone();
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let Ok((client, _)) = accepted else { continue };
                        tokio::spawn(relay(
                            client,
                            upstream_port,
                            advertise.clone(),
                            counter.clone(),
                            cut_rx.clone(),
                        ));
                    }
                    // The listener is dropped: new links are refused.
                    _ = stop.wait_for(|c| *c) => return,
                }
            }
        });
        Self {
            port,
            injected,
            cut,
            task,
        }
    }

    /// How many `INFO` lines it rewrote.
    pub fn injected(&self) -> usize {
        self.injected.load(Ordering::SeqCst)
    }

    /// Resets every relayed link and stops accepting.
    pub fn cut(&self) {
        let _ = self.cut.send(true);
    }

    /// `tls://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("tls://127.0.0.1:{}", self.port)
    }
}

impl Drop for InfoRelay {
    fn drop(&mut self) {
        self.cut();
        self.task.abort();
    }
}

/// One relayed link: the server's first line rewritten, then bytes both ways until either side
/// closes or the relay is cut.
async fn relay(
    client: TcpStream,
    upstream_port: u16,
    advertise: String,
    injected: Arc<AtomicUsize>,
    mut cut: watch::Receiver<bool>,
) {
    let Ok(server) = TcpStream::connect(("127.0.0.1", upstream_port)).await else {
        return;
    };
    let mut server = BufReader::new(server);
    let mut first = String::new();
    if server.read_line(&mut first).await.is_err() {
        return;
    }
    let mut client = client;
    let line = match first.strip_prefix("INFO ") {
        Some(json) => {
            let mut info: serde_json::Value = serde_json::from_str(json.trim()).unwrap_or_default();
            let mut urls: Vec<serde_json::Value> =
                info["connect_urls"].as_array().cloned().unwrap_or_default();
            urls.push(serde_json::Value::String(advertise));
            info["connect_urls"] = serde_json::Value::Array(urls);
            injected.fetch_add(1, Ordering::SeqCst);
            format!("INFO {info}\r\n")
        }
        None => first,
    };
    if client.write_all(line.as_bytes()).await.is_err() {
        return;
    }
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
        _ = cut.wait_for(|c| *c) => {
            // Dropping both streams resets the link.
        }
    }
}
