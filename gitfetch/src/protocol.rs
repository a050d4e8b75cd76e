//! What the hub sends the worker on stdin and what the worker answers on stdout: one protobuf
//! message each way (prost derives; the worker protocol is private to this crate's two halves,
//! so it needs no `.proto` file shared with other languages).
//!
//! The hub treats every answer as hostile: [`crate::check::result`] checks it again against the
//! same limits before anything is rendered from it.

/// One fetch: where, what, which paths, and the limits to hold to.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FetchRequest {
    /// The repository URL as the GitRepo names it (`https://`, `http://`, `git://`, `file://`;
    /// no user-info).
    #[prost(string, tag = "1")]
    pub url: String,
    /// The branch or revision to follow.
    #[prost(oneof = "Want", tags = "2, 3")]
    pub want: Option<Want>,
    /// Directories to read (relative, `/`-separated; `*` and `?` within one component).
    /// Empty means the whole tree.
    #[prost(string, repeated, tag = "4")]
    pub paths: Vec<String>,
    /// The limits of this fetch; missing means [`Limits::default`].
    #[prost(message, optional, tag = "5")]
    pub limits: Option<Limits>,
    /// Directories under which `file://` repositories may be read in place; empty refuses
    /// `file://` altogether.
    #[prost(string, repeated, tag = "6")]
    pub file_roots: Vec<String>,
    /// Connect to loopback addresses (tests, single-machine labs). Link-local addresses are
    /// refused whatever this says.
    #[prost(bool, tag = "7")]
    pub allow_loopback: bool,
    /// Only resolve the branch or revision to a commit (a poll); fetch no objects.
    #[prost(bool, tag = "8")]
    pub list_only: bool,
    /// Credentials for the repository (the GitRepo's `clientSecretName`), used only when the
    /// server asks (HTTP 401) and only over https:// (never in the clear). Never logged: its
    /// `Debug` shows where it comes from, not what it holds.
    #[prost(message, optional, tag = "9")]
    pub credentials: Option<Credentials>,
    /// PEM certificates trusted for https:// besides the system's roots (the GitRepo's
    /// `caBundle`).
    #[prost(bytes = "vec", tag = "10")]
    pub ca_bundle: Vec<u8>,
}

/// Credentials for one repository, from a hub Secret. Its `Debug` names the source and the
/// kind, never a value.
#[derive(Clone, PartialEq, prost::Message)]
#[prost(skip_debug)]
pub struct Credentials {
    /// Where they come from (`Secret edge-apps/shop-git`), for messages; not secret.
    #[prost(string, tag = "1")]
    pub source: String,
    /// The credential itself.
    #[prost(oneof = "Credential", tags = "2, 3")]
    pub credential: Option<Credential>,
}

/// A credential of one kind.
#[derive(Clone, PartialEq, prost::Oneof)]
#[prost(skip_debug)]
pub enum Credential {
    /// HTTP basic authentication (a token goes in `password`), sent over https:// only.
    #[prost(message, tag = "2")]
    Basic(BasicAuth),
    /// An SSH private key (for `ssh://`, whose transport is not built yet).
    #[prost(message, tag = "3")]
    Ssh(SshKey),
}

/// A user name and password (or token) for HTTP basic authentication.
#[derive(Clone, PartialEq, prost::Message)]
#[prost(skip_debug)]
pub struct BasicAuth {
    /// The user name.
    #[prost(string, tag = "1")]
    pub username: String,
    /// The password or token.
    #[prost(string, tag = "2")]
    pub password: String,
}

/// An SSH private key and the host keys to trust.
#[derive(Clone, PartialEq, prost::Message)]
#[prost(skip_debug)]
pub struct SshKey {
    /// The private key (OpenSSH or PEM armour).
    #[prost(bytes = "vec", tag = "1")]
    pub private_key: Vec<u8>,
    /// `known_hosts` lines for the server's host key.
    #[prost(string, tag = "2")]
    pub known_hosts: String,
}

impl Credentials {
    /// The kind, as messages name it.
    pub fn kind(&self) -> &'static str {
        match self.credential {
            Some(Credential::Basic(_)) => "basic-auth",
            Some(Credential::Ssh(_)) => "ssh-auth",
            None => "none",
        }
    }
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("source", &self.source)
            .field("kind", &self.kind())
            .finish()
    }
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Credential::Basic(_) => "Basic(<redacted>)",
            Credential::Ssh(_) => "Ssh(<redacted>)",
        })
    }
}

impl std::fmt::Debug for BasicAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BasicAuth(<redacted>)")
    }
}

impl std::fmt::Debug for SshKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SshKey(<redacted>)")
    }
}

/// What to follow: exactly one of a branch or a revision.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Want {
    /// A branch name (`main`, `release/1.2`), followed at its tip.
    #[prost(string, tag = "2")]
    Branch(String),
    /// A pinned revision: a 40-hex commit id or a tag name.
    #[prost(string, tag = "3")]
    Revision(String),
}

