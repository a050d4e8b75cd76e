//! NATS connection options shared by hub, agents and tools: unbounded reconnects with jittered
//! exponential backoff, a per-cluster inbox prefix, credentials and TLS hooks, and connection
//! events forwarded to the owner (agents resync on every reconnect).

use async_nats::{Client, ConnectOptions, ServerAddr};
use rand::Rng;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;
use tokio::sync::mpsc;

/// How often a client whose credentials were refused tries again until it has new ones.
pub const REFUSED_RETRY: Duration = Duration::from_secs(30);

/// The default NATS URL of every Flotilla binary.
pub const DEFAULT_NATS_URL: &str = "nats://127.0.0.1:4222";

/// How often a client pings its server when nothing else tells it the link is alive (the
/// async-nats default). A silent partition is noticed after about three intervals; the hub sets
/// a shorter one (about a third of its shard lease TTL).
pub const DEFAULT_PING_INTERVAL: Duration = Duration::from_secs(60);

/// The NATS flags every Flotilla binary takes (`#[command(flatten)]` them), with their
/// `FLOTILLA_NATS_*` environment variables.
#[derive(clap::Args, Debug, Clone, PartialEq, Eq)]
pub struct NatsArgs {
    /// NATS server URL(s), comma-separated (`nats://a:4222,nats://b:4222`): the client connects
    /// to any of them and fails over between them (and, with `--nats-ca`, the cluster peers
    /// the servers advertise: list every server of a cluster without it).
    #[arg(long = "nats-url", env = "FLOTILLA_NATS_URL", default_value = DEFAULT_NATS_URL)]
    pub url: String,
    /// NATS credentials file (.creds: user JWT and NKey seed).
    #[arg(long = "nats-creds", env = "FLOTILLA_NATS_CREDS")]
    pub creds: Option<PathBuf>,
    /// CA bundle to verify the NATS server's TLS certificate. Pinning it is what authenticates
    /// the server: without it TLS trusts the system's roots (any public certificate for the
    /// host), so secure mode over TLS requires it, and the servers a server advertises are
    /// followed only with it (docs/security.md, "The transport").
    #[arg(long = "nats-ca", env = "FLOTILLA_NATS_CA")]
    pub ca: Option<PathBuf>,
    /// Start TLS before the server's first line (`handshake_first` on nats-server 2.10.4+;
    /// `flotilla-hub init --tls-first` writes it): nothing, not even the server's INFO, then
    /// crosses the link in plaintext.
    #[arg(long = "nats-tls-first", env = "FLOTILLA_NATS_TLS_FIRST")]
    pub tls_first: bool,
}

impl NatsArgs {
    /// Plain flags for `url` (no credentials, no TLS).
    pub fn url(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            creds: None,
            ca: None,
            tls_first: false,
        }
    }

    /// Connection settings from these flags, named `name` on the server.
    pub fn config(&self, name: impl Into<String>) -> NatsConfig {
        let mut cfg = NatsConfig::new(self.url.clone(), name);
        self.apply_to(&mut cfg);
        cfg
    }

    /// Sets the URL, credentials and CA of `cfg` from these flags, keeping its other settings.
    pub fn apply_to(&self, cfg: &mut NatsConfig) {
        cfg.url = self.url.clone();
        cfg.credentials_file = self.creds.clone();
        cfg.tls_ca_file = self.ca.clone();
        cfg.tls_first = self.tls_first;
    }
}

/// Credentials chosen at every (re)connect, so a secure-mode agent can switch to new or renewed
/// credentials without a new client (and without dropping its subscriptions).
pub trait Authenticator: Send + Sync + std::fmt::Debug {
    /// The user JWT and NKey seed to present now, or why there are none yet.
    fn credentials(&self) -> Result<(String, String), String>;
    /// The server refused the credentials last presented (revoked, expired or unknown).
    fn refused(&self);
}

