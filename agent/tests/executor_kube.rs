//! Works with an executor on the Kubernetes backend, against the testkit's API server with a
//! least-privilege agent (it may read, ask SubjectAccessReviews and impersonate the
//! ServiceAccounts of one namespace, and write nothing itself): a work's writes, reads and
//! deletes go as its executor (`Impersonate-User`, no `Impersonate-Group`), so the spoke's
//! rules decide, and a refusal reaches the manifest's `Applied` condition in the API server's
//! words.

use flotilla_agent::backend::kube::KubeBackend;
use flotilla_agent::backend::{ApplyOutcome, Backend, BackendError, Strategy};
use flotilla_agent::store::LocalStore;
use flotilla_agent::work::{Publisher, WorkConfig, WorkManager};
use flotilla_api::ocm::{Document, parse_documents};
use flotilla_api::v1::{ManifestWork, WorkStatusReport};
use flotilla_api::work::{Executor, ManifestId, manifest_id};
use flotilla_bus::envelope::{Action, Event};
use flotilla_bus::works;
use flotilla_testkit::NatsServer;

mod common;
use flotilla_testkit::kube::{AccessRule, FakeKube, ObjectKey};
use futures::StreamExt;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

const CLUSTER: &str = "edge-1";
/// The agent's own identity on the spoke.
const AGENT: &str = "system:serviceaccount:flotilla:flotilla-agent";
/// The namespace whose ServiceAccounts the agent may impersonate (`--executor-namespace`).
const NS: &str = "team-a";
const EXECUTOR: &str = "system:serviceaccount:team-a:deployer";
const MAX: usize = 1 << 20;
const SOON: Duration = Duration::from_secs(20);

fn deployer() -> Executor {
    Executor {
        namespace: NS.into(),
        name: "deployer".into(),
    }
}

fn config_map(ns: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": ns}, "data": {"a": value}})
}

fn settings(ns: &str) -> ObjectKey {
    ObjectKey::new("", "configmaps", ns, "settings")
}

/// What `flotilla join` grants by default, as the fake's rules: reads, reviews, and
/// impersonating the ServiceAccounts of [`NS`].
fn least_privilege(fake: &FakeKube) {
    fake.allow(
        AccessRule::subject(AGENT)
            .verbs(&["get", "list", "watch"])
            .resources("", &["configmaps", "namespaces", "nodes"]),
    );
    fake.allow(
        AccessRule::subject(AGENT)
            .verbs(&["get", "list", "watch"])
            .resources("rbac.authorization.k8s.io", &["roles", "rolebindings"]),
    );
    fake.allow(
        AccessRule::subject(AGENT)
            .verbs(&["create"])
            .resources("authorization.k8s.io", &["subjectaccessreviews"]),
    );
    fake.allow(
        AccessRule::subject(AGENT)
            .verbs(&["impersonate"])
            .resources("", &["serviceaccounts"])
            .in_namespace(NS),
    );
}

/// Lets the executor do `verbs` on ConfigMaps of [`NS`].
fn grant(fake: &FakeKube, verbs: &[&str]) {
    fake.allow(
        AccessRule::service_account(NS, "deployer")
            .verbs(verbs)
            .resources("", &["configmaps"])
            .in_namespace(NS),
    );
}

/// The fake API server with namespaces [`NS`] and `team-b`, then serving a least-privilege
/// agent, and the agent's backend on it.
async fn cluster() -> (FakeKube, KubeBackend) {
    let fake = FakeKube::start().await;
    let kube = tokio::time::timeout(SOON, KubeBackend::connect(Some(&fake.kubeconfig())))
        .await
        .expect("connected in time")
        .expect("connect to the fake API server");
    for ns in [NS, "team-b"] {
        let object = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        kube.apply(&manifest_id(&object).unwrap(), &object, &Strategy::Update)
            .await
            .expect("namespace");
    }
    least_privilege(&fake);
    fake.authenticate_as(AGENT);
    (fake, kube)
}

/// The writes (`METHOD /path?query`) of `/configmaps` the fake served.
fn config_map_writes(lines: impl IntoIterator<Item = String>) -> Vec<String> {
    lines
        .into_iter()
        .filter(|r| r.contains("/configmaps") && !r.starts_with("GET "))
        .collect()
}

