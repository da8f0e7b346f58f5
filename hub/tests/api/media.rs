//! sdk-media: start, stream the content to the store, commit with a
//! checksum verified against the stored bytes, read back; the size limit,
//! declared sizes, replaced uploads and committed blobs that cannot change.

use aws_lc_rs::digest;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(digest::digest(&digest::SHA256, bytes))
}

/// `n` bytes that are not all alike.
fn content(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 31 % 251) as u8).collect()
}

async fn put(app: &TestApp, token: &str, blob: &str, bytes: Vec<u8>) -> (StatusCode, Value) {
    let res = app.client.put(format!("{}/api/media/blobs/{blob}/content", app.base)).bearer_auth(token).body(bytes).send().await.unwrap();
    let status = res.status();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// The same upload with no Content-Length: the limit holds while streaming.
async fn put_chunked(app: &TestApp, token: &str, blob: &str, chunks: Vec<Vec<u8>>) -> (StatusCode, Value) {
    let stream = futures_util::stream::iter(chunks.into_iter().map(Ok::<_, std::io::Error>));
    let res = app
        .client
        .put(format!("{}/api/media/blobs/{blob}/content", app.base))
        .bearer_auth(token)
        .body(reqwest::Body::wrap_stream(stream))
        .send()
        .await
        .unwrap();
    let status = res.status();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// Files under the hub's media directory (the default local store).
fn stored_objects(app: &TestApp) -> usize {
    fn walk(dir: &std::path::Path) -> usize {
        std::fs::read_dir(dir).map_or(0, |it| it.map(|e| e.unwrap().path()).map(|p| if p.is_dir() { walk(&p) } else { 1 }).sum())
    }
    walk(&app._dir.path().join("media"))
}

async fn blobs_are_uploaded_verified_committed_and_read_back(app: TestApp) {
    let t = app.two_tenants("media").await;
    let a = t.a_token.as_str();
    let (s, started) = app.post("/api/media/blobs", Some(a), json!({ "content_type": "image/png", "filename": "site.png" })).await;
    assert_eq!(s, StatusCode::CREATED, "{started}");
    let blob = started["data"]["blob_id"].as_str().unwrap().to_string();
    assert_eq!((started["data"]["status"].as_str(), started["data"]["max_bytes"].as_u64()), (Some("pending"), Some(100 * 1024 * 1024)));
    assert_eq!(started["data"]["upload_path"], format!("/api/media/blobs/{blob}/content"));
    assert!(started["data"].get("object_key").is_none());
    let commit_url = format!("/api/media/blobs/{blob}/commit");
    let commit = |sum: Value| app.post(&commit_url, Some(a), json!({ "checksum_hex": sum }));
    let b = assert_error(commit(json!("ab".repeat(32))).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["no content has been uploaded for this blob"]));

    // 12 MiB: several parts on their way to the store.
    let bytes = content(12 * 1024 * 1024 + 7);
    let sum = sha256_hex(&bytes);
    let (s, up) = put(&app, a, &blob, bytes.clone()).await;
    assert_eq!(s, StatusCode::OK, "{up}");
    assert_eq!((up["data"]["size_bytes"].as_u64(), up["data"]["status"].as_str()), (Some(bytes.len() as u64), Some("pending")));
    assert_error(app.get(&format!("/api/media/blobs/{blob}/content"), Some(a)).await, 409, "Conflict");

    // A checksum of other bytes: 400, and the blob stays pending.
    let b = assert_error(commit(json!(sha256_hex(b"other"))).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["checksum_hex does not match the SHA-256 of the uploaded content; the blob stays pending"]));
    let (_, read) = app.get(&format!("/api/media/blobs/{blob}"), Some(a)).await;
    assert_eq!((read["data"]["status"].as_str(), read["data"]["sha256"].clone()), (Some("pending"), Value::Null));
    for bad in [json!("abc"), json!(format!("0x{}", "g".repeat(64))), json!(format!("{sum}0")), json!(null)] {
        assert_error(commit(bad).await, 400, "ValidationError");
    }
    // Uppercase with a 0x prefix is the same checksum.
    let (s, done) = commit(json!(format!("0x{}", sum.to_uppercase()))).await;
    assert_eq!(s, StatusCode::OK, "{done}");
    assert_eq!((done["data"]["status"].as_str(), done["data"]["sha256"].as_str()), (Some("ready"), Some(sum.as_str())));
    let (s, again) = commit(json!(sum)).await;
    assert_eq!((s, again["data"]["committed_at"].clone()), (StatusCode::OK, done["data"]["committed_at"].clone()), "a repeated commit changes nothing");
    assert_error(commit(json!(sha256_hex(b"other"))).await, 409, "Conflict");
    let b = assert_error(put(&app, a, &blob, b"new".to_vec()).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the blob is committed; its content cannot change"]));

    let res = app.client.get(format!("{}/api/media/blobs/{blob}/content", app.base)).bearer_auth(a).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let header = |name: &str| res.headers().get(name).map(|v| v.to_str().unwrap().to_string());
    assert_eq!(
        (header("content-type"), header("content-disposition"), header("x-content-type-options")),
        (Some("image/png".into()), Some("attachment".into()), Some("nosniff".into()))
    );
    assert_eq!(res.bytes().await.unwrap().as_ref(), bytes.as_slice());

    // Another tenant sees none of it.
    assert_error(app.get(&format!("/api/media/blobs/{blob}"), Some(&t.b_token)).await, 404, "NotFound");
    assert_error(put(&app, &t.b_token, &blob, b"x".to_vec()).await, 404, "NotFound");
    assert_error(app.post(&format!("/api/media/blobs/{blob}/commit"), Some(&t.b_token), json!({ "checksum_hex": sum })).await, 404, "NotFound");

    // A second upload of a pending blob replaces the first, in the store too.
    let (_, other) = app.post("/api/media/blobs", Some(a), json!({})).await;
    let other = other["data"]["blob_id"].as_str().unwrap().to_string();
    assert_eq!(put(&app, a, &other, b"first".to_vec()).await.0, StatusCode::OK);
    assert_eq!(put(&app, a, &other, b"second".to_vec()).await.0, StatusCode::OK);
    assert_eq!(stored_objects(&app), 2, "the committed blob and the second upload");
    assert_error(app.post(&format!("/api/media/blobs/{other}/commit"), Some(a), json!({ "checksum_hex": sha256_hex(b"first") })).await, 400, "ValidationError");
    let (s, ready) = app.post(&format!("/api/media/blobs/{other}/commit"), Some(a), json!({ "checksum_hex": sha256_hex(b"second") })).await;
    assert_eq!((s, ready["data"]["content_type"].as_str(), ready["data"]["size_bytes"].as_u64()), (StatusCode::OK, Some("application/octet-stream"), Some(6)));

    // Empty content is content.
    let (_, empty) = app.post("/api/media/blobs", Some(a), json!({ "size_bytes": 0 })).await;
    let empty = empty["data"]["blob_id"].as_str().unwrap().to_string();
    assert_eq!(put(&app, a, &empty, Vec::new()).await.0, StatusCode::OK);
    let (s, e) = app.post(&format!("/api/media/blobs/{empty}/commit"), Some(a), json!({ "checksum_hex": sha256_hex(b"") })).await;
    assert_eq!((s, e["data"]["size_bytes"].as_u64()), (StatusCode::OK, Some(0)));

    // A NUL is refused at the edge, before the route's own checks.
    let b = assert_error(app.post("/api/media/blobs", Some(a), json!({ "filename": "a\u{0}b" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["filename must not contain the NUL character (U+0000)"]));
    let b = assert_error(
        app.post("/api/media/blobs", Some(a), json!({ "content_type": "png", "filename": "a\u{1}b", "size_bytes": 104_857_601 })).await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!([
            "content_type must be a media type such as image/png, at most 255 characters",
            "filename must be at most 255 characters, none of them control characters",
            "size_bytes must be an integer from 0 to 104857600",
        ])
    );
    let b = assert_error(app.post("/api/media/blobs", Some(a), json!({ "filename": 5, "size_bytes": -1 })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["filename must be a string", "size_bytes must be an integer of at least 0"]));
    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "media.upload.started.v1").count(), 3);
    assert_eq!(events.iter().filter(|e| *e == "media.blob.committed.v1").count(), 3, "one per blob made ready");
}
db_test!(blobs_are_uploaded_verified_committed_and_read_back);

async fn uploads_stop_at_the_limit_and_at_the_declared_size(app: TestApp) {
    let app = app.variant(|c| c.media_max_bytes = 1024).await;
    let t = app.signup("limit@media.example.com", "media-limit").await;
    let a = t["token"].as_str().unwrap();
    let (_, started) = app.post("/api/media/blobs", Some(a), json!({})).await;
    assert_eq!(started["data"]["max_bytes"], 1024);
    let blob = started["data"]["blob_id"].as_str().unwrap().to_string();
    let b = assert_error(put(&app, a, &blob, content(1025)).await, 413, "PayloadTooLarge");
    assert_eq!(b["details"], json!(["blob content is limited to 1024 bytes"]));
    // Without a Content-Length the limit is found while streaming.
    let b = assert_error(put_chunked(&app, a, &blob, vec![content(600), content(600)]).await, 413, "PayloadTooLarge");
    assert_eq!(b["details"], json!(["blob content is limited to 1024 bytes"]));
    assert_eq!(stored_objects(&app), 0, "a refused upload leaves nothing in the store");
    let (_, read) = app.get(&format!("/api/media/blobs/{blob}"), Some(a)).await;
    assert_eq!(read["data"]["size_bytes"], Value::Null);
    let (s, up) = put_chunked(&app, a, &blob, vec![content(512), content(512)]).await;
    assert_eq!((s, up["data"]["size_bytes"].as_u64()), (StatusCode::OK, Some(1024)));

    let (_, declared) = app.post("/api/media/blobs", Some(a), json!({ "size_bytes": 10 })).await;
    let declared = declared["data"]["blob_id"].as_str().unwrap().to_string();
    let b = assert_error(put(&app, a, &declared, content(11)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["the content is 11 bytes; the upload was started with size_bytes 10"]));
    assert_eq!(put(&app, a, &declared, content(10)).await.0, StatusCode::OK);
    assert_eq!(stored_objects(&app), 2);
    assert_error(app.post("/api/media/blobs", Some(a), json!({ "size_bytes": 1025 })).await, 400, "ValidationError");
}
db_test!(uploads_stop_at_the_limit_and_at_the_declared_size);

/// A stand-in for an S3-compatible service whose bucket does not exist:
/// every request is answered 404 `NoSuchBucket`, as S3 answers; its port,
/// and how many requests it has answered.
async fn bucketless_s3() -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let answered = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = answered.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let count = count.clone();
            tokio::spawn(async move {
                let mut tcp = tokio::io::BufReader::new(tcp);
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    if tcp.read_line(&mut line).await.unwrap_or(0) == 0 {
                        return;
                    }
                    if line == "\r\n" {
                        break;
                    }
                    if let Some((name, value)) = line.split_once(':')
                        && name.eq_ignore_ascii_case("content-length")
                    {
                        length = value.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0; length];
                let _ = tcp.read_exact(&mut body).await;
                let xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message><BucketName>hub-media</BucketName></Error>";
                let answer =
                    format!("HTTP/1.1 404 Not Found\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{xml}", xml.len());
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let _ = tcp.get_mut().write_all(answer.as_bytes()).await;
            });
        }
    });
    (port, answered)
}

