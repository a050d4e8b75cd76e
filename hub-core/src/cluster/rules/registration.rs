//! Who may bind an agent key to a cluster name, and what a registration request may change.
//!
//! In secure mode ([`KeyPolicy::Pin`]) an agent key is *bound* to a name in three ways only:
//! the first registration of a name the hub has never seen (first key wins; the auto-accept
//! policy may accept it), a registration made with a join credential minted for that name (the
//! admin's intent: it replaces a key that registered first through the shared bootstrap
//! credential while the name was still pending, and accepts at once when the credential says so),
//! or the admin's `accept` of a waiting key. A request under a known name with another key
//! changes nothing — not even the claims, capacity or version it reports — and is refused with a
//! reason; a key that is not bound may wait in `requested_public_key` (first one wins) when it
//! came for a name created ahead of its agent, or through a join credential for an accepted
//! name (a rebuilt spoke), until the admin accepts it by fingerprint. Auto-accept never binds a
//! key to a name created ahead of its agent or already bound.
//!
//! In plain mode ([`KeyPolicy::Record`]) keys mean nothing on the wire and the latest one is
//! recorded, as before.
//!
//! A registrant never chooses its privileges: of the labels a first registration asks for, the
//! ones the hub reserves ([`flotilla_api::meta::is_reserved_label`]: the cluster set label,
//! every `*.open-cluster-management.io/`, `*.flotilla.io/`, `*.kubernetes.io/`, `*.k8s.io/`
//! key, and `name`) are dropped ([`registrant_labels`]) — kept aside for `describe cluster`,
//! said in the answer, counted — so a new cluster is in the `default` set until the admin, a
//! ManagedCluster document, an import policy's template or the join credential it registered
//! with ([`join_set`]) puts it elsewhere. Later registrations change no label at all.

use super::{
    AutoAccept, KeyPolicy, accept, accepted, apply_report, denied, new_cluster, reconcile_taints,
    record_agent_version, record_refused_version,
};
use flotilla_api::fingerprint;
use flotilla_api::meta::{CLUSTERSET_LABEL, is_reserved_label};
use flotilla_api::v1::{
    ManagedCluster, RegistrationRequest, RegistrationResponse, RegistrationState,
};
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

/// A registrant's labels, split by [`registrant_labels`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegistrantLabels {
    /// The labels a new cluster takes.
    pub kept: HashMap<String, String>,
    /// The labels the hub reserves, dropped (sorted by key, for messages).
    pub dropped: BTreeMap<String, String>,
}

impl RegistrantLabels {
    /// The dropped labels as `key=value, …` (for the answer and logs).
    pub fn dropped_text(&self) -> String {
        self.dropped
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Splits the labels a registration asks for into the ones a cluster may take from its
/// registrant and the ones only the hub and its admin set
/// ([`flotilla_api::meta::is_reserved_label`]), which are dropped: whoever holds the shared
/// bootstrap credential must not name its own cluster set, add-on features or name.
pub fn registrant_labels(labels: &HashMap<String, String>) -> RegistrantLabels {
    let mut out = RegistrantLabels::default();
    for (k, v) in labels {
        if is_reserved_label(k) {
            out.dropped.insert(k.clone(), v.clone());
        } else {
            out.kept.insert(k.clone(), v.clone());
        }
    }
    out
}

/// The answer's note on labels the hub dropped (empty when none were).
pub fn dropped_note(dropped: &RegistrantLabels) -> String {
    if dropped.dropped.is_empty() {
        return String::new();
    }
    format!(
        "; labels reserved for the hub were dropped: {} (a cluster's set comes from the hub \
         admin, a join credential naming it, or an import policy)",
        dropped.dropped_text()
    )
}

/// The NATS user a request came from, as the server attests it (`Nats-Request-Info`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credential<'a> {
    /// Plain mode, or a request that did not come through the agents' account.
    Unknown,
    /// A user of the agents' account: the shared bootstrap user, a join credential or the
    /// agent's own credentials.
    User(&'a str),
}

/// What the hub knows besides the request.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// Key policy.
    pub policy: KeyPolicy,
    /// The auto-accept policy.
    pub auto: &'a AutoAccept,
    /// Lease duration of new clusters.
    pub default_lease_seconds: i32,
    /// Now (Unix seconds), for join credential expiry.
    pub now: i64,
}

/// What to do with a registration request.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Store the cluster (new, or changed when `changed`) and answer from it.
    Store {
        /// The cluster after the request.
        cluster: Box<ManagedCluster>,
        /// Whether it differs from what is stored (always true for a new one).
        changed: bool,
    },
    /// Change nothing and answer Rejected with `message`.
    Refuse {
        /// Metric label.
        reason: &'static str,
        /// What the agent (and `describe cluster`) are told.
        message: String,
    },
    /// The cluster is denied.
    Denied,
}

