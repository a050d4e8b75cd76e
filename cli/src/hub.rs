//! The connection to the hub's gRPC API, and what its failures say to the operator: one line
//! each, naming the hub when it cannot be reached.

use anyhow::{Context, Result, anyhow};
use flotilla_api::v1::add_on_service_client::AddOnServiceClient;
use flotilla_api::v1::cluster_service_client::ClusterServiceClient;
use flotilla_api::v1::cluster_set_service_client::ClusterSetServiceClient;
use flotilla_api::v1::placement_service_client::PlacementServiceClient;
use flotilla_api::v1::work_service_client::WorkServiceClient;
use std::error::Error as _;
use std::future::Future;
use std::time::Duration;
use tonic::metadata::AsciiMetadataValue;
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
use tonic::{Code, Request, Response, Status};

/// How long connecting to the hub may take before the CLI gives up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest placement message: a placement over 100,000 clusters has 1,000 decision pages. Lists
/// of ManagedClusterAddOns (one per cluster) are bounded the same way.
const MAX_PLACEMENT_MESSAGE: usize = 64 * 1024 * 1024;
/// Largest work message: works carry up to 500 KiB of manifests; the largest event plus
/// headroom.
const MAX_WORK_MESSAGE: usize = 16 * 1024 * 1024;

/// How the CLI proves who it is and checks the hub (`--token`, `--ca`).
#[derive(Debug, Clone, Default)]
pub struct Credentials {
    /// Bearer token (`FLOTILLA_TOKEN`). Never printed.
    pub token: Option<String>,
    /// CA bundle (PEM) to verify an `https://` hub (`FLOTILLA_CA`); the system's roots otherwise.
    pub ca: Option<std::path::PathBuf>,
}

/// Adds the bearer token to every call.
#[derive(Clone)]
pub struct Bearer(Option<AsciiMetadataValue>);

impl Interceptor for Bearer {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if let Some(value) = &self.0 {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        Ok(request)
    }
}

/// The channel every client uses: the connection plus the bearer token.
pub type HubChannel = InterceptedService<Channel, Bearer>;

/// A connected hub: one channel shared by the clients of every service.
pub struct Hub {
    endpoint: String,
    channel: Channel,
    bearer: Bearer,
}

impl Hub {
    /// Connects to the hub's gRPC endpoint (`--hub`); `https://` endpoints use TLS.
    pub async fn connect(endpoint: &str, credentials: &Credentials) -> Result<Self> {
        let mut builder = Endpoint::from_shared(endpoint.to_string())
            .with_context(|| format!("--hub {endpoint:?} is not a valid URL"))?
            .connect_timeout(CONNECT_TIMEOUT);
        if endpoint.starts_with("https://") {
            let mut tls = ClientTlsConfig::new();
            if let Some(ca) = &credentials.ca {
                let pem = std::fs::read(ca).with_context(|| format!("--ca {}", ca.display()))?;
                tls = tls.ca_certificate(Certificate::from_pem(pem));
            }
            builder = builder
                .tls_config(tls)
                .with_context(|| format!("TLS for {endpoint}"))?;
        }
        let bearer = match &credentials.token {
            Some(t) => Some(
                format!("Bearer {t}")
                    .parse::<AsciiMetadataValue>()
                    .map_err(|_| anyhow!("--token: a token is printable ASCII"))?,
            ),
            None => None,
        };
        let channel = builder
            .connect()
            .await
            .map_err(|e| unreachable(endpoint, &e))?;
        Ok(Self {
            endpoint: endpoint.to_string(),
            channel,
            bearer: Bearer(bearer),
        })
    }

    fn channel(&self) -> HubChannel {
        InterceptedService::new(self.channel.clone(), self.bearer.clone())
    }

    /// The endpoint as given (`--hub`).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// ManagedClusters.
    pub fn clusters(&self) -> ClusterServiceClient<HubChannel> {
        ClusterServiceClient::new(self.channel())
    }

    /// ManagedClusterSets and their bindings.
    pub fn sets(&self) -> ClusterSetServiceClient<HubChannel> {
        ClusterSetServiceClient::new(self.channel())
    }

    /// Placements, their decisions, and AddOnPlacementScores.
    pub fn placements(&self) -> PlacementServiceClient<HubChannel> {
        PlacementServiceClient::new(self.channel()).max_decoding_message_size(MAX_PLACEMENT_MESSAGE)
    }

