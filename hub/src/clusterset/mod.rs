//! ManagedClusterSets and ManagedClusterSetBindings: stored in KV, held in memory (they are few),
//! membership and status derived from the inventory on read; [`namespaces`] keeps every
//! cluster's `status.managedNamespaces` in step with the sets it belongs to.

pub mod family;
pub mod grpc;
pub mod namespaces;

use crate::inventory::ClusterInventory;
use crate::keys::ObjectRef;
use crate::store::{Bucket, StoreError};
use flotilla_api::meta::{
    self, CLUSTERSET_LABEL, COND_BOUND, COND_CLUSTERSET_EMPTY, DEFAULT_CLUSTERSET,
    GLOBAL_CLUSTERSET, status,
};
use flotilla_api::v1::{
    LabelSelector, ManagedCluster, ManagedClusterSet, ManagedClusterSetBinding,
    ManagedClusterSetBindingStatus, ManagedClusterSetStatus, ManagedClusterSetView, ObjectMeta,
};
use flotilla_api::{names, selector};
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use thiserror::Error;
use tokio::sync::broadcast;

pub use flotilla_api::clusterset::{EXCLUSIVE, LABEL_SELECTOR};

/// Why a set or binding operation failed.
#[derive(Debug, Error)]
pub enum SetError {
    /// Invalid input; names the field.
    #[error("{0}")]
    Invalid(String),
    /// No such object.
    #[error("{0} not found")]
    NotFound(String),
    /// Stale resourceVersion.
    #[error("{0}")]
    Conflict(String),
    /// Not allowed.
    #[error("{0}")]
    Precondition(String),
    /// Storage failed; nothing changed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a write's grant decision assumed about the stored object, held again under the write
/// lock (review r1 §13: check-then-write races).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Expect {
    /// Nothing: the grant allows the write whatever is stored (a fleet admin's).
    #[default]
    Nothing,
    /// The object is stored (a set: with the clusterSelector the write carries): the grant
    /// decided it as an update.
    Stored,
}

/// A set or binding changed (placements listen to this later).
#[derive(Debug, Clone)]
pub enum SetChange {
    /// A set was created, changed or deleted.
    Set(String),
    /// A binding in a namespace was created, changed or deleted.
    Binding {
        /// Namespace.
        namespace: String,
        /// Set name.
        set: String,
    },
}

struct State {
    sets: BTreeMap<String, (ManagedClusterSet, u64)>,
    bindings: BTreeMap<(String, String), (ManagedClusterSetBinding, u64)>,
}

/// Sets and bindings.
#[derive(Clone)]
pub struct ClusterSets {
    state: Arc<RwLock<State>>,
    sets: Bucket<ManagedClusterSet>,
    bindings: Bucket<ManagedClusterSetBinding>,
    inventory: ClusterInventory,
    changes: broadcast::Sender<SetChange>,
    /// Serialises writers so that the KV revision and the in-memory copy stay in step.
    write_lock: Arc<tokio::sync::Mutex<()>>,
    /// Keys whose last write had an unknown outcome, read again by [`ClusterSets::settle`].
    unsettled: Arc<std::sync::Mutex<crate::settle::Unsettled<StoredKey>>>,
}

fn name_of(meta: &Option<ObjectMeta>) -> &str {
    meta.as_ref().map(|m| m.name.as_str()).unwrap_or_default()
}

/// A key of the sets or bindings bucket.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum StoredKey {
    /// A set, by name.
    Set(String),
    /// A binding, by namespace and set.
    Binding(String, String),
}

impl ClusterSets {
    /// Loads sets and bindings and makes sure the built-in sets exist.
    pub async fn load(
        sets: Bucket<ManagedClusterSet>,
        bindings: Bucket<ManagedClusterSetBinding>,
        inventory: ClusterInventory,
    ) -> Result<Self, StoreError> {
        let mut state = State {
            sets: BTreeMap::new(),
            bindings: BTreeMap::new(),
        };
        for (_, mut s, rev) in sets.load_all().await? {
            if let Some(m) = s.metadata.as_mut() {
                m.resource_version = rev;
            }
            state
                .sets
                .insert(name_of(&s.metadata).to_string(), (s, rev));
        }
        for (_, mut b, rev) in bindings.load_all().await? {
            if let Some(m) = b.metadata.as_mut() {
                m.resource_version = rev;
            }
            let m = b.metadata.clone().unwrap_or_default();
            state.bindings.insert((m.namespace, m.name), (b, rev));
        }
        let (changes, _) = broadcast::channel(1024);
        let this = Self {
            state: Arc::new(RwLock::new(state)),
            sets,
            bindings,
            inventory,
            changes,
            write_lock: Arc::new(tokio::sync::Mutex::new(())),
            unsettled: Arc::default(),
        };
        this.ensure_builtin().await?;
        Ok(this)
    }

