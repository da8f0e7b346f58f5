//! sdk-sequence: message templates (one name each per tenant, on one
//! channel) and sequences, ordered steps that each send a template of the
//! tenant after a delay. A sequence's steps are checked against the
//! tenant's templates when it is created or changed; templates are never
//! deleted, so a step always names one. A template's subject and body
//! change; a sequence's name and steps change while it is `active`, until
//! it is `archived`, for good (409 after).
//!
//! A CRM contact of the tenant is enrolled in an active sequence: the
//! enrolment copies the steps with the time each is due (enrolment time
//! plus the delays up to and including the step), is `active` until the
//! last step's time has passed (then `completed`, computed on read) or it
//! is `cancelled`. The hub sends nothing itself: the due times are the
//! schedule a sender works from.

use std::collections::HashSet;

use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_template, list_templates))
        .routes(routes!(get_template, update_template))
        .routes(routes!(create_sequence, list_sequences))
        .routes(routes!(get_sequence, update_sequence))
        .routes(routes!(archive))
        .routes(routes!(enroll, list_enrollments))
        .routes(routes!(get_enrollment))
        .routes(routes!(cancel_enrollment))
}

/// The channels a template is written for: the words of [`Channel`].
pub const CHANNELS: [&str; 5] = ["email", "sms", "whatsapp", "push", "voice"];

stored_enum! {
    /// A channel messages go out on (templates, notifications, suppressions,
    /// quiet hours).
    #[schema(as = OutreachChannel)]
    pub enum Channel { Email = "email", Sms = "sms", Whatsapp = "whatsapp", Push = "push", Voice = "voice" }
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = SequenceTemplate)]
struct Template {
    template_id: Id,
    name: String,
    channel: Channel,
    /// Email only.
    subject: Option<String>,
    body: String,
    created_at: Timestamp,
    updated_at: Timestamp,
}

const TEMPLATE_COLUMNS: &str = "template_id, name, channel, subject, body, created_at, updated_at";

#[derive(Deserialize, ToSchema)]
#[schema(as = NewSequenceTemplate)]
struct NewTemplate {
    /// The caller's tenant (checked against the caller by `Body`).
    #[schema(format = "uuid")]
    #[allow(dead_code)]
    tenant_id: String,
    /// Unique in the tenant.
    #[schema(max_length = 200)]
    name: String,
    /// `email` when absent.
    channel: Option<Channel>,
    /// The subject line of an email; no other channel has one.
    #[schema(max_length = 300)]
    subject: Option<String>,
    /// The message.
    #[schema(max_length = 20000)]
    body: String,
}

/// Creates a message template.
#[utoipa::path(post, path = "/api/sequences/templates", tag = "sdk-sequence", request_body = NewTemplate,
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "body": { "tenant_id": "{tenant_id}", "name": "t-{unique}", "subject": "race", "body": "hello" } }))),
    responses((status = 201, description = "the template", body = Data<Template>)))]
async fn create_template(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewTemplate>) -> ApiResult<Created<Template>> {
    let body = body.checked()?;
    let name = body.name.trim();
    let channel = body.channel.unwrap_or(Channel::Email);
    let subject = Check::optional(&body.subject);
    if subject.is_some() && channel != Channel::Email {
        return Err(ApiError::invalid("subject is for the email channel only"));
    }
    let text = body.body.trim();
    let mut tx = state.db.begin().await?;
    let sql = format!(
        "INSERT INTO sequence_template (template_id, tenant_id, name, channel, subject, body, created_by, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8) ON CONFLICT (tenant_id, name) DO NOTHING RETURNING {TEMPLATE_COLUMNS}"
    );
    let made: Option<Template> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(name)
        .bind(channel)
        .bind(&subject)
        .bind(text)
        .bind(audit::actor_of(&ctx).1)
        .bind(db::now())
        .fetch_optional(&mut *tx)
        .await?;
    let template = made.ok_or_else(|| ApiError::Conflict(format!("the tenant has a template named {name}")))?;
    audit::record(&mut tx, &ctx, events::SEQUENCE_TEMPLATE_CREATED, json!({ "template_id": template.template_id, "channel": channel })).await?;
    tx.commit().await?;
    Ok(created(template))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct TemplateFilter {
    /// When given, the caller's tenant.
    #[param(format = "uuid")]
    tenant_id: Option<String>,
    #[param(inline)]
    channel: Option<Channel>,
}

/// The tenant's templates, newest first.
#[utoipa::path(get, path = "/api/sequences/templates", tag = "sdk-sequence", params(TemplateFilter, Page),
    responses((status = 200, description = "one page of templates", body = ListOf<Template>)))]
