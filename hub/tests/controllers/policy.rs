//! Governance end to end: a real nats-server, the hub, simulated agents. policy-collection's
//! namespace policy over a Placement (inform → NonCompliant, enforce → Compliant, drift on the
//! spoke repaired, history), a PlacementRule with a binding override through a PolicySet (set
//! aggregation, policy-collection's CertificatePolicy flagging a certificate that expires in 10
//! days on the spoke), disabling and deleting a policy, a PolicySet's
//! placement built from the members that exist (none: no placement, as OCM), a kind served by
//! one cluster's Kubernetes version and not by another's (policy-collection's oc-client-cronjob
//! on 1.24 and 1.30), a template with fields its CRD does not define (policy-collection's
//! network-policy-samples) reported as OCM's template-error.

use crate::common;

use common::policy::*;
use common::*;
use flotilla_api::v1::{GetPolicyRequest, LabelClusterRequest, ListPoliciesRequest};
use flotilla_api::work::ManifestId;
use flotilla_hub::Hub;
use flotilla_testkit::NatsServer;
use std::time::Duration;

const NAMESPACE_POLICY: &str =
    include_str!("../../../api/src/ocm/policy/testdata/policy-namespace.yaml");
const CERTIFICATE_POLICY: &str =
    include_str!("../../../api/src/ocm/policy/testdata/policy-certificate.yaml");

const OC_CLIENT_CRONJOB: &str =
    include_str!("../../../api/src/ocm/policy/testdata/policy-oc-client-cronjob.yaml");

const PDB_TEMPLATIZED: &str = include_str!(
    "../../../api/src/ocm/policy/testdata/policy-pod-disruption-budget-templatized.yaml"
);

const NETWORK_POLICY_SAMPLES: &str =
    include_str!("../../../api/src/ocm/policy/testdata/policy-network-policy-samples.yaml");

/// A Placement `all` over the default set and a binding of `policy` to it.
fn bound_to_all(policy: &str) -> String {
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
"#
    )
}

const PLACEMENT_AND_BINDING: &str = r#"
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {name: all, namespace: default}
spec:
  clusterSets: [default]
---
apiVersion: policy.open-cluster-management.io/v1
kind: PlacementBinding
metadata: {name: binding-policy-namespace, namespace: default}
placementRef: {name: all, kind: Placement, apiGroup: cluster.open-cluster-management.io}
subjects:
  - {name: policy-namespace, kind: Policy, apiGroup: policy.open-cluster-management.io}
"#;

const RULE_SET_AND_BINDING: &str = r#"
apiVersion: apps.open-cluster-management.io/v1
kind: PlacementRule
metadata: {name: dev, namespace: default}
spec:
  clusterSelector:
    matchExpressions:
      - {key: environment, operator: In, values: ["dev"]}
---
apiVersion: policy.open-cluster-management.io/v1beta1
kind: PolicySet
metadata: {name: baseline, namespace: default}
spec:
  description: namespace and certificates
  policies: [policy-namespace, policy-certificate]
---
apiVersion: policy.open-cluster-management.io/v1
kind: PlacementBinding
metadata: {name: baseline-dev, namespace: default}
placementRef: {name: dev, kind: PlacementRule, apiGroup: apps.open-cluster-management.io}
subjects:
  - {name: baseline, kind: PolicySet, apiGroup: policy.open-cluster-management.io}
bindingOverrides:
  remediationAction: enforce
"#;

/// Puts a `kubernetes.io/tls` Secret in `default` on the agent's cluster, its certificate
/// expiring `left` from now.
async fn put_tls_secret(agent: &TestAgent, name: &str, left: time::Duration) {
    use flotilla_agent::backend::{Backend, Strategy};
    let now = time::OffsetDateTime::now_utc();
    let mut params = rcgen::CertificateParams::new(vec!["web.example.com".to_string()]).unwrap();
    params.not_before = now - time::Duration::days(1);
    params.not_after = now + left;
    let pem = params
        .self_signed(&rcgen::KeyPair::generate().unwrap())
        .unwrap()
        .pem();
    let id = ManifestId {
        group: String::new(),
        version: "v1".into(),
        kind: "Secret".into(),
        namespace: "default".into(),
        name: name.into(),
    };
    let secret = serde_json::json!({"apiVersion": "v1", "kind": "Secret",
        "type": "kubernetes.io/tls", "metadata": {"namespace": "default", "name": name},
        "data": {"tls.crt": data_encoding::BASE64.encode(pem.as_bytes())}});
    agent
        .backend
        .apply(&id, &secret, &Strategy::Update)
        .await
        .unwrap();
}

