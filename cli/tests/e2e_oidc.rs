//! Identities from OIDC (issue 48) with processes: a hub given the testkit's issuer
//! (`--oidc-issuer-url`, served over real HTTP) and a grants file naming the issuer's groups,
//! and the CLI run with the issuer's ID tokens — by `--token`, and from an exec credential
//! plugin as kubectl runs one. Each team's user sees only its clusters; an expired token, a
//! token for another audience (or of several audiences issued to another party) and another
//! issuer's token are refused with the reason. kubectl through the cluster proxy with a refused
//! token, or none, leaves an audit line per request, bounded per source address.

mod common;

use common::{HubBuilder, run_cli, wait_for};
use flotilla_testkit::NatsServer;
use flotilla_testkit::oidc::{Claims, TestIssuer};
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

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

    // OIDC Core §3.1.3.7: a token of several audiences must name the party it was issued to
    // (azp), one of the hub's; a token of the hub's audience alone may name another (Dex's
    // cross-client trust: the CLI's client asked the issuer for a token for the hub).
    let several = || {
        Claims::user("ana", &["team-a-sre"]).with("aud", serde_json::json!(["flotilla", "grafana"]))
    };
    for (token, want) in [
        (
            issuer.mint(several().with("azp", "grafana")),
            "the bearer token was issued to \"grafana\" (azp), not to \"flotilla\"",
        ),
        (
            issuer.mint(several()),
            "the bearer token's \"azp\" claim is missing from a token of several audiences",
        ),
    ] {
        let e = clusters(h, &["--token", &token]).unwrap_err();
        assert!(e.contains(want), "want {want:?} in {e}");
    }
    for token in [
        issuer.mint(several().with("azp", "flotilla")),
        issuer.mint(Claims::user("ana", &["team-a-sre"]).with("azp", "flotilla-cli")),
    ] {
        assert_eq!(
            clusters(h, &["--token", &token]),
            Ok(vec!["shop-a1".to_string()])
        );
    }
}

/// A kubeconfig for cluster shop-a1 through the cluster proxy on `port` (TLS, `ca` its CA: kubectl
/// sends a bearer token only over TLS), with no credential: each kubectl run brings its own
/// `--token`, or none.
fn proxy_kubeconfig(dir: &Path, port: u16, ca: &Path) -> PathBuf {
    let path = dir.join("proxy.kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: \
             https://localhost:{port}/clusters/shop-a1\n    certificate-authority: {}\n\
             contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  \
             user: {{}}\ncurrent-context: c\n",
            ca.display()
        ),
    )
    .unwrap();
    path
}

/// shop-a1's ConfigMaps in `default` through the proxy, as kubectl's `get --raw` asks it (no
/// discovery first, so the request refused is the list itself; a raw path is the server's
/// whole path).
const CONFIGMAPS: &str = "/clusters/shop-a1/api/v1/namespaces/default/configmaps";

/// `kubectl get --raw` of [`CONFIGMAPS`] through `kubeconfig` with the bearer `token`.
fn kubectl_get(kubeconfig: &Path, token: &str) -> std::process::Output {
    std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(kubeconfig.with_extension("cache"))
        .arg("--request-timeout=10s")
        .arg(format!("--token={token}"))
        .args(["get", "--raw", CONFIGMAPS])
        .env_remove("KUBECONFIG")
        .output()
        .expect("kubectl is installed")
}

/// The hub's audit lines of refused authentications.
fn unauthenticated(log: &str) -> Vec<String> {
    (common::audit_lines(log).into_iter())
        .filter(|l| l.contains("user=\"<unauthenticated>\""))
        .collect()
}

