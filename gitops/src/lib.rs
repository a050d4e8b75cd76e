//! Git sources for Flotilla, pure: what the hub does with a fetch worker's answer.
//!
//! - [`tree`]: the answer's entries indexed by path, symlinks read through to their files.
//! - [`discover`]: which directories under the GitRepo's `paths` are bundles (Fleet's rules:
//!   a `fleet.yaml` makes one, a path root holding YAML makes one), and which files each holds;
//!   Helm, Kustomize, submodules and links leaving a bundle refused by name.
//! - [`fleetyaml`]: a bundle's `fleet.yaml`, strict; Fleet keys not built here refused by name.
//! - [`customize`]: its per-target customizations, overlays and patches, and their limits.
//! - [`overlay`]: a bundle's files after its overlays.
//! - [`name`]: bundle names (Fleet's `<gitrepo>-<path>`, shortened with a checksum).
//! - [`render`]: one bundle into a `ManifestWorkSpec` (canonical JSON manifests, namespaces
//!   applied, limits held) and its content hash, and one variant per customization.
//! - [`source`]: the `GitRepo` object (its YAML, validation, fetch request) and the
//!   ManifestWorkReplicaSet each rendered bundle becomes.
//! - [`targets`]: the Placement each target delivers over, and the one an inline target
//!   becomes (the hub writes and owns it).
//!
//! No I/O and no gix: the worker (`flotilla-gitfetch`) fetched and checked the tree already.
#![deny(missing_docs)]

pub mod customize;
pub mod discover;
pub mod fleetyaml;
pub mod name;
pub mod overlay;
pub mod render;
pub mod source;
pub mod targets;
pub mod tree;

use thiserror::Error;

/// One thing wrong with a bundle, located: a file (`apps/web/cm.yaml: document 2: …`) or a
/// bundle (`bundle shop-apps-web: …`). Rendering reports every problem it finds at once.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{at}: {message}")]
pub struct Problem {
    /// Where: a path in the repository, or `bundle <name>`.
    pub at: String,
    /// What is wrong and, where it helps, what to do.
    pub message: String,
}

impl Problem {
    /// A problem at `at`.
    pub fn new(at: impl Into<String>, message: impl Into<String>) -> Self {
        Problem {
            at: at.into(),
            message: message.into(),
        }
    }
}
