//! sdk-service-request: queues of a tenant (one name each, with a numeric
//! priority) and the requests filed into them, `open` until closed (and
//! `open` again when reopened).

use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_queue, list_queues))
        .routes(routes!(get_queue, update_queue))
        .routes(routes!(open_request, list_requests))
        .routes(routes!(get_request, update_request))
        .routes(routes!(close_request))
        .routes(routes!(reopen_request))
}

stored_enum! {
    /// Whether a service request is still open.
    #[schema(as = ServiceRequestStatus)]
    pub enum RequestStatus { Open = "open", Closed = "closed" }
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = ServiceRequestQueue)]
struct Queue {
    queue_id: Id,
    name: String,
    description: Option<String>,
    /// 0 to 1000, higher first; 0 when not given.
    priority: i64,
    created_by: String,
    created_at: Timestamp,
}

const QUEUE_COLUMNS: &str = "queue_id, name, description, priority, created_by, created_at";

#[derive(Debug, FromRow, Serialize, ToSchema)]
struct ServiceRequest {
    request_id: Id,
    queue_id: Id,
    title: String,
    description: Option<String>,
    /// The request's own priority; the queue's when not given.
    priority: i64,
    status: RequestStatus,
    contact_id: Option<Id>,
    resolution: Option<String>,
    opened_by: String,
    opened_at: Timestamp,
    closed_at: Option<Timestamp>,
}

const REQUEST_COLUMNS: &str = "request_id, queue_id, title, description, priority, status, contact_id, resolution, opened_by, opened_at, closed_at";

#[derive(Deserialize, ToSchema)]
#[schema(as = NewServiceRequestQueue)]
struct NewQueue {
    /// The caller's tenant (required here; `Body` refuses another tenant's).
    #[schema(format = "uuid")]
    #[allow(dead_code)]
    tenant_id: String,
    /// Unique in the tenant (409).
    #[schema(max_length = 200)]
    name: String,
    #[schema(max_length = 2000)]
    description: Option<String>,
    /// Higher is more urgent; 0 when absent.
    #[schema(minimum = 0, maximum = 1000)]
    priority: Option<i64>,
}

/// Creates a queue.
#[utoipa::path(post, path = "/api/service-requests/queues", tag = "sdk-service-request", request_body = NewQueue,
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "body": { "tenant_id": "{tenant_id}", "name": "race-{unique}" } }))),
    responses((status = 201, description = "the queue", body = Data<Queue>)))]
async fn create_queue(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewQueue>) -> ApiResult<Created<Queue>> {
    let body = body.checked()?;
    let name = body.name.trim().to_string();
    let description = Check::optional(&body.description);
    let priority = body.priority.unwrap_or(0);
    let mut tx = state.db.begin().await?;
    let sql = format!(
        "INSERT INTO service_request_queue (queue_id, tenant_id, name, description, priority, created_by, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (tenant_id, name) DO NOTHING RETURNING {QUEUE_COLUMNS}"
    );
    let made: Option<Queue> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(&name)
        .bind(&description)
        .bind(priority)
        .bind(audit::actor_of(&ctx).1)
        .bind(db::now())
        .fetch_optional(&mut *tx)
        .await?;
    let queue = made.ok_or_else(|| ApiError::Conflict(format!("the tenant has a queue named {name}")))?;
    audit::record(&mut tx, &ctx, events::SERVICE_REQUEST_QUEUE_CREATED, json!({ "queue_id": queue.queue_id, "name": name, "priority": priority })).await?;
    tx.commit().await?;
    Ok(created(queue))
}

/// The tenant's queues, newest first.
#[utoipa::path(get, path = "/api/service-requests/queues", tag = "sdk-service-request", params(Page),
    responses((status = 200, description = "one page of queues", body = ListOf<Queue>)))]
async fn list_queues(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page) -> ApiResult<ListOf<Queue>> {
    let listing = Listing { table: "service_request_queue", columns: QUEUE_COLUMNS, filter: "tenant_id = $1", order: "created_at DESC, queue_id DESC" };
    page.list::<Queue>(&state.db.read, &listing, &[&ctx.tenant_id]).await
}

