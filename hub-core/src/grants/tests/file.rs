use crate::grants::file::{self, Builder, FileError, Invalid, group, user};
use crate::grants::{FleetRole, Grant, Held, NamespaceRole, Principal, SetRole, Via};
use std::sync::Arc;

/// The design's example file (docs/notes/issue-48-design.md §3.2).
const EXAMPLE: &str = r#"apiVersion: flotilla.io/v1alpha1
kind: Grants
fleet:
  admin: { groups: [platform-admins], users: ["https://idp.example#ops-oncall"] }
  view:  { groups: [auditors] }
clusterSets:
  team-a:
    admin: { groups: [team-a-sre] }
    bind:  { groups: [team-a-leads] }
    view:  { groups: [team-a-dev] }
  team-b:
    admin: { groups: [team-b-sre] }
namespaces:
  team-a-apps:
    edit: { groups: [team-a-dev, team-a-sre] }
    view: { groups: [auditors] }
  team-b-apps:
    edit: { groups: [team-b-sre] }
"#;

fn principal(name: &str, groups: &[&str]) -> Principal {
    Principal::user(name, Via::Token).with_groups(groups)
}

#[test]
fn the_example_file_gives_each_principal_the_union_of_its_user_and_groups() {
    let grants = file::parse("grants.yaml", EXAMPLE.as_bytes()).unwrap();
    assert_eq!(grants.entries(), 11);
    assert_eq!(grants.subjects(), 7);

    let ana = grants.held_by(&principal("ana", &["team-a-sre", "auditors"]));
    assert_eq!(ana.fleet, Some(FleetRole::View));
    assert_eq!(ana.sets.get("team-a"), Some(&SetRole::Admin));
    assert_eq!(ana.sets.get("team-b"), None);
    // edit from team-a-sre beats view from auditors.
    assert_eq!(
        ana.namespaces.get("team-a-apps"),
        Some(&NamespaceRole::Edit)
    );
    assert_eq!(ana.namespaces.get("team-b-apps"), None);

    let ops = grants.held_by(&principal("https://idp.example#ops-oncall", &[]));
    assert_eq!(ops.fleet, Some(FleetRole::Admin));
    let nobody = grants.held_by(&principal("ops-oncall", &["team-c"]));
    assert_eq!(nobody, Held::default(), "users match exactly");

    let cleo = grants.held_by(&principal("cleo", &["team-a-dev"]));
    assert_eq!(
        cleo.grants(),
        [
            Grant::Set {
                name: "team-a".into(),
                role: SetRole::View
            },
            Grant::Namespace {
                name: "team-a-apps".into(),
                role: NamespaceRole::Edit
            },
        ]
    );
    assert_eq!(
        grants.set_names().into_iter().collect::<Vec<_>>(),
        [Arc::from("team-a"), Arc::from("team-b")]
    );
}

#[test]
fn a_file_of_the_wrong_shape_names_its_line_column_and_path() {
    let text = EXAMPLE.replace(
        "    edit: { groups: [team-b-sre] }",
        "    edits: { groups: [x] }",
    );
    let e = file::parse("grants.yaml", text.as_bytes()).unwrap_err();
    let FileError::Yaml { line, message, .. } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(*line, 18, "{e}");
    assert!(
        message.starts_with("namespaces.team-b-apps: unknown field `edits`"),
        "{e}"
    );
    assert!(message.contains("`admin`, `edit`, `view`"), "{e}");
    assert!(
        e.to_string()
            .starts_with("grants.yaml:18:5: namespaces.team-b-apps:"),
        "{e}"
    );
    assert!(
        !e.to_string().contains("at line"),
        "the position is said once: {e}"
    );

    for (bad, what) in [
        ("kind: Grants\n", "apiVersion"),
        (
            "apiVersion: flotilla.io/v1alpha1\nkind: Grants\nfleet:\n  root: {}\n",
            "fleet: unknown field `root`",
        ),
        (
            "apiVersion: flotilla.io/v1alpha1\nkind: Grants\nfleet:\n  admin: { users: alice }\n",
            "fleet.admin.users",
        ),
        ("- [", ""),
    ] {
        let e = file::parse("g.yaml", bad.as_bytes()).unwrap_err();
        assert!(matches!(e, FileError::Yaml { .. }), "{bad}: {e:?}");
        assert!(e.to_string().starts_with("g.yaml:"), "{e}");
        assert!(e.to_string().contains(what), "{bad}: {e}");
    }
}

#[test]
fn every_wrong_name_is_reported_at_once_with_its_path() {
    let text = r#"apiVersion: flotilla.io/v1
kind: Grant
fleet:
  view: { users: [" padded"] }
clusterSets:
  team-a:
    admin: { groups: [ok, ok2, ""] }
  Team_B:
    view: { users: [bob] }
namespaces:
  "Team-A":
    edit: { groups: [team-a-dev] }
"#;
    let e = file::parse("grants.yaml", text.as_bytes()).unwrap_err();
    let FileError::Invalid { errors, .. } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(errors.len(), 6, "{e}");
    let shown = e.to_string();
    for line in [
        r#"grants.yaml: apiVersion: "flotilla.io/v1" is not "flotilla.io/v1alpha1""#,
        r#"grants.yaml: kind: "Grant" is not "Grants""#,
        r#"grants.yaml: fleet.view.users[0]: " padded" is not a user name"#,
        r#"grants.yaml: clusterSets.team-a.admin.groups[2]: "" is not a group name"#,
        r#"grants.yaml: clusterSets."Team_B": "Team_B" contains 'T'"#,
        r#"grants.yaml: namespaces."Team-A": "Team-A" contains 'T'"#,
    ] {
        assert!(
            shown.lines().any(|l| l.starts_with(line)),
            "want {line}\nin\n{shown}"
        );
    }
}

