//! sdk-agent-runtime: agent definitions and runs, lists scoped to the
//! caller's tenant, TTL deadlines, agent chains and the audited start.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::{db_test, helpers::*};

pub async fn new_agent(app: &TestApp, token: &str, persona: &str, tier: &str, ttl: i64) -> Value {
    let (s, body) = app
        .post(
            "/api/agent-runtime/agents",
            Some(token),
            json!({
                "name": "Summariser", "description": "summarises calls", "acting_persona_id": persona, "agent_scope": ["crm.call.read"],
                "default_ttl_seconds": ttl, "tier": tier, "vector_namespace": "calls", "tool_manifest": ["search", "summarise"],
                "created_by": "ada",
            }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    body["data"].clone()
}

async fn agents_are_created_validated_and_listed_for_their_tenant_only(app: TestApp) {
    let a = app.signup("ag-a@example.com", "ag-a").await;
    let b = app.signup("ag-b@example.com", "ag-b").await;
    let (ta, tb) = (a["token"].as_str().unwrap(), b["token"].as_str().unwrap());
    let persona = a["persona_id"].as_str().unwrap();
    let agent = new_agent(&app, ta, persona, "gold", 600).await;
    assert_eq!(agent["tenant_id"], a["tenant_id"]);
    assert_eq!(
        (agent["status"].clone(), agent["default_ttl_seconds"].clone(), agent["tool_manifest"].clone()),
        (json!("active"), json!(600), json!(["search", "summarise"]))
    );
    assert_eq!(
        (agent["agent_scope"].clone(), agent["kill_switch_flag_id"].clone(), agent["created_by"].clone()),
        (json!(["crm.call.read"]), Value::Null, json!("ada"))
    );
    assert!(uuid::Uuid::parse_str(agent["agent_id"].as_str().unwrap()).is_ok());
    new_agent(&app, ta, persona, "silver", 60).await;

    let body = assert_error(app.post("/api/agent-runtime/agents", Some(ta), json!({ "name": " " })).await, 400, "ValidationError");
    assert_eq!(
        body["details"],
        json!(["name is required", "acting_persona_id is required", "tier is required", "vector_namespace is required", "created_by is required"])
    );
    let body = assert_error(app.post("/api/agent-runtime/agents", Some(ta), json!({
        "name": "x", "acting_persona_id": "nope", "tier": "t", "vector_namespace": "v", "created_by": "c", "default_ttl_seconds": 0, "tool_manifest": [1],
    })).await, 400, "ValidationError");
    assert_eq!(
        body["details"],
        json!(["acting_persona_id must be a UUID", "tool_manifest[0] must be a string", "default_ttl_seconds must be an integer from 1 to 604800"])
    );
    // Another tenant's persona cannot act for this tenant's agent.
    let body = assert_error(
        app.post(
            "/api/agent-runtime/agents",
            Some(tb),
            json!({
                "name": "x", "acting_persona_id": persona, "tier": "t", "vector_namespace": "v", "created_by": "c",
            }),
        )
        .await,
        400,
        "ValidationError",
    );
    assert_eq!(body["details"], json!(["acting_persona_id does not name a persona of this tenant"]));

    let (s, list) = app.get("/api/agent-runtime/agents", Some(ta)).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!((list["success"].clone(), list["total"].clone(), list["data"].as_array().unwrap().len()), (json!(true), json!(2), 2));
    let (_, gold) = app.get("/api/agent-runtime/agents?tier=gold", Some(ta)).await;
    assert_eq!((gold["total"].clone(), gold["data"][0]["agent_id"].clone()), (json!(1), agent["agent_id"].clone()));
    let (_, page) = app.get("/api/agent-runtime/agents?limit=1&offset=1", Some(ta)).await;
    assert_eq!((page["total"].clone(), page["data"].as_array().unwrap().len()), (json!(2), 1));
    let (_, own) = app.get(&format!("/api/agent-runtime/agents?tenant_id={}", a["tenant_id"].as_str().unwrap()), Some(ta)).await;
    assert_eq!(own["total"], 2);
    let (_, none) = app.get("/api/agent-runtime/agents?tier=platinum", Some(ta)).await;
    assert_eq!((none["total"].clone(), none["data"].clone()), (json!(0), json!([])));
    // Tenant B sees none of A's agents, and cannot ask for them.
    let (_, theirs) = app.get("/api/agent-runtime/agents", Some(tb)).await;
    assert_eq!((theirs["total"].clone(), theirs["data"].clone()), (json!(0), json!([])));
    assert_error(app.get(&format!("/api/agent-runtime/agents?tenant_id={}", a["tenant_id"].as_str().unwrap()), Some(tb)).await, 403, "TenantMismatch");
    for bad in ["limit=abc", "offset=1x", "limit=-1", "tenant_id=not-a-uuid"] {
        let body = assert_error(app.get(&format!("/api/agent-runtime/agents?{bad}"), Some(ta)).await, 400, "ValidationError");
        assert!(body["details"][0].as_str().unwrap().contains(bad.split('=').next().unwrap()), "{body}");
    }
    // Creation is audited.
    let (s, health) = app.get("/api/agent-runtime/health", None).await;
    assert_eq!((s, health), (StatusCode::OK, json!({ "sdk": "sdk-agent-runtime", "status": "ok" })));
    // sdk-mcp-bridge's probe is public too, whatever credential is sent.
    let (s, bridge) = app.get("/api/mcp-bridge/health", None).await;
    assert_eq!((s, bridge), (StatusCode::OK, json!({ "sdk": "sdk-mcp-bridge", "status": "ok" })));
    let (s, _) = app.get("/api/mcp-bridge/health", Some("not-a-token")).await;
    assert_eq!(s, StatusCode::OK);
}
db_test!(agents_are_created_validated_and_listed_for_their_tenant_only);

async fn runs_carry_deadlines_and_chains_and_their_start_is_audited(app: TestApp) {
    let a = app.signup("run-a@example.com", "run-a").await;
    let b = app.signup("run-b@example.com", "run-b").await;
    let (ta, tb) = (a["token"].as_str().unwrap(), b["token"].as_str().unwrap());
    let persona = a["persona_id"].as_str().unwrap();
    let root_agent = new_agent(&app, ta, persona, "gold", 600).await;
    let child_agent = new_agent(&app, ta, persona, "gold", 3600).await;
    let start = |agent: &Value, parent: Option<&Value>| {
        json!({
            "agent_id": agent["agent_id"], "persona_id": persona, "trace_id": "trace-1", "actor_id": "ada", "actor_kind": "human",
            "parent_run_id": parent.map(|p| p["run_id"].clone()),
        })
    };
    let before = chrono::Utc::now();
    let (s, root) = app.post("/api/agent-runtime/runs", Some(ta), start(&root_agent, None)).await;
    assert_eq!(s, StatusCode::CREATED, "{root}");
    let root = root["data"].clone();
    assert_eq!((root["status"].clone(), root["ttl_seconds"].clone(), root["parent_run_id"].clone()), (json!("active"), json!(600), Value::Null));
    let deadline = hub_kernel::db::parse_time(root["ttl_deadline"].as_str().unwrap()).unwrap();
    let expected = before + chrono::Duration::seconds(600);
    assert!((deadline - expected).num_seconds().abs() <= 5, "{deadline} vs {expected}");
    assert_eq!(root["agent_chain"], json!([{ "run_id": root["run_id"], "agent_id": root_agent["agent_id"], "persona_id": persona }]));

    let (s, child) = app.post("/api/agent-runtime/runs", Some(ta), start(&child_agent, Some(&root))).await;
    assert_eq!(s, StatusCode::CREATED, "{child}");
    let child = child["data"].clone();
    assert_eq!(child["parent_run_id"], root["run_id"]);
    assert_eq!(
        child["agent_chain"],
        json!([
            { "run_id": root["run_id"], "agent_id": root_agent["agent_id"], "persona_id": persona },
            { "run_id": child["run_id"], "agent_id": child_agent["agent_id"], "persona_id": persona },
        ])
    );
    // The child's own TTL is an hour, but it cannot outlive its parent.
    assert_eq!(child["ttl_deadline"], root["ttl_deadline"]);

    // agent.run.started.v1: regulated, the chain as actor provenance.
    let (s, e) = app.admin(Method::GET, &format!("/admin/audit/entries/{}", child["audit_entry_id"].as_str().unwrap())).await;
    assert_eq!(s, StatusCode::OK);
    let e = &e["data"];
    assert_eq!(
        (e["event_type"].clone(), e["retention_class"].clone(), e["tenant_id"].clone()),
        (json!("agent.run.started.v1"), json!("regulated"), a["tenant_id"].clone())
    );
    assert_eq!(e["actor_chain"], child["agent_chain"]);
    assert_eq!((e["payload"]["run_id"].clone(), e["payload"]["trace_id"].clone()), (child["run_id"].clone(), json!("trace-1")));
    let v = app.verify(ta, 0).await;
    assert_eq!((v["ok"].clone(), v["entries_checked"].clone()), (json!(true), json!(5)), "signup, two agents, two runs: {v}");

    let body = assert_error(app.post("/api/agent-runtime/runs", Some(ta), json!({ "agent_id": "x", "actor_kind": "robot" })).await, 400, "ValidationError");
    assert_eq!(
        body["details"],
        json!([
            "agent_id must be a UUID",
            "persona_id is required",
            "trace_id is required",
            "actor_id is required",
            "actor_kind must be one of: human, service, agent",
        ])
    );
    // Tenant B can neither start A's agent nor hang a run under A's run.
    let b_agent = new_agent(&app, tb, b["persona_id"].as_str().unwrap(), "gold", 60).await;
    let mut foreign = start(&root_agent, None);
    foreign["persona_id"] = b["persona_id"].clone();
    let body = assert_error(app.post("/api/agent-runtime/runs", Some(tb), foreign).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["agent_id does not name an agent of this tenant"]));
    let mut under = start(&b_agent, Some(&root));
    under["persona_id"] = b["persona_id"].clone();
    let body = assert_error(app.post("/api/agent-runtime/runs", Some(tb), under).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["parent_run_id does not name a run of this tenant"]));

    let (s, runs) = app.get("/api/agent-runtime/runs", Some(ta)).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!((runs["total"].clone(), runs["data"][0]["run_id"].clone()), (json!(2), child["run_id"].clone()), "newest first");
    let (_, by_agent) = app.get(&format!("/api/agent-runtime/runs?agent_id={}&status=active", root_agent["agent_id"].as_str().unwrap()), Some(ta)).await;
    assert_eq!((by_agent["total"].clone(), by_agent["data"][0]["run_id"].clone()), (json!(1), root["run_id"].clone()));
    let (_, done) = app.get("/api/agent-runtime/runs?status=succeeded", Some(ta)).await;
    assert_eq!(done["data"], json!([]));
    let body = assert_error(app.get("/api/agent-runtime/runs?status=completed", Some(ta)).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["status must be one of: active, succeeded, failed, cancelled, expired"]));
    let (_, theirs) = app.get("/api/agent-runtime/runs", Some(tb)).await;
    assert_eq!((theirs["total"].clone(), theirs["data"].clone()), (json!(0), json!([])));
    let (_, theirs) = app.get(&format!("/api/agent-runtime/runs?agent_id={}", root_agent["agent_id"].as_str().unwrap()), Some(tb)).await;
    assert_eq!(theirs["data"], json!([]));
    assert_error(app.get(&format!("/api/agent-runtime/runs?tenant_id={}", a["tenant_id"].as_str().unwrap()), Some(tb)).await, 403, "TenantMismatch");
    assert_error(app.get("/api/agent-runtime/runs?agent_id=nope", Some(ta)).await, 400, "ValidationError");
    assert_error(app.get("/api/agent-runtime/runs?limit=ten", Some(ta)).await, 400, "ValidationError");
}
db_test!(runs_carry_deadlines_and_chains_and_their_start_is_audited);

