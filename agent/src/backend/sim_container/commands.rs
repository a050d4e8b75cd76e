//! The simulated container's commands: `echo`, `cat`, `ls`, `env`, `printenv`, `test`/`[`,
//! `true`, `false`, `hostname`, `pwd`, `mkdir`, `rm`, `sleep`, `tail -c`, `wc -c`, `tar` (what
//! `kubectl cp` runs) and `sh` (`-c SCRIPT`, or a script read from stdin line by line) — with
//! the exit codes and the stderr wording of busybox/coreutils where a test would look at them.

use super::fs::{self, FsError, Node, View};
use super::io::{Io, MAX_BUFFER, Sink, Source};
use super::shell::{self, Join, Redirect};
use super::tar;
use bytes::Bytes;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;

#[cfg(test)]
mod tests;

/// What a command runs in.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// The container's files.
    pub view: View,
    /// Its environment.
    pub env: BTreeMap<String, String>,
    /// The working directory.
    pub cwd: String,
}

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// With this code.
    Code(u8),
    /// No such command (exec'd directly: the runtime's error; in `sh`: 127).
    NotFound(String),
}

/// The command names the container has, as `PATH` finds them.
const COMMANDS: [&str; 20] = [
    "echo", "cat", "ls", "env", "printenv", "test", "[", "true", "false", "hostname", "pwd",
    "mkdir", "rm", "sleep", "tail", "wc", "tar", "sh", "exit", "cd",
];

/// The command a path names (`/bin/sh` → `sh`), if the container has it.
fn command_name(word: &str) -> Option<&'static str> {
    let name = word.rsplit('/').next().unwrap_or(word);
    COMMANDS.iter().copied().find(|c| *c == name)
}

type Run<'a> = Pin<Box<dyn Future<Output = Exit> + Send + 'a>>;

/// Runs `argv` with `io` in `ctx`.
pub fn run<'a, 't: 'a>(ctx: &'a mut Ctx, io: &'a mut Io<'t>, argv: &'a [String]) -> Run<'a> {
    Box::pin(async move {
        let Some(first) = argv.first() else {
            return Exit::Code(0);
        };
        let Some(name) = command_name(first) else {
            return Exit::NotFound(first.clone());
        };
        let args = &argv[1..];
        let code = match name {
            "echo" => echo(io, args).await,
            "cat" => cat(ctx, io, args).await,
            "ls" => ls(ctx, io, args).await,
            "env" | "printenv" => printenv(ctx, io, args).await,
            "test" | "[" => test(ctx, io, name, args).await,
            "true" | "cd" | "exit" => 0,
            "false" => 1,
            "hostname" => {
                let host = ctx.env.get("HOSTNAME").cloned().unwrap_or_default();
                io.out(format!("{host}\n")).await;
                0
            }
            "pwd" => {
                io.out(format!("{}\n", ctx.cwd)).await;
                0
            }
            "mkdir" => mkdir(ctx, io, args).await,
            "rm" => rm(ctx, io, args).await,
            "sleep" => sleep(io, args).await,
            "tail" => tail(io, args).await,
            "wc" => wc(io, args).await,
            "tar" => tar_command(ctx, io, args).await,
            _ => sh(ctx, io, args).await,
        };
        Exit::Code(code)
    })
}

async fn echo(io: &mut Io<'_>, args: &[String]) -> u8 {
    let (newline, args) = match args.first().map(String::as_str) {
        Some("-n") => (false, &args[1..]),
        _ => (true, args),
    };
    let mut line = args.join(" ");
    if newline {
        line.push('\n');
    }
    io.out(line).await;
    0
}

async fn cat(ctx: &Ctx, io: &mut Io<'_>, args: &[String]) -> u8 {
    if args.is_empty() || args == ["-"] {
        while let Some(b) = io.read().await {
            io.out(b).await;
        }
        return 0;
    }
    let mut code = 0;
    for arg in args {
        match ctx.view.read(&fs::resolve(&ctx.cwd, arg)) {
            Ok(b) => io.out(b).await,
            Err(e) => {
                io.err(format!("cat: {arg}: {e}\n")).await;
                code = 1;
            }
        }
    }
    code
}

