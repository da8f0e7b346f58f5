//! sdk-approval: routes of ordered approval steps, each with its approver
//! persona and an optional SLA; requests that walk a route's steps in
//! order; the decision of one step by its approver; and the inbox of
//! pending requests. A request is `pending` until its last step approves
//! (`approved`) or any step rejects (`rejected`, the later steps
//! `skipped`), or its requester cancels it (`cancelled`). A route is
//! `active` until retired. The operator routes read the same tables.

use hub_identity::personas;
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_route, list_routes))
        .routes(routes!(get_route))
        .routes(routes!(retire_route))
        .routes(routes!(create_request, list_requests))
        .routes(routes!(get_request))
        .routes(routes!(decide))
        .routes(routes!(cancel_request))
        .routes(routes!(inbox))
}

stored_enum! {
    /// What an approver decides of a step.
    #[schema(as = ApprovalVerdict)]
    enum Verdict { Approved = "approved", Rejected = "rejected" }
}

stored_enum! {
    /// Whether a route takes new requests.
    #[schema(as = ApprovalRouteStatus)]
    enum RouteStatus { Active = "active", Retired = "retired" }
}

stored_enum! {
    /// Where a request is: `pending` until its last step approves or any
    /// step rejects, or its requester cancels it (`cancelled`).
    #[schema(as = ApprovalRequestStatus)]
    enum RequestStatus { Pending = "pending", Approved = "approved", Rejected = "rejected", Cancelled = "cancelled" }
}

stored_enum! {
    /// Where a step is: `pending`, `approved`, `rejected`, or `skipped`
    /// after a rejection.
    #[schema(as = ApprovalStepStatus)]
    enum StepStatus { Pending = "pending", Approved = "approved", Rejected = "rejected", Skipped = "skipped" }
}

impl From<Verdict> for StepStatus {
    fn from(v: Verdict) -> Self {
        match v {
            Verdict::Approved => StepStatus::Approved,
            Verdict::Rejected => StepStatus::Rejected,
        }
    }
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = ApprovalRoute)]
struct ApprovalRoute {
    route_id: Id,
    name: String,
    status: RouteStatus,
    /// `[{ name, approver_persona_id, sla_minutes }]`, in order.
    #[sqlx(try_from = "String")]
    #[schema(value_type = Vec<Object>)]
    steps: JsonText,
    /// The largest SLA of the steps, 0 when none has one.
    sla_minutes: i64,
    created_at: Timestamp,
}

const ROUTE_COLUMNS: &str = "route_id, name, status, steps, sla_minutes, created_at";

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = ApprovalRequest)]
struct ApprovalRequest {
    request_id: Id,
    route_id: Id,
    subject_kind: String,
    subject_id: String,
    status: RequestStatus,
    reason: Option<String>,
    requested_by: String,
    requested_at: Timestamp,
    resolved_at: Option<Timestamp>,
    /// Its steps in order (on every answer but the inbox).
    #[sqlx(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Step>>)]
    steps: Option<Vec<Step>>,
}

const REQUEST_COLUMNS: &str = "request_id, route_id, subject_kind, subject_id, status, reason, requested_by, requested_at, resolved_at";

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = ApprovalStep)]
struct Step {
    step_id: Id,
    seq: i64,
    name: String,
    approver_persona_id: Id,
    sla_minutes: Option<i64>,
    status: StepStatus,
    comment: Option<String>,
    decided_by: Option<String>,
    decided_at: Option<Timestamp>,
}

const STEP_COLUMNS: &str = "step_id, seq, name, approver_persona_id, sla_minutes, status, comment, decided_by, decided_at";

/// One step of a new route.
#[derive(Deserialize, ToSchema)]
#[schema(as = NewApprovalRouteStep)]
struct NewStep {
    /// The persona of the tenant who decides the step.
    #[schema(format = "uuid")]
    approver_persona_id: String,
    /// Minutes the approver has to decide.
    #[schema(minimum = 1, maximum = 100_800)]
    sla_minutes: Option<i64>,
    /// `step N` (its place in the route) when absent.
    #[schema(max_length = 200)]
    name: Option<String>,
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewApprovalRoute)]
struct NewRoute {
    /// Unique in the tenant.
    #[schema(max_length = 200)]
    name: String,
    /// The steps, decided in order.
    #[schema(min_items = 1, max_items = 20)]
    steps: Vec<NewStep>,
}

