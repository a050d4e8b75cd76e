//! One task per ClusterManagementAddOn. It reconciles when its placements' decisions, its
//! installed add-ons, their works, their clusters' availability, its templates or configs
//! change, when an agent's lease comes back, when the rollout or a lease asks to be looked at
//! again, and every 30 s:
//!
//! 1. with `installStrategy: Placements`, a ManagedClusterAddOn for every decided cluster and
//!    none elsewhere (as OCM, hand-made ones on clusters no placement selects go too);
//! 2. the effective configs of each installed add-on, resolved to the stored objects and their
//!    spec hashes;
//! 3. per placement, `flotilla_rollout::step` decides which clusters get the new configs now;
//!    those get their template rendered into `addon-<name>-deploy-0` (and `-1`, … when its
//!    manifests are more than one work carries), and clusters left halfway through a render
//!    (a manifest being handed over between works, a trailing work to delete) are carried on
//!    with ([`rules::works`]);
//! 4. every ManagedClusterAddOn's status (from its works, its lease, its cluster) and the add-on's
//!    install progressions are written when they changed (`actor/status.rs`).
//!
//! A round is incremental: each installation's entry (its configs resolved, its works and their
//! rollout status) is kept from the last round unless something it was gathered from changed
//! ([`Dirty`], from the change feeds), and a kept entry whose status needed no write is not
//! computed again while its rollout verdict and lease are the same ([`Settled`]). The plan
//! still sees every installation, from the kept entries.
//!
//! An add-on managed by someone else has a round of its own (`actor/external.rs`): no work, its
//! agents' leases (over NATS and on the spoke) for health.
//!
//! Installations being removed (marked deleted, waiting for their pre-delete hook) are carried
//! a step further every round, and a deleted add-on only removes its installations and then
//! itself (`actor/removal.rs`).

mod external;
mod removal;
mod status;

use removal::is_deleting;

use super::deps::Deps;
use super::dirty::{self, Dirty, Read};
use super::effects::{Removal, manifest_ids, sync_works};
use super::error::AddOnError;
use super::rules::plan::{self, Installation};
use super::rules::{self, AddOnKind, Lifecycle, Resolved};
use super::settled::Settled;
use super::store::Store;
use crate::keys::ObjectRef;
use flotilla_api::addon::{self, configs, health, render};
use flotilla_api::ocm;
use flotilla_api::v1::{
    AddOnConfig, AddOnDeploymentConfig, AddOnHubState, AddOnTemplate, ClusterManagementAddOn,
    InstallProgression, ManagedClusterAddOn, ManifestWork, ObjectMeta,
};
use flotilla_rollout::{GroupKey, Status};
use futures::StreamExt;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::{mpsc, oneshot};

/// Why an add-on's works cannot be rendered for a cluster (its installation's status says it).
#[derive(Debug, thiserror::Error)]
enum RenderFailure {
    /// The template the configs resolved to is no longer stored.
    #[error("the AddOnTemplate is gone")]
    TemplateGone,
    /// The template does not render with this cluster's values.
    #[error(transparent)]
    Render(#[from] render::RenderError),
    /// A manifest another add-on's work on the cluster declares too.
    #[error(
        "{what} (manifests[{index}] of work {work}) is already managed by add-on {owner} on this \
         cluster: declare it in one add-on only"
    )]
    Conflict {
        /// The manifest (kind, namespace, name).
        what: String,
        /// Its index in the work.
        index: usize,
        /// The work declaring it.
        work: String,
        /// The add-on whose work declares it already.
        owner: String,
    },
}

/// Messages to an add-on actor.
pub enum Msg {
    /// A new spec (or the same with new metadata).
    Spec(Box<ClusterManagementAddOn>),
    /// The add-on's agent on this cluster renewed a lease after none or a stale one.
    Lease(String),
    /// Remove the add-on from this cluster: its pre-delete hook first, when it has one
    /// ([`crate::addon::effects::uninstall`]); answers after the first step.
    Uninstall {
        /// The cluster.
        cluster: String,
        /// Removed, or waiting for its hook (the installation stays, marked deleted).
        done: oneshot::Sender<Result<Removal, AddOnError>>,
    },
    /// Delete the add-on: every ManagedClusterAddOn of it (hooks first) and their works, then
    /// the add-on itself; answers after the first step of each. The actor ends once everything
    /// is gone.
    Delete(oneshot::Sender<Removal>),
}

