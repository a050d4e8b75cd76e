use super::*;
use flotilla_api::addon::health::reasons;
use flotilla_api::meta::status;
use serde_json::json;

fn helloworld() -> WatchedAddOn {
    WatchedAddOn {
        name: "helloworld".into(),
        install_namespace: "default".into(),
    }
}

fn lease(renew: &str) -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "helloworld", "namespace": "default"},
        "spec": {"leaseDurationSeconds": 60, "renewTime": renew},
    })
}

fn at(rfc3339: &str) -> SystemTime {
    meta::system_time(&meta::parse_rfc3339(rfc3339).unwrap())
}

#[test]
fn a_lease_renewed_within_the_grace_makes_the_add_on_available() {
    let h = judge(
        &helloworld(),
        Ok(Some(lease("2026-11-27T10:00:00.123456Z"))),
        at("2026-11-27T10:04:59Z"),
    );
    assert_eq!(
        (h.status.as_str(), h.reason.as_str()),
        (status::TRUE, reasons::LEASE_UPDATED)
    );
    assert_eq!(
        (h.addon.as_str(), h.install_namespace.as_str()),
        ("helloworld", "default")
    );
}

#[test]
fn a_lease_older_than_the_grace_stops_the_add_on() {
    let h = judge(
        &helloworld(),
        Ok(Some(lease("2026-11-27T10:00:00.000000Z"))),
        at("2026-11-27T10:05:01Z"),
    );
    assert_eq!(
        (h.status.as_str(), h.reason.as_str()),
        (status::FALSE, reasons::LEASE_UPDATE_STOPPED)
    );
}

#[test]
fn no_lease_or_an_unreadable_one_leaves_the_add_on_unknown_and_says_why() {
    let now = at("2026-11-27T10:00:00Z");
    let none = judge(&helloworld(), Ok(None), now);
    assert_eq!(
        (none.status.as_str(), none.reason.as_str()),
        (status::UNKNOWN, reasons::LEASE_NOT_FOUND)
    );
    let failed = judge(&helloworld(), Err("forbidden".into()), now);
    assert_eq!(failed.status, status::UNKNOWN);
    assert_eq!(failed.reason, reasons::LEASE_NOT_FOUND);
    assert!(
        failed.message.contains("default/helloworld"),
        "{}",
        failed.message
    );
    assert!(failed.message.contains("forbidden"), "{}", failed.message);
    let long = judge(&helloworld(), Err("é".repeat(MAX_MESSAGE)), now);
    assert!(long.message.len() <= MAX_MESSAGE);
}

#[test]
fn a_lease_without_a_renew_time_is_not_fresh() {
    let mut l = lease("x");
    l["spec"].as_object_mut().unwrap().remove("renewTime");
    let h = judge(&helloworld(), Ok(Some(l)), at("2026-11-27T10:00:00Z"));
    assert_eq!(h.status, status::FALSE);
    assert!(h.message.contains("renewTime"), "{}", h.message);
    let garbled = judge(
        &helloworld(),
        Ok(Some(lease("yesterday"))),
        at("2026-11-27T10:00:00Z"),
    );
    assert_eq!(garbled.status, status::FALSE);
}
