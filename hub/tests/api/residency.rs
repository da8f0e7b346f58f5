//! sdk-tenant: the residency tree (region, country, state, city, locality).

use reqwest::StatusCode;
use serde_json::json;

use crate::{db_test, helpers::*};

async fn residency_nodes_form_a_tree_of_the_tenant(app: TestApp) {
    let t = app.two_tenants("res").await;
    let a = t.a_token.as_str();
    let (s, eu) = app.post("/api/residency/nodes", Some(a), json!({ "name": "Europe", "kind": "region" })).await;
    assert_eq!(s, StatusCode::CREATED, "{eu}");
    assert_eq!((eu["data"]["residency_class"].as_str(), eu["data"]["parent_geo_node_id"].clone()), (Some("open"), json!(null)));
    let eu_id = eu["data"]["geo_node_id"].as_str().unwrap();
    let (s, de) = app
        .post(
            "/api/residency/nodes",
            Some(a),
            json!({ "name": "Germany", "kind": "country", "code": "DE", "parent_geo_node_id": eu_id, "residency_class": "sovereign" }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{de}");
    assert_eq!((de["data"]["code"].as_str(), de["data"]["residency_class"].as_str()), (Some("DE"), Some("sovereign")));
    let de_id = de["data"]["geo_node_id"].as_str().unwrap();
    // Levels may be skipped downwards, never climbed.
    let (s, berlin) = app.post("/api/residency/nodes", Some(a), json!({ "name": "Berlin", "kind": "city", "parent_geo_node_id": de_id })).await;
    assert_eq!(s, StatusCode::CREATED, "{berlin}");
    let b = assert_error(
        app.post("/api/residency/nodes", Some(a), json!({ "name": "Bavaria", "kind": "region", "parent_geo_node_id": de_id })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["a region cannot be placed under a country"]));
    // One name per kind among siblings.
    assert_error(
        app.post("/api/residency/nodes", Some(a), json!({ "name": "Germany", "kind": "country", "parent_geo_node_id": eu_id })).await,
        409,
        "Conflict",
    );

    let (s, all) = app.get("/api/residency/nodes", Some(a)).await;
    assert_eq!((s, all["total"].as_i64()), (StatusCode::OK, Some(3)));
    let (_, children) = app.get(&format!("/api/residency/nodes?parent_geo_node_id={de_id}"), Some(a)).await;
    assert_eq!((children["total"].as_i64(), children["data"][0]["name"].as_str()), (Some(1), Some("Berlin")));
    let (_, countries) = app.get("/api/residency/nodes?kind=country", Some(a)).await;
    assert_eq!(countries["total"], 1);
    assert_eq!(app.events_of(&t.a["tenant_id"]).await.iter().filter(|e| *e == "tenant.residency_node.created.v1").count(), 3);

    // Bad input, all of it at once.
    let b = assert_error(
        app.post("/api/residency/nodes", Some(a), json!({ "kind": "planet", "residency_class": "closed", "parent_geo_node_id": "x" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!([
            "name is required",
            "kind must be one of: region, country, state, city, locality",
            "parent_geo_node_id must be a UUID",
            "residency_class must be one of: open, restricted, sovereign",
        ])
    );
    let b = assert_error(
        app.post("/api/residency/nodes", Some(a), json!({ "name": "n".repeat(201), "kind": "city", "code": "c".repeat(33) })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["name must be at most 200 characters", "code must be at most 32 characters"]));
    assert_error(app.get("/api/residency/nodes?kind=planet", Some(a)).await, 400, "ValidationError");

    // Another tenant sees none of it and cannot hang a node under it.
    let (_, theirs) = app.get("/api/residency/nodes", Some(&t.b_token)).await;
    assert_eq!(theirs["total"], 0);
    let b = assert_error(
        app.post("/api/residency/nodes", Some(&t.b_token), json!({ "name": "Hamburg", "kind": "city", "parent_geo_node_id": de_id })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["parent_geo_node_id names no node of this tenant"]));

    // A key without the write scope.
    let (_, key) = app.key(a, "res-reader", json!(["residency.node.read"])).await;
    let b = assert_error(app.post("/api/residency/nodes", key["api_key"].as_str(), json!({ "name": "Paris", "kind": "city" })).await, 403, "Forbidden");
    assert_eq!(b["required_scopes"], json!(["residency.node.write"]));
    assert_eq!(app.get("/api/residency/nodes", key["api_key"].as_str()).await.0, StatusCode::OK);
}
db_test!(residency_nodes_form_a_tree_of_the_tenant);

async fn residency_nodes_are_read_changed_and_deleted(app: TestApp) {
    let t = app.two_tenants("rn").await;
    let a = t.a_token.as_str();
    let (_, eu) = app.post("/api/residency/nodes", Some(a), json!({ "name": "Europe", "kind": "region" })).await;
    let eu_id = eu["data"]["geo_node_id"].as_str().unwrap().to_string();
    let (s, de) = app.post("/api/residency/nodes", Some(a), json!({ "name": "Germany", "kind": "country", "parent_geo_node_id": eu_id })).await;
    assert_eq!(s, StatusCode::CREATED, "{de}");
    let de_id = de["data"]["geo_node_id"].as_str().unwrap().to_string();
    let (_, fr) = app.post("/api/residency/nodes", Some(a), json!({ "name": "France", "kind": "country", "parent_geo_node_id": eu_id })).await;

    let (s, read) = app.get(&format!("/api/residency/nodes/{de_id}"), Some(a)).await;
    assert_eq!((s, read["data"].clone()), (StatusCode::OK, de["data"].clone()));
    assert_error(app.get(&format!("/api/residency/nodes/{de_id}"), Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.get(&format!("/api/residency/nodes/{}", uuid::Uuid::now_v7()), Some(a)).await, 404, "NotFound");
    // Pages of the list.
    let (s, page) = app.get("/api/residency/nodes?limit=2&offset=1", Some(a)).await;
    assert_eq!((s, page["total"].as_i64(), page["data"].as_array().unwrap().len()), (StatusCode::OK, Some(3), 2));
    assert_eq!(page["data"][0]["geo_node_id"], de_id.as_str());
    assert_error(app.get("/api/residency/nodes?limit=x", Some(a)).await, 400, "ValidationError");

    let url = format!("/api/residency/nodes/{de_id}");
    let patch = |body| app.call(reqwest::Method::PATCH, &url, Some(a), Some(body));
    let b = assert_error(patch(json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["give at least one of name, code, residency_class"]));
    let b = assert_error(patch(json!({ "residency_class": "closed", "code": "c".repeat(33) })).await, 400, "ValidationError");
    assert_eq!(b["details"].as_array().unwrap().len(), 2, "{b}");
    let b = assert_error(patch(json!({ "name": " " })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["name is required"]));
    assert_error(patch(json!({ "name": "France" })).await, 409, "Conflict");
    let (s, changed) = patch(json!({ "name": "Deutschland", "code": "DE", "residency_class": "sovereign" })).await;
    assert_eq!(s, StatusCode::OK, "{changed}");
    let c = &changed["data"];
    assert_eq!(
        (c["name"].as_str(), c["code"].as_str(), c["residency_class"].as_str(), c["kind"].as_str()),
        (Some("Deutschland"), Some("DE"), Some("sovereign"), Some("country"))
    );
    let (s, kept) = patch(json!({ "residency_class": "restricted" })).await;
    assert_eq!((s, kept["data"]["name"].as_str(), kept["data"]["code"].as_str()), (StatusCode::OK, Some("Deutschland"), Some("DE")));
    assert_error(app.call(reqwest::Method::PATCH, &url, Some(&t.b_token), Some(json!({ "name": "Mine" }))).await, 404, "NotFound");

    // Only a leaf goes.
    async fn delete_node(app: &TestApp, token: &str, id: &str) -> (StatusCode, serde_json::Value) {
        app.call(reqwest::Method::DELETE, &format!("/api/residency/nodes/{id}"), Some(token), None).await
    }
    let b = assert_error(delete_node(&app, a, &eu_id).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the node has child nodes: delete them first"]));
    assert_error(app.call(reqwest::Method::DELETE, &url, Some(&t.b_token), None).await, 404, "NotFound");
    let (s, gone) = delete_node(&app, a, &de_id).await;
    assert_eq!((s, gone["data"].clone()), (StatusCode::OK, json!({ "geo_node_id": de_id, "deleted": true })));
    assert_error(delete_node(&app, a, &de_id).await, 404, "NotFound");
    assert_error(app.get(&url, Some(a)).await, 404, "NotFound");
    let (s, _) = delete_node(&app, a, fr["data"]["geo_node_id"].as_str().unwrap()).await;
    assert_eq!(s, StatusCode::OK);
    let (s, _) = delete_node(&app, a, &eu_id).await;
    assert_eq!(s, StatusCode::OK);
    let (_, none) = app.get("/api/residency/nodes", Some(a)).await;
    assert_eq!(none["total"], 0);
    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "tenant.residency_node.updated.v1").count(), 2);
    assert_eq!(events.iter().filter(|e| *e == "tenant.residency_node.deleted.v1").count(), 3);
}
db_test!(residency_nodes_are_read_changed_and_deleted);
