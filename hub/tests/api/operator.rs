//! The operator interface: database operator tokens (minted with an
//! operator credential, revoked on every replica), the platform chain
//! their events land in.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

const PLATFORM_CHAIN: &str = "00000000-0000-0000-0000-000000000000";

impl TestApp {
    /// An operator request with the given `x-admin-ops-token`.
    pub async fn operator(&self, token: &str, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut req = self.client.request(method, format!("{}{}", self.base, path)).header("x-admin-ops-token", token);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req.send().await.expect("request");
        let status = res.status();
        (status, res.json().await.unwrap_or(Value::Null))
    }

    /// (event type, actor id) of the platform chain, oldest first.
    pub async fn platform_events(&self) -> Vec<(String, String)> {
        sqlx::query_as("SELECT event_type, actor_id FROM audit_entry WHERE tenant_id = $1 ORDER BY pool_index, seq")
            .bind(PLATFORM_CHAIN)
            .fetch_all(&self.state().db.read)
            .await
            .unwrap()
    }
}

pub const BREAK_GLASS: &str = "test-ops-token";

async fn database_operator_tokens_are_minted_shown_once_and_revoked(app: TestApp) {
    let mint = |body: Value| app.operator(BREAK_GLASS, Method::POST, "/admin/security/ops-tokens", Some(body));
    let (s, t) = mint(json!({ "label": "  on-call  ", "reason": "rotation", "created_by": "ada" })).await;
    assert_eq!(s, StatusCode::CREATED, "{t}");
    let (id, token) = (t["data"]["id"].as_str().unwrap().to_string(), t["data"]["token"].as_str().unwrap().to_string());
    assert!(token.starts_with("ops_") && token.len() > 40, "{token}");
    assert_eq!((t["data"]["label"].as_str(), t["data"]["expires_at"].clone()), (Some("on-call"), Value::Null));
    let stored: String = sqlx::query_scalar("SELECT token_hash FROM admin_ops_token WHERE id = $1").bind(&id).fetch_one(&app.state().db.read).await.unwrap();
    assert!(!stored.contains(&token[4..]), "only a hash is kept");

    // The database token is an operator credential: it reads, and mints.
    assert_eq!(app.operator(&token, Method::GET, "/admin/webhooks", None).await.0, StatusCode::OK);
    let (s, second) =
        app.operator(&token, Method::POST, "/admin/security/ops-tokens", Some(json!({ "label": "minted by a token", "ttl_seconds": 3600 }))).await;
    assert_eq!(s, StatusCode::CREATED, "{second}");
    assert!(second["data"]["expires_at"].is_string());
    // A tenant's token is no operator credential.
    let tenant = app.signup("op@example.com", "op").await;
    let (s, b) = app.operator(tenant["token"].as_str().unwrap(), Method::GET, "/admin/webhooks", None).await;
    assert_eq!((s, b["details"].clone()), (StatusCode::UNAUTHORIZED, json!(["admin token required"])));

    let b = assert_error(mint(json!({ "label": " ", "ttl_seconds": 0 })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["label is required", "ttl_seconds must be an integer from 1 to 315360000"]));
    assert_error(mint(json!({ "label": "x", "ttl_seconds": -5 })).await, 400, "ValidationError");

    let (s, r) = app.operator(BREAK_GLASS, Method::DELETE, &format!("/admin/security/ops-tokens/{id}"), None).await;
    assert_eq!((s, r["data"].clone()), (StatusCode::OK, json!({ "id": id, "status": "revoked" })));
    assert_eq!(app.operator(&token, Method::GET, "/admin/webhooks", None).await.0, StatusCode::UNAUTHORIZED, "refused at once");
    let b = assert_error(app.operator(BREAK_GLASS, Method::DELETE, &format!("/admin/security/ops-tokens/{id}"), None).await, 404, "NotFound");
    assert_eq!(b["details"], json!(["token not found or already revoked"]));
    assert_error(app.operator(BREAK_GLASS, Method::DELETE, "/admin/security/ops-tokens/not-a-uuid", None).await, 404, "NotFound");

    // An expired token is refused like a revoked one.
    let (_, short) = mint(json!({ "label": "short", "ttl_seconds": 1 })).await;
    let short = short["data"]["token"].as_str().unwrap().to_string();
    assert_eq!(app.operator(&short, Method::GET, "/admin/webhooks", None).await.0, StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(app.operator(&short, Method::GET, "/admin/webhooks", None).await.0, StatusCode::UNAUTHORIZED);

    // The platform chain names who did it: the environment secret or the token.
    let events = app.platform_events().await;
    let issued: Vec<&str> = events.iter().filter(|(e, _)| e == "security.admin_ops_token.issued.v1").map(|(_, a)| a.as_str()).collect();
    assert_eq!(issued, ["break-glass", format!("on-call ({id})").as_str(), "break-glass"]);
    assert!(events.contains(&("security.admin_ops_token.revoked.v1".to_string(), "break-glass".to_string())));
}
db_test!(database_operator_tokens_are_minted_shown_once_and_revoked);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_revoked_on_one_hub_is_refused_by_another_at_once() {
    let Some(a) = TestApp::spawn_postgres().await else { return };
    let b = a.replica().await;
    let (_, t) = a.operator(BREAK_GLASS, Method::POST, "/admin/security/ops-tokens", Some(json!({ "label": "replicated" }))).await;
    let (id, token) = (t["data"]["id"].as_str().unwrap(), t["data"]["token"].as_str().unwrap());
    // B reads the token (and caches it for 30 s).
    assert_eq!(b.operator(token, Method::GET, "/admin/webhooks", None).await.0, StatusCode::OK);
    let (s, _) = a.operator(BREAK_GLASS, Method::DELETE, &format!("/admin/security/ops-tokens/{id}"), None).await;
    assert_eq!(s, StatusCode::OK);
    let revoked = Instant::now();
    loop {
        if b.operator(token, Method::GET, "/admin/webhooks", None).await.0 == StatusCode::UNAUTHORIZED {
            break;
        }
        assert!(revoked.elapsed() < Duration::from_secs(2), "hub B still accepts the revoked token");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn a_suspended_tenants_credentials_answer_423_until_it_is_resumed(app: TestApp) {
    let t = app.two_tenants("suspend").await;
    let (a, tenant) = (t.a_token.as_str(), t.a["tenant_id"].as_str().unwrap());
    let (_, key) = app.key(a, "suspend-key", json!(["*"])).await;
    let key = key["api_key"].as_str().unwrap().to_string();
    let (s, w) = app.post("/api/workflows/definitions", Some(a), json!({ "name": "kept", "step_specs": [{ "name": "one" }] })).await;
    assert_eq!(s, StatusCode::CREATED, "{w}");
    assert_eq!(app.get("/api/me", Some(&key)).await.0, StatusCode::OK, "cached before the suspension");

    let path = |verb: &str| format!("/admin/tenants/{tenant}/{verb}");
    let b = assert_error(app.operator(BREAK_GLASS, Method::POST, &path("suspend"), Some(json!({}))).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["reason is required"]));
    let b = assert_error(app.operator(BREAK_GLASS, Method::POST, &path("suspend"), Some(json!({ "reason": "x".repeat(501) }))).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["reason must be at most 500 characters"]));
    let unknown = format!("/admin/tenants/{}/suspend", uuid::Uuid::now_v7());
    assert_error(app.operator(BREAK_GLASS, Method::POST, &unknown, Some(json!({}))).await, 404, "NotFound");
    let (s, r) = app.operator(BREAK_GLASS, Method::POST, &path("suspend"), Some(json!({ "reason": "unpaid invoices" }))).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!((r["data"]["suspended"].as_bool(), r["data"]["suspended_by"].as_str()), (Some(true), Some("break-glass")));
    assert_error(app.operator(BREAK_GLASS, Method::POST, &path("suspend"), Some(json!({ "reason": "again" }))).await, 409, "Conflict");

    for token in [a, key.as_str()] {
        let b = assert_error(app.get("/api/me", Some(token)).await, 423, "Locked");
        assert_eq!(b["details"], json!(["the tenant of this credential is suspended"]));
    }
    assert_error(app.post("/api/auth/token", None, json!({ "grant_type": "client_credentials", "client_secret": key })).await, 423, "Locked");
    // Another tenant is untouched.
    assert_eq!(app.get("/api/me", Some(&t.b_token)).await.0, StatusCode::OK);

    let (s, r) = app.operator(BREAK_GLASS, Method::POST, &path("resume"), None).await;
    assert_eq!((s, r["data"]["suspended"].as_bool()), (StatusCode::OK, Some(false)));
    assert_error(app.operator(BREAK_GLASS, Method::POST, &path("resume"), None).await, 409, "Conflict");
    // The data is as it was.
    let (s, w) = app.get("/api/workflows/definitions/kept", Some(a)).await;
    assert_eq!((s, w["data"]["name"].as_str()), (StatusCode::OK, Some("kept")));
    assert_error(
        app.operator(BREAK_GLASS, Method::POST, "/admin/tenants/0190a000-0000-7000-8000-000000000000/suspend", Some(json!({ "reason": "x" }))).await,
        404,
        "NotFound",
    );
    let events = app.events_of(&t.a["tenant_id"]).await;
    assert!(events.ends_with(&["tenant.tenant.suspended.v1".to_string(), "tenant.tenant.resumed.v1".to_string()]), "{events:?}");
}
db_test!(a_suspended_tenants_credentials_answer_423_until_it_is_resumed);

/// The tenant list says which tenants are suspended, by whom and why, and
/// a sandbox stands under its tenant's suspension.
async fn the_tenant_list_shows_each_tenants_suspension(app: TestApp) {
    let t = app.two_tenants("list-suspend").await;
    let (a, tenant, other) = (t.a_token.as_str(), t.a["tenant_id"].as_str().unwrap(), t.b["tenant_id"].as_str().unwrap());
    let (s, test_app) = app.post("/api/applications", Some(a), json!({ "name": "sandbox", "slug": "sandbox", "environment": "test" })).await;
    assert_eq!(s, StatusCode::CREATED, "{test_app}");
    // The sandbox is made with the first key of a test application.
    let keys = format!("/api/applications/{}/keys", test_app["data"]["application_id"].as_str().unwrap());
    let (s, test_key) = app.post(&keys, Some(a), json!({ "name": "t", "scopes": ["*"] })).await;
    assert_eq!(s, StatusCode::CREATED, "{test_key}");
    let sandbox: String =
        sqlx::query_scalar("SELECT tenant_id FROM tenant_tenant WHERE sandbox_of = $1").bind(tenant).fetch_one(&app.state().db.read).await.unwrap();
    let listed = async || {
        let (s, l) = app.op(Method::GET, "/admin/tenants", None).await;
        assert_eq!(s, StatusCode::OK, "{l}");
        let rows = l["data"]["tenants"].as_array().unwrap().clone();
        let of = |id: &str| rows.iter().find(|r| r["tenant_id"] == id).unwrap_or_else(|| panic!("{id} is listed: {l}")).clone();
        (of(tenant), of(&sandbox), of(other), rows)
    };
    let (mine, sand, theirs, rows) = listed().await;
    assert_eq!((mine["suspension"].clone(), sand["suspension"].clone(), theirs["suspension"].clone()), (Value::Null, Value::Null, Value::Null));
    assert!(rows.iter().all(|r| r.as_object().unwrap().contains_key("suspension")), "every row says it: {rows:?}");
    assert!(mine["app_id"].is_string() && mine["status"].is_string() && mine["created_at"].is_string(), "the tenant's own fields are as before: {mine}");

    let (s, r) = app.op(Method::POST, format!("/admin/tenants/{tenant}/suspend"), Some(json!({ "reason": "unpaid invoices" }))).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let (mine, sand, theirs, after) = listed().await;
    let suspension = &mine["suspension"];
    assert_eq!(
        (suspension["tenant_id"].as_str(), suspension["reason"].as_str(), suspension["suspended_by"].as_str()),
        (Some(tenant), Some("unpaid invoices"), Some("break-glass")),
        "{mine}"
    );
    assert_eq!(suspension["suspended_at"], r["data"]["suspended_at"]);
    assert_eq!(sand["suspension"], *suspension, "the sandbox stands under its tenant's suspension");
    assert_eq!(theirs["suspension"], Value::Null, "another tenant is untouched");
    let ids = |rows: &[Value]| rows.iter().map(|r| r["tenant_id"].clone()).collect::<Vec<_>>();
    assert_eq!(ids(&after), ids(&rows), "the same rows in the same order");

    let (s, _) = app.op(Method::POST, format!("/admin/tenants/{tenant}/resume"), None).await;
    assert_eq!(s, StatusCode::OK);
    let (mine, sand, _, _) = listed().await;
    assert_eq!((mine["suspension"].clone(), sand["suspension"].clone()), (Value::Null, Value::Null));

    // A sandbox suspended on its own: its own suspension, its tenant open.
    let (s, _) = app.op(Method::POST, format!("/admin/tenants/{sandbox}/suspend"), Some(json!({ "reason": "sandbox only" }))).await;
    assert_eq!(s, StatusCode::OK);
    let (mine, sand, _, _) = listed().await;
    assert_eq!(
        (mine["suspension"].clone(), sand["suspension"]["tenant_id"].as_str(), sand["suspension"]["reason"].as_str()),
        (Value::Null, Some(sandbox.as_str()), Some("sandbox only"))
    );
    // Its own suspension comes first while its tenant is suspended too.
    app.op(Method::POST, format!("/admin/tenants/{tenant}/suspend"), Some(json!({ "reason": "both" }))).await;
    let (mine, sand, _, _) = listed().await;
    assert_eq!((mine["suspension"]["reason"].as_str(), sand["suspension"]["reason"].as_str()), (Some("both"), Some("sandbox only")));
}
db_test!(the_tenant_list_shows_each_tenants_suspension);

/// The database tokens are listed with where each stands, newest first,
/// and never with their secret or its hash.
async fn the_operator_lists_database_tokens_without_their_secrets(app: TestApp) {
    let mint = |body: Value| app.op(Method::POST, "/admin/security/ops-tokens", Some(body));
    let (s, first) = mint(json!({ "label": "first", "reason": "on-call", "created_by": "ada" })).await;
    assert_eq!(s, StatusCode::CREATED, "{first}");
    let (_, second) = mint(json!({ "label": "second", "ttl_seconds": 3600 })).await;
    let (_, short) = mint(json!({ "label": "short", "ttl_seconds": 1 })).await;
    let id = |t: &Value| t["data"]["id"].as_str().unwrap().to_string();
    let (first_id, second_id, short_id) = (id(&first), id(&second), id(&short));
    let (s, _) = app.op(Method::DELETE, format!("/admin/security/ops-tokens/{first_id}"), None).await;
    assert_eq!(s, StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(1100)).await;

    let (s, l) = app.op(Method::GET, "/admin/security/ops-tokens", None).await;
    assert_eq!(s, StatusCode::OK, "{l}");
    let rows = l["data"].as_array().unwrap();
    let listed: Vec<(&str, &str, &str)> =
        rows.iter().map(|r| (r["id"].as_str().unwrap(), r["label"].as_str().unwrap(), r["status"].as_str().unwrap())).collect();
    assert_eq!(
        listed,
        [(short_id.as_str(), "short", "expired"), (second_id.as_str(), "second", "active"), (first_id.as_str(), "first", "revoked")],
        "newest first"
    );
    assert_eq!(l["total"], 3);
    let revoked = &rows[2];
    assert_eq!(
        (revoked["reason"].as_str(), revoked["created_by"].as_str(), revoked["minted_by"].as_str()),
        (Some("on-call"), Some("ada"), Some("break-glass"))
    );
    assert!(revoked["revoked_at"].is_string() && revoked["created_at"].is_string() && revoked["expires_at"].is_null(), "{revoked}");
    assert_eq!(rows[1]["expires_at"], second["data"]["expires_at"]);
    assert!(rows[1]["revoked_at"].is_null());
    let keys: Vec<&String> = rows[0].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["id", "label", "status", "expires_at", "reason", "created_by", "minted_by", "created_at", "revoked_at"]);

    // No secret material: neither a token, nor a part of one, nor its hash.
    let text = l.to_string();
    let hashes: Vec<String> = sqlx::query_scalar("SELECT token_hash FROM admin_ops_token").fetch_all(&app.state().db.read).await.unwrap();
    for t in [&first, &second, &short] {
        let token = t["data"]["token"].as_str().unwrap();
        assert!(!text.contains(token) && !text.contains(&token[4..20]), "the list holds no token: {text}");
    }
    assert!(hashes.iter().all(|h| !text.contains(h.as_str())), "nor a hash");
    assert!(!text.contains("token_hash") && !text.contains("\"token\""), "{text}");

    // Filters and pages.
    for (status, want) in [("active", &second_id), ("revoked", &first_id), ("expired", &short_id)] {
        let (s, l) = app.op(Method::GET, format!("/admin/security/ops-tokens?status={status}"), None).await;
        assert_eq!((s, l["total"].as_i64(), l["data"][0]["id"].as_str()), (StatusCode::OK, Some(1), Some(want.as_str())), "{status}: {l}");
    }
    let (_, p) = app.op(Method::GET, "/admin/security/ops-tokens?limit=1&offset=1", None).await;
    assert_eq!((p["total"].as_i64(), p["data"].as_array().unwrap().len(), p["data"][0]["id"].as_str()), (Some(3), 1, Some(second_id.as_str())));
    let b = assert_error(app.op(Method::GET, "/admin/security/ops-tokens?status=lost", None).await, 400, "ValidationError");
    assert!(b["details"][0].as_str().unwrap().starts_with("status"), "{b}");
    assert_error(app.op(Method::GET, "/admin/security/ops-tokens?limit=0", None).await, 400, "ValidationError");
    // The listing itself is no operator credential's business but an operator's.
    let tenant = app.signup("ops-list@example.com", "ops-list").await;
    assert_eq!(app.operator(tenant["token"].as_str().unwrap(), Method::GET, "/admin/security/ops-tokens", None).await.0, StatusCode::UNAUTHORIZED);
}
db_test!(the_operator_lists_database_tokens_without_their_secrets);

