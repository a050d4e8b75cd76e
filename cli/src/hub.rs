//! The connection to the hub's gRPC API, and what its failures say to the operator: one line
//! each, naming the hub when it cannot be reached.
//!
//! `--hub` may list several hubs of one control plane (comma-separated): [`Hub::connect`] uses
//! the first that can be reached and says it is serving, and names every hub tried when none
//! can.
//!
//! Before connecting, [`exposure`] decides what plain `http://` would expose: a bearer token is
//! never sent in the clear to a host other than this one (loopback) unless `--insecure` says so;
//! plain http without a token is allowed with a warning.
//!
//! A hub answers UNAVAILABLE when its store did not answer in time (a JetStream election after a
//! NATS node was lost) and says to retry: [`Hub::idempotent`] and [`Hub::delete`] retry such
//! answers with [`Backoff`] for at most `--retry-seconds`, saying each retry on stderr. Calls
//! that are not safe to repeat go through [`Hub::call`], once.

use anyhow::{Context, Result, anyhow, bail};
use flotilla_api::v1::add_on_service_client::AddOnServiceClient;
use flotilla_api::v1::cluster_service_client::ClusterServiceClient;
use flotilla_api::v1::cluster_set_service_client::ClusterSetServiceClient;
use flotilla_api::v1::placement_service_client::PlacementServiceClient;
use flotilla_api::v1::work_service_client::WorkServiceClient;
use std::error::Error as _;
use std::future::Future;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
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
/// How long an idempotent call the hub answers UNAVAILABLE is retried, from its first attempt
/// (`--retry-seconds`): longer than a JetStream election on a loaded machine.
pub const DEFAULT_RETRY_SECONDS: u64 = 60;
/// The wait before the first retry; each next wait doubles (0.5, 1, 2, 4 s…).
const FIRST_RETRY: Duration = Duration::from_millis(500);
/// The longest wait between two attempts, however long the budget.
const LONGEST_RETRY: Duration = Duration::from_secs(30);

/// How the CLI proves who it is and checks the hub (`--token`, `--ca`). `Debug` never shows the
/// token.
#[derive(Clone, Default)]
pub struct Credentials {
    /// Bearer token (`FLOTILLA_TOKEN`). Never printed.
    pub token: Option<String>,
    /// CA bundle (PEM) to verify an `https://` hub (`FLOTILLA_CA`); the system's roots otherwise.
    pub ca: Option<std::path::PathBuf>,
    /// Send the token over plain `http://` to a host that is not loopback (`--insecure`,
    /// `FLOTILLA_INSECURE`), with a warning; refused otherwise.
    pub insecure: bool,
    /// The exec credential plugin the token came from (`--exec-command`): run again, once,
    /// when the hub answers a call UNAUTHENTICATED (the token it printed may have expired).
    pub exec: Option<crate::exec_credential::ExecPlugin>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("ca", &self.ca)
            .field("insecure", &self.insecure)
            .field("exec", &self.exec.as_ref().map(|e| &e.command))
            .finish()
    }
}

/// What connecting to an endpoint exposes on the network, decided before connecting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exposure {
    /// Nothing: TLS (`https://`), or plain http to this host (loopback).
    Nothing,
    /// Plain http to another host: allowed, with this warning on stderr.
    Warn(String),
    /// The bearer token would cross the network in the clear: refused before connecting.
    Refuse(Cleartext),
}

/// The refusal to send a bearer token in the clear: plain `http://` to a host that is not
/// loopback, without `--insecure`. `main` exits 64 (bad configuration) on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cleartext {
    /// The `--hub` endpoint as given.
    pub endpoint: String,
    /// Its host.
    pub host: String,
}

impl std::fmt::Display for Cleartext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "refusing to send the bearer token in the clear to {} (--hub {}): use an https:// \
             hub with --ca (FLOTILLA_CA), or pass --insecure (FLOTILLA_INSECURE=true) to send it \
             over plain http anyway",
            self.host, self.endpoint
        )
    }
}

impl std::error::Error for Cleartext {}

