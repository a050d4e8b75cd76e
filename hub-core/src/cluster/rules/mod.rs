//! Pure ManagedCluster rules with OCM semantics: creation from a registration request, the
//! acceptance conditions, availability and the hub-maintained taints, label and taint edits, and
//! validation of everything an agent or admin sends. No I/O here, so all of it is unit-tested.

use flotilla_api::clusterset::{managed_namespace_keys, sort_managed_namespaces};
use flotilla_api::meta::{
    self, CLUSTERSET_LABEL, COND_AVAILABLE, COND_HUB_ACCEPTED, COND_HUB_DENIED, COND_JOINED,
    DEFAULT_CLUSTERSET, MAX_CUSTOM_CLAIMS, RESERVED_CLAIMS, TAINT_EFFECTS, TAINT_UNAVAILABLE,
    TAINT_UNREACHABLE, status,
};
use flotilla_api::names;
use flotilla_api::selector;
use flotilla_api::taints::is_hub_taint;
pub use flotilla_api::taints::split_hub_taints;
use flotilla_api::v1::{
    ClusterClaim, ClusterOrigin, ClusterSetManagedNamespaceConfig, LabelSelector, ManagedCluster,
    ManagedClusterSpec, ManagedClusterStatus, ManagedClusterVersion, ObjectMeta,
    RegistrationRequest, Taint, TaintKey,
};
use std::collections::HashMap;

pub mod addons;
mod agent_version;
pub mod registration;

pub use agent_version::{record_agent_version, record_refused_version};

/// What is wrong with a registration, a report or an edit of a cluster; every message starts
/// with the field it names (`claims[1].value`, `taints[0].effect`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    /// A name, label, claim or taint key breaks the Kubernetes rules.
    #[error(transparent)]
    Name(#[from] names::NameError),
    /// A claim reported twice.
    #[error("claims[{index}].name: duplicate claim {name:?}")]
    DuplicateClaim {
        /// Its index in the report.
        index: usize,
        /// Its name.
        name: String,
    },
    /// More custom claims than [`MAX_CUSTOM_CLAIMS`].
    #[error("claims: {0} custom claims reported, at most {MAX_CUSTOM_CLAIMS} allowed")]
    TooManyClaims(usize),
    /// A label both set and removed by one edit.
    #[error("labels[{0:?}]: both set and removed in one request")]
    SetAndRemoved(String),
    /// A taint's effect is not one of [`TAINT_EFFECTS`].
    #[error(
        "{field}.effect: {effect:?} is not a taint effect (want NoSelect, PreferNoSelect or \
         NoSelectIfNew)"
    )]
    NotAnEffect {
        /// The taint's field (`taints[2]`).
        field: String,
        /// The effect given.
        effect: String,
    },
    /// A removal names an effect that is not one of [`TAINT_EFFECTS`].
    #[error("remove[{index}].effect: {effect:?} is not a taint effect")]
    NotAnEffectToRemove {
        /// The removal's index.
        index: usize,
        /// The effect given.
        effect: String,
    },
    /// An edit of a taint only the hub sets and clears.
    #[error("{field}.key: {key:?} is maintained by the hub")]
    HubTaint {
        /// The taint's field (`taints[0]`, `remove[1]`).
        field: String,
        /// Its key.
        key: String,
    },
    /// The external add-ons' health in a status report.
    #[error(transparent)]
    AddOnHealth(#[from] addons::HealthError),
    /// An error in a part of a larger document: the part's path comes first (`spec.`).
    #[error("{prefix}{source}")]
    In {
        /// What comes before the part's own field (`spec.`).
        prefix: &'static str,
        /// What is wrong in the part.
        #[source]
        source: Box<RuleError>,
    },
}

/// The text of a refusal: the router's refusals (a registration's reply, a refused status
/// report's log and metric) carry the message only.
impl From<RuleError> for String {
    fn from(e: RuleError) -> Self {
        e.to_string()
    }
}

