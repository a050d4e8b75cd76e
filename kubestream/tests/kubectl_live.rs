//! The real kubectl port-forwards through this crate: a small API server (discovery, one
//! Running pod) whose port-forward upgrade is answered by `negotiate`, served by `spdy::conn`
//! — raw, or over `wsio` for the tunnel — with an echo behind every stream pair. kubectl 1.30
//! (raw SPDY only), 1.32 (SPDY tunnelled in a WebSocket) and 1.32 with
//! `KUBECTL_PORT_FORWARD_WEBSOCKETS=false` (raw SPDY) each carry 1 MiB both ways intact.
//!
//! kubectl comes from the Google Cloud SDK beside the `kubectl` on `PATH` (`kubectl.1.30`,
//! `kubectl.1.32`), as the hub's proxy tests find it.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use flotilla_kubestream::negotiate::{self, Purpose, Upgrade};
use flotilla_kubestream::spdy::conn::{self, Connection};
use flotilla_kubestream::wsio::WsIo;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio::time::timeout;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::protocol::Role;

const T: Duration = Duration::from_secs(30);

/// `kubectl.1.X` beside the `kubectl` on `PATH` (the Cloud SDK's versioned binaries).
fn kubectl(minor: &str) -> PathBuf {
    let path = std::env::var_os("PATH").expect("PATH");
    let dispatcher = std::env::split_paths(&path)
        .map(|d| d.join("kubectl"))
        .find(|p| p.exists())
        .expect("kubectl on PATH");
    let dir = std::fs::canonicalize(&dispatcher)
        .expect("kubectl resolves")
        .parent()
        .expect("a folder")
        .to_owned();
    let versioned = dir.join(format!("kubectl.{minor}"));
    assert!(
        versioned.exists(),
        "{} is missing: these tests need the Cloud SDK's versioned kubectl",
        versioned.display()
    );
    versioned
}

const POD: &str = r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"default","uid":"u-1"},"spec":{"containers":[{"name":"c","image":"x","ports":[{"containerPort":8080}]}]},"status":{"phase":"Running"}}"#;

fn document(path: &str) -> Option<&'static str> {
    Some(match path {
        "/api" => {
            r#"{"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":[{"clientCIDR":"0.0.0.0/0","serverAddress":"127.0.0.1"}]}"#
        }
        "/apis" => r#"{"kind":"APIGroupList","apiVersion":"v1","groups":[]}"#,
        "/api/v1" => {
            r#"{"kind":"APIResourceList","groupVersion":"v1","resources":[{"name":"pods","singularName":"pod","namespaced":true,"kind":"Pod","verbs":["get","list"]},{"name":"pods/portforward","singularName":"","namespaced":true,"kind":"PodPortForwardOptions","verbs":["create","get"]}]}"#
        }
        "/api/v1/namespaces/default/pods/p" => POD,
        _ => return None,
    })
}

/// Reads one request head, byte by byte so nothing after it is consumed.
async fn head(tcp: &mut TcpStream) -> Option<http::Request<()>> {
    let mut raw = Vec::new();
    while !raw.ends_with(b"\r\n\r\n") {
        raw.push(tcp.read_u8().await.ok()?);
    }
    let text = String::from_utf8(raw).ok()?;
    let mut lines = text.split("\r\n").filter(|l| !l.is_empty());
    let mut first = lines.next()?.split(' ');
    let mut b = http::Request::builder()
        .method(first.next()?)
        .uri(first.next()?);
    for line in lines {
        let (name, value) = line.split_once(':')?;
        b = b.header(name.trim(), value.trim());
    }
    b.body(()).ok()
}

