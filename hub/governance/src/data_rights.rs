//! sdk-data-rights: data subject requests (access, erasure, rectification,
//! portability, restriction, objection) and the executions that carry them
//! out. A request is `received`, `in_progress` while an execution runs,
//! then `completed` or `failed` with its last execution's terminal
//! outcome; a failed request may be executed again, or cancelled when the
//! subject withdraws it. One execution runs at a time, and an outcome is
//! recorded once.

use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_request, list_requests))
        .routes(routes!(get_request))
        .routes(routes!(start_execution))
        .routes(routes!(outcome))
        .routes(routes!(cancel))
}

/// GDPR Art. 12(3): an answer within one month.
const DEFAULT_DUE_DAYS: i64 = 30;

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = DataRightsRequest)]
struct Request {
    request_id: Id,
    subject: String,
    kind: Kind,
    status: RequestStatus,
    #[sqlx(try_from = "String")]
    #[schema(value_type = Object)]
    details: JsonText,
    due_at: Timestamp,
    created_at: Timestamp,
    updated_at: Timestamp,
    /// Its executions, oldest first (on a read).
    #[sqlx(skip)]
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Execution>>)]
    executions: Option<Vec<Execution>>,
}

const REQUEST_COLUMNS: &str = "request_id, subject, kind, status, details, due_at, created_at, updated_at";

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = DataRightsExecution)]
struct Execution {
    execution_id: Id,
    request_id: Id,
    status: ExecutionStatus,
    executor: String,
    audit_entry_id: Option<Id>,
    error_detail: Option<String>,
    started_at: Timestamp,
    finished_at: Option<Timestamp>,
}

const EXECUTION_COLUMNS: &str = "execution_id, request_id, status, executor, audit_entry_id, error_detail, started_at, finished_at";

stored_enum! {
    /// What a data subject asks for.
    #[schema(as = DataRightsKind)]
    enum Kind {
        Access = "access",
        Erasure = "erasure",
        Rectification = "rectification",
        Portability = "portability",
        Restriction = "restriction",
        Objection = "objection",
    }
}

stored_enum! {
    /// Where a request is: `received`, `in_progress` while an execution
    /// runs, then `completed` or `failed` with its last execution;
    /// `cancelled` when the subject withdrew it before it completed.
    #[schema(as = DataRightsRequestStatus)]
    enum RequestStatus { Received = "received", InProgress = "in_progress", Completed = "completed", Failed = "failed", Cancelled = "cancelled" }
}

stored_enum! {
    /// Where an execution is: `running`, then `succeeded` or `failed`.
    #[schema(as = DataRightsExecutionStatus)]
    enum ExecutionStatus { Running = "running", Succeeded = "succeeded", Failed = "failed" }
}

stored_enum! {
    /// How an execution ended.
    #[schema(as = DataRightsOutcomeStatus)]
    enum OutcomeStatus { Succeeded = "succeeded", Failed = "failed" }
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewDataRightsRequest)]
struct NewRequest {
    /// Whose data: the tenant's identifier for the person.
    #[schema(max_length = 256)]
    subject: String,
    kind: Kind,
    /// What the subject asked for, as the tenant records it; `{}` when
    /// absent.
    #[schema(value_type = Option<Object>)]
    details: Option<serde_json::Map<String, Value>>,
    /// 30 days from now when absent.
    #[schema(format = DateTime)]
    due_at: Option<String>,
}

/// Records a data subject request.
#[utoipa::path(post, path = "/api/data-rights/requests", tag = "sdk-data-rights", request_body = NewRequest,
    extensions(("x-concurrency" = json!({"outcome": "independent", "body": {"subject": "s-{unique}", "kind": "access"}}))),
    responses((status = 201, description = "the request, received", body = Data<Request>)))]
async fn create_request(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewRequest>) -> ApiResult<Created<Request>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let subject = body.subject.trim();
    let kind = body.kind;
    let details = Value::Object(body.details.unwrap_or_default());
    let due = check.optional_expiry("due_at", &body.due_at).unwrap_or_else(|| db::format_time(chrono::Utc::now() + chrono::TimeDelta::days(DEFAULT_DUE_DAYS)));
    check.finish()?;
    let now = db::now();
    let mut tx = state.db.begin().await?;
    let sql = format!(
        "INSERT INTO data_rights_request (request_id, tenant_id, subject, kind, status, details, due_at, created_by, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, 'received', $5, $6, $7, $8, $8) RETURNING {REQUEST_COLUMNS}"
    );
    let request: Request = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(subject)
        .bind(kind)
        .bind(details.to_string())
        .bind(&due)
        .bind(audit::actor_of(&ctx).1)
        .bind(&now)
        .fetch_one(&mut *tx)
        .await?;
    let payload = json!({ "request_id": request.request_id, "subject": subject, "kind": kind, "due_at": due });
    audit::record(&mut tx, &ctx, events::DATA_RIGHTS_REQUEST_RECEIVED, payload).await?;
    tx.commit().await?;
    Ok(created(request))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct RequestFilter {
    #[param(inline)]
    status: Option<RequestStatus>,
    #[param(inline)]
    kind: Option<Kind>,
    /// Only this subject's requests.
    #[param(max_length = 256)]
    subject: Option<String>,
    /// RFC 3339: only requests due at or before (the legal queue).
    #[param(inline)]
    due_before: Option<Timestamp>,
}

