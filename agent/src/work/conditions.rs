//! Manifest and work conditions with OCM semantics: per manifest `Applied`, `Available`,
//! `StatusFeedbackSynced`, `Progressing`, `Degraded`; per work the aggregation — `Applied` when
//! every manifest is applied, `Available` False if any is False, else Unknown if any is Unknown,
//! else True; `Progressing` / `Degraded` True if any manifest is.

use flotilla_api::meta::{self, status};
use flotilla_api::v1::Condition;
use flotilla_api::work::conditions::{APPLIED, AVAILABLE, DEGRADED, FEEDBACK_SYNCED, PROGRESSING};
use serde_json::Value;

/// What a resource's own status says about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    /// Available: Some(true/false), or None when the kind has no readiness notion.
    pub ready: Option<bool>,
    /// Still converging.
    pub progressing: bool,
    /// Failed.
    pub failed: bool,
    /// Why (for messages).
    pub message: String,
}

/// Reads readiness from a resource's status, for the kinds whose controllers report it.
pub fn health(group: &str, kind: &str, obj: &Value) -> Health {
    let st = &obj["status"];
    let cond = |t: &str| {
        st["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == t))
            .and_then(|c| c["status"].as_str())
            .map(str::to_string)
    };
    let h = |ready: Option<bool>, progressing: bool, failed: bool, message: String| Health {
        ready,
        progressing,
        failed,
        message,
    };
    match (group, kind) {
        ("apps", "Deployment") | ("apps", "StatefulSet") => {
            let want = obj["spec"]["replicas"].as_i64().unwrap_or(1);
            let ready = st["readyReplicas"].as_i64().unwrap_or(0);
            let available = st["availableReplicas"].as_i64().unwrap_or(ready);
            let updated = st["updatedReplicas"].as_i64().unwrap_or(want);
            let total = st["replicas"].as_i64().unwrap_or(want);
            let generation = obj["metadata"]["generation"].as_i64().unwrap_or(0);
            let observed = st["observedGeneration"].as_i64().unwrap_or(generation);
            let deadline = st["conditions"]
                .as_array()
                .is_some_and(|cs| cs.iter().any(|c| c["reason"] == "ProgressDeadlineExceeded"));
            let done = available.min(ready) >= want && observed >= generation;
            // A rollout is progressing until every replica runs the new template and the old
            // ones are gone, even while enough replicas are available.
            let rolling = updated < want || total > want;
            h(
                Some(done),
                !deadline && (!done || rolling),
                deadline,
                format!("{ready}/{want} replicas ready, {updated} updated"),
            )
        }
        ("apps", "DaemonSet") => {
            let want = st["desiredNumberScheduled"].as_i64().unwrap_or(0);
            let ready = st["numberReady"].as_i64().unwrap_or(0);
            let done = st.get("desiredNumberScheduled").is_some() && ready >= want;
            h(
                Some(done),
                !done,
                false,
                format!("{ready}/{want} pods ready"),
            )
        }
        ("batch", "Job") => {
            if cond("Failed").as_deref() == Some("True") {
                h(Some(false), false, true, "job failed".into())
            } else if cond("Complete").as_deref() == Some("True") {
                h(Some(true), false, false, "job complete".into())
            } else {
                h(Some(false), true, false, "job running".into())
            }
        }
        ("", "Pod") => match st["phase"].as_str() {
            Some("Failed") => h(Some(false), false, true, "pod failed".into()),
            Some("Succeeded") => h(Some(true), false, false, "pod succeeded".into()),
            _ if waiting_on_failure(st).is_some() => h(
                Some(false),
                false,
                true,
                waiting_on_failure(st).unwrap_or_default(),
            ),
            _ => {
                let ready = cond("Ready").as_deref() == Some("True");
                h(
                    Some(ready),
                    !ready,
                    false,
                    format!("phase {}", st["phase"].as_str().unwrap_or("Unknown")),
                )
            }
        },
        // Any other kind that reports Ready or Available conditions (CRDs, Services of some
        // controllers): those decide; Failed or Degraded True means failed.
        _ => {
            let failed = ["Failed", "Degraded"]
                .iter()
                .any(|t| cond(t).as_deref() == Some("True"));
            match cond("Ready").or_else(|| cond("Available")) {
                Some(s) => {
                    let ready = s == "True";
                    h(Some(ready), !ready && !failed, failed, format!("Ready={s}"))
                }
                None => h(None, false, failed, String::new()),
            }
        }
    }
}

/// A container stuck on a failure (`CrashLoopBackOff`, image pull errors, bad config).
fn waiting_on_failure(status: &Value) -> Option<String> {
    const FAILURES: [&str; 5] = [
        "CrashLoopBackOff",
        "ImagePullBackOff",
        "ErrImagePull",
        "CreateContainerConfigError",
        "InvalidImageName",
    ];
    status["containerStatuses"]
        .as_array()?
        .iter()
        .find_map(|c| {
            let reason = c["state"]["waiting"]["reason"].as_str()?;
            FAILURES
                .contains(&reason)
                .then(|| format!("container {}: {reason}", c["name"].as_str().unwrap_or("?")))
        })
}

/// The outcome of applying one manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyResult {
    /// Applied status.
    pub applied: bool,
    /// Reason (`AppliedManifestComplete`, `ApplyConflict`, `AppliedManifestFailed`, …).
    pub reason: String,
    /// Message.
    pub message: String,
}

