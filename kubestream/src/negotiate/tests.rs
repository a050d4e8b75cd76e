use super::*;

/// kubectl 1.32's exec handshake, as recorded in the design note §1.2.
fn kubectl_exec() -> http::request::Builder {
    Request::get("/api/v1/namespaces/default/pods/p/exec?command=echo&command=hi")
        .header("Connection", "Upgrade")
        .header("Upgrade", "websocket")
        .header("Sec-WebSocket-Key", "jfpYPKHJIbcytc7GWFtoHw==")
        .header("Sec-WebSocket-Version", "13")
}

fn kubectl_spdy(protocols: &[&str]) -> http::request::Builder {
    let mut b = Request::post("/api/v1/namespaces/default/pods/p/portforward")
        .header("Content-Length", "0")
        .header("Connection", "Upgrade")
        .header("Upgrade", "SPDY/3.1");
    for p in protocols {
        b = b.header("X-Stream-Protocol-Version", *p);
    }
    b
}

#[test]
fn accept_key_matches_rfc_6455() {
    assert_eq!(
        accept_key("dGhlIHNhbXBsZSBub25jZQ=="),
        "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
    );
}

#[test]
fn kubectl_exec_gets_v5_and_the_101_head() {
    let req = kubectl_exec()
        .header("Sec-WebSocket-Protocol", "v5.channel.k8s.io")
        .body(())
        .unwrap();
    let Upgrade::WebSocket(ws) = upgrade(&req, Purpose::Channels).unwrap() else {
        panic!("not a WebSocket")
    };
    assert_eq!(ws.protocol, WsProtocol::Channel(channel::Protocol::V5));
    let resp = ws.response();
    assert_eq!(resp.status(), StatusCode::SWITCHING_PROTOCOLS);
    let h = resp.headers();
    assert_eq!(h["upgrade"], "websocket");
    assert_eq!(h["connection"], "Upgrade");
    assert_eq!(h["sec-websocket-protocol"], "v5.channel.k8s.io");
    assert_eq!(
        h["sec-websocket-accept"],
        accept_key("jfpYPKHJIbcytc7GWFtoHw==").as_str()
    );
}

#[test]
fn our_preference_wins_over_the_clients_order() {
    // kube-rs offers both in one header; a client listing v4 first still gets v5.
    let req = kubectl_exec()
        .header(
            "Sec-WebSocket-Protocol",
            "v4.channel.k8s.io, v5.channel.k8s.io",
        )
        .body(())
        .unwrap();
    let Upgrade::WebSocket(ws) = upgrade(&req, Purpose::Channels).unwrap() else {
        panic!("not a WebSocket")
    };
    assert_eq!(ws.protocol, WsProtocol::Channel(channel::Protocol::V5));
    let req = kubectl_exec()
        .header("Sec-WebSocket-Protocol", "channel.k8s.io")
        .header("Sec-WebSocket-Protocol", "v4.channel.k8s.io")
        .body(())
        .unwrap();
    let Upgrade::WebSocket(ws) = upgrade(&req, Purpose::Channels).unwrap() else {
        panic!("not a WebSocket")
    };
    assert_eq!(ws.protocol, WsProtocol::Channel(channel::Protocol::V4));
}

#[test]
fn old_channel_protocols_are_refused_with_the_supported_list_and_no_token() {
    let req = kubectl_exec()
        .header(
            "Sec-WebSocket-Protocol",
            "base64.channel.k8s.io, base64url.bearer.authorization.k8s.io.c2VjcmV0, v3.channel.k8s.io",
        )
        .body(())
        .unwrap();
    let err = upgrade(&req, Purpose::Channels).unwrap_err();
    assert_eq!(err.status(), StatusCode::BAD_REQUEST);
    let text = err.to_string();
    assert!(
        text.ends_with("supported subprotocols: v5.channel.k8s.io, v4.channel.k8s.io"),
        "{text}"
    );
    assert!(
        text.contains("base64.channel.k8s.io, v3.channel.k8s.io"),
        "{text}"
    );
    assert!(
        !text.contains("c2VjcmV0"),
        "a bearer token was echoed: {text}"
    );
}

#[test]
fn port_forward_over_websocket_is_the_spdy_tunnel_only() {
    let pf = |protocol: &str| {
        Request::get("/api/v1/namespaces/default/pods/p/portforward")
            .header("Connection", "Upgrade")
            .header("Upgrade", "websocket")
            .header("Sec-WebSocket-Key", "K50YxUXFv4UkuzUorCcYZA==")
            .header("Sec-WebSocket-Version", "13")
            .header("Sec-WebSocket-Protocol", protocol)
            .body(())
            .unwrap()
    };
    let Upgrade::WebSocket(ws) =
        upgrade(&pf("SPDY/3.1+portforward.k8s.io"), Purpose::PortForward).unwrap()
    else {
        panic!("not a WebSocket")
    };
    assert_eq!(ws.protocol, WsProtocol::SpdyTunnel);
    assert_eq!(
        ws.response().headers()["sec-websocket-protocol"],
        "SPDY/3.1+portforward.k8s.io"
    );
    // kube-rs' WebSocket port-forward (v4 channels) is not served (design §9).
    assert!(matches!(
        upgrade(&pf("v4.channel.k8s.io"), Purpose::PortForward),
        Err(Error::NoSubprotocol { .. })
    ));
}

