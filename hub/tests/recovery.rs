//! The recovery window (issue 49), with real processes: a nats-server, `flotilla-hub` processes,
//! simulated agents and the `flotilla` CLI. A backup is taken; after it a work is applied on two
//! clusters and another updated; the backup is restored into a fresh server on the same
//! address: the hub started on it tells no spoke to delete the work it lacks nor sends the
//! older spec; the agents report them as orphans, listed by `flotilla get orphans`, in the
//! metrics and on the dashboard; the updated work is reverted to the store's spec, the new one
//! deleted on one spoke and kept on the other (also after the window is closed), each only
//! when the operator says so; a work deleted and created again after the backup keeps the
//! spoke's newer incarnation, also at the generation the store holds (told apart by its uid);
//! a cluster offline through the window loses nothing after it;
//! deleting a cluster deletes its orphans' records. The same in secure mode, with `restore
//! --revocations`: `recovery/secure.rs`.

mod common;
#[path = "recovery/secure.rs"]
mod secure;

use common::work::*;
use flotilla_api::v1::cluster_service_client::ClusterServiceClient;
use flotilla_api::v1::recovery_service_client::RecoveryServiceClient;
use flotilla_api::v1::work_service_client::WorkServiceClient;
use flotilla_api::v1::{
    DeleteClusterRequest, DeleteWorkRequest, GetRecoveryRequest, ListClustersRequest,
    ListOrphansRequest, Orphan, OrphanDecision, OrphanKind, ProxyGetRequest,
};
use flotilla_testkit::{NatsServer, Proc, binary, free_port, nats_server_binary};
use std::path::Path;
use std::time::Duration;
use tonic::transport::Channel;

const HUB: &str = env!("CARGO_BIN_EXE_flotilla-hub");
const SOON: Duration = Duration::from_secs(60);
/// Each agent's periodic resync: two of them pass in a few seconds.
const RESYNC: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_older_than_the_spokes_deletes_and_overwrites_nothing_on_them_until_the_operator_decides()
 {
    let tmp = tempfile::tempdir().unwrap();
    let scene = Scene::restored(tmp.path()).await;
    scene.orphans_are_recorded_named_and_withheld().await;
    scene
        .the_window_shows_in_metrics_and_on_the_dashboard()
        .await;
    scene.the_operator_decides().await;
    scene
        .a_cluster_offline_through_the_window_deletes_nothing_after_it()
        .await;
    scene.deleting_a_cluster_forgets_its_orphans().await;
    scene.fleet.stop().await;
}

/// After the restore: the hub on the restored server, the agents that outlived the old one.
struct Scene {
    hub: HubProcess,
    fleet: flotilla_sim::Fleet,
    recovery: RecoveryServiceClient<Channel>,
    works: WorkServiceClient<Channel>,
    clusters: ClusterServiceClient<Channel>,
    _target: NatsServer,
}

