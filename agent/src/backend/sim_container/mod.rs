//! The simulated container behind a simulated cluster's exec, attach and port-forward — a
//! **simulation**, so that `kubectl exec`, `cp`, `attach` and `port-forward` through the hub
//! behave against `flotilla-sim` and the tests as against a real cluster. No process runs:
//!
//! - **files** ([`fs`]): the directories every container has, `/etc/hostname`, each ConfigMap
//!   and Secret volume the container mounts (read when the session opens), read-only; under a
//!   writable layer per pod (64 MiB), kept across sessions (a `kubectl cp` in, then out), gone
//!   with the agent;
//! - **environment**: the container's `env` (`value`, `configMapKeyRef`, `secretKeyRef`,
//!   `fieldRef` of the pod's name, namespace and IP), `envFrom`, `HOSTNAME`, `PATH`, `HOME`,
//!   `KUBERNETES_SERVICE_HOST`/`PORT`;
//! - **commands** ([`commands`], [`shell`], [`tar`]): `echo`, `cat`, `ls`, `env`, `printenv`,
//!   `test`, `true`, `false`, `hostname`, `pwd`, `mkdir`, `rm`, `sleep`, `tail -c`, `wc -c`,
//!   `tar` as `kubectl cp` runs it, and `sh` (`-c`, or a script on stdin), with exit codes and
//!   stderr; another command exec'd directly fails as containerd says it
//!   (`executable file not found in $PATH`), in `sh` it is `not found` (127);
//! - **attach**: the main process echoes stdin to stdout (with `-i`) and exits 0 when it ends;
//!   without stdin it says it is running and waits for the client to detach;
//! - **port-forward**: every declared `containerPort` is an echo server (bytes back as they
//!   come; after the client's half-close the rest, then its own close); another port fails with
//!   the kubelet's words (`connection refused`).
//!
//! Nothing is spawned: the command runs inside the session's output stream, which the agent
//! polls only within the hub's credit — a client that stops reading stalls the command.

pub mod commands;
pub mod fs;
pub mod io;
pub mod shell;
pub mod tar;

use super::api::ApiResponse;
use super::session::{
    Channel, Input, Output, OutputStream, Session, SessionKind, SessionRequest, SessionStatus,
    input_channel,
};
use super::{Backend, ManifestId};
use bytes::Bytes;
use futures::StreamExt;
use http::StatusCode;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// The writable layers of a simulated cluster's pods, by pod uid.
#[derive(Debug, Default)]
pub struct Layers {
    layers: Mutex<HashMap<String, Arc<Mutex<fs::Layer>>>>,
}

impl Layers {
    /// The layer of the pod `uid` (made empty the first time).
    fn of(&self, uid: &str) -> Arc<Mutex<fs::Layer>> {
        let mut layers = self.layers.lock().unwrap_or_else(|e| e.into_inner());
        layers
            .entry(uid.to_string())
            .or_insert_with(|| Arc::new(Mutex::new(fs::Layer::new(fs::POD_LAYER_BYTES))))
            .clone()
    }

    /// Drops the layers of pods that are gone (their uid not in `live`).
    fn keep_only<'a>(&self, live: impl IntoIterator<Item = &'a str>) {
        let live: std::collections::HashSet<&str> = live.into_iter().collect();
        let mut layers = self.layers.lock().unwrap_or_else(|e| e.into_inner());
        layers.retain(|uid, _| live.contains(uid.as_str()));
    }

    /// Pods with a layer now.
    #[cfg(test)]
    fn count(&self) -> usize {
        self.layers.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

fn object_id(kind: &str, namespace: &str, name: &str) -> ManifestId {
    ManifestId {
        group: String::new(),
        version: "v1".into(),
        kind: kind.into(),
        namespace: namespace.into(),
        name: name.into(),
    }
}

fn refused(status: StatusCode, reason: &str, message: &str) -> ApiResponse {
    ApiResponse::status(status, reason, message)
}

/// Opens a session on a pod of `backend` (a simulated cluster), its writable layer in
/// `layers`.
pub async fn open(
    backend: &dyn Backend,
    layers: &Layers,
    request: SessionRequest,
) -> Result<Session, ApiResponse> {
    let (ns, name) = (request.namespace.as_str(), request.pod.as_str());
    let pod = match backend.get(&object_id("Pod", ns, name)).await {
        Ok(Some(pod)) => pod,
        Ok(None) => {
            let message = format!("pods \"{name}\" not found");
            return Err(refused(StatusCode::NOT_FOUND, "NotFound", &message));
        }
        Err(e) => {
            let message = e.to_string();
            return Err(refused(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                &message,
            ));
        }
    };
    if let SessionKind::PortForward { port } = request.kind {
        return Ok(port_forward(&pod, port));
    }
    if pod["status"]["phase"] != "Running" {
        let message = format!(
            "unable to upgrade connection: pod {name} is not running (simulated: its phase is {})",
            pod["status"]["phase"].as_str().unwrap_or("unknown")
        );
        return Err(refused(StatusCode::BAD_REQUEST, "BadRequest", &message));
    }
    let container = super::sim_api::logs::choose(&pod, name, request.container.as_deref())
        .map_err(|m| refused(StatusCode::BAD_REQUEST, "BadRequest", &m))?;
    let spec = pod["spec"]["containers"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == container.name.as_str()))
        .cloned()
        .unwrap_or(Value::Null);
    // The layers of deleted pods go as a session opens (a layer is up to 64 MiB).
    if let Ok(pods) = backend.list("Pod", None).await {
        layers.keep_only(pods.iter().map(uid));
    }
    let sources = Sources::read(backend, ns, &pod, &spec).await;
    let ctx = commands::Ctx {
        view: fs::View::new(sources.image(&pod, &spec), layers.of(uid(&pod))),
        env: sources.env(&pod, &spec),
        cwd: "/".into(),
    };
    Ok(match request.kind {
        SessionKind::Exec { command } => exec(ctx, command, request.streams),
        _ => attach(request.streams, &container.name),
    })
}

