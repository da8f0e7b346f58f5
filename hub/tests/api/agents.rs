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
    let (_, done) = app.get("/api/agent-runtime/runs?status=completed", Some(ta)).await;
    assert_eq!(done["data"], json!([]));
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
