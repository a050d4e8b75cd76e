//! One handler per page: each reads the hub's in-memory views, keeps what the viewer may see
//! (a team's clusters and namespaces), and renders with the view's own module.

use super::D;
use super::extract::{Params, Segments};
use super::respond::{not_here, ok_unless, page, problem};
use crate::dashboard::auth::Viewer;
use crate::dashboard::html::Nav;
use crate::dashboard::{
    act, cluster, clusters, gitrepos, overview, placements, policies, rollouts, work, works,
};
use crate::grants::{Target, Verb};
use crate::grpc::guard::Visibility;
use crate::keys::ObjectRef;
use axum::extract::State;
use axum::response::Response;
use http::StatusCode;
use std::collections::HashSet;
use std::sync::Arc;

/// The clusters of `snapshot` `sees` admits (all of them for a fleet role).
fn seen(
    sees: &Visibility,
    snapshot: Vec<Arc<flotilla_api::v1::ManagedCluster>>,
) -> Vec<Arc<flotilla_api::v1::ManagedCluster>> {
    if sees.is_all() {
        return snapshot;
    }
    snapshot
        .into_iter()
        .filter(|c| sees.cluster(crate::inventory::name(c)))
        .collect()
}

/// `None` when `viewer` may read `target`, else a 403 page naming the grant it lacks (a hidden
/// object and a missing one read alike: the refusal is [`crate::grants::decide`]'s, issue 48
/// review §9). The refusal is an audit line.
fn refused_read(viewer: &Viewer, target: Target<'_>, action: &str) -> Option<Response> {
    if viewer.sees.sees(&target) {
        return None;
    }
    let refused = viewer
        .teams
        .allow(Some(&viewer.identity), Verb::Read, target, action);
    match refused {
        Ok(_) => None,
        Err(status) => Some(problem(
            StatusCode::FORBIDDEN,
            Some(viewer),
            status.message(),
        )),
    }
}

/// `GET /`.
pub(super) async fn overview_page(State(d): D, viewer: Viewer, q: Params) -> Response {
    let snapshot = seen(&viewer.sees, d.inventory.snapshot());
    let o = d.live.read(|h| match &viewer.sees {
        Visibility::All => overview::build(&snapshot, h),
        sees => overview::build_seen(&snapshot, h, |c| sees.cluster(c)),
    });
    let gate = |method| viewer.identity.may_call(&viewer.access, method);
    let (accept, deny) = (gate(overview::ACCEPT_METHOD), gate(overview::DENY_METHOD));
    // Past the gate, a row's buttons by the grants on its cluster.
    let refused = if accept.is_ok() || deny.is_ok() {
        (o.pending.iter())
            .filter(|p| {
                let target = Target::Cluster { name: &p.name };
                let action = format!("accept cluster {}", p.name);
                act::may(
                    &viewer,
                    overview::ACCEPT_METHOD,
                    Verb::Write,
                    target,
                    &action,
                )
                .is_err()
            })
            .map(|p| p.name.clone())
            .collect()
    } else {
        HashSet::new()
    };
    let may = overview::Registrations {
        accept,
        deny,
        refused,
        csrf: &viewer.csrf,
    };
    let notice = match (q.get("done"), q.get("cluster")) {
        (Some(a @ ("accepted" | "denied")), Some(c)) => Some(format!("Cluster {c} {a}.")),
        _ => None,
    };
    let body = overview::render(&o, &may, notice.as_deref());
    page(StatusCode::OK, "Overview", Nav::Overview, &viewer, body)
}

/// `GET /works`.
pub(super) async fn works_page(State(d): D, viewer: Viewer, q: Params) -> Response {
    let (q, errors) = works::WorksQuery::parse(&q.0);
    // Statuses are held encoded: the page decodes each work's.
    // A team's works by its clusters' namespaces: no copy of the fleet's keys (review r4 §7).
    let keyed = match &viewer.sees {
        Visibility::All => d.works.with_prefix(""),
        sees => (d.works.namespaces_where(|c| sees.cluster(c)).iter())
            .flat_map(|c| d.works.with_prefix(&ObjectRef::prefix(c)))
            .collect(),
    };
    let all: Vec<_> = keyed
        .into_iter()
        .map(|(key, w)| (key, Arc::new(w.to_work())))
        .collect();
    let list = works::build(&all, &q);
    let body = works::render(&list, &q, &errors);
    page(ok_unless(&errors), "Works", Nav::Works, &viewer, body)
}

