//! One task per ClusterManagementAddOn. It reconciles when its placements' decisions, its
//! installed add-ons, their works, their clusters' availability, its templates or configs
//! change, when an agent's lease comes back, when the rollout or a lease asks to be looked at
//! again, and every 30 s:
//!
//! 1. with `installStrategy: Placements`, a ManagedClusterAddOn for every decided cluster and
//!    none elsewhere (as OCM, hand-made ones on clusters no placement selects go too;
//!    `actor/placements.rs`);
//! 2. the effective configs of each installed add-on, resolved to the stored objects and their
//!    spec hashes (`actor/configs.rs`);
//! 3. per placement, `flotilla_rollout::step` decides which clusters get the new configs now;
//!    those get their template rendered into `addon-<name>-deploy-0` (and `-1`, … when its
//!    manifests are more than one work carries), and clusters left halfway through a render
//!    (a manifest being handed over between works, a trailing work to delete) are carried on
//!    with ([`rules::works`]; `actor/rollout.rs`, rendering in `actor/render.rs`);
//! 4. every ManagedClusterAddOn's status (from its works, its lease, its cluster) and the add-on's
//!    install progressions are written when they changed (`actor/status.rs`).
//!
//! A round is incremental: each installation's entry (its configs resolved, its works and their
//! rollout status) is kept from the last round unless something it was gathered from changed
//! ([`Dirty`], from the change feeds; `actor/gather.rs`), and a kept entry whose status needed
//! no write is not computed again while its rollout verdict and lease are the same
//! ([`Settled`]). The plan still sees every installation, from the kept entries.
//!
//! An add-on managed by someone else has a round of its own (`actor/external.rs`): no work, its
//! agents' leases (over NATS and on the spoke) for health.
//!
//! Installations being removed (marked deleted, waiting for their pre-delete hook) are carried
//! a step further every round, and a deleted add-on only removes its installations and then
//! itself (`actor/removal.rs`).

mod configs;
mod external;
mod gather;
mod placements;
mod removal;
mod render;
mod rollout;
mod status;

use super::deps::Deps;
use super::dirty::{self, Dirty, Read};
use super::effects::Removal;
use super::error::AddOnError;
use super::rules::{self, AddOnKind, Resolved};
use super::settled::Settled;
use super::store::Store;
use crate::keys::ObjectRef;
use flotilla_api::addon::health;
use flotilla_api::v1::{
    AddOnDeploymentConfig, AddOnTemplate, ClusterManagementAddOn, ManagedClusterAddOn, ManifestWork,
};
use flotilla_rollout::{GroupKey, Status};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::{mpsc, oneshot};

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

fn soon() -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_millis(100)
}
