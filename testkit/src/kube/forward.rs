//! The fake API server's `pods/portforward` (I/O), as the kubelet serves kube-rs: a WebSocket
//! speaking `v4.channel.k8s.io` with the ports in `?ports=` (`80` or `80,8080`); port `i` has
//! data on channel `2i` and errors on `2i+1`, each channel's first message the port as two
//! little-endian bytes. Each port is connected to the address the test registered for it
//! ([`super::FakeKube::forward`]); an unregistered port, or one whose address refuses, gets the
//! kubelet's words on its error channel (`error forwarding port P to pod NAME, uid UID: …`).
//! The pod's end of every connection closes the WebSocket (1000); the client's close ends
//! the connections. This protocol has no half-close (as on a real cluster).

use super::streams::{Refused, Streams, Ws, admit, upgraded};
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::response::Response;
use bytes::{Bytes, BytesMut};
use flotilla_kubemem::ApiError;
use flotilla_kubemem::server;
use flotilla_kubestream::channel::Protocol;
use flotilla_kubestream::negotiate::{self, Purpose, WebSocketUpgrade, WsProtocol};
use futures::{SinkExt, StreamExt};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, frame::coding};

/// The most read from a forwarded connection at once (one WebSocket message).
const READ_BYTES: usize = 32 * 1024;

fn refuse(code: u16, message: String) -> Response {
    server::error(&ApiError::new(code, "BadRequest", message))
}

/// The ports asked for, or why not.
fn ports(query: &str) -> Result<Vec<u16>, String> {
    let asked: Vec<String> = server::query(query)
        .into_iter()
        .filter(|(k, _)| k == "ports")
        .flat_map(|(_, v)| v.split(',').map(str::to_string).collect::<Vec<_>>())
        .collect();
    if asked.is_empty() {
        return Err("query parameter \"ports\" is required".into());
    }
    asked
        .iter()
        .map(|p| {
            p.trim()
                .parse::<u16>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("invalid port {p:?}"))
        })
        .collect()
}

/// The WebSocket handshake, with `v4.channel.k8s.io` (the kubelet's port-forward protocol
/// for channel clients).
fn handshake(req: &Request) -> Result<Response, Refused> {
    let checked =
        negotiate::websocket(req.method(), req.headers(), Purpose::Channels).map_err(|e| {
            refuse(
                e.status().as_u16(),
                format!("Upgrade request required: {e}"),
            )
        })?;
    let v4 = Protocol::V4.name();
    let offered = req
        .headers()
        .get_all(axum::http::header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|p| p.trim() == v4);
    if !offered {
        return Err(Box::new(refuse(
            400,
            format!("port-forward over WebSocket speaks {v4} here"),
        )));
    }
    let upgrade = WebSocketUpgrade {
        key: checked.key,
        protocol: WsProtocol::Channel(Protocol::V4),
    };
    Ok(upgrade.response().map(|()| Body::empty()))
}

