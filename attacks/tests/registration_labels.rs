//! Registration cannot choose its privileges (issue 42, finding 2): whoever holds the fleet's
//! `bootstrap.creds` registers a new name whose labels name the `prod` cluster set. Under
//! `--auto-accept` and under a registration-source ClusterImportPolicy that admits it on its
//! other (registrant-chosen) labels, the cluster is accepted — but in `default`, never in
//! `prod`: no placement of the `prod` set decides it and it receives none of the set's works.
//! The answer says which labels the hub dropped. The set comes from the admin instead: a join
//! credential minted with `--set edge` puts its cluster in `edge`, whatever the agent's own
//! labels say.

use flotilla_api::meta::CLUSTERSET_LABEL;
use flotilla_api::v1::{RegistrationResponse, RegistrationState};
use flotilla_attacks::fleet::{SOON, accepted};
use flotilla_attacks::{
    AgentOptions, Fleet, HubOptions, Registration, Server, on_every_server, wait_for,
};
use serde_json::Value;

/// The `prod` set (ExclusiveClusterSetLabel), bound to `default`, a placement of it that
/// tolerates clusters without an agent yet, and a ManifestWorkReplicaSet delivering a ConfigMap
/// to every cluster it decides.
const PROD: &str = "apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSet
metadata:
  name: prod
---
apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSetBinding
metadata:
  name: prod
  namespace: default
spec:
  clusterSet: prod
---
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata:
  name: prod-apps
  namespace: default
spec:
  clusterSets:
    - prod
  tolerations:
    - key: cluster.open-cluster-management.io/unreachable
      operator: Exists
    - key: cluster.open-cluster-management.io/unavailable
      operator: Exists
---
apiVersion: work.open-cluster-management.io/v1alpha1
kind: ManifestWorkReplicaSet
metadata:
  name: prod-secrets
  namespace: default
spec:
  placementRefs:
    - name: prod-apps
  manifestWorkTemplate:
    workload:
      manifests:
        - apiVersion: v1
          kind: ConfigMap
          metadata:
            name: prod-only
            namespace: default
          data:
            secret: prod
";

/// A cluster of the `prod` set made by the admin ahead of its agent: the control that the
/// set's works do reach its members.
const PROD_MEMBER: &str = "apiVersion: cluster.open-cluster-management.io/v1
kind: ManagedCluster
metadata:
  name: prod-1
  labels:
    cluster.open-cluster-management.io/clusterset: prod
spec:
  hubAcceptsClient: true
";

/// A registration-source import policy admitting registrants labelled `site=edge` — a label
/// the registrant chooses — with a template that names no set.
const EDGE_POLICY: &str = "apiVersion: cluster.flotilla.io/v1alpha1
kind: ClusterImportPolicy
metadata:
  name: edge-sites
spec:
  source:
    group: registration.flotilla.io
    resource: registrations
    selector: 'source.metadata.labels[\"site\"] == \"edge\"'
  template: '{\"labels\": {\"imported\": \"true\"}}'
";

fn state(r: &RegistrationResponse) -> RegistrationState {
    RegistrationState::try_from(r.state).unwrap_or(RegistrationState::Unspecified)
}

