//! `flotilla.v1.ClusterSetService`.
//!
//! Fenced by the caller's grants (issue 48): a set is seen by its viewers (and listed only to
//! them), updated by its admins, created and deleted by fleet admins; a binding of set S into
//! namespace N is created by who holds `bind` on S and `edit` on N (OCM checks `bind` on
//! create only: an update needs `edit` on N), listed to N's viewers and deleted by N's editors.

use crate::clusterset::{ClusterSets, Expect};
use crate::grants::{Target, Verb};
use crate::grpc::guard::{self, Teams};
use flotilla_api::v1::cluster_set_service_server::ClusterSetService;
use flotilla_api::v1::{
    DeleteBindingRequest, DeleteBindingResponse, DeleteClusterSetResponse, GetClusterSetRequest,
    ListBindingsRequest, ListBindingsResponse, ListClusterSetsRequest, ListClusterSetsResponse,
    ManagedClusterSet, ManagedClusterSetBinding, ManagedClusterSetView,
};
use tonic::{Request, Response, Status};

/// The service implementation.
pub struct ClusterSetApi {
    sets: ClusterSets,
}

impl ClusterSetApi {
    /// A service over the set registry.
    pub fn new(sets: ClusterSets) -> Self {
        Self { sets }
    }
}

#[tonic::async_trait]
impl ClusterSetService for ClusterSetApi {
    async fn apply_cluster_set(
        &self,
        req: Request<ManagedClusterSet>,
    ) -> Result<Response<ManagedClusterSet>, Status> {
        let (teams, caller) = Teams::of(&req);
        let set = req.into_inner();
        let name = set.metadata.as_ref().map_or("", |m| m.name.as_str());
        guard::object("metadata.name", name)?;
        let action = format!("apply ManagedClusterSet {name}");
        let stored = self.sets.get_set(name).ok().and_then(|v| v.set);
        let mut expect = Expect::Nothing;
        if let Some(stored) = stored {
            // Its selector decides which clusters its admins hold: changing it is the fleet's
            // (a set admin could otherwise take every cluster); the rest is the set's admins'.
            let selector =
                |s: &ManagedClusterSet| s.spec.as_ref().and_then(|s| s.cluster_selector.clone());
            if selector(&stored) == selector(&set) {
                teams.allow(caller.as_ref(), Verb::Write, Target::Set { name }, &action)?;
                // Decided as an update of the set as it is: it must still be so at the write.
                expect = Expect::Stored;
            } else {
                let action = format!("change the clusterSelector of ManagedClusterSet {name}");
                teams.allow(caller.as_ref(), Verb::Write, Target::Fleet, &action)?;
            }
        } else {
            teams.allow(caller.as_ref(), Verb::Write, Target::Fleet, &action)?;
        }
        Ok(Response::new(self.sets.apply_set_if(set, expect).await?))
    }

    async fn get_cluster_set(
        &self,
        req: Request<GetClusterSetRequest>,
    ) -> Result<Response<ManagedClusterSetView>, Status> {
        let (teams, caller) = Teams::of(&req);
        let name = req.into_inner().name;
        guard::object("name", &name)?;
        teams.allow(
            caller.as_ref(),
            Verb::Read,
            Target::Set { name: &name },
            &format!("get ManagedClusterSet {name}"),
        )?;
        Ok(Response::new(self.sets.get_set(&name)?))
    }

    async fn list_cluster_sets(
        &self,
        req: Request<ListClusterSetsRequest>,
    ) -> Result<Response<ListClusterSetsResponse>, Status> {
        let (teams, caller) = Teams::of(&req);
        let vis = teams.visibility(caller.as_ref());
        let items = self
            .sets
            .list_sets_where(|name| vis.sees(&Target::Set { name }));
        Ok(Response::new(ListClusterSetsResponse { items }))
    }

    async fn delete_cluster_set(
        &self,
        req: Request<GetClusterSetRequest>,
    ) -> Result<Response<DeleteClusterSetResponse>, Status> {
        let (teams, caller) = Teams::of(&req);
        let name = req.into_inner().name;
        guard::object("name", &name)?;
        teams.allow(
            caller.as_ref(),
            Verb::Write,
            Target::Fleet,
            &format!("delete ManagedClusterSet {name}"),
        )?;
        self.sets.delete_set(&name).await?;
        Ok(Response::new(DeleteClusterSetResponse {}))
    }

    async fn apply_binding(
        &self,
        req: Request<ManagedClusterSetBinding>,
    ) -> Result<Response<ManagedClusterSetBinding>, Status> {
        let (teams, caller) = Teams::of(&req);
        let binding = req.into_inner();
        let (namespace, name) = binding
            .metadata
            .as_ref()
            .map_or(("", ""), |m| (m.namespace.as_str(), m.name.as_str()));
        let set = binding.spec.as_ref().map_or("", |s| s.cluster_set.as_str());
        guard::namespace("metadata.namespace", namespace, false)?;
        let exists = self
            .sets
            .list_bindings(namespace)
            .iter()
            .any(|b| b.metadata.as_ref().is_some_and(|m| m.name == name));
        let expect = if exists {
            Expect::Stored
        } else {
            Expect::Nothing
        };
        if exists {
            teams.allow(
                caller.as_ref(),
                Verb::Write,
                Target::Namespace { name: namespace },
                &format!("update ManagedClusterSetBinding {namespace}/{name}"),
            )?;
        } else {
            teams.allow(
                caller.as_ref(),
                Verb::Bind,
                Target::Binding { namespace, set },
                &format!("bind cluster set {set:?} into namespace {namespace:?}"),
            )?;
        }
        Ok(Response::new(
            self.sets.apply_binding_if(binding, expect).await?,
        ))
    }

    async fn list_bindings(
        &self,
        req: Request<ListBindingsRequest>,
    ) -> Result<Response<ListBindingsResponse>, Status> {
        let (teams, caller) = Teams::of(&req);
        let vis = teams.visibility(caller.as_ref());
        let mut items = self.sets.list_bindings(&req.into_inner().namespace);
        items.retain(|b| vis.namespace(b.metadata.as_ref().map_or("", |m| m.namespace.as_str())));
        Ok(Response::new(ListBindingsResponse { items }))
    }

    async fn delete_binding(
        &self,
        req: Request<DeleteBindingRequest>,
    ) -> Result<Response<DeleteBindingResponse>, Status> {
        let (teams, caller) = Teams::of(&req);
        let r = req.into_inner();
        guard::namespace("namespace", &r.namespace, false)?;
        guard::object("name", &r.name)?;
        teams.allow(
            caller.as_ref(),
            Verb::Write,
            Target::Namespace { name: &r.namespace },
            &format!("delete ManagedClusterSetBinding {}/{}", r.namespace, r.name),
        )?;
        self.sets.delete_binding(&r.namespace, &r.name).await?;
        Ok(Response::new(DeleteBindingResponse {}))
    }
}
