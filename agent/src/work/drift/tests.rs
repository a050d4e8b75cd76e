use super::*;

fn one() -> Vec<ManifestId> {
    vec![config_map("web")]
}

fn config_map(name: &str) -> ManifestId {
    ManifestId {
        group: String::new(),
        version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: "shop".into(),
        name: name.into(),
    }
}

fn rules() -> DriftRules {
    DriftRules {
        debounce: Duration::from_millis(500),
        window: Duration::from_secs(60),
        fight_after: 3,
        backoff_min: Duration::from_secs(5),
        backoff_max: Duration::from_secs(20),
    }
}

#[test]
fn a_burst_of_changes_is_one_repair_after_the_debounce() {
    let t0 = Instant::now();
    let mut d = Drift::new(rules());
    assert_eq!(d.changed(t0), t0 + Duration::from_millis(500));
    assert_eq!(
        d.changed(t0 + Duration::from_millis(300)),
        t0 + Duration::from_millis(500)
    );
    assert!(!d.repaired(t0 + Duration::from_millis(500), &one()));
    assert_eq!(d.due(), None);
    assert_eq!(d.fight(), None);
}

#[test]
fn repeated_repairs_become_a_fight_that_backs_off_and_ends_after_a_quiet_window() {
    let t0 = Instant::now();
    let mut d = Drift::new(rules());
    let s = Duration::from_secs;
    assert!(!d.repaired(t0, &one()));
    assert!(!d.repaired(t0 + s(1), &one()));
    // The third repair within the window: a fight, 5 s between repairs.
    assert!(d.repaired(t0 + s(2), &one()));
    assert_eq!(
        d.fight(),
        Some(Fight {
            repairs: 3,
            backoff: s(5)
        })
    );
    assert_eq!(d.changed(t0 + s(3)), t0 + s(7));
    assert!(d.repaired(t0 + s(7), &one()));
    assert_eq!(d.fight().map(|f| f.backoff), Some(s(10)));
    assert!(d.repaired(t0 + s(17), &one()));
    assert!(d.repaired(t0 + s(37), &one()));
    assert_eq!(d.fight().map(|f| f.backoff), Some(s(20)));
    // Capped.
    d.repaired(t0 + s(57), &one());
    assert_eq!(d.fight().map(|f| f.backoff), Some(s(20)));
    // A pass that found nothing to write does not feed the fight, and a quiet window ends it.
    d.repaired(t0 + s(80), &[]);
    assert!(d.fight().is_some());
    assert!(d.forget(t0 + s(118)));
    assert_eq!(d.fight(), None);
    assert_eq!(
        d.changed(t0 + s(120)),
        t0 + s(120) + Duration::from_millis(500)
    );
}

#[test]
fn a_repair_that_wrote_is_kept_for_one_window_and_one_that_wrote_nothing_is_not() {
    let t0 = Instant::now();
    let s = Duration::from_secs;
    let mut d = Drift::new(rules());
    d.repaired(t0, &[]);
    assert_eq!(d.last_repair(), None);
    assert_eq!(d.repair_ends(), None);
    d.repaired(t0 + s(1), &one());
    assert_eq!(
        d.last_repair(),
        Some(&Repair {
            at: t0 + s(1),
            resources: one()
        })
    );
    assert_eq!(d.repair_ends(), Some(t0 + s(61)));
    // A later pass that wrote nothing keeps the last repair; a later repair replaces it.
    d.repaired(t0 + s(2), &[]);
    assert_eq!(d.last_repair().map(|r| r.at), Some(t0 + s(1)));
    d.repaired(t0 + s(3), &[config_map("a"), config_map("b")]);
    assert_eq!(d.last_repair().map(|r| r.resources.len()), Some(2));
    assert!(!d.forget(t0 + s(62)));
    assert!(d.last_repair().is_some());
    d.forget(t0 + s(63));
    assert_eq!(d.last_repair(), None);
    assert_eq!(d.repair_ends(), None);
}

#[test]
fn the_periodic_pass_putting_something_back_is_a_repair_but_not_a_fight() {
    let t0 = Instant::now();
    let s = Duration::from_secs;
    let mut d = Drift::new(rules());
    for i in 0..5 {
        d.put_back(t0 + s(i), &one());
    }
    assert_eq!(d.fight(), None);
    assert_eq!(d.last_repair().map(|r| r.at), Some(t0 + s(4)));
    d.put_back(t0 + s(5), &[]);
    assert_eq!(d.last_repair().map(|r| r.at), Some(t0 + s(4)));
    assert_eq!(d.changed(t0 + s(6)), t0 + s(6) + Duration::from_millis(500));
}
