//! The credential a session came with, checked while it runs (issue 46 review #11): an exec,
//! attach or port-forward session — and each connection forwarded through a port-forward —
//! ends when its caller's token would no longer be accepted for a new request:
//! - at the token's expiry, to the second: an OIDC ID token's `exp`, a ManagedServiceAccount
//!   token's `expirationTimestamp` (what [`crate::serviceaccount::TokenLookup`] checks);
//! - when a check of the token, every [`super::tunnel::TunnelConfig::credential_recheck`]
//!   (30 s), refuses it: the issuer's signing key retired (the OIDC verifier refuses the
//!   token once it fetched the new keys), the ManagedServiceAccount's token replaced by a newer
//!   one or its account deleted.
//!
//! A token of the token file has neither (the file is read once, at the hub's start): nothing
//! is watched for it, and the grants it is under are [`super::revoke`]'s. A check that cannot
//! be made (the token store does not answer) keeps the session, as a request is then answered
//! 503, not 401. Each end is an audit line. The token is kept in memory for the session's
//! life (a ManagedServiceAccount's is forwarded on its request anyway), never logged.

use super::request::RequestInfo;
use crate::grants::{Principal, Via};
use crate::grpc::auth::{Identity, Tokens};
use crate::grpc::guard::{Outcome, audit_line};
use crate::serviceaccount::{TokenLookup, TokenOwner};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Default [`super::tunnel::TunnelConfig::credential_recheck`].
pub const DEFAULT_RECHECK: Duration = Duration::from_secs(30);

/// A session's credential: when it expires and how it is checked again.
#[derive(Clone)]
pub struct Credential {
    /// Who it names, for the audit line.
    principal: Principal,
    /// What it asked for, for the audit line (`create pods/exec on cluster a1`).
    action: Arc<str>,
    /// When the token stops being accepted (`None`: it does not expire).
    expires: Option<SystemTime>,
    /// How it is checked again (`None`: nothing can revoke it while the hub runs).
    check: Option<Check>,
    /// How often it is checked.
    every: Duration,
}

/// How a token is checked again.
#[derive(Clone)]
enum Check {
    /// An ID token of the hub's OIDC issuer: verified again.
    Issuer { tokens: Tokens, token: Arc<str> },
    /// A ManagedServiceAccount's token: still the current token of its account.
    ServiceAccount {
        lookup: TokenLookup,
        owner: TokenOwner,
        token: Arc<str>,
    },
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential")
            .field("user", &self.principal.user)
            .field("expires", &self.expires)
            .field("checked", &self.check.is_some())
            .finish_non_exhaustive()
    }
}

impl Credential {
    /// The credential of an API caller: `identity`, which `tokens` authenticated from `token`,
    /// asking `info` of `cluster`; checked every `every`. `None` for a token that neither
    /// expires nor can be revoked while the hub runs (the token file's).
    pub fn api(
        identity: &Identity,
        tokens: &Tokens,
        token: &str,
        (cluster, info): (&str, &RequestInfo),
        every: Duration,
    ) -> Option<Self> {
        let expires = expiry(&identity.principal.via);
        let check = matches!(identity.principal.via, Via::Oidc { .. }).then(|| Check::Issuer {
            tokens: tokens.clone(),
            token: token.into(),
        });
        if expires.is_none() && check.is_none() {
            return None;
        }
        Some(Self {
            principal: identity.principal.clone(),
            action: action(cluster, info),
            expires,
            check,
            every,
        })
    }

    /// The credential of a ManagedServiceAccount's `token` of `owner`, as `lookup` found it,
    /// asking `info` of its cluster; checked every `every`.
    pub fn service_account(
        owner: &TokenOwner,
        lookup: &TokenLookup,
        token: &str,
        info: &RequestInfo,
        every: Duration,
    ) -> Self {
        Self {
            principal: Principal::user(&service_account_name(owner), Via::Token),
            action: action(&owner.cluster, info),
            expires: Some(owner.expires),
            check: Some(Check::ServiceAccount {
                lookup: lookup.clone(),
                owner: owner.clone(),
                token: token.into(),
            }),
            every,
        }
    }

