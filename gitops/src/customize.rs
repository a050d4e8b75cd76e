//! Per-target customizations (`fleet.yaml` `targetCustomizations`, Fleet's `BundleTarget`
//! where it fits), overlays (`yaml.overlays`) and patches (a Flotilla addition), and their
//! checks: every problem at once, each naming the file and the key.
//!
//! A customization selects clusters by `clusterName`, `clusterSelector` (labels), `clusterSet`
//! (a ManagedClusterSet: Fleet's `clusterGroup`) and `decisionGroup` (the Placement decision
//! group the cluster is in); every selector given must hold, and at least one is required.
//! A cluster gets the first customization that selects it (Fleet's `FirstMatch`; `AllMatches`
//! is refused). Its options replace the bundle's (`namespace`, `defaultNamespace`,
//! `yaml.overlays`, as Fleet merges options), except `patches`, which apply after the bundle's.
//! `doNotDeploy` gives the selected clusters no work.

use serde::Deserialize;
use serde_json::Value;

use crate::{Problem, fleetyaml::FleetYaml};

/// Customizations per bundle, at most (each is a rendering of the bundle).
pub const MAX_CUSTOMIZATIONS: usize = 16;
/// Patches per option set (the bundle's, or one customization's), at most.
pub const MAX_PATCHES: usize = 32;
/// Bytes of one patch (as JSON), at most.
pub const MAX_PATCH_BYTES: usize = 64 * 1024;
/// Overlays per option set, at most.
pub const MAX_OVERLAYS: usize = 8;

/// `yaml:` options.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct YamlOptions {
    /// Overlay directories (`overlays/<name>/` of the bundle), applied in order: a file there
    /// replaces (or adds) the bundle's file at the same path; `<file>_patch.<ext>` patches
    /// `<file>.<ext>` (a JSON array: a JSON patch; else a strategic merge patch for Kubernetes'
    /// own kinds and a JSON merge patch for others).
    #[serde(default)]
    pub overlays: Vec<String>,
}

/// One patch of the objects it targets.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Patch {
    /// Which objects (every one matching; matching none is an error).
    pub target: PatchTarget,
    /// `strategic`, `merge` (RFC 7386) or `json` (RFC 6902).
    #[serde(rename = "type")]
    pub kind: PatchType,
    /// The patch: a mapping (strategic, merge) or a list of operations (json).
    pub patch: Value,
}

/// The objects a patch applies to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PatchTarget {
    /// `apiVersion` (any when unset).
    #[serde(default)]
    pub api_version: Option<String>,
    /// `kind` (required).
    pub kind: String,
    /// `metadata.name` (any when unset).
    #[serde(default)]
    pub name: Option<String>,
    /// `metadata.namespace` after the bundle's namespace rules (any when unset).
    #[serde(default)]
    pub namespace: Option<String>,
}

/// A patch's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PatchType {
    /// Strategic merge patch (approximated: lists merge by `name`, see `flotilla_api::patch`).
    Strategic,
    /// JSON merge patch (RFC 7386).
    Merge,
    /// JSON patch (RFC 6902).
    Json,
}

/// One per-target customization.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Customization {
    /// Its name (a DNS label, unique in the bundle).
    pub name: String,
    /// Selects the cluster of this name.
    #[serde(default)]
    pub cluster_name: Option<String>,
    /// Selects clusters whose labels match.
    #[serde(default)]
    pub cluster_selector: Option<flotilla_api::ocm::meta::LabelSelector>,
    /// Selects members of this ManagedClusterSet.
    #[serde(default)]
    pub cluster_set: Option<String>,
    /// Selects clusters in this Placement decision group.
    #[serde(default)]
    pub decision_group: Option<String>,
    /// Replaces the bundle's `defaultNamespace`.
    #[serde(default)]
    pub default_namespace: Option<String>,
    /// Replaces the bundle's `namespace`.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Replaces the bundle's `yaml` options.
    #[serde(default)]
    pub yaml: Option<YamlOptions>,
    /// Applied after the bundle's patches.
    #[serde(default)]
    pub patches: Vec<Patch>,
    /// The selected clusters get no work.
    #[serde(default)]
    pub do_not_deploy: bool,
}

