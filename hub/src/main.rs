//! `flotilla-hub`: flags → tracing → [`flotilla_hub::run`].

use clap::Parser;
use flotilla_api::selector;
use flotilla_bus::connect::NatsArgs;
use flotilla_hub::cluster::rules::AutoAccept;
use std::net::SocketAddr;
use std::process::ExitCode;

mod cmd;

/// mimalloc instead of glibc's malloc: the hub allocates on every message from every thread,
/// and glibc's malloc and free were a third of its CPU samples, with lock waits, at 8,000 works
/// a second (BENCHMARKS.md, "allocator"). Without the `mimalloc` feature: the system allocator
/// (for heap profilers that see only malloc).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The Flotilla hub: registers and tracks managed clusters over NATS and serves the gRPC API.
#[derive(Parser, Debug)]
#[command(name = "flotilla-hub", version)]
struct Args {
    #[command(subcommand)]
    command: Option<cmd::Command>,
    #[command(flatten)]
    nats: NatsArgs,
    /// Secure mode: the directory `flotilla-hub init` wrote. The hub connects with its
    /// hub.creds (and tls/ca.pem) unless --nats-creds/--nats-ca say otherwise, issues each
    /// accepted cluster's credentials and revokes denied and deleted clusters' keys.
    #[arg(long, env = "FLOTILLA_SECURE_DIR")]
    secure_dir: Option<std::path::PathBuf>,
    /// The sealing key of ManagedServiceAccount tokens (an NKeys curve key seed, created 0600
    /// when missing). Every hub of one control plane must use the same file (copy it). Default
    /// in secure mode: `keys/sealing.xk` in the secure directory; without either, a key made at
    /// start (tokens are issued again after a restart).
    #[arg(long, env = "FLOTILLA_SEALING_KEY_FILE")]
    sealing_key_file: Option<std::path::PathBuf>,
    /// How long issued cluster credentials are valid; agents renew at two thirds.
    #[arg(
        long,
        env = "FLOTILLA_CREDENTIALS_TTL_SECONDS",
        default_value_t = 86_400
    )]
    credentials_ttl_seconds: u64,
    /// gRPC API listen address.
    #[arg(long, env = "FLOTILLA_GRPC_LISTEN", default_value = flotilla_hub::DEFAULT_GRPC_LISTEN)]
    grpc_listen: SocketAddr,
    /// API bearer tokens: a file of `TOKEN,NAME,ROLE[,EXECUTE_AS]` lines, ROLE `admin`,
    /// `deployer` or `read-only`; a deployer's EXECUTE_AS lists the ManifestWork executors it may
    /// name (`NAMESPACE/NAME` or `NAMESPACE/*`, space-separated). Without it the API is open
    /// (any executor allowed), which is refused off loopback.
    #[arg(long, env = "FLOTILLA_API_TOKEN_FILE")]
    api_token_file: Option<std::path::PathBuf>,
    /// Serve an open API (no tokens) on a non-loopback address anyway.
    #[arg(long)]
    api_allow_unauthenticated: bool,
    /// Teams: a grants file (YAML, `kind: Grants`) giving users and groups roles on the fleet
    /// (`admin`, `view`), on cluster sets (`admin`, `bind`, `view`) and on namespaces (`admin`,
    /// `edit`, `view`); a token's NAME is a user, and so is an OIDC username. Needs
    /// --api-token-file or --oidc-issuer-url. Read at start (a file that does not parse stops
    /// the hub), then again when it changes.
    #[arg(long, env = "FLOTILLA_GRANTS_FILE")]
    grants_file: Option<std::path::PathBuf>,
    /// Identities from an OIDC issuer (kube-apiserver's --oidc-* flags).
    #[command(flatten)]
    oidc: flotilla_hub::oidc::OidcArgs,
    /// How much of the gRPC server one caller may hold (connections, streams, calls, watches).
    #[command(flatten)]
    grpc_capacity: flotilla_hub::grpc::capacity::CapacityArgs,
    /// How many live dashboard pages may be open, in all and per identity.
    #[command(flatten)]
    dashboard_live: flotilla_hub::dashboard::live::LiveArgs,
    /// The dashboard's sign-in with the OIDC issuer.
    #[command(flatten)]
    dashboard_oidc: flotilla_hub::dashboard::oidc::SignInArgs,
    /// Serve the gRPC API over TLS with this PEM certificate chain (with --grpc-tls-key).
    #[arg(long, env = "FLOTILLA_GRPC_TLS_CERT", requires = "grpc_tls_key")]
    grpc_tls_cert: Option<std::path::PathBuf>,
    /// The PEM private key of --grpc-tls-cert.
    #[arg(long, env = "FLOTILLA_GRPC_TLS_KEY", requires = "grpc_tls_cert")]
    grpc_tls_key: Option<std::path::PathBuf>,
    /// Serve every cluster's Kubernetes API under /clusters/<cluster>/ on this address, so
    /// kubectl reaches spokes through the hub (`flotilla kubeconfig CLUSTER` writes the
    /// kubeconfig). Same tokens as the API; TLS with --grpc-tls-cert/--grpc-tls-key, plain HTTP
    /// only on loopback.
    #[arg(long, env = "FLOTILLA_CLUSTER_PROXY_LISTEN")]
    cluster_proxy_listen: Option<SocketAddr>,
    /// Cluster-proxy calls one identity (API token, ManagedServiceAccount) may have open at
    /// once over every cluster; more are refused with 429, so one token cannot take every slot.
    #[arg(
        long,
        env = "FLOTILLA_CLUSTER_PROXY_CALLS_PER_IDENTITY",
        default_value_t = flotilla_hub::kubeproxy::tunnel::DEFAULT_CALLS_PER_IDENTITY,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..)
    )]
    cluster_proxy_calls_per_identity: usize,
    /// Request-body bytes on their way through the cluster proxy to one cluster's agent at
    /// once, over every caller (at least 3 MiB, the largest body); a call past it is refused
    /// with 429.
    #[arg(
        long,
        env = "FLOTILLA_CLUSTER_PROXY_BODY_BYTES_PER_CLUSTER",
        default_value_t = flotilla_hub::kubeproxy::tunnel::DEFAULT_BODY_BYTES_PER_CLUSTER,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new()
            .range(flotilla_hub::kubeproxy::MAX_REQUEST_BODY as u64..)
    )]
    cluster_proxy_body_bytes_per_cluster: usize,
    /// Seconds a client has to send its whole request body through the cluster proxy; a body
    /// still coming then is cut (408), so it holds its cluster's body budget no longer.
    #[arg(
        long,
        env = "FLOTILLA_CLUSTER_PROXY_BODY_SECONDS",
        default_value_t = flotilla_hub::kubeproxy::tunnel::DEFAULT_BODY_DEADLINE.as_secs(),
        value_parser = clap::value_parser!(u64).range(1..=3600)
    )]
    cluster_proxy_body_seconds: u64,
    /// exec, attach and port-forward sessions the cluster proxy has open at once, over every
    /// caller and cluster (each forwarded connection of a port-forward is one); more are
    /// refused with 503.
    #[arg(
        long,
        env = "FLOTILLA_CLUSTER_PROXY_SESSIONS",
        default_value_t = flotilla_hub::kubeproxy::streams::DEFAULT_SESSIONS,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..)
    )]
    cluster_proxy_sessions: usize,
    /// Sessions one identity may have open at once; more are refused with 429.
    #[arg(
        long,
        env = "FLOTILLA_CLUSTER_PROXY_SESSIONS_PER_IDENTITY",
        default_value_t = flotilla_hub::kubeproxy::streams::DEFAULT_SESSIONS_PER_IDENTITY,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..)
    )]
    cluster_proxy_sessions_per_identity: usize,
    /// Bytes one identity's open sessions may reserve at the hub and its agents (each session
    /// reserves its two flow-control windows when it opens); past it a session is refused with
    /// 429.
    #[arg(
        long,
        env = "FLOTILLA_CLUSTER_PROXY_SESSION_BYTES_PER_IDENTITY",
        default_value_t = flotilla_hub::kubeproxy::streams::DEFAULT_SESSION_BYTES_PER_IDENTITY,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    cluster_proxy_session_bytes_per_identity: u64,
    /// Serve the web dashboard on this address (e.g. 127.0.0.1:8080). Same tokens as the API
    /// (a read-only token is enough to look; sign in with it or send it as a bearer token);
    /// TLS with --grpc-tls-cert/--grpc-tls-key, plain HTTP only on loopback.
    #[arg(long, env = "FLOTILLA_DASHBOARD_LISTEN")]
    dashboard_listen: Option<SocketAddr>,
    /// Prometheus /metrics listen address.
    #[arg(long, env = "FLOTILLA_METRICS_LISTEN", default_value = flotilla_hub::DEFAULT_METRICS_LISTEN)]
    metrics_listen: SocketAddr,
    /// Accept new clusters without an admin (for large simulated fleets).
    #[arg(long, env = "FLOTILLA_AUTO_ACCEPT")]
    auto_accept: bool,
    /// Only auto-accept clusters whose labels match this selector (e.g. "env=lab,!prod"). The
    /// labels are the registrant's own (reserved ones, the cluster set's among them, dropped):
    /// a filter, not an authentication.
    #[arg(long, env = "FLOTILLA_AUTO_ACCEPT_LABELS", requires = "auto_accept")]
    auto_accept_labels: Option<String>,
    /// Only auto-accept clusters whose claims match this selector (claims the registrant
    /// reports: a filter, not an authentication).
    #[arg(long, env = "FLOTILLA_AUTO_ACCEPT_CLAIMS", requires = "auto_accept")]
    auto_accept_claims: Option<String>,
    /// Lease duration for clusters that do not set spec.leaseDurationSeconds.
    #[arg(
        long,
        env = "FLOTILLA_DEFAULT_LEASE_DURATION_SECONDS",
        default_value_t = 60
    )]
    default_lease_duration_seconds: i32,
    /// A cluster is unreachable after this many lease durations without renewal (OCM: 5).
    #[arg(long, env = "FLOTILLA_LEASE_GRACE_MULTIPLIER", default_value_t = 5)]
    lease_grace_multiplier: u32,
    /// Mailbox capacity of each cluster actor.
    #[arg(long, default_value_t = 256)]
    mailbox_capacity: usize,
    /// A work spec whose status has not come back after this many seconds is sent again,
    /// doubling up to 16 times this: a spec lost on the way (core NATS drops what an agent
    /// that falls behind cannot take) waits this long. Longer for links that take long to
    /// apply and answer; shorter resends more under load.
    #[arg(
        long,
        env = "FLOTILLA_WORK_RESEND_SECONDS",
        default_value_t = 30,
        value_parser = clap::value_parser!(u64).range(1..=3600)
    )]
    work_resend_seconds: u64,
    /// Work spec re-sends per second across all clusters of this hub (0: no limit). Re-sends
    /// past it wait a second; only clusters heard from since the spec was sent are re-sent to.
    #[arg(
        long,
        env = "FLOTILLA_WORK_RESENDS_PER_SECOND",
        default_value_t = flotilla_hub::cluster::resend::DEFAULT_RESENDS_PER_SECOND
    )]
    work_resends_per_second: u32,
    /// Periodic spec resyncs per second the hub asks of its whole fleet at most: each resync
    /// answer tells the agent the period that keeps them under it (the agent waits the longer
    /// of that and its own --resync-interval-seconds). 0: the agents' own intervals.
    #[arg(
        long,
        env = "FLOTILLA_PERIODIC_RESYNCS_PER_SECOND",
        default_value_t = flotilla_hub::cluster::resync_period::DEFAULT_PERIODIC_RESYNCS_PER_SECOND
    )]
    periodic_resyncs_per_second: u32,
    /// Agent versions accepted at registration, as minor lines: `0.1-0.3`, or `0.2` for one
    /// line (default: this hub's line and the one before). Others are refused with a reason
    /// that says what to upgrade.
    #[arg(long, env = "FLOTILLA_AGENT_VERSIONS", value_parser = flotilla_api::version::Accepts::parse)]
    agent_versions: Option<flotilla_api::version::Accepts>,
    /// JetStream replicas of every stream and bucket (3 on a NATS cluster, at most 5). Existing
    /// ones with fewer replicas are scaled up, never down.
    #[arg(
        long,
        env = "FLOTILLA_REPLICAS",
        default_value_t = 1,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=5)
    )]
    replicas: usize,
    /// The controller families' flags (each family's in its folder's `family.rs`).
    #[command(flatten)]
    families: flotilla_hub::controllers::Flags,
    /// Pending clusters (neither accepted nor denied) registrations may create, at most; more
    /// are refused until the admin accepts or denies some (join credentials are not limited).
    #[arg(
        long,
        env = "FLOTILLA_BOOTSTRAP_PENDING_MAX",
        default_value_t = flotilla_hub::limits::DEFAULT_BOOTSTRAP_PENDING_MAX
    )]
    bootstrap_pending_max: usize,
    /// New cluster names one credential (e.g. the shared bootstrap) may register per second.
    #[arg(
        long,
        env = "FLOTILLA_BOOTSTRAP_REGISTER_RATE",
        default_value_t = flotilla_hub::limits::DEFAULT_BOOTSTRAP_REGISTER_RATE
    )]
    bootstrap_register_rate: f64,
    /// New clusters being registered at once, at most: past it an agent is answered busy with
    /// the time to ask again, spread by the rate registrations complete (a fleet installed at
    /// once, or a site's uplink returning, does not flood the store with retries).
    #[arg(
        long,
        env = "FLOTILLA_REGISTRATIONS_IN_FLIGHT",
        default_value_t = flotilla_hub::admission::DEFAULT_REGISTRATIONS_IN_FLIGHT,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..)
    )]
    registrations_in_flight: usize,
    /// Bytes the status stream may hold (-1: unlimited); the oldest status messages go first.
    #[arg(
        long,
        env = "FLOTILLA_STATUS_STREAM_MAX_BYTES",
        default_value_t = flotilla_hub::limits::DEFAULT_STATUS_STREAM_MAX_BYTES,
        allow_hyphen_values = true
    )]
    status_stream_max_bytes: i64,
    /// Status messages a cluster may send in a minute for works it does not have before it is
    /// counted and logged as a flood; every such message is purged from the stream either way.
    #[arg(
        long,
        env = "FLOTILLA_STATUS_UNKNOWN_MAX",
        default_value_t = flotilla_hub::limits::DEFAULT_STATUS_UNKNOWN_MAX
    )]
    status_unknown_max: u32,
    /// Seconds a status message stays in the status stream (0: for ever).
    #[arg(
        long,
        env = "FLOTILLA_STATUS_STREAM_MAX_AGE_SECONDS",
        default_value_t = flotilla_hub::limits::DEFAULT_STATUS_STREAM_MAX_AGE.as_secs()
    )]
    status_stream_max_age_seconds: u64,
    /// Forwarded calls between hubs remembered by the hub holding the controllers, so that
    /// none runs twice; past it the call expiring first is forgotten and older ones refused.
    #[arg(long, env = "FLOTILLA_INTER_HUB_REPLAY_CAPACITY",
        default_value_t = flotilla_hub::sealed::REPLAY_CAPACITY,
        value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    inter_hub_replay_capacity: usize,
    /// Seconds the hubs' clocks may disagree (a forwarded call older than its deadline plus
    /// this, or issued this far in the future, is refused): run NTP.
    #[arg(long, env = "FLOTILLA_INTER_HUB_CLOCK_SLACK_SECONDS", default_value_t = 30,
        value_parser = clap::value_parser!(u64).range(1..))]
    inter_hub_clock_slack_seconds: u64,
    /// Seconds a store call waits for a JetStream election (a NATS node lost) before the
    /// caller is answered "unavailable: retry"; API writes wait this long at most.
    #[arg(long, env = "FLOTILLA_STORE_PATIENCE_SECONDS", default_value_t = 20,
        value_parser = clap::value_parser!(u64).range(1..))]
    store_patience_seconds: u64,
    /// Seconds a starting hub waits for its store (NATS starting, JetStream electing its
    /// leaders, a quorum not yet there) before it gives up and exits; without it, it waits as
    /// long as it takes, saying what for in its log and on `/healthz`.
    #[arg(long, env = "FLOTILLA_STORE_WAIT_SECONDS")]
    store_wait_seconds: Option<u64>,
    /// This hub's id among the hubs sharing one NATS (default `<hostname>-<grpc port>`).
    #[arg(long, env = "FLOTILLA_HUB_ID")]
    hub_id: Option<String>,
    /// Seconds a shard lease lasts without renewal: a dead hub's shards are taken over after
    /// at most this long. The lease bucket keeps the TTL of the hub that created it.
    #[arg(long, env = "FLOTILLA_SHARD_LEASE_TTL_SECONDS", default_value_t = 15)]
    shard_lease_ttl_seconds: u64,
    /// Seconds between shard lease renewals (at most a third of the TTL).
    #[arg(long, env = "FLOTILLA_SHARD_LEASE_RENEW_SECONDS", default_value_t = 3)]
    shard_lease_renew_seconds: u64,
}

