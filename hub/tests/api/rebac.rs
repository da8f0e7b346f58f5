//! sdk-rebac: relationship tuples between personas, the reachability
//! check with its budget, and the gate's ReBAC step.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

async fn persona(app: &TestApp, token: &str) -> String {
    let (s, p) = app.post("/api/personas", Some(token), json!({ "kind": "service" })).await;
    assert_eq!(s, StatusCode::CREATED, "{p}");
    p["data"]["persona_id"].as_str().unwrap().to_string()
}

fn tuple(s: &str, relation: &str, o: &str) -> Value {
    json!({ "subject_persona_id": s, "relation": relation, "object_persona_id": o })
}

fn check(s: &str, relation: &str, t: &str, budget: Value) -> Value {
    json!({ "subject_persona_id": s, "relation": relation, "target_persona_id": t, "budget": budget })
}

async fn checks_walk_relationships_of_one_kind_within_their_budget(app: TestApp) {
    let t = app.two_tenants("rebac").await;
    let a = t.a_token.as_str();
    let mut p = Vec::new();
    for _ in 0..5 {
        p.push(persona(&app, a).await);
    }
    // p0 -> p1 -> p2 -> p3, a cycle p3 -> p1, and p0 -> p4 of another kind.
    for (s, o) in [(0, 1), (1, 2), (2, 3), (3, 1)] {
        let (st, r) = app.post("/api/rebac/relationships", Some(a), tuple(&p[s], "manages", &p[o])).await;
        assert_eq!(st, StatusCode::CREATED, "{r}");
    }
    let (st, r) = app.post("/api/rebac/relationships", Some(a), tuple(&p[0], "manages", &p[1])).await;
    assert_eq!((st, r["data"]["relation"].as_str()), (StatusCode::OK, Some("manages")), "a repeated write changes nothing");
    app.post("/api/rebac/relationships", Some(a), tuple(&p[0], "audits", &p[4])).await;

    let (st, d) = app.post("/api/rebac/check", Some(a), check(&p[0], "manages", &p[3], Value::Null)).await;
    assert_eq!(st, StatusCode::OK, "{d}");
    assert_eq!((d["data"]["decision"].as_str(), d["data"]["allowed"].as_bool()), (Some("allow"), Some(true)));
    assert_eq!(d["data"]["path"], json!([p[0], p[1], p[2], p[3]]));
    assert_eq!(d["data"]["budget"], json!({ "max_depth": 25, "max_nodes": 10000, "depth_used": 3, "nodes_visited": 4, "exhausted": false }));
    // The cycle ends; another kind does not count.
    let (_, d) = app.post("/api/rebac/check", Some(a), check(&p[1], "manages", &p[0], Value::Null)).await;
    assert_eq!((d["data"]["decision"].as_str(), d["data"]["budget"]["nodes_visited"].as_i64()), (Some("deny"), Some(3)));
    let (_, d) = app.post("/api/rebac/check", Some(a), check(&p[0], "manages", &p[4], Value::Null)).await;
    assert_eq!(d["data"]["decision"], "deny");
    // A budget too small to decide says so.
    let (_, d) = app.post("/api/rebac/check", Some(a), check(&p[0], "manages", &p[3], json!({ "max_depth": 2 }))).await;
    assert_eq!(
        (d["data"]["decision"].as_str(), d["data"]["allowed"].as_bool(), d["data"]["budget"]["exhausted"].as_bool()),
        (Some("indeterminate"), Some(false), Some(true))
    );
    let (_, d) = app.post("/api/rebac/check", Some(a), check(&p[0], "manages", &p[3], json!({ "max_nodes": 2 }))).await;
    assert_eq!((d["data"]["decision"].as_str(), d["data"]["budget"]["nodes_visited"].as_i64()), (Some("indeterminate"), Some(2)));

    // Deleting a link cuts the path.
    let (st, r) = app.post("/api/rebac/relationships/delete", Some(a), tuple(&p[1], "manages", &p[2])).await;
    assert_eq!((st, r["data"]["object_persona_id"].as_str()), (StatusCode::OK, Some(p[2].as_str())));
    let (_, d) = app.post("/api/rebac/check", Some(a), check(&p[0], "manages", &p[3], Value::Null)).await;
    assert_eq!(d["data"]["decision"], "deny");
    assert_error(app.post("/api/rebac/relationships/delete", Some(a), tuple(&p[1], "manages", &p[2])).await, 404, "NotFound");

    // Tenants do not see each other's personas or tuples.
    let b = assert_error(app.post("/api/rebac/relationships", Some(&t.b_token), tuple(&p[0], "manages", &p[1])).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["subject_persona_id is not a persona of this tenant", "object_persona_id is not a persona of this tenant"]));
    let (_, d) = app.post("/api/rebac/check", Some(&t.b_token), check(&p[0], "manages", &p[1], Value::Null)).await;
    assert_eq!(d["data"]["decision"], "deny");

    let b = assert_error(
        app.post("/api/rebac/relationships", Some(a), json!({ "subject_persona_id": "x", "relation": "Has Space" })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["subject_persona_id must be a UUID", "object_persona_id is required"]));
    let b = assert_error(app.post("/api/rebac/relationships", Some(a), tuple(&p[0], "Has Space", &p[1])).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["relation must be 1 to 128 of a-z, 0-9, '.', '_', '-'"]));
    let b = assert_error(app.post("/api/rebac/check", Some(a), check(&p[0], "Has Space", &p[1], Value::Null)).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["relation must be 1 to 128 of a-z, 0-9, '.', '_', '-'"]));
    let b = assert_error(
        app.post("/api/rebac/check", Some(a), check(&p[0], "manages", &p[1], json!({ "max_depth": 0, "max_nodes": "many" }))).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["budget.max_depth must be an integer from 1 to 100", "budget.max_nodes must be an integer from 1 to 1000000"]));
    let b = assert_error(app.post("/api/rebac/check", Some(a), json!({ "relation": "manages", "budget": 3 })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["subject_persona_id is required", "target_persona_id is required", "budget must be a JSON object"]));

    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |e: &str| events.iter().filter(|x| *x == e).count();
    assert_eq!((count("rebac.relationship.created.v1"), count("rebac.relationship.deleted.v1")), (5, 1));
}
db_test!(checks_walk_relationships_of_one_kind_within_their_budget);

