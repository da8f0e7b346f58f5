//! sdk-agent-runtime: agent definitions and agent runs. Starting a run
//! computes its TTL deadline from the agent's `default_ttl_seconds`,
//! materialises its `agent_chain` from `parent_run_id`, and emits
//! `agent.run.started.v1` (regulated) in the same transaction, with the
//! chain as the entry's actor provenance. A run still `active` at its
//! deadline expires (`expire_due`, the hub's sweep, or a late completion
//! or cancellation, which answers 409), with `agent.run.expired.v1`.
//!
//! Lists are scoped to the caller's tenant: a `tenant_id` query must equal
//! the credential's (RULINGS 1).

use axum::Json;

use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(health))
        .routes(routes!(list_agents, create_agent))
        .routes(routes!(get_agent, update_agent))
        .routes(routes!(disable_agent))
        .routes(routes!(enable_agent))
        .routes(routes!(list_runs, start_run))
        .routes(routes!(get_run))
        .routes(routes!(complete_run))
        .routes(routes!(cancel_run))
}

/// A new agent definition.
#[derive(Deserialize, ToSchema)]
struct NewAgent {
    name: String,
    /// A persona of the caller's tenant.
    #[schema(format = "uuid")]
    acting_persona_id: String,
    tier: String,
    vector_namespace: String,
    created_by: String,
    description: Option<String>,
    kill_switch_flag_id: Option<String>,
    /// None when absent.
    agent_scope: Option<Vec<String>>,
    /// None when absent.
    tool_manifest: Option<Vec<String>>,
    /// 3600 when absent.
    #[schema(minimum = 1, maximum = 604800)]
    default_ttl_seconds: Option<i64>,
}

/// A new agent run.
#[derive(Deserialize, ToSchema)]
struct NewAgentRun {
    /// An active agent of the caller's tenant.
    #[schema(format = "uuid")]
    agent_id: String,
    /// A persona of the caller's tenant.
    #[schema(format = "uuid")]
    persona_id: String,
    trace_id: String,
    actor_id: String,
    #[schema(inline)]
    actor_kind: RunActorKind,
    /// A run of the caller's tenant: the new run's parent.
    #[schema(format = "uuid")]
    parent_run_id: Option<String>,
}

stored_enum! {
    /// Who starts the run.
    // The values of `ACTOR_KINDS`; a test compares them.
    #[schema(as = RunActorKind)]
    pub enum RunActorKind { Human = "human", Service = "service", Agent = "agent" }
}

stored_enum! {
    /// Whether an agent starts runs: a `disabled` one refuses them (409)
    /// until it is enabled again.
    #[schema(as = AgentStatus)]
    pub enum AgentStatus { Active = "active", Disabled = "disabled" }
}

stored_enum! {
    /// Where a run is: `active` from its start until it completes
    /// (`succeeded`, `failed`), is cancelled, or reaches its `ttl_deadline`
    /// first (`expired`, by the hub's sweep or by a completion or
    /// cancellation that came too late); the four ends are final.
    #[schema(as = AgentRunStatus)]
    pub enum RunStatus { Active = "active", Succeeded = "succeeded", Failed = "failed", Cancelled = "cancelled", Expired = "expired" }
}

stored_enum! {
    /// How a run ended, as its completion reports it.
    #[schema(as = AgentRunOutcome)]
    pub enum RunOutcome { Succeeded = "succeeded", Failed = "failed" }
}

impl RunOutcome {
    /// The run status it stores and the event it records.
    fn ends(self) -> (RunStatus, &'static str) {
        match self {
            RunOutcome::Succeeded => (RunStatus::Succeeded, events::AGENT_RUN_COMPLETED),
            RunOutcome::Failed => (RunStatus::Failed, events::AGENT_RUN_FAILED),
        }
    }
}

/// A change of an agent definition: what is absent stays as it is; at
/// least one field is given.
#[derive(Deserialize, ToSchema)]
struct AgentUpdate {
    /// Blank clears it.
    #[schema(max_length = 2000)]
    description: Option<String>,
    /// Replaces the scope.
    agent_scope: Option<Vec<String>>,
    /// Replaces the manifest.
    tool_manifest: Option<Vec<String>>,
    /// The lifetime of the runs it starts from now on (runs started keep
    /// their deadline).
    #[schema(minimum = 1, maximum = 604800)]
    default_ttl_seconds: Option<i64>,
    /// Blank clears it.
    #[schema(max_length = 200)]
    kill_switch_flag_id: Option<String>,
}

