//! The recovery window (issue 49), with real processes: a nats-server, `flotilla-hub` processes,
//! simulated agents and the `flotilla` CLI. A backup is taken, a work is applied on two
//! clusters after it, and the backup is restored into a fresh server on the same address: the
//! hub started on it tells no spoke to delete the work it lacks; the agents report it as an
//! orphan, listed by `flotilla get orphans`; it is deleted on one spoke only when the operator
//! says so and kept on the other, also after the window is closed.

mod common;

use common::work::*;
use flotilla_api::v1::cluster_service_client::ClusterServiceClient;
use flotilla_api::v1::recovery_service_client::RecoveryServiceClient;
use flotilla_api::v1::work_service_client::WorkServiceClient;
use flotilla_api::v1::{
    GetRecoveryRequest, ListClustersRequest, ListOrphansRequest, Orphan, OrphanDecision,
    ProxyGetRequest,
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
async fn a_restore_older_than_the_spokes_deletes_nothing_on_them_until_the_operator_decides() {
    let tmp = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut source = server(&tmp.path().join("source"), port);
    let hub = HubProcess::start(&source.url(), tmp.path(), "source");
    let channel = hub.channel().await;
    let mut clusters = ClusterServiceClient::new(channel.clone());
    let mut works = WorkServiceClient::new(channel.clone());
    let mut fleet_cfg = flotilla_sim::FleetConfig::new(&source.url(), 2);
    fleet_cfg.resync_interval = RESYNC;
    fleet_cfg.pending_poll = Duration::from_millis(200);
    fleet_cfg.ready_delay = Duration::from_millis(100);
    fleet_cfg.scores = None;
    fleet_cfg.simulate_addons = false;
    let state = tmp.path().join("agents");
    fleet_cfg.state_dir = Some(state);
    let fleet = flotilla_sim::Fleet::start(&fleet_cfg).await.unwrap();
    for c in ["sim-0001", "sim-0002"] {
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

    let out = tmp.path().join("backup");
    let taken = flotilla_hub(&["--nats-url", &source.url(), "backup", "--out", path(&out)]).await;
    assert!(taken.ok, "{}", taken.stderr);
    // Created after the backup: the restored store will not know it.
    for c in ["sim-0001", "sim-0002"] {
        works.apply_work(config_map_work(c, "after")).await.unwrap();
        wait_work(&mut works, c, "after", "applied", |w| converged_at(w, 1)).await;
    }

    // The store is lost: a fresh server on the same address, the backup restored into it.
    drop(hub);
    source.stop();
    let target = server(&tmp.path().join("target"), port);
    let restored =
        flotilla_hub(&["--nats-url", &target.url(), "restore", "--from", path(&out)]).await;
    assert!(restored.ok, "{}", restored.stderr);
    assert!(
        restored.stdout.contains("Hubs start in a recovery window"),
        "{}",
        restored.stdout
    );
    let hub = HubProcess::start(&target.url(), tmp.path(), "restored");
    let channel = hub.channel().await;
    let mut recovery = RecoveryServiceClient::new(channel.clone());
    let mut works = WorkServiceClient::new(channel.clone());
    let status = recovery
        .get_recovery(GetRecoveryRequest {})
        .await
        .unwrap()
        .into_inner();
    let window = status.window.expect("the restore opened the window");
    assert_eq!(window.started_by, "restore");
    assert!(window.backup_taken_at.is_some());

    // The agents came back while no hub ran and resync once it does: "after" is an orphan on
    // both, known by its resource id (a resync lists ids and generations only).
    let ids = |c: &str| flotilla_bus::works::resource_id(c, "after");
    flotilla_testkit::eventually(SOON, "both orphans recorded", || {
        let mut recovery = recovery.clone();
        async move {
            let items = list(&mut recovery).await;
            let found: Vec<&str> = items.iter().map(|o| o.resource_id.as_str()).collect();
            (found.contains(&ids("sim-0001").as_str()) && found.contains(&ids("sim-0002").as_str()))
                .then_some(())
        }
    })
    .await;
    // Agents reconnecting to a running hub republish every status: the orphans get their names.
    fleet.stop().await;
    let fleet = flotilla_sim::Fleet::start(&fleet_cfg).await.unwrap();
    let orphans = flotilla_testkit::eventually(SOON, "both orphans named", || {
        let mut recovery = recovery.clone();
        async move {
            let items = list(&mut recovery).await;
            (items.len() == 2 && items.iter().all(|o| !o.name.is_empty())).then_some(items)
        }
    })
    .await;
    assert_eq!(
        orphans
            .iter()
            .map(|o| (o.cluster.as_str(), o.name.as_str(), o.decision()))
            .collect::<Vec<_>>(),
        [
            ("sim-0001", "after", OrphanDecision::Undecided),
            ("sim-0002", "after", OrphanDecision::Undecided)
        ]
    );
    assert_eq!(orphans[0].agent_generation, 1);
    // Two resync rounds later both spokes still hold it.
    tokio::time::sleep(RESYNC * 3).await;
    for c in ["sim-0001", "sim-0002"] {
        assert!(holds(&mut works, c, "after").await, "{c} lost its work");
    }
    assert!(holds(&mut works, "sim-0001", "before").await);

    let g = hub.grpc.as_str();
    let listed = flotilla(g, &["get", "orphans"]).await;
    assert!(listed.ok, "{}", listed.stderr);
    let rows: Vec<&str> = listed.stdout.lines().collect();
    assert!(
        rows[0].starts_with("CLUSTER") && rows[0].contains("DECISION"),
        "{}",
        listed.stdout
    );
    assert!(
        rows[1].starts_with("sim-0001")
            && rows[1].contains("after")
            && rows[1].contains("Undecided"),
        "{}",
        listed.stdout
    );
    let early = flotilla(g, &["recovery", "finish"]).await;
    assert!(
        !early.ok && early.stderr.contains("2 orphan(s) are undecided"),
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

    // Deleted on one spoke when the operator says so; kept on the other.
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
        async move { (!holds(&mut works, "sim-0001", "after").await).then_some(()) }
    })
    .await;
    // Once gone, its record is settled; the kept one stays.
    flotilla_testkit::eventually(SOON, "sim-0001's orphan settled", || {
        let mut recovery = recovery.clone();
        async move {
            let items = list(&mut recovery).await;
            (items.len() == 1).then_some(())
        }
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
    assert!(
        holds(&mut works, "sim-0002", "after").await,
        "a kept orphan stays after the window closes"
    );
    assert!(holds(&mut works, "sim-0001", "before").await);
    let after = list(&mut recovery).await;
    assert_eq!(after.len(), 1, "{after:?}");
    assert_eq!(after[0].decision(), OrphanDecision::Keep);
    fleet.stop().await;
}

async fn list(recovery: &mut RecoveryServiceClient<Channel>) -> Vec<Orphan> {
    recovery
        .list_orphans(ListOrphansRequest::default())
        .await
        .map(|r| r.into_inner().items)
        .unwrap_or_default()
}

/// Whether `cluster`'s simulated Kubernetes holds the ConfigMap of work `name`.
async fn holds(works: &mut WorkServiceClient<Channel>, cluster: &str, name: &str) -> bool {
    let found = works
        .proxy(ProxyGetRequest {
            cluster: cluster.into(),
            kind: "configmaps".into(),
            namespace: "default".into(),
            name: name.into(),
        })
        .await;
    match found {
        Ok(found) => !found.into_inner().objects.is_empty(),
        Err(e) if e.code() == tonic::Code::NotFound => false,
        Err(e) => panic!("proxy to {cluster}: {e}"),
    }
}

/// A JetStream server on `port`, its store under `dir`.
fn server(dir: &Path, port: u16) -> NatsServer {
    std::fs::create_dir_all(dir).unwrap();
    let config = dir.join("nats-server.conf");
    std::fs::write(
        &config,
        format!(
            "listen: 127.0.0.1:{port}\njetstream {{ store_dir: {:?} }}\n",
            dir.join("js").display().to_string()
        ),
    )
    .unwrap();
    NatsServer::start_from_config_with(nats_server_binary(), config, port)
}

/// A `flotilla-hub` process serving on free ports, accepting new clusters.
struct HubProcess {
    proc: Proc,
    grpc: String,
}

impl Drop for HubProcess {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("---- hub log ----\n{}", self.proc.output());
        }
    }
}

impl HubProcess {
    fn start(nats: &str, dir: &Path, name: &str) -> Self {
        let grpc = free_port();
        let mut cmd = std::process::Command::new(HUB);
        cmd.args(["--nats-url", nats, "--auto-accept"])
            .args(["--grpc-listen", &format!("127.0.0.1:{grpc}")])
            .args(["--metrics-listen", &format!("127.0.0.1:{}", free_port())])
            .args([
                "--status-stream-max-bytes",
                &flotilla_testkit::STATUS_STREAM_MAX_BYTES.to_string(),
            ]);
        Self {
            proc: Proc::spawn("flotilla-hub", cmd, dir.join(format!("hub-{name}.log"))),
            grpc: format!("http://127.0.0.1:{grpc}"),
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
