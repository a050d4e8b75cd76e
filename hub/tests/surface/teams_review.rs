//! Teams (issue 48): the security review's findings (docs/notes/issue-48-review.md) on a real
//! hub — a nats-server, the hub in process, the API over gRPC with CSV `member` tokens scoped
//! by a grants file. Each test names the finding it holds fixed.

use crate::common;

use common::tokens::*;
use common::*;
use flotilla_api::clusterset::LABEL_SELECTOR;
use flotilla_api::meta::CLUSTERSET_LABEL;
use flotilla_api::ocm::{Document, parse_documents};
use flotilla_api::v1::cluster_service_client::ClusterServiceClient;
use flotilla_api::v1::cluster_set_service_client::ClusterSetServiceClient;
use flotilla_api::v1::policy_service_client::PolicyServiceClient;
use flotilla_api::v1::{
    GetClusterRequest, GetPolicyRequest, LabelClusterRequest, LabelSelector, ListPoliciesRequest,
    ManagedCluster, ManagedClusterSelector, ManagedClusterSet, ManagedClusterSetSpec, ObjectMeta,
};
use flotilla_testkit::NatsServer;
use std::sync::Arc;
use std::time::Duration;
use tonic::Code;

/// ana: admin on team-a, edits team-a-apps. ben: admin on team-b and team-b-prod, edits
/// team-b-apps.
const ANA: &str = "team-a-sre-token-000011";
const BEN: &str = "team-b-sre-token-000012";

const GRANTS: &str = "apiVersion: flotilla.io/v1alpha1\nkind: Grants\nclusterSets:\n  \
    team-a:\n    admin: { groups: [team-a-sre] }\n  team-b:\n    admin: { groups: [team-b-sre] }\n  \
    team-b-prod:\n    admin: { groups: [team-b-sre] }\nnamespaces:\n  team-a-apps:\n    \
    edit: { groups: [team-a-sre] }\n  team-b-apps:\n    edit: { groups: [team-b-sre] }\n";

/// vera: no group; a fleet viewer while the grants file says so.
const VERA: &str = "fleet-view-token-000013";

/// A hub with the admin, ana, ben and vera, its grants file followed, and a channel to it.
struct Teams {
    hub: flotilla_hub::Hub,
    channel: tonic::transport::Channel,
    grants: std::path::PathBuf,
    _dir: tempfile::TempDir,
    _nats: NatsServer,
}

impl Teams {
    async fn start() -> Self {
        Self::with_grants(GRANTS).await
    }

    async fn with_grants(text: &str) -> Self {
        Self::launch(text, false).await
    }

