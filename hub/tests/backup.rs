//! `flotilla-hub backup` and `restore` as processes against real servers, Debian's
//! nats-server 2.9 and the current release (each restored into the same version): a hub with
//! clusters, works and policies is backed up while it runs; the backup restored into a fresh
//! server gives a hub that lists the same objects (same uids and generations); a damaged
//! backup is refused before anything is restored, naming the file and what is wrong; a server
//! that has Flotilla's streams is refused. A hub's `revocations.json` given with `restore
//! --revocations` is written into the restored revocations (a key revoked after the backup
//! stays revoked); a file that does not read, or names no user key, is refused first. A
//! backup taken while a fanout runs is in `backup/fanout.rs`.

mod common;
#[path = "backup/fanout.rs"]
mod fanout;

use flotilla_api::ocm::{Document, parse_documents};
use flotilla_api::v1::cluster_service_client::ClusterServiceClient;
use flotilla_api::v1::placement_service_client::PlacementServiceClient;
use flotilla_api::v1::policy_service_client::PolicyServiceClient;
use flotilla_api::v1::work_service_client::WorkServiceClient;
use flotilla_api::v1::{
    ListClustersRequest, ListPoliciesRequest, ListWorksRequest, ManagedCluster, ManagedClusterSpec,
    ObjectMeta,
};
use flotilla_bus::snapshot::manifest::{MANIFEST_FILE, Manifest};
use flotilla_bus::snapshot::plan::OnRestore;
use flotilla_testkit::{NatsServer, Proc, free_port, nats_server_binaries};
use futures::TryStreamExt;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tonic::transport::Channel;