/// Whether `host` (a URI's host: a name, an IPv4 address or a bracketed IPv6 address) is this
/// machine: `localhost`, 127.0.0.0/8, `::1` (also IPv4-mapped).
pub fn is_loopback(host: &str) -> bool {
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    if bare.eq_ignore_ascii_case("localhost") {
        return true;
    }
    match bare.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.to_canonical().is_loopback(),
        Err(_) => false,
    }
}

/// What connecting to `endpoint` exposes, with or without a bearer `token`, and `insecure`
/// (`--insecure`). Only `https://` is encrypted: any other scheme (or none) counts as plain. An
/// endpoint that does not parse is left to the connection to report.
pub fn exposure(endpoint: &str, token: bool, insecure: bool) -> Exposure {
    let Ok(uri) = endpoint.parse::<tonic::codegen::http::Uri>() else {
        return Exposure::Nothing;
    };
    if uri.scheme_str() == Some("https") {
        return Exposure::Nothing;
    }
    let host = uri.host().unwrap_or_default().to_string();
    if is_loopback(&host) {
        return Exposure::Nothing;
    }
    match (token, insecure) {
        (false, _) => Exposure::Warn(format!(
            "warning: the hub at {endpoint} is reached over plain http: anyone on the network \
             path can read and change the calls (use https:// with --ca)"
        )),
        (true, true) => Exposure::Warn(format!(
            "warning: --insecure: the bearer token goes in the clear to {host} over plain \
             http: anyone on the network path can read it and act as you"
        )),
        (true, false) => Exposure::Refuse(Cleartext {
            endpoint: endpoint.to_string(),
            host,
        }),
    }
}

/// Adds the bearer token to every call (shared: an exec plugin's new token reaches every
/// client made from the hub).
#[derive(Clone)]
pub struct Bearer(Arc<RwLock<Option<AsciiMetadataValue>>>);

impl Interceptor for Bearer {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        let value = self.0.read().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(value) = value {
            request.metadata_mut().insert("authorization", value);
        }
        Ok(request)
    }
}

/// `Bearer TOKEN` as a header value.
fn bearer_value(token: &str) -> Result<AsciiMetadataValue> {
    format!("Bearer {token}")
        .parse::<AsciiMetadataValue>()
        .map_err(|_| anyhow!("--token: a token is printable ASCII"))
}

/// The channel every client uses: the connection plus the bearer token.
pub type HubChannel = InterceptedService<Channel, Bearer>;

/// A connected hub: one channel shared by the clients of every service.
pub struct Hub {
    endpoint: String,
    channel: Channel,
    bearer: Bearer,
    /// How long an idempotent call answered UNAVAILABLE is retried (`--retry-seconds`).
    retry: Duration,
    /// The exec credential plugin to run again when a call is answered UNAUTHENTICATED.
    exec: Option<crate::exec_credential::ExecPlugin>,
}

/// The endpoints of a `--hub` list (`http://a:50051,http://b:50051`): split on commas,
/// trimmed, empty entries dropped.
pub fn endpoints(list: &str) -> Vec<&str> {
    list.split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .collect()
}

/// Why one hub of a list was passed over.
enum Skip {
    /// Not reachable (connect error, timeout).
    Unreachable(String),
    /// Reachable, but its health check says it cannot serve (UNAVAILABLE, NOT_SERVING).
    Unavailable(String),
}

