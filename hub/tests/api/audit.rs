//! sdk-audit and the operator audit routes: the event vocabulary, hash
//! chains per (tenant, pool), tamper detection, concurrent appends,
//! emission by the foundation's writes, and retention.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

const ZERO: &str = "0000000000000000000000000000000000000000000000000000000000000000";

impl TestApp {
    pub async fn admin(&self, method: Method, path: &str) -> (StatusCode, Value) {
        let res = self.client.request(method, format!("{}{}", self.base, path)).header("x-admin-ops-token", "test-ops-token").send().await.expect("request");
        let status = res.status();
        (status, res.json().await.unwrap_or(Value::Null))
    }

    pub async fn append(&self, token: &str, pool: i64, event_type: &str, payload: Value) -> Value {
        let (s, body) = self.post("/api/audit/append", Some(token), json!({ "pool_index": pool, "event_type": event_type, "payload": payload })).await;
        assert_eq!(s, StatusCode::CREATED, "{body}");
        body["data"].clone()
    }

    pub async fn verify(&self, token: &str, pool: i64) -> Value {
        let (s, body) = self.post("/api/audit/verify", Some(token), json!({ "pool_index": pool })).await;
        assert_eq!(s, StatusCode::OK, "{body}");
        body["data"].clone()
    }
}

