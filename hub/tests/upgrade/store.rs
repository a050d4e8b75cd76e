//! A store of the previous release loaded by this build's hub (issue 49 §6.6, KV records).
//!
//! `testkit/fixtures/store/v0.1/` is the store a hub of that release kept — every bucket's
//! records byte for byte, as `flotilla-hub backup` takes them — recorded by
//! `hub/examples/record_store.rs`, with what that hub listed (`objects.json`). Restored into an
//! empty server of the version it was taken from and into the current one, it gives a hub of
//! this build that lists every recorded cluster, work and policy as recorded (same uids,
//! generations and labels), quarantines no record it cannot decode, and writes on it: a
//! recorded work updated goes to the next generation.

use crate::common::work::*;
use crate::common::*;
use flotilla_api::v1::policy_service_client::PolicyServiceClient;
use flotilla_api::v1::{ListClustersRequest, ListPoliciesRequest, ListWorksRequest, ObjectMeta};
use flotilla_testkit::{NatsServer, binary, free_port, nats_server_binaries};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tonic::transport::Channel;

/// The release whose store is loaded.
const RELEASE: &str = "0.1";

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../testkit/fixtures/store")
        .join(format!("v{RELEASE}"))
}

/// (kind, namespace/name) → (uid, generation, labels), as the recorder lists them.
type Objects = BTreeMap<(String, String), (String, i64, BTreeMap<String, String>)>;

fn recorded() -> Objects {
    let text = std::fs::read_to_string(fixture().join("objects.json")).expect("objects.json");
    let items: Vec<serde_json::Value> = serde_json::from_str(&text).expect("a JSON list");
    items
        .into_iter()
        .map(|o| {
            let s = |k: &str| o[k].as_str().unwrap_or_default().to_string();
            let labels = serde_json::from_value(o["labels"].clone()).unwrap_or_default();
            (
                (s("kind"), s("name")),
                (
                    s("uid"),
                    o["generation"].as_i64().unwrap_or_default(),
                    labels,
                ),
            )
        })
        .collect()
}

async fn listed(channel: &Channel) -> Objects {
    let mut out = Objects::new();
    let mut add = |kind: &str, meta: Option<ObjectMeta>| {
        let m = meta.unwrap_or_default();
        let generation = if kind == "cluster" { 0 } else { m.generation };
        out.insert(
            (kind.to_string(), format!("{}/{}", m.namespace, m.name)),
            (m.uid, generation, m.labels.into_iter().collect()),
        );
    };
    let mut clusters =
        flotilla_api::v1::cluster_service_client::ClusterServiceClient::new(channel.clone());
    for c in clusters
        .list_clusters(ListClustersRequest::default())
        .await
        .unwrap()
        .into_inner()
        .items
    {
        add("cluster", c.metadata);
    }
    let mut works = flotilla_api::v1::work_service_client::WorkServiceClient::new(channel.clone());
    for w in works
        .list_works(ListWorksRequest::default())
        .await
        .unwrap()
        .into_inner()
        .items
    {
        add("work", w.metadata);
    }
    let mut policies = PolicyServiceClient::new(channel.clone());
    for p in policies
        .list_policies(ListPoliciesRequest::default())
        .await
        .unwrap()
        .into_inner()
        .items
    {
        add("policy", p.metadata);
    }
    out
}

/// A JetStream server of `binary` on a free port, its store under `dir`.
fn server(binary: &Path, dir: &Path) -> NatsServer {
    crate::common::stores::jetstream_server(binary, dir, free_port())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_of_the_previous_release_is_loaded_and_written_by_this_hub() {
    let expected = recorded();
    assert!(
        expected.keys().any(|(k, _)| k == "work") && expected.keys().any(|(k, _)| k == "policy"),
        "the recording holds works and policies: {expected:?}"
    );
    let tmp = tempfile::tempdir().unwrap();
    for (label, server_binary) in nats_server_binaries() {
        let nats = server(&server_binary, &tmp.path().join(label));
        let restored = tokio::process::Command::new(binary("flotilla-hub"))
            .args(["--nats-url", &nats.url(), "restore", "--from"])
            .arg(fixture())
            .output()
            .await
            .unwrap();
        assert!(
            restored.status.success(),
            "{label}: {}",
            String::from_utf8_lossy(&restored.stderr)
        );
        let hub = start_hub(hub_config(&nats.url())).await;
        let channel = Channel::from_shared(format!("http://{}", hub.grpc_addr))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let deadline = tokio::time::Instant::now() + SOON;
        let mut now = listed(&channel).await;
        while now != expected && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            now = listed(&channel).await;
        }
        assert_eq!(now, expected, "{label}: the hub lists the recorded objects");
        assert!(
            flotilla_hub::store::quarantine::list().is_empty(),
            "{label}: a recorded record does not decode: {:?}",
            flotilla_hub::store::quarantine::list()
        );
        // It writes on the recorded store: an update goes to the next generation.
        let (_, (_, generation, _)) = expected
            .iter()
            .find(|((k, n), _)| k == "work" && n == "c1/w1")
            .expect("c1/w1 recorded");
        let mut works = works_client(&hub).await;
        works
            .apply_work(config_map_work_with("c1", "w1", "after the upgrade"))
            .await
            .unwrap();
        let next = generation + 1;
        let updated = works
            .get_work(flotilla_api::v1::GetWorkRequest {
                cluster: "c1".into(),
                name: "w1".into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            updated.metadata.map(|m| m.generation),
            Some(next),
            "{label}: the recorded work updated"
        );
        hub.stop().await;
    }
}
