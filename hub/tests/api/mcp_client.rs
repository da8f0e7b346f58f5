//! A stock MCP client (the official Python `mcp` package) lists and calls
//! the hub's tools through its JSON-RPC endpoint, `POST /mcp`.

use aws_lc_rs::digest;
use base64::{Engine, engine::general_purpose::STANDARD as BASE64};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

/// The route's JSON answer inside a tool result.
fn answer(result: &Value) -> Value {
    serde_json::from_str(result["text"].as_str().unwrap_or_else(|| panic!("a tool result: {result}"))).unwrap()
}

/// A ready media blob of the caller's tenant holding `bytes` (no content type).
async fn ready_blob(app: &TestApp, token: &str, bytes: &[u8]) -> String {
    let (_, started) = app.post("/api/media/blobs", Some(token), json!({})).await;
    let id = started["data"]["blob_id"].as_str().unwrap_or_else(|| panic!("a blob: {started}")).to_string();
    let res = app.client.put(format!("{}/api/media/blobs/{id}/content", app.base)).bearer_auth(token).body(bytes.to_vec()).send().await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let sum = hex::encode(digest::digest(&digest::SHA256, bytes));
    let (s, done) = app.post(&format!("/api/media/blobs/{id}/commit"), Some(token), json!({ "checksum_hex": sum })).await;
    assert_eq!(s, StatusCode::OK, "{done}");
    id
}

async fn a_stock_mcp_client_lists_and_calls_tools(app: TestApp) {
    let t = app.two_tenants("mcp-rpc").await;
    let a = t.a_token.as_str();
    let (_, narrow) = app.key(a, "mcp-rpc-narrow", json!(["hdk.measure.read"])).await;
    let (_, registry) = app.get("/api/registry/tools", Some(a)).await;
    // A small binary blob, to come back as an embedded resource.
    let bytes: Vec<u8> = (0..3000u32).map(|i| (i * 7 % 256) as u8).collect();
    let blob = ready_blob(&app, a, &bytes).await;

    let measurement = json!({ "body": { "capture_id": "cap-9", "kind": "length", "value": 4.0, "unit": "m" } });
    let call = |name: &str, arguments: Value| json!({ "name": name, "arguments": arguments });
    let plan = json!({ "sessions": [
        { "token": a, "calls": [
            call("hdk_measure_record", measurement.clone()),
            call("hdk_measure_list_by_capture", json!({ "capture_id": "cap-9" })),
            call("hdk_measure_record", json!({ "body": { "capture_id": "cap-9" } })),
            call("no_such_tool", json!({})),
            call("sdk_media_get_content", json!({ "blob_id": blob })),
        ] },
        { "token": narrow["api_key"], "calls": [call("hdk_measure_record", measurement)] },
        { "token": t.b_token, "calls": [call("hdk_measure_list_by_capture", json!({ "capture_id": "cap-9" }))] },
    ] });
    let report = run_python("mcp_client.py", &[&format!("{}/mcp", app.base)], plan).await;
    let [first, narrow, other] = report["sessions"].as_array().unwrap().as_slice() else { panic!("{report}") };

    // The handshake, and the same tools in the same order as the registry's.
    assert_eq!(first["server"], json!({ "name": "platform-hub", "tools": true }));
    let names = |tools: &Value| tools.as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    assert_eq!(names(&first["tools"]), names(&registry["data"]));
    assert_eq!(first["tools"], narrow["tools"], "the list is the same for every caller");
    let tool = |name: &str| first["tools"].as_array().unwrap().iter().find(|t| t["name"] == name).unwrap().clone();
    let record = tool("hdk_measure_record");
    assert_eq!(record["readOnly"], false);
    assert_eq!(tool("hdk_measure_list_by_capture")["readOnly"], true);
    let listed = registry["data"].as_array().unwrap().iter().find(|t| t["name"] == "hdk_measure_record").unwrap();
    assert_eq!(record["inputSchema"], listed["inputSchema"]);

    // Calls run the route with the session's own credential.
    let results = first["results"].as_array().unwrap();
    assert_eq!(results[0]["isError"], false, "{}", results[0]);
    let made = answer(&results[0]);
    assert_eq!((made["data"]["kind"].as_str(), made["data"]["value"].as_f64()), (Some("length"), Some(4.0)));
    assert_eq!(answer(&results[1])["total"], 1);
    // The stock client reads the JSON answer as structured content too.
    assert_eq!(results[1]["structured"], answer(&results[1]), "{}", results[1]);
    // And a binary answer as a blob resource, the bytes exact.
    let resource = &results[4]["content"][0];
    assert_eq!((results[4]["isError"].as_bool(), resource["type"].as_str()), (Some(false), Some("resource")), "{}", results[4]);
    assert_eq!(resource["resource"]["mimeType"], "application/octet-stream");
    assert_eq!(resource["resource"]["uri"], format!("http://localhost/api/media/blobs/{blob}/content"));
    assert!(BASE64.decode(resource["resource"]["blob"].as_str().unwrap()).unwrap() == bytes);
    // The route's own refusal of bad input is the tool's error.
    assert_eq!(results[2]["isError"], true);
    assert_eq!(answer(&results[2])["error"], "ValidationError", "{}", results[2]);
    // An unknown tool is a JSON-RPC error (invalid params).
    assert_eq!(results[3]["error"]["code"], -32602, "{}", results[3]);
    assert!(results[3]["error"]["message"].as_str().unwrap().contains("no_such_tool"));

    // A credential without the scope is refused by the gate, never run.
    let refused = &narrow["results"][0];
    assert_eq!(refused["isError"], true, "{refused}");
    assert_eq!(answer(refused)["required_scopes"], json!(["hdk.measure.write"]));
    let (_, listed) = app.get("/api/hdk/measure/measurements?capture_id=cap-9", Some(a)).await;
    assert_eq!(listed["total"], 1, "the refused call wrote nothing");
    // Another tenant sees nothing of the first.
    assert_eq!(answer(&other["results"][0])["total"], 0);

    // The endpoint itself is behind the gate.
    let hello = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" });
    assert_error(app.post("/mcp", None, hello.clone()).await, 401, "Unauthorized");
    assert_error(app.post("/mcp", Some("not-a-token"), hello).await, 401, "Unauthorized");
    let (s, _) = app.get("/mcp", Some(a)).await;
    assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED);
}
db_test!(a_stock_mcp_client_lists_and_calls_tools);

