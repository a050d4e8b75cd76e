//! Validation of the four add-on kinds, mirroring OCM's CRDs (`addon/v1alpha1/0000_0*.crd.yaml`
//! of open-cluster-management-io/api): enums, patterns, lengths, required fields and list keys.
//! Every function returns every problem, each naming its field
//! (`spec.installStrategy.type: "Foo" is not one of Manual, Placements`).
//!
//! Beyond the CRDs:
//! - names are checked as Kubernetes would check the objects they name; an add-on's name is a
//!   DNS-1123 *label* (no dots), since it is a token of NATS subjects
//!   (`flotilla.addon.<addon>.<cluster>`);
//! - an AddOnTemplate's agent spec must make a valid ManifestWork ([`crate::work::validate`]);
//! - tolerations and resource quantities follow Kubernetes' own rules for pods;
//! - a ClusterManagementAddOn's `addon.open-cluster-management.io/lifecycle` annotation is
//!   `addon-manager` or `self` (OCM reads annotations without checking them, so a typo there
//!   would silently hand the add-on to the other manager).
//!
//! A rollout strategy's settings (`maxConcurrency`, `progressDeadline`, …) are the hub's to check
//! (with the rollout parser); here only its type is.

use crate::names::{self, NameError};
use crate::v1;
use std::collections::HashMap;

/// Install strategy types.
pub const INSTALL_STRATEGIES: [&str; 2] = ["Manual", "Placements"];
/// Rollout strategy types.
pub const ROLLOUT_TYPES: [&str; 3] = ["All", "Progressive", "ProgressivePerGroup"];
/// Registration types of a template.
pub const REGISTRATION_TYPES: [&str; 2] = ["KubeClient", "CustomSigner"];
/// Hub permission binding types.
pub const HUB_PERMISSION_TYPES: [&str; 2] = ["CurrentCluster", "SingleNamespace"];
/// Health check modes of a ManagedClusterAddOn.
pub const HEALTH_CHECK_MODES: [&str; 2] = ["Lease", "Customized"];
/// Workload kinds a `containerID` may name (or `*`).
pub const CONTAINER_KINDS: [&str; 8] = [
    "deployments",
    "daemonsets",
    "statefulsets",
    "replicasets",
    "jobs",
    "cronjobs",
    "pods",
    "*",
];
/// Toleration operators (Kubernetes).
pub const TOLERATION_OPERATORS: [&str; 2] = ["Equal", "Exists"];
/// Taint effects (Kubernetes).
pub const TAINT_EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];
/// Longest customized variable name.
pub const MAX_VARIABLE_NAME: usize = 255;
/// Longest customized variable value.
pub const MAX_VARIABLE_VALUE: usize = 1024;

fn not_one_of(field: &str, value: &str, allowed: &[&str]) -> String {
    format!("{field}: {value:?} is not one of {}", allowed.join(", "))
}

fn push_name(errors: &mut Vec<String>, r: Result<(), NameError>) {
    if let Err(e) = r {
        errors.push(e.to_string());
    }
}

/// An add-on's name (a ClusterManagementAddOn's or ManagedClusterAddOn's `metadata.name`, a
/// template's `spec.addonName`): a DNS-1123 label, as it is a NATS subject token.
pub fn addon_name(field: &str, name: &str) -> Result<(), NameError> {
    names::validate_dns1123_label(field, name).map_err(|e| NameError {
        reason: format!(
            "{} (an add-on's name is a token of NATS subjects)",
            e.reason
        ),
        ..e
    })
}