/// `GET /clusters`.
pub(super) async fn clusters_page(State(d): D, viewer: Viewer, q: Params) -> Response {
    let (q, errors) = clusters::ListQuery::parse(&q.0);
    let list = clusters::build(&seen(&viewer.sees, d.inventory.snapshot()), &q);
    let body = clusters::render(&list, &q, &errors);
    page(ok_unless(&errors), "Clusters", Nav::Clusters, &viewer, body)
}

/// `GET /clusters/<name>`.
pub(super) async fn cluster_page(
    State(d): D,
    Segments([name]): Segments<1>,
    viewer: Viewer,
) -> Response {
    let target = Target::Cluster { name: &name };
    if let Some(refused) = refused_read(&viewer, target, &format!("view cluster {name}")) {
        return refused;
    }
    let Some(c) = d.inventory.get(&name) else {
        let why = format!("No managed cluster {name:?}.");
        return problem(StatusCode::NOT_FOUND, Some(&viewer), &why);
    };
    let works: Vec<_> = d
        .works
        .with_prefix(&ObjectRef::prefix(&name))
        .into_iter()
        .map(|(_, w)| Arc::new(w.to_work()))
        .collect();
    let controlled = (d.units.controllers()).map(|ctl| controlled(&ctl, &name, &viewer.sees));
    let body = cluster::render(&c, &works, controlled.as_ref());
    page(StatusCode::OK, &name, Nav::Clusters, &viewer, body)
}

/// `GET /clusters/<cluster>/works/<name>`.
pub(super) async fn work_page(
    State(d): D,
    Segments([cluster, name]): Segments<2>,
    viewer: Viewer,
) -> Response {
    let target = Target::Cluster { name: &cluster };
    let action = format!("view ManifestWork {cluster}/{name}");
    if let Some(refused) = refused_read(&viewer, target, &action) {
        return refused;
    }
    let key = ObjectRef::new(cluster.as_str(), name.as_str()).inventory_key();
    let Some(w) = d.works.get(&key) else {
        let why = format!("No ManifestWork {name:?} on cluster {cluster:?}.");
        return problem(StatusCode::NOT_FOUND, Some(&viewer), &why);
    };
    let title = format!("{cluster}/{name}");
    page(
        StatusCode::OK,
        &title,
        Nav::Clusters,
        &viewer,
        work::render(&cluster, &w.to_work()),
    )
}

/// `GET /addons/<name>`.
pub(super) async fn addon_page(
    State(d): D,
    Segments([name]): Segments<1>,
    viewer: Viewer,
) -> Response {
    let Some(ctl) = d.units.controllers() else {
        return not_here(&viewer);
    };
    let addons = ctl.get::<crate::addon::AddOns>();
    let Some(cma) = addons.get_addon(&name) else {
        let why = format!("No ClusterManagementAddOn {name:?}.");
        return problem(StatusCode::NOT_FOUND, Some(&viewer), &why);
    };
    let installed = installed_seen(&addons, &name, &viewer.sees);
    // A team sees its own placements' rollout, not the fleet's counts over time.
    let (cma, history) = match &viewer.sees {
        Visibility::All => (cma, d.live.progress(&format!("addon:{name}"))),
        sees => (
            Arc::new(rollouts::fenced_addon(&cma, |ns| sees.namespace(ns))),
            Vec::new(),
        ),
    };
    let body = rollouts::render_addon(&cma, &installed, &history);
    page(StatusCode::OK, &name, Nav::Rollouts, &viewer, body)
}

/// `GET /placements`.
pub(super) async fn placements_page(State(d): D, viewer: Viewer) -> Response {
    let Some(ctl) = d.units.controllers() else {
        return not_here(&viewer);
    };
    let mut list = ctl.get::<crate::placement::Placements>().list("");
    list.retain(|v| {
        (v.placement.metadata.as_ref()).is_some_and(|m| viewer.sees.namespace(&m.namespace))
    });
    let body = placements::render_list(&list);
    page(StatusCode::OK, "Placements", Nav::Placements, &viewer, body)
}