/// The end of an active run.
#[derive(Deserialize, ToSchema)]
#[schema(as = AgentRunCompletion)]
struct RunCompletion {
    #[schema(inline)]
    status: RunOutcome,
}

/// The filters of the agent list.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct AgentFilter {
    /// Only the agents of this tier.
    tier: Option<String>,
    /// Only the agents in this status.
    #[param(inline)]
    status: Option<AgentStatus>,
    /// When given, the caller's tenant.
    #[param(format = "uuid")]
    tenant_id: Option<String>,
}

/// The filters of the run list.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct RunFilter {
    /// Only the runs of this agent.
    #[param(format = "uuid")]
    agent_id: Option<String>,
    /// Only the runs in this status.
    #[param(inline)]
    status: Option<RunStatus>,
    /// When given, the caller's tenant.
    #[param(format = "uuid")]
    tenant_id: Option<String>,
}

/// The liveness answer of the group.
#[derive(Serialize, ToSchema)]
struct AgentRuntimeHealth {
    /// `sdk-agent-runtime`.
    sdk: &'static str,
    status: &'static str,
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

/// Liveness of the group (public).
#[utoipa::path(get, path = "/api/agent-runtime/health", tag = "sdk-agent-runtime",
    responses((status = 200, description = "`{ sdk: 'sdk-agent-runtime', status: 'ok' }`, without the envelope", body = AgentRuntimeHealth)))]
async fn health() -> Json<AgentRuntimeHealth> {
    Json(AgentRuntimeHealth { sdk: "sdk-agent-runtime", status: "ok" })
}

/// An agent definition.
#[derive(Debug, FromRow, Serialize, ToSchema)]
struct Agent {
    agent_id: Id,
    tenant_id: Option<String>,
    name: String,
    description: Option<String>,
    acting_persona_id: String,
    #[sqlx(try_from = "String")]
    agent_scope: JsonText,
    default_ttl_seconds: i64,
    tier: String,
    kill_switch_flag_id: Option<String>,
    vector_namespace: String,
    #[sqlx(try_from = "String")]
    tool_manifest: JsonText,
    created_by: String,
    status: AgentStatus,
    created_at: Timestamp,
    updated_at: Timestamp,
}

const AGENT_COLUMNS: &str = "agent_id, tenant_id, name, description, acting_persona_id, agent_scope, default_ttl_seconds, tier, \
     kill_switch_flag_id, vector_namespace, tool_manifest, created_by, status, created_at, updated_at";
/// The tenant's agents, of one tier and of one status when `$2` and `$3`
/// are not empty.
const AGENTS: Listing = Listing {
    table: "agent_definition",
    columns: AGENT_COLUMNS,
    filter: "tenant_id = $1 AND ($2 = '' OR tier = $2) AND ($3 = '' OR status = $3)",
    order: "created_at DESC, agent_id DESC",
};

/// An agent run.
#[derive(Debug, FromRow, Serialize, ToSchema)]
struct AgentRun {
    run_id: Id,
    tenant_id: String,
    agent_id: Id,
    persona_id: String,
    trace_id: String,
    parent_run_id: Option<Id>,
    ttl_seconds: i64,
    ttl_deadline: Timestamp,
    #[sqlx(try_from = "String")]
    agent_chain: JsonText,
    actor_id: String,
    actor_kind: RunActorKind,
    status: RunStatus,
    audit_entry_id: String,
    created_at: Timestamp,
    updated_at: Timestamp,
}

const RUN_COLUMNS: &str = "run_id, tenant_id, agent_id, persona_id, trace_id, parent_run_id, ttl_seconds, ttl_deadline, agent_chain, \
     actor_id, actor_kind, status, audit_entry_id, created_at, updated_at";
/// The tenant's runs, of one agent and of one status when `$2` and `$3`
/// are not empty.
const RUNS: Listing = Listing {
    table: "agent_run",
    columns: RUN_COLUMNS,
    filter: "tenant_id = $1 AND ($2 = '' OR agent_id = $2) AND ($3 = '' OR status = $3)",
    order: "created_at DESC, run_id DESC",
};