impl Scene {
    /// A backup with work "before" on sim-0001; after it, work "after" on every cluster and
    /// "before" updated (generation 2); sim-0003's link down from then on; the store lost; the
    /// backup restored into a fresh server on the same address; a hub on it.
    async fn restored(tmp: &Path) -> Self {
        let port = free_port();
        let mut source = server(&tmp.join("source"), port);
        let hub = HubProcess::start(&source.url(), tmp, "source");
        let channel = hub.channel().await;
        let mut clusters = ClusterServiceClient::new(channel.clone());
        let mut works = WorkServiceClient::new(channel.clone());
        let mut fleet_cfg = flotilla_sim::FleetConfig::new(&source.url(), 3);
        fleet_cfg.resync_interval = RESYNC;
        fleet_cfg.pending_poll = Duration::from_millis(200);
        fleet_cfg.ready_delay = Duration::from_millis(100);
        fleet_cfg.scores = None;
        fleet_cfg.simulate_addons = false;
        fleet_cfg.state_dir = Some(tmp.join("agents"));
        let fleet = flotilla_sim::Fleet::start(&fleet_cfg).await.unwrap();
        for c in ["sim-0001", "sim-0002", "sim-0003"] {
            common::wait_available(&mut clusters, c).await;
        }
        works
            .apply_work(config_map_work("sim-0001", "before"))
            .await
            .unwrap();
        wait_work(&mut works, "sim-0001", "before", "applied", |w| {
            converged_at(w, 1)
        })
        .await;
        // "reborn" on sim-0002 at generation 2 in the backup; deleted and created again after
        // it, so the spoke holds a newer incarnation at generation 1.
        for value in ["old", "old2"] {
            works
                .apply_work(config_map_work_with("sim-0002", "reborn", value))
                .await
                .unwrap();
        }
        wait_work(&mut works, "sim-0002", "reborn", "updated", |w| {
            converged_at(w, 2)
        })
        .await;
        // "twin" on sim-0002 at generation 1 in the backup; deleted and created again after it,
        // so the spoke holds another incarnation at the same generation (only uids differ).
        works
            .apply_work(config_map_work_with("sim-0002", "twin", "old"))
            .await
            .unwrap();
        wait_work(&mut works, "sim-0002", "twin", "applied", |w| {
            converged_at(w, 1)
        })
        .await;

        let out = tmp.join("backup");
        let taken =
            flotilla_hub(&["--nats-url", &source.url(), "backup", "--out", path(&out)]).await;
        assert!(taken.ok, "{}", taken.stderr);
        // After the backup: the restored store will lack "after" and hold "before" older.
        for c in ["sim-0001", "sim-0002", "sim-0003"] {
            works.apply_work(config_map_work(c, "after")).await.unwrap();
            wait_work(&mut works, c, "after", "applied", |w| converged_at(w, 1)).await;
        }
        works
            .apply_work(config_map_work_with("sim-0001", "before", "newer"))
            .await
            .unwrap();
        wait_work(&mut works, "sim-0001", "before", "updated", |w| {
            converged_at(w, 2)
        })
        .await;
        works
            .delete_work(DeleteWorkRequest {
                cluster: "sim-0002".into(),
                name: "reborn".into(),
            })
            .await
            .unwrap();
        wait_gone(&mut works, "sim-0002", "reborn").await;
        works
            .apply_work(config_map_work_with("sim-0002", "reborn", "new"))
            .await
            .unwrap();
        wait_work(&mut works, "sim-0002", "reborn", "created again", |w| {
            converged_at(w, 1)
        })
        .await;
        works
            .delete_work(DeleteWorkRequest {
                cluster: "sim-0002".into(),
                name: "twin".into(),
            })
            .await
            .unwrap();
        wait_gone(&mut works, "sim-0002", "twin").await;
        works
            .apply_work(config_map_work_with("sim-0002", "twin", "new"))
            .await
            .unwrap();
        wait_work(&mut works, "sim-0002", "twin", "created again", |w| {
            converged_at(w, 1)
        })
        .await;
        // sim-0003 is offline through the whole window, and comes back after it.
        fleet.link_down(2).await;

        drop(hub);
        source.stop();
        let target = server(&tmp.join("target"), port);
        let restored =
            flotilla_hub(&["--nats-url", &target.url(), "restore", "--from", path(&out)]).await;
        assert!(restored.ok, "{}", restored.stderr);
        assert!(
            restored.stdout.contains("Hubs start in a recovery window"),
            "{}",
            restored.stdout
        );
        let hub = HubProcess::start(&target.url(), tmp, "restored");
        let channel = hub.channel().await;
        let mut recovery = RecoveryServiceClient::new(channel.clone());
        let status = recovery
            .get_recovery(GetRecoveryRequest {})
            .await
            .unwrap()
            .into_inner();
        let window = status.window.expect("the restore opened the window");
        assert_eq!(window.started_by, "restore");
        assert!(window.backup_taken_at.is_some());
        Self {
            hub,
            fleet,
            recovery,
            works: WorkServiceClient::new(channel.clone()),
            clusters: ClusterServiceClient::new(channel),
            _target: target,
        }
    }

