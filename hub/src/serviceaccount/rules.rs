//! Pure decisions of the hub's ManagedServiceAccounts: what a spoke's report may be, the status
//! it makes, when the account is due for deletion (`ttlSecondsAfterCreation`), and when its
//! spec is sent again.

use flotilla_api::meta::{set_condition, system_time, timestamp};
use flotilla_api::serviceaccount::{CONDITION_SECRET_CREATED, CONDITION_TOKEN_REPORTED};
use flotilla_api::v1::{
    Condition, ManagedServiceAccount, ManagedServiceAccountStatus, ServiceAccountTokenReport,
    ServiceAccountTokenSecretRef,
};
use flotilla_bus::serviceaccounts as msa;
use std::time::{Duration, Instant, SystemTime};

/// The largest sealed box accepted (the token plus the box's overhead).
pub const MAX_SEALED_BYTES: usize = msa::MAX_TOKEN_BYTES + 64;
/// How far in the future a report's `issuedAt` may lie (clock skew).
pub const MAX_SKEW: Duration = Duration::from_secs(300);

/// A report the hub refuses: `(reason, message)` for the counters and the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(pub &'static str, pub String);

/// Checks a report against the subject it came on: the cluster and resource id match, the
/// resource id is the account's, fields are bounded.
pub fn check_report(
    report: &ServiceAccountTokenReport,
    subject_cluster: &str,
    subject_rid: &str,
) -> Result<(), Refusal> {
    if report.cluster_name != subject_cluster || report.resource_id != subject_rid {
        return Err(Refusal(
            "clustername_mismatch",
            format!(
                "clusterName {:?} / resourceId {:?} do not match the subject ({subject_cluster:?}, {subject_rid:?})",
                report.cluster_name, report.resource_id
            ),
        ));
    }
    if msa::resource_id(subject_cluster, &report.name) != report.resource_id {
        return Err(Refusal(
            "clustername_mismatch",
            format!(
                "resourceId {:?} is not ManagedServiceAccount {subject_cluster}/{}'s",
                report.resource_id, report.name
            ),
        ));
    }
    if report.sealed_token.len() > MAX_SEALED_BYTES
        || report.error.len() > 4096
        || report.sender_xkey.len() > 128
        || report.hub_xkey.len() > 128
        || report.service_account_namespace.len() > 63
    {
        return Err(Refusal(
            "invalid_status",
            format!(
                "ManagedServiceAccount {subject_cluster}/{}: a field is over its limit",
                report.name
            ),
        ));
    }
    Ok(())
}

/// What a report with a token claims, checked: issued at, expires at (after issuing, not
/// issued in the future).
pub fn token_times(
    report: &ServiceAccountTokenReport,
    now: SystemTime,
) -> Result<(SystemTime, SystemTime), Refusal> {
    let (Some(issued), Some(expires)) = (&report.issued_at, &report.expiration_timestamp) else {
        return Err(Refusal(
            "invalid_status",
            format!(
                "ManagedServiceAccount {}/{}: a token without issuedAt and expirationTimestamp",
                report.cluster_name, report.name
            ),
        ));
    };
    let (issued, expires) = (system_time(issued), system_time(expires));
    if expires <= issued || issued > now + MAX_SKEW {
        return Err(Refusal(
            "invalid_status",
            format!(
                "ManagedServiceAccount {}/{}: the token's times make no sense (issued after it \
                 expires, or in the future)",
                report.cluster_name, report.name
            ),
        ));
    }
    Ok((issued, expires))
}

fn condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    ok: bool,
    reason: &str,
    message: &str,
    generation: i64,
) {
    set_condition(
        conditions,
        type_,
        if ok { "True" } else { "False" },
        reason,
        message,
    );
    if let Some(c) = conditions.iter_mut().find(|c| c.r#type == type_) {
        c.observed_generation = generation;
    }
}

/// The status after a token issued at `issued`, expiring at `expires`, was kept.
pub fn token_kept(
    status: Option<&ManagedServiceAccountStatus>,
    name: &str,
    generation: i64,
    issued: SystemTime,
    expires: SystemTime,
) -> ManagedServiceAccountStatus {
    let mut s = status.cloned().unwrap_or_default();
    condition(
        &mut s.conditions,
        CONDITION_TOKEN_REPORTED,
        true,
        "TokenReported",
        "the cluster reported a token (sealed to the hub)",
        generation,
    );
    condition(
        &mut s.conditions,
        CONDITION_SECRET_CREATED,
        true,
        "SecretCreated",
        "the token is kept by the hub, sealed",
        generation,
    );
    s.expiration_timestamp = Some(timestamp(expires));
    s.token_secret_ref = Some(ServiceAccountTokenSecretRef {
        name: name.to_string(),
        last_refresh_timestamp: Some(timestamp(issued)),
    });
    s
}

