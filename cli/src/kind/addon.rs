//! Add-ons (`addon.open-cluster-management.io/v1alpha1`): ClusterManagementAddOns (an add-on and
//! how it is installed), ManagedClusterAddOns (an add-on on one cluster, in kubectl's columns),
//! AddOnTemplates (the add-on agent's manifests) and AddOnDeploymentConfigs (its variables).

use super::{Delete, Gone, Kind, Target};
use crate::hub::Hub;
use flotilla_api::addon::conditions::{AVAILABLE, DEGRADED, PROGRESSING};
use flotilla_api::meta;
use flotilla_api::ocm;
use flotilla_api::v1::{
    AddOnDeploymentConfig, AddOnTemplate, ClusterManagementAddOn, ManagedClusterAddOn, ObjectMeta,
};

impl Kind for ManagedClusterAddOn {
    type Ocm = ocm::ManagedClusterAddOn;
    const COLUMNS: &'static [&'static str] =
        &["NAME", "NAMESPACE", "AVAILABLE", "DEGRADED", "PROGRESSING"];

    fn metadata(&self) -> Option<&ObjectMeta> {
        self.metadata.as_ref()
    }

    /// NAMESPACE is the cluster; the conditions show their status ("" when absent), as
    /// `kubectl get managedclusteraddons` does.
    fn row(&self) -> Vec<String> {
        let conditions = self
            .status
            .as_ref()
            .map(|s| s.conditions.as_slice())
            .unwrap_or_default();
        let status = |t: &str| {
            meta::condition_status(conditions, t)
                .unwrap_or_default()
                .to_string()
        };
        let mut name = self.name();
        if self
            .metadata
            .as_ref()
            .is_some_and(|m| m.deletion_timestamp.is_some())
        {
            name.push_str(" (deleting)");
        }
        vec![
            name,
            self.namespace(),
            status(AVAILABLE),
            status(DEGRADED),
            status(PROGRESSING),
        ]
    }

    fn to_ocm(&self) -> ocm::ManagedClusterAddOn {
        ocm::ManagedClusterAddOn::from(self)
    }

    fn none(_: &super::Query, _: &str) -> Option<String> {
        Some("No add-ons found.".into())
    }

    /// One add-on of one cluster is shown as that object.
    fn single(query: &super::Query) -> bool {
        query.clusters.len() == 1 && !query.names.is_empty()
    }

    /// The add-ons of the clusters (every cluster when none), only the named add-on when
    /// given, sorted by cluster and name.
    async fn fetch(hub: &crate::hub::Hub, query: &super::Query) -> anyhow::Result<Vec<Self>> {
        let clusters = &query.clusters;
        let name = query.names.first().cloned().unwrap_or_default();
        if clusters.len() == 1 && !name.is_empty() {
            let r = flotilla_api::v1::GetAddOnRequest {
                namespace: clusters[0].clone(),
                name,
            };
            return Ok(vec![
                hub.idempotent(async || hub.addons().get_managed_cluster_add_on(r.clone()).await)
                    .await?,
            ]);
        }
        let namespaces = if clusters.is_empty() {
            vec![String::new()]
        } else {
            clusters.to_vec()
        };
        let mut items = Vec::new();
        for namespace in namespaces {
            let r = flotilla_api::v1::ListAddOnsRequest {
                namespace,
                name: name.clone(),
            };
            items.extend(
                hub.idempotent(async || hub.addons().list_managed_cluster_add_ons(r.clone()).await)
                    .await?
                    .items,
            );
        }
        items.sort_by_key(|a| (a.namespace(), a.name()));
        Ok(items)
    }
}

