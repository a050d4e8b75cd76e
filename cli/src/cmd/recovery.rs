//! `flotilla recovery`: the recovery window after a restore — its state, the orphans' decisions
//! (delete them on their spoke, keep them there, or send the store's spec again over a newer
//! one), and closing it. `flotilla get orphans` lists the orphans.

use crate::hub::Hub;
use anyhow::Result;
use flotilla_api::meta;
use flotilla_api::v1::{
    DecideOrphansRequest, FinishRecoveryRequest, GetRecoveryRequest, OrphanDecision, RecoveryStatus,
};

/// What `recovery` does.
#[derive(clap::Subcommand, Debug, Clone)]
pub enum RecoveryWhat {
    /// Whether a window is open, since when, and the orphans by decision.
    Status,
    /// Have the spoke delete these orphans (at its next resync); for works the store lacks
    /// (kind Work).
    Delete(Choice),
    /// Have the spoke keep these orphans: the hub never tells it to delete them (kind Work),
    /// or it keeps its own spec until the work is next updated (kinds Ahead, Behind and
    /// Incarnation).
    Keep(Choice),
    /// Send the store's spec again (above the generation the spoke holds, for kinds Ahead and
    /// Incarnation), or let the store's deletion go; for works the spoke holds other than the
    /// store (kinds Ahead, Behind and Incarnation).
    Revert(Choice),
    /// Take a decision back (the orphans are undecided again).
    Undecide(Choice),
    /// Close the window; refused while orphans are undecided, unless told what they become.
    Finish {
        /// The store wins: undecided orphans are deleted on their spokes (kind Work) or
        /// reverted to the store's spec (kinds Ahead, Behind and Incarnation).
        #[arg(long, conflicts_with = "keep_orphans")]
        delete_orphans: bool,
        /// Undecided orphans are kept on their spokes.
        #[arg(long)]
        keep_orphans: bool,
    },
}

/// Which orphans of a cluster.
#[derive(clap::Args, Debug, Clone)]
pub struct Choice {
    /// The cluster.
    cluster: String,
    /// Orphans by name (or resource id, for one whose status has not come).
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    names: Vec<String>,
    /// Every orphan of the cluster.
    #[arg(long)]
    all: bool,
}

/// Runs `recovery`.
pub async fn run(hub: &Hub, what: RecoveryWhat) -> Result<()> {
    let (choice, decision) = match what {
        RecoveryWhat::Status => {
            let r = GetRecoveryRequest {};
            let status = hub
                .idempotent(async || hub.recovery().get_recovery(r).await)
                .await?;
            print!("{}", describe(&status));
            return Ok(());
        }
        RecoveryWhat::Finish {
            delete_orphans,
            keep_orphans,
        } => {
            let undecided = match (delete_orphans, keep_orphans) {
                (true, _) => OrphanDecision::Delete,
                (_, true) => OrphanDecision::Keep,
                _ => OrphanDecision::Undecided,
            };
            let r = FinishRecoveryRequest {
                undecided: undecided as i32,
            };
            let status = hub.call(hub.recovery().finish_recovery(r)).await?;
            println!("Recovery window closed.");
            print!("{}", describe(&status));
            return Ok(());
        }
        RecoveryWhat::Delete(c) => (c, OrphanDecision::Delete),
        RecoveryWhat::Keep(c) => (c, OrphanDecision::Keep),
        RecoveryWhat::Revert(c) => (c, OrphanDecision::Revert),
        RecoveryWhat::Undecide(c) => (c, OrphanDecision::Undecided),
    };
    let r = DecideOrphansRequest {
        cluster: choice.cluster.clone(),
        names: choice.names,
        all: choice.all,
        decision: decision as i32,
    };
    let decided = hub
        .idempotent(async || hub.recovery().decide_orphans(r.clone()).await)
        .await?;
    let what = match decision {
        OrphanDecision::Delete => "deleted by its spoke at its next resync",
        OrphanDecision::Keep => "kept on its spoke",
        OrphanDecision::Undecided => "undecided again",
        OrphanDecision::Revert => "the store's spec sent again at its next resync",
    };
    for o in &decided.items {
        let name = if o.name.is_empty() {
            &o.resource_id
        } else {
            &o.name
        };
        println!(
            "orphan {}/{}: {what}",
            crate::output::escaped(&o.cluster),
            crate::output::escaped(name)
        );
    }
    Ok(())
}

/// `recovery status`'s text.
pub fn describe(s: &RecoveryStatus) -> String {
    let mut out = match &s.window {
        Some(w) => format!(
            "Recovery window open since {} ({}), backup taken {} (id {}).\n",
            w.started_at.as_ref().map(meta::rfc3339).unwrap_or_default(),
            w.started_by,
            w.backup_taken_at
                .as_ref()
                .map(meta::rfc3339)
                .unwrap_or_else(|| "at an unknown time".into()),
            w.backup_id.get(..12).unwrap_or(&w.backup_id),
        ),
        None => "No recovery window is open.\n".to_string(),
    };
    out += &format!(
        "Orphans: {} undecided, {} to delete, {} kept, {} to revert, on {} cluster(s).\n",
        s.undecided, s.delete, s.keep, s.revert, s.clusters
    );
    if s.window.is_some() && s.undecided > 0 {
        out += "Decide them (flotilla get orphans; flotilla recovery delete|keep|revert CLUSTER \
                NAME…), then flotilla recovery finish.\n";
    }
    if s.clusters_not_resynced > 0 {
        out += &format!(
            "{} accepted cluster(s) have not resynced since the window opened: their unknown \
             works are recorded as orphans when they do, never deleted unseen, even after \
             finish.\n",
            s.clusters_not_resynced
        );
    }
    out
}
