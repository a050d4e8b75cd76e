//! The cluster lifecycle: registration, acceptance and admin edits, lease renewals and expiry,
//! status reports, deletion.

use super::{Actor, ack_message};
use crate::cluster::handle::{AdminEdit, ClusterError, LeaseEvent, SOURCE, StatusEvent};
use crate::cluster::rules;
use crate::cluster::rules::registration::{Credential, Decision};
use flotilla_api::meta::{self, COND_CLOCK_SYNCED, status};
use flotilla_api::v1::{ClusterOrigin, ImportEdit, JoinToken};
use flotilla_api::v1::{
    ClusterSetManagedNamespaceConfig, LeaseRenewal, ManagedCluster, RegistrationRequest,
    RegistrationResponse, RegistrationState,
};
use flotilla_auth::Subject;
use flotilla_auth::setup::unix_now;
use flotilla_bus::envelope::{Event, types};
use flotilla_bus::reply::ReplyTo;
use flotilla_bus::subjects;
use std::time::{Duration, SystemTime};
use tokio::time::Instant;

/// When an agent whose registration could not be stored is told to ask again (the actor
/// retries its write every second meanwhile).
const STORE_RETRY: Duration = Duration::from_secs(2);

impl Actor {
    /// Applies an admin edit, with the effects each one has on the lease timer and the agent.
    pub(super) async fn admin_edit(
        &mut self,
        edit: AdminEdit,
    ) -> Result<ManagedCluster, ClusterError> {
        match edit {
            AdminEdit::Accept(key) => {
                let mut next = self.current()?;
                let replaced = rules::registration::accept_key(&mut next, key.as_deref())
                    .map_err(|e| ClusterError::Precondition(e.to_string()))?;
                // A revoked key (denied, or replaced) comes back only when the admin names it:
                // accepting a denied cluster must not quietly readmit a compromised agent.
                if key.is_none()
                    && let Some(fp) = self.revoked_bound_key(&next)
                {
                    return Err(ClusterError::Precondition(format!(
                        "the agent key of {:?} (fingerprint {fp}) was revoked; accept it again only \
                         by naming it (flotilla accept {} --key {fp}), or give a rebuilt spoke a join \
                         credential (flotilla join-token {})",
                        self.name, self.name, self.name
                    )));
                }
                let mut changed = replaced.is_some();
                changed |= rules::accept(
                    &mut next,
                    "HubClusterAdminAccepted",
                    "Accepted by the hub cluster admin",
                );
                // The replaced key is revoked before the new one is stored: a failure here
                // leaves the cluster as it was.
                if let (Some(security), Some(old)) = (&self.shared.security, &replaced) {
                    security.revoke(&[old]).await.map_err(|e| {
                        ClusterError::Unavailable(format!("revoking the replaced key: {e}"))
                    })?;
                }
                if changed {
                    self.persist(next)
                        .await
                        .map_err(|e| ClusterError::Unavailable(e.to_string()))?;
                }
                let c = self.current()?;
                self.lease_deadline = Some(Instant::now() + self.grace(&c));
                self.notify(
                    RegistrationState::Accepted,
                    "accepted by the hub cluster admin",
                )
                .await;
                Ok(c)
            }
            AdminEdit::Deny => {
                // Revoke first and fail closed: a deny whose revocation cannot be recorded does
                // not happen.
                let current = self.current()?;
                self.revoke_keys(&current).await?;
                let c = self.edit(|c| Ok(rules::deny(c))).await?;
                self.lease_deadline = None;
                self.notify(RegistrationState::Denied, "denied by the hub cluster admin")
                    .await;
                Ok(c)
            }
            AdminEdit::Label { set, remove } => {
                self.edit(|c| rules::apply_labels(c, &set, &remove)).await
            }
            AdminEdit::Taint { add, remove } => {
                self.edit(|c| rules::apply_taints(c, &add, &remove)).await
            }
            AdminEdit::SetLease(seconds) => {
                if !(0..=3600).contains(&seconds) {
                    return Err(ClusterError::Invalid(format!(
                        "spec.leaseDurationSeconds: {seconds} is outside 0..=3600 (0 = hub default)"
                    )));
                }
                let seconds = if seconds == 0 {
                    self.shared.config.default_lease_duration_seconds
                } else {
                    seconds
                };
                let c = self
                    .edit(|c| {
                        let spec = c.spec.get_or_insert_with(Default::default);
                        let changed = spec.lease_duration_seconds != seconds;
                        spec.lease_duration_seconds = seconds;
                        if changed && let Some(m) = c.metadata.as_mut() {
                            m.generation += 1;
                        }
                        Ok(changed)
                    })
                    .await?;
                if rules::accepted(&c) {
                    self.lease_deadline = Some(Instant::now() + self.grace(&c));
                    self.notify(RegistrationState::Accepted, "lease duration changed")
                        .await;
                }
                Ok(c)
            }
            AdminEdit::Apply(doc) => Box::pin(self.apply_document(*doc)).await,
            AdminEdit::Import(edit) => self.import(*edit).await,
        }
    }

