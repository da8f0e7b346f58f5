//! "Approvals": every tenant's approval routes, the pending requests past
//! their route's SLA (worst first), and the operator's override of a
//! pending request (RULINGS 1: a decision outside `approved`/`rejected` is
//! 400, an unknown request 404, a decided one 409).

use hub_kernel::gate::Operator;
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_routes)).routes(routes!(breaches)).routes(routes!(overridden))
}

const ROUTES_CAP: i64 = 200;
const BREACHES_CAP: usize = 100;

stored_enum! {
    /// Whether an approval route takes new requests.
    #[schema(as = AdminApprovalRouteStatus)]
    enum RouteStatus { Active = "active", Retired = "retired" }
}

stored_enum! {
    /// Where an approval request stands.
    #[schema(as = AdminApprovalRequestStatus)]
    enum RequestStatus { Pending = "pending", Approved = "approved", Rejected = "rejected", Cancelled = "cancelled" }
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = AdminApprovalRoute)]
struct RouteRow {
    route_id: Id,
    tenant_id: Id,
    name: String,
    status: RouteStatus,
    created_at: Timestamp,
    /// The largest SLA of the route's steps, 0 when none.
    sla_minutes: i64,
}

/// Approval routes of every tenant, newest first, at most 200.
#[utoipa::path(get, path = "/admin/approvals/routes", tag = "admin-approvals",
    responses((status = 200, description = "the routes", body = Data<Vec<RouteRow>>)))]
async fn list_routes(State(state): State<AppState>, _: Operator) -> ApiResult<Data<Vec<RouteRow>>> {
    let rows: Vec<RouteRow> = sqlx::query_as(
        "SELECT route_id, tenant_id, name, status, created_at, sla_minutes FROM approval_route ORDER BY created_at DESC, route_id DESC LIMIT $1",
    )
    .bind(ROUTES_CAP)
    .fetch_all(&state.db.read)
    .await?;
    Ok(ok(rows))
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = AdminApprovalBreach)]
struct Breach {
    request_id: Id,
    tenant_id: Id,
    route_id: Id,
    /// `subject_kind:subject_id`.
    subject_ref: String,
    requested_at: Timestamp,
    status: RequestStatus,
    elapsed_minutes: i64,
    sla_minutes: i64,
}

/// A pending request of a route with an SLA.
#[derive(FromRow)]
struct Pending {
    request_id: Id,
    tenant_id: Id,
    route_id: Id,
    subject_kind: String,
    subject_id: String,
    requested_at: Timestamp,
    status: RequestStatus,
    sla_minutes: i64,
}

/// Pending requests whose route has an SLA above 0 and that have waited
/// strictly longer than it, worst (longest past it) first, at most 100.
/// The wait is measured to the microsecond the times are stored with, not
/// in whole minutes: a request is a breach from the moment its SLA has
/// passed, and its `elapsed_minutes` counts the minutes begun (rounded
/// up), so a breach always shows more minutes than its SLA.
#[utoipa::path(get, path = "/admin/approvals/breaches", tag = "admin-approvals",
    responses((status = 200, description = "the breaches", body = Data<Vec<Breach>>)))]
async fn breaches(State(state): State<AppState>, _: Operator) -> ApiResult<Data<Vec<Breach>>> {
    // The overrun is computed by the database, so that only breaches are
    // read, worst first, at most the cap of them.
    let now = Timestamp::now();
    let waited = state.db.backend.seconds_between("r.requested_at", "$1");
    let sql = format!(
        "SELECT r.request_id, r.tenant_id, r.route_id, r.subject_kind, r.subject_id, r.requested_at, r.status, t.sla_minutes \
         FROM approval_request r JOIN approval_route t ON t.route_id = r.route_id \
         WHERE r.status = 'pending' AND t.sla_minutes > 0 AND {waited} > t.sla_minutes * 60 \
         ORDER BY {waited} - t.sla_minutes * 60 DESC, r.requested_at, r.request_id LIMIT {BREACHES_CAP}"
    );
    let rows: Vec<Pending> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(db::format_time(now.0)).fetch_all(&state.db.read).await?;
    let out = rows
        .into_iter()
        .map(|p| Breach {
            subject_ref: format!("{}:{}", p.subject_kind, p.subject_id),
            request_id: p.request_id,
            tenant_id: p.tenant_id,
            route_id: p.route_id,
            elapsed_minutes: minutes_begun(now.0 - p.requested_at.0),
            requested_at: p.requested_at,
            status: p.status,
            sla_minutes: p.sla_minutes,
        })
        .collect();
    Ok(ok(out))
}

