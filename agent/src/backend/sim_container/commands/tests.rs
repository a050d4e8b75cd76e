use super::*;
use crate::backend::session::{Channel, Input, Output};
use crate::backend::sim_container::fs::{Layer, View, image};
use crate::backend::sim_container::io::{Io, Term};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

fn ctx() -> Ctx {
    let image = image(
        [(
            "/etc/config/greeting".to_string(),
            Bytes::from_static(b"hello"),
        )],
        vec!["/etc/config".into()],
    );
    Ctx {
        view: View::new(image, Arc::new(Mutex::new(Layer::new(1024 * 1024)))),
        env: BTreeMap::from([("NAME".to_string(), "web".to_string())]),
        cwd: "/".into(),
    }
}

/// Runs `argv` in `ctx` with `stdin`: its exit, stdout and stderr.
async fn run_in(ctx: &mut Ctx, argv: &[&str], stdin: &[u8]) -> (Exit, String, String) {
    let (out_tx, mut out_rx) = mpsc::channel(1024);
    let (in_tx, in_rx) = mpsc::channel(16);
    if !stdin.is_empty() {
        in_tx
            .send(Input::Data(Bytes::copy_from_slice(stdin)))
            .await
            .unwrap();
    }
    in_tx.send(Input::End).await.unwrap();
    let mut term = Term {
        out: out_tx,
        input: in_rx,
        eof: false,
        tty: false,
    };
    let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
    let exit = {
        let mut io = Io::session(&mut term);
        run(ctx, &mut io, &argv).await
    };
    drop(term);
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    while let Some(out) = out_rx.recv().await {
        match out {
            Output::Data(Channel::Stdout, b) => stdout.extend_from_slice(&b),
            Output::Data(Channel::Stderr, b) => stderr.extend_from_slice(&b),
            other => panic!("unexpected {other:?}"),
        }
    }
    (
        exit,
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

/// argv, stdin, and the exit, stdout and stderr expected.
type Case<'a> = (&'a [&'a str], &'a [u8], Exit, &'a str, &'a str);

#[tokio::test]
async fn commands_write_what_coreutils_write_and_exit_as_they_exit() {
    let mut c = ctx();
    let cases: [Case; 9] = [
        (&["echo", "-n", "a", "b"], b"", Exit::Code(0), "a b", ""),
        (&["cat"], b"piped", Exit::Code(0), "piped", ""),
        (
            &["cat", "/etc/config/greeting", "/nope"],
            b"",
            Exit::Code(1),
            "hello",
            "cat: /nope: No such file or directory\n",
        ),
        (&["ls", "/etc"], b"", Exit::Code(0), "config\n", ""),
        (
            &["ls", "/nope"],
            b"",
            Exit::Code(2),
            "",
            "ls: cannot access '/nope': No such file or directory\n",
        ),
        (&["printenv", "NAME"], b"", Exit::Code(0), "web\n", ""),
        (&["test", "-d", "/etc/config"], b"", Exit::Code(0), "", ""),
        (&["[", "-f", "/etc/config", "]"], b"", Exit::Code(1), "", ""),
        (&["python3"], b"", Exit::NotFound("python3".into()), "", ""),
    ];
    for (argv, stdin, exit, stdout, stderr) in cases {
        assert_eq!(
            run_in(&mut c, argv, stdin).await,
            (exit, stdout.to_string(), stderr.to_string()),
            "{argv:?}"
        );
    }
}

#[tokio::test]
async fn sh_runs_lists_pipes_redirections_and_exit() {
    let mut c = ctx();
    let script = "echo one > /tmp/f; echo two >> /tmp/f; cat /tmp/f | wc -c && echo ok >&2; \
                  false || exit 4; echo never";
    let (exit, stdout, stderr) = run_in(&mut c, &["sh", "-c", script], b"").await;
    assert_eq!(exit, Exit::Code(4));
    assert_eq!(stdout, "8\n");
    assert_eq!(stderr, "ok\n");
    let (exit, _, stderr) = run_in(&mut c, &["sh", "-c", "nosuch arg"], b"").await;
    assert_eq!(
        (exit, stderr.as_str()),
        (Exit::Code(127), "sh: 1: nosuch: not found\n")
    );
    let (exit, _, stderr) = run_in(&mut c, &["sh", "-c", "echo x > /etc/config/y"], b"").await;
    assert_eq!(exit, Exit::Code(2));
    assert!(stderr.contains("Read-only file system"), "{stderr}");
    // A script read from stdin, line by line.
    let (exit, stdout, _) =
        run_in(&mut c, &["sh"], b"echo a\ncd /tmp\npwd\nexit 0\necho b\n").await;
    assert_eq!((exit, stdout.as_str()), (Exit::Code(0), "a\n/tmp\n"));
}

#[tokio::test]
async fn tar_copies_in_and_out_as_kubectl_cp_runs_it() {
    let mut c = ctx();
    let archive = tar::write(&[
        tar::Entry::Dir("d".into()),
        tar::Entry::File("d/a".into(), Bytes::from_static(b"alpha")),
    ]);
    let (exit, _, stderr) = run_in(
        &mut c,
        &[
            "tar",
            "--no-same-permissions",
            "--no-same-owner",
            "-xmf",
            "-",
            "-C",
            "/tmp/new",
        ],
        &archive,
    )
    .await;
    assert_eq!(exit, Exit::Code(0), "{stderr}");
    assert_eq!(c.view.read("/tmp/new/d/a").unwrap(), "alpha");
    let (exit, stdout, stderr) = run_in(&mut c, &["tar", "cf", "-", "/tmp/new/d"], b"").await;
    assert_eq!(exit, Exit::Code(0));
    assert_eq!(stderr, "tar: Removing leading `/' from member names\n");
    let entries = tar::read(stdout.as_bytes()).unwrap();
    assert_eq!(
        entries,
        [
            tar::Entry::Dir("tmp/new/d/".into()),
            tar::Entry::File("tmp/new/d/a".into(), Bytes::from_static(b"alpha"))
        ]
    );
    let (exit, _, stderr) = run_in(&mut c, &["tar", "cf", "-", "/nope"], b"").await;
    assert_eq!(exit, Exit::Code(2));
    assert!(stderr.contains("Cannot stat"), "{stderr}");
    let (exit, _, stderr) = run_in(&mut c, &["tar", "xf", "-"], b"garbage").await;
    assert_eq!(exit, Exit::Code(2), "{stderr}");
    // `tail -c +N`, as kubectl cp --retries resumes.
    let (_, stdout, _) = run_in(
        &mut c,
        &["sh", "-c", "cat /etc/config/greeting | tail -c +3"],
        b"",
    )
    .await;
    assert_eq!(stdout, "llo");
}

#[tokio::test]
async fn a_command_reading_its_stdin_whole_holds_at_most_8_mib() {
    let mut ctx = ctx();
    let big = vec![b'x'; 8 * 1024 * 1024 + 1];
    let (exit, out, err) = run_in(&mut ctx, &["tail", "-c", "1"], &big).await;
    assert_eq!((exit, out.as_str()), (Exit::Code(1), ""), "{err}");
    assert_eq!(err, "tail: -: No space left on device\n");
    let (exit, _, err) = run_in(&mut ctx, &["tar", "xf", "-", "-C", "/tmp"], &big).await;
    assert_eq!(exit, Exit::Code(2));
    assert_eq!(err, "tar: -: Cannot write: No space left on device\n");
    // Within the bound, as before.
    let (exit, out, _) = run_in(&mut ctx, &["tail", "-c", "3"], &big[..1024]).await;
    assert_eq!((exit, out.as_str()), (Exit::Code(0), "xxx"));
}
