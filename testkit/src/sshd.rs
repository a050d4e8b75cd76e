//! A real OpenSSH server (Debian's `/usr/sbin/sshd`, installed by `scripts/lib.sh`
//! `ensure_sshd`) on a free loopback port, serving repositories to `ssh://` fetches the way a Git
//! forge does: the client runs `git-upload-pack '<path>'` over an exec channel. Its host key and
//! the client's key are made for the test (`ssh-keygen`); only the current user may log in, with
//! that key. Killed when dropped.

use std::{
    net::TcpStream,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

/// Where Debian puts the server.
pub const SSHD: &str = "/usr/sbin/sshd";

/// An OpenSSH server for one test.
pub struct Sshd {
    child: Child,
    dir: tempfile::TempDir,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// The user who may log in (the one running the test).
    pub user: String,
    host_key_types: &'static [&'static str],
}

/// Options for [`Sshd::start_with`].
#[derive(Debug, Clone)]
pub struct SshdOptions {
    /// Accept `GIT_PROTOCOL` from the client (protocol v2); OpenSSH's default refuses it.
    pub accept_git_protocol: bool,
    /// The host keys' types (`ed25519`, `ecdsa`, `rsa`), one key each.
    pub host_key_types: &'static [&'static str],
}

impl Default for SshdOptions {
    fn default() -> Self {
        SshdOptions {
            accept_git_protocol: true,
            host_key_types: &["ed25519"],
        }
    }
}

impl Sshd {
    /// A server with an ed25519 host key that accepts `GIT_PROTOCOL`.
    pub fn start() -> Sshd {
        Self::start_with(SshdOptions::default())
    }

    /// A server as `options` say.
    pub fn start_with(options: SshdOptions) -> Sshd {
        assert!(
            Path::new(SSHD).is_file(),
            "{SSHD} is missing: install OpenSSH's server (scripts/lib.sh ensure_sshd, or \
             apt-get install -y openssh-server)"
        );
        let dir = tempfile::tempdir().unwrap();
        let host_keys: String = options
            .host_key_types
            .iter()
            .map(|kind| {
                let key = keygen(dir.path(), &format!("host_key_{kind}"), kind);
                format!("HostKey {}\n", key.display())
            })
            .collect();
        let client = keygen(dir.path(), "client_key", "ed25519");
        std::fs::copy(
            client.with_extension("pub"),
            dir.path().join("authorized_keys"),
        )
        .unwrap();
        let user = current_user();
        let port = crate::free_port();
        let d = dir.path().display();
        let accept = if options.accept_git_protocol {
            "AcceptEnv GIT_PROTOCOL\n"
        } else {
            ""
        };
        let config = format!(
            "{host_keys}AuthorizedKeysFile {d}/authorized_keys\nStrictModes no\nUsePAM no\n\
             PasswordAuthentication no\nKbdInteractiveAuthentication no\n\
             PermitRootLogin prohibit-password\nPidFile {d}/sshd.pid\nListenAddress 127.0.0.1\n\
             AllowUsers {user}\nLogLevel VERBOSE\n{accept}"
        );
        std::fs::write(dir.path().join("sshd_config"), config).unwrap();
        if is_root() {
            // sshd as root needs its privilege-separation directory (the package's service
            // makes it at boot; no service runs here).
            std::fs::create_dir_all("/run/sshd").unwrap();
        }
        let log = std::fs::File::create(dir.path().join("sshd.log")).unwrap();
        let child = Command::new(SSHD)
            .args(["-D", "-e", "-f"])
            .arg(dir.path().join("sshd_config"))
            .args(["-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("sshd starts");
        let mut sshd = Sshd {
            child,
            dir,
            port,
            user,
            host_key_types: options.host_key_types,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = sshd.child.try_wait() {
                panic!("sshd exited ({status}): {}", sshd.log());
            }
            assert!(
                Instant::now() < deadline,
                "sshd did not listen on {port}: {}",
                sshd.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        sshd
    }

    /// The `ssh://` URL of a repository at `path` (absolute) on this server.
    pub fn url(&self, path: &Path) -> String {
        format!(
            "ssh://{}@127.0.0.1:{}{}",
            self.user,
            self.port,
            path.display()
        )
    }

    /// The client's private key (OpenSSH armour), whose public half may log in.
    pub fn client_key(&self) -> Vec<u8> {
        std::fs::read(self.dir.path().join("client_key")).unwrap()
    }

    /// The server's first host key as one `known_hosts` line
    /// (`[127.0.0.1]:<port> <type> <base64>`).
    pub fn known_hosts(&self) -> String {
        let first = self.host_key_types.first().expect("a host key");
        self.known_hosts_of(first)
    }

    /// The line of the server's host key of type `kind` (one of its `host_key_types`).
    pub fn known_hosts_of(&self, kind: &str) -> String {
        let path = self.dir.path().join(format!("host_key_{kind}.pub"));
        let public = std::fs::read_to_string(path).unwrap();
        let mut fields = public.split_whitespace();
        let (kind, key) = (fields.next().unwrap(), fields.next().unwrap());
        format!("[127.0.0.1]:{} {kind} {key}\n", self.port)
    }

    /// The private key (OpenSSH armour) of a fresh key pair the server does not know.
    pub fn stranger_key(&self) -> Vec<u8> {
        let key = keygen(self.dir.path(), "stranger_key", "ed25519");
        std::fs::read(key).unwrap()
    }

    /// What the server has logged.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sshd.log")).unwrap_or_default()
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `ssh-keygen -t <kind>` into `dir/<name>` (no passphrase); returns the private key's path.
pub fn keygen(dir: &Path, name: &str, kind: &str) -> PathBuf {
    let path = dir.join(name);
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", kind, "-N", "", "-C", "flotilla-test", "-f"])
        .arg(&path)
        .output()
        .expect("ssh-keygen runs (install openssh-client)");
    assert!(
        out.status.success(),
        "ssh-keygen -t {kind}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}

fn current_user() -> String {
    let out = Command::new("id").arg("-un").output().expect("id runs");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}
