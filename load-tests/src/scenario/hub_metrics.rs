//! The hub's Prometheus metrics the scenarios read (self-started hub only), by name: one home
//! for the names, which the hub's `metrics` module exports under the `flotilla_hub` prefix.

/// Work specs re-sent because no status came back in time.
pub const WORK_RESENDS: &str = "flotilla_hub_work_resends_total";
/// Spec resync requests answered.
pub const RESYNCS: &str = "flotilla_hub_resyncs_total";
/// Events received from spokes, all types together.
pub const EVENTS_RECEIVED: &str = "flotilla_hub_events_received_total";
/// Messages dropped at a full actor mailbox (redelivered by JetStream).
pub const MAILBOX_DROPPED: &str = "flotilla_hub_mailbox_dropped_total";
/// Leases that expired (clusters turned Unknown).
pub const LEASES_EXPIRED: &str = "flotilla_hub_lease_expired_total";
/// AddOnPlacementScores written.
pub const SCORES_WRITTEN: &str = "flotilla_hub_placement_score_updates_total";
/// Acknowledged KV writes (the count of the write-latency histogram).
pub const KV_WRITES: &str = "flotilla_hub_kv_write_seconds_count";
/// Calls open to agents through the cluster proxy (a gauge).
pub const OPEN_CALLS: &str = "flotilla_hub_cluster_proxy_open_calls";