impl RuleError {
    /// `self`, in the part of a document that `prefix` names (`spec.`).
    pub fn within(self, prefix: &'static str) -> Self {
        Self::In {
            prefix,
            source: Box::new(self),
        }
    }
}

/// Which new clusters the hub accepts without an admin. Both selectors read what the
/// registrant sends (its unreserved labels and its claims): they sort honest agents and
/// authenticate nobody. An auto-accepted cluster is in `default`: the registrant's labels never
/// name its set ([`registration::registrant_labels`]).
#[derive(Debug, Clone, Default)]
pub struct AutoAccept {
    /// Auto-accept is on.
    pub enabled: bool,
    /// Only clusters whose labels match (None = any).
    pub labels: Option<LabelSelector>,
    /// Only clusters whose claims match (None = any).
    pub claims: Option<LabelSelector>,
}

impl AutoAccept {
    /// Whether a cluster with these labels and claims is accepted automatically.
    pub fn admits(&self, labels: &HashMap<String, String>, claims: &[ClusterClaim]) -> bool {
        self.enabled
            && self
                .labels
                .as_ref()
                .is_none_or(|s| selector::matches_labels(s, labels))
            && self.claims.as_ref().is_none_or(|s| {
                selector::matches(s, |k| {
                    claims.iter().find(|c| c.name == k).map(|c| c.value.clone())
                })
            })
    }
}

/// Validates a registration request; the error names the field.
///
/// The text is what the registration's reply carries (the router's refusal takes a message):
/// [`check_registration`] is the typed check.
pub fn validate_registration(req: &RegistrationRequest) -> Result<(), String> {
    check_registration(req).map_err(|e| e.to_string())
}

/// Checks a registration request: its cluster name, labels and claims.
pub fn check_registration(req: &RegistrationRequest) -> Result<(), RuleError> {
    names::validate_cluster_name(&req.cluster_name)?;
    if let Some(e) = names::validate_labels("labels", &req.labels)
        .into_iter()
        .next()
    {
        return Err(e.into());
    }
    validate_claims(&req.claims)
}

/// Validates the managed namespaces an agent reports: set and namespace names are DNS-1123
/// labels (the hub only ever sends such names).
pub fn validate_namespace_report(
    list: &[ClusterSetManagedNamespaceConfig],
) -> Result<(), RuleError> {
    for (i, n) in list.iter().enumerate() {
        names::validate_dns1123_label(&format!("managedNamespaces[{i}].name"), &n.name)?;
        names::validate_dns1123_label(
            &format!("managedNamespaces[{i}].clusterSet"),
            &n.cluster_set,
        )?;
    }
    Ok(())
}

/// Validates reported claims: names and values, no duplicates, at most
/// [`MAX_CUSTOM_CLAIMS`] custom claims.
pub fn validate_claims(claims: &[ClusterClaim]) -> Result<(), RuleError> {
    let mut seen = std::collections::HashSet::new();
    let mut custom = 0;
    for (i, c) in claims.iter().enumerate() {
        names::validate_claim(&format!("claims[{i}]"), &c.name, &c.value)?;
        if !seen.insert(c.name.as_str()) {
            return Err(RuleError::DuplicateClaim {
                index: i,
                name: c.name.clone(),
            });
        }
        if !RESERVED_CLAIMS.contains(&c.name.as_str()) {
            custom += 1;
        }
    }
    if custom > MAX_CUSTOM_CLAIMS {
        return Err(RuleError::TooManyClaims(custom));
    }
    Ok(())
}

/// The status of ManagedClusterConditionAvailable (None when missing).
pub fn available(c: &ManagedCluster) -> Option<&str> {
    c.status
        .as_ref()
        .and_then(|s| meta::condition_status(&s.conditions, COND_AVAILABLE))
}

/// Whether the hub accepts the cluster.
pub fn accepted(c: &ManagedCluster) -> bool {
    c.spec.as_ref().is_some_and(|s| s.hub_accepts_client)
}

