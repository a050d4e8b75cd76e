//! Every kind of page with a name and label a hostile spoke chose: all of it escaped.

use super::*;

/// A name as a hostile spoke would choose it: a script, and quotes to leave an attribute.
const EVIL: &str = "<script>alert(\"x\")</script>'";

/// `page` has every [`EVIL`] escaped: no script element, no quote that ends an attribute.
fn inert(what: &str, page: maud::Markup) {
    let page = page.into_string();
    assert!(!page.contains("<script>"), "{what}: {page}");
    assert!(!page.contains("alert(\"x\")"), "{what}: {page}");
    assert!(
        page.contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;"),
        "{what} shows the name: {page}"
    );
}

fn evil_meta() -> Option<ObjectMeta> {
    Some(ObjectMeta {
        name: EVIL.into(),
        namespace: EVIL.into(),
        ..Default::default()
    })
}

#[test]
fn a_hostile_name_or_label_is_escaped_on_every_kind_of_page() {
    use flotilla_api::v1::*;
    let c = Cluster::test(EVIL)
        .label("note", EVIL)
        .label(EVIL, "v")
        .build();
    let works = vec![work(EVIL, EVIL, &[("Applied", "False")]).1];
    let controlled = crate::dashboard::cluster::Controlled {
        addons: vec![],
        policies: vec![(EVIL.into(), EVIL.into(), EVIL.into())],
        placements: vec![(EVIL.into(), EVIL.into())],
    };
    inert(
        "cluster",
        crate::dashboard::cluster::render(&c, &works, Some(&controlled)),
    );
    let list = clusters::build(std::slice::from_ref(&c), &ListQuery::default());
    inert(
        "clusters",
        clusters::render(&list, &ListQuery::default(), &[EVIL.into()]),
    );
    let pending = Cluster::test(EVIL).label("note", EVIL).pending().build();
    let o = crate::dashboard::overview::build(&[pending], &History::new(HistoryLimits::default()));
    let may = crate::dashboard::overview::Registrations {
        accept: Err(EVIL.into()),
        deny: Ok(()),
        refused: Default::default(),
        csrf: EVIL,
    };
    inert(
        "overview",
        crate::dashboard::overview::render(&o, &may, Some(EVIL)),
    );
    inert("work", crate::dashboard::work::render(EVIL, &works[0]));
    let all = vec![work(EVIL, EVIL, &[])];
    let (q, _) = crate::dashboard::works::WorksQuery::parse(&route::query(Some("q=<script>")));
    inert(
        "works",
        crate::dashboard::works::render(
            &crate::dashboard::works::build(&all, &Default::default()),
            &q,
            &[],
        ),
    );

    let view = crate::placement::PlacementView {
        placement: Placement {
            metadata: evil_meta(),
            ..Default::default()
        },
        decisions: vec![],
    };
    inert(
        "placements",
        crate::dashboard::placements::render_list(&[Arc::new(view.clone())]),
    );
    let debug = PlacementDebug {
        prioritizers: vec![PrioritizerWeight {
            prioritizer: EVIL.into(),
            weight: 1,
        }],
        clusters: vec![ClusterDebug {
            name: EVIL.into(),
            filters: vec![FilterResult {
                filter: EVIL.into(),
                passed: false,
                reason: EVIL.into(),
            }],
            not_selected_reason: EVIL.into(),
            total: Some(1),
            ..Default::default()
        }],
        ..Default::default()
    };
    inert(
        "placement",
        crate::dashboard::placements::render(&view, Ok(&debug)),
    );
    inert(
        "placement error",
        crate::dashboard::placements::render(&view, Err(EVIL)),
    );

    let rs = ManifestWorkReplicaSet {
        metadata: evil_meta(),
        status: Some(ManifestWorkReplicaSetStatus {
            placement_summaries: vec![PlacementSummary {
                name: EVIL.into(),
                stopped_reason: EVIL.into(),
                notes: vec![EVIL.into()],
                decision_groups: vec![DecisionGroupSummary {
                    name: EVIL.into(),
                    total: 1,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    inert(
        "rollouts",
        crate::dashboard::rollouts::render_list(&[Arc::new(rs.clone())], &[]),
    );
    inert(
        "rollout",
        crate::dashboard::rollouts::render(&rs, Err(EVIL.into()), EVIL, Some(EVIL), &[]),
    );
    let mut cma = addon_fixture();
    cma.metadata = evil_meta();
    inert(
        "addon",
        crate::dashboard::rollouts::render_addon(&cma, &[], &[]),
    );
    inert(
        "addons",
        crate::dashboard::rollouts::render_list(&[], &[(Arc::new(cma), vec![])]),
    );

    let policy = Policy {
        metadata: evil_meta(),
        status: Some(PolicyStatus {
            compliant: EVIL.into(),
            status: vec![ClusterCompliance {
                cluster_name: EVIL.into(),
                compliant: EVIL.into(),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    inert(
        "policies",
        crate::dashboard::policies::render(&[Arc::new(policy)]),
    );

    let frame = crate::dashboard::html::Frame {
        who: Some((EVIL, "admin")),
        csrf: EVIL,
        session: true,
        banner: Some(EVIL),
    };
    inert(
        "frame",
        crate::dashboard::html::page(
            EVIL,
            crate::dashboard::html::Nav::None,
            &frame,
            maud::html! {},
        ),
    );
}