impl Hub {
    /// Connects to the hub's gRPC endpoint (`--hub`); `https://` endpoints use TLS. A bearer
    /// token for plain http to a host that is not loopback is refused first, without
    /// connecting ([`Cleartext`]); other plain http off loopback is warned about on stderr.
    ///
    /// `--hub` may list several hubs of one control plane, comma-separated: they are tried in
    /// order, and a hub that cannot be reached or whose health check says it cannot serve
    /// (UNAVAILABLE, NOT_SERVING) is passed over for the next. Every entry is checked (URL,
    /// cleartext token) before any is contacted. When none can be used the error lists every
    /// hub tried and why.
    pub async fn connect(list: &str, credentials: &Credentials) -> Result<Self> {
        let list = endpoints(list);
        if list.is_empty() {
            bail!(
                "--hub is empty: give the hub's gRPC endpoint (http://127.0.0.1:50051), or \
                 several comma-separated (set --hub or FLOTILLA_HUB)"
            );
        }
        let mut planned = Vec::with_capacity(list.len());
        // A plugin's token is a token too: checked before the plugin runs (it may open a
        // browser sign-in), so nothing is asked for a hub the token would not be sent to.
        let sends_token = credentials.token.is_some() || credentials.exec.is_some();
        for endpoint in &list {
            let warning = match exposure(endpoint, sends_token, credentials.insecure) {
                Exposure::Nothing => None,
                Exposure::Warn(warning) => Some(warning),
                Exposure::Refuse(refusal) => return Err(refusal.into()),
            };
            planned.push((
                *endpoint,
                Self::endpoint_for(endpoint, credentials)?,
                warning,
            ));
        }
        // --token wins over the plugin, as a kubeconfig's token over its exec (client-go).
        let bearer = match (&credentials.token, &credentials.exec) {
            (Some(t), _) => Some(bearer_value(t)?),
            (None, Some(plugin)) => Some(bearer_value(&plugin.token().await?).map_err(|_| {
                anyhow!(
                    "exec: executable {} returned a token that is not printable ASCII",
                    plugin.command
                )
            })?),
            (None, None) => None,
        };
        let only = planned.len() == 1;
        let mut skipped = Vec::new();
        for (endpoint, builder, warning) in planned {
            if let Some(warning) = warning {
                eprintln!("{warning}");
            }
            let channel = match builder.connect().await {
                Ok(channel) => channel,
                // One hub: the error as it has always been worded.
                Err(e) if only => return Err(unreachable(endpoint, &e)),
                Err(e) => {
                    skipped.push((endpoint, Skip::Unreachable(innermost(&e).to_string())));
                    continue;
                }
            };
            // With one hub there is nothing to fail over to: its calls say what is wrong.
            if !only && let Err(skip) = serving(channel.clone()).await {
                skipped.push((endpoint, skip));
                continue;
            }
            return Ok(Self {
                endpoint: endpoint.to_string(),
                channel,
                bearer: Bearer(Arc::new(RwLock::new(bearer))),
                retry: Duration::from_secs(DEFAULT_RETRY_SECONDS),
                exec: credentials.exec.clone(),
            });
        }
        Err(none_usable(&skipped))
    }

    /// The connection settings of one endpoint: its URL checked, TLS with `--ca`.
    fn endpoint_for(endpoint: &str, credentials: &Credentials) -> Result<Endpoint> {
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
        Ok(builder)
    }

    fn channel(&self) -> HubChannel {
        InterceptedService::new(self.channel.clone(), self.bearer.clone())
    }

    /// The endpoint connected to (of `--hub`'s list, the first usable one).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Retries idempotent calls the hub answers UNAVAILABLE for at most `budget` from each
    /// call's first attempt (`--retry-seconds`; [`DEFAULT_RETRY_SECONDS`] unless set). Zero:
    /// never retried.
    pub fn retrying_for(mut self, budget: Duration) -> Self {
        self.retry = budget;
        self
    }

