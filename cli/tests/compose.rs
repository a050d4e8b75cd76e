//! The docker-compose demo cannot run here (no Docker engine), so it is checked by parsing: the
//! services the README promises exist, every flag they pass is one the binary accepts, the
//! fleet is a few hundred clusters, and the one-shot job's documents are in the image and
//! apply as OCM documents.

mod common;

use serde_yaml::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn compose() -> Value {
    let text = std::fs::read_to_string(root().join("docker-compose.yml")).unwrap();
    serde_yaml::from_str(&text).expect("docker-compose.yml is YAML")
}

fn strings(v: &Value) -> Vec<String> {
    v.as_sequence()
        .map(|s| {
            s.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Every `--flag` in `args` appears in `binary --help` (and, for a subcommand, its help).
fn assert_flags_known(binary: &str, subcommand: Option<&str>, args: &[String]) {
    let mut cmd = Command::new(flotilla_testkit::binary(binary));
    if let Some(s) = subcommand {
        cmd.arg(s);
    }
    let help = cmd.arg("--help").output().expect("run --help");
    let help = String::from_utf8_lossy(&help.stdout).to_string();
    for a in args.iter().filter(|a| a.starts_with("--")) {
        let flag = a.split('=').next().unwrap();
        assert!(
            help.contains(flag),
            "{binary}: compose passes {flag}, which --help does not list"
        );
    }
}

#[test]
fn the_compose_demo_has_nats_a_hub_a_fleet_and_a_one_shot_apply() {
    let c = compose();
    let services = &c["services"];
    for s in ["nats", "hub", "sim", "apply", "cli"] {
        assert!(services.get(s).is_some(), "service {s} missing");
    }
    let hub = strings(&services["hub"]["command"]);
    assert_eq!(hub[0], "flotilla-hub");
    assert_flags_known("flotilla-hub", None, &hub[1..]);
    let sim = strings(&services["sim"]["command"]);
    assert_eq!(sim[0], "flotilla-sim");
    assert_flags_known("flotilla-sim", None, &sim[1..]);
    let clusters: usize = sim
        .iter()
        .find_map(|a| a.strip_prefix("--clusters="))
        .expect("--clusters")
        .parse()
        .unwrap();
    assert!(
        (100..=1000).contains(&clusters),
        "a few hundred clusters, not {clusters}"
    );
    let nats = strings(&services["nats"]["command"]);
    assert!(nats.contains(&"-js".to_string()), "JetStream on: {nats:?}");
    assert!(
        services["hub"]["command"]
            .as_sequence()
            .unwrap()
            .iter()
            .any(|a| a.as_str() == Some("--auto-accept"))
    );
}

#[test]
fn the_one_shot_job_applies_documents_that_are_in_the_image_and_valid() {
    let c = compose();
    let script = strings(&c["services"]["apply"]["command"]).join(" ");
    let path = script
        .split_whitespace()
        .skip_while(|w| *w != "-f")
        .nth(1)
        .expect("apply -f FILE");
    let in_repo = path
        .strip_prefix("/usr/share/flotilla/")
        .expect("the file is under the image's /usr/share/flotilla");
    let dockerfile = std::fs::read_to_string(root().join("Dockerfile")).unwrap();
    assert!(
        dockerfile.contains("COPY examples/ /usr/share/flotilla/examples/"),
        "the Dockerfile puts the examples where the job reads them"
    );
    assert!(
        script.contains("get clusters"),
        "the job waits for the hub: {script}"
    );
    let text = std::fs::read_to_string(root().join(in_repo)).unwrap();
    let docs = flotilla_api::ocm::parse_documents(&text);
    let kinds: Vec<&'static str> = docs
        .iter()
        .map(|d| match d {
            Ok(flotilla_api::ocm::Document::Placement(_)) => "Placement",
            Ok(flotilla_api::ocm::Document::ReplicaSet(_)) => "ManifestWorkReplicaSet",
            Ok(flotilla_api::ocm::Document::Work(_)) => "ManifestWork",
            Ok(_) => "other",
            Err(e) => panic!("{in_repo}: {e}"),
        })
        .collect();
    assert!(kinds.contains(&"Placement"), "{kinds:?}");
    assert!(
        kinds.contains(&"ManifestWorkReplicaSet") || kinds.contains(&"ManifestWork"),
        "{kinds:?}"
    );
}

#[test]
fn the_compose_fleet_and_job_run_as_local_processes() {
    use flotilla_testkit::{NatsServer, Proc, binary};
    let c = compose();
    let nats = NatsServer::start();
    let dir = tempfile::tempdir().unwrap();
    // The compose file's own add-on hub URL flag, with this test's server.
    let hub_args = strings(&c["services"]["hub"]["command"]);
    assert!(
        hub_args.iter().any(|a| a.starts_with("--addon-hub-url=")),
        "the compose hub gives add-on templates their HUB_URL: {hub_args:?}"
    );
    let hub = common::HubBuilder::new(&nats, dir.path())
        .auto_accept()
        .flag("--addon-hub-url", &nats.url())
        .start();
    // The compose file's own simulator arguments, with the service name replaced by this
    // test's server.
    let sim_args: Vec<String> = strings(&c["services"]["sim"]["command"])[1..]
        .iter()
        .map(|a| {
            if a.starts_with("--nats-url=") {
                format!("--nats-url={}", nats.url())
            } else {
                a.clone()
            }
        })
        .collect();
    let mut cmd = Command::new(binary("flotilla-sim"));
    cmd.args(&sim_args).env("RUST_LOG", "warn");
    let sim = Proc::spawn("flotilla-sim", cmd, dir.path().join("sim.log"));
    let clusters: usize = sim_args
        .iter()
        .find_map(|a| a.strip_prefix("--clusters="))
        .unwrap()
        .parse()
        .unwrap();
    common::wait_available(&hub, &[&hub.proc, &sim], "sim-", clusters);
    let out = common::run_cli(
        &hub.grpc,
        &[
            "apply",
            "-f",
            root().join("examples/compose-demo.yaml").to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    let status = Command::new(binary("flotilla"))
        .args(["--hub", &hub.grpc, "rollout", "status", "hello", "--watch"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success(), "{text}");
    assert!(
        text.contains("rollout complete") && text.contains("5/5 available"),
        "{text}"
    );
    // The job then installs the fleet-metrics add-on on the placement `demo` (ten clusters):
    // the same files, through `apply -f -`, and every installation becomes Available (its
    // in-process agent renews the lease).
    assert!(
        script_of(&c).contains("examples/addons/fleet-metrics-$$f.yaml"),
        "the job installs the example add-on"
    );
    let mut addon = String::new();
    for f in ["template", "config", "addon"] {
        addon.push_str(
            &std::fs::read_to_string(
                root().join(format!("examples/addons/fleet-metrics-{f}.yaml")),
            )
            .unwrap(),
        );
        addon.push_str("\n---\n");
    }
    let out = common::run_cli(&hub.grpc, &["apply", "-f", "-"], Some(&addon));
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    let status = Command::new(binary("flotilla"))
        .args([
            "--hub",
            &hub.grpc,
            "addon",
            "status",
            "fleet-metrics",
            "--watch",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success(), "{text}");
    assert!(text.contains("10/10 updated"), "{text}");
    common::wait_for(
        "ten fleet-metrics add-ons Available",
        &[&hub.proc, &sim],
        || {
            let out = common::run_cli(&hub.grpc, &["get", "addons", "-o", "json"], None);
            let v: serde_json::Value = serde_json::from_str(&out.stdout).ok()?;
            let available = v["items"]
                .as_array()?
                .iter()
                .filter(|m| {
                    m["status"]["conditions"].as_array().is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c["type"] == "Available" && c["status"] == "True")
                    })
                })
                .count();
            (available == 10).then_some(())
        },
    );
}

fn script_of(c: &Value) -> String {
    strings(&c["services"]["apply"]["command"]).join(" ")
}

/// The `ha` profile (docs/ha.md): three NATS nodes routed to each other, two hubs given every
/// node with R3 streams, a fleet given every node, a CLI given both hubs — and only flags the
/// binaries know (nats-server's checked against the Debian 2.9 build, the oldest supported).
#[test]
fn the_ha_profile_has_three_routed_nats_nodes_two_hubs_and_url_lists() {
    let c = compose();
    let services = &c["services"];
    let in_ha = |name: &str| strings(&services[name]["profiles"]).contains(&"ha".to_string());
    let nodes = ["nats-1", "nats-2", "nats-3"];
    let routes = "nats://nats-1:6222,nats://nats-2:6222,nats://nats-3:6222";
    let urls = "nats://nats-1:4222,nats://nats-2:4222,nats://nats-3:4222";
    let help = Command::new(flotilla_testkit::nats_server_debian_binary())
        .arg("--help")
        .output()
        .expect("nats-server --help");
    let help =
        String::from_utf8_lossy(&help.stdout).to_string() + &String::from_utf8_lossy(&help.stderr);
    for node in nodes {
        assert!(in_ha(node), "{node} is in the ha profile");
        let args = strings(&services[node]["command"]);
        let value = |flag: &str| {
            args.iter()
                .position(|a| a == flag)
                .and_then(|i| args.get(i + 1))
                .cloned()
                .unwrap_or_else(|| panic!("{node}: {flag} missing in {args:?}"))
        };
        assert!(args.contains(&"-js".to_string()), "{node}: JetStream");
        assert_eq!(value("-n"), node, "server names tell JetStream peers apart");
        assert_eq!(value("--cluster_name"), "flotilla");
        assert_eq!(value("--routes"), routes, "{node} routes to every node");
        for flag in args.iter().filter(|a| a.starts_with('-')) {
            assert!(
                help.contains(flag.as_str()),
                "{node}: nats-server has no {flag}"
            );
        }
    }
    let volumes: Vec<String> = nodes
        .iter()
        .map(|n| strings(&services[*n]["volumes"]).join(","))
        .collect();
    assert!(
        volumes[0] != volumes[1] && volumes[1] != volumes[2],
        "each node has its own store: {volumes:?}"
    );
    for hub in ["hub-a", "hub-b"] {
        assert!(in_ha(hub), "{hub} is in the ha profile");
        let args = strings(&services[hub]["command"]);
        assert_eq!(args[0], "flotilla-hub");
        assert_flags_known("flotilla-hub", None, &args[1..]);
        assert!(
            args.contains(&format!("--nats-url={urls}")),
            "{hub}: {args:?}"
        );
        assert!(
            args.contains(&"--replicas=3".to_string()),
            "{hub}: {args:?}"
        );
    }
    let sim = strings(&services["sim-ha"]["command"]);
    assert!(in_ha("sim-ha"));
    assert_flags_known("flotilla-sim", None, &sim[1..]);
    assert!(sim.contains(&format!("--nats-url={urls}")), "{sim:?}");
    assert!(in_ha("cli-ha"));
    assert_eq!(
        strings(&services["cli-ha"]["entrypoint"]),
        ["flotilla", "--hub=http://hub-a:50051,http://hub-b:50051"]
    );
}

/// The image holds every binary the compose services run and the one the hub runs itself —
/// the GitRepo fetch worker, in the hub's directory where `--gitops-fetch-worker`'s default
/// looks — and the system roots the worker trusts for https:// repositories.
#[test]
fn the_image_holds_the_fetch_worker_beside_the_hub_and_the_system_roots() {
    let dockerfile = std::fs::read_to_string(root().join("Dockerfile")).unwrap();
    let copied: Vec<&str> = dockerfile
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("target/release/"))
        .collect();
    for binary in [
        "flotilla",
        "flotilla-hub",
        "flotilla-sim",
        "flotilla-git-fetch",
    ] {
        assert!(
            copied.contains(&binary),
            "the Dockerfile copies {binary} into the image: {copied:?}"
        );
        // The binary exists under that name in this workspace.
        flotilla_testkit::binary(binary);
    }
    assert!(
        dockerfile.contains("COPY --from=build /out/ /usr/local/bin/"),
        "every binary lands in one directory (the hub finds the worker beside itself)"
    );
    assert!(
        dockerfile
            .lines()
            .any(|l| l.contains("apt-get install") && l.contains("ca-certificates")),
        "the runtime image installs ca-certificates"
    );
}
