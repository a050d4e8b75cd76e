use super::*;
use bytes::Bytes;
use futures::StreamExt;
use http_body_util::{BodyExt, StreamBody};

/// A refusal whose body is `chunks`, then (with `endless`) nothing more, never ending.
fn refusal_of(chunks: Vec<Bytes>, endless: bool) -> http::Response<Body> {
    let head = futures::stream::iter(chunks.into_iter().map(|c| Ok(hyper::body::Frame::data(c))));
    let body: std::pin::Pin<Box<dyn futures::Stream<Item = _> + Send>> = if endless {
        Box::pin(head.chain(futures::stream::pending()))
    } else {
        Box::pin(head)
    };
    let mut resp = http::Response::new(StreamBody::new(body).boxed_unsync());
    *resp.status_mut() = StatusCode::FORBIDDEN;
    resp
}

async fn text(resp: http::Response<Body>) -> String {
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8_lossy(&body).into_owned()
}

#[tokio::test]
async fn a_spokes_refusal_is_passed_on_whole_when_it_is_small_and_prompt() {
    let status = Bytes::from_static(br#"{"kind":"Status","message":"pods \"x\" not found"}"#);
    let refusal = collected(refusal_of(vec![status.clone()], false))
        .await
        .expect("read whole");
    assert_eq!(refusal.status, StatusCode::FORBIDDEN);
    assert_eq!(refusal.body, status);
}

#[tokio::test(start_paused = true)]
async fn a_refusal_that_never_ends_or_is_too_large_gets_the_hubs_words_in_time() {
    // A hostile spoke drips a refusal for ever: kubectl is answered within the wait, with the
    // spoke's status and the hub's words (over SPDY nothing else bounded it).
    let started = tokio::time::Instant::now();
    let dripping = refusal_of(vec![Bytes::from_static(b"{\"kind\":")], true);
    let resp = collected(dripping).await.expect_err("not read whole");
    assert_eq!(started.elapsed(), REFUSAL_BODY_WAIT);
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    assert!(text(resp).await.contains("the cluster refused the session"));
    let huge = refusal_of(
        vec![Bytes::from(vec![b' '; refusals::MAX_BYTES + 1])],
        false,
    );
    let resp = collected(huge).await.expect_err("too large");
    assert!(text(resp).await.contains("the cluster refused the session"));
}