async fn list_templates(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<TemplateFilter>, page: Page) -> ApiResult<ListOf<Template>> {
    let channel = q.channel.map_or("", Channel::as_str);
    ctx.check_tenant(q.tenant_id.as_deref())?;
    let listing = Listing {
        table: "sequence_template",
        columns: TEMPLATE_COLUMNS,
        filter: "tenant_id = $1 AND ($2 = '' OR channel = $2)",
        order: "created_at DESC, template_id DESC",
    };
    page.list::<Template>(&state.db.read, &listing, &[&ctx.tenant_id, channel]).await
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
struct Sequence {
    sequence_id: Id,
    name: String,
    /// In order: `{ position, template_id, delay_seconds }`, the delay
    /// counted from the previous step (from enrolment for the first).
    #[sqlx(try_from = "String")]
    #[schema(value_type = Vec<Object>)]
    steps: JsonText,
    status: SequenceStatus,
    created_at: Timestamp,
    updated_at: Timestamp,
}

stored_enum! {
    /// Whether a sequence is in use: `active`, or `archived` for good.
    #[schema(as = SequenceStatus)]
    enum SequenceStatus { Active = "active", Archived = "archived" }
}

const SEQUENCE_COLUMNS: &str = "sequence_id, name, steps, status, created_at, updated_at";

#[derive(Deserialize, ToSchema)]
struct NewSequence {
    /// Unique in the tenant.
    #[schema(max_length = 200)]
    name: String,
    /// The steps, in order.
    #[schema(min_items = 1, max_items = 50)]
    steps: Vec<NewStep>,
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewSequenceStep)]
struct NewStep {
    /// A template of the tenant.
    #[schema(format = "uuid")]
    template_id: String,
    /// The wait before the step in seconds (at most 90 days), counted
    /// from the previous step (from enrolment for the first); 0 when
    /// absent.
    #[schema(minimum = 0, maximum = 7776000)]
    delay_seconds: Option<i64>,
}

/// Creates a sequence of template steps.
#[utoipa::path(post, path = "/api/sequences", tag = "sdk-sequence", request_body = NewSequence,
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/api/sequences/templates", { "tenant_id": "{tenant_id}", "name": "t-{unique}", "body": "hello" }]], "body": { "name": "s-{unique}", "steps": [{ "template_id": "{template_id}", "delay_seconds": 60 }] } }))),
    responses((status = 201, description = "the sequence", body = Data<Sequence>)))]
async fn create_sequence(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewSequence>) -> ApiResult<Created<Sequence>> {
    let body = body.checked()?;
    let name = body.name.trim();
    let mut tx = state.db.begin().await?;
    let (steps, named) = checked_steps(&mut tx, &ctx.tenant_id, &body.steps).await?;
    let sql = format!(
        "INSERT INTO sequence_sequence (sequence_id, tenant_id, name, steps, status, created_by, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, 'active', $5, $6, $6) ON CONFLICT (tenant_id, name) DO NOTHING RETURNING {SEQUENCE_COLUMNS}"
    );
    let made: Option<Sequence> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(name)
        .bind(Value::from(steps.clone()).to_string())
        .bind(audit::actor_of(&ctx).1)
        .bind(db::now())
        .fetch_optional(&mut *tx)
        .await?;
    let sequence = made.ok_or_else(|| ApiError::Conflict(format!("the tenant has a sequence named {name}")))?;
    let payload = json!({ "sequence_id": sequence.sequence_id, "steps": steps.len(), "template_ids": named });
    audit::record(&mut tx, &ctx, events::SEQUENCE_CREATED, payload).await?;
    tx.commit().await?;
    Ok(created(sequence))
}