/// Creates an approval route.
#[utoipa::path(post, path = "/api/approvals/routes", tag = "sdk-approval", request_body = NewRoute,
    responses((status = 201, description = "the route", body = Data<ApprovalRoute>)),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "body": { "name": "r-{unique}", "steps": [{ "approver_persona_id": "{persona_id}" }] } }))))]
async fn create_route(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewRoute>) -> ApiResult<Created<ApprovalRoute>> {
    let body = body.checked()?;
    let name = body.name.trim();
    let steps: Vec<(String, String, Option<i64>)> = body
        .steps
        .iter()
        .enumerate()
        .map(|(i, step)| {
            let step_name = Check::optional(&step.name).unwrap_or_else(|| format!("step {}", i + 1));
            (step_name, canonical_uuid(&step.approver_persona_id), step.sla_minutes)
        })
        .collect();
    let mut tx = state.db.begin().await?;
    let mut check = Check::new();
    for (i, (_, approver, _)) in steps.iter().enumerate() {
        if !personas::exists_in_tenant(&mut *tx, &ctx.tenant_id, approver).await? {
            check.fail(format!("steps[{i}].approver_persona_id is not a persona of this tenant"));
        }
    }
    check.finish()?;
    let sla_max = steps.iter().filter_map(|s| s.2).max().unwrap_or(0);
    let steps_json: Vec<Value> = steps.iter().map(|(n, a, s)| json!({ "name": n, "approver_persona_id": a, "sla_minutes": s })).collect();
    let sql = format!(
        "INSERT INTO approval_route (route_id, tenant_id, name, status, steps, sla_minutes, created_by, created_at) VALUES ($1, $2, $3, 'active', $4, $5, $6, $7) \
         ON CONFLICT (tenant_id, name) DO NOTHING RETURNING {ROUTE_COLUMNS}"
    );
    let route: Option<ApprovalRoute> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(name)
        .bind(Value::from(steps_json).to_string())
        .bind(sla_max)
        .bind(audit::actor_of(&ctx).1)
        .bind(db::now())
        .fetch_optional(&mut *tx)
        .await?;
    let route = route.ok_or_else(|| ApiError::Conflict(format!("an approval route named {name} exists")))?;
    let payload = json!({ "route_id": route.route_id, "name": name, "steps": steps.len(), "sla_minutes": sla_max });
    audit::record(&mut tx, &ctx, events::APPROVAL_ROUTE_CREATED, payload).await?;
    tx.commit().await?;
    Ok(created(route))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct RouteFilter {
    #[param(inline)]
    status: Option<RouteStatus>,
}

/// The tenant's approval routes, newest first.
#[utoipa::path(get, path = "/api/approvals/routes", tag = "sdk-approval", params(RouteFilter, Page),
    responses((status = 200, description = "one page of routes", body = ListOf<ApprovalRoute>)))]
async fn list_routes(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<RouteFilter>, page: Page) -> ApiResult<ListOf<ApprovalRoute>> {
    let status = q.status.map_or("", RouteStatus::as_str);
    let listing = Listing {
        table: "approval_route",
        columns: ROUTE_COLUMNS,
        filter: "tenant_id = $1 AND ($2 = '' OR status = $2)",
        order: "created_at DESC, route_id DESC",
    };
    page.list::<ApprovalRoute>(&state.db.read, &listing, &[&ctx.tenant_id, status]).await
}

/// One approval route.
#[utoipa::path(get, path = "/api/approvals/routes/{route_id}", tag = "sdk-approval", params(("route_id" = String, Path, description = "the route")),
    responses((status = 200, description = "the route", body = Data<ApprovalRoute>)))]
async fn get_route(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<ApprovalRoute>> {
    let id = path_id(&id)?.to_string();
    let sql = format!("SELECT {ROUTE_COLUMNS} FROM approval_route WHERE tenant_id = $1 AND route_id = $2");
    let route: Option<ApprovalRoute> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&state.db.read).await?;
    Ok(ok(route.ok_or(ApiError::NotFound)?))
}

