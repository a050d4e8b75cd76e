//! The AddOnDeploymentConfig decorators: namespace, node placement, images, proxy, resources.

use super::*;

#[test]
fn the_namespace_decorator_follows_ocm() {
    let t = template_of(vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "old"}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "rb", "namespace": "old"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
               "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "old"},
                            {"kind": "User", "name": "u", "apiGroup": "rbac.authorization.k8s.io"}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "empty", "namespace": "old"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}}),
        // No namespace written: left alone (OCM assumes cluster-scoped).
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}),
    ]);
    let hashes = no_hashes();
    let mut i = input(&t, None, &hashes);
    i.install_namespace = "new";
    let objs = objects(&render_one(&i).unwrap());
    assert_eq!(objs[0]["metadata"]["name"], "new");
    assert_eq!(objs[1]["metadata"]["namespace"], "new");
    assert_eq!(objs[1]["subjects"][0]["namespace"], "new");
    assert_eq!(objs[1]["subjects"][1]["namespace"], "new");
    assert!(objs[2].get("subjects").is_none());
    assert!(objs[3]["metadata"].get("namespace").is_none());
    // No override: nothing moves.
    let objs = objects(&render_one(&input(&t, None, &hashes)).unwrap());
    assert_eq!(objs[0]["metadata"]["name"], "old");
    assert_eq!(objs[1]["subjects"][0]["namespace"], "old");
}

