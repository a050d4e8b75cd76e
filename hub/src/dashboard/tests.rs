//! Unit tests of the dashboard's pure parts: escaping, routes, auth rules, history, the
//! clusters list, the live feed's encoding.

use super::auth::{self, Sessions, Via};
use super::clusters::{self, ListQuery, Sort};
use super::history::{Availability, History, HistoryLimits};
use super::html::{E, U};
use super::route::{self, Route};
use flotilla_api::meta::{CLUSTERSET_LABEL, COND_AVAILABLE};
use flotilla_api::v1::{
    Condition, ManagedCluster, ManagedClusterSpec, ManagedClusterStatus, ObjectMeta,
};
use http::{HeaderMap, HeaderValue, Method};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// A cluster fixture.
struct Cluster(ManagedCluster);

impl Cluster {
    fn test(name: &str) -> Self {
        Self(ManagedCluster {
            metadata: Some(ObjectMeta {
                name: name.into(),
                ..Default::default()
            }),
            spec: Some(ManagedClusterSpec {
                hub_accepts_client: true,
                ..Default::default()
            }),
            status: Some(ManagedClusterStatus::default()),
            hub: None,
        })
    }
    fn label(mut self, k: &str, v: &str) -> Self {
        self.0
            .metadata
            .as_mut()
            .unwrap()
            .labels
            .insert(k.into(), v.into());
        self
    }
    fn available(mut self, status: &str) -> Self {
        self.0.status.as_mut().unwrap().conditions.push(Condition {
            r#type: COND_AVAILABLE.into(),
            status: status.into(),
            ..Default::default()
        });
        self
    }
    fn pending(mut self) -> Self {
        self.0.spec.as_mut().unwrap().hub_accepts_client = false;
        self
    }
    fn build(self) -> Arc<ManagedCluster> {
        Arc::new(self.0)
    }
}

#[test]
fn hostile_values_are_escaped_in_text_attributes_and_urls() {
    let evil = "<script>alert(1)</script>\"'&";
    assert_eq!(
        E(evil).to_string(),
        "&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&amp;"
    );
    assert_eq!(U("a/b?c=d e").to_string(), "a%2Fb%3Fc%3Dd%20e");
}

