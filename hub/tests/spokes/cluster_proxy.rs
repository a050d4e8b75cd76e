//! The cluster proxy end to end with the real `kubectl`: a hub with `--cluster-proxy-listen`
//! and API tokens on a real nats-server, and an agent on a simulated cluster (the agent's
//! `sim_api`) or on the testkit's Kubernetes API server (the Kubernetes backend forwarding).

use crate::common;
use crate::kube_fixture;

use common::kubectl::Kubectl;
use common::tokens::{ADMIN, DEPLOYER, VIEWER, tokens};
use common::*;
use flotilla_testkit::NatsServer;
use flotilla_testkit::kube::AccessRule;
use std::time::Duration;

/// A hub with the test tokens, auto-accepting clusters, serving the cluster proxy over TLS
/// (kubectl sends tokens over TLS only) with a self-signed certificate for `localhost`.
pub(crate) struct ProxyHub {
    hub: flotilla_hub::Hub,
    ca: String,
    _dir: tempfile::TempDir,
}

impl std::ops::Deref for ProxyHub {
    type Target = flotilla_hub::Hub;

    fn deref(&self) -> &flotilla_hub::Hub {
        &self.hub
    }
}

impl ProxyHub {
    /// Stops the hub.
    pub(crate) async fn stop(self) {
        self.hub.stop().await
    }
}

pub(crate) async fn proxy_hub(nats: &NatsServer) -> ProxyHub {
    proxy_hub_with(nats, |_| {}).await
}

/// The lease of hubs whose tests move tens of MiB through a stream: a 1 s lease (three
/// missed, the cluster is unavailable) runs out when a loaded machine starves the agent's
/// renewals for 3 s — seen with eight runs at once on two cores, mid 50 MiB port-forward —
/// and ends the session, rightly for the product, wrongly for a test of the stream itself.
pub(crate) const STEADY_LEASE_SECONDS: i32 = 10;

/// [`proxy_hub`] with a [`STEADY_LEASE_SECONDS`] lease.
pub(crate) async fn steady_proxy_hub(nats: &NatsServer) -> ProxyHub {
    proxy_hub_with(nats, |c| {
        c.cluster.default_lease_duration_seconds = STEADY_LEASE_SECONDS
    })
    .await
}

/// [`proxy_hub`], with `adjust` applied to its configuration.
pub(crate) async fn proxy_hub_with(
    nats: &NatsServer,
    adjust: impl FnOnce(&mut flotilla_hub::Config),
) -> ProxyHub {
    let dir = tempfile::tempdir().unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let (cert_file, key_file) = (dir.path().join("hub.pem"), dir.path().join("hub-key.pem"));
    std::fs::write(&cert_file, cert.cert.pem()).unwrap();
    std::fs::write(&key_file, cert.signing_key.serialize_pem()).unwrap();
    let mut config = hub_config(&nats.url());
    config.api.tokens = Some(tokens());
    config.api.tls = Some(flotilla_hub::TlsFiles {
        cert: cert_file,
        key: key_file,
    });
    config.cluster.auto_accept.enabled = true;
    config.cluster_proxy.listen = Some("127.0.0.1:0".parse().unwrap());
    config.cluster_proxy.tunnel.open_timeout = Duration::from_secs(2);
    adjust(&mut config);
    ProxyHub {
        hub: start_hub(config).await,
        ca: cert.cert.pem(),
        _dir: dir,
    }
}