async fn every_new_tenant_route_needs_its_scope_and_hides_other_tenants(app: TestApp) {
    let a = app.signup("sc-a@example.com", "sc-a").await;
    let ta = a["token"].as_str().unwrap();
    app.post("/api/events/types", Some(ta), json!({ "event_type": "sc.thing.done.v1", "retention_class": "operational", "conflict_policy": "lww" })).await;
    // A key with an unrelated scope.
    let (_, key) = app.key(ta, "narrow", json!(["crm.contact.read"])).await;
    let k = key["api_key"].as_str();
    let routes = [
        (Method::POST, "/api/events/types", "event.type.write"),
        (Method::GET, "/api/events/types", "event.type.read"),
        (Method::GET, "/api/events/types/sc.thing.done.v1", "event.type.read"),
        (Method::POST, "/api/audit/append", "audit.append.write"),
        (Method::POST, "/api/audit/verify", "audit.verify.write"),
        (Method::GET, "/api/agent-runtime/agents", "agent-runtime.agent.read"),
        (Method::POST, "/api/agent-runtime/agents", "agent-runtime.agent.write"),
        (Method::GET, "/api/agent-runtime/runs", "agent-runtime.run.read"),
        (Method::POST, "/api/agent-runtime/runs", "agent-runtime.run.write"),
    ];
    for (method, path, scope) in &routes {
        let body = if *method == Method::POST { Some(json!({})) } else { None };
        let res = assert_error(app.call(method.clone(), path, k, body).await, 403, "Forbidden");
        assert_eq!((res["required_scopes"].clone(), res["granted_scopes"].clone()), (json!([scope]), json!(["crm.contact.read"])), "{path}");
    }
    // A key holding the scopes works (the routes authorise on tenant plus scope).
    let (_, wide) = app.key(ta, "wide", json!(["event.*", "audit.*", "agent-runtime.*"])).await;
    let w = wide["api_key"].as_str();
    assert_eq!(app.get("/api/events/types/sc.thing.done.v1", w).await.0, StatusCode::OK);
    assert_eq!(app.get("/api/agent-runtime/runs", w).await.0, StatusCode::OK);
    // Another tenant's key with every scope: A's type is not found, A's
    // lists are empty, A's chains are not its own.
    let b = app.signup("sc-b@example.com", "sc-b").await;
    let (_, bk) = app.key(b["token"].as_str().unwrap(), "all", json!(["*"])).await;
    let bk = bk["api_key"].as_str();
    new_agent(&app, ta, a["persona_id"].as_str().unwrap(), "gold", 60).await;
    assert_error(app.get("/api/events/types/sc.thing.done.v1", bk).await, 404, "NotFound");
    let (_, types) = app.get("/api/events/types", bk).await;
    assert_eq!(types["tenant_count"], 0);
    let (_, agents) = app.get("/api/agent-runtime/agents", bk).await;
    assert_eq!(agents["data"], json!([]));
    let (_, v) = app.post("/api/audit/verify", bk, json!({ "pool_index": 0 })).await;
    assert_eq!(v["data"]["entries_checked"], 3, "only B's own signup, application and key issue: {v}");
}
db_test!(every_new_tenant_route_needs_its_scope_and_hides_other_tenants);