/// A hub process whose media store is the S3-compatible bucket `hub-media`
/// at `endpoint` (a process of its own: the store comes from the
/// environment, as `AWS_*` settings). The routes that need the store
/// answer 503 with `Retry-After` and the envelope, promptly; the routes
/// that do not still answer; the cause is logged once, not per request.
async fn routes_of_an_unavailable_store_answer_503(endpoint: &str) {
    let env = [
        ("HUB_MEDIA_STORE", "s3://hub-media"),
        ("AWS_ENDPOINT", endpoint),
        ("AWS_ALLOW_HTTP", "true"),
        ("AWS_ACCESS_KEY_ID", "hub-test"),
        ("AWS_SECRET_ACCESS_KEY", "hub-test-secret"),
        ("AWS_REGION", "us-east-1"),
    ];
    let hub = HubProcess::spawn(&env).await;
    let t = hub.signup("store@example.com", "store-down").await;
    let token = t["token"].as_str().unwrap();
    let client = reqwest::Client::new();
    let res = client.post(format!("{}/api/media/blobs", hub.base)).bearer_auth(token).json(&json!({ "content_type": "text/plain" })).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::CREATED, "starting an upload needs no store");
    let blob = res.json::<Value>().await.unwrap()["data"]["blob_id"].as_str().unwrap().to_string();

    let unavailable = |res: reqwest::Response| async move {
        assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(res.headers().get("retry-after").and_then(|v| v.to_str().ok()), Some("5"), "{:?}", res.headers());
        let body: Value = res.json().await.unwrap();
        assert_eq!(
            body,
            json!({ "success": false, "error": "ServiceUnavailable", "details": ["the object store is unavailable; retry after the time in Retry-After"] })
        );
    };
    let upload = || client.put(format!("{}/api/media/blobs/{blob}/content", hub.base)).bearer_auth(token).body(content(1000)).send();
    let started = std::time::Instant::now();
    let first = upload().await.unwrap();
    // object_store's default retries held this answer 2 to 4 s (and more).
    assert!(started.elapsed() < std::time::Duration::from_secs(3), "answered after {:?}", started.elapsed());
    unavailable(first).await;
    // Found unavailable, the store is not waited on again for a while.
    unavailable(upload().await.unwrap()).await;
    // An analytics export is written to the store too.
    let period = json!({ "kind": "usage_daily", "period_start": "2026-01-01", "period_end": "2026-01-31" });
    let res = client.post(format!("{}/api/analytics/builds", hub.base)).bearer_auth(token).json(&period).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    let build = res.json::<Value>().await.unwrap()["data"]["build_id"].as_str().unwrap().to_string();
    unavailable(client.post(format!("{}/api/analytics/builds/{build}/export", hub.base)).bearer_auth(token).send().await.unwrap()).await;
    // So is a trace export, JSON or PDF: each is left failed.
    let post = |path: &str, body: Value| client.post(format!("{}{path}", hub.base)).bearer_auth(token).json(&body).send();
    let agent = json!({ "name": "Store", "acting_persona_id": t["persona_id"], "tier": "gold", "vector_namespace": "store", "created_by": "store" });
    let res = post("/api/agent-runtime/agents", agent).await.unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);
    let agent_id = res.json::<Value>().await.unwrap()["data"]["agent_id"].clone();
    let run = json!({ "agent_id": agent_id, "persona_id": t["persona_id"], "trace_id": "store-trace", "actor_id": "ada", "actor_kind": "human" });
    assert_eq!(post("/api/agent-runtime/runs", run).await.unwrap().status(), StatusCode::CREATED);
    for format in ["json", "pdf"] {
        unavailable(post("/api/traces/store-trace/exports", json!({ "format": format })).await.unwrap()).await;
    }
    let exports: Value = client.get(format!("{}/api/traces/store-trace/exports", hub.base)).bearer_auth(token).send().await.unwrap().json().await.unwrap();
    let left: Vec<(&str, &str)> = exports["data"].as_array().unwrap().iter().map(|e| (e["format"].as_str().unwrap(), e["status"].as_str().unwrap())).collect();
    assert_eq!(left, [("pdf", "failed"), ("json", "failed")], "{exports}");

    // The blob is as it was: pending, no content.
    let got: Value = client.get(format!("{}/api/media/blobs/{blob}", hub.base)).bearer_auth(token).send().await.unwrap().json().await.unwrap();
    assert_eq!((got["data"]["status"].as_str(), &got["data"]["size_bytes"]), (Some("pending"), &Value::Null), "{got}");
    let log = hub.log();
    assert_eq!(log.matches("the object store is unavailable").count(), 1, "logged once: {log}");
    assert!(!log.contains("request failed"), "no error log per request: {log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_object_store_answers_503_with_retry_after() {
    // A port nothing listens on: connections are refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    routes_of_an_unavailable_store_answer_503(&format!("http://127.0.0.1:{port}")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_bucket_answers_503_with_retry_after() {
    let (port, answered) = bucketless_s3().await;
    routes_of_an_unavailable_store_answer_503(&format!("http://127.0.0.1:{port}")).await;
    assert!(answered.load(std::sync::atomic::Ordering::SeqCst) >= 1, "the store was asked");
}

