//! ClusterImportPolicies end to end on a real nats-server: an in-process hub and real agents on
//! simulated clusters register themselves; a policy accepts, labels and puts in a set the
//! matching ones with no admin step, leaves the others pending, adopts a hand-accepted cluster
//! (access fields only), follows template edits on its own clusters only, refuses a second
//! policy for its source naming itself, and orphans its clusters when deleted. An object source
//! lists Cluster API `Cluster`s on a "mgmt" agent's simulated cluster (each with a ConfigMap it
//! references): the clusters are created
//! ahead of their agents (which then register and are accepted), deleted with their source, a
//! cluster made before the policy is kept, and an unreachable mgmt changes nothing and is named;
//! a mgmt listing more objects than the policy may create makes no more clusters than its rate
//! and cap allow.

use crate::common;

use common::*;
use flotilla_api::meta::CLUSTERSET_LABEL;
use flotilla_api::v1::import_policy_service_client::ImportPolicyServiceClient;
use flotilla_api::v1::{ClusterImportPolicy, GetImportPolicyRequest, ManagedCluster};
use flotilla_testkit::{NatsServer, eventually};
use std::collections::HashMap;
use tonic::Code;

/// A registration policy parsed from YAML as `flotilla apply` does.
fn policy(name: &str, template: &str) -> ClusterImportPolicy {
    let yaml = format!(
        "apiVersion: cluster.flotilla.io/v1alpha1\nkind: ClusterImportPolicy\n\
         metadata: {{name: {name}}}\nspec:\n  source:\n    group: registration.flotilla.io\n\
         \x20   resource: registrations\n    selector: 'source.metadata.labels[\"site\"] == \"edge\"'\n\
         \x20 template: '{template}'\n"
    );
    match flotilla_api::ocm::parse_documents(&yaml).remove(0) {
        Ok(flotilla_api::ocm::Document::ImportPolicy(p)) => p,
        other => panic!("not a ClusterImportPolicy: {other:?}"),
    }
}

fn labels(c: &ManagedCluster) -> HashMap<String, String> {
    c.metadata
        .as_ref()
        .map(|m| m.labels.clone())
        .unwrap_or_default()
}

fn agent(name: &str, site: &str, url: &str) -> flotilla_agent::AgentConfig {
    let mut c = agent_config(name, url);
    c.labels.insert("site".into(), site.into());
    c
}