/// The steps as stored (`{ position, template_id, delay_seconds }`), each
/// naming a template of the tenant (400 naming each that does not), and
/// the distinct templates they name.
async fn checked_steps(tx: &mut Tx, tenant_id: &str, given: &[NewStep]) -> ApiResult<(Vec<Value>, Vec<String>)> {
    let steps: Vec<Value> = given
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let template = path_id(s.template_id.trim()).map(|u| u.to_string()).unwrap_or_default();
            json!({ "position": i + 1, "template_id": template, "delay_seconds": s.delay_seconds.unwrap_or(0) })
        })
        .collect();
    let named: HashSet<&str> = steps.iter().filter_map(|s| s["template_id"].as_str()).collect();
    let named: Vec<String> = named.into_iter().map(str::to_string).collect();
    let sql = format!("SELECT template_id FROM sequence_template WHERE tenant_id = $1 AND template_id IN ({})", db::placeholders(2, named.len()));
    let mut query = sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(sql)).bind(tenant_id);
    for t in &named {
        query = query.bind(t);
    }
    let known: HashSet<String> = query.fetch_all(&mut **tx).await?.into_iter().collect();
    let unknown: Vec<String> = steps
        .iter()
        .enumerate()
        .filter(|(_, s)| !known.contains(s["template_id"].as_str().unwrap_or_default()))
        .map(|(i, _)| format!("steps[{i}].template_id is not a template of this tenant"))
        .collect();
    if !unknown.is_empty() {
        return Err(ApiError::Validation(unknown));
    }
    Ok((steps, named))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct SequenceFilter {
    /// When given, the caller's tenant.
    #[param(format = "uuid")]
    tenant_id: Option<String>,
    #[param(inline)]
    status: Option<SequenceStatus>,
}

/// The tenant's sequences, newest first.
#[utoipa::path(get, path = "/api/sequences", tag = "sdk-sequence", params(SequenceFilter, Page),
    responses((status = 200, description = "one page of sequences", body = ListOf<Sequence>)))]
async fn list_sequences(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<SequenceFilter>, page: Page) -> ApiResult<ListOf<Sequence>> {
    ctx.check_tenant(q.tenant_id.as_deref())?;
    let status = q.status.map_or("", SequenceStatus::as_str);
    let listing = Listing {
        table: "sequence_sequence",
        columns: SEQUENCE_COLUMNS,
        filter: "tenant_id = $1 AND ($2 = '' OR status = $2)",
        order: "created_at DESC, sequence_id DESC",
    };
    page.list::<Sequence>(&state.db.read, &listing, &[&ctx.tenant_id, status]).await
}

async fn find_template(exec: &mut Tx, tenant_id: &str, id: &str) -> ApiResult<Template> {
    let sql = format!("SELECT {TEMPLATE_COLUMNS} FROM sequence_template WHERE tenant_id = $1 AND template_id = $2");
    let found: Option<Template> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(id).fetch_optional(&mut **exec).await?;
    found.ok_or(ApiError::NotFound)
}

/// One template.
#[utoipa::path(get, path = "/api/sequences/templates/{template_id}", tag = "sdk-sequence", params(("template_id" = String, Path, description = "the template")),
    responses((status = 200, description = "the template", body = Data<Template>)))]
async fn get_template(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Template>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.read.begin().await?;
    let template = find_template(&mut tx, &ctx.tenant_id, &id).await?;
    tx.commit().await?;
    Ok(ok(template))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = SequenceTemplateUpdate)]
struct TemplateUpdate {
    /// The subject line; an email template's only.
    #[schema(max_length = 300)]
    subject: Option<String>,
    /// The message.
    #[schema(max_length = 20000)]
    body: Option<String>,
}

/// Changes a template's subject or body (what is absent stays; at least
/// one is given); the sequences naming it send the new text from then on.
#[utoipa::path(patch, path = "/api/sequences/templates/{template_id}", tag = "sdk-sequence", request_body = TemplateUpdate,
    params(("template_id" = String, Path, description = "the template")),
    extensions(("x-concurrency" = json!({ "outcome": "independent",
        "given": [["POST", "/api/sequences/templates", { "tenant_id": "{tenant_id}", "name": "t-{unique}", "subject": "race", "body": "hello" }]],
        "body": { "subject": "race again", "body": "hello again" } }))),
    responses((status = 200, description = "the template", body = Data<Template>)))]
async fn update_template(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<TemplateUpdate>) -> ApiResult<Data<Template>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    // A template's channel never changes: what is read here holds.
    let current = find_template(&mut tx, &ctx.tenant_id, &id).await?;
    let body = body.checked()?;
    let subject = Check::optional(&body.subject);
    let text = Check::optional(&body.body);
    let mut check = Check::new();
    if subject.is_none() && text.is_none() {
        check.fail("give at least one of subject, body");
    }
    if subject.is_some() && current.channel != Channel::Email {
        check.fail("subject is for the email channel only");
    }
    check.finish()?;
    let sql = format!(
        "UPDATE sequence_template SET subject = COALESCE($3, subject), body = COALESCE($4, body), updated_at = $5 \
         WHERE tenant_id = $1 AND template_id = $2 RETURNING {TEMPLATE_COLUMNS}"
    );
    let template: Template =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).bind(&subject).bind(&text).bind(db::now()).fetch_one(&mut *tx).await?;
    let payload = json!({ "template_id": id, "subject_changed": subject.is_some(), "body_changed": text.is_some() });
    audit::record(&mut tx, &ctx, events::SEQUENCE_TEMPLATE_UPDATED, payload).await?;
    tx.commit().await?;
    Ok(ok(template))
}

