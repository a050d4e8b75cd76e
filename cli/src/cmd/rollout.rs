//! `flotilla rollout status NAME [-n NS] [--watch]`: where a ManifestWorkReplicaSet's rollout
//! stands, per placement and overall, as progress bars. Without `--watch` it prints once (for
//! scripts); with it, it redraws until the rollout completes or stops. Exits non-zero when the
//! rollout stopped on a breach.
//!
//! `flotilla rollout pause|resume|undo [gitrepo|replicaset] NAME`: a replica set's rollout (the
//! kind left out), or every bundle of a GitRepo at once (undo: back to the commit delivered
//! before, pinned until resumed).

use super::progress::{LABEL, Step, follow, group_bars, labelled_bar};
use crate::hub::Hub;
use anyhow::{Result, bail};
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
    /// Stop starting clusters (those in flight finish); `gitrepo NAME`: every bundle's.
    Pause {
        /// `[gitrepo|replicaset] NAME`: a ManifestWorkReplicaSet when the kind is left out.
        #[arg(num_args = 1..=2, required = true, value_name = "[KIND] NAME")]
        target: Vec<String>,
        /// Namespace.
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
    },
    /// Start clusters again; `gitrepo NAME`: every bundle's, and an undo's pin is lifted (what
    /// the GitRepo follows is delivered again).
    Resume {
        /// `[gitrepo|replicaset] NAME`: a ManifestWorkReplicaSet when the kind is left out.
        #[arg(num_args = 1..=2, required = true, value_name = "[KIND] NAME")]
        target: Vec<String>,
        /// Namespace.
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
    },
    /// Roll back to the template before the last change (a new rollout of it); `gitrepo NAME`:
    /// to the commit delivered before the current one, pinned until `rollout resume gitrepo`.
    Undo {
        /// `[gitrepo|replicaset] NAME`: a ManifestWorkReplicaSet when the kind is left out.
        #[arg(num_args = 1..=2, required = true, value_name = "[KIND] NAME")]
        target: Vec<String>,
        /// Namespace.
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
        /// Undo a replica set a GitRepo writes all the same (refused otherwise: undo the
        /// GitRepo instead).
        #[arg(long)]
        force: bool,
    },
}

/// What a rollout command acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    /// A ManifestWorkReplicaSet.
    ReplicaSet,
    /// Every bundle of a GitRepo.
    GitRepo,
}

/// `[KIND] NAME` as given.
fn target(args: &[String]) -> Result<(Target, String)> {
    let kind = match args {
        [name] => return Ok((Target::ReplicaSet, name.clone())),
        [kind, _] => kind.as_str(),
        _ => bail!("rollout: give NAME, or KIND NAME"),
    };
    let t = match kind {
        "gitrepo" | "gitrepos" => Target::GitRepo,
        "replicaset"
        | "replicasets"
        | "manifestworkreplicaset"
        | "manifestworkreplicasets"
        | "mwrs" => Target::ReplicaSet,
        other => bail!("rollout: {other:?} does not roll out: gitrepo or replicaset"),
    };
    Ok((t, args[1].clone()))
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
    let (action, args, namespace, force) = match what {
        RolloutWhat::Status {
            name,
            namespace,
            watch,
        } => return status(hub, name, namespace, watch).await,
        RolloutWhat::Pause { target, namespace } => ("pause", target, namespace, false),
        RolloutWhat::Resume { target, namespace } => ("resume", target, namespace, false),
        RolloutWhat::Undo {
            target,
            namespace,
            force,
        } => ("undo", target, namespace, force),
    };
    let (target, name) = target(&args)?;
    let r = flotilla_api::v1::RolloutRequest {
        namespace: namespace.clone(),
        name: name.clone(),
        action: action.into(),
    };
    if target == Target::GitRepo {
        return gitrepo(hub, r).await;
    }
    if action == "undo" {
        // Not repeated: each undo swaps the template with the previous one, so an undo that
        // landed and is sent again would undo itself.
        hub.call(
            hub.replica_sets()
                .rollout(crate::cmd::apply::forced(r, force)),
        )
        .await?;
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

/// `rollout pause|resume|undo gitrepo NAME`: every bundle of the GitRepo.
async fn gitrepo(hub: &Hub, r: flotilla_api::v1::RolloutRequest) -> Result<()> {
    let (name, namespace, undo) = (r.name.clone(), r.namespace.clone(), r.action == "undo");
    let repo = if undo {
        // Not repeated: a second undo goes one commit further back.
        hub.call(hub.git_repos().rollout_git_repo(r)).await?
    } else {
        hub.idempotent(async || hub.git_repos().rollout_git_repo(r.clone()).await)
            .await?
    };
    let status = repo.status.unwrap_or_default();
    let done = if undo {
        format!(
            "undone to {} (pinned until `flotilla rollout resume gitrepo {name} -n {namespace}`)",
            status
                .pinned_commit
                .get(..7)
                .unwrap_or(&status.pinned_commit)
        )
    } else if status.rollout_paused {
        "paused".to_string()
    } else {
        "resumed".to_string()
    };
    println!("gitrepo.apps.flotilla.io/{name} {done} (namespace {namespace})");
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
