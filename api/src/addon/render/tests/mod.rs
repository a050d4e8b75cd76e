use super::*;
use crate::addon::{
    HEALTH_CHECK_ANNOTATION, HEALTH_PROBE_FIELD_ANNOTATION, PRE_DELETE_HOOK_ANNOTATION,
    PRE_DELETE_HOOK_LABEL,
};
use crate::v1::{
    AddOnDeploymentConfig, AddOnDeploymentConfigSpec, AddOnTemplate, AddOnTemplateSpec,
    ContainerResourceRequirements, CustomizedVariable, FeedbackRule, ImageMirror, JsonPath,
    Manifest, ManifestConfigOption, ManifestWorkSpec, ManifestsTemplate, NodePlacement, ObjectMeta,
    ProxyConfig, RegistrationSpec, ResourceIdentifier, ResourceRequirements, Toleration,
};

const TEMPLATE: &str = include_str!("../testdata/addontemplate.yaml");
const DEPLOYMENT_TEMPLATE: &str = include_str!("../testdata/addontemplate_deployment.yaml");
const DAEMONSET_TEMPLATE: &str = include_str!("../testdata/addontemplate_daemonset.yaml");

/// A v1 AddOnTemplate from OCM YAML (manifests as JSON, registration types only).
fn template_from_yaml(text: &str) -> AddOnTemplate {
    let doc: Value = serde_yaml::from_str(text).unwrap();
    let manifests = doc["spec"]["agentSpec"]["workload"]["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| Manifest {
            raw: serde_json::to_vec(m).unwrap(),
        })
        .collect();
    let registration = doc["spec"]["registration"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|r| RegistrationSpec {
                    r#type: r["type"].as_str().unwrap().into(),
                    ..Default::default()
                })
                .collect()
        })
        .unwrap_or_default();
    AddOnTemplate {
        metadata: Some(ObjectMeta {
            name: doc["metadata"]["name"].as_str().unwrap().into(),
            ..Default::default()
        }),
        spec: Some(AddOnTemplateSpec {
            addon_name: doc["spec"]["addonName"].as_str().unwrap().into(),
            agent_spec: Some(ManifestWorkSpec {
                workload: Some(ManifestsTemplate { manifests }),
                ..Default::default()
            }),
            registration,
        }),
    }
}

/// A template of the given manifests (JSON values), no registration.
fn template_of(manifests: Vec<Value>) -> AddOnTemplate {
    AddOnTemplate {
        metadata: Some(ObjectMeta {
            name: "t".into(),
            ..Default::default()
        }),
        spec: Some(AddOnTemplateSpec {
            addon_name: "hello".into(),
            agent_spec: Some(ManifestWorkSpec {
                workload: Some(ManifestsTemplate {
                    manifests: manifests
                        .iter()
                        .map(|m| Manifest {
                            raw: serde_json::to_vec(m).unwrap(),
                        })
                        .collect(),
                }),
                ..Default::default()
            }),
            registration: vec![],
        }),
    }
}

fn raw_template_of(manifests: &[&str]) -> AddOnTemplate {
    let mut t = template_of(vec![]);
    t.spec
        .as_mut()
        .unwrap()
        .agent_spec
        .as_mut()
        .unwrap()
        .workload = Some(ManifestsTemplate {
        manifests: manifests
            .iter()
            .map(|m| Manifest {
                raw: m.as_bytes().to_vec(),
            })
            .collect(),
    });
    t
}

fn agent_spec_mut(t: &mut AddOnTemplate) -> &mut ManifestWorkSpec {
    t.spec.as_mut().unwrap().agent_spec.as_mut().unwrap()
}

fn adc(spec: AddOnDeploymentConfigSpec) -> AddOnDeploymentConfig {
    AddOnDeploymentConfig {
        metadata: Some(ObjectMeta {
            name: "hello-config".into(),
            namespace: "default".into(),
            ..Default::default()
        }),
        spec: Some(spec),
    }
}

