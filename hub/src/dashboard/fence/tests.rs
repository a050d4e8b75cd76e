use super::*;
use crate::grants::file::{Builder, group};
use crate::grants::live::Live;
use crate::grants::{SetIndexView, SetRole};
use crate::grpc::auth::Role;
use flotilla_hub_core::setindex::SetIndex;
use std::time::{Duration, SystemTime};

const A: Availability = Availability::Available;
const U: Availability = Availability::Unknown;

fn view(generation: u64, members: &[(&str, &str)]) -> SetIndexView {
    let members = members.iter().map(|(c, s)| (*c, vec![*s]));
    SetIndexView::build(generation, 1, ["team-a", "team-b"], members).unwrap()
}

/// ana views team-a; a1 and a2 are team-a's, b1 team-b's; all Available.
fn setup() -> (Live, Teams, Identity, RwLock<History>) {
    let index = SetIndex::new();
    index.publish(view(
        1,
        &[("a1", "team-a"), ("a2", "team-a"), ("b1", "team-b")],
    ));
    let grants = Builder::default()
        .set("team-a", SetRole::View, group("team-a-dev"))
        .build();
    let live = Live::new(grants).with_index(index);
    let mut ana = Identity::token("ana", Role::Member, Vec::new());
    ana.principal = ana.principal.with_groups(["team-a-dev"]);
    let ana = ana.scoped(&live);
    let mut history = History::default();
    for name in ["a1", "a2", "b1"] {
        history.observe(&name.into(), Some(A), SystemTime::now(), true);
    }
    (
        live.clone(),
        Teams::new(Some(live)),
        ana,
        RwLock::new(history),
    )
}

fn transition(h: &RwLock<History>, name: &str, to: Option<Availability>) -> LiveEvent {
    let t = h
        .write()
        .unwrap()
        .observe(&name.into(), to, SystemTime::now(), false);
    LiveEvent::Transition(t.expect("a change"))
}

fn counts(available: usize, unknown: usize) -> Counts {
    let mut c = Counts::default();
    (0..available).for_each(|_| c.add(A));
    (0..unknown).for_each(|_| c.add(U));
    c
}

#[test]
fn a_transition_the_recount_already_saw_is_not_counted_twice() {
    let (_live, teams, ana, history) = setup();
    let mut fence = Fence::of(&teams, &ana, &history.read().unwrap()).unwrap();
    assert_eq!(fence.counts(), counts(2, 0));
    // a2 goes Unknown; before the stream reads the transition, a recount sees it.
    let queued = transition(&history, "a2", Some(U));
    fence.recount(&history.read().unwrap());
    assert_eq!(fence.counts(), counts(1, 1));
    assert!(fence.admits(&queued));
    assert_eq!(fence.counts(), counts(1, 1), "counted twice");
    // A new cluster queued the same way is one cluster, and a deleted one is gone once.
    let made = transition(&history, "a3", Some(A));
    fence.recount(&history.read().unwrap());
    assert!(!fence.admits(&made), "a3 is in no set yet");
    let gone = transition(&history, "a1", None);
    fence.recount(&history.read().unwrap());
    assert!(fence.admits(&gone));
    assert_eq!(fence.counts(), counts(0, 1));
    // Another team's cluster is neither told nor counted.
    assert!(!fence.admits(&transition(&history, "b1", Some(U))));
    assert_eq!(fence.counts(), counts(0, 1));
}

#[tokio::test]
async fn a_move_recounts_only_the_moved_clusters_and_sends_counts_only_when_they_change() {
    let (live, teams, ana, history) = setup();
    let mut fence = Fence::of(&teams, &ana, &history.read().unwrap()).unwrap();
    // The fleet's summaries say nothing new to this page while its counts are unchanged.
    assert_eq!(fence.summary_changed(counts(3, 0)), None);
    // b1 moves into team-a: counted in, sent once.
    live.index().publish_change(
        view(2, &[("a1", "team-a"), ("a2", "team-a"), ("b1", "team-a")]),
        Changed::Some(vec!["b1".into()]),
    );
    let next = tokio::time::timeout(Duration::from_secs(5), fence.changed(&history)).await;
    assert_eq!(next.unwrap(), Next::Summary(counts(3, 0)));
    assert_eq!(fence.summary_changed(counts(3, 0)), None);
    // Another team's relabel moves nothing of ana's: no frame at all.
    live.index().publish_change(
        view(
            3,
            &[
                ("a1", "team-a"),
                ("a2", "team-a"),
                ("b1", "team-a"),
                ("b2", "team-b"),
            ],
        ),
        Changed::Some(vec!["b2".into()]),
    );
    let quiet = tokio::time::timeout(Duration::from_millis(200), fence.changed(&history)).await;
    assert!(
        quiet.is_err(),
        "a frame for a change of another team's: {quiet:?}"
    );
    assert_eq!(fence.counts(), counts(3, 0));
    // Only the named clusters are re-checked: a cluster the index did not name keeps its
    // count (the publication is trusted), and one it names moves out.
    live.index().publish_change(
        view(4, &[("a1", "team-b"), ("a2", "team-a"), ("b1", "team-a")]),
        Changed::Some(vec!["a1".into()]),
    );
    let next = tokio::time::timeout(Duration::from_secs(5), fence.changed(&history)).await;
    assert_eq!(next.unwrap(), Next::Summary(counts(2, 0)));
    // A change the index cannot name recounts everything.
    live.index().publish(view(5, &[("a2", "team-a")]));
    let next = tokio::time::timeout(Duration::from_secs(5), fence.changed(&history)).await;
    assert_eq!(next.unwrap(), Next::Summary(counts(1, 0)));
}

#[tokio::test]
async fn a_reload_of_the_grants_resets_the_page() {
    let (live, teams, ana, history) = setup();
    let mut fence = Fence::of(&teams, &ana, &history.read().unwrap()).unwrap();
    live.replace(Builder::default().build());
    let next = tokio::time::timeout(Duration::from_secs(5), fence.changed(&history)).await;
    assert_eq!(next.unwrap(), Next::Reset);
}
