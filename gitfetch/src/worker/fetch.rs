//! Network fetches with gix: a handshake and ref listing over our own connection (so every
//! byte is counted and every address checked) — a TCP stream for `git://`, our HTTP client
//! ([`super::http`]) for `http://` and `https://`, an in-process SSH channel ([`super::ssh`])
//! for `ssh://` — then a depth-1 fetch of the one commit into a bare cache repository opened
//! in isolation (no user or system configuration, no hooks).
//! Credentials come only from the request, through our own callback: gix's default would run
//! credential helpers or prompt. Every gix call of the network path lives here.

use std::{net::TcpStream, num::NonZeroU32, path::Path, sync::atomic::AtomicBool};

use gix::{
    ObjectId,
    credentials::{helper::Action, protocol::Outcome},
    protocol::{
        fetch::refmap::{Source, SpecIndex},
        handshake::Ref,
        transport::client::{blocking_io::Transport, git},
    },
    remote::{Direction, fetch::Shallow},
};

use super::{
    Failure, http,
    net::{self, Counted, Received},
    ssh,
};
use crate::protocol::{Credential, ErrorKind, FetchRequest, Limits, Want};

/// The local ref a fetch writes (the cache repository holds nothing else).
pub const HEAD_REF: &str = "refs/flotilla/head";

/// The default port of `git://`.
const GIT_PORT: u16 = 9418;

/// A fetched commit and the repository holding it.
pub struct Fetched {
    /// The cache repository.
    pub repo: gix::Repository,
    /// The commit the branch or revision resolved to.
    pub commit: ObjectId,
    /// Bytes received from the server.
    pub bytes_received: u64,
}

/// The refspec that maps what is wanted onto [`HEAD_REF`].
pub fn refspec(want: &Want) -> Result<String, Failure> {
    match want {
        Want::Branch(branch) => {
            check_ref_name(&format!("refs/heads/{branch}"), "branch", branch)?;
            Ok(format!("+refs/heads/{branch}:{HEAD_REF}"))
        }
        Want::Revision(rev) if is_full_hex(rev) => Ok(format!("{rev}:{HEAD_REF}")),
        Want::Revision(tag) => {
            check_ref_name(&format!("refs/tags/{tag}"), "revision", tag)?;
            Ok(format!("+refs/tags/{tag}:{HEAD_REF}"))
        }
    }
}

fn check_ref_name(full: &str, field: &str, value: &str) -> Result<(), Failure> {
    gix::validate::reference::name(full.into())
        .map(|_| ())
        .map_err(|e| Failure::request(format!("{field} {value:?}: not a valid ref name: {e}")))
}

fn is_full_hex(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Opens the cache repository, or creates it bare, in isolation either way.
pub fn open_cache(cache: &Path) -> Result<gix::Repository, Failure> {
    let failed = |e: gix::Error| {
        Failure::transport(format!(
            "cache repository {}: {}",
            cache.display(),
            chain(&e)
        ))
    };
    std::fs::create_dir_all(cache)
        .map_err(|e| Failure::transport(format!("cache repository {}: {e}", cache.display())))?;
    if cache.join("HEAD").is_file() {
        gix::open_opts(cache, gix::open::Options::isolated()).map_err(failed)
    } else {
        gix::ThreadSafeRepository::init_opts(
            cache,
            gix::create::Kind::Bare,
            gix::create::Options::default(),
            gix::open::Options::isolated(),
        )
        .map(|r| r.to_thread_local())
        .map_err(failed)
    }
}

/// Resolves and (unless `list_only`) fetches the wanted commit from a `git://`, `http://`,
/// `https://` or `ssh://` (or scp-like) URL.
pub fn fetch(
    cache: &Path,
    url: &gix::Url,
    want: &Want,
    limits: &Limits,
    request: &FetchRequest,
) -> Result<Fetched, Failure> {
    let spec = refspec(want)?;
    let repo = open_cache(cache)?;
    let received = Received::default();
    let on = Fetch {
        repo,
        url,
        spec: &spec,
        want,
        limits,
        request,
        received: received.clone(),
    };
    match &url.scheme {
        gix::url::Scheme::Git => {
            let transport = connect_daemon(url, request, limits, received)?;
            on.run(transport, || None)
        }
        gix::url::Scheme::Ssh => {
            let (transport, remote) = ssh::connect(url, request, limits, received)?;
            on.run(transport, || remote.failure(&request.url))
        }
        gix::url::Scheme::Http | gix::url::Scheme::Https => {
            let (remote, client) = http::Remote::new(
                &request.url,
                &request.ca_bundle,
                request.allow_loopback,
                received,
                limits.max_fetch_bytes,
                request.credentials.as_ref().map(|c| c.source.clone()),
            )?;
            let transport = gix::protocol::transport::client::blocking_io::http::connect_http(
                remote,
                url.clone(),
                gix::protocol::transport::Protocol::V2,
                false,
            );
            on.run(transport, || client.failure())
        }
        other => Err(Failure::request(format!(
            "repo {:?}: the {} transport is not built here",
            request.url,
            other.as_str()
        ))),
    }
}

/// One network fetch, whatever its transport.
struct Fetch<'a> {
    repo: gix::Repository,
    url: &'a gix::Url,
    spec: &'a str,
    want: &'a Want,
    limits: &'a Limits,
    request: &'a FetchRequest,
    received: Received,
}

