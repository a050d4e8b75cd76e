//! The hub's list, the controller shape, and the access table built from the list.

mod access;
mod before;
mod probe;

use flotilla_hub_core::controller::{Controllers, Families, Family, Start, StartError};
use flotilla_hub_core::ha::Fence;
use futures::future::BoxFuture;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the test families did, in order.
type Log = Arc<Mutex<Vec<String>>>;

/// A family that provides a `Token(name)`, may need another's, may fail to start, and logs
/// its start, its stop and its task's end.
struct Fake {
    name: &'static str,
    needs: Option<&'static str>,
    fails: bool,
    routes: usize,
    log: Log,
}

#[derive(Clone, Debug, PartialEq)]
struct Token(&'static str);
#[derive(Clone, Debug, PartialEq)]
struct Other(&'static str);

impl Family for Fake {
    fn name(&self) -> &'static str {
        self.name
    }

    fn serve(&self, api: flotilla_hub_core::grpc::api::Api) -> flotilla_hub_core::grpc::api::Api {
        api
    }

    fn access(&self) -> &'static [flotilla_hub_core::grpc::access::Rows] {
        &[]
    }

    fn start<'a>(&'a self, cx: &'a mut Start<'_>) -> BoxFuture<'a, Result<(), StartError>> {
        Box::pin(async move {
            if self.needs.is_some() {
                let Token(from) = cx.need::<Token>()?;
                assert_eq!(Some(from), self.needs);
            }
            if self.fails {
                return Err(cx.failed(std::io::Error::other("told to fail")));
            }
            let (log, name) = (self.log.clone(), self.name);
            log.lock().unwrap().push(format!("start {name}"));
            let mut stop = cx.stop_signal();
            let ended = log.clone();
            cx.spawn("task", async move {
                let _ = stop.changed().await;
                ended.lock().unwrap().push(format!("task {name}"));
            });
            let stopped = log.clone();
            cx.on_stop(move || async move { stopped.lock().unwrap().push(format!("stop {name}")) });
            for _ in 0..self.routes {
                let router = cx.router();
                let ready = router.ready.expect("a ready sender");
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    let _ = ready.send("subscribed");
                });
            }
            cx.provide(Token(name));
            Ok(())
        })
    }
}

fn fake(name: &'static str, needs: Option<&'static str>, log: &Log) -> Box<dyn Family> {
    Box::new(Fake {
        name,
        needs,
        fails: false,
        routes: 0,
        log: log.clone(),
    })
}

async fn families(list: Vec<Box<dyn Family>>) -> Families {
    let (_, health) = tonic_health::server::health_reporter();
    Families::new(
        list,
        flotilla_hub_core::grpc::api::Api::new(health).unwrap(),
    )
    .0
}

/// A real hub on a real server, for the parts every family is built from.
async fn hub() -> (flotilla_testkit::NatsServer, crate::Hub) {
    let nats = flotilla_testkit::NatsServer::start();
    let mut config = crate::Config::new(&nats.url());
    config.grpc_listen = "127.0.0.1:0".parse().unwrap();
    config.metrics_listen = "127.0.0.1:0".parse().unwrap();
    config.limits.stream.max_bytes = flotilla_testkit::STATUS_STREAM_MAX_BYTES;
    let hub = crate::start(config).await.expect("the hub starts");
    (nats, hub)
}

#[tokio::test]
async fn the_hubs_list_serves_every_family_and_takes_three_report_kinds() {
    let config = crate::Config::new("nats://127.0.0.1:4222");
    let list = crate::controllers::families(&config);
    let mut kinds: Vec<_> = Families::report_kinds(&list)
        .iter()
        .map(|k| k.name)
        .collect();
    kinds.sort_unstable();
    assert_eq!(kinds, ["msa", "policy", "score"]);
    let families = families(list).await;
    let names = families.names();
    let mut unique = names.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(
        unique.len(),
        names.len(),
        "family names are unique: {names:?}"
    );
    for service in [
        "ClusterSetService",
        "PlacementService",
        "ReplicaSetService",
        "AddOnService",
        "PolicyService",
        "ServiceAccountService",
        "ImportPolicyService",
        "MirrorPeerService",
    ] {
        assert!(
            families.serves(&format!("/flotilla.v1.{service}/Apply")),
            "{service} is the controllers'"
        );
    }
    for not in [
        "/flotilla.v1.ClusterService/Get",
        "/flotilla.v1.WorkService/Apply",
        "/grpc.health.v1.Health/Check",
    ] {
        assert!(!families.serves(not), "{not} is not the controllers'");
    }
}

