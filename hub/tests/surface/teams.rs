//! Teams (issue 48): the grants file on a real hub. So far a grants file is read at start
//! (`--grants-file`; a file that does not parse stops the hub naming its line and field) and
//! gives CSV identities roles beyond their token's role; the per-object checks of each surface
//! come with the later steps of the design (docs/notes/issue-48-design.md §14), and until then
//! the gate decides by the CSV role, a fleet `admin` of the file counting as `admin`.

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

    // ci (deployer) holds admin on team-a by the file: not a fleet admin, so the gate still
    // refuses it an admin-only method with the CSV role's words (per-object checks come later).
    let mut ci = ClusterServiceClient::with_interceptor(channel.clone(), Bearer(DEPLOYER));
    let refused = tokio::time::timeout(SOON, ci.apply_cluster(cluster("by-ci")))
        .await
        .expect("an answer in time")
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused}");
    assert!(
        refused.message().contains("ci (deployer) may not call"),
        "{}",
        refused.message()
    );

    // The admin's token is unchanged.
    let mut alice = ClusterServiceClient::with_interceptor(channel, Bearer(ADMIN));
    tokio::time::timeout(SOON, alice.apply_cluster(cluster("by-alice")))
        .await
        .expect("an answer in time")
        .expect("the CSV admin creates a cluster");
    hub.stop().await;
}
