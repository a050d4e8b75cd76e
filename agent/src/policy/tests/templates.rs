//! Managed-cluster templates on the simulated cluster: a `lookup` of a ClusterClaim
//! (policy-collection's templatized PodDisruptionBudget, verbatim), `fromConfigMap` re-resolved
//! when its ConfigMap changes, OCM's errors, `range` over a lookup in `object-templates-raw`.

use super::*;
use flotilla_api::v1::ClusterClaim;

const PDB_TEMPLATIZED: &str = include_str!(
    "../../../../api/src/ocm/policy/testdata/policy-pod-disruption-budget-templatized.yaml"
);

fn namespace(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": labels}})
}

fn config_map(ns: &str, name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"namespace": ns, "name": name}, "data": data})
}

fn id(api_version: &str, kind: &str, ns: &str, name: &str) -> ManifestId {
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g.to_string(), v.to_string()),
        None => (String::new(), api_version.to_string()),
    };
    ManifestId {
        group,
        version,
        kind: kind.into(),
        namespace: ns.into(),
        name: name.into(),
    }
}

/// A ConfigurationPolicy of one object template.
fn config_policy(name: &str, object: Value) -> Value {
    json!({"apiVersion": "policy.open-cluster-management.io/v1", "kind": "ConfigurationPolicy",
        "metadata": {"name": name},
        "spec": {"remediationAction": "enforce", "severity": "low",
            "object-templates": [{"complianceType": "musthave", "objectDefinition": object}]}})
}

async fn pdb_max_unavailable(claims: Vec<ClusterClaim>) -> Value {
    let mut f = Fixture::with_claims(
        Arc::new(SimBackend::new(4, 16, "v1.30.2")),
        Arc::new(LocalStore::memory(CLUSTER)),
        claims,
    );
    put(&f.sim, &namespace("default", json!({}))).await;
    let p = replicated("pdb", 1, "enforce", &fixture_templates(PDB_TEMPLATIZED));
    f.send(&p, Action::CreateRequest).await;
    let r = f.report(|r| r.compliant == "Compliant").await;
    assert!(
        newest(&r).contains(
            "poddisruptionbudgets [nginx-pdb] in namespace default was created successfully"
        ),
        "{:?}",
        r.details[0].history
    );
    let pdb = f
        .sim
        .get(&id(
            "policy/v1",
            "PodDisruptionBudget",
            "default",
            "nginx-pdb",
        ))
        .await
        .unwrap()
        .expect("the PodDisruptionBudget was created");
    pdb["spec"]["maxUnavailable"].clone()
}

#[tokio::test]
async fn a_lookup_of_a_cluster_claim_gives_each_cluster_its_value() {
    // policy-collection's templatized PDB: 25% where the claim environment=prod exists …
    let prod = vec![ClusterClaim {
        name: "environment".into(),
        value: "prod".into(),
    }];
    assert_eq!(pdb_max_unavailable(prod).await, json!("25%"));
    // … 50% where it does not (a missing object is an empty map, its fields no value).
    assert_eq!(pdb_max_unavailable(Vec::new()).await, json!("50%"));
}

