//! Versions among the hubs (issue 49 §6.3): every hub's heartbeat carries its version
//! ([`HubInfo::version`]); a live hub more than one minor line away from this one is *skewed*.
//! A rolling upgrade runs hubs of two adjacent minor lines side by side, which is supported;
//! anything wider is shown on `/debug/shards` (`"skew"`) and as the gauge
//! `flotilla_hub_version_skew{hub,version}` (alert `FlotillaHubVersionSkew`). A hub more than
//! one minor line below the newest live hub *waits* ([`waits`]): it takes no new units and
//! keeps those it holds (handing them over only when it leaves), and no hub assigns it any.
//! Only the older side waits, so the newest line always takes the units (were both sides to
//! wait, units would be left unheld); the API keeps being served, and `/healthz` stays ok (a
//! liveness probe must not restart a hub for waiting).
//!
//! [`skewed`] and [`waits`] are pure; [`SkewMetrics`] computes the gauge at each scrape.

use super::lease::HubInfo;
use super::shards::Shards;
use flotilla_api::version::{Version, far_apart};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

/// The version a heartbeat without one stands for: hubs sent none before 0.1.0's last builds.
pub const UNSTATED: &str = "0.1.0";

/// A live hub too far from this one.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Skewed {
    /// Its id.
    pub hub: String,
    /// Its version as it stated it (bounded; [`UNSTATED`] when it stated none).
    pub version: String,
}

/// The live hubs (other than `me`) more than one minor line from `me`'s version. A version
/// that does not parse is skewed: no hub of any release sends one.
pub fn skewed(me: &HubInfo, live: &[HubInfo]) -> Vec<Skewed> {
    let mine = Version::parse(&me.version).unwrap_or_else(|_| Version::current());
    live.iter()
        .filter(|h| h.hub != me.hub)
        .filter_map(|h| {
            let stated = if h.version.is_empty() {
                UNSTATED
            } else {
                h.version.as_str()
            };
            let far = match Version::parse(stated) {
                Ok(v) => far_apart(&mine, &v),
                Err(_) => true,
            };
            far.then(|| Skewed {
                hub: h.hub.chars().take(64).collect(),
                version: stated.chars().take(64).collect(),
            })
        })
        .collect()
}

/// The version a heartbeat states, [`UNSTATED`] for none.
fn stated(version: &str) -> &str {
    if version.is_empty() {
        UNSTATED
    } else {
        version
    }
}

/// Whether a hub of `version` waits — takes no new units and is assigned none — beside live
/// hubs of `versions` (every live hub's, its own among them): when the newest of them is more
/// than one minor line above it (or on a later major). The newest line never waits, so some hub
/// always takes every unit. A version that does not parse (no hub of any release sends one)
/// neither waits nor makes another wait: a junk heartbeat cannot stop the fleet's hubs.
/// Returns the newest version when it waits.
pub fn waits(version: &str, versions: &[&str]) -> Option<Version> {
    let mine = Version::parse(stated(version)).ok()?;
    let newest = versions
        .iter()
        .filter_map(|v| Version::parse(stated(v)).ok())
        .max_by_key(Version::line)?;
    (newest.line() > mine.line() && far_apart(&mine, &newest)).then_some(newest)
}

/// Labels of the skew gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SkewLabels {
    hub: String,
    version: String,
}

/// `flotilla_hub_version_skew{hub,version}`: 1 per live hub too far from this one (no series
/// when none).
pub struct SkewMetrics(pub Shards);

impl std::fmt::Debug for SkewMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SkewMetrics")
    }
}

impl Collector for SkewMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut family = encoder.encode_descriptor(
            "version_skew",
            "1 per live hub whose version is more than one minor line from this hub's (a rolling upgrade runs two adjacent lines only)",
            None,
            MetricType::Gauge,
        )?;
        for s in skewed(self.0.me(), &self.0.live()) {
            let labels = SkewLabels {
                hub: s.hub,
                version: s.version,
            };
            ConstGauge::new(1i64).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hub(id: &str, version: &str) -> HubInfo {
        HubInfo {
            hub: id.into(),
            incarnation: format!("{id}-1"),
            grpc: String::new(),
            metrics: String::new(),
            draining: false,
            version: version.into(),
        }
    }

    #[test]
    fn hubs_one_minor_apart_run_side_by_side_and_wider_gaps_or_junk_are_skewed() {
        let me = hub("a", "0.3.1");
        let live = [
            me.clone(),
            hub("b", "0.2.9"),
            hub("c", "0.4.0-rc1"),
            hub("d", "0.1.0"),
            hub("e", ""),
            hub("f", "1.3.0"),
            hub("g", "attacker\u{1b}[2J"),
        ];
        let names: Vec<(String, String)> = skewed(&me, &live)
            .into_iter()
            .map(|s| (s.hub, s.version))
            .collect();
        assert_eq!(
            names,
            [
                ("d".to_string(), "0.1.0".to_string()),
                ("e".to_string(), UNSTATED.to_string()),
                ("f".to_string(), "1.3.0".to_string()),
                ("g".to_string(), "attacker\u{1b}[2J".to_string()),
            ]
        );
        // A 0.2 hub beside a hub that states nothing (0.1) is one minor apart: fine.
        assert!(skewed(&hub("a", "0.2.0"), &[hub("e", "")]).is_empty());
    }

    #[test]
    fn only_a_hub_more_than_one_minor_below_the_newest_waits() {
        let fleet = ["0.1.4", "0.2.0", "0.3.1-rc1", "junk\u{1b}"];
        assert_eq!(
            waits("0.1.4", &fleet).map(|v| v.to_string()),
            Some("0.3.1-rc1".into())
        );
        assert_eq!(
            waits("", &fleet).map(|v| v.to_string()),
            Some("0.3.1-rc1".into())
        );
        // One line below the newest, or the newest: takes units.
        assert_eq!(waits("0.2.0", &fleet), None);
        assert_eq!(waits("0.3.1-rc1", &fleet), None);
        // A rolling upgrade of one minor line: nobody waits.
        assert_eq!(waits("0.1.0", &["0.1.0", "0.2.0"]), None);
        // Another major: the older one waits, the newer never does.
        assert!(waits("0.9.0", &["0.9.0", "1.0.0"]).is_some());
        assert_eq!(waits("1.0.0", &["0.9.0", "1.0.0"]), None);
        // Junk neither waits nor makes anyone wait; alone, nobody waits.
        assert_eq!(waits("junk", &fleet), None);
        assert_eq!(waits("0.1.0", &["0.1.0", "junk", "99"]), None);
        assert_eq!(waits("0.1.0", &["0.1.0"]), None);
    }
}
