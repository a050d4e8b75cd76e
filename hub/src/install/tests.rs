use super::secure::{HUB_FILES, JWT_FILES, NATS_TLS_FILES, OFFLINE_FILES, SERVER_CONF};
use super::*;

/// A secure directory written by `init` with the names the default plan needs, read back.
fn files(hosts: &[&str]) -> SecureFiles {
    let dir = tempfile::tempdir().unwrap();
    let options = flotilla_auth::setup::InitOptions {
        nats_listen: "0.0.0.0:4222".into(),
        tls: true,
        tls_hosts: hosts.iter().map(|h| h.to_string()).collect(),
        ..Default::default()
    };
    flotilla_auth::SecureDir::init(dir.path(), &options).unwrap();
    let mut files = SecureFiles {
        api_tokens: b"t0ken,ana,admin\n".to_vec(),
        api_tls: Some((b"cert".to_vec(), b"key".to_vec())),
        ..Default::default()
    };
    let all = HUB_FILES
        .iter()
        .chain(JWT_FILES)
        .chain(NATS_TLS_FILES)
        .chain(OFFLINE_FILES)
        .chain([&SERVER_CONF]);
    for path in all {
        files.files.insert(
            path.to_string(),
            std::fs::read(dir.path().join(path)).unwrap(),
        );
    }
    files
}

const NAMES: &[&str] = &["nats.flotilla.svc", "*.nats-headless.flotilla.svc"];

#[test]
fn a_plan_reports_every_bad_flag_at_once() {
    let plan = Plan {
        namespace: "Flotilla".into(),
        hubs: 0,
        nats_replicas: 2,
        jetstream_size: "10 GB".into(),
        image: String::new(),
        ..Plan::default()
    };
    let problems: Vec<String> = plan.check().iter().map(ToString::to_string).collect();
    assert_eq!(problems.len(), 5, "{problems:#?}");
    assert!(problems[0].starts_with("--namespace \"Flotilla\": not a DNS-1123 label"));
    assert!(problems.iter().any(|p| p.contains("--nats-replicas 2")));
    assert!(Plan::default().check().is_empty());
}

#[test]
fn the_same_directory_renders_the_same_manifests() {
    let files = files(NAMES);
    let a = to_yaml(&render(&Plan::default(), &files).unwrap());
    let b = to_yaml(&render(&Plan::default(), &files).unwrap());
    assert_eq!(a, b);
}

#[test]
fn offline_keys_are_never_rendered_and_config_maps_hold_no_secret() {
    let files = files(NAMES);
    let plan = Plan {
        dashboard: true,
        cluster_proxy: true,
        webhooks: true,
        ..Plan::default()
    };
    let objects = render(&plan, &files).unwrap();
    let yaml = to_yaml(&objects);
    for path in OFFLINE_FILES {
        let text = String::from_utf8_lossy(&files.files[*path])
            .trim()
            .to_string();
        let encoded = data_encoding::BASE64.encode(&files.files[*path]);
        assert!(!yaml.contains(&text) && !yaml.contains(&encoded), "{path}");
    }
    let config_maps = objects
        .iter()
        .filter(|o| o["kind"] == "ConfigMap")
        .map(|o| o.to_string())
        .collect::<String>();
    for path in HUB_FILES.iter().filter(|p| p.starts_with("keys/")) {
        let seed = String::from_utf8_lossy(&files.files[*path])
            .trim()
            .to_string();
        assert!(!config_maps.contains(&seed), "{path} in a ConfigMap");
    }
    assert!(!config_maps.contains(&files.routes_password()));
}

#[test]
fn a_seed_in_place_of_a_jwt_is_refused() {
    let mut files = files(NAMES);
    let seed = files.files["keys/account.nk"].clone();
    files.files.insert("account.jwt".into(), seed);
    let problems = render(&Plan::default(), &files).unwrap_err();
    assert_eq!(
        problems[0].to_string(),
        "secure directory: account.jwt does not look like a JWT (it starts with \"SA\"): \
         refusing to put it in a ConfigMap"
    );
}

#[test]
fn a_certificate_without_the_service_names_is_refused_with_the_fix() {
    let files = files(&["nats.example.com"]);
    let problems = render(&Plan::default(), &files).unwrap_err();
    let text = problems[0].to_string();
    assert!(
        text.starts_with(
            "secure directory: tls/server.pem does not name \"nats.flotilla.svc\", \
             \"*.nats-headless.flotilla.svc\"; write the directory with flotilla-hub init"
        ),
        "{text}"
    );
    assert!(
        text.contains("--tls-host '*.nats-headless.flotilla.svc'"),
        "{text}"
    );
}

#[test]
fn missing_files_tokens_and_tls_are_each_named() {
    let mut files = files(NAMES);
    files.files.remove("keys/sealing.xk");
    files.files.remove("tls/server.pem");
    files.api_tokens.clear();
    files.api_tls = None;
    let problems: Vec<String> = render(&Plan::default(), &files)
        .unwrap_err()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(problems.len(), 4, "{problems:#?}");
    assert!(problems[0].contains("keys/sealing.xk is missing"));
    assert!(problems[1].contains("tls/server.pem is missing; the install needs TLS"));
    assert!(problems[2].starts_with("--api-token-file is needed"));
    assert!(problems[3].starts_with("--grpc-tls-cert and --grpc-tls-key are needed"));
}

#[test]
fn the_nats_configuration_keeps_inits_accounts_and_routes_every_server() {
    let files = files(NAMES);
    let accounts = files.accounts().unwrap();
    assert_eq!(accounts.preload.len(), 3);
    let conf = nats::config(&Plan::default(), &accounts, "pw");
    assert!(conf.contains(&format!("system_account: {}", accounts.system)));
    for i in 0..3 {
        assert!(conf.contains(&format!(
            "\"nats://flotilla-route:pw@nats-{i}.nats-headless.flotilla.svc:6222\""
        )));
    }
    // 90 % of 10 GiB.
    assert!(conf.contains("max_file_store: 9663676416\n"), "{conf}");
}

#[test]
fn the_hubs_never_share_a_node_and_roll_one_at_a_time() {
    let objects = render(&Plan::default(), &files(NAMES)).unwrap();
    let hub = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
    let spec = &hub["spec"];
    assert_eq!(spec["replicas"], 2);
    assert_eq!(spec["strategy"]["rollingUpdate"]["maxSurge"], 0);
    let anti = &spec["template"]["spec"]["affinity"]["podAntiAffinity"];
    assert_eq!(
        anti["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"],
        "kubernetes.io/hostname"
    );
    let kinds: Vec<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
    for kind in [
        "Namespace",
        "StatefulSet",
        "PodDisruptionBudget",
        "NetworkPolicy",
        "ServiceMonitor",
        "PrometheusRule",
    ] {
        assert!(kinds.contains(&kind), "{kind}: {kinds:?}");
    }
}
