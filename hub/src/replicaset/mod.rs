//! ManifestWorkReplicaSets: one ManifestWork template rolled out over the clusters placements
//! decide, with OCM's rollout strategies (`flotilla-rollout` decides each step).
//!
//! - [`rules`]: pure — validation naming every field, the per-cluster work, where a cluster's
//!   work stands against the current template, the summary.
//! - [`actor`]: one task per replica set: follows its placements' decisions and its works,
//!   starts works as the rollout allows, removes works of clusters that left the decisions,
//!   writes the status.
//!
//! [`ReplicaSets`] is the handle: apply, get, list, delete. A replica set a GitRepo writes is
//! changed by that GitRepo only ([`rules::owner`]): a user's apply, delete or undo of it is
//! refused unless forced. Replica sets are kept in the
//! `replicasets` KV bucket; the rollout position is never stored: after a hub restart it is
//! recomputed from the works themselves (their template hash and conditions), so a rollout
//! resumes where it was.

pub mod actor;
pub mod family;
pub mod grpc;
pub mod rules;

use crate::cluster::Clusters;
use crate::inventory::{Inventory, WorkInventory};
use crate::keys::ObjectRef;
use crate::placement::Placements;
use crate::store::{Bucket, StoreError};
use dashmap::DashMap;
use flotilla_api::v1::ManifestWorkReplicaSet;
pub use rules::owner::{Change, Refusal, Writer};
use std::sync::Arc;
use thiserror::Error;
use tokio::sync::mpsc;

/// KV bucket of replica sets (`<namespace>.<name>`).
pub const BUCKET: &str = "replicasets";

/// Every replica set, keyed `<namespace>/<name>`, with its status, and a change broadcast.
pub type ReplicaSetInventory = Inventory<ManifestWorkReplicaSet>;

/// Why a replica set call failed.
#[derive(Debug, Error)]
pub enum ReplicaSetError {
    /// Invalid input (every problem, each naming its field).
    #[error("{}", .0.join("; "))]
    Invalid(Vec<String>),
    /// No such replica set.
    #[error("ManifestWorkReplicaSet {0} not found")]
    NotFound(String),
    /// Storage failed.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// The writer may not change it (a GitRepo writes it).
    #[error(transparent)]
    Refused(#[from] Refusal),
}

impl From<StoreError> for ReplicaSetError {
    fn from(e: StoreError) -> Self {
        Self::Unavailable(e.to_string())
    }
}

/// What the replica set actors work with.
#[derive(Clone)]
pub struct Deps {
    /// Cluster actors (they own works).
    pub clusters: Clusters,
    /// Every work.
    pub works: WorkInventory,
    /// Placements and their decisions.
    pub placements: Placements,
    /// Every cluster (labels: which per-target variant a cluster gets).
    pub inventory: crate::inventory::ClusterInventory,
}

struct Inner {
    bucket: Bucket<ManifestWorkReplicaSet>,
    views: ReplicaSetInventory,
    actors: DashMap<String, mpsc::Sender<actor::Msg>>,
    /// The actors' tasks, awaited by [`ReplicaSets::stop`].
    tasks: crate::tasks::TaskGroup,
    deps: Deps,
}

/// The replica sets (cheap to clone).
#[derive(Clone)]
pub struct ReplicaSets {
    inner: Arc<Inner>,
}

fn key_of(rs: &ManifestWorkReplicaSet) -> ObjectRef {
    let m = rs.metadata.clone().unwrap_or_default();
    ObjectRef::new(&m.namespace, &m.name)
}

impl ReplicaSets {
    /// Loads every stored replica set and starts its actor.
    pub async fn start(
        bucket: Bucket<ManifestWorkReplicaSet>,
        deps: Deps,
    ) -> Result<Self, ReplicaSetError> {
        let this = Self {
            inner: Arc::new(Inner {
                bucket,
                views: ReplicaSetInventory::new(1024),
                actors: DashMap::new(),
                tasks: crate::tasks::TaskGroup::default(),
                deps,
            }),
        };
        for (_, rs, _) in this.inner.bucket.load_all().await? {
            this.spawn(rs);
        }
        Ok(this)
    }

