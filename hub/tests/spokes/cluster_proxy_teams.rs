//! The cluster proxy obeys the grants (issue 48): the real kubectl through a hub with a grants
//! file, two teams' member tokens and an agent per team on a simulated cluster. A set's admin
//! reads, writes and execs on its clusters; a set's viewer reads but not Secrets, writes or
//! exec; another team's cluster is refused naming the missing grant, and a cluster moved out of
//! a team's set is refused at its next request — and its exec, port-forward and watch already
//! open end, naming why (`kubeproxy/revoke.rs`).

use crate::cluster_proxy::wait_inventory;
use crate::common;

use common::kubectl::Kubectl;
use common::tokens::{ADMIN, Bearer, TOKENS};
use common::*;
use flotilla_api::meta::CLUSTERSET_LABEL;
use flotilla_api::v1::cluster_service_client::ClusterServiceClient;
use flotilla_api::v1::cluster_set_service_client::ClusterSetServiceClient;
use flotilla_api::v1::{LabelClusterRequest, ManagedClusterSet, ObjectMeta};
use flotilla_testkit::NatsServer;
use std::sync::Arc;
use std::time::Duration;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

const ANA: &str = "team-a-sre-token-000001";
const BEN: &str = "team-b-sre-token-000002";
const CLEO: &str = "team-a-dev-token-000003";

/// ana: admin on set team-a; cleo: view on team-a; ben: admin on team-b.
const GRANTS: &str = "apiVersion: flotilla.io/v1alpha1\nkind: Grants\nclusterSets:\n  \
    team-a:\n    admin: { groups: [team-a-sre] }\n    view: { groups: [team-a-dev] }\n  \
    team-b:\n    admin: { groups: [team-b-sre] }\n";

const POD: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  containers:
    - name: web
      image: nginx:1.27
"#;

/// A hub with the grants, the CSV tokens plus three members, serving the API and the cluster
/// proxy over TLS (kubectl sends tokens over TLS only); its CA and a channel to its API.
struct TeamsHub {
    hub: flotilla_hub::Hub,
    ca: String,
    api: Channel,
    _dir: tempfile::TempDir,
}

async fn teams_hub(nats: &NatsServer) -> TeamsHub {
    let dir = tempfile::tempdir().unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let (cert_file, key_file) = (dir.path().join("hub.pem"), dir.path().join("hub-key.pem"));
    std::fs::write(&cert_file, cert.cert.pem()).unwrap();
    std::fs::write(&key_file, cert.signing_key.serialize_pem()).unwrap();
    let grants = flotilla_hub::grants::file::parse("grants.yaml", GRANTS.as_bytes()).unwrap();
    let tokens = format!(
        "{TOKENS}{ANA},ana,member,team-a-sre\n{BEN},ben,member,team-b-sre\n\
         {CLEO},cleo,member,team-a-dev\n"
    );
    let mut config = hub_config(&nats.url());
    config.api.tokens = Some(
        flotilla_hub::grpc::auth::Tokens::parse("tokens.csv", &tokens)
            .unwrap()
            .with_grants(Arc::new(grants)),
    );
    config.api.tls = Some(flotilla_hub::TlsFiles {
        cert: cert_file,
        key: key_file,
    });
    config.cluster.auto_accept.enabled = true;
    config.cluster_proxy.listen = Some("127.0.0.1:0".parse().unwrap());
    config.cluster_proxy.tunnel.open_timeout = Duration::from_secs(2);
    let hub = start_hub(config).await;
    let ca = cert.cert.pem();
    let api = Endpoint::from_shared(format!("https://localhost:{}", hub.grpc_addr.port()))
        .unwrap()
        .tls_config(ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&ca)))
        .unwrap()
        .connect()
        .await
        .unwrap();
    TeamsHub {
        hub,
        ca,
        api,
        _dir: dir,
    }
}

impl TeamsHub {
    /// kubectl 1.32 at `cluster` as the holder of `token`.
    fn kubectl(&self, cluster: &str, token: &str) -> Kubectl {
        let port = self.hub.cluster_proxy_addr.expect("a cluster proxy").port();
        Kubectl::new(
            &format!("https://localhost:{port}"),
            Some(&self.ca),
            cluster,
            Some(token),
        )
        .pinned("1.32")
    }

    /// The admin puts `cluster` into `set`.
    async fn label(&self, cluster: &str, set: &str) {
        let mut clusters = ClusterServiceClient::with_interceptor(self.api.clone(), Bearer(ADMIN));
        tokio::time::timeout(
            SOON,
            clusters.label_cluster(LabelClusterRequest {
                name: cluster.into(),
                set: [(CLUSTERSET_LABEL.to_string(), set.to_string())].into(),
                remove: Vec::new(),
            }),
        )
        .await
        .expect("an answer in time")
        .expect("the admin labels a cluster");
    }
}

