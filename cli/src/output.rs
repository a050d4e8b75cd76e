//! Output: kubectl-style tables with clusteradm's columns, and JSON/YAML in the OCM shapes.

use flotilla_api::meta::{self, CLUSTERSET_LABEL, COND_AVAILABLE, COND_CLUSTERSET_EMPTY};
use flotilla_api::ocm;
use flotilla_api::v1::{ManagedCluster, ManagedClusterSetBinding, ManagedClusterSetView};
use serde::Serialize;

/// Output format (`-o`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns.
    Table,
    /// JSON in the OCM shape.
    Json,
    /// YAML in the OCM shape.
    Yaml,
}

/// Renders rows as left-aligned columns separated by three spaces (kubectl's layout).
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, cell) in r.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<w$}   ", w = widths[i]));
            }
        }
        s.trim_end().to_string()
    };
    let mut out = line(header.to_vec());
    out.push('\n');
    for r in rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
        out.push('\n');
    }
    out
}

/// Serialises one object or a List in the chosen structured format.
pub fn structured<T: Serialize>(
    format: Format,
    items: Vec<T>,
    single: bool,
) -> Result<String, String> {
    let to = |v: &dyn erased::Ser| -> Result<String, String> {
        match format {
            Format::Json => v.json(),
            _ => v.yaml(),
        }
    };
    if single && items.len() == 1 {
        let item = items.into_iter().next().expect("one item");
        to(&item)
    } else {
        to(&ocm::List::new(items))
    }
}

mod erased {
    use serde::Serialize;

    pub trait Ser {
        fn json(&self) -> Result<String, String>;
        fn yaml(&self) -> Result<String, String>;
    }

    impl<T: Serialize> Ser for T {
        fn json(&self) -> Result<String, String> {
            serde_json::to_string_pretty(self)
                .map(|s| s + "\n")
                .map_err(|e| e.to_string())
        }
        fn yaml(&self) -> Result<String, String> {
            serde_yaml::to_string(self).map_err(|e| e.to_string())
        }
    }
}

/// Renders items as a table (`columns`, one `row` each) or as OCM-shaped JSON/YAML (`to_ocm`;
/// a single named object prints alone when `single`, otherwise a `kind: List`).
pub fn render<T, O: Serialize>(
    format: Format,
    items: &[T],
    columns: &[&str],
    row: impl Fn(&T) -> Vec<String>,
    to_ocm: impl Fn(&T) -> O,
    single: bool,
) -> Result<String, String> {
    match format {
        Format::Table => {
            let rows: Vec<_> = items.iter().map(row).collect();
            Ok(table(columns, &rows))
        }
        f => structured(f, items.iter().map(to_ocm).collect(), single),
    }
}

/// The `Conditions:` section of a `describe`: an indented table of type, status, reason, when
/// the status last changed and message.
pub fn conditions_block(conditions: &[ocm::Condition]) -> String {
    let rows: Vec<Vec<String>> = conditions
        .iter()
        .map(|c| {
            vec![
                c.type_.clone(),
                c.status.clone(),
                c.reason.clone(),
                c.last_transition_time.clone(),
                c.message.clone(),
            ]
        })
        .collect();
    let mut s = String::from("Conditions:\n");
    for line in table(&["TYPE", "STATUS", "REASON", "SINCE", "MESSAGE"], &rows).lines() {
        s.push_str(&format!("  {line}\n"));
    }
    s
}

/// `get clusters` columns.
pub const CLUSTER_COLUMNS: [&str; 7] = [
    "NAME",
    "ACCEPTED",
    "AVAILABLE",
    "CLUSTERSET",
    "CPU",
    "MEMORY",
    "KUBERNETES VERSION",
];

/// One `get clusters` row.
pub fn cluster_row(c: &ManagedCluster) -> Vec<String> {
    let m = c.metadata.clone().unwrap_or_default();
    let st = c.status.clone().unwrap_or_default();
    vec![
        m.name,
        c.spec
            .as_ref()
            .is_some_and(|s| s.hub_accepts_client)
            .to_string(),
        meta::condition_status(&st.conditions, COND_AVAILABLE)
            .unwrap_or("Unknown")
            .to_string(),
        m.labels.get(CLUSTERSET_LABEL).cloned().unwrap_or_default(),
        st.capacity.get("cpu").cloned().unwrap_or_default(),
        st.capacity.get("memory").cloned().unwrap_or_default(),
        st.version.map(|v| v.kubernetes).unwrap_or_default(),
    ]
}

