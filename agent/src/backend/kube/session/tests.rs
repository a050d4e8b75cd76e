use super::*;
use crate::backend::session::Streams;

fn request(kind: SessionKind) -> SessionRequest {
    SessionRequest {
        kind,
        namespace: "ns".into(),
        pod: "p".into(),
        container: None,
        streams: Streams::default(),
        impersonate: Some(Impersonation {
            user: "system:serviceaccount:default:executor1".into(),
            groups: vec![],
        }),
        bearer: None,
    }
}

#[test]
fn a_refused_upgrade_keeps_its_code_and_names_the_verb_pod_and_identity() {
    let r = request(SessionKind::Exec {
        command: vec!["ls".into()],
    });
    let e = kube::Error::UpgradeConnection(UpgradeConnectionError::ProtocolSwitch(
        http::StatusCode::FORBIDDEN,
    ));
    let answer = refused(&r, &e);
    assert_eq!(answer.status, http::StatusCode::FORBIDDEN);
    let r = request(SessionKind::PortForward { port: 80 });
    let e = kube::Error::UpgradeConnection(UpgradeConnectionError::SecWebSocketProtocolMismatch);
    assert_eq!(refused(&r, &e).status, http::StatusCode::BAD_GATEWAY);
    assert_eq!(
        acting(&r),
        "acting as system:serviceaccount:default:executor1"
    );
    assert_eq!(reason(http::StatusCode::NOT_FOUND), "NotFound");
}

#[test]
fn an_exit_status_is_read_as_the_hub_reads_one() {
    let status: Status = serde_json::from_slice(&SessionStatus::exited(3).to_json())
        .expect("the kubelet's status parses");
    assert_eq!(exit_status("exec", Some(status)), SessionStatus::exited(3));
    let SessionStatus::Failure { message, .. } = exit_status("attach", None) else {
        panic!("a missing status is a failure");
    };
    assert!(
        message.contains("attach stream without an exit status"),
        "{message}"
    );
}

#[test]
fn session_clients_never_time_out_a_read_but_keep_the_rest_of_the_config() {
    let mut config = Config::new("https://api.example:6443".parse().expect("a url"));
    config.read_timeout = Some(std::time::Duration::from_secs(295));
    config.default_namespace = "edge".into();
    let session = session_config(&config);
    assert_eq!(
        session.read_timeout, None,
        "an idle shell is not an unanswered request"
    );
    assert_eq!(session.cluster_url, config.cluster_url);
    assert_eq!(session.default_namespace, "edge");
    assert_eq!(
        config.read_timeout,
        Some(std::time::Duration::from_secs(295)),
        "the agent's own requests keep kube-rs' bound"
    );
}

/// The testkit's API server with a pod `default/web`, and the backend on it.
async fn cluster() -> (
    flotilla_testkit::kube::FakeKube,
    std::sync::Arc<KubeBackend>,
) {
    use crate::backend::{Backend, Strategy};
    let fake = flotilla_testkit::kube::FakeKube::start().await;
    let backend = KubeBackend::connect(Some(&fake.kubeconfig()))
        .await
        .expect("connect");
    let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"containers": [{"name": "web", "image": "nginx",
            "env": [{"name": "GREETING", "value": "hello"}]}]}});
    let id = flotilla_api::work::manifest_id(&pod).unwrap();
    backend
        .apply(&id, &pod, &Strategy::Update)
        .await
        .expect("the pod is created");
    (fake, std::sync::Arc::new(backend))
}

fn exec(command: &[&str], stdin: bool) -> SessionRequest {
    SessionRequest {
        impersonate: None,
        streams: Streams {
            stdin,
            stdout: true,
            stderr: true,
            tty: false,
        },
        ..request(SessionKind::Exec {
            command: command.iter().map(|c| c.to_string()).collect(),
        })
    }
}

