//! sdk-feature-flags: flags, rollouts, kill switch and evaluation (kill
//! switch first, then rollouts, the tenant's before the platform's, by
//! priority, then the default), Unleash's buckets, and the compiled flags'
//! cache dropped by every write, on this replica and the others.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

async fn create_flag(app: &TestApp, token: &str, body: Value) -> Value {
    let (s, flag) = app.post("/api/feature-flags", Some(token), body).await;
    assert_eq!(s, StatusCode::CREATED, "{flag}");
    flag["data"].clone()
}

async fn rollout(app: &TestApp, token: &str, key: &str, body: Value) -> (StatusCode, Value) {
    app.post(&format!("/api/feature-flags/{key}/rollouts"), Some(token), body).await
}

/// (resolved_value, matched_rollout_id, kill_switch_engaged, reason) of an
/// evaluation that must succeed.
async fn evaluate(app: &TestApp, token: &str, key: &str, context: Value) -> (Value, Value, Value, Value) {
    let (s, e) = app.post(&format!("/api/feature-flags/{key}/evaluate"), Some(token), context).await;
    assert_eq!(s, StatusCode::OK, "{e}");
    let d = &e["data"];
    assert_eq!(d["flag_key"], key);
    (d["resolved_value"].clone(), d["matched_rollout_id"].clone(), d["kill_switch_engaged"].clone(), d["reason"].clone())
}