const HUB: &str = env!("CARGO_BIN_EXE_flotilla-hub");
const SOON: Duration = Duration::from_secs(60);
const POLICY: &str = include_str!("../../examples/policies/namespace.yaml");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_restored_into_a_fresh_server_gives_the_same_objects_on_the_debian_server() {
    let (label, binary) = nats_server_binaries().remove(0);
    backup_then_restore(label, &binary).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_restored_into_a_fresh_server_gives_the_same_objects_on_the_current_server() {
    let (label, binary) = nats_server_binaries().remove(1);
    backup_then_restore(label, &binary).await;
}

async fn backup_then_restore(label: &str, binary: &Path) {
    let tmp = tempfile::tempdir().unwrap();
    let source = server(binary, &tmp.path().join("source"));
    let hub = HubProcess::start(&source.url(), tmp.path(), "source");
    let channel = hub.channel().await;
    create_objects(&channel).await;
    let before = settled(&channel).await;
    let count = |kind: &str| before.keys().filter(|k| k.0 == kind).count();
    assert_eq!(
        (count("cluster"), count("work")),
        (3, 3),
        "{label}: {before:?}"
    );
    assert!(
        before.contains_key(&("policy", "default/policy-namespace".to_string())),
        "{label}: {before:?}"
    );

    // Taken while the hub runs.
    let out = tmp.path().join("backup");
    let taken = flotilla_hub(&["--nats-url", &source.url(), "backup", "--out", path(&out)]).await;
    assert!(taken.ok, "{label}: {}", taken.stderr);
    assert!(
        taken.stdout.starts_with("Backed up "),
        "{label}: {}",
        taken.stdout
    );
    let manifest =
        Manifest::parse(&std::fs::read(out.join(MANIFEST_FILE)).unwrap()).expect("a manifest");
    let stream = |name: &str| manifest.streams.iter().find(|s| s.name == name);
    // Every bucket the hub keeps, found by listing the account.
    for (bucket, _) in flotilla_hub::catalog::BUCKETS {
        let name = format!("KV_{bucket}");
        assert!(stream(&name).is_some(), "{label}: {name} in {manifest:?}");
    }
    let leases = stream("KV_hubleases").expect("the leases are taken");
    assert_eq!(leases.restore, OnRestore::Purge, "{label}");
    assert_eq!(
        manifest.streams.last().map(|s| s.name.as_str()),
        Some("KV_hubleases"),
        "{label}: the leases are taken last (every epoch stamped on a record taken before is at \
         or below their last sequence, which restore keeps)"
    );
    let skipped: Vec<&str> = manifest.skipped.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(skipped, ["FLOTILLA_STATUS", "KV_hubmembers"], "{label}");
    let again = flotilla_hub(&["--nats-url", &source.url(), "backup", "--out", path(&out)]).await;
    assert!(
        !again.ok && again.stderr.contains("not empty"),
        "{label}: {}",
        again.stderr
    );
    drop(hub);

    let target = server(binary, &tmp.path().join("target"));
    refuses_damaged_backups(label, &out, tmp.path(), &target).await;
    assert!(
        stream_names(&target).await.is_empty(),
        "{label}: nothing restored"
    );

    let revoked = refuses_bad_revocations(label, &out, tmp.path(), &target).await;
    let restored = flotilla_hub(&[
        "--nats-url",
        &target.url(),
        "restore",
        "--from",
        path(&out),
        "--revocations",
        path(&revoked.file),
    ])
    .await;
    assert!(restored.ok, "{label}: {}", restored.stderr);
    assert!(
        restored.stdout.contains(
            "1 revocation(s) read from 1 file(s) given with --revocations; 1 of them were not \
             in the backup and are written back."
        ),
        "{label}: {}",
        restored.stdout
    );
    let bucket = js(&target)
        .await
        .get_key_value("revocations")
        .await
        .unwrap();
    let stored = bucket
        .get(&revoked.key)
        .await
        .unwrap()
        .expect("the revocation is back");
    let stored: flotilla_auth::issuer::Revocation = serde_json::from_slice(&stored).unwrap();
    assert_eq!(stored, revoked.revocation, "{label}");
    let streams = manifest.streams.len();
    assert!(
        restored
            .stdout
            .starts_with(&format!("Restored {streams} streams")),
        "{label}: {}",
        restored.stdout
    );
    let leases_now = stream_state(&target, "KV_hubleases").await;
    assert_eq!(
        leases_now,
        (0, leases.last_seq),
        "{label}: the leases are purged and keep their sequence"
    );
    // The backup has no status stream (taken without --with-status): restore creates it
    // empty, so statuses agents republish before a hub starts wait for it.
    assert_eq!(
        stream_state(&target, "FLOTILLA_STATUS").await,
        (0, 0),
        "{label}: the status stream is created, empty"
    );
    let twice = flotilla_hub(&["--nats-url", &target.url(), "restore", "--from", path(&out)]).await;
    assert!(!twice.ok, "{label}: a second restore must be refused");
    assert!(
        twice
            .stderr
            .contains("the server already has FLOTILLA_STATUS, KV_")
            && twice
                .stderr
                .contains("restore needs an empty JetStream account"),
        "{label}: {}",
        twice.stderr
    );

    let hub = HubProcess::start(&target.url(), tmp.path(), "restored");
    let channel = hub.channel().await;
    let deadline = tokio::time::Instant::now() + SOON;
    let mut after = objects(&channel).await;
    while after != before && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        after = objects(&channel).await;
    }
    assert_eq!(
        after, before,
        "{label}: the restored hub lists the same objects"
    );
}

/// A revocation made after the backup, in a hub's `revocations.json`.
struct Revoked {
    file: PathBuf,
    key: String,
    revocation: flotilla_auth::issuer::Revocation,
}

