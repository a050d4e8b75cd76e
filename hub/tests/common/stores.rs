//! Stores on disk for the backup, restore and upgrade tests (and `examples/record_store.rs`):
//! a JetStream server whose store is a directory the test chooses, on a port it chooses (a
//! restore's target takes the address the agents know), and a directory copied whole.

use flotilla_testkit::NatsServer;
use std::path::Path;

/// A JetStream nats-server of `binary` on `port`, its store under `dir` (created).
pub fn jetstream_server(binary: &Path, dir: &Path, port: u16) -> NatsServer {
    std::fs::create_dir_all(dir).expect("creating the server's directory");
    let config = dir.join("nats-server.conf");
    std::fs::write(
        &config,
        format!(
            "listen: 127.0.0.1:{port}\njetstream {{ store_dir: {:?} }}\n",
            dir.join("js").display().to_string()
        ),
    )
    .expect("writing the server's configuration");
    NatsServer::start_from_config_with(binary, config, port)
}

/// Copies `from` into `to`, subdirectories included (permissions kept).
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("creating the copy");
    for entry in std::fs::read_dir(from).expect("reading the directory") {
        let entry = entry.expect("a directory entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("its type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copying a file");
        }
    }
}