/// The controllers' `kind` `namespace/name`, as `find` reads it: 503 on a hub not holding the
/// controllers, 403 when `viewer` may not read the namespace (audited), 404 when there is none.
fn namespaced<T>(
    d: &super::Deps,
    viewer: &Viewer,
    kind: &str,
    namespace: &str,
    name: &str,
    find: impl FnOnce(&crate::controller::Controllers) -> Option<T>,
) -> Result<T, Box<Response>> {
    let Some(ctl) = d.units.controllers() else {
        return Err(Box::new(not_here(viewer)));
    };
    let action = format!("view {kind} {namespace}/{name}");
    if let Some(refused) = refused_read(viewer, Target::Namespace { name: namespace }, &action) {
        return Err(Box::new(refused));
    }
    find(&ctl).ok_or_else(|| {
        let why = format!("No {kind} {namespace}/{name}.");
        Box::new(problem(StatusCode::NOT_FOUND, Some(viewer), &why))
    })
}

/// `GET /placements/<namespace>/<name>`: the placement and the scheduler's reasons.
pub(super) async fn placement_page(
    State(d): D,
    Segments([namespace, name]): Segments<2>,
    viewer: Viewer,
) -> Response {
    let found = namespaced(&d, &viewer, "Placement", &namespace, &name, |ctl| {
        let placements = ctl.get::<crate::placement::Placements>();
        Some((placements.get(&namespace, &name)?, placements))
    });
    let (view, placements) = match found {
        Ok(found) => found,
        Err(refused) => return *refused,
    };
    let debug = placements.debug(&namespace, &name).await;
    let debug = debug.map_err(|e| e.to_string());
    let body = placements::render(&view, debug.as_ref().map_err(String::as_str));
    let title = format!("{namespace}/{name}");
    page(StatusCode::OK, &title, Nav::Placements, &viewer, body)
}

/// `GET /rollouts`: replica sets and add-ons.
pub(super) async fn rollouts_page(State(d): D, viewer: Viewer) -> Response {
    let Some(ctl) = d.units.controllers() else {
        return not_here(&viewer);
    };
    let addons = ctl.get::<crate::addon::AddOns>();
    let with_installed: Vec<_> = addons
        .list_addons()
        .into_iter()
        .map(|a| {
            let name = a
                .metadata
                .as_ref()
                .map(|m| m.name.clone())
                .unwrap_or_default();
            let installed = installed_seen(&addons, &name, &viewer.sees);
            let a = match &viewer.sees {
                Visibility::All => a,
                sees => Arc::new(rollouts::fenced_addon(&a, |ns| sees.namespace(ns))),
            };
            (a, installed)
        })
        .collect();
    let mut sets = ctl.get::<crate::replicaset::ReplicaSets>().list("");
    sets.retain(|rs| (rs.metadata.as_ref()).is_some_and(|m| viewer.sees.namespace(&m.namespace)));
    let body = rollouts::render_list(&sets, &with_installed);
    page(StatusCode::OK, "Rollouts", Nav::Rollouts, &viewer, body)
}

/// `GET /rollouts/<namespace>/<name>`: a replica set's rollout, with its controls.
pub(super) async fn rollout_page(
    State(d): D,
    Segments([namespace, name]): Segments<2>,
    viewer: Viewer,
    q: Params,
) -> Response {
    let kind = "ManifestWorkReplicaSet";
    let found = namespaced(&d, &viewer, kind, &namespace, &name, |ctl| {
        ctl.get::<crate::replicaset::ReplicaSets>()
            .get(&namespace, &name)
    });
    let rs = match found {
        Ok(rs) => rs,
        Err(refused) => return *refused,
    };
    let notice = q
        .get("done")
        .filter(|a| rollouts::ACTIONS.contains(a))
        .map(|a| format!("Rollout {a}: done."));
    let history = d.live.progress(&format!("rollout:{namespace}/{name}"));
    let may = act::may(
        &viewer,
        rollouts::ROLLOUT_METHOD,
        Verb::Write,
        Target::Namespace { name: &namespace },
        &format!("change the rollout of ManifestWorkReplicaSet {namespace}/{name}"),
    );
    let body = rollouts::render(&rs, may, &viewer.csrf, notice.as_deref(), &history);
    let title = format!("{namespace}/{name}");
    page(StatusCode::OK, &title, Nav::Rollouts, &viewer, body)
}

