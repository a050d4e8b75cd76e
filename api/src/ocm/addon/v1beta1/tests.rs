//! OCM's v1beta1 ↔ v1alpha1 conversion rules, one test each, and v1beta1 documents that equal
//! their v1alpha1 twins.

use super::*;
use crate::ocm::{Document, parse_documents};

fn one(text: &str) -> Result<Document, String> {
    parse_documents(text).remove(0).map_err(|e| e.to_string())
}

fn cma(text: &str) -> v1::ClusterManagementAddOn {
    match one(text) {
        Ok(Document::ClusterManagementAddOn(x)) => x,
        other => panic!("not a ClusterManagementAddOn: {other:?}"),
    }
}

fn mca(text: &str) -> v1::ManagedClusterAddOn {
    match one(text) {
        Ok(Document::ManagedClusterAddOn(x)) => x,
        other => panic!("not a ManagedClusterAddOn: {other:?}"),
    }
}

const CMA_V1BETA1: &str = r#"
apiVersion: addon.open-cluster-management.io/v1beta1
kind: ClusterManagementAddOn
metadata:
  name: hello-template
  annotations:
    addon.open-cluster-management.io/lifecycle: addon-manager
spec:
  addOnMeta: {displayName: Hello, description: hello world}
  defaultConfigs:
    - group: addon.open-cluster-management.io
      resource: addontemplates
      name: hello-template-v1
    - group: addon.open-cluster-management.io
      resource: addondeploymentconfigs
      name: __reserved_no_default__
    - group: addon.open-cluster-management.io
      resource: addonhubconfigs
      namespace: open-cluster-management-hub
      name: global
  installStrategy:
    type: Placements
    placements:
      - namespace: default
        name: edge
        configs:
          - {group: addon.open-cluster-management.io, resource: addondeploymentconfigs, namespace: default, name: edge-config}
        rolloutStrategy: {type: Progressive, progressive: {maxConcurrency: 1}}
status:
  defaultConfigReferences:
    - group: addon.open-cluster-management.io
      resource: addontemplates
      desiredConfig: {name: hello-template-v1, specHash: abc}
"#;

/// The same add-on as OCM's v1alpha1 (its storage version) writes it.
const CMA_V1ALPHA1: &str = r#"
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: ClusterManagementAddOn
metadata:
  name: hello-template
  annotations:
    addon.open-cluster-management.io/lifecycle: addon-manager
spec:
  addOnMeta: {displayName: Hello, description: hello world}
  supportedConfigs:
    - group: addon.open-cluster-management.io
      resource: addontemplates
      defaultConfig: {name: hello-template-v1}
    - group: addon.open-cluster-management.io
      resource: addondeploymentconfigs
    - group: addon.open-cluster-management.io
      resource: addonhubconfigs
      defaultConfig: {namespace: open-cluster-management-hub, name: global}
  installStrategy:
    type: Placements
    placements:
      - namespace: default
        name: edge
        configs:
          - {group: addon.open-cluster-management.io, resource: addondeploymentconfigs, namespace: default, name: edge-config}
        rolloutStrategy: {type: Progressive, progressive: {maxConcurrency: 1}}
"#;

#[test]
fn default_configs_are_supported_configs_and_the_sentinel_is_no_default() {
    let beta = cma(CMA_V1BETA1);
    let supported = &beta.spec.as_ref().unwrap().supported_configs;
    assert_eq!(supported.len(), 3, "one per default config, in order");
    assert_eq!(supported[0].resource, "addontemplates");
    assert_eq!(
        supported[0].default_config.as_ref().unwrap().name,
        "hello-template-v1"
    );
    assert_eq!(supported[1].resource, "addondeploymentconfigs");
    assert_eq!(
        supported[1].default_config, None,
        "{RESERVED_NO_DEFAULT} is a supported config without a default"
    );
    let hub = supported[2].default_config.as_ref().unwrap();
    assert_eq!(
        (hub.namespace.as_str(), hub.name.as_str()),
        ("open-cluster-management-hub", "global")
    );
    assert_eq!(
        beta,
        cma(CMA_V1ALPHA1),
        "a v1beta1 document is its v1alpha1 twin"
    );
}

#[test]
fn the_sentinel_is_never_a_real_config_name() {
    // v1alpha1 has no sentinel: the name is refused as a name, as OCM's API would.
    let text = CMA_V1ALPHA1.replace(
        "resource: addonhubconfigs\n      defaultConfig: {namespace: open-cluster-management-hub, name: global}",
        "resource: addonhubconfigs\n      defaultConfig: {name: __reserved_no_default__}",
    );
    let errors = validate::cluster_management_addon(&cma(&text));
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("spec.supportedConfigs[2].defaultConfig.name: "),
        "{errors:?}"
    );
}

