//! What each kind of Flotilla user may do on NATS (the subject scheme is `flotilla_bus::subjects`;
//! every cluster token is a whole token, so a cluster's permissions name exactly its subjects).
//!
//! | user | publish | subscribe |
//! |---|---|---|
//! | bootstrap (shared by every spoke) | `flotilla.register.*` | `_INBOX_bootstrap.>` |
//! | cluster `C` | its status subjects, `flotilla.register.C`, `flotilla.sync.C`, `flotilla.addoncreds.C`, replies to requests it received | `flotilla.spec.C`, `flotilla.proxy.C`, `flotilla.broadcast`, `_INBOX.C.>` |
//! | add-on `A` on cluster `C` | `flotilla.addon.A.C.>` | `flotilla.addon.A.C.>`, `_INBOX.C.addon.A.>` |
//! | hub | everything | everything |
//!
//! A cluster cannot read another cluster's specs or replies, publish another cluster's status,
//! or publish any spec or proxy request; the bootstrap user can only ask to register and read
//! registration replies (which hold nothing usable without the asking agent's seed).

use crate::jwt::{Permission, ResponsePermission, User};
use flotilla_bus::subjects;

/// The shared bootstrap user's permissions.
pub fn bootstrap() -> User {
    User::new(
        allow(vec![subjects::REGISTER_ALL.to_string()]),
        allow(vec![format!("{}.>", subjects::BOOTSTRAP_INBOX)]),
    )
}

/// Cluster `cluster`'s permissions.
pub fn cluster(cluster: &str) -> User {
    let mut publish = subjects::agent_publish(cluster).to_vec();
    publish.push(flotilla_bus::addons::credentials(cluster));
    let mut user = User::new(
        allow(publish),
        allow(vec![
            subjects::spec(cluster),
            subjects::proxy(cluster),
            subjects::BROADCAST.to_string(),
            format!("{}.>", subjects::inbox_prefix(cluster)),
        ]),
    );
    // Proxy replies go to the hub's inbox: allowed once per request received.
    user.resp = Some(ResponsePermission { max: 1, ttl: 0 });
    user
}

/// The permissions of add-on `addon`'s agent on `cluster`: its own subjects only — it cannot
/// read the cluster's specs, publish the cluster's status, or reach another add-on or cluster.
pub fn addon(addon: &str, cluster: &str) -> User {
    let own = flotilla_bus::addons::all_of(addon, cluster);
    User::new(
        allow(vec![own.clone()]),
        allow(vec![
            own,
            format!("{}.addon.{addon}.>", subjects::inbox_prefix(cluster)),
        ]),
    )
}

/// The hub's permissions: everything.
pub fn hub() -> User {
    User::new(Permission::default(), Permission::default())
}

fn allow(subjects: Vec<String>) -> Permission {
    Permission {
        allow: subjects,
        deny: Vec::new(),
    }
}
