use super::*;
use flotilla_api::v1::{
    BundleStatus, Condition, GitCommit, GitRepoSpec, GitRepoStatus, ObjectMeta, ReplicaSetSummary,
};

const HEAD: &str = "0123456789abcdef0123456789abcdef01234567";
const OLD: &str = "fedcba9876543210fedcba9876543210fedcba98";

fn repo(commit: &str) -> GitRepo {
    GitRepo {
        metadata: Some(ObjectMeta {
            name: "shop".into(),
            namespace: "stores".into(),
            ..Default::default()
        }),
        spec: Some(GitRepoSpec {
            repo: "https://git.example/shop.git".into(),
            branch: "main".into(),
            paths: vec!["apps/*".into()],
            ..Default::default()
        }),
        status: Some(GitRepoStatus {
            commit: commit.into(),
            head: Some(GitCommit {
                sha: HEAD.into(),
                subject: "web: 2".into(),
                author: "Ada <ada@example.org>".into(),
                time: None,
            }),
            ready_bundles: "1/1".into(),
            display_state: "Modified".into(),
            states: Some(ClusterStates {
                ready: 2,
                modified: 1,
                ..Default::default()
            }),
            bundles: vec![BundleStatus {
                name: "shop-apps-web".into(),
                path: "apps/web".into(),
                replica_set: "shop-apps-web".into(),
                content_commit: commit.into(),
                summary: Some(ReplicaSetSummary {
                    total: 3,
                    available: 3,
                    ..Default::default()
                }),
                ..Default::default()
            }],
            conditions: vec![Condition {
                r#type: "Fetched".into(),
                status: "True".into(),
                ..Default::default()
            }],
            ..Default::default()
        }),
    }
}

fn row(cluster: &str, state: &str) -> GitRepoClusterRow {
    GitRepoClusterRow {
        bundle: "shop-apps-web".into(),
        cluster: cluster.into(),
        state: state.into(),
        commit: HEAD.into(),
        message: String::new(),
    }
}

#[test]
fn the_list_shows_the_delivered_commit_its_subject_and_the_states_worst_first() {
    let page = render_list(&[repo(HEAD)]).into_string();
    assert!(page.contains("href=\"/gitrepos/stores/shop\""), "{page}");
    assert!(page.contains("0123456789ab"), "short commit: {page}");
    assert!(!page.contains(HEAD), "never the whole id: {page}");
    assert!(page.contains("web: 2"), "{page}");
    assert!(page.contains("1 Modified, 2 Ready"), "{page}");
    assert!(page.contains("badge bad\">Modified"), "{page}");
}

#[test]
fn a_head_not_delivered_shows_no_subject_in_the_list_and_says_so_on_its_page() {
    let list = render_list(&[repo(OLD)]).into_string();
    assert!(
        !list.contains("web: 2"),
        "the subject is the head's: {list}"
    );
    let page = render(&repo(OLD), &[], "", false).into_string();
    assert!(page.contains("the head is not delivered"), "{page}");
    assert!(page.contains("fedcba987654"), "{page}");
    assert!(page.contains("Ada &lt;ada@example.org&gt;"), "{page}");
}

#[test]
fn the_page_has_bundles_linked_to_their_rollout_and_clusters_with_state_filters() {
    let rows = [row("store-1", "Ready"), row("store-2", "Modified")];
    let page = render(&repo(HEAD), &rows, "", false).into_string();
    assert!(
        page.contains("href=\"/rollouts/stores/shop-apps-web\""),
        "{page}"
    );
    assert!(page.contains("3/3"), "{page}");
    assert!(
        page.contains("data-cluster=\"store-2\" data-state=\"Modified\""),
        "{page}"
    );
    assert!(
        page.contains("href=\"/gitrepos/stores/shop?state=Modified\""),
        "{page}"
    );
    assert!(!page.contains("id=\"more\""), "{page}");
    let none = render(&repo(HEAD), &[], "ErrApplied", false).into_string();
    assert!(none.contains("No cluster in ErrApplied."), "{none}");
    assert!(
        none.contains("class=\"active\">ErrApplied"),
        "the filter shown: {none}"
    );
}

#[test]
fn rows_beyond_a_page_or_left_out_by_the_hub_point_to_the_cli() {
    let rows: Vec<_> = (0..PAGE_ROWS + 5)
        .map(|i| row(&format!("store-{i}"), "Ready"))
        .collect();
    let page = render(&repo(HEAD), &rows, "", false).into_string();
    assert_eq!(page.matches("data-state=\"Ready\"").count(), PAGE_ROWS);
    assert!(
        page.contains("flotilla get gitrepos shop -n stores --clusters"),
        "{page}"
    );
    let page = render(&repo(HEAD), &rows[..2], "", true).into_string();
    assert!(page.contains("id=\"more\""), "{page}");
}

#[test]
fn hostile_names_messages_and_subjects_are_escaped() {
    const EVIL: &str = "<script>alert(\"x\")</script>'";
    let mut r = repo(HEAD);
    let m = r.metadata.as_mut().unwrap();
    m.name = EVIL.into();
    m.namespace = EVIL.into();
    let st = r.status.as_mut().unwrap();
    st.head.as_mut().unwrap().subject = EVIL.into();
    st.bundles[0].name = EVIL.into();
    st.bundles[0].replica_set = EVIL.into();
    let mut bad = row(EVIL, EVIL);
    bad.message = EVIL.into();
    bad.bundle = EVIL.into();
    for page in [
        render_list(std::slice::from_ref(&r)).into_string(),
        render(&r, &[bad], EVIL, true).into_string(),
    ] {
        assert!(!page.contains("<script>"), "{page}");
        assert!(!page.contains("alert(\"x\")"), "{page}");
        assert!(page.contains("&lt;script&gt;"), "{page}");
    }
}
