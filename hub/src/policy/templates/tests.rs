use super::*;
use flotilla_api::policy::template::source::{Answer, Fetched};
use flotilla_api::v1::{ClusterClaim, ManagedClusterStatus, PolicySpec, PolicyTemplate};
use serde_json::json;

fn policy(templates: &[serde_json::Value]) -> Policy {
    Policy {
        metadata: Some(ObjectMeta {
            namespace: "policies".into(),
            name: "p".into(),
            ..Default::default()
        }),
        spec: Some(PolicySpec {
            policy_templates: templates
                .iter()
                .map(|t| PolicyTemplate {
                    object_definition: serde_json::to_vec(t).unwrap(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }),
        status: None,
    }
}

fn config_policy(data: serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": "policy.open-cluster-management.io/v1", "kind": "ConfigurationPolicy",
        "metadata": {"name": "t"},
        "spec": {"object-templates": [{"complianceType": "musthave",
            "objectDefinition": {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "c", "namespace": "default"}, "data": data}}]}})
}

fn source() -> Arc<dyn Source> {
    let mut f = Fetched::default();
    let get = |kind: &str, name: &str| Query::Get {
        api_version: "v1".into(),
        kind: kind.into(),
        namespace: "policies".into(),
        name: name.into(),
    };
    f.insert(
        get("ConfigMap", "site"),
        Answer::object(Some(json!({"data": {"edge-1-vlan": "3620"}}))),
    );
    f.insert(
        get("Secret", "creds"),
        Answer::object(Some(json!({"data": {"password": "aHVudGVyMg=="}}))),
    );
    f.insert(get("ConfigMap", "missing"), Answer::Object(None));
    Arc::new(f)
}

fn cluster(key: Option<&nkeys::XKey>) -> ClusterInputs {
    ClusterInputs {
        name: "edge-1".into(),
        labels: [("site".to_string(), "north".to_string())].into(),
        curve_key: key.map(|k| k.public_key()),
    }
}

fn template_of(p: &Policy, i: usize) -> serde_json::Value {
    serde_json::from_slice(&p.spec.as_ref().unwrap().policy_templates[i].object_definition).unwrap()
}

fn data_of(p: &Policy) -> serde_json::Value {
    template_of(p, 0)["spec"]["object-templates"][0]["objectDefinition"]["data"].clone()
}

#[test]
fn a_policy_is_templated_by_its_hub_delimiters_unless_the_root_turns_them_off() {
    let t = config_policy(json!({"v": "{{hub .ManagedClusterName hub}}"}));
    let spoke = config_policy(json!({"v": "{{ fromClusterClaim \"id.k8s.io\" }}"}));
    assert!(templated(&policy(std::slice::from_ref(&t))));
    assert!(!templated(&policy(&[spoke])));
    let mut off = policy(&[t]);
    off.metadata
        .as_mut()
        .unwrap()
        .annotations
        .insert(DISABLE_TEMPLATES.into(), "true".into());
    assert!(!templated(&off));
}

#[test]
fn a_cluster_gets_its_name_labels_and_hub_config_map_values() {
    let p = policy(&[config_policy(json!({
        "vlan": "{{hub fromConfigMap \"\" \"site\" (printf \"%s-vlan\" .ManagedClusterName) | toInt hub}}",
        "site": "{{hub index .ManagedClusterLabels \"site\" hub}}",
        "ns": "{{hub .PolicyMetadata.namespace hub}}"}))]);
    let key = SealingKey::ephemeral();
    let r = resolve(
        p.clone(),
        p.metadata.as_ref().unwrap(),
        &cluster(None),
        source(),
        &key,
    );
    assert_eq!(r.errors, Vec::<String>::new());
    assert_eq!(
        data_of(&r.copy),
        json!({"vlan": 3620, "site": "north", "ns": "policies"})
    );
    assert_eq!(r.reads.len(), 1);
    // The same inputs, the same hash; another cluster's labels, another.
    let again = resolve(
        p.clone(),
        p.metadata.as_ref().unwrap(),
        &cluster(None),
        source(),
        &key,
    );
    assert_eq!(again.hash, r.hash);
    let mut south = cluster(None);
    south.labels.insert("site".into(), "south".into());
    let other = resolve(
        p.clone(),
        p.metadata.as_ref().unwrap(),
        &south,
        source(),
        &key,
    );
    assert_ne!(other.hash, r.hash);
}