/// The config of OCM's `TestAddonTemplateAgentManifests` "manifests rendered successfully".
fn ocm_config() -> AddOnDeploymentConfigSpec {
    AddOnDeploymentConfigSpec {
        agent_install_namespace: "test-install-namespace".into(),
        customized_variables: vec![CustomizedVariable {
            name: "LOG_LEVEL".into(),
            value: "4".into(),
        }],
        node_placement: Some(NodePlacement {
            node_selector: HashMap::from([("host".to_string(), "ssd".to_string())]),
            tolerations: vec![Toleration {
                key: "foo".into(),
                operator: "Exists".into(),
                effect: "NoExecute".into(),
                ..Default::default()
            }],
            has_node_selector: true,
        }),
        registries: vec![ImageMirror {
            source: "quay.io/open-cluster-management".into(),
            mirror: "quay.io/ocm".into(),
        }],
        ..Default::default()
    }
}

fn no_hashes() -> BTreeMap<String, String> {
    BTreeMap::new()
}

fn input<'a>(
    template: &'a AddOnTemplate,
    config: Option<&'a AddOnDeploymentConfig>,
    hashes: &'a BTreeMap<String, String>,
) -> Input<'a> {
    Input {
        addon: "hello-template",
        cluster: "cluster1",
        install_namespace: "",
        template,
        config,
        hub_url: "",
        config_hashes: hashes,
        ensure_namespace: false,
    }
}

/// The one work a template of less than a work's worth of manifests renders into.
fn render_one(input: &Input) -> Result<v1::ManifestWork, RenderError> {
    render(input).map(|works| {
        assert_eq!(works.len(), 1, "one work expected");
        works.into_iter().next().unwrap()
    })
}

fn objects(work: &v1::ManifestWork) -> Vec<Value> {
    work.spec
        .as_ref()
        .unwrap()
        .workload
        .as_ref()
        .unwrap()
        .manifests
        .iter()
        .map(|m| serde_json::from_slice(&m.raw).unwrap())
        .collect()
}

