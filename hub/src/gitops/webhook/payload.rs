//! What a push webhook's body says (pure): the repository's URLs, the ref pushed and the commit
//! it now points at; and how a URL is compared with a GitRepo's `repo`.
//!
//! Read from GitHub (`ref`, `after`, `repository.{clone_url,ssh_url,html_url,git_url}`),
//! GitLab (`ref`, `checkout_sha` or `after`, `project.{git_http_url,git_ssh_url,web_url}`,
//! `repository.{git_http_url,git_ssh_url,homepage}`) and Gitea (`ref`, `after`,
//! `repository.{clone_url,ssh_url,html_url}`) payloads, JSON or GitHub's form encoding
//! (`payload=<json>`).

use super::verify::Provider;

/// A push, as its payload says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Push {
    /// The repository's URLs, normalised ([`normalise`]).
    pub urls: Vec<String>,
    /// The ref pushed (`refs/heads/main`, `refs/tags/v1`); empty in a ping.
    pub git_ref: String,
    /// The commit it points at now; empty in a ping, all zeros when the ref was deleted.
    pub commit: String,
}

impl Push {
    /// Whether the ref was deleted (nothing to fetch).
    pub fn deleted(&self) -> bool {
        !self.commit.is_empty() && self.commit.bytes().all(|b| b == b'0')
    }
}

/// The push a body describes, or what is wrong with it.
pub fn parse(provider: Provider, content_type: &str, body: &[u8]) -> Result<Push, String> {
    let json = if content_type.split(';').next().is_some_and(|t| {
        t.trim()
            .eq_ignore_ascii_case("application/x-www-form-urlencoded")
    }) {
        form_urlencoded::parse(body)
            .find(|(k, _)| k == "payload")
            .map(|(_, v)| v.into_owned().into_bytes())
            .ok_or("a form-encoded body without a payload field")?
    } else {
        body.to_vec()
    };
    let v: serde_json::Value =
        serde_json::from_slice(&json).map_err(|e| format!("the body is not JSON: {e}"))?;
    let text = |path: &[&str]| -> String {
        let mut at = &v;
        for p in path {
            match at.get(p) {
                Some(next) => at = next,
                None => return String::new(),
            }
        }
        at.as_str().unwrap_or_default().to_owned()
    };
    let url_fields: &[&[&str]] = match provider {
        Provider::GitHub => &[
            &["repository", "clone_url"],
            &["repository", "ssh_url"],
            &["repository", "html_url"],
            &["repository", "git_url"],
        ],
        Provider::GitLab => &[
            &["project", "git_http_url"],
            &["project", "git_ssh_url"],
            &["project", "web_url"],
            &["repository", "git_http_url"],
            &["repository", "git_ssh_url"],
            &["repository", "homepage"],
        ],
        Provider::Gitea => &[
            &["repository", "clone_url"],
            &["repository", "ssh_url"],
            &["repository", "html_url"],
        ],
    };
    let mut urls: Vec<String> = url_fields
        .iter()
        .map(|p| text(p))
        .filter(|u| !u.is_empty())
        .map(|u| normalise(&u))
        .collect();
    urls.sort();
    urls.dedup();
    if urls.is_empty() {
        return Err("the payload names no repository URL".into());
    }
    let mut commit = text(&["after"]);
    if provider == Provider::GitLab {
        let checkout = text(&["checkout_sha"]);
        if !checkout.is_empty() {
            commit = checkout;
        }
    }
    if !commit.is_empty() && commit.len() != 40 && commit.len() != 64 {
        return Err(format!("after: {commit:?} is not a commit id"));
    }
    if !commit.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("after: not a commit id".into());
    }
    Ok(Push {
        urls,
        git_ref: text(&["ref"]),
        commit: commit.to_ascii_lowercase(),
    })
}

/// A repository URL as compared: without scheme, user, port, trailing `/` or `.git`, the host
/// lower-cased; scp-like `git@host:path` as `host/path`. So GitHub's `clone_url`
/// (`https://github.com/o/r.git`), `ssh_url` (`git@github.com:o/r.git`) and `html_url` name one
/// repository. The path keeps its case (a self-hosted server's paths may be case-sensitive),
/// except on the hosts in [`CASELESS_HOSTS`], whose paths are not: there it is lower-cased too,
/// so a GitRepo typed `github.com/Org/Repo` matches GitHub's `org/repo`.
pub fn normalise(url: &str) -> String {
    let url = url.trim();
    let (rest, scp) = match url.split_once("://") {
        Some((_, rest)) => (rest, false),
        None => (url, true),
    };
    let (authority, path) = if scp {
        // `user@host:path` (a colon before any slash), else a bare `host/path`.
        match rest.split_once(':') {
            Some((a, p)) if !a.contains('/') => (a, p),
            _ => rest.split_once('/').unwrap_or((rest, "")),
        }
    } else {
        rest.split_once('/').unwrap_or((rest, ""))
    };
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match host.rsplit_once(':') {
        // A port (not part of a bracketed IPv6 address).
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) && !port.contains(']') => h,
        _ => host,
    };
    let path = path.trim_matches('/');
    let path = path
        .strip_suffix(".git")
        .unwrap_or(path)
        .trim_end_matches('/');
    let host = host.to_ascii_lowercase();
    if CASELESS_HOSTS.contains(&host.as_str()) {
        format!("{host}/{}", path.to_ascii_lowercase())
    } else {
        format!("{host}/{path}")
    }
}

/// Hosts whose repository paths compare without case (GitHub's and GitLab's own).
pub const CASELESS_HOSTS: [&str; 4] = [
    "github.com",
    "www.github.com",
    "gitlab.com",
    "www.gitlab.com",
];

/// How URLs are compared, for the hub's log when none matched.
pub const COMPARED: &str = "compared without scheme, user, port, trailing / or .git, the host \
                            lower-cased, the path's case kept except on github.com and gitlab.com";

/// Whether a push of `git_ref` concerns a GitRepo following `branch` (or pinned at `revision`,
/// a tag pushed again).
pub fn follows(branch: &str, revision: &str, git_ref: &str) -> bool {
    if !branch.is_empty() {
        return git_ref.strip_prefix("refs/heads/") == Some(branch);
    }
    !revision.is_empty() && git_ref.strip_prefix("refs/tags/") == Some(revision)
}