    /// Secure mode: the fingerprint of the cluster's bound agent key when that key was revoked
    /// (denied, replaced, or its cluster deleted): only an admin naming it accepts it again.
    fn revoked_bound_key(&self, c: &ManagedCluster) -> Option<String> {
        let bound = c.hub.as_ref().map(|h| h.agent_public_key.as_str())?;
        let security = self.shared.security.as_ref()?;
        (!bound.is_empty() && security.is_revoked(bound))
            .then(|| flotilla_api::fingerprint::of(bound))
    }

    /// A ClusterImportPolicy's write, in one persist: a cluster not known yet is created ahead
    /// of its agent (origin IMPORT; the first agent key that registers under its name is
    /// recorded, as for a document); a known one gets the labels, the template's taints and
    /// lease, and acceptance — never of a denied cluster, and of a revoked key only when an
    /// admin names it, as [`AdminEdit::Accept`]`(None)`. The policy never binds keys.
    async fn import(&mut self, edit: ImportEdit) -> Result<ManagedCluster, ClusterError> {
        let why = format!("Accepted by ClusterImportPolicy {}", edit.policy);
        if self.cluster.is_none() {
            if !edit.create {
                return Err(ClusterError::NotFound(format!(
                    "managed cluster {:?}",
                    self.name
                )));
            }
            let spec = flotilla_api::v1::ManagedClusterSpec {
                taints: edit.taints.clone(),
                lease_duration_seconds: edit.lease_duration_seconds,
                ..Default::default()
            };
            let mut c = rules::precreated(
                &self.name,
                edit.set_labels.clone(),
                &spec,
                self.shared.config.default_lease_duration_seconds,
            )
            .map_err(|e| ClusterError::Invalid(e.to_string()))?;
            c.hub.get_or_insert_with(Default::default).origin = ClusterOrigin::Import as i32;
            if edit.accept {
                rules::accept(&mut c, "ClusterImportPolicyAccepted", &why);
            }
            self.persist(c)
                .await
                .map_err(|e| ClusterError::Unavailable(e.to_string()))?;
            tracing::info!(policy = %edit.policy, accepted = edit.accept, "cluster created by its ClusterImportPolicy");
            return self.current();
        }
        let mut next = self.current()?;
        let was_accepted = rules::accepted(&next);
        let mut changed = rules::apply_labels(&mut next, &edit.set_labels, &edit.remove_labels)
            .map_err(|e| ClusterError::Invalid(e.to_string()))?;
        if edit.has_taints {
            changed |= rules::apply_document_taints(&mut next, &edit.taints)
                .map_err(|e| ClusterError::Invalid(format!("taints: {e}")))?;
        }
        let lease = edit.lease_duration_seconds;
        if lease != 0 {
            if !(1..=3600).contains(&lease) {
                return Err(ClusterError::Invalid(format!(
                    "leaseDurationSeconds: {lease} is outside 1..=3600"
                )));
            }
            let spec = next.spec.get_or_insert_with(Default::default);
            if spec.lease_duration_seconds != lease {
                spec.lease_duration_seconds = lease;
                if let Some(m) = next.metadata.as_mut() {
                    m.generation += 1;
                }
                changed = true;
            }
        }
        let accept = edit.accept && !was_accepted && !rules::denied(&next);
        if accept {
            let hub = next.hub.clone().unwrap_or_default();
            // The policy never binds or replaces a key: a waiting one is the admin's call.
            if !hub.requested_public_key.is_empty() {
                return Err(ClusterError::Precondition(format!(
                    "another agent key waits under {:?}: the hub cluster admin decides (flotilla \
                     accept {} --key …)",
                    self.name, self.name
                )));
            }
            if let Some(fp) = self.revoked_bound_key(&next) {
                return Err(ClusterError::Precondition(format!(
                    "the agent key of {:?} (fingerprint {fp}) was revoked; only the hub cluster \
                     admin can accept it again (flotilla accept {} --key {fp})",
                    self.name, self.name
                )));
            }
            changed |= rules::accept(&mut next, "ClusterImportPolicyAccepted", &why);
        }
        if changed {
            self.persist(next)
                .await
                .map_err(|e| ClusterError::Unavailable(e.to_string()))?;
        }
        let c = self.current()?;
        if rules::accepted(&c) && (accept || lease != 0) {
            self.lease_deadline = Some(Instant::now() + self.grace(&c));
        }
        if accept {
            self.notify(
                RegistrationState::Accepted,
                &format!("accepted by ClusterImportPolicy {}", edit.policy),
            )
            .await;
        }
        Ok(c)
    }

