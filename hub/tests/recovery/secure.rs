//! The recovery window in secure mode: a nats-server in operator mode from `flotilla-hub init`,
//! a hub with its secure directory, simulated agents joining with the bootstrap credentials
//! and running on the credentials the hub issued them. A backup is taken; after it a work is
//! applied on two clusters and a third cluster is denied (its credential revoked). The NATS
//! store is lost: a fresh server of the same operator (its JetStream and account resolver
//! empty) on the same address; `restore --revocations` with the hub's `revocations.json`; a
//! hub started from the secure directory as installed (the copy taken at `init`, as a
//! Kubernetes Secret holds it, which knows no revocation). The agents come back on the
//! credentials they were issued, without joining again; the works applied after the backup
//! are orphans, withheld; the credential revoked after the backup, accepted by the fresh
//! server before any hub ran, is refused once the restored hub runs, and so is a join
//! credential the backup holds unspent (`restore` treats every one as spent).

use super::{HubProcess, SOON, flotilla_hub, path};
use crate::common::work::{config_map_work, converged_at, wait_work};
use flotilla_agent::credentials::CLUSTER_CREDS;
use flotilla_api::v1::cluster_service_client::ClusterServiceClient;
use flotilla_api::v1::recovery_service_client::RecoveryServiceClient;
use flotilla_api::v1::work_service_client::WorkServiceClient;
use flotilla_api::v1::{
    ClusterNamesRequest, CreateJoinTokenRequest, ListOrphansRequest, OrphanKind,
};
use flotilla_auth::{InitOptions, SecureDir};
use flotilla_testkit::{NatsServer, free_port};
use std::path::{Path, PathBuf};
use std::time::Duration;

