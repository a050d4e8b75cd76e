//! Governance on the hub (OCM `policy.open-cluster-management.io`): Policies follow their
//! PlacementBindings' decisions (Placements, or legacy PlacementRules served over the same
//! cluster inventory), every decided cluster gets a replicated copy through the CloudEvents
//! transport, and the agents' reports make the root status.
//!
//! - [`rules`]: pure — bindings of a policy (directly or through a PolicySet), PlacementRule
//!   decisions, the replicated policy, root and PolicySet status, checks of spoke reports.
//! - [`actor`]: one task per Policy — the only writer of the policy and its per-cluster records:
//!   applies, reconciles on decision / binding / set / rule / cluster changes, delivers specs
//!   (re-sent until the cluster reports their generation), takes reports, writes the status.
//! - [`route`]: the router's hand-off of policy status reports (checked, then `try_send`).
//! - [`metrics`]: `policy_governance_info` as OCM exports it.
//! - [`hubdata`]: the hub's ConfigMaps and Secrets (sealed at rest) that hub templates read.
//! - [`kept`]: bindings, sets and rules kept as applied — one apply and one delete for all
//!   three (bucket, then the in-memory map).
//! - [`templates`]: hub templates (`{{hub … hub}}`) resolved for one cluster, and the hash of
//!   the copy that stays the same while its inputs do (protected values by their digest).
//!
//! [`Policies`] is the handle. KV buckets: `policies`, `placementbindings`, `policysets`,
//! `placementrules`, `hubconfigmaps`, `hubsecrets` (`<namespace>.<name>`), `policystatus` (`<cluster>.<resourceid>`: what each
//! cluster got and last reported). Bindings, sets and rules are few: kept in memory, written
//! through. A PolicySet's status and a PlacementRule's decisions are derived on read.

pub mod actor;
pub mod family;
pub mod grpc;
pub mod hubdata;
mod kept;
pub mod metrics;
pub mod route;
pub mod rules;
pub mod templates;

use crate::inventory::{ClusterInventory, Inventory};
use crate::keys::ObjectRef;
use crate::placement::Placements;
use crate::store::StoreError;
use dashmap::DashMap;
use flotilla_api::v1::{
    ObjectMeta, PlacementBinding, PlacementRule, PlacementRuleDecision, PlacementRuleStatus,
    Policy, PolicyClusterRecord, PolicySet,
};
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use thiserror::Error;
use tokio::sync::{broadcast, mpsc, oneshot};

/// KV bucket of policies.
pub const POLICIES: &str = "policies";
/// KV bucket of PlacementBindings.
pub const BINDINGS: &str = "placementbindings";
/// KV bucket of PolicySets.
pub const SETS: &str = "policysets";
/// KV bucket of PlacementRules.
pub const RULES: &str = "placementrules";
/// KV bucket of per-cluster records (`<cluster>.<resourceid>`).
pub const STATUS: &str = "policystatus";

/// Every policy, keyed `<namespace>/<name>`, with its status.
pub type PolicyInventory = Inventory<Policy>;

