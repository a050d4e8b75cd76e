//! A rollout strategy as OCM writes it (`cluster.open-cluster-management.io/v1alpha1`
//! `RolloutStrategy`), parsed and validated: every error names its field, and nothing invalid is
//! silently read as 0 (OCM turns an unparsable `maxFailures` into 0).

use crate::GroupKey;
use std::fmt;
use std::time::Duration;
use thiserror::Error;

/// `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Kind {
    /// Every cluster at once (OCM's default).
    #[default]
    All,
    /// Cluster by cluster, at most `maxConcurrency` in flight.
    Progressive,
    /// Decision group by decision group.
    ProgressivePerGroup,
}

/// A count or a percentage of the clusters it applies to (OCM's `IntOrString`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Threshold {
    /// A number of clusters.
    Count(u32),
    /// A percentage (0–100) of the clusters, rounded up.
    Percent(f64),
}

impl Threshold {
    /// The number of clusters out of `total`.
    pub fn resolve(self, total: usize) -> usize {
        match self {
            Threshold::Count(n) => n as usize,
            Threshold::Percent(p) => (p / 100.0 * total as f64).ceil() as usize,
        }
    }
}

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Threshold::Count(n) => write!(f, "{n}"),
            Threshold::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// A `mandatoryDecisionGroups` entry: by name, else by index (OCM: the name wins).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupSelector {
    /// `groupName`.
    Name(String),
    /// `groupIndex`.
    Index(u32),
}

impl GroupSelector {
    /// Whether a decision group is this one.
    pub fn matches(&self, g: &GroupKey) -> bool {
        match self {
            GroupSelector::Name(n) => &g.name == n,
            GroupSelector::Index(i) => g.index == *i,
        }
    }
}

impl fmt::Display for GroupSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GroupSelector::Name(n) => write!(f, "groupName {n:?}"),
            GroupSelector::Index(i) => write!(f, "groupIndex {i}"),
        }
    }
}

/// A parsed strategy.
#[derive(Debug, Clone, PartialEq)]
pub struct Strategy {
    /// `type`.
    pub kind: Kind,
    /// `progressive.maxConcurrency` (`None`: every cluster).
    pub max_concurrency: Option<Threshold>,
    /// `mandatoryDecisionGroups`.
    pub mandatory_groups: Vec<GroupSelector>,
    /// `minSuccessTime` (soak time before a succeeded cluster frees its slot).
    pub min_success_time: Duration,
    /// `progressDeadline` (`None`: wait forever, OCM's "None").
    pub progress_deadline: Option<Duration>,
    /// `maxFailures` (default 0).
    pub max_failures: Threshold,
}

impl Default for Strategy {
    fn default() -> Self {
        Self {
            kind: Kind::All,
            max_concurrency: None,
            mandatory_groups: Vec::new(),
            min_success_time: Duration::ZERO,
            progress_deadline: None,
            max_failures: Threshold::Count(0),
        }
    }
}

impl Strategy {
    /// Whether a decision group is one of the mandatory ones.
    pub fn is_mandatory(&self, g: &GroupKey) -> bool {
        self.mandatory_groups.iter().any(|s| s.matches(g))
    }
}

/// An `IntOrString` as it arrives from YAML or protobuf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IntOrString {
    /// A number.
    Int(i64),
    /// A string (`"30%"`).
    Str(String),
}

/// The strategy's fields as written, before validation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RawStrategy {
    /// `type` (empty = `All`).
    pub kind: String,
    /// `maxConcurrency`.
    pub max_concurrency: Option<IntOrString>,
    /// `mandatoryDecisionGroups[]`: `(groupName, groupIndex)`.
    pub mandatory_groups: Vec<(String, i64)>,
    /// `minSuccessTime` (`"5m"`).
    pub min_success_time: String,
    /// `progressDeadline` (`"10m"`, `"None"`).
    pub progress_deadline: String,
    /// `maxFailures`.
    pub max_failures: Option<IntOrString>,
}

/// A field that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{field}: {reason}")]
pub struct StrategyError {
    /// Path of the field (`rolloutStrategy.progressive.maxConcurrency`).
    pub field: String,
    /// What was wrong.
    pub reason: String,
}