/// Decides a registration request of `req` for `stored` (None: a name the hub has never seen).
pub fn decide(
    stored: Option<&ManagedCluster>,
    req: &RegistrationRequest,
    credential: Credential<'_>,
    ctx: &Context<'_>,
) -> Decision {
    let Some(stored) = stored else {
        return Decision::Store {
            cluster: Box::new(new_cluster(req, ctx.auto, ctx.default_lease_seconds)),
            changed: true,
        };
    };
    if denied(stored) {
        return Decision::Denied;
    }
    let key = req.agent_public_key.as_str();
    let mut c = stored.clone();
    let hub = c.hub.clone().unwrap_or_default();
    let via_join = joined_with(stored, credential, ctx.now);
    // A report that counts also says which wire the agent listens on (never an untrusted one:
    // it would turn the cluster's specs away from its agent).
    let report = |c: &mut ManagedCluster| {
        apply_report(
            c,
            &req.capacity,
            &req.allocatable,
            &req.kubernetes_version,
            &req.claims,
        ) | record_agent_version(c, &req.agent_version)
            | record_wire(c, req)
    };
    // Whose report counts: the agent over its own credentials (its NATS user is its key), or
    // over the join credential the admin minted for the name. A public key is no secret —
    // registration answers and `describe cluster` show it — so a request naming the bound key
    // through the shared bootstrap credential changes nothing.
    let trusted = via_join || credential == Credential::User(key);
    let mut changed;
    if !hub.agent_public_key.is_empty() && hub.agent_public_key == key {
        changed = false;
        if trusted || ctx.policy == KeyPolicy::Record {
            changed |= report(&mut c);
            changed |= clear_refusal(&mut c);
            changed |= accept_if_asked(&mut c, req, via_join, ctx, true);
        }
    } else if ctx.policy == KeyPolicy::Record {
        changed = report(&mut c);
        changed |= bind(&mut c, key);
        changed |= accept_if_asked(&mut c, req, false, ctx, true);
    } else if via_join && (hub.agent_public_key.is_empty() || !accepted(stored)) {
        // The admin's join credential binds the key, replacing one that registered first
        // through the shared bootstrap credential while the name was pending.
        changed = bind(&mut c, key);
        changed |= joined(&mut c, key);
        changed |= join_set(&mut c);
        changed |= report(&mut c);
        changed |= clear_refusal(&mut c);
        changed |= accept_if_asked(&mut c, req, true, ctx, false);
    } else if hub.agent_public_key.is_empty() || via_join {
        // A name created ahead of its agent (reached through the shared bootstrap credential),
        // or a rebuilt spoke of an accepted name with its join credential: the key waits for
        // the admin, first one wins; its report is not taken.
        if !hub.requested_public_key.is_empty() && hub.requested_public_key != key {
            // The admin's join credential takes the place of a key that merely waits.
            if !via_join {
                return refuse_other_key(stored, &hub.requested_public_key, key, "waits");
            }
        }
        changed = wait(&mut c, key);
        if via_join {
            changed |= joined(&mut c, key);
            changed |= join_set(&mut c);
        }
    } else {
        return refuse_other_key(stored, &hub.agent_public_key, key, "is bound");
    }
    reconcile_taints(&mut c);
    Decision::Store {
        cluster: Box::new(c),
        changed,
    }
}

/// Records the wire the agent says it listens on (`RegistrationRequest.listens_under_prefix`);
/// whether that changed the record.
fn record_wire(c: &mut ManagedCluster, req: &RegistrationRequest) -> bool {
    let hub = c.hub.get_or_insert_with(Default::default);
    let changed = hub.agent_listens_under_prefix != req.listens_under_prefix;
    hub.agent_listens_under_prefix = req.listens_under_prefix;
    changed
}

/// Whether the request came with the join credential recorded for the cluster, still valid.
/// What a registration of stored cluster `stored` refused for its agent version (`why`: the
/// refusal's text, which the agent is answered with) changes: when the request is the cluster's
/// own agent's — its bound key, over the agent's own credentials or the admin's join credential,
/// or any credential under the `Record` key policy, as for the reports [`decide`] takes — the
/// refused version and `AgentVersionAccepted=False` with `why`; `None` when nothing changes (a
/// request under another key or over the shared bootstrap credential changes nothing stored:
/// DESIGN.md §5).
pub fn version_refused(
    stored: &ManagedCluster,
    req: &RegistrationRequest,
    credential: Credential<'_>,
    ctx: &Context<'_>,
    why: &str,
) -> Option<ManagedCluster> {
    let key = req.agent_public_key.as_str();
    let bound = stored
        .hub
        .as_ref()
        .map_or("", |h| h.agent_public_key.as_str());
    let trusted = joined_with(stored, credential, ctx.now)
        || credential == Credential::User(key)
        || ctx.policy == KeyPolicy::Record;
    if key.is_empty() || bound != key || !trusted || denied(stored) {
        return None;
    }
    let mut c = stored.clone();
    record_refused_version(&mut c, &req.agent_version, why).then_some(c)
}