    fn builtin(name: &str) -> ManagedClusterSet {
        ManagedClusterSet {
            metadata: Some(ObjectMeta {
                name: name.into(),
                uid: uuid::Uuid::new_v4().to_string(),
                generation: 1,
                creation_timestamp: Some(meta::now()),
                ..Default::default()
            }),
            spec: Some(flotilla_api::clusterset::builtin_spec(name)),
            status: None,
        }
    }

    async fn ensure_builtin(&self) -> Result<(), StoreError> {
        for name in [DEFAULT_CLUSTERSET, GLOBAL_CLUSTERSET] {
            let exists = self
                .state
                .read()
                .expect("sets lock")
                .sets
                .contains_key(name);
            if !exists {
                let s = Self::builtin(name);
                let rev = match self.sets.write(name, &s, 0).await {
                    Ok(rev) => rev,
                    // Another hub created it first: take theirs.
                    Err(e) if e.is_conflict() => match self.sets.get(name).await? {
                        Some((stored, rev)) => {
                            self.state
                                .write()
                                .expect("sets lock")
                                .sets
                                .insert(name.into(), (stored, rev));
                            continue;
                        }
                        None => return Err(e),
                    },
                    Err(e) => return Err(e),
                };
                let mut s = s;
                if let Some(m) = s.metadata.as_mut() {
                    m.resource_version = rev;
                }
                self.state
                    .write()
                    .expect("sets lock")
                    .sets
                    .insert(name.into(), (s, rev));
            }
        }
        Ok(())
    }

    /// Subscribes to set and binding changes.
    pub fn subscribe(&self) -> broadcast::Receiver<SetChange> {
        self.changes.subscribe()
    }

    /// Validates a set, naming the field of the first problem.
    pub fn validate_set(s: &ManagedClusterSet) -> Result<(), SetError> {
        let m = s.metadata.clone().unwrap_or_default();
        // Set names are also values of the clusterset label.
        names::validate_dns1123_label("metadata.name", &m.name)
            .map_err(|e| SetError::Invalid(e.to_string()))?;
        if !m.namespace.is_empty() {
            return Err(SetError::Invalid(
                "metadata.namespace: ManagedClusterSet is cluster-scoped; remove the namespace"
                    .into(),
            ));
        }
        let sel = s
            .spec
            .as_ref()
            .and_then(|s| s.cluster_selector.clone())
            .unwrap_or_default();
        match sel.selector_type.as_str() {
            "" | EXCLUSIVE => {
                if sel
                    .label_selector
                    .is_some_and(|l| l != LabelSelector::default())
                {
                    return Err(SetError::Invalid(
                        "spec.clusterSelector.labelSelector: only allowed with selectorType LabelSelector".into(),
                    ));
                }
            }
            LABEL_SELECTOR => {
                let Some(ls) = &sel.label_selector else {
                    return Err(SetError::Invalid(
                        "spec.clusterSelector.labelSelector: required with selectorType LabelSelector".into(),
                    ));
                };
                if let Some(e) = selector::validate("spec.clusterSelector.labelSelector", ls)
                    .into_iter()
                    .next()
                {
                    return Err(SetError::Invalid(e.to_string()));
                }
            }
            other => {
                return Err(SetError::Invalid(format!(
                    "spec.clusterSelector.selectorType: {other:?} is not supported (want ExclusiveClusterSetLabel or LabelSelector)"
                )));
            }
        }
        let namespaces = s
            .spec
            .as_ref()
            .map(|s| s.managed_namespaces.as_slice())
            .unwrap_or_default();
        let errors = flotilla_api::clusterset::validate_managed_namespaces(namespaces);
        if !errors.is_empty() {
            let all: Vec<String> = errors.iter().map(ToString::to_string).collect();
            return Err(SetError::Invalid(all.join("; ")));
        }
        Ok(())
    }

    /// Creates or updates a set. A non-zero `metadata.resourceVersion` must match the stored one.
    ///
    /// A lost race means the store holds a set this copy does not know (a write that was
    /// reported failed but landed): it is adopted, and the apply decided again, once.
    pub async fn apply_set(&self, s: ManagedClusterSet) -> Result<ManagedClusterSet, SetError> {
        self.apply_set_if(s, Expect::Nothing).await
    }

