use super::*;

fn health(addon: &str, ns: &str, st: &str) -> AddOnHealth {
    let reason = match st {
        status::TRUE => reasons::LEASE_UPDATED,
        status::FALSE => reasons::LEASE_UPDATE_STOPPED,
        _ => reasons::LEASE_NOT_FOUND,
    };
    AddOnHealth {
        addon: addon.into(),
        install_namespace: ns.into(),
        status: st.into(),
        reason: reason.into(),
        message: format!("{addon} add-on"),
    }
}

fn watched(c: &ManagedCluster) -> Vec<(String, String)> {
    external_addons_for_agent(c)
        .into_iter()
        .map(|a| (a.name, a.install_namespace))
        .collect()
}

#[test]
fn the_watch_list_changes_only_when_an_add_on_comes_moves_or_goes() {
    let mut c = ManagedCluster::default();
    assert!(set_external_addon(&mut c, "helloworld", Some("addons")));
    assert!(!set_external_addon(&mut c, "helloworld", Some("addons")));
    assert!(set_external_addon(&mut c, "alpha", Some("default")));
    assert_eq!(
        watched(&c),
        [
            ("alpha".into(), "default".into()),
            ("helloworld".into(), "addons".into())
        ]
    );
    assert!(set_external_addon(&mut c, "helloworld", Some("other")));
    assert!(set_external_addon(&mut c, "alpha", None));
    assert!(!set_external_addon(&mut c, "alpha", None));
    assert_eq!(watched(&c), [("helloworld".into(), "other".into())]);
}

#[test]
fn only_health_of_add_ons_the_hub_asked_about_is_kept() {
    let mut c = ManagedCluster::default();
    set_external_addon(&mut c, "helloworld", Some("addons"));
    let behind = apply_addon_health(
        &mut c,
        &[
            health("helloworld", "addons", status::TRUE),
            health("invented", "addons", status::TRUE),
        ],
    );
    assert!(behind, "an agent watching another list is told again");
    assert_eq!(addon_health(&c, "helloworld").unwrap().status, status::TRUE);
    assert!(addon_health(&c, "invented").is_none());
    // The right add-on in another namespace is not what the hub asked about either.
    assert!(apply_addon_health(
        &mut c,
        &[health("helloworld", "elsewhere", status::TRUE)]
    ));
    assert!(addon_health(&c, "helloworld").is_none());
    assert!(!apply_addon_health(
        &mut c,
        &[health("helloworld", "addons", status::FALSE)]
    ));
    assert_eq!(
        addon_health(&c, "helloworld").unwrap().status,
        status::FALSE
    );
}

#[test]
fn an_add_on_no_longer_watched_loses_its_reported_health() {
    let mut c = ManagedCluster::default();
    set_external_addon(&mut c, "helloworld", Some("addons"));
    apply_addon_health(&mut c, &[health("helloworld", "addons", status::TRUE)]);
    set_external_addon(&mut c, "helloworld", Some("moved"));
    assert!(
        addon_health(&c, "helloworld").is_none(),
        "judged in the old namespace"
    );
    apply_addon_health(&mut c, &[health("helloworld", "moved", status::TRUE)]);
    set_external_addon(&mut c, "helloworld", None);
    assert!(addon_health(&c, "helloworld").is_none());
    assert!(
        !apply_addon_health(&mut c, &[]),
        "nothing asked, nothing reported"
    );
}

#[test]
fn a_report_is_checked_entry_by_entry_and_the_error_names_the_field() {
    assert!(validate_addon_health(&[health("helloworld", "addons", status::TRUE)]).is_ok());
    let bad = |h: AddOnHealth| {
        validate_addon_health(&[health("ok", "ns", "True"), h])
            .unwrap_err()
            .to_string()
    };
    assert!(bad(health("Bad_Name", "ns", status::TRUE)).starts_with("addonHealth[1].addon"));
    assert!(bad(health("a", "ns/x", status::TRUE)).starts_with("addonHealth[1].installNamespace"));
    assert!(bad(health("a", "ns", "Maybe")).starts_with("addonHealth[1].status"));
    let mut wrong = health("a", "ns", status::TRUE);
    wrong.reason = reasons::LEASE_NOT_FOUND.into();
    assert!(bad(wrong).starts_with("addonHealth[1].reason"));
    let mut long = health("a", "ns", status::TRUE);
    long.message = "x".repeat(MAX_ADDON_HEALTH_MESSAGE + 1);
    assert!(bad(long).starts_with("addonHealth[1].message"));
    assert!(bad(health("ok", "ns", status::TRUE)).contains("reported twice"));
    let many: Vec<AddOnHealth> = (0..=MAX_ADDON_HEALTH)
        .map(|i| health(&format!("a{i}"), "ns", status::TRUE))
        .collect();
    assert!(
        validate_addon_health(&many)
            .unwrap_err()
            .to_string()
            .contains("at most")
    );
}