    /// With `secure`, on a nats-server with accounts and a hub that mints join credentials.
    async fn launch(text: &str, secure: bool) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let secured = secure.then(|| {
            let port = flotilla_testkit::free_port();
            let sd = flotilla_auth::SecureDir::init(
                &dir.path().join("secure"),
                &flotilla_auth::InitOptions {
                    nats_listen: format!("127.0.0.1:{port}"),
                    ..Default::default()
                },
            )
            .unwrap();
            (
                NatsServer::start_from_config(sd.server_conf.clone(), port),
                sd,
            )
        });
        let (nats, secured) = match secured {
            Some((nats, sd)) => (nats, Some(sd)),
            None => (NatsServer::start(), None),
        };
        let grants = dir.path().join("grants.yaml");
        std::fs::write(&grants, text).unwrap();
        let tokens = flotilla_hub::grpc::auth::Tokens::parse(
            "tokens.csv",
            &format!(
                "{TOKENS}{ANA},ana,member,team-a-sre\n{BEN},ben,member,team-b-sre\n\
                 {VERA},vera,member\n"
            ),
        )
        .unwrap()
        .with_grants(Arc::new(flotilla_hub::grants::file::load(&grants).unwrap()))
        .with_grants_file(&grants);
        let mut config = hub_config(&nats.url());
        config.api.tokens = Some(tokens);
        if let Some(sd) = secured {
            config.nats.credentials_file = Some(sd.hub_creds.clone());
            config.security = Some(flotilla_hub::security::SecurityConfig {
                dir: sd.dir.clone(),
                credentials_ttl: Duration::from_secs(3600),
            });
        }
        let hub = start_hub(config).await;
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", hub.grpc_addr))
            .unwrap()
            .connect()
            .await
            .unwrap();
        Self {
            hub,
            channel,
            grants,
            _dir: dir,
            _nats: nats,
        }
    }

    /// Replaces the grants file (the hub reads it within its 2 s poll).
    fn reload(&self, text: &str) {
        std::fs::write(&self.grants, text).unwrap();
    }

    fn clusters(&self, token: &'static str) -> ClusterServiceClient<Authed> {
        ClusterServiceClient::with_interceptor(self.channel.clone(), Bearer(token))
    }

    fn policies(&self, token: &'static str) -> PolicyServiceClient<Authed> {
        PolicyServiceClient::with_interceptor(self.channel.clone(), Bearer(token))
    }

    /// The admin makes `sets` (retried until the controllers serve them).
    async fn sets(&self, sets: &[ManagedClusterSet]) {
        let mut admin =
            ClusterSetServiceClient::with_interceptor(self.channel.clone(), Bearer(ADMIN));
        for set in sets {
            let deadline = tokio::time::Instant::now() + SOON;
            while let Err(e) = admin.apply_cluster_set(set.clone()).await {
                assert!(tokio::time::Instant::now() < deadline, "{e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

fn set(name: &str, selector: Option<(&str, &str)>) -> ManagedClusterSet {
    let cluster_selector = selector.map(|(k, v)| ManagedClusterSelector {
        selector_type: LABEL_SELECTOR.into(),
        label_selector: Some(LabelSelector {
            match_labels: [(k.to_string(), v.to_string())].into(),
            ..Default::default()
        }),
    });
    ManagedClusterSet {
        metadata: Some(ObjectMeta {
            name: name.into(),
            ..Default::default()
        }),
        spec: Some(ManagedClusterSetSpec {
            cluster_selector,
            ..Default::default()
        }),
        status: None,
    }
}

fn cluster(name: &str, labels: &[(&str, &str)]) -> ManagedCluster {
    ManagedCluster {
        metadata: Some(ObjectMeta {
            name: name.into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Waits until the admin reads cluster `name` in the set index's sets (`labels` present).
async fn labelled(admin: &mut ClusterServiceClient<Authed>, name: &str, key: &str, value: &str) {
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        let c = admin
            .get_cluster(GetClusterRequest { name: name.into() })
            .await
            .unwrap()
            .into_inner();
        if c.metadata
            .as_ref()
            .and_then(|m| m.labels.get(key))
            .is_some_and(|v| v == value)
        {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name} never {key}={value}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_label_that_joins_another_team_s_label_selector_set_needs_admin_on_that_set() {
    // Review r1 §3 (and §8: a team's own cluster document applied again is not a move).
    let teams = Teams::start().await;
    teams
        .sets(&[
            set("team-a", None),
            set("team-b", None),
            set("team-b-prod", Some(("env", "prod"))),
        ])
        .await;
    let mut admin = teams.clusters(ADMIN);
    admin
        .apply_cluster(cluster("a1", &[(CLUSTERSET_LABEL, "team-a")]))
        .await
        .unwrap();
    labelled(&mut admin, "a1", CLUSTERSET_LABEL, "team-a").await;
    // The set index follows within its coalescing window.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let mut ana = teams.clusters(ANA);
    let refused = ana
        .label_cluster(LabelClusterRequest {
            name: "a1".into(),
            set: [("env".to_string(), "prod".to_string())].into(),
            remove: Vec::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused}");
    assert_eq!(
        refused.message(),
        "ana (groups team-a-sre) may not label ManagedCluster a1: it needs admin on cluster set \
         \"team-b-prod\" (holds none)"
    );
    // A new cluster with the label: the same.
    let refused = ana
        .apply_cluster(cluster(
            "a9",
            &[(CLUSTERSET_LABEL, "team-a"), ("env", "prod")],
        ))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused}");
    assert!(
        refused
            .message()
            .ends_with("it needs admin on cluster set \"team-b-prod\" (holds none)"),
        "{}",
        refused.message()
    );

    // Labels that join no one else's set are ana's to write.
    ana.label_cluster(LabelClusterRequest {
        name: "a1".into(),
        set: [("tier".to_string(), "web".to_string())].into(),
        remove: Vec::new(),
    })
    .await
    .expect("a label of its own cluster");
    ana.apply_cluster(cluster(
        "a2",
        &[(CLUSTERSET_LABEL, "team-a"), ("env", "dev")],
    ))
    .await
    .expect("a new cluster in its own set");
    // §8: its cluster's document without the set label is applied to the cluster where it is.
    labelled(&mut admin, "a1", "tier", "web").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let applied = ana
        .apply_cluster(cluster("a1", &[("tier", "api")]))
        .await
        .expect("re-applying its own cluster's document is no move into default")
        .into_inner();
    let labels = &applied.metadata.as_ref().unwrap().labels;
    assert_eq!(
        labels.get(CLUSTERSET_LABEL).map(String::as_str),
        Some("team-a")
    );
    assert_eq!(labels.get("tier").map(String::as_str), Some("api"));
    teams.hub.stop().await;
}

/// A policy in `namespace`.
fn policy(namespace: &str) -> flotilla_api::v1::Policy {
    let yaml = format!(
        "apiVersion: policy.open-cluster-management.io/v1\nkind: Policy\n\
         metadata: {{name: secret-config, namespace: {namespace}}}\n\
         spec:\n  remediationAction: inform\n  policy-templates:\n    - objectDefinition:\n        \
         apiVersion: policy.open-cluster-management.io/v1\n        kind: ConfigurationPolicy\n        \
         metadata: {{name: secret-config}}\n        spec:\n          object-templates:\n            \
         - complianceType: musthave\n              objectDefinition: {{apiVersion: v1, kind: \
         Namespace, metadata: {{name: ops}}}}\n"
    );
    match parse_documents(&yaml).pop() {
        Some(Ok(Document::Policy(p))) => p,
        other => panic!("not a policy: {other:?}"),
    }
}

#[tokio::test]
async fn a_cluster_named_after_a_namespace_does_not_open_that_namespace_s_policies() {
    // Review r1 §5.
    let teams = Teams::start().await;
    teams.sets(&[set("team-a", None)]).await;
    // The fleet admin's policies in ops, a namespace no team's grant names.
    let mut admin_policies = teams.policies(ADMIN);
    let deadline = tokio::time::Instant::now() + SOON;
    while let Err(e) = admin_policies.apply_policy(policy("ops")).await {
        assert!(tokio::time::Instant::now() < deadline, "{e}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // ana names a cluster of her set after it: it reads nothing of ops.
    let mut ana = teams.clusters(ANA);
    ana.apply_cluster(cluster("ops", &[(CLUSTERSET_LABEL, "team-a")]))
        .await
        .expect("a cluster of ana's set");
    let mut admin = teams.clusters(ADMIN);
    labelled(&mut admin, "ops", CLUSTERSET_LABEL, "team-a").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut ana_policies = teams.policies(ANA);
    let listed = ana_policies
        .list_policies(ListPoliciesRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(listed.items.is_empty(), "ana lists {:?}", listed.items);
    let refused = ana_policies
        .get_policy(GetPolicyRequest {
            namespace: "ops".into(),
            name: "secret-config".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused}");

    // A workspace the grants name cannot be a cluster's name at all, not even the admin's.
    for token in [ANA, ADMIN] {
        let refused = teams
            .clusters(token)
            .apply_cluster(cluster("team-b-apps", &[(CLUSTERSET_LABEL, "team-a")]))
            .await
            .unwrap_err();
        assert_eq!(refused.code(), Code::InvalidArgument, "{refused}");
        assert_eq!(
            refused.message(),
            "metadata.name: \"team-b-apps\" is a workspace namespace in the grants file; a \
             cluster may not take a workspace's name"
        );
    }
    // Nor an agent registering under it (the cluster actor refuses it; nothing is stored).
    let agent = start_agent(agent_config("team-b-apps", &teams._nats.url()));
    wait_metric(
        &teams.hub,
        "flotilla_hub_registration_refusals_total{reason=\"workspace_name\"}",
    )
    .await;
    assert!(teams.hub.inventory.get("team-b-apps").is_none());
    agent.stop().await;
    teams.hub.stop().await;
}

/// The next event of `stream` within [`SOON`].
async fn next<T>(stream: &mut tonic::Streaming<T>) -> Result<T, tonic::Status> {
    tokio::time::timeout(SOON, stream.message())
        .await
        .expect("an event in time")
        .map(|m| m.expect("the stream goes on"))
}

#[tokio::test]
async fn a_reload_of_the_grants_reaches_watches_and_streams_opened_before_it() {
    // Review r1 §6.
    use flotilla_api::v1::placement_service_client::PlacementServiceClient;
    use flotilla_api::v1::work_service_client::WorkServiceClient;
    use flotilla_api::v1::{EventType, WatchClustersRequest, WatchPlacementsRequest};
    let before = format!("{GRANTS}fleet:\n  view: {{ users: [vera] }}\n");
    let teams = Teams::with_grants(&before).await;
    teams.sets(&[set("team-a", None)]).await;
    let mut admin = teams.clusters(ADMIN);
    admin
        .apply_cluster(cluster("a1", &[(CLUSTERSET_LABEL, "team-a")]))
        .await
        .unwrap();
    let mut admin_policies = teams.policies(ADMIN);
    let deadline = tokio::time::Instant::now() + SOON;
    while let Err(e) = admin_policies.apply_policy(policy("team-a-apps")).await {
        assert!(tokio::time::Instant::now() < deadline, "{e}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    labelled(&mut admin, "a1", CLUSTERSET_LABEL, "team-a").await;
    tokio::time::sleep(Duration::from_millis(300)).await;

    // vera (fleet view by the file) watches clusters; ana watches policies and placements and
    // holds an ApplyWorks stream open.
    let mut clusters = teams
        .clusters(VERA)
        .watch_clusters(WatchClustersRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        next(&mut clusters).await.unwrap().r#type,
        EventType::Added as i32
    );
    let mut policies = teams
        .policies(ANA)
        .watch_policies(ListPoliciesRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        next(&mut policies).await.unwrap().r#type,
        EventType::Added as i32
    );
    let mut placements =
        PlacementServiceClient::with_interceptor(teams.channel.clone(), Bearer(ANA))
            .watch_placements(WatchPlacementsRequest::default())
            .await
            .unwrap()
            .into_inner();
    let (works_tx, works_rx) = tokio::sync::mpsc::channel(4);
    let mut ana_works = WorkServiceClient::with_interceptor(teams.channel.clone(), Bearer(ANA));
    let mut results = ana_works
        .apply_works(tokio_stream::wrappers::ReceiverStream::new(works_rx))
        .await
        .unwrap()
        .into_inner();
    works_tx
        .send(common::work::config_map_work("a1", "one"))
        .await
        .unwrap();
    let written = next(&mut results).await.unwrap();
    assert_eq!(written.code, 0, "{}", written.message);

    // The file takes vera's fleet view and every grant of ana's.
    teams.reload("apiVersion: flotilla.io/v1alpha1\nkind: Grants\n");
    let gone = next(&mut clusters).await.unwrap();
    assert_eq!(
        gone.r#type,
        EventType::Deleted as i32,
        "vera's watch lets a1 go"
    );
    let gone = next(&mut policies).await.unwrap();
    assert_eq!(
        gone.r#type,
        EventType::Deleted as i32,
        "ana's watch lets the policy go"
    );
    let ended = next(&mut placements).await.unwrap_err();
    assert_eq!(ended.code(), Code::Aborted, "{ended}");
    assert_eq!(ended.message(), "the grants changed; list and watch again");
    works_tx
        .send(common::work::config_map_work("a1", "two"))
        .await
        .unwrap();
    let refused = next(&mut results).await.unwrap();
    assert_eq!(
        refused.code,
        Code::PermissionDenied as i32,
        "{}",
        refused.message
    );
    teams.hub.stop().await;
}

#[tokio::test]
async fn a_join_credential_s_cluster_waits_in_its_set_not_in_default() {
    // Review r1 §7: ana also administers `default`, the pool of unassigned clusters.
    use flotilla_api::v1::{CreateJoinTokenRequest, ListClustersRequest};
    let grants = GRANTS.replace(
        "clusterSets:\n",
        "clusterSets:\n  default:\n    admin: { groups: [team-a-sre] }\n",
    );
    let teams = Teams::launch(&grants, true).await;
    teams.sets(&[set("team-b", None)]).await;
    let mint = |set: &str| CreateJoinTokenRequest {
        cluster_name: "edge-7".into(),
        cluster_set: set.into(),
        ..Default::default()
    };
    let mut ben = teams.clusters(BEN);
    ben.create_join_token(mint("team-b"))
        .await
        .expect("ben mints a credential for a cluster of team-b");
    let mut admin = teams.clusters(ADMIN);
    labelled(&mut admin, "edge-7", CLUSTERSET_LABEL, "team-b").await;
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Pending in team-b: default's admin neither sees it nor takes it over.
    let mut ana = teams.clusters(ANA);
    let listed = ana
        .list_clusters(ListClustersRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(listed.items.is_empty(), "ana lists {:?}", listed.items);
    let refused = ana.create_join_token(mint("default")).await.unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused}");
    // ben mints again (an expired or lost credential): a call into the set it is in.
    ben.create_join_token(mint("team-b"))
        .await
        .expect("ben mints edge-7's credential again");
    teams.hub.stop().await;
}

/// Add-on `probe` (configured by AddOnDeploymentConfigs) and B's config in team-b-apps.
const PROBE: &str = "\
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: ClusterManagementAddOn
metadata: {name: probe}
spec:
  addOnMeta: {displayName: Probe, description: a test add-on}
  supportedConfigs:
    - group: addon.open-cluster-management.io
      resource: addondeploymentconfigs
---
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: AddOnDeploymentConfig
metadata: {name: prod-config, namespace: team-b-apps}
spec:
  customizedVariables:
    - {name: LEVEL, value: secret-ish}
";

/// Add-on `probe` on `cluster`, configured by team-b-apps/prod-config.
const PROBE_ON: &str = "\
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: ManagedClusterAddOn
metadata: {name: probe, namespace: CLUSTER}
spec:
  installNamespace: probe
  configs:
    - group: addon.open-cluster-management.io
      resource: addondeploymentconfigs
      namespace: team-b-apps
      name: prod-config
";

#[tokio::test]
async fn an_add_on_names_only_deployment_configs_its_writer_may_read() {
    // Review r1 §10.
    use flotilla_api::v1::GetAddOnRequest;
    use flotilla_api::v1::add_on_service_client::AddOnServiceClient;
    let teams = Teams::start().await;
    teams
        .sets(&[set("team-a", None), set("team-b", None)])
        .await;
    let mut admin = teams.clusters(ADMIN);
    admin
        .apply_cluster(cluster("a-1", &[(CLUSTERSET_LABEL, "team-a")]))
        .await
        .unwrap();
    labelled(&mut admin, "a-1", CLUSTERSET_LABEL, "team-a").await;
    let addons = |token| AddOnServiceClient::with_interceptor(teams.channel.clone(), Bearer(token));
    let mut admin_addons = addons(ADMIN);
    for doc in parse_documents(PROBE) {
        let doc = doc.unwrap();
        let deadline = tokio::time::Instant::now() + SOON;
        loop {
            let applied = match doc.clone() {
                Document::ClusterManagementAddOn(a) => admin_addons
                    .apply_cluster_management_add_on(a)
                    .await
                    .map(drop),
                Document::AddOnDeploymentConfig(c) => admin_addons
                    .apply_add_on_deployment_config(c)
                    .await
                    .map(drop),
                other => panic!("fixture {other:?}"),
            };
            match applied {
                Ok(()) => break,
                Err(e) => assert!(tokio::time::Instant::now() < deadline, "{e}"),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let probe_on = |cluster: &str| match parse_documents(&PROBE_ON.replace("CLUSTER", cluster))
        .remove(0)
        .unwrap()
    {
        Document::ManagedClusterAddOn(a) => a,
        other => panic!("fixture {other:?}"),
    };

    // ana (admin on team-a, nothing on team-b-apps) may not point her add-on at B's config.
    let deadline = tokio::time::Instant::now() + SOON;
    let refused = loop {
        let refused = addons(ANA)
            .apply_managed_cluster_add_on(probe_on("a-1"))
            .await
            .unwrap_err();
        // Until the set index has a-1 in team-a, the refusal is about the cluster.
        if refused.message().contains("prod-config") || tokio::time::Instant::now() > deadline {
            break refused;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused}");
    assert!(
        refused.message().starts_with(
            "ana (groups team-a-sre) may not use addondeploymentconfigs team-b-apps/prod-config \
             in ManagedClusterAddOn a-1/probe: it needs view on namespace \"team-b-apps\""
        ),
        "{refused}"
    );

    // The fleet admin may; then B's editor cannot delete the config in use, and is not told
    // which cluster of another team uses it.
    admin_addons
        .apply_managed_cluster_add_on(probe_on("a-1"))
        .await
        .expect("a fleet admin reads every namespace");
    let refused = addons(BEN)
        .delete_add_on_deployment_config(GetAddOnRequest {
            namespace: "team-b-apps".into(),
            name: "prod-config".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(
        refused.message(),
        "AddOnDeploymentConfig team-b-apps/prod-config is in use by 1 ManagedClusterAddOn of a \
         cluster you do not see: change their configs first",
        "{refused}"
    );
    teams.hub.stop().await;
}

/// §13: an update decided on a set or binding as stored — its admin's, or a namespace
/// editor's without `bind` — is aborted when the object is gone (or the set's selector
/// changed) by the time it is written; it never re-creates what needed another grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_decided_on_a_set_or_binding_that_is_gone_is_aborted_not_recreated() {
    use flotilla_hub::clusterset::{ClusterSets, Expect, SetError};
    let t = Teams::start().await;
    let ctl = t.hub.controllers().expect("the controllers");
    let sets = ctl.get::<ClusterSets>();
    let set = |selector: Option<ManagedClusterSelector>| ManagedClusterSet {
        metadata: Some(ObjectMeta {
            name: "team-a".into(),
            ..Default::default()
        }),
        spec: Some(ManagedClusterSetSpec {
            cluster_selector: selector,
            ..Default::default()
        }),
        status: None,
    };
    let stored = sets.apply_set(set(None)).await.unwrap();
    let selector = stored.spec.unwrap().cluster_selector;
    // As stored: the update goes through.
    sets.apply_set_if(set(selector.clone()), Expect::Stored)
        .await
        .unwrap();
    // Deleted meanwhile: aborted, and the set stays gone.
    sets.delete_set("team-a").await.unwrap();
    let e = (sets
        .apply_set_if(set(selector.clone()), Expect::Stored)
        .await)
        .unwrap_err();
    assert!(matches!(e, SetError::Conflict(_)), "{e}");
    assert!(
        e.to_string()
            .contains("was deleted or its clusterSelector changed"),
        "{e}"
    );
    assert!(sets.get_set("team-a").is_err(), "re-created");
    // Its selector changed meanwhile (by a fleet admin): aborted too.
    sets.apply_set(set(None)).await.unwrap();
    let other = Some(ManagedClusterSelector {
        selector_type: LABEL_SELECTOR.into(),
        label_selector: Some(LabelSelector::default()),
    });
    sets.apply_set(set(other)).await.unwrap();
    let e = (sets.apply_set_if(set(selector), Expect::Stored).await).unwrap_err();
    assert!(matches!(e, SetError::Conflict(_)), "{e}");

    let binding = flotilla_api::v1::ManagedClusterSetBinding {
        metadata: Some(ObjectMeta {
            name: "team-b".into(),
            namespace: "team-b-apps".into(),
            ..Default::default()
        }),
        spec: Some(flotilla_api::v1::ManagedClusterSetBindingSpec {
            cluster_set: "team-b".into(),
        }),
        status: None,
    };
    sets.apply_binding(binding.clone()).await.unwrap();
    sets.apply_binding_if(binding.clone(), Expect::Stored)
        .await
        .unwrap();
    sets.delete_binding("team-b-apps", "team-b").await.unwrap();
    let e = (sets.apply_binding_if(binding, Expect::Stored).await).unwrap_err();
    assert!(matches!(e, SetError::Conflict(_)), "{e}");
    assert!(sets.list_bindings("team-b-apps").is_empty(), "re-created");
    t.hub.stop().await;
}
