//! MirrorPeers as a controller family: their one task, and the peers' requests
//! (`flotilla.peers.<cluster>`); provides [`MirrorPeers`]. Its settings come from its [`Flags`].
//!
//! Who may call its service ([`Recipe::ACCESS`]; a unit test holds this table equal to it):
//!
//! | Service | Open (no token) | Read (any identity) | WriteWork (admin, deployer) | Write (admin) |
//! |---|---|---|---|---|
//! | `flotilla.v1.MirrorPeerService` | | `GetMirrorPeer`, `ListMirrorPeers` | | `ApplyMirrorPeer`, `DeleteMirrorPeer` |

use super::{Buckets, Deps, MirrorPeerConfig, MirrorPeers};
use crate::controller::positive_rate;
use crate::controller::{Recipe, Start, StartError};
use crate::grpc::access::Access::{Read, Write};
use crate::grpc::access::Rows;
use crate::grpc::access::need::*;
use crate::mirrorpeer::grpc::MirrorPeerApi;
use flotilla_api::v1::mirror_peer_service_server::MirrorPeerServiceServer;

/// The family.
pub struct PeerFamily;

impl Recipe for PeerFamily {
    const NAME: &'static str = "mirrorpeers";
    const ACCESS: &'static [Rows] = &[(
        "flotilla.v1.MirrorPeerService",
        &[
            ("ApplyMirrorPeer", Write, FLEET_WRITE),
            ("GetMirrorPeer", Read, FLEET_READ),
            ("ListMirrorPeers", Read, FLEET_READ),
            ("DeleteMirrorPeer", Write, FLEET_WRITE),
        ],
    )];
    type Settings = MirrorPeerConfig;
    type Services = (MirrorPeerServiceServer<MirrorPeerApi>,);

    async fn start(
        config: &MirrorPeerConfig,
        cx: &mut Start<'_>,
    ) -> Result<Self::Services, StartError> {
        let buckets = Buckets::open(cx).await?;
        let d = cx.deps();
        let deps = Deps {
            inventory: d.inventory.clone(),
            publisher: d.clusters.shared().publisher.clone(),
            config: config.clone(),
            secure: d.security.is_some(),
        };
        let (peers, task) = MirrorPeers::spawn(buckets, deps, cx.stop_signal())
            .await
            .map_err(|e| cx.failed(e))?;
        cx.adopt(task);
        let route = super::route::Deps {
            inventory: cx.deps().inventory.clone(),
            metrics: cx.deps().metrics.clone(),
            router: cx.router(),
            limits: config.requests,
        };
        let requests = super::route::run(
            cx.deps().nats.clone(),
            peers.clone(),
            route,
            cx.stop_signal(),
        );
        cx.spawn("requests", requests);
        cx.provide(peers.clone());
        Ok((MirrorPeerServiceServer::new(MirrorPeerApi::new(peers)),))
    }
}

/// The family's flags (flattened into the `flotilla-hub` binary's through
/// [`crate::controllers::Flags`]).
#[derive(clap::Args, Debug, Clone)]
#[group(skip)]
pub struct Flags {
    /// Serve MirrorPeers although the hub is not in secure mode (--secure-dir). Without secure
    /// mode any NATS client can present a curve key under a cluster's name and be sent its
    /// peers' Secrets, so applying a MirrorPeer is refused unless this is given; with it, each
    /// MirrorPeer's status carries PeerKeysAuthenticated=False. For demos and tests only.
    #[arg(long, env = "FLOTILLA_ALLOW_INSECURE_MIRRORPEERS")]
    allow_insecure_mirrorpeers: bool,
    /// MirrorPeer requests (`flotilla.peers.<cluster>`) one cluster may make per second,
    /// sustained; past it (and its burst) the cluster is told to ask again later.
    #[arg(
        long,
        env = "FLOTILLA_MIRRORPEER_REQUEST_RATE",
        default_value_t = super::rules::limit::DEFAULT_PER_SECOND,
        value_parser = positive_rate
    )]
    mirrorpeer_request_rate: f64,
    /// MirrorPeer requests one cluster may make at once (an agent's round asks up to 8 times).
    #[arg(
        long,
        env = "FLOTILLA_MIRRORPEER_REQUEST_BURST",
        default_value_t = super::rules::limit::DEFAULT_BURST,
        value_parser = clap::value_parser!(u32).range(1..=100_000)
    )]
    mirrorpeer_request_burst: u32,
}

impl Flags {
    /// The settings they give.
    pub fn settings(&self, _errors: &mut Vec<String>) -> MirrorPeerConfig {
        let mut config = MirrorPeerConfig {
            allow_insecure: self.allow_insecure_mirrorpeers,
            ..MirrorPeerConfig::default()
        };
        config.requests.per_second = self.mirrorpeer_request_rate;
        config.requests.burst = self.mirrorpeer_request_burst;
        config
    }
}
