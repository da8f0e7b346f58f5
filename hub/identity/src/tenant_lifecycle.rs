//! sdk-tenant-lifecycle: a tenant's offboarding. Starting it stamps a
//! retention deadline (30 days ahead unless `deadline_at` says otherwise);
//! until then the tenant works as before, and from then on every credential
//! of the tenant (its people's tenant tokens, its API keys and the tokens
//! exchanged for them, its robots' credentials, and its sandbox's) is
//! refused by the gate (`gate::keys::tenant_open`, fed by [`deadline`]).
//! A sweep stamps the completion and records
//! `tenant.offboarding.completed.v1` once the deadline has passed.
//!
//! The caller acts on its own tenant or on a direct child of it; any other
//! tenant is 404, checked before anything else.
//!
//! This module owns tenant_offboarding; the tenant's status is set through
//! `tenancy`.

use chrono::{DateTime, TimeDelta, Utc};
use hub_kernel::prelude::*;
use hub_kernel::{gate::keys, state::Invalidation, validate::MAX_CLOCK_SKEW_SECONDS};

use crate::tenancy;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_offboarding, start_offboarding, update_offboarding)).routes(routes!(cancel_offboarding))
}

/// The retention deadline when the request names none, in days from now.
pub const DEFAULT_RETENTION_DAYS: i64 = 30;
/// The furthest deadline a request may name, in days from now.
pub const MAX_RETENTION_DAYS: i64 = 3650;

#[derive(Debug, FromRow)]
struct Row {
    reason: Option<String>,
    started_by: String,
    started_by_tenant_id: String,
    started_at: Timestamp,
    deadline_at: Timestamp,
    completed_at: Option<Timestamp>,
}

const COLUMNS: &str = "reason, started_by, started_by_tenant_id, started_at, deadline_at, completed_at";

stored_enum! {
    /// Where a tenant's offboarding stands: `not_started`; `offboarding`
    /// (started: the tenant's credentials work until `deadline_at`);
    /// `offboarded` (the deadline has passed: they no longer work).
    #[schema(as = TenantOffboardingState)]
    enum OffboardingState { NotStarted = "not_started", Offboarding = "offboarding", Offboarded = "offboarded" }
}

/// A tenant's offboarding as it stands.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = TenantOffboarding)]
struct Offboarding {
    tenant_id: String,
    state: OffboardingState,
    reason: Option<String>,
    /// The person (or, for an API key, its synthetic persona) who started it.
    started_by: Option<String>,
    /// The tenant whose credential started it: this one or its parent.
    started_by_tenant_id: Option<String>,
    started_at: Option<Timestamp>,
    /// The retention deadline: the tenant's credentials stop working then.
    deadline_at: Option<Timestamp>,
    /// When the hub recorded the completion (within seconds after the
    /// deadline).
    completed_at: Option<Timestamp>,
}

impl Offboarding {
    fn of(tenant_id: String, row: Option<Row>) -> Self {
        let Some(r) = row else {
            return Offboarding {
                tenant_id,
                state: OffboardingState::NotStarted,
                reason: None,
                started_by: None,
                started_by_tenant_id: None,
                started_at: None,
                deadline_at: None,
                completed_at: None,
            };
        };
        let passed = r.deadline_at <= Timestamp::now();
        Offboarding {
            tenant_id,
            state: if passed { OffboardingState::Offboarded } else { OffboardingState::Offboarding },
            reason: r.reason,
            started_by: Some(r.started_by),
            started_by_tenant_id: Some(r.started_by_tenant_id),
            started_at: Some(r.started_at),
            deadline_at: Some(r.deadline_at),
            completed_at: r.completed_at,
        }
    }
}

#[derive(Deserialize, ToSchema)]
#[schema(as = StartTenantOffboarding)]
struct StartOffboarding {
    /// RFC 3339; default 30 days from now. At most 3650 days ahead; a time
    /// up to now (5 minutes of clock skew allowed) means now: the
    /// credentials stop at once.
    #[schema(format = DateTime)]
    deadline_at: Option<String>,
    #[schema(max_length = 500)]
    reason: Option<String>,
}

