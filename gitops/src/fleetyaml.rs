//! A bundle's `fleet.yaml`: strict (a typo in an option must not deploy the wrong thing). The
//! keys built so far are read (per-target customizations, overlays and patches in
//! [`crate::customize`]); Fleet keys not built yet, and those this design leaves out for good,
//! are refused by name with the reason, so a Fleet user learns what to change.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::Problem;

/// The options of one bundle.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FleetYaml {
    /// The bundle's name (else `<gitrepo>-<path>`).
    #[serde(default)]
    pub name: Option<String>,
    /// Labels for the bundle's replica set.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The namespace of namespaced objects that name none.
    #[serde(default)]
    pub default_namespace: Option<String>,
    /// The namespace every object is put in (cluster-scoped objects are then refused).
    #[serde(default)]
    pub namespace: Option<String>,
    /// Overlays every cluster gets (`overlays/<name>/` of the bundle).
    #[serde(default)]
    pub yaml: Option<YamlOptions>,
    /// Patches every cluster gets (a Flotilla addition).
    #[serde(default)]
    pub patches: Vec<Patch>,
    /// Per-target customizations, first match wins.
    #[serde(default)]
    pub target_customizations: Vec<Customization>,
    /// `FirstMatch` (the default, and the only mode built).
    #[serde(default)]
    pub target_customization_mode: Option<String>,
}

pub use crate::customize::{Customization, Patch, PatchTarget, PatchType, YamlOptions};

/// Fleet keys not built yet, with what to do meanwhile.
const NOT_YET: &[(&str, &str)] = &[
    ("dependsOn", "dependsOn is not built yet"),
    (
        "rolloutStrategy",
        "set the rollout strategy on the GitRepo's targets",
    ),
    ("overrideTargets", "overrideTargets is not built yet"),
    (
        "paused",
        "pause the GitRepo (`flotilla rollout pause gitrepo`)",
    ),
    ("keepResources", "set keepResources on the GitRepo"),
];

/// Fleet keys left out by design, with the reason.
pub(crate) const NEVER: &[(&str, &str)] = &[
    (
        "helm",
        "Helm charts are not rendered here: render with `helm template` in CI and commit the output",
    ),
    (
        "kustomize",
        "Kustomize is not run here: render with `kustomize build` in CI and commit the output",
    ),
    ("imageScans", "image scans are not supported"),
    ("serviceAccount", "the agent applies with its own identity"),
    ("correctDrift", "drift is always corrected"),
    ("diff", "use the work's ignoreFields instead"),
    ("ignore", "use the work's ignoreFields instead"),
    ("downstreamResources", "not supported"),
    ("createNamespace", "put a Namespace manifest in the bundle"),
    ("deleteNamespace", "not supported"),
    ("namespaceLabels", "put a Namespace manifest in the bundle"),
    (
        "namespaceAnnotations",
        "put a Namespace manifest in the bundle",
    ),
    ("targets", "targets are the GitRepo's placements"),
];

/// Parses `fleet.yaml` at `path`; every problem at once.
pub fn parse(path: &str, content: &[u8]) -> Result<FleetYaml, Vec<Problem>> {
    let value: serde_yaml::Value = serde_yaml::from_slice(content)
        .map_err(|e| vec![Problem::new(path, format!("not YAML: {e}"))])?;
    if value.is_null() {
        return Ok(FleetYaml::default());
    }
    let Some(map) = value.as_mapping() else {
        return Err(vec![Problem::new(path, "must be a mapping of options")]);
    };
    let mut problems = Vec::new();
    let mut kept = serde_yaml::Mapping::new();
    for (k, v) in map {
        let key = k.as_str().unwrap_or_default();
        if let Some((_, why)) = NOT_YET.iter().chain(NEVER).find(|(name, _)| *name == key) {
            problems.push(Problem::new(
                path,
                format!("{key}: not supported here: {why}"),
            ));
        } else if key == "targetCustomizations" {
            let (list, refused) = crate::customize::strip_refused(path, v);
            problems.extend(refused);
            kept.insert(k.clone(), list);
        } else {
            kept.insert(k.clone(), v.clone());
        }
    }
    let parsed: Result<FleetYaml, _> = serde_yaml::from_value(serde_yaml::Value::Mapping(kept));
    match parsed.map(|f| check(path, f)) {
        Ok(Ok(f)) if problems.is_empty() => Ok(f),
        Ok(Ok(_)) => Err(problems),
        Ok(Err(more)) => {
            problems.extend(more);
            Err(problems)
        }
        Err(e) => {
            problems.push(Problem::new(path, e.to_string()));
            Err(problems)
        }
    }
}

fn check(path: &str, f: FleetYaml) -> Result<FleetYaml, Vec<Problem>> {
    let mut problems = Vec::new();
    for (field, value) in [
        ("defaultNamespace", &f.default_namespace),
        ("namespace", &f.namespace),
    ] {
        if let Some(ns) = value
            && let Err(e) = flotilla_api::names::validate_dns1123_label(field, ns)
        {
            problems.push(Problem::new(path, e.to_string()));
        }
    }
    if let Some(name) = &f.name
        && let Err(e) = flotilla_api::names::validate_dns1123_label("name", name)
    {
        problems.push(Problem::new(path, e.to_string()));
    }
    crate::customize::check(path, &f, &mut problems);
    if problems.is_empty() {
        Ok(f)
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_keys_are_read() {
        let f = parse(
            "apps/web/fleet.yaml",
            b"name: web\ndefaultNamespace: shop\nlabels: {tier: web}\n",
        )
        .unwrap();
        assert_eq!(f.name.as_deref(), Some("web"));
        assert_eq!(f.default_namespace.as_deref(), Some("shop"));
        assert_eq!(f.labels["tier"], "web");
        assert_eq!(parse("f.yaml", b"").unwrap(), FleetYaml::default());
    }

    #[test]
    fn fleet_keys_not_built_and_typos_are_refused_by_name() {
        let problems = parse(
            "apps/web/fleet.yaml",
            b"helm: {chart: x}\ndependsOn: []\ndefaultNamspace: shop\n",
        )
        .unwrap_err();
        let text: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        assert!(
            text[0].starts_with("apps/web/fleet.yaml: helm: not supported here: Helm charts"),
            "{text:?}"
        );
        assert!(
            text[1].contains("dependsOn: not supported here: dependsOn is not built"),
            "{text:?}"
        );
        assert!(
            text[2].contains("unknown field `defaultNamspace`"),
            "{text:?}"
        );
    }

    #[test]
    fn namespaces_and_names_must_be_dns_labels() {
        let problems = parse("f.yaml", b"namespace: Shop_1\nname: web/x\n").unwrap_err();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].message.contains("namespace"), "{problems:?}");
    }
}
