//! Teams (issue 48): the grants file on a real hub (a nats-server, the hub in process, the
//! API over gRPC). A grants file is read at start (`--grants-file`; a file that does not parse
//! stops the hub naming its line and field) and followed while the hub runs; two teams with
//! their own cluster sets see only their clusters and works, are refused writes across the
//! fence naming the missing grant, and follow a cluster that moves between their sets.

use crate::common;

use common::tokens::*;
use common::*;
use flotilla_api::v1::cluster_service_client::ClusterServiceClient;
use flotilla_api::v1::{ManagedCluster, ObjectMeta};
use flotilla_testkit::NatsServer;
use std::sync::Arc;
use tonic::Code;

fn cluster(name: &str) -> ManagedCluster {
    ManagedCluster {
        metadata: Some(ObjectMeta {
            name: name.into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn a_grants_file_that_does_not_parse_stops_the_hub_naming_its_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, TOKENS).unwrap();
    let grants = dir.path().join("grants.yaml");
    std::fs::write(
        &grants,
        "apiVersion: flotilla.io/v1alpha1\nkind: Grants\nclusterSets:\n  team-a:\n    edits: { users: [bob] }\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_flotilla-hub"))
        .arg("--api-token-file")
        .arg(&tokens)
        .arg("--grants-file")
        .arg(&grants)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    let want = format!(
        "--grants-file: {}:5:5: clusterSets.team-a: unknown field `edits`",
        grants.display()
    );
    assert!(err.contains(&want), "want {want}\nin\n{err}");

    // Every wrong name at once.
    std::fs::write(
        &grants,
        "apiVersion: flotilla.io/v1alpha1\nkind: Grants\nnamespaces:\n  Team-A:\n    edit: { users: [\"\"] }\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_flotilla-hub"))
        .arg("--api-token-file")
        .arg(&tokens)
        .arg("--grants-file")
        .arg(&grants)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    for want in [
        r#"namespaces."Team-A": "Team-A" contains 'T'"#,
        r#"namespaces."Team-A".edit.users[0]: "" is not a user name"#,
    ] {
        assert!(err.contains(want), "want {want}\nin\n{err}");
    }

    // Grants without identities to grant to.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_flotilla-hub"))
        .arg("--grants-file")
        .arg(&grants)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--grants-file: grants need identities to grant to; give --api-token-file"),
        "{err}"
    );
}

#[tokio::test]
async fn csv_tokens_keep_their_fleet_roles_and_a_fleet_admin_of_the_file_may_write() {
    let nats = NatsServer::start();
    let grants = flotilla_hub::grants::file::parse(
        "grants.yaml",
        b"apiVersion: flotilla.io/v1alpha1\nkind: Grants\nfleet:\n  admin: { users: [bob] }\nclusterSets:\n  team-a:\n    admin: { users: [ci] }\n",
    )
    .unwrap();
    let mut config = hub_config(&nats.url());
    config.api.tokens = Some(tokens().with_grants(Arc::new(grants)));
    let hub = start_hub(config).await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", hub.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();

    // bob's token is read-only; the grants file makes bob a fleet admin.
    let mut bob = ClusterServiceClient::with_interceptor(channel.clone(), Bearer(VIEWER));
    tokio::time::timeout(SOON, bob.apply_cluster(cluster("by-bob")))
        .await
        .expect("an answer in time")
        .expect("a fleet admin by the grants file creates a cluster");

    // ci (deployer) holds admin on team-a by the file: the gate lets it through (some grant
    // could allow it) and the service checks the set the cluster goes into.
    let mut ci = ClusterServiceClient::with_interceptor(channel.clone(), Bearer(DEPLOYER));
    let refused = tokio::time::timeout(SOON, ci.apply_cluster(cluster("by-ci")))
        .await
        .expect("an answer in time")
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused}");
    assert_eq!(
        refused.message(),
        "ci may not apply ManagedCluster by-ci in cluster set \"default\": it needs admin on \
         cluster set \"default\" (holds none)"
    );

    // The admin's token is unchanged.
    let mut alice = ClusterServiceClient::with_interceptor(channel, Bearer(ADMIN));
    tokio::time::timeout(SOON, alice.apply_cluster(cluster("by-alice")))
        .await
        .expect("an answer in time")
        .expect("the CSV admin creates a cluster");
    hub.stop().await;
}

