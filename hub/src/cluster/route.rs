//! Calls on clusters of shards another hub holds: the client ([`Remote`]) and the holder's
//! server ([`serve_shard`]), over NATS request/reply on [`subjects::hub_route`], protobuf
//! [`ClusterCall`]/[`ClusterReply`] as the wire.
//!
//! A call finding no responder (the shard is changing hands) is retried until `patience` runs
//! out; a call that timed out is not (its outcome is unknown: the caller is told so).

use super::Clusters;
use super::handle::{AdminEdit, Answer, Call, ClusterError};
use crate::ha::Fence;
use flotilla_api::v1::{
    AcceptEdit, CallError, ClusterCall, ClusterEdit, ClusterReply, ExternalAddOnCall, JoinCall,
    LabelClusterRequest, ManagedNamespacesCall, TaintClusterRequest, WorkApply, cluster_call,
    cluster_edit, cluster_reply,
};
use flotilla_bus::subjects;
use futures::StreamExt;
use prost::Message;
use std::time::Duration;
use tokio::sync::watch;

/// Calls handled at once by one shard's server.
const IN_FLIGHT: usize = 64;

/// The client side: calls on clusters whose shard another hub holds.
#[derive(Clone, Debug)]
pub struct Remote {
    nats: async_nats::Client,
    /// One attempt's timeout.
    timeout: Duration,
    /// How long to keep trying while nobody holds the shard.
    patience: Duration,
}

impl Remote {
    /// Calls over `nats`.
    pub fn new(nats: async_nats::Client, timeout: Duration, patience: Duration) -> Self {
        Self {
            nats,
            timeout,
            patience,
        }
    }

    /// Carries `call` out on the hub holding `cluster`'s shard.
    pub async fn call(
        &self,
        cluster: &str,
        spawn: bool,
        call: Call,
    ) -> Result<Answer, ClusterError> {
        let shard = subjects::shard(cluster);
        let payload = bytes::Bytes::from(encode_call(cluster, spawn, call).encode_to_vec());
        let subject = subjects::hub_route(shard);
        let give_up = tokio::time::Instant::now() + self.patience;
        let mut wait = Duration::from_millis(100);
        loop {
            let request = async_nats::Request::new()
                .payload(payload.clone())
                .timeout(Some(self.timeout));
            match self.nats.send_request(subject.clone(), request).await {
                Ok(msg) => {
                    let reply = ClusterReply::decode(msg.payload.as_ref()).map_err(|e| {
                        ClusterError::Unavailable(format!(
                            "the hub holding shard {shard} answered something undecodable: {e}"
                        ))
                    })?;
                    return decode_reply(reply);
                }
                Err(e)
                    if e.kind() == async_nats::client::RequestErrorKind::NoResponders
                        && tokio::time::Instant::now() + wait < give_up =>
                {
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(1));
                }
                Err(e) if e.kind() == async_nats::client::RequestErrorKind::NoResponders => {
                    return Err(ClusterError::Unavailable(format!(
                        "no hub holds shard {shard} of managed cluster {cluster:?} (a takeover is \\
                         in progress or no hub is running); retry"
                    )));
                }
                Err(e) if e.kind() == async_nats::client::RequestErrorKind::TimedOut => {
                    return Err(ClusterError::Unavailable(format!(
                        "the hub holding shard {shard} did not answer within {:?}; the outcome is \\
                         unknown",
                        self.timeout
                    )));
                }
                Err(e) => {
                    return Err(ClusterError::Unavailable(format!(
                        "calling the hub holding shard {shard}: {e}"
                    )));
                }
            }
        }
    }
}