    /// Stops every replica-set actor (this hub gave the controllers up): their mailboxes are
    /// closed, and each is awaited (bounded) as it ends.
    pub async fn stop(&self) {
        self.inner.actors.clear();
        self.inner
            .tasks
            .join(std::time::Duration::from_secs(5))
            .await;
    }

    fn spawn(&self, rs: ManifestWorkReplicaSet) {
        let key = key_of(&rs);
        self.inner.views.upsert(&key.inventory_key(), rs.clone());
        let tx = actor::spawn(
            rs,
            self.inner.deps.clone(),
            self.inner.bucket.clone(),
            self.inner.views.clone(),
            &self.inner.tasks,
        );
        self.inner.actors.insert(key.inventory_key(), tx);
    }

    /// The published replica sets (for watches).
    pub fn views(&self) -> &ReplicaSetInventory {
        &self.inner.views
    }

    /// Creates or updates a replica set as a user; a template change starts a new rollout.
    pub async fn apply(
        &self,
        rs: ManifestWorkReplicaSet,
    ) -> Result<ManifestWorkReplicaSet, ReplicaSetError> {
        self.apply_as(rs, Writer::User).await
    }

    /// Creates or updates a replica set as `writer` (refused when it may not: a GitRepo's set
    /// by a user). A new set a GitRepo makes keeps the hub state it is given (made paused while
    /// the GitRepo's rollout is).
    pub async fn apply_as(
        &self,
        mut rs: ManifestWorkReplicaSet,
        writer: Writer<'_>,
    ) -> Result<ManifestWorkReplicaSet, ReplicaSetError> {
        let errors = rules::validate(&rs);
        if !errors.is_empty() {
            return Err(ReplicaSetError::Invalid(errors));
        }
        let key = key_of(&rs);
        let stored = self.inner.bucket.get(&key.store_key()).await?;
        rules::owner::may_write(stored.as_ref().map(|(s, _)| s), writer, Change::Apply)?;
        // Per-target variants are the GitRepo's to write (a user's --force keeps them).
        let by_gitrepo = matches!(writer, Writer::GitRepo(_));
        match stored {
            Some((old, _)) => {
                rules::revision::next(old, &mut rs, by_gitrepo);
            }
            None => {
                crate::identity::create(rs.metadata.get_or_insert_with(Default::default));
                rs.status = None;
                if !by_gitrepo {
                    rs.hub = None;
                }
            }
        }
        let m = rs.metadata.get_or_insert_with(Default::default);
        m.resource_version = 0;
        let rev = self.inner.bucket.put(&key.store_key(), &rs).await?;
        if let Some(m) = rs.metadata.as_mut() {
            m.resource_version = rev;
        }
        match self.inner.actors.get(&key.inventory_key()) {
            Some(tx) => {
                self.inner.views.upsert(&key.inventory_key(), rs.clone());
                let _ = tx.send(actor::Msg::Spec(Box::new(rs.clone()))).await;
            }
            None => self.spawn(rs.clone()),
        }
        Ok(rs)
    }

    /// `pause`, `resume` or `undo` (back to the template, and the per-target variants, before
    /// the last change, which starts a new rollout of them), as a user.
    pub async fn rollout(
        &self,
        namespace: &str,
        name: &str,
        action: &str,
    ) -> Result<ManifestWorkReplicaSet, ReplicaSetError> {
        self.rollout_as(namespace, name, action, Writer::User).await
    }

