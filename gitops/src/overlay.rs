//! A bundle's files after its overlays (Fleet's `yaml.overlays`,
//! `fleet@3b2c622:internal/helmdeployer/render/patch/patch.go:86-130`): each overlay is the
//! directory `overlays/<name>/` of the bundle, applied in order; a file there replaces (or
//! adds) the bundle's file at the same relative path, and `<file>_patch.<ext>` patches the
//! object of `<file>.<ext>` instead. Only manifest files count; hidden entries are skipped;
//! a link leaving the bundle is refused.

use std::collections::BTreeMap;

use flotilla_gitfetch::{
    paths::{join, within},
    protocol::EntryKind,
};

use crate::{
    Problem,
    discover::{BundleDir, is_manifest},
    tree::Tree,
};

/// The files a rendering reads: content by path, and the overlay patches of each file.
#[derive(Debug, Default)]
pub struct Layered<'t> {
    /// Manifest files by path (from the repository root), after overlays.
    pub files: BTreeMap<String, &'t [u8]>,
    /// Per file: the overlay patch files for it, in order, with their content.
    pub patches: BTreeMap<String, Vec<(String, &'t [u8])>>,
}

/// The bundle's files with `overlays` applied; every problem at once (`at`: the bundle, for
/// problems of no one file).
pub fn layered<'t>(
    tree: &'t Tree,
    dir: &BundleDir,
    at: &str,
    overlays: &[String],
) -> Result<Layered<'t>, Vec<Problem>> {
    let mut out = Layered {
        files: dir
            .files
            .iter()
            .map(|f| (f.clone(), tree.content(f).unwrap_or_default()))
            .collect(),
        patches: BTreeMap::new(),
    };
    let mut problems = Vec::new();
    for name in overlays {
        let root = join(&join(&dir.path, "overlays"), name);
        let mut found = false;
        for e in tree.entries() {
            if !within(&root, &e.path) || e.path == root {
                continue;
            }
            let rel = &e.path[root.len() + 1..];
            let file_name = rel.rsplit('/').next().unwrap_or(rel);
            let kind = Tree::kind(e);
            if rel.split('/').any(|c| c.starts_with('.'))
                || !matches!(
                    kind,
                    EntryKind::File | EntryKind::Executable | EntryKind::Symlink
                )
                || !is_manifest(file_name)
            {
                continue;
            }
            found = true;
            if kind == EntryKind::Symlink && !within(&dir.path, &e.target) {
                problems.push(Problem::new(
                    &e.path,
                    format!("a symlink to {}, outside its bundle", e.target),
                ));
                continue;
            }
            let content = tree.content(&e.path).unwrap_or_default();
            match patched(rel) {
                Some(target_rel) => {
                    let target = join(&dir.path, &target_rel);
                    if !out.files.contains_key(&target) {
                        problems.push(Problem::new(
                            &e.path,
                            format!("patches {target}, which the bundle does not have"),
                        ));
                        continue;
                    }
                    out.patches
                        .entry(target)
                        .or_default()
                        .push((e.path.clone(), content));
                }
                None => {
                    out.files.insert(join(&dir.path, rel), content);
                }
            }
        }
        if !found {
            problems.push(Problem::new(
                at,
                format!("overlay {name}: no manifest files under {root}/"),
            ));
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

/// The file a `<file>_patch.<ext>` patches (`<file>.<ext>`, same directory), if `rel` is one.
fn patched(rel: &str) -> Option<String> {
    let (dir, name) = rel.rsplit_once('/').map_or(("", rel), |(d, n)| (d, n));
    let (stem, ext) = name.rsplit_once('.')?;
    let base = stem.strip_suffix("_patch").filter(|b| !b.is_empty())?;
    Some(join(dir, &format!("{base}.{ext}")))
}

#[cfg(test)]
mod tests {
    use super::patched;

    #[test]
    fn patch_files_name_the_file_they_patch() {
        assert_eq!(patched("cm_patch.yaml").as_deref(), Some("cm.yaml"));
        assert_eq!(patched("a/dep_patch.json").as_deref(), Some("a/dep.json"));
        assert_eq!(patched("cm.yaml"), None);
        assert_eq!(patched("_patch.yaml"), None);
    }
}
