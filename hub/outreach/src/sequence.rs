//! sdk-sequence: message templates (one name each per tenant, on one
//! channel) and sequences, ordered steps that each send a template of the
//! tenant after a delay. A sequence's steps are checked against the
//! tenant's templates when it is created; templates are never deleted, so
//! a step always names one.

use std::collections::HashSet;

use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create_template, list_templates)).routes(routes!(create_sequence, list_sequences))
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
}

const TEMPLATE_COLUMNS: &str = "template_id, name, channel, subject, body, created_at";

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
        "INSERT INTO sequence_template (template_id, tenant_id, name, channel, subject, body, created_by, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (tenant_id, name) DO NOTHING RETURNING {TEMPLATE_COLUMNS}"
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
    created_at: Timestamp,
}

const SEQUENCE_COLUMNS: &str = "sequence_id, name, steps, created_at";

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
    let steps: Vec<Value> = body
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let template = path_id(s.template_id.trim()).map(|u| u.to_string()).unwrap_or_default();
            json!({ "position": i + 1, "template_id": template, "delay_seconds": s.delay_seconds.unwrap_or(0) })
        })
        .collect();
    let mut tx = state.db.begin().await?;
    let named: HashSet<&str> = steps.iter().filter_map(|s| s["template_id"].as_str()).collect();
    let named: Vec<&str> = named.into_iter().collect();
    let sql = format!("SELECT template_id FROM sequence_template WHERE tenant_id = $1 AND template_id IN ({})", db::placeholders(2, named.len()));
    let mut query = sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id);
    for t in &named {
        query = query.bind(*t);
    }
    let known: HashSet<String> = query.fetch_all(&mut *tx).await?.into_iter().collect();
    let unknown: Vec<String> = steps
        .iter()
        .enumerate()
        .filter(|(_, s)| !known.contains(s["template_id"].as_str().unwrap_or_default()))
        .map(|(i, _)| format!("steps[{i}].template_id is not a template of this tenant"))
        .collect();
    if !unknown.is_empty() {
        return Err(ApiError::Validation(unknown));
    }
    let sql = format!(
        "INSERT INTO sequence_sequence (sequence_id, tenant_id, name, steps, created_by, created_at) VALUES ($1, $2, $3, $4, $5, $6) \
         ON CONFLICT (tenant_id, name) DO NOTHING RETURNING {SEQUENCE_COLUMNS}"
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

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct SequenceFilter {
    /// When given, the caller's tenant.
    #[param(format = "uuid")]
    tenant_id: Option<String>,
}

/// The tenant's sequences, newest first.
#[utoipa::path(get, path = "/api/sequences", tag = "sdk-sequence", params(SequenceFilter, Page),
    responses((status = 200, description = "one page of sequences", body = ListOf<Sequence>)))]
async fn list_sequences(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<SequenceFilter>, page: Page) -> ApiResult<ListOf<Sequence>> {
    ctx.check_tenant(q.tenant_id.as_deref())?;
    let listing = Listing { table: "sequence_sequence", columns: SEQUENCE_COLUMNS, filter: "tenant_id = $1", order: "created_at DESC, sequence_id DESC" };
    page.list::<Sequence>(&state.db.read, &listing, &[&ctx.tenant_id]).await
}
