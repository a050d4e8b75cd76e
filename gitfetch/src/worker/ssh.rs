//! `ssh://` and scp-like (`git@host:org/repo.git`) repositories, in-process with russh: no `ssh`
//! program, no `~/.ssh` (its config, agent or known_hosts), nothing a URL could smuggle onto a
//! command line. The connection is our own ([`super::net::connect`]: every resolved address
//! checked), the server's host key must be on a line of the GitRepo's `known_hosts`
//! ([`crate::known_hosts`]: no trust on first use), the key authenticates, and the channel runs
//! `git-upload-pack '<path>'` (asking for protocol v2 with `GIT_PROTOCOL`; a server that does not
//! accept the variable answers v0, which gix takes). The channel becomes gix's `git::Connection`
//! in process mode, its read half counted against the transfer cap, as `git://`'s TCP stream is.
//!
//! The blocking halves drive one current-thread runtime: the session task runs while a read or a
//! write waits, each bounded by [`IO_TIMEOUT`]. What the server writes to stderr (`fatal: … does
//! not appear to be a git repository`) is kept, cut, for the failure message.

use std::{
    borrow::Cow,
    io::{self, Read, Write},
    sync::{Arc, Mutex},
    time::Duration,
};

use gix::protocol::transport::client::git;
use russh::{
    ChannelMsg, ChannelReadHalf, ChannelWriteHalf,
    client::{self, Handle},
    keys::{Algorithm, PrivateKey, PrivateKeyWithHashAlg, PublicKeyOrCertificate},
};

use super::{
    Failure,
    net::{self, CONNECT_TIMEOUT, Counted, IO_TIMEOUT, Received},
};
use crate::{
    known_hosts::{self, Entry, Verdict},
    protocol::{Credential, FetchRequest, Limits, SshKey},
};

/// The user name when the URL names none (GitHub, GitLab, Gitea and Bitbucket all use `git`).
pub const DEFAULT_USER: &str = "git";
/// Bytes of the server's stderr kept for the failure message.
const STDERR_KEPT: usize = 2048;
/// Bytes of stderr a server may send at all (a server trickling stderr is not sending a pack).
const STDERR_MAX: usize = 64 * 1024;

/// An SSH repository's connection, as gix reads and writes it.
pub type Connection = git::blocking_io::Connection<Counted<Reader>, Writer>;

/// What the server said on stderr and how the remote command ended, read after a failure.
#[derive(Debug, Clone, Default)]
pub struct Remote(Arc<Mutex<RemoteState>>);

#[derive(Debug, Default)]
struct RemoteState {
    stderr: Vec<u8>,
    stderr_bytes: usize,
    exit: Option<u32>,
    refused_command: bool,
}

impl Remote {
    /// Why the fetch failed, as the server put it, when it said anything.
    pub fn failure(&self, url: &str) -> Option<Failure> {
        let state = self.0.lock().ok()?;
        let said = String::from_utf8_lossy(&state.stderr);
        let said = said.trim();
        if state.refused_command {
            return Some(Failure::transport(format!(
                "{url}: the server refused to run git-upload-pack"
            )));
        }
        if said.is_empty() {
            return state.exit.filter(|code| *code != 0).map(|code| {
                Failure::transport(format!(
                    "{url}: the server ended git-upload-pack with status {code}"
                ))
            });
        }
        let not_found = said.contains("does not appear to be a git repository")
            || said.contains("not found")
            || said.contains("No such file");
        let message = format!("{url}: the server said: {said:?}");
        Some(if not_found {
            Failure::new(crate::protocol::ErrorKind::NotFound, message)
        } else {
            Failure::transport(message)
        })
    }
}