impl Kind for ClusterManagementAddOn {
    type Ocm = ocm::ClusterManagementAddOn;
    const COLUMNS: &'static [&'static str] = &[
        "NAME",
        "DISPLAY NAME",
        "INSTALL STRATEGY",
        "MANAGED BY",
        "CLUSTERS",
        "UPDATED",
        "PROGRESSING",
    ];

    fn metadata(&self) -> Option<&ObjectMeta> {
        self.metadata.as_ref()
    }

    /// MANAGED BY: `hub`, `external` (no AddOnTemplate: someone else deploys its agent) or
    /// `self` (its lifecycle annotation); CLUSTERS and UPDATED sum the placements' install
    /// progressions; PROGRESSING is the reason of the first progression's `Progressing`
    /// condition ("-" without one).
    fn row(&self) -> Vec<String> {
        let spec = self.spec.clone().unwrap_or_default();
        let progressions = self
            .status
            .as_ref()
            .map(|s| s.install_progressions.as_slice())
            .unwrap_or_default();
        let strategy = spec
            .install_strategy
            .map(|s| s.r#type)
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| "Manual".into());
        let progressing = progressions
            .first()
            .and_then(|p| meta::find_condition(&p.conditions, PROGRESSING))
            .map(|c| c.reason.clone())
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| "-".into());
        vec![
            self.name(),
            spec.add_on_meta.map(|m| m.display_name).unwrap_or_default(),
            strategy,
            flotilla_api::addon::manager::managed_by(self).to_string(),
            progressions
                .iter()
                .map(|p| p.total)
                .sum::<i32>()
                .to_string(),
            progressions
                .iter()
                .map(|p| p.updated)
                .sum::<i32>()
                .to_string(),
            progressing,
        ]
    }

    fn to_ocm(&self) -> ocm::ClusterManagementAddOn {
        ocm::ClusterManagementAddOn::from(self)
    }

    fn none(_: &super::Query, _: &str) -> Option<String> {
        Some("No ClusterManagementAddOns found.".into())
    }

    /// The named add-ons (each must exist), or every one sorted by name.
    async fn fetch(hub: &crate::hub::Hub, query: &super::Query) -> anyhow::Result<Vec<Self>> {
        if query.names.is_empty() {
            let r = flotilla_api::v1::ListAddOnsRequest::default();
            let mut items = hub
                .idempotent(async || {
                    hub.addons()
                        .list_cluster_management_add_ons(r.clone())
                        .await
                })
                .await?
                .items;
            items.sort_by_key(Kind::name);
            return Ok(items);
        }
        let mut items = Vec::new();
        for name in &query.names {
            let r = flotilla_api::v1::GetAddOnRequest {
                namespace: String::new(),
                name: name.clone(),
            };
            items.push(
                hub.idempotent(async || {
                    hub.addons().get_cluster_management_add_on(r.clone()).await
                })
                .await?,
            );
        }
        Ok(items)
    }
}

impl Kind for AddOnTemplate {
    type Ocm = ocm::AddOnTemplate;
    const COLUMNS: &'static [&'static str] = &["NAME", "ADDON NAME", "MANIFESTS"];

    fn metadata(&self) -> Option<&ObjectMeta> {
        self.metadata.as_ref()
    }

    fn row(&self) -> Vec<String> {
        let spec = self.spec.clone().unwrap_or_default();
        let manifests = spec
            .agent_spec
            .and_then(|a| a.workload)
            .map_or(0, |w| w.manifests.len());
        vec![self.name(), spec.addon_name, manifests.to_string()]
    }

    fn to_ocm(&self) -> ocm::AddOnTemplate {
        ocm::AddOnTemplate::from(self)
    }

    fn none(_: &super::Query, _: &str) -> Option<String> {
        Some("No AddOnTemplates found.".into())
    }

    /// The named templates (each must exist), or every one sorted by name.
    async fn fetch(hub: &crate::hub::Hub, query: &super::Query) -> anyhow::Result<Vec<Self>> {
        if query.names.is_empty() {
            let r = flotilla_api::v1::ListAddOnsRequest::default();
            let mut items = hub
                .idempotent(async || hub.addons().list_add_on_templates(r.clone()).await)
                .await?
                .items;
            items.sort_by_key(Kind::name);
            return Ok(items);
        }
        let mut items = Vec::new();
        for name in &query.names {
            let r = flotilla_api::v1::GetAddOnRequest {
                namespace: String::new(),
                name: name.clone(),
            };
            items.push(
                hub.idempotent(async || hub.addons().get_add_on_template(r.clone()).await)
                    .await?,
            );
        }
        Ok(items)
    }
}