/// Why a governance call failed.
#[derive(Debug, Error)]
pub enum PolicyError {
    /// Invalid input (every problem, each naming its field).
    #[error("{}", .0.join("; "))]
    Invalid(Vec<String>),
    /// No such object.
    #[error("{0} not found")]
    NotFound(String),
    /// The update carried a stale resourceVersion.
    #[error("{0}")]
    Conflict(String),
    /// Storage failed.
    #[error("storage unavailable: {0}")]
    Unavailable(#[source] StoreError),
    /// The policy's task ended (hub shutting down).
    #[error("policy {0} is not being served")]
    Gone(String),
}

impl From<StoreError> for PolicyError {
    fn from(e: StoreError) -> Self {
        Self::Unavailable(e)
    }
}

flotilla_hub_core::buckets! {
    /// The buckets of governance state.
    pub struct Buckets {
        /// Policies (spec and root status).
        policies: Policy = POLICIES,
        /// PlacementBindings.
        bindings: PlacementBinding = BINDINGS,
        /// PolicySets.
        sets: PolicySet = SETS,
        /// PlacementRules.
        rules: PlacementRule = RULES,
        /// Per-cluster records.
        status: PolicyClusterRecord = STATUS,
        /// Hub ConfigMaps (hub templates' inputs).
        config_maps: flotilla_api::v1::HubConfigMap = hubdata::CONFIG_MAPS,
        /// Hub Secrets, sealed.
        secrets: flotilla_api::v1::HubSecretRecord = hubdata::SECRETS,
    }
}

/// What governance works with.
#[derive(Clone)]
pub struct Deps {
    /// Placements and their decisions.
    pub placements: Placements,
    /// Every cluster (PlacementRules are scheduled over it).
    pub clusters: ClusterInventory,
    /// Cluster sets and bindings: a PlacementRule decides only clusters of the sets bound in
    /// its namespace.
    pub sets: crate::clusterset::ClusterSets,
    /// Sends spec events (`flotilla.spec.<cluster>`).
    pub publisher: flotilla_bus::publish::Publisher,
    /// The hub's metrics.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// The control plane's sealing key: hub Secrets rest sealed by it, and hub templates'
    /// protected values are sealed by it to the cluster's agent.
    pub sealing: flotilla_hub_core::key::SealingKey,
}

pub(crate) struct Inner {
    buckets: Buckets,
    views: PolicyInventory,
    bindings: RwLock<BTreeMap<String, PlacementBinding>>,
    sets: RwLock<BTreeMap<String, PolicySet>>,
    rules: RwLock<BTreeMap<String, PlacementRule>>,
    actors: DashMap<String, mpsc::Sender<actor::Msg>>,
    /// The actors' tasks, awaited by [`Policies::stop`].
    tasks: crate::tasks::TaskGroup,
    /// A binding, set or rule changed: every policy looks again.
    governance: broadcast::Sender<()>,
    deps: Deps,
    metrics: metrics::GovernanceMetrics,
    /// Hub ConfigMaps and Secrets.
    hubdata: hubdata::HubData,
}

/// Governance (cheap to clone).
#[derive(Clone)]
pub struct Policies {
    inner: Arc<Inner>,
}

fn key_of(m: Option<&ObjectMeta>) -> ObjectRef {
    let m = m.cloned().unwrap_or_default();
    ObjectRef::new(&m.namespace, &m.name)
}

/// Checks an API object by converting it to the OCM shape and back: the same rules as
/// `flotilla apply -f`, every problem named by its field.
fn check<O, T>(object: &T) -> Result<(), PolicyError>
where
    O: for<'a> From<&'a T>,
    O: Checked<T>,
{
    O::from(object)
        .checked()
        .map(|_| ())
        .map_err(|errors| PolicyError::Invalid(errors.into_iter().map(|e| e.to_string()).collect()))
}

/// An OCM shape that converts back to protobuf with every problem named.
trait Checked<T> {
    fn checked(&self) -> Result<T, Vec<flotilla_api::policy::FieldError>>;
}

macro_rules! checked {
    ($shape:ty, $proto:ty) => {
        impl Checked<$proto> for $shape {
            fn checked(&self) -> Result<$proto, Vec<flotilla_api::policy::FieldError>> {
                self.to_proto()
            }
        }
    };
}
checked!(flotilla_api::ocm::policy::Policy, Policy);
checked!(
    flotilla_api::ocm::policy::PlacementBinding,
    PlacementBinding
);
checked!(flotilla_api::ocm::policy::PolicySet, PolicySet);
checked!(flotilla_api::ocm::policy::PlacementRule, PlacementRule);

fn require_namespace(m: Option<&ObjectMeta>, kind: &str) -> Result<(), PolicyError> {
    match m {
        Some(m) if !m.namespace.is_empty() && !m.name.is_empty() => Ok(()),
        _ => Err(PolicyError::Invalid(vec![format!(
            "metadata: a {kind} needs a namespace and a name"
        )])),
    }
}

impl std::fmt::Debug for Policies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policies")
            .field("policies", &self.inner.views.len())
            .finish_non_exhaustive()
    }
}