impl RawStrategy {
    /// Parses and validates, naming every bad field under `path` (e.g.
    /// `spec.placementRefs[0].rolloutStrategy`). All errors at once.
    pub fn parse(&self, path: &str) -> Result<Strategy, Vec<StrategyError>> {
        let mut errors = Vec::new();
        let err = |field: &str, reason: String| StrategyError {
            field: format!("{path}.{field}"),
            reason,
        };
        let kind = match self.kind.as_str() {
            "" | "All" => Kind::All,
            "Progressive" => Kind::Progressive,
            "ProgressivePerGroup" => Kind::ProgressivePerGroup,
            other => {
                errors.push(err(
                    "type",
                    format!("{other:?} is not one of All, Progressive, ProgressivePerGroup"),
                ));
                Kind::All
            }
        };
        let section = match kind {
            Kind::All => "all",
            Kind::Progressive => "progressive",
            Kind::ProgressivePerGroup => "progressivePerGroup",
        };
        let field = |name: &str| format!("{section}.{name}");
        let max_concurrency = match (&self.max_concurrency, kind) {
            (None, _) => None,
            (Some(_), Kind::All | Kind::ProgressivePerGroup) => {
                errors.push(err(
                    &field("maxConcurrency"),
                    "only the Progressive type takes maxConcurrency".into(),
                ));
                None
            }
            (Some(v), Kind::Progressive) => match threshold(v) {
                Ok(Threshold::Count(0)) => {
                    errors.push(err(
                        &field("maxConcurrency"),
                        "must be at least 1 (or a percentage above 0%)".into(),
                    ));
                    None
                }
                Ok(Threshold::Percent(p)) if p <= 0.0 => {
                    errors.push(err(
                        &field("maxConcurrency"),
                        "must be a percentage above 0%".into(),
                    ));
                    None
                }
                Ok(t) => Some(t),
                Err(reason) => {
                    errors.push(err(&field("maxConcurrency"), reason));
                    None
                }
            },
        };
        let max_failures = match &self.max_failures {
            None => Threshold::Count(0),
            Some(v) => threshold(v).unwrap_or_else(|reason| {
                errors.push(err(&field("maxFailures"), reason));
                Threshold::Count(0)
            }),
        };
        let mut mandatory_groups = Vec::new();
        if kind == Kind::All && !self.mandatory_groups.is_empty() {
            errors.push(err(
                "all.mandatoryDecisionGroups",
                "the All type rolls out every cluster at once; mandatory groups need Progressive or ProgressivePerGroup".into(),
            ));
        }
        for (i, (name, index)) in self.mandatory_groups.iter().enumerate() {
            if !name.is_empty() {
                mandatory_groups.push(GroupSelector::Name(name.clone()));
            } else if (0..=i64::from(u32::MAX)).contains(index) {
                mandatory_groups.push(GroupSelector::Index(*index as u32));
            } else {
                errors.push(err(
                    &format!("{}[{i}].groupIndex", field("mandatoryDecisionGroups")),
                    format!("{index} is not a decision group index (0 or more)"),
                ));
            }
        }
        let min_success_time = match parse_duration(&self.min_success_time) {
            Ok(d) => d.unwrap_or_default(),
            Err(reason) => {
                errors.push(err(&field("minSuccessTime"), reason));
                Duration::ZERO
            }
        };
        let progress_deadline = parse_duration(&self.progress_deadline).unwrap_or_else(|reason| {
            errors.push(err(&field("progressDeadline"), reason));
            None
        });
        if errors.is_empty() {
            Ok(Strategy {
                kind,
                max_concurrency,
                mandatory_groups,
                min_success_time,
                progress_deadline,
                max_failures,
            })
        } else {
            Err(errors)
        }
    }
}

/// A count (0 or more) or a percentage (`"0%"`–`"100%"`).
fn threshold(v: &IntOrString) -> Result<Threshold, String> {
    match v {
        IntOrString::Int(n) if *n < 0 => Err(format!("{n} is negative")),
        IntOrString::Int(n) => u32::try_from(*n)
            .map(Threshold::Count)
            .map_err(|_| format!("{n} is too large")),
        IntOrString::Str(s) => {
            let Some(p) = s.strip_suffix('%') else {
                return Err(format!(
                    "{s:?} is neither a number nor a percentage like \"25%\""
                ));
            };
            match p.trim().parse::<f64>() {
                Ok(p) if (0.0..=100.0).contains(&p) => Ok(Threshold::Percent(p)),
                Ok(p) => Err(format!("{p}% is outside 0%..100%")),
                Err(_) => Err(format!("{s:?} is not a percentage like \"25%\"")),
            }
        }
    }
}

/// OCM's durations: `"None"` or empty = none; otherwise numbers with units `h`, `m`, `s`
/// (`"1h30m"`, `"90s"`).
pub fn parse_duration(s: &str) -> Result<Option<Duration>, String> {
    let s = s.trim();
    if s.is_empty() || s == "None" {
        return Ok(None);
    }
    let mut total = 0u64;
    let mut digits = String::new();
    for c in s.chars() {
        match c {
            '0'..='9' => digits.push(c),
            'h' | 'm' | 's' if !digits.is_empty() => {
                let n: u64 = digits
                    .parse()
                    .map_err(|_| format!("{s:?}: {digits} is too large"))?;
                let unit = match c {
                    'h' => 3600,
                    'm' => 60,
                    _ => 1,
                };
                total = n
                    .checked_mul(unit)
                    .and_then(|v| total.checked_add(v))
                    .ok_or_else(|| format!("{s:?} is too long"))?;
                digits.clear();
            }
            _ => {
                return Err(format!(
                    "{s:?} is not a duration like \"90s\", \"10m\", \"1h30m\" or \"None\""
                ));
            }
        }
    }
    if !digits.is_empty() {
        return Err(format!("{s:?}: {digits} has no unit (h, m or s)"));
    }
    Ok(Some(Duration::from_secs(total)))
}
