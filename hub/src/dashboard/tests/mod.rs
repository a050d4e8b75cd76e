//! Unit tests of the dashboard's pure parts: escaping, routes, auth rules, history, the
//! clusters list, the live feed's encoding.

use super::auth::{self, Sessions, Via};
use super::clusters::{self, ListQuery, Sort};
use super::history::{Availability, History, HistoryLimits};
use super::html::U;
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
    // maud escapes every spliced value (`& < > "`); a `'` is inert, as every attribute maud
    // writes is double-quoted.
    let evil = "<script>alert(1)</script>\"'&";
    assert_eq!(
        maud::html! { (evil) }.into_string(),
        "&lt;script&gt;alert(1)&lt;/script&gt;&quot;'&amp;"
    );
    assert_eq!(
        maud::html! { a title=(evil) {} }.into_string(),
        "<a title=\"&lt;script&gt;alert(1)&lt;/script&gt;&quot;'&amp;\"></a>"
    );
    assert_eq!(U("a/b?c=d e").to_string(), "a%2Fb%3Fc%3Dd%20e");
}

#[test]
fn a_label_value_with_a_script_is_rendered_inert_on_the_cluster_page() {
    let c = Cluster::test("edge-1")
        .label("note", "<script>alert('x')</script>")
        .build();
    let page = super::cluster::render(&c, &[], None).into_string();
    assert!(!page.contains("<script>"), "{page}");
    assert!(page.contains("&lt;script&gt;alert('x')&lt;/script&gt;"));
    let list = clusters::build(&[c], &ListQuery::default());
    let page = clusters::render(&list, &ListQuery::default(), &[]).into_string();
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
    assert_eq!(get("/works"), Ok(Route::Works));
    assert_eq!(get("/gitrepos"), Ok(Route::GitRepos));
    assert_eq!(
        get("/gitrepos/stores/shop"),
        Ok(Route::GitRepo {
            namespace: "stores".into(),
            name: "shop".into()
        })
    );
    assert_eq!(
        get("/addons/observability"),
        Ok(Route::AddOn("observability".into()))
    );
    assert_eq!(
        route::route(&Method::POST, "/clusters/edge-1/registration"),
        Ok(Route::Registration("edge-1".into()))
    );
    assert_eq!(
        get("/clusters/edge-1/registration"),
        Err(route::NoRoute::Method("POST"))
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
    assert_eq!(v.identity.name(), "bob");
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
    let svg = super::plot::availability(&h.samples()).into_string();
    assert!(svg.starts_with("<svg") && svg.contains("<polyline class=\"s-ok\""));
    assert!(svg.contains("last 1m30s"));
    let hist = super::plot::histogram(&[0, 50, 100, 100], 4).into_string();
    assert_eq!(hist.matches("<rect").count(), 4);
}

#[test]
fn conditions_are_coloured_by_what_they_mean_for_their_type() {
    use super::html::condition_badge;
    assert!(
        condition_badge("Available", "True")
            .into_string()
            .contains("badge ok")
    );
    assert!(
        condition_badge("Degraded", "False")
            .into_string()
            .contains("badge ok")
    );
    assert!(
        condition_badge("Degraded", "True")
            .into_string()
            .contains("badge bad")
    );
    assert!(
        condition_badge("PlacementMisconfigured", "False")
            .into_string()
            .contains("badge ok")
    );
    assert!(
        condition_badge("Progressing", "False")
            .into_string()
            .contains("badge neutral")
    );
    assert!(
        condition_badge("Available", "<b>")
            .into_string()
            .contains("&lt;b&gt;")
    );
}

/// A work fixture on `cluster` with conditions `(type, status)`.
fn work(
    cluster: &str,
    name: &str,
    conds: &[(&str, &str)],
) -> (Arc<str>, Arc<flotilla_api::v1::ManifestWork>) {
    let w = flotilla_api::v1::ManifestWork {
        metadata: Some(ObjectMeta {
            name: name.into(),
            namespace: cluster.into(),
            ..Default::default()
        }),
        status: Some(flotilla_api::v1::ManifestWorkStatus {
            conditions: conds
                .iter()
                .map(|(t, s)| Condition {
                    r#type: (*t).into(),
                    status: (*s).into(),
                    message: format!("{t} is {s}"),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }),
        ..Default::default()
    };
    (format!("{cluster}/{name}").into(), Arc::new(w))
}

#[test]
fn the_works_list_filters_by_cluster_name_and_state_counts_states_and_pages() {
    use super::works::{self, WorkState, WorksQuery};
    let mut all = Vec::new();
    for c in 0..30 {
        let cluster = format!("edge-{c:02}");
        all.push(work(
            &cluster,
            "app",
            &[("Applied", "True"), ("Available", "True")],
        ));
        all.push(work(
            &cluster,
            "settings",
            &[("Applied", "True"), ("Degraded", "True")],
        ));
        if c % 3 == 0 {
            all.push(work(&cluster, "zz-new", &[]));
        }
        if c == 7 {
            all.push(work(&cluster, "broken", &[("Applied", "False")]));
        }
    }
    all.sort_by(|a, b| a.0.cmp(&b.0));
    let q = |s: &str| {
        let (q, errors) = WorksQuery::parse(&route::query(Some(s)));
        assert!(errors.is_empty(), "{errors:?}");
        q
    };
    let page = works::build(&all, &q(""));
    assert_eq!((page.fleet, page.matching, page.pages), (71, 71, 2));
    // Available, Applied, Pending, Failed, Degraded.
    assert_eq!(page.by_state, [30, 0, 10, 1, 30]);
    let page = works::build(&all, &q("cluster=EDGE-0&q=sett"));
    assert_eq!(page.matching, 10);
    assert!(
        page.rows
            .iter()
            .all(|r| r.name == "settings" && r.cluster.starts_with("edge-0"))
    );
    assert_eq!(page.rows[0].state, WorkState::Degraded);
    let page = works::build(&all, &q("state=Failed"));
    assert_eq!(page.matching, 1);
    assert_eq!(page.rows[0].cluster, "edge-07");
    assert_eq!(page.rows[0].message, "Applied is False");
    assert_eq!(page.by_state[3], 1, "the counts ignore the state filter");
    let page = works::build(&all, &q("per=20&page=4"));
    assert_eq!((page.page, page.rows.len()), (4, 11));
    let html = works::render(&page, &q("per=20&page=4"), &[]).into_string();
    assert!(
        html.contains("href=\"/clusters/edge-27/works/zz-new\""),
        "{html}"
    );
    assert!(
        html.contains("href=\"/works?per=20&amp;page=3\" rel=\"prev\""),
        "{html}"
    );
    assert!(!html.contains("rel=\"next\""));
    let (_, errors) = WorksQuery::parse(&route::query(Some("state=Happy&per=0")));
    assert_eq!(errors.len(), 2, "{errors:?}");
}

#[test]
fn a_hostile_work_name_is_inert_in_the_works_list() {
    use super::works::{self, WorksQuery};
    let all = vec![work("c<1>", "<img src=x onerror=alert(1)>", &[])];
    let html = works::render(
        &works::build(&all, &WorksQuery::default()),
        &WorksQuery::default(),
        &[],
    )
    .into_string();
    assert!(!html.contains("<img"), "{html}");
    assert!(html.contains("/clusters/c%3C1%3E/works/%3Cimg%20src%3Dx"));
}

#[test]
fn pages_follow_objects_by_kind_and_key() {
    use super::live::{Follows, Kind};
    let f = Follows::parse(
        "placement:default/edge rollout:*,policy:,bogus:x,noColon",
        10,
    );
    assert!(f.wants(Kind::Placement, "default/edge"));
    assert!(!f.wants(Kind::Placement, "default/other"));
    assert!(
        f.wants(Kind::Placement, "*"),
        "every placement changed: this one too"
    );
    assert!(f.wants(Kind::Rollout, "any/thing"));
    assert!(!f.wants(Kind::AddOn, "*"));
    assert!(!f.wants(Kind::Policy, "*"));
    assert!(Follows::parse("", 10).is_empty());
    assert_eq!(
        Follows::parse("rollout:a/1 rollout:a/2 rollout:a/3", 2),
        Follows::parse("rollout:a/1,rollout:a/2", 10)
    );
}

#[test]
fn object_changes_are_coalesced_per_key_and_bounded_per_kind() {
    use super::live::{Dirty, Kind, LiveEvent, MAX_DIRTY};
    let mut d = Dirty::default();
    for _ in 0..5 {
        d.mark(Kind::Rollout, Some("default/a".into()));
    }
    d.mark(Kind::Placement, Some("default/p".into()));
    let events = d.drain();
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(d.is_empty());
    for i in 0..MAX_DIRTY + 10 {
        d.mark(Kind::Policy, Some(format!("ns/p{i}").into()));
    }
    d.mark(Kind::AddOn, Some("late".into()));
    let events = d.drain();
    assert_eq!(
        events.len(),
        2,
        "past the bound: one event for every policy"
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, LiveEvent::Changed { kind: Kind::Policy, key } if &**key == "*"))
    );
    let text = super::live::encode(&events[0]);
    assert!(text.starts_with("event: changed\ndata: {"), "{text}");
}

#[test]
fn rollout_progress_keeps_changes_only_and_is_bounded() {
    use super::progress::{Progress, ProgressLimits};
    let t0 = SystemTime::UNIX_EPOCH;
    let mut p = Progress::new(ProgressLimits {
        points: 3,
        rollouts: 2,
    });
    p.record("rollout:a/1", t0, (0, 0, 10));
    p.record("rollout:a/1", t0 + Duration::from_secs(1), (0, 0, 10));
    assert_eq!(p.points("rollout:a/1").len(), 1, "a repeat is not a point");
    for i in 1..=5 {
        p.record(
            "rollout:a/1",
            t0 + Duration::from_secs(i),
            (i as i64, 0, 10),
        );
    }
    let pts = p.points("rollout:a/1");
    assert_eq!(pts.iter().map(|x| x.done).collect::<Vec<_>>(), [3, 4, 5]);
    p.record("addon:x", t0 + Duration::from_secs(2), (0, 0, 1));
    p.record("addon:y", t0 + Duration::from_secs(9), (0, 0, 1));
    assert_eq!(p.len(), 2);
    assert!(
        p.points("addon:x").is_empty(),
        "the quietest rollout went first"
    );
    p.forget("addon:y");
    assert!(p.points("addon:y").is_empty());
    let svg = super::plot::over_time(&pts).into_string();
    assert!(
        svg.starts_with("<svg") && svg.contains("class=\"s-ok\""),
        "{svg}"
    );
    assert!(!svg.contains("s-bad"), "no failure line without failures");
}

fn addon_fixture() -> flotilla_api::v1::ClusterManagementAddOn {
    use flotilla_api::v1::*;
    ClusterManagementAddOn {
        metadata: Some(ObjectMeta {
            name: "observability".into(),
            ..Default::default()
        }),
        spec: Some(ClusterManagementAddOnSpec {
            install_strategy: Some(InstallStrategy {
                r#type: "Placements".into(),
                placements: vec![
                    PlacementStrategy {
                        namespace: "default".into(),
                        name: "edge".into(),
                        rollout_strategy: Some(RolloutStrategy {
                            r#type: "Progressive".into(),
                            progressive: Some(RolloutConfig {
                                max_concurrency: "25%".into(),
                                max_failures: "1".into(),
                                ..Default::default()
                            }),
                            ..Default::default()
                        }),
                        ..Default::default()
                    },
                    PlacementStrategy {
                        namespace: "default".into(),
                        name: "<later>".into(),
                        ..Default::default()
                    },
                ],
            }),
            ..Default::default()
        }),
        status: Some(ClusterManagementAddOnStatus {
            install_progressions: vec![InstallProgression {
                namespace: "default".into(),
                name: "edge".into(),
                decision_groups: vec![
                    DecisionGroupSummary {
                        index: 0,
                        name: "canary".into(),
                        total: 2,
                        available: 2,
                    },
                    DecisionGroupSummary {
                        index: 1,
                        name: String::new(),
                        total: 8,
                        available: 1,
                    },
                ],
                stopped_reason: "maxFailures 1 reached: edge-3 failed <script>".into(),
                total: 10,
                updated: 3,
                failed: 1,
                ..Default::default()
            }],
            ..Default::default()
        }),
    }
}

#[test]
fn an_addons_rollout_shows_progress_per_placement_and_group_why_it_stopped_and_no_controls() {
    let cma = addon_fixture();
    assert_eq!(super::progress::of_addon(&cma), (3, 1, 10));
    let html = super::rollouts::render_addon(&cma, &[], &[]).into_string();
    assert!(html.contains("data-follow=\"addon:observability\""));
    assert!(
        html.contains("Progressive, maxConcurrency 25%, maxFailures 1"),
        "{html}"
    );
    assert!(html.contains("Stopped: maxFailures 1 reached: edge-3 failed &lt;script&gt;"));
    assert!(!html.contains("<script>"));
    assert_eq!(html.matches("class=\"group-bar\"").count(), 2);
    assert!(
        html.contains(">0: canary<") && html.contains(">group 1<"),
        "{html}"
    );
    assert!(
        html.contains("default/&lt;later&gt;</a></h3>") && html.contains("Not rolled out yet.")
    );
    assert!(html.contains("id=\"read-only\""));
    assert!(
        !html.contains("<button"),
        "the API has no pause, resume or undo for add-ons"
    );
    let list = super::rollouts::render_list(&[], &[(Arc::new(cma), vec![])]).into_string();
    assert!(list.contains("href=\"/addons/observability\""));
    assert!(list.contains("3/10"), "{list}");
    assert!(list.contains("default/edge: maxFailures 1 reached"));
}

#[test]
fn pending_registrations_have_buttons_only_for_those_allowed_and_send_the_key_seen() {
    use super::overview::{self, Registrations};
    let mut c = Cluster::test("edge-new").pending().build();
    Arc::make_mut(&mut c).hub = Some(flotilla_api::v1::HubClusterState {
        requested_public_key: "UAGENTKEY".into(),
        ..Default::default()
    });
    let h = History::new(HistoryLimits::default());
    let o = overview::build(&[c], &h);
    let fp = flotilla_api::fingerprint::of("UAGENTKEY");
    assert_eq!(o.pending[0].key, fp);
    let admin = Registrations {
        accept: Ok(()),
        deny: Ok(()),
        refused: Default::default(),
        csrf: "tok",
    };
    let html = overview::render(&o, &admin, Some("Cluster x accepted.")).into_string();
    assert!(html.contains("action=\"/clusters/edge-new/registration\""));
    assert!(html.contains(&format!("name=\"key\" value=\"{fp}\"")));
    assert!(html.contains("value=\"accept\"") && html.contains("value=\"deny\""));
    assert!(html.contains("name=\"csrf\" value=\"tok\""));
    let viewer = tokens().identify("view-token-01234567890").unwrap().clone();
    let read_only = Registrations {
        accept: viewer.may_call(tokens().access(), overview::ACCEPT_METHOD),
        deny: viewer.may_call(tokens().access(), overview::DENY_METHOD),
        refused: Default::default(),
        csrf: "",
    };
    let html = overview::render(&o, &read_only, None).into_string();
    assert!(
        html.contains("data-pending=\"edge-new\""),
        "the list is shown"
    );
    assert!(
        !html.contains("<button type=\"submit\" name=\"action\""),
        "{html}"
    );
    assert!(!html.contains("/registration"), "{html}");
    assert!(html.contains("id=\"may-not-accept\""));
}

#[test]
fn pending_registrations_show_the_set_and_labels_accepting_admits_and_what_was_dropped() {
    use super::overview::{self, Registrations};
    let mut c = Cluster::test("edge-new")
        .pending()
        .label(flotilla_api::meta::CLUSTERSET_LABEL, "default")
        .label("env", "lab")
        .build();
    Arc::make_mut(&mut c).hub = Some(flotilla_api::v1::HubClusterState {
        agent_public_key: "UAGENTKEY".into(),
        dropped_labels: [(
            flotilla_api::meta::CLUSTERSET_LABEL.to_string(),
            "prod".to_string(),
        )]
        .into(),
        ..Default::default()
    });
    let o = overview::build(&[c], &History::new(HistoryLimits::default()));
    assert_eq!(o.pending[0].set, "default");
    assert_eq!(o.pending[0].labels, vec!["env=lab".to_string()]);
    let admin = Registrations {
        accept: Ok(()),
        deny: Ok(()),
        refused: Default::default(),
        csrf: "tok",
    };
    let html = overview::render(&o, &admin, None).into_string();
    assert!(
        html.contains("<th>Cluster set</th><th>Labels</th>"),
        "{html}"
    );
    assert!(html.contains("<td class=\"set\">default</td>"), "{html}");
    assert!(html.contains("<td class=\"labels\">env=lab"), "{html}");
    assert!(
        html.contains(
            "dropped (reserved for the hub): cluster.open-cluster-management.io/clusterset=prod"
        ),
        "{html}"
    );
}

#[test]
fn a_placement_shows_the_distribution_of_each_prioritizers_scores() {
    use flotilla_api::v1::{ClusterDebug, PlacementDebug, PrioritizerWeight, ScoreDetail};
    let cluster = |name: &str, steady: i64, cpu: i64, feasible: bool| ClusterDebug {
        name: name.into(),
        total: feasible.then_some(steady + 2 * cpu),
        scores: vec![
            ScoreDetail {
                prioritizer: "Steady".into(),
                score: steady,
                ..Default::default()
            },
            ScoreDetail {
                prioritizer: "ResourceAllocatableCPU".into(),
                score: cpu,
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    let debug = PlacementDebug {
        prioritizers: vec![
            PrioritizerWeight {
                prioritizer: "Steady".into(),
                weight: 1,
            },
            PrioritizerWeight {
                prioritizer: "ResourceAllocatableCPU".into(),
                weight: 2,
            },
        ],
        clusters: vec![
            cluster("a", 100, 0, true),
            cluster("b", 0, 100, true),
            cluster("c", 0, 50, false),
        ],
        ..Default::default()
    };
    let html = super::placements::distributions(&debug).into_string();
    assert_eq!(html.matches("<figure").count(), 3, "{html}");
    assert!(html.contains("ResourceAllocatableCPU (weight 2)"));
    assert!(
        html.contains("Total (2 clusters)"),
        "only feasible clusters count"
    );
}

mod hostile;
