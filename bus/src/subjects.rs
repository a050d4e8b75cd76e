//! The NATS subject scheme. Every token that names a cluster is a whole token, so NATS
//! permissions can scope a cluster's credentials to exactly its own subjects.
//!
//! | subject | direction |
//! |---|---|
//! | `flotilla.register.<cluster>` | agent → hub, request/reply |
//! | `flotilla.spec.<cluster>` | hub → agent, core NATS |
//! | `flotilla.status.<shard>.<cluster>.<kind>[.<resourceid>]` | agent → hub, JetStream |
//! | `flotilla.sync.<cluster>` | agent → hub, request/reply (spec resync) |
//! | `flotilla.peers.<cluster>` | agent → hub, request/reply (MirrorPeer exchange, [`crate::peersecrets`]) |
//! | `flotilla.proxy.<cluster>` | hub → agent, request/reply |
//! | `flotilla.kubeapi.<cluster>` | hub → agent, cluster proxy frames ([`crate::tunnel`]) |
//! | `flotilla.kubeapiback.<cluster>.<hub token>` | agent → hub, cluster proxy frames |
//! | `flotilla.to.<cluster>.spec` | hub → agent, core NATS (the prefix wire, [`Wire::Prefix`]) |
//! | `flotilla.to.<cluster>.proxy` | hub → agent, request/reply (the prefix wire) |
//! | `flotilla.to.<cluster>.kubeapi` | hub → agent, cluster proxy frames (the prefix wire) |
//! | `flotilla.to.<cluster>.reply.<token>` | answers to the agent's own requests and acknowledgements of its status publishes (the prefix wire) |
//! | `flotilla.hub.shard.<shard>.cluster` | hub → the hub holding the shard, request/reply |
//!
//! **Two wires.** An agent of the prefix wire holds one subscription, `flotilla.to.<cluster>.>`
//! ([`to_all`]), and reads every hub → agent subject under it ([`Inbound::parse`]); an agent of
//! the previous wire subscribes `flotilla.spec.<cluster>`, `flotilla.proxy.<cluster>`,
//! `flotilla.kubeapi.<cluster>` and its inbox `_INBOX.<cluster>.…`. The agent says which in its
//! registration request and the hub picks each cluster's subjects by it ([`Wire`]). Agent → hub
//! subjects are the same on both (publishing costs no subscription). `flotilla.broadcast` is
//! reserved: nothing publishes or subscribes to it.

use thiserror::Error;

/// Number of status shards (a protocol constant: changing it moves clusters between shards).
pub const SHARDS: u32 = 32;
/// Wildcard for every registration request.
pub const REGISTER_ALL: &str = "flotilla.register.*";
/// Wildcard for every spec resync request.
pub const SYNC_ALL: &str = "flotilla.sync.*";
/// Wildcard for every status subject (the status stream's subject).
pub const STATUS_ALL: &str = "flotilla.status.>";
/// Wildcard for every cluster's spec subject.
pub const SPEC_ALL: &str = "flotilla.spec.*";
/// Wildcard for every cluster's proxy subject.
pub const PROXY_ALL: &str = "flotilla.proxy.*";
/// Wildcard for every cluster's cluster-proxy frames, hub → agent.
pub const KUBEAPI_ALL: &str = "flotilla.kubeapi.*";
/// Wildcard for every cluster-proxy frame agent → hub (any cluster, any hub).
pub const KUBEAPI_BACK_ALL: &str = "flotilla.kubeapiback.*.*";
/// Broadcast subject.
pub const BROADCAST: &str = "flotilla.broadcast";
/// Root of every hub → agent subject of the prefix wire.
pub const TO_ROOT: &str = "flotilla.to";
/// Every cluster's specs on the prefix wire.
pub const TO_SPEC_ALL: &str = "flotilla.to.*.spec";
/// Every cluster's proxy requests on the prefix wire.
pub const TO_PROXY_ALL: &str = "flotilla.to.*.proxy";
/// Every cluster's cluster-proxy frames, hub → agent, on the prefix wire.
pub const TO_KUBEAPI_ALL: &str = "flotilla.to.*.kubeapi";