/// Retires a route: it takes no new request. Requests already open on it
/// go on to their decision. Retiring a retired route answers it as it is
/// and records no event.
#[utoipa::path(post, path = "/api/approvals/routes/{route_id}/retire", tag = "sdk-approval", params(("route_id" = String, Path, description = "the route")),
    extensions(("x-concurrency" = json!({ "outcome": "same-answer", "given": [["POST", "/api/approvals/routes", { "name": "r-{unique}", "steps": [{ "approver_persona_id": "{persona_id}" }] }]] }))),
    responses((status = 200, description = "the route, retired", body = Data<ApprovalRoute>)))]
async fn retire_route(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<ApprovalRoute>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    // Guarded by the status: of two retirements at once one moves the
    // route (and records the event), the other finds it retired.
    let sql = format!("UPDATE approval_route SET status = 'retired' WHERE tenant_id = $1 AND route_id = $2 AND status = 'active' RETURNING {ROUTE_COLUMNS}");
    let moved: Option<ApprovalRoute> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&mut *tx).await?;
    let route = match moved {
        Some(route) => {
            audit::record(&mut tx, &ctx, events::APPROVAL_ROUTE_RETIRED, json!({ "route_id": route.route_id, "name": route.name })).await?;
            route
        }
        None => {
            let sql = format!("SELECT {ROUTE_COLUMNS} FROM approval_route WHERE tenant_id = $1 AND route_id = $2");
            let found: Option<ApprovalRoute> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&mut *tx).await?;
            found.ok_or(ApiError::NotFound)?
        }
    };
    tx.commit().await?;
    Ok(ok(route))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewApprovalRequest)]
struct NewRequest {
    /// An approval route of the tenant.
    #[schema(format = "uuid")]
    route_id: String,
    /// What is to be approved: its kind …
    #[schema(max_length = 64)]
    subject_kind: String,
    /// … and its identifier.
    #[schema(max_length = 256)]
    subject_id: String,
    #[schema(max_length = 2000)]
    reason: Option<String>,
}

/// Opens an approval request on a route: its steps are the route's, all
/// pending, decided in order.
#[utoipa::path(post, path = "/api/approvals/requests", tag = "sdk-approval", request_body = NewRequest,
    extensions(("x-concurrency" = json!({"outcome": "independent", "given": [["POST", "/api/approvals/routes", {"name": "r-{unique}", "steps": [{"approver_persona_id": "{persona_id}"}]}]], "body": {"route_id": "{route_id}", "subject_kind": "x", "subject_id": "1"}}))),
    responses((status = 201, description = "the request with its steps", body = Data<ApprovalRequest>)))]
