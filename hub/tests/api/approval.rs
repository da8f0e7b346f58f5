//! sdk-approval: routes of ordered steps, requests walking them, decisions
//! by each step's approver only, and the inbox of pending requests.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

/// A member of the owner's tenant holding the owner's role: (token, persona).
async fn approver(app: &TestApp, owner: &str, t: &Value, email: &str) -> (String, String) {
    let (token, persona) = app.member(owner, &t["tenant_id"], email).await;
    let role = app.owner_template(owner, t["persona_id"].as_str().unwrap()).await;
    let (s, g) = app.post("/api/role-assignments", Some(owner), json!({ "persona_id": persona, "role_template_id": role })).await;
    assert_eq!(s, StatusCode::CREATED, "{g}");
    (token, persona)
}

async fn a_request_walks_its_steps_in_order_decided_by_each_approver(app: TestApp) {
    let t = app.two_tenants("approval").await;
    let owner = t.a_token.as_str();
    let (first, first_persona) = approver(&app, owner, &t.a, "first@approval.example.com").await;
    let (second, second_persona) = approver(&app, owner, &t.a, "second@approval.example.com").await;
    let (s, route) = app
        .post(
            "/api/approvals/routes",
            Some(owner),
            json!({ "name": "refunds", "steps": [
                { "approver_persona_id": first_persona, "sla_minutes": 30, "name": "team lead" },
                { "approver_persona_id": second_persona, "sla_minutes": 120 }
            ] }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{route}");
    assert_eq!((route["data"]["status"].as_str(), route["data"]["sla_minutes"].as_i64()), (Some("active"), Some(120)));
    assert_eq!(route["data"]["steps"][1]["name"], "step 2");
    let route_id = route["data"]["route_id"].as_str().unwrap();
    assert_error(
        app.post("/api/approvals/routes", Some(owner), json!({ "name": "refunds", "steps": [{ "approver_persona_id": first_persona }] })).await,
        409,
        "Conflict",
    );

    let open = |subject: &str| json!({ "route_id": route_id, "subject_kind": "refund", "subject_id": subject, "reason": "customer asked" });
    let (s, r1) = app.post("/api/approvals/requests", Some(owner), open("r-1")).await;
    assert_eq!(s, StatusCode::CREATED, "{r1}");
    assert_eq!(r1["data"]["status"], "pending");
    let steps = r1["data"]["steps"].as_array().unwrap();
    assert_eq!(steps.iter().map(|s| (s["seq"].as_i64().unwrap(), s["status"].as_str().unwrap())).collect::<Vec<_>>(), [(1, "pending"), (2, "pending")]);
    let (_, r2) = app.post("/api/approvals/requests", Some(owner), open("r-2")).await;
    let (id1, id2) = (r1["data"]["request_id"].as_str().unwrap(), r2["data"]["request_id"].as_str().unwrap());
    let step = |r: &Value, i: usize| r["data"]["steps"][i]["step_id"].as_str().unwrap().to_string();
    let decide = |id: &str, step: &str| format!("/api/approvals/requests/{id}/steps/{step}/decision");

    // The inbox: pending requests, oldest first; narrowed to a persona's undecided steps.
    let tenant = t.a["tenant_id"].as_str().unwrap();
    let (s, inbox) = app.get(&format!("/api/approvals/inbox?tenant_id={tenant}"), Some(owner)).await;
    assert_eq!((s, inbox["total"].as_i64()), (StatusCode::OK, Some(2)), "{inbox}");
    assert_eq!(inbox["data"][0]["request_id"].as_str(), Some(id1));

    // Not the approver: 403. Out of order: 409. Bad decision: 400.
    let b = assert_error(app.post(&decide(id1, &step(&r1, 0)), Some(&second), json!({ "decision": "approved" })).await, 403, "Forbidden");
    assert_eq!(b["details"], json!(["only the step's approver persona decides it"]));
    assert_error(app.post(&decide(id1, &step(&r1, 1)), Some(&second), json!({ "decision": "approved" })).await, 409, "Conflict");
    let b = assert_error(app.post(&decide(id1, &step(&r1, 0)), Some(&first), json!({ "decision": "maybe" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["decision must be one of: approved, rejected"]));

    let (s, d) = app.post(&decide(id1, &step(&r1, 0)), Some(&first), json!({ "decision": "approved", "comment": "fine" })).await;
    assert_eq!(s, StatusCode::OK, "{d}");
    assert_eq!((d["data"]["status"].as_str(), d["data"]["steps"][0]["status"].as_str()), (Some("pending"), Some("approved")));
    assert_eq!(d["data"]["steps"][0]["decided_by"].as_str(), Some(first_persona.as_str()));
    assert_error(app.post(&decide(id1, &step(&r1, 0)), Some(&first), json!({ "decision": "rejected" })).await, 409, "Conflict");
    // The first approver has nothing left to decide on r-1, still on r-2.
    let (_, mine) = app.get(&format!("/api/approvals/inbox?tenant_id={tenant}&assignee_persona_id={first_persona}"), Some(owner)).await;
    assert_eq!(mine["data"].as_array().unwrap().iter().map(|r| r["request_id"].as_str().unwrap()).collect::<Vec<_>>(), [id2]);
    let (_, theirs) = app.get(&format!("/api/approvals/inbox?tenant_id={tenant}&assignee_persona_id={second_persona}"), Some(owner)).await;
    assert_eq!(theirs["total"], 2);

    let (_, d) = app.post(&decide(id1, &step(&r1, 1)), Some(&second), json!({ "decision": "approved" })).await;
    assert_eq!(d["data"]["status"], "approved");
    assert!(d["data"]["resolved_at"].is_string());
    // A rejection ends the request; the later step is skipped.
    let (_, d) = app.post(&decide(id2, &step(&r2, 0)), Some(&first), json!({ "decision": "rejected" })).await;
    assert_eq!((d["data"]["status"].as_str(), d["data"]["steps"][1]["status"].as_str()), (Some("rejected"), Some("skipped")));
    let (_, inbox) = app.get(&format!("/api/approvals/inbox?tenant_id={tenant}"), Some(owner)).await;
    assert_eq!(inbox["total"], 0);
    let (s, read) = app.get(&format!("/api/approvals/requests/{id2}"), Some(owner)).await;
    assert_eq!((s, read["data"]["status"].as_str()), (StatusCode::OK, Some("rejected")));

    // Another tenant sees none of it.
    assert_error(app.get(&format!("/api/approvals/requests/{id1}"), Some(&t.b_token)).await, 404, "NotFound");
    assert_error(app.post(&decide(id1, &step(&r1, 1)), Some(&t.b_token), json!({ "decision": "approved" })).await, 404, "NotFound");
    assert_error(app.post("/api/approvals/requests", Some(&t.b_token), open("x")).await, 400, "ValidationError");
    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |e: &str| events.iter().filter(|x| *x == e).count();
    assert_eq!([count("approval.route.created.v1"), count("approval.request.created.v1"), count("approval.step.decided.v1")], [1, 2, 3]);
    assert_eq!([count("approval.request.approved.v1"), count("approval.request.rejected.v1")], [1, 1]);
}
db_test!(a_request_walks_its_steps_in_order_decided_by_each_approver);

async fn approval_input_is_checked_before_anything_is_stored(app: TestApp) {
    let t = app.two_tenants("approval-input").await;
    let a = t.a_token.as_str();
    let b = assert_error(app.post("/api/approvals/routes", Some(a), json!({ "steps": [] })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["name is required", "steps must hold 1 to 20 items"]));
    let b = assert_error(app.post("/api/approvals/routes", Some(a), json!({ "name": "x", "steps": {} })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["steps must be an array"]));
    let b = assert_error(
        app.post("/api/approvals/routes", Some(a), json!({ "name": "x", "steps": [{ "approver_persona_id": "nope", "sla_minutes": 0 }, { "name": 7 }] })).await,
        400,
        "ValidationError",
    );
    assert_eq!(
        b["details"],
        json!([
            "steps[0].approver_persona_id must be a UUID",
            "steps[0].sla_minutes must be an integer from 1 to 100800",
            "steps[1].approver_persona_id is required",
            "steps[1].name must be a string"
        ])
    );
    // Another tenant's persona is no approver here.
    let b = assert_error(
        app.post("/api/approvals/routes", Some(a), json!({ "name": "x", "steps": [{ "approver_persona_id": t.b["persona_id"] }] })).await,
        400,
        "ValidationError",
    );
    assert_eq!(b["details"], json!(["steps[0].approver_persona_id is not a persona of this tenant"]));
    let b = assert_error(app.post("/api/approvals/requests", Some(a), json!({ "route_id": "r" })).await, 400, "ValidationError");
    assert_eq!(b["details"], json!(["route_id must be a UUID", "subject_kind is required", "subject_id is required"]));
    // The inbox's tenant_id is required and the caller's.
    assert_error(app.get("/api/approvals/inbox", Some(a)).await, 400, "ValidationError");
    assert_error(app.get(&format!("/api/approvals/inbox?tenant_id={}", t.b["tenant_id"].as_str().unwrap()), Some(a)).await, 403, "TenantMismatch");
    let tenant = t.a["tenant_id"].as_str().unwrap();
    assert_error(app.get(&format!("/api/approvals/inbox?tenant_id={tenant}&assignee_persona_id=x"), Some(a)).await, 400, "ValidationError");
    assert_error(app.get(&format!("/api/approvals/inbox?tenant_id={tenant}&limit=many"), Some(a)).await, 400, "ValidationError");
    assert!(app.events_of(&t.a["tenant_id"]).await.iter().all(|e| !e.starts_with("approval.")));
}
db_test!(approval_input_is_checked_before_anything_is_stored);

async fn routes_are_listed_read_and_retired_and_requests_listed_and_cancelled(app: TestApp) {
    let t = app.two_tenants("approval-life").await;
    let (owner, b) = (t.a_token.as_str(), t.b_token.as_str());
    let (member, member_persona) = approver(&app, owner, &t.a, "member@approval-life.example.com").await;
    let route = |name: &str| json!({ "name": name, "steps": [{ "approver_persona_id": member_persona }, { "approver_persona_id": t.a["persona_id"] }] });
    let (_, first) = app.post("/api/approvals/routes", Some(owner), route("first")).await;
    let (_, second) = app.post("/api/approvals/routes", Some(owner), route("second")).await;
    let (first_id, second_id) = (first["data"]["route_id"].as_str().unwrap(), second["data"]["route_id"].as_str().unwrap());

    // Routes: newest first, filtered by status; read one.
    let (s, list) = app.get("/api/approvals/routes", Some(owner)).await;
    assert_eq!((s, list["total"].as_i64()), (StatusCode::OK, Some(2)), "{list}");
    assert_eq!(list["data"].as_array().unwrap().iter().map(|r| r["route_id"].as_str().unwrap()).collect::<Vec<_>>(), [second_id, first_id]);
    let (_, one) = app.get(&format!("/api/approvals/routes/{first_id}"), Some(owner)).await;
    assert_eq!(one["data"], first["data"]);

    // Requests: pending and decided alike, filtered.
    let open = |route_id: &str, subject: &str| json!({ "route_id": route_id, "subject_kind": "refund", "subject_id": subject });
    let (_, r1) = app.post("/api/approvals/requests", Some(owner), open(first_id, "r-1")).await;
    let (_, r2) = app.post("/api/approvals/requests", Some(&member), open(first_id, "r-2")).await;
    let (_, r3) = app.post("/api/approvals/requests", Some(owner), json!({ "route_id": second_id, "subject_kind": "order", "subject_id": "o-1" })).await;
    let (id1, id2, id3) = (r1["data"]["request_id"].as_str().unwrap(), r2["data"]["request_id"].as_str().unwrap(), r3["data"]["request_id"].as_str().unwrap());
    let step = r3["data"]["steps"][0]["step_id"].as_str().unwrap();
    let (s, d) = app.post(&format!("/api/approvals/requests/{id3}/steps/{step}/decision"), Some(&member), json!({ "decision": "rejected" })).await;
    assert_eq!((s, d["data"]["status"].as_str()), (StatusCode::OK, Some("rejected")));
    let ids = |v: &Value| v["data"].as_array().unwrap().iter().map(|r| r["request_id"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    let (s, all) = app.get("/api/approvals/requests", Some(owner)).await;
    assert_eq!((s, all["total"].as_i64(), ids(&all)), (StatusCode::OK, Some(3), vec![id3.to_string(), id2.to_string(), id1.to_string()]), "{all}");
    assert!(all["data"][0].get("steps").is_none(), "{all}");
    let (_, rejected) = app.get("/api/approvals/requests?status=rejected", Some(owner)).await;
    assert_eq!(ids(&rejected), [id3]);
    let (_, refunds) = app.get("/api/approvals/requests?subject_kind=refund&subject_id=r-2", Some(owner)).await;
    assert_eq!(ids(&refunds), [id2]);
    let member_person = r2["data"]["requested_by"].as_str().unwrap();
    let (_, by) = app.get(&format!("/api/approvals/requests?requested_by={member_person}"), Some(owner)).await;
    assert_eq!((by["total"].as_i64(), ids(&by)), (Some(1), vec![id2.to_string()]));
    let (_, paged) = app.get("/api/approvals/requests?limit=1&offset=2", Some(owner)).await;
    assert_eq!((paged["total"].as_i64(), ids(&paged)), (Some(3), vec![id1.to_string()]));
    for bad in ["status=open", "requested_by=someone", "offset=-1"] {
        assert_error(app.get(&format!("/api/approvals/requests?{bad}"), Some(owner)).await, 400, "ValidationError");
    }
    assert_error(app.get("/api/approvals/routes?status=gone", Some(owner)).await, 400, "ValidationError");

    // Cancel: the requester only, a pending request only, once.
    let body = assert_error(app.post(&format!("/api/approvals/requests/{id2}/cancel"), Some(owner), json!({})).await, 403, "Forbidden");
    assert_eq!(body["details"], json!(["only the request's requester cancels it"]));
    let (s, c) = app.post(&format!("/api/approvals/requests/{id2}/cancel"), Some(&member), json!({})).await;
    assert_eq!((s, c["data"]["status"].as_str()), (StatusCode::OK, Some("cancelled")), "{c}");
    assert!(c["data"]["resolved_at"].is_string());
    assert!(c["data"]["steps"].as_array().unwrap().iter().all(|s| s["status"] == "skipped"), "{c}");
    let body = assert_error(app.post(&format!("/api/approvals/requests/{id2}/cancel"), Some(&member), json!({})).await, 409, "Conflict");
    assert_eq!(body["details"], json!(["the request is cancelled: only a pending request can be cancelled"]));
    let body = assert_error(app.post(&format!("/api/approvals/requests/{id3}/cancel"), Some(owner), json!({})).await, 409, "Conflict");
    assert_eq!(body["details"], json!(["the request is rejected: only a pending request can be cancelled"]));
    let s1 = c["data"]["steps"][0]["step_id"].as_str().unwrap();
    assert_error(
        app.post(&format!("/api/approvals/requests/{id2}/steps/{s1}/decision"), Some(&member), json!({ "decision": "approved" })).await,
        409,
        "Conflict",
    );
    let (_, cancelled) = app.get("/api/approvals/requests?status=cancelled", Some(owner)).await;
    assert_eq!(ids(&cancelled), [id2]);

    // Retire: no new request on it; the open one goes on; again: the same answer.
    let (s, r) = app.post(&format!("/api/approvals/routes/{first_id}/retire"), Some(owner), json!({})).await;
    assert_eq!((s, r["data"]["status"].as_str()), (StatusCode::OK, Some("retired")), "{r}");
    let (s, again) = app.post(&format!("/api/approvals/routes/{first_id}/retire"), Some(owner), json!({})).await;
    assert_eq!((s, &again["data"]), (StatusCode::OK, &r["data"]));
    let body = assert_error(app.post("/api/approvals/requests", Some(owner), open(first_id, "r-4")).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["route_id is not an active approval route of this tenant"]));
    let s1 = r1["data"]["steps"][0]["step_id"].as_str().unwrap();
    let (s, _) = app.post(&format!("/api/approvals/requests/{id1}/steps/{s1}/decision"), Some(&member), json!({ "decision": "approved" })).await;
    assert_eq!(s, StatusCode::OK);
    let (_, retired) = app.get("/api/approvals/routes?status=retired", Some(owner)).await;
    assert_eq!((retired["total"].as_i64(), retired["data"][0]["route_id"].as_str()), (Some(1), Some(first_id)));
    let (_, active) = app.get("/api/approvals/routes?status=active", Some(owner)).await;
    assert_eq!((active["total"].as_i64(), active["data"][0]["route_id"].as_str()), (Some(1), Some(second_id)));

    // Another tenant sees and changes none of it.
    let (_, theirs) = app.get("/api/approvals/routes", Some(b)).await;
    assert_eq!(theirs["total"], 0);
    let (_, theirs) = app.get("/api/approvals/requests", Some(b)).await;
    assert_eq!(theirs["total"], 0);
    assert_error(app.get(&format!("/api/approvals/routes/{second_id}"), Some(b)).await, 404, "NotFound");
    assert_error(app.post(&format!("/api/approvals/routes/{second_id}/retire"), Some(b), json!({})).await, 404, "NotFound");
    assert_error(app.post(&format!("/api/approvals/requests/{id1}/cancel"), Some(b), json!({})).await, 404, "NotFound");
    assert_error(app.get("/api/approvals/routes/not-a-route", Some(owner)).await, 404, "NotFound");
    assert_error(app.post(&format!("/api/approvals/routes/{}/retire", uuid::Uuid::now_v7()), Some(owner), json!({})).await, 404, "NotFound");

    let events = app.events_of(&t.a["tenant_id"]).await;
    let count = |e: &str| events.iter().filter(|x| *x == e).count();
    assert_eq!([count("approval.route.retired.v1"), count("approval.request.cancelled.v1")], [1, 1]);
}
db_test!(routes_are_listed_read_and_retired_and_requests_listed_and_cancelled);