async fn the_operator_sees_approval_routes_and_breaches_and_overrides_a_pending_request(app: TestApp) {
    let t = app.two_tenants("op-approvals").await;
    let a = t.a_token.as_str();
    let step = |sla: Option<i64>| json!({ "approver_persona_id": t.a["persona_id"], "sla_minutes": sla });
    let (_, slow) = app.post("/api/approvals/routes", Some(a), json!({ "name": "slow", "steps": [step(Some(30)), step(Some(90))] })).await;
    let (_, none) = app.post("/api/approvals/routes", Some(a), json!({ "name": "no-sla", "steps": [step(None)] })).await;
    let open = |route: &Value, subject: &str| json!({ "route_id": route["data"]["route_id"], "subject_kind": "refund", "subject_id": subject });
    let (_, late) = app.post("/api/approvals/requests", Some(a), open(&slow, "r-late")).await;
    let (_, fresh) = app.post("/api/approvals/requests", Some(a), open(&slow, "r-fresh")).await;
    let (_, unbound) = app.post("/api/approvals/requests", Some(a), open(&none, "r-none")).await;
    let (late, fresh) = (late["data"]["request_id"].as_str().unwrap().to_string(), fresh["data"]["request_id"].as_str().unwrap().to_string());
    // The late one waited two hours; the route's SLA is its largest step's, 90 minutes.
    let two_hours_ago = hub_kernel::db::format_time(chrono::Utc::now() - chrono::TimeDelta::minutes(120));
    sqlx::query("UPDATE approval_request SET requested_at = $1 WHERE request_id = $2")
        .bind(&two_hours_ago)
        .bind(&late)
        .execute(app.state().db.writer())
        .await
        .unwrap();
    sqlx::query("UPDATE approval_request SET requested_at = $1 WHERE request_id = $2")
        .bind(&two_hours_ago)
        .bind(unbound["data"]["request_id"].as_str().unwrap())
        .execute(app.state().db.writer())
        .await
        .unwrap();

    let (s, routes) = app.operator(BREAK_GLASS, Method::GET, "/admin/approvals/routes", None).await;
    assert_eq!(s, StatusCode::OK);
    let names: Vec<(&str, i64)> =
        routes["data"].as_array().unwrap().iter().map(|r| (r["name"].as_str().unwrap(), r["sla_minutes"].as_i64().unwrap())).collect();
    assert_eq!(names, [("no-sla", 0), ("slow", 90)], "newest first");
    let (s, b) = app.operator(BREAK_GLASS, Method::GET, "/admin/approvals/breaches", None).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let list = b["data"].as_array().unwrap();
    assert_eq!(list.len(), 1, "only the late request of a route with an SLA: {b}");
    assert_eq!(
        (list[0]["request_id"].as_str(), list[0]["subject_ref"].as_str(), list[0]["sla_minutes"].as_i64()),
        (Some(late.as_str()), Some("refund:r-late"), Some(90))
    );
    assert!(list[0]["elapsed_minutes"].as_i64().unwrap() >= 119);

    let path = |id: &str| format!("/admin/approvals/requests/{id}/operator-override");
    let b = assert_error(app.operator(BREAK_GLASS, Method::POST, &path(&late), Some(json!({ "decision": "maybe" }))).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["decision must be one of: approved, rejected", "reason is required", "operator_id is required"]));
    // An unknown request is 404 before its body is looked at.
    let unknown = path("0190a000-0000-7000-8000-000000000000");
    let b = assert_error(app.operator(BREAK_GLASS, Method::POST, &unknown, Some(json!({ "decision": "maybe" }))).await, 404, "NotFound");
    assert_eq!(b["details"], json!(["request not found"]));
    let body = json!({ "decision": "approved", "reason": "customer escalated", "operator_id": "ops-ada" });
    let (s, done) = app.operator(BREAK_GLASS, Method::POST, &path(&late), Some(body.clone())).await;
    assert_eq!((s, done), (StatusCode::OK, json!({ "success": true })));
    assert_error(app.operator(BREAK_GLASS, Method::POST, &path(&late), Some(body.clone())).await, 409, "Conflict");
    assert_error(app.operator(BREAK_GLASS, Method::POST, &path("0190a000-0000-7000-8000-000000000000"), Some(body.clone())).await, 404, "NotFound");
    let (_, read) = app.get(&format!("/api/approvals/requests/{late}"), Some(a)).await;
    assert_eq!(
        (read["data"]["status"].as_str(), read["data"]["reason"].as_str()),
        (Some("approved"), Some("[operator-override by ops-ada] customer escalated"))
    );
    assert_eq!(read["data"]["steps"][0]["status"], "skipped");
    let (_, b) = app.operator(BREAK_GLASS, Method::GET, "/admin/approvals/breaches", None).await;
    assert_eq!(b["data"], json!([]), "decided requests are no breach");
    let (_, still) = app.get(&format!("/api/approvals/requests/{fresh}"), Some(a)).await;
    assert_eq!(still["data"]["status"], "pending");
    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "approval.request.overridden.v1").count(), 1);
}
db_test!(the_operator_sees_approval_routes_and_breaches_and_overrides_a_pending_request);

