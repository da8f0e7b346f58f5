//! The catalogue, machine-readable: the OpenAPI document and the capability
//! index are public, describe every route the hub serves, and carry what
//! the gate decides (security, required scope, whether an operation writes).

use std::collections::{BTreeSet, HashMap};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

const METHODS: [&str; 5] = ["get", "put", "post", "delete", "patch"];

/// (METHOD, path template) of every operation in the document.
fn operations(doc: &Value) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for m in METHODS {
            if item.get(m).is_some() {
                out.insert((m.to_uppercase(), path.clone()));
            }
        }
    }
    out
}

/// (METHOD, path) of every route the area crates register, read from their
/// sources: each `routes!(...)` handler's `#[utoipa::path(...)]`. A route
/// registered any other way (`.route(`) fails the test below.
fn registered() -> BTreeSet<(String, String)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = BTreeSet::new();
    let mut dirs: Vec<_> = [
        "identity/src",
        "platform/src",
        "device/src",
        "governance/src",
        "provenance/src",
        "outreach/src",
        "crm/src",
        "ai/src",
        "billing/src",
        "operator/src",
        "src",
    ]
    .map(|d| root.join(d))
    .into();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            // Unit tests build routers of their own.
            let text = text.split("#[cfg(test)]").next().unwrap();
            assert!(!text.contains(".route(\""), "{} registers a route outside routes!(): every route must be in the OpenAPI document", path.display());
            for (i, _) in text.match_indices("#[utoipa::path(") {
                let rest = &text[i + 15..];
                let method = rest.split(',').next().unwrap().trim().to_uppercase();
                let p = rest.split("path = \"").nth(1).unwrap().split('"').next().unwrap();
                out.insert((method, p.to_string()));
            }
        }
    }
    out
}

async fn the_openapi_document_describes_every_route_and_what_the_gate_needs(app: TestApp) {
    let (s, doc) = app.get("/openapi.json", None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["version"], "2026.08.02");
    let ids: Vec<&str> =
        doc["paths"].as_object().unwrap().values().flat_map(|item| METHODS.iter().filter_map(|m| item.get(*m)?["operationId"].as_str())).collect();
    let unique: BTreeSet<&str> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "operation ids are unique: {ids:?}");
    assert_eq!(doc["servers"], json!([{ "url": "/", "description": "this hub" }]));
    let unsummarised: Vec<String> = operations(&doc)
        .into_iter()
        .filter(|(m, p)| doc["paths"][p][m.to_lowercase()]["summary"].as_str().is_none_or(str::is_empty))
        .map(|(m, p)| format!("{m} {p}"))
        .collect();
    assert!(unsummarised.is_empty(), "every operation has a summary: {unsummarised:?}");
    let documented = operations(&doc);
    let registered = registered();
    let missing: Vec<_> = registered.difference(&documented).collect();
    let extra: Vec<_> = documented.difference(&registered).collect();
    assert!(missing.is_empty(), "registered but not documented: {missing:?}");
    assert!(extra.is_empty(), "documented but not registered: {extra:?}");

    let op = &doc["paths"]["/api/hdk/measure/measurements"]["post"];
    assert_eq!(op["x-required-scope"], "hdk.measure.write");
    assert_eq!(op["x-writes"], true);
    assert_eq!(op["security"], serde_json::json!([{ "bearer": [] }, { "apiKey": [] }]));
    assert_eq!(op["responses"]["403"]["content"]["application/json"]["schema"]["$ref"], "#/components/schemas/ErrorBody");
    assert!(op["requestBody"]["content"]["application/json"]["schema"].is_object(), "{op}");
    let list = &doc["paths"]["/api/hdk/measure/measurements"]["get"];
    assert_eq!((list["x-required-scope"].as_str(), list["x-writes"].as_bool()), (Some("hdk.measure.read"), Some(false)));
    let names: Vec<&str> = list["parameters"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["capture_id", "limit", "offset"]);

    // Path parameters are the path's, and the path's are parameters (a
    // query struct without `parameter_in = Query` lands in the path).
    for (path, item) in doc["paths"].as_object().unwrap() {
        for op in METHODS.iter().filter_map(|m| item.get(*m)) {
            let in_path: BTreeSet<&str> =
                op["parameters"].as_array().into_iter().flatten().filter(|p| p["in"] == "path").map(|p| p["name"].as_str().unwrap()).collect();
            let named: BTreeSet<&str> = path.split('/').filter_map(|s| s.strip_prefix('{')?.strip_suffix('}')).collect();
            assert_eq!(in_path, named, "{path} {}", op["operationId"]);
        }
    }

    // Every documented operation answers something other than the
    // router's own "no such route": the document names only real routes.
    for (method, path) in &documented {
        let concrete = path.split('/').map(|seg| if seg.starts_with('{') { "0190a000-0000-7000-8000-000000000000" } else { seg }).collect::<Vec<_>>().join("/");
        let res = app.client.request(reqwest::Method::from_bytes(method.as_bytes()).unwrap(), format!("{}{concrete}", app.base)).send().await.unwrap();
        assert_ne!(res.status(), StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
    }
}
db_test!(the_openapi_document_describes_every_route_and_what_the_gate_needs);

