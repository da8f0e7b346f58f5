//! sdk-event: events of a tenant, the tickets issued for them, each with a
//! `qr_token` shown once at issue (only its SHA-256 is stored, as for an
//! API key), and check-in by that token: `issued` → `used`. The check-in
//! row's UNIQUE ticket_id blocks a second check-in of one ticket (409),
//! however many scanners race.

use hub_identity::personas;
use hub_kernel::{crypto, prelude::*};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_event, list_events))
        .routes(routes!(get_event, update_event))
        .routes(routes!(check_ins))
        .routes(routes!(issue, list_tickets))
        .routes(routes!(get_ticket))
        .routes(routes!(check_in))
        .routes(routes!(void))
}

stored_enum! {
    /// Where a ticket is: issued, used at its check-in, or voided.
    #[schema(as = TicketStatus)]
    pub enum TicketStatus { Issued = "issued", Used = "used", Voided = "voided" }
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = TicketedEvent)]
struct Event {
    event_id: Id,
    name: String,
    venue: Option<String>,
    starts_at: Timestamp,
    ends_at: Option<Timestamp>,
    /// Tickets that may be issued (voided ones not counted); null: no limit.
    capacity: Option<i64>,
    created_by: String,
    created_at: Timestamp,
}

const EVENT_COLUMNS: &str = "event_id, name, venue, starts_at, ends_at, capacity, created_by, created_at";

#[derive(Debug, FromRow, Serialize, ToSchema)]
struct Ticket {
    ticket_id: Id,
    event_id: Id,
    holder_name: Option<String>,
    contact_id: Option<Id>,
    status: TicketStatus,
    issued_at: Timestamp,
    checked_in_at: Option<Timestamp>,
    voided_at: Option<Timestamp>,
}

const TICKET_COLUMNS: &str = "ticket_id, event_id, holder_name, contact_id, status, issued_at, checked_in_at, voided_at";

/// A ticket at issue: the one answer carrying its `qr_token`.
#[derive(Serialize, ToSchema)]
struct IssuedTicket {
    #[serde(flatten)]
    ticket: Ticket,
    /// The token the ticket's QR code encodes; shown only here.
    qr_token: String,
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = TicketCheckIn)]
struct CheckIn {
    checkin_id: Id,
    ticket_id: Id,
    event_id: Id,
    checked_in_by_persona_id: String,
    /// The scanning device; null when the request named none.
    device_uuid: Option<String>,
    checked_in_at: Timestamp,
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewTicketedEvent)]
struct NewEvent {
    #[schema(max_length = 200)]
    name: String,
    #[schema(format = DateTime)]
    starts_at: String,
    /// After `starts_at`.
    #[schema(format = DateTime)]
    ends_at: Option<String>,
    #[schema(max_length = 300)]
    venue: Option<String>,
    /// Tickets that may be issued; no limit when absent.
    #[schema(minimum = 1, maximum = 1000000)]
    capacity: Option<i64>,
}

/// Creates an event tickets are issued for.
#[utoipa::path(post, path = "/api/tickets/events", tag = "sdk-event", request_body = NewEvent,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "body": { "name": "race", "starts_at": "2027-01-01T00:00:00Z", "capacity": 10 } }))),
    responses((status = 201, description = "the event", body = Data<Event>)))]
async fn create_event(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewEvent>) -> ApiResult<Created<Event>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let name = body.name.trim().to_string();
    // The times in their stored form (their schema has checked them).
    let starts = check.optional_expiry("starts_at", &Some(body.starts_at));
    let ends = check.optional_expiry("ends_at", &body.ends_at);
    if let (Some(s), Some(e)) = (&starts, &ends)
        && e <= s
    {
        check.fail("ends_at must be after starts_at");
    }
    let venue = Check::optional(&body.venue);
    let capacity = body.capacity;
    check.finish()?;
    let mut tx = state.db.begin().await?;
    let sql = format!(
        "INSERT INTO event_event (event_id, tenant_id, name, venue, starts_at, ends_at, capacity, created_by, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING {EVENT_COLUMNS}"
    );
    let event: Event = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(&name)
        .bind(&venue)
        .bind(&starts)
        .bind(&ends)
        .bind(capacity)
        .bind(audit::actor_of(&ctx).1)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
    let payload = json!({ "event_id": event.event_id, "starts_at": starts, "capacity": capacity });
    audit::record(&mut tx, &ctx, events::EVENT_CREATED, payload).await?;
    tx.commit().await?;
    Ok(created(event))
}

