use super::*;
use crate::{
    discover::{discover, tests::Fixture},
    render::{Source, render},
};

const SHOP: &str = r#"
apiVersion: apps.flotilla.io/v1alpha1
kind: GitRepo
metadata: {name: shop, namespace: edge-apps}
spec:
  repo: git://git.example.com/ops/shop.git
  insecureTransport: true
  branch: main
  paths: ["apps/*"]
  pollingInterval: 1m
  targets:
  - name: stores
    placementRef: {name: stores}
    rolloutStrategy:
      type: ProgressivePerGroup
      progressivePerGroup: {maxFailures: 0}
  - name: depots
    placementRef: {name: depots}
"#;

#[test]
fn a_gitrepo_parses_and_asks_for_its_branch_and_paths() {
    let r = parse(SHOP).unwrap();
    assert_eq!(spec(&r).targets.len(), 2);
    assert_eq!(
        polling_interval(&r),
        Some(std::time::Duration::from_secs(60))
    );
    let req = fetch_request(&r, Limits::default(), &[], false);
    assert_eq!(req.url, "git://git.example.com/ops/shop.git");
    assert_eq!(req.want, Some(Want::Branch("main".into())));
    assert_eq!(req.paths, ["apps/*"]);
}

#[test]
fn ssh_and_scp_like_repositories_need_a_secret_and_take_a_user_but_no_password() {
    let with = |repo: &str, secret: bool| {
        let mut y = SHOP
            .replace("git://git.example.com/ops/shop.git", &format!("{repo:?}"))
            .replace(
                "  insecureTransport: true\n",
                if secret {
                    "  clientSecretName: shop-ssh\n"
                } else {
                    ""
                },
            );
        y.push('\n');
        parse(&y)
    };
    for ok in [
        "ssh://git@git.example.com/ops/shop.git",
        "ssh://git.example.com:2222/ops/shop.git",
        "git@github.com:ops/shop.git",
        "gitlab.example.com:ops/shop.git",
    ] {
        let r = with(ok, true).unwrap_or_else(|e| panic!("{ok}: {e:?}"));
        assert_eq!(fetch_request(&r, Limits::default(), &[], false).url, ok);
        assert_eq!(
            with(ok, false).unwrap_err(),
            [
                "spec.clientSecretName: required for an SSH repository: a kubernetes.io/ssh-auth \
              Secret (ssh-privatekey, known_hosts)"
            ],
            "{ok}"
        );
    }
    let problems = |repo: &str| with(repo, true).unwrap_err().join("\n");
    assert!(
        problems("ssh://git:hunter2@git.example.com/ops/shop.git").contains("no user or password")
    );
    assert!(problems("https://ann@git.example.com/ops/shop.git").contains("no user or password"));
    assert!(problems("shop.git").contains("not a URL: use https://, ssh://"));
    assert!(problems("git:hunter2@github.com:ops/shop.git").contains("no password in the URL"));
    assert!(problems("ops/shop:v1").contains("not a URL"));
    assert!(problems("git@host:").contains("a host and a path are both needed"));
    assert!(problems("-oProxyCommand=x:y").contains("starts with '-'"));
}

#[test]
fn https_takes_a_secret_and_a_ca_bundle_and_nothing_else_does() {
    // base64 of "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", as Fleet writes it.
    let ca = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUIKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=";
    let https = SHOP
        .replace("git://git.example.com", "https://git.example.com")
        .replace(
            "  insecureTransport: true\n",
            &format!("  clientSecretName: shop-git\n  caBundle: {ca}\n"),
        );
    let r = parse(&https).unwrap();
    let req = fetch_request(&r, Limits::default(), &[], false);
    assert!(req.ca_bundle.starts_with(b"-----BEGIN CERTIFICATE-----"));
    assert_eq!(req.credentials, None, "the hub adds them from the Secret");

    // The same over git:// and plain http://: credentials never travel in the clear.
    for scheme in ["git", "http"] {
        let clear = https.replace("https://", &format!("{scheme}://")).replace(
            "  clientSecretName",
            "  insecureTransport: true\n  clientSecretName",
        );
        assert_eq!(
            parse(&clear).unwrap_err(),
            [
                format!(
                    "spec.clientSecretName: credentials are sent over https:// and ssh:// only, not {scheme}://"
                ),
                format!("spec.caBundle: for https:// repositories only, not {scheme}://"),
            ]
        );
    }
    let http = SHOP.replace("git://", "http://");
    assert!(parse(&http).is_ok(), "http:// with insecureTransport");
    let problems = parse(&http.replace("  insecureTransport: true\n", "")).unwrap_err();
    assert!(
        problems[0].starts_with("spec.repo: http:// has no transport security"),
        "{problems:?}"
    );
    let not_pem = https.replace(ca, "aGVsbG8="); // base64 of "hello"
    assert_eq!(
        parse(&not_pem).unwrap_err(),
        ["spec.caBundle: no PEM certificate (-----BEGIN CERTIFICATE-----) in it"]
    );
    let bad_name = https.replace("clientSecretName: shop-git", "clientSecretName: Shop_Git");
    assert!(
        parse(&bad_name).unwrap_err()[0].starts_with("spec.clientSecretName: "),
        "named by its field"
    );
}

