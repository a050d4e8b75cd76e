//! Webhooks per source (pure: the caller's clock): a token bucket each, so one sender cannot
//! make the hub verify and fetch without end. A source is an IPv4 address or an IPv6 /64 (one
//! site's whole prefix: an IPv6 sender has billions of addresses, not billions of prefixes).
//! Bounded: at most [`SOURCES`] sources are remembered; past it those whose bucket is full again
//! are forgotten, and while every one is still busy a new source is refused — never all
//! forgotten, which would hand every sender a full bucket again (a sender rotating addresses
//! would void the limit).

use crate::webserver::source_of;
use flotilla_hub_core::limits::TokenBucket;
use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Instant;

/// Source addresses remembered at most.
pub const SOURCES: usize = 4096;
/// Default webhooks a second per source address.
pub const RATE: f64 = 10.0;
/// Default burst per source address.
pub const BURST: f64 = 20.0;

/// Token buckets by source address.
#[derive(Debug)]
pub struct Rates {
    rate: f64,
    burst: f64,
    buckets: HashMap<IpAddr, TokenBucket>,
}

impl Rates {
    /// `rate` a second per source, `burst` at once.
    pub fn new(rate: f64, burst: f64) -> Self {
        Self {
            rate,
            burst,
            buckets: HashMap::new(),
        }
    }

    /// Whether one more webhook from `source` is taken at `now` (and counts it).
    pub fn admit(&mut self, source: IpAddr, now: Instant) -> bool {
        let source = source_of(source);
        if !self.buckets.contains_key(&source) && self.buckets.len() >= SOURCES {
            let (rate, burst) = (self.rate, self.burst);
            self.buckets.retain(|_, b| {
                let mut b = *b;
                b.available(now, rate, burst) < burst as u64
            });
            if self.buckets.len() >= SOURCES {
                return false;
            }
        }
        let bucket = self
            .buckets
            .entry(source)
            .or_insert_with(|| TokenBucket::full(self.burst, now));
        if bucket.available(now, self.rate, self.burst) == 0 {
            return false;
        }
        bucket.spend(1);
        true
    }

    /// Sources remembered now.
    pub fn len(&self) -> usize {
        self.buckets.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }
}