fn joined_with(c: &ManagedCluster, credential: Credential<'_>, now: i64) -> bool {
    let Credential::User(user) = credential else {
        return false;
    };
    c.hub.as_ref().is_some_and(|h| {
        !h.join_key.is_empty()
            && h.join_key == user
            && h.join_expires.as_ref().is_none_or(|t| t.seconds > now)
    })
}

/// Accepts a cluster whose bound key registered: through a pre-approving join credential, or
/// (when `auto_ok`) by the auto-accept policy on the cluster's labels and the reported claims.
fn accept_if_asked(
    c: &mut ManagedCluster,
    req: &RegistrationRequest,
    via_join: bool,
    ctx: &Context<'_>,
    auto_ok: bool,
) -> bool {
    if accepted(c) {
        return false;
    }
    let pre_approved = via_join && c.hub.as_ref().is_some_and(|h| h.join_accept);
    if pre_approved {
        return accept(
            c,
            "JoinCredentialAccepted",
            "Accepted: the agent registered with a pre-approved join credential",
        );
    }
    let labels = c
        .metadata
        .as_ref()
        .map(|m| m.labels.clone())
        .unwrap_or_default();
    if auto_ok && ctx.auto.admits(&labels, &req.claims) {
        return accept(
            c,
            "AutoAccepted",
            "Accepted by the hub's auto-accept policy",
        );
    }
    false
}

fn bind(c: &mut ManagedCluster, key: &str) -> bool {
    let hub = c.hub.get_or_insert_with(Default::default);
    if hub.agent_public_key == key && hub.requested_public_key.is_empty() {
        return false;
    }
    hub.agent_public_key = key.to_string();
    hub.requested_public_key.clear();
    true
}

/// Remembers the key that came with the join credential.
fn joined(c: &mut ManagedCluster, key: &str) -> bool {
    let hub = c.hub.get_or_insert_with(Default::default);
    if hub.join_bound_key == key {
        return false;
    }
    hub.join_bound_key = key.to_string();
    true
}

/// Puts the cluster in the set its join credential names (the admin's choice when minting it,
/// `flotilla join-token NAME --set SET`), when an agent registers with that credential.
pub fn join_set(c: &mut ManagedCluster) -> bool {
    let set = c
        .hub
        .as_ref()
        .map(|h| h.join_cluster_set.clone())
        .unwrap_or_default();
    if set.is_empty() {
        return false;
    }
    let m = c.metadata.get_or_insert_with(Default::default);
    if m.labels.get(CLUSTERSET_LABEL) == Some(&set) {
        return false;
    }
    m.labels.insert(CLUSTERSET_LABEL.to_string(), set);
    true
}

fn wait(c: &mut ManagedCluster, key: &str) -> bool {
    let hub = c.hub.get_or_insert_with(Default::default);
    if hub.requested_public_key == key {
        return false;
    }
    hub.requested_public_key = key.to_string();
    true
}

fn clear_refusal(c: &mut ManagedCluster) -> bool {
    let hub = c.hub.get_or_insert_with(Default::default);
    !std::mem::take(&mut hub.last_refusal).is_empty()
}

fn refuse_other_key(c: &ManagedCluster, held: &str, key: &str, how: &str) -> Decision {
    let name = c.metadata.as_ref().map_or("", |m| m.name.as_str());
    Decision::Refuse {
        reason: "key_mismatch",
        message: format!(
            "cluster {name:?}: another agent key {how} under this name (fingerprint {}); this \
             request's key (fingerprint {}) changes nothing. If this spoke was rebuilt, ask the \
             hub admin for a join credential (flotilla join-token {name}) and to accept the new \
             key (flotilla accept {name} --key {})",
            fingerprint::of(held),
            fingerprint::of(key),
            fingerprint::of(key),
        ),
    }
}

