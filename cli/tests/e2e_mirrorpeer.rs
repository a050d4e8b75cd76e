//! MirrorPeers with the real binaries: a hub and two `flotilla-agent` processes on simulated
//! clusters; east's source Secret written with the real kubectl through the hub's cluster proxy
//! (core NATS, never JetStream), `flotilla apply -f` of ODF's YAML, each peer's GREEN copy of
//! the other's Secret, `get`/`describe mirrorpeers`, no plaintext in the nats-server's store, a
//! rotation reaching the other side, an offline peer named in the status and served the latest
//! Secret when it is back, and `flotilla delete mirrorpeer` removing the copies on both sides.

mod common;

use common::{
    AgentBuilder, HubBuilder, Kubectl, cli, cli_ok, row, secure_nats, wait_available, wait_for,
};
use flotilla_testkit::{NatsServer, free_port};

const DR: &str = "\
apiVersion: multicluster.odf.openshift.io/v1alpha1
kind: MirrorPeer
metadata:
  name: dr
spec:
  items:
  - clusterName: east
    storageClusterRef:
      name: ocs-storagecluster
      namespace: openshift-storage
  - clusterName: west
    storageClusterRef:
      name: ocs-storagecluster
      namespace: openshift-storage
    generate: true
  type: async
";

/// The source data a GREEN Secret holds (`secret-data`: JSON of base64 values), by key.
fn green_value(kubectl: &Kubectl, name: &str, key: &str) -> Option<Vec<u8>> {
    use data_encoding::BASE64;
    let out = kubectl.try_run(&[
        "get",
        "secret",
        name,
        "-n",
        "openshift-storage",
        "-o",
        "jsonpath={.data.secret-data}",
    ])?;
    let json = BASE64.decode(out.trim().as_bytes()).ok()?;
    let inner: serde_json::Value = serde_json::from_slice(&json).ok()?;
    BASE64.decode(inner[key].as_str()?.as_bytes()).ok()
}

fn files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