#[tokio::test]
async fn an_executors_writes_reads_and_deletes_go_as_its_service_account_without_groups() {
    let (fake, kube) = cluster().await;
    grant(&fake, &["*"]);
    let executor = deployer();
    let id = manifest_id(&config_map(NS, "one")).unwrap();
    // Forced: the update before it, a PUT, made the ConfigMap's fields the "unknown" manager's.
    let ssa = Strategy::ServerSideApply {
        force: true,
        field_manager: "work-agent".into(),
    };
    let steps = async {
        for (value, strategy, outcome) in [
            ("one", &Strategy::Update, ApplyOutcome::Created),
            ("two", &Strategy::Update, ApplyOutcome::Updated),
            ("three", &ssa, ApplyOutcome::Updated),
        ] {
            let done = kube
                .apply_as(Some(&executor), &id, &config_map(NS, value), strategy)
                .await;
            assert_eq!(done, Ok(outcome), "{value}");
        }
        let read = kube.get_as(Some(&executor), &id).await.unwrap().unwrap();
        assert_eq!(read["data"]["a"], "three");
        assert_eq!(kube.delete_as(Some(&executor), &id).await, Ok(true));
    };
    tokio::time::timeout(SOON, steps).await.expect("in time");
    assert!(fake.get(&settings(NS)).is_none(), "not deleted");

    let impersonated = fake.impersonations();
    for i in &impersonated {
        assert_eq!(i.user, EXECUTOR, "{i:?}");
        assert!(i.groups.is_empty(), "groups sent: {i:?}");
    }
    let path = format!("/api/v1/namespaces/{NS}/configmaps");
    let writes = config_map_writes(impersonated.iter().map(|i| i.request.clone()));
    for method in ["POST", "PUT", "PATCH", "DELETE"] {
        assert!(
            writes
                .iter()
                .any(|r| r.starts_with(&format!("{method} {path}"))),
            "no {method} as the executor: {writes:#?}"
        );
    }
    // Every write of the work's resource went as the executor, none as the agent.
    assert_eq!(config_map_writes(fake.requests()), writes);
    // Reads too: the one an update compares with, and the executor's own watch cache.
    assert!(
        impersonated
            .iter()
            .any(|i| i.request.starts_with(&format!("GET {path}/settings"))),
        "{impersonated:#?}"
    );
}

#[tokio::test]
async fn a_refusal_of_the_executor_is_the_api_servers_own_message() {
    let (fake, kube) = cluster().await;
    let executor = deployer();
    let id = manifest_id(&config_map(NS, "one")).unwrap();
    let apply = |executor: Option<Executor>, id: ManifestId| {
        let kube = &kube;
        async move {
            let object = config_map(&id.namespace, "one");
            tokio::time::timeout(
                SOON,
                kube.apply_as(executor.as_ref(), &id, &object, &Strategy::Update),
            )
            .await
            .expect("in time")
        }
    };

    // The executor may read but not write: the spoke's RBAC decides, not the agent's rights.
    grant(&fake, &["get", "list", "watch"]);
    assert_eq!(
        apply(Some(executor.clone()), id.clone()).await,
        Err(BackendError::Forbidden(format!(
            "configmaps \"settings\" is forbidden: User \"{EXECUTOR}\" cannot create resource \
             \"configmaps\" in API group \"\" in the namespace \"{NS}\""
        )))
    );
    assert!(fake.get(&settings(NS)).is_none());

    // Without an executor the agent writes as itself, which least privilege does not allow.
    assert_eq!(
        apply(None, id.clone()).await,
        Err(BackendError::Forbidden(format!(
            "configmaps \"settings\" is forbidden: User \"{AGENT}\" cannot create resource \
             \"configmaps\" in API group \"\" in the namespace \"{NS}\""
        )))
    );

    // A ServiceAccount of a namespace the agent was not given cannot be acted as at all.
    let elsewhere = Executor {
        namespace: "team-b".into(),
        name: "deployer".into(),
    };
    let other = manifest_id(&config_map("team-b", "one")).unwrap();
    assert_eq!(
        apply(Some(elsewhere), other).await,
        Err(BackendError::Forbidden(format!(
            "serviceaccounts \"deployer\" is forbidden: User \"{AGENT}\" cannot impersonate \
             resource \"serviceaccounts\" in API group \"\" in the namespace \"team-b\""
        )))
    );

    // A delete goes as the executor too: what it may create, it may not delete here.
    grant(&fake, &["create", "update", "patch"]);
    assert_eq!(
        apply(Some(executor.clone()), id.clone()).await,
        Ok(ApplyOutcome::Created)
    );
    let deleted = tokio::time::timeout(SOON, kube.delete_as(Some(&executor), &id))
        .await
        .expect("in time");
    assert_eq!(
        deleted,
        Err(BackendError::Forbidden(format!(
            "configmaps \"settings\" is forbidden: User \"{EXECUTOR}\" cannot delete resource \
             \"configmaps\" in API group \"\" in the namespace \"{NS}\""
        )))
    );
    assert!(fake.get(&settings(NS)).is_some(), "deleted by the agent");
}

