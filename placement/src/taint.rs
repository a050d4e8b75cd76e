//! Taints and tolerations (step 2 of the algorithm, second half).
//!
//! - `NoSelect`: the cluster is feasible only while a matching toleration holds.
//! - `NoSelectIfNew`: ignored when the cluster is already decided for this placement (no
//!   toleration needed, nothing expires); otherwise exactly like `NoSelect`, `tolerationSeconds`
//!   included (as OCM's TaintToleration plugin: a new cluster is only selected while a matching
//!   toleration holds).
//! - `PreferNoSelect`: always feasible. OCM ignores it; Flotilla ranks such a cluster after every
//!   cluster without an untolerated `PreferNoSelect` taint (see [`crate::schedule`]), unless a
//!   matching toleration holds.
//!
//! A toleration matches a taint when its effect is empty or equal, its key is empty or equal, and
//! (operator `Equal`) its value equals the taint's or (operator `Exists`) always. With
//! `tolerationSeconds` it holds while `now < timeAdded + tolerationSeconds`. When several
//! tolerations match one taint, the one that holds longest counts (OCM takes the first matching
//! one, which can drop a cluster that another toleration still covers).

use std::time::{Duration, SystemTime};

use crate::cluster::{Taint, TaintEffect};
use crate::placement::{Toleration, TolerationOperator};

/// Whether a toleration matches a taint, ignoring time.
pub fn toleration_matches(toleration: &Toleration, taint: &Taint) -> bool {
    if toleration.effect.is_some_and(|e| e != taint.effect) {
        return false;
    }
    if !toleration.key.is_empty() && toleration.key != taint.key {
        return false;
    }
    match toleration.operator {
        TolerationOperator::Equal => toleration.value == taint.value,
        TolerationOperator::Exists => true,
        TolerationOperator::Other(_) => false,
    }
}

/// When a toleration stops holding for a taint: `None` = never.
pub fn toleration_expiry(toleration: &Toleration, taint: &Taint) -> Option<SystemTime> {
    let secs = toleration.toleration_seconds?;
    let secs = u64::try_from(secs).unwrap_or(0);
    // An expiry beyond SystemTime's range is as good as never.
    taint.time_added.checked_add(Duration::from_secs(secs))
}

/// How the best matching toleration covers a taint at `now`.
enum Cover {
    /// A matching toleration holds until the given time (`None` = forever).
    Holds(Option<SystemTime>),
    /// Matching tolerations exist but all have expired.
    Expired,
    /// No toleration matches.
    None,
}

fn cover(taint: &Taint, tolerations: &[Toleration], now: SystemTime) -> Cover {
    let mut result = Cover::None;
    for t in tolerations.iter().filter(|t| toleration_matches(t, taint)) {
        match toleration_expiry(t, taint) {
            None => return Cover::Holds(None),
            Some(exp) if now < exp => {
                result = match result {
                    Cover::Holds(Some(prev)) if prev >= exp => Cover::Holds(Some(prev)),
                    _ => Cover::Holds(Some(exp)),
                }
            }
            Some(_) => {
                if matches!(result, Cover::None) {
                    result = Cover::Expired;
                }
            }
        }
    }
    result
}

/// Why a taint keeps a cluster out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    /// No toleration matches the taint.
    NotTolerated,
    /// A matching toleration's `tolerationSeconds` ran out.
    ToleranceExpired,
}

/// The taint verdict for one cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaintCheck {
    /// The cluster is not feasible because of `cluster.taints[taint]`.
    Rejected {
        /// Index into the cluster's taints.
        taint: usize,
        /// Why.
        why: Rejection,
    },
    /// The cluster is feasible.
    Tolerated {
        /// An untolerated `PreferNoSelect` taint ranks the cluster after untainted ones.
        penalized: bool,
        /// The earliest moment a toleration this verdict relies on expires (the verdict changes
        /// then: the cluster drops out, or its PreferNoSelect penalty comes back). `None` when
        /// nothing expires.
        until: Option<SystemTime>,
    },
}

