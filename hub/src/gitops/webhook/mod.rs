//! Push webhooks from GitHub, GitLab and Gitea that fetch a GitRepo at once (design:
//! docs/notes/issue-50-design.md §8; user docs: docs/gitops.md "Webhooks").
//!
//! - [`verify`], [`payload`], [`rate`], [`pool`], [`pace`], [`index`], [`replay`],
//!   [`forwarded`]: pure — who sent it and whether a GitRepo's `webhookSecret` signed it, what
//!   the push says and how its URL compares, how many a source may send, how many may be in
//!   flight (per hub, per source while its body is read, none for a while after a body too
//!   slow or too large), how fast a body must come, the GitRepos following a URL,
//!   the deliveries handled lately, which address sent it behind a trusted proxy; [`decide`] puts them together into an
//!   [`Answer`] and the GitRepos to fetch, one check per distinct secret ([`groups`]).
//! - [`listener`]: the thin HTTP server every hub may serve (`--gitops-webhook-listen`):
//!   bounds, rate, deliveries in flight, body, then hands the [`Delivery`] on.
//! - [`hook`]: the controllers' hub's side — candidates from the index, verification on a
//!   blocking thread, a replay skipped, a fetch for each GitRepo it verified for.
//! - [`forward`]: where it goes — to this hub's GitRepos while it holds the controllers,
//!   otherwise over NATS to the hub that does (sealed with the control plane's key), whose
//!   subscription the GitRepo family runs. Verification runs only there, next to the Secrets.
//!
//! `POST /hooks/gitrepos` matches the push's repository URL and ref with every GitRepo (as
//! Fleet does); `POST /hooks/gitrepos/{namespace}/{name}` with that one only. A GitRepo is
//! fetched only when the delivery verifies with its own Secret.

pub mod forward;
pub mod forwarded;
pub mod hook;
pub mod index;
pub mod listener;
pub mod pace;
pub mod payload;
pub mod pool;
pub mod rate;
pub mod replay;
pub mod verify;

#[cfg(test)]
mod tests;

use crate::keys::ObjectRef;
use bytes::Bytes;
use std::collections::BTreeMap;
use verify::{Event, Headers, Provider, Secret};

/// Largest body taken (GitHub caps its payloads at 25 MB; a push's fields are near the top, but
/// the whole body is what is signed).
pub const MAX_BODY: usize = 1024 * 1024;

/// A webhook as received: the headers the checks read ([`verify::HEADERS`]), the body, and the
/// GitRepo its path names (`None`: every GitRepo following the pushed repository). Its `Debug`
/// shows no GitLab token (the secret itself) and no body.
#[derive(Clone, Default)]
pub struct Delivery {
    /// Lower-case names, one value each.
    pub headers: Headers,
    /// The body, as signed.
    pub body: Bytes,
    /// `/hooks/gitrepos/{namespace}/{name}`.
    pub target: Option<ObjectRef>,
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let headers: BTreeMap<&str, &str> = self
            .headers
            .iter()
            .map(|(k, v)| {
                let shown = if k == "x-gitlab-token" {
                    "<redacted>"
                } else {
                    v.as_str()
                };
                (k.as_str(), shown)
            })
            .collect();
        f.debug_struct("Delivery")
            .field("headers", &headers)
            .field("body", &format_args!("<{} bytes>", self.body.len()))
            .field("target", &self.target)
            .finish()
    }
}

/// How a delivery ended (the `result` label of `flotilla_hub_gitops_webhooks_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Verified; GitRepos are fetched (202).
    Triggered,
    /// Verified; no GitRepo follows the ref pushed, or it was deleted, or it is fetched
    /// already (200).
    Ignored,
    /// GitHub's ping, verified (200).
    Ping,
    /// Verified, but handled already lately (the same signed body or delivery id): nothing
    /// fetched or written (200).
    Replayed,
    /// Signed with no GitRepo's secret, or unsigned (401).
    Unauthorized,
    /// No GitRepo follows the repository, or the path names none: 401 with the same sentence
    /// as [`Outcome::Unauthorized`], so an unverified sender cannot learn which repositories
    /// the fleet follows or which GitRepos exist (the metric and the hub's log tell them
    /// apart).
    UnknownRepo,
    /// Not a push (400).
    WrongEvent,
    /// No known sender, or a body that is not a push payload (400).
    BadRequest,
    /// Past the body limit (413).
    TooLarge,
    /// A body slower than [`pace::FLOOR`] past its grace, or not whole within
    /// [`pace::BODY_TIME`] (408).
    TooSlow,
    /// Past the source's rate (429).
    RateLimited,
    /// Not a POST (405), or no such path (404).
    NotFound,
    /// No hub holding the controllers answered (503).
    Unavailable,
    /// As many deliveries in flight as the hub takes at once, or as its share of them the
    /// source has (503; the sender may retry).
    Busy,
}

