//! Add-ons (OCM `addon.open-cluster-management.io/v1alpha1`): install an add-on agent on the
//! clusters placements select (or that an operator names), configure it per cluster, per
//! placement or by default, roll config changes out progressively, and watch its health.
//!
//! - [`rules`]: pure — which clusters an add-on belongs on, where each stands in the rollout of
//!   its configs (over all its works), the status of each ManagedClusterAddOn, the next step of
//!   removing one (its pre-delete hook first).
//! - [`actor`]: one task per ClusterManagementAddOn: creates and removes its
//!   ManagedClusterAddOns as placements decide, renders its template into a cluster's
//!   ManifestWorks (more than one when its manifests exceed one work) as the rollout allows,
//!   writes every ManagedClusterAddOn's status and its own; removals go through it, step by
//!   step.
//! - [`effects`]: what the actors change: a cluster's works moved to the rendered ones, status
//!   writes, uninstalling (hook work, works, stored object, lease, credentials).
//! - [`router`]: the add-on agents' NATS subjects (lease renewals, scores) and credential
//!   requests.
//!
//! [`AddOns`] is the handle: apply, get, list and delete the four kinds, enable and disable,
//! take lease renewals. Each kind has its KV bucket (`addons`, `clusteraddons`,
//! `addontemplates`, `addonconfigs`); the rollout position is never stored (see [`rules`]).

pub mod actor;
mod dirty;
pub mod effects;
pub mod family;
pub mod grpc;
pub mod router;
pub mod rules;
mod settled;

use crate::cluster::Clusters;
use crate::inventory::{ClusterInventory, Inventory, WorkInventory};
use crate::keys::ObjectRef;
use crate::placement::Placements;
use crate::store::{Bucket, StoreError};
use dashmap::DashMap;
use flotilla_api::addon::validate;
use flotilla_api::v1::{
    AddOnDeploymentConfig, AddOnTemplate, ClusterManagementAddOn, ManagedClusterAddOn, ObjectMeta,
};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use thiserror::Error;
use tokio::sync::mpsc;

