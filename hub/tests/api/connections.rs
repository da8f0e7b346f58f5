//! The HTTP server's own limits: a request head must arrive in time, idle
//! connections are closed, open connections are capped, and a robot
//! credential holds a bounded number of SSE command streams.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

use crate::{assets::robot, db_test, helpers::*};

fn addr(app: &TestApp) -> std::net::SocketAddr {
    app.server.as_ref().expect("running").addr
}

/// Reads until the hub closes the connection; returns what it sent and
/// when it closed, measured from `since`.
async fn read_until_closed(read: &mut (impl AsyncReadExt + Unpin), since: Instant) -> (String, Duration) {
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(Duration::from_secs(10), read.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return (String::from_utf8_lossy(&got).into_owned(), since.elapsed()),
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Err(_) => panic!("the hub kept the connection open for 10 s; it sent: {}", String::from_utf8_lossy(&got)),
        }
    }
}

/// Sends one request on a kept-alive connection and reads its answer.
async fn request_on(tcp: &mut TcpStream, path: &str) -> String {
    tcp.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), tcp.read(&mut buf)).await.expect("an answer").unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slowloris_client_is_disconnected_after_the_header_read_timeout() {
    let app = TestApp::spawn_with(Backend::Sqlite, None, |c| c.header_read_timeout_ms = 500).await;
    let tcp = TcpStream::connect(addr(&app)).await.unwrap();
    let (mut read, mut write) = tcp.into_split();
    let start = Instant::now();
    // A head that never ends: a header trickled a byte every 100 ms, each
    // byte well inside the timeout.
    let trickle = tokio::spawn(async move {
        write.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ").await.unwrap();
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if write.write_all(b"a").await.is_err() {
                return;
            }
        }
    });
    let (answer, closed_after) = read_until_closed(&mut read, start).await;
    trickle.abort();
    assert!(closed_after >= Duration::from_millis(450) && closed_after < Duration::from_secs(3), "closed after {closed_after:?}");
    assert_eq!(answer, "", "hyper closes without an answer");
    // Other clients are served meanwhile and after.
    let (s, body) = app.get("/health", None).await;
    assert_eq!((s, body["data"]["status"].clone()), (StatusCode::OK, json!("ok")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_never_completes_a_first_request_is_closed() {
    let app = TestApp::spawn_with(Backend::Sqlite, None, |c| c.header_read_timeout_ms = 500).await;
    // Silent from the start, and a partial HTTP/2 preface (which hyper's
    // protocol detection would wait on forever).
    for opening in [&b""[..], b"PRI * HTTP/2.0\r\n"] {
        let mut tcp = TcpStream::connect(addr(&app)).await.unwrap();
        let start = Instant::now();
        tcp.write_all(opening).await.unwrap();
        let (answer, closed_after) = read_until_closed(&mut tcp, start).await;
        assert!(closed_after >= Duration::from_millis(450) && closed_after < Duration::from_secs(3), "{opening:?}: closed after {closed_after:?}");
        assert_eq!(answer, "", "{opening:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout() {
    let app = TestApp::spawn_with(Backend::Sqlite, None, |c| c.idle_timeout_seconds = 1).await;
    let mut tcp = TcpStream::connect(addr(&app)).await.unwrap();
    for _ in 0..2 {
        let answer = request_on(&mut tcp, "/health").await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        // Activity on the connection restarts its idle clock.
        tokio::time::sleep(Duration::from_millis(600)).await;
    }
    let start = Instant::now();
    let (answer, closed_after) = read_until_closed(&mut tcp, start).await;
    assert_eq!(answer, "");
    assert!(closed_after >= Duration::from_millis(200) && closed_after < Duration::from_secs(3), "closed after {closed_after:?}");

    // On HTTP/1.1 hyper's header clock also runs while a kept-alive
    // connection waits for its next request: the shorter limit wins.
    let app = TestApp::spawn_with(Backend::Sqlite, None, |c| c.header_read_timeout_ms = 500).await;
    let mut tcp = TcpStream::connect(addr(&app)).await.unwrap();
    assert!(request_on(&mut tcp, "/health").await.starts_with("HTTP/1.1 200"));
    let (answer, closed_after) = read_until_closed(&mut tcp, Instant::now()).await;
    assert_eq!(answer, "");
    assert!(closed_after < Duration::from_secs(3), "closed after {closed_after:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_cap_wait_while_the_open_ones_keep_working() {
    let app = TestApp::spawn_with(Backend::Sqlite, None, |c| c.max_connections = 2).await;
    // Two connections take both slots (each answered once, so both were accepted).
    let mut a = TcpStream::connect(addr(&app)).await.unwrap();
    assert!(request_on(&mut a, "/health").await.starts_with("HTTP/1.1 200"));
    let mut b = TcpStream::connect(addr(&app)).await.unwrap();
    assert!(request_on(&mut b, "/health").await.starts_with("HTTP/1.1 200"));

    // A third is not served while they are open...
    let url = format!("{}/health", app.base);
    let third = tokio::spawn(async move { reqwest::Client::new().get(url).send().await.map(|r| r.status()) });
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(!third.is_finished(), "a connection beyond the cap was served: {:?}", third.await);
    // ...while the open ones keep working.
    assert!(request_on(&mut a, "/health").await.starts_with("HTTP/1.1 200"));
    assert!(!third.is_finished());

    // Closing one lets the waiting connection in.
    drop(b);
    let status = tokio::time::timeout(Duration::from_secs(5), third).await.expect("served once a slot freed").unwrap().unwrap();
    assert_eq!(status, StatusCode::OK);
}

/// SSE command streams: at most `HUB_MAX_SSE_PER_CREDENTIAL` per robot
/// credential; one more is 429 in the envelope, other credentials are not
/// affected, and a closed stream gives its slot back.
async fn a_robot_credential_holds_a_bounded_number_of_sse_streams(app: TestApp) {
    let app = app.variant(|c| c.max_sse_per_credential = 2).await;
    let t = app.signup("ssecap@example.com", "ssecap").await;
    let token = t["token"].as_str().unwrap();
    let (asset, cred) = robot(&app, token, json!({ "display_name": "R" })).await;
    let (other_asset, other_cred) = robot(&app, token, json!({ "display_name": "R2" })).await;
    let url = format!("{}/api/commands/stream/{asset}", app.base);
    let open = |cred: String, url: String| {
        let client = app.client.clone();
        async move { client.get(url).bearer_auth(cred).send().await.unwrap() }
    };
    let first = open(cred.clone(), url.clone()).await;
    assert_eq!(first.status(), StatusCode::OK);
    let second = open(cred.clone(), url.clone()).await;
    assert_eq!(second.status(), StatusCode::OK);

    let refused = open(cred.clone(), url.clone()).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let body: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(
        body,
        json!({
            "success": false, "error": "TooManyStreams",
            "details": ["at most 2 command streams may be open at once per robot credential"],
        })
    );
    // Another robot's credential has slots of its own.
    let other = open(other_cred, format!("{}/api/commands/stream/{other_asset}", app.base)).await;
    assert_eq!(other.status(), StatusCode::OK);

    // Closing a stream gives its slot back.
    drop(first);
    let start = Instant::now();
    loop {
        let again = open(cred.clone(), url.clone()).await;
        if again.status() == StatusCode::OK {
            break;
        }
        assert_eq!(again.status(), StatusCode::TOO_MANY_REQUESTS);
        assert!(start.elapsed() < Duration::from_secs(5), "the closed stream's slot never came back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(second);
}
db_test!(a_robot_credential_holds_a_bounded_number_of_sse_streams);