#[test]
fn a_default_config_needs_a_name_and_errors_name_the_v1beta1_field() {
    let e = one(&CMA_V1BETA1.replace("name: __reserved_no_default__", "name: \"\"")).unwrap_err();
    assert!(
        e.contains("spec.defaultConfigs[1].name: required (name \"__reserved_no_default__\""),
        "{e}"
    );
    let e = one(&CMA_V1BETA1.replace("name: hello-template-v1", "name: Hello_V1")).unwrap_err();
    assert!(e.contains("spec.defaultConfigs[0].name: "), "{e}");
    assert!(!e.contains("supportedConfigs"), "{e}");
    let e = one(&CMA_V1BETA1.replace("resource: addonhubconfigs", "resource: addontemplates"))
        .unwrap_err();
    assert!(
        e.contains("spec.defaultConfigs[2]: ") && e.contains("(also defaultConfigs[0])"),
        "{e}"
    );
    // v1alpha1's field name in a v1beta1 document: a hint, not just "unknown field".
    let e = one(&CMA_V1BETA1.replace("  defaultConfigs:\n", "  supportedConfigs:\n")).unwrap_err();
    assert!(
        e.contains(
            "spec.supportedConfigs: not a field of addon.open-cluster-management.io/v1beta1"
        ),
        "{e}"
    );
}

const MCA_V1BETA1: &str = r#"
apiVersion: addon.open-cluster-management.io/v1beta1
kind: ManagedClusterAddOn
metadata:
  name: hello-template
  namespace: cluster1
  annotations:
    addon.open-cluster-management.io/v1alpha1-install-namespace: hello-ns
    team: edge
spec:
  configs:
    - {group: addon.open-cluster-management.io, resource: addondeploymentconfigs, namespace: default, name: hello-config}
status:
  namespace: hello-ns
  registrations:
    - type: kubeClient
      kubeClient:
        subject: {user: "system:open-cluster-management:cluster:cluster1:addon:hello-template:agent:x"}
        driver: csr
    - type: customSigner
      customSigner:
        signerName: example.com/signer
        subject: {user: x, organizationUnits: [ou]}
"#;

const MCA_V1ALPHA1: &str = r#"
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: ManagedClusterAddOn
metadata:
  name: hello-template
  namespace: cluster1
  annotations: {team: edge}
spec:
  installNamespace: hello-ns
  configs:
    - {group: addon.open-cluster-management.io, resource: addondeploymentconfigs, namespace: default, name: hello-config}
"#;

#[test]
fn the_install_namespace_annotation_is_the_v1alpha1_install_namespace() {
    let beta = mca(MCA_V1BETA1);
    let spec = beta.spec.as_ref().unwrap();
    assert_eq!(spec.install_namespace, "hello-ns");
    let annotations = &beta.metadata.as_ref().unwrap().annotations;
    assert!(
        !annotations.contains_key(INSTALL_NAMESPACE_ANNOTATION),
        "the spec says it; the annotation is not stored"
    );
    assert_eq!(annotations["team"], "edge", "other annotations are kept");
    assert_eq!(
        beta,
        mca(MCA_V1ALPHA1),
        "a v1beta1 document is its v1alpha1 twin"
    );
    assert!(validate::managed_cluster_addon(&beta).is_empty());

    // Without the annotation: the add-on's default install namespace, as in v1alpha1.
    let without = MCA_V1BETA1.replace(
        "    addon.open-cluster-management.io/v1alpha1-install-namespace: hello-ns\n",
        "",
    );
    assert_eq!(mca(&without).spec.unwrap().install_namespace, "");
}

#[test]
fn a_bad_install_namespace_is_named_by_its_annotation() {
    let e = one(&MCA_V1BETA1.replace("install-namespace: hello-ns", "install-namespace: Hello_NS"))
        .unwrap_err();
    assert!(
        e.contains(
            "metadata.annotations[\"addon.open-cluster-management.io/v1alpha1-install-namespace\"]: "
        ),
        "{e}"
    );
    let e =
        one(&MCA_V1BETA1.replace("spec:\n", "spec:\n  installNamespace: hello-ns\n")).unwrap_err();
    assert!(
        e.contains(
            "spec.installNamespace: not a field of addon.open-cluster-management.io/v1beta1"
        ) && e.contains(INSTALL_NAMESPACE_ANNOTATION),
        "{e}"
    );
}

#[test]
fn typed_registrations_in_a_v1beta1_status_are_the_hubs_and_ignored() {
    // `kubectl get -o yaml` of a v1beta1 ManagedClusterAddOn prints typed registrations; the
    // status is the hub's, so it is read and dropped, as a v1alpha1 status is.
    let beta = mca(MCA_V1BETA1);
    assert_eq!(beta.status, None);
    // A malformed status does not make the document invalid either.
    let odd = MCA_V1BETA1.replace("- type: kubeClient", "- type: 42");
    assert_eq!(mca(&odd), beta);
}

#[test]
fn a_v1beta1_deployment_config_is_its_v1alpha1_twin() {
    let alpha = r#"
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: AddOnDeploymentConfig
metadata: {name: hello-config, namespace: default}
spec:
  agentInstallNamespace: hello-ns
  customizedVariables: [{name: LOG_LEVEL, value: "4"}]
  nodePlacement: {nodeSelector: {host: ssd}}
  registries: [{source: quay.io/open-cluster-management, mirror: quay.io/ocm}]
"#;
    let beta = alpha.replace("/v1alpha1", "/v1beta1");
    let (Ok(Document::AddOnDeploymentConfig(a)), Ok(Document::AddOnDeploymentConfig(b))) =
        (one(alpha), one(&beta))
    else {
        panic!("not AddOnDeploymentConfigs")
    };
    assert_eq!(a, b);
}
