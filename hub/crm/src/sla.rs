//! sdk-sla: policies (a target in minutes) with escalation rungs, clocks
//! started against a policy (due at start plus the target) and stopped once
//! the work is done, and the at-risk list: running clocks within
//! `within_minutes` of their deadline or past it, nearest deadline first.
//!
//! A rung fires `offset_minutes` from the deadline (negative: before it).
//! The at-risk list computes which rungs have fired from the clock's
//! deadline and the time of reading, so its answer is exact whenever it is
//! asked. The SLA sweep ([`fire_due`], every `HUB_SLA_SWEEP_SECONDS`)
//! records each firing of a running clock's rung once, whichever replica
//! gets there first, with `sla.rung.fired.v1` in the same transaction:
//! the event is the notification (it names the rung's
//! `notify_persona_id`, and reaches the tenant's webhook endpoints
//! subscribed to it through the outbox). A stopped clock fires nothing
//! further; a clock's read lists the rungs fired for it.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use hub_identity::personas;
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_policy, list_policies))
        .routes(routes!(get_policy, update_policy))
        .routes(routes!(add_rung))
        .routes(routes!(delete_rung))
        .routes(routes!(start_clock, list_clocks))
        .routes(routes!(get_clock))
        .routes(routes!(stop_clock))
        .routes(routes!(at_risk))
}

stored_enum! {
    /// How urgent an escalation is, least to most severe.
    #[schema(as = SlaSeverity)]
    pub enum Severity { Low = "low", Medium = "medium", High = "high", Critical = "critical" }
}

impl Severity {
    /// Its place from least to most severe.
    fn rank(self) -> usize {
        Severity::ALL.iter().position(|s| *s == self).unwrap_or(0)
    }
}

stored_enum! {
    /// Whether a clock is still running.
    #[schema(as = SlaClockState)]
    pub enum ClockState { Running = "running", Stopped = "stopped" }
}

/// Rungs of one policy at most.
const MAX_RUNGS: i64 = 20;

#[derive(Debug, FromRow, Serialize, ToSchema)]
struct SlaPolicy {
    policy_id: Id,
    name: String,
    description: Option<String>,
    /// Minutes from a clock's start to its deadline.
    target_minutes: i64,
    created_by: String,
    created_at: Timestamp,
}

const POLICY_COLUMNS: &str = "policy_id, name, description, target_minutes, created_by, created_at";
/// The tenant's policies, newest first.
const POLICIES: Listing = Listing { table: "sla_policy", columns: POLICY_COLUMNS, filter: "tenant_id = $1", order: "created_at DESC, policy_id DESC" };

#[derive(Debug, Clone, FromRow, Serialize, ToSchema)]
struct SlaRung {
    rung_id: Id,
    #[serde(skip)]
    policy_id: Id,
    /// Minutes from the deadline at which the rung fires (negative: before it).
    offset_minutes: i64,
    severity: Severity,
    /// Who the escalation goes to.
    notify_persona_id: Option<String>,
    created_at: Timestamp,
}

const RUNG_COLUMNS: &str = "rung_id, policy_id, offset_minutes, severity, notify_persona_id, created_at";

/// A policy with its rungs, earliest first.
#[derive(Serialize, ToSchema)]
struct SlaPolicyWithRungs {
    #[serde(flatten)]
    policy: SlaPolicy,
    rungs: Vec<SlaRung>,
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
struct SlaClock {
    clock_id: Id,
    policy_id: Id,
    /// What the clock times (a request, a ticket, ...): opaque.
    subject_ref: String,
    state: ClockState,
    started_at: Timestamp,
    due_at: Timestamp,
    stopped_at: Option<Timestamp>,
    /// Whether it stopped after its deadline (false while running).
    #[sqlx(try_from = "i64")]
    #[schema(value_type = bool)]
    breached: Flag,
    created_by: String,
}

const CLOCK_COLUMNS: &str = "clock_id, policy_id, subject_ref, state, started_at, due_at, stopped_at, breached, created_by";
/// The tenant's clocks, of one subject, state and policy when `$2`, `$3`
/// and `$4` are not empty; most recently started first.
const CLOCKS: Listing = Listing {
    table: "sla_clock",
    columns: CLOCK_COLUMNS,
    filter: "tenant_id = $1 AND ($2 = '' OR subject_ref = $2) AND ($3 = '' OR state = $3) AND ($4 = '' OR policy_id = $4)",
    order: "started_at DESC, clock_id DESC",
};

async fn find_policy(tx: &mut Tx, tenant: &str, id: &str) -> ApiResult<SlaPolicy> {
    let sql = format!("SELECT {POLICY_COLUMNS} FROM sla_policy WHERE tenant_id = $1 AND policy_id = $2");
    let found: Option<SlaPolicy> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant).bind(id).fetch_optional(&mut **tx).await?;
    found.ok_or(ApiError::NotFound)
}

