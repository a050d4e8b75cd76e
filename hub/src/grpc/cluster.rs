//! `flotilla.v1.ClusterService`.
//!
//! Fenced by the caller's grants (issue 48): lists and watches show only the clusters of the
//! sets the caller sees; a get of another cluster, and every write, is checked on the cluster
//! ([`guard::Teams::allow`]): `admin` on one of its sets to accept, deny, label, taint, set
//! its lease or delete it; `admin` on the set a cluster goes into (and one it leaves) to
//! create it, move it by its set label, or mint its join credential.

use super::auth::Identity;
use super::{guard, parse_selector, selects};
use crate::cluster::{AdminEdit, ClusterHandle, Clusters};
use crate::grants::{Target, Verb};
use crate::inventory::ClusterInventory;
use flotilla_api::meta::{CLUSTERSET_LABEL, DEFAULT_CLUSTERSET};
use flotilla_api::v1::cluster_service_server::ClusterService;
use flotilla_api::v1::{
    ClusterEvent, ClusterNamesRequest, ClustersResponse, CreateJoinTokenRequest,
    DeleteClusterRequest, DeleteClusterResponse, GetClusterRequest, JoinToken, LabelClusterRequest,
    ListClustersRequest, ListClustersResponse, ManagedCluster, SetLeaseDurationRequest,
    TaintClusterRequest, WatchClustersRequest,
};
use std::pin::Pin;
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

/// The service implementation.
pub struct ClusterApi {
    clusters: Clusters,
    inventory: ClusterInventory,
    teams: guard::Teams,
}

impl ClusterApi {
    /// A service over the cluster registry and inventory, checking callers by `teams`.
    pub fn new(clusters: Clusters, inventory: ClusterInventory, teams: guard::Teams) -> Self {
        Self {
            clusters,
            inventory,
            teams,
        }
    }

    /// Whether `caller` may `verb` cluster `name` (`what`: "accept", "label", …).
    fn allow(
        &self,
        caller: Option<&Identity>,
        verb: Verb,
        name: &str,
        what: &str,
    ) -> Result<(), Status> {
        self.teams
            .allow(
                caller,
                verb,
                Target::Cluster { name },
                &format!("{what} ManagedCluster {name}"),
            )
            .map(drop)
    }

    fn handle(&self, name: &str) -> Result<ClusterHandle, Status> {
        guard::cluster("name", name, false)?;
        self.clusters
            .get(name)
            .filter(|_| self.inventory.get(name).is_some())
            .ok_or_else(|| Status::not_found(format!("managed cluster {name:?} not found")))
    }

    /// Applies the same edit to each named cluster; every name must exist before any changes.
    async fn edit_each(
        &self,
        caller: Option<&Identity>,
        what: &str,
        names: Vec<String>,
        edit: impl Fn() -> AdminEdit,
    ) -> Result<Response<ClustersResponse>, Status> {
        for n in &names {
            guard::cluster("names", n, false)?;
            self.allow(caller, Verb::Write, n, what)?;
        }
        let handles = names
            .iter()
            .map(|n| self.handle(n))
            .collect::<Result<Vec<_>, _>>()?;
        let mut items = Vec::new();
        for h in handles {
            items.push(h.edit(edit()).await?);
        }
        Ok(Response::new(ClustersResponse { items }))
    }
}

type WatchStream = Pin<Box<dyn Stream<Item = Result<ClusterEvent, Status>> + Send>>;

#[tonic::async_trait]
impl ClusterService for ClusterApi {
    async fn list_clusters(
        &self,
        req: Request<ListClustersRequest>,
    ) -> Result<Response<ListClustersResponse>, Status> {
        let vis = self.teams.visibility(req.extensions().get::<Identity>());
        let req = req.into_inner();
        let sel = parse_selector(&req.label_selector)?;
        let mut items = Vec::new();
        let mut next_page_token = String::new();
        for c in self.inventory.snapshot() {
            let name = crate::inventory::name(&c);
            if !req.page_token.is_empty() && name <= req.page_token.as_str() {
                continue;
            }
            if !vis.cluster(name) {
                continue;
            }
            if !selects(&sel, c.metadata.as_ref()) {
                continue;
            }
            if req.page_size > 0 && items.len() == req.page_size as usize {
                next_page_token = items
                    .last()
                    .map(|c: &ManagedCluster| crate::inventory::name(c).to_string())
                    .unwrap_or_default();
                break;
            }
            items.push((*c).clone());
        }
        Ok(Response::new(ListClustersResponse {
            items,
            next_page_token,
        }))
    }