/// A denied cluster starting over with a new agent (the admin minted a join credential for
/// it): no longer denied, pending, its keys unbound — its old key stays revoked.
pub fn start_over(c: &mut ManagedCluster) {
    if let Some(st) = c.status.as_mut() {
        flotilla_api::meta::remove_condition(
            &mut st.conditions,
            flotilla_api::meta::COND_HUB_DENIED,
        );
        flotilla_api::meta::remove_condition(
            &mut st.conditions,
            flotilla_api::meta::COND_HUB_ACCEPTED,
        );
    }
    if let Some(spec) = c.spec.as_mut() {
        spec.hub_accepts_client = false;
    }
    let hub = c.hub.get_or_insert_with(Default::default);
    hub.agent_public_key.clear();
    hub.requested_public_key.clear();
}

/// Whether the agent presenting `key` is the one the cluster answers Accepted to: accepted,
/// and (in secure mode) `key` is the bound key.
pub fn accepted_for(c: &ManagedCluster, key: &str, policy: KeyPolicy) -> bool {
    accepted(c)
        && (policy == KeyPolicy::Record
            || c.hub
                .as_ref()
                .is_some_and(|h| !h.agent_public_key.is_empty() && h.agent_public_key == key))
}

/// Why an admin's accept cannot be carried out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AcceptError {
    /// `--key` names no key of the cluster.
    #[error(
        "no agent key with fingerprint {given} under {name:?} (bound: {bound}, waiting: {waiting}); nothing accepted"
    )]
    NoSuchKey {
        /// The cluster.
        name: String,
        /// What the admin gave.
        given: String,
        /// The bound key's fingerprint (or "none").
        bound: String,
        /// The waiting key's fingerprint (or "none").
        waiting: String,
    },
    /// A waiting key would replace an accepted cluster's bound key without `--key`.
    #[error(
        "{name:?} is accepted with key {bound} and another key {waiting} waits; replacing a key must name it: flotilla accept {name} --key {waiting}"
    )]
    NameTheKey {
        /// The cluster.
        name: String,
        /// The bound key's fingerprint.
        bound: String,
        /// The waiting key's fingerprint.
        waiting: String,
    },
}

/// The admin accepts `c`, optionally naming the key by fingerprint: a waiting key becomes the
/// bound key (returned: the key it replaces, to be revoked). Without `key`, a waiting key is
/// adopted only when no key is bound yet — replacing an accepted cluster's key must name it.
pub fn accept_key(
    c: &mut ManagedCluster,
    key: Option<&str>,
) -> Result<Option<String>, AcceptError> {
    let name = c
        .metadata
        .as_ref()
        .map(|m| m.name.clone())
        .unwrap_or_default();
    let hub = c.hub.get_or_insert_with(Default::default);
    let show = |k: &str| {
        if k.is_empty() {
            "none".to_string()
        } else {
            fingerprint::of(k)
        }
    };
    let adopt = match key {
        Some(given) if fingerprint::names(&hub.requested_public_key, given) => true,
        Some(given) if fingerprint::names(&hub.agent_public_key, given) => false,
        Some(given) => {
            return Err(AcceptError::NoSuchKey {
                name,
                given: given.to_string(),
                bound: show(&hub.agent_public_key),
                waiting: show(&hub.requested_public_key),
            });
        }
        None if hub.requested_public_key.is_empty() => false,
        None if hub.agent_public_key.is_empty() => true,
        None => {
            return Err(AcceptError::NameTheKey {
                name,
                bound: show(&hub.agent_public_key),
                waiting: show(&hub.requested_public_key),
            });
        }
    };
    if !adopt {
        return Ok(None);
    }
    let new = std::mem::take(&mut hub.requested_public_key);
    hub.last_refusal.clear();
    let old = std::mem::replace(&mut hub.agent_public_key, new);
    Ok((!old.is_empty()).then_some(old))
}

/// What an answer to `request` carries in `in_reply_to`: its request id (at most 64
/// characters), or `-` when it had none.
pub fn in_reply_to(request: &RegistrationRequest) -> String {
    if request.request_id.is_empty() {
        "-".into()
    } else {
        request.request_id.chars().take(64).collect()
    }
}

/// The answer to a registration that stored nothing because the hub is busy: ask again after
/// `retry_after`.
pub fn busy(request: &RegistrationRequest, retry_after: Duration) -> RegistrationResponse {
    RegistrationResponse {
        cluster_name: request.cluster_name.clone(),
        state: RegistrationState::Busy as i32,
        message: format!(
            "the hub is registering as many clusters as it may at once; ask again in {:.1} s",
            retry_after.as_secs_f64()
        ),
        retry_after_ms: u32::try_from(retry_after.as_millis()).unwrap_or(u32::MAX),
        in_reply_to: in_reply_to(request),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests;