/// A signer name (`example.com/signer-name`): 5–571 characters matching
/// `^([a-z0-9][a-z0-9-]*[a-z0-9]\.)+[a-z]+\/[a-z0-9-\.]+$`.
pub fn signer_name(field: &str, name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err(format!("{field}: required"));
    }
    if name.len() < 5 || name.len() > 571 {
        return Err(format!(
            "{field}: {name:?} is {} characters long; a signer name has 5 to 571",
            name.len()
        ));
    }
    let bad = || {
        Err(format!(
            "{field}: {name:?} is not a signer name like example.com/signer-name (a domain of \
             lower-case letters, digits and '-', then '/' and lower-case letters, digits, '-' or \
             '.')"
        ))
    };
    let Some((domain, path)) = name.split_once('/') else {
        return bad();
    };
    let path_ok = !path.is_empty()
        && path
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
    let labels: Vec<&str> = domain.split('.').collect();
    let (tld, rest) = labels.split_last().expect("split yields one part at least");
    let tld_ok = !tld.is_empty() && tld.chars().all(|c| c.is_ascii_lowercase());
    let label_ok = |l: &&str| {
        l.len() >= 2
            && l.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if path_ok && tld_ok && !rest.is_empty() && rest.iter().all(label_ok) {
        Ok(())
    } else {
        bad()
    }
}

/// A customized variable's name: `^[a-zA-Z_][_a-zA-Z0-9]*$`, at most 255 characters.
pub fn variable_name(field: &str, name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err(format!("{field}: required"));
    }
    if name.len() > MAX_VARIABLE_NAME {
        return Err(format!(
            "{field}: {} characters long, at most {MAX_VARIABLE_NAME} allowed",
            name.len()
        ));
    }
    let first_ok = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if first_ok && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        Ok(())
    } else {
        Err(format!(
            "{field}: {name:?} is not a variable name (letters, digits and '_', not starting \
             with a digit)"
        ))
    }
}

/// A container ID: `<kind>:<name>:<container>`
/// (`^(deployments|daemonsets|statefulsets|replicasets|jobs|cronjobs|pods|\*):.+:.+$`).
pub fn container_id(field: &str, id: &str) -> Result<(), String> {
    if id.is_empty() {
        return Err(format!("{field}: required"));
    }
    let ok = !id.contains('\n')
        && id.split_once(':').is_some_and(|(kind, rest)| {
            CONTAINER_KINDS.contains(&kind)
                && rest
                    .char_indices()
                    .any(|(i, c)| c == ':' && i > 0 && i + 1 < rest.len())
        });
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{field}: {id:?} is not <kind>:<name>:<container> with kind one of {} (each part \
             may be *)",
            CONTAINER_KINDS.join(", ")
        ))
    }
}

/// Whether `s` is a Kubernetes quantity (`500m`, `1.5`, `64Mi`, `1e3`).
pub fn is_quantity(s: &str) -> bool {
    // ^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(number)))?$
    fn number(s: &str) -> Option<&str> {
        let digits = |s: &str| s.len() - s.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        let int = digits(s);
        let mut rest = &s[int..];
        let mut frac = 0;
        if let Some(r) = rest.strip_prefix('.') {
            frac = digits(r);
            rest = &r[frac..];
        }
        (int > 0 || frac > 0).then_some(rest)
    }
    let unsigned = s.strip_prefix(['+', '-']).unwrap_or(s);
    let Some(suffix) = number(unsigned) else {
        return false;
    };
    match suffix {
        "" | "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" | "n" | "u" | "m" | "k" | "M" | "G" | "T"
        | "P" | "E" => true,
        _ => suffix
            .strip_prefix(['e', 'E'])
            .map(|e| e.strip_prefix(['+', '-']).unwrap_or(e))
            .and_then(number)
            .is_some_and(str::is_empty),
    }
}

/// `{group}/{resource}` for messages (`""` group shown as core).
fn group_resource(group: &str, resource: &str) -> String {
    if group.is_empty() {
        format!("{resource} (core group)")
    } else {
        format!("{group}/{resource}")
    }
}

/// A config reference (`{namespace?, name}`): name required, both valid Kubernetes names.
fn referent(field: &str, namespace: &str, name: &str, errors: &mut Vec<String>) {
    if !namespace.is_empty() {
        push_name(
            errors,
            names::validate_dns1123_label(&format!("{field}.namespace"), namespace),
        );
    }
    if name.is_empty() {
        errors.push(format!("{field}.name: required"));
    } else {
        push_name(
            errors,
            names::validate_dns1123_subdomain(&format!("{field}.name"), name),
        );
    }
}