mod fence {
    //! Two teams on one hub, each a CSV `member` token in its team's group.

    use super::*;
    use flotilla_api::meta::CLUSTERSET_LABEL;
    use flotilla_api::v1::cluster_set_service_client::ClusterSetServiceClient;
    use flotilla_api::v1::work_service_client::WorkServiceClient;
    use flotilla_api::v1::{
        CreateJoinTokenRequest, EventType, GetWorkRequest, LabelClusterRequest,
        ListClustersRequest, ListWorksRequest, WatchClustersRequest,
    };
    use tokio_stream::StreamExt;

    const ANA: &str = "team-a-sre-token-000001";
    const BEN: &str = "team-b-sre-token-000002";
    const CLEO: &str = "team-a-dev-token-000003";

    fn tokens_file() -> String {
        format!(
            "{TOKENS}{ANA},ana,member,team-a-sre\n{BEN},ben,member,team-b-sre\n\
             {CLEO},cleo,member,team-a-dev\n"
        )
    }

    const GRANTS: &str = "apiVersion: flotilla.io/v1alpha1\nkind: Grants\nclusterSets:\n  \
        team-a:\n    admin: { groups: [team-a-sre] }\n    view: { groups: [team-a-dev] }\n  \
        team-b:\n    admin: { groups: [team-b-sre] }\nnamespaces:\n  team-a-apps:\n    \
        edit: { groups: [team-a-sre] }\n  team-b-apps:\n    edit: { groups: [team-b-sre] }\n";

    fn set(name: &str) -> flotilla_api::v1::ManagedClusterSet {
        flotilla_api::v1::ManagedClusterSet {
            metadata: Some(ObjectMeta {
                name: name.into(),
                ..Default::default()
            }),
            spec: Some(Default::default()),
            status: None,
        }
    }

    fn binding(namespace: &str, set: &str) -> flotilla_api::v1::ManagedClusterSetBinding {
        flotilla_api::v1::ManagedClusterSetBinding {
            metadata: Some(ObjectMeta {
                name: set.into(),
                namespace: namespace.into(),
                ..Default::default()
            }),
            spec: Some(flotilla_api::v1::ManagedClusterSetBindingSpec {
                cluster_set: set.into(),
            }),
            status: None,
        }
    }

    fn in_set(name: &str, set: &str) -> ManagedCluster {
        let mut c = cluster(name);
        if let Some(m) = c.metadata.as_mut() {
            m.labels.insert(CLUSTERSET_LABEL.into(), set.into());
        }
        c
    }

    type Clusters = ClusterServiceClient<
        tonic::service::interceptor::InterceptedService<tonic::transport::Channel, Bearer>,
    >;

    async fn names(client: &mut Clusters) -> Vec<String> {
        let list = tokio::time::timeout(SOON, client.list_clusters(ListClustersRequest::default()))
            .await
            .expect("an answer in time")
            .expect("a list")
            .into_inner();
        list.items
            .iter()
            .map(|c| flotilla_hub::inventory::name(c).to_string())
            .collect()
    }

