//! Variables: their precedence, the install namespace, substitution and its errors.

use super::*;

#[test]
fn an_unknown_variable_names_the_manifest_and_the_variable() {
    // OCM's deployment template uses LOG_LEVEL, an AddOnDeploymentConfig variable.
    let t = template_from_yaml(DEPLOYMENT_TEMPLATE);
    let hashes = no_hashes();
    let err = render_one(&input(&t, None, &hashes)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "spec.agentSpec.workload.manifests[0]: unknown variable {{LOG_LEVEL}} \
         (defined: CLUSTER_NAME, HUB_KUBECONFIG, INSTALL_NAMESPACE)"
    );
    let mut i = input(&t, None, &hashes);
    i.hub_url = "nats://hub:4222";
    assert!(
        render_one(&i)
            .unwrap_err()
            .to_string()
            .ends_with("(defined: CLUSTER_NAME, HUB_KUBECONFIG, HUB_URL, INSTALL_NAMESPACE)")
    );
    // Tags are taken verbatim, spaces included.
    let t = template_of(vec![json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "ns"},
        "data": {"a": "x", "b": "{{ CLUSTER_NAME }}"},
    })]);
    assert_eq!(
        render_one(&input(&t, None, &hashes)).unwrap_err(),
        RenderError::UnknownVariable {
            manifest: 0,
            variable: " CLUSTER_NAME ".into(),
            defined: vec!["CLUSTER_NAME".into(), "INSTALL_NAMESPACE".into()],
        }
    );
}

#[test]
fn variables_follow_ocms_precedence() {
    let mut t = template_from_yaml(DEPLOYMENT_TEMPLATE);
    let config = adc(AddOnDeploymentConfigSpec {
        customized_variables: vec![
            CustomizedVariable {
                name: "CLUSTER_NAME".into(),
                value: "spoofed".into(),
            },
            CustomizedVariable {
                name: "HUB_KUBECONFIG".into(),
                value: "/custom".into(),
            },
            CustomizedVariable {
                name: "LOG_LEVEL".into(),
                value: "2".into(),
            },
        ],
        ..Default::default()
    });
    let hashes = no_hashes();
    let mut i = input(&t, Some(&config), &hashes);
    i.hub_url = "nats://hub:4222";
    let vars = variables(&i);
    assert_eq!(
        vars,
        BTreeMap::from(
            [
                ("CLUSTER_NAME", "cluster1"),
                ("HUB_KUBECONFIG", "/custom"),
                ("HUB_URL", "nats://hub:4222"),
                // No override: the template's Deployment namespace.
                ("INSTALL_NAMESPACE", "open-cluster-management-agent-addon"),
                ("LOG_LEVEL", "2"),
            ]
            .map(|(a, b)| (a.to_string(), b.to_string()))
        )
    );
    let work = render_one(&i).unwrap();
    // Preset env vars: the default first, then the built-ins sorted, with their final values.
    assert_eq!(
        env_of(&objects(&work)[0]),
        pairs(&[
            ("LOG_LEVEL", "2"),
            ("HUB_KUBECONFIG", "/custom"),
            ("CLUSTER_NAME", "cluster1"),
            ("HUB_URL", "nats://hub:4222"),
            ("INSTALL_NAMESPACE", "open-cluster-management-agent-addon"),
        ])
    );
    // Without registration there is no HUB_KUBECONFIG default.
    t.spec.as_mut().unwrap().registration.clear();
    let i = input(&t, None, &hashes);
    assert_eq!(
        variables(&i).keys().collect::<Vec<_>>(),
        ["CLUSTER_NAME", "INSTALL_NAMESPACE"]
    );
}