/// Waits until the hub's inventory has `name` Available (or, with `false`, not Available).
pub(crate) async fn wait_inventory(hub: &flotilla_hub::Hub, name: &str, want_available: bool) {
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        let is = hub
            .inventory
            .get(name)
            .is_some_and(|c| available(&c).as_deref() == Some("True"));
        if is == want_available {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name} did not become {}",
            if want_available {
                "Available"
            } else {
                "unavailable"
            }
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub(crate) fn kubectl(hub: &ProxyHub, cluster: &str, token: &str) -> Kubectl {
    let port = hub
        .cluster_proxy_addr
        .expect("the hub serves the cluster proxy")
        .port();
    Kubectl::new(
        &format!("https://localhost:{port}"),
        Some(&hub.ca),
        cluster,
        Some(token),
    )
}

const APP: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-config
  namespace: default
data:
  greeting: hello
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: web
          image: nginx:1.27
          ports:
            - containerPort: 80
"#;

#[tokio::test]
async fn kubectl_gets_applies_patches_and_deletes_on_a_simulated_cluster_through_the_hub() {
    let nats = NatsServer::start();
    let hub = proxy_hub(&nats).await;
    let _agent = start_agent(agent_config("edge-1", &nats.url()));
    wait_inventory(&hub, "edge-1", true).await;
    let admin = kubectl(&hub, "edge-1", ADMIN);

    // Discovery and reads.
    let namespaces = admin.ok(&["get", "namespaces", "-o", "name"], None).await;
    assert!(namespaces.contains("namespace/default"), "{namespaces}");

    // Client-side apply creates, then patches with a strategic merge patch.
    let out = admin.ok(&["apply", "-f", "-"], Some(APP)).await;
    assert!(out.contains("configmap/web-config created"), "{out}");
    assert!(out.contains("deployment.apps/web created"), "{out}");
    let greeting = admin
        .ok(
            &[
                "get",
                "configmap",
                "web-config",
                "-o",
                "jsonpath={.data.greeting}",
            ],
            None,
        )
        .await;
    assert_eq!(greeting, "hello");
    let changed = APP.replace("nginx:1.27", "nginx:1.28");
    let out = admin.ok(&["apply", "-f", "-"], Some(&changed)).await;
    assert!(out.contains("deployment.apps/web configured"), "{out}");
    let container = admin
        .ok(
            &["get", "deployment", "web", "-o", "jsonpath={.spec.template.spec.containers[0].image} {.spec.template.spec.containers[0].ports[0].containerPort}"],
            None,
        )
        .await;
    assert_eq!(container, "nginx:1.28 80", "the container merged by name");

    // Every patch type.
    admin
        .ok(
            &[
                "patch",
                "configmap",
                "web-config",
                "--type=merge",
                "-p",
                r#"{"data":{"greeting":"hi"}}"#,
            ],
            None,
        )
        .await;
    admin
        .ok(
            &[
                "patch",
                "configmap",
                "web-config",
                "--type=json",
                "-p",
                r#"[{"op":"add","path":"/data/extra","value":"1"}]"#,
            ],
            None,
        )
        .await;
    admin
        .ok(
            &[
                "patch",
                "deployment",
                "web",
                "--type=strategic",
                "-p",
                r#"{"spec":{"replicas":3}}"#,
            ],
            None,
        )
        .await;
    let data = admin
        .ok(
            &[
                "get",
                "configmap",
                "web-config",
                "-o",
                "jsonpath={.data.greeting} {.data.extra}",
            ],
            None,
        )
        .await;
    assert_eq!(data, "hi 1");
    let replicas = admin
        .ok(
            &[
                "get",
                "deployment",
                "web",
                "-o",
                "jsonpath={.spec.replicas}",
            ],
            None,
        )
        .await;
    assert_eq!(replicas, "3");
    admin
        .ok(&["scale", "deployment", "web", "--replicas=2"], None)
        .await;
    let replicas = admin
        .ok(
            &[
                "get",
                "deployment",
                "web",
                "-o",
                "jsonpath={.spec.replicas}",
            ],
            None,
        )
        .await;
    assert_eq!(replicas, "2");

    // Server-side apply: a second manager's change conflicts until forced.
    let owned = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: owned\n  namespace: default\ndata:\n  k: one\n";
    admin
        .ok(&["apply", "--server-side", "-f", "-"], Some(owned))
        .await;
    let other = owned.replace("one", "two");
    let err = admin
        .fails(
            &["apply", "--server-side", "--field-manager=other", "-f", "-"],
            Some(&other),
        )
        .await;
    assert!(err.contains("conflict"), "{err}");
    admin
        .ok(
            &[
                "apply",
                "--server-side",
                "--field-manager=other",
                "--force-conflicts",
                "-f",
                "-",
            ],
            Some(&other),
        )
        .await;
    let k = admin
        .ok(
            &["get", "configmap", "owned", "-o", "jsonpath={.data.k}"],
            None,
        )
        .await;
    assert_eq!(k, "two");

    // Delete, and the spoke's NotFound comes back as it is.
    let out = admin.ok(&["delete", "configmap", "web-config"], None).await;
    assert!(out.contains("configmap \"web-config\" deleted"), "{out}");
    let err = admin.fails(&["get", "configmap", "web-config"], None).await;
    assert!(
        err.contains("Error from server (NotFound): configmaps \"web-config\" not found"),
        "{err}"
    );
    wait_metric(
        &hub,
        "flotilla_hub_cluster_proxy_requests_total{verb=\"patch\",code=\"2xx\"}",
    )
    .await;
    wait_metric(
        &hub,
        "flotilla_hub_cluster_proxy_requests_total{verb=\"get\",code=\"4xx\"}",
    )
    .await;

    // exec without a connection upgrade (a plain GET, here over HTTP/2) is refused, saying
    // what it needs (cluster_proxy_streams runs the real exec).
    let err = admin
        .fails(
            &[
                "get",
                "--raw",
                "/clusters/edge-1/api/v1/namespaces/default/pods/web-0/exec",
            ],
            None,
        )
        .await;
    assert!(err.contains("need an HTTP/1.1 connection upgrade"), "{err}");
}

#[tokio::test]
async fn read_only_tokens_read_but_are_refused_writes_and_secrets() {
    let nats = NatsServer::start();
    let hub = proxy_hub(&nats).await;
    let _agent = start_agent(agent_config("edge-1", &nats.url()));
    wait_inventory(&hub, "edge-1", true).await;
    let viewer = kubectl(&hub, "edge-1", VIEWER);
    viewer.ok(&["get", "configmaps", "-A"], None).await;
    let err = viewer
        .fails(&["create", "configmap", "nope", "--from-literal=a=b"], None)
        .await;
    assert!(
        err.contains("bob (read-only) may only get, list and watch"),
        "{err}"
    );
    let raw = viewer
        .fails(
            &[
                "create",
                "--raw",
                "/clusters/edge-1/api/v1/namespaces/default/configmaps",
                "-f",
                "-",
            ],
            Some("{}"),
        )
        .await;
    assert!(raw.contains("Error from server (Forbidden)"), "{raw}");
    let err = viewer.fails(&["get", "secrets"], None).await;
    assert!(err.contains("may not read Secrets"), "{err}");
    // A token the hub does not know is refused before anything reaches the spoke.
    let stranger = kubectl(&hub, "edge-1", "not-a-token-of-this-hub");
    let err = stranger.fails(&["get", "configmaps"], None).await;
    assert!(
        err.contains("Unauthorized") || err.contains("provide credentials"),
        "{err}"
    );
}

#[tokio::test]
async fn a_watch_streams_events_until_kubectl_goes_away() {
    let nats = NatsServer::start();
    let hub = proxy_hub(&nats).await;
    let _agent = start_agent(agent_config("edge-1", &nats.url()));
    wait_inventory(&hub, "edge-1", true).await;
    let admin = kubectl(&hub, "edge-1", ADMIN);
    admin
        .ok(
            &["create", "configmap", "first", "--from-literal=a=1"],
            None,
        )
        .await;
    let mut watch = admin.stream(&[
        "get",
        "configmaps",
        "--watch",
        "--output-watch-events",
        "-o",
        "jsonpath={.type} {.object.metadata.name}{\"\\n\"}",
    ]);
    assert_eq!(watch.line().await, "ADDED first");
    admin
        .ok(
            &["create", "configmap", "second", "--from-literal=a=1"],
            None,
        )
        .await;
    assert_eq!(watch.line().await, "ADDED second");
    admin
        .ok(
            &[
                "patch",
                "configmap",
                "first",
                "--type=merge",
                "-p",
                r#"{"data":{"a":"2"}}"#,
            ],
            None,
        )
        .await;
    assert_eq!(watch.line().await, "MODIFIED first");
    admin.ok(&["delete", "configmap", "second"], None).await;
    assert_eq!(watch.line().await, "DELETED second");
    watch.kill().await;
    // The hub cancels the call once kubectl is gone.
    let proxy = hub.cluster_proxy.clone().expect("serving the proxy");
    let deadline = tokio::time::Instant::now() + SOON;
    while proxy.open_calls() > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the watch call stayed open"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn kubectl_reaches_a_cluster_whose_agent_is_behind_a_leaf_node() {
    // An edge site: its agents connect to the site's leaf server, which holds the one link to
    // the hub's server.
    let nats = NatsServer::start_leaf_hub();
    let site = nats.start_leaf();
    let hub = proxy_hub(&nats).await;
    let _agent = start_agent(agent_config("edge-site-1", &site.url()));
    wait_inventory(&hub, "edge-site-1", true).await;
    let admin = kubectl(&hub, "edge-site-1", ADMIN);
    let mut watch = admin.stream(&[
        "get",
        "configmaps",
        "--watch",
        "--output-watch-events",
        "-o",
        "jsonpath={.type} {.object.metadata.name}{\"\\n\"}",
    ]);
    admin
        .ok(
            &["create", "configmap", "via-leaf", "--from-literal=a=1"],
            None,
        )
        .await;
    assert_eq!(watch.line().await, "ADDED via-leaf");
    let got = admin
        .ok(
            &["get", "configmap", "via-leaf", "-o", "jsonpath={.data.a}"],
            None,
        )
        .await;
    assert_eq!(got.trim(), "1");
    admin.ok(&["delete", "configmap", "via-leaf"], None).await;
    assert_eq!(watch.line().await, "DELETED via-leaf");
    watch.kill().await;
}

#[tokio::test]
async fn a_hub_stops_promptly_with_a_watch_open_through_it() {
    let nats = NatsServer::start();
    let hub = proxy_hub(&nats).await;
    let _agent = start_agent(agent_config("edge-1", &nats.url()));
    wait_inventory(&hub, "edge-1", true).await;
    let admin = kubectl(&hub, "edge-1", ADMIN);
    admin
        .ok(&["create", "configmap", "open", "--from-literal=a=1"], None)
        .await;
    let mut watch = admin.stream(&[
        "get",
        "configmaps",
        "--watch",
        "-o",
        "jsonpath={.metadata.name}{\"\\n\"}",
    ]);
    assert_eq!(watch.line().await, "open");
    let proxy = hub.cluster_proxy.clone().expect("serving the proxy");
    // kubectl lists, then watches: wait for the watch call.
    let deadline = tokio::time::Instant::now() + SOON;
    while proxy.open_calls() == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the watch call never opened"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The call's task is the hub's: stopping the hub ends it rather than leaving it behind.
    let ProxyHub { hub, .. } = hub;
    tokio::time::timeout(SOON, hub.stop())
        .await
        .expect("the hub did not stop with a watch open");
    assert_eq!(proxy.open_calls(), 0, "a call outlived the hub");
    watch.kill().await;
}

#[tokio::test]
async fn an_offline_or_unknown_cluster_answers_503_at_once() {
    let nats = NatsServer::start();
    let hub = proxy_hub(&nats).await;
    let agent = start_agent(agent_config("edge-1", &nats.url()));
    wait_inventory(&hub, "edge-1", true).await;
    let admin = kubectl(&hub, "edge-1", ADMIN);
    admin.ok(&["get", "configmaps"], None).await;
    agent.stop().await;
    // `--raw`: kubectl shows the hub's Status message (its discovery errors hide it).
    let raw = [
        "get",
        "--raw",
        "/clusters/edge-1/api/v1/namespaces/default/configmaps",
    ];
    // Before the lease runs out, the call times out (the agent does not take it).
    let started = tokio::time::Instant::now();
    let err = admin.fails(&raw, None).await;
    assert!(
        err.contains("Error from server (ServiceUnavailable)"),
        "{err}"
    );
    assert!(err.contains("did not answer within 2s"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "answered in {:?}",
        started.elapsed()
    );
    wait_inventory(&hub, "edge-1", false).await;
    let started = tokio::time::Instant::now();
    let err = admin.fails(&raw, None).await;
    assert!(
        err.contains("Error from server (ServiceUnavailable)"),
        "{err}"
    );
    assert!(err.contains("is offline"), "{err}");
    assert!(err.contains("last heard from"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "answered in {:?}",
        started.elapsed()
    );
    let unknown = kubectl(&hub, "edge-9", ADMIN);
    let err = unknown
        .fails(
            &[
                "get",
                "--raw",
                "/clusters/edge-9/api/v1/namespaces/default/configmaps",
            ],
            None,
        )
        .await;
    assert!(err.contains("is not known to this hub"), "{err}");
}

#[tokio::test]
async fn kubectl_reaches_the_kubernetes_api_as_the_callers_identity_and_sees_its_refusals() {
    let nats = NatsServer::start();
    let cluster = kube_fixture::Cluster::start().await;
    let hub = proxy_hub(&nats).await;
    // Request bodies stream to the API server: the agent holds a window of one at a time, far
    // less than a large body.
    let mut config = agent_config("edge-1", &nats.url());
    config.proxy_limits.body_bytes = 256 * 1024;
    let _agent = kube_fixture::kube_agent_with(config, &cluster).await;
    wait_inventory(&hub, "edge-1", true).await;
    let admin = kubectl(&hub, "edge-1", ADMIN);
    let ns = kube_fixture::unique("proxy");
    admin.ok(&["create", "namespace", &ns], None).await;
    let cm = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n  namespace: {ns}\ndata:\n  k: v\n"
    );
    // The testkit's API server serves no OpenAPI: kubectl may not validate against it.
    let out = admin
        .ok(&["apply", "--validate=false", "-f", "-"], Some(&cm))
        .await;
    assert!(out.contains("configmap/app created"), "{out}");
    admin
        .ok(
            &[
                "-n",
                &ns,
                "patch",
                "configmap",
                "app",
                "--type=merge",
                "-p",
                r#"{"data":{"k":"w"}}"#,
            ],
            None,
        )
        .await;
    admin
        .ok(
            &[
                "-n",
                &ns,
                "patch",
                "configmap",
                "app",
                "--type=strategic",
                "-p",
                r#"{"data":{"j":"1"}}"#,
            ],
            None,
        )
        .await;
    admin
        .ok(
            &[
                "-n",
                &ns,
                "apply",
                "--validate=false",
                "--server-side",
                "-f",
                "-",
            ],
            Some(&cm.replace("k: v", "s: x")),
        )
        .await;
    let data = admin
        .ok(
            &[
                "-n",
                &ns,
                "get",
                "configmap",
                "app",
                "-o",
                "jsonpath={.data.k} {.data.j} {.data.s}",
            ],
            None,
        )
        .await;
    assert_eq!(data, "w 1 x");

    // A watch streams the API server's events through the agent.
    let mut watch = admin.stream(&[
        "-n",
        &ns,
        "get",
        "configmaps",
        "--watch",
        "--output-watch-events",
        "-o",
        "jsonpath={.type} {.object.metadata.name}{\"\\n\"}",
    ]);
    assert_eq!(watch.line().await, "ADDED app");
    admin
        .ok(
            &[
                "-n",
                &ns,
                "create",
                "configmap",
                "second",
                "--from-literal=a=1",
            ],
            None,
        )
        .await;
    assert_eq!(watch.line().await, "ADDED second");
    admin
        .ok(&["-n", &ns, "delete", "configmap", "second"], None)
        .await;
    assert_eq!(watch.line().await, "DELETED second");
    watch.kill().await;

    // A 2 MiB body reaches the API server through an agent that may hold 256 KiB of bodies.
    let big = "x".repeat(2 * 1024 * 1024);
    let manifest = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "big", "namespace": ns}, "data": {"blob": big}});
    admin
        .ok(
            &["create", "--validate=false", "-f", "-"],
            Some(&manifest.to_string()),
        )
        .await;
    let size = admin
        .ok(
            &[
                "-n",
                &ns,
                "get",
                "configmap",
                "big",
                "-o",
                "go-template={{len .data.blob}}",
            ],
            None,
        )
        .await;
    assert_eq!(size, big.len().to_string());

    // A deployer acts as its ServiceAccount: the spoke's RBAC decides, and its 403 comes back
    // verbatim.
    if let Some(fake) = cluster.fake() {
        fake.allow(
            AccessRule::service_account("default", "executor1")
                .verbs(&["get", "list"])
                .resources("", &["configmaps"])
                .in_namespace(&ns),
        );
    }
    let deployer = kubectl(&hub, "edge-1", DEPLOYER);
    let as_executor = "--as=system:serviceaccount:default:executor1";
    let read = deployer
        .ok(
            &[
                as_executor,
                "-n",
                &ns,
                "get",
                "configmap",
                "app",
                "-o",
                "jsonpath={.data.k}",
            ],
            None,
        )
        .await;
    assert_eq!(read, "w");
    let err = deployer
        .fails(
            &[as_executor, "-n", &ns, "delete", "configmap", "app"],
            None,
        )
        .await;
    assert!(
        err.contains(
            "Error from server (Forbidden): configmaps \"app\" is forbidden: User \"system:serviceaccount:default:executor1\" cannot delete resource \"configmaps\""
        ),
        "{err}"
    );
    if let Some(fake) = cluster.fake() {
        assert!(
            fake.impersonations()
                .iter()
                .any(|i| i.user == "system:serviceaccount:default:executor1"),
            "the agent impersonated the executor"
        );
    }
    // Not one of its grants: refused by the hub.
    let err = deployer
        .fails(
            &[
                "--as=system:serviceaccount:kube-system:admin",
                "-n",
                &ns,
                "get",
                "configmaps",
            ],
            None,
        )
        .await;
    assert!(err.contains("may not act as"), "{err}");

    let out = admin
        .ok(&["-n", &ns, "delete", "configmap", "app"], None)
        .await;
    assert!(out.contains("deleted"), "{out}");

    // Logs, and `logs -f` until kubectl goes away, which closes the stream on the spoke. (The
    // testkit's API server writes numbered lines; a real cluster's pod would have to run first.)
    if let Some(fake) = cluster.fake() {
        let pod = format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: app\n  namespace: {ns}\nspec:\n  containers:\n    - name: app\n      image: example/app:1\n"
        );
        admin
            .ok(&["apply", "--validate=false", "-f", "-"], Some(&pod))
            .await;
        let log = admin.ok(&["-n", &ns, "logs", "app"], None).await;
        assert_eq!(log, "app line 1\napp line 2\napp line 3\n");
        let mut follow = admin.stream(&["-n", &ns, "logs", "-f", "app"]);
        for n in 1..=5 {
            assert_eq!(follow.line().await, format!("app line {n}"));
        }
        assert_eq!(fake.open_log_streams(), 1);
        follow.kill().await;
        let deadline = tokio::time::Instant::now() + SOON;
        while fake.open_log_streams() > 0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the spoke's log stream stayed open after kubectl went away"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