async fn find_queue<'e, E>(exec: E, tenant_id: &str, id: &str) -> ApiResult<Queue>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let id = path_id(id)?.to_string();
    let sql = format!("SELECT {QUEUE_COLUMNS} FROM service_request_queue WHERE tenant_id = $1 AND queue_id = $2");
    let found: Option<Queue> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(&id).fetch_optional(exec).await?;
    found.ok_or(ApiError::NotFound)
}

/// One queue.
#[utoipa::path(get, path = "/api/service-requests/queues/{queue_id}", tag = "sdk-service-request", params(("queue_id" = String, Path, description = "the queue")),
    responses((status = 200, description = "the queue", body = Data<Queue>)))]
async fn get_queue(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Queue>> {
    Ok(ok(find_queue(&state.db.read, &ctx.tenant_id, &id).await?))
}

/// A change of a queue: what is absent stays; at least one field.
#[derive(Deserialize, ToSchema)]
#[schema(as = ServiceRequestQueueUpdate)]
struct QueueUpdate {
    /// Unique in the tenant (409).
    #[schema(max_length = 200)]
    name: Option<String>,
    /// Blank clears it.
    #[schema(max_length = 2000)]
    description: Option<String>,
    /// The default of the requests filed from now on (filed requests keep
    /// theirs).
    #[schema(minimum = 0, maximum = 1000)]
    priority: Option<i64>,
}

/// Changes a queue's name, description or priority (what is absent stays;
/// at least one is given). Requests already filed keep their priority.
#[utoipa::path(patch, path = "/api/service-requests/queues/{queue_id}", tag = "sdk-service-request", request_body = QueueUpdate,
    params(("queue_id" = String, Path, description = "the queue")),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/service-requests/queues", { "tenant_id": "{tenant_id}", "name": "race-{unique}" }]], "body": { "priority": 5, "description": "race" } }))),
    responses((status = 200, description = "the queue", body = Data<Queue>)))]
async fn update_queue(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<QueueUpdate>) -> ApiResult<Data<Queue>> {
    let mut tx = state.db.begin().await?;
    // Another tenant's queue is not found, whatever the body.
    let queue = find_queue(&mut *tx, &ctx.tenant_id, &id).await?;
    let body = body.checked()?;
    let mut check = Check::new();
    let name = match &body.name {
        None => None,
        Some(_) => Some(check.required("name", &body.name)),
    };
    let set_description = i64::from(body.description.is_some());
    let description = Check::optional(&body.description);
    let priority = body.priority;
    if name.is_none() && set_description == 0 && priority.is_none() {
        check.fail("give at least one of: name, description, priority");
    }
    check.finish()?;
    let sql = format!(
        "UPDATE service_request_queue SET name = COALESCE($1, name), description = CASE WHEN $2 = 1 THEN $3 ELSE description END, \
         priority = COALESCE($4, priority) WHERE tenant_id = $5 AND queue_id = $6 RETURNING {QUEUE_COLUMNS}"
    );
    let changed: Queue = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&name)
        .bind(set_description)
        .bind(&description)
        .bind(priority)
        .bind(&ctx.tenant_id)
        .bind(queue.queue_id)
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| match &e {
            sqlx::Error::Database(d) if d.is_unique_violation() => {
                ApiError::Conflict(format!("the tenant has a queue named {}", name.as_deref().unwrap_or_default()))
            }
            _ => e.into(),
        })?;
    let fields: Vec<&str> = [("name", name.is_some()), ("description", set_description == 1), ("priority", priority.is_some())]
        .into_iter()
        .filter_map(|(f, given)| given.then_some(f))
        .collect();
    let payload = json!({ "queue_id": changed.queue_id, "fields": fields, "priority": changed.priority });
    audit::record(&mut tx, &ctx, events::SERVICE_REQUEST_QUEUE_UPDATED, payload).await?;
    tx.commit().await?;
    Ok(ok(changed))
}

#[derive(Deserialize, ToSchema)]
struct NewServiceRequest {
    /// A queue of the tenant.
    #[schema(format = "uuid")]
    queue_id: String,
    #[schema(max_length = 300)]
    title: String,
    #[schema(max_length = 8000)]
    description: Option<String>,
    /// The queue's when absent.
    #[schema(minimum = 0, maximum = 1000)]
    priority: Option<i64>,
    /// The requesting contact (a contact of the tenant's CRM).
    #[schema(format = "uuid")]
    contact_id: Option<String>,
}