/// The tenant's runs of one trace, oldest first, as JSON (for a trace
/// export of the governance area).
pub async fn runs_of_trace(pool: &sqlx::AnyPool, tenant_id: &str, trace_id: &str) -> ApiResult<Vec<Value>> {
    let sql = format!("SELECT {RUN_COLUMNS} FROM agent_run WHERE tenant_id = $1 AND trace_id = $2 ORDER BY created_at, run_id");
    let runs: Vec<AgentRun> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(trace_id).fetch_all(pool).await?;
    Ok(runs.iter().map(|r| serde_json::to_value(r).expect("a run serialises")).collect())
}

/// Defines an agent of the caller's tenant.
#[utoipa::path(post, path = "/api/agent-runtime/agents", tag = "sdk-agent-runtime", request_body = NewAgent,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "body": { "name": "race", "acting_persona_id": "{owner_persona_id}", "tier": "standard", "vector_namespace": "race", "created_by": "races" } }))),
    responses((status = 201, description = "the agent", body = Data<Agent>)))]
async fn create_agent(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewAgent>) -> ApiResult<Created<Agent>> {
    let body = body.checked()?;
    let name = body.name.trim();
    let persona = body.acting_persona_id.trim();
    let tier = body.tier.trim();
    let namespace = body.vector_namespace.trim();
    let created_by = body.created_by.trim();
    let description = Check::optional(&body.description);
    let kill_switch = Check::optional(&body.kill_switch_flag_id);
    let scope = body.agent_scope.unwrap_or_default();
    let tools = body.tool_manifest.unwrap_or_default();
    let ttl = body.default_ttl_seconds.unwrap_or(DEFAULT_TTL_SECONDS);
    if !hub_identity::personas::exists_in_tenant(&state.db.read, &ctx.tenant_id, persona).await? {
        return Err(ApiError::invalid("acting_persona_id does not name a persona of this tenant"));
    }
    let mut tx = state.db.begin().await?;
    let sql = format!(
        "INSERT INTO agent_definition ({AGENT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 'active', $13, $13) RETURNING {AGENT_COLUMNS}"
    );
    let agent: Agent = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(name)
        .bind(&description)
        .bind(persona)
        .bind(json!(scope).to_string())
        .bind(ttl)
        .bind(tier)
        .bind(&kill_switch)
        .bind(namespace)
        .bind(json!(tools).to_string())
        .bind(created_by)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
    audit::record(&mut tx, &ctx, events::AGENT_DEFINED, json!({ "agent_id": agent.agent_id, "name": name, "tier": tier, "acting_persona_id": persona }))
        .await?;
    tx.commit().await?;
    Ok(created(agent))
}

/// A filter of a list: trimmed, and blank as absent (the empty string the
/// listing's SQL reads as "any").
fn filter(value: &Option<String>) -> &str {
    value.as_deref().map(str::trim).unwrap_or_default()
}

/// A page of agents or runs: 50 by default, at most 500.
type ListPage = Page<LIST_DEFAULT, LIST_MAX>;

/// The tenant's agents, newest first.
#[utoipa::path(get, path = "/api/agent-runtime/agents", tag = "sdk-agent-runtime", params(AgentFilter, ListPage),
    responses((status = 200, description = "a page of agents", body = ListOf<Agent>)))]
async fn list_agents(State(state): State<AppState>, Tenant(ctx): Tenant, page: ListPage, Params(q): Params<AgentFilter>) -> ApiResult<ListOf<Agent>> {
    // RULINGS 1: a `tenant_id` given is the caller's tenant.
    ctx.check_tenant(q.tenant_id.as_deref())?;
    let status = q.status.map(AgentStatus::as_str).unwrap_or_default();
    page.list::<Agent>(&state.db.read, &AGENTS, &[&ctx.tenant_id, filter(&q.tier), status]).await
}