async fn flags_evaluate_kill_switch_first_then_rollouts_by_priority_then_the_default(app: TestApp) {
    let t = app.two_tenants("ff").await;
    let a = t.a_token.as_str();
    let flag = create_flag(&app, a, json!({ "flag_key": "new-checkout", "description": "the new checkout", "default_value": "old", "off_value": "off" })).await;
    assert_eq!(
        (flag["flag_key"].as_str(), flag["layer"].as_str(), flag["kill_switch_engaged"].clone(), flag["default_value"].clone()),
        (Some("new-checkout"), Some("tenant"), json!(false), json!("old"))
    );
    let ctx = json!({ "persona_id": "p-1", "bu_id": "bu-north", "attributes": { "plan": "pro", "seats": 40 } });
    // No rollout yet: the default.
    assert_eq!(evaluate(&app, a, "new-checkout", ctx.clone()).await, (json!("old"), Value::Null, json!(false), json!("default")));

    // A write is seen by the very next evaluation (the cache was filled above).
    let (s, wide) = rollout(&app, a, "new-checkout", json!({ "priority": 20, "value": "wide" })).await;
    assert_eq!(s, StatusCode::CREATED, "{wide}");
    let wide_id = wide["data"]["rollout_id"].clone();
    assert_eq!(
        (wide["data"]["percentage"].as_i64(), wide["data"]["stickiness"].as_str(), wide["data"]["group_id"].as_str(), wide["data"]["active"].clone()),
        (Some(100), Some("persona_id"), Some("new-checkout"), json!(true))
    );
    assert_eq!(evaluate(&app, a, "new-checkout", ctx.clone()).await, (json!("wide"), wide_id.clone(), json!(false), json!("rollout")));

    // A lower priority number wins when its predicate matches.
    let predicate = json!([
        { "context_name": "bu_id", "operator": "in", "values": ["bu-north", "bu-south"] },
        { "context_name": "attributes.seats", "operator": "num_gte", "value": 25 },
        { "context_name": "attributes.plan", "operator": "in", "values": ["PRO"], "case_insensitive": true },
    ]);
    let (s, narrow) = rollout(&app, a, "new-checkout", json!({ "priority": 10, "predicate": predicate, "value": { "variant": "big" } })).await;
    assert_eq!(s, StatusCode::CREATED, "{narrow}");
    let narrow_id = narrow["data"]["rollout_id"].clone();
    assert_eq!(evaluate(&app, a, "new-checkout", ctx.clone()).await.1, narrow_id);
    assert_eq!(evaluate(&app, a, "new-checkout", ctx.clone()).await.0, json!({ "variant": "big" }));
    let small = json!({ "persona_id": "p-1", "bu_id": "bu-north", "attributes": { "plan": "pro", "seats": 3 } });
    assert_eq!(evaluate(&app, a, "new-checkout", small.clone()).await.1, wide_id, "the predicate fails: the next rollout");
    // Deactivated, a rollout no longer counts; changing it answers 200.
    let (s, off) = rollout(&app, a, "new-checkout", json!({ "rollout_id": narrow_id, "priority": 10, "predicate": predicate, "active": false })).await;
    assert_eq!((s, off["data"]["active"].clone(), off["data"]["rollout_id"].clone()), (StatusCode::OK, json!(false), narrow_id.clone()), "{off}");
    assert_eq!(evaluate(&app, a, "new-checkout", ctx.clone()).await.1, wide_id);

    // The kill switch comes first, whatever matches.
    let (s, killed) = app.post("/api/feature-flags/new-checkout/kill-switch", Some(a), json!({ "engaged": true, "reason": "incident 42" })).await;
    assert_eq!(
        (s, killed["data"]["kill_switch_engaged"].clone(), killed["data"]["kill_switch_reason"].as_str()),
        (StatusCode::OK, json!(true), Some("incident 42"))
    );
    assert_eq!(evaluate(&app, a, "new-checkout", ctx.clone()).await, (json!("off"), Value::Null, json!(true), json!("kill_switch")));
    // Engaging it again changes nothing and records nothing.
    let (s, again) = app.post("/api/feature-flags/new-checkout/kill-switch", Some(a), json!({ "engaged": true })).await;
    assert_eq!((s, again["data"]["kill_switch_reason"].as_str()), (StatusCode::OK, Some("incident 42")));
    let (s, _) = app.post("/api/feature-flags/new-checkout/kill-switch", Some(a), json!({ "engaged": false })).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(evaluate(&app, a, "new-checkout", ctx.clone()).await.1, wide_id);

    // The flag reads back with its rollouts, lowest priority first.
    let (s, read) = app.get("/api/feature-flags/new-checkout", Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{read}");
    let ids: Vec<&Value> = read["data"]["rollouts"].as_array().unwrap().iter().map(|r| &r["rollout_id"]).collect();
    assert_eq!(ids, vec![&narrow_id, &wide_id]);
    let stored = json!([
        { "context_name": "bu_id", "operator": "in", "values": ["bu-north", "bu-south"], "inverted": false, "case_insensitive": false },
        { "context_name": "attributes.seats", "operator": "num_gte", "value": 25.0, "inverted": false, "case_insensitive": false },
        { "context_name": "attributes.plan", "operator": "in", "values": ["PRO"], "inverted": false, "case_insensitive": true },
    ]);
    assert_eq!(read["data"]["rollouts"][0]["predicate"], stored);

    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |e: &str| events.iter().filter(|x| *x == e).count();
    assert_eq!(
        (
            count("feature-flag.flag.created.v1"),
            count("feature-flag.rollout.changed.v1"),
            count("feature-flag.kill_switch.engaged.v1"),
            count("feature-flag.kill_switch.released.v1")
        ),
        (1, 3, 1, 1)
    );
}
db_test!(flags_evaluate_kill_switch_first_then_rollouts_by_priority_then_the_default);

async fn percentage_rollouts_bucket_users_as_unleash_does(app: TestApp) {
    let t = app.two_tenants("ffb").await;
    let a = t.a_token.as_str();
    create_flag(&app, a, json!({ "flag_key": "bucketed" })).await;
    // Unleash's clients agree that "123" in group "gr1" is in bucket 73.
    let (s, r73) = rollout(&app, a, "bucketed", json!({ "priority": 1, "percentage": 73, "group_id": "gr1", "value": "in-73" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r73}");
    let (_, r72) = rollout(&app, a, "bucketed", json!({ "priority": 0, "percentage": 72, "group_id": "gr1", "value": "in-72" })).await;
    let user = json!({ "persona_id": "123" });
    assert_eq!(evaluate(&app, a, "bucketed", user.clone()).await.1, r73["data"]["rollout_id"], "bucket 73 is not within 72%");
    // "999" in group "groupX" is in bucket 25, stuck on an attribute.
    let by_account = json!({
        "rollout_id": r72["data"]["rollout_id"], "priority": 0, "percentage": 25, "group_id": "groupX", "stickiness": "attributes.account", "value": "account-25",
    });
    let (_, r25) = rollout(&app, a, "bucketed", by_account).await;
    assert_eq!(r25["data"]["stickiness"], "attributes.account", "{r25}");
    assert_eq!(evaluate(&app, a, "bucketed", json!({ "persona_id": "123", "attributes": { "account": "999" } })).await.0, json!("account-25"));
    // Without the stickiness value the rollout admits nobody.
    assert_eq!(evaluate(&app, a, "bucketed", user.clone()).await.0, json!("in-73"));
    // The same user always lands in the same bucket.
    for _ in 0..3 {
        assert_eq!(evaluate(&app, a, "bucketed", user.clone()).await.0, json!("in-73"));
    }
    // At 0% nobody is admitted.
    let (s, _) = rollout(&app, a, "bucketed", json!({ "rollout_id": r73["data"]["rollout_id"], "priority": 1, "percentage": 0, "group_id": "gr1" })).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(evaluate(&app, a, "bucketed", user).await, (json!(false), Value::Null, json!(false), json!("default")));
}
db_test!(percentage_rollouts_bucket_users_as_unleash_does);

async fn the_tenants_layer_comes_before_the_platforms(app: TestApp) {
    let t = app.two_tenants("ffp").await;
    let a = t.a_token.as_str();
    // Platform flags are the operator's (no tenant route writes them).
    let db = app.state().db.writer();
    let now = "2026-01-01T00:00:00.000000Z";
    sqlx::query(
        "INSERT INTO feature_flag (flag_id, tenant_id, flag_key, default_value, off_value, kill_switch_engaged, created_by, created_at, updated_at) \
         VALUES ('pf-1', NULL, 'dark-mode', '\"platform-default\"', 'false', 0, 'operator', $1, $1)",
    )
    .bind(now)
    .execute(db)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO feature_flag_rollout (rollout_id, flag_id, tenant_id, priority, predicate, percentage, stickiness, group_id, value, active, created_by, created_at, updated_at) \
         VALUES ('pr-1', 'pf-1', NULL, 0, '[]', 100, 'persona_id', 'dark-mode', '\"platform-rollout\"', 1, 'operator', $1, $1)",
    )
    .bind(now)
    .execute(db)
    .await
    .unwrap();
    app.state().invalidate(hub_kernel::state::Invalidation::FeatureFlags(None)).await;

    let (s, e) = app.post("/api/feature-flags/dark-mode/evaluate", Some(a), json!({})).await;
    assert_eq!(s, StatusCode::OK, "{e}");
    assert_eq!(
        (e["data"]["resolved_value"].clone(), e["data"]["matched_rollout_id"].as_str(), e["data"]["layer"].as_str()),
        (json!("platform-rollout"), Some("pr-1"), Some("platform"))
    );
    let (s, read) = app.get("/api/feature-flags/dark-mode", Some(a)).await;
    assert_eq!((s, read["data"]["layer"].as_str()), (StatusCode::OK, Some("platform")));
    // A tenant cannot change the platform's flag.
    assert_error(rollout(&app, a, "dark-mode", json!({})).await, 404, "NotFound");
    assert_error(app.post("/api/feature-flags/dark-mode/kill-switch", Some(a), json!({ "engaged": true })).await, 404, "NotFound");

    // The tenant's own flag of the key is its layer, evaluated first.
    create_flag(&app, a, json!({ "flag_key": "dark-mode", "default_value": "tenant-default" })).await;
    let only_bu = json!({ "predicate": [{ "context_name": "bu_id", "operator": "in", "values": ["bu-1"] }], "value": "tenant-rollout" });
    let (_, mine) = rollout(&app, a, "dark-mode", only_bu).await;
    let (v, r, _, _) = evaluate(&app, a, "dark-mode", json!({ "bu_id": "bu-1" })).await;
    assert_eq!((v, r), (json!("tenant-rollout"), mine["data"]["rollout_id"].clone()), "tenant-specific first");
    let (v, r, _, _) = evaluate(&app, a, "dark-mode", json!({ "bu_id": "bu-2" })).await;
    assert_eq!((v, r.as_str()), (json!("platform-rollout"), Some("pr-1")), "then the platform's rollouts");
    // The platform's kill switch stops the flag for every tenant.
    sqlx::query("UPDATE feature_flag SET kill_switch_engaged = 1 WHERE flag_id = 'pf-1'").execute(db).await.unwrap();
    app.state().invalidate(hub_kernel::state::Invalidation::FeatureFlags(None)).await;
    let (v, _, killed, _) = evaluate(&app, a, "dark-mode", json!({ "bu_id": "bu-1" })).await;
    assert_eq!((v, killed), (json!(false), json!(true)));
    // Another tenant sees the platform's flag, never tenant A's.
    let (s, e) = app.post("/api/feature-flags/dark-mode/evaluate", Some(&t.b_token), json!({ "bu_id": "bu-1" })).await;
    assert_eq!((s, e["data"]["layer"].as_str()), (StatusCode::OK, Some("platform")));
}
db_test!(the_tenants_layer_comes_before_the_platforms);

async fn flags_refuse_bad_input_other_tenants_and_keys_without_the_scope(app: TestApp) {
    let t = app.two_tenants("ffx").await;
    let a = t.a_token.as_str();
    let b = assert_error(app.post("/api/feature-flags", Some(a), json!({ "description": "d".repeat(1001) })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["flag_key is required", "description must be at most 1000 characters"]));
    let b = assert_error(app.post("/api/feature-flags", Some(a), json!({ "flag_key": "no spaces" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["flag_key must be 1 to 128 letters, digits, '.', '_' or '-'"]));
    create_flag(&app, a, json!({ "flag_key": "f1" })).await;
    let b = assert_error(app.post("/api/feature-flags", Some(a), json!({ "flag_key": "f1" })).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the flag f1 exists"]));

    // Every problem of a rollout's schema in one answer.
    let bad = json!({
        "rollout_id": "nope", "priority": -1, "percentage": 101, "stickiness": "email", "active": "yes", "group_id": "g".repeat(129),
        "predicate": [{ "context_name": "region", "operator": "like", "inverted": 1 }, { "context_name": "persona_id", "operator": "num_gt" }, 7],
    });
    let b = assert_error(rollout(&app, a, "f1", bad).await, 400, "ValidationError");
    assert_eq!(
        b["details"],
        json!([
            "rollout_id must be a UUID",
            "priority must be an integer from 0 to 1000000",
            "predicate[0].operator must be one of: in, not_in, str_contains, str_starts_with, str_ends_with, num_eq, num_gt, num_gte, num_lt, num_lte",
            "predicate[0].inverted must be true or false",
            "predicate[2] must be a JSON object",
            "percentage must be an integer from 0 to 100",
            "group_id must be at most 128 characters",
            "active must be true or false",
        ])
    );
    // Then, once it matches its schema, every problem the schema cannot say.
    let bad = json!({
        "stickiness": "email",
        "predicate": [{ "context_name": "region", "operator": "in", "values": ["x"] }, { "context_name": "persona_id", "operator": "num_gt" }],
    });
    let b = assert_error(rollout(&app, a, "f1", bad).await, 400, "ValidationError");
    assert_eq!(
        b["details"],
        json!([
            "predicate[0].context_name must be tenant_id, persona_id, bu_id or attributes.<name> (a name of 1 to 128 letters, digits, '.', '_' or '-')",
            "predicate[1].value must be a number",
            "stickiness must be tenant_id, persona_id, bu_id or attributes.<name> (a name of 1 to 128 letters, digits, '.', '_' or '-')",
        ])
    );
    let b = assert_error(
        rollout(
            &app,
            a,
            "f1",
            json!({ "predicate": (0..51).map(|_| json!({ "context_name": "bu_id", "operator": "in", "values": ["x"] })).collect::<Vec<_>>() }),
        )
        .await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["predicate must hold at most 50 items"]));
    let b = assert_error(
        rollout(&app, a, "f1", json!({ "predicate": [{ "context_name": "bu_id", "operator": "in", "values": [] }] })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["predicate[0].values must be an array of 1 to 1000 strings"]));
    let b = assert_error(app.post("/api/feature-flags/f1/kill-switch", Some(a), json!({ "engaged": "yes" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["engaged must be true or false"]));
    let b = assert_error(app.post("/api/feature-flags/f1/kill-switch", Some(a), json!({})).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["engaged is required"]));
    let b = assert_error(
        app.post("/api/feature-flags/f1/evaluate", Some(a), json!({ "attributes": { "tags": ["x"] }, "bu_id": "b".repeat(300) })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["bu_id must be at most 256 characters"]));
    let b = assert_error(app.post("/api/feature-flags/f1/evaluate", Some(a), json!({ "attributes": { "tags": ["x"] } })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["attributes.tags must be a string, number or boolean"]));
    let b = assert_error(app.post("/api/feature-flags/f1/evaluate", Some(a), json!({ "attributes": ["x"] })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["attributes must be a JSON object"]));
    // A context names the caller's tenant or none.
    assert_error(app.post("/api/feature-flags/f1/evaluate", Some(a), json!({ "tenant_id": t.b["tenant_id"] })).await, 403, "TenantMismatch");
    let (s, _) = app.post("/api/feature-flags/f1/evaluate", Some(a), json!({ "tenant_id": t.a["tenant_id"] })).await;
    assert_eq!(s, StatusCode::OK);
    // Unknown flags, unknown rollouts.
    assert_error(app.post("/api/feature-flags/none/evaluate", Some(a), json!({})).await, 404, "NotFound");
    assert_error(app.post("/api/feature-flags/bad%20key/evaluate", Some(a), json!({})).await, 404, "NotFound");
    assert_error(rollout(&app, a, "f1", json!({ "rollout_id": uuid::Uuid::now_v7().to_string() })).await, 404, "NotFound");

    // Another tenant's flag is not there, and not changed.
    let (_, r) = rollout(&app, a, "f1", json!({})).await;
    for token in [t.b_token.as_str(), t.b_key.as_str()] {
        assert_error(app.get("/api/feature-flags/f1", Some(token)).await, 404, "NotFound");
        assert_error(app.post("/api/feature-flags/f1/evaluate", Some(token), json!({})).await, 404, "NotFound");
        assert_error(rollout(&app, token, "f1", json!({ "rollout_id": r["data"]["rollout_id"] })).await, 404, "NotFound");
        assert_error(app.post("/api/feature-flags/f1/kill-switch", Some(token), json!({ "engaged": true })).await, 404, "NotFound");
    }
    assert_eq!(evaluate(&app, a, "f1", json!({})).await.2, json!(false));
    // B may have a flag of the same key: its own.
    create_flag(&app, &t.b_token, json!({ "flag_key": "f1", "default_value": "b's" })).await;
    assert_eq!(evaluate(&app, &t.b_token, "f1", json!({})).await.0, json!("b's"));
    assert_eq!(evaluate(&app, a, "f1", json!({})).await.0, json!(true));

    // Scopes: evaluation is a POST, so it needs the write scope; reading a
    // flag needs the read scope.
    assert_scoped(
        &app,
        a,
        json!(["feature-flag.feature-flag.read"]),
        &[
            (reqwest::Method::POST, "/api/feature-flags/f1/evaluate".into(), "feature-flag.feature-flag.write"),
            (reqwest::Method::POST, "/api/feature-flags".into(), "feature-flag.feature-flag.write"),
            (reqwest::Method::POST, "/api/feature-flags/f1/kill-switch".into(), "feature-flag.feature-flag.write"),
        ],
    )
    .await;
    assert_scoped(
        &app,
        a,
        json!(["feature-flag.feature-flag.write"]),
        &[(reqwest::Method::GET, "/api/feature-flags/f1".into(), "feature-flag.feature-flag.read")],
    )
    .await;
    let (_, key) = app.key(a, "ff-eval", json!(["feature-flag.feature-flag.write"])).await;
    assert_eq!(evaluate(&app, key["api_key"].as_str().unwrap(), "f1", json!({})).await.0, json!(true));
}
db_test!(flags_refuse_bad_input_other_tenants_and_keys_without_the_scope);

/// Several replicas on one PostgreSQL database: a write through one is
/// seen by the next evaluation on another, whose cache held the flag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flag_written_on_one_replica_is_evaluated_anew_on_the_others() {
    let Some(a) = TestApp::spawn_postgres().await else { return };
    let b = a.replica().await;
    let t = a.signup("ffr@example.com", "ffr").await;
    let owner = t["token"].as_str().unwrap();
    create_flag(&a, owner, json!({ "flag_key": "everywhere", "default_value": "before" })).await;
    assert_eq!(evaluate(&b, owner, "everywhere", json!({})).await.0, json!("before"), "B compiles and caches the flag");
    let (s, r) = rollout(&a, owner, "everywhere", json!({ "value": "after" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    let start = Instant::now();
    while evaluate(&b, owner, "everywhere", json!({})).await.0 != json!("after") {
        assert!(start.elapsed() < Duration::from_secs(2), "replica B still answers the cached flag");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    a.post("/api/feature-flags/everywhere/kill-switch", Some(owner), json!({ "engaged": true })).await;
    let start = Instant::now();
    while evaluate(&b, owner, "everywhere", json!({})).await.2 != json!(true) {
        assert!(start.elapsed() < Duration::from_secs(2), "replica B does not see the kill switch");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn flags_are_listed_changed_and_deleted(app: TestApp) {
    let t = app.two_tenants("ffl").await;
    let a = t.a_token.as_str();
    // A platform flag (the operator's), seen in every tenant's list.
    sqlx::query(
        "INSERT INTO feature_flag (flag_id, tenant_id, flag_key, default_value, off_value, kill_switch_engaged, created_by, created_at, updated_at) \
         VALUES ('pf-l', NULL, 'shared', '\"platform\"', 'false', 0, 'operator', '2026-01-01T00:00:00.000000Z', '2026-01-01T00:00:00.000000Z')",
    )
    .execute(app.state().db.writer())
    .await
    .unwrap();
    app.state().invalidate(hub_kernel::state::Invalidation::FeatureFlags(None)).await;
    create_flag(&app, a, json!({ "flag_key": "first", "default_value": 1 })).await;
    create_flag(&app, a, json!({ "flag_key": "shared", "description": "mine", "default_value": "tenant", "off_value": "off" })).await;
    let keys = |v: &Value| {
        v["data"].as_array().unwrap().iter().map(|f| format!("{}/{}", f["layer"].as_str().unwrap(), f["flag_key"].as_str().unwrap())).collect::<Vec<_>>()
    };
    let (s, all) = app.get("/api/feature-flags", Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{all}");
    assert_eq!((keys(&all), all["total"].as_i64()), (vec!["tenant/shared".to_string(), "tenant/first".into(), "platform/shared".into()], Some(3)));
    let (_, own) = app.get("/api/feature-flags?layer=tenant&limit=1&offset=1", Some(a)).await;
    assert_eq!((keys(&own), own["total"].as_i64()), (vec!["tenant/first".to_string()], Some(2)));
    let (_, platform) = app.get("/api/feature-flags?layer=platform", Some(a)).await;
    assert_eq!((keys(&platform), platform["total"].as_i64()), (vec!["platform/shared".to_string()], Some(1)));
    // Another tenant lists the platform's flag only.
    let (_, theirs) = app.get("/api/feature-flags", Some(&t.b_token)).await;
    assert_eq!(keys(&theirs), vec!["platform/shared".to_string()]);
    let body = assert_error(app.get("/api/feature-flags?layer=mine", Some(a)).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["layer must be one of: tenant, platform"]));

    // A change keeps what it does not name, and evaluations see it at once.
    assert_eq!(evaluate(&app, a, "shared", json!({})).await.0, json!("tenant"));
    let (s, changed) = app.call(reqwest::Method::PATCH, "/api/feature-flags/shared", Some(a), Some(json!({ "default_value": { "v": 2 } }))).await;
    assert_eq!(s, StatusCode::OK, "{changed}");
    assert_eq!((changed["data"]["default_value"].clone(), changed["data"]["off_value"].clone()), (json!({ "v": 2 }), json!("off")));
    assert_eq!(changed["data"]["description"], "mine");
    assert_eq!(evaluate(&app, a, "shared", json!({})).await.0, json!({ "v": 2 }));
    let (s, changed) = app.call(reqwest::Method::PATCH, "/api/feature-flags/shared", Some(a), Some(json!({ "description": "now", "off_value": false }))).await;
    assert_eq!(s, StatusCode::OK, "{changed}");
    assert_eq!((changed["data"]["description"].as_str(), changed["data"]["off_value"].clone()), (Some("now"), json!(false)));
    let (_, read) = app.get("/api/feature-flags/shared", Some(a)).await;
    assert_eq!(read["data"]["default_value"], json!({ "v": 2 }));
    let body = assert_error(app.call(reqwest::Method::PATCH, "/api/feature-flags/shared", Some(a), Some(json!({}))).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["give at least one of description, default_value, off_value"]));
    let big = "x".repeat(70 * 1024);
    let body =
        assert_error(app.call(reqwest::Method::PATCH, "/api/feature-flags/shared", Some(a), Some(json!({ "off_value": big }))).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["off_value must be at most 64 KiB of JSON"]));
    let body =
        assert_error(app.call(reqwest::Method::PATCH, "/api/feature-flags/shared", Some(a), Some(json!({ "description": 3 }))).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["description must be a string"]));
    // Another tenant's flag, a platform flag and an unknown key are not found.
    for (token, key) in [(t.b_token.as_str(), "first"), (t.b_token.as_str(), "shared"), (a, "none"), (a, "bad key!")] {
        assert_error(
            app.call(reqwest::Method::PATCH, &format!("/api/feature-flags/{key}"), Some(token), Some(json!({ "description": "x" }))).await,
            404,
            "NotFound",
        );
        assert_error(app.call(reqwest::Method::DELETE, &format!("/api/feature-flags/{key}"), Some(token), None).await, 404, "NotFound");
    }

    // Deleting the tenant's flag (rollouts included) uncovers the platform's.
    let (s, _) = rollout(&app, a, "shared", json!({ "value": "rolled" })).await;
    assert_eq!(s, StatusCode::CREATED);
    assert_eq!(evaluate(&app, a, "shared", json!({})).await.0, json!("rolled"));
    let (s, deleted) = app.call(reqwest::Method::DELETE, "/api/feature-flags/shared", Some(a), None).await;
    assert_eq!(s, StatusCode::OK, "{deleted}");
    assert_eq!((deleted["data"]["flag_key"].as_str(), deleted["data"]["deleted"].clone()), (Some("shared"), json!(true)));
    assert_eq!(evaluate(&app, a, "shared", json!({})).await, (json!("platform"), Value::Null, json!(false), json!("default")));
    assert_error(app.call(reqwest::Method::DELETE, "/api/feature-flags/shared", Some(a), None).await, 404, "NotFound");
    let (s, _) = app.call(reqwest::Method::DELETE, "/api/feature-flags/first", Some(a), None).await;
    assert_eq!(s, StatusCode::OK);
    assert_error(app.post("/api/feature-flags/first/evaluate", Some(a), json!({})).await, 404, "NotFound");
    let (_, left) = app.get("/api/feature-flags", Some(a)).await;
    assert_eq!((keys(&left), left["total"].as_i64()), (vec!["platform/shared".to_string()], Some(1)));
    // The key is free again.
    create_flag(&app, a, json!({ "flag_key": "first" })).await;

    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |e: &str| events.iter().filter(|x| *x == e).count();
    assert_eq!((count("feature-flag.flag.updated.v1"), count("feature-flag.flag.deleted.v1")), (2, 2));
}
db_test!(flags_are_listed_changed_and_deleted);

/// (resolved_value, layer, reason) of an evaluation by `token`, which
/// must succeed.
async fn decided(app: &TestApp, token: &str, key: &str, context: Value) -> (Value, Value, Value) {
    let (s, e) = app.post(&format!("/api/feature-flags/{key}/evaluate"), Some(token), context).await;
    assert_eq!(s, StatusCode::OK, "{e}");
    (e["data"]["resolved_value"].clone(), e["data"]["layer"].clone(), e["data"]["reason"].clone())
}

async fn the_operator_writes_the_platform_layer_every_tenant_evaluates_after_its_own(app: TestApp) {
    let t = app.two_tenants("ffop").await;
    let (a, b) = (t.a_token.as_str(), t.b_token.as_str());
    let op = |method: Method, path: &str, body: Option<Value>| app.op(method, path.to_string(), body);

    // A platform flag: the tenant route's body, `layer` platform.
    let body = json!({ "flag_key": "dark-mode", "description": "the dark theme", "default_value": "platform-default", "off_value": "platform-off" });
    let (s, flag) = op(Method::POST, "/admin/feature-flags", Some(body.clone())).await;
    assert_eq!(s, StatusCode::CREATED, "{flag}");
    assert_eq!(
        (flag["data"]["flag_key"].as_str(), flag["data"]["layer"].as_str(), flag["data"]["kill_switch_engaged"].clone(), flag["data"]["off_value"].clone()),
        (Some("dark-mode"), Some("platform"), json!(false), json!("platform-off"))
    );
    let flag_id = flag["data"]["flag_id"].clone();
    assert_error(op(Method::POST, "/admin/feature-flags", Some(body)).await, 409, "Conflict");
    // Every tenant evaluates it: the platform layer answers.
    assert_eq!(decided(&app, a, "dark-mode", json!({})).await, (json!("platform-default"), json!("platform"), json!("default")));
    assert_eq!(decided(&app, b, "dark-mode", json!({})).await, (json!("platform-default"), json!("platform"), json!("default")));
    // A rollout of the platform flag is seen at once (the cached flags of
    // every tenant were dropped).
    let (s, platform_rollout) = op(Method::POST, "/admin/feature-flags/dark-mode/rollouts", Some(json!({ "priority": 0, "value": "platform-rollout" }))).await;
    assert_eq!(s, StatusCode::CREATED, "{platform_rollout}");
    assert_eq!((platform_rollout["data"]["flag_id"].clone(), platform_rollout["data"]["percentage"].as_i64()), (flag_id.clone(), Some(100)));
    assert_eq!(decided(&app, b, "dark-mode", json!({})).await, (json!("platform-rollout"), json!("platform"), json!("rollout")));
    let (s, read) = op(Method::GET, "/admin/feature-flags/dark-mode", None).await;
    assert_eq!((s, read["data"]["rollouts"][0]["rollout_id"].clone()), (StatusCode::OK, platform_rollout["data"]["rollout_id"].clone()), "{read}");

    // A tenant's writes never touch a platform row.
    assert_error(app.call(Method::PATCH, "/api/feature-flags/dark-mode", Some(a), Some(json!({ "default_value": 1 }))).await, 404, "NotFound");
    assert_error(app.call(Method::DELETE, "/api/feature-flags/dark-mode", Some(a), None).await, 404, "NotFound");
    assert_error(rollout(&app, a, "dark-mode", json!({})).await, 404, "NotFound");
    assert_error(app.post("/api/feature-flags/dark-mode/kill-switch", Some(a), json!({ "engaged": true })).await, 404, "NotFound");
    let (_, read) = op(Method::GET, "/admin/feature-flags/dark-mode", None).await;
    assert_eq!((read["data"]["default_value"].clone(), read["data"]["rollouts"].as_array().map(Vec::len)), (json!("platform-default"), Some(1)));

    // The tenant's own flag of the key: its layer first ("tenant-specific
    // first"), then the platform's rollouts.
    create_flag(&app, a, json!({ "flag_key": "dark-mode", "default_value": "tenant-default" })).await;
    let only_bu = json!({ "predicate": [{ "context_name": "bu_id", "operator": "in", "values": ["bu-1"] }], "value": "tenant-rollout" });
    assert_eq!(rollout(&app, a, "dark-mode", only_bu).await.0, StatusCode::CREATED);
    assert_eq!(decided(&app, a, "dark-mode", json!({ "bu_id": "bu-1" })).await, (json!("tenant-rollout"), json!("tenant"), json!("rollout")));
    assert_eq!(decided(&app, a, "dark-mode", json!({ "bu_id": "bu-2" })).await, (json!("platform-rollout"), json!("platform"), json!("rollout")));
    assert_eq!(decided(&app, b, "dark-mode", json!({ "bu_id": "bu-1" })).await, (json!("platform-rollout"), json!("platform"), json!("rollout")));
    // The operator lists and reads the platform's layer only.
    create_flag(&app, a, json!({ "flag_key": "a-only" })).await;
    let (s, list) = op(Method::GET, "/admin/feature-flags?limit=10", None).await;
    assert_eq!(
        (s, list["total"].as_i64(), list["data"][0]["flag_id"].clone(), list["data"][0]["layer"].as_str()),
        (StatusCode::OK, Some(1), flag_id.clone(), Some("platform")),
        "{list}"
    );
    assert_error(op(Method::GET, "/admin/feature-flags/a-only", None).await, 404, "NotFound");
    let (_, seen) = app.get("/api/feature-flags?layer=platform", Some(a)).await;
    assert_eq!((seen["total"].as_i64(), seen["data"][0]["flag_id"].clone()), (Some(1), flag_id.clone()));

    // The operator changes what PATCH may change, as the tenant does.
    let (s, changed) = op(Method::PATCH, "/admin/feature-flags/dark-mode", Some(json!({ "off_value": "stopped" }))).await;
    assert_eq!(
        (s, changed["data"]["off_value"].clone(), changed["data"]["default_value"].clone()),
        (StatusCode::OK, json!("stopped"), json!("platform-default"))
    );
    let bad = assert_error(op(Method::PATCH, "/admin/feature-flags/dark-mode", Some(json!({}))).await, 400, "ValidationError");
    assert_eq!(bad["details"], json!(["give at least one of description, default_value, off_value"]));
    assert_error(op(Method::PATCH, "/admin/feature-flags/a-only", Some(json!({ "off_value": 1 }))).await, 404, "NotFound");

    // The platform's kill switch stops the flag for every tenant, the
    // tenant's own layer included; a repeat changes nothing.
    let kill = |engaged: bool| op(Method::POST, "/admin/feature-flags/dark-mode/kill-switch", Some(json!({ "engaged": engaged, "reason": "incident" })));
    let (s, killed) = kill(true).await;
    assert_eq!(
        (s, killed["data"]["kill_switch_engaged"].clone(), killed["data"]["kill_switch_reason"].as_str()),
        (StatusCode::OK, json!(true), Some("incident"))
    );
    assert_eq!(kill(true).await.1["data"], killed["data"]);
    assert_eq!(decided(&app, a, "dark-mode", json!({ "bu_id": "bu-1" })).await, (json!("stopped"), json!("platform"), json!("kill_switch")));
    assert_eq!(decided(&app, b, "dark-mode", json!({})).await, (json!("stopped"), json!("platform"), json!("kill_switch")));
    assert_eq!(kill(false).await.0, StatusCode::OK);
    assert_eq!(decided(&app, a, "dark-mode", json!({ "bu_id": "bu-1" })).await, (json!("tenant-rollout"), json!("tenant"), json!("rollout")));

    // Deleted: the tenant with its own flag evaluates it alone, the other
    // finds no flag.
    let (s, gone) = op(Method::DELETE, "/admin/feature-flags/dark-mode", None).await;
    assert_eq!((s, gone["data"].clone()), (StatusCode::OK, json!({ "flag_id": flag_id, "flag_key": "dark-mode", "deleted": true })));
    assert_error(op(Method::DELETE, "/admin/feature-flags/dark-mode", None).await, 404, "NotFound");
    assert_eq!(decided(&app, a, "dark-mode", json!({ "bu_id": "bu-2" })).await, (json!("tenant-default"), json!("tenant"), json!("default")));
    assert_error(app.post("/api/feature-flags/dark-mode/evaluate", Some(b), json!({})).await, 404, "NotFound");

    // The tenant route's rules; a tenant's credential is no operator's.
    let bad = assert_error(
        op(Method::POST, "/admin/feature-flags", Some(json!({ "flag_key": "bad key", "default_value": "x".repeat(70_000) }))).await,
        400,
        "ValidationError",
    );
    assert_eq!(bad["details"], json!(["flag_key must be 1 to 128 letters, digits, '.', '_' or '-'", "default_value must be at most 64 KiB of JSON"]));
    for (method, path) in [(Method::POST, "/admin/feature-flags"), (Method::GET, "/admin/feature-flags"), (Method::DELETE, "/admin/feature-flags/a-only")] {
        let body = (method == Method::POST).then(|| json!({ "flag_key": "from-a-tenant" }));
        let refused = assert_error(app.call(method, path, Some(a), body).await, 401, "Unauthorized");
        assert_eq!(refused["details"], json!(["admin token required"]));
    }
    let (_, mine) = app.get("/api/feature-flags/a-only", Some(a)).await;
    assert_eq!(mine["data"]["layer"], "tenant");

    // Each write in the platform chain, the operator credential as actor;
    // no tenant's chain holds them.
    let platform: Vec<(String, String)> = app.platform_events().await.into_iter().filter(|(e, _)| e.starts_with("feature-flag.")).collect();
    let names: Vec<&str> = platform.iter().map(|(e, _)| e.as_str()).collect();
    assert_eq!(
        names,
        [
            "feature-flag.flag.created.v1",
            "feature-flag.rollout.changed.v1",
            "feature-flag.flag.updated.v1",
            "feature-flag.kill_switch.engaged.v1",
            "feature-flag.kill_switch.released.v1",
            "feature-flag.flag.deleted.v1"
        ]
    );
    assert!(platform.iter().all(|(_, who)| who == "break-glass"), "{platform:?}");
    assert!(app.events_of(&t.b["tenant_id"]).await.iter().all(|e| !e.starts_with("feature-flag.")));
}
db_test!(the_operator_writes_the_platform_layer_every_tenant_evaluates_after_its_own);

async fn a_tenant_reads_a_platform_flag_without_the_operators_targeting(app: TestApp) {
    let t = app.two_tenants("fftg").await;
    let a_id = t.a["tenant_id"].as_str().unwrap().to_string();
    let op = |method: Method, path: &str, body: Option<Value>| app.op(method, path.to_string(), body);
    let (s, flag) = op(Method::POST, "/admin/feature-flags", Some(json!({ "flag_key": "targeted", "default_value": "off" }))).await;
    assert_eq!(s, StatusCode::CREATED, "{flag}");
    let only_a = json!({ "predicate": [{ "context_name": "tenant_id", "operator": "in", "values": [a_id] }], "group_id": "pilot-a", "value": "on" });
    assert_eq!(op(Method::POST, "/admin/feature-flags/targeted/rollouts", Some(only_a)).await.0, StatusCode::CREATED);
    let (s, _) = op(Method::POST, "/admin/feature-flags/targeted/kill-switch", Some(json!({ "engaged": true, "reason": "pilot at tenant A broke" }))).await;
    assert_eq!(s, StatusCode::OK);
    // The operator reads its targeting.
    let (_, read) = op(Method::GET, "/admin/feature-flags/targeted", None).await;
    assert_eq!((read["data"]["rollouts"].as_array().map(Vec::len), read["data"]["kill_switch_reason"].as_str()), (Some(1), Some("pilot at tenant A broke")));
    let (_, list) = op(Method::GET, "/admin/feature-flags", None).await;
    assert_eq!(list["data"][0]["kill_switch_reason"].as_str(), Some("pilot at tenant A broke"));
    // Tenant B reads the flag, never tenant A's id, the rollout or the reason.
    let (s, seen) = app.get("/api/feature-flags/targeted", Some(&t.b_token)).await;
    assert_eq!(
        (
            s,
            seen["data"]["layer"].as_str(),
            seen["data"]["kill_switch_engaged"].clone(),
            seen["data"]["kill_switch_reason"].clone(),
            seen["data"]["rollouts"].clone()
        ),
        (StatusCode::OK, Some("platform"), json!(true), Value::Null, json!([])),
        "{seen}"
    );
    assert!(!seen.to_string().contains(&a_id) && !seen.to_string().contains("pilot"), "{seen}");
    let (s, listed) = app.get("/api/feature-flags?layer=platform", Some(&t.b_token)).await;
    assert_eq!((s, listed["total"].as_i64(), listed["data"][0]["kill_switch_reason"].clone()), (StatusCode::OK, Some(1), Value::Null), "{listed}");
    assert!(!listed.to_string().contains("pilot"), "{listed}");
    // A tenant's own flag shows its own reason and rollouts.
    create_flag(&app, &t.b_token, json!({ "flag_key": "mine" })).await;
    assert_eq!(rollout(&app, &t.b_token, "mine", json!({ "value": 1 })).await.0, StatusCode::CREATED);
    let (s, _) = app.post("/api/feature-flags/mine/kill-switch", Some(&t.b_token), json!({ "engaged": true, "reason": "ours" })).await;
    assert_eq!(s, StatusCode::OK);
    let (_, own) = app.get("/api/feature-flags/mine", Some(&t.b_token)).await;
    assert_eq!((own["data"]["kill_switch_reason"].as_str(), own["data"]["rollouts"].as_array().map(Vec::len)), (Some("ours"), Some(1)));
    let (_, listed) = app.get("/api/feature-flags?layer=tenant", Some(&t.b_token)).await;
    assert_eq!(listed["data"][0]["kill_switch_reason"].as_str(), Some("ours"));
}
db_test!(a_tenant_reads_a_platform_flag_without_the_operators_targeting);