    /// Why the credential is no longer good at `now` by its expiry alone (`None`: it is).
    pub fn expired_at(&self, now: SystemTime) -> Option<String> {
        let expires = self.expires?;
        (now >= expires).then(|| self.expired_reason(expires))
    }

    /// Resolves, with the reason, once the token expires or a check refuses it; writes the
    /// audit line. Never, for a credential nothing ends.
    pub async fn ended(&self) -> String {
        let why = self.watch().await;
        audit_line(
            &self.principal,
            &format!("end {}", self.action),
            Outcome::Refused(&why),
        );
        why
    }

    async fn watch(&self) -> String {
        if let Some(why) = self.expired_at(SystemTime::now()) {
            return why;
        }
        // The expiry as a point of the monotonic clock: a wall clock stepped meanwhile moves
        // it no more than it moves the token's age.
        let expiry = self.expires.map(|at| {
            let left = at.duration_since(SystemTime::now()).unwrap_or_default();
            (at, tokio::time::Instant::now() + left)
        });
        let every = self.every.max(Duration::from_millis(100));
        let mut checks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        checks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = until(expiry.map(|(_, at)| at)) => {
                    let (at, _) = expiry.expect("only an expiry is waited for");
                    return self.expired_reason(at);
                }
                _ = checks.tick(), if self.check.is_some() => {
                    if let Some(why) = self.refused().await {
                        return why;
                    }
                }
            }
        }
    }

    /// Why a check refuses the token now (`None`: it is accepted, or could not be checked).
    async fn refused(&self) -> Option<String> {
        match self.check.as_ref()? {
            Check::Issuer { tokens, token } => tokens.authenticate(token).err().map(|why| {
                format!(
                    "{}'s token is no longer accepted: {why}",
                    self.principal.user
                )
            }),
            Check::ServiceAccount {
                lookup,
                owner,
                token,
            } => match lookup.owner(&owner.cluster, token).await {
                Ok(Some(_)) => None,
                Ok(None) => Some(format!(
                    "the token of ManagedServiceAccount {}/{} is no longer its current one (a \
                     newer token replaced it, or the account was deleted): fetch its token \
                     again (flotilla kubeconfig --service-account) and start again",
                    owner.cluster, owner.name
                )),
                Err(e) => {
                    tracing::warn!(
                        cluster.name = %owner.cluster, account = %owner.name, error = %e,
                        "a session's ManagedServiceAccount token could not be checked; the \
                         session goes on"
                    );
                    None
                }
            },
        }
    }

    fn expired_reason(&self, at: SystemTime) -> String {
        let at = humantime::format_rfc3339_seconds(at);
        match &self.check {
            Some(Check::ServiceAccount { owner, .. }) => format!(
                "the token of ManagedServiceAccount {}/{} expired at {at}: a session ends with \
                 the token that opened it; fetch its current token (flotilla kubeconfig \
                 --service-account) and start again",
                owner.cluster, owner.name
            ),
            _ => format!(
                "{}'s token expired at {at}: a session ends with the token that opened it; sign \
                 in again for a new token and start again",
                self.principal.user
            ),
        }
    }
}

/// When a principal's token expires: an OIDC ID token's `exp` (also when another hub vouches
/// for it); `None` for the token file's tokens.
fn expiry(via: &Via) -> Option<SystemTime> {
    match via {
        Via::Oidc { expires, .. } => Some(UNIX_EPOCH + Duration::from_secs(*expires)),
        Via::Vouched { first, .. } => expiry(first),
        Via::Token | Via::Open => None,
    }
}

/// A ManagedServiceAccount caller's name, as the proxy logs it.
pub fn service_account_name(owner: &TokenOwner) -> String {
    format!("managedserviceaccount:{}/{}", owner.cluster, owner.name)
}

/// The audit line's action: `proxy create pods/exec on cluster a1`.
fn action(cluster: &str, info: &RequestInfo) -> Arc<str> {
    format!(
        "proxy {} {} on cluster {cluster}",
        info.verb,
        info.resource_label()
    )
    .into()
}

/// Sleeps until `at` (never, with none).
async fn until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests;
