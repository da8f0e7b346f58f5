//! sdk-sla: policies with escalation rungs, clocks started and stopped, and
//! the at-risk list computed at the time of reading.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

fn minutes_ago(m: i64) -> String {
    (chrono::Utc::now() - chrono::TimeDelta::minutes(m)).to_rfc3339()
}

async fn sla_clocks_at_risk_show_the_rungs_fired_and_the_next(app: TestApp) {
    let t = app.two_tenants("sla").await;
    let a = t.a_token.as_str();
    let (s, p) = app.post("/api/sla/policies", Some(a), json!({ "name": "Support P1", "target_minutes": 60 })).await;
    assert_eq!(s, StatusCode::CREATED, "{p}");
    let policy = p["data"]["policy_id"].as_str().unwrap().to_string();
    assert_error(app.post("/api/sla/policies", Some(a), json!({ "name": "Support P1", "target_minutes": 5 })).await, 409, "Conflict");
    let b = assert_error(app.post("/api/sla/policies", Some(a), json!({ "target_minutes": 0 })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["name is required", "target_minutes must be an integer from 1 to 525600"]));
    let b = assert_error(app.post("/api/sla/policies", Some(a), json!({ "name": "x" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["target_minutes is required"]));

    let rung = |offset: i64, severity: &str| json!({ "offset_minutes": offset, "severity": severity, "notify_persona_id": t.a["persona_id"] });
    for (offset, severity) in [(0, "high"), (-30, "medium"), (30, "critical")] {
        let (s, r) = app.post(&format!("/api/sla/policies/{policy}/rungs"), Some(a), rung(offset, severity)).await;
        assert_eq!(s, StatusCode::CREATED, "{r}");
        assert_eq!((r["data"]["offset_minutes"].as_i64(), r["data"]["severity"].as_str()), (Some(offset), Some(severity)));
    }
    let b = assert_error(app.post(&format!("/api/sla/policies/{policy}/rungs"), Some(a), rung(0, "low")).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the policy has a rung at offset 0"]));
    let b = assert_error(app.post(&format!("/api/sla/policies/{policy}/rungs"), Some(a), json!({ "severity": "urgent" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["offset_minutes is required", "severity must be one of: low, medium, high, critical"]));
    let b = assert_error(
        app.post(
            &format!("/api/sla/policies/{policy}/rungs"),
            Some(a),
            json!({ "offset_minutes": 5, "severity": "low", "notify_persona_id": t.b["persona_id"] }),
        )
        .await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["notify_persona_id is not a persona of this tenant"]));
    assert_error(app.post(&format!("/api/sla/policies/{policy}/rungs"), Some(&t.b_token), rung(5, "low")).await, 404, "NotFound");
    assert_error(app.post(&format!("/api/sla/policies/{policy}/rungs"), Some(&t.b_token), json!({ "severity": "urgent" })).await, 404, "NotFound");
    let b = assert_error(app.post(&format!("/api/sla/policies/{policy}/rungs"), Some(a), rung(525_601, "low")).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["offset_minutes must be an integer from -525600 to 525600"]));
    let (s, g) = app.get(&format!("/api/sla/policies/{policy}"), Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{g}");
    let offsets: Vec<i64> = g["data"]["rungs"].as_array().unwrap().iter().map(|r| r["offset_minutes"].as_i64().unwrap()).collect();
    assert_eq!((g["data"]["target_minutes"].as_i64(), offsets), (Some(60), vec![-30, 0, 30]));

    // Due in 10 minutes: the -30 rung has fired. Overdue by 40: all three.
    // Just started: due in an hour, within the default 60 minutes only.
    let clock = |started: String, subject: &str| json!({ "policy_id": policy, "subject_ref": subject, "started_at": started });
    let (s, near) = app.post("/api/sla/clocks", Some(a), clock(minutes_ago(50), "request:near")).await;
    assert_eq!(s, StatusCode::CREATED, "{near}");
    assert_eq!((near["data"]["state"].as_str(), near["data"]["breached"].as_bool()), (Some("running"), Some(false)));
    let (_, late) = app.post("/api/sla/clocks", Some(a), clock(minutes_ago(100), "request:late")).await;
    let (_, fresh) = app.post("/api/sla/clocks", Some(a), json!({ "policy_id": policy, "subject_ref": "request:fresh" })).await;
    let started = chrono::DateTime::parse_from_rfc3339(fresh["data"]["started_at"].as_str().unwrap()).unwrap();
    let due = chrono::DateTime::parse_from_rfc3339(fresh["data"]["due_at"].as_str().unwrap()).unwrap();
    assert_eq!((due - started).num_minutes(), 60);
    let b = assert_error(app.post("/api/sla/clocks", Some(a), json!({ "policy_id": "p", "started_at": "soon" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["policy_id must be a UUID", "subject_ref is required", "started_at must be an RFC 3339 timestamp"]));
    let b = assert_error(
        app.post("/api/sla/clocks", Some(a), json!({ "policy_id": policy, "subject_ref": "x", "started_at": "2099-01-01T00:00:00Z" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["started_at must not be more than 5 minutes in the future"]));
    let b = assert_error(app.post("/api/sla/clocks", Some(&t.b_token), json!({ "policy_id": policy, "subject_ref": "x" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["policy_id is not a policy of this tenant"]));

    let (s, l) = app.get("/api/sla/clocks/at-risk", Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{l}");
    let subjects: Vec<&str> = l["data"].as_array().unwrap().iter().map(|c| c["subject_ref"].as_str().unwrap()).collect();
    assert_eq!((subjects, l["total"].as_i64()), (vec!["request:late", "request:near", "request:fresh"], Some(3)));
    let late_row = &l["data"][0];
    assert_eq!(
        (late_row["is_overdue"].as_bool(), late_row["rungs_fired"].as_i64(), late_row["highest_severity_fired"].as_str(), late_row["next_rung"].clone()),
        (Some(true), Some(3), Some("critical"), Value::Null)
    );
    assert!((-41..=-39).contains(&late_row["minutes_to_due"].as_i64().unwrap()), "{late_row}");
    let near_row = &l["data"][1];
    assert_eq!(
        (near_row["is_overdue"].as_bool(), near_row["rungs_fired"].as_i64(), near_row["highest_severity_fired"].as_str()),
        (Some(false), Some(1), Some("medium"))
    );
    assert!((9..=10).contains(&near_row["minutes_to_due"].as_i64().unwrap()), "{near_row}");
    assert_eq!((near_row["next_rung"]["offset_minutes"].as_i64(), near_row["next_rung"]["severity"].as_str()), (Some(0), Some("high")));
    assert_eq!(near_row["next_rung"]["fires_at"], near_row["due_at"]);
    let fresh_row = &l["data"][2];
    assert_eq!((fresh_row["rungs_fired"].as_i64(), fresh_row["highest_severity_fired"].clone()), (Some(0), Value::Null));
    assert_eq!(fresh_row["next_rung"]["offset_minutes"].as_i64(), Some(-30));

    let (_, l) = app.get("/api/sla/clocks/at-risk?within_minutes=30&limit=1", Some(a)).await;
    assert_eq!((l["data"][0]["subject_ref"].as_str(), l["total"].as_i64()), (Some("request:late"), Some(2)));
    let (_, l) = app.get("/api/sla/clocks/at-risk?within_minutes=0", Some(a)).await;
    assert_eq!(l["total"], 1);
    let (_, l) = app.get(&format!("/api/sla/clocks/at-risk?policy_id={}", uuid::Uuid::now_v7()), Some(a)).await;
    assert_eq!(l["total"], 0);
    let b = assert_error(app.get("/api/sla/clocks/at-risk?within_minutes=soon&policy_id=x", Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["within_minutes must be an integer from 0 to 10080", "policy_id must be a UUID"]));
    assert_error(app.get("/api/sla/clocks/at-risk?limit=many", Some(a)).await, 400, "ValidationError");
    let (_, l) = app.get("/api/sla/clocks/at-risk", Some(&t.b_token)).await;
    assert_eq!(l["total"], 0);

    // Stopping: in time, then late (breached); twice is 409.
    let near_id = near["data"]["clock_id"].as_str().unwrap();
    let (s, st) = app.post(&format!("/api/sla/clocks/{near_id}/stop"), Some(a), json!({})).await;
    assert_eq!((s, st["data"]["state"].as_str(), st["data"]["breached"].as_bool()), (StatusCode::OK, Some("stopped"), Some(false)), "{st}");
    let late_id = late["data"]["clock_id"].as_str().unwrap();
    assert_error(app.post(&format!("/api/sla/clocks/{late_id}/stop"), Some(&t.b_token), json!({})).await, 404, "NotFound");
    let (s, st) = app.post(&format!("/api/sla/clocks/{late_id}/stop"), Some(a), json!({})).await;
    assert_eq!((s, st["data"]["breached"].as_bool()), (StatusCode::OK, Some(true)), "{st}");
    let b = assert_error(app.post(&format!("/api/sla/clocks/{late_id}/stop"), Some(a), json!({})).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the clock is stopped: only a running clock can be stopped"]));
    let (_, l) = app.get("/api/sla/clocks/at-risk", Some(a)).await;
    assert_eq!((l["total"].as_i64(), l["data"][0]["subject_ref"].as_str()), (Some(1), Some("request:fresh")));

    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |ty: &str| events.iter().filter(|e| *e == ty).count();
    assert_eq!(
        (
            count("sla.policy.created.v1"),
            count("sla.rung.created.v1"),
            count("sla.clock.started.v1"),
            count("sla.clock.stopped.v1"),
            count("sla.clock.breached.v1")
        ),
        (1, 3, 3, 2, 1)
    );
}
db_test!(sla_clocks_at_risk_show_the_rungs_fired_and_the_next);

/// A subject's clocks are found (and read one by one) to be stopped;
/// policies are listed and changed, and a rung removed.
async fn clocks_are_listed_by_subject_and_policies_changed_and_rungs_removed(app: TestApp) {
    let t = app.two_tenants("sla-life").await;
    let (a, b) = (t.a_token.as_str(), t.b_token.as_str());
    let mut policies = Vec::new();
    for (name, target) in [("Gold", 60), ("Silver", 240)] {
        let (s, p) = app.post("/api/sla/policies", Some(a), json!({ "name": name, "target_minutes": target, "description": "tier" })).await;
        assert_eq!(s, StatusCode::CREATED, "{p}");
        policies.push(p["data"]["policy_id"].as_str().unwrap().to_string());
    }
    let (gold, silver) = (&policies[0], &policies[1]);

    // Policies: newest first, paged, another tenant's list empty.
    let (s, list) = app.get("/api/sla/policies", Some(a)).await;
    assert_eq!((s, &list["total"], &list["data"][0]["policy_id"]), (StatusCode::OK, &json!(2), &json!(silver)));
    let (_, page) = app.get("/api/sla/policies?limit=1&offset=1", Some(a)).await;
    assert_eq!((&page["total"], &page["data"][0]["name"]), (&json!(2), &json!("Gold")));
    let (_, theirs) = app.get("/api/sla/policies", Some(b)).await;
    assert_eq!(theirs["total"], 0);

    // Clocks of two subjects under two policies.
    let mut clocks = Vec::new();
    for (policy, subject) in [(gold, "service_request:1"), (silver, "service_request:1"), (gold, "service_request:2")] {
        let (s, c) = app.post("/api/sla/clocks", Some(a), json!({ "policy_id": policy, "subject_ref": subject })).await;
        assert_eq!(s, StatusCode::CREATED, "{c}");
        clocks.push(c["data"].clone());
    }
    let (s, _) = app.post(&format!("/api/sla/clocks/{}/stop", clocks[1]["clock_id"].as_str().unwrap()), Some(a), json!({})).await;
    assert_eq!(s, StatusCode::OK);
    let ids = |v: &Value| v["data"].as_array().unwrap().iter().map(|c| c["clock_id"].clone()).collect::<Vec<_>>();
    let (s, all) = app.get("/api/sla/clocks", Some(a)).await;
    assert_eq!((s, &all["total"]), (StatusCode::OK, &json!(3)));
    let (_, subject) = app.get("/api/sla/clocks?subject_ref=service_request:1", Some(a)).await;
    assert_eq!(subject["total"], 2);
    let (_, running) = app.get("/api/sla/clocks?subject_ref=service_request:1&state=running", Some(a)).await;
    assert_eq!(ids(&running), [clocks[0]["clock_id"].clone()]);
    let (_, stopped) = app.get("/api/sla/clocks?state=stopped", Some(a)).await;
    assert_eq!((ids(&stopped), &stopped["data"][0]["state"]), (vec![clocks[1]["clock_id"].clone()], &json!("stopped")));
    let (_, of_gold) = app.get(&format!("/api/sla/clocks?policy_id={gold}"), Some(a)).await;
    assert_eq!(of_gold["total"], 2);
    let (_, page) = app.get("/api/sla/clocks?limit=2", Some(a)).await;
    assert_eq!((&page["total"], page["data"].as_array().unwrap().len()), (&json!(3), 2));
    let body = assert_error(app.get("/api/sla/clocks?state=paused&policy_id=nope", Some(a)).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["state must be one of: running, stopped", "policy_id must be a UUID"]));
    let (_, theirs) = app.get("/api/sla/clocks?subject_ref=service_request:1", Some(b)).await;
    assert_eq!((&theirs["total"], &theirs["data"]), (&json!(0), &json!([])));

    // One clock.
    let clock = clocks[0]["clock_id"].as_str().unwrap();
    let (s, one) = app.get(&format!("/api/sla/clocks/{clock}"), Some(a)).await;
    let mut listed = clocks[0].clone();
    listed["fired_rungs"] = json!([]);
    assert_eq!((s, &one["data"]), (StatusCode::OK, &listed));
    assert_error(app.get(&format!("/api/sla/clocks/{clock}"), Some(b)).await, 404, "NotFound");
    assert_error(app.get("/api/sla/clocks/nope", Some(a)).await, 404, "NotFound");

    // A policy's change: at least one field, bounded, its name unique.
    let app = &app;
    let policy_url = format!("/api/sla/policies/{gold}");
    let patch = |body: Value| app.call(reqwest::Method::PATCH, &policy_url, Some(a), Some(body));
    let body = assert_error(patch(json!({})).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["give at least one of: name, description, target_minutes"]));
    let body = assert_error(patch(json!({ "name": "n".repeat(201), "target_minutes": 0 })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["name must be at most 200 characters", "target_minutes must be an integer from 1 to 525600"]));
    let body = assert_error(patch(json!({ "name": " " })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["name is required"]));
    let body = assert_error(patch(json!({ "name": "Silver" })).await, 409, "Conflict");
    assert_eq!(body["details"], json!(["the tenant has a policy named Silver"]));
    assert_error(app.call(reqwest::Method::PATCH, &format!("/api/sla/policies/{gold}"), Some(b), Some(json!({ "name": "x" }))).await, 404, "NotFound");
    let (s, changed) = patch(json!({ "name": "Platinum", "target_minutes": 30, "description": "" })).await;
    assert_eq!(s, StatusCode::OK, "{changed}");
    assert_eq!(
        (&changed["data"]["name"], &changed["data"]["target_minutes"], &changed["data"]["description"], &changed["data"]["rungs"]),
        (&json!("Platinum"), &json!(30), &Value::Null, &json!([]))
    );
    // A running clock keeps its deadline; a new one takes the new target.
    let (_, kept) = app.get(&format!("/api/sla/clocks/{clock}"), Some(a)).await;
    assert_eq!(kept["data"]["due_at"], clocks[0]["due_at"]);
    let (_, new) = app.post("/api/sla/clocks", Some(a), json!({ "policy_id": gold, "subject_ref": "service_request:3" })).await;
    let started = hub_kernel::db::parse_time(new["data"]["started_at"].as_str().unwrap()).unwrap();
    let due = hub_kernel::db::parse_time(new["data"]["due_at"].as_str().unwrap()).unwrap();
    assert_eq!((due - started).num_minutes(), 30);

    // A rung removed: once (then 404), only through its own policy.
    let (s, r) = app.post(&format!("/api/sla/policies/{gold}/rungs"), Some(a), json!({ "offset_minutes": -5, "severity": "high" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    let rung = r["data"]["rung_id"].as_str().unwrap();
    let delete = |policy: &str, token: &str| {
        let (url, token) = (format!("/api/sla/policies/{policy}/rungs/{rung}"), token.to_string());
        async move { app.call(reqwest::Method::DELETE, &url, Some(&token), None).await }
    };
    assert_error(delete(silver, a).await, 404, "NotFound");
    assert_error(delete(gold, b).await, 404, "NotFound");
    let (s, gone) = delete(gold, a).await;
    assert_eq!((s, &gone["data"]), (StatusCode::OK, &json!({ "policy_id": gold, "rung_id": rung, "deleted": true })));
    assert_error(delete(gold, a).await, 404, "NotFound");
    let (_, read) = app.get(&format!("/api/sla/policies/{gold}"), Some(a)).await;
    assert_eq!(read["data"]["rungs"], json!([]));

    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "sla.policy.updated.v1").count(), 1, "{events:?}");
    assert_eq!(events.iter().filter(|e| *e == "sla.rung.deleted.v1").count(), 1, "{events:?}");
}
db_test!(clocks_are_listed_by_subject_and_policies_changed_and_rungs_removed);

/// The `sla.rung.fired.v1` entries of a tenant, as (payload, actor_kind).
async fn fired(app: &TestApp, tenant: &Value) -> Vec<(Value, String)> {
    let rows: Vec<(String, String)> =
        sqlx::query_as("SELECT payload, actor_kind FROM audit_entry WHERE tenant_id = $1 AND event_type = 'sla.rung.fired.v1' ORDER BY pool_index, seq")
            .bind(tenant.as_str().unwrap())
            .fetch_all(&app.state().db.read)
            .await
            .unwrap();
    rows.into_iter().map(|(p, k)| (serde_json::from_str(&p).unwrap(), k)).collect()
}

/// A policy of the token's tenant with a 60-minute target and `rungs`
/// (offset, severity); its id.
async fn policy_with(app: &TestApp, token: &str, name: &str, rungs: &[(i64, &str)], notify: &Value) -> String {
    let (s, p) = app.post("/api/sla/policies", Some(token), json!({ "name": name, "target_minutes": 60 })).await;
    assert_eq!(s, StatusCode::CREATED, "{p}");
    let policy = p["data"]["policy_id"].as_str().unwrap().to_string();
    for (offset, severity) in rungs {
        let body = json!({ "offset_minutes": offset, "severity": severity, "notify_persona_id": notify });
        let (s, r) = app.post(&format!("/api/sla/policies/{policy}/rungs"), Some(token), body).await;
        assert_eq!(s, StatusCode::CREATED, "{r}");
    }
    policy
}

/// The sweep fires each rung of a running clock once its time has come:
/// one `sla.rung.fired.v1` per (clock, rung), in the clock's tenant's
/// chain, never again on the next sweep; a stopped clock fires nothing;
/// the clock's read lists what fired.
async fn the_sweep_fires_each_rung_of_a_running_clock_once(app: TestApp) {
    let t = app.two_tenants("sla-fire").await;
    let a = t.a_token.as_str();
    let notify = t.a["persona_id"].clone();
    let policy = policy_with(&app, a, "P1", &[(-30, "high"), (0, "medium"), (30, "critical"), (600, "low")], &notify).await;
    let start = |started: String, subject: &str| json!({ "policy_id": policy, "subject_ref": subject, "started_at": started });
    // Due 40 minutes ago: -30, 0 and +30 have come, +600 has not.
    let (_, late) = app.post("/api/sla/clocks", Some(a), start(minutes_ago(100), "request:late")).await;
    let late_id = late["data"]["clock_id"].as_str().unwrap().to_string();
    // Due in an hour: nothing yet.
    let (_, fresh) = app.post("/api/sla/clocks", Some(a), json!({ "policy_id": policy, "subject_ref": "request:fresh" })).await;
    let fresh_id = fresh["data"]["clock_id"].as_str().unwrap().to_string();
    // Due 40 minutes ago too, but stopped before the sweep: nothing.
    let (_, stopped) = app.post("/api/sla/clocks", Some(a), start(minutes_ago(100), "request:stopped")).await;
    let stopped_id = stopped["data"]["clock_id"].as_str().unwrap().to_string();
    assert_eq!(app.post(&format!("/api/sla/clocks/{stopped_id}/stop"), Some(a), json!({})).await.0, StatusCode::OK);
    // Another tenant's clock fires in its own chain.
    let b_policy = policy_with(&app, &t.b_token, "B1", &[(0, "low")], &t.b["persona_id"]).await;
    let (s, _) = app.post("/api/sla/clocks", Some(&t.b_token), json!({ "policy_id": b_policy, "subject_ref": "theirs", "started_at": minutes_ago(90) })).await;
    assert_eq!(s, StatusCode::CREATED);

    let db = &app.state().db;
    assert_eq!(hub_crm::sla::fire_due(db).await.unwrap(), 4);
    let ours = fired(&app, &t.a["tenant_id"]).await;
    assert_eq!(ours.len(), 3, "{ours:?}");
    assert!(ours.iter().all(|(p, kind)| p["clock_id"] == json!(late_id) && kind == "system"), "{ours:?}");
    let offsets: Vec<i64> = ours.iter().map(|(p, _)| p["offset_minutes"].as_i64().unwrap()).collect();
    assert_eq!(offsets, vec![-30, 0, 30]);
    let (on_time, _) = &ours[1];
    assert_eq!(
        (
            on_time["policy_id"].as_str(),
            on_time["subject_ref"].as_str(),
            on_time["severity"].as_str(),
            &on_time["notify_persona_id"],
            &on_time["fires_at"],
            &on_time["due_at"]
        ),
        (Some(policy.as_str()), Some("request:late"), Some("medium"), &notify, &late["data"]["due_at"], &late["data"]["due_at"])
    );
    assert!(on_time["fired_at"].as_str().unwrap() >= on_time["fires_at"].as_str().unwrap());
    assert_eq!(fired(&app, &t.b["tenant_id"]).await.len(), 1);

    // Once only.
    assert_eq!(hub_crm::sla::fire_due(db).await.unwrap(), 0);
    assert_eq!(fired(&app, &t.a["tenant_id"]).await.len(), 3);

    // The clock's read lists the firings, earliest first.
    let (s, c) = app.get(&format!("/api/sla/clocks/{late_id}"), Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{c}");
    let firings = c["data"]["fired_rungs"].as_array().unwrap();
    let seen: Vec<(i64, &str)> = firings.iter().map(|f| (f["offset_minutes"].as_i64().unwrap(), f["severity"].as_str().unwrap())).collect();
    assert_eq!(seen, vec![(-30, "high"), (0, "medium"), (30, "critical")]);
    assert_eq!((&firings[1]["fires_at"], &firings[1]["fired_at"], &firings[1]["notify_persona_id"]), (&on_time["fires_at"], &on_time["fired_at"], &notify));
    for id in [&fresh_id, &stopped_id] {
        let (_, c) = app.get(&format!("/api/sla/clocks/{id}"), Some(a)).await;
        assert_eq!(c["data"]["fired_rungs"], json!([]), "{c}");
    }

    // A rung added later whose time has passed fires at the next sweep, for
    // the running clock only; once the clock stops, nothing more.
    let (s, added) = app.post(&format!("/api/sla/policies/{policy}/rungs"), Some(a), json!({ "offset_minutes": 5, "severity": "low" })).await;
    assert_eq!(s, StatusCode::CREATED, "{added}");
    assert_eq!(hub_crm::sla::fire_due(db).await.unwrap(), 1);
    assert_eq!(app.post(&format!("/api/sla/clocks/{late_id}/stop"), Some(a), json!({})).await.0, StatusCode::OK);
    let (s, r) = app.post(&format!("/api/sla/policies/{policy}/rungs"), Some(a), json!({ "offset_minutes": 10, "severity": "low" })).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    assert_eq!(hub_crm::sla::fire_due(db).await.unwrap(), 0);
    assert_eq!(fired(&app, &t.a["tenant_id"]).await.len(), 4);
    // A rung removed after it fired stays in the clock's history.
    let rung = added["data"]["rung_id"].as_str().unwrap();
    assert_eq!(app.call(reqwest::Method::DELETE, &format!("/api/sla/policies/{policy}/rungs/{rung}"), Some(a), None).await.0, StatusCode::OK);
    let (_, c) = app.get(&format!("/api/sla/clocks/{late_id}"), Some(a)).await;
    assert_eq!(c["data"]["fired_rungs"].as_array().unwrap().len(), 4, "{c}");
}
db_test!(the_sweep_fires_each_rung_of_a_running_clock_once);

/// Sweeps at once (two hub replicas on PostgreSQL) fire each rung once.
async fn sweeps_at_once_fire_each_rung_once(app: TestApp) {
    let t = app.two_tenants("sla-race").await;
    let a = t.a_token.as_str();
    let policy = policy_with(&app, a, "Race", &[(-10, "low"), (0, "high")], &Value::Null).await;
    for i in 0..12 {
        let body = json!({ "policy_id": policy, "subject_ref": format!("race:{i}"), "started_at": minutes_ago(120) });
        assert_eq!(app.post("/api/sla/clocks", Some(a), body).await.0, StatusCode::CREATED);
    }
    let replica = if app.backend == Backend::Postgres { Some(app.replica().await) } else { None };
    let other = replica.as_ref().unwrap_or(&app);
    let (x, y, z, w) = tokio::join!(
        hub_crm::sla::fire_due(&app.state().db),
        hub_crm::sla::fire_due(&other.state().db),
        hub_crm::sla::fire_due(&app.state().db),
        hub_crm::sla::fire_due(&other.state().db),
    );
    let total: usize = [x, y, z, w].into_iter().map(Result::unwrap).sum();
    // A sweep that met a clock another held leaves it to the next pass.
    let rest = hub_crm::sla::fire_due(&app.state().db).await.unwrap();
    assert_eq!(total + rest, 24);
    assert_eq!(fired(&app, &t.a["tenant_id"]).await.len(), 24);
    let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM sla_rung_firing").fetch_one(&app.state().db.read).await.unwrap();
    assert_eq!(rows, 24);
    assert_eq!(hub_crm::sla::fire_due(&other.state().db).await.unwrap(), 0);
}
db_test!(sweeps_at_once_fire_each_rung_once);

/// With `HUB_SLA_SWEEP_SECONDS` set, the hub sweeps on its own, and the
/// event reaches a webhook endpoint subscribed to it through the outbox.
async fn the_hub_sweeps_in_the_background_and_webhooks_carry_the_firing(app: TestApp) {
    let app = app.variant(|c| c.sla_sweep_seconds = 1).await;
    let t = app.two_tenants("sla-bg").await;
    let a = t.a_token.as_str();
    let (s, ep) = app.post("/api/webhooks/endpoints", Some(a), json!({ "url": "http://127.0.0.1:9/hook", "event_types": ["sla.rung.*"] })).await;
    assert_eq!(s, StatusCode::CREATED, "{ep}");
    let policy = policy_with(&app, a, "BG", &[(0, "high")], &t.a["persona_id"]).await;
    let body = json!({ "policy_id": policy, "subject_ref": "bg", "started_at": minutes_ago(61) });
    assert_eq!(app.post("/api/sla/clocks", Some(a), body).await.0, StatusCode::CREATED);
    let mut deliveries = Value::Null;
    for _ in 0..100 {
        let (_, l) = app.get("/api/webhooks/deliveries?event_type=sla.rung.fired.v1", Some(a)).await;
        if l["total"].as_i64() == Some(1) {
            deliveries = l;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(deliveries["total"], 1, "a delivery of sla.rung.fired.v1 to the subscribed endpoint");
    assert_eq!(deliveries["data"][0]["endpoint_id"], ep["data"]["endpoint_id"]);
    assert_eq!(fired(&app, &t.a["tenant_id"]).await.len(), 1);
}
db_test!(the_hub_sweeps_in_the_background_and_webhooks_carry_the_firing);
