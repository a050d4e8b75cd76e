//! `clusteradm addon enable` / `disable` through the handle (I/O): an add-on installed on named
//! clusters or put on a placement's clusters, and taken off them again.

use super::error::AddOnError;
use super::handle::AddOns;
use super::rules;
use flotilla_api::v1::{ClusterManagementAddOn, ManagedClusterAddOn, ObjectMeta};

impl AddOns {
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
            let cma = self.enable_on_placement(&cma, placement).await?;
            return Ok((Vec::new(), Some(cma)));
        }
        Ok((
            self.install_on(name, clusters, install_namespace).await?,
            None,
        ))
    }

    /// Adds `placement` (`namespace/name`) to `cma`'s install strategy, switching it to
    /// `Placements`.
    async fn enable_on_placement(
        &self,
        cma: &ClusterManagementAddOn,
        placement: &str,
    ) -> Result<ClusterManagementAddOn, AddOnError> {
        let Some((ns, pname)) = placement.split_once('/') else {
            return Err(AddOnError::Invalid(vec![format!(
                "placement: {placement:?} is not namespace/name"
            )]));
        };
        let mut cma = cma.clone();
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
        self.apply_addon(cma).await
    }

    /// Installs `name` on `clusters` (ManagedClusterAddOns with `install_namespace`), once
    /// every cluster is known to exist.
    async fn install_on(
        &self,
        name: &str,
        clusters: &[String],
        install_namespace: &str,
    ) -> Result<Vec<ManagedClusterAddOn>, AddOnError> {
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
        Ok(created)
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
}