fn env_of(obj: &Value) -> Vec<(String, String)> {
    obj["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["value"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn ocms_template_renders_as_ocm_renders_it() {
    let t = template_from_yaml(TEMPLATE);
    let config = adc(ocm_config());
    let hashes = BTreeMap::from([
        (
            "addontemplates.addon.open-cluster-management.io//hello-template".to_string(),
            "aa".to_string(),
        ),
        (
            "addondeploymentconfigs.addon.open-cluster-management.io/default/hello-config"
                .to_string(),
            "bb".to_string(),
        ),
    ]);
    let work = render_one(&input(&t, Some(&config), &hashes)).unwrap();
    let meta = work.metadata.as_ref().unwrap();
    assert_eq!(meta.name, "addon-hello-template-deploy-0");
    assert_eq!(meta.namespace, "cluster1");
    assert_eq!(meta.labels[ADDON_NAME_LABEL], "hello-template");
    assert_eq!(
        meta.annotations[CONFIG_SPEC_HASH_ANNOTATION],
        r#"{"addondeploymentconfigs.addon.open-cluster-management.io/default/hello-config":"bb","addontemplates.addon.open-cluster-management.io//hello-template":"aa"}"#
    );

    // The pre-delete Job is not part of the agent's work.
    let objs = objects(&work);
    let kinds: Vec<&str> = objs.iter().map(|o| o["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "Deployment",
            "DaemonSet",
            "ServiceAccount",
            "ClusterRoleBinding"
        ]
    );
    let expected_env = pairs(&[
        ("LOG_LEVEL", "4"),
        ("HUB_KUBECONFIG", "/managed/hub-kubeconfig/kubeconfig"),
        ("CLUSTER_NAME", "cluster1"),
        ("INSTALL_NAMESPACE", "test-install-namespace"),
    ]);
    for workload in &objs[..2] {
        assert_eq!(workload["metadata"]["namespace"], "test-install-namespace");
        assert_eq!(env_of(workload), expected_env);
        let pod = &workload["spec"]["template"]["spec"];
        assert_eq!(pod["nodeSelector"], json!({"host": "ssd"}));
        assert_eq!(
            pod["tolerations"],
            json!([{"key": "foo", "operator": "Exists", "effect": "NoExecute"}])
        );
        assert_eq!(
            pod["containers"][0]["image"],
            "quay.io/ocm/addon-examples:v1"
        );
        let args = pod["containers"][0]["args"].as_array().unwrap();
        assert!(args.contains(&json!("--cluster-name=cluster1")));
        assert!(args.contains(&json!(
            "--hub-kubeconfig=/managed/hub-kubeconfig/kubeconfig"
        )));
        // Flotilla mounts no hub-kubeconfig secret.
        assert!(pod.get("volumes").is_none());
    }
    assert_eq!(objs[2]["metadata"]["namespace"], "test-install-namespace");
    assert_eq!(
        objs[3]["subjects"][0]["namespace"],
        "test-install-namespace"
    );
    assert!(objs[3]["metadata"].get("namespace").is_none());

    let spec = work.spec.as_ref().unwrap();
    let delete = spec.delete_option.as_ref().unwrap();
    assert_eq!(delete.propagation_policy, "SelectivelyOrphan");
    let rules: Vec<(&str, &str, &str, &str)> = delete
        .selectively_orphans
        .as_ref()
        .unwrap()
        .orphaning_rules
        .iter()
        .map(|r| {
            (
                r.group.as_str(),
                r.resource.as_str(),
                r.namespace.as_str(),
                r.name.as_str(),
            )
        })
        .collect();
    assert_eq!(
        rules,
        [
            (
                "apps",
                "deployments",
                "test-install-namespace",
                "hello-template-agent"
            ),
            (
                "apps",
                "daemonsets",
                "test-install-namespace",
                "hello-template-agent-ds"
            ),
            (
                "",
                "serviceaccounts",
                "test-install-namespace",
                "hello-template-agent-sa"
            ),
        ]
    );
    // WorkStatus (the default) asks for the workloads' well-known status.
    let probes: Vec<(String, Vec<String>)> = spec
        .manifest_configs
        .iter()
        .map(|c| {
            let r = c.resource_identifier.as_ref().unwrap();
            (
                format!("{}/{}/{}/{}", r.group, r.resource, r.namespace, r.name),
                c.feedback_rules.iter().map(|f| f.r#type.clone()).collect(),
            )
        })
        .collect();
    assert_eq!(
        probes,
        [
            (
                "apps/deployments/test-install-namespace/hello-template-agent".to_string(),
                vec!["WellKnownStatus".to_string()]
            ),
            (
                "apps/daemonsets/test-install-namespace/hello-template-agent-ds".to_string(),
                vec!["WellKnownStatus".to_string()]
            ),
        ]
    );

    // The hook goes into its own work.
    let hook = pre_delete(&input(&t, Some(&config), &hashes))
        .unwrap()
        .unwrap();
    assert_eq!(
        hook.metadata.as_ref().unwrap().name,
        "addon-hello-template-pre-delete"
    );
    assert_eq!(
        hook.metadata.as_ref().unwrap().labels[ADDON_NAME_LABEL],
        "hello-template"
    );
    let hook_objs = objects(&hook);
    assert_eq!(hook_objs.len(), 1);
    assert_eq!(hook_objs[0]["kind"], "Job");
    assert_eq!(
        hook_objs[0]["metadata"]["namespace"],
        "test-install-namespace"
    );
    let hc = &hook.spec.as_ref().unwrap().manifest_configs;
    assert_eq!(
        hc[0].resource_identifier.as_ref().unwrap(),
        &ResourceIdentifier {
            group: "batch".into(),
            resource: "jobs".into(),
            namespace: "test-install-namespace".into(),
            name: "hello-template-cleanup-configmap".into(),
        }
    );
    assert_eq!(hc[0].feedback_rules[0].r#type, "WellKnownStatus");
    // Flotilla: a hook Job also reports why it failed.
    let failure = &hc[0].feedback_rules[1];
    assert_eq!(failure.r#type, "JSONPaths");
    let names: Vec<&str> = failure.json_paths.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["JobFailed", "JobFailedReason"]);
    assert!(crate::work::validate(&hook).is_empty());
    assert!(may_have_pre_delete_hooks(&t));
}

#[test]
fn delete_option_and_executor_come_from_the_template_without_orphans() {
    let mut t = template_of(vec![json!({"apiVersion": "v1", "kind": "ConfigMap",
                                        "metadata": {"name": "c", "namespace": "ns"}})]);
    let spec = agent_spec_mut(&mut t);
    spec.delete_option = Some(v1::DeleteOption {
        propagation_policy: "Orphan".into(),
        selectively_orphans: None,
        ttl_seconds_after_finished: Some(60),
    });
    spec.executor = Some(v1::ManifestWorkExecutor {
        subject: Some(v1::ManifestWorkExecutorSubject {
            r#type: "ServiceAccount".into(),
            service_account: Some(v1::ManifestWorkSubjectServiceAccount {
                namespace: "ns".into(),
                name: "deployer".into(),
            }),
        }),
    });
    let hashes = no_hashes();
    let work = render_one(&input(&t, None, &hashes)).unwrap();
    let ws = work.spec.as_ref().unwrap();
    assert_eq!(
        ws.delete_option.as_ref().unwrap().propagation_policy,
        "Orphan"
    );
    assert_eq!(
        ws.executor
            .as_ref()
            .unwrap()
            .subject
            .as_ref()
            .unwrap()
            .service_account
            .as_ref()
            .unwrap()
            .name,
        "deployer"
    );
    // An orphan annotation turns it into SelectivelyOrphan, keeping the TTL.
    let mut t2 = template_of(vec![json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "annotations": {DELETION_ORPHAN_ANNOTATION: ""}}})]);
    agent_spec_mut(&mut t2).delete_option = agent_spec_mut(&mut t).delete_option.clone();
    let work = render_one(&input(&t2, None, &hashes)).unwrap();
    let d = work.spec.unwrap().delete_option.unwrap();
    assert_eq!(d.propagation_policy, "SelectivelyOrphan");
    assert_eq!(d.ttl_seconds_after_finished, Some(60));
    let rule = &d.selectively_orphans.unwrap().orphaning_rules[0];
    // Flotilla's identity: a ConfigMap without namespace is in `default`.
    assert_eq!(
        (
            rule.group.as_str(),
            rule.resource.as_str(),
            rule.namespace.as_str(),
            rule.name.as_str()
        ),
        ("", "configmaps", "default", "c")
    );
    // No pre-delete hooks: no hook work.
    assert_eq!(pre_delete(&input(&t2, None, &hashes)).unwrap(), None);
}

