//! ManagedServiceAccount facts shared by the hub, the agent and the CLI: OCM's defaults, the
//! condition types, Go durations (`spec.rotation.validity` is one), and when a token is due
//! for rotation.

use crate::go_duration::GoDuration;
use std::time::{Duration, SystemTime};

/// API group/version of ManagedServiceAccounts.
pub const AUTHENTICATION_V1BETA1: &str = "authentication.open-cluster-management.io/v1beta1";
/// The kind.
pub const KIND: &str = "ManagedServiceAccount";
/// OCM's default `spec.rotation.validity`: 360 days.
pub const DEFAULT_VALIDITY: Duration = Duration::from_secs(8640 * 3600);
/// The shortest validity a Kubernetes TokenRequest accepts (`expirationSeconds` ≥ 600).
pub const MIN_VALIDITY: Duration = Duration::from_secs(600);
/// The longest validity accepted (`expirationSeconds` is an int64, but a century is plenty).
pub const MAX_VALIDITY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
/// Where OCM's agent puts the ServiceAccounts (the add-on install namespace); the agent's
/// `--service-account-namespace` default.
pub const DEFAULT_NAMESPACE: &str = "open-cluster-management-agent-addon";
/// Condition: the token was reported to the hub.
pub const CONDITION_TOKEN_REPORTED: &str = "TokenReported";
/// Condition: the token is kept (OCM: its Secret on the hub was created).
pub const CONDITION_SECRET_CREATED: &str = "SecretCreated";
/// A token is rotated once this share of the lifetime the spoke actually granted has passed.
pub const ROTATE_AT: f64 = 0.8;

/// A Go duration (`time.ParseDuration`, see [`crate::go_duration`]): `"8640h0m0s"`, `"1h30m"`,
/// `"1.5h"`. Negative durations are refused. The error says what was wrong.
pub fn parse_go_duration(s: &str) -> Result<Duration, String> {
    let d = GoDuration::parse(s.trim())
        .map_err(|e| format!("{s:?} is not a Go duration (like \"8640h0m0s\"): {e}"))?;
    let d = d.to_std().ok_or_else(|| format!("{s:?} is negative"))?;
    if d > MAX_VALIDITY * 10 {
        return Err(format!("{s:?} is too long"));
    }
    Ok(d)
}

/// A whole number of seconds as Go prints a duration (`8640h0m0s`, `1m30s`, `5s`, `0s`).
pub fn format_go_duration(seconds: u64) -> String {
    GoDuration::saturating_from_nanos(i128::from(seconds) * 1_000_000_000).to_string()
}

/// When a token issued at `issued` and expiring at `expires` (as the spoke answered: clouds cap
/// lifetimes, so the validity asked for is never trusted) is due for rotation: after
/// [`ROTATE_AT`] of its actual lifetime, and never sooner than [`MIN_ROTATION`] after it was
/// issued. A token that expires when or before it was issued (a clock skewed between agent and
/// API server) waits [`SKEWED_RETRY`]: rotating at once would loop token requests.
pub fn rotation_due(issued: SystemTime, expires: SystemTime) -> SystemTime {
    match expires.duration_since(issued) {
        Ok(lifetime) if !lifetime.is_zero() => {
            issued + lifetime.mul_f64(ROTATE_AT).max(MIN_ROTATION)
        }
        _ => issued + SKEWED_RETRY,
    }
}

/// The shortest time between two tokens of one account.
pub const MIN_ROTATION: Duration = Duration::from_secs(1);
/// How long a token whose expiry is not after its issue waits before the next.
pub const SKEWED_RETRY: Duration = Duration::from_secs(30);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse_as_go_parses_them() {
        assert_eq!(parse_go_duration("8640h0m0s").unwrap(), DEFAULT_VALIDITY);
        assert_eq!(
            parse_go_duration("1h30m").unwrap(),
            Duration::from_secs(5400)
        );
        assert_eq!(
            parse_go_duration("1.5h").unwrap(),
            Duration::from_secs(5400)
        );
        assert_eq!(
            parse_go_duration("500ms").unwrap(),
            Duration::from_millis(500)
        );
        assert_eq!(parse_go_duration("0").unwrap(), Duration::ZERO);
        for bad in ["", "10", "h", "-1h", "1d", "1h-2m", "abc"] {
            assert!(parse_go_duration(bad).is_err(), "{bad:?} accepted");
        }
        assert!(
            parse_go_duration("1d")
                .unwrap_err()
                .contains("unknown unit")
        );
    }

    #[test]
    fn go_durations_print_as_go_prints_them() {
        assert_eq!(format_go_duration(8640 * 3600), "8640h0m0s");
        assert_eq!(format_go_duration(90), "1m30s");
        assert_eq!(format_go_duration(5), "5s");
        assert_eq!(format_go_duration(0), "0s");
        assert_eq!(
            parse_go_duration(&format_go_duration(3723)).unwrap(),
            Duration::from_secs(3723)
        );
    }

    #[test]
    fn rotation_follows_the_lifetime_the_spoke_granted_not_the_one_asked() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        // Asked for 360 days, the cloud capped it at one hour: rotate after 48 minutes.
        let due = rotation_due(t0, t0 + Duration::from_secs(3600));
        assert_eq!(due, t0 + Duration::from_secs(2880));
        assert_eq!(
            rotation_due(t0, t0 - Duration::from_secs(1)),
            t0 + SKEWED_RETRY
        );
        assert_eq!(rotation_due(t0, t0), t0 + SKEWED_RETRY);
        assert_eq!(
            rotation_due(t0, t0 + Duration::from_millis(10)),
            t0 + MIN_ROTATION
        );
    }
}