/// Keys of a customization refused by name, with what to do instead.
const REFUSED_IN_CUSTOMIZATION: &[(&str, &str)] = &[
    (
        "clusterGroup",
        "cluster groups are ManagedClusterSets here: use clusterSet",
    ),
    (
        "clusterGroupSelector",
        "cluster groups are ManagedClusterSets here: use clusterSet",
    ),
    (
        "values",
        "Helm values need Helm, which is not rendered here: use patches",
    ),
];

/// Takes the keys of each `targetCustomizations` entry that are refused by name out of `list`,
/// with a problem for each (`targetCustomizations[i].helm: …`); the rest is deserialized.
pub(crate) fn strip_refused(
    path: &str,
    list: &serde_yaml::Value,
) -> (serde_yaml::Value, Vec<Problem>) {
    let mut problems = Vec::new();
    let Some(items) = list.as_sequence() else {
        return (list.clone(), problems);
    };
    let mut kept = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let Some(map) = item.as_mapping() else {
            kept.push(item.clone());
            continue;
        };
        let mut m = serde_yaml::Mapping::new();
        for (k, v) in map {
            let key = k.as_str().unwrap_or_default();
            let why = REFUSED_IN_CUSTOMIZATION
                .iter()
                .chain(crate::fleetyaml::NEVER)
                .find(|(name, _)| *name == key);
            match why {
                Some((_, why)) => problems.push(Problem::new(
                    path,
                    format!("targetCustomizations[{i}].{key}: not supported here: {why}"),
                )),
                None => {
                    m.insert(k.clone(), v.clone());
                }
            }
        }
        kept.push(serde_yaml::Value::Mapping(m));
    }
    (serde_yaml::Value::Sequence(kept), problems)
}

/// Every problem of `f`'s customizations, overlays and patches, into `problems`.
pub(crate) fn check(path: &str, f: &FleetYaml, problems: &mut Vec<Problem>) {
    let mut push = |at: String, message: String| {
        problems.push(Problem::new(path, format!("{at}: {message}")));
    };
    match f.target_customization_mode.as_deref() {
        None | Some("FirstMatch") => {}
        Some("AllMatches") => push(
            "targetCustomizationMode".into(),
            "AllMatches is not built: a cluster gets the first customization that selects it \
             (FirstMatch)"
                .into(),
        ),
        Some(other) => push(
            "targetCustomizationMode".into(),
            format!("{other:?} is not FirstMatch"),
        ),
    }
    options("", f.yaml.as_ref(), &f.patches, [None, None], &mut push);
    let list = &f.target_customizations;
    if list.len() > MAX_CUSTOMIZATIONS {
        push(
            "targetCustomizations".into(),
            format!(
                "{} customizations; at most {MAX_CUSTOMIZATIONS} per bundle",
                list.len()
            ),
        );
    }
    let mut names = std::collections::BTreeSet::new();
    for (i, c) in list.iter().enumerate() {
        let at = format!("targetCustomizations[{i}]");
        if let Err(e) = flotilla_api::names::validate_dns1123_label(&format!("{at}.name"), &c.name)
        {
            push(at.clone(), e.to_string());
        } else if !names.insert(c.name.as_str()) {
            push(format!("{at}.name"), format!("{} is used twice", c.name));
        }
        selectors(&at, c, &mut push);
        options(
            &format!("{at}."),
            c.yaml.as_ref(),
            &c.patches,
            [c.namespace.as_deref(), c.default_namespace.as_deref()],
            &mut push,
        );
    }
}

fn selectors(at: &str, c: &Customization, push: &mut impl FnMut(String, String)) {
    if c.cluster_name.is_none()
        && c.cluster_selector.is_none()
        && c.cluster_set.is_none()
        && c.decision_group.is_none()
    {
        push(
            at.to_owned(),
            "selects no cluster: give clusterName, clusterSelector, clusterSet or decisionGroup \
             (clusterSelector: {} selects every cluster)"
                .into(),
        );
    }
    if let Some(n) = &c.cluster_name
        && let Err(e) =
            flotilla_api::names::validate_dns1123_subdomain(&format!("{at}.clusterName"), n)
    {
        push(at.to_owned(), e.to_string());
    }
    if let Some(n) = &c.cluster_set
        && let Err(e) = flotilla_api::names::validate_dns1123_label(&format!("{at}.clusterSet"), n)
    {
        push(at.to_owned(), e.to_string());
    }
    if c.decision_group.as_deref() == Some("") {
        push(format!("{at}.decisionGroup"), "must not be empty".into());
    }
    if let Some(sel) = &c.cluster_selector {
        let sel: flotilla_api::v1::LabelSelector = sel.into();
        for e in flotilla_api::selector::validate(&format!("{at}.clusterSelector"), &sel) {
            push(e.field, e.reason);
        }
    }
}

