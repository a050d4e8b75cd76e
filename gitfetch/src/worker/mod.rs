//! The fetch worker (gix inside): runs only in the `flotilla-git-fetch` process, one fetch per
//! process, with its resource limits set first ([`rlimit`]).
//!
//! [`run`] takes the request and answers it: connect ([`net`]: address checks, a byte-counting
//! stream; [`http`]: gix's smart-HTTP transport over our own HTTP and HTTPS client; [`ssh`]: an
//! in-process SSH channel to `git-upload-pack`), resolve and shallow-fetch the commit into a
//! bare cache repository ([`fetch`]), or read a `file://` repository in place ([`local`]), then
//! walk the tree under `paths` with every check of the design's §9 ([`walk`]).

pub mod fetch;
pub mod http;
pub mod local;
pub mod net;
pub mod rlimit;
pub mod ssh;
pub mod walk;

use std::path::Path;

use crate::protocol::{ErrorKind, FetchRequest, FetchResult, Want};

/// A failure with its class: what the worker answers and exits with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The class (and exit code).
    pub kind: ErrorKind,
    /// What went wrong, for the GitRepo's status.
    pub message: String,
}

impl Failure {
    /// A failure of class `kind`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Failure {
            kind,
            message: message.into(),
        }
    }
    /// The repository broke a limit or rule.
    pub fn refused(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Refused, message)
    }
    /// The network or server failed.
    pub fn transport(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Transport, message)
    }
    /// The request cannot be served as asked.
    pub fn request(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Request, message)
    }
}

/// Answers one request. `cache` is this GitRepo's bare cache repository (created when missing).
pub fn run(request: &FetchRequest, cache: &Path) -> FetchResult {
    match answer(request, cache) {
        Ok(result) => result,
        Err(failure) => FetchResult::failed(failure.kind, failure.message),
    }
}

fn answer(request: &FetchRequest, cache: &Path) -> Result<FetchResult, Failure> {
    let limits = request.limits.unwrap_or_default().effective();
    let want = request
        .want
        .as_ref()
        .ok_or_else(|| Failure::request("the request names neither a branch nor a revision"))?;
    let (Want::Branch(name) | Want::Revision(name)) = want;
    if name.is_empty() {
        return Err(Failure::request("an empty branch or revision"));
    }
    let url = gix::Url::from_bytes(request.url.as_str().into())
        .map_err(|e| Failure::request(format!("repo {:?}: not a Git URL: {e}", request.url)))?;
    let specs = request
        .paths
        .iter()
        .map(|p| crate::paths::parse_spec(p))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Failure::request(e.to_string()))?;
    let (repo, commit, bytes_received) = match url.scheme {
        gix::url::Scheme::File => {
            let repo = local::open(&url, &request.file_roots)?;
            let commit = local::resolve(&repo, want)?;
            (repo, commit, 0)
        }
        gix::url::Scheme::Git
        | gix::url::Scheme::Http
        | gix::url::Scheme::Https
        | gix::url::Scheme::Ssh => {
            let fetched = fetch::fetch(cache, &url, want, &limits, request)?;
            (fetched.repo, fetched.commit, fetched.bytes_received)
        }
        other => {
            return Err(Failure::request(format!(
                "repo {:?}: the {} transport is not built (https://, ssh://, http://, git:// and file:// are)",
                request.url,
                other.as_str()
            )));
        }
    };
    if request.list_only {
        return Ok(FetchResult {
            commit: commit.to_string(),
            bytes_received,
            ..Default::default()
        });
    }
    let info = walk::commit_info(&repo, commit)?;
    let (roots, entries) = walk::walk(&repo, commit, &request.paths, &specs, &limits)?;
    Ok(FetchResult {
        commit: commit.to_string(),
        info: Some(info),
        entries,
        error: None,
        bytes_received,
        roots,
    })
}