/// Starts a run of one of the tenant's agents.
///
/// Its deadline is now plus the agent's default TTL, and never later than
/// its parent's deadline (a child cannot outlive the run that spawned it).
/// `agent_chain` is the parent's chain plus this run.
#[utoipa::path(post, path = "/api/agent-runtime/runs", tag = "sdk-agent-runtime", request_body = NewAgentRun,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/agent-runtime/agents", { "name": "race", "acting_persona_id": "{owner_persona_id}", "tier": "standard", "vector_namespace": "race", "created_by": "races" }]], "body": { "agent_id": "{agent_id}", "persona_id": "{owner_persona_id}", "trace_id": "t-{unique}", "actor_id": "races", "actor_kind": "human" } }))),
    responses((status = 201, description = "the run", body = Data<AgentRun>)))]
async fn start_run(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewAgentRun>) -> ApiResult<Created<AgentRun>> {
    let body = body.checked()?;
    let agent_id = body.agent_id.trim();
    let persona_id = body.persona_id.trim();
    let trace_id = body.trace_id.trim();
    let actor_id = body.actor_id.trim();
    let actor_kind = body.actor_kind;
    let parent = Check::optional(&body.parent_run_id);

    let mut tx = state.db.begin().await?;
    let sql = format!("SELECT {AGENT_COLUMNS} FROM agent_definition WHERE agent_id = $1 AND tenant_id = $2");
    let agent: Agent = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(agent_id)
        .bind(&ctx.tenant_id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| ApiError::invalid("agent_id does not name an agent of this tenant"))?;
    // A definition stored before the bound existed may carry more.
    let ttl = agent.default_ttl_seconds.clamp(1, MAX_TTL_SECONDS);
    if agent.status != AgentStatus::Active {
        return Err(ApiError::Conflict(format!("the agent is {}", agent.status)));
    }
    if !hub_identity::personas::exists_in_tenant(&mut *tx, &ctx.tenant_id, persona_id).await? {
        return Err(ApiError::invalid("persona_id does not name a persona of this tenant"));
    }
    let now = chrono::Utc::now();
    let mut deadline = db::add_seconds(now, ttl).ok_or_else(|| anyhow::anyhow!("run deadline out of range"))?;
    let mut chain: Vec<Value> = Vec::new();
    if let Some(parent) = &parent {
        let sql = format!("SELECT {RUN_COLUMNS} FROM agent_run WHERE run_id = $1 AND tenant_id = $2");
        let run: AgentRun = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(parent)
            .bind(&ctx.tenant_id)
            .fetch_optional(&mut *tx)
            .await?
            .ok_or_else(|| ApiError::invalid("parent_run_id does not name a run of this tenant"))?;
        if let Value::Array(links) = run.agent_chain.0 {
            chain = links;
        }
        if chain.len() >= MAX_CHAIN_DEPTH {
            return Err(ApiError::invalid(format!("an agent chain is at most {MAX_CHAIN_DEPTH} runs deep")));
        }
        deadline = deadline.min(run.ttl_deadline.0);
    }
    let run_id = db::new_id();
    chain.push(json!({ "run_id": run_id, "agent_id": agent_id, "persona_id": persona_id }));
    let chain = Value::Array(chain);
    let (cred_kind, cred_id) = audit::actor_of(&ctx);
    let entry = audit::record_event(
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
    let sql =
        format!("INSERT INTO agent_run ({RUN_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'active', $12, $13, $13) RETURNING {RUN_COLUMNS}");
    let run: AgentRun = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&run_id)
        .bind(&ctx.tenant_id)
        .bind(agent_id)
        .bind(persona_id)
        .bind(trace_id)
        .bind(&parent)
        .bind(ttl)
        .bind(db::format_time(deadline))
        .bind(chain.to_string())
        .bind(actor_id)
        .bind(actor_kind)
        .bind(&entry.entry_id)
        .bind(db::format_time(now))
        .fetch_one(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(created(run))
}

/// The tenant's runs, newest first.
#[utoipa::path(get, path = "/api/agent-runtime/runs", tag = "sdk-agent-runtime", params(RunFilter, ListPage),
    responses((status = 200, description = "a page of runs", body = ListOf<AgentRun>)))]