/// What the flags name that is read or parsed before the hub starts.
struct Checked {
    secure: Option<flotilla_auth::SecureDir>,
    auto_accept: AutoAccept,
    tokens: Option<flotilla_hub::grpc::auth::Tokens>,
    oidc: Option<flotilla_oidc::Config>,
    sign_in: Option<flotilla_hub::dashboard::oidc::SignInConfig>,
    sealing_key: Option<flotilla_hub::serviceaccount::key::SealingKey>,
    families: flotilla_hub::controllers::Settings,
}

/// Checks every flag; every problem is reported at once.
fn check(args: &Args) -> Result<Checked, Vec<String>> {
    let mut errors = Vec::new();
    check_numbers(args, &mut errors);
    let families = args.families.settings(&mut errors);
    check_listeners(args, &mut errors);
    if let Some(addr) = families.gitops.webhook.listen {
        // No token to ask for: a webhook proves itself by its signature.
        errors.extend(flotilla_hub::webserver::listener_refusals(
            "--gitops-webhook-listen",
            addr,
            args.grpc_tls_cert.is_some(),
            true,
            true,
            "",
        ));
    }
    let secure = load(
        args.secure_dir.as_deref(),
        "--secure-dir",
        flotilla_auth::SecureDir::load,
        &mut errors,
    );
    let auto_accept = AutoAccept {
        enabled: args.auto_accept,
        labels: parse(
            &args.auto_accept_labels,
            "--auto-accept-labels",
            selector::parse,
            &mut errors,
        ),
        claims: parse(
            &args.auto_accept_claims,
            "--auto-accept-claims",
            selector::parse_claims,
            &mut errors,
        ),
    };
    let tokens = load(
        args.api_token_file.as_deref(),
        "--api-token-file",
        flotilla_hub::grpc::auth::Tokens::load,
        &mut errors,
    );
    let grants = load(
        args.grants_file.as_deref(),
        "--grants-file",
        flotilla_hub::grants::file::load,
        &mut errors,
    );
    let oidc = args.oidc.config(&mut errors);
    let sign_in = args.dashboard_oidc.config(oidc.as_ref(), &mut errors);
    if args.grants_file.is_some() && args.api_token_file.is_none() && oidc.is_none() {
        errors.push(
            "--grants-file: grants need identities to grant to; give --api-token-file (a token's \
             NAME is a user in the grants file) or --oidc-issuer-url"
                .into(),
        );
    }
    let tokens = flotilla_hub::oidc::prepare(tokens, oidc.as_ref());
    let tokens = match grants {
        Some(grants) => tokens.map(|t| {
            let t = t.with_grants(std::sync::Arc::new(grants));
            match args.grants_file.as_deref() {
                Some(path) => t.with_grants_file(path),
                None => t,
            }
        }),
        None => tokens,
    };
    let sealing_path = args.sealing_key_file.clone().or_else(|| {
        secure
            .as_ref()
            .map(|s| s.dir.join(flotilla_auth::sealing::SEALING_KEY_FILE))
    });
    let sealing_key = load(
        sealing_path.as_deref(),
        "--sealing-key-file",
        flotilla_hub::serviceaccount::key::SealingKey::from_file,
        &mut errors,
    );
    if errors.is_empty() {
        Ok(Checked {
            secure,
            auto_accept,
            tokens,
            oidc,
            sign_in,
            sealing_key,
            families,
        })
    } else {
        Err(errors)
    }
}