/// A sequence as its changes lock it.
const SEQUENCE: Stateful = Stateful { noun: "sequence", table: "sequence_sequence", key: "sequence_id", state: "status" };

async fn find_sequence(exec: &mut Tx, tenant_id: &str, id: &str) -> ApiResult<Sequence> {
    let sql = format!("SELECT {SEQUENCE_COLUMNS} FROM sequence_sequence WHERE tenant_id = $1 AND sequence_id = $2");
    let found: Option<Sequence> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(id).fetch_optional(&mut **exec).await?;
    found.ok_or(ApiError::NotFound)
}

/// One sequence.
#[utoipa::path(get, path = "/api/sequences/{sequence_id}", tag = "sdk-sequence", params(("sequence_id" = String, Path, description = "the sequence")),
    responses((status = 200, description = "the sequence", body = Data<Sequence>)))]
async fn get_sequence(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Sequence>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.read.begin().await?;
    let sequence = find_sequence(&mut tx, &ctx.tenant_id, &id).await?;
    tx.commit().await?;
    Ok(ok(sequence))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = SequenceUpdate)]
struct SequenceUpdate {
    /// Unique in the tenant.
    #[schema(max_length = 200)]
    name: Option<String>,
    /// The steps, in order, replacing the old ones.
    #[schema(min_items = 1, max_items = 50)]
    steps: Option<Vec<NewStep>>,
}

/// Renames an active sequence or replaces its steps (what is absent
/// stays; at least one is given). An archived sequence is not changed
/// (409).
#[utoipa::path(patch, path = "/api/sequences/{sequence_id}", tag = "sdk-sequence", request_body = SequenceUpdate,
    params(("sequence_id" = String, Path, description = "the sequence")),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [
        ["POST", "/api/sequences/templates", { "tenant_id": "{tenant_id}", "name": "t-{unique}", "body": "hello" }],
        ["POST", "/api/sequences", { "name": "s-{unique}", "steps": [{ "template_id": "{template_id}" }] }]],
        "body": { "steps": [{ "template_id": "{template_id}", "delay_seconds": 120 }] } }))),
    responses((status = 200, description = "the sequence", body = Data<Sequence>)))]
async fn update_sequence(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<SequenceUpdate>) -> ApiResult<Data<Sequence>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    // The sequence's row is locked until the change is committed: changes
    // of one sequence, and its archiving, come one after another.
    let status: SequenceStatus = SEQUENCE.lock(&mut tx, &ctx.tenant_id, &id).await?.ok_or(ApiError::NotFound)?;
    let body = body.checked()?;
    let name = Check::optional(&body.name);
    if name.is_none() && body.steps.is_none() {
        return Err(ApiError::invalid("give at least one of name, steps"));
    }
    let steps = match &body.steps {
        Some(given) => Some(checked_steps(&mut tx, &ctx.tenant_id, given).await?),
        None => None,
    };
    if status == SequenceStatus::Archived {
        return Err(ApiError::Conflict("the sequence is archived: an archived sequence is not changed".into()));
    }
    if let Some(n) = &name {
        let taken: Option<i64> = sqlx::query_scalar("SELECT 1 FROM sequence_sequence WHERE tenant_id = $1 AND name = $2 AND sequence_id <> $3")
            .bind(&ctx.tenant_id)
            .bind(n)
            .bind(&id)
            .fetch_optional(&mut *tx)
            .await?;
        if taken.is_some() {
            return Err(ApiError::Conflict(format!("the tenant has a sequence named {n}")));
        }
    }
    let steps_text = steps.as_ref().map(|(s, _)| Value::from(s.clone()).to_string());
    let sql = format!(
        "UPDATE sequence_sequence SET name = COALESCE($3, name), steps = COALESCE($4, steps), updated_at = $5 \
         WHERE tenant_id = $1 AND sequence_id = $2 RETURNING {SEQUENCE_COLUMNS}"
    );
    let sequence: Sequence =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).bind(&name).bind(&steps_text).bind(db::now()).fetch_one(&mut *tx).await?;
    let payload = json!({ "sequence_id": id, "name_changed": name.is_some(), "steps": steps.as_ref().map(|(s, _)| s.len()),
        "template_ids": steps.as_ref().map(|(_, t)| t) });
    audit::record(&mut tx, &ctx, events::SEQUENCE_UPDATED, payload).await?;
    tx.commit().await?;
    Ok(ok(sequence))
}