async fn create_request(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewRequest>) -> ApiResult<Created<ApprovalRequest>> {
    let body = body.checked()?;
    let route_id = canonical_uuid(&body.route_id);
    let kind = body.subject_kind.trim();
    let subject = body.subject_id.trim();
    let reason = Check::optional(&body.reason);
    let mut tx = state.db.begin().await?;
    let steps: Option<(String,)> = sqlx::query_as("SELECT steps FROM approval_route WHERE tenant_id = $1 AND route_id = $2 AND status = 'active'")
        .bind(&ctx.tenant_id)
        .bind(&route_id)
        .fetch_optional(&mut *tx)
        .await?;
    let steps = steps.ok_or_else(|| ApiError::invalid("route_id is not an active approval route of this tenant"))?.0;
    let steps: Vec<Value> = serde_json::from_str(&steps).map_err(|e| ApiError::Internal(e.into()))?;
    let (request_id, now) = (db::new_id(), db::now());
    sqlx::query(
        "INSERT INTO approval_request (request_id, tenant_id, route_id, subject_kind, subject_id, status, reason, requested_by, requested_at) \
         VALUES ($1, $2, $3, $4, $5, 'pending', $6, $7, $8)",
    )
    .bind(&request_id)
    .bind(&ctx.tenant_id)
    .bind(&route_id)
    .bind(kind)
    .bind(subject)
    .bind(&reason)
    .bind(audit::actor_of(&ctx).1)
    .bind(&now)
    .execute(&mut *tx)
    .await?;
    for (i, step) in steps.iter().enumerate() {
        sqlx::query(
            "INSERT INTO approval_step (step_id, request_id, tenant_id, seq, name, approver_persona_id, sla_minutes, status) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending')",
        )
        .bind(db::new_id())
        .bind(&request_id)
        .bind(&ctx.tenant_id)
        .bind(i as i64 + 1)
        .bind(step["name"].as_str().unwrap_or_default())
        .bind(step["approver_persona_id"].as_str().unwrap_or_default())
        .bind(step["sla_minutes"].as_i64())
        .execute(&mut *tx)
        .await?;
    }
    let payload = json!({ "request_id": request_id, "route_id": route_id, "subject_kind": kind, "subject_id": subject });
    audit::record(&mut tx, &ctx, events::APPROVAL_REQUEST_CREATED, payload).await?;
    let request = load(&mut tx, &ctx.tenant_id, &request_id).await?;
    tx.commit().await?;
    Ok(created(request))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct RequestFilter {
    #[param(inline)]
    status: Option<RequestStatus>,
    #[param(max_length = 64)]
    subject_kind: Option<String>,
    #[param(max_length = 256)]
    subject_id: Option<String>,
    /// Who opened the request: the person, or an API key's persona.
    #[param(format = "uuid")]
    requested_by: Option<String>,
}

/// The tenant's approval requests, pending and decided, newest first
/// (without their steps: read one for them).
#[utoipa::path(get, path = "/api/approvals/requests", tag = "sdk-approval", params(RequestFilter, Page),
    responses((status = 200, description = "one page of requests", body = ListOf<ApprovalRequest>)))]
async fn list_requests(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<RequestFilter>, page: Page) -> ApiResult<ListOf<ApprovalRequest>> {
    let status = q.status.map_or("", RequestStatus::as_str);
    let kind = Check::optional(&q.subject_kind).unwrap_or_default();
    let subject = Check::optional(&q.subject_id).unwrap_or_default();
    let requested_by = canonical_uuid_opt(&q.requested_by).unwrap_or_default();
    let listing = Listing {
        table: "approval_request",
        columns: REQUEST_COLUMNS,
        filter: "tenant_id = $1 AND ($2 = '' OR status = $2) AND ($3 = '' OR subject_kind = $3) AND ($4 = '' OR subject_id = $4) \
                 AND ($5 = '' OR requested_by = $5)",
        order: "requested_at DESC, request_id DESC",
    };
    page.list::<ApprovalRequest>(&state.db.read, &listing, &[&ctx.tenant_id, status, &kind, &subject, &requested_by]).await
}

/// The tenant's request with its steps, or 404.
async fn load(tx: &mut Tx, tenant_id: &str, request_id: &str) -> ApiResult<ApprovalRequest> {
    let sql = format!("SELECT {REQUEST_COLUMNS} FROM approval_request WHERE tenant_id = $1 AND request_id = $2");
    let found: Option<ApprovalRequest> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(request_id).fetch_optional(&mut **tx).await?;
    let mut request = found.ok_or(ApiError::NotFound)?;
    let sql = format!("SELECT {STEP_COLUMNS} FROM approval_step WHERE request_id = $1 ORDER BY seq");
    request.steps = Some(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(request_id).fetch_all(&mut **tx).await?);
    Ok(request)
}

/// A request with its steps.
#[utoipa::path(get, path = "/api/approvals/requests/{request_id}", tag = "sdk-approval", params(("request_id" = String, Path, description = "the request")),
    responses((status = 200, description = "the request", body = Data<ApprovalRequest>)))]
async fn get_request(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<ApprovalRequest>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.read.begin().await?;
    let request = load(&mut tx, &ctx.tenant_id, &id).await?;
    tx.commit().await?;
    Ok(ok(request))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = ApprovalDecision)]
struct Decision {
    decision: Verdict,
    #[schema(max_length = 2000)]
    comment: Option<String>,
}

/// A step as guarded writes name it.
const STEP: Stateful = Stateful { noun: "step", table: "approval_step", key: "step_id", state: "status" };