#[test]
fn install_namespace_precedence() {
    let deployment = |ns: &str| json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": ns}});
    let daemonset = |ns: &str| json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds", "namespace": ns}});
    let hashes = no_hashes();
    let t = template_of(vec![
        daemonset("ds-ns"),
        deployment("{{INSTALL_NAMESPACE}}"),
        deployment("d-ns"),
    ]);
    let config = adc(AddOnDeploymentConfigSpec {
        agent_install_namespace: "adc-ns".into(),
        ..Default::default()
    });
    let empty_config = adc(AddOnDeploymentConfigSpec::default());
    let mut i = input(&t, Some(&config), &hashes);
    i.install_namespace = "mca-ns";
    assert_eq!(install_namespace(&i), "adc-ns");
    i.config = Some(&empty_config);
    assert_eq!(install_namespace(&i), "mca-ns");
    i.install_namespace = "";
    // The first Deployment with a literal namespace wins over an earlier DaemonSet.
    assert_eq!(install_namespace(&i), "d-ns");
    let t2 = template_of(vec![daemonset("ds-ns"), daemonset("other")]);
    assert_eq!(install_namespace(&input(&t2, None, &hashes)), "ds-ns");
    let t3 = template_of(vec![
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}),
    ]);
    assert_eq!(
        install_namespace(&input(&t3, None, &hashes)),
        DEFAULT_INSTALL_NAMESPACE
    );
    // A template written with {{INSTALL_NAMESPACE}} lands in the install namespace.
    let t4 = template_of(vec![deployment("{{INSTALL_NAMESPACE}}")]);
    let work = render_one(&input(&t4, None, &hashes)).unwrap();
    assert_eq!(
        objects(&work)[0]["metadata"]["namespace"],
        DEFAULT_INSTALL_NAMESPACE
    );
}

#[test]
fn daemonset_template_stays_in_its_namespace_unless_one_is_named() {
    let t = template_from_yaml(DAEMONSET_TEMPLATE);
    let config = adc(AddOnDeploymentConfigSpec {
        customized_variables: vec![CustomizedVariable {
            name: "LOG_LEVEL".into(),
            value: "4".into(),
        }],
        ..Default::default()
    });
    let hashes = no_hashes();
    let work = render_one(&input(&t, Some(&config), &hashes)).unwrap();
    let objs = objects(&work);
    assert_eq!(
        objs[0]["metadata"]["namespace"],
        "open-cluster-management-agent-addon-ds"
    );
    assert_eq!(
        env_of(&objs[0]).last().unwrap(),
        &(
            "INSTALL_NAMESPACE".to_string(),
            "open-cluster-management-agent-addon-ds".to_string()
        )
    );
    // The ManagedClusterAddOn's installNamespace moves every namespaced object (Flotilla).
    let mut i = input(&t, Some(&config), &hashes);
    i.install_namespace = "addons";
    let objs = objects(&render_one(&i).unwrap());
    assert_eq!(objs[0]["metadata"]["namespace"], "addons");
    assert_eq!(objs[1]["metadata"]["namespace"], "addons");
    assert_eq!(objs[2]["subjects"][0]["namespace"], "addons");
    let health = render_one(&i).unwrap().spec.unwrap().manifest_configs;
    assert_eq!(
        health[0].resource_identifier.as_ref().unwrap().namespace,
        "addons"
    );
}

#[test]
fn values_inside_strings_are_escaped_and_outside_pasted() {
    let t = raw_template_of(&[
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"ns"},"data":{"msg":"say {{GREETING}} to {{CLUSTER_NAME}}","n":{{COUNT}},"esc":"a\"{{CLUSTER_NAME}}"}}"#,
    ]);
    let config = adc(AddOnDeploymentConfigSpec {
        customized_variables: vec![
            CustomizedVariable {
                name: "GREETING".into(),
                value: "\"hi\" \\ <there>\n".into(),
            },
            CustomizedVariable {
                name: "COUNT".into(),
                value: "3".into(),
            },
        ],
        ..Default::default()
    });
    let hashes = no_hashes();
    let work = render_one(&input(&t, Some(&config), &hashes)).unwrap();
    let obj = &objects(&work)[0];
    assert_eq!(obj["data"]["msg"], "say \"hi\" \\ <there>\n to cluster1");
    assert_eq!(obj["data"]["n"], 3);
    assert_eq!(obj["data"]["esc"], "a\"cluster1");

    // A value that breaks the JSON outside a string is an error naming the manifest.
    let config = adc(AddOnDeploymentConfigSpec {
        customized_variables: vec![
            CustomizedVariable {
                name: "GREETING".into(),
                value: "x".into(),
            },
            CustomizedVariable {
                name: "COUNT".into(),
                value: "three".into(),
            },
        ],
        ..Default::default()
    });
    let err = render_one(&input(&t, Some(&config), &hashes)).unwrap_err();
    assert!(
        matches!(err, RenderError::InvalidJson { manifest: 0, .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().starts_with(
            "spec.agentSpec.workload.manifests[0]: not valid JSON after substituting variables: "
        ),
        "{err}"
    );

    let t = raw_template_of(&[
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns"}}"#,
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b {{CLUSTER_NAME"} }"#,
    ]);
    let err = render_one(&input(&t, None, &hashes)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "spec.agentSpec.workload.manifests[1]: \"{{\" at byte 60 has no closing \"}}\""
    );
}