#[tokio::test]
async fn kubectl_reads_and_follows_a_simulated_pods_log_until_the_pod_goes() {
    let nats = NatsServer::start();
    let hub = proxy_hub(&nats).await;
    let _agent = start_agent(agent_config("edge-1", &nats.url()));
    wait_inventory(&hub, "edge-1", true).await;
    let admin = kubectl(&hub, "edge-1", ADMIN);
    admin
        .ok(
            &["run", "web", "--image=nginx:1.27", "--restart=Never"],
            None,
        )
        .await;
    // Readiness is a watch event, as an API server's status update.
    admin
        .ok(
            &["wait", "--for=condition=Ready", "pod/web", "--timeout=20s"],
            None,
        )
        .await;
    let log = admin.ok(&["logs", "web", "--tail=1"], None).await;
    assert_eq!(log, "simulated kubelet: container web is ready\n");
    let mut follow = admin.stream(&["logs", "-f", "web"]);
    assert_eq!(
        follow.line().await,
        "simulated kubelet: pulled image \"nginx:1.27\""
    );
    assert_eq!(
        follow.line().await,
        "simulated kubelet: started container web"
    );
    assert_eq!(
        follow.line().await,
        "simulated kubelet: container web is ready"
    );
    admin.ok(&["label", "pod", "web", "tier=front"], None).await;
    let updated = follow.line().await;
    assert!(
        updated.starts_with("simulated kubelet: pod updated (resourceVersion "),
        "{updated}"
    );
    admin
        .ok(&["delete", "pod", "web", "--wait=false"], None)
        .await;
    assert_eq!(
        follow.line().await,
        "simulated kubelet: container web terminated (pod deleted)"
    );
    follow.ends().await;
    let err = admin.fails(&["logs", "web"], None).await;
    assert!(
        err.contains("NotFound") || err.contains("not found"),
        "{err}"
    );
}