fn response_head(resp: &http::Response<()>) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {}\r\n", resp.status()).into_bytes();
    for (name, value) in resp.headers() {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// Accepts every stream and echoes it; FIN answered with FIN (the error streams' too).
async fn echo(mut conn: Connection) {
    let mut tasks = JoinSet::new();
    while let Some(incoming) = conn.next().await {
        let (mut rx, mut tx) = incoming.accept().await.unwrap();
        tasks.spawn(async move {
            while let Ok(Some(d)) = rx.recv().await {
                if tx.send(d).await.is_err() {
                    return;
                }
            }
            let _ = tx.finish().await;
        });
    }
    while tasks.join_next().await.is_some() {}
}

async fn serve_one(mut tcp: TcpStream) {
    let Some(req) = head(&mut tcp).await else {
        return;
    };
    let path = req.uri().path().to_owned();
    if !path.ends_with("/portforward") {
        let (status, body) = match document(&path) {
            Some(body) => ("200 OK", body),
            None => ("404 Not Found", "{}"),
        };
        let answer = format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = tcp.write_all(answer.as_bytes()).await;
        return;
    }
    let upgrade = negotiate::upgrade(&req, Purpose::PortForward).expect("kubectl's upgrade");
    let resp = match &upgrade {
        Upgrade::WebSocket(ws) => ws.response(),
        Upgrade::Spdy(spdy) => spdy.response(),
    };
    tcp.write_all(&response_head(&resp)).await.unwrap();
    let config = conn::Config::default();
    let (conn, driver) = match upgrade {
        Upgrade::WebSocket(_) => {
            let ws = WebSocketStream::from_raw_socket(tcp, Role::Server, None).await;
            let (conn, driver) = conn::serve(WsIo::new(ws), &config);
            (conn, tokio::spawn(driver))
        }
        Upgrade::Spdy(_) => {
            let (conn, driver) = conn::serve(tcp, &config);
            (conn, tokio::spawn(driver))
        }
    };
    echo(conn).await;
    let _ = driver.await;
}

async fn api_server() -> (u16, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        let mut conns = JoinSet::new();
        while let Ok((tcp, _)) = listener.accept().await {
            conns.spawn(serve_one(tcp));
        }
    });
    (port, task)
}

async fn port_forward_echoes(minor: &str, env: &[(&str, &str)]) {
    let (api, server) = api_server().await;
    let dir = tempfile_dir();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: \"http://127.0.0.1:{api}\"}}}}]\nusers: [{{name: u, user: {{token: t}}}}]\ncontexts: [{{name: c, context: {{cluster: c, user: u}}}}]\ncurrent-context: c\n"
        ),
    )
    .unwrap();
    let local = flotilla_testkit::free_port();
    let mut child = tokio::process::Command::new(kubectl(minor))
        .args(["port-forward", "pod/p", &format!("{local}:8080")])
        .env("KUBECONFIG", &kubeconfig)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = timeout(T, out.next_line()).await.unwrap().unwrap();
    assert!(
        line.as_deref()
            .is_some_and(|l| l.starts_with("Forwarding from")),
        "kubectl {minor} said {line:?}"
    );
    for round in 0..2u8 {
        let payload: Vec<u8> = (0..1024 * 1024u32)
            .map(|i| (i as u8).wrapping_add(round))
            .collect();
        let mut tcp = TcpStream::connect(("127.0.0.1", local)).await.unwrap();
        let (mut r, mut w) = tcp.split();
        let writing = async {
            w.write_all(&payload).await.unwrap();
            w.shutdown().await.unwrap();
        };
        let mut got = Vec::new();
        let reading = r.read_to_end(&mut got);
        let ((), n) = timeout(T, async { tokio::join!(writing, reading) })
            .await
            .unwrap_or_else(|_| panic!("kubectl {minor}: the echo stalled"));
        n.unwrap();
        assert!(
            got == payload,
            "kubectl {minor}: {} bytes back of {}",
            got.len(),
            payload.len()
        );
    }
    child.kill().await.unwrap();
    server.abort();
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempfile_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "kubestream-live-{}-{}",
        std::process::id(),
        flotilla_testkit::free_port()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_30_port_forwards_over_raw_spdy() {
    port_forward_echoes("1.30", &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_32_port_forwards_over_spdy_in_a_websocket() {
    port_forward_echoes("1.32", &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_32_falls_back_to_raw_spdy() {
    port_forward_echoes("1.32", &[("KUBECTL_PORT_FORWARD_WEBSOCKETS", "false")]).await;
}
