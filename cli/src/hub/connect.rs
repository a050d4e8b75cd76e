//! [`Hub::connect`]: the first hub of a `--hub` list that can be reached and says it is
//! serving, every entry checked before any is contacted.

use super::credentials::{Bearer, Credentials, bearer_value};
use super::exposure::{Exposure, exposure};
use super::failure::{innermost, unreachable};
use super::{DEFAULT_RETRY_SECONDS, Hub};
use anyhow::{Context, Result, anyhow, bail};
use std::error::Error as _;
use std::time::Duration;
use tonic::Code;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

/// How long connecting to the hub may take before the CLI gives up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

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
    /// connecting ([`Cleartext`](super::Cleartext)); other plain http off loopback is warned
    /// about on stderr.
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
                bearer: Bearer::new(bearer),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hub::Cleartext;

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
}
