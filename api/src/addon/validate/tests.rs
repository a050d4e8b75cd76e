//! One test per CRD rule, each checking the error names the field.

use super::*;
use crate::ocm::{Document, parse_documents};

/// Parses one add-on document from its kind, metadata and spec (flow-style YAML).
fn doc(kind: &str, metadata: &str, spec: &str) -> Document {
    let text = format!(
        "apiVersion: addon.open-cluster-management.io/v1alpha1\nkind: {kind}\nmetadata: {metadata}\nspec: {spec}\n"
    );
    parse_documents(&text)
        .remove(0)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn cma_errors(spec: &str) -> Vec<String> {
    cma_named("hello", spec)
}

fn cma_named(name: &str, spec: &str) -> Vec<String> {
    let Document::ClusterManagementAddOn(x) =
        doc("ClusterManagementAddOn", &format!("{{name: {name}}}"), spec)
    else {
        panic!("not a ClusterManagementAddOn")
    };
    cluster_management_addon(&x)
}

fn mca_errors(metadata: &str, spec: &str) -> Vec<String> {
    let Document::ManagedClusterAddOn(x) = doc("ManagedClusterAddOn", metadata, spec) else {
        panic!("not a ManagedClusterAddOn")
    };
    managed_cluster_addon(&x)
}

/// A minimal valid agent spec.
const AGENT: &str = "agentSpec: {workload: {manifests: [{apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: '{{INSTALL_NAMESPACE}}'}}]}}";

fn template_errors(spec: &str) -> Vec<String> {
    let Document::AddOnTemplate(x) = doc("AddOnTemplate", "{name: hello-v1}", spec) else {
        panic!("not an AddOnTemplate")
    };
    addon_template(&x)
}

/// A template with a valid agent spec and these registrations.
fn registration_errors(registration: &str) -> Vec<String> {
    template_errors(&format!(
        "{{addonName: hello, {AGENT}, registration: {registration}}}"
    ))
}

fn adc_errors(spec: &str) -> Vec<String> {
    adc_meta("{name: hello-config, namespace: default}", spec)
}

fn adc_meta(metadata: &str, spec: &str) -> Vec<String> {
    let Document::AddOnDeploymentConfig(x) = doc("AddOnDeploymentConfig", metadata, spec) else {
        panic!("not an AddOnDeploymentConfig")
    };
    addon_deployment_config(&x)
}

/// Exactly one error, naming `field`.
#[track_caller]
fn one(errors: Vec<String>, field: &str) {
    assert_eq!(errors.len(), 1, "expected one error on {field}: {errors:?}");
    assert!(
        errors[0].starts_with(&format!("{field}: ")),
        "expected an error on {field}: {errors:?}"
    );
}

// ---- ClusterManagementAddOn ----

#[test]
fn a_valid_cluster_management_addon_has_no_errors() {
    let errors = cma_errors(
        "{addOnMeta: {displayName: Hello}, supportedConfigs: [{group: addon.open-cluster-management.io, resource: addontemplates, defaultConfig: {name: hello-v1}}, {group: addon.open-cluster-management.io, resource: addondeploymentconfigs}], installStrategy: {type: Placements, placements: [{namespace: default, name: edge, rolloutStrategy: {type: Progressive, progressive: {maxConcurrency: 1}}}]}}",
    );
    assert!(errors.is_empty(), "{errors:?}");
    assert!(cma_errors("{}").is_empty());
}

#[test]
fn cma_name_must_be_an_addon_name() {
    one(cma_named("hello.world", "{}"), "metadata.name");
    one(cma_named("Hello", "{}"), "metadata.name");
    let errors = cma_named("a.b", "{}");
    assert!(errors[0].contains("NATS"), "{errors:?}");
}

#[test]
fn the_lifecycle_annotation_is_addon_manager_or_self() {
    let annotated = |value: &str| {
        let Document::ClusterManagementAddOn(x) = doc(
            "ClusterManagementAddOn",
            &format!(
                "{{name: hello, annotations: {{addon.open-cluster-management.io/lifecycle: {value}}}}}"
            ),
            "{}",
        ) else {
            panic!("not a ClusterManagementAddOn")
        };
        cluster_management_addon(&x)
    };
    assert!(annotated("self").is_empty());
    assert!(annotated("addon-manager").is_empty());
    assert_eq!(
        annotated("Self"),
        [
            "metadata.annotations[\"addon.open-cluster-management.io/lifecycle\"]: \"Self\" is \
             not one of addon-manager, self"
        ]
    );
}

#[test]
fn install_strategy_type_is_manual_or_placements() {
    let errors = cma_errors("{installStrategy: {type: Foo}}");
    assert_eq!(
        errors,
        ["spec.installStrategy.type: \"Foo\" is not one of Manual, Placements"]
    );
    assert!(cma_errors("{installStrategy: {type: Manual}}").is_empty());
}

#[test]
fn supported_config_resource_is_required() {
    one(
        cma_errors("{supportedConfigs: [{group: g.io, resource: ''}]}"),
        "spec.supportedConfigs[0].resource",
    );
}

#[test]
fn supported_configs_are_unique_by_group_and_resource() {
    one(
        cma_errors(
            "{supportedConfigs: [{group: g.io, resource: r}, {group: h.io, resource: r}, {group: g.io, resource: r}]}",
        ),
        "spec.supportedConfigs[2]",
    );
    // The core group ("") counts as a group.
    one(
        cma_errors(
            "{supportedConfigs: [{resource: configmaps}, {group: '', resource: configmaps}]}",
        ),
        "spec.supportedConfigs[1]",
    );
}

#[test]
fn a_default_config_needs_a_name() {
    one(
        cma_errors(
            "{supportedConfigs: [{group: g.io, resource: r, defaultConfig: {namespace: default}}]}",
        ),
        "spec.supportedConfigs[0].defaultConfig.name",
    );
    one(
        cma_errors(
            "{supportedConfigs: [{group: g.io, resource: r, defaultConfig: {namespace: Bad_NS, name: x}}]}",
        ),
        "spec.supportedConfigs[0].defaultConfig.namespace",
    );
}

#[test]
fn placements_need_namespace_and_name() {
    one(
        cma_errors("{installStrategy: {type: Placements, placements: [{name: edge}]}}"),
        "spec.installStrategy.placements[0].namespace",
    );
    one(
        cma_errors("{installStrategy: {type: Placements, placements: [{namespace: default}]}}"),
        "spec.installStrategy.placements[0].name",
    );
    one(
        cma_errors(
            "{installStrategy: {type: Placements, placements: [{namespace: default, name: Edge_1}]}}",
        ),
        "spec.installStrategy.placements[0].name",
    );
}

#[test]
fn placements_are_unique_by_namespace_and_name() {
    one(
        cma_errors(
            "{installStrategy: {type: Placements, placements: [{namespace: default, name: edge}, {namespace: other, name: edge}, {namespace: default, name: edge}]}}",
        ),
        "spec.installStrategy.placements[2]",
    );
}

#[test]
fn placement_configs_need_resource_and_name() {
    let errors = cma_errors(
        "{installStrategy: {type: Placements, placements: [{namespace: default, name: edge, configs: [{group: g.io}]}]}}",
    );
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors[0].starts_with("spec.installStrategy.placements[0].configs[0].resource: "));
    assert!(errors[1].starts_with("spec.installStrategy.placements[0].configs[0].name: "));
}

