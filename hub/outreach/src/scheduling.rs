//! sdk-scheduling: calendar connections (a CalDAV collection and its
//! credential, sealed under the master key) and appointments, which `push`
//! mirrors onto a connection's calendar: it creates the mapped event
//! (`PUT` of an iCalendar object with `If-None-Match: *`), updates it
//! (`PUT` with the next `SEQUENCE`) or, for a cancelled appointment,
//! removes it (`DELETE`). The object's URL and ETag are kept per
//! (appointment, connection). A connection is renamed or given a new
//! credential, and deleted with its credential and those records (the
//! events stay on the calendar). A booked appointment's title, description
//! and location change, moving its revision on like a reschedule.
//!
//! The calendar is called outside any database transaction (a slow server
//! must not hold the writer); two pushes of one appointment at once may
//! both reach the server, each writing the whole event, so the later wins.

use std::time::Duration;

use hub_kernel::prelude::*;
use hub_platform::webhook::target;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_connection, list_connections))
        .routes(routes!(get_connection, update_connection, delete_connection))
        .routes(routes!(book, list_appointments))
        .routes(routes!(get_appointment, update_appointment))
        .routes(routes!(reschedule))
        .routes(routes!(cancel))
        .routes(routes!(push))
}

/// The longest appointment: 31 days, in seconds.
const MAX_LENGTH_SECONDS: i64 = 31 * 86_400;

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = SchedulingConnection)]
struct Connection {
    connection_id: Id,
    name: String,
    provider: Provider,
    /// The calendar collection events are written into.
    collection_url: String,
    /// The credential itself is never shown.
    auth_scheme: AuthScheme,
    created_by: String,
    created_at: Timestamp,
    updated_at: Timestamp,
}

stored_enum! {
    /// How a connection authenticates to its calendar server.
    #[schema(as = SchedulingAuthScheme)]
    enum AuthScheme { Basic = "basic", Bearer = "bearer", None = "none" }
}

const CONNECTION_COLUMNS: &str = "connection_id, name, provider, collection_url, auth_scheme, created_by, created_at, updated_at";

/// What the sealed credential holds.
#[derive(Serialize, Deserialize)]
struct Credential {
    username: Option<String>,
    password: Option<String>,
    token: Option<String>,
}

impl Credential {
    /// The scheme the given fields make: username with password, a token,
    /// or nothing; `None` for any other mix.
    fn scheme(&self) -> Option<AuthScheme> {
        match (&self.username, &self.password, &self.token) {
            (None, None, None) => Some(AuthScheme::None),
            (Some(_), Some(_), None) => Some(AuthScheme::Basic),
            (None, None, Some(_)) => Some(AuthScheme::Bearer),
            _ => None,
        }
    }

    /// The credential sealed under the master key, bound to its connection.
    fn seal(&self, state: &AppState, connection_id: &str) -> Vec<u8> {
        let plain = serde_json::to_vec(self).expect("a credential serialises");
        state.master.seal(&plain, &aad(connection_id))
    }
}

fn aad(connection_id: &str) -> Vec<u8> {
    format!("scheduling-connection:{connection_id}").into_bytes()
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewSchedulingConnection)]
struct NewConnection {
    #[schema(max_length = 200)]
    name: String,
    /// `caldav` when absent (the only provider).
    provider: Option<Provider>,
    /// The CalDAV calendar collection (`http` or `https`, no user information:
    /// the credential is `username`/`password` or `token`; a trailing `/` is added).
    #[schema(max_length = 2000)]
    collection_url: String,
    /// With `password`: HTTP Basic authentication.
    #[schema(max_length = 256)]
    username: Option<String>,
    #[schema(max_length = 1024)]
    password: Option<String>,
    /// Instead: a bearer token.
    #[schema(max_length = 4096)]
    token: Option<String>,
}

stored_enum! {
    /// The calendar protocols a connection speaks.
    #[schema(as = SchedulingProvider)]
    enum Provider { Caldav = "caldav" }
}

/// Connects a calendar (its credential sealed at rest, never shown again).
#[utoipa::path(post, path = "/api/scheduling/connections", tag = "sdk-scheduling", request_body = NewConnection,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "body": { "name": "race", "collection_url": "https://calendar.races.example.com/race/", "token": "t" } }))),
    responses((status = 201, description = "the connection", body = Data<Connection>)))]