#[test]
fn health_modes_decide_the_generated_feedback() {
    let mut t = template_of(vec![
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "a", "namespace": "ns"}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "b", "namespace": "ns"},
               "spec": {"replicas": 0}}),
    ]);
    agent_spec_mut(&mut t).manifest_configs = vec![ManifestConfigOption {
        resource_identifier: Some(ResourceIdentifier {
            group: "apps".into(),
            resource: "deployments".into(),
            namespace: "*".into(),
            name: "a".into(),
        }),
        feedback_rules: vec![FeedbackRule {
            r#type: "JSONPaths".into(),
            json_paths: vec![JsonPath {
                name: "isHealthy".into(),
                path: ".status.conditions[0].status".into(),
                version: String::new(),
            }],
        }],
        ..Default::default()
    }];
    let hashes = no_hashes();
    let configs = render_one(&input(&t, None, &hashes))
        .unwrap()
        .spec
        .unwrap()
        .manifest_configs;
    // Merged into the template's entry for `a` (its index kept); `b` (replicas 0) still asked,
    // as OCM asks for every workload.
    assert_eq!(configs.len(), 2);
    assert_eq!(
        configs[0]
            .feedback_rules
            .iter()
            .map(|r| r.r#type.as_str())
            .collect::<Vec<_>>(),
        ["JSONPaths", "WellKnownStatus"]
    );
    assert_eq!(configs[1].resource_identifier.as_ref().unwrap().name, "b");

    for (mode, field) in [("Lease", None), ("Customized", Some("isHealthy"))] {
        let mut t2 = t.clone();
        let annotations = &mut t2.metadata.as_mut().unwrap().annotations;
        annotations.insert(HEALTH_CHECK_ANNOTATION.into(), mode.into());
        if let Some(f) = field {
            annotations.insert(HEALTH_PROBE_FIELD_ANNOTATION.into(), f.into());
        }
        let configs = render_one(&input(&t2, None, &hashes))
            .unwrap()
            .spec
            .unwrap()
            .manifest_configs;
        assert_eq!(configs, agent_spec_mut(&mut t).manifest_configs, "{mode}");
    }

    let mut bad = t.clone();
    bad.metadata
        .as_mut()
        .unwrap()
        .annotations
        .insert(HEALTH_CHECK_ANNOTATION.into(), "Probe".into());
    assert!(matches!(
        render_one(&input(&bad, None, &hashes)),
        Err(RenderError::HealthCheck(m)) if m.starts_with("metadata.annotations[addon.flotilla.io/health-check]")
    ));
}

