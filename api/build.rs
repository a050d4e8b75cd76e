//! Compiles `../proto` with protox (pure Rust, no system `protoc`) and generates prost/tonic code
//! plus the encoded file descriptor set used by gRPC server reflection.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../proto");
    // Every .proto under these folders: a new family's messages and service are compiled by
    // adding their files, with no list to keep here.
    let mut files = Vec::new();
    for dir in ["io/cloudevents/v1", "flotilla/v1"] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
        for entry in std::fs::read_dir(root.join(dir))? {
            let name = entry?
                .file_name()
                .into_string()
                .map_err(|n| format!("{n:?}: not UTF-8"))?;
            if name.ends_with(".proto") {
                files.push(format!("{dir}/{name}"));
            }
        }
    }
    files.sort();
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
