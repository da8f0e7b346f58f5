//! sdk-incident: incidents a tenant opens, owns and works to resolution.
//! An incident is `open`; it is `acknowledged` by whoever takes it on,
//! `escalated` when it needs more than that, and `resolved` from any of
//! those, for good. An escalated incident is acknowledged again by whoever
//! it reached; any other move is 409.

use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(open, list)).routes(routes!(set_status))
}

stored_enum! {
    /// How bad an incident is.
    #[schema(as = IncidentSeverity)]
    enum Severity { Critical = "critical", High = "high", Medium = "medium", Low = "low" }
}

stored_enum! {
    /// Where an incident is in its life.
    #[schema(as = IncidentStatus)]
    enum Status { Open = "open", Acknowledged = "acknowledged", Escalated = "escalated", Resolved = "resolved" }
}

/// The statuses an incident in `from` may move to.
fn next(from: Status) -> &'static [Status] {
    match from {
        Status::Open => &[Status::Acknowledged, Status::Escalated, Status::Resolved],
        Status::Acknowledged => &[Status::Escalated, Status::Resolved],
        Status::Escalated => &[Status::Acknowledged, Status::Resolved],
        Status::Resolved => &[],
    }
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
struct Incident {
    incident_id: Id,
    title: String,
    description: Option<String>,
    severity: Severity,
    status: Status,
    owner_persona_id: Option<String>,
    /// The note given with the last status change.
    status_note: Option<String>,
    created_at: Timestamp,
    updated_at: Timestamp,
    resolved_at: Option<Timestamp>,
}

const COLUMNS: &str = "incident_id, title, description, severity, status, owner_persona_id, status_note, created_at, updated_at, resolved_at";

/// The incident in the search index (sdk-search), in the write's transaction.
async fn index(tx: &mut Tx, tenant_id: &str, i: &Incident) -> ApiResult<()> {
    let body = [i.description.as_deref().unwrap_or_default(), i.severity.as_str(), i.status.as_str(), i.status_note.as_deref().unwrap_or_default()].join(" ");
    hub_kernel::search::index(tx, tenant_id, "incident", &i.incident_id.to_string(), &i.title, &body, &i.updated_at.to_string()).await
}

#[derive(Deserialize, ToSchema)]
struct NewIncident {
    #[schema(max_length = 300)]
    title: String,
    severity: Severity,
    #[schema(max_length = 8000)]
    description: Option<String>,
    /// A persona of the tenant who owns it.
    #[schema(format = "uuid")]
    owner_persona_id: Option<String>,
}

/// Opens an incident.
#[utoipa::path(post, path = "/api/incidents", tag = "sdk-incident", request_body = NewIncident,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "body": { "title": "race", "severity": "low" } }))),
    responses((status = 201, description = "the incident, open", body = Data<Incident>)))]
async fn open(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewIncident>) -> ApiResult<Created<Incident>> {
    let body = body.checked()?;
    let title = body.title.trim();
    let severity = body.severity;
    let description = Check::optional(&body.description);
    let owner = Check::optional(&body.owner_persona_id);
    let mut tx = state.db.begin().await?;
    if let Some(o) = &owner
        && !hub_identity::personas::exists_in_tenant(&mut *tx, &ctx.tenant_id, o).await?
    {
        return Err(ApiError::invalid("owner_persona_id is not a persona of this tenant"));
    }
    let now = db::now();
    let sql = format!(
        "INSERT INTO incident_incident (incident_id, tenant_id, title, description, severity, status, owner_persona_id, created_by, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, 'open', $6, $7, $8, $8) RETURNING {COLUMNS}"
    );
    let incident: Incident = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(title)
        .bind(&description)
        .bind(severity)
        .bind(&owner)
        .bind(audit::actor_of(&ctx).1)
        .bind(&now)
        .fetch_one(&mut *tx)
        .await?;
    index(&mut tx, &ctx.tenant_id, &incident).await?;
    let payload = json!({ "incident_id": incident.incident_id, "severity": severity, "owner_persona_id": owner });
    audit::record(&mut tx, &ctx, events::INCIDENT_OPENED, payload).await?;
    tx.commit().await?;
    Ok(created(incident))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = IncidentStatusChange)]