#[tokio::test]
async fn an_executors_role_granting_more_than_it_holds_is_refused_as_escalation() {
    let (fake, kube) = cluster().await;
    grant(&fake, &["get"]);
    // Every verb but `escalate` (which `*` would include).
    fake.allow(
        AccessRule::service_account(NS, "deployer")
            .verbs(&[
                "get", "list", "watch", "create", "update", "patch", "delete",
            ])
            .resources("rbac.authorization.k8s.io", &["roles"])
            .in_namespace(NS),
    );
    let role = |resource: &str| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "reader", "namespace": NS},
            "rules": [{"apiGroups": [""], "resources": [resource], "verbs": ["get"]}]})
    };
    let executor = deployer();
    let apply = |object: Value| {
        let (kube, executor) = (&kube, &executor);
        async move {
            let id = manifest_id(&object).unwrap();
            tokio::time::timeout(
                SOON,
                kube.apply_as(Some(executor), &id, &object, &Strategy::Update),
            )
            .await
            .expect("in time")
        }
    };
    let refused = apply(role("secrets")).await;
    let Err(BackendError::Forbidden(message)) = refused else {
        panic!("a Role granting what the executor lacks was not refused: {refused:?}");
    };
    assert!(
        message.starts_with(&format!(
            "the executor {EXECUTOR} may not create roles.rbac.authorization.k8s.io \"reader\": \
             permission escalation (roles.rbac.authorization.k8s.io \"reader\" is forbidden: "
        )),
        "{message}"
    );
    assert!(message.contains("secrets"), "{message}");
    assert_eq!(apply(role("configmaps")).await, Ok(ApplyOutcome::Created));
}

/// An agent's work execution on the fake cluster, fed spec events directly (no hub), with the
/// status reports it publishes.
struct Spoke {
    _nats: NatsServer,
    fake: FakeKube,
    manager: WorkManager,
    metrics: Arc<flotilla_agent::metrics::AgentMetrics>,
    reports: async_nats::Subscriber,
    _state: tempfile::TempDir,
}

impl Spoke {
    async fn start() -> Self {
        Self::start_with(WorkConfig {
            status_interval: Duration::from_millis(200),
            ..WorkConfig::default()
        })
        .await
    }

    async fn start_with(config: WorkConfig) -> Self {
        let common::StatusFeed { nats, js, reports } = common::status_feed().await;
        let (fake, kube) = cluster().await;
        let state = tempfile::tempdir().expect("state dir");
        let store = Arc::new(LocalStore::open(state.path(), CLUSTER).expect("local store"));
        let metrics = config.metrics.clone();
        let publisher = Publisher::new(
            &js,
            None,
            store.clone(),
            CLUSTER,
            MAX,
            config.metrics.clone(),
        );
        let manager = WorkManager::start(CLUSTER, Arc::new(kube), store, publisher, config)
            .expect("work manager");
        Self {
            _nats: nats,
            fake,
            manager,
            metrics,
            reports,
            _state: state,
        }
    }

