//! Policies on the Kubernetes backend, against the testkit's API server: policy-collection's
//! role policy (mustonlyhave, `namespaceSelector` include `default`) informs, then enforces; a
//! Role widened by someone else through the API server is seen by the backend's watch and put
//! back exactly as the template says at once — no poll, no interval; removal with
//! `pruneObjectBehavior: DeleteIfCreated` deletes what enforce created. Managed-cluster
//! templates read claims and ConfigMaps; a CertificatePolicy flags a certificate expiring in 10
//! days and clears once it is renewed through the API server; an enforce of a misspelt field is
//! refused by the API server's strict dry run, NonCompliant naming the field, nothing written.

use flotilla_agent::backend::kube::KubeBackend;
use flotilla_agent::backend::{Backend, Strategy};
use flotilla_agent::policy::{PolicyConfig, PolicyManager, StatusSink};
use flotilla_agent::store::LocalStore;
use flotilla_api::v1::{ObjectMeta, Policy, PolicySpec, PolicyStatusReport, PolicyTemplate};
use flotilla_api::work::manifest_id;
use flotilla_bus::envelope::{Action, Event};
use flotilla_bus::policies;
use flotilla_testkit::kube::{FakeKube, ObjectKey};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

const CLUSTER: &str = "edge-1";
const SOON: Duration = Duration::from_secs(20);
/// A drift is repaired this soon (no template here has an evaluation interval, and the poll is
/// an hour).
const REPAIRED_WITHIN: Duration = Duration::from_secs(5);

/// Hands every report to the test.
struct Reports(mpsc::UnboundedSender<PolicyStatusReport>);

#[async_trait::async_trait]
impl StatusSink for Reports {
    async fn publish(&self, report: &PolicyStatusReport) -> bool {
        self.0.send(report.clone()).is_ok()
    }
}

/// policy-collection's `policy-role` ConfigurationPolicy, with a prune behaviour.
fn role_template() -> Value {
    json!({"apiVersion": "policy.open-cluster-management.io/v1", "kind": "ConfigurationPolicy",
        "metadata": {"name": "policy-role-example"},
        "spec": {"remediationAction": "inform", "severity": "high",
            "pruneObjectBehavior": "DeleteIfCreated",
            "namespaceSelector": {"include": ["default"]},
            "object-templates": [{"complianceType": "mustonlyhave", "objectDefinition": {
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "sample-role"},
                "rules": [{"apiGroups": ["extensions", "apps"], "resources": ["deployments"],
                           "verbs": ["get", "list", "watch", "delete", "patch"]}]}}]}})
}

