//! Logs of simulated pods (`GET …/pods/<name>/log`): the simulated kubelet's record of what it
//! did with the container — image pulled, container started, ready — and, with `follow=true`,
//! a line for each change of the pod and a heartbeat every [`HEARTBEAT`], until the pod is
//! deleted (the container "terminates") or the client goes away. A simulated container runs no
//! process, so this is the only output it has; the point is that `kubectl logs [-f]` behaves
//! through the proxy as against a real cluster.
//!
//! Parameters as the API server takes them: `container` (required when the pod has several),
//! `timestamps`, `tailLines`, `limitBytes`; `previous` is refused (a simulated container never
//! restarts). The stream is a plain value (no task): it ends the moment the proxy drops it.

use super::{SimObjects, bad_request, failure};
use crate::backend::api::{ApiRequest, ApiResponse};
use bytes::Bytes;
use flotilla_kubemem::engine::{Objects, Target};
use http::StatusCode;
use serde_json::Value;
use std::collections::VecDeque;
use std::time::{Duration, SystemTime};

/// How often a followed log says the container is still running.
pub const HEARTBEAT: Duration = Duration::from_secs(5);

/// One simulated container of a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Container {
    /// Its name.
    pub(crate) name: String,
    /// Its image.
    pub(crate) image: String,
}