async fn create_connection(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewConnection>) -> ApiResult<Created<Connection>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let name = body.name.trim();
    let provider = body.provider.unwrap_or(Provider::Caldav);
    let mut url = String::new();
    match target::check_url(&state.config, body.collection_url.trim()) {
        Ok(u) => url = if u.as_str().ends_with('/') { u.to_string() } else { format!("{u}/") },
        Err(e) => check.fail(e.replacen("url", "collection_url", 1)),
    }
    let credential = Credential { username: Check::optional(&body.username), password: Check::optional(&body.password), token: Check::optional(&body.token) };
    let scheme = credential.scheme().unwrap_or_else(|| {
        check.fail("give username with password, or token, or neither");
        AuthScheme::None
    });
    check.finish()?;
    let id = db::new_id();
    let sealed = (scheme != AuthScheme::None).then(|| credential.seal(&state, &id));
    let mut tx = state.db.begin().await?;
    let sql = format!(
        "INSERT INTO scheduling_connection (connection_id, tenant_id, name, provider, collection_url, auth_scheme, credential_sealed, created_by, created_at, \
         updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9) RETURNING {CONNECTION_COLUMNS}"
    );
    let connection: Connection = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&id)
        .bind(&ctx.tenant_id)
        .bind(name)
        .bind(provider)
        .bind(&url)
        .bind(scheme)
        .bind(sealed)
        .bind(audit::actor_of(&ctx).1)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
    let payload = json!({ "connection_id": id, "provider": provider, "auth_scheme": scheme });
    audit::record(&mut tx, &ctx, events::SCHEDULING_CONNECTION_CREATED, payload).await?;
    tx.commit().await?;
    Ok(created(connection))
}

/// The tenant's connections, newest first.
#[utoipa::path(get, path = "/api/scheduling/connections", tag = "sdk-scheduling", params(Page),
    responses((status = 200, description = "one page of connections", body = ListOf<Connection>)))]
async fn list_connections(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page) -> ApiResult<ListOf<Connection>> {
    let listing =
        Listing { table: "scheduling_connection", columns: CONNECTION_COLUMNS, filter: "tenant_id = $1", order: "created_at DESC, connection_id DESC" };
    page.list::<Connection>(&state.db.read, &listing, &[&ctx.tenant_id]).await
}

async fn find_connection(exec: &mut Tx, tenant_id: &str, id: &str) -> ApiResult<Connection> {
    let sql = format!("SELECT {CONNECTION_COLUMNS} FROM scheduling_connection WHERE tenant_id = $1 AND connection_id = $2");
    let found: Option<Connection> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(id).fetch_optional(&mut **exec).await?;
    found.ok_or(ApiError::NotFound)
}

/// One connection (never its credential).
#[utoipa::path(get, path = "/api/scheduling/connections/{connection_id}", tag = "sdk-scheduling",
    params(("connection_id" = String, Path, description = "the connection")),
    responses((status = 200, description = "the connection", body = Data<Connection>)))]
async fn get_connection(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Connection>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.read.begin().await?;
    let connection = find_connection(&mut tx, &ctx.tenant_id, &id).await?;
    tx.commit().await?;
    Ok(ok(connection))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = SchedulingConnectionUpdate)]
struct ConnectionUpdate {
    #[schema(max_length = 200)]
    name: Option<String>,
    /// With `password`: a new HTTP Basic credential, replacing the old.
    #[schema(max_length = 256)]
    username: Option<String>,
    #[schema(max_length = 1024)]
    password: Option<String>,
    /// Instead: a new bearer token, replacing the old credential.
    #[schema(max_length = 4096)]
    token: Option<String>,
}

/// Renames a connection or replaces its credential (a changed CalDAV
/// password), sealed at rest as on create (what is absent stays; at least
/// one is given).
#[utoipa::path(patch, path = "/api/scheduling/connections/{connection_id}", tag = "sdk-scheduling", request_body = ConnectionUpdate,
    params(("connection_id" = String, Path, description = "the connection")),
    extensions(("x-concurrency" = json!({ "outcome": "independent",
        "given": [["POST", "/api/scheduling/connections", { "name": "race", "collection_url": "https://calendar.races.example.com/race/", "token": "t" }]],
        "body": { "username": "race", "password": "new password" } }))),
    responses((status = 200, description = "the connection", body = Data<Connection>)))]
async fn update_connection(
    State(state): State<AppState>,
    Tenant(ctx): Tenant,
    Path(id): Path<String>,
    body: Body<ConnectionUpdate>,
) -> ApiResult<Data<Connection>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    find_connection(&mut tx, &ctx.tenant_id, &id).await?;
    let body = body.checked()?;
    let name = Check::optional(&body.name);
    let credential = Credential { username: Check::optional(&body.username), password: Check::optional(&body.password), token: Check::optional(&body.token) };
    let scheme = match credential.scheme() {
        Some(AuthScheme::None) if name.is_none() => return Err(ApiError::invalid("give at least one of name, username with password, token")),
        Some(AuthScheme::None) => None,
        Some(scheme) => Some(scheme),
        None => return Err(ApiError::invalid("give username with password, or token")),
    };
    let now = db::now();
    let connection: Connection = match scheme {
        Some(scheme) => {
            let sql = format!(
                "UPDATE scheduling_connection SET name = COALESCE($3, name), auth_scheme = $4, credential_sealed = $5, updated_at = $6 \
                 WHERE tenant_id = $1 AND connection_id = $2 RETURNING {CONNECTION_COLUMNS}"
            );
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(&ctx.tenant_id)
                .bind(&id)
                .bind(&name)
                .bind(scheme)
                .bind(credential.seal(&state, &id))
                .bind(&now)
                .fetch_one(&mut *tx)
                .await?
        }
        None => {
            let sql = format!(
                "UPDATE scheduling_connection SET name = $3, updated_at = $4 WHERE tenant_id = $1 AND connection_id = $2 RETURNING {CONNECTION_COLUMNS}"
            );
            sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).bind(&name).bind(&now).fetch_one(&mut *tx).await?
        }
    };
    // The credential is never in the event: only that it changed.
    let payload = json!({ "connection_id": id, "name_changed": name.is_some(), "credential_changed": scheme.is_some(), "auth_scheme": connection.auth_scheme });
    audit::record(&mut tx, &ctx, events::SCHEDULING_CONNECTION_UPDATED, payload).await?;
    tx.commit().await?;
    Ok(ok(connection))
}