impl Outcome {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Triggered => "triggered",
            Outcome::Ignored => "ignored",
            Outcome::Ping => "ping",
            Outcome::Replayed => "replayed",
            Outcome::Unauthorized => "unauthorized",
            Outcome::UnknownRepo => "unknown_repo",
            Outcome::WrongEvent => "wrong_event",
            Outcome::BadRequest => "bad_request",
            Outcome::TooLarge => "too_large",
            Outcome::TooSlow => "too_slow",
            Outcome::RateLimited => "rate_limited",
            Outcome::NotFound => "not_found",
            Outcome::Unavailable => "unavailable",
            Outcome::Busy => "busy",
        }
    }

    /// The label of a forwarded answer (an unknown one: `bad_request`, labels are a closed set).
    pub fn from_label(label: &str) -> Outcome {
        [
            Outcome::Triggered,
            Outcome::Ignored,
            Outcome::Ping,
            Outcome::Replayed,
            Outcome::Unauthorized,
            Outcome::UnknownRepo,
            Outcome::WrongEvent,
            Outcome::BadRequest,
            Outcome::TooLarge,
            Outcome::TooSlow,
            Outcome::RateLimited,
            Outcome::NotFound,
            Outcome::Unavailable,
            Outcome::Busy,
        ]
        .into_iter()
        .find(|o| o.label() == label)
        .unwrap_or(Outcome::BadRequest)
    }

    /// Its HTTP status.
    pub fn status(self) -> u16 {
        match self {
            Outcome::Triggered => 202,
            Outcome::Ignored | Outcome::Ping | Outcome::Replayed => 200,
            Outcome::Unauthorized | Outcome::UnknownRepo => 401,
            Outcome::NotFound => 404,
            Outcome::WrongEvent | Outcome::BadRequest => 400,
            Outcome::TooLarge => 413,
            Outcome::TooSlow => 408,
            Outcome::RateLimited => 429,
            Outcome::Unavailable | Outcome::Busy => 503,
        }
    }
}

/// What the sender is told: the outcome, its sender (when known) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// How it ended.
    pub outcome: Outcome,
    /// Who sent it (the metric's `provider` label), when its headers said.
    pub provider: Option<Provider>,
    /// A sentence for the sender's delivery log (never a secret; names GitRepos only once
    /// verified).
    pub message: String,
    /// For the hub's log only, never sent: why an unverified delivery was refused (what it
    /// named, cut and quoted).
    pub detail: String,
}

/// What every unverified delivery is told, whatever the reason.
pub const UNVERIFIED: &str = "the delivery does not verify with the webhookSecret of a GitRepo \
                              following its repository";

/// At most this many characters of a sender's text in [`Answer::detail`].
const DETAIL_CHARS: usize = 200;

/// `text` (a sender's, unverified) cut to [`DETAIL_CHARS`] and quoted: no newline or escape
/// reaches a log line.
fn quoted(text: &str) -> String {
    let cut: String = text.chars().take(DETAIL_CHARS).collect();
    format!("{cut:?}")
}

impl Answer {
    /// An answer.
    pub fn new(outcome: Outcome, provider: Option<Provider>, message: impl Into<String>) -> Self {
        Self {
            outcome,
            provider,
            message: message.into(),
            detail: String::new(),
        }
    }

    /// An unverified delivery's answer: [`UNVERIFIED`] to the sender, `detail` for the log.
    fn unverified(outcome: Outcome, provider: Option<Provider>, detail: String) -> Self {
        Self {
            detail,
            ..Self::new(outcome, provider, UNVERIFIED)
        }
    }

