//! The web dashboard obeys the grants (issue 48), in a real Chromium: a team member signed in
//! sees only its set's clusters and their works, and only its namespace's placements and
//! policies; another team's cluster page is refused naming the grant; the live page follows only
//! its clusters (their transitions, counts over them); and a reload of the grants file reaches
//! the open page (review r1 §6: its stream ends, the page reads itself again under the new
//! grants). Over HTTP: actions obey the grants per object (a set's admin accepts its set's
//! clusters, a namespace's editor pauses its rollouts, neither across the fence), and add-on
//! pages show a team only its own placements (review r4 §2, §3).

use crate::browser;
use crate::common;
use crate::dashboard_fixture as dashboard;

use browser::{Browser, PAGE};
use common::tokens::{ADMIN, Bearer, TOKENS};
use common::*;
use dashboard::*;
use flotilla_api::meta::CLUSTERSET_LABEL;
use flotilla_api::ocm::{Document, parse_documents};
use flotilla_api::v1::cluster_service_client::ClusterServiceClient;
use flotilla_api::v1::cluster_set_service_client::ClusterSetServiceClient;
use flotilla_api::v1::placement_service_client::PlacementServiceClient;
use flotilla_api::v1::policy_service_client::PolicyServiceClient;
use flotilla_api::v1::replica_set_service_client::ReplicaSetServiceClient;
use flotilla_api::v1::work_service_client::WorkServiceClient;
use flotilla_api::v1::{LabelClusterRequest, ManagedClusterSet, ObjectMeta};
use flotilla_hub::dashboard::history::Availability;
use flotilla_testkit::NatsServer;
use std::sync::Arc;
use std::time::Duration;

const ANA: &str = "team-a-sre-token-000001";

/// ana: admin on set team-a and edit on team-a-apps; ben likewise for team-b.
const GRANTS: &str = "apiVersion: flotilla.io/v1alpha1\nkind: Grants\nclusterSets:\n  \
    team-a:\n    admin: { groups: [team-a-sre] }\n  team-b:\n    admin: { groups: [team-b-sre] }\n\
    namespaces:\n  team-a-apps:\n    edit: { groups: [team-a-sre] }\n  team-b-apps:\n    \
    edit: { groups: [team-b-sre] }\n";

/// The same, with ana moved to team-b.
const GRANTS_MOVED: &str = "apiVersion: flotilla.io/v1alpha1\nkind: Grants\nclusterSets:\n  \
    team-b:\n    admin: { groups: [team-a-sre, team-b-sre] }\nnamespaces:\n  team-b-apps:\n    \
    edit: { groups: [team-a-sre, team-b-sre] }\n";

/// A Placement and a Policy in namespace `NS`.
const OBJECTS: &str = "\
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {name: edge-NS, namespace: NS}
spec: {}
---
apiVersion: policy.open-cluster-management.io/v1
kind: Policy
metadata: {name: marker-NS, namespace: NS}
spec:
  remediationAction: inform
  disabled: false
  policy-templates:
    - objectDefinition:
        apiVersion: policy.open-cluster-management.io/v1
        kind: ConfigurationPolicy
        metadata: {name: marker}
        spec:
          remediationAction: inform
          severity: low
          object-templates:
            - complianceType: musthave
              objectDefinition: {apiVersion: v1, kind: Namespace, metadata: {name: marked}}
";

/// Signs in at the form the browser was sent to.
async fn sign_in(b: &Browser, token: &str) {
    b.wait_until(
        "return !!document.getElementById('token')",
        "the sign-in form",
        PAGE,
    )
    .await;
    b.type_into("#token", token).await;
    b.click("#sign-in").await;
    b.wait_until(
        "return !document.getElementById('token')",
        "signed in",
        PAGE,
    )
    .await;
}

