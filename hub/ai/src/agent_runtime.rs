//! sdk-agent-runtime: agent definitions and agent runs. Starting a run
//! computes its TTL deadline from the agent's `default_ttl_seconds`,
//! materialises its `agent_chain` from `parent_run_id`, and emits
//! `agent.run.started.v1` (regulated) in the same transaction, with the
//! chain as the entry's actor provenance.
//!
//! Lists are scoped to the caller's tenant: a `tenant_id` query must equal
//! the credential's (RULINGS 1).

use std::collections::HashMap;

use axum::{Json, Router, extract::State, response::Response, routing::get};
use serde_json::{Value, json};
use sqlx::Row;

use hub_kernel::{
    audit::{self, events},
    db,
    error::{ApiError, ApiResult, Body, created},
    extract::{Page, Params, list},
    gate::{Tenant, TenantCtx},
    state::AppState,
    validate::Check,
};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/agent-runtime/health", get(health))
        .route("/api/agent-runtime/agents", get(list_agents).post(create_agent))
        .route("/api/agent-runtime/runs", get(list_runs).post(start_run))
}

/// Default lifetime of an agent's runs when the definition names none.
pub const DEFAULT_TTL_SECONDS: i64 = 3600;
/// The longest lifetime an agent may give its runs (7 days, as for
/// commands). A larger number once overflowed the deadline arithmetic.
pub const MAX_TTL_SECONDS: i64 = 604_800;
/// List page size: default and maximum.
const LIST_DEFAULT: i64 = 50;
const LIST_MAX: i64 = 500;
/// A run's chain of parents is at most this deep (a runaway recursion of
/// agents spawning agents stops here).
const MAX_CHAIN_DEPTH: usize = 32;
pub const ACTOR_KINDS: &[&str] = &["human", "service", "agent"];

async fn health() -> Json<Value> {
    Json(json!({ "sdk": "sdk-agent-runtime", "status": "ok" }))
}

fn text(check: &mut Check, body: &Value, name: &str) -> Option<String> {
    match body.get(name) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Check::optional(&Some(s.clone())),
        Some(_) => {
            check.fail(format!("{name} must be a string"));
            None
        }
    }
}

fn required(check: &mut Check, body: &Value, name: &str) -> String {
    match text(check, body, name) {
        Some(v) => v,
        None => {
            if matches!(body.get(name), None | Some(Value::Null | Value::String(_))) {
                check.fail(format!("{name} is required"));
            }
            String::new()
        }
    }
}

fn string_array(check: &mut Check, body: &Value, name: &str) -> Vec<String> {
    match body.get(name) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => items.iter().filter_map(|v| v.as_str().map(str::to_string)).collect(),
        Some(_) => {
            check.fail(format!("{name} must be an array of strings"));
            Vec::new()
        }
    }
}

fn uuid_text(check: &mut Check, name: &str, value: &str) -> bool {
    if value.is_empty() {
        return false;
    }
    if uuid::Uuid::parse_str(value).is_err() {
        check.fail(format!("{name} must be a UUID"));
        return false;
    }
    true
}

const AGENT_COLUMNS: &str = "agent_id, tenant_id, name, description, acting_persona_id, agent_scope, default_ttl_seconds, tier, \
     kill_switch_flag_id, vector_namespace, tool_manifest, created_by, status, created_at, updated_at";

fn agent_json(r: &sqlx::any::AnyRow) -> Result<Value, sqlx::Error> {
    let scope: String = r.try_get("agent_scope")?;
    let tools: String = r.try_get("tool_manifest")?;
    Ok(json!({
        "agent_id": r.try_get::<String, _>("agent_id")?,
        "tenant_id": r.try_get::<Option<String>, _>("tenant_id")?,
        "name": r.try_get::<String, _>("name")?,
        "description": r.try_get::<Option<String>, _>("description")?,
        "acting_persona_id": r.try_get::<String, _>("acting_persona_id")?,
        "agent_scope": serde_json::from_str::<Value>(&scope).unwrap_or(json!([])),
        "default_ttl_seconds": r.try_get::<i64, _>("default_ttl_seconds")?,
        "tier": r.try_get::<String, _>("tier")?,
        "kill_switch_flag_id": r.try_get::<Option<String>, _>("kill_switch_flag_id")?,
        "vector_namespace": r.try_get::<String, _>("vector_namespace")?,
        "tool_manifest": serde_json::from_str::<Value>(&tools).unwrap_or(json!([])),
        "created_by": r.try_get::<String, _>("created_by")?,
        "status": r.try_get::<String, _>("status")?,
        "created_at": r.try_get::<String, _>("created_at")?,
        "updated_at": r.try_get::<String, _>("updated_at")?,
    }))
}