/// The tenant `raw` names, when the caller may act on it: its own tenant or
/// a direct child of it (a parent administers its children). Anything else
/// is 404, whether it exists or not.
async fn owned(state: &AppState, ctx: &TenantCtx, raw: &str) -> ApiResult<String> {
    let id = path_id(raw)?.to_string();
    let tenant = tenancy::find(&state.db.read, &id).await?.ok_or(ApiError::NotFound)?;
    if tenant.tenant_id == ctx.tenant_id || tenant.parent_tenant_id.as_deref() == Some(ctx.tenant_id.as_str()) {
        Ok(tenant.tenant_id)
    } else {
        Err(ApiError::NotFound)
    }
}

async fn find<'e, E>(exec: E, tenant_id: &str) -> ApiResult<Option<Row>>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let sql = format!("SELECT {COLUMNS} FROM tenant_offboarding WHERE tenant_id = $1");
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).fetch_optional(exec).await?)
}

/// The deadline a request asks for, or the problem with it.
fn requested_deadline(check: &mut Check, raw: &Option<String>, now: DateTime<Utc>) -> DateTime<Utc> {
    let default = now + TimeDelta::days(DEFAULT_RETENTION_DAYS);
    let Some(raw) = Check::optional(raw) else { return default };
    match db::parse_time(&raw) {
        None => check.fail("deadline_at must be an RFC 3339 timestamp"),
        Some(t) if t < now - TimeDelta::seconds(MAX_CLOCK_SKEW_SECONDS) => check.fail("deadline_at must not be in the past"),
        Some(t) if t > now + TimeDelta::days(MAX_RETENTION_DAYS) => check.fail(format!("deadline_at must be at most {MAX_RETENTION_DAYS} days from now")),
        Some(t) => return t.max(now),
    }
    default
}

/// Starts the offboarding of the caller's tenant or of a child of it.
#[utoipa::path(post, path = "/api/tenants/{tenant_id}/offboarding", tag = "sdk-tenant-lifecycle",
    params(("tenant_id" = String, Path, description = "the caller's tenant or a direct child of it")), request_body = StartOffboarding,
    extensions(("x-concurrency" = json!({"outcome": "one-wins", "given": [["POST", "/api/tenants", {"app_id": "a-{unique}", "display_name": "Races child"}]], "body": {"reason": "races"}}))),
    responses((status = 201, description = "started", body = Data<Offboarding>)))]
async fn start_offboarding(
    State(state): State<AppState>,
    Tenant(ctx): Tenant,
    Path(id): Path<String>,
    body: Body<StartOffboarding>,
) -> ApiResult<Created<Offboarding>> {
    let tenant_id = owned(&state, &ctx, &id).await?;
    // Like creating a tenant, an administration of tenants: the acting
    // persona's roles must allow it, for people and keys alike.
    keys::require_grant(&state, &ctx, "tenant.tenant.write").await?;
    let body = body.checked()?;
    let mut check = Check::new();
    let now = Utc::now();
    let deadline = db::format_time(requested_deadline(&mut check, &body.deadline_at, now));
    let reason = Check::optional(&body.reason);
    check.finish()?;
    let mut tx = state.db.begin().await?;
    let sql = format!(
        "INSERT INTO tenant_offboarding (tenant_id, reason, started_by, started_by_tenant_id, started_at, deadline_at) VALUES ($1, $2, $3, $4, $5, $6) \
         ON CONFLICT (tenant_id) DO NOTHING RETURNING {COLUMNS}"
    );
    let row: Option<Row> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&tenant_id)
        .bind(&reason)
        .bind(audit::actor_of(&ctx).1)
        .bind(&ctx.tenant_id)
        .bind(db::format_time(now))
        .bind(&deadline)
        .fetch_optional(&mut *tx)
        .await?;
    let Some(row) = row else {
        let stored = find(&mut *tx, &tenant_id).await?.ok_or(ApiError::NotFound)?;
        return Err(ApiError::Conflict(format!("the offboarding of this tenant started at {}; its deadline is {}", stored.started_at, stored.deadline_at)));
    };
    tenancy::set_status(&mut tx, &tenant_id, tenancy::TenantStatus::Offboarding).await?;
    let fact = json!({ "tenant_id": tenant_id, "deadline_at": deadline, "started_by_tenant_id": ctx.tenant_id });
    audit::record(&mut tx, &ctx, events::TENANT_OFFBOARDING_STARTED, fact).await?;
    tx.commit().await?;
    // Every replica's gate forgets what it knew of the tenant's standing.
    state.invalidate(Invalidation::Tenants).await;
    Ok(created(Offboarding::of(tenant_id, Some(row))))
}