/// utoipa keeps one schema per name and overwrites silently: two types
/// documented under one name would describe one of them wrongly. Every
/// `ToSchema` type of the hub's crates has a name of its own (its struct
/// name, or its `#[schema(as = ...)]`).
#[test]
fn every_schema_has_a_name_of_its_own() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut seen: HashMap<String, std::path::PathBuf> = HashMap::new();
    let mut clashes = Vec::new();
    let mut dirs = vec![root.join("src")];
    for area in ["kernel", "identity", "platform", "device", "governance", "provenance", "outreach", "crm", "ai", "billing", "operator"] {
        dirs.push(root.join(area).join("src"));
    }
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            for (i, line) in lines.iter().enumerate() {
                if !(line.trim_start().starts_with("#[derive(") && line.contains("ToSchema")) {
                    continue;
                }
                let mut name = None;
                for next in lines.iter().skip(i + 1).take(6) {
                    if let Some(rest) = next.split("schema(as = ").nth(1) {
                        name = Some(rest.split(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap().to_string());
                    }
                    let t = next.trim_start().trim_start_matches("pub ");
                    if let Some(rest) = t.strip_prefix("struct ").or_else(|| t.strip_prefix("enum ")) {
                        let own = rest.split(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap().to_string();
                        let name = name.take().unwrap_or(own);
                        if let Some(other) = seen.insert(name.clone(), path.clone())
                            && other != path
                        {
                            clashes.push(format!("{name}: {} and {}", other.display(), path.display()));
                        }
                        break;
                    }
                }
            }
        }
    }
    assert!(clashes.is_empty(), "schemas sharing a name: {clashes:?}");
    assert!(seen.len() > 50, "read {} schemas", seen.len());
}

