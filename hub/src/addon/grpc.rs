//! `flotilla.v1.AddOnService`: add-ons, their installations, templates and configs, and
//! clusteradm's `addon enable` / `addon disable`.

use crate::addon::error::AddOnError;
use crate::addon::handle::AddOns;
use crate::grants::{Target, Verb};
use crate::grpc::guard;
use flotilla_api::v1::add_on_service_server::AddOnService;
use flotilla_api::v1::{
    AddOnDeploymentConfig, AddOnTemplate, ClusterManagementAddOn, DeleteAddOnResponse,
    DisableAddOnRequest, DisableAddOnResponse, EnableAddOnRequest, EnableAddOnResponse,
    GetAddOnRequest, ListAddOnDeploymentConfigsResponse, ListAddOnTemplatesResponse,
    ListAddOnsRequest, ListClusterManagementAddOnsResponse, ListManagedClusterAddOnsResponse,
    ManagedClusterAddOn, ManagedClusterAddOnEvent,
};
use tonic::{Request, Response, Status};

impl From<AddOnError> for Status {
    fn from(e: AddOnError) -> Self {
        match e {
            AddOnError::Invalid(_) => Status::invalid_argument(e.to_string()),
            AddOnError::NotFound(_) => Status::not_found(e.to_string()),
            AddOnError::Conflict(_) => Status::aborted(e.to_string()),
            AddOnError::Deleting(_) => Status::failed_precondition(e.to_string()),
            AddOnError::Unavailable(_) => Status::unavailable(e.to_string()),
        }
    }
}

/// The service implementation.
pub struct AddOnApi {
    addons: AddOns,
}

impl AddOnApi {
    /// A service over the hub's add-ons.
    pub fn new(addons: AddOns) -> Self {
        Self { addons }
    }
}

fn cluster_scoped(r: &GetAddOnRequest) -> Result<(), Status> {
    if !r.namespace.is_empty() {
        return Err(Status::invalid_argument(
            "namespace: must be empty for a cluster-scoped kind",
        ));
    }
    guard::object("name", &r.name)
}

fn namespaced(r: &GetAddOnRequest) -> Result<(), Status> {
    guard::namespace("namespace", &r.namespace, false)?;
    guard::object("name", &r.name)
}

/// Whether the caller of `req` may `verb` the objects of cluster `cluster`'s namespace.
fn allow_cluster<T>(
    req: &Request<T>,
    verb: Verb,
    cluster: &str,
    action: &str,
) -> Result<(), Status> {
    guard::check(req, verb, Target::Cluster { name: cluster }, action)
}

/// Whether the caller of `req` may `verb` the objects of namespace `namespace`.
fn allow_namespace<T>(
    req: &Request<T>,
    verb: Verb,
    namespace: &str,
    action: &str,
) -> Result<(), Status> {
    guard::check(req, verb, Target::Namespace { name: namespace }, action)
}

/// The namespace and name of an object's metadata.
fn key_of(meta: Option<&flotilla_api::v1::ObjectMeta>) -> (String, String) {
    meta.map(|m| (m.namespace.clone(), m.name.clone()))
        .unwrap_or_default()
}

/// `cma` as the caller of `vis` may read it: whole to a fleet role, else only the placements
/// of its install strategy, and their progress, in the namespaces it sees (issue 48 review r4
/// §2: another team's rollout is not its to read, nor the fleet's counts).
fn shown(cma: &ClusterManagementAddOn, vis: &guard::Visibility) -> ClusterManagementAddOn {
    if vis.is_all() {
        return cma.clone();
    }
    super::fence::fenced(cma, |namespace| vis.namespace(namespace))
}

fn found<T: Clone>(x: Option<std::sync::Arc<T>>, what: String) -> Result<Response<T>, Status> {
    x.map(|x| Response::new((*x).clone()))
        .ok_or_else(|| Status::not_found(format!("{what} not found")))
}