/// The status after the cluster said it could not issue a token.
pub fn token_failed(
    status: Option<&ManagedServiceAccountStatus>,
    error: &str,
    generation: i64,
) -> ManagedServiceAccountStatus {
    let mut s = status.cloned().unwrap_or_default();
    condition(
        &mut s.conditions,
        CONDITION_TOKEN_REPORTED,
        false,
        "TokenNotIssued",
        error,
        generation,
    );
    s
}

/// The status after the hub refused a report of the cluster's: `TokenReported` False, saying
/// why, so the account does not look fine while its cluster's reports are refused. A token held
/// stays (`SecretCreated`, the expiry, `tokenSecretRef`): it is still the current one.
pub fn report_refused(
    status: Option<&ManagedServiceAccountStatus>,
    refusal: &Refusal,
    generation: i64,
) -> ManagedServiceAccountStatus {
    let mut s = status.cloned().unwrap_or_default();
    condition(
        &mut s.conditions,
        CONDITION_TOKEN_REPORTED,
        false,
        "ReportRefused",
        &format!(
            "the hub refused the cluster's last report ({}): {}",
            refusal.0, refusal.1
        ),
        generation,
    );
    s
}

/// How many reports of one cluster the hub takes: `burst` at once, then `per_second`. A report
/// over the rate is delivered again later (JetStream keeps it), not lost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReportRate {
    /// Sustained reports per second (default 5).
    pub per_second: f64,
    /// Reports at once (default 100: every account of a restarted agent reports at once).
    pub burst: u32,
}

impl Default for ReportRate {
    fn default() -> Self {
        Self {
            per_second: 5.0,
            burst: 100,
        }
    }
}

/// A cluster's budget of reports (a token bucket).
#[derive(Debug, Clone, Copy)]
pub struct Budget {
    left: f64,
    at: Instant,
}

impl Budget {
    /// A full budget.
    pub fn new(rate: ReportRate, now: Instant) -> Self {
        Self {
            left: f64::from(rate.burst),
            at: now,
        }
    }

    /// Takes one report from the budget; false when it is spent.
    pub fn take(&mut self, rate: ReportRate, now: Instant) -> bool {
        let refill = now.saturating_duration_since(self.at).as_secs_f64() * rate.per_second;
        self.left = (self.left + refill).min(f64::from(rate.burst));
        self.at = now;
        if self.left >= 1.0 {
            self.left -= 1.0;
            true
        } else {
            false
        }
    }
}

/// When the current token was issued, as the status says (`tokenSecretRef.lastRefreshTimestamp`):
/// the token whose record has this `issuedAt` is the account's current one.
pub fn refreshed_at(status: Option<&ManagedServiceAccountStatus>) -> Option<SystemTime> {
    status?
        .token_secret_ref
        .as_ref()?
        .last_refresh_timestamp
        .as_ref()
        .map(system_time)
}

/// A failed removal of a token record is tried again after 1 s, doubling to
/// [`PURGE_MAX`] (the actor's [`crate::backoff::Backoff`]).
pub const PURGE_MIN: Duration = Duration::from_secs(1);
/// The longest wait between attempts to remove a token record.
pub const PURGE_MAX: Duration = Duration::from_secs(60);

/// When `ttlSecondsAfterCreation` deletes the account (`None`: never).
pub fn delete_at(account: &ManagedServiceAccount) -> Option<SystemTime> {
    let ttl = account.spec.as_ref()?.ttl_seconds_after_creation?;
    let created = account.metadata.as_ref()?.creation_timestamp.as_ref()?;
    Some(system_time(created) + Duration::from_secs(u64::try_from(ttl).unwrap_or(0)))
}

/// An unconfirmed spec is sent again after 2 s, doubling to [`RESEND_MAX`] (the actor's
/// [`crate::backoff::Backoff`]); a confirmed one every `redeliver_every` (a restarted agent
/// holds nothing).
pub const RESEND_MIN: Duration = Duration::from_secs(2);
/// The longest wait between sends of an unconfirmed spec.
pub const RESEND_MAX: Duration = Duration::from_secs(60);

#[cfg(test)]
mod tests {
    use super::*;
    use flotilla_api::v1::{ManagedServiceAccountSpec, ObjectMeta};

    fn report(cluster: &str, name: &str) -> ServiceAccountTokenReport {
        ServiceAccountTokenReport {
            cluster_name: cluster.into(),
            name: name.into(),
            resource_id: msa::resource_id(cluster, name),
            ..Default::default()
        }
    }

