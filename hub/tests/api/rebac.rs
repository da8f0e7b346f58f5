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
