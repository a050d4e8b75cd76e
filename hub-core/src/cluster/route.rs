//! Calls on clusters of shards another hub holds: the client ([`Remote`]) and the holder's
//! server ([`serve_shard`]), over NATS request/reply on [`subjects::hub_route`], protobuf
//! [`ClusterCall`]/[`ClusterReply`] as the wire.
//!
//! A call finding no responder (the shard is changing hands) is retried until `patience` runs
//! out; a call that timed out is not (its outcome is unknown: the caller is told so).
//!
//! A join token (a NATS credentials file, its seed included) never crosses NATS in clear: the
//! asking hub makes a reply key for the call ([`crate::sealed::ReplyKey`]) and the holder seals
//! the token to it with the control plane's sealing key; an answer in clear or that does not
//! open is an error. The rest of a call and its answer (clusters, works — what the store keeps
//! in clear anyway) travel in clear.

use super::Clusters;
use super::handle::{AdminEdit, Answer, Call, ClusterError};
use crate::ha::Fence;
use crate::sealed::{HubSeal, Purpose, ReplyKey};
use flotilla_api::v1::{
    AcceptEdit, CallError, ClusterCall, ClusterEdit, ClusterReply, ExternalAddOnCall, JoinCall,
    JoinToken, LabelClusterRequest, ManagedNamespacesCall, SealedAnswer, TaintClusterRequest,
    WorkApply, cluster_call, cluster_edit, cluster_reply,
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
    /// Opens join tokens sealed to this hub's calls (shared: a handle stays small).
    seal: std::sync::Arc<HubSeal>,
    /// One attempt's timeout.
    timeout: Duration,
    /// How long to keep trying while nobody holds the shard.
    patience: Duration,
}