#[tokio::test]
async fn families_start_in_order_and_stop_in_reverse_with_their_tasks() {
    let (_nats, hub) = hub().await;
    let log = Log::default();
    let list = families(vec![
        fake("sets", None, &log),
        fake("placements", Some("sets"), &log),
        fake("addons", Some("placements"), &log),
    ])
    .await;
    let deps = hub.units.controller_deps();
    let running = Controllers::start(&list, deps, Fence::unlimited(0))
        .await
        .unwrap();
    assert_eq!(running.get::<Token>(), Token("addons"));
    assert_eq!(running.try_get::<Other>(), None);
    running.stop().await;
    let log = log.lock().unwrap().clone();
    assert_eq!(
        log[..6],
        [
            "start sets",
            "start placements",
            "start addons",
            "stop addons",
            "stop placements",
            "stop sets",
        ]
    );
    let mut tasks = log[6..].to_vec();
    tasks.sort();
    assert_eq!(tasks, ["task addons", "task placements", "task sets"]);
    hub.stop().await;
}

#[tokio::test]
async fn a_family_started_before_what_it_needs_fails_naming_itself_and_stops_the_others() {
    let (_nats, hub) = hub().await;
    let log = Log::default();
    let list = families(vec![
        fake("sets", None, &log),
        Box::new(Fake {
            name: "late",
            needs: None,
            fails: true,
            routes: 0,
            log: log.clone(),
        }),
    ])
    .await;
    let deps = hub.units.controller_deps();
    let err = Controllers::start(&list, deps, Fence::unlimited(0))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("late"), "{err}");
    let log_now = log.lock().unwrap().clone();
    assert!(log_now.contains(&"stop sets".to_string()), "{log_now:?}");
    assert!(log_now.contains(&"task sets".to_string()), "{log_now:?}");

    // Needing a handle no earlier family provides: an error naming the family and the type.
    let list = families(vec![fake("placements", Some("sets"), &log)]).await;
    let err = Controllers::start(&list, deps, Fence::unlimited(0))
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("placements") && text.contains("Token"),
        "{text}"
    );
    hub.stop().await;
}

#[tokio::test]
async fn the_controllers_serve_only_once_every_route_handed_out_is_subscribed() {
    let (_nats, hub) = hub().await;
    let log = Log::default();
    let list = families(vec![Box::new(Fake {
        name: "routed",
        needs: None,
        fails: false,
        routes: 4,
        log: log.clone(),
    })])
    .await;
    let deps = hub.units.controller_deps();
    let started = std::time::Instant::now();
    let running = Controllers::start(&list, deps, Fence::unlimited(0))
        .await
        .unwrap();
    // Each of the four routes says so after 100 ms: all four are waited for.
    assert!(started.elapsed() >= Duration::from_millis(100));
    assert!(started.elapsed() < Duration::from_secs(10));
    running.stop().await;
    hub.stop().await;
}

/// The families' flags flatten into one command without clashing (clap checks names and
/// groups: five structs named `Flags` once made the binary panic at start), keep their
/// defaults, and report every problem.
#[test]
fn the_families_flags_flatten_into_one_command_with_their_defaults_and_checks() {
    use clap::{CommandFactory, Parser};
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        families: crate::controllers::Flags,
    }
    Cli::command().debug_assert();
    let mut errors = Vec::new();
    let s = Cli::try_parse_from(["hub"])
        .unwrap()
        .families
        .settings(&mut errors);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(s.placement.debounce, Duration::from_millis(100));
    assert_eq!(s.placement.addon_resync, Duration::from_secs(300));
    assert_eq!(s.addons.lease_grace, Duration::from_secs(300));
    assert_eq!(
        s.import_policies.max_created,
        crate::importpolicy::DEFAULT_MAX_CREATED
    );
    let bad = [
        "hub",
        "--placement-debounce-ms",
        "70000",
        "--placement-addon-resync-seconds",
        "0",
    ];
    Cli::try_parse_from(bad)
        .unwrap()
        .families
        .settings(&mut errors);
    assert_eq!(
        errors,
        [
            "--placement-debounce-ms: 70000 is above 60000",
            "--placement-addon-resync-seconds: must be at least 1"
        ]
    );
}
