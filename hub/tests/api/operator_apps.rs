//! The operator's apps (idempotent 201), tenants (list newest first, 200;
//! creation on an existing app), pool maps and pools (RULINGS 3).

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

async fn apps_are_created_once_and_answered_201_unchanged(app: TestApp) {
    let new = |body: Value| app.op(Method::POST, "/admin/apps", Some(body));
    let (s, a) = new(json!({ "app_id": "fleet", "display_name": "Fleet", "org_name": "Acme" })).await;
    assert_eq!(s, StatusCode::CREATED, "{a}");
    let first = a["data"]["app"].clone();
    assert_eq!((first["app_id"].as_str(), first["display_name"].as_str(), first["status"].as_str()), (Some("fleet"), Some("Fleet"), Some("active")));
    assert!(first["org_id"].is_string() && first["created_at"].is_string());
    let org: String =
        sqlx::query_scalar("SELECT name FROM tenant_org WHERE org_id = $1").bind(first["org_id"].as_str()).fetch_one(&app.state().db.read).await.unwrap();
    assert_eq!(org, "Acme");
    // Idempotent: the existing app, unchanged, still 201.
    let (s, again) = new(json!({ "app_id": "fleet", "display_name": "Renamed", "org_name": "Other" })).await;
    assert_eq!((s, again["data"]["app"].clone()), (StatusCode::CREATED, first));
    let orgs: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM tenant_org WHERE name = 'Other'").fetch_one(&app.state().db.read).await.unwrap();
    assert_eq!(orgs, 0, "org_name is used at first creation only");
    // Without org_name the org takes the display name.
    let (_, b) = new(json!({ "app_id": "b.app", "display_name": "B app" })).await;
    let org: String = sqlx::query_scalar("SELECT name FROM tenant_org WHERE org_id = $1")
        .bind(b["data"]["app"]["org_id"].as_str())
        .fetch_one(&app.state().db.read)
        .await
        .unwrap();
    assert_eq!(org, "B app");

    let e = assert_error(new(json!({ "app_id": " ", "display_name": "" })).await, 400, "ValidationError");
    assert_eq!(e["details"], json!(["app_id is required", "display_name is required"]));
    let e = assert_error(new(json!({ "app_id": "x".repeat(65), "display_name": "x".repeat(201) })).await, 400, "ValidationError");
    assert_eq!(e["details"], json!(["app_id must be at most 64 characters", "display_name must be at most 200 characters"]));
    // The characters of an app_id, once the body matches its schema.
    let e = assert_error(new(json!({ "app_id": "no spaces", "display_name": "x" })).await, 400, "ValidationError");
    assert_eq!(e["details"], json!(["app_id must be 1-64 characters of letters, digits, '-', '_' or '.'"]));
}
db_test!(apps_are_created_once_and_answered_201_unchanged);

