//! Which directories are bundles, and which files each holds (Fleet's rules,
//! `fleet@3b2c622:internal/cmd/cli/apply/apply.go:804-860`, `internal/bundlereader`):
//!
//! - every directory under a `paths` root holding a `fleet.yaml` (`fleet.yml` as fallback) is a
//!   bundle, and so is the root itself when it holds one;
//! - a root without one is a bundle when it holds manifests no nested `fleet.yaml` claims;
//! - a file belongs to the nearest bundle directory above it; hidden entries (a component
//!   starting with `.`) and a bundle's `overlays/` are skipped; only `.yaml`, `.yml` and `.json`
//!   files are manifests, anything else is ignored.
//!
//! Refused inside a bundle, by name: Helm charts, Kustomize, submodules, `.fleetignore` (not
//! built yet), a symlink whose file lies outside the bundle; and the bundle limits.

use std::collections::{BTreeMap, BTreeSet};

use flotilla_gitfetch::{
    limits::human_bytes,
    paths::{join, within},
    protocol::EntryKind,
};

use crate::{Problem, tree::Tree};

/// Manifest files in one bundle, at most.
pub const MAX_FILES_PER_BUNDLE: usize = 1_000;
/// Manifest bytes in one bundle, at most.
pub const MAX_YAML_BYTES_PER_BUNDLE: u64 = 2 * 1024 * 1024;
/// Bundles in one GitRepo, at most.
pub const MAX_BUNDLES: usize = 64;

/// One bundle directory and its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleDir {
    /// The directory, from the repository root (`""` for the root itself).
    pub path: String,
    /// Its `fleet.yaml` (or `fleet.yml`), if any.
    pub fleet_yaml: Option<String>,
    /// Its manifest files, sorted, from the repository root.
    pub files: Vec<String>,
}

/// The bundles of a fetched tree, in path order; every problem found at once.
pub fn discover(tree: &Tree) -> Result<Vec<BundleDir>, Vec<Problem>> {
    let mut problems = fleetignores(tree);
    let declared = declared(tree);
    let mut bundles: BTreeMap<String, BundleDir> = BTreeMap::new();
    for (dir, file) in &declared {
        bundles.insert(dir.clone(), bundle(dir, Some(file.clone())));
    }
    for e in tree.entries() {
        let Some(root) = root_of(tree, &e.path) else {
            continue;
        };
        if hidden_below(root, &e.path) {
            continue;
        }
        let owner = declared
            .keys()
            .filter(|d| within(d, &e.path) && within(root, d))
            .max_by_key(|d| d.len())
            .cloned()
            .unwrap_or_else(|| root.to_owned());
        if in_overlays(&owner, &e.path) {
            continue;
        }
        let name = split(&e.path).map_or(e.path.as_str(), |(_, n)| n);
        match Tree::kind(e) {
            EntryKind::Submodule => problems.push(Problem::new(
                &e.path,
                "a submodule inside a bundle; submodules are not followed",
            )),
            EntryKind::Dir | EntryKind::Unspecified => {}
            _ if refused(name).is_some() => {
                problems.push(Problem::new(&e.path, refused(name).unwrap_or_default()));
            }
            _ if is_fleet_yaml(&owner, &e.path) => {}
            _ if is_manifest(name) => {
                if Tree::kind(e) == EntryKind::Symlink && !within(&owner, &e.target) {
                    problems.push(Problem::new(
                        &e.path,
                        format!(
                            "a symlink to {}, outside its bundle {}",
                            e.target,
                            shown(&owner)
                        ),
                    ));
                    continue;
                }
                bundles
                    .entry(owner.clone())
                    .or_insert_with(|| bundle(&owner, None))
                    .files
                    .push(e.path.clone());
            }
            _ => {}
        }
    }
    let bundles: Vec<BundleDir> = bundles.into_values().collect();
    if bundles.len() > MAX_BUNDLES {
        problems.push(Problem::new(
            "paths",
            format!(
                "{} bundles; at most {MAX_BUNDLES} per GitRepo",
                bundles.len()
            ),
        ));
    }
    for b in &bundles {
        limits(tree, b, &mut problems);
    }
    if problems.is_empty() {
        Ok(bundles)
    } else {
        Err(problems)
    }
}

