//! Records this build's store as the KV-record fixture of a release (issue 49 §6.6; the test
//! that loads it is `hub/tests/upgrade.rs`, module `store`). Run at a release only:
//!
//! ```text
//! cargo run -p flotilla-hub --example record_store -- testkit/fixtures/store/v0.1
//! ```
//!
//! A real nats-server — the distribution's (Debian's 2.9), the oldest a restore reads, so the
//! recording restores into it and into every later one — and a hub of this build in this
//! process. The scenario: three clusters created ahead of their agents and accepted, three
//! works, the example namespace policy with its placement and binding. Once they settle, the
//! hub is stopped and the store is taken with `flotilla-hub backup`'s own code (every bucket's
//! records as JetStream keeps them, byte for byte, with their revisions) into OUT_DIR, and
//! what the hub listed is written beside it (`objects.json`: kind, namespace/name → uid,
//! generation, labels) for the test to compare with.

#[path = "../tests/common/mod.rs"]
mod common;

use anyhow::{Context, Result, bail};
use common::*;
use flotilla_api::ocm::{Document, parse_documents};
use flotilla_api::v1::placement_service_client::PlacementServiceClient;
use flotilla_api::v1::policy_service_client::PolicyServiceClient;
use flotilla_api::v1::work_service_client::WorkServiceClient;
use flotilla_api::v1::{
    ListClustersRequest, ListPoliciesRequest, ListWorksRequest, ManagedCluster, ManagedClusterSpec,
    ObjectMeta,
};
use flotilla_testkit::{NatsServer, free_port, nats_server_debian_binary};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tonic::transport::Channel;

const POLICY: &str = include_str!("../../examples/policies/namespace.yaml");

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [out] = args.as_slice() else {
        bail!("usage: record_store OUT_DIR (such as: testkit/fixtures/store/v0.1)");
    };
    let out = PathBuf::from(out);
    let tmp = tempfile::tempdir()?;
    let nats = server(tmp.path());
    let hub = start_hub(hub_config(&nats.url())).await;
    let channel = Channel::from_shared(format!("http://{}", hub.grpc_addr))?
        .connect()
        .await?;
    create_objects(&channel).await?;
    // Settled: two listings a second apart agree.
    let mut objects = list(&channel).await?;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let again = list(&channel).await?;
        if again == objects {
            break;
        }
        objects = again;
    }
    hub.stop().await;
    let client = async_nats::connect(nats.url()).await?;
    let options = flotilla_hub::backup::Options {
        out: out.clone(),
        with_status: false,
        check: true,
    };
    let manifest = flotilla_hub::backup::backup(&client, &options)
        .await
        .context("taking the store")?;
    let listing: Vec<serde_json::Value> = objects
        .into_iter()
        .map(|((kind, name), (uid, generation, labels))| {
            serde_json::json!({
                "kind": kind, "name": name, "uid": uid, "generation": generation,
                "labels": labels,
            })
        })
        .collect();
    std::fs::write(
        out.join("objects.json"),
        serde_json::to_string_pretty(&listing)? + "\n",
    )?;
    println!(
        "{} streams recorded into {} from flotilla {}",
        manifest.streams.len(),
        out.display(),
        manifest.flotilla
    );
    Ok(())
}

/// The distribution's nats-server on a free port, its store under `dir`.
fn server(dir: &Path) -> NatsServer {
    common::stores::jetstream_server(&nats_server_debian_binary(), dir, free_port())
}

/// Three accepted clusters (no agents), three works, the example policy.
async fn create_objects(channel: &Channel) -> Result<()> {
    let mut clusters =
        flotilla_api::v1::cluster_service_client::ClusterServiceClient::new(channel.clone());
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
            .await?;
    }
    let mut works = WorkServiceClient::new(channel.clone());
    for (cluster, name) in [("c1", "w1"), ("c1", "w2"), ("c2", "w1")] {
        works
            .apply_work(work::config_map_work(cluster, name))
            .await?;
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
        match doc.context("the example policy parses")? {
            Document::Policy(mut p) => {
                in_default(&mut p.metadata);
                policies.apply_policy(p).await?;
            }
            Document::PlacementBinding(mut b) => {
                in_default(&mut b.metadata);
                policies.apply_placement_binding(b).await?;
            }
            Document::Placement(mut p) => {
                in_default(&mut p.metadata);
                placements.apply_placement(p).await?;
            }
            other => bail!("unexpected document {other:?}"),
        }
    }
    Ok(())
}

/// (kind, namespace/name) → (uid, generation, labels) of every cluster, work and policy. A
/// cluster's generation is left out: with no agent, a hub taints it unreachable on its own clock.
type Objects = BTreeMap<(&'static str, String), (String, i64, BTreeMap<String, String>)>;

async fn list(channel: &Channel) -> Result<Objects> {
    let mut out = Objects::new();
    let mut add = |kind, meta: Option<ObjectMeta>| {
        let m = meta.unwrap_or_default();
        let generation = if kind == "cluster" { 0 } else { m.generation };
        out.insert(
            (kind, format!("{}/{}", m.namespace, m.name)),
            (m.uid, generation, m.labels.into_iter().collect()),
        );
    };
    let clusters =
        flotilla_api::v1::cluster_service_client::ClusterServiceClient::new(channel.clone())
            .list_clusters(ListClustersRequest::default())
            .await?
            .into_inner();
    for c in clusters.items {
        add("cluster", c.metadata);
    }
    let works = WorkServiceClient::new(channel.clone())
        .list_works(ListWorksRequest::default())
        .await?
        .into_inner();
    for w in works.items {
        add("work", w.metadata);
    }
    let policies = PolicyServiceClient::new(channel.clone())
        .list_policies(ListPoliciesRequest::default())
        .await?
        .into_inner();
    for p in policies.items {
        add("policy", p.metadata);
    }
    Ok(out)
}
