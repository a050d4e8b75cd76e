use super::*;
use std::os::unix::fs::PermissionsExt;

/// A plugin: a shell script in `dir` with `body`.
fn plugin(dir: &std::path::Path, body: &str) -> ExecPlugin {
    let path = dir.join("plugin.sh");
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    ExecPlugin {
        command: path.display().to_string(),
        args: vec!["get-token".into()],
        env: vec![("TEAM".into(), "a".into())],
        interactive: Interactive::Never,
    }
}

const CREDENTIAL: &str = r#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"tok-123","expirationTimestamp":"2099-01-01T00:00:00Z"}}"#;

#[tokio::test]
async fn a_plugin_gets_the_exec_info_its_args_and_env_and_its_token_is_read() {
    let dir = tempfile::tempdir().unwrap();
    // The script answers only when called as kubectl calls it.
    let p = plugin(
        dir.path(),
        &format!(
            "[ \"$1\" = get-token ] || exit 3\n[ \"$TEAM\" = a ] || exit 4\n\
             echo \"$KUBERNETES_EXEC_INFO\" | grep -q '\"interactive\":false' || exit 5\n\
             echo '{CREDENTIAL}'"
        ),
    );
    assert_eq!(p.token().await.unwrap(), "tok-123");
}

#[tokio::test]
async fn failures_are_worded_as_client_go_words_them() {
    let dir = tempfile::tempdir().unwrap();
    let p = plugin(dir.path(), "echo 'sign-in failed' >&2; exit 1");
    let e = p.token().await.unwrap_err().to_string();
    assert_eq!(
        e,
        format!("exec: executable {} failed with exit code 1", p.command)
    );
    let missing = ExecPlugin {
        command: "no-such-plugin-xyz".into(),
        ..p.clone()
    };
    assert_eq!(
        missing.token().await.unwrap_err().to_string(),
        "exec: executable no-such-plugin-xyz not found"
    );
    let p = plugin(dir.path(), "echo not json");
    assert!(
        p.token()
            .await
            .unwrap_err()
            .to_string()
            .contains("not JSON")
    );
}

#[test]
fn an_answer_must_be_a_current_v1_exec_credential_with_a_token() {
    let p = ExecPlugin {
        command: "kubectl".into(),
        args: Vec::new(),
        env: Vec::new(),
        interactive: Interactive::Never,
    };
    let now = 1_800_000_000;
    assert_eq!(p.credential(CREDENTIAL.as_bytes(), now).unwrap(), "tok-123");
    let cases = [
        (
            CREDENTIAL.replace("/v1\"", "/v1beta1\""),
            "exec plugin is configured to use API version client.authentication.k8s.io/v1",
        ),
        (CREDENTIAL.replace("tok-123", ""), "no status.token"),
        (
            CREDENTIAL.replace("2099-01-01", "2020-01-01"),
            "a credential that expired at 2020-01-01T00:00:00Z",
        ),
        (
            CREDENTIAL.replace("\"token\"", "\"clientCertificateData\":\"x\",\"t\""),
            "flotilla needs a token",
        ),
    ];
    for (answer, want) in cases {
        let e = p
            .credential(answer.as_bytes(), now)
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "want {want:?} in {e:?}");
        assert!(e.starts_with("exec: executable kubectl returned"), "{e}");
    }
    assert_eq!(parse_env("A=b=c").unwrap(), ("A".into(), "b=c".into()));
    assert!(parse_env("=x").is_err());
}

#[tokio::test]
async fn a_plugin_printing_past_the_cap_is_cut_off_at_once() {
    // Review r3 §7: the CLI waited for the plugin with its stdout pipe still open, so one that
    // printed more than the cap blocked on the full pipe until the 5 min timeout.
    let dir = tempfile::tempdir().unwrap();
    let p = plugin(dir.path(), "yes flotilla-flotilla-flotilla");
    let started = std::time::Instant::now();
    let e = tokio::time::timeout(std::time::Duration::from_secs(30), p.token())
        .await
        .expect("refused long before the plugin's timeout")
        .unwrap_err()
        .to_string();
    assert!(e.contains(&format!("more than {MAX_OUTPUT} bytes")), "{e}");
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
}
