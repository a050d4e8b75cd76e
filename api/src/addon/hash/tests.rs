use super::*;
use serde_json::json;

/// OCM's own values: `test/integration/addon/assertion_test.go` (`addOnDefaultConfigSpecHash`,
/// `addOnTest1ConfigSpecHash`…) for AddOnDeploymentConfigs with one customized variable, as the
/// API server stores them (the CRD defaults `agentInstallNamespace`; Go writes the struct
/// `proxyConfig` as `{}`).
#[test]
fn deployment_config_hashes_equal_ocms() {
    for (name, expected) in [
        (
            "test",
            "ea4e6089e8b2f584c1cd8b86e16a15df3186b30744f433ede7436091c93a4cc7",
        ),
        (
            "test1",
            "b746cc98936955dd2168640f0011a14f2a74be306c747bc8ba829328cc772690",
        ),
        (
            "test2",
            "3e6348b0c0f0a341ce28d0a2f99bc41fc63fb17d947eb5a45284729fbeb63b32",
        ),
        (
            "test3",
            "9b3c6d09731ed254589fa4fc2936e6fb00537de92da5e035183da313eb98d27e",
        ),
    ] {
        let adc = json!({
            "apiVersion": "addon.open-cluster-management.io/v1alpha1",
            "kind": "AddOnDeploymentConfig",
            "metadata": {"name": "deploy-config", "namespace": "cluster1", "generation": 3},
            "spec": {
                "customizedVariables": [{"name": name, "value": name}],
                "proxyConfig": {},
                "agentInstallNamespace": "open-cluster-management-agent-addon",
            },
        });
        assert_eq!(spec_hash(&adc), expected, "variable {name}");
    }
}

/// OCM's `TestGetAddOnTemplateSpecHash` (`pkg/addon/templateagent/common_test.go`): a typed
/// template converted to unstructured (`registration` is written as `null`).
#[test]
fn template_hashes_equal_ocms() {
    for (addon, expected) in [
        (
            "",
            "3c2de0761c7df5d6a864280a8aa44d1f4d91eecbbcd2ce5af3efb4b76d91d3cd",
        ),
        (
            "test1",
            "b59db5673238c791a826f0a8f8710f3d6e49cd4c7a5ee73e186c91412f26fc85",
        ),
    ] {
        let template = json!({
            "metadata": {"name": "test1", "creationTimestamp": null},
            "spec": {"addonName": addon, "agentSpec": {"workload": {}}, "registration": null},
        });
        assert_eq!(spec_hash(&template), expected);
    }
}

/// Computed independently with Python's `json.dumps(separators=(',', ':'), sort_keys=True,
/// ensure_ascii=False)` and Go's extra escapes applied by hand (`<`, `>`, `&`, U+2028).
#[test]
fn escapes_and_key_order_follow_go() {
    let obj = json!({
        "apiVersion": "addon.open-cluster-management.io/v1alpha1",
        "kind": "AddOnDeploymentConfig",
        "metadata": {"name": "c", "namespace": "default"},
        "status": {"x": 1},
        "spec": {
            "zeta": [1, -2, true, null, {"b": 1, "a": 2}],
            "customizedVariables": [
                {"value": "a<b>&c\"d\\e\nf\tg\u{1}h\u{2028}i\u{e9}j\u{7f}k\u{8}\u{c}", "name": "Q"}
            ],
        },
        "extra": "top-level fields other than the four count",
    });
    assert_eq!(
        spec_hash(&obj),
        "6dcd351a2ec69dabdabfaa8ab9032c23a920040c250dde0022e8c6c8fcc24c9b"
    );
    let mut spec = obj.clone();
    spec.as_object_mut().unwrap().remove("extra");
    assert_eq!(
        go_json(&spec["spec"]["customizedVariables"][0]["value"]),
        "\"a\\u003cb\\u003e\\u0026c\\\"d\\\\e\\nf\\tg\\u0001h\\u2028i\u{e9}j\u{7f}k\\b\\f\""
    );
}

#[test]
fn metadata_and_status_do_not_change_the_hash() {
    let a = json!({"kind": "X", "metadata": {"name": "a"}, "spec": {"v": 1}});
    let b = json!({"kind": "Y", "apiVersion": "v9", "metadata": {"name": "b"}, "status": {"s": 2}, "spec": {"v": 1}});
    assert_eq!(spec_hash(&a), spec_hash(&b));
    let c = json!({"spec": {"v": 2}});
    assert_ne!(spec_hash(&a), spec_hash(&c));
    assert_eq!(spec_hash(&a).len(), 64);
    assert!(
        spec_hash(&a)
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    );
}

#[test]
fn floats_are_written_as_go_writes_them() {
    for (f, text) in [
        (100.0, "100"),
        (1.5, "1.5"),
        (0.000001, "0.000001"),
        (0.0000001, "1e-7"),
        (1.5e-10, "1.5e-10"),
        (1e21, "1e+21"),
        (1.25e300, "1.25e+300"),
        (-0.0, "-0"),
        (0.0, "0"),
    ] {
        assert_eq!(go_json(&json!(f)), text, "{f}");
    }
    assert_eq!(go_json(&json!(u64::MAX)), u64::MAX.to_string());
}

#[test]
fn config_keys_follow_ocm() {
    assert_eq!(
        config_key(
            "addon.open-cluster-management.io",
            "addondeploymentconfigs",
            "open-cluster-management",
            "default"
        ),
        "addondeploymentconfigs.addon.open-cluster-management.io/open-cluster-management/default"
    );
    assert_eq!(
        config_key(
            "addon.open-cluster-management.io",
            "addontemplates",
            "",
            "t"
        ),
        "addontemplates.addon.open-cluster-management.io//t"
    );
    assert_eq!(config_key("", "configmaps", "ns", "c"), "configmaps/ns/c");
}
