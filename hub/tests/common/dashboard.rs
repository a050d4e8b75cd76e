//! Fixtures shared by the dashboard tests (`dashboard.rs` over plain HTTP, `dashboard_browser.rs`
//! in Chromium): a hub serving the dashboard, raw HTTP requests, a placement, a replica set and
//! an add-on to show.

#![allow(dead_code)]

use super::common::tokens::tokens;
use super::common::*;
use flotilla_api::ocm::{Document, parse_documents};
use flotilla_api::v1::{
    LocalPlacementReference, Manifest, ManifestWorkReplicaSet, ManifestWorkReplicaSetSpec,
    ManifestWorkSpec, ManifestsTemplate, ObjectMeta, RolloutConfig, RolloutStrategy,
};
use flotilla_hub::Hub;
use flotilla_hub::dashboard::history::Availability;
use flotilla_testkit::NatsServer;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A hub with the test token file and the dashboard on a free loopback port.
pub async fn hub(nats: &NatsServer, edit: impl FnOnce(&mut flotilla_hub::Config)) -> Hub {
    let mut config = hub_config(&nats.url());
    config.api.tokens = Some(tokens());
    config.dashboard.listen = Some("127.0.0.1:0".parse().unwrap());
    edit(&mut config);
    start_hub(config).await
}

/// An HTTP/1.1 answer: status, headers (lower-case names), body.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// One request on its own connection (`Connection: close`), read to the end.
pub async fn http(
    hub: &Hub,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    let addr = hub.dashboard_addr.expect("serving the dashboard");
    let mut tcp = tokio::time::timeout(SOON, tokio::net::TcpStream::connect(addr))
        .await
        .unwrap()
        .unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    tcp.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(SOON, tcp.read_to_end(&mut raw))
        .await
        .expect("answered in time")
        .unwrap();
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = text.split_once("\r\n\r\n").expect("a head");
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_lowercase(), v.trim().to_string()))
        .collect();
    Answer {
        status,
        headers,
        body: body.to_string(),
    }
}

/// Placement `edge`: the clusters labelled `rollout: "yes"`.
pub const PLACEMENT: &str = r#"
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {name: edge, namespace: default}
spec:
  clusterSets: [default]
  predicates:
    - requiredClusterSelector:
        labelSelector:
          matchLabels: {rollout: "yes"}
"#;

pub fn replica_set() -> ManifestWorkReplicaSet {
    let cm = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings","namespace":"default"},"data":{"v":"1"}}"#;
    ManifestWorkReplicaSet {
        metadata: Some(ObjectMeta {
            name: "settings".into(),
            namespace: "default".into(),
            ..Default::default()
        }),
        spec: Some(ManifestWorkReplicaSetSpec {
            manifest_work_template: Some(ManifestWorkSpec {
                workload: Some(ManifestsTemplate {
                    manifests: vec![Manifest {
                        raw: cm.as_bytes().to_vec(),
                    }],
                }),
                ..Default::default()
            }),
            placement_refs: vec![LocalPlacementReference {
                name: "edge".into(),
                rollout_strategy: Some(RolloutStrategy {
                    r#type: "Progressive".into(),
                    progressive: Some(RolloutConfig {
                        max_concurrency: "1".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
            }],
            cascade_deletion_policy: String::new(),
        }),
        status: None,
        hub: None,
    }
}

/// Waits until the hub's inventory shows `name` in state `want`; when it did.
pub async fn wait_state(hub: &Hub, name: &str, want: Availability) -> Instant {
    let deadline = Instant::now() + SOON;
    loop {
        if hub
            .inventory
            .get(name)
            .is_some_and(|c| Availability::of(&c) == want)
        {
            return Instant::now();
        }
        assert!(Instant::now() < deadline, "{name} never became {want:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// An add-on installed by placement `edge`, progressively, from a template of one ConfigMap.
pub const ADDON: &str = r#"
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: AddOnTemplate
metadata: {name: probe-v1}
spec:
  addonName: probe
  agentSpec:
    workload:
      manifests:
        - apiVersion: v1
          kind: ConfigMap
          metadata: {name: probe-settings, namespace: open-cluster-management-agent-addon}
          data: {cluster: "{{CLUSTER_NAME}}"}
---
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: ClusterManagementAddOn
metadata: {name: probe}
spec:
  addOnMeta: {displayName: Probe, description: a test add-on}
  supportedConfigs:
    - group: addon.open-cluster-management.io
      resource: addontemplates
      defaultConfig: {name: probe-v1}
  installStrategy:
    type: Placements
    placements:
      - namespace: default
        name: edge
        rolloutStrategy:
          type: Progressive
          progressive: {maxConcurrency: "1"}
"#;

/// Applies the add-on fixture through the controllers of `hub`.
pub async fn apply_addon(hub: &Hub) {
    let ctl = hub.controllers().expect("the controllers");
    for doc in parse_documents(ADDON) {
        match doc.unwrap() {
            Document::AddOnTemplate(t) => {
                ctl.get::<flotilla_hub::addon::AddOns>()
                    .apply_template(t)
                    .await
                    .unwrap();
            }
            Document::ClusterManagementAddOn(a) => {
                ctl.get::<flotilla_hub::addon::AddOns>()
                    .apply_addon(a)
                    .await
                    .unwrap();
            }
            other => panic!("unexpected fixture {other:?}"),
        }
    }
}
