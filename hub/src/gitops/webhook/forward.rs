//! Where a webhook goes: this hub's GitRepos while it holds the controllers, otherwise the hub
//! that does, over NATS (`flotilla.hub.controllers.gitops.webhook`, hub account only): a
//! request whose payload is a `flotilla.v1.GitWebhookForward`, its `GitWebhook` sealed with the
//! control plane's sealing key ([`crate::sealed::Purpose::Webhook`]) where the hubs share one.
//! Without a shared key a webhook is forwarded in clear unless it carries a GitLab token (the
//! secret itself), which is refused with 503 and says why. The holder answers a
//! `flotilla.v1.GitWebhookAnswer`; no answer within [`FORWARD_TIMEOUT`] is a 503.
//!
//! The holder's subscription ([`serve`]) runs with the GitRepo family, so it is where the
//! Secrets are: verification happens there and nowhere else. A box replayed by someone holding
//! the hub account's credentials only runs the same checks again (a delivery whose commit is
//! fetched already fetches nothing).

use super::{Answer, Delivery, Outcome, verify::Provider};
use crate::gitops::GitRepos;
use crate::keys::ObjectRef;
use crate::sealed::{HubSeal, Purpose};
use flotilla_api::v1::{GitWebhook, GitWebhookAnswer, GitWebhookForward};
use futures::StreamExt;
use prost::Message as _;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tracing::Instrument;

/// The subject webhooks travel on to the controllers' hub.
pub const SUBJECT: &str = "flotilla.hub.controllers.gitops.webhook";
/// The wire version.
pub const VERSION: u32 = 1;
/// How long a forwarding hub waits for the holder's answer.
pub const FORWARD_TIMEOUT: Duration = Duration::from_secs(2);
/// Webhooks the holder checks at once; more wait in the subscription.
const IN_FLIGHT: usize = 64;

/// Hands a webhook to the hub holding the controllers.
#[derive(Clone)]
pub struct Route {
    /// Whether this hub holds the controllers, and their GitRepos.
    pub units: Arc<crate::units::Units>,
    /// NATS, to forward.
    pub nats: async_nats::Client,
    /// The control plane's sealing.
    pub seal: HubSeal,
}

impl Route {
    /// What became of `d`: checked here when this hub holds the controllers, else by the hub
    /// that does.
    pub async fn deliver(&self, d: Delivery) -> Answer {
        let local = self
            .units
            .controllers()
            .and_then(|c| c.try_get::<GitRepos>());
        match local {
            Some(repos) => repos.hook(&d).await,
            None => self.forward(d).await,
        }
    }

    async fn forward(&self, d: Delivery) -> Answer {
        let provider = Provider::of(&d.headers).map(|(p, _)| p);
        let unavailable = |why: String| Answer::new(Outcome::Unavailable, provider, why);
        let inner = to_proto(&d).encode_to_vec();
        let mut outer = GitWebhookForward {
            version: VERSION,
            ..Default::default()
        };
        if self.seal.shared() {
            match self.seal.seal_shared(Purpose::Webhook, &inner) {
                Ok(sealed) => outer.sealed = sealed,
                Err(e) => return unavailable(format!("the webhook could not be sealed: {e}")),
            }
        } else if d.headers.contains_key("x-gitlab-token") {
            return unavailable(
                "this hub does not hold the controllers and shares no sealing key with the one \
                 that does: a GitLab token is not sent between hubs in clear (give every hub \
                 the same --sealing-key-file, or send webhooks to the controllers' hub)"
                    .into(),
            );
        } else {
            outer.clear = Some(to_proto(&d));
        }
        let payload = outer.encode_to_vec();
        let max_payload = self.nats.server_info().max_payload;
        if let Some(refused) = too_large(payload.len(), max_payload, provider) {
            return refused;
        }
        let asked = self.nats.request(SUBJECT, payload.into());
        match tokio::time::timeout(FORWARD_TIMEOUT, asked).await {
            Ok(Ok(reply)) => match GitWebhookAnswer::decode(reply.payload) {
                Ok(a) => Answer::new(
                    Outcome::from_label(&a.result),
                    Provider::ALL.into_iter().find(|p| p.name() == a.provider),
                    a.message,
                ),
                Err(e) => unavailable(format!("the controllers' hub answered garbage: {e}")),
            },
            Ok(Err(e)) => unavailable(format!(
                "no hub holding the controllers answered (takeover in progress?): {e}"
            )),
            Err(_) => unavailable(format!(
                "the hub holding the controllers did not answer within {} s",
                FORWARD_TIMEOUT.as_secs()
            )),
        }
    }
}

/// Room kept under NATS' `max_payload` for a request's subject, reply inbox and headers.
const NATS_OVERHEAD: usize = 1024;