    /// The back-off of one idempotent call, or of one batch retried together (`ApplyWorks`),
    /// its budget starting now.
    pub fn backoff(&self) -> Backoff {
        Backoff::new(self.retry)
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

    /// GitRepos.
    pub fn git_repos(
        &self,
    ) -> flotilla_api::v1::git_repo_service_client::GitRepoServiceClient<HubChannel> {
        flotilla_api::v1::git_repo_service_client::GitRepoServiceClient::new(self.channel())
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

    /// Governance: Policies, PlacementBindings, PolicySets and PlacementRules (a policy's
    /// status lists every decided cluster).
    pub fn policies(
        &self,
    ) -> flotilla_api::v1::policy_service_client::PolicyServiceClient<HubChannel> {
        flotilla_api::v1::policy_service_client::PolicyServiceClient::new(self.channel())
            .max_decoding_message_size(MAX_WORK_MESSAGE)
            .max_encoding_message_size(MAX_WORK_MESSAGE)
    }

    /// ClusterImportPolicies.
    pub fn import_policies(
        &self,
    ) -> flotilla_api::v1::import_policy_service_client::ImportPolicyServiceClient<HubChannel> {
        flotilla_api::v1::import_policy_service_client::ImportPolicyServiceClient::new(
            self.channel(),
        )
    }

    /// MirrorPeers.
    pub fn mirror_peers(
        &self,
    ) -> flotilla_api::v1::mirror_peer_service_client::MirrorPeerServiceClient<HubChannel> {
        flotilla_api::v1::mirror_peer_service_client::MirrorPeerServiceClient::new(self.channel())
    }

    /// What the hub runs (its version).
    pub fn info(&self) -> flotilla_api::v1::info_service_client::InfoServiceClient<HubChannel> {
        flotilla_api::v1::info_service_client::InfoServiceClient::new(self.channel())
    }

    /// Who the hub takes the caller for (`flotilla whoami`).
    pub fn access(
        &self,
    ) -> flotilla_api::v1::access_service_client::AccessServiceClient<HubChannel> {
        flotilla_api::v1::access_service_client::AccessServiceClient::new(self.channel())
    }

    /// The recovery window and its orphans.
    pub fn recovery(
        &self,
    ) -> flotilla_api::v1::recovery_service_client::RecoveryServiceClient<HubChannel> {
        flotilla_api::v1::recovery_service_client::RecoveryServiceClient::new(self.channel())
    }

    /// ManagedServiceAccounts and their tokens.
    pub fn service_accounts(
        &self,
    ) -> flotilla_api::v1::service_account_service_client::ServiceAccountServiceClient<HubChannel>
    {
        flotilla_api::v1::service_account_service_client::ServiceAccountServiceClient::new(
            self.channel(),
        )
    }

    /// ManifestWorks and the read-only proxy to spokes.
    pub fn works(&self) -> WorkServiceClient<HubChannel> {
        WorkServiceClient::new(self.channel())
            .max_decoding_message_size(MAX_WORK_MESSAGE)
            .max_encoding_message_size(MAX_WORK_MESSAGE)
    }

    /// Awaits one call to the hub, never repeated — for calls not safe to repeat (minting a join
    /// credential, `rollout undo`): its answer, or the failure as [`Hub::error`] words it.
    pub async fn call<T>(
        &self,
        call: impl Future<Output = Result<Response<T>, Status>>,
    ) -> Result<T> {
        call.await
            .map(Response::into_inner)
            .map_err(|status| self.error(status))
    }

    /// Makes an idempotent call — one whose repetition leaves the hub as one success would: a
    /// read, an apply of desired state, a label edit. When the hub itself answers UNAVAILABLE
    /// (its store did not answer in time), `call` is made again after [`Backoff`]'s waits, each
    /// retry said on stderr, for at most `--retry-seconds`; any other failure (a refusal, or a
    /// hub that cannot be reached) is not retried. The failure is worded as [`Hub::call`] words
    /// it, saying how long the CLI retried when it did.
    ///
    /// `call` makes a fresh call each time:
    ///
    /// ```ignore
    /// let work = hub.idempotent(async || hub.works().get_work(r.clone()).await).await?;
    /// ```
    pub async fn idempotent<T>(
        &self,
        call: impl AsyncFnMut() -> Result<Response<T>, Status>,
    ) -> Result<T> {
        let (answer, backoff) = self.attempts(call).await;
        answer.map_err(|status| self.gave_up(status, &backoff))
    }

    /// Deletes, retrying as [`Hub::idempotent`] does. A retry answered NOT_FOUND after an
    /// attempt answered UNAVAILABLE is [`Deleted::Earlier`]: that attempt may have landed, and
    /// either way the object is gone.
    pub async fn delete<T>(
        &self,
        call: impl AsyncFnMut() -> Result<Response<T>, Status>,
    ) -> Result<Deleted<T>> {
        match self.attempts(call).await {
            (Ok(answer), _) => Ok(Deleted::Now(answer)),
            (Err(status), backoff)
                if backoff.attempt() > 1
                    && status.code() == Code::NotFound
                    && status.source().is_none() =>
            {
                Ok(Deleted::Earlier)
            }
            (Err(status), backoff) => Err(self.gave_up(status, &backoff)),
        }
    }

    /// Makes `call` until it is answered with anything but the hub's UNAVAILABLE, or the budget
    /// is spent; the last answer, and the back-off (how many attempts were made).
    async fn attempts<T>(
        &self,
        mut call: impl AsyncFnMut() -> Result<Response<T>, Status>,
    ) -> (Result<T, Status>, Backoff) {
        let mut backoff = self.backoff();
        let mut refreshed = false;
        loop {
            match call().await {
                Ok(answer) => return (Ok(answer.into_inner()), backoff),
                // The plugin's token may have expired: run it again and retry once (the call
                // was refused before the hub did anything). client-go only refreshes for the
                // next request; a CLI makes one.
                Err(status) if status.code() == Code::Unauthenticated && !refreshed => {
                    refreshed = true;
                    match self.refresh().await {
                        Ok(true) => continue,
                        Ok(false) => return (Err(status), backoff),
                        Err(e) => {
                            return (
                                Err(Status::unauthenticated(format!("{status}; {e}"))),
                                backoff,
                            );
                        }
                    }
                }
                Err(status) => match backoff.after(&status) {
                    Some(wait) => tokio::time::sleep(wait).await,
                    None => return (Err(status), backoff),
                },
            }
        }
    }

    /// Runs the exec credential plugin again and sends its token from now on; whether there
    /// was a plugin to run.
    async fn refresh(&self) -> Result<bool> {
        let Some(exec) = &self.exec else {
            return Ok(false);
        };
        let token = exec.token().await?;
        *self.bearer.0.write().unwrap_or_else(|e| e.into_inner()) = Some(bearer_value(&token)?);
        Ok(true)
    }

    /// The failure of a call retried with `backoff`: as [`Hub::error`] words it, and, when the
    /// hub was still unavailable after retries, for how long the CLI tried.
    fn gave_up(&self, status: Status, backoff: &Backoff) -> anyhow::Error {
        let still_unavailable = Backoff::retries(&status) && backoff.attempt() > 1;
        let e = self.error(status);
        if still_unavailable {
            e.context(backoff.gave_up())
        } else {
            e
        }
    }

    /// A failed call as one line for the operator: what the hub refused and why, or that the
    /// hub could not be reached.
    pub fn error(&self, status: Status) -> anyhow::Error {
        failure(&self.endpoint, status)
    }
}

/// What a retried delete came to.
#[derive(Debug)]
pub enum Deleted<T> {
    /// This attempt deleted it; the hub's answer.
    Now(T),
    /// A retry found it gone after an attempt the hub answered UNAVAILABLE: that attempt had
    /// landed — or the object was already gone (deleted meanwhile, or never there: the hub may
    /// not have looked before it was unavailable).
    Earlier,
}

impl<T> Deleted<T> {
    /// The hub's answer passed through `f`.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Deleted<U> {
        match self {
            Self::Now(answer) => Deleted::Now(f(answer)),
            Self::Earlier => Deleted::Earlier,
        }
    }
}

/// The waits between attempts of an idempotent call the hub answered UNAVAILABLE: 0.5, 1, 2,
/// 4 s…, each at most [`LONGEST_RETRY`], while a budget from the first attempt lasts (the last
/// wait is cut to what is left of it). Every retry is said on stderr in one line:
/// `hub unavailable (MESSAGE); retrying in 2 s (attempt 4)`.
#[derive(Debug)]
pub struct Backoff {
    budget: Duration,
    started: Instant,
    next: Duration,
    attempt: u32,
}

impl Backoff {
    /// A back-off for at most `budget` from now (zero: never retry), at its first attempt.
    pub fn new(budget: Duration) -> Self {
        Self {
            budget,
            started: Instant::now(),
            next: FIRST_RETRY,
            attempt: 1,
        }
    }