const CLUSTERS: [&str; 3] = ["sim-0001", "sim-0002", "sim-0003"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_secure_mode_agents_come_back_on_their_credentials_and_a_credential_revoked_after_the_backup_stays_revoked()
 {
    let tmp = tempfile::tempdir().unwrap();
    let tmp = tmp.path();
    let port = free_port();
    let secure = SecureDir::init(
        &tmp.join("secure"),
        &InitOptions {
            nats_listen: format!("127.0.0.1:{port}"),
            ..InitOptions::default()
        },
    )
    .unwrap();
    // What a Kubernetes install's Secret holds: the directory as `init` wrote it.
    let installed = tmp.join("installed");
    crate::common::stores::copy_dir(&secure.dir, &installed);
    let mut source = NatsServer::start_from_config(secure.server_conf.clone(), port);
    let url = source.url();
    let dir = path(&secure.dir).to_string();
    let hub = HubProcess::start_with(&url, tmp, "source", &["--secure-dir", &dir]);
    let channel = hub.channel().await;
    let mut clusters = ClusterServiceClient::new(channel.clone());
    let mut works = WorkServiceClient::new(channel.clone());
    let fleet = fleet(&url, &secure, tmp).await;
    for c in CLUSTERS {
        crate::common::wait_available(&mut clusters, c).await;
    }
    let issued: Vec<(String, Vec<u8>)> = CLUSTERS
        .iter()
        .map(|c| (c.to_string(), std::fs::read(creds(tmp, c)).expect("issued")))
        .collect();
    works
        .apply_work(config_map_work("sim-0001", "before"))
        .await
        .unwrap();
    wait_work(&mut works, "sim-0001", "before", "applied", |w| {
        converged_at(w, 1)
    })
    .await;

    // A join credential for a site that joins after the backup: spent then, unspent in it.
    let join = tmp.join("join.creds");
    let token = clusters
        .create_join_token(CreateJoinTokenRequest {
            cluster_name: "site-9".into(),
            accept: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    std::fs::write(&join, token.creds).unwrap();
    assert!(connects(&url, &join).await, "the join credential works");

    let out = tmp.join("backup");
    let taken = flotilla_hub(&[
        "--nats-url",
        &url,
        "--secure-dir",
        &dir,
        "backup",
        "--out",
        path(&out),
    ])
    .await;
    assert!(taken.ok, "{}", taken.stderr);
    for c in ["sim-0001", "sim-0002"] {
        works.apply_work(config_map_work(c, "after")).await.unwrap();
        wait_work(&mut works, c, "after", "applied", |w| converged_at(w, 1)).await;
    }
    // sim-0003 is denied after the backup: its agent stopped, its credential revoked.
    let revoked = tmp.join("revoked.creds");
    std::fs::copy(creds(tmp, "sim-0003"), &revoked).unwrap();
    fleet.link_down(2).await;
    clusters
        .deny_clusters(ClusterNamesRequest {
            names: vec!["sim-0003".into()],
            key: String::new(),
        })
        .await
        .unwrap();
    eventually_refused(&url, &revoked, "by the source server once denied").await;

    drop(hub);
    source.stop();
    let target = fresh_server(&secure, tmp, port);
    assert!(
        connects(&url, &revoked).await,
        "a fresh server resolves the accounts as `init` wrote them: the revocation is not there"
    );
    let installed_dir = path(&installed).to_string();
    let restored = flotilla_hub(&[
        "--nats-url",
        &url,
        "--secure-dir",
        &installed_dir,
        "restore",
        "--from",
        path(&out),
        "--revocations",
        path(&secure.revocations_file()),
    ])
    .await;
    assert!(restored.ok, "{}", restored.stderr);
    assert!(
        restored
            .stdout
            .contains("of them were not in the backup and are written back")
            && restored
                .stdout
                .contains("1 join credential(s) unspent in the backup are revoked"),
        "{}",
        restored.stdout
    );
    let hub = HubProcess::start_with(&url, tmp, "restored", &["--secure-dir", &installed_dir]);
    let channel = hub.channel().await;
    eventually_refused(&url, &revoked, "once the restored hub runs").await;
    eventually_refused(&url, &join, "(the join credential, treated as spent)").await;

    let mut clusters = ClusterServiceClient::new(channel.clone());
    for c in ["sim-0001", "sim-0002"] {
        crate::common::wait_available(&mut clusters, c).await;
    }
    let mut works = WorkServiceClient::new(channel.clone());
    wait_work(&mut works, "sim-0001", "before", "applied", |w| {
        converged_at(w, 1)
    })
    .await;
    withheld(&channel).await;
    for (cluster, bytes) in &issued[..2] {
        assert!(
            std::fs::read(creds(tmp, cluster)).unwrap() == *bytes,
            "{cluster}: the agent came back on the credentials it was issued (none issued again)"
        );
    }
    assert!(
        !connects(&url, &revoked).await,
        "the revoked credential stays refused"
    );
    fleet.stop().await;
    drop(target);
}

async fn fleet(url: &str, secure: &SecureDir, tmp: &Path) -> flotilla_sim::Fleet {
    let mut config = flotilla_sim::FleetConfig::new(url, CLUSTERS.len());
    config.resync_interval = Duration::from_secs(2);
    config.pending_poll = Duration::from_millis(200);
    config.ready_delay = Duration::from_millis(100);
    config.scores = None;
    config.simulate_addons = false;
    config.state_dir = Some(tmp.join("agents"));
    config.bootstrap_creds = Some(secure.bootstrap_creds.clone());
    flotilla_sim::Fleet::start(&config).await.unwrap()
}

/// The credentials the hub issued `cluster`'s agent.
fn creds(tmp: &Path, cluster: &str) -> PathBuf {
    tmp.join("agents").join(cluster).join(CLUSTER_CREDS)
}

/// A server of the same operator and accounts on `port`, as `init` configured it, with an
/// empty JetStream store and an empty account resolver (the old server's disks are lost).
fn fresh_server(secure: &SecureDir, tmp: &Path, port: u16) -> NatsServer {
    let conf = std::fs::read_to_string(&secure.server_conf).unwrap();
    let fresh = tmp.join("fresh");
    std::fs::create_dir_all(&fresh).unwrap();
    let mut replaced = conf.clone();
    for sub in ["jwt", "jetstream"] {
        let old = format!("{}\"", secure.dir.join(sub).display());
        assert!(conf.contains(&old), "{old} in {conf}");
        replaced = replaced.replace(&old, &format!("{}\"", fresh.join(sub).display()));
    }
    let file = fresh.join("nats-server.conf");
    std::fs::write(&file, replaced).unwrap();
    NatsServer::start_from_config(file, port)
}

async fn connects(url: &str, creds: &Path) -> bool {
    let Ok(options) = async_nats::ConnectOptions::with_credentials_file(creds).await else {
        return false;
    };
    tokio::time::timeout(Duration::from_secs(3), options.connect(url))
        .await
        .is_ok_and(|r| r.is_ok())
}

async fn eventually_refused(url: &str, creds: &Path, when: &str) {
    flotilla_testkit::eventually(
        SOON,
        &format!("the revoked credential refused {when}"),
        || async move { (!connects(url, creds).await).then_some(()) },
    )
    .await;
}

/// "after" is recorded on sim-0001 and sim-0002 as a `Work` orphan, and stays on both spokes.
async fn withheld(channel: &tonic::transport::Channel) {
    let seen = flotilla_testkit::eventually(SOON, "two orphans recorded and named", || async {
        let items = RecoveryServiceClient::new(channel.clone())
            .list_orphans(ListOrphansRequest::default())
            .await
            .ok()?
            .into_inner()
            .items;
        let named: Vec<(String, String, OrphanKind)> = items
            .iter()
            .map(|o| (o.cluster.clone(), o.name.clone(), o.kind()))
            .collect();
        (named.len() == 2 && named.iter().all(|o| !o.1.is_empty())).then_some(named)
    })
    .await;
    assert_eq!(
        seen,
        [
            (
                "sim-0001".to_string(),
                "after".to_string(),
                OrphanKind::Work
            ),
            (
                "sim-0002".to_string(),
                "after".to_string(),
                OrphanKind::Work
            ),
        ]
    );
}
