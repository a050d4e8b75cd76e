//! Hub templates with the real binaries: a hub ConfigMap and Secret applied with
//! `flotilla apply -f`, listed with `get hubconfigmaps|hubsecrets` (a Secret's values never
//! printed), a templated policy enforced on two simulated clusters, each cluster's copy shown by
//! `policy render` (its own value, the Secret sealed) and `policy explain` (sent, reported, read);
//! the ConfigMap deleted with `delete hubconfigmap` → OCM's template error, explained; bad names
//! refused as `apply` refuses them.

mod common;

use common::*;
use flotilla_testkit::{NatsServer, Proc};

const PASSWORD: &str = "Kr4ken-e2e-77aa";

fn documents() -> String {
    format!(
        r#"
apiVersion: v1
kind: ConfigMap
metadata: {{name: site-config, namespace: default}}
data:
  edge-1-vlan: "3620"
  edge-2-vlan: "3621"
---
apiVersion: v1
kind: Secret
metadata: {{name: db, namespace: default}}
stringData: {{password: {PASSWORD}}}
---
apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSetBinding
metadata: {{name: default, namespace: default}}
spec: {{clusterSet: default}}
---
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {{name: all, namespace: default}}
spec: {{clusterSets: [default]}}
---
apiVersion: policy.open-cluster-management.io/v1
kind: PlacementBinding
metadata: {{name: binding-site-values, namespace: default}}
placementRef: {{name: all, kind: Placement, apiGroup: cluster.open-cluster-management.io}}
subjects:
  - {{name: site-values, kind: Policy, apiGroup: policy.open-cluster-management.io}}
---
apiVersion: policy.open-cluster-management.io/v1
kind: Policy
metadata: {{name: site-values, namespace: default}}
spec:
  remediationAction: enforce
  disabled: false
  policy-templates:
    - objectDefinition:
        apiVersion: policy.open-cluster-management.io/v1
        kind: ConfigurationPolicy
        metadata: {{name: site-values}}
        spec:
          remediationAction: enforce
          object-templates:
            - complianceType: musthave
              objectDefinition:
                apiVersion: v1
                kind: ConfigMap
                metadata: {{name: site, namespace: default}}
                data:
                  vlan: '{{{{hub fromConfigMap "" "site-config" (printf "%s-vlan" .ManagedClusterName) hub}}}}'
                  password: '{{{{hub fromSecret "" "db" "password" hub}}}}'
"#
    )
}

#[test]
fn hub_data_is_listed_and_deleted_and_a_clusters_copy_is_rendered_and_explained() {
    use data_encoding::BASE64;
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let hub_proc = HubBuilder::new(&nats, dir.path()).auto_accept().start();
    let hub = hub_proc.grpc.clone();
    let agents: Vec<Proc> = ["edge-1", "edge-2"]
        .iter()
        .map(|n| AgentBuilder::new(&nats, dir.path(), n).start())
        .collect();
    let mut logs: Vec<&Proc> = agents.iter().collect();
    logs.push(&hub_proc.proc);
    wait_for("2 clusters Available", &logs, || {
        (clusters_json(&hub)?.iter().filter(|c| available(c)).count() == 2).then_some(())
    });
    let file = dir.path().join("site.yaml");
    std::fs::write(&file, documents()).unwrap();
    cli_ok(&hub, &["apply", "-f", file.to_str().unwrap()]);

    // The hub's data, listed: the Secret by its keys, never its value.
    let table = cli_ok(&hub, &["get", "hubconfigmaps", "-n", "default"]);
    assert!(
        row(&table, "site-config").is_some_and(|r| r.ends_with('2')),
        "{table}"
    );
    let all = cli_ok(&hub, &["get", "hubsecrets"]);
    assert!(
        row(&all, "default").is_some_and(|r| r.contains("db") && r.contains("Opaque")),
        "{all}"
    );
    let wide = cli_ok(&hub, &["get", "hubsecrets", "-n", "default", "-o", "wide"]);
    assert!(
        row(&wide, "db").is_some_and(|r| r.contains("password")),
        "{wide}"
    );
    let yaml = cli_ok(
        &hub,
        &["get", "hubsecrets", "db", "-n", "default", "-o", "yaml"],
    );
    assert!(yaml.contains("flotilla.io/data-keys: password"), "{yaml}");
    for shown in [&table, &all, &wide, &yaml] {
        assert!(!shown.contains(PASSWORD) && !shown.contains(&BASE64.encode(PASSWORD.as_bytes())));
    }

    wait_for("the policy Compliant", &logs, || {
        let table = cli_ok(&hub, &["get", "policies", "-n", "default"]);
        row(&table, "site-values")
            .is_some_and(|r| r.contains("Compliant") && !r.contains("NonCompliant"))
            .then_some(())
    });

    // Each cluster's copy: its own value, the Secret's sealed to its agent.
    let rendered = cli_ok(&hub, &["policy", "render", "site-values", "-c", "edge-2"]);
    assert!(
        rendered.contains("vlan: '3621'") || rendered.contains("vlan: \"3621\""),
        "{rendered}"
    );
    assert!(rendered.contains("$ocm_encrypted:"), "{rendered}");
    assert!(
        !rendered.contains(PASSWORD) && !rendered.contains(&BASE64.encode(PASSWORD.as_bytes())),
        "{rendered}"
    );
    let explained = cli_ok(&hub, &["policy", "explain", "site-values", "-c", "edge-1"]);
    for line in [
        "policy default/site-values on cluster edge-1",
        "Decided:      yes (enforce)",
        "the copy the hub resolves now",
        "Reported:     Compliant",
        "Hub reads:    ConfigMap default/site-config, Secret default/db",
        "  ConfigurationPolicy site-values: Compliant",
    ] {
        assert!(explained.contains(line), "{line:?} in\n{explained}");
    }

    // Names are checked as apply checks them; what is not there is NotFound.
    let (ok, _, err) = cli(&hub, &["delete", "hubconfigmap", "Bad_Name"]);
    assert!(!ok && err.contains("name"), "{err}");
    let (ok, _, err) = cli(&hub, &["delete", "hubsecret", "nosuch"]);
    assert!(!ok && err.contains("not found"), "{err}");

    // The input deleted: OCM's template error on every cluster, explained.
    let out = cli_ok(&hub, &["delete", "hubconfigmap", "site-config"]);
    assert!(
        out.contains("configmap/site-config deleted from the hub"),
        "{out}"
    );
    let explained = wait_for("the template error explained", &logs, || {
        let e = cli_ok(&hub, &["policy", "explain", "site-values", "-c", "edge-1"]);
        (e.contains("hub template error:") && e.contains("NonCompliant")).then_some(e)
    });
    assert!(
        explained.contains(
            "failed getting the ConfigMap site-config from : configmaps \"site-config\" not found"
        ),
        "{explained}"
    );
    let rendered = cli_ok(&hub, &["policy", "render", "site-values", "-c", "edge-1"]);
    assert!(rendered.starts_with("# hub template error: "), "{rendered}");
    assert!(
        rendered.contains("policy.open-cluster-management.io/hub-templates-error"),
        "{rendered}"
    );
    let empty = cli_ok(&hub, &["get", "hubconfigmaps"]);
    assert!(!empty.contains("site-config"), "{empty}");
    drop(agents);
}