#[tonic::async_trait]
impl AddOnService for AddOnApi {
    async fn apply_cluster_management_add_on(
        &self,
        request: Request<ClusterManagementAddOn>,
    ) -> Result<Response<ClusterManagementAddOn>, Status> {
        Ok(Response::new(
            self.addons.apply_addon(request.into_inner()).await?,
        ))
    }

    async fn get_cluster_management_add_on(
        &self,
        request: Request<GetAddOnRequest>,
    ) -> Result<Response<ClusterManagementAddOn>, Status> {
        let vis = guard::visibility(&request);
        let r = request.into_inner();
        cluster_scoped(&r)?;
        let cma = self.addons.get_addon(&r.name).ok_or_else(|| {
            Status::not_found(format!("ClusterManagementAddOn {} not found", r.name))
        })?;
        Ok(Response::new(shown(&cma, &vis)))
    }

    async fn list_cluster_management_add_ons(
        &self,
        request: Request<ListAddOnsRequest>,
    ) -> Result<Response<ListClusterManagementAddOnsResponse>, Status> {
        let vis = guard::visibility(&request);
        let mut items: Vec<_> = self
            .addons
            .list_addons()
            .into_iter()
            .map(|x| shown(&x, &vis))
            .collect();
        items.sort_by(|a, b| {
            a.metadata
                .as_ref()
                .map(|m| &m.name)
                .cmp(&b.metadata.as_ref().map(|m| &m.name))
        });
        Ok(Response::new(ListClusterManagementAddOnsResponse { items }))
    }

    async fn delete_cluster_management_add_on(
        &self,
        request: Request<GetAddOnRequest>,
    ) -> Result<Response<DeleteAddOnResponse>, Status> {
        let r = request.into_inner();
        cluster_scoped(&r)?;
        self.addons.delete_addon(&r.name).await?;
        Ok(Response::new(DeleteAddOnResponse {}))
    }

    async fn apply_managed_cluster_add_on(
        &self,
        request: Request<ManagedClusterAddOn>,
    ) -> Result<Response<ManagedClusterAddOn>, Status> {
        let (cluster, name) = key_of(request.get_ref().metadata.as_ref());
        guard::cluster("metadata.namespace", &cluster, false)?;
        let action = format!("apply ManagedClusterAddOn {cluster}/{name}");
        allow_cluster(&request, Verb::Write, &cluster, &action)?;
        // A config it names is read into the add-on's work on the cluster: the caller must
        // see it (issue 48 review r1 §10).
        let configs = request.get_ref().spec.iter().flat_map(|s| s.configs.iter());
        for c in configs.filter(|c| !c.namespace.is_empty()) {
            let action = format!(
                "use {} {}/{} in ManagedClusterAddOn {cluster}/{name}",
                c.resource, c.namespace, c.name
            );
            allow_namespace(&request, Verb::Read, &c.namespace, &action)?;
        }
        Ok(Response::new(
            self.addons
                .apply_cluster_addon(request.into_inner())
                .await?,
        ))
    }

    async fn get_managed_cluster_add_on(
        &self,
        request: Request<GetAddOnRequest>,
    ) -> Result<Response<ManagedClusterAddOn>, Status> {
        namespaced(request.get_ref())?;
        let r = request.get_ref();
        let action = format!("get ManagedClusterAddOn {}/{}", r.namespace, r.name);
        allow_cluster(&request, Verb::Read, &r.namespace, &action)?;
        let r = request.into_inner();
        found(
            self.addons.get_cluster_addon(&r.namespace, &r.name),
            format!("ManagedClusterAddOn {}/{}", r.namespace, r.name),
        )
    }

    async fn list_managed_cluster_add_ons(
        &self,
        request: Request<ListAddOnsRequest>,
    ) -> Result<Response<ListManagedClusterAddOnsResponse>, Status> {
        let vis = guard::visibility(&request);
        let r = request.into_inner();
        guard::cluster("namespace", &r.namespace, true)?;
        Ok(Response::new(ListManagedClusterAddOnsResponse {
            items: self
                .addons
                .list_cluster_addons(&r.namespace, &r.name)
                .into_iter()
                .filter(|x| vis.cluster(&key_of(x.metadata.as_ref()).0))
                .map(|x| (*x).clone())
                .collect(),
        }))
    }