/// The answer of a connection's delete.
#[derive(Serialize, ToSchema)]
#[schema(as = SchedulingConnectionDeleted)]
struct ConnectionDeleted {
    connection_id: Id,
    deleted: bool,
}

/// Deletes a connection with its sealed credential and its record of the
/// events pushed to its calendar (the events stay on the calendar server).
#[utoipa::path(delete, path = "/api/scheduling/connections/{connection_id}", tag = "sdk-scheduling",
    params(("connection_id" = String, Path, description = "the connection")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "losers": 404,
        "given": [["POST", "/api/scheduling/connections", { "name": "race", "collection_url": "https://calendar.races.example.com/race/", "token": "t" }]] }))),
    responses((status = 200, description = "deleted", body = Data<ConnectionDeleted>)))]
async fn delete_connection(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<ConnectionDeleted>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    sqlx::query("DELETE FROM scheduling_push WHERE tenant_id = $1 AND connection_id = $2").bind(&ctx.tenant_id).bind(&id).execute(&mut *tx).await?;
    // The delete itself says whether this request removed the row: of two
    // deletes at once, the other finds nothing (404).
    let gone: Option<Id> = sqlx::query_scalar("DELETE FROM scheduling_connection WHERE tenant_id = $1 AND connection_id = $2 RETURNING connection_id")
        .bind(&ctx.tenant_id)
        .bind(&id)
        .fetch_optional(&mut *tx)
        .await?;
    let connection_id = gone.ok_or(ApiError::NotFound)?;
    audit::record(&mut tx, &ctx, events::SCHEDULING_CONNECTION_DELETED, json!({ "connection_id": connection_id })).await?;
    tx.commit().await?;
    Ok(ok(ConnectionDeleted { connection_id, deleted: true }))
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = SchedulingAppointment)]
struct Appointment {
    appointment_id: Id,
    title: String,
    description: Option<String>,
    location: Option<String>,
    starts_at: Timestamp,
    ends_at: Timestamp,
    status: AppointmentStatus,
    contact_id: Option<String>,
    /// Increases with every change (the iCalendar `SEQUENCE`).
    revision: i64,
    created_by: String,
    created_at: Timestamp,
    updated_at: Timestamp,
}

stored_enum! {
    /// Where an appointment is: `booked` until cancelled.
    #[schema(as = SchedulingAppointmentStatus)]
    enum AppointmentStatus { Booked = "booked", Cancelled = "cancelled" }
}

const APPOINTMENT_COLUMNS: &str =
    "appointment_id, title, description, location, starts_at, ends_at, status, contact_id, revision, created_by, created_at, updated_at";

/// Checks a start and end the body's schema has checked as RFC 3339: the
/// end after the start, at most 31 days apart. Both in the stored form.
fn window(starts: &str, ends: &str) -> ApiResult<(String, String)> {
    let parse = |name: &str, raw: &str| db::parse_time(raw.trim()).ok_or_else(|| ApiError::invalid(format!("{name} must be an RFC 3339 timestamp")));
    let (a, b) = (parse("starts_at", starts)?, parse("ends_at", ends)?);
    if b <= a {
        return Err(ApiError::invalid("ends_at must be after starts_at"));
    } else if (b - a).num_seconds() > MAX_LENGTH_SECONDS {
        return Err(ApiError::invalid("an appointment lasts at most 31 days"));
    }
    Ok((db::format_time(a), db::format_time(b)))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewSchedulingAppointment)]
struct NewAppointment {
    #[schema(max_length = 300)]
    title: String,
    #[schema(format = DateTime)]
    starts_at: String,
    /// After `starts_at`, at most 31 days later.
    #[schema(format = DateTime)]
    ends_at: String,
    #[schema(max_length = 4000)]
    description: Option<String>,
    #[schema(max_length = 500)]
    location: Option<String>,
    /// A contact of the tenant's CRM.
    #[schema(format = "uuid")]
    contact_id: Option<String>,
}

