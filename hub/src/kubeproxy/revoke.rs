//! The grant a long proxy request was allowed by, checked again while it runs (issue 48,
//! review r4 §1): an exec, attach or port-forward session and a streamed answer (a watch,
//! `logs -f`) were decided once at their start; when the grants file is reloaded or a cluster
//! moves between sets, [`Recheck::revoked`] decides the same request again, and the request
//! ends — its session cut with the reason on the client's error channel, a watch ended with
//! an `ERROR` event carrying the reason, any other answer broken off — when it is refused now
//! or would act as someone else on the spoke. Each such end is an audit line.
//!
//! Only API callers under grants are watched: a ManagedServiceAccount's request is the spoke's
//! RBAC's to decide, and an open hub has no grants to change.
//!
//! A session holds on to its credential as well ([`Hold`]): it also ends when its caller's
//! token expires or is no longer accepted ([`super::credential`], issue 46 review #11).

use super::access::{self, Act, Asked};
use super::credential::Credential;
use super::request::{RequestInfo, Verb};
use super::tunnel::ByteStream;
use crate::grants::live::Live;
use crate::grpc::auth::Identity;
use crate::grpc::guard::{Outcome, audit_line};
use bytes::Bytes;
use futures::StreamExt;
use std::sync::Arc;

/// One request's decision, to decide again when the grants or the set index change.
#[derive(Clone)]
pub struct Recheck {
    live: Live,
    identity: Identity,
    cluster: Arc<str>,
    info: Arc<RequestInfo>,
    asked: Asked,
    /// What the request was allowed to act as.
    act: Act,
}

impl std::fmt::Debug for Recheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recheck")
            .field("caller", &self.identity.name())
            .field("cluster", &self.cluster)
            .finish_non_exhaustive()
    }
}

impl Recheck {
    /// The check of `identity`'s request `info` to `cluster`, allowed to act as `act` (none
    /// without grants in force).
    pub fn new(
        identity: &Identity,
        live: Option<&Live>,
        cluster: &str,
        info: &RequestInfo,
        asked: &Asked,
        act: &Act,
    ) -> Option<Self> {
        Some(Self {
            live: live?.clone(),
            identity: identity.clone(),
            cluster: cluster.into(),
            info: Arc::new(info.clone()),
            asked: asked.clone(),
            act: act.clone(),
        })
    }

    /// Why the request may no longer go on, by the grants and set index in force now (`None`:
    /// it may, acting as before).
    pub fn refusal(&self) -> Option<String> {
        let identity = self.identity.clone().scoped(&self.live);
        let on = access::on_cluster(&identity, &self.live.index().current(), &self.cluster);
        match access::decide_on(&identity, &on, &self.info, &self.asked) {
            Err(refusal) => Some(refusal.0),
            Ok(act) if act != self.act => Some(format!(
                "{}'s grants on cluster {} changed: the request would now act as {} on the \
                 spoke",
                identity.name(),
                self.cluster,
                acting(&act)
            )),
            Ok(_) => None,
        }
    }

    /// Resolves, with the reason, once a reload of the grants or a move of clusters between
    /// sets leaves the request refused ([`Recheck::refusal`]); writes the audit line. Checks
    /// once at once too: a change between the request's decision and this call counts.
    pub async fn revoked(&self) -> String {
        let mut reloads = self.live.subscribe();
        let mut moves = self.live.index().subscribe();
        reloads.mark_unchanged();
        moves.mark_unchanged();
        loop {
            if let Some(why) = self.refusal() {
                let why = format!("the grant that allowed it is gone: {why}");
                audit_line(
                    &self.identity.principal,
                    &format!("end proxy {} on cluster {}", self.what(), self.cluster),
                    Outcome::Refused(&why),
                );
                return why;
            }
            tokio::select! {
                changed = reloads.changed() => if changed.is_err() {
                    // The hub is stopping: its own shutdown ends the request.
                    return std::future::pending().await;
                },
                changed = moves.changed() => if changed.is_err() {
                    return std::future::pending().await;
                },
            }
        }
    }

