//! The shard-lease loop: the task that takes, renews, hands over and loses units, and tells the
//! hub (its [`Host`]) to start or stop acting for them. Decisions are in [`super::rules`]; this
//! file reads, writes and keeps the timers.

use super::fence::{Fence, Ownership};
use super::keeper::{self, Keeper};
use super::lease::{HubInfo, LeaseError, Leases};
use super::members::Members;
use super::rules::{self, Action, Unit};
use super::skew;
use super::{HaConfig, UNITS};
use tracing::Instrument;

use futures::future::BoxFuture;
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// What acts for units: started when a unit is taken, stopped (and awaited) before it is
/// released, stopped when it is lost.
pub trait Host: Send + Sync + 'static {
    /// Start acting for `unit` under `fence`.
    fn start(&self, unit: u32, fence: Fence) -> BoxFuture<'static, ()>;
    /// Stop acting for `unit`; resolves once everything acting for it has ended.
    fn stop(&self, unit: u32) -> BoxFuture<'static, ()>;
}

/// One change of ownership, as `/debug/shards` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ShardEvent {
    /// The unit (32 = the controllers).
    pub unit: u32,
    /// Its epoch.
    pub epoch: u64,
    /// `acquired`, `released` or `lost`.
    pub event: &'static str,
    /// Wall-clock milliseconds since the Unix epoch.
    pub at_ms: u64,
}

/// The recent ownership changes of this hub.
#[derive(Clone, Default)]
pub struct ShardLog(Arc<Mutex<VecDeque<ShardEvent>>>);

const LOG_CAPACITY: usize = 4096;

impl ShardLog {
    fn record(&self, unit: u32, epoch: u64, event: &'static str) {
        self.record_at(unit, epoch, event, SystemTime::now());
    }

    /// A loss is logged when it is noticed, but the hub stopped acting at its fence's deadline
    /// (a paused hub notices only when it runs again): that is the time recorded.
    fn record_lost(&self, fence: &Fence) {
        let now = Instant::now();
        let at = match fence.deadline() {
            Some(d) if d < now => SystemTime::now() - (now - d),
            _ => SystemTime::now(),
        };
        self.record_at(fence.unit(), fence.epoch(), "lost", at);
    }

    fn record_at(&self, unit: u32, epoch: u64, event: &'static str, at: SystemTime) {
        let at_ms = at
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        tracing::info!(unit, epoch, event, "shard ownership");
        let mut log = self.0.lock().expect("shard log lock");
        if log.len() == LOG_CAPACITY {
            log.pop_front();
        }
        log.push_back(ShardEvent {
            unit,
            epoch,
            event,
            at_ms,
        });
    }

    /// Every recorded change, oldest first.
    pub fn events(&self) -> Vec<ShardEvent> {
        self.0
            .lock()
            .expect("shard log lock")
            .iter()
            .cloned()
            .collect()
    }
}

/// Units a hub hands over per round while rebalancing: a newcomer gets its share within a few
/// seconds, and the hand-over of each is still drain, release, acquire.
const RELEASES_PER_ROUND: usize = 4;

enum HostCmd {
    Start(u32, Fence),
    Stop(u32, Option<oneshot::Sender<()>>),
}

enum State {
    Free {
        since: Instant,
    },
    Other {
        hub: String,
    },
    Mine {
        keeper: Keeper,
        fence: Fence,
        releasing: Option<oneshot::Receiver<()>>,
    },
}

/// The running loop's handle.
#[derive(Clone)]
pub struct Shards {
    ownership: Ownership,
    log: ShardLog,
    stop: watch::Sender<bool>,
    me: HubInfo,
    members: Members,
    ttl: std::time::Duration,
    first_round: watch::Receiver<bool>,
}

impl Shards {
    /// What this hub holds.
    pub fn ownership(&self) -> &Ownership {
        &self.ownership
    }

    /// Ownership changes so far.
    pub fn log(&self) -> &ShardLog {
        &self.log
    }

    /// This hub.
    pub fn me(&self) -> &HubInfo {
        &self.me
    }

    /// The live hubs.
    pub fn live(&self) -> Vec<HubInfo> {
        self.members
            .live(self.ttl)
            .into_iter()
            .map(|s| s.info)
            .collect()
    }

    /// Resolves once the first round of acquisitions has been tried.
    pub async fn first_round(&self) {
        let mut rx = self.first_round.clone();
        let _ = rx.wait_for(|done| *done).await;
    }

    /// Hands every unit over and leaves (the task ends when done).
    pub fn drain(&self) {
        let _ = self.stop.send(true);
    }
}

