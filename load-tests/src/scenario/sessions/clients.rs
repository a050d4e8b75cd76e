//! The clients of the stream measurements:
//!
//! - [`Exec`]: a `v5.channel.k8s.io` WebSocket exec client (what kubectl 1.32 speaks for exec),
//!   the same client against the hub's proxy and straight against an API server;
//! - [`forward_direct`]: a `v4.channel.k8s.io` port-forward client (what kube-rs speaks to an
//!   API server, the agent's last hop), straight to the testkit's API server — the hub does not
//!   serve this protocol (kubectl never sends it);
//! - [`PortForward`]: `kubectl port-forward` through the hub (SPDY tunnelled in a WebSocket
//!   with kubectl 1.32), and [`echo_through`], a TCP client measuring an echo through a port.

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use flotilla_kubestream::channel::{ClientMessage, ServerMessage};
use flotilla_kubestream::status::SessionStatus;
use futures::{SinkExt, StreamExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{Message, http::HeaderValue};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// How long one step of a client (a handshake, a message, an exit) may take.
const STEP: Duration = Duration::from_secs(30);
/// The most sent in one message (kubectl's stdin buffer is 32 KiB, too).
const MESSAGE_BYTES: usize = 32 * 1024;

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// `ws://…` for a proxy or API server base URL (`http://…`).
fn ws_url(base: &str, path: &str) -> String {
    let base = base.trim_end_matches('/');
    let base = base
        .strip_prefix("http://")
        .map(|rest| format!("ws://{rest}"))
        .unwrap_or_else(|| base.to_string());
    format!("{base}{path}")
}

/// Opens a WebSocket on `url` offering `protocol`, which the server must choose.
async fn connect(url: &str, protocol: &'static str) -> Result<Ws> {
    let mut request = url.into_client_request().context("a WebSocket request")?;
    request
        .headers_mut()
        .insert("Sec-WebSocket-Protocol", HeaderValue::from_static(protocol));
    let (ws, response) = tokio::time::timeout(STEP, tokio_tungstenite::connect_async(request))
        .await
        .with_context(|| format!("no answer to the upgrade of {url} in {STEP:?}"))?
        .with_context(|| format!("upgrading {url}"))?;
    let chosen = response
        .headers()
        .get("Sec-WebSocket-Protocol")
        .and_then(|v| v.to_str().ok());
    if chosen != Some(protocol) {
        bail!("{url} answered the subprotocol {chosen:?}, not {protocol}");
    }
    Ok(ws)
}

/// The path of an exec of `command` in pod `default/web` (its stdin open with `stdin`).
pub fn exec_path(command: &[&str], stdin: bool) -> String {
    let mut query: Vec<String> = command
        .iter()
        .map(|c| format!("command={}", encode(c)))
        .collect();
    query.push("stdout=true".into());
    query.push("stderr=true".into());
    if stdin {
        query.push("stdin=true".into());
    }
    format!(
        "/api/v1/namespaces/default/pods/web/exec?{}",
        query.join("&")
    )
}

/// Percent-encodes a query value (everything but RFC 3986's unreserved characters).
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// An open exec session.
pub struct Exec {
    ws: Ws,
}

impl Exec {
    /// Opens an exec on `base` (the hub's `…/clusters/NAME` or an API server) at `path`
    /// ([`exec_path`]); returns once the server answered `101` (through the hub: once the
    /// agent opened the session on its cluster).
    pub async fn open(base: &str, path: &str) -> Result<Self> {
        Ok(Self {
            ws: connect(&ws_url(base, path), "v5.channel.k8s.io").await?,
        })
    }

    /// Writes `data` on stdin.
    pub async fn stdin(&mut self, data: &[u8]) -> Result<()> {
        let message = ClientMessage::Stdin(Bytes::copy_from_slice(data)).encode();
        tokio::time::timeout(STEP, self.ws.send(Message::Binary(message)))
            .await
            .context("stdin was not taken in time")?
            .context("writing stdin")
    }

    /// The next output (stdout, stderr or the exit), `None` once closed.
    pub async fn next(&mut self) -> Result<Option<ServerMessage>> {
        loop {
            let message = tokio::time::timeout(STEP, self.ws.next())
                .await
                .context("no output in time")?;
            match message {
                None | Some(Ok(Message::Close(_))) => return Ok(None),
                Some(Ok(Message::Binary(bytes))) => {
                    return ServerMessage::decode(bytes)
                        .map(Some)
                        .context("a message of the exec");
                }
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Err(e).context("reading the exec"),
            }
        }
    }

    /// Reads until `n` bytes of stdout came (stderr is an error).
    pub async fn read_stdout(&mut self, n: usize) -> Result<()> {
        let mut got = 0;
        while got < n {
            match self.next().await? {
                Some(ServerMessage::Stdout(b)) => got += b.len(),
                other => bail!("waiting for {n} bytes of stdout ({got} so far): {other:?}"),
            }
        }
        Ok(())
    }

    /// Reads to the end: stdout, and the exit, which must be a success.
    pub async fn finish(mut self) -> Result<Vec<u8>> {
        let mut stdout = Vec::new();
        loop {
            match self.next().await? {
                Some(ServerMessage::Stdout(b)) => stdout.extend_from_slice(&b),
                Some(ServerMessage::Stderr(b)) => {
                    bail!(
                        "the command wrote on stderr: {}",
                        String::from_utf8_lossy(&b)
                    )
                }
                Some(ServerMessage::Status(json)) => {
                    let status = SessionStatus::from_json(&json).context("the exit status")?;
                    if status != SessionStatus::Success {
                        bail!("the command failed: {}", status.message());
                    }
                    return Ok(stdout);
                }
                None => bail!("the exec closed without an exit status"),
            }
        }
    }

    /// Ends stdin (v5 CLOSE) and reads to the end.
    pub async fn close(mut self) -> Result<Vec<u8>> {
        let message = ClientMessage::Close(0).encode();
        tokio::time::timeout(STEP, self.ws.send(Message::Binary(message)))
            .await
            .context("stdin's end was not taken in time")?
            .context("ending stdin")?;
        self.finish().await
    }
}

/// Echoes `bytes` through port 80 of pod `default/web` with the `v4.channel.k8s.io`
/// port-forward protocol straight on the API server at `base`: the seconds it took, from the
/// upgrade to the last byte back.
pub async fn forward_direct(base: &str, bytes: usize) -> Result<f64> {
    let url = ws_url(
        base,
        "/api/v1/namespaces/default/pods/web/portforward?ports=80",
    );
    let t = Instant::now();
    let ws = connect(&url, "v4.channel.k8s.io").await?;
    let (mut sink, mut source) = ws.split();
    let payload = pattern(bytes);
    let writing = async {
        for chunk in payload.chunks(MESSAGE_BYTES) {
            let mut message = Vec::with_capacity(chunk.len() + 1);
            message.push(0u8);
            message.extend_from_slice(chunk);
            sink.send(Message::Binary(message.into())).await?;
        }
        anyhow::Ok(())
    };
    let reading = async {
        // Each channel's first message is its port (2 bytes); channel 1 carries errors.
        let (mut got, mut seen) = (Vec::with_capacity(bytes), [false; 2]);
        while got.len() < bytes {
            let Some(message) = source.next().await else {
                bail!("the port-forward closed after {} bytes", got.len());
            };
            let Message::Binary(data) = message? else {
                continue;
            };
            let channel = usize::from(*data.first().unwrap_or(&255));
            let body = match seen.get_mut(channel) {
                Some(first @ false) => {
                    *first = true;
                    data.get(3..).unwrap_or_default()
                }
                Some(true) => &data[1..],
                None => bail!("a message on channel {channel}"),
            };
            if channel == 1 && !body.is_empty() {
                bail!("the API server: {}", String::from_utf8_lossy(body));
            }
            if channel == 0 {
                got.extend_from_slice(body);
            }
        }
        anyhow::Ok(got)
    };
    let bound = Duration::from_secs(600);
    let (written, read) = tokio::time::timeout(bound, async { tokio::join!(writing, reading) })
        .await
        .context("the direct port-forward did not finish in 10 minutes")?;
    written.context("writing the direct port-forward")?;
    let took = t.elapsed().as_secs_f64();
    if read? != payload {
        bail!("the direct port-forward's echo differs");
    }
    Ok(took)
}

/// Deterministic bytes to echo.
fn pattern(n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(7))
        .collect()
}