/// Answers the calls on `shard`'s clusters while this hub holds it (until `stop` flips or the
/// fence ends).
pub async fn serve_shard(
    nats: async_nats::Client,
    shard: u32,
    fence: Fence,
    clusters: Clusters,
    mut stop: watch::Receiver<bool>,
) {
    let subject = subjects::hub_route(shard);
    let mut sub = loop {
        match nats.subscribe(subject.clone()).await {
            Ok(s) => break s,
            Err(e) => {
                tracing::warn!(shard, error = %e, "subscribing to the shard's calls failed; retrying");
                tokio::select! {
                    _ = stop.changed() => return,
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
    };
    let served = (&mut sub).for_each_concurrent(IN_FLIGHT, |msg| {
        let (nats, clusters, fence) = (nats.clone(), clusters.clone(), fence.clone());
        async move {
            let Some(reply) = msg.reply.clone() else {
                return;
            };
            let answer = if fence.is_valid() {
                answer(&clusters, &msg.payload).await
            } else {
                // No answer: the caller's retry finds the next holder.
                return;
            };
            if let Err(e) = nats
                .publish(reply, bytes::Bytes::from(answer.encode_to_vec()))
                .await
            {
                tracing::debug!(error = %e, "answering a hub call failed");
            }
        }
    });
    tokio::select! {
        _ = stop.changed() => {}
        () = served => {}
    }
    let _ = sub.unsubscribe().await;
}

async fn answer(clusters: &Clusters, payload: &[u8]) -> ClusterReply {
    let result = match ClusterCall::decode(payload) {
        Err(e) => Err(ClusterError::Invalid(format!("undecodable hub call: {e}"))),
        Ok(call) => {
            let handle = if call.spawn {
                clusters.local_or_spawn(&call.cluster)
            } else {
                clusters.local_or_load(&call.cluster).ok_or_else(|| {
                    ClusterError::NotFound(format!("managed cluster {:?}", call.cluster))
                })
            };
            match (handle, decode_call(call)) {
                (Ok(h), Ok(call)) => h.call(call).await,
                (Err(e), _) | (_, Err(e)) => Err(e),
            }
        }
    };
    ClusterReply {
        result: Some(match result {
            Ok(Answer::Cluster(c)) => cluster_reply::Result::Cluster(*c),
            Ok(Answer::Work(w)) => cluster_reply::Result::Work(*w),
            Ok(Answer::JoinToken(t)) => cluster_reply::Result::JoinToken(t),
            Ok(Answer::Done) => cluster_reply::Result::Done(true),
            Err(e) => cluster_reply::Result::Error(encode_error(&e)),
        }),
    }
}

fn encode_call(cluster: &str, spawn: bool, call: Call) -> ClusterCall {
    use cluster_call::Op;
    let op = match call {
        Call::Get => Op::Get(true),
        Call::Edit(edit) => Op::Edit(ClusterEdit {
            edit: Some(encode_edit(cluster, edit)),
        }),
        Call::Join {
            ttl,
            accept,
            cluster_set,
        } => Op::Join(JoinCall {
            ttl_seconds: ttl.as_secs(),
            accept,
            cluster_set,
        }),
        Call::Delete => Op::Delete(true),
        Call::ApplyWork {
            work,
            traceparent,
            only_new,
        } => Op::ApplyWork(WorkApply {
            work: Some(*work),
            traceparent: traceparent.unwrap_or_default(),
            only_new,
        }),
        Call::DeleteWork(name) => Op::DeleteWork(name),
        Call::ManagedNamespaces(desired) => {
            Op::ManagedNamespaces(ManagedNamespacesCall { desired })
        }
        Call::ExternalAddOn {
            addon,
            install_namespace,
        } => Op::ExternalAddon(ExternalAddOnCall {
            addon,
            remove: install_namespace.is_none(),
            install_namespace: install_namespace.unwrap_or_default(),
        }),
    };
    ClusterCall {
        cluster: cluster.to_string(),
        spawn,
        op: Some(op),
    }
}

fn encode_edit(cluster: &str, edit: AdminEdit) -> cluster_edit::Edit {
    use cluster_edit::Edit;
    match edit {
        AdminEdit::Accept(key) => Edit::Accept(AcceptEdit {
            has_key: key.is_some(),
            key: key.unwrap_or_default(),
        }),
        AdminEdit::Deny => Edit::Deny(true),
        AdminEdit::Label { set, remove } => Edit::Label(LabelClusterRequest {
            name: cluster.to_string(),
            set,
            remove,
        }),
        AdminEdit::Taint { add, remove } => Edit::Taint(TaintClusterRequest {
            name: cluster.to_string(),
            add,
            remove,
        }),
        AdminEdit::SetLease(seconds) => Edit::SetLease(seconds),
        AdminEdit::Apply(c) => Edit::Apply(*c),
        AdminEdit::Import(i) => Edit::Import(*i),
    }
}

fn decode_call(call: ClusterCall) -> Result<Call, ClusterError> {
    use cluster_call::Op;
    let missing = || ClusterError::Invalid("hub call without an operation".into());
    Ok(match call.op.ok_or_else(missing)? {
        Op::Get(_) => Call::Get,
        Op::Edit(e) => Call::Edit(decode_edit(e.edit.ok_or_else(missing)?)),
        Op::Join(j) => Call::Join {
            ttl: Duration::from_secs(j.ttl_seconds),
            accept: j.accept,
            cluster_set: j.cluster_set,
        },
        Op::Delete(_) => Call::Delete,
        Op::ApplyWork(w) => Call::ApplyWork {
            work: Box::new(w.work.ok_or_else(missing)?),
            traceparent: (!w.traceparent.is_empty()).then_some(w.traceparent),
            only_new: w.only_new,
        },
        Op::DeleteWork(name) => Call::DeleteWork(name),
        Op::ManagedNamespaces(m) => Call::ManagedNamespaces(m.desired),
        Op::ExternalAddon(a) => Call::ExternalAddOn {
            addon: a.addon,
            install_namespace: (!a.remove).then_some(a.install_namespace),
        },
    })
}

fn decode_edit(edit: cluster_edit::Edit) -> AdminEdit {
    use cluster_edit::Edit;
    match edit {
        Edit::Accept(a) => AdminEdit::Accept(a.has_key.then_some(a.key)),
        Edit::Deny(_) => AdminEdit::Deny,
        Edit::Label(l) => AdminEdit::Label {
            set: l.set,
            remove: l.remove,
        },
        Edit::Taint(t) => AdminEdit::Taint {
            add: t.add,
            remove: t.remove,
        },
        Edit::SetLease(s) => AdminEdit::SetLease(s),
        Edit::Apply(c) => AdminEdit::Apply(Box::new(c)),
        Edit::Import(i) => AdminEdit::Import(Box::new(i)),
    }
}

fn encode_error(e: &ClusterError) -> CallError {
    let (code, message) = match e {
        ClusterError::NotFound(m) => ("not_found", m.clone()),
        ClusterError::Invalid(m) => ("invalid", m.clone()),
        ClusterError::Unavailable(m) => ("unavailable", m.clone()),
        ClusterError::Gone(m) => ("gone", m.clone()),
        ClusterError::Conflict(m) => ("conflict", m.clone()),
        ClusterError::Precondition(m) => ("precondition", m.clone()),
    };
    CallError {
        code: code.into(),
        message,
    }
}

fn decode_reply(reply: ClusterReply) -> Result<Answer, ClusterError> {
    match reply.result {
        Some(cluster_reply::Result::Cluster(c)) => Ok(Answer::Cluster(Box::new(c))),
        Some(cluster_reply::Result::Work(w)) => Ok(Answer::Work(Box::new(w))),
        Some(cluster_reply::Result::JoinToken(t)) => Ok(Answer::JoinToken(t)),
        Some(cluster_reply::Result::Done(_)) => Ok(Answer::Done),
        Some(cluster_reply::Result::Error(e)) => Err(match e.code.as_str() {
            "not_found" => ClusterError::NotFound(e.message),
            "invalid" => ClusterError::Invalid(e.message),
            "gone" => ClusterError::Gone(e.message),
            "conflict" => ClusterError::Conflict(e.message),
            "precondition" => ClusterError::Precondition(e.message),
            _ => ClusterError::Unavailable(e.message),
        }),
        None => Err(ClusterError::Unavailable(
            "the cluster's hub sent an empty answer".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn every_call_survives_the_wire() {
        let calls = vec![
            Call::Get,
            Call::Edit(AdminEdit::Accept(Some("SHA256:abc".into()))),
            Call::Edit(AdminEdit::Accept(None)),
            Call::Edit(AdminEdit::Deny),
            Call::Edit(AdminEdit::Label {
                set: HashMap::from([("env".into(), "prod".into())]),
                remove: vec!["old".into()],
            }),
            Call::Edit(AdminEdit::SetLease(90)),
            Call::Edit(AdminEdit::Import(Box::new(flotilla_api::v1::ImportEdit {
                policy: "capi".into(),
                create: true,
                accept: true,
                lease_duration_seconds: 60,
                ..Default::default()
            }))),
            Call::Join {
                ttl: Duration::from_secs(600),
                accept: true,
                cluster_set: "edge".into(),
            },
            Call::Delete,
            Call::ApplyWork {
                work: Box::default(),
                traceparent: Some("00-abc-def-01".into()),
                only_new: true,
            },
            Call::DeleteWork("web".into()),
            Call::ManagedNamespaces(Vec::new()),
            Call::ExternalAddOn {
                addon: "helloworld".into(),
                install_namespace: Some("addons".into()),
            },
            Call::ExternalAddOn {
                addon: "helloworld".into(),
                install_namespace: None,
            },
        ];
        for call in calls {
            let before = format!("{call:?}");
            let wire = encode_call("edge-1", true, call).encode_to_vec();
            let decoded = ClusterCall::decode(wire.as_slice()).unwrap();
            assert_eq!(decoded.cluster, "edge-1");
            assert!(decoded.spawn);
            let after = format!("{:?}", decode_call(decoded).unwrap());
            assert_eq!(before, after);
        }
    }

    #[test]
    fn errors_keep_their_kind_across_hubs() {
        for e in [
            ClusterError::NotFound("managed cluster \"x\"".into()),
            ClusterError::Invalid("spec.taints[0]".into()),
            ClusterError::Unavailable("kv".into()),
            ClusterError::Gone("x".into()),
            ClusterError::Conflict("resourceVersion".into()),
            ClusterError::Precondition("denied".into()),
        ] {
            let reply = ClusterReply {
                result: Some(cluster_reply::Result::Error(encode_error(&e))),
            };
            let back = decode_reply(reply).unwrap_err();
            assert_eq!(format!("{e:?}"), format!("{back:?}"));
        }
        let call = ClusterCall {
            cluster: "x".into(),
            spawn: false,
            op: None,
        };
        assert!(matches!(decode_call(call), Err(ClusterError::Invalid(_))));
    }
}
