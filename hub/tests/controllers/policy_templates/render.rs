//! What an operator sees of hub templates and how they re-resolve them, on real processes (a
//! nats-server, the hub, simulated agents): `RenderPolicy` gives one cluster's copy with its
//! values and protected values sealed (a hub Secret read by `lookup` too, never in plaintext on
//! the wire), what it read and whether it is what the cluster holds; a new
//! `trigger-update` value resolves every cluster again, sends nothing whose result is the same,
//! and never reaches a replica; a missing input is explained per template.

use super::*;
use flotilla_api::v1::RenderPolicyRequest;

const RENDERED: &str = r#"
apiVersion: policy.open-cluster-management.io/v1
kind: Policy
metadata:
  name: site-values
spec:
  remediationAction: enforce
  disabled: false
  policy-templates:
    - objectDefinition:
        apiVersion: policy.open-cluster-management.io/v1
        kind: ConfigurationPolicy
        metadata:
          name: site-values
        spec:
          remediationAction: enforce
          object-templates:
            - complianceType: musthave
              objectDefinition:
                apiVersion: v1
                kind: ConfigMap
                metadata:
                  name: site
                  namespace: target
                data:
                  vlan: '{{hub fromConfigMap "" "site-config" (printf "%s-vlan" .ManagedClusterName) hub}}'
                  password: '{{hub (lookup "v1" "Secret" "" "db").data.password hub}}'
"#;

fn render_request(cluster: &str) -> RenderPolicyRequest {
    RenderPolicyRequest {
        namespace: "default".into(),
        name: "site-values".into(),
        cluster: cluster.into(),
    }
}

/// The copy's first object template's `data`.
fn data_of(r: &flotilla_api::v1::RenderedPolicy) -> serde_json::Value {
    let copy = r.copy.clone().unwrap();
    let t: serde_json::Value =
        serde_json::from_slice(&copy.spec.unwrap().policy_templates[0].object_definition).unwrap();
    t["spec"]["object-templates"][0]["objectDefinition"]["data"].clone()
}

/// The value of a metric line `name` in the hub's metrics.
async fn metric(hub: &Hub, name: &str) -> f64 {
    let text = metrics_text(hub).await;
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test]
async fn render_shows_a_clusters_copy_sealed_and_trigger_update_resolves_again_sending_only_changes()
 {
    use data_encoding::BASE64;
    let nats = NatsServer::start();
    let seen = capture(&nats).await;
    let hub = start_hub(hub_config(&nats.url())).await;
    let mut clusters = clusters_client(&hub).await;
    let mut agents = Vec::new();
    for name in ["cluster0001", "cluster0002"] {
        let backend = sim(&["target"]).await;
        agents
            .push(accepted_agent_on(&mut clusters, agent_config(name, &nats.url()), backend).await);
    }
    bind_default_set(&hub).await;
    let mut policies = api(&hub).await;
    let password = "Kr4ken-db-5e1f";
    apply(
        &hub,
        &format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: db, namespace: default}}\n\
             stringData: {{password: {password}}}\n"
        ),
    )
    .await;
    apply(&hub, RENDERED).await;
    apply(&hub, &enforced_on_all("site-values")).await;

    // Before the ConfigMap exists: the error is explained for the cluster, nothing read counted.
    let r = eventually(
        "a rendered template error",
        || async {
            api(&hub)
                .await
                .render_policy(render_request("cluster0001"))
                .await
                .map(|r| r.into_inner())
        },
        |r| r.as_ref().is_ok_and(|r| r.decided && !r.errors.is_empty()),
    )
    .await
    .unwrap();
    assert!(
        r.errors[0].contains(
            "failed getting the ConfigMap site-config from : configmaps \"site-config\" not found"
        ),
        "{:?}",
        r.errors
    );

    let data = json!({"cluster0001-vlan": "3620", "cluster0002-vlan": "3621"});
    policies
        .apply_hub_config_map(site_config(&data))
        .await
        .unwrap();
    wait_policy(&mut policies, "site-values", "compliant on both", |p| {
        clusters_in(p)
            == [
                ("cluster0001".to_string(), "Compliant".to_string()),
                ("cluster0002".to_string(), "Compliant".to_string()),
            ]
    })
    .await;
    let site = id("", "v1", "ConfigMap", "target", "site");
    let cm = agents[0]
        .backend
        .get(&site)
        .await
        .unwrap()
        .expect("created");
    assert_eq!(cm["data"]["vlan"], "3620");
    assert_eq!(cm["data"]["password"], BASE64.encode(password.as_bytes()));

    // The render: this cluster's values, the Secret sealed, what was read, what it holds.
    let r = policies
        .render_policy(render_request("cluster0002"))
        .await
        .unwrap()
        .into_inner();
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert!(r.decided && r.current, "{r:?}");
    let d = data_of(&r);
    assert_eq!(d["vlan"], "3621");
    assert!(
        d["password"]
            .as_str()
            .is_some_and(|p| p.starts_with("$ocm_encrypted:")),
        "{d}"
    );
    assert_eq!(
        r.reads,
        ["ConfigMap default/site-config", "Secret default/db"]
    );
    let generation = r.record.clone().unwrap().generation;
    assert!(generation > 0);
    // A cluster that does not exist, or a policy that does not, is NOT_FOUND.
    let missing = policies
        .render_policy(render_request("nosuch"))
        .await
        .unwrap_err();
    assert_eq!(missing.code(), tonic::Code::NotFound, "{missing}");

    // trigger-update: every cluster resolved again, nothing changed so nothing sent.
    let before = metric(&hub, "flotilla_hub_policy_template_resolutions_total").await;
    apply(
        &hub,
        &RENDERED.replace(
            "  name: site-values\nspec:",
            "  name: site-values\n  annotations:\n    policy.open-cluster-management.io/trigger-update: \"1\"\nspec:",
        ),
    )
    .await;
    eventually(
        "resolved both clusters again",
        || metric(&hub, "flotilla_hub_policy_template_resolutions_total"),
        |n| *n >= before + 2.0,
    )
    .await;
    let r = policies
        .render_policy(render_request("cluster0002"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.record.clone().unwrap().generation, generation);
    assert!(r.current);
    let annotations = r.copy.unwrap().metadata.unwrap().annotations;
    assert!(
        !annotations.contains_key("policy.open-cluster-management.io/trigger-update"),
        "{annotations:?}"
    );

    // A hub Secret read by lookup never travelled or rested in plaintext.
    let captured = seen.lock().unwrap().clone();
    for m in &captured {
        for p in [
            password.as_bytes().to_vec(),
            BASE64.encode(password.as_bytes()).into_bytes(),
        ] {
            assert!(
                !holds(m, &p),
                "{}",
                String::from_utf8_lossy(&m[..m.len().min(200)])
            );
        }
    }
    drop(agents);
}
