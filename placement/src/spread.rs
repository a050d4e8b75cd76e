//! Spread constraints: picking the ranked clusters so that topology domains stay balanced.
//!
//! OCM defines `spreadPolicy` but never implemented it; Flotilla does, in the spirit of
//! Kubernetes' pod topology spread and OCM's spread-policy enhancement:
//!
//! - A constraint's **domains** are the distinct values of its topology key (a label or a claim)
//!   among the feasible clusters that are eligible for spreading (see missing keys below). A
//!   domain's **count** is how many of its clusters are selected so far.
//! - Clusters are picked one at a time, in rank order (total score, then name), skipping picks
//!   that a constraint forbids, until `numberOfClusters` (or every feasible cluster) is reached
//!   or nothing more may be picked.
//! - `DoNotSchedule`: picking a cluster in domain `d` is allowed only if
//!   `count(d) + 1 − min(count) ≤ maxSkew`, the minimum taken over all the constraint's domains
//!   (as Kubernetes does). So a domain with few clusters caps the others, and fewer clusters than
//!   asked may be selected; the placement then reports `NotAllDecisionsScheduled`.
//! - `ScheduleAnyway`: the same test, but only a preference. A pick that keeps every soft
//!   constraint within its skew is taken first (best rank wins); when none is left, the pick that
//!   exceeds the skew least is taken (earlier constraints first). The minimum is taken over the
//!   domains that still have unpicked clusters, so an exhausted small domain does not make every
//!   later pick look equally bad.
//! - **Missing topology key**: for a `DoNotSchedule` constraint the cluster is not selectable at
//!   all (as Kubernetes treats nodes without the key) and is reported as such in the debug
//!   output; for `ScheduleAnyway` the cluster is neutral for that constraint — it belongs to no
//!   domain, is never penalised, and does not count towards any domain.
//!
//! Greedy picking reaches the largest possible selection for a single `DoNotSchedule`
//! constraint; with several, it is a good but not always maximal answer.
//!
//! Cost: clusters are grouped into cells (one per combination of domains, one queue each in
//! rank order) and each pick scans cells in order of their best remaining cluster until it finds
//! a pick that keeps every constraint; typically a handful of cells per pick.

use std::collections::{BTreeSet, HashMap};

use crate::placement::{SpreadConstraint, WhenUnsatisfiable};

const NONE: u32 = u32::MAX;

/// Why a feasible cluster was not picked, as far as spreading is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SpreadReason {
    /// It lacks the topology key of a `DoNotSchedule` constraint (index).
    MissingKey(usize),
    /// Picking it would exceed the `maxSkew` of a `DoNotSchedule` constraint (index) in its
    /// domain (the topology value's id, as given by the caller).
    Skew(usize, u32),
    /// Spreading allowed it; the target count was reached first.
    NotNeeded,
}

pub(crate) struct Spread {
    /// Picked positions into `ranked`, in pick order.
    pub(crate) picked: Vec<u32>,
    /// For each position in `ranked` not picked: why (only when asked to explain).
    pub(crate) reasons: Vec<Option<SpreadReason>>,
}

struct Constraint {
    hard: bool,
    max_skew: u64,
    /// Selected clusters per domain.
    counts: Vec<u64>,
    /// Unpicked eligible clusters per domain.
    remaining: Vec<u64>,
    /// Number of (counted) domains per count level.
    hist: Vec<u64>,
    /// Domains in `hist`.
    in_hist: u64,
    min: u64,
    /// Caller's value id per domain.
    values: Vec<u32>,
}

impl Constraint {
    fn bump_min(&mut self) {
        while self.in_hist > 0 && self.hist.get(self.min as usize).copied().unwrap_or(0) == 0 {
            self.min += 1;
        }
    }

    /// How far picking one more cluster in `d` would go past the skew (0 = within).
    fn excess(&self, d: u32) -> u64 {
        if d == NONE {
            return 0;
        }
        (self.counts[d as usize] + 1).saturating_sub(self.min + self.max_skew)
    }

