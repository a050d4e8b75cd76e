//! `LinkProxy`: a cut is noticed at once; a blackhole is silent and holds the bytes until the
//! link is restored.

use flotilla_testkit::LinkProxy;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const T: Duration = Duration::from_secs(10);

/// An echo server on a free port.
async fn echo() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = conn.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    port
}

async fn round_trip(conn: &mut TcpStream, bytes: &[u8]) -> Vec<u8> {
    conn.write_all(bytes).await.unwrap();
    let mut buf = vec![0; bytes.len()];
    tokio::time::timeout(T, conn.read_exact(&mut buf))
        .await
        .expect("echo within the timeout")
        .unwrap();
    buf
}

#[tokio::test]
async fn a_blackhole_is_silent_and_delivers_after_restore() {
    let proxy = LinkProxy::start(echo().await).await;
    let mut conn = TcpStream::connect(("127.0.0.1", proxy.port()))
        .await
        .unwrap();
    assert_eq!(round_trip(&mut conn, b"one").await, b"one");

    proxy.blackhole();
    conn.write_all(b"two").await.expect("the socket stays open");
    let mut buf = [0u8; 3];
    let silent = tokio::time::timeout(Duration::from_millis(300), conn.read_exact(&mut buf)).await;
    assert!(
        silent.is_err(),
        "nothing comes back through a blackhole: {silent:?}"
    );
    // A new connection is accepted but goes nowhere.
    let mut late = TcpStream::connect(("127.0.0.1", proxy.port()))
        .await
        .unwrap();
    late.write_all(b"late").await.unwrap();

    proxy.restore();
    tokio::time::timeout(T, conn.read_exact(&mut buf))
        .await
        .expect("held bytes arrive after restore")
        .unwrap();
    assert_eq!(&buf, b"two");
    let mut buf = [0u8; 4];
    tokio::time::timeout(T, late.read_exact(&mut buf))
        .await
        .expect("the held connection is connected after restore")
        .unwrap();
    assert_eq!(&buf, b"late");
    assert_eq!(round_trip(&mut conn, b"three").await, b"three");
}

#[tokio::test]
async fn a_cut_closes_the_connection_and_restore_accepts_again() {
    let proxy = LinkProxy::start(echo().await).await;
    let mut conn = TcpStream::connect(("127.0.0.1", proxy.port()))
        .await
        .unwrap();
    assert_eq!(round_trip(&mut conn, b"one").await, b"one");
    proxy.cut();
    let mut buf = [0u8; 1];
    let read = tokio::time::timeout(T, conn.read(&mut buf))
        .await
        .expect("noticed at once");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    proxy.restore();
    let mut conn = TcpStream::connect(("127.0.0.1", proxy.port()))
        .await
        .unwrap();
    assert_eq!(round_trip(&mut conn, b"two").await, b"two");
}