fn replicated(generation: i64, remediation: &str) -> Policy {
    Policy {
        metadata: Some(ObjectMeta {
            name: "policies.policy-role".into(),
            namespace: CLUSTER.into(),
            generation,
            ..Default::default()
        }),
        spec: Some(PolicySpec {
            remediation_action: remediation.into(),
            policy_templates: vec![PolicyTemplate {
                object_definition: serde_json::to_vec(&role_template()).unwrap(),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    }
}

fn event(p: &Policy, action: Action) -> Event {
    let m = p.metadata.as_ref().unwrap();
    Event::new(
        policies::spec_type(action),
        "hub".to_string(),
        CLUSTER.to_string(),
        p,
    )
    .with_resource_id(policies::resource_id(CLUSTER, &m.name))
    .with_resource_version(m.generation)
}

async fn report(
    rx: &mut mpsc::UnboundedReceiver<PolicyStatusReport>,
    what: &str,
    pred: impl Fn(&PolicyStatusReport) -> bool,
) -> PolicyStatusReport {
    tokio::time::timeout(SOON, async {
        loop {
            let r = rx.recv().await.expect("reports");
            if pred(&r) {
                return r;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no report {what}"))
}

fn newest(r: &PolicyStatusReport) -> String {
    r.details[0]
        .history
        .first()
        .map(|e| e.message.clone())
        .unwrap_or_default()
}

fn role_key() -> ObjectKey {
    ObjectKey::new(
        "rbac.authorization.k8s.io",
        "roles",
        "default",
        "sample-role",
    )
}

#[tokio::test]
async fn the_role_policy_informs_enforces_and_repairs_a_widened_role_on_kubernetes() {
    let fake = FakeKube::start().await;
    let kube = Arc::new(
        tokio::time::timeout(SOON, KubeBackend::connect(Some(&fake.kubeconfig())))
            .await
            .expect("connected in time")
            .expect("connect to the fake API server"),
    );
    let default = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}});
    kube.apply(&manifest_id(&default).unwrap(), &default, &Strategy::Update)
        .await
        .expect("the default namespace");
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut manager = PolicyManager::start(
        CLUSTER,
        kube.clone(),
        Arc::new(LocalStore::memory(CLUSTER)),
        Arc::new(Reports(tx)),
        PolicyConfig {
            // The Kubernetes backend signals changes from its watches: a poll would only hide
            // a missing signal, so it is made too long to matter.
            poll_interval: Duration::from_secs(3600),
            ..PolicyConfig::default()
        },
    )
    .unwrap();

    manager
        .on_spec(&event(&replicated(1, "inform"), Action::CreateRequest))
        .await;
    let r = report(&mut rx, "NonCompliant", |r| r.compliant == "NonCompliant").await;
    assert_eq!(
        newest(&r),
        "NonCompliant; violation - roles [sample-role] in namespace default not found"
    );
    assert!(fake.get(&role_key()).is_none(), "inform writes nothing");

    manager
        .on_spec(&event(&replicated(2, "enforce"), Action::UpdateRequest))
        .await;
    report(&mut rx, "Compliant", |r| {
        r.observed_generation == 2 && r.compliant == "Compliant"
    })
    .await;
    let role = fake.get(&role_key()).expect("created by enforce");
    assert_eq!(role["rules"][0]["verbs"].as_array().unwrap().len(), 5);

    // Someone widens the role through the API server (another client): the watch sees it and
    // enforce narrows it back well before any interval or poll.
    let someone = KubeBackend::connect(Some(&fake.kubeconfig()))
        .await
        .expect("a second client");
    let mut widened = fake.get(&role_key()).unwrap();
    widened["rules"][0]["verbs"] = json!(["get", "list", "watch", "delete", "patch", "create"]);
    someone
        .apply(&manifest_id(&widened).unwrap(), &widened, &Strategy::Update)
        .await
        .expect("widened through the API server");
    let repaired = tokio::time::timeout(
        REPAIRED_WITHIN,
        report(&mut rx, "the widened role repaired", |r| {
            r.details[0].history.iter().any(|e| {
                e.message
                    .ends_with("roles [sample-role] in namespace default was updated successfully")
            })
        }),
    )
    .await;
    assert!(
        repaired.is_ok(),
        "the drift was not repaired within {REPAIRED_WITHIN:?}: the change was not signalled"
    );
    let verbs = fake.get(&role_key()).unwrap()["rules"][0]["verbs"].clone();
    assert_eq!(verbs, json!(["get", "list", "watch", "delete", "patch"]));

    // Removed: what enforce created is pruned.
    manager
        .on_spec(&event(&replicated(2, "enforce"), Action::DeleteRequest))
        .await;
    report(&mut rx, "deleted", |r| r.deleted).await;
    assert!(fake.get(&role_key()).is_none(), "pruned");
}

const PDB_TEMPLATIZED: &str =
    include_str!("../../api/src/ocm/policy/testdata/policy-pod-disruption-budget-templatized.yaml");

/// A policy of the given `objectDefinition`s.
fn replicated_of(name: &str, generation: i64, templates: &[Value]) -> Policy {
    Policy {
        metadata: Some(ObjectMeta {
            name: format!("policies.{name}"),
            namespace: CLUSTER.into(),
            generation,
            ..Default::default()
        }),
        spec: Some(PolicySpec {
            remediation_action: "enforce".into(),
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

#[tokio::test]
async fn managed_cluster_templates_read_claims_and_config_maps_on_kubernetes() {
    let fake = FakeKube::start().await;
    let kube = Arc::new(
        tokio::time::timeout(SOON, KubeBackend::connect(Some(&fake.kubeconfig())))
            .await
            .expect("connected in time")
            .expect("connect to the fake API server"),
    );
    let site = |vlan: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": "default", "name": "site"}, "data": {"vlan": vlan}})
    };
    for object in [
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}),
        site("3620"),
    ] {
        kube.apply(&manifest_id(&object).unwrap(), &object, &Strategy::Update)
            .await
            .expect("set up through the API server");
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut manager = PolicyManager::start(
        CLUSTER,
        kube.clone(),
        Arc::new(LocalStore::memory(CLUSTER)),
        Arc::new(Reports(tx)),
        PolicyConfig {
            poll_interval: Duration::from_secs(3600),
            claims: vec![flotilla_api::v1::ClusterClaim {
                name: "environment".into(),
                value: "prod".into(),
            }],
            ..PolicyConfig::default()
        },
    )
    .unwrap();
    // policy-collection's templatized PDB (a lookup of a ClusterClaim), verbatim, and a
    // ConfigMap whose value comes from another ConfigMap.
    let pdb: Value = serde_yaml::from_str::<Value>(PDB_TEMPLATIZED).unwrap()["spec"]
        ["policy-templates"][0]["objectDefinition"]
        .clone();
    let net = json!({"apiVersion": "policy.open-cluster-management.io/v1",
        "kind": "ConfigurationPolicy", "metadata": {"name": "net"},
        "spec": {"object-templates": [{"complianceType": "musthave", "objectDefinition": {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": "default", "name": "net"},
            "data": {"vlan": "{{ fromConfigMap \"default\" \"site\" \"vlan\" }}"}}}]}});
    manager
        .on_spec(&event(
            &replicated_of("templated", 1, &[pdb, net]),
            Action::CreateRequest,
        ))
        .await;
    report(&mut rx, "Compliant", |r| r.compliant == "Compliant").await;
    let pdb = fake
        .get(&ObjectKey::new(
            "policy",
            "poddisruptionbudgets",
            "default",
            "nginx-pdb",
        ))
        .expect("the PodDisruptionBudget was created");
    assert_eq!(pdb["spec"]["maxUnavailable"], "25%");
    let net_key = ObjectKey::new("", "configmaps", "default", "net");
    assert_eq!(fake.get(&net_key).unwrap()["data"]["vlan"], "3620");

    // The input changes through the API server: the watch re-evaluates and enforce follows.
    let mut changed = site("3700");
    changed["metadata"]["resourceVersion"] = json!(null);
    kube.apply(&manifest_id(&changed).unwrap(), &changed, &Strategy::Update)
        .await
        .expect("the input changed");
    tokio::time::timeout(REPAIRED_WITHIN, async {
        loop {
            if fake.get(&net_key).unwrap()["data"]["vlan"] == "3700" {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the changed input was enforced within seconds");
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

#[tokio::test]
async fn a_certificate_policy_flags_a_certificate_that_expires_in_ten_days_on_kubernetes() {
    let fake = FakeKube::start().await;
    let kube = Arc::new(
        tokio::time::timeout(SOON, KubeBackend::connect(Some(&fake.kubeconfig())))
            .await
            .expect("connected in time")
            .expect("connect to the fake API server"),
    );
    for object in [
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}),
        tls_secret("web-tls", time::Duration::days(10)),
    ] {
        kube.apply(&manifest_id(&object).unwrap(), &object, &Strategy::Update)
            .await
            .expect("set up through the API server");
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut manager = PolicyManager::start(
        CLUSTER,
        kube.clone(),
        Arc::new(LocalStore::memory(CLUSTER)),
        Arc::new(Reports(tx)),
        PolicyConfig {
            poll_interval: Duration::from_secs(3600),
            ..PolicyConfig::default()
        },
    )
    .unwrap();
    // policy-collection's policy-certificate template (minimumDuration 300h in default).
    let certificate = json!({"apiVersion": "policy.open-cluster-management.io/v1",
        "kind": "CertificatePolicy", "metadata": {"name": "policy-certificate-example"},
        "spec": {"namespaceSelector": {"include": ["default"]}, "remediationAction": "inform",
                 "severity": "low", "minimumDuration": "300h"}});
    manager
        .on_spec(&event(
            &replicated_of("cert", 1, &[certificate]),
            Action::CreateRequest,
        ))
        .await;
    let r = report(&mut rx, "NonCompliant", |r| r.compliant == "NonCompliant").await;
    assert_eq!(
        newest(&r),
        "NonCompliant; 1 certificates expire in less than 300h0m0s: default:web-tls\n"
    );
    // Renewed through the API server: the watch of Secrets judges it again.
    let renewed = tls_secret("web-tls", time::Duration::days(90));
    kube.apply(&manifest_id(&renewed).unwrap(), &renewed, &Strategy::Update)
        .await
        .expect("renewed");
    let r = report(&mut rx, "Compliant", |r| r.compliant == "Compliant").await;
    assert_eq!(
        newest(&r),
        "Compliant; All evaluated certificates are compliant"
    );
}

/// What the API server answers a Deployment with `spec.replcas` under strict field validation.
const REPLCAS_REFUSED: &str = "Deployment in version \"v1\" cannot be handled as a Deployment: \
                               strict decoding error: unknown field \"spec.replcas\"";

/// A ConfigurationPolicy that must have Deployment `default/web` with `spec` (enforce).
fn deployment_policy(spec: Value) -> Value {
    json!({"apiVersion": "policy.open-cluster-management.io/v1", "kind": "ConfigurationPolicy",
        "metadata": {"name": "web-deployment"},
        "spec": {"remediationAction": "enforce", "severity": "low",
            "object-templates": [{"complianceType": "musthave", "objectDefinition": {
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "default"}, "spec": spec}}]}})
}

fn web_spec(replicas_key: &str, replicas: i64) -> Value {
    let mut spec = json!({"selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}});
    spec[replicas_key] = json!(replicas);
    spec
}

#[tokio::test]
async fn an_enforce_of_a_misspelt_field_is_noncompliant_naming_it_and_writes_nothing_on_kubernetes()
{
    let fake = FakeKube::start().await;
    let kube = Arc::new(
        tokio::time::timeout(SOON, KubeBackend::connect(Some(&fake.kubeconfig())))
            .await
            .expect("connected in time")
            .expect("connect to the fake API server"),
    );
    let default = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}});
    kube.apply(&manifest_id(&default).unwrap(), &default, &Strategy::Update)
        .await
        .expect("the default namespace");
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut manager = PolicyManager::start(
        CLUSTER,
        kube.clone(),
        Arc::new(LocalStore::memory(CLUSTER)),
        Arc::new(Reports(tx)),
        PolicyConfig {
            poll_interval: Duration::from_secs(3600),
            ..PolicyConfig::default()
        },
    )
    .unwrap();
    let web = ObjectKey::new("apps", "deployments", "default", "web");
    let misspelt = deployment_policy(web_spec("replcas", 3));
    manager
        .on_spec(&event(
            &replicated_of("web", 1, std::slice::from_ref(&misspelt)),
            Action::CreateRequest,
        ))
        .await;
    let r = report(&mut rx, "NonCompliant", |r| r.compliant == "NonCompliant").await;
    assert_eq!(
        newest(&r),
        format!(
            "NonCompliant; violation - deployments [web] in namespace default is missing, and \
             cannot be created, reason: `{REPLCAS_REFUSED}`"
        )
    );
    assert!(fake.get(&web).is_none(), "nothing written");
    let deployment_writes: Vec<String> = fake
        .requests()
        .into_iter()
        .filter(|r| r.starts_with("POST /apis/apps/v1/namespaces/default/deployments"))
        .collect();
    assert!(!deployment_writes.is_empty());
    assert!(
        deployment_writes
            .iter()
            .all(|r| r.contains("dryRun=All") && r.contains("fieldValidation=Strict")),
        "only strict dry runs: {deployment_writes:?}"
    );

    // The Deployment exists with one replica: the misspelt update is refused by the API
    // server's dry run, and the object keeps its replica.
    let existing = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"}, "spec": web_spec("replicas", 1)});
    kube.apply(
        &manifest_id(&existing).unwrap(),
        &existing,
        &Strategy::Update,
    )
    .await
    .expect("created through the API server");
    manager
        .on_spec(&event(
            &replicated_of("web", 2, std::slice::from_ref(&misspelt)),
            Action::UpdateRequest,
        ))
        .await;
    let r = report(&mut rx, "the update refused", |r| {
        r.observed_generation == 2 && newest(r).contains("Error validating")
    })
    .await;
    assert_eq!(
        newest(&r),
        format!(
            "NonCompliant; violation - Error validating the object web, the error is \
             `{REPLCAS_REFUSED}`"
        )
    );
    let live = fake.get(&web).expect("kept");
    assert_eq!(live["spec"]["replicas"], 1);
    assert!(live["spec"].get("replcas").is_none());

    // Spelt right, enforce writes it.
    manager
        .on_spec(&event(
            &replicated_of("web", 3, &[deployment_policy(web_spec("replicas", 3))]),
            Action::UpdateRequest,
        ))
        .await;
    report(&mut rx, "Compliant", |r| {
        r.observed_generation == 3 && r.compliant == "Compliant"
    })
    .await;
    assert_eq!(fake.get(&web).unwrap()["spec"]["replicas"], 3);
}
