//! sdk-incident: incidents a tenant opens, owns and works to resolution.
//! An incident is `open`; it is `acknowledged` by whoever takes it on,
//! `escalated` when it needs more than that, and `resolved` from any of
//! those, for good. An escalated incident is acknowledged again by whoever
//! it reached; any other move is 409. Its title, description and severity
//! change, and it is assigned to an owner, until it is resolved (409
//! after). Its notes are the comments written on it and its status
//! changes, in the order they happened.

use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(open, list))
        .routes(routes!(get_incident, update))
        .routes(routes!(set_status))
        .routes(routes!(assign))
        .routes(routes!(add_note, list_notes))
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
    add_note_row(&mut tx, &ctx, &id, NoteKind::Status, note.as_deref(), Some((current, status))).await?;
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

async fn find(exec: &mut Tx, tenant_id: &str, id: &str) -> ApiResult<Incident> {
    let sql = format!("SELECT {COLUMNS} FROM incident_incident WHERE tenant_id = $1 AND incident_id = $2");
    let found: Option<Incident> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(id).fetch_optional(&mut **exec).await?;
    found.ok_or(ApiError::NotFound)
}

/// One incident.
#[utoipa::path(get, path = "/api/incidents/{incident_id}", tag = "sdk-incident", params(("incident_id" = String, Path, description = "the incident")),
    responses((status = 200, description = "the incident", body = Data<Incident>)))]
async fn get_incident(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Incident>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.read.begin().await?;
    let incident = find(&mut tx, &ctx.tenant_id, &id).await?;
    tx.commit().await?;
    Ok(ok(incident))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = IncidentUpdate)]
struct Update {
    #[schema(max_length = 300)]
    title: Option<String>,
    #[schema(max_length = 8000)]
    description: Option<String>,
    severity: Option<Severity>,
}

/// Changes an incident's title, description or severity (what is absent
/// stays; at least one is given). A resolved incident is not changed (409).
#[utoipa::path(patch, path = "/api/incidents/{incident_id}", tag = "sdk-incident", request_body = Update,
    params(("incident_id" = String, Path, description = "the incident")),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/incidents", { "title": "race", "severity": "low" }]],
        "body": { "severity": "high", "description": "race" } }))),
    responses((status = 200, description = "the incident", body = Data<Incident>)))]
async fn update(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<Update>) -> ApiResult<Data<Incident>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    INCIDENT.state_of(&mut tx, &ctx.tenant_id, &id).await?.ok_or(ApiError::NotFound)?;
    let body = body.checked()?;
    let title = Check::optional(&body.title);
    let description = Check::optional(&body.description);
    let severity = body.severity;
    if title.is_none() && description.is_none() && severity.is_none() {
        return Err(ApiError::invalid("give at least one of title, description, severity"));
    }
    // The guard decides: a resolution committed meanwhile leaves nothing
    // to change (409).
    let sql = format!(
        "UPDATE incident_incident SET title = COALESCE($3, title), description = COALESCE($4, description), severity = COALESCE($5, severity), \
         updated_at = $6 WHERE tenant_id = $1 AND incident_id = $2 AND status <> 'resolved' RETURNING {COLUMNS}"
    );
    let changed: Option<Incident> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&ctx.tenant_id)
        .bind(&id)
        .bind(&title)
        .bind(&description)
        .bind(severity)
        .bind(db::now())
        .fetch_optional(&mut *tx)
        .await?;
    let incident = INCIDENT.settle(&mut tx, &ctx.tenant_id, &id, changed, "a resolved incident is not changed").await?;
    index(&mut tx, &ctx.tenant_id, &incident).await?;
    let payload = json!({ "incident_id": id, "title_changed": title.is_some(), "description_changed": description.is_some(), "severity": severity });
    audit::record(&mut tx, &ctx, events::INCIDENT_UPDATED, payload).await?;
    tx.commit().await?;
    Ok(ok(incident))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = IncidentAssignment)]
struct Assignment {
    /// A persona of the tenant who owns the incident from now on.
    #[schema(format = "uuid")]
    owner_persona_id: String,
}

/// Gives an incident to an owner. Assigning it to the persona who owns it
/// already changes nothing and records no event; a resolved incident is
/// not reassigned (409).
#[utoipa::path(post, path = "/api/incidents/{incident_id}/assign", tag = "sdk-incident", request_body = Assignment,
    params(("incident_id" = String, Path, description = "the incident")),
    extensions(("x-concurrency" = json!({ "outcome": "same-answer", "given": [["POST", "/api/incidents", { "title": "race", "severity": "low" }]],
        "body": { "owner_persona_id": "{owner_persona_id}" } }))),
    responses((status = 200, description = "the incident with its owner", body = Data<Incident>)))]