    /// The attempt being made: 1 for the first.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// Whether `status` is the hub's own UNAVAILABLE, the answer to retry. A status with a
    /// source was made on this side from a transport failure — "cannot reach the hub", which
    /// the commands handle themselves (`apply` stops sending) — and is not retried.
    pub fn retries(status: &Status) -> bool {
        status.code() == Code::Unavailable && status.source().is_none()
    }

    /// After an attempt failed with `status`: how long to wait before the next one (the retry
    /// said on stderr), or `None` when `status` is not the hub's UNAVAILABLE or the budget is
    /// spent.
    pub fn after(&mut self, status: &Status) -> Option<Duration> {
        if !Self::retries(status) {
            return None;
        }
        self.unavailable(status.message())
    }

    /// After the hub answered UNAVAILABLE with `message` (also as one answer of a batch): how
    /// long to wait before the next attempt (the retry said on stderr), or `None` when the
    /// budget is spent.
    pub fn unavailable(&mut self, message: &str) -> Option<Duration> {
        let wait = self.wait()?;
        eprintln!("{}", retry_line(message, wait, self.attempt));
        Some(wait)
    }

    /// The next wait, counting the attempt it leads to; `None` when the budget is spent.
    fn wait(&mut self) -> Option<Duration> {
        let left = self.budget.saturating_sub(self.started.elapsed());
        if left.is_zero() {
            return None;
        }
        let wait = self.next.min(left);
        self.next = (self.next * 2).min(LONGEST_RETRY);
        self.attempt += 1;
        Some(wait)
    }

