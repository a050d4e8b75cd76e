use super::*;
use proptest::prelude::*;

fn v(text: &str) -> Version {
    Version::parse(text).unwrap()
}

#[test]
fn versions_parse_with_their_suffix_and_nonsense_is_named() {
    assert_eq!(
        v("0.2.1-dev+abc"),
        Version {
            major: 0,
            minor: 2,
            patch: 1,
            suffix: "-dev+abc".into()
        }
    );
    assert_eq!(v("v1.4.0").to_string(), "1.4.0");
    for bad in [
        "", "1", "1.2", "1.2.3.4", "a.b.c", "1.2.x", "1.2.3-", " .1.2", "attacker",
    ] {
        assert!(Version::parse(bad).is_err(), "{bad:?}");
    }
    assert_eq!(
        Version::parse("attacker").unwrap_err().to_string(),
        "\"attacker\" is not a version (major.minor.patch, such as 0.2.1)"
    );
}

#[test]
fn a_hub_accepts_its_minor_line_and_the_one_before_and_says_what_to_upgrade() {
    let hub = v("0.2.0");
    let accepts = Accepts::default_for(&hub);
    assert_eq!(accepts.to_string(), "0.1.x to 0.2.x");
    for ok in ["0.1.0", "0.1.9", "0.2.0", "0.2.7", "0.2.0-dev"] {
        assert_eq!(accepts.judge(&hub, ok), Ok(()), "{ok}");
    }
    // Every agent states its version: none at all is a hand-made client, refused.
    assert_eq!(accepts.judge(&hub, ""), Err(Refusal::Unstated));
    assert!(
        Refusal::Unstated
            .to_string()
            .starts_with("the registration states no agent version"),
    );
    assert_eq!(
        accepts.judge(&hub, "0.0.9").unwrap_err().to_string(),
        "agent version 0.0.9 is older than this hub accepts (hub 0.2.0 accepts agents 0.1.x to \
         0.2.x): upgrade the agent (docs/operations.md#versions)"
    );
    assert_eq!(
        accepts.judge(&hub, "0.3.1").unwrap_err().to_string(),
        "agent version 0.3.1 is newer than this hub accepts (hub 0.2.0 accepts agents 0.1.x to \
         0.2.x): upgrade the hubs first (docs/operations.md#versions)"
    );
    assert!(matches!(
        accepts.judge(&hub, "1.2.0"),
        Err(Refusal::TooNew { .. })
    ));
    assert_eq!(
        accepts.judge(&hub, "attacker").unwrap_err().to_string(),
        "agent \"attacker\" is not a version (major.minor.patch, such as 0.2.1)"
    );
    // At X.0 only X.0.*: no implicit compatibility across majors.
    let one = Accepts::default_for(&v("1.0.0"));
    assert!(matches!(
        one.judge(&v("1.0.0"), "0.9.0"),
        Err(Refusal::TooOld { .. })
    ));
}

#[test]
fn agent_version_ranges_parse_and_refuse_what_is_not_one() {
    assert_eq!(
        Accepts::parse("0.1-0.3"),
        Ok(Accepts {
            oldest: (0, 1),
            newest: (0, 3)
        })
    );
    assert_eq!(Accepts::parse("0.2").unwrap().to_string(), "0.2.x");
    assert_eq!(
        Accepts::parse("0.3-0.1"),
        Err(VersionError::Backwards("0.3-0.1".into()))
    );
    for bad in ["", "0", "0.1-", "x.y", "0.1.2", ">=0.1"] {
        assert!(
            matches!(Accepts::parse(bad), Err(VersionError::Range(_))),
            "{bad:?}"
        );
    }
}

#[test]
fn the_cli_warns_past_one_minor_line() {
    assert!(!far_apart(&v("0.2.0"), &v("0.3.5")));
    assert!(far_apart(&v("0.1.0"), &v("0.3.0")));
    assert!(far_apart(&v("1.2.0"), &v("2.2.0")));
}

#[test]
fn this_build_accepts_its_own_agents() {
    let hub = Version::current();
    assert_eq!(Accepts::default_for(&hub).judge(&hub, VERSION), Ok(()));
}

proptest! {
    /// A hub accepts every patch of its own version and never a newer minor line.
    #[test]
    fn own_line_always_newer_minor_never(major in 0u64..5, minor in 0u64..20, patch in 0u64..50, other in 0u64..50, ahead in 1u64..5) {
        let hub = Version { major, minor, patch, suffix: String::new() };
        let accepts = Accepts::default_for(&hub);
        let same = format!("{major}.{minor}.{other}");
        let newer = format!("{major}.{}.0", minor + ahead);
        prop_assert_eq!(accepts.judge(&hub, &same), Ok(()));
        prop_assert!(accepts.judge(&hub, &newer).is_err());
    }
}
