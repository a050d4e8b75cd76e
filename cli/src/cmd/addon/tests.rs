//! `addon status` rendering (a pure function of a ClusterManagementAddOn and its
//! ManagedClusterAddOns), the checks of `enable`/`disable` flags, and what they print.

use super::*;
use crate::kind::addon::fixtures::{Cma, Mca, Progression};
use clap::Parser;

fn healthy(clusters: &[&str]) -> Vec<ManagedClusterAddOn> {
    clusters
        .iter()
        .map(|c| Mca::new(c, "hello").healthy().build())
        .collect()
}

fn line_of<'a>(text: &'a str, start: &str) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("no line starting with {start:?}:\n{text}"))
}

#[test]
fn a_completed_rollout_shows_every_placement_and_overall_updated() {
    let cma = Cma::new("hello")
        .placement("default", "edge")
        .progression(Progression::new("default", "edge", 3, 3).progressing(
            "False",
            "Completed",
            "3/3 clusters updated",
        ))
        .build();
    let (text, step) = render(&cma, &healthy(&["edge-0001", "edge-0002", "edge-0003"]));
    assert_eq!(step, Step::Done);
    assert!(
        text.starts_with("add-on hello (install strategy Placements)\n"),
        "{text}"
    );
    let edge = line_of(&text, "default/edge");
    assert!(edge.contains(&bar(3, 3)), "{edge}");
    assert!(edge.ends_with("3/3 updated  (failed 0)"), "{edge}");
    assert!(
        text.contains("Progressing=False (Completed): 3/3 clusters updated\n"),
        "{text}"
    );
    assert!(
        line_of(&text, "overall").ends_with("3/3 updated  (failed 0)"),
        "{text}"
    );
    assert!(
        text.contains("clusters: 3 with the add-on, 3 available\n"),
        "{text}"
    );
    assert!(!text.contains("not available:"), "{text}");
    assert!(text.ends_with("rollout complete\n"), "{text}");
}

