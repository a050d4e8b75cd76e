//! `flotilla rollout status NAME [-n NS] [--watch]`: where a ManifestWorkReplicaSet's rollout
//! stands, per placement and overall, as progress bars. Without `--watch` it prints once (for
//! scripts); with it, it redraws until the rollout completes or stops. Exits non-zero when the
//! rollout stopped on a breach.

use super::progress::{LABEL, Step, follow, group_bars, labelled_bar};
use crate::hub::Hub;
use anyhow::Result;
use flotilla_api::meta;
use flotilla_api::v1::{GetReplicaSetRequest, ManifestWorkReplicaSet, ReplicaSetSummary};

/// `flotilla rollout` subcommands.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum RolloutWhat {
    /// Progress of a replica set's rollout.
    Status {
        /// ManifestWorkReplicaSet name.
        name: String,
        /// Namespace.
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
        /// Redraw until the rollout completes or stops.
        #[arg(short, long)]
        watch: bool,
    },
    /// Stop starting clusters (those in flight finish).
    Pause {
        /// ManifestWorkReplicaSet name.
        name: String,
        /// Namespace.
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
    },
    /// Start clusters again.
    Resume {
        /// ManifestWorkReplicaSet name.
        name: String,
        /// Namespace.
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
    },
    /// Roll back to the template before the last change (a new rollout of it).
    Undo {
        /// ManifestWorkReplicaSet name.
        name: String,
        /// Namespace.
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
    },
}

fn line(name: &str, s: &ReplicaSetSummary, extra: &str) -> String {
    format!(
        "{} available  (applied {}, progressing {}, degraded {}){extra}",
        labelled_bar(name, s.available, s.total),
        s.applied,
        s.progressing,
        s.degraded
    )
}

/// The rendering of a replica set's rollout, and whether it is over (complete or stopped).
pub fn render(rs: &ManifestWorkReplicaSet) -> (String, Outcome) {
    let st = rs.status.clone().unwrap_or_default();
    let mut out = String::new();
    for p in &st.placement_summaries {
        let mut extra = String::new();
        if p.waiting > 0 {
            extra.push_str(&format!(", {} waiting", p.waiting));
        }
        if !p.stopped_reason.is_empty() {
            extra.push_str(&format!("\n{:<LABEL$} {}", "", p.stopped_reason));
        }
        out.push_str(&line(&p.name, &p.summary.unwrap_or_default(), &extra));
        out.push('\n');
        for n in &p.notes {
            out.push_str(&format!("{:<LABEL$} note: {n}\n", ""));
        }
        out.push_str(&group_bars(&p.decision_groups));
    }
    let rolled = st
        .conditions
        .iter()
        .find(|c| c.r#type == "PlacementRolledOut");
    let (state, outcome) = match rolled {
        Some(c) if c.status == meta::status::TRUE => ("complete".to_string(), Outcome::Complete),
        Some(c) if c.reason == "Stopped" => (format!("stopped: {}", c.message), Outcome::Stopped),
        Some(c) if c.reason == "Paused" => ("paused".to_string(), Outcome::Paused),
        Some(c) => (c.reason.to_lowercase(), Outcome::Running),
        None => ("not started".into(), Outcome::Running),
    };
    if let Some(c) = st
        .conditions
        .iter()
        .find(|c| c.r#type == "PlacementVerified" && c.status != meta::status::TRUE)
    {
        out.push_str(&format!("warning: {}\n", c.message));
    }
    out.push_str(&line("overall", &st.summary.unwrap_or_default(), ""));
    out.push_str(&format!("\nrollout {state}\n"));
    (out, outcome)
}

/// Where a rollout is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Still rolling.
    Running,
    /// Every cluster succeeded.
    Complete,
    /// Stopped on a breach.
    Stopped,
    /// Paused by an operator.
    Paused,
}

/// Runs `flotilla rollout …`.
pub async fn run(hub: &Hub, what: RolloutWhat) -> Result<()> {
    let (action, name, namespace) = match what {
        RolloutWhat::Status {
            name,
            namespace,
            watch,
        } => return status(hub, name, namespace, watch).await,
        RolloutWhat::Pause { name, namespace } => ("pause", name, namespace),
        RolloutWhat::Resume { name, namespace } => ("resume", name, namespace),
        RolloutWhat::Undo { name, namespace } => ("undo", name, namespace),
    };
    let r = flotilla_api::v1::RolloutRequest {
        namespace: namespace.clone(),
        name: name.clone(),
        action: action.into(),
    };
    if action == "undo" {
        // Not repeated: each undo swaps the template with the previous one, so an undo that
        // landed and is sent again would undo itself.
        hub.call(hub.replica_sets().rollout(r)).await?;
    } else {
        // Pausing or resuming twice is pausing or resuming once.
        hub.idempotent(async || hub.replica_sets().rollout(r.clone()).await)
            .await?;
    }
    let done = match action {
        "pause" => "paused",
        "resume" => "resumed",
        _ => "rolled back to the previous template",
    };
    println!(
        "manifestworkreplicaset.work.open-cluster-management.io/{name} {done} (namespace {namespace})"
    );
    Ok(())
}

async fn status(hub: &Hub, name: String, namespace: String, watch: bool) -> Result<()> {
    follow(watch, || {
        let r = GetReplicaSetRequest {
            namespace: namespace.clone(),
            name: name.clone(),
        };
        let stopped = format!("the rollout of {namespace}/{name} stopped");
        async move {
            let rs = hub
                .idempotent(async || hub.replica_sets().get_replica_set(r.clone()).await)
                .await?;
            let (text, outcome) = render(&rs);
            let step = match outcome {
                Outcome::Stopped => Step::Failed(stopped),
                Outcome::Complete => Step::Done,
                Outcome::Running | Outcome::Paused => Step::Wait,
            };
            Ok((text, step))
        }
    })
    .await
}
