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