async fn list_runs(State(state): State<AppState>, Tenant(ctx): Tenant, page: ListPage, Params(q): Params<RunFilter>) -> ApiResult<ListOf<AgentRun>> {
    // RULINGS 1: a `tenant_id` given is the caller's tenant.
    ctx.check_tenant(q.tenant_id.as_deref())?;
    let agent = canonical_uuid_opt(&q.agent_id).unwrap_or_default();
    let status = q.status.map(RunStatus::as_str).unwrap_or_default();
    page.list::<AgentRun>(&state.db.read, &RUNS, &[&ctx.tenant_id, &agent, status]).await
}

/// The tenant's agent `id` (a path id: not a UUID is 404).
async fn find_agent<'e, E>(exec: E, tenant_id: &str, id: &str) -> ApiResult<Agent>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let id = path_id(id)?.to_string();
    let sql = format!("SELECT {AGENT_COLUMNS} FROM agent_definition WHERE tenant_id = $1 AND agent_id = $2");
    let found: Option<Agent> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(&id).fetch_optional(exec).await?;
    found.ok_or(ApiError::NotFound)
}

/// The tenant's run `id` (a path id: not a UUID is 404).
async fn find_run<'e, E>(exec: E, tenant_id: &str, id: &str) -> ApiResult<AgentRun>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let id = path_id(id)?.to_string();
    let sql = format!("SELECT {RUN_COLUMNS} FROM agent_run WHERE tenant_id = $1 AND run_id = $2");
    let found: Option<AgentRun> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(&id).fetch_optional(exec).await?;
    found.ok_or(ApiError::NotFound)
}

/// One agent of the tenant.
#[utoipa::path(get, path = "/api/agent-runtime/agents/{agent_id}", tag = "sdk-agent-runtime", params(("agent_id" = String, Path, description = "the agent")),
    responses((status = 200, description = "the agent", body = Data<Agent>)))]
async fn get_agent(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Agent>> {
    Ok(ok(find_agent(&state.db.read, &ctx.tenant_id, &id).await?))
}

/// A text field of a change: absent keeps it (`(0, None)`), blank clears
/// it (`(1, None)`), a text sets it (`(1, Some)`).
fn settable(value: &Option<String>) -> (i64, Option<String>) {
    match value {
        None => (0, None),
        Some(_) => (1, Check::optional(value)),
    }
}

/// Changes an agent's description, scope, tool manifest, default TTL or
/// kill-switch flag (what is absent stays; at least one is given). Runs
/// already started keep their deadline. A disabled agent may be changed.
#[utoipa::path(patch, path = "/api/agent-runtime/agents/{agent_id}", tag = "sdk-agent-runtime", request_body = AgentUpdate,
    params(("agent_id" = String, Path, description = "the agent")),
    extensions(("x-concurrency" = json!({ "outcome": "independent",
        "given": [["POST", "/api/agent-runtime/agents", { "name": "race", "acting_persona_id": "{owner_persona_id}", "tier": "standard", "vector_namespace": "race", "created_by": "races" }]],
        "body": { "description": "race", "default_ttl_seconds": 60 } }))),
    responses((status = 200, description = "the agent", body = Data<Agent>)))]