/// `get clustersets` columns.
pub const CLUSTERSET_COLUMNS: [&str; 3] = ["NAME", "BOUND NAMESPACES", "STATUS"];

/// One `get clustersets` row.
pub fn clusterset_row(v: &ManagedClusterSetView) -> Vec<String> {
    let set = v.set.clone().unwrap_or_default();
    let status = set
        .status
        .as_ref()
        .and_then(|s| meta::find_condition(&s.conditions, COND_CLUSTERSET_EMPTY))
        .map(|c| c.message.clone())
        .unwrap_or_default();
    vec![
        set.metadata.map(|m| m.name).unwrap_or_default(),
        v.bound_namespaces.join(","),
        status,
    ]
}

/// `get clustersetbindings` columns.
pub const BINDING_COLUMNS: [&str; 4] = ["NAMESPACE", "NAME", "CLUSTERSET", "BOUND"];

/// One binding row.
pub fn binding_row(b: &ManagedClusterSetBinding) -> Vec<String> {
    let m = b.metadata.clone().unwrap_or_default();
    let bound = b
        .status
        .as_ref()
        .and_then(|s| meta::condition_status(&s.conditions, meta::COND_BOUND))
        .unwrap_or("Unknown")
        .to_string();
    vec![
        m.namespace,
        m.name,
        b.spec
            .as_ref()
            .map(|s| s.cluster_set.clone())
            .unwrap_or_default(),
        bound,
    ]
}

/// `get works` columns.
pub const WORK_COLUMNS: [&str; 5] = [
    "NAME",
    "CLUSTER",
    "NUMBER OF MANIFESTS",
    "APPLIED",
    "AVAILABLE",
];