#[derive(Deserialize, ToSchema)]
struct NewSlaPolicy {
    /// Unique in the tenant (409).
    #[schema(max_length = 200)]
    name: String,
    /// At most a year.
    #[schema(minimum = 1, maximum = 525600)]
    target_minutes: i64,
    #[schema(max_length = 2000)]
    description: Option<String>,
}

/// Creates a policy.
#[utoipa::path(post, path = "/api/sla/policies", tag = "sdk-sla", request_body = NewSlaPolicy,
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "body": { "name": "race-{unique}", "target_minutes": 60 } }))),
    responses((status = 201, description = "the policy", body = Data<SlaPolicy>)))]
async fn create_policy(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewSlaPolicy>) -> ApiResult<Created<SlaPolicy>> {
    let body = body.checked()?;
    let name = body.name.trim().to_string();
    let target = body.target_minutes;
    let description = Check::optional(&body.description);
    let mut tx = state.db.begin().await?;
    let sql = format!(
        "INSERT INTO sla_policy (policy_id, tenant_id, name, description, target_minutes, created_by, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7) \
         ON CONFLICT (tenant_id, name) DO NOTHING RETURNING {POLICY_COLUMNS}"
    );
    let made: Option<SlaPolicy> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(&name)
        .bind(&description)
        .bind(target)
        .bind(audit::actor_of(&ctx).1)
        .bind(db::now())
        .fetch_optional(&mut *tx)
        .await?;
    let policy = made.ok_or_else(|| ApiError::Conflict(format!("the tenant has a policy named {name}")))?;
    audit::record(&mut tx, &ctx, events::SLA_POLICY_CREATED, json!({ "policy_id": policy.policy_id, "target_minutes": target })).await?;
    tx.commit().await?;
    Ok(created(policy))
}

/// A policy with its rungs.
#[utoipa::path(get, path = "/api/sla/policies/{policy_id}", tag = "sdk-sla", params(("policy_id" = String, Path, description = "the policy")),
    responses((status = 200, description = "the policy and its rungs, earliest first", body = Data<SlaPolicyWithRungs>)))]
async fn get_policy(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<SlaPolicyWithRungs>> {
    let id = path_id(&id)?.to_string();
    let sql = format!("SELECT {POLICY_COLUMNS} FROM sla_policy WHERE tenant_id = $1 AND policy_id = $2");
    let policy: Option<SlaPolicy> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&state.db.read).await?;
    let policy = policy.ok_or(ApiError::NotFound)?;
    let rungs = rungs_of(&state.db.read, &ctx.tenant_id, &[policy.policy_id]).await?;
    Ok(ok(SlaPolicyWithRungs { policy, rungs }))
}

/// The tenant's policies, newest first (their rungs: read one).
#[utoipa::path(get, path = "/api/sla/policies", tag = "sdk-sla", params(Page),
    responses((status = 200, description = "one page of policies", body = ListOf<SlaPolicy>)))]
async fn list_policies(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page) -> ApiResult<ListOf<SlaPolicy>> {
    page.list::<SlaPolicy>(&state.db.read, &POLICIES, &[&ctx.tenant_id]).await
}

/// A change of a policy: what is absent stays; at least one field.
#[derive(Deserialize, ToSchema)]
struct SlaPolicyUpdate {
    /// Unique in the tenant (409).
    #[schema(max_length = 200)]
    name: Option<String>,
    /// Blank clears it.
    #[schema(max_length = 2000)]
    description: Option<String>,
    /// For the clocks started from now on (a running clock keeps its
    /// deadline). At most a year.
    #[schema(minimum = 1, maximum = 525600)]
    target_minutes: Option<i64>,
}

/// Changes a policy's name, description or target (what is absent stays;
/// at least one is given). Clocks already started keep their deadline.
#[utoipa::path(patch, path = "/api/sla/policies/{policy_id}", tag = "sdk-sla", params(("policy_id" = String, Path, description = "the policy")),
    request_body = SlaPolicyUpdate,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/sla/policies", { "name": "race-{unique}", "target_minutes": 60 }]], "body": { "target_minutes": 90, "description": "race" } }))),
    responses((status = 200, description = "the policy and its rungs, earliest first", body = Data<SlaPolicyWithRungs>)))]
