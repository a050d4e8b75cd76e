//! A registration refused for its agent version (issue 49 §6.2), at the cluster's actor. The
//! router judges the version before any actor sees a request; a refused one under a known
//! cluster's bound key comes here so the cluster says why its agent is turned away
//! (`AgentVersionAccepted=False` with the refusal's text, shown by `describe cluster` and
//! `get clusters -o wide`) — recorded only when the request is the cluster's own agent's
//! ([`rules::registration::version_refused`]), written only when it changes.

use super::Actor;
use super::lifecycle::response;
use crate::cluster::rules;
use crate::cluster::rules::registration::{Context, Credential};
use flotilla_api::v1::{RegistrationRequest, RegistrationState};
use flotilla_auth::setup::unix_now;
use flotilla_bus::reply::ReplyTo;

impl Actor {
    /// Records a refused agent version on the cluster when `request` is its own agent's, then
    /// answers `REJECTED` with `why`. The agent is not counted as heard from: it stops its
    /// lease until a hub accepts it, and the cluster goes Unknown.
    pub(super) async fn version_refused(
        &mut self,
        request: RegistrationRequest,
        reply: Option<ReplyTo>,
        credential: Option<String>,
        why: &str,
    ) {
        let ctx = Context {
            policy: self.shared.config.key_policy,
            auto: &self.shared.config.auto_accept,
            default_lease_seconds: self.shared.config.default_lease_duration_seconds,
            now: unix_now(),
        };
        let who = credential
            .as_deref()
            .map_or(Credential::Unknown, Credential::User);
        let next = self
            .cluster
            .as_deref()
            .and_then(|c| rules::registration::version_refused(c, &request, who, &ctx, why));
        if let Some(next) = next {
            tracing::warn!(agent_version = %request.agent_version, reason = why, "the cluster's agent runs a version this hub refuses; recorded on the cluster");
            self.persist_or_retry(next).await;
        }
        let mut answer = response(&self.name, RegistrationState::Rejected, 0, why);
        answer.in_reply_to = rules::registration::in_reply_to(&request);
        self.answer_registration(reply, answer).await;
    }
}