#[derive(Deserialize, ToSchema)]
struct NewTicket {
    /// An event of the tenant.
    #[schema(format = "uuid")]
    event_id: String,
    #[schema(max_length = 200)]
    holder_name: Option<String>,
    /// A contact of the tenant's CRM.
    #[schema(format = "uuid")]
    contact_id: Option<String>,
}

/// A ticket as guarded writes name it.
const TICKET: Stateful = Stateful { noun: "ticket", table: "event_ticket", key: "ticket_id", state: "status" };

/// An event as the issue of its tickets locks it: the row owns the capacity.
const EVENT: Stateful = Stateful { noun: "event", table: "event_event", key: "event_id", state: "capacity" };

/// Issues a ticket with its `qr_token` (shown only in this answer); 409
/// when the event's capacity is taken.
#[utoipa::path(post, path = "/api/tickets", tag = "sdk-event", request_body = NewTicket,
    extensions(("x-concurrency" = json!({ "outcome": "capacity", "wins": 3, "given": [["POST", "/api/tickets/events", { "name": "race", "starts_at": "2027-01-01T00:00:00Z", "capacity": 3 }]], "body": { "event_id": "{event_id}" } }))),
    responses((status = 201, description = "the ticket and its qr_token", body = Data<IssuedTicket>)))]
async fn issue(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewTicket>) -> ApiResult<Created<IssuedTicket>> {
    let body = body.checked()?;
    let event_id = canonical_uuid(&body.event_id);
    let holder = Check::optional(&body.holder_name);
    let contact = canonical_uuid_opt(&body.contact_id);
    let mut tx = state.db.begin().await?;
    // The event's row is locked until the ticket is committed: issues
    // against one capacity count the tickets one after another.
    let capacity: Option<Option<i64>> = EVENT.lock(&mut tx, &ctx.tenant_id, &event_id).await?;
    let Some(capacity) = capacity else { return Err(ApiError::invalid("event_id is not an event of this tenant")) };
    if let Some(c) = &contact
        && !crate::crm::contact_exists(&mut tx, &ctx.tenant_id, c).await?
    {
        return Err(ApiError::invalid("contact_id is not a contact of this tenant"));
    }
    if let Some(cap) = capacity {
        let issued: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM event_ticket WHERE tenant_id = $1 AND event_id = $2 AND status <> 'voided'")
            .bind(&ctx.tenant_id)
            .bind(&event_id)
            .fetch_one(&mut *tx)
            .await?;
        if issued >= cap {
            return Err(ApiError::Conflict(format!("the event's {cap} tickets are issued")));
        }
    }
    let token = format!("qr_{}", crypto::random_base62(32));
    let sql = format!(
        "INSERT INTO event_ticket (ticket_id, tenant_id, event_id, qr_hash, holder_name, contact_id, status, issued_by, issued_at) \
         VALUES ($1, $2, $3, $4, $5, $6, 'issued', $7, $8) RETURNING {TICKET_COLUMNS}"
    );
    let ticket: Ticket = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(&event_id)
        .bind(crypto::sha256_hex(token.as_bytes()))
        .bind(&holder)
        .bind(&contact)
        .bind(audit::actor_of(&ctx).1)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
    audit::record(&mut tx, &ctx, events::EVENT_TICKET_ISSUED, json!({ "ticket_id": ticket.ticket_id, "event_id": event_id })).await?;
    tx.commit().await?;
    Ok(created(IssuedTicket { ticket, qr_token: token }))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct Filter {
    /// Only the tickets of this event.
    #[param(format = "uuid")]
    event_id: Option<String>,
    /// Only the tickets in this status.
    #[param(inline)]
    status: Option<TicketStatus>,
}

/// The tenant's tickets, most recently issued first (never their tokens).
#[utoipa::path(get, path = "/api/tickets", tag = "sdk-event", params(Filter, Page),
    responses((status = 200, description = "one page of tickets", body = ListOf<Ticket>)))]