/// Whether an admin denied the cluster.
pub fn denied(c: &ManagedCluster) -> bool {
    c.status
        .as_ref()
        .and_then(|s| meta::condition_status(&s.conditions, COND_HUB_DENIED))
        == Some(status::TRUE)
}

/// A cluster as the hub first records it: its name, labels (plus the default set's unless they
/// name one), a lease defaulted at creation (as OCM's webhook does, so the object shows the lease
/// in force), no status yet.
fn fresh(name: &str, mut labels: HashMap<String, String>, lease_seconds: i32) -> ManagedCluster {
    labels
        .entry(CLUSTERSET_LABEL.to_string())
        .or_insert_with(|| DEFAULT_CLUSTERSET.to_string());
    ManagedCluster {
        metadata: Some(ObjectMeta {
            name: name.to_string(),
            labels,
            uid: uuid::Uuid::new_v4().to_string(),
            generation: 1,
            creation_timestamp: Some(meta::now()),
            ..Default::default()
        }),
        spec: Some(ManagedClusterSpec {
            lease_duration_seconds: lease_seconds,
            ..Default::default()
        }),
        status: Some(ManagedClusterStatus::default()),
        hub: Some(flotilla_api::v1::HubClusterState {
            agent_healthy: true,
            ..Default::default()
        }),
    }
}

/// Builds a new cluster from its first registration request: the request's key is bound to the
/// name (first key wins), its labels are taken but for the reserved ones (dropped and kept
/// aside in `hub.dropped_labels`: [`registration::registrant_labels`]), so it is in the
/// `default` set, and the auto-accept policy may accept it.
pub fn new_cluster(
    req: &RegistrationRequest,
    auto: &AutoAccept,
    default_lease_seconds: i32,
) -> ManagedCluster {
    let labels = registration::registrant_labels(&req.labels);
    let mut c = fresh(&req.cluster_name, labels.kept, default_lease_seconds);
    apply_report(
        &mut c,
        &req.capacity,
        &req.allocatable,
        &req.kubernetes_version,
        &req.claims,
    );
    record_agent_version(&mut c, &req.agent_version);
    let hub = c.hub.get_or_insert_with(Default::default);
    hub.agent_public_key = req.agent_public_key.clone();
    hub.agent_listens_under_prefix = req.listens_under_prefix;
    hub.origin = ClusterOrigin::Registration as i32;
    hub.dropped_labels = labels.dropped.into_iter().collect();
    // On the labels the cluster has: the reserved ones the registrant asked for admit nothing.
    let kept = c
        .metadata
        .as_ref()
        .map(|m| m.labels.clone())
        .unwrap_or_default();
    if auto.admits(&kept, &req.claims) {
        accept(
            &mut c,
            "AutoAccepted",
            "Accepted by the hub's auto-accept policy",
        );
    }
    reconcile_taints(&mut c);
    c
}

/// A cluster created from a ManagedCluster document before its agent registered: the
/// document's labels (plus the default set's), lease duration (0 = `default_lease_seconds`) and
/// taints; accepted when the document says `hubAcceptsClient`. No agent key yet: the first
/// registration under this name records its key.
pub fn precreated(
    name: &str,
    labels: HashMap<String, String>,
    spec: &ManagedClusterSpec,
    default_lease_seconds: i32,
) -> Result<ManagedCluster, RuleError> {
    if let Some(e) = names::validate_labels("metadata.labels", &labels)
        .into_iter()
        .next()
    {
        return Err(e.into());
    }
    let lease = if spec.lease_duration_seconds > 0 {
        spec.lease_duration_seconds
    } else {
        default_lease_seconds
    };
    let mut c = fresh(name, labels, lease);
    c.hub.get_or_insert_with(Default::default).origin = ClusterOrigin::Document as i32;
    apply_document_taints(&mut c, &spec.taints).map_err(|e| e.within("spec."))?;
    if spec.hub_accepts_client {
        accept(
            &mut c,
            "HubClusterAdminAccepted",
            "Accepted in a ManagedCluster document applied ahead of its agent",
        );
    }
    reconcile_taints(&mut c);
    Ok(c)
}

