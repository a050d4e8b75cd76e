//! What the task does with one cluster's report, decided from the report and the account it
//! names (pure: no store, no clock, no key — the executor in [`super`] opens the box and
//! writes).

use super::super::rules::{self, Refusal};
use flotilla_api::v1::{ManagedServiceAccountStatus, ServiceAccountTokenReport};
use std::time::SystemTime;

/// The account a report names, as the task holds it.
#[derive(Debug, Clone, Copy)]
pub struct Held<'a> {
    /// The account's generation.
    pub generation: i64,
    /// It is being deleted.
    pub deleting: bool,
    /// Its stored status.
    pub status: Option<&'a ManagedServiceAccountStatus>,
    /// When the token held was issued (`None`: no token held).
    pub token_issued: Option<SystemTime>,
}

/// What to do with a report.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// Nothing to store: the report is taken as it is.
    Taken,
    /// A report of no account this hub holds: counted and logged, not stored.
    Unknown(Refusal),
    /// The cluster confirmed the ServiceAccount of an account being deleted is gone: the
    /// account is forgotten.
    Purge,
    /// The cluster lost the ServiceAccount of an account that is not being deleted: deliver
    /// it again.
    Redeliver,
    /// Over the cluster's report rate: delivered again later.
    RateLimited,
    /// Refused: counted, and said in the account's `TokenReported` condition. `redeliver`:
    /// the account is delivered again too (its token is sealed to another hub key).
    Refuse {
        /// Why.
        refusal: Refusal,
        /// Deliver the account again.
        redeliver: bool,
    },
    /// Store this status (a token error, or the token held whose status was not stored).
    Status(ManagedServiceAccountStatus),
    /// A newer token: open it, store its record, then the status that makes it current.
    Store {
        /// When it was issued.
        issued: SystemTime,
        /// When it expires.
        expires: SystemTime,
    },
}

/// Decides what a report does. `hub_xkey` is this hub's public sealing key; `admit` takes one
/// report from the cluster's budget (asked only for a report that gets that far).
pub fn report(
    report: &ServiceAccountTokenReport,
    held: Option<Held<'_>>,
    hub_xkey: &str,
    now: SystemTime,
    admit: impl FnOnce() -> bool,
) -> Plan {
    let Some(held) = held else {
        return Plan::Unknown(Refusal(
            "unknown_account",
            format!(
                "cluster {:?} has no ManagedServiceAccount {:?}",
                report.cluster_name, report.name
            ),
        ));
    };
    if held.deleting {
        return if report.deleted {
            Plan::Purge
        } else {
            Plan::Taken
        };
    }
    if report.deleted {
        return Plan::Redeliver;
    }
    if !admit() {
        return Plan::RateLimited;
    }
    let refuse = |refusal| Plan::Refuse {
        refusal,
        redeliver: false,
    };
    if report.observed_generation > held.generation {
        return refuse(Refusal(
            "invalid_status",
            format!(
                "observedGeneration {} is ahead of the account's {}",
                report.observed_generation, held.generation
            ),
        ));
    }
    if !report.error.is_empty() {
        return Plan::Status(rules::token_failed(
            held.status,
            &report.error,
            report.observed_generation,
        ));
    }
    if report.sealed_token.is_empty() {
        return refuse(Refusal(
            "invalid_status",
            "a report with neither a token nor an error".into(),
        ));
    }
    if report.hub_xkey != hub_xkey {
        return Plan::Refuse {
            refusal: Refusal(
                "stale_key",
                "the token is sealed to another hub key; delivering the current one".into(),
            ),
            redeliver: true,
        };
    }
    let (issued, expires) = match rules::token_times(report, now) {
        Ok(t) => t,
        Err(refusal) => return refuse(refusal),
    };
    if held.token_issued.is_some_and(|c| c >= issued) {
        // Not newer than the token held (a redelivery, or a replay). The token held may have
        // been stored without its status (the status write failed): the status is what makes
        // it current, so it is written now.
        if held.token_issued == Some(issued) && rules::refreshed_at(held.status) != Some(issued) {
            return Plan::Status(rules::token_kept(
                held.status,
                &report.name,
                report.observed_generation,
                issued,
                expires,
            ));
        }
        return Plan::Taken;
    }
    Plan::Store { issued, expires }
}

#[cfg(test)]
mod tests;