#[test]
fn two_agent_processes_exchange_sealed_secrets_and_delete_them() {
    let started = std::time::Instant::now();
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let proxy = format!("127.0.0.1:{}", free_port());
    // Plain mode: MirrorPeers only with the explicit opt-in (the keys are unauthenticated).
    let hub = HubBuilder::new(&nats, dir.path())
        .auto_accept()
        .flag("--cluster-proxy-listen", &proxy)
        .switch("--allow-insecure-mirrorpeers")
        .start();
    let east = AgentBuilder::new(&nats, dir.path(), "east").start();
    let west = AgentBuilder::new(&nats, dir.path(), "west").start();
    let logs = [&hub.proc, &east, &west];
    wait_available(&hub, &logs, "", 2);
    let (kube_east, kube_west) = (
        Kubectl::new(&hub, dir.path(), "east", &proxy),
        Kubectl::new(&hub, dir.path(), "west", &proxy),
    );
    for k in [&kube_east, &kube_west] {
        k.ok(&["create", "namespace", "openshift-storage"]);
    }
    let marker = format!("E2E-MARKER-{}", std::process::id());
    kube_east.ok(&[
        "create",
        "secret",
        "generic",
        "ocs-storagecluster-peer-secret",
        "-n",
        "openshift-storage",
        &format!("--from-literal=token={marker}"),
    ]);

    let file = dir.path().join("dr.yaml");
    std::fs::write(&file, DR).unwrap();
    let applied = cli_ok(&hub.grpc, &["apply", "-f", &file.display().to_string()]);
    assert!(
        applied.contains("mirrorpeer.multicluster.odf.openshift.io/dr applied"),
        "{applied}"
    );
    let exchange = std::time::Instant::now();
    wait_for("west holds east's secret", &logs, || {
        (green_value(&kube_west, "dr-east", "token")? == marker.as_bytes()).then_some(())
    });
    wait_for("east holds west's generated secret", &logs, || {
        (green_value(&kube_east, "dr-west", "key")?.len() == 32).then_some(())
    });
    eprintln!("exchange took {:?}", exchange.elapsed());
    let table = wait_for("the MirrorPeer exchanged", &logs, || {
        let (ok, out, _) = cli(&hub.grpc, &["get", "mirrorpeers"]);
        (ok && row(&out, "dr").is_some_and(|r| r.contains("ExchangedSecret") && r.contains("2/2")))
            .then_some(out)
    });
    assert!(table.contains("east,west"), "{table}");
    let described = cli_ok(&hub.grpc, &["describe", "mirrorpeer", "dr"]);
    assert!(
        described.contains("Applied") && described.contains("PeersReachable"),
        "{described}"
    );
    let labels = kube_west.ok(&[
        "get",
        "secret",
        "dr-east",
        "-n",
        "openshift-storage",
        "-o",
        "jsonpath={.metadata.labels}",
    ]);
    assert!(
        labels.contains("GREEN") && labels.contains("flotilla.io/mirror-peer"),
        "{labels}"
    );

    // Nothing the nats-server keeps holds the marker, raw or base64.
    let mut all = Vec::new();
    files(&nats.store_dir(), &mut all);
    let b64 = data_encoding::BASE64.encode(marker.as_bytes());
    for f in all {
        let bytes = std::fs::read(&f).unwrap_or_default();
        for needle in [marker.as_bytes(), &b64.as_bytes()[..b64.len() - 4]] {
            assert!(
                !bytes.windows(needle.len()).any(|w| w == needle),
                "{} holds the marker",
                f.display()
            );
        }
    }

    // A rotation on east reaches west.
    let patch = |k: &Kubectl, value: &str| {
        let data = data_encoding::BASE64.encode(value.as_bytes());
        k.ok(&[
            "patch",
            "secret",
            "ocs-storagecluster-peer-secret",
            "-n",
            "openshift-storage",
            "-p",
            &format!(r#"{{"data":{{"token":"{data}"}}}}"#),
        ]);
    };
    let rotated = format!("{marker}-ROTATED");
    patch(&kube_east, &rotated);
    wait_for("west holds east's rotated secret", &logs, || {
        (green_value(&kube_west, "dr-east", "token")? == rotated.as_bytes()).then_some(())
    });

    // West goes away: the MirrorPeer names it; east rotates meanwhile, and west, back (same
    // state directory), gets the latest.
    let mut west = west;
    west.kill();
    let logs = [&hub.proc, &east];
    wait_for("the MirrorPeer names west offline", &logs, || {
        let out = cli_ok(&hub.grpc, &["describe", "mirrorpeer", "dr"]);
        (out.contains("PeerOffline") && out.contains("not Available: west")).then_some(())
    });
    let latest = format!("{marker}-LATEST");
    patch(&kube_east, &latest);
    let west = AgentBuilder::new(&nats, dir.path(), "west").start();
    let logs = [&hub.proc, &east, &west];
    wait_for("west, back, holds east's latest secret", &logs, || {
        (green_value(&kube_west, "dr-east", "token")? == latest.as_bytes()).then_some(())
    });
    wait_for("the MirrorPeer exchanged again", &logs, || {
        let out = cli_ok(&hub.grpc, &["describe", "mirrorpeer", "dr"]);
        (!out.contains("PeerOffline") && out.contains("ExchangedSecret")).then_some(())
    });

    let deleted = cli_ok(&hub.grpc, &["delete", "mirrorpeer", "dr"]);
    assert!(deleted.contains("mirrorpeer/dr deleted"), "{deleted}");
    wait_for("the GREEN Secrets removed on both sides", &logs, || {
        let gone = |k: &Kubectl, name: &str| {
            k.try_run(&[
                "get",
                "secret",
                name,
                "-n",
                "openshift-storage",
                "-o",
                "name",
            ])
            .is_none()
        };
        (gone(&kube_east, "dr-west") && gone(&kube_west, "dr-east")).then_some(())
    });
    let (ok, out, err) = cli(&hub.grpc, &["get", "mirrorpeers"]);
    assert!(ok && err.contains("No MirrorPeers found."), "{out}{err}");
    eprintln!("whole test {:?}", started.elapsed());
}

/// In secure mode (two NATS accounts, TLS, each agent on its own credentials) the peers' requests
/// cross into the hub's account on `flotilla.peers.<cluster>`, which only that cluster may
/// publish on: both generated Secrets are exchanged.
#[test]
fn in_secure_mode_peers_exchange_over_their_own_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let secure = dir.path().join("secure");
    let (nats, tls_url) = secure_nats(&secure);
    let hub = HubBuilder::new(&nats, dir.path())
        .nats_url(&tls_url)
        .flag("--secure-dir", &secure.display().to_string())
        .start();
    let agent = |name: &str| {
        AgentBuilder::at(&tls_url, dir.path(), name)
            .flag(
                "--bootstrap-creds",
                &secure.join("bootstrap.creds").display().to_string(),
            )
            .flag(
                "--nats-ca",
                &secure.join("tls").join("ca.pem").display().to_string(),
            )
            .start()
    };
    let (east, west) = (agent("east"), agent("west"));
    let logs = [&hub.proc, &east, &west];
    wait_for("both registered", &logs, || {
        let clusters = common::clusters_json(&hub.grpc)?;
        (clusters.len() == 2).then_some(())
    });
    cli_ok(&hub.grpc, &["accept", "east"]);
    cli_ok(&hub.grpc, &["accept", "west"]);
    wait_available(&hub, &logs, "", 2);
    let file = dir.path().join("dr.yaml");
    let both_generate = DR.replace(
        "  - clusterName: east\n    storageClusterRef:\n      name: ocs-storagecluster\n      namespace: openshift-storage\n",
        "  - clusterName: east\n    storageClusterRef:\n      name: ocs-storagecluster\n      namespace: default\n    generate: true\n",
    )
    .replace("namespace: openshift-storage", "namespace: default");
    std::fs::write(&file, both_generate).unwrap();
    cli_ok(&hub.grpc, &["apply", "-f", &file.display().to_string()]);
    wait_for("the MirrorPeer exchanged over secure NATS", &logs, || {
        let (ok, out, _) = cli(&hub.grpc, &["get", "mirrorpeers"]);
        (ok && row(&out, "dr").is_some_and(|r| r.contains("ExchangedSecret") && r.contains("2/2")))
            .then_some(())
    });
}