#[test]
fn raw_spdy_port_forward_gets_its_101() {
    let req = kubectl_spdy(&["portforward.k8s.io"]).body(()).unwrap();
    let Upgrade::Spdy(s) = upgrade(&req, Purpose::PortForward).unwrap() else {
        panic!("not SPDY")
    };
    assert_eq!(s.protocol, SpdyProtocol::PortForward);
    let resp = s.response();
    assert_eq!(resp.status(), StatusCode::SWITCHING_PROTOCOLS);
    assert_eq!(resp.headers()["upgrade"], "SPDY/3.1");
    assert_eq!(resp.headers()["connection"], "Upgrade");
    assert_eq!(
        resp.headers()["x-stream-protocol-version"],
        "portforward.k8s.io"
    );
}

#[test]
fn spdy_exec_takes_v4_from_kubectls_list_and_refuses_with_the_accepted_header() {
    let req = kubectl_spdy(&[
        "v5.channel.k8s.io",
        "v4.channel.k8s.io",
        "v3.channel.k8s.io",
        "v2.channel.k8s.io",
        "channel.k8s.io",
    ])
    .body(())
    .unwrap();
    assert_eq!(
        upgrade(&req, Purpose::Channels).unwrap(),
        Upgrade::Spdy(SpdyUpgrade {
            protocol: SpdyProtocol::ChannelV4
        })
    );
    let req = kubectl_spdy(&["channel.k8s.io"]).body(()).unwrap();
    let err = upgrade(&req, Purpose::Channels).unwrap_err();
    assert_eq!(err.status(), StatusCode::FORBIDDEN);
    assert_eq!(
        err.headers()["x-accepted-stream-protocol-versions"],
        "v4.channel.k8s.io"
    );
    let req = kubectl_spdy(&[]).body(()).unwrap();
    assert!(matches!(
        upgrade(&req, Purpose::PortForward),
        Err(Error::NoStreamProtocol { .. })
    ));
}

#[test]
fn origin_http2_and_missing_upgrade_are_refused() {
    let req = kubectl_exec()
        .header("Sec-WebSocket-Protocol", "v5.channel.k8s.io")
        .header("Origin", "https://evil.example")
        .body(())
        .unwrap();
    let err = upgrade(&req, Purpose::Channels).unwrap_err();
    assert!(matches!(err, Error::Origin));
    assert_eq!(err.status(), StatusCode::FORBIDDEN);

    let req = kubectl_exec()
        .version(Version::HTTP_2)
        .header("Sec-WebSocket-Protocol", "v5.channel.k8s.io")
        .body(())
        .unwrap();
    assert!(matches!(
        upgrade(&req, Purpose::Channels),
        Err(Error::NotHttp11 { .. })
    ));

    let req = Request::get("/api/v1/namespaces/default/pods/p/exec")
        .body(())
        .unwrap();
    assert!(matches!(
        upgrade(&req, Purpose::Channels),
        Err(Error::NotUpgrade)
    ));

    let req = Request::get("/x")
        .header("Connection", "keep-alive, Upgrade")
        .header("Upgrade", "h2c")
        .body(())
        .unwrap();
    assert!(matches!(
        upgrade(&req, Purpose::Channels),
        Err(Error::UnknownUpgrade { upgrade }) if upgrade == "h2c"
    ));
}

#[test]
fn websocket_handshake_details_are_checked() {
    let post = Request::post("/x")
        .header("Connection", "Upgrade")
        .header("Upgrade", "websocket")
        .header("Sec-WebSocket-Key", "jfpYPKHJIbcytc7GWFtoHw==")
        .header("Sec-WebSocket-Version", "13")
        .header("Sec-WebSocket-Protocol", "v5.channel.k8s.io")
        .body(())
        .unwrap();
    assert!(matches!(
        upgrade(&post, Purpose::Channels),
        Err(Error::Method { .. })
    ));

    let old = Request::get("/x")
        .header("Connection", "Upgrade")
        .header("Upgrade", "websocket")
        .header("Sec-WebSocket-Key", "jfpYPKHJIbcytc7GWFtoHw==")
        .header("Sec-WebSocket-Version", "8")
        .body(())
        .unwrap();
    let err = upgrade(&old, Purpose::Channels).unwrap_err();
    assert!(matches!(err, Error::WebSocketVersion { .. }));
    assert_eq!(err.headers()["sec-websocket-version"], "13");

    for key in ["", "not base64!", "dG9vIHNob3J0"] {
        let req = Request::get("/x")
            .header("Connection", "Upgrade")
            .header("Upgrade", "WebSocket")
            .header("Sec-WebSocket-Key", key)
            .header("Sec-WebSocket-Version", "13")
            .header("Sec-WebSocket-Protocol", "v5.channel.k8s.io")
            .body(())
            .unwrap();
        assert!(
            matches!(upgrade(&req, Purpose::Channels), Err(Error::WebSocketKey)),
            "key {key:?}"
        );
    }
}

#[test]
fn refusals_echo_a_bounded_list() {
    let many: Vec<String> = (0..50)
        .map(|i| format!("x{i}{}", "y".repeat(200)))
        .collect();
    let mut b = kubectl_exec();
    for m in &many {
        b = b.header("Sec-WebSocket-Protocol", m.as_str());
    }
    let Err(Error::NoSubprotocol { offered, .. }) =
        upgrade(&b.body(()).unwrap(), Purpose::Channels)
    else {
        panic!("accepted")
    };
    assert_eq!(offered.len(), MAX_ECHOED);
    assert!(offered.iter().all(|o| o.chars().count() == MAX_ECHOED_LEN));
}
