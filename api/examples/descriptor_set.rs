//! Writes the descriptor set of a proto directory (the layout of `proto/`: `flotilla/v1` and
//! `io/cloudevents/v1`), source info stripped, to stdout — how `proto/released/vX.Y.binpb` is
//! made at a release (proto/released/README.md):
//!
//! ```text
//! git archive vX.Y proto | tar -x -C /tmp/release
//! cargo run -p flotilla-api --example descriptor_set -- /tmp/release/proto > proto/released/vX.Y.binpb
//! ```

use prost::Message;
use std::io::Write;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = std::env::args()
        .nth(1)
        .ok_or("usage: descriptor_set PROTO_DIR > FILE.binpb")?;
    let root = std::path::PathBuf::from(root);
    let mut files = Vec::new();
    for dir in ["io/cloudevents/v1", "flotilla/v1"] {
        for entry in std::fs::read_dir(root.join(dir))? {
            let name = entry?.file_name().to_string_lossy().into_owned();
            if name.ends_with(".proto") {
                files.push(format!("{dir}/{name}"));
            }
        }
    }
    files.sort();
    let mut set = protox::compile(files, [&root])?;
    for file in &mut set.file {
        file.source_code_info = None;
    }
    std::io::stdout().write_all(&set.encode_to_vec())?;
    Ok(())
}