fn uid(pod: &Value) -> &str {
    pod["metadata"]["uid"]
        .as_str()
        .or_else(|| pod["metadata"]["name"].as_str())
        .unwrap_or_default()
}

/// Outputs written by `run` as the stream is polled (nothing spawned).
fn driven<F>(run: F, rx: mpsc::Receiver<Output>) -> OutputStream
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let run = futures::stream::once(run).filter_map(|()| async { None });
    let outputs =
        futures::stream::unfold(
            rx,
            |mut rx| async move { rx.recv().await.map(|out| (out, rx)) },
        );
    Box::pin(futures::stream::select(run, outputs))
}

fn exec(mut ctx: commands::Ctx, command: Vec<String>, streams: super::session::Streams) -> Session {
    let (input, input_rx) = input_channel();
    let (tx, rx) = mpsc::channel(1);
    let run = async move {
        let mut term = io::Term {
            out: tx.clone(),
            input: input_rx,
            eof: !streams.stdin,
            tty: streams.tty,
        };
        let exit = {
            let mut io = io::Io::session(&mut term);
            commands::run(&mut ctx, &mut io, &command).await
        };
        let status = match exit {
            commands::Exit::Code(code) => SessionStatus::exited(code),
            commands::Exit::NotFound(name) => SessionStatus::internal_error(&format!(
                "error executing command in container: failed to exec in container: failed to \
                 start exec: OCI runtime exec failed: exec failed: unable to start container \
                 process: exec: \"{name}\": executable file not found in $PATH: unknown"
            )),
        };
        for (open, channel) in [
            (streams.stdout, Channel::Stdout),
            (streams.stderr, Channel::Stderr),
        ] {
            if open {
                let _ = tx.send(Output::End(channel)).await;
            }
        }
        let _ = tx.send(Output::Exit(status)).await;
    };
    Session {
        input,
        output: driven(run, rx),
    }
}

fn attach(streams: super::session::Streams, container: &str) -> Session {
    let (input, input_rx) = input_channel();
    let (tx, rx) = mpsc::channel(1);
    let line = format!("simulated container {container}: attached; it writes nothing more\n");
    let run = async move {
        let mut term = io::Term {
            out: tx.clone(),
            input: input_rx,
            eof: !streams.stdin,
            tty: streams.tty,
        };
        if !streams.stdin {
            let _ = tx
                .send(Output::Data(Channel::Stdout, Bytes::from(line)))
                .await;
            // The main process runs until the client detaches.
            return std::future::pending().await;
        }
        while let Some(b) = term.read().await {
            let _ = tx.send(Output::Data(Channel::Stdout, b)).await;
        }
        for (open, channel) in [
            (streams.stdout, Channel::Stdout),
            (streams.stderr, Channel::Stderr),
        ] {
            if open {
                let _ = tx.send(Output::End(channel)).await;
            }
        }
        let _ = tx.send(Output::Exit(SessionStatus::Success)).await;
    };
    Session {
        input,
        output: driven(run, rx),
    }
}

