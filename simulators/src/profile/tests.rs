use super::*;

const FULL: &str = r#"
seed: 7
labels:
  region: {eu-west: 4, us-east: 3, ap-south: 1}
  canary: {"true": 1, "": 9}
claims:
  region.open-cluster-management.io: {fromLabel: region}
  site.flotilla.io: {prefix: site-, count: 200}
capacity: {cpu: [4, 8, 16], memoryGi: [16, 64]}
allocatable: {min: 0.5, max: 0.9}
kubernetesVersions: {v1.30.2: 3, v1.31.1: 1}
platforms: {AWS: 1, Other: 1}
taints: [{key: gpu, effect: NoSelect, share: 0.05}]
readyDelayMs: {min: 200, max: 2000}
applyFailures: {share: 0.01}
scoreIntervalSeconds: 30
connectivity:
  flapping: {share: 0.2, meanUpSeconds: 30, meanDownSeconds: 10}
  outages: [{atSeconds: 60, forSeconds: 30, share: 0.1}]
  restarts: [{atSeconds: 120, share: 0.05, keepState: false}]
  latency: [{share: 0.3, rttMs: 250}, {share: 0.05, rttMs: 1500}]
"#;

fn parse(text: &str) -> Result<FleetProfile, ProfileError> {
    FleetProfile::parse(text, "fleet.yaml")
}

#[test]
fn the_documented_profile_parses_with_every_section() {
    let p = parse(FULL).expect("the module's example profile parses");
    assert_eq!(p.seed, 7);
    assert_eq!(p.taints.len(), 1);
    let f = p.connectivity.flapping.expect("flapping");
    assert_eq!((f.share, f.mean_up_seconds), (0.2, 30.0));
    assert!(!p.connectivity.restarts[0].keep_state);
    assert!(p.connectivity.outages[0].for_seconds > 0.0);
}

#[test]
fn shares_and_weights_come_out_as_written_over_a_large_fleet() {
    let p = parse(FULL).unwrap();
    let n = 20_000;
    let mut eu = 0;
    let mut canary = 0;
    let mut sites = std::collections::BTreeSet::new();
    for i in 0..n {
        let labels = p.labels(i).unwrap();
        eu += usize::from(labels["region"] == "eu-west");
        canary += usize::from(labels.contains_key("canary"));
        let claims = p.claims(i, &labels).unwrap();
        assert_eq!(
            claims["region.open-cluster-management.io"],
            labels["region"]
        );
        sites.insert(claims["site.flotilla.io"].clone());
    }
    let share = |k: usize| k as f64 / n as f64;
    assert!(
        (share(eu) - 0.5).abs() < 0.02,
        "eu-west share {}",
        share(eu)
    );
    assert!(
        (share(canary) - 0.1).abs() < 0.01,
        "canary share {}",
        share(canary)
    );
    assert_eq!(sites.len(), 200);
    let flapping = (0..n).filter(|i| p.in_share(*i, "flapping", 0.2)).count();
    assert!((share(flapping) - 0.2).abs() < 0.01);
}

#[test]
fn latency_classes_take_their_share_and_the_first_class_wins() {
    let p = parse(FULL).unwrap();
    let n = 20_000;
    let mut counts = [0usize; 2];
    for i in 0..n {
        if let Some((class, rtt)) = p.link_latency(i) {
            counts[class] += 1;
            assert_eq!(rtt, [250, 1500][class]);
        }
        assert_eq!(p.link_latency(i), p.link_latency(i), "stable");
    }
    let share = |k: usize| k as f64 / n as f64;
    assert!((share(counts[0]) - 0.3).abs() < 0.02, "{counts:?}");
    // The second class draws 5 % of the clusters the first did not take.
    assert!((share(counts[1]) - 0.05 * 0.7).abs() < 0.01, "{counts:?}");
}

#[test]
fn choices_are_deterministic_and_depend_on_the_seed() {
    let a = parse(FULL).unwrap();
    let b = parse(&FULL.replace("seed: 7", "seed: 8")).unwrap();
    let regions = |p: &FleetProfile| {
        (0..50)
            .map(|i| p.labels(i).unwrap()["region"].clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(regions(&a), regions(&a));
    assert_ne!(regions(&a), regions(&b));
}

#[test]
fn a_profile_with_only_connectivity_keeps_the_builtin_fleet() {
    let p = parse("connectivity: {flapping: {share: 0.2, meanUpSeconds: 5, meanDownSeconds: 2}}")
        .unwrap();
    assert!(p.labels(3).is_none());
    assert!(p.claims(3, &BTreeMap::new()).is_none());
}

#[test]
fn bad_profiles_are_refused_naming_the_field() {
    let cases = [
        ("labels: {region: {eu: -1}}", "labels.region"),
        ("labels: {region: {eu: 0}}", "labels.region"),
        ("claims: {site: {prefix: s-, count: 0}}", "claims.site"),
        ("claims: {x: {fromLabel: zone}}", "claims.x"),
        (
            "taints: [{key: gpu, effect: NoSchedule, share: 0.1}]",
            "taints[0].effect",
        ),
        (
            "taints: [{key: gpu, effect: NoSelect, share: 1.5}]",
            "taints[0].share",
        ),
        ("capacity: {cpu: [], memoryGi: [16]}", "capacity.cpu"),
        ("readyDelayMs: {min: 5, max: 1}", "readyDelayMs"),
        (
            "connectivity: {flapping: {share: 0.2, meanUpSeconds: 0, meanDownSeconds: 1}}",
            "connectivity.flapping.meanUpSeconds",
        ),
        (
            "connectivity: {outages: [{atSeconds: 1, forSeconds: 0, share: 0.1}]}",
            "connectivity.outages[0]",
        ),
        (
            "connectivity: {latency: [{share: 0.1, rttMs: 0}]}",
            "connectivity.latency[0].rttMs",
        ),
        (
            "connectivity: {latency: [{share: 1.1, rttMs: 100}]}",
            "connectivity.latency[0].share",
        ),
    ];
    for (text, field) in cases {
        match parse(text) {
            Err(ProfileError::Invalid { field: f, path, .. }) => {
                assert_eq!(f, field, "{text}");
                assert_eq!(path, "fleet.yaml");
            }
            other => panic!("{text}: expected an error at {field}, got {other:?}"),
        }
    }
}

#[test]
fn unknown_fields_and_wrong_types_are_parse_errors_with_a_position() {
    for text in ["labelz: {}", "seed: many", "connectivity: {flap: {}}"] {
        let e = parse(text).expect_err(text).to_string();
        assert!(e.starts_with("fleet.yaml: "), "{e}");
        assert!(
            e.contains("line") || e.contains("column") || e.contains("unknown"),
            "{e}"
        );
    }
}

#[test]
fn draws_are_uniform_enough() {
    let n = 100_000;
    let mean = (0..n).map(|i| unit(1, i, "x")).sum::<f64>() / n as f64;
    assert!((mean - 0.5).abs() < 0.01, "{mean}");
    assert!((0..n).all(|i| (0.0..1.0).contains(&unit(1, i, "x"))));
}

#[test]
fn the_example_profile_in_the_repository_loads() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/fleet-profile.yaml");
    let p = FleetProfile::load(&path).expect("examples/fleet-profile.yaml");
    assert_eq!(p.seed, 42);
    assert_eq!(p.connectivity.restarts.len(), 2);
    assert!(p.labels(1).unwrap().contains_key("region"));
}
