//! What one principal holds under the current grants (pure): the highest role on each target,
//! and the masks of the sets it sees and administers against the set index's id table, so
//! that list and watch filters test a cluster with a few word ANDs
//! (docs/notes/issue-48-design.md §3.3, §6.2).

use super::index::{SetIds, SetMask};
use super::{FleetRole, Grant, Grants, Held, NamespaceRole, Principal, SetRole};
use std::collections::BTreeMap;
use std::sync::Arc;

/// What a principal holds, computed once per (grants, principal) and shared by its calls.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scope {
    /// The fleet-wide role: the CSV token's role and the file's fleet grants, the higher one.
    pub fleet: Option<FleetRole>,
    /// The role held on each cluster set.
    pub sets: BTreeMap<Arc<str>, SetRole>,
    /// The role held on each namespace.
    pub namespaces: BTreeMap<Arc<str>, NamespaceRole>,
    masks: Option<Masks>,
}

/// The scope's sets as masks over one id table.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Masks {
    /// The table they were built against: its generation and size.
    table: (u64, usize),
    sees: SetMask,
    admins: SetMask,
}

impl Scope {
    /// The scope of `principal` under `grants`, with `base` as its fleet role from
    /// authentication (a CSV token's role), masks built against `ids`.
    pub fn of(
        grants: &Grants,
        principal: &Principal,
        base: Option<FleetRole>,
        ids: &SetIds,
    ) -> Self {
        Self::from_held(grants.held_by(principal), base, ids)
    }

    /// The scope of what `held` says, with `base` as its fleet role from authentication.
    pub fn from_held(held: Held, base: Option<FleetRole>, ids: &SetIds) -> Self {
        let mut scope = Self {
            fleet: held.fleet.max(base),
            sets: held.sets,
            namespaces: held.namespaces,
            masks: None,
        };
        scope.index(ids);
        scope
    }

    /// A fleet-wide scope (the CSV roles with no grants-file entries; [`FleetRole::Admin`] for
    /// an open hub).
    pub fn fleet(role: FleetRole) -> Self {
        Self {
            fleet: Some(role),
            ..Self::default()
        }
    }

    /// Everything: fleet admin.
    pub fn all() -> Self {
        Self::fleet(FleetRole::Admin)
    }

    /// (Re)builds the masks against `ids` (the set index's table changed).
    pub fn index(&mut self, ids: &SetIds) {
        let mut sees = SetMask::default();
        let mut admins = SetMask::default();
        for (name, role) in &self.sets {
            if let Some(id) = ids.id(name) {
                sees.insert(id);
                if *role == SetRole::Admin {
                    admins.insert(id);
                }
            }
        }
        self.masks = Some(Masks {
            table: ids.key(),
            sees,
            admins,
        });
    }

    /// The mask of the sets this scope sees, if it was built against `ids` (else the caller
    /// decides by names).
    pub fn sees_mask(&self, ids: &SetIds) -> Option<&SetMask> {
        self.masks
            .as_ref()
            .filter(|m| m.table == ids.key())
            .map(|m| &m.sees)
    }

    /// The mask of the sets this scope administers, if it was built against `ids`.
    pub fn admins_mask(&self, ids: &SetIds) -> Option<&SetMask> {
        self.masks
            .as_ref()
            .filter(|m| m.table == ids.key())
            .map(|m| &m.admins)
    }

    /// The role held on set `name`.
    pub fn set_role(&self, name: &str) -> Option<SetRole> {
        self.sets.get(name).copied()
    }

    /// The role held on namespace `name`.
    pub fn namespace_role(&self, name: &str) -> Option<NamespaceRole> {
        self.namespaces.get(name).copied()
    }

    /// The highest set role held anywhere (for the coarse gate: could any grant allow this?).
    pub fn best_set_role(&self) -> Option<SetRole> {
        self.sets.values().copied().max()
    }

    /// The highest namespace role held anywhere.
    pub fn best_namespace_role(&self) -> Option<NamespaceRole> {
        self.namespaces.values().copied().max()
    }

    /// Every grant held: fleet first, then sets and namespaces by name (what `whoami` and the
    /// dashboard's header show).
    pub fn grants(&self) -> Vec<Grant> {
        Held {
            fleet: self.fleet,
            sets: self.sets.clone(),
            namespaces: self.namespaces.clone(),
        }
        .grants()
    }
}
