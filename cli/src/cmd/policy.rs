//! `flotilla policy status NAME [-n NS] [--watch]`: a policy's compliance — per binding the
//! clusters its placement decides that are Compliant, and over all decided clusters how many are
//! Compliant, NonCompliant, Pending or silent — as progress bars.
//! Without `--watch` it prints once; with it, it redraws until every decided cluster is
//! Compliant. A policy bound to no cluster is never done.

use super::progress::{Step, follow, labelled_bar};
use crate::hub::Hub;
use anyhow::Result;
use flotilla_api::v1::{GetPolicyRequest, Policy};

/// `flotilla policy` subcommands.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum PolicyWhat {
    /// Compliance of a policy across its clusters.
    Status {
        /// Policy name.
        name: String,
        /// Namespace.
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
        /// Redraw until every decided cluster is Compliant.
        #[arg(short, long)]
        watch: bool,
    },
}

/// Runs `policy`.
pub async fn run(hub: &Hub, what: PolicyWhat) -> Result<()> {
    let PolicyWhat::Status {
        name,
        namespace,
        watch,
    } = what;
    follow(watch, || {
        let r = GetPolicyRequest {
            namespace: namespace.clone(),
            name: name.clone(),
        };
        async move {
            let p = hub
                .idempotent(async || hub.policies().get_policy(r.clone()).await)
                .await?;
            Ok(render(&p))
        }
    })
    .await
}

/// The text and whether the policy is done (Compliant on every decided cluster).
pub fn render(p: &Policy) -> (String, Step) {
    let st = p.status.clone().unwrap_or_default();
    let m = p.metadata.clone().unwrap_or_default();
    let count = |state: &str| st.status.iter().filter(|c| c.compliant == state).count() as i32;
    let total = st.status.len() as i32;
    let disabled = p.spec.as_ref().is_some_and(|s| s.disabled);
    let mut out = format!(
        "policy {}/{}: {}\n",
        m.namespace,
        m.name,
        match (disabled, st.compliant.as_str()) {
            (true, _) => "Disabled",
            (false, "") if st.placement.is_empty() => "not bound to any cluster",
            (false, "") => "waiting for every decided cluster to report",
            (false, c) => c,
        }
    );
    let state: std::collections::HashMap<&str, &str> = st
        .status
        .iter()
        .map(|c| (c.cluster_name.as_str(), c.compliant.as_str()))
        .collect();
    for pl in &st.placement {
        out.push_str(&format!("  binding {}\n", crate::kind::policy::binding(pl)));
        let ok = pl
            .clusters
            .iter()
            .filter(|c| state.get(c.as_str()) == Some(&"Compliant"))
            .count() as i32;
        out.push_str(&format!(
            "{} compliant\n",
            labelled_bar("    decided", ok, pl.clusters.len() as i32)
        ));
    }
    out.push_str(&format!(
        "{} compliant  (non-compliant {}, pending {}, not reported {})\n",
        labelled_bar("  clusters", count("Compliant"), total),
        count("NonCompliant"),
        count("Pending"),
        count(""),
    ));
    let done = !disabled && total > 0 && st.compliant == "Compliant";
    (out, if done { Step::Done } else { Step::Wait })
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_api::v1::{ClusterCompliance, ObjectMeta, PolicyPlacementStatus, PolicyStatus};

    fn policy(root: &str, clusters: &[&str]) -> Policy {
        Policy {
            metadata: Some(ObjectMeta {
                name: "p".into(),
                namespace: "default".into(),
                ..Default::default()
            }),
            spec: None,
            status: Some(PolicyStatus {
                compliant: root.into(),
                placement: vec![PolicyPlacementStatus {
                    placement_binding: "b".into(),
                    placement: "all".into(),
                    clusters: vec!["c0".into(), "c1".into()],
                    ..Default::default()
                }],
                status: clusters
                    .iter()
                    .enumerate()
                    .map(|(i, c)| ClusterCompliance {
                        cluster_name: format!("c{i}"),
                        cluster_namespace: format!("c{i}"),
                        compliant: c.to_string(),
                    })
                    .collect(),
            }),
        }
    }

    #[test]
    fn progress_counts_each_state_and_is_done_only_when_compliant_everywhere() {
        let (text, step) = render(&policy("", &["Compliant", "NonCompliant", ""]));
        assert_eq!(step, Step::Wait);
        assert!(text.contains("binding b → Placement all"), "{text}");
        assert!(text.contains("] 1/2 compliant"), "per binding: {text}");
        assert!(
            text.contains("1/3 compliant  (non-compliant 1, pending 0, not reported 1)"),
            "{text}"
        );
        let (_, step) = render(&policy("Compliant", &["Compliant", "Compliant"]));
        assert_eq!(step, Step::Done);
        let (text, step) = render(&Policy::default());
        assert_eq!(step, Step::Wait, "bound to nothing is never done");
        assert!(text.contains("not bound to any cluster"), "{text}");
    }
}