async fn ls(ctx: &Ctx, io: &mut Io<'_>, args: &[String]) -> u8 {
    let all = args.iter().any(|a| a.starts_with('-') && a.contains('a'));
    let long = args.iter().any(|a| a.starts_with('-') && a.contains('l'));
    let mut paths: Vec<&String> = args.iter().filter(|a| !a.starts_with('-')).collect();
    let dot = ".".to_string();
    if paths.is_empty() {
        paths.push(&dot);
    }
    let mut code = 0;
    let several = paths.len() > 1;
    for path in paths {
        let full = fs::resolve(&ctx.cwd, path);
        let line = |name: &str, node: &Node| {
            if !long {
                return format!("{name}\n");
            }
            match node {
                Node::Dir => format!("drwxr-xr-x    2 root     root          4096 {name}\n"),
                Node::File(b) => format!("-rw-r--r--    1 root     root {:>13} {name}\n", b.len()),
            }
        };
        match ctx.view.get(&full) {
            None => {
                io.err(format!(
                    "ls: cannot access '{path}': No such file or directory\n"
                ))
                .await;
                code = 2;
            }
            Some(node @ Node::File(_)) => io.out(line(path, &node)).await,
            Some(Node::Dir) => {
                if several {
                    io.out(format!("{path}:\n")).await;
                }
                let mut out = String::new();
                if all {
                    out.push_str(&line(".", &Node::Dir));
                    out.push_str(&line("..", &Node::Dir));
                }
                for name in ctx.view.list(&full).unwrap_or_default() {
                    if name.starts_with('.') && !all {
                        continue;
                    }
                    let node = ctx
                        .view
                        .get(&fs::resolve(&full, &name))
                        .unwrap_or(Node::Dir);
                    out.push_str(&line(&name, &node));
                }
                io.out(out).await;
            }
        }
    }
    code
}

async fn printenv(ctx: &Ctx, io: &mut Io<'_>, args: &[String]) -> u8 {
    match args.first() {
        None => {
            let all: String = ctx.env.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
            io.out(all).await;
            0
        }
        Some(name) => match ctx.env.get(name) {
            Some(v) => {
                io.out(format!("{v}\n")).await;
                0
            }
            None => 1,
        },
    }
}

async fn test(ctx: &Ctx, io: &mut Io<'_>, name: &str, args: &[String]) -> u8 {
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    if name == "[" {
        if args.last() != Some(&"]") {
            io.err("[: missing ]\n").await;
            return 2;
        }
        args.pop();
    }
    let negate = args.first() == Some(&"!");
    if negate {
        args.remove(0);
    }
    let node = |p: &str| ctx.view.get(&fs::resolve(&ctx.cwd, p));
    let truth = match args.as_slice() {
        [] => false,
        [s] => !s.is_empty(),
        ["-d", p] => matches!(node(p), Some(Node::Dir)),
        ["-f", p] => matches!(node(p), Some(Node::File(_))),
        ["-e", p] => node(p).is_some(),
        ["-s", p] => matches!(node(p), Some(Node::File(b)) if !b.is_empty()),
        ["-z", s] => s.is_empty(),
        ["-n", s] => !s.is_empty(),
        [a, "=", b] => a == b,
        [a, "!=", b] => a != b,
        _ => {
            io.err(format!("{name}: unsupported expression\n")).await;
            return 2;
        }
    };
    u8::from(truth == negate)
}

async fn mkdir(ctx: &Ctx, io: &mut Io<'_>, args: &[String]) -> u8 {
    let parents = args.iter().any(|a| a == "-p");
    let mut code = 0;
    for dir in args.iter().filter(|a| !a.starts_with('-')) {
        if let Err(e) = ctx.view.mkdir(&fs::resolve(&ctx.cwd, dir), parents) {
            io.err(format!("mkdir: cannot create directory '{dir}': {e}\n"))
                .await;
            code = 1;
        }
    }
    code
}

async fn rm(ctx: &Ctx, io: &mut Io<'_>, args: &[String]) -> u8 {
    let flags: String = args
        .iter()
        .filter(|a| a.starts_with('-'))
        .map(|a| &a[1..])
        .collect();
    let (recursive, force) = (
        flags.contains('r') || flags.contains('R'),
        flags.contains('f'),
    );
    let mut code = 0;
    for path in args.iter().filter(|a| !a.starts_with('-')) {
        let full = fs::resolve(&ctx.cwd, path);
        match ctx.view.remove(&full, recursive) {
            Ok(()) => {}
            Err(FsError::NotFound) if force => {}
            Err(FsError::NotEmpty) => {
                io.err(format!("rm: cannot remove '{path}': Is a directory\n"))
                    .await;
                code = 1;
            }
            Err(e) => {
                io.err(format!("rm: cannot remove '{path}': {e}\n")).await;
                code = 1;
            }
        }
    }
    code
}