    /// An OCM ManagedCluster document. A cluster not known yet is created ahead of its agent
    /// (accepted at once when the document says `hubAcceptsClient: true`; the first agent key
    /// that registers under its name is recorded, as for any registration). A known cluster is
    /// edited to say what the document says: its labels are set (others kept), the document's
    /// taints replace the admin's (the hub's own stay), a lease duration other than 0 applies,
    /// and `hubAcceptsClient: true` accepts it. `false` never denies: a document that leaves
    /// the field out means the same, and denying stays an explicit `flotilla deny`.
    async fn apply_document(
        &mut self,
        doc: ManagedCluster,
    ) -> Result<ManagedCluster, ClusterError> {
        let spec = doc.spec.clone().unwrap_or_default();
        let labels = doc
            .metadata
            .as_ref()
            .map(|m| m.labels.clone())
            .unwrap_or_default();
        for warning in rules::split_hub_taints(&spec.taints).1 {
            tracing::info!(%warning, "ManagedCluster document");
        }
        if self.cluster.is_none() {
            let c = rules::precreated(
                &self.name,
                labels,
                &spec,
                self.shared.config.default_lease_duration_seconds,
            )
            .map_err(|e| ClusterError::Invalid(e.to_string()))?;
            self.persist(c)
                .await
                .map_err(|e| ClusterError::Unavailable(e.to_string()))?;
            tracing::info!(
                accepted = spec.hub_accepts_client,
                "cluster created ahead of its agent"
            );
            return self.current();
        }
        let mut c = self
            .edit(|c| {
                let labelled = rules::apply_labels(c, &labels, &[])?;
                let tainted =
                    rules::apply_document_taints(c, &spec.taints).map_err(|e| e.within("spec."))?;
                Ok(labelled || tainted)
            })
            .await?;
        let current = c.spec.as_ref().map_or(0, |s| s.lease_duration_seconds);
        if spec.lease_duration_seconds != 0 && spec.lease_duration_seconds != current {
            c = Box::pin(self.admin_edit(AdminEdit::SetLease(spec.lease_duration_seconds))).await?;
        }
        if spec.hub_accepts_client && !rules::accepted(&c) {
            c = Box::pin(self.admin_edit(AdminEdit::Accept(None))).await?;
        }
        Ok(c)
    }

    pub(super) async fn register(
        &mut self,
        request: RegistrationRequest,
        reply: Option<ReplyTo>,
        credential: Option<String>,
    ) {
        self.heard_from(Instant::now());
        let ctx = rules::registration::Context {
            policy: self.shared.config.key_policy,
            auto: &self.shared.config.auto_accept,
            default_lease_seconds: self.shared.config.default_lease_duration_seconds,
            now: unix_now(),
        };
        let who = match &credential {
            Some(user) => Credential::User(user),
            None => Credential::Unknown,
        };
        let was_accepted = self.cluster.as_deref().is_some_and(rules::accepted);
        let decision = match self.workspace_name() {
            Some(message) => Decision::Refuse {
                reason: "workspace_name",
                message,
            },
            None => rules::registration::decide(self.cluster.as_deref(), &request, who, &ctx),
        };
        let mut response = match decision {
            Decision::Denied => {
                self.refused("denied", "the hub cluster admin denied this cluster");
                response(
                    &self.name,
                    RegistrationState::Denied,
                    0,
                    "the hub cluster admin denied this cluster",
                )
            }
            Decision::Refuse { reason, message } => {
                self.refused(reason, &message);
                self.remember_refusal(&message).await;
                response(&self.name, RegistrationState::Rejected, 0, &message)
            }
            Decision::Store { cluster, changed } => {
                let c = *cluster;
                let new = self.cluster.is_none();
                if changed && let Err(e) = self.persist(c.clone()).await {
                    tracing::warn!(error = %e, "registration not persisted; the agent is told to ask again");
                    self.shared.metrics.registration_busy("store");
                    let busy = rules::registration::busy(&request, STORE_RETRY);
                    self.answer_registration(reply, busy).await;
                    return;
                }
                let labels = rules::registration::registrant_labels(&request.labels);
                if new {
                    self.shared
                        .metrics
                        .registration_labels_dropped(labels.dropped.keys());
                    tracing::info!(
                        accepted = rules::accepted(&c),
                        dropped_labels = %labels.dropped_text(),
                        "new cluster registered"
                    );
                }
                if rules::accepted(&c) && (new || !was_accepted) {
                    self.lease_deadline = Some(Instant::now() + self.grace(&c));
                }
                let mut answer = self.registration_response(&c, &request.agent_public_key);
                // Said on every answer: the agent keeps asking for them, and they never count.
                answer
                    .message
                    .push_str(&rules::registration::dropped_note(&labels));
                answer.dropped_labels = labels.dropped.into_keys().collect();
                answer
            }
        };
        response = self.with_credentials(response, &request);
        response.in_reply_to = rules::registration::in_reply_to(&request);
        self.answer_registration(reply, response).await;
    }

