//! Deliveries in flight (pure: the caller's clock): at most so many per hub, and at most a share
//! of them per source *while their bodies are read* — the phase the sender controls. Without the
//! share, two sources holding eight slow deliveries each kept every place taken and every real
//! delivery was answered 503 (session-16 review A2). Once a body is whole its delivery keeps its
//! hub place until answered but no longer counts towards its source's share, so a sender whose
//! deliveries wait on a busy hub (one GitLab, a proxy, GitHub's few egress addresses) is not
//! throttled to the share (session-17 review M1).
//!
//! A source answered 408 (a body too slow) or 413 (too large) is refused any place for
//! [`PENALTY`] ([`penalty`]): real providers never trip either, and without it a few sources
//! re-posting after every 408 kept every place busy at little cost (session-17 review M2).
//!
//! The share and the penalty count a [`holder_of`] key: an IPv4 address, an IPv6 /48 (a /64 is
//! what one site has, but any VPS with a routed /48 has 65,536 of them). The rate keeps the
//! narrower [`crate::webserver::source_of`] key this one widens.
//!
//! A [`Place`] holds one place and gives it back when dropped, however the delivery ended
//! (answered, refused, timed out, or the sender gone). Bounded: a source is remembered for its
//! share only while it has a body being read, so at most `total` are; penalised ones at most
//! [`SOURCES`](super::rate::SOURCES), those whose penalty ends soonest forgotten first.

use super::Outcome;
use super::rate::SOURCES;
use crate::webserver::source_of;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long a source is refused any place after a body too slow or too large.
pub const PENALTY: Duration = Duration::from_secs(60);
/// The IPv6 prefix one holder of places is keyed on.
pub const V6_PREFIX: u32 = 48;

/// The key a share and a penalty count: [`source_of`]'s (an IPv4 address, an IPv4-mapped IPv6
/// address as its IPv4 one), an IPv6 address widened to its /[`V6_PREFIX`].
pub fn holder_of(ip: IpAddr) -> IpAddr {
    match source_of(ip) {
        IpAddr::V6(v6) => {
            let prefix = u128::from(v6) & !(u128::MAX >> V6_PREFIX);
            IpAddr::V6(Ipv6Addr::from(prefix))
        }
        v4 => v4,
    }
}

/// How long a source answered `outcome` is refused a place: [`PENALTY`] for a body too slow
/// (408), which no provider sends; nothing for any other answer — not even a body too large
/// (413): GitHub sends payloads up to 25 MB from addresses many repositories share, and reading
/// 1 MiB of one costs the hub little.
pub fn penalty(outcome: Outcome) -> Option<Duration> {
    matches!(outcome, Outcome::TooSlow).then_some(PENALTY)
}

/// Why no place was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// Every place of the hub is taken.
    Hub,
    /// The source has its share of bodies being read already.
    Source,
    /// The source was answered `why` (408 or 413) lately and is refused for `left` more.
    Penalised {
        /// What earned the penalty.
        why: Outcome,
        /// How long it still lasts.
        left: Duration,
    },
}

/// Deliveries in flight, in all and by source, and the sources penalised.
#[derive(Debug)]
pub struct Pool {
    total: usize,
    per_source: usize,
    taken: usize,
    /// Bodies being read, by [`holder_of`] key.
    reading: HashMap<IpAddr, usize>,
    /// Until when, and why, a [`holder_of`] key is refused.
    penalised: HashMap<IpAddr, (Instant, Outcome)>,
}

impl Pool {
    /// `total` places, at most `per_source` of them reading a body for one source.
    pub fn new(total: usize, per_source: usize) -> Self {
        Self {
            total,
            per_source,
            taken: 0,
            reading: HashMap::new(),
            penalised: HashMap::new(),
        }
    }