async fn tenants_are_created_on_an_existing_app_and_listed_newest_first(app: TestApp) {
    let (s, _) = app.op(Method::POST, "/admin/apps", Some(json!({ "app_id": "op-t", "display_name": "T" }))).await;
    assert_eq!(s, StatusCode::CREATED);
    let new = |body: Value| app.op(Method::POST, "/admin/tenants", Some(body));
    let (s, t) =
        new(json!({ "app_id": "op-t", "display_name": "First", "region": "eu-west-1", "module_subscriptions": ["crm"], "brand_domain": "first.example" }))
            .await;
    assert_eq!(s, StatusCode::CREATED, "{t}");
    let first = t["data"]["tenant"].clone();
    assert_eq!(
        (first["app_id"].as_str(), first["display_name"].as_str(), first["region"].as_str(), first["isolation_tier"].as_str()),
        (Some("op-t"), Some("First"), Some("eu-west-1"), Some("S"))
    );
    assert_eq!((first["module_subscriptions"].clone(), first["brand_domain"].as_str()), (json!(["crm"]), Some("first.example")));
    assert_eq!((first["root_tenant_id"].clone(), first["parent_tenant_id"].clone()), (first["tenant_id"].clone(), Value::Null));
    // Not idempotent: the same body makes another tenant.
    let (s, second) = new(json!({ "app_id": "op-t", "display_name": "First", "region": "eu-west-1", "isolation_tier": "G" })).await;
    assert_eq!(
        (s, second["data"]["tenant"]["isolation_tier"].as_str(), second["data"]["tenant"]["module_subscriptions"].clone()),
        (StatusCode::CREATED, Some("G"), json!([]))
    );
    assert_ne!(second["data"]["tenant"]["tenant_id"], first["tenant_id"]);
    assert_eq!(app.events_of(&first["tenant_id"]).await, ["tenant.tenant.created.v1"]);

    let e = assert_error(new(json!({ "app_id": "nope", "display_name": "x", "region": "r" })).await, 400, "ValidationError");
    assert_eq!(e["details"], json!(["app_id must name an existing app"]));
    let e = assert_error(new(json!({ "isolation_tier": "X", "module_subscriptions": "crm" })).await, 400, "ValidationError");
    assert_eq!(
        e["details"],
        json!([
            "app_id is required",
            "display_name is required",
            "region is required",
            "isolation_tier must be one of: S, P, G",
            "module_subscriptions must be an array"
        ])
    );
    let e = assert_error(
        new(json!({ "app_id": "nope", "display_name": "x", "region": "r", "module_subscriptions": vec!["m"; 101] })).await,
        400,
        "ValidationError",
    );
    assert_eq!(e["details"], json!(["module_subscriptions must hold at most 100 items"]));
    let e = assert_error(
        new(json!({ "app_id": "nope", "display_name": "x", "region": "r", "module_subscriptions": ["", "x".repeat(129)] })).await,
        400,
        "ValidationError",
    );
    // The schema's bound first (an item's length), then its pattern's check.
    assert_eq!(e["details"], json!(["module_subscriptions[1] must be at most 128 characters"]));

    let (s, l) = app.op(Method::GET, "/admin/tenants?limit=1&whatever=x", None).await;
    assert_eq!(s, StatusCode::OK, "{l}");
    let listed = l["data"]["tenants"].as_array().unwrap();
    assert_eq!(listed.len(), 2, "a query is ignored");
    assert_eq!((listed[0]["tenant_id"].clone(), listed[1]["tenant_id"].clone()), (second["data"]["tenant"]["tenant_id"].clone(), first["tenant_id"].clone()));
}
db_test!(tenants_are_created_on_an_existing_app_and_listed_newest_first);

async fn the_tenant_list_stops_at_200(app: TestApp) {
    app.op(Method::POST, "/admin/apps", Some(json!({ "app_id": "many", "display_name": "Many" }))).await;
    for n in 0..201 {
        let (s, _) = app.op(Method::POST, "/admin/tenants", Some(json!({ "app_id": "many", "display_name": format!("t{n}"), "region": "r" }))).await;
        assert_eq!(s, StatusCode::CREATED);
    }
    let (_, l) = app.op(Method::GET, "/admin/tenants", None).await;
    let listed = l["data"]["tenants"].as_array().unwrap();
    assert_eq!((listed.len(), listed[0]["display_name"].as_str()), (200, Some("t200")));
}
db_test!(the_tenant_list_stops_at_200);

