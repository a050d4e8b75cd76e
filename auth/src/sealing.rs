//! The hub's sealing key: an NKeys curve key (xkey) agents seal ManagedServiceAccount tokens
//! to, so a token rests in JetStream only as a sealed box. Every hub of one control plane must
//! hold the same key (any of them may open a box another stored) and it must survive restarts
//! (or every stored token is lost): it is a seed file, `keys/sealing.xk` in the secure
//! directory (written by `flotilla-hub init`) or the file `--sealing-key-file` names.
//!
//! [`load_or_create`] creates a missing file once — atomically, 0600 from the start, the first
//! of several hubs starting together wins and the others read its key — and refuses a file
//! others may read.

use nkeys::XKey;
use std::fs;
use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// The sealing key's file inside the secure directory.
pub const SEALING_KEY_FILE: &str = "keys/sealing.xk";

/// A sealing key file that cannot be used.
#[derive(Debug, Error)]
pub enum SealingKeyError {
    /// Reading or writing it failed.
    #[error("sealing key {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// It holds no curve key seed.
    #[error("sealing key {path}: not an NKeys curve key seed (a line starting with SX)")]
    NotASeed {
        /// The file.
        path: PathBuf,
    },
    /// Others may read it.
    #[error(
        "sealing key {path}: mode {mode:o} lets others read it; `chmod 600 {path}` (it opens \
         every ManagedServiceAccount token)"
    )]
    Readable {
        /// The file.
        path: PathBuf,
        /// Its mode.
        mode: u32,
    },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> SealingKeyError + '_ {
    move |source| SealingKeyError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Reads the key at `path`, creating it first when it does not exist. The boolean says
/// whether this call created it.
pub fn load_or_create(path: &Path) -> Result<(XKey, bool), SealingKeyError> {
    match fs::metadata(path) {
        Ok(_) => Ok((load(path)?, false)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let created = create(path)?;
            Ok((load(path)?, created))
        }
        Err(e) => Err(io_err(path)(e)),
    }
}

/// Reads the key at `path` (refused when others may read it).
pub fn load(path: &Path) -> Result<XKey, SealingKeyError> {
    let meta = fs::metadata(path).map_err(io_err(path))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(SealingKeyError::Readable {
            path: path.to_path_buf(),
            mode,
        });
    }
    let text = fs::read_to_string(path).map_err(io_err(path))?;
    let seed = text.trim();
    XKey::from_seed(seed)
        .ok()
        .filter(|_| seed.starts_with("SX"))
        .ok_or_else(|| SealingKeyError::NotASeed {
            path: path.to_path_buf(),
        })
}

/// Writes a new key to `path` unless a file is there: written 0600 to a temporary, then
/// hard-linked into place, which fails when another hub got there first (its key stays).
/// True when this call's key is the one in place.
pub fn create(path: &Path) -> Result<bool, SealingKeyError> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    fs::create_dir_all(dir).map_err(io_err(dir))?;
    let key = XKey::new();
    let seed = key.seed().map_err(|_| SealingKeyError::NotASeed {
        path: path.to_path_buf(),
    })?;
    // Named after the new key (random): hubs in containers share pid 1, and a file a crashed
    // attempt left behind must not block the next.
    let tmp = dir.join(format!(".sealing.{}.tmp", &key.public_key()[..20]));
    let written = (|| {
        use std::io::Write;
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(format!("{seed}\n").as_bytes())?;
        f.sync_all()
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(io_err(&tmp)(e));
    }
    let linked = fs::hard_link(&tmp, path);
    let _ = fs::remove_file(&tmp);
    match linked {
        Ok(()) => {
            if let Ok(d) = fs::File::open(dir) {
                let _ = d.sync_all();
            }
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(io_err(path)(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_key_is_created_private_once_and_read_back_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys/sealing.xk");
        let (first, created) = load_or_create(&path).unwrap();
        assert!(created);
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let (again, created) = load_or_create(&path).unwrap();
        assert!(!created);
        assert_eq!(first.public_key(), again.public_key());
        // A second hub racing to create finds the first one's key in place.
        assert!(!create(&path).unwrap());
        assert_eq!(load(&path).unwrap().public_key(), first.public_key());
    }

    #[test]
    fn a_readable_or_foreign_file_is_refused_with_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sealing.xk");
        load_or_create(&path).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        let e = load(&path).unwrap_err().to_string();
        assert!(e.contains("chmod 600"), "{e}");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        fs::write(&path, "SUAnotakey\n").unwrap();
        assert!(matches!(load(&path), Err(SealingKeyError::NotASeed { .. })));
    }
}
