//! What an installation's settled status was computed from beyond its gathered entry, so that
//! the add-on actor skips computing it again while the entry is kept and these are the same.

use flotilla_rollout::Status;
use std::time::SystemTime;

/// The round's part of an installation's status inputs, as when its status was last computed
/// and needed no write. The rest (its ManagedClusterAddOn, works, cluster, configs) is its
/// entry's, which a change gathers again without this ([`super::dirty`]).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Settled {
    /// Where it stands in the rollout: status, since when, waiting for its turn.
    pub rollout: (Status, Option<SystemTime>, bool),
    /// Why its works could not be rendered.
    pub render_error: Option<String>,
    /// A lease-checked add-on's lease, and whether it is fresh now (the only way time changes
    /// a status); `None` for other health checks, which do not read it.
    pub lease: Option<(Option<SystemTime>, bool)>,
}

impl Settled {
    /// Whether a status computed from these inputs would be the settled one.
    pub fn holds(
        &self,
        rollout: (Status, Option<SystemTime>, bool),
        render_error: Option<&str>,
        lease: Option<(Option<SystemTime>, bool)>,
    ) -> bool {
        self.rollout == rollout
            && self.render_error.as_deref() == render_error
            && self.lease == lease
    }
}

#[cfg(test)]
mod tests;