/// A client-supplied duration is bounded before any time arithmetic: a TTL
/// of 1e13 seconds once overflowed the deadline computation and panicked
/// the handler; now it is a 400, and a definition stored with one before
/// the bound existed still starts runs, capped at the maximum.
async fn agent_ttls_are_bounded_before_any_deadline_arithmetic(app: TestApp) {
    let a = app.signup("ttl@example.com", "ttl").await;
    let ta = a["token"].as_str().unwrap();
    let persona = a["persona_id"].as_str().unwrap();
    let agent = |ttl: Value| {
        json!({
            "name": "n", "acting_persona_id": persona, "tier": "t", "vector_namespace": "v", "created_by": "c", "default_ttl_seconds": ttl,
        })
    };
    for ttl in [json!(10_000_000_000_000i64), json!(1e13), json!(604_801), json!(i64::MAX), json!(-5), json!("3600")] {
        let body = assert_error(app.post("/api/agent-runtime/agents", Some(ta), agent(ttl.clone())).await, 400, "ValidationError");
        assert_eq!(body["details"], json!(["default_ttl_seconds must be an integer from 1 to 604800"]), "{ttl}");
    }
    let longest = new_agent(&app, ta, persona, "gold", 604_800).await;
    let start = json!({ "agent_id": longest["agent_id"], "persona_id": persona, "trace_id": "t", "actor_id": "ada", "actor_kind": "human" });
    let (s, run) = app.post("/api/agent-runtime/runs", Some(ta), start.clone()).await;
    assert_eq!(s, StatusCode::CREATED, "{run}");
    let created = hub_kernel::db::parse_time(run["data"]["created_at"].as_str().unwrap()).unwrap();
    let deadline = hub_kernel::db::parse_time(run["data"]["ttl_deadline"].as_str().unwrap()).unwrap();
    assert_eq!((deadline - created).num_seconds(), 604_800);

    // A definition written before the bound, with the attack's TTL.
    sqlx::query("UPDATE agent_definition SET default_ttl_seconds = $1 WHERE agent_id = $2")
        .bind(10_000_000_000_000i64)
        .bind(longest["agent_id"].as_str().unwrap())
        .execute(app.state().db.writer())
        .await
        .unwrap();
    let (s, run) = app.post("/api/agent-runtime/runs", Some(ta), start).await;
    assert_eq!(s, StatusCode::CREATED, "{run}");
    assert_eq!(run["data"]["ttl_seconds"], 604_800);

    // Commands bound theirs the same way.
    let (asset, _) = crate::assets::robot(&app, ta, json!({ "display_name": "R" })).await;
    let body = assert_error(
        app.post("/api/commands", Some(ta), json!({ "type": "a", "risk_class": "low", "target_asset_id": asset, "ttl_seconds": 1e13 })).await,
        400,
        "ValidationError",
    );
    assert_eq!(body["details"], json!(["ttl_seconds must be an integer from 1 to 604800"]));
}
db_test!(agent_ttls_are_bounded_before_any_deadline_arithmetic);