async fn update_policy(
    State(state): State<AppState>,
    Tenant(ctx): Tenant,
    Path(id): Path<String>,
    body: Body<SlaPolicyUpdate>,
) -> ApiResult<Data<SlaPolicyWithRungs>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    // Another tenant's policy is not found, whatever the body.
    find_policy(&mut tx, &ctx.tenant_id, &id).await?;
    let body = body.checked()?;
    let mut check = Check::new();
    let name = match &body.name {
        None => None,
        Some(_) => Some(check.required("name", &body.name)),
    };
    let clear_description = body.description.as_ref().map(|_| 1i64).unwrap_or(0);
    let description = Check::optional(&body.description);
    let target = body.target_minutes;
    if name.is_none() && clear_description == 0 && target.is_none() {
        check.fail("give at least one of: name, description, target_minutes");
    }
    check.finish()?;
    let sql = format!(
        "UPDATE sla_policy SET name = COALESCE($1, name), description = CASE WHEN $2 = 1 THEN $3 ELSE description END, \
         target_minutes = COALESCE($4, target_minutes) WHERE tenant_id = $5 AND policy_id = $6 RETURNING {POLICY_COLUMNS}"
    );
    let policy: SlaPolicy = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&name)
        .bind(clear_description)
        .bind(&description)
        .bind(target)
        .bind(&ctx.tenant_id)
        .bind(&id)
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| match &e {
            sqlx::Error::Database(d) if d.is_unique_violation() => {
                ApiError::Conflict(format!("the tenant has a policy named {}", name.as_deref().unwrap_or_default()))
            }
            _ => e.into(),
        })?;
    let fields: Vec<&str> = [("name", name.is_some()), ("description", clear_description == 1), ("target_minutes", target.is_some())]
        .into_iter()
        .filter_map(|(f, given)| given.then_some(f))
        .collect();
    let payload = json!({ "policy_id": policy.policy_id, "fields": fields, "target_minutes": policy.target_minutes });
    audit::record(&mut tx, &ctx, events::SLA_POLICY_UPDATED, payload).await?;
    tx.commit().await?;
    let rungs = rungs_of(&state.db.read, &ctx.tenant_id, &[policy.policy_id]).await?;
    Ok(ok(SlaPolicyWithRungs { policy, rungs }))
}

/// The rungs of the given policies, earliest first.
async fn rungs_of(pool: &sqlx::AnyPool, tenant: &str, policies: &[Id]) -> ApiResult<Vec<SlaRung>> {
    if policies.is_empty() {
        return Ok(Vec::new());
    }
    let sql = format!(
        "SELECT {RUNG_COLUMNS} FROM sla_rung WHERE tenant_id = $1 AND policy_id IN ({}) ORDER BY offset_minutes, rung_id",
        db::placeholders(2, policies.len())
    );
    let mut q = sqlx::query_as::<_, SlaRung>(sqlx::AssertSqlSafe(sql)).bind(tenant);
    for p in policies {
        q = q.bind(p);
    }
    Ok(q.fetch_all(pool).await?)
}

#[derive(Deserialize, ToSchema)]
struct NewSlaRung {
    /// Minutes from the deadline, at most a year either way (negative:
    /// before it); one rung per offset in a policy (409).
    #[schema(minimum = -525600, maximum = 525600)]
    offset_minutes: i64,
    severity: Severity,
    /// A persona of the tenant the escalation goes to.
    #[schema(format = "uuid")]
    notify_persona_id: Option<String>,
}

/// A policy as the addition of its rungs locks it: the row owns the
/// bound on their number.
const POLICY: Stateful = Stateful { noun: "policy", table: "sla_policy", key: "policy_id", state: "policy_id" };

/// Adds an escalation rung to a policy (at most 20).
#[utoipa::path(post, path = "/api/sla/policies/{policy_id}/rungs", tag = "sdk-sla", params(("policy_id" = String, Path, description = "the policy")),
    request_body = NewSlaRung, extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/api/sla/policies", { "name": "race-{unique}", "target_minutes": 60 }]], "body": { "offset_minutes": -10, "severity": "high" } }))),
    responses((status = 201, description = "the rung", body = Data<SlaRung>)))]