/// Reads the file a flag names, if it names one.
fn load<T, E: std::fmt::Display>(
    path: Option<&std::path::Path>,
    flag: &str,
    read: impl FnOnce(&std::path::Path) -> Result<T, E>,
    errors: &mut Vec<String>,
) -> Option<T> {
    read(path?)
        .map_err(|e| errors.push(format!("{flag}: {e}")))
        .ok()
}

type SelectorParser = fn(&str) -> Result<flotilla_api::v1::LabelSelector, selector::SelectorError>;

/// Parses the selector a flag gives, if it gives one.
fn parse(
    s: &Option<String>,
    flag: &str,
    parser: SelectorParser,
    errors: &mut Vec<String>,
) -> Option<flotilla_api::v1::LabelSelector> {
    parser(s.as_ref()?)
        .map_err(|e| errors.push(format!("{flag}: {e}")))
        .ok()
}

/// The numbers' ranges.
fn check_numbers(args: &Args, errors: &mut Vec<String>) {
    if args.credentials_ttl_seconds < 120 {
        errors.push(format!(
            "--credentials-ttl-seconds: {} is below 120",
            args.credentials_ttl_seconds
        ));
    }
    if !(1..=3600).contains(&args.default_lease_duration_seconds) {
        errors.push(format!(
            "--default-lease-duration-seconds: {} is outside 1..=3600",
            args.default_lease_duration_seconds
        ));
    }
    if !(args.bootstrap_register_rate.is_finite() && args.bootstrap_register_rate > 0.0) {
        errors.push(format!(
            "--bootstrap-register-rate: {} is not a positive number",
            args.bootstrap_register_rate
        ));
    }
    if args.lease_grace_multiplier == 0 {
        errors.push("--lease-grace-multiplier: must be at least 1".into());
    }
}