/// Status kind of lease renewals.
pub const KIND_LEASE: &str = "lease";
/// Status kind of cluster status reports.
pub const KIND_CLUSTER: &str = "cluster";
/// Status kind of ManifestWork status reports (followed by the work's resourceid).
pub const KIND_WORK: &str = "work";

/// The shard of a cluster: FNV-1a (32 bit) of its name, mod [`SHARDS`].
pub fn shard(cluster: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in cluster.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h % SHARDS
}

/// Where a hub forwards calls on the clusters of `shard` to the hub holding it (hub account
/// only: no spoke can publish there).
pub fn hub_route(shard: u32) -> String {
    format!("flotilla.hub.shard.{shard}.cluster")
}

/// Registration subject of a cluster.
pub fn register(cluster: &str) -> String {
    format!("flotilla.register.{cluster}")
}

/// Spec subject of a cluster.
pub fn spec(cluster: &str) -> String {
    format!("flotilla.spec.{cluster}")
}

/// Spec resync subject of a cluster.
pub fn sync(cluster: &str) -> String {
    format!("flotilla.sync.{cluster}")
}

/// Proxy (read-only query) subject of a cluster.
pub fn proxy(cluster: &str) -> String {
    format!("flotilla.proxy.{cluster}")
}

/// Cluster-proxy frames hub → agent of a cluster ([`crate::tunnel`]).
pub fn kubeapi(cluster: &str) -> String {
    format!("flotilla.kubeapi.{cluster}")
}

/// Cluster-proxy frames agent → hub: `hub` is the token the hub named in the call's request
/// (one per hub process), so each hub receives only the frames of its own calls. A cluster may
/// publish only under its own name.
pub fn kubeapi_back(cluster: &str, hub: &str) -> String {
    format!("flotilla.kubeapiback.{cluster}.{hub}")
}

/// Every cluster's cluster-proxy frames to one hub (the hub's subscription).
pub fn kubeapi_back_to(hub: &str) -> String {
    format!("flotilla.kubeapiback.*.{hub}")
}

/// Every cluster-proxy frame a cluster may send (for permissions).
pub fn kubeapi_back_of(cluster: &str) -> String {
    format!("flotilla.kubeapiback.{cluster}.*")
}

/// Whether `token` can be a hub token of [`kubeapi_back`]: 1 to 64 ASCII letters and digits.
pub fn valid_hub_token(token: &str) -> bool {
    (1..=64).contains(&token.len()) && token.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// The cluster token of a `flotilla.kubeapiback.<cluster>.<hub>` subject, when `hub` is the
/// given hub's token.
pub fn kubeapi_back_cluster<'a>(subject: &'a str, hub: &str) -> Option<&'a str> {
    let rest = subject.strip_prefix("flotilla.kubeapiback.")?;
    let (cluster, token) = rest.split_once('.')?;
    (!cluster.is_empty() && !cluster.contains('.') && token == hub).then_some(cluster)
}

/// Status subject of one resource (or of the cluster itself when `resource_id` is `None`).
pub fn status(cluster: &str, kind: &str, resource_id: Option<&str>) -> String {
    match resource_id {
        Some(id) => format!("flotilla.status.{}.{cluster}.{kind}.{id}", shard(cluster)),
        None => format!("flotilla.status.{}.{cluster}.{kind}", shard(cluster)),
    }
}

/// Filter matching every status subject of one cluster.
pub fn status_of_cluster(cluster: &str) -> String {
    format!("flotilla.status.{}.{cluster}.>", shard(cluster))
}

/// Filter matching every status subject of one shard.
pub fn status_of_shard(shard: u32) -> String {
    format!("flotilla.status.{shard}.>")
}

/// Inbox prefix of a cluster's connection, so replies to it cannot be read by other clusters.
pub fn inbox_prefix(cluster: &str) -> String {
    format!("_INBOX.{cluster}")
}