async fn add_rung(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<NewSlaRung>) -> ApiResult<Created<SlaRung>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    let policy = find_policy(&mut tx, &ctx.tenant_id, &id).await?;
    let body = body.checked()?;
    let offset = body.offset_minutes;
    let severity = body.severity;
    let notify = canonical_uuid_opt(&body.notify_persona_id);
    if let Some(p) = &notify
        && !personas::exists_in_tenant(&mut *tx, &ctx.tenant_id, p).await?
    {
        return Err(ApiError::invalid("notify_persona_id is not a persona of this tenant"));
    }
    // The policy's row is locked until the rung is committed: additions
    // to one policy count its rungs one after another.
    POLICY.lock::<String>(&mut tx, &ctx.tenant_id, &policy.policy_id.to_string()).await?;
    let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM sla_rung WHERE tenant_id = $1 AND policy_id = $2")
        .bind(&ctx.tenant_id)
        .bind(policy.policy_id)
        .fetch_one(&mut *tx)
        .await?;
    if count >= MAX_RUNGS {
        return Err(ApiError::Conflict(format!("the policy has {MAX_RUNGS} rungs, the most it may have")));
    }
    let sql = format!(
        "INSERT INTO sla_rung (rung_id, tenant_id, policy_id, offset_minutes, severity, notify_persona_id, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7) \
         ON CONFLICT (policy_id, offset_minutes) DO NOTHING RETURNING {RUNG_COLUMNS}"
    );
    let made: Option<SlaRung> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(policy.policy_id)
        .bind(offset)
        .bind(severity)
        .bind(&notify)
        .bind(db::now())
        .fetch_optional(&mut *tx)
        .await?;
    let rung = made.ok_or_else(|| ApiError::Conflict(format!("the policy has a rung at offset {offset}")))?;
    let payload = json!({ "policy_id": policy.policy_id, "rung_id": rung.rung_id, "offset_minutes": offset, "severity": severity });
    audit::record(&mut tx, &ctx, events::SLA_RUNG_CREATED, payload).await?;
    tx.commit().await?;
    Ok(created(rung))
}

/// The answer of a rung's removal.
#[derive(Serialize, ToSchema)]
struct SlaRungDeleted {
    policy_id: Id,
    rung_id: Id,
    deleted: bool,
}

/// Removes a rung from a policy (the rung is erased: it fires for no
/// clock, running or stopped, from now on). Of two removals at once, the
/// other finds nothing (404).
#[utoipa::path(delete, path = "/api/sla/policies/{policy_id}/rungs/{rung_id}", tag = "sdk-sla",
    params(("policy_id" = String, Path, description = "the policy"), ("rung_id" = String, Path, description = "the rung")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "losers": 404, "given": [
        ["POST", "/api/sla/policies", { "name": "race-{unique}", "target_minutes": 60 }],
        ["POST", "/api/sla/policies/{policy_id}/rungs", { "offset_minutes": -10, "severity": "high" }]] }))),
    responses((status = 200, description = "deleted", body = Data<SlaRungDeleted>)))]
async fn delete_rung(State(state): State<AppState>, Tenant(ctx): Tenant, Path((policy, rung)): Path<(String, String)>) -> ApiResult<Data<SlaRungDeleted>> {
    let policy = path_id(&policy)?.to_string();
    let rung = path_id(&rung)?.to_string();
    let mut tx = state.db.begin().await?;
    let sql = format!("DELETE FROM sla_rung WHERE tenant_id = $1 AND policy_id = $2 AND rung_id = $3 RETURNING {RUNG_COLUMNS}");
    let gone: Option<SlaRung> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&policy).bind(&rung).fetch_optional(&mut *tx).await?;
    let gone = gone.ok_or(ApiError::NotFound)?;
    let payload = json!({ "policy_id": gone.policy_id, "rung_id": gone.rung_id, "offset_minutes": gone.offset_minutes, "severity": gone.severity });
    audit::record(&mut tx, &ctx, events::SLA_RUNG_DELETED, payload).await?;
    tx.commit().await?;
    Ok(ok(SlaRungDeleted { policy_id: gone.policy_id, rung_id: gone.rung_id, deleted: true }))
}