/// A NATS token: `Debug` prints `<redacted>`.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(pub String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// How to reach and authenticate to NATS.
#[derive(Debug, Clone)]
pub struct NatsConfig {
    /// Server URL(s), comma-separated (`nats://127.0.0.1:4222`).
    pub url: String,
    /// Connection name shown by the server (`flotilla-hub`, `flotilla-agent/<cluster>`).
    pub name: String,
    /// Inbox prefix for replies (agents use `_INBOX.<cluster>`).
    pub inbox_prefix: Option<String>,
    /// `.creds` file (user JWT + NKey seed).
    pub credentials_file: Option<PathBuf>,
    /// File holding an NKey seed.
    pub nkey_seed_file: Option<PathBuf>,
    /// Token authentication. Never logged.
    pub token: Option<Token>,
    /// Credentials chosen at each connect (takes precedence over the files above).
    pub auth: Option<Arc<dyn Authenticator>>,
    /// CA bundle to verify the server.
    pub tls_ca_file: Option<PathBuf>,
    /// Client certificate and key for mutual TLS.
    pub tls_client_cert: Option<(PathBuf, PathBuf)>,
    /// Refuse plaintext connections.
    pub require_tls: bool,
    /// TLS before the server's INFO line (the server must have `handshake_first`).
    pub tls_first: bool,
    /// Upper bound of the reconnect backoff.
    pub max_reconnect_delay: Duration,
    /// Timeout of request/reply calls.
    pub request_timeout: Duration,
    /// Capacity of the client's outgoing command channel.
    pub client_capacity: usize,
    /// Capacity of each subscription's channel.
    pub subscription_capacity: usize,
    /// How often the client pings the server; after more than two unanswered pings it drops
    /// the connection and fails over to the next URL. Default [`DEFAULT_PING_INTERVAL`].
    pub ping_interval: Duration,
}

impl NatsConfig {
    /// Defaults for `url` with the given connection name.
    pub fn new(url: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            name: name.into(),
            inbox_prefix: None,
            credentials_file: None,
            nkey_seed_file: None,
            token: None,
            auth: None,
            tls_ca_file: None,
            tls_client_cert: None,
            require_tls: false,
            tls_first: false,
            max_reconnect_delay: Duration::from_secs(8),
            request_timeout: Duration::from_secs(5),
            client_capacity: 2048,
            subscription_capacity: 8192,
            ping_interval: DEFAULT_PING_INTERVAL,
        }
    }
}

/// Splits a comma-separated NATS URL list (`nats://a:4222,nats://b:4222`) and parses every
/// entry; surrounding spaces and empty entries (a trailing comma) are ignored. An entry without
/// a scheme means `nats://`, without a port `4222` (async-nats' rules). The client connects to
/// one of them and fails over to the others (plus any the servers advertise).
///
/// Errors name the bad entry and its position, or say that the list is empty.
pub fn parse_urls(urls: &str) -> Result<Vec<ServerAddr>, UrlError> {
    let entries: Vec<&str> = urls
        .split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .collect();
    if entries.is_empty() {
        return Err(UrlError::Empty {
            urls: urls.to_string(),
        });
    }
    let count = entries.len();
    entries
        .into_iter()
        .enumerate()
        .map(|(i, entry)| {
            let bad = |reason: String| UrlError::Invalid {
                entry: entry.to_string(),
                position: i + 1,
                count,
                reason,
            };
            let addr: ServerAddr = entry
                .parse()
                .map_err(|e: std::io::Error| bad(e.to_string()))?;
            if addr.host().is_empty() {
                return Err(bad("no host".into()));
            }
            Ok(addr)
        })
        .collect()
}

/// A NATS URL list that cannot be used.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum UrlError {
    /// No URL at all.
    #[error(
        "no NATS URL given ({urls:?}): give one or more, comma-separated (nats://host:4222,nats://other:4222)"
    )]
    Empty {
        /// What was given.
        urls: String,
    },
    /// One entry is not a NATS URL.
    #[error(
        "NATS URL {position} of {count}, {entry:?}, is invalid: {reason} (expected nats://host:port or tls://host:port, comma-separated)"
    )]
    Invalid {
        /// The entry, as given.
        entry: String,
        /// Its 1-based position in the list.
        position: usize,
        /// How many entries the list has.
        count: usize,
        /// What is wrong with it.
        reason: String,
    },
}