    /// Why a new cluster may not take this name: a workspace namespace of the grants in force
    /// (its namespace would be read by its sets' viewers and the workspace by its own grants —
    /// review r1 §5; `ApplyCluster` and `CreateJoinToken` refuse the same names).
    fn workspace_name(&self) -> Option<String> {
        let grants = self.shared.grants.as_ref()?;
        (self.cluster.is_none() && grants.current().grants.names_namespace(&self.name)).then(|| {
            format!(
                "cluster name {:?} is a workspace namespace in the hub's grants file; a cluster \
                 may not take a workspace's name: register under another name",
                self.name
            )
        })
    }

    pub(super) async fn answer_registration(
        &self,
        reply: Option<ReplyTo>,
        response: RegistrationResponse,
    ) {
        if let Some(reply) = reply {
            let ev = Event::new(
                types::registration_response(),
                SOURCE,
                self.name.clone(),
                &response,
            );
            reply.answer(&self.shared.publisher, &ev).await;
        }
    }

    /// Counts (and logs, within the budget) a refused registration.
    fn refused(&self, reason: &str, message: &str) {
        if self.shared.metrics.registration_refused(reason) {
            tracing::warn!(reason, message, "registration refused; nothing changed");
        }
    }

    /// Keeps the latest refusal on the cluster for `describe cluster`, written only when it
    /// changes so a flood of refused requests is not a flood of writes.
    async fn remember_refusal(&mut self, message: &str) {
        let Some(mut c) = self.cluster.as_deref().cloned() else {
            return;
        };
        let hub = c.hub.get_or_insert_with(Default::default);
        let now = Instant::now();
        if hub.last_refusal == message
            || self
                .refusal_written
                .is_some_and(|t| now.duration_since(t) < std::time::Duration::from_secs(60))
        {
            return;
        }
        hub.last_refusal = message.to_string();
        self.refusal_written = Some(now);
        self.persist_or_retry(c).await;
    }

    /// Adds the agent's NATS credentials to an Accepted reply when the hub runs in secure mode,
    /// the agent asked for them and presents the cluster's agent key.
    fn with_credentials(
        &self,
        mut response: RegistrationResponse,
        request: &RegistrationRequest,
    ) -> RegistrationResponse {
        let (Some(security), Some(c)) = (&self.shared.security, self.cluster.as_deref()) else {
            return response;
        };
        if response.state != RegistrationState::Accepted as i32
            || !request.credentials_wanted
            || !rules::may_issue(c, &request.agent_public_key)
        {
            return response;
        }
        match security.issue(Subject::Cluster(&self.name), &request.agent_public_key) {
            Ok(issued) => {
                response.user_jwt = issued.jwt;
                response.user_jwt_expires = Some(prost_types::Timestamp {
                    seconds: issued.expires_at,
                    nanos: 0,
                });
                self.shared.metrics.credentials_issued.inc();
            }
            Err(e) => {
                tracing::warn!(error = %e, "no credentials issued");
                response.message = format!("accepted, but no credentials could be issued: {e}");
                return response;
            }
        }
        response
    }

