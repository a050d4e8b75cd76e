//! A simulated container's files (pure): a read-only image — the directories every container
//! has, `/etc/hostname`, the ConfigMaps and Secrets it mounts — under a writable layer kept per
//! pod, bounded in bytes (`No space left on device` past it), gone with the pod or the agent.

use bytes::Bytes;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Largest writable layer of one pod.
pub const POD_LAYER_BYTES: usize = 64 * 1024 * 1024;

/// A file or a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// A directory.
    Dir,
    /// A file and its bytes.
    File(Bytes),
}

/// Why a file operation failed, worded as coreutils words `errno`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FsError {
    /// `ENOENT`.
    #[error("No such file or directory")]
    NotFound,
    /// `ENOTDIR`.
    #[error("Not a directory")]
    NotDir,
    /// `EISDIR`.
    #[error("Is a directory")]
    IsDir,
    /// `EEXIST`.
    #[error("File exists")]
    Exists,
    /// `EROFS`: the image (a mounted ConfigMap or Secret) cannot be written.
    #[error("Read-only file system")]
    ReadOnly,
    /// `ENOSPC`: the pod's writable layer is full.
    #[error("No space left on device")]
    NoSpace,
    /// `ENOTEMPTY`.
    #[error("Directory not empty")]
    NotEmpty,
}

/// The writable layer of one pod.
#[derive(Debug)]
pub struct Layer {
    nodes: BTreeMap<String, Node>,
    bytes: usize,
    limit: usize,
}

impl Layer {
    /// An empty layer of at most `limit` bytes of files.
    pub fn new(limit: usize) -> Self {
        Self {
            nodes: BTreeMap::new(),
            bytes: 0,
            limit,
        }
    }

    /// The bytes its files hold.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// The image: its files and directories by absolute path, and the directories mounted
/// read-only (ConfigMap and Secret volumes), where nothing may be written.
#[derive(Debug, Clone, Default)]
pub struct Image {
    nodes: BTreeMap<String, Node>,
    read_only: Vec<String>,
}

impl Image {
    fn contains_key(&self, path: &str) -> bool {
        self.nodes.contains_key(path)
    }

    fn get(&self, path: &str) -> Option<&Node> {
        self.nodes.get(path)
    }

    fn range(
        &self,
        from: std::ops::RangeFrom<String>,
    ) -> std::collections::btree_map::Range<'_, String, Node> {
        self.nodes.range(from)
    }

    /// Whether `path` is a read-only mount or below one.
    fn read_only(&self, path: &str) -> bool {
        self.read_only.iter().any(|m| {
            path == m
                || path
                    .strip_prefix(m.as_str())
                    .is_some_and(|r| r.starts_with('/'))
        })
    }
}

/// What a command of the container sees: the image under the pod's writable layer.
#[derive(Debug, Clone)]
pub struct View {
    image: Arc<Image>,
    layer: Arc<Mutex<Layer>>,
}

/// `path` made absolute against `cwd`, `.` and `..` resolved, without a trailing `/`.
pub fn resolve(cwd: &str, path: &str) -> String {
    let joined = if path.starts_with('/') {
        path.to_string()
    } else {
        format!("{cwd}/{path}")
    };
    let mut parts: Vec<&str> = Vec::new();
    for part in joined.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    format!("/{}", parts.join("/"))
}

/// The directory holding `path` (`/` for `/`).
pub fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

/// The image's standard directories plus `files`, with every parent directory; `read_only`
/// the mounted directories.
pub fn image(files: impl IntoIterator<Item = (String, Bytes)>, read_only: Vec<String>) -> Image {
    let mut image = BTreeMap::new();
    for dir in [
        "/", "/bin", "/dev", "/etc", "/home", "/proc", "/root", "/tmp", "/usr", "/var",
    ] {
        image.insert(dir.to_string(), Node::Dir);
    }
    for (path, bytes) in files {
        let path = resolve("/", &path);
        let mut dir = parent(&path).to_string();
        loop {
            image.insert(dir.clone(), Node::Dir);
            if dir == "/" {
                break;
            }
            dir = parent(&dir).to_string();
        }
        image.insert(path, Node::File(bytes));
    }
    let read_only = read_only
        .iter()
        .map(|m| resolve("/", m))
        .collect::<Vec<_>>();
    for mount in &read_only {
        image.insert(mount.clone(), Node::Dir);
    }
    Image {
        nodes: image,
        read_only,
    }
}