    /// "the hub was still unavailable after N attempts in S s (--retry-seconds)".
    pub fn gave_up(&self) -> String {
        format!(
            "the hub was still unavailable after {} attempts in {} (--retry-seconds {})",
            self.attempt,
            seconds(self.started.elapsed()),
            self.budget.as_secs()
        )
    }
}

/// `hub unavailable (MESSAGE); retrying in 2 s (attempt 4)`.
fn retry_line(message: &str, wait: Duration, attempt: u32) -> String {
    format!(
        "hub unavailable ({message}); retrying in {} (attempt {attempt})",
        seconds(wait)
    )
}

/// A duration in seconds to a tenth: `0.5 s`, `2 s`, `12.3 s`.
fn seconds(d: Duration) -> String {
    let tenths = (d.as_millis() + 50) / 100;
    if tenths.is_multiple_of(10) {
        format!("{} s", tenths / 10)
    } else {
        format!("{}.{} s", tenths / 10, tenths % 10)
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

/// The innermost cause of an error. Transport errors wrap one failure several times
/// ("transport error: tcp connect error: tcp connect error: Connection refused"); only the
/// innermost says what happened.
fn innermost<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> &'a (dyn std::error::Error + 'static) {
    let mut cause = error;
    while let Some(inner) = cause.source() {
        cause = inner;
    }
    cause
}

/// Whether a hub of a list can serve, by the standard gRPC health check of the whole server
/// (open to every caller, no token). A hub without a health service is taken as serving: its
/// calls will say what is wrong.
async fn serving(channel: Channel) -> Result<(), Skip> {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
    let mut client = HealthClient::new(channel);
    let check = client.check(HealthCheckRequest {
        service: String::new(),
    });
    match tokio::time::timeout(CONNECT_TIMEOUT, check).await {
        Err(_) => Err(Skip::Unreachable(format!(
            "no health answer within {CONNECT_TIMEOUT:?}"
        ))),
        Ok(Ok(answer)) => match answer.into_inner().status() {
            ServingStatus::Serving => Ok(()),
            other => Err(Skip::Unavailable(format!(
                "its health check says {}",
                other.as_str_name()
            ))),
        },
        Ok(Err(status)) if status.source().is_some() => {
            Err(Skip::Unreachable(innermost(&status).to_string()))
        }
        Ok(Err(status)) if status.code() == Code::Unavailable => Err(Skip::Unavailable(format!(
            "unavailable: {}",
            status.message()
        ))),
        Ok(Err(_)) => Ok(()),
    }
}

/// "no hub of --hub could be used", naming each hub tried and why it was passed over.
fn none_usable(skipped: &[(&str, Skip)]) -> anyhow::Error {
    let tried: Vec<String> = skipped
        .iter()
        .map(|(endpoint, skip)| match skip {
            Skip::Unreachable(why) => format!("{endpoint}: unreachable ({why})"),
            Skip::Unavailable(why) => format!("{endpoint}: {why}"),
        })
        .collect();
    anyhow!(
        "cannot use any of the {} hubs tried: {}; is flotilla-hub running? (set --hub or FLOTILLA_HUB)",
        tried.len(),
        tried.join("; ")
    )
}

/// "cannot reach the hub at ENDPOINT: CAUSE", with only the innermost cause.
fn unreachable(endpoint: &str, error: &(dyn std::error::Error + 'static)) -> anyhow::Error {
    let cause = innermost(error);
    anyhow!(
        "cannot reach the hub at {endpoint}: {cause}; is flotilla-hub running? (set --hub or FLOTILLA_HUB)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hub_list_is_split_on_commas_and_trimmed() {
        assert_eq!(
            endpoints(" http://a:50051, https://b:443 ,,http://c:1,"),
            ["http://a:50051", "https://b:443", "http://c:1"]
        );
        assert!(endpoints(" , ").is_empty());
    }

    #[test]
    fn when_no_hub_can_be_used_every_hub_tried_is_named_once() {
        let e = none_usable(&[
            ("http://a:1", Skip::Unreachable("Connection refused".into())),
            (
                "http://b:2",
                Skip::Unavailable("its health check says NOT_SERVING".into()),
            ),
        ]);
        let text = format!("error: {e:#}");
        assert_eq!(
            text,
            "error: cannot use any of the 2 hubs tried: http://a:1: unreachable (Connection \
             refused); http://b:2: its health check says NOT_SERVING; is flotilla-hub running? \
             (set --hub or FLOTILLA_HUB)"
        );
    }

    #[tokio::test]
    async fn every_entry_is_checked_before_any_hub_is_contacted() {
        let credentials = Credentials {
            token: Some("t".into()),
            ..Credentials::default()
        };
        // The second entry would send the token in the clear: refused although the first
        // (unreachable) is fine.
        let e = Hub::connect("http://127.0.0.1:1,http://10.1.2.3:50051", &credentials)
            .await
            .err()
            .expect("refused");
        assert!(e.downcast_ref::<Cleartext>().is_some(), "{e:#}");
        let e = Hub::connect("http://127.0.0.1:1,not a url", &Credentials::default())
            .await
            .err()
            .expect("refused");
        assert!(
            e.to_string().contains("\"not a url\" is not a valid URL"),
            "{e:#}"
        );
        let e = Hub::connect(" ,", &Credentials::default())
            .await
            .err()
            .expect("empty");
        assert!(e.to_string().starts_with("--hub is empty"), "{e:#}");
    }

    #[tokio::test]
    async fn a_hub_whose_health_check_says_not_serving_is_passed_over() {
        use tonic_health::ServingStatus;
        let (reporter, health) = tonic_health::server::health_reporter();
        let port = flotilla_testkit::free_port();
        let server = tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(health)
                .serve(([127, 0, 0, 1], port).into()),
        );
        let endpoint = format!("http://127.0.0.1:{port}");
        let channel = flotilla_testkit::eventually(
            Duration::from_secs(10),
            "the health server listens",
            || async {
                Endpoint::from_shared(endpoint.clone())
                    .ok()?
                    .connect()
                    .await
                    .ok()
            },
        )
        .await;
        assert!(serving(channel.clone()).await.is_ok(), "SERVING by default");
        reporter
            .set_service_status("", ServingStatus::NotServing)
            .await;
        let Err(Skip::Unavailable(why)) = serving(channel).await else {
            panic!("NOT_SERVING must be passed over");
        };
        assert_eq!(why, "its health check says NOT_SERVING");
        server.abort();
    }

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

    #[test]
    fn retries_wait_half_a_second_then_double_up_to_thirty() {
        let mut backoff = Backoff::new(Duration::from_secs(3600));
        let waits: Vec<f64> = (0..8)
            .map(|_| backoff.wait().expect("within the budget").as_secs_f64())
            .collect();
        assert_eq!(waits, [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]);
        assert_eq!(backoff.attempt(), 9);
    }

    #[test]
    fn a_spent_budget_or_none_retries_nothing() {
        let mut none = Backoff::new(Duration::ZERO);
        assert_eq!(none.unavailable("electing"), None);
        assert_eq!(none.attempt(), 1);
        let mut spent = Backoff::new(Duration::from_secs(5));
        spent.started -= Duration::from_secs(5);
        assert_eq!(spent.wait(), None);
        // The last wait is cut to what is left of the budget.
        let mut short = Backoff::new(Duration::from_secs(5));
        short.started -= Duration::from_millis(4700);
        let wait = short.wait().expect("0.3 s left");
        assert!(wait <= Duration::from_millis(300), "{wait:?}");
    }

    #[test]
    fn only_the_hubs_own_unavailable_is_retried() {
        assert!(Backoff::retries(&Status::unavailable(
            "storage unavailable — retry"
        )));
        assert!(!Backoff::retries(&Status::not_found("gone")));
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let mut transport = Status::unavailable("tcp connect error");
        transport.set_source(std::sync::Arc::new(refused));
        assert!(
            !Backoff::retries(&transport),
            "a transport failure is not the hub's answer"
        );
    }

    #[test]
    fn a_retry_is_said_in_one_line_with_its_wait_and_attempt() {
        assert_eq!(
            retry_line(
                "kv works/c1.w: the store did not answer — retry",
                Duration::from_millis(500),
                2
            ),
            "hub unavailable (kv works/c1.w: the store did not answer — retry); retrying in 0.5 s (attempt 2)"
        );
        assert_eq!(seconds(Duration::from_secs(2)), "2 s");
        assert_eq!(seconds(Duration::from_millis(12_340)), "12.3 s");
    }

    #[test]
    fn loopback_is_localhost_127_slash_8_and_ipv6_one() {
        for host in [
            "localhost",
            "LocalHost",
            "127.0.0.1",
            "127.1.2.3",
            "[::1]",
            "[::ffff:127.0.0.1]",
        ] {
            assert!(is_loopback(host), "{host}");
        }
        for host in [
            "10.1.2.3",
            "128.0.0.1",
            "[::2]",
            "localhost.example.com",
            "hub",
            "",
        ] {
            assert!(!is_loopback(host), "{host}");
        }
    }

    #[test]
    fn a_token_is_never_sent_in_the_clear_off_loopback_without_insecure() {
        let refused = exposure("http://10.1.2.3:50051", true, false);
        let Exposure::Refuse(refusal) = refused else {
            panic!("{refused:?}");
        };
        let text = refusal.to_string();
        assert!(
            text.contains("to 10.1.2.3 (--hub http://10.1.2.3:50051)")
                && text.contains("https://")
                && text.contains("--ca")
                && text.contains("--insecure"),
            "{text}"
        );
        // No scheme, or another one, is not TLS either.
        assert!(matches!(
            exposure("hub.example.com:50051", true, false),
            Exposure::Refuse(_)
        ));
        assert!(matches!(
            exposure("http://[fd00::1]:50051", true, false),
            Exposure::Refuse(Cleartext { host, .. }) if host == "[fd00::1]"
        ));
    }

    #[test]
    fn insecure_sends_the_token_in_the_clear_with_a_warning() {
        let Exposure::Warn(w) = exposure("http://10.1.2.3:50051", true, true) else {
            panic!("not a warning");
        };
        assert!(
            w.starts_with("warning: --insecure") && w.contains("10.1.2.3"),
            "{w}"
        );
    }

    #[test]
    fn plain_http_without_a_token_off_loopback_is_allowed_with_a_warning() {
        let Exposure::Warn(w) = exposure("http://hub:50051", false, false) else {
            panic!("not a warning");
        };
        assert!(
            w.starts_with("warning:") && w.contains("http://hub:50051"),
            "{w}"
        );
        assert!(!w.contains('\n'), "one line: {w}");
    }

    #[test]
    fn tls_and_loopback_expose_nothing() {
        for (endpoint, token) in [
            ("https://10.1.2.3:50051", true),
            ("https://hub.example.com", false),
            ("http://127.0.0.1:50051", true),
            ("http://localhost:50051", true),
            ("http://[::1]:50051", true),
            ("http://127.0.0.1:50051", false),
        ] {
            assert_eq!(
                exposure(endpoint, token, false),
                Exposure::Nothing,
                "{endpoint}"
            );
        }
    }
}