/// One `get works` row.
pub fn work_row(w: &flotilla_api::v1::ManifestWork) -> Vec<String> {
    use flotilla_api::work::conditions::{APPLIED, AVAILABLE};
    let m = w.metadata.clone().unwrap_or_default();
    let conds = w
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    let n = w
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

/// A human description of one work (`describe work`).
pub fn describe_work(w: &flotilla_api::v1::ManifestWork) -> String {
    let o = ocm::ManifestWork::from(w);
    let mut s = String::new();
    s.push_str(&format!("Name:          {}\n", o.metadata.name));
    s.push_str(&format!("Cluster:       {}\n", o.metadata.namespace));
    s.push_str(&format!("Generation:    {}\n", o.metadata.generation));
    s.push_str(&format!(
        "Created:       {}\n",
        o.metadata.creation_timestamp
    ));
    if !o.metadata.deletion_timestamp.is_empty() {
        s.push_str(&format!(
            "Deleting since: {}\n",
            o.metadata.deletion_timestamp
        ));
    }
    let observed = w.hub.as_ref().map_or(0, |h| h.observed_generation);
    s.push_str(&format!("Observed generation (agent): {observed}\n"));
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

/// `proxy get` columns.
pub const PROXY_COLUMNS: [&str; 4] = ["NAMESPACE", "NAME", "KIND", "STATUS"];

/// One `proxy get` row: readiness for workloads, phase for pods and jobs.
pub fn proxy_row(o: &serde_json::Value) -> Vec<String> {
    let st = &o["status"];
    let status = if let Some(r) = st.get("replicas").and_then(|v| v.as_i64()) {
        format!("{}/{r} ready", st["readyReplicas"].as_i64().unwrap_or(0))
    } else if let Some(d) = st.get("desiredNumberScheduled").and_then(|v| v.as_i64()) {
        format!("{}/{d} ready", st["numberReady"].as_i64().unwrap_or(0))
    } else if let Some(p) = st.get("phase").and_then(|v| v.as_str()) {
        p.to_string()
    } else if st.get("succeeded").is_some() || st.get("failed").is_some() {
        format!(
            "succeeded {} failed {}",
            st["succeeded"].as_i64().unwrap_or(0),
            st["failed"].as_i64().unwrap_or(0)
        )
    } else {
        String::new()
    };
    vec![
        o["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_string(),
        o["metadata"]["name"].as_str().unwrap_or("").to_string(),
        o["kind"].as_str().unwrap_or("").to_string(),
        status,
    ]
}

/// A human description of one cluster (`describe cluster`).
pub fn describe_cluster(c: &ManagedCluster) -> String {
    let o = ocm::ManagedCluster::from(c);
    let mut s = String::new();
    s.push_str(&format!("Name:                {}\n", o.metadata.name));
    s.push_str(&format!("UID:                 {}\n", o.metadata.uid));
    s.push_str(&format!(
        "Created:             {}\n",
        o.metadata.creation_timestamp
    ));
    s.push_str(&format!(
        "Hub accepts client:  {}\n",
        o.spec.hub_accepts_client
    ));
    s.push_str(&format!(
        "Lease duration:      {}s\n",
        o.spec.lease_duration_seconds
    ));
    s.push_str("Labels:\n");
    for (k, v) in &o.metadata.labels {
        s.push_str(&format!("  {k}={v}\n"));
    }
    s.push_str("Taints:\n");
    for t in &o.spec.taints {
        s.push_str(&format!(
            "  {}={}:{} (added {})\n",
            t.key, t.value, t.effect, t.time_added
        ));
    }
    s.push_str(&format!(
        "Kubernetes version:  {}\n",
        o.status.version.kubernetes
    ));
    s.push_str("Capacity:\n");
    for (k, v) in &o.status.capacity {
        let alloc = o.status.allocatable.get(k).cloned().unwrap_or_default();
        s.push_str(&format!("  {k}: {v} (allocatable {alloc})\n"));
    }
    s.push_str("Claims:\n");
    for c in &o.status.cluster_claims {
        s.push_str(&format!("  {}={}\n", c.name, c.value));
    }
    s.push_str(&conditions_block(&o.status.conditions));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_api::v1::{ManagedClusterSpec, ManagedClusterStatus, ObjectMeta};

    fn cluster() -> ManagedCluster {
        let mut st = ManagedClusterStatus::default();
        meta::set_condition(
            &mut st.conditions,
            COND_AVAILABLE,
            "True",
            "ManagedClusterAvailable",
            "",
        );
        st.capacity.insert("cpu".into(), "8".into());
        st.capacity.insert("memory".into(), "32Gi".into());
        ManagedCluster {
            metadata: Some(ObjectMeta {
                name: "cluster1".into(),
                labels: [(CLUSTERSET_LABEL.to_string(), "default".to_string())].into(),
                resource_version: 7,
                ..Default::default()
            }),
            spec: Some(ManagedClusterSpec {
                hub_accepts_client: true,
                lease_duration_seconds: 60,
                taints: vec![],
            }),
            status: Some(st),
            hub: None,
        }
    }

    #[test]
    fn cluster_table_uses_clusteradm_columns() {
        let out = table(&CLUSTER_COLUMNS, &[cluster_row(&cluster())]);
        let mut lines = out.lines();
        assert_eq!(
            lines.next().unwrap(),
            "NAME       ACCEPTED   AVAILABLE   CLUSTERSET   CPU   MEMORY   KUBERNETES VERSION"
        );
        assert!(
            lines
                .next()
                .unwrap()
                .starts_with("cluster1   true       True        default      8     32Gi")
        );
    }

    #[test]
    fn lists_print_as_kind_list_in_the_ocm_shape() {
        let items = vec![ocm::ManagedCluster::from(&cluster())];
        let yaml = structured(Format::Yaml, items.clone(), false).unwrap();
        assert!(
            yaml.starts_with("apiVersion: v1\nkind: List\nitems:"),
            "{yaml}"
        );
        assert!(yaml.contains("kind: ManagedCluster"));
        assert!(yaml.contains("hubAcceptsClient: true"));
        assert!(yaml.contains("resourceVersion: '7'"), "{yaml}");
        let json = structured(Format::Json, items, true).unwrap();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["apiVersion"], "cluster.open-cluster-management.io/v1");
        assert_eq!(v["status"]["conditions"][0]["type"], COND_AVAILABLE);
    }
}