/// A request is a breach the moment its SLA has passed, not once a whole
/// minute more has: the wait is compared to the microsecond the times are
/// stored with (the requests' times are set in the database).
async fn an_approval_request_breaches_its_sla_seconds_after_it_passes(app: TestApp) {
    let t = app.two_tenants("op-breach-seconds").await;
    let a = t.a_token.as_str();
    let route = async |name: &str, sla: i64| {
        let step = json!({ "approver_persona_id": t.a["persona_id"], "sla_minutes": sla });
        let (s, r) = app.post("/api/approvals/routes", Some(a), json!({ "name": name, "steps": [step] })).await;
        assert_eq!(s, StatusCode::CREATED, "{r}");
        r["data"]["route_id"].as_str().unwrap().to_string()
    };
    let (minute, hour) = (route("one-minute", 1).await, route("one-hour", 60).await);
    // A request of `route` that has waited `seconds`.
    let waited = async |route: &str, subject: &str, seconds: i64| {
        let (s, r) = app.post("/api/approvals/requests", Some(a), json!({ "route_id": route, "subject_kind": "refund", "subject_id": subject })).await;
        assert_eq!(s, StatusCode::CREATED, "{r}");
        let id = r["data"]["request_id"].as_str().unwrap().to_string();
        let at = hub_kernel::db::format_time(chrono::Utc::now() - chrono::TimeDelta::seconds(seconds));
        sqlx::query("UPDATE approval_request SET requested_at = $1 WHERE request_id = $2").bind(&at).bind(&id).execute(app.state().db.writer()).await.unwrap();
        (id, at)
    };
    // Five seconds past a one-minute SLA (one whole minute elapsed, which
    // by whole minutes is not more than the SLA).
    let (past_minute, past_minute_at) = waited(&minute, "past-minute", 65).await;
    // Three seconds past a one-hour SLA.
    let (past_hour, _) = waited(&hour, "past-hour", 3603).await;
    // Thirty seconds before a one-minute SLA, and a minute before an hour's.
    let _ = waited(&minute, "not-yet", 30).await;
    let _ = waited(&hour, "not-yet-hour", 3540).await;

    let (s, b) = app.operator(BREAK_GLASS, Method::GET, "/admin/approvals/breaches", None).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let got: Vec<(&str, i64, i64)> = b["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["request_id"].as_str().unwrap(), r["elapsed_minutes"].as_i64().unwrap(), r["sla_minutes"].as_i64().unwrap()))
        .collect();
    // Worst first (5 s over before 3 s over); the minutes begun, so each
    // breach shows more minutes than its SLA.
    assert_eq!(got, [(past_minute.as_str(), 2, 1), (past_hour.as_str(), 61, 60)], "{b}");
    assert_eq!(
        b["data"][0],
        json!({
            "request_id": past_minute, "tenant_id": t.a["tenant_id"], "route_id": minute, "subject_ref": "refund:past-minute",
            "requested_at": past_minute_at, "status": "pending", "elapsed_minutes": 2, "sla_minutes": 1,
        })
    );
}
db_test!(an_approval_request_breaches_its_sla_seconds_after_it_passes);