/// The offboarding state of the caller's tenant or of a child of it.
#[utoipa::path(get, path = "/api/tenants/{tenant_id}/offboarding", tag = "sdk-tenant-lifecycle",
    params(("tenant_id" = String, Path, description = "the caller's tenant or a direct child of it")),
    responses((status = 200, description = "the state (`not_started` before any offboarding)", body = Data<Offboarding>)))]
async fn get_offboarding(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Offboarding>> {
    let tenant_id = owned(&state, &ctx, &id).await?;
    let row = find(&state.db.read, &tenant_id).await?;
    Ok(ok(Offboarding::of(tenant_id, row)))
}

/// Why a cancel or a change of `tenant_id`'s offboarding wrote nothing:
/// not started (409), passed (409), or started by the caller's parent,
/// which the caller may not undo (403).
async fn unchanged(tx: &mut Tx, tenant_id: &str, what: &str) -> ApiError {
    match find(&mut **tx, tenant_id).await {
        Err(e) => e,
        Ok(None) => ApiError::Conflict(format!("the offboarding of this tenant has not started: only a started offboarding can be {what}")),
        Ok(Some(r)) if r.deadline_at <= Timestamp::now() => ApiError::Conflict(format!(
            "the tenant is offboarded: its deadline passed at {}; only an offboarding before its deadline can be {what}",
            r.deadline_at
        )),
        Ok(Some(_)) => ApiError::forbidden(format!("the offboarding of this tenant was started by its parent tenant: only the parent can have it {what}")),
    }
}

/// Who may undo or move an offboarding, as a condition over `$1` (the
/// tenant) and `$2` (the caller's tenant): the tenant's parent, or the
/// tenant itself when it started its own (a tenant its parent offboards
/// cannot undo that).
const MAY_CHANGE: &str = "(tenant_id <> $2 OR started_by_tenant_id = $2)";

/// Cancels the offboarding of the caller's tenant or of a child of it
/// before its deadline: the tenant is `not_started` again (status `trial`)
/// and its credentials keep working.
///
/// Not started, or past its deadline: 409. A tenant whose parent started
/// its offboarding cannot cancel it (403): the parent can.
#[utoipa::path(post, path = "/api/tenants/{tenant_id}/offboarding/cancel", tag = "sdk-tenant-lifecycle",
    params(("tenant_id" = String, Path, description = "the caller's tenant or a direct child of it")),
    extensions(("x-concurrency" = json!({"outcome": "one-wins", "given": [["POST", "/api/tenants", {"app_id": "a-{unique}", "display_name": "Races child"}], ["POST", "/api/tenants/{tenant_id}/offboarding", {"reason": "races"}]]}))),
    responses((status = 200, description = "cancelled: the state is `not_started`", body = Data<Offboarding>)))]
