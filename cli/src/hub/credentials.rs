//! How the CLI proves who it is: [`Credentials`] from the flags, and the bearer token every call
//! carries ([`Bearer`]), refreshed from the exec plugin when the hub answers UNAUTHENTICATED.

use super::Hub;
use anyhow::{Result, anyhow};
use std::sync::{Arc, RwLock};
use tonic::metadata::AsciiMetadataValue;
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tonic::{Request, Status};

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
pub(super) fn bearer_value(token: &str) -> Result<AsciiMetadataValue> {
    format!("Bearer {token}")
        .parse::<AsciiMetadataValue>()
        .map_err(|_| anyhow!("--token: a token is printable ASCII"))
}

/// The channel every client uses: the connection plus the bearer token.
pub type HubChannel = InterceptedService<Channel, Bearer>;

impl Bearer {
    /// Sends `value` (`None`: no token) with every call.
    pub(super) fn new(value: Option<AsciiMetadataValue>) -> Self {
        Self(Arc::new(RwLock::new(value)))
    }
}

impl Hub {
    /// Runs the exec credential plugin again and sends its token from now on; whether there
    /// was a plugin to run.
    pub(super) async fn refresh(&self) -> Result<bool> {
        let Some(exec) = &self.exec else {
            return Ok(false);
        };
        let token = exec.token().await?;
        *self.bearer.0.write().unwrap_or_else(|e| e.into_inner()) = Some(bearer_value(&token)?);
        Ok(true)
    }
}