impl Kind for AddOnDeploymentConfig {
    type Ocm = ocm::AddOnDeploymentConfig;
    /// Namespaced like placements: a list across namespaces leads with NAMESPACE
    /// ([`crate::output::namespaced_table`]).
    const COLUMNS: &'static [&'static str] = &["NAME", "VARIABLES", "INSTALL NAMESPACE"];

    fn metadata(&self) -> Option<&ObjectMeta> {
        self.metadata.as_ref()
    }

    fn row(&self) -> Vec<String> {
        let spec = self.spec.clone().unwrap_or_default();
        vec![
            self.name(),
            spec.customized_variables.len().to_string(),
            spec.agent_install_namespace,
        ]
    }

    fn to_ocm(&self) -> ocm::AddOnDeploymentConfig {
        ocm::AddOnDeploymentConfig::from(self)
    }

    const ACROSS_NAMESPACES: bool = true;

    fn none(_: &super::Query, _: &str) -> Option<String> {
        Some("No AddOnDeploymentConfigs found.".into())
    }

    /// The named configs of the namespace, or every one (of the namespace when given), sorted
    /// by namespace and name.
    async fn fetch(hub: &crate::hub::Hub, query: &super::Query) -> anyhow::Result<Vec<Self>> {
        if query.names.is_empty() {
            let r = flotilla_api::v1::ListAddOnsRequest {
                namespace: query.namespace.clone().unwrap_or_default(),
                name: String::new(),
            };
            let mut items = hub
                .idempotent(async || hub.addons().list_add_on_deployment_configs(r.clone()).await)
                .await?
                .items;
            items.sort_by_key(|c| (c.namespace(), c.name()));
            return Ok(items);
        }
        let Some(namespace) = &query.namespace else {
            anyhow::bail!("get addondeploymentconfigs NAME needs --namespace NS");
        };
        let mut items = Vec::new();
        for name in &query.names {
            let r = flotilla_api::v1::GetAddOnRequest {
                namespace: namespace.clone(),
                name: name.clone(),
            };
            items.push(
                hub.idempotent(async || hub.addons().get_add_on_deployment_config(r.clone()).await)
                    .await?,
            );
        }
        Ok(items)
    }
}

/// A delete through the AddOnService: `call` with the target as a `GetAddOnRequest`, the
/// message `said` of it.
async fn delete_addon<T>(
    hub: &Hub,
    target: Target,
    call: impl AsyncFn(flotilla_api::v1::GetAddOnRequest) -> Result<tonic::Response<T>, tonic::Status>,
    said: impl Fn(&flotilla_api::v1::GetAddOnRequest) -> String,
) -> anyhow::Result<Gone> {
    let r = flotilla_api::v1::GetAddOnRequest {
        namespace: target.namespace,
        name: target.name,
    };
    let d = hub.delete(async || call(r.clone()).await).await?;
    Ok(Gone::new(d, said(&r)))
}

impl Delete for ClusterManagementAddOn {
    async fn delete(hub: &Hub, target: Target) -> anyhow::Result<Gone> {
        let call = async |r| hub.addons().delete_cluster_management_add_on(r).await;
        delete_addon(hub, target, call, |r| {
            format!(
                "clustermanagementaddon/{} deleted (with its ManagedClusterAddOns)",
                r.name
            )
        })
        .await
    }
}

impl Delete for ManagedClusterAddOn {
    async fn delete(hub: &Hub, target: Target) -> anyhow::Result<Gone> {
        let call = async |r| hub.addons().delete_managed_cluster_add_on(r).await;
        delete_addon(hub, target, call, |r| {
            format!(
                "managedclusteraddon/{} deleted (cluster {})",
                r.name, r.namespace
            )
        })
        .await
    }
}

impl Delete for AddOnTemplate {
    async fn delete(hub: &Hub, target: Target) -> anyhow::Result<Gone> {
        let call = async |r| hub.addons().delete_add_on_template(r).await;
        delete_addon(hub, target, call, |r| {
            format!("addontemplate/{} deleted", r.name)
        })
        .await
    }
}

