//! One bundle into a `ManifestWorkSpec`, and one more per target customization (a variant):
//! overlays applied to the files, every file parsed as a YAML stream (`kind: List`
//! unwrapped, empty documents skipped), every object checked (`apiVersion`, `kind`,
//! `metadata.name`), namespaces applied (`namespace` forces, `defaultNamespace` fills in),
//! fleet.yaml `patches` applied,
//! duplicates refused naming both files, Namespaces and CRDs first, each manifest as canonical
//! JSON (keys sorted), the whole checked by the work validator every ManifestWork passes, and
//! its content hash (SHA-256 of the encoded spec).

use std::collections::{BTreeMap, HashMap};

use flotilla_api::{
    v1::{
        Manifest, ManifestWork, ManifestWorkSpec, ManifestsTemplate, ObjectMeta, TemplateVariant,
    },
    work::{MAX_MANIFESTS_BYTES, is_cluster_scoped, validate},
};
use flotilla_gitfetch::limits::human_bytes;
use prost::Message;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::{
    Problem,
    customize::{Customization, Patch, PatchTarget, YamlOptions},
    discover::BundleDir,
    fleetyaml::FleetYaml,
    name::bundle_name,
    overlay::Layered,
    tree::Tree,
};

/// Objects in one bundle, at most.
pub const MAX_OBJECTS: usize = 500;

/// The GitRepo a bundle belongs to.
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    /// Its namespace.
    pub namespace: &'a str,
    /// Its name.
    pub name: &'a str,
    /// Its `targetNamespace` (forces every object's namespace; wins over fleet.yaml's).
    pub target_namespace: Option<&'a str>,
}

/// A rendered bundle.
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    /// The bundle's name (its replica set's).
    pub name: String,
    /// Its directory.
    pub path: String,
    /// Labels from fleet.yaml.
    pub labels: BTreeMap<String, String>,
    /// The work every cluster no customization selects gets.
    pub spec: ManifestWorkSpec,
    /// SHA-256 of the encoded spec, 64 hex: equal specs, equal content; with customizations,
    /// of the base's content and every variant (selectors and content), so any change shows.
    pub content: String,
    /// One per `targetCustomizations` entry, in order (a cluster gets the first selecting it).
    pub variants: Vec<TemplateVariant>,
}

/// Bytes of manifests of a bundle's base and all its customizations together, at most: they are
/// kept in one replica set record, with the base and variants before the last change (for undo),
/// so a record holds at most twice this — under NATS's default 1 MiB payload.
pub const MAX_CUSTOMIZED_BYTES: usize = 384 * 1024;

/// The options one rendering applies.
struct Options<'a> {
    namespace: Option<&'a str>,
    default_namespace: Option<&'a str>,
    overlays: &'a [String],
    patches: Vec<&'a Patch>,
}