    /// Sends the hub's spec event for `work`.
    async fn spec(&mut self, action: Action, work: &ManifestWork) {
        let meta = work.metadata.clone().unwrap_or_default();
        let event = Event::new(works::spec_type(action), "flotilla-hub", CLUSTER, work)
            .with_resource_id(works::resource_id(CLUSTER, &meta.name))
            .with_resource_version(meta.generation);
        self.manager.on_spec(&event).await;
    }

    /// Waits for a status report that `done` accepts.
    async fn report(
        &mut self,
        what: &str,
        done: impl Fn(&WorkStatusReport) -> bool,
    ) -> WorkStatusReport {
        let wait = async {
            while let Some(msg) = self.reports.next().await {
                let report: WorkStatusReport = Event::decode(&msg.payload, MAX)
                    .and_then(|e| e.decode_data("WorkStatusReport"))
                    .expect("a status report");
                if done(&report) {
                    return report;
                }
            }
            panic!("the status subscription ended");
        };
        tokio::time::timeout(SOON, wait)
            .await
            .unwrap_or_else(|_| panic!("no report: {what}"))
    }
}

/// The work `name` at `generation` with one ConfigMap of value `value`, as the hub sends it.
fn work(name: &str, generation: i64, executor: bool, value: &str) -> ManifestWork {
    let executor = if executor {
        format!(
            "  executor:\n    subject:\n      type: ServiceAccount\n      serviceAccount: {{namespace: {NS}, name: deployer}}\n"
        )
    } else {
        String::new()
    };
    let doc = format!(
        "apiVersion: work.open-cluster-management.io/v1\nkind: ManifestWork\n\
         metadata: {{namespace: {CLUSTER}, name: {name}}}\nspec:\n{executor}  workload:\n    manifests:\n\
         \x20     - {{apiVersion: v1, kind: ConfigMap, metadata: {{name: settings, namespace: {NS}}}, data: {{a: {value}}}}}\n"
    );
    let mut w = match parse_documents(&doc).remove(0) {
        Ok(Document::Work(w)) => w,
        other => panic!("not a work: {other:?}"),
    };
    if let Some(m) = w.metadata.as_mut() {
        m.generation = generation;
    }
    w
}