    /// The JSON body sent back.
    pub fn body(&self) -> String {
        serde_json::json!({"result": self.outcome.label(), "message": self.message}).to_string()
    }
}

/// A read delivery: its sender, what its event is, and the push it describes.
#[derive(Debug, Clone)]
pub struct Read {
    /// Who sent it.
    pub provider: Provider,
    /// Push or ping.
    pub event: Event,
    /// What it says.
    pub push: Push,
}

pub use payload::Push;

/// Who sent `d` and what it says, or the answer that ends it (unknown sender, not a push, a body
/// that is no push payload). Nothing here is trusted yet: it only finds the GitRepos whose
/// Secrets are then tried.
pub fn read(d: &Delivery) -> Result<Read, Answer> {
    let Some((provider, event_name)) = Provider::of(&d.headers) else {
        return Err(Answer::new(
            Outcome::BadRequest,
            None,
            "unknown webhook sender: expected an X-GitHub-Event, X-Gitlab-Event or X-Gitea-Event \
             header",
        ));
    };
    let event = provider.event(&event_name);
    if event == Event::Other {
        let shown: String = event_name.chars().take(64).collect();
        return Err(Answer::new(
            Outcome::WrongEvent,
            Some(provider),
            format!(
                "event {shown:?} is not a push: only push events fetch (send push events only)"
            ),
        ));
    }
    let content_type = d.headers.get("content-type").map_or("", String::as_str);
    let push = payload::parse(provider, content_type, &d.body)
        .map_err(|e| Answer::new(Outcome::BadRequest, Some(provider), e))?;
    Ok(Read {
        provider,
        event,
        push,
    })
}

/// A GitRepo the push may be for (it follows one of its URLs): its key, what it follows, and
/// the value of the provider's key in its `webhookSecret` Secret (`None`: it names none, the
/// Secret is missing, or it has no such key).
#[derive(Debug, Clone)]
pub struct Candidate {
    /// `<namespace>/<name>`.
    pub key: ObjectRef,
    /// The branch it follows.
    pub branch: String,
    /// The tag or commit it is pinned at (no branch).
    pub revision: String,
    /// The provider's key of its webhook Secret.
    pub secret: Option<Secret>,
}

/// Distinct secrets a delivery is checked with at most (an HMAC over its body each); past it
/// the remaining GitRepos are not checked, and a verified answer says how many.
pub const MAX_SECRETS: usize = 8;
/// Distinct secrets of one namespace's GitRepos a delivery is checked with at most: a tenant
/// following someone else's repository under many secrets takes 2 of the [`MAX_SECRETS`], not
/// all (session-16 review A4).
pub const MAX_SECRETS_PER_NAMESPACE: usize = 2;

/// Candidates grouped by their secret, in the order of each secret's first candidate.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Groups<'a> {
    /// Each distinct secret checked, with the indexes of its candidates (at most
    /// [`MAX_SECRETS`]).
    pub checked: Vec<(&'a Secret, Vec<usize>)>,
    /// Candidates without a secret.
    pub without_secret: usize,
    /// Candidates whose secret is past the first [`MAX_SECRETS`]: not checked.
    pub unchecked: usize,
}

/// The candidates grouped so a delivery costs one check per distinct secret, however many
/// GitRepos share it: at most [`MAX_SECRETS`], [`MAX_SECRETS_PER_NAMESPACE`] of them brought
/// by one namespace's GitRepos (a secret already checked covers every candidate holding it).
pub fn groups(candidates: &[Candidate]) -> Groups<'_> {
    let mut g = Groups::default();
    // Distinct secrets checked per namespace (the namespace whose GitRepo brought it first).
    let mut per_namespace: std::collections::HashMap<&str, usize> = Default::default();
    for (i, c) in candidates.iter().enumerate() {
        let Some(secret) = &c.secret else {
            g.without_secret += 1;
            continue;
        };
        if let Some((_, members)) = g.checked.iter_mut().find(|(s, _)| *s == secret) {
            members.push(i);
            continue;
        }
        let namespace = c.key.namespace.as_str();
        let taken = per_namespace.entry(namespace).or_insert(0);
        if g.checked.len() < MAX_SECRETS && *taken < MAX_SECRETS_PER_NAMESPACE {
            *taken += 1;
            g.checked.push((secret, vec![i]));
        } else {
            g.unchecked += 1;
        }
    }
    g
}