async fn update_agent(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<AgentUpdate>) -> ApiResult<Data<Agent>> {
    let mut tx = state.db.begin().await?;
    // Another tenant's agent is not found, whatever the body.
    let agent = find_agent(&mut *tx, &ctx.tenant_id, &id).await?;
    let body = body.checked()?;
    let (set_description, description) = settable(&body.description);
    let (set_kill_switch, kill_switch) = settable(&body.kill_switch_flag_id);
    let scope = body.agent_scope.as_ref().map(|s| json!(s).to_string());
    let tools = body.tool_manifest.as_ref().map(|t| json!(t).to_string());
    let ttl = body.default_ttl_seconds;
    if set_description == 0 && set_kill_switch == 0 && scope.is_none() && tools.is_none() && ttl.is_none() {
        return Err(ApiError::invalid("give at least one of: description, agent_scope, tool_manifest, default_ttl_seconds, kill_switch_flag_id"));
    }
    let sql = format!(
        "UPDATE agent_definition SET description = CASE WHEN $1 = 1 THEN $2 ELSE description END, agent_scope = COALESCE($3, agent_scope), \
         tool_manifest = COALESCE($4, tool_manifest), default_ttl_seconds = COALESCE($5, default_ttl_seconds), \
         kill_switch_flag_id = CASE WHEN $6 = 1 THEN $7 ELSE kill_switch_flag_id END, updated_at = $8 \
         WHERE tenant_id = $9 AND agent_id = $10 RETURNING {AGENT_COLUMNS}"
    );
    let changed: Agent = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(set_description)
        .bind(&description)
        .bind(&scope)
        .bind(&tools)
        .bind(ttl)
        .bind(set_kill_switch)
        .bind(&kill_switch)
        .bind(db::now())
        .bind(&ctx.tenant_id)
        .bind(agent.agent_id)
        .fetch_one(&mut *tx)
        .await?;
    let fields: Vec<&str> = [
        ("description", set_description == 1),
        ("agent_scope", scope.is_some()),
        ("tool_manifest", tools.is_some()),
        ("default_ttl_seconds", ttl.is_some()),
        ("kill_switch_flag_id", set_kill_switch == 1),
    ]
    .into_iter()
    .filter_map(|(name, given)| given.then_some(name))
    .collect();
    audit::record(&mut tx, &ctx, events::AGENT_UPDATED, json!({ "agent_id": agent.agent_id, "fields": fields })).await?;
    tx.commit().await?;
    Ok(ok(changed))
}

/// Switches an agent to `to` in one guarded statement; an agent already in
/// `to` is answered as it is, without an event (of two requests at once,
/// one switches it and the other answers what it committed).
async fn switch_agent(state: &AppState, ctx: &TenantCtx, id: &str, to: AgentStatus) -> ApiResult<Agent> {
    let id = path_id(id)?.to_string();
    let mut tx = state.db.begin().await?;
    let sql =
        format!("UPDATE agent_definition SET status = $1, updated_at = $2 WHERE tenant_id = $3 AND agent_id = $4 AND status <> $1 RETURNING {AGENT_COLUMNS}");
    let moved: Option<Agent> =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(to).bind(db::now()).bind(&ctx.tenant_id).bind(&id).fetch_optional(&mut *tx).await?;
    let Some(agent) = moved else {
        return find_agent(&mut *tx, &ctx.tenant_id, &id).await;
    };
    audit::record(&mut tx, ctx, events::AGENT_UPDATED, json!({ "agent_id": agent.agent_id, "status": to })).await?;
    tx.commit().await?;
    Ok(agent)
}

/// Disables an agent: it starts no new run (409) until enabled again;
/// its runs already started are left as they are. Disabling a disabled
/// agent changes nothing, records no event and answers 200.
#[utoipa::path(post, path = "/api/agent-runtime/agents/{agent_id}/disable", tag = "sdk-agent-runtime", params(("agent_id" = String, Path, description = "the agent")),
    extensions(("x-concurrency" = json!({ "outcome": "same-answer",
        "given": [["POST", "/api/agent-runtime/agents", { "name": "race", "acting_persona_id": "{owner_persona_id}", "tier": "standard", "vector_namespace": "race", "created_by": "races" }]] }))),
    responses((status = 200, description = "the agent, disabled", body = Data<Agent>)))]
async fn disable_agent(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Agent>> {
    Ok(ok(switch_agent(&state, &ctx, &id, AgentStatus::Disabled).await?))
}

/// Enables a disabled agent again. Enabling an active agent changes
/// nothing, records no event and answers 200.
#[utoipa::path(post, path = "/api/agent-runtime/agents/{agent_id}/enable", tag = "sdk-agent-runtime", params(("agent_id" = String, Path, description = "the agent")),
    extensions(("x-concurrency" = json!({ "outcome": "same-answer", "given": [
        ["POST", "/api/agent-runtime/agents", { "name": "race", "acting_persona_id": "{owner_persona_id}", "tier": "standard", "vector_namespace": "race", "created_by": "races" }],
        ["POST", "/api/agent-runtime/agents/{agent_id}/disable", null]] }))),
    responses((status = 200, description = "the agent, active", body = Data<Agent>)))]
async fn enable_agent(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Agent>> {
    Ok(ok(switch_agent(&state, &ctx, &id, AgentStatus::Active).await?))
}

/// One run of the tenant.
#[utoipa::path(get, path = "/api/agent-runtime/runs/{run_id}", tag = "sdk-agent-runtime", params(("run_id" = String, Path, description = "the run")),
    responses((status = 200, description = "the run", body = Data<AgentRun>)))]
