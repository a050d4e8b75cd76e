//! Who sent a webhook and whether it was signed with a GitRepo's `webhookSecret` (pure).
//!
//! | Sender | Header | Check |
//! |---|---|---|
//! | GitHub | `X-Hub-Signature-256: sha256=<hex>` | HMAC-SHA256(secret, body) |
//! | Gitea, Forgejo, Gogs | `X-Forgejo-Signature`, `X-Gitea-Signature` or `X-Gogs-Signature: <hex>` | HMAC-SHA256(secret, body) |
//! | GitLab | `X-Gitlab-Token: <secret>` | the token is the secret itself |
//!
//! Every comparison is in constant time (`hmac`'s `verify_slice`; the GitLab token through the
//! SHA-256 of both sides, so not even its length shows). A secret's bytes are used as stored;
//! only the provider's key is taken out of the Secret ([`Secret`], never shown by `Debug`).

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use subtle::ConstantTimeEq;

/// Who sent a webhook, told by its event header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// GitHub (`X-GitHub-Event`).
    GitHub,
    /// GitLab (`X-Gitlab-Event`).
    GitLab,
    /// Gitea, Forgejo or Gogs (`X-Gitea-Event`, `X-Gogs-Event`).
    Gitea,
}

impl Provider {
    /// Every provider, for metrics.
    pub const ALL: [Provider; 3] = [Provider::GitHub, Provider::GitLab, Provider::Gitea];

    /// Its name (the metric label and the Secret's key).
    pub fn name(self) -> &'static str {
        match self {
            Provider::GitHub => "github",
            Provider::GitLab => "gitlab",
            Provider::Gitea => "gitea",
        }
    }

    /// The sender of a request with these headers (names lower-case). Gitea also sends
    /// `X-GitHub-Event` and `X-Gogs-Event` with its own: its header is looked for first.
    pub fn of(headers: &Headers) -> Option<(Provider, String)> {
        for (header, provider) in [
            ("x-gitea-event", Provider::Gitea),
            ("x-gogs-event", Provider::Gitea),
            ("x-gitlab-event", Provider::GitLab),
            ("x-github-event", Provider::GitHub),
        ] {
            if let Some(event) = headers.get(header) {
                return Some((provider, event.clone()));
            }
        }
        None
    }

    /// Whether `event` (its event header's value) is a push, a ping or something else.
    pub fn event(self, event: &str) -> Event {
        match (self, event) {
            (Provider::GitHub | Provider::Gitea, "push") => Event::Push,
            (Provider::GitLab, "Push Hook" | "Tag Push Hook") => Event::Push,
            (Provider::GitHub, "ping") => Event::Ping,
            _ => Event::Other,
        }
    }

    /// The keys of a `webhookSecret` Secret this provider's hooks are checked with, in order.
    pub fn secret_keys(self) -> &'static [&'static str] {
        match self {
            Provider::GitHub => &["github"],
            Provider::GitLab => &["gitlab"],
            Provider::Gitea => &["gitea", "gogs"],
        }
    }
}

/// What a webhook's event header says it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A push (of a branch or a tag).
    Push,
    /// GitHub's ping when a webhook is made: checked like a push, fetches nothing.
    Ping,
    /// Anything else.
    Other,
}

/// The request headers the checks read: lower-case names, one value each.
pub type Headers = BTreeMap<String, String>;

/// The headers a webhook is read by; no other is kept or forwarded.
pub const HEADERS: [&str; 14] = [
    "content-type",
    "x-github-event",
    "x-github-delivery",
    "x-gitlab-event-uuid",
    "x-gitea-delivery",
    "x-gogs-delivery",
    "x-hub-signature-256",
    "x-gitlab-event",
    "x-gitlab-token",
    "x-gitea-event",
    "x-gogs-event",
    "x-gitea-signature",
    "x-forgejo-signature",
    "x-gogs-signature",
];

/// A `webhookSecret`'s value for one provider (its first non-empty key of
/// [`Provider::secret_keys`]): only that key is taken out of the Secret, and its bytes never
/// show in a `Debug`.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Secret(Vec<u8>);

impl Secret {
    /// A secret's bytes, as stored.
    pub fn new(bytes: Vec<u8>) -> Self {
        Self(bytes)
    }

    /// Its bytes (the HMAC key, or the GitLab token).
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secret(<{} bytes redacted>)", self.0.len())
    }
}

/// The id the sender gave this delivery (GitHub's `X-GitHub-Delivery`, GitLab's
/// `X-Gitlab-Event-UUID`, Gitea's `X-Gitea-Delivery`), if any: unsigned, so it only names a
/// delivery in the log and the replay memory, never decides alone.
pub fn delivery_id(headers: &Headers) -> Option<&str> {
    [
        "x-github-delivery",
        "x-gitlab-event-uuid",
        "x-gitea-delivery",
        "x-gogs-delivery",
    ]
    .iter()
    .find_map(|h| headers.get(*h))
    .map(String::as_str)
    .filter(|id| !id.is_empty())
}

/// Why a delivery does not verify with one secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unverified {
    /// The request carries no signature (or token) header.
    Unsigned,
    /// The signature header is not what the provider sends (not hex, no `sha256=`).
    Malformed,
    /// Signed, but not with this secret.
    Mismatch,
}

/// Whether `body` with `headers`, from `provider`, was signed with `secret` (the value of the
/// provider's key in a GitRepo's `webhookSecret`).
pub fn verify(
    provider: Provider,
    headers: &Headers,
    body: &[u8],
    secret: &Secret,
) -> Result<(), Unverified> {
    let secret = secret.bytes();
    match provider {
        Provider::GitHub => {
            let header = headers
                .get("x-hub-signature-256")
                .ok_or(Unverified::Unsigned)?;
            let hex = header
                .strip_prefix("sha256=")
                .ok_or(Unverified::Malformed)?;
            hmac_matches(secret, body, hex)
        }
        Provider::Gitea => {
            let header = [
                "x-forgejo-signature",
                "x-gitea-signature",
                "x-gogs-signature",
            ]
            .iter()
            .find_map(|h| headers.get(*h))
            .ok_or(Unverified::Unsigned)?;
            hmac_matches(secret, body, header)
        }
        Provider::GitLab => {
            let token = headers.get("x-gitlab-token").ok_or(Unverified::Unsigned)?;
            let (a, b) = (Sha256::digest(token.as_bytes()), Sha256::digest(secret));
            if bool::from(a.ct_eq(&b)) {
                Ok(())
            } else {
                Err(Unverified::Mismatch)
            }
        }
    }
}

/// Whether `hex` is the HMAC-SHA256 of `body` under `secret`.
fn hmac_matches(secret: &[u8], body: &[u8], hex: &str) -> Result<(), Unverified> {
    let given = data_encoding::HEXLOWER_PERMISSIVE
        .decode(hex.trim().as_bytes())
        .map_err(|_| Unverified::Malformed)?;
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(body);
    mac.verify_slice(&given).map_err(|_| Unverified::Mismatch)
}

/// The HMAC-SHA256 of `body` under `secret`, in hex (what GitHub and Gitea send; for tests and
/// tools that sign).
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(body);
    data_encoding::HEXLOWER.encode(&mac.finalize().into_bytes())
}