    /// "after" is an orphan on both clusters, named without the agents reconnecting (the
    /// hub asks them to publish its status again); "before" is ahead on sim-0001; "reborn" and
    /// "twin" are other incarnations on sim-0002 (the agents report uids), at an older and at
    /// the same generation as the store's. Three resync periods later the
    /// spokes hold them all as they were.
    async fn orphans_are_recorded_named_and_withheld(&self) {
        let last = std::sync::Mutex::new(Vec::new());
        let waited = tokio::time::timeout(
            SOON,
            flotilla_testkit::eventually(2 * SOON, "five orphans recorded and named", || {
                let mut recovery = self.recovery.clone();
                let last = &last;
                async move {
                    let items = list(&mut recovery).await;
                    let done = items.len() == 5 && items.iter().all(|o| !o.name.is_empty());
                    *last.lock().unwrap() = items.clone();
                    done.then_some(items)
                }
            }),
        )
        .await;
        let Ok(orphans) = waited else {
            panic!(
                "after {SOON:?} the orphans recorded are not five, each named: {:#?}",
                last.lock().unwrap()
            );
        };
        let seen: Vec<_> = orphans
            .iter()
            .map(|o| {
                let g = (o.agent_generation, o.store_generation);
                (
                    o.cluster.as_str(),
                    o.name.as_str(),
                    o.kind(),
                    g,
                    o.decision(),
                )
            })
            .collect();
        let undecided = OrphanDecision::Undecided;
        assert_eq!(
            seen,
            [
                ("sim-0001", "after", OrphanKind::Work, (1, 0), undecided),
                ("sim-0001", "before", OrphanKind::Ahead, (2, 1), undecided),
                ("sim-0002", "after", OrphanKind::Work, (1, 0), undecided),
                (
                    "sim-0002",
                    "reborn",
                    OrphanKind::Incarnation,
                    (1, 2),
                    undecided
                ),
                (
                    "sim-0002",
                    "twin",
                    OrphanKind::Incarnation,
                    (1, 1),
                    undecided
                ),
            ]
        );
        tokio::time::sleep(RESYNC * 3).await;
        let mut works = self.works.clone();
        for c in ["sim-0001", "sim-0002"] {
            assert_eq!(value(&mut works, c, "after").await.as_deref(), Some("v"));
        }
        assert_eq!(
            value(&mut works, "sim-0001", "before").await.as_deref(),
            Some("newer"),
            "the store's older spec must not reach the spoke while undecided"
        );
        assert_eq!(
            value(&mut works, "sim-0002", "reborn").await.as_deref(),
            Some("new"),
            "nor the restored incarnation over the one created after the backup"
        );
        assert_eq!(
            value(&mut works, "sim-0002", "twin").await.as_deref(),
            Some("new"),
            "nor at the same generation"
        );
    }

    /// `flotilla_hub_recovery_open` and `flotilla_hub_orphans`; the dashboard's banner.
    async fn the_window_shows_in_metrics_and_on_the_dashboard(&self) {
        let metrics = http_get(&self.hub.metrics, "/metrics").await;
        for line in [
            "flotilla_hub_recovery_open 1",
            "flotilla_hub_orphans{kind=\"work\",decision=\"undecided\"} 2",
            "flotilla_hub_orphans{kind=\"ahead\",decision=\"undecided\"} 1",
            "flotilla_hub_orphans{kind=\"behind\",decision=\"undecided\"} 0",
            "flotilla_hub_orphans{kind=\"incarnation\",decision=\"undecided\"} 2",
            "flotilla_hub_orphans{kind=\"work\",decision=\"keep\"} 0",
        ] {
            assert!(
                metrics.lines().any(|l| l == line),
                "no {line:?} in\n{metrics}"
            );
        }
        let page = http_get(&self.hub.dashboard, "/clusters").await;
        assert!(page.starts_with("HTTP/1.1 200"), "{page}");
        assert!(
            page.contains(
                r#"<div class="banner" id="banner" role="alert">Recovery window open since"#
            ) && page.contains("5 orphan(s) undecided, 0 decided, on 2 cluster(s)"),
            "{page}"
        );
    }