/// Echoes `bytes` through a TCP port (writing and reading at once; the client closes once all
/// came back): the seconds from connecting to the last byte back.
pub async fn echo_through(port: u16, bytes: usize) -> Result<f64> {
    let payload = pattern(bytes);
    let t = Instant::now();
    let mut tcp = TcpStream::connect(("127.0.0.1", port))
        .await
        .with_context(|| format!("connecting to 127.0.0.1:{port}"))?;
    let (mut r, mut w) = tcp.split();
    let mut got = vec![0u8; bytes];
    let bound = Duration::from_secs(600);
    let (written, read) = tokio::time::timeout(bound, async {
        tokio::join!(w.write_all(&payload), r.read_exact(&mut got))
    })
    .await
    .context("the echo did not finish in 10 minutes")?;
    written.context("writing the echo")?;
    read.context("reading the echo")?;
    let took = t.elapsed().as_secs_f64();
    if got != payload {
        bail!("the echo through port {port} differs");
    }
    let _ = tcp.shutdown().await;
    Ok(took)
}

/// An open TCP connection through a port whose first byte came back (an idle forwarded
/// connection, for memory per session).
pub async fn idle_connection(port: u16) -> Result<TcpStream> {
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).await?;
    tcp.write_all(b"x").await?;
    let mut one = [0u8; 1];
    tokio::time::timeout(STEP, tcp.read_exact(&mut one))
        .await
        .context("no echo of the first byte in time")??;
    Ok(tcp)
}

