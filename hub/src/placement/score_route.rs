//! Score reports travel to the hub holding the controllers: the status of a cluster is consumed
//! by the hub holding its shard, while the score actor runs with the placements. A report the
//! shard's hub cannot hand to a local score actor is sent on [`SUBJECT`] (hub account only) and
//! acknowledged in the status stream once the controllers' hub has taken it; otherwise it stays
//! unacknowledged and JetStream delivers it again.

use super::scores::{ScoreReport, Scores};
use flotilla_api::v1::AddOnPlacementScoreReport;
use futures::StreamExt;
use prost::Message;
use std::time::Duration;
use tokio::sync::watch;

/// Where score reports go to the controllers' hub.
pub const SUBJECT: &str = "flotilla.hub.controllers.score";
/// Header carrying the report's `sequenceid`.
const SEQUENCE_HEADER: &str = "Flotilla-Sequence";
/// Reply of a report taken.
const TAKEN: &[u8] = b"taken";

/// Where this hub's status router sends score reports: the local score actor while this hub
/// holds the controllers, the controllers' hub otherwise.
#[derive(Clone)]
pub struct ScoreSink {
    local: watch::Receiver<Option<Scores>>,
    nats: async_nats::Client,
}

/// Sets the local score actor of a [`ScoreSink`].
pub struct LocalScores(watch::Sender<Option<Scores>>);

impl LocalScores {
    /// Sets (or clears) the local score actor.
    pub fn set(&self, scores: Option<Scores>) {
        self.0.send_replace(scores);
    }
}

impl std::fmt::Debug for ScoreSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScoreSink")
            .field("local", &self.local.borrow().is_some())
            .finish()
    }
}

impl ScoreSink {
    /// A sink with no local score actor yet.
    pub fn new(nats: async_nats::Client) -> (LocalScores, Self) {
        let (tx, rx) = watch::channel(None);
        (LocalScores(tx), Self { local: rx, nats })
    }

    /// Hands a report on without waiting; a full local mailbox returns it.
    pub fn try_report(&self, report: ScoreReport) -> Result<(), Box<ScoreReport>> {
        let local = self.local.borrow().clone();
        if let Some(scores) = local {
            return scores.try_report(report);
        }
        let nats = self.nats.clone();
        tokio::spawn(async move {
            let mut headers = async_nats::HeaderMap::new();
            if let Some(seq) = report.sequence {
                headers.insert(SEQUENCE_HEADER, seq.to_string().as_str());
            }
            let request = async_nats::Request::new()
                .payload(report.report.encode_to_vec().into())
                .headers(headers)
                .timeout(Some(Duration::from_secs(5)));
            match nats.send_request(SUBJECT, request).await {
                Ok(m) if m.payload.as_ref() == TAKEN => {
                    if let Some(msg) = report.ack
                        && let Err(e) = msg.ack().await
                    {
                        tracing::debug!(error = %e, "ack of a forwarded score report failed");
                    }
                }
                // Not acknowledged: redelivered after ack_wait.
                Ok(m) => tracing::debug!(
                    answer = %String::from_utf8_lossy(&m.payload),
                    "the controllers' hub did not take a score report"
                ),
                Err(e) => tracing::debug!(error = %e, "forwarding a score report failed"),
            }
        });
        Ok(())
    }
}

/// Takes forwarded score reports into `scores` until `stop` flips (run by the controllers).
pub async fn serve(nats: async_nats::Client, scores: Scores, mut stop: watch::Receiver<bool>) {
    let mut sub = match nats.subscribe(SUBJECT).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "subscribing to forwarded score reports failed");
            return;
        }
    };
    loop {
        let msg = tokio::select! {
            _ = stop.changed() => break,
            m = sub.next() => match m { Some(m) => m, None => break },
        };
        let Some(reply) = msg.reply.clone() else {
            continue;
        };
        let answer: &[u8] = match AddOnPlacementScoreReport::decode(msg.payload.as_ref()) {
            Ok(report) => {
                let sequence = msg
                    .headers
                    .as_ref()
                    .and_then(|h| h.get(SEQUENCE_HEADER))
                    .and_then(|v| v.as_str().parse().ok());
                match scores.try_report(ScoreReport {
                    report,
                    sequence,
                    ack: None,
                }) {
                    Ok(()) => TAKEN,
                    Err(_) => b"busy",
                }
            }
            Err(_) => b"undecodable",
        };
        let _ = nats.publish(reply, answer.to_vec().into()).await;
    }
    let _ = sub.unsubscribe().await;
}