struct StatusChange {
    /// `acknowledged`, `escalated` or `resolved`, as the state machine
    /// allows (409 otherwise).
    status: Status,
    /// What was done or found.
    #[schema(max_length = 2000)]
    note: Option<String>,
}

/// An incident as its status changes lock it.
const INCIDENT: Stateful = Stateful { noun: "incident", table: "incident_incident", key: "incident_id", state: "status" };

/// Moves an incident along its state machine.
#[utoipa::path(post, path = "/api/incidents/{incident_id}/status", tag = "sdk-incident", request_body = StatusChange,
    params(("incident_id" = String, Path, description = "the incident")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/api/incidents", { "title": "race", "severity": "low" }]],
        "body": { "status": "acknowledged" } }))),
    responses((status = 200, description = "the incident in its new status", body = Data<Incident>)))]
async fn set_status(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<StatusChange>) -> ApiResult<Data<Incident>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    // The incident's row is locked until the change is committed: changes
    // of one incident check its status one after another, so the state
    // machine below reads what the previous change committed.
    let current: Status = INCIDENT.lock(&mut tx, &ctx.tenant_id, &id).await?.ok_or(ApiError::NotFound)?;
    let body = body.checked()?;
    let status = body.status;
    let note = Check::optional(&body.note);
    if !next(current).contains(&status) {
        return Err(ApiError::Conflict(format!("an incident {current} cannot become {status}")));
    }
    let now = db::now();
    let resolved_at = matches!(body.status, Status::Resolved).then(|| now.clone());
    let sql = format!(
        "UPDATE incident_incident SET status = $3, status_note = $4, updated_at = $5, resolved_at = $6 WHERE incident_id = $1 AND status = $2 \
         RETURNING {COLUMNS}"
    );
    let incident: Incident =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&id).bind(current).bind(status).bind(&note).bind(&now).bind(&resolved_at).fetch_one(&mut *tx).await?;
    index(&mut tx, &ctx.tenant_id, &incident).await?;
    let event = match body.status {
        Status::Acknowledged => events::INCIDENT_ACKNOWLEDGED,
        Status::Escalated => events::INCIDENT_ESCALATED,
        Status::Open | Status::Resolved => events::INCIDENT_RESOLVED,
    };
    audit::record(&mut tx, &ctx, event, json!({ "incident_id": id, "severity": incident.severity, "from": current, "to": status })).await?;
    tx.commit().await?;
    Ok(ok(incident))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct Filter {
    /// The caller's tenant.
    #[param(format = "uuid")]
    tenant_id: String,
    #[param(inline)]
    status: Option<Status>,
    #[param(inline)]
    severity: Option<Severity>,
    #[param(format = "uuid")]
    owner_persona_id: Option<String>,
}

/// The tenant's incidents, most recently updated first.
#[utoipa::path(get, path = "/api/incidents", tag = "sdk-incident", params(Filter, Page),
    responses((status = 200, description = "one page of incidents", body = ListOf<Incident>)))]
async fn list(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<Filter>, page: Page) -> ApiResult<ListOf<Incident>> {
    ctx.check_tenant(Some(&q.tenant_id))?;
    let status = q.status.map_or("", Status::as_str);
    let severity = q.severity.map_or("", Severity::as_str);
    let owner = canonical_uuid_opt(&q.owner_persona_id).unwrap_or_default();
    let listing = Listing {
        table: "incident_incident",
        columns: COLUMNS,
        filter: "tenant_id = $1 AND ($2 = '' OR status = $2) AND ($3 = '' OR severity = $3) AND ($4 = '' OR owner_persona_id = $4)",
        order: "updated_at DESC, incident_id DESC",
    };
    page.list::<Incident>(&state.db.read, &listing, &[&ctx.tenant_id, status, severity, &owner]).await
}