#[test]
fn limits_refuse_oversized_files_and_too_many_subjects() {
    let huge = vec![b'#'; file::MAX_BYTES + 1];
    let e = file::parse("g.yaml", &huge).unwrap_err();
    assert!(matches!(e, FileError::TooLarge { .. }), "{e:?}");

    let users: Vec<String> = (0..=file::MAX_SUBJECTS)
        .map(|i| format!("\"u{i}\""))
        .collect();
    let text = format!(
        "apiVersion: flotilla.io/v1alpha1\nkind: Grants\nfleet:\n  view: {{ users: [{}] }}\n",
        users.join(", ")
    );
    let e = file::parse("g.yaml", text.as_bytes()).unwrap_err();
    let FileError::Invalid { errors, .. } = &e else {
        panic!("{e:?}")
    };
    assert_eq!(
        errors,
        &[Invalid::TooMany {
            what: "subjects",
            count: file::MAX_SUBJECTS + 1,
            limit: file::MAX_SUBJECTS
        }]
    );
}

#[test]
fn the_digest_ignores_order_and_repeats_but_not_content() {
    let reordered = r#"kind: Grants
apiVersion: flotilla.io/v1alpha1
namespaces:
  team-b-apps:
    edit: { groups: [team-b-sre, team-b-sre] }
  team-a-apps:
    view: { groups: [auditors] }
    edit: { groups: [team-a-sre, team-a-dev] }
clusterSets:
  team-b:
    admin: { groups: [team-b-sre] }
  team-a:
    view:  { groups: [team-a-dev] }
    bind:  { groups: [team-a-leads] }
    admin: { groups: [team-a-sre] }
fleet:
  view:  { groups: [auditors] }
  admin: { users: ["https://idp.example#ops-oncall"], groups: [platform-admins] }
"#;
    let a = file::parse("a", EXAMPLE.as_bytes()).unwrap();
    let b = file::parse("b", reordered.as_bytes()).unwrap();
    assert_eq!(a.digest(), b.digest());
    assert_eq!(a, b);
    assert_eq!(a.digest_hex().len(), 64);
    let changed = EXAMPLE.replace("[auditors] }\nclusterSets", "[auditor] }\nclusterSets");
    let c = file::parse("c", changed.as_bytes()).unwrap();
    assert_ne!(a.digest(), c.digest());
    assert_ne!(crate::grants::Grants::none().digest(), a.digest());
}

#[test]
fn the_builder_writes_a_file_that_parses_back_to_the_same_grants() {
    let built = Builder::default()
        .fleet(FleetRole::Admin, user("root \"quoted\""))
        .set("team-a", SetRole::Admin, group("team-a-sre"))
        .set("team-a", SetRole::View, user("cleo"))
        .namespace("team-a-apps", NamespaceRole::Edit, group("team-a-sre"));
    let text = built.to_yaml();
    let parsed =
        file::parse("built.yaml", text.as_bytes()).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(parsed, built.build());
    assert_eq!(parsed.entries(), 4);
}

#[test]
fn a_missing_file_is_a_read_error_naming_it() {
    let e = file::load(std::path::Path::new("/nonexistent/grants.yaml")).unwrap_err();
    assert!(matches!(e, FileError::Read { .. }), "{e:?}");
    assert!(
        e.to_string().starts_with("/nonexistent/grants.yaml: "),
        "{e}"
    );
}

#[test]
fn each_grant_held_names_the_user_and_groups_that_give_it() {
    use crate::grants::{Source, Subject};
    let grants = Builder::default()
        .set("team-a", SetRole::Admin, group("team-a-sre"))
        .set("team-a", SetRole::View, user("ana"))
        .namespace("apps", NamespaceRole::Edit, user("ana"))
        .namespace("apps", NamespaceRole::Edit, group("team-a-sre"))
        .fleet(FleetRole::View, group("auditors"))
        .build();
    let ana = principal("ana", &["team-a-sre", "auditors"]);
    let sources = grants.sources(&ana);
    let set = |name: &str, role| Grant::Set {
        name: name.into(),
        role,
    };
    assert_eq!(
        sources,
        [
            Source {
                grant: Grant::Fleet(FleetRole::View),
                from: vec![Subject::Group("auditors".into())],
            },
            // The highest role on a set: only the subjects that give it.
            Source {
                grant: set("team-a", SetRole::Admin),
                from: vec![Subject::Group("team-a-sre".into())],
            },
            Source {
                grant: Grant::Namespace {
                    name: "apps".into(),
                    role: NamespaceRole::Edit,
                },
                from: vec![
                    Subject::User("ana".into()),
                    Subject::Group("team-a-sre".into()),
                ],
            },
        ]
    );
    assert!(grants.sources(&principal("nobody", &[])).is_empty());
}