/// Directories that declare a bundle, with their `fleet.yaml` (`fleet.yml` as fallback).
fn declared(tree: &Tree) -> BTreeMap<String, String> {
    let mut declared: BTreeMap<String, String> = BTreeMap::new();
    for e in tree.entries() {
        let Some((dir, name)) = split(&e.path) else {
            continue;
        };
        let Some(root) = root_of(tree, &e.path) else {
            continue;
        };
        if hidden_below(root, &e.path) || !is_file(e.kind) {
            continue;
        }
        if name == "fleet.yaml" || (name == "fleet.yml" && !declared.contains_key(dir)) {
            declared.insert(dir.to_owned(), e.path.clone());
        }
    }
    declared
}

fn bundle(dir: &str, fleet_yaml: Option<String>) -> BundleDir {
    BundleDir {
        path: dir.to_owned(),
        fleet_yaml,
        files: Vec::new(),
    }
}

fn limits(tree: &Tree, b: &BundleDir, problems: &mut Vec<Problem>) {
    if b.files.len() > MAX_FILES_PER_BUNDLE {
        problems.push(Problem::new(
            shown(&b.path),
            format!(
                "{} manifest files; a bundle may have at most {MAX_FILES_PER_BUNDLE}",
                b.files.len()
            ),
        ));
    }
    let bytes: u64 = b
        .files
        .iter()
        .map(|f| tree.content(f).map_or(0, |c| c.len() as u64))
        .sum();
    if bytes > MAX_YAML_BYTES_PER_BUNDLE {
        problems.push(Problem::new(
            shown(&b.path),
            format!(
                "{} of manifests; a bundle may have at most {}",
                human_bytes(bytes),
                human_bytes(MAX_YAML_BYTES_PER_BUNDLE)
            ),
        ));
    }
}

/// The root an entry lies under (roots never nest).
fn root_of<'t>(tree: &'t Tree, path: &str) -> Option<&'t str> {
    tree.roots
        .iter()
        .find(|r| within(r, path) && r.as_str() != path)
        .map(String::as_str)
}

/// Whether a component of `path` below `root` starts with a dot.
fn hidden_below(root: &str, path: &str) -> bool {
    let rest = if root.is_empty() {
        path
    } else {
        path.get(root.len() + 1..).unwrap_or("")
    };
    rest.split('/').any(|c| c.starts_with('.'))
}

/// `fleet.yaml` or `fleet.yml` directly in the bundle directory: options, not a manifest.
fn is_fleet_yaml(bundle: &str, path: &str) -> bool {
    path == join(bundle, "fleet.yaml") || path == join(bundle, "fleet.yml")
}

fn in_overlays(bundle: &str, path: &str) -> bool {
    within(&join(bundle, "overlays"), path)
}

fn split(path: &str) -> Option<(&str, &str)> {
    match path.rsplit_once('/') {
        Some((d, n)) => Some((d, n)),
        None => Some(("", path)),
    }
}

fn is_file(kind: i32) -> bool {
    matches!(
        EntryKind::try_from(kind),
        Ok(EntryKind::File | EntryKind::Executable | EntryKind::Symlink)
    )
}

/// Whether a file name is a manifest file.
pub fn is_manifest(name: &str) -> bool {
    [".yaml", ".yml", ".json"]
        .iter()
        .any(|ext| name.len() > ext.len() && name.ends_with(ext))
}

/// Files whose presence refuses a bundle, with the reason.
fn refused(name: &str) -> Option<&'static str> {
    match name {
        "Chart.yaml" | "Chart.yml" => Some(
            "a Helm chart; Helm charts are not rendered here: render with `helm template` in CI \
             and commit the output",
        ),
        "kustomization.yaml" | "kustomization.yml" | "Kustomization" => Some(
            "a Kustomize directory; Kustomize is not run here: render with `kustomize build` in \
             CI and commit the output",
        ),
        _ => None,
    }
}

/// A bundle directory for messages.
pub fn shown(dir: &str) -> String {
    if dir.is_empty() {
        "the repository root".to_owned()
    } else {
        dir.to_owned()
    }
}

/// Hidden names that matter: a `.fleetignore` is refused rather than silently not honoured.
fn fleetignores(tree: &Tree) -> Vec<Problem> {
    let mut seen = BTreeSet::new();
    tree.entries()
        .filter(|e| e.path.rsplit('/').next() == Some(".fleetignore"))
        .filter(|e| seen.insert(e.path.clone()))
        .map(|e| {
            Problem::new(
                &e.path,
                ".fleetignore is not supported yet: narrow `paths`, or move the files out of the bundle",
            )
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests;