/// Books an appointment.
#[utoipa::path(post, path = "/api/scheduling/appointments", tag = "sdk-scheduling", request_body = NewAppointment,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "body": { "title": "race", "starts_at": "2027-01-01T09:00:00Z", "ends_at": "2027-01-01T10:00:00Z" } }))),
    responses((status = 201, description = "the appointment, booked", body = Data<Appointment>)))]
async fn book(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewAppointment>) -> ApiResult<Created<Appointment>> {
    let body = body.checked()?;
    let title = body.title.trim();
    let (starts, ends) = window(&body.starts_at, &body.ends_at)?;
    let description = Check::optional(&body.description);
    let location = Check::optional(&body.location);
    let mut check = Check::new();
    let contact = check.optional_uuid("contact_id", &body.contact_id).map(|u| u.to_string());
    check.finish()?;
    let mut tx = state.db.begin().await?;
    if let Some(c) = &contact {
        let found: Option<i64> = sqlx::query_scalar("SELECT 1 FROM crm_contact WHERE tenant_id = $1 AND contact_id = $2 AND erased_at IS NULL")
            .bind(&ctx.tenant_id)
            .bind(c)
            .fetch_optional(&mut *tx)
            .await?;
        if found.is_none() {
            return Err(ApiError::invalid("contact_id is not a contact of this tenant"));
        }
    }
    let sql = format!(
        "INSERT INTO scheduling_appointment (appointment_id, tenant_id, title, description, location, starts_at, ends_at, status, contact_id, revision, \
         created_by, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, 'booked', $8, 0, $9, $10, $10) RETURNING {APPOINTMENT_COLUMNS}"
    );
    let appointment: Appointment = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(title)
        .bind(&description)
        .bind(&location)
        .bind(&starts)
        .bind(&ends)
        .bind(&contact)
        .bind(audit::actor_of(&ctx).1)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
    let payload = json!({ "appointment_id": appointment.appointment_id, "starts_at": starts, "ends_at": ends, "contact_id": contact });
    audit::record(&mut tx, &ctx, events::SCHEDULING_APPOINTMENT_BOOKED, payload).await?;
    tx.commit().await?;
    Ok(created(appointment))
}

async fn find<'e, E>(exec: E, tenant_id: &str, id: &str) -> ApiResult<Appointment>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let id = path_id(id)?.to_string();
    let sql = format!("SELECT {APPOINTMENT_COLUMNS} FROM scheduling_appointment WHERE tenant_id = $1 AND appointment_id = $2");
    let found: Option<Appointment> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(&id).fetch_optional(exec).await?;
    found.ok_or(ApiError::NotFound)
}

/// One appointment.
#[utoipa::path(get, path = "/api/scheduling/appointments/{appointment_id}", tag = "sdk-scheduling",
    params(("appointment_id" = String, Path, description = "the appointment")),
    responses((status = 200, description = "the appointment", body = Data<Appointment>)))]
async fn get_appointment(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Appointment>> {
    Ok(ok(find(&state.db.read, &ctx.tenant_id, &id).await?))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct AppointmentFilter {
    /// Appointments that end after this time...
    #[param(format = DateTime)]
    from: Option<String>,
    /// ...and start before this one.
    #[param(format = DateTime)]
    to: Option<String>,
    #[param(inline)]
    status: Option<AppointmentStatus>,
    #[param(format = "uuid")]
    contact_id: Option<String>,
}

/// The tenant's appointments in calendar order (by start), those that
/// overlap `from`..`to` when given.
#[utoipa::path(get, path = "/api/scheduling/appointments", tag = "sdk-scheduling", params(AppointmentFilter, Page),
    responses((status = 200, description = "one page of appointments", body = ListOf<Appointment>)))]
async fn list_appointments(
    State(state): State<AppState>,
    Tenant(ctx): Tenant,
    Params(q): Params<AppointmentFilter>,
    page: Page,
) -> ApiResult<ListOf<Appointment>> {
    let mut check = Check::new();
    let mut time = |name: &str, raw: &Option<String>| match Check::optional(raw) {
        None => String::new(),
        Some(raw) => db::parse_time(&raw).map(db::format_time).unwrap_or_else(|| {
            check.fail(format!("{name} must be an RFC 3339 timestamp"));
            String::new()
        }),
    };
    let (from, to) = (time("from", &q.from), time("to", &q.to));
    if !from.is_empty() && !to.is_empty() && to <= from {
        check.fail("to must be after from");
    }
    check.finish()?;
    let status = q.status.map_or("", AppointmentStatus::as_str);
    let contact = canonical_uuid_opt(&q.contact_id).unwrap_or_default();
    let listing = Listing {
        table: "scheduling_appointment",
        columns: APPOINTMENT_COLUMNS,
        filter: "tenant_id = $1 AND ($2 = '' OR ends_at > $2) AND ($3 = '' OR starts_at < $3) AND ($4 = '' OR status = $4) \
                 AND ($5 = '' OR contact_id = $5)",
        order: "starts_at ASC, appointment_id ASC",
    };
    page.list::<Appointment>(&state.db.read, &listing, &[&ctx.tenant_id, &from, &to, status, &contact]).await
}