/// Archives a sequence, for good: it is kept, listed with its status, and
/// no longer changed (409 when archived already).
#[utoipa::path(post, path = "/api/sequences/{sequence_id}/archive", tag = "sdk-sequence", params(("sequence_id" = String, Path, description = "the sequence")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [
        ["POST", "/api/sequences/templates", { "tenant_id": "{tenant_id}", "name": "t-{unique}", "body": "hello" }],
        ["POST", "/api/sequences", { "name": "s-{unique}", "steps": [{ "template_id": "{template_id}" }] }]] }))),
    responses((status = 200, description = "the sequence, archived", body = Data<Sequence>)))]
async fn archive(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Sequence>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    let sql = format!(
        "UPDATE sequence_sequence SET status = 'archived', updated_at = $3 WHERE tenant_id = $1 AND sequence_id = $2 AND status = 'active' \
         RETURNING {SEQUENCE_COLUMNS}"
    );
    let archived: Option<Sequence> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).bind(db::now()).fetch_optional(&mut *tx).await?;
    // The guard decides: of two archivings at once, one archives and the
    // other finds the sequence archived (409).
    let sequence = SEQUENCE.settle(&mut tx, &ctx.tenant_id, &id, archived, "only an active sequence can be archived").await?;
    audit::record(&mut tx, &ctx, events::SEQUENCE_ARCHIVED, json!({ "sequence_id": id })).await?;
    tx.commit().await?;
    Ok(ok(sequence))
}

stored_enum! {
    /// Where an enrolment is: `active` while a step's time is still to
    /// come, `completed` once the last step's time has passed, or
    /// `cancelled` before that.
    #[schema(as = SequenceEnrollmentStatus)]
    enum EnrollmentStatus { Active = "active", Completed = "completed", Cancelled = "cancelled" }
}

/// One step of an enrolment, as the sequence had it when the contact was
/// enrolled, with the time it is due.
#[derive(Serialize, ToSchema)]
#[schema(as = SequenceEnrollmentStep)]
#[allow(dead_code)]
struct EnrollmentStep {
    /// 1, 2, ... in order.
    position: i64,
    /// The template the step sends.
    #[schema(format = "uuid")]
    template_id: String,
    /// The template's channel.
    channel: Channel,
    /// The wait after the previous step (after enrolment for the first).
    delay_seconds: i64,
    /// Enrolment time plus the delays of the steps up to this one.
    #[schema(format = DateTime)]
    due_at: String,
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = SequenceEnrollment)]
struct Enrollment {
    enrollment_id: Id,
    sequence_id: Id,
    /// The CRM contact enrolled.
    contact_id: Id,
    status: EnrollmentStatus,
    /// The steps with their due times, in order (copied at enrolment: a
    /// later change of the sequence's steps leaves them as they are).
    #[sqlx(try_from = "String")]
    #[schema(value_type = Vec<EnrollmentStep>)]
    steps: JsonText,
    enrolled_at: Timestamp,
    /// The last step's due time: the enrolment is `completed` from then.
    ends_at: Timestamp,
    cancelled_at: Option<Timestamp>,
    enrolled_by: String,
}

/// The columns of an enrolment, its status as of the instant bound to the
/// placeholder `$now` (an `active` row past its end is `completed`).
macro_rules! enrollment_columns {
    ($now:literal) => {
        concat!(
            "enrollment_id, sequence_id, contact_id, CASE WHEN status = 'active' AND ends_at <= ",
            $now,
            " THEN 'completed' ELSE status END AS status, steps, enrolled_at, ends_at, cancelled_at, enrolled_by"
        )
    };
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewSequenceEnrollment)]
struct NewEnrollment {
    /// A CRM contact of the tenant (not erased).
    #[schema(format = "uuid")]
    contact_id: String,
}

/// The addresses of a contact a channel writes to: its email addresses for
/// `email`, its phone numbers for `sms`, `whatsapp` and `voice`; a contact
/// carries no `push` address.
fn addresses_on(channel: Channel, emails: &[String], phones: &[String]) -> Vec<String> {
    match channel {
        Channel::Email => emails.to_vec(),
        Channel::Sms | Channel::Whatsapp | Channel::Voice => phones.to_vec(),
        Channel::Push => Vec::new(),
    }
}

fn strings(json: &str) -> Vec<String> {
    serde_json::from_str::<Vec<String>>(json).unwrap_or_default()
}