/// The tenant's data subject requests, newest first (without their
/// executions: read one for them).
#[utoipa::path(get, path = "/api/data-rights/requests", tag = "sdk-data-rights", params(RequestFilter, Page),
    responses((status = 200, description = "one page of requests", body = ListOf<Request>)))]
async fn list_requests(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<RequestFilter>, page: Page) -> ApiResult<ListOf<Request>> {
    let status = q.status.map_or("", RequestStatus::as_str);
    let kind = q.kind.map_or("", Kind::as_str);
    let subject = Check::optional(&q.subject).unwrap_or_default();
    let due_before = q.due_before.map(|t| t.to_string()).unwrap_or_default();
    let listing = Listing {
        table: "data_rights_request",
        columns: REQUEST_COLUMNS,
        filter: "tenant_id = $1 AND ($2 = '' OR status = $2) AND ($3 = '' OR kind = $3) AND ($4 = '' OR subject = $4) AND ($5 = '' OR due_at <= $5)",
        order: "created_at DESC, request_id DESC",
    };
    page.list::<Request>(&state.db.read, &listing, &[&ctx.tenant_id, status, kind, &subject, &due_before]).await
}

async fn find(tx: &mut Tx, tenant_id: &str, id: &str) -> ApiResult<Request> {
    let id = path_id(id)?.to_string();
    let sql = format!("SELECT {REQUEST_COLUMNS} FROM data_rights_request WHERE tenant_id = $1 AND request_id = $2");
    let found: Option<Request> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(&id).fetch_optional(&mut **tx).await?;
    found.ok_or(ApiError::NotFound)
}

/// A request with its executions.
#[utoipa::path(get, path = "/api/data-rights/requests/{request_id}", tag = "sdk-data-rights", params(("request_id" = String, Path, description = "the request")),
    responses((status = 200, description = "the request", body = Data<Request>)))]
async fn get_request(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Request>> {
    let mut tx = state.db.read.begin().await?;
    let mut request = find(&mut tx, &ctx.tenant_id, &id).await?;
    let sql = format!("SELECT {EXECUTION_COLUMNS} FROM data_rights_execution WHERE request_id = $1 ORDER BY started_at, execution_id");
    request.executions = Some(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(request.request_id).fetch_all(&mut *tx).await?);
    tx.commit().await?;
    Ok(ok(request))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewDataRightsExecution)]
struct NewExecution {
    /// Who or what carries it out; the caller when absent.
    #[schema(max_length = 256)]
    executor: Option<String>,
}

/// A request and an execution as guarded writes name them.
const REQUEST: Stateful = Stateful { noun: "request", table: "data_rights_request", key: "request_id", state: "status" };
const EXECUTION: Stateful = Stateful { noun: "execution", table: "data_rights_execution", key: "execution_id", state: "status" };

/// Starts carrying out a request (one execution at a time; a completed
/// request is done).
#[utoipa::path(post, path = "/api/data-rights/requests/{request_id}/executions", tag = "sdk-data-rights", request_body = NewExecution,
    params(("request_id" = String, Path, description = "the request")),
    responses((status = 201, description = "the execution, running", body = Data<Execution>)),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/api/data-rights/requests", { "subject": "s-{unique}", "kind": "access" }]], "body": {}, "events": 0 }))))]
async fn start_execution(
    State(state): State<AppState>,
    Tenant(ctx): Tenant,
    Path(id): Path<String>,
    body: Body<NewExecution>,
) -> ApiResult<Created<Execution>> {
    let mut tx = state.db.begin().await?;
    let request = find(&mut tx, &ctx.tenant_id, &id).await?;
    let body = body.checked()?;
    let executor = Check::optional(&body.executor).unwrap_or_else(|| audit::actor_of(&ctx).1.to_string());
    let now = db::now();
    // The request moves first, guarded by its status: of two starts at
    // once, one wins and the other is told the state the winner left.
    let moved: Option<String> = sqlx::query_scalar(
        "UPDATE data_rights_request SET status = 'in_progress', updated_at = $3 \
         WHERE tenant_id = $1 AND request_id = $2 AND status IN ('received', 'failed') RETURNING request_id",
    )
    .bind(&ctx.tenant_id)
    .bind(request.request_id)
    .bind(&now)
    .fetch_optional(&mut *tx)
    .await?;
    REQUEST.settle(&mut tx, &ctx.tenant_id, &request.request_id.to_string(), moved, "it takes no new execution").await?;
    let sql = format!(
        "INSERT INTO data_rights_execution (execution_id, request_id, tenant_id, status, executor, started_at) VALUES ($1, $2, $3, 'running', $4, $5) \
         RETURNING {EXECUTION_COLUMNS}"
    );
    let execution: Execution = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(request.request_id)
        .bind(&ctx.tenant_id)
        .bind(&executor)
        .bind(&now)
        .fetch_one(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(created(execution))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = DataRightsOutcome)]