async fn sleep(io: &mut Io<'_>, args: &[String]) -> u8 {
    match args.first().and_then(|a| a.parse::<f64>().ok()) {
        Some(secs) if (0.0..=86_400.0).contains(&secs) => {
            tokio::time::sleep(std::time::Duration::from_secs_f64(secs)).await;
            0
        }
        _ => {
            io.err("sleep: invalid time interval\n").await;
            1
        }
    }
}

/// `tail -c +N` (from byte N) or `tail -c N` (the last N bytes).
async fn tail(io: &mut Io<'_>, args: &[String]) -> u8 {
    let spec = match args {
        [c, n] if c == "-c" => n.clone(),
        [c] if c.starts_with("-c") => c[2..].to_string(),
        _ => {
            io.err("tail: only -c is simulated\n").await;
            return 1;
        }
    };
    let Some(all) = io.read_all(MAX_BUFFER).await else {
        io.err("tail: -: No space left on device\n").await;
        return 1;
    };
    let (from_start, n) = match spec.strip_prefix('+') {
        Some(n) => (true, n),
        None => (false, spec.as_str()),
    };
    let Ok(n) = n.parse::<usize>() else {
        io.err(format!("tail: invalid number of bytes: '{spec}'\n"))
            .await;
        return 1;
    };
    let start = if from_start {
        n.saturating_sub(1).min(all.len())
    } else {
        all.len().saturating_sub(n)
    };
    io.out(&all[start..]).await;
    0
}

async fn wc(io: &mut Io<'_>, args: &[String]) -> u8 {
    if args != ["-c"] {
        io.err("wc: only -c of stdin is simulated\n").await;
        return 1;
    }
    let mut n = 0usize;
    while let Some(b) = io.read().await {
        n += b.len();
    }
    io.out(format!("{n}\n")).await;
    0
}

/// `tar c`/`tar x` as `kubectl cp` runs them: `cf - PATH…`, `xf -` / `-xmf -`, `-C DIR`,
/// GNU long options ignored.
async fn tar_command(ctx: &Ctx, io: &mut Io<'_>, args: &[String]) -> u8 {
    let (mut create, mut extract, mut dir) = (false, false, ctx.cwd.clone());
    let mut paths = Vec::new();
    let mut it = args.iter().enumerate().peekable();
    while let Some((i, arg)) = it.next() {
        if arg.starts_with("--") {
            continue;
        }
        if arg == "-C" {
            if let Some((_, d)) = it.next() {
                dir = fs::resolve(&ctx.cwd, d);
            }
            continue;
        }
        // Bundled letters: the first argument even without a dash (`cf`), or `-xmf`.
        if arg.starts_with('-') || i == 0 {
            for letter in arg.trim_start_matches('-').chars() {
                match letter {
                    'c' => create = true,
                    'x' => extract = true,
                    'f' => {
                        if it.next().map(|(_, f)| f.as_str()) != Some("-") {
                            io.err("tar: only the archive - (stdin/stdout) is simulated\n")
                                .await;
                            return 2;
                        }
                    }
                    'm' | 'v' | 'p' | 'o' => {}
                    other => {
                        io.err(format!("tar: option -{other} is not simulated\n"))
                            .await;
                        return 2;
                    }
                }
            }
            continue;
        }
        paths.push(arg.clone());
    }
    match (create, extract) {
        (true, false) => tar_create(ctx, io, &dir, &paths).await,
        (false, true) => tar_extract(ctx, io, &dir).await,
        _ => {
            io.err("tar: You must specify one of the '-cx' options\n")
                .await;
            2
        }
    }
}

