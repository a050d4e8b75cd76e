//! Manifests over one work's size limit: split into OCM's `addon-<name>-deploy-N` works.

use super::*;
use crate::work::MAX_MANIFESTS_BYTES;

/// A ConfigMap `name` whose JSON is about `kib` KiB.
fn config_map(name: &str, kib: usize) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns"},
        "data": {"blob": "x".repeat(kib * 1024)},
    })
}

fn names(works: &[v1::ManifestWork]) -> Vec<String> {
    works
        .iter()
        .map(|w| w.metadata.as_ref().unwrap().name.clone())
        .collect()
}

fn manifest_names(w: &v1::ManifestWork) -> Vec<String> {
    objects(w)
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

fn size(w: &v1::ManifestWork) -> usize {
    w.spec
        .as_ref()
        .unwrap()
        .workload
        .as_ref()
        .unwrap()
        .manifests
        .iter()
        .map(|m| m.raw.len())
        .sum()
}

#[test]
fn manifests_over_one_work_go_into_ocms_deploy_works_each_once_and_in_order() {
    // Seven ConfigMaps of 100 KiB (~700 KiB): four fit in the first work, three in the second.
    let maps: Vec<Value> = (0..7)
        .map(|i| config_map(&format!("blob-{i}"), 100))
        .collect();
    let mut t = template_of(maps);
    agent_spec_mut(&mut t).delete_option = Some(v1::DeleteOption {
        propagation_policy: "Orphan".into(),
        ..Default::default()
    });
    let hashes = BTreeMap::from([(
        "addontemplates.addon.open-cluster-management.io//t".to_string(),
        "abc".to_string(),
    )]);
    let works = render(&input(&t, None, &hashes)).unwrap();
    assert_eq!(
        names(&works),
        [
            "addon-hello-template-deploy-0",
            "addon-hello-template-deploy-1"
        ]
    );
    let all: Vec<String> = works.iter().flat_map(manifest_names).collect();
    let expected: Vec<String> = (0..7).map(|i| format!("blob-{i}")).collect();
    assert_eq!(
        all, expected,
        "every manifest exactly once, in the template's order"
    );
    assert_eq!(
        manifest_names(&works[0]).len(),
        4,
        "the first work is filled first"
    );
    for w in &works {
        assert!(size(w) <= MAX_MANIFESTS_BYTES, "{} bytes", size(w));
        assert!(
            crate::work::validate(w).is_empty(),
            "{:?}",
            crate::work::validate(w)
        );
        // The same metadata and options on every work, as OCM's work builder sets them.
        let meta = w.metadata.as_ref().unwrap();
        assert_eq!(meta.namespace, "cluster1");
        assert_eq!(meta.labels[ADDON_NAME_LABEL], "hello-template");
        assert_eq!(
            meta.annotations[CONFIG_SPEC_HASH_ANNOTATION],
            r#"{"addontemplates.addon.open-cluster-management.io//t":"abc"}"#
        );
        let spec = w.spec.as_ref().unwrap();
        assert_eq!(
            spec.delete_option.as_ref().unwrap().propagation_policy,
            "Orphan"
        );
    }
    // Below the limit the same template is one work, as before.
    let small: Vec<Value> = (0..7)
        .map(|i| config_map(&format!("blob-{i}"), 10))
        .collect();
    let works = render(&input(&template_of(small), None, &hashes)).unwrap();
    assert_eq!(names(&works), ["addon-hello-template-deploy-0"]);
}

#[test]
fn a_manifest_larger_than_one_work_is_an_error_naming_it() {
    let t = template_of(vec![config_map("small", 1), config_map("huge", 501)]);
    let hashes = no_hashes();
    let err = render(&input(&t, None, &hashes)).unwrap_err();
    match &err {
        RenderError::TooLarge {
            field,
            bytes,
            limit,
        } => {
            assert_eq!(field, "spec.agentSpec.workload.manifests[1]");
            assert!(*bytes > MAX_MANIFESTS_BYTES);
            assert_eq!(*limit, MAX_MANIFESTS_BYTES);
        }
        other => panic!("unexpected {other:?}"),
    }
    let message = err.to_string();
    assert!(
        message.starts_with("spec.agentSpec.workload.manifests[1]: ")
            && message.contains("one manifest cannot be split"),
        "{message}"
    );
}

#[test]
fn the_hubs_install_namespace_comes_first_in_the_first_work_and_is_orphaned() {
    let maps: Vec<Value> = (0..6)
        .map(|i| config_map(&format!("blob-{i}"), 100))
        .collect();
    let t = template_of(maps);
    let hashes = no_hashes();
    let mut i = input(&t, None, &hashes);
    i.ensure_namespace = true;
    let works = render(&i).unwrap();
    assert_eq!(works.len(), 2);
    let first = objects(&works[0]);
    assert_eq!(first[0]["kind"], "Namespace");
    assert_eq!(first[0]["metadata"]["name"], DEFAULT_INSTALL_NAMESPACE);
    for w in &works {
        let option = w.spec.as_ref().unwrap().delete_option.clone().unwrap();
        assert_eq!(option.propagation_policy, "SelectivelyOrphan");
        let rules = option.selectively_orphans.unwrap().orphaning_rules;
        assert_eq!(rules.len(), 1);
        assert_eq!(
            (rules[0].resource.as_str(), rules[0].name.as_str()),
            ("namespaces", DEFAULT_INSTALL_NAMESPACE)
        );
    }
    // A template that has the Namespace keeps its own, in its place.
    let t = template_of(vec![
        config_map("a", 1),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": DEFAULT_INSTALL_NAMESPACE}}),
    ]);
    let mut i = input(&t, None, &hashes);
    i.ensure_namespace = true;
    let objs = objects(&render_one(&i).unwrap());
    assert_eq!(objs.len(), 2);
    assert_eq!(objs[1]["kind"], "Namespace");
}
