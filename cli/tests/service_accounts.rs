//! ManagedServiceAccounts with the real binaries: `flotilla apply` of OCM's YAML, `flotilla get
//! managedserviceaccounts`, `flotilla kubeconfig --service-account` and the real kubectl
//! through the hub's cluster proxy (TLS, tokens) to a `flotilla-sim` cluster — and the same
//! token refused on another cluster.

mod common;

use common::{HubBuilder, available, cli, self_signed_tls, start_sim, wait_for};
use flotilla_testkit::{NatsServer, free_port};
use std::process::Command;

const ACCOUNT: &str = "\
apiVersion: authentication.open-cluster-management.io/v1beta1
kind: ManagedServiceAccount
metadata:
  name: ops
  namespace: edge-0001
spec:
  rotation:
    enabled: true
    validity: 8640h0m0s
";

#[test]
fn kubectl_uses_a_managed_service_accounts_token_from_flotilla_kubeconfig() {
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let (cert_file, key_file, ca_file) = self_signed_tls(dir.path());
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(
        &tokens,
        "adm1n-token-msa-0001,alice,admin\nv1ew-token-msa-00002,bob,read-only\n",
    )
    .unwrap();
    let proxy_port = free_port();
    let sealing = dir.path().join("sealing.xk");
    let hub = HubBuilder::new(&nats, dir.path())
        .auto_accept()
        .flag("--api-token-file", &tokens.display().to_string())
        .flag("--cluster-proxy-listen", &format!("127.0.0.1:{proxy_port}"))
        .flag("--sealing-key-file", &sealing.display().to_string())
        .tls(&cert_file, &key_file)
        .start();
    let sim = start_sim(
        &nats,
        dir.path(),
        2,
        "edge",
        &["--token-max-seconds", "86400"],
    );
    let ca = ca_file.display().to_string();
    let as_admin = ["--ca", ca.as_str(), "--token", "adm1n-token-msa-0001"];
    let with = |who: &[&str], args: &[&str]| {
        let all: Vec<&str> = who.iter().chain(args).copied().collect();
        cli(&hub.grpc, &all)
    };
    wait_for("the secured hub answers", &[&hub.proc], || {
        with(&as_admin, &["get", "clusters"]).0.then_some(())
    });
    wait_available_with(&hub.grpc, &as_admin, &[&hub.proc, &sim]);
    let file = dir.path().join("msa.yaml");
    std::fs::write(&file, ACCOUNT).unwrap();
    let (ok, out, err) = with(&as_admin, &["apply", "-f", &file.display().to_string()]);
    assert!(ok && out.contains("managedserviceaccount"), "{out}{err}");
    let row = wait_for("the token reported", &[&hub.proc, &sim], || {
        let (ok, out, _) = with(&as_admin, &["get", "managedserviceaccounts"]);
        (ok && out.lines().any(|l| l.contains("ops") && l.contains("True"))).then_some(out)
    });
    assert!(
        row.contains("edge-0001") && row.contains("8640h0m0s"),
        "{row}"
    );
    // The sealing key file was created private.
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&sealing).unwrap().permissions().mode() & 0o777,
        0o600
    );

    let server = format!("https://localhost:{proxy_port}");
    let kubeconfig = |cluster: &str, who: &[&str], account: &str| {
        let args = [
            "kubeconfig",
            cluster,
            "--server",
            &server,
            "--service-account",
            account,
        ];
        with(who, &args)
    };
    // A read-only caller may not have the token; NS must be the cluster.
    let (ok, _, err) = kubeconfig(
        "edge-0001",
        &["--ca", ca.as_str(), "--token", "v1ew-token-msa-00002"],
        "ops",
    );
    assert!(!ok && err.contains("forbidden: bob (read-only)"), "{err}");
    let (ok, _, err) = kubeconfig("edge-0001", &as_admin, "default/ops");
    assert!(!ok && err.contains("must be \"edge-0001\""), "{err}");

    let (ok, text, err) = kubeconfig("edge-0001", &as_admin, "edge-0001/ops");
    assert!(ok, "{err}");
    assert!(
        !text.contains("adm1n-token"),
        "the kubeconfig carries the account's token, not the caller's"
    );
    let file = dir.path().join("edge-0001.kubeconfig");
    std::fs::write(&file, &text).unwrap();
    let kubectl = |config: &std::path::Path, args: &[&str]| {
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(config)
            .arg("--cache-dir")
            .arg(dir.path().join("kube-cache"))
            .arg("--request-timeout=30s")
            .args(args)
            .env_remove("KUBECONFIG")
            .output()
            .expect("kubectl is installed")
    };
    let out = kubectl(
        &file,
        &["create", "configmap", "from-msa", "--from-literal=k=v"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = kubectl(
        &file,
        &["get", "configmap", "from-msa", "-o", "jsonpath={.data.k}"],
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "v");
    // The hub's audit log names the account as the caller.
    assert!(
        hub.proc
            .output()
            .contains("managedserviceaccount:edge-0001/ops"),
        "the audit log names the ManagedServiceAccount"
    );
    // The same token on another cluster is refused before anything reaches it.
    let elsewhere = dir.path().join("edge-0002.kubeconfig");
    std::fs::write(
        &elsewhere,
        text.replace("/clusters/edge-0001", "/clusters/edge-0002"),
    )
    .unwrap();
    let out = kubectl(&elsewhere, &["get", "configmaps"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("logged in"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Waits until both simulated clusters are Available, asking as an admin over TLS.
fn wait_available_with(hub: &str, who: &[&str], logs: &[&flotilla_testkit::Proc]) {
    wait_for("edge-0001 and edge-0002 Available", logs, || {
        let mut args: Vec<&str> = who.to_vec();
        args.extend(["get", "clusters", "-o", "json"]);
        let (ok, out, _) = cli(hub, &args);
        let v: serde_json::Value = serde_json::from_str(&out).ok().filter(|_| ok)?;
        let items = v["items"].as_array().cloned().unwrap_or_default();
        let up = items.iter().filter(|c| available(c)).count();
        (up >= 2).then_some(())
    });
}