#[derive(Deserialize, ToSchema)]
#[schema(as = SchedulingAppointmentUpdate)]
struct AppointmentUpdate {
    #[schema(max_length = 300)]
    title: Option<String>,
    #[schema(max_length = 4000)]
    description: Option<String>,
    #[schema(max_length = 500)]
    location: Option<String>,
}

/// Changes a booked appointment's title, description or location (what
/// is absent stays; at least one is given; 409 once cancelled); its
/// revision moves on: push it to update the calendars. Its time moves with
/// `reschedule`.
#[utoipa::path(patch, path = "/api/scheduling/appointments/{appointment_id}", tag = "sdk-scheduling", request_body = AppointmentUpdate,
    params(("appointment_id" = String, Path, description = "the appointment")),
    extensions(("x-concurrency" = json!({ "outcome": "independent",
        "given": [["POST", "/api/scheduling/appointments", { "title": "race", "starts_at": "2027-01-01T09:00:00Z", "ends_at": "2027-01-01T10:00:00Z" }]],
        "body": { "location": "room 2" } }))),
    responses((status = 200, description = "the appointment", body = Data<Appointment>)))]
async fn update_appointment(
    State(state): State<AppState>,
    Tenant(ctx): Tenant,
    Path(id): Path<String>,
    body: Body<AppointmentUpdate>,
) -> ApiResult<Data<Appointment>> {
    let mut tx = state.db.begin().await?;
    let current = find(&mut *tx, &ctx.tenant_id, &id).await?;
    let body = body.checked()?;
    let title = Check::optional(&body.title);
    let description = Check::optional(&body.description);
    let location = Check::optional(&body.location);
    if title.is_none() && description.is_none() && location.is_none() {
        return Err(ApiError::invalid("give at least one of title, description, location"));
    }
    let sql = format!(
        "UPDATE scheduling_appointment SET title = COALESCE($3, title), description = COALESCE($4, description), location = COALESCE($5, location), \
         revision = revision + 1, updated_at = $6 WHERE tenant_id = $1 AND appointment_id = $2 AND status = 'booked' RETURNING {APPOINTMENT_COLUMNS}"
    );
    let changed: Option<Appointment> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&ctx.tenant_id)
        .bind(current.appointment_id)
        .bind(&title)
        .bind(&description)
        .bind(&location)
        .bind(db::now())
        .fetch_optional(&mut *tx)
        .await?;
    let id = current.appointment_id.to_string();
    let changed = APPOINTMENT.settle(&mut tx, &ctx.tenant_id, &id, changed, "only a booked appointment can be changed").await?;
    let payload = json!({ "appointment_id": id, "title_changed": title.is_some(), "description_changed": description.is_some(),
        "location_changed": location.is_some(), "revision": changed.revision });
    audit::record(&mut tx, &ctx, events::SCHEDULING_APPOINTMENT_UPDATED, payload).await?;
    tx.commit().await?;
    Ok(ok(changed))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = SchedulingReschedule)]
struct Reschedule {
    #[schema(format = DateTime)]
    starts_at: String,
    /// After `starts_at`, at most 31 days later.
    #[schema(format = DateTime)]
    ends_at: String,
}

/// An appointment as guarded writes name it.
const APPOINTMENT: Stateful = Stateful { noun: "appointment", table: "scheduling_appointment", key: "appointment_id", state: "status" };

/// Moves a booked appointment (409 once cancelled); push it to update the calendars.
#[utoipa::path(post, path = "/api/scheduling/appointments/{appointment_id}/reschedule", tag = "sdk-scheduling",
    params(("appointment_id" = String, Path, description = "the appointment")), request_body = Reschedule,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/scheduling/appointments", { "title": "race", "starts_at": "2027-01-01T09:00:00Z", "ends_at": "2027-01-01T10:00:00Z" }]], "body": { "starts_at": "2027-01-02T09:00:00Z", "ends_at": "2027-01-02T10:00:00Z" } }))),
    responses((status = 200, description = "the appointment", body = Data<Appointment>)))]
async fn reschedule(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<Reschedule>) -> ApiResult<Data<Appointment>> {
    let mut tx = state.db.begin().await?;
    let current = find(&mut *tx, &ctx.tenant_id, &id).await?;
    let body = body.checked()?;
    let (starts, ends) = window(&body.starts_at, &body.ends_at)?;
    let sql = format!(
        "UPDATE scheduling_appointment SET starts_at = $3, ends_at = $4, revision = revision + 1, updated_at = $5 \
         WHERE tenant_id = $1 AND appointment_id = $2 AND status = 'booked' RETURNING {APPOINTMENT_COLUMNS}"
    );
    let moved: Option<Appointment> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&ctx.tenant_id)
        .bind(current.appointment_id)
        .bind(&starts)
        .bind(&ends)
        .bind(db::now())
        .fetch_optional(&mut *tx)
        .await?;
    let moved = APPOINTMENT.settle(&mut tx, &ctx.tenant_id, &current.appointment_id.to_string(), moved, "only a booked appointment can be rescheduled").await?;
    let payload = json!({ "appointment_id": moved.appointment_id, "starts_at": starts, "ends_at": ends, "revision": moved.revision });
    audit::record(&mut tx, &ctx, events::SCHEDULING_APPOINTMENT_RESCHEDULED, payload).await?;
    tx.commit().await?;
    Ok(ok(moved))
}

