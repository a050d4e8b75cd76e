//! ManagedClusterSet `spec.managedNamespaces` end to end: the real hub, real nats-server and
//! agents on simulated clusters, driven by the OCM-shaped YAML of
//! `examples/managed-namespaces.yaml`.

use crate::common;

use common::raw_agent::RawAgent;
use common::*;
use flotilla_agent::backend::Backend;
use flotilla_agent::backend::sim::SimBackend;
use flotilla_api::meta::{
    CLUSTERSET_LABEL, COND_NAMESPACE_AVAILABLE, REASON_NAMESPACE_APPLIED, condition_status,
    find_condition,
};
use flotilla_api::ocm::{Document, parse_documents};
use flotilla_api::v1::cluster_service_client::ClusterServiceClient;
use flotilla_api::v1::{
    LabelClusterRequest, ManagedCluster, ManagedClusterSet, ManagedNamespaceConfig,
};
use flotilla_api::work::ManifestId;
use flotilla_testkit::{LinkProxy, NatsServer};
use std::time::Duration;
use tonic::transport::Channel;

const EXAMPLE: &str = include_str!("../../../examples/managed-namespaces.yaml");

fn example_set() -> ManagedClusterSet {
    match parse_documents(EXAMPLE).remove(0) {
        Ok(Document::ClusterSet(s)) => s,
        other => panic!("the example should be a ManagedClusterSet: {other:?}"),
    }
}

