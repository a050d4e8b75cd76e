//! Who may write what through the API, on a real hub with a token file (`--api-token-file`) of an
//! admin, a deployer and a read-only identity: the access table holds for every write method,
//! a deployer replaces only works whose stored executor it is granted, and no work applied
//! through the API carries the labels and annotations reserved for the hub's add-on works.
//!
//! The cluster is created ahead of its agent (`ApplyCluster`): these are decisions of the API,
//! and the works need not reach a spoke.

use crate::common;

use common::tokens::*;
use common::work::work;
use common::*;
use flotilla_api::v1::cluster_service_client::ClusterServiceClient;
use flotilla_api::v1::work_service_client::WorkServiceClient;
use flotilla_api::v1::{
    DeleteWorkRequest, GetWorkRequest, ManagedCluster, ManifestWork, ObjectMeta,
};
use flotilla_hub::grpc::access::Access;
use flotilla_testkit::NatsServer;
use tonic::Code;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::metadata::MetadataValue;
use tonic::transport::Channel;

const CLUSTER: &str = "cluster1";

/// A hub with the token file, its API channel, and `cluster1` created by the admin.
async fn hub_with_cluster(nats: &NatsServer) -> (flotilla_hub::Hub, Channel) {
    let (hub, channel) = hub_with_tokens(nats).await;
    ClusterServiceClient::with_interceptor(channel.clone(), Bearer(ADMIN))
        .apply_cluster(ManagedCluster {
            metadata: Some(ObjectMeta {
                name: CLUSTER.into(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .expect("the admin creates cluster1 ahead of its agent");
    (hub, channel)
}

/// A work `name` on cluster1 with one ConfigMap holding `version`, run as the executor
/// `namespace/name` (`None`: the agent's own identity).
fn config_work(name: &str, executor: Option<(&str, &str)>, version: &str) -> ManifestWork {
    let executor = executor
        .map(|(ns, sa)| {
            format!(
                "  executor:\n    subject:\n      type: ServiceAccount\n      serviceAccount:\n        \
                 namespace: {ns}\n        name: {sa}\n"
            )
        })
        .unwrap_or_default();
    work(&format!(
        "apiVersion: work.open-cluster-management.io/v1
kind: ManifestWork
metadata:
  namespace: {CLUSTER}
  name: {name}
spec:
{executor}  workload:
    manifests:
      - apiVersion: v1
        kind: ConfigMap
        metadata:
          namespace: default
          name: {name}
        data:
          version: \"{version}\"
"
    ))
}

async fn stored(api: &mut WorkServiceClient<Authed>, name: &str) -> Option<ManifestWork> {
    match api
        .get_work(GetWorkRequest {
            cluster: CLUSTER.into(),
            name: name.into(),
        })
        .await
    {
        Ok(w) => Some(w.into_inner()),
        Err(e) if e.code() == Code::NotFound => None,
        Err(e) => panic!("get work {name}: {e}"),
    }
}

fn executor_of(w: &ManifestWork) -> Option<String> {
    flotilla_api::work::Executor::of_work(w).map(|e| e.username())
}

fn assert_mentions(status: &tonic::Status, needles: &[&str]) {
    for needle in needles {
        assert!(
            status.message().contains(needle),
            "{needle:?} missing from: {}",
            status.message()
        );
    }
}

#[tokio::test]
async fn a_deployer_replaces_only_works_whose_stored_executor_it_is_granted() {
    let nats = NatsServer::start();
    let (hub, channel) = hub_with_cluster(&nats).await;
    let mut admin = works_as(&channel, ADMIN);
    let mut deployer = works_as(&channel, DEPLOYER);

    // The admin's works: one run as a ServiceAccount the deployer is not granted, one with the
    // agent's own identity.
    let root = admin
        .apply_work(config_work("ops-work", Some(("kube-system", "root")), "1"))
        .await
        .expect("an admin acts as any executor")
        .into_inner();
    let agents = admin
        .apply_work(config_work("agent-work", None, "1"))
        .await
        .expect("an admin may use the agent's identity")
        .into_inner();

    // Overwriting either with an executor the deployer is granted would have the agent remove
    // the old work's resources as the old executor: refused, naming the caller, the work and
    // the stored executor, and the stored work is unchanged.
    for (held, stored_executor) in [
        (&root, "system:serviceaccount:kube-system:root"),
        (&agents, "the agent's own identity"),
    ] {
        let name = held.metadata.as_ref().unwrap().name.clone();
        let err = deployer
            .apply_work(config_work(&name, Some(("default", "executor1")), "2"))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::PermissionDenied, "{}", err.message());
        assert_mentions(
            &err,
            &[
                "ci (deployer)",
                &format!("ManifestWork {CLUSTER}/{name}"),
                "replace",
                stored_executor,
            ],
        );
        let now = stored(&mut admin, &name).await.expect("still stored");
        assert_eq!(now.metadata, held.metadata, "{name} changed");
        assert_eq!(now.spec, held.spec, "{name} changed");
    }
    // Deleting is refused the same way.
    let err = deployer
        .delete_work(DeleteWorkRequest {
            cluster: CLUSTER.into(),
            name: "ops-work".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied);
    assert_mentions(
        &err,
        &[
            "ci (deployer)",
            "delete",
            "system:serviceaccount:kube-system:root",
        ],
    );

    // Its own work it may replace, with any executor it is granted.
    let own = deployer
        .apply_work(config_work("team-work", Some(("team-a", "builder")), "1"))
        .await
        .expect("team-a/* covers team-a/builder")
        .into_inner();
    let replaced = deployer
        .apply_work(config_work(
            "team-work",
            Some(("default", "executor1")),
            "2",
        ))
        .await
        .expect("a deployer replaces a work whose stored executor it is granted")
        .into_inner();
    assert_eq!(
        executor_of(&replaced).as_deref(),
        Some("system:serviceaccount:default:executor1")
    );
    let (before, after) = (own.metadata.unwrap(), replaced.metadata.unwrap());
    assert_eq!(after.uid, before.uid);
    assert_eq!(after.generation, before.generation + 1);
    // Applying the same document again is still a no-op, not a conflict.
    let again = deployer
        .apply_work(config_work(
            "team-work",
            Some(("default", "executor1")),
            "2",
        ))
        .await
        .expect("an unchanged apply succeeds")
        .into_inner();
    assert_eq!(again.metadata.unwrap().generation, after.generation);
    hub.stop().await;
}

#[tokio::test]
async fn user_works_carrying_a_key_reserved_for_add_on_works_are_refused_and_not_stored() {
    let nats = NatsServer::start();
    let (hub, channel) = hub_with_cluster(&nats).await;
    // Not a matter of role: the admin is refused too.
    let mut admin = works_as(&channel, ADMIN);
    for key in flotilla_api::addon::RESERVED_WORK_KEYS {
        for field in ["labels", "annotations"] {
            let mut w = config_work("sneaky", Some(("default", "executor1")), "1");
            let meta = w.metadata.as_mut().unwrap();
            let map = if field == "labels" {
                &mut meta.labels
            } else {
                &mut meta.annotations
            };
            map.insert(key.into(), "fleet-metrics".into());
            let err = admin.apply_work(w).await.unwrap_err();
            assert_eq!(err.code(), Code::InvalidArgument, "{field} {key}");
            assert_eq!(
                err.message(),
                format!(
                    "metadata.{field}[\"{key}\"] is reserved for works the hub renders for add-ons"
                )
            );
            assert_eq!(stored(&mut admin, "sneaky").await, None, "{field} {key}");
        }
    }
    // A deployer cannot slip one onto a work of its own either.
    let mut deployer = works_as(&channel, DEPLOYER);
    deployer
        .apply_work(config_work("own", Some(("default", "executor1")), "1"))
        .await
        .expect("an ordinary work");
    let mut w = config_work("own", Some(("default", "executor1")), "1");
    w.metadata.as_mut().unwrap().annotations.insert(
        flotilla_api::addon::HUB_CREDENTIALS_SECRET_ANNOTATION.into(),
        "fleet-metrics-hub-credentials".into(),
    );
    let err = deployer.apply_work(w).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert_mentions(
        &err,
        &[flotilla_api::addon::HUB_CREDENTIALS_SECRET_ANNOTATION],
    );
    let held = stored(&mut admin, "own").await.unwrap();
    assert!(held.metadata.unwrap().annotations.is_empty());
    hub.stop().await;
}

/// Sends an empty message (every field at its default) to any method and reads any answer as
/// nothing: enough to see whether a call gets past authorization.
#[derive(Clone, Copy)]
struct Empty;

impl Codec for Empty {
    type Encode = ();
    type Decode = ();
    type Encoder = Empty;
    type Decoder = Empty;

    fn encoder(&mut self) -> Empty {
        Empty
    }

    fn decoder(&mut self) -> Empty {
        Empty
    }
}

impl Encoder for Empty {
    type Item = ();
    type Error = tonic::Status;

    fn encode(&mut self, _: (), _: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        Ok(())
    }
}

impl Decoder for Empty {
    type Item = ();
    type Error = tonic::Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<()>, tonic::Status> {
        use bytes::Buf;
        src.advance(src.remaining());
        Ok(Some(()))
    }
}

/// Calls `path` with an empty message as `token`.
async fn call(channel: &Channel, token: &str, path: &str) -> Result<(), tonic::Status> {
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready().await.expect("the channel is ready");
    let mut req = tonic::Request::new(());
    let value: MetadataValue<_> = format!("Bearer {token}").parse().unwrap();
    req.metadata_mut().insert("authorization", value);
    let path = http::uri::PathAndQuery::try_from(path).unwrap();
    tokio::time::timeout(SOON, grpc.unary(req, path, Empty))
        .await
        .expect("an answer in time")
        .map(|_| ())
}

#[tokio::test]
async fn a_read_only_token_is_refused_every_write_rpc_in_the_table() {
    let nats = NatsServer::start();
    let (hub, channel) = hub_with_cluster(&nats).await;
    // The hub's table: the core's rows and every family's.
    let table = flotilla_hub::controllers::access(&flotilla_hub::Config::new(&nats.url()))
        .expect("the hub's access table");
    let writes: Vec<(String, Access)> = table
        .methods()
        .filter(|(_, a, _)| matches!(a, Access::Write | Access::WriteWork))
        .map(|(path, a, _)| (path.to_string(), a))
        .collect();
    for (expected, need) in [
        ("/flotilla.v1.WorkService/ApplyWork", Access::WriteWork),
        ("/flotilla.v1.ClusterService/CreateJoinToken", Access::Write),
        ("/flotilla.v1.AddOnService/EnableAddOn", Access::Write),
    ] {
        assert!(
            writes.contains(&(expected.to_string(), need)),
            "{expected} missing from {writes:?}"
        );
    }
    for (path, need) in &writes {
        let err = call(&channel, VIEWER, path).await.unwrap_err();
        assert_eq!(err.code(), Code::PermissionDenied, "{path}: {err}");
        assert_mentions(&err, &["bob (read-only) may not call", path]);
        // A deployer is refused every admin-only one, and reaches the work service's own
        // checks for the rest (an empty work is invalid there, not forbidden).
        let by_deployer = call(&channel, DEPLOYER, path).await;
        match need {
            Access::Write => {
                let err = by_deployer.unwrap_err();
                assert_eq!(err.code(), Code::PermissionDenied, "{path}");
                assert_mentions(&err, &["ci (deployer) may not call"]);
            }
            // A stream of works answers each work on its own (the empty one refused in its
            // answer, tests/apply_works.rs): the call itself is let through.
            _ if path.ends_with("/ApplyWorks") => {
                assert!(by_deployer.is_ok(), "{path}: {by_deployer:?}")
            }
            _ => assert_eq!(
                by_deployer.unwrap_err().code(),
                Code::InvalidArgument,
                "{path}"
            ),
        }
    }
    // Nothing was written: the read-only token still reads, and sees no work.
    let listed = works_as(&channel, VIEWER)
        .list_works(flotilla_api::v1::ListWorksRequest::default())
        .await
        .expect("read-only reads")
        .into_inner();
    assert!(listed.items.is_empty(), "{:?}", listed.items);
    hub.stop().await;
}