    /// Refusals; "before" reverted to the store's spec above the spoke's generation; "after"
    /// deleted on sim-0001 and kept on sim-0002, also after the window closes.
    async fn the_operator_decides(&self) {
        let g = self.hub.grpc.as_str();
        let listed = flotilla(g, &["get", "orphans"]).await;
        assert!(listed.ok, "{}", listed.stderr);
        let rows: Vec<&str> = listed.stdout.lines().collect();
        assert!(
            rows[0].starts_with("CLUSTER")
                && rows[0].contains("KIND")
                && rows[0].contains("STORE GEN"),
            "{}",
            listed.stdout
        );
        assert!(
            rows[2].starts_with("sim-0001")
                && rows[2].contains("before")
                && rows[2].contains("Ahead"),
            "{}",
            listed.stdout
        );
        let early = flotilla(g, &["recovery", "finish"]).await;
        assert!(
            !early.ok && early.stderr.contains("5 orphan(s) are undecided"),
            "finish must be refused while orphans are undecided: {}",
            early.stderr
        );
        let unknown = flotilla(g, &["recovery", "delete", "sim-0001", "nope"]).await;
        assert!(
            !unknown.ok
                && unknown
                    .stderr
                    .contains("cluster sim-0001 has no orphan named nope"),
            "{}",
            unknown.stderr
        );
        let unfit = flotilla(g, &["recovery", "delete", "sim-0001", "before"]).await;
        assert!(
            !unfit.ok
                && unfit
                    .stderr
                    .contains("orphan sim-0001/before: the store has this work"),
            "{}",
            unfit.stderr
        );

        let reverted = flotilla(g, &["recovery", "revert", "sim-0001", "before"]).await;
        assert!(reverted.ok, "{}", reverted.stderr);
        let mut works = self.works.clone();
        wait_work(&mut works, "sim-0001", "before", "reverted", |w| {
            converged_at(w, 3)
        })
        .await;
        assert_eq!(
            value(&mut works, "sim-0001", "before").await.as_deref(),
            Some("v")
        );

        let deleted = flotilla(g, &["recovery", "delete", "sim-0001", "after"]).await;
        assert!(deleted.ok, "{}", deleted.stderr);
        assert!(
            deleted
                .stdout
                .contains("orphan sim-0001/after: deleted by its spoke"),
            "{}",
            deleted.stdout
        );
        let kept = flotilla(g, &["recovery", "keep", "sim-0002", "--all"]).await;
        assert!(kept.ok, "{}", kept.stderr);
        flotilla_testkit::eventually(SOON, "sim-0001 deletes the orphan", || {
            let mut works = works.clone();
            async move {
                value(&mut works, "sim-0001", "after")
                    .await
                    .is_none()
                    .then_some(())
            }
        })
        .await;
        // Once gone or reverted, their records are settled; the kept ones stay.
        flotilla_testkit::eventually(SOON, "sim-0001's orphans settled", || {
            let mut recovery = self.recovery.clone();
            async move { (list(&mut recovery).await.len() == 3).then_some(()) }
        })
        .await;
        let finished = flotilla(g, &["recovery", "finish"]).await;
        assert!(finished.ok, "{}", finished.stderr);
        assert!(
            finished.stdout.contains("Recovery window closed")
                && finished.stdout.contains("No recovery window is open"),
            "{}",
            finished.stdout
        );
        tokio::time::sleep(RESYNC * 3).await;
        assert_eq!(
            value(&mut works, "sim-0002", "after").await.as_deref(),
            Some("v")
        );
        assert_eq!(
            value(&mut works, "sim-0001", "before").await.as_deref(),
            Some("v")
        );
        assert_eq!(
            value(&mut works, "sim-0002", "reborn").await.as_deref(),
            Some("new"),
            "kept: the spoke's incarnation stays after the window"
        );
        assert_eq!(
            value(&mut works, "sim-0002", "twin").await.as_deref(),
            Some("new"),
            "kept: the spoke's incarnation at the store's generation stays after the window"
        );
        let after = list(&mut self.recovery.clone()).await;
        assert_eq!(after.len(), 3, "{after:?}");
        assert!(after.iter().all(|o| o.decision() == OrphanDecision::Keep));
        let metrics = http_get(&self.hub.metrics, "/metrics").await;
        assert!(
            metrics.lines().any(|l| l == "flotilla_hub_recovery_open 0"),
            "{metrics}"
        );
        let page = http_get(&self.hub.dashboard, "/").await;
        assert!(!page.contains("class=\"banner\""), "{page}");
    }