/// `configs[]` of a placement or a ManagedClusterAddOn: resource and name required. Several
/// configs of one group/resource are allowed (OCM: the list replaces the defaults of that
/// group/resource as a whole).
fn addon_configs(field: &str, configs: &[v1::AddOnConfig], errors: &mut Vec<String>) {
    for (i, c) in configs.iter().enumerate() {
        let f = format!("{field}[{i}]");
        if c.resource.is_empty() {
            errors.push(format!("{f}.resource: required"));
        }
        referent(&f, &c.namespace, &c.name, errors);
    }
}

fn install_strategy(s: &v1::InstallStrategy, errors: &mut Vec<String>) {
    let field = "spec.installStrategy";
    if !s.r#type.is_empty() && !INSTALL_STRATEGIES.contains(&s.r#type.as_str()) {
        errors.push(not_one_of(
            &format!("{field}.type"),
            &s.r#type,
            &INSTALL_STRATEGIES,
        ));
    }
    let mut seen: HashMap<(&str, &str), usize> = HashMap::new();
    for (i, p) in s.placements.iter().enumerate() {
        let f = format!("{field}.placements[{i}]");
        let mut ok = true;
        if p.namespace.is_empty() {
            errors.push(format!("{f}.namespace: required"));
            ok = false;
        } else if let Err(e) =
            names::validate_dns1123_label(&format!("{f}.namespace"), &p.namespace)
        {
            errors.push(e.to_string());
            ok = false;
        }
        if p.name.is_empty() {
            errors.push(format!("{f}.name: required"));
            ok = false;
        } else if let Err(e) = names::validate_dns1123_subdomain(&format!("{f}.name"), &p.name) {
            errors.push(e.to_string());
            ok = false;
        }
        if ok && let Some(first) = seen.insert((&p.namespace, &p.name), i) {
            errors.push(format!(
                "{f}: placement {}/{} is listed twice (also placements[{first}])",
                p.namespace, p.name
            ));
        }
        addon_configs(&format!("{f}.configs"), &p.configs, errors);
        if let Some(r) = &p.rollout_strategy
            && !r.r#type.is_empty()
            && !ROLLOUT_TYPES.contains(&r.r#type.as_str())
        {
            errors.push(not_one_of(
                &format!("{f}.rolloutStrategy.type"),
                &r.r#type,
                &ROLLOUT_TYPES,
            ));
        }
    }
}

/// Every problem of a ClusterManagementAddOn, each naming its field.
pub fn cluster_management_addon(x: &v1::ClusterManagementAddOn) -> Vec<String> {
    let mut errors = Vec::new();
    let meta = x.metadata.clone().unwrap_or_default();
    push_name(&mut errors, addon_name("metadata.name", &meta.name));
    if let Some(v) = meta.annotations.get(crate::addon::LIFECYCLE_ANNOTATION)
        && !crate::addon::LIFECYCLES.contains(&v.as_str())
    {
        errors.push(not_one_of(
            &format!(
                "metadata.annotations[{:?}]",
                crate::addon::LIFECYCLE_ANNOTATION
            ),
            v,
            &crate::addon::LIFECYCLES,
        ));
    }
    let spec = x.spec.clone().unwrap_or_default();
    let mut seen: HashMap<(&str, &str), usize> = HashMap::new();
    for (i, c) in spec.supported_configs.iter().enumerate() {
        let f = format!("spec.supportedConfigs[{i}]");
        if c.resource.is_empty() {
            errors.push(format!("{f}.resource: required"));
        } else if let Some(first) = seen.insert((&c.group, &c.resource), i) {
            errors.push(format!(
                "{f}: {} is listed twice (also supportedConfigs[{first}])",
                group_resource(&c.group, &c.resource)
            ));
        }
        if let Some(d) = &c.default_config {
            referent(
                &format!("{f}.defaultConfig"),
                &d.namespace,
                &d.name,
                &mut errors,
            );
        }
    }
    if let Some(s) = &spec.install_strategy {
        install_strategy(s, &mut errors);
    }
    errors
}

