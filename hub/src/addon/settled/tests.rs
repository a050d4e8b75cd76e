use super::*;
use std::time::Duration;

fn at(s: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + s)
}

fn settled() -> Settled {
    Settled {
        rollout: (Status::Succeeded, Some(at(5)), false),
        render_error: None,
        lease: None,
    }
}

#[test]
fn the_same_round_inputs_hold_the_settled_status() {
    assert!(settled().holds((Status::Succeeded, Some(at(5)), false), None, None));
}

#[test]
fn a_new_rollout_verdict_or_render_error_computes_the_status_again() {
    let s = settled();
    assert!(!s.holds((Status::ToApply, None, false), None, None));
    assert!(!s.holds((Status::Succeeded, Some(at(6)), false), None, None));
    assert!(!s.holds((Status::Succeeded, Some(at(5)), true), None, None));
    assert!(!s.holds((Status::Succeeded, Some(at(5)), false), Some("bad"), None));
}

#[test]
fn a_lease_renewed_or_gone_stale_computes_the_status_again() {
    let s = Settled {
        lease: Some((Some(at(1)), true)),
        ..settled()
    };
    let rollout = (Status::Succeeded, Some(at(5)), false);
    assert!(s.holds(rollout, None, Some((Some(at(1)), true))));
    assert!(!s.holds(rollout, None, Some((Some(at(2)), true))));
    assert!(!s.holds(rollout, None, Some((Some(at(1)), false))));
}