async fn cancel_offboarding(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Offboarding>> {
    let tenant_id = owned(&state, &ctx, &id).await?;
    keys::require_grant(&state, &ctx, "tenant.tenant.write").await?;
    let mut tx = state.db.begin().await?;
    let now = db::now();
    // The row goes only while its deadline is ahead, decided by the delete
    // itself: of two cancels at once, or a cancel and the sweep, one wins.
    let sql = format!("DELETE FROM tenant_offboarding WHERE tenant_id = $1 AND {MAY_CHANGE} AND completed_at IS NULL AND deadline_at > $3 RETURNING {COLUMNS}");
    let gone: Option<Row> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&tenant_id).bind(&ctx.tenant_id).bind(&now).fetch_optional(&mut *tx).await?;
    let Some(row) = gone else {
        return Err(unchanged(&mut tx, &tenant_id, "cancelled").await);
    };
    tenancy::set_status(&mut tx, &tenant_id, tenancy::TenantStatus::Trial).await?;
    let fact = json!({ "tenant_id": tenant_id, "started_at": row.started_at, "deadline_at": row.deadline_at, "cancelled_by_tenant_id": ctx.tenant_id });
    audit::record(&mut tx, &ctx, events::TENANT_OFFBOARDING_CANCELLED, fact).await?;
    tx.commit().await?;
    state.invalidate(Invalidation::Tenants).await;
    Ok(ok(Offboarding::of(tenant_id, None)))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = TenantOffboardingUpdate)]
struct UpdateOffboarding {
    /// RFC 3339: the new deadline, bounded as when starting (at most 3650
    /// days ahead; a time up to now means now: the credentials stop at once).
    #[schema(format = DateTime)]
    deadline_at: Option<String>,
    #[schema(max_length = 500)]
    reason: Option<String>,
}

/// Moves the deadline of a started offboarding (or changes its reason)
/// before the deadline has passed; absent fields stay.
///
/// Not started, or past its deadline: 409. A tenant whose parent started
/// its offboarding cannot move it (403): the parent can.
#[utoipa::path(patch, path = "/api/tenants/{tenant_id}/offboarding", tag = "sdk-tenant-lifecycle",
    params(("tenant_id" = String, Path, description = "the caller's tenant or a direct child of it")), request_body = UpdateOffboarding,
    extensions(("x-concurrency" = json!({"outcome": "independent", "given": [["POST", "/api/tenants", {"app_id": "a-{unique}", "display_name": "Races child"}], ["POST", "/api/tenants/{tenant_id}/offboarding", {"reason": "races"}]], "body": {"reason": "moved"}}))),
    responses((status = 200, description = "the offboarding, changed", body = Data<Offboarding>)))]
async fn update_offboarding(
    State(state): State<AppState>,
    Tenant(ctx): Tenant,
    Path(id): Path<String>,
    body: Body<UpdateOffboarding>,
) -> ApiResult<Data<Offboarding>> {
    let tenant_id = owned(&state, &ctx, &id).await?;
    keys::require_grant(&state, &ctx, "tenant.tenant.write").await?;
    let body = body.checked()?;
    let mut check = Check::new();
    let now = Utc::now();
    let deadline = Check::optional(&body.deadline_at).map(|_| db::format_time(requested_deadline(&mut check, &body.deadline_at, now)));
    let reason = Check::optional(&body.reason);
    if deadline.is_none() && reason.is_none() {
        check.fail("give at least one of: deadline_at, reason");
    }
    check.finish()?;
    let mut tx = state.db.begin().await?;
    let sql = format!(
        "UPDATE tenant_offboarding SET deadline_at = COALESCE($4, deadline_at), reason = COALESCE($5, reason) \
         WHERE tenant_id = $1 AND {MAY_CHANGE} AND completed_at IS NULL AND deadline_at > $3 RETURNING {COLUMNS}"
    );
    let row: Option<Row> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&tenant_id)
        .bind(&ctx.tenant_id)
        .bind(db::format_time(now))
        .bind(&deadline)
        .bind(&reason)
        .fetch_optional(&mut *tx)
        .await?;
    let Some(row) = row else {
        return Err(unchanged(&mut tx, &tenant_id, "changed").await);
    };
    let fact = json!({ "tenant_id": tenant_id, "deadline_at": row.deadline_at, "deadline_moved": deadline.is_some(), "reason_changed": reason.is_some() });
    audit::record(&mut tx, &ctx, events::TENANT_OFFBOARDING_UPDATED, fact).await?;
    tx.commit().await?;
    // Every replica's gate forgets the deadline it cached.
    state.invalidate(Invalidation::Tenants).await;
    Ok(ok(Offboarding::of(tenant_id, Some(row))))
}

