//! The add-ons' handle (I/O): [`AddOns`] starts an actor per stored ClusterManagementAddOn,
//! reaches an add-on's actor (or does its removal itself when the actor has ended) and stops
//! them all. Its calls per kind are in [`super::addons`], [`super::installs`],
//! [`super::templates`], [`super::configs`], [`super::enable`] and [`super::agents`].

use super::actor;
use super::deps::Deps;
use super::effects;
use super::error::AddOnError;
use super::meta::{name_of, with_rev};
use super::store::Store;
use dashmap::DashMap;
use flotilla_api::v1::ClusterManagementAddOn;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// How long the actors get to end when the add-ons stop.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// What every clone of the handle shares; its calls in the sibling modules reach it here.
pub(super) struct Inner {
    /// The stored objects.
    pub(super) store: Arc<Store>,
    /// Each add-on's actor by the add-on's name.
    pub(super) actors: DashMap<String, mpsc::Sender<actor::Msg>>,
    /// The actors' tasks, awaited by [`AddOns::stop`].
    tasks: crate::tasks::TaskGroup,
    /// What the actors work with.
    pub(super) deps: Deps,
}

/// The add-ons (cheap to clone).
#[derive(Clone)]
pub struct AddOns {
    pub(super) inner: Arc<Inner>,
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

    /// Starts the actor of `cma` (shown in the views at once).
    pub(super) fn spawn(&self, cma: ClusterManagementAddOn) {
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

    /// The actor of add-on `name`, unless it ended (a deleted add-on's, once everything went).
    pub(super) fn live_actor(&self, name: &str) -> Option<mpsc::Sender<actor::Msg>> {
        self.inner
            .actors
            .get(name)
            .map(|tx| tx.clone())
            .filter(|tx| !tx.is_closed())
    }

    /// Removes add-on `name` from `cluster` through its actor (which runs the pre-delete hook
    /// first, when the template has one), or directly when it has none.
    pub(super) async fn remove_from(
        &self,
        cluster: &str,
        name: &str,
    ) -> Result<effects::Removal, AddOnError> {
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
}