async fn every(
    api: &mut flotilla_api::v1::cluster_service_client::ClusterServiceClient<
        tonic::transport::Channel,
    >,
    names: &[String],
    what: &str,
    pred: impl Fn(&ManagedCluster) -> bool + Copy,
) {
    for n in names {
        wait_cluster(api, n, what, pred).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_policy_accepts_labels_and_sets_matching_registrations_only() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut api = clusters_client(&hub).await;
    let mut policies = ImportPolicyServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .unwrap();
    // A cluster an admin accepted before any policy: adopted, never relabelled.
    let _hand = accepted_agent(&mut api, agent("hand", "edge", &nats.url())).await;
    let edge: Vec<String> = (0..8).map(|i| format!("edge-{i}")).collect();
    let core: Vec<String> = (0..4).map(|i| format!("core-{i}")).collect();
    let _agents: Vec<TestAgent> = edge
        .iter()
        .map(|n| start_agent(agent(n, "edge", &nats.url())))
        .chain(
            core.iter()
                .map(|n| start_agent(agent(n, "core", &nats.url()))),
        )
        .collect();
    every(&mut api, &edge, "registered", |_| true).await;
    every(&mut api, &core, "registered", |_| true).await;

    let bad = policy("bad", r#"{"labelz": {}}"#);
    let mut broken = bad.clone();
    broken.spec.as_mut().unwrap().creation_condition = "nope(".into();
    let e = policies.apply_import_policy(broken).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    assert!(
        e.message().contains("spec.creationCondition"),
        "{}",
        e.message()
    );

    policies
        .apply_import_policy(policy(
            "edge",
            r#"{"labels": {"tier": "edge"}, "clusterSet": "edge"}"#,
        ))
        .await
        .expect("apply");
    every(&mut api, &edge, "accepted, labelled and in set edge", |c| {
        let l = labels(c);
        accepted(c)
            && l.get("tier").map(String::as_str) == Some("edge")
            && l.get(CLUSTERSET_LABEL).map(String::as_str) == Some("edge")
    })
    .await;
    for n in &core {
        let c = get(&mut api, n).await.unwrap();
        assert!(!accepted(&c), "{n} does not match and stays pending");
    }
    // One write, and an honest message naming the policy.
    let c = get(&mut api, &edge[0]).await.unwrap();
    let why = c
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|x| x.r#type == "HubAcceptedManagedCluster")
        .map(|x| (x.reason.clone(), x.message.clone()))
        .unwrap();
    assert_eq!(
        why,
        (
            "ClusterImportPolicyAccepted".to_string(),
            "Accepted by ClusterImportPolicy edge".to_string()
        )
    );
    let hand = get(&mut api, "hand").await.unwrap();
    assert!(
        !labels(&hand).contains_key("tier"),
        "adopted: access fields only"
    );

    let e = policies
        .apply_import_policy(policy("second", r#"{"labels": {}}"#))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(
        e.message().contains("\"edge\""),
        "names the owner: {}",
        e.message()
    );

    // A template edit relabels the policy's own clusters only, and removes only its labels.
    policies
        .apply_import_policy(policy(
            "edge",
            r#"{"labels": {"zone": "z1"}, "clusterSet": "edge2"}"#,
        ))
        .await
        .expect("re-apply");
    every(&mut api, &edge, "relabelled", |c| {
        let l = labels(c);
        l.get("zone").map(String::as_str) == Some("z1")
            && !l.contains_key("tier")
            && l.get(CLUSTERSET_LABEL).map(String::as_str) == Some("edge2")
            && l.get("site").map(String::as_str) == Some("edge")
    })
    .await;
    let hand = get(&mut api, "hand").await.unwrap();
    assert!(
        !labels(&hand).contains_key("zone"),
        "the adopted cluster is not relabelled"
    );
    let status = policy_status(&policies, "edge", "the policy's counts", |s| {
        s.imported == 8 && s.adopted == 1 && s.observed_generation == 2
    })
    .await;
    assert!(status.errors.is_empty(), "{status:?}");

    // Deleting the policy orphans its clusters.
    policies
        .delete_import_policy(GetImportPolicyRequest {
            name: "edge".into(),
        })
        .await
        .expect("delete");
    let e = policies
        .get_import_policy(GetImportPolicyRequest {
            name: "edge".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    let c = get(&mut api, &edge[0]).await.unwrap();
    assert!(
        accepted(&c) && labels(&c).contains_key("zone"),
        "its clusters stay"
    );
    hub.stop().await;
}

/// A Cluster API `Cluster` (or another group's `Cluster`) on the mgmt cluster; `ready`:
/// not paused (the simulated cluster keeps no status of a kind it does not know).
fn capi_cluster(group: &str, name: &str, ready: bool) -> serde_json::Value {
    serde_json::json!({"apiVersion": format!("{group}/v1beta1"), "kind": "Cluster",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"paused": !ready}})
}

async fn put(mgmt: &TestAgent, o: &serde_json::Value) {
    use flotilla_agent::backend::{Backend, Strategy};
    let id = flotilla_api::work::manifest_id(o).unwrap();
    mgmt.backend.apply(&id, o, &Strategy::Update).await.unwrap();
}

async fn remove(mgmt: &TestAgent, o: &serde_json::Value) {
    use flotilla_agent::backend::Backend;
    let id = flotilla_api::work::manifest_id(o).unwrap();
    assert!(mgmt.backend.delete(&id).await.unwrap());
}

fn capi_policy() -> ClusterImportPolicy {
    let yaml = r#"
apiVersion: cluster.flotilla.io/v1alpha1
kind: ClusterImportPolicy
metadata: {name: capi}
spec:
  source:
    group: cluster.x-k8s.io
    resource: clusters
    versions: [v1beta1]
    clusters: [mgmt]
  references:
  - {resource: configmaps, namespace: source.metadata.namespace, name: 'source.metadata.name + "-info"', key: info}
  nameTemplate: source.metadata.name
  creationCondition: 'source.spec.paused == false && references.info.data.ready == "yes"'
  template: '{"labels": {"provider": "capi", "capi-namespace": source.metadata.namespace, "region": references.info.data.region}, "taints": [{"key": "capi.io/imported", "value": "true", "effect": "PreferNoSelect"}], "leaseDurationSeconds": 2}'
"#;
    match flotilla_api::ocm::parse_documents(yaml).remove(0) {
        Ok(flotilla_api::ocm::Document::ImportPolicy(p)) => p,
        other => panic!("not a ClusterImportPolicy: {other:?}"),
    }
}

/// Policy `name`'s status once `want` holds.
async fn policy_status(
    policies: &ImportPolicyServiceClient<tonic::transport::Channel>,
    name: &str,
    what: &str,
    want: impl Fn(&flotilla_api::v1::ClusterImportPolicyStatus) -> bool + Copy,
) -> flotilla_api::v1::ClusterImportPolicyStatus {
    eventually(SOON, what, || {
        let mut p = policies.clone();
        async move {
            let s = p
                .get_import_policy(GetImportPolicyRequest { name: name.into() })
                .await
                .ok()?
                .into_inner()
                .status?;
            want(&s).then_some(s)
        }
    })
    .await
}

fn origin(c: &ManagedCluster) -> i32 {
    c.hub.as_ref().map_or(0, |h| h.origin)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn object_source_creates_clusters_and_deletes_them_with_their_source() {
    use flotilla_api::v1::ClusterOrigin;
    let nats = NatsServer::start();
    let mut config = hub_config(&nats.url());
    config.families.import_policies.poll = std::time::Duration::from_millis(300);
    let hub = start_hub(config).await;
    let mut api = clusters_client(&hub).await;
    let mut policies = ImportPolicyServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .unwrap();
    let mgmt = accepted_agent(&mut api, agent_config("mgmt", &nats.url())).await;
    // Made by the admin before any policy: adopted, kept when its source goes.
    api.apply_cluster(ManagedCluster {
        metadata: Some(flotilla_api::v1::ObjectMeta {
            name: "capi-kept".into(),
            ..Default::default()
        }),
        ..Default::default()
    })
    .await
    .expect("pre-create capi-kept");
    let one = capi_cluster("cluster.x-k8s.io", "capi-1", true);
    let two = capi_cluster("cluster.x-k8s.io", "capi-2", false);
    let kept = capi_cluster("cluster.x-k8s.io", "capi-kept", true);
    // Another group's kind of the same name is never a source.
    let other = capi_cluster("example.com", "other-1", true);
    for o in [&one, &two, &kept, &other] {
        put(&mgmt, o).await;
    }
    // Each source's reference: a core-group ConfigMap next to it.
    for n in ["capi-1", "capi-2", "capi-kept"] {
        let info = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("{n}-info"), "namespace": "default"},
            "data": {"region": "eu-west", "ready": "yes"}});
        put(&mgmt, &info).await;
    }
    let mut watch = policies
        .watch_import_policies(flotilla_api::v1::ListImportPoliciesRequest {})
        .await
        .expect("watch")
        .into_inner();
    policies
        .apply_import_policy(capi_policy())
        .await
        .expect("apply the CAPI policy");
    // The watch sees the policy, then its status.
    let mut seen_status = false;
    while !seen_status {
        let ev = tokio::time::timeout(SOON, watch.message())
            .await
            .expect("a watch event in time")
            .expect("the stream")
            .expect("not closed");
        let p = ev.policy.unwrap();
        assert_eq!(p.metadata.as_ref().unwrap().name, "capi");
        seen_status = p.status.is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.r#type == "SourcesListed" && c.status == "True")
        });
    }
    let c = wait_cluster(&mut api, "capi-1", "created, labelled and accepted", |c| {
        accepted(c) && labels(c).get("provider").map(String::as_str) == Some("capi")
    })
    .await;
    assert_eq!(origin(&c), ClusterOrigin::Import as i32);
    assert_eq!(labels(&c)["capi-namespace"], "default");
    assert_eq!(labels(&c)["region"], "eu-west", "read from its reference");
    assert!(
        taints(&c).iter().any(|t| t.contains("capi.io/imported")),
        "{:?}",
        taints(&c)
    );
    assert_eq!(c.spec.as_ref().unwrap().lease_duration_seconds, 2);
    let hub_accepted = c
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|x| x.r#type == "HubAcceptedManagedCluster")
        .unwrap()
        .message
        .clone();
    assert!(
        hub_accepted.contains("ClusterImportPolicy capi"),
        "{hub_accepted}"
    );
    let kept_c = wait_cluster(&mut api, "capi-kept", "adopted (accepted)", accepted).await;
    assert!(
        !labels(&kept_c).contains_key("provider"),
        "adopted: access fields only"
    );
    assert!(
        get(&mut api, "capi-2").await.is_none(),
        "paused: not created yet"
    );
    assert!(
        get(&mut api, "other-1").await.is_none(),
        "another group's Cluster"
    );

    // Unpaused later: created then.
    put(&mgmt, &capi_cluster("cluster.x-k8s.io", "capi-2", true)).await;
    wait_cluster(&mut api, "capi-2", "created", accepted).await;

    // The created cluster's agent registers and is accepted with no admin step.
    let _capi1 = start_agent(agent_config("capi-1", &nats.url()));
    wait_cluster(
        &mut api,
        "capi-1",
        "Available (with the policy's taint)",
        |c| available(c).as_deref() == Some("True"),
    )
    .await;

    // The sources go: the created cluster after two complete lists without it, the adopted
    // one stays.
    remove(&mgmt, &one).await;
    remove(&mgmt, &kept).await;
    eventually(SOON, "capi-1 deleted with its source", || {
        let mut api = api.clone();
        async move { get(&mut api, "capi-1").await.is_none().then_some(()) }
    })
    .await;
    assert!(
        get(&mut api, "capi-kept").await.is_some(),
        "made before the policy: kept"
    );
    let status = policy_status(&policies, "capi", "the policy's counts", |s| {
        s.imported == 1 && s.adopted == 0 && s.sources == 1
    })
    .await;
    assert!(status.errors.is_empty(), "{status:?}");

    // mgmt unreachable: named in SourcesListed, and nothing is deleted.
    mgmt.stop().await;
    let status = policy_status(&policies, "capi", "SourcesListed=False naming mgmt", |s| {
        s.conditions.iter().any(|c| {
            c.r#type == "SourcesListed" && c.status == "False" && c.message.contains("mgmt")
        })
    })
    .await;
    assert_eq!(status.imported, 1, "{status:?}");
    assert!(
        get(&mut api, "capi-2").await.is_some(),
        "a failed list deletes nothing"
    );
    hub.stop().await;
}

