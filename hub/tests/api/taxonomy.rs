//! sdk-taxonomy (extraction schemas: the tenant's own before the
//! platform's default) and semantic-service (the cross-domain bridges).

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

async fn a_tenants_schema_overrides_the_platform_default_for_its_kind(app: TestApp) {
    let t = app.two_tenants("taxonomy").await;
    let a = t.a_token.as_str();
    let (s, d) = app.get("/api/taxonomy/extraction-schemas/active?document_kind=invoice", Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{d}");
    assert_eq!((d["data"]["source"].as_str(), d["data"]["version"].as_i64()), (Some("platform"), Some(1)));
    assert!(d["data"]["fields"].as_array().unwrap().iter().any(|f| f["name"] == "invoice_number"));

    let schema = |extra: &str| {
        json!({ "document_kind": "invoice", "description": "our invoices", "fields": [
            { "name": "invoice_number", "type": "string", "required": true },
            { "name": "po_number", "type": "string" },
            { "name": extra, "type": "enum", "values": ["net30", "net60"] }
        ] })
    };
    let (s, v1) = app.post("/api/taxonomy/extraction-schemas", Some(a), schema("terms")).await;
    assert_eq!(s, StatusCode::CREATED, "{v1}");
    assert_eq!((v1["data"]["source"].as_str(), v1["data"]["version"].as_i64(), v1["data"]["status"].as_str()), (Some("tenant"), Some(1), Some("active")));
    assert_eq!(v1["data"]["fields"][1], json!({ "name": "po_number", "type": "string", "required": false }));
    let (_, v2) = app.post("/api/taxonomy/extraction-schemas", Some(a), schema("payment_terms")).await;
    assert_eq!(v2["data"]["version"], 2);
    let (_, d) = app.get("/api/taxonomy/extraction-schemas/active?document_kind=invoice", Some(a)).await;
    assert_eq!((d["data"]["schema_id"].clone(), d["data"]["source"].as_str()), (v2["data"]["schema_id"].clone(), Some("tenant")));
    // Another tenant still gets the default; a kind with neither is 404.
    let (_, d) = app.get("/api/taxonomy/extraction-schemas/active?document_kind=invoice", Some(&t.b_token)).await;
    assert_eq!(d["data"]["source"], "platform");
    assert_error(app.get("/api/taxonomy/extraction-schemas/active?document_kind=menu", Some(a)).await, 404, "NotFound");
    assert_error(app.get("/api/taxonomy/extraction-schemas/active", Some(a)).await, 400, "ValidationError");

    let b = assert_error(
        app.post(
            "/api/taxonomy/extraction-schemas",
            Some(a),
            json!({ "document_kind": "Invoice!", "fields": [
            { "name": "a b", "type": "text" }, { "name": "x", "type": "enum" }, { "name": "x", "type": "date", "required": "yes" }
        ] }),
        )
        .await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!(["fields[0].type must be one of: string, number, integer, boolean, date, money, enum", "fields[2].required must be true or false"])
    );
    let b = assert_error(app.post("/api/taxonomy/extraction-schemas", Some(a), json!({ "fields": [], "description": 5 })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["document_kind is required", "fields must hold 1 to 200 items", "description must be a string"]));
    let b = assert_error(
        app.post(
            "/api/taxonomy/extraction-schemas",
            Some(a),
            json!({ "document_kind": "Invoice!", "fields": [
            { "name": "a b", "type": "string" }, { "name": "x", "type": "enum" }, { "name": "x", "type": "date", "required": true }
        ] }),
        )
        .await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!([
            "document_kind must be 1 to 64 of a-z, 0-9, '.', '_', '-'",
            "fields[0].name must be 1 to 128 letters, digits or '_'",
            "fields[1].values must be a non-empty array of strings for an enum",
            "fields[2].name x is given twice",
        ])
    );
    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |e: &str| events.iter().filter(|x| *x == e).count();
    assert_eq!((count("taxonomy.schema.published.v1"), count("taxonomy.schema.overridden.v1")), (2, 1));
}
db_test!(a_tenants_schema_overrides_the_platform_default_for_its_kind);

async fn the_bridges_name_groups_of_the_catalogue(app: TestApp) {
    let t = app.signup("bridges@example.com", "bridges").await;
    let token = t["token"].as_str().unwrap();
    assert_error(app.get("/api/semantic/bridges", None).await, 401, "Unauthorized");
    let (s, list) = app.get("/api/semantic/bridges", Some(token)).await;
    assert_eq!(s, StatusCode::OK, "{list}");
    let bridges = list["data"].as_array().unwrap();
    assert!(bridges.iter().any(|b| b["bridge_id"] == "agent-runs-to-trace-exports" && b["event_types"] == json!(["agent.run.started.v1"])));
    let (_, index) = app.get("/capabilities.json", None).await;
    let groups: Vec<&Value> = index["groups"].as_array().unwrap().iter().map(|g| &g["group"]).collect();
    for b in bridges {
        assert!(groups.contains(&&b["to_group"]), "{} is a group of the catalogue", b["to_group"]);
    }
}
db_test!(the_bridges_name_groups_of_the_catalogue);