#[derive(Deserialize, ToSchema)]
struct NewSlaClock {
    /// A policy of the tenant.
    #[schema(format = "uuid")]
    policy_id: String,
    /// What the clock times (`service_request:<id>`, ...).
    #[schema(max_length = 256)]
    subject_ref: String,
    /// When the clock started (at most 5 minutes ahead); now when absent.
    #[schema(format = DateTime)]
    started_at: Option<String>,
}

/// Starts a clock: due at `started_at` plus the policy's target.
#[utoipa::path(post, path = "/api/sla/clocks", tag = "sdk-sla", request_body = NewSlaClock,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/sla/policies", { "name": "race-{unique}", "target_minutes": 60 }]], "body": { "policy_id": "{policy_id}", "subject_ref": "race" } }))),
    responses((status = 201, description = "the clock, running", body = Data<SlaClock>)))]
async fn start_clock(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewSlaClock>) -> ApiResult<Created<SlaClock>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let policy = canonical_uuid(&body.policy_id);
    let subject = body.subject_ref.trim().to_string();
    let started = check.time_or_now("started_at", &body.started_at);
    check.finish()?;
    let mut tx = state.db.begin().await?;
    let policy = find_policy(&mut tx, &ctx.tenant_id, &policy).await.map_err(|_| ApiError::invalid("policy_id is not a policy of this tenant"))?;
    let due = db::parse_time(&started).and_then(|t| db::add_seconds(t, policy.target_minutes * 60)).map(db::format_time).unwrap_or_default();
    let sql = format!(
        "INSERT INTO sla_clock (clock_id, tenant_id, policy_id, subject_ref, state, started_at, due_at, breached, created_by) \
         VALUES ($1, $2, $3, $4, 'running', $5, $6, 0, $7) RETURNING {CLOCK_COLUMNS}"
    );
    let clock: SlaClock = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(policy.policy_id)
        .bind(&subject)
        .bind(&started)
        .bind(&due)
        .bind(audit::actor_of(&ctx).1)
        .fetch_one(&mut *tx)
        .await?;
    let payload = json!({ "clock_id": clock.clock_id, "policy_id": policy.policy_id, "subject_ref": subject, "due_at": due });
    audit::record(&mut tx, &ctx, events::SLA_CLOCK_STARTED, payload).await?;
    tx.commit().await?;
    Ok(created(clock))
}

/// The filters of the clock list.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ClockFilter {
    /// Only the clocks of this subject (exact).
    #[param(max_length = 256)]
    subject_ref: Option<String>,
    /// Only the clocks in this state.
    #[param(inline)]
    state: Option<ClockState>,
    /// Only the clocks of this policy.
    #[param(format = "uuid")]
    policy_id: Option<String>,
}

/// The tenant's clocks, most recently started first.
#[utoipa::path(get, path = "/api/sla/clocks", tag = "sdk-sla", params(ClockFilter, Page),
    responses((status = 200, description = "one page of clocks", body = ListOf<SlaClock>)))]
async fn list_clocks(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page, Params(q): Params<ClockFilter>) -> ApiResult<ListOf<SlaClock>> {
    let subject = q.subject_ref.as_deref().map(str::trim).unwrap_or_default();
    let clock_state = q.state.map(ClockState::as_str).unwrap_or_default();
    let policy = canonical_uuid_opt(&q.policy_id).unwrap_or_default();
    page.list::<SlaClock>(&state.db.read, &CLOCKS, &[&ctx.tenant_id, subject, clock_state, &policy]).await
}

/// A rung fired for a clock: recorded by the SLA sweep once, kept when the
/// rung is removed later.
#[derive(Debug, FromRow, Serialize, ToSchema)]
struct SlaRungFiring {
    rung_id: Id,
    offset_minutes: i64,
    severity: Severity,
    /// Who the escalation went to.
    notify_persona_id: Option<String>,
    /// When the rung was due to fire: the clock's deadline plus its offset.
    fires_at: Timestamp,
    /// When the sweep fired it (`sla.rung.fired.v1`).
    fired_at: Timestamp,
}

/// A clock with the rungs fired for it, earliest first.
#[derive(Serialize, ToSchema)]
struct SlaClockWithFirings {
    #[serde(flatten)]
    clock: SlaClock,
    fired_rungs: Vec<SlaRungFiring>,
}

/// One clock, with the rungs fired for it.
#[utoipa::path(get, path = "/api/sla/clocks/{clock_id}", tag = "sdk-sla", params(("clock_id" = String, Path, description = "the clock")),
    responses((status = 200, description = "the clock and the rungs fired for it, earliest first", body = Data<SlaClockWithFirings>)))]