/// The admin's taints on `c` (not the hub's own) that `wanted` does not list, by key and
/// effect: what applying a document with `wanted` removes.
pub fn admin_taints_not_in(c: &ManagedCluster, wanted: &[Taint]) -> Vec<TaintKey> {
    c.spec
        .as_ref()
        .map(|s| s.taints.as_slice())
        .unwrap_or_default()
        .iter()
        .filter(|t| !is_hub_taint(&t.key))
        .filter(|t| {
            !wanted
                .iter()
                .any(|w| w.key == t.key && w.effect == t.effect)
        })
        .map(|t| TaintKey {
            key: t.key.clone(),
            effect: t.effect.clone(),
        })
        .collect()
}

/// Which agent keys the hub trusts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyPolicy {
    /// Plain mode: keys mean nothing on the wire; the latest registration's key is recorded.
    Record,
    /// Secure mode: credentials are issued for the agent key bound to the name, and a key is
    /// bound only by the first registration of a new name, a join credential for the name, or
    /// the admin's accept ([`registration`]).
    Pin,
}

/// Whether credentials may be issued to an agent presenting `key`: the cluster is accepted and
/// `key` is its agent key.
pub fn may_issue(c: &ManagedCluster, key: &str) -> bool {
    accepted(c) && !key.is_empty() && c.hub.as_ref().is_some_and(|h| h.agent_public_key == key)
}

/// Copies capacity, allocatable, version and claims; returns whether anything changed.
pub fn apply_report(
    c: &mut ManagedCluster,
    capacity: &HashMap<String, String>,
    allocatable: &HashMap<String, String>,
    kubernetes_version: &str,
    claims: &[ClusterClaim],
) -> bool {
    let st = c.status.get_or_insert_with(Default::default);
    let mut changed = false;
    if &st.capacity != capacity {
        st.capacity = capacity.clone();
        changed = true;
    }
    if &st.allocatable != allocatable {
        st.allocatable = allocatable.clone();
        changed = true;
    }
    let version = st
        .version
        .get_or_insert_with(ManagedClusterVersion::default);
    if version.kubernetes != kubernetes_version {
        version.kubernetes = kubernetes_version.to_string();
        changed = true;
    }
    let mut sorted = claims.to_vec();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    if st.cluster_claims != sorted {
        st.cluster_claims = sorted;
        changed = true;
    }
    changed
}

/// Sets `status.managedNamespaces` to what the cluster's sets ask for (`desired`, from
/// membership), keeping the conditions the agent reported for every entry that stays; new
/// entries have none until the agent reports (as OCM's hub controller writes them). Returns
/// whether the list of `(set, name)` changed, i.e. whether the agent must be told.
pub fn set_managed_namespaces(
    c: &mut ManagedCluster,
    mut desired: Vec<ClusterSetManagedNamespaceConfig>,
) -> bool {
    let st = c.status.get_or_insert_with(Default::default);
    sort_managed_namespaces(&mut desired);
    desired.dedup_by(|a, b| a.cluster_set == b.cluster_set && a.name == b.name);
    if managed_namespace_keys(&st.managed_namespaces) == managed_namespace_keys(&desired) {
        return false;
    }
    for entry in &mut desired {
        entry.conditions = st
            .managed_namespaces
            .iter()
            .find(|o| o.cluster_set == entry.cluster_set && o.name == entry.name)
            .map(|o| o.conditions.clone())
            .unwrap_or_default();
    }
    st.managed_namespaces = desired;
    true
}