#[tokio::test]
async fn a_from_config_map_value_is_re_enforced_when_the_config_map_changes() {
    let mut f = Fixture::new();
    put(&f.sim, &namespace("default", json!({}))).await;
    put(
        &f.sim,
        &config_map("default", "site", json!({"vlan": "3620"})),
    )
    .await;
    let target = config_map(
        "default",
        "net",
        json!({"vlan": "{{ fromConfigMap \"default\" \"site\" \"vlan\" }}",
               "port": "{{ fromConfigMap \"default\" \"site\" \"vlan\" | toInt | add 1 }}"}),
    );
    let p = replicated("net", 1, "enforce", &[config_policy("net", target)]);
    f.send(&p, Action::CreateRequest).await;
    f.report(|r| r.compliant == "Compliant").await;
    let net = id("v1", "ConfigMap", "default", "net");
    let data = f.sim.get(&net).await.unwrap().unwrap()["data"].clone();
    // `toInt` takes the quotes away: the value is a number, as in OCM.
    assert_eq!(data, json!({"vlan": "3620", "port": 3621}));

    put(
        &f.sim,
        &config_map("default", "site", json!({"vlan": "3700"})),
    )
    .await;
    tokio::time::timeout(WAIT, async {
        loop {
            let now = f.sim.get(&net).await.unwrap().unwrap();
            if now["data"]["vlan"] == "3700" {
                assert_eq!(now["data"]["port"], 3701);
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the input's change was enforced");
}

#[tokio::test]
async fn a_missing_input_is_ocms_template_error_until_it_exists() {
    let mut f = Fixture::new();
    put(&f.sim, &namespace("default", json!({}))).await;
    let object = config_map(
        "default",
        "net",
        json!({"vlan": "{{ fromConfigMap \"default\" \"site\" \"vlan\" }}"}),
    );
    let raw = object.to_string();
    let p = replicated("net", 1, "enforce", &[config_policy("net", object)]);
    f.send(&p, Action::CreateRequest).await;
    let r = f.report(|r| r.compliant == "NonCompliant").await;
    assert_eq!(
        newest(&r),
        format!(
            "NonCompliant; violation - failed to resolve the template {raw}: template: \
             tmpl:3:12: executing \"tmpl\" at <fromConfigMap \"default\" \"site\" \"vlan\">: \
             error calling fromConfigMap: failed getting the ConfigMap site from default: \
             configmaps \"site\" not found"
        )
    );
    // Nothing was written for the template that failed.
    let net = id("v1", "ConfigMap", "default", "net");
    assert!(f.sim.get(&net).await.unwrap().is_none());

    put(
        &f.sim,
        &config_map("default", "site", json!({"vlan": "3620"})),
    )
    .await;
    f.report(|r| r.compliant == "Compliant").await;
    assert_eq!(
        f.sim.get(&net).await.unwrap().unwrap()["data"]["vlan"],
        "3620"
    );
}

#[tokio::test]
async fn an_unknown_function_is_a_parse_error_naming_it() {
    let mut f = Fixture::new();
    let object = config_map("default", "x", json!({"a": "{{ now | date \"2006\" }}"}));
    let raw = object.to_string();
    let p = replicated("x", 1, "inform", &[config_policy("x", object)]);
    f.send(&p, Action::CreateRequest).await;
    let r = f.report(|r| r.compliant == "NonCompliant").await;
    assert_eq!(
        newest(&r),
        format!(
            "NonCompliant; violation - failed to parse the template JSON string {raw}: \
             template: tmpl:3: function \"now\" not defined"
        )
    );
}

#[tokio::test]
async fn object_templates_raw_ranges_over_a_lookup() {
    let mut f = Fixture::new();
    put(&f.sim, &namespace("team-a", json!({"team": "alpha"}))).await;
    put(&f.sim, &namespace("team-b", json!({"team": "beta"}))).await;
    put(&f.sim, &namespace("other", json!({}))).await;
    let raw = r#"{{- range (lookup "v1" "Namespace" "" "" "team").items }}
- complianceType: musthave
  objectDefinition:
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: team-info
      namespace: {{ .metadata.name }}
    data:
      team: '{{ index .metadata.labels "team" | upper }}'
{{- end }}
"#;
    let template = json!({"apiVersion": "policy.open-cluster-management.io/v1",
        "kind": "ConfigurationPolicy", "metadata": {"name": "teams"},
        "spec": {"remediationAction": "enforce", "object-templates-raw": raw}});
    let p = replicated("teams", 1, "enforce", &[template]);
    f.send(&p, Action::CreateRequest).await;
    f.report(|r| r.compliant == "Compliant").await;
    for (ns, team) in [("team-a", "ALPHA"), ("team-b", "BETA")] {
        let cm = f
            .sim
            .get(&id("v1", "ConfigMap", ns, "team-info"))
            .await
            .unwrap()
            .expect("created for a namespace the lookup found");
        assert_eq!(cm["data"]["team"], team);
    }
    assert!(
        f.sim
            .get(&id("v1", "ConfigMap", "other", "team-info"))
            .await
            .unwrap()
            .is_none()
    );
}

/// A ConfigurationPolicy of `object-templates-raw` with a prune behaviour.
fn raw_policy(name: &str, prune: &str, raw: &str) -> Value {
    json!({"apiVersion": "policy.open-cluster-management.io/v1",
        "kind": "ConfigurationPolicy", "metadata": {"name": name},
        "spec": {"remediationAction": "enforce", "pruneObjectBehavior": prune,
            "object-templates-raw": raw}})
}

const TEAM_INFO: &str = r#"{{- range (lookup "v1" "Namespace" "" "" "team").items }}
- complianceType: musthave
  objectDefinition:
    apiVersion: v1
    kind: ConfigMap
    metadata:
      name: team-info
      namespace: {{ .metadata.name }}
    data:
      team: '{{ index .metadata.labels "team" }}'
{{- end }}
"#;

#[tokio::test]
async fn deleting_a_templated_policy_prunes_what_its_resolved_templates_created() {
    for prune in ["DeleteIfCreated", "DeleteAll"] {
        let mut f = Fixture::new();
        put(&f.sim, &namespace("team-a", json!({"team": "alpha"}))).await;
        put(&f.sim, &namespace("team-b", json!({"team": "beta"}))).await;
        // A templated name too: the key pruning looks for is the resolved one.
        let named = config_map(
            "team-a",
            "{{ fromConfigMap \"team-a\" \"site\" \"name\" }}",
            json!({"x": "1"}),
        );
        put(
            &f.sim,
            &config_map("team-a", "site", json!({"name": "named"})),
        )
        .await;
        let mut by_name = config_policy("named", named);
        by_name["spec"]["pruneObjectBehavior"] = json!(prune);
        let p = replicated(
            "teams",
            1,
            "enforce",
            &[raw_policy("teams", prune, TEAM_INFO), by_name],
        );
        f.send(&p, Action::CreateRequest).await;
        f.report(|r| r.compliant == "Compliant").await;
        let made = [
            id("v1", "ConfigMap", "team-a", "team-info"),
            id("v1", "ConfigMap", "team-b", "team-info"),
            id("v1", "ConfigMap", "team-a", "named"),
        ];
        for m in &made {
            assert!(
                f.sim.get(m).await.unwrap().is_some(),
                "{prune}: {m:?} created"
            );
        }
        f.send(&p, Action::DeleteRequest).await;
        f.report(|r| r.deleted).await;
        for m in &made {
            assert!(
                f.sim.get(m).await.unwrap().is_none(),
                "{prune}: {m:?} pruned"
            );
        }
    }
}

#[tokio::test]
async fn a_template_reading_more_than_a_thousand_objects_is_an_error() {
    let mut f = Fixture::new();
    put(&f.sim, &namespace("default", json!({}))).await;
    let object = config_map(
        "default",
        "many",
        json!({"x": "{{ range $i := until 100000 }}{{ (lookup \"v1\" \"ConfigMap\" \"default\" (printf \"c%d\" $i)).data }}{{ end }}"}),
    );
    let p = replicated("many", 1, "enforce", &[config_policy("many", object)]);
    f.send(&p, Action::CreateRequest).await;
    let r = f.report(|r| r.compliant == "NonCompliant").await;
    assert_eq!(
        newest(&r),
        "NonCompliant; violation - the template reads more than 1000 objects (Flotilla's bound)"
    );
    assert!(
        f.sim
            .get(&id("v1", "ConfigMap", "default", "many"))
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn a_lookup_of_a_cluster_scoped_kind_ignores_its_namespace_argument() {
    let mut f = Fixture::new();
    put(&f.sim, &namespace("default", json!({}))).await;
    put(&f.sim, &namespace("kube-system", json!({"tier": "system"}))).await;
    // go-template-utils scopes its client to the namespace only for namespaced kinds.
    let object = config_map(
        "default",
        "tier",
        json!({"tier": "{{ (lookup \"v1\" \"Namespace\" \"default\" \"kube-system\").metadata.labels.tier }}"}),
    );
    let p = replicated("tier", 1, "enforce", &[config_policy("tier", object)]);
    f.send(&p, Action::CreateRequest).await;
    f.report(|r| r.compliant == "Compliant").await;
    let cm = f
        .sim
        .get(&id("v1", "ConfigMap", "default", "tier"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(cm["data"]["tier"], "system");
}

#[tokio::test]
async fn a_template_error_of_a_megabyte_is_reported_cut_to_four_kilobytes() {
    let mut f = Fixture::new();
    // The message quotes the whole objectDefinition and fail's 1 MiB argument.
    let object = config_map(
        "default",
        "big",
        json!({"x": "{{ fail (repeat 500000 \"é\") }}", "pad": "y".repeat(400_000)}),
    );
    let p = replicated("big", 1, "inform", &[config_policy("big", object)]);
    f.send(&p, Action::CreateRequest).await;
    let r = f.report(|r| r.compliant == "NonCompliant").await;
    let message = newest(&r);
    assert!(message.len() <= 4096, "{} bytes", message.len());
    assert!(
        message.starts_with("NonCompliant; violation - failed to resolve the template {"),
        "{}",
        &message[..100]
    );
    assert!(message.ends_with('…'));
}
