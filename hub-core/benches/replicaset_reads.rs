//! What a replica set's reconcile pays to read its 10,000 works (session-16 review D1): each
//! work a ConfigMap and a Deployment, with the full status an agent reports (four conditions,
//! and per manifest its identity, three conditions and a status feedback).
//!
//! "to_work" is how the reconcile read them before: every work decoded whole — the spec's
//! manifests, the status's resource status, the metadata's maps cloned. "conditions only" is
//! what `flotilla_hub::replicaset::rules::WorkFacts::of` does now: the stored work shared (its
//! metadata read in place) and only the status's conditions decoded
//! ([`StoredWork::conditions`]). Both go through the works inventory's owner index and build
//! the map by cluster, as the reconcile does; "nothing decoded" is that floor alone.
//!
//! Run with `cargo bench -j 1 -p flotilla-hub-core --bench replicaset_reads`.

use criterion::{Criterion, criterion_group, criterion_main};
use flotilla_api::meta::{self, REPLICASET_LABEL};
use flotilla_api::v1::{
    Condition, FeedbackValue, FieldValue, Manifest, ManifestCondition, ManifestResourceStatus,
    ManifestWork, ManifestWorkSpec, ManifestWorkStatus, ManifestsTemplate, ObjectMeta,
    ResourceMeta, StatusFeedbackResult,
};
use flotilla_hub_core::cluster::StoredWork;
use flotilla_hub_core::inventory::WorkInventory;
use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;

const CLUSTERS: usize = 10_000;
const OWNER: &str = "default.web";

const CONFIG_MAP: &str = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web-config","namespace":"default","labels":{"app":"web"}},"data":{"greeting":"hello from the fleet","log_level":"info","feature_flags":"a,b,c"}}"#;

const DEPLOYMENT: &str = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"default","labels":{"app":"web"}},"spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"web","image":"nginx:1.27.3","ports":[{"containerPort":80}],"envFrom":[{"configMapRef":{"name":"web-config"}}],"resources":{"requests":{"cpu":"50m","memory":"64Mi"},"limits":{"cpu":"200m","memory":"128Mi"}}}]}}}}"#;

fn condition(ty: &str, status: &str, reason: &str, message: &str) -> Condition {
    Condition {
        r#type: ty.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        last_transition_time: Some(meta::now()),
        observed_generation: 1,
    }
}

fn manifest(
    ordinal: i32,
    group: &str,
    kind: &str,
    resource: &str,
    name: &str,
) -> ManifestCondition {
    ManifestCondition {
        resource_meta: Some(ResourceMeta {
            ordinal,
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
            resource: resource.into(),
            namespace: "default".into(),
            name: name.into(),
        }),
        status_feedback: Some(StatusFeedbackResult {
            values: vec![FeedbackValue {
                name: "ReadyReplicas".into(),
                field_value: Some(FieldValue {
                    r#type: "Integer".into(),
                    integer: Some(2),
                    ..Default::default()
                }),
            }],
        }),
        conditions: vec![
            condition(
                "Applied",
                "True",
                "AppliedManifestComplete",
                "Apply manifest complete",
            ),
            condition(
                "Available",
                "True",
                "ResourceAvailable",
                "Resource is available",
            ),
            condition("StatusFeedbackSynced", "True", "StatusFeedbackSynced", ""),
        ],
    }
}

fn work(cluster: usize) -> StoredWork {
    StoredWork::from(ManifestWork {
        metadata: Some(ObjectMeta {
            name: "web".into(),
            namespace: format!("cluster-{cluster:05}"),
            uid: format!("00000000-0000-4000-8000-{cluster:012}"),
            resource_version: 40_000 + cluster as u64,
            generation: 1,
            creation_timestamp: Some(meta::now()),
            labels: [
                (REPLICASET_LABEL.to_string(), OWNER.to_string()),
                (
                    "work.open-cluster-management.io/placementname".to_string(),
                    "edge".to_string(),
                ),
            ]
            .into(),
            annotations: [(
                "work.flotilla.io/template-hash".to_string(),
                "3f2a9c1d0b7e6a54".to_string(),
            )]
            .into(),
            ..Default::default()
        }),
        spec: Some(ManifestWorkSpec {
            workload: Some(ManifestsTemplate {
                manifests: vec![
                    Manifest {
                        raw: CONFIG_MAP.as_bytes().to_vec(),
                    },
                    Manifest {
                        raw: DEPLOYMENT.as_bytes().to_vec(),
                    },
                ],
            }),
            ..Default::default()
        }),
        status: Some(ManifestWorkStatus {
            conditions: vec![
                condition(
                    "Applied",
                    "True",
                    "AppliedManifestWorkComplete",
                    "Apply manifest work complete",
                ),
                condition(
                    "Available",
                    "True",
                    "ResourcesAvailable",
                    "All resources are available",
                ),
                condition("Progressing", "False", "AppliedManifestWorkComplete", ""),
                condition("Degraded", "False", "AsExpected", ""),
            ],
            resource_status: Some(ManifestResourceStatus {
                manifests: vec![
                    manifest(0, "", "ConfigMap", "configmaps", "web-config"),
                    manifest(1, "apps", "Deployment", "deployments", "web"),
                ],
            }),
        }),
        hub: None,
    })
}

/// `WorkFacts` as the replica set builds it: the stored work shared, its conditions decoded.
#[allow(dead_code)] // held for the rules to read, as the reconcile holds them
struct Facts {
    work: Arc<StoredWork>,
    conditions: Vec<Condition>,
}

fn cluster_of(w: &StoredWork) -> Option<String> {
    Some(w.metadata.as_ref()?.namespace.clone())
}

fn bench(c: &mut Criterion) {
    let inv = WorkInventory::new(16);
    for i in 0..CLUSTERS {
        inv.upsert(&format!("cluster-{i:05}/web"), work(i));
    }
    assert_eq!(inv.owned_by(OWNER).len(), CLUSTERS);
    let mut g = c.benchmark_group("replicaset_reads_10k");
    g.sample_size(20);
    g.bench_function("owned works: to_work (before)", |b| {
        b.iter(|| {
            let works: BTreeMap<String, Arc<ManifestWork>> = inv
                .owned_by(OWNER)
                .into_iter()
                .filter_map(|(_, w)| Some((cluster_of(&w)?, Arc::new(w.to_work()))))
                .collect();
            black_box(works)
        })
    });
    g.bench_function("owned works: metadata and conditions only", |b| {
        b.iter(|| {
            let works: BTreeMap<String, Facts> = inv
                .owned_by(OWNER)
                .into_iter()
                .filter_map(|(_, w)| {
                    let cluster = cluster_of(&w)?;
                    let conditions = w.conditions();
                    Some((
                        cluster,
                        Facts {
                            work: w,
                            conditions,
                        },
                    ))
                })
                .collect();
            black_box(works)
        })
    });
    // What the owner index and the map cost with nothing decoded: what caching the facts per
    // work revision (the review's D1 fix 2) could at best bring the read down to.
    g.bench_function("owned works: nothing decoded (floor)", |b| {
        b.iter(|| {
            let works: BTreeMap<String, Arc<StoredWork>> = inv
                .owned_by(OWNER)
                .into_iter()
                .filter_map(|(_, w)| Some((cluster_of(&w)?, w)))
                .collect();
            black_box(works)
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
