//! The hub–agent transport: protobuf CloudEvents over NATS.
//!
//! - [`envelope`]: build, encode, decode and validate CloudEvents (`io.cloudevents.v1`), the
//!   Flotilla event `type` grammar and extension attributes, the size limit.
//! - [`subjects`]: the NATS subject scheme, including the status `<shard>` token.
//! - [`addons`]: add-on agents ↔ hub (lease renewals, scores, credential requests).
//! - [`connect`]: NATS connection options (unbounded jittered reconnect, per-cluster inbox
//!   prefix, credentials and TLS) and connection events.
//! - [`publish`]: the one way to send an event — encode within the size limit, publish with
//!   headers, wait (bounded) for JetStream's acknowledgement or a request's typed answer.
//! - [`jetstream`]: the `FLOTILLA_STATUS` stream and KV buckets created in a way that works on
//!   nats-server 2.9 and newer, and a bulk loader for KV state.
//! - [`election`]: which JetStream failures a leader election explains (no stream leader, no
//!   responders, timeouts, "not leader"), so callers try again only those (pure).
//! - [`ids`]: resource ids (UUIDv5) and status hashes.
//! - [`reply`]: the only subjects the hub answers a spoke's request on (inboxes, the asking
//!   cluster's own reply subject), and the one way it answers.
//! - [`spoke`]: an agent's one subscription (`flotilla.to.<cluster>.>`) and its demux — specs,
//!   proxied reads and cluster-proxy frames to their consumers, answers to the agent's calls.
//! - [`process`]: signal handling, RSS and the `/metrics` endpoint for the binaries.
//! - [`trace`]: logging and OpenTelemetry traces (OTLP), `traceparent` across events.
//! - [`peersecrets`]: MirrorPeer secret exchange — the peer request/reply, the poke, and the
//!   sealing of a peer's Secret to another peer with the sender's static curve key.
//! - [`policies`]: governance policy spec, status and resync events (types, resource id,
//!   subject).
//! - [`scores`]: AddOnPlacementScore reports (event type, status subject).
//! - [`snapshot`]: backups of streams through JetStream's own snapshot and restore API — the
//!   chunk frames, which streams a backup takes, its manifest, the client.
//! - [`serviceaccounts`]: ManagedServiceAccount specs and token reports (types, resource id,
//!   subject), the sealing of tokens to the hub's curve key and their hash.
//! - [`tunnel`]: the cluster proxy's frames — one Kubernetes API call streamed between hub
//!   and agent in chunks, with credit-based flow control, cancellation and keepalives.
//! - [`works`]: ManifestWork spec, status and resync events (types, resource id, subject).

#![deny(missing_docs)]

pub mod addons;
pub mod connect;
pub mod election;
pub mod envelope;
pub mod ids;
pub mod jetstream;
pub mod peersecrets;
pub mod policies;
pub mod process;
pub mod publish;
pub mod reply;
pub mod scores;
pub mod serviceaccounts;
pub mod snapshot;
pub mod spoke;
pub mod subjects;
pub mod trace;
pub mod tunnel;
pub mod works;

pub use envelope::{EnvelopeError, Event, EventType};