async fn pools_are_created_and_pool_maps_name_existing_pools(app: TestApp) {
    let (s, l) = app.op(Method::GET, "/admin/pools", None).await;
    assert_eq!((s, l["data"][0]["pool_index"].as_i64(), l["data"][0]["kind"].as_str()), (StatusCode::OK, Some(0), Some("admin")), "pool 0 exists");
    let pool = |body: Value| app.op(Method::POST, "/admin/pools", Some(body));
    let (s, p) = pool(json!({ "pool_index": 3, "kind": "evidence", "region": "eu-west-1" })).await;
    assert_eq!(s, StatusCode::CREATED, "{p}");
    assert_eq!((p["data"]["pool_index"].as_i64(), p["data"]["kind"].as_str(), p["data"]["region"].as_str()), (Some(3), Some("evidence"), Some("eu-west-1")));
    assert_eq!(pool(json!({ "pool_index": 1, "kind": "admin", "region": "eu-west-1" })).await.0, StatusCode::CREATED);
    assert_eq!(pool(json!({ "pool_index": 2, "kind": "app", "region": "eu-west-1" })).await.0, StatusCode::CREATED);
    assert_error(pool(json!({ "pool_index": 3, "kind": "app", "region": "x" })).await, 409, "Conflict");
    let e = assert_error(pool(json!({ "pool_index": -1, "kind": "cold" })).await, 400, "ValidationError");
    assert_eq!(e["details"], json!(["pool_index must be an integer from 0 to 1000000", "kind must be one of: admin, app, evidence", "region is required"]));
    let e = assert_error(pool(json!({ "pool_index": "1", "kind": "app", "region": "r" })).await, 400, "ValidationError");
    assert_eq!(e["details"], json!(["pool_index must be an integer from 0 to 1000000"]));
    assert_eq!(assert_error(pool(json!({})).await, 400, "ValidationError")["details"][0], "pool_index is required");
    let (_, l) = app.op(Method::GET, "/admin/pools", None).await;
    let indexes: Vec<i64> = l["data"].as_array().unwrap().iter().map(|p| p["pool_index"].as_i64().unwrap()).collect();
    assert_eq!(indexes, [0, 1, 2, 3]);

    let t = app.two_tenants("op-pool").await;
    let tenant = t.a["tenant_id"].as_str().unwrap();
    let app_id = "op-pool-a".to_string();
    let map = |id: &str, body: Value| app.op(Method::POST, format!("/admin/tenants/{id}/pool-map"), Some(body));
    let (s, m) = map(
        tenant,
        json!({ "admin_pool_index": 1, "region": "eu-west-1", "evidence_pool_index": 3, "app_pool_index": { app_id.clone(): 2 }, "status": "MIGRATING" }),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{m}");
    assert_eq!(
        m["data"],
        json!({ "tenant_id": tenant, "admin_pool_index": 1, "evidence_pool_index": 3, "app_pool_index": { app_id.clone(): 2 }, "region": "eu-west-1", "status": "MIGRATING" })
    );
    // An upsert: absent optional fields keep their value.
    let (s, m) = map(tenant, json!({ "admin_pool_index": 1, "region": "us-east-1" })).await;
    assert_eq!(
        (s, m["data"]["evidence_pool_index"].as_i64(), m["data"]["status"].as_str(), m["data"]["region"].as_str()),
        (StatusCode::CREATED, Some(3), Some("MIGRATING"), Some("us-east-1"))
    );
    // The tenant's chain moves with its admin pool.
    let pools: Vec<i64> = sqlx::query_scalar("SELECT DISTINCT pool_index FROM audit_entry WHERE tenant_id = $1 AND event_type = 'tenant.pool_map.changed.v1'")
        .bind(tenant)
        .fetch_all(&app.state().db.read)
        .await
        .unwrap();
    assert_eq!(pools, [1]);
    let (s, v) = app.op(Method::POST, format!("/admin/audit/verify?tenant_id={tenant}"), None).await;
    assert_eq!((s, v["data"]["verified"].as_bool()), (StatusCode::OK, Some(true)), "{v}");
    assert_eq!(app.get("/api/me", Some(&t.a_token)).await.0, StatusCode::OK, "the tenant works on");

    let e = assert_error(
        map(tenant, json!({ "admin_pool_index": 9, "region": "r", "evidence_pool_index": 8, "app_pool_index": { "x": 7 } })).await,
        400,
        "ValidationError",
    );
    assert_eq!(e["details"], json!(["admin_pool_index 9 names no pool", "evidence_pool_index 8 names no pool", "app_pool_index 7 names no pool"]));
    let e = assert_error(map(tenant, json!({ "status": "GONE", "app_pool_index": [1] })).await, 400, "ValidationError");
    assert_eq!(
        e["details"],
        json!([
            "admin_pool_index is required",
            "region is required",
            "app_pool_index must be a JSON object",
            "status must be one of: ACTIVE, MIGRATING, QUARANTINED"
        ])
    );
    let e = assert_error(map(tenant, json!({ "admin_pool_index": 0, "region": "r", "app_pool_index": { "x": "7" } })).await, 400, "ValidationError");
    assert_eq!(e["details"], json!(["app_pool_index.x must be an integer"]));
    let e = assert_error(map(tenant, json!({ "admin_pool_index": 0, "region": "r", "app_pool_index": { "x": 1_000_001 } })).await, 400, "ValidationError");
    assert_eq!(e["details"], json!(["app_pool_index must be an object of app_id to a pool_index from 0 to 1000000"]));
    let e = assert_error(map("not-a-uuid", json!({ "admin_pool_index": 0, "region": "r" })).await, 400, "ValidationError");
    assert_eq!(e["details"], json!(["tenant_id must be a UUID"]));
    assert_error(map(&uuid::Uuid::now_v7().to_string(), json!({ "admin_pool_index": 0, "region": "r" })).await, 404, "NotFound");
    // An unknown tenant is 404 before its body is looked at.
    assert_error(map(&uuid::Uuid::now_v7().to_string(), json!({})).await, 404, "NotFound");
}
db_test!(pools_are_created_and_pool_maps_name_existing_pools);
