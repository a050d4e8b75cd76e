//! The connection to the hub's gRPC API, and what its failures say to the operator: one line
//! each, naming the hub when it cannot be reached.
//!
//! `--hub` may list several hubs of one control plane (comma-separated): [`Hub::connect`] uses
//! the first that can be reached and says it is serving, and names every hub tried when none
//! can.
//!
//! Before connecting, [`exposure()`] decides what plain `http://` would expose: a bearer token is
//! never sent in the clear to a host other than this one (loopback) unless `--insecure` says so;
//! plain http without a token is allowed with a warning.
//!
//! A hub answers UNAVAILABLE when its store did not answer in time (a JetStream election after a
//! NATS node was lost) and says to retry: [`Hub::idempotent`] and [`Hub::delete`] retry such
//! answers with [`Backoff`] for at most `--retry-seconds`, saying each retry on stderr. Calls
//! that are not safe to repeat go through [`Hub::call`], once.
//!
//! - `connect`: [`Hub::connect`] over a `--hub` list, the health check that passes a hub over.
//! - `credentials`: [`Credentials`] (`--token`, `--ca`, `--exec-command`) and the bearer token
//!   every call carries, refreshed from the exec plugin.
//! - `exposure`: what plain http would expose, decided before connecting (pure).
//! - `services`: one client per service of the hub's API, with its message limits.
//! - `retry`: calls made once, idempotent calls and deletes retried with [`Backoff`].
//! - `failure`: how a failed call is worded for the operator.

mod connect;
mod credentials;
mod exposure;
mod failure;
mod retry;
mod services;

pub use connect::endpoints;
pub use credentials::{Bearer, Credentials, HubChannel};
pub use exposure::{Cleartext, Exposure, exposure, is_loopback};
pub use retry::{Backoff, DEFAULT_RETRY_SECONDS, Deleted};

use std::time::Duration;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

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

impl Hub {
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
}
