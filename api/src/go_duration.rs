//! Go's `time.Duration` as OCM's CRDs carry it (`minimumDuration: 300h`): parsed as
//! `time.ParseDuration` does, errors worded as Go words them, and printed as
//! `Duration.String` prints it (`300h0m0s`, `1.5s`, `100ms`, `0s`) — OCM's compliance messages
//! quote durations in that form. Pure.
//!
//! Ported from Go's `src/time/format.go` (`ParseDuration`, `leadingInt`, `leadingFraction`,
//! `quote`) and `src/time/time.go` (`Duration.String`, `fmtFrac`, `fmtInt`).

use std::fmt;
use std::str::FromStr;

/// Nanoseconds per unit, as Go's `unitMap`.
const UNITS: [(&str, u64); 8] = [
    ("ns", 1),
    ("us", 1_000),
    ("\u{b5}s", 1_000),  // U+00B5 micro sign
    ("\u{3bc}s", 1_000), // U+03BC Greek small letter mu
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

const SECOND: u64 = 1_000_000_000;
const LIMIT: u64 = 1 << 63;

/// A signed count of nanoseconds (Go's `time.Duration`; saturates as Go's `Time.Sub` does).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct GoDuration(pub i64);

/// Why a duration does not parse, worded as Go's `time.ParseDuration` words it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseDurationError {
    /// Not of the form `[-+]?([0-9]*(\.[0-9]*)?[a-z]+)+`, or out of range.
    #[error("time: invalid duration {}", quote(.input))]
    Invalid {
        /// The whole input.
        input: String,
    },
    /// A number without a unit (`"10"`).
    #[error("time: missing unit in duration {}", quote(.input))]
    MissingUnit {
        /// The whole input.
        input: String,
    },
    /// A unit Go does not know (`"1d"`).
    #[error("time: unknown unit {} in duration {}", quote(.unit), quote(.input))]
    UnknownUnit {
        /// The unit as written.
        unit: String,
        /// The whole input.
        input: String,
    },
}

impl GoDuration {
    /// Zero.
    pub const ZERO: Self = Self(0);

    /// Parses as Go's `time.ParseDuration`: `1h30m`, `720h`, `1.5s`, `100ms`, `-2us`, `0`.
    pub fn parse(s: &str) -> Result<Self, ParseDurationError> {
        let invalid = || ParseDurationError::Invalid {
            input: s.to_string(),
        };
        let (neg, mut rest) = match s.as_bytes().first() {
            Some(b'-') => (true, &s[1..]),
            Some(b'+') => (false, &s[1..]),
            _ => (false, s),
        };
        if rest == "0" {
            return Ok(Self::ZERO);
        }
        if rest.is_empty() {
            return Err(invalid());
        }
        let mut total: u64 = 0;
        while !rest.is_empty() {
            let first = rest.as_bytes()[0];
            if !(first == b'.' || first.is_ascii_digit()) {
                return Err(invalid());
            }
            let (whole, after) = leading_int(rest).ok_or_else(invalid)?;
            let pre = after.len() != rest.len();
            rest = after;
            let (mut fraction, mut scale, mut post) = (0u64, 1f64, false);
            if let Some(after_dot) = rest.strip_prefix('.') {
                let (f, sc, after) = leading_fraction(after_dot);
                post = after.len() != after_dot.len();
                (fraction, scale, rest) = (f, sc, after);
            }
            if !pre && !post {
                return Err(invalid());
            }
            let unit_len = rest
                .bytes()
                .position(|c| c == b'.' || c.is_ascii_digit())
                .unwrap_or(rest.len());
            if unit_len == 0 {
                return Err(ParseDurationError::MissingUnit {
                    input: s.to_string(),
                });
            }
            let unit_text = &rest[..unit_len];
            rest = &rest[unit_len..];
            let unit = UNITS
                .iter()
                .find(|(name, _)| *name == unit_text)
                .map(|(_, n)| *n)
                .ok_or_else(|| ParseDurationError::UnknownUnit {
                    unit: unit_text.to_string(),
                    input: s.to_string(),
                })?;
            if whole > LIMIT / unit {
                return Err(invalid());
            }
            let mut v = whole * unit;
            if fraction > 0 {
                // Go: float64 is nanosecond-accurate for fractions of hours.
                v += (fraction as f64 * (unit as f64 / scale)) as u64;
                if v > LIMIT {
                    return Err(invalid());
                }
            }
            total = total
                .checked_add(v)
                .filter(|t| *t <= LIMIT)
                .ok_or_else(invalid)?;
        }
        if neg {
            // total ≤ 2^63: its negation fits.
            return Ok(Self((-(total as i128)) as i64));
        }
        if total > LIMIT - 1 {
            return Err(invalid());
        }
        Ok(Self(total as i64))
    }