/// Updates one manifest's conditions from its apply result, what the cluster holds, and the
/// feedback outcome (`None` when the manifest has no feedback rules). Returns whether anything
/// changed.
pub fn manifest_conditions(
    conditions: &mut Vec<Condition>,
    apply: &ApplyResult,
    observed: Option<&Health>,
    feedback_errors: Option<&[String]>,
) -> bool {
    let mut changed = meta::set_condition(
        conditions,
        APPLIED,
        if apply.applied {
            status::TRUE
        } else {
            status::FALSE
        },
        &apply.reason,
        &apply.message,
    );
    let (avail, reason, msg) = match observed {
        None => (
            status::FALSE,
            "ResourceNotFound",
            "the resource does not exist on the cluster".to_string(),
        ),
        Some(h) => match h.ready {
            None => (
                status::TRUE,
                "ResourceAvailable",
                "the resource exists on the cluster".to_string(),
            ),
            Some(true) => (status::TRUE, "ResourceAvailable", h.message.clone()),
            Some(false) if h.failed => (status::FALSE, "ResourceFailed", h.message.clone()),
            Some(false) => (status::FALSE, "ResourceNotReady", h.message.clone()),
        },
    };
    changed |= meta::set_condition(conditions, AVAILABLE, avail, reason, &msg);
    let progressing = observed.is_some_and(|h| h.progressing);
    changed |= meta::set_condition(
        conditions,
        PROGRESSING,
        if progressing {
            status::TRUE
        } else {
            status::FALSE
        },
        if progressing { "Progressing" } else { "Stable" },
        "",
    );
    let degraded = observed.is_some_and(|h| h.failed) || !apply.applied;
    changed |= meta::set_condition(
        conditions,
        DEGRADED,
        if degraded {
            status::TRUE
        } else {
            status::FALSE
        },
        if degraded { "Degraded" } else { "AsExpected" },
        "",
    );
    match feedback_errors {
        None => changed |= meta::remove_condition(conditions, FEEDBACK_SYNCED),
        Some([]) => {
            changed |= meta::set_condition(
                conditions,
                FEEDBACK_SYNCED,
                status::TRUE,
                "StatusFeedbackSynced",
                "",
            )
        }
        Some(errors) => {
            changed |= meta::set_condition(
                conditions,
                FEEDBACK_SYNCED,
                status::FALSE,
                "StatusFeedbackSyncFailed",
                &errors.join("; "),
            )
        }
    }
    changed
}