/// Connects, checks the host key, authenticates and starts `git-upload-pack` for `url`.
pub fn connect(
    url: &gix::Url,
    request: &FetchRequest,
    limits: &Limits,
    received: Received,
) -> Result<(Connection, Remote), Failure> {
    let shown = &request.url;
    let key = ssh_key(request)?;
    let known = known_hosts::parse(&key.known_hosts)
        .map_err(|e| Failure::request(format!("{}: {e}", credentials_source(request))))?;
    if known.is_empty() {
        return Err(Failure::request(format!(
            "{shown}: {}: no known_hosts line: add the server's host key (ssh-keyscan -p PORT HOST) \
             as known_hosts in the Secret (there is no trust on first use)",
            credentials_source(request)
        )));
    }
    let private = private_key(request, key)?;
    let host = url
        .host()
        .ok_or_else(|| Failure::request(format!("repo {shown:?}: no host")))?
        .to_owned();
    let port = url.port.unwrap_or(known_hosts::DEFAULT_PORT);
    let user = url.user().unwrap_or(DEFAULT_USER).to_owned();
    let command = upload_pack_command(&url.path.to_string())
        .map_err(|why| Failure::request(format!("repo {shown:?}: {why}")))?;

    let stream = net::connect(&host, port, request.allow_loopback)?;
    stream
        .set_nonblocking(true)
        .map_err(|e| Failure::transport(format!("{host}:{port}: {e}")))?;
    let rt = Arc::new(
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Failure::transport(format!("the worker's runtime: {e}")))?,
    );
    let checker = HostCheck {
        name: known_hosts::host_name(&host, port),
        entries: known,
        refusal: Arc::default(),
    };
    let refusal = checker.refusal.clone();
    let remote = Remote::default();
    let opened = rt.block_on(async {
        tokio::time::timeout(
            CONNECT_TIMEOUT * 2,
            open(stream, checker, user, private, &command),
        )
        .await
    });
    let (session, channel) = match opened {
        Err(_) => {
            return Err(Failure::transport(format!(
                "{host}:{port}: the SSH handshake did not finish within {:?}",
                CONNECT_TIMEOUT * 2
            )));
        }
        Ok(Err(e)) => {
            // The host check's own words say more than russh's "unknown key".
            let refused = refusal.lock().ok().and_then(|r| r.clone());
            return Err(refused.unwrap_or_else(|| e.into_failure(&host, port)));
        }
        Ok(Ok(opened)) => opened,
    };
    let (read, write) = channel.split();
    let reader = Reader {
        rt: rt.clone(),
        half: read,
        pending: Vec::new(),
        at: 0,
        done: false,
        remote: remote.clone(),
    };
    let writer = Writer {
        rt,
        half: write,
        _session: session,
    };
    let connection = git::blocking_io::Connection::new(
        Counted::new(reader, received, limits.max_fetch_bytes),
        writer,
        gix::protocol::transport::Protocol::V2,
        url.path.clone(),
        None::<(String, Option<u16>)>,
        git::ConnectMode::Process,
        false,
    )
    .custom_url(Some(shown.as_str().into()));
    Ok((connection, remote))
}

fn ssh_key(request: &FetchRequest) -> Result<&SshKey, Failure> {
    match request
        .credentials
        .as_ref()
        .and_then(|c| c.credential.as_ref())
    {
        Some(Credential::Ssh(key)) => Ok(key),
        Some(Credential::Basic(_)) => Err(Failure::request(format!(
            "{}: basic-auth credentials for an ssh:// repository: use a kubernetes.io/ssh-auth \
             Secret (ssh-privatekey, known_hosts)",
            credentials_source(request)
        ))),
        None => Err(Failure::request(format!(
            "repo {:?}: an ssh:// repository needs clientSecretName: a kubernetes.io/ssh-auth \
             Secret (ssh-privatekey, known_hosts)",
            request.url
        ))),
    }
}

fn credentials_source(request: &FetchRequest) -> &str {
    request
        .credentials
        .as_ref()
        .map_or("the credentials", |c| c.source.as_str())
}

/// The Secret's private key; never quoted in an error.
fn private_key(request: &FetchRequest, key: &SshKey) -> Result<PrivateKey, Failure> {
    let source = credentials_source(request);
    let text = std::str::from_utf8(&key.private_key).map_err(|_| {
        Failure::request(format!(
            "{source}: ssh-privatekey: not text (PEM or OpenSSH armour)"
        ))
    })?;
    let private = russh::keys::decode_secret_key(text, None).map_err(|e| {
        let why = match e {
            russh::keys::Error::KeyIsEncrypted => {
                "the key is encrypted; Flotilla takes passphrase-less keys (the Secret is sealed \
                 at rest)"
                    .to_owned()
            }
            other => format!("not a private key it can use: {other}"),
        };
        Failure::request(format!("{source}: ssh-privatekey: {why}"))
    })?;
    Ok(private)
}

/// `git-upload-pack '<path>'`, quoted as git quotes it for a remote shell; `/~user/…` becomes
/// `~user/…` (the home-relative form), and a path that could pass for an option is refused.
pub fn upload_pack_command(path: &str) -> Result<String, String> {
    let path = match path.strip_prefix("/~") {
        Some(rest) => format!("~{rest}"),
        None => path.to_owned(),
    };
    if path.is_empty() {
        return Err("no repository path".into());
    }
    if path.starts_with('-') {
        return Err(format!("the path {path:?} starts with '-'"));
    }
    if path.chars().any(char::is_control) {
        return Err("a control character in the path".into());
    }
    Ok(format!("git-upload-pack {}", quote(&path)))
}

