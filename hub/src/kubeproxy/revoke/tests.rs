use super::*;
use crate::grants::file::{Builder, group};
use crate::grants::{Grants, SetIndexView, SetRole};
use crate::grpc::auth::Role;
use flotilla_hub_core::setindex::SetIndex;
use http::Method;
use std::time::Duration;

/// ana: admin on team-a; cleo: view on team-a.
fn grants(with_ana: bool) -> Grants {
    let mut b = Builder::default().set("team-a", SetRole::View, group("team-a-dev"));
    if with_ana {
        b = b.set("team-a", SetRole::Admin, group("team-a-sre"));
    }
    b.build()
}

fn index(generation: u64, a1_in: &str) -> SetIndexView {
    SetIndexView::build(generation, 1, ["team-a", "team-b"], [("a1", vec![a1_in])]).unwrap()
}

fn live() -> Live {
    let index = SetIndex::new();
    index.publish(index_view_a());
    Live::new(grants(true)).with_index(index)
}

fn index_view_a() -> SetIndexView {
    index(1, "team-a")
}

fn member(live: &Live, name: &str, group: &str) -> Identity {
    let mut id = Identity::token(name, Role::Member, Vec::new());
    id.principal = id.principal.with_groups([group]);
    id.scoped(live)
}

fn recheck(live: &Live, who: &Identity, method: Method, path: &str, query: &str) -> Recheck {
    let info = RequestInfo::parse(&method, path, query);
    let act = access::decide_at(who, Some(live), "a1", &info, &Asked::default()).expect("allowed");
    Recheck::new(who, Some(live), "a1", &info, &Asked::default(), &act).expect("under grants")
}

const SOON: Duration = Duration::from_secs(5);
const A_WHILE: Duration = Duration::from_millis(200);

#[tokio::test]
async fn a_session_goes_on_until_its_grant_is_removed_from_the_file() {
    let live = live();
    let ana = member(&live, "ana", "team-a-sre");
    let exec = recheck(
        &live,
        &ana,
        Method::POST,
        "/api/v1/namespaces/d/pods/web/exec",
        "",
    );
    assert_eq!(exec.refusal(), None);
    let revoked = tokio::spawn({
        let exec = exec.clone();
        async move { exec.revoked().await }
    });
    // A reload that keeps ana's grant changes nothing.
    live.replace(grants(true));
    tokio::time::sleep(A_WHILE).await;
    assert!(
        !revoked.is_finished(),
        "a reload keeping the grant ended it"
    );
    live.replace(grants(false));
    let why = tokio::time::timeout(SOON, revoked)
        .await
        .expect("ended")
        .unwrap();
    assert!(
        why.starts_with(
            "the grant that allowed it is gone: ana (groups team-a-sre) may not reach cluster a1"
        ),
        "{why}"
    );
}

#[tokio::test]
async fn a_watch_ends_when_its_cluster_moves_to_another_teams_set() {
    let live = live();
    let cleo = member(&live, "cleo", "team-a-dev");
    let watch = recheck(&live, &cleo, Method::GET, "/api/v1/pods", "watch=true");
    let revoked = tokio::spawn(async move { watch.revoked().await });
    tokio::time::sleep(A_WHILE).await;
    assert!(!revoked.is_finished());
    live.index().publish(index(2, "team-b"));
    let why = tokio::time::timeout(SOON, revoked)
        .await
        .expect("ended")
        .unwrap();
    assert!(
        why.contains("cleo (groups team-a-dev) may not reach cluster a1"),
        "{why}"
    );
}

#[test]
fn a_request_that_would_act_as_someone_else_now_is_revoked() {
    let live = live();
    // ana writes as the agent (admin); with view only she would be refused the write, and a
    // read of hers would still act as the agent: only the write is revoked.
    let ana = member(&live, "ana", "team-a-sre");
    let write = recheck(
        &live,
        &ana,
        Method::POST,
        "/api/v1/namespaces/d/configmaps",
        "",
    );
    let read = recheck(&live, &ana, Method::GET, "/api/v1/pods", "watch=1");
    live.replace(
        Builder::default()
            .set("team-a", SetRole::View, group("team-a-sre"))
            .build(),
    );
    assert!(write.refusal().is_some());
    assert_eq!(read.refusal(), None);
}

fn endless() -> ByteStream {
    let first = futures::stream::once(async { Ok(Bytes::from_static(b"{\"type\":\"ADDED\"}\n")) });
    Box::pin(first.chain(futures::stream::pending()))
}

#[tokio::test]
async fn a_revoked_json_watch_ends_with_an_error_event_saying_why() {
    let live = live();
    let ana = member(&live, "ana", "team-a-sre");
    let watch = recheck(&live, &ana, Method::GET, "/api/v1/secrets", "watch=true");
    let info = RequestInfo::parse(&Method::GET, "/api/v1/secrets", "watch=true");
    let mut body = guarded(endless(), watch, &info, true);
    let first = tokio::time::timeout(SOON, body.next()).await.unwrap();
    assert_eq!(&first.unwrap().unwrap()[..], b"{\"type\":\"ADDED\"}\n");
    live.replace(grants(false));
    let last = tokio::time::timeout(SOON, body.next()).await.unwrap();
    let event: serde_json::Value = serde_json::from_slice(&last.unwrap().unwrap()).unwrap();
    assert_eq!(event["type"], "ERROR");
    assert_eq!(event["object"]["reason"], "Forbidden");
    assert_eq!(event["object"]["code"], 403);
    let message = event["object"]["message"].as_str().unwrap();
    assert!(message.contains("may not reach cluster a1"), "{message}");
    let end = tokio::time::timeout(SOON, body.next()).await.unwrap();
    assert!(end.is_none(), "nothing follows the error event");
}

#[tokio::test]
async fn a_revoked_stream_that_is_not_a_json_watch_is_broken_off() {
    let live = live();
    let ana = member(&live, "ana", "team-a-sre");
    let logs = recheck(
        &live,
        &ana,
        Method::GET,
        "/api/v1/namespaces/d/pods/web/log",
        "follow=true",
    );
    let info = RequestInfo::parse(
        &Method::GET,
        "/api/v1/namespaces/d/pods/web/log",
        "follow=true",
    );
    let mut body = guarded(endless(), logs, &info, false);
    assert!(body.next().await.unwrap().is_ok());
    live.index().publish(index(2, "team-b"));
    let cut = tokio::time::timeout(SOON, body.next()).await.unwrap();
    match cut {
        Some(Err(crate::kubeproxy::BodyError::Revoked(why))) => {
            assert!(why.contains("may not reach cluster a1"), "{why}")
        }
        other => panic!("not cut: {other:?}"),
    }
    assert!(body.next().await.is_none());
}

#[tokio::test]
async fn an_answer_that_ends_by_itself_ends_unchanged() {
    let live = live();
    let ana = member(&live, "ana", "team-a-sre");
    let get = recheck(&live, &ana, Method::GET, "/api/v1/pods", "");
    let info = RequestInfo::parse(&Method::GET, "/api/v1/pods", "");
    let body: ByteStream = Box::pin(futures::stream::iter([
        Ok(Bytes::from_static(b"{\"kind\":")),
        Ok(Bytes::from_static(b"\"PodList\"}")),
    ]));
    let items: Vec<_> = guarded(body, get, &info, true).collect().await;
    assert_eq!(items.len(), 2);
}