    /// [`ClusterSets::apply_set`] as decided by a grant that holds only while the stored set is
    /// as `expect` says: checked again under the write lock, `Conflict` (`ABORTED`) when it is
    /// not (review r1 §13: a set deleted meanwhile is not re-created by its former admin).
    pub async fn apply_set_if(
        &self,
        s: ManagedClusterSet,
        expect: Expect,
    ) -> Result<ManagedClusterSet, SetError> {
        let name = name_of(&s.metadata).to_string();
        let revision = |this: &Self| {
            let state = this.state.read().expect("sets lock");
            state.sets.get(&name).map(|(_, rev)| *rev)
        };
        let before = revision(self);
        match self.apply_set_once(s.clone(), expect).await {
            Err(SetError::Conflict(_)) if revision(self) != before => {
                self.apply_set_once(s, expect).await
            }
            result => result,
        }
    }

    async fn apply_set_once(
        &self,
        mut s: ManagedClusterSet,
        expect: Expect,
    ) -> Result<ManagedClusterSet, SetError> {
        Self::validate_set(&s)?;
        let _w = self.write_lock.lock().await;
        let mut m = s.metadata.take().unwrap_or_default();
        let existing = self
            .state
            .read()
            .expect("sets lock")
            .sets
            .get(&m.name)
            .cloned();
        let selector =
            |s: &ManagedClusterSet| s.spec.as_ref().and_then(|s| s.cluster_selector.clone());
        let held = match &existing {
            Some((old, _)) => expect != Expect::Stored || selector(old) == selector(&s),
            None => expect != Expect::Stored,
        };
        if !held {
            return Err(SetError::Conflict(format!(
                "ManagedClusterSet {:?} was deleted or its clusterSelector changed since the                  grant was checked (an update by its admin needs it as it was); get it again                  and retry",
                m.name
            )));
        }
        let spec = s.spec.get_or_insert_with(Default::default);
        let sel = spec.cluster_selector.get_or_insert_with(Default::default);
        if sel.selector_type.is_empty() {
            sel.selector_type = EXCLUSIVE.into();
        }
        let expected = match &existing {
            Some((old, rev)) => {
                if m.resource_version != 0 && m.resource_version != *rev {
                    return Err(SetError::Conflict(format!(
                        "ManagedClusterSet {:?}: resourceVersion {} is stale (stored {rev}); get it again and retry",
                        m.name, m.resource_version
                    )));
                }
                let om = old.metadata.clone().unwrap_or_default();
                crate::identity::keep(&mut m, &om, old.spec != s.spec);
                *rev
            }
            None => {
                if m.resource_version != 0 {
                    return Err(SetError::NotFound(format!(
                        "ManagedClusterSet {:?}",
                        m.name
                    )));
                }
                crate::identity::create(&mut m);
                0
            }
        };
        let name = m.name.clone();
        m.resource_version = 0;
        s.metadata = Some(m);
        s.status = None;
        let rev = match self.sets.write(&name, &s, expected).await {
            Ok(rev) => rev,
            Err(e) => {
                let conflict = e.is_conflict();
                self.settle_failed(StoredKey::Set(name.clone()), conflict)
                    .await;
                return Err(if conflict {
                    SetError::Conflict(format!(
                        "ManagedClusterSet {name:?} changed meanwhile; retry"
                    ))
                } else {
                    SetError::Store(e)
                });
            }
        };
        if let Some(m) = s.metadata.as_mut() {
            m.resource_version = rev;
        }
        self.state
            .write()
            .expect("sets lock")
            .sets
            .insert(name.clone(), (s.clone(), rev));
        let _ = self.changes.send(SetChange::Set(name));
        Ok(s)
    }

    /// Deletes a set (built-in sets cannot be deleted).
    pub async fn delete_set(&self, name: &str) -> Result<(), SetError> {
        if name == DEFAULT_CLUSTERSET || name == GLOBAL_CLUSTERSET {
            return Err(SetError::Precondition(format!(
                "ManagedClusterSet {name:?} is built in; the hub keeps it"
            )));
        }
        let _w = self.write_lock.lock().await;
        if !self
            .state
            .read()
            .expect("sets lock")
            .sets
            .contains_key(name)
        {
            return Err(SetError::NotFound(format!("ManagedClusterSet {name:?}")));
        }
        self.sets.purge(name).await?;
        self.state.write().expect("sets lock").sets.remove(name);
        let _ = self.changes.send(SetChange::Set(name.into()));
        Ok(())
    }