async fn create_agent(State(state): State<AppState>, Tenant(ctx): Tenant, Body(body): Body<Value>) -> ApiResult<Response> {
    let mut check = Check::new();
    let name = required(&mut check, &body, "name");
    let persona = required(&mut check, &body, "acting_persona_id");
    let persona_ok = uuid_text(&mut check, "acting_persona_id", &persona);
    let tier = required(&mut check, &body, "tier");
    let namespace = required(&mut check, &body, "vector_namespace");
    let created_by = required(&mut check, &body, "created_by");
    let description = text(&mut check, &body, "description");
    let kill_switch = text(&mut check, &body, "kill_switch_flag_id");
    let scope = string_array(&mut check, &body, "agent_scope");
    let tools = string_array(&mut check, &body, "tool_manifest");
    let ttl = check.optional_seconds("default_ttl_seconds", body.get("default_ttl_seconds"), MAX_TTL_SECONDS).unwrap_or(DEFAULT_TTL_SECONDS);
    let tenant_claim = text(&mut check, &body, "tenant_id");
    check.finish()?;
    ctx.check_tenant(tenant_claim.as_deref())?;
    if persona_ok && !hub_identity::personas::exists_in_tenant(&state.db.read, &ctx.tenant_id, &persona).await? {
        return Err(ApiError::invalid("acting_persona_id does not name a persona of this tenant"));
    }
    let id = db::new_id();
    let now = db::now();
    let mut tx = state.db.begin().await?;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO agent_definition ({AGENT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 'active', $13, $13)"
    )))
    .bind(&id)
    .bind(&ctx.tenant_id)
    .bind(&name)
    .bind(&description)
    .bind(&persona)
    .bind(json!(scope).to_string())
    .bind(ttl)
    .bind(&tier)
    .bind(&kill_switch)
    .bind(&namespace)
    .bind(json!(tools).to_string())
    .bind(&created_by)
    .bind(&now)
    .execute(&mut *tx)
    .await?;
    let row =
        sqlx::query(sqlx::AssertSqlSafe(format!("SELECT {AGENT_COLUMNS} FROM agent_definition WHERE agent_id = $1"))).bind(&id).fetch_one(&mut *tx).await?;
    let agent = agent_json(&row)?;
    audit::record(&mut tx, &ctx, events::AGENT_DEFINED, json!({ "agent_id": id, "name": name, "tier": tier, "acting_persona_id": persona })).await?;
    tx.commit().await?;
    Ok(created(agent))
}

/// RULINGS 1: a list's `tenant_id` query parameter, when given, must be a
/// UUID equal to the caller's tenant.
fn check_tenant_param(ctx: &TenantCtx, q: &HashMap<String, String>) -> ApiResult<()> {
    ctx.check_tenant(q.get("tenant_id").map(String::as_str))
}

/// A page of agents or runs: 50 by default, at most 500.
type ListPage = Page<LIST_DEFAULT, LIST_MAX>;

async fn list_agents(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<HashMap<String, String>>, page: ListPage) -> ApiResult<Response> {
    check_tenant_param(&ctx, &q)?;
    // One SQL text whatever the filters: an absent tier is bound as NULL.
    let tier = q.get("tier").map(|s| s.trim().to_string()).filter(|s| !s.is_empty());
    let filter = "FROM agent_definition WHERE tenant_id = $1 AND ($2 IS NULL OR tier = $2)";
    let total: i64 =
        sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) {filter}"))).bind(&ctx.tenant_id).bind(&tier).fetch_one(&state.db.read).await?;
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!("SELECT {AGENT_COLUMNS} {filter} ORDER BY created_at DESC, agent_id DESC LIMIT $3 OFFSET $4")))
        .bind(&ctx.tenant_id)
        .bind(&tier)
        .bind(page.limit)
        .bind(page.offset)
        .fetch_all(&state.db.read)
        .await?;
    Ok(list(rows.iter().map(agent_json).collect::<Result<Vec<_>, _>>()?, total))
}