// The transport rules are pure and the CLI (which links no NATS client) checks them too
// (`flotilla join`): they live in `flotilla_api::transport`.
pub use flotilla_api::transport::{check_transport, is_loopback_host, tls_required};

/// A connection problem that no retry can fix (bad credentials file, bad URL).
#[derive(Debug, Error)]
pub enum ConnectError {
    /// Credentials could not be read.
    #[error("reading NATS credentials {path}: {source}")]
    Credentials {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The URL list is unusable.
    #[error(transparent)]
    Url(#[from] UrlError),
    /// The client refused the options.
    #[error("connecting to NATS at {url}: {source}")]
    Connect {
        /// The URL.
        url: String,
        /// The client's error.
        #[source]
        source: async_nats::ConnectError,
    },
}

/// What happened to the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionEvent {
    /// (Re)connected: resync now.
    Connected,
    /// Lost the server; the client keeps retrying.
    Disconnected,
    /// A subscription dropped messages because its owner was slow.
    SlowConsumer,
    /// The server refused the credentials (revoked, expired, unknown); the client keeps trying
    /// with whatever its [`Authenticator`] offers next.
    Refused,
}

/// How often a connection logs the messages its client dropped (slow consumers).
const DROP_LOG_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Messages a connection's client dropped since it last logged them.
#[derive(Debug, Default)]
struct DropLog {
    logged: Option<std::time::Instant>,
    dropped: u64,
}

impl DropLog {
    /// Counts one dropped message at `now`; the count to log, when it is time to (else 0).
    fn note(&mut self, now: std::time::Instant) -> u64 {
        self.dropped += 1;
        if self
            .logged
            .is_some_and(|t| now.duration_since(t) < DROP_LOG_EVERY)
        {
            return 0;
        }
        self.logged = Some(now);
        std::mem::take(&mut self.dropped)
    }
}

/// Whether a client or server error says the credentials were refused.
fn is_refusal(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    t.contains("authorization violation")
        || t.contains("authentication expired")
        || t.contains("authentication revoked")
        || t.contains("authentication timeout")
}

/// Whether a client adds the servers its servers advertise to its list: only when their
/// certificates are checked against a pinned CA (see [`connect`]). Without one, operators list
/// every server of the cluster in the URL list (docs/ha.md).
pub fn follows_discovered_servers(cfg: &NatsConfig) -> bool {
    cfg.tls_ca_file.is_some()
}

/// Reconnect delay: exponential from 100 ms, capped, with full jitter in [50 %, 100 %] so that
/// thousands of agents cut off together do not come back in lock-step.
pub fn backoff(attempt: usize, max: Duration) -> Duration {
    let exp = Duration::from_millis(100).saturating_mul(1u32 << attempt.min(16));
    let capped = exp.min(max);
    capped.mul_f64(rand::rng().random_range(0.5..=1.0))
}

/// Connects with unbounded reconnects. Returns at once even when the server is down (the
/// client connects in the background); `events` receives every connection change.
///
/// `cfg.url` may be a comma-separated list: every entry is validated first (a bad one is a
/// [`ConnectError::Url`] naming it), then the client connects to any of them and fails over
/// between them, and — with a pinned CA only ([`follows_discovered_servers`]) — to the cluster
/// peers the servers advertise.
pub async fn connect(
    cfg: &NatsConfig,
    events: Option<mpsc::UnboundedSender<ConnectionEvent>>,
) -> Result<Client, ConnectError> {
    let addrs = parse_urls(&cfg.url)?;
    let mut opts = match (&cfg.auth, &cfg.credentials_file) {
        (Some(auth), _) => {
            let auth = auth.clone();
            ConnectOptions::with_auth_callback(move |nonce| {
                let chosen = auth.credentials();
                async move {
                    let (jwt, seed) = chosen.map_err(async_nats::AuthError::new)?;
                    let key = nkeys::KeyPair::from_seed(&seed)
                        .map_err(|e| async_nats::AuthError::new(e.to_string()))?;
                    let signature = key
                        .sign(&nonce)
                        .map_err(|e| async_nats::AuthError::new(e.to_string()))?;
                    let mut a = async_nats::Auth::new();
                    a.jwt = Some(jwt);
                    a.signature = Some(signature);
                    Ok(a)
                }
            })
        }
        (None, Some(path)) => ConnectOptions::with_credentials_file(path.clone())
            .await
            .map_err(|source| ConnectError::Credentials {
                path: path.clone(),
                source,
            })?,
        (None, None) => ConnectOptions::new(),
    };
    if let Some(path) = &cfg.nkey_seed_file {
        let seed = std::fs::read_to_string(path).map_err(|source| ConnectError::Credentials {
            path: path.clone(),
            source,
        })?;
        opts = opts.nkey(seed.trim().to_string());
    }
    if let Some(token) = &cfg.token {
        opts = opts.token(token.0.clone());
    }
    if let Some(ca) = &cfg.tls_ca_file {
        opts = opts.add_root_certificates(ca.clone());
    }
    if let Some((cert, key)) = &cfg.tls_client_cert {
        opts = opts.add_client_certificate(cert.clone(), key.clone());
    }
    if let Some(prefix) = &cfg.inbox_prefix {
        opts = opts.custom_inbox_prefix(prefix);
    }
    if !follows_discovered_servers(cfg) {
        // A server's INFO line, which lists the cluster's other servers, crosses the link in
        // plaintext before TLS starts: whoever is on the path can add their own server to it.
        // Only a pinned CA makes such a server useless to them (it holds no certificate of
        // that CA); without one the client keeps to the URLs it was given.
        opts = opts.ignore_discovered_servers();
    }
    if cfg.tls_first {
        opts = opts.tls_first();
    }
    let max_delay = cfg.max_reconnect_delay;
    let waiting_for = cfg.auth.clone();
    opts = opts
        .name(&cfg.name)
        .require_tls(cfg.require_tls)
        .retry_on_initial_connect()
        .max_reconnects(None)
        .connection_timeout(Duration::from_secs(5))
        .ping_interval(cfg.ping_interval)
        .request_timeout(Some(cfg.request_timeout))
        .client_capacity(cfg.client_capacity)
        .subscription_capacity(cfg.subscription_capacity)
        .reconnect_delay_callback(move |attempt| {
            // Without usable credentials (refused, waiting for new ones) there is no point in
            // knocking often: the owner gets new credentials over another connection.
            if waiting_for
                .as_ref()
                .is_some_and(|a| a.credentials().is_err())
            {
                backoff(16, REFUSED_RETRY)
            } else {
                backoff(attempt, max_delay)
            }
        });
    let name = cfg.name.clone();
    let auth = cfg.auth.clone();
    let drops = Arc::new(std::sync::Mutex::new(DropLog::default()));
    opts = opts.event_callback(move |event| {
        let events = events.clone();
        let name = name.clone();
        let auth = auth.clone();
        let drops = drops.clone();
        async move {
            let mapped = match &event {
                async_nats::Event::Connected => Some(ConnectionEvent::Connected),
                async_nats::Event::Disconnected => Some(ConnectionEvent::Disconnected),
                async_nats::Event::SlowConsumer(_) => Some(ConnectionEvent::SlowConsumer),
                async_nats::Event::ServerError(_) | async_nats::Event::ClientError(_)
                    if is_refusal(&event.to_string()) =>
                {
                    tracing::warn!(conn = %name, event = %event, "NATS refused the credentials");
                    if let Some(a) = &auth {
                        a.refused();
                    }
                    Some(ConnectionEvent::Refused)
                }
                _ => None,
            };
            match &event {
                async_nats::Event::Connected => tracing::info!(conn = %name, "nats connected"),
                async_nats::Event::Disconnected => {
                    tracing::warn!(conn = %name, "nats disconnected")
                }
                // Messages were lost: the owner of a subscription did not keep up. One event per
                // dropped message: logged at most every DROP_LOG_EVERY, with the count.
                async_nats::Event::SlowConsumer(_) => {
                    let dropped = drops
                        .lock()
                        .map_or(0, |mut d| d.note(std::time::Instant::now()));
                    if dropped > 0 {
                        tracing::warn!(
                            conn = %name,
                            dropped,
                            "subscriptions' buffers were full: the client dropped messages"
                        );
                    }
                }
                other => tracing::debug!(conn = %name, event = %other, "nats event"),
            }
            if let (Some(tx), Some(ev)) = (events, mapped) {
                let _ = tx.send(ev);
            }
        }
    });
    opts.connect(addrs)
        .await
        .map_err(|source| ConnectError::Connect {
            url: cfg.url.clone(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropped_messages_are_logged_at_most_every_ten_seconds_with_their_count() {
        let t0 = std::time::Instant::now();
        let mut log = DropLog::default();
        assert_eq!(log.note(t0), 1, "the first drop is logged at once");
        for k in 1..=4 {
            assert_eq!(
                log.note(t0 + Duration::from_secs(k)),
                0,
                "within ten seconds"
            );
        }
        assert_eq!(
            log.note(t0 + DROP_LOG_EVERY),
            5,
            "then every drop since, counted"
        );
        assert_eq!(log.note(t0 + DROP_LOG_EVERY + Duration::from_secs(1)), 0);
    }

    #[test]
    fn discovered_servers_are_followed_only_with_a_pinned_ca() {
        let mut cfg = NatsConfig::new("tls://hub:4222", "t");
        assert!(!follows_discovered_servers(&cfg));
        cfg.tls_ca_file = Some("ca.pem".into());
        assert!(follows_discovered_servers(&cfg));
    }

    #[test]
    fn a_url_list_is_split_trimmed_and_parsed_entry_by_entry() {
        let addrs = parse_urls(" nats://127.0.0.1:4222, tls://b.example:4333 ,c,").unwrap();
        let got: Vec<(String, String, u16)> = addrs
            .iter()
            .map(|a| (a.scheme().to_string(), a.host().to_string(), a.port()))
            .collect();
        assert_eq!(
            got,
            [
                ("nats".into(), "127.0.0.1".into(), 4222),
                ("tls".into(), "b.example".into(), 4333),
                ("nats".into(), "c".into(), 4222),
            ]
        );
        let one = parse_urls("nats://user:pw@[::1]:4222").unwrap();
        assert_eq!((one[0].host(), one[0].port()), ("::1", 4222));
        assert!(one[0].has_user_pass());
    }

    #[test]
    fn a_bad_entry_is_named_with_its_position() {
        let e = parse_urls("nats://a:4222,nats://b:42x22,nats://c:4222").unwrap_err();
        let UrlError::Invalid {
            entry,
            position,
            count,
            ..
        } = &e
        else {
            panic!("{e:?}")
        };
        assert_eq!(
            (entry.as_str(), *position, *count),
            ("nats://b:42x22", 2, 3)
        );
        assert!(e.to_string().contains("\"nats://b:42x22\""), "{e}");
        assert!(e.to_string().contains("port"), "{e}");

        let e = parse_urls("nats://a:4222,http://b:80").unwrap_err();
        assert!(
            e.to_string().contains("http://b:80") && e.to_string().contains("scheme"),
            "{e}"
        );
        assert!(matches!(parse_urls(" , ,"), Err(UrlError::Empty { .. })));
        assert!(matches!(parse_urls(""), Err(UrlError::Empty { .. })));
    }

    #[tokio::test]
    async fn connect_refuses_a_bad_list_before_connecting() {
        let cfg = NatsConfig::new("nats://127.0.0.1:4222,nats://:99999", "test");
        let e = connect(&cfg, None).await.unwrap_err();
        assert!(
            matches!(&e, ConnectError::Url(UrlError::Invalid { position: 2, .. })),
            "{e:?}"
        );
    }

    #[test]
    fn backoff_grows_is_capped_and_jittered() {
        let max = Duration::from_secs(8);
        for attempt in 0..40 {
            let d = backoff(attempt, max);
            assert!(d <= max, "attempt {attempt}: {d:?}");
        }
        let first = backoff(0, max);
        assert!(first >= Duration::from_millis(50) && first <= Duration::from_millis(100));
        let late = backoff(30, max);
        assert!(late >= Duration::from_secs(4));
    }
}