impl Delete for AddOnDeploymentConfig {
    async fn delete(hub: &Hub, target: Target) -> anyhow::Result<Gone> {
        let call = async |r| hub.addons().delete_add_on_deployment_config(r).await;
        delete_addon(hub, target, call, |r| {
            format!(
                "addondeploymentconfig/{} deleted (namespace {})",
                r.name, r.namespace
            )
        })
        .await
    }
}

/// Builders of add-on objects for the tests of the kinds and of `addon status`.
#[cfg(test)]
pub(crate) mod fixtures {
    use flotilla_api::v1::{
        AddOnDeploymentConfig, AddOnDeploymentConfigSpec, AddOnMeta, AddOnTemplate,
        AddOnTemplateSpec, ClusterManagementAddOn, ClusterManagementAddOnSpec,
        ClusterManagementAddOnStatus, Condition, CustomizedVariable, DecisionGroupSummary,
        InstallProgression, InstallStrategy, ManagedClusterAddOn, ManagedClusterAddOnStatus,
        ManifestWorkSpec, ManifestsTemplate, ObjectMeta, PlacementStrategy,
    };

    fn meta(namespace: &str, name: &str) -> Option<ObjectMeta> {
        Some(ObjectMeta {
            name: name.into(),
            namespace: namespace.into(),
            ..Default::default()
        })
    }

    /// A condition with a status, reason and message.
    pub fn condition(type_: &str, status: &str, reason: &str, message: &str) -> Condition {
        Condition {
            r#type: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
            ..Default::default()
        }
    }

    /// `Mca::new("cluster1", "hello").condition("Available", "True", "", "").build()`.
    pub struct Mca(ManagedClusterAddOn);

    impl Mca {
        /// Add-on `addon` on `cluster`, without conditions.
        pub fn new(cluster: &str, addon: &str) -> Self {
            Self(ManagedClusterAddOn {
                metadata: meta(cluster, addon),
                status: Some(ManagedClusterAddOnStatus::default()),
                ..Default::default()
            })
        }

        /// Adds a condition.
        pub fn condition(mut self, type_: &str, status: &str, reason: &str, msg: &str) -> Self {
            let st = self.0.status.get_or_insert_with(Default::default);
            st.conditions.push(condition(type_, status, reason, msg));
            self
        }

        /// Available, not degraded, not progressing.
        pub fn healthy(self) -> Self {
            self.condition("Available", "True", "ManagedClusterAddOnLeaseUpdated", "")
                .condition("Degraded", "False", "", "")
                .condition("Progressing", "False", "Completed", "")
        }

        /// The object.
        pub fn build(self) -> ManagedClusterAddOn {
            self.0
        }
    }

    /// `Cma::new("hello").placement("default", "edge").progression(...).build()`.
    pub struct Cma(ClusterManagementAddOn);

    impl Cma {
        /// Add-on `name` installed by hand, without status.
        pub fn new(name: &str) -> Self {
            Self(ClusterManagementAddOn {
                metadata: meta("", name),
                spec: Some(ClusterManagementAddOnSpec::default()),
                status: Some(ClusterManagementAddOnStatus::default()),
            })
        }

        /// Its display name.
        pub fn display_name(mut self, display: &str) -> Self {
            self.0.spec.as_mut().unwrap().add_on_meta = Some(AddOnMeta {
                display_name: display.into(),
                description: String::new(),
            });
            self
        }

        /// Its agent is AddOnTemplate `name` (a supported config with that default).
        pub fn template(mut self, name: &str) -> Self {
            self.0
                .spec
                .as_mut()
                .unwrap()
                .supported_configs
                .push(flotilla_api::v1::ConfigMeta {
                    group: flotilla_api::addon::GROUP.into(),
                    resource: flotilla_api::addon::TEMPLATES.into(),
                    default_config: Some(flotilla_api::v1::ConfigReferent {
                        namespace: String::new(),
                        name: name.into(),
                    }),
                });
            self
        }