    fn pick(&mut self, d: u32) {
        if d == NONE {
            return;
        }
        let d = d as usize;
        let level = self.counts[d] as usize;
        self.counts[d] += 1;
        self.remaining[d] -= 1;
        self.hist[level] -= 1;
        let exhausted = !self.hard && self.remaining[d] == 0;
        if exhausted {
            // Soft constraints measure skew among domains that can still grow.
            self.in_hist -= 1;
        } else {
            if self.hist.len() <= level + 1 {
                self.hist.resize(level + 2, 0);
            }
            self.hist[level + 1] += 1;
        }
        self.bump_min();
    }
}

/// Picks up to `target` clusters from `ranked` (cluster indices, best first). `value(idx, j)`
/// is the id of cluster `idx`'s value for constraint `j`'s topology key (`None` when missing).
pub(crate) fn select(
    ranked: &[u32],
    specs: &[SpreadConstraint],
    target: usize,
    explain: bool,
    value: impl Fn(u32, usize) -> Option<u32>,
) -> Spread {
    let k = specs.len();
    let mut constraints: Vec<Constraint> = specs
        .iter()
        .map(|s| Constraint {
            hard: s.when_unsatisfiable == WhenUnsatisfiable::DoNotSchedule,
            max_skew: u64::try_from(s.max_skew.max(1)).unwrap_or(1),
            counts: Vec::new(),
            remaining: Vec::new(),
            hist: vec![0],
            in_hist: 0,
            min: 0,
            values: Vec::new(),
        })
        .collect();

    // Domain ids per ranked position (k per position; NONE when the key is missing).
    let mut doms = vec![NONE; ranked.len() * k];
    let mut missing: Vec<Option<usize>> = vec![None; if explain { ranked.len() } else { 0 }];
    let mut interners: Vec<HashMap<u32, u32>> = vec![HashMap::new(); k];
    let mut cell_of: HashMap<Vec<u32>, u32> = HashMap::new();
    let mut cells: Vec<(Vec<u32>, usize)> = Vec::new(); // (positions, head)
    let mut key = Vec::with_capacity(k);
    'positions: for (pos, &idx) in ranked.iter().enumerate() {
        for (j, con) in constraints.iter().enumerate() {
            if con.hard && value(idx, j).is_none() {
                if explain {
                    missing[pos] = Some(j);
                }
                continue 'positions;
            }
        }
        key.clear();
        for (j, (con, interner)) in constraints.iter_mut().zip(&mut interners).enumerate() {
            let d = match value(idx, j) {
                None => NONE,
                Some(v) => {
                    let next = u32::try_from(con.counts.len()).unwrap_or(NONE - 1);
                    let d = *interner.entry(v).or_insert(next);
                    if d == next {
                        con.counts.push(0);
                        con.remaining.push(0);
                        con.values.push(v);
                        con.hist[0] += 1;
                        con.in_hist += 1;
                    }
                    con.remaining[d as usize] += 1;
                    d
                }
            };
            doms[pos * k + j] = d;
            key.push(d);
        }
        let cell = match cell_of.get(key.as_slice()) {
            Some(&cell) => cell,
            None => {
                let cell = u32::try_from(cells.len()).unwrap_or(NONE);
                cell_of.insert(key.clone(), cell);
                cells.push((Vec::new(), 0));
                cell
            }
        };
        cells[cell as usize]
            .0
            .push(u32::try_from(pos).unwrap_or(NONE));
    }

    // Cells ordered by the rank of their best unpicked cluster.
    let mut order: BTreeSet<(u32, u32)> = cells
        .iter()
        .enumerate()
        .map(|(i, (members, _))| (members[0], i as u32))
        .collect();

    let mut picked = Vec::with_capacity(target.min(ranked.len()));
    let mut excess = vec![0u64; k];
    let mut best_excess = vec![0u64; k];
    while picked.len() < target {
        let mut best: Option<(u32, u32)> = None;
        for &(pos, cell) in &order {
            let at = pos as usize * k;
            let mut allowed = true;
            let mut clean = true;
            for (j, con) in constraints.iter().enumerate() {
                let e = con.excess(doms[at + j]);
                if con.hard {
                    if e > 0 {
                        allowed = false;
                        break;
                    }
                    excess[j] = 0;
                } else {
                    excess[j] = e;
                    clean &= e == 0;
                }
            }
            if !allowed {
                continue;
            }
            if clean {
                best = Some((pos, cell));
                break;
            }
            if best.is_none() || excess < best_excess {
                best = Some((pos, cell));
                best_excess.copy_from_slice(&excess);
            }
        }
        let Some((pos, cell)) = best else { break };
        picked.push(pos);
        let at = pos as usize * k;
        for (j, con) in constraints.iter_mut().enumerate() {
            con.pick(doms[at + j]);
        }
        order.remove(&(pos, cell));
        let (members, head) = &mut cells[cell as usize];
        *head += 1;
        if let Some(&next) = members.get(*head) {
            order.insert((next, cell));
        }
    }

    let mut reasons = Vec::new();
    if explain {
        let mut is_picked = vec![false; ranked.len()];
        for &p in &picked {
            is_picked[p as usize] = true;
        }
        reasons = (0..ranked.len())
            .map(|pos| {
                if is_picked[pos] {
                    return None;
                }
                if let Some(j) = missing[pos] {
                    return Some(SpreadReason::MissingKey(j));
                }
                let at = pos * k;
                for (j, con) in constraints.iter().enumerate() {
                    if con.hard && con.excess(doms[at + j]) > 0 {
                        let value = con.values[doms[at + j] as usize];
                        return Some(SpreadReason::Skew(j, value));
                    }
                }
                Some(SpreadReason::NotNeeded)
            })
            .collect();
    }
    Spread { picked, reasons }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::Cluster;
    use crate::placement::TopologyKeyType;

    /// Runs `select` over clusters ranked in the given order, interning values locally.
    fn run(
        cs: &[Cluster],
        specs: &[SpreadConstraint],
        target: usize,
        explain: bool,
    ) -> (Spread, Vec<String>) {
        let mut names: Vec<String> = Vec::new();
        let mut ids: HashMap<String, u32> = HashMap::new();
        let table: Vec<Vec<Option<u32>>> = cs
            .iter()
            .map(|c| {
                specs
                    .iter()
                    .map(|sc| {
                        let map = match sc.topology_key_type {
                            TopologyKeyType::Label => &c.labels,
                            TopologyKeyType::Claim => &c.claims,
                        };
                        map.get(&sc.topology_key).map(|v| {
                            *ids.entry(v.to_owned()).or_insert_with(|| {
                                names.push(v.to_owned());
                                names.len() as u32 - 1
                            })
                        })
                    })
                    .collect()
            })
            .collect();
        let ranked: Vec<u32> = (0..cs.len() as u32).collect();
        let s = select(&ranked, specs, target, explain, |idx, j| {
            table[idx as usize][j]
        });
        (s, names)
    }

    fn zone_clusters(zones: &[&str]) -> Vec<Cluster> {
        zones
            .iter()
            .enumerate()
            .map(|(i, z)| {
                let c = Cluster::new(format!("c{i}"));
                if z.is_empty() { c } else { c.label("zone", *z) }
            })
            .collect()
    }

    fn pick_names(cs: &[Cluster], specs: &[SpreadConstraint], target: usize) -> Vec<String> {
        let (s, _) = run(cs, specs, target, false);
        let mut names: Vec<String> = s
            .picked
            .iter()
            .map(|&p| cs[p as usize].name.clone())
            .collect();
        names.sort();
        names
    }

    fn hard(key: &str, skew: i32) -> SpreadConstraint {
        SpreadConstraint::label(key, skew, WhenUnsatisfiable::DoNotSchedule)
    }

    fn soft(key: &str, skew: i32) -> SpreadConstraint {
        SpreadConstraint::label(key, skew, WhenUnsatisfiable::ScheduleAnyway)
    }

    #[test]
    fn do_not_schedule_spreads_evenly_in_rank_order() {
        // Ranked best first: three in a, then two in b.
        let cs = zone_clusters(&["a", "a", "a", "b", "b"]);
        assert_eq!(
            pick_names(&cs, &[hard("zone", 1)], 4),
            ["c0", "c1", "c3", "c4"]
        );
    }

    #[test]
    fn do_not_schedule_small_domain_caps_the_others() {
        let cs = zone_clusters(&["a", "a", "a", "a", "b"]);
        assert_eq!(pick_names(&cs, &[hard("zone", 1)], 5), ["c0", "c1", "c4"]);
        assert_eq!(
            pick_names(&cs, &[hard("zone", 2)], 5),
            ["c0", "c1", "c2", "c4"]
        );
    }

    #[test]
    fn do_not_schedule_excludes_clusters_missing_the_key() {
        let cs = zone_clusters(&["", "a", "b"]);
        let (s, _) = run(&cs, &[hard("zone", 1)], 3, true);
        assert_eq!(s.picked, [1, 2]);
        assert_eq!(s.reasons[0], Some(SpreadReason::MissingKey(0)));
    }

    #[test]
    fn schedule_anyway_prefers_balance_but_fills_the_target() {
        let cs = zone_clusters(&["a", "a", "a", "a", "b"]);
        assert_eq!(pick_names(&cs, &[soft("zone", 1)], 2), ["c0", "c4"]);
        assert_eq!(pick_names(&cs, &[soft("zone", 1)], 5).len(), 5);
    }

    #[test]
    fn schedule_anyway_treats_missing_key_as_neutral() {
        let cs = zone_clusters(&["", "a", "a", "b"]);
        assert_eq!(pick_names(&cs, &[soft("zone", 1)], 3), ["c0", "c1", "c3"]);
    }

    #[test]
    fn skew_reason_names_the_blocked_domain() {
        let cs = zone_clusters(&["a", "a", "a", "b"]);
        let (s, names) = run(&cs, &[hard("zone", 1)], 4, true);
        assert_eq!(s.picked.len(), 3);
        let a = names.iter().position(|n| n == "a").unwrap() as u32;
        assert_eq!(s.reasons[2], Some(SpreadReason::Skew(0, a)));
        let (s, _) = run(&cs, &[hard("zone", 1)], 1, true);
        assert_eq!(s.reasons[1], Some(SpreadReason::Skew(0, a)));
        assert_eq!(
            s.reasons[3],
            Some(SpreadReason::NotNeeded),
            "b could still be picked"
        );
    }

    #[test]
    fn two_constraints_work_jointly() {
        // region/zone: us-east has two zones, us-west one.
        let cs: Vec<Cluster> = [
            ("e", "e1"),
            ("e", "e1"),
            ("e", "e2"),
            ("w", "w1"),
            ("w", "w1"),
        ]
        .iter()
        .enumerate()
        .map(|(i, (r, z))| {
            Cluster::new(format!("c{i}"))
                .label("region", *r)
                .label("zone", *z)
        })
        .collect();
        let specs = [hard("region", 1), hard("zone", 1)];
        // Regions alternate (skew 1) and no zone gets two ahead of another.
        assert_eq!(pick_names(&cs, &specs, 4), ["c0", "c2", "c3", "c4"]);
    }

    #[test]
    fn claims_can_be_topology_keys() {
        let cs: Vec<Cluster> = ["aws", "aws", "gcp"]
            .iter()
            .enumerate()
            .map(|(i, p)| Cluster::new(format!("c{i}")).claim("platform", *p))
            .collect();
        let spec = SpreadConstraint::claim("platform", 1, WhenUnsatisfiable::DoNotSchedule);
        assert_eq!(pick_names(&cs, &[spec], 2), ["c0", "c2"]);
    }
}