/// The admin's setup: sets team-a {a1, a2} and team-b {b1}, each bound into its team's
/// namespace, a work on each cluster, a Placement and a Policy in each namespace.
async fn two_teams(channel: &tonic::transport::Channel) {
    let mut sets = ClusterSetServiceClient::with_interceptor(channel.clone(), Bearer(ADMIN));
    for team in ["a", "b"] {
        let set = ManagedClusterSet {
            metadata: Some(ObjectMeta {
                name: format!("team-{team}"),
                ..Default::default()
            }),
            spec: Some(Default::default()),
            status: None,
        };
        let deadline = tokio::time::Instant::now() + SOON;
        while let Err(e) = sets.apply_cluster_set(set.clone()).await {
            assert!(tokio::time::Instant::now() < deadline, "{e}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let binding = set_binding(&format!("team-{team}-apps"), &format!("team-{team}"));
        sets.apply_binding(binding).await.unwrap();
    }
    let mut clusters = ClusterServiceClient::with_interceptor(channel.clone(), Bearer(ADMIN));
    let mut works = WorkServiceClient::with_interceptor(channel.clone(), Bearer(ADMIN));
    for (cluster, set) in [("a1", "team-a"), ("a2", "team-a"), ("b1", "team-b")] {
        clusters
            .label_cluster(LabelClusterRequest {
                name: cluster.into(),
                set: [(CLUSTERSET_LABEL.to_string(), set.to_string())].into(),
                remove: vec![],
            })
            .await
            .unwrap();
        works
            .apply_work(common::work::config_map_work(
                cluster,
                &format!("web-{cluster}"),
            ))
            .await
            .unwrap();
    }
    let mut placements = PlacementServiceClient::with_interceptor(channel.clone(), Bearer(ADMIN));
    let mut policies = PolicyServiceClient::with_interceptor(channel.clone(), Bearer(ADMIN));
    for ns in ["team-a-apps", "team-b-apps"] {
        for doc in parse_documents(&OBJECTS.replace("NS", ns)) {
            match doc {
                Ok(Document::Placement(p)) => {
                    placements.apply_placement(p).await.unwrap();
                }
                Ok(Document::Policy(p)) => {
                    policies.apply_policy(p).await.unwrap();
                }
                other => panic!("fixture: {other:?}"),
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chromium_shows_a_team_only_its_part_of_the_fleet_live_and_follows_a_grants_reload() {
    let b = Browser::start().await;
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    let grants_path = dir.path().join("grants.yaml");
    std::fs::write(&grants_path, GRANTS).unwrap();
    let grants = flotilla_hub::grants::file::load(&grants_path).unwrap();
    let tokens = format!(
        "{TOKENS}{ANA},ana,member,team-a-sre\nteam-b-sre-token-000002,ben,member,team-b-sre\n"
    );
    let tokens = flotilla_hub::grpc::auth::Tokens::parse("tokens.csv", &tokens)
        .unwrap()
        .with_grants(Arc::new(grants))
        .with_grants_file(&grants_path);
    let hub = hub(&nats, |c| {
        c.api.tokens = Some(tokens);
        c.cluster.auto_accept.enabled = true;
    })
    .await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", hub.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut agents: Vec<_> = ["a1", "a2", "b1"]
        .iter()
        .map(|n| start_agent(agent_config(n, &nats.url())))
        .collect();
    for n in ["a1", "a2", "b1"] {
        wait_state(&hub, n, Availability::Available).await;
    }
    two_teams(&channel).await;
    let base = format!("http://{}", hub.dashboard_addr.unwrap());

    // ana's clusters: its set's only.
    b.goto(&format!("{base}/clusters")).await;
    sign_in(&b, ANA).await;
    b.wait_until(
        "return ['a1','a2'].every(n => \
         document.querySelector('#clusters tr[data-cluster=\"' + n + '\"]'))",
        "team-a's clusters listed",
        PAGE,
    )
    .await;
    assert!(b.text("#who").await.contains("ana"));
    assert_eq!(b.text("#count").await.split(' ').next(), Some("2"));
    assert!(!b.text("#clusters").await.contains("b1"));

    // Its works, placements and policies: team-a's only.
    b.goto(&format!("{base}/works")).await;
    let works = b.text("body").await;
    assert!(
        works.contains("web-a1") && works.contains("web-a2"),
        "{works}"
    );
    assert!(!works.contains("web-b1"), "{works}");
    b.goto(&format!("{base}/placements")).await;
    let placements = b.text("body").await;
    assert!(placements.contains("edge-team-a-apps"), "{placements}");
    assert!(!placements.contains("team-b-apps"), "{placements}");
    b.goto(&format!("{base}/policies")).await;
    b.wait_until(
        "return document.body.innerText.includes('marker-team-a-apps')",
        "team-a's policy",
        PAGE,
    )
    .await;
    assert!(!b.text("body").await.contains("team-b-apps"));

    // Across the fence: refused naming the grant, a hidden cluster read as a missing one.
    for path in [
        "/clusters/b1",
        "/clusters/b1/works/web-b1",
        "/clusters/nope",
    ] {
        b.goto(&format!("{base}{path}")).await;
        b.wait_until(
            "return document.title.startsWith('Forbidden')",
            "the refusal",
            PAGE,
        )
        .await;
        let body = b.text("body").await;
        assert!(
            body.contains("ana (groups team-a-sre) may not view"),
            "{path}: {body}"
        );
        assert!(body.contains("is in none of ana's sets"), "{path}: {body}");
    }
    b.goto(&format!("{base}/placements/team-b-apps/edge-team-b-apps"))
        .await;
    assert!(b.text("body").await.contains("needs view on namespace"));

    // Live: the overview counts ana's clusters only; b1 going Unknown changes nothing there,
    // a2 going Unknown is counted without a reload.
    b.goto(&format!("{base}/")).await;
    b.wait_until(
        "return document.body.dataset.live === 'on'",
        "the live feed",
        PAGE,
    )
    .await;
    b.js("window.__notReloaded = true; return true").await;
    assert_eq!(b.text("[data-count=\"Available\"]").await, "2");
    agents.remove(2).stop().await;
    wait_state(&hub, "b1", Availability::Unknown).await;
    agents.remove(1).stop().await;
    wait_state(&hub, "a2", Availability::Unknown).await;
    b.wait_until(
        "return document.querySelector('[data-count=\"Unknown\"]').innerText === '1'",
        "a2 counted Unknown",
        PAGE,
    )
    .await;
    assert_eq!(b.text("[data-count=\"Available\"]").await, "1");
    let transitions = b.text("#transitions").await;
    assert!(!transitions.contains("b1"), "{transitions}");
    assert_eq!(b.js("return window.__notReloaded === true").await, true);

    // The grants move ana to team-b: the open page is told to read itself again and shows b1.
    b.goto(&format!("{base}/clusters")).await;
    b.wait_until(
        "return document.body.dataset.live === 'on'",
        "the live feed",
        PAGE,
    )
    .await;
    b.js("window.__notReloaded = true; return true").await;
    std::fs::write(&grants_path, GRANTS_MOVED).unwrap();
    b.wait_until(
        "return window.__notReloaded !== true && \
         !!document.querySelector('#clusters tr[data-cluster=\"b1\"]') && \
         !document.querySelector('#clusters tr[data-cluster=\"a1\"]')",
        "the page reloaded under the new grants",
        Duration::from_secs(15),
    )
    .await;

    b.stop().await;
    for a in agents {
        a.stop().await;
    }
    hub.stop().await;
}

/// ana: admin on team-a, edit on team-a-apps; ben: admin on team-b and view on team-a.
const ACT_GRANTS: &str = "apiVersion: flotilla.io/v1alpha1\nkind: Grants\nclusterSets:\n  \
    team-a:\n    admin: { groups: [team-a-sre] }\n    view: { groups: [team-b-sre] }\n  \
    team-b:\n    admin: { groups: [team-b-sre] }\nnamespaces:\n  team-a-apps:\n    \
    edit: { groups: [team-a-sre] }\n  team-b-apps:\n    edit: { groups: [team-b-sre] }\n";

/// An add-on rolled out by one placement of each team.
const TEAMS_ADDON: &str = r#"
apiVersion: addon.open-cluster-management.io/v1alpha1
kind: ClusterManagementAddOn
metadata: {name: probe}
spec:
  addOnMeta: {displayName: Probe, description: a test add-on}
  installStrategy:
    type: Placements
    placements:
      - {namespace: team-a-apps, name: edge-team-a-apps}
      - {namespace: team-b-apps, name: edge-team-b-apps}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_teams_dashboard_actions_obey_its_grants_and_add_on_pages_show_only_its_placements() {
    let nats = NatsServer::start();
    let grants = flotilla_hub::grants::file::parse("grants.yaml", ACT_GRANTS.as_bytes()).unwrap();
    let tokens = format!(
        "{TOKENS}{ANA},ana,member,team-a-sre\nteam-b-sre-token-000002,ben,member,team-b-sre\n"
    );
    let tokens = flotilla_hub::grpc::auth::Tokens::parse("tokens.csv", &tokens)
        .unwrap()
        .with_grants(Arc::new(grants));
    let hub = hub(&nats, |c| c.api.tokens = Some(tokens)).await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", hub.grpc_addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let _agents: Vec<_> = ["a1", "b1"]
        .iter()
        .map(|n| start_agent(agent_config(n, &nats.url())))
        .collect();
    for n in ["a1", "b1"] {
        wait_state(&hub, n, Availability::Pending).await;
    }
    let mut sets = ClusterSetServiceClient::with_interceptor(channel.clone(), Bearer(ADMIN));
    let mut clusters = ClusterServiceClient::with_interceptor(channel.clone(), Bearer(ADMIN));
    let mut placements = PlacementServiceClient::with_interceptor(channel.clone(), Bearer(ADMIN));
    let mut rollouts = ReplicaSetServiceClient::with_interceptor(channel.clone(), Bearer(ADMIN));
    for team in ["a", "b"] {
        let set = ManagedClusterSet {
            metadata: Some(ObjectMeta {
                name: format!("team-{team}"),
                ..Default::default()
            }),
            spec: Some(Default::default()),
            status: None,
        };
        let deadline = tokio::time::Instant::now() + SOON;
        while let Err(e) = sets.apply_cluster_set(set.clone()).await {
            assert!(tokio::time::Instant::now() < deadline, "{e}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        clusters
            .label_cluster(LabelClusterRequest {
                name: format!("{team}1"),
                set: [(CLUSTERSET_LABEL.to_string(), format!("team-{team}"))].into(),
                remove: vec![],
            })
            .await
            .unwrap();
        let ns = format!("team-{team}-apps");
        for doc in parse_documents(&OBJECTS.replace("NS", &ns)) {
            if let Ok(Document::Placement(p)) = doc {
                placements.apply_placement(p).await.unwrap();
            }
        }
        let mut rs = replica_set();
        let meta = rs.metadata.as_mut().unwrap();
        meta.namespace = ns.clone();
        meta.name = format!("web-{team}");
        rollouts.apply_replica_set(rs).await.unwrap();
    }
    let ctl = hub.controllers().expect("the controllers");
    for doc in parse_documents(TEAMS_ADDON) {
        let Ok(Document::ClusterManagementAddOn(a)) = doc else {
            panic!("fixture: {doc:?}")
        };
        ctl.get::<flotilla_hub::addon::AddOns>()
            .apply_addon(a)
            .await
            .unwrap();
    }
    // The set index follows the labels within its coalescing window.
    let seen = |who: &str| {
        let auth = format!("Bearer {who}");
        let hub = &hub;
        async move {
            http(hub, "GET", "/", &[("Authorization", &auth)], "")
                .await
                .body
        }
    };
    // Both labels in: ben sees a1 through his view on team-a, and b1 as his own set's (the
    // index may publish one set's move before the other's).
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        let page = seen("team-b-sre-token-000002").await;
        let both = page.contains("data-pending=\"a1\"")
            && page.contains("action=\"/clusters/b1/registration\"");
        if both {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "ben never saw a1 and his own b1: {page}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // ana may accept a1 (her set's): its button is there. ben sees a1 (view on team-a) but
    // has no button on it, and has one on b1 (his set's).
    let ana = seen(ANA).await;
    assert!(
        ana.contains("action=\"/clusters/a1/registration\""),
        "{ana}"
    );
    assert!(!ana.contains("data-pending=\"b1\""), "{ana}");
    let ben = seen("team-b-sre-token-000002").await;
    assert!(
        !ben.contains("action=\"/clusters/a1/registration\""),
        "{ben}"
    );
    assert!(
        ben.contains("action=\"/clusters/b1/registration\""),
        "{ben}"
    );
    let form = |token: &str| {
        [
            ("Authorization", format!("Bearer {token}")),
            ("Content-Type", "application/x-www-form-urlencoded".into()),
        ]
    };
    let post = |token: &'static str, path: String, body: &'static str| {
        let hub = &hub;
        async move {
            let headers = form(token);
            let headers: Vec<(&str, &str)> =
                headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
            http(hub, "POST", &path, &headers, body).await
        }
    };
    const BEN: &str = "team-b-sre-token-000002";
    // Across the fence: refused naming the grant, and nothing changes.
    let a = post(
        BEN,
        "/clusters/a1/registration".into(),
        "action=accept&key=",
    )
    .await;
    assert_eq!(a.status, 403, "{}", a.body);
    assert!(
        a.body
            .contains("ben (groups team-b-sre) may not accept cluster a1: it needs admin on"),
        "{}",
        a.body
    );
    assert_eq!(
        Availability::of(&hub.inventory.get("a1").unwrap()),
        Availability::Pending
    );
    let a = post(
        ANA,
        "/clusters/a1/registration".into(),
        "action=accept&key=",
    )
    .await;
    assert_eq!(a.status, 303, "{}", a.body);
    wait_state(&hub, "a1", Availability::Available).await;

    // Rollouts: ana pauses her namespace's, not ben's; her page offers the buttons, ben's
    // rollout page is not hers to read.
    let page = http(
        &hub,
        "GET",
        "/rollouts/team-a-apps/web-a",
        &[("Authorization", &format!("Bearer {ANA}"))],
        "",
    )
    .await;
    assert!(page.body.contains("value=\"pause\""), "{}", page.body);
    let a = post(ANA, "/rollouts/team-b-apps/web-b".into(), "action=pause").await;
    assert_eq!(a.status, 403, "{}", a.body);
    assert!(
        a.body
            .contains("ana (groups team-a-sre) may not pause the rollout of"),
        "{}",
        a.body
    );
    let a = post(ANA, "/rollouts/team-a-apps/web-a".into(), "action=pause").await;
    assert_eq!(a.status, 303, "{}", a.body);

    // Add-on pages: ana reads her placement's rollout, never team-b's placement or the
    // fleet's counts over time.
    for path in ["/rollouts", "/addons/probe"] {
        let a = http(
            &hub,
            "GET",
            path,
            &[("Authorization", &format!("Bearer {ANA}"))],
            "",
        )
        .await;
        assert_eq!(a.status, 200, "{path}: {}", a.body);
        assert!(!a.body.contains("team-b-apps"), "{path}: {}", a.body);
    }
    let a = http(
        &hub,
        "GET",
        "/addons/probe",
        &[("Authorization", &format!("Bearer {ANA}"))],
        "",
    )
    .await;
    assert!(
        a.body.contains("team-a-apps/edge-team-a-apps"),
        "{}",
        a.body
    );
    let admin = http(
        &hub,
        "GET",
        "/addons/probe",
        &[("Authorization", &format!("Bearer {ADMIN}"))],
        "",
    )
    .await;
    assert!(
        admin.body.contains("team-b-apps/edge-team-b-apps"),
        "{}",
        admin.body
    );

    // Installed by hand on a1 and b1: ana's pages list and count a1's only, the admin's both
    // (looked up per cluster she sees, review r4 §7).
    let addons = ctl.get::<flotilla_hub::addon::AddOns>();
    for cluster in ["a1", "b1"] {
        let mca = flotilla_api::v1::ManagedClusterAddOn {
            metadata: Some(ObjectMeta {
                name: "probe".into(),
                namespace: cluster.into(),
                ..Default::default()
            }),
            spec: Some(Default::default()),
            ..Default::default()
        };
        addons.apply_cluster_addon(mca).await.unwrap();
    }
    let page = |token: &'static str, path: &'static str| {
        let hub = &hub;
        async move {
            let auth = format!("Bearer {token}");
            http(hub, "GET", path, &[("Authorization", &auth)], "")
                .await
                .body
        }
    };
    let ana = page(ANA, "/addons/probe").await;
    assert!(ana.contains("Installed on (1)"), "{ana}");
    assert!(ana.contains("data-cluster=\"a1\""), "{ana}");
    assert!(!ana.contains("data-cluster=\"b1\""), "{ana}");
    let admin = page(ADMIN, "/addons/probe").await;
    assert!(admin.contains("Installed on (2)"), "{admin}");
    // The rollouts list's row of the add-on: its installed count.
    let row = |body: String| -> String {
        let from = body.find("data-addon=\"probe\"").expect("the add-on's row");
        body[from..].split("</tr>").next().unwrap().to_string()
    };
    let ana = row(page(ANA, "/rollouts").await);
    assert!(ana.contains("<td>1</td>"), "a1 alone counted: {ana}");
    let admin = row(page(ADMIN, "/rollouts").await);
    assert!(admin.contains("<td>2</td>"), "{admin}");
    hub.stop().await;
}
