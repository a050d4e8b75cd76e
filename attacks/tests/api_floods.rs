//! API floods (issue 42, finding 3): a read-only API token against the gRPC server. The
//! attacker speaks HTTP/2 itself (the `h2` crate, no gRPC client) so that it decides flow
//! control: every stream it opens has a window of zero bytes and is never read — the hub can
//! send nothing on it. Before the fix each such `WatchClusters` built a copy of every cluster
//! before sending the first, and 200 of them over 2,000 clusters took the hub from 82 MiB to
//! 1.7 GiB. Now the hub's memory stays bounded, the watches past the identity's share are
//! refused with a status naming the limit and its flag, another identity still gets its own
//! watch, and watchers that read nothing are dropped after the deadline with a clear status.
//! Connections past `--grpc-max-connections` are closed, counted, and their places come back.

use bytes::Bytes;
use flotilla_attacks::fleet::{SOON, metric_samples_text, samples};
use flotilla_attacks::{Fleet, HubOptions, Server, on_every_server, wait_for};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::sync::mpsc;

/// Clusters the hub holds during the flood.
const CLUSTERS: usize = 2_000;
/// Labels on each (63 characters each: about 4 KiB a cluster, like one an agent reports).
const LABELS: usize = 40;
/// Watches the attacker opens.
const WATCHES: usize = 200;
/// Over this many connections (each within the hub's streams per connection).
const CONNECTIONS: usize = 8;
/// The most the hub's resident memory may grow while the watches are open. Before the fix:
/// about 1,600 MiB.
const RSS_GROWTH_MAX_MIB: u64 = 96;
/// How long the flood is held open while the hub's memory is sampled.
const HOLD: Duration = Duration::from_secs(10);
/// The hub's default deadline for a watcher that reads nothing (`--grpc-slow-watcher-seconds`).
const SLOW_WATCHER: Duration = Duration::from_secs(30);

const ADMIN: &str = "api-flood-admin-0123456789";
const VIEWER: &str = "api-flood-viewer-0123456789";
const LIMIT_REFUSALS: &str = "flotilla_hub_limit_refusals_total";
/// gRPC's RESOURCE_EXHAUSTED.
const RESOURCE_EXHAUSTED: &str = "8";

/// An HTTP/2 connection of the attacker: requests go through `send`; `window` sets the initial
/// window of every stream (SETTINGS) while a task drives the connection.
struct H2 {
    send: h2::client::SendRequest<Bytes>,
    window: mpsc::UnboundedSender<u32>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for H2 {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Connects with streams' initial window `window` (0: the server may send no data at all).
async fn connect(addr: SocketAddr, window: u32) -> Result<H2, String> {
    let tcp = tokio::time::timeout(SOON, tokio::net::TcpStream::connect(addr))
        .await
        .map_err(|_| "connecting: timed out".to_string())?
        .map_err(|e| format!("connecting: {e}"))?;
    let (send, mut conn) = tokio::time::timeout(
        SOON,
        h2::client::Builder::new()
            .initial_window_size(window)
            .handshake::<_, Bytes>(tcp),
    )
    .await
    .map_err(|_| "HTTP/2 handshake: timed out".to_string())?
    .map_err(|e| format!("HTTP/2 handshake: {e}"))?;
    let (tx, mut rx) = mpsc::unbounded_channel::<u32>();
    let task = tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = &mut conn => return,
                Some(size) = rx.recv() => {
                    let _ = conn.set_initial_window_size(size);
                }
            }
        }
    });
    Ok(H2 {
        send,
        window: tx,
        task,
    })
}

/// What the hub answered to one call, as far as the response head goes.
enum Head {
    /// A stream is open (HTTP 200, no status yet); its body, unread.
    Open(h2::RecvStream),
    /// Refused at once (a trailers-only answer): the gRPC status code and message.
    Refused(String, String),
}

