//! A stock MCP client (the official Python `mcp` package) lists and calls
//! the hub's tools through its JSON-RPC endpoint, `POST /mcp`.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

/// The route's JSON answer inside a tool result.
fn answer(result: &Value) -> Value {
    serde_json::from_str(result["text"].as_str().unwrap_or_else(|| panic!("a tool result: {result}"))).unwrap()
}

async fn a_stock_mcp_client_lists_and_calls_tools(app: TestApp) {
    let t = app.two_tenants("mcp-rpc").await;
    let a = t.a_token.as_str();
    let (_, narrow) = app.key(a, "mcp-rpc-narrow", json!(["hdk.measure.read"])).await;
    let (_, registry) = app.get("/api/registry/tools", Some(a)).await;

    let measurement = json!({ "body": { "capture_id": "cap-9", "kind": "length", "value": 4.0, "unit": "m" } });
    let call = |name: &str, arguments: Value| json!({ "name": name, "arguments": arguments });
    let plan = json!({ "sessions": [
        { "token": a, "calls": [
            call("hdk_measure_record", measurement.clone()),
            call("hdk_measure_list_by_capture", json!({ "capture_id": "cap-9" })),
            call("hdk_measure_record", json!({ "body": { "capture_id": "cap-9" } })),
            call("no_such_tool", json!({})),
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