    /// ManifestWorkReplicaSets.
    pub fn replica_sets(
        &self,
    ) -> flotilla_api::v1::replica_set_service_client::ReplicaSetServiceClient<HubChannel> {
        flotilla_api::v1::replica_set_service_client::ReplicaSetServiceClient::new(self.channel())
            .max_decoding_message_size(MAX_WORK_MESSAGE)
            .max_encoding_message_size(MAX_WORK_MESSAGE)
    }

    /// Add-ons: ClusterManagementAddOns, ManagedClusterAddOns, AddOnTemplates and
    /// AddOnDeploymentConfigs, and enabling/disabling add-ons. Templates carry a work's
    /// manifests; a list of ManagedClusterAddOns spans the fleet.
    pub fn addons(&self) -> AddOnServiceClient<HubChannel> {
        AddOnServiceClient::new(self.channel())
            .max_decoding_message_size(MAX_PLACEMENT_MESSAGE)
            .max_encoding_message_size(MAX_WORK_MESSAGE)
    }

    /// ManifestWorks and the read-only proxy to spokes.
    pub fn works(&self) -> WorkServiceClient<HubChannel> {
        WorkServiceClient::new(self.channel())
            .max_decoding_message_size(MAX_WORK_MESSAGE)
            .max_encoding_message_size(MAX_WORK_MESSAGE)
    }

    /// Awaits one call to the hub: its answer, or the failure as [`Hub::error`] words it.
    pub async fn call<T>(
        &self,
        call: impl Future<Output = Result<Response<T>, Status>>,
    ) -> Result<T> {
        call.await
            .map(Response::into_inner)
            .map_err(|status| self.error(status))
    }

    /// A failed call as one line for the operator: what the hub refused and why, or that the
    /// hub could not be reached.
    pub fn error(&self, status: Status) -> anyhow::Error {
        failure(&self.endpoint, status)
    }
}

/// Words a failed call. A status with a source was made on this side from a transport failure
/// (the hub said nothing); one without came from the hub, and its code says what kind of
/// refusal it is.
fn failure(endpoint: &str, status: Status) -> anyhow::Error {
    if status.source().is_some() {
        return unreachable(endpoint, &status);
    }
    let what = match status.code() {
        Code::InvalidArgument => "invalid",
        Code::NotFound => "not found",
        Code::Aborted => "conflict",
        Code::FailedPrecondition => "refused",
        Code::Unavailable => "unavailable",
        Code::PermissionDenied | Code::Unauthenticated => "forbidden",
        Code::AlreadyExists => "already exists",
        Code::ResourceExhausted => "resource exhausted",
        Code::DeadlineExceeded => "deadline exceeded",
        Code::Cancelled => "cancelled",
        Code::OutOfRange => "out of range",
        Code::Unimplemented => "unimplemented",
        Code::Internal => "internal",
        Code::DataLoss => "data loss",
        Code::Ok | Code::Unknown => "unknown",
    };
    anyhow!("{what}: {}", status.message())
}

/// "cannot reach the hub at ENDPOINT: CAUSE". Transport errors wrap one failure several times
/// ("transport error: tcp connect error: tcp connect error: Connection refused"); only the
/// innermost says what happened, so only it is shown.
fn unreachable(endpoint: &str, error: &(dyn std::error::Error + 'static)) -> anyhow::Error {
    let mut cause = error;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    anyhow!(
        "cannot reach the hub at {endpoint}: {cause}; is flotilla-hub running? (set --hub or FLOTILLA_HUB)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_from_the_hub_is_worded_by_its_code() {
        let e = failure(
            "http://hub:50051",
            Status::not_found("cluster \"c9\" not found"),
        );
        assert_eq!(e.to_string(), "not found: cluster \"c9\" not found");
        let e = failure("http://hub:50051", Status::unknown("boom"));
        assert_eq!(e.to_string(), "unknown: boom");
    }

    #[test]
    fn a_transport_failure_names_the_hub_and_the_innermost_cause_once() {
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let status = Status::from_error(Box::new(refused));
        let e = failure("http://127.0.0.1:1", status);
        let text = format!("error: {e:#}");
        assert!(
            text.starts_with("error: cannot reach the hub at http://127.0.0.1:1: refused;"),
            "{text}"
        );
        assert_eq!(text.matches("error").count(), 1, "{text}");
    }
}