struct Outcome {
    status: OutcomeStatus,
    /// An audit entry of this tenant that evidences the work.
    #[schema(format = "uuid")]
    audit_entry_id: Option<String>,
    /// Why it failed.
    #[schema(max_length = 2000)]
    error_detail: Option<String>,
}

/// Records the terminal outcome of an execution, once; the request
/// becomes `completed` or `failed`.
#[utoipa::path(post, path = "/api/data-rights/executions/{execution_id}/outcome", tag = "sdk-data-rights", request_body = Outcome,
    params(("execution_id" = String, Path, description = "the execution")),
    responses((status = 200, description = "the execution with its outcome", body = Data<Execution>)),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/api/data-rights/requests", { "subject": "s-{unique}", "kind": "access" }], ["POST", "/api/data-rights/requests/{request_id}/executions", {}]], "body": { "status": "succeeded" } }))))]
async fn outcome(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<Outcome>) -> ApiResult<Data<Execution>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    if EXECUTION.state_of(&mut tx, &ctx.tenant_id, &id).await?.is_none() {
        return Err(ApiError::NotFound);
    }
    let body = body.checked()?;
    let mut check = Check::new();
    let status = body.status;
    let entry = check.optional_uuid("audit_entry_id", &body.audit_entry_id).map(|u| u.to_string());
    let detail = Check::optional(&body.error_detail);
    check.finish()?;
    if let Some(e) = &entry {
        let known: Option<String> = sqlx::query_scalar("SELECT entry_id FROM audit_entry WHERE tenant_id = $1 AND entry_id = $2")
            .bind(&ctx.tenant_id)
            .bind(e)
            .fetch_optional(&mut *tx)
            .await?;
        known.ok_or_else(|| ApiError::invalid("audit_entry_id is not an audit entry of this tenant"))?;
    }
    let now = db::now();
    let sql = format!(
        "UPDATE data_rights_execution SET status = $3, audit_entry_id = $4, error_detail = $5, finished_at = $6 \
         WHERE tenant_id = $1 AND execution_id = $2 AND status = 'running' RETURNING {EXECUTION_COLUMNS}"
    );
    let done: Option<Execution> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&ctx.tenant_id)
        .bind(&id)
        .bind(status)
        .bind(&entry)
        .bind(&detail)
        .bind(&now)
        .fetch_optional(&mut *tx)
        .await?;
    // Of two outcomes at once, one is recorded; the other is told the
    // outcome the winner recorded.
    let done = EXECUTION.settle(&mut tx, &ctx.tenant_id, &id, done, "its outcome is recorded once").await?;
    let request_status = if status == OutcomeStatus::Succeeded { RequestStatus::Completed } else { RequestStatus::Failed };
    sqlx::query("UPDATE data_rights_request SET status = $2, updated_at = $3 WHERE request_id = $1")
        .bind(done.request_id)
        .bind(request_status)
        .bind(&now)
        .execute(&mut *tx)
        .await?;
    let event = if status == OutcomeStatus::Succeeded { events::DATA_RIGHTS_EXECUTION_SUCCEEDED } else { events::DATA_RIGHTS_EXECUTION_FAILED };
    audit::record(&mut tx, &ctx, event, json!({ "execution_id": id, "request_id": done.request_id, "audit_entry_id": entry })).await?;
    tx.commit().await?;
    Ok(ok(done))
}

/// Cancels a request the subject withdrew: a `received` or `failed`
/// request becomes `cancelled` and takes no execution. A request whose
/// execution runs, or that completed or was cancelled, is 409.
#[utoipa::path(post, path = "/api/data-rights/requests/{request_id}/cancel", tag = "sdk-data-rights", params(("request_id" = String, Path, description = "the request")),
    responses((status = 200, description = "the request, cancelled", body = Data<Request>)),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/api/data-rights/requests", { "subject": "s-{unique}", "kind": "access" }]] }))))]
async fn cancel(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Request>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    // Guarded by the status: of two cancellations at once one wins and the
    // other is told the state the winner left.
    let sql = format!(
        "UPDATE data_rights_request SET status = 'cancelled', updated_at = $3 \
         WHERE tenant_id = $1 AND request_id = $2 AND status IN ('received', 'failed') RETURNING {REQUEST_COLUMNS}"
    );
    let moved: Option<Request> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).bind(db::now()).fetch_optional(&mut *tx).await?;
    let request = REQUEST.settle(&mut tx, &ctx.tenant_id, &id, moved, "only a received or failed request can be cancelled").await?;
    let payload = json!({ "request_id": request.request_id, "subject": request.subject, "kind": request.kind });
    audit::record(&mut tx, &ctx, events::DATA_RIGHTS_REQUEST_CANCELLED, payload).await?;
    tx.commit().await?;
    Ok(ok(request))
}
