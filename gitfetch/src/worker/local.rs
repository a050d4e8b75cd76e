//! `file://` repositories, read in place with `gix::open` (isolated: no configuration, hooks or
//! includes of that repository are read), only under the configured roots.

use std::path::{Path, PathBuf};

use gix::ObjectId;

use super::{Failure, fetch::chain};
use crate::protocol::{ErrorKind, Want};

/// Opens the repository a `file://` URL names, if it lies under one of `roots` once every
/// symlink is resolved.
pub fn open(url: &gix::Url, roots: &[String]) -> Result<gix::Repository, Failure> {
    let path = PathBuf::from(url.path.to_string());
    if roots.is_empty() {
        return Err(Failure::request(format!(
            "repo file://{}: file:// repositories are refused (no --gitops-file-root)",
            path.display()
        )));
    }
    let real = path.canonicalize().map_err(|e| {
        Failure::new(
            ErrorKind::NotFound,
            format!("repo file://{}: {e}", path.display()),
        )
    })?;
    let inside = roots.iter().any(|root| {
        Path::new(root)
            .canonicalize()
            .is_ok_and(|root| real.starts_with(root))
    });
    if !inside {
        return Err(Failure::request(format!(
            "repo file://{}: outside every --gitops-file-root ({})",
            path.display(),
            roots.join(", ")
        )));
    }
    gix::open_opts(&real, gix::open::Options::isolated()).map_err(|e| {
        Failure::new(
            ErrorKind::NotFound,
            format!(
                "repo file://{}: not a Git repository: {}",
                path.display(),
                chain(&e)
            ),
        )
    })
}

/// The commit a branch, tag or commit id names in a local repository.
pub fn resolve(repo: &gix::Repository, want: &Want) -> Result<ObjectId, Failure> {
    let (name, what) = match want {
        Want::Branch(b) => (format!("refs/heads/{b}"), format!("branch {b:?}")),
        Want::Revision(r) if r.len() == 40 && r.bytes().all(|b| b.is_ascii_hexdigit()) => {
            let id = ObjectId::from_hex(r.as_bytes())
                .map_err(|e| Failure::request(format!("revision {r:?}: {e}")))?;
            return repo.find_commit(id).map(|c| c.id).map_err(|_| {
                Failure::new(ErrorKind::NotFound, format!("revision {r:?} was not found"))
            });
        }
        Want::Revision(t) => (format!("refs/tags/{t}"), format!("revision {t:?}")),
    };
    let missing = || Failure::new(ErrorKind::NotFound, format!("{what} was not found"));
    let mut reference = repo
        .try_find_reference(name.as_str())
        .map_err(|e| Failure::request(format!("{what}: {}", chain(&e))))?
        .ok_or_else(missing)?;
    reference
        .peel_to_commit()
        .map(|c| c.id)
        .map_err(|e| Failure::refused(format!("{what} does not name a commit: {}", chain(&e))))
}