/// Calls `/flotilla.v1.ClusterService/WatchClusters` with `token` (an empty request: every
/// cluster) and waits for the response head.
async fn watch_clusters(h2: &H2, token: &str) -> Result<Head, String> {
    let request = http::Request::post("http://hub/flotilla.v1.ClusterService/WatchClusters")
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("authorization", format!("Bearer {token}"))
        .body(())
        .map_err(|e| e.to_string())?;
    let mut send = tokio::time::timeout(SOON, h2.send.clone().ready())
        .await
        .map_err(|_| "no stream free on the connection within 30 s".to_string())?
        .map_err(|e| format!("connection: {e}"))?;
    let (response, mut body) = send
        .send_request(request, false)
        .map_err(|e| format!("sending the request: {e}"))?;
    // One gRPC message: not compressed, 0 bytes (an empty WatchClustersRequest). A call the
    // hub refuses at once may be answered and closed before the body is sent: the answer
    // decides.
    let sent = body.send_data(Bytes::from_static(&[0, 0, 0, 0, 0]), true);
    let response = tokio::time::timeout(SOON, response)
        .await
        .map_err(|_| "no response head within 30 s".to_string())?
        .map_err(|e| format!("response: {e} (request body: {sent:?})"))?;
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    match header("grpc-status") {
        Some(code) => Ok(Head::Refused(
            code,
            header("grpc-message")
                .map(|m| percent_decode(&m))
                .unwrap_or_default(),
        )),
        None if response.status() == 200 => Ok(Head::Open(response.into_body())),
        None => Err(format!("HTTP {}", response.status())),
    }
}

/// gRPC's percent-encoding of `grpc-message`.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The resident memory of process `pid`, in KiB (`VmRSS` of /proc/PID/status).
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
}

/// `n` ManagedClusters from `from`, pending, each with [`LABELS`] long labels.
fn clusters_yaml(from: usize, n: usize) -> String {
    let mut yaml = String::new();
    for i in from..from + n {
        yaml.push_str(&format!(
            "---\napiVersion: cluster.open-cluster-management.io/v1\nkind: ManagedCluster\n\
             metadata:\n  name: flood-{i:05}\n  labels:\n"
        ));
        for l in 0..LABELS {
            let value = format!("{i:05}-{l:02}-{}", "v".repeat(54));
            yaml.push_str(&format!(
                "    flood.example.com/label-{l:02}: \"{value}\"\n"
            ));
        }
        yaml.push_str("spec:\n  hubAcceptsClient: false\n");
    }
    yaml
}

/// The sum of `flotilla_hub_limit_refusals_total{limit="LIMIT"}`.
fn refusals(metrics: &str, limit: &str) -> f64 {
    let label = format!("limit=\"{limit}\"");
    samples(metrics, LIMIT_REFUSALS)
        .iter()
        .filter(|(labels, _)| labels.contains(&label))
        .map(|(_, v)| v)
        .sum()
}

on_every_server!(
    unread_watches_from_a_read_only_token_keep_the_hub_memory_bounded_and_past_their_share_are_refused
);