async fn get_clock(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<SlaClockWithFirings>> {
    let id = path_id(&id)?.to_string();
    let sql = format!("SELECT {CLOCK_COLUMNS} FROM sla_clock WHERE tenant_id = $1 AND clock_id = $2");
    let clock: Option<SlaClock> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&state.db.read).await?;
    let clock = clock.ok_or(ApiError::NotFound)?;
    let fired_rungs: Vec<SlaRungFiring> = sqlx::query_as(
        "SELECT rung_id, offset_minutes, severity, notify_persona_id, fires_at, fired_at FROM sla_rung_firing \
         WHERE tenant_id = $1 AND clock_id = $2 ORDER BY fires_at, rung_id",
    )
    .bind(&ctx.tenant_id)
    .bind(&id)
    .fetch_all(&state.db.read)
    .await?;
    Ok(ok(SlaClockWithFirings { clock, fired_rungs }))
}

/// A clock as guarded writes name it.
const CLOCK: Stateful = Stateful { noun: "clock", table: "sla_clock", key: "clock_id", state: "state" };

/// Stops a running clock; `breached` when it stops after its deadline
/// (`sla.clock.breached.v1` too). 409 when stopped already.
#[utoipa::path(post, path = "/api/sla/clocks/{clock_id}/stop", tag = "sdk-sla", params(("clock_id" = String, Path, description = "the clock")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/api/sla/policies", { "name": "race-{unique}", "target_minutes": 60 }], ["POST", "/api/sla/clocks", { "policy_id": "{policy_id}", "subject_ref": "race" }]] }))),
    responses((status = 200, description = "the clock, stopped", body = Data<SlaClock>)))]
async fn stop_clock(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<SlaClock>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    let now = db::now();
    // Breached is decided by the statement from the row it stops: stored
    // times sort as text.
    let sql = format!(
        "UPDATE sla_clock SET state = 'stopped', stopped_at = $3, breached = CASE WHEN $3 > due_at THEN 1 ELSE 0 END \
         WHERE tenant_id = $1 AND clock_id = $2 AND state = 'running' RETURNING {CLOCK_COLUMNS}"
    );
    let stopped: Option<SlaClock> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).bind(&now).fetch_optional(&mut *tx).await?;
    let stopped = CLOCK.settle(&mut tx, &ctx.tenant_id, &id, stopped, "only a running clock can be stopped").await?;
    let breached = stopped.breached.0;
    let payload = json!({ "clock_id": id, "policy_id": stopped.policy_id, "due_at": stopped.due_at, "stopped_at": now, "breached": breached });
    audit::record(&mut tx, &ctx, events::SLA_CLOCK_STOPPED, payload.clone()).await?;
    if breached {
        audit::record(&mut tx, &ctx, events::SLA_CLOCK_BREACHED, payload).await?;
    }
    tx.commit().await?;
    Ok(ok(stopped))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct RiskQuery {
    /// How near the deadline counts as at risk, in minutes (0 to 10080; 60 when absent).
    #[param(minimum = 0, maximum = 10080)]
    within_minutes: Option<i64>,
    /// Only the clocks of this policy.
    #[param(format = "uuid")]
    policy_id: Option<String>,
}

/// A rung still to fire.
#[derive(Serialize, ToSchema)]
struct SlaNextRung {
    rung_id: Id,
    offset_minutes: i64,
    severity: Severity,
    fires_at: Timestamp,
}

/// A running clock near or past its deadline.
#[derive(Serialize, ToSchema)]
struct SlaClockAtRisk {
    #[serde(flatten)]
    clock: SlaClock,
    /// Whole minutes to the deadline (negative past it).
    minutes_to_due: i64,
    is_overdue: bool,
    /// How many of the policy's rungs have fired.
    rungs_fired: i64,
    /// The highest severity among them (null when none has).
    highest_severity_fired: Option<Severity>,
    /// The next rung to fire (null when all have).
    next_rung: Option<SlaNextRung>,
}

const DEFAULT_WITHIN_MINUTES: i64 = 60;
const MAX_WITHIN_MINUTES: i64 = 10_080;

/// Running clocks within `within_minutes` of their deadline or past it,
/// nearest deadline first, with the rungs fired and the next one.
#[utoipa::path(get, path = "/api/sla/clocks/at-risk", tag = "sdk-sla", params(RiskQuery, Page),
    responses((status = 200, description = "one page of clocks at risk", body = ListOf<SlaClockAtRisk>)))]