#[test]
fn every_problem_is_reported_with_its_field() {
    let bad = SHOP
        .replace("  insecureTransport: true\n", "")
        .replace("  branch: main\n", "")
        .replace("pollingInterval: 1m", "pollingInterval: 5s")
        .replace("\"apps/*\"", "\"../etc\"")
        .replace("name: depots\n", "name: stores\n");
    let problems = parse(&bad).unwrap_err();
    let expect = [
        "spec.repo: git:// has no transport security: set spec.insecureTransport: true",
        "spec.branch or spec.revision is required",
        "spec.paths[0]: paths entry \"../etc\"",
        "spec.pollingInterval: 5s: 0, or between 15s and 24h",
        "spec.targets[1].name: stores is used twice",
    ];
    for e in expect {
        assert!(
            problems.iter().any(|p| p.starts_with(e)),
            "{e:?} not in {problems:#?}"
        );
    }
    assert_eq!(problems.len(), expect.len(), "{problems:#?}");
}

#[test]
fn fields_not_built_and_fleet_fields_left_out_are_refused_by_name() {
    let bad = SHOP
        .replace("  branch: main\n", "  branch: main\n  helmSecretName: x\n")
        .replace(
            "  - name: depots\n",
            "  - name: depots\n    clusterSelector: {matchLabels: {a: b}}\n",
        );
    let problems = parse(&bad).unwrap_err();
    assert_eq!(
        problems,
        [
            "spec.helmSecretName: Helm is not rendered here",
            "spec.targets[1].clusterSelector: goes under placement: (an inline target), as placement.clusterSelector",
        ]
    );
    let userinfo = SHOP.replace("git://git.example.com", "git://ann:hunter2@git.example.com");
    let problems = parse(&userinfo).unwrap_err();
    assert!(
        problems[0].contains("no user or password in the URL"),
        "{problems:?}"
    );
    assert!(
        !problems[0].contains("hunter2"),
        "the password is not echoed back"
    );
}

#[test]
fn a_rendered_bundle_becomes_a_replica_set_over_every_target() {
    let r = parse(&SHOP.replace(
        "pollingInterval: 1m",
        "pollingInterval: 1m\n  keepResources: true",
    ))
    .unwrap();
    let tree = Fixture::roots(&["apps/web"])
        .file("apps/web/fleet.yaml", "labels: {tier: web}\n")
        .file(
            "apps/web/cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n",
        )
        .tree();
    let dir = &discover(&tree).unwrap()[0];
    let source = Source {
        namespace: "edge-apps",
        name: "shop",
        target_namespace: None,
    };
    let bundle = render(source, &tree, dir).unwrap();
    let rs = replica_set(&r, &bundle, &"c".repeat(40));
    let meta = rs.metadata.as_ref().unwrap();
    assert_eq!(
        (meta.name.as_str(), meta.namespace.as_str()),
        ("shop-apps-web", "edge-apps")
    );
    assert_eq!(meta.labels[GITREPO_LABEL], "shop");
    assert_eq!(meta.labels[BUNDLE_LABEL], "shop-apps-web");
    assert_eq!(meta.labels["tier"], "web");
    assert_eq!(meta.annotations[CONTENT_ANNOTATION], bundle.content);
    let spec = rs.spec.as_ref().unwrap();
    assert_eq!(spec.manifest_work_template.as_ref(), Some(&bundle.spec));
    let refs: Vec<(&str, Option<&str>)> = spec
        .placement_refs
        .iter()
        .map(|p| {
            (
                p.name.as_str(),
                p.rollout_strategy.as_ref().map(|s| s.r#type.as_str()),
            )
        })
        .collect();
    assert_eq!(
        refs,
        [("stores", Some("ProgressivePerGroup")), ("depots", None)]
    );
    assert_eq!(spec.cascade_deletion_policy, "Orphan");
    // The OCM document of it parses back (what `flotilla get -o yaml` would show).
    let doc = flotilla_api::ocm::ManifestWorkReplicaSet::from(&rs);
    assert_eq!(doc.spec.placement_refs.len(), 2);
}

/// SHOP with its `depots` target inline.
fn inline_depots() -> String {
    SHOP.replace(
        "    placementRef: {name: depots}\n",
        "    placement: {clusterSelector: {matchLabels: {tier: depot}}}\n",
    )
}

#[test]
fn an_inline_target_is_taken_and_its_bundles_go_to_the_placement_the_gitrepo_owns() {
    let r = parse(&inline_depots()).unwrap();
    let tree = Fixture::roots(&["apps/web"])
        .file(
            "apps/web/cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n",
        )
        .tree();
    let dir = &discover(&tree).unwrap()[0];
    let source = Source {
        namespace: "edge-apps",
        name: "shop",
        target_namespace: None,
    };
    let bundle = render(source, &tree, dir).unwrap();
    let rs = replica_set(&r, &bundle, &"c".repeat(40));
    let refs: Vec<&str> = rs
        .spec
        .as_ref()
        .unwrap()
        .placement_refs
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(refs, ["stores", "shop-depots"]);
}

#[test]
fn a_target_gives_exactly_one_of_placement_ref_and_placement() {
    let both = inline_depots().replace(
        "    placement: {",
        "    placementRef: {name: depots}\n    placement: {",
    );
    let neither = SHOP.replace("    placementRef: {name: depots}\n", "");
    let bad_name = SHOP.replace(
        "    placementRef: {name: depots}\n",
        "    placement: {clusterName: Lab_1}\n",
    );
    for (text, want) in [
        (
            both,
            "spec.targets[1]: placementRef and placement: give one, not both",
        ),
        (
            neither,
            "spec.targets[1]: placementRef or placement is required",
        ),
        (bad_name, "spec.targets[1].placement.clusterName: "),
    ] {
        let problems = parse(&text).unwrap_err();
        assert!(
            problems.len() == 1 && problems[0].starts_with(want),
            "{want:?}: {problems:#?}"
        );
    }
}