/// Inbox prefix of a secure-mode agent's bootstrap connection. Bootstrap credentials are shared
/// by every spoke, so they may only read this separate inbox space, never a cluster's own.
pub fn bootstrap_inbox_prefix(cluster: &str) -> String {
    format!("{BOOTSTRAP_INBOX}.{cluster}")
}

/// The root of every bootstrap inbox.
pub const BOOTSTRAP_INBOX: &str = "_INBOX_bootstrap";

/// The prefix every hub → agent subject of `cluster` has on the prefix wire.
pub fn to_prefix(cluster: &str) -> String {
    format!("{TO_ROOT}.{cluster}")
}

/// The one subscription of a prefix-wire agent: everything sent to `cluster`.
pub fn to_all(cluster: &str) -> String {
    format!("{TO_ROOT}.{cluster}.>")
}

/// Spec subject of a cluster on the prefix wire.
pub fn to_spec(cluster: &str) -> String {
    format!("{TO_ROOT}.{cluster}.spec")
}

/// Proxy (read-only query) subject of a cluster on the prefix wire.
pub fn to_proxy(cluster: &str) -> String {
    format!("{TO_ROOT}.{cluster}.proxy")
}

/// Cluster-proxy frames hub → agent of a cluster on the prefix wire.
pub fn to_kubeapi(cluster: &str) -> String {
    format!("{TO_ROOT}.{cluster}.kubeapi")
}

/// Where the answer to one of `cluster`'s own requests goes on the prefix wire (`token` names
/// the call: one token, see [`valid_reply_token`]).
pub fn to_reply(cluster: &str, token: &str) -> String {
    format!("{TO_ROOT}.{cluster}.reply.{token}")
}

/// Whether `token` can name a call in [`to_reply`]: 1 to 64 ASCII letters and digits.
pub fn valid_reply_token(token: &str) -> bool {
    valid_hub_token(token)
}

/// Which subjects a cluster's agent listens on: the hub sends each cluster's specs, proxied
/// reads and cluster-proxy frames on the subjects of its agent's wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Wire {
    /// `flotilla.spec.<c>`, `flotilla.proxy.<c>`, `flotilla.kubeapi.<c>`: agents that predate
    /// the prefix (and any cluster whose agent never said otherwise).
    #[default]
    Previous,
    /// Everything under `flotilla.to.<c>.` (one subscription per agent).
    Prefix,
}

impl Wire {
    /// The wire an agent announces in its registration request
    /// (`RegistrationRequest.listens_under_prefix`).
    pub fn announced(listens_under_prefix: bool) -> Self {
        if listens_under_prefix {
            Self::Prefix
        } else {
            Self::Previous
        }
    }

    /// `cluster`'s spec subject on this wire.
    pub fn spec(self, cluster: &str) -> String {
        match self {
            Self::Previous => spec(cluster),
            Self::Prefix => to_spec(cluster),
        }
    }

    /// `cluster`'s proxy subject on this wire.
    pub fn proxy(self, cluster: &str) -> String {
        match self {
            Self::Previous => proxy(cluster),
            Self::Prefix => to_proxy(cluster),
        }
    }

    /// `cluster`'s cluster-proxy subject (hub → agent) on this wire.
    pub fn kubeapi(self, cluster: &str) -> String {
        match self {
            Self::Previous => kubeapi(cluster),
            Self::Prefix => to_kubeapi(cluster),
        }
    }
}

/// What a message under `flotilla.to.<cluster>.` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inbound<'a> {
    /// A spec event.
    Spec,
    /// A proxied read (a request: answer on its reply subject).
    Proxy,
    /// A cluster-proxy frame.
    Kubeapi,
    /// The answer to the call named by this token.
    Reply(&'a str),
}