#[test]
fn a_label_value_with_a_script_is_rendered_inert_on_the_cluster_page() {
    let c = Cluster::test("edge-1")
        .label("note", "<script>alert('x')</script>")
        .build();
    let page = super::cluster::render(&c, &[], None);
    assert!(!page.contains("<script>"), "{page}");
    assert!(page.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;"));
    let list = clusters::build(&[c], &ListQuery::default());
    let page = clusters::render(&list, &ListQuery::default(), &[]);
    assert!(!page.contains("<script>"));
}

#[test]
fn every_view_has_its_own_url_and_methods_are_checked() {
    let get = |p: &str| route::route(&Method::GET, p);
    assert_eq!(get("/"), Ok(Route::Overview));
    assert_eq!(get("/clusters"), Ok(Route::Clusters));
    assert_eq!(get("/clusters/edge-1"), Ok(Route::Cluster("edge-1".into())));
    assert_eq!(
        get("/placements/default/p1"),
        Ok(Route::Placement {
            namespace: "default".into(),
            name: "p1".into()
        })
    );
    assert_eq!(
        route::route(&Method::POST, "/rollouts/default/rs"),
        Ok(Route::RolloutAction {
            namespace: "default".into(),
            name: "rs".into()
        })
    );
    assert_eq!(
        route::route(&Method::POST, "/clusters"),
        Err(route::NoRoute::Method("GET"))
    );
    assert_eq!(
        route::route(&Method::GET, "/logout"),
        Err(route::NoRoute::Method("POST"))
    );
    // An encoded slash cannot smuggle a second segment.
    assert_eq!(get("/clusters/a%2Fb"), Err(route::NoRoute::NotFound));
    assert_eq!(get("/nope"), Err(route::NoRoute::NotFound));
}

#[test]
fn sign_in_goes_back_only_to_a_page_of_this_server() {
    assert_eq!(auth::safe_next(Some("/clusters?q=a")), "/clusters?q=a");
    for bad in [
        "//evil.example/x",
        "https://evil.example",
        "/\\evil",
        "javascript:1",
    ] {
        assert_eq!(auth::safe_next(Some(bad)), "/", "{bad}");
    }
    assert_eq!(auth::safe_next(None), "/");
}

fn tokens() -> crate::grpc::auth::Tokens {
    crate::grpc::auth::Tokens::parse(
        "t.csv",
        "admin-token-0123456789,alice,admin\nview-token-01234567890,bob,read-only\n",
    )
    .unwrap()
}

#[test]
fn sessions_take_a_known_token_and_end_on_sign_out() {
    let sessions = Sessions::new(Some(tokens()), auth::SessionConfig::default());
    assert!(sessions.sign_in("not-a-token").is_none());
    let id = sessions.sign_in("view-token-01234567890").unwrap();
    let mut h = HeaderMap::new();
    h.insert(
        http::header::COOKIE,
        HeaderValue::from_str(&format!("other=1; {}={id}", auth::COOKIE)).unwrap(),
    );
    let v = sessions.authenticate(&h).unwrap();
    assert_eq!(v.identity.name, "bob");
    assert_eq!(v.via, Via::Session(id.clone()));
    assert!(v.may(super::rollouts::ROLLOUT_METHOD).is_err());
    sessions.sign_out(&id);
    assert_eq!(
        sessions.authenticate(&h).unwrap_err(),
        auth::Refusal::SessionEnded
    );
    assert_eq!(
        sessions.authenticate(&HeaderMap::new()).unwrap_err(),
        auth::Refusal::NoCredentials
    );
    let mut bearer = HeaderMap::new();
    bearer.insert(
        http::header::AUTHORIZATION,
        HeaderValue::from_static("Bearer wrong-token-0000000000"),
    );
    assert_eq!(
        sessions.authenticate(&bearer).unwrap_err(),
        auth::Refusal::UnknownToken
    );
}

#[test]
fn sessions_are_bounded_and_expire() {
    let sessions = Sessions::new(
        Some(tokens()),
        auth::SessionConfig {
            ttl: Duration::ZERO,
            max: 2,
        },
    );
    for _ in 0..5 {
        sessions.sign_in("admin-token-0123456789").unwrap();
    }
    assert!(sessions.len() <= 2);
    let id = sessions.sign_in("admin-token-0123456789").unwrap();
    let mut h = HeaderMap::new();
    h.insert(
        http::header::COOKIE,
        HeaderValue::from_str(&format!("{}={id}", auth::COOKIE)).unwrap(),
    );
    assert_eq!(
        sessions.authenticate(&h).unwrap_err(),
        auth::Refusal::SessionEnded
    );
}

#[test]
fn a_browser_post_needs_its_csrf_token_and_the_same_site() {
    let sessions = Sessions::new(Some(tokens()), auth::SessionConfig::default());
    let id = sessions.sign_in("admin-token-0123456789").unwrap();
    let mut h = HeaderMap::new();
    h.insert(
        http::header::COOKIE,
        HeaderValue::from_str(&format!("{}={id}", auth::COOKIE)).unwrap(),
    );
    let v = sessions.authenticate(&h).unwrap();
    assert!(auth::check_post(&v, Some(&v.csrf), &HeaderMap::new()).is_ok());
    assert!(auth::check_post(&v, None, &HeaderMap::new()).is_err());
    assert!(auth::check_post(&v, Some("forged"), &HeaderMap::new()).is_err());
    let mut cross = HeaderMap::new();
    cross.insert("sec-fetch-site", HeaderValue::from_static("cross-site"));
    assert!(auth::check_post(&v, Some(&v.csrf), &cross).is_err());
    let mut origin = HeaderMap::new();
    origin.insert(
        http::header::ORIGIN,
        HeaderValue::from_static("http://evil.example"),
    );
    origin.insert(
        http::header::HOST,
        HeaderValue::from_static("127.0.0.1:8080"),
    );
    assert!(auth::check_post(&v, Some(&v.csrf), &origin).is_err());
    // An open hub's forms carry the process's token: another site cannot read it either.
    let open = Sessions::new(None, auth::SessionConfig::default());
    let anon = open.authenticate(&HeaderMap::new()).unwrap();
    assert_eq!(anon.via, Via::Open);
    assert!(auth::check_post(&anon, None, &HeaderMap::new()).is_err());
    assert!(auth::check_post(&anon, Some(&anon.csrf), &HeaderMap::new()).is_ok());
}

#[test]
fn history_counts_states_and_records_transitions_but_not_the_initial_fill() {
    let mut h = History::new(HistoryLimits {
        transitions: 2,
        samples: 2,
    });
    let now = SystemTime::now();
    let a: Arc<str> = "a".into();
    let b: Arc<str> = "b".into();
    assert!(
        h.observe(&a, Some(Availability::Available), now, true)
            .is_none()
    );
    assert!(
        h.observe(&b, Some(Availability::Pending), now, true)
            .is_none()
    );
    assert!(
        h.observe(&a, Some(Availability::Available), now, false)
            .is_none()
    );
    let t = h
        .observe(&a, Some(Availability::Unknown), now, false)
        .unwrap();
    assert_eq!(
        (t.from, t.to),
        (Some(Availability::Available), Some(Availability::Unknown))
    );
    assert_eq!(h.counts().get(Availability::Unknown), 1);
    assert_eq!(h.counts().get(Availability::Available), 0);
    h.observe(&b, None, now, false).unwrap();
    h.observe(&a, Some(Availability::Available), now, false)
        .unwrap();
    assert_eq!(h.recent(10).len(), 2, "bounded");
    assert_eq!(h.counts().total(), 1);
    for _ in 0..3 {
        h.sample(now);
    }
    assert_eq!(h.samples().len(), 2, "bounded");
}

#[test]
fn availability_follows_acceptance_and_the_available_condition() {
    assert_eq!(
        Availability::of(&Cluster::test("a").available("True").build()),
        Availability::Available
    );
    assert_eq!(
        Availability::of(&Cluster::test("a").available("False").build()),
        Availability::Unavailable
    );
    assert_eq!(
        Availability::of(&Cluster::test("a").available("Unknown").build()),
        Availability::Unknown
    );
    assert_eq!(
        Availability::of(&Cluster::test("a").build()),
        Availability::Unknown
    );
    assert_eq!(
        Availability::of(&Cluster::test("a").pending().build()),
        Availability::Pending
    );
}

fn fleet(n: usize) -> Vec<Arc<ManagedCluster>> {
    (0..n)
        .map(|i| {
            Cluster::test(&format!("edge-{i:05}"))
                .label(CLUSTERSET_LABEL, if i % 2 == 0 { "even" } else { "odd" })
                .available(if i % 10 == 0 { "Unknown" } else { "True" })
                .build()
        })
        .collect()
}

fn query(q: &str) -> ListQuery {
    let (q, errors) = ListQuery::parse(&route::query(Some(q)));
    assert!(errors.is_empty(), "{errors:?}");
    q
}

#[test]
fn the_clusters_list_filters_with_the_apis_selectors_searches_sorts_and_pages() {
    let all = fleet(1000);
    let page = clusters::build(&all, &query(""));
    assert_eq!((page.matching, page.pages, page.rows.len()), (1000, 20, 50));
    assert_eq!(page.rows[0].name, "edge-00000");
    let page = clusters::build(
        &all,
        &query(&format!(
            "selector={CLUSTERSET_LABEL}%3Deven&availability=Unknown"
        )),
    );
    assert_eq!(page.matching, 100);
    let page = clusters::build(&all, &query("q=EDGE-0099&per=5&page=2"));
    assert_eq!(page.matching, 10);
    assert_eq!(page.rows.len(), 5);
    assert_eq!(page.rows[0].name, "edge-00995");
    let page = clusters::build(&all, &query("sort=availability&order=desc"));
    assert_eq!(page.rows[0].availability, Availability::Unknown);
    // Past the last page: the last page.
    let page = clusters::build(&all, &query("page=999"));
    assert_eq!(page.page, 20);
    let q = query("sort=set&order=desc&q=x");
    assert_eq!(q.sort, Sort::Set);
    assert_eq!(q.url(3, Sort::Name, false), "/clusters?q=x&page=3");
}

#[test]
fn a_bad_query_is_reported_not_ignored() {
    let (_, errors) = ListQuery::parse(&route::query(Some(
        "selector=env%20in&sort=nope&page=0&per=9999&availability=Maybe",
    )));
    assert_eq!(errors.len(), 5, "{errors:?}");
    assert!(errors[0].starts_with("label selector"));
}

#[test]
fn live_events_are_one_line_json() {
    let t = super::history::Transition {
        at: SystemTime::UNIX_EPOCH,
        cluster: "a\n\"b".into(),
        from: Some(Availability::Available),
        to: Some(Availability::Unknown),
    };
    let text = super::live::encode(&super::live::LiveEvent::Transition(t));
    for event in text.split("\n\n").filter(|e| !e.is_empty()) {
        let lines: Vec<&str> = event.lines().collect();
        assert_eq!(lines.len(), 2, "{event}");
        let data: serde_json::Value =
            serde_json::from_str(lines[1].strip_prefix("data: ").unwrap()).unwrap();
        assert_eq!(data["cluster"], "a\n\"b");
        assert_eq!(data["to"], "Unknown");
    }
}

#[test]
fn plots_are_svg_of_numbers() {
    let now = SystemTime::now();
    let mut h = History::new(HistoryLimits::default());
    h.observe(&"a".into(), Some(Availability::Available), now, true);
    h.sample(now);
    h.sample(now + Duration::from_secs(90));
    let svg = super::plot::availability(&h.samples());
    assert!(svg.starts_with("<svg") && svg.contains("<polyline class=\"s-ok\""));
    assert!(svg.contains("last 1m30s"));
    let hist = super::plot::histogram(&[0, 50, 100, 100], 4);
    assert_eq!(hist.matches("<rect").count(), 4);
}

#[test]
fn conditions_are_coloured_by_what_they_mean_for_their_type() {
    use super::html::condition_badge;
    assert!(condition_badge("Available", "True").contains("badge ok"));
    assert!(condition_badge("Degraded", "False").contains("badge ok"));
    assert!(condition_badge("Degraded", "True").contains("badge bad"));
    assert!(condition_badge("PlacementMisconfigured", "False").contains("badge ok"));
    assert!(condition_badge("Progressing", "False").contains("badge neutral"));
    assert!(condition_badge("Available", "<b>").contains("&lt;b&gt;"));
}