async fn at_risk(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page, Params(q): Params<RiskQuery>) -> ApiResult<ListOf<SlaClockAtRisk>> {
    // The schema bounds it; the clamp keeps the arithmetic in range whatever comes.
    let within = q.within_minutes.unwrap_or(DEFAULT_WITHIN_MINUTES).clamp(0, MAX_WITHIN_MINUTES);
    let policy = canonical_uuid_opt(&q.policy_id).unwrap_or_default();
    let now = Utc::now();
    let horizon = db::format_time(now + chrono::TimeDelta::minutes(within));
    let filter = "tenant_id = $1 AND state = 'running' AND due_at <= $2 AND ($3 = '' OR policy_id = $3)";
    let total: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM sla_clock WHERE {filter}")))
        .bind(&ctx.tenant_id)
        .bind(&horizon)
        .bind(&policy)
        .fetch_one(&state.db.read)
        .await?;
    let sql = format!("SELECT {CLOCK_COLUMNS} FROM sla_clock WHERE {filter} ORDER BY due_at, clock_id LIMIT $4 OFFSET $5");
    let clocks: Vec<SlaClock> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&ctx.tenant_id)
        .bind(&horizon)
        .bind(&policy)
        .bind(page.limit)
        .bind(page.offset)
        .fetch_all(&state.db.read)
        .await?;
    let mut policies: Vec<Id> = clocks.iter().map(|c| c.policy_id).collect();
    policies.sort();
    policies.dedup();
    let mut by_policy: HashMap<Id, Vec<SlaRung>> = HashMap::new();
    for rung in rungs_of(&state.db.read, &ctx.tenant_id, &policies).await? {
        by_policy.entry(rung.policy_id).or_default().push(rung);
    }
    let rows: Vec<SlaClockAtRisk> = clocks.into_iter().map(|clock| assess(clock, now, &by_policy)).collect();
    Ok(list(rows, total))
}

/// What the at-risk list says of one clock at `now`, given the rungs of
/// every policy (earliest first).
fn assess(clock: SlaClock, now: DateTime<Utc>, rungs: &HashMap<Id, Vec<SlaRung>>) -> SlaClockAtRisk {
    let due = clock.due_at.0;
    let mut fired = 0;
    let mut highest: Option<Severity> = None;
    let mut next = None;
    for rung in rungs.get(&clock.policy_id).into_iter().flatten() {
        let fires_at = due + chrono::TimeDelta::minutes(rung.offset_minutes);
        if fires_at <= now {
            fired += 1;
            highest = Some(highest.filter(|h| h.rank() >= rung.severity.rank()).unwrap_or(rung.severity));
        } else if next.is_none() {
            next = Some(SlaNextRung { rung_id: rung.rung_id, offset_minutes: rung.offset_minutes, severity: rung.severity, fires_at: Timestamp(fires_at) });
        }
    }
    SlaClockAtRisk {
        minutes_to_due: (due - now).num_minutes(),
        is_overdue: now > due,
        rungs_fired: fired,
        highest_severity_fired: highest,
        next_rung: next,
        clock,
    }
}

/// Rung firings one pass of the sweep reads at most (the next pass, or the
/// next batch of this one, goes on).
const SWEEP_BATCH: i64 = 500;

/// A rung of a running clock whose time has come and that has not fired.
#[derive(FromRow)]
struct DueRung {
    clock_id: String,
    tenant_id: String,
    policy_id: String,
    subject_ref: String,
    due_at: Timestamp,
    rung_id: String,
    offset_minutes: i64,
}

/// Fires every rung of a running clock whose time (the clock's deadline
/// plus the rung's offset) has come and that has not fired for it: one
/// row of `sla_rung_firing` per (clock, rung), which its primary key keeps
/// to one whichever replica sweeps, and `sla.rung.fired.v1` in the same
/// transaction, in the clock's tenant's chain (actor `system`, `hub`).
/// The clock's row is locked first (on PostgreSQL skipping one another
/// replica holds, or one being stopped): a clock stopped meanwhile fires
/// nothing. Returns how many rungs it fired.
pub async fn fire_due(db: &Db) -> ApiResult<usize> {
    let now = Utc::now();
    let mut fired = 0;
    loop {
        let (read, done) = fire_batch(db, now).await?;
        fired += done;
        // A full batch of which nothing fired is another replica's work.
        if read < SWEEP_BATCH as usize || done == 0 {
            return Ok(fired);
        }
    }
}

