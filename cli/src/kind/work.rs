//! ManifestWorks: `get works` and `describe work` (per-manifest conditions and feedback).

use super::{Delete, Gone, Kind, Target};
use crate::hub::{Deleted, Hub};
use crate::output::{conditions_block, describe_head};
use flotilla_api::meta;
use flotilla_api::ocm;
use flotilla_api::v1::{ManifestWork, ObjectMeta};
use flotilla_api::work::conditions::{APPLIED, AVAILABLE};

/// Works asked for per page (a work carries up to 500 KiB of manifests).
const WORK_PAGE_SIZE: u32 = 500;

impl Kind for ManifestWork {
    type Ocm = ocm::ManifestWork;
    const COLUMNS: &'static [&'static str] = &[
        "NAME",
        "CLUSTER",
        "NUMBER OF MANIFESTS",
        "APPLIED",
        "AVAILABLE",
    ];

    fn metadata(&self) -> Option<&ObjectMeta> {
        self.metadata.as_ref()
    }

    /// A work being deleted shows `(deleting)` after its name.
    fn row(&self) -> Vec<String> {
        let m = self.metadata.clone().unwrap_or_default();
        let conds = self
            .status
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default();
        let n = self
            .spec
            .as_ref()
            .and_then(|s| s.workload.as_ref())
            .map_or(0, |wl| wl.manifests.len());
        let mut name = m.name;
        if m.deletion_timestamp.is_some() {
            name.push_str(" (deleting)");
        }
        vec![
            name,
            m.namespace,
            n.to_string(),
            meta::condition_status(&conds, APPLIED)
                .unwrap_or("")
                .to_string(),
            meta::condition_status(&conds, AVAILABLE)
                .unwrap_or("")
                .to_string(),
        ]
    }

    fn to_ocm(&self) -> ocm::ManifestWork {
        ocm::ManifestWork::from(self)
    }

    fn none(_: &super::Query, _: &str) -> Option<String> {
        Some("No works found.".into())
    }

    /// The named work of a cluster, or every work (of the cluster when given) matching the
    /// selector.
    async fn fetch(hub: &crate::hub::Hub, query: &super::Query) -> anyhow::Result<Vec<Self>> {
        match (query.names.first(), &query.namespace) {
            (Some(name), Some(cluster)) => {
                let r = flotilla_api::v1::GetWorkRequest {
                    cluster: cluster.clone(),
                    name: name.clone(),
                };
                Ok(vec![
                    hub.idempotent(async || hub.works().get_work(r.clone()).await)
                        .await?,
                ])
            }
            (Some(_), None) => anyhow::bail!("get works NAME needs --cluster CLUSTER"),
            (None, cluster) => {
                let cluster = cluster.clone().unwrap_or_default();
                crate::pager::all(|page_token| {
                    let r = flotilla_api::v1::ListWorksRequest {
                        cluster: cluster.clone(),
                        label_selector: query.selector.clone(),
                        page_size: WORK_PAGE_SIZE,
                        page_token,
                    };
                    async move {
                        hub.idempotent(async || hub.works().list_works(r.clone()).await)
                            .await
                    }
                })
                .await
            }
        }
    }
}

/// A human description of one work (`describe work`).
pub fn describe(w: &ManifestWork) -> String {
    let o = ocm::ManifestWork::from(w);
    let m = &o.metadata;
    let mut s = describe_head(
        &m.name,
        ("Cluster:", &m.namespace),
        m.generation,
        &m.creation_timestamp,
    );
    if !o.metadata.deletion_timestamp.is_empty() {
        s.push_str(&format!(
            "Deleting since: {}\n",
            o.metadata.deletion_timestamp
        ));
    }
    let observed = w.hub.as_ref().map_or(0, |h| h.observed_generation);
    s.push_str(&format!("Observed generation (agent): {observed}\n"));
    s.push_str(&format!(
        "Executor: {}\n",
        flotilla_api::work::Executor::of_work(w).map_or_else(
            || "(none: the agent's own identity)".to_string(),
            |e| e.username()
        )
    ));
    let status = o.status.unwrap_or_default();
    s.push_str(&conditions_block(&status.conditions));
    s.push_str("Manifests:\n");
    for (i, m) in o.spec.workload.manifests.iter().enumerate() {
        let kind = m["kind"].as_str().unwrap_or("?");
        let name = m["metadata"]["name"].as_str().unwrap_or("?");
        s.push_str(&format!("  [{i}] {kind} {name}\n"));
        if let Some(ms) = status
            .resource_status
            .manifests
            .iter()
            .find(|x| x.resource_meta.ordinal == i as i32)
        {
            for c in &ms.conditions {
                let why = if c.message.is_empty() {
                    c.reason.clone()
                } else {
                    format!("{}: {}", c.reason, c.message)
                };
                s.push_str(&format!("      {}={} ({why})\n", c.type_, c.status));
            }
            for v in &ms.status_feedback.values {
                let fv = &v.field_value;
                let shown = fv
                    .integer
                    .map(|x| x.to_string())
                    .or_else(|| fv.string.clone())
                    .or_else(|| fv.boolean.map(|b| b.to_string()))
                    .or_else(|| fv.json_raw.clone())
                    .unwrap_or_default();
                s.push_str(&format!(
                    "      feedback {} = {shown} ({})\n",
                    v.name, fv.type_
                ));
            }
        }
    }
    s
}

impl Delete for ManifestWork {
    /// The hub answers with the work as it goes; its delete option says how.
    async fn delete(hub: &Hub, target: Target) -> anyhow::Result<Gone> {
        let r = flotilla_api::v1::DeleteWorkRequest {
            cluster: target.namespace,
            name: target.name,
        };
        let d = hub
            .delete(async || hub.works().delete_work(r.clone()).await)
            .await?;
        let (name, cluster) = (&r.name, &r.cluster);
        let policy = match &d {
            Deleted::Now(w) => w
                .spec
                .as_ref()
                .and_then(|s| s.delete_option.as_ref())
                .map(|d| d.propagation_policy.clone())
                .filter(|p| !p.is_empty())
                .unwrap_or_else(|| "Foreground".into()),
            Deleted::Earlier => String::new(),
        };
        let line = if policy.is_empty() {
            format!("manifestwork/{name} deleting on cluster {cluster}")
        } else {
            format!("manifestwork/{name} deleting on cluster {cluster} (propagation {policy})")
        };
        Ok(Gone::new(d, line))
    }
}
