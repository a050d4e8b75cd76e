//! The scheduled backup (`--backup-schedule`): a CronJob running `flotilla-hub backup` as the
//! hub (its copy of the secure directory, as the hubs make it) into a volume of its own, one
//! directory per run named by its UTC time, the oldest beyond `--backup-keep` removed after a
//! run that succeeded. Restores are done by hand (docs/operations.md, "Restore").

use super::hub::{pod_security, secure_copy, secure_mount};
use super::nats::CLIENT_PORT;
use super::secure::{HUB_SECURE_DIR, SecureFiles};
use super::{Plan, container_security, metadata};
use serde_json::{Value, json};

/// The application label of the backup pods.
pub const APP: &str = "flotilla-backup";
/// Where the backups volume is mounted.
const BACKUPS: &str = "/backups";

/// When and what to keep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// A cron schedule (`0 3 * * *`).
    pub cron: String,
    /// Backups kept (the newest).
    pub keep: u32,
    /// The backups volume's size.
    pub size: String,
}

/// The script the backup container runs.
fn script(plan: &Plan, schedule: &Schedule) -> String {
    format!(
        "set -eu\n\
         out=\"{BACKUPS}/$(date -u +%Y%m%dT%H%M%SZ)\"\n\
         flotilla-hub --nats-url 'tls://{host}:{CLIENT_PORT}' backup --secure-dir '{HUB_SECURE_DIR}' --out \"$out\"\n\
         ls -1d {BACKUPS}/*Z | sort -r | tail -n +{first_removed} | while read -r old; do rm -rf \"$old\"; done\n",
        host = plan.service_host("nats"),
        first_removed = schedule.keep + 1,
    )
}

/// The backups' volume claim and the CronJob.
pub fn objects(plan: &Plan, files: &SecureFiles, schedule: &Schedule) -> Vec<Value> {
    let (mut volumes, init) = secure_copy(plan, files);
    volumes.push(json!({
        "name": "backups",
        "persistentVolumeClaim": { "claimName": "flotilla-backups" },
    }));
    let mut claim = json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": metadata(plan, "flotilla-backups", APP),
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": { "requests": { "storage": schedule.size } },
        },
    });
    if let Some(class) = &plan.storage_class {
        claim["spec"]["storageClassName"] = json!(class);
    }
    vec![
        claim,
        json!({
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": metadata(plan, APP, APP),
            "spec": {
                "schedule": schedule.cron,
                "concurrencyPolicy": "Forbid",
                "successfulJobsHistoryLimit": 3,
                "failedJobsHistoryLimit": 3,
                "jobTemplate": { "spec": {
                    "backoffLimit": 2,
                    "template": {
                        "metadata": { "labels": super::labels(APP) },
                        "spec": {
                            "restartPolicy": "Never",
                            "serviceAccountName": super::hub::APP,
                            "automountServiceAccountToken": false,
                            "securityContext": pod_security(),
                            "initContainers": [init],
                            "containers": [{
                                "name": "backup",
                                "image": plan.image,
                                "command": ["sh", "-c", script(plan, schedule)],
                                "securityContext": container_security(),
                                "volumeMounts": [
                                    secure_mount(),
                                    { "name": "backups", "mountPath": BACKUPS },
                                ],
                            }],
                            "volumes": volumes,
                        },
                    },
                } },
            },
        }),
    ]
}

/// Every problem of the schedule.
pub fn check(schedule: &Schedule) -> Vec<super::Problem> {
    let mut problems = Vec::new();
    let fields = schedule.cron.split_whitespace().count();
    let allowed = |c: char| c.is_ascii_digit() || " */,-".contains(c);
    if fields != 5 || !schedule.cron.chars().all(allowed) {
        problems.push(super::Problem(format!(
            "--backup-schedule {:?}: give five cron fields of digits, *, /, - and , (such as \
             \"0 3 * * *\")",
            schedule.cron
        )));
    }
    if schedule.keep == 0 {
        problems.push(super::Problem(
            "--backup-keep 0: keep at least one backup".into(),
        ));
    }
    if !super::quantity(&schedule.size) {
        problems.push(super::Problem(format!(
            "--backup-size {:?}: not a Kubernetes quantity such as 20Gi",
            schedule.size
        )));
    }
    problems
}