    async fn delete_managed_cluster_add_on(
        &self,
        request: Request<GetAddOnRequest>,
    ) -> Result<Response<DeleteAddOnResponse>, Status> {
        namespaced(request.get_ref())?;
        let r = request.get_ref();
        let action = format!("delete ManagedClusterAddOn {}/{}", r.namespace, r.name);
        allow_cluster(&request, Verb::Write, &r.namespace, &action)?;
        let r = request.into_inner();
        self.addons
            .delete_cluster_addon(&r.namespace, &r.name)
            .await?;
        Ok(Response::new(DeleteAddOnResponse {}))
    }

    type WatchManagedClusterAddOnsStream = crate::grpc::WatchStream<ManagedClusterAddOnEvent>;

    async fn watch_managed_cluster_add_ons(
        &self,
        request: Request<ListAddOnsRequest>,
    ) -> Result<Response<Self::WatchManagedClusterAddOnsStream>, Status> {
        let watching = crate::grpc::WatchSettings::of(&request);
        let (teams, caller) = guard::Teams::of(&request);
        let fence =
            crate::grpc::WatchFence::new(&teams, caller.as_ref(), crate::grpc::By::InCluster);
        let r = request.into_inner();
        guard::cluster("namespace", &r.namespace, true)?;
        let (cluster, name) = (r.namespace, r.name);
        Ok(Response::new(crate::grpc::watch_fenced(
            &watching,
            &self.addons.store().cluster_addon_views,
            fence,
            move |_, m: &ManagedClusterAddOn| {
                m.metadata.as_ref().is_some_and(|m| {
                    (cluster.is_empty() || m.namespace == cluster)
                        && (name.is_empty() || m.name == name)
                })
            },
            |ty, m: &ManagedClusterAddOn| ManagedClusterAddOnEvent {
                r#type: ty as i32,
                addon: Some(m.clone()),
            },
        )))
    }

    async fn apply_add_on_template(
        &self,
        request: Request<AddOnTemplate>,
    ) -> Result<Response<AddOnTemplate>, Status> {
        Ok(Response::new(
            self.addons.apply_template(request.into_inner()).await?,
        ))
    }

    async fn get_add_on_template(
        &self,
        request: Request<GetAddOnRequest>,
    ) -> Result<Response<AddOnTemplate>, Status> {
        let r = request.into_inner();
        cluster_scoped(&r)?;
        found(
            self.addons.get_template(&r.name),
            format!("AddOnTemplate {}", r.name),
        )
    }

    async fn list_add_on_templates(
        &self,
        _request: Request<ListAddOnsRequest>,
    ) -> Result<Response<ListAddOnTemplatesResponse>, Status> {
        Ok(Response::new(ListAddOnTemplatesResponse {
            items: self
                .addons
                .list_templates()
                .into_iter()
                .map(|x| (*x).clone())
                .collect(),
        }))
    }

    async fn delete_add_on_template(
        &self,
        request: Request<GetAddOnRequest>,
    ) -> Result<Response<DeleteAddOnResponse>, Status> {
        let r = request.into_inner();
        cluster_scoped(&r)?;
        self.addons.delete_template(&r.name).await?;
        Ok(Response::new(DeleteAddOnResponse {}))
    }

    async fn apply_add_on_deployment_config(
        &self,
        request: Request<AddOnDeploymentConfig>,
    ) -> Result<Response<AddOnDeploymentConfig>, Status> {
        let (namespace, name) = key_of(request.get_ref().metadata.as_ref());
        guard::namespace("metadata.namespace", &namespace, false)?;
        let action = format!("apply AddOnDeploymentConfig {namespace}/{name}");
        allow_namespace(&request, Verb::Write, &namespace, &action)?;
        Ok(Response::new(
            self.addons.apply_config(request.into_inner()).await?,
        ))
    }

