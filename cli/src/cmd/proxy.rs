//! `proxy CLUSTER get KIND [NAME]`: read-only queries of a spoke's resources through its agent,
//! shown with a status column that fits the kind (readiness, phase, job counts).

use crate::hub::Hub;
use crate::output::{self, Format};
use anyhow::{Context, Result};
use clap::Subcommand;
use flotilla_api::v1::ProxyGetRequest;
use serde_json::Value;

/// `proxy` queries.
#[derive(Subcommand, Debug)]
pub enum ProxyWhat {
    /// Get resources of a kind (Deployment, deployments, cm, ...).
    Get {
        /// Kind or resource.
        kind: String,
        /// Name (all objects of the kind when omitted).
        name: Option<String>,
        /// Namespace (all namespaces when omitted).
        #[arg(short = 'n', long)]
        namespace: Option<String>,
    },
}

/// `proxy get` columns.
const COLUMNS: [&str; 4] = ["NAMESPACE", "NAME", "KIND", "STATUS"];

/// Runs `proxy` against `cluster`.
pub async fn run(hub: &Hub, format: Format, cluster: String, what: ProxyWhat) -> Result<()> {
    let ProxyWhat::Get {
        kind,
        name,
        namespace,
    } = what;
    let single = name.is_some();
    let r = ProxyGetRequest {
        cluster,
        kind,
        namespace: namespace.unwrap_or_default(),
        name: name.unwrap_or_default(),
    };
    let objects = hub.call(hub.works().proxy(r)).await?.objects;
    let values: Vec<Value> = objects
        .iter()
        .map(|o| serde_json::from_str(o).context("the agent returned invalid JSON"))
        .collect::<Result<_>>()?;
    let text = match format {
        Format::Table | Format::Wide if values.is_empty() => {
            eprintln!("No resources found.");
            return Ok(());
        }
        Format::Table | Format::Wide => {
            output::table(&COLUMNS, &values.iter().map(row).collect::<Vec<_>>())
        }
        f => output::structured(f, values, single)?,
    };
    print!("{text}");
    Ok(())
}

/// One row: readiness for workloads, phase for pods, counts for jobs.
fn row(o: &Value) -> Vec<String> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn status_fits_the_kind() {
        let deployment = json!({"kind": "Deployment", "metadata": {"namespace": "default", "name": "hello"},
            "status": {"replicas": 2, "readyReplicas": 1}});
        assert_eq!(
            row(&deployment),
            ["default", "hello", "Deployment", "1/2 ready"]
        );
        let daemons =
            json!({"kind": "DaemonSet", "status": {"desiredNumberScheduled": 3, "numberReady": 3}});
        assert_eq!(row(&daemons)[3], "3/3 ready");
        let pod = json!({"kind": "Pod", "status": {"phase": "Running"}});
        assert_eq!(row(&pod)[3], "Running");
        let job = json!({"kind": "Job", "status": {"succeeded": 1}});
        assert_eq!(row(&job)[3], "succeeded 1 failed 0");
        let config = json!({"kind": "ConfigMap", "metadata": {"name": "cfg"}});
        assert_eq!(row(&config), ["", "cfg", "ConfigMap", ""]);
    }
}