async fn list_tickets(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page, Params(q): Params<Filter>) -> ApiResult<ListOf<Ticket>> {
    let event = canonical_uuid_opt(&q.event_id).unwrap_or_default();
    let status = q.status.map(TicketStatus::as_str).unwrap_or_default();
    let listing = Listing {
        table: "event_ticket",
        columns: TICKET_COLUMNS,
        filter: "tenant_id = $1 AND ($2 = '' OR event_id = $2) AND ($3 = '' OR status = $3)",
        order: "issued_at DESC, ticket_id DESC",
    };
    page.list::<Ticket>(&state.db.read, &listing, &[&ctx.tenant_id, &event, status]).await
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewTicketCheckIn)]
struct NewCheckIn {
    /// The token of the ticket's QR code.
    qr_token: String,
    /// The persona checking the holder in (a persona of the tenant).
    #[schema(format = "uuid")]
    checked_in_by_persona_id: String,
    /// The scanning device, if any.
    #[schema(format = "uuid")]
    device_uuid: Option<String>,
}

/// Checks a ticket in by its `qr_token`: `issued` → `used`. 404 for a token
/// of no ticket of the tenant; 409 for a ticket used or voided already.
#[utoipa::path(post, path = "/api/tickets/check-in", tag = "sdk-event", request_body = NewCheckIn,
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/api/tickets/events", { "name": "race", "starts_at": "2027-01-01T00:00:00Z" }], ["POST", "/api/tickets", { "event_id": "{event_id}" }]], "body": { "qr_token": "{qr_token}", "checked_in_by_persona_id": "{persona_id}" } }))),
    responses((status = 201, description = "the check-in", body = Data<CheckIn>),
        (status = 404, description = "NotFound: no ticket of the tenant has this QR token", body = ErrorBody)))]
async fn check_in(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewCheckIn>) -> ApiResult<Created<CheckIn>> {
    let body = body.checked()?;
    let token = body.qr_token.trim();
    let by = canonical_uuid(&body.checked_in_by_persona_id);
    let device = canonical_uuid_opt(&body.device_uuid);
    let mut tx = state.db.begin().await?;
    if !personas::exists_in_tenant(&mut *tx, &ctx.tenant_id, &by).await? {
        return Err(ApiError::invalid("checked_in_by_persona_id is not a persona of this tenant"));
    }
    let sql = format!("SELECT {TICKET_COLUMNS} FROM event_ticket WHERE tenant_id = $1 AND qr_hash = $2");
    let ticket: Option<Ticket> =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(crypto::sha256_hex(token.as_bytes())).fetch_optional(&mut *tx).await?;
    let ticket = ticket.ok_or(ApiError::NotFound)?;
    if ticket.status == TicketStatus::Voided {
        return Err(ApiError::Conflict("the ticket is voided".into()));
    }
    let now = db::now();
    let checkin: Option<CheckIn> = sqlx::query_as(
        "INSERT INTO event_checkin (checkin_id, tenant_id, ticket_id, event_id, checked_in_by_persona_id, device_uuid, checked_in_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (ticket_id) DO NOTHING \
         RETURNING checkin_id, ticket_id, event_id, checked_in_by_persona_id, device_uuid, checked_in_at",
    )
    .bind(db::new_id())
    .bind(&ctx.tenant_id)
    .bind(ticket.ticket_id)
    .bind(ticket.event_id)
    .bind(&by)
    .bind(&device)
    .bind(&now)
    .fetch_optional(&mut *tx)
    .await?;
    let checkin = checkin.ok_or_else(|| ApiError::Conflict("the ticket is checked in already".into()))?;
    let used = sqlx::query("UPDATE event_ticket SET status = 'used', checked_in_at = $3 WHERE tenant_id = $1 AND ticket_id = $2 AND status = 'issued'")
        .bind(&ctx.tenant_id)
        .bind(ticket.ticket_id)
        .bind(&now)
        .execute(&mut *tx)
        .await?;
    if used.rows_affected() != 1 {
        // Voided meanwhile: the transaction (and its check-in row) is dropped.
        return Err(ApiError::Conflict("the ticket is voided".into()));
    }
    let payload = json!({ "ticket_id": ticket.ticket_id, "event_id": ticket.event_id, "checked_in_by_persona_id": by, "device_uuid": device });
    audit::record(&mut tx, &ctx, events::EVENT_TICKET_CHECKED_IN, payload).await?;
    tx.commit().await?;
    Ok(created(checkin))
}

/// Voids an issued ticket (it can no longer check in); 409 once used or voided.
#[utoipa::path(post, path = "/api/tickets/{ticket_id}/void", tag = "sdk-event", params(("ticket_id" = String, Path, description = "the ticket")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/api/tickets/events", { "name": "race", "starts_at": "2027-01-01T00:00:00Z" }], ["POST", "/api/tickets", { "event_id": "{event_id}" }]] }))),
    responses((status = 200, description = "the ticket, voided", body = Data<Ticket>)))]