/// Files a request into a queue: `open`.
#[utoipa::path(post, path = "/api/service-requests", tag = "sdk-service-request", request_body = NewServiceRequest,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/service-requests/queues", { "tenant_id": "{tenant_id}", "name": "race-{unique}" }]], "body": { "queue_id": "{queue_id}", "title": "race" } }))),
    responses((status = 201, description = "the request", body = Data<ServiceRequest>)))]
async fn open_request(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewServiceRequest>) -> ApiResult<Created<ServiceRequest>> {
    let body = body.checked()?;
    let queue = canonical_uuid(&body.queue_id);
    let title = body.title.trim().to_string();
    let description = Check::optional(&body.description);
    let priority = body.priority;
    let contact = canonical_uuid_opt(&body.contact_id);
    let mut tx = state.db.begin().await?;
    let queue_priority: Option<i64> = sqlx::query_scalar("SELECT priority FROM service_request_queue WHERE tenant_id = $1 AND queue_id = $2")
        .bind(&ctx.tenant_id)
        .bind(&queue)
        .fetch_optional(&mut *tx)
        .await?;
    let mut check = Check::new();
    if queue_priority.is_none() {
        check.fail("queue_id is not a queue of this tenant");
    }
    if let Some(c) = &contact
        && !crate::crm::contact_exists(&mut tx, &ctx.tenant_id, c).await?
    {
        check.fail("contact_id is not a contact of this tenant");
    }
    check.finish()?;
    let priority = priority.or(queue_priority).unwrap_or(0);
    let sql = format!(
        "INSERT INTO service_request (request_id, tenant_id, queue_id, title, description, priority, status, contact_id, opened_by, opened_at) \
         VALUES ($1, $2, $3, $4, $5, $6, 'open', $7, $8, $9) RETURNING {REQUEST_COLUMNS}"
    );
    let request: ServiceRequest = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(&queue)
        .bind(&title)
        .bind(&description)
        .bind(priority)
        .bind(&contact)
        .bind(audit::actor_of(&ctx).1)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
    let payload = json!({ "request_id": request.request_id, "queue_id": queue, "priority": priority, "contact_id": contact });
    audit::record(&mut tx, &ctx, events::SERVICE_REQUEST_OPENED, payload).await?;
    tx.commit().await?;
    Ok(created(request))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct Filter {
    /// Only the requests of this queue.
    #[param(format = "uuid")]
    queue_id: Option<String>,
    /// Only the requests in this status.
    #[param(inline)]
    status: Option<RequestStatus>,
    /// Only the requests of this contact.
    #[param(format = "uuid")]
    contact_id: Option<String>,
}

/// The tenant's requests, most recently opened first.
#[utoipa::path(get, path = "/api/service-requests", tag = "sdk-service-request", params(Filter, Page),
    responses((status = 200, description = "one page of requests", body = ListOf<ServiceRequest>)))]
async fn list_requests(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page, Params(q): Params<Filter>) -> ApiResult<ListOf<ServiceRequest>> {
    let queue = canonical_uuid_opt(&q.queue_id).unwrap_or_default();
    let status = q.status.map(RequestStatus::as_str).unwrap_or_default();
    let contact = canonical_uuid_opt(&q.contact_id).unwrap_or_default();
    let listing = Listing {
        table: "service_request",
        columns: REQUEST_COLUMNS,
        filter: "tenant_id = $1 AND ($2 = '' OR queue_id = $2) AND ($3 = '' OR status = $3) AND ($4 = '' OR contact_id = $4)",
        order: "opened_at DESC, request_id DESC",
    };
    page.list::<ServiceRequest>(&state.db.read, &listing, &[&ctx.tenant_id, &queue, status, &contact]).await
}