const RUN_COLUMNS: &str = "run_id, tenant_id, agent_id, persona_id, trace_id, parent_run_id, ttl_seconds, ttl_deadline, agent_chain, \
     actor_id, actor_kind, status, audit_entry_id, created_at, updated_at";

fn run_json(r: &sqlx::any::AnyRow) -> Result<Value, sqlx::Error> {
    let chain: String = r.try_get("agent_chain")?;
    Ok(json!({
        "run_id": r.try_get::<String, _>("run_id")?,
        "tenant_id": r.try_get::<String, _>("tenant_id")?,
        "agent_id": r.try_get::<String, _>("agent_id")?,
        "persona_id": r.try_get::<String, _>("persona_id")?,
        "trace_id": r.try_get::<String, _>("trace_id")?,
        "parent_run_id": r.try_get::<Option<String>, _>("parent_run_id")?,
        "ttl_seconds": r.try_get::<i64, _>("ttl_seconds")?,
        "ttl_deadline": r.try_get::<String, _>("ttl_deadline")?,
        "agent_chain": serde_json::from_str::<Value>(&chain).unwrap_or(json!([])),
        "actor_id": r.try_get::<String, _>("actor_id")?,
        "actor_kind": r.try_get::<String, _>("actor_kind")?,
        "status": r.try_get::<String, _>("status")?,
        "audit_entry_id": r.try_get::<String, _>("audit_entry_id")?,
        "created_at": r.try_get::<String, _>("created_at")?,
        "updated_at": r.try_get::<String, _>("updated_at")?,
    }))
}

