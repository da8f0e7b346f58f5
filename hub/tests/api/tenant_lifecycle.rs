//! sdk-tenant-lifecycle: offboarding with a retention deadline, checked for
//! ownership first, readable, and the end of every credential of the tenant
//! when the deadline passes.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

fn path(tenant: &Value) -> String {
    format!("/api/tenants/{}/offboarding", tenant.as_str().unwrap())
}

async fn tenant_status(app: &TestApp, tenant: &Value) -> String {
    sqlx::query_scalar("SELECT status FROM tenant_tenant WHERE tenant_id = $1").bind(tenant.as_str().unwrap()).fetch_one(&app.state().db.read).await.unwrap()
}

fn seconds_from_now(t: &Value) -> i64 {
    (chrono::DateTime::parse_from_rfc3339(t.as_str().unwrap()).unwrap().with_timezone(&chrono::Utc) - chrono::Utc::now()).num_seconds()
}

async fn offboarding_is_started_by_an_owner_and_readable(app: TestApp) {
    let t = app.two_tenants("off").await;
    let a = t.a_token.as_str();
    let mine = path(&t.a["tenant_id"]);
    let (s, before) = app.get(&mine, Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{before}");
    assert_eq!(
        before["data"],
        json!({
            "tenant_id": t.a["tenant_id"], "state": "not_started", "reason": null, "started_by": null, "started_by_tenant_id": null,
            "started_at": null, "deadline_at": null, "completed_at": null,
        })
    );

    // Ownership first: another tenant's id is not found, whatever the body says.
    for token in [t.b_token.as_str(), t.b_key.as_str()] {
        assert_error(app.get(&mine, Some(token)).await, 404, "NotFound");
        assert_error(app.post(&mine, Some(token), json!({})).await, 404, "NotFound");
        assert_error(app.post(&mine, Some(token), json!({ "deadline_at": "soon" })).await, 404, "NotFound");
    }
    assert_error(app.get("/api/tenants/not-a-tenant/offboarding", Some(a)).await, 404, "NotFound");
    assert_error(app.post(&format!("/api/tenants/{}/offboarding", uuid::Uuid::now_v7()), Some(a), json!({})).await, 404, "NotFound");

    // Bad input, every problem at once.
    let b = assert_error(app.post(&mine, Some(a), json!({ "deadline_at": "tomorrow", "reason": "r".repeat(501) })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["deadline_at must be an RFC 3339 timestamp", "reason must be at most 500 characters"]));
    let b = assert_error(app.post(&mine, Some(a), json!({ "deadline_at": "2020-01-01T00:00:00Z" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["deadline_at must not be in the past"]));
    let b = assert_error(app.post(&mine, Some(a), json!({ "deadline_at": "2999-01-01T00:00:00Z" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["deadline_at must be at most 3650 days from now"]));

    // A key needs the scope, and its persona a role that administers tenants.
    assert_scoped(
        &app,
        a,
        json!(["geo.address.read"]),
        &[(Method::POST, mine.clone(), "tenant.tenant.write"), (Method::GET, mine.clone(), "tenant.tenant.read")],
    )
    .await;
    let (_, key) = app.key(a, "off-roleless", json!(["tenant.*"])).await;
    let roleless = key["api_key"].as_str().unwrap();
    let b = assert_error(app.post(&mine, Some(roleless), json!({})).await, 403, "Forbidden");
    assert!(b["details"][0].as_str().unwrap().contains("holds no role"), "{b}");
    assert_eq!(app.get(&mine, Some(roleless)).await.0, StatusCode::OK, "reading needs only the scope");
    assert!(!app.events_of(&t.a["tenant_id"]).await.iter().any(|e| e.starts_with("tenant.offboarding")), "refusals record nothing");

    // The owner starts it: 30 days by default.
    let (s, started) = app.post(&mine, Some(a), json!({ "reason": "contract ended" })).await;
    assert_eq!(s, StatusCode::CREATED, "{started}");
    let o = &started["data"];
    assert_eq!((o["state"].as_str(), o["reason"].as_str(), o["completed_at"].clone()), (Some("offboarding"), Some("contract ended"), Value::Null));
    assert_eq!((o["started_by"].clone(), o["started_by_tenant_id"].clone()), (t.a["person_id"].clone(), t.a["tenant_id"].clone()));
    let ahead = seconds_from_now(&o["deadline_at"]);
    assert!((30 * 86400 - 60..=30 * 86400).contains(&ahead), "{ahead}");
    let (s, read) = app.get(&mine, Some(a)).await;
    assert_eq!((s, &read["data"]), (StatusCode::OK, o));
    assert_eq!(tenant_status(&app, &t.a["tenant_id"]).await, "offboarding");
    let b = assert_error(app.post(&mine, Some(a), json!({ "deadline_at": chrono::Utc::now().to_rfc3339() })).await, 409, "Conflict");
    assert!(b["details"][0].as_str().unwrap().contains("started at"), "{b}");
    // Until the deadline the tenant works as before.
    assert_eq!(app.get("/api/me", Some(a)).await.0, StatusCode::OK);
    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "tenant.offboarding.started.v1").count(), 1);
    assert!(!events.iter().any(|e| e == "tenant.offboarding.completed.v1"));
}
db_test!(offboarding_is_started_by_an_owner_and_readable);

async fn a_parent_offboards_its_child_and_no_one_else(app: TestApp) {
    let t = app.two_tenants("off-parent").await;
    let a = t.a_token.as_str();
    let (s, child) = app.post("/api/tenants", Some(a), json!({ "app_id": "off-parent-child", "display_name": "Child" })).await;
    assert_eq!(s, StatusCode::CREATED, "{child}");
    let theirs = path(&child["data"]["tenant_id"]);
    assert_error(app.post(&theirs, Some(&t.b_token), json!({})).await, 404, "NotFound");
    let (s, started) = app.post(&theirs, Some(a), json!({ "deadline_at": (chrono::Utc::now() + chrono::TimeDelta::days(2)).to_rfc3339() })).await;
    assert_eq!(s, StatusCode::CREATED, "{started}");
    assert_eq!(started["data"]["started_by_tenant_id"], t.a["tenant_id"]);
    assert!((2 * 86400 - 60..=2 * 86400).contains(&seconds_from_now(&started["data"]["deadline_at"])));
    let (s, read) = app.get(&theirs, Some(a)).await;
    assert_eq!((s, read["data"]["state"].as_str()), (StatusCode::OK, Some("offboarding")));
    assert_error(app.get(&theirs, Some(&t.b_token)).await, 404, "NotFound");
    // The parent itself is untouched.
    let (_, own) = app.get(&path(&t.a["tenant_id"]), Some(a)).await;
    assert_eq!(own["data"]["state"], "not_started");
    assert_eq!(tenant_status(&app, &child["data"]["tenant_id"]).await, "offboarding");
    assert_eq!(tenant_status(&app, &t.a["tenant_id"]).await, "trial");
}
db_test!(a_parent_offboards_its_child_and_no_one_else);

/// Polls `what` until it holds, for up to five seconds.
async fn eventually<F: std::future::Future<Output = bool>>(mut what: impl FnMut() -> F) -> bool {
    for _ in 0..50 {
        if what().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

async fn every_credential_of_the_tenant_stops_when_the_deadline_passes(app: TestApp) {
    let t = app.two_tenants("off-end").await;
    let a = t.a_token.as_str();
    let tenant = t.a["tenant_id"].clone();
    let (_, key) = app.key(a, "off-end-live", json!(["*"])).await;
    let live = key["api_key"].as_str().unwrap().to_string();
    let (s, exchanged) = app.post("/api/auth/token", None, json!({ "grant_type": "client_credentials", "client_secret": live })).await;
    assert_eq!(s, StatusCode::OK, "{exchanged}");
    let exchanged = exchanged["access_token"].as_str().unwrap().to_string();
    let (s, test_app) = app.post("/api/applications", Some(a), json!({ "name": "sandbox", "slug": "sandbox", "environment": "test" })).await;
    assert_eq!(s, StatusCode::CREATED, "{test_app}");
    let (s, test_key) = app
        .post(&format!("/api/applications/{}/keys", test_app["data"]["application_id"].as_str().unwrap()), Some(a), json!({ "name": "t", "scopes": ["*"] }))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{test_key}");
    let test_key = test_key["data"]["api_key"].as_str().unwrap().to_string();
    let (_, robot) = crate::assets::robot(&app, a, json!({ "display_name": "off-end" })).await;
    let ack = format!("/api/commands/{}/ack", uuid::Uuid::now_v7());
    // Another replica on the same database (PostgreSQL: replicas share caches' invalidations).
    let replica = if app.backend == Backend::Postgres { Some(app.replica().await) } else { None };

    let credentials = [a, live.as_str(), exchanged.as_str(), test_key.as_str()];
    for c in credentials {
        assert_eq!(app.get("/api/me", Some(c)).await.0, StatusCode::OK);
    }
    assert_error(app.post(&ack, Some(&robot), json!({ "ok": true })).await, 404, "NotFound");
    if let Some(r) = &replica {
        assert_eq!(r.get("/api/me", Some(a)).await.0, StatusCode::OK, "the replica knows the tenant as open");
    }

    // A deadline of now: the credentials stop at once.
    let (s, started) = app.post(&path(&tenant), Some(a), json!({ "deadline_at": chrono::Utc::now().to_rfc3339(), "reason": "at once" })).await;
    assert_eq!(s, StatusCode::CREATED, "{started}");
    assert_eq!(started["data"]["state"], "offboarded");
    for c in credentials {
        let b = assert_error(app.get("/api/me", Some(c)).await, 401, "Unauthorized");
        assert_eq!(b["details"], json!(["the tenant of this credential was offboarded"]), "{c}");
    }
    assert_error(app.get(&path(&tenant), Some(a)).await, 401, "Unauthorized");
    assert_error(app.post(&ack, Some(&robot), json!({ "ok": true })).await, 401, "Unauthorized");
    assert_error(app.post("/api/auth/token", None, json!({ "grant_type": "client_credentials", "client_secret": live })).await, 401, "invalid_client");
    let email = "a@off-end.example.com";
    let login = json!({ "email": email, "password": "correct horse battery", "tenant_id": tenant });
    let b = assert_error(app.post("/api/auth/login", None, login).await, 401, "Unauthorized");
    assert_eq!(b["details"], json!(["the tenant of this credential was offboarded"]));
    // The person remains, outside the tenant; other tenants are untouched.
    let (s, person) = app.post("/api/auth/login", None, json!({ "email": email, "password": "correct horse battery" })).await;
    assert_eq!(s, StatusCode::OK, "{person}");
    assert_eq!(app.get("/api/me", Some(&t.b_token)).await.0, StatusCode::OK);
    assert_eq!(app.get("/api/me", Some(&t.b_key)).await.0, StatusCode::OK);
    if let Some(r) = &replica {
        let refused = eventually(|| async { r.get("/api/me", Some(a)).await.0 == StatusCode::UNAUTHORIZED }).await;
        assert!(refused, "the other replica refuses the tenant's credentials too");
    }

    // The sweep records the completion once, in the tenant's chain.
    let completed = eventually(|| async { app.events_of(&tenant).await.iter().any(|e| e == "tenant.offboarding.completed.v1") }).await;
    assert!(completed, "tenant.offboarding.completed.v1 is recorded");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let events = app.events_of(&tenant).await;
    assert_eq!(events.iter().filter(|e| *e == "tenant.offboarding.completed.v1").count(), 1, "{events:?}");
    assert_eq!(events.iter().filter(|e| *e == "tenant.offboarding.started.v1").count(), 1, "{events:?}");
    assert_eq!(tenant_status(&app, &tenant).await, "offboarded");
    let completed_at: Option<String> = sqlx::query_scalar("SELECT completed_at FROM tenant_offboarding WHERE tenant_id = $1")
        .bind(tenant.as_str().unwrap())
        .fetch_one(&app.state().db.read)
        .await
        .unwrap();
    assert!(completed_at.is_some());
}
db_test!(every_credential_of_the_tenant_stops_when_the_deadline_passes);

async fn patch(app: &TestApp, path: &str, token: &str, body: Value) -> (StatusCode, Value) {
    app.call(Method::PATCH, path, Some(token), Some(body)).await
}

async fn an_offboarding_is_moved_or_cancelled_before_its_deadline(app: TestApp) {
    let t = app.two_tenants("off-undo").await;
    let a = t.a_token.as_str();
    let mine = path(&t.a["tenant_id"]);
    let cancel = format!("{mine}/cancel");

    // Nothing started: nothing to move or cancel.
    let b = assert_error(app.post(&cancel, Some(a), json!({})).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the offboarding of this tenant has not started: only a started offboarding can be cancelled"]));
    let b = assert_error(patch(&app, &mine, a, json!({ "reason": "r" })).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the offboarding of this tenant has not started: only a started offboarding can be changed"]));
    let (s, started) = app.post(&mine, Some(a), json!({ "reason": "mistake" })).await;
    assert_eq!(s, StatusCode::CREATED, "{started}");

    // Ownership first, then the body.
    for token in [t.b_token.as_str(), t.b_key.as_str()] {
        assert_error(app.post(&cancel, Some(token), json!({})).await, 404, "NotFound");
        assert_error(patch(&app, &mine, token, json!({ "deadline_at": "soon" })).await, 404, "NotFound");
    }
    let b = assert_error(patch(&app, &mine, a, json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["give at least one of: deadline_at, reason"]));
    let b = assert_error(patch(&app, &mine, a, json!({ "deadline_at": "2999-01-01T00:00:00Z", "reason": "r".repeat(501) })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["reason must be at most 500 characters"]));
    let b = assert_error(patch(&app, &mine, a, json!({ "deadline_at": "2020-01-01T00:00:00Z" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["deadline_at must not be in the past"]));

    // Move the deadline: the reason stays.
    let (s, moved) = patch(&app, &mine, a, json!({ "deadline_at": (chrono::Utc::now() + chrono::TimeDelta::days(90)).to_rfc3339() })).await;
    assert_eq!(s, StatusCode::OK, "{moved}");
    assert_eq!((moved["data"]["state"].as_str(), moved["data"]["reason"].as_str()), (Some("offboarding"), Some("mistake")));
    assert!((90 * 86400 - 60..=90 * 86400).contains(&seconds_from_now(&moved["data"]["deadline_at"])));
    assert_eq!(moved["data"]["started_at"], started["data"]["started_at"]);
    let (_, read) = app.get(&mine, Some(a)).await;
    assert_eq!(read["data"], moved["data"]);
    let (s, moved) = patch(&app, &mine, a, json!({ "reason": "moved" })).await;
    assert_eq!((s, moved["data"]["reason"].as_str()), (StatusCode::OK, Some("moved")));

    // Cancel: not started again, the tenant back to trial, and it may start anew.
    let (s, cancelled) = app.post(&cancel, Some(a), json!({})).await;
    assert_eq!(s, StatusCode::OK, "{cancelled}");
    assert_eq!(
        cancelled["data"],
        json!({
            "tenant_id": t.a["tenant_id"], "state": "not_started", "reason": null, "started_by": null, "started_by_tenant_id": null,
            "started_at": null, "deadline_at": null, "completed_at": null,
        })
    );
    assert_eq!(tenant_status(&app, &t.a["tenant_id"]).await, "trial");
    let (_, read) = app.get(&mine, Some(a)).await;
    assert_eq!(read["data"]["state"], "not_started");
    assert_error(app.post(&cancel, Some(a), json!({})).await, 409, "Conflict");
    let (s, _) = app.post(&mine, Some(a), json!({ "reason": "for real" })).await;
    assert_eq!(s, StatusCode::CREATED);

    // A deadline moved to now ends it at once; past the deadline nothing moves.
    let (s, ended) = patch(&app, &mine, a, json!({ "deadline_at": chrono::Utc::now().to_rfc3339() })).await;
    assert_eq!((s, ended["data"]["state"].as_str()), (StatusCode::OK, Some("offboarded")), "{ended}");
    let b = assert_error(app.get("/api/me", Some(a)).await, 401, "Unauthorized");
    assert_eq!(b["details"], json!(["the tenant of this credential was offboarded"]));

    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |name: &str| events.iter().filter(|e| *e == name).count();
    assert_eq!(
        (count("tenant.offboarding.started.v1"), count("tenant.offboarding.updated.v1"), count("tenant.offboarding.cancelled.v1")),
        (2, 3, 1),
        "{events:?}"
    );
}
db_test!(an_offboarding_is_moved_or_cancelled_before_its_deadline);

async fn a_parent_undoes_its_childs_offboarding_and_the_child_cannot(app: TestApp) {
    let t = app.two_tenants("off-kid").await;
    let a = t.a_token.as_str();
    let (s, child) = app.post("/api/tenants", Some(a), json!({ "app_id": "off-kid-child", "display_name": "Child" })).await;
    assert_eq!(s, StatusCode::CREATED, "{child}");
    let child_id = child["data"]["tenant_id"].clone();
    let theirs = path(&child_id);
    // The parent's owner becomes the child's owner too (its app's owner template).
    let owner: String = sqlx::query_scalar("SELECT role_template_id FROM tenant_role_template WHERE app_id = 'off-kid-child' AND name = 'owner'")
        .fetch_one(&app.state().db.read)
        .await
        .unwrap();
    let (s, m) = app.post("/api/memberships", Some(a), json!({ "person_id": t.a["person_id"], "tenant_id": child_id, "role_template_id": owner })).await;
    assert_eq!(s, StatusCode::CREATED, "{m}");
    let login = json!({ "email": "a@off-kid.example.com", "password": "correct horse battery", "tenant_id": child_id });
    let (s, login) = app.post("/api/auth/login", None, login).await;
    assert_eq!(s, StatusCode::OK, "{login}");
    let kid = login["data"]["token"].as_str().unwrap().to_string();

    // Started by the parent: the child can neither move nor cancel it.
    let (s, _) = app.post(&theirs, Some(a), json!({ "reason": "parent" })).await;
    assert_eq!(s, StatusCode::CREATED);
    let b = assert_error(app.post(&format!("{theirs}/cancel"), Some(&kid), json!({})).await, 403, "Forbidden");
    assert_eq!(b["details"], json!(["the offboarding of this tenant was started by its parent tenant: only the parent can have it cancelled"]));
    assert_error(app.call(Method::PATCH, &theirs, Some(&kid), Some(json!({ "reason": "no" }))).await, 403, "Forbidden");
    let (s, _) = app.post(&format!("{theirs}/cancel"), Some(a), json!({})).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(tenant_status(&app, &child_id).await, "trial");
    // Started by the child itself: it may undo it, and so may its parent.
    let (s, _) = app.post(&theirs, Some(&kid), json!({ "reason": "self" })).await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, moved) = app.call(Method::PATCH, &theirs, Some(&kid), Some(json!({ "reason": "self, moved" }))).await;
    assert_eq!(s, StatusCode::OK, "{moved}");
    let (s, _) = app.post(&format!("{theirs}/cancel"), Some(a), json!({})).await;
    assert_eq!(s, StatusCode::OK);
    // The parent's chain holds what its credential did; the child's what the child's did.
    assert_eq!(app.events_of(&t.a["tenant_id"]).await.iter().filter(|e| *e == "tenant.offboarding.cancelled.v1").count(), 2);
    assert_eq!(app.events_of(&child_id).await.iter().filter(|e| *e == "tenant.offboarding.updated.v1").count(), 1);
}
db_test!(a_parent_undoes_its_childs_offboarding_and_the_child_cannot);