async fn find<'e, E>(exec: E, tenant_id: &str, id: &str) -> ApiResult<ServiceRequest>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let id = path_id(id)?.to_string();
    let sql = format!("SELECT {REQUEST_COLUMNS} FROM service_request WHERE tenant_id = $1 AND request_id = $2");
    let found: Option<ServiceRequest> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(&id).fetch_optional(exec).await?;
    found.ok_or(ApiError::NotFound)
}

/// One request.
#[utoipa::path(get, path = "/api/service-requests/{service_request_id}", tag = "sdk-service-request",
    params(("service_request_id" = String, Path, description = "the request")),
    responses((status = 200, description = "the request", body = Data<ServiceRequest>)))]
async fn get_request(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<ServiceRequest>> {
    Ok(ok(find(&state.db.read, &ctx.tenant_id, &id).await?))
}

/// A change of an open request: what is absent stays; at least one field.
#[derive(Deserialize, ToSchema)]
struct ServiceRequestUpdate {
    #[schema(max_length = 300)]
    title: Option<String>,
    /// Blank clears it.
    #[schema(max_length = 8000)]
    description: Option<String>,
    #[schema(minimum = 0, maximum = 1000)]
    priority: Option<i64>,
    /// Moves the request to another queue of the tenant.
    #[schema(format = "uuid")]
    queue_id: Option<String>,
}

/// Changes an open request's title, description, priority or queue (what
/// is absent stays; at least one is given). A closed request is 409:
/// reopen it first.
#[utoipa::path(patch, path = "/api/service-requests/{service_request_id}", tag = "sdk-service-request",
    params(("service_request_id" = String, Path, description = "the request")), request_body = ServiceRequestUpdate,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/service-requests/queues", { "tenant_id": "{tenant_id}", "name": "race-{unique}" }], ["POST", "/api/service-requests", { "queue_id": "{queue_id}", "title": "race" }]], "params": { "service_request_id": "{request_id}" }, "body": { "priority": 7, "title": "race 2" } }))),
    responses((status = 200, description = "the request", body = Data<ServiceRequest>)))]
async fn update_request(
    State(state): State<AppState>,
    Tenant(ctx): Tenant,
    Path(id): Path<String>,
    body: Body<ServiceRequestUpdate>,
) -> ApiResult<Data<ServiceRequest>> {
    let mut tx = state.db.begin().await?;
    // Another tenant's request is not found, whatever the body.
    let id = find(&mut *tx, &ctx.tenant_id, &id).await?.request_id.to_string();
    let body = body.checked()?;
    let mut check = Check::new();
    let title = match &body.title {
        None => None,
        Some(_) => Some(check.required("title", &body.title)),
    };
    let set_description = i64::from(body.description.is_some());
    let description = Check::optional(&body.description);
    let priority = body.priority;
    let queue = canonical_uuid_opt(&body.queue_id);
    if title.is_none() && set_description == 0 && priority.is_none() && queue.is_none() {
        check.fail("give at least one of: title, description, priority, queue_id");
    }
    if let Some(q) = &queue {
        let known: Option<String> = sqlx::query_scalar("SELECT queue_id FROM service_request_queue WHERE tenant_id = $1 AND queue_id = $2")
            .bind(&ctx.tenant_id)
            .bind(q)
            .fetch_optional(&mut *tx)
            .await?;
        if known.is_none() {
            check.fail("queue_id is not a queue of this tenant");
        }
    }
    check.finish()?;
    let sql = format!(
        "UPDATE service_request SET title = COALESCE($1, title), description = CASE WHEN $2 = 1 THEN $3 ELSE description END, \
         priority = COALESCE($4, priority), queue_id = COALESCE($5, queue_id) WHERE tenant_id = $6 AND request_id = $7 AND status = 'open' \
         RETURNING {REQUEST_COLUMNS}"
    );
    let changed: Option<ServiceRequest> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&title)
        .bind(set_description)
        .bind(&description)
        .bind(priority)
        .bind(&queue)
        .bind(&ctx.tenant_id)
        .bind(&id)
        .fetch_optional(&mut *tx)
        .await?;
    let changed = REQUEST.settle(&mut tx, &ctx.tenant_id, &id, changed, "only an open request can be changed").await?;
    let fields: Vec<&str> =
        [("title", title.is_some()), ("description", set_description == 1), ("priority", priority.is_some()), ("queue_id", queue.is_some())]
            .into_iter()
            .filter_map(|(f, given)| given.then_some(f))
            .collect();
    let payload = json!({ "request_id": changed.request_id, "queue_id": changed.queue_id, "fields": fields, "priority": changed.priority });
    audit::record(&mut tx, &ctx, events::SERVICE_REQUEST_UPDATED, payload).await?;
    tx.commit().await?;
    Ok(ok(changed))
}

