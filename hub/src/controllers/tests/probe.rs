//! A family added through a list alone: its folder would hold this file's `ProbeFamily` and
//! its service; nothing else names it — no row in the core's access table, no field in the
//! hub's configuration — and it is served, behind its slot, with its access decided.

use super::hub;
use crate::controller::{Controllers, Families, Recipe, Served, Start, StartError};
use crate::grpc::access::Access::{Read, Write};
use crate::grpc::access::Rows;
use crate::grpc::access::need::*;
use crate::grpc::auth::{Authenticate, Tokens};
use flotilla_hub_core::ha::Fence;
use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};
use tonic::Code;
use tower::{Layer, Service};

/// A gRPC service of two methods that answers `NOT_FOUND` naming the method it was reached at.
#[derive(Clone)]
struct Probe;

impl tonic::server::NamedService for Probe {
    const NAME: &'static str = "flotilla.test.Probe";
}

impl Service<http::Request<tonic::body::Body>> for Probe {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        let reached = format!("the probe at {}", req.uri().path());
        std::future::ready(Ok(tonic::Status::not_found(reached).into_http()))
    }
}

/// A handle the probe family provides.
#[derive(Clone)]
struct Probed;

/// The family: one service, `Look` for anyone, `Poke` for admins.
struct ProbeFamily;

impl Recipe for ProbeFamily {
    const NAME: &'static str = "probes";
    const ACCESS: &'static [Rows] = &[(
        "flotilla.test.Probe",
        &[("Look", Read, FILTERED), ("Poke", Write, FLEET_WRITE)],
    )];
    type Settings = ();
    type Services = (Probe,);

    async fn start(_: &(), cx: &mut Start<'_>) -> Result<Self::Services, StartError> {
        cx.provide(Probed);
        Ok((Probe,))
    }
}

const TOKENS: &str = "0123456789abcdef-admin,alice,admin\n0123456789abcdef-view,bob,read-only\n";
const ADMIN: &str = "0123456789abcdef-admin";
const VIEWER: &str = "0123456789abcdef-view";

/// The answer's code to a call of `path` as `token` (`Ok` for none).
async fn call<S>(api: &mut S, token: &str, path: &str) -> (Code, String)
where
    S: Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
            Error = Infallible,
        >,
{
    let req = http::Request::builder()
        .method("POST")
        .uri(format!("http://hub{path}"))
        .header("content-type", "application/grpc")
        .header("authorization", format!("Bearer {token}"))
        .body(tonic::body::Body::empty())
        .unwrap();
    std::future::poll_fn(|cx| api.poll_ready(cx)).await.unwrap();
    let answer = tokio::time::timeout(std::time::Duration::from_secs(5), api.call(req))
        .await
        .expect("an answer in time")
        .unwrap();
    tonic::Status::from_header_map(answer.headers()).map_or((Code::Ok, String::new()), |s| {
        (s.code(), s.message().to_string())
    })
}

#[tokio::test]
async fn a_family_added_to_the_list_alone_is_served_with_its_access_decided() {
    // Beside the hub's own families: its rows join the table, none clashing.
    let mut hubs = crate::controllers::families(&crate::Config::new("nats://127.0.0.1:4222"));
    hubs.push(Served::<ProbeFamily>::boxed(()));
    let table = Families::access(&hubs).expect("no method declared twice");
    assert_eq!(table.lookup("/flotilla.test.Probe/Look"), Some(Read));
    assert_eq!(table.lookup("/flotilla.test.Probe/Poke"), Some(Write));

    // Served by a hub's API from its list, behind the API's tokens deciding by that table.
    let (_nats, hub) = hub().await;
    let list = vec![Served::<ProbeFamily>::boxed(())];
    let table = Arc::new(Families::access(&list).unwrap());
    let (reporter, health) = tonic_health::server::health_reporter();
    let (families, api) = Families::new(list, crate::grpc::api::Api::new(health).unwrap());
    assert!(families.serves("/flotilla.test.Probe/Look"));
    let routes = api.serving(&reporter).await;
    let tokens = Tokens::parse("tokens.csv", TOKENS)
        .unwrap()
        .with_access(table);
    let mut api = Authenticate::new(Some(tokens)).layer(routes.prepare());

    // Before the family runs here, its slot is empty.
    let (code, _) = call(&mut api, VIEWER, "/flotilla.test.Probe/Look").await;
    assert_eq!(code, Code::Unavailable);

    let running = Controllers::start(&families, hub.units.controller_deps(), Fence::unlimited(0))
        .await
        .unwrap();
    assert!(running.try_get::<Probed>().is_some());
    let (code, why) = call(&mut api, VIEWER, "/flotilla.test.Probe/Look").await;
    assert_eq!(
        (code, why.as_str()),
        (Code::NotFound, "the probe at /flotilla.test.Probe/Look")
    );
    let (code, why) = call(&mut api, VIEWER, "/flotilla.test.Probe/Poke").await;
    assert_eq!(code, Code::PermissionDenied, "{why}");
    assert!(why.contains("bob (read-only) may not call"), "{why}");
    let (code, _) = call(&mut api, ADMIN, "/flotilla.test.Probe/Poke").await;
    assert_eq!(code, Code::NotFound, "an admin reaches it");
    // A method its rows do not name is admin-only.
    let (code, _) = call(&mut api, VIEWER, "/flotilla.test.Probe/Peek").await;
    assert_eq!(code, Code::PermissionDenied);

    running.stop().await;
    let (code, _) = call(&mut api, VIEWER, "/flotilla.test.Probe/Look").await;
    assert_eq!(code, Code::Unavailable, "stopped: its slot is emptied");
    hub.stop().await;
}

#[test]
fn a_family_declaring_a_method_another_part_declares_is_refused() {
    struct Sneaky;
    impl Recipe for Sneaky {
        const NAME: &'static str = "sneaky";
        const ACCESS: &'static [Rows] = &[("flotilla.v1.WorkService", &[("Proxy", Read, ANY)])];
        type Settings = ();
        type Services = ();

        async fn start(_: &(), _: &mut Start<'_>) -> Result<(), StartError> {
            Ok(())
        }
    }
    let mut list = crate::controllers::families(&crate::Config::new("nats://127.0.0.1:4222"));
    list.push(Served::<Sneaky>::boxed(()));
    let twice = Families::access(&list).unwrap_err();
    assert_eq!(
        (twice.path.as_str(), twice.first, twice.second),
        ("/flotilla.v1.WorkService/Proxy", "core", "sneaky")
    );
}
