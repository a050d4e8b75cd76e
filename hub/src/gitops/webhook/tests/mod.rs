//! The webhook's pure pieces and the decision, with fixtures shared by the test modules:
//! `verify` (signatures, payloads, URL and branch matching, redaction), `admission` (rate,
//! share, penalty, body pace, trusted proxies, the forward's size), `candidates` (the index and
//! the secrets a delivery is checked with), `replay` (the replay memory and status pacing).
use super::forward::too_large;
use super::forwarded::client;
use super::index::{Index, MAX_CANDIDATES};
use super::pace::{BODY_TIME, FLOOR, GRACE, deadline, too_slow};
use super::payload::{follows, normalise};
use super::pool::{Full, PENALTY, Place, Pool, holder_of, penalty};
use super::rate::{Rates, SOURCES};
use super::replay::{RECENT, Recent, SAME_COMMIT_EVERY, STATUS_EVERY, marks, record};
use super::verify::{Provider, Secret, sign};
use super::*;
use crate::webserver::Cidr;
use flotilla_api::v1::GitRepoSpec;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

fn github_push(git_ref: &str) -> Vec<u8> {
    serde_json::json!({
        "ref": git_ref,
        "after": SHA,
        "repository": {
            "clone_url": "https://GitHub.com/ops/shop.git",
            "ssh_url": "git@github.com:ops/shop.git",
            "html_url": "https://github.com/ops/shop",
        },
    })
    .to_string()
    .into_bytes()
}

fn gitlab_push() -> Vec<u8> {
    serde_json::json!({
        "object_kind": "push",
        "ref": "refs/heads/main",
        "after": "1111111111111111111111111111111111111111",
        "checkout_sha": SHA,
        "project": {
            "git_http_url": "https://gitlab.example.com/ops/shop.git",
            "git_ssh_url": "ssh://git@gitlab.example.com:2222/ops/shop.git",
            "web_url": "https://gitlab.example.com/ops/shop",
        },
    })
    .to_string()
    .into_bytes()
}

fn delivery(headers: &[(&str, &str)], body: Vec<u8>) -> Delivery {
    Delivery {
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        body: body.into(),
        target: None,
    }
}

fn github(secret: &str, event: &str, body: Vec<u8>) -> Delivery {
    let sig = format!("sha256={}", sign(secret.as_bytes(), &body));
    delivery(
        &[
            ("x-github-event", event),
            ("x-hub-signature-256", &sig),
            ("content-type", "application/json"),
        ],
        body,
    )
}

fn spec(repo: &str, branch: &str, secret: &str) -> GitRepoSpec {
    GitRepoSpec {
        repo: repo.into(),
        branch: branch.into(),
        webhook_secret: secret.into(),
        ..Default::default()
    }
}

fn data(key: &str, value: &str) -> Option<BTreeMap<String, Vec<u8>>> {
    Some([(key.to_owned(), value.as_bytes().to_vec())].into())
}

/// A GitRepo as the decision sees it: key, spec, its webhook Secret's data.
type Repo = (ObjectRef, GitRepoSpec, Option<BTreeMap<String, Vec<u8>>>);

/// The index over `repos`, as the GitRepos' task keeps it.
fn index_of(repos: &[Repo]) -> Index {
    let mut index = Index::default();
    for (k, s, _) in repos {
        index.set(k, Some(s));
    }
    index
}

/// The candidates of `d` among `repos`, found and given their secrets as the hub does (only the
/// provider's key out of each Secret).
fn candidates_of(d: &Delivery, r: &Read, repos: &[Repo]) -> (Vec<Candidate>, usize) {
    candidates_at(d, r, repos, 0)
}

/// [`candidates_of`] for the delivery whose round-robin by namespace starts at `turn`.
fn candidates_at(d: &Delivery, r: &Read, repos: &[Repo], turn: usize) -> (Vec<Candidate>, usize) {
    let (found, left_out) = index_of(repos).candidates(r, d.target.as_ref(), turn);
    let candidates = found
        .into_iter()
        .map(|(key, f)| {
            let data = repos.iter().find(|(k, _, _)| *k == key).unwrap().2.clone();
            let secret = (!f.secret.is_empty())
                .then_some(data)
                .flatten()
                .and_then(|data| {
                    r.provider
                        .secret_keys()
                        .iter()
                        .find_map(|k| data.get(*k).filter(|v| !v.is_empty()).cloned())
                })
                .map(Secret::new);
            Candidate {
                key,
                branch: f.branch,
                revision: f.revision,
                secret,
            }
        })
        .collect();
    (candidates, left_out)
}

/// Reads `d` and decides it over GitRepos, matching as the hub does.
fn run(d: &Delivery, repos: &[Repo]) -> (Answer, Vec<ObjectRef>) {
    let r = match read(d) {
        Ok(r) => r,
        Err(a) => return (a, Vec::new()),
    };
    let (candidates, left_out) = candidates_of(d, &r, repos);
    decide(d, &r, &candidates, left_out)
}

fn shop() -> Vec<Repo> {
    vec![
        (
            ObjectRef::new("edge", "shop"),
            spec("https://github.com/ops/shop", "main", "hook"),
            data("github", "s3cret"),
        ),
        (
            ObjectRef::new("edge", "shop-dev"),
            spec("git@github.com:ops/shop.git", "dev", "hook"),
            data("github", "s3cret"),
        ),
        (
            ObjectRef::new("other", "shop"),
            spec("https://github.com/ops/shop.git", "main", "other-hook"),
            data("github", "another"),
        ),
    ]
}

mod admission;
mod candidates;
mod replay;
mod verify;