    /// [`ReplicaSets::rollout`] as `writer` (a user's undo of a GitRepo's set is refused).
    pub async fn rollout_as(
        &self,
        namespace: &str,
        name: &str,
        action: &str,
        writer: Writer<'_>,
    ) -> Result<ManifestWorkReplicaSet, ReplicaSetError> {
        let key = ObjectRef::new(namespace, name);
        let Some((mut rs, _)) = self.inner.bucket.get(&key.store_key()).await? else {
            return Err(ReplicaSetError::NotFound(key.inventory_key()));
        };
        let change = if action == "undo" {
            Change::Undo
        } else {
            Change::PauseOrResume
        };
        rules::owner::may_write(Some(&rs), writer, change)?;
        match action {
            "pause" | "resume" => {
                rs.hub.get_or_insert_with(Default::default).paused = action == "pause";
            }
            // The template and the per-target variants go back together.
            "undo" => {
                rules::revision::undo(&mut rs).map_err(|e| ReplicaSetError::Invalid(vec![e]))?
            }
            other => {
                return Err(ReplicaSetError::Invalid(vec![format!(
                    "action: {other:?} is not one of pause, resume, undo"
                )]));
            }
        }
        let rev = self.inner.bucket.put(&key.store_key(), &rs).await?;
        if let Some(m) = rs.metadata.as_mut() {
            m.resource_version = rev;
        }
        self.inner.views.upsert(&key.inventory_key(), rs.clone());
        if let Some(tx) = self.inner.actors.get(&key.inventory_key()) {
            let _ = tx.send(actor::Msg::Spec(Box::new(rs.clone()))).await;
        }
        Ok(rs)
    }

    /// One replica set with its status.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<ManifestWorkReplicaSet>> {
        self.inner
            .views
            .get(&ObjectRef::new(namespace, name).inventory_key())
    }

    /// Each cluster the placements of replica set `namespace/name` decide (each once, in
    /// placement order): its Fleet state, the commit its work carries and why it is not Ready,
    /// computed now from the works. `None`: no such replica set.
    pub fn rows(&self, namespace: &str, name: &str) -> Option<Vec<rules::state::Row>> {
        let rs = self.get(namespace, name)?;
        let owner = rules::owner_label(namespace, name);
        let works = actor::works_of(&self.inner.deps.works, &owner);
        let decided: Vec<(String, flotilla_rollout::GroupKey)> = rs
            .spec
            .iter()
            .flat_map(|s| &s.placement_refs)
            .filter_map(|p| self.inner.deps.placements.get(namespace, &p.name))
            .flat_map(|view| view.decided_by_group())
            .collect();
        let hash = rules::template_hash(&rs);
        let picks = actor::picks(
            &rs,
            &self.inner.deps,
            decided.iter().map(|(c, g)| (c.as_str(), g.name.as_str())),
        );
        let names: Vec<String> = decided.into_iter().map(|(c, _)| c).collect();
        Some(rules::state::rows_by(&names, &works, |c| {
            let pick = rules::variant::pick_of(&picks, c);
            rules::variant::hash(&rs, &hash, pick).map(str::to_owned)
        }))
    }

    /// Replica sets of a namespace (every namespace when empty).
    pub fn list(&self, namespace: &str) -> Vec<Arc<ManifestWorkReplicaSet>> {
        if namespace.is_empty() {
            self.inner.views.snapshot()
        } else {
            self.inner
                .views
                .with_prefix(&ObjectRef::prefix(namespace))
                .into_iter()
                .map(|(_, v)| v)
                .collect()
        }
    }

    /// Deletes a replica set as a user; its works go too unless `cascadeDeletionPolicy: Orphan`.
    pub async fn delete(&self, namespace: &str, name: &str) -> Result<(), ReplicaSetError> {
        self.delete_as(namespace, name, Writer::User).await
    }

    /// [`ReplicaSets::delete`] as `writer` (a user's delete of a GitRepo's set is refused).
    pub async fn delete_as(
        &self,
        namespace: &str,
        name: &str,
        writer: Writer<'_>,
    ) -> Result<(), ReplicaSetError> {
        let key = ObjectRef::new(namespace, name);
        let stored = self.inner.views.get(&key.inventory_key());
        rules::owner::may_write(stored.as_deref(), writer, Change::Delete)?;
        let Some((_, tx)) = self.inner.actors.remove(&key.inventory_key()) else {
            return Err(ReplicaSetError::NotFound(key.inventory_key()));
        };
        let (done_tx, done) = tokio::sync::oneshot::channel();
        let _ = tx.send(actor::Msg::Delete(done_tx)).await;
        let _ = done.await;
        self.inner.bucket.purge(&key.store_key()).await?;
        self.inner.views.remove(&key.inventory_key());
        Ok(())
    }
}
