//! Secure mode with the real binaries: `flotilla-hub init --tls`, nats-server in operator mode
//! over TLS, a hub with `--secure-dir`, an agent with `--bootstrap-creds`; and no secret in any
//! log line at any level.

mod common;

use common::*;
use flotilla_testkit::{NatsServer, Proc, binary, free_port};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

/// Every seed a log must never show: the secure directory's keys and credentials, and the
/// agent's own.
fn secrets(dirs: &[&Path]) -> Vec<String> {
    let mut out = Vec::new();
    for dir in dirs {
        for entry in walk(dir) {
            let text = std::fs::read_to_string(&entry).unwrap_or_default();
            for word in text.split_whitespace() {
                // NKey seeds start with S and a key-type letter, and are 58 characters long.
                if word.len() == 58 && word.starts_with('S') {
                    out.push(word.to_string());
                }
            }
        }
    }
    out
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            files.extend(walk(&p));
        } else {
            files.push(p);
        }
    }
    files
}

#[test]
fn secure_mode_over_tls_from_init_to_revocation_and_no_secret_in_any_log() {
    let dir = tempfile::tempdir().unwrap();
    let secure = dir.path().join("secure");
    let port = free_port();
    let init = Command::new(binary("flotilla-hub"))
        .args(["init", "--dir"])
        .arg(&secure)
        .args(["--nats-listen", &format!("127.0.0.1:{port}"), "--tls"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&init.stdout).into_owned();
    assert!(
        init.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&init.stderr)
    );
    assert!(said.contains("nats-server -c"), "{said}");
    // Init refuses to overwrite the keys it wrote.
    let again = Command::new(binary("flotilla-hub"))
        .args(["init", "--dir"])
        .arg(&secure)
        .output()
        .unwrap();
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("refusing to overwrite"));

    let nats = NatsServer::start_from_config(secure.join("nats-server.conf"), port);
    // With the directory's CA, TLS is required: a nats:// URL is refused
    // (attacks/tests/tls.rs).
    let tls_url = nats.url().replace("nats://", "tls://");
    let hub = HubBuilder::new(&nats, dir.path())
        .nats_url(&tls_url)
        .flag("--secure-dir", &secure.display().to_string())
        .log_level("trace")
        .start();
    let ca = secure.join("tls").join("ca.pem").display().to_string();
    let agent = AgentBuilder::at(&tls_url, dir.path(), "edge-1")
        .flag(
            "--bootstrap-creds",
            &secure.join("bootstrap.creds").display().to_string(),
        )
        .flag("--nats-ca", &ca)
        .env("RUST_LOG", "trace")
        .start();
    let logs: [&Proc; 2] = [&hub.proc, &agent];

    wait_for("edge-1 registers", &logs, || {
        clusters_json(&hub.grpc)?
            .iter()
            .any(|c| c["metadata"]["name"] == "edge-1")
            .then_some(())
    });
    let state = dir.path().join("state-edge-1");
    assert!(!state.join("cluster.creds").exists());
    cli_ok(&hub.grpc, &["accept", "edge-1"]);
    wait_for(
        "edge-1 is Available over its own credentials",
        &logs,
        || {
            clusters_json(&hub.grpc)?
                .iter()
                .any(|c| c["metadata"]["name"] == "edge-1" && available(c))
                .then_some(())
        },
    );
    let creds = state.join("cluster.creds");
    assert_eq!(
        std::fs::metadata(&creds).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let out = cli_ok(&hub.grpc, &["get", "clusters"]);
    assert!(row(&out, "edge-1").is_some(), "{out}");

    // Deny: the key is revoked and the agent is refused from then on.
    cli_ok(&hub.grpc, &["deny", "edge-1"]);
    wait_for("the agent is refused", &logs, || {
        agent
            .output()
            .contains("NATS refused the credentials")
            .then_some(())
    });

    let mut scanned = vec![hub.proc.output(), agent.output(), nats.log()];
    scanned.retain(|l| !l.is_empty());
    for seed in secrets(&[&secure, &state]) {
        for log in &scanned {
            assert!(!log.contains(&seed), "a seed appears in a log");
        }
    }
    assert!(
        secrets(&[&secure, &state]).len() >= 8,
        "the scan found the seeds it looks for"
    );
}
