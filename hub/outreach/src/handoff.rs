//! sdk-handoff: a deal of the tenant's CRM (sdk-crm deals) handed from
//! one persona of the tenant to another.
//! A handoff is `pending` until its receiver answers: `accepted` or
//! `declined`; an accepted handoff becomes `completed`. `declined` and
//! `completed` are final; any other move is 409.

use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create, list)).routes(routes!(get_handoff)).routes(routes!(set_status))
}

/// The statuses a handoff in `from` may move to.
fn next(from: Status) -> &'static [Status] {
    match from {
        Status::Pending => &[Status::Accepted, Status::Declined],
        Status::Accepted => &[Status::Completed],
        Status::Declined | Status::Completed => &[],
    }
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
struct Handoff {
    handoff_id: Id,
    deal_id: Id,
    from_persona_id: Id,
    to_persona_id: Id,
    notes: Option<String>,
    status: Status,
    /// The reason given with the last status change.
    status_reason: Option<String>,
    created_at: Timestamp,
    updated_at: Timestamp,
}

const COLUMNS: &str = "handoff_id, deal_id, from_persona_id, to_persona_id, notes, status, status_reason, created_at, updated_at";

#[derive(Deserialize, ToSchema)]
struct NewHandoff {
    /// The deal handed over: a deal of the tenant's CRM
    /// (`POST /api/crm/deals`).
    #[schema(format = "uuid")]
    deal_id: String,
    /// A persona of the tenant: who hands the deal over.
    #[schema(format = "uuid")]
    from_persona_id: String,
    /// Another persona of the tenant: who takes it.
    #[schema(format = "uuid")]
    to_persona_id: String,
    #[schema(max_length = 4000)]
    notes: Option<String>,
}

/// A UUID the body's schema has checked, in its canonical form.
fn uuid_of(checked: &str) -> ApiResult<String> {
    path_id(checked.trim()).map(|u| u.to_string())
}

stored_enum! {
    /// Where a handoff is in its life.
    #[schema(as = HandoffStatus)]
    enum Status { Pending = "pending", Accepted = "accepted", Declined = "declined", Completed = "completed" }
}

/// Hands a deal over; the handoff is `pending`.
#[utoipa::path(post, path = "/api/handoffs", tag = "sdk-handoff", request_body = NewHandoff,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/personas", { "kind": "human" }], ["POST", "/api/crm/deals", { "name": "race", "company": "race" }]], "body": { "deal_id": "{deal_id}", "from_persona_id": "{owner_persona_id}", "to_persona_id": "{persona_id}" } }))),
    responses((status = 201, description = "the handoff, pending", body = Data<Handoff>)))]
async fn create(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewHandoff>) -> ApiResult<Created<Handoff>> {
    let body = body.checked()?;
    let (deal, from, to) = (uuid_of(&body.deal_id)?, uuid_of(&body.from_persona_id)?, uuid_of(&body.to_persona_id)?);
    if from == to {
        return Err(ApiError::invalid("to_persona_id must differ from from_persona_id"));
    }
    let notes = Check::optional(&body.notes);
    let mut tx = state.db.begin().await?;
    let mut check = Check::new();
    // The deal is the tenant's CRM's (sdk-crm deals), of any stage.
    let deal_found: Option<i64> =
        sqlx::query_scalar("SELECT 1 FROM crm_deal WHERE tenant_id = $1 AND deal_id = $2").bind(&ctx.tenant_id).bind(&deal).fetch_optional(&mut *tx).await?;
    if deal_found.is_none() {
        check.fail("deal_id is not a deal of this tenant");
    }
    for (field, persona) in [("from_persona_id", &from), ("to_persona_id", &to)] {
        if !hub_identity::personas::exists_in_tenant(&mut *tx, &ctx.tenant_id, persona).await? {
            check.fail(format!("{field} is not a persona of this tenant"));
        }
    }
    check.finish()?;
    let now = db::now();
    let sql = format!(
        "INSERT INTO handoff_handoff (handoff_id, tenant_id, deal_id, from_persona_id, to_persona_id, notes, status, created_by, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $8, $8) RETURNING {COLUMNS}"
    );
    let handoff: Handoff = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(&deal)
        .bind(&from)
        .bind(&to)
        .bind(&notes)
        .bind(audit::actor_of(&ctx).1)
        .bind(&now)
        .fetch_one(&mut *tx)
        .await?;
    let payload = json!({ "handoff_id": handoff.handoff_id, "deal_id": deal, "from_persona_id": from, "to_persona_id": to });
    audit::record(&mut tx, &ctx, events::HANDOFF_CREATED, payload).await?;
    tx.commit().await?;
    Ok(created(handoff))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = HandoffStatusChange)]
