use super::*;
use crate::protocol::{ErrorKind, TreeEntry};

fn file(path: &str, content: &str) -> TreeEntry {
    TreeEntry {
        path: path.into(),
        kind: EntryKind::File as i32,
        size: content.len() as u64,
        content: content.as_bytes().to_vec(),
        target: String::new(),
    }
}

fn link(path: &str, target: &str) -> TreeEntry {
    TreeEntry {
        path: path.into(),
        kind: EntryKind::Symlink as i32,
        size: 4,
        content: Vec::new(),
        target: target.into(),
    }
}

fn answer(entries: Vec<TreeEntry>) -> FetchResult {
    FetchResult {
        commit: "a".repeat(40),
        entries,
        ..Default::default()
    }
}

fn limits() -> Limits {
    Limits::default().effective()
}

#[test]
fn a_well_formed_answer_passes() {
    let r = answer(vec![
        file("apps/web/cm.yaml", "kind: ConfigMap"),
        link("apps/web/l.yaml", "apps/web/cm.yaml"),
    ]);
    assert_eq!(result(&r, &limits()), Ok(()));
    let failed = FetchResult::failed(ErrorKind::Refused, "x");
    assert_eq!(result(&failed, &limits()), Ok(()));
}

#[test]
fn answers_breaking_a_rule_are_refused_with_the_reason() {
    let cases: Vec<(FetchResult, &str)> = vec![
        (
            FetchResult {
                commit: "zz".into(),
                ..Default::default()
            },
            "not a 40-hex id",
        ),
        (
            answer(vec![file("apps/../etc/cm.yaml", "x")]),
            "not a usable file name",
        ),
        (
            answer(vec![file("apps/.git/config.yaml", "x")]),
            "not a usable file name",
        ),
        (
            answer(vec![file("a.yaml", "x"), file("a.yaml", "y")]),
            "listed twice",
        ),
        (
            answer(vec![link("a.yaml", "missing.yaml")]),
            "not a listed file",
        ),
        (
            answer(vec![TreeEntry {
                size: 99,
                ..file("a.yaml", "x")
            }]),
            "content length differs",
        ),
        (answer(vec![file("bin/tool", "x")]), "not a manifest"),
        (
            answer(vec![TreeEntry {
                size: 2 * 1024 * 1024,
                ..file("big.bin", "")
            }]),
            "over the file limit",
        ),
        (
            FetchResult {
                commit: String::new(),
                entries: vec![file("a.yaml", "x")],
                ..FetchResult::failed(ErrorKind::Transport, "x")
            },
            "an error answer carries",
        ),
    ];
    for (r, want) in cases {
        let err = result(&r, &limits()).unwrap_err();
        assert!(err.0.contains(want), "{err} (wanted {want:?})");
    }
}

#[test]
fn more_entries_than_the_limit_are_refused() {
    let entries = (0..11).map(|i| file(&format!("f{i}.yaml"), "x")).collect();
    let limits = Limits {
        max_entries: 10,
        ..Default::default()
    }
    .effective();
    assert!(
        result(&answer(entries), &limits)
            .unwrap_err()
            .0
            .contains("11 entries; at most 10")
    );
}