    async fn get_add_on_deployment_config(
        &self,
        request: Request<GetAddOnRequest>,
    ) -> Result<Response<AddOnDeploymentConfig>, Status> {
        namespaced(request.get_ref())?;
        let r = request.get_ref();
        let action = format!("get AddOnDeploymentConfig {}/{}", r.namespace, r.name);
        allow_namespace(&request, Verb::Read, &r.namespace, &action)?;
        let r = request.into_inner();
        found(
            self.addons.get_config(&r.namespace, &r.name),
            format!("AddOnDeploymentConfig {}/{}", r.namespace, r.name),
        )
    }

    async fn list_add_on_deployment_configs(
        &self,
        request: Request<ListAddOnsRequest>,
    ) -> Result<Response<ListAddOnDeploymentConfigsResponse>, Status> {
        let vis = guard::visibility(&request);
        let r = request.into_inner();
        guard::namespace("namespace", &r.namespace, true)?;
        Ok(Response::new(ListAddOnDeploymentConfigsResponse {
            items: self
                .addons
                .list_configs(&r.namespace)
                .into_iter()
                .filter(|x| vis.namespace(&key_of(x.metadata.as_ref()).0))
                .map(|x| (*x).clone())
                .collect(),
        }))
    }

    async fn delete_add_on_deployment_config(
        &self,
        request: Request<GetAddOnRequest>,
    ) -> Result<Response<DeleteAddOnResponse>, Status> {
        namespaced(request.get_ref())?;
        let r = request.get_ref();
        let action = format!("delete AddOnDeploymentConfig {}/{}", r.namespace, r.name);
        allow_namespace(&request, Verb::Write, &r.namespace, &action)?;
        let vis = guard::visibility(&request);
        let r = request.into_inner();
        let sees = |cluster: &str| vis.cluster(cluster);
        self.addons
            .delete_config(&r.namespace, &r.name, sees)
            .await?;
        Ok(Response::new(DeleteAddOnResponse {}))
    }

    async fn enable_add_on(
        &self,
        request: Request<EnableAddOnRequest>,
    ) -> Result<Response<EnableAddOnResponse>, Status> {
        let r = request.get_ref();
        guard::object("name", &r.name)?;
        for (i, c) in r.clusters.iter().enumerate() {
            guard::cluster(&format!("clusters[{i}]"), c, false)?;
            let action = format!("enable add-on {} on cluster {c}", r.name);
            allow_cluster(&request, Verb::Write, c, &action)?;
        }
        if !r.placement.is_empty() {
            // The clusters a placement decides are not known here: fleet admins only.
            let action = format!("enable add-on {} by a placement", r.name);
            guard::check(&request, Verb::Write, Target::Fleet, &action)?;
        }
        let vis = guard::visibility(&request);
        let r = request.into_inner();
        let (created, addon) = self
            .addons
            .enable(&r.name, &r.clusters, &r.placement, &r.install_namespace)
            .await?;
        let addon = addon.map(|a| shown(&a, &vis));
        Ok(Response::new(EnableAddOnResponse { created, addon }))
    }

    async fn disable_add_on(
        &self,
        request: Request<DisableAddOnRequest>,
    ) -> Result<Response<DisableAddOnResponse>, Status> {
        let r = request.get_ref();
        guard::object("name", &r.name)?;
        for (i, c) in r.clusters.iter().enumerate() {
            guard::cluster(&format!("clusters[{i}]"), c, false)?;
            let action = format!("disable add-on {} on cluster {c}", r.name);
            allow_cluster(&request, Verb::Write, c, &action)?;
        }
        if r.all {
            let action = format!("disable add-on {} on every cluster", r.name);
            guard::check(&request, Verb::Write, Target::Fleet, &action)?;
        }
        let r = request.into_inner();
        let removed = self.addons.disable(&r.name, &r.clusters, r.all).await?;
        Ok(Response::new(DisableAddOnResponse { removed }))
    }
}
