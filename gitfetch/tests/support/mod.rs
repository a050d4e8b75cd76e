#![allow(dead_code)] // each test binary uses a part of the fixtures
//! Fixtures for the worker's tests: repositories and `git daemon` from the testkit
//! ([`flotilla_testkit::git`]), and the real `flotilla-git-fetch` binary run through
//! [`flotilla_gitfetch::launch::Worker`].

use std::{path::Path, time::Duration};

#[allow(unused_imports)] // not every test binary serves over git://
pub use flotilla_testkit::git::{Daemon, Repo};

use flotilla_gitfetch::{
    launch::{Finished, LaunchError, Worker},
    protocol::{Credential, Credentials, FetchRequest, Limits, SshKey, Want},
};

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    flotilla_testkit::free_port()
}

/// The worker under test, with a short deadline.
pub fn worker() -> Worker {
    // Set for this crate's own tests; other crates including this file run the worker in-process.
    let Some(binary) = option_env!("CARGO_BIN_EXE_flotilla-git-fetch") else {
        panic!("only flotilla-gitfetch's own tests have the worker binary");
    };
    let mut w = Worker::new(binary);
    w.timeout = Duration::from_secs(20);
    w
}

/// A request for `branch` of `url` under `paths`, loopback allowed (the servers are local).
pub fn request(url: &str, want: Want, paths: &[&str]) -> FetchRequest {
    FetchRequest {
        url: url.to_owned(),
        want: Some(want),
        paths: paths.iter().map(|p| p.to_string()).collect(),
        limits: Some(Limits::default()),
        file_roots: Vec::new(),
        allow_loopback: true,
        ..Default::default()
    }
}

/// Runs one fetch into `cache`, with every await bounded.
pub async fn fetch(cache: &Path, request: &FetchRequest) -> Result<Finished, LaunchError> {
    tokio::time::timeout(Duration::from_secs(30), worker().fetch(cache, request))
        .await
        .expect("the fetch ends within 30 s")
}

pub fn main(branch: &str) -> Want {
    Want::Branch(branch.to_owned())
}

/// The Secret `default/shop-ssh` holding `private_key` and `known_hosts`.
pub fn credentials(private_key: Vec<u8>, known_hosts: String) -> Credentials {
    Credentials {
        source: "Secret default/shop-ssh".into(),
        credential: Some(Credential::Ssh(SshKey {
            private_key,
            known_hosts,
        })),
    }
}

/// A request for `main` of `url` under `apps/*`, signed in with `auth`.
pub fn ssh_request(url: &str, auth: Credentials) -> FetchRequest {
    let mut r = request(url, main("main"), &["apps/*"]);
    r.credentials = Some(auth);
    r
}