async fn event_types_are_registered_once_listed_with_the_baseline_and_private_to_their_tenant(app: TestApp) {
    let a = app.signup("ev-a@example.com", "ev-a").await;
    let b = app.signup("ev-b@example.com", "ev-b").await;
    let (ta, tb) = (a["token"].as_str().unwrap(), b["token"].as_str().unwrap());

    let (s, r) = app
        .post("/api/events/types", Some(ta), json!({ "event_type": "shop.order.placed.v1", "retention_class": "operational", "conflict_policy": "lww" }))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    assert_eq!(
        r["data"],
        json!({
            "event_type": "shop.order.placed.v1", "retention_class": "operational", "conflict_policy": "lww",
            "schema_state": "active", "compaction_policy": "none", "schema_version": 1, "source": "tenant",
            "created": true, "created_at": r["data"]["created_at"],
        })
    );
    // A repeat answers the stored metadata, whatever the new body says.
    let (s, r) = app
        .post(
            "/api/events/types",
            Some(ta),
            json!({ "event_type": "shop.order.placed.v1", "retention_class": "regulated", "conflict_policy": "crdt", "schema_version": 3 }),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(
        (r["data"]["created"].clone(), r["data"]["retention_class"].clone(), r["data"]["schema_version"].clone()),
        (json!(false), json!("operational"), json!(1))
    );
    let (s, r) = app
        .post(
            "/api/events/types",
            Some(ta),
            json!({
                "event_type": "shop.order.refunded.v2", "retention_class": "regulated", "conflict_policy": "human-review",
                "schema_state": "deprecated", "compaction_policy": "snapshot", "schema_version": 2,
            }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    assert_eq!(
        (r["data"]["schema_state"].clone(), r["data"]["compaction_policy"].clone(), r["data"]["schema_version"].clone()),
        (json!("deprecated"), json!("snapshot"), json!(2))
    );

    let body = assert_error(
        app.post("/api/events/types", Some(ta), json!({ "event_type": "crm.call.logged.v1", "retention_class": "operational", "conflict_policy": "lww" }))
            .await,
        400,
        "ValidationError",
    );
    assert!(body["details"][0].as_str().unwrap().contains("platform event type"), "{body}");
    let body = assert_error(app.post("/api/events/types", Some(ta), json!({ "event_type": "shop.order.placed", "retention_class": "forever", "conflict_policy": "lww", "schema_state": "x", "compaction_policy": "y", "schema_version": 0 })).await, 400, "ValidationError");
    assert_eq!(
        body["details"],
        json!([
            "retention_class must be one of: transient, operational, regulated",
            "schema_state must be one of: active, deprecated, retired",
            "compaction_policy must be one of: none, snapshot, keep-latest",
            "schema_version must be an integer of at least 1",
        ])
    );
    // The name's form once the body matches its schema.
    let body = assert_error(
        app.post("/api/events/types", Some(ta), json!({ "event_type": "shop.order.placed", "retention_class": "operational", "conflict_policy": "lww" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(
        body["details"],
        json!(["event_type must be <domain>.<entity>.<verb>.v<N>: lowercase, '-' or '_' inside a segment, at least two segments before the version"])
    );
    let body = assert_error(app.post("/api/events/types", Some(ta), json!({})).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["event_type is required", "retention_class is required", "conflict_policy is required"]));
    assert_error(
        app.post("/api/events/types", Some(ta), json!({ "event_type": "Shop.Order.placed.v1", "retention_class": "operational", "conflict_policy": "lww" }))
            .await,
        400,
        "ValidationError",
    );
    assert_error(
        app.post(
            "/api/events/types",
            Some(ta),
            json!({ "tenant_id": b["tenant_id"], "event_type": "shop.x.y.v1", "retention_class": "operational", "conflict_policy": "lww" }),
        )
        .await,
        403,
        "TenantMismatch",
    );

    // The baseline's size is the kernel's test's business; here, all of it.
    let platform = hub_kernel::audit::registry::baseline().types.len();
    let (s, list) = app.get("/api/events/types", Some(ta)).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!((list["platform_count"].clone(), list["tenant_count"].clone(), list["total"].clone()), (json!(platform), json!(2), json!(platform + 2)));
    let data = list["data"].as_array().unwrap();
    assert_eq!(data.len(), platform + 2);
    assert_eq!(data.iter().filter(|t| t["source"] == "platform").count(), platform);
    assert!(data.iter().any(|t| t["event_type"] == "shop.order.placed.v1" && t["source"] == "tenant"));
    // Tenant B sees the baseline and nothing of A's.
    let (_, list) = app.get("/api/events/types", Some(tb)).await;
    assert_eq!((list["platform_count"].clone(), list["tenant_count"].clone()), (json!(platform), json!(0)));
    assert!(!list.to_string().contains("shop.order"));

    let (s, one) = app.get("/api/events/types/agent.run.started.v1", Some(ta)).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!((one["data"]["source"].clone(), one["data"]["retention_class"].clone()), (json!("platform"), json!("regulated")));
    let (s, one) = app.get("/api/events/types/shop.order.placed.v1", Some(ta)).await;
    assert_eq!((s, one["data"]["source"].clone()), (StatusCode::OK, json!("tenant")));
    assert_error(app.get("/api/events/types/shop.order.placed.v1", Some(tb)).await, 404, "NotFound");
    assert_error(app.get("/api/events/types/not-a-type", Some(ta)).await, 404, "NotFound");
    // Tenant B may register the same name for itself.
    let (s, _) = app
        .post("/api/events/types", Some(tb), json!({ "event_type": "shop.order.placed.v1", "retention_class": "transient", "conflict_policy": "merge" }))
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let (_, one) = app.get("/api/events/types/shop.order.placed.v1", Some(ta)).await;
    assert_eq!(one["data"]["retention_class"], "operational");
}
db_test!(event_types_are_registered_once_listed_with_the_baseline_and_private_to_their_tenant);

async fn appends_form_a_chain_per_tenant_and_pool_that_verifies(app: TestApp) {
    let a = app.signup("ch@example.com", "ch").await;
    let t = a["token"].as_str().unwrap();
    app.post("/api/events/types", Some(t), json!({ "event_type": "shop.order.placed.v1", "retention_class": "transient", "conflict_policy": "lww" })).await;

    let e1 = app.append(t, 7, "shop.order.placed.v1", json!({ "order": 1 })).await;
    assert_eq!((e1["seq"].clone(), e1["pool_index"].clone(), e1["prev_hash"].clone()), (json!(1), json!(7), json!(ZERO)));
    assert_eq!(e1["retention_class"], "transient", "defaulted from the registered type");
    assert_eq!((e1["actor_kind"].clone(), e1["actor_id"].clone()), (json!("human"), a["person_id"].clone()));
    assert_eq!(e1["tenant_id"], a["tenant_id"]);
    let hash = e1["entry_hash"].as_str().unwrap();
    assert!(hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)), "{hash}");
    let (s, e2) = app
        .post(
            "/api/audit/append",
            Some(t),
            json!({
                "pool_index": 7, "event_type": "crm.call.logged.v1", "payload": { "call": 2 }, "actor_kind": "human",
                "tenant_id": a["tenant_id"], "retention_class": "regulated",
            }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{e2}");
    assert_eq!(
        (e2["data"]["seq"].clone(), e2["data"]["prev_hash"].clone(), e2["data"]["retention_class"].clone()),
        (json!(2), e1["entry_hash"].clone(), json!("regulated"))
    );
    // Another pool is another chain, starting at 1.
    let other = app.append(t, 8, "crm.call.logged.v1", json!("a scalar payload")).await;
    assert_eq!((other["seq"].clone(), other["prev_hash"].clone()), (json!(1), json!(ZERO)));

    // Refusals write nothing.
    let body = assert_error(
        app.post("/api/audit/append", Some(t), json!({ "pool_index": 7, "event_type": "shop.order.unknown.v1", "payload": {} })).await,
        400,
        "ValidationError",
    );
    assert!(body["details"][0].as_str().unwrap().contains("shop.order.unknown.v1"), "{body}");
    let body = assert_error(app.post("/api/audit/append", Some(t), json!({ "payload": null })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["pool_index is required", "event_type is required", "payload is required"]));
    // A blank payload is missing too, once the body matches its schema.
    let body = assert_error(
        app.post("/api/audit/append", Some(t), json!({ "pool_index": 7, "event_type": "crm.call.logged.v1", "payload": " " })).await,
        400,
        "ValidationError",
    );
    assert_eq!(body["details"], json!(["payload is required"]));
    let body = assert_error(
        app.post(
            "/api/audit/append",
            Some(t),
            json!({ "pool_index": -1, "event_type": "crm.call.logged.v1", "payload": {}, "retention_class": "forever", "actor_kind": "service" }),
        )
        .await,
        400,
        "ValidationError",
    );
    assert_eq!(body["details"], json!(["pool_index must be an integer of at least 0", "retention_class must be one of: transient, operational, regulated"]));
    let body = assert_error(
        app.post("/api/audit/append", Some(t), json!({ "pool_index": 7, "event_type": "crm.call.logged.v1", "payload": {}, "actor_kind": "service" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(body["details"], json!(["actor_kind is taken from the credential, which is 'human'"]));
    let b = app.signup("ch-b@example.com", "ch-b").await;
    assert_error(
        app.post("/api/audit/append", Some(t), json!({ "pool_index": 7, "event_type": "crm.call.logged.v1", "payload": {}, "tenant_id": b["tenant_id"] }))
            .await,
        403,
        "TenantMismatch",
    );
    // Tenant B cannot append with A's registered type.
    assert_error(
        app.post("/api/audit/append", b["token"].as_str(), json!({ "pool_index": 7, "event_type": "shop.order.placed.v1", "payload": {} })).await,
        400,
        "ValidationError",
    );

    assert_eq!(app.verify(t, 7).await, json!({ "pool_index": 7, "ok": true, "entries_checked": 2, "tenant_id": a["tenant_id"] }));
    assert_eq!(app.verify(t, 8).await["entries_checked"], 1);
    assert_eq!(app.verify(t, 99).await, json!({ "pool_index": 99, "ok": true, "entries_checked": 0, "tenant_id": a["tenant_id"] }));
    // B's chain in pool 7 is B's own: empty.
    assert_eq!(app.verify(b["token"].as_str().unwrap(), 7).await["entries_checked"], 0);
    assert_error(app.post("/api/audit/verify", Some(t), json!({})).await, 400, "ValidationError");

    // A machine appends as its synthetic persona, a service.
    let (_, key) = app.key(t, "auditor", json!(["audit.*"])).await;
    let e = app.append(key["api_key"].as_str().unwrap(), 7, "crm.call.logged.v1", json!({})).await;
    assert_eq!((e["seq"].clone(), e["actor_kind"].clone(), e["actor_id"].clone()), (json!(3), json!("service"), key["synthetic_persona_id"].clone()));
}
db_test!(appends_form_a_chain_per_tenant_and_pool_that_verifies);

/// Builds a chain of five entries in pool 1 and returns (tenant_id, token).
async fn five_entries(app: &TestApp, email: &str) -> (String, String) {
    let a = app.signup(email, &email.replace(['@', '.'], "-")).await;
    let t = a["token"].as_str().unwrap().to_string();
    for i in 1..=5 {
        app.append(&t, 1, "crm.call.logged.v1", json!({ "call": i })).await;
    }
    assert_eq!(app.verify(&t, 1).await["entries_checked"], 5);
    (a["tenant_id"].as_str().unwrap().to_string(), t)
}

async fn sql(app: &TestApp, text: &str, tenant: &str) {
    sqlx::query(sqlx::AssertSqlSafe(text.to_string())).bind(tenant).execute(app.state().db.writer()).await.expect(text);
}

async fn assert_fails(app: &TestApp, tenant: &str, token: &str, seq: i64, reason: &str) {
    let v = app.verify(token, 1).await;
    assert_eq!((v["ok"].clone(), v["failed_seq"].clone(), v["reason"].clone()), (json!(false), json!(seq), json!(reason)), "{v}");
    assert_eq!(v["entries_checked"], seq - 1);
    let (s, v) = app.admin(Method::POST, &format!("/admin/audit/verify?tenant_id={tenant}")).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let d = &v["data"];
    assert_eq!(
        (d["verified"].clone(), d["pool_index"].clone(), d["failed_seq"].clone(), d["reason"].clone()),
        (json!(false), json!(1), json!(seq), json!(reason)),
        "{v}"
    );
}

async fn a_changed_payload_is_named_by_seq_as_wrong_hash(app: TestApp) {
    let (tenant, t) = five_entries(&app, "tp@example.com").await;
    sql(&app, "UPDATE audit_entry SET payload = '{\"call\":99}' WHERE tenant_id = $1 AND pool_index = 1 AND seq = 3", &tenant).await;
    assert_fails(&app, &tenant, &t, 3, "wrong-hash").await;
}
db_test!(a_changed_payload_is_named_by_seq_as_wrong_hash);

async fn a_deleted_entry_is_named_by_seq_as_a_gap(app: TestApp) {
    let (tenant, t) = five_entries(&app, "td@example.com").await;
    sql(&app, "DELETE FROM audit_entry WHERE tenant_id = $1 AND pool_index = 1 AND seq = 3", &tenant).await;
    assert_fails(&app, &tenant, &t, 3, "gap").await;
    // Deleting the last entry is a gap too: the head remembers it.
    let (tenant, t) = five_entries(&app, "td2@example.com").await;
    sql(&app, "DELETE FROM audit_entry WHERE tenant_id = $1 AND pool_index = 1 AND seq = 5", &tenant).await;
    assert_fails(&app, &tenant, &t, 5, "gap").await;
}
db_test!(a_deleted_entry_is_named_by_seq_as_a_gap);

async fn two_reordered_entries_are_named_by_seq_as_wrong_prev(app: TestApp) {
    let (tenant, t) = five_entries(&app, "tr@example.com").await;
    for step in [
        "UPDATE audit_entry SET seq = -1 WHERE tenant_id = $1 AND pool_index = 1 AND seq = 2",
        "UPDATE audit_entry SET seq = 2 WHERE tenant_id = $1 AND pool_index = 1 AND seq = 3",
        "UPDATE audit_entry SET seq = 3 WHERE tenant_id = $1 AND pool_index = 1 AND seq = -1",
    ] {
        sql(&app, step, &tenant).await;
    }
    assert_fails(&app, &tenant, &t, 2, "wrong-prev").await;
}
db_test!(two_reordered_entries_are_named_by_seq_as_wrong_prev);

async fn a_rewritten_hash_is_caught_by_the_next_link(app: TestApp) {
    let (tenant, t) = five_entries(&app, "th@example.com").await;
    // Rewriting an entry's own hash breaks it (wrong-hash at its seq).
    sql(&app, "UPDATE audit_entry SET actor_id = 'someone-else' WHERE tenant_id = $1 AND pool_index = 1 AND seq = 4", &tenant).await;
    assert_fails(&app, &tenant, &t, 4, "wrong-hash").await;
}
db_test!(a_rewritten_hash_is_caught_by_the_next_link);

async fn two_tenants_appending_concurrently_to_one_pool_never_interleave(app: TestApp) {
    let a = app.signup("ca@example.com", "ca").await;
    let b = app.signup("cb@example.com", "cb").await;
    let app = std::sync::Arc::new(app);
    let mut tasks = Vec::new();
    for (who, token) in [(&a, a["token"].as_str().unwrap().to_string()), (&b, b["token"].as_str().unwrap().to_string())] {
        for client in 0..4 {
            let (app, token, tenant) = (app.clone(), token.clone(), who["tenant_id"].clone());
            tasks.push(tokio::spawn(async move {
                let mut seqs = Vec::new();
                for i in 0..15 {
                    let e = app.append(&token, 3, "crm.call.logged.v1", json!({ "client": client, "i": i })).await;
                    assert_eq!(e["tenant_id"], tenant);
                    seqs.push((tenant.as_str().unwrap().to_string(), e["seq"].as_i64().unwrap()));
                }
                seqs
            }));
        }
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    for who in [&a, &b] {
        let tenant = who["tenant_id"].as_str().unwrap();
        let mut seqs: Vec<i64> = all.iter().filter(|(t, _)| t == tenant).map(|(_, s)| *s).collect();
        seqs.sort();
        assert_eq!(seqs, (1..=60).collect::<Vec<_>>(), "each tenant's answered seqs are exactly 1..60");
        let v = app.verify(who["token"].as_str().unwrap(), 3).await;
        assert_eq!((v["ok"].clone(), v["entries_checked"].clone()), (json!(true), json!(60)), "{v}");
        let stored: Vec<String> = sqlx::query_scalar("SELECT tenant_id FROM audit_entry WHERE pool_index = 3 AND tenant_id = $1 ORDER BY seq")
            .bind(tenant)
            .fetch_all(&app.state().db.read)
            .await
            .unwrap();
        assert_eq!(stored.len(), 60);
    }
}
db_test!(two_tenants_appending_concurrently_to_one_pool_never_interleave);

/// The event types of a tenant's chain in its admin pool, in order.
async fn admin_pool_events(app: &TestApp, tenant: &str) -> Vec<String> {
    sqlx::query_scalar("SELECT event_type FROM audit_entry WHERE tenant_id = $1 AND pool_index = 0 ORDER BY seq")
        .bind(tenant)
        .fetch_all(&app.state().db.read)
        .await
        .unwrap()
}

async fn the_foundations_writes_emit_their_events_in_their_transactions(app: TestApp) {
    let a = app.signup("em@example.com", "em").await;
    let tenant = a["tenant_id"].as_str().unwrap();
    let t = a["token"].as_str().unwrap();
    assert_eq!(admin_pool_events(&app, tenant).await, ["tenant.tenant.created.v1"]);
    let (application, key) = app.key(t, "em", json!(["*"])).await;
    let key_id = key["key_id"].as_str().unwrap();
    assert_eq!(app.post(&format!("/api/api-keys/{key_id}/rotate"), Some(t), json!({})).await.0, StatusCode::OK);
    assert_eq!(app.post(&format!("/api/api-keys/{key_id}/revoke"), Some(t), json!({})).await.0, StatusCode::OK);
    // A refused write emits nothing: a revoked key cannot be rotated.
    assert_error(app.post(&format!("/api/api-keys/{key_id}/rotate"), Some(t), json!({})).await, 409, "Conflict");
    // A repeated revoke changes nothing and records nothing.
    assert_eq!(app.post(&format!("/api/api-keys/{key_id}/revoke"), Some(t), json!({})).await.0, StatusCode::OK);
    assert_eq!(app.post(&format!("/api/applications/{application}/disable"), Some(t), json!({})).await.0, StatusCode::OK);
    let (_, roles) = app.get(&format!("/api/personas/{}/roles", a["persona_id"].as_str().unwrap()), Some(t)).await;
    let (s, p) = app.post("/api/personas", Some(t), json!({ "kind": "human" })).await;
    assert_eq!(s, StatusCode::CREATED, "{p}");
    let persona = p["data"]["persona_id"].as_str().unwrap();
    let (s, g) =
        app.post("/api/role-assignments", Some(t), json!({ "persona_id": persona, "role_template_id": roles["data"]["roles"][0]["role_template_id"] })).await;
    assert_eq!(s, StatusCode::CREATED, "{g}");
    assert_eq!(app.post(&format!("/api/role-assignments/{}/revoke", g["data"]["assignment_id"].as_str().unwrap()), Some(t), json!({})).await.0, StatusCode::OK);
    assert_eq!(app.post(&format!("/api/personas/{persona}/shred"), Some(t), json!({})).await.0, StatusCode::OK);
    assert_eq!(
        admin_pool_events(&app, tenant).await,
        [
            "tenant.tenant.created.v1",
            "identity.application.created.v1",
            "identity.api_key.issued.v1",
            "identity.api_key.rotated.v1",
            "identity.api_key.revoked.v1",
            "identity.application.disabled.v1",
            "identity.persona.created.v1",
            "identity.role_assignment.granted.v1",
            "identity.role_assignment.revoked.v1",
            "identity.persona.shredded.v1",
        ]
    );
    let v = app.verify(t, 0).await;
    assert_eq!((v["ok"].clone(), v["entries_checked"].clone()), (json!(true), json!(10)), "{v}");
    // The issued key's entry never carries its secret.
    let (s, list) = app.admin(Method::GET, &format!("/admin/audit/entries?tenant_id={tenant}&limit=500")).await;
    assert_eq!(s, StatusCode::OK);
    let issued = list["data"].as_array().unwrap().iter().find(|e| e["event_type"] == "identity.api_key.issued.v1").unwrap();
    let (_, full) = app.admin(Method::GET, &format!("/admin/audit/entries/{}", issued["entry_id"].as_str().unwrap())).await;
    assert_eq!(full["data"]["payload"]["key_id"], key_id);
    assert!(!full.to_string().contains(key["api_key"].as_str().unwrap()));
    assert_eq!(
        (full["data"]["actor_kind"].clone(), full["data"]["actor_id"].clone(), full["data"]["retention_class"].clone()),
        (json!("human"), a["person_id"].clone(), json!("regulated"))
    );
}
db_test!(the_foundations_writes_emit_their_events_in_their_transactions);

async fn operator_routes_list_read_and_verify_entries(app: TestApp) {
    let a = app.signup("op-a@example.com", "op-a").await;
    let b = app.signup("op-b@example.com", "op-b").await;
    let (ta, tenant_a) = (a["token"].as_str().unwrap(), a["tenant_id"].as_str().unwrap());
    let first = app.append(ta, 2, "crm.call.logged.v1", json!({ "n": 1 })).await;
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let mid = app.append(ta, 2, "crm.call.logged.v1", json!({ "n": 2 })).await;
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let last = app.append(ta, 2, "crm.call.missed.v1", json!({ "n": 3 })).await;

    // Operator credential only.
    assert_error(app.get("/admin/audit/entries", Some(ta)).await, 401, "Unauthorized");
    assert_error(app.get("/admin/audit/entries", None).await, 401, "Unauthorized");

    let (s, list) = app.admin(Method::GET, &format!("/admin/audit/entries?tenant_id={tenant_a}")).await;
    assert_eq!(s, StatusCode::OK, "{list}");
    let data = list["data"].as_array().unwrap();
    assert_eq!(data.len(), 4, "signup's entry and three appends: {list}");
    assert_eq!(
        data[0],
        json!({
            "entry_id": last["entry_id"], "tenant_id": tenant_a, "pool_index": 2, "actor_kind": "human",
            "actor_id": a["person_id"], "event_type": "crm.call.missed.v1", "occurred_at": last["occurred_at"], "seq": 3,
        })
    );
    assert!(data.windows(2).all(|w| w[0]["occurred_at"].as_str() >= w[1]["occurred_at"].as_str()), "newest first");
    let (_, all) = app.admin(Method::GET, "/admin/audit/entries").await;
    assert!(all["data"].as_array().unwrap().iter().any(|e| e["tenant_id"] == b["tenant_id"]));
    let (_, one) = app.admin(Method::GET, &format!("/admin/audit/entries?tenant_id={tenant_a}&limit=1")).await;
    assert_eq!(one["data"].as_array().unwrap().len(), 1);
    let (_, big) = app.admin(Method::GET, "/admin/audit/entries?limit=100000").await;
    assert_eq!(big["data"].as_array().unwrap().len(), all["data"].as_array().unwrap().len());
    let range = format!("/admin/audit/entries?tenant_id={tenant_a}&from={}&to={}", mid["occurred_at"].as_str().unwrap(), mid["occurred_at"].as_str().unwrap());
    let (_, ranged) = app.admin(Method::GET, &range.replace('+', "%2B")).await;
    assert_eq!(ranged["data"].as_array().unwrap().iter().map(|e| e["entry_id"].clone()).collect::<Vec<_>>(), vec![mid["entry_id"].clone()]);
    let (_, by_actor) = app.admin(Method::GET, &format!("/admin/audit/entries?actor_id={}", b["person_id"].as_str().unwrap())).await;
    assert_eq!(by_actor["data"].as_array().unwrap().len(), 1);
    assert_eq!(by_actor["data"][0]["event_type"], "tenant.tenant.created.v1");
    for bad in ["limit=abc", "tenant_id=nope", "from=yesterday"] {
        let (s, body) = app.admin(Method::GET, &format!("/admin/audit/entries?{bad}")).await;
        assert_eq!((s, body["error"].clone()), (StatusCode::BAD_REQUEST, json!("ValidationError")), "{bad}: {body}");
    }

    let (s, full) = app.admin(Method::GET, &format!("/admin/audit/entries/{}", first["entry_id"].as_str().unwrap())).await;
    assert_eq!(s, StatusCode::OK);
    let d = &full["data"];
    assert_eq!(
        (d["payload"].clone(), d["prev_hash"].clone(), d["entry_hash"].clone(), d["seq"].clone()),
        (json!({ "n": 1 }), json!(ZERO), first["entry_hash"].clone(), json!(1))
    );
    assert_eq!(d["payload_digest"].as_str().unwrap().len(), 64);
    for missing in ["00000000-0000-0000-0000-000000000000", "not-a-uuid"] {
        let (s, b) = app.admin(Method::GET, &format!("/admin/audit/entries/{missing}")).await;
        assert_eq!((s, b), (StatusCode::NOT_FOUND, json!({ "success": false, "error": "NotFound", "details": ["entry not found"] })));
    }

    let (s, v) = app.admin(Method::POST, &format!("/admin/audit/verify?tenant_id={tenant_a}")).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!((v["data"]["verified"].clone(), v["data"]["entry_count"].clone()), (json!(true), json!(4)), "{v}");
    assert_eq!(v["data"]["chains"].as_array().unwrap().len(), 2, "pool 0 (signup) and pool 2");
    let (_, v) = app.admin(Method::POST, "/admin/audit/verify?tenant_id=00000000-0000-0000-0000-000000000000").await;
    assert_eq!((v["data"]["verified"].clone(), v["data"]["entry_count"].clone()), (json!(true), json!(0)));
    let (s, body) = app.admin(Method::POST, "/admin/audit/verify").await;
    assert_eq!((s, body["error"].clone()), (StatusCode::BAD_REQUEST, json!("ValidationError")));
    let (s, _) = app.admin(Method::POST, "/admin/audit/verify?tenant_id=x").await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
}
db_test!(operator_routes_list_read_and_verify_entries);

async fn retention_shreds_expired_payloads_and_the_chain_still_verifies(app: TestApp) {
    let a = app.signup("ret@example.com", "ret").await;
    let (tenant, t) = (a["tenant_id"].as_str().unwrap(), a["token"].as_str().unwrap());
    let now = chrono::Utc::now();
    let ago = |days: i64| hub_kernel::db::format_time(now - chrono::Duration::days(days));
    // Backdated rows: (retention class, age in days, shredded?).
    let cases = [
        ("operational", 91, true),
        ("operational", 89, false),
        ("transient", 8, true),
        ("transient", 6, false),
        ("regulated", 400, false),
        ("regulated", 7 * 366, true),
    ];
    let mut ids = Vec::new();
    let mut tx = app.state().db.begin().await.unwrap();
    for (class, days, _) in cases {
        let e = hub_kernel::audit::record_event(
            &mut tx,
            hub_kernel::audit::Event {
                tenant_id: tenant,
                pool_index: Some(4),
                event_type: "crm.call.logged.v1",
                actor_kind: "human",
                actor_id: "p",
                actor_chain: None,
                payload: &json!({ "class": class, "days": days }),
                retention_class: Some(class),
                occurred_at: Some(ago(days)),
            },
        )
        .await
        .unwrap();
        ids.push(e.entry_id);
    }
    tx.commit().await.unwrap();
    let shredded = hub_kernel::audit::retention::sweep(&app.state().db, now).await.unwrap();
    assert_eq!(shredded, 3);
    for ((class, days, gone), id) in cases.iter().zip(&ids) {
        let (_, e) = app.admin(Method::GET, &format!("/admin/audit/entries/{id}")).await;
        if *gone {
            assert_eq!(e["data"]["payload"], Value::Null, "{class} {days}");
            assert!(e["data"]["shredded_at"].is_string());
        } else {
            assert_eq!(e["data"]["payload"], json!({ "class": class, "days": days }));
            assert_eq!(e["data"]["shredded_at"], Value::Null);
        }
    }
    let v = app.verify(t, 4).await;
    assert_eq!((v["ok"].clone(), v["entries_checked"].clone()), (json!(true), json!(6)), "{v}");
    assert_eq!(hub_kernel::audit::retention::sweep(&app.state().db, now).await.unwrap(), 0, "a second sweep finds nothing");
}
db_test!(retention_shreds_expired_payloads_and_the_chain_still_verifies);

async fn the_robot_path_and_child_tenants_emit_their_events(app: TestApp) {
    let t = app.signup("robot-events@example.com", "robot-events").await;
    let token = t["token"].as_str().unwrap();
    let tenant = t["tenant_id"].as_str().unwrap();
    let (asset, cred) = crate::assets::robot(&app, token, json!({ "display_name": "R" })).await;
    let (s, _) = app.call(Method::PUT, &format!("/api/assets/{asset}/twin"), Some(token), Some(json!({ "desired": { "speed": 2 } }))).await;
    assert_eq!(s, StatusCode::OK);
    let (s, low) = app.post("/api/commands", Some(token), json!({ "type": "beep", "risk_class": "low", "target_asset_id": asset })).await;
    assert_eq!(s, StatusCode::CREATED, "{low}");
    let (s, high) = app.post("/api/commands", Some(token), json!({ "type": "cut", "risk_class": "high", "target_asset_id": asset })).await;
    assert_eq!(s, StatusCode::CREATED, "{high}");
    let high_id = high["data"]["command_id"].as_str().unwrap();
    let (s, _) = app.post(&format!("/api/commands/{high_id}/decision"), Some(token), json!({ "approved": false, "reason": "no" })).await;
    assert_eq!(s, StatusCode::OK);
    let (s, _) = app.post(&format!("/api/commands/{}/ack", low["data"]["command_id"].as_str().unwrap()), Some(&cred), json!({ "ok": true })).await;
    assert_eq!(s, StatusCode::OK);
    let (s, child) = app.post("/api/tenants", Some(token), json!({ "app_id": "robot-events-child", "display_name": "Child" })).await;
    assert_eq!(s, StatusCode::CREATED, "{child}");

    let (s, list) = app.admin(Method::GET, &format!("/admin/audit/entries?tenant_id={tenant}&limit=500")).await;
    assert_eq!(s, StatusCode::OK);
    let mut types: Vec<(String, String)> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["event_type"].as_str().unwrap().to_string(), e["actor_kind"].as_str().unwrap().to_string()))
        .collect();
    types.reverse();
    let expected: Vec<(String, String)> = [
        ("tenant.tenant.created.v1", "human"),
        ("asset.asset.registered.v1", "human"),
        ("asset.credential.issued.v1", "human"),
        ("asset.asset.updated.v1", "human"),
        ("command.command.issued.v1", "human"),
        ("command.command.issued.v1", "human"),
        ("command.command.rejected.v1", "human"),
        ("command.command.acknowledged.v1", "robot"),
        ("tenant.tenant.created.v1", "human"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(types, expected);
    let (_, entries) = app.admin(Method::GET, &format!("/admin/audit/entries?tenant_id={tenant}&limit=1")).await;
    let (_, full) = app.admin(Method::GET, &format!("/admin/audit/entries/{}", entries["data"][0]["entry_id"].as_str().unwrap())).await;
    assert_eq!(full["data"]["payload"]["tenant_id"], child["data"]["tenant_id"]);
    assert_eq!(full["data"]["payload"]["parent_tenant_id"], json!(tenant));
}
db_test!(the_robot_path_and_child_tenants_emit_their_events);

async fn a_tenant_reads_its_own_entries_paged_and_filtered(app: TestApp) {
    let t = app.two_tenants("entries").await;
    let (a, b) = (t.a_token.as_str(), t.b_token.as_str());
    let mut mine = Vec::new();
    for n in 0..3 {
        mine.push(app.append(a, 3, "crm.call.logged.v1", json!({ "n": n })).await);
    }
    let other_type = app.append(a, 4, "crm.call.missed.v1", json!({ "n": 9 })).await;
    let theirs = app.append(b, 3, "crm.call.logged.v1", json!({ "n": 0 })).await;

    // One chain: newest first, only A's, whole pages counted.
    let (s, list) = app.get("/api/audit/entries?pool_index=3", Some(a)).await;
    assert_eq!((s, list["total"].as_i64()), (StatusCode::OK, Some(3)), "{list}");
    let seqs: Vec<i64> = list["data"].as_array().unwrap().iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    assert_eq!(seqs, [3, 2, 1]);
    assert_eq!(list["data"][0]["entry_id"], mine[2]["entry_id"]);
    assert_eq!(list["data"][0]["event_type"], "crm.call.logged.v1");
    assert!(list["data"][0].get("payload").is_none(), "the list shows no payload: {list}");
    let (_, page) = app.get("/api/audit/entries?pool_index=3&limit=1&offset=1", Some(a)).await;
    assert_eq!((page["total"].as_i64(), page["data"].as_array().unwrap().len()), (Some(3), 1));
    assert_eq!(page["data"][0]["entry_id"], mine[1]["entry_id"]);

    // Every chain of A's: its signup's events too, never an entry of B's.
    let (_, all) = app.get("/api/audit/entries?limit=500", Some(a)).await;
    let ids: Vec<&str> = all["data"].as_array().unwrap().iter().map(|e| e["entry_id"].as_str().unwrap()).collect();
    assert_eq!(all["total"].as_i64(), Some(ids.len() as i64));
    assert_eq!(ids.len(), app.events_of(&t.a["tenant_id"]).await.len());
    assert!(ids.contains(&other_type["entry_id"].as_str().unwrap()) && !ids.contains(&theirs["entry_id"].as_str().unwrap()));
    let (_, b_all) = app.get("/api/audit/entries?limit=500", Some(b)).await;
    assert!(b_all["data"].as_array().unwrap().iter().all(|e| !ids.contains(&e["entry_id"].as_str().unwrap())), "{b_all}");

    // Filters: type, actor, time.
    let (_, typed) = app.get("/api/audit/entries?event_type=crm.call.missed.v1", Some(a)).await;
    assert_eq!((typed["total"].as_i64(), &typed["data"][0]["entry_id"]), (Some(1), &other_type["entry_id"]));
    let actor = mine[0]["actor_id"].as_str().unwrap();
    let (_, by_actor) = app.get(&format!("/api/audit/entries?actor_id={actor}&pool_index=3"), Some(a)).await;
    assert_eq!(by_actor["total"].as_i64(), Some(3));
    let (_, nobody) = app.get("/api/audit/entries?actor_id=nobody", Some(a)).await;
    assert_eq!(nobody["total"].as_i64(), Some(0));
    let first = mine[0]["occurred_at"].as_str().unwrap().replace('+', "%2B");
    let (_, since) = app.get(&format!("/api/audit/entries?pool_index=3&from={first}"), Some(a)).await;
    assert_eq!(since["total"].as_i64(), Some(3));
    let (_, until) = app.get(&format!("/api/audit/entries?pool_index=3&to={first}"), Some(a)).await;
    assert_eq!((until["total"].as_i64(), &until["data"][0]["entry_id"]), (Some(1), &mine[0]["entry_id"]));
    let (_, later) = app.get("/api/audit/entries?from=2999-01-01T00:00:00Z", Some(a)).await;
    assert_eq!(later["total"].as_i64(), Some(0));

    // Refusals name the parameter.
    let body = assert_error(app.get("/api/audit/entries?from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z", Some(a)).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["from must not be later than to"]));
    for bad in ["pool_index=-1", "pool_index=x", "from=yesterday", "limit=0"] {
        let body = assert_error(app.get(&format!("/api/audit/entries?{bad}"), Some(a)).await, 400, "ValidationError");
        let name = bad.split('=').next().unwrap();
        assert!(body["details"][0].as_str().unwrap().contains(name), "{bad}: {body}");
    }

    // One entry whole; another tenant's is 404.
    let id = mine[1]["entry_id"].as_str().unwrap();
    let (s, one) = app.get(&format!("/api/audit/entries/{id}"), Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{one}");
    let e = &one["data"];
    assert_eq!((e["payload"].clone(), e["seq"].as_i64(), e["pool_index"].as_i64()), (json!({ "n": 1 }), Some(2), Some(3)));
    assert_eq!(e["prev_hash"], mine[0]["entry_hash"]);
    assert_eq!((e["entry_hash"].as_str().unwrap().len(), &e["payload_digest"], &e["shredded_at"]), (64, &mine[1]["payload_digest"], &Value::Null));
    assert_error(app.get(&format!("/api/audit/entries/{}", theirs["entry_id"].as_str().unwrap()), Some(a)).await, 404, "NotFound");
    assert_error(app.get(&format!("/api/audit/entries/{id}"), Some(b)).await, 404, "NotFound");
    assert_error(app.get("/api/audit/entries/not-a-uuid", Some(a)).await, 404, "NotFound");
}
db_test!(a_tenant_reads_its_own_entries_paged_and_filtered);

async fn an_event_types_schema_moves_forward_only(app: TestApp) {
    let t = app.two_tenants("schema").await;
    let (a, b) = (t.a_token.as_str(), t.b_token.as_str());
    let (s, _) = app
        .post("/api/events/types", Some(a), json!({ "event_type": "shop.order.placed.v1", "retention_class": "operational", "conflict_policy": "lww" }))
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let path = "/api/events/types/shop.order.placed.v1";
    let app = &app;
    let change = |body: Value, token: &str| {
        let token = token.to_string();
        async move { app.call(Method::PATCH, path, Some(&token), Some(body)).await }
    };

    let (s, d) = change(json!({ "schema_state": "deprecated" }), a).await;
    assert_eq!((s, d["data"]["schema_state"].as_str(), d["data"]["compaction_policy"].as_str()), (StatusCode::OK, Some("deprecated"), Some("none")), "{d}");
    // The same change again: the same answer, no second event.
    let (s, again) = change(json!({ "schema_state": "deprecated" }), a).await;
    assert_eq!((s, &again["data"]), (StatusCode::OK, &d["data"]));
    let (_, c) = change(json!({ "compaction_policy": "snapshot" }), a).await;
    assert_eq!((c["data"]["schema_state"].as_str(), c["data"]["compaction_policy"].as_str()), (Some("deprecated"), Some("snapshot")));
    let (_, read) = app.get(path, Some(a)).await;
    assert_eq!(read["data"], c["data"]);
    // A deprecated type still takes entries.
    app.append(a, 0, "shop.order.placed.v1", json!({ "n": 0 })).await;

    // Backwards is 409; forwards to retired, then nothing moves it back.
    let body = assert_error(change(json!({ "schema_state": "active" }), a).await, 409, "Conflict");
    assert_eq!(body["details"], json!(["the event type is deprecated: its schema_state moves only forward (active, deprecated, retired)"]));
    let (_, r) = change(json!({ "schema_state": "retired", "compaction_policy": "keep-latest" }), a).await;
    assert_eq!((r["data"]["schema_state"].as_str(), r["data"]["compaction_policy"].as_str()), (Some("retired"), Some("keep-latest")));
    assert_error(change(json!({ "schema_state": "deprecated" }), a).await, 409, "Conflict");
    // A retired type takes no new entry.
    let body = assert_error(
        app.post("/api/audit/append", Some(a), json!({ "pool_index": 0, "event_type": "shop.order.placed.v1", "payload": { "n": 1 } })).await,
        400,
        "ValidationError",
    );
    assert_eq!(body["details"], json!(["event_type 'shop.order.placed.v1' is retired: it takes no new entries"]));

    // Refusals: nothing to change, an unknown word, a platform type, an
    // unknown type, another tenant's type.
    let body = assert_error(change(json!({}), a).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["give at least one of schema_state, compaction_policy"]));
    let body = assert_error(change(json!({ "schema_state": "gone" }), a).await, 400, "ValidationError");
    assert!(body["details"][0].as_str().unwrap().starts_with("schema_state must be one of"), "{body}");
    let body = assert_error(
        app.call(Method::PATCH, "/api/events/types/crm.call.logged.v1", Some(a), Some(json!({ "schema_state": "deprecated" }))).await,
        409,
        "Conflict",
    );
    assert_eq!(body["details"], json!(["'crm.call.logged.v1' is a platform event type: a tenant cannot change it"]));
    assert_error(app.call(Method::PATCH, "/api/events/types/shop.never.made.v1", Some(a), Some(json!({ "schema_state": "retired" }))).await, 404, "NotFound");
    assert_error(change(json!({ "schema_state": "retired" }), b).await, 404, "NotFound");

    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "audit.event_type.updated.v1").count(), 3, "{events:?}");
}
db_test!(an_event_types_schema_moves_forward_only);