impl View {
    /// The image under `layer`.
    pub fn new(image: Image, layer: Arc<Mutex<Layer>>) -> Self {
        Self {
            image: Arc::new(image),
            layer,
        }
    }

    fn layer(&self) -> std::sync::MutexGuard<'_, Layer> {
        self.layer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The node at `path` (absolute, resolved).
    pub fn get(&self, path: &str) -> Option<Node> {
        if let Some(node) = self.layer().nodes.get(path) {
            return Some(node.clone());
        }
        self.image.get(path).cloned()
    }

    /// Whether `path` is a directory.
    pub fn is_dir(&self, path: &str) -> bool {
        matches!(self.get(path), Some(Node::Dir))
    }

    /// A file's bytes.
    pub fn read(&self, path: &str) -> Result<Bytes, FsError> {
        match self.get(path) {
            Some(Node::File(b)) => Ok(b),
            Some(Node::Dir) => Err(FsError::IsDir),
            None => Err(FsError::NotFound),
        }
    }

    /// The names in a directory, sorted.
    pub fn list(&self, dir: &str) -> Result<Vec<String>, FsError> {
        match self.get(dir) {
            Some(Node::Dir) => {}
            Some(Node::File(_)) => return Err(FsError::NotDir),
            None => return Err(FsError::NotFound),
        }
        let prefix = if dir == "/" {
            "/".to_string()
        } else {
            format!("{dir}/")
        };
        let layer = self.layer();
        let mut names: Vec<String> = layer
            .nodes
            .range(prefix.clone()..)
            .map(|(k, _)| k)
            .take_while_prefix(&prefix)
            .chain(
                self.image
                    .range(prefix.clone()..)
                    .map(|(k, _)| k)
                    .take_while_prefix(&prefix),
            )
            .filter_map(|k| {
                let rest = &k[prefix.len()..];
                (!rest.is_empty() && !rest.contains('/')).then(|| rest.to_string())
            })
            .collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    /// Writes a file (`append`: after what it holds), its directory existing.
    pub fn write(&self, path: &str, data: &[u8], append: bool) -> Result<(), FsError> {
        if self.image.contains_key(path) || self.image.read_only(path) {
            return Err(FsError::ReadOnly);
        }
        self.check_dir(parent(path))?;
        let mut layer = self.layer();
        let old = match layer.nodes.get(path) {
            Some(Node::Dir) => return Err(FsError::IsDir),
            Some(Node::File(b)) => b.clone(),
            None => Bytes::new(),
        };
        let new = if append {
            let mut v = old.to_vec();
            v.extend_from_slice(data);
            Bytes::from(v)
        } else {
            Bytes::copy_from_slice(data)
        };
        let bytes = layer.bytes - old.len() + new.len();
        if bytes > layer.limit {
            return Err(FsError::NoSpace);
        }
        layer.bytes = bytes;
        layer.nodes.insert(path.to_string(), Node::File(new));
        Ok(())
    }

    fn check_dir(&self, dir: &str) -> Result<(), FsError> {
        match self.get(dir) {
            Some(Node::Dir) => Ok(()),
            Some(Node::File(_)) => Err(FsError::NotDir),
            None => Err(FsError::NotFound),
        }
    }

    /// Makes a directory (`parents`: and its missing parents, an existing one is fine).
    pub fn mkdir(&self, path: &str, parents: bool) -> Result<(), FsError> {
        match self.get(path) {
            Some(Node::Dir) if parents => return Ok(()),
            Some(_) => return Err(FsError::Exists),
            None => {}
        }
        if self.image.read_only(path) {
            return Err(FsError::ReadOnly);
        }
        if parents && path != "/" && self.get(parent(path)).is_none() {
            self.mkdir(parent(path), true)?;
        }
        self.check_dir(parent(path))?;
        self.layer().nodes.insert(path.to_string(), Node::Dir);
        Ok(())
    }

    /// Removes a file, or a directory with `recursive`.
    pub fn remove(&self, path: &str, recursive: bool) -> Result<(), FsError> {
        let node = self.get(path).ok_or(FsError::NotFound)?;
        let prefix = format!("{path}/");
        if self.image.contains_key(path)
            || self.image.read_only(path)
            || self
                .image
                .range(prefix.clone()..)
                .map(|(k, _)| k)
                .take_while_prefix(&prefix)
                .next()
                .is_some()
        {
            return Err(FsError::ReadOnly);
        }
        let mut layer = self.layer();
        let below: Vec<String> = layer
            .nodes
            .range(prefix.clone()..)
            .map(|(k, _)| k)
            .take_while_prefix(&prefix)
            .cloned()
            .collect();
        if node == Node::Dir && !below.is_empty() && !recursive {
            return Err(FsError::NotEmpty);
        }
        for key in below.iter().map(String::as_str).chain([path]) {
            if let Some(Node::File(b)) = layer.nodes.remove(key) {
                layer.bytes -= b.len();
            }
        }
        Ok(())
    }

    /// Every path under `dir` (itself first), depth first in name order: what `tar` archives.
    pub fn walk(&self, dir: &str) -> Vec<(String, Node)> {
        let mut out = Vec::new();
        if let Some(node) = self.get(dir) {
            out.push((dir.to_string(), node.clone()));
            if node == Node::Dir
                && let Ok(names) = self.list(dir)
            {
                for name in names {
                    out.extend(self.walk(&resolve(dir, &name)));
                }
            }
        }
        out
    }
}

/// Keys of a `BTreeMap` range while they start with a prefix.
trait TakeWhilePrefix<'a>: Iterator<Item = &'a String> + Sized {
    fn take_while_prefix(self, prefix: &'a str) -> impl Iterator<Item = &'a String> {
        self.take_while(move |k| k.starts_with(prefix))
    }
}

impl<'a, I: Iterator<Item = &'a String>> TakeWhilePrefix<'a> for I {}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(limit: usize) -> View {
        let image = image(
            [(
                "/etc/config/greeting".to_string(),
                Bytes::from_static(b"hello"),
            )],
            vec!["/etc/config".into()],
        );
        View::new(image, Arc::new(Mutex::new(Layer::new(limit))))
    }