/// Starts a run. Its deadline is now plus the agent's default TTL, and
/// never later than its parent's deadline (a child cannot outlive the run
/// that spawned it). `agent_chain` is the parent's chain plus this run.
async fn start_run(State(state): State<AppState>, Tenant(ctx): Tenant, Body(body): Body<Value>) -> ApiResult<Response> {
    let mut check = Check::new();
    let agent_id = required(&mut check, &body, "agent_id");
    uuid_text(&mut check, "agent_id", &agent_id);
    let persona_id = required(&mut check, &body, "persona_id");
    uuid_text(&mut check, "persona_id", &persona_id);
    let trace_id = required(&mut check, &body, "trace_id");
    let actor_id = required(&mut check, &body, "actor_id");
    let actor_kind = required(&mut check, &body, "actor_kind");
    check.one_of("actor_kind", &actor_kind, ACTOR_KINDS);
    let parent = text(&mut check, &body, "parent_run_id");
    if let Some(p) = &parent {
        uuid_text(&mut check, "parent_run_id", p);
    }
    let tenant_claim = text(&mut check, &body, "tenant_id");
    check.finish()?;
    ctx.check_tenant(tenant_claim.as_deref())?;

    let mut tx = state.db.begin().await?;
    let agent = sqlx::query("SELECT default_ttl_seconds, status FROM agent_definition WHERE agent_id = $1 AND tenant_id = $2")
        .bind(&agent_id)
        .bind(&ctx.tenant_id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| ApiError::invalid("agent_id does not name an agent of this tenant"))?;
    // A definition stored before the bound existed may carry more.
    let ttl = agent.try_get::<i64, _>("default_ttl_seconds")?.clamp(1, MAX_TTL_SECONDS);
    let agent_status: String = agent.try_get("status")?;
    if agent_status != "active" {
        return Err(ApiError::Conflict(format!("the agent is {agent_status}")));
    }
    let persona: Option<String> = sqlx::query_scalar("SELECT persona_id FROM persona_persona WHERE persona_id = $1 AND tenant_id = $2")
        .bind(&persona_id)
        .bind(&ctx.tenant_id)
        .fetch_optional(&mut *tx)
        .await?;
    if persona.is_none() {
        return Err(ApiError::invalid("persona_id does not name a persona of this tenant"));
    }
    let now = chrono::Utc::now();
    let mut deadline = db::add_seconds(now, ttl).ok_or_else(|| anyhow::anyhow!("run deadline out of range"))?;
    let mut chain: Vec<Value> = Vec::new();
    if let Some(parent) = &parent {
        let row = sqlx::query("SELECT agent_chain, ttl_deadline FROM agent_run WHERE run_id = $1 AND tenant_id = $2")
            .bind(parent)
            .bind(&ctx.tenant_id)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or_else(|| ApiError::invalid("parent_run_id does not name a run of this tenant"))?;
        let parent_chain: String = row.try_get("agent_chain")?;
        chain = serde_json::from_str(&parent_chain).unwrap_or_default();
        if chain.len() >= MAX_CHAIN_DEPTH {
            return Err(ApiError::invalid(format!("an agent chain is at most {MAX_CHAIN_DEPTH} runs deep")));
        }
        let parent_deadline: String = row.try_get("ttl_deadline")?;
        if let Some(d) = db::parse_time(&parent_deadline) {
            deadline = deadline.min(d);
        }
    }
    let run_id = db::new_id();
    chain.push(json!({ "run_id": run_id, "agent_id": agent_id, "persona_id": persona_id }));
    let chain = Value::Array(chain);
    let (cred_kind, cred_id) = audit::actor_of(&ctx);
    let entry = audit::emit(
        &mut tx,
        audit::Event {
            tenant_id: &ctx.tenant_id,
            pool_index: None,
            event_type: events::AGENT_RUN_STARTED,
            actor_kind: cred_kind,
            actor_id: cred_id,
            actor_chain: Some(&chain),
            payload: &json!({
                "run_id": run_id, "agent_id": agent_id, "persona_id": persona_id, "trace_id": trace_id,
                "parent_run_id": parent, "actor_id": actor_id, "actor_kind": actor_kind,
                "ttl_deadline": db::format_time(deadline),
            }),
            retention_class: Some("regulated"),
            occurred_at: None,
        },
    )
    .await?;
    let stamp = db::format_time(now);
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO agent_run ({RUN_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'active', $12, $13, $13)"
    )))
    .bind(&run_id)
    .bind(&ctx.tenant_id)
    .bind(&agent_id)
    .bind(&persona_id)
    .bind(&trace_id)
    .bind(&parent)
    .bind(ttl)
    .bind(db::format_time(deadline))
    .bind(chain.to_string())
    .bind(&actor_id)
    .bind(&actor_kind)
    .bind(&entry.entry_id)
    .bind(&stamp)
    .execute(&mut *tx)
    .await?;
    let row = sqlx::query(sqlx::AssertSqlSafe(format!("SELECT {RUN_COLUMNS} FROM agent_run WHERE run_id = $1"))).bind(&run_id).fetch_one(&mut *tx).await?;
    let run = run_json(&row)?;
    tx.commit().await?;
    Ok(created(run))
}

async fn list_runs(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<HashMap<String, String>>, page: ListPage) -> ApiResult<Response> {
    check_tenant_param(&ctx, &q)?;
    let agent = q.get("agent_id").map(|s| s.trim().to_string()).filter(|s| !s.is_empty());
    if agent.as_deref().is_some_and(|a| uuid::Uuid::parse_str(a).is_err()) {
        return Err(ApiError::invalid("agent_id must be a UUID"));
    }
    let status = q.get("status").map(|s| s.trim().to_string()).filter(|s| !s.is_empty());
    let filter = "FROM agent_run WHERE tenant_id = $1 AND ($2 IS NULL OR agent_id = $2) AND ($3 IS NULL OR status = $3)";
    let total: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) {filter}")))
        .bind(&ctx.tenant_id)
        .bind(&agent)
        .bind(&status)
        .fetch_one(&state.db.read)
        .await?;
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!("SELECT {RUN_COLUMNS} {filter} ORDER BY created_at DESC, run_id DESC LIMIT $4 OFFSET $5")))
        .bind(&ctx.tenant_id)
        .bind(&agent)
        .bind(&status)
        .bind(page.limit)
        .bind(page.offset)
        .fetch_all(&state.db.read)
        .await?;
    Ok(list(rows.iter().map(run_json).collect::<Result<Vec<_>, _>>()?, total))
}
