use super::*;

#[test]
fn components_that_name_nothing_usable_are_refused() {
    for bad in [
        &b""[..],
        b".",
        b"..",
        b".git",
        b".GIT",
        b".git. ",
        b"a/b",
        b"a\\b",
        b"esc\x1b",
        b"\xff\xfe",
    ] {
        assert!(check_component("apps", bad).is_err(), "{bad:?} accepted");
    }
    let long = vec![b'a'; 256];
    assert!(check_component("", &long).is_err());
    for good in [
        &b"web"[..],
        b".fleetignore",
        b"fleet.yaml",
        b"caf\xc3\xa9",
        b".gitignore",
    ] {
        assert_eq!(check_component("apps", good), Ok(()));
    }
}

#[test]
fn a_component_error_names_the_path_with_the_bad_name_escaped() {
    let err = check_component("apps/web", b"..\x1b").unwrap_err();
    assert_eq!(
        err.to_string(),
        "apps/web/..\\x1b: not a usable file name (holds a control character)"
    );
}

#[test]
fn specs_parse_into_literals_and_globs_and_refuse_leaving_the_repository() {
    assert_eq!(parse_spec("/").unwrap(), vec![]);
    assert_eq!(parse_spec("").unwrap(), vec![]);
    assert_eq!(
        parse_spec("apps/*/").unwrap(),
        vec![SpecPart::Literal("apps".into()), SpecPart::Glob("*".into())]
    );
    for bad in [
        "/etc",
        "apps/../..",
        "./apps",
        "apps//web",
        "**/x",
        "a/[ab]",
        ".git/objects",
    ] {
        let err = parse_spec(bad).unwrap_err();
        assert!(matches!(err, PathError::Spec { .. }), "{bad}: {err}");
    }
}

#[test]
fn globs_match_within_one_component() {
    let cases = [
        ("*", "web", true),
        ("*", "", true),
        ("w?b", "web", true),
        ("w?b", "wb", false),
        ("*-eu", "shop-eu", true),
        ("*-eu", "shop-us", false),
        ("a*b*c", "aXXbYYc", true),
        ("a*b*c", "aXXbYY", false),
        ("**", "x", true),
        ("caf?", "café", true),
    ];
    for (pattern, name, want) in cases {
        assert_eq!(glob_match(pattern, name), want, "{pattern} ~ {name}");
    }
}

#[test]
fn within_compares_whole_components() {
    assert!(within("apps/web", "apps/web/cm.yaml"));
    assert!(within("apps/web", "apps/web"));
    assert!(!within("apps/web", "apps/website/cm.yaml"));
    assert!(within("", "anything"));
}

#[test]
fn links_resolve_lexically_and_stay_in_their_root() {
    assert_eq!(
        resolve_link("apps/web/a.yaml", b"b.yaml", "apps/web").unwrap(),
        "apps/web/b.yaml"
    );
    assert_eq!(
        resolve_link("apps/web/x/a.yaml", b"../b.yaml", "apps/web").unwrap(),
        "apps/web/b.yaml"
    );
    assert_eq!(
        resolve_link("apps/web/a.yaml", b"./x//y.yaml", "apps/web").unwrap(),
        "apps/web/x/y.yaml"
    );
    for (target, why) in [
        (&b"../../../etc/passwd"[..], "climbs out"),
        (b"/etc/passwd", "absolute"),
        (b"../db/cm.yaml", "sibling directory"),
        (b"", "empty"),
        (b"x\\y", "backslash"),
        (b"../../../../../../../../x", "above the repository"),
        (b".git/config", "the repository's own directory"),
    ] {
        let err = resolve_link("apps/web/a.yaml", target, "apps/web").unwrap_err();
        assert!(matches!(err, PathError::LinkEscapes { .. }), "{why}: {err}");
    }
    let err = resolve_link("apps/web/secret.yaml", b"../../../etc/passwd", "apps/web").unwrap_err();
    assert_eq!(
        err.to_string(),
        "apps/web/secret.yaml is a symlink to ../../../etc/passwd, outside apps/web"
    );
}

#[test]
fn link_chains_end_at_a_file_and_loops_are_cut() {
    let tree = |path: &str| match path {
        "r/a" => Found::Link(b"b".to_vec()),
        "r/b" => Found::Link(b"c".to_vec()),
        "r/c" => Found::File,
        "r/loop1" => Found::Link(b"loop2".to_vec()),
        "r/loop2" => Found::Link(b"loop1".to_vec()),
        "r/dir" => Found::Other,
        _ => Found::Other,
    };
    assert_eq!(follow_links("r/x", b"a", "r", tree).unwrap(), "r/c");
    assert!(matches!(
        follow_links("r/x", b"loop1", "r", tree).unwrap_err(),
        PathError::LinkChain { .. }
    ));
    assert!(matches!(
        follow_links("r/x", b"dir", "r", tree).unwrap_err(),
        PathError::LinkDangling { .. }
    ));
    assert!(matches!(
        follow_links("r/x", b"missing", "r", tree).unwrap_err(),
        PathError::LinkDangling { .. }
    ));
}
