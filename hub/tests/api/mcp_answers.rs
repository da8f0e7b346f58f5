//! What a tool call carries back, on `POST /mcp/v1/call` and on `tools/call`
//! of the JSON-RPC endpoint `POST /mcp`: a JSON answer as structured
//! content beside its text, any other answer as an embedded resource in
//! base64, and an answer over the limit (`hub::mcp::ANSWER_LIMIT`) as a
//! tool error naming it, refused before it is read.

use aws_lc_rs::digest;
use base64::{Engine, engine::general_purpose::STANDARD as BASE64};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

const LIMIT: usize = hub::mcp::ANSWER_LIMIT;

/// `n` bytes that are not all alike, nor valid UTF-8 (0xff never is).
fn content(n: usize) -> Vec<u8> {
    (0..n).map(|i| if i % 97 == 0 { 0xff } else { (i * 31 % 251) as u8 }).collect()
}

/// A ready media blob of the caller's tenant holding `bytes`.
async fn blob(app: &TestApp, token: &str, content_type: &str, bytes: Vec<u8>) -> String {
    let (s, started) = app.post("/api/media/blobs", Some(token), json!({ "content_type": content_type })).await;
    assert_eq!(s, StatusCode::CREATED, "{started}");
    let id = started["data"]["blob_id"].as_str().unwrap().to_string();
    let sum = hex::encode(digest::digest(&digest::SHA256, &bytes));
    let res = app.client.put(format!("{}/api/media/blobs/{id}/content", app.base)).bearer_auth(token).body(bytes).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let (s, done) = app.post(&format!("/api/media/blobs/{id}/commit"), Some(token), json!({ "checksum_hex": sum })).await;
    assert_eq!((s, done["data"]["status"].as_str()), (StatusCode::OK, Some("ready")), "{done}");
    id
}

/// `POST /mcp/v1/call`.
async fn call(app: &TestApp, token: &str, name: &str, arguments: Value) -> (StatusCode, Value) {
    app.post("/mcp/v1/call", Some(token), json!({ "name": name, "arguments": arguments })).await
}

/// `tools/call` on `POST /mcp` (stateless: no session to open first): the
/// HTTP status and the JSON-RPC message.
async fn rpc_call(app: &TestApp, token: &str, name: &str, arguments: Value) -> (StatusCode, Value) {
    let message = json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": { "name": name, "arguments": arguments } });
    let res = app
        .client
        .post(format!("{}/mcp", app.base))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .json(&message)
        .send()
        .await
        .unwrap();
    let status = res.status();
    let body: Value = res.json().await.unwrap();
    assert_eq!((body["jsonrpc"].as_str(), body["id"].as_i64()), (Some("2.0"), Some(7)), "{body}");
    (status, body)
}

/// The keys of a JSON object, sorted.
fn keys(v: &Value) -> Vec<&str> {
    let mut k: Vec<&str> = v.as_object().unwrap_or_else(|| panic!("an object: {v}")).keys().map(String::as_str).collect();
    k.sort();
    k
}