/// Writes a hub's `revocations.json` revoking a fresh user key; on the way, `restore
/// --revocations` refuses a file that does not read and one naming an account key, naming the
/// file, before it touches the server.
async fn refuses_bad_revocations(
    label: &str,
    backup: &Path,
    tmp: &Path,
    target: &NatsServer,
) -> Revoked {
    use flotilla_auth::issuer::{Revocation, Which};
    let file = |name: &str, key: &str, revocation: &Revocation| {
        let file = tmp.join(name);
        let body = serde_json::json!({
            "version": 1,
            "revocations": { key: revocation },
            "last_iat": 0,
            "max_ttl": 86_400,
        });
        std::fs::write(&file, body.to_string()).unwrap();
        file
    };
    let revocation = Revocation {
        at: flotilla_auth::setup::unix_now(),
        account: Which::Agents,
        until: None,
    };
    let account = nkeys::KeyPair::new_account().public_key();
    let junk = tmp.join("junk-revocations.json");
    std::fs::write(&junk, "{ not json").unwrap();
    for (bad, says) in [
        (junk, "--revocations "),
        (
            file("account-revocations.json", &account, &revocation),
            "is not a NATS user key",
        ),
        (tmp.join("missing-revocations.json"), "not found"),
    ] {
        let run = flotilla_hub(&[
            "--nats-url",
            &target.url(),
            "restore",
            "--from",
            path(backup),
            "--revocations",
            path(&bad),
        ])
        .await;
        assert!(
            !run.ok && run.stderr.contains(path(&bad)) && run.stderr.contains(says),
            "{label}: {}: {:?} should name the file and say {says:?}",
            bad.display(),
            run.stderr
        );
    }
    assert!(
        stream_names(target).await.is_empty(),
        "{label}: nothing restored"
    );
    let key = nkeys::KeyPair::new_user().public_key();
    Revoked {
        file: file("revocations.json", &key, &revocation),
        key,
        revocation,
    }
}

/// Each damage to a copy of the backup, and what `restore` must say about it.
async fn refuses_damaged_backups(label: &str, good: &Path, tmp: &Path, target: &NatsServer) {
    type Damage = fn(&Path);
    let cases: [(&str, Damage, &str); 5] = [
        (
            "a flipped byte",
            |dir| {
                let file = dir.join("KV_works/stream.tar.s2");
                let mut bytes = std::fs::read(&file).unwrap();
                let middle = bytes.len() / 2;
                bytes[middle] ^= 0x40;
                std::fs::write(file, bytes).unwrap();
            },
            "KV_works/stream.tar.s2: sha256 differs from manifest.json (file damaged or edited)",
        ),
        (
            "a truncated snapshot",
            |dir| {
                let file = dir.join("KV_clusters/stream.tar.s2");
                let bytes = std::fs::read(&file).unwrap();
                std::fs::write(file, &bytes[..bytes.len() / 2]).unwrap();
            },
            "KV_clusters/stream.tar.s2: ",
        ),
        (
            "no manifest",
            |dir| std::fs::remove_file(dir.join(MANIFEST_FILE)).unwrap(),
            "manifest.json: missing — not a backup, or a backup that did not finish",
        ),
        (
            "a truncated manifest",
            |dir| {
                let file = dir.join(MANIFEST_FILE);
                let bytes = std::fs::read(&file).unwrap();
                std::fs::write(file, &bytes[..bytes.len() / 2]).unwrap();
            },
            "manifest.json: not a backup manifest: ",
        ),
        (
            "a stream given the status subjects",
            |dir| {
                let file = dir.join("KV_works/backup.json");
                let mut request: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
                request["config"]["subjects"] =
                    serde_json::json!(["$KV.works.>", "flotilla.status.>"]);
                std::fs::write(file, request.to_string()).unwrap();
            },
            "KV_works/backup.json: gives KV_works the subjects",
        ),
    ];
    for (i, (what, damage, says)) in cases.into_iter().enumerate() {
        let copy = tmp.join(format!("damaged-{i}"));
        common::stores::copy_dir(good, &copy);
        damage(&copy);
        let run = flotilla_hub(&[
            "--nats-url",
            &target.url(),
            "restore",
            "--from",
            path(&copy),
        ])
        .await;
        assert!(!run.ok, "{label}: {what} must be refused");
        assert!(
            run.stderr.contains(says) && run.stderr.contains(path(&copy)),
            "{label}: {what}: {:?} should name the file and say {says:?}",
            run.stderr
        );
    }
    let truncated = tmp.join("damaged-1/KV_clusters/stream.tar.s2");
    let run = flotilla_hub(&[
        "--nats-url",
        &target.url(),
        "restore",
        "--from",
        path(&tmp.join("damaged-1")),
    ])
    .await;
    assert!(
        run.stderr.contains(&format!("{}: ", truncated.display()))
            && run.stderr.contains("manifest.json says")
            && run.stderr.contains("(truncated or damaged)"),
        "{label}: {}",
        run.stderr
    );
}