/// Every problem of a ManagedClusterAddOn, each naming its field: its namespace is its
/// cluster's name, its name the add-on's.
pub fn managed_cluster_addon(x: &v1::ManagedClusterAddOn) -> Vec<String> {
    let mut errors = Vec::new();
    let meta = x.metadata.clone().unwrap_or_default();
    if let Err(e) = names::validate_dns1123_label("metadata.namespace", &meta.namespace) {
        errors.push(format!(
            "{e} (the namespace of a ManagedClusterAddOn is its cluster's name)"
        ));
    }
    push_name(&mut errors, addon_name("metadata.name", &meta.name));
    let spec = x.spec.clone().unwrap_or_default();
    if !spec.install_namespace.is_empty() {
        push_name(
            &mut errors,
            names::validate_dns1123_label("spec.installNamespace", &spec.install_namespace),
        );
    }
    addon_configs("spec.configs", &spec.configs, &mut errors);
    if let Some(st) = &x.status {
        if let Some(h) = &st.health_check
            && !h.mode.is_empty()
            && !HEALTH_CHECK_MODES.contains(&h.mode.as_str())
        {
            errors.push(not_one_of(
                "status.healthCheck.mode",
                &h.mode,
                &HEALTH_CHECK_MODES,
            ));
        }
        for (i, r) in st.registrations.iter().enumerate() {
            if let Err(e) = signer_name(
                &format!("status.registrations[{i}].signerName"),
                &r.signer_name,
            ) {
                errors.push(e);
            }
        }
    }
    errors
}

/// Every problem of an AddOnTemplate, each naming its field: an add-on name, an agent spec
/// that makes a valid ManifestWork (its manifests may hold `{{VARIABLES}}` inside strings), and
/// registrations with the settings their types need.
pub fn addon_template(x: &v1::AddOnTemplate) -> Vec<String> {
    let mut errors = Vec::new();
    let meta = x.metadata.clone().unwrap_or_default();
    push_name(
        &mut errors,
        names::validate_dns1123_subdomain("metadata.name", &meta.name),
    );
    let spec = x.spec.clone().unwrap_or_default();
    if spec.addon_name.is_empty() {
        errors.push("spec.addonName: required".into());
    } else {
        push_name(&mut errors, addon_name("spec.addonName", &spec.addon_name));
    }
    match &spec.agent_spec {
        None => errors.push("spec.agentSpec: required".into()),
        Some(agent) => {
            // The agent spec must make valid ManifestWorks on any cluster: any total size (it
            // is split into works), but each manifest fitting in one work.
            let probe = v1::ManifestWork {
                metadata: Some(v1::ObjectMeta {
                    name: super::work_name("probe", 0),
                    namespace: "probe-cluster".into(),
                    ..Default::default()
                }),
                spec: Some(agent.clone()),
                status: None,
                hub: None,
            };
            for e in crate::work::validate_unsized(&probe) {
                if e.starts_with("metadata.") {
                    continue;
                }
                errors.push(match e.strip_prefix("spec.") {
                    Some(rest) => format!("spec.agentSpec.{rest}"),
                    None => e,
                });
            }
            errors.extend(oversized_manifests(agent));
        }
    }
    for (i, r) in spec.registration.iter().enumerate() {
        registration(&format!("spec.registration[{i}]"), r, &mut errors);
    }
    errors
}

/// The manifests of an agent spec that no ManifestWork can carry, even alone.
fn oversized_manifests(agent: &v1::ManifestWorkSpec) -> Vec<String> {
    let limit = crate::work::MAX_MANIFESTS_BYTES;
    agent
        .workload
        .iter()
        .flat_map(|w| w.manifests.iter())
        .enumerate()
        .filter(|(_, m)| m.raw.len() > limit)
        .map(|(i, m)| {
            format!(
                "spec.agentSpec.workload.manifests[{i}]: {} bytes, over the {limit}-byte limit \
                 of one ManifestWork (an add-on's manifests are split into works of at most \
                 that size, but one manifest cannot be split): make it smaller",
                m.raw.len()
            )
        })
        .collect()
}

