use super::*;
use crate::addon::validate;
use crate::ocm::{DocError, Document, parse_documents};

const CMA_FIXTURE: &str =
    include_str!("../../../../examples/addons/ocm/cluster_management_addon.yaml");
/// The valid upstream templates.
const TEMPLATE_FIXTURES: [(&str, &str); 3] = [
    (
        "addontemplate.yaml",
        include_str!("../../../../examples/addons/ocm/addontemplate.yaml"),
    ),
    (
        "addontemplate_deployment.yaml",
        include_str!("../../../../examples/addons/ocm/addontemplate_deployment.yaml"),
    ),
    (
        "addontemplate_daemonset.yaml",
        include_str!("../../../../examples/addons/ocm/addontemplate_daemonset.yaml"),
    ),
];
const E2E_TEMPLATE: &str = include_str!("../../../../examples/addons/ocm/addon_template_e2e.yaml");

/// The hand-written examples of the research note (shaped after OCM's Go tests and types).
const HAND_WRITTEN: &str = r#"
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: AddOnDeploymentConfig
metadata: {name: hello-config, namespace: default}
spec:
  agentInstallNamespace: hello-ns
  customizedVariables: [{name: LOG_LEVEL, value: "4"}]
  nodePlacement: {nodeSelector: {host: ssd}, tolerations: [{key: foo, operator: Exists, effect: NoExecute}]}
  registries: [{source: quay.io/open-cluster-management, mirror: quay.io/ocm}]
---
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: ManagedClusterAddOn
metadata: {name: hello-template, namespace: cluster1}
spec:
  installNamespace: open-cluster-management-agent-addon
  configs: [{group: addon.open-cluster-management.io, resource: addondeploymentconfigs, namespace: default, name: hello-config}]
---
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: ClusterManagementAddOn
metadata: {name: fleet-metrics}
spec:
  supportedConfigs:
  - {group: addon.open-cluster-management.io, resource: addontemplates, defaultConfig: {name: fleet-metrics-v1}}
  - {group: addon.open-cluster-management.io, resource: addondeploymentconfigs}
  installStrategy:
    type: Placements
    placements:
    - namespace: default
      name: edge
      configs: [{group: addon.open-cluster-management.io, resource: addondeploymentconfigs, namespace: default, name: edge-config}]
      rolloutStrategy:
        type: Progressive
        progressive: {maxConcurrency: 1, mandatoryDecisionGroups: [{groupName: canary}], maxFailures: 0, progressDeadline: 10m}
"#;

#[track_caller]
fn parse_one(text: &str) -> Document {
    let mut docs = parse_documents(text);
    assert_eq!(docs.len(), 1, "{docs:?}");
    docs.remove(0).unwrap_or_else(|e| panic!("{e}"))
}

/// Printed as YAML and read back, a document gives the same protobuf.
#[track_caller]
fn reparses_to<T: Serialize>(shown: &T, expected: &Document) {
    let yaml = serde_yaml::to_string(shown).unwrap();
    assert_eq!(&parse_one(&yaml), expected, "{yaml}");
}

#[test]
fn ocms_cluster_management_addon_parses_validates_and_round_trips() {
    let doc = parse_one(CMA_FIXTURE);
    let Document::ClusterManagementAddOn(cma) = &doc else {
        panic!("{doc:?}")
    };
    assert_eq!(cma.metadata.as_ref().unwrap().name, "hello-template");
    let spec = cma.spec.as_ref().unwrap();
    assert_eq!(
        spec.add_on_meta.as_ref().unwrap().display_name,
        "hello-template"
    );
    assert_eq!(spec.supported_configs.len(), 2);
    assert_eq!(spec.supported_configs[0].resource, "addontemplates");
    assert_eq!(
        spec.supported_configs[0]
            .default_config
            .as_ref()
            .unwrap()
            .name,
        "hello-template"
    );
    assert!(spec.supported_configs[1].default_config.is_none());
    assert!(spec.install_strategy.is_none(), "Manual by default");
    let errors = validate::cluster_management_addon(cma);
    assert!(errors.is_empty(), "{errors:?}");
    let shown = ClusterManagementAddOn::from(cma);
    assert_eq!(&shown.to_proto().unwrap(), cma);
    reparses_to(&shown, &doc);
}

