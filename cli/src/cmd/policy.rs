//! `flotilla policy status NAME [-n NS] [--watch]`: a policy's compliance — per binding the
//! clusters its placement decides that are Compliant, and over all decided clusters how many are
//! Compliant, NonCompliant, Pending or silent — as progress bars.
//! Without `--watch` it prints once; with it, it redraws until every decided cluster is
//! Compliant. A policy bound to no cluster is never done.
//!
//! `flotilla policy render NAME --cluster C`: the copy the hub would send that cluster now (a
//! dry run), hub templates resolved for it, protected values sealed to its agent (never in
//! plaintext); `flotilla policy explain NAME --cluster C`: why the cluster is where it is —
//! decided or not, what it was sent and whether that is still the copy, what its hub templates
//! read, each template's hub error and the agent's last report.

use super::progress::{Step, follow, labelled_bar};
use crate::hub::Hub;
use anyhow::Result;
use flotilla_api::v1::{GetPolicyRequest, Policy, RenderPolicyRequest, RenderedPolicy};
use std::fmt::Write;

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
    /// The copy of a policy the hub would send one cluster now, as YAML (a dry run): hub
    /// templates resolved for it; a template that failed carries OCM's hub-templates-error
    /// annotation; protected values stay sealed to the cluster's agent.
    Render {
        /// Policy name.
        name: String,
        /// Namespace.
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
        /// The cluster to render for.
        #[arg(short = 'c', long)]
        cluster: String,
    },
    /// Why a policy is where it is on one cluster: decided or not, the generation sent and
    /// whether it is still the copy, the hub objects its templates read, each template's hub
    /// template error and the agent's last report.
    Explain {
        /// Policy name.
        name: String,
        /// Namespace.
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
        /// The cluster to explain.
        #[arg(short = 'c', long)]
        cluster: String,
    },
}

/// Runs `policy`.
pub async fn run(hub: &Hub, what: PolicyWhat) -> Result<()> {
    let (name, namespace, watch) = match what {
        PolicyWhat::Status {
            name,
            namespace,
            watch,
        } => (name, namespace, watch),
        PolicyWhat::Render {
            name,
            namespace,
            cluster,
        } => {
            let r = rendered(hub, name, namespace, cluster).await?;
            print!("{}", render_yaml(&r)?);
            return Ok(());
        }
        PolicyWhat::Explain {
            name,
            namespace,
            cluster,
        } => {
            let r = rendered(hub, name, namespace, cluster.clone()).await?;
            print!("{}", explain(&r, &cluster));
            return Ok(());
        }
    };
    follow(watch, || {
        let r = GetPolicyRequest {
            namespace: namespace.clone(),
            name: name.clone(),
            ..Default::default()
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

async fn rendered(
    hub: &Hub,
    name: String,
    namespace: String,
    cluster: String,
) -> Result<RenderedPolicy> {
    let r = RenderPolicyRequest {
        namespace,
        name,
        cluster,
    };
    hub.idempotent(async || hub.policies().render_policy(r.clone()).await)
        .await
}

/// `policy render`: the copy in OCM's shape, after a comment per template that failed.
pub fn render_yaml(r: &RenderedPolicy) -> Result<String> {
    let mut out = String::new();
    for e in &r.errors {
        for (i, line) in e.lines().enumerate() {
            let lead = if i == 0 {
                "# hub template error: "
            } else {
                "#   "
            };
            let _ = writeln!(out, "{lead}{line}");
        }
    }
    let copy = r.copy.clone().unwrap_or_default();
    out.push_str(&serde_yaml::to_string(
        &flotilla_api::ocm::policy::Policy::from(&copy),
    )?);
    Ok(out)
}

/// A template's `kind name` and its hub template error, from the copy.
fn templates_of(copy: &Policy) -> Vec<(String, Option<String>)> {
    use flotilla_api::policy::template::protected::{HUB_TEMPLATES_ERROR, annotation};
    let spec = copy.spec.clone().unwrap_or_default();
    spec.policy_templates
        .iter()
        .map(|t| {
            let v: serde_json::Value =
                serde_json::from_slice(&t.object_definition).unwrap_or_default();
            let name = format!(
                "{} {}",
                v["kind"].as_str().unwrap_or("?"),
                v["metadata"]["name"].as_str().unwrap_or("?")
            );
            (
                name,
                annotation(&v, HUB_TEMPLATES_ERROR).map(str::to_string),
            )
        })
        .collect()
}

/// `policy explain`: what the hub decided and sent for the cluster, what its templates read,
/// and what the agent last reported.
pub fn explain(r: &RenderedPolicy, cluster: &str) -> String {
    let copy = r.copy.clone().unwrap_or_default();
    let spec = copy.spec.clone().unwrap_or_default();
    let root = copy
        .metadata
        .as_ref()
        .map(|m| m.name.replacen('.', "/", 1))
        .unwrap_or_default();
    let mut out = format!(
        "policy {root} on cluster {cluster}
"
    );
    let _ = writeln!(
        out,
        "Decided:      {}",
        if r.decided {
            format!("yes ({})", spec.remediation_action)
        } else {
            "no: no binding of the policy decides this cluster (rendered as if one did)".into()
        }
    );
    let record = r.record.clone().unwrap_or_default();
    let sent = match (record.generation, r.current) {
        (0, _) => "nothing yet".to_string(),
        (g, true) => format!("generation {g}, the copy the hub resolves now"),
        (g, false) => format!(
            "generation {g}; the copy the hub resolves now differs (the next reconcile sends it)"
        ),
    };
    let _ = writeln!(out, "Sent:         {sent}");
    let report = record.report.clone().unwrap_or_default();
    let reported = match report.compliant.as_str() {
        "" => "nothing yet".to_string(),
        c => format!("{c} (about generation {})", report.observed_generation),
    };
    let _ = writeln!(out, "Reported:     {reported}");
    let _ = writeln!(
        out,
        "Hub reads:    {}",
        if r.reads.is_empty() {
            "none".to_string()
        } else {
            r.reads.join(", ")
        }
    );
    let _ = writeln!(out, "Templates:");
    for (name, error) in templates_of(&copy) {
        let state = report
            .details
            .iter()
            .find(|d| format!("{} {}", d.template_kind, d.template_name) == name)
            .map(|d| {
                (
                    d.compliant.clone(),
                    d.history.first().map(|h| h.message.clone()),
                )
            });
        let compliant = match &state {
            Some((c, _)) if !c.is_empty() => c.as_str(),
            _ => "-",
        };
        let _ = writeln!(out, "  {name}: {compliant}");
        if let Some(e) = error {
            let _ = writeln!(out, "    hub template error: {e}");
        }
        if let Some((_, Some(m))) = state {
            let _ = writeln!(out, "    last message: {m}");
        }
    }
    out
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
