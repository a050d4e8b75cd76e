//! Several hubs, one control plane.
//!
//! The hub's work is divided into units: the 32 status shards (every cluster, its works, its
//! status and its agent's requests belong to `shard(cluster)`), plus one unit for the
//! controllers (placements, replica sets, add-ons, set namespaces, secure mode's account pusher).
//! A hub acts for a unit only while it holds the unit's lease in a replicated KV bucket
//! ([`lease`]), and only until its own deadline on the monotonic clock ([`fence`]): a hub that
//! cannot renew stops before another can take over, and every state write carries the writer's
//! epoch so a late one from an old owner is refused by compare-and-set.
//!
//! - [`assign`]: capped rendezvous hashing of units over the live hubs (pure);
//! - [`rules`]: which free units to take and which held one to hand over (pure);
//! - [`members`]: heartbeats and the live set;
//! - [`keeper`]: a held unit's renewals, on a task of their own;
//! - [`shards`]: the loop that takes, renews, hands over and loses units, and starts and stops the
//!   hub's work for them through a [`shards::Host`];
//! - [`held`]: the units this hub holds, as a gauge (alert `FlotillaShardUnheld`);
//! - [`skew`]: live hubs more than one minor version away (shown and alerted), and whether
//!   this hub waits beside a newer one (takes no new units; pure + gauge).

pub mod assign;
pub mod fence;
pub mod held;
pub mod keeper;
pub mod lease;
pub mod members;
pub mod rules;
pub mod shards;
pub mod skew;

pub use fence::{Fence, Ownership};

use std::time::Duration;

/// Units: the status shards, then the controllers.
pub const UNITS: u32 = flotilla_bus::subjects::SHARDS + 1;
/// The controllers' unit.
pub const CONTROLLERS: u32 = flotilla_bus::subjects::SHARDS;

/// Settings of the shard leases.
#[derive(Debug, Clone)]
pub struct HaConfig {
    /// This hub's id (`--hub-id`); `None`: `<hostname>-<grpc port>`.
    pub hub_id: Option<String>,
    /// Lease TTL (the bucket's `max_age`; an existing bucket's wins).
    pub ttl: Duration,
    /// Renew every.
    pub renew: Duration,
    /// Stop acting this long before the lease could expire.
    pub margin: Duration,
    /// How often leases are read and the plan made.
    pub tick: Duration,
    /// A free unit whose assigned hub does not take it is taken by the next ranked hub after
    /// this (times its rank).
    pub stagger: Duration,
}

impl Default for HaConfig {
    fn default() -> Self {
        Self {
            hub_id: None,
            ttl: Duration::from_secs(15),
            renew: Duration::from_secs(3),
            margin: Duration::from_secs(2),
            tick: Duration::from_secs(1),
            stagger: Duration::from_secs(2),
        }
    }
}

impl HaConfig {
    /// Checks that the timers can work: renewals well inside the TTL, the margin inside it.
    pub fn validate(&self) -> Result<(), String> {
        if self.renew.is_zero() || self.tick.is_zero() {
            return Err("--shard-lease-renew must be positive".into());
        }
        if self.renew * 3 > self.ttl {
            return Err(format!(
                "--shard-lease-renew ({:?}) must be at most a third of --shard-lease-ttl ({:?})",
                self.renew, self.ttl
            ));
        }
        if let Some(id) = &self.hub_id {
            let valid = !id.is_empty()
                && id.len() <= 128
                && id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'));
            if !valid {
                return Err(format!(
                    "--hub-id {id:?}: use 1-128 letters, digits, '-' or '_'"
                ));
            }
        }
        if self.margin >= self.ttl - self.renew {
            return Err(format!(
                "the fencing margin ({:?}) must be below --shard-lease-ttl minus --shard-lease-renew",
                self.margin
            ));
        }
        Ok(())
    }
}