/// Cancels an appointment (409 when cancelled already); push it to remove it from the calendars.
#[utoipa::path(post, path = "/api/scheduling/appointments/{appointment_id}/cancel", tag = "sdk-scheduling",
    params(("appointment_id" = String, Path, description = "the appointment")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins",
        "given": [["POST", "/api/scheduling/appointments", { "title": "race", "starts_at": "2027-01-01T09:00:00Z", "ends_at": "2027-01-01T10:00:00Z" }]] }))),
    responses((status = 200, description = "the appointment, cancelled", body = Data<Appointment>)))]
async fn cancel(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Appointment>> {
    let mut tx = state.db.begin().await?;
    let current = find(&mut *tx, &ctx.tenant_id, &id).await?;
    let sql = format!(
        "UPDATE scheduling_appointment SET status = 'cancelled', revision = revision + 1, updated_at = $3 \
         WHERE tenant_id = $1 AND appointment_id = $2 AND status = 'booked' RETURNING {APPOINTMENT_COLUMNS}"
    );
    let cancelled: Option<Appointment> =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(current.appointment_id).bind(db::now()).fetch_optional(&mut *tx).await?;
    // The guard decides: of two cancels at once, one cancels and the
    // other finds the appointment cancelled (409).
    let cancelled =
        APPOINTMENT.settle(&mut tx, &ctx.tenant_id, &current.appointment_id.to_string(), cancelled, "only a booked appointment can be cancelled").await?;
    audit::record(&mut tx, &ctx, events::SCHEDULING_APPOINTMENT_CANCELLED, json!({ "appointment_id": cancelled.appointment_id })).await?;
    tx.commit().await?;
    Ok(ok(cancelled))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = SchedulingPushRequest)]
struct PushRequest {
    /// The caller's tenant (checked against the caller by `Body`).
    #[schema(format = "uuid")]
    #[allow(dead_code)]
    tenant_id: String,
    /// A connection of the tenant.
    #[schema(format = "uuid")]
    connection_id: String,
}

/// What a push did on the connection's calendar.
#[derive(Serialize, ToSchema)]
#[schema(as = SchedulingPush)]
struct PushResult {
    appointment_id: Id,
    connection_id: Id,
    action: PushAction,
    /// The iCalendar object's URL on the calendar.
    href: Option<String>,
    /// The calendar's ETag of the object, when it gave one.
    etag: Option<String>,
    /// The iCalendar `SEQUENCE` written.
    sequence: Option<i64>,
    pushed_at: Timestamp,
}

stored_enum! {
    /// What a push did: `created`, `updated`, `cancelled` (the event
    /// removed) or `unchanged` (a cancelled appointment never pushed there).
    #[schema(as = SchedulingPushAction)]
    enum PushAction { Created = "created", Updated = "updated", Cancelled = "cancelled", Unchanged = "unchanged" }
}

stored_enum! {
    /// Whether an appointment's event is on a connection's calendar.
    #[schema(as = SchedulingPushState)]
    enum PushState { Present = "present", Deleted = "deleted" }
}

#[derive(FromRow)]
struct Mapping {
    href: String,
    state: PushState,
}

#[derive(FromRow)]
struct Target {
    collection_url: String,
    auth_scheme: AuthScheme,
    credential_sealed: Option<Vec<u8>>,
}

/// Pushes an appointment to a connection's calendar: creates the mapped
/// event, updates it, or removes it when the appointment is cancelled.
/// 503 when the calendar server does not accept the change.
#[utoipa::path(post, path = "/api/scheduling/appointments/{appointment_id}/push", tag = "sdk-scheduling",
    params(("appointment_id" = String, Path, description = "the appointment")), request_body = PushRequest,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/scheduling/connections", { "name": "race", "collection_url": "https://calendar.races.example.com/race/" }], ["POST", "/api/scheduling/appointments", { "title": "race", "starts_at": "2027-01-01T09:00:00Z", "ends_at": "2027-01-01T10:00:00Z" }], ["POST", "/api/scheduling/appointments/{appointment_id}/cancel", null]], "body": { "tenant_id": "{tenant_id}", "connection_id": "{connection_id}" } }))),
    responses((status = 200, description = "what was done on the calendar", body = Data<PushResult>),
        (status = 503, description = "Unavailable: the calendar server did not accept the change; retry later", body = ErrorBody)))]