    /// Forgets the cluster's join credential once the agent that came with it reports over its
    /// own credentials. It is not revoked on the server: the name is bound from then on, so the
    /// hub refuses anything else it could ask, it expires anyway, and a revocation per joined
    /// cluster would outgrow the account JWT.
    async fn spend_join(&mut self, c: &ManagedCluster) {
        let Some(hub) = c.hub.as_ref().filter(|h| !h.join_key.is_empty()) else {
            return;
        };
        if hub.join_bound_key.is_empty() || hub.join_bound_key != hub.agent_public_key {
            return;
        }
        let mut next = c.clone();
        let hub = next.hub.get_or_insert_with(Default::default);
        hub.join_key.clear();
        hub.join_expires = None;
        hub.join_accept = false;
        hub.join_bound_key.clear();
        hub.join_cluster_set.clear();
        tracing::info!("join credential spent");
        self.persist_or_retry(next).await;
    }

    /// Mints a join credential for this cluster, creating the cluster ahead of its agent when
    /// it does not exist yet. A previous, unspent join credential is revoked. `cluster_set`
    /// (empty: none) is recorded with the credential and becomes the cluster's set when an
    /// agent registers with it ([`rules::registration::join_set`]).
    pub(super) async fn join(
        &mut self,
        ttl: std::time::Duration,
        accept: bool,
        cluster_set: String,
    ) -> Result<JoinToken, ClusterError> {
        if !cluster_set.is_empty() {
            flotilla_api::names::validate_dns1123_label("cluster_set", &cluster_set)
                .map_err(|e| ClusterError::Invalid(e.to_string()))?;
        }
        let Some(security) = self.shared.security.clone() else {
            return Err(ClusterError::Precondition(
                "join credentials need a hub in secure mode (--secure-dir)".into(),
            ));
        };
        let mut next = match self.cluster.as_deref().cloned() {
            // A denied cluster starts over with a new agent: its (revoked) key is unbound and
            // the cluster is pending again, so only the join credential's key can take it.
            Some(mut c) if rules::denied(&c) => {
                rules::registration::start_over(&mut c);
                c
            }
            Some(c) => c,
            None => {
                // In the credential's set from the start, not parked in `default` until the
                // agent registers (where `default`'s admins could take it: review r1 §7).
                let mut labels = std::collections::HashMap::new();
                if !cluster_set.is_empty() {
                    labels.insert(meta::CLUSTERSET_LABEL.to_string(), cluster_set.clone());
                }
                let mut c = rules::precreated(
                    &self.name,
                    labels,
                    &Default::default(),
                    self.shared.config.default_lease_duration_seconds,
                )
                .map_err(|e| ClusterError::Invalid(e.to_string()))?;
                c.hub.get_or_insert_with(Default::default).origin = ClusterOrigin::Join as i32;
                c
            }
        };
        let (creds, issued) = security
            .mint_join(&self.name, ttl)
            .map_err(|e| ClusterError::Invalid(e.to_string()))?;
        let hub = next.hub.get_or_insert_with(Default::default);
        let previous = (!hub.join_key.is_empty()).then(|| {
            (
                hub.join_key.clone(),
                hub.join_expires.as_ref().map_or(i64::MAX, |t| t.seconds),
            )
        });
        if let Some((key, expires)) = previous {
            security.revoke_join(&key, expires).await.map_err(|e| {
                ClusterError::Unavailable(format!("revoking the previous join credential: {e}"))
            })?;
        }
        let public_key = creds.public_key();
        let expires = prost_types::Timestamp {
            seconds: issued.expires_at,
            nanos: 0,
        };
        hub.join_key = public_key.clone();
        hub.join_expires = Some(expires);
        hub.join_accept = accept;
        hub.join_bound_key.clear();
        hub.join_cluster_set = cluster_set.clone();
        self.persist(next)
            .await
            .map_err(|e| ClusterError::Unavailable(e.to_string()))?;
        tracing::info!(
            accept,
            cluster_set = %cluster_set,
            expires = issued.expires_at,
            "join credential minted"
        );
        Ok(JoinToken {
            cluster_name: self.name.clone(),
            creds: creds.format().expose().to_string(),
            public_key,
            expires: Some(expires),
            cluster_set,
        })
    }