async fn tar_create(ctx: &Ctx, io: &mut Io<'_>, dir: &str, paths: &[String]) -> u8 {
    let mut entries = Vec::new();
    let mut failed = false;
    if paths.iter().any(|p| p.starts_with('/')) {
        io.err("tar: Removing leading `/' from member names\n")
            .await;
    }
    for path in paths {
        let full = fs::resolve(dir, path);
        let walked = ctx.view.walk(&full);
        if walked.is_empty() {
            io.err(format!(
                "tar: {path}: Cannot stat: No such file or directory\n"
            ))
            .await;
            failed = true;
        }
        let shown = path.trim_start_matches('/').trim_end_matches('/');
        for (p, node) in walked {
            let name = format!("{shown}{}", &p[full.len()..]);
            entries.push(match node {
                Node::Dir => tar::Entry::Dir(name),
                Node::File(b) => tar::Entry::File(name, b),
            });
        }
    }
    io.out(tar::write(&entries)).await;
    if failed {
        io.err("tar: Exiting with failure status due to previous errors\n")
            .await;
        return 2;
    }
    0
}

async fn tar_extract(ctx: &Ctx, io: &mut Io<'_>, dir: &str) -> u8 {
    let Some(archive) = io.read_all(MAX_BUFFER).await else {
        io.err("tar: -: Cannot write: No space left on device\n")
            .await;
        return 2;
    };
    let entries = match tar::read(&archive) {
        Ok(e) => e,
        Err(e) => {
            io.err(format!(
                "tar: {e}\ntar: Exiting with failure status due to previous errors\n"
            ))
            .await;
            return 2;
        }
    };
    let mut failed = false;
    for entry in entries {
        let (name, result) = match &entry {
            tar::Entry::Dir(name) | tar::Entry::File(name, _)
                if name.split('/').any(|part| part == "..") =>
            {
                io.err(format!("tar: {name}: Member name contains '..'\n"))
                    .await;
                failed = true;
                continue;
            }
            tar::Entry::Dir(name) => (name, ctx.view.mkdir(&fs::resolve(dir, name), true)),
            tar::Entry::File(name, data) => {
                let path = fs::resolve(dir, name);
                let made = ctx.view.mkdir(fs::parent(&path), true);
                (name, made.and_then(|()| ctx.view.write(&path, data, false)))
            }
        };
        if let Err(e) = result {
            io.err(format!("tar: {name}: Cannot open: {e}\n")).await;
            failed = true;
        }
    }
    if failed {
        io.err("tar: Exiting with failure status due to previous errors\n")
            .await;
        return 2;
    }
    0
}

/// `sh -c SCRIPT`, or `sh` reading its script from stdin line by line.
async fn sh(ctx: &mut Ctx, io: &mut Io<'_>, args: &[String]) -> u8 {
    match args.first().map(String::as_str) {
        Some("-c") => match args.get(1) {
            Some(script) => script_of(ctx, io, script).await.unwrap_or_else(|c| c),
            None => {
                io.err("sh: 0: -c requires an argument\n").await;
                2
            }
        },
        Some(other) => {
            io.err(format!(
                "sh: 0: cannot open {other}: simulated sh reads -c or stdin\n"
            ))
            .await;
            2
        }
        None => {
            let mut pending = Vec::new();
            let mut last = 0;
            loop {
                let chunk = io.read().await;
                if let Some(b) = &chunk {
                    pending.extend_from_slice(b);
                }
                while let Some(nl) = pending.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = pending.drain(..=nl).collect();
                    match script_of(ctx, io, &String::from_utf8_lossy(&line)).await {
                        Ok(code) => last = code,
                        Err(code) => return code,
                    }
                }
                if chunk.is_none() {
                    if !pending.is_empty() {
                        let rest = String::from_utf8_lossy(&pending).into_owned();
                        return script_of(ctx, io, &rest).await.unwrap_or_else(|c| c);
                    }
                    return last;
                }
            }
        }
    }
}

/// Runs a script: `Ok` with its last status, `Err` with the code of an `exit` (or a syntax
/// error's 2), which ends the shell.
async fn script_of(ctx: &mut Ctx, io: &mut Io<'_>, text: &str) -> Result<u8, u8> {
    let script = match shell::parse(text, &ctx.env) {
        Ok(s) => s,
        Err(e) => {
            io.err(format!("sh: 1: {e}\n")).await;
            return Err(2);
        }
    };
    let mut last = 0u8;
    let mut skip = false;
    for (pipeline, join) in script {
        if !skip {
            if let Some(exit) = exit_of(&pipeline) {
                return Err(exit.unwrap_or(last));
            }
            last = pipeline_of(ctx, io, &pipeline).await;
        }
        skip = match join {
            Join::Then => false,
            Join::And => last != 0,
            Join::Or => last == 0,
        };
    }
    Ok(last)
}