    /// Whether a cluster is a member of a set ([`flotilla_api::clusterset::is_member`], the
    /// rule every hub's set index uses too).
    pub fn is_member(set: &ManagedClusterSet, cluster: &ManagedCluster) -> bool {
        flotilla_api::clusterset::is_member(set, cluster)
    }

    /// A set with its derived status, over one snapshot of the inventory (taken once per call,
    /// however many sets are listed).
    fn view(
        set: &ManagedClusterSet,
        state: &State,
        clusters: &[std::sync::Arc<ManagedCluster>],
    ) -> ManagedClusterSetView {
        let name = name_of(&set.metadata).to_string();
        let members: Vec<String> = clusters
            .iter()
            .filter(|c| Self::is_member(set, c))
            .map(|c| crate::inventory::name(c).to_string())
            .collect();
        let mut set = set.clone();
        let mut conditions = Vec::new();
        if members.is_empty() {
            meta::set_condition(
                &mut conditions,
                COND_CLUSTERSET_EMPTY,
                status::TRUE,
                "NoClusterMatched",
                "No ManagedCluster selected",
            );
        } else {
            meta::set_condition(
                &mut conditions,
                COND_CLUSTERSET_EMPTY,
                status::FALSE,
                "ClustersSelected",
                &format!("{} ManagedClusters selected", members.len()),
            );
        }
        set.status = Some(ManagedClusterSetStatus { conditions });
        let bound_namespaces = state
            .bindings
            .keys()
            .filter(|(_, s)| *s == name)
            .map(|(ns, _)| ns.clone())
            .collect();
        ManagedClusterSetView {
            set: Some(set),
            bound_namespaces,
            members,
        }
    }

    /// One set with its derived status.
    pub fn get_set(&self, name: &str) -> Result<ManagedClusterSetView, SetError> {
        let state = self.state.read().expect("sets lock");
        let (s, _) = state
            .sets
            .get(name)
            .ok_or_else(|| SetError::NotFound(format!("ManagedClusterSet {name:?}")))?;
        Ok(Self::view(s, &state, &self.inventory.snapshot()))
    }

    /// Every set with its derived status.
    pub fn list_sets(&self) -> Vec<ManagedClusterSetView> {
        self.list_sets_where(|_| true)
    }

    /// The sets `keep` admits by name, with their derived status: the others' members are not
    /// computed (review r1 §12: a team's list costs its sets, not the fleet's).
    pub fn list_sets_where(&self, keep: impl Fn(&str) -> bool) -> Vec<ManagedClusterSetView> {
        let state = self.state.read().expect("sets lock");
        let kept: Vec<_> = (state.sets.iter())
            .filter(|(name, _)| keep(name))
            .map(|(_, (s, _))| s)
            .collect();
        if kept.is_empty() {
            return Vec::new();
        }
        let clusters = self.inventory.snapshot();
        kept.into_iter()
            .map(|s| Self::view(s, &state, &clusters))
            .collect()
    }

    /// The raw sets (for placement).
    pub fn sets(&self) -> Vec<ManagedClusterSet> {
        self.state
            .read()
            .expect("sets lock")
            .sets
            .values()
            .map(|(s, _)| s.clone())
            .collect()
    }

    fn binding_status(&self, b: &mut ManagedClusterSetBinding, state: &State) {
        let set = b
            .spec
            .as_ref()
            .map(|s| s.cluster_set.clone())
            .unwrap_or_default();
        let mut conditions = Vec::new();
        if state.sets.contains_key(&set) {
            meta::set_condition(
                &mut conditions,
                COND_BOUND,
                status::TRUE,
                "ClusterSetBound",
                "",
            );
        } else {
            meta::set_condition(
                &mut conditions,
                COND_BOUND,
                status::FALSE,
                "ClusterSetNotFound",
                &format!("ManagedClusterSet {set:?} does not exist"),
            );
        }
        b.status = Some(ManagedClusterSetBindingStatus { conditions });
    }

    /// Creates or updates a binding (a lost race is settled as for sets).
    pub async fn apply_binding(
        &self,
        b: ManagedClusterSetBinding,
    ) -> Result<ManagedClusterSetBinding, SetError> {
        self.apply_binding_if(b, Expect::Nothing).await
    }

