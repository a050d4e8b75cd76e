//! A backup taken while a fanout runs (issue 49's "backup taken during a fanout and restored
//! into a fresh server gives the same clusters and works"): simulated agents on a hub, works
//! applied one after another across the fleet, `flotilla-hub backup` run while they still are.
//! The backup restored into a fresh server on the same address (the old one gone, the agents
//! still running) holds every record its manifest counts, the same clusters, and the works as
//! at one point of the fanout — a prefix of it, nothing missing in between; the restored hub
//! serves them and they converge with the agents that outlived the old hub, the works applied
//! after the backup are withheld as orphans (none deleted on a spoke), and the fanout, applied
//! again through the restored hub, converges on every work.

use super::{HubProcess, SOON, flotilla_hub, js, path, server_at};
use crate::common::work::{config_map_work, converged_at};
use flotilla_api::v1::recovery_service_client::RecoveryServiceClient;
use flotilla_api::v1::work_service_client::WorkServiceClient;
use flotilla_api::v1::{
    FinishRecoveryRequest, GetRecoveryRequest, ListClustersRequest, ListOrphansRequest,
    ListWorksRequest, ManifestWork, OrphanDecision, OrphanKind,
};
use flotilla_bus::snapshot::manifest::{MANIFEST_FILE, Manifest};
use flotilla_bus::snapshot::plan::OnRestore;
use flotilla_testkit::free_port;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::transport::Channel;

/// Clusters of the fleet.
const CLUSTERS: usize = 6;
/// Works per cluster in the fanout.
const WORKS: usize = 40;
/// Works applied before the backup starts: the fanout is under way.
const STARTED: usize = 30;
/// Each agent's periodic resync.
const RESYNC: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_taken_during_a_fanout_and_restored_into_a_fresh_server_gives_the_same_clusters_and_works()
 {
    let tmp = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut source = server_at(&tmp.path().join("source"), port);
    let hub = HubProcess::start_with(&source.url(), tmp.path(), "source", &["--auto-accept"]);
    let channel = hub.channel().await;
    let fleet = fleet(&source.url(), tmp.path()).await;
    let names: Vec<String> = (0..CLUSTERS).map(|n| fleet.name(n).to_string()).collect();
    for name in &names {
        crate::common::wait_available(
            &mut flotilla_api::v1::cluster_service_client::ClusterServiceClient::new(
                channel.clone(),
            ),
            name,
        )
        .await;
    }
    let clusters_before = clusters(&channel).await;
    // Round-robin over the clusters, as a rollout to the fleet goes.
    let order: Vec<(String, String)> = (0..WORKS)
        .flat_map(|k| {
            names
                .iter()
                .map(move |c| (c.clone(), format!("fan-{k:02}")))
        })
        .collect();
    let total = order.len();

    let applied = Arc::new(Mutex::new(Vec::new()));
    let fanout = tokio::spawn(apply_all(channel.clone(), order.clone(), applied.clone()));
    flotilla_testkit::eventually(SOON, "the fanout under way", || async {
        (applied.lock().unwrap().len() >= STARTED).then_some(())
    })
    .await;
    let out = tmp.path().join("backup");
    let at_start = applied.lock().unwrap().len();
    let taken = flotilla_hub(&["--nats-url", &source.url(), "backup", "--out", path(&out)]).await;
    let at_end = applied.lock().unwrap().len();
    assert!(taken.ok, "{}", taken.stderr);
    assert!(
        at_end < total,
        "the fanout ({total} works) ended before the backup did ({at_start} → {at_end} applied \
         while it ran): make it longer"
    );
    tokio::time::timeout(SOON, fanout)
        .await
        .expect("the fanout finished")
        .unwrap();
    let uids: BTreeMap<(String, String), String> =
        applied.lock().unwrap().iter().cloned().collect();
    all_converge(&channel, &order, "on the source hub").await;
    let objects_before = objects(&fleet);
    let manifest =
        Manifest::parse(&std::fs::read(out.join(MANIFEST_FILE)).unwrap()).expect("a manifest");

    // The old store is lost; a fresh server on the same address, the agents still running.
    drop(hub);
    source.stop();
    let target = server_at(&tmp.path().join("target"), port);
    let restored =
        flotilla_hub(&["--nats-url", &target.url(), "restore", "--from", path(&out)]).await;
    assert!(restored.ok, "{}", restored.stderr);
    every_record_is_back(&target, &manifest).await;

    let hub = HubProcess::start_with(&target.url(), tmp.path(), "restored", &["--auto-accept"]);
    let channel = hub.channel().await;
    assert_eq!(
        clusters(&channel).await,
        clusters_before,
        "the restored hub lists the same clusters, same uids"
    );
    let listed = works(&channel).await;
    let kept = listed.len();
    assert!(
        (at_start..=at_end).contains(&kept),
        "the backup holds {kept} works; {at_start} were applied when it started, {at_end} when \
         it ended"
    );
    let prefix: BTreeMap<(String, String), (String, i64)> = order[..kept]
        .iter()
        .map(|key| (key.clone(), (uids[key].clone(), 1)))
        .collect();
    let listed: BTreeMap<_, _> = listed
        .into_iter()
        .map(|(key, w)| {
            let m = w.metadata.unwrap_or_default();
            (key, (m.uid, m.generation))
        })
        .collect();
    assert_eq!(
        listed, prefix,
        "the restored works are the fanout's first {kept}, as applied (a point in time, no hole)"
    );
    all_converge(&channel, &order[..kept], "on the restored hub").await;
    orphans_withheld(&channel, &order[kept..]).await;
    assert_eq!(
        objects(&fleet),
        objects_before,
        "no spoke deleted anything while the window is open"
    );

    // The fanout goes on through the restored hub: applied again whole, it converges.
    let again = Arc::new(Mutex::new(Vec::new()));
    tokio::time::timeout(SOON, apply_all(channel.clone(), order.clone(), again))
        .await
        .expect("the fanout applied again");
    all_converge_any(&channel, &order, "after the fanout is applied again").await;
    no_orphan_left(&channel).await;
    let finished = RecoveryServiceClient::new(channel.clone())
        .finish_recovery(FinishRecoveryRequest {
            undecided: OrphanDecision::Undecided as i32,
        })
        .await;
    assert!(finished.is_ok(), "{finished:?}");
    assert_eq!(objects(&fleet), objects_before);
    fleet.stop().await;
    drop(target);
}

