//! `flotilla-hub manifests` (issue 49 §3): the management-cluster install validates against the
//! Kubernetes 1.30 OpenAPI schemas (`kubernetes-validate --strict`, installed by
//! `scripts/test.sh`); its Services, mounts and monitor point at what exists; the rendered NATS
//! configuration loads in a real nats-server with the Secret's files; the hubs' init container
//! makes a secure directory the hub's own loader reads; bad input is refused naming each problem.

use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

const HINT: &str = "kubernetes-validate is not installed: run `pip install kubernetes-validate`, \
or `./scripts/test.sh`, which installs it";
const HUB: &str = env!("CARGO_BIN_EXE_flotilla-hub");

/// A secure directory for namespace `flotilla`, a tokens file; the paths of the three.
fn setup(dir: &Path, hosts: &[&str]) -> (String, String) {
    let mut init = Command::new(HUB);
    init.args(["init", "--tls", "--nats-listen", "0.0.0.0:4222", "--dir"])
        .arg(dir.join("secure"));
    for h in hosts {
        init.args(["--tls-host", h]);
    }
    let out = init.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tokens = dir.join("tokens");
    std::fs::write(&tokens, "s3cret-admin,ana,admin\n").unwrap();
    (
        dir.join("secure").display().to_string(),
        tokens.display().to_string(),
    )
}