/// Starts the loop. The returned task ends after [`Shards::drain`], once every unit is handed
/// over (or lost) and the heartbeat removed.
pub fn spawn(
    config: HaConfig,
    me: HubInfo,
    leases: Leases,
    members: Members,
    ownership: Ownership,
    host: Arc<dyn Host>,
) -> (Shards, JoinHandle<()>) {
    let log = ShardLog::default();
    let (stop, stop_rx) = watch::channel(false);
    let (first_tx, first_rx) = watch::channel(false);
    let handle = Shards {
        ownership: ownership.clone(),
        log: log.clone(),
        stop,
        me: me.clone(),
        members: members.clone(),
        ttl: config.ttl,
        first_round: first_rx,
    };
    let (host_tx, host_rx) = mpsc::unbounded_channel();
    let now = Instant::now();
    let runner = Runner {
        config,
        me,
        leases,
        members: members.clone(),
        units: (0..UNITS).map(|_| State::Free { since: now }).collect(),
        ownership,
        log,
        host_tx,
        draining: false,
        beaten: None,
        born: now,
        said_waiting: None,
    };
    let task = tokio::spawn(
        async move {
            let (watch_stop_tx, watch_stop) = watch::channel(false);
            let watcher = tokio::spawn(
                members
                    .watch(watch_stop)
                    .instrument(tracing::info_span!("members_watch")),
            );
            let host_task =
                tokio::spawn(run_host(host, host_rx).instrument(tracing::info_span!("shard_host")));
            runner.run(stop_rx, first_tx).await;
            let _ = watch_stop_tx.send(true);
            let _ = watcher.await;
            let _ = host_task.await;
        }
        .instrument(tracing::info_span!("shards")),
    );
    (handle, task)
}

/// Carries the loop's commands out: in order for each unit, units independently (stopping one
/// unit whose actors wait on a slow store must not hold back starting another).
async fn run_host(host: Arc<dyn Host>, mut rx: mpsc::UnboundedReceiver<HostCmd>) {
    let mut queues: Vec<mpsc::UnboundedSender<HostCmd>> = Vec::new();
    let mut workers = tokio::task::JoinSet::new();
    for queue in 0..UNITS {
        let (tx, mut unit_rx) = mpsc::unbounded_channel::<HostCmd>();
        let host = host.clone();
        let span = tracing::info_span!("shard_host_queue", queue);
        workers.spawn(
            async move {
                while let Some(cmd) = unit_rx.recv().await {
                    match cmd {
                        HostCmd::Start(unit, fence) => host.start(unit, fence).await,
                        HostCmd::Stop(unit, done) => {
                            host.stop(unit).await;
                            if let Some(done) = done {
                                let _ = done.send(());
                            }
                        }
                    }
                }
            }
            .instrument(span),
        );
        queues.push(tx);
    }
    while let Some(cmd) = rx.recv().await {
        let unit = match &cmd {
            HostCmd::Start(u, _) | HostCmd::Stop(u, _) => *u as usize,
        };
        if let Some(q) = queues.get(unit) {
            let _ = q.send(cmd);
        }
    }
    drop(queues);
    while workers.join_next().await.is_some() {}
}

struct Runner {
    config: HaConfig,
    me: HubInfo,
    leases: Leases,
    members: Members,
    units: Vec<State>,
    ownership: Ownership,
    log: ShardLog,
    host_tx: mpsc::UnboundedSender<HostCmd>,
    draining: bool,
    beaten: Option<Instant>,
    born: Instant,
    /// When this hub last said it waits beside a newer hub ([`skew::waits`]).
    said_waiting: Option<Instant>,
}