/// POSIX single-quoting as git does it (`'` → `'\''`, `!` → `'\!'`).
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        match c {
            '\'' => out.push_str("'\\''"),
            '!' => out.push_str("'\\!'"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// Why opening the session failed, before the host check's own words are consulted.
enum OpenError {
    Ssh(russh::Error),
    AuthRefused(String),
}

impl From<russh::Error> for OpenError {
    fn from(e: russh::Error) -> Self {
        OpenError::Ssh(e)
    }
}

impl OpenError {
    fn into_failure(self, host: &str, port: u16) -> Failure {
        match self {
            OpenError::AuthRefused(user) => Failure::request(format!(
                "{host}:{port}: the server refused the key for user {user:?} (is its public key \
                 a deploy key of the repository?)"
            )),
            OpenError::Ssh(e) => Failure::transport(format!("{host}:{port}: ssh: {e}")),
        }
    }
}

/// The handshake, the key, the channel and the command.
async fn open(
    stream: std::net::TcpStream,
    checker: HostCheck,
    user: String,
    private: PrivateKey,
    command: &str,
) -> Result<(Handle<HostCheck>, russh::Channel<client::Msg>), OpenError> {
    let stream = tokio::net::TcpStream::from_std(stream).map_err(russh::Error::from)?;
    let config = Arc::new(client::Config {
        inactivity_timeout: Some(IO_TIMEOUT + Duration::from_secs(5)),
        preferred: russh::Preferred {
            key: Cow::Owned(host_key_algorithms(&checker.entries, &checker.name)),
            ..Default::default()
        },
        ..Default::default()
    });
    let mut session = client::connect_stream(config, stream, checker).await?;
    let hash = session.best_supported_rsa_hash().await?.flatten();
    let auth = session
        .authenticate_publickey(
            user.clone(),
            PrivateKeyWithHashAlg::new(Arc::new(private), hash),
        )
        .await?;
    if !auth.success() {
        return Err(OpenError::AuthRefused(user));
    }
    let channel = session.channel_open_session().await?;
    channel.set_env(false, "GIT_PROTOCOL", "version=2").await?;
    channel.exec(true, command).await?;
    Ok((session, channel))
}

/// The host-key algorithms to offer: those of the `known_hosts` lines naming the host, in
/// russh's order of preference — so a server with several host keys presents the one the lines
/// know (offering ed25519 first to a server whose ecdsa key alone is listed would make a right
/// key look like a man in the middle). russh's whole list when no line names an algorithm it
/// has (the check then refuses, naming what was presented).
fn host_key_algorithms(entries: &[Entry], name: &str) -> Vec<Algorithm> {
    let known: Vec<&str> = entries
        .iter()
        .filter(|e| !e.revoked && e.names(name))
        .map(|e| e.algorithm.as_str())
        .collect();
    let all = russh::Preferred::default().key;
    let offered: Vec<Algorithm> = all
        .iter()
        .filter(|a| {
            let kind = match a {
                Algorithm::Rsa { .. } => "ssh-rsa",
                other => other.as_str(),
            };
            known.contains(&kind)
        })
        .cloned()
        .collect();
    if offered.is_empty() {
        all.into_owned()
    } else {
        offered
    }
}

/// The host-key check: the key the server presents must be on a `known_hosts` line for it.
struct HostCheck {
    name: String,
    entries: Vec<Entry>,
    /// Why the key was refused (read after the handshake fails).
    refusal: Arc<Mutex<Option<Failure>>>,
}

impl client::Handler for HostCheck {
    type Error = russh::Error;

    async fn check_server_key(
        &mut self,
        presented: &PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        let key = match presented {
            PublicKeyOrCertificate::PublicKey { key, .. } => key,
            PublicKeyOrCertificate::Certificate(_) => {
                self.refuse(Failure::refused(format!(
                    "{}: the server presented a host certificate; list its host key in \
                     known_hosts instead",
                    self.name
                )));
                return Ok(false);
            }
        };
        let algorithm = key.algorithm().to_string();
        let wire = key.to_bytes().unwrap_or_default();
        let fingerprint = key.fingerprint(Default::default());
        match known_hosts::check(&self.entries, &self.name, &algorithm, &wire) {
            Verdict::Trusted => return Ok(true),
            Verdict::Revoked { line } => self.refuse(Failure::refused(format!(
                "{}: the server's host key {fingerprint} is revoked (known_hosts line {line})",
                self.name
            ))),
            Verdict::Mismatch { known } => self.refuse(Failure::refused(format!(
                "{}: HOST KEY MISMATCH: the server presented {algorithm} {fingerprint}, not a key \
                 known_hosts lists for it ({}): a changed key or a man in the middle; refused",
                self.name,
                known.join(", ")
            ))),
            Verdict::Unknown => self.refuse(Failure::request(format!(
                "{}: no known_hosts line names this host (the server presented {algorithm} \
                 {fingerprint}); add it (ssh-keyscan) to the Secret's known_hosts",
                self.name
            ))),
        }
        Ok(false)
    }
}

impl HostCheck {
    fn refuse(&self, failure: Failure) {
        if let Ok(mut r) = self.refusal.lock() {
            *r = Some(failure);
        }
    }
}

/// The channel's read half as a blocking reader of stdout; stderr and the exit status go to
/// [`Remote`].
pub struct Reader {
    rt: Arc<tokio::runtime::Runtime>,
    half: ChannelReadHalf,
    pending: Vec<u8>,
    at: usize,
    done: bool,
    remote: Remote,
}

impl Read for Reader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // Only data restarts the clock: stderr or window messages trickled do not.
        let since = std::time::Instant::now();
        while self.at == self.pending.len() {
            if self.done {
                return Ok(0);
            }
            let left = IO_TIMEOUT.saturating_sub(since.elapsed());
            let next = self
                .rt
                .block_on(async { tokio::time::timeout(left, self.half.wait()).await })
                .map_err(|_| {
                    io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("the server sent no data for {IO_TIMEOUT:?}"),
                    )
                })?;
            self.take(next)?;
        }
        let n = buf.len().min(self.pending.len() - self.at);
        buf[..n].copy_from_slice(&self.pending[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

impl Reader {
    /// Files one channel message: data to read, stderr kept (and bounded), the end noted.
    fn take(&mut self, message: Option<ChannelMsg>) -> io::Result<()> {
        let mut state = self.remote.0.lock().unwrap_or_else(|p| p.into_inner());
        match message {
            Some(ChannelMsg::Data { data }) => {
                self.pending = data.to_vec();
                self.at = 0;
            }
            Some(ChannelMsg::ExtendedData { data, .. }) => {
                let room = STDERR_KEPT.saturating_sub(state.stderr.len());
                state
                    .stderr
                    .extend_from_slice(&data[..data.len().min(room)]);
                state.stderr_bytes += data.len();
                if state.stderr_bytes > STDERR_MAX {
                    return Err(io::Error::other(format!(
                        "the server wrote more than {STDERR_MAX} bytes to stderr"
                    )));
                }
            }
            Some(ChannelMsg::ExitStatus { exit_status }) => state.exit = Some(exit_status),
            Some(ChannelMsg::Failure) => {
                state.refused_command = true;
                self.done = true;
            }
            Some(ChannelMsg::Eof | ChannelMsg::Close) | None => self.done = true,
            Some(_) => {}
        }
        Ok(())
    }
}

/// The channel's write half as a blocking writer of stdin; it holds the session open.
pub struct Writer {
    rt: Arc<tokio::runtime::Runtime>,
    half: ChannelWriteHalf<client::Msg>,
    _session: Handle<HostCheck>,
}

impl Write for Writer {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.rt
            .block_on(async { tokio::time::timeout(IO_TIMEOUT, self.half.data(buf)).await })
            .map_err(|_| {
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("the server took nothing for {IO_TIMEOUT:?}"),
                )
            })?
            .map_err(io::Error::other)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_quotes_the_path_as_git_does() {
        assert_eq!(
            upload_pack_command("/srv/git/shop.git").unwrap(),
            "git-upload-pack '/srv/git/shop.git'"
        );
        assert_eq!(
            upload_pack_command("ops/shop.git").unwrap(),
            "git-upload-pack 'ops/shop.git'"
        );
        assert_eq!(
            upload_pack_command("/~ann/it's!.git").unwrap(),
            "git-upload-pack '~ann/it'\\''s'\\!'.git'"
        );
        assert_eq!(
            upload_pack_command("/a'; rm -rf /; '").unwrap(),
            "git-upload-pack '/a'\\''; rm -rf /; '\\'''"
        );
    }

    #[test]
    fn scp_like_urls_are_ssh_with_a_home_relative_path() {
        let url = gix::Url::from_bytes("git@github.com:ops/shop.git".into()).unwrap();
        assert_eq!(url.scheme, gix::url::Scheme::Ssh);
        assert_eq!(
            (url.user(), url.host(), url.port),
            (Some("git"), Some("github.com"), None)
        );
        assert_eq!(
            upload_pack_command(&url.path.to_string()).unwrap(),
            "git-upload-pack 'ops/shop.git'"
        );
        let url = gix::Url::from_bytes("ssh://git@example.com:2222/~ann/shop.git".into()).unwrap();
        assert_eq!(url.port, Some(2222));
        assert_eq!(
            upload_pack_command(&url.path.to_string()).unwrap(),
            "git-upload-pack '~ann/shop.git'"
        );
    }

    #[test]
    fn paths_that_could_pass_for_options_are_refused() {
        assert!(upload_pack_command("--upload-pack=touch x").is_err());
        assert!(upload_pack_command("").is_err());
        assert!(upload_pack_command("/a\nb").is_err());
    }
}