fn registration(f: &str, r: &v1::RegistrationSpec, errors: &mut Vec<String>) {
    match r.r#type.as_str() {
        "" => errors.push(format!(
            "{f}.type: required (one of {})",
            REGISTRATION_TYPES.join(", ")
        )),
        "KubeClient" | "CustomSigner" => {}
        other => errors.push(not_one_of(&format!("{f}.type"), other, &REGISTRATION_TYPES)),
    }
    if r.r#type == "CustomSigner" && r.custom_signer.is_none() {
        errors.push(format!("{f}.customSigner: required for type CustomSigner"));
    }
    if let Some(k) = &r.kube_client {
        for (j, p) in k.hub_permissions.iter().enumerate() {
            hub_permission(&format!("{f}.kubeClient.hubPermissions[{j}]"), p, errors);
        }
    }
    if let Some(c) = &r.custom_signer {
        let cf = format!("{f}.customSigner");
        if let Err(e) = signer_name(&format!("{cf}.signerName"), &c.signer_name) {
            errors.push(e);
        }
        match &c.signing_ca {
            None => errors.push(format!("{cf}.signingCA: required")),
            Some(ca) => referent(&format!("{cf}.signingCA"), &ca.namespace, &ca.name, errors),
        }
    }
}

fn hub_permission(f: &str, p: &v1::HubPermissionConfig, errors: &mut Vec<String>) {
    match p.r#type.as_str() {
        "CurrentCluster" => {
            if p.current_cluster_role_name.is_empty() {
                errors.push(format!(
                    "{f}.currentCluster.clusterRoleName: required for type CurrentCluster"
                ));
            }
        }
        "SingleNamespace" => {
            if p.single_namespace.is_empty() {
                errors.push(format!(
                    "{f}.singleNamespace.namespace: required for type SingleNamespace"
                ));
            } else {
                push_name(
                    errors,
                    names::validate_dns1123_label(
                        &format!("{f}.singleNamespace.namespace"),
                        &p.single_namespace,
                    ),
                );
            }
            match &p.single_namespace_role_ref {
                None => errors.push(format!(
                    "{f}.singleNamespace.roleRef: required for type SingleNamespace"
                )),
                Some(r) => {
                    if r.kind.is_empty() {
                        errors.push(format!("{f}.singleNamespace.roleRef.kind: required"));
                    }
                    if r.name.is_empty() {
                        errors.push(format!("{f}.singleNamespace.roleRef.name: required"));
                    }
                }
            }
        }
        "" => errors.push(format!(
            "{f}.type: required (one of {})",
            HUB_PERMISSION_TYPES.join(", ")
        )),
        other => errors.push(not_one_of(
            &format!("{f}.type"),
            other,
            &HUB_PERMISSION_TYPES,
        )),
    }
}