impl Policies {
    /// Stops every policy actor (this hub gave the controllers up): their mailboxes are
    /// closed, and each is awaited (bounded) as it ends — none goes on sending specs from a hub
    /// that no longer holds the controllers.
    pub async fn stop(&self) {
        self.inner.actors.clear();
        self.inner
            .tasks
            .join(std::time::Duration::from_secs(5))
            .await;
    }

    /// Loads every stored object and starts one actor per policy.
    pub async fn start(buckets: Buckets, deps: Deps) -> Result<Self, PolicyError> {
        let (governance, _) = broadcast::channel(256);
        let metrics = metrics::GovernanceMetrics::new(&deps.metrics);
        let hubdata = hubdata::HubData::load(
            buckets.config_maps.clone(),
            buckets.secrets.clone(),
            deps.sealing.clone(),
        )
        .await?;
        let this = Self {
            inner: Arc::new(Inner {
                buckets,
                views: PolicyInventory::new(1024),
                bindings: RwLock::default(),
                sets: RwLock::default(),
                rules: RwLock::default(),
                actors: DashMap::new(),
                tasks: crate::tasks::TaskGroup::default(),
                governance,
                deps,
                metrics,
                hubdata,
            }),
        };
        let b = &this.inner.buckets;
        for (_, x, _) in b.bindings.load_all().await? {
            let k = key_of(x.metadata.as_ref()).inventory_key();
            this.inner.bindings.write().expect("lock").insert(k, x);
        }
        for (_, x, _) in b.sets.load_all().await? {
            let k = key_of(x.metadata.as_ref()).inventory_key();
            this.inner.sets.write().expect("lock").insert(k, x);
        }
        for (_, x, _) in b.rules.load_all().await? {
            let k = key_of(x.metadata.as_ref()).inventory_key();
            this.inner.rules.write().expect("lock").insert(k, x);
        }
        let mut records: BTreeMap<String, Vec<(PolicyClusterRecord, u64)>> = BTreeMap::new();
        for (_, r, rev) in b.status.load_all().await? {
            let k = ObjectRef::new(&r.policy_namespace, &r.policy_name).inventory_key();
            records.entry(k).or_default().push((r, rev));
        }
        for (_, p, rev) in b.policies.load_all().await? {
            let k = key_of(p.metadata.as_ref()).inventory_key();
            let mine = records.remove(&k).unwrap_or_default();
            this.spawn(Some((p, rev)), mine, &k);
        }
        // Records of policies that are gone (a crash mid-delete): their clusters are told. A
        // policy whose record does not decode is unreadable, not gone: its copies stay.
        for (k, orphans) in records {
            if let Some((r, _)) = orphans.first()
                && crate::store::quarantine::holds(
                    b.policies.name(),
                    &ObjectRef::new(&r.policy_namespace, &r.policy_name).store_key(),
                )
            {
                continue;
            }
            tracing::warn!(policy = %k, clusters = orphans.len(), "records of a deleted policy; removing its copies");
            for (r, _) in orphans {
                actor::send_delete(&this.inner, &r).await;
                let rid = flotilla_bus::policies::resource_id(
                    &r.cluster_name,
                    &flotilla_bus::policies::replicated_name(&r.policy_namespace, &r.policy_name),
                );
                let _ = b.status.purge(&format!("{}.{rid}", r.cluster_name)).await;
            }
        }
        Ok(this)
    }

