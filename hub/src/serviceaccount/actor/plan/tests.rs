use super::*;
use crate::backoff::Backoff;
use flotilla_api::meta::timestamp;
use flotilla_bus::serviceaccounts as msa;
use std::time::Duration;

const HUB: &str = "XHUB";

fn t0() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000)
}

fn base() -> ServiceAccountTokenReport {
    ServiceAccountTokenReport {
        cluster_name: "c1".into(),
        name: "sa".into(),
        resource_id: msa::resource_id("c1", "sa"),
        observed_generation: 1,
        ..Default::default()
    }
}

/// A report carrying a token issued at `t0() + issued_s`, valid an hour, sealed to [`HUB`].
fn token(issued_s: u64) -> ServiceAccountTokenReport {
    let issued = t0() + Duration::from_secs(issued_s);
    ServiceAccountTokenReport {
        sealed_token: vec![1, 2, 3],
        sender_xkey: "XAGENT".into(),
        hub_xkey: HUB.into(),
        issued_at: Some(timestamp(issued)),
        expiration_timestamp: Some(timestamp(issued + Duration::from_secs(3600))),
        ..base()
    }
}

fn held() -> Held<'static> {
    Held {
        generation: 1,
        deleting: false,
        status: None,
        token_issued: None,
    }
}

fn decide(r: &ServiceAccountTokenReport, h: Option<Held<'_>>) -> Plan {
    report(r, h, HUB, t0() + Duration::from_secs(60), || true)
}

/// A status's conditions without their transition times.
fn conditions(s: &ManagedServiceAccountStatus) -> Vec<(String, String, String, String, i64)> {
    s.conditions
        .iter()
        .map(|c| {
            let c = c.clone();
            (
                c.r#type,
                c.status,
                c.reason,
                c.message,
                c.observed_generation,
            )
        })
        .collect()
}

fn refusal_reason(p: &Plan) -> Option<(&'static str, bool)> {
    match p {
        Plan::Refuse { refusal, redeliver } => Some((refusal.0, *redeliver)),
        _ => None,
    }
}

#[test]
fn a_report_of_an_unknown_account_is_refused_without_a_status() {
    match decide(&base(), None) {
        Plan::Unknown(r) => assert_eq!(r.0, "unknown_account"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_account_being_deleted_is_forgotten_once_its_cluster_says_it_is_gone() {
    let deleting = Held {
        deleting: true,
        ..held()
    };
    let gone = ServiceAccountTokenReport {
        deleted: true,
        ..base()
    };
    assert_eq!(decide(&gone, Some(deleting)), Plan::Purge);
    assert_eq!(decide(&token(0), Some(deleting)), Plan::Taken);
}

#[test]
fn a_cluster_that_lost_the_service_account_gets_it_again() {
    let gone = ServiceAccountTokenReport {
        deleted: true,
        ..base()
    };
    assert_eq!(decide(&gone, Some(held())), Plan::Redeliver);
}

#[test]
fn a_report_over_the_rate_waits_and_the_budget_is_asked_only_past_the_deletion_checks() {
    let over = report(&token(0), Some(held()), HUB, t0(), || false);
    assert_eq!(over, Plan::RateLimited);
    let gone = ServiceAccountTokenReport {
        deleted: true,
        ..base()
    };
    let asked = std::cell::Cell::new(false);
    report(&gone, Some(held()), HUB, t0(), || {
        asked.set(true);
        true
    });
    assert!(!asked.get());
}

#[test]
fn reports_that_make_no_sense_are_refused() {
    let ahead = ServiceAccountTokenReport {
        observed_generation: 2,
        ..token(0)
    };
    assert_eq!(
        refusal_reason(&decide(&ahead, Some(held()))),
        Some(("invalid_status", false))
    );
    assert_eq!(
        refusal_reason(&decide(&base(), Some(held()))),
        Some(("invalid_status", false))
    );
    let timeless = ServiceAccountTokenReport {
        issued_at: None,
        ..token(0)
    };
    assert_eq!(
        refusal_reason(&decide(&timeless, Some(held()))),
        Some(("invalid_status", false))
    );
}

#[test]
fn a_token_sealed_to_another_hub_key_is_refused_and_the_account_delivered_again() {
    let stale = ServiceAccountTokenReport {
        hub_xkey: "XOTHER".into(),
        ..token(0)
    };
    assert_eq!(
        refusal_reason(&decide(&stale, Some(held()))),
        Some(("stale_key", true))
    );
}

#[test]
fn a_token_error_is_said_in_the_status() {
    let failed = ServiceAccountTokenReport {
        error: "no permission".into(),
        ..base()
    };
    match decide(&failed, Some(held())) {
        Plan::Status(s) => assert_eq!(
            conditions(&s),
            conditions(&rules::token_failed(None, "no permission", 1))
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_newer_token_is_stored_and_an_older_or_same_one_is_not() {
    let issued = t0() + Duration::from_secs(10);
    let plan = decide(&token(10), Some(held()));
    assert_eq!(
        plan,
        Plan::Store {
            issued,
            expires: issued + Duration::from_secs(3600)
        }
    );
    // The token held is newer: a replay, taken as it is.
    let newer_held = Held {
        token_issued: Some(t0() + Duration::from_secs(20)),
        ..held()
    };
    assert_eq!(decide(&token(10), Some(newer_held)), Plan::Taken);
}

#[test]
fn the_token_held_without_its_status_gets_its_status_written() {
    let issued = t0() + Duration::from_secs(10);
    let same = Held {
        token_issued: Some(issued),
        ..held()
    };
    let kept = rules::token_kept(None, "sa", 1, issued, issued + Duration::from_secs(3600));
    match decide(&token(10), Some(same)) {
        Plan::Status(s) => {
            assert_eq!(conditions(&s), conditions(&kept));
            assert_eq!(rules::refreshed_at(Some(&s)), Some(issued));
            assert_eq!(s.expiration_timestamp, kept.expiration_timestamp);
        }
        other => panic!("{other:?}"),
    }
    // Its status already names it: nothing to write.
    let stored = Held {
        status: Some(&kept),
        ..same
    };
    assert_eq!(decide(&token(10), Some(stored)), Plan::Taken);
}

#[tokio::test(start_paused = true)]
async fn resends_and_record_removals_back_off_as_before() {
    let now = tokio::time::Instant::now();
    let mut sends = Backoff::new(rules::RESEND_MIN, rules::RESEND_MAX);
    let waits: Vec<u64> = (0..8)
        .map(|_| (sends.attempted("c1/sa", now) - now).as_secs())
        .collect();
    assert_eq!(waits, vec![2, 4, 8, 16, 32, 60, 60, 60]);
    let mut purges = Backoff::new(rules::PURGE_MIN, rules::PURGE_MAX);
    let waits: Vec<u64> = (0..8)
        .map(|_| (purges.attempted("c1.h", now) - now).as_secs())
        .collect();
    assert_eq!(waits, vec![1, 2, 4, 8, 16, 32, 60, 60]);
}