/// Every problem of an AddOnDeploymentConfig, each naming its field.
pub fn addon_deployment_config(x: &v1::AddOnDeploymentConfig) -> Vec<String> {
    let mut errors = Vec::new();
    let meta = x.metadata.clone().unwrap_or_default();
    push_name(
        &mut errors,
        names::validate_dns1123_label("metadata.namespace", &meta.namespace),
    );
    push_name(
        &mut errors,
        names::validate_dns1123_subdomain("metadata.name", &meta.name),
    );
    let spec = x.spec.clone().unwrap_or_default();
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (i, v) in spec.customized_variables.iter().enumerate() {
        let f = format!("spec.customizedVariables[{i}]");
        match variable_name(&format!("{f}.name"), &v.name) {
            Err(e) => errors.push(e),
            Ok(()) => {
                if let Some(first) = seen.insert(&v.name, i) {
                    errors.push(format!(
                        "{f}.name: {:?} is listed twice (also customizedVariables[{first}])",
                        v.name
                    ));
                }
            }
        }
        if v.value.len() > MAX_VARIABLE_VALUE {
            errors.push(format!(
                "{f}.value: {} characters long, at most {MAX_VARIABLE_VALUE} allowed",
                v.value.len()
            ));
        }
    }
    if let Some(n) = &spec.node_placement {
        let mut selector: Vec<_> = n.node_selector.iter().collect();
        selector.sort();
        errors.extend(
            names::validate_labels("spec.nodePlacement.nodeSelector", selector)
                .into_iter()
                .map(|e| e.to_string()),
        );
        for (j, t) in n.tolerations.iter().enumerate() {
            toleration(
                &format!("spec.nodePlacement.tolerations[{j}]"),
                t,
                &mut errors,
            );
        }
    }
    for (i, r) in spec.registries.iter().enumerate() {
        if r.mirror.is_empty() {
            errors.push(format!("spec.registries[{i}].mirror: required"));
        }
    }
    if !spec.agent_install_namespace.is_empty() {
        push_name(
            &mut errors,
            names::validate_dns1123_label(
                "spec.agentInstallNamespace",
                &spec.agent_install_namespace,
            ),
        );
    }
    let mut ids: HashMap<&str, usize> = HashMap::new();
    for (i, r) in spec.resource_requirements.iter().enumerate() {
        let f = format!("spec.resourceRequirements[{i}]");
        match container_id(&format!("{f}.containerID"), &r.container_id) {
            Err(e) => errors.push(e),
            Ok(()) => {
                if let Some(first) = ids.insert(&r.container_id, i) {
                    errors.push(format!(
                        "{f}.containerID: {:?} is listed twice (also resourceRequirements[{first}])",
                        r.container_id
                    ));
                }
            }
        }
        match &r.resources {
            None => errors.push(format!("{f}.resources: required")),
            Some(q) => {
                for (what, map) in [("limits", &q.limits), ("requests", &q.requests)] {
                    let mut entries: Vec<_> = map.iter().collect();
                    entries.sort();
                    for (k, v) in entries {
                        if !is_quantity(v) {
                            errors.push(format!(
                                "{f}.resources.{what}[{k:?}]: {v:?} is not a quantity (like \
                                 500m, 2, 64Mi)"
                            ));
                        }
                    }
                }
            }
        }
    }
    errors
}

/// A pod toleration, by Kubernetes' rules.
fn toleration(f: &str, t: &v1::Toleration, errors: &mut Vec<String>) {
    if !t.operator.is_empty() && !TOLERATION_OPERATORS.contains(&t.operator.as_str()) {
        errors.push(not_one_of(
            &format!("{f}.operator"),
            &t.operator,
            &TOLERATION_OPERATORS,
        ));
    }
    if t.key.is_empty() {
        if t.operator != "Exists" {
            errors.push(format!(
                "{f}.operator: must be Exists when the key is empty (to tolerate every taint)"
            ));
        }
    } else {
        push_name(
            errors,
            names::validate_label_key(&format!("{f}.key"), &t.key),
        );
    }
    if t.operator == "Exists" {
        if !t.value.is_empty() {
            errors.push(format!(
                "{f}.value: must be empty when the operator is Exists"
            ));
        }
    } else {
        push_name(
            errors,
            names::validate_label_value(&format!("{f}.value"), &t.value),
        );
    }
    if !t.effect.is_empty() && !TAINT_EFFECTS.contains(&t.effect.as_str()) {
        errors.push(not_one_of(
            &format!("{f}.effect"),
            &t.effect,
            &TAINT_EFFECTS,
        ));
    }
    if t.toleration_seconds.is_some() && t.effect != "NoExecute" {
        errors.push(format!("{f}.tolerationSeconds: only for effect NoExecute"));
    }
}

#[cfg(test)]
mod tests;