/// `Some` when the pipeline is `exit [N]` (with N, if given and valid).
fn exit_of(pipeline: &shell::Pipeline) -> Option<Option<u8>> {
    match pipeline.as_slice() {
        [c] if c.words.first().map(String::as_str) == Some("exit") => Some(
            c.words
                .get(1)
                .and_then(|n| n.parse::<i64>().ok())
                .map(|n| n.rem_euclid(256) as u8),
        ),
        _ => None,
    }
}

/// Runs the commands of a pipeline, each one's stdout the next one's stdin (kept whole).
async fn pipeline_of(ctx: &mut Ctx, io: &mut Io<'_>, pipeline: &shell::Pipeline) -> u8 {
    let mut carried: Option<Bytes> = None;
    let mut code = 0;
    let n = pipeline.len();
    for (i, command) in pipeline.iter().enumerate() {
        let mut child = io.child();
        if let Some(b) = carried.take() {
            child.stdin = Source::Bytes(b);
        }
        if i + 1 < n {
            child.stdout = Sink::buffer();
        }
        code = command_of(ctx, &mut child, command).await;
        let (stdout, stderr) = (
            std::mem::replace(&mut child.stdout, Sink::buffer()),
            std::mem::replace(&mut child.stderr, Sink::buffer()),
        );
        drop(child);
        if i + 1 < n {
            if let Sink::Buffer(b, _) = stdout {
                carried = Some(Bytes::from(b));
            }
            io.absorb(Sink::buffer(), stderr).await;
        } else {
            io.absorb(stdout, stderr).await;
        }
    }
    code
}

/// Runs one command of a script with its redirections.
async fn command_of(ctx: &mut Ctx, io: &mut Io<'_>, command: &shell::Command) -> u8 {
    let mut files: Vec<(u8, String, bool)> = Vec::new();
    for redirect in &command.redirects {
        match redirect {
            Redirect::In(path) => match ctx.view.read(&fs::resolve(&ctx.cwd, path)) {
                Ok(b) => io.stdin = Source::Bytes(b),
                Err(e) => {
                    io.err(format!("sh: 1: cannot open {path}: {e}\n")).await;
                    return 2;
                }
            },
            Redirect::Out { fd, path, append } => {
                let sink = if *fd == 2 {
                    &mut io.stderr
                } else {
                    &mut io.stdout
                };
                *sink = Sink::buffer();
                files.push((*fd, fs::resolve(&ctx.cwd, path), *append));
            }
            Redirect::Dup { fd, to } => {
                let target = if *to == 2 {
                    io.stderr.child()
                } else {
                    io.stdout.child()
                };
                if *fd == 2 {
                    io.stderr = target;
                } else {
                    io.stdout = target;
                }
            }
        }
    }
    if command.words.first().map(String::as_str) == Some("cd") {
        let to = command
            .words
            .get(1)
            .cloned()
            .unwrap_or_else(|| "/root".into());
        let full = fs::resolve(&ctx.cwd, &to);
        if !ctx.view.is_dir(&full) {
            io.err(format!("sh: 1: cd: can't cd to {to}\n")).await;
            return 2;
        }
        ctx.cwd = full;
        return 0;
    }
    let code = match run(ctx, io, &command.words).await {
        Exit::Code(c) => c,
        Exit::NotFound(name) => {
            io.err(format!("sh: 1: {name}: not found\n")).await;
            127
        }
    };
    for (fd, path, append) in files {
        let sink = std::mem::replace(
            if fd == 2 {
                &mut io.stderr
            } else {
                &mut io.stdout
            },
            Sink::buffer(),
        );
        if let Sink::Buffer(data, over) = sink {
            let written = if over {
                Err(FsError::NoSpace)
            } else {
                ctx.view.write(&path, &data, append)
            };
            if let Err(e) = written {
                io.err(format!("sh: 1: cannot create {path}: {e}\n")).await;
                return 2;
            }
        }
    }
    code
}