/// A source spoke decides how many clusters its policy creates: at most `--import-create-rate`
/// a second, and never past `--import-max-clusters` live ones, whatever it lists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_spoke_creates_no_more_clusters_than_the_policy_may() {
    let nats = NatsServer::start();
    let mut config = hub_config(&nats.url());
    config.families.import_policies.poll = std::time::Duration::from_millis(300);
    config.families.import_policies.max_created = 3;
    config.families.import_policies.create_rate = 1.0;
    config.families.import_policies.create_burst = 1.0;
    let hub = start_hub(config).await;
    let mut api = clusters_client(&hub).await;
    let mut policies = ImportPolicyServiceClient::connect(format!("http://{}", hub.grpc_addr))
        .await
        .unwrap();
    let mgmt = accepted_agent(&mut api, agent_config("mgmt", &nats.url())).await;
    let names: Vec<String> = (0..6).map(|i| format!("flood-{i}")).collect();
    for n in &names {
        put(&mgmt, &capi_cluster("cluster.x-k8s.io", n, true)).await;
    }
    let mut p = capi_policy();
    let spec = p.spec.as_mut().unwrap();
    spec.references.clear();
    spec.creation_condition = "source.spec.paused == false".into();
    spec.template = r#"{"labels": {"provider": "capi"}}"#.into();
    policies.apply_import_policy(p).await.expect("apply");
    // One a second: the others are shown waiting, not as errors.
    let waiting = policy_status(
        &policies,
        "capi",
        "creations shown waiting for the rate",
        |s| {
            s.conditions
                .iter()
                .any(|c| c.r#type == "Ready" && c.message.contains("wait to be created"))
        },
    )
    .await;
    assert!(waiting.imported < 3, "{waiting:?}");
    // The cap: three, then an error naming the flag.
    let capped = policy_status(&policies, "capi", "the cap named in the status", |s| {
        s.errors.iter().any(|e| e.contains("--import-max-clusters"))
    })
    .await;
    assert_eq!(capped.imported, 3, "{capped:?}");
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let mut live = 0;
    for n in &names {
        live += usize::from(get(&mut api, n).await.is_some());
    }
    assert_eq!(live, 3, "no more than the cap, however many polls");
    hub.stop().await;
}
