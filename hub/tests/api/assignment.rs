//! sdk-assignment: rule sets routing subjects, assign-by-task's gates and
//! strategies, simulations, and the offer state machine of assignment
//! records, with their events.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

/// `n` new personas of the token's tenant.
async fn personas(app: &TestApp, token: &str, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    for _ in 0..n {
        let (s, p) = app.post("/api/personas", Some(token), json!({ "kind": "service" })).await;
        assert_eq!(s, StatusCode::CREATED, "{p}");
        out.push(p["data"]["persona_id"].as_str().unwrap().to_string());
    }
    out
}

fn count(events: &[String], name: &str) -> usize {
    events.iter().filter(|e| *e == name).count()
}

async fn rule_sets_route_subjects_and_simulations_replay_them(app: TestApp) {
    let t = app.two_tenants("asg-route").await;
    let a = t.a_token.as_str();
    let p = personas(&app, a, 3).await;
    let rules = json!([
        { "name": "vip", "when": { "tier": "gold" }, "action": "review" },
        { "name": "cardio", "when": { "kind": ["heart", "lungs"] }, "specialty": "cardio" },
    ]);
    let (s, v1) = app.post("/api/assignment/routes", Some(a), json!({ "name": "triage", "rules": rules, "activate": true })).await;
    assert_eq!(s, StatusCode::CREATED, "{v1}");
    assert_eq!((v1["data"]["version"].as_i64(), v1["data"]["active"].as_bool(), v1["data"]["rules"].clone()), (Some(1), Some(true), rules));
    let (s, v2) = app.post("/api/assignment/routes", Some(a), json!({ "name": "triage", "rules": [{ "name": "anyone" }], "published_by": "ops" })).await;
    assert_eq!(s, StatusCode::CREATED, "{v2}");
    assert_eq!((v2["data"]["version"].as_i64(), v2["data"]["active"].as_bool(), v2["data"]["published_by"].as_str()), (Some(2), Some(false), Some("ops")));
    let (_, list) = app.get("/api/assignment/routes?name=triage", Some(a)).await;
    assert_eq!(list["total"], 2);
    assert_eq!(list["data"][0]["version"], 2, "newest first");

    let specialties = json!({ &p[1]: ["cardio"], &p[2]: ["cardio", "skin"] });
    let ask = |subject: Value, dry: bool| json!({ "rule_set_name": "triage", "subject": subject, "subject_ref": "case-1", "candidate_persona_ids": p, "persona_specialties": specialties, "dry_run": dry });
    let (s, dry) = app.post("/api/assignment/route", Some(a), ask(json!({ "kind": "heart" }), true)).await;
    assert_eq!(s, StatusCode::OK, "{dry}");
    assert_eq!(
        (dry["data"]["decision_id"].clone(), dry["data"]["outcome"].as_str(), dry["data"]["persona_id"].as_str()),
        (Value::Null, Some("ASSIGNED"), Some(p[1].as_str()))
    );
    let (s, first) = app.post("/api/assignment/route", Some(a), ask(json!({ "kind": "heart" }), false)).await;
    assert_eq!(s, StatusCode::CREATED, "{first}");
    let d = &first["data"];
    assert_eq!(
        (d["persona_id"].as_str(), d["matched_rule"].as_str(), d["rule_version"].as_i64(), d["strategy"].as_str()),
        (Some(p[1].as_str()), Some("cardio"), Some(1), Some("default"))
    );
    // The load spreads: the other cardiologist next.
    let (_, second) = app.post("/api/assignment/route", Some(a), ask(json!({ "kind": "lungs" }), false)).await;
    assert_eq!(second["data"]["persona_id"].as_str(), Some(p[2].as_str()));
    let (_, review) = app.post("/api/assignment/route", Some(a), ask(json!({ "kind": "heart", "tier": "gold" }), false)).await;
    assert_eq!((review["data"]["outcome"].as_str(), review["data"]["persona_id"].clone()), (Some("REVIEW"), Value::Null));
    let (_, fallback) = app.post("/api/assignment/route", Some(a), ask(json!({ "kind": "skin" }), false)).await;
    assert_eq!((fallback["data"]["outcome"].as_str(), fallback["data"]["persona_id"].as_str()), (Some("FALLBACK"), Some(p[0].as_str())), "the least loaded");
    let (_, none) = app.post("/api/assignment/route", Some(a), json!({ "rule_set_name": "triage", "subject": { "kind": "heart" } })).await;
    assert_eq!(none["data"]["outcome"], "UNROUTABLE");

    let id = first["data"]["decision_id"].as_str().unwrap();
    let (s, read) = app.get(&format!("/api/assignment/decisions?decision_id={}", id.to_uppercase()), Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{read}");
    assert_eq!((read["data"].clone(), read["total"].as_i64()), (json!([first["data"]]), Some(1)));
    let (_, theirs) = app.get(&format!("/api/assignment/decisions?decision_id={id}"), Some(&t.b_token)).await;
    assert_eq!((theirs["data"].clone(), theirs["total"].as_i64()), (json!([]), Some(0)), "another tenant's decision is not listed");
    // The recorded decisions, newest first, by subject, outcome and rule set.
    let decided = |v: &Value| v["data"].as_array().unwrap().iter().map(|d| d["decision_id"].clone()).collect::<Vec<_>>();
    let (_, all) = app.get("/api/assignment/decisions", Some(a)).await;
    let recorded = [&none, &fallback, &review, &second, &first].map(|d| d["data"]["decision_id"].clone()).to_vec();
    assert_eq!((decided(&all), all["total"].as_i64()), (recorded.clone(), Some(5)));
    let (_, by_outcome) = app.get("/api/assignment/decisions?outcome=ASSIGNED&rule_set_name=triage", Some(a)).await;
    assert_eq!((decided(&by_outcome), by_outcome["total"].as_i64()), (recorded[3..].to_vec(), Some(2)));
    let (_, by_subject) = app.get("/api/assignment/decisions?subject_ref=case-1&limit=1&offset=1", Some(a)).await;
    assert_eq!((decided(&by_subject), by_subject["total"].as_i64()), (vec![recorded[2].clone()], Some(4)));
    let (_, other_set) = app.get("/api/assignment/decisions?rule_set_name=other", Some(a)).await;
    assert_eq!(other_set["total"], 0);
    let b = assert_error(app.get("/api/assignment/decisions?outcome=WON&decision_id=x", Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["decision_id must be a UUID", "outcome must be one of: ASSIGNED, FALLBACK, REVIEW, UNROUTABLE"]));

    // Refusals: an unknown rule set, another tenant's persona, bad rules.
    assert_error(app.post("/api/assignment/route", Some(a), json!({ "rule_set_name": "nope" })).await, 400, "ValidationError");
    let b = assert_error(
        app.post("/api/assignment/route", Some(a), json!({ "rule_set_name": "triage", "candidate_persona_ids": [p[0], t.b["persona_id"]] })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["candidate_persona_ids[1] is not a persona of this tenant"]));
    let b = assert_error(app.post("/api/assignment/routes", Some(a), json!({ "name": "x y", "rules": [] })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["rules must hold 1 to 100 items"]));
    let b = assert_error(
        app.post("/api/assignment/routes", Some(a), json!({ "name": "x", "rules": [{ "when": [1], "action": "drop" }, 3] })).await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!([
            "rules[0].name is required",
            "rules[0].when must be a JSON object",
            "rules[0].action must be one of: assign, review",
            "rules[1] must be a JSON object"
        ])
    );
    let b = assert_error(
        app.post("/api/assignment/routes", Some(a), json!({ "name": "x y", "rules": [{ "name": "r", "specialty": " " }] })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["name must be 1 to 128 letters, digits, '.', '_' or '-'", "rules[0].specialty must be a non-blank string"]));

    // Version 2 replayed over the five recorded decisions, then activated.
    let (s, sim) = app
        .post(
            "/api/assignment/simulate",
            Some(a),
            json!({ "rule_set_name": "triage", "candidate_version": 2, "candidate_persona_ids": p, "skew_tolerance": 0.5 }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{sim}");
    let report = &sim["data"]["report"];
    assert_eq!(
        (report["replayed"].as_u64(), report["outcomes"]["ASSIGNED"].as_u64(), report["outcomes"]["REVIEW"].as_u64()),
        (Some(5), Some(5), Some(0)),
        "{report}"
    );
    assert_eq!((report["skew"].as_f64(), sim["data"]["within_tolerance"].as_bool()), (Some(0.2), Some(true)), "2, 2, 1 of 5: {report}");
    assert_eq!(sim["data"]["candidate_version"], 2);
    let sim_id = sim["data"]["simulation_id"].as_str().unwrap();
    let (_, strict) =
        app.post("/api/assignment/simulate", Some(a), json!({ "rule_set_name": "triage", "candidate_persona_ids": p, "skew_tolerance": 0 })).await;
    assert_eq!((strict["data"]["candidate_version"].as_i64(), strict["data"]["within_tolerance"].as_bool()), (Some(1), Some(false)), "{strict}");
    let (_, sims) = app.get("/api/assignment/simulations?limit=1", Some(a)).await;
    assert_eq!((sims["total"].as_i64(), sims["data"][0]["simulation_id"].clone()), (Some(2), strict["data"]["simulation_id"].clone()));
    let (s, one) = app.get(&format!("/api/assignment/simulations/{sim_id}"), Some(a)).await;
    assert_eq!((s, one["data"]["report"].clone()), (StatusCode::OK, report.clone()));
    let b = assert_error(
        app.post("/api/assignment/simulate", Some(a), json!({ "rule_set_name": "triage", "candidate_version": 9, "skew_tolerance": 2 })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["skew_tolerance must be a number from 0 to 1"]));
    assert_error(app.post("/api/assignment/simulate", Some(a), json!({ "rule_set_name": "triage", "candidate_version": 9 })).await, 400, "ValidationError");

    let (s, active) = app.post(&format!("/api/assignment/routes/{}/activate", v2["data"]["rule_set_id"].as_str().unwrap()), Some(a), json!({})).await;
    assert_eq!((s, active["data"]["active"].as_bool()), (StatusCode::OK, Some(true)));
    let (_, list) = app.get("/api/assignment/routes?name=triage", Some(a)).await;
    assert_eq!(list["data"][1]["active"], false, "one active version a name");
    let (_, now) = app.post("/api/assignment/route", Some(a), ask(json!({ "kind": "skin" }), false)).await;
    assert_eq!((now["data"]["outcome"].as_str(), now["data"]["rule_version"].as_i64()), (Some("ASSIGNED"), Some(2)));

    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(count(&events, "assignment.rule_set.published.v1"), 2);
    assert_eq!(count(&events, "assignment.rule_set.activated.v1"), 1);
    assert_eq!(count(&events, "assignment.decision.recorded.v1"), 6, "every recorded decision, no dry run");
    assert_eq!(count(&events, "assignment.simulation.completed.v1"), 2);
}
db_test!(rule_sets_route_subjects_and_simulations_replay_them);

async fn assign_by_task_gates_then_picks_by_strategy(app: TestApp) {
    let t = app.two_tenants("asg-task").await;
    let a = t.a_token.as_str();
    let p = personas(&app, a, 4).await;
    let urls: Vec<String> = p.iter().map(|id| format!("/api/assignment/workload/{id}")).collect();
    let put = |i: usize, body: Value| app.call(Method::PUT, &urls[i], Some(a), Some(body));
    let (s, w) = put(0, json!({ "skills": ["x"], "capacity_per_day": 1 })).await;
    assert_eq!(s, StatusCode::CREATED, "{w}");
    let (s, w) = put(0, json!({ "skills": ["x"], "capacity_per_day": 1, "location": { "lat": 52.0, "lng": 4.0 } })).await;
    assert_eq!((s, w["data"]["lat"].as_f64()), (StatusCode::OK, Some(52.0)));
    put(1, json!({ "skills": ["x", "y"] })).await;
    put(2, json!({ "skills": ["x"], "available_from": "2999-01-01T00:00:00Z" })).await;
    let (s, read) = app.get(&format!("/api/assignment/workload/{}", p[1]), Some(a)).await;
    assert_eq!((s, read["data"]["skills"].clone(), read["data"]["capacity_per_day"].clone()), (StatusCode::OK, json!(["x", "y"]), Value::Null));
    assert_error(app.get(&format!("/api/assignment/workload/{}", p[3]), Some(a)).await, 404, "NotFound");
    let b = assert_error(
        put(3, json!({ "skills": "x", "available_from": "2030-01-02T00:00:00Z", "available_to": "soon", "capacity_per_day": -1, "location": { "lat": 1 } }))
            .await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!([
            "skills must be an array",
            "available_to must be an RFC 3339 timestamp",
            "capacity_per_day must be an integer from 0 to 100000",
            "location.lng is required"
        ])
    );
    let b = assert_error(
        put(3, json!({ "skills": ["x", " "], "available_from": "2030-01-02T00:00:00Z", "available_to": "2030-01-01T00:00:00Z" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["skills must be an array of at most 100 non-blank strings", "available_from must be before available_to"]));

    let task = |id: &str, strategy: &str, candidates: &[&String]| json!({ "task_id": id, "strategy": strategy, "required_skills": ["x"], "candidate_persona_ids": candidates, "location": { "lat": 52.1, "lng": 4.1 } });
    let all: Vec<&String> = p[..3].iter().collect();
    let (s, d) = app.post("/api/assignment/assign-by-task", Some(a), task("t1", "default", &all)).await;
    assert_eq!(s, StatusCode::CREATED, "{d}");
    assert_eq!(
        (d["data"]["outcome"].as_str(), d["data"]["persona_id"].as_str(), d["data"]["kind"].as_str()),
        (Some("ASSIGNED"), Some(p[0].as_str()), Some("task"))
    );
    let gates: Vec<Value> = d["data"]["evaluation"].as_array().unwrap().iter().map(|e| e["gate"].clone()).collect();
    assert_eq!(gates, [Value::Null, Value::Null, json!("availability")]);
    assert!(d["data"]["evaluation"][0]["distance_km"].as_f64().unwrap() > 10.0, "{d}");
    // The primary's one slot a day is taken: the backup.
    let (_, d) = app.post("/api/assignment/assign-by-task", Some(a), task("t2", "default", &all)).await;
    assert_eq!((d["data"]["persona_id"].as_str(), d["data"]["evaluation"][0]["gate"].as_str()), (Some(p[1].as_str()), Some("capacity")));
    // Nobody passes the gates: recorded as UNROUTABLE.
    let (s, d) = app.post("/api/assignment/assign-by-task", Some(a), task("t3", "default", &[&p[0], &p[2], &p[3]])).await;
    assert_eq!((s, d["data"]["outcome"].as_str(), d["data"]["persona_id"].clone()), (StatusCode::CREATED, Some("UNROUTABLE"), Value::Null));

    // Round robin: a fair turn each, in a cursor kept per pool.
    put(3, json!({ "skills": ["x"] })).await;
    let pool: Vec<&String> = vec![&p[3], &p[1]];
    let mut sorted = [p[1].clone(), p[3].clone()];
    sorted.sort();
    let mut turns = Vec::new();
    for i in 0..3 {
        let mut body = task(&format!("rr{i}"), "round_robin", &pool);
        body["pool_key"] = json!("night");
        let (s, d) = app.post("/api/assignment/assign-by-task", Some(a), body).await;
        assert_eq!(s, StatusCode::CREATED, "{d}");
        turns.push(d["data"]["persona_id"].as_str().unwrap().to_string());
    }
    assert_eq!(turns, [sorted[0].clone(), sorted[1].clone(), sorted[0].clone()]);
    let (_, cursors) = app.get("/api/assignment/rotation?pool_key=night", Some(a)).await;
    assert_eq!(
        (cursors["total"].as_i64(), cursors["data"][0]["turns"].as_i64(), cursors["data"][0]["last_persona_id"].as_str()),
        (Some(1), Some(3), Some(sorted[0].as_str()))
    );
    let (_, other) = app.get("/api/assignment/rotation", Some(&t.b_token)).await;
    assert_eq!(other["total"], 0, "cursors are the tenant's");

    // Fair share: the fewest given today (p1 also had t2), then persona id.
    let (_, d) = app.post("/api/assignment/assign-by-task", Some(a), task("fs", "fair_share", &[&p[1], &p[3]])).await;
    let given = |id: &String| turns.iter().filter(|t| *t == id).count() + usize::from(*id == p[1]);
    let expect = [&p[1], &p[3]].into_iter().min_by_key(|id| (given(id), (*id).clone())).unwrap();
    assert_eq!(d["data"]["persona_id"].as_str(), Some(expect.as_str()));

    let b = assert_error(
        app.post("/api/assignment/assign-by-task", Some(a), json!({ "strategy": "random", "candidate_persona_ids": "x", "location": { "lat": 91 } })).await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!([
            "task_id is required",
            "candidate_persona_ids must be an array",
            "strategy must be one of: default, round_robin, fair_share",
            "location.lat must be a number from -90 to 90",
            "location.lng is required",
        ])
    );
    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(count(&events, "assignment.workload.updated.v1"), 5);
    assert_eq!(count(&events, "assignment.decision.recorded.v1"), 7);
}
db_test!(assign_by_task_gates_then_picks_by_strategy);

async fn pass_the_window(app: &TestApp, record: &str) {
    sqlx::query("UPDATE assignment_record SET offer_expires_at = '2000-01-01T00:00:00.000000Z' WHERE record_id = $1")
        .bind(record)
        .execute(app.state().db.writer())
        .await
        .unwrap();
}

async fn offers_fall_to_the_backup_and_keep_their_history(app: TestApp) {
    let t = app.two_tenants("asg-offer").await;
    let a = t.a_token.as_str();
    let p = personas(&app, a, 4).await;
    let (primary, backup, other) = (&p[0], &p[1], &p[2]);
    let offer = |window: i64| json!({ "subject_ref": "job-1", "primary_persona_id": primary, "backup_persona_id": backup, "manager_persona_id": p[3], "acceptance_window_minutes": window, "metadata": { "site": "north" } });
    let (s, r) = app.post("/api/assignments", Some(a), offer(30)).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    let rec = r["data"]["record_id"].as_str().unwrap().to_string();
    assert_eq!(
        (r["data"]["state"].as_str(), r["data"]["stage"].as_str(), r["data"]["current_persona_id"].as_str()),
        (Some("offered"), Some("primary"), Some(primary.as_str()))
    );
    assert!(r["data"]["offer_expires_at"].is_string());
    let url = |verb: &str| format!("/api/assignments/{rec}/{verb}");

    let b = assert_error(app.post(&url("accept"), Some(a), json!({ "persona_id": backup })).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["persona_id is not the persona the offer is with"]));
    let (s, r) = app.post(&url("decline"), Some(a), json!({ "reason": "on leave", "actor": "dispatcher-7" })).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(
        (r["data"]["state"].as_str(), r["data"]["stage"].as_str(), r["data"]["current_persona_id"].as_str()),
        (Some("offered"), Some("backup"), Some(backup.as_str()))
    );
    let (s, r) = app.post(&url("accept"), Some(a), json!({ "persona_id": backup })).await;
    assert_eq!((s, r["data"]["state"].as_str(), r["data"]["offer_expires_at"].clone()), (StatusCode::OK, Some("accepted"), Value::Null));
    let b = assert_error(app.post(&url("decline"), Some(a), json!({})).await, 409, "Conflict");
    assert_eq!(b["details"], json!(["the assignment is accepted, not open for this"]));
    let (s, r) = app.post(&url("reassign"), Some(a), json!({ "to_persona_id": other, "reason": "rebalanced" })).await;
    assert_eq!((s, r["data"]["state"].as_str(), r["data"]["current_persona_id"].as_str()), (StatusCode::OK, Some("reassigned"), Some(other.as_str())));
    assert_error(app.post(&url("reassign"), Some(a), json!({ "to_persona_id": other })).await, 409, "Conflict");
    assert_error(app.post(&url("reassign"), Some(a), json!({ "to_persona_id": t.b["persona_id"] })).await, 400, "ValidationError");
    // A reassigned offer whose window passes expires.
    pass_the_window(&app, &rec).await;
    let (_, swept) = app.post("/api/assignments/sweep", Some(a), json!({})).await;
    assert_eq!(swept["data"], json!({ "swept": 1, "fell_to_backup": 0, "expired": 1, "record_ids": [rec] }));
    let (s, r) = app.get(&format!("/api/assignments/{rec}"), Some(a)).await;
    assert_eq!((s, r["data"]["state"].as_str()), (StatusCode::OK, Some("expired")));
    let history: Vec<(String, String, String)> = r["data"]["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["event"].as_str().unwrap().into(), h["to_state"].as_str().unwrap().into(), h["persona_id"].as_str().unwrap_or("").into()))
        .collect();
    let step = |e: &str, s: &str, p: &String| (e.to_string(), s.to_string(), p.clone());
    assert_eq!(
        history,
        [
            step("offered", "offered", primary),
            step("declined", "offered", primary),
            step("accepted", "accepted", backup),
            step("reassigned", "reassigned", other),
            step("expired", "expired", other)
        ]
    );
    assert_eq!(r["data"]["history"][1]["actor"], "dispatcher-7");
    assert_eq!(r["data"]["history"][1]["reason"], "on leave");

    // The primary's window passing hands the offer to the backup; a late
    // accept by the primary is refused, and the hand-over stays.
    let (_, r) = app.post("/api/assignments", Some(a), offer(15)).await;
    let late = r["data"]["record_id"].as_str().unwrap().to_string();
    pass_the_window(&app, &late).await;
    assert_error(app.post(&format!("/api/assignments/{late}/accept"), Some(a), json!({ "persona_id": primary })).await, 409, "Conflict");
    let (_, r) = app.get(&format!("/api/assignments/{late}"), Some(a)).await;
    assert_eq!((r["data"]["stage"].as_str(), r["data"]["current_persona_id"].as_str()), (Some("backup"), Some(backup.as_str())));
    // Swept: a second record falls to its backup.
    let (_, r) = app.post("/api/assignments", Some(a), offer(15)).await;
    let swept_id = r["data"]["record_id"].as_str().unwrap().to_string();
    pass_the_window(&app, &swept_id).await;
    let (_, swept) = app.post("/api/assignments/sweep", Some(a), json!({ "limit": 10 })).await;
    assert_eq!(swept["data"]["fell_to_backup"], 1, "{swept}");
    assert_eq!(swept["data"]["record_ids"], json!([swept_id]));
    let (_, swept) = app.post("/api/assignments/sweep", Some(&t.b_token), json!({})).await;
    assert_eq!(swept["data"]["swept"], 0);

    // A window of 0: primary and backup at once, no expiry.
    let (_, r) = app.post("/api/assignments", Some(a), offer(0)).await;
    assert_eq!(
        (r["data"]["stage"].as_str(), r["data"]["offer_expires_at"].clone(), r["data"]["current_persona_id"].clone()),
        (Some("simultaneous"), Value::Null, Value::Null)
    );
    let both = r["data"]["record_id"].as_str().unwrap().to_string();
    let (s, r) = app.post(&format!("/api/assignments/{both}/accept"), Some(a), json!({ "persona_id": backup })).await;
    assert_eq!((s, r["data"]["current_persona_id"].as_str()), (StatusCode::OK, Some(backup.as_str())));

    // A record may name a decision of its own tenant only.
    let (_, d) = app.post("/api/assignment/routes", Some(&t.b_token), json!({ "name": "b", "rules": [{ "name": "any" }], "activate": true })).await;
    assert_eq!(d["data"]["active"], true);
    let (_, b_decision) = app.post("/api/assignment/route", Some(&t.b_token), json!({ "rule_set_name": "b" })).await;
    let mut foreign = offer(5);
    foreign["routing_decision_id"] = b_decision["data"]["decision_id"].clone();
    let b = assert_error(app.post("/api/assignments", Some(a), foreign).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["routing_decision_id is not a decision of this tenant"]));
    let b = assert_error(
        app.post("/api/assignments", Some(a), json!({ "primary_persona_id": primary, "backup_persona_id": primary, "acceptance_window_minutes": 99999 })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["subject_ref is required", "acceptance_window_minutes must be an integer from 0 to 10080"]));
    let b = assert_error(
        app.post("/api/assignments", Some(a), json!({ "subject_ref": "s", "primary_persona_id": primary, "backup_persona_id": primary })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["backup_persona_id must differ from primary_persona_id"]));

    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(count(&events, "assignment.offer.created.v1"), 4);
    assert_eq!(count(&events, "assignment.offer.accepted.v1"), 2);
    assert_eq!(count(&events, "assignment.offer.declined.v1"), 1);
    assert_eq!(count(&events, "assignment.offer.reassigned.v1"), 1);
    assert_eq!(count(&events, "assignment.offer.expired.v1"), 3);
}
db_test!(offers_fall_to_the_backup_and_keep_their_history);

async fn a_workers_offers_are_listed(app: TestApp) {
    let t = app.two_tenants("asg-list").await;
    let a = t.a_token.as_str();
    let p = personas(&app, a, 3).await;
    let (worker, backup, other) = (&p[0], &p[1], &p[2]);
    let offer = |subject: &str, primary: &str, window: i64| json!({ "subject_ref": subject, "primary_persona_id": primary, "backup_persona_id": backup, "acceptance_window_minutes": window });
    let mut ids = Vec::new();
    for body in [offer("job-1", worker, 30), offer("job-2", other, 30), offer("job-3", worker, 30), offer("job-4", other, 0)] {
        let (s, r) = app.post("/api/assignments", Some(a), body).await;
        assert_eq!(s, StatusCode::CREATED, "{r}");
        ids.push(r["data"]["record_id"].as_str().unwrap().to_string());
    }
    let (s, r) = app.post(&format!("/api/assignments/{}/accept", ids[2]), Some(a), json!({ "persona_id": worker })).await;
    assert_eq!((s, r["data"]["state"].as_str()), (StatusCode::OK, Some("accepted")));
    let listed = |v: &Value| v["data"].as_array().unwrap().iter().map(|r| r["record_id"].as_str().unwrap().to_string()).collect::<Vec<_>>();

    let (s, all) = app.get("/api/assignments", Some(a)).await;
    assert_eq!(s, StatusCode::OK, "{all}");
    assert_eq!((listed(&all), all["total"].as_i64()), (vec![ids[3].clone(), ids[2].clone(), ids[1].clone(), ids[0].clone()], Some(4)), "newest first");
    // Each with its history, as read one by one.
    let (_, one) = app.get(&format!("/api/assignments/{}", ids[2]), Some(a)).await;
    assert_eq!(all["data"][1], one["data"]);
    assert_eq!(all["data"][1]["history"].as_array().unwrap().len(), 2);
    for (query, expected) in [
        // A worker's open offers.
        (format!("state=offered&persona_id={worker}"), vec![ids[0].clone()]),
        (format!("persona_id={}", worker.to_uppercase()), vec![ids[2].clone(), ids[0].clone()]),
        // Offered to primary and backup at once: the backup's too.
        (format!("state=offered&persona_id={backup}"), vec![ids[3].clone()]),
        ("subject_ref=job-2".to_string(), vec![ids[1].clone()]),
        ("state=accepted".to_string(), vec![ids[2].clone()]),
        ("state=expired".to_string(), vec![]),
    ] {
        let (s, page) = app.get(&format!("/api/assignments?{query}"), Some(a)).await;
        assert_eq!(s, StatusCode::OK, "{page}");
        assert_eq!((listed(&page), page["total"].as_i64()), (expected.clone(), Some(expected.len() as i64)), "{query}");
    }
    let (_, paged) = app.get("/api/assignments?limit=2&offset=1", Some(a)).await;
    assert_eq!((listed(&paged), paged["total"].as_i64()), (vec![ids[2].clone(), ids[1].clone()], Some(4)));
    let b = assert_error(app.get("/api/assignments?state=open&persona_id=me", Some(a)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["state must be one of: offered, reassigned, accepted, declined, expired", "persona_id must be a UUID"]));
    let (_, theirs) = app.get("/api/assignments", Some(&t.b_token)).await;
    assert_eq!((theirs["data"].clone(), theirs["total"].as_i64()), (json!([]), Some(0)));
}
db_test!(a_workers_offers_are_listed);

async fn a_workload_is_cleared(app: TestApp) {
    let t = app.two_tenants("asg-wl").await;
    let a = t.a_token.as_str();
    let p = personas(&app, a, 1).await;
    let path = format!("/api/assignment/workload/{}", p[0]);
    let (s, w) = app.call(Method::PUT, &path, Some(a), Some(json!({ "skills": ["x"], "capacity_per_day": 3 }))).await;
    assert_eq!(s, StatusCode::CREATED, "{w}");
    // Another tenant cannot clear it.
    assert_error(app.call(Method::DELETE, &path, Some(&t.b_token), None).await, 404, "NotFound");
    let (s, d) = app.call(Method::DELETE, &path, Some(a), None).await;
    assert_eq!(s, StatusCode::OK, "{d}");
    assert_eq!(d["data"], json!({ "persona_id": p[0], "deleted": true }));
    assert_error(app.get(&path, Some(a)).await, 404, "NotFound");
    assert_error(app.call(Method::DELETE, &path, Some(a), None).await, 404, "NotFound");
    assert_error(app.call(Method::DELETE, "/api/assignment/workload/nope", Some(a), None).await, 404, "NotFound");
    // Set again, it is a first set (201).
    let (s, _) = app.call(Method::PUT, &path, Some(a), Some(json!({}))).await;
    assert_eq!(s, StatusCode::CREATED);
    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(count(&events, "assignment.workload.updated.v1"), 3);
}
db_test!(a_workload_is_cleared);