impl<'a> Inbound<'a> {
    /// What `subject` is for `cluster`: only `flotilla.to.<cluster>.{spec,proxy,kubeapi}` and
    /// `flotilla.to.<cluster>.reply.<token>` (one valid token) are; anything else — another
    /// cluster's prefix, more or fewer tokens, an unknown kind — is an error (pure).
    pub fn parse(subject: &'a str, cluster: &str) -> Result<Self, SubjectError> {
        let err = |reason| SubjectError {
            subject: subject.chars().take(200).collect(),
            reason,
        };
        let rest = subject
            .strip_prefix(TO_ROOT)
            .and_then(|r| r.strip_prefix('.'))
            .ok_or_else(|| err("not under flotilla.to"))?;
        let rest = rest
            .strip_prefix(cluster)
            .and_then(|r| r.strip_prefix('.'))
            .filter(|_| !cluster.is_empty())
            .ok_or_else(|| err("not under this cluster's prefix"))?;
        match rest {
            "spec" => Ok(Self::Spec),
            "proxy" => Ok(Self::Proxy),
            "kubeapi" => Ok(Self::Kubeapi),
            _ => match rest.strip_prefix("reply.") {
                Some(token) if valid_reply_token(token) => Ok(Self::Reply(token)),
                Some(_) => Err(err("not a valid reply token")),
                None => Err(err("not a subject of the prefix wire")),
            },
        }
    }
}

/// Every subject carrying a cluster's statuses, registrations or resyncs (for permissions).
pub fn agent_publish(cluster: &str) -> [String; 3] {
    [status_of_cluster(cluster), register(cluster), sync(cluster)]
}

/// A subject that does not follow the scheme.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("subject {subject:?}: {reason}")]
pub struct SubjectError {
    /// The subject.
    pub subject: String,
    /// What was wrong.
    pub reason: &'static str,
}

/// A parsed status subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusSubject<'a> {
    /// Shard token.
    pub shard: u32,
    /// Cluster token.
    pub cluster: &'a str,
    /// Kind token (`lease`, `cluster`, `work`, …).
    pub kind: &'a str,
    /// Resource id token, when present.
    pub resource_id: Option<&'a str>,
}

impl<'a> StatusSubject<'a> {
    /// Parses `flotilla.status.<shard>.<cluster>.<kind>[.<resourceid>]` and checks that the
    /// shard token matches the cluster.
    pub fn parse(subject: &'a str) -> Result<Self, SubjectError> {
        let err = |reason| SubjectError {
            subject: subject.to_string(),
            reason,
        };
        let mut parts = subject.split('.');
        if parts.next() != Some("flotilla") || parts.next() != Some("status") {
            return Err(err("not a flotilla.status subject"));
        }
        let shard: u32 = parts
            .next()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| err("shard token is not a number"))?;
        let cluster = parts.next().ok_or_else(|| err("missing cluster token"))?;
        let kind = parts.next().ok_or_else(|| err("missing kind token"))?;
        let resource_id = parts.next();
        if parts.next().is_some() {
            return Err(err("too many tokens"));
        }
        if shard != self::shard(cluster) {
            return Err(err("shard token does not match the cluster"));
        }
        Ok(Self {
            shard,
            cluster,
            kind,
            resource_id,
        })
    }
}