    /// [`ClusterSets::apply_binding`] as decided by a grant that holds only while the stored
    /// binding is as `expect` says (`Stored`: it exists — an update needs `edit` only, a
    /// create also `bind`): checked again under the write lock, `Conflict` (`ABORTED`) when
    /// not (review r1 §13).
    pub async fn apply_binding_if(
        &self,
        b: ManagedClusterSetBinding,
        expect: Expect,
    ) -> Result<ManagedClusterSetBinding, SetError> {
        let m = b.metadata.clone().unwrap_or_default();
        let key = (m.namespace, m.name);
        let revision = |this: &Self| {
            let state = this.state.read().expect("sets lock");
            state.bindings.get(&key).map(|(_, rev)| *rev)
        };
        let before = revision(self);
        match self.apply_binding_once(b.clone(), expect).await {
            Err(SetError::Conflict(_)) if revision(self) != before => {
                self.apply_binding_once(b, expect).await
            }
            result => result,
        }
    }

    async fn apply_binding_once(
        &self,
        mut b: ManagedClusterSetBinding,
        expect: Expect,
    ) -> Result<ManagedClusterSetBinding, SetError> {
        let mut m = b.metadata.take().unwrap_or_default();
        names::validate_dns1123_label("metadata.namespace", &m.namespace)
            .map_err(|e| SetError::Invalid(e.to_string()))?;
        names::validate_dns1123_label("metadata.name", &m.name)
            .map_err(|e| SetError::Invalid(e.to_string()))?;
        let set = b
            .spec
            .as_ref()
            .map(|s| s.cluster_set.clone())
            .unwrap_or_default();
        if set != m.name {
            return Err(SetError::Invalid(format!(
                "spec.clusterSet: {set:?} must equal metadata.name {:?} (a binding is named after its set)",
                m.name
            )));
        }
        let _w = self.write_lock.lock().await;
        let key = (m.namespace.clone(), m.name.clone());
        let existing = self
            .state
            .read()
            .expect("sets lock")
            .bindings
            .get(&key)
            .cloned();
        if expect == Expect::Stored && existing.is_none() {
            return Err(SetError::Conflict(format!(
                "ManagedClusterSetBinding {}/{} was deleted since the grant was checked (an \
                 update needs edit on the namespace, a new binding bind on the set too); retry",
                key.0, key.1
            )));
        }
        let expected = match &existing {
            Some((old, rev)) => {
                if m.resource_version != 0 && m.resource_version != *rev {
                    return Err(SetError::Conflict(format!(
                        "ManagedClusterSetBinding {}/{}: resourceVersion {} is stale (stored {rev})",
                        m.namespace, m.name, m.resource_version
                    )));
                }
                let om = old.metadata.clone().unwrap_or_default();
                crate::identity::keep(&mut m, &om, false);
                *rev
            }
            None => {
                crate::identity::create(&mut m);
                0
            }
        };
        m.resource_version = 0;
        b.metadata = Some(m);
        b.status = None;
        let written = self
            .bindings
            .write(
                &ObjectRef::new(key.0.as_str(), key.1.as_str()).store_key(),
                &b,
                expected,
            )
            .await;
        let rev = match written {
            Ok(rev) => rev,
            Err(e) => {
                let conflict = e.is_conflict();
                self.settle_failed(StoredKey::Binding(key.0.clone(), key.1.clone()), conflict)
                    .await;
                return Err(if conflict {
                    SetError::Conflict(format!(
                        "ManagedClusterSetBinding {}/{} changed meanwhile; retry",
                        key.0, key.1
                    ))
                } else {
                    SetError::Store(e)
                });
            }
        };
        if let Some(m) = b.metadata.as_mut() {
            m.resource_version = rev;
        }
        let mut state = self.state.write().expect("sets lock");
        state.bindings.insert(key.clone(), (b.clone(), rev));
        self.binding_status(&mut b, &state);
        drop(state);
        let _ = self.changes.send(SetChange::Binding {
            namespace: key.0,
            set: key.1,
        });
        Ok(b)
    }

    /// After a failed write: a lost race is settled at once (the stored value adopted); a key
    /// whose write had an unknown outcome (an outage) is read again by [`ClusterSets::settle`]
    /// until the store answers — so that a write that landed late is never invisible.
    async fn settle_failed(&self, key: StoredKey, conflict: bool) {
        if conflict && self.adopt(&key).await.is_ok() {
            return;
        }
        self.unsettled.lock().expect("unsettled lock").note(key);
    }

