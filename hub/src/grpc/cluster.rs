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
    ListClustersRequest, ListClustersResponse, ManagedCluster, ObjectMeta, SetLeaseDurationRequest,
    TaintClusterRequest, WatchClustersRequest,
};
use std::collections::HashMap;
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

    /// Cluster `name` as it would be with `set` labels set and `remove` removed (a new one in
    /// `default` unless its labels name a set): the sets a write is checked against.
    fn relabelled(
        &self,
        name: &str,
        set: &HashMap<String, String>,
        remove: &[String],
    ) -> ManagedCluster {
        let mut c = match self.inventory.get(name) {
            Some(c) => (*c).clone(),
            None => ManagedCluster {
                metadata: Some(ObjectMeta {
                    name: name.into(),
                    labels: [(CLUSTERSET_LABEL.to_string(), DEFAULT_CLUSTERSET.to_string())].into(),
                    ..Default::default()
                }),
                ..Default::default()
            },
        };
        let labels = &mut c.metadata.get_or_insert_with(Default::default).labels;
        labels.extend(set.iter().map(|(k, v)| (k.clone(), v.clone())));
        for k in remove {
            labels.remove(k);
        }
        c
    }

    /// The sets `after` is in by the set index, and the set its set label names even before
    /// the index knows that set (made a moment ago, or not yet): a move into it needs its
    /// `admin` all the same.
    fn sets_after(&self, after: &ManagedCluster) -> Vec<std::sync::Arc<str>> {
        let mut sets = self.teams.sets_for(after);
        let named = after
            .metadata
            .as_ref()
            .and_then(|m| m.labels.get(CLUSTERSET_LABEL));
        if let Some(set) = named
            && !sets.iter().any(|s| **s == **set)
        {
            sets.push(set.as_str().into());
        }
        sets
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
        if self.inventory.get(&name).is_none() {
            self.teams.cluster_name_free("metadata.name", &name)?;
        }
        let labels = c
            .metadata
            .as_ref()
            .map(|m| m.labels.clone())
            .unwrap_or_default();
        // A document's labels are merged into a cluster that exists; a new one is in `default`
        // unless it names its set.
        let after = self.relabelled(&name, &labels, &[]);
        let set = after
            .metadata
            .as_ref()
            .and_then(|m| m.labels.get(CLUSTERSET_LABEL))
            .map_or(DEFAULT_CLUSTERSET, String::as_str);
        let sets = self.sets_after(&after);
        self.teams.allow(
            caller.as_ref(),
            Verb::Write,
            Target::ClusterInto {
                name: &name,
                sets: &sets,
            },
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
        if self.inventory.get(&r.name).is_none() {
            // A missing cluster is refused as a hidden one is (then not found to the fleet).
            self.allow(caller.as_ref(), Verb::Write, &r.name, "label")?;
        }
        // Checked on the sets it is in after the edit: any label may join a label-selector set.
        let after = self.relabelled(&r.name, &r.set, &r.remove);
        let sets = self.sets_after(&after);
        let action = match r.set.get(CLUSTERSET_LABEL) {
            Some(set) => format!("move ManagedCluster {} into cluster set {set:?}", r.name),
            None => format!("label ManagedCluster {}", r.name),
        };
        self.teams.allow(
            caller.as_ref(),
            Verb::Write,
            Target::ClusterInto {
                name: &r.name,
                sets: &sets,
            },
            &action,
        )?;
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
        if self.inventory.get(&r.cluster_name).is_none() {
            self.teams
                .cluster_name_free("cluster_name", &r.cluster_name)?;
        }
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