async fn the_capability_index_lists_every_group_and_api(app: TestApp) {
    let (_, doc) = app.get("/openapi.json", None).await;
    let (s, index) = app.get("/capabilities.json", None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(index["version"], "2026.07.21");
    let apis = index["apis"].as_array().unwrap();
    assert_eq!(apis.len(), operations(&doc).len());
    let measure = apis.iter().find(|a| a["path"] == "/api/hdk/measure/measurements" && a["method"] == "POST").unwrap();
    assert_eq!(
        (measure["group"].as_str(), measure["required_scope"].as_str(), measure["writes"].as_bool()),
        (Some("hdk-measure"), Some("hdk.measure.write"), Some(true))
    );
    let group = index["groups"].as_array().unwrap().iter().find(|g| g["group"] == "hdk-measure").unwrap();
    assert_eq!(group["area"], "device");
}
db_test!(the_capability_index_lists_every_group_and_api);

/// The scope a probing key holds: no route needs it.
const UNRELATED_SCOPE: &str = "matrix.probe.read";

/// Resources of tenant A, one for each path parameter the catalogue uses,
/// made through the API. A new parameter needs a line here: the matrix
/// fails naming it until it has one.
async fn fixtures(app: &TestApp, t: &TwoTenants) -> HashMap<&'static str, String> {
    let a = t.a_token.as_str();
    let data = |v: &Value, f: &str| v["data"][f].as_str().unwrap_or_else(|| panic!("{f} in {v}")).to_string();
    let mut ids = HashMap::new();
    let (asset, _) = crate::assets::robot(app, a, json!({ "display_name": "matrix" })).await;
    let (_, cred) = app.post(&format!("/api/assets/{asset}/credentials"), Some(a), json!({})).await;
    ids.insert("credential_id", data(&cred, "credential_id"));
    let (_, cmd) = app.post("/api/commands", Some(a), json!({ "type": "x", "risk_class": "high", "target_asset_id": asset })).await;
    ids.insert("command_id", data(&cmd, "command_id"));
    // The meter knows the asset once it has usage of it.
    let (s, u) = app.post("/api/meter/usage", Some(a), json!({ "asset_id": asset, "sku": "mx", "quantity": 1, "idempotency_key": "mx" })).await;
    assert_eq!(s, StatusCode::CREATED, "{u}");
    ids.insert("asset_id", asset);
    let device = uuid::Uuid::now_v7().to_string();
    let (s, d) = app.post("/api/devices", Some(a), json!({ "device_uuid": device, "platform": "ios" })).await;
    assert_eq!(s, StatusCode::CREATED, "{d}");
    let (_, crash) = app.post("/api/diagnostic/crash", Some(a), json!({ "device_uuid": device, "stack_envelope": "x" })).await;
    ids.insert("id", data(&crash, "id"));
    ids.insert("device_uuid", device);
    // A's person, linked to A's device.
    let (s, l) = app.post(&format!("/api/devices/{}/link-person", ids["device_uuid"]), Some(a), json!({ "person_id": t.a["person_id"] })).await;
    assert_eq!(s, StatusCode::CREATED, "{l}");
    ids.insert("person_id", t.a["person_id"].as_str().unwrap().to_string());
    let (s, e) =
        app.post("/api/events/types", Some(a), json!({ "event_type": "mx.thing.done.v1", "retention_class": "operational", "conflict_policy": "lww" })).await;
    assert_eq!(s, StatusCode::CREATED, "{e}");
    ids.insert("event_type", "mx.thing.done.v1".to_string());
    for f in ["persona_id", "membership_id", "app_identity_id"] {
        ids.insert(f, t.a[f].as_str().unwrap().to_string());
    }
    ids.insert("band_kind", "profile".to_string());
    let (application, key) = app.key(a, "matrix", json!(["*"])).await;
    ids.insert("application_id", application);
    ids.insert("key_id", key["key_id"].as_str().unwrap().to_string());
    let (_, p) = app.post("/api/personas", Some(a), json!({ "kind": "service" })).await;
    let owner = app.owner_template(a, t.a["persona_id"].as_str().unwrap()).await;
    let (s, g) = app.post("/api/role-assignments", Some(a), json!({ "persona_id": p["data"]["persona_id"], "role_template_id": owner })).await;
    assert_eq!(s, StatusCode::CREATED, "{g}");
    ids.insert("assignment_id", data(&g, "assignment_id"));
    let (s, r) = app.post("/api/role-templates", Some(a), json!({ "name": "mx-template" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("role_template_id", data(&r, "role_template_id"));
    let (s, r) = app.post("/api/residency/nodes", Some(a), json!({ "name": "mx-region", "kind": "region" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("geo_node_id", data(&r, "geo_node_id"));
    let entry: String = sqlx::query_scalar("SELECT entry_id FROM audit_entry WHERE tenant_id = $1 LIMIT 1")
        .bind(t.a["tenant_id"].as_str().unwrap())
        .fetch_one(&app.state().db.read)
        .await
        .unwrap();
    ids.insert("entry_id", entry);
    let (s, w) = app.post("/api/workflows/definitions", Some(a), json!({ "name": "mx-flow", "step_specs": [{ "name": "one" }] })).await;
    assert_eq!(s, StatusCode::CREATED, "{w}");
    ids.insert("name", "mx-flow".to_string());
    let (s, g) = app.post("/api/geo/addresses", Some(a), json!({ "lines": ["1 Matrix Way"], "country_code": "NL" })).await;
    assert_eq!(s, StatusCode::CREATED, "{g}");
    ids.insert("address_id", g["data"]["address"]["address_id"].as_str().unwrap().to_string());
    let (s, r) = app.post("/api/dispatch/routes/optimize", Some(a), json!({ "stops": [{ "lat": 52.0, "lng": 4.0 }] })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("route_id", data(&r, "route_id"));
    // The matrix never offboards A: only B's credentials and A's probe key
    // (lacking the scope) reach A's offboarding routes.
    ids.insert("tenant_id", t.a["tenant_id"].as_str().unwrap().to_string());
    let (s, f) = app.post("/api/feature-flags", Some(a), json!({ "flag_key": "mx-flag" })).await;
    assert_eq!(s, StatusCode::CREATED, "{f}");
    ids.insert("flag_key", "mx-flag".to_string());
    let (s, r) = app.post("/api/assignment/routes", Some(a), json!({ "name": "mx-rules", "rules": [{ "name": "any" }] })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("rule_set_id", data(&r, "rule_set_id"));
    let (s, r) = app.post("/api/assignment/simulate", Some(a), json!({ "rule_set_name": "mx-rules", "candidate_version": 1 })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("simulation_id", data(&r, "simulation_id"));
    let (s, r) = app.post("/api/assignments", Some(a), json!({ "subject_ref": "mx", "primary_persona_id": t.a["persona_id"] })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("record_id", data(&r, "record_id"));
    let (s, r) = app.post("/api/media/blobs", Some(a), json!({})).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("blob_id", data(&r, "blob_id"));
    // Deliveries to a port nothing listens on (9, discard): they fail, quietly.
    let (s, r) = app.post("/api/webhooks/endpoints", Some(a), json!({ "url": "http://127.0.0.1:9/hook", "event_types": ["*"] })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("endpoint_id", data(&r, "endpoint_id"));
    let (s, _) = app.post("/api/workflows/definitions", Some(a), json!({ "name": "mx-hooked", "step_specs": [{ "name": "one" }] })).await;
    assert_eq!(s, StatusCode::CREATED);
    // The worker fans the event out into a delivery within a round or two.
    for _ in 0..200 {
        let found: Option<String> = sqlx::query_scalar("SELECT delivery_id FROM webhook_delivery WHERE endpoint_id = $1 LIMIT 1")
            .bind(&ids["endpoint_id"])
            .fetch_optional(&app.state().db.read)
            .await
            .unwrap();
        if let Some(d) = found {
            ids.insert("delivery_id", d);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(ids.contains_key("delivery_id"), "a delivery of the fixture endpoint");
    let (s, r) = app.post("/api/secrets/refs", Some(a), json!({ "ref": "mx-secret", "kms_key_id": "k" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("ref", "mx-secret".to_string());
    let (s, r) = app.post("/api/data-rights/requests", Some(a), json!({ "subject": "mx", "kind": "access" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    let request = data(&r, "request_id");
    let (s, e) = app.post(&format!("/api/data-rights/requests/{request}/executions"), Some(a), json!({})).await;
    assert_eq!(s, StatusCode::CREATED, "{e}");
    ids.insert("request_id", request);
    ids.insert("execution_id", data(&e, "execution_id"));
    let (s, c) = app.post("/api/source-records/claims", Some(a), json!({ "subject_id": "mx", "attribute": "a", "value": 1, "source": "s" })).await;
    assert_eq!(s, StatusCode::CREATED, "{c}");
    ids.insert("claim_id", data(&c, "claim_id"));
    // `request_id` is the data-rights request's; the step is an approval request's.
    let (s, r) = app.post("/api/approvals/routes", Some(a), json!({ "name": "mx", "steps": [{ "approver_persona_id": t.a["persona_id"] }] })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    let (s, r) = app.post("/api/approvals/requests", Some(a), json!({ "route_id": r["data"]["route_id"], "subject_kind": "mx", "subject_id": "1" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("step_id", r["data"]["steps"][0]["step_id"].as_str().unwrap().to_string());
    // Inactive: the matrix's requests are not subject to it.
    let (s, r) = app.post("/api/policies/bundles", Some(a), json!({ "name": "mx", "version": 1, "iql_source": "permit (principal, action, resource);" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("bundle_id", data(&r, "bundle_id"));
    let run = crate::trace::run_in_trace(app, a, t.a["persona_id"].as_str().unwrap(), "mx-trace").await;
    ids.insert("run_id", run["run_id"].as_str().unwrap().to_string());
    ids.insert("agent_id", run["agent_id"].as_str().unwrap().to_string());
    let (s, r) = app.post("/api/traces/mx-trace/exports", Some(a), json!({})).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("trace_id", "mx-trace".to_string());
    ids.insert("export_id", data(&r, "export_id"));
    let (s, m) = app.post("/api/auth/register", None, json!({ "email": "twin@mx.example.com", "password": "member password", "display_name": "T" })).await;
    assert_eq!(s, StatusCode::CREATED, "{m}");
    let (s, _) = app.post("/api/memberships", Some(a), json!({ "person_id": m["data"]["person_id"] })).await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, l) = app.post("/api/identity-resolver/links", Some(a), json!({ "person_id_a": t.a["person_id"], "person_id_b": m["data"]["person_id"] })).await;
    assert_eq!(s, StatusCode::CREATED, "{l}");
    ids.insert("link_id", data(&l, "link_id"));
    // A subject of A's, rebuilt: B has no subject of that name.
    let (s, r) = app.post("/api/projections", Some(a), json!({ "subject_id": "mx-subject" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    let (s, r) = app.post("/api/projections/mx-subject/assertions", Some(a), json!({ "attribute": "a", "value": 1 })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    let (s, r) = app.post("/api/projections/mx-subject/rebuild", Some(a), json!({})).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    ids.insert("subject_id", "mx-subject".to_string());
    crate::billing::standard_catalog(app, "mx").await;
    hub_billing::billing::set_catalog_status(&app.state().db, "mx", "active", "op").await.unwrap();
    let (s, r) = app.post("/api/billing/invoices", Some(a), json!({ "catalog": "mx", "period_start": "2026-01-01", "period_end": "2026-01-31" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("invoice_id", data(&r, "invoice_id"));
    ids.insert("catalog_id", "mx".to_string());
    ids.insert("sku", "mx".to_string());
    // Operator routes: only their 401s are probed.
    ids.insert("binding_id", uuid::Uuid::now_v7().to_string());
    ids.insert("capability", "mx.lookup".to_string());
    hub_billing::data_credits::set_price(&app.state().db, "mx.lookup", 1, "op").await.unwrap();
    hub_billing::data_credits::grant_credits(&app.state().db, t.a["tenant_id"].as_str().unwrap(), 5, "op", "matrix").await.unwrap();
    let (s, r) = app.post("/api/data-credits/holds", Some(a), json!({ "capability": "mx.lookup" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("hold_id", data(&r, "hold_id"));
    let m = crate::payments::method(app, a, "tok_visa").await;
    let (s, r) = app.post("/api/payments/charges", Some(a), json!({ "amount": 100, "currency": "EUR", "payment_method_id": m, "idempotency_key": "mx" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("charge_id", data(&r, "charge_id"));
    ids.insert("payment_method_id", m);
    let (s, r) =
        app.post("/api/taxonomy/extraction-schemas", Some(a), json!({ "document_kind": "mx-kind", "fields": [{ "name": "n", "type": "string" }] })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("schema_id", data(&r, "schema_id"));
    let (s, r) = app.post("/api/analytics/builds", Some(a), json!({ "kind": "usage_daily", "period_start": "2026-01-01", "period_end": "2026-01-31" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("build_id", data(&r, "build_id"));
    let (s, r) = app.post("/api/offers", Some(a), json!({ "tenant_id": t.a["tenant_id"], "name": "mx", "slug": "mx" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("offer_id", data(&r, "offer_id"));
    let (s, r) = app.post("/api/crm/deals", Some(a), json!({ "name": "mx", "company": "mx" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("deal_id", data(&r, "deal_id"));
    let deal = ids["deal_id"].clone();
    let (s, r) =
        app.post("/api/handoffs", Some(a), json!({ "deal_id": deal, "from_persona_id": t.a["persona_id"], "to_persona_id": p["data"]["persona_id"] })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("handoff_id", data(&r, "handoff_id"));
    let (s, r) = app.post("/api/incidents", Some(a), json!({ "title": "mx", "severity": "low" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("incident_id", data(&r, "incident_id"));
    let (s, r) = app.post("/api/crm/contacts", Some(a), json!({ "name": "mx" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("contact_id", data(&r, "contact_id"));
    let (s, r) = app.post("/api/crm/leads", Some(a), json!({ "name": "mx", "contact_id": ids["contact_id"] })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("lead_id", data(&r, "lead_id"));
    let (s, r) = app.post("/api/crm/calls", Some(a), json!({ "lead_id": ids["lead_id"], "direction": "inbound", "disposition": "answered" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("call_id", data(&r, "call_id"));
    let (s, r) = app.post("/api/campaigns", Some(a), json!({ "name": "mx" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("campaign_id", data(&r, "campaign_id"));
    let (s, r) = app.post(&format!("/api/campaigns/{}/journeys", ids["campaign_id"]), Some(a), json!({ "name": "mx" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("journey_id", data(&r, "journey_id"));
    let (s, r) = app.post("/api/content/items", Some(a), json!({ "title": "mx", "body": "v1" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("item_id", data(&r, "item_id"));
    let (s, r) = app.post("/api/lead-scoring/models", Some(a), json!({ "vertical": "mx", "name": "mx", "weights": { "a": 1 } })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("model_id", data(&r, "model_id"));
    let (s, r) = app
        .post("/api/ingest/batches", Some(a), json!({ "entity": "crm.lead", "mode": "insert", "idempotency_key": "mx", "records": [{ "name": "mx" }] }))
        .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    ids.insert("batch_id", data(&r, "batch_id"));
    // A completion whose provider cannot be reached is recorded as failed.
    let (s, r) = app
        .post(
            "/api/ai/routes",
            Some(a),
            json!({ "name": "mx", "provider_base_url": "http://127.0.0.1:9/v1", "model": "mx", "max_attempts": 1, "timeout_ms": 1000 }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    let (s, r) = app.post("/api/ai/completions", Some(a), json!({ "route": "mx", "prompt": "mx" })).await;
    assert_eq!(s, StatusCode::BAD_GATEWAY, "{r}");
    let completion: String = sqlx::query_scalar("SELECT completion_id FROM ai_gateway_completion WHERE tenant_id = $1")
        .bind(t.a["tenant_id"].as_str().unwrap())
        .fetch_one(&app.state().db.read)
        .await
        .unwrap();
    ids.insert("completion_id", completion);
    // Parameters of operator routes only: the matrix checks their 401s,
    // which come before any lookup.
    for p in ["profile_id", "region_id", "release_id", "install_id"] {
        ids.insert(p, uuid::Uuid::now_v7().to_string());
    }
    let (s, r) = app.post("/api/engagement/encounters", Some(a), json!({})).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("encounter_id", data(&r, "encounter_id"));
    let (s, r) = app.post("/api/tickets/events", Some(a), json!({ "name": "mx", "starts_at": "2027-01-01T00:00:00Z" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("event_id", data(&r, "event_id"));
    let (s, r) = app.post("/api/tickets", Some(a), json!({ "event_id": r["data"]["event_id"] })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("ticket_id", data(&r, "ticket_id"));
    let (s, r) = app.post("/api/service-requests/queues", Some(a), json!({ "tenant_id": t.a["tenant_id"], "name": "mx" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("queue_id", data(&r, "queue_id"));
    let (s, r) = app.post("/api/service-requests", Some(a), json!({ "queue_id": r["data"]["queue_id"], "title": "mx" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("service_request_id", data(&r, "request_id"));
    let (s, r) = app.post("/api/sla/policies", Some(a), json!({ "name": "mx", "target_minutes": 60 })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("policy_id", data(&r, "policy_id"));
    let (s, r) = app.post(&format!("/api/sla/policies/{}/rungs", ids["policy_id"]), Some(a), json!({ "offset_minutes": -5, "severity": "low" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("rung_id", data(&r, "rung_id"));
    let (s, r) = app
        .post(
            "/api/social/handles",
            Some(a),
            json!({ "tenant_id": t.a["tenant_id"], "network": "x", "external_handle_id": "mx", "authorized_persona_id": t.a["persona_id"] }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("handle_id", data(&r, "handle_id"));
    let (s, r) = app.post("/api/sla/clocks", Some(a), json!({ "policy_id": ids["policy_id"], "subject_ref": "mx" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("clock_id", data(&r, "clock_id"));
    let (s, r) = app
        .post("/api/scheduling/appointments", Some(a), json!({ "title": "mx", "starts_at": "2027-01-01T09:00:00Z", "ends_at": "2027-01-01T10:00:00Z" }))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("appointment_id", data(&r, "appointment_id"));
    let (s, r) = app.post("/api/notifications", Some(a), json!({ "channel": "email", "recipient": "mx@example.com", "body": "mx" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("notification_id", data(&r, "notification_id"));
    let (s, r) = app.post("/api/conversations/suppressions", Some(a), json!({ "channel": "email", "address": "mx@example.com" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("suppression_id", data(&r, "suppression_id"));
    let (s, r) = app.post("/api/scheduling/connections", Some(a), json!({ "name": "mx", "collection_url": "https://calendar.mx.example.com/mx/" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("connection_id", data(&r, "connection_id"));
    let (s, r) = app.post("/api/sequences/templates", Some(a), json!({ "tenant_id": t.a["tenant_id"], "name": "mx", "body": "mx" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("template_id", data(&r, "template_id"));
    let (s, r) = app.post("/api/sequences", Some(a), json!({ "name": "mx", "steps": [{ "template_id": ids["template_id"] }] })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("sequence_id", data(&r, "sequence_id"));
    // The CRM contact fixture enrolled in it (issue 37, item 4).
    let (s, r) = app.post(&format!("/api/sequences/{}/enrollments", ids["sequence_id"]), Some(a), json!({ "contact_id": ids["contact_id"] })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("enrollment_id", data(&r, "enrollment_id"));
    let (s, r) = app.post("/api/consent/purposes", Some(a), json!({ "purpose_id": "mx-purpose", "description": "mx", "legal_basis": "consent" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("purpose_id", "mx-purpose".to_string());
    let (s, r) = app.post("/api/evidence/captures", Some(a), json!({ "encounter_id": "mx", "kind": "note", "note": "mx" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("capture_id", data(&r, "capture_id"));
    let (s, r) = app.post("/api/webhooks/inbound-secrets", Some(a), json!({ "kind": "mx", "provider": "mx-provider" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("kind", "mx".to_string());
    ids.insert("provider", "mx-provider".to_string());
    // hdk-sync, sdk-coverage, sdk-connectors, connector-voice (issue 37).
    let (s, r) = app
        .post("/api/hdk/sync/resolve", Some(a), json!({ "event_type": "mx.thing.done.v1", "input_a": { "timestamp": 1 }, "input_b": { "timestamp": 2 } }))
        .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    ids.insert("resolution_id", data(&r, "resolution_id"));
    let (s, r) = app
        .post(
            "/api/coverage/rules",
            Some(a),
            json!({ "subject_kind": "mx-kind", "primary_persona_id": t.a["persona_id"], "backup_persona_id": p["data"]["persona_id"] }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("subject_kind", "mx-kind".to_string());
    let (s, r) =
        app.post("/api/connectors/sync-items", Some(a), json!({ "connector_kind": "mx", "external_id": "mx-1", "outcome": "failed", "error": "mx" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    ids.insert("deadletter_id", data(&r, "deadletter_id"));
    let voice = app.inbound_sender(a, &t.a["tenant_id"], "voice", "mx-voice").await;
    let (s, r) = voice
        .send("mx-leg", json!({ "call_id": "mx", "leg_id": "mx", "direction": "inbound", "status": "ringing", "from_number": "+1", "to_number": "+2", "started_at": "2026-05-01T10:00:00Z" }))
        .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    ids.insert("call_leg_id", r["data"]["result"]["call_leg_id"].as_str().unwrap().to_string());
    ids
}

/// The path with each `{param}` replaced by tenant A's resource.
fn concrete(path: &str, ids: &HashMap<&'static str, String>, method: &str) -> String {
    path.split('/')
        .map(|seg| match seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            Some(p) => ids.get(p).unwrap_or_else(|| panic!("no fixture for the parameter {p} of {method} {path}: add one to fixtures()")).clone(),
            None => seg.to_string(),
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Every operation of the document, on both databases: no credential is
/// 401; a key lacking the operation's scope is 403 naming it; another
/// tenant's credentials on tenant A's resource are 404. Operator
/// operations refuse a tenant's token; robot operations refuse a person's
/// token and another tenant's robot. A route is covered the moment it is
/// registered.
async fn every_operation_is_gated_scoped_and_isolated(app: TestApp) {
    let (_, doc) = app.get("/openapi.json", None).await;
    let t = app.two_tenants("mx").await;
    let ids = fixtures(&app, &t).await;
    let (_, probe) = app.key(&t.a_token, "matrix-probe", json!([UNRELATED_SCOPE])).await;
    let probe = probe["api_key"].as_str().unwrap().to_string();
    let (_, b_robot) = crate::assets::robot(&app, &t.b_token, json!({ "display_name": "b" })).await;
    let mut checked = 0;
    for (method, path) in operations(&doc) {
        let op = &doc["paths"][&path][method.to_lowercase()];
        let security = op["security"].as_array().unwrap();
        if security.is_empty() {
            continue;
        }
        let url = concrete(&path, &ids, &method);
        let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let scheme = security[0].as_object().unwrap().keys().next().unwrap().as_str();
        let what = format!("{method} {path}");
        let res = app.call(m.clone(), &url, None, probe_body(&m)).await;
        assert_eq!(res.0.as_u16(), 401, "{what} without a credential: {}", res.1);
        assert_eq!(res.1["success"], false, "{what}");
        match scheme {
            "adminToken" => {
                let res = app.call(m.clone(), &url, Some(&t.a_token), probe_body(&m)).await;
                assert_eq!(res.0.as_u16(), 401, "{what} with a tenant token: {}", res.1);
                let res = app.operator("not-the-ops-token", m.clone(), &url, probe_body(&m)).await;
                assert_eq!(res.0.as_u16(), 401, "{what} with a wrong operator token: {}", res.1);
                assert_eq!(res.1["details"], json!(["admin token required"]), "{what}");
            }
            "robotCredential" => {
                let res = app.call(m.clone(), &url, Some(&t.a_token), probe_body(&m)).await;
                assert_eq!(res.0.as_u16(), 401, "{what} with a person's token: {}", res.1);
                if path.contains('{') {
                    let res = app.call(m.clone(), &url, Some(&b_robot), probe_body(&m)).await;
                    assert_eq!(res.0.as_u16(), 404, "{what} with another tenant's robot: {}", res.1);
                }
            }
            _ => {
                if let Some(scope) = op["x-required-scope"].as_str() {
                    let b = assert_error(app.call(m.clone(), &url, Some(&probe), probe_body(&m)).await, 403, "Forbidden");
                    assert_eq!(b["required_scopes"], json!([scope]), "{what}");
                    assert_eq!(b["granted_scopes"], json!([UNRELATED_SCOPE]), "{what}");
                }
                if path.contains('{') {
                    let res = app.call(m.clone(), &url, Some(&t.b_token), probe_body(&m)).await;
                    assert_eq!(res.0.as_u16(), 404, "{what} with another tenant's owner token: {}", res.1);
                    // Routes that take only a person's token refuse any key first (403).
                    let res = app.call(m.clone(), &url, Some(&t.b_key), probe_body(&m)).await;
                    assert!(matches!(res.0.as_u16(), 404 | 403), "{what} with another tenant's key: {} {}", res.0, res.1);
                    assert!(res.1.get("data").is_none(), "{what}: nothing of tenant A leaks: {}", res.1);
                }
            }
        }
        checked += 1;
    }
    assert!(checked >= 60, "the matrix ran over {checked} operations");
}
db_test!(every_operation_is_gated_scoped_and_isolated);

async fn every_tenant_api_is_an_mcp_tool_called_through_the_same_gate(app: TestApp) {
    let t = app.two_tenants("mcp").await;
    let a = t.a_token.as_str();
    assert_error(app.get("/api/registry/tools", None).await, 401, "Unauthorized");
    let (s, tools) = app.get("/api/registry/tools", Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{tools}");
    let list = tools["data"].as_array().unwrap();
    assert_eq!(tools["total"], list.len());
    let names: Vec<&str> = list.iter().map(|t| t["name"].as_str().unwrap()).collect();
    let unique: BTreeSet<&str> = names.iter().copied().collect();
    assert_eq!(unique.len(), names.len(), "tool names are unique: {names:?}");
    assert!(names.iter().all(|n| n.len() <= 64 && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')), "{names:?}");
    let (_, again) = app.get("/api/registry/tools", Some(a)).await;
    assert_eq!(again, tools, "the order is deterministic");
    let record = list.iter().find(|t| t["name"] == "hdk_measure_record").expect("the measurement tool");
    assert_eq!(
        (record["method"].as_str(), record["path"].as_str(), record["writes"].as_bool()),
        (Some("POST"), Some("/api/hdk/measure/measurements"), Some(true))
    );
    assert_eq!(record["inputSchema"]["properties"]["body"]["properties"]["kind"]["type"], json!("string"), "{record}");
    assert!(list.iter().all(|t| !t["path"].as_str().unwrap().starts_with("/admin")), "operator routes are not tools");

    // A call runs the route with the caller's credential.
    let call = |name: &str, arguments: Value| json!({ "name": name, "arguments": arguments });
    let measurement = json!({ "body": { "capture_id": "cap-1", "kind": "length", "value": 2.5, "unit": "m" } });
    let (s, r) = app.post("/mcp/v1/call", Some(a), call("hdk_measure_record", measurement.clone())).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["isError"], false, "{r}");
    let answer: Value = serde_json::from_str(r["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!((answer["data"]["kind"].as_str(), answer["data"]["value"].as_f64()), (Some("length"), Some(2.5)));
    let (_, r) = app.post("/mcp/v1/call", Some(a), call("hdk_measure_list_by_capture", json!({ "capture_id": "cap-1" }))).await;
    let answer: Value = serde_json::from_str(r["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(answer["total"], 1, "{answer}");

    // What the credential may not do is refused by the gate, never run.
    let (_, narrow) = app.key(a, "mcp-narrow", json!(["hdk.measure.read"])).await;
    let (s, r) = app.post("/mcp/v1/call", narrow["api_key"].as_str(), call("hdk_measure_record", measurement)).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["isError"], true);
    let refusal: Value = serde_json::from_str(r["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(refusal["required_scopes"], json!(["hdk.measure.write"]), "{refusal}");
    let (_, listed) = app.get("/api/hdk/measure/measurements?capture_id=cap-1", Some(a)).await;
    assert_eq!(listed["total"], 1, "the refused call wrote nothing");
    // Another tenant sees nothing of the first through a tool either.
    let (_, r) = app.post("/mcp/v1/call", Some(&t.b_token), call("hdk_measure_list_by_capture", json!({ "capture_id": "cap-1" }))).await;
    let answer: Value = serde_json::from_str(r["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(answer["total"], 0, "{answer}");

    assert_error(app.post("/mcp/v1/call", None, call("hdk_measure_record", json!({}))).await, 401, "Unauthorized");
    let b = assert_error(app.post("/mcp/v1/call", Some(a), call("no_such_tool", json!({}))).await, 400, "ValidationError");
    assert!(b["details"][0].as_str().unwrap().contains("no_such_tool"), "{b}");
    assert_error(app.post("/mcp/v1/call", Some(a), json!({ "arguments": {} })).await, 400, "ValidationError");
}
db_test!(every_tenant_api_is_an_mcp_tool_called_through_the_same_gate);
