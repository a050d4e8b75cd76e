//! The dispatcher's publication that placement actors read: a leaf module, so that the
//! dispatcher (which writes it and wakes actors) and the actors (which read it) do not import
//! each other.

use flotilla_placement::Fleet;
use std::collections::HashMap;
use std::sync::Arc;

/// What every scheduling run reads: the indexed fleet and fleet-wide decision counts (for
/// Balance), published together.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Clusters, sets, bindings and scores, indexed.
    pub fleet: Arc<Fleet>,
    /// Per cluster: decisions over every placement (each placement subtracts its own).
    pub counts: Arc<HashMap<String, u32>>,
    /// Increases with every publication.
    pub version: u64,
}