async fn blobs_are_listed_and_deleted_with_their_content(app: TestApp) {
    let t = app.two_tenants("media-del").await;
    let a = t.a_token.as_str();
    let app_ref = &app;
    let start = |body: Value| async move {
        let (s, started) = app_ref.post("/api/media/blobs", Some(a), body).await;
        assert_eq!(s, StatusCode::CREATED, "{started}");
        started["data"]["blob_id"].as_str().unwrap().to_string()
    };
    let ready = start(json!({ "content_type": "image/png", "filename": "private-name.png" })).await;
    let uploaded = start(json!({ "content_type": "image/png" })).await;
    let empty = start(json!({ "content_type": "text/plain" })).await;
    let bytes = content(3000);
    assert_eq!(put(&app, a, &ready, bytes.clone()).await.0, StatusCode::OK);
    let (s, committed) = app.post(&format!("/api/media/blobs/{ready}/commit"), Some(a), json!({ "checksum_hex": sha256_hex(&bytes) })).await;
    assert_eq!(s, StatusCode::OK, "{committed}");
    assert_eq!(put(&app, a, &uploaded, content(10)).await.0, StatusCode::OK);
    assert_eq!(stored_objects(&app), 2);
    let ids = |v: &Value| v["data"].as_array().unwrap().iter().map(|b| b["blob_id"].as_str().unwrap().to_string()).collect::<Vec<_>>();

    let (s, all) = app.get("/api/media/blobs", Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{all}");
    assert_eq!((ids(&all), all["total"].as_i64()), (vec![empty.clone(), uploaded.clone(), ready.clone()], Some(3)), "newest first");
    assert!(all["data"][0].get("object_key").is_none());
    for (query, expected) in [
        ("status=pending", vec![empty.clone(), uploaded.clone()]),
        ("status=ready", vec![ready.clone()]),
        ("content_type=image/png", vec![uploaded.clone(), ready.clone()]),
        ("content_type=image/png&status=pending", vec![uploaded.clone()]),
        ("content_type=video/mp4", vec![]),
    ] {
        let (s, page) = app.get(&format!("/api/media/blobs?{query}"), Some(a)).await;
        assert_eq!(s, StatusCode::OK, "{page}");
        assert_eq!((ids(&page), page["total"].as_i64()), (expected.clone(), Some(expected.len() as i64)), "{query}");
    }
    let (_, paged) = app.get("/api/media/blobs?limit=1&offset=1", Some(a)).await;
    assert_eq!((ids(&paged), paged["total"].as_i64()), (vec![uploaded.clone()], Some(3)));
    let body = assert_error(app.get("/api/media/blobs?status=gone", Some(a)).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["status must be one of: pending, ready"]));
    // Another tenant lists none of A's blobs and deletes none.
    let (_, theirs) = app.get("/api/media/blobs", Some(&t.b_token)).await;
    assert_eq!((theirs["data"].clone(), theirs["total"].as_i64()), (json!([]), Some(0)));
    for token in [t.b_token.as_str(), t.b_key.as_str()] {
        assert_error(app.call(reqwest::Method::DELETE, &format!("/api/media/blobs/{ready}"), Some(token), None).await, 404, "NotFound");
    }

    // A committed blob goes with its content.
    let (s, deleted) = app.call(reqwest::Method::DELETE, &format!("/api/media/blobs/{ready}"), Some(a), None).await;
    assert_eq!(s, StatusCode::OK, "{deleted}");
    assert_eq!(deleted["data"], json!({ "blob_id": ready, "deleted": true }));
    assert_eq!(stored_objects(&app), 1, "the content is erased from the store");
    assert_error(app.get(&format!("/api/media/blobs/{ready}"), Some(a)).await, 404, "NotFound");
    assert_error(app.get(&format!("/api/media/blobs/{ready}/content"), Some(a)).await, 404, "NotFound");
    assert_error(app.call(reqwest::Method::DELETE, &format!("/api/media/blobs/{ready}"), Some(a), None).await, 404, "NotFound");
    // So does a pending one, uploaded or not.
    let (s, _) = app.call(reqwest::Method::DELETE, &format!("/api/media/blobs/{uploaded}"), Some(a), None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(stored_objects(&app), 0);
    let (s, _) = app.call(reqwest::Method::DELETE, &format!("/api/media/blobs/{empty}"), Some(a), None).await;
    assert_eq!(s, StatusCode::OK);
    let body = assert_error(put(&app, a, &empty, content(5)).await, 404, "NotFound");
    assert_eq!(body["error"], "NotFound");
    assert_eq!(stored_objects(&app), 0);
    assert_error(app.call(reqwest::Method::DELETE, "/api/media/blobs/not-a-uuid", Some(a), None).await, 404, "NotFound");
    let (_, left) = app.get("/api/media/blobs", Some(a)).await;
    assert_eq!(left["total"], 0);

    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "media.blob.deleted.v1").count(), 3);
    let payloads: Vec<String> =
        sqlx::query_scalar("SELECT payload FROM audit_entry WHERE event_type = 'media.blob.deleted.v1'").fetch_all(&app.state().db.read).await.unwrap();
    assert!(payloads.iter().all(|p| !p.contains("private-name")), "the name stays out of the chain: {payloads:?}");
    assert!(payloads.iter().any(|p| p.contains(&sha256_hex(&bytes))), "{payloads:?}");
}
db_test!(blobs_are_listed_and_deleted_with_their_content);