/// Enrols a CRM contact of the tenant in an active sequence. The answer
/// carries each step's due time. A contact already enrolled and not yet
/// completed or cancelled is not enrolled twice: the answer is that
/// enrolment (200, first write wins). An archived sequence enrols nobody
/// (409), and neither does a contact every address of which is on the
/// suppression list on a channel a step writes on (409 naming the channel).
#[utoipa::path(post, path = "/api/sequences/{sequence_id}/enrollments", tag = "sdk-sequence", request_body = NewEnrollment,
    params(("sequence_id" = String, Path, description = "the sequence")),
    extensions(("x-concurrency" = json!({ "outcome": "first-creates", "events": 1, "given": [
        ["POST", "/api/sequences/templates", { "tenant_id": "{tenant_id}", "name": "t-{unique}", "body": "hello" }],
        ["POST", "/api/sequences", { "name": "s-{unique}", "steps": [{ "template_id": "{template_id}", "delay_seconds": 3600 }] }],
        ["POST", "/api/crm/contacts", { "name": "race", "emails": ["c-{unique}@races.example.com"] }]],
        "body": { "contact_id": "{contact_id}" } }))),
    responses((status = 201, description = "the enrolment, new", body = Data<Enrollment>),
        (status = 200, description = "the contact's enrolment in the sequence that is still active", body = Data<Enrollment>)))]