/// How often the actor reconciles without any event.
const RESYNC: Duration = Duration::from_secs(30);
/// How often a round gathers every installation again, whatever changed. Every input of an
/// entry has a change signal ([`super::dirty`]): this only bounds how long a signal missed by
/// mistake could leave an installation behind.
const FULL_ROUND: Duration = Duration::from_secs(300);
/// Works applied (and statuses written) at once.
const PARALLEL: usize = 32;

/// Starts the actor of `cma`.
pub fn spawn(
    cma: ClusterManagementAddOn,
    deps: Deps,
    store: Arc<Store>,
    tasks: &crate::tasks::TaskGroup,
) -> mpsc::Sender<Msg> {
    let (tx, rx) = mpsc::channel(256);
    let name = cma.metadata.clone().unwrap_or_default().name;
    // A hub restarted while the add-on was being deleted carries on deleting it.
    let deleting = cma
        .metadata
        .as_ref()
        .is_some_and(|m| m.deletion_timestamp.is_some());
    let actor = Actor {
        cma,
        deps,
        store,
        name: name.clone(),
        available: HashMap::new(),
        hashes: HashMap::new(),
        render_failed: HashMap::new(),
        entries: HashMap::new(),
        dirty: Dirty::default(),
        full_round: tokio::time::Instant::now() + FULL_ROUND,
        deleting,
        gone: false,
    };
    let span = tracing::info_span!("addon", name = %name);
    tasks.spawn(tracing::Instrument::instrument(actor.run(rx), span));
    tx
}

struct Actor {
    cma: ClusterManagementAddOn,
    deps: Deps,
    store: Arc<Store>,
    name: String,
    /// Each cluster's Available status as last seen (to react only to changes).
    available: HashMap<String, String>,
    /// Spec hashes of configs by (resource, key), with the revision they were computed at.
    hashes: HashMap<(String, String), (u64, String)>,
    /// Clusters whose work could not be rendered at these targets: since when, and why. They
    /// count as failed in the rollout (so `maxFailures` stops it) until the targets change.
    render_failed: HashMap<String, (rules::Hashes, SystemTime, String)>,
    /// Per cluster: its installation's entry as the last round left it, kept by the next one
    /// unless something it was gathered from changed. During a 10,000-cluster upgrade each wave
    /// changes a tenth of the works, and gathering every installation on every change was most
    /// of the hub's work.
    entries: HashMap<Arc<str>, Entry>,
    /// What changed since the last round, from the change feeds.
    dirty: Dirty,
    /// When a round gathers everything again ([`FULL_ROUND`]).
    full_round: tokio::time::Instant,
    /// The add-on is being deleted: its installations are removed, nothing is installed.
    deleting: bool,
    /// Everything of the add-on is gone: the actor ends.
    gone: bool,
}

/// One installed add-on as this round sees it (kept for the next while its inputs stay).
struct Entry {
    mca: Arc<ManagedClusterAddOn>,
    cluster: Arc<str>,
    /// Its agent works, by index.
    works: Vec<Arc<ManifestWork>>,
    /// Started at its target and not done moving to it ([`rules::works::unfinished`]).
    unfinished: bool,
    /// Index of the placement it belongs to (`None`: installed by hand).
    placement: Option<usize>,
    group: GroupKey,
    resolved: Result<Vec<Resolved>, Vec<String>>,
    /// The configs resolving read, found or not: a change to one gathers the entry again.
    reads: Vec<Read>,
    /// Its AddOnTemplate and AddOnDeploymentConfig among the resolved configs.
    template: Option<Arc<AddOnTemplate>>,
    config: Option<Arc<AddOnDeploymentConfig>>,
    /// Its template's health check, or why the template's annotation is wrong.
    mode: Result<health::Mode, String>,
    target: rules::Hashes,
    status: Status,
    since: Option<SystemTime>,
    render_error: Option<String>,
    waiting: bool,
    /// What its status was last computed from, when that status needed no write.
    settled: Option<Settled>,
}

impl Entry {
    /// Whether the entry was gathered from this ManagedClusterAddOn (the same object) and
    /// placement decision.
    fn gathered_from(
        &self,
        mca: &Arc<ManagedClusterAddOn>,
        owner: Option<(usize, &GroupKey)>,
    ) -> bool {
        Arc::ptr_eq(&self.mca, mca)
            && match owner {
                Some((i, group)) => self.placement == Some(i) && self.group == *group,
                None => self.placement.is_none() && self.group == GroupKey::default(),
            }
    }
}