    /// Secure mode: revokes the cluster's agent key, any key waiting for acceptance and its join
    /// credential. Nothing is revoked (and the caller must not go on) when this fails.
    async fn revoke_keys(&self, c: &ManagedCluster) -> Result<(), ClusterError> {
        let (Some(security), Some(hub)) = (&self.shared.security, &c.hub) else {
            return Ok(());
        };
        let unavailable = |e: crate::security::revocations::RevocationError| {
            ClusterError::Unavailable(format!("revoking the cluster's keys: {e}"))
        };
        security
            .revoke(&[&hub.agent_public_key, &hub.requested_public_key])
            .await
            .map_err(unavailable)?;
        let expires = hub.join_expires.as_ref().map_or(i64::MAX, |t| t.seconds);
        security
            .revoke_join(&hub.join_key, expires)
            .await
            .map_err(unavailable)
    }

    fn registration_response(&self, c: &ManagedCluster, key: &str) -> RegistrationResponse {
        if rules::registration::accepted_for(c, key, self.shared.config.key_policy) {
            RegistrationResponse {
                managed_namespaces: rules::namespaces_for_agent(c),
                external_addons: rules::addons::external_addons_for_agent(c),
                ..response(
                    &self.name,
                    RegistrationState::Accepted,
                    self.lease_seconds(c),
                    "accepted",
                )
            }
        } else {
            let fp = flotilla_api::fingerprint::of(key);
            response(
                &self.name,
                RegistrationState::Pending,
                self.lease_seconds(c),
                &format!(
                    "waiting for the hub cluster admin to accept this agent's key (flotilla accept {} --key {fp})",
                    self.name
                ),
            )
        }
    }

    async fn notify(&self, state: RegistrationState, message: &str) {
        let Some(c) = self.cluster.as_deref() else {
            return;
        };
        let mut r = response(&self.name, state, self.lease_seconds(c), message);
        if state == RegistrationState::Accepted {
            r.managed_namespaces = rules::namespaces_for_agent(c);
            r.external_addons = rules::addons::external_addons_for_agent(c);
        }
        self.send(
            crate::wire::of(self.cluster.as_deref()).spec(&self.name),
            types::registration_response(),
            &r,
        )
        .await;
    }

    async fn send(
        &self,
        subject: String,
        ty: flotilla_bus::EventType,
        payload: &RegistrationResponse,
    ) {
        let ev = Event::new(ty, SOURCE, self.name.clone(), payload);
        if let Err(e) = self.shared.publisher.publish(subject, &ev).await {
            tracing::warn!(error = %e, "publishing to the agent failed");
        }
    }

    pub(super) async fn lease(&mut self, ev: LeaseEvent) {
        let LeaseEvent {
            renewal,
            sequence,
            server_time,
            ack,
        } = ev;
        self.lease_inner(renewal, sequence, server_time).await;
        ack_message(ack).await;
        // A lease arrives over the agent's own credentials (secure mode): its join credential
        // has served its purpose. Not earlier — revoking it as the credentials are issued would
        // cut the connection the answer carrying them goes over.
        if let Some(c) = self.cluster.clone().filter(|c| rules::accepted(c)) {
            self.spend_join(&c).await;
        }
    }

    async fn lease_inner(
        &mut self,
        renewal: LeaseRenewal,
        sequence: Option<u64>,
        server_time: SystemTime,
    ) {
        let ty = types::lease_renewal().to_string();
        let Some(c) = self
            .cluster
            .as_deref()
            .filter(|c| rules::accepted(c))
            .cloned()
        else {
            self.shared.metrics.rejected(&ty, "not_accepted");
            tracing::debug!("lease renewal from a cluster that is not accepted ignored");
            return;
        };
        if let Some(seq) = sequence {
            if seq <= self.lease_sequence {
                self.shared.metrics.rejected(&ty, "stale_sequence");
                return;
            }
            self.lease_sequence = seq;
        }
        let effective = server_time.max(self.acquired);
        let age = SystemTime::now()
            .duration_since(effective)
            .unwrap_or_default();
        let grace = self.grace(&c);
        if age >= grace {
            // A renewal replayed from the stream after an outage: too old to prove liveness.
            return;
        }
        self.lease_deadline = Some(Instant::now() + (grace - age));
        // Also a cluster back after its lease ran out: its unconfirmed specs wait a back-off
        // from this first renewal, for the resync its agent makes as it reconnects.
        self.heard_from(super::server_instant(server_time));
        let mut next = c;
        let mut changed = rules::join(&mut next);
        let healthy = next.hub.as_ref().is_none_or(|h| h.agent_healthy);
        changed |= if healthy {
            rules::set_available(
                &mut next,
                status::TRUE,
                "ManagedClusterAvailable",
                "Managed cluster is available",
            )
        } else {
            let msg = next
                .status
                .as_ref()
                .and_then(|s| meta::find_condition(&s.conditions, meta::COND_AVAILABLE))
                .map(|c| c.message.clone())
                .unwrap_or_default();
            rules::set_available(&mut next, status::FALSE, "ManagedClusterUnhealthy", &msg)
        };
        if let Some(agent_time) = renewal.renew_time.as_ref().map(meta::system_time) {
            let skew = agent_time
                .duration_since(server_time)
                .or_else(|e| Ok::<_, ()>(e.duration()))
                .unwrap_or_default();
            let st = next.status.get_or_insert_with(Default::default);
            changed |= if skew > self.shared.config.clock_skew_tolerance {
                meta::set_condition(
                    &mut st.conditions,
                    COND_CLOCK_SYNCED,
                    status::FALSE,
                    "ManagedClusterClockOutOfSync",
                    "The agent's clock differs from the hub's by more than the tolerance",
                )
            } else {
                meta::set_condition(
                    &mut st.conditions,
                    COND_CLOCK_SYNCED,
                    status::TRUE,
                    "ManagedClusterClockSynced",
                    "The clock of the managed cluster is synced with the hub.",
                )
            };
        }
        let behind = rules::agent_namespaces_behind(&next);
        if changed {
            self.persist_soon(next).await;
        }
        if behind {
            // The agent missed the last managed-namespace update (core NATS is at most once):
            // tell it again, at most once per lease period.
            self.notify(RegistrationState::Accepted, "accepted").await;
        }
    }

