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
                    if i % 3 == 0 { "prod" } else { "dev" }.to_string(),
                ),
                ("region".to_string(), format!("r{}", i % 7)),
            ]
            .into(),
            ..Default::default()
        }),
        spec: Some(ManagedClusterSpec {
            hub_accepts_client: i % 500 != 0,
            lease_duration_seconds: 60,
            taints: Vec::new(),
        }),
        status: Some(ManagedClusterStatus {
            conditions: vec![Condition {
                r#type: COND_AVAILABLE.into(),
                status: if i % 50 == 0 { "Unknown" } else { "True" }.into(),
                ..Default::default()
            }],
            capacity: [
                ("cpu".to_string(), "8".to_string()),
                ("memory".to_string(), "32Gi".to_string()),
            ]
            .into(),
            version: Some(ManagedClusterVersion {
                kubernetes: format!("v1.{}.2", 28 + i % 4),
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
        })
    );
    hub.stop().await;
}