/// 200 `WatchClusters` with a read-only token over 2,000 clusters, windows of zero, never read.
async fn unread_watches_from_a_read_only_token_keep_the_hub_memory_bounded_and_past_their_share_are_refused(
    server: Server,
) {
    let mut fleet = Fleet::secure(server).await;
    let tokens = fleet.dir().join("tokens.csv");
    if let Err(e) = std::fs::write(
        &tokens,
        format!("{ADMIN},admin,admin\n{VIEWER},viewer,read-only\n"),
    ) {
        fleet.fail(&format!("writing {}: {e}", tokens.display()));
    }
    fleet.use_token(ADMIN);
    fleet
        .hub(HubOptions::new().flag("--api-token-file", &tokens.display().to_string()))
        .await;
    for from in (0..CLUSTERS).step_by(500) {
        fleet
            .apply(&clusters_yaml(from, 500.min(CLUSTERS - from)))
            .await;
    }
    let listed = wait_for!(fleet, format!("{CLUSTERS} clusters listed"), SOON, {
        fleet
            .clusters()
            .await
            .map(|c| c.len())
            .filter(|n| *n >= CLUSTERS)
    });
    fleet.check(listed >= CLUSTERS, || format!("{listed} clusters"));
    let Some(pid) = fleet.hub_pid() else {
        fleet.fail("the hub has no process id");
    };
    // What the hub holds with the clusters in memory, before any watch.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = rss_kib(pid).unwrap_or_else(|| fleet.fail("reading the hub's VmRSS"));

    // The flood: every stream's window is zero, nothing is ever read.
    let addr = fleet.grpc_addr();
    let mut conns = Vec::new();
    for _ in 0..CONNECTIONS {
        match connect(addr, 0).await {
            Ok(c) => conns.push(c),
            Err(e) => fleet.fail(&format!("the attacker's connection: {e}")),
        }
    }
    let (mut open, mut refused) = (Vec::new(), Vec::new());
    for i in 0..WATCHES {
        match watch_clusters(&conns[i % CONNECTIONS], VIEWER).await {
            Ok(Head::Open(body)) => open.push((i % CONNECTIONS, body)),
            Ok(Head::Refused(code, message)) => refused.push((code, message)),
            Err(e) => fleet.fail(&format!("watch {i}: {e}")),
        }
    }
    let mut peak = before;
    let until = tokio::time::Instant::now() + HOLD;
    while tokio::time::Instant::now() < until {
        peak = peak.max(rss_kib(pid).unwrap_or_else(|| fleet.fail("reading the hub's VmRSS")));
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let growth_mib = peak.saturating_sub(before) / 1024;
    eprintln!(
        "[{}] hub VmRSS {} MiB before, peak {} MiB with {} watches open and {} refused \
         (growth {growth_mib} MiB)",
        fleet.server.version,
        before / 1024,
        peak / 1024,
        open.len(),
        refused.len()
    );
    fleet.check(growth_mib <= RSS_GROWTH_MAX_MIB, || {
        format!(
            "the hub grew by {growth_mib} MiB (from {} MiB to {} MiB) with {} unread watches \
             open ({} refused) over {CLUSTERS} clusters; the bound is {RSS_GROWTH_MAX_MIB} MiB",
            before / 1024,
            peak / 1024,
            open.len(),
            refused.len()
        )
    });

    // Past the identity's share every watch is refused, saying which limit and which flag.
    fleet.check(!open.is_empty(), || {
        "no watch was let in: a read-only token may watch".into()
    });
    fleet.check(!refused.is_empty(), || {
        format!("all {WATCHES} watches of one identity were let in: no share")
    });
    for (code, message) in &refused {
        fleet.check(
            code == RESOURCE_EXHAUSTED && message.contains("--grpc-watches-per-identity"),
            || format!("a refused watch answered {code} {message:?}"),
        );
    }
    let metrics = fleet.metrics().await;
    let counted = refusals(&metrics, "grpc_watches_per_identity");
    fleet.check(counted >= refused.len() as f64, || {
        format!(
            "{} watches refused, {LIMIT_REFUSALS}{{limit=\"grpc_watches_per_identity\"}} counts \
             {counted}: {}",
            refused.len(),
            metric_samples_text(&metrics, LIMIT_REFUSALS)
        )
    });

    // Another identity has a share of its own: the admin's watch opens and sends at once.
    let admin = match connect(addr, 1 << 20).await {
        Ok(c) => c,
        Err(e) => fleet.fail(&format!("the admin's connection: {e}")),
    };
    match watch_clusters(&admin, ADMIN).await {
        Ok(Head::Open(mut body)) => {
            let first = tokio::time::timeout(SOON, body.data()).await;
            fleet.check(matches!(first, Ok(Some(Ok(_)))), || {
                format!("the admin's watch sent nothing: {first:?}")
            });
        }
        Ok(Head::Refused(code, message)) => fleet.fail(&format!(
            "the admin's watch was refused while the viewer flooded: {code} {message}"
        )),
        Err(e) => fleet.fail(&format!("the admin's watch: {e}")),
    }
    drop(admin);

    // The watchers that read nothing are dropped after the deadline, each counted.
    let dropped = wait_for!(
        fleet,
        format!("{} slow watchers dropped", open.len()),
        SLOW_WATCHER + SOON,
        {
            let n = refusals(&fleet.metrics().await, "grpc_slow_watcher");
            (n >= open.len() as f64).then_some(n)
        }
    );
    fleet.check(dropped >= open.len() as f64, || {
        format!("{dropped} dropped")
    });
    // A dropped watcher that reads at last is told why: its stream ends with the status. Every
    // connection's windows open (SETTINGS); the first stream to end says what it ended with.
    for c in &conns {
        let _ = c.window.send(1 << 20);
    }
    let mut reads = tokio::task::JoinSet::new();
    for (_, mut body) in open.drain(..) {
        reads.spawn(async move {
            while let Some(frame) = body.data().await {
                match frame {
                    Ok(data) => {
                        let _ = body.flow_control().release_capacity(data.len());
                    }
                    Err(e) => return Err(format!("stream: {e}")),
                }
            }
            body.trailers()
                .await
                .map_err(|e| format!("trailers: {e}"))
                .map(|t| t.unwrap_or_default())
        });
    }
    let trailers = match tokio::time::timeout(SOON, reads.join_next()).await {
        Ok(Some(Ok(Ok(t)))) => t,
        Ok(Some(Ok(Err(e)))) => fleet.fail(&format!("a dropped watch: {e}")),
        Ok(Some(Err(e))) => fleet.fail(&format!("reading a dropped watch: {e}")),
        Ok(None) => fleet.fail("no watch was open"),
        Err(_) => fleet.fail("no dropped watch ended within 30 s of being read"),
    };
    reads.abort_all();
    let status = |name: &str| {
        trailers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(percent_decode)
            .unwrap_or_default()
    };
    fleet.check(
        status("grpc-status") == RESOURCE_EXHAUSTED
            && status("grpc-message").contains("--grpc-slow-watcher-seconds"),
        || {
            format!(
                "the dropped watch ended with {:?} {:?}",
                status("grpc-status"),
                status("grpc-message")
            )
        },
    );
    // The hub still answers.
    fleet.check(fleet.clusters().await.is_some(), || {
        "`get clusters` fails after the flood".into()
    });
}

/// The connection limit the hub is started with in the connection flood.
const MAX_CONNECTIONS: usize = 8;
/// Connections in the connection flood.
const CONNECTION_FLOOD: usize = 24;

on_every_server!(connections_past_the_limit_are_closed_counted_and_given_back);

/// 24 HTTP/2 connections held open against `--grpc-max-connections 8`.
async fn connections_past_the_limit_are_closed_counted_and_given_back(server: Server) {
    let mut fleet = Fleet::secure(server).await;
    let tokens = fleet.dir().join("tokens.csv");
    if let Err(e) = std::fs::write(&tokens, format!("{ADMIN},admin,admin\n")) {
        fleet.fail(&format!("writing {}: {e}", tokens.display()));
    }
    fleet.use_token(ADMIN);
    fleet
        .hub(
            HubOptions::new()
                .flag("--api-token-file", &tokens.display().to_string())
                .flag("--grpc-max-connections", &MAX_CONNECTIONS.to_string()),
        )
        .await;
    let addr = fleet.grpc_addr();
    // A connection the hub closed at once fails its handshake or answers nothing; one it kept
    // serves a watch.
    let (mut conns, mut served, mut closed) = (Vec::new(), Vec::new(), 0);
    for _ in 0..CONNECTION_FLOOD {
        match connect(addr, 1 << 16).await {
            Ok(c) => conns.push(c),
            Err(_) => closed += 1,
        }
    }
    for c in &conns {
        match tokio::time::timeout(SOON, watch_clusters(c, ADMIN)).await {
            Ok(Ok(Head::Open(body))) => served.push(body),
            Ok(Ok(Head::Refused(code, message))) => {
                fleet.fail(&format!("a watch was refused: {code} {message}"))
            }
            Ok(Err(_)) => closed += 1,
            Err(_) => fleet.fail("a call on a flooding connection hung for 30 s"),
        }
    }
    fleet.check(
        (1..=MAX_CONNECTIONS).contains(&served.len())
            && closed >= CONNECTION_FLOOD - MAX_CONNECTIONS,
        || {
            format!(
                "{} of {CONNECTION_FLOOD} connections served with --grpc-max-connections \
             {MAX_CONNECTIONS} ({closed} closed)",
                served.len()
            )
        },
    );
    let metrics = fleet.metrics().await;
    let counted = refusals(&metrics, "grpc_connections");
    fleet.check(counted >= closed as f64, || {
        format!(
            "{closed} connections closed, {LIMIT_REFUSALS}{{limit=\"grpc_connections\"}} \
             counts {counted}: {}",
            metric_samples_text(&metrics, LIMIT_REFUSALS)
        )
    });
    // Closed connections give their places back: as many new ones are served.
    drop(served);
    drop(conns);
    let again = wait_for!(
        fleet,
        format!("{MAX_CONNECTIONS} new connections served after the flood"),
        SOON,
        {
            let mut conns = Vec::new();
            let mut served = 0;
            for _ in 0..MAX_CONNECTIONS {
                if let Ok(c) = connect(addr, 1 << 16).await {
                    if let Ok(Ok(Head::Open(_))) =
                        tokio::time::timeout(SOON, watch_clusters(&c, ADMIN)).await
                    {
                        served += 1;
                    }
                    conns.push(c);
                }
            }
            (served == MAX_CONNECTIONS).then_some(served)
        }
    );
    fleet.check(again == MAX_CONNECTIONS, || format!("{again} served"));
}