/// The answer to a forwarded payload of `len` bytes that NATS would refuse (`max_payload`: the
/// server's, `0` when unknown: not checked), naming both: 413, and what to do.
pub fn too_large(len: usize, max_payload: usize, provider: Option<Provider>) -> Option<Answer> {
    if max_payload == 0 || len + NATS_OVERHEAD <= max_payload {
        return None;
    }
    Some(Answer::new(
        Outcome::TooLarge,
        provider,
        format!(
            "the webhook is {len} bytes forwarded between hubs, past the NATS server's \
             max_payload of {max_payload} bytes: send webhooks to the hub holding the \
             controllers, or raise max_payload"
        ),
    ))
}

fn to_proto(d: &Delivery) -> GitWebhook {
    GitWebhook {
        headers: d.headers.clone().into_iter().collect(),
        body: d.body.to_vec(),
        namespace: d
            .target
            .as_ref()
            .map_or(String::new(), |t| t.namespace.clone()),
        name: d.target.as_ref().map_or(String::new(), |t| t.name.clone()),
    }
}

/// A forwarded delivery, held to what a listener would have taken (the headers read, the body
/// limit): every hub's word is checked again.
fn from_proto(w: GitWebhook) -> Result<Delivery, String> {
    if w.body.len() > super::MAX_BODY {
        return Err(format!("a body over {} bytes", super::MAX_BODY));
    }
    let headers = w
        .headers
        .into_iter()
        .filter(|(k, _)| super::verify::HEADERS.contains(&k.as_str()))
        .collect();
    let target = (!w.name.is_empty()).then(|| ObjectRef::new(&w.namespace, &w.name));
    Ok(Delivery {
        headers,
        body: w.body.into(),
        target,
    })
}

/// The holder's side: answers forwarded webhooks with `repos` until `stop` (the family's stop
/// signal). Subscribed when this returns.
pub async fn serve(
    nats: async_nats::Client,
    seal: HubSeal,
    repos: GitRepos,
    mut stop: watch::Receiver<bool>,
) -> Result<JoinHandle<()>, async_nats::SubscribeError> {
    let mut sub = nats.subscribe(SUBJECT).await?;
    Ok(tokio::spawn(
        async move {
            let mut running = JoinSet::new();
            loop {
                if running.len() >= IN_FLIGHT {
                    tokio::select! {
                        _ = running.join_next() => continue,
                        _ = stop.changed() => break,
                    }
                }
                let msg = tokio::select! {
                    msg = sub.next() => match msg {
                        Some(m) => m,
                        None => break,
                    },
                    Some(_) = running.join_next(), if !running.is_empty() => continue,
                    _ = stop.changed() => break,
                };
                let Some(reply) = msg.reply.clone() else {
                    continue;
                };
                let (nats, seal, repos) = (nats.clone(), seal.clone(), repos.clone());
                running.spawn(async move {
                    let answer = answer(&seal, &repos, &msg.payload).await;
                    let a = GitWebhookAnswer {
                        result: answer.outcome.label().to_owned(),
                        provider: answer.provider.map_or("", Provider::name).to_owned(),
                        message: answer.message,
                    };
                    if let Err(e) = nats.publish(reply, a.encode_to_vec().into()).await {
                        tracing::debug!(error = %e, "answering a forwarded webhook failed");
                    }
                });
            }
            let _ = sub.unsubscribe().await;
            running.shutdown().await;
        }
        .instrument(tracing::info_span!("gitops_webhooks")),
    ))
}

/// What becomes of one forwarded payload.
async fn answer(seal: &HubSeal, repos: &GitRepos, payload: &[u8]) -> Answer {
    let bad = |why: String| {
        tracing::warn!(%why, "a forwarded webhook was refused");
        Answer::new(Outcome::BadRequest, None, why)
    };
    let outer = match GitWebhookForward::decode(payload) {
        Ok(o) if o.version == VERSION => o,
        Ok(o) => {
            return bad(format!(
                "forwarded webhook version {}; this hub speaks {VERSION}",
                o.version
            ));
        }
        Err(e) => return bad(format!("not a forwarded webhook: {e}")),
    };
    let inner = if !outer.sealed.is_empty() {
        match seal
            .open_shared(Purpose::Webhook, &outer.sealed)
            .map_err(|e| e.to_string())
            .and_then(|p| GitWebhook::decode(p.as_slice()).map_err(|e| e.to_string()))
        {
            Ok(w) => w,
            Err(e) => return bad(format!("a forwarded webhook does not open: {e}")),
        }
    } else {
        match outer.clear {
            Some(w) => w,
            None => return bad("a forwarded webhook without one".into()),
        }
    };
    match from_proto(inner) {
        Ok(d) => repos.hook(&d).await,
        Err(e) => bad(format!("a forwarded webhook with {e}")),
    }
}
