//! The Flotilla hub's core: what every controller family builds on, and nothing that knows a
//! family. `flotilla-hub` depends on this crate and never the other way, so cargo refuses an
//! import that runs back up from the core into a family.
//!
//! State and views:
//! - [`store`]: typed JetStream KV buckets; calls ride through elections, records that do not
//!   decode are quarantined.
//! - [`identity`]: uid, creationTimestamp and generation of stored objects.
//! - [`keys`]: typed keys of namespaced objects (inventory and KV spellings).
//! - [`settle`]: keys whose write had an unknown outcome, read again by their owner.
//! - [`backoff`]: per-key retry times, the wait doubling while attempts go unanswered (pure).
//! - [`inventory`]: the shared read view of all clusters and works plus a change broadcast.
//! - [`views`]: every hub's views of every cluster and work, fed by one KV watch per bucket.
//!
//! Clusters and spokes:
//! - [`cluster`]: one actor per ManagedCluster (registration, acceptance, leases, status, admin
//!   edits) and the registry that spawns them, here or on their shard's hub; pure OCM rules in
//!   [`cluster::rules`].
//! - [`router`]: NATS subscriptions (registrations, the status stream) → cluster actors and
//!   report sinks; the one way the hub answers a spoke ([`flotilla_bus::reply`]).
//! - [`report`]: status reports a controller family takes — handed to it on the controllers'
//!   hub, forwarded there from the others.
//! - [`admission`]: how many new clusters are created at once under a registration burst, and
//!   when a busy agent asks again.
//! - [`limits`]: what spokes may make the hub keep (pending clusters, new names per second, the
//!   status stream's bounds).
//! - [`recovery`]: the recovery window after a restore and its orphans (works spokes hold
//!   that the restored store lacks), which no spoke is told to delete until an operator decides.
//! - [`janitor`]: purges the subjects of refused status messages from the status stream.
//! - [`mailbox`]: a bounded mailbox that holds no buffer while empty (one per cluster actor).
//! - [`security`]: secure mode — cluster credentials with registration replies, join
//!   credentials, revocations.
//! - [`wire`]: which subjects each cluster's agent listens on (the previous wire or one
//!   prefix), from its stored record, for every hub → agent publish.
//!
//! Controllers:
//! - [`controller`]: a controller family's shape ([`controller::Family`]), what it starts from
//!   ([`controller::Start`]) and the running set ([`controller::Controllers`]).
//! - [`tasks`]: a registry's per-object actors, awaited when the controllers stop.
//! - [`handle`]: the handle of a controller task that owns one kind's objects: its mailbox and
//!   published views.
//!
//! Several hubs:
//! - [`ha`]: unit leases, fences, membership, and the shard-lease loop.
//! - [`units`]: what this hub does for each unit it holds — a shard's actors and status
//!   consumer, or the controllers.
//! - [`sealed`]: boxes between hubs — forwarded calls sealed with the shared sealing key,
//!   answers and join tokens sealed to the asker; [`key`], the sealing key.
//! - [`grpc`]: what every gRPC service passes through — the API builder, the method access
//!   table, tokens and roles, capacity, guards, late services and their forwarding.
//! - [`metrics`]: Prometheus metrics and the `/metrics` endpoint.
//!
//! Teams:
//! - [`grants`]: who holds which role on the fleet, each cluster set and each namespace (the
//!   grants file), and the pure decisions and list filters every surface asks (issue 48).
//! - [`setindex`]: every hub's set index (which sets each cluster is in), kept from the cluster
//!   view and the `clustersets` bucket, for the grants' filters and decisions.

#![deny(missing_docs)]

pub mod admission;
pub mod backoff;
pub mod cluster;
pub mod controller;
pub mod grants;
pub mod grpc;
pub mod ha;
pub mod handle;
pub mod identity;
pub mod inventory;
pub mod janitor;
pub mod key;
pub mod keys;
pub mod limits;
pub mod mailbox;
pub mod metrics;
pub mod recovery;
pub mod report;
pub mod router;
pub mod sealed;
pub mod security;
pub mod setindex;
pub mod settle;
pub mod store;
pub mod tasks;
pub mod units;
pub mod views;
pub mod wire;