/// Checks every taint of a cluster against the placement's tolerations at `now`. `decided`
/// says whether the cluster is in the placement's current decisions.
pub fn check_taints(
    taints: &[Taint],
    tolerations: &[Toleration],
    decided: bool,
    now: SystemTime,
) -> TaintCheck {
    let earliest = |acc: Option<SystemTime>, t: Option<SystemTime>| match (acc, t) {
        (Some(a), Some(t)) => Some(a.min(t)),
        (a, None) => a,
        (None, t) => t,
    };
    let mut penalized = false;
    // Expiries that drop the cluster, and expiries that would bring a penalty back.
    let mut until: Option<SystemTime> = None;
    let mut penalty_from: Option<SystemTime> = None;
    for (i, taint) in taints.iter().enumerate() {
        match taint.effect {
            TaintEffect::PreferNoSelect => match cover(taint, tolerations, now) {
                Cover::Holds(exp) => penalty_from = earliest(penalty_from, exp),
                Cover::Expired | Cover::None => penalized = true,
            },
            TaintEffect::NoSelectIfNew if decided => {}
            TaintEffect::NoSelect | TaintEffect::NoSelectIfNew => {
                match cover(taint, tolerations, now) {
                    Cover::Holds(exp) => until = earliest(until, exp),
                    Cover::Expired => {
                        return TaintCheck::Rejected {
                            taint: i,
                            why: Rejection::ToleranceExpired,
                        };
                    }
                    Cover::None => {
                        return TaintCheck::Rejected {
                            taint: i,
                            why: Rejection::NotTolerated,
                        };
                    }
                }
            }
        }
    }
    // An already penalised cluster does not change when another penalty comes back.
    if !penalized {
        until = earliest(until, penalty_from);
    }
    TaintCheck::Tolerated { penalized, until }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn taint(key: &str, value: &str, effect: TaintEffect) -> Taint {
        Taint::new(key, value, effect, t(1000))
    }

    const FREE: TaintCheck = TaintCheck::Tolerated {
        penalized: false,
        until: None,
    };

    #[test]
    fn untainted_cluster_is_tolerated() {
        assert_eq!(check_taints(&[], &[], false, t(0)), FREE);
    }

    #[test]
    fn no_select_taint_hides_cluster_without_toleration() {
        let taints = [taint("gpu", "true", TaintEffect::NoSelect)];
        assert_eq!(
            check_taints(&taints, &[], false, t(2000)),
            TaintCheck::Rejected {
                taint: 0,
                why: Rejection::NotTolerated
            }
        );
        assert_eq!(
            check_taints(&taints, &[], true, t(2000)),
            TaintCheck::Rejected {
                taint: 0,
                why: Rejection::NotTolerated
            },
            "being decided does not help against NoSelect"
        );
    }

    #[test]
    fn equal_toleration_compares_value() {
        let taints = [taint("gpu", "true", TaintEffect::NoSelect)];
        assert_eq!(
            check_taints(&taints, &[Toleration::equal("gpu", "true")], false, t(0)),
            FREE
        );
        assert!(matches!(
            check_taints(&taints, &[Toleration::equal("gpu", "false")], false, t(0)),
            TaintCheck::Rejected { .. }
        ));
    }

    #[test]
    fn exists_toleration_matches_any_value_and_empty_key_matches_all() {
        let taints = [
            taint("gpu", "true", TaintEffect::NoSelect),
            taint("zone", "x", TaintEffect::NoSelectIfNew),
        ];
        assert!(matches!(
            check_taints(&taints, &[Toleration::exists("gpu")], false, t(0)),
            TaintCheck::Rejected { taint: 1, .. }
        ));
        assert_eq!(
            check_taints(&taints, &[Toleration::exists("")], false, t(0)),
            FREE
        );
    }

    #[test]
    fn an_unknown_operator_tolerates_nothing() {
        let taints = [taint("gpu", "true", TaintEffect::NoSelect)];
        let odd = Toleration {
            operator: TolerationOperator::Other("exists".into()),
            ..Toleration::equal("gpu", "true")
        };
        assert!(!toleration_matches(&odd, &taints[0]));
        assert!(matches!(
            check_taints(&taints, &[odd], false, t(0)),
            TaintCheck::Rejected { .. }
        ));
    }

    #[test]
    fn toleration_effect_must_match_when_set() {
        let taints = [taint("gpu", "true", TaintEffect::NoSelect)];
        let wrong = Toleration::exists("gpu").effect(TaintEffect::PreferNoSelect);
        let right = Toleration::exists("gpu").effect(TaintEffect::NoSelect);
        assert!(matches!(
            check_taints(&taints, &[wrong], false, t(0)),
            TaintCheck::Rejected { .. }
        ));
        assert_eq!(check_taints(&taints, &[right], false, t(0)), FREE);
    }

    #[test]
    fn no_select_if_new_is_tolerated_only_for_decided_clusters() {
        let taints = [taint("drain", "", TaintEffect::NoSelectIfNew)];
        assert_eq!(check_taints(&taints, &[], true, t(0)), FREE);
        assert!(matches!(
            check_taints(&taints, &[], false, t(0)),
            TaintCheck::Rejected { .. }
        ));
        assert_eq!(
            check_taints(
                &taints,
                &[Toleration::exists("drain").seconds(5)],
                true,
                t(5000)
            ),
            FREE,
            "a decided cluster needs no toleration, so none expires"
        );
    }

    #[test]
    fn no_select_if_new_toleration_seconds_expire_for_a_cluster_not_yet_decided() {
        // As OCM's TaintToleration plugin: only a decided cluster skips the taint; a new one
        // needs a toleration, and tolerationSeconds bounds it like for NoSelect.
        let taints = [taint("drain", "", TaintEffect::NoSelectIfNew)];
        let tol = [Toleration::exists("drain").seconds(300)];
        assert_eq!(
            check_taints(&taints, &tol, false, t(1299)),
            TaintCheck::Tolerated {
                penalized: false,
                until: Some(t(1300))
            }
        );
        assert_eq!(
            check_taints(&taints, &tol, false, t(1300)),
            TaintCheck::Rejected {
                taint: 0,
                why: Rejection::ToleranceExpired
            }
        );
        assert_eq!(
            toleration_expiry(&tol[0], &taints[0]),
            Some(t(1300)),
            "NoSelectIfNew taints expire like NoSelect ones"
        );
    }

    #[test]
    fn prefer_no_select_is_tolerated_with_penalty() {
        let taints = [taint("cost", "high", TaintEffect::PreferNoSelect)];
        assert_eq!(
            check_taints(&taints, &[], false, t(0)),
            TaintCheck::Tolerated {
                penalized: true,
                until: None
            }
        );
        assert_eq!(
            check_taints(&taints, &[Toleration::exists("cost")], false, t(0)),
            FREE
        );
    }

    #[test]
    fn toleration_seconds_hold_until_time_added_plus_seconds() {
        let taints = [taint("unreachable", "", TaintEffect::NoSelect)];
        let tol = [Toleration::exists("unreachable").seconds(300)];
        assert_eq!(
            check_taints(&taints, &tol, false, t(1299)),
            TaintCheck::Tolerated {
                penalized: false,
                until: Some(t(1300))
            }
        );
        assert_eq!(
            check_taints(&taints, &tol, false, t(1300)),
            TaintCheck::Rejected {
                taint: 0,
                why: Rejection::ToleranceExpired
            },
            "expired exactly at timeAdded + tolerationSeconds"
        );
    }

    #[test]
    fn longest_holding_toleration_wins() {
        let taints = [taint("k", "", TaintEffect::NoSelect)];
        let tol = [
            Toleration::exists("k").seconds(10),
            Toleration::exists("k").seconds(100),
        ];
        assert_eq!(
            check_taints(&taints, &tol, false, t(1050)),
            TaintCheck::Tolerated {
                penalized: false,
                until: Some(t(1100))
            }
        );
        let forever = [Toleration::exists("k").seconds(10), Toleration::exists("k")];
        assert_eq!(check_taints(&taints, &forever, false, t(5000)), FREE);
    }

    #[test]
    fn until_is_the_earliest_expiry_over_all_taints() {
        let taints = [
            Taint::new("a", "", TaintEffect::NoSelect, t(1000)),
            Taint::new("b", "", TaintEffect::PreferNoSelect, t(500)),
        ];
        let tol = [
            Toleration::exists("a").seconds(100),
            Toleration::exists("b").seconds(100),
        ];
        assert_eq!(
            check_taints(&taints, &tol, false, t(550)),
            TaintCheck::Tolerated {
                penalized: false,
                until: Some(t(600))
            },
            "the PreferNoSelect toleration expiring brings the penalty back at 600"
        );
    }

    #[test]
    fn expiring_prefer_toleration_does_not_count_when_already_penalized() {
        let taints = [
            taint("a", "", TaintEffect::PreferNoSelect),
            taint("b", "", TaintEffect::PreferNoSelect),
        ];
        let tol = [Toleration::exists("a").seconds(100)];
        assert_eq!(
            check_taints(&taints, &tol, false, t(1050)),
            TaintCheck::Tolerated {
                penalized: true,
                until: None
            }
        );
    }

    #[test]
    fn negative_toleration_seconds_expire_at_time_added() {
        let taint = taint("k", "", TaintEffect::NoSelect);
        assert_eq!(
            toleration_expiry(&Toleration::exists("k").seconds(-5), &taint),
            Some(t(1000))
        );
    }
}