/// A forwarded connection: an echo server on a declared container port, else the kubelet's
/// refusal.
fn port_forward(pod: &Value, port: u16) -> Session {
    let (input, input_rx) = input_channel();
    let declared = pod["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| c["ports"].as_array().cloned().unwrap_or_default())
        .any(|p| p["containerPort"].as_u64() == Some(u64::from(port)));
    if !declared {
        let name = pod["metadata"]["name"].as_str().unwrap_or_default();
        let ns = pod["metadata"]["namespace"].as_str().unwrap_or_default();
        let message = flotilla_kubestream::portforward::forward_error(
            port,
            name,
            uid(pod),
            &format!(
                "failed to connect to localhost:{port} inside namespace \"{ns}\", IPv4: dial tcp4 \
                 127.0.0.1:{port}: connect: connection refused (simulated: no container declares \
                 this port)"
            ),
        );
        let status = SessionStatus::Failure {
            reason: "InternalError".into(),
            message,
            code: Some(500),
        };
        return Session {
            input,
            output: Box::pin(futures::stream::iter([Output::Exit(status)])),
        };
    }
    let outputs = futures::stream::unfold(Some(input_rx), |rx| async move {
        let mut rx = rx?;
        loop {
            match rx.recv().await {
                Some(Input::Data(b)) if !b.is_empty() => {
                    return Some((Output::Data(Channel::Data, b), Some(rx)));
                }
                Some(Input::Data(_) | Input::Resize { .. }) => {}
                Some(Input::End) | None => return Some((Output::End(Channel::Data), None)),
            }
        }
    });
    Session {
        input,
        output: Box::pin(outputs),
    }
}

/// The ConfigMaps and Secrets a container reads, by name.
struct Sources {
    config_maps: HashMap<String, Value>,
    secrets: HashMap<String, Value>,
}

/// The data of a ConfigMap or Secret (a Secret's decoded), by key.
fn data_of(object: &Value, secret: bool) -> BTreeMap<String, Bytes> {
    let mut out = BTreeMap::new();
    if let Some(data) = object["data"].as_object() {
        for (k, v) in data {
            let text = v.as_str().unwrap_or_default();
            let bytes = if secret {
                data_encoding::BASE64
                    .decode(text.as_bytes())
                    .map(Bytes::from)
                    .unwrap_or_default()
            } else {
                Bytes::copy_from_slice(text.as_bytes())
            };
            out.insert(k.clone(), bytes);
        }
    }
    if let Some(data) = object["stringData"].as_object() {
        for (k, v) in data {
            out.insert(
                k.clone(),
                Bytes::copy_from_slice(v.as_str().unwrap_or_default().as_bytes()),
            );
        }
    }
    out
}

impl Sources {
    /// Reads every ConfigMap and Secret the pod's volumes and the container's env name.
    async fn read(backend: &dyn Backend, ns: &str, pod: &Value, container: &Value) -> Self {
        let mut wanted: Vec<(bool, String)> = Vec::new();
        for v in pod["spec"]["volumes"].as_array().into_iter().flatten() {
            if let Some(name) = v["configMap"]["name"].as_str() {
                wanted.push((false, name.into()));
            }
            if let Some(name) = v["secret"]["secretName"].as_str() {
                wanted.push((true, name.into()));
            }
        }
        for e in container["env"].as_array().into_iter().flatten() {
            if let Some(name) = e["valueFrom"]["configMapKeyRef"]["name"].as_str() {
                wanted.push((false, name.into()));
            }
            if let Some(name) = e["valueFrom"]["secretKeyRef"]["name"].as_str() {
                wanted.push((true, name.into()));
            }
        }
        for e in container["envFrom"].as_array().into_iter().flatten() {
            if let Some(name) = e["configMapRef"]["name"].as_str() {
                wanted.push((false, name.into()));
            }
            if let Some(name) = e["secretRef"]["name"].as_str() {
                wanted.push((true, name.into()));
            }
        }
        let mut sources = Sources {
            config_maps: HashMap::new(),
            secrets: HashMap::new(),
        };
        for (secret, name) in wanted {
            let kind = if secret { "Secret" } else { "ConfigMap" };
            if let Ok(Some(object)) = backend.get(&object_id(kind, ns, &name)).await {
                let map = if secret {
                    &mut sources.secrets
                } else {
                    &mut sources.config_maps
                };
                map.insert(name, object);
            }
        }
        sources
    }

    fn data(&self, secret: bool, name: &str) -> BTreeMap<String, Bytes> {
        let map = if secret {
            &self.secrets
        } else {
            &self.config_maps
        };
        map.get(name)
            .map(|o| data_of(o, secret))
            .unwrap_or_default()
    }

    /// The image: `/etc/hostname` and the mounted ConfigMaps and Secrets.
    fn image(&self, pod: &Value, container: &Value) -> fs::Image {
        let hostname = pod["metadata"]["name"].as_str().unwrap_or_default();
        let mut files = vec![(
            "/etc/hostname".to_string(),
            Bytes::from(format!("{hostname}\n")),
        )];
        let volumes = pod["spec"]["volumes"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let mut mounts = Vec::new();
        for mount in container["volumeMounts"].as_array().into_iter().flatten() {
            let (Some(name), Some(path)) = (mount["name"].as_str(), mount["mountPath"].as_str())
            else {
                continue;
            };
            let Some(volume) = volumes.iter().find(|v| v["name"] == name) else {
                continue;
            };
            let (secret, source) = if let Some(cm) = volume["configMap"]["name"].as_str() {
                (false, cm)
            } else if let Some(s) = volume["secret"]["secretName"].as_str() {
                (true, s)
            } else {
                continue;
            };
            mounts.push(path.to_string());
            let source_of = if secret {
                &volume["secret"]
            } else {
                &volume["configMap"]
            };
            let data = self.data(secret, source);
            match source_of["items"].as_array() {
                Some(items) => {
                    for item in items {
                        let (Some(key), Some(to)) = (item["key"].as_str(), item["path"].as_str())
                        else {
                            continue;
                        };
                        if let Some(b) = data.get(key) {
                            files.push((format!("{path}/{to}"), b.clone()));
                        }
                    }
                }
                None => files.extend(data.into_iter().map(|(k, b)| (format!("{path}/{k}"), b))),
            }
        }
        fs::image(files, mounts)
    }

    /// The container's environment.
    fn env(&self, pod: &Value, container: &Value) -> BTreeMap<String, String> {
        let text = |b: &Bytes| String::from_utf8_lossy(b).into_owned();
        let name = pod["metadata"]["name"].as_str().unwrap_or_default();
        let mut env = BTreeMap::from([
            ("HOSTNAME".to_string(), name.to_string()),
            ("HOME".into(), "/root".into()),
            (
                "PATH".into(),
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
            ),
            ("KUBERNETES_SERVICE_HOST".into(), "10.96.0.1".into()),
            ("KUBERNETES_SERVICE_PORT".into(), "443".into()),
        ]);
        for e in container["envFrom"].as_array().into_iter().flatten() {
            let prefix = e["prefix"].as_str().unwrap_or_default();
            let (secret, source) = match (
                e["configMapRef"]["name"].as_str(),
                e["secretRef"]["name"].as_str(),
            ) {
                (Some(cm), _) => (false, cm),
                (None, Some(s)) => (true, s),
                _ => continue,
            };
            for (k, v) in self.data(secret, source) {
                env.insert(format!("{prefix}{k}"), text(&v));
            }
        }
        for e in container["env"].as_array().into_iter().flatten() {
            let Some(key) = e["name"].as_str() else {
                continue;
            };
            let from = &e["valueFrom"];
            let value = if let Some(v) = e["value"].as_str() {
                Some(v.to_string())
            } else if let Some(field) = from["fieldRef"]["fieldPath"].as_str() {
                match field {
                    "metadata.name" => Some(name.to_string()),
                    "metadata.namespace" => {
                        pod["metadata"]["namespace"].as_str().map(str::to_string)
                    }
                    "status.podIP" => pod["status"]["podIP"].as_str().map(str::to_string),
                    _ => None,
                }
            } else {
                let (secret, r) = match (from.get("configMapKeyRef"), from.get("secretKeyRef")) {
                    (Some(r), _) => (false, r),
                    (None, Some(r)) => (true, r),
                    _ => continue,
                };
                let (Some(source), Some(k)) = (r["name"].as_str(), r["key"].as_str()) else {
                    continue;
                };
                self.data(secret, source).get(k).map(text)
            };
            env.insert(key.to_string(), value.unwrap_or_default());
        }
        env
    }
}

#[cfg(test)]
mod tests {
    use super::Layers;

    #[test]
    fn the_layers_of_pods_that_are_gone_are_dropped() {
        let layers = Layers::default();
        let kept = layers.of("uid-web");
        let _ = layers.of("uid-deleted");
        assert_eq!(layers.count(), 2);
        layers.keep_only(["uid-web", "uid-other"]);
        assert_eq!(layers.count(), 1);
        // The live pod keeps its own layer.
        assert!(std::sync::Arc::ptr_eq(&kept, &layers.of("uid-web")));
    }
}
