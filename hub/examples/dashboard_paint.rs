//! Measures the dashboard at fleet scale: a hub on a testkit nats-server whose cluster
//! inventory holds N synthetic clusters (default 10,000), then
//! - server side: the time to answer `/clusters` (a page of 50), a filtered and sorted
//!   `/clusters`, `/` and one cluster's page over HTTP (median of 20 requests each);
//! - in Chromium (Debian's, over WebDriver): first contentful paint of `/clusters`.
//!
//! ```sh
//! cargo run --release -p flotilla-hub --example dashboard_paint -- 10000
//! ```
//!
//! Prints one JSON line. Needs nats-server, chromium and chromium-driver.

#[path = "../tests/common/browser.rs"]
#[allow(dead_code)]
mod browser;

use flotilla_api::meta::{CLUSTERSET_LABEL, COND_AVAILABLE};
use flotilla_api::v1::{
    ClusterClaim, Condition, ManagedCluster, ManagedClusterSpec, ManagedClusterStatus,
    ManagedClusterVersion, ObjectMeta,
};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn cluster(i: usize) -> ManagedCluster {
    let name = format!("edge-{i:06}");
    ManagedCluster {
        metadata: Some(ObjectMeta {
            name: name.clone(),
            labels: [
                (CLUSTERSET_LABEL.to_string(), format!("site-{}", i % 20)),
                (
                    "env".to_string(),
                    if i.is_multiple_of(3) { "prod" } else { "dev" }.to_string(),
                ),
                ("region".to_string(), format!("r{}", i % 7)),
            ]
            .into(),
            ..Default::default()
        }),
        spec: Some(ManagedClusterSpec {
            hub_accepts_client: !i.is_multiple_of(500),
            lease_duration_seconds: 60,
            taints: Vec::new(),
        }),
        status: Some(ManagedClusterStatus {
            conditions: vec![Condition {
                r#type: COND_AVAILABLE.into(),
                status: if i.is_multiple_of(50) {
                    "Unknown"
                } else {
                    "True"
                }
                .into(),
                ..Default::default()
            }],
            capacity: [
                ("cpu".to_string(), "8".to_string()),
                ("memory".to_string(), "32Gi".to_string()),
            ]
            .into(),
            version: Some(ManagedClusterVersion {
                kubernetes: format!("v1.{}.2", 28 + i % 4),
                agent: "0.1.0".into(),
            }),
            cluster_claims: vec![ClusterClaim {
                name: "id.k8s.io".into(),
                value: name,
            }],
            ..Default::default()
        }),
        hub: None,
    }
}

/// The time to read a whole answer to `GET path`, and its size.
async fn get(addr: std::net::SocketAddr, path: &str) -> (Duration, usize) {
    let start = Instant::now();
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut raw = Vec::new();
    tcp.read_to_end(&mut raw).await.unwrap();
    assert!(
        raw.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&raw[..80.min(raw.len())])
    );
    (start.elapsed(), raw.len())
}

/// The median of 20 answers to `GET path` in ms, and the answer's size.
async fn median(addr: std::net::SocketAddr, path: &str) -> (f64, usize) {
    let mut times = Vec::new();
    let mut bytes = 0;
    for _ in 0..20 {
        let (t, b) = get(addr, path).await;
        times.push(t.as_secs_f64() * 1000.0);
        bytes = b;
    }
    times.sort_by(f64::total_cmp);
    (times[times.len() / 2], bytes)
}

/// This process's CPU time (user + system) from /proc/self/stat.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // Fields after the command name (which may hold spaces) start at its closing parenthesis.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

