//! Where the hub may answer a request from a spoke.
//!
//! NATS checks publish permissions on a message's subject, never on its reply subject, so a
//! request's reply subject is whatever the spoke chose — `$KV.clusters.<victim>`, a JetStream
//! API subject, another cluster's spec subject. The hub answers only through a [`ReplyTo`],
//! which can be made only from an inbox-shaped subject: a server-made reply (`_R_.…`: in secure
//! mode every request reaches the hub through a service import, whose replies the server
//! remaps), or a client inbox (`_INBOX.…`, `_INBOX_bootstrap.…`, the prefixes agents of the
//! previous wire use in plain mode), or — an agent of the prefix wire — the reply subject of the
//! cluster that asked, `flotilla.to.<that cluster>.reply.<token>`: never that cluster's spec,
//! proxy or cluster-proxy subject, never another cluster's prefix. The hub's own inbox prefix is
//! [`HUB_INBOX_PREFIX`], so no spoke can make the hub answer into the hub's own pending requests.

use thiserror::Error;

/// The hub's inbox prefix (not `_INBOX`, which spokes' answers may name).
pub const HUB_INBOX_PREFIX: &str = "_INBOX_hub";

/// Prefixes of subjects the hub answers on.
const ANSWERABLE: [&str; 3] = ["_R_.", "_INBOX.", "_INBOX_bootstrap."];

/// A reply subject the hub may publish its answer to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyTo(async_nats::Subject);

/// A reply subject the hub will not answer on.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("reply subject {0:?} is not an inbox; the hub answers only on inboxes")]
pub struct BadReply(pub String);

impl ReplyTo {
    /// The reply subject of a request `cluster` made (the cluster its subject names), checked:
    /// `Ok(None)` when the request wants no answer.
    pub fn check(
        reply: Option<&async_nats::Subject>,
        cluster: &str,
    ) -> Result<Option<Self>, BadReply> {
        let Some(reply) = reply else { return Ok(None) };
        let s = reply.as_str();
        let inbox = ANSWERABLE
            .iter()
            .any(|p| s.len() > p.len() && s.starts_with(p));
        let own_reply = matches!(
            crate::subjects::Inbound::parse(s, cluster),
            Ok(crate::subjects::Inbound::Reply(_))
        );
        let plain = !s.contains(['*', '>', ' ', '\t', '\r', '\n']) && !s.contains("..");
        if (inbox || own_reply) && plain {
            Ok(Some(Self(reply.clone())))
        } else {
            Err(BadReply(s.chars().take(200).collect()))
        }
    }

    /// The subject to publish the answer to.
    pub fn subject(&self) -> async_nats::Subject {
        self.0.clone()
    }

    /// Publishes `event` as the answer (the one way the hub answers a spoke). Answers are core
    /// NATS, at most once: a failure is logged at debug and the spoke asks again.
    pub async fn answer(&self, publisher: &crate::publish::Publisher, event: &crate::Event) {
        if let Err(e) = publisher.publish(self.subject().to_string(), event).await {
            if e.is_permanent() {
                tracing::error!(error = %e, "cannot encode an answer");
            } else {
                tracing::debug!(error = %e, "answering a spoke failed");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(s: &str) -> Result<Option<ReplyTo>, BadReply> {
        ReplyTo::check(Some(&async_nats::Subject::from(s)), "edge-1")
    }

    #[test]
    fn only_inboxes_are_answered() {
        for ok in [
            "_R_.Ab12Cd.xyz",
            "_INBOX.edge-1.abc",
            "_INBOX_bootstrap.edge-1.abc.def",
        ] {
            assert!(check(ok).unwrap().is_some(), "{ok}");
        }
        for bad in [
            "$JS.API.STREAM.PURGE.KV_works",
            "$KV.clusters.edge-2",
            "flotilla.spec.edge-2",
            "flotilla.broadcast",
            "flotilla.status.3.edge-2.lease",
            "_INBOX_hub.xyz",
            "_INBOX.",
            "_INBOX.>",
            "_INBOX.*.x",
            "_R_",
            "",
        ] {
            assert!(check(bad).is_err(), "{bad}");
        }
        assert_eq!(ReplyTo::check(None, "edge-1"), Ok(None));
    }

    #[test]
    fn a_prefix_reply_is_answered_only_for_the_cluster_that_asked() {
        assert!(check("flotilla.to.edge-1.reply.ab12").unwrap().is_some());
        for bad in [
            "flotilla.to.edge-2.reply.ab12",
            "flotilla.to.edge-1.spec",
            "flotilla.to.edge-1.proxy",
            "flotilla.to.edge-1.kubeapi",
            "flotilla.to.edge-1.reply",
            "flotilla.to.edge-1.reply.",
            "flotilla.to.edge-1.reply.a.b",
            "flotilla.to.edge-1.reply.*",
            "flotilla.to.edge-1.reply.>",
            "flotilla.to.edge-1.>",
            "flotilla.to.edge-11.reply.ab12",
        ] {
            assert!(check(bad).is_err(), "{bad}");
        }
        let other = async_nats::Subject::from("flotilla.to.edge-1.reply.ab12");
        assert!(ReplyTo::check(Some(&other), "edge-2").is_err());
        assert!(ReplyTo::check(Some(&other), "").is_err());
    }
}
