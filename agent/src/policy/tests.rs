//! The policy actor against the simulated cluster: inform, enforce, drift, offline, restart,
//! removal with pruning, unsupported kinds, kinds the cluster's Kubernetes version does not
//! serve, hostile specs; managed-cluster templates in [`templates`].

use super::*;
use crate::backend::sim::SimBackend;
use crate::backend::{Backend, Strategy};
use flotilla_api::v1::{ObjectMeta, PolicySpec, PolicyTemplate};
use flotilla_api::work::ManifestId;
use serde_json::{Value, json};
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::mpsc;

const CLUSTER: &str = "edge-1";
const WAIT: Duration = Duration::from_secs(10);

/// A sink that hands reports to the test, and can be "offline".
struct ChannelSink {
    tx: mpsc::UnboundedSender<PolicyStatusReport>,
    online: AtomicBool,
}

#[async_trait::async_trait]
impl StatusSink for ChannelSink {
    async fn publish(&self, report: &PolicyStatusReport) -> bool {
        if !self.online.load(Ordering::SeqCst) {
            return false;
        }
        self.tx.send(report.clone()).is_ok()
    }
}

struct Fixture {
    sim: Arc<SimBackend>,
    store: Arc<LocalStore>,
    sink: Arc<ChannelSink>,
    reports: mpsc::UnboundedReceiver<PolicyStatusReport>,
    manager: PolicyManager,
}

impl Fixture {
    fn new() -> Self {
        let sim = Arc::new(SimBackend::new(4, 16, "v1.30.0"));
        let store = Arc::new(LocalStore::memory(CLUSTER));
        Self::with(sim, store)
    }

    fn with(sim: Arc<SimBackend>, store: Arc<LocalStore>) -> Self {
        Self::with_claims(sim, store, Vec::new())
    }

    /// A fixture whose agent was configured with `claims` (`--claim`).
    fn with_claims(
        sim: Arc<SimBackend>,
        store: Arc<LocalStore>,
        claims: Vec<flotilla_api::v1::ClusterClaim>,
    ) -> Self {
        let (tx, reports) = mpsc::unbounded_channel();
        let sink = Arc::new(ChannelSink {
            tx,
            online: AtomicBool::new(true),
        });
        let config = PolicyConfig {
            debounce: Duration::from_millis(10),
            retry_interval: Duration::from_millis(50),
            claims,
            ..PolicyConfig::default()
        };
        let manager = PolicyManager::start(
            CLUSTER,
            sim.clone() as Arc<dyn Backend>,
            store.clone(),
            sink.clone(),
            config,
        )
        .unwrap();
        Self {
            sim,
            store,
            sink,
            reports,
            manager,
        }
    }

    async fn send(&mut self, policy: &Policy, action: Action) {
        let name = policy.metadata.as_ref().unwrap().name.clone();
        let ev = Event::new(
            policies::spec_type(action),
            "hub".to_string(),
            CLUSTER.to_string(),
            policy,
        )
        .with_resource_id(policies::resource_id(CLUSTER, &name))
        .with_resource_version(policy.metadata.as_ref().unwrap().generation);
        self.manager.on_spec(&ev).await;
    }

    /// The first report satisfying `pred`.
    async fn report(&mut self, pred: impl Fn(&PolicyStatusReport) -> bool) -> PolicyStatusReport {
        tokio::time::timeout(WAIT, async {
            loop {
                let r = self.reports.recv().await.expect("sink open");
                if pred(&r) {
                    return r;
                }
            }
        })
        .await
        .expect("the awaited report arrived")
    }

