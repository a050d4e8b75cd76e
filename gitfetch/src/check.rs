//! The hub's second look at a worker's answer: the same limits, checked again, so a worker that
//! was subverted by what it parsed still cannot hand the hub more than a well-behaved one could.

use std::collections::HashMap;

use thiserror::Error;

use crate::{
    limits::human_bytes,
    paths,
    protocol::{EntryKind, FetchResult, Limits},
};

/// An answer that breaks a rule; the whole answer is dropped.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("the fetch worker's answer is refused: {0}")]
pub struct Unacceptable(pub String);

/// Checks `result` against `limits` (already [`Limits::effective`]).
pub fn result(result: &FetchResult, limits: &Limits) -> Result<(), Unacceptable> {
    let fail = |m: String| Err(Unacceptable(m));
    if result.error.is_some() {
        if !result.entries.is_empty() || !result.commit.is_empty() {
            return fail("an error answer carries a commit or entries".into());
        }
        return Ok(());
    }
    if result.commit.len() != 40 || !result.commit.bytes().all(|b| b.is_ascii_hexdigit()) {
        return fail(format!("commit {:?} is not a 40-hex id", result.commit));
    }
    if result.bytes_received > limits.max_fetch_bytes {
        return fail(format!(
            "{} received; at most {}",
            human_bytes(result.bytes_received),
            human_bytes(limits.max_fetch_bytes)
        ));
    }
    if result.entries.len() > limits.max_entries as usize {
        return fail(format!(
            "{} entries; at most {}",
            result.entries.len(),
            limits.max_entries
        ));
    }
    for root in &result.roots {
        if !root.is_empty() {
            check_path(root)?;
        }
    }
    let mut kinds: HashMap<&str, EntryKind> = HashMap::with_capacity(result.entries.len());
    let mut content = 0u64;
    for e in &result.entries {
        let kind = entry(e, limits)?;
        content += e.content.len() as u64;
        if kinds.insert(&e.path, kind).is_some() {
            return fail(format!("{} is listed twice", e.path));
        }
    }
    if content > limits.max_content_bytes {
        return fail(format!(
            "{} of content; at most {}",
            human_bytes(content),
            human_bytes(limits.max_content_bytes)
        ));
    }
    for e in &result.entries {
        if e.kind == EntryKind::Symlink as i32
            && !matches!(
                kinds.get(e.target.as_str()),
                Some(EntryKind::File | EntryKind::Executable)
            )
        {
            return fail(format!(
                "{}: its target {} is not a listed file",
                e.path, e.target
            ));
        }
    }
    Ok(())
}

fn entry(e: &crate::protocol::TreeEntry, limits: &Limits) -> Result<EntryKind, Unacceptable> {
    let fail = |m: String| Err(Unacceptable(m));
    let depth = check_path(&e.path)?;
    let kind = EntryKind::try_from(e.kind).unwrap_or(EntryKind::Unspecified);
    if kind == EntryKind::Dir && depth > limits.max_depth {
        return fail(format!(
            "{}: deeper than {} directories",
            e.path, limits.max_depth
        ));
    }
    match kind {
        EntryKind::Unspecified => return fail(format!("{}: no kind", e.path)),
        EntryKind::File | EntryKind::Executable => {
            if e.size > limits.max_file_bytes {
                return fail(format!(
                    "{}: {} over the file limit",
                    e.path,
                    human_bytes(e.size)
                ));
            }
            let manifest = is_manifest_like(&e.path);
            if manifest && e.content.len() as u64 != e.size {
                return fail(format!("{}: content length differs from its size", e.path));
            }
            if !manifest && !e.content.is_empty() {
                return fail(format!(
                    "{}: content for a file that is not a manifest",
                    e.path
                ));
            }
        }
        EntryKind::Symlink => {
            if e.target.is_empty() || !e.content.is_empty() {
                return fail(format!("{}: a symlink without a resolved target", e.path));
            }
        }
        EntryKind::Submodule | EntryKind::Dir => {
            if !e.content.is_empty() {
                return fail(format!("{}: content for a directory or submodule", e.path));
            }
        }
    }
    Ok(kind)
}

/// Checks every component of a `/`-separated path; returns its depth.
fn check_path(path: &str) -> Result<u32, Unacceptable> {
    let mut parent = String::new();
    let mut depth = 0;
    for component in path.split('/') {
        paths::check_component(&parent, component.as_bytes())
            .map_err(|err| Unacceptable(err.to_string()))?;
        parent = paths::join(&parent, component);
        depth += 1;
    }
    Ok(depth)
}

/// Files whose content an answer carries: `.yaml`, `.yml`, `.json` and `.fleetignore`.
pub fn is_manifest_like(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name == ".fleetignore"
        || [".yaml", ".yml", ".json"]
            .iter()
            .any(|ext| name.len() > ext.len() && name.ends_with(ext))
}

#[cfg(test)]
mod tests;