/// Every output until the session ends, with a bound on the wait.
async fn outputs(session: Session) -> (Vec<u8>, Vec<u8>, Vec<Output>) {
    use futures::StreamExt;
    let (mut out, mut err, mut rest) = (Vec::new(), Vec::new(), Vec::new());
    let mut stream = session.output;
    let _input = session.input;
    let all = async {
        while let Some(o) = stream.next().await {
            match o {
                Output::Data(Channel::Stdout | Channel::Data, b) => out.extend_from_slice(&b),
                Output::Data(Channel::Stderr, b) => err.extend_from_slice(&b),
                other => rest.push(other),
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(20), all)
        .await
        .expect("the session ended in time");
    (out, err, rest)
}

#[tokio::test]
async fn exec_runs_through_the_api_servers_websocket_with_output_and_exit_codes() {
    use crate::backend::Backend;
    let (fake, backend) = cluster().await;
    let mut r = exec(
        &["sh", "-c", "echo $GREETING; echo oops >&2; exit 3"],
        false,
    );
    r.namespace = "default".into();
    r.pod = "web".into();
    let session = backend.clone().open_session(r).await.expect("opened");
    let (out, err, rest) = outputs(session).await;
    assert_eq!(out, b"hello\n");
    assert_eq!(err, b"oops\n");
    assert_eq!(rest.last(), Some(&Output::Exit(SessionStatus::exited(3))));
    assert!(rest.contains(&Output::End(Channel::Stdout)));

    // stdin through `cat`, 1 MiB, its end closing the command's stdin (v5).
    let mut r = exec(&["cat"], true);
    r.namespace = "default".into();
    r.pod = "web".into();
    let session = backend.clone().open_session(r).await.expect("opened");
    let input = session.input.clone();
    let payload: Vec<u8> = (0..1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    let chunks: Vec<Bytes> = payload
        .chunks(32 * 1024)
        .map(Bytes::copy_from_slice)
        .collect();
    let feed = async move {
        for c in chunks {
            input.send(Input::Data(c)).await.unwrap();
        }
        input.send(Input::End).await.unwrap();
    };
    let ((), (out, _, rest)) = tokio::join!(feed, outputs(session));
    assert!(out == payload, "{} bytes back", out.len());
    assert_eq!(rest.last(), Some(&Output::Exit(SessionStatus::Success)));

    // A command the machine does not have, as containerd says it.
    let mut r = exec(&["no-such-command-here"], false);
    r.namespace = "default".into();
    r.pod = "web".into();
    let session = backend.clone().open_session(r).await.expect("opened");
    let (_, _, rest) = outputs(session).await;
    let Some(Output::Exit(SessionStatus::Failure { message, .. })) = rest.last() else {
        panic!("{rest:?}");
    };
    assert!(
        message.contains("executable file not found in $PATH"),
        "{message}"
    );
    assert_eq!(fake.open_sessions(), 0);
}

#[tokio::test]
async fn a_refused_exec_keeps_the_api_servers_code_and_a_missing_pod_is_404() {
    use crate::backend::Backend;
    let (fake, backend) = cluster().await;
    fake.authenticate_as("system:serviceaccount:flotilla:agent");
    let mut r = exec(&["true"], false);
    r.namespace = "default".into();
    r.pod = "web".into();
    let refused = backend.clone().open_session(r).await.expect_err("refused");
    assert_eq!(refused.status, http::StatusCode::FORBIDDEN);
    fake.allow(
        flotilla_testkit::kube::AccessRule::subject("system:serviceaccount:flotilla:agent")
            .verbs(&["create"])
            .resources("", &["pods/exec"]),
    );
    let mut r = exec(&["true"], false);
    r.namespace = "default".into();
    r.pod = "gone".into();
    let refused = backend.clone().open_session(r).await.expect_err("refused");
    assert_eq!(refused.status, http::StatusCode::NOT_FOUND);
    let mut r = exec(&["true"], false);
    r.namespace = "default".into();
    r.pod = "web".into();
    let (_, _, rest) = outputs(backend.clone().open_session(r).await.expect("allowed")).await;
    assert_eq!(rest.last(), Some(&Output::Exit(SessionStatus::Success)));
}

#[tokio::test]
async fn port_forward_reaches_the_registered_address_and_an_unknown_port_fails_as_the_kubelet_says()
{
    use crate::backend::Backend;
    let (fake, backend) = cluster().await;
    let echo = flotilla_testkit::EchoServer::start().await;
    fake.forward("default", "web", 80, echo.addr());
    let mut r = request(SessionKind::PortForward { port: 80 });
    r.namespace = "default".into();
    r.pod = "web".into();
    r.impersonate = None;
    let session = backend.clone().open_session(r).await.expect("opened");
    let (input, mut output) = (session.input, session.output);
    use futures::StreamExt;
    let payload: Vec<u8> = (0..4 * 1024 * 1024u32).map(|i| (i % 239) as u8).collect();
    let chunks: Vec<Bytes> = payload
        .chunks(32 * 1024)
        .map(Bytes::copy_from_slice)
        .collect();
    let feed = async {
        for c in chunks {
            input.send(Input::Data(c)).await.unwrap();
        }
    };
    let mut back = Vec::new();
    let read = async {
        // The echo comes back whole before the client closes (no half-close here).
        while back.len() < payload.len() {
            match output.next().await {
                Some(Output::Data(Channel::Data, b)) => back.extend_from_slice(&b),
                other => panic!("{other:?} after {} bytes", back.len()),
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(30), async {
        tokio::join!(feed, read)
    })
    .await
    .expect("echoed in time");
    assert!(back == payload);
    input.send(Input::End).await.unwrap();
    let end = tokio::time::timeout(std::time::Duration::from_secs(10), output.next())
        .await
        .expect("ended");
    assert!(
        matches!(end, Some(Output::End(Channel::Data)) | None),
        "{end:?}"
    );

    let mut r = request(SessionKind::PortForward { port: 81 });
    r.namespace = "default".into();
    r.pod = "web".into();
    r.impersonate = None;
    let (_, _, rest) = outputs(backend.clone().open_session(r).await.expect("opened")).await;
    let Some(Output::Exit(SessionStatus::Failure { message, .. })) = rest.first() else {
        panic!("{rest:?}");
    };
    assert!(
        message.starts_with("error forwarding port 81 to pod web"),
        "{message}"
    );
}
