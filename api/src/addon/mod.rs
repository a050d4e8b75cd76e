//! Add-ons (OCM `addon.open-cluster-management.io/v1alpha1`): the rules hub, agent and CLI share.
//!
//! - [`validate`]: every problem of a ClusterManagementAddOn, ManagedClusterAddOn, AddOnTemplate
//!   or AddOnDeploymentConfig, each naming its field (the CRDs' rules).
//! - [`hash`]: OCM's spec hash of a config (sha256 of the spec as JSON with sorted keys).
//! - [`configs`]: the effective configs of one installed add-on (per cluster over per placement
//!   over the add-on's defaults, per group/resource).
//! - [`render`]: an AddOnTemplate with its variables and AddOnDeploymentConfig made into the
//!   ManifestWorks the cluster gets (one, or more when its manifests exceed one work's size).
//! - [`health`]: Available of an installed add-on from its lease or its work's status.
//! - [`manager`]: who manages an add-on (template or not, the `lifecycle` annotation).

pub mod configs;
pub mod hash;
pub mod health;
pub mod manager;
pub mod render;
pub mod validate;

/// API group of the add-on kinds.
pub const GROUP: &str = "addon.open-cluster-management.io";
/// apiVersion of the add-on kinds.
pub const ADDON_V1ALPHA1: &str = "addon.open-cluster-management.io/v1alpha1";
/// Resource of AddOnTemplates (as a config group/resource).
pub const TEMPLATES: &str = "addontemplates";
/// Resource of AddOnDeploymentConfigs (as a config group/resource).
pub const DEPLOYMENT_CONFIGS: &str = "addondeploymentconfigs";
/// Install namespace when neither the ManagedClusterAddOn nor its config names one.
pub const DEFAULT_INSTALL_NAMESPACE: &str = "open-cluster-management-agent-addon";

/// Annotation on a ClusterManagementAddOn saying who installs and upgrades it (OCM's
/// `AddonLifecycleAnnotationKey`): [`LIFECYCLE_ADDON_MANAGER`] (the default in Flotilla) or
/// [`LIFECYCLE_SELF`].
pub const LIFECYCLE_ANNOTATION: &str = "addon.open-cluster-management.io/lifecycle";
/// [`LIFECYCLE_ANNOTATION`]: the general add-on manager (the hub) installs the add-on where its
/// install strategy says.
pub const LIFECYCLE_ADDON_MANAGER: &str = "addon-manager";
/// [`LIFECYCLE_ANNOTATION`]: the add-on's own manager decides where it is installed; the hub
/// creates no ManagedClusterAddOn from the install strategy.
pub const LIFECYCLE_SELF: &str = "self";
/// The values [`LIFECYCLE_ANNOTATION`] may take.
pub const LIFECYCLES: [&str; 2] = [LIFECYCLE_ADDON_MANAGER, LIFECYCLE_SELF];

/// Label on an add-on's works naming the add-on.
pub const ADDON_NAME_LABEL: &str = "open-cluster-management.io/addon-name";
/// Annotation on an add-on's work: the spec hashes of the configs it was rendered from (a JSON
/// object `{"<resource>.<group>/<namespace>/<name>": "<hash>"}`).
pub const CONFIG_SPEC_HASH_ANNOTATION: &str = "open-cluster-management.io/config-spec-hash";
/// Annotation on a manifest of a template: keep the resource when the add-on is removed.
pub const DELETION_ORPHAN_ANNOTATION: &str = "addon.open-cluster-management.io/deletion-orphan";
/// Annotation on a Job or Pod of a template: run it when the add-on is removed, in the work
/// [`pre_delete_work_name`], instead of installing it with the agent.
pub const PRE_DELETE_HOOK_ANNOTATION: &str = "addon.open-cluster-management.io/addon-pre-delete";
/// Label with the meaning of [`PRE_DELETE_HOOK_ANNOTATION`] (OCM's older spelling, still honoured).
pub const PRE_DELETE_HOOK_LABEL: &str = "open-cluster-management.io/addon-pre-delete";
/// Flotilla: annotation on an AddOnTemplate choosing its health check: `Lease` (the add-on agent
/// renews a lease over NATS), `WorkStatus` (default; OCM's WorkloadAvailability prober over the
/// work's feedback) or `Customized` (a feedback value named by [`HEALTH_PROBE_FIELD_ANNOTATION`]).
pub const HEALTH_CHECK_ANNOTATION: &str = "addon.flotilla.io/health-check";
/// Flotilla: with `Customized` health, the feedback value (of any manifest) that must be true.
pub const HEALTH_PROBE_FIELD_ANNOTATION: &str = "addon.flotilla.io/health-probe-field";

/// Flotilla: annotation on an add-on's work whose template asks for hub access
/// (`spec.registration`): the name of the Secret (in [`INSTALL_NAMESPACE_ANNOTATION`]'s namespace)
/// in which a secure-mode agent puts the add-on's NATS credentials
/// ([`hub_credentials_secret_name`]).
pub const HUB_CREDENTIALS_SECRET_ANNOTATION: &str = "addon.flotilla.io/hub-credentials-secret";
/// Flotilla: annotation on an add-on's work naming the add-on's install namespace.
pub const INSTALL_NAMESPACE_ANNOTATION: &str = "addon.flotilla.io/install-namespace";
/// Key of the add-on's hub credentials Secret holding the NATS credentials file.
pub const HUB_CREDENTIALS_KEY: &str = "nats.creds";