/// A run ends once, in one guarded transition from `active`: completed
/// (`succeeded`, `failed`) or cancelled; every end is final (409 after).
async fn runs_end_once_completed_or_cancelled_and_are_read_one_by_one(app: TestApp) {
    let t = app.two_tenants("run-end").await;
    let (ta, tb) = (t.a_token.as_str(), t.b_token.as_str());
    let persona = t.a["persona_id"].as_str().unwrap();
    let agent = new_agent(&app, ta, persona, "gold", 600).await;
    let start = json!({ "agent_id": agent["agent_id"], "persona_id": persona, "trace_id": "end-1", "actor_id": "ada", "actor_kind": "human" });
    let mut runs = Vec::new();
    for _ in 0..3 {
        let (s, run) = app.post("/api/agent-runtime/runs", Some(ta), start.clone()).await;
        assert_eq!(s, StatusCode::CREATED, "{run}");
        runs.push(run["data"].clone());
    }
    let url = |run: &Value, verb: &str| format!("/api/agent-runtime/runs/{}{verb}", run["run_id"].as_str().unwrap());

    // Read one: the run as started; another tenant's, an unknown or a
    // malformed id is 404.
    let (s, one) = app.get(&url(&runs[0], ""), Some(ta)).await;
    assert_eq!((s, &one["data"]), (StatusCode::OK, &runs[0]));
    assert_error(app.get(&url(&runs[0], ""), Some(tb)).await, 404, "NotFound");
    assert_error(app.get(&format!("/api/agent-runtime/runs/{}", uuid::Uuid::now_v7()), Some(ta)).await, 404, "NotFound");
    assert_error(app.get("/api/agent-runtime/runs/nope", Some(ta)).await, 404, "NotFound");

    // Completion: the outcome is required and one of two words.
    let body = assert_error(app.post(&url(&runs[0], "/complete"), Some(ta), json!({})).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["status is required"]));
    let body = assert_error(app.post(&url(&runs[0], "/complete"), Some(ta), json!({ "status": "cancelled" })).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["status must be one of: succeeded, failed"]));
    // Another tenant's run is 404 whatever the body.
    assert_error(app.post(&url(&runs[0], "/complete"), Some(tb), json!({ "status": "nope" })).await, 404, "NotFound");
    assert_error(app.post(&url(&runs[0], "/cancel"), Some(tb), json!({})).await, 404, "NotFound");

    let (s, done) = app.post(&url(&runs[0], "/complete"), Some(ta), json!({ "status": "succeeded" })).await;
    assert_eq!(s, StatusCode::OK, "{done}");
    assert_eq!((&done["data"]["status"], &done["data"]["run_id"]), (&json!("succeeded"), &runs[0]["run_id"]));
    let (s, failed) = app.post(&url(&runs[1], "/complete"), Some(ta), json!({ "status": "failed" })).await;
    assert_eq!((s, &failed["data"]["status"]), (StatusCode::OK, &json!("failed")));
    let (s, cancelled) = app.post(&url(&runs[2], "/cancel"), Some(ta), json!({})).await;
    assert_eq!((s, &cancelled["data"]["status"]), (StatusCode::OK, &json!("cancelled")));

    // Every end is final.
    let body = assert_error(app.post(&url(&runs[0], "/complete"), Some(ta), json!({ "status": "failed" })).await, 409, "Conflict");
    assert_eq!(body["details"], json!(["the run is succeeded: only an active run can be completed"]));
    let body = assert_error(app.post(&url(&runs[0], "/cancel"), Some(ta), json!({})).await, 409, "Conflict");
    assert_eq!(body["details"], json!(["the run is succeeded: only an active run can be cancelled"]));
    let body = assert_error(app.post(&url(&runs[2], "/cancel"), Some(ta), json!({})).await, 409, "Conflict");
    assert_eq!(body["details"], json!(["the run is cancelled: only an active run can be cancelled"]));
    let body = assert_error(app.post(&url(&runs[1], "/complete"), Some(ta), json!({ "status": "succeeded" })).await, 409, "Conflict");
    assert_eq!(body["details"], json!(["the run is failed: only an active run can be completed"]));
    assert_error(app.post(&format!("/api/agent-runtime/runs/{}/cancel", uuid::Uuid::now_v7()), Some(ta), json!({})).await, 404, "NotFound");

    // The list filters on the end states.
    for (status, run) in [("succeeded", &runs[0]), ("failed", &runs[1]), ("cancelled", &runs[2])] {
        let (_, list) = app.get(&format!("/api/agent-runtime/runs?status={status}"), Some(ta)).await;
        assert_eq!((&list["total"], &list["data"][0]["run_id"]), (&json!(1), &run["run_id"]), "{status}");
    }
    let (_, active) = app.get("/api/agent-runtime/runs?status=active", Some(ta)).await;
    assert_eq!(active["total"], 0);

    // One regulated event per end, each with the run's chain as provenance.
    let events = app.events_of(&t.a["tenant_id"]).await;
    for e in ["agent.run.completed.v1", "agent.run.failed.v1", "agent.run.cancelled.v1"] {
        assert_eq!(events.iter().filter(|x| *x == e).count(), 1, "{e}: {events:?}");
    }
    let (chain, class): (String, String) =
        sqlx::query_as("SELECT actor_chain, retention_class FROM audit_entry WHERE tenant_id = $1 AND event_type = 'agent.run.cancelled.v1'")
            .bind(t.a["tenant_id"].as_str().unwrap())
            .fetch_one(&app.state().db.read)
            .await
            .unwrap();
    assert_eq!((serde_json::from_str::<Value>(&chain).unwrap(), class.as_str()), (runs[2]["agent_chain"].clone(), "regulated"));
}
db_test!(runs_end_once_completed_or_cancelled_and_are_read_one_by_one);

