//! Git fixtures: repositories made with the system `git` (`git init` in a temp directory,
//! commits by a fixed author) and a real `git daemon` serving them on a free loopback port.
//! Used by the fetch worker's tests, the GitOps pipeline test and the hub's GitRepo tests.

use std::net::TcpStream;
use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

/// A work-tree repository on disk (branch `main`), served as is by [`Daemon`].
pub struct Repo {
    /// The work tree.
    pub dir: PathBuf,
}

impl Repo {
    /// `git init -b main <base>/<name>`.
    pub fn init(base: &Path, name: &str) -> Repo {
        let dir = base.join(name);
        git(base, &["init", "-q", "-b", "main", name]);
        Repo { dir }
    }

    /// Writes a file (creating directories).
    pub fn write(&self, path: &str, content: impl AsRef<[u8]>) -> &Self {
        let p = self.dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
        self
    }

    /// Creates a symlink at `path` pointing at `target` (as written).
    pub fn symlink(&self, path: &str, target: &str) -> &Self {
        let p = self.dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, p).unwrap();
        self
    }

    /// Adds a submodule entry (gitlink) at `path` pointing at `commit`, without a checkout.
    pub fn gitlink(&self, path: &str, commit: &str) -> &Self {
        let info = format!("160000,{commit},{path}");
        git(&self.dir, &["update-index", "--add", "--cacheinfo", &info]);
        self
    }

    /// Commits everything; returns the commit id.
    pub fn commit(&self, message: &str) -> String {
        git(&self.dir, &["add", "-A"]);
        self.commit_staged(message)
    }

    /// Commits what is staged (a [`Repo::gitlink`] has no work-tree file for `add -A`).
    pub fn commit_staged(&self, message: &str) -> String {
        git(
            &self.dir,
            &[
                "-c",
                "user.name=Ann Author",
                "-c",
                "user.email=ann@example.com",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                message,
            ],
        );
        self.head()
    }

    /// Writes a tree made by hand (`git mktree` lines: `<mode> <type> <id>\t<name>`): names
    /// `git add` would never write.
    pub fn mktree(&self, lines: &str) -> String {
        git_stdin(&self.dir, &["mktree"], lines).trim().to_owned()
    }

    /// Commits `tree` as the new tip of `main`.
    pub fn commit_root(&self, tree: &str, message: &str) -> String {
        let parent = self.head();
        let commit = git(
            &self.dir,
            &["commit-tree", tree, "-p", &parent, "-m", message],
        );
        git(&self.dir, &["update-ref", "refs/heads/main", commit.trim()]);
        commit.trim().to_owned()
    }

    /// A blob's id for `content`, written to the object store.
    pub fn blob(&self, content: &str) -> String {
        git_stdin(&self.dir, &["hash-object", "-w", "--stdin"], content)
            .trim()
            .to_owned()
    }

    /// An annotated tag at HEAD.
    pub fn tag(&self, name: &str) {
        git(&self.dir, &["tag", "-a", name, "-m", name]);
    }

    /// The current commit of `main`.
    pub fn head(&self) -> String {
        git(&self.dir, &["rev-parse", "HEAD"]).trim().to_owned()
    }
}

fn command(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "Ann Author")
        .env("GIT_AUTHOR_EMAIL", "ann@example.com")
        .env("GIT_COMMITTER_NAME", "Ann Author")
        .env("GIT_COMMITTER_EMAIL", "ann@example.com")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir);
    cmd
}

fn run(mut cmd: Command, args: &[&str]) -> String {
    let out = cmd.output().expect("git runs (is git installed?)");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs git in `dir`.
pub fn git(dir: &Path, args: &[&str]) -> String {
    run(command(dir, args), args)
}

fn git_stdin(dir: &Path, args: &[&str], input: &str) -> String {
    use std::io::Write;
    let mut child = command(dir, args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `git daemon` serving every repository under a directory, on a free loopback port; killed
/// when dropped.
pub struct Daemon {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

impl Daemon {
    /// Serves every repository under `base` (`git daemon --export-all`).
    pub fn serve(base: &Path) -> Daemon {
        let port = crate::free_port();
        let child = Command::new("git")
            .args([
                "daemon",
                "--reuseaddr",
                "--export-all",
                &format!("--base-path={}", base.display()),
                &format!("--port={port}"),
                "--listen=127.0.0.1",
            ])
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", base)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("git daemon starts");
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "git daemon did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Daemon { child, port }
    }

    /// The `git://` URL of a repository directory under the base.
    pub fn url(&self, name: &str) -> String {
        format!("git://127.0.0.1:{}/{name}", self.port)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
