//! Deliveries in flight: at most so many per hub, and at most a share of them per source — the
//! key the rate uses ([`crate::webserver::source_of`]: an IPv4 address or an IPv6 /64). Without
//! the share, two sources holding eight slow deliveries each kept every place taken and every
//! real delivery was answered 503 (session-16 review A2); with a share of 2 of 16 it takes eight
//! sources. The counts are pure; a [`Place`] holds one and gives it back when dropped, however
//! the delivery ended (answered, refused, timed out, or the sender gone). Bounded: a source is
//! remembered only while it has a delivery in flight, so at most `total` sources are.

use crate::webserver::source_of;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

/// Why no place was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// Every place of the hub is taken.
    Hub,
    /// The source holds its share already.
    Source,
}

/// Deliveries in flight, in all and by source.
#[derive(Debug)]
pub struct Pool {
    total: usize,
    per_source: usize,
    taken: usize,
    by_source: HashMap<IpAddr, usize>,
}

impl Pool {
    /// `total` places, at most `per_source` of them for one source.
    pub fn new(total: usize, per_source: usize) -> Self {
        Self {
            total,
            per_source,
            taken: 0,
            by_source: HashMap::new(),
        }
    }

    /// Takes a place for a delivery from `source` (its share is checked first, so a source at
    /// its share is told so even when the hub is full too).
    pub fn take(&mut self, source: IpAddr) -> Result<(), Full> {
        let source = source_of(source);
        let held = self.by_source.get(&source).copied().unwrap_or(0);
        if held >= self.per_source {
            return Err(Full::Source);
        }
        if self.taken >= self.total {
            return Err(Full::Hub);
        }
        self.taken += 1;
        *self.by_source.entry(source).or_default() += 1;
        Ok(())
    }

    /// Gives back a place `source` took.
    pub fn give_back(&mut self, source: IpAddr) {
        let source = source_of(source);
        if let Some(n) = self.by_source.get_mut(&source) {
            *n -= 1;
            if *n == 0 {
                self.by_source.remove(&source);
            }
            self.taken -= 1;
        }
    }

    /// Places taken now.
    pub fn taken(&self) -> usize {
        self.taken
    }

    /// Sources holding a place now.
    pub fn sources(&self) -> usize {
        self.by_source.len()
    }
}

/// One delivery's place in a shared [`Pool`], given back when dropped.
#[derive(Debug)]
pub struct Place {
    pool: Arc<Mutex<Pool>>,
    source: IpAddr,
}

impl Place {
    /// A place in `pool` for a delivery from `source`.
    pub fn take(pool: &Arc<Mutex<Pool>>, source: IpAddr) -> Result<Place, Full> {
        pool.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take(source)?;
        Ok(Place {
            pool: pool.clone(),
            source,
        })
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        // Never panics here (a panic in a drop while unwinding aborts): nothing panics while
        // the lock is held, so a poisoned one still holds counts that add up.
        self.pool
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .give_back(self.source);
    }
}
