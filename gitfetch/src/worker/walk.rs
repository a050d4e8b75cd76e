//! The tree walk under `paths`: every entry's name checked, sizes read from object headers
//! before any blob, counts and depth bounded, symlinks resolved lexically inside the `paths`
//! entry they were found under, submodules listed and never followed. Manifest-like files
//! (`.yaml`, `.yml`, `.json`, `.fleetignore`) are read; others are listed with their size.

use gix::{ObjectId, object::tree::EntryKind as GixKind};

use super::{Failure, fetch::chain};
use crate::{
    limits::human_bytes,
    paths::{self, Found, SpecPart},
    protocol::{CommitInfo, EntryKind, Limits, TreeEntry},
};

/// The longest symlink target read (bytes).
pub const MAX_LINK_BYTES: u64 = 4096;
/// The longest subject kept (bytes).
pub const MAX_SUBJECT_BYTES: usize = 200;

/// The commit's subject, author and time.
pub fn commit_info(repo: &gix::Repository, commit: ObjectId) -> Result<CommitInfo, Failure> {
    let bad = |e: gix::Error| Failure::refused(format!("commit {commit}: {}", chain(&e)));
    let c = repo.find_commit(commit).map_err(bad)?;
    let message = c.message().map_err(bad)?;
    let mut subject = message.summary().to_string();
    if subject.len() > MAX_SUBJECT_BYTES {
        let mut end = MAX_SUBJECT_BYTES;
        while !subject.is_char_boundary(end) {
            end -= 1;
        }
        subject.truncate(end);
    }
    let author = c.author().map_err(bad)?;
    let time = author.time().map(|t| t.seconds).unwrap_or(0);
    Ok(CommitInfo {
        sha: commit.to_string(),
        subject,
        author: format!("{} <{}>", author.name, author.email),
        time,
    })
}

/// The directories the `paths` specs matched (see [`crate::protocol::FetchResult::roots`]) and
/// every entry under them (all of the tree when there are no specs).
pub fn walk(
    repo: &gix::Repository,
    commit: ObjectId,
    raw_specs: &[String],
    specs: &[Vec<SpecPart>],
    limits: &Limits,
) -> Result<(Vec<String>, Vec<TreeEntry>), Failure> {
    let bad = |e: gix::Error| Failure::refused(format!("commit {commit}: {}", chain(&e)));
    let root = repo.find_commit(commit).map_err(bad)?.tree().map_err(bad)?;
    let mut roots = Vec::new();
    if specs.is_empty() {
        roots.push((String::new(), root.id));
    }
    for (i, spec) in specs.iter().enumerate() {
        let before = roots.len();
        expand(repo, root.id, spec, String::new(), &mut roots)?;
        if roots.len() == before {
            return Err(Failure::refused(format!(
                "paths[{i}]: {} matches no directory at {}",
                raw_specs[i],
                commit.to_hex_with_len(7)
            )));
        }
    }
    roots.sort();
    roots.dedup();
    let outer: Vec<(String, ObjectId)> = roots
        .iter()
        .filter(|(p, _)| !roots.iter().any(|(q, _)| q != p && paths::within(q, p)))
        .cloned()
        .collect();
    let mut walker = Walker {
        repo,
        root: &root,
        limits,
        raw_specs,
        entries: Vec::new(),
        content_bytes: 0,
    };
    for (path, tree) in &outer {
        walker.dir(path, path, *tree)?;
    }
    Ok((outer.into_iter().map(|(p, _)| p).collect(), walker.entries))
}

/// The directories one spec matches, from `at` (the tree `tree` at path `dir`).
fn expand(
    repo: &gix::Repository,
    tree: ObjectId,
    spec: &[SpecPart],
    dir: String,
    out: &mut Vec<(String, ObjectId)>,
) -> Result<(), Failure> {
    let Some((first, rest)) = spec.split_first() else {
        out.push((dir, tree));
        return Ok(());
    };
    let t = repo
        .find_tree(tree)
        .map_err(|e| Failure::refused(format!("{dir}: {}", chain(&e))))?;
    for entry in t.iter() {
        let entry = entry.map_err(|e| Failure::refused(format!("{dir}: {}", chain(&e))))?;
        if !entry.mode().is_tree() {
            continue;
        }
        let Ok(name) = std::str::from_utf8(entry.filename()) else {
            continue;
        };
        if first.matches(name) {
            paths::check_component(&dir, entry.filename())
                .map_err(|e| Failure::refused(e.to_string()))?;
            expand(
                repo,
                entry.oid().to_owned(),
                rest,
                paths::join(&dir, name),
                out,
            )?;
        }
    }
    Ok(())
}

struct Walker<'a> {
    repo: &'a gix::Repository,
    root: &'a gix::Tree<'a>,
    limits: &'a Limits,
    raw_specs: &'a [String],
    entries: Vec<TreeEntry>,
    content_bytes: u64,
}

