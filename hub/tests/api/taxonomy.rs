//! sdk-taxonomy (extraction schemas: the tenant's own before the
//! platform's default) and semantic-service (the cross-domain bridges).

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{db_test, helpers::*, operator::BREAK_GLASS};

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

async fn the_bridges_carry_the_documented_fields(app: TestApp) {
    let t = app.signup("bridges@example.com", "bridges").await;
    let token = t["token"].as_str().unwrap();
    assert_error(app.get("/api/semantic/bridges", None).await, 401, "Unauthorized");
    let (s, list) = app.get("/api/semantic/bridges", Some(token)).await;
    assert_eq!(s, StatusCode::OK, "{list}");
    // The whole body: the envelope, every bridge, exactly the document's
    // fields (bridge_id, from_object_type_id, to_object_type_id,
    // access_mode, requires_cross_tenant_consent), unpaginated.
    assert_eq!(
        list,
        json!({ "success": true, "data": [
            { "bridge_id": "agent-runs-to-trace-exports", "from_object_type_id": "agent.run", "to_object_type_id": "trace.export",
              "access_mode": "read", "requires_cross_tenant_consent": false },
            { "bridge_id": "events-to-webhooks", "from_object_type_id": "audit.entry", "to_object_type_id": "webhook.delivery",
              "access_mode": "subscribe", "requires_cross_tenant_consent": false },
        ] })
    );
    // Query parameters change nothing (there are none).
    let (_, again) = app.get("/api/semantic/bridges?limit=1&from_object_type_id=agent.run", Some(token)).await;
    assert_eq!(again, list);
    // The document's schema says the same: the fields, all required, the
    // access modes an enumeration.
    let (_, doc) = app.get("/openapi.json", None).await;
    let schema = &doc["components"]["schemas"]["SemanticBridge"];
    let mut required: Vec<&str> = schema["required"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    required.sort_unstable();
    assert_eq!(required, ["access_mode", "bridge_id", "from_object_type_id", "requires_cross_tenant_consent", "to_object_type_id"]);
    let mut fields: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
    fields.sort_unstable();
    assert_eq!(fields, ["access_mode", "bridge_id", "from_object_type_id", "requires_cross_tenant_consent", "to_object_type_id"]);
    assert_eq!(schema["properties"]["requires_cross_tenant_consent"]["type"], "boolean");
    assert_eq!(doc["components"]["schemas"]["SemanticBridgeAccessMode"]["enum"], json!(["read", "subscribe"]));
}
db_test!(the_bridges_carry_the_documented_fields);

/// Retires or activates (`to`) a schema version.
async fn change(app: &TestApp, token: &str, id: &str, to: &str) -> (StatusCode, Value) {
    app.post(&format!("/api/taxonomy/extraction-schemas/{id}/{to}"), Some(token), json!({})).await
}

async fn a_tenant_lists_retires_and_rolls_back_its_schema_versions(app: TestApp) {
    let t = app.two_tenants("taxlife").await;
    let (a, b) = (t.a_token.as_str(), t.b_token.as_str());
    let publish = |kind: &str, field: &str| {
        app.post("/api/taxonomy/extraction-schemas", Some(a), json!({ "document_kind": kind, "fields": [{ "name": field, "type": "string" }] }))
    };
    let (_, v1) = publish("receipt", "one").await;
    let (_, v2) = publish("receipt", "two").await;
    let (_, menu) = publish("menu", "dish").await;
    let id = |v: &Value| v["data"]["schema_id"].as_str().unwrap().to_string();
    let (v1, v2, menu) = (id(&v1), id(&v2), id(&menu));

    // The list: the tenant's versions and the platform's defaults, newest
    // first, with filters.
    let (s, l) = app.get("/api/taxonomy/extraction-schemas", Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{l}");
    assert_eq!(l["total"], 6, "three of the tenant's, three defaults: {l}");
    let ids: Vec<&str> = l["data"].as_array().unwrap().iter().take(3).map(|s| s["schema_id"].as_str().unwrap()).collect();
    assert_eq!(ids, vec![menu.as_str(), v2.as_str(), v1.as_str()]);
    let (_, l) = app.get("/api/taxonomy/extraction-schemas?document_kind=receipt", Some(a)).await;
    assert_eq!(l["total"], 3);
    let (_, l) = app.get("/api/taxonomy/extraction-schemas?document_kind=receipt&source=tenant&status=retired", Some(a)).await;
    assert_eq!((l["total"].as_i64(), l["data"][0]["schema_id"].as_str()), (Some(1), Some(v1.as_str())));
    let (_, l) = app.get("/api/taxonomy/extraction-schemas?source=platform", Some(a)).await;
    assert_eq!(l["total"], 3);
    assert!(l["data"].as_array().unwrap().iter().all(|s| s["source"] == "platform"));
    let (_, l) = app.get("/api/taxonomy/extraction-schemas?source=tenant", Some(b)).await;
    assert_eq!(l["total"], 0, "another tenant sees none of A's");
    let bad = assert_error(app.get("/api/taxonomy/extraction-schemas?status=gone&source=x&document_kind=A!", Some(a)).await, 400, "ValidationError");
    assert_eq!(bad["details"].as_array().unwrap().len(), 2, "{bad}");

    // Read one: the tenant's own or a default; another tenant's is 404.
    let (s, one) = app.get(&format!("/api/taxonomy/extraction-schemas/{v1}"), Some(a)).await;
    assert_eq!((s, one["data"]["version"].as_i64(), one["data"]["status"].as_str()), (StatusCode::OK, Some(1), Some("retired")));
    let platform = "0193a000-0000-7000-8000-000000000002";
    let (s, d) = app.get(&format!("/api/taxonomy/extraction-schemas/{platform}"), Some(b)).await;
    assert_eq!((s, d["data"]["source"].as_str()), (StatusCode::OK, Some("platform")));
    assert_error(app.get(&format!("/api/taxonomy/extraction-schemas/{v1}"), Some(b)).await, 404, "NotFound");
    assert_error(app.get("/api/taxonomy/extraction-schemas/nope", Some(a)).await, 404, "NotFound");

    // Retiring the active version falls back to the platform's default.
    let (s, r) = change(&app, a, &v2, "retire").await;
    assert_eq!((s, r["data"]["status"].as_str(), r["data"]["schema_id"].as_str()), (StatusCode::OK, Some("retired"), Some(v2.as_str())), "{r}");
    let (_, d) = app.get("/api/taxonomy/extraction-schemas/active?document_kind=receipt", Some(a)).await;
    assert_eq!((d["data"]["schema_id"].as_str(), d["data"]["source"].as_str()), (Some(platform), Some("platform")));
    let b409 = assert_error(change(&app, a, &v2, "retire").await, 409, "Conflict");
    assert_eq!(b409["details"], json!(["the extraction schema is retired: only an active schema can be retired"]));
    assert_error(change(&app, a, platform, "retire").await, 404, "NotFound");
    assert_error(app.post(&format!("/api/taxonomy/extraction-schemas/{menu}/retire"), Some(b), json!({})).await, 404, "NotFound");
    // Without a default, the kind has no schema in force.
    assert_eq!(change(&app, a, &menu, "retire").await.0, StatusCode::OK);
    assert_error(app.get("/api/taxonomy/extraction-schemas/active?document_kind=menu", Some(a)).await, 404, "NotFound");

    // Rolling back: an earlier version is active again, the one in force
    // retired; activating the active one is 409.
    let (s, r) = change(&app, a, &v1, "activate").await;
    assert_eq!((s, r["data"]["status"].as_str(), r["data"]["version"].as_i64()), (StatusCode::OK, Some("active"), Some(1)), "{r}");
    let (_, d) = app.get("/api/taxonomy/extraction-schemas/active?document_kind=receipt", Some(a)).await;
    assert_eq!(d["data"]["schema_id"].as_str(), Some(v1.as_str()));
    assert_eq!(change(&app, a, &v2, "activate").await.0, StatusCode::OK);
    let (_, l) = app.get("/api/taxonomy/extraction-schemas?document_kind=receipt&source=tenant&status=active", Some(a)).await;
    assert_eq!((l["total"].as_i64(), l["data"][0]["schema_id"].as_str()), (Some(1), Some(v2.as_str())), "one active version");
    let b409 = assert_error(change(&app, a, &v2, "activate").await, 409, "Conflict");
    assert_eq!(b409["details"], json!(["the extraction schema is active: only a retired schema can be activated"]));
    assert_error(change(&app, a, platform, "activate").await, 404, "NotFound");
    assert_error(app.post(&format!("/api/taxonomy/extraction-schemas/{v1}/activate"), Some(b), json!({})).await, 404, "NotFound");
    // A publication after a roll-back still takes the next version.
    let (_, v3) = publish("receipt", "three").await;
    assert_eq!((v3["data"]["version"].as_i64(), v3["data"]["status"].as_str()), (Some(3), Some("active")));

    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |e: &str| events.iter().filter(|x| *x == e).count();
    assert_eq!((count("taxonomy.schema.retired.v1"), count("taxonomy.schema.activated.v1")), (2, 2), "{events:?}");
}
db_test!(a_tenant_lists_retires_and_rolls_back_its_schema_versions);

async fn the_operator_publishes_platform_default_schemas(app: TestApp) {
    let t = app.two_tenants("taxop").await;
    let (a, b) = (t.a_token.as_str(), t.b_token.as_str());
    let publish = |body: Value| app.operator(BREAK_GLASS, Method::POST, "/admin/taxonomy/extraction-schemas", Some(body));
    let fields = json!([{ "name": "invoice_number", "type": "string", "required": true }, { "name": "vat", "type": "money" }]);
    // A tenant with its own schema of the kind keeps it.
    let (_, own) = app.post("/api/taxonomy/extraction-schemas", Some(a), json!({ "document_kind": "invoice", "fields": fields })).await;

    let (s, d) = publish(json!({ "document_kind": "invoice", "fields": fields, "description": "with VAT", "operator_id": "op-ada" })).await;
    assert_eq!(s, StatusCode::CREATED, "{d}");
    assert_eq!(
        (d["data"]["document_kind"].as_str(), d["data"]["version"].as_i64(), d["data"]["status"].as_str(), d["data"]["source"].as_str()),
        (Some("invoice"), Some(2), Some("active"), Some("platform"))
    );
    let (_, seen) = app.get("/api/taxonomy/extraction-schemas/active?document_kind=invoice", Some(b)).await;
    assert_eq!((seen["data"]["schema_id"].clone(), seen["data"]["description"].as_str()), (d["data"]["schema_id"].clone(), Some("with VAT")));
    let (_, mine) = app.get("/api/taxonomy/extraction-schemas/active?document_kind=invoice", Some(a)).await;
    assert_eq!(mine["data"]["schema_id"], own["data"]["schema_id"], "a tenant's own schema comes first");
    // The previous default is retired; a new kind starts at version 1.
    let (_, old) = app.get("/api/taxonomy/extraction-schemas/0193a000-0000-7000-8000-000000000001", Some(b)).await;
    assert_eq!(old["data"]["status"], "retired");
    let (s, d) = publish(json!({ "document_kind": "payslip", "fields": [{ "name": "gross", "type": "money" }], "operator_id": "op-ada" })).await;
    assert_eq!((s, d["data"]["version"].as_i64()), (StatusCode::CREATED, Some(1)));
    let (_, seen) = app.get("/api/taxonomy/extraction-schemas/active?document_kind=payslip", Some(b)).await;
    assert_eq!(seen["data"]["source"], "platform");

    let bad = assert_error(publish(json!({ "document_kind": "A!", "fields": [{ "name": "x", "type": "enum" }] })).await, 400, "ValidationError");
    assert_eq!(bad["details"], json!(["operator_id is required"]));
    let bad =
        assert_error(publish(json!({ "document_kind": "A!", "fields": [{ "name": "x", "type": "enum" }], "operator_id": "o" })).await, 400, "ValidationError");
    assert_eq!(
        bad["details"],
        json!(["document_kind must be 1 to 64 of a-z, 0-9, '.', '_', '-'", "fields[0].values must be a non-empty array of strings for an enum"])
    );
    assert_error(app.post("/admin/taxonomy/extraction-schemas", Some(a), json!({})).await, 401, "Unauthorized");

    let published: Vec<(String, String)> = app.platform_events().await.into_iter().filter(|(e, _)| e == "taxonomy.schema.published.v1").collect();
    assert_eq!(published.len(), 2, "in the platform chain: {published:?}");
    assert!(published.iter().all(|(_, who)| who == "break-glass"));
    assert!(app.events_of(&t.b["tenant_id"]).await.iter().all(|e| e != "taxonomy.schema.published.v1"));
}
db_test!(the_operator_publishes_platform_default_schemas);