        /// Its `addon.open-cluster-management.io/lifecycle` annotation.
        pub fn lifecycle(mut self, value: &str) -> Self {
            self.0.metadata.as_mut().unwrap().annotations.insert(
                flotilla_api::addon::LIFECYCLE_ANNOTATION.into(),
                value.into(),
            );
            self
        }

        /// Adds a placement to an install strategy of type Placements.
        pub fn placement(mut self, namespace: &str, name: &str) -> Self {
            let strategy = self
                .0
                .spec
                .as_mut()
                .unwrap()
                .install_strategy
                .get_or_insert_with(|| InstallStrategy {
                    r#type: "Placements".into(),
                    placements: vec![],
                });
            strategy.placements.push(PlacementStrategy {
                namespace: namespace.into(),
                name: name.into(),
                ..Default::default()
            });
            self
        }

        /// Adds an install progression.
        pub fn progression(mut self, p: Progression) -> Self {
            let st = self.0.status.as_mut().unwrap();
            st.install_progressions.push(p.0);
            self
        }

        /// The object.
        pub fn build(self) -> ClusterManagementAddOn {
            self.0
        }
    }

    /// One placement's install progression: `Progression::new("default", "edge", 3, 1)`.
    pub struct Progression(InstallProgression);

    impl Progression {
        /// `updated` of `total` clusters of placement `namespace/name`, none failed.
        pub fn new(namespace: &str, name: &str, total: i32, updated: i32) -> Self {
            Self(InstallProgression {
                namespace: namespace.into(),
                name: name.into(),
                total,
                updated,
                ..Default::default()
            })
        }

        /// Its `Progressing` condition.
        pub fn progressing(mut self, status: &str, reason: &str, message: &str) -> Self {
            self.0
                .conditions
                .push(condition("Progressing", status, reason, message));
            self
        }

        /// A decision group: `available` of its `total` clusters done.
        pub fn group(mut self, index: i32, name: &str, total: i32, available: i32) -> Self {
            self.0.decision_groups.push(DecisionGroupSummary {
                index,
                name: name.into(),
                total,
                available,
            });
            self
        }

        /// Clusters that failed.
        pub fn failed(mut self, failed: i32) -> Self {
            self.0.failed = failed;
            self
        }

        /// Why the rollout stopped.
        pub fn stopped(mut self, reason: &str) -> Self {
            self.0.stopped_reason = reason.into();
            self
        }

        /// A note on the strategy.
        pub fn note(mut self, note: &str) -> Self {
            self.0.notes.push(note.into());
            self
        }
    }

    /// A template of `addon` with `manifests` ConfigMaps.
    pub fn template(name: &str, addon: &str, manifests: usize) -> AddOnTemplate {
        let cm = |i: usize| {
            let json = format!(
                r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"cm{i}","namespace":"default"}}}}"#
            );
            flotilla_api::v1::Manifest {
                raw: json.into_bytes(),
            }
        };
        AddOnTemplate {
            metadata: meta("", name),
            spec: Some(AddOnTemplateSpec {
                addon_name: addon.into(),
                agent_spec: Some(ManifestWorkSpec {
                    workload: Some(ManifestsTemplate {
                        manifests: (0..manifests).map(cm).collect(),
                    }),
                    ..Default::default()
                }),
                registration: vec![],
            }),
        }
    }

    /// A deployment config in `namespace` with `variables` (name, value) and an install
    /// namespace ("" for none).
    pub fn deployment_config(
        namespace: &str,
        name: &str,
        variables: &[(&str, &str)],
        install_namespace: &str,
    ) -> AddOnDeploymentConfig {
        AddOnDeploymentConfig {
            metadata: meta(namespace, name),
            spec: Some(AddOnDeploymentConfigSpec {
                customized_variables: variables
                    .iter()
                    .map(|(n, v)| CustomizedVariable {
                        name: (*n).into(),
                        value: (*v).into(),
                    })
                    .collect(),
                agent_install_namespace: install_namespace.into(),
                ..Default::default()
            }),
        }
    }
}
