//! Hub templates end to end: a real nats-server, the hub, simulated agents. policy-collection's
//! sriovnetwork-templatized policy verbatim: each cluster's values from a hub ConfigMap (the
//! one its companion policy writes, applied to the hub), OCM's template error while the
//! ConfigMap is missing, a changed value re-enforced on exactly the cluster it concerns;
//! `fromSecret` sealed to the cluster's agent with no plaintext on the wire or in KV, labels
//! followed; a hostile template reported, the hub and agents serving on.

use crate::common;

use common::policy::*;
use common::*;
use flotilla_agent::backend::sim::SimBackend;
use flotilla_agent::backend::{Backend, Strategy};
use flotilla_api::v1::{GetPolicyRequest, HubConfigMap, LabelClusterRequest, ObjectMeta};
use flotilla_api::work::ManifestId;
use flotilla_hub::Hub;
use flotilla_testkit::NatsServer;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

mod render;

const SRIOV_TEMPLATIZED: &str =
    include_str!("../../../api/src/ocm/policy/testdata/policy-sriovnetwork-templatized.yaml");

/// A Placement `all` over the default set and a binding of `policy` to it, enforcing.
fn enforced_on_all(policy: &str) -> String {
    format!(
        r#"
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {{name: all, namespace: default}}
spec:
  clusterSets: [default]
---
apiVersion: policy.open-cluster-management.io/v1
kind: PlacementBinding
metadata: {{name: binding-{policy}, namespace: default}}
placementRef: {{name: all, kind: Placement, apiGroup: cluster.open-cluster-management.io}}
subjects:
  - {{name: {policy}, kind: Policy, apiGroup: policy.open-cluster-management.io}}
bindingOverrides:
  remediationAction: enforce
"#
    )
}