fn set_of(c: &Value) -> String {
    c["metadata"]["labels"][CLUSTERSET_LABEL]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// The bootstrap holder registers `name` asking for the `prod` set (and `site=edge`): the
/// registration is answered.
async fn register_asking_for_prod(fleet: &Fleet, name: &str) -> RegistrationResponse {
    let attacker = fleet.attacker_with_bootstrap().await;
    let key = nkeys::KeyPair::new_user().public_key();
    let mut reg = Registration::new(name, &key);
    reg.labels = vec![
        (CLUSTERSET_LABEL.into(), "prod".into()),
        ("site".into(), "edge".into()),
    ];
    match attacker.register(&reg).await {
        Ok(a) => a,
        Err(e) => fleet.fail(&format!("the registration of {name} was not answered: {e}")),
    }
}

/// The answer names the set label as dropped, and so does `describe cluster`.
async fn check_drop_reported(fleet: &Fleet, name: &str, answer: &RegistrationResponse) {
    fleet.check(
        answer.dropped_labels.iter().any(|l| l == CLUSTERSET_LABEL)
            && answer.message.contains(CLUSTERSET_LABEL),
        || format!("the answer does not say the set label was dropped: {answer:?}"),
    );
    let describe = fleet.cli_ok(&["describe", "cluster", name]).await;
    fleet.check(
        describe.contains(&format!("Dropped labels:    {CLUSTERSET_LABEL}=prod")),
        || format!("describe does not show the dropped set label: {describe}"),
    );
}

/// `name` was accepted, yet is not in `prod`, no decision of the `prod` placement names it and
/// it has none of the set's works — checked once the admin's `prod-1`, created after it, has
/// them (so the placement has seen `name`).
async fn check_not_in_prod(fleet: &Fleet, name: &str) {
    fleet.apply(PROD_MEMBER).await;
    let control = wait_for!(
        fleet,
        "the prod set's work on prod-1 (the control)",
        SOON,
        fleet.works("prod-1").await.filter(|w| !w.is_empty())
    );
    let cluster = match fleet.cluster(name).await {
        Some(c) => c,
        None => fleet.fail(&format!("{name} is gone")),
    };
    fleet.check(set_of(&cluster) != "prod", || {
        format!("{name} chose its own cluster set: it is in prod ({cluster})")
    });
    fleet.check(set_of(&cluster) == "default", || {
        format!("{name} is not in the default set: {cluster}")
    });
    let decisions = fleet
        .cli_ok(&[
            "get",
            "decisions",
            "prod-apps",
            "-n",
            "default",
            "-o",
            "json",
        ])
        .await;
    fleet.check(!decisions.contains(name), || {
        format!("the prod placement decided {name}: {decisions}")
    });
    let works = fleet.works(name).await.unwrap_or_default();
    for w in &control {
        let work = &w["metadata"]["name"];
        fleet.check(
            !works.iter().any(|x| x["metadata"]["name"] == *work),
            || format!("{name} received the prod set's work {work}"),
        );
    }
}

on_every_server!(a_bootstrap_registrant_naming_prod_is_auto_accepted_outside_prod);

/// Under `--auto-accept --auto-accept-labels site=edge` (a label the registrant chooses), a
/// bootstrap registrant labelled `site=edge` and naming `prod` is accepted in `default`.
async fn a_bootstrap_registrant_naming_prod_is_auto_accepted_outside_prod(server: Server) {
    let mut fleet = Fleet::secure(server).await;
    let hub = HubOptions::new()
        .switch("--auto-accept")
        .flag("--auto-accept-labels", "site=edge");
    fleet.hub(hub).await;
    fleet.apply(PROD).await;
    let answer = register_asking_for_prod(&fleet, "evil-auto").await;
    fleet.check(state(&answer) == RegistrationState::Accepted, || {
        format!("auto-accept did not accept the registrant (the control): {answer:?}")
    });
    wait_for!(
        fleet,
        "evil-auto accepted",
        SOON,
        fleet.cluster("evil-auto").await.filter(accepted)
    );
    check_not_in_prod(&fleet, "evil-auto").await;
    check_drop_reported(&fleet, "evil-auto", &answer).await;
}

on_every_server!(a_bootstrap_registrant_naming_prod_is_imported_by_a_policy_outside_prod);

/// Under a registration-source import policy admitting `site=edge`, a bootstrap registrant
/// labelled `site=edge` and naming `prod` is imported in `default`.
async fn a_bootstrap_registrant_naming_prod_is_imported_by_a_policy_outside_prod(server: Server) {
    let mut fleet = Fleet::secure(server).await;
    fleet.hub(HubOptions::new()).await;
    fleet.apply(PROD).await;
    fleet.apply(EDGE_POLICY).await;
    let answer = register_asking_for_prod(&fleet, "evil-import").await;
    let imported = wait_for!(
        fleet,
        "evil-import accepted by the import policy (the control)",
        SOON,
        fleet.cluster("evil-import").await.filter(accepted)
    );
    fleet.check(
        imported["metadata"]["labels"]["imported"].as_str() == Some("true"),
        || format!("the policy's template was not applied: {imported}"),
    );
    check_not_in_prod(&fleet, "evil-import").await;
    check_drop_reported(&fleet, "evil-import", &answer).await;
}

on_every_server!(a_join_credential_naming_a_set_puts_its_cluster_in_that_set);

/// `flotilla join-token edge-1 --set edge`: the agent registering with it is in `edge`, though
/// its own labels ask for `prod`.
async fn a_join_credential_naming_a_set_puts_its_cluster_in_that_set(server: Server) {
    let mut fleet = Fleet::secure(server).await;
    fleet.hub(HubOptions::new()).await;
    let join = fleet
        .join_token("edge-1", &["--accept", "--set", "edge"])
        .await;
    // Precreated in the credential's set, not parked in `default` where other teams could
    // reach it (issue 48's review §7).
    let before = fleet.cluster("edge-1").await;
    fleet.check(before.as_ref().is_some_and(|c| set_of(c) == "edge"), || {
        format!("the join credential's cluster was not precreated in its set: {before:?}")
    });
    fleet.agent_with(
        "edge-1",
        AgentOptions::default()
            .creds(&join)
            .flag("--label", &format!("{CLUSTERSET_LABEL}=prod")),
    );
    let c = fleet.wait_available("edge-1").await;
    fleet.check(set_of(&c) == "edge", || {
        format!("the join credential's set was not applied: {c}")
    });
    let describe = fleet.cli_ok(&["describe", "cluster", "edge-1"]).await;
    fleet.check(describe.contains("clusterset=edge"), || {
        format!("describe does not show the set: {describe}")
    });
}