    fn spawn(
        &self,
        stored: Option<(Policy, u64)>,
        records: Vec<(PolicyClusterRecord, u64)>,
        key: &str,
    ) -> mpsc::Sender<actor::Msg> {
        if let Some((p, _)) = &stored {
            self.inner.views.upsert(key, p.clone());
        }
        let tx = actor::spawn(self.inner.clone(), key, stored, records);
        self.inner.actors.insert(key.to_string(), tx.clone());
        tx
    }

    /// The hub's ConfigMaps and Secrets.
    pub fn hubdata(&self) -> &hubdata::HubData {
        &self.inner.hubdata
    }

    /// The published policies (for watches).
    pub fn views(&self) -> &PolicyInventory {
        &self.inner.views
    }

    /// Creates or updates a policy; answered once it is stored.
    pub async fn apply_policy(&self, policy: Policy) -> Result<Policy, PolicyError> {
        require_namespace(policy.metadata.as_ref(), "Policy")?;
        check::<flotilla_api::ocm::policy::Policy, _>(&policy)?;
        let key = key_of(policy.metadata.as_ref()).inventory_key();
        let tx = match self.inner.actors.get(&key) {
            Some(tx) => tx.clone(),
            None => self.spawn(None, Vec::new(), &key),
        };
        let (reply, rx) = oneshot::channel();
        if tx
            .send(actor::Msg::Apply(Box::new(policy), reply))
            .await
            .is_err()
        {
            return Err(PolicyError::Gone(key));
        }
        rx.await.map_err(|_| PolicyError::Gone(key))?
    }

    /// One policy with its status.
    pub fn get_policy(&self, namespace: &str, name: &str) -> Option<Arc<Policy>> {
        self.inner
            .views
            .get(&ObjectRef::new(namespace, name).inventory_key())
    }

    /// Policies of a namespace (every namespace when empty).
    pub fn list_policies(&self, namespace: &str) -> Vec<Arc<Policy>> {
        if namespace.is_empty() {
            let mut all = self.inner.views.snapshot();
            all.sort_by_key(|p| key_of(p.metadata.as_ref()).inventory_key());
            all
        } else {
            self.inner
                .views
                .with_prefix(&ObjectRef::prefix(namespace))
                .into_iter()
                .map(|(_, v)| v)
                .collect()
        }
    }

    /// What each decided cluster last reported.
    pub async fn details(
        &self,
        namespace: &str,
        name: &str,
        page: actor::DetailsPage,
    ) -> Result<actor::Reports, PolicyError> {
        let key = ObjectRef::new(namespace, name).inventory_key();
        let tx = self
            .inner
            .actors
            .get(&key)
            .map(|t| t.clone())
            .ok_or_else(|| PolicyError::NotFound(format!("Policy {key}")))?;
        let (reply, rx) = oneshot::channel();
        tx.send(actor::Msg::Details(page, reply))
            .await
            .map_err(|_| PolicyError::Gone(key.clone()))?;
        rx.await.map_err(|_| PolicyError::Gone(key))
    }

    /// One cluster's copy of a policy as the hub resolves it now, sent nowhere; `NotFound`
    /// for a policy or cluster that does not exist.
    pub async fn render(
        &self,
        namespace: &str,
        name: &str,
        cluster: &str,
    ) -> Result<flotilla_api::v1::RenderedPolicy, PolicyError> {
        let key = ObjectRef::new(namespace, name).inventory_key();
        let tx = self
            .inner
            .actors
            .get(&key)
            .map(|t| t.clone())
            .ok_or_else(|| PolicyError::NotFound(format!("Policy {key}")))?;
        let (reply, rx) = oneshot::channel();
        tx.send(actor::Msg::Render(cluster.to_string(), reply))
            .await
            .map_err(|_| PolicyError::Gone(key.clone()))?;
        rx.await.map_err(|_| PolicyError::Gone(key))?
    }