impl Walker<'_> {
    fn dir(&mut self, walk_root: &str, dir: &str, tree: ObjectId) -> Result<(), Failure> {
        let t = self
            .repo
            .find_tree(tree)
            .map_err(|e| Failure::refused(format!("{dir}: {}", chain(&e))))?;
        let mut subdirs = Vec::new();
        for entry in t.iter() {
            let entry = entry.map_err(|e| Failure::refused(format!("{dir}: {}", chain(&e))))?;
            paths::check_component(dir, entry.filename())
                .map_err(|e| Failure::refused(e.to_string()))?;
            let name = std::str::from_utf8(entry.filename()).unwrap_or_default();
            let path = paths::join(dir, name);
            if self.entries.len() >= self.limits.max_entries as usize {
                return Err(Failure::refused(format!(
                    "more than {} files under paths [{}] (--gitops-max-files)",
                    self.limits.max_entries,
                    self.raw_specs.join(", ")
                )));
            }
            let id = entry.oid().to_owned();
            let item = match entry.mode().kind() {
                GixKind::Tree => {
                    if path.split('/').count() > self.limits.max_depth as usize {
                        return Err(Failure::refused(format!(
                            "{path}: deeper than {} directories",
                            self.limits.max_depth
                        )));
                    }
                    subdirs.push((path.clone(), id));
                    entry_of(path, EntryKind::Dir, 0)
                }
                GixKind::Blob | GixKind::BlobExecutable => {
                    let kind = if entry.mode().kind() == GixKind::Blob {
                        EntryKind::File
                    } else {
                        EntryKind::Executable
                    };
                    self.file(path, kind, id)?
                }
                GixKind::Link => self.link(walk_root, path, id)?,
                GixKind::Commit => entry_of(path, EntryKind::Submodule, 0),
            };
            self.entries.push(item);
        }
        for (path, id) in subdirs {
            self.dir(walk_root, &path, id)?;
        }
        Ok(())
    }

    fn size(&self, path: &str, id: ObjectId) -> Result<u64, Failure> {
        let size = self
            .repo
            .find_header(id)
            .map_err(|e| Failure::refused(format!("{path}: {}", chain(&e))))?
            .size();
        if size > self.limits.max_file_bytes {
            return Err(Failure::refused(format!(
                "{path}: {}; a file may have at most {} (--gitops-max-file-bytes)",
                human_bytes(size),
                human_bytes(self.limits.max_file_bytes)
            )));
        }
        Ok(size)
    }

    fn file(&mut self, path: String, kind: EntryKind, id: ObjectId) -> Result<TreeEntry, Failure> {
        let size = self.size(&path, id)?;
        let mut item = entry_of(path, kind, size);
        if crate::check::is_manifest_like(&item.path) {
            self.content_bytes += size;
            if self.content_bytes > self.limits.max_content_bytes {
                return Err(Failure::refused(format!(
                    "more than {} of manifests under paths [{}]",
                    human_bytes(self.limits.max_content_bytes),
                    self.raw_specs.join(", ")
                )));
            }
            let blob = self
                .repo
                .find_blob(id)
                .map_err(|e| Failure::refused(format!("{}: {}", item.path, chain(&e))))?;
            item.content = blob.data.clone();
        }
        Ok(item)
    }

    fn link(&mut self, walk_root: &str, path: String, id: ObjectId) -> Result<TreeEntry, Failure> {
        let target = self.link_target(&path, id)?;
        let resolved = paths::follow_links(&path, &target, walk_root, |at| self.lookup(at))
            .map_err(|e| Failure::refused(e.to_string()))?;
        let mut item = entry_of(path, EntryKind::Symlink, target.len() as u64);
        item.target = resolved;
        Ok(item)
    }

    fn link_target(&self, path: &str, id: ObjectId) -> Result<Vec<u8>, Failure> {
        let size = self.size(path, id)?;
        if size > MAX_LINK_BYTES {
            return Err(Failure::refused(format!(
                "{path}: a symlink target of {}; at most {}",
                human_bytes(size),
                human_bytes(MAX_LINK_BYTES)
            )));
        }
        let blob = self
            .repo
            .find_blob(id)
            .map_err(|e| Failure::refused(format!("{path}: {}", chain(&e))))?;
        Ok(blob.data.clone())
    }

    fn lookup(&self, at: &str) -> Found {
        let Ok(Some(entry)) = self.root.lookup_entry_by_path(at) else {
            return Found::Other;
        };
        match entry.mode().kind() {
            GixKind::Blob | GixKind::BlobExecutable => Found::File,
            GixKind::Link => match self.link_target(at, entry.object_id()) {
                Ok(target) => Found::Link(target),
                Err(_) => Found::Other,
            },
            GixKind::Tree | GixKind::Commit => Found::Other,
        }
    }
}

fn entry_of(path: String, kind: EntryKind, size: u64) -> TreeEntry {
    TreeEntry {
        path,
        kind: kind as i32,
        size,
        content: Vec::new(),
        target: String::new(),
    }
}
