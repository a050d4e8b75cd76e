//! The grants in force on this hub (docs/notes/issue-48-design.md §4.1, §8.4): the current
//! grants file (replaced whole when it is reloaded), the set index, and each principal's
//! scope computed once per grants generation and set-id table, shared by all its calls.
//! Every surface — the gRPC gate and services, the cluster proxy, the dashboard — holds the
//! same [`Live`], so a reload applies to the next call everywhere; watches subscribe and
//! filter again.

use super::index::SetIndexView;
use super::scope::Scope;
use super::{FleetRole, Grants, Principal};
use crate::setindex::SetIndex;
use dashmap::DashMap;
use std::sync::Arc;
use tokio::sync::watch;

/// Principals whose scopes are kept; past this the cache starts again (OIDC users are many).
pub const SCOPES_MAX: usize = 10_000;

/// One generation of the grants.
#[derive(Debug, Default)]
pub struct Current {
    /// Counts reloads: scopes of another generation are stale.
    pub generation: u64,
    /// The grants.
    pub grants: Arc<Grants>,
}

type Key = (Principal, Option<FleetRole>);

struct Cached {
    generation: u64,
    table: (u64, usize),
    scope: Arc<Scope>,
}

/// The grants in force, the set index, and the scopes of the principals seen.
#[derive(Clone)]
pub struct Live {
    grants: Arc<watch::Sender<Arc<Current>>>,
    index: SetIndex,
    scopes: Arc<DashMap<Key, Cached>>,
    /// The grants file they come from, followed while the hub runs.
    file: Option<Arc<std::path::Path>>,
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let current = self.grants.borrow();
        write!(
            f,
            "Live(generation {}, {} subjects)",
            current.generation,
            current.grants.subjects()
        )
    }
}

impl Default for Live {
    fn default() -> Self {
        Self::new(Grants::none())
    }
}

impl Live {
    /// `grants` in force, over an empty set index until [`Live::with_index`].
    pub fn new(grants: Grants) -> Self {
        let (tx, _) = watch::channel(Arc::new(Current {
            generation: 0,
            grants: Arc::new(grants),
        }));
        Self {
            grants: Arc::new(tx),
            index: SetIndex::new(),
            scopes: Arc::new(DashMap::new()),
            file: None,
        }
    }

    /// The same grants, read from `path` (followed while the hub runs:
    /// [`super::source::Follower`]).
    pub fn from_file(self, path: &std::path::Path) -> Self {
        Self {
            file: Some(path.into()),
            ..self
        }
    }

    /// The grants file, if any.
    pub fn file(&self) -> Option<&std::path::Path> {
        self.file.as_deref()
    }

    /// The same grants over `index` (the hub's set index).
    pub fn with_index(self, index: SetIndex) -> Self {
        self.scopes.clear();
        Self { index, ..self }
    }

    /// The set index.
    pub fn index(&self) -> &SetIndex {
        &self.index
    }

    /// The current grants.
    pub fn current(&self) -> Arc<Current> {
        self.grants.borrow().clone()
    }

    /// Puts `grants` in force (a reload): every scope is computed again on its next call, and
    /// watchers are told.
    pub fn replace(&self, grants: Grants) {
        self.grants.send_modify(|c| {
            *c = Arc::new(Current {
                generation: c.generation + 1,
                grants: Arc::new(grants),
            })
        });
        self.scopes.clear();
    }

    /// Reloads of the grants, for watchers.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Current>> {
        self.grants.subscribe()
    }

    /// The scope of `principal` whose authentication gave it the fleet role `base` (a CSV
    /// token's role), under the current grants, its masks built against `view`'s sets.
    pub fn scope_in(
        &self,
        principal: &Principal,
        base: Option<FleetRole>,
        view: &SetIndexView,
    ) -> Arc<Scope> {
        let current = self.current();
        let ids = view.ids();
        let table = ids.key();
        let key = (principal.clone(), base);
        if let Some(cached) = self.scopes.get(&key)
            && cached.generation == current.generation
            && cached.table == table
        {
            return cached.scope.clone();
        }
        let scope = Arc::new(Scope::of(&current.grants, principal, base, ids));
        if self.scopes.len() >= SCOPES_MAX {
            self.scopes.clear();
        }
        self.scopes.insert(
            key,
            Cached {
                generation: current.generation,
                table,
                scope: scope.clone(),
            },
        );
        scope
    }

    /// [`Live::scope_in`] the current set index.
    pub fn scope(&self, principal: &Principal, base: Option<FleetRole>) -> Arc<Scope> {
        self.scope_in(principal, base, &self.index.current())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grants::file::{Builder, user};
    use crate::grants::{SetRole, Via};

    #[test]
    fn scopes_are_shared_until_the_grants_or_the_set_table_change() {
        let grants = Builder::default()
            .set("team-a", SetRole::Admin, user("ana"))
            .build();
        let live = Live::new(grants);
        let ana = Principal::user("ana", Via::Token);
        let first = live.scope(&ana, None);
        assert!(Arc::ptr_eq(&first, &live.scope(&ana, None)));
        assert_eq!(first.set_role("team-a"), Some(SetRole::Admin));

        let view = SetIndexView::build(1, 1, ["team-a"], [("c1", vec!["team-a"])]).unwrap();
        live.index().publish(view);
        let masked = live.scope(&ana, None);
        assert!(!Arc::ptr_eq(&first, &masked), "a new set table: new masks");
        assert!(masked.sees_mask(live.index().current().ids()).is_some());

        let rx = live.subscribe();
        live.replace(Grants::none());
        assert!(rx.has_changed().unwrap());
        assert_eq!(live.scope(&ana, None).set_role("team-a"), None);
        assert_eq!(live.current().generation, 1);
    }
}