#[derive(Deserialize, ToSchema)]
struct CloseServiceRequest {
    #[schema(max_length = 2000)]
    resolution: Option<String>,
}

/// A service request as guarded writes name it.
const REQUEST: Stateful = Stateful { noun: "request", table: "service_request", key: "request_id", state: "status" };

/// Closes an open request; 409 when it is closed already.
#[utoipa::path(post, path = "/api/service-requests/{service_request_id}/close", tag = "sdk-service-request",
    params(("service_request_id" = String, Path, description = "the request")), request_body = CloseServiceRequest,
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/api/service-requests/queues", { "tenant_id": "{tenant_id}", "name": "race-{unique}" }], ["POST", "/api/service-requests", { "queue_id": "{queue_id}", "title": "race" }]], "params": { "service_request_id": "{request_id}" }, "body": {} }))),
    responses((status = 200, description = "the request, closed", body = Data<ServiceRequest>)))]
async fn close_request(
    State(state): State<AppState>,
    Tenant(ctx): Tenant,
    Path(id): Path<String>,
    body: Body<CloseServiceRequest>,
) -> ApiResult<Data<ServiceRequest>> {
    let mut tx = state.db.begin().await?;
    let id = path_id(&id)?.to_string();
    // Another tenant's request is not found, whatever the body.
    REQUEST.state_of(&mut tx, &ctx.tenant_id, &id).await?.ok_or(ApiError::NotFound)?;
    let resolution = Check::optional(&body.checked()?.resolution);
    let sql = format!(
        "UPDATE service_request SET status = 'closed', resolution = $3, closed_at = $4 WHERE tenant_id = $1 AND request_id = $2 AND status = 'open' \
         RETURNING {REQUEST_COLUMNS}"
    );
    let closed: Option<ServiceRequest> =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).bind(&resolution).bind(db::now()).fetch_optional(&mut *tx).await?;
    let closed = REQUEST.settle(&mut tx, &ctx.tenant_id, &id, closed, "only an open request can be closed").await?;
    audit::record(&mut tx, &ctx, events::SERVICE_REQUEST_CLOSED, json!({ "request_id": closed.request_id, "queue_id": closed.queue_id })).await?;
    tx.commit().await?;
    Ok(ok(closed))
}

/// Reopens a closed request: `open` again, its resolution and close time
/// cleared (the close's event keeps them); 409 when it is open.
#[utoipa::path(post, path = "/api/service-requests/{service_request_id}/reopen", tag = "sdk-service-request",
    params(("service_request_id" = String, Path, description = "the request")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/api/service-requests/queues", { "tenant_id": "{tenant_id}", "name": "race-{unique}" }], ["POST", "/api/service-requests", { "queue_id": "{queue_id}", "title": "race" }], ["POST", "/api/service-requests/{request_id}/close", {}]], "params": { "service_request_id": "{request_id}" } }))),
    responses((status = 200, description = "the request, open", body = Data<ServiceRequest>)))]
async fn reopen_request(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<ServiceRequest>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    let sql = format!(
        "UPDATE service_request SET status = 'open', resolution = NULL, closed_at = NULL WHERE tenant_id = $1 AND request_id = $2 AND status = 'closed' \
         RETURNING {REQUEST_COLUMNS}"
    );
    let reopened: Option<ServiceRequest> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&mut *tx).await?;
    let reopened = REQUEST.settle(&mut tx, &ctx.tenant_id, &id, reopened, "only a closed request can be reopened").await?;
    audit::record(&mut tx, &ctx, events::SERVICE_REQUEST_REOPENED, json!({ "request_id": reopened.request_id, "queue_id": reopened.queue_id })).await?;
    tx.commit().await?;
    Ok(ok(reopened))
}
