//! Every protobuf bucket the hub keeps, with what its values decode as (pure): one list for
//! `flotilla-hub doctor` and its tests. A bucket added without a row here is caught by the
//! doctor's test that lists the buckets a started hub creates.

use flotilla_api::v1;
use prost::Message;

/// Decodes a value of one bucket, saying what is wrong with it.
pub type Decoder = fn(&[u8]) -> Result<(), prost::DecodeError>;

fn as_type<M: Message + Default>(value: &[u8]) -> Result<(), prost::DecodeError> {
    M::decode(value).map(|_| ())
}

/// `(bucket, decoder)` of every protobuf bucket.
pub const BUCKETS: &[(&str, Decoder)] = &[
    (crate::store::CLUSTERS, as_type::<v1::ManagedCluster>),
    (crate::store::WORKS, as_type::<v1::ManifestWork>),
    (crate::store::CLUSTERSETS, as_type::<v1::ManagedClusterSet>),
    (
        crate::store::BINDINGS,
        as_type::<v1::ManagedClusterSetBinding>,
    ),
    (
        crate::placement::PLACEMENTS_BUCKET,
        as_type::<v1::Placement>,
    ),
    (
        crate::placement::DECISIONS_BUCKET,
        as_type::<v1::PlacementDecision>,
    ),
    (
        crate::placement::SCORES_BUCKET,
        as_type::<v1::AddOnPlacementScore>,
    ),
    (
        crate::replicaset::BUCKET,
        as_type::<v1::ManifestWorkReplicaSet>,
    ),
    (
        crate::addon::BUCKET_ADDONS,
        as_type::<v1::ClusterManagementAddOn>,
    ),
    (
        crate::addon::BUCKET_CLUSTER_ADDONS,
        as_type::<v1::ManagedClusterAddOn>,
    ),
    (crate::addon::BUCKET_TEMPLATES, as_type::<v1::AddOnTemplate>),
    (
        crate::addon::BUCKET_CONFIGS,
        as_type::<v1::AddOnDeploymentConfig>,
    ),
    (crate::policy::POLICIES, as_type::<v1::Policy>),
    (crate::policy::BINDINGS, as_type::<v1::PlacementBinding>),
    (crate::policy::SETS, as_type::<v1::PolicySet>),
    (crate::policy::RULES, as_type::<v1::PlacementRule>),
    (crate::policy::STATUS, as_type::<v1::PolicyClusterRecord>),
    (
        crate::serviceaccount::ACCOUNTS,
        as_type::<v1::ManagedServiceAccount>,
    ),
    (
        crate::serviceaccount::TOKENS,
        as_type::<v1::ServiceAccountTokenRecord>,
    ),
    (
        crate::importpolicy::POLICIES,
        as_type::<v1::ClusterImportPolicy>,
    ),
    (crate::importpolicy::RECORDS, as_type::<v1::ImportRecord>),
    (crate::mirrorpeer::PEERS, as_type::<v1::MirrorPeer>),
    (crate::mirrorpeer::SECRETS, as_type::<v1::SealedPeerSecret>),
    (crate::mirrorpeer::KEYS, as_type::<v1::PeerKeyRecord>),
    (crate::gitops::BUCKET, as_type::<v1::GitRepo>),
    (crate::recovery::ORPHANS, as_type::<v1::Orphan>),
    (crate::recovery::HUBMETA, as_type::<v1::RecoveryWindow>),
];

/// Buckets the hub keeps that are not protobuf (JSON leases, members, revocations): the doctor
/// leaves them to their own readers, which skip what they cannot read.
pub const OTHER_BUCKETS: &[&str] = &[
    crate::ha::lease::LEASES,
    crate::ha::lease::MEMBERS,
    crate::security::revocations::BUCKET,
];

/// The decoder of `bucket`.
pub fn decoder(bucket: &str) -> Option<Decoder> {
    BUCKETS.iter().find(|(b, _)| *b == bucket).map(|(_, d)| *d)
}