    /// Deletes a policy: every cluster removes its copy, then the policy goes.
    pub async fn delete_policy(&self, namespace: &str, name: &str) -> Result<(), PolicyError> {
        let key = ObjectRef::new(namespace, name);
        let Some((_, tx)) = self.inner.actors.remove(&key.inventory_key()) else {
            return Err(PolicyError::NotFound(format!(
                "Policy {}",
                key.inventory_key()
            )));
        };
        let (done, rx) = oneshot::channel();
        let _ = tx.send(actor::Msg::Delete(done)).await;
        let _ = rx.await;
        self.inner.buckets.policies.purge(&key.store_key()).await?;
        self.inner.views.remove(&key.inventory_key());
        Ok(())
    }

    /// Hands a checked report to its policy's actor without waiting (the router must never
    /// block); `Err` gives it back when there is no such policy or its mailbox is full.
    pub fn try_report(&self, key: &str, report: actor::ReportIn) -> Result<(), TryReport> {
        match self.inner.actors.get(key) {
            None => Err(TryReport::Unknown(Box::new(report))),
            Some(tx) => tx
                .try_send(actor::Msg::Report(Box::new(report)))
                .map_err(|e| match e.into_inner() {
                    actor::Msg::Report(r) => TryReport::Full(r),
                    _ => unreachable!("only reports are try_sent"),
                }),
        }
    }

    /// Tells `cluster` to remove a copy of a policy the hub does not have (a report for it
    /// arrived: deleted while the cluster was away).
    pub async fn remove_stray(&self, cluster: &str, policy_name: &str) {
        let (ns, name) = policy_name.split_once('.').unwrap_or(("", policy_name));
        actor::send_delete(
            &self.inner,
            &PolicyClusterRecord {
                cluster_name: cluster.to_string(),
                policy_namespace: ns.to_string(),
                policy_name: name.to_string(),
                ..Default::default()
            },
        )
        .await;
    }

    fn changed(&self) {
        let _ = self.inner.governance.send(());
    }

    /// Creates or updates a PlacementBinding.
    pub async fn apply_binding(
        &self,
        b: PlacementBinding,
    ) -> Result<PlacementBinding, PolicyError> {
        require_namespace(b.metadata.as_ref(), "PlacementBinding")?;
        check::<flotilla_api::ocm::policy::PlacementBinding, _>(&b)?;
        let b = kept::apply(&self.inner.buckets.bindings, &self.inner.bindings, b).await?;
        self.changed();
        Ok(b)
    }

    /// PlacementBindings of a namespace (every namespace when empty).
    pub fn list_bindings(&self, namespace: &str) -> Vec<PlacementBinding> {
        in_namespace(&self.inner.bindings.read().expect("lock"), namespace)
    }

    /// Deletes a PlacementBinding.
    pub async fn delete_binding(&self, namespace: &str, name: &str) -> Result<(), PolicyError> {
        kept::delete(
            &self.inner.buckets.bindings,
            &self.inner.bindings,
            namespace,
            name,
        )
        .await?;
        self.changed();
        Ok(())
    }

    /// Creates or updates a PolicySet.
    pub async fn apply_set(&self, s: PolicySet) -> Result<PolicySet, PolicyError> {
        require_namespace(s.metadata.as_ref(), "PolicySet")?;
        check::<flotilla_api::ocm::policy::PolicySet, _>(&s)?;
        let s = kept::apply(&self.inner.buckets.sets, &self.inner.sets, s).await?;
        self.changed();
        Ok(self.with_set_status(s))
    }

    fn with_set_status(&self, mut s: PolicySet) -> PolicySet {
        let ns = s
            .metadata
            .as_ref()
            .map(|m| m.namespace.clone())
            .unwrap_or_default();
        let policies: BTreeMap<String, Policy> = self
            .list_policies(&ns)
            .into_iter()
            .map(|p| {
                let n = p
                    .metadata
                    .as_ref()
                    .map(|m| m.name.clone())
                    .unwrap_or_default();
                (n, (*p).clone())
            })
            .collect();
        s.status = Some(rules::policy_set_status(&s, &policies));
        s
    }