#[test]
fn rollout_strategy_type_is_checked() {
    let errors = cma_errors(
        "{installStrategy: {type: Placements, placements: [{namespace: default, name: edge, rolloutStrategy: {type: Canary}}]}}",
    );
    assert_eq!(
        errors,
        [
            "spec.installStrategy.placements[0].rolloutStrategy.type: \"Canary\" is not one of All, Progressive, ProgressivePerGroup"
        ]
    );
}

// ---- ManagedClusterAddOn ----

#[test]
fn a_valid_managed_cluster_addon_has_no_errors() {
    let errors = mca_errors(
        "{name: hello, namespace: cluster1}",
        "{installNamespace: open-cluster-management-agent-addon, configs: [{group: addon.open-cluster-management.io, resource: addondeploymentconfigs, namespace: default, name: hello-config}]}",
    );
    assert!(errors.is_empty(), "{errors:?}");
    assert!(mca_errors("{name: hello, namespace: cluster1}", "{}").is_empty());
}

#[test]
fn mca_namespace_is_a_cluster_name() {
    let errors = mca_errors("{name: hello, namespace: Cluster.1}", "{}");
    one(errors.clone(), "metadata.namespace");
    assert!(errors[0].contains("cluster's name"), "{errors:?}");
    one(mca_errors("{name: hello}", "{}"), "metadata.namespace");
}