async fn void(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Ticket>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    let sql = format!(
        "UPDATE event_ticket SET status = 'voided', voided_at = $3 WHERE tenant_id = $1 AND ticket_id = $2 AND status = 'issued' RETURNING {TICKET_COLUMNS}"
    );
    let voided: Option<Ticket> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).bind(db::now()).fetch_optional(&mut *tx).await?;
    let voided = TICKET.settle(&mut tx, &ctx.tenant_id, &id, voided, "only issued tickets can be voided").await?;
    audit::record(&mut tx, &ctx, events::EVENT_TICKET_VOIDED, json!({ "ticket_id": id, "event_id": voided.event_id })).await?;
    tx.commit().await?;
    Ok(ok(voided))
}

/// Clears the holder name of the tenant's tickets of a contact being
/// erased (`DELETE /api/crm/contacts/{contact_id}`), in its transaction.
pub async fn forget_holder(tx: &mut Tx, tenant_id: &str, contact_id: &str) -> ApiResult<()> {
    sqlx::query("UPDATE event_ticket SET holder_name = NULL WHERE tenant_id = $1 AND contact_id = $2")
        .bind(tenant_id)
        .bind(contact_id)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// The events, newest first.
const EVENTS: Listing = Listing { table: "event_event", columns: EVENT_COLUMNS, filter: "tenant_id = $1", order: "created_at DESC, event_id DESC" };

/// The tenant's events, most recently created first.
#[utoipa::path(get, path = "/api/tickets/events", tag = "sdk-event", params(Page),
    responses((status = 200, description = "one page of events", body = ListOf<Event>)))]
async fn list_events(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page) -> ApiResult<ListOf<Event>> {
    page.list::<Event>(&state.db.read, &EVENTS, &[&ctx.tenant_id]).await
}

async fn find_event<'e, E>(exec: E, tenant_id: &str, id: &str) -> ApiResult<Event>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let id = path_id(id)?.to_string();
    let sql = format!("SELECT {EVENT_COLUMNS} FROM event_event WHERE tenant_id = $1 AND event_id = $2");
    let found: Option<Event> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(&id).fetch_optional(exec).await?;
    found.ok_or(ApiError::NotFound)
}

/// An event.
#[utoipa::path(get, path = "/api/tickets/events/{event_id}", tag = "sdk-event", params(("event_id" = String, Path, description = "the event")),
    responses((status = 200, description = "the event", body = Data<Event>)))]
async fn get_event(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Event>> {
    Ok(ok(find_event(&state.db.read, &ctx.tenant_id, &id).await?))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = TicketedEventUpdate)]
struct EventUpdate {
    /// Not blank.
    #[schema(max_length = 200)]
    name: Option<String>,
    #[schema(format = DateTime)]
    starts_at: Option<String>,
    /// After `starts_at` (the one given, or the event's).
    #[schema(format = DateTime)]
    ends_at: Option<String>,
    /// A blank venue clears it.
    #[schema(max_length = 300)]
    venue: Option<String>,
    /// Tickets that may be issued: at least those issued and not voided
    /// (409 otherwise).
    #[schema(minimum = 1, maximum = 1000000)]
    capacity: Option<i64>,
}

/// Changes an event: its name, times, venue or capacity (what the body
/// leaves out stays; at least one field). A capacity below the tickets
/// issued and not voided is 409. Records `event.event.updated.v1` with the
/// fields given.
#[utoipa::path(patch, path = "/api/tickets/events/{event_id}", tag = "sdk-event", request_body = EventUpdate,
    params(("event_id" = String, Path, description = "the event")),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/tickets/events", { "name": "race", "starts_at": "2027-01-01T00:00:00Z", "capacity": 3 }]],
        "body": { "venue": "Hall 2", "capacity": 5 } }))),
    responses((status = 200, description = "the event", body = Data<Event>),
        (status = 409, description = "Conflict: more tickets are issued than the capacity given", body = ErrorBody)))]
