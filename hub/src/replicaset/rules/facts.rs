//! What the rules read of a work: its metadata (the template-hash annotation, the placement
//! label, the generation, the deletion timestamp), the hub's bookkeeping (when it was accepted)
//! and its status's conditions — never its spec or its manifests' statuses.
//!
//! A reconcile reads every work of its set, up to 10,000, several times a second while their
//! statuses stream in; decoding each whole (the manifests of the spec, the resource status,
//! copies of the metadata's maps) was most of its cost (session-16 review D1). [`WorkFacts`]
//! holds a stored work as it is and decodes only its conditions; [`WorkView`] is what the
//! rules take, borrowed from a [`WorkFacts`] or from a decoded [`ManifestWork`] alike.

use super::{PLACEMENT_LABEL, TEMPLATE_HASH_ANNOTATION};
use crate::cluster::StoredWork;
use flotilla_api::meta;
use flotilla_api::v1::{Condition, HubWorkState, ManifestWork, ObjectMeta};
use std::sync::Arc;
use std::time::SystemTime;

/// A work as the rules read it, borrowed.
#[derive(Debug, Clone, Copy, Default)]
pub struct WorkView<'a> {
    /// Its metadata.
    pub metadata: Option<&'a ObjectMeta>,
    /// The hub's bookkeeping.
    pub hub: Option<&'a HubWorkState>,
    /// Its status's conditions (empty without a status).
    pub conditions: &'a [Condition],
}

impl<'a> From<&'a ManifestWork> for WorkView<'a> {
    fn from(w: &'a ManifestWork) -> Self {
        Self {
            metadata: w.metadata.as_ref(),
            hub: w.hub.as_ref(),
            conditions: w
                .status
                .as_ref()
                .map(|s| s.conditions.as_slice())
                .unwrap_or_default(),
        }
    }
}

impl<'a> WorkView<'a> {
    /// The hash of the template it was made from (its annotation).
    pub fn template_hash(&self) -> Option<&'a str> {
        let m = self.metadata?;
        m.annotations
            .get(TEMPLATE_HASH_ANNOTATION)
            .map(String::as_str)
    }

    /// The placement that put it on its cluster (its label).
    pub fn placement(&self) -> Option<&'a str> {
        let m = self.metadata?;
        m.labels.get(PLACEMENT_LABEL).map(String::as_str)
    }

    /// `metadata.generation` (0 without metadata).
    pub fn generation(&self) -> i64 {
        self.metadata.map_or(0, |m| m.generation)
    }

    /// Whether it is being deleted.
    pub fn deleting(&self) -> bool {
        self.metadata
            .is_some_and(|m| m.deletion_timestamp.is_some())
    }

    /// When the hub accepted its current spec.
    pub fn accepted_at(&self) -> Option<SystemTime> {
        self.hub
            .and_then(|h| h.accepted_at.as_ref())
            .map(meta::system_time)
    }

    /// Its first condition of type `t`.
    pub fn condition(&self, t: &str) -> Option<&'a Condition> {
        self.conditions.iter().find(|c| c.r#type == t)
    }
}

/// A stored work with its conditions decoded: the spec and the manifests' statuses stay
/// encoded, the metadata shared with the works inventory.
#[derive(Debug, Clone)]
pub struct WorkFacts {
    work: Arc<StoredWork>,
    conditions: Vec<Condition>,
}

impl WorkFacts {
    /// The facts of `work`, decoding its conditions alone.
    pub fn of(work: Arc<StoredWork>) -> Self {
        let conditions = work.conditions();
        Self { work, conditions }
    }

    /// The work as the rules read it.
    pub fn view(&self) -> WorkView<'_> {
        WorkView {
            metadata: self.work.metadata.as_ref(),
            hub: self.work.hub.as_ref(),
            conditions: &self.conditions,
        }
    }
}

/// The facts of a decoded work, stored as the hub stores it (tests and fixtures build works
/// this way).
impl From<ManifestWork> for WorkFacts {
    fn from(w: ManifestWork) -> Self {
        Self::of(Arc::new(StoredWork::from(w)))
    }
}