impl Actor {
    async fn run(mut self, mut rx: mpsc::Receiver<Msg>) {
        let mut placements = self.deps.placements.subscribe();
        let mut works = self.deps.works.subscribe();
        let mut clusters = self.deps.inventory.subscribe();
        let mut installed = self.store.cluster_addon_views.subscribe();
        let mut templates = self.store.template_views.subscribe();
        let mut configs = self.store.config_views.subscribe();
        let mut next = Some(tokio::time::Instant::now());
        loop {
            let wake = next.unwrap_or_else(|| tokio::time::Instant::now() + RESYNC);
            let mut poke = false;
            tokio::select! {
                msg = rx.recv() => match msg {
                    Some(Msg::Spec(cma)) => {
                        self.cma = *cma;
                        self.dirty.everything();
                        next = Some(tokio::time::Instant::now());
                    }
                    Some(Msg::Lease(cluster)) => {
                        self.dirty.cluster(&cluster);
                        poke = true;
                    }
                    Some(Msg::Uninstall { cluster, done }) => {
                        let _ = done.send(self.uninstall(&cluster).await);
                        poke = true;
                    }
                    Some(Msg::Delete(done)) => {
                        let _ = done.send(self.cascade().await);
                        poke = true;
                    }
                    None => return,
                },
                change = placements.recv() => {
                    poke = match &change {
                        Ok(c) => self.placement_refs().any(|r| *c.key == *r),
                        Err(_) => true,
                    };
                }
                change = works.recv() => {
                    poke = match &change {
                        Ok(c) => self.dirty.work(&self.name, &c.key, c.object.metadata.as_ref()),
                        Err(_) => {
                            self.dirty.everything();
                            true
                        }
                    };
                }
                change = installed.recv() => {
                    poke = match &change {
                        Ok(c) => c.object.metadata.as_ref().is_some_and(|m| m.name == self.name),
                        Err(_) => true,
                    };
                }
                change = clusters.recv() => {
                    poke = match &change {
                        Ok(c) => {
                            let changed = self.availability_changed(&c.object);
                            let name = crate::inventory::name(&c.object);
                            self.dirty.cluster_changed(c.kind, name, changed);
                            changed
                        }
                        Err(_) => {
                            // What was seen of each cluster may be stale now.
                            self.available.clear();
                            self.dirty.everything();
                            true
                        }
                    };
                }
                change = templates.recv() => {
                    match &change {
                        Ok(c) => self.dirty.template(&c.key),
                        Err(_) => self.dirty.everything(),
                    }
                    poke = true;
                }
                change = configs.recv() => {
                    match &change {
                        Ok(c) => self.dirty.config(&c.key),
                        Err(_) => self.dirty.everything(),
                    }
                    poke = true;
                }
                () = tokio::time::sleep_until(wake) => {
                    next = self
                        .reconcile()
                        .await
                        .map(|d| tokio::time::Instant::now() + d.min(RESYNC));
                }
            }
            if self.gone {
                return;
            }
            if poke {
                next = Some(soon().min(next.unwrap_or_else(soon)));
            }
        }
    }

    fn spec(&self) -> flotilla_api::v1::ClusterManagementAddOnSpec {
        self.cma.spec.clone().unwrap_or_default()
    }

