use super::*;

fn request(path: &str, caller: &str, bearer: &str) -> TunnelRequest {
    TunnelRequest {
        method: "GET".into(),
        path: path.into(),
        query: "command=ls".into(),
        bearer: bearer.into(),
        caller: Some(flotilla_api::v1::TunnelCaller {
            name: caller.into(),
            role: "admin".into(),
        }),
        ..TunnelRequest::default()
    }
}

fn exec(pod: usize, caller: &str) -> TunnelRequest {
    request(
        &format!("/api/v1/namespaces/a/pods/p{pod}/exec"),
        caller,
        "",
    )
}

fn refusal(code: u16) -> Refusal {
    Refusal {
        status: http::StatusCode::from_u16(code).unwrap(),
        headers: http::HeaderMap::new(),
        body: Bytes::from_static(b"{}"),
    }
}

#[test]
fn the_spdy_retry_of_a_refused_request_gets_its_refusal_once_within_the_window() {
    let recent = Recent::default();
    let t0 = Instant::now();
    let ws = request("/api/v1/namespaces/a/pods/p/exec", "ana", "token-1");
    let mut spdy = ws.clone();
    spdy.method = "POST".into();
    recent.remember(Key::of("edge-1", &ws), refusal(403), t0);
    // Another cluster, another credential: not theirs.
    assert_eq!(recent.take(&Key::of("edge-2", &spdy), t0), None);
    let other = request("/api/v1/namespaces/a/pods/p/exec", "ana", "token-2");
    assert_eq!(recent.take(&Key::of("edge-1", &other), t0), None);
    assert_eq!(
        recent.take(&Key::of("edge-1", &spdy), t0 + Duration::from_millis(5)),
        Some(refusal(403))
    );
    assert_eq!(recent.take(&Key::of("edge-1", &spdy), t0), None, "once");
    recent.remember(Key::of("edge-1", &ws), refusal(404), t0);
    assert_eq!(
        recent.take(&Key::of("edge-1", &spdy), t0 + REMEMBERED),
        None
    );
}

#[test]
fn a_caller_refused_again_and_again_forgets_only_its_own_refusals() {
    let recent = Recent::default();
    let t0 = Instant::now();
    recent.remember(Key::of("c", &exec(0, "ben")), refusal(404), t0);
    // mallory is refused 300 times within the window, more than every caller's total.
    for i in 0..300 {
        recent.remember(Key::of("c", &exec(i, "mallory")), refusal(403), t0);
    }
    assert_eq!(
        recent.take(&Key::of("c", &exec(0, "ben")), t0),
        Some(refusal(404)),
        "another caller's refusal went"
    );
    // mallory keeps her last PER_CALLER.
    for i in 0..300 - PER_CALLER {
        assert_eq!(recent.take(&Key::of("c", &exec(i, "mallory")), t0), None);
    }
    for i in 300 - PER_CALLER..300 {
        assert!(
            recent
                .take(&Key::of("c", &exec(i, "mallory")), t0)
                .is_some()
        );
    }
}

#[test]
fn when_every_place_is_taken_the_caller_holding_most_gives_one_up() {
    let recent = Recent::default();
    let t0 = Instant::now();
    // Every place taken: 32 callers with 8 each.
    for caller in 0..MAX_REMEMBERED / PER_CALLER {
        for pod in 0..PER_CALLER {
            let caller = format!("u{caller}");
            recent.remember(Key::of("c", &exec(pod, &caller)), refusal(403), t0);
        }
    }
    // A newcomer's refusal takes the oldest place of the first of the busiest (u0's p0).
    recent.remember(Key::of("c", &exec(0, "newcomer")), refusal(404), t0);
    assert!(
        recent
            .take(&Key::of("c", &exec(0, "newcomer")), t0)
            .is_some()
    );
    assert_eq!(recent.take(&Key::of("c", &exec(0, "u0")), t0), None);
    assert!(recent.take(&Key::of("c", &exec(1, "u0")), t0).is_some());
    assert!(recent.take(&Key::of("c", &exec(0, "u1")), t0).is_some());
}

#[test]
fn a_refusal_with_a_large_body_or_large_headers_is_not_remembered() {
    let recent = Recent::default();
    let t0 = Instant::now();
    let big = Refusal {
        body: Bytes::from(vec![b' '; MAX_BYTES + 1]),
        ..refusal(403)
    };
    let r = exec(0, "ana");
    recent.remember(Key::of("c", &r), big, t0);
    assert_eq!(recent.take(&Key::of("c", &r), t0), None);
    // The spoke chooses the headers too: a `Status` with a megabyte of them is not kept.
    let mut headers = http::HeaderMap::new();
    for i in 0..64 {
        headers.insert(
            http::HeaderName::from_bytes(format!("x-pad-{i}").as_bytes()).unwrap(),
            http::HeaderValue::from_str(&"a".repeat(512)).unwrap(),
        );
    }
    let padded = Refusal {
        headers,
        ..refusal(403)
    };
    recent.remember(Key::of("c", &r), padded, t0);
    assert_eq!(recent.take(&Key::of("c", &r), t0), None);
}