fn ns_id(name: &str) -> ManifestId {
    ManifestId {
        group: String::new(),
        version: "v1".into(),
        kind: "Namespace".into(),
        namespace: String::new(),
        name: name.into(),
    }
}

async fn wait_namespace(agent: &TestAgent, name: &str, present: bool) {
    use flotilla_agent::backend::Backend;
    let deadline = tokio::time::Instant::now() + SOON;
    while agent.backend.get(&ns_id(name)).await.unwrap().is_some() != present {
        assert!(
            tokio::time::Instant::now() < deadline,
            "namespace {name} never {}",
            if present { "appeared" } else { "went away" }
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the hub's metrics have exactly this line.
async fn wait_line(hub: &Hub, line: &str) {
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        let text = metrics_text(hub).await;
        if text.lines().any(|l| l == line) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no metric line {line}; governance lines: {:#?}",
            text.lines()
                .filter(|l| l.contains("policy_governance_info"))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn with_remediation(yaml: &str, remediation: &str) -> String {
    yaml.replace(
        "spec:\n  remediationAction: inform",
        &format!("spec:\n  remediationAction: {remediation}"),
    )
}

#[tokio::test]
async fn policy_collections_namespace_policy_informs_then_enforces_and_repairs_drift() {
    namespace_policy_flow(NatsServer::start()).await;
}

/// The same on the current nats-server release (KV buckets, the status stream and its
/// consumer must work on 2.9 and on 2.1x).
#[tokio::test]
async fn the_namespace_policy_flow_holds_on_the_current_nats_server() {
    let dir = tempfile::tempdir().unwrap();
    let port = flotilla_testkit::free_port();
    let config = dir.path().join("nats.conf");
    std::fs::write(
        &config,
        format!(
            "listen: 127.0.0.1:{port}\njetstream {{ store_dir: {:?} }}\n",
            dir.path().join("js").display().to_string()
        ),
    )
    .unwrap();
    let nats = NatsServer::start_from_config_with(
        flotilla_testkit::nats_server_current_binary(),
        config,
        port,
    );
    namespace_policy_flow(nats).await;
}

async fn namespace_policy_flow(nats: NatsServer) {
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut clusters = clusters_client(&hub).await;
    let agents = accepted_fleet(&mut clusters, &nats.url(), &["edge-1", "edge-2"]).await;
    bind_default_set(&hub).await;
    let mut api = api(&hub).await;

    // A binding to a policy that does not exist yet is fine: it is followed once it does.
    apply(&hub, PLACEMENT_AND_BINDING).await;
    apply(&hub, NAMESPACE_POLICY).await;
    let p = wait_policy(&mut api, "policy-namespace", "NonCompliant on both", |p| {
        compliant(p) == "NonCompliant"
            && clusters_in(p)
                == [
                    ("edge-1".to_string(), "NonCompliant".to_string()),
                    ("edge-2".to_string(), "NonCompliant".to_string()),
                ]
    })
    .await;
    let st = p.status.unwrap();
    assert_eq!(
        st.placement[0].placement_binding,
        "binding-policy-namespace"
    );
    assert_eq!(st.placement[0].placement, "all");
    for a in &agents {
        wait_namespace(a, "prod", false).await;
    }
    let details = api
        .get_policy_details(GetPolicyRequest {
            namespace: "default".into(),
            name: "policy-namespace".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        details.clusters[0].details[0].history[0].message,
        "NonCompliant; violation - namespaces [prod] not found"
    );
    // Paged: one row a page, the policy on the first only, the token naming the last row.
    let mut page = GetPolicyRequest {
        namespace: "default".into(),
        name: "policy-namespace".into(),
        page_size: 1,
        ..Default::default()
    };
    let first = api
        .get_policy_details(page.clone())
        .await
        .unwrap()
        .into_inner();
    assert!(first.policy.is_some());
    assert_eq!(first.clusters.len(), 1);
    assert_eq!(first.next_page_token, first.clusters[0].cluster_name);
    page.page_token = first.next_page_token.clone();
    let second = api
        .get_policy_details(page.clone())
        .await
        .unwrap()
        .into_inner();
    assert!(second.policy.is_none());
    assert_eq!(second.clusters.len(), 1);
    assert!(second.next_page_token.is_empty(), "the last page says so");
    assert!(second.clusters[0].cluster_name > first.clusters[0].cluster_name);
    assert_eq!(
        [&first.clusters[0], &second.clusters[0]].map(|r| r.cluster_name.clone()),
        [&details.clusters[0], &details.clusters[1]].map(|r| r.cluster_name.clone())
    );
    page.page_token = "../bad token".into();
    let bad = api.get_policy_details(page).await.unwrap_err();
    assert_eq!(bad.code(), tonic::Code::InvalidArgument, "{bad:?}");
    assert!(bad.message().contains("page_token"), "{bad:?}");
    wait_line(
        &hub,
        r#"policy_governance_info{type="root",policy="policy-namespace",policy_namespace="default",cluster_namespace=""} 1"#,
    )
    .await;

    // Enforce: both clusters create the namespace and report Compliant.
    apply(&hub, &with_remediation(NAMESPACE_POLICY, "enforce")).await;
    wait_policy(&mut api, "policy-namespace", "Compliant", |p| {
        compliant(p) == "Compliant"
    })
    .await;
    for a in &agents {
        wait_namespace(a, "prod", true).await;
    }
    wait_line(
        &hub,
        r#"policy_governance_info{type="propagated",policy="policy-namespace",policy_namespace="default",cluster_namespace="edge-2"} 0"#,
    )
    .await;

    // Drift on a spoke is repaired there.
    use flotilla_agent::backend::Backend;
    agents[0].backend.delete(&ns_id("prod")).await.unwrap();
    wait_namespace(&agents[0], "prod", true).await;

    // The history says what happened, newest first.
    let details = api
        .get_policy_details(GetPolicyRequest {
            namespace: "default".into(),
            name: "policy-namespace".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let history = &details.clusters[0].details[0].history;
    assert!(
        history.iter().any(|e| e
            .message
            .ends_with("namespaces [prod] was created successfully")),
        "{history:#?}"
    );
    assert!(history.len() <= flotilla_api::policy::HISTORY_LIMIT);

    // A policy bound to no cluster is not compliant.
    api.delete_placement_binding(GetPolicyRequest {
        namespace: "default".into(),
        name: "binding-policy-namespace".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    wait_policy(&mut api, "policy-namespace", "unbound", |p| {
        compliant(p).is_empty() && clusters_in(p).is_empty()
    })
    .await;
    drop(agents);
}

#[tokio::test]
async fn placement_rules_policy_sets_overrides_certificates_disable_and_delete() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut clusters = clusters_client(&hub).await;
    let agents = accepted_fleet(&mut clusters, &nats.url(), &["dev-1", "prod-1"]).await;
    clusters
        .label_cluster(LabelClusterRequest {
            name: "dev-1".into(),
            set: [("environment".to_string(), "dev".to_string())].into(),
            remove: vec![],
        })
        .await
        .unwrap();
    // dev-1 holds a certificate in `default` that expires in 10 days.
    put_tls_secret(&agents[0], "web-tls", time::Duration::days(10)).await;
    // A rule decides among the clusters of the sets bound in its namespace.
    bind_default_set(&hub).await;
    apply(&hub, RULE_SET_AND_BINDING).await;
    apply(&hub, NAMESPACE_POLICY).await;
    apply(&hub, CERTIFICATE_POLICY).await;
    let mut api = api(&hub).await;

    // The binding overrides inform to enforce on the rule's cluster only.
    let p = wait_policy(&mut api, "policy-namespace", "Compliant on dev-1", |p| {
        compliant(p) == "Compliant"
            && clusters_in(p) == [("dev-1".to_string(), "Compliant".to_string())]
    })
    .await;
    let st = p.status.unwrap();
    assert_eq!(st.placement[0].placement_rule, "dev");
    assert_eq!(st.placement[0].policy_set, "baseline");
    wait_namespace(&agents[0], "prod", true).await;
    wait_namespace(&agents[1], "prod", false).await;

    // policy-certificate (minimumDuration 300h) flags it on the spoke, in OCM's words.
    wait_policy(&mut api, "policy-certificate", "NonCompliant", |p| {
        compliant(p) == "NonCompliant"
    })
    .await;
    let details = api
        .get_policy_details(GetPolicyRequest {
            namespace: "default".into(),
            name: "policy-certificate".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        details.clusters[0].details[0].history[0].message,
        "NonCompliant; 1 certificates expire in less than 300h0m0s: default:web-tls\n",
        "{details:#?}"
    );
    assert_eq!(
        details.clusters[0].details[0].template_kind,
        "CertificatePolicy"
    );

    // The set aggregates: NonCompliant over Compliant.
    let st = wait_set(&mut api, "NonCompliant", |st| {
        st.compliant == "NonCompliant"
    })
    .await;
    assert_eq!(st.status_message, "All policies are reporting status");
    assert_eq!(st.placement[0].placement_rule, "dev");

    // The rule follows labels: prod-1 joins, gets the policy and enforces it.
    clusters
        .label_cluster(LabelClusterRequest {
            name: "prod-1".into(),
            set: [("environment".to_string(), "dev".to_string())].into(),
            remove: vec![],
        })
        .await
        .unwrap();
    wait_namespace(&agents[1], "prod", true).await;
    wait_policy(&mut api, "policy-namespace", "Compliant on both", |p| {
        compliant(p) == "Compliant" && clusters_in(p).len() == 2
    })
    .await;

    // Disabled: the copies are removed and nothing is reported.
    let mut disabled = policy(&mut api, "policy-namespace").await;
    disabled.spec.as_mut().unwrap().disabled = true;
    disabled.status = None;
    api.apply_policy(disabled).await.unwrap();
    wait_policy(&mut api, "policy-namespace", "cleared", |p| {
        compliant(p).is_empty() && clusters_in(p).is_empty()
    })
    .await;
    let deadline = tokio::time::Instant::now() + SOON;
    while metrics_text(&hub).await.contains(
        r#"policy="policy-namespace",policy_namespace="default",cluster_namespace="dev-1""#,
    ) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "per-cluster series kept"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Deleted: gone from the API; the set names it.
    api.delete_policy(GetPolicyRequest {
        namespace: "default".into(),
        name: "policy-certificate".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let sets = api
        .list_policy_sets(ListPoliciesRequest {
            namespace: "default".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .items;
    let msg = sets[0].status.clone().unwrap_or_default().status_message;
    assert!(msg.contains("Disabled policies: policy-namespace"), "{msg}");
    assert!(
        msg.contains("Deleted policies: policy-certificate"),
        "{msg}"
    );
    drop(agents);
}

/// The `default` PolicySet's status, once `pred` holds (the set's status is derived on read, its
/// placement from its members' status, which their actors write).
async fn wait_set(
    api: &mut flotilla_api::v1::policy_service_client::PolicyServiceClient<
        tonic::transport::Channel,
    >,
    what: &str,
    pred: impl Fn(&flotilla_api::v1::PolicySetStatus) -> bool,
) -> flotilla_api::v1::PolicySetStatus {
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        let sets = api
            .list_policy_sets(ListPoliciesRequest {
                namespace: "default".into(),
            })
            .await
            .unwrap()
            .into_inner()
            .items;
        let st = sets[0].status.clone().unwrap_or_default();
        if pred(&st) {
            return st;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "set never {what}: {st:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_policy_set_lists_placement_only_from_members_that_exist() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut clusters = clusters_client(&hub).await;
    let agents = accepted_fleet(&mut clusters, &nats.url(), &["dev-1"]).await;
    clusters
        .label_cluster(LabelClusterRequest {
            name: "dev-1".into(),
            set: [("environment".to_string(), "dev".to_string())].into(),
            remove: vec![],
        })
        .await
        .unwrap();
    let mut api = api(&hub).await;

    // A binding names the set, but none of its members exists: OCM lists no placement.
    // A rule decides among the clusters of the sets bound in its namespace.
    bind_default_set(&hub).await;
    apply(&hub, RULE_SET_AND_BINDING).await;
    let st = wait_set(&mut api, "reported its missing members", |st| {
        st.status_message == "Deleted policies: policy-namespace, policy-certificate"
    })
    .await;
    assert!(st.placement.is_empty(), "{st:#?}");
    assert_eq!(st.compliant, "");

    // One member appears and is bound through the set: the set lists that binding.
    apply(&hub, NAMESPACE_POLICY).await;
    let st = wait_set(
        &mut api,
        "listed the member's binding and its compliance",
        |st| {
            !st.placement.is_empty() && st.status_message == "Deleted policies: policy-certificate"
        },
    )
    .await;
    assert_eq!(st.placement.len(), 1, "{st:#?}");
    assert_eq!(st.placement[0].placement_binding, "baseline-dev");
    assert_eq!(st.placement[0].placement_rule, "dev");
    assert_eq!(st.placement[0].placement, "");

    // The member goes away again: so does the set's placement.
    api.delete_policy(GetPolicyRequest {
        namespace: "default".into(),
        name: "policy-namespace".into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let st = wait_set(&mut api, "dropped the deleted member's binding", |st| {
        st.placement.is_empty()
    })
    .await;
    assert_eq!(
        st.status_message,
        "Deleted policies: policy-namespace, policy-certificate"
    );
    drop(agents);
}

#[tokio::test]
async fn an_offline_spoke_repairs_drift_alone_and_a_restarted_hub_shows_its_history() {
    let mut nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut clusters = clusters_client(&hub).await;
    let agents = accepted_fleet(&mut clusters, &nats.url(), &["edge-1"]).await;
    bind_default_set(&hub).await;
    apply(&hub, PLACEMENT_AND_BINDING).await;
    apply(&hub, &with_remediation(NAMESPACE_POLICY, "enforce")).await;
    let mut api = api(&hub).await;
    wait_policy(&mut api, "policy-namespace", "Compliant", |p| {
        compliant(p) == "Compliant"
    })
    .await;
    wait_namespace(&agents[0], "prod", true).await;

    // No hub and no NATS: the spoke is on its own. Drift is repaired there all the same.
    hub.stop().await;
    nats.stop();
    use flotilla_agent::backend::Backend;
    agents[0].backend.delete(&ns_id("prod")).await.unwrap();
    wait_namespace(&agents[0], "prod", true).await;

    // Back online with a new hub over the same JetStream state: the policy, its binding and the
    // cluster's record were kept; the agent's report after reconnecting carries the history of
    // what it did alone.
    nats.start_again();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut api = self::api(&hub).await;
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        let details = api
            .get_policy_details(GetPolicyRequest {
                namespace: "default".into(),
                name: "policy-namespace".into(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        let created = details
            .clusters
            .first()
            .and_then(|c| c.details.first())
            .map_or(0, |d| {
                d.history
                    .iter()
                    .filter(|e| {
                        e.message
                            .ends_with("namespaces [prod] was created successfully")
                    })
                    .count()
            });
        if created >= 2 {
            let p = details.policy.unwrap();
            assert_eq!(compliant(&p), "Compliant", "{:#?}", p.status);
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the offline repair never showed: {details:#?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(agents);
}

/// The newest history message of `cluster`'s first template.
async fn newest_message(
    api: &mut flotilla_api::v1::policy_service_client::PolicyServiceClient<
        tonic::transport::Channel,
    >,
    policy: &str,
    cluster: &str,
) -> String {
    let details = api
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
        .map(|e| e.message.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn a_batch_v1beta1_cronjob_is_noncompliant_on_kubernetes_1_30_and_enforced_on_1_24() {
    use flotilla_agent::backend::sim::SimBackend;
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut clusters = clusters_client(&hub).await;
    let new = accepted_agent_on(
        &mut clusters,
        agent_config("k8s-130", &nats.url()),
        std::sync::Arc::new(SimBackend::new(8, 32, "v1.30.2")),
    )
    .await;
    let old = accepted_agent_on(
        &mut clusters,
        agent_config("k8s-124", &nats.url()),
        std::sync::Arc::new(SimBackend::new(8, 32, "v1.24.17")),
    )
    .await;
    bind_default_set(&hub).await;
    let mut api = api(&hub).await;
    apply(&hub, &bound_to_all("policy-oc-client")).await;
    apply(&hub, &with_remediation(OC_CLIENT_CRONJOB, "enforce")).await;

    // 1.30 no longer serves batch/v1beta1: OCM's mapping error, the rest enforced; 1.24 runs it.
    wait_policy(&mut api, "policy-oc-client", "judged per version", |p| {
        clusters_in(p)
            == [
                ("k8s-124".to_string(), "Compliant".to_string()),
                ("k8s-130".to_string(), "NonCompliant".to_string()),
            ]
    })
    .await;
    assert_eq!(
        newest_message(&mut api, "policy-oc-client", "k8s-130").await,
        "NonCompliant; violation - couldn't find mapping resource with kind CronJob in API \
         version batch/v1beta1, please check if you have CRD deployed"
    );
    use flotilla_agent::backend::Backend;
    let cronjob = ManifestId {
        group: "batch".into(),
        version: "v1beta1".into(),
        kind: "CronJob".into(),
        namespace: "jobnamespace".into(),
        name: "basic-oc-client".into(),
    };
    assert!(new.backend.get(&cronjob).await.unwrap().is_none());
    wait_namespace(&new, "jobnamespace", true).await;
    assert!(old.backend.get(&cronjob).await.unwrap().is_some());
    drop((new, old));
}

#[tokio::test]
async fn network_policy_samples_reports_its_misplaced_fields_as_ocms_template_error() {
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut clusters = clusters_client(&hub).await;
    let agents = accepted_fleet(&mut clusters, &nats.url(), &["edge-1"]).await;
    bind_default_set(&hub).await;
    let mut api = api(&hub).await;
    apply(&hub, &bound_to_all("sample-network-policy-99")).await;
    // Enforced: the three well-formed templates are created and Compliant; the fourth puts
    // `severity` and `remediationAction` inside its object-template, which OCM's spoke refuses.
    let enforced = NETWORK_POLICY_SAMPLES.replace(
        "\n  remediationAction: inform",
        "\n  remediationAction: enforce",
    );
    apply(&hub, &enforced).await;
    wait_policy(&mut api, "sample-network-policy-99", "NonCompliant", |p| {
        compliant(p) == "NonCompliant"
    })
    .await;
    let details = api
        .get_policy_details(GetPolicyRequest {
            namespace: "default".into(),
            name: "sample-network-policy-99".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let templates = &details.clusters[0].details;
    let compliant: Vec<&str> = templates.iter().map(|d| d.compliant.as_str()).collect();
    assert_eq!(
        compliant,
        ["Compliant", "Compliant", "Compliant", "NonCompliant"],
        "{templates:#?}"
    );
    assert_eq!(templates[3].template_name, "allow-pod-and-namespace-both");
    assert_eq!(
        templates[3].history[0].message,
        "NonCompliant; template-error; Failed to create policy template: ConfigurationPolicy in \
         version \"v1\" cannot be handled as a ConfigurationPolicy: strict decoding error: \
         unknown field \"spec.object-templates[0].remediationAction\", unknown field \
         \"spec.object-templates[0].severity\""
    );
    drop(agents);
}

#[tokio::test]
async fn a_templatized_policy_gives_each_cluster_its_own_value_through_a_claim_lookup() {
    use flotilla_agent::backend::sim::SimBackend;
    use flotilla_agent::backend::{Backend, Strategy};
    let nats = NatsServer::start();
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut clusters = clusters_client(&hub).await;
    let mut prod_config = agent_config("edge-prod", &nats.url());
    prod_config.claims = vec![flotilla_api::v1::ClusterClaim {
        name: "environment".into(),
        value: "prod".into(),
    }];
    let mut agents = Vec::new();
    for config in [prod_config, agent_config("edge-lab", &nats.url())] {
        let sim = std::sync::Arc::new(SimBackend::new(8, 32, "v1.30.2"));
        let default = serde_json::json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "default"}});
        sim.apply(&ns_id("default"), &default, &Strategy::Update)
            .await
            .unwrap();
        agents.push(accepted_agent_on(&mut clusters, config, sim).await);
    }
    bind_default_set(&hub).await;
    let mut api = api(&hub).await;
    // policy-collection's templatized PDB, verbatim: a managed-cluster `lookup` of the
    // ClusterClaim `environment` decides maxUnavailable on each cluster.
    apply(
        &hub,
        &bound_to_all("policy-pod-disruption-budget-templatized"),
    )
    .await;
    apply(&hub, PDB_TEMPLATIZED).await;
    wait_policy(
        &mut api,
        "policy-pod-disruption-budget-templatized",
        "both clusters compliant",
        |p| {
            clusters_in(p)
                == [
                    ("edge-lab".to_string(), "Compliant".to_string()),
                    ("edge-prod".to_string(), "Compliant".to_string()),
                ]
        },
    )
    .await;
    let pdb = ManifestId {
        group: "policy".into(),
        version: "v1".into(),
        kind: "PodDisruptionBudget".into(),
        namespace: "default".into(),
        name: "nginx-pdb".into(),
    };
    for (agent, want) in agents.iter().zip(["25%", "50%"]) {
        let created = agent.backend.get(&pdb).await.unwrap().expect("created");
        assert_eq!(created["spec"]["maxUnavailable"], want);
    }
    drop(agents);
}