/// When the credentials of `tenant_id` stop working: its offboarding
/// deadline, or its tenant's for a sandbox (the gate's lookup).
pub async fn deadline(db: &Db, tenant_id: &str) -> ApiResult<Option<DateTime<Utc>>> {
    let sql = format!("SELECT MIN(deadline_at) FROM tenant_offboarding WHERE {}", tenancy::own_or_sandbox_owner("tenant_id", 1));
    let found: Option<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(tenant_id).fetch_one(&db.read).await?;
    Ok(found.as_deref().and_then(db::parse_time))
}

/// Whether the operator suspended the tenant (or, for a sandbox, its tenant).
pub async fn suspended(db: &Db, tenant_id: &str) -> ApiResult<bool> {
    let sql = format!("SELECT COUNT(*) FROM tenant_suspension WHERE {}", tenancy::own_or_sandbox_owner("tenant_id", 1));
    let n: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(tenant_id).fetch_one(&db.read).await?;
    Ok(n > 0)
}

/// A tenant's suspension, as the operator routes answer it.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = TenantSuspension)]
pub struct Suspension {
    pub tenant_id: String,
    pub suspended: bool,
    pub reason: Option<String>,
    pub suspended_by: Option<String>,
    pub suspended_at: Option<Timestamp>,
}

/// The suspension a tenant stands under, as the operator's tenant list
/// shows it.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = AdminTenantListSuspension)]
pub struct Standing {
    /// The suspended tenant: the listed one, or for a sandbox the tenant
    /// it belongs to (whose suspension refuses the sandbox's credentials
    /// too, and which is the one to resume).
    pub tenant_id: String,
    pub reason: String,
    /// The operator credential that suspended it.
    pub suspended_by: String,
    pub suspended_at: Timestamp,
}

/// A tenant in the operator's list, with its suspension.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = AdminListedTenant)]
pub struct ListedTenant {
    #[serde(flatten)]
    pub tenant: tenancy::Tenant,
    /// Null while its credentials are not suspended.
    pub suspension: Option<Standing>,
}

#[derive(FromRow)]
struct ListedRow {
    #[sqlx(flatten)]
    tenant: tenancy::Tenant,
    suspension_of: Option<String>,
    suspension_reason: Option<String>,
    suspension_by: Option<String>,
    suspension_at: Option<Timestamp>,
}

/// Every tenant, newest first, at most `limit`, each with the suspension
/// it stands under: its own, else for a sandbox its tenant's (one query).
pub async fn listed(db: &Db, limit: i64) -> ApiResult<Vec<ListedTenant>> {
    // The suspension's columns renamed, so the tenant's stay unambiguous.
    let suspension = |alias: &str| {
        format!(
            "(SELECT tenant_id AS {alias}_of, reason AS {alias}_reason, suspended_by AS {alias}_by, suspended_at AS {alias}_at FROM tenant_suspension) {alias}"
        )
    };
    let sql = format!(
        "SELECT {}, COALESCE(own_of, up_of) AS suspension_of, COALESCE(own_reason, up_reason) AS suspension_reason, \
         COALESCE(own_by, up_by) AS suspension_by, COALESCE(own_at, up_at) AS suspension_at FROM tenant_tenant \
         LEFT JOIN {} ON own.own_of = tenant_tenant.tenant_id LEFT JOIN {} ON up.up_of = tenant_tenant.sandbox_of \
         ORDER BY created_at DESC, tenant_id DESC LIMIT $1",
        tenancy::TENANT_COLUMNS,
        suspension("own"),
        suspension("up")
    );
    let rows: Vec<ListedRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(limit).fetch_all(&db.read).await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let suspension = match (r.suspension_of, r.suspension_reason, r.suspension_by, r.suspension_at) {
                (Some(tenant_id), Some(reason), Some(suspended_by), Some(suspended_at)) => Some(Standing { tenant_id, reason, suspended_by, suspended_at }),
                _ => None,
            };
            ListedTenant { tenant: r.tenant, suspension }
        })
        .collect())
}