/// Takes the agent's report of the namespaces it manages: remembers which `(set, name)` it
/// manages (hub state) and copies its conditions onto the status entries the hub still wants.
/// Entries the hub no longer wants are not brought back. Returns whether the agent manages
/// something else than the status lists (it missed an update and must be told again).
pub fn apply_namespace_report(
    c: &mut ManagedCluster,
    reported: &[ClusterSetManagedNamespaceConfig],
) -> bool {
    let mut seen: Vec<ClusterSetManagedNamespaceConfig> = reported
        .iter()
        .map(|n| ClusterSetManagedNamespaceConfig {
            name: n.name.clone(),
            cluster_set: n.cluster_set.clone(),
            conditions: Vec::new(),
        })
        .collect();
    sort_managed_namespaces(&mut seen);
    let st = c.status.get_or_insert_with(Default::default);
    for entry in &mut st.managed_namespaces {
        if let Some(r) = reported
            .iter()
            .find(|r| r.cluster_set == entry.cluster_set && r.name == entry.name)
        {
            entry.conditions = r.conditions.clone();
        }
    }
    let behind = managed_namespace_keys(&seen) != managed_namespace_keys(&st.managed_namespaces);
    c.hub
        .get_or_insert_with(Default::default)
        .agent_managed_namespaces = seen;
    behind
}

/// Whether the agent last reported managing something else than the status lists.
pub fn agent_namespaces_behind(c: &ManagedCluster) -> bool {
    let wanted = c
        .status
        .as_ref()
        .map(|s| s.managed_namespaces.as_slice())
        .unwrap_or_default();
    let reported = c
        .hub
        .as_ref()
        .map(|h| h.agent_managed_namespaces.as_slice())
        .unwrap_or_default();
    managed_namespace_keys(wanted) != managed_namespace_keys(reported)
}