#[test]
fn a_rollout_in_progress_waits_and_bars_every_decision_group() {
    let cma = Cma::new("hello")
        .placement("default", "edge")
        .placement("prod", "core")
        .progression(
            Progression::new("default", "edge", 3, 1)
                .progressing("True", "Progressing", "1/3 clusters updated")
                .group(0, "canary", 1, 1)
                .group(1, "", 2, 0)
                .note("rolloutStrategy.progressive.maxConcurrency: 0 means 1"),
        )
        .progression(Progression::new("prod", "core", 2, 2).progressing("False", "Completed", ""))
        .build();
    let mcas = vec![
        Mca::new("edge-0001", "hello").healthy().build(),
        Mca::new("edge-0002", "hello")
            .condition(
                "Available",
                "False",
                "ProbeUnavailable",
                "deployment hello: 0/1 ready",
            )
            .build(),
        Mca::new("edge-0003", "hello").build(),
    ];
    let (text, step) = render(&cma, &mcas);
    assert_eq!(step, Step::Wait);
    assert!(
        line_of(&text, "default/edge").ends_with("1/3 updated  (failed 0)"),
        "{text}"
    );
    let canary = line_of(&text, "  group 0 (canary)");
    assert!(canary.ends_with(&format!("{} 1/1", bar(1, 1))), "{canary}");
    let second = line_of(&text, "  group 1 ");
    assert!(second.ends_with(&format!("{} 0/2", bar(0, 2))), "{second}");
    assert!(
        text.contains("note: rolloutStrategy.progressive.maxConcurrency: 0 means 1\n"),
        "{text}"
    );
    // One group: no group bars (the placement's bar says it all).
    assert!(
        line_of(&text, "prod/core").ends_with("2/2 updated  (failed 0)"),
        "{text}"
    );
    assert!(
        line_of(&text, "overall").ends_with("3/5 updated  (failed 0)"),
        "{text}"
    );
    assert!(
        text.contains(
            "not available:\n  edge-0002: Available=False (ProbeUnavailable): deployment hello: 0/1 ready\n  edge-0003: no Available condition yet\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("clusters: 3 with the add-on, 1 available\n"),
        "{text}"
    );
    assert!(text.ends_with("rollout in progress\n"), "{text}");
}

#[test]
fn a_stopped_rollout_fails_once_every_placement_is_over() {
    let stopped = Progression::new("default", "edge", 3, 1)
        .failed(1)
        .stopped("stopped in group 0: failed [\"edge-0002\"] (maxFailures 0)")
        .progressing("False", "Failed", "1 cluster failed");
    let still_going = Progression::new("prod", "core", 2, 1).progressing("True", "Progressing", "");
    let cma = Cma::new("hello")
        .placement("default", "edge")
        .progression(stopped)
        .progression(still_going)
        .build();
    let (text, step) = render(&cma, &[]);
    assert_eq!(step, Step::Wait, "the other placement still rolls: {text}");
    assert!(
        text.contains("stopped: stopped in group 0: failed [\"edge-0002\"] (maxFailures 0)\n"),
        "{text}"
    );
    assert!(
        line_of(&text, "overall").ends_with("2/5 updated  (failed 1)"),
        "{text}"
    );

    let stopped = Progression::new("default", "edge", 3, 1)
        .failed(1)
        .stopped("stopped in group 0: failed [\"edge-0002\"] (maxFailures 0)");
    let done = Progression::new("prod", "core", 2, 2).progressing("False", "Completed", "");
    let cma = Cma::new("hello")
        .placement("default", "edge")
        .progression(stopped)
        .progression(done)
        .build();
    let (text, step) = render(&cma, &[]);
    assert_eq!(
        step,
        Step::Failed("the rollout of add-on hello stopped".into())
    );
    assert!(
        text.ends_with(
            "rollout stopped: default/edge: stopped in group 0: failed [\"edge-0002\"] (maxFailures 0)\n"
        ),
        "{text}"
    );
}

#[test]
fn a_progression_that_failed_without_a_stop_reason_fails_too() {
    let cma = Cma::new("hello")
        .placement("default", "edge")
        .progression(Progression::new("default", "edge", 1, 0).progressing(
            "False",
            "Failed",
            "apply failed",
        ))
        .build();
    let (text, step) = render(&cma, &[]);
    assert!(matches!(step, Step::Failed(_)), "{text}");
    assert!(
        text.ends_with("rollout stopped: default/edge: apply failed\n"),
        "{text}"
    );
}

#[test]
fn placements_not_yet_rolled_out_wait_and_a_manual_addon_has_nothing_to_wait_for() {
    let cma = Cma::new("hello").placement("default", "edge").build();
    let (text, step) = render(&cma, &[]);
    assert_eq!(step, Step::Wait);
    assert!(!text.contains("overall"), "{text}");
    assert!(text.ends_with("rollout not started\n"), "{text}");

    // A progression without a Progressing condition yet is not over.
    let cma = Cma::new("hello")
        .placement("default", "edge")
        .progression(Progression::new("default", "edge", 3, 0))
        .build();
    assert_eq!(render(&cma, &[]).1, Step::Wait);

    let cma = Cma::new("manual").build();
    let (text, step) = render(&cma, &healthy(&["c1"]));
    assert_eq!(step, Step::Done);
    assert!(
        text.starts_with("add-on manual (install strategy Manual)\n"),
        "{text}"
    );
    assert!(text.contains("clusters: 1 with the add-on, 1 available"));
    assert!(
        text.ends_with("rollout installed by hand: no placement rollout\n"),
        "{text}"
    );
}

#[test]
fn at_most_twenty_unavailable_clusters_are_listed() {
    let mcas: Vec<_> = (1..=25)
        .map(|i| {
            Mca::new(&format!("edge-{i:04}"), "hello")
                .condition("Available", "Unknown", "WaitingForLease", "")
                .build()
        })
        .collect();
    let cma = Cma::new("hello").build();
    let (text, _) = render(&cma, &mcas);
    let listed = text.lines().filter(|l| l.starts_with("  edge-")).count();
    assert_eq!(listed, MAX_LISTED, "{text}");
    assert!(
        text.contains("  edge-0001: Available=Unknown (WaitingForLease)\n"),
        "{text}"
    );
    assert!(!text.contains("edge-0021"), "sorted by cluster: {text}");
    assert!(text.contains("  and 5 more\n"), "{text}");
}

// ---- flags ----

#[derive(Parser, Debug)]
struct Flags {
    #[command(subcommand)]
    what: AddonWhat,
}

fn parse(args: &[&str]) -> Result<AddonWhat, clap::Error> {
    Flags::try_parse_from(std::iter::once("addon").chain(args.iter().copied())).map(|f| f.what)
}

#[test]
fn enable_takes_clusters_or_a_placement_but_not_both_nor_neither() {
    let both = parse(&[
        "enable",
        "hello",
        "--clusters",
        "c1",
        "--placement",
        "default/edge",
    ])
    .unwrap_err();
    assert_eq!(both.kind(), clap::error::ErrorKind::ArgumentConflict);
    let neither = parse(&["enable", "hello"]).unwrap_err();
    assert_eq!(
        neither.kind(),
        clap::error::ErrorKind::MissingRequiredArgument
    );
    let AddonWhat::Enable { clusters, .. } =
        parse(&["enable", "hello", "--clusters", "c1,c2", "--clusters", "c3"]).unwrap()
    else {
        panic!("not enable");
    };
    assert_eq!(clusters, ["c1", "c2", "c3"]);

    // The same rules hold without clap, with words of their own.
    let e = enable_request("hello".into(), vec!["c1".into()], Some("a/b".into()), None);
    assert!(e.unwrap_err().to_string().contains("not both"));
    let e = enable_request("hello".into(), vec![], None, None);
    assert!(e.unwrap_err().to_string().contains("--placement NS/NAME"));
}

#[test]
fn enable_builds_its_request_from_checked_flags() {
    let r = enable_request(
        "hello".into(),
        vec!["c1".into(), "c2".into(), "c1".into()],
        None,
        Some("hello-agent".into()),
    )
    .unwrap();
    assert_eq!(r.clusters, ["c1", "c2"]);
    assert_eq!(r.install_namespace, "hello-agent");
    assert!(r.placement.is_empty());

    let r = enable_request("hello".into(), vec![], Some("default/edge".into()), None).unwrap();
    assert_eq!(r.placement, "default/edge");
    assert!(r.clusters.is_empty());

    let e = enable_request(
        "hello".into(),
        vec![],
        Some("default/edge".into()),
        Some("ns".into()),
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("--namespace applies to --clusters"),
        "{e}"
    );
    let e = enable_request("hello".into(), vec!["C_1".into()], None, None).unwrap_err();
    assert!(e.to_string().starts_with("--clusters: "), "{e}");
    let e = enable_request("Hello".into(), vec!["c1".into()], None, None).unwrap_err();
    assert!(e.to_string().starts_with("NAME: "), "{e}");
}

#[test]
fn a_placement_is_namespace_slash_name() {
    assert_eq!(
        placement_ref("default/edge").unwrap(),
        ("default".to_string(), "edge".to_string())
    );
    for bad in ["edge", "/edge", "default/", "a/b/c", ""] {
        let e = placement_ref(bad).unwrap_err().to_string();
        assert!(e.contains("expected NAMESPACE/NAME"), "{bad}: {e}");
    }
    let e = placement_ref("Default/edge").unwrap_err().to_string();
    assert!(e.starts_with("--placement namespace: "), "{e}");
}

#[test]
fn disable_takes_clusters_or_all() {
    let both = parse(&["disable", "hello", "--clusters", "c1", "--all"]).unwrap_err();
    assert_eq!(both.kind(), clap::error::ErrorKind::ArgumentConflict);
    let neither = parse(&["disable", "hello"]).unwrap_err();
    assert_eq!(
        neither.kind(),
        clap::error::ErrorKind::MissingRequiredArgument
    );
    let r = disable_request("hello".into(), vec![], true).unwrap();
    assert!(r.all && r.clusters.is_empty());
    let e = disable_request("hello".into(), vec!["c1".into()], true).unwrap_err();
    assert!(e.to_string().contains("not both"), "{e}");
    let e = disable_request("hello".into(), vec![], false).unwrap_err();
    assert!(e.to_string().contains("--all"), "{e}");
}

#[test]
fn enable_and_disable_say_what_they_did() {
    let r = enable_request("hello".into(), vec!["c1".into()], None, None).unwrap();
    let created = [Mca::new("c1", "hello").build()];
    assert_eq!(
        enabled(&r, &created, None),
        "managedclusteraddon.addon.open-cluster-management.io/hello enabled on cluster c1 (install namespace open-cluster-management-agent-addon)\n"
    );
    let r = enable_request("hello".into(), vec![], Some("default/edge".into()), None).unwrap();
    let cma = Cma::new("hello")
        .placement("prod", "core")
        .placement("default", "edge")
        .build();
    assert_eq!(
        enabled(&r, &[], Some(&cma)),
        "clustermanagementaddon.addon.open-cluster-management.io/hello enabled on placement default/edge (install strategy Placements: prod/core, default/edge)\n"
    );

    let r = disable_request("hello".into(), vec!["c1".into(), "c2".into()], false).unwrap();
    assert_eq!(
        disabled(&r, &["c1".into()]),
        "managedclusteraddon/hello removed from cluster c1\n"
    );
    assert_eq!(
        disabled(&r, &[]),
        "add-on hello was not installed on c1, c2\n"
    );
    let r = disable_request("hello".into(), vec![], true).unwrap();
    let text = disabled(&r, &["c1".into(), "c2".into()]);
    assert!(
        text.starts_with(
            "managedclusteraddon/hello removed from cluster c1\nmanagedclusteraddon/hello removed from cluster c2\n"
        ),
        "{text}"
    );
    assert!(
        text.ends_with("no placement installs it any more\n"),
        "{text}"
    );
}

#[test]
fn prepare_checks_every_subcommand_before_the_hub_is_called() {
    let status = parse(&["status", "hello", "--watch"]).unwrap();
    assert_eq!(
        prepare(status).unwrap(),
        Action::Status {
            name: "hello".into(),
            watch: true
        }
    );
    let e = prepare(parse(&["status", "Hello_1"]).unwrap()).unwrap_err();
    assert!(e.to_string().starts_with("NAME: "), "{e}");
    let e = prepare(parse(&["enable", "hello", "--placement", "edge"]).unwrap()).unwrap_err();
    assert!(e.to_string().contains("expected NAMESPACE/NAME"), "{e}");
    let Action::Disable(r) =
        prepare(parse(&["disable", "hello", "--clusters", "c1"]).unwrap()).unwrap()
    else {
        panic!("not disable");
    };
    assert_eq!(r.clusters, ["c1"]);
}