    /// Writes the managed namespaces the cluster's sets ask for into its status and, when the
    /// list changed, tells an accepted agent (which creates them, or marks the ones it no
    /// longer manages).
    pub(super) async fn managed_namespaces(
        &mut self,
        desired: Vec<ClusterSetManagedNamespaceConfig>,
    ) -> Result<(), ClusterError> {
        let mut next = self.current()?;
        if rules::set_managed_namespaces(&mut next, desired) {
            self.persist_and_tell_agent(next).await;
        }
        Ok(())
    }

    /// Persists a change an accepted agent must hear of, then tells it (a full Accepted answer).
    async fn persist_and_tell_agent(&mut self, next: ManagedCluster) {
        let accepted = rules::accepted(&next);
        self.persist_or_retry(next).await;
        if accepted {
            self.notify(RegistrationState::Accepted, "accepted").await;
        }
    }

    /// Records whether an add-on is installed here by someone else (and where its spoke Lease
    /// is) and, when that changed, tells an accepted agent the new list.
    pub(super) async fn external_addon(
        &mut self,
        addon: &str,
        install_namespace: Option<&str>,
    ) -> Result<(), ClusterError> {
        let mut next = self.current()?;
        if rules::addons::set_external_addon(&mut next, addon, install_namespace) {
            self.persist_and_tell_agent(next).await;
        }
        Ok(())
    }

    pub(super) async fn status(&mut self, ev: StatusEvent) {
        let StatusEvent {
            report,
            sequence,
            hash,
            server_time,
            ack,
        } = ev;
        let ty = types::cluster_status().to_string();
        let Some(mut next) = self
            .cluster
            .as_deref()
            .filter(|c| rules::accepted(c))
            .cloned()
        else {
            self.shared.metrics.rejected(&ty, "not_accepted");
            ack_message(ack).await;
            return;
        };
        self.heard_from(super::server_instant(server_time));
        let hub = next.hub.get_or_insert_with(Default::default);
        let last = hub
            .last_sequence
            .get(subjects::KIND_CLUSTER)
            .copied()
            .unwrap_or(0);
        if let Some(seq) = sequence {
            if seq <= last {
                self.shared.metrics.rejected(&ty, "stale_sequence");
                ack_message(ack).await;
                return;
            }
            hub.last_sequence.insert(subjects::KIND_CLUSTER.into(), seq);
        }
        if let Some(h) = &hash {
            if *h == hub.last_status_hash {
                ack_message(ack).await;
                return;
            }
            hub.last_status_hash = h.clone();
        }
        hub.agent_healthy = report.healthy;
        rules::apply_report(
            &mut next,
            &report.capacity,
            &report.allocatable,
            &report.kubernetes_version,
            &report.claims,
        );
        let behind = rules::apply_namespace_report(&mut next, &report.managed_namespaces)
            | rules::addons::apply_addon_health(&mut next, &report.addon_health);
        let lease_live = self.lease_deadline.is_some_and(|d| d > Instant::now());
        if lease_live {
            if report.healthy {
                rules::set_available(
                    &mut next,
                    status::TRUE,
                    "ManagedClusterAvailable",
                    "Managed cluster is available",
                );
            } else {
                rules::set_available(
                    &mut next,
                    status::FALSE,
                    "ManagedClusterUnhealthy",
                    &report.health_message,
                );
            }
        }
        // A report that changes only the hub's notes is not written; nor is the first report of
        // a cluster just accepted: its first renewal follows at once and writes both (it adds
        // Joined and ClockSynced), one write instead of two for every joining cluster.
        if self
            .cluster
            .as_deref()
            .is_some_and(|c| rules::only_report_notes_changed(c, &next) || !rules::joined(c))
        {
            self.adopt_cluster(next);
        } else {
            self.persist_soon(next).await;
        }
        ack_message(ack).await;
        if behind {
            self.notify(RegistrationState::Accepted, "accepted").await;
        }
    }