#[test]
fn node_placement_keeps_ocms_quirk() {
    let t = template_of(vec![deployment_with_pod(json!({
        "nodeSelector": {"old": "x"},
        "tolerations": [{"key": "old", "operator": "Exists"}],
        "containers": [{"name": "c", "image": "img"}],
    }))]);
    let hashes = no_hashes();
    let pod_of = |config: &AddOnDeploymentConfig| {
        objects(&render_one(&input(&t, Some(config), &hashes)).unwrap())[0]["spec"]["template"]["spec"]
            .clone()
    };
    // Tolerations alone are ignored: OCM sets them only with a nodeSelector.
    let only_tolerations = adc(AddOnDeploymentConfigSpec {
        node_placement: Some(NodePlacement {
            tolerations: vec![Toleration {
                key: "new".into(),
                operator: "Exists".into(),
                toleration_seconds: Some(30),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    });
    let pod = pod_of(&only_tolerations);
    assert_eq!(pod["nodeSelector"], json!({"old": "x"}));
    assert_eq!(
        pod["tolerations"],
        json!([{"key": "old", "operator": "Exists"}])
    );
    // An empty nodeSelector that was given replaces both (Go drops the empty fields).
    let mut cleared = only_tolerations.clone();
    cleared
        .spec
        .as_mut()
        .unwrap()
        .node_placement
        .as_mut()
        .unwrap()
        .has_node_selector = true;
    let pod = pod_of(&cleared);
    assert!(pod.get("nodeSelector").is_none());
    assert_eq!(
        pod["tolerations"],
        json!([{"key": "new", "operator": "Exists", "tolerationSeconds": 30}])
    );
}

#[test]
fn images_follow_ocms_override_rules() {
    let m = |source: &str, mirror: &str| ImageMirror {
        source: source.into(),
        mirror: mirror.into(),
    };
    let image = "quay.io/open-cluster-management/addon-examples:v1";
    assert_eq!(
        override_image(
            &[m("quay.io/open-cluster-management", "quay.io/ocm")],
            image
        ),
        "quay.io/ocm/addon-examples:v1"
    );
    assert_eq!(
        override_image(
            &[m("quay.io/open-cluster-management/", "quay.io/ocm/")],
            image
        ),
        "quay.io/ocm/addon-examples:v1"
    );
    assert_eq!(override_image(&[m("docker.io", "mirror.io")], image), image);
    // Every match is tried on the original image; the last one wins.
    assert_eq!(
        override_image(
            &[
                m("quay.io", "a.io"),
                m("quay.io/open-cluster-management", "b.io/x"),
                m("gcr.io", "c.io")
            ],
            image
        ),
        "b.io/x/addon-examples:v1"
    );
    // An empty source puts the image's last segment under the mirror.
    assert_eq!(
        override_image(&[m("", "mirror.io/all")], image),
        "mirror.io/all/addon-examples:v1"
    );
    assert_eq!(override_image(&[m("", "")], image), "addon-examples:v1");
    assert_eq!(override_image(&[], image), image);
}

#[test]
fn resource_requirements_match_container_ids_last_wins() {
    let t = template_of(vec![
        deployment_with_pod(json!({
            "initContainers": [{"name": "init", "image": "quay.io/x/init"}],
            "containers": [{"name": "main", "image": "quay.io/x/main"}, {"name": "side", "image": "quay.io/x/side"}],
        })),
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
               "metadata": {"name": "agent", "namespace": "ns"},
               "spec": {"template": {"spec": {"containers": [{"name": "main", "image": "quay.io/x/main"}]}}}}),
    ]);
    let req = |id: &str, cpu: &str| ContainerResourceRequirements {
        container_id: id.into(),
        resources: Some(ResourceRequirements {
            requests: HashMap::from([("cpu".to_string(), cpu.to_string())]),
            limits: HashMap::new(),
        }),
    };
    let config = adc(AddOnDeploymentConfigSpec {
        resource_requirements: vec![
            req("*:*:*", "1"),
            req("deployments:agent:main", "2"),
            req("statefulsets:*:*", "3"),
            req("daemonsets:*:*", "4"),
        ],
        registries: vec![ImageMirror {
            source: "quay.io/x".into(),
            mirror: "mirror.io/y".into(),
        }],
        ..Default::default()
    });
    let hashes = no_hashes();
    let objs = objects(&render_one(&input(&t, Some(&config), &hashes)).unwrap());
    let pod = &objs[0]["spec"]["template"]["spec"];
    assert_eq!(
        pod["containers"][0]["resources"],
        json!({"requests": {"cpu": "2"}})
    );
    assert_eq!(
        pod["containers"][1]["resources"],
        json!({"requests": {"cpu": "1"}})
    );
    assert_eq!(pod["containers"][1]["image"], "mirror.io/y/side");
    // Init containers are not decorated (OCM decorates containers only).
    assert_eq!(
        pod["initContainers"][0],
        json!({"name": "init", "image": "quay.io/x/init"})
    );
    // Only Deployments and DaemonSets are decorated.
    assert_eq!(
        objs[1]["spec"]["template"]["spec"]["containers"][0],
        json!({"name": "main", "image": "quay.io/x/main"})
    );

    let bad = adc(AddOnDeploymentConfigSpec {
        resource_requirements: vec![req("*:*:*", "1"), req("deployments:agent", "2")],
        ..Default::default()
    });
    assert_eq!(
        render_one(&input(&t, Some(&bad), &hashes))
            .unwrap_err()
            .to_string(),
        "AddOnDeploymentConfig default/hello-config spec.resourceRequirements[1].containerID: \
         \"deployments:agent\" is not <kind>:<name>:<container>"
    );
}

#[test]
fn proxy_settings_add_env_a_ca_volume_and_a_config_map() {
    let t = template_from_yaml(TEMPLATE);
    let mut spec = ocm_config();
    spec.proxy_config = Some(ProxyConfig {
        http_proxy: "http://proxy.example.com:8080".into(),
        https_proxy: "http://proxy.example.com:8080".into(),
        no_proxy: "localhost".into(),
        ca_bundle: b"fake-ca-bundle".to_vec(),
    });
    let config = adc(spec);
    let hashes = no_hashes();
    let work = render_one(&input(&t, Some(&config), &hashes)).unwrap();
    let objs = objects(&work);
    assert_eq!(objs.len(), 5);
    for workload in &objs[..2] {
        assert_eq!(
            env_of(workload),
            pairs(&[
                ("LOG_LEVEL", "4"),
                ("HUB_KUBECONFIG", "/managed/hub-kubeconfig/kubeconfig"),
                ("CLUSTER_NAME", "cluster1"),
                ("INSTALL_NAMESPACE", "test-install-namespace"),
                ("HTTP_PROXY", "http://proxy.example.com:8080"),
                ("http_proxy", "http://proxy.example.com:8080"),
                ("HTTPS_PROXY", "http://proxy.example.com:8080"),
                ("https_proxy", "http://proxy.example.com:8080"),
                ("NO_PROXY", "localhost"),
                ("no_proxy", "localhost"),
                ("CA_BUNDLE_FILE_PATH", "/managed/proxy-ca/ca-bundle.crt"),
            ])
        );
        let pod = &workload["spec"]["template"]["spec"];
        assert_eq!(
            pod["volumes"],
            json!([{"name": "proxy-ca-bundle", "configMap": {"name": "hello-template-proxy-ca"}}])
        );
        assert_eq!(
            pod["containers"][0]["volumeMounts"],
            json!([{"name": "proxy-ca-bundle", "mountPath": "/managed/proxy-ca"}])
        );
    }
    assert_eq!(
        objs[4],
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "hello-template-proxy-ca", "namespace": "test-install-namespace"},
            "data": {"ca-bundle.crt": "fake-ca-bundle"},
        })
    );
    // No annotation without configs (as OCM).
    assert!(work.metadata.as_ref().unwrap().annotations.is_empty());
}