/// The outcome of a read delivery over its candidates (and `left_out`: GitRepos following it
/// past [`index::MAX_CANDIDATES`]), and the GitRepos to fetch with the commit the push named.
/// CPU-bound (an HMAC over the body per distinct secret): run off the async workers.
pub fn decide(
    d: &Delivery,
    r: &Read,
    candidates: &[Candidate],
    left_out: usize,
) -> (Answer, Vec<ObjectRef>) {
    let p = Some(r.provider);
    let url = quoted(r.push.urls.first().map_or("", String::as_str));
    if candidates.is_empty() {
        let what = match &d.target {
            Some(t) => format!("GitRepo {t} does not exist or does not follow {url}"),
            None => format!("no GitRepo follows {url}"),
        };
        let what = format!("{what} ({})", payload::COMPARED);
        return (
            Answer::unverified(Outcome::UnknownRepo, p, what),
            Vec::new(),
        );
    }
    let g = groups(candidates);
    let mut verified: Vec<&Candidate> = Vec::new();
    for (secret, members) in &g.checked {
        if verify::verify(r.provider, &d.headers, &d.body, secret).is_ok() {
            verified.extend(members.iter().map(|i| &candidates[*i]));
        }
    }
    verified.sort_by(|a, b| a.key.cmp(&b.key));
    let skipped = g.unchecked + left_out;
    if verified.is_empty() {
        let mut why = if g.without_secret == candidates.len() {
            format!(
                "no GitRepo following {url} has a webhookSecret with a {:?} key",
                r.provider.secret_keys()[0]
            )
        } else {
            "the signature does not verify with any webhookSecret".to_owned()
        };
        if skipped > 0 {
            why.push_str(&format!(
                " ({skipped} GitRepos following it not checked: at most {} GitRepos and {} \
                 distinct secrets a delivery, {} from one namespace; the path \
                 /hooks/gitrepos/{{namespace}}/{{name}} checks one GitRepo)",
                index::MAX_CANDIDATES,
                MAX_SECRETS,
                MAX_SECRETS_PER_NAMESPACE
            ));
        }
        return (
            Answer::unverified(Outcome::Unauthorized, p, why),
            Vec::new(),
        );
    }
    let (mut answer, keys) = verified_answer(r, &verified);
    if skipped > 0 {
        answer.message.push_str(&format!(
            " ({skipped} GitRepos following it were not checked: at most {} GitRepos and {} \
             distinct webhookSecrets a delivery, {} from one namespace; let GitRepos \
             following one repository share a Secret, or point the hook at \
             /hooks/gitrepos/{{namespace}}/{{name}})",
            index::MAX_CANDIDATES,
            MAX_SECRETS,
            MAX_SECRETS_PER_NAMESPACE
        ));
    }
    (answer, keys)
}

/// The answer to a delivery verified for `verified`: a ping, a deleted ref, a ref none of them
/// follows, or the fetches.
fn verified_answer(r: &Read, verified: &[&Candidate]) -> (Answer, Vec<ObjectRef>) {
    let p = Some(r.provider);
    let names = |cs: &[&Candidate]| {
        cs.iter()
            .map(|c| c.key.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if r.event == Event::Ping {
        let message = format!("verified for {}", names(verified));
        return (Answer::new(Outcome::Ping, p, message), Vec::new());
    }
    if r.push.deleted() {
        let message = format!("{} was deleted: nothing to fetch", r.push.git_ref);
        return (Answer::new(Outcome::Ignored, p, message), Vec::new());
    }
    let fetch: Vec<&Candidate> = verified
        .iter()
        .copied()
        .filter(|c| payload::follows(&c.branch, &c.revision, &r.push.git_ref))
        .collect();
    if fetch.is_empty() {
        let message = format!("no GitRepo here follows {}", r.push.git_ref);
        return (Answer::new(Outcome::Ignored, p, message), Vec::new());
    }
    let message = format!("fetching {}", names(&fetch));
    let keys = fetch.iter().map(|c| c.key.clone()).collect();
    (Answer::new(Outcome::Triggered, p, message), keys)
}