async fn enroll(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<NewEnrollment>) -> ApiResult<Response> {
    use axum::response::IntoResponse;
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    // The sequence's row is locked until the enrolment is committed: an
    // archiving waits for it, or it finds the sequence archived.
    let status: SequenceStatus = SEQUENCE.lock(&mut tx, &ctx.tenant_id, &id).await?.ok_or(ApiError::NotFound)?;
    let body = body.checked()?;
    let contact = canonical_uuid(&body.contact_id);
    // The CRM's contact table, read where it is: outreach does not depend on
    // the CRM group's crate. The row is locked until the enrolment is
    // committed (PostgreSQL): an erasure of the contact waits for it, then
    // cancels it, or this finds the contact erased.
    let sql =
        format!("SELECT emails, phones FROM crm_contact WHERE tenant_id = $1 AND contact_id = $2 AND erased_at IS NULL{}", state.db.backend.no_key_update());
    let found: Option<(String, String)> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&contact).fetch_optional(&mut *tx).await?;
    let (emails, phones) = found.ok_or_else(|| ApiError::invalid("contact_id is not a contact of this tenant"))?;
    let (emails, phones) = (strings(&emails), strings(&phones));
    if status == SequenceStatus::Archived {
        return Err(ApiError::Conflict("the sequence is archived: an archived sequence enrols nobody".into()));
    }
    let sequence = find_sequence(&mut tx, &ctx.tenant_id, &id).await?;
    let stored: Vec<Value> = sequence.steps.0.as_array().cloned().unwrap_or_default();
    // The channels of the templates the steps send (templates are never
    // deleted: each step's is found).
    let named: Vec<&str> = stored.iter().filter_map(|s| s["template_id"].as_str()).collect::<HashSet<_>>().into_iter().collect();
    let sql = format!("SELECT template_id, channel FROM sequence_template WHERE tenant_id = $1 AND template_id IN ({})", db::placeholders(2, named.len()));
    let mut query = sqlx::query_as::<_, (String, Channel)>(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id);
    for n in &named {
        query = query.bind(*n);
    }
    let channels = query.fetch_all(&mut *tx).await?;
    let channel_of = |template: &str| channels.iter().find(|(t, _)| t == template).map(|(_, c)| *c);
    // The suppression list: refused when, on a channel a step writes on,
    // the contact has addresses and every one of them is suppressed.
    let mut used: Vec<Channel> = Vec::new();
    for s in &stored {
        if let Some(c) = channel_of(s["template_id"].as_str().unwrap_or_default())
            && !used.contains(&c)
        {
            used.push(c);
        }
    }
    let mut blocked = Vec::new();
    for &channel in &used {
        let addresses = addresses_on(channel, &emails, &phones);
        if addresses.is_empty() {
            continue;
        }
        let sql = format!(
            "SELECT COUNT(DISTINCT address) FROM conversation_suppression WHERE tenant_id = $1 AND channel = $2 AND address IN ({})",
            db::placeholders(3, addresses.len())
        );
        let mut query = sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(channel);
        for a in &addresses {
            query = query.bind(a);
        }
        if query.fetch_one(&mut *tx).await? as usize == addresses.len() {
            blocked.push(channel.as_str());
        }
    }
    if !blocked.is_empty() {
        return Err(ApiError::Conflict(format!(
            "every {} address of the contact is on the suppression list, and a step of the sequence writes on it",
            blocked.join(", ")
        )));
    }
    let now = chrono::Utc::now();
    let enrolled_at = db::format_time(now);
    let mut elapsed = 0i64;
    let mut steps = Vec::new();
    for s in &stored {
        let delay = s["delay_seconds"].as_i64().unwrap_or(0);
        elapsed += delay;
        let template = s["template_id"].as_str().unwrap_or_default();
        steps.push(json!({
            "position": s["position"], "template_id": template, "channel": channel_of(template).map(Channel::as_str),
            "delay_seconds": delay, "due_at": db::format_time(now + chrono::Duration::seconds(elapsed)),
        }));
    }
    let ends_at = db::format_time(now + chrono::Duration::seconds(elapsed));
    // An enrolment of the contact past its end is completed: stored so,
    // it leaves the place of the one active enrolment to this one.
    sqlx::query(
        "UPDATE sequence_enrollment SET status = 'completed' \
         WHERE tenant_id = $1 AND sequence_id = $2 AND contact_id = $3 AND status = 'active' AND ends_at <= $4",
    )
    .bind(&ctx.tenant_id)
    .bind(&id)
    .bind(&contact)
    .bind(&enrolled_at)
    .execute(&mut *tx)
    .await?;
    let insert = concat!(
        "INSERT INTO sequence_enrollment (enrollment_id, tenant_id, sequence_id, contact_id, status, steps, enrolled_at, ends_at, enrolled_by) \
         VALUES ($1, $2, $3, $4, 'active', $5, $6, $7, $8) ON CONFLICT DO NOTHING RETURNING ",
        enrollment_columns!("$9")
    );
    let read = concat!(
        "SELECT ",
        enrollment_columns!("$4"),
        " FROM sequence_enrollment WHERE tenant_id = $1 AND sequence_id = $2 AND contact_id = $3 AND status = 'active'"
    );
    let (enrollment, written): (Enrollment, _) = insert_or_read(
        &mut tx,
        sqlx::query_as(insert)
            .bind(db::new_id())
            .bind(&ctx.tenant_id)
            .bind(&id)
            .bind(&contact)
            .bind(Value::from(steps).to_string())
            .bind(&enrolled_at)
            .bind(&ends_at)
            .bind(audit::actor_of(&ctx).1)
            .bind(&enrolled_at),
        sqlx::query_as(read).bind(&ctx.tenant_id).bind(&id).bind(&contact).bind(&enrolled_at),
    )
    .await?;
    if written == Written::Found {
        tx.rollback().await?;
        return Ok(ok(enrollment).into_response());
    }
    let payload = json!({ "enrollment_id": enrollment.enrollment_id, "sequence_id": id, "contact_id": contact, "steps": stored.len(),
        "ends_at": ends_at });
    audit::record(&mut tx, &ctx, events::SEQUENCE_ENROLLMENT_STARTED, payload).await?;
    tx.commit().await?;
    Ok(created(enrollment).into_response())
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct EnrollmentFilter {
    #[param(inline)]
    status: Option<EnrollmentStatus>,
    /// Only this contact's enrolments.
    #[param(format = "uuid")]
    contact_id: Option<String>,
}

/// The sequence's enrolments, newest first.
#[utoipa::path(get, path = "/api/sequences/{sequence_id}/enrollments", tag = "sdk-sequence", params(("sequence_id" = String, Path, description = "the sequence"), EnrollmentFilter, Page),
    responses((status = 200, description = "one page of enrolments", body = ListOf<Enrollment>)))]
async fn list_enrollments(
    State(state): State<AppState>,
    Tenant(ctx): Tenant,
    Path(id): Path<String>,
    Params(q): Params<EnrollmentFilter>,
    page: Page,
) -> ApiResult<ListOf<Enrollment>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.read.begin().await?;
    find_sequence(&mut tx, &ctx.tenant_id, &id).await?;
    tx.commit().await?;
    let contact = match Check::optional(&q.contact_id) {
        None => String::new(),
        Some(c) => canonical_uuid(&c),
    };
    let status = q.status.map_or("", EnrollmentStatus::as_str);
    let listing = Listing {
        table: "sequence_enrollment",
        columns: enrollment_columns!("$5"),
        filter: "tenant_id = $1 AND sequence_id = $2 AND ($3 = '' OR contact_id = $3) AND ($4 = '' \
                 OR ($4 = 'active' AND status = 'active' AND ends_at > $5) \
                 OR ($4 = 'completed' AND (status = 'completed' OR (status = 'active' AND ends_at <= $5))) \
                 OR ($4 = 'cancelled' AND status = 'cancelled'))",
        order: "enrolled_at DESC, enrollment_id DESC",
    };
    page.list::<Enrollment>(&state.db.read, &listing, &[&ctx.tenant_id, &id, &contact, status, &db::now()]).await
}