    /// sim-0003, offline through the window, comes back after `finish`: its "after" is
    /// recorded as an undecided orphan, never deleted unseen; `recovery status` counted it as
    /// not resynced until then.
    async fn a_cluster_offline_through_the_window_deletes_nothing_after_it(&self) {
        let g = self.hub.grpc.as_str();
        let status = flotilla(g, &["recovery", "status"]).await;
        assert!(
            status.ok
                && status
                    .stdout
                    .contains("1 accepted cluster(s) have not resynced since the window opened"),
            "{} {}",
            status.stdout,
            status.stderr
        );
        self.fleet.link_up(2).await;
        let orphan = flotilla_testkit::eventually(SOON, "sim-0003's work recorded", || {
            let mut recovery = self.recovery.clone();
            async move {
                list(&mut recovery)
                    .await
                    .into_iter()
                    .find(|o| o.cluster == "sim-0003")
            }
        })
        .await;
        assert_eq!(
            (orphan.kind(), orphan.decision(), orphan.agent_generation),
            (OrphanKind::Work, OrphanDecision::Undecided, 1)
        );
        tokio::time::sleep(RESYNC * 3).await;
        let mut works = self.works.clone();
        assert_eq!(
            value(&mut works, "sim-0003", "after").await.as_deref(),
            Some("v"),
            "a cluster nobody saw in the window must not lose its works after it"
        );
        let counted = self
            .recovery
            .clone()
            .get_recovery(GetRecoveryRequest {})
            .await
            .unwrap()
            .into_inner();
        assert_eq!(counted.clusters_not_resynced, 0, "{counted:?}");
        let kept = flotilla(g, &["recovery", "keep", "sim-0003", "--all"]).await;
        assert!(kept.ok, "{}", kept.stderr);
    }

    /// Deleting sim-0002 deletes its kept orphan's record.
    async fn deleting_a_cluster_forgets_its_orphans(&self) {
        self.clusters
            .clone()
            .delete_cluster(DeleteClusterRequest {
                name: "sim-0002".into(),
            })
            .await
            .unwrap();
        let left = flotilla_testkit::eventually(SOON, "sim-0002's orphan record deleted", || {
            let mut recovery = self.recovery.clone();
            async move {
                let left = list(&mut recovery).await;
                left.iter().all(|o| o.cluster != "sim-0002").then_some(left)
            }
        })
        .await;
        assert!(
            left.len() == 1 && left[0].cluster == "sim-0003",
            "the other cluster's kept orphan stays: {left:?}"
        );
    }
}

