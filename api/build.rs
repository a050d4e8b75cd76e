//! Compiles `../proto` with protox (pure Rust, no system `protoc`) and generates prost/tonic code
//! plus the encoded file descriptor set used by gRPC server reflection.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../proto");
    let files = [
        "io/cloudevents/v1/cloudevents.proto",
        "flotilla/v1/meta.proto",
        "flotilla/v1/cluster.proto",
        "flotilla/v1/work.proto",
        "flotilla/v1/events.proto",
        "flotilla/v1/cluster_service.proto",
        "flotilla/v1/clusterset_service.proto",
        "flotilla/v1/work_service.proto",
        "flotilla/v1/placement.proto",
        "flotilla/v1/placement_service.proto",
        "flotilla/v1/replicaset.proto",
        "flotilla/v1/replicaset_service.proto",
        "flotilla/v1/addon.proto",
        "flotilla/v1/addon_service.proto",
        "flotilla/v1/route.proto",
        "flotilla/v1/forward.proto",
        "flotilla/v1/policy.proto",
        "flotilla/v1/policy_service.proto",
        "flotilla/v1/tunnel.proto",
        "flotilla/v1/serviceaccount.proto",
        "flotilla/v1/serviceaccount_service.proto",
        "flotilla/v1/importpolicy.proto",
        "flotilla/v1/importpolicy_service.proto",
        "flotilla/v1/mirrorpeer.proto",
        "flotilla/v1/mirrorpeer_service.proto",
    ];
    for file in &files {
        println!("cargo:rerun-if-changed={}", root.join(file).display());
    }
    let fds = protox::compile(files, [&root])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out.join("flotilla_descriptor.bin"),
        prost::Message::encode_to_vec(&fds),
    )?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        // These carry credentials: their Debug (api/src/redacted.rs) prints `<redacted>`.
        .skip_debug([
            "flotilla.v1.ManagedServiceAccountToken",
            "flotilla.v1.TunnelRequest",
        ])
        .compile_fds(fds)?;
    Ok(())
}
