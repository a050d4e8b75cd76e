//! Which live hub should hold each unit: capped rendezvous hashing.
//!
//! Every hub computes the same map from the same sorted membership, so nobody has to agree on
//! anything beyond who is alive. For each unit in order, the candidates are ranked by a hash of
//! `(hub, unit)` and the first one still under `ceil(units / hubs)` gets it: pure rendezvous
//! would give the busiest of three hubs up to 18 of 32 shards, the cap keeps it at 11, and when a
//! hub leaves only about its own share moves.

/// FNV-1a, 64 bit, of `hub` `/` `unit`.
fn score(hub: &str, unit: u32) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in hub
        .bytes()
        .chain(std::iter::once(b'/'))
        .chain(unit.to_be_bytes())
    {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // FNV's low bits mix poorly for short, similar inputs: finish with a murmur-style mix.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h
}

/// The hubs in preference order for `unit` (highest score first), ignoring caps: who should try
/// first when a unit is free and its assigned owner does not take it.
pub fn ranking<'a>(hubs: &[&'a str], unit: u32) -> Vec<&'a str> {
    let mut ranked: Vec<&str> = hubs.to_vec();
    ranked.sort_by(|a, b| score(b, unit).cmp(&score(a, unit)).then(a.cmp(b)));
    ranked
}

/// The owner of each of `units` units among `hubs` (any order; duplicates ignored); `None` for
/// every unit when there is no hub.
pub fn assign(hubs: &[&str], units: u32) -> Vec<Option<String>> {
    let mut sorted: Vec<&str> = hubs.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.is_empty() {
        return vec![None; units as usize];
    }
    let cap = (units as usize).div_ceil(sorted.len());
    let mut load = vec![0usize; sorted.len()];
    (0..units)
        .map(|unit| {
            let ranked = ranking(&sorted, unit);
            let owner = ranked
                .iter()
                .find(|h| {
                    let i = sorted.binary_search(h).expect("ranked from sorted");
                    load[i] < cap
                })
                .expect("caps add up to at least the number of units");
            let i = sorted.binary_search(owner).expect("ranked from sorted");
            load[i] += 1;
            Some(owner.to_string())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn counts(map: &[Option<String>]) -> HashMap<String, usize> {
        let mut c = HashMap::new();
        for o in map.iter().flatten() {
            *c.entry(o.clone()).or_default() += 1;
        }
        c
    }

    #[test]
    fn one_hub_holds_everything_and_none_holds_nothing() {
        assert!(assign(&["a"], 33).iter().all(|o| o.as_deref() == Some("a")));
        assert!(assign(&[], 33).iter().all(Option::is_none));
    }

    #[test]
    fn the_map_depends_only_on_the_set_of_hubs() {
        let a = assign(&["h1", "h2", "h3"], 33);
        let b = assign(&["h3", "h1", "h2", "h1"], 33);
        assert_eq!(a, b);
    }

    #[test]
    fn no_hub_gets_more_than_its_share() {
        for n in 1..=7 {
            let hubs: Vec<String> = (0..n).map(|i| format!("hub-{i}.example:5005{i}")).collect();
            let refs: Vec<&str> = hubs.iter().map(String::as_str).collect();
            let map = assign(&refs, 33);
            let cap = 33usize.div_ceil(n);
            let c = counts(&map);
            assert_eq!(c.values().sum::<usize>(), 33);
            assert!(c.values().all(|&k| k <= cap), "{n} hubs: {c:?}");
        }
    }

    #[test]
    fn a_hub_leaving_moves_little_more_than_its_own_units() {
        let all = ["alpha", "bravo", "charlie"];
        let before = assign(&all, 33);
        let after = assign(&["alpha", "bravo"], 33);
        let moved = before.iter().zip(&after).filter(|(b, a)| b != a).count();
        let charlies = before
            .iter()
            .filter(|o| o.as_deref() == Some("charlie"))
            .count();
        // The cap rises from 11 to 17: charlie's units move, and only a few others.
        assert!(moved >= charlies);
        assert!(
            moved <= charlies + 6,
            "moved {moved}, charlie had {charlies}"
        );
    }

    #[test]
    fn rankings_put_every_hub_once() {
        let r = ranking(&["x", "y", "z"], 5);
        let mut sorted = r.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, vec!["x", "y", "z"]);
    }
}