/// Three clusters created ahead of their agents, three works, a policy with its placement and
/// binding.
async fn create_objects(channel: &Channel) {
    let mut clusters = ClusterServiceClient::new(channel.clone());
    for name in ["c1", "c2", "c3"] {
        clusters
            .apply_cluster(ManagedCluster {
                metadata: Some(ObjectMeta {
                    name: name.into(),
                    labels: [("env".to_string(), "prod".to_string())].into(),
                    ..Default::default()
                }),
                spec: Some(ManagedClusterSpec {
                    hub_accepts_client: true,
                    ..Default::default()
                }),
                ..Default::default()
            })
            .await
            .unwrap();
    }
    let mut works = WorkServiceClient::new(channel.clone());
    for (cluster, name) in [("c1", "w1"), ("c1", "w2"), ("c2", "w1")] {
        works.apply_work(work(cluster, name)).await.unwrap();
    }
    let mut policies = PolicyServiceClient::new(channel.clone());
    let mut placements = PlacementServiceClient::new(channel.clone());
    let in_default = |m: &mut Option<ObjectMeta>| {
        if let Some(m) = m.as_mut()
            && m.namespace.is_empty()
        {
            m.namespace = "default".into();
        }
    };
    for doc in parse_documents(POLICY) {
        match doc.expect("the example parses") {
            Document::Policy(mut p) => {
                in_default(&mut p.metadata);
                policies.apply_policy(p).await.unwrap();
            }
            Document::PlacementBinding(mut b) => {
                in_default(&mut b.metadata);
                policies.apply_placement_binding(b).await.unwrap();
            }
            Document::Placement(mut p) => {
                in_default(&mut p.metadata);
                placements.apply_placement(p).await.unwrap();
            }
            other => panic!("unexpected document {other:?}"),
        }
    }
}

fn work(cluster: &str, name: &str) -> flotilla_api::v1::ManifestWork {
    let yaml = format!(
        "apiVersion: work.open-cluster-management.io/v1\nkind: ManifestWork\n\
         metadata: {{namespace: {cluster}, name: {name}}}\nspec:\n  workload:\n    manifests:\n\
         \x20     - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: {name}, namespace: default}}, data: {{k: v}}}}\n"
    );
    match parse_documents(&yaml).remove(0) {
        Ok(Document::Work(w)) => w,
        other => panic!("not a work: {other:?}"),
    }
}

/// Every cluster, work and policy the hub lists: (kind, namespace/name) → (uid, generation,
/// labels). A cluster's generation is left out: with no agent, a hub taints it unreachable
/// when its own clock says so, restored or not.
type Objects = BTreeMap<(&'static str, String), (String, i64, BTreeMap<String, String>)>;

/// The objects once two reads a second apart agree (the hub finished what creating them set
/// off).
async fn settled(channel: &Channel) -> Objects {
    let deadline = tokio::time::Instant::now() + SOON;
    let mut last = objects(channel).await;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = objects(channel).await;
        if now == last || tokio::time::Instant::now() > deadline {
            return now;
        }
        last = now;
    }
}

