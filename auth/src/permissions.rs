//! Who may do what on NATS: the two accounts of a secure setup, what crosses between them, and
//! each kind of user's permissions and limits (the subject scheme is `flotilla_bus::subjects`;
//! every cluster token is a whole token, so a cluster's permissions name exactly its subjects).
//!
//! **Two accounts.** The hub's account holds JetStream — every bucket, the status stream, the
//! JetStream API — and only the hub's own user. Every spoke-side user (bootstrap, join, cluster,
//! add-on) lives in the agents' account, which has no JetStream. The subjects a spoke talks to the
//! hub on cross between them as *service* imports, so the server replaces the reply subject a
//! spoke chose with one of its own (`_R_.…`) inside the hub's account and carries the answer —
//! a JetStream publish acknowledgement or the hub's reply — back to the spoke's reply subject in
//! the agents' account. Nothing a spoke publishes can make the server or the hub write to a
//! subject of the hub's account it chose: `$JS.API.…` and `$KV.…` of the agents' account reach
//! nothing. The hub's specs and broadcasts cross the other way as *stream* imports, the proxy
//! (hub → agent request/reply) as a service the agents' account exports. The cluster proxy's
//! frames (`flotilla_bus::tunnel`) are streams both ways: hub → agent like specs, agent → hub
//! exported by the agents' account on subjects whose cluster token the agent's permissions fix
//! (the hub token after it is the hub's own choice, named in each call).
//!
//! **Two wires.** An agent of the prefix wire reads everything under `flotilla.to.C.` with one
//! subscription: specs and cluster-proxy frames (`flotilla.to.*.spec`, `flotilla.to.*.kubeapi`,
//! streams from the hub's account), proxied reads (`flotilla.to.*.proxy`, the agents'
//! service), and the answers to its own requests on `flotilla.to.C.reply.<token>`, which cross
//! back through the service imports as any reply does. During the compatibility window the
//! previous wire's subjects stay crossed and allowed, so agents that predate the prefix keep
//! working. A hub whose secure directory was written before the prefix pushes account JWTs with
//! these crossings at its start (`crate::setup::SecureDir::load` takes the crossings of this
//! version, not the ones in the files).
//!
//! | user (account) | publish | subscribe |
//! |---|---|---|
//! | bootstrap (agents; shared by a fleet that chooses it) | `flotilla.register.*` | `_INBOX_bootstrap.>` |
//! | join credential for `C` (agents; one cluster, expiring, spent once used) | `flotilla.register.C` | `_INBOX_bootstrap.C.>` |
//! | cluster `C` (agents) | its status subjects, `flotilla.register.C`, `flotilla.sync.C`, `flotilla.peers.C`, `flotilla.addoncreds.C`, `flotilla.kubeapiback.C.*`, replies to requests it received | `flotilla.to.C.>`; the previous wire: `flotilla.spec.C`, `flotilla.proxy.C`, `flotilla.kubeapi.C`, `flotilla.broadcast`, `_INBOX.C.>` |
//! | add-on `A` on cluster `C` (agents) | `flotilla.addon.A.C.>` | `flotilla.addon.A.C.>`, `_INBOX.C.addon.A.>` |
//! | hub (hub) | everything in the hub's account | everything in the hub's account |
//!
//! A cluster cannot read another cluster's specs or replies, publish another cluster's status,
//! or publish any spec or proxy request, nor read or answer another cluster's proxied calls; the bootstrap user can only ask to register and read
//! registration replies (which hold nothing usable without the asking agent's seed).

use crate::jwt::{Export, ExportKind, Import, Permission, ResponsePermission, User};
use flotilla_bus::{addons, peersecrets, subjects};

/// Largest message a spoke-side user may publish: the largest event the hub accepts.
pub const AGENT_MAX_PAYLOAD: i64 = flotilla_bus::envelope::DEFAULT_MAX_EVENT_BYTES as i64;
/// Largest registration request (claims, capacity, labels): far below an event's limit.
pub const REGISTRATION_MAX_PAYLOAD: i64 = 64 * 1024;
/// Subscriptions a cluster's agent may hold on one connection: it needs one on the prefix wire
/// (`flotilla.to.C.>`), four on the previous wire (spec, proxy, cluster proxy, its inbox
/// wildcard), a bootstrap-less add-on's inbox when add-ons run in-process, and spares for
/// reconnect overlap.
pub const CLUSTER_MAX_SUBS: i64 = 32;
/// Subscriptions of a registration-only connection (bootstrap, join) or an add-on agent.
pub const SMALL_MAX_SUBS: i64 = 8;

/// One subject crossing from one account to the other.
struct Crossing {
    name: &'static str,
    subject: String,
    kind: ExportKind,
    /// Services whose requests carry the requester's identity (`Nats-Request-Info`).
    share: bool,
}

/// What the hub's account offers the agents' account: the spoke-to-hub services (status into
/// JetStream, registration, spec resync, MirrorPeer exchange, add-on credentials and add-on
/// reports) and the
/// hub-to-spoke streams (specs, broadcasts).
fn hub_offers() -> Vec<Crossing> {
    let service = |name, subject: &str, share| Crossing {
        name,
        subject: subject.to_string(),
        kind: ExportKind::Service,
        share,
    };
    let stream = |name, subject: &str| Crossing {
        name,
        subject: subject.to_string(),
        kind: ExportKind::Stream,
        share: false,
    };
    vec![
        service("status", subjects::STATUS_ALL, false),
        // The hub learns which credential asked (a join credential is bound to its name).
        service("register", subjects::REGISTER_ALL, true),
        service("sync", subjects::SYNC_ALL, false),
        service("peers", peersecrets::PEERS_ALL, false),
        service("addoncreds", addons::CREDENTIALS_ALL, false),
        service("addon", addons::ALL, false),
        stream("spec", subjects::SPEC_ALL),
        stream("broadcast", subjects::BROADCAST),
        stream("kubeapi", subjects::KUBEAPI_ALL),
        stream("to-spec", subjects::TO_SPEC_ALL),
        stream("to-kubeapi", subjects::TO_KUBEAPI_ALL),
    ]
}

