use super::*;
use crate::addon::{DEPLOYMENT_CONFIGS, GROUP, TEMPLATES};
use crate::v1::{
    AddOnConfig, ClusterManagementAddOn, ClusterManagementAddOnSpec, ConfigMeta, ConfigReferent,
    InstallStrategy, ManagedClusterAddOn, ManagedClusterAddOnSpec, PlacementStrategy,
};

fn cfg(resource: &str, namespace: &str, name: &str) -> AddOnConfig {
    AddOnConfig {
        group: GROUP.into(),
        resource: resource.into(),
        namespace: namespace.into(),
        name: name.into(),
    }
}

/// The CMA of OCM's `test/e2e/manifests/addon/cluster_management_addon.yaml` (a template default,
/// ADCs without default) plus two placements.
fn cma(placements: Vec<PlacementStrategy>) -> ClusterManagementAddOn {
    ClusterManagementAddOn {
        spec: Some(ClusterManagementAddOnSpec {
            supported_configs: vec![
                ConfigMeta {
                    group: GROUP.into(),
                    resource: TEMPLATES.into(),
                    default_config: Some(ConfigReferent {
                        namespace: String::new(),
                        name: "hello-template".into(),
                    }),
                },
                ConfigMeta {
                    group: GROUP.into(),
                    resource: DEPLOYMENT_CONFIGS.into(),
                    default_config: None,
                },
            ],
            install_strategy: Some(InstallStrategy {
                r#type: "Placements".into(),
                placements,
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn placement(name: &str, configs: Vec<AddOnConfig>) -> PlacementStrategy {
    PlacementStrategy {
        namespace: "default".into(),
        name: name.into(),
        configs,
        rollout_strategy: None,
    }
}

fn mca(configs: Vec<AddOnConfig>) -> ManagedClusterAddOn {
    ManagedClusterAddOn {
        spec: Some(ManagedClusterAddOnSpec {
            install_namespace: String::new(),
            configs,
        }),
        ..Default::default()
    }
}

#[test]
fn defaults_alone() {
    let c = cma(vec![]);
    assert_eq!(
        effective(&c, None, &mca(vec![])).unwrap(),
        vec![cfg(TEMPLATES, "", "hello-template")]
    );
    // An MCA without spec at all is the same.
    assert_eq!(
        effective(&c, None, &ManagedClusterAddOn::default()).unwrap(),
        vec![cfg(TEMPLATES, "", "hello-template")]
    );
}

#[test]
fn reserved_and_empty_default_names_are_no_default() {
    let mut c = cma(vec![]);
    let sc = &mut c.spec.as_mut().unwrap().supported_configs;
    sc[0].default_config.as_mut().unwrap().name = RESERVED_NO_DEFAULT.into();
    sc[1].default_config = Some(ConfigReferent::default());
    assert_eq!(effective(&c, None, &mca(vec![])).unwrap(), vec![]);
}

#[test]
fn a_placement_overrides_one_group_resource_and_keeps_the_others() {
    let c = cma(vec![placement(
        "edge",
        vec![cfg(DEPLOYMENT_CONFIGS, "default", "edge-config")],
    )]);
    let p = &c
        .spec
        .as_ref()
        .unwrap()
        .install_strategy
        .as_ref()
        .unwrap()
        .placements[0];
    assert_eq!(
        effective(&c, Some(p), &mca(vec![])).unwrap(),
        vec![
            cfg(DEPLOYMENT_CONFIGS, "default", "edge-config"),
            cfg(TEMPLATES, "", "hello-template"),
        ]
    );
}

#[test]
fn the_cluster_overrides_the_placement_per_group_resource() {
    let c = cma(vec![placement(
        "edge",
        vec![
            cfg(DEPLOYMENT_CONFIGS, "default", "edge-config"),
            cfg(TEMPLATES, "", "template-v2"),
        ],
    )]);
    let p = &c
        .spec
        .as_ref()
        .unwrap()
        .install_strategy
        .as_ref()
        .unwrap()
        .placements[0];
    let m = mca(vec![cfg(DEPLOYMENT_CONFIGS, "cluster1", "mine")]);
    assert_eq!(
        effective(&c, Some(p), &m).unwrap(),
        vec![
            cfg(DEPLOYMENT_CONFIGS, "cluster1", "mine"),
            cfg(TEMPLATES, "", "template-v2"),
        ]
    );
}

#[test]
fn several_configs_of_one_group_resource_are_a_list_replaced_whole() {
    let c = cma(vec![placement(
        "edge",
        vec![
            cfg(DEPLOYMENT_CONFIGS, "default", "b"),
            cfg(DEPLOYMENT_CONFIGS, "default", "a"),
            cfg(DEPLOYMENT_CONFIGS, "default", "b"),
        ],
    )]);
    let p = &c
        .spec
        .as_ref()
        .unwrap()
        .install_strategy
        .as_ref()
        .unwrap()
        .placements[0];
    let got = effective(&c, Some(p), &mca(vec![])).unwrap();
    // Kept in the given order (OCM renders with the first), the repeated one once.
    assert_eq!(
        got,
        vec![
            cfg(DEPLOYMENT_CONFIGS, "default", "b"),
            cfg(DEPLOYMENT_CONFIGS, "default", "a"),
            cfg(TEMPLATES, "", "hello-template"),
        ]
    );
    assert_eq!(
        first(&got, GROUP, DEPLOYMENT_CONFIGS).map(|c| c.name.as_str()),
        Some("b")
    );
    // The cluster's single config replaces the placement's two.
    let m = mca(vec![cfg(DEPLOYMENT_CONFIGS, "x", "only")]);
    assert_eq!(
        effective(&c, Some(p), &m).unwrap(),
        vec![
            cfg(DEPLOYMENT_CONFIGS, "x", "only"),
            cfg(TEMPLATES, "", "hello-template"),
        ]
    );
}

#[test]
fn the_placement_passed_is_the_one_used() {
    // The caller picks the last placement that decides the cluster; the rules take it as given.
    let c = cma(vec![
        placement("first", vec![cfg(DEPLOYMENT_CONFIGS, "default", "one")]),
        placement("second", vec![cfg(DEPLOYMENT_CONFIGS, "default", "two")]),
    ]);
    let ps = &c
        .spec
        .as_ref()
        .unwrap()
        .install_strategy
        .as_ref()
        .unwrap()
        .placements;
    let got = effective(&c, Some(&ps[1]), &mca(vec![])).unwrap();
    assert_eq!(got[0].name, "two");
    let got = effective(&c, Some(&ps[0]), &mca(vec![])).unwrap();
    assert_eq!(got[0].name, "one");
}

#[test]
fn unsupported_group_resources_name_their_fields() {
    let c = cma(vec![
        placement("first", vec![]),
        placement(
            "edge",
            vec![
                cfg(DEPLOYMENT_CONFIGS, "default", "ok"),
                cfg(DEPLOYMENT_CONFIGS, "default", "ok2"),
                cfg("foos", "default", "bad"),
            ],
        ),
    ]);
    // A copy of the placement (not a reference into the CMA) is found by namespace/name.
    let p = placement(
        "edge",
        c.spec
            .as_ref()
            .unwrap()
            .install_strategy
            .as_ref()
            .unwrap()
            .placements[1]
            .configs
            .clone(),
    );
    let m = mca(vec![
        cfg(TEMPLATES, "", "t"),
        AddOnConfig {
            group: String::new(),
            resource: "configmaps".into(),
            namespace: "default".into(),
            name: "c".into(),
        },
    ]);
    let errors = effective(&c, Some(&p), &m).unwrap_err();
    assert_eq!(errors.len(), 2, "{errors:#?}");
    assert!(
        errors[0].starts_with(
            "spec.installStrategy.placements[1].configs[2]: group/resource \
             addon.open-cluster-management.io/foos is not among the add-on's supportedConfigs"
        ),
        "{errors:#?}"
    );
    assert!(
        errors[1].starts_with(
            "spec.configs[1]: group/resource /configmaps is not among the add-on's supportedConfigs"
        ),
        "{errors:#?}"
    );
    assert!(errors[1].contains("supported: addon.open-cluster-management.io/addontemplates"));
    // A placement the add-on does not list is named by namespace/name.
    let stray = placement("stray", vec![cfg("foos", "", "x")]);
    let errors = effective(&c, Some(&stray), &mca(vec![])).unwrap_err();
    assert!(errors[0].starts_with("spec.installStrategy.placements[default/stray].configs[0]: "));
}

#[test]
fn supported_checks_group_and_resource() {
    let c = cma(vec![]);
    assert!(supported(&c, GROUP, TEMPLATES));
    assert!(supported(&c, GROUP, DEPLOYMENT_CONFIGS));
    assert!(!supported(&c, "", DEPLOYMENT_CONFIGS));
    assert!(!supported(&c, GROUP, "foos"));
    assert!(!supported(
        &ClusterManagementAddOn::default(),
        GROUP,
        TEMPLATES
    ));
}