/// One batch of [`fire_due`]: how many due rungs it read and how many of
/// them it fired.
async fn fire_batch(db: &Db, now: DateTime<Utc>) -> ApiResult<(usize, usize)> {
    // The earliest a rung fires is its most negative offset before a
    // deadline: clocks due later than that have nothing to fire.
    let earliest: Option<i64> = sqlx::query_scalar("SELECT MIN(offset_minutes) FROM sla_rung").fetch_one(&db.read).await?;
    let Some(earliest) = earliest else { return Ok((0, 0)) };
    let horizon = db::format_time(now - chrono::TimeDelta::minutes(earliest));
    // Stored times are RFC 3339 text; the rung's time is computed by the
    // database, so that a batch holds only rungs to fire.
    let fires = format!("{} >= r.offset_minutes * 60", db.backend.seconds_between("c.due_at", "$2"));
    let sql = format!(
        "SELECT c.clock_id, c.tenant_id, c.policy_id, c.subject_ref, c.due_at, r.rung_id, r.offset_minutes \
         FROM sla_clock c JOIN sla_rung r ON r.policy_id = c.policy_id AND r.tenant_id = c.tenant_id \
         WHERE c.state = 'running' AND c.due_at <= $1 AND {fires} \
         AND NOT EXISTS (SELECT 1 FROM sla_rung_firing f WHERE f.clock_id = c.clock_id AND f.rung_id = r.rung_id) \
         ORDER BY c.due_at, c.clock_id, r.offset_minutes LIMIT $3"
    );
    let due: Vec<DueRung> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&horizon).bind(db::format_time(now)).bind(SWEEP_BATCH).fetch_all(&db.read).await?;
    let read = due.len();
    let mut fired = 0;
    for clock in due.chunk_by(|a, b| a.clock_id == b.clock_id) {
        fired += fire_clock(db, clock).await?;
    }
    Ok((read, fired))
}

/// Fires the due rungs of one clock in one transaction.
async fn fire_clock(db: &Db, rungs: &[DueRung]) -> ApiResult<usize> {
    let Some(first) = rungs.first() else { return Ok(0) };
    let mut tx = db.begin().await?;
    let lock = format!("SELECT state FROM sla_clock WHERE tenant_id = $1 AND clock_id = $2{}", db.backend.skip_locked());
    let state: Option<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(lock)).bind(&first.tenant_id).bind(&first.clock_id).fetch_optional(&mut *tx).await?;
    if state.as_deref() != Some(ClockState::Running.as_str()) {
        return Ok(0);
    }
    let fired_at = db::now();
    let mut fired = 0;
    for rung in rungs {
        let Some(fires_at) = db::add_seconds(rung.due_at.0, rung.offset_minutes * 60).map(db::format_time) else { continue };
        // The rung as it is now (a rung removed meanwhile fires nothing).
        let firing: Option<SlaRungFiring> = sqlx::query_as(
            "INSERT INTO sla_rung_firing (clock_id, rung_id, tenant_id, offset_minutes, severity, notify_persona_id, fires_at, fired_at) \
             SELECT $1, r.rung_id, r.tenant_id, r.offset_minutes, r.severity, r.notify_persona_id, $4, $5 FROM sla_rung r \
             WHERE r.tenant_id = $2 AND r.rung_id = $3 ON CONFLICT (clock_id, rung_id) DO NOTHING \
             RETURNING rung_id, offset_minutes, severity, notify_persona_id, fires_at, fired_at",
        )
        .bind(&rung.clock_id)
        .bind(&rung.tenant_id)
        .bind(&rung.rung_id)
        .bind(&fires_at)
        .bind(&fired_at)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(firing) = firing else { continue };
        let payload = json!({
            "clock_id": rung.clock_id, "policy_id": rung.policy_id, "subject_ref": rung.subject_ref, "rung_id": firing.rung_id,
            "offset_minutes": firing.offset_minutes, "severity": firing.severity, "notify_persona_id": firing.notify_persona_id,
            "due_at": rung.due_at, "fires_at": firing.fires_at, "fired_at": firing.fired_at,
        });
        // No credential acts: the hub does, when the rung's time comes.
        audit::record_system(&mut tx, &rung.tenant_id, "hub", events::SLA_RUNG_FIRED, payload).await?;
        fired += 1;
    }
    tx.commit().await?;
    Ok(fired)
}
