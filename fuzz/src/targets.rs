//! The targets: each decodes arbitrary bytes exactly as its receiver does, then applies the
//! receiver's validation, and says whether the input was accepted.

use flotilla_api::v1;
use flotilla_bus::envelope::{DEFAULT_MAX_EVENT_BYTES, Event};
use prost::Message;

/// What a target made of an input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Decoded and valid.
    Accepted,
    /// Refused, with the error a user or a log would see.
    Rejected(String),
}

impl<E: std::fmt::Display> From<Result<(), E>> for Outcome {
    fn from(r: Result<(), E>) -> Self {
        match r {
            Ok(()) => Outcome::Accepted,
            Err(e) => Outcome::Rejected(e.to_string()),
        }
    }
}

/// One fuzz target.
pub struct Target {
    /// Name (`envelope`, `yaml`, `grpc.ManifestWork`, …).
    pub name: &'static str,
    /// The decoder under test.
    pub run: fn(&[u8]) -> Outcome,
    /// Valid inputs to mutate.
    pub seeds: fn() -> Vec<Vec<u8>>,
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn errors(errors: Vec<String>) -> Outcome {
    if errors.is_empty() {
        Outcome::Accepted
    } else {
        Outcome::Rejected(errors.join("; "))
    }
}

/// A CloudEvent from NATS, then its payload as the receiver of that type decodes and checks it.
fn envelope(bytes: &[u8]) -> Outcome {
    let event = match Event::decode(bytes, DEFAULT_MAX_EVENT_BYTES) {
        Ok(e) => e,
        Err(e) => return Outcome::Rejected(e.to_string()),
    };
    let ty = event.event_type.to_string();
    let decoded: Result<(), String> = match ty.as_str() {
        t if t == flotilla_bus::envelope::types::registration_request().to_string() => event
            .decode_data::<v1::RegistrationRequest>("RegistrationRequest")
            .map_err(|e| e.to_string())
            .and_then(|r| flotilla_hub::cluster::rules::validate_registration(&r)),
        t if t == flotilla_bus::envelope::types::cluster_status().to_string() => event
            .decode_data::<v1::ClusterStatusReport>("ClusterStatusReport")
            .map_err(|e| e.to_string())
            .and_then(|r| {
                flotilla_hub::cluster::rules::validate_claims(&r.claims).map_err(|e| e.to_string())
            }),
        t if t == flotilla_bus::scores::report_type().to_string() => event
            .decode_data::<v1::AddOnPlacementScoreReport>("AddOnPlacementScoreReport")
            .map_err(|e| e.to_string())
            .and_then(|r| {
                flotilla_hub::placement::scores::validate_report(&r).map_err(|e| e.to_string())
            }),
        t if t == flotilla_bus::works::resync_request_type().to_string() => event
            .decode_data::<v1::SpecResyncRequest>("SpecResyncRequest")
            .map(drop)
            .map_err(|e| e.to_string()),
        t if t == flotilla_bus::works::status_type().to_string() => event
            .decode_data::<v1::WorkStatusReport>("WorkStatusReport")
            .map(drop)
            .map_err(|e| e.to_string()),
        t if t.starts_with("io.flotilla.work.v1.manifestwork.spec.") => event
            .decode_data::<v1::ManifestWork>("ManifestWork")
            .map_err(|e| e.to_string())
            .and_then(|w| {
                let errors = flotilla_api::work::validate(&w);
                if errors.is_empty() {
                    Ok(())
                } else {
                    Err(errors.join("; "))
                }
            }),
        t if t == flotilla_bus::envelope::types::lease_renewal().to_string() => event
            .decode_data::<v1::LeaseRenewal>("LeaseRenewal")
            .map(drop)
            .map_err(|e| e.to_string()),
        t if t == flotilla_bus::envelope::types::proxy_request().to_string() => event
            .decode_data::<v1::ProxyRequest>("ProxyRequest")
            .map(drop)
            .map_err(|e| e.to_string()),
        t if t == flotilla_bus::envelope::types::registration_response().to_string() => event
            .decode_data::<v1::RegistrationResponse>("RegistrationResponse")
            .map(drop)
            .map_err(|e| e.to_string()),
        other => Err(format!("no receiver takes events of type {other}")),
    };
    decoded.into()
}

/// `flotilla apply -f`: multi-document OCM YAML.
fn yaml(bytes: &[u8]) -> Outcome {
    let results = flotilla_api::ocm::parse_documents(&text(bytes));
    errors(
        results
            .into_iter()
            .filter_map(|r| r.err().map(|e| e.to_string()))
            .collect(),
    )
}

fn selector(bytes: &[u8]) -> Outcome {
    flotilla_api::selector::parse(&text(bytes)).map(drop).into()
}

fn claim_selector(bytes: &[u8]) -> Outcome {
    flotilla_api::selector::parse_claims(&text(bytes))
        .map(drop)
        .into()
}

/// A feedback rule's path (`ApplyWork`, `flotilla apply -f`): parsed, evaluated on a Deployment,
/// and its canonical form must parse back to the same path.
fn jsonpath(bytes: &[u8]) -> Outcome {
    use flotilla_api::jsonpath::parse;
    let path = match parse(&text(bytes)) {
        Ok(p) => p,
        Err(e) => return Outcome::Rejected(e.to_string()),
    };
    let canonical = path.to_string();
    match parse(&canonical) {
        Ok(again) => assert_eq!(
            again, path,
            "canonical form {canonical:?} reads back differently"
        ),
        Err(e) => panic!("canonical form {canonical:?} does not parse: {e}"),
    }
    let _ = path.eval(&crate::seeds::deployment_json());
    Outcome::Accepted
}

fn quantity(bytes: &[u8]) -> Outcome {
    flotilla_placement::quantity::parse_quantity(&text(bytes))
        .map(drop)
        .into()
}

/// The body of `WorkService/ApplyWork`, decoded and validated as the API does.
fn grpc_manifest_work(bytes: &[u8]) -> Outcome {
    match v1::ManifestWork::decode(bytes) {
        Ok(w) => errors(flotilla_api::work::validate(&w)),
        Err(e) => Outcome::Rejected(e.to_string()),
    }
}

/// The body of `PlacementService/ApplyPlacement`: validated and converted for the scheduler.
fn grpc_placement(bytes: &[u8]) -> Outcome {
    match v1::Placement::decode(bytes) {
        Ok(p) => match flotilla_hub::placement::convert::placement(&p) {
            Ok(_) => Outcome::Accepted,
            Err(errors) => Outcome::Rejected(
                errors
                    .iter()
                    .map(|e| e.to_string())
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
        },
        Err(e) => Outcome::Rejected(e.to_string()),
    }
}

/// The body of `ClusterSetService/ApplyClusterSet`.
fn grpc_cluster_set(bytes: &[u8]) -> Outcome {
    match v1::ManagedClusterSet::decode(bytes) {
        Ok(s) => flotilla_hub::clusterset::ClusterSets::validate_set(&s).into(),
        Err(e) => Outcome::Rejected(e.to_string()),
    }
}

/// The body of `PlacementService/ApplyScore`.
fn grpc_score(bytes: &[u8]) -> Outcome {
    match v1::AddOnPlacementScore::decode(bytes) {
        Ok(s) => flotilla_hub::placement::scores::validate(&s).into(),
        Err(e) => Outcome::Rejected(e.to_string()),
    }
}

/// A manifest's identity read from its bytes, as the hub reads every manifest it is given (a
/// fast path that skips the object's tree): it must be exactly what the parsed tree gives.
fn manifest_id(bytes: &[u8]) -> Outcome {
    use flotilla_api::work::{ManifestIdError, manifest_id, read_manifest_id};
    let fast = read_manifest_id(bytes).map_err(|e| match e {
        ManifestIdError::Json(e) => e.to_string(),
        ManifestIdError::Id(e) => e,
    });
    let slow = serde_json::from_slice::<serde_json::Value>(bytes)
        .map_err(|e| e.to_string())
        .and_then(|v| manifest_id(&v));
    assert_eq!(
        fast,
        slow,
        "read_manifest_id disagrees on {:?}",
        text(bytes)
    );
    fast.map(|_| ()).into()
}

fn strings(items: &[&str]) -> Vec<Vec<u8>> {
    items.iter().map(|s| s.as_bytes().to_vec()).collect()
}

/// Every target.
pub const TARGETS: &[Target] = &[
    Target {
        name: "envelope",
        run: envelope,
        seeds: crate::seeds::events,
    },
    Target {
        name: "yaml",
        run: yaml,
        seeds: || {
            vec![
                crate::seeds::HELLO_WORK.as_bytes().to_vec(),
                crate::seeds::DOCUMENTS.as_bytes().to_vec(),
            ]
        },
    },
    Target {
        name: "selector",
        run: selector,
        seeds: || strings(crate::seeds::SELECTORS),
    },
    Target {
        name: "claim-selector",
        run: claim_selector,
        seeds: || strings(crate::seeds::CLAIM_SELECTORS),
    },
    Target {
        name: "jsonpath",
        run: jsonpath,
        seeds: || strings(crate::seeds::JSONPATHS),
    },
    Target {
        name: "quantity",
        run: quantity,
        seeds: || strings(crate::seeds::QUANTITIES),
    },
    Target {
        name: "manifest-id",
        run: manifest_id,
        seeds: || strings(crate::seeds::MANIFESTS),
    },
    Target {
        name: "grpc.ManifestWork",
        run: grpc_manifest_work,
        seeds: || vec![crate::seeds::hello_work().encode_to_vec()],
    },
    Target {
        name: "grpc.Placement",
        run: grpc_placement,
        seeds: || {
            flotilla_api::ocm::parse_documents(crate::seeds::DOCUMENTS)
                .into_iter()
                .filter_map(|d| match d {
                    Ok(flotilla_api::ocm::Document::Placement(p)) => Some(p.encode_to_vec()),
                    _ => None,
                })
                .collect()
        },
    },
    Target {
        name: "grpc.ManagedClusterSet",
        run: grpc_cluster_set,
        seeds: || {
            flotilla_api::ocm::parse_documents(crate::seeds::DOCUMENTS)
                .into_iter()
                .filter_map(|d| match d {
                    Ok(flotilla_api::ocm::Document::ClusterSet(s)) => Some(s.encode_to_vec()),
                    _ => None,
                })
                .collect()
        },
    },
    Target {
        name: "grpc.AddOnPlacementScore",
        run: grpc_score,
        seeds: || {
            flotilla_api::ocm::parse_documents(crate::seeds::DOCUMENTS)
                .into_iter()
                .filter_map(|d| match d {
                    Ok(flotilla_api::ocm::Document::Score(s)) => Some(s.encode_to_vec()),
                    _ => None,
                })
                .collect()
        },
    },
];