#[tokio::test]
async fn large_bodies_stream_through_the_hub_in_chunks_both_ways() {
    use flotilla_agent::backend::{Backend, Strategy};
    let nats = NatsServer::start();
    let hub = proxy_hub(&nats).await;
    // The body streams: the agent may hold far less of it than its size.
    let mut config = agent_config("edge-1", &nats.url());
    config.proxy_limits.body_bytes = 256 * 1024;
    let agent = start_agent(config);
    wait_inventory(&hub, "edge-1", true).await;
    let admin = kubectl(&hub, "edge-1", ADMIN);

    // A 2 MiB request body: sixteen chunks, twice the agent's first credit.
    let big = "x".repeat(2 * 1024 * 1024);
    let manifest = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "big", "namespace": "default"}, "data": {"blob": big}});
    admin
        .ok(&["create", "-f", "-"], Some(&manifest.to_string()))
        .await;
    let stored = agent
        .backend
        .get(&flotilla_api::work::manifest_id(&manifest).unwrap())
        .await
        .unwrap()
        .expect("stored");
    assert_eq!(
        stored["data"]["blob"].as_str().map(str::len),
        Some(big.len())
    );

    // A 20 MiB list: 160 chunks through a window of 8.
    let blob = "y".repeat(64 * 1024);
    for i in 0..320 {
        let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("cm-{i}"), "namespace": "default"}, "data": {"blob": blob}});
        agent
            .backend
            .apply(
                &flotilla_api::work::manifest_id(&cm).unwrap(),
                &cm,
                &Strategy::Update,
            )
            .await
            .unwrap();
    }
    let raw = admin
        .ok(
            &[
                "get",
                "--raw",
                "/clusters/edge-1/api/v1/namespaces/default/configmaps",
            ],
            None,
        )
        .await;
    assert!(raw.len() > 20 * 1024 * 1024, "{} bytes", raw.len());
    let list: serde_json::Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), 321);
    assert_eq!(hub.cluster_proxy.as_ref().unwrap().open_calls(), 0);
}