/// Labels and annotations only the hub puts on a work, on the works it renders for add-ons: a
/// secure-mode agent trusts [`HUB_CREDENTIALS_SECRET_ANNOTATION`] and
/// [`INSTALL_NAMESPACE_ANNOTATION`] (with [`ADDON_NAME_LABEL`]) to write an add-on's NATS
/// credentials into a Secret, and the hub tells an add-on's works by [`ADDON_NAME_LABEL`]. A work
/// applied through the API, or made from a user's template, carries none of them, as a label or
/// as an annotation ([`reserved_key_errors`]).
pub const RESERVED_WORK_KEYS: [&str; 3] = [
    HUB_CREDENTIALS_SECRET_ANNOTATION,
    INSTALL_NAMESPACE_ANNOTATION,
    ADDON_NAME_LABEL,
];

/// Every [`RESERVED_WORK_KEYS`] key on a user's work metadata, each as an error naming the
/// field (`metadata.annotations["addon.flotilla.io/hub-credentials-secret"] is reserved for works
/// the hub renders for add-ons`); empty when there is none.
pub fn reserved_key_errors(meta: &crate::v1::ObjectMeta) -> Vec<String> {
    let mut errors = Vec::new();
    for key in RESERVED_WORK_KEYS {
        for (field, map) in [("labels", &meta.labels), ("annotations", &meta.annotations)] {
            if map.contains_key(key) {
                errors.push(format!(
                    "metadata.{field}[{key:?}] is reserved for works the hub renders for add-ons"
                ));
            }
        }
    }
    errors
}

/// Name of the Secret holding an add-on's hub credentials on the spoke (`<addon>-hub-credentials`).
pub fn hub_credentials_secret_name(addon: &str) -> String {
    format!("{addon}-hub-credentials")
}

/// Condition types of a ManagedClusterAddOn (OCM's constants).
pub mod conditions {
    /// The add-on is healthy.
    pub const AVAILABLE: &str = "Available";
    /// The add-on agent reports itself degraded (from its work's Degraded condition).
    pub const DEGRADED: &str = "Degraded";
    /// Its configs are being rolled out to it.
    pub const PROGRESSING: &str = "Progressing";
    /// Its configs are resolved.
    pub const CONFIGURED: &str = "Configured";
    /// Its work is applied.
    pub const MANIFEST_APPLIED: &str = "ManifestApplied";
    /// Its hub credentials are issued (or it needs none).
    pub const REGISTRATION_APPLIED: &str = "RegistrationApplied";
    /// Its pre-delete hooks have run to completion (set while it is being removed).
    pub const HOOK_MANIFEST_COMPLETED: &str = "HookManifestCompleted";
}

/// Name of the `index`-th work of an add-on's agent (OCM's `addon-<name>-deploy-<index>`): the
/// rendered manifests go into `addon-<name>-deploy-0`, and into `-1`, `-2`, … when they are
/// more than one work may carry ([`crate::work::MAX_MANIFESTS_BYTES`]; [`render`]).
pub fn work_name(addon: &str, index: usize) -> String {
    format!("{}{index}", work_name_prefix(addon))
}

/// What the names of an add-on's agent works start with (OCM's `DeployWorkNamePrefix` and the
/// dash before the index).
pub fn work_name_prefix(addon: &str) -> String {
    format!("addon-{addon}-deploy-")
}

/// The index of `name` among add-on `addon`'s agent works ([`work_name`]); `None` for any other
/// work (another add-on's, its pre-delete hook work, a user's).
pub fn work_index(addon: &str, name: &str) -> Option<usize> {
    let digits = name.strip_prefix(&work_name_prefix(addon))?;
    let canonical = !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'));
    if canonical { digits.parse().ok() } else { None }
}

/// Work name of an add-on's pre-delete hooks (OCM's `addon-<name>-pre-delete`).
pub fn pre_delete_work_name(addon: &str) -> String {
    format!("addon-{addon}-pre-delete")
}

#[cfg(test)]
mod reserved_tests {
    use super::*;
    use crate::v1::ObjectMeta;

    #[test]
    fn agent_works_are_named_as_ocm_names_them_and_read_back() {
        assert_eq!(work_name("hello", 0), "addon-hello-deploy-0");
        assert_eq!(work_name("hello", 12), "addon-hello-deploy-12");
        assert_eq!(work_index("hello", "addon-hello-deploy-0"), Some(0));
        assert_eq!(work_index("hello", "addon-hello-deploy-12"), Some(12));
        for other in [
            "addon-hello-pre-delete",
            "addon-hello-deploy-",
            "addon-hello-deploy-01",
            "addon-hello-deploy-1x",
            "addon-hello2-deploy-0",
            "web",
        ] {
            assert_eq!(work_index("hello", other), None, "{other}");
        }
        // An add-on whose name extends another's never claims its works.
        assert_eq!(work_index("hello-deploy", "addon-hello-deploy-0"), None);
        assert_eq!(work_index("hello", "addon-hello-deploy-deploy-0"), None);
    }

    #[test]
    fn user_works_may_carry_no_key_the_agent_trusts_to_hand_out_add_on_credentials() {
        assert!(reserved_key_errors(&ObjectMeta::default()).is_empty());
        let ordinary = ObjectMeta {
            labels: [("app".to_string(), "web".to_string())].into(),
            annotations: [(HEALTH_CHECK_ANNOTATION.to_string(), "Lease".to_string())].into(),
            ..Default::default()
        };
        assert!(reserved_key_errors(&ordinary).is_empty());
        for key in RESERVED_WORK_KEYS {
            for field in ["labels", "annotations"] {
                let mut meta = ordinary.clone();
                let map = if field == "labels" {
                    &mut meta.labels
                } else {
                    &mut meta.annotations
                };
                map.insert(key.to_string(), "x".to_string());
                assert_eq!(
                    reserved_key_errors(&meta),
                    vec![format!(
                        "metadata.{field}[\"{key}\"] is reserved for works the hub renders for \
                         add-ons"
                    )]
                );
            }
        }
    }
}