impl Runner {
    async fn run(mut self, mut stop: watch::Receiver<bool>, first_round: watch::Sender<bool>) {
        // Let the heartbeat watch deliver who is already there before planning: a hub joining
        // others then takes only its share instead of everything free.
        self.beat().await;
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let mut tick = tokio::time::interval(self.config.tick);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut drain_started: Option<Instant> = None;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                changed = stop.changed(), if !self.draining => {
                    if changed.is_err() || *stop.borrow() {
                        self.draining = true;
                        drain_started = Some(Instant::now());
                        self.me.draining = true;
                        self.beaten = None;
                    }
                }
            }
            self.round().await;
            let _ = first_round.send(true);
            if self.draining {
                let held = self.units.iter().any(|s| matches!(s, State::Mine { .. }));
                let overdue = drain_started.is_some_and(|t| t.elapsed() > self.config.ttl * 2);
                if !held || overdue {
                    break;
                }
            }
        }
        for unit in 0..UNITS {
            if let State::Mine { fence, .. } = &self.units[unit as usize] {
                self.log.record_lost(fence);
                self.ownership.set(unit, None);
                let _ = self.host_tx.send(HostCmd::Stop(unit, None));
            }
        }
        self.members.leave(&self.me.hub, self.config.renew).await;
    }

    async fn beat(&mut self) {
        if self.beaten.is_some_and(|t| t.elapsed() < self.config.renew) {
            return;
        }
        match self.members.beat(&self.me, self.config.renew).await {
            Ok(()) => self.beaten = Some(Instant::now()),
            Err(e) => tracing::warn!(error = %e, "hub heartbeat failed"),
        }
    }

    async fn round(&mut self) {
        self.beat().await;
        self.reconcile().await;
        self.expire();
        self.finish_releases().await;
        let others: Vec<_> = self
            .members
            .live(self.config.ttl)
            .into_iter()
            .filter(|s| s.info.hub != self.me.hub)
            .collect();
        let versions: Vec<&str> = others
            .iter()
            .map(|s| s.info.version.as_str())
            .chain([self.me.version.as_str()])
            .collect();
        let waits = |version: &str| skew::waits(version, &versions);
        let mut live: Vec<rules::Live> = others
            .iter()
            .map(|s| rules::Live {
                hub: s.info.hub.clone(),
                draining: s.info.draining,
                waiting: waits(&s.info.version).is_some(),
                since: s.since,
            })
            .collect();
        let newest = waits(&self.me.version);
        self.say_waiting(newest.as_ref());
        // This hub is alive whatever its watch has delivered so far.
        live.push(rules::Live {
            hub: self.me.hub.clone(),
            draining: self.draining,
            waiting: newest.is_some(),
            since: self.born,
        });
        let view: Vec<Unit> = self
            .units
            .iter()
            .map(|s| match s {
                State::Free { since } => Unit::Free { since: *since },
                State::Other { hub } => Unit::Other { hub: hub.clone() },
                State::Mine { releasing, .. } => Unit::Mine {
                    releasing: releasing.is_some(),
                },
            })
            .collect();
        let timing = rules::Timing {
            stagger: self.config.stagger,
            settle: self.config.renew * 2,
            // No voluntary hand-over while the store elects leaders (or did within a TTL): it
            // would cut calls off and start shards on a store that does not answer. A hub
            // leaving still hands everything over.
            max_releases: if crate::store::ride::electing_within(self.config.ttl) {
                0
            } else {
                RELEASES_PER_ROUND
            },
        };
        let actions = rules::plan(
            &self.me.hub,
            self.draining,
            &view,
            &live,
            Instant::now(),
            timing,
        );
        let acquires: Vec<u32> = actions
            .iter()
            .filter_map(|a| match a {
                Action::Acquire(u) => Some(*u),
                Action::Release(_) => None,
            })
            .collect();
        self.acquire(&acquires).await;
        for a in actions {
            if let Action::Release(unit) = a
                && let State::Mine { releasing, .. } = &mut self.units[unit as usize]
            {
                let (tx, rx) = oneshot::channel();
                *releasing = Some(rx);
                let _ = self.host_tx.send(HostCmd::Stop(unit, Some(tx)));
            }
        }
    }

    /// Says once a minute, while it lasts, that this hub waits beside a newer one (`newest`).
    fn say_waiting(&mut self, newest: Option<&flotilla_api::version::Version>) {
        let Some(newest) = newest else {
            self.said_waiting = None;
            return;
        };
        if self
            .said_waiting
            .is_some_and(|t| t.elapsed() < std::time::Duration::from_secs(60))
        {
            return;
        }
        self.said_waiting = Some(Instant::now());
        tracing::warn!(
            version = %self.me.version,
            newest = %newest,
            "waiting: a live hub runs {newest}, more than one minor version above this hub's \
             {}; this hub takes no new units (it keeps those it holds) — finish the upgrade",
            self.me.version
        );
    }

    fn timing(&self) -> keeper::Timing {
        keeper::Timing {
            renew: self.config.renew,
            ttl: self.config.ttl,
            margin: self.config.margin,
        }
    }

    /// This hub holds `unit` from now under `epoch` (the acquiring write's revision): its lease
    /// at `revision`, written at `sent`.
    fn hold(&mut self, unit: u32, epoch: u64, revision: u64, sent: Instant) {
        let fence = Fence::new(unit, epoch, self.timing().deadline(sent));
        let keeper = Keeper::spawn(
            self.leases.clone(),
            self.me.clone(),
            unit,
            revision,
            sent,
            fence.clone(),
            self.timing(),
        );
        self.units[unit as usize] = State::Mine {
            keeper,
            fence: fence.clone(),
            releasing: None,
        };
        self.started(unit, fence);
    }

    /// Reads every lease and corrects what this hub believes.
    async fn reconcile(&mut self) {
        let reads = futures::future::join_all((0..UNITS).map(|u| self.leases.read(u))).await;
        let now = Instant::now();
        for (i, read) in reads.into_iter().enumerate() {
            let unit = i as u32;
            let Ok(read) = read else { continue };
            let mine_now = matches!(&read, Some((h, _)) if h.incarnation == self.me.incarnation);
            let held = matches!(self.units[i], State::Mine { .. });
            match read {
                // Its keeper renews it (and reads it again when a renewal is refused).
                Some(_) if mine_now && held => {}
                other if held => {
                    self.lost(unit, "the lease is gone or another hub's");
                    self.units[i] = match other {
                        Some((h, _)) => State::Other { hub: h.hub },
                        None => State::Free { since: now },
                    };
                }
                Some((_, rev)) if mine_now => {
                    // A create that timed out had landed: confirm by renewing before acting.
                    let sent = Instant::now();
                    match self.leases.renew(unit, &self.me, rev).await {
                        Ok(rev2) => self.hold(unit, rev, rev2, sent),
                        Err(e) => tracing::debug!(unit, ?e, "adopting a landed lease failed"),
                    }
                }
                Some((h, _)) => self.units[i] = State::Other { hub: h.hub },
                None => {
                    if !matches!(self.units[i], State::Free { .. }) {
                        self.units[i] = State::Free { since: now };
                    }
                }
            }
        }
    }

    /// Units whose fence ran out are lost, whatever the store says.
    fn expire(&mut self) {
        for unit in 0..UNITS {
            if let State::Mine { fence, .. } = &self.units[unit as usize]
                && !fence.is_valid()
            {
                self.lost(unit, "the lease could not be renewed in time");
                self.units[unit as usize] = State::Free {
                    since: Instant::now(),
                };
            }
        }
    }

    fn lost(&mut self, unit: u32, why: &str) {
        if let State::Mine { fence, .. } = &self.units[unit as usize] {
            tracing::warn!(unit, epoch = fence.epoch(), why, "shard lost");
            self.log.record_lost(fence);
            self.ownership.set(unit, None);
            let _ = self.host_tx.send(HostCmd::Stop(unit, None));
        }
    }

    async fn finish_releases(&mut self) {
        let mut done = Vec::new();
        for unit in 0..UNITS {
            let i = unit as usize;
            let State::Mine {
                releasing: Some(rx),
                ..
            } = &mut self.units[i]
            else {
                continue;
            };
            // Done, or the host is gone (its sender dropped): either way nothing acts any more.
            if let Err(oneshot::error::TryRecvError::Empty) = rx.try_recv() {
                continue;
            }
            let free = State::Free {
                since: Instant::now(),
            };
            if let State::Mine { keeper, fence, .. } = std::mem::replace(&mut self.units[i], free) {
                self.log.record(unit, fence.epoch(), "released");
                self.ownership.set(unit, None);
                done.push((unit, keeper));
            }
        }
        // Together: a draining hub releases all its units at once, and with NATS gone each
        // release waits for its timeout. A keeper is stopped first, so no renewal moves the
        // revision the release expects.
        let results = futures::future::join_all(done.into_iter().map(|(unit, keeper)| {
            let leases = self.leases.clone();
            async move {
                let revision = keeper.stop().await;
                (unit, leases.release(unit, revision).await)
            }
        }))
        .await;
        for (unit, result) in results {
            if let Err(e) = result {
                tracing::warn!(unit, ?e, "releasing a lease failed; it will expire");
            }
            self.units[unit as usize] = State::Free {
                since: Instant::now(),
            };
        }
    }

    async fn acquire(&mut self, units: &[u32]) {
        let sent = Instant::now();
        let results =
            futures::future::join_all(units.iter().map(|u| self.leases.create(*u, &self.me))).await;
        for (&unit, result) in units.iter().zip(results) {
            match result {
                Ok(epoch) => self.hold(unit, epoch, epoch, sent),
                Err(LeaseError::Taken) => {
                    self.units[unit as usize] = State::Other {
                        hub: String::from("?"),
                    };
                }
                Err(LeaseError::Unknown(e)) => {
                    tracing::warn!(unit, error = %e, "taking a lease failed; the next read decides");
                }
            }
        }
    }

    fn started(&mut self, unit: u32, fence: Fence) {
        self.log.record(unit, fence.epoch(), "acquired");
        self.ownership.set(unit, Some(fence.clone()));
        let _ = self.host_tx.send(HostCmd::Start(unit, fence));
    }
}
