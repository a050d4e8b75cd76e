//! The deadlines of a shard's parked actors (pure): at most one per cluster, set again or
//! cleared as the actor parks, taken once due.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use tokio::time::Instant;

/// One deadline per cluster name, in deadline order.
#[derive(Debug, Default)]
pub struct Alarms {
    by_name: HashMap<Arc<str>, Instant>,
    by_time: BTreeSet<(Instant, Arc<str>)>,
}

impl Alarms {
    /// Sets the alarm of `name` to `at`, replacing the one it had; `None` clears it.
    pub fn set(&mut self, name: &str, at: Option<Instant>) {
        if let Some((key, old)) = self.by_name.remove_entry(name) {
            self.by_time.remove(&(old, key.clone()));
            if let Some(at) = at {
                self.by_time.insert((at, key.clone()));
                self.by_name.insert(key, at);
            }
            return;
        }
        if let Some(at) = at {
            let key: Arc<str> = Arc::from(name);
            self.by_time.insert((at, key.clone()));
            self.by_name.insert(key, at);
        }
    }

    /// When the next alarm is due.
    pub fn next(&self) -> Option<Instant> {
        self.by_time.first().map(|(at, _)| *at)
    }

    /// Takes every alarm due at `now`, earliest first.
    pub fn due(&mut self, now: Instant) -> Vec<Arc<str>> {
        let mut due = Vec::new();
        while let Some((at, _)) = self.by_time.first()
            && *at <= now
        {
            let (_, name) = self.by_time.pop_first().expect("first exists");
            self.by_name.remove(&name);
            due.push(name);
        }
        due
    }

    /// Alarms set.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// Whether no alarm is set.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}