#[tokio::test]
async fn a_client_that_sends_nothing_is_disconnected_within_the_handshake_timeout() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let nats = NatsServer::start();
    let hub = proxy_hub_with(&nats, |config| {
        config.cluster_proxy.connections.tls_handshake = Duration::from_millis(500);
        config.cluster_proxy.connections.header_read = Duration::from_millis(500);
    })
    .await;
    let addr = hub.cluster_proxy_addr.unwrap();

    // No TLS handshake at all.
    let started = tokio::time::Instant::now();
    let mut silent = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(Duration::from_secs(5), silent.read(&mut buf))
        .await
        .expect("the hub closes a silent connection");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    assert!(started.elapsed() >= Duration::from_millis(400));

    // Half a TLS ClientHello, then nothing.
    let mut stalled = tokio::net::TcpStream::connect(addr).await.unwrap();
    stalled
        .write_all(&[0x16, 0x03, 0x01, 0x02, 0x00])
        .await
        .unwrap();
    let read = tokio::time::timeout(Duration::from_secs(5), stalled.read(&mut buf))
        .await
        .expect("the hub closes a stalled handshake");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");

    // A finished handshake, then no request: closed too.
    let mut roots = rustls::RootCertStore::empty();
    use rustls::pki_types::pem::PemObject;
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(hub.ca.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let client = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(client))
        .connect("localhost".try_into().unwrap(), tcp)
        .await
        .expect("the handshake succeeds");
    let read = tokio::time::timeout(Duration::from_secs(5), tls.read(&mut buf))
        .await
        .expect("the hub closes a connection with no request");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
}