async fn assign(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<Assignment>) -> ApiResult<Data<Incident>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    // The incident's row is locked until the change is committed:
    // assignments of one incident read its owner one after another.
    let current: Status = INCIDENT.lock(&mut tx, &ctx.tenant_id, &id).await?.ok_or(ApiError::NotFound)?;
    let body = body.checked()?;
    let owner = canonical_uuid(&body.owner_persona_id);
    if !hub_identity::personas::exists_in_tenant(&mut *tx, &ctx.tenant_id, &owner).await? {
        return Err(ApiError::invalid("owner_persona_id is not a persona of this tenant"));
    }
    if current == Status::Resolved {
        return Err(ApiError::Conflict("the incident is resolved: a resolved incident is not reassigned".into()));
    }
    let before = find(&mut tx, &ctx.tenant_id, &id).await?;
    if before.owner_persona_id.as_deref() == Some(owner.as_str()) {
        return Ok(ok(before));
    }
    let sql = format!("UPDATE incident_incident SET owner_persona_id = $3, updated_at = $4 WHERE tenant_id = $1 AND incident_id = $2 RETURNING {COLUMNS}");
    let incident: Incident = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).bind(&owner).bind(db::now()).fetch_one(&mut *tx).await?;
    index(&mut tx, &ctx.tenant_id, &incident).await?;
    audit::record(&mut tx, &ctx, events::INCIDENT_ASSIGNED, json!({ "incident_id": id, "from": before.owner_persona_id, "to": owner })).await?;
    tx.commit().await?;
    Ok(ok(incident))
}

stored_enum! {
    /// What a note records: a comment written on the incident, or one of
    /// its status changes.
    #[schema(as = IncidentNoteKind)]
    enum NoteKind { Comment = "comment", Status = "status" }
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = IncidentNote)]
struct Note {
    note_id: Id,
    incident_id: Id,
    kind: NoteKind,
    /// The comment, or the note given with a status change.
    body: Option<String>,
    /// A status change's status before...
    from_status: Option<Status>,
    /// ...and after.
    to_status: Option<Status>,
    /// Who wrote it: the person, or the persona of a key.
    author: String,
    created_at: Timestamp,
}

const NOTE_COLUMNS: &str = "note_id, incident_id, kind, body, from_status, to_status, author, created_at";

/// Adds a note to an incident of the tenant in the caller's transaction
/// (`None` when the tenant has no such incident).
async fn add_note_row(
    tx: &mut Tx,
    ctx: &TenantCtx,
    incident_id: &str,
    kind: NoteKind,
    body: Option<&str>,
    change: Option<(Status, Status)>,
) -> ApiResult<Option<Note>> {
    let sql = format!(
        "INSERT INTO incident_note (note_id, tenant_id, incident_id, kind, body, from_status, to_status, author, created_at) \
         SELECT $1, tenant_id, incident_id, $4, $5, $6, $7, $8, $9 FROM incident_incident WHERE tenant_id = $2 AND incident_id = $3 RETURNING {NOTE_COLUMNS}"
    );
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(incident_id)
        .bind(kind)
        .bind(body)
        .bind(change.map(|c| c.0))
        .bind(change.map(|c| c.1))
        .bind(audit::actor_of(ctx).1)
        .bind(db::now())
        .fetch_optional(&mut **tx)
        .await?)
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewIncidentNote)]
struct NewNote {
    /// The comment.
    #[schema(max_length = 4000)]
    body: String,
}

/// Writes a comment on an incident (resolved ones too: a post-mortem).
#[utoipa::path(post, path = "/api/incidents/{incident_id}/notes", tag = "sdk-incident", request_body = NewNote,
    params(("incident_id" = String, Path, description = "the incident")),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/incidents", { "title": "race", "severity": "low" }]],
        "body": { "body": "race" } }))),
    responses((status = 201, description = "the note", body = Data<Note>)))]
async fn add_note(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<NewNote>) -> ApiResult<Created<Note>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    INCIDENT.state_of(&mut tx, &ctx.tenant_id, &id).await?.ok_or(ApiError::NotFound)?;
    let body = body.checked()?;
    let text = body.body.trim();
    if text.is_empty() {
        return Err(ApiError::invalid("body is required"));
    }
    let note = add_note_row(&mut tx, &ctx, &id, NoteKind::Comment, Some(text), None).await?.ok_or(ApiError::NotFound)?;
    audit::record(&mut tx, &ctx, events::INCIDENT_NOTE_ADDED, json!({ "incident_id": id, "note_id": note.note_id })).await?;
    tx.commit().await?;
    Ok(created(note))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct NoteFilter {
    #[param(inline)]
    kind: Option<NoteKind>,
}

/// An incident's notes, its comments and status changes, oldest first.
#[utoipa::path(get, path = "/api/incidents/{incident_id}/notes", tag = "sdk-incident",
    params(("incident_id" = String, Path, description = "the incident"), NoteFilter, Page),
    responses((status = 200, description = "one page of notes", body = ListOf<Note>)))]
async fn list_notes(
    State(state): State<AppState>,
    Tenant(ctx): Tenant,
    Path(id): Path<String>,
    Params(q): Params<NoteFilter>,
    page: Page,
) -> ApiResult<ListOf<Note>> {
    let id = path_id(&id)?.to_string();
    let known: Option<i64> = sqlx::query_scalar("SELECT 1 FROM incident_incident WHERE tenant_id = $1 AND incident_id = $2")
        .bind(&ctx.tenant_id)
        .bind(&id)
        .fetch_optional(&state.db.read)
        .await?;
    known.ok_or(ApiError::NotFound)?;
    let kind = q.kind.map_or("", NoteKind::as_str);
    let listing = Listing {
        table: "incident_note",
        columns: NOTE_COLUMNS,
        filter: "tenant_id = $1 AND incident_id = $2 AND ($3 = '' OR kind = $3)",
        order: "created_at ASC, note_id ASC",
    };
    page.list::<Note>(&state.db.read, &listing, &[&ctx.tenant_id, &id, kind]).await
}