    fn by_placements(&self) -> bool {
        self.spec()
            .install_strategy
            .is_some_and(|s| s.r#type == "Placements")
    }

    fn placement_refs(&self) -> impl Iterator<Item = String> {
        self.spec()
            .install_strategy
            .map(|s| s.placements)
            .unwrap_or_default()
            .into_iter()
            .map(|p| ObjectRef::new(p.namespace, p.name).inventory_key())
    }

    /// Whether a cluster with this add-on changed what its installation reads of it
    /// ([`dirty::cluster_view`]: its Available status, and the reason and message when it is
    /// Unknown) or what its agent reports of the add-on's spoke Lease.
    fn availability_changed(&mut self, c: &flotilla_api::v1::ManagedCluster) -> bool {
        let name = crate::inventory::name(c).to_string();
        if self
            .store
            .cluster_addon_views
            .get(&ObjectRef::new(&name, &self.name).inventory_key())
            .is_none()
        {
            // Not followed while not installed: the next change after an installation counts.
            self.available.remove(&name);
            return false;
        }
        let now = dirty::cluster_view(c, &self.name);
        self.available.insert(name, now.clone()).as_deref() != Some(now.as_str())
    }

    /// A config's spec hash (cached by revision), or `None` when it does not exist.
    fn resolve(&mut self, c: &AddOnConfig) -> Option<(String, i64)> {
        let (rev, generation, value) = match (c.group.as_str(), c.resource.as_str()) {
            (addon::GROUP, addon::TEMPLATES) => {
                let t = self.store.template_views.get(&c.name)?;
                let m = t.metadata.clone().unwrap_or_default();
                (m.resource_version, m.generation, Value::Template(t))
            }
            (addon::GROUP, addon::DEPLOYMENT_CONFIGS) => {
                let x = self
                    .store
                    .config_views
                    .get(&ObjectRef::new(&c.namespace, &c.name).inventory_key())?;
                let m = x.metadata.clone().unwrap_or_default();
                (m.resource_version, m.generation, Value::Config(x))
            }
            _ => return None,
        };
        let key = (
            c.resource.clone(),
            ObjectRef::new(&c.namespace, &c.name).inventory_key(),
        );
        if let Some((r, h)) = self.hashes.get(&key)
            && *r == rev
        {
            return Some((h.clone(), generation));
        }
        let json = match value {
            Value::Template(t) => serde_json::to_value(ocm::AddOnTemplate::from(&*t)),
            Value::Config(x) => serde_json::to_value(ocm::AddOnDeploymentConfig::from(&*x)),
        }
        .ok()?;
        let hash = addon::hash::spec_hash(&json);
        self.hashes.insert(key, (rev, hash.clone()));
        Some((hash, generation))
    }

    /// The effective configs of one installed add-on, resolved.
    fn resolved(
        &mut self,
        mca: &ManagedClusterAddOn,
        placement: Option<usize>,
    ) -> Result<Vec<Resolved>, Vec<String>> {
        self.resolved_reading(mca, placement, &mut Vec::new())
    }

    /// [`Self::resolved`], adding to `reads` every config it looked for, found or not.
    fn resolved_reading(
        &mut self,
        mca: &ManagedClusterAddOn,
        placement: Option<usize>,
        reads: &mut Vec<Read>,
    ) -> Result<Vec<Resolved>, Vec<String>> {
        let strategy = placement.and_then(|i| {
            self.cma
                .spec
                .as_ref()
                .and_then(|s| s.install_strategy.as_ref())
                .and_then(|s| s.placements.get(i))
        });
        let effective = configs::effective(&self.cma, strategy, mca)?;
        reads.extend(effective.iter().filter_map(Read::of));
        let mut errors = Vec::new();
        let mut out = Vec::new();
        for c in effective {
            match self.resolve(&c) {
                Some((hash, generation)) => out.push(Resolved {
                    config: c,
                    hash,
                    generation,
                }),
                None => errors.push(format!(
                    "config {}/{} {}: not found",
                    c.resource,
                    c.group,
                    ObjectRef::new(&c.namespace, &c.name)
                )),
            }
        }
        let templates = out
            .iter()
            .filter(|r| r.config.group == addon::GROUP && r.config.resource == addon::TEMPLATES)
            .count();
        if templates == 0 && errors.is_empty() {
            errors.push(format!(
                "no AddOnTemplate among the configs: give {}/{} a defaultConfig in spec.supportedConfigs, or a config per placement or cluster",
                addon::GROUP,
                addon::TEMPLATES
            ));
        } else if templates > 1 {
            errors.push("more than one AddOnTemplate among the configs".into());
        }
        if errors.is_empty() {
            Ok(out)
        } else {
            Err(errors)
        }
    }

    fn template_of(&self, resolved: &[Resolved]) -> Option<Arc<AddOnTemplate>> {
        resolved
            .iter()
            .find(|r| r.config.group == addon::GROUP && r.config.resource == addon::TEMPLATES)
            .and_then(|r| self.store.template_views.get(&r.config.name))
    }

    fn deployment_config_of(&self, resolved: &[Resolved]) -> Option<Arc<AddOnDeploymentConfig>> {
        // OCM renders with the first config of a group/resource (`GetAddOnConfigRef`).
        resolved
            .iter()
            .find(|r| {
                r.config.group == addon::GROUP && r.config.resource == addon::DEPLOYMENT_CONFIGS
            })
            .and_then(|r| {
                self.store
                    .config_views
                    .get(&ObjectRef::new(&r.config.namespace, &r.config.name).inventory_key())
            })
    }

    /// Creates and removes ManagedClusterAddOns as the placements decide; returns each decided
    /// cluster's placement index and decision group. Nothing for a `Manual` add-on, nor for
    /// one whose lifecycle is `self` (its own manager makes the ManagedClusterAddOns).
    async fn follow_placements(&mut self) -> BTreeMap<String, (usize, GroupKey)> {
        let mut owner = BTreeMap::new();
        if !self.by_placements() || rules::lifecycle_of(&self.cma) == Lifecycle::SelfManaged {
            return owner;
        }
        let strategy = self.spec().install_strategy.unwrap_or_default();
        let mut complete = true;
        for (i, p) in strategy.placements.iter().enumerate() {
            match self.deps.placements.get(&p.namespace, &p.name) {
                Some(view) => {
                    for (c, group) in view.decided_by_group() {
                        owner.insert(c, (i, group));
                    }
                }
                None => complete = false,
            }
        }
        for (cluster, (i, _)) in &owner {
            if self.deps.inventory.get(cluster).is_none() {
                continue;
            }
            let key = ObjectRef::new(cluster, &self.name);
            if self
                .store
                .cluster_addon_views
                .get(&key.inventory_key())
                .is_some()
            {
                continue;
            }
            let p = &strategy.placements[*i];
            let mut mca = ManagedClusterAddOn {
                metadata: Some(ObjectMeta {
                    name: self.name.clone(),
                    namespace: cluster.clone(),
                    ..Default::default()
                }),
                spec: Some(Default::default()),
                status: None,
                hub: Some(AddOnHubState {
                    placement: ObjectRef::new(&p.namespace, &p.name).to_string(),
                    ..Default::default()
                }),
            };
            if let Some(m) = mca.metadata.as_mut() {
                crate::identity::create(m);
            }
            match self
                .store
                .cluster_addons
                .write(&key.store_key(), &mca, 0)
                .await
            {
                Ok(rev) => {
                    if let Some(m) = mca.metadata.as_mut() {
                        m.resource_version = rev;
                    }
                    tracing::info!(cluster = %cluster, "installing the add-on (selected by {}/{})", p.namespace, p.name);
                    self.store
                        .cluster_addon_views
                        .upsert(&key.inventory_key(), mca);
                }
                Err(e) => {
                    tracing::warn!(cluster = %cluster, error = %e, "creating the ManagedClusterAddOn failed; retrying")
                }
            }
        }
        if complete {
            for mca in self.store.installed(&self.name) {
                let (cluster, _) = rules::key_of(&mca);
                if !owner.contains_key(&cluster) && !is_deleting(&mca) {
                    tracing::info!(cluster = %cluster, "no placement selects the cluster; removing the add-on");
                    if let Err(e) = self.uninstall(&cluster).await {
                        tracing::warn!(cluster = %cluster, error = %e, "removing the add-on failed");
                    }
                }
            }
        }
        owner
    }

    /// One reconciliation; returns when to look again.
    async fn reconcile(&mut self) -> Option<Duration> {
        let now = SystemTime::now();
        let mut dirty = std::mem::take(&mut self.dirty);
        if tokio::time::Instant::now() >= self.full_round {
            dirty.everything();
            self.full_round = tokio::time::Instant::now() + FULL_ROUND;
        }
        if self.deleting {
            self.entries.clear();
            return self.reconcile_deleting().await;
        }
        let owner = self.follow_placements().await;
        let mut recheck = Recheck::default();
        self.finish_removals(&mut recheck).await;
        if rules::kind_of(&self.cma) == AddOnKind::External {
            self.entries.clear();
            return self.reconcile_external(now, recheck).await;
        }
        let installed = self.store.installed(&self.name);
        self.unwatch_leases(&installed).await;
        let placements = self
            .spec()
            .install_strategy
            .map(|s| s.placements)
            .unwrap_or_default();
        let mut entries = self.gather(&installed, &owner, &dirty).await;
        let (mut starts, progressions) = self.plan(&placements, &mut entries, now, &mut recheck);
        // Started before and not done: carried on with, whatever the rollout decides now.
        starts.extend((0..entries.len()).filter(|&i| entries[i].unfinished));
        self.start(&mut entries, &starts, now, &mut recheck).await;
        let writes = self.statuses(&mut entries, now, &mut recheck);
        self.write_statuses(writes, &mut recheck).await;
        self.write_own_status(progressions).await;
        self.entries = entries
            .into_iter()
            .map(|e| (e.cluster.clone(), e))
            .collect();
        recheck.0
    }

    /// Every installed add-on, its configs resolved and its work's rollout status: the entry
    /// the last round left when nothing it was gathered from changed since (`dirty`), gathered
    /// again otherwise. The add-ons of deleted clusters are removed.
    async fn gather(
        &mut self,
        installed: &[Arc<ManagedClusterAddOn>],
        owner: &BTreeMap<String, (usize, GroupKey)>,
        dirty: &Dirty,
    ) -> Vec<Entry> {
        let mut kept = std::mem::take(&mut self.entries);
        let mut entries = Vec::with_capacity(installed.len());
        for mca in installed {
            if is_deleting(mca) {
                continue; // being removed: `finish_removals`
            }
            let cluster = rules::cluster_of(mca);
            let decided = owner.get(cluster).map(|(i, g)| (*i, g));
            if let Some(e) = kept.remove(cluster)
                && e.gathered_from(mca, decided)
                && !dirty.touches(cluster, &e.reads)
            {
                entries.push(e);
                continue;
            }
            if self.deps.inventory.get(cluster).is_none() {
                // The cluster was deleted: its works went with it.
                if let Err(e) = self.uninstall(cluster).await {
                    tracing::warn!(cluster = %cluster, error = %e, "removing the add-on of a deleted cluster failed");
                }
                continue;
            }
            let entry = self.entry(mca.clone(), cluster, decided);
            entries.push(entry);
        }
        tracing::debug!(
            installations = entries.len(),
            everything = dirty.is_everything(),
            "gathered"
        );
        entries
    }

    /// One installation gathered: its configs resolved, its works and their rollout status.
    fn entry(
        &mut self,
        mca: Arc<ManagedClusterAddOn>,
        cluster: &str,
        decided: Option<(usize, &GroupKey)>,
    ) -> Entry {
        let (placement, group) = match decided {
            Some((i, g)) => (Some(i), g.clone()),
            None => (None, GroupKey::default()),
        };
        let works = self.works_of(cluster);
        let refs: Vec<&ManifestWork> = works.iter().map(|w| &**w).collect();
        let mut reads = Vec::new();
        let resolved = self.resolved_reading(&mca, placement, &mut reads);
        let target = resolved
            .as_ref()
            .map(|r| rules::hashes(r))
            .unwrap_or_default();
        let (mut status, mut since) = match &resolved {
            Ok(_) => rules::rollout_status(&refs, &target),
            Err(_) => (Status::Skip, None),
        };
        let unfinished = resolved.is_ok() && rules::works::unfinished(&refs, &target);
        let mut render_error = None;
        if (status == Status::ToApply || unfinished)
            && let Some((t, at, why)) = self.render_failed.get(cluster)
            && *t == target
        {
            (status, since) = (Status::Failed, Some(*at));
            render_error = Some(why.clone());
        }
        let template = resolved.as_ref().ok().and_then(|r| self.template_of(r));
        let config = resolved
            .as_ref()
            .ok()
            .and_then(|r| self.deployment_config_of(r));
        let mode = match &template {
            Some(t) => health::mode_of(t),
            None => Ok(health::Mode::WorkStatus),
        };
        Entry {
            mca,
            cluster: cluster.into(),
            works,
            unfinished,
            placement,
            group,
            resolved,
            reads,
            template,
            config,
            mode,
            target,
            status,
            since,
            render_error,
            waiting: false,
            settled: None,
        }
    }

    /// The add-on's agent works on `cluster`, by index.
    fn works_of(&self, cluster: &str) -> Vec<Arc<ManifestWork>> {
        let all = self.deps.works.with_prefix(&ObjectRef::prefix(cluster));
        // Statuses are held encoded: only this add-on's works (by name) are decoded.
        let mine = all
            .into_iter()
            .filter(|(key, _)| {
                key.split_once('/')
                    .is_some_and(|(_, n)| addon::work_index(&self.name, n).is_some())
            })
            .map(|(_, w)| Arc::new(w.to_work()));
        rules::works::deploy_works(&self.name, mine)
    }

    /// The rollout plan ([`plan::plan`]): marks who waits, returns who starts now and each
    /// placement's install progression.
    fn plan(
        &self,
        placements: &[flotilla_api::v1::PlacementStrategy],
        entries: &mut [Entry],
        now: SystemTime,
        recheck: &mut Recheck,
    ) -> (Vec<usize>, Vec<InstallProgression>) {
        let installations: Vec<Installation> = entries
            .iter()
            .map(|e| Installation {
                cluster: e.cluster.to_string(),
                placement: e.placement,
                group: e.group.clone(),
                status: e.status,
                since: e.since,
            })
            .collect();
        let plan = plan::plan(placements, &installations, now);
        recheck.merge(plan.recheck);
        for (i, errors) in &plan.refused {
            tracing::warn!(placement = i, errors = ?errors, "rollout strategy refused");
        }
        for (e, waiting) in entries.iter_mut().zip(&plan.waiting) {
            e.waiting = *waiting;
        }
        let defaults = self.default_refs();
        let hash = |resource: &str, namespace: &str, name: &str| {
            self.config_hash(resource, namespace, name)
        };
        let progressions: Vec<InstallProgression> = plan
            .rounds
            .iter()
            .map(|r| {
                let p = &placements[r.placement];
                plan::progression(&plan::ProgressionInput {
                    placement: p,
                    installations: &installations,
                    round: r,
                    defaults: &defaults,
                    hash: &hash,
                    previous: self.cma.status.as_ref().and_then(|s| {
                        s.install_progressions
                            .iter()
                            .find(|x| x.namespace == p.namespace && x.name == p.name)
                    }),
                })
            })
            .collect();
        (plan.start, progressions)
    }

    /// Renders the works of the installations whose turn it is (or that are carried on with)
    /// and moves each cluster to them ([`sync_works`]).
    async fn start(
        &mut self,
        entries: &mut [Entry],
        starts: &[usize],
        now: SystemTime,
        recheck: &mut Recheck,
    ) {
        let mut jobs = Vec::new();
        for &i in starts {
            let e = &entries[i];
            // Its render failure, its works, its rollout status change: gathered again next
            // round.
            self.dirty.cluster(&e.cluster);
            let Ok(resolved) = &e.resolved else { continue };
            match self.render(e, resolved) {
                Ok(works) => {
                    self.render_failed.remove(&*e.cluster);
                    jobs.push((i, works));
                }
                Err(failure) => {
                    tracing::warn!(cluster = %e.cluster, error = %failure, "the add-on's works cannot be rendered");
                    // Kept as the installation's status message.
                    let msg = failure.to_string();
                    self.render_failed
                        .insert(e.cluster.to_string(), (e.target.clone(), now, msg.clone()));
                    let e = &mut entries[i];
                    e.render_error = Some(msg);
                    e.status = Status::Failed;
                    e.since = Some(now);
                    // The progression counts it at the next round.
                    recheck.at(Duration::from_millis(200));
                }
            }
        }
        let (deps, name) = (&self.deps, self.name.as_str());
        let results: Vec<_> = futures::stream::iter(jobs.into_iter().map(|(i, desired)| {
            let cluster = entries[i].cluster.clone();
            let current = entries[i].works.clone();
            async move { (i, sync_works(deps, &cluster, name, desired, current).await) }
        }))
        .buffer_unordered(PARALLEL)
        .collect()
        .await;
        for (i, r) in results {
            let e = &mut entries[i];
            let moved = match r {
                Ok(moved) => moved,
                Err(err) => {
                    tracing::warn!(cluster = %e.cluster, error = %err, "applying the add-on's works failed; retrying");
                    recheck.at(Duration::from_secs(2));
                    continue;
                }
            };
            if moved.held {
                // A hand-over waits for the agent: its status change pokes the actor too.
                recheck.at(Duration::from_secs(1));
            }
            let refs: Vec<&ManifestWork> = moved.works.iter().map(|w| &**w).collect();
            (e.status, e.since) = rules::rollout_status(&refs, &e.target);
            e.works = moved.works;
        }
    }

    fn render_input<'a>(
        &'a self,
        cluster: &'a str,
        mca: &'a ManagedClusterAddOn,
        template: &'a AddOnTemplate,
        config: Option<&'a AddOnDeploymentConfig>,
        hashes: &'a rules::Hashes,
    ) -> render::Input<'a> {
        render::Input {
            addon: &self.name,
            cluster,
            install_namespace: mca
                .spec
                .as_ref()
                .map(|s| s.install_namespace.as_str())
                .unwrap_or(""),
            template,
            config,
            hub_url: &self.deps.config.hub_url,
            config_hashes: hashes,
            ensure_namespace: true,
        }
    }

    /// The works of one cluster at its effective configs, checked against the works of other
    /// add-ons on the cluster.
    fn render(&self, e: &Entry, resolved: &[Resolved]) -> Result<Vec<ManifestWork>, RenderFailure> {
        let template = self
            .template_of(resolved)
            .ok_or(RenderFailure::TemplateGone)?;
        let config = self.deployment_config_of(resolved);
        let input = self.render_input(&e.cluster, &e.mca, &template, config.as_deref(), &e.target);
        let mut works = render::render(&input)?;
        let hub_access = template
            .spec
            .as_ref()
            .is_some_and(|s| !s.registration.is_empty());
        let namespace = render::install_namespace(&input);
        for m in works.iter_mut().filter_map(|w| w.metadata.as_mut()) {
            // Keep the annotation the rollout compares with exactly what the targets are.
            m.annotations.insert(
                addon::CONFIG_SPEC_HASH_ANNOTATION.to_string(),
                rules::annotation(&e.target),
            );
            // Hub access: a secure-mode agent puts the add-on's credentials in this Secret.
            if hub_access {
                m.annotations.insert(
                    addon::HUB_CREDENTIALS_SECRET_ANNOTATION.to_string(),
                    addon::hub_credentials_secret_name(&self.name),
                );
                m.annotations.insert(
                    addon::INSTALL_NAMESPACE_ANNOTATION.to_string(),
                    namespace.clone(),
                );
            }
        }
        self.check_conflicts(&e.cluster, &works)?;
        Ok(works)
    }

    /// Refuses works declaring a resource another add-on's work on the cluster declares.
    fn check_conflicts(&self, cluster: &str, works: &[ManifestWork]) -> Result<(), RenderFailure> {
        let mine: Vec<(String, usize, flotilla_api::work::ManifestId)> = works
            .iter()
            .flat_map(|w| {
                let name = w
                    .metadata
                    .as_ref()
                    .map(|m| m.name.clone())
                    .unwrap_or_default();
                manifest_ids(w)
                    .into_iter()
                    .map(move |(i, id)| (name.clone(), i, id))
            })
            // Namespaces are shared by add-ons (they are orphaned, never deleted, by each).
            .filter(|(_, _, id)| id.kind != "Namespace")
            .collect();
        if mine.is_empty() {
            return Ok(());
        }
        for (_, other) in self.deps.works.with_prefix(&ObjectRef::prefix(cluster)) {
            let Some(owner) = other
                .metadata
                .as_ref()
                .and_then(|m| m.labels.get(addon::ADDON_NAME_LABEL))
            else {
                continue;
            };
            if *owner == self.name {
                continue;
            }
            let theirs = manifest_ids(&other.to_work());
            for (work, i, id) in &mine {
                if theirs.iter().any(|(_, t)| t == id) {
                    return Err(RenderFailure::Conflict {
                        what: id.describe(),
                        index: *i,
                        work: work.clone(),
                        owner: owner.clone(),
                    });
                }
            }
        }
        Ok(())
    }

    /// A config's spec hash as last resolved (empty when not known).
    fn config_hash(&self, resource: &str, namespace: &str, name: &str) -> String {
        self.hashes
            .get(&(
                resource.to_string(),
                ObjectRef::new(namespace, name).inventory_key(),
            ))
            .map(|(_, h)| h.clone())
            .unwrap_or_default()
    }
}

/// The soonest time a round asked to be looked at again.
#[derive(Default)]
struct Recheck(Option<Duration>);

impl Recheck {
    fn at(&mut self, d: Duration) {
        self.0 = Some(self.0.map_or(d, |r| r.min(d)));
    }

    fn merge(&mut self, d: Option<Duration>) {
        if let Some(d) = d {
            self.at(d);
        }
    }
}

enum Value {
    Template(Arc<AddOnTemplate>),
    Config(Arc<AddOnDeploymentConfig>),
}

fn soon() -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_millis(100)
}