/// `GET path` on `addr` over plain HTTP/1.1: the whole answer, head and body.
async fn http_get(addr: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(SOON, stream.read_to_end(&mut answer))
        .await
        .expect("an answer")
        .unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

/// Every orphan (one page holds them all here), by cluster and name as `get orphans` shows
/// them (the API pages in cluster and resource id order).
async fn list(recovery: &mut RecoveryServiceClient<Channel>) -> Vec<Orphan> {
    let mut items = recovery
        .list_orphans(ListOrphansRequest::default())
        .await
        .map(|r| r.into_inner().items)
        .unwrap_or_default();
    items.sort_by(|a, b| (&a.cluster, &a.name).cmp(&(&b.cluster, &b.name)));
    items
}

/// The value of key `k` of the ConfigMap of work `name` on `cluster`'s simulated Kubernetes
/// (`None`: no such ConfigMap).
async fn value(
    works: &mut WorkServiceClient<Channel>,
    cluster: &str,
    name: &str,
) -> Option<String> {
    let found = works
        .proxy(ProxyGetRequest {
            cluster: cluster.into(),
            kind: "configmaps".into(),
            namespace: "default".into(),
            name: name.into(),
        })
        .await;
    let objects = match found {
        Ok(found) => found.into_inner().objects,
        Err(e) if e.code() == tonic::Code::NotFound => return None,
        Err(e) => panic!("proxy to {cluster}: {e}"),
    };
    let object: serde_json::Value = serde_json::from_str(objects.first()?).unwrap();
    Some(object["data"]["k"].as_str().unwrap_or_default().to_string())
}

/// A JetStream server on `port`, its store under `dir`.
fn server(dir: &Path, port: u16) -> NatsServer {
    common::stores::jetstream_server(&nats_server_binary(), dir, port)
}

/// A `flotilla-hub` process serving on free ports, accepting new clusters.
struct HubProcess {
    proc: Proc,
    grpc: String,
    /// `host:port` of `/metrics`.
    metrics: String,
    /// `host:port` of the dashboard (open: loopback, no tokens).
    dashboard: String,
}

impl Drop for HubProcess {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "{}",
                self.proc.tail(60, &["shard ownership", "shard started"])
            );
        }
    }
}

impl HubProcess {
    fn start(nats: &str, dir: &Path, name: &str) -> Self {
        Self::start_with(nats, dir, name, &[])
    }

    /// Starts a hub as [`HubProcess::start`] does, with `extra` flags.
    fn start_with(nats: &str, dir: &Path, name: &str, extra: &[&str]) -> Self {
        let grpc = free_port();
        let metrics = format!("127.0.0.1:{}", free_port());
        let dashboard = format!("127.0.0.1:{}", free_port());
        let mut cmd = std::process::Command::new(HUB);
        cmd.args(["--nats-url", nats, "--auto-accept"])
            .args(["--grpc-listen", &format!("127.0.0.1:{grpc}")])
            .args(["--metrics-listen", &metrics])
            .args(["--dashboard-listen", &dashboard])
            .args([
                "--status-stream-max-bytes",
                &flotilla_testkit::STATUS_STREAM_MAX_BYTES.to_string(),
            ])
            .args(extra);
        Self {
            proc: Proc::spawn("flotilla-hub", cmd, dir.join(format!("hub-{name}.log"))),
            grpc: format!("http://127.0.0.1:{grpc}"),
            metrics,
            dashboard,
        }
    }

    /// A channel once the hub serves its API.
    async fn channel(&self) -> Channel {
        flotilla_testkit::eventually(SOON, "the hub serving its API", || async {
            let channel = Channel::from_shared(self.grpc.clone())
                .ok()?
                .connect_timeout(Duration::from_secs(2))
                .connect()
                .await
                .ok()?;
            ClusterServiceClient::new(channel.clone())
                .list_clusters(ListClustersRequest::default())
                .await
                .ok()?;
            Some(channel)
        })
        .await
    }
}

/// What a command did.
struct Ran {
    ok: bool,
    stdout: String,
    stderr: String,
}

async fn run(program: &Path, args: &[&str]) -> Ran {
    let run = tokio::process::Command::new(program).args(args).output();
    let output = tokio::time::timeout(SOON, run)
        .await
        .unwrap_or_else(|_| {
            panic!(
                "{} {args:?} did not finish within {SOON:?}",
                program.display()
            )
        })
        .unwrap();
    Ran {
        ok: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

async fn flotilla_hub(args: &[&str]) -> Ran {
    run(Path::new(HUB), args).await
}

/// The `flotilla` CLI against the hub at `grpc`.
async fn flotilla(grpc: &str, args: &[&str]) -> Ran {
    let mut all = vec!["--hub", grpc];
    all.extend_from_slice(args);
    run(&binary("flotilla"), &all).await
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 temp path")
}