    /// Nanoseconds.
    pub fn as_nanos(self) -> i64 {
        self.0
    }

    /// From a span of nanoseconds, saturated to Go's range as `Time.Sub` saturates.
    pub fn saturating_from_nanos(nanos: i128) -> Self {
        Self(nanos.clamp(i64::MIN as i128, i64::MAX as i128) as i64)
    }

    /// A [`std::time::Duration`] when not negative.
    pub fn to_std(self) -> Option<std::time::Duration> {
        u64::try_from(self.0)
            .ok()
            .map(std::time::Duration::from_nanos)
    }
}

impl FromStr for GoDuration {
    type Err = ParseDurationError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// Go's `Duration.String`: `72h3m0.5s`, `1.5ms`, `0s`; under a second in the largest of
/// `ms`, `µs`, `ns` that is not larger than it.
impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut u = self.0.unsigned_abs();
        let sign = if self.0 < 0 { "-" } else { "" };
        if u < SECOND {
            let (prec, unit) = match u {
                0 => return f.write_str("0s"),
                1..1_000 => (0, "ns"),
                1_000..1_000_000 => (3, "\u{b5}s"),
                _ => (6, "ms"),
            };
            let (frac, whole) = frac(u, prec);
            return write!(f, "{sign}{whole}{frac}{unit}");
        }
        let (frac, secs) = frac(u, 9);
        u = secs;
        let mut out = format!("{}{frac}s", u % 60);
        u /= 60;
        if u > 0 {
            out = format!("{}m{out}", u % 60);
            u /= 60;
            if u > 0 {
                out = format!("{u}h{out}");
            }
        }
        write!(f, "{sign}{out}")
    }
}

/// Go's `fmtFrac`: the fraction of `v / 10^prec` as `.123` without trailing zeros (nothing when
/// it is zero), and `v / 10^prec`.
fn frac(mut v: u64, prec: u32) -> (String, u64) {
    let mut digits = Vec::new();
    let mut print = false;
    for _ in 0..prec {
        let digit = (v % 10) as u8;
        print = print || digit != 0;
        if print {
            digits.push(b'0' + digit);
        }
        v /= 10;
    }
    if !print {
        return (String::new(), v);
    }
    digits.push(b'.');
    digits.reverse();
    (String::from_utf8(digits).unwrap_or_default(), v)
}

/// Go's `leadingInt`: the leading `[0-9]*`, `None` on overflow past 2^63.
fn leading_int(s: &str) -> Option<(u64, &str)> {
    let end = s
        .bytes()
        .position(|c| !c.is_ascii_digit())
        .unwrap_or(s.len());
    let mut x: u64 = 0;
    for c in s[..end].bytes() {
        if x > LIMIT / 10 {
            return None;
        }
        x = x * 10 + u64::from(c - b'0');
        if x > LIMIT {
            return None;
        }
    }
    Some((x, &s[end..]))
}

/// Go's `leadingFraction`: the leading `[0-9]*` after a point, its scale (10^digits kept),
/// precision dropped silently past 2^63.
fn leading_fraction(s: &str) -> (u64, f64, &str) {
    let end = s
        .bytes()
        .position(|c| !c.is_ascii_digit())
        .unwrap_or(s.len());
    let (mut x, mut scale, mut overflow) = (0u64, 1f64, false);
    for c in s[..end].bytes() {
        if overflow {
            continue;
        }
        if x > (LIMIT - 1) / 10 {
            overflow = true;
            continue;
        }
        let y = x * 10 + u64::from(c - b'0');
        if y > LIMIT {
            overflow = true;
            continue;
        }
        x = y;
        scale *= 10.0;
    }
    (x, scale, &s[end..])
}

/// Go's `time.quote`: double quotes, `"` and `\` escaped, bytes of control and non-ASCII
/// characters as `\xNN`.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c < ' ' || !c.is_ascii() {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("\\x{b:02x}"));
            }
        } else {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests;