impl Remote {
    /// Calls over `nats`, opening sealed answers with `seal`.
    pub fn new(
        nats: async_nats::Client,
        seal: HubSeal,
        timeout: Duration,
        patience: Duration,
    ) -> Self {
        Self {
            nats,
            seal: std::sync::Arc::new(seal),
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
        let reply_key = matches!(call, Call::Join { .. }).then(ReplyKey::new);
        let mut wire = encode_call(cluster, spawn, call);
        if let (Some(key), Some(cluster_call::Op::Join(join))) = (&reply_key, wire.op.as_mut()) {
            join.reply_xkey = key.public().to_string();
        }
        let payload = bytes::Bytes::from(wire.encode_to_vec());
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
                    return decode_reply(reply, &self.seal, reply_key.as_ref(), shard);
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
                        "no hub holds shard {shard} of managed cluster {cluster:?} (a takeover is \
                         in progress or no hub is running); retry"
                    )));
                }
                Err(e) if e.kind() == async_nats::client::RequestErrorKind::TimedOut => {
                    return Err(ClusterError::Unavailable(format!(
                        "the hub holding shard {shard} did not answer within {:?}; the outcome is \
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
/// fence ends); join tokens sealed with the hub's sealing key (`clusters`' [`HubSeal`]).
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
    let mut reply_xkey = None;
    let result = match ClusterCall::decode(payload) {
        Err(e) => Err(ClusterError::Invalid(format!("undecodable hub call: {e}"))),
        Ok(call) if join_without_reply_key(&call) => Err(ClusterError::Invalid(
            "a join call carries the key its token is sealed to, and this one has none (or not \
             a curve public key): upgrade the hubs to one version"
                .into(),
        )),
        Ok(call) => {
            if let Some(cluster_call::Op::Join(join)) = &call.op {
                reply_xkey = Some(join.reply_xkey.clone());
            }
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
            Ok(Answer::JoinToken(t)) => {
                sealed_join_token(&clusters.shared().seal, &t, reply_xkey.as_deref())
            }
            Ok(Answer::Done) => cluster_reply::Result::Done(true),
            Err(e) => cluster_reply::Result::Error(encode_error(&e)),
        }),
    }
}

/// Whether `call` is a join call without a reply key its token can be sealed to.
fn join_without_reply_key(call: &ClusterCall) -> bool {
    matches!(&call.op, Some(cluster_call::Op::Join(join))
        if nkeys::XKey::from_public_key(&join.reply_xkey).is_err())
}

/// A join token sealed to the asking hub's reply key (never in clear).
fn sealed_join_token(
    seal: &HubSeal,
    token: &JoinToken,
    reply_xkey: Option<&str>,
) -> cluster_reply::Result {
    let sealed = reply_xkey
        .ok_or(crate::sealed::SealedError::Seal)
        .and_then(|key| seal.seal_answer(Purpose::JoinToken, &token.encode_to_vec(), key));
    match sealed {
        Ok(sealed) => cluster_reply::Result::SealedJoinToken(SealedAnswer {
            sealed,
            sender_xkey: seal.public().to_string(),
        }),
        Err(e) => cluster_reply::Result::Error(encode_error(&ClusterError::Unavailable(format!(
            "sealing the join token to the asking hub: {e}"
        )))),
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
            // Set by the caller, which keeps the key's private half.
            reply_xkey: String::new(),
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

/// The answer of the hub holding `shard`; a join token only sealed to `reply_key`.
fn decode_reply(
    reply: ClusterReply,
    seal: &HubSeal,
    reply_key: Option<&ReplyKey>,
    shard: u32,
) -> Result<Answer, ClusterError> {
    match reply.result {
        Some(cluster_reply::Result::Cluster(c)) => Ok(Answer::Cluster(Box::new(c))),
        Some(cluster_reply::Result::Work(w)) => Ok(Answer::Work(Box::new(w))),
        Some(cluster_reply::Result::JoinToken(_)) => Err(ClusterError::Unavailable(format!(
            "the hub holding shard {shard} sent a join token in clear (a hub of an older \
             version?): refused; upgrade the hubs to one version"
        ))),
        Some(cluster_reply::Result::SealedJoinToken(sealed)) => {
            let key = reply_key.ok_or_else(|| {
                ClusterError::Unavailable(format!(
                    "the hub holding shard {shard} sent a join token this hub did not ask for"
                ))
            })?;
            let plain = key
                .open(
                    seal,
                    Purpose::JoinToken,
                    &sealed.sealed,
                    &sealed.sender_xkey,
                )
                .map_err(|e| {
                    ClusterError::Unavailable(format!(
                        "the join token from the hub holding shard {shard} does not open ({e}); \
                         the credential was issued but cannot be shown: ask for another"
                    ))
                })?;
            JoinToken::decode(plain.as_slice())
                .map(Answer::JoinToken)
                .map_err(|e| {
                    ClusterError::Unavailable(format!(
                        "the hub holding shard {shard} sealed something that is no join token: {e}"
                    ))
                })
        }
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
        let seal = HubSeal::new(crate::key::SealingKey::ephemeral());
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
            let back = decode_reply(reply, &seal, None, 3).unwrap_err();
            assert_eq!(format!("{e:?}"), format!("{back:?}"));
        }
        let call = ClusterCall {
            cluster: "x".into(),
            spawn: false,
            op: None,
        };
        assert!(matches!(decode_call(call), Err(ClusterError::Invalid(_))));
    }

    fn token() -> JoinToken {
        JoinToken {
            cluster_name: "edge-1".into(),
            creds: "-----BEGIN USER NKEY SEED-----\nSUAEXAMPLESEED\n".into(),
            public_key: "UABC".into(),
            expires: None,
            cluster_set: "edge".into(),
        }
    }

    #[test]
    fn a_join_token_crosses_only_sealed_to_the_asking_call() {
        let dir = tempfile::tempdir().unwrap();
        let key = crate::key::SealingKey::from_file(&dir.path().join("s.xk")).unwrap();
        let seal = HubSeal::new(key);
        let asker = ReplyKey::new();
        let result = sealed_join_token(&seal, &token(), Some(asker.public()));
        let reply = ClusterReply {
            result: Some(result),
        };
        let wire = reply.encode_to_vec();
        assert!(!wire.windows(3).any(|w| w == b"SUA"), "the seed is sealed");
        let Ok(Answer::JoinToken(t)) = decode_reply(reply.clone(), &seal, Some(&asker), 3) else {
            panic!("the asker opens its token");
        };
        assert_eq!(t, token());
        // Another call's key, or none, does not open it.
        let e = decode_reply(reply.clone(), &seal, Some(&ReplyKey::new()), 3).unwrap_err();
        assert!(matches!(e, ClusterError::Unavailable(m) if m.contains("does not open")));
        assert!(decode_reply(reply, &seal, None, 3).is_err());
        // A token in clear is refused.
        let clear = ClusterReply {
            result: Some(cluster_reply::Result::JoinToken(token())),
        };
        let e = decode_reply(clear, &seal, Some(&asker), 3).unwrap_err();
        assert!(matches!(e, ClusterError::Unavailable(m) if m.contains("in clear")));
        // A holder refuses a join call without a key to seal to, before issuing anything.
        let mut call = encode_call(
            "edge-1",
            true,
            Call::Join {
                ttl: Duration::from_secs(60),
                accept: false,
                cluster_set: String::new(),
            },
        );
        assert!(join_without_reply_key(&call));
        if let Some(cluster_call::Op::Join(j)) = call.op.as_mut() {
            j.reply_xkey = asker.public().to_string();
        }
        assert!(!join_without_reply_key(&call));
    }
}