/// Whole minutes of `elapsed`, a started minute counting as one.
fn minutes_begun(elapsed: chrono::TimeDelta) -> i64 {
    let minutes = elapsed.num_minutes();
    if elapsed > chrono::TimeDelta::minutes(minutes) { minutes + 1 } else { minutes }
}

stored_enum! {
    /// The operator's decision of a pending request.
    #[schema(as = AdminOverrideDecision)]
    enum Decision { Approved = "approved", Rejected = "rejected" }
}

#[derive(Deserialize, ToSchema)]
#[schema(as = AdminApprovalOverride)]
struct Override {
    decision: Decision,
    #[schema(max_length = 2000)]
    reason: String,
    /// Who decided.
    #[schema(max_length = 200)]
    operator_id: String,
}

/// The bare success answer.
#[derive(Serialize, ToSchema)]
#[schema(as = AdminOverrideDone)]
struct Done {
    success: bool,
}

/// Decides a pending request over its steps: the request is approved or
/// rejected, its undecided steps skipped, the reason stamped with the
/// operator.
#[utoipa::path(post, path = "/admin/approvals/requests/{request_id}/operator-override", tag = "admin-approvals", request_body = Override,
    params(("request_id" = String, Path, description = "the request")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/api/approvals/routes", { "name": "r-{unique}", "steps": [{ "approver_persona_id": "{persona_id}" }] }], ["POST", "/api/approvals/requests", { "route_id": "{route_id}", "subject_kind": "race", "subject_id": "1" }]], "body": { "decision": "approved", "reason": "race", "operator_id": "ops-race" } }))),
    responses((status = 200, description = "decided", body = Done)))]
async fn overridden(State(state): State<AppState>, Operator(who): Operator, Path(id): Path<String>, body: Body<Override>) -> ApiResult<axum::Json<Done>> {
    let id = path_id(&id)?.to_string();
    if !crate::fields::exists(&state, "SELECT 1 FROM approval_request WHERE request_id = $1", &id).await? {
        return Err(ApiError::Missing("request not found"));
    }
    let body = body.checked()?;
    let (decision, reason, operator_id) = (body.decision, body.reason.trim(), body.operator_id.trim());
    let mut tx = state.db.begin().await?;
    let stamped = format!("[operator-override by {operator_id}] {reason}");
    // Decided by its write: of an override and a decision (or two
    // overrides) at once, one resolves the request and the other is told
    // the state it left, read after the write.
    let moved: Option<String> = sqlx::query_scalar(
        "UPDATE approval_request SET status = $2, reason = $3, resolved_at = $4 WHERE request_id = $1 AND status = 'pending' RETURNING tenant_id",
    )
    .bind(&id)
    .bind(decision)
    .bind(&stamped)
    .bind(db::now())
    .fetch_optional(&mut *tx)
    .await?;
    let Some(tenant_id) = moved else {
        let status: Option<RequestStatus> =
            sqlx::query_scalar("SELECT status FROM approval_request WHERE request_id = $1").bind(&id).fetch_optional(&mut *tx).await?;
        return Err(match status {
            Some(status) => ApiError::Conflict(format!("the request is already {status}")),
            None => ApiError::Missing("request not found"),
        });
    };
    sqlx::query("UPDATE approval_step SET status = 'skipped' WHERE request_id = $1 AND status = 'pending'").bind(&id).execute(&mut *tx).await?;
    let payload = json!({ "request_id": id, "decision": decision, "operator_id": operator_id });
    audit::record_operator_in(&mut tx, &tenant_id, &who, events::APPROVAL_REQUEST_OVERRIDDEN, payload).await?;
    tx.commit().await?;
    Ok(axum::Json(Done { success: true }))
}