fn manifests(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(HUB)
        .arg("manifests")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn documents(yaml: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(yaml)
        .map(|d| Value::deserialize(d).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

/// Every built-in kind validates strictly; the two prometheus-operator kinds have no schema
/// there (checked by [`monitors_point_at_the_metrics_service`]).
fn validate(yaml: &str, docs: &[Value]) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("install.yaml");
    std::fs::write(&file, yaml).unwrap();
    let out = Command::new("kubernetes-validate")
        .args(["--strict", "-k", "1.30.0"])
        .arg(&file)
        .output()
        .unwrap_or_else(|e| panic!("{HINT} ({e})"));
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    let crds = docs
        .iter()
        .filter(|d| d["apiVersion"] == "monitoring.coreos.com/v1")
        .count();
    assert_eq!(text.matches("passed").count(), docs.len() - crds, "{text}");
    assert_eq!(text.matches("Couldn't find schema").count(), crds, "{text}");
    assert!(!text.contains("fail") && !text.contains("ERROR"), "{text}");
}

fn named<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

fn pod_templates(docs: &[Value]) -> Vec<&Value> {
    docs.iter()
        .filter_map(|d| match d["kind"].as_str().unwrap() {
            "Deployment" | "StatefulSet" => Some(&d["spec"]["template"]),
            "CronJob" => Some(&d["spec"]["jobTemplate"]["spec"]["template"]),
            _ => None,
        })
        .collect()
}

/// `selector` (a map of labels) selects `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    let selector = selector.as_object().unwrap();
    !selector.is_empty() && selector.iter().all(|(k, v)| labels[k] == *v)
}

/// Selectors match their templates, each Service selects pods with its target ports, each
/// volume names a Secret/ConfigMap and keys that are rendered, every object is in the
/// namespace.
fn assert_wired(docs: &[Value]) {
    let templates = pod_templates(docs);
    for d in docs {
        if d["kind"] != "Namespace" {
            assert_eq!(d["metadata"]["namespace"], "flotilla", "{d}");
        }
        if ["Deployment", "StatefulSet"].contains(&d["kind"].as_str().unwrap()) {
            let spec = &d["spec"];
            assert!(selects(
                &spec["selector"]["matchLabels"],
                &spec["template"]["metadata"]["labels"]
            ));
        }
        if d["kind"] == "Service" {
            let pods: Vec<&&Value> = templates
                .iter()
                .filter(|t| selects(&d["spec"]["selector"], &t["metadata"]["labels"]))
                .collect();
            assert!(!pods.is_empty(), "Service selects no pods: {d}");
            for port in d["spec"]["ports"].as_array().unwrap() {
                let target = &port["targetPort"];
                let found = pods.iter().any(|t| {
                    t["spec"]["containers"].as_array().unwrap().iter().any(|c| {
                        c["ports"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .any(|p| p["name"] == *target)
                    })
                });
                assert!(found, "no container port {target} for {d}");
            }
        }
    }
    for t in &templates {
        for v in t["spec"]["volumes"].as_array().unwrap() {
            let mut sources = vec![];
            if let Some(s) = v["projected"]["sources"].as_array() {
                sources.extend(s.iter().cloned());
            } else {
                sources.push(v.clone());
            }
            for s in sources {
                for (field, kind, name_field) in [
                    ("secret", "Secret", "secretName"),
                    ("configMap", "ConfigMap", "name"),
                ] {
                    let source = &s[field];
                    if source.is_null() {
                        continue;
                    }
                    let name = source[name_field]
                        .as_str()
                        .or(source["name"].as_str())
                        .unwrap();
                    let object = named(docs, kind, name);
                    for item in source["items"].as_array().into_iter().flatten() {
                        let key = item["key"].as_str().unwrap();
                        assert!(!object["data"][key].is_null(), "{kind} {name} has no {key}");
                    }
                }
            }
        }
    }
}

fn monitors_point_at_the_metrics_service(docs: &[Value]) {
    let monitor = named(docs, "ServiceMonitor", "flotilla-hub");
    let spec = monitor["spec"].as_object().unwrap();
    let fields: Vec<&str> = spec.keys().map(String::as_str).collect();
    assert_eq!(fields, ["endpoints", "namespaceSelector", "selector"]);
    let service = named(docs, "Service", "flotilla-hub");
    assert!(selects(
        &spec["selector"]["matchLabels"],
        &service["metadata"]["labels"]
    ));
    assert_eq!(
        spec["endpoints"][0]["port"],
        service["spec"]["ports"][0]["name"]
    );
    let rule = named(docs, "PrometheusRule", "flotilla");
    let groups = rule["spec"]["groups"].as_array().unwrap();
    assert!(!groups.is_empty());
    for r in groups.iter().flat_map(|g| g["rules"].as_array().unwrap()) {
        assert!(r["alert"].is_string() && r["expr"].is_string(), "{r}");
        for key in r.as_object().unwrap().keys() {
            assert!(
                ["alert", "expr", "for", "labels", "annotations"].contains(&key.as_str()),
                "{key} is not a field of a PrometheusRule rule"
            );
        }
    }
}

/// The Secret's files put where the StatefulSet mounts them, the paths rewritten into `dir`.
fn nats_config_loads(docs: &[Value], dir: &Path) {
    let secret = named(docs, "Secret", "flotilla-nats");
    let config = dir.join("nats-config");
    std::fs::create_dir_all(&config).unwrap();
    for (key, value) in secret["data"].as_object().unwrap() {
        let bytes = data_encoding::BASE64
            .decode(value.as_str().unwrap().as_bytes())
            .unwrap();
        std::fs::write(config.join(key), bytes).unwrap();
    }
    let jwt = named(docs, "ConfigMap", "flotilla-jwt");
    std::fs::write(
        dir.join("operator.jwt"),
        jwt["data"]["operator.jwt"].as_str().unwrap(),
    )
    .unwrap();
    let conf = std::fs::read_to_string(config.join("nats.conf"))
        .unwrap()
        .replace("/etc/nats-config", &config.display().to_string())
        .replace("/etc/nats-jwt", &dir.display().to_string())
        .replace("\"/data/", &format!("\"{}/data/", dir.display()))
        .replace("/var/run/nats", &dir.display().to_string());
    let file = dir.join("local.conf");
    std::fs::write(&file, conf).unwrap();
    let out = Command::new(flotilla_testkit::nats_server_binary())
        .env("SERVER_NAME", "nats-0")
        .arg("-t")
        .arg("-c")
        .arg(&file)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "nats-server -t: {text}");
}

/// The hubs' init container run on the projected files: the hub's loader reads the result.
fn hub_secure_dir_loads(docs: &[Value], dir: &Path) {
    let deployment = named(docs, "Deployment", "flotilla-hub");
    let spec = &deployment["spec"]["template"]["spec"];
    let source = dir.join("source");
    let secure = dir.join("secure-copy");
    std::fs::create_dir_all(&secure).unwrap();
    for s in spec["volumes"][0]["projected"]["sources"]
        .as_array()
        .unwrap()
    {
        let (object, base64) = match (&s["secret"], &s["configMap"]) {
            (secret, _) if !secret.is_null() => (
                named(docs, "Secret", secret["name"].as_str().unwrap()),
                true,
            ),
            (_, map) => (
                named(docs, "ConfigMap", map["name"].as_str().unwrap()),
                false,
            ),
        };
        let source_items = if s["secret"].is_null() {
            &s["configMap"]
        } else {
            &s["secret"]
        };
        for item in source_items["items"].as_array().unwrap() {
            let value = object["data"][item["key"].as_str().unwrap()]
                .as_str()
                .unwrap();
            let bytes = if base64 {
                data_encoding::BASE64.decode(value.as_bytes()).unwrap()
            } else {
                value.as_bytes().to_vec()
            };
            let path = source.join(item["path"].as_str().unwrap());
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, bytes).unwrap();
        }
    }
    let init = &spec["initContainers"][0];
    assert_eq!(init["command"][0], "sh");
    let script = init["command"][2]
        .as_str()
        .unwrap()
        .replace("/etc/flotilla/source", &source.display().to_string())
        .replace("/etc/flotilla/secure", &secure.display().to_string());
    let out = Command::new("sh").arg("-c").arg(&script).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    flotilla_auth::SecureDir::load(&secure).expect("the hub loads its copy");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(secure.join("keys/agents-signing.nk"))
            .unwrap()
            .permissions(),
    );
    assert_eq!(mode & 0o077, 0, "seeds private to the hub: {mode:o}");
    // The hub's flags as the Deployment gives them parse (clap refuses unknown ones).
    let args: Vec<String> = spec["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    let out = Command::new(HUB)
        .args(&args)
        .arg("--help")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_install_validates_is_wired_and_its_nats_and_hub_configuration_load() {
    let dir = tempfile::tempdir().unwrap();
    let (secure, tokens) = setup(
        dir.path(),
        &[
            "nats.flotilla.svc",
            "*.nats-headless.flotilla.svc",
            "nats.example.com",
        ],
    );
    let cert = format!("{secure}/tls/server.pem");
    let key = format!("{secure}/tls/server-key.pem");
    let base = [
        "--secure-dir",
        &secure,
        "--api-token-file",
        &tokens,
        "--grpc-tls-cert",
        &cert,
        "--grpc-tls-key",
        &key,
    ];
    let (ok, yaml, err) = manifests(
        &[
            &base[..],
            &[
                "--dashboard",
                "--cluster-proxy",
                "--webhooks",
                "--hubs",
                "3",
                "--backup-schedule",
                "0 3 * * *",
            ],
        ]
        .concat(),
    );
    assert!(ok, "{err}");
    assert!(
        err.contains("keys/operator.nk, keys/system.nk, tls/ca-key.pem"),
        "{err}"
    );
    let docs = documents(&yaml);
    validate(&yaml, &docs);
    assert_wired(&docs);
    monitors_point_at_the_metrics_service(&docs);
    nats_config_loads(&docs, dir.path());
    hub_secure_dir_loads(&docs, dir.path());
    let kinds: BTreeMap<&str, usize> = docs.iter().fold(BTreeMap::new(), |mut m, d| {
        *m.entry(d["kind"].as_str().unwrap()).or_default() += 1;
        m
    });
    assert_eq!(kinds["Service"], 8, "{kinds:?}");
    assert_eq!(kinds["NetworkPolicy"], 3);
    assert_eq!(kinds["PodDisruptionBudget"], 2);
    assert_eq!((kinds["CronJob"], kinds["PersistentVolumeClaim"]), (1, 1));
    let cron = named(&docs, "CronJob", "flotilla-backup");
    let pod = &cron["spec"]["jobTemplate"]["spec"]["template"]["spec"];
    let script = pod["containers"][0]["command"][2].as_str().unwrap();
    assert!(
        script.contains(" backup --secure-dir '/etc/flotilla/secure' --out "),
        "{script}"
    );
    let syntax = Command::new("sh")
        .args(["-n", "-c", script])
        .output()
        .unwrap();
    assert!(syntax.status.success(), "{script}");

    // The smallest: one NATS server, no external Service, no prometheus-operator.
    let (ok, small, err) = manifests(
        &[
            &base[..],
            &[
                "--nats-replicas",
                "1",
                "--nats-external",
                "none",
                "--no-prometheus-operator",
            ],
        ]
        .concat(),
    );
    assert!(ok, "{err}");
    let docs = documents(&small);
    validate(&small, &docs);
    assert_wired(&docs);
    assert!(
        !docs
            .iter()
            .any(|d| d["apiVersion"] == "monitoring.coreos.com/v1")
    );
    assert!(
        !docs
            .iter()
            .any(|d| d["metadata"]["name"] == "nats-external")
    );
}

#[test]
fn bad_input_is_refused_naming_every_problem() {
    let (ok, _, err) = manifests(&[]);
    assert!(!ok);
    assert!(err.contains("--secure-dir is needed"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let (secure, _) = setup(dir.path(), &["nats.elsewhere"]);
    let (ok, out, err) = manifests(&[
        "--secure-dir",
        &secure,
        "--hubs",
        "9",
        "--namespace",
        "Bad_NS",
        "--backup-schedule",
        "nightly",
    ]);
    assert!(!ok && out.is_empty());
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("--namespace \"Bad_NS\": not a DNS-1123 label")),
        "{err}"
    );
    assert!(
        lines.iter().any(|l| l.contains("--hubs 9: give 1 to 5")),
        "{err}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("--backup-schedule \"nightly\": give five cron fields")),
        "{err}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("--api-token-file is needed")),
        "{err}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("tls/server.pem does not name")),
        "{err}"
    );
}