/// An API, cluster proxy or dashboard that anyone reaching it could use is refused unless asked
/// for.
fn check_listeners(args: &Args, errors: &mut Vec<String>) {
    let authenticated = args.api_token_file.is_some() || args.oidc.oidc_issuer_url.is_some();
    if !authenticated && !args.grpc_listen.ip().is_loopback() && !args.api_allow_unauthenticated {
        errors.push(format!(
            "--grpc-listen {}: an API without --api-token-file or --oidc-issuer-url is open to \
             anyone who reaches it; give tokens, listen on loopback, or pass \
             --api-allow-unauthenticated",
            args.grpc_listen
        ));
    }
    let listeners = [
        (
            "--cluster-proxy-listen",
            args.cluster_proxy_listen,
            "act on every cluster",
        ),
        (
            "--dashboard-listen",
            args.dashboard_listen,
            "see the whole fleet and pause its rollouts",
        ),
    ];
    for (flag, addr, power) in listeners {
        if let Some(addr) = addr {
            errors.extend(flotilla_hub::webserver::listener_refusals(
                flag,
                addr,
                args.grpc_tls_cert.is_some(),
                authenticated,
                args.api_allow_unauthenticated,
                power,
            ));
        }
    }
}

/// The hub's NATS connection: the hub's inbox prefix, and in secure mode its credentials file
/// (read at every reconnect: `flotilla-hub rotate hub` takes effect without a restart) and CA.
fn nats_config(
    args: &Args,
    secure: Option<&flotilla_auth::SecureDir>,
) -> Result<flotilla_bus::connect::NatsConfig, String> {
    let mut nats = args.nats.config("flotilla-hub");
    nats.inbox_prefix = Some(flotilla_bus::reply::HUB_INBOX_PREFIX.to_string());
    if let Some(secure) = secure {
        if nats.credentials_file.is_none() {
            nats.auth = Some(std::sync::Arc::new(flotilla_auth::creds::CredsFile(
                secure.hub_creds.clone(),
            )));
        }
        if let (None, Some(tls)) = (&nats.tls_ca_file, &secure.tls) {
            nats.tls_ca_file = Some(tls.ca.clone());
        }
        if secure.tls.as_ref().is_some_and(|t| t.handshake_first) {
            nats.tls_first = true;
        }
    }
    let ca = nats.tls_ca_file.is_some();
    for w in flotilla_bus::connect::check_transport(&nats.url, ca, secure.is_some())
        .map_err(|e| format!("--nats-url {e}"))?
    {
        tracing::warn!("{w}");
    }
    nats.require_tls = flotilla_bus::connect::tls_required(ca, &nats.url);
    Ok(nats)
}

