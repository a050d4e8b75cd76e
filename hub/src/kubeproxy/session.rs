//! What an exec, attach or port-forward request asks for, from its path and query alone
//! (pure): the [`Spec`] the hub sends the agent, so the agent never parses a query.
//!
//! The query is the API server's `PodExecOptions` / `PodAttachOptions`: `command` (repeated),
//! `container`, `stdin`, `stdout`, `stderr`, `tty`, booleans as Go's `strconv.ParseBool`
//! reads them. kubectl's port-forward carries its ports in each SPDY stream's headers, so its
//! query is not read. Which subresource it is comes from the path
//! (`/api/v1/namespaces/{ns}/pods/{pod}/{exec|attach|portforward}`, checked whole).

use flotilla_bus::tunnel::session::{Kind, Spec, Streams, Violation, pod_of};
use thiserror::Error;

/// Why a session request is refused (400).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum QueryError {
    /// The path is not exactly a pod's exec, attach or port-forward subresource.
    #[error(
        "exec, attach and port-forward are served on /api/v1/namespaces/NAMESPACE/pods/NAME/\
         {{exec,attach,portforward}} only; got {0:?}"
    )]
    Path(String),
    /// A boolean parameter that is not one.
    #[error("query parameter {name}={value:?} is not a boolean (true or false)")]
    Bool {
        /// The parameter.
        name: &'static str,
        /// Its value, cut.
        value: String,
    },
    /// The session asked for is not one an API server serves.
    #[error("{0}")]
    Invalid(#[from] Violation),
}

/// The session kind a spoke path's subresource names, if it is one (`None`: not a session).
pub fn kind_of(subresource: &str) -> Option<Kind> {
    match subresource {
        "exec" => Some(Kind::Exec),
        "attach" => Some(Kind::Attach),
        "portforward" => Some(Kind::PortForward),
        _ => None,
    }
}

/// The session of an exec or attach request: `path` checked to be `kind`'s, the query read.
/// Port-forward's per-connection sessions are built with [`port_forward`].
pub fn exec_or_attach(kind: Kind, path: &str, query: &str) -> Result<Spec, QueryError> {
    if pod_of(path, kind).is_none() {
        return Err(QueryError::Path(path.chars().take(200).collect()));
    }
    let mut command = Vec::new();
    let mut container = None;
    let mut streams = Streams::default();
    for (name, value) in form_urlencoded::parse(query.as_bytes()) {
        match name.as_ref() {
            "command" => command.push(value.into_owned()),
            "container" => container = Some(value.into_owned()).filter(|c| !c.is_empty()),
            "stdin" => streams.stdin = boolean("stdin", &value)?,
            "stdout" => streams.stdout = boolean("stdout", &value)?,
            "stderr" => streams.stderr = boolean("stderr", &value)?,
            "tty" => streams.tty = boolean("tty", &value)?,
            // Other parameters (kube-rs sends none; an API server ignores unknown ones).
            _ => {}
        }
    }
    let spec = Spec {
        kind,
        container,
        command,
        streams,
        port: 0,
    };
    // The same checks the agent runs on the wire form.
    Spec::from_wire(&spec.to_wire())?;
    Ok(spec)
}

/// The session of one forwarded connection to `port` of the pod `path` names.
pub fn port_forward(path: &str, port: u16) -> Result<Spec, QueryError> {
    if pod_of(path, Kind::PortForward).is_none() {
        return Err(QueryError::Path(path.chars().take(200).collect()));
    }
    let spec = Spec {
        kind: Kind::PortForward,
        container: None,
        command: Vec::new(),
        streams: Streams::default(),
        port,
    };
    Spec::from_wire(&spec.to_wire())?;
    Ok(spec)
}

/// Go's `strconv.ParseBool`, as the API server reads a query boolean.
fn boolean(name: &'static str, value: &str) -> Result<bool, QueryError> {
    match value {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        other => Err(QueryError::Bool {
            name,
            value: other.chars().take(32).collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXEC: &str = "/api/v1/namespaces/default/pods/p/exec";

    #[test]
    fn kubectls_exec_query_is_read_whole() {
        let spec = exec_or_attach(
            Kind::Exec,
            EXEC,
            "command=sh&command=-c&command=echo%20hi%20%3E%262&container=c&stderr=true&stdout=true",
        )
        .unwrap();
        assert_eq!(spec.command, ["sh", "-c", "echo hi >&2"]);
        assert_eq!(spec.container.as_deref(), Some("c"));
        assert_eq!(
            spec.streams,
            Streams {
                stdin: false,
                stdout: true,
                stderr: true,
                tty: false
            }
        );
        let attach = exec_or_attach(
            Kind::Attach,
            "/api/v1/namespaces/default/pods/p/attach",
            "container=c&stdin=1&stdout=T&tty=true",
        )
        .unwrap();
        assert!(attach.streams.stdin && attach.streams.tty && !attach.streams.stderr);
        assert!(attach.command.is_empty());
    }

    #[test]
    fn requests_no_api_server_would_serve_are_refused() {
        let refused = |kind, path, query| exec_or_attach(kind, path, query).unwrap_err();
        assert!(matches!(
            refused(
                Kind::Exec,
                "/api/v1/namespaces/default/pods/p/exec/x",
                "command=ls&stdout=1"
            ),
            QueryError::Path(_)
        ));
        assert!(matches!(
            refused(
                Kind::Exec,
                "/api/v1/namespaces/default/pods/p/attach",
                "command=ls&stdout=1"
            ),
            QueryError::Path(_)
        ));
        assert!(matches!(
            refused(Kind::Exec, EXEC, "command=ls&stdout=yes"),
            QueryError::Bool { name: "stdout", .. }
        ));
        // No command, no stream, a tty with stderr.
        for query in [
            "stdout=true",
            "command=ls",
            "command=ls&stdout=true&stderr=true&tty=true",
        ] {
            assert!(
                matches!(refused(Kind::Exec, EXEC, query), QueryError::Invalid(_)),
                "{query}"
            );
        }
        let attach = "/api/v1/namespaces/default/pods/p/attach";
        assert!(matches!(
            refused(Kind::Attach, attach, "command=ls&stdout=true"),
            QueryError::Invalid(_)
        ));
    }

    #[test]
    fn a_forwarded_connection_names_its_port_and_the_path_its_pod() {
        let path = "/api/v1/namespaces/ns/pods/p/portforward";
        assert_eq!(port_forward(path, 8080).unwrap().port, 8080);
        assert!(port_forward(path, 0).is_err());
        assert!(port_forward("/api/v1/namespaces/ns/pods/p/exec", 80).is_err());
        assert_eq!(kind_of("portforward"), Some(Kind::PortForward));
        assert_eq!(kind_of("log"), None);
    }
}