    /// PolicySets of a namespace (every namespace when empty), with their status.
    pub fn list_sets(&self, namespace: &str) -> Vec<PolicySet> {
        in_namespace(&self.inner.sets.read().expect("lock"), namespace)
            .into_iter()
            .map(|s| self.with_set_status(s))
            .collect()
    }

    /// Deletes a PolicySet.
    pub async fn delete_set(&self, namespace: &str, name: &str) -> Result<(), PolicyError> {
        kept::delete(&self.inner.buckets.sets, &self.inner.sets, namespace, name).await?;
        self.changed();
        Ok(())
    }

    /// Creates or updates a PlacementRule.
    pub async fn apply_rule(&self, r: PlacementRule) -> Result<PlacementRule, PolicyError> {
        require_namespace(r.metadata.as_ref(), "PlacementRule")?;
        check::<flotilla_api::ocm::policy::PlacementRule, _>(&r)?;
        let r = kept::apply(&self.inner.buckets.rules, &self.inner.rules, r).await?;
        self.changed();
        Ok(self.with_rule_status(r))
    }

    fn with_rule_status(&self, mut r: PlacementRule) -> PlacementRule {
        let clusters = self.inner.deps.clusters.snapshot();
        let namespace = r.metadata.as_ref().map_or("", |m| m.namespace.as_str());
        let bound = self.inner.deps.sets.bound_in(namespace);
        r.status = Some(PlacementRuleStatus {
            decisions: rules::rule_clusters(&r, &clusters, &bound)
                .into_iter()
                .map(|c| PlacementRuleDecision {
                    cluster_namespace: c.clone(),
                    cluster_name: c,
                })
                .collect(),
        });
        r
    }

    /// PlacementRules of a namespace (every namespace when empty), with their decisions.
    pub fn list_rules(&self, namespace: &str) -> Vec<PlacementRule> {
        in_namespace(&self.inner.rules.read().expect("lock"), namespace)
            .into_iter()
            .map(|r| self.with_rule_status(r))
            .collect()
    }

    /// Deletes a PlacementRule.
    pub async fn delete_rule(&self, namespace: &str, name: &str) -> Result<(), PolicyError> {
        kept::delete(
            &self.inner.buckets.rules,
            &self.inner.rules,
            namespace,
            name,
        )
        .await?;
        self.changed();
        Ok(())
    }
}

/// Why a report was not handed over.
pub enum TryReport {
    /// No such policy here (deleted): the report comes back to be answered.
    Unknown(Box<actor::ReportIn>),
    /// The policy's mailbox is full: the report comes back, to be delivered again.
    Full(Box<actor::ReportIn>),
}

/// Stamps identity on an applied object, refusing a stale resourceVersion.
fn stamp(
    m: &mut ObjectMeta,
    stored: Option<&ObjectMeta>,
    spec_changed: bool,
) -> Result<(), PolicyError> {
    match stored {
        Some(s) => {
            if m.resource_version != 0 && m.resource_version != s.resource_version {
                return Err(PolicyError::Conflict(format!(
                    "{}/{}: resourceVersion {} is stale (stored: {})",
                    m.namespace, m.name, m.resource_version, s.resource_version
                )));
            }
            crate::identity::keep(m, s, spec_changed);
        }
        None => crate::identity::create(m),
    }
    m.resource_version = 0;
    Ok(())
}

fn in_namespace<T: Clone>(map: &BTreeMap<String, T>, namespace: &str) -> Vec<T> {
    if namespace.is_empty() {
        map.values().cloned().collect()
    } else {
        let prefix = ObjectRef::prefix(namespace);
        map.iter()
            .filter(|(k, _)| k.starts_with(&prefix))
            .map(|(_, v)| v.clone())
            .collect()
    }
}
