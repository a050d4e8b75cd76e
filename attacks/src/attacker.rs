//! The attacker: an independent async-nats client holding exactly one credentials file a spoke
//! holds (the fleet's `bootstrap.creds`, a join credential, or one cluster's `cluster.creds`),
//! never the hub's.

use crate::wire::{self, Registration};
use bytes::Bytes;
use flotilla_api::v1::RegistrationResponse;
use futures::StreamExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Why the attacker could not do what it tried (its failure, not the hub's refusal: a refused
/// connection is an [`Outcome`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The credentials file cannot be read as one.
    #[error("reading {}: {source}", .path.display())]
    Creds {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The server did not complete the connection within [`CONNECT`].
    #[error("connecting with {} timed out", .path.display())]
    ConnectTimedOut {
        /// The credentials file.
        path: PathBuf,
    },
    /// The server refused the connection.
    #[error("connecting with {}: {source}", .path.display())]
    Connect {
        /// The credentials file.
        path: PathBuf,
        /// Why.
        #[source]
        source: async_nats::ConnectError,
    },
    /// A subscription was refused.
    #[error("subscribing to {subject}: {source}")]
    Subscribe {
        /// Its subject.
        subject: String,
        /// Why.
        #[source]
        source: async_nats::SubscribeError,
    },
    /// A registration request could not be published.
    #[error("publishing the registration: {0}")]
    Publish(#[source] async_nats::PublishError),
    /// The reply subscription ended before an answer.
    #[error("the reply subscription ended")]
    ReplyEnded,
    /// Nobody answered a registration in time.
    #[error("no answer within {0:?}")]
    NoAnswer(Duration),
    /// The answer is not a registration response.
    #[error(transparent)]
    Answer(#[from] wire::AnswerError),
}

/// The root of every registration-only inbox (bootstrap and join credentials).
pub const BOOTSTRAP_INBOX: &str = "_INBOX_bootstrap";

/// How long one connection attempt may take.
pub const CONNECT: Duration = Duration::from_secs(5);

/// How long a registration request waits for its answer.
pub const ANSWER: Duration = Duration::from_secs(5);

/// A NATS client with a spoke's credentials.
pub struct Attacker {
    /// The connection.
    pub client: async_nats::Client,
    /// The credentials file it connected with.
    pub creds: PathBuf,
    /// The inbox prefix its replies use (the only inbox its credentials may read).
    pub inbox: String,
    /// The NKey of the credentials (a cluster's agent key for `cluster.creds`).
    pub key: Option<nkeys::KeyPair>,
    events: Arc<Mutex<Vec<String>>>,
}

/// Connection options for `creds`, trusting `ca` when the server speaks TLS.
async fn options(creds: &Path, ca: Option<&Path>) -> Result<async_nats::ConnectOptions, Error> {
    let mut opts = async_nats::ConnectOptions::with_credentials_file(creds)
        .await
        .map_err(|source| Error::Creds {
            path: creds.to_path_buf(),
            source,
        })?
        .connection_timeout(CONNECT)
        .request_timeout(Some(Duration::from_secs(5)));
    if let Some(ca) = ca {
        opts = opts
            .add_root_certificates(ca.to_path_buf())
            .require_tls(true);
    }
    Ok(opts)
}

/// The seed of a credentials file (the line after `BEGIN USER NKEY SEED`).
pub fn creds_key(creds: &Path) -> Option<nkeys::KeyPair> {
    let text = std::fs::read_to_string(creds).ok()?;
    let seed = text
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("SU") && l.len() == 58)?;
    nkeys::KeyPair::from_seed(seed).ok()
}

/// How a connection attempt with some credentials ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Connected and stayed connected.
    Connected,
    /// The server refused the connection or cut it with this error.
    Refused(String),
}

/// Tries to connect with `creds` and watches the connection for `watch`: refused when the
/// connect fails or the server reports an authorization error or disconnects it meanwhile.
pub async fn try_connect(url: &str, creds: &Path, ca: Option<&Path>, watch: Duration) -> Outcome {
    let events = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = events.clone();
    let opts = match options(creds, ca).await {
        Ok(o) => o.event_callback(move |e| {
            let sink = sink.clone();
            async move {
                sink.lock().unwrap().push(e.to_string());
            }
        }),
        Err(e) => return Outcome::Refused(e.to_string()),
    };
    let client = match tokio::time::timeout(CONNECT, opts.connect(url)).await {
        Err(_) => return Outcome::Refused("connect timed out".into()),
        Ok(Err(e)) => return Outcome::Refused(e.to_string()),
        Ok(Ok(c)) => c,
    };
    let deadline = tokio::time::Instant::now() + watch;
    loop {
        let seen = events.lock().unwrap().clone();
        if let Some(e) = seen.iter().find(|e| {
            let e = e.to_lowercase();
            e.contains("authorization") || e.contains("disconnect") || e.contains("revoked")
        }) {
            return Outcome::Refused(e.clone());
        }
        if tokio::time::Instant::now() >= deadline {
            break;
        }
        let _ = tokio::time::timeout(Duration::from_millis(200), client.flush()).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if client.connection_state() == async_nats::connection::State::Connected {
        Outcome::Connected
    } else {
        Outcome::Refused(format!("connection state {:?}", client.connection_state()))
    }
}

impl Attacker {
    /// Connects to `url` with `creds`, replies on `inbox`.
    pub async fn connect(
        url: &str,
        creds: &Path,
        inbox: &str,
        ca: Option<&Path>,
    ) -> Result<Self, Error> {
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = events.clone();
        let opts = options(creds, ca)
            .await?
            .custom_inbox_prefix(inbox)
            .event_callback(move |e| {
                let sink = sink.clone();
                async move {
                    sink.lock().unwrap().push(e.to_string());
                }
            });
        let client = tokio::time::timeout(CONNECT, opts.connect(url))
            .await
            .map_err(|_| Error::ConnectTimedOut {
                path: creds.to_path_buf(),
            })?
            .map_err(|source| Error::Connect {
                path: creds.to_path_buf(),
                source,
            })?;
        Ok(Self {
            client,
            creds: creds.to_path_buf(),
            inbox: inbox.to_string(),
            key: creds_key(creds),
            events,
        })
    }

    /// The public key of the credentials.
    pub fn public_key(&self) -> String {
        self.key
            .as_ref()
            .map(|k| k.public_key())
            .unwrap_or_default()
    }

    /// Publishes `payload` on `subject` with `reply` as its reply subject (no subscription to
    /// it: the attacker does not want the answer, it wants whoever answers to write there).
    pub async fn publish(&self, subject: &str, reply: Option<&str>, payload: Bytes) {
        let result = match reply {
            Some(r) => {
                self.client
                    .publish_with_reply_and_headers(
                        subject.to_string(),
                        r.to_string(),
                        wire::headers(),
                        payload,
                    )
                    .await
            }
            None => {
                self.client
                    .publish_with_headers(subject.to_string(), wire::headers(), payload)
                    .await
            }
        };
        if let Err(e) = result {
            self.events
                .lock()
                .unwrap()
                .push(format!("publish {subject}: {e}"));
        }
    }

    /// Publishes every `(subject, payload)` into JetStream and waits (bounded) for each
    /// acknowledgement, so that the stream has taken or refused all of them before the caller
    /// looks: (stored, refused or unanswered).
    pub async fn publish_acked(&self, messages: Vec<(String, Bytes)>) -> (usize, usize) {
        let js = async_nats::jetstream::new(self.client.clone());
        let mut acks = Vec::with_capacity(messages.len());
        let mut refused = 0;
        for (subject, payload) in messages {
            match js
                .publish_with_headers(subject, wire::headers(), payload)
                .await
            {
                Ok(ack) => acks.push(ack.into_future()),
                Err(_) => refused += 1,
            }
        }
        let results =
            tokio::time::timeout(Duration::from_secs(30), futures::future::join_all(acks))
                .await
                .unwrap_or_default();
        let stored = results.iter().filter(|r| r.is_ok()).count();
        (stored, refused + results.len() - stored)
    }

    /// Waits until the server has everything published so far (bounded).
    pub async fn flush(&self) {
        let _ = tokio::time::timeout(Duration::from_secs(10), self.client.flush()).await;
    }

    /// A fresh reply subject for a registration of `name`, in the inbox space a real agent
    /// would use: `_INBOX_bootstrap.<name>.…` with registration-only credentials (bootstrap
    /// or join), the connection's own inbox with a cluster's credentials.
    pub fn reply_for(&self, name: &str) -> String {
        let root = if self.inbox.starts_with(BOOTSTRAP_INBOX) {
            format!("{BOOTSTRAP_INBOX}.{name}")
        } else {
            self.inbox.clone()
        };
        format!("{root}.{}", uuid::Uuid::new_v4().simple())
    }

    /// Sends `reg` as a request on its registration subject and decodes the answer.
    pub async fn register(&self, reg: &Registration) -> Result<RegistrationResponse, Error> {
        let reply = self.reply_for(&reg.cluster);
        let mut sub = self.subscribe(&reply).await?;
        self.client
            .publish_with_reply_and_headers(
                wire::register_subject(&reg.cluster),
                reply.clone(),
                wire::headers(),
                reg.event(),
            )
            .await
            .map_err(Error::Publish)?;
        self.flush().await;
        let answer = tokio::time::timeout(ANSWER, sub.next()).await;
        let _ = sub.unsubscribe().await;
        match answer {
            Ok(Some(m)) => Ok(wire::registration_response(&m.payload)?),
            Ok(None) => Err(Error::ReplyEnded),
            Err(_) => Err(Error::NoAnswer(ANSWER)),
        }
    }

    /// Registers `reg` `times` times, `every` apart (as an agent polls), and returns every
    /// answer (errors for requests nobody answered).
    pub async fn register_repeatedly(
        &self,
        reg: &Registration,
        times: usize,
        every: Duration,
    ) -> Vec<Result<RegistrationResponse, Error>> {
        let mut out = Vec::new();
        for i in 0..times {
            if i > 0 {
                tokio::time::sleep(every).await;
            }
            out.push(self.register(reg).await);
        }
        out
    }

    /// Subscribes to `filter` (e.g. every bootstrap inbox, to collect a flood's answers).
    pub async fn subscribe(&self, filter: &str) -> Result<async_nats::Subscriber, Error> {
        self.client
            .subscribe(filter.to_string())
            .await
            .map_err(|source| Error::Subscribe {
                subject: filter.to_string(),
                source,
            })
    }

    /// Collects messages from `sub` until `want` arrived, nothing came for `quiet`, or
    /// `limit` passed.
    pub async fn collect(
        sub: &mut async_nats::Subscriber,
        want: usize,
        quiet: Duration,
        limit: Duration,
    ) -> Vec<async_nats::Message> {
        let deadline = tokio::time::Instant::now() + limit;
        let mut out = Vec::new();
        while out.len() < want {
            let wait = quiet.min(deadline.saturating_duration_since(tokio::time::Instant::now()));
            match tokio::time::timeout(wait, sub.next()).await {
                Ok(Some(m)) => out.push(m),
                _ => break,
            }
        }
        out
    }

    /// Connection events and publish errors seen so far (permission violations among them).
    pub fn events(&self) -> Vec<String> {
        self.events.lock().unwrap().clone()
    }
}