/// `kubectl.1.32` beside the `kubectl` on `PATH` (the Cloud SDK's versioned binaries; the
/// dispatcher would pick kubectl 1.30 for our spokes, whose port-forward is raw SPDY), else
/// `kubectl`.
pub fn kubectl_1_32() -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|d| d.join("kubectl"))
        .find(|p| p.exists());
    on_path
        .and_then(|k| std::fs::canonicalize(k).ok())
        .and_then(|k| k.parent().map(|d| d.join("kubectl.1.32")))
        .filter(|k| k.exists())
        .unwrap_or_else(|| PathBuf::from("kubectl"))
}

/// A running `kubectl port-forward pod/web LOCAL:80` through the hub, killed when dropped.
pub struct PortForward {
    _child: tokio::process::Child,
    /// Reads kubectl's output ("Handling connection for …" per connection).
    reader: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
    /// The local port.
    pub port: u16,
}

impl PortForward {
    /// Starts `kubectl` on the hub's proxy at `cluster_base` (`http://…/clusters/NAME`, no
    /// token) and waits until it forwards.
    pub async fn start(kubectl: &Path, cluster_base: &str) -> Result<Self> {
        let dir = tempfile::tempdir()?;
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: \
                 {cluster_base}\nusers:\n- name: u\n  user: {{}}\ncontexts:\n- name: c\n  \
                 context: {{cluster: c, user: u}}\ncurrent-context: c\n"
            ),
        )?;
        let port = flotilla_testkit::free_port();
        let mut child = tokio::process::Command::new(kubectl)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg("--cache-dir")
            .arg(dir.path().join("cache"))
            .args(["port-forward", "pod/web", &format!("{port}:80")])
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("running {}", kubectl.display()))?;
        let mut out = BufReader::new(child.stdout.take().expect("piped")).lines();
        let line = tokio::time::timeout(STEP, out.next_line())
            .await
            .context("kubectl port-forward did not start in time")??;
        if !line
            .as_deref()
            .is_some_and(|l| l.starts_with("Forwarding from"))
        {
            bail!("kubectl port-forward said {line:?}");
        }
        let reader = tokio::spawn(async move { while let Ok(Some(_)) = out.next_line().await {} });
        Ok(Self {
            _child: child,
            reader,
            _dir: dir,
            port,
        })
    }
}

impl Drop for PortForward {
    fn drop(&mut self) {
        self.reader.abort();
    }
}