/// Extracts the cluster token of `flotilla.<verb>.<cluster>` subjects (register, spec, proxy).
pub fn cluster_token<'a>(subject: &'a str, verb: &str) -> Option<&'a str> {
    let rest = subject.strip_prefix("flotilla.")?.strip_prefix(verb)?;
    let cluster = rest.strip_prefix('.')?;
    (!cluster.is_empty() && !cluster.contains('.')).then_some(cluster)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_subjects_round_trip_with_their_shard() {
        let s = status("edge-1", KIND_LEASE, None);
        let p = StatusSubject::parse(&s).unwrap();
        assert_eq!(p.cluster, "edge-1");
        assert_eq!(p.kind, "lease");
        assert_eq!(p.resource_id, None);
        assert!(p.shard < SHARDS);
        let s = status("edge-1", "work", Some("abc"));
        assert_eq!(StatusSubject::parse(&s).unwrap().resource_id, Some("abc"));
    }

    #[test]
    fn forged_shard_tokens_are_rejected() {
        let wrong = (shard("edge-1") + 1) % SHARDS;
        let s = format!("flotilla.status.{wrong}.edge-1.lease");
        assert!(StatusSubject::parse(&s).is_err());
        assert!(StatusSubject::parse("flotilla.status.x.edge-1.lease").is_err());
        assert!(StatusSubject::parse("flotilla.spec.edge-1").is_err());
    }

    #[test]
    fn shards_spread_clusters() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..1000 {
            seen.insert(shard(&format!("cluster-{i}")));
        }
        assert_eq!(seen.len(), SHARDS as usize);
    }

    #[test]
    fn cluster_token_extracts_single_tokens_only() {
        assert_eq!(
            cluster_token("flotilla.register.c1", "register"),
            Some("c1")
        );
        assert_eq!(cluster_token("flotilla.register.c1.x", "register"), None);
        assert_eq!(cluster_token("flotilla.spec.c1", "register"), None);
    }

    #[test]
    fn the_prefix_wire_parses_only_this_clusters_subjects() {
        assert_eq!(Inbound::parse(&to_spec("c1"), "c1"), Ok(Inbound::Spec));
        assert_eq!(Inbound::parse(&to_proxy("c1"), "c1"), Ok(Inbound::Proxy));
        assert_eq!(
            Inbound::parse(&to_kubeapi("c1"), "c1"),
            Ok(Inbound::Kubeapi)
        );
        assert_eq!(
            Inbound::parse(&to_reply("c1", "ab12"), "c1"),
            Ok(Inbound::Reply("ab12"))
        );
        for bad in [
            "flotilla.to.c2.spec",
            "flotilla.to.c1",
            "flotilla.to.c1.",
            "flotilla.to.c1x.spec",
            "flotilla.to.c1.spec.x",
            "flotilla.to.c1.status",
            "flotilla.to.c1.reply",
            "flotilla.to.c1.reply.",
            "flotilla.to.c1.reply.a.b",
            "flotilla.to.c1.reply.*",
            "flotilla.spec.c1",
            "flotilla.toc1.spec",
            "_INBOX.c1.x",
            "",
        ] {
            assert!(Inbound::parse(bad, "c1").is_err(), "{bad}");
        }
        assert!(Inbound::parse("flotilla.to..spec", "").is_err());
        assert!(to_all("c1").starts_with(&to_prefix("c1")));
    }

    #[test]
    fn each_wire_names_its_own_subjects() {
        assert_eq!(Wire::default(), Wire::Previous);
        assert_eq!(Wire::announced(false).spec("c1"), "flotilla.spec.c1");
        assert_eq!(Wire::announced(true).spec("c1"), "flotilla.to.c1.spec");
        assert_eq!(Wire::Previous.proxy("c1"), "flotilla.proxy.c1");
        assert_eq!(Wire::Prefix.proxy("c1"), "flotilla.to.c1.proxy");
        assert_eq!(Wire::Previous.kubeapi("c1"), "flotilla.kubeapi.c1");
        assert_eq!(Wire::Prefix.kubeapi("c1"), "flotilla.to.c1.kubeapi");
    }

    #[test]
    fn kubeapi_back_subjects_name_the_cluster_and_only_this_hub() {
        let s = kubeapi_back("edge-1", "h0b");
        assert_eq!(kubeapi_back_cluster(&s, "h0b"), Some("edge-1"));
        assert_eq!(kubeapi_back_cluster(&s, "other"), None);
        assert_eq!(
            kubeapi_back_cluster("flotilla.kubeapiback.a.b.h0b", "h0b"),
            None
        );
        assert_eq!(
            kubeapi_back_cluster("flotilla.kubeapiback..h0b", "h0b"),
            None
        );
        assert_eq!(kubeapi_back_cluster("flotilla.kubeapi.edge-1", "h0b"), None);
        assert!(valid_hub_token("a1B2"));
        assert!(!valid_hub_token("a.b") && !valid_hub_token("") && !valid_hub_token("*"));
    }
}