/// Decides one step. Only the step's approver persona (the caller's
/// persona) decides it, once, after the steps before it approved.
#[utoipa::path(post, path = "/api/approvals/requests/{request_id}/steps/{step_id}/decision", tag = "sdk-approval", request_body = Decision,
    params(("request_id" = String, Path, description = "the request"), ("step_id" = String, Path, description = "the step")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "events": 2, "given": [["POST", "/api/approvals/routes", { "name": "r-{unique}", "steps": [{ "approver_persona_id": "{persona_id}" }] }], ["POST", "/api/approvals/requests", { "route_id": "{route_id}", "subject_kind": "x", "subject_id": "1" }]], "params": { "step_id": "{steps.0.step_id}" }, "body": { "decision": "approved" } }))),
    responses((status = 200, description = "the request with its steps", body = Data<ApprovalRequest>)))]
async fn decide(
    State(state): State<AppState>,
    Tenant(ctx): Tenant,
    Path((request_id, step_id)): Path<(String, String)>,
    body: Body<Decision>,
) -> ApiResult<Data<ApprovalRequest>> {
    let (request_id, step_id) = (path_id(&request_id)?.to_string(), path_id(&step_id)?.to_string());
    let mut tx = state.db.begin().await?;
    let request = load(&mut tx, &ctx.tenant_id, &request_id).await?;
    let steps = request.steps.as_deref().unwrap_or_default();
    let step = steps.iter().find(|s| s.step_id == step_id).ok_or(ApiError::NotFound)?;
    let body = body.checked()?;
    let decision = StepStatus::from(body.decision);
    let comment = Check::optional(&body.comment);
    if step.approver_persona_id != ctx.persona_id {
        return Err(ApiError::forbidden("only the step's approver persona decides it"));
    }
    // A step before it that was read pending may be decided meanwhile, but
    // a step never returns to pending: the order check only errs on the
    // side of a 409.
    if let Some(before) = steps.iter().find(|s| s.seq < step.seq && s.status == StepStatus::Pending) {
        return Err(ApiError::Conflict(format!("step {} is not decided yet: steps are decided in order", before.seq)));
    }
    let now = db::now();
    // Guarded by the step's status: of two decisions at once, one wins and
    // the other is told the state the winner left.
    let moved: Option<String> = sqlx::query_scalar(
        "UPDATE approval_step SET status = $3, comment = $4, decided_by = $5, decided_at = $6 \
         WHERE tenant_id = $1 AND step_id = $2 AND status = 'pending' RETURNING step_id",
    )
    .bind(&ctx.tenant_id)
    .bind(&step_id)
    .bind(decision)
    .bind(&comment)
    .bind(&ctx.persona_id)
    .bind(&now)
    .fetch_optional(&mut *tx)
    .await?;
    STEP.settle(&mut tx, &ctx.tenant_id, &step_id, moved, "only a pending step can be decided").await?;
    let payload = json!({ "request_id": request_id, "step_id": step_id, "seq": step.seq, "decision": decision, "approver_persona_id": ctx.persona_id });
    audit::record(&mut tx, &ctx, events::APPROVAL_STEP_DECIDED, payload).await?;
    let last = steps.iter().all(|s| s.seq <= step.seq);
    let outcome = match body.decision {
        Verdict::Rejected => Some((RequestStatus::Rejected, events::APPROVAL_REQUEST_REJECTED)),
        _ if last => Some((RequestStatus::Approved, events::APPROVAL_REQUEST_APPROVED)),
        _ => None,
    };
    if let Some((status, event)) = outcome {
        sqlx::query("UPDATE approval_request SET status = $2, resolved_at = $3 WHERE request_id = $1 AND status = 'pending'")
            .bind(&request_id)
            .bind(status)
            .bind(&now)
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE approval_step SET status = 'skipped' WHERE request_id = $1 AND status = 'pending'").bind(&request_id).execute(&mut *tx).await?;
        audit::record(&mut tx, &ctx, event, json!({ "request_id": request_id, "route_id": request.route_id, "decided_by_step": step_id })).await?;
    }
    let request = load(&mut tx, &ctx.tenant_id, &request_id).await?;
    tx.commit().await?;
    Ok(ok(request))
}