/// The limits of one fetch (the hub's `--gitops-*` settings). Zero in a field means its default,
/// so a request from an older hub still gets bounds.
#[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
pub struct Limits {
    /// Bytes received from the server, everything included.
    #[prost(uint64, tag = "1")]
    pub max_fetch_bytes: u64,
    /// One file's size (read from the object header before the blob).
    #[prost(uint64, tag = "2")]
    pub max_file_bytes: u64,
    /// Entries (files, links, directories) visited under `paths`.
    #[prost(uint32, tag = "3")]
    pub max_entries: u32,
    /// Directory depth under the repository root.
    #[prost(uint32, tag = "4")]
    pub max_depth: u32,
    /// Bytes of file content in the answer.
    #[prost(uint64, tag = "5")]
    pub max_content_bytes: u64,
    /// Refs the server may advertise for the one asked.
    #[prost(uint32, tag = "6")]
    pub max_refs: u32,
}

/// The worker's answer.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FetchResult {
    /// The commit the branch or revision resolved to (40 hex).
    #[prost(string, tag = "1")]
    pub commit: String,
    /// That commit's subject, author and time; absent for `list_only`.
    #[prost(message, optional, tag = "2")]
    pub info: Option<CommitInfo>,
    /// Every entry under `paths`, in tree order; empty for `list_only`.
    #[prost(message, repeated, tag = "3")]
    pub entries: Vec<TreeEntry>,
    /// Why the fetch was refused or failed; the rest of the answer is then empty.
    #[prost(message, optional, tag = "4")]
    pub error: Option<FetchError>,
    /// Bytes received from the server (0 for `file://`).
    #[prost(uint64, tag = "5")]
    pub bytes_received: u64,
    /// The directories the `paths` entries matched, sorted, none inside another (`""` is the
    /// repository root): where bundle discovery starts.
    #[prost(string, repeated, tag = "6")]
    pub roots: Vec<String>,
}

/// One commit, as status and the dashboard show it.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct CommitInfo {
    /// Full commit id.
    #[prost(string, tag = "1")]
    pub sha: String,
    /// The first line of the message, at most 200 bytes.
    #[prost(string, tag = "2")]
    pub subject: String,
    /// `Name <email>`.
    #[prost(string, tag = "3")]
    pub author: String,
    /// Author time, seconds since the Unix epoch.
    #[prost(int64, tag = "4")]
    pub time: i64,
}

/// One entry of the tree under `paths`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TreeEntry {
    /// Path from the repository root, `/`-separated, every component checked.
    #[prost(string, tag = "1")]
    pub path: String,
    /// What the entry is.
    #[prost(enumeration = "EntryKind", tag = "2")]
    pub kind: i32,
    /// The blob's size in bytes (files and links).
    #[prost(uint64, tag = "3")]
    pub size: u64,
    /// The content of manifest-like files (`.yaml`, `.yml`, `.json`, `.fleetignore`); other
    /// files are listed without content (nothing renders them).
    #[prost(bytes = "vec", tag = "4")]
    pub content: Vec<u8>,
    /// For a symlink: the path (from the repository root) it resolves to, lexically, through
    /// at most 8 links; always inside the `paths` entry the link was found under.
    #[prost(string, tag = "5")]
    pub target: String,
}

/// The kinds of tree entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum EntryKind {
    /// Never sent; a decoder's default.
    Unspecified = 0,
    /// A regular file.
    File = 1,
    /// An executable file.
    Executable = 2,
    /// A symbolic link, resolved into `target`.
    Symlink = 3,
    /// A submodule (gitlink): never followed; a bundle holding one is refused.
    Submodule = 4,
    /// A directory.
    Dir = 5,
}

/// A failure, classified so the hub can back off, report and count it.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct FetchError {
    /// The class of failure.
    #[prost(enumeration = "ErrorKind", tag = "1")]
    pub kind: i32,
    /// What went wrong, naming the file and the limit where there is one.
    #[prost(string, tag = "2")]
    pub message: String,
}

/// Classes of failure (also the worker's exit codes: see [`ErrorKind::exit_code`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, prost::Enumeration)]
#[repr(i32)]
pub enum ErrorKind {
    /// Never sent.
    Unspecified = 0,
    /// The repository broke a limit or a rule (hostile or too big): not retried until a new
    /// commit or spec.
    Refused = 1,
    /// Network, protocol or server failure: retried with back-off.
    Transport = 2,
    /// The request itself is unusable (a URL scheme, a `file://` outside the roots).
    Request = 3,
    /// The branch, tag or commit does not exist on the server.
    NotFound = 4,
}

impl ErrorKind {
    /// The worker's exit code for this class: 2 refused, 3 transport, 4 request, 5 not found.
    pub fn exit_code(self) -> i32 {
        match self {
            ErrorKind::Unspecified => 1,
            ErrorKind::Refused => 2,
            ErrorKind::Transport => 3,
            ErrorKind::Request => 4,
            ErrorKind::NotFound => 5,
        }
    }
}

impl FetchResult {
    /// An answer carrying only an error.
    pub fn failed(kind: ErrorKind, message: impl Into<String>) -> Self {
        FetchResult {
            error: Some(FetchError {
                kind: kind as i32,
                message: message.into(),
            }),
            ..Default::default()
        }
    }
}
