//! DNS rebinding on an open hub (issue 42, finding 5). The demo's hub is open: no API tokens,
//! every caller an anonymous admin, safe only because it listens on loopback. A web page on
//! another site re-points its own name at 127.0.0.1 and the browser lets it read the answers:
//! the dashboard's CSRF token (then an accept of a pending cluster), and Secrets on any cluster
//! through the proxy. Every such request carries the page's name in `Host`; the hub must answer
//! only its loopback names and listen address.

use flotilla_attacks::{Server, on_every_server};
use flotilla_testkit::{NatsServer, Proc, binary, free_port};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long the hub gets to start serving.
const START_WITHIN: Duration = Duration::from_secs(30);

/// One HTTP/1.1 request to `127.0.0.1:port` naming `host`: the status code and the body.
async fn request(port: u16, method: &str, path: &str, host: &str, body: &str) -> (u16, String) {
    let exchange = async {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()?;
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        s.write_all(req.as_bytes()).await.ok()?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await.ok()?;
        let text = String::from_utf8_lossy(&buf).into_owned();
        let code = text.split(' ').nth(1)?.parse().ok()?;
        let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string())?;
        Some((code, body))
    };
    tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .ok()
        .flatten()
        .unwrap_or((0, String::new()))
}

on_every_server!(a_rebound_host_reaches_neither_the_dashboard_nor_the_proxy_of_an_open_hub);

/// The rebound page's requests, each with its own name in `Host`.
async fn a_rebound_host_reaches_neither_the_dashboard_nor_the_proxy_of_an_open_hub(server: Server) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let port = free_port();
    let conf = dir.path().join("nats.conf");
    std::fs::write(
        &conf,
        format!(
            "listen: 127.0.0.1:{port}\njetstream {{ store_dir: {:?} }}\n",
            dir.path().join("js").display().to_string()
        ),
    )
    .expect("write the server config");
    let nats = NatsServer::start_from_config_with(&server.binary, conf, port);
    let (dashboard, proxy) = (free_port(), free_port());
    let mut cmd = std::process::Command::new(binary("flotilla-hub"));
    cmd.args(["--nats-url", &nats.url()])
        .args(["--grpc-listen", &format!("127.0.0.1:{}", free_port())])
        .args(["--metrics-listen", &format!("127.0.0.1:{}", free_port())])
        .args(["--dashboard-listen", &format!("127.0.0.1:{dashboard}")])
        .args(["--cluster-proxy-listen", &format!("127.0.0.1:{proxy}")])
        // The hub's 8 GiB default is refused by a server with less free disk (a CI runner
        // after a clean build): the status stream's bound every test hub takes.
        .args([
            "--status-stream-max-bytes",
            &flotilla_testkit::STATUS_STREAM_MAX_BYTES.to_string(),
        ])
        .env_remove("FLOTILLA_API_TOKEN_FILE")
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1");
    let mut hub = Proc::spawn("flotilla-hub", cmd, dir.path().join("hub.log"));
    let local = format!("127.0.0.1:{dashboard}");
    let deadline = Instant::now() + START_WITHIN;
    while request(dashboard, "GET", "/", &local, "").await.0 != 200 {
        assert!(
            hub.is_running() && Instant::now() < deadline,
            "[{}] the open hub's dashboard did not answer its own address within \
             {START_WITHIN:?} (hub running: {}); {}",
            server.version,
            hub.is_running(),
            hub.output()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let rebound = format!("rebound.attacker.example:{dashboard}");
    let mut problems = Vec::new();
    // The dashboard: the overview page (which carries the CSRF token) and an accept.
    let (code, body) = request(dashboard, "GET", "/", &rebound, "").await;
    if code != 403 || !body.contains("DNS rebinding") || body.contains("csrf") {
        problems.push(format!(
            "GET / on the dashboard with Host {rebound}: {code} {}",
            body.chars().take(200).collect::<String>()
        ));
    }
    let (code, _) = request(
        dashboard,
        "POST",
        "/clusters/edge-1/registration",
        &rebound,
        "action=accept&csrf=x",
    )
    .await;
    if code != 403 {
        problems.push(format!("POST accept with Host {rebound}: {code}, not 403"));
    }
    // The proxy: a Secret list on a cluster, as the open hub's anonymous admin.
    let secrets = "/clusters/edge-1/api/v1/namespaces/kube-system/secrets";
    let (code, body) = request(
        proxy,
        "GET",
        secrets,
        &format!("rebound.attacker.example:{proxy}"),
        "",
    )
    .await;
    if code != 403 || !body.contains("DNS rebinding") {
        problems.push(format!(
            "GET {secrets} through the proxy with a rebound Host: {code} {}",
            body.chars().take(200).collect::<String>()
        ));
    }
    // Its own names still work (the cluster is unknown here, which is not a 403).
    for host in [format!("127.0.0.1:{proxy}"), format!("localhost:{proxy}")] {
        let (code, _) = request(proxy, "GET", secrets, &host, "").await;
        if code == 403 || code == 0 {
            problems.push(format!("GET {secrets} with Host {host}: {code}"));
        }
    }
    assert!(
        problems.is_empty(),
        "[{}] {}",
        server.version,
        problems.join("\n")
    );
}