/// Renders one bundle of `tree`: its base and one variant per customization.
pub fn render(source: Source<'_>, tree: &Tree, dir: &BundleDir) -> Result<Rendered, Vec<Problem>> {
    let options = match &dir.fleet_yaml {
        Some(file) => crate::fleetyaml::parse(file, tree.content(file).unwrap_or_default())?,
        None => FleetYaml::default(),
    };
    let name = options
        .name
        .clone()
        .unwrap_or_else(|| bundle_name(source.namespace, source.name, &dir.path));
    let at = format!("bundle {name}");
    let base = Options {
        namespace: source.target_namespace.or(options.namespace.as_deref()),
        default_namespace: options.default_namespace.as_deref(),
        overlays: overlays(options.yaml.as_ref()),
        patches: options.patches.iter().collect(),
    };
    let spec = spec_of(tree, dir, &at, &base)?;
    let mut problems = Vec::new();
    let mut variants = Vec::new();
    for c in &options.target_customizations {
        match variant_of(c, tree, dir, &at, source.target_namespace, &base) {
            Ok(v) => variants.push(v),
            Err(p) => problems.extend(p),
        }
    }
    if let Err(p) = check_size(&at, &spec, &variants) {
        problems.push(p);
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(Rendered {
        name,
        path: dir.path.clone(),
        labels: options.labels,
        content: content_with_variants(&spec, &variants),
        spec,
        variants,
    })
}

/// One customization's variant: its selectors, and unless `doNotDeploy` its own rendering
/// (the base options with the customization's namespace, overlays and patches on top).
fn variant_of(
    c: &Customization,
    tree: &Tree,
    dir: &BundleDir,
    at: &str,
    forced_namespace: Option<&str>,
    base: &Options<'_>,
) -> Result<TemplateVariant, Vec<Problem>> {
    let mut variant = TemplateVariant {
        name: c.name.clone(),
        cluster_name: c.cluster_name.clone().unwrap_or_default(),
        cluster_selector: c.cluster_selector.as_ref().map(Into::into),
        cluster_set: c.cluster_set.clone().unwrap_or_default(),
        decision_group: c.decision_group.clone().unwrap_or_default(),
        do_not_deploy: c.do_not_deploy,
        ..Default::default()
    };
    if c.do_not_deploy {
        return Ok(variant);
    }
    let mine = Options {
        namespace: forced_namespace
            .or(c.namespace.as_deref())
            .or(base.namespace),
        default_namespace: c.default_namespace.as_deref().or(base.default_namespace),
        overlays: c.yaml.as_ref().map_or(base.overlays, |y| &y.overlays),
        patches: base.patches.iter().copied().chain(&c.patches).collect(),
    };
    let s = spec_of(tree, dir, at, &mine).map_err(|problems| {
        problems
            .into_iter()
            .map(|p| Problem::new(p.at, format!("customization {}: {}", c.name, p.message)))
            .collect::<Vec<_>>()
    })?;
    variant.content = content_of(&s);
    variant.template = Some(s);
    Ok(variant)
}

/// The bundle's manifests and its customizations' together stay under
/// [`MAX_CUSTOMIZED_BYTES`] (only checked when there are customizations).
fn check_size(
    at: &str,
    spec: &ManifestWorkSpec,
    variants: &[TemplateVariant],
) -> Result<(), Problem> {
    let bytes: usize = std::iter::once(spec)
        .chain(variants.iter().filter_map(|v| v.template.as_ref()))
        .map(manifest_bytes)
        .sum();
    if variants.is_empty() || bytes <= MAX_CUSTOMIZED_BYTES {
        return Ok(());
    }
    Err(Problem::new(
        at,
        format!(
            "{} of manifests for the bundle and its {} customizations together; at most {}",
            human_bytes(bytes as u64),
            variants.len(),
            human_bytes(MAX_CUSTOMIZED_BYTES as u64)
        ),
    ))
}

/// The content hash of the base and every variant (its selectors and its own content): what
/// changes when any cluster's manifests would.
fn content_with_variants(spec: &ManifestWorkSpec, variants: &[TemplateVariant]) -> String {
    let content = content_of(spec);
    if variants.is_empty() {
        return content;
    }
    let mut h = Sha256::new();
    h.update(content.as_bytes());
    for v in variants {
        let key = TemplateVariant {
            template: None,
            ..v.clone()
        };
        h.update(key.encode_length_delimited_to_vec());
    }
    hex(&h.finalize())
}

fn overlays(y: Option<&YamlOptions>) -> &[String] {
    y.map(|y| y.overlays.as_slice()).unwrap_or_default()
}

fn manifest_bytes(spec: &ManifestWorkSpec) -> usize {
    spec.workload
        .as_ref()
        .map_or(0, |w| w.manifests.iter().map(|m| m.raw.len()).sum())
}

/// SHA-256 of an encoded spec, 64 hex.
pub fn content_of(spec: &ManifestWorkSpec) -> String {
    hex(&Sha256::digest(spec.encode_to_vec()))
}

/// One rendering of the bundle's files with `options`: checked, ordered, validated.
fn spec_of(
    tree: &Tree,
    dir: &BundleDir,
    at: &str,
    options: &Options<'_>,
) -> Result<ManifestWorkSpec, Vec<Problem>> {
    let files = crate::overlay::layered(tree, dir, at, options.overlays)?;
    let mut objects = collect(&files, at, options)?;
    objects.sort_by_key(|(_, o)| rank(o)); // stable: file order otherwise
    let manifests: Vec<Manifest> = objects
        .iter()
        .map(|(_, o)| Manifest {
            raw: serde_json::to_vec(o).unwrap_or_default(),
        })
        .collect();
    let bytes: usize = manifests.iter().map(|m| m.raw.len()).sum();
    if bytes > MAX_MANIFESTS_BYTES {
        return Err(vec![Problem::new(
            at,
            format!(
                "{} of manifests; one ManifestWork holds at most {}",
                human_bytes(bytes as u64),
                human_bytes(MAX_MANIFESTS_BYTES as u64)
            ),
        )]);
    }
    let spec = ManifestWorkSpec {
        workload: Some(ManifestsTemplate { manifests }),
        ..Default::default()
    };
    let work = ManifestWork {
        metadata: Some(ObjectMeta {
            name: "bundle".into(),
            namespace: "cluster".into(),
            ..Default::default()
        }),
        spec: Some(spec.clone()),
        ..Default::default()
    };
    let invalid = validate(&work);
    if !invalid.is_empty() {
        return Err(invalid.into_iter().map(|m| Problem::new(at, m)).collect());
    }
    Ok(spec)
}

/// Every object of a bundle's files with its file: overlay patches, namespaces and patches
/// applied, duplicates refused.
fn collect(
    files: &Layered<'_>,
    at: &str,
    options: &Options<'_>,
) -> Result<Vec<(String, Value)>, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut objects: Vec<(String, Value)> = Vec::new();
    for (file, content) in &files.files {
        match parse_file(file, content) {
            Ok(mut found) => {
                for (patch_file, patch) in files.patches.get(file).into_iter().flatten() {
                    if let Err(p) = overlay_patch(patch_file, patch, &mut found) {
                        problems.push(p);
                    }
                }
                objects.extend(found.into_iter().map(|o| (file.clone(), o)));
            }
            Err(p) => problems.extend(p),
        }
    }
    if objects.len() > MAX_OBJECTS {
        problems.push(Problem::new(
            at,
            format!("{} objects; at most {MAX_OBJECTS}", objects.len()),
        ));
    }
    let mut placed = Vec::with_capacity(objects.len());
    for (file, obj) in &mut objects {
        let p = place(file, obj, options.namespace, options.default_namespace);
        placed.push(p.is_ok());
        problems.extend(p.err());
    }
    patch_all(&mut objects, &options.patches, at, &mut problems);
    if let Some(ns) = options.namespace {
        let was_placed = objects.iter().zip(placed).filter(|(_, ok)| *ok);
        problems.extend(was_placed.filter_map(|((file, obj), _)| still_in(file, obj, ns).err()));
    }
    let mut seen: HashMap<(String, String, String, String), String> = HashMap::new();
    for (file, obj) in &objects {
        if let Err(why) = required(obj) {
            problems.push(Problem::new(file.as_str(), format!("after patches: {why}")));
            continue;
        }
        let key = identity(obj);
        if let Some(first) = seen.insert(key.clone(), file.clone()) {
            problems.push(Problem::new(
                file.as_str(),
                format!(
                    "{} {} is also defined in {first}",
                    key.1,
                    display_name(&key)
                ),
            ));
        }
    }
    if problems.is_empty() {
        Ok(objects)
    } else {
        Err(problems)
    }
}