pub(super) async fn portforward(
    State(streams): State<Arc<Streams>>,
    Path((ns, pod)): Path<(String, String)>,
    mut req: Request,
) -> Response {
    let object = match admit(&streams, &req, &ns, &pod, "portforward") {
        Ok(object) => object,
        Err(resp) => return *resp,
    };
    let ports = match ports(req.uri().query().unwrap_or_default()) {
        Ok(ports) => ports,
        Err(message) => return refuse(400, message),
    };
    let head = match handshake(&req) {
        Ok(head) => head,
        Err(resp) => return *resp,
    };
    let targets: Vec<(u16, Option<SocketAddr>)> = {
        let forwards = streams.forwards.lock().unwrap_or_else(|p| p.into_inner());
        ports
            .iter()
            .map(|&port| {
                (
                    port,
                    forwards.get(&(ns.clone(), pod.clone(), port)).copied(),
                )
            })
            .collect()
    };
    let pod = Pod {
        namespace: ns,
        name: pod,
        uid: object["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    };
    upgraded(&streams, &mut req, move |ws| forward(ws, pod, targets));
    head
}

/// The pod, for the kubelet's error words.
struct Pod {
    namespace: String,
    name: String,
    uid: String,
}

/// `[channel, port as little-endian]`.
fn port_frame(channel: u8, port: u16) -> Message {
    let [lo, hi] = port.to_le_bytes();
    Message::Binary(Bytes::from(vec![channel, lo, hi]))
}

fn with_channel(channel: u8, data: &[u8]) -> Message {
    let mut v = Vec::with_capacity(data.len() + 1);
    v.push(channel);
    v.extend_from_slice(data);
    Message::Binary(Bytes::from(v))
}

/// Serves one port-forward WebSocket.
async fn forward(ws: Ws, pod: Pod, targets: Vec<(u16, Option<SocketAddr>)>) {
    let (mut sink, mut source) = ws.split();
    let mut writers: Vec<Option<OwnedWriteHalf>> = Vec::new();
    let mut readers = Vec::new();
    for (i, (port, target)) in targets.into_iter().enumerate() {
        let (data, error) = ((2 * i) as u8, (2 * i + 1) as u8);
        if sink.send(port_frame(data, port)).await.is_err()
            || sink.send(port_frame(error, port)).await.is_err()
        {
            return;
        }
        let connected = match target {
            Some(addr) => tokio::net::TcpStream::connect(addr)
                .await
                .map_err(|e| format!("dial tcp4 {addr}: connect: {e}")),
            None => Err(format!(
                "dial tcp4 127.0.0.1:{port}: connect: connection refused"
            )),
        };
        match connected {
            Ok(stream) => {
                let (r, w) = stream.into_split();
                writers.push(Some(w));
                readers.push(pod_side(data, r).boxed());
            }
            Err(cause) => {
                let message = flotilla_kubestream::portforward::forward_error(
                    port,
                    &pod.name,
                    &pod.uid,
                    &format!(
                        "failed to connect to localhost:{port} inside namespace \"{}\", IPv4: \
                         {cause}",
                        pod.namespace
                    ),
                );
                let _ = sink.send(with_channel(error, message.as_bytes())).await;
                writers.push(None);
            }
        }
    }
    let input = async {
        while let Some(Ok(message)) = source.next().await {
            match message {
                Message::Binary(bytes) if bytes.len() > 1 && bytes[0] % 2 == 0 => {
                    let i = usize::from(bytes[0] / 2);
                    if let Some(Some(w)) = writers.get_mut(i)
                        && w.write_all(&bytes[1..]).await.is_err()
                    {
                        writers[i] = None;
                    }
                }
                m if m.is_close() => return,
                _ => {}
            }
        }
    };
    let output = async {
        let mut from_pod = futures::stream::select_all(readers);
        while let Some((channel, bytes)) = from_pod.next().await {
            if sink.send(with_channel(channel, &bytes)).await.is_err() {
                return;
            }
        }
        let _ = sink
            .send(Message::Close(Some(CloseFrame {
                code: coding::CloseCode::Normal,
                reason: "".into(),
            })))
            .await;
    };
    tokio::select! {
        () = output => {}
        () = input => {}
    }
}

/// The pod's bytes of one connection, tagged with its data channel, until its end.
fn pod_side(
    channel: u8,
    read: tokio::net::tcp::OwnedReadHalf,
) -> impl futures::Stream<Item = (u8, Bytes)> + Send {
    futures::stream::unfold(Some(read), move |read| async move {
        let mut read = read?;
        let mut buf = BytesMut::with_capacity(READ_BYTES);
        match read.read_buf(&mut buf).await {
            Ok(n) if n > 0 => Some(((channel, buf.freeze()), Some(read))),
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_read_as_kube_rs_and_kubectl_write_them() {
        assert_eq!(ports("&ports=80%2C1234").unwrap(), vec![80, 1234]);
        assert_eq!(ports("ports=80&ports=81").unwrap(), vec![80, 81]);
        assert!(ports("").unwrap_err().contains("\"ports\" is required"));
        assert!(ports("ports=0").unwrap_err().contains("invalid port"));
        assert!(ports("ports=http").is_err());
    }
}