/// Waits until `kubectl` gets the pods of its cluster (the set index follows a label within
/// its coalescing window).
async fn reaches(kubectl: &Kubectl) {
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        let out = kubectl.run(&["get", "pods"], None).await;
        if out.success {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never reached: {}",
            out.stderr
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_reaches_only_its_teams_clusters_and_is_refused_across_the_fence_naming_the_grant()
{
    let nats = NatsServer::start();
    let hub = teams_hub(&nats).await;
    let _a1 = start_agent(agent_config("a1", &nats.url()));
    let _b1 = start_agent(agent_config("b1", &nats.url()));
    wait_inventory(&hub.hub, "a1", true).await;
    wait_inventory(&hub.hub, "b1", true).await;
    let mut sets = ClusterSetServiceClient::with_interceptor(hub.api.clone(), Bearer(ADMIN));
    for name in ["team-a", "team-b"] {
        let set = ManagedClusterSet {
            metadata: Some(ObjectMeta {
                name: name.into(),
                ..Default::default()
            }),
            spec: Some(Default::default()),
            status: None,
        };
        let deadline = tokio::time::Instant::now() + SOON;
        while let Err(e) = sets.apply_cluster_set(set.clone()).await {
            assert!(tokio::time::Instant::now() < deadline, "{e}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    hub.label("a1", "team-a").await;
    hub.label("b1", "team-b").await;

    // ana (admin on team-a) on a1: reads, writes, Secrets and exec.
    let ana = hub.kubectl("a1", ANA);
    reaches(&ana).await;
    ana.ok(&["apply", "-f", "-"], Some(POD)).await;
    ana.ok(
        &["wait", "--for=condition=Ready", "pod/web", "--timeout=20s"],
        None,
    )
    .await;
    ana.ok(&["get", "secrets"], None).await;
    assert_eq!(
        ana.ok(&["exec", "web", "--", "echo", "hi"], None)
            .await
            .trim(),
        "hi"
    );

    // ana on b1: refused, naming the grant; a hidden cluster reads as one in none of its sets.
    // (kubectl prints discovery's refusal as "unknown": the message is read on a raw get.)
    let across = hub.kubectl("b1", ANA);
    let err = across.fails(&["get", "pods"], None).await;
    assert!(err.contains("Forbidden"), "{err}");
    let err = across
        .fails(
            &[
                "get",
                "--raw",
                "/clusters/b1/api/v1/namespaces/default/pods",
            ],
            None,
        )
        .await;
    assert!(
        err.contains(
            "ana (groups team-a-sre) may not reach cluster b1 through the cluster proxy: it \
             needs view on a cluster set that contains b1; b1 is in none of ana's sets (to \
             read; admin to write)"
        ),
        "{err}"
    );
    let err = across
        .fails(&["exec", "web", "--", "echo", "hi"], None)
        .await;
    assert!(err.contains("Forbidden"), "{err}");
    let exec = "/clusters/b1/api/v1/namespaces/default/pods/web/exec?command=echo";
    let err = across
        .fails(&["create", "--raw", exec, "-f", "-"], Some("{}"))
        .await;
    assert!(err.contains("may not reach cluster b1"), "{err}");
    // ben (admin on team-b) on a1 likewise; on b1 it is at home.
    let err = (hub.kubectl("a1", BEN))
        .fails(&["get", "--raw", "/clusters/a1/api/v1/pods"], None)
        .await;
    assert!(
        err.contains("ben (groups team-b-sre) may not reach cluster a1"),
        "{err}"
    );
    reaches(&hub.kubectl("b1", BEN)).await;

    // cleo (view on team-a) on a1: reads, but not Secrets, writes or exec, each refusal naming
    // the grant it reads by.
    let cleo = hub.kubectl("a1", CLEO);
    cleo.ok(&["get", "pods"], None).await;
    let err = cleo.fails(&["get", "secrets"], None).await;
    assert!(
        err.contains("cleo (view on cluster set \"team-a\") may not read Secrets"),
        "{err}"
    );
    let err = cleo
        .fails(&["create", "configmap", "nope", "--from-literal=a=b"], None)
        .await;
    assert!(
        err.contains("cleo (view on cluster set \"team-a\") may only get, list and watch"),
        "{err}"
    );
    let err = cleo.fails(&["exec", "web", "--", "echo", "hi"], None).await;
    assert!(err.contains("create core/pods/exec refused"), "{err}");

    // a1 moves to team-b: ana's next request is refused, ben's allowed.
    hub.label("a1", "team-b").await;
    reaches(&hub.kubectl("a1", BEN)).await;
    let err = ana
        .fails(&["get", "--raw", "/clusters/a1/api/v1/pods"], None)
        .await;
    assert!(
        err.contains("ana (groups team-a-sre) may not reach cluster a1"),
        "{err}"
    );
    hub.hub.stop().await;
}

/// Waits for a long kubectl to end by itself: its exit code and stderr.
async fn ended(child: tokio::process::Child) -> (Option<i32>, String) {
    let out = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output())
        .await
        .expect("kubectl ended once its grant was gone")
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Review r4 §1: a session, a port-forward and a watch decided once at their start do not
/// outlive the grant — the cluster moving to another team's set ends each, the reason named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_a_port_forward_and_a_watch_end_when_the_cluster_leaves_the_callers_set() {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
    let nats = NatsServer::start();
    let hub = teams_hub(&nats).await;
    let _a1 = start_agent(agent_config("a1", &nats.url()));
    wait_inventory(&hub.hub, "a1", true).await;
    let mut sets = ClusterSetServiceClient::with_interceptor(hub.api.clone(), Bearer(ADMIN));
    for name in ["team-a", "team-b"] {
        let set = ManagedClusterSet {
            metadata: Some(ObjectMeta {
                name: name.into(),
                ..Default::default()
            }),
            spec: Some(Default::default()),
            status: None,
        };
        let deadline = tokio::time::Instant::now() + SOON;
        while let Err(e) = sets.apply_cluster_set(set.clone()).await {
            assert!(tokio::time::Instant::now() < deadline, "{e}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    hub.label("a1", "team-a").await;
    let ana = hub.kubectl("a1", ANA);
    reaches(&ana).await;
    // A pod with a port to forward.
    let pod = crate::cluster_proxy_streams::POD;
    ana.ok(&["apply", "-f", "-"], Some(pod)).await;
    ana.ok(
        &["wait", "--for=condition=Ready", "pod/web", "--timeout=20s"],
        None,
    )
    .await;

    // An interactive exec whose echo came back once.
    let mut exec = ana
        .command(&["exec", "-i", "web", "--", "cat"])
        .spawn()
        .unwrap();
    let mut stdin = exec.stdin.take().unwrap();
    let mut stdout = BufReader::new(exec.stdout.take().unwrap());
    stdin.write_all(b"before\n").await.unwrap();
    let mut line = String::new();
    tokio::time::timeout(SOON, stdout.read_line(&mut line))
        .await
        .expect("the echo came")
        .unwrap();
    assert_eq!(line, "before\n");
    tokio::spawn(async move {
        while let Ok(n) = stdout.read(&mut [0u8; 256]).await {
            if n == 0 {
                break;
            }
        }
    });
    // A port-forward with one connection open.
    let port = flotilla_testkit::free_port();
    let mut forward = ana
        .command(&["port-forward", "pod/web", &format!("{port}:80")])
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(forward.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(SOON, out.next_line())
        .await
        .unwrap()
        .unwrap();
    assert!(first.is_some_and(|l| l.starts_with("Forwarding from")));
    tokio::spawn(async move { while let Ok(Some(_)) = out.next_line().await {} });
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    tcp.write_all(b"ping").await.unwrap();
    let mut back = [0u8; 4];
    tokio::time::timeout(SOON, tcp.read_exact(&mut back))
        .await
        .expect("the echo came")
        .unwrap();
    // A watch that printed its first line.
    let mut watch = ana.command(&["get", "pods", "-w"]).spawn().unwrap();
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    tokio::time::timeout(SOON, lines.next_line())
        .await
        .expect("the watch listed")
        .unwrap();
    let printed = tokio::spawn(async move {
        let mut all = String::new();
        while let Ok(Some(l)) = lines.next_line().await {
            all.push_str(&l);
            all.push('\n');
        }
        all
    });

    // a1 moves to team-b: each ends, saying why.
    hub.label("a1", "team-b").await;
    let why = "may not reach cluster a1";
    let (code, stderr) = ended(exec).await;
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("the grant that allowed it is gone"),
        "{stderr}"
    );
    assert!(stderr.contains(why), "{stderr}");
    // kubectl prints the watch's ERROR event as a Status row, and ends when the watch does.
    let (_, stderr) = ended(watch).await;
    let printed = printed.await.unwrap();
    assert!(
        printed.contains("Forbidden") && printed.contains(why),
        "{stderr} / {printed}"
    );
    // The port-forward's connection is closed; kubectl prints the reason its connection's
    // error stream carries, or its own words when the connection went first (the race
    // cluster_proxy_stream_ends describes).
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(SOON, tcp.read_to_end(&mut rest)).await;
    let (code, stderr) = ended(forward).await;
    assert_ne!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains(why) || stderr.contains("lost connection to pod"),
        "{stderr}"
    );
    drop(stdin);
    hub.hub.stop().await;
}