/// fleet.yaml's `patches`, each applied to every object it targets (none: a problem, so a
/// renamed object does not silently lose its customization).
fn patch_all(
    objects: &mut [(String, Value)],
    patches: &[&Patch],
    at: &str,
    problems: &mut Vec<Problem>,
) {
    for (i, p) in patches.iter().enumerate() {
        let mut hits = 0;
        for (file, o) in objects.iter_mut() {
            if !crate::customize::targets(&p.target, o) {
                continue;
            }
            hits += 1;
            if let Err(e) = crate::customize::apply(p, o) {
                problems.push(Problem::new(
                    file.as_str(),
                    format!("patch {} of {}: {e}", i + 1, describe(&p.target)),
                ));
            }
        }
        if hits == 0 {
            problems.push(Problem::new(
                at,
                format!(
                    "patch {} targets {}, which the bundle does not have",
                    i + 1,
                    describe(&p.target)
                ),
            ));
        }
    }
}

fn describe(t: &PatchTarget) -> String {
    let mut s = t.kind.clone();
    if let Some(ns) = &t.namespace {
        s.push_str(&format!(" {ns}/"));
        s.push_str(t.name.as_deref().unwrap_or("*"));
    } else if let Some(n) = &t.name {
        s.push_str(&format!(" {n}"));
    }
    s
}

