//! `flotilla-git-fetch`: one Git fetch per process, started by the hub. It sets its resource
//! bounds first, reads one `FetchRequest` (protobuf) from stdin, writes one `FetchResult` to
//! stdout, and exits 0 (answer), 2 (refused by a limit), 3 (transport), 4 (request), 5 (not
//! found); anything else is a crash the hub reports. Nothing of the request is ever logged.

use std::{
    io::{Read, Write},
    path::PathBuf,
    process::ExitCode,
};

use flotilla_gitfetch::{
    protocol::{ErrorKind, FetchRequest},
    worker::{self, rlimit::Bounds},
};
use prost::Message;

/// The largest request read from stdin.
const MAX_REQUEST_BYTES: u64 = 1024 * 1024;

fn main() -> ExitCode {
    let (cache, bounds) = match flags() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("flotilla-git-fetch: {e}");
            eprintln!(
                "usage: flotilla-git-fetch --cache DIR [--memory-bytes N] [--cpu-seconds N] [--file-bytes N] < request"
            );
            return ExitCode::from(64);
        }
    };
    if let Err(e) = worker::rlimit::apply(&bounds) {
        eprintln!("flotilla-git-fetch: could not set resource limits: {e}");
        return ExitCode::from(70);
    }
    let mut input = Vec::new();
    if let Err(e) = std::io::stdin()
        .take(MAX_REQUEST_BYTES)
        .read_to_end(&mut input)
    {
        eprintln!("flotilla-git-fetch: reading the request: {e}");
        return ExitCode::from(70);
    }
    let result = match FetchRequest::decode(input.as_slice()) {
        Ok(request) => worker::run(&request, &cache),
        Err(e) => flotilla_gitfetch::protocol::FetchResult::failed(
            ErrorKind::Request,
            format!("the request does not decode: {e}"),
        ),
    };
    let code = result
        .error
        .as_ref()
        .map(|e| {
            ErrorKind::try_from(e.kind)
                .unwrap_or(ErrorKind::Unspecified)
                .exit_code()
        })
        .unwrap_or(0);
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout
        .write_all(&result.encode_to_vec())
        .and_then(|()| stdout.flush())
    {
        eprintln!("flotilla-git-fetch: writing the answer: {e}");
        return ExitCode::from(70);
    }
    ExitCode::from(code as u8)
}

fn flags() -> Result<(PathBuf, Bounds), String> {
    let mut cache = None;
    let mut bounds = Bounds::default();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = || {
            value
                .parse::<u64>()
                .map_err(|e| format!("{flag} {value:?}: {e}"))
        };
        match flag.as_str() {
            "--cache" => cache = Some(PathBuf::from(&value)),
            "--memory-bytes" => bounds.memory_bytes = number()?,
            "--cpu-seconds" => bounds.cpu_seconds = number()?,
            "--file-bytes" => bounds.file_bytes = number()?,
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok((cache.ok_or("--cache is required")?, bounds))
}