struct StatusChange {
    /// `accepted` or `declined` (from `pending`), `completed` (from
    /// `accepted`); 409 otherwise.
    status: Status,
    /// Why.
    #[schema(max_length = 2000)]
    reason: Option<String>,
}

/// A handoff as its status changes lock it.
const HANDOFF: Stateful = Stateful { noun: "handoff", table: "handoff_handoff", key: "handoff_id", state: "status" };

/// Moves a handoff along its state machine.
#[utoipa::path(post, path = "/api/handoffs/{handoff_id}/status", tag = "sdk-handoff", request_body = StatusChange,
    params(("handoff_id" = String, Path, description = "the handoff")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/api/personas", { "kind": "human" }], ["POST", "/api/crm/deals", { "name": "race", "company": "race" }], ["POST", "/api/handoffs", { "deal_id": "{deal_id}", "from_persona_id": "{owner_persona_id}", "to_persona_id": "{persona_id}" }]], "body": { "status": "accepted" } }))),
    responses((status = 200, description = "the handoff in its new status", body = Data<Handoff>)))]
async fn set_status(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<StatusChange>) -> ApiResult<Data<Handoff>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    // The handoff's row is locked until the change is committed: changes
    // of one handoff check its status one after another, so the state
    // machine below reads what the previous change committed.
    let current: Status = HANDOFF.lock(&mut tx, &ctx.tenant_id, &id).await?.ok_or(ApiError::NotFound)?;
    let body = body.checked()?;
    let status = body.status;
    let reason = Check::optional(&body.reason);
    if !next(current).contains(&status) {
        return Err(ApiError::Conflict(format!("a {current} handoff cannot become {status}")));
    }
    let sql = format!("UPDATE handoff_handoff SET status = $3, status_reason = $4, updated_at = $5 WHERE handoff_id = $1 AND status = $2 RETURNING {COLUMNS}");
    let handoff: Handoff =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&id).bind(current).bind(status).bind(&reason).bind(db::now()).fetch_one(&mut *tx).await?;
    let event = match body.status {
        Status::Accepted => events::HANDOFF_ACCEPTED,
        Status::Declined => events::HANDOFF_DECLINED,
        Status::Pending | Status::Completed => events::HANDOFF_COMPLETED,
    };
    audit::record(&mut tx, &ctx, event, json!({ "handoff_id": id, "deal_id": handoff.deal_id, "from": current, "to": status })).await?;
    tx.commit().await?;
    Ok(ok(handoff))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct Filter {
    /// The caller's tenant.
    #[param(format = "uuid")]
    tenant_id: String,
    #[param(inline)]
    status: Option<Status>,
    #[param(format = "uuid")]
    deal_id: Option<String>,
}

/// The tenant's handoffs, most recently updated first.
#[utoipa::path(get, path = "/api/handoffs", tag = "sdk-handoff", params(Filter, Page),
    responses((status = 200, description = "one page of handoffs", body = ListOf<Handoff>)))]
async fn list(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<Filter>, page: Page) -> ApiResult<ListOf<Handoff>> {
    ctx.check_tenant(Some(&q.tenant_id))?;
    let status = q.status.map_or("", Status::as_str);
    let deal = canonical_uuid_opt(&q.deal_id).unwrap_or_default();
    let listing = Listing {
        table: "handoff_handoff",
        columns: COLUMNS,
        filter: "tenant_id = $1 AND ($2 = '' OR status = $2) AND ($3 = '' OR deal_id = $3)",
        order: "updated_at DESC, handoff_id DESC",
    };
    page.list::<Handoff>(&state.db.read, &listing, &[&ctx.tenant_id, status, &deal]).await
}

/// One handoff.
#[utoipa::path(get, path = "/api/handoffs/{handoff_id}", tag = "sdk-handoff", params(("handoff_id" = String, Path, description = "the handoff")),
    responses((status = 200, description = "the handoff", body = Data<Handoff>)))]
async fn get_handoff(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Handoff>> {
    let id = path_id(&id)?.to_string();
    let sql = format!("SELECT {COLUMNS} FROM handoff_handoff WHERE tenant_id = $1 AND handoff_id = $2");
    let found: Option<Handoff> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&state.db.read).await?;
    Ok(ok(found.ok_or(ApiError::NotFound)?))
}