async fn push(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<PushRequest>) -> ApiResult<Data<PushResult>> {
    let appointment = find(&state.db.read, &ctx.tenant_id, &id).await?;
    let body = body.checked()?;
    let connection_id = Id(path_id(body.connection_id.trim()).map_err(|_| ApiError::invalid("connection_id must be a UUID"))?);
    let connection = connection_id.to_string();
    let target: Option<Target> =
        sqlx::query_as("SELECT collection_url, auth_scheme, credential_sealed FROM scheduling_connection WHERE tenant_id = $1 AND connection_id = $2")
            .bind(&ctx.tenant_id)
            .bind(&connection)
            .fetch_optional(&state.db.read)
            .await?;
    let target = target.ok_or_else(|| ApiError::invalid("connection_id is not a connection of this tenant"))?;
    let mapping: Option<Mapping> =
        sqlx::query_as("SELECT href, state FROM scheduling_push WHERE tenant_id = $1 AND appointment_id = $2 AND connection_id = $3")
            .bind(&ctx.tenant_id)
            .bind(appointment.appointment_id)
            .bind(&connection)
            .fetch_optional(&state.db.read)
            .await?;
    let credential: Option<Credential> = match &target.credential_sealed {
        Some(sealed) => {
            let plain = state.master.open(sealed, &aad(&connection)).map_err(ApiError::Internal)?;
            Some(serde_json::from_slice(&plain).map_err(|e| ApiError::Internal(e.into()))?)
        }
        None => None,
    };
    // The client's resolver judges a name's addresses; a literal address is
    // never resolved, so it is judged here, at every push: a connection
    // saved before the policy refused its address is not called.
    if let Err(why) = target::check_target(&state.config, &target.collection_url) {
        return Err(refused(&target.collection_url, why));
    }
    let caldav = CalDav { client: client(&state), scheme: target.auth_scheme, credential };
    let uid = format!("{}@hub", appointment.appointment_id);
    let live = mapping.as_ref().filter(|m| m.state == PushState::Present);
    let cancelled = appointment.status == AppointmentStatus::Cancelled;
    let (action, href, etag, sequence) = if cancelled {
        match live {
            Some(m) => {
                caldav.delete(&m.href).await?;
                (PushAction::Cancelled, Some(m.href.clone()), None, None)
            }
            None => (PushAction::Unchanged, mapping.as_ref().map(|m| m.href.clone()), None, None),
        }
    } else {
        let href = match &mapping {
            Some(m) => m.href.clone(),
            None => format!("{}{}.ics", target.collection_url, appointment.appointment_id),
        };
        let object = ical::event(&appointment, &uid, chrono::Utc::now());
        let etag = caldav.put(&href, object, live.is_none()).await?;
        (if live.is_some() { PushAction::Updated } else { PushAction::Created }, Some(href), etag, Some(appointment.revision))
    };
    let now = Timestamp::now();
    let mut tx = state.db.begin().await?;
    if let Some(h) = &href {
        sqlx::query(
            "INSERT INTO scheduling_push (tenant_id, appointment_id, connection_id, href, uid, etag, sequence, state, pushed_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (appointment_id, connection_id) \
             DO UPDATE SET etag = excluded.etag, sequence = excluded.sequence, state = excluded.state, pushed_at = excluded.pushed_at",
        )
        .bind(&ctx.tenant_id)
        .bind(appointment.appointment_id)
        .bind(&connection)
        .bind(h)
        .bind(&uid)
        .bind(&etag)
        .bind(sequence.unwrap_or(appointment.revision))
        .bind(if cancelled { PushState::Deleted } else { PushState::Present })
        .bind(now)
        .execute(&mut *tx)
        .await?;
    }
    let result = PushResult { appointment_id: appointment.appointment_id, connection_id, action, href, etag, sequence, pushed_at: now };
    let payload = json!({ "appointment_id": result.appointment_id, "connection_id": connection, "action": action, "sequence": sequence });
    audit::record(&mut tx, &ctx, events::SCHEDULING_CALENDAR_PUSHED, payload).await?;
    tx.commit().await?;
    Ok(ok(result))
}

/// The calendar client: rustls, no redirects, the webhook delivery policy's
/// resolver (no private addresses outside development unless allowed).
fn client(state: &AppState) -> reqwest::Client {
    target::guarded_client(&state.config)
        .timeout(Duration::from_secs(state.config.webhook_timeout_seconds))
        .user_agent("hub-scheduling/1")
        .build()
        .expect("the calendar client builds")
}

struct CalDav {
    client: reqwest::Client,
    scheme: AuthScheme,
    credential: Option<Credential>,
}

impl CalDav {
    fn request(&self, method: reqwest::Method, href: &str) -> reqwest::RequestBuilder {
        let req = self.client.request(method, href);
        match (self.scheme, &self.credential) {
            (AuthScheme::Basic, Some(c)) => req.basic_auth(c.username.clone().unwrap_or_default(), c.password.clone()),
            (AuthScheme::Bearer, Some(c)) => req.bearer_auth(c.token.clone().unwrap_or_default()),
            _ => req,
        }
    }