async fn find_enrollment(exec: &mut Tx, tenant_id: &str, sequence_id: &str, id: &str) -> ApiResult<Enrollment> {
    let sql = concat!("SELECT ", enrollment_columns!("$4"), " FROM sequence_enrollment WHERE tenant_id = $1 AND sequence_id = $2 AND enrollment_id = $3");
    let found: Option<Enrollment> = sqlx::query_as(sql).bind(tenant_id).bind(sequence_id).bind(id).bind(db::now()).fetch_optional(&mut **exec).await?;
    found.ok_or(ApiError::NotFound)
}

/// One enrolment of the sequence.
#[utoipa::path(get, path = "/api/sequences/{sequence_id}/enrollments/{enrollment_id}", tag = "sdk-sequence",
    params(("sequence_id" = String, Path, description = "the sequence"), ("enrollment_id" = String, Path, description = "the enrolment")),
    responses((status = 200, description = "the enrolment", body = Data<Enrollment>)))]
async fn get_enrollment(State(state): State<AppState>, Tenant(ctx): Tenant, Path((sequence, id)): Path<(String, String)>) -> ApiResult<Data<Enrollment>> {
    let (sequence, id) = (path_id(&sequence)?.to_string(), path_id(&id)?.to_string());
    let mut tx = state.db.read.begin().await?;
    let enrollment = find_enrollment(&mut tx, &ctx.tenant_id, &sequence, &id).await?;
    tx.commit().await?;
    Ok(ok(enrollment))
}

/// Cancels an active enrolment: its remaining steps are not to be sent.
/// A completed or cancelled enrolment is not cancelled (409).
#[utoipa::path(post, path = "/api/sequences/{sequence_id}/enrollments/{enrollment_id}/cancel", tag = "sdk-sequence",
    params(("sequence_id" = String, Path, description = "the sequence"), ("enrollment_id" = String, Path, description = "the enrolment")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [
        ["POST", "/api/sequences/templates", { "tenant_id": "{tenant_id}", "name": "t-{unique}", "body": "hello" }],
        ["POST", "/api/sequences", { "name": "s-{unique}", "steps": [{ "template_id": "{template_id}", "delay_seconds": 3600 }] }],
        ["POST", "/api/crm/contacts", { "name": "race", "emails": ["c-{unique}@races.example.com"] }],
        ["POST", "/api/sequences/{sequence_id}/enrollments", { "contact_id": "{contact_id}" }]] }))),
    responses((status = 200, description = "the enrolment, cancelled", body = Data<Enrollment>)))]
async fn cancel_enrollment(State(state): State<AppState>, Tenant(ctx): Tenant, Path((sequence, id)): Path<(String, String)>) -> ApiResult<Data<Enrollment>> {
    let (sequence, id) = (path_id(&sequence)?.to_string(), path_id(&id)?.to_string());
    let mut tx = state.db.begin().await?;
    let now = db::now();
    let sql = concat!(
        "UPDATE sequence_enrollment SET status = 'cancelled', cancelled_at = $4 \
         WHERE tenant_id = $1 AND sequence_id = $2 AND enrollment_id = $3 AND status = 'active' AND ends_at > $4 RETURNING ",
        enrollment_columns!("$4")
    );
    let cancelled: Option<Enrollment> = sqlx::query_as(sql).bind(&ctx.tenant_id).bind(&sequence).bind(&id).bind(&now).fetch_optional(&mut *tx).await?;
    // The guard decides: of two cancellings at once, one cancels and the
    // other finds the enrolment cancelled (409), as one after its end finds
    // it completed.
    let Some(enrollment) = cancelled else {
        let found = find_enrollment(&mut tx, &ctx.tenant_id, &sequence, &id).await?;
        return Err(ApiError::Conflict(format!("the enrollment is {}: only an active enrollment can be cancelled", found.status.as_str())));
    };
    let payload = json!({ "enrollment_id": id, "sequence_id": sequence, "contact_id": enrollment.contact_id });
    audit::record(&mut tx, &ctx, events::SEQUENCE_ENROLLMENT_CANCELLED, payload).await?;
    tx.commit().await?;
    Ok(ok(enrollment))
}
