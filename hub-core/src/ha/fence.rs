//! What a hub holds: a [`Fence`] per unit it owns, and the [`Ownership`] table every part of the
//! hub asks before acting.
//!
//! A fence is valid until its deadline on the monotonic clock (the send instant of the last
//! acknowledged lease write, plus the TTL, minus a margin) or until it is revoked. Writers check
//! it right before every state write and stamp the write with its epoch, so a hub that was paused
//! or cut off stops by its own clock before another hub can take its units, and a write it had in
//! flight is refused by compare-and-set if the new owner has written that key since.

use std::sync::Arc;
use std::sync::RwLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use tokio::time::Instant;

/// Header carrying the writer's `<unit>.<epoch>` on every fenced KV write.
pub const EPOCH_HEADER: &str = "Flotilla-Epoch";
/// Header carrying the writer's hub id on every fenced KV write.
pub const HUB_HEADER: &str = "Flotilla-Hub";

#[derive(Debug)]
struct Inner {
    unit: u32,
    epoch: u64,
    base: Instant,
    /// Milliseconds after `base`; `u64::MAX` never expires.
    deadline_ms: AtomicU64,
    revoked: AtomicBool,
}

/// The right to act for one unit, valid until its deadline or until revoked.
#[derive(Debug, Clone)]
pub struct Fence(Arc<Inner>);

impl Fence {
    /// A fence valid until `deadline`.
    pub fn new(unit: u32, epoch: u64, deadline: Instant) -> Self {
        let base = Instant::now();
        let ms = deadline.saturating_duration_since(base).as_millis() as u64;
        Self(Arc::new(Inner {
            unit,
            epoch,
            base,
            deadline_ms: AtomicU64::new(ms),
            revoked: AtomicBool::new(false),
        }))
    }

    /// A fence that never expires (a hub without leases: tests of one subsystem).
    pub fn unlimited(unit: u32) -> Self {
        let f = Self::new(unit, 0, Instant::now());
        f.0.deadline_ms.store(u64::MAX, Ordering::Release);
        f
    }

    /// The unit.
    pub fn unit(&self) -> u32 {
        self.0.unit
    }

    /// The epoch: the revision of the lease's acquiring write, larger for every later holder.
    pub fn epoch(&self) -> u64 {
        self.0.epoch
    }

    /// Whether the holder may still act.
    pub fn is_valid(&self) -> bool {
        if self.0.revoked.load(Ordering::Acquire) {
            return false;
        }
        let ms = self.0.deadline_ms.load(Ordering::Acquire);
        ms == u64::MAX || Instant::now() < self.0.base + std::time::Duration::from_millis(ms)
    }

    /// When it expires (`None`: never).
    pub fn deadline(&self) -> Option<Instant> {
        let ms = self.0.deadline_ms.load(Ordering::Acquire);
        (ms != u64::MAX).then(|| self.0.base + std::time::Duration::from_millis(ms))
    }

    /// Moves the deadline (a renewal was acknowledged); never earlier than it is. A fence that
    /// has run out stays out, even when a late acknowledgement says the lease is still this
    /// hub's: whatever stopped when it ran out (a status consumer, a refused write) is not
    /// resumed by it. The unit is stopped and started again under a new fence and epoch.
    pub fn extend(&self, deadline: Instant) {
        if !self.is_valid() {
            return;
        }
        let ms = deadline.saturating_duration_since(self.0.base).as_millis() as u64;
        self.0.deadline_ms.fetch_max(ms, Ordering::AcqRel);
    }

    /// Ends it now (lost or released).
    pub fn revoke(&self) {
        self.0.revoked.store(true, Ordering::Release);
    }

    /// The value of [`EPOCH_HEADER`].
    pub fn header(&self) -> String {
        format!("{}.{}", self.0.unit, self.0.epoch)
    }
}

/// Parses an [`EPOCH_HEADER`] value into `(unit, epoch)`.
pub fn parse_header(value: &str) -> Option<(u32, u64)> {
    let (unit, epoch) = value.split_once('.')?;
    Some((unit.parse().ok()?, epoch.parse().ok()?))
}

/// What a stored write's epoch means to a writer that was refused by compare-and-set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// A later holder wrote it: this hub no longer owns the unit.
    Fenced,
    /// This holder wrote it (an earlier attempt landed) or an older holder did (a late write):
    /// adopt what is stored and decide again.
    Adopt,
}

/// Judges the epoch stamped on a stored write against the writer's own.
pub fn judge(mine: u64, stored: Option<u64>) -> Verdict {
    match stored {
        Some(e) if e > mine => Verdict::Fenced,
        _ => Verdict::Adopt,
    }
}