/// The containers of a pod object.
fn containers(pod: &Value) -> Vec<Container> {
    pod["spec"]["containers"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .map(|c| Container {
                    name: c["name"].as_str().unwrap_or_default().to_string(),
                    image: c["image"].as_str().unwrap_or_default().to_string(),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn ready(pod: &Value) -> bool {
    pod["status"]["phase"] == "Running"
}

fn version(pod: &Value) -> &str {
    pod["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
}

/// Which container of `pod` the request names, or the API server's answer to a bad choice
/// (also the simulated container's, for exec and attach).
pub(crate) fn choose(pod: &Value, name: &str, asked: Option<&str>) -> Result<Container, String> {
    let all = containers(pod);
    let names = || {
        all.iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    };
    match asked.filter(|a| !a.is_empty()) {
        Some(a) => all
            .iter()
            .find(|c| c.name == a)
            .cloned()
            .ok_or_else(|| format!("container {a} is not valid for pod {name}")),
        None if all.len() == 1 => Ok(all[0].clone()),
        None if all.is_empty() => Err(format!("pod {name} has no containers")),
        None => Err(format!(
            "a container name must be specified for pod {name}, choose one of: [{}]",
            names()
        )),
    }
}

/// The lines of the container's life so far.
fn history(pod: &Value, c: &Container) -> Vec<String> {
    let mut lines = vec![
        format!("simulated kubelet: pulled image {:?}", c.image),
        format!("simulated kubelet: started container {}", c.name),
    ];
    if ready(pod) {
        lines.push(format!("simulated kubelet: container {} is ready", c.name));
    }
    lines
}

/// How lines are written.
#[derive(Debug, Clone, Copy)]
struct Format {
    timestamps: bool,
}

impl Format {
    fn line(self, text: &str) -> Bytes {
        let mut out = String::with_capacity(text.len() + 32);
        if self.timestamps {
            out.push_str(&humantime::format_rfc3339_nanos(SystemTime::now()).to_string());
            out.push(' ');
        }
        out.push_str(text);
        out.push('\n');
        Bytes::from(out)
    }
}

/// A followed log.
struct Follow {
    objects: SimObjects,
    target: Target,
    container: Container,
    format: Format,
    follower: Option<crate::backend::ApiFollow>,
    pending: VecDeque<Bytes>,
    version: String,
    ready: bool,
    /// Bytes still allowed (`limitBytes`).
    budget: Option<u64>,
    done: bool,
}

impl Follow {
    /// The next chunk; `None` ends the stream.
    async fn next(&mut self) -> Option<Bytes> {
        loop {
            if let Some(line) = self.pending.pop_front() {
                return self.spend(line);
            }
            if self.done {
                return None;
            }
            let changed = async {
                match self.follower.as_mut() {
                    Some(f) => f.changes.changed().await.is_ok(),
                    None => std::future::pending().await,
                }
            };
            match tokio::time::timeout(HEARTBEAT, changed).await {
                Err(_) => {
                    let text = format!(
                        "simulated kubelet: container {} running",
                        self.container.name
                    );
                    self.pending.push_back(self.format.line(&text));
                }
                Ok(false) => self.done = true,
                Ok(true) => self.look().await,
            }
        }
    }

    /// Reads the pod again after a change of the cluster.
    async fn look(&mut self) {
        let Ok(pod) = self.objects.get(&self.target).await else {
            return;
        };
        let Some(pod) = pod else {
            let text = format!(
                "simulated kubelet: container {} terminated (pod deleted)",
                self.container.name
            );
            self.pending.push_back(self.format.line(&text));
            self.done = true;
            return;
        };
        if version(&pod) != self.version {
            self.version = version(&pod).to_string();
            let text = format!(
                "simulated kubelet: pod updated (resourceVersion {})",
                self.version
            );
            self.pending.push_back(self.format.line(&text));
        }
        if ready(&pod) && !self.ready {
            self.ready = true;
            let text = format!(
                "simulated kubelet: container {} is ready",
                self.container.name
            );
            self.pending.push_back(self.format.line(&text));
        }
    }

    /// `line`, cut to what `limitBytes` still allows (the stream ends with the limit).
    fn spend(&mut self, line: Bytes) -> Option<Bytes> {
        let Some(budget) = self.budget.as_mut() else {
            return Some(line);
        };
        if *budget == 0 {
            return None;
        }
        let n = (line.len() as u64).min(*budget);
        *budget -= n;
        if *budget == 0 {
            self.done = true;
            self.pending.clear();
        }
        Some(line.slice(..n as usize))
    }
}

/// Serves a pod's log.
pub(super) async fn serve(
    objects: SimObjects,
    target: Target,
    request: &ApiRequest,
) -> ApiResponse {
    let pod = match objects.get(&target).await {
        Ok(Some(p)) => p,
        Ok(None) => return failure(&target.not_found(&target.name)),
        Err(e) => return failure(&e),
    };
    if matches!(request.param("previous").as_deref(), Some("true" | "1")) {
        return bad_request(&format!(
            "previous terminated container {} in pod {} not found",
            request.param("container").unwrap_or_default(),
            target.name
        ));
    }
    let container = match choose(&pod, &target.name, request.param("container").as_deref()) {
        Ok(c) => c,
        Err(message) => return bad_request(&message),
    };
    let number = |name: &str| -> Result<Option<u64>, ApiResponse> {
        match request.param(name) {
            None => Ok(None),
            Some(v) => v
                .parse::<u64>()
                .map(Some)
                .map_err(|_| bad_request(&format!("{name}: {v:?} is not a non-negative integer"))),
        }
    };
    let (tail, limit) = match (number("tailLines"), number("limitBytes")) {
        (Ok(t), Ok(l)) => (t, l),
        (Err(resp), _) | (_, Err(resp)) => return resp,
    };
    let format = Format {
        timestamps: matches!(request.param("timestamps").as_deref(), Some("true" | "1")),
    };
    let mut lines = history(&pod, &container);
    if let Some(tail) = tail {
        let keep = (tail as usize).min(lines.len());
        lines.drain(..lines.len() - keep);
    }
    let follow = matches!(request.param("follow").as_deref(), Some("true" | "1"));
    let mut follower = if follow {
        objects.backend.follow_api()
    } else {
        None
    };
    if let Some(f) = follower.as_mut() {
        f.changes.mark_unchanged();
    }
    let state = Follow {
        pending: lines.iter().map(|l| format.line(l)).collect(),
        version: version(&pod).to_string(),
        ready: ready(&pod),
        objects,
        target,
        container,
        format,
        follower,
        budget: limit,
        done: !follow,
    };
    let stream = futures::stream::unfold(state, |mut state| async move {
        let chunk = state.next().await?;
        Some((Ok(chunk), state))
    });
    let mut headers = http::HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain"),
    );
    ApiResponse {
        status: StatusCode::OK,
        headers,
        body: Box::pin(stream),
    }
}