/// Aggregates manifest conditions into the work's conditions. Returns whether anything changed.
pub fn work_conditions(
    work: &mut Vec<Condition>,
    manifests: &[&[Condition]],
    generation: i64,
) -> bool {
    let get = |cs: &[Condition], t: &str| {
        meta::condition_status(cs, t)
            .unwrap_or(status::UNKNOWN)
            .to_string()
    };
    let total = manifests.len();
    let applied = manifests
        .iter()
        .filter(|cs| get(cs, APPLIED) == status::TRUE)
        .count();
    let avail: Vec<String> = manifests.iter().map(|cs| get(cs, AVAILABLE)).collect();
    let mut changed = if applied == total {
        meta::set_condition(
            work,
            APPLIED,
            status::TRUE,
            "AppliedManifestWorkComplete",
            "Apply manifest work complete",
        )
    } else {
        meta::set_condition(
            work,
            APPLIED,
            status::FALSE,
            "AppliedManifestWorkFailed",
            &format!("Failed to apply manifest work: {applied} of {total} manifests applied"),
        )
    };
    let available_ok = avail.iter().filter(|s| *s == status::TRUE).count();
    changed |= if avail.iter().any(|s| s == status::FALSE) {
        meta::set_condition(
            work,
            AVAILABLE,
            status::FALSE,
            "ResourcesNotAvailable",
            &format!("{available_ok} of {total} resources are available"),
        )
    } else if avail.iter().any(|s| s == status::UNKNOWN) {
        meta::set_condition(
            work,
            AVAILABLE,
            status::UNKNOWN,
            "ResourcesStatusUnknown",
            "Some resources are in an unknown state",
        )
    } else {
        meta::set_condition(
            work,
            AVAILABLE,
            status::TRUE,
            "ResourcesAvailable",
            "All resources are available",
        )
    };
    let progressing = manifests
        .iter()
        .any(|cs| get(cs, PROGRESSING) == status::TRUE);
    changed |= meta::set_condition(
        work,
        PROGRESSING,
        if progressing {
            status::TRUE
        } else {
            status::FALSE
        },
        if progressing { "Progressing" } else { "Stable" },
        "",
    );
    let degraded = manifests.iter().any(|cs| get(cs, DEGRADED) == status::TRUE);
    changed |= meta::set_condition(
        work,
        DEGRADED,
        if degraded {
            status::TRUE
        } else {
            status::FALSE
        },
        if degraded { "Degraded" } else { "AsExpected" },
        "",
    );
    for c in work.iter_mut() {
        if c.observed_generation != generation {
            c.observed_generation = generation;
            changed = true;
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn ok() -> ApplyResult {
        ApplyResult {
            applied: true,
            reason: "AppliedManifestComplete".into(),
            message: String::new(),
        }
    }

    fn with(applied: bool, ready: Option<Option<bool>>) -> Vec<Condition> {
        let mut cs = Vec::new();
        let apply = ApplyResult { applied, ..ok() };
        let h = ready.map(|r| Health {
            ready: r,
            progressing: r == Some(false),
            failed: false,
            message: String::new(),
        });
        manifest_conditions(&mut cs, &apply, h.as_ref(), None);
        cs
    }

    #[test]
    fn deployment_health_follows_ready_replicas_and_generation() {
        let d = json!({"metadata": {"generation": 2}, "spec": {"replicas": 2},
                       "status": {"readyReplicas": 2, "observedGeneration": 2}});
        assert_eq!(health("apps", "Deployment", &d).ready, Some(true));
        let d = json!({"metadata": {"generation": 3}, "spec": {"replicas": 2},
                       "status": {"readyReplicas": 2, "observedGeneration": 2}});
        let h = health("apps", "Deployment", &d);
        assert_eq!((h.ready, h.progressing), (Some(false), true));
        let j = json!({"status": {"conditions": [{"type": "Failed", "status": "True"}]}});
        assert!(health("batch", "Job", &j).failed);
        assert_eq!(health("", "ConfigMap", &json!({})).ready, None);
    }

    #[test]
    fn work_is_available_only_when_every_manifest_is() {
        let a = with(true, Some(Some(true)));
        let b = with(true, Some(None));
        let mut work = Vec::new();
        work_conditions(&mut work, &[&a, &b], 1);
        assert_eq!(meta::condition_status(&work, AVAILABLE), Some("True"));
        assert_eq!(meta::condition_status(&work, APPLIED), Some("True"));
        let c = with(true, Some(Some(false)));
        work_conditions(&mut work, &[&a, &c], 1);
        assert_eq!(meta::condition_status(&work, AVAILABLE), Some("False"));
        assert_eq!(meta::condition_status(&work, PROGRESSING), Some("True"));
        let d = with(false, None);
        work_conditions(&mut work, &[&a, &d], 1);
        assert_eq!(meta::condition_status(&work, APPLIED), Some("False"));
        assert_eq!(meta::condition_status(&work, DEGRADED), Some("True"));
    }

    #[test]
    fn unchanged_conditions_report_no_change() {
        let mut cs = Vec::new();
        let h = Health {
            ready: Some(true),
            progressing: false,
            failed: false,
            message: "1/1".into(),
        };
        assert!(manifest_conditions(&mut cs, &ok(), Some(&h), Some(&[])));
        assert!(!manifest_conditions(&mut cs, &ok(), Some(&h), Some(&[])));
    }

    proptest! {
        #[test]
        fn aggregation_follows_ocm_rules(states in proptest::collection::vec((any::<bool>(), 0u8..3), 1..8)) {
            let manifests: Vec<Vec<Condition>> = states
                .iter()
                .map(|(applied, r)| {
                    let mut cs = with(*applied, Some(match r { 0 => Some(true), 1 => Some(false), _ => None }));
                    if *r == 2 {
                        // Force Unknown availability.
                        meta::set_condition(&mut cs, AVAILABLE, status::UNKNOWN, "X", "");
                    }
                    cs
                })
                .collect();
            let refs: Vec<&[Condition]> = manifests.iter().map(|m| m.as_slice()).collect();
            let mut work = Vec::new();
            work_conditions(&mut work, &refs, 7);
            let applied_all = states.iter().all(|(a, _)| *a);
            prop_assert_eq!(meta::condition_status(&work, APPLIED) == Some("True"), applied_all);
            let any_false = states.iter().any(|(_, r)| *r == 1);
            let any_unknown = states.iter().any(|(_, r)| *r == 2);
            let want = if any_false { "False" } else if any_unknown { "Unknown" } else { "True" };
            prop_assert_eq!(meta::condition_status(&work, AVAILABLE), Some(want));
            prop_assert!(work.iter().all(|c| c.observed_generation == 7));
        }
    }
}