/// What the agents' account offers the hub's: the proxy service (the hub asks, an agent
/// answers; on both wires) and the cluster proxy's frames back to the hub.
fn agents_offer() -> Vec<Crossing> {
    vec![
        Crossing {
            name: "proxy",
            subject: subjects::PROXY_ALL.to_string(),
            kind: ExportKind::Service,
            share: false,
        },
        Crossing {
            name: "to-proxy",
            subject: subjects::TO_PROXY_ALL.to_string(),
            kind: ExportKind::Service,
            share: false,
        },
        Crossing {
            name: "kubeapiback",
            subject: subjects::KUBEAPI_BACK_ALL.to_string(),
            kind: ExportKind::Stream,
            share: false,
        },
    ]
}

fn exports(offers: Vec<Crossing>) -> Vec<Export> {
    offers
        .into_iter()
        .map(|c| Export {
            name: c.name.to_string(),
            subject: c.subject,
            kind: c.kind,
            response_type: if c.kind == ExportKind::Service {
                "Singleton".into()
            } else {
                String::new()
            },
        })
        .collect()
}

fn imports(offers: Vec<Crossing>, from: &str) -> Vec<Import> {
    offers
        .into_iter()
        .map(|c| Import {
            name: c.name.to_string(),
            subject: c.subject,
            account: from.to_string(),
            kind: c.kind,
            share: c.share,
        })
        .collect()
}

/// The hub account's exports.
pub fn hub_exports() -> Vec<Export> {
    exports(hub_offers())
}

/// The hub account's imports from the agents' account `agents`.
pub fn hub_imports(agents: &str) -> Vec<Import> {
    imports(agents_offer(), agents)
}

/// The agents account's exports.
pub fn agents_exports() -> Vec<Export> {
    exports(agents_offer())
}

/// The agents account's imports from the hub's account `hub`.
pub fn agents_imports(hub: &str) -> Vec<Import> {
    imports(hub_offers(), hub)
}

/// The shared bootstrap user's permissions: ask to register under any name.
pub fn bootstrap() -> User {
    limited(
        User::new(
            allow(vec![subjects::REGISTER_ALL.to_string()]),
            allow(vec![format!("{}.>", subjects::BOOTSTRAP_INBOX)]),
        ),
        SMALL_MAX_SUBS,
        REGISTRATION_MAX_PAYLOAD,
    )
}

/// A join credential's permissions: ask to register exactly `cluster`, read only that name's
/// bootstrap inbox.
pub fn join(cluster: &str) -> User {
    limited(
        User::new(
            allow(vec![subjects::register(cluster)]),
            allow(vec![format!(
                "{}.>",
                subjects::bootstrap_inbox_prefix(cluster)
            )]),
        ),
        SMALL_MAX_SUBS,
        REGISTRATION_MAX_PAYLOAD,
    )
}

/// Cluster `cluster`'s permissions.
pub fn cluster(cluster: &str) -> User {
    let mut publish = subjects::agent_publish(cluster).to_vec();
    publish.push(addons::credentials(cluster));
    publish.push(peersecrets::subject(cluster));
    publish.push(subjects::kubeapi_back_of(cluster));
    let mut user = limited(
        User::new(
            allow(publish),
            allow(vec![
                subjects::to_all(cluster),
                // The previous wire, for agents that predate the prefix.
                subjects::spec(cluster),
                subjects::proxy(cluster),
                subjects::kubeapi(cluster),
                subjects::BROADCAST.to_string(),
                format!("{}.>", subjects::inbox_prefix(cluster)),
            ]),
        ),
        CLUSTER_MAX_SUBS,
        AGENT_MAX_PAYLOAD,
    );
    // Proxy replies go to the server's reply subject: allowed once per request received.
    user.resp = Some(ResponsePermission { max: 1, ttl: 0 });
    user
}

/// The permissions of add-on `addon`'s agent on `cluster`: its own subjects only — it cannot
/// read the cluster's specs, publish the cluster's status, or reach another add-on or cluster.
pub fn addon(addon: &str, cluster: &str) -> User {
    let own = addons::all_of(addon, cluster);
    limited(
        User::new(
            allow(vec![own.clone()]),
            allow(vec![
                own,
                format!("{}.addon.{addon}.>", subjects::inbox_prefix(cluster)),
            ]),
        ),
        SMALL_MAX_SUBS,
        REGISTRATION_MAX_PAYLOAD,
    )
}

/// The hub's permissions: everything (in its own account).
pub fn hub() -> User {
    User::new(Permission::default(), Permission::default())
}

fn limited(mut user: User, subs: i64, payload: i64) -> User {
    user.subs = subs;
    user.payload = payload;
    user
}

fn allow(subjects: Vec<String>) -> Permission {
    Permission {
        allow: subjects,
        deny: Vec::new(),
    }
}