#[test]
fn mca_name_is_an_addon_name() {
    one(
        mca_errors("{name: hello.v1, namespace: cluster1}", "{}"),
        "metadata.name",
    );
}

#[test]
fn install_namespace_follows_the_pattern_and_length() {
    one(
        mca_errors(
            "{name: hello, namespace: cluster1}",
            "{installNamespace: Agent_NS}",
        ),
        "spec.installNamespace",
    );
    one(
        mca_errors(
            "{name: hello, namespace: cluster1}",
            &format!("{{installNamespace: {}}}", "a".repeat(64)),
        ),
        "spec.installNamespace",
    );
    assert!(
        mca_errors(
            "{name: hello, namespace: cluster1}",
            &format!("{{installNamespace: {}}}", "a".repeat(63))
        )
        .is_empty()
    );
}

#[test]
fn mca_configs_need_resource_and_name() {
    one(
        mca_errors(
            "{name: hello, namespace: cluster1}",
            "{configs: [{group: g.io, resource: r}]}",
        ),
        "spec.configs[0].name",
    );
    one(
        mca_errors(
            "{name: hello, namespace: cluster1}",
            "{configs: [{group: g.io, name: x}]}",
        ),
        "spec.configs[0].resource",
    );
}

#[test]
fn mca_status_health_check_mode_and_signer_names_are_checked() {
    let mut x = v1::ManagedClusterAddOn {
        metadata: Some(v1::ObjectMeta {
            name: "hello".into(),
            namespace: "cluster1".into(),
            ..Default::default()
        }),
        status: Some(v1::ManagedClusterAddOnStatus {
            health_check: Some(v1::HealthCheck {
                mode: "WorkStatus".into(),
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    assert_eq!(
        managed_cluster_addon(&x),
        ["status.healthCheck.mode: \"WorkStatus\" is not one of Lease, Customized"]
    );
    let st = x.status.as_mut().unwrap();
    st.health_check = Some(v1::HealthCheck {
        mode: "Customized".into(),
    });
    st.registrations.push(v1::RegistrationConfig {
        signer_name: "nope".into(),
        subject: None,
    });
    one(
        managed_cluster_addon(&x),
        "status.registrations[0].signerName",
    );
}

// ---- AddOnTemplate ----

#[test]
fn a_valid_template_has_no_errors_even_with_variables_in_strings() {
    let errors = template_errors(&format!("{{addonName: hello, {AGENT}}}"));
    assert!(errors.is_empty(), "{errors:?}");
}

#[test]
fn template_needs_an_addon_name() {
    one(template_errors(&format!("{{{AGENT}}}")), "spec.addonName");
    one(
        template_errors(&format!("{{addonName: hello.world, {AGENT}}}")),
        "spec.addonName",
    );
}

#[test]
fn template_needs_an_agent_spec() {
    one(template_errors("{addonName: hello}"), "spec.agentSpec");
}

#[test]
fn template_agent_spec_needs_manifests() {
    one(
        template_errors("{addonName: hello, agentSpec: {workload: {manifests: []}}}"),
        "spec.agentSpec.workload.manifests",
    );
}

#[test]
fn template_agent_spec_is_validated_as_a_manifest_work() {
    one(
        template_errors(
            "{addonName: hello, agentSpec: {workload: {manifests: [{apiVersion: v1, metadata: {name: c}}]}}}",
        ),
        "spec.agentSpec.workload.manifests[0].kind",
    );
    one(
        template_errors(&format!(
            "{{addonName: hello, {AGENT_WITH_CONFIG}}}",
            AGENT_WITH_CONFIG = "agentSpec: {workload: {manifests: [{apiVersion: v1, kind: ConfigMap, metadata: {name: c}}]}, manifestConfigs: [{resourceIdentifier: {resource: configmaps, name: c, namespace: default}, updateStrategy: {type: Replace}}]}"
        )),
        "spec.agentSpec.manifestConfigs[0].updateStrategy.type",
    );
}

#[test]
fn a_template_may_exceed_one_work_but_none_of_its_manifests_may() {
    let blob = |name: &str, kib: usize| {
        format!(
            "{{apiVersion: v1, kind: ConfigMap, metadata: {{name: {name}, namespace: ns}}, data: {{x: {}}}}}",
            "y".repeat(kib * 1024)
        )
    };
    // ~700 KiB in all: rendered into two works.
    let manifests: Vec<String> = (0..7).map(|i| blob(&format!("c{i}"), 100)).collect();
    let spec = format!(
        "{{addonName: hello, agentSpec: {{workload: {{manifests: [{}]}}}}}}",
        manifests.join(", ")
    );
    assert!(template_errors(&spec).is_empty());
    // One manifest over the limit cannot be split.
    let spec = format!(
        "{{addonName: hello, agentSpec: {{workload: {{manifests: [{}, {}]}}}}}}",
        blob("small", 1),
        blob("huge", 501)
    );
    let errors = template_errors(&spec);
    one(errors.clone(), "spec.agentSpec.workload.manifests[1]");
    assert!(
        errors[0].contains("one manifest cannot be split"),
        "{errors:?}"
    );
}

#[test]
fn registration_type_is_kube_client_or_custom_signer() {
    one(
        registration_errors("[{type: Token}]"),
        "spec.registration[0].type",
    );
    one(
        registration_errors("[{kubeClient: {}}]"),
        "spec.registration[0].type",
    );
    assert!(registration_errors("[{type: KubeClient}]").is_empty());
}

#[test]
fn custom_signer_type_needs_its_settings() {
    one(
        registration_errors("[{type: CustomSigner}]"),
        "spec.registration[0].customSigner",
    );
}

#[test]
fn custom_signer_name_follows_the_pattern() {
    one(
        registration_errors(
            "[{type: CustomSigner, customSigner: {signerName: '<< CustomSignerName >>', signingCA: {name: ca}}}]",
        ),
        "spec.registration[0].customSigner.signerName",
    );
    assert!(
        registration_errors(
            "[{type: CustomSigner, customSigner: {signerName: example.com/signer-name, signingCA: {name: ca, namespace: default}}}]"
        )
        .is_empty()
    );
}

#[test]
fn custom_signer_needs_a_signing_ca_with_a_name() {
    one(
        registration_errors(
            "[{type: CustomSigner, customSigner: {signerName: example.com/signer-name}}]",
        ),
        "spec.registration[0].customSigner.signingCA",
    );
    one(
        registration_errors(
            "[{type: CustomSigner, customSigner: {signerName: example.com/signer-name, signingCA: {namespace: default}}}]",
        ),
        "spec.registration[0].customSigner.signingCA.name",
    );
}

#[test]
fn signer_names_follow_the_crd_pattern_and_length() {
    for good in [
        "example.com/signer-name",
        "kubernetes.io/kube-apiserver-client",
        "open-cluster-management.io/addon.v1",
        "a1.b2.io/x",
    ] {
        assert!(signer_name("f", good).is_ok(), "{good}");
    }
    for bad in [
        "",
        "a/b",
        "example/x",
        "a.com/x",
        "Example.com/x",
        "example.com/",
        "example.com/a/b",
        "example.c0m/x",
        "-ex.com/x",
        "ex-.com/x",
        "example.com/X",
    ] {
        let e = signer_name("f", bad).unwrap_err();
        assert!(e.starts_with("f: "), "{bad}: {e}");
    }
    let long = format!("{}.io/x", "a".repeat(570));
    assert!(signer_name("f", &long).unwrap_err().contains("571"));
}

#[test]
fn hub_permission_type_is_current_cluster_or_single_namespace() {
    one(
        registration_errors(
            "[{type: KubeClient, kubeClient: {hubPermissions: [{type: AllClusters}]}}]",
        ),
        "spec.registration[0].kubeClient.hubPermissions[0].type",
    );
    one(
        registration_errors(
            "[{type: KubeClient, kubeClient: {hubPermissions: [{currentCluster: {clusterRoleName: r}}]}}]",
        ),
        "spec.registration[0].kubeClient.hubPermissions[0].type",
    );
}

#[test]
fn current_cluster_permission_needs_a_cluster_role() {
    one(
        registration_errors(
            "[{type: KubeClient, kubeClient: {hubPermissions: [{type: CurrentCluster}]}}]",
        ),
        "spec.registration[0].kubeClient.hubPermissions[0].currentCluster.clusterRoleName",
    );
}

#[test]
fn single_namespace_permission_needs_namespace_and_role_ref() {
    let errors = registration_errors(
        "[{type: KubeClient, kubeClient: {hubPermissions: [{type: SingleNamespace}]}}]",
    );
    assert_eq!(errors.len(), 2, "{errors:?}");
    let at = "spec.registration[0].kubeClient.hubPermissions[0].singleNamespace";
    assert!(
        errors[0].starts_with(&format!("{at}.namespace: ")),
        "{errors:?}"
    );
    assert!(
        errors[1].starts_with(&format!("{at}.roleRef: ")),
        "{errors:?}"
    );
    one(
        registration_errors(
            "[{type: KubeClient, kubeClient: {hubPermissions: [{type: SingleNamespace, singleNamespace: {namespace: default, roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role}}}]}}]",
        ),
        &format!("{at}.roleRef.name"),
    );
}

// ---- AddOnDeploymentConfig ----

#[test]
fn a_valid_deployment_config_has_no_errors() {
    let errors = adc_errors(
        "{agentInstallNamespace: hello-ns, customizedVariables: [{name: LOG_LEVEL, value: '4'}, {name: _x1, value: ''}], nodePlacement: {nodeSelector: {host: ssd}, tolerations: [{key: foo, operator: Exists, effect: NoExecute, tolerationSeconds: 30}, {operator: Exists}]}, registries: [{source: quay.io/open-cluster-management, mirror: quay.io/ocm}], proxyConfig: {httpProxy: 'http://proxy:3128', caBundle: aGVsbG8=}, resourceRequirements: [{containerID: 'deployments:*:*', resources: {limits: {cpu: 1, memory: 64Mi}, requests: {cpu: 500m}}}]}",
    );
    assert!(errors.is_empty(), "{errors:?}");
    assert!(adc_errors("{}").is_empty());
}

#[test]
fn deployment_config_is_namespaced() {
    one(adc_meta("{name: c}", "{}"), "metadata.namespace");
    one(
        adc_meta("{name: C_1, namespace: default}", "{}"),
        "metadata.name",
    );
}

#[test]
fn variable_names_follow_the_pattern() {
    one(
        adc_errors("{customizedVariables: [{name: 1LEVEL, value: x}]}"),
        "spec.customizedVariables[0].name",
    );
    one(
        adc_errors("{customizedVariables: [{name: LOG-LEVEL, value: x}]}"),
        "spec.customizedVariables[0].name",
    );
    one(
        adc_errors("{customizedVariables: [{value: x}]}"),
        "spec.customizedVariables[0].name",
    );
}

#[test]
fn variable_names_are_at_most_255_characters() {
    one(
        adc_errors(&format!(
            "{{customizedVariables: [{{name: {}, value: x}}]}}",
            "V".repeat(256)
        )),
        "spec.customizedVariables[0].name",
    );
    assert!(
        adc_errors(&format!(
            "{{customizedVariables: [{{name: {}, value: x}}]}}",
            "V".repeat(255)
        ))
        .is_empty()
    );
}

#[test]
fn variable_values_are_at_most_1024_characters() {
    one(
        adc_errors(&format!(
            "{{customizedVariables: [{{name: V, value: {}}}]}}",
            "v".repeat(1025)
        )),
        "spec.customizedVariables[0].value",
    );
}

#[test]
fn variable_names_are_unique() {
    one(
        adc_errors(
            "{customizedVariables: [{name: A, value: x}, {name: B, value: y}, {name: A, value: z}]}",
        ),
        "spec.customizedVariables[2].name",
    );
}

#[test]
fn agent_install_namespace_may_be_empty_or_a_label() {
    assert!(adc_errors("{agentInstallNamespace: ''}").is_empty());
    one(
        adc_errors("{agentInstallNamespace: -ns}"),
        "spec.agentInstallNamespace",
    );
    one(
        adc_errors(&format!("{{agentInstallNamespace: {}}}", "n".repeat(64))),
        "spec.agentInstallNamespace",
    );
}

#[test]
fn registries_need_a_mirror() {
    one(
        adc_errors("{registries: [{source: quay.io/a}]}"),
        "spec.registries[0].mirror",
    );
}

#[test]
fn container_ids_follow_the_pattern() {
    for bad in [
        "pod:a:b",
        "deployments:a",
        "deployments::b",
        "deployments:a:",
        "*",
    ] {
        one(
            adc_errors(&format!(
                "{{resourceRequirements: [{{containerID: '{bad}', resources: {{}}}}]}}"
            )),
            "spec.resourceRequirements[0].containerID",
        );
    }
    for good in ["*:*:*", "deployments:agent:main", "jobs:a:b:c", "pods:a::"] {
        assert!(container_id("f", good).is_ok(), "{good}");
    }
}

#[test]
fn container_ids_are_unique() {
    one(
        adc_errors(
            "{resourceRequirements: [{containerID: '*:*:*', resources: {}}, {containerID: '*:*:*', resources: {}}]}",
        ),
        "spec.resourceRequirements[1].containerID",
    );
}

#[test]
fn resource_requirements_need_resources() {
    one(
        adc_errors("{resourceRequirements: [{containerID: '*:*:*'}]}"),
        "spec.resourceRequirements[0].resources",
    );
}

#[test]
fn resource_quantities_are_checked() {
    one(
        adc_errors(
            "{resourceRequirements: [{containerID: '*:*:*', resources: {limits: {cpu: lots}}}]}",
        ),
        "spec.resourceRequirements[0].resources.limits[\"cpu\"]",
    );
    for good in [
        "1", "0.5", "500m", "64Mi", "1e3", "1E", "+.5", "-1.", "2Ki", "1.5e-3",
    ] {
        assert!(is_quantity(good), "{good}");
    }
    for bad in ["", "m", "1.2.3", "1Ki2", "1e", "1x", ".", "1Mb", "e3"] {
        assert!(!is_quantity(bad), "{bad}");
    }
}

#[test]
fn toleration_operator_and_effect_are_kubernetes_enums() {
    one(
        adc_errors("{nodePlacement: {tolerations: [{key: k, operator: In}]}}"),
        "spec.nodePlacement.tolerations[0].operator",
    );
    // Placement's effects are not pod effects.
    one(
        adc_errors(
            "{nodePlacement: {tolerations: [{key: k, operator: Exists, effect: NoSelect}]}}",
        ),
        "spec.nodePlacement.tolerations[0].effect",
    );
}

#[test]
fn toleration_rules_of_kubernetes_hold() {
    one(
        adc_errors("{nodePlacement: {tolerations: [{operator: Equal, value: v}]}}"),
        "spec.nodePlacement.tolerations[0].operator",
    );
    one(
        adc_errors("{nodePlacement: {tolerations: [{key: k, operator: Exists, value: v}]}}"),
        "spec.nodePlacement.tolerations[0].value",
    );
    one(
        adc_errors(
            "{nodePlacement: {tolerations: [{key: k, effect: NoSchedule, tolerationSeconds: 5}]}}",
        ),
        "spec.nodePlacement.tolerations[0].tolerationSeconds",
    );
    one(
        adc_errors("{nodePlacement: {tolerations: [{key: 'bad key', operator: Exists}]}}"),
        "spec.nodePlacement.tolerations[0].key",
    );
}

#[test]
fn node_selector_labels_are_checked() {
    let errors = adc_errors("{nodePlacement: {nodeSelector: {'-bad': ssd}}}");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("spec.nodePlacement.nodeSelector[\"-bad\"]: "),
        "{errors:?}"
    );
}

#[test]
fn variable_name_rule_unit() {
    assert!(variable_name("f", "LOG_LEVEL").is_ok());
    assert!(variable_name("f", "_").is_ok());
    assert!(variable_name("f", "a1").is_ok());
    assert!(variable_name("f", "1a").is_err());
    assert!(variable_name("f", "a.b").is_err());
}