/// The managed namespaces the agent is told about: `(set, name)` without conditions.
pub fn namespaces_for_agent(c: &ManagedCluster) -> Vec<ClusterSetManagedNamespaceConfig> {
    c.status
        .as_ref()
        .map(|s| {
            s.managed_namespaces
                .iter()
                .map(|n| ClusterSetManagedNamespaceConfig {
                    name: n.name.clone(),
                    cluster_set: n.cluster_set.clone(),
                    conditions: Vec::new(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `after` differs from `before` only in what the hub notes about the agent's reports
/// (the last sequence and status hash it took): a status report that changed nothing anyone
/// reads. Such a report is kept in memory and not written — an agent re-sends its status on
/// every reconnect, and a fleet coming back at once would otherwise rewrite every cluster
/// unchanged. The notes only keep a replayed report from being taken twice, and taking the
/// same report twice changes nothing.
pub fn only_report_notes_changed(before: &ManagedCluster, after: &ManagedCluster) -> bool {
    // Compared in place: a report arrives for every cluster of a fleet coming back, and a copy
    // of each cluster to compare would cost more than the comparison.
    let without_notes = |h: &flotilla_api::v1::HubClusterState| flotilla_api::v1::HubClusterState {
        last_sequence: Default::default(),
        last_status_hash: String::new(),
        ..h.clone()
    };
    // Every field named: a field added to ManagedCluster must be added here too.
    let ManagedCluster {
        metadata,
        spec,
        status,
        hub,
    } = before;
    *metadata == after.metadata
        && *spec == after.spec
        && *status == after.status
        && match (hub, &after.hub) {
            (Some(b), Some(a)) => without_notes(b) == without_notes(a),
            (b, a) => b == a,
        }
}

fn bump_generation(c: &mut ManagedCluster) {
    if let Some(m) = c.metadata.as_mut() {
        m.generation += 1;
    }
}

/// Accepts the cluster (hub side of the double opt-in). Returns whether anything changed.
pub fn accept(c: &mut ManagedCluster, reason: &str, message: &str) -> bool {
    let mut changed = false;
    let spec = c.spec.get_or_insert_with(Default::default);
    if !spec.hub_accepts_client {
        spec.hub_accepts_client = true;
        bump_generation(c);
        changed = true;
    }
    let st = c.status.get_or_insert_with(Default::default);
    changed |= meta::set_condition(
        &mut st.conditions,
        COND_HUB_ACCEPTED,
        status::TRUE,
        reason,
        message,
    );
    changed |= meta::remove_condition(&mut st.conditions, COND_HUB_DENIED);
    changed
}

/// Denies the cluster: it may no longer join, renew or report.
pub fn deny(c: &mut ManagedCluster) -> bool {
    let mut changed = false;
    let spec = c.spec.get_or_insert_with(Default::default);
    if spec.hub_accepts_client {
        spec.hub_accepts_client = false;
        bump_generation(c);
        changed = true;
    }
    let st = c.status.get_or_insert_with(Default::default);
    changed |= meta::set_condition(
        &mut st.conditions,
        COND_HUB_ACCEPTED,
        status::FALSE,
        "HubClusterAdminDenied",
        "Denied by the hub cluster admin",
    );
    changed |= meta::set_condition(
        &mut st.conditions,
        COND_HUB_DENIED,
        status::TRUE,
        "HubClusterAdminDenied",
        "Denied by the hub cluster admin",
    );
    changed |= meta::remove_condition(&mut st.conditions, COND_JOINED);
    changed |= set_available(
        c,
        status::UNKNOWN,
        "HubClusterAdminDenied",
        "The cluster was denied; its agent no longer reports",
    );
    changed
}

/// Whether the agent has renewed its lease since the cluster was accepted (`Joined`).
pub fn joined(c: &ManagedCluster) -> bool {
    c.status
        .as_ref()
        .and_then(|s| meta::condition_status(&s.conditions, COND_JOINED))
        == Some(status::TRUE)
}

/// Marks the agent joined (first renewal after acceptance).
pub fn join(c: &mut ManagedCluster) -> bool {
    let st = c.status.get_or_insert_with(Default::default);
    meta::set_condition(
        &mut st.conditions,
        COND_JOINED,
        status::TRUE,
        "ManagedClusterJoined",
        "Managed cluster joined",
    )
}

/// Sets ManagedClusterConditionAvailable and the taints that follow from it.
pub fn set_available(c: &mut ManagedCluster, value: &str, reason: &str, message: &str) -> bool {
    let st = c.status.get_or_insert_with(Default::default);
    let mut changed =
        meta::set_condition(&mut st.conditions, COND_AVAILABLE, value, reason, message);
    changed |= reconcile_taints(c);
    changed
}

/// Maintains the hub's built-in taints: `unavailable` while Available=False, `unreachable` while
/// Available is Unknown or missing, neither while Available=True.
pub fn reconcile_taints(c: &mut ManagedCluster) -> bool {
    let avail = available(c).map(str::to_string);
    let (want_unavailable, want_unreachable) = match avail.as_deref() {
        Some(status::TRUE) => (false, false),
        Some(status::FALSE) => (true, false),
        _ => (false, true),
    };
    let spec = c.spec.get_or_insert_with(Default::default);
    let mut changed = false;
    for (key, want) in [
        (TAINT_UNAVAILABLE, want_unavailable),
        (TAINT_UNREACHABLE, want_unreachable),
    ] {
        let has = spec.taints.iter().any(|t| t.key == key);
        if want && !has {
            spec.taints.push(Taint {
                key: key.to_string(),
                value: String::new(),
                effect: "NoSelect".into(),
                time_added: Some(meta::now()),
            });
            changed = true;
        } else if !want && has {
            spec.taints.retain(|t| t.key != key);
            changed = true;
        }
    }
    changed
}

/// Sets and removes labels (validated). Returns whether anything changed.
pub fn apply_labels(
    c: &mut ManagedCluster,
    set: &HashMap<String, String>,
    remove: &[String],
) -> Result<bool, RuleError> {
    if let Some(e) = names::validate_labels("labels", set).into_iter().next() {
        return Err(e.into());
    }
    for k in remove {
        if set.contains_key(k) {
            return Err(RuleError::SetAndRemoved(k.clone()));
        }
    }
    let m = c.metadata.get_or_insert_with(Default::default);
    let mut changed = false;
    for (k, v) in set {
        if m.labels.get(k) != Some(v) {
            m.labels.insert(k.clone(), v.clone());
            changed = true;
        }
    }
    for k in remove {
        changed |= m.labels.remove(k).is_some();
    }
    Ok(changed)
}

/// Checks one taint's key, value and effect; errors start with `field` (`taints[2]`).
fn validate_taint(field: &str, t: &Taint) -> Result<(), RuleError> {
    names::validate_label_key(&format!("{field}.key"), &t.key)?;
    if !t.value.is_empty() {
        names::validate_label_value(&format!("{field}.value"), &t.value)?;
    }
    if !TAINT_EFFECTS.contains(&t.effect.as_str()) {
        return Err(RuleError::NotAnEffect {
            field: field.into(),
            effect: t.effect.clone(),
        });
    }
    Ok(())
}

/// Applies a ManagedCluster document's `taints` to `c`: its admin taints are added (or their
/// values changed) and the admin taints it no longer lists removed. The hub's own taints it
/// lists are left out ([`split_hub_taints`]: the hub sets and clears them from the lease, as
/// OCM's hub does), and the hub's current ones stay. Errors name the document's field
/// (`taints[2].effect`). Returns whether anything changed.
pub fn apply_document_taints(c: &mut ManagedCluster, taints: &[Taint]) -> Result<bool, RuleError> {
    for (i, t) in taints.iter().enumerate() {
        validate_taint(&format!("taints[{i}]"), t)?;
    }
    let (admin, _) = split_hub_taints(taints);
    let stale = admin_taints_not_in(c, &admin);
    apply_taints(c, &admin, &stale)
}

/// Adds (or changes the value of) and removes taints. `timeAdded` is always the hub's clock;
/// the hub's own taints cannot be edited (an explicit edit of a field only the hub owns is
/// refused, unlike a document that lists them: [`apply_document_taints`]). Returns whether
/// anything changed.
pub fn apply_taints(
    c: &mut ManagedCluster,
    add: &[Taint],
    remove: &[TaintKey],
) -> Result<bool, RuleError> {
    for (i, t) in add.iter().enumerate() {
        validate_taint(&format!("taints[{i}]"), t)?;
        if is_hub_taint(&t.key) {
            return Err(RuleError::HubTaint {
                field: format!("taints[{i}]"),
                key: t.key.clone(),
            });
        }
    }
    for (i, r) in remove.iter().enumerate() {
        if is_hub_taint(&r.key) {
            return Err(RuleError::HubTaint {
                field: format!("remove[{i}]"),
                key: r.key.clone(),
            });
        }
        if !r.effect.is_empty() && !TAINT_EFFECTS.contains(&r.effect.as_str()) {
            return Err(RuleError::NotAnEffectToRemove {
                index: i,
                effect: r.effect.clone(),
            });
        }
    }
    let spec = c.spec.get_or_insert_with(Default::default);
    let mut changed = false;
    for t in add {
        match spec
            .taints
            .iter_mut()
            .find(|x| x.key == t.key && x.effect == t.effect)
        {
            Some(existing) if existing.value == t.value => {}
            Some(existing) => {
                existing.value = t.value.clone();
                existing.time_added = Some(meta::now());
                changed = true;
            }
            None => {
                spec.taints.push(Taint {
                    key: t.key.clone(),
                    value: t.value.clone(),
                    effect: t.effect.clone(),
                    time_added: Some(meta::now()),
                });
                changed = true;
            }
        }
    }
    for r in remove {
        let before = spec.taints.len();
        spec.taints
            .retain(|t| !(t.key == r.key && (r.effect.is_empty() || t.effect == r.effect)));
        changed |= spec.taints.len() != before;
    }
    if changed {
        bump_generation(c);
    }
    Ok(changed)
}

#[cfg(test)]
mod tests;