/// `(set, name, NamespaceAvailable status)` of a cluster's `status.managedNamespaces`.
fn managed(c: &ManagedCluster) -> Vec<(String, String, String)> {
    c.status
        .as_ref()
        .map(|s| {
            s.managed_namespaces
                .iter()
                .map(|n| {
                    (
                        n.cluster_set.clone(),
                        n.name.clone(),
                        condition_status(&n.conditions, COND_NAMESPACE_AVAILABLE)
                            .unwrap_or("")
                            .to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn entries(list: &[(&str, &str, &str)]) -> Vec<(String, String, String)> {
    list.iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect()
}

async fn wait_managed(
    api: &mut ClusterServiceClient<Channel>,
    name: &str,
    want: &[(&str, &str, &str)],
) -> ManagedCluster {
    let want = entries(want);
    wait_cluster(api, name, &format!("managing {want:?}"), |c| {
        managed(c) == want
    })
    .await
}

fn namespace_id(name: &str) -> ManifestId {
    ManifestId {
        group: String::new(),
        version: "v1".into(),
        kind: "Namespace".into(),
        namespace: String::new(),
        name: name.into(),
    }
}

/// The value of the hub's label on a namespace of a simulated cluster (None: no namespace).
async fn hub_label(sim: &SimBackend, label: &str, ns: &str) -> Option<String> {
    let object = sim.get(&namespace_id(ns)).await.unwrap()?;
    Some(
        object["metadata"]["labels"][label]
            .as_str()
            .unwrap_or("<missing>")
            .to_string(),
    )
}

async fn wait_label(sim: &SimBackend, label: &str, ns: &str, want: &str) {
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        let got = hub_label(sim, label, ns).await;
        if got.as_deref() == Some(want) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "namespace {ns}: label {label} is {got:?}, want {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn move_to_set(api: &mut ClusterServiceClient<Channel>, cluster: &str, set: &str) {
    api.label_cluster(LabelClusterRequest {
        name: cluster.into(),
        set: [(CLUSTERSET_LABEL.to_string(), set.to_string())].into(),
        remove: vec![],
    })
    .await
    .expect("label cluster");
}

#[tokio::test]
async fn set_namespaces_follow_membership_and_survive_a_hub_restart() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut api = clusters_client(&hub).await;
    let mut sets = sets_client(&hub).await;
    let agents = accepted_fleet(&mut api, &nats.url(), &["edge-1", "edge-2"]).await;
    let (sim1, sim2) = (agents[0].backend.clone(), agents[1].backend.clone());
    let label = flotilla_api::clusterset::hub_namespace_label(
        &flotilla_agent::namespaces::hub_hash(&nats.url()),
    );

    // The OCM YAML, applied as written; both clusters join the set by its exclusive label.
    sets.apply_cluster_set(example_set())
        .await
        .expect("apply the example set");
    move_to_set(&mut api, "edge-1", "app-team").await;
    move_to_set(&mut api, "edge-2", "app-team").await;
    let both = [
        ("app-team", "app-backend", "True"),
        ("app-team", "app-frontend", "True"),
    ];
    for (name, sim) in [("edge-1", &sim1), ("edge-2", &sim2)] {
        let c = wait_managed(&mut api, name, &both).await;
        let first = &c.status.as_ref().unwrap().managed_namespaces[0];
        let cond = find_condition(&first.conditions, COND_NAMESPACE_AVAILABLE).unwrap();
        assert_eq!(cond.reason, REASON_NAMESPACE_APPLIED);
        for ns in ["app-frontend", "app-backend"] {
            wait_label(sim, &label, ns, "true").await;
        }
    }

    // edge-2 leaves the set: its status loses the namespaces; the spoke keeps them, unmanaged
    // (OCM never deletes a managed namespace).
    move_to_set(&mut api, "edge-2", "default").await;
    wait_managed(&mut api, "edge-2", &[]).await;
    for ns in ["app-frontend", "app-backend"] {
        wait_label(&sim2, &label, ns, "false").await;
    }

    // The set drops app-backend: gone from edge-1's status, unmanaged on its spoke.
    let mut smaller = example_set();
    smaller.spec.as_mut().unwrap().managed_namespaces = vec![ManagedNamespaceConfig {
        name: "app-frontend".into(),
    }];
    sets.apply_cluster_set(smaller)
        .await
        .expect("drop a namespace");
    wait_managed(&mut api, "edge-1", &[("app-team", "app-frontend", "True")]).await;
    wait_label(&sim1, &label, "app-backend", "false").await;
    wait_label(&sim1, &label, "app-frontend", "true").await;

    // Hub down: the agent keeps managing on its own — a managed namespace deleted on the spoke
    // comes back.
    hub.stop().await;
    assert!(sim1.delete(&namespace_id("app-frontend")).await.unwrap());
    wait_label(&sim1, &label, "app-frontend", "true").await;

    // Hub back: the stored status is consistent and membership changes work again.
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut api = clusters_client(&hub).await;
    wait_managed(&mut api, "edge-1", &[("app-team", "app-frontend", "True")]).await;
    wait_managed(&mut api, "edge-2", &[]).await;
    move_to_set(&mut api, "edge-2", "app-team").await;
    wait_managed(&mut api, "edge-2", &[("app-team", "app-frontend", "True")]).await;
    wait_label(&sim2, &label, "app-frontend", "true").await;
    assert_eq!(
        hub_label(&sim2, &label, "app-backend").await.as_deref(),
        Some("false"),
        "a namespace the set no longer lists stays unmanaged"
    );

    for a in agents {
        a.stop().await;
    }
    hub.stop().await;
}

#[tokio::test]
async fn global_and_label_selector_sets_add_their_namespaces_and_bad_names_are_refused() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut api = clusters_client(&hub).await;
    let mut sets = sets_client(&hub).await;
    let mut prod = agent_config("prod-1", &nats.url());
    prod.labels.insert("env".into(), "prod".into());
    let agent = accepted_agent(&mut api, prod).await;

    let text = "\
apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSet
metadata:
  name: prod
spec:
  clusterSelector:
    selectorType: LabelSelector
    labelSelector:
      matchLabels:
        env: prod
  managedNamespaces:
  - name: monitoring
";
    let Ok(Document::ClusterSet(prod_set)) = parse_documents(text).remove(0) else {
        panic!("the prod set should parse")
    };
    sets.apply_cluster_set(prod_set).await.expect("apply prod");
    // The built-in global set (every cluster) manages a namespace too.
    let global = sets
        .get_cluster_set(flotilla_api::v1::GetClusterSetRequest {
            name: "global".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .set
        .unwrap();
    let mut global = ManagedClusterSet {
        status: None,
        ..global
    };
    global.spec.as_mut().unwrap().managed_namespaces = vec![ManagedNamespaceConfig {
        name: "fleet-tools".into(),
    }];
    sets.apply_cluster_set(global).await.expect("apply global");
    wait_managed(
        &mut api,
        "prod-1",
        &[
            ("global", "fleet-tools", "True"),
            ("prod", "monitoring", "True"),
        ],
    )
    .await;

    // Deleting a set takes its namespaces out of its members' status.
    sets.delete_cluster_set(flotilla_api::v1::GetClusterSetRequest {
        name: "prod".into(),
    })
    .await
    .expect("delete prod");
    wait_managed(&mut api, "prod-1", &[("global", "fleet-tools", "True")]).await;

    // Names as OCM's CRD checks them, every bad entry named by index.
    let mut bad = example_set();
    bad.spec.as_mut().unwrap().managed_namespaces = ["ok", "Not_OK", "ok"]
        .into_iter()
        .map(|n| ManagedNamespaceConfig { name: n.into() })
        .collect();
    let err = sets.apply_cluster_set(bad).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(
        err.message().contains("spec.managedNamespaces[1].name")
            && err.message().contains("spec.managedNamespaces[2].name"),
        "{}",
        err.message()
    );

    // A cluster deleted on the hub: its agent unmanages every namespace, deleting none.
    let label = flotilla_api::clusterset::hub_namespace_label(
        &flotilla_agent::namespaces::hub_hash(&nats.url()),
    );
    wait_label(&agent.backend, &label, "fleet-tools", "true").await;
    api.delete_cluster(flotilla_api::v1::DeleteClusterRequest {
        name: "prod-1".into(),
    })
    .await
    .expect("delete the cluster");
    wait_label(&agent.backend, &label, "fleet-tools", "false").await;
    wait_label(&agent.backend, &label, "monitoring", "false").await;

    agent.stop().await;
    hub.stop().await;
}

#[tokio::test]
async fn a_cluster_that_joins_a_set_while_its_link_is_down_gets_the_namespaces_on_reconnect() {
    let nats = NatsServer::start();
    let link = LinkProxy::start(nats.port()).await;
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut api = clusters_client(&hub).await;
    let mut sets = sets_client(&hub).await;
    let agent = accepted_cluster(&mut api, &link.url(), "edge-1").await;
    let label = flotilla_api::clusterset::hub_namespace_label(
        &flotilla_agent::namespaces::hub_hash(&link.url()),
    );
    sets.apply_cluster_set(example_set())
        .await
        .expect("apply the example set");

    // The hub's push is lost: the spoke is unreachable when the cluster joins the set.
    link.cut();
    move_to_set(&mut api, "edge-1", "app-team").await;
    let c = wait_cluster(&mut api, "edge-1", "listing the set's namespaces", |c| {
        managed(c).len() == 2
    })
    .await;
    assert!(
        managed(&c)
            .iter()
            .all(|(_, _, available)| available.is_empty()),
        "no condition before the agent applied them: {:?}",
        managed(&c)
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        hub_label(&agent.backend, &label, "app-frontend").await,
        None
    );

    // Back online: the agent registers again and gets the full list.
    link.restore();
    wait_managed(
        &mut api,
        "edge-1",
        &[
            ("app-team", "app-backend", "True"),
            ("app-team", "app-frontend", "True"),
        ],
    )
    .await;
    wait_label(&agent.backend, &label, "app-frontend", "true").await;
    wait_label(&agent.backend, &label, "app-backend", "true").await;

    agent.stop().await;
    hub.stop().await;
}

#[tokio::test]
async fn an_agent_that_missed_the_list_is_sent_it_again_at_its_next_lease_renewal() {
    use flotilla_api::v1::{ClusterSetManagedNamespaceConfig, ClusterStatusReport};
    use flotilla_bus::envelope::{Event, types};
    let nats = NatsServer::start();
    let mut config = hub_config(&nats.url());
    // Renewals come only from this test.
    config.cluster.default_lease_duration_seconds = 60;
    let hub = start_hub(config).await;
    let mut api = clusters_client(&hub).await;
    let mut sets = sets_client(&hub).await;
    let mut agent = RawAgent::register(&nats, "raw-1").await;
    accept(&mut api, "raw-1").await;
    agent.renew("raw-1").await;
    sets.apply_cluster_set(example_set())
        .await
        .expect("apply the example set");
    move_to_set(&mut api, "raw-1", "app-team").await;

    // The hub pushes the list once; this agent ignores it (as if the message were lost) ...
    let want = vec![
        ("app-team".to_string(), "app-backend".to_string()),
        ("app-team".to_string(), "app-frontend".to_string()),
    ];
    assert_eq!(agent.pushed_list(2).await, want);
    // ... so its next lease renewal, still without a report of the namespaces, brings it again.
    agent.renew("raw-1").await;
    assert_eq!(agent.pushed_list(2).await, want);

    // The agent reports them applied: the conditions reach the cluster's status.
    let reported = want
        .iter()
        .map(|(set, name)| {
            let mut conditions = Vec::new();
            flotilla_api::meta::set_condition(
                &mut conditions,
                COND_NAMESPACE_AVAILABLE,
                "True",
                REASON_NAMESPACE_APPLIED,
                "Namespace successfully applied and managed",
            );
            ClusterSetManagedNamespaceConfig {
                name: name.clone(),
                cluster_set: set.clone(),
                conditions,
            }
        })
        .collect();
    let report = ClusterStatusReport {
        cluster_name: "raw-1".into(),
        healthy: true,
        managed_namespaces: reported,
        ..Default::default()
    };
    let ev = Event::new(types::cluster_status(), "raw", "raw-1", &report);
    agent
        .publish("raw-1", flotilla_bus::subjects::KIND_CLUSTER, ev)
        .await;
    wait_managed(
        &mut api,
        "raw-1",
        &[
            ("app-team", "app-backend", "True"),
            ("app-team", "app-frontend", "True"),
        ],
    )
    .await;
    hub.stop().await;
}