#[test]
fn a_failed_template_goes_unresolved_with_ocms_annotation_and_reads_nothing() {
    let p = policy(&[config_policy(
        json!({"v": "{{hub fromConfigMap \"\" \"missing\" \"k\" hub}}"}),
    )]);
    let r = resolve(
        p.clone(),
        p.metadata.as_ref().unwrap(),
        &cluster(None),
        source(),
        &SealingKey::ephemeral(),
    );
    assert_eq!(r.errors.len(), 1);
    let t = template_of(&r.copy, 0);
    let error = t["metadata"]["annotations"][HUB_TEMPLATES_ERROR]
        .as_str()
        .unwrap();
    assert!(
        error.ends_with(
            "error calling fromConfigMap: failed getting the ConfigMap missing from : \
             configmaps \"missing\" not found"
        ),
        "{error}"
    );
    assert_eq!(
        data_of(&r.copy)["v"],
        "{{hub fromConfigMap \"\" \"missing\" \"k\" hub}}"
    );
    assert!(r.reads.is_empty());
}

#[test]
fn secrets_are_sealed_to_the_agent_and_the_hash_follows_the_plaintext_only() {
    let agent = nkeys::XKey::new();
    let hub = SealingKey::ephemeral();
    let p = policy(&[config_policy(json!({
        "password": "{{hub fromSecret \"\" \"creds\" \"password\" hub}}",
        "literal": "{{hub \"x\" | protect hub}}"}))]);
    let root = p.metadata.clone().unwrap();
    let r = resolve(p.clone(), &root, &cluster(Some(&agent)), source(), &hub);
    assert_eq!(r.errors, Vec::<String>::new());
    let t = template_of(&r.copy, 0);
    assert_eq!(t["metadata"]["annotations"][SEALED_BY], hub.public());
    let data = data_of(&r.copy);
    let sealed = data["password"].as_str().unwrap();
    assert!(sealed.starts_with(ENCRYPTED), "{sealed}");
    assert!(!sealed.contains("aHVudGVyMg"));
    let opened = agent
        .open(
            &BASE64
                .decode(&sealed.as_bytes()[ENCRYPTED.len()..])
                .unwrap(),
            &nkeys::XKey::from_public_key(hub.public()).unwrap(),
        )
        .unwrap();
    assert_eq!(opened, b"aHVudGVyMg==");
    // Every seal differs; the hash does not.
    let again = resolve(p.clone(), &root, &cluster(Some(&agent)), source(), &hub);
    assert_ne!(data_of(&again.copy)["password"], data["password"]);
    assert_eq!(again.hash, r.hash);
    // Another hub key (another digest key) or another value gives another hash.
    let other = resolve(
        p.clone(),
        &root,
        &cluster(Some(&agent)),
        source(),
        &SealingKey::ephemeral(),
    );
    assert_ne!(other.hash, r.hash);
}

#[test]
fn protect_without_the_agents_key_is_a_template_error_never_plaintext() {
    let p = policy(&[config_policy(
        json!({"password": "{{hub fromSecret \"\" \"creds\" \"password\" hub}}"}),
    )]);
    let r = resolve(
        p.clone(),
        p.metadata.as_ref().unwrap(),
        &cluster(None),
        source(),
        &SealingKey::ephemeral(),
    );
    assert_eq!(r.errors.len(), 1);
    assert!(
        !String::from_utf8_lossy(
            &r.copy.spec.as_ref().unwrap().policy_templates[0].object_definition
        )
        .contains("aHVudGVyMg")
    );
}

#[test]
fn the_curve_key_comes_from_the_clusters_reserved_claim() {
    let c = ManagedCluster {
        metadata: Some(ObjectMeta {
            name: "edge-1".into(),
            ..Default::default()
        }),
        status: Some(ManagedClusterStatus {
            cluster_claims: vec![ClusterClaim {
                name: flotilla_api::meta::CLAIM_CURVE_KEY.into(),
                value: "XABC".into(),
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let inputs = ClusterInputs::of(&c);
    assert_eq!(inputs.curve_key.as_deref(), Some("XABC"));
    let mut moved = inputs.clone();
    moved.curve_key = Some("XDEF".into());
    assert_ne!(moved.fingerprint(), inputs.fingerprint());
}