    fn what(&self) -> String {
        let info = &self.info;
        if info.resource_request {
            format!("{} {}", info.verb, info.resource_label())
        } else {
            format!("{} on a non-resource path", info.verb)
        }
    }
}

/// Whom an act is, for a message.
fn acting(act: &Act) -> String {
    match act {
        Act::AsAgent => "the agent".into(),
        Act::Impersonate { user, .. } => user.clone(),
    }
}

/// What a session holds on to while it runs: the grant that allowed it and the credential it
/// came with; it ends when either is gone.
#[derive(Clone, Debug, Default)]
pub struct Hold {
    /// The grant, decided again as the grants change (API callers under grants).
    pub grant: Option<Recheck>,
    /// The caller's token, watched to its expiry and checked again (OIDC ID tokens and
    /// ManagedServiceAccount tokens).
    pub credential: Option<Credential>,
}

/// Why a held session must end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gone {
    /// The grant that allowed it is gone.
    Grant(String),
    /// The caller's token expired or is no longer accepted.
    Credential(String),
}

impl Hold {
    /// Why a session may not even open: its token is past its expiry already (an ID token
    /// within the verifier's clock skew still authenticates a request).
    pub fn expired(&self) -> Option<String> {
        let credential = self.credential.as_ref()?;
        credential.expired_at(std::time::SystemTime::now())
    }

    /// Resolves with why once the grant or the credential is gone; never while both hold.
    pub async fn gone(&self) -> Gone {
        let credential = async {
            match &self.credential {
                Some(credential) => credential.ended().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            why = until_revoked(self.grant.clone()) => Gone::Grant(why),
            why = credential => Gone::Credential(why),
        }
    }
}

/// Resolves with the reason once `recheck` says the request is revoked; never without one.
pub async fn until_revoked(recheck: Option<Recheck>) -> String {
    match recheck {
        Some(recheck) => recheck.revoked().await,
        None => std::future::pending().await,
    }
}

/// `body` of an answer to `info`, ended when `recheck` says the request is revoked: a JSON
/// watch gets a last `ERROR` event with a `Forbidden` `Status` saying why (kubectl prints it),
/// any other answer breaks off with the reason.
pub fn guarded(body: ByteStream, recheck: Recheck, info: &RequestInfo, json: bool) -> ByteStream {
    let watch = info.verb == Verb::Watch && json;
    let cluster = recheck.cluster.to_string();
    let revoked: std::pin::Pin<Box<dyn std::future::Future<Output = String> + Send>> =
        Box::pin(async move { recheck.revoked().await });
    let state = Some((body, revoked));
    Box::pin(futures::stream::unfold(state, move |state| {
        let cluster = cluster.clone();
        async move {
            let (mut body, mut revoked) = state?;
            tokio::select! {
                biased;
                item = body.next() => item.map(|item| (item, Some((body, revoked)))),
                why = &mut revoked => {
                    let cut = if watch {
                        Ok(error_event(&why))
                    } else {
                        tracing::info!(cluster.name = %cluster, reason = %why, "cluster proxy answer cut");
                        Err(super::BodyError::Revoked(why))
                    };
                    // The cut is the last item: the answer (and its call) is dropped.
                    Some((cut, None))
                }
            }
        }
    }))
}

/// A watch's `ERROR` event: a `Forbidden` `Status` with `why`, on a line of its own.
fn error_event(why: &str) -> Bytes {
    let status = serde_json::json!({
        "type": "ERROR",
        "object": {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": why,
            "reason": "Forbidden",
            "code": 403,
        }
    });
    let mut line = status.to_string().into_bytes();
    line.push(b'\n');
    Bytes::from(line)
}

#[cfg(test)]
mod tests;