/// An agent is read one by one, changed field by field, and disabled (it
/// starts no run) and enabled again; repeats change nothing.
async fn agents_are_read_changed_disabled_and_enabled(app: TestApp) {
    let t = app.two_tenants("agent-life").await;
    let (ta, tb) = (t.a_token.as_str(), t.b_token.as_str());
    let persona = t.a["persona_id"].as_str().unwrap();
    let agent = new_agent(&app, ta, persona, "gold", 600).await;
    let url = |verb: &str| format!("/api/agent-runtime/agents/{}{verb}", agent["agent_id"].as_str().unwrap());

    let (s, one) = app.get(&url(""), Some(ta)).await;
    assert_eq!((s, &one["data"]), (StatusCode::OK, &agent));
    assert_error(app.get(&url(""), Some(tb)).await, 404, "NotFound");
    assert_error(app.get("/api/agent-runtime/agents/nope", Some(ta)).await, 404, "NotFound");

    // A change names at least one field, each validated as on create.
    let body = assert_error(app.call(Method::PATCH, &url(""), Some(ta), Some(json!({}))).await, 400, "ValidationError");
    assert_eq!(body["details"], json!(["give at least one of: description, agent_scope, tool_manifest, default_ttl_seconds, kill_switch_flag_id"]));
    let body = assert_error(
        app.call(Method::PATCH, &url(""), Some(ta), Some(json!({ "default_ttl_seconds": 604_801, "tool_manifest": [1] }))).await,
        400,
        "ValidationError",
    );
    assert_eq!(body["details"], json!(["tool_manifest[0] must be a string", "default_ttl_seconds must be an integer from 1 to 604800"]));
    assert_error(app.call(Method::PATCH, &url(""), Some(tb), Some(json!({ "description": "theirs" }))).await, 404, "NotFound");

    let change = json!({ "description": "drafts replies", "agent_scope": ["crm.contact.read"], "default_ttl_seconds": 120, "kill_switch_flag_id": "ks-1" });
    let (s, changed) = app.call(Method::PATCH, &url(""), Some(ta), Some(change)).await;
    assert_eq!(s, StatusCode::OK, "{changed}");
    let c = &changed["data"];
    assert_eq!(
        (&c["description"], &c["agent_scope"], &c["default_ttl_seconds"], &c["kill_switch_flag_id"]),
        (&json!("drafts replies"), &json!(["crm.contact.read"]), &json!(120), &json!("ks-1"))
    );
    assert_eq!((&c["name"], &c["tool_manifest"], &c["tier"]), (&agent["name"], &agent["tool_manifest"], &agent["tier"]), "absent fields stay");
    // Blank clears a text field.
    let (s, cleared) = app.call(Method::PATCH, &url(""), Some(ta), Some(json!({ "kill_switch_flag_id": " " }))).await;
    assert_eq!((s, &cleared["data"]["kill_switch_flag_id"], &cleared["data"]["description"]), (StatusCode::OK, &Value::Null, &json!("drafts replies")));
    // New runs take the new TTL.
    let start = json!({ "agent_id": agent["agent_id"], "persona_id": persona, "trace_id": "life", "actor_id": "ada", "actor_kind": "human" });
    let (s, run) = app.post("/api/agent-runtime/runs", Some(ta), start.clone()).await;
    assert_eq!((s, &run["data"]["ttl_seconds"]), (StatusCode::CREATED, &json!(120)));

    // Disabled: no new run; a repeat answers the same; the list filters on it.
    let (s, off) = app.post(&url("/disable"), Some(ta), json!({})).await;
    assert_eq!((s, &off["data"]["status"]), (StatusCode::OK, &json!("disabled")));
    let (s, again) = app.post(&url("/disable"), Some(ta), json!({})).await;
    assert_eq!((s, &again["data"]), (StatusCode::OK, &off["data"]));
    let body = assert_error(app.post("/api/agent-runtime/runs", Some(ta), start.clone()).await, 409, "Conflict");
    assert_eq!(body["details"], json!(["the agent is disabled"]));
    let (_, disabled) = app.get("/api/agent-runtime/agents?status=disabled", Some(ta)).await;
    assert_eq!((&disabled["total"], &disabled["data"][0]["agent_id"]), (&json!(1), &agent["agent_id"]));
    let (_, active) = app.get("/api/agent-runtime/agents?status=active", Some(ta)).await;
    assert_eq!(active["total"], 0);
    assert_error(app.get("/api/agent-runtime/agents?status=paused", Some(ta)).await, 400, "ValidationError");
    // Its run already started is left as it is, and can still end.
    let (s, _) =
        app.post(&format!("/api/agent-runtime/runs/{}/complete", run["data"]["run_id"].as_str().unwrap()), Some(ta), json!({ "status": "succeeded" })).await;
    assert_eq!(s, StatusCode::OK);
    assert_error(app.post(&url("/disable"), Some(tb), json!({})).await, 404, "NotFound");

    let (s, on) = app.post(&url("/enable"), Some(ta), json!({})).await;
    assert_eq!((s, &on["data"]["status"]), (StatusCode::OK, &json!("active")));
    let (s, again) = app.post(&url("/enable"), Some(ta), json!({})).await;
    assert_eq!((s, &again["data"]), (StatusCode::OK, &on["data"]));
    let (s, _) = app.post("/api/agent-runtime/runs", Some(ta), start).await;
    assert_eq!(s, StatusCode::CREATED);

    // Two changes, one disable and one enable: four events; repeats none.
    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "agent.definition.updated.v1").count(), 4, "{events:?}");
}
db_test!(agents_are_read_changed_disabled_and_enabled);

