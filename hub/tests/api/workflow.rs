//! sdk-workflow: versioned definitions, registered or upserted per
//! version, read back by name (latest or a given version), with their
//! event.

use reqwest::StatusCode;
use serde_json::json;

use crate::{db_test, helpers::*};

async fn definitions_are_versioned_upserted_and_read_back_by_name(app: TestApp) {
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
    let mut unchanged = d["data"].clone();
    unchanged["created"] = json!(false);
    assert_eq!(again["data"], unchanged, "the stored definition, updated_at unmoved");
    // Other steps under a stored version replace its steps (no run
    // references it): the same definition, its steps and updated_at new.
    let (s, up) = app.post("/api/workflows/definitions", Some(token), json!({ "name": "onboard", "version": 1, "step_specs": [{ "name": "other" }] })).await;
    assert_eq!(s, StatusCode::OK, "{up}");
    assert_eq!(
        (up["data"]["definition_id"].clone(), up["data"]["version"].as_i64(), up["data"]["created"].clone(), up["data"]["step_specs"].clone()),
        (d["data"]["definition_id"].clone(), Some(1), json!(false), json!([{ "name": "other" }]))
    );
    assert_eq!((up["data"]["created_at"].clone(), up["data"]["created_by"].clone()), (d["data"]["created_at"].clone(), d["data"]["created_by"].clone()));
    assert!(up["data"]["updated_at"].as_str().unwrap() > d["data"]["updated_at"].as_str().unwrap(), "{up}");
    // Registered back: the original steps again (another update).
    let (s, back) = app.post("/api/workflows/definitions", Some(token), json!({ "name": "onboard", "version": 1, "step_specs": steps })).await;
    assert_eq!((s, back["data"]["step_specs"].clone()), (StatusCode::OK, steps.clone()));
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

    let events = app.events_of(&t["tenant_id"]).await;
    let count = |name: &str| events.iter().filter(|e| *e == name).count();
    assert_eq!(
        (count("workflow.definition.registered.v1"), count("workflow.definition.updated.v1")),
        (3, 2),
        "registered per stored definition, updated per change of steps, none for the same steps again"
    );
}
db_test!(definitions_are_versioned_upserted_and_read_back_by_name);

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

/// The steps are compared whatever order their keys were written in; a
/// registration without a version never replaces one; each tenant upserts
/// its own.
async fn an_upsert_compares_steps_not_their_spelling_and_stays_in_its_tenant(app: TestApp) {
    let t = app.two_tenants("wf-upsert").await;
    let (a, b) = (t.a_token.as_str(), t.b_token.as_str());
    let post = async |token: &str, body: serde_json::Value| app.post("/api/workflows/definitions", Some(token), body).await;
    let (s, d) = post(a, json!({ "name": "ship", "version": 3, "step_specs": [{ "name": "pack", "retries": 2, "on": { "z": 1, "a": 2 } }] })).await;
    assert_eq!((s, d["data"]["version"].as_i64(), d["data"]["created"].as_bool()), (StatusCode::CREATED, Some(3), Some(true)), "{d}");
    assert_eq!(d["data"]["created_at"], d["data"]["updated_at"]);
    // The same steps, keys in another order: the same definition, unchanged.
    let (s, same) = post(a, json!({ "name": "ship", "version": 3, "step_specs": [{ "on": { "a": 2, "z": 1 }, "retries": 2, "name": "pack" }] })).await;
    assert_eq!(s, StatusCode::OK, "{same}");
    assert_eq!(same["data"], {
        let mut u = d["data"].clone();
        u["created"] = json!(false);
        u
    });
    // Without a version: the next one (4), never version 3 replaced.
    let (s, next) = post(a, json!({ "name": "ship", "step_specs": [{ "name": "drive" }] })).await;
    assert_eq!((s, next["data"]["version"].as_i64()), (StatusCode::CREATED, Some(4)), "{next}");
    // Another tenant's version 3 of the same name is its own.
    let (s, theirs) = post(b, json!({ "name": "ship", "version": 3, "step_specs": [{ "name": "fly" }] })).await;
    assert_eq!((s, theirs["data"]["created"].as_bool()), (StatusCode::CREATED, Some(true)), "{theirs}");
    let (_, mine) = app.get("/api/workflows/definitions/ship?version=3", Some(a)).await;
    assert_eq!(mine["data"]["step_specs"], json!([{ "name": "pack", "retries": 2, "on": { "a": 2, "z": 1 } }]));
    // An update still checks the steps.
    let body = assert_error(post(a, json!({ "name": "ship", "version": 3, "step_specs": [{ "retries": 1 }] })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["step_specs[0] must be an object with a string name"]));
    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "workflow.definition.registered.v1").count(), 2, "two stored, nothing changed");
}
db_test!(an_upsert_compares_steps_not_their_spelling_and_stays_in_its_tenant);