/// Suspends a tenant (404 unknown, 409 already suspended): its
/// credentials answer 423 on every replica, its data stays as it is.
pub async fn suspend(state: &AppState, tenant_id: &str, operator: &str, reason: &str) -> ApiResult<Suspension> {
    let mut tx = state.db.begin().await?;
    if tenancy::find(&mut *tx, tenant_id).await?.is_none() {
        return Err(ApiError::NotFound);
    }
    let now = Timestamp::now();
    let done =
        sqlx::query("INSERT INTO tenant_suspension (tenant_id, reason, suspended_by, suspended_at) VALUES ($1, $2, $3, $4) ON CONFLICT (tenant_id) DO NOTHING")
            .bind(tenant_id)
            .bind(reason)
            .bind(operator)
            .bind(now)
            .execute(&mut *tx)
            .await?;
    if done.rows_affected() == 0 {
        return Err(ApiError::Conflict("the tenant is already suspended".into()));
    }
    hub_kernel::audit::record_operator_in(&mut tx, tenant_id, operator, events::TENANT_SUSPENDED, json!({ "tenant_id": tenant_id, "reason": reason })).await?;
    tx.commit().await?;
    state.invalidate(Invalidation::Tenants).await;
    Ok(Suspension {
        tenant_id: tenant_id.to_string(),
        suspended: true,
        reason: Some(reason.to_string()),
        suspended_by: Some(operator.to_string()),
        suspended_at: Some(now),
    })
}

/// Resumes a suspended tenant (404 unknown, 409 not suspended).
pub async fn resume(state: &AppState, tenant_id: &str, operator: &str) -> ApiResult<Suspension> {
    let mut tx = state.db.begin().await?;
    if tenancy::find(&mut *tx, tenant_id).await?.is_none() {
        return Err(ApiError::NotFound);
    }
    let done = sqlx::query("DELETE FROM tenant_suspension WHERE tenant_id = $1").bind(tenant_id).execute(&mut *tx).await?;
    if done.rows_affected() == 0 {
        return Err(ApiError::Conflict("the tenant is not suspended".into()));
    }
    hub_kernel::audit::record_operator_in(&mut tx, tenant_id, operator, events::TENANT_RESUMED, json!({ "tenant_id": tenant_id })).await?;
    tx.commit().await?;
    state.invalidate(Invalidation::Tenants).await;
    Ok(Suspension { tenant_id: tenant_id.to_string(), suspended: false, reason: None, suspended_by: None, suspended_at: None })
}

/// Completes the offboardings whose deadline has passed: stamps
/// `completed_at`, sets the tenant `offboarded` and records
/// `tenant.offboarding.completed.v1` in its chain, once, whichever replica
/// gets there first. Returns how many it completed.
pub async fn complete_due(state: &AppState) -> ApiResult<usize> {
    let now = db::now();
    let due: Vec<String> =
        sqlx::query_scalar("SELECT tenant_id FROM tenant_offboarding WHERE completed_at IS NULL AND deadline_at <= $1 ORDER BY deadline_at LIMIT 100")
            .bind(&now)
            .fetch_all(&state.db.read)
            .await?;
    let mut done = 0;
    for tenant_id in due {
        let mut tx = state.db.begin().await?;
        let deadline: Option<String> =
            sqlx::query_scalar("UPDATE tenant_offboarding SET completed_at = $1 WHERE tenant_id = $2 AND completed_at IS NULL RETURNING deadline_at")
                .bind(&now)
                .bind(&tenant_id)
                .fetch_optional(&mut *tx)
                .await?;
        if let Some(deadline) = deadline {
            tenancy::set_status(&mut tx, &tenant_id, tenancy::TenantStatus::Offboarded).await?;
            let payload = json!({ "tenant_id": tenant_id, "deadline_at": deadline, "completed_at": now });
            // No credential acts: the hub does, when the deadline passes.
            audit::record_system(&mut tx, &tenant_id, "hub", events::TENANT_OFFBOARDING_COMPLETED, payload).await?;
            done += 1;
        }
        tx.commit().await?;
    }
    Ok(done)
}
