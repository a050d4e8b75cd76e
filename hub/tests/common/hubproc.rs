//! `flotilla-hub` processes over a NATS cluster (the several-hubs and election tests): started
//! with `--replicas 3` and `--auto-accept`, each with its own gRPC and metrics port and log.

use flotilla_api::v1::WatchClustersRequest;
use flotilla_api::v1::cluster_service_client::ClusterServiceClient;
use flotilla_api::v1::work_service_client::WorkServiceClient;
use flotilla_testkit::{Proc, binary, free_port};
use futures::StreamExt;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::transport::Channel;

/// Long enough for a takeover after a kill or a pause, or a start during an election.
pub const PATIENCE: Duration = Duration::from_secs(90);
/// Shard lease TTL of the hubs [`HubProc::start_short_leases`] starts (renewed every second).
pub const SHORT_LEASE_TTL: Duration = Duration::from_secs(6);

/// A `flotilla-hub` process.
pub struct HubProc {
    pub id: String,
    pub proc: Proc,
    pub grpc: String,
    pub metrics: u16,
}

impl HubProc {
    /// Starts hub `id` on the NATS `urls`, logging under `dir`, with `extra` flags.
    pub fn start(urls: &str, dir: &Path, id: &str, extra: &[&str]) -> Self {
        let (grpc, metrics) = (free_port(), free_port());
        let mut cmd = Command::new(binary("flotilla-hub"));
        cmd.args(["--nats-url", urls, "--replicas", "3", "--hub-id", id])
            .args(["--grpc-listen", &format!("127.0.0.1:{grpc}")])
            .args(["--metrics-listen", &format!("127.0.0.1:{metrics}")])
            .args([
                "--status-stream-max-bytes",
                &flotilla_testkit::STATUS_STREAM_MAX_BYTES.to_string(),
            ])
            // Grace 10 s: far shorter than the default, far longer than a takeover.
            .args(["--default-lease-duration-seconds", "2"])
            .args(["--lease-grace-multiplier", "5"])
            .arg("--auto-accept")
            .args(extra)
            .env("RUST_LOG", "info,flotilla_hub::ha=debug");
        Self {
            id: id.to_string(),
            proc: Proc::spawn("flotilla-hub", cmd, dir.join(format!("hub-{id}.log"))),
            grpc: format!("http://127.0.0.1:{grpc}"),
            metrics,
        }
    }

    /// Starts hub `id` as [`HubProc::start`] does, with a [`SHORT_LEASE_TTL`] shard lease
    /// renewed every second: a lost hub's shards are taken over within seconds.
    pub fn start_short_leases(urls: &str, dir: &Path, id: &str) -> Self {
        let ttl = SHORT_LEASE_TTL.as_secs().to_string();
        let leases = [
            "--shard-lease-ttl-seconds",
            &ttl,
            "--shard-lease-renew-seconds",
            "1",
        ];
        Self::start(urls, dir, id, &leases)
    }

    /// The metrics address (`127.0.0.1:port`).
    pub fn metrics_addr(&self) -> String {
        format!("127.0.0.1:{}", self.metrics)
    }

    pub async fn channel(&self) -> Option<Channel> {
        Channel::from_shared(self.grpc.clone())
            .ok()?
            .connect_timeout(Duration::from_secs(2))
            .timeout(Duration::from_secs(30))
            .connect()
            .await
            .ok()
    }

    pub async fn works(&self) -> WorkServiceClient<Channel> {
        let ch =
            flotilla_testkit::eventually(PATIENCE, &format!("hub {} serving", self.id), || {
                self.channel()
            })
            .await;
        WorkServiceClient::new(ch)
    }

    pub async fn clusters(&self) -> ClusterServiceClient<Channel> {
        let ch =
            flotilla_testkit::eventually(PATIENCE, &format!("hub {} serving", self.id), || {
                self.channel()
            })
            .await;
        ClusterServiceClient::new(ch)
    }

    /// `/debug/shards` of the hub.
    pub async fn shards(&self) -> Option<Value> {
        let (status, body) = flotilla_testkit::http_get(&self.metrics_addr(), "/debug/shards")
            .await
            .ok()?;
        (status == 200).then(|| serde_json::from_str(&body).ok())?
    }

    /// The units the hub holds.
    pub async fn held(&self) -> Option<Vec<u64>> {
        let v = self.shards().await?;
        Some(
            v["held"]
                .as_array()?
                .iter()
                .filter_map(Value::as_u64)
                .collect(),
        )
    }

    /// Sends `sig` (`-STOP`, `-CONT`, …) to the process.
    pub fn signal(&self, sig: &str) {
        let pid = self.proc.pid().expect("running").to_string();
        let ok = Command::new("kill")
            .args([sig, &pid])
            .status()
            .expect("kill runs")
            .success();
        assert!(ok, "kill {sig} {pid}");
    }
}

impl Drop for HubProc {
    fn drop(&mut self) {
        // A failing test shows what each hub did.
        if std::thread::panicking() {
            let out = self.proc.output();
            let tail: Vec<&str> = out.lines().rev().take(60).collect();
            eprintln!(
                "---- hub {} (last lines) ----\n{}",
                self.id,
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
    }
}

/// Follows `api`'s cluster watch and records every event that shows a cluster not
/// Available=True after it first was (or that the watch could not start).
pub fn watch_for_unavailable(mut api: ClusterServiceClient<Channel>) -> Arc<Mutex<Vec<String>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let out = seen.clone();
    tokio::spawn(async move {
        let mut up = BTreeSet::new();
        let Ok(stream) = api.watch_clusters(WatchClustersRequest::default()).await else {
            out.lock().unwrap().push("the watch could not start".into());
            return;
        };
        let mut stream = stream.into_inner();
        while let Some(Ok(ev)) = stream.next().await {
            let Some(c) = ev.cluster else { continue };
            let name = c
                .metadata
                .as_ref()
                .map(|m| m.name.clone())
                .unwrap_or_default();
            match super::available(&c).as_deref() {
                Some("True") => {
                    up.insert(name);
                }
                other if up.contains(&name) => out
                    .lock()
                    .unwrap()
                    .push(format!("{name} turned Available={other:?}")),
                _ => {}
            }
        }
    });
    seen
}