    async fn get_cluster(
        &self,
        req: Request<GetClusterRequest>,
    ) -> Result<Response<ManagedCluster>, Status> {
        let caller = req.extensions().get::<Identity>().cloned();
        let name = req.into_inner().name;
        guard::cluster("name", &name, false)?;
        self.allow(caller.as_ref(), Verb::Read, &name, "get")?;
        self.inventory
            .get(&name)
            .map(|c| Response::new((*c).clone()))
            .ok_or_else(|| Status::not_found(format!("managed cluster {name:?} not found")))
    }

    type WatchClustersStream = WatchStream;

    async fn watch_clusters(
        &self,
        req: Request<WatchClustersRequest>,
    ) -> Result<Response<WatchStream>, Status> {
        let watching = super::WatchSettings::of(&req);
        let fence = super::WatchFence::new(
            &self.teams,
            req.extensions().get::<Identity>(),
            super::By::Cluster,
        );
        let sel = parse_selector(&req.into_inner().label_selector)?;
        Ok(Response::new(super::watch_fenced(
            &watching,
            &self.inventory,
            fence,
            move |_, c| selects(&sel, c.metadata.as_ref()),
            |ty, c| ClusterEvent {
                r#type: ty as i32,
                cluster: Some(c.clone()),
            },
        )))
    }

    async fn accept_clusters(
        &self,
        req: Request<ClusterNamesRequest>,
    ) -> Result<Response<ClustersResponse>, Status> {
        let caller = req.extensions().get::<Identity>().cloned();
        let r = req.into_inner();
        let key = (!r.key.is_empty()).then_some(r.key);
        if key.is_some() && r.names.len() != 1 {
            return Err(Status::invalid_argument(
                "key: an agent key names one cluster; accept one name with it",
            ));
        }
        self.edit_each(caller.as_ref(), "accept", r.names, || {
            AdminEdit::Accept(key.clone())
        })
        .await
    }

    async fn deny_clusters(
        &self,
        req: Request<ClusterNamesRequest>,
    ) -> Result<Response<ClustersResponse>, Status> {
        let caller = req.extensions().get::<Identity>().cloned();
        self.edit_each(caller.as_ref(), "deny", req.into_inner().names, || {
            AdminEdit::Deny
        })
        .await
    }

    async fn apply_cluster(
        &self,
        req: Request<ManagedCluster>,
    ) -> Result<Response<ManagedCluster>, Status> {
        let caller = req.extensions().get::<Identity>().cloned();
        let c = req.into_inner();
        let name = c
            .metadata
            .as_ref()
            .map(|m| m.name.clone())
            .unwrap_or_default();
        guard::cluster("metadata.name", &name, false)?;
        let set = c
            .metadata
            .as_ref()
            .and_then(|m| m.labels.get(CLUSTERSET_LABEL))
            .map_or(DEFAULT_CLUSTERSET, String::as_str);
        self.teams.allow(
            caller.as_ref(),
            Verb::Write,
            Target::ClusterIntoSet { name: &name, set },
            &format!("apply ManagedCluster {name} in cluster set {set:?}"),
        )?;
        let handle = self.clusters.get_or_spawn(&name)?;
        Ok(Response::new(
            handle.edit(AdminEdit::Apply(Box::new(c))).await?,
        ))
    }

