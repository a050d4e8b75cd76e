//! A worker's answer indexed by path.

use std::collections::BTreeMap;

use flotilla_gitfetch::protocol::{EntryKind, FetchResult, TreeEntry};

/// The fetched entries by path (sorted), with the roots the `paths` matched.
#[derive(Debug, Clone, Default)]
pub struct Tree {
    /// The directories the GitRepo's `paths` matched.
    pub roots: Vec<String>,
    entries: BTreeMap<String, TreeEntry>,
}

impl Tree {
    /// Indexes a checked answer (`flotilla_gitfetch::check::result` passed).
    pub fn new(result: &FetchResult) -> Self {
        Tree {
            roots: result.roots.clone(),
            entries: result
                .entries
                .iter()
                .map(|e| (e.path.clone(), e.clone()))
                .collect(),
        }
    }

    /// Every entry, in path order.
    pub fn entries(&self) -> impl Iterator<Item = &TreeEntry> {
        self.entries.values()
    }

    /// The entry at `path`.
    pub fn get(&self, path: &str) -> Option<&TreeEntry> {
        self.entries.get(path)
    }

    /// The kind of an entry.
    pub fn kind(e: &TreeEntry) -> EntryKind {
        EntryKind::try_from(e.kind).unwrap_or(EntryKind::Unspecified)
    }

    /// A file's content, through its symlink if it is one (the worker resolved the chain).
    pub fn content(&self, path: &str) -> Option<&[u8]> {
        let e = self.entries.get(path)?;
        match Self::kind(e) {
            EntryKind::File | EntryKind::Executable => Some(&e.content),
            EntryKind::Symlink => self.entries.get(&e.target).map(|t| t.content.as_slice()),
            _ => None,
        }
    }
}