async fn the_gate_lets_a_relationship_grant_what_a_role_does_not(app: TestApp) {
    let t = app.signup("lead@rebac-gate.example.com", "rebac-gate").await;
    let owner = t["token"].as_str().unwrap();
    let (member, member_persona) = app.member(owner, &t["tenant_id"], "member@rebac-gate.example.com").await;
    let (report, other) = (persona(&app, owner).await, persona(&app, owner).await);
    let read = |p: &str| format!("/api/personas/{p}");
    // RBAC: a member holds no role.
    let b = assert_error(app.get(&read(&report), Some(&member)).await, 403, "Forbidden");
    assert_eq!(b["required_scopes"], json!(["persona.persona.read"]));
    // ReBAC: the member manages `report`, through a relationship of the route's scope.
    let (s, _) = app.post("/api/rebac/relationships", Some(owner), tuple(&member_persona, "persona.persona.read", &report)).await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, p) = app.get(&read(&report), Some(&member)).await;
    assert_eq!((s, p["data"]["persona_id"].as_str()), (StatusCode::OK, Some(report.as_str())));
    // Only that persona, only that scope.
    assert_error(app.get(&read(&other), Some(&member)).await, 403, "Forbidden");
    assert_error(app.post(&format!("/api/personas/{report}/shred"), Some(&member), json!({})).await, 403, "Forbidden");
    // Through a chain of the same kind, too; and no longer once it is cut.
    app.post("/api/rebac/relationships", Some(owner), tuple(&report, "persona.persona.read", &other)).await;
    assert_eq!(app.get(&read(&other), Some(&member)).await.0, StatusCode::OK);
    app.post("/api/rebac/relationships/delete", Some(owner), tuple(&member_persona, "persona.persona.read", &report)).await;
    assert_error(app.get(&read(&report), Some(&member)).await, 403, "Forbidden");
    assert_error(app.get(&read(&other), Some(&member)).await, 403, "Forbidden");
}
db_test!(the_gate_lets_a_relationship_grant_what_a_role_does_not);