impl Fetch<'_> {
    /// Lists the ref, and fetches its commit at depth 1 unless only listing. `diagnose` is the
    /// transport's own account of a failure (the HTTP client's recorded failure, what an SSH
    /// server wrote to stderr), which says more than gix's chain of causes.
    fn run<T: Transport>(
        self,
        transport: T,
        diagnose: impl Fn() -> Option<Failure>,
    ) -> Result<Fetched, Failure> {
        let Fetch {
            repo,
            url,
            spec,
            want,
            limits,
            request,
            received,
        } = self;
        let failed = |what: &str, e: gix::Error| {
            if received.get() > limits.max_fetch_bytes {
                Failure::refused(net::TransferCapExceeded(limits.max_fetch_bytes).to_string())
            } else if let Some(f) = diagnose() {
                f
            } else {
                Failure::transport(format!("{}: {what}: {}", request.url, chain(&e)))
            }
        };
        let remote = repo
            .remote_at(url.clone())
            .and_then(|r| r.with_refspecs([spec], Direction::Fetch))
            // No implicit `refs/tags/*`: the cache holds the one commit asked for.
            .map(|r| r.with_fetch_tags(gix::remote::fetch::Tags::None))
            .map_err(|e| Failure::request(format!("refspec {spec}: {}", chain(&e))))?;
        // Always our callback: gix's default would run credential helpers or prompt.
        let identity = identity(request);
        let connection = remote
            .to_connection_with_transport(transport)
            .with_credentials(move |action| match action {
                Action::Get(context) => Ok(identity.clone().map(|identity| Outcome {
                    identity,
                    next: context.into(),
                })),
                Action::Store(_) | Action::Erase(_) => Ok(None),
            });
        let prepare = connection
            .prepare_fetch(gix::progress::Discard, Default::default())
            .map_err(|e| failed("listing refs", e))?;
        let ref_map = prepare.ref_map();
        if ref_map.remote_refs.len() > limits.max_refs as usize {
            return Err(Failure::refused(format!(
                "the server advertised {} refs; at most {}",
                ref_map.remote_refs.len(),
                limits.max_refs
            )));
        }
        let ours = ref_map
            .mappings
            .iter()
            .find(|m| m.spec_index == SpecIndex::ExplicitInRemote(0));
        let advertised = ours.and_then(|m| match &m.remote {
            Source::Ref(r) => peeled(r),
            Source::ObjectId(id) => Some(id.to_owned()),
        });
        let Some(advertised) = advertised else {
            return Err(not_found(want));
        };
        if request.list_only {
            drop(prepare);
            return Ok(Fetched {
                repo,
                commit: advertised,
                bytes_received: received.get(),
            });
        }
        prepare
            .with_shallow(Shallow::DepthAtRemote(NonZeroU32::MIN))
            .receive(gix::progress::Discard, &AtomicBool::new(false))
            .map_err(|e| failed("fetching", e))?;
        let commit = repo
            .find_reference(HEAD_REF)
            .map_err(|e| Failure::transport(format!("after the fetch: {}", chain(&e))))?
            .peel_to_commit()
            .map_err(|e| {
                Failure::refused(format!("{want:?} does not name a commit: {}", chain(&e)))
            })?
            .id;
        Ok(Fetched {
            repo,
            commit,
            bytes_received: received.get(),
        })
    }
}

/// The basic-auth identity of a request's credentials (an SSH key is not one).
fn identity(request: &FetchRequest) -> Option<gix::sec::identity::Account> {
    match request.credentials.as_ref()?.credential.as_ref()? {
        Credential::Basic(b) => Some(gix::sec::identity::Account {
            username: b.username.clone(),
            password: b.password.clone(),
            oauth_refresh_token: None,
        }),
        Credential::Ssh(_) => None,
    }
}

/// A `git://` connection: the counted read half and the write half of one TCP stream.
type DaemonConnection = git::blocking_io::Connection<Counted<TcpStream>, TcpStream>;

/// Opens a checked TCP connection to a `git://` server, its read half counted against the
/// transfer cap, as a gix transport.
fn connect_daemon(
    url: &gix::Url,
    request: &FetchRequest,
    limits: &Limits,
    received: Received,
) -> Result<DaemonConnection, Failure> {
    let host = url
        .host()
        .ok_or_else(|| Failure::request(format!("repo {:?}: no host", request.url)))?;
    let port = url.port.unwrap_or(GIT_PORT);
    let stream = net::connect(host, port, request.allow_loopback)?;
    let write = stream
        .try_clone()
        .map_err(|e| Failure::transport(format!("{host}:{port}: {e}")))?;
    let read = Counted::new(stream, received, limits.max_fetch_bytes);
    Ok(git::blocking_io::Connection::new(
        read,
        write,
        gix::protocol::transport::Protocol::V2,
        url.path.clone(),
        Some((host.to_owned(), url.port)),
        git::ConnectMode::Daemon,
        false,
    ))
}

/// The commit a ref points at, through an annotated tag.
fn peeled(r: &Ref) -> Option<ObjectId> {
    match r {
        Ref::Peeled { object, .. } | Ref::Direct { object, .. } | Ref::Symbolic { object, .. } => {
            Some(*object)
        }
        Ref::Unborn { .. } => None,
    }
}

fn not_found(want: &Want) -> Failure {
    let what = match want {
        Want::Branch(b) => format!("branch {b:?}"),
        Want::Revision(r) => format!("revision {r:?}"),
    };
    Failure::new(
        ErrorKind::NotFound,
        format!("{what} was not found on the server"),
    )
}

/// An error with its causes, `: `-separated.
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}