#[test]
fn work_validation_errors_name_the_template_fields() {
    let t = template_of(vec![
        json!({"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": "hook", "namespace": "ns", "labels": {PRE_DELETE_HOOK_LABEL: ""}}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "ns"}}),
    ]);
    let hashes = no_hashes();
    let err = render_one(&input(&t, None, &hashes)).unwrap_err();
    assert_eq!(
        err,
        RenderError::Invalid(vec![
            "spec.agentSpec.workload.manifests[1].metadata.name: required".into()
        ])
    );
    // A hook alone leaves the agent's work empty.
    let t = template_of(vec![json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "annotations": {PRE_DELETE_HOOK_ANNOTATION: "true"}}})]);
    assert_eq!(
        render_one(&input(&t, None, &hashes))
            .unwrap_err()
            .to_string(),
        "spec.agentSpec.workload.manifests: at least one manifest is required"
    );
    assert!(pre_delete(&input(&t, None, &hashes)).unwrap().is_some());
    // An invalid cluster name is the work's own metadata.
    let t = template_of(vec![json!({"apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"name": "c", "namespace": "ns"}})]);
    let mut i = input(&t, None, &hashes);
    i.cluster = "Not_A_Cluster";
    let err = render_one(&i).unwrap_err().to_string();
    assert!(err.starts_with("metadata.namespace"), "{err}");
}

#[test]
fn malformed_manifests_name_their_fields() {
    let hashes = no_hashes();
    let t = raw_template_of(&[r#"["not", "an", "object"]"#]);
    assert_eq!(
        render_one(&input(&t, None, &hashes))
            .unwrap_err()
            .to_string(),
        "spec.agentSpec.workload.manifests[0]: must be a Kubernetes object (a map)"
    );
    let t = template_of(vec![deployment_with_pod(
        json!({"containers": {"name": "c"}}),
    )]);
    assert_eq!(
        render_one(&input(&t, None, &hashes))
            .unwrap_err()
            .to_string(),
        "spec.agentSpec.workload.manifests[0].spec.template.spec.containers: must be a list"
    );
    let t = template_of(vec![json!({"apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "d", "namespace": "ns"}, "spec": {"template": "oops"}})]);
    assert_eq!(
        render_one(&input(&t, None, &hashes))
            .unwrap_err()
            .to_string(),
        "spec.agentSpec.workload.manifests[0].spec.template: must be an object"
    );
    let t = template_of(vec![deployment_with_pod(
        json!({"containers": [{"name": "c", "env": "x"}]}),
    )]);
    assert_eq!(
        render_one(&input(&t, None, &hashes))
            .unwrap_err()
            .to_string(),
        "spec.agentSpec.workload.manifests[0].spec.template.spec.containers[0].env: must be a list"
    );
    // A Deployment without a pod template still renders (nothing to decorate).
    let t = template_of(vec![json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "ns"}})]);
    assert!(render_one(&input(&t, None, &hashes)).is_ok());
}

fn deployment_with_pod(pod: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "agent", "namespace": "ns"},
        "spec": {"template": {"spec": pod}},
    })
}

mod decorators;
mod hooks;
mod split;
mod variables;