/// An overlay's `<file>_patch.<ext>` on the object of `<file>.<ext>` (one object only).
fn overlay_patch(patch_file: &str, content: &[u8], objects: &mut [Value]) -> Result<(), Problem> {
    let [object] = objects else {
        return Err(Problem::new(
            patch_file,
            format!(
                "the file it patches holds {} objects; an overlay patch applies to a file of one \
                 object (use fleet.yaml patches for others)",
                objects.len()
            ),
        ));
    };
    let patch: Value = serde_yaml::from_slice::<serde_yaml::Value>(content)
        .ok()
        .and_then(|v| serde_json::to_value(v).ok())
        .ok_or_else(|| Problem::new(patch_file, "not a YAML or JSON patch"))?;
    let api_version = object["apiVersion"].as_str().unwrap_or_default().to_owned();
    match &patch {
        Value::Array(_) => flotilla_api::patch::json_patch(object, &patch)
            .map_err(|e| Problem::new(patch_file, e.0))?,
        Value::Object(_) if crate::customize::builtin_group(&api_version) => {
            flotilla_api::patch::strategic(object, &patch)
        }
        Value::Object(_) => flotilla_api::patch::merge(object, &patch),
        _ => {
            return Err(Problem::new(
                patch_file,
                "a patch is a mapping (merge) or a list of operations (JSON patch)",
            ));
        }
    }
    Ok(())
}