/// `POST /mcp` of one JSON-RPC message under `accept` (`None`: no `Accept`
/// at all, sent by hand since reqwest would add `*/*`): the status, the
/// content type and the body.
async fn rpc_accepting(app: &TestApp, token: &str, accept: Option<&str>, message: &Value) -> (u16, String, Value) {
    let Some(accept) = accept else {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let body = message.to_string();
        let mut tcp = tokio::net::TcpStream::connect(app.base.trim_start_matches("http://")).await.unwrap();
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: hub\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        tcp.write_all(format!("{head}{body}").as_bytes()).await.unwrap();
        let mut answer = String::new();
        tcp.read_to_string(&mut answer).await.unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or_else(|| panic!("{answer}"));
        let header = |name: &str| head.lines().find_map(|l| l.split_once(':').filter(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.trim().to_string()));
        assert!(header("transfer-encoding").is_none(), "a sized answer: {head}");
        return (head[9..12].parse().unwrap(), header("content-type").unwrap_or_default(), serde_json::from_str(body).unwrap_or_else(|_| panic!("{body}")));
    };
    let res = app.client.post(format!("{}/mcp", app.base)).bearer_auth(token).header("accept", accept).json(message).send().await.unwrap();
    let status = res.status().as_u16();
    let kind = res.headers().get("content-type").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    (status, kind, res.json().await.unwrap())
}

/// The transport asks clients to accept both JSON and an event stream; the
/// endpoint answers JSON only, so it serves any client that accepts JSON
/// (explicitly, by a wildcard, or by sending no `Accept`) and refuses the
/// others with 406 in the envelope, before running anything.
async fn the_endpoint_answers_any_client_that_accepts_json_and_refuses_the_others(app: TestApp) {
    let t = app.two_tenants("mcp-accept").await;
    let a = t.a_token.as_str();
    let (_, registry) = app.get("/api/registry/tools", Some(a)).await;
    let tools = registry["data"].as_array().unwrap().len();
    let list = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" });
    for accept in
        [None, Some("application/json"), Some("*/*"), Some("application/*;q=0.5"), Some("text/html, application/json;q=0.1"), Some("APPLICATION/JSON")]
    {
        let (status, kind, body) = rpc_accepting(&app, a, accept, &list).await;
        assert_eq!((status, kind.as_str(), body["id"].as_i64()), (200, "application/json", Some(1)), "{accept:?}: {body}");
        assert_eq!(body["result"]["tools"].as_array().map(Vec::len), Some(tools), "{accept:?}");
    }
    let refused =
        json!({ "success": false, "error": "NotAcceptable", "details": ["this endpoint answers application/json, which the Accept header does not admit"] });
    for accept in ["text/html", "text/event-stream", "application/json;q=0, */*", "*/*;q=0", "application/xml, text/*"] {
        let (status, kind, body) = rpc_accepting(&app, a, Some(accept), &list).await;
        assert_eq!((status, kind.as_str(), &body), (406, "application/json", &refused), "{accept}");
    }

    // A call from a client accepting JSON alone runs; a refused one does not.
    let record = |capture: &str| {
        json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": { "name": "hdk_measure_record", "arguments": { "body": { "capture_id": capture, "kind": "length", "value": 2.0, "unit": "m" } } } })
    };
    let (status, _, body) = rpc_accepting(&app, a, Some("text/html"), &record("cap-refused")).await;
    assert_eq!((status, &body), (406, &refused));
    let (_, listed) = app.get("/api/hdk/measure/measurements?capture_id=cap-refused", Some(a)).await;
    assert_eq!(listed["total"], 0, "the refused call ran nothing: {listed}");
    let (status, kind, body) = rpc_accepting(&app, a, Some("application/json"), &record("cap-json")).await;
    assert_eq!((status, kind.as_str(), body["result"]["isError"].as_bool()), (200, "application/json", Some(false)), "{body}");
    assert_eq!(answer(&body["result"]["content"][0])["data"]["capture_id"], "cap-json");
    let (_, listed) = app.get("/api/hdk/measure/measurements?capture_id=cap-json", Some(a)).await;
    assert_eq!(listed["total"], 1, "{listed}");
}
db_test!(the_endpoint_answers_any_client_that_accepts_json_and_refuses_the_others);
