//! This build's protobuf wire and store against the last release's (issue 49 §6.5): no field,
//! enum value, message or RPC a released hub, agent or CLI reads is renumbered, retyped or
//! removed. The release's descriptor set is `proto/released/` (replaced only at a release).

use flotilla_api::compat::{RULE, breaking};
use prost::Message;
use prost_types::FileDescriptorSet;

/// The release this build must stay wire-compatible with.
const RELEASED: &[u8] = include_bytes!("../../proto/released/v0.1.binpb");

#[test]
fn this_build_reads_and_writes_the_last_releases_wire() {
    let old = FileDescriptorSet::decode(RELEASED).expect("the released set decodes");
    let new = FileDescriptorSet::decode(flotilla_api::FILE_DESCRIPTOR_SET).unwrap();
    assert!(
        old.file.iter().any(|f| f.package() == "flotilla.v1"),
        "the released set holds flotilla.v1"
    );
    let found = breaking(&old, &new);
    assert!(
        found.is_empty(),
        "breaking changes against release 0.1:\n  {}\n{RULE}",
        found
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n  ")
    );
}
