//! The dashboard's banner while a recovery window is open (pure): every page says so, with
//! what is withheld and the commands that decide it.

use flotilla_api::meta;
use flotilla_api::v1::RecoveryStatus;

/// The banner's text, or `None` when no window is open.
pub fn banner(status: &RecoveryStatus) -> Option<String> {
    let window = status.window.as_ref()?;
    let at = |t: Option<&prost_types::Timestamp>| {
        t.map_or_else(|| "an unknown time".into(), meta::rfc3339)
    };
    let decided = status.delete + status.keep + status.revert;
    Some(format!(
        "Recovery window open since {} (restore of a backup taken {}): {} orphan(s) undecided, \
         {decided} decided, on {} cluster(s). No spoke is told to delete a work the store lacks, \
         nor given an older spec over a newer one, until an operator decides: flotilla get \
         orphans; flotilla recovery delete|keep|revert CLUSTER NAME; flotilla recovery finish.",
        at(window.started_at.as_ref()),
        at(window.backup_taken_at.as_ref()),
        status.undecided,
        status.clusters,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_api::v1::RecoveryWindow;

    #[test]
    fn the_banner_shows_only_while_a_window_is_open_and_counts_the_orphans() {
        let mut status = RecoveryStatus {
            undecided: 2,
            keep: 1,
            revert: 1,
            clusters: 3,
            ..Default::default()
        };
        assert_eq!(banner(&status), None);
        status.window = Some(RecoveryWindow {
            started_at: Some(prost_types::Timestamp {
                seconds: 1_800_000_000,
                nanos: 0,
            }),
            ..Default::default()
        });
        let text = banner(&status).expect("open");
        assert!(
            text.starts_with("Recovery window open since 2027-01-15T08:00:00Z (restore of a backup taken an unknown time): 2 orphan(s) undecided, 2 decided, on 3 cluster(s)."),
            "{text}"
        );
        assert!(text.contains("flotilla recovery finish"), "{text}");
    }
}
