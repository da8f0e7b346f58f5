//! sdk-sequence: message templates (one name each per tenant, on one
//! channel) and sequences, ordered steps that each send a template of the
//! tenant after a delay. A sequence's steps are checked against the
//! tenant's templates when it is created or changed; templates are never
//! deleted, so a step always names one. A template's subject and body
//! change; a sequence's name and steps change while it is `active`, until
//! it is `archived`, for good (409 after).

use std::collections::HashSet;

use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_template, list_templates))
        .routes(routes!(get_template, update_template))
        .routes(routes!(create_sequence, list_sequences))
        .routes(routes!(get_sequence, update_sequence))
        .routes(routes!(archive))
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