/// `n` requests for [`CONFIGMAPS`] with the bearer `token` (or none) to the proxy on `port`,
/// from one address, by one curl run (one process, its connections kept alive): their HTTP
/// statuses.
fn flood(dir: &Path, port: u16, ca: &Path, token: Option<&str>, n: usize) -> Vec<String> {
    let url = format!("https://localhost:{port}{CONFIGMAPS}");
    let mut config = format!(
        "cacert = \"{}\"\nwrite-out = \"%{{http_code}}\\n\"\nsilent\nmax-time = 10\n",
        ca.display()
    );
    if let Some(token) = token {
        config.push_str(&format!("header = \"Authorization: Bearer {token}\"\n"));
    }
    for _ in 0..n {
        config.push_str(&format!("url = \"{url}\"\noutput = \"/dev/null\"\n"));
    }
    let file = dir.join("flood.curlrc");
    std::fs::write(&file, config).unwrap();
    let out = std::process::Command::new("curl")
        .arg("--config")
        .arg(&file)
        .output()
        .expect("curl is installed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// The CLI's flags for a hub serving TLS with the CA file `ca`, as the caller of `token`.
fn with_ca<'a>(ca: &'a str, token: &'a str) -> [&'a str; 4] {
    ["--ca", ca, "--token", token]
}

/// The `suppressed=N` count of an audit line (0 when it has none).
fn suppressed(line: &str) -> u64 {
    (line.split("suppressed=").nth(1))
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_default()
}

#[test]
fn the_cluster_proxy_audits_each_refused_authentication_and_bounds_a_flood() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let issuer = runtime.block_on(TestIssuer::start());
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, ca) = common::self_signed_tls(dir.path());
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, format!("{ADMIN},alice,admin\n")).unwrap();
    let grants = dir.path().join("grants.yaml");
    std::fs::write(&grants, GRANTS).unwrap();
    let port = flotilla_testkit::free_port();
    let hub = HubBuilder::new(&nats, dir.path())
        .flag("--api-token-file", &tokens.display().to_string())
        .flag("--grants-file", &grants.display().to_string())
        .flag("--oidc-issuer-url", issuer.url())
        .flag("--oidc-client-id", flotilla_testkit::oidc::CLIENT_ID)
        .flag("--oidc-groups-claim", "groups")
        .flag("--oidc-groups-prefix", "oidc:")
        .flag("--cluster-proxy-listen", &format!("127.0.0.1:{port}"))
        .tls(&cert, &key)
        .start();
    let h = hub.grpc.as_str();
    let ca_flag = ca.display().to_string();
    let with = |token| with_ca(&ca_flag, token);
    wait_for("the admin's fleet applied", &[&hub.proc], || {
        (run_cli(
            h,
            &[&with(ADMIN)[..], &["apply", "-f", "-"]].concat(),
            Some(FLEET),
        )
        .code
            == Some(0))
        .then_some(())
    });
    let kubeconfig = proxy_kubeconfig(dir.path(), port, &ca);
    // The issuer's keys are in once its valid token is no longer refused for them.
    let ana = issuer.token("ana", &["team-a-sre"]);
    wait_for("the issuer's keys", &[&hub.proc], || {
        (clusters(h, &with(&ana)).ok()? == ["shop-a1"]).then_some(())
    });

    // kubectl refused for an expired ID token and for a token nobody issued, and a request
    // with no bearer at all (curl: kubectl would ask for a password first): each an audit line
    // naming the request, why and whence — never the token.
    let expired = issuer.mint(Claims::user("ana", &["team-a-sre"]).expires_in(-600));
    for (token, why) in [
        (Some(expired.as_str()), "the bearer token expired at"),
        (Some("nobody-issued-this-token"), "bearer token"),
        (None, "no bearer token"),
    ] {
        wait_for(&format!("the audit line of {why:?}"), &[&hub.proc], || {
            match token {
                Some(token) => {
                    let out = kubectl_get(&kubeconfig, token);
                    let err = String::from_utf8_lossy(&out.stderr);
                    assert!(err.contains("You must be logged in"), "{why}: {err}");
                }
                None => assert_eq!(flood(dir.path(), port, &ca, None, 1), ["401"]),
            }
            unauthenticated(&hub.proc.output())
                .iter()
                .any(|l| {
                    l.contains(why)
                        && l.contains(
                            "action=\"proxy list core/configmaps in default on cluster shop-a1\"",
                        )
                        && l.contains("outcome=\"refused\"")
                        && l.contains("source=\"127.0.0.1\"")
                })
                .then_some(())
        });
    }
    let log = hub.proc.output();
    assert!(
        !log.contains(&expired) && !log.contains("nobody-issued-this-token"),
        "{log}"
    );

    // A flood from one address: 20 lines at once, then 2 a second; each line written says how
    // many were dropped before it, so the dropped ones are all counted.
    let before = unauthenticated(&hub.proc.output()).len();
    let started = std::time::Instant::now();
    let statuses = flood(dir.path(), port, &ca, Some("flood"), 300);
    let seconds = started.elapsed().as_secs() + 1;
    assert_eq!(statuses.len(), 300, "{statuses:?}");
    assert!(statuses.iter().all(|s| s == "401"), "{statuses:?}");
    std::thread::sleep(std::time::Duration::from_secs(1));
    let flooded = unauthenticated(&hub.proc.output())[before..].to_vec();
    let written = flooded.len() as u64;
    assert!(
        (1..=20 + 2 * seconds).contains(&written),
        "{written} lines in {seconds} s"
    );
    // Another request after it (its bucket refilled): its line counts the rest.
    kubectl_get(&kubeconfig, "after-the-flood");
    let after = wait_for("the line after the flood", &[&hub.proc], || {
        let lines = unauthenticated(&hub.proc.output());
        (lines.len() as u64 > before as u64 + written)
            .then(|| lines[before + flooded.len()..].to_vec())
    });
    let counted: u64 = flooded.iter().chain(&after).map(|l| suppressed(l)).sum();
    assert!(
        counted >= 300 - written,
        "{counted} counted as dropped, {written} written: {after:?}"
    );
}