    #[test]
    fn paths_resolve_as_a_shell_resolves_them() {
        assert_eq!(resolve("/tmp", "x/../y/./z"), "/tmp/y/z");
        assert_eq!(resolve("/tmp", "/etc/"), "/etc");
        assert_eq!(resolve("/", ".."), "/");
        assert_eq!(parent("/tmp/x"), "/tmp");
        assert_eq!(parent("/tmp"), "/");
    }

    #[test]
    fn the_image_is_read_only_and_the_layer_holds_what_is_written_within_its_bytes() {
        let v = view(10);
        assert_eq!(v.read("/etc/config/greeting").unwrap(), "hello");
        assert_eq!(v.list("/etc").unwrap(), ["config"]);
        assert_eq!(
            v.write("/etc/config/greeting", b"x", false),
            Err(FsError::ReadOnly)
        );
        v.write("/tmp/a", b"12345", false).unwrap();
        v.write("/tmp/a", b"678", true).unwrap();
        assert_eq!(v.read("/tmp/a").unwrap(), "12345678");
        assert_eq!(v.write("/tmp/b", b"123", false), Err(FsError::NoSpace));
        assert_eq!(v.write("/nope/b", b"1", false), Err(FsError::NotFound));
        v.mkdir("/tmp/d/e", true).unwrap();
        v.write("/tmp/d/e/f", b"1", false).unwrap();
        assert_eq!(v.list("/tmp").unwrap(), ["a", "d"]);
        assert_eq!(v.remove("/tmp/d", false), Err(FsError::NotEmpty));
        v.remove("/tmp/d", true).unwrap();
        v.remove("/tmp/a", false).unwrap();
        assert!(v.list("/tmp").unwrap().is_empty());
        assert_eq!(v.layer().bytes(), 0, "removed files give their bytes back");
        assert_eq!(v.remove("/etc/config", true), Err(FsError::ReadOnly));
        assert_eq!(
            v.write("/etc/config/new", b"x", false),
            Err(FsError::ReadOnly)
        );
        assert_eq!(v.mkdir("/etc/config/d", false), Err(FsError::ReadOnly));
        v.write("/etc/other", b"x", false).unwrap();
        let walked: Vec<String> = v.walk("/etc").into_iter().map(|(p, _)| p).collect();
        assert_eq!(
            walked,
            ["/etc", "/etc/config", "/etc/config/greeting", "/etc/other"]
        );
    }
}