    /// `PUT` of the object: `If-None-Match: *` when creating (an object
    /// already there is the server's 412). The ETag the server answers.
    async fn put(&self, href: &str, object: String, create: bool) -> ApiResult<Option<String>> {
        let mut req = self.request(reqwest::Method::PUT, href).header(reqwest::header::CONTENT_TYPE, "text/calendar; charset=utf-8").body(object);
        if create {
            req = req.header(reqwest::header::IF_NONE_MATCH, "*");
        }
        let res = hub_kernel::outbound::send(req).await.map_err(|e| refused(href, e.without_url().to_string()))?;
        if !res.status().is_success() {
            return Err(refused(href, format!("PUT answered {}", res.status())));
        }
        Ok(res.headers().get(reqwest::header::ETAG).and_then(|v| v.to_str().ok()).map(str::to_string))
    }

    /// `DELETE` of the object; one already gone (404, 410) is removed.
    async fn delete(&self, href: &str) -> ApiResult<()> {
        let res = hub_kernel::outbound::send(self.request(reqwest::Method::DELETE, href)).await.map_err(|e| refused(href, e.without_url().to_string()))?;
        match res.status().as_u16() {
            200..=299 | 404 | 410 => Ok(()),
            s => Err(refused(href, format!("DELETE answered {s}"))),
        }
    }
}

/// `why` names no URL (reqwest's errors are stripped of theirs): the log
/// shows the href once, redacted.
fn refused(href: &str, why: String) -> ApiError {
    tracing::warn!(href = %hub_kernel::outbound::redact_url(href), why, "calendar push refused");
    ApiError::Unavailable("the calendar server did not accept the change; retry the push later")
}

/// A small iCalendar (RFC 5545) writer: one VEVENT, text escaped (§3.3.11)
/// and content lines folded at 75 octets (§3.1).
pub mod ical {
    use chrono::{DateTime, Utc};

    /// Escapes a TEXT value: backslash, semicolon, comma and newlines.
    pub fn escape(text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' => out.push_str("\\\\"),
                ';' => out.push_str("\\;"),
                ',' => out.push_str("\\,"),
                '\r' => {
                    if chars.peek() == Some(&'\n') {
                        chars.next();
                    }
                    out.push_str("\\n");
                }
                '\n' => out.push_str("\\n"),
                c if c.is_control() && c != '\t' => {}
                c => out.push(c),
            }
        }
        out
    }

    /// Folds one content line: at most 75 octets a line, never inside a
    /// UTF-8 sequence, continuations starting with a space; CRLF after each.
    pub fn fold(line: &str) -> String {
        let mut out = String::with_capacity(line.len() + line.len() / 70 * 3 + 2);
        let mut width = 0;
        for c in line.chars() {
            let n = c.len_utf8();
            if width + n > 75 {
                out.push_str("\r\n ");
                width = 1;
            }
            out.push(c);
            width += n;
        }
        out.push_str("\r\n");
        out
    }

    fn stamp(t: DateTime<Utc>) -> String {
        t.format("%Y%m%dT%H%M%SZ").to_string()
    }

    pub(super) fn event(a: &super::Appointment, uid: &str, now: DateTime<Utc>) -> String {
        let mut lines = vec![
            "BEGIN:VCALENDAR".to_string(),
            "VERSION:2.0".to_string(),
            "PRODID:-//Platform hub//sdk-scheduling//EN".to_string(),
            "BEGIN:VEVENT".to_string(),
            format!("UID:{}", escape(uid)),
            format!("DTSTAMP:{}", stamp(now)),
            format!("DTSTART:{}", stamp(a.starts_at.0)),
            format!("DTEND:{}", stamp(a.ends_at.0)),
            format!("SEQUENCE:{}", a.revision),
            format!("SUMMARY:{}", escape(&a.title)),
        ];
        if let Some(d) = &a.description {
            lines.push(format!("DESCRIPTION:{}", escape(d)));
        }
        if let Some(l) = &a.location {
            lines.push(format!("LOCATION:{}", escape(l)));
        }
        lines.push("STATUS:CONFIRMED".to_string());
        lines.extend(["END:VEVENT".to_string(), "END:VCALENDAR".to_string()]);
        lines.iter().map(|l| fold(l)).collect()
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn text_is_escaped_and_lines_fold_at_75_octets_on_character_boundaries() {
            assert_eq!(escape("a,b;c\\d\ne\r\nf"), "a\\,b\\;c\\\\d\\ne\\nf");
            let long = format!("SUMMARY:{}", "é".repeat(60));
            let folded = fold(&long);
            assert!(folded.ends_with("\r\n"));
            for line in folded.trim_end_matches("\r\n").split("\r\n") {
                assert!(line.len() <= 75, "{} octets", line.len());
            }
            let unfolded: String = folded.trim_end_matches("\r\n").replace("\r\n ", "");
            assert_eq!(unfolded, long);
            assert_eq!(fold("SHORT:x"), "SHORT:x\r\n");
        }
    }
}