/// Which units this hub holds, with their fences. Cheap to clone.
#[derive(Clone)]
pub struct Ownership {
    units: Arc<RwLock<Vec<Option<Fence>>>>,
    changes: tokio::sync::watch::Sender<u64>,
}

impl std::fmt::Debug for Ownership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ownership")
            .field("held", &self.held())
            .finish()
    }
}

impl Ownership {
    /// Nothing held, `units` units.
    pub fn new(units: u32) -> Self {
        Self {
            units: Arc::new(RwLock::new(vec![None; units as usize])),
            changes: tokio::sync::watch::channel(0).0,
        }
    }

    /// Every unit held for ever (one hub without leases: unit tests of a subsystem).
    pub fn everything(units: u32) -> Self {
        let o = Self::new(units);
        for u in 0..units {
            o.set(u, Some(Fence::unlimited(u)));
        }
        o
    }

    /// The valid fence of `unit`, if held.
    pub fn fence(&self, unit: u32) -> Option<Fence> {
        let units = self.units.read().expect("ownership lock");
        units
            .get(unit as usize)
            .and_then(Clone::clone)
            .filter(Fence::is_valid)
    }

    /// Whether `unit` is held with a valid fence.
    pub fn holds(&self, unit: u32) -> bool {
        self.fence(unit).is_some()
    }

    /// The units held (valid fences only).
    pub fn held(&self) -> Vec<u32> {
        let units = self.units.read().expect("ownership lock");
        units
            .iter()
            .enumerate()
            .filter(|(_, f)| f.as_ref().is_some_and(Fence::is_valid))
            .map(|(u, _)| u as u32)
            .collect()
    }

    /// Records a unit's fence (`None`: released or lost; the old fence is revoked).
    pub fn set(&self, unit: u32, fence: Option<Fence>) {
        let mut units = self.units.write().expect("ownership lock");
        if let Some(slot) = units.get_mut(unit as usize) {
            if let Some(old) = slot.take()
                && fence.as_ref().is_none_or(|f| f.epoch() != old.epoch())
            {
                old.revoke();
            }
            *slot = fence;
        }
        drop(units);
        self.changes.send_modify(|n| *n += 1);
    }

    /// Notified after every change.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn a_fence_ends_at_its_deadline_or_when_revoked() {
        let f = Fence::new(3, 17, Instant::now() + Duration::from_secs(10));
        assert!(f.is_valid());
        tokio::time::advance(Duration::from_secs(9)).await;
        assert!(f.is_valid());
        f.extend(Instant::now() + Duration::from_secs(10));
        tokio::time::advance(Duration::from_secs(9)).await;
        assert!(f.is_valid(), "extended");
        // Never moved back.
        f.extend(Instant::now());
        assert!(f.is_valid());
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(!f.is_valid(), "expired");
        // A late renewal does not revive it.
        f.extend(Instant::now() + Duration::from_secs(10));
        assert!(!f.is_valid(), "a fence that ran out stays out");
        let g = Fence::new(3, 18, Instant::now() + Duration::from_secs(10));
        g.revoke();
        assert!(!g.is_valid());
        assert!(Fence::unlimited(1).is_valid());
    }

    #[test]
    fn epoch_headers_round_trip_and_later_epochs_fence() {
        let f = Fence::unlimited(7);
        assert_eq!(parse_header(&f.header()), Some((7, 0)));
        assert_eq!(parse_header("x.1"), None);
        assert_eq!(parse_header("5"), None);
        assert_eq!(judge(10, Some(11)), Verdict::Fenced);
        assert_eq!(judge(10, Some(10)), Verdict::Adopt);
        assert_eq!(judge(10, Some(3)), Verdict::Adopt);
        assert_eq!(judge(10, None), Verdict::Adopt);
    }

    #[tokio::test(start_paused = true)]
    async fn ownership_reports_only_valid_fences() {
        let o = Ownership::new(4);
        let f = Fence::new(2, 5, Instant::now() + Duration::from_secs(1));
        o.set(2, Some(f.clone()));
        assert_eq!(o.held(), vec![2]);
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(!o.holds(2));
        o.set(
            2,
            Some(Fence::new(2, 9, Instant::now() + Duration::from_secs(5))),
        );
        assert!(o.holds(2));
        let old = o.fence(2).unwrap();
        o.set(2, None);
        assert!(!old.is_valid(), "a released fence is revoked");
        assert!(Ownership::everything(3).holds(2));
    }
}