async fn objects(channel: &Channel) -> Objects {
    let mut out = Objects::new();
    let mut add = |kind, meta: Option<ObjectMeta>| {
        let m = meta.unwrap_or_default();
        let labels = m.labels.into_iter().collect();
        let generation = if kind == "cluster" { 0 } else { m.generation };
        out.insert(
            (kind, format!("{}/{}", m.namespace, m.name)),
            (m.uid, generation, labels),
        );
    };
    let clusters = ClusterServiceClient::new(channel.clone())
        .list_clusters(ListClustersRequest::default())
        .await
        .unwrap()
        .into_inner();
    for c in clusters.items {
        add("cluster", c.metadata);
    }
    let works = WorkServiceClient::new(channel.clone())
        .list_works(ListWorksRequest::default())
        .await
        .unwrap()
        .into_inner();
    for w in works.items {
        add("work", w.metadata);
    }
    let policies = PolicyServiceClient::new(channel.clone())
        .list_policies(ListPoliciesRequest::default())
        .await
        .unwrap()
        .into_inner();
    for p in policies.items {
        add("policy", p.metadata);
    }
    out
}

/// A JetStream server of `binary` on a free port, its store under `dir`.
fn server(binary: &Path, dir: &Path) -> NatsServer {
    server_of(binary, dir, free_port())
}

/// A JetStream server of the current release on `port` (a restore's target on the address the
/// agents know), its store under `dir`.
fn server_at(dir: &Path, port: u16) -> NatsServer {
    server_of(&flotilla_testkit::nats_server_binary(), dir, port)
}

fn server_of(binary: &Path, dir: &Path, port: u16) -> NatsServer {
    common::stores::jetstream_server(binary, dir, port)
}

async fn js(server: &NatsServer) -> async_nats::jetstream::Context {
    let client = async_nats::connect(server.url()).await.unwrap();
    async_nats::jetstream::new(client)
}

async fn stream_names(server: &NatsServer) -> Vec<String> {
    js(server).await.stream_names().try_collect().await.unwrap()
}

/// (messages, last sequence) of a stream.
async fn stream_state(server: &NatsServer, stream: &str) -> (u64, u64) {
    let found = js(server).await.get_stream(stream).await.unwrap();
    let state = &found.cached_info().state;
    (state.messages, state.last_sequence)
}

/// A `flotilla-hub` process serving on free ports.
struct HubProcess {
    proc: Proc,
    grpc: String,
}

impl HubProcess {
    fn start(nats: &str, dir: &Path, name: &str) -> Self {
        Self::start_with(nats, dir, name, &[])
    }

    /// Starts a hub as [`HubProcess::start`] does, with `extra` flags.
    fn start_with(nats: &str, dir: &Path, name: &str, extra: &[&str]) -> Self {
        let grpc = free_port();
        let mut cmd = std::process::Command::new(HUB);
        cmd.args(["--nats-url", nats])
            .args(["--grpc-listen", &format!("127.0.0.1:{grpc}")])
            .args(["--metrics-listen", &format!("127.0.0.1:{}", free_port())])
            .args([
                "--status-stream-max-bytes",
                &flotilla_testkit::STATUS_STREAM_MAX_BYTES.to_string(),
            ])
            .args(extra);
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

impl Drop for HubProcess {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "---- hub (last lines) ----\n{}",
                self.proc.tail(25, &["shard ownership", "async_nats"])
            );
        }
    }
}

/// What a `flotilla-hub` command did.
struct Ran {
    ok: bool,
    stdout: String,
    stderr: String,
}

async fn flotilla_hub(args: &[&str]) -> Ran {
    let run = tokio::process::Command::new(HUB).args(args).output();
    let output = tokio::time::timeout(SOON, run)
        .await
        .unwrap_or_else(|_| panic!("flotilla-hub {args:?} did not finish within {SOON:?}"))
        .unwrap();
    Ran {
        ok: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn path(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 temp path")
}