/// A request as guarded writes name it.
const REQUEST: Stateful = Stateful { noun: "request", table: "approval_request", key: "request_id", state: "status" };

/// Cancels a pending request: only its requester withdraws it. Its
/// undecided steps are `skipped`; a decided or cancelled request is 409.
#[utoipa::path(post, path = "/api/approvals/requests/{request_id}/cancel", tag = "sdk-approval", params(("request_id" = String, Path, description = "the request")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/api/approvals/routes", { "name": "r-{unique}", "steps": [{ "approver_persona_id": "{persona_id}" }] }], ["POST", "/api/approvals/requests", { "route_id": "{route_id}", "subject_kind": "x", "subject_id": "1" }]] }))),
    responses((status = 200, description = "the request with its steps, cancelled", body = Data<ApprovalRequest>)))]
async fn cancel_request(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<ApprovalRequest>> {
    let id = path_id(&id)?.to_string();
    let requester = audit::actor_of(&ctx).1.to_string();
    let mut tx = state.db.begin().await?;
    // Guarded by the status and the requester, in one statement: of two
    // cancellations at once one wins, the other is told the state it left.
    let moved: Option<String> = sqlx::query_scalar(
        "UPDATE approval_request SET status = 'cancelled', resolved_at = $4 \
         WHERE tenant_id = $1 AND request_id = $2 AND requested_by = $3 AND status = 'pending' RETURNING route_id",
    )
    .bind(&ctx.tenant_id)
    .bind(&id)
    .bind(&requester)
    .bind(db::now())
    .fetch_optional(&mut *tx)
    .await?;
    if moved.is_none() {
        let sql = format!("SELECT {REQUEST_COLUMNS} FROM approval_request WHERE tenant_id = $1 AND request_id = $2");
        let found: Option<ApprovalRequest> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&mut *tx).await?;
        if found.is_some_and(|r| r.requested_by != requester) {
            return Err(ApiError::forbidden("only the request's requester cancels it"));
        }
    }
    let route_id = REQUEST.settle(&mut tx, &ctx.tenant_id, &id, moved, "only a pending request can be cancelled").await?;
    sqlx::query("UPDATE approval_step SET status = 'skipped' WHERE request_id = $1 AND status = 'pending'").bind(&id).execute(&mut *tx).await?;
    audit::record(&mut tx, &ctx, events::APPROVAL_REQUEST_CANCELLED, json!({ "request_id": id, "route_id": route_id })).await?;
    let request = load(&mut tx, &ctx.tenant_id, &id).await?;
    tx.commit().await?;
    Ok(ok(request))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct InboxQuery {
    /// The caller's tenant.
    #[param(format = "uuid")]
    tenant_id: String,
    /// Only requests with an undecided step of this persona.
    #[param(format = "uuid")]
    assignee_persona_id: Option<String>,
}

/// The pending requests, oldest first.
#[utoipa::path(get, path = "/api/approvals/inbox", tag = "sdk-approval", params(InboxQuery, Page),
    responses((status = 200, description = "one page of pending requests", body = ListOf<ApprovalRequest>)))]
async fn inbox(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<InboxQuery>, page: Page) -> ApiResult<ListOf<ApprovalRequest>> {
    ctx.check_tenant(Some(&q.tenant_id))?;
    let assignee = canonical_uuid_opt(&q.assignee_persona_id);
    let mut listing =
        Listing { table: "approval_request", columns: REQUEST_COLUMNS, filter: "tenant_id = $1 AND status = 'pending'", order: "requested_at, request_id" };
    match assignee {
        None => page.list::<ApprovalRequest>(&state.db.read, &listing, &[&ctx.tenant_id]).await,
        Some(persona) => {
            listing.filter = "tenant_id = $1 AND status = 'pending' AND EXISTS (SELECT 1 FROM approval_step s WHERE s.request_id = approval_request.request_id \
                              AND s.tenant_id = $1 AND s.approver_persona_id = $2 AND s.status = 'pending')";
            page.list::<ApprovalRequest>(&state.db.read, &listing, &[&ctx.tenant_id, &persona]).await
        }
    }
}
