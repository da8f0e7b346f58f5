//! sdk-workflow: versioned definitions, immutable per version, read back by
//! name (latest or a given version), with their event.

use reqwest::StatusCode;
use serde_json::json;

use crate::{db_test, helpers::*};

async fn definitions_are_versioned_immutable_and_read_back_by_name(app: TestApp) {
    let t = app.signup("wf@example.com", "wf").await;
    let token = t["token"].as_str().unwrap();
    let steps = json!([{ "name": "fetch" }, { "name": "notify", "retries": 2 }]);
    let (s, d) = app.post("/api/workflows/definitions", Some(token), json!({ "name": "onboard", "step_specs": steps })).await;
    assert_eq!(s, StatusCode::CREATED, "{d}");
    assert_eq!((d["data"]["version"].as_i64(), d["data"]["namespace"].as_str(), d["data"]["created"].as_bool()), (Some(1), Some("default"), Some(true)));
    assert_eq!(d["data"]["step_specs"], steps);
    assert_eq!(d["data"]["tenant_id"], t["tenant_id"]);

    // The same steps under the same version: the stored definition, no new event.
    let (s, again) = app.post("/api/workflows/definitions", Some(token), json!({ "name": "onboard", "version": 1, "step_specs": steps })).await;
    assert_eq!(s, StatusCode::OK, "{again}");
    assert_eq!((again["data"]["definition_id"].clone(), again["data"]["created"].clone()), (d["data"]["definition_id"].clone(), json!(false)));
    // Other steps under a taken version are refused: definitions are immutable.
    assert_error(
        app.post("/api/workflows/definitions", Some(token), json!({ "name": "onboard", "version": 1, "step_specs": [{ "name": "other" }] })).await,
        409,
        "Conflict",
    );
    // Without a version, the next one.
    let (s, v2) = app.post("/api/workflows/definitions", Some(token), json!({ "name": "onboard", "step_specs": [{ "name": "fetch" }] })).await;
    assert_eq!((s, v2["data"]["version"].as_i64()), (StatusCode::CREATED, Some(2)));
    // Another namespace has versions of its own.
    let (_, other) = app.post("/api/workflows/definitions", Some(token), json!({ "name": "onboard", "namespace": "ops", "step_specs": steps })).await;
    assert_eq!(other["data"]["version"], 1);

    let (s, latest) = app.get("/api/workflows/definitions/onboard", Some(token)).await;
    assert_eq!((s, latest["data"]["version"].as_i64()), (StatusCode::OK, Some(2)));
    let (_, first) = app.get("/api/workflows/definitions/onboard?version=1", Some(token)).await;
    assert_eq!(first["data"]["step_specs"], steps);
    let (_, ops) = app.get("/api/workflows/definitions/onboard?namespace=ops", Some(token)).await;
    assert_eq!(ops["data"]["namespace"], "ops");
    assert_error(app.get("/api/workflows/definitions/onboard?version=9", Some(token)).await, 404, "NotFound");
    assert_error(app.get("/api/workflows/definitions/nothing", Some(token)).await, 404, "NotFound");
    assert_error(app.get("/api/workflows/definitions/onboard?version=zero", Some(token)).await, 400, "ValidationError");

    let body = assert_error(
        app.post("/api/workflows/definitions", Some(token), json!({ "name": "bad name!", "version": 0, "step_specs": [{ "name": 3 }, "x"] })).await,
        400,
        "ValidationError",
    );
    assert_eq!(body["details"], json!(["version must be an integer from 1 to 2147483647", "step_specs[1] must be a JSON object"]));
    let body = assert_error(
        app.post("/api/workflows/definitions", Some(token), json!({ "name": "bad name!", "step_specs": [{ "name": 3 }, { "name": " " }] })).await,
        400,
        "ValidationError",
    );
    assert_eq!(
        body["details"],
        json!([
            "name must be 1 to 128 letters, digits, '.', '_' or '-'",
            "step_specs[0] must be an object with a string name",
            "step_specs[1] must be an object with a string name",
        ])
    );
    let body = assert_error(app.post("/api/workflows/definitions", Some(token), json!({ "step_specs": [] })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["name is required", "step_specs must hold 1 to 500 items"]));

    let registered = app.events_of(&t["tenant_id"]).await.into_iter().filter(|e| e == "workflow.definition.registered.v1").count();
    assert_eq!(registered, 3, "one event per stored definition");
}
db_test!(definitions_are_versioned_immutable_and_read_back_by_name);

async fn definitions_are_listed_by_namespace_and_name(app: TestApp) {
    let t = app.two_tenants("wf-list").await;
    let a = t.a_token.as_str();
    let steps = json!([{ "name": "one" }]);
    let mut ids = Vec::new();
    for body in [
        json!({ "name": "onboard", "step_specs": steps }),
        json!({ "name": "onboard", "step_specs": [{ "name": "two" }] }),
        json!({ "name": "onboard", "namespace": "ops", "step_specs": steps }),
        json!({ "name": "offboard", "step_specs": steps }),
    ] {
        let (s, d) = app.post("/api/workflows/definitions", Some(a), body).await;
        assert_eq!(s, StatusCode::CREATED, "{d}");
        ids.push(d["data"]["definition_id"].as_str().unwrap().to_string());
    }
    app.post("/api/workflows/definitions", Some(&t.b_token), json!({ "name": "onboard", "step_specs": steps })).await;
    let listed = async |q: &str| {
        let (s, b) = app.get(&format!("/api/workflows/definitions{q}"), Some(a)).await;
        assert_eq!(s, StatusCode::OK, "{b}");
        let got: Vec<String> = b["data"].as_array().unwrap().iter().map(|d| d["definition_id"].as_str().unwrap().to_string()).collect();
        (b["total"].as_i64().unwrap(), got)
    };
    let newest = |i: &[usize]| i.iter().map(|&i| ids[i].clone()).collect::<Vec<_>>();
    assert_eq!(listed("").await, (4, newest(&[3, 2, 1, 0])), "newest first");
    assert_eq!(listed("?name=onboard").await, (3, newest(&[2, 1, 0])));
    assert_eq!(listed("?namespace=default&name=onboard").await, (2, newest(&[1, 0])), "the versions of a name");
    assert_eq!(listed("?namespace=ops").await, (1, newest(&[2])));
    assert_eq!(listed("?name=nothing").await, (0, vec![]));
    assert_eq!(listed("?limit=2&offset=2").await, (4, newest(&[1, 0])));
    let (_, page) = app.get("/api/workflows/definitions?namespace=default&name=onboard&limit=1", Some(a)).await;
    assert_eq!((page["data"][0]["version"].as_i64(), page["data"][0]["step_specs"].clone()), (Some(2), json!([{ "name": "two" }])));
    let (_, theirs) = app.get("/api/workflows/definitions", Some(&t.b_token)).await;
    assert_eq!(theirs["total"], 1);
    let body = assert_error(app.get("/api/workflows/definitions?namespace=bad%20ns&name=bad!", Some(a)).await, 400, "ValidationError");
    assert_eq!(
        body["details"],
        json!(["namespace must be 1 to 128 letters, digits, '.', '_' or '-'", "name must be 1 to 128 letters, digits, '.', '_' or '-'"])
    );
}
db_test!(definitions_are_listed_by_namespace_and_name);