/// Why an add-on agent's key gets no NATS credentials; the agent is told this text.
#[derive(Debug, Error)]
pub enum CredentialsError {
    /// The add-on is not installed on the cluster.
    #[error("add-on {addon:?} is not installed on cluster {cluster:?}")]
    NotInstalled {
        /// The add-on.
        addon: String,
        /// The cluster.
        cluster: String,
    },
    /// The add-on's template asks for no hub access.
    #[error("add-on {0:?}'s template asks for no hub access (spec.registration is empty)")]
    NoHubAccess(String),
    /// The hub is not in secure mode.
    #[error("this hub runs without --secure-dir: add-on agents connect without credentials")]
    NotSecure,
    /// The credentials could not be issued.
    #[error(transparent)]
    Issue(#[from] flotilla_auth::issuer::IssueError),
    /// The key issued before could not be revoked (nothing new is issued).
    #[error("revoking the add-on's previous key failed: {0}")]
    Revoke(#[source] crate::security::revocations::RevocationError),
}

/// KV bucket of ClusterManagementAddOns (`<name>`).
pub const BUCKET_ADDONS: &str = "addons";
/// KV bucket of ManagedClusterAddOns (`<cluster>.<name>`).
pub const BUCKET_CLUSTER_ADDONS: &str = "clusteraddons";
/// KV bucket of AddOnTemplates (`<name>`).
pub const BUCKET_TEMPLATES: &str = "addontemplates";
/// KV bucket of AddOnDeploymentConfigs (`<namespace>.<name>`).
pub const BUCKET_CONFIGS: &str = "addonconfigs";

/// Why an add-on call failed.
#[derive(Debug, Error)]
pub enum AddOnError {
    /// Invalid input (every problem, each naming its field).
    #[error("{}", .0.join("; "))]
    Invalid(Vec<String>),
    /// No such object.
    #[error("{0} not found")]
    NotFound(String),
    /// The object was changed meanwhile.
    #[error("{0}")]
    Conflict(String),
    /// The object is being deleted (it waits for a pre-delete hook): not now.
    #[error("{0}")]
    Deleting(String),
    /// Storage failed.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
}

impl From<StoreError> for AddOnError {
    fn from(e: StoreError) -> Self {
        Self::Unavailable(e.to_string())
    }
}

/// Add-on settings.
#[derive(Debug, Clone)]
pub struct AddOnConfig {
    /// How long an add-on agent's lease stays fresh (OCM: 5 × 60 s).
    pub lease_grace: Duration,
    /// The value of the `HUB_URL` template variable (the NATS URL agents use); empty leaves it
    /// undefined.
    pub hub_url: String,
}

impl Default for AddOnConfig {
    fn default() -> Self {
        Self {
            lease_grace: flotilla_api::addon::health::DEFAULT_LEASE_GRACE,
            hub_url: String::new(),
        }
    }
}

/// What the add-on actors work with.
#[derive(Clone)]
pub struct Deps {
    /// Cluster actors (they own works).
    pub clusters: Clusters,
    /// Every cluster (Available, existence).
    pub inventory: ClusterInventory,
    /// Every work.
    pub works: WorkInventory,
    /// Placements and their decisions.
    pub placements: Placements,
    /// Secure mode: issues and revokes add-on agents' credentials.
    pub security: Option<crate::security::Security>,
    /// Settings.
    pub config: AddOnConfig,
}

/// The stored objects of every add-on kind, shared by the handle and the actors.
pub struct Store {
    /// ClusterManagementAddOns.
    pub addons: Bucket<ClusterManagementAddOn>,
    /// ManagedClusterAddOns.
    pub cluster_addons: Bucket<ManagedClusterAddOn>,
    /// AddOnTemplates.
    pub templates: Bucket<AddOnTemplate>,
    /// AddOnDeploymentConfigs.
    pub configs: Bucket<AddOnDeploymentConfig>,
    /// ClusterManagementAddOns by name.
    pub addon_views: Inventory<ClusterManagementAddOn>,
    /// ManagedClusterAddOns by `<cluster>/<name>`.
    pub cluster_addon_views: Inventory<ManagedClusterAddOn>,
    /// AddOnTemplates by name.
    pub template_views: Inventory<AddOnTemplate>,
    /// AddOnDeploymentConfigs by `<namespace>/<name>`.
    pub config_views: Inventory<AddOnDeploymentConfig>,
    /// Lease renewals by `<cluster>/<addon>` (memory only: a restarted hub gives every agent a
    /// fresh grace from its start).
    pub leases: DashMap<String, SystemTime>,
    /// When this hub started (the grace of leases not seen since).
    pub started: SystemTime,
}

impl Store {
    /// Opens the buckets and loads every object.
    pub async fn open(
        jetstream: &async_nats::jetstream::Context,
        opts: flotilla_bus::jetstream::StreamOptions,
    ) -> Result<Self, StoreError> {
        let store = Self {
            addons: Bucket::open(jetstream, BUCKET_ADDONS, opts).await?,
            cluster_addons: Bucket::open(jetstream, BUCKET_CLUSTER_ADDONS, opts).await?,
            templates: Bucket::open(jetstream, BUCKET_TEMPLATES, opts).await?,
            configs: Bucket::open(jetstream, BUCKET_CONFIGS, opts).await?,
            addon_views: Inventory::new(1024),
            cluster_addon_views: Inventory::new(8192),
            template_views: Inventory::new(1024),
            config_views: Inventory::new(1024),
            leases: DashMap::new(),
            started: SystemTime::now(),
        };
        for (_, x, rev) in store.templates.load_all().await? {
            let key = name_of(&x.metadata);
            store.template_views.upsert(&key, with_rev(x, rev));
        }
        for (_, x, rev) in store.configs.load_all().await? {
            let key = ns_key(&x.metadata).inventory_key();
            store.config_views.upsert(&key, with_rev(x, rev));
        }
        for (_, x, rev) in store.cluster_addons.load_all().await? {
            let key = ns_key(&x.metadata).inventory_key();
            store.cluster_addon_views.upsert(&key, with_rev(x, rev));
        }
        Ok(store)
    }

    /// The lease renewal of `addon` on `cluster`, if seen since this hub started.
    pub fn lease(&self, cluster: &str, addon: &str) -> Option<SystemTime> {
        self.leases.get(&lease_key(cluster, addon)).map(|t| *t)
    }

    /// Every ManagedClusterAddOn of `addon`.
    pub fn installed(&self, addon: &str) -> Vec<Arc<ManagedClusterAddOn>> {
        self.cluster_addon_views
            .snapshot()
            .into_iter()
            .filter(|m| m.metadata.as_ref().is_some_and(|m| m.name == addon))
            .collect()
    }
}

fn lease_key(cluster: &str, addon: &str) -> String {
    format!("{cluster}/{addon}")
}

trait Meta {
    fn meta_mut(&mut self) -> &mut Option<ObjectMeta>;
}

macro_rules! meta_of {
    ($($t:ty),*) => {$(
        impl Meta for $t {
            fn meta_mut(&mut self) -> &mut Option<ObjectMeta> {
                &mut self.metadata
            }
        }
    )*};
}
meta_of!(
    ClusterManagementAddOn,
    ManagedClusterAddOn,
    AddOnTemplate,
    AddOnDeploymentConfig
);

fn with_rev<T: Meta>(mut x: T, rev: u64) -> T {
    if let Some(m) = x.meta_mut().as_mut() {
        m.resource_version = rev;
    }
    x
}

/// Whether an object is marked deleted (it waits for something before it goes).
fn is_deleted(m: &Option<ObjectMeta>) -> bool {
    m.as_ref().is_some_and(|m| m.deletion_timestamp.is_some())
}

fn name_of(m: &Option<ObjectMeta>) -> String {
    m.as_ref().map(|m| m.name.clone()).unwrap_or_default()
}

fn ns_key(m: &Option<ObjectMeta>) -> ObjectRef {
    let m = m.clone().unwrap_or_default();
    ObjectRef::new(m.namespace, m.name)
}

/// Refuses an update that names a resourceVersion other than the stored one.
fn check_version(
    given: &Option<ObjectMeta>,
    stored: Option<u64>,
    what: &str,
) -> Result<(), AddOnError> {
    let given = given.as_ref().map(|m| m.resource_version).unwrap_or(0);
    match stored {
        Some(rev) if given != 0 && given != rev => Err(AddOnError::Conflict(format!(
            "{what}: metadata.resourceVersion {given} is not the stored {rev} (changed meanwhile; read it again)"
        ))),
        None if given != 0 => Err(AddOnError::NotFound(format!(
            "{what} (metadata.resourceVersion {given} given)"
        ))),
        _ => Ok(()),
    }
}

/// Prepares `x` for storing over `stored`: identity kept, generation bumped on spec change.
fn stamp<T: Meta + Clone>(x: &mut T, stored: Option<&T>, spec_changed: bool) {
    let stored_meta = stored.and_then(|s| s.clone().meta_mut().clone());
    let m = x.meta_mut().get_or_insert_with(Default::default);
    match stored_meta {
        Some(om) => crate::identity::keep(m, &om, spec_changed),
        None => crate::identity::create(m),
    }
    m.resource_version = 0;
}

/// How long the actors get to end when the add-ons stop.
const STOP_GRACE: Duration = Duration::from_secs(5);

struct Inner {
    store: Arc<Store>,
    actors: DashMap<String, mpsc::Sender<actor::Msg>>,
    /// The actors' tasks, awaited by [`AddOns::stop`].
    tasks: crate::tasks::TaskGroup,
    deps: Deps,
}

/// The add-ons (cheap to clone).
#[derive(Clone)]
pub struct AddOns {
    inner: Arc<Inner>,
}

impl AddOns {
    /// Loads every stored add-on and starts its actor.
    pub async fn start(store: Store, deps: Deps) -> Result<Self, AddOnError> {
        let loaded = store.addons.load_all().await?;
        let this = Self {
            inner: Arc::new(Inner {
                store: Arc::new(store),
                actors: DashMap::new(),
                tasks: crate::tasks::TaskGroup::default(),
                deps,
            }),
        };
        for (_, cma, rev) in loaded {
            this.spawn(with_rev(cma, rev));
        }
        Ok(this)
    }

    fn spawn(&self, cma: ClusterManagementAddOn) {
        let name = name_of(&cma.metadata);
        self.inner.store.addon_views.upsert(&name, cma.clone());
        let tx = actor::spawn(
            cma,
            self.inner.deps.clone(),
            self.inner.store.clone(),
            &self.inner.tasks,
        );
        self.inner.actors.insert(name, tx);
    }

    /// Stops every add-on actor (this hub gave the controllers up): their mailboxes are
    /// closed, and each is awaited (bounded) as it ends.
    pub async fn stop(&self) {
        self.inner.actors.clear();
        self.inner.tasks.join(STOP_GRACE).await;
    }

    /// The stored objects (for watches and the router).
    pub fn store(&self) -> &Arc<Store> {
        &self.inner.store
    }

    // ---- ClusterManagementAddOn ----

    /// Creates or updates an add-on.
    pub async fn apply_addon(
        &self,
        mut cma: ClusterManagementAddOn,
    ) -> Result<ClusterManagementAddOn, AddOnError> {
        let mut errors = validate::cluster_management_addon(&cma);
        errors.extend(rules::hub_checks(&cma));
        if !errors.is_empty() {
            return Err(AddOnError::Invalid(errors));
        }
        let name = name_of(&cma.metadata);
        let what = format!("ClusterManagementAddOn {name}");
        let stored = self.inner.store.addons.get(&name).await?;
        check_version(&cma.metadata, stored.as_ref().map(|s| s.1), &what)?;
        if let Some((s, _)) = &stored
            && is_deleted(&s.metadata)
        {
            return Err(AddOnError::Deleting(format!(
                "{what} is being deleted: its installations wait for their pre-delete hooks; \
                 apply it again once it is gone"
            )));
        }
        let spec_changed = stored.as_ref().is_none_or(|(s, _)| s.spec != cma.spec);
        stamp(&mut cma, stored.as_ref().map(|s| &s.0), spec_changed);
        cma.status = stored.and_then(|(s, _)| s.status);
        let rev = self.inner.store.addons.put(&name, &cma).await?;
        let cma = with_rev(cma, rev);
        match self.live_actor(&name) {
            Some(tx) => {
                self.inner.store.addon_views.upsert(&name, cma.clone());
                let _ = tx.send(actor::Msg::Spec(Box::new(cma.clone()))).await;
            }
            None => self.spawn(cma.clone()),
        }
        Ok(cma)
    }

    /// One add-on with its status.
    pub fn get_addon(&self, name: &str) -> Option<Arc<ClusterManagementAddOn>> {
        self.inner.store.addon_views.get(name)
    }

    /// Every add-on.
    pub fn list_addons(&self) -> Vec<Arc<ClusterManagementAddOn>> {
        self.inner.store.addon_views.snapshot()
    }

    /// Deletes an add-on with every ManagedClusterAddOn of its name and their works. Those
    /// with a pre-delete hook run it first: the add-on then stays, marked deleted, until the
    /// last of them is gone (its actor purges it).
    pub async fn delete_addon(&self, name: &str) -> Result<effects::Removal, AddOnError> {
        let Some(tx) = self.live_actor(name) else {
            return Err(AddOnError::NotFound(format!(
                "ClusterManagementAddOn {name}"
            )));
        };
        let (done_tx, done) = tokio::sync::oneshot::channel();
        let sent = tx.send(actor::Msg::Delete(done_tx)).await;
        let removal = match (sent, done.await) {
            (Ok(()), Ok(removal)) => removal,
            // The actor ended meanwhile: nothing runs hooks any more.
            _ => {
                self.inner.store.addons.purge(name).await?;
                self.inner.store.addon_views.remove(name);
                effects::Removal::Removed
            }
        };
        if removal == effects::Removal::Removed {
            self.inner.actors.remove(name);
        }
        Ok(removal)
    }

    /// The actor of add-on `name`, unless it ended (a deleted add-on's, once everything went).
    fn live_actor(&self, name: &str) -> Option<mpsc::Sender<actor::Msg>> {
        self.inner
            .actors
            .get(name)
            .map(|tx| tx.clone())
            .filter(|tx| !tx.is_closed())
    }

    /// Removes add-on `name` from `cluster` through its actor (which runs the pre-delete hook
    /// first, when the template has one), or directly when it has none.
    async fn remove_from(&self, cluster: &str, name: &str) -> Result<effects::Removal, AddOnError> {
        if let Some(tx) = self.live_actor(name) {
            let (done, answer) = tokio::sync::oneshot::channel();
            let msg = actor::Msg::Uninstall {
                cluster: cluster.to_string(),
                done,
            };
            if tx.send(msg).await.is_ok()
                && let Ok(removal) = answer.await
            {
                return removal;
            }
        }
        let (store, deps) = (&self.inner.store, &self.inner.deps);
        effects::uninstall(store, deps, cluster, name, Ok(None)).await
    }

    // ---- ManagedClusterAddOn ----

    /// Installs (or updates) an add-on on one cluster. The cluster and the add-on must exist.
    pub async fn apply_cluster_addon(
        &self,
        mut mca: ManagedClusterAddOn,
    ) -> Result<ManagedClusterAddOn, AddOnError> {
        let mut errors = validate::managed_cluster_addon(&mca);
        let key = ns_key(&mca.metadata);
        if errors.is_empty() {
            if self.inner.deps.inventory.get(&key.namespace).is_none() {
                errors.push(format!(
                    "metadata.namespace: no ManagedCluster {:?} (a ManagedClusterAddOn lives in its cluster's namespace)",
                    key.namespace
                ));
            }
            match self.get_addon(&key.name) {
                None => errors.push(format!(
                    "metadata.name: no ClusterManagementAddOn {:?} (apply the add-on first)",
                    key.name
                )),
                Some(cma) if is_deleted(&cma.metadata) => errors.push(format!(
                    "metadata.name: ClusterManagementAddOn {:?} is being deleted",
                    key.name
                )),
                Some(cma) => {
                    let spec = mca.spec.clone().unwrap_or_default();
                    for (i, c) in spec.configs.iter().enumerate() {
                        if !flotilla_api::addon::configs::supported(&cma, &c.group, &c.resource) {
                            errors.push(format!(
                                "spec.configs[{i}]: group/resource {}/{} is not among add-on {}'s supportedConfigs",
                                c.group, c.resource, key.name
                            ));
                        }
                    }
                }
            }
        }
        if !errors.is_empty() {
            return Err(AddOnError::Invalid(errors));
        }
        let what = format!("ManagedClusterAddOn {key}");
        let stored = self
            .inner
            .store
            .cluster_addons
            .get(&key.store_key())
            .await?;
        check_version(&mca.metadata, stored.as_ref().map(|s| s.1), &what)?;
        if let Some((s, _)) = &stored
            && is_deleted(&s.metadata)
        {
            return Err(AddOnError::Deleting(format!(
                "{what} is being deleted (it waits for its pre-delete hook: see its \
                 HookManifestCompleted condition); apply it again once it is gone"
            )));
        }
        let spec_changed = stored.as_ref().is_none_or(|(s, _)| s.spec != mca.spec);
        stamp(&mut mca, stored.as_ref().map(|s| &s.0), spec_changed);
        if let Some((s, _)) = stored {
            mca.status = s.status;
            mca.hub = s.hub;
        } else {
            mca.status = None;
            mca.hub = None;
        }
        let rev = self
            .inner
            .store
            .cluster_addons
            .put(&key.store_key(), &mca)
            .await?;
        let mca = with_rev(mca, rev);
        self.inner
            .store
            .cluster_addon_views
            .upsert(&key.inventory_key(), mca.clone());
        Ok(mca)
    }

    /// One installed add-on.
    pub fn get_cluster_addon(&self, cluster: &str, name: &str) -> Option<Arc<ManagedClusterAddOn>> {
        self.inner
            .store
            .cluster_addon_views
            .get(&ObjectRef::new(cluster, name).inventory_key())
    }

    /// Installed add-ons of a cluster (every cluster when empty), of one add-on when `name` is
    /// set.
    pub fn list_cluster_addons(&self, cluster: &str, name: &str) -> Vec<Arc<ManagedClusterAddOn>> {
        let views = &self.inner.store.cluster_addon_views;
        let all = if cluster.is_empty() {
            views.snapshot()
        } else {
            views
                .with_prefix(&ObjectRef::prefix(cluster))
                .into_iter()
                .map(|(_, v)| v)
                .collect()
        };
        let mut out: Vec<_> = all
            .into_iter()
            .filter(|m| name.is_empty() || m.metadata.as_ref().is_some_and(|m| m.name == name))
            .collect();
        out.sort_by_key(|m| ns_key(&m.metadata));
        out
    }

    /// Removes an add-on from a cluster (its works go with it). An add-on with a pre-delete
    /// hook runs it first: the ManagedClusterAddOn stays, marked deleted, until it completes
    /// (its `HookManifestCompleted` condition says what it waits for). With `Placements`, a
    /// cluster a placement still selects gets it back once it is gone, as in OCM.
    pub async fn delete_cluster_addon(&self, cluster: &str, name: &str) -> Result<(), AddOnError> {
        let key = ObjectRef::new(cluster, name);
        if self.get_cluster_addon(cluster, name).is_none() {
            return Err(AddOnError::NotFound(format!("ManagedClusterAddOn {key}")));
        }
        self.remove_from(cluster, name).await.map(|_| ())
    }

    // ---- AddOnTemplate ----

    /// Creates or updates a template; add-ons using it roll the change out.
    pub async fn apply_template(&self, mut t: AddOnTemplate) -> Result<AddOnTemplate, AddOnError> {
        let errors = validate::addon_template(&t);
        if !errors.is_empty() {
            return Err(AddOnError::Invalid(errors));
        }
        let name = name_of(&t.metadata);
        let what = format!("AddOnTemplate {name}");
        let stored = self.inner.store.templates.get(&name).await?;
        check_version(&t.metadata, stored.as_ref().map(|s| s.1), &what)?;
        let spec_changed = stored.as_ref().is_none_or(|(s, _)| s.spec != t.spec);
        stamp(&mut t, stored.as_ref().map(|s| &s.0), spec_changed);
        let rev = self.inner.store.templates.put(&name, &t).await?;
        let t = with_rev(t, rev);
        self.inner.store.template_views.upsert(&name, t.clone());
        Ok(t)
    }

    /// One template.
    pub fn get_template(&self, name: &str) -> Option<Arc<AddOnTemplate>> {
        self.inner.store.template_views.get(name)
    }

    /// Every template.
    pub fn list_templates(&self) -> Vec<Arc<AddOnTemplate>> {
        let mut v = self.inner.store.template_views.snapshot();
        v.sort_by_key(|t| name_of(&t.metadata));
        v
    }

    /// Deletes a template that no add-on uses.
    pub async fn delete_template(&self, name: &str) -> Result<(), AddOnError> {
        if self.get_template(name).is_none() {
            return Err(AddOnError::NotFound(format!("AddOnTemplate {name}")));
        }
        let users = self.users_of(flotilla_api::addon::TEMPLATES, "", name);
        if !users.is_empty() {
            return Err(AddOnError::Invalid(vec![format!(
                "AddOnTemplate {name} is in use by {}: change their configs first",
                in_use_by(&users, |_| true)
            )]));
        }
        self.inner.store.templates.purge(name).await?;
        self.inner.store.template_views.remove(name);
        Ok(())
    }

    // ---- AddOnDeploymentConfig ----

    /// Creates or updates a deployment config; add-ons using it roll the change out.
    pub async fn apply_config(
        &self,
        mut c: AddOnDeploymentConfig,
    ) -> Result<AddOnDeploymentConfig, AddOnError> {
        let errors = validate::addon_deployment_config(&c);
        if !errors.is_empty() {
            return Err(AddOnError::Invalid(errors));
        }
        let key = ns_key(&c.metadata);
        let what = format!("AddOnDeploymentConfig {key}");
        let stored = self.inner.store.configs.get(&key.store_key()).await?;
        check_version(&c.metadata, stored.as_ref().map(|s| s.1), &what)?;
        let spec_changed = stored.as_ref().is_none_or(|(s, _)| s.spec != c.spec);
        stamp(&mut c, stored.as_ref().map(|s| &s.0), spec_changed);
        let rev = self.inner.store.configs.put(&key.store_key(), &c).await?;
        let c = with_rev(c, rev);
        self.inner
            .store
            .config_views
            .upsert(&key.inventory_key(), c.clone());
        Ok(c)
    }

    /// One deployment config.
    pub fn get_config(&self, namespace: &str, name: &str) -> Option<Arc<AddOnDeploymentConfig>> {
        self.inner
            .store
            .config_views
            .get(&ObjectRef::new(namespace, name).inventory_key())
    }

    /// Deployment configs of a namespace (every namespace when empty).
    pub fn list_configs(&self, namespace: &str) -> Vec<Arc<AddOnDeploymentConfig>> {
        let views = &self.inner.store.config_views;
        let mut v: Vec<_> = if namespace.is_empty() {
            views.snapshot()
        } else {
            views
                .with_prefix(&ObjectRef::prefix(namespace))
                .into_iter()
                .map(|(_, v)| v)
                .collect()
        };
        v.sort_by_key(|c| ns_key(&c.metadata));
        v
    }

    /// Deletes a deployment config that no add-on uses; the refusal names only the installed
    /// add-ons on clusters the caller `sees` (others are counted: issue 48 review r1 §10).
    pub async fn delete_config(
        &self,
        namespace: &str,
        name: &str,
        sees: impl Fn(&str) -> bool,
    ) -> Result<(), AddOnError> {
        let key = ObjectRef::new(namespace, name);
        if self.get_config(namespace, name).is_none() {
            return Err(AddOnError::NotFound(format!("AddOnDeploymentConfig {key}")));
        }
        let users = self.users_of(flotilla_api::addon::DEPLOYMENT_CONFIGS, namespace, name);
        if !users.is_empty() {
            return Err(AddOnError::Invalid(vec![format!(
                "AddOnDeploymentConfig {key} is in use by {}: change their configs first",
                in_use_by(&users, sees)
            )]));
        }
        self.inner.store.configs.purge(&key.store_key()).await?;
        self.inner.store.config_views.remove(&key.inventory_key());
        Ok(())
    }

    /// Who names a config: add-ons (defaults, placements) and installed add-ons (with their
    /// cluster).
    fn users_of(&self, resource: &str, namespace: &str, name: &str) -> Vec<User> {
        let matches = |g: &str, r: &str, ns: &str, n: &str| {
            g == flotilla_api::addon::GROUP && r == resource && ns == namespace && n == name
        };
        let mut users = Vec::new();
        for cma in self.list_addons() {
            let spec = cma.spec.clone().unwrap_or_default();
            let defaults = spec.supported_configs.iter().any(|c| {
                c.default_config
                    .as_ref()
                    .is_some_and(|d| matches(&c.group, &c.resource, &d.namespace, &d.name))
            });
            let placements = spec.install_strategy.iter().any(|s| {
                s.placements.iter().any(|p| {
                    p.configs
                        .iter()
                        .any(|c| matches(&c.group, &c.resource, &c.namespace, &c.name))
                })
            });
            if defaults || placements {
                let text = format!("ClusterManagementAddOn {}", name_of(&cma.metadata));
                users.push(User {
                    text,
                    cluster: None,
                });
            }
        }
        for mca in self.inner.store.cluster_addon_views.snapshot() {
            let spec = mca.spec.clone().unwrap_or_default();
            if spec
                .configs
                .iter()
                .any(|c| matches(&c.group, &c.resource, &c.namespace, &c.name))
            {
                let key = ns_key(&mca.metadata);
                users.push(User {
                    text: format!("ManagedClusterAddOn {key}"),
                    cluster: Some(key.namespace),
                });
            }
        }
        users
    }

    // ---- clusteradm addon enable / disable ----

    /// Installs `name` on `clusters` (ManagedClusterAddOns with `install_namespace`), or adds
    /// `placement` (`namespace/name`) to its install strategy, switching it to `Placements`.
    pub async fn enable(
        &self,
        name: &str,
        clusters: &[String],
        placement: &str,
        install_namespace: &str,
    ) -> Result<(Vec<ManagedClusterAddOn>, Option<ClusterManagementAddOn>), AddOnError> {
        let Some(cma) = self.get_addon(name) else {
            return Err(AddOnError::NotFound(format!(
                "ClusterManagementAddOn {name}"
            )));
        };
        match (clusters.is_empty(), placement.is_empty()) {
            (true, true) | (false, false) => {
                return Err(AddOnError::Invalid(vec![
                    "give either clusters or a placement".into(),
                ]));
            }
            _ => {}
        }
        if !placement.is_empty() {
            let Some((ns, pname)) = placement.split_once('/') else {
                return Err(AddOnError::Invalid(vec![format!(
                    "placement: {placement:?} is not namespace/name"
                )]));
            };
            let mut cma = (*cma).clone();
            let spec = cma.spec.get_or_insert_with(Default::default);
            let strategy = spec.install_strategy.get_or_insert_with(Default::default);
            strategy.r#type = "Placements".into();
            if !strategy
                .placements
                .iter()
                .any(|p| p.namespace == ns && p.name == pname)
            {
                strategy
                    .placements
                    .push(flotilla_api::v1::PlacementStrategy {
                        namespace: ns.into(),
                        name: pname.into(),
                        ..Default::default()
                    });
            }
            if let Some(m) = cma.metadata.as_mut() {
                m.resource_version = 0;
            }
            let cma = self.apply_addon(cma).await?;
            return Ok((Vec::new(), Some(cma)));
        }
        // Every cluster is checked before anything is created.
        let missing: Vec<_> = clusters
            .iter()
            .filter(|c| self.inner.deps.inventory.get(c).is_none())
            .map(|c| format!("clusters: no ManagedCluster {c:?}"))
            .collect();
        if !missing.is_empty() {
            return Err(AddOnError::Invalid(missing));
        }
        let mut created = Vec::new();
        for c in clusters {
            let existing = self.get_cluster_addon(c, name);
            let mut mca = existing
                .map(|m| (*m).clone())
                .unwrap_or_else(|| ManagedClusterAddOn {
                    metadata: Some(ObjectMeta {
                        name: name.into(),
                        namespace: c.clone(),
                        ..Default::default()
                    }),
                    ..Default::default()
                });
            if !install_namespace.is_empty() {
                mca.spec
                    .get_or_insert_with(Default::default)
                    .install_namespace = install_namespace.into();
            }
            if let Some(m) = mca.metadata.as_mut() {
                m.resource_version = 0;
            }
            created.push(self.apply_cluster_addon(mca).await?);
        }
        Ok((created, None))
    }

    /// Removes `name` from `clusters`, or from every cluster with `all` (its placements leave
    /// the install strategy, which becomes `Manual`).
    pub async fn disable(
        &self,
        name: &str,
        clusters: &[String],
        all: bool,
    ) -> Result<Vec<String>, AddOnError> {
        let Some(cma) = self.get_addon(name) else {
            return Err(AddOnError::NotFound(format!(
                "ClusterManagementAddOn {name}"
            )));
        };
        if all != clusters.is_empty() {
            return Err(AddOnError::Invalid(vec![
                "give either clusters or --all".into(),
            ]));
        }
        let mut removed = Vec::new();
        if all {
            let mut cma = (*cma).clone();
            if let Some(s) = cma.spec.as_mut().and_then(|s| s.install_strategy.as_mut())
                && (!s.placements.is_empty() || s.r#type == "Placements")
            {
                s.placements.clear();
                s.r#type = "Manual".into();
                if let Some(m) = cma.metadata.as_mut() {
                    m.resource_version = 0;
                }
                self.apply_addon(cma).await?;
            }
            for m in self.list_cluster_addons("", name) {
                let (cluster, _) = rules::key_of(&m);
                self.remove_from(&cluster, name).await?;
                removed.push(cluster);
            }
            return Ok(removed);
        }
        for c in clusters {
            if self.get_cluster_addon(c, name).is_some() {
                self.remove_from(c, name).await?;
                removed.push(c.clone());
            }
        }
        Ok(removed)
    }

    // ---- add-on agents ----

    /// Records `key` as the add-on agent's key on the ManagedClusterAddOn (compare-and-set,
    /// read again after a lost race, a few times).
    async fn record_agent_key(&self, cluster: &str, addon: &str, key: &str) {
        let store = &self.inner.store;
        let k = ObjectRef::new(cluster, addon);
        for _ in 0..10 {
            let Ok(Some((mut stored, rev))) = store.cluster_addons.get(&k.store_key()).await else {
                return;
            };
            stored
                .hub
                .get_or_insert_with(Default::default)
                .agent_public_key = key.to_string();
            if let Ok(rev) = store
                .cluster_addons
                .write(&k.store_key(), &stored, rev)
                .await
            {
                store
                    .cluster_addon_views
                    .upsert(&k.inventory_key(), with_rev(stored, rev));
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        tracing::warn!(cluster = %cluster, addon = %addon, "the add-on agent's key was not recorded");
    }

    /// NATS credentials for add-on `addon`'s agent key on `cluster` (secure mode): only for an
    /// installed add-on whose template asks for hub access. A new key replaces (and revokes)
    /// the one issued before.
    pub async fn issue_credentials(
        &self,
        cluster: &str,
        addon: &str,
        public_key: &str,
    ) -> Result<flotilla_api::v1::AddOnCredentialsResponse, CredentialsError> {
        let Some(mca) = self.get_cluster_addon(cluster, addon) else {
            return Err(CredentialsError::NotInstalled {
                addon: addon.into(),
                cluster: cluster.into(),
            });
        };
        if !self.needs_hub_access(&mca) {
            return Err(CredentialsError::NoHubAccess(addon.into()));
        }
        let Some(security) = &self.inner.deps.security else {
            return Err(CredentialsError::NotSecure);
        };
        let issued =
            security.issue(flotilla_auth::Subject::AddOn { addon, cluster }, public_key)?;
        let previous = mca
            .hub
            .as_ref()
            .map(|h| h.agent_public_key.clone())
            .unwrap_or_default();
        if !previous.is_empty() && previous != public_key {
            security
                .revoke(&[previous.as_str()])
                .await
                .map_err(CredentialsError::Revoke)?;
        }
        if previous != public_key {
            // Recorded (before answering) for the revocation when the add-on leaves; a status
            // write racing this one makes it read again.
            self.record_agent_key(cluster, addon, public_key).await;
        }
        let perms = flotilla_auth::permissions::addon(addon, cluster);
        Ok(flotilla_api::v1::AddOnCredentialsResponse {
            user_jwt: issued.jwt,
            expires: Some(prost_types::Timestamp {
                seconds: issued.expires_at,
                nanos: 0,
            }),
            message: String::new(),
            publish: perms.publish.allow,
            subscribe: perms.subscribe.allow,
        })
    }

    /// Whether an installed add-on's template asks for hub access: from its status, or — before
    /// the actor's first status write — from the template its work was rendered from (the agent
    /// asks as soon as it sees the work).
    fn needs_hub_access(&self, mca: &ManagedClusterAddOn) -> bool {
        if mca
            .status
            .as_ref()
            .is_some_and(|s| !s.registrations.is_empty())
        {
            return true;
        }
        let (cluster, name) = rules::key_of(mca);
        let work = self
            .inner
            .deps
            .works
            .get(
                &ObjectRef::new(&cluster, flotilla_api::addon::work_name(&name, 0)).inventory_key(),
            )
            .map(|w| w.to_work());
        rules::released(work.as_ref())
            .unwrap_or_default()
            .keys()
            .filter_map(|k| rules::parse_config_key(k))
            .filter(|(g, r, _, _)| {
                g == flotilla_api::addon::GROUP && r == flotilla_api::addon::TEMPLATES
            })
            .filter_map(|(_, _, _, n)| self.get_template(&n))
            .any(|t| t.spec.as_ref().is_some_and(|s| !s.registration.is_empty()))
    }

    /// A lease renewal of `addon` on `cluster` (from its agent). Tells the add-on's actor when
    /// the add-on's Available may change (first renewal, or one after the lease went stale).
    pub fn renew_lease(&self, cluster: &str, addon: &str, at: SystemTime) {
        let key = lease_key(cluster, addon);
        let previous = self.inner.store.leases.insert(key, at);
        let grace = self.inner.deps.config.lease_grace;
        let was_fresh = previous.is_some_and(|p| {
            flotilla_api::addon::health::lease_expires(p, grace) > SystemTime::now()
        });
        // Never waits on a busy actor (after a hub restart every agent's first renewal comes
        // at once): the renewal is recorded above, and a full mailbox means the actor has a
        // round coming anyway (at the latest its 30 s resync).
        if !was_fresh && let Some(tx) = self.inner.actors.get(addon) {
            let _ = tx.try_send(actor::Msg::Lease(cluster.to_string()));
        }
    }
}

/// Something that names a config: its words, and the cluster of an installed add-on.
struct User {
    text: String,
    cluster: Option<String>,
}

/// `users` in a refusal: those of clusters `sees` admits by name, the others counted only.
fn in_use_by(users: &[User], sees: impl Fn(&str) -> bool) -> String {
    let (shown, hidden): (Vec<&User>, Vec<&User>) = users
        .iter()
        .partition(|u| u.cluster.as_deref().is_none_or(&sees));
    let mut words: Vec<String> = shown.iter().map(|u| u.text.clone()).collect();
    match hidden.len() {
        0 => {}
        1 => words.push("1 ManagedClusterAddOn of a cluster you do not see".into()),
        n => words.push(format!(
            "{n} ManagedClusterAddOns of clusters you do not see"
        )),
    }
    words.join(", ")
}