async fn get_run(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<AgentRun>> {
    Ok(ok(find_run(&state.db.read, &ctx.tenant_id, &id).await?))
}

/// A run as guarded writes name it.
const RUN: Stateful = Stateful { noun: "run", table: "agent_run", key: "run_id", state: "status" };

/// Ends an active run (`to`) in one guarded statement and records
/// `event_type` (regulated, the run's chain as actor provenance) in the
/// same transaction; a run that is not active is 409 naming its status.
/// A run whose `ttl_deadline` has passed ends `expired` instead, in that
/// same statement (whatever the sweep has reached): `agent.run.expired.v1`
/// is recorded and committed, and the answer is 409 `the run is expired`,
/// as it is once the sweep has expired it. A late end never succeeds.
async fn end_run(mut tx: Tx, ctx: &TenantCtx, id: &str, to: RunStatus, event_type: &str, expected: &str) -> ApiResult<AgentRun> {
    let id = path_id(id)?.to_string();
    let sql = format!(
        "UPDATE agent_run SET status = CASE WHEN ttl_deadline <= $2 THEN 'expired' ELSE $1 END, updated_at = $2 \
         WHERE tenant_id = $3 AND run_id = $4 AND status = 'active' RETURNING {RUN_COLUMNS}"
    );
    let ended: Option<AgentRun> =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(to).bind(db::now()).bind(&ctx.tenant_id).bind(&id).fetch_optional(&mut *tx).await?;
    let run = RUN.settle(&mut tx, &ctx.tenant_id, &id, ended, expected).await?;
    if run.status == RunStatus::Expired {
        record_expiry(&mut tx, &run).await?;
        tx.commit().await?;
        return Err(ApiError::Conflict(format!("the run is {}: {expected}", run.status)));
    }
    let (actor_kind, actor_id) = audit::actor_of(ctx);
    audit::record_event(
        &mut tx,
        audit::Event {
            tenant_id: &ctx.tenant_id,
            pool_index: None,
            event_type,
            actor_kind,
            actor_id,
            actor_chain: Some(&run.agent_chain.0),
            payload: &json!({ "run_id": run.run_id, "agent_id": run.agent_id, "trace_id": run.trace_id, "status": to }),
            retention_class: Some("regulated"),
            occurred_at: None,
        },
    )
    .await?;
    tx.commit().await?;
    Ok(run)
}

/// Records `agent.run.expired.v1` for a run just expired: regulated, as
/// the run's other events, with its chain as actor provenance; the actor
/// is the hub (`system`, `hub`), whose deadline ended the run, whether
/// its sweep or a late request found it.
async fn record_expiry(tx: &mut Tx, run: &AgentRun) -> ApiResult<()> {
    audit::record_event(
        tx,
        audit::Event {
            tenant_id: &run.tenant_id,
            pool_index: None,
            event_type: events::AGENT_RUN_EXPIRED,
            actor_kind: "system",
            actor_id: "hub",
            actor_chain: Some(&run.agent_chain.0),
            payload: &json!({
                "run_id": run.run_id, "agent_id": run.agent_id, "trace_id": run.trace_id, "status": RunStatus::Expired,
                "ttl_deadline": run.ttl_deadline,
            }),
            retention_class: Some("regulated"),
            occurred_at: None,
        },
    )
    .await?;
    Ok(())
}

/// How many due runs one pass of [`expire_due`] reads at a time.
const SWEEP_BATCH: i64 = 200;

/// Expires every `active` run whose `ttl_deadline` has passed, of every
/// tenant: for each, one guarded statement (`status = 'active' AND
/// ttl_deadline <= now`) and `agent.run.expired.v1` in the same
/// transaction, so that with several replicas sweeping at once (or a late
/// completion meanwhile) each run expires once, with one event. A run's
/// active children are not expired with it: their deadlines are capped by
/// the parent's, so the same pass finds them due on their own. Returns
/// how many runs it expired.
pub async fn expire_due(db: &Db) -> ApiResult<usize> {
    let now = db::now();
    let mut expired = 0;
    loop {
        let due: Vec<(String, String)> =
            sqlx::query_as("SELECT tenant_id, run_id FROM agent_run WHERE status = 'active' AND ttl_deadline <= $1 ORDER BY ttl_deadline, run_id LIMIT $2")
                .bind(&now)
                .bind(SWEEP_BATCH)
                .fetch_all(db.writer())
                .await?;
        let mut done = 0;
        for (tenant_id, run_id) in &due {
            let mut tx = db.begin().await?;
            let sql = format!(
                "UPDATE agent_run SET status = 'expired', updated_at = $1 \
                 WHERE tenant_id = $2 AND run_id = $3 AND status = 'active' AND ttl_deadline <= $4 RETURNING {RUN_COLUMNS}"
            );
            let run: Option<AgentRun> =
                sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(db::now()).bind(tenant_id).bind(run_id).bind(&now).fetch_optional(&mut *tx).await?;
            // Ended meanwhile (another replica, a request): nothing to do.
            let Some(run) = run else { continue };
            record_expiry(&mut tx, &run).await?;
            tx.commit().await?;
            done += 1;
        }
        expired += done;
        // A full batch of which nothing expired is another replica's work.
        if due.len() < SWEEP_BATCH as usize || done == 0 {
            return Ok(expired);
        }
    }
}

/// Completes an active run: `succeeded` (`agent.run.completed.v1`) or
/// `failed` (`agent.run.failed.v1`). A run that has ended (completed,
/// failed, cancelled or expired) is 409; so is a run past its deadline,
/// which expires instead.
#[utoipa::path(post, path = "/api/agent-runtime/runs/{run_id}/complete", tag = "sdk-agent-runtime", request_body = RunCompletion,
    params(("run_id" = String, Path, description = "the run")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [
        ["POST", "/api/agent-runtime/agents", { "name": "race", "acting_persona_id": "{owner_persona_id}", "tier": "standard", "vector_namespace": "race", "created_by": "races" }],
        ["POST", "/api/agent-runtime/runs", { "agent_id": "{agent_id}", "persona_id": "{owner_persona_id}", "trace_id": "t-{unique}", "actor_id": "races", "actor_kind": "human" }]],
        "body": { "status": "succeeded" } }))),
    responses((status = 200, description = "the run, ended", body = Data<AgentRun>)))]