/// The `Applied` condition of the report's first manifest: (status, message).
fn applied(r: &WorkStatusReport) -> Option<(String, String)> {
    let manifest = r
        .status
        .as_ref()?
        .resource_status
        .as_ref()?
        .manifests
        .first()?;
    manifest
        .conditions
        .iter()
        .find(|c| c.r#type == "Applied")
        .map(|c| (c.status.clone(), c.message.clone()))
}

/// The spoke's RBAC decides, not the agent's cached pre-check: a right revoked after the
/// executor's SubjectAccessReviews were answered (and cached) makes the next write fail, and
/// the manifest's Applied condition carries the API server's refusal; the work's delete goes
/// as the executor.
#[tokio::test]
async fn an_api_server_refusal_of_the_executor_is_reported_verbatim_on_the_applied_condition() {
    let mut spoke = Spoke::start().await;
    grant(&spoke.fake, &["*"]);
    spoke
        .spec(Action::CreateRequest, &work("config", 1, true, "one"))
        .await;
    spoke
        .report("applied", |r| {
            r.observed_generation == 1 && applied(r).is_some_and(|(s, _)| s == "True")
        })
        .await;
    assert_eq!(spoke.fake.get(&settings(NS)).unwrap()["data"]["a"], "one");

    // Revoked: the executor may still read, no longer write.
    spoke.fake.revoke(EXECUTOR);
    grant(&spoke.fake, &["get", "list", "watch"]);
    spoke
        .spec(Action::UpdateRequest, &work("config", 2, true, "two"))
        .await;
    let report = spoke
        .report("refused", |r| {
            r.observed_generation == 2 && applied(r).is_some_and(|(s, _)| s == "False")
        })
        .await;
    let (_, message) = applied(&report).unwrap();
    let refusal = format!(
        "forbidden: configmaps \"settings\" is forbidden: User \"{EXECUTOR}\" cannot update \
         resource \"configmaps\" in API group \"\" in the namespace \"{NS}\""
    );
    assert!(message.ends_with(&refusal), "{message}");
    assert_eq!(spoke.fake.get(&settings(NS)).unwrap()["data"]["a"], "one");

    // Deleting the work deletes its ConfigMap as the executor.
    grant(&spoke.fake, &["delete"]);
    spoke
        .spec(Action::DeleteRequest, &work("config", 2, true, "two"))
        .await;
    spoke.report("deleted", |r| r.deleted).await;
    assert!(spoke.fake.get(&settings(NS)).is_none());
    let delete = format!("DELETE /api/v1/namespaces/{NS}/configmaps/settings");
    assert!(
        spoke
            .fake
            .impersonations()
            .iter()
            .any(|i| i.request.starts_with(&delete) && i.user == EXECUTOR),
        "the delete did not go as the executor"
    );
    assert!(
        config_map_writes(spoke.fake.requests())
            .iter()
            .all(|r| spoke.fake.impersonations().iter().any(|i| &i.request == r)),
        "the agent wrote the work's ConfigMap as itself"
    );
}

/// A work without an executor is written as the agent; under least privilege the API server
/// refuses, and its message is the manifest's Applied condition.
#[tokio::test]
async fn a_work_without_an_executor_is_refused_in_the_api_servers_words_under_least_privilege() {
    let mut spoke = Spoke::start().await;
    spoke
        .spec(Action::CreateRequest, &work("plain", 1, false, "one"))
        .await;
    let report = spoke
        .report("refused", |r| applied(r).is_some_and(|(s, _)| s == "False"))
        .await;
    let (_, message) = applied(&report).unwrap();
    let refusal = format!(
        "forbidden: configmaps \"settings\" is forbidden: User \"{AGENT}\" cannot create \
         resource \"configmaps\" in API group \"\" in the namespace \"{NS}\""
    );
    assert!(message.ends_with(&refusal), "{message}");
    assert!(spoke.fake.get(&settings(NS)).is_none());
    assert!(spoke.fake.impersonations().is_empty());
}

/// Waits until the fake holds `settings` with `data.a == value`.
async fn holds(fake: &FakeKube, value: &str, within: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    while tokio::time::Instant::now() < deadline {
        if fake
            .get(&settings(NS))
            .is_some_and(|o| o["data"]["a"] == value)
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// A work whose periodic re-apply is an hour away: what repairs its resources is the watch.
fn watch_only(drift: flotilla_agent::work::drift::DriftRules) -> WorkConfig {
    WorkConfig {
        status_interval: Duration::from_secs(120),
        drift,
        ..WorkConfig::default()
    }
}

/// Drift is repaired from the watch within seconds, not at the periodic re-apply: a deleted
/// ConfigMap comes back, a changed field is set back, and a status-only change writes nothing.
#[tokio::test]
async fn a_resource_deleted_or_changed_on_the_spoke_is_repaired_within_seconds() {
    let mut spoke = Spoke::start_with(watch_only(Default::default())).await;
    grant(&spoke.fake, &["*"]);
    spoke
        .spec(Action::CreateRequest, &work("config", 1, true, "one"))
        .await;
    spoke
        .report("applied", |r| {
            r.observed_generation == 1 && applied(r).is_some_and(|(s, _)| s == "True")
        })
        .await;

    assert!(spoke.fake.remove(&settings(NS)));
    assert!(
        holds(&spoke.fake, "one", Duration::from_secs(5)).await,
        "the deleted ConfigMap was not re-created within 5 s"
    );
    assert!(
        spoke
            .fake
            .merge(&settings(NS), &json!({"data": {"a": "edited"}}))
    );
    assert!(
        holds(&spoke.fake, "one", Duration::from_secs(5)).await,
        "the edited field was not set back within 5 s"
    );
    assert_eq!(spoke.metrics.drift_repairs.get(), 2);
    assert_eq!(spoke.metrics.drift_fights.get(), 0);
    let writes = config_map_writes(spoke.fake.requests()).len();
    // Someone else's write that leaves the work's fields alone is not fought.
    assert!(spoke.fake.merge(
        &settings(NS),
        &json!({"metadata": {"labels": {"team": "b"}}})
    ));
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(config_map_writes(spoke.fake.requests()).len(), writes);
    assert_eq!(spoke.metrics.drift_repairs.get(), 2);
}

/// Someone who keeps changing a work's resource back is not fought at full speed: after three
/// repairs within the window, repairs wait a back-off, and the work reports `Contested`.
#[tokio::test]
async fn a_resource_someone_keeps_changing_is_repaired_with_back_off_and_reported_contested() {
    let rules = flotilla_agent::work::drift::DriftRules {
        debounce: Duration::from_millis(100),
        window: Duration::from_secs(60),
        fight_after: 3,
        backoff_min: Duration::from_secs(3),
        backoff_max: Duration::from_secs(60),
    };
    let mut spoke = Spoke::start_with(watch_only(rules)).await;
    grant(&spoke.fake, &["*"]);
    spoke
        .spec(Action::CreateRequest, &work("config", 1, true, "one"))
        .await;
    spoke
        .report("applied", |r| {
            r.observed_generation == 1 && applied(r).is_some_and(|(s, _)| s == "True")
        })
        .await;
    for round in 0..3 {
        assert!(spoke.fake.merge(
            &settings(NS),
            &json!({"data": {"a": format!("intruder-{round}")}})
        ));
        assert!(
            holds(&spoke.fake, "one", Duration::from_secs(3)).await,
            "round {round} was not repaired"
        );
    }
    let contested = spoke
        .report("contested", |r| {
            r.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.r#type == "Contested" && c.status == "True")
            })
        })
        .await;
    let condition = contested
        .status
        .unwrap()
        .conditions
        .into_iter()
        .find(|c| c.r#type == "Contested")
        .unwrap();
    assert_eq!(condition.reason, "ChangedByOthers");
    assert!(
        condition.message.contains("3 times"),
        "{}",
        condition.message
    );
    assert_eq!(spoke.metrics.drift_fights.get(), 1);

    // The fourth change waits out the back-off (3 s from the last repair), then is repaired.
    assert!(
        spoke
            .fake
            .merge(&settings(NS), &json!({"data": {"a": "intruder-3"}}))
    );
    assert!(
        !holds(&spoke.fake, "one", Duration::from_millis(1500)).await,
        "repaired at full speed during a fight"
    );
    assert!(
        holds(&spoke.fake, "one", Duration::from_secs(5)).await,
        "not repaired after the back-off"
    );
    assert_eq!(spoke.metrics.drift_repairs.get(), 4);
}

/// The `Repaired` condition of a report: (status, reason, message).
fn repaired(r: &WorkStatusReport) -> Option<(String, String, String)> {
    r.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.r#type == "Repaired")
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// A resource changed by hand and put back makes the work `Repaired` (naming it) for one drift
/// window, then the condition goes on its own — the status tick is minutes away, the window's
/// end publishes the report.
#[tokio::test]
async fn a_repair_that_wrote_is_reported_repaired_for_one_window_naming_what_was_put_back() {
    let rules = flotilla_agent::work::drift::DriftRules {
        debounce: Duration::from_millis(100),
        window: Duration::from_secs(2),
        ..Default::default()
    };
    let mut spoke = Spoke::start_with(watch_only(rules)).await;
    grant(&spoke.fake, &["*"]);
    spoke
        .spec(Action::CreateRequest, &work("config", 1, true, "one"))
        .await;
    let first = spoke
        .report("applied", |r| {
            r.observed_generation == 1 && applied(r).is_some_and(|(s, _)| s == "True")
        })
        .await;
    assert_eq!(repaired(&first), None, "the first apply is not a repair");

    assert!(
        spoke
            .fake
            .merge(&settings(NS), &json!({"data": {"a": "by-hand"}}))
    );
    let report = spoke.report("repaired", |r| repaired(r).is_some()).await;
    let (status, reason, message) = repaired(&report).unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "DriftRepaired")
    );
    assert_eq!(
        message,
        format!("1 resource changed on the cluster was put back: v1 ConfigMap {NS}/settings")
    );
    assert!(holds(&spoke.fake, "one", Duration::from_secs(1)).await);
    let started = std::time::Instant::now();
    let after = spoke
        .report("the window's end", |r| repaired(r).is_none())
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "Repaired outlived its 2 s window by {:?}",
        started.elapsed()
    );
    assert_eq!(applied(&after).map(|(s, _)| s), Some("True".into()));
}