    async fn namespace(&self, name: &str) -> Option<Value> {
        self.sim.get(&ns_id(name)).await.unwrap()
    }
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

/// A replicated policy (`policies.<name>` in the cluster's namespace) of templates.
fn replicated(name: &str, generation: i64, remediation: &str, templates: &[Value]) -> Policy {
    Policy {
        metadata: Some(ObjectMeta {
            name: policies::replicated_name("policies", name),
            namespace: CLUSTER.into(),
            generation,
            ..Default::default()
        }),
        spec: Some(PolicySpec {
            remediation_action: remediation.into(),
            policy_templates: templates
                .iter()
                .map(|t| PolicyTemplate {
                    object_definition: serde_json::to_vec(t).unwrap(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }),
        status: None,
    }
}

/// policy-collection's policy-namespace ConfigurationPolicy (namespace `prod`), with a prune
/// behaviour.
fn namespace_template(prune: &str) -> Value {
    json!({"apiVersion": "policy.open-cluster-management.io/v1", "kind": "ConfigurationPolicy",
        "metadata": {"name": "policy-namespace-example"},
        "spec": {"remediationAction": "inform", "severity": "low", "pruneObjectBehavior": prune,
            "object-templates": [{"complianceType": "musthave",
                "objectDefinition": {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "prod"}}}]}})
}

fn newest(r: &PolicyStatusReport) -> &str {
    r.details[0]
        .history
        .first()
        .map(|e| e.message.as_str())
        .unwrap_or("")
}

#[tokio::test]
async fn inform_reports_noncompliant_and_changes_nothing() {
    let mut f = Fixture::new();
    let p = replicated("ns", 1, "inform", &[namespace_template("None")]);
    f.send(&p, Action::CreateRequest).await;
    let r = f.report(|r| !r.compliant.is_empty()).await;
    assert_eq!(r.compliant, "NonCompliant");
    assert_eq!(r.policy_name, "policies.ns");
    assert_eq!(r.observed_generation, 1);
    assert_eq!(
        newest(&r),
        "NonCompliant; violation - namespaces [prod] not found"
    );
    assert!(f.namespace("prod").await.is_none());
}

#[tokio::test]
async fn enforce_creates_then_repairs_drift_on_the_cluster() {
    let mut f = Fixture::new();
    let p = replicated("ns", 1, "enforce", &[namespace_template("None")]);
    f.send(&p, Action::CreateRequest).await;
    let r = f.report(|r| r.compliant == "Compliant").await;
    assert!(
        r.details[0]
            .history
            .iter()
            .any(|e| e.message
                == "Compliant; notification - namespaces [prod] was created successfully"),
        "{:?}",
        r.details[0].history
    );
    assert!(f.namespace("prod").await.is_some());

    // Someone deletes it on the spoke: the change is seen and the namespace comes back.
    assert!(f.sim.delete(&ns_id("prod")).await.unwrap());
    tokio::time::timeout(WAIT, async {
        while f.namespace("prod").await.is_none() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("drift repaired");
}

#[tokio::test]
async fn an_offline_spoke_keeps_enforcing_and_reports_its_history_on_reconnect() {
    let mut f = Fixture::new();
    f.sink.online.store(false, Ordering::SeqCst);
    let p = replicated("ns", 1, "enforce", &[namespace_template("None")]);
    f.send(&p, Action::CreateRequest).await;
    tokio::time::timeout(WAIT, async {
        while f.namespace("prod").await.is_none() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("enforced without the hub");
    // Drift while offline is repaired too.
    f.sim.delete(&ns_id("prod")).await.unwrap();
    tokio::time::timeout(WAIT, async {
        while f.namespace("prod").await.is_none() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("repaired without the hub");
    f.sink.online.store(true, Ordering::SeqCst);
    let r = f.report(|r| r.compliant == "Compliant").await;
    let created = r.details[0]
        .history
        .iter()
        .filter(|e| e.message.ends_with("was created successfully"))
        .count();
    assert!(
        created >= 1,
        "history kept offline: {:?}",
        r.details[0].history
    );
    let times: Vec<i64> = r.details[0]
        .history
        .iter()
        .map(|e| e.last_timestamp.unwrap().seconds)
        .collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "newest first");
}

#[tokio::test]
async fn a_restarted_agent_resumes_its_policies_from_the_store() {
    let mut f = Fixture::new();
    let p = replicated("ns", 1, "enforce", &[namespace_template("None")]);
    f.send(&p, Action::CreateRequest).await;
    f.report(|r| r.compliant == "Compliant").await;
    let (sim, store) = (f.sim.clone(), f.store.clone());
    f.manager.shutdown().await;
    sim.delete(&ns_id("prod")).await.unwrap();
    let mut g = Fixture::with(sim, store);
    assert_eq!(
        g.manager.versions().values().copied().collect::<Vec<_>>(),
        [1]
    );
    g.report(|r| r.compliant == "Compliant").await;
    assert!(
        g.namespace("prod").await.is_some(),
        "enforced after restart"
    );
}

#[tokio::test]
async fn removal_prunes_what_the_policy_created_and_confirms() {
    let mut f = Fixture::new();
    let p = replicated("ns", 1, "enforce", &[namespace_template("DeleteIfCreated")]);
    f.send(&p, Action::CreateRequest).await;
    f.report(|r| r.compliant == "Compliant").await;
    f.send(&p, Action::DeleteRequest).await;
    let r = f.report(|r| r.deleted).await;
    assert_eq!(r.policy_name, "policies.ns");
    assert!(f.namespace("prod").await.is_none(), "pruned");
    assert!(f.store.load_policies().unwrap().is_empty());
    assert!(f.manager.versions().is_empty());
}

#[tokio::test]
async fn a_namespace_the_policy_did_not_create_is_kept_by_delete_if_created() {
    let mut f = Fixture::new();
    f.sim
        .apply(
            &ns_id("prod"),
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod"}}),
            &Strategy::Update,
        )
        .await
        .unwrap();
    let p = replicated("ns", 1, "enforce", &[namespace_template("DeleteIfCreated")]);
    f.send(&p, Action::CreateRequest).await;
    f.report(|r| r.compliant == "Compliant").await;
    f.send(&p, Action::DeleteRequest).await;
    f.report(|r| r.deleted).await;
    assert!(f.namespace("prod").await.is_some());
}

#[tokio::test]
async fn unsupported_template_kinds_are_noncompliant_naming_the_kind() {
    let mut f = Fixture::new();
    let op = json!({"apiVersion": "policy.open-cluster-management.io/v1beta1", "kind": "OperatorPolicy",
        "metadata": {"name": "install-operator"}, "spec": {"remediationAction": "inform"}});
    let p = replicated("op", 1, "inform", &[op]);
    f.send(&p, Action::CreateRequest).await;
    let r = f.report(|r| !r.compliant.is_empty()).await;
    assert_eq!(r.compliant, "NonCompliant");
    assert_eq!(r.details[0].template_kind, "OperatorPolicy");
    assert!(newest(&r).contains("OperatorPolicy"), "{}", newest(&r));
}

/// The policy templates (`objectDefinition`s) of a policy-collection fixture.
fn fixture_templates(yaml: &str) -> Vec<Value> {
    let policy: Value = serde_yaml::from_str(yaml).unwrap();
    policy["spec"]["policy-templates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["objectDefinition"].clone())
        .collect()
}

const OC_CLIENT_CRONJOB: &str =
    include_str!("../../../api/src/ocm/policy/testdata/policy-oc-client-cronjob.yaml");

const UNSERVED_CRONJOB: &str = "NonCompliant; violation - couldn't find mapping resource with \
    kind CronJob in API version batch/v1beta1, please check if you have CRD deployed";

fn cronjob_id(version: &str) -> ManifestId {
    ManifestId {
        group: "batch".into(),
        version: version.into(),
        kind: "CronJob".into(),
        namespace: "jobnamespace".into(),
        name: "basic-oc-client".into(),
    }
}

#[tokio::test]
async fn a_batch_v1beta1_cronjob_is_unserved_on_1_30_and_enforced_on_1_24() {
    // 1.30 removed batch/v1beta1: the CronJob template is OCM's mapping error and nothing of
    // it is written; the other templates are enforced.
    let mut f = Fixture::with(
        Arc::new(SimBackend::new(4, 16, "v1.30.2")),
        Arc::new(LocalStore::memory(CLUSTER)),
    );
    let p = replicated("oc", 1, "enforce", &fixture_templates(OC_CLIENT_CRONJOB));
    f.send(&p, Action::CreateRequest).await;
    let r = f
        .report(|r| !r.compliant.is_empty() && newest(r) == UNSERVED_CRONJOB)
        .await;
    assert_eq!(r.compliant, "NonCompliant");
    assert!(f.namespace("jobnamespace").await.is_some());
    assert!(f.sim.get(&cronjob_id("v1beta1")).await.unwrap().is_none());
    assert!(f.sim.get(&cronjob_id("v1")).await.unwrap().is_none());

    // 1.24 still serves it: created like any kind, then Compliant.
    let mut f = Fixture::with(
        Arc::new(SimBackend::new(4, 16, "v1.24.17")),
        Arc::new(LocalStore::memory(CLUSTER)),
    );
    f.send(&p, Action::CreateRequest).await;
    let r = f.report(|r| r.compliant == "Compliant").await;
    assert!(
        r.details[0].history.iter().any(|e| e.message.contains(
            "cronjobs [basic-oc-client] in namespace jobnamespace was created successfully"
        )),
        "{:?}",
        r.details[0].history
    );
    let created = f.sim.get(&cronjob_id("v1beta1")).await.unwrap().unwrap();
    assert_eq!(created["apiVersion"], "batch/v1beta1");
}

const NETWORK_POLICY_SAMPLES: &str =
    include_str!("../../../api/src/ocm/policy/testdata/policy-network-policy-samples.yaml");

#[tokio::test]
async fn a_template_with_fields_its_crd_does_not_define_is_a_template_error_never_evaluated() {
    let mut f = Fixture::new();
    let p = replicated(
        "net",
        1,
        "enforce",
        &fixture_templates(NETWORK_POLICY_SAMPLES),
    );
    f.send(&p, Action::CreateRequest).await;
    let r = f
        .report(|r| r.details.len() == 4 && r.details.iter().all(|d| !d.compliant.is_empty()))
        .await;
    let compliant: Vec<&str> = r.details.iter().map(|d| d.compliant.as_str()).collect();
    assert_eq!(
        compliant,
        ["Compliant", "Compliant", "Compliant", "NonCompliant"]
    );
    assert_eq!(r.compliant, "NonCompliant");
    assert_eq!(
        r.details[3].history[0].message,
        "NonCompliant; template-error; Failed to create policy template: ConfigurationPolicy in \
         version \"v1\" cannot be handled as a ConfigurationPolicy: strict decoding error: \
         unknown field \"spec.object-templates[0].remediationAction\", unknown field \
         \"spec.object-templates[0].severity\""
    );
    // Never evaluated, so never enforced.
    let id = |name: &str| ManifestId {
        group: "networking.k8s.io".into(),
        version: "v1".into(),
        kind: "NetworkPolicy".into(),
        namespace: "default".into(),
        name: name.into(),
    };
    assert!(f.sim.get(&id("deny-all")).await.unwrap().is_some());
    assert!(
        f.sim
            .get(&id("allow-pod-and-namespace-both"))
            .await
            .unwrap()
            .is_none()
    );
}

/// A `kubernetes.io/tls` Secret in `default` whose certificate expires `left` from now.
fn tls_secret(name: &str, left: time::Duration) -> Value {
    let now = time::OffsetDateTime::now_utc();
    let mut params = rcgen::CertificateParams::new(vec!["web.example.com".to_string()]).unwrap();
    params.not_before = now - time::Duration::days(1);
    params.not_after = now + left;
    let key = rcgen::KeyPair::generate().unwrap();
    let pem = params.self_signed(&key).unwrap().pem();
    json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"namespace": "default", "name": name},
        "data": {"tls.crt": data_encoding::BASE64.encode(pem.as_bytes())}})
}

async fn put(sim: &SimBackend, object: &Value) {
    let m = &object["metadata"];
    let (group, version) = match object["apiVersion"].as_str().unwrap().split_once('/') {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (
            String::new(),
            object["apiVersion"].as_str().unwrap().to_string(),
        ),
    };
    let id = ManifestId {
        group,
        version,
        kind: object["kind"].as_str().unwrap().into(),
        namespace: m["namespace"].as_str().unwrap_or_default().into(),
        name: m["name"].as_str().unwrap().into(),
    };
    sim.apply(&id, object, &Strategy::Update).await.unwrap();
}

/// policy-collection's CertificatePolicy (`minimumDuration: 300h` in `default`).
fn certificate_template() -> Value {
    json!({"apiVersion": "policy.open-cluster-management.io/v1", "kind": "CertificatePolicy",
        "metadata": {"name": "policy-certificate-example"},
        "spec": {"namespaceSelector": {"include": ["default"]}, "remediationAction": "inform",
                 "severity": "low", "minimumDuration": "300h"}})
}

#[tokio::test]
async fn a_certificate_policy_flags_a_certificate_that_expires_in_ten_days() {
    let mut f = Fixture::new();
    put(
        &f.sim,
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}),
    )
    .await;
    put(&f.sim, &tls_secret("web-tls", time::Duration::days(10))).await;
    // Enforce is inform for this kind: nothing is written.
    let p = replicated("cert", 1, "enforce", &[certificate_template()]);
    f.send(&p, Action::CreateRequest).await;
    let r = f.report(|r| !r.compliant.is_empty()).await;
    assert_eq!(r.compliant, "NonCompliant");
    assert_eq!(r.details[0].template_kind, "CertificatePolicy");
    assert_eq!(
        newest(&r),
        "NonCompliant; 1 certificates expire in less than 300h0m0s: default:web-tls\n"
    );

    // The certificate is renewed: judged again on the change, Compliant.
    put(&f.sim, &tls_secret("web-tls", time::Duration::days(90))).await;
    let r = f.report(|r| r.compliant == "Compliant").await;
    assert_eq!(
        newest(&r),
        "Compliant; All evaluated certificates are compliant"
    );
}

#[tokio::test]
async fn a_certificate_crossing_its_minimum_duration_turns_noncompliant_with_no_change() {
    let mut f = Fixture::new();
    put(
        &f.sim,
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}),
    )
    .await;
    // 300h and four seconds left: compliant now, not in four seconds.
    let left = time::Duration::hours(300) + time::Duration::seconds(4);
    put(&f.sim, &tls_secret("web-tls", left)).await;
    let p = replicated("cert", 1, "inform", &[certificate_template()]);
    f.send(&p, Action::CreateRequest).await;
    f.report(|r| r.compliant == "Compliant").await;
    let r = f.report(|r| r.compliant == "NonCompliant").await;
    assert_eq!(
        newest(&r),
        "NonCompliant; 1 certificates expire in less than 300h0m0s: default:web-tls\n"
    );
}

#[tokio::test]
async fn a_new_generation_is_evaluated_and_older_ones_ignored() {
    let mut f = Fixture::new();
    let p = replicated("ns", 2, "inform", &[namespace_template("None")]);
    f.send(&p, Action::CreateRequest).await;
    f.report(|r| r.compliant == "NonCompliant").await;
    // An older spec (a late delivery) changes nothing.
    let old = replicated("ns", 1, "enforce", &[namespace_template("None")]);
    f.send(&old, Action::UpdateRequest).await;
    // The binding's override turns the policy to enforce: a new generation.
    let p3 = replicated("ns", 3, "enforce", &[namespace_template("None")]);
    f.send(&p3, Action::UpdateRequest).await;
    let r = f.report(|r| r.compliant == "Compliant").await;
    assert_eq!(r.observed_generation, 3);
    assert_eq!(
        f.manager.versions().values().copied().collect::<Vec<_>>(),
        [3]
    );
}

#[tokio::test]
async fn specs_for_another_cluster_or_with_a_forged_id_are_rejected() {
    let mut f = Fixture::new();
    let mut p = replicated("ns", 1, "enforce", &[namespace_template("None")]);
    p.metadata.as_mut().unwrap().namespace = "edge-2".into();
    f.send(&p, Action::CreateRequest).await;
    let p = replicated("ns", 1, "enforce", &[namespace_template("None")]);
    let ev = Event::new(
        policies::spec_type(Action::CreateRequest),
        "hub".to_string(),
        CLUSTER.to_string(),
        &p,
    )
    .with_resource_id(policies::resource_id(CLUSTER, "policies.other"));
    f.manager.on_spec(&ev).await;
    assert!(f.manager.versions().is_empty());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(f.namespace("prod").await.is_none());
}

mod strict;
mod templates;
