//! ClusterImportPolicies end to end on a real nats-server: an in-process hub and real agents on
//! simulated clusters register themselves; a policy accepts, labels and puts in a set the
//! matching ones with no admin step, leaves the others pending, adopts a hand-accepted cluster
//! (access fields only), follows template edits on its own clusters only, refuses a second
//! policy for its source naming itself, and orphans its clusters when deleted.

mod common;

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
    let status = eventually(SOON, "the policy's counts", || {
        let mut p = policies.clone();
        async move {
            let got = p
                .get_import_policy(GetImportPolicyRequest {
                    name: "edge".into(),
                })
                .await
                .ok()?
                .into_inner();
            let s = got.status?;
            (s.imported == 8 && s.adopted == 1 && s.observed_generation == 2).then_some(s)
        }
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
