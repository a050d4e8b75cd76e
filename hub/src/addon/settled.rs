//! What an installation's status was computed from, so that the add-on actor skips computing
//! it again while the inputs are the same objects.

use super::rules;
use flotilla_api::v1::{
    AddOnDeploymentConfig, AddOnTemplate, ManagedCluster, ManagedClusterAddOn, ManifestWork,
};
use flotilla_rollout::Status;
use std::sync::Arc;
use std::time::SystemTime;

/// What an installation's status is computed from, by identity: the views publish a new `Arc`
/// on every change, so the same pointers mean the same objects (the key holds them, so an
/// address is never reused while it is compared).
pub(super) struct StatusKey {
    pub cma: (u64, i64),
    pub mca: Arc<ManagedClusterAddOn>,
    pub works: Vec<Arc<ManifestWork>>,
    pub cluster: Option<Arc<ManagedCluster>>,
    pub template: Option<Arc<AddOnTemplate>>,
    pub config: Option<Arc<AddOnDeploymentConfig>>,
    pub target: rules::Hashes,
    pub rollout: (Status, Option<SystemTime>, bool),
    pub render_error: Option<String>,
    /// The lease, and whether it is fresh now (the only way time changes a status).
    pub lease: (Option<SystemTime>, bool),
}

fn same<T>(a: &Option<Arc<T>>, b: &Option<Arc<T>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        (None, None) => true,
        _ => false,
    }
}

impl PartialEq for StatusKey {
    fn eq(&self, o: &Self) -> bool {
        self.cma == o.cma
            && Arc::ptr_eq(&self.mca, &o.mca)
            && self.works.len() == o.works.len()
            && self
                .works
                .iter()
                .zip(&o.works)
                .all(|(a, b)| Arc::ptr_eq(a, b))
            && same(&self.cluster, &o.cluster)
            && same(&self.template, &o.template)
            && same(&self.config, &o.config)
            && self.rollout == o.rollout
            && self.lease == o.lease
            && self.render_error == o.render_error
            && self.target == o.target
    }
}