async fn a_json_answer_is_structured_content_beside_its_text(app: TestApp) {
    let t = app.two_tenants("mcp-json").await;
    let a = t.a_token.as_str();
    let measurement = json!({ "body": { "capture_id": "cap-s", "kind": "length", "value": 1.5, "unit": "m" } });
    let (s, made) = call(&app, a, "hdk_measure_record", measurement).await;
    assert_eq!(s, StatusCode::OK, "{made}");
    assert_eq!(keys(&made), ["content", "isError", "structuredContent"], "{made}");
    assert_eq!(made["isError"], false);
    assert_eq!((made["structuredContent"]["data"]["kind"].as_str(), made["structuredContent"]["data"]["value"].as_f64()), (Some("length"), Some(1.5)));
    // One text item: the same JSON, serialised once (it parses to the object, not to a string).
    assert_eq!(made["content"], json!([{ "type": "text", "text": made["content"][0]["text"] }]), "{made}");
    let text: Value = serde_json::from_str(made["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, made["structuredContent"]);

    // The list, through both endpoints, is the route's own answer.
    let (_, direct) = app.get("/api/hdk/measure/measurements?capture_id=cap-s", Some(a)).await;
    assert_eq!(direct["total"], 1, "{direct}");
    let (s, listed) = call(&app, a, "hdk_measure_list_by_capture", json!({ "capture_id": "cap-s" })).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(listed, json!({ "content": [{ "type": "text", "text": direct.to_string() }], "structuredContent": direct, "isError": false }));
    let (s, rpc) = rpc_call(&app, a, "hdk_measure_list_by_capture", json!({ "capture_id": "cap-s" })).await;
    assert_eq!(s, StatusCode::OK, "{rpc}");
    assert_eq!(rpc["result"], json!({ "content": [{ "type": "text", "text": direct.to_string() }], "structuredContent": direct, "isError": false }));

    // A route's refusal is structured too, and marked as an error.
    let (s, refused) = call(&app, a, "hdk_measure_record", json!({ "body": { "capture_id": "cap-s" } })).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!((refused["isError"].as_bool(), refused["structuredContent"]["error"].as_str()), (Some(true), Some("ValidationError")), "{refused}");
    let (_, rpc) = rpc_call(&app, a, "hdk_measure_record", json!({ "body": { "capture_id": "cap-s" } })).await;
    assert_eq!(rpc["result"]["isError"], true);
    assert_eq!(rpc["result"]["structuredContent"], refused["structuredContent"]);
}
db_test!(a_json_answer_is_structured_content_beside_its_text);

async fn a_binary_answer_is_an_embedded_resource_in_base64(app: TestApp) {
    let t = app.two_tenants("mcp-blob").await;
    let a = t.a_token.as_str();
    // The largest binary answer: its base64 is the limit exactly.
    let bytes = content(LIMIT / 4 * 3);
    let id = blob(&app, a, "image/png", bytes.clone()).await;
    let uri = format!("http://localhost/api/media/blobs/{id}/content");
    let expected =
        |blob: &str| json!({ "content": [{ "type": "resource", "resource": { "uri": uri, "mimeType": "image/png", "blob": blob } }], "isError": false });

    let (s, r) = call(&app, a, "sdk_media_get_content", json!({ "blob_id": id })).await;
    assert_eq!(s, StatusCode::OK);
    let b64 = r["content"][0]["resource"]["blob"].as_str().unwrap_or_else(|| panic!("a blob resource: {}", &r.to_string()[..300]));
    assert_eq!(b64.len(), LIMIT);
    assert!(BASE64.decode(b64).unwrap() == bytes, "the base64 decodes to the exact bytes");
    assert_eq!(r, expected(b64));
    let (s, rpc) = rpc_call(&app, a, "sdk_media_get_content", json!({ "blob_id": id })).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(rpc["result"], expected(b64));

    // Content that says JSON and is not JSON is carried as the bytes it is.
    let odd = content(1000);
    let id = blob(&app, a, "application/json", odd.clone()).await;
    let (_, r) = call(&app, a, "sdk_media_get_content", json!({ "blob_id": id })).await;
    assert_eq!(
        r,
        json!({ "content": [{ "type": "resource", "resource": {
            "uri": format!("http://localhost/api/media/blobs/{id}/content"), "mimeType": "application/json", "blob": BASE64.encode(&odd) } }], "isError": false })
    );
}
db_test!(a_binary_answer_is_an_embedded_resource_in_base64);

async fn an_answer_over_the_limit_is_a_tool_error_naming_it(app: TestApp) {
    let t = app.two_tenants("mcp-large").await;
    let a = t.a_token.as_str();
    let detail = |id: &str, size: usize| {
        format!(
            "the answer of sdk_media_get_content ({size} bytes) is over what a tool call carries back: {LIMIT} bytes of JSON, or of base64 for other content ({} bytes of it); call GET /api/media/blobs/{id}/content directly",
            LIMIT / 4 * 3
        )
    };
    // One byte more than the largest binary answer, and a blob of 20 MiB.
    for size in [LIMIT / 4 * 3 + 1, 20 * 1024 * 1024] {
        let id = blob(&app, a, "video/mp4", content(size)).await;
        let b = assert_error(call(&app, a, "sdk_media_get_content", json!({ "blob_id": id })).await, 400, "ValidationError");
        assert_eq!(b["details"], json!([detail(&id, size)]));
        let (s, rpc) = rpc_call(&app, a, "sdk_media_get_content", json!({ "blob_id": id })).await;
        assert_eq!(s, StatusCode::OK);
        let envelope = json!({ "success": false, "error": "ValidationError", "details": [detail(&id, size)] });
        assert_eq!(rpc["result"], json!({ "content": [{ "type": "text", "text": envelope.to_string() }], "isError": true }));
        // The direct route still streams it whole.
        let res = app.client.get(format!("{}/api/media/blobs/{id}/content", app.base)).bearer_auth(a).send().await.unwrap();
        assert_eq!((res.status(), res.bytes().await.unwrap().len()), (StatusCode::OK, size));
    }

    // A JSON answer may use the whole limit: a blob of JSON just under it
    // is structured content, one byte over it is refused.
    let json_of = |n: usize| {
        let mut text = br#"{"pad":""#.to_vec();
        text.resize(n - 2, b'x');
        text.extend_from_slice(br#""}"#);
        text
    };
    let fits = json_of(LIMIT);
    let id = blob(&app, a, "application/json", fits.clone()).await;
    let (s, r) = call(&app, a, "sdk_media_get_content", json!({ "blob_id": id })).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(r["structuredContent"]["pad"].as_str().map(str::len), Some(LIMIT - 10));
    assert_eq!(r["content"][0]["text"].as_str().map(str::as_bytes), Some(fits.as_slice()));
    let id = blob(&app, a, "application/json", json_of(LIMIT + 1)).await;
    let b = assert_error(call(&app, a, "sdk_media_get_content", json!({ "blob_id": id })).await, 400, "ValidationError");
    assert!(b["details"][0].as_str().unwrap().contains(&format!("({} bytes) is over", LIMIT + 1)), "{b}");
    // Content labelled JSON that is not is held to the limit of its base64 form.
    let size = LIMIT / 4 * 3 + 1;
    let id = blob(&app, a, "application/json", content(size)).await;
    let b = assert_error(call(&app, a, "sdk_media_get_content", json!({ "blob_id": id })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!([detail(&id, size)]));
}
db_test!(an_answer_over_the_limit_is_a_tool_error_naming_it);