async fn fleet(url: &str, tmp: &Path) -> flotilla_sim::Fleet {
    let mut config = flotilla_sim::FleetConfig::new(url, CLUSTERS);
    config.resync_interval = RESYNC;
    config.pending_poll = Duration::from_millis(200);
    config.ready_delay = Duration::from_millis(100);
    config.scores = None;
    config.simulate_addons = false;
    config.state_dir = Some(tmp.join("agents"));
    flotilla_sim::Fleet::start(&config).await.unwrap()
}

/// (cluster, name) → uid of each work applied so far, in order.
type Applied = Arc<Mutex<Vec<((String, String), String)>>>;

/// Applies each work in turn, recording (cluster, name) → uid as each is stored.
async fn apply_all(channel: Channel, order: Vec<(String, String)>, applied: Applied) {
    let mut api = WorkServiceClient::new(channel);
    for (cluster, name) in order {
        let stored = api
            .apply_work(config_map_work(&cluster, &name))
            .await
            .unwrap_or_else(|e| panic!("applying {cluster}/{name}: {e}"))
            .into_inner();
        let uid = stored.metadata.unwrap_or_default().uid;
        applied.lock().unwrap().push(((cluster, name), uid));
    }
}

/// Every stream the manifest lists holds, once restored, the messages it counts up to the same
/// last sequence; the leases keep only their sequence (purged), and `hubmeta` has the recovery
/// window written after them.
async fn every_record_is_back(target: &flotilla_testkit::NatsServer, manifest: &Manifest) {
    let js = js(target).await;
    for stream in &manifest.streams {
        let mut found = js.get_stream(&stream.name).await.unwrap();
        let state = found.info().await.unwrap().state.clone();
        let got = if stream.name == format!("KV_{}", flotilla_hub::recovery::HUBMETA) {
            // `restore` opened the recovery window in it once it was back: records after the
            // backup's last one.
            let written = state.last_sequence.saturating_sub(stream.last_seq);
            assert!(
                written > 0,
                "{}: the recovery window is written",
                stream.name
            );
            (state.messages - written, state.last_sequence - written)
        } else {
            (state.messages, state.last_sequence)
        };
        // The archive may hold writes made while its snapshot was streamed out (the server
        // reports the state when the snapshot starts): never past the stream's end just after
        // its snapshot, and each adds at most one message.
        let latest = stream.last_seq_after.max(stream.last_seq);
        assert!(
            (stream.last_seq..=latest).contains(&got.1),
            "{}: restored up to sequence {}, the manifest recorded {} (the stream was at {} \
             just after its snapshot)",
            stream.name,
            got.1,
            stream.last_seq,
            latest
        );
        let grew = got.1 - stream.last_seq;
        match stream.restore {
            OnRestore::Purge => assert_eq!(got.0, 0, "{}: purged", stream.name),
            _ if grew == 0 => assert_eq!(
                got.0, stream.messages,
                "{}: messages restored vs the manifest",
                stream.name
            ),
            _ => assert!(
                got.0 <= stream.messages + grew,
                "{}: {} messages restored, the manifest recorded {} and {grew} writes more",
                stream.name,
                got.0,
                stream.messages
            ),
        }
    }
}

/// Cluster name → uid.
async fn clusters(channel: &Channel) -> BTreeMap<String, String> {
    flotilla_api::v1::cluster_service_client::ClusterServiceClient::new(channel.clone())
        .list_clusters(ListClustersRequest::default())
        .await
        .unwrap()
        .into_inner()
        .items
        .into_iter()
        .map(|c| {
            let m = c.metadata.unwrap_or_default();
            (m.name, m.uid)
        })
        .collect()
}