/// The objects of one file: a YAML stream (JSON is YAML), `List`s unwrapped.
fn parse_file(file: &str, content: &[u8]) -> Result<Vec<Value>, Vec<Problem>> {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    for (i, doc) in serde_yaml::Deserializer::from_slice(content).enumerate() {
        let at = || format!("{file}: document {}", i + 1);
        let value: serde_yaml::Value = match serde::Deserialize::deserialize(doc) {
            Ok(v) => v,
            Err(e) => {
                problems.push(Problem::new(at(), e.to_string()));
                break; // the stream cannot be resynchronised after a syntax error
            }
        };
        if value.is_null() {
            continue;
        }
        let json = match serde_json::to_value(&value) {
            Ok(Value::Object(o)) => Value::Object(o),
            Ok(_) => {
                problems.push(Problem::new(
                    at(),
                    "not an object (a mapping with apiVersion and kind)",
                ));
                continue;
            }
            Err(e) => {
                problems.push(Problem::new(
                    at(),
                    format!("not representable as JSON: {e}"),
                ));
                continue;
            }
        };
        if json.get("kind").and_then(Value::as_str) == Some("List") {
            match json.get("items").and_then(Value::as_array) {
                Some(items) => out.extend(items.iter().cloned()),
                None => problems.push(Problem::new(at(), "a List without items")),
            }
        } else {
            out.push(json);
        }
    }
    for (i, o) in out.iter().enumerate() {
        if let Err(why) = required(o) {
            problems.push(Problem::new(file, format!("object {}: {why}", i + 1)));
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

fn required(o: &Value) -> Result<(), &'static str> {
    let s = |p: &str| {
        o.pointer(p)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
    };
    if !o.is_object() {
        return Err("not an object");
    }
    if s("/apiVersion").is_none() {
        return Err("apiVersion is required");
    }
    if s("/kind").is_none() {
        return Err("kind is required");
    }
    if s("/metadata/name").is_none() {
        return Err("metadata.name is required");
    }
    Ok(())
}

/// Applies the bundle's namespace rules to one object.
/// After the patches, an object of a bundle whose namespace is forced must still be namespaced
/// and in it: a patch (from the repository, which is trusted less than the GitRepo) may not move
/// an object out of the namespace, nor turn it into a cluster-scoped kind.
fn still_in(file: &str, o: &Value, forced: &str) -> Result<(), Problem> {
    let api_version = o["apiVersion"].as_str().unwrap_or_default();
    let kind = o["kind"].as_str().unwrap_or_default();
    let group = api_version.split_once('/').map_or("", |(g, _)| g);
    let name = o["metadata"]["name"].as_str().unwrap_or_default();
    if is_cluster_scoped(group, kind) {
        return Err(Problem::new(
            file,
            format!(
                "after patches: {kind} {name} is cluster-scoped, and the bundle puts everything \
                 in namespace {forced}"
            ),
        ));
    }
    match o["metadata"]["namespace"].as_str() {
        Some(ns) if ns == forced => Ok(()),
        other => Err(Problem::new(
            file,
            format!(
                "after patches: {kind} {name} is in namespace {:?}, and the bundle puts \
                 everything in namespace {forced}",
                other.unwrap_or_default()
            ),
        )),
    }
}

fn place(
    file: &str,
    o: &mut Value,
    forced: Option<&str>,
    default: Option<&str>,
) -> Result<(), Problem> {
    let api_version = o["apiVersion"].as_str().unwrap_or_default().to_owned();
    let kind = o["kind"].as_str().unwrap_or_default().to_owned();
    let group = api_version.split_once('/').map_or("", |(g, _)| g);
    let cluster_scoped = is_cluster_scoped(group, &kind);
    let name = o["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) else {
        return Err(Problem::new(
            file,
            format!("{kind} {name}: metadata is not a mapping"),
        ));
    };
    match (forced, cluster_scoped) {
        (Some(ns), true) => {
            return Err(Problem::new(
                file,
                format!(
                    "{kind} {name} is cluster-scoped, and the bundle puts everything in namespace {ns}"
                ),
            ));
        }
        (Some(ns), false) => {
            meta.insert("namespace".into(), Value::String(ns.into()));
        }
        (None, false) if !meta.contains_key("namespace") => {
            if let Some(ns) = default {
                meta.insert("namespace".into(), Value::String(ns.into()));
            }
        }
        _ => {}
    }
    Ok(())
}

fn identity(o: &Value) -> (String, String, String, String) {
    let s = |p: &str| {
        o.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let group = s("/apiVersion")
        .split_once('/')
        .map_or(String::new(), |(g, _)| g.to_owned());
    (
        group,
        s("/kind"),
        s("/metadata/namespace"),
        s("/metadata/name"),
    )
}

fn display_name(key: &(String, String, String, String)) -> String {
    if key.2.is_empty() {
        key.3.clone()
    } else {
        format!("{}/{}", key.2, key.3)
    }
}

/// Namespaces first, then CRDs, then everything else.
fn rank(o: &Value) -> u8 {
    match o["kind"].as_str() {
        Some("Namespace") => 0,
        Some("CustomResourceDefinition") => 1,
        _ => 2,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests;