/// CPU (share of one core) of this process while `rate` clusters a second flip between
/// Available and Unknown for `secs` (of the `n` clusters), with `streams` open live streams following every cluster.
async fn churn_cpu(
    hub: &flotilla_hub::Hub,
    n: usize,
    streams: usize,
    rate: usize,
    secs: u64,
) -> (f64, u64) {
    let addr = hub.dashboard_addr.unwrap();
    let received = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut readers = Vec::new();
    for _ in 0..streams {
        let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        tcp.write_all(format!("GET /events HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let received = received.clone();
        readers.push(tokio::spawn(async move {
            let mut buf = vec![0u8; 16384];
            while let Ok(n) = tcp.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                received.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = cpu_seconds();
    let start = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    let mut i = 0usize;
    let per_tick = (rate / 100).max(1);
    while start.elapsed() < Duration::from_secs(secs) {
        tick.tick().await;
        for _ in 0..per_tick {
            let name = cluster(i % n).metadata.unwrap().name;
            let mut c = (*hub.inventory.get(&name).unwrap()).clone();
            let status = &mut c.status.as_mut().unwrap().conditions[0].status;
            *status = if status == "True" { "Unknown" } else { "True" }.into();
            hub.inventory.upsert(&name, c);
            i += 1;
        }
    }
    let cpu = (cpu_seconds() - before) / start.elapsed().as_secs_f64();
    for r in readers {
        r.abort();
    }
    (cpu, received.load(std::sync::atomic::Ordering::Relaxed))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .map_or(10_000, |a| a.parse().expect("N clusters"));
    let nats = flotilla_testkit::NatsServer::start();
    let mut config = flotilla_hub::Config::new(&nats.url());
    config.grpc_listen = "127.0.0.1:0".parse().unwrap();
    config.metrics_listen = "127.0.0.1:0".parse().unwrap();
    config.limits.stream.max_bytes = flotilla_testkit::STATUS_STREAM_MAX_BYTES;
    config.dashboard.listen = Some("127.0.0.1:0".parse().unwrap());
    let hub = flotilla_hub::start(config).await.expect("hub started");
    // The inventory as the cluster actors would fill it (no agents: only the views matter).
    for i in 0..n {
        let c = cluster(i);
        let name = c.metadata.as_ref().unwrap().name.clone();
        hub.inventory.upsert(&name, c);
    }
    let addr = hub.dashboard_addr.unwrap();
    let (clusters_ms, clusters_bytes) = median(addr, "/clusters").await;
    let (filtered_ms, _) = median(
        addr,
        "/clusters?selector=env%3Dprod%2Cregion+in+%28r1%2Cr2%29&q=edge-00&sort=availability&order=desc&page=3",
    )
    .await;
    let (overview_ms, overview_bytes) = median(addr, "/").await;
    let (cluster_ms, _) = median(addr, "/clusters/edge-005000").await;

    // Ten open dashboards: the process's CPU with and without them under the same churn.
    let (cpu_without, _) = churn_cpu(&hub, n, 0, 100, 10).await;
    let (cpu_with, streamed) = churn_cpu(&hub, n, 10, 100, 10).await;

    let b = browser::Browser::start().await;
    let base = format!("http://{addr}");
    let mut paints = Vec::new();
    for i in 0..5 {
        b.goto(&format!("{base}/clusters?page={}", i + 1)).await;
        b.wait_until(
            "return performance.getEntriesByName('first-contentful-paint').length > 0",
            "the first contentful paint",
            Duration::from_secs(10),
        )
        .await;
        let fcp = b
            .js(
                "const p = performance.getEntriesByName('first-contentful-paint')[0]; \
                 return p ? p.startTime : -1",
            )
            .await
            .as_f64()
            .unwrap_or(-1.0);
        paints.push(fcp);
    }
    paints.sort_by(f64::total_cmp);
    b.stop().await;
    println!(
        "{}",
        serde_json::json!({
            "clusters": n,
            "build": if cfg!(debug_assertions) { "debug" } else { "release" },
            "server_clusters_page_ms_p50": clusters_ms,
            "clusters_page_bytes": clusters_bytes,
            "server_clusters_filtered_sorted_ms_p50": filtered_ms,
            "server_overview_ms_p50": overview_ms,
            "overview_bytes": overview_bytes,
            "server_cluster_page_ms_p50": cluster_ms,
            "chromium_first_contentful_paint_clusters_ms_p50": paints[paints.len() / 2],
            "chromium_first_contentful_paint_clusters_ms": paints,
            "churn_transitions_per_s": 100,
            "process_cpu_churn_no_streams": cpu_without,
            "process_cpu_churn_10_streams": cpu_with,
            "ten_streams_cpu_share_of_a_core": cpu_with - cpu_without,
            "bytes_streamed_10s": streamed,
        })
    );
    hub.stop().await;
}
