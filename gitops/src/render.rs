//! One bundle into a `ManifestWorkSpec`: every file parsed as a YAML stream (`kind: List`
//! unwrapped, empty documents skipped), every object checked (`apiVersion`, `kind`,
//! `metadata.name`), namespaces applied (`namespace` forces, `defaultNamespace` fills in),
//! duplicates refused naming both files, Namespaces and CRDs first, each manifest as canonical
//! JSON (keys sorted), the whole checked by the work validator every ManifestWork passes, and
//! its content hash (SHA-256 of the encoded spec).

use std::collections::{BTreeMap, HashMap};

use flotilla_api::{
    v1::{Manifest, ManifestWork, ManifestWorkSpec, ManifestsTemplate, ObjectMeta},
    work::{MAX_MANIFESTS_BYTES, is_cluster_scoped, validate},
};
use flotilla_gitfetch::limits::human_bytes;
use prost::Message;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::{Problem, discover::BundleDir, fleetyaml::FleetYaml, name::bundle_name, tree::Tree};

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
    /// The work every cluster gets.
    pub spec: ManifestWorkSpec,
    /// SHA-256 of the encoded spec, 64 hex: equal specs, equal content.
    pub content: String,
}

/// Renders one bundle of `tree`.
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
    let namespace = source.target_namespace.or(options.namespace.as_deref());
    let mut objects = collect(
        tree,
        dir,
        &at,
        namespace,
        options.default_namespace.as_deref(),
    )?;
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
            &at,
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
            name: name.clone(),
            namespace: "cluster".into(),
            ..Default::default()
        }),
        spec: Some(spec.clone()),
        ..Default::default()
    };
    let invalid = validate(&work);
    if !invalid.is_empty() {
        return Err(invalid.into_iter().map(|m| Problem::new(&at, m)).collect());
    }
    let content = hex(&Sha256::digest(spec.encode_to_vec()));
    Ok(Rendered {
        name,
        path: dir.path.clone(),
        labels: options.labels,
        spec,
        content,
    })
}

/// Every object of a bundle's files with its file, namespaces applied, duplicates refused.
fn collect(
    tree: &Tree,
    dir: &BundleDir,
    at: &str,
    namespace: Option<&str>,
    default_namespace: Option<&str>,
) -> Result<Vec<(String, Value)>, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut objects: Vec<(String, Value)> = Vec::new();
    for file in &dir.files {
        let content = tree.content(file).unwrap_or_default();
        match parse_file(file, content) {
            Ok(found) => objects.extend(found.into_iter().map(|o| (file.clone(), o))),
            Err(p) => problems.extend(p),
        }
    }
    if objects.len() > MAX_OBJECTS {
        problems.push(Problem::new(
            at,
            format!("{} objects; at most {MAX_OBJECTS}", objects.len()),
        ));
    }
    let mut seen: HashMap<(String, String, String, String), String> = HashMap::new();
    for (file, obj) in &mut objects {
        if let Err(p) = place(file, obj, namespace, default_namespace) {
            problems.push(p);
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