#[test]
fn ocms_templates_parse_validate_and_round_trip() {
    for (file, text) in TEMPLATE_FIXTURES {
        let doc = parse_one(text);
        let Document::AddOnTemplate(t) = &doc else {
            panic!("{file}: {doc:?}")
        };
        let spec = t.spec.as_ref().unwrap();
        assert_eq!(spec.addon_name, "hello-template", "{file}");
        assert!(
            !spec
                .agent_spec
                .as_ref()
                .unwrap()
                .workload
                .as_ref()
                .unwrap()
                .manifests
                .is_empty(),
            "{file}"
        );
        let errors = validate::addon_template(t);
        assert!(errors.is_empty(), "{file}: {errors:?}");
        let shown = AddOnTemplate::from(t);
        assert_eq!(&shown.to_proto().unwrap(), t, "{file}");
        reparses_to(&shown, &doc);
    }
}

#[test]
fn template_variables_stay_inside_json_strings() {
    let Document::AddOnTemplate(t) = parse_one(TEMPLATE_FIXTURES[1].1) else {
        panic!("a template")
    };
    let manifests = &t
        .spec
        .unwrap()
        .agent_spec
        .unwrap()
        .workload
        .unwrap()
        .manifests;
    let deployment: serde_json::Value = serde_json::from_slice(&manifests[0].raw).unwrap();
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["args"][2], "--cluster-name={{CLUSTER_NAME}}");
    assert_eq!(container["env"][0]["value"], "{{LOG_LEVEL}}");
}