/// `GET /policies`.
pub(super) async fn policies_page(State(d): D, viewer: Viewer) -> Response {
    let Some(ctl) = d.units.controllers() else {
        return not_here(&viewer);
    };
    let mut list = ctl.get::<crate::policy::Policies>().list_policies("");
    list.retain(|p| (p.metadata.as_ref()).is_some_and(|m| viewer.sees.namespace(&m.namespace)));
    let body = policies::render(&list);
    page(StatusCode::OK, "Policies", Nav::Policies, &viewer, body)
}

/// `GET /gitrepos`: the GitRepos of the namespaces the viewer sees.
pub(super) async fn gitrepos_page(State(d): D, viewer: Viewer) -> Response {
    let Some(ctl) = d.units.controllers() else {
        return not_here(&viewer);
    };
    let mut list = ctl.get::<crate::gitops::GitRepos>().list("");
    list.retain(|r| (r.metadata.as_ref()).is_some_and(|m| viewer.sees.namespace(&m.namespace)));
    let body = gitrepos::render_list(&list);
    page(
        StatusCode::OK,
        "Git repositories",
        Nav::GitRepos,
        &viewer,
        body,
    )
}

/// `GET /gitrepos/<namespace>/<name>[?state=…]`: one GitRepo, its bundles, and its clusters'
/// rows (those the viewer sees; a state that is not Fleet's is a 400 naming the states).
pub(super) async fn gitrepo_page(
    State(d): D,
    Segments([namespace, name]): Segments<2>,
    viewer: Viewer,
    q: Params,
) -> Response {
    let found = namespaced(&d, &viewer, "GitRepo", &namespace, &name, |ctl| {
        let repos = ctl.get::<crate::gitops::GitRepos>();
        Some((repos.get(&namespace, &name)?, repos))
    });
    let (repo, repos) = match found {
        Ok(found) => found,
        Err(refused) => return *refused,
    };
    let state = q.get("state").unwrap_or_default();
    let (mut rows, truncated) = match repos.clusters(&namespace, &name, state) {
        Ok(found) => found,
        Err(e) => return problem(StatusCode::BAD_REQUEST, Some(&viewer), &e.to_string()),
    };
    rows.retain(|r| viewer.sees.cluster(&r.cluster));
    let body = gitrepos::render(&repo, &rows, state, truncated);
    let title = format!("{namespace}/{name}");
    page(StatusCode::OK, &title, Nav::GitRepos, &viewer, body)
}

/// The add-on `name` installed on the clusters `sees` admits.
fn installed_seen(
    addons: &crate::addon::AddOns,
    name: &str,
    sees: &Visibility,
) -> Vec<Arc<flotilla_api::v1::ManagedClusterAddOn>> {
    addons.installed_on(name, |c| sees.cluster(c))
}

/// What the controllers know of cluster `name`, of the namespaces `sees` admits.
fn controlled(
    ctl: &crate::controller::Controllers,
    name: &str,
    sees: &Visibility,
) -> cluster::Controlled {
    let in_sight =
        |m: Option<&flotilla_api::v1::ObjectMeta>| m.is_some_and(|m| sees.namespace(&m.namespace));
    let policies = ctl
        .get::<crate::policy::Policies>()
        .list_policies("")
        .iter()
        .filter(|p| in_sight(p.metadata.as_ref()))
        .filter_map(|p| {
            let c = p
                .status
                .as_ref()?
                .status
                .iter()
                .find(|c| c.cluster_name == name)?;
            let m = p.metadata.as_ref()?;
            Some((m.namespace.clone(), m.name.clone(), c.compliant.clone()))
        })
        .collect();
    let placements = ctl
        .get::<crate::placement::Placements>()
        .list("")
        .iter()
        .filter(|v| v.clusters().contains(name) && in_sight(v.placement.metadata.as_ref()))
        .filter_map(|v| {
            v.placement
                .metadata
                .as_ref()
                .map(|m| (m.namespace.clone(), m.name.clone()))
        })
        .collect();
    cluster::Controlled {
        addons: ctl
            .get::<crate::addon::AddOns>()
            .list_cluster_addons(name, ""),
        policies,
        placements,
    }
}