async fn complete_run(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<RunCompletion>) -> ApiResult<Data<AgentRun>> {
    let mut tx = state.db.begin().await?;
    // Another tenant's run is not found, whatever the body.
    let run = find_run(&mut *tx, &ctx.tenant_id, &id).await?;
    let (to, event_type) = body.checked()?.status.ends();
    Ok(ok(end_run(tx, &ctx, &run.run_id.to_string(), to, event_type, "only an active run can be completed").await?))
}

/// Cancels an active run (`agent.run.cancelled.v1`). A run that has ended
/// (completed, failed, cancelled or expired) is 409; so is a run past its
/// deadline, which expires instead. Its child runs are left as they are.
#[utoipa::path(post, path = "/api/agent-runtime/runs/{run_id}/cancel", tag = "sdk-agent-runtime", params(("run_id" = String, Path, description = "the run")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [
        ["POST", "/api/agent-runtime/agents", { "name": "race", "acting_persona_id": "{owner_persona_id}", "tier": "standard", "vector_namespace": "race", "created_by": "races" }],
        ["POST", "/api/agent-runtime/runs", { "agent_id": "{agent_id}", "persona_id": "{owner_persona_id}", "trace_id": "t-{unique}", "actor_id": "races", "actor_kind": "human" }]] }))),
    responses((status = 200, description = "the run, cancelled", body = Data<AgentRun>)))]
async fn cancel_run(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<AgentRun>> {
    let tx = state.db.begin().await?;
    Ok(ok(end_run(tx, &ctx, &id, RunStatus::Cancelled, events::AGENT_RUN_CANCELLED, "only an active run can be cancelled").await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_actor_kinds_are_the_validated_ones() {
        let schema = serde_json::to_value(<RunActorKind as utoipa::PartialSchema>::schema()).unwrap();
        assert_eq!(schema["enum"], json!(ACTOR_KINDS));
    }
}