    pub(super) async fn lease_expired(&mut self) {
        // A hub that cannot read its shard's status cannot tell a silent agent from a blind
        // hub: no judgment while blind, and a full grace from the moment it sees again.
        if let Some(c) = self.cluster.as_deref()
            && let Some(later) = self.sight.postpone(Instant::now(), self.grace(c))
        {
            self.lease_deadline = Some(later);
            return;
        }
        self.lease_deadline = None;
        let Some(mut next) = self
            .cluster
            .as_deref()
            .filter(|c| rules::accepted(c))
            .cloned()
        else {
            return;
        };
        if rules::set_available(
            &mut next,
            status::UNKNOWN,
            "ManagedClusterLeaseUpdateStopped",
            "Registration agent stopped updating its lease.",
        ) {
            tracing::warn!("lease expired: cluster is unreachable");
            self.shared.metrics.lease_expired.inc();
            self.persist_or_retry(next).await;
        }
    }

    pub(super) async fn delete(&mut self) -> Result<(), ClusterError> {
        let Some(current) = self.cluster.as_deref().cloned() else {
            return Err(ClusterError::NotFound(format!(
                "managed cluster {:?}",
                self.name
            )));
        };
        // Revoke first and fail closed: a cluster whose keys cannot be revoked stays.
        self.revoke_keys(&current).await?;
        self.bucket
            .purge(&self.name)
            .await
            .map_err(|e| ClusterError::Unavailable(e.to_string()))?;
        // Everything the agents sent about this cluster goes too.
        if let Err(e) = self
            .shared
            .status_stream
            .purge()
            .filter(subjects::status_of_cluster(&self.name))
            .await
        {
            tracing::warn!(error = %e, "purging the cluster's status subjects failed");
        }
        for (wname, _) in std::mem::take(&mut self.works) {
            if let Err(e) = self
                .work_bucket
                .purge(&self.work_ref(&wname).store_key())
                .await
            {
                tracing::warn!(error = %e, work = %wname, "purging a work of a deleted cluster failed");
            }
            self.shared
                .works
                .remove(&self.work_ref(&wname).inventory_key());
        }
        self.shared.recovery.forget_cluster(&self.name).await;
        self.notify_deleted().await;
        self.unregister();
        self.shared.inventory.remove(&self.name);
        self.cluster = None;
        tracing::info!("cluster deleted");
        Ok(())
    }

    /// Drops the cluster and its works from this hub, as stored elsewhere already: the actor
    /// ends after this.
    pub(super) fn forget(&mut self) {
        for (wname, _) in std::mem::take(&mut self.works) {
            self.shared
                .works
                .remove(&self.work_ref(&wname).inventory_key());
        }
        self.unregister();
        self.shared.inventory.remove(&self.name);
        self.cluster = None;
    }

    async fn notify_deleted(&self) {
        let r = response(
            &self.name,
            RegistrationState::Deleted,
            0,
            "the cluster was deleted on the hub",
        );
        self.send(
            crate::wire::of(self.cluster.as_deref()).spec(&self.name),
            types::cluster_deleted(),
            &r,
        )
        .await;
    }
}

pub(super) fn response(
    name: &str,
    state: RegistrationState,
    lease: i32,
    message: &str,
) -> RegistrationResponse {
    RegistrationResponse {
        cluster_name: name.to_string(),
        state: state as i32,
        lease_duration_seconds: lease,
        message: message.to_string(),
        ..Default::default()
    }
}
