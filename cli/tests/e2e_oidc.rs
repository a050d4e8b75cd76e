//! Identities from OIDC (issue 48) with processes: a hub given the testkit's issuer
//! (`--oidc-issuer-url`, served over real HTTP) and a grants file naming the issuer's groups,
//! and the CLI run with the issuer's ID tokens — by `--token`, and from an exec credential
//! plugin as kubectl runs one. Each team's user sees only its clusters; an expired token, a
//! token for another audience and another issuer's token are refused with the reason.

mod common;

use common::{HubBuilder, run_cli, wait_for};
use flotilla_testkit::NatsServer;
use flotilla_testkit::oidc::{Claims, TestIssuer};
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;

const ADMIN: &str = "admin-token-oidc-000001";

const GRANTS: &str = "apiVersion: flotilla.io/v1alpha1
kind: Grants
clusterSets:
  team-a:
    admin: { groups: [\"oidc:team-a-sre\"] }
  team-b:
    admin: { groups: [\"oidc:team-b-sre\"] }
";

const FLEET: &str = "apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSet
metadata:
  name: team-a
---
apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSet
metadata:
  name: team-b
---
apiVersion: cluster.open-cluster-management.io/v1
kind: ManagedCluster
metadata:
  name: shop-a1
  labels:
    cluster.open-cluster-management.io/clusterset: team-a
---
apiVersion: cluster.open-cluster-management.io/v1
kind: ManagedCluster
metadata:
  name: shop-b1
  labels:
    cluster.open-cluster-management.io/clusterset: team-b
";

/// The cluster names `flotilla ARGS get clusters -o json` lists, or the failure's stderr.
fn clusters(hub: &str, args: &[&str]) -> Result<Vec<String>, String> {
    let all: Vec<&str> = args
        .iter()
        .copied()
        .chain(["get", "clusters", "-o", "json"])
        .collect();
    let out = run_cli(hub, &all, None);
    if out.code != Some(0) {
        return Err(out.stderr);
    }
    let v: Value = serde_json::from_str(&out.stdout).map_err(|e| e.to_string())?;
    let mut names: Vec<String> = v["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    names.sort();
    Ok(names)
}

#[test]
fn an_oidc_user_sees_only_its_teams_clusters_by_token_and_by_exec_plugin() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let issuer = runtime.block_on(TestIssuer::start());
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, format!("{ADMIN},alice,admin\n")).unwrap();
    let grants = dir.path().join("grants.yaml");
    std::fs::write(&grants, GRANTS).unwrap();
    let hub = HubBuilder::new(&nats, dir.path())
        .flag("--api-token-file", &tokens.display().to_string())
        .flag("--grants-file", &grants.display().to_string())
        .flag("--oidc-issuer-url", issuer.url())
        .flag("--oidc-client-id", flotilla_testkit::oidc::CLIENT_ID)
        .flag("--oidc-groups-claim", "groups")
        .flag("--oidc-groups-prefix", "oidc:")
        .start();
    let h = hub.grpc.as_str();
    wait_for("the admin's fleet applied", &[&hub.proc], || {
        (run_cli(h, &["--token", ADMIN, "apply", "-f", "-"], Some(FLEET)).code == Some(0))
            .then_some(())
    });

    // ana of team A, by --token: team A's cluster only (once the hub has the issuer's keys).
    let ana = issuer.token("ana", &["team-a-sre"]);
    wait_for("ana sees team A", &[&hub.proc], || {
        (clusters(h, &["--token", &ana]).ok()? == ["shop-a1"]).then_some(())
    });
    let ben = issuer.token("ben", &["team-b-sre"]);
    assert_eq!(
        clusters(h, &["--token", &ben]),
        Ok(vec!["shop-b1".to_string()])
    );
    assert_eq!(
        clusters(h, &["--token", ADMIN]),
        Ok(vec!["shop-a1".to_string(), "shop-b1".to_string()])
    );

    // ben through an exec credential plugin printing an ExecCredential, as kubectl runs it.
    let plugin = dir.path().join("get-token.sh");
    std::fs::write(
        &plugin,
        format!(
            "#!/bin/sh\n[ -n \"$KUBERNETES_EXEC_INFO\" ] || exit 7\n[ \"$1\" = get-token ] || exit 8\n\
             echo '{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\
             \"status\":{{\"token\":\"{ben}\"}}}}'\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let exec = plugin.display().to_string();
    assert_eq!(
        clusters(h, &["--exec-command", &exec, "--exec-arg", "get-token"]),
        Ok(vec!["shop-b1".to_string()])
    );
    // A plugin that fails: client-go's words, the hub never asked.
    let e = clusters(h, &["--exec-command", &exec, "--exec-arg", "other"]).unwrap_err();
    assert!(
        e.contains(&format!("exec: executable {exec} failed with exit code 8")),
        "{e}"
    );

    // Refused, with the reason.
    let refusals = [
        (
            issuer.mint(Claims::user("ana", &["team-a-sre"]).expires_in(-600)),
            "the bearer token expired at",
        ),
        (
            issuer.mint(Claims::user("ana", &["team-a-sre"]).with("aud", "grafana")),
            "the bearer token's audience is [\"grafana\"], not \"flotilla\"",
        ),
        (
            runtime
                .block_on(TestIssuer::start())
                .token("ana", &["team-a-sre"]),
            "the bearer token is not known to this hub",
        ),
    ];
    for (token, want) in refusals {
        let e = clusters(h, &["--token", &token]).unwrap_err();
        assert!(e.contains(want), "want {want:?} in {e}");
    }
}
