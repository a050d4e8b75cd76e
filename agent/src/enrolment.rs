//! Secure mode, before the agent has credentials of its own: registration over the bootstrap
//! connection until the hub issues them (the cluster accepted), so the agent's main connection
//! is opened only with credentials that work. A pending or denied agent keeps asking at its poll
//! intervals and does nothing else.

use crate::AgentConfig;
use crate::backend::Backend;
use crate::credentials::AgentCredentials;
use crate::registration::{AskError, ask_hub, busy_wait, registration_request};
use crate::store::LocalStore;
use flotilla_api::v1::RegistrationState;
use flotilla_bus::connect::{self, backoff};
use std::time::Duration;

/// Registers over a bootstrap connection until `credentials` are usable.
pub async fn run(
    config: &AgentConfig,
    backend: &dyn Backend,
    store: &LocalStore,
    credentials: &AgentCredentials,
) -> Result<(), connect::ConnectError> {
    let boot = connect::connect(
        &credentials.bootstrap_config(&config.nats, &config.cluster_name),
        None,
    )
    .await?;
    tracing::info!(cluster = %config.cluster_name, "registering with the bootstrap credentials");
    let source = format!("flotilla-agent/{}", config.cluster_name);
    let mut failures = 0;
    while !credentials.usable() {
        let request = registration_request(config, backend, store, Some(credentials)).await;
        let wait = match ask_hub(&boot, config, &source, &request).await {
            Ok(resp) => {
                failures = 0;
                let state = RegistrationState::try_from(resp.state)
                    .unwrap_or(RegistrationState::Unspecified);
                if let Some(session) = &config.hub_session {
                    session.signal(if state == RegistrationState::Denied {
                        crate::hubs::Signal::Denied
                    } else {
                        crate::hubs::Signal::Alive
                    });
                }
                if !resp.user_jwt.is_empty() {
                    match credentials.store(&resp.user_jwt) {
                        Ok(()) => {
                            tracing::info!("accepted; the hub issued this cluster's credentials");
                            break;
                        }
                        Err(e) => tracing::error!(error = %e, "the hub's credentials are unusable"),
                    }
                }
                match state {
                    // The hub spread its busy agents' times itself: no jitter on top.
                    RegistrationState::Busy => {
                        tracing::debug!("the hub is busy registering others; asking again later");
                        tokio::time::sleep(busy_wait(resp.retry_after_ms)).await;
                        continue;
                    }
                    RegistrationState::Denied => {
                        tracing::warn!(reason = %resp.message, "the hub denied this cluster");
                        config.denied_poll
                    }
                    RegistrationState::Rejected => {
                        tracing::error!(reason = %resp.message, "the hub rejected the registration request");
                        config.denied_poll
                    }
                    RegistrationState::Accepted => {
                        tracing::warn!(
                            "accepted but no credentials issued: is the hub in secure mode, and is this agent's key the cluster's?"
                        );
                        config.pending_poll
                    }
                    _ => {
                        tracing::info!("waiting for the hub to accept this cluster");
                        config.pending_poll
                    }
                }
            }
            Err(AskError::Encode(e)) => {
                tracing::error!(error = %e, "registration request cannot be encoded");
                config.denied_poll
            }
            Err(e @ (AskError::Unanswered(_) | AskError::Unreadable(_) | AskError::NotOurs(_))) => {
                failures += 1;
                tracing::debug!(error = %e, "registration request not answered");
                backoff(failures, Duration::from_secs(30))
            }
        };
        tokio::time::sleep(wait.mul_f64(rand::random_range(0.5..=1.0))).await;
    }
    let _ = boot.drain().await;
    Ok(())
}
