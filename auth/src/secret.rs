//! Secrets: a wrapper that never prints its content, and files created private from the start.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// A secret string (an NKey seed, a credentials file). `Debug` and `Display` print
/// `<redacted>`; only [`Secret::expose`] gives the content.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(s: impl Into<String>) -> Self {
        Self(s.into())
    }

    /// The secret itself, for the one place that must use it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Writes `bytes` to `path` atomically with mode 0600: a temporary file created 0600 in the
/// same directory (never readable by others, not even briefly), fsync, rename, directory fsync.
pub fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = parent_dir(path);
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("secret");
    // Unique per process and call: two writers of the same file never share a temporary.
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let tmp = dir.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        fs::File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// The directory holding `path`: a bare file name has the parent "", which cannot be opened to
/// fsync, so it is ".".
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Writes a file others may read (configuration, JWTs, certificates), atomically.
pub fn write_public(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_private(path, bytes)?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o644))
}

/// Creates a directory only its owner can enter (created 0700, not tightened afterwards; an
/// existing directory is tightened to 0700).
pub fn create_private_dir(path: &Path) -> io::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o700))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn secrets_never_print() {
        let s = Secret::new("SUAEXAMPLESEED");
        assert_eq!(format!("{s:?}"), "<redacted>");
        assert_eq!(format!("{s}"), "<redacted>");
        assert_eq!(format!("{:?}", Some(&s)), "Some(<redacted>)");
        assert_eq!(s.expose(), "SUAEXAMPLESEED");
    }

    #[test]
    fn files_are_private_replaced_atomically_and_leave_no_temporaries() {
        let dir = tempfile::tempdir().unwrap();
        let keys = dir.path().join("a/b");
        create_private_dir(&keys).unwrap();
        assert_eq!(mode(&keys), 0o700);
        let path = keys.join("seed.nk");
        write_private(&path, b"one").unwrap();
        assert_eq!(mode(&path), 0o600);
        write_private(&path, b"two").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        assert_eq!(mode(&path), 0o600);
        let public = keys.join("conf");
        write_public(&public, b"x").unwrap();
        assert_eq!(mode(&public), 0o644);
        let names: Vec<_> = fs::read_dir(&keys)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        // A write that cannot happen leaves nothing behind and says why.
        let err = write_private(&dir.path().join("missing/x"), b"x").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn a_bare_file_name_is_in_the_current_directory() {
        assert_eq!(parent_dir(Path::new("x.creds")), Path::new("."));
        assert_eq!(parent_dir(Path::new("a/x.creds")), Path::new("a"));
        assert_eq!(parent_dir(Path::new("/x.creds")), Path::new("/"));
    }

    #[test]
    fn concurrent_writers_of_one_file_do_not_collide() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cluster.creds");
        std::thread::scope(|s| {
            for i in 0..8 {
                let path = &path;
                s.spawn(move || write_private(path, format!("{i}").as_bytes()).unwrap());
            }
        });
        assert_eq!(mode(&path), 0o600);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