/// Every work the hub lists, every page: (cluster, name) → work.
async fn works(channel: &Channel) -> BTreeMap<(String, String), ManifestWork> {
    let mut api = WorkServiceClient::new(channel.clone());
    let mut out = BTreeMap::new();
    let mut page_token = String::new();
    loop {
        let page = api
            .list_works(ListWorksRequest {
                page_token,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        for w in page.items {
            let m = w.metadata.clone().unwrap_or_default();
            out.insert((m.namespace, m.name), w);
        }
        if page.next_page_token.is_empty() {
            return out;
        }
        page_token = page.next_page_token;
    }
}

/// Waits until every work of `which` is Applied and Available at generation 1.
async fn all_converge(channel: &Channel, which: &[(String, String)], when: &str) {
    converge(channel, which, when, |w| converged_at(w, 1)).await;
}

/// Waits until every work of `which` is Applied and Available at its stored generation.
async fn all_converge_any(channel: &Channel, which: &[(String, String)], when: &str) {
    converge(channel, which, when, |w| {
        converged_at(w, w.metadata.as_ref().map_or(0, |m| m.generation))
    })
    .await;
}

async fn converge(
    channel: &Channel,
    which: &[(String, String)],
    when: &str,
    done: impl Fn(&ManifestWork) -> bool,
) {
    let last = Mutex::new(Vec::new());
    let waited = tokio::time::timeout(
        SOON,
        flotilla_testkit::eventually(2 * SOON, when, || async {
            let listed = works(channel).await;
            let behind: Vec<String> = which
                .iter()
                .filter(|key| !listed.get(*key).is_some_and(&done))
                .map(|(c, n)| format!("{c}/{n}"))
                .collect();
            let over = behind.is_empty();
            *last.lock().unwrap() = behind;
            over.then_some(())
        }),
    )
    .await;
    if waited.is_err() {
        let behind = last.lock().unwrap().clone();
        panic!(
            "{when}: {} of {} works not converged after {SOON:?}: {:?}",
            behind.len(),
            which.len(),
            &behind[..behind.len().min(10)]
        );
    }
}

/// The works applied after the backup are recorded as undecided orphans of kind `Work`, each
/// on its cluster under its name, and nothing else is.
async fn orphans_withheld(channel: &Channel, after: &[(String, String)]) {
    let want: BTreeSet<(String, String)> = after.iter().cloned().collect();
    let last = Mutex::new(BTreeSet::new());
    let waited = tokio::time::timeout(
        SOON,
        flotilla_testkit::eventually(2 * SOON, "the works after the backup recorded", || async {
            let seen: BTreeSet<(String, String)> = orphans(channel)
                .await
                .into_iter()
                .filter(|o| {
                    o.kind() == OrphanKind::Work && o.decision() == OrphanDecision::Undecided
                })
                .map(|o| (o.cluster, o.name))
                .collect();
            let done = seen == want;
            *last.lock().unwrap() = seen;
            done.then_some(())
        }),
    )
    .await;
    if waited.is_err() {
        let seen = last.lock().unwrap().clone();
        panic!(
            "orphans recorded: {} (want {}): missing {:?}, unexpected {:?}",
            seen.len(),
            want.len(),
            want.difference(&seen).take(10).collect::<Vec<_>>(),
            seen.difference(&want).take(10).collect::<Vec<_>>()
        );
    }
}

/// Every orphan record, every page.
async fn orphans(channel: &Channel) -> Vec<flotilla_api::v1::Orphan> {
    let mut api = RecoveryServiceClient::new(channel.clone());
    let mut out = Vec::new();
    let mut page_token = String::new();
    loop {
        let page = api
            .list_orphans(ListOrphansRequest {
                page_token,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        out.extend(page.items);
        if page.next_page_token.is_empty() {
            return out;
        }
        page_token = page.next_page_token;
    }
}

/// Waits until the window counts no orphan: re-applied, each record is settled.
async fn no_orphan_left(channel: &Channel) {
    let api = RecoveryServiceClient::new(channel.clone());
    let last = Mutex::new(None);
    let waited = tokio::time::timeout(
        SOON,
        flotilla_testkit::eventually(2 * SOON, "no orphan left", || async {
            let status = api
                .clone()
                .get_recovery(GetRecoveryRequest {})
                .await
                .ok()?
                .into_inner();
            let left = status.undecided + status.delete + status.keep + status.revert;
            *last.lock().unwrap() = Some(status);
            (left == 0).then_some(())
        }),
    )
    .await;
    if waited.is_err() {
        let left = orphans(channel).await;
        panic!(
            "orphans left after the fanout was applied again: {:?}; {:#?}",
            last.lock().unwrap(),
            &left[..left.len().min(5)]
        );
    }
}

/// Objects each simulated cluster holds.
fn objects(fleet: &flotilla_sim::Fleet) -> Vec<(String, usize)> {
    fleet
        .backends
        .iter()
        .map(|(name, backend)| (name.clone(), backend.object_count()))
        .collect()
}