    /// Takes a place at `now` for a delivery from `source`, its body to be read (a penalty is
    /// checked first, then its share, so a source is told what it can change even when the hub
    /// is full too).
    pub fn take(&mut self, source: IpAddr, now: Instant) -> Result<(), Full> {
        let source = holder_of(source);
        if let Some(&(until, why)) = self.penalised.get(&source) {
            if until > now {
                return Err(Full::Penalised {
                    why,
                    left: until - now,
                });
            }
            self.penalised.remove(&source);
        }
        let reading = self.reading.get(&source).copied().unwrap_or(0);
        if reading >= self.per_source {
            return Err(Full::Source);
        }
        if self.taken >= self.total {
            return Err(Full::Hub);
        }
        self.taken += 1;
        *self.reading.entry(source).or_default() += 1;
        Ok(())
    }

    /// A body `source` was sending is whole (or ended): its share counts it no longer, its hub
    /// place stays taken until [`Pool::answered`]. Whether `source` had one being read.
    pub fn body_read(&mut self, source: IpAddr) -> bool {
        let source = holder_of(source);
        let Some(n) = self.reading.get_mut(&source) else {
            return false;
        };
        *n -= 1;
        if *n == 0 {
            self.reading.remove(&source);
        }
        true
    }

    /// Gives back the hub place of a delivery whose body was read ([`Pool::body_read`]).
    pub fn answered(&mut self) {
        self.taken = self.taken.saturating_sub(1);
    }

    /// Gives back a place `source` took whose body was still being read.
    pub fn give_back(&mut self, source: IpAddr) {
        if self.body_read(source) {
            self.answered();
        }
    }

    /// `source` was answered `why` at `now`: refused any place until [`penalty`] of it has
    /// passed (nothing for an answer that earns none). Past [`SOURCES`] penalised sources the
    /// lapsed are forgotten, then the one whose penalty ends soonest.
    pub fn penalise(&mut self, source: IpAddr, why: Outcome, now: Instant) {
        let Some(lasts) = penalty(why) else {
            return;
        };
        let source = holder_of(source);
        if !self.penalised.contains_key(&source) && self.penalised.len() >= SOURCES {
            self.penalised.retain(|_, (until, _)| *until > now);
            if self.penalised.len() >= SOURCES
                && let Some(soonest) = self
                    .penalised
                    .iter()
                    .min_by_key(|(_, (until, _))| *until)
                    .map(|(k, _)| *k)
            {
                self.penalised.remove(&soonest);
            }
        }
        self.penalised.insert(source, (now + lasts, why));
    }

    /// Places taken now.
    pub fn taken(&self) -> usize {
        self.taken
    }

    /// Sources with a body being read now.
    pub fn sources(&self) -> usize {
        self.reading.len()
    }

    /// Sources remembered as penalised (lapsed ones included until a take or a full table
    /// forgets them).
    pub fn penalised(&self) -> usize {
        self.penalised.len()
    }
}

/// One delivery's place in a shared [`Pool`], given back when dropped; counted in its source's
/// share until [`Place::body_read`].
#[derive(Debug)]
pub struct Place {
    pool: Arc<Mutex<Pool>>,
    source: IpAddr,
    reading: bool,
}

fn lock(pool: &Mutex<Pool>) -> std::sync::MutexGuard<'_, Pool> {
    // Nothing panics while the lock is held, so a poisoned one still holds counts that add up.
    pool.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Place {
    /// A place in `pool` at `now` for a delivery from `source`, its body to be read.
    pub fn take(pool: &Arc<Mutex<Pool>>, source: IpAddr, now: Instant) -> Result<Place, Full> {
        lock(pool).take(source, now)?;
        Ok(Place {
            pool: pool.clone(),
            source,
            reading: true,
        })
    }

    /// The body is whole (or its reading ended): the source's share counts this delivery no
    /// longer; the hub's place is kept until the place is dropped.
    pub fn body_read(&mut self) {
        if std::mem::take(&mut self.reading) {
            lock(&self.pool).body_read(self.source);
        }
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        // Never panics here (a panic in a drop while unwinding aborts).
        let mut pool = lock(&self.pool);
        if self.reading {
            pool.give_back(self.source);
        } else {
            pool.answered();
        }
    }
}