/// The hub's configuration from its checked flags.
fn config(args: &Args, checked: Checked) -> Result<flotilla_hub::Config, String> {
    use std::time::Duration;
    let mut config = flotilla_hub::Config::new(&args.nats.url);
    config.nats = nats_config(args, checked.secure.as_ref())?;
    if let Some(secure) = &checked.secure {
        config.cluster.key_policy = flotilla_hub::cluster::rules::KeyPolicy::Pin;
        config.security = Some(flotilla_hub::security::SecurityConfig {
            dir: secure.dir.clone(),
            credentials_ttl: Duration::from_secs(args.credentials_ttl_seconds),
        });
    }
    config.families = checked.families;
    match checked.sealing_key {
        Some(key) => config.families.service_accounts.key = key,
        None => tracing::warn!(
            "no --sealing-key-file (nor --secure-dir): ManagedServiceAccount tokens are sealed \
             to a key made now; after a restart, or on another hub, clusters issue them again"
        ),
    }
    if config.families.service_accounts.key.source.is_none() && checked.tokens.is_some() {
        tracing::warn!(
            "--api-token-file without a shared sealing key (--sealing-key-file or --secure-dir): \
             with several hubs, a call made with a token through a hub not holding the \
             controllers is refused (FAILED_PRECONDITION) rather than forwarded in clear; give \
             every hub the same --sealing-key-file"
        );
    }
    config.grpc_listen = args.grpc_listen;
    config.cluster_proxy.listen = args.cluster_proxy_listen;
    config.cluster_proxy.tunnel.calls_per_identity = args.cluster_proxy_calls_per_identity;
    config.cluster_proxy.tunnel.body_bytes_per_cluster = args.cluster_proxy_body_bytes_per_cluster;
    config.cluster_proxy.tunnel.body_deadline =
        std::time::Duration::from_secs(args.cluster_proxy_body_seconds);
    config.cluster_proxy.tunnel.sessions = flotilla_hub::kubeproxy::streams::Limits {
        sessions: args.cluster_proxy_sessions,
        per_identity: args.cluster_proxy_sessions_per_identity,
        bytes_per_identity: args.cluster_proxy_session_bytes_per_identity,
    };
    config.dashboard.listen = args.dashboard_listen;
    args.dashboard_live.apply(&mut config.dashboard.live);
    config.metrics_listen = args.metrics_listen;
    config.api.tokens = checked.tokens;
    config.api.oidc = checked.oidc;
    config.dashboard.sign_in = checked.sign_in;
    config.api.capacity = args.grpc_capacity.config();
    config.api.tls = args
        .grpc_tls_cert
        .clone()
        .zip(args.grpc_tls_key.clone())
        .map(|(cert, key)| flotilla_hub::TlsFiles { cert, key });
    config.cluster.auto_accept = checked.auto_accept;
    config.cluster.default_lease_duration_seconds = args.default_lease_duration_seconds;
    config.cluster.lease_grace_multiplier = args.lease_grace_multiplier;
    config.cluster.mailbox_capacity = args.mailbox_capacity;
    config.cluster.work_resend_after = Duration::from_secs(args.work_resend_seconds);
    config.cluster.work_resends_per_second = args.work_resends_per_second;
    config.cluster.periodic_resyncs_per_second = args.periodic_resyncs_per_second;
    if let Some(accepts) = args.agent_versions {
        config.router.agent_versions = accepts;
    }
    config.stream.replicas = args.replicas;
    config.inter_hub = flotilla_hub::sealed::ReplayLimits {
        capacity: args.inter_hub_replay_capacity,
        slack: Duration::from_secs(args.inter_hub_clock_slack_seconds),
    };
    config.store = flotilla_hub::store::StoreConfig {
        patience: Duration::from_secs(args.store_patience_seconds),
        wait: args.store_wait_seconds.map(Duration::from_secs),
    };
    config.ha.hub_id = args.hub_id.clone();
    config.ha.ttl = Duration::from_secs(args.shard_lease_ttl_seconds);
    config.ha.renew = Duration::from_secs(args.shard_lease_renew_seconds);
    config.ha.margin = config.ha.renew.min(Duration::from_secs(2));
    config.limits = flotilla_hub::limits::LimitsConfig {
        bootstrap_pending_max: args.bootstrap_pending_max,
        bootstrap_register_rate: args.bootstrap_register_rate,
        stream: flotilla_hub::limits::StreamLimits {
            max_bytes: args.status_stream_max_bytes,
            max_age: Duration::from_secs(args.status_stream_max_age_seconds),
        },
        status_unknown_max: args.status_unknown_max,
        registrations_in_flight: args.registrations_in_flight,
    };
    Ok(config)
}

fn main() -> ExitCode {
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("flotilla-hub: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The OTLP exporter needs the runtime; logs and traces are set up inside it.
    let _tracing = {
        let _enter = runtime.enter();
        flotilla_bus::trace::init("flotilla-hub", "info")
    };
    let mut args = Args::parse();
    if let Some(command) = args.command.take() {
        return command.run(&args.nats, args.secure_dir.as_deref(), &runtime);
    }
    let config = match check(&args).and_then(|c| config(&args, c).map_err(|e| vec![e])) {
        Ok(c) => c,
        Err(errors) => {
            for e in errors {
                eprintln!("flotilla-hub: {e}");
            }
            return ExitCode::from(64);
        }
    };
    let result = runtime.block_on(flotilla_hub::run(
        config,
        flotilla_bus::process::shutdown_signal(),
    ));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("flotilla-hub: {e}");
            ExitCode::FAILURE
        }
    }
}