#[test]
fn registrations_map_to_the_flat_protobuf_and_print_nested() {
    // The e2e template has both kinds of hub permission.
    let Document::AddOnTemplate(t) = parse_one(&filled_e2e_template()) else {
        panic!("a template")
    };
    let regs = &t.spec.as_ref().unwrap().registration;
    assert_eq!(regs.len(), 2);
    assert_eq!(regs[0].r#type, "KubeClient");
    let perms = &regs[0].kube_client.as_ref().unwrap().hub_permissions;
    assert_eq!(perms[0].r#type, "CurrentCluster");
    assert_eq!(perms[0].current_cluster_role_name, "cm-admin");
    assert_eq!(perms[1].r#type, "SingleNamespace");
    assert_eq!(perms[1].single_namespace, "default");
    let role = perms[1].single_namespace_role_ref.as_ref().unwrap();
    assert_eq!(
        (
            role.api_group.as_str(),
            role.kind.as_str(),
            role.name.as_str()
        ),
        ("rbac.authorization.k8s.io", "ClusterRole", "cm-admin")
    );
    let signer = regs[1].custom_signer.as_ref().unwrap();
    assert_eq!(signer.signer_name, "example.com/signer-name");
    assert_eq!(
        signer.subject.as_ref().unwrap().organization_unit,
        ["o1", "o2"]
    );
    assert_eq!(signer.signing_ca.as_ref().unwrap().name, "ca-secret");
    let json = serde_json::to_value(AddOnTemplate::from(&t)).unwrap();
    let reg = &json["spec"]["registration"];
    assert_eq!(
        reg[0]["kubeClient"]["hubPermissions"][0],
        serde_json::json!({"type": "CurrentCluster", "currentCluster": {"clusterRoleName": "cm-admin"}})
    );
    assert_eq!(
        reg[0]["kubeClient"]["hubPermissions"][1],
        serde_json::json!({"type": "SingleNamespace", "singleNamespace": {"namespace": "default",
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cm-admin"}}})
    );
    assert_eq!(
        reg[1]["customSigner"]["signingCA"],
        serde_json::json!({"name": "ca-secret", "namespace": "default"})
    );
    assert_eq!(
        reg[1]["customSigner"]["subject"]["organizationUnit"],
        serde_json::json!(["o1", "o2"])
    );
}

/// The e2e template with its placeholders filled as OCM's e2e test fills them.
fn filled_e2e_template() -> String {
    E2E_TEMPLATE
        .replace("<< AddonInstallNamespace >>", "hello-ns")
        .replace("<< CustomSignerName >>", "example.com/signer-name")
        .replace("<< CustomSignerSecretName >>", "ca-secret")
        .replace("<< CustomSignerSecretNamespace >>", "default")
}

#[test]
fn the_e2e_template_with_placeholders_is_refused_naming_the_signer_name() {
    let Document::AddOnTemplate(t) = parse_one(E2E_TEMPLATE) else {
        panic!("the e2e template parses")
    };
    let errors = validate::addon_template(&t);
    assert!(
        errors.iter().any(
            |e| e.starts_with("spec.registration[1].customSigner.signerName: ")
                && e.contains("<< CustomSignerName >>")
        ),
        "{errors:?}"
    );
    // With its placeholders filled as the e2e test does, it is valid.
    let Document::AddOnTemplate(t) = parse_one(&filled_e2e_template()) else {
        panic!("the filled template parses")
    };
    let errors = validate::addon_template(&t);
    assert!(errors.is_empty(), "{errors:?}");
}

#[test]
fn the_hand_written_examples_parse_validate_and_round_trip() {
    let docs: Vec<Document> = parse_documents(HAND_WRITTEN)
        .into_iter()
        .map(|d| d.unwrap_or_else(|e| panic!("{e}")))
        .collect();
    assert_eq!(docs.len(), 3);

    let Document::AddOnDeploymentConfig(adc) = &docs[0] else {
        panic!("{:?}", docs[0])
    };
    assert!(validate::addon_deployment_config(adc).is_empty());
    let spec = adc.spec.as_ref().unwrap();
    assert_eq!(spec.agent_install_namespace, "hello-ns");
    assert_eq!(spec.customized_variables[0].value, "4");
    let np = spec.node_placement.as_ref().unwrap();
    assert!(np.has_node_selector);
    assert_eq!(np.node_selector["host"], "ssd");
    assert_eq!(np.tolerations[0].effect, "NoExecute");
    assert_eq!(spec.registries[0].mirror, "quay.io/ocm");
    let shown = AddOnDeploymentConfig::from(adc);
    assert_eq!(&shown.to_proto().unwrap(), adc);
    reparses_to(&shown, &docs[0]);

    let Document::ManagedClusterAddOn(mca) = &docs[1] else {
        panic!("{:?}", docs[1])
    };
    assert!(validate::managed_cluster_addon(mca).is_empty());
    assert_eq!(mca.spec.as_ref().unwrap().configs[0].name, "hello-config");
    let shown = ManagedClusterAddOn::from(mca);
    assert_eq!(&shown.to_proto().unwrap(), mca);
    reparses_to(&shown, &docs[1]);

    let Document::ClusterManagementAddOn(cma) = &docs[2] else {
        panic!("{:?}", docs[2])
    };
    assert!(validate::cluster_management_addon(cma).is_empty());
    let strategy = cma
        .spec
        .as_ref()
        .unwrap()
        .install_strategy
        .as_ref()
        .unwrap();
    assert_eq!(strategy.r#type, "Placements");
    let p = &strategy.placements[0];
    assert_eq!((p.namespace.as_str(), p.name.as_str()), ("default", "edge"));
    assert_eq!(p.configs[0].name, "edge-config");
    let rollout = p.rollout_strategy.as_ref().unwrap();
    assert_eq!(rollout.r#type, "Progressive");
    let progressive = rollout.progressive.as_ref().unwrap();
    assert_eq!(progressive.max_concurrency, "1");
    assert_eq!(progressive.max_failures, "0");
    assert_eq!(progressive.progress_deadline, "10m");
    assert_eq!(
        progressive.mandatory_decision_groups[0].group_name,
        "canary"
    );
    let shown = ClusterManagementAddOn::from(cma);
    assert_eq!(&shown.to_proto().unwrap(), cma);
    reparses_to(&shown, &docs[2]);
    // Numbers stay numbers when printed.
    let yaml = serde_yaml::to_string(&shown).unwrap();
    assert!(yaml.contains("maxConcurrency: 1\n"), "{yaml}");
}

#[test]
fn versions_of_the_addon_group_that_ocm_does_not_serve_are_refused_clearly() {
    // OCM's v1beta1 has no AddOnTemplate.
    let text = TEMPLATE_FIXTURES[0].1.replace(
        "addon.open-cluster-management.io/v1alpha1",
        "addon.open-cluster-management.io/v1beta1",
    );
    let err = parse_documents(&text).remove(0).unwrap_err();
    assert!(matches!(err, DocError::Unsupported { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("addon.open-cluster-management.io/v1beta1"),
        "{msg}"
    );
    assert!(
        msg.contains("addon.open-cluster-management.io/v1alpha1 AddOnTemplate"),
        "{msg}"
    );
    // A version OCM never had, of a kind v1beta1 has: both versions named.
    let err = parse_documents(
        "apiVersion: addon.open-cluster-management.io/v2\nkind: ClusterManagementAddOn\nmetadata: {name: x}\n",
    )
    .remove(0)
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("v1alpha1 ClusterManagementAddOn (OCM's storage version) and addon.open-cluster-management.io/v1beta1 ClusterManagementAddOn"),
        "{err}"
    );
    // The general list names the add-on kinds too.
    let err = parse_documents("apiVersion: addon.open-cluster-management.io/v1alpha1\nkind: AddOnThing\nmetadata: {name: x}\n")
        .remove(0)
        .unwrap_err()
        .to_string();
    assert!(err.contains("v1alpha1 AddOnDeploymentConfig"), "{err}");
}

#[test]
fn unknown_spec_fields_are_refused_naming_the_path() {
    for (text, path, field) in [
        (
            "kind: AddOnDeploymentConfig\nmetadata: {name: c, namespace: default}\nspec: {customizedVariable: []}\n",
            "spec.customizedVariable",
            "customizedVariable",
        ),
        (
            "kind: ClusterManagementAddOn\nmetadata: {name: a}\nspec: {installStrategy: {type: Placements, placements: [{namespace: d, name: p, rollout: {}}]}}\n",
            "spec.installStrategy.placements[0].rollout",
            "rollout",
        ),
        (
            "kind: AddOnTemplate\nmetadata: {name: t}\nspec: {addonName: a, agentSpec: {workloads: {}}}\n",
            "spec.agentSpec.workloads",
            "workloads",
        ),
        (
            "kind: AddOnTemplate\nmetadata: {name: t}\nspec: {addonName: a, registration: [{type: KubeClient, kubeClient: {hubPermissions: [{type: CurrentCluster, currentCluster: {clusterRole: x}}]}}]}\n",
            "spec.registration[0].kubeClient.hubPermissions[0].currentCluster.clusterRole",
            "clusterRole",
        ),
        (
            "kind: AddOnDeploymentConfig\nmetadata: {name: c, namespace: default}\nspec: {resourceRequirements: [{containerID: '*:*:*', resources: {claims: [{name: gpu}]}}]}\n",
            "spec.resourceRequirements[0].resources.claims",
            "claims",
        ),
    ] {
        let text = format!("apiVersion: addon.open-cluster-management.io/v1alpha1\n{text}");
        let err = parse_documents(&text).remove(0).unwrap_err();
        let DocError::Field {
            path: p, message, ..
        } = &err
        else {
            panic!("{err:?}")
        };
        assert_eq!(p, path, "{err}");
        assert!(message.contains(field), "{err}");
    }
}

#[test]
fn the_deprecated_addon_configuration_is_accepted_only_empty() {
    let text = |c: &str| {
        format!(
            "apiVersion: addon.open-cluster-management.io/v1alpha1\nkind: ClusterManagementAddOn\nmetadata: {{name: a}}\nspec: {{addOnConfiguration: {c}}}\n"
        )
    };
    let Document::ClusterManagementAddOn(a) = parse_one(&text("{}")) else {
        panic!("a CMA")
    };
    let yaml = serde_yaml::to_string(&ClusterManagementAddOn::from(&a)).unwrap();
    assert!(!yaml.contains("addOnConfiguration"), "{yaml}");
    let err = parse_documents(&text("{crdName: x.example.com}"))
        .remove(0)
        .unwrap_err();
    let DocError::Field { path, message, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(path, "spec.addOnConfiguration");
    assert!(message.contains("supportedConfigs"), "{err}");
}

#[test]
fn node_selector_given_empty_is_kept_apart_from_absent() {
    let adc = |placement: &str| {
        let text = format!(
            "apiVersion: addon.open-cluster-management.io/v1alpha1\nkind: AddOnDeploymentConfig\nmetadata: {{name: c, namespace: default}}\nspec: {{nodePlacement: {placement}}}\n"
        );
        let Document::AddOnDeploymentConfig(c) = parse_one(&text) else {
            panic!("an ADC")
        };
        c
    };
    let with = adc("{nodeSelector: {}}");
    assert!(
        with.spec
            .as_ref()
            .unwrap()
            .node_placement
            .as_ref()
            .unwrap()
            .has_node_selector
    );
    let yaml = serde_yaml::to_string(&AddOnDeploymentConfig::from(&with)).unwrap();
    assert!(yaml.contains("nodeSelector: {}"), "{yaml}");
    assert_eq!(AddOnDeploymentConfig::from(&with).to_proto().unwrap(), with);
    let without = adc("{tolerations: [{operator: Exists}]}");
    assert!(
        !without
            .spec
            .as_ref()
            .unwrap()
            .node_placement
            .as_ref()
            .unwrap()
            .has_node_selector
    );
    let yaml = serde_yaml::to_string(&AddOnDeploymentConfig::from(&without)).unwrap();
    assert!(!yaml.contains("nodeSelector"), "{yaml}");
}

#[test]
fn ca_bundle_is_base64_and_quantities_are_strings() {
    let text = "apiVersion: addon.open-cluster-management.io/v1alpha1\nkind: AddOnDeploymentConfig\nmetadata: {name: c, namespace: default}\nspec:\n  proxyConfig: {httpsProxy: 'https://proxy:3129', caBundle: LS0tLS1CRUdJTg==, noProxy: 'localhost,.svc'}\n  resourceRequirements: [{containerID: 'deployments:*:*', resources: {limits: {cpu: 1, memory: 64Mi}, requests: {cpu: 0.5}}}]\n";
    let Document::AddOnDeploymentConfig(c) = parse_one(text) else {
        panic!("an ADC")
    };
    let spec = c.spec.as_ref().unwrap();
    assert_eq!(spec.proxy_config.as_ref().unwrap().ca_bundle, b"-----BEGIN");
    let q = spec.resource_requirements[0].resources.as_ref().unwrap();
    assert_eq!(q.limits["cpu"], "1");
    assert_eq!(q.limits["memory"], "64Mi");
    assert_eq!(q.requests["cpu"], "0.5");
    assert!(validate::addon_deployment_config(&c).is_empty());
    let json = serde_json::to_value(AddOnDeploymentConfig::from(&c)).unwrap();
    assert_eq!(json["spec"]["proxyConfig"]["caBundle"], "LS0tLS1CRUdJTg==");
    assert_eq!(
        json["spec"]["resourceRequirements"][0]["resources"]["limits"],
        serde_json::json!({"cpu": "1", "memory": "64Mi"})
    );
    assert_eq!(AddOnDeploymentConfig::from(&c).to_proto().unwrap(), c);

    let bad = text.replace("LS0tLS1CRUdJTg==", "not*base64");
    let err = parse_documents(&bad).remove(0).unwrap_err();
    let DocError::Field { path, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(path, "spec.proxyConfig.caBundle", "{err}");
}

#[test]
fn base64_matches_rfc_4648_vectors() {
    for (plain, encoded) in [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="),
        ("fooba", "Zm9vYmE="),
        ("foobar", "Zm9vYmFy"),
    ] {
        assert_eq!(base64_encode(plain.as_bytes()), encoded);
        assert_eq!(base64_decode(encoded).unwrap(), plain.as_bytes());
    }
    let all: Vec<u8> = (0..=255).collect();
    assert_eq!(base64_decode(&base64_encode(&all)).unwrap(), all);
    assert_eq!(base64_decode("Zm9v\nYmFy\r\n").unwrap(), b"foobar");
    for bad in ["Zm9", "Zg=a", "Zg==Zm9v", "Z===", "Zm9*"] {
        assert!(base64_decode(bad).is_err(), "{bad}");
    }
}

#[test]
fn cluster_management_addon_status_prints_ocms_keys_and_flotillas_counts() {
    let hash = |name: &str, h: &str| v1::ConfigSpecHash {
        namespace: String::new(),
        name: name.into(),
        spec_hash: h.into(),
    };
    let cma = v1::ClusterManagementAddOn {
        metadata: Some(v1::ObjectMeta {
            name: "fleet-metrics".into(),
            ..Default::default()
        }),
        spec: Some(v1::ClusterManagementAddOnSpec::default()),
        status: Some(v1::ClusterManagementAddOnStatus {
            default_config_references: vec![v1::DefaultConfigReference {
                group: "addon.open-cluster-management.io".into(),
                resource: "addontemplates".into(),
                desired_config: Some(hash("fleet-metrics-v1", "abc")),
            }],
            install_progressions: vec![v1::InstallProgression {
                namespace: "default".into(),
                name: "edge".into(),
                config_references: vec![v1::InstallConfigReference {
                    group: "addon.open-cluster-management.io".into(),
                    resource: "addontemplates".into(),
                    desired_config: Some(hash("fleet-metrics-v2", "def")),
                    last_known_good_config: Some(hash("fleet-metrics-v1", "abc")),
                    last_applied_config: None,
                }],
                conditions: vec![v1::Condition {
                    r#type: "Progressing".into(),
                    status: "True".into(),
                    reason: "Progressing".into(),
                    message: "1/3 progressing..., 0 failed 0 timeout.".into(),
                    ..Default::default()
                }],
                decision_groups: vec![v1::DecisionGroupSummary {
                    index: 0,
                    name: "canary".into(),
                    total: 1,
                    available: 1,
                }],
                stopped_reason: String::new(),
                notes: vec!["maxConcurrency defaulted to 2".into()],
                total: 3,
                updated: 0,
                failed: 0,
            }],
        }),
    };
    let json = serde_json::to_value(ClusterManagementAddOn::from(&cma)).unwrap();
    let status = &json["status"];
    assert_eq!(
        status["defaultconfigReferences"][0]["desiredConfig"],
        serde_json::json!({"name": "fleet-metrics-v1", "specHash": "abc"})
    );
    let p = &status["installProgressions"][0];
    assert_eq!(p["namespace"], "default");
    assert_eq!(p["configReferences"][0]["desiredConfig"]["specHash"], "def");
    assert_eq!(
        p["configReferences"][0]["lastKnownGoodConfig"]["name"],
        "fleet-metrics-v1"
    );
    assert!(p["configReferences"][0].get("lastAppliedConfig").is_none());
    assert_eq!(p["conditions"][0]["reason"], "Progressing");
    assert_eq!(
        p["decisionGroups"][0],
        serde_json::json!({"index": 0, "name": "canary", "total": 1, "available": 1})
    );
    assert_eq!(p["notes"][0], "maxConcurrency defaulted to 2");
    assert_eq!(
        (&p["total"], &p["updated"], &p["failed"]),
        (&3.into(), &0.into(), &0.into())
    );
    assert!(p.get("stoppedReason").is_none());
    // Status is the hub's: dropped on input.
    assert_eq!(
        ClusterManagementAddOn::from(&cma)
            .to_proto()
            .unwrap()
            .status,
        None
    );
}

#[test]
fn managed_cluster_addon_status_prints_ocms_shape_without_hub_state() {
    let mca = v1::ManagedClusterAddOn {
        metadata: Some(v1::ObjectMeta {
            name: "fleet-metrics".into(),
            namespace: "cluster1".into(),
            ..Default::default()
        }),
        spec: Some(v1::ManagedClusterAddOnSpec::default()),
        status: Some(v1::ManagedClusterAddOnStatus {
            conditions: vec![v1::Condition {
                r#type: "Available".into(),
                status: "True".into(),
                reason: "ProbeAvailable".into(),
                ..Default::default()
            }],
            related_objects: vec![v1::ObjectReference {
                group: "addon.open-cluster-management.io".into(),
                resource: "clustermanagementaddons".into(),
                namespace: String::new(),
                name: "fleet-metrics".into(),
            }],
            add_on_meta: Some(v1::AddOnMeta::default()),
            supported_configs: vec![v1::ConfigGroupResource {
                group: "addon.open-cluster-management.io".into(),
                resource: "addondeploymentconfigs".into(),
            }],
            config_references: vec![v1::ConfigReference {
                group: "addon.open-cluster-management.io".into(),
                resource: "addondeploymentconfigs".into(),
                namespace: "default".into(),
                name: "edge-config".into(),
                last_observed_generation: 2,
                desired_config: Some(v1::ConfigSpecHash {
                    namespace: "default".into(),
                    name: "edge-config".into(),
                    spec_hash: "h2".into(),
                }),
                last_applied_config: Some(v1::ConfigSpecHash {
                    namespace: "default".into(),
                    name: "edge-config".into(),
                    spec_hash: "h1".into(),
                }),
            }],
            namespace: "open-cluster-management-agent-addon".into(),
            registrations: vec![v1::RegistrationConfig {
                signer_name: "kubernetes.io/kube-apiserver-client".into(),
                subject: Some(v1::Subject {
                    user: "system:open-cluster-management:cluster:cluster1:addon:fleet-metrics"
                        .into(),
                    groups: vec!["system:authenticated".into()],
                    organization_unit: vec![],
                }),
            }],
            health_check: Some(v1::HealthCheck {
                mode: "Customized".into(),
            }),
        }),
        hub: Some(v1::AddOnHubState {
            placement: "default/edge".into(),
            agent_public_key: "UABC".into(),
            lease_renewed_at: None,
        }),
    };
    let shown = ManagedClusterAddOn::from(&mca);
    let json = serde_json::to_value(&shown).unwrap();
    let status = &json["status"];
    assert_eq!(status["healthCheck"]["mode"], "Customized");
    assert_eq!(status["conditions"][0]["reason"], "ProbeAvailable");
    assert_eq!(status["namespace"], "open-cluster-management-agent-addon");
    let r = &status["configReferences"][0];
    assert_eq!(r["lastObservedGeneration"], 2);
    assert_eq!(r["desiredConfig"]["specHash"], "h2");
    assert_eq!(r["lastAppliedConfig"]["specHash"], "h1");
    assert_eq!(
        status["registrations"][0]["subject"]["groups"][0],
        "system:authenticated"
    );
    assert!(
        status.get("addOnMeta").is_none(),
        "empty addOnMeta is left out"
    );
    let yaml = serde_yaml::to_string(&shown).unwrap();
    assert!(
        !yaml.contains("UABC") && !yaml.contains("default/edge"),
        "{yaml}"
    );
    // On input, status and hub state are dropped.
    let back = shown.to_proto().unwrap();
    assert_eq!((back.status, back.hub), (None, None));
    assert_eq!(back.spec, mca.spec);
}

#[test]
fn bad_resource_versions_name_the_field() {
    let text = "apiVersion: addon.open-cluster-management.io/v1alpha1\nkind: ManagedClusterAddOn\nmetadata: {name: a, namespace: c1, resourceVersion: abc}\nspec: {}\n";
    let err = parse_documents(text).remove(0).unwrap_err();
    let DocError::Field { path, .. } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(path, "metadata.resourceVersion", "{err}");
}