/// Moves run `id`'s deadline `seconds` into the past, as time passing
/// would (no test sleeps through a TTL).
async fn past_deadline(app: &TestApp, run: &Value, seconds: i64) {
    let at = hub_kernel::db::format_time(chrono::Utc::now() - chrono::TimeDelta::seconds(seconds));
    sqlx::query("UPDATE agent_run SET ttl_deadline = $1 WHERE run_id = $2")
        .bind(at)
        .bind(run["run_id"].as_str().unwrap())
        .execute(app.state().db.writer())
        .await
        .unwrap();
}

/// The `agent.run.expired.v1` entries of a tenant: payload, actor kind,
/// actor, actor chain and retention class.
async fn expiries(app: &TestApp, tenant_id: &Value) -> Vec<(Value, String, String, Value, String)> {
    let rows: Vec<(String, String, String, String, String)> = sqlx::query_as(
        "SELECT payload, actor_kind, actor_id, actor_chain, retention_class FROM audit_entry \
         WHERE tenant_id = $1 AND event_type = 'agent.run.expired.v1' ORDER BY pool_index, seq",
    )
    .bind(tenant_id.as_str().unwrap())
    .fetch_all(&app.state().db.read)
    .await
    .unwrap();
    rows.into_iter().map(|(p, kind, id, chain, class)| (serde_json::from_str(&p).unwrap(), kind, id, serde_json::from_str(&chain).unwrap(), class)).collect()
}