async fn update_event(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<EventUpdate>) -> ApiResult<Data<Event>> {
    let id = path_id(&id)?.to_string();
    let body = body.checked()?;
    let mut check = Check::new();
    let mut sets: Vec<(&str, Option<String>)> = Vec::new();
    if let Some(name) = body.name.as_deref().map(str::trim) {
        if name.is_empty() {
            check.fail("name must not be blank");
        }
        sets.push(("name", Some(name.to_string())));
    }
    // The times in their stored form (their schema has checked them).
    let starts = check.optional_expiry("starts_at", &body.starts_at);
    if starts.is_some() {
        sets.push(("starts_at", starts.clone()));
    }
    let ends = check.optional_expiry("ends_at", &body.ends_at);
    if ends.is_some() {
        sets.push(("ends_at", ends.clone()));
    }
    if body.venue.is_some() {
        sets.push(("venue", Check::optional(&body.venue)));
    }
    if sets.is_empty() && body.capacity.is_none() {
        check.fail("give at least one of name, starts_at, ends_at, venue, capacity");
    }
    check.finish()?;
    let mut tx = state.db.begin().await?;
    // The event's row is locked, as an issue locks it: a capacity and the
    // tickets counted against it never pass each other.
    let locked: Option<Option<i64>> = EVENT.lock(&mut tx, &ctx.tenant_id, &id).await?;
    locked.ok_or(ApiError::NotFound)?;
    let current = find_event(&mut *tx, &ctx.tenant_id, &id).await?;
    let (starts_at, ends_at) = (starts.unwrap_or_else(|| current.starts_at.to_string()), ends.or_else(|| current.ends_at.map(|e| e.to_string())));
    if ends_at.as_deref().is_some_and(|e| e <= starts_at.as_str()) {
        return Err(ApiError::invalid("ends_at must be after starts_at"));
    }
    if let Some(capacity) = body.capacity {
        let issued: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM event_ticket WHERE tenant_id = $1 AND event_id = $2 AND status <> 'voided'")
            .bind(&ctx.tenant_id)
            .bind(&id)
            .fetch_one(&mut *tx)
            .await?;
        if issued > capacity {
            return Err(ApiError::Conflict(format!("{issued} tickets of the event are issued: the capacity cannot be less")));
        }
    }
    let mut set: Vec<String> = sets.iter().enumerate().map(|(i, (column, _))| format!("{column} = ${}", i + 3)).collect();
    if body.capacity.is_some() {
        set.push(format!("capacity = ${}", sets.len() + 3));
    }
    let sql = format!("UPDATE event_event SET {} WHERE tenant_id = $1 AND event_id = $2 RETURNING {EVENT_COLUMNS}", set.join(", "));
    let mut update = sqlx::query_as::<_, Event>(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id);
    for (_, value) in &sets {
        update = update.bind(value.clone());
    }
    if let Some(capacity) = body.capacity {
        update = update.bind(capacity);
    }
    let event = update.fetch_one(&mut *tx).await?;
    let mut fields: Vec<&str> = sets.iter().map(|(column, _)| *column).collect();
    if body.capacity.is_some() {
        fields.push("capacity");
    }
    audit::record(&mut tx, &ctx, events::EVENT_UPDATED, json!({ "event_id": id, "fields": fields, "capacity": event.capacity })).await?;
    tx.commit().await?;
    Ok(ok(event))
}

/// The check-ins of an event, most recent first.
#[utoipa::path(get, path = "/api/tickets/events/{event_id}/check-ins", tag = "sdk-event", params(("event_id" = String, Path, description = "the event"), Page),
    responses((status = 200, description = "one page of check-ins", body = ListOf<CheckIn>)))]
async fn check_ins(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, page: Page) -> ApiResult<ListOf<CheckIn>> {
    let event = find_event(&state.db.read, &ctx.tenant_id, &id).await?;
    let listing = Listing {
        table: "event_checkin",
        columns: "checkin_id, ticket_id, event_id, checked_in_by_persona_id, device_uuid, checked_in_at",
        filter: "tenant_id = $1 AND event_id = $2",
        order: "checked_in_at DESC, checkin_id DESC",
    };
    page.list::<CheckIn>(&state.db.read, &listing, &[&ctx.tenant_id, &event.event_id.to_string()]).await
}

/// A ticket (never its token).
#[utoipa::path(get, path = "/api/tickets/{ticket_id}", tag = "sdk-event", params(("ticket_id" = String, Path, description = "the ticket")),
    responses((status = 200, description = "the ticket", body = Data<Ticket>)))]
async fn get_ticket(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Ticket>> {
    let id = path_id(&id)?.to_string();
    let sql = format!("SELECT {TICKET_COLUMNS} FROM event_ticket WHERE tenant_id = $1 AND ticket_id = $2");
    let found: Option<Ticket> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&state.db.read).await?;
    Ok(ok(found.ok_or(ApiError::NotFound)?))
}