    #[test]
    fn a_report_naming_another_cluster_or_account_is_refused() {
        let r = report("c1", "sa");
        assert!(check_report(&r, "c1", &r.resource_id).is_ok());
        assert_eq!(
            check_report(&r, "c2", &r.resource_id).unwrap_err().0,
            "clustername_mismatch"
        );
        // The subject's resource id is c1's "other", the report claims "sa".
        let other = msa::resource_id("c1", "other");
        assert!(check_report(&r, "c1", &other).is_err());
        let mut forged = report("c1", "sa");
        forged.resource_id = other.clone();
        assert!(check_report(&forged, "c1", &other).is_err());
        let mut big = report("c1", "sa");
        big.sealed_token = vec![0; MAX_SEALED_BYTES + 1];
        assert_eq!(
            check_report(&big, "c1", &big.resource_id.clone())
                .unwrap_err()
                .0,
            "invalid_status"
        );
    }

    #[test]
    fn token_times_must_make_sense() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let mut r = report("c1", "sa");
        assert!(token_times(&r, now).is_err());
        r.issued_at = Some(timestamp(now));
        r.expiration_timestamp = Some(timestamp(now + Duration::from_secs(60)));
        assert_eq!(
            token_times(&r, now).unwrap(),
            (now, now + Duration::from_secs(60))
        );
        r.expiration_timestamp = Some(timestamp(now - Duration::from_secs(1)));
        assert!(token_times(&r, now).is_err());
        r.issued_at = Some(timestamp(now + Duration::from_secs(3600)));
        r.expiration_timestamp = Some(timestamp(now + Duration::from_secs(7200)));
        assert!(token_times(&r, now).is_err());
    }

    #[test]
    fn status_says_reported_and_kept_with_the_clusters_expiry() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let s = token_kept(None, "sa", 2, t0, t0 + Duration::from_secs(10));
        let types: Vec<_> = s
            .conditions
            .iter()
            .map(|c| (c.r#type.as_str(), c.status.as_str()))
            .collect();
        assert_eq!(
            types,
            [("TokenReported", "True"), ("SecretCreated", "True")]
        );
        assert_eq!(
            system_time(s.expiration_timestamp.as_ref().unwrap()),
            t0 + Duration::from_secs(10)
        );
        assert_eq!(s.token_secret_ref.as_ref().unwrap().name, "sa");
        let failed = token_failed(Some(&s), "forbidden", 3);
        let reported = failed
            .conditions
            .iter()
            .find(|c| c.r#type == "TokenReported")
            .unwrap();
        assert_eq!(
            (reported.status.as_str(), reported.reason.as_str()),
            ("False", "TokenNotIssued")
        );
    }

    #[test]
    fn ttl_counts_from_creation() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let mut a = ManagedServiceAccount {
            metadata: Some(ObjectMeta {
                creation_timestamp: Some(timestamp(t0)),
                ..Default::default()
            }),
            spec: Some(ManagedServiceAccountSpec {
                rotation: None,
                ttl_seconds_after_creation: Some(30),
            }),
            status: None,
        };
        assert_eq!(delete_at(&a), Some(t0 + Duration::from_secs(30)));
        a.spec.as_mut().unwrap().ttl_seconds_after_creation = None;
        assert_eq!(delete_at(&a), None);
    }

    #[test]
    fn a_refused_report_says_so_and_keeps_the_token_held() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let kept = token_kept(None, "sa", 1, t0, t0 + Duration::from_secs(10));
        let refused = report_refused(
            Some(&kept),
            &Refusal("sealed_token", "does not open".into()),
            1,
        );
        let c = refused
            .conditions
            .iter()
            .find(|c| c.r#type == "TokenReported")
            .unwrap();
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", "ReportRefused")
        );
        assert!(c.message.contains("sealed_token") && c.message.contains("does not open"));
        assert_eq!(refreshed_at(Some(&refused)), Some(t0));
        assert_eq!(refused.expiration_timestamp, kept.expiration_timestamp);
        // The same refusal again changes nothing (and so writes nothing).
        let again = report_refused(
            Some(&refused),
            &Refusal("sealed_token", "does not open".into()),
            1,
        );
        assert_eq!(again, refused);
    }

    #[test]
    fn a_clusters_reports_are_limited_to_a_burst_then_a_rate() {
        let rate = ReportRate {
            per_second: 2.0,
            burst: 3,
        };
        let t0 = Instant::now();
        let mut b = Budget::new(rate, t0);
        assert!((0..3).all(|_| b.take(rate, t0)));
        assert!(!b.take(rate, t0));
        assert!(!b.take(rate, t0 + Duration::from_millis(400)));
        assert!(b.take(rate, t0 + Duration::from_millis(500)));
        assert!(!b.take(rate, t0 + Duration::from_millis(500)));
        // Refilled to the burst, not beyond.
        let later = t0 + Duration::from_secs(60);
        assert!((0..3).all(|_| b.take(rate, later)));
        assert!(!b.take(rate, later));
    }
}