/// An active run past its `ttl_deadline` expires: the sweep moves it to
/// `expired` once, with one `agent.run.expired.v1`; a completion or a
/// cancellation that comes later is 409 (`the run is expired`), and one
/// that comes before the sweep expires the run itself, never succeeding.
async fn runs_past_their_deadline_expire_once(app: TestApp) {
    let t = app.two_tenants("run-expiry").await;
    let (ta, tb) = (t.a_token.as_str(), t.b_token.as_str());
    let persona = t.a["persona_id"].as_str().unwrap();
    let agent = new_agent(&app, ta, persona, "gold", 600).await;
    let start = |parent: &Value| json!({ "agent_id": agent["agent_id"], "persona_id": persona, "trace_id": "exp-1", "actor_id": "ada", "actor_kind": "human", "parent_run_id": parent });
    let mut runs = Vec::new();
    for _ in 0..4 {
        let (s, run) = app.post("/api/agent-runtime/runs", Some(ta), start(&Value::Null)).await;
        assert_eq!(s, StatusCode::CREATED, "{run}");
        runs.push(run["data"].clone());
    }
    // A child's deadline is capped by its parent's: past the parent's, the
    // child's has passed too, and it expires on its own.
    let (s, child) = app.post("/api/agent-runtime/runs", Some(ta), start(&runs[0]["run_id"])).await;
    assert_eq!(s, StatusCode::CREATED, "{child}");
    let child = child["data"].clone();
    assert!(child["ttl_deadline"].as_str().unwrap() <= runs[0]["ttl_deadline"].as_str().unwrap());
    let b_persona = t.b["persona_id"].as_str().unwrap();
    let b_agent = new_agent(&app, tb, b_persona, "gold", 600).await;
    let (s, theirs) = app
        .post(
            "/api/agent-runtime/runs",
            Some(tb),
            json!({ "agent_id": b_agent["agent_id"], "persona_id": b_persona, "trace_id": "exp-b", "actor_id": "bo", "actor_kind": "service" }),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{theirs}");
    let theirs = theirs["data"].clone();
    let url = |run: &Value, verb: &str| format!("/api/agent-runtime/runs/{}{verb}", run["run_id"].as_str().unwrap());

    // runs[0] and its child, runs[1] and runs[2] are past their deadline;
    // runs[3] is not.
    for run in [&runs[0], &child, &runs[1], &runs[2], &theirs] {
        past_deadline(&app, run, 5).await;
    }

    // Before any sweep, a late completion and a late cancellation expire
    // the run instead (409), with the expiry event and nothing else.
    let body = assert_error(app.post(&url(&runs[1], "/complete"), Some(ta), json!({ "status": "succeeded" })).await, 409, "Conflict");
    assert_eq!(body["details"], json!(["the run is expired: only an active run can be completed"]));
    let body = assert_error(app.post(&url(&runs[2], "/cancel"), Some(ta), json!({})).await, 409, "Conflict");
    assert_eq!(body["details"], json!(["the run is expired: only an active run can be cancelled"]));
    for run in [&runs[1], &runs[2]] {
        let (_, one) = app.get(&url(run, ""), Some(ta)).await;
        assert_eq!(one["data"]["status"], "expired", "{one}");
    }
    let events = app.events_of(&t.a["tenant_id"]).await;
    assert_eq!(events.iter().filter(|e| *e == "agent.run.expired.v1").count(), 2, "{events:?}");
    assert!(!events.iter().any(|e| e == "agent.run.completed.v1" || e == "agent.run.cancelled.v1"), "{events:?}");

    // The sweep expires the other three due runs (both tenants), once.
    let db = &app.state().db;
    assert_eq!(hub_ai::agent_runtime::expire_due(db).await.unwrap(), 3);
    assert_eq!(hub_ai::agent_runtime::expire_due(db).await.unwrap(), 0);
    for run in [&runs[0], &child] {
        let (s, one) = app.get(&url(run, ""), Some(ta)).await;
        assert_eq!((s, &one["data"]["status"]), (StatusCode::OK, &json!("expired")), "{one}");
        assert!(one["data"]["updated_at"].as_str().unwrap() > run["updated_at"].as_str().unwrap());
    }
    let (_, fresh) = app.get(&url(&runs[3], ""), Some(ta)).await;
    assert_eq!(fresh["data"], runs[3], "a run within its deadline is left as it is");
    let (_, one) = app.get(&url(&theirs, ""), Some(tb)).await;
    assert_eq!(one["data"]["status"], "expired");

    // One event per run, in its tenant's chain: regulated, the hub as
    // actor, the run's chain as provenance.
    let ours = expiries(&app, &t.a["tenant_id"]).await;
    let mut expired_ids: Vec<&str> = ours.iter().map(|(p, ..)| p["run_id"].as_str().unwrap()).collect();
    expired_ids.sort();
    let mut expected: Vec<&str> = [&runs[0], &child, &runs[1], &runs[2]].iter().map(|r| r["run_id"].as_str().unwrap()).collect();
    expected.sort();
    assert_eq!(expired_ids, expected);
    let (payload, kind, actor, chain, class) = ours.iter().find(|(p, ..)| p["run_id"] == child["run_id"]).unwrap();
    let (_, stored) = app.get(&url(&child, ""), Some(ta)).await;
    assert_eq!(
        payload,
        &json!({ "run_id": child["run_id"], "agent_id": child["agent_id"], "trace_id": "exp-1", "status": "expired", "ttl_deadline": stored["data"]["ttl_deadline"] })
    );
    assert_eq!((kind.as_str(), actor.as_str(), chain, class.as_str()), ("system", "hub", &child["agent_chain"], "regulated"));
    assert_eq!(expiries(&app, &t.b["tenant_id"]).await.len(), 1);

    // Every end is final: a completion or cancellation after the sweep is
    // 409 and records nothing.
    let body = assert_error(app.post(&url(&runs[0], "/complete"), Some(ta), json!({ "status": "failed" })).await, 409, "Conflict");
    assert_eq!(body["details"], json!(["the run is expired: only an active run can be completed"]));
    let body = assert_error(app.post(&url(&child, "/cancel"), Some(ta), json!({})).await, 409, "Conflict");
    assert_eq!(body["details"], json!(["the run is expired: only an active run can be cancelled"]));
    assert_eq!(expiries(&app, &t.a["tenant_id"]).await.len(), 4);

    // The list filters on `expired`; the run within its deadline still ends.
    let (s, list) = app.get("/api/agent-runtime/runs?status=expired", Some(ta)).await;
    assert_eq!((s, &list["total"]), (StatusCode::OK, &json!(4)), "{list}");
    assert!(list["data"].as_array().unwrap().iter().all(|r| r["status"] == "expired"), "{list}");
    let (_, active) = app.get("/api/agent-runtime/runs?status=active", Some(ta)).await;
    assert_eq!((&active["total"], &active["data"][0]["run_id"]), (&json!(1), &runs[3]["run_id"]));
    let (s, done) = app.post(&url(&runs[3], "/complete"), Some(ta), json!({ "status": "succeeded" })).await;
    assert_eq!((s, &done["data"]["status"]), (StatusCode::OK, &json!("succeeded")), "{done}");
}
db_test!(runs_past_their_deadline_expire_once);

/// Sweeps at once (two hub replicas on PostgreSQL) and late completions
/// racing them expire each run once, with one event; no completion wins.
async fn sweeps_at_once_expire_each_run_once(app: TestApp) {
    let t = app.two_tenants("run-expiry-race").await;
    let ta = t.a_token.as_str();
    let persona = t.a["persona_id"].as_str().unwrap();
    let agent = new_agent(&app, ta, persona, "gold", 600).await;
    let mut runs = Vec::new();
    for i in 0..12 {
        let body = json!({ "agent_id": agent["agent_id"], "persona_id": persona, "trace_id": format!("race-{i}"), "actor_id": "ada", "actor_kind": "human" });
        let (s, run) = app.post("/api/agent-runtime/runs", Some(ta), body).await;
        assert_eq!(s, StatusCode::CREATED, "{run}");
        past_deadline(&app, &run["data"], 5).await;
        runs.push(run["data"].clone());
    }
    let replica = if app.backend == Backend::Postgres { Some(app.replica().await) } else { None };
    let other = replica.as_ref().unwrap_or(&app);
    let late = |run: &Value| format!("/api/agent-runtime/runs/{}/complete", run["run_id"].as_str().unwrap());
    let (first, last) = (late(&runs[0]), late(&runs[11]));
    let (x, y, z, w, (s1, _), (s2, _)) = tokio::join!(
        hub_ai::agent_runtime::expire_due(&app.state().db),
        hub_ai::agent_runtime::expire_due(&other.state().db),
        hub_ai::agent_runtime::expire_due(&app.state().db),
        hub_ai::agent_runtime::expire_due(&other.state().db),
        app.post(&first, Some(ta), json!({ "status": "succeeded" })),
        other.post(&last, Some(ta), json!({ "status": "failed" })),
    );
    assert_eq!((s1, s2), (StatusCode::CONFLICT, StatusCode::CONFLICT));
    let swept: usize = [x, y, z, w].into_iter().map(Result::unwrap).sum();
    let rest = hub_ai::agent_runtime::expire_due(&app.state().db).await.unwrap();
    // What the sweeps did not expire, the two late completions did.
    assert!((10..=12).contains(&(swept + rest)), "{swept} + {rest}");
    let expired = expiries(&app, &t.a["tenant_id"]).await;
    assert_eq!(expired.len(), 12);
    let mut ids: Vec<&str> = expired.iter().map(|(p, ..)| p["run_id"].as_str().unwrap()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 12, "one event per run");
    let statuses: Vec<String> = sqlx::query_scalar("SELECT DISTINCT status FROM agent_run").fetch_all(&app.state().db.read).await.unwrap();
    assert_eq!(statuses, vec!["expired".to_string()]);
    let events = app.events_of(&t.a["tenant_id"]).await;
    assert!(!events.iter().any(|e| e == "agent.run.completed.v1" || e == "agent.run.failed.v1"), "{events:?}");
    assert_eq!(hub_ai::agent_runtime::expire_due(&other.state().db).await.unwrap(), 0);
}
db_test!(sweeps_at_once_expire_each_run_once);

/// With `HUB_AGENT_RUN_SWEEP_SECONDS` set, the hub expires runs on its own.
async fn the_hub_expires_runs_in_the_background(app: TestApp) {
    let app = app.variant(|c| c.agent_run_sweep_seconds = 1).await;
    let t = app.two_tenants("run-expiry-bg").await;
    let ta = t.a_token.as_str();
    let persona = t.a["persona_id"].as_str().unwrap();
    let agent = new_agent(&app, ta, persona, "gold", 600).await;
    let body = json!({ "agent_id": agent["agent_id"], "persona_id": persona, "trace_id": "bg", "actor_id": "ada", "actor_kind": "human" });
    let (s, run) = app.post("/api/agent-runtime/runs", Some(ta), body).await;
    assert_eq!(s, StatusCode::CREATED, "{run}");
    past_deadline(&app, &run["data"], 5).await;
    let url = format!("/api/agent-runtime/runs/{}", run["data"]["run_id"].as_str().unwrap());
    let mut status = Value::Null;
    for _ in 0..100 {
        let (_, one) = app.get(&url, Some(ta)).await;
        status = one["data"]["status"].clone();
        if status == "expired" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(status, "expired");
    assert_eq!(expiries(&app, &t.a["tenant_id"]).await.len(), 1);
}
db_test!(the_hub_expires_runs_in_the_background);