    async fn label_cluster(
        &self,
        req: Request<LabelClusterRequest>,
    ) -> Result<Response<ManagedCluster>, Status> {
        let caller = req.extensions().get::<Identity>().cloned();
        let r = req.into_inner();
        guard::cluster("name", &r.name, false)?;
        self.allow(caller.as_ref(), Verb::Write, &r.name, "label")?;
        if let Some(set) = r.set.get(CLUSTERSET_LABEL) {
            self.teams.allow(
                caller.as_ref(),
                Verb::Write,
                Target::ClusterIntoSet { name: &r.name, set },
                &format!("move ManagedCluster {} into cluster set {set:?}", r.name),
            )?;
        }
        let edit = AdminEdit::Label {
            set: r.set,
            remove: r.remove,
        };
        Ok(Response::new(self.handle(&r.name)?.edit(edit).await?))
    }

    async fn taint_cluster(
        &self,
        req: Request<TaintClusterRequest>,
    ) -> Result<Response<ManagedCluster>, Status> {
        let caller = req.extensions().get::<Identity>().cloned();
        let r = req.into_inner();
        guard::cluster("name", &r.name, false)?;
        self.allow(caller.as_ref(), Verb::Write, &r.name, "taint")?;
        let edit = AdminEdit::Taint {
            add: r.add,
            remove: r.remove,
        };
        Ok(Response::new(self.handle(&r.name)?.edit(edit).await?))
    }

    async fn set_lease_duration(
        &self,
        req: Request<SetLeaseDurationRequest>,
    ) -> Result<Response<ManagedCluster>, Status> {
        let caller = req.extensions().get::<Identity>().cloned();
        let r = req.into_inner();
        guard::cluster("name", &r.name, false)?;
        self.allow(caller.as_ref(), Verb::Write, &r.name, "set the lease of")?;
        let edit = AdminEdit::SetLease(r.lease_duration_seconds);
        Ok(Response::new(self.handle(&r.name)?.edit(edit).await?))
    }

    async fn delete_cluster(
        &self,
        req: Request<DeleteClusterRequest>,
    ) -> Result<Response<DeleteClusterResponse>, Status> {
        let caller = req.extensions().get::<Identity>().cloned();
        let r = req.into_inner();
        guard::cluster("name", &r.name, false)?;
        self.allow(caller.as_ref(), Verb::Write, &r.name, "delete")?;
        self.handle(&r.name)?.delete().await?;
        Ok(Response::new(DeleteClusterResponse {}))
    }

    async fn create_join_token(
        &self,
        req: Request<CreateJoinTokenRequest>,
    ) -> Result<Response<JoinToken>, Status> {
        let caller = req.extensions().get::<Identity>().cloned();
        let r = req.into_inner();
        guard::cluster("cluster_name", &r.cluster_name, false)?;
        if !(0..=MAX_JOIN_TTL_SECONDS).contains(&r.ttl_seconds) {
            return Err(Status::invalid_argument(format!(
                "ttl_seconds: {} is outside 0..={MAX_JOIN_TTL_SECONDS} (0 = {DEFAULT_JOIN_TTL_SECONDS})",
                r.ttl_seconds
            )));
        }
        let ttl = match r.ttl_seconds {
            0 => DEFAULT_JOIN_TTL_SECONDS,
            n => n,
        };
        guard::cluster("cluster_set", &r.cluster_set, true)?;
        let set = match r.cluster_set.as_str() {
            "" => DEFAULT_CLUSTERSET,
            set => set,
        };
        self.teams.allow(
            caller.as_ref(),
            Verb::Credentials,
            Target::ClusterIntoSet {
                name: &r.cluster_name,
                set,
            },
            &format!(
                "create a join credential for cluster {} in cluster set {set:?}",
                r.cluster_name
            ),
        )?;
        let handle = self.clusters.get_or_spawn(&r.cluster_name)?;
        Ok(Response::new(
            handle
                .join(
                    std::time::Duration::from_secs(ttl as u64),
                    r.accept,
                    r.cluster_set,
                )
                .await?,
        ))
    }
}

/// Lifetime of a join credential when the request names none: 24 h.
pub const DEFAULT_JOIN_TTL_SECONDS: i64 = 86_400;
/// Longest join credential: 30 days.
pub const MAX_JOIN_TTL_SECONDS: i64 = 30 * 86_400;