    /// Reads the unsettled keys again and adopts what is stored, until `stop` flips: the loop
    /// of whoever runs the sets (the controllers), stopped with them.
    pub async fn settle(self, mut stop: tokio::sync::watch::Receiver<bool>) {
        loop {
            let deadline = self.unsettled.lock().expect("unsettled lock").deadline();
            let wait =
                deadline.unwrap_or_else(|| tokio::time::Instant::now() + crate::settle::RETRY);
            tokio::select! {
                _ = stop.changed() => return,
                () = tokio::time::sleep_until(wait) => {}
            }
            if deadline.is_none() {
                continue;
            }
            let keys = self.unsettled.lock().expect("unsettled lock").take();
            let _w = self.write_lock.lock().await;
            for key in keys {
                if let Err(e) = self.adopt(&key).await {
                    tracing::debug!(error = %e, key = ?key, "store still unavailable; will read the key again");
                    self.unsettled.lock().expect("unsettled lock").note(key);
                }
            }
        }
    }

    /// Adopts the stored value of one key (or its absence) and announces the change.
    async fn adopt(&self, key: &StoredKey) -> Result<(), StoreError> {
        match key {
            StoredKey::Set(name) => {
                let stored = self.sets.get(name).await?;
                let mut state = self.state.write().expect("sets lock");
                match stored {
                    Some((mut s, rev)) => {
                        if let Some(m) = s.metadata.as_mut() {
                            m.resource_version = rev;
                        }
                        state.sets.insert(name.clone(), (s, rev));
                    }
                    None => {
                        state.sets.remove(name);
                    }
                }
                drop(state);
                let _ = self.changes.send(SetChange::Set(name.clone()));
            }
            StoredKey::Binding(namespace, set) => {
                let stored = self
                    .bindings
                    .get(&ObjectRef::new(namespace.as_str(), set.as_str()).store_key())
                    .await?;
                let key = (namespace.clone(), set.clone());
                let mut state = self.state.write().expect("sets lock");
                match stored {
                    Some((mut b, rev)) => {
                        if let Some(m) = b.metadata.as_mut() {
                            m.resource_version = rev;
                        }
                        state.bindings.insert(key, (b, rev));
                    }
                    None => {
                        state.bindings.remove(&key);
                    }
                }
                drop(state);
                let _ = self.changes.send(SetChange::Binding {
                    namespace: namespace.clone(),
                    set: set.clone(),
                });
            }
        }
        Ok(())
    }

    /// The sets bound into `namespace` that exist: the only sets a Placement or a PlacementRule
    /// there decides among (OCM: workloads of a namespace go only to clusters of the sets bound
    /// in it). Empty for a namespace with no binding.
    pub fn bound_in(&self, namespace: &str) -> Vec<ManagedClusterSet> {
        let state = self.state.read().expect("sets lock");
        state
            .bindings
            .range((namespace.to_string(), String::new())..)
            .take_while(|((ns, _), _)| ns == namespace)
            .filter_map(|(_, (b, _))| {
                let set = b.spec.as_ref()?.cluster_set.as_str();
                state.sets.get(set).map(|(s, _)| s.clone())
            })
            .collect()
    }

    /// Bindings in a namespace (all namespaces when empty), with status.
    pub fn list_bindings(&self, namespace: &str) -> Vec<ManagedClusterSetBinding> {
        let state = self.state.read().expect("sets lock");
        state
            .bindings
            .iter()
            .filter(|((ns, _), _)| namespace.is_empty() || ns == namespace)
            .map(|(_, (b, _))| {
                let mut b = b.clone();
                self.binding_status(&mut b, &state);
                b
            })
            .collect()
    }

    /// Deletes a binding.
    pub async fn delete_binding(&self, namespace: &str, name: &str) -> Result<(), SetError> {
        let _w = self.write_lock.lock().await;
        let key = (namespace.to_string(), name.to_string());
        if !self
            .state
            .read()
            .expect("sets lock")
            .bindings
            .contains_key(&key)
        {
            return Err(SetError::NotFound(format!(
                "ManagedClusterSetBinding {namespace}/{name}"
            )));
        }
        self.bindings
            .purge(&ObjectRef::new(namespace, name).store_key())
            .await?;
        self.state.write().expect("sets lock").bindings.remove(&key);
        let _ = self.changes.send(SetChange::Binding {
            namespace: key.0,
            set: key.1,
        });
        Ok(())
    }

    /// The exclusive set a cluster belongs to (value of its clusterset label).
    pub fn exclusive_set_of(cluster: &ManagedCluster) -> String {
        cluster
            .metadata
            .as_ref()
            .and_then(|m| m.labels.get(CLUSTERSET_LABEL).cloned())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests;