/// A relationship gives authority only to an active persona: once the
/// member's membership is revoked (its personas with it), the tuple stays
/// on record and reaches nothing.
async fn a_revoked_persona_reaches_nothing_through_its_relationships(app: TestApp) {
    let t = app.signup("lead@rebac-revoked.example.com", "rebac-revoked").await;
    let owner = t["token"].as_str().unwrap();
    let (member, member_persona) = app.member(owner, &t["tenant_id"], "member@rebac-revoked.example.com").await;
    let report = persona(&app, owner).await;
    let read = format!("/api/personas/{report}");
    let (s, _) = app.post("/api/rebac/relationships", Some(owner), tuple(&member_persona, "persona.persona.read", &report)).await;
    assert_eq!(s, StatusCode::CREATED);
    assert_eq!(app.get(&read, Some(&member)).await.0, StatusCode::OK);
    let (s, p) = app.get(&format!("/api/personas/{member_persona}"), Some(owner)).await;
    assert_eq!(s, StatusCode::OK, "{p}");
    let membership = p["data"]["membership_id"].as_str().unwrap();
    let (s, r) = app.post(&format!("/api/memberships/{membership}/revoke"), Some(owner), json!({})).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let b = assert_error(app.get(&read, Some(&member)).await, 403, "Forbidden");
    assert_eq!(b["required_scopes"], json!(["persona.persona.read"]));
    // The tuple itself is still listed, for the audit.
    let (s, l) = app.get(&format!("/api/rebac/relationships?subject_persona_id={member_persona}"), Some(owner)).await;
    assert_eq!((s, l["total"].as_i64()), (StatusCode::OK, Some(1)), "{l}");
}
db_test!(a_revoked_persona_reaches_nothing_through_its_relationships);

async fn relationships_are_listed_to_be_audited(app: TestApp) {
    let t = app.two_tenants("rebac-list").await;
    let a = t.a_token.as_str();
    let mut p = Vec::new();
    for _ in 0..3 {
        p.push(persona(&app, a).await);
    }
    for (s, relation, o) in [(0, "manages", 1), (1, "manages", 2), (0, "audits", 2)] {
        let (st, r) = app.post("/api/rebac/relationships", Some(a), tuple(&p[s], relation, &p[o])).await;
        assert_eq!(st, StatusCode::CREATED, "{r}");
    }
    let b_persona = persona(&app, &t.b_token).await;
    let (st, _) = app.post("/api/rebac/relationships", Some(&t.b_token), tuple(t.b["persona_id"].as_str().unwrap(), "manages", &b_persona)).await;
    assert_eq!(st, StatusCode::CREATED);

    let pairs = |v: &Value| {
        v["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["subject_persona_id"].as_str().unwrap().to_string(), r["relation"].as_str().unwrap().to_string()))
            .collect::<Vec<_>>()
    };
    let (s, all) = app.get("/api/rebac/relationships", Some(a)).await;
    assert_eq!((s, all["total"].as_i64()), (StatusCode::OK, Some(3)), "{all}");
    assert_eq!(pairs(&all), [(p[0].clone(), "audits".to_string()), (p[1].clone(), "manages".to_string()), (p[0].clone(), "manages".to_string())]);
    assert_eq!(all["data"][2]["object_persona_id"].as_str(), Some(p[1].as_str()));
    assert!(all["data"][0]["created_by"].is_string());
    let (_, managed) = app.get("/api/rebac/relationships?relation=manages", Some(a)).await;
    assert_eq!(managed["total"], 2);
    let (_, from0) = app.get(&format!("/api/rebac/relationships?subject_persona_id={}", p[0]), Some(a)).await;
    assert_eq!(from0["total"], 2);
    let (_, to2) = app.get(&format!("/api/rebac/relationships?object_persona_id={}&relation=manages", p[2].to_uppercase()), Some(a)).await;
    assert_eq!(pairs(&to2), [(p[1].clone(), "manages".to_string())]);
    let (_, page) = app.get("/api/rebac/relationships?limit=1&offset=2", Some(a)).await;
    assert_eq!((page["total"].as_i64(), pairs(&page)), (Some(3), vec![(p[0].clone(), "manages".to_string())]));
    let body = assert_error(app.get("/api/rebac/relationships?relation=Not%20A%20Relation", Some(a)).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["relation must be 1 to 128 of a-z, 0-9, '.', '_', '-'"]));
    assert_error(app.get("/api/rebac/relationships?subject_persona_id=someone", Some(a)).await, 400, "ValidationError");

    // A deleted relationship leaves the list; the other tenant's never was in it.
    let (st, _) = app.post("/api/rebac/relationships/delete", Some(a), tuple(&p[0], "audits", &p[2])).await;
    assert_eq!(st, StatusCode::OK);
    let (_, all) = app.get("/api/rebac/relationships", Some(a)).await;
    assert_eq!(all["total"], 2);
    let (_, theirs) = app.get("/api/rebac/relationships", Some(&t.b_token)).await;
    assert_eq!((theirs["total"].as_i64(), theirs["data"][0]["object_persona_id"].as_str()), (Some(1), Some(b_persona.as_str())));
}
db_test!(relationships_are_listed_to_be_audited);