    /// Waits until `client` lists exactly `want`.
    async fn lists(client: &mut Clusters, want: &[&str]) {
        let deadline = tokio::time::Instant::now() + SOON;
        loop {
            let got = names(client).await;
            if got == want {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "listed {got:?}, want {want:?}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    #[tokio::test]
    async fn each_team_sees_only_its_clusters_and_works_and_is_refused_across_the_fence() {
        let nats = NatsServer::start();
        let dir = tempfile::tempdir().unwrap();
        let grants_path = dir.path().join("grants.yaml");
        std::fs::write(&grants_path, GRANTS).unwrap();
        let grants = flotilla_hub::grants::file::load(&grants_path).unwrap();
        let tokens = flotilla_hub::grpc::auth::Tokens::parse("tokens.csv", &tokens_file())
            .unwrap()
            .with_grants(Arc::new(grants))
            .with_grants_file(&grants_path);
        let mut config = hub_config(&nats.url());
        config.api.tokens = Some(tokens);
        let hub = start_hub(config).await;
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", hub.grpc_addr))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let clusters =
            |token| ClusterServiceClient::with_interceptor(channel.clone(), Bearer(token));
        let works = |token| WorkServiceClient::with_interceptor(channel.clone(), Bearer(token));
        let (mut alice, mut ana, mut ben, mut cleo) = (
            clusters(ADMIN),
            clusters(ANA),
            clusters(BEN),
            clusters(CLEO),
        );
        // The sets (the controllers serve them once this hub holds them).
        let mut sets = ClusterSetServiceClient::with_interceptor(channel.clone(), Bearer(ADMIN));
        for name in ["team-a", "team-b"] {
            let deadline = tokio::time::Instant::now() + SOON;
            while let Err(e) = sets.apply_cluster_set(set(name)).await {
                assert!(tokio::time::Instant::now() < deadline, "{e}");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
        for c in [
            in_set("a1", "team-a"),
            in_set("a2", "team-a"),
            in_set("b1", "team-b"),
        ] {
            alice
                .apply_cluster(c)
                .await
                .expect("the admin creates clusters");
        }

        // Lists: each team its set's clusters; a set's viewer the same; the admin all.
        lists(&mut ana, &["a1", "a2"]).await;
        lists(&mut ben, &["b1"]).await;
        lists(&mut cleo, &["a1", "a2"]).await;
        lists(&mut alice, &["a1", "a2", "b1"]).await;

        // A watch: only the team's clusters.
        let mut watch = ana
            .watch_clusters(WatchClustersRequest::default())
            .await
            .unwrap()
            .into_inner();
        let mut initial = Vec::new();
        for _ in 0..2 {
            let ev = tokio::time::timeout(SOON, watch.next())
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            assert_eq!(ev.r#type, EventType::Added as i32);
            initial.push(flotilla_hub::inventory::name(ev.cluster.as_ref().unwrap()).to_string());
        }
        initial.sort();
        assert_eq!(initial, ["a1", "a2"]);

        // Works: each team writes its clusters' works; across the fence, refused naming the
        // grant; a viewer writes nothing.
        let (mut ana_works, mut ben_works, mut cleo_works) = (works(ANA), works(BEN), works(CLEO));
        ana_works
            .apply_work(common::work::config_map_work("a1", "web"))
            .await
            .expect("a set admin writes its cluster's works");
        ben_works
            .apply_work(common::work::config_map_work("b1", "web"))
            .await
            .expect("a set admin writes its cluster's works");
        let refused = ana_works
            .apply_work(common::work::config_map_work("b1", "web"))
            .await
            .unwrap_err();
        assert_eq!(refused.code(), Code::PermissionDenied);
        assert_eq!(
            refused.message(),
            "ana (groups team-a-sre) may not apply ManifestWork b1/web: it needs admin on a \
             cluster set that contains b1; b1 is in none of ana's sets"
        );
        let refused = cleo_works
            .apply_work(common::work::config_map_work("a1", "other"))
            .await
            .unwrap_err();
        assert_eq!(refused.code(), Code::PermissionDenied);
        // No grant of a set's viewer could write a work: refused before the service.
        assert_eq!(
            refused.message(),
            "cleo (member) may not call /flotilla.v1.WorkService/ApplyWork: it needs admin on a \
             cluster set (holds view on cluster set \"team-a\")"
        );
        let listed = |list: ListWorksResponseAlias| -> Vec<String> {
            list.items
                .iter()
                .filter_map(|w| w.metadata.as_ref())
                .map(|m| format!("{}/{}", m.namespace, m.name))
                .collect()
        };
        let ana_list = ana_works
            .list_works(ListWorksRequest::default())
            .await
            .unwrap();
        assert_eq!(listed(ana_list.into_inner()), ["a1/web"]);
        let ben_list = ben_works
            .list_works(ListWorksRequest::default())
            .await
            .unwrap();
        assert_eq!(listed(ben_list.into_inner()), ["b1/web"]);
        let hidden = ben_works
            .get_work(GetWorkRequest {
                cluster: "a1".into(),
                name: "web".into(),
            })
            .await
            .unwrap_err();
        assert_eq!(hidden.code(), Code::PermissionDenied, "{hidden}");

        // Moving a cluster needs admin on the set it goes into; join credentials too.
        let refused = ana
            .label_cluster(LabelClusterRequest {
                name: "a1".into(),
                set: [(CLUSTERSET_LABEL.to_string(), "team-b".to_string())].into(),
                remove: Vec::new(),
            })
            .await
            .unwrap_err();
        assert_eq!(refused.code(), Code::PermissionDenied);
        assert!(
            refused
                .message()
                .contains("needs admin on cluster set \"team-b\" (holds none)"),
            "{}",
            refused.message()
        );
        let refused = ana
            .create_join_token(CreateJoinTokenRequest {
                cluster_name: "a9".into(),
                cluster_set: "team-b".into(),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(refused.code(), Code::PermissionDenied, "{refused}");

        // Sets and bindings: a team sees its set; binds it into its namespace; may not bind
        // another team's set, nor bind into a namespace it may not edit.
        let mut ana_sets = ClusterSetServiceClient::with_interceptor(channel.clone(), Bearer(ANA));
        let listed = ana_sets
            .list_cluster_sets(flotilla_api::v1::ListClusterSetsRequest::default())
            .await
            .unwrap()
            .into_inner();
        let listed: Vec<String> = listed
            .items
            .iter()
            .filter_map(|v| v.set.as_ref()?.metadata.as_ref().map(|m| m.name.clone()))
            .collect();
        assert_eq!(listed, ["team-a"]);
        ana_sets
            .apply_binding(binding("team-a-apps", "team-a"))
            .await
            .expect("bind (admin) on the set and edit on the namespace");
        let refused = ana_sets
            .apply_binding(binding("team-a-apps", "team-b"))
            .await
            .unwrap_err();
        assert_eq!(refused.code(), Code::PermissionDenied);
        assert_eq!(
            refused.message(),
            "ana (groups team-a-sre) may not bind cluster set \"team-b\" into namespace \
             \"team-a-apps\": it needs bind on cluster set \"team-b\" (holds none)"
        );
        let refused = ana_sets
            .apply_binding(binding("team-b-apps", "team-a"))
            .await
            .unwrap_err();
        assert!(
            refused
                .message()
                .ends_with("it needs edit on namespace \"team-b-apps\" (holds none)"),
            "{}",
            refused.message()
        );
        let mut ben_sets = ClusterSetServiceClient::with_interceptor(channel.clone(), Bearer(BEN));
        let bindings = ben_sets
            .list_bindings(flotilla_api::v1::ListBindingsRequest::default())
            .await
            .unwrap()
            .into_inner();
        assert!(bindings.items.is_empty(), "ben sees team-a-apps' binding");

        // The admin moves a2 into team-b: it leaves ana's watch and list, joins ben's.
        alice
            .label_cluster(LabelClusterRequest {
                name: "a2".into(),
                set: [(CLUSTERSET_LABEL.to_string(), "team-b".to_string())].into(),
                remove: Vec::new(),
            })
            .await
            .unwrap();
        let deleted = loop {
            let ev = tokio::time::timeout(SOON, watch.next())
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            if ev.r#type == EventType::Deleted as i32 {
                break flotilla_hub::inventory::name(ev.cluster.as_ref().unwrap()).to_string();
            }
        };
        assert_eq!(deleted, "a2");
        lists(&mut ana, &["a1"]).await;
        lists(&mut ben, &["a2", "b1"]).await;

        // The grants file changes: ben views team-a within a poll; a file that does not parse
        // keeps the last good grants.
        std::fs::write(
            &grants_path,
            GRANTS.replace(
                "view: { groups: [team-a-dev] }",
                "view: { groups: [team-a-dev, team-b-sre] }",
            ),
        )
        .unwrap();
        lists(&mut ben, &["a1", "a2", "b1"]).await;
        std::fs::write(&grants_path, "kind: Grants\nclusterSets: [").unwrap();
        tokio::time::sleep(std::time::Duration::from_secs(3)).await;
        lists(&mut ben, &["a1", "a2", "b1"]).await;
        hub.stop().await;
    }

    type ListWorksResponseAlias = flotilla_api::v1::ListWorksResponse;
}