/// Checks one option set: `prefix` is `""` for the bundle, `targetCustomizations[i].` for one.
fn options(
    prefix: &str,
    yaml: Option<&YamlOptions>,
    patches: &[Patch],
    [namespace, default_namespace]: [Option<&str>; 2],
    push: &mut impl FnMut(String, String),
) {
    for (field, value) in [
        ("namespace", namespace),
        ("defaultNamespace", default_namespace),
    ] {
        if let Some(ns) = value
            && let Err(e) =
                flotilla_api::names::validate_dns1123_label(&format!("{prefix}{field}"), ns)
        {
            push(format!("{prefix}{field}"), e.to_string());
        }
    }
    let overlays = yaml.map(|y| y.overlays.as_slice()).unwrap_or_default();
    if overlays.len() > MAX_OVERLAYS {
        push(
            format!("{prefix}yaml.overlays"),
            format!("{} overlays; at most {MAX_OVERLAYS}", overlays.len()),
        );
    }
    for (i, o) in overlays.iter().enumerate() {
        if o.is_empty() || o.contains('/') || o.starts_with('.') {
            push(
                format!("{prefix}yaml.overlays[{i}]"),
                format!("{o:?}: the name of a directory under the bundle's overlays/"),
            );
        }
    }
    if patches.len() > MAX_PATCHES {
        push(
            format!("{prefix}patches"),
            format!("{} patches; at most {MAX_PATCHES}", patches.len()),
        );
    }
    for (i, p) in patches.iter().enumerate() {
        let at = format!("{prefix}patches[{i}]");
        if p.target.kind.is_empty() {
            push(format!("{at}.target.kind"), "required".into());
        }
        let bytes = serde_json::to_vec(&p.patch).map_or(0, |b| b.len());
        if bytes > MAX_PATCH_BYTES {
            push(
                format!("{at}.patch"),
                format!("{bytes} bytes; at most {MAX_PATCH_BYTES}"),
            );
        }
        match (p.kind, &p.patch) {
            (PatchType::Json, Value::Array(_)) => {}
            (PatchType::Json, _) => push(
                format!("{at}.patch"),
                "a json patch is a list of operations ({op, path, value})".into(),
            ),
            (_, Value::Object(_)) => {}
            (_, _) => push(
                format!("{at}.patch"),
                "a strategic or merge patch is a mapping".into(),
            ),
        }
    }
}

/// Whether `target` selects object `o`.
pub fn targets(target: &PatchTarget, o: &Value) -> bool {
    let s = |p: &str| o.pointer(p).and_then(Value::as_str).unwrap_or_default();
    s("/kind") == target.kind
        && target
            .api_version
            .as_deref()
            .is_none_or(|v| v == s("/apiVersion"))
        && target
            .name
            .as_deref()
            .is_none_or(|v| v == s("/metadata/name"))
        && target
            .namespace
            .as_deref()
            .is_none_or(|v| v == s("/metadata/namespace"))
}

/// Applies one patch to an object.
pub fn apply(p: &Patch, o: &mut Value) -> Result<(), String> {
    match p.kind {
        PatchType::Strategic => flotilla_api::patch::strategic(o, &p.patch),
        PatchType::Merge => flotilla_api::patch::merge(o, &p.patch),
        PatchType::Json => flotilla_api::patch::json_patch(o, &p.patch).map_err(|e| e.0)?,
    }
    Ok(())
}

/// Whether a kind belongs to Kubernetes' own API groups (strategic merge patches apply to
/// those; custom resources have no patch strategy and take a JSON merge patch).
pub fn builtin_group(api_version: &str) -> bool {
    let group = api_version.split_once('/').map_or("", |(g, _)| g);
    group.is_empty()
        || matches!(group, "apps" | "batch" | "autoscaling" | "policy")
        || group.ends_with(".k8s.io")
}

#[cfg(test)]
mod tests;