/// The SriovNetwork CRD, so the simulated clusters serve the fixture's kind.
fn sriov_crd() -> serde_json::Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "sriovnetworks.sriovnetwork.openshift.io"},
        "spec": {"group": "sriovnetwork.openshift.io", "scope": "Namespaced",
            "names": {"kind": "SriovNetwork", "plural": "sriovnetworks",
                "singular": "sriovnetwork", "listKind": "SriovNetworkList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]}})
}

fn id(group: &str, version: &str, kind: &str, ns: &str, name: &str) -> ManifestId {
    ManifestId {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        namespace: ns.into(),
        name: name.into(),
    }
}

/// A simulated cluster with the namespaces `namespaces` and the SriovNetwork CRD.
async fn sim(namespaces: &[&str]) -> Arc<SimBackend> {
    let sim = Arc::new(SimBackend::new(8, 32, "v1.30.2"));
    for ns in namespaces {
        let o = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        sim.apply(&id("", "v1", "Namespace", "", ns), &o, &Strategy::Update)
            .await
            .unwrap();
    }
    let crd = sriov_crd();
    let crd_id = id(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "",
        "sriovnetworks.sriovnetwork.openshift.io",
    );
    sim.apply(&crd_id, &crd, &Strategy::Update).await.unwrap();
    sim
}

/// The hub ConfigMap `site-config`: the data the fixture's companion policy writes.
fn site_config(data: &serde_json::Value) -> HubConfigMap {
    HubConfigMap {
        metadata: Some(ObjectMeta {
            namespace: "default".into(),
            name: "site-config".into(),
            ..Default::default()
        }),
        data: serde_json::from_value(data.clone()).unwrap(),
        immutable: false,
    }
}

/// What `cluster` last reported for the policy's first template.
async fn message_of(hub: &Hub, policy: &str, cluster: &str) -> String {
    let details = api(hub)
        .await
        .get_policy_details(GetPolicyRequest {
            namespace: "default".into(),
            name: policy.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    details
        .clusters
        .iter()
        .find(|c| c.cluster_name == cluster)
        .and_then(|c| c.details.first())
        .and_then(|d| d.history.first())
        .map(|h| h.message.clone())
        .unwrap_or_default()
}

/// Waits until `get` gives something `pred` accepts.
async fn eventually<T: std::fmt::Debug, F: std::future::Future<Output = T>>(
    what: &str,
    get: impl Fn() -> F,
    pred: impl Fn(&T) -> bool,
) -> T {
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        let v = get().await;
        if pred(&v) {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never {what}: {v:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn hub_templates_give_each_cluster_its_values_from_a_hub_config_map_and_follow_it() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut clusters = clusters_client(&hub).await;
    let mut agents = Vec::new();
    for name in ["cluster0001", "cluster0002"] {
        let backend = sim(&["openshift-sriov-network-operator"]).await;
        agents
            .push(accepted_agent_on(&mut clusters, agent_config(name, &nats.url()), backend).await);
    }
    bind_default_set(&hub).await;
    let mut policies = api(&hub).await;
    // policy-collection's file verbatim (its second policy writes the ConfigMap on the hub
    // cluster in OCM; here the ConfigMap is applied to the hub), the first policy enforced.
    apply(&hub, SRIOV_TEMPLATIZED).await;
    apply(&hub, &enforced_on_all("policy-site-nw-templatized")).await;
    // No ConfigMap yet: OCM's template error on each cluster, nothing created.
    let name = "policy-site-nw-templatized";
    for cluster in ["cluster0001", "cluster0002"] {
        let m = eventually(
            "reported the template error",
            || message_of(&hub, name, cluster),
            |m| m.starts_with("NonCompliant; template-error; "),
        )
        .await;
        assert!(
            m.contains("failed to resolve the template {")
                && m.contains(
                    "error calling fromConfigMap: failed getting the ConfigMap \
                     site-config from : configmaps \"site-config\" not found"
                ),
            "{m}"
        );
    }
    let sriov = id(
        "sriovnetwork.openshift.io",
        "v1",
        "SriovNetwork",
        "openshift-sriov-network-operator",
        "sriov-nw",
    );
    assert!(agents[0].backend.get(&sriov).await.unwrap().is_none());

    // The ConfigMap applied: each cluster its own values, typed by toInt.
    let mut data = json!({"cluster0001-resourceName": "du_fh", "cluster0001-vlan": "3620",
        "cluster0002-resourceName": "du_mh", "cluster0002-vlan": "3621"});
    policies
        .apply_hub_config_map(site_config(&data))
        .await
        .unwrap();
    wait_policy(&mut policies, name, "compliant on both", |p| {
        clusters_in(p)
            == [
                ("cluster0001".to_string(), "Compliant".to_string()),
                ("cluster0002".to_string(), "Compliant".to_string()),
            ]
    })
    .await;
    for (agent, (resource, vlan)) in agents.iter().zip([("du_fh", 3620), ("du_mh", 3621)]) {
        let o = agent.backend.get(&sriov).await.unwrap().expect("created");
        assert_eq!(o["spec"]["resourceName"], resource);
        assert_eq!(o["spec"]["vlan"], vlan);
    }
    let generation_of = |p: &flotilla_api::v1::PolicyDetails, c: &str| {
        p.clusters
            .iter()
            .find(|r| r.cluster_name == c)
            .map(|r| r.observed_generation)
    };
    let details = || async {
        api(&hub)
            .await
            .get_policy_details(GetPolicyRequest {
                namespace: "default".into(),
                name: name.into(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
    };
    let before = details().await;

    // One cluster's value changed: re-enforced there within seconds; the other cluster's copy
    // did not change, so it got no new generation.
    data["cluster0002-vlan"] = json!("3700");
    let changed = tokio::time::Instant::now();
    policies
        .apply_hub_config_map(site_config(&data))
        .await
        .unwrap();
    eventually(
        "re-enforced cluster0002's vlan",
        || async { agents[1].backend.get(&sriov).await.unwrap().unwrap()["spec"]["vlan"].clone() },
        |v| *v == json!(3700),
    )
    .await;
    assert!(
        changed.elapsed() < Duration::from_secs(5),
        "{:?}",
        changed.elapsed()
    );
    let after = details().await;
    assert_eq!(
        generation_of(&after, "cluster0001"),
        generation_of(&before, "cluster0001")
    );
    assert_eq!(
        agents[0].backend.get(&sriov).await.unwrap().unwrap()["spec"]["vlan"],
        json!(3620)
    );
    drop(agents);
}

const SECRET_POLICY: &str = r#"
apiVersion: policy.open-cluster-management.io/v1
kind: Policy
metadata:
  name: copy-hub-secret
spec:
  remediationAction: enforce
  disabled: false
  policy-templates:
    - objectDefinition:
        apiVersion: policy.open-cluster-management.io/v1
        kind: ConfigurationPolicy
        metadata:
          name: copy-hub-secret
        spec:
          remediationAction: enforce
          severity: low
          object-templates:
            - complianceType: musthave
              objectDefinition:
                apiVersion: v1
                data:
                  city: '{{hub fromSecret "" "hub-secret" "city" hub}}'
                  state: '{{hub fromSecret "" "hub-secret" "state" hub}}'
                kind: Secret
                metadata:
                  name: copied-secret
                  namespace: target
            - complianceType: musthave
              objectDefinition:
                apiVersion: v1
                kind: ConfigMap
                metadata:
                  name: site
                  namespace: target
                data:
                  site: '{{hub index .ManagedClusterLabels "site" hub}}'
                  token: '{{hub printf "%s-%s" "Kr4ken" "token-91" | protect hub}}'
"#;

/// Every message published on the server from now on (core NATS and JetStream's KV puts).
async fn capture(nats: &NatsServer) -> Arc<std::sync::Mutex<Vec<Vec<u8>>>> {
    use futures::StreamExt;
    let client = async_nats::connect(nats.url()).await.unwrap();
    let mut all = client.subscribe(">").await.unwrap();
    client.flush().await.unwrap();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = seen.clone();
    tokio::spawn(async move {
        let _client = client;
        while let Some(m) = all.next().await {
            let mut bytes = m.subject.as_bytes().to_vec();
            bytes.extend_from_slice(&m.payload);
            keep.lock().unwrap().push(bytes);
        }
    });
    seen
}

fn holds(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

#[tokio::test]
async fn from_secret_is_sealed_to_the_cluster_agent_and_never_plain_on_the_wire_or_in_kv() {
    use data_encoding::BASE64;
    let nats = NatsServer::start();
    let seen = capture(&nats).await;
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut clusters = clusters_client(&hub).await;
    let agent = accepted_agent_on(
        &mut clusters,
        agent_config("edge-1", &nats.url()),
        sim(&["target"]).await,
    )
    .await;
    clusters
        .label_cluster(LabelClusterRequest {
            name: "edge-1".into(),
            set: [("site".to_string(), "north".to_string())].into(),
            remove: vec![],
        })
        .await
        .unwrap();
    bind_default_set(&hub).await;
    let mut policies = api(&hub).await;
    let (city, state) = ("Ljubljana-7f3a", "Carniola-c41e");
    apply(
        &hub,
        &format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: hub-secret, namespace: default}}\n\
             stringData: {{city: {city}, state: {state}}}\n"
        ),
    )
    .await;
    apply(&hub, SECRET_POLICY).await;
    apply(&hub, &enforced_on_all("copy-hub-secret")).await;
    wait_policy(&mut policies, "copy-hub-secret", "compliant", |p| {
        compliant(p) == "Compliant"
    })
    .await;
    // The agent opened the values: the Secret it made holds them (base64, as fromSecret reads
    // a Secret's data), the ConfigMap the protected token and the cluster's label.
    let secret = agent
        .backend
        .get(&id("", "v1", "Secret", "target", "copied-secret"))
        .await
        .unwrap()
        .expect("created");
    assert_eq!(secret["data"]["city"], BASE64.encode(city.as_bytes()));
    assert_eq!(secret["data"]["state"], BASE64.encode(state.as_bytes()));
    let site = id("", "v1", "ConfigMap", "target", "site");
    let cm = agent.backend.get(&site).await.unwrap().expect("created");
    assert_eq!(cm["data"]["token"], "Kr4ken-token-91");
    assert_eq!(cm["data"]["site"], "north");

    // Nothing on the wire or in KV (every KV put passed through the capture) holds a value.
    let plain: Vec<Vec<u8>> = [city, state, "Kr4ken-token-91"]
        .iter()
        .flat_map(|v| {
            [
                v.as_bytes().to_vec(),
                BASE64.encode(v.as_bytes()).into_bytes(),
            ]
        })
        .collect();
    let captured = seen.lock().unwrap().clone();
    assert!(captured.len() > 50, "{} messages", captured.len());
    assert!(
        captured.iter().any(|m| holds(m, b"$ocm_encrypted:")),
        "the protected values travelled sealed"
    );
    for m in &captured {
        for p in &plain {
            assert!(
                !holds(m, p),
                "{:?} in {}",
                String::from_utf8_lossy(p),
                String::from_utf8_lossy(&m[..m.len().min(200)])
            );
        }
    }

    // A label change re-resolves the copy within seconds.
    clusters
        .label_cluster(LabelClusterRequest {
            name: "edge-1".into(),
            set: [("site".to_string(), "south".to_string())].into(),
            remove: vec![],
        })
        .await
        .unwrap();
    eventually(
        "followed the label",
        || async { agent.backend.get(&site).await.unwrap().unwrap()["data"]["site"].clone() },
        |v| *v == json!("south"),
    )
    .await;
    drop(agent);
}

const HOSTILE: &str = r#"
apiVersion: policy.open-cluster-management.io/v1
kind: Policy
metadata:
  name: hostile
spec:
  remediationAction: enforce
  disabled: false
  policy-templates:
    - objectDefinition:
        apiVersion: policy.open-cluster-management.io/v1
        kind: ConfigurationPolicy
        metadata:
          name: spin
        spec:
          remediationAction: enforce
          object-templates:
            - complianceType: musthave
              objectDefinition:
                apiVersion: v1
                kind: ConfigMap
                metadata: {name: spin, namespace: target}
                data:
                  v: '{{hub range $i := until 10000 hub}}{{hub range $j := until 10000 hub}}x{{hub end hub}}{{hub end hub}}'
    - objectDefinition:
        apiVersion: policy.open-cluster-management.io/v1
        kind: ConfigurationPolicy
        metadata:
          name: elsewhere
        spec:
          remediationAction: enforce
          object-templates:
            - complianceType: musthave
              objectDefinition:
                apiVersion: v1
                kind: ConfigMap
                metadata: {name: elsewhere, namespace: target}
                data:
                  v: '{{hub fromSecret "kube-system" "admin" "token" hub}}'
    - objectDefinition:
        apiVersion: policy.open-cluster-management.io/v1
        kind: ConfigurationPolicy
        metadata:
          name: unknown
        spec:
          remediationAction: enforce
          object-templates:
            - complianceType: musthave
              objectDefinition:
                apiVersion: v1
                kind: ConfigMap
                metadata: {name: unknown, namespace: target}
                data:
                  v: '{{hub now hub}}'
    - objectDefinition:
        apiVersion: policy.open-cluster-management.io/v1
        kind: ConfigurationPolicy
        metadata:
          name: fine
        spec:
          remediationAction: enforce
          object-templates:
            - complianceType: musthave
              objectDefinition:
                apiVersion: v1
                kind: ConfigMap
                metadata: {name: fine, namespace: target}
                data:
                  cluster: '{{hub .ManagedClusterName hub}}'
"#;

#[tokio::test]
async fn a_hostile_hub_template_is_reported_and_the_hub_and_agents_serve_on() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut clusters = clusters_client(&hub).await;
    let mut agents = Vec::new();
    for name in ["edge-1", "edge-2"] {
        let backend = sim(&["target"]).await;
        agents
            .push(accepted_agent_on(&mut clusters, agent_config(name, &nats.url()), backend).await);
    }
    bind_default_set(&hub).await;
    let mut policies = api(&hub).await;
    apply(&hub, HOSTILE).await;
    apply(&hub, &enforced_on_all("hostile")).await;
    wait_policy(&mut policies, "hostile", "non-compliant on both", |p| {
        clusters_in(p).len() == 2 && clusters_in(p).iter().all(|(_, c)| c == "NonCompliant")
    })
    .await;
    let details = policies
        .get_policy_details(GetPolicyRequest {
            namespace: "default".into(),
            name: "hostile".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    for c in &details.clusters {
        let m: Vec<&str> = c
            .details
            .iter()
            .map(|d| d.history.first().map_or("", |h| h.message.as_str()))
            .collect();
        assert!(
            m[0].starts_with("NonCompliant; template-error; failed to resolve the template")
                && m[0].contains("range loops ran more than"),
            "{}",
            m[0]
        );
        assert!(
            m[1].contains(
                "error calling fromSecret: failed to get the secret admin from \
                 kube-system: the namespace argument is restricted to default"
            ),
            "{}",
            m[1]
        );
        assert!(
            m[2].starts_with("NonCompliant; template-error; failed to parse the template")
                && m[2].contains("function \"now\" not defined"),
            "{}",
            m[2]
        );
        assert!(m[3].starts_with("Compliant"), "{}", m[3]);
    }
    // Nothing of the failed templates was written; the good one was, per cluster.
    for (agent, name) in agents.iter().zip(["edge-1", "edge-2"]) {
        let fine = agent
            .backend
            .get(&id("", "v1", "ConfigMap", "target", "fine"))
            .await
            .unwrap()
            .expect("created");
        assert_eq!(fine["data"]["cluster"], name);
        for bad in ["spin", "elsewhere", "unknown"] {
            let o = agent
                .backend
                .get(&id("", "v1", "ConfigMap", "target", bad))
                .await
                .unwrap();
            assert!(o.is_none(), "{bad} was written");
        }
    }
    // The hub serves on: another templated policy resolves and is enforced.
    apply(&hub, &SECRET_POLICY.replace("copy-hub-secret", "after")).await;
    apply(
        &hub,
        "apiVersion: v1\nkind: Secret\nmetadata: {name: hub-secret, namespace: default}\n\
         stringData: {city: a, state: b}\n",
    )
    .await;
    apply(&hub, &enforced_on_all("after")).await;
    wait_policy(&mut policies, "after", "compliant on both", |p| {
        clusters_in(p).len() == 2 && clusters_in(p).iter().all(|(_, c)| c == "Compliant")
    })
    .await;
    drop(agents);
}
