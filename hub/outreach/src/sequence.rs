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

/// The channels a template is written for.
pub const CHANNELS: [&str; 5] = ["email", "sms", "whatsapp", "push", "voice"];
const MAX_STEPS: usize = 50;
/// The longest wait before a step: 90 days.
const MAX_DELAY_SECONDS: i64 = 90 * 24 * 3600;

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = SequenceTemplate)]
struct Template {
    template_id: String,
    name: String,
    /// `email`, `sms`, `whatsapp`, `push` or `voice`.
    channel: String,
    /// Email only.
    subject: Option<String>,
    body: String,
    created_at: String,
}

const TEMPLATE_COLUMNS: &str = "template_id, name, channel, subject, body, created_at";

#[derive(Deserialize, ToSchema)]
#[schema(as = NewSequenceTemplate)]
struct NewTemplate {
    /// The caller's tenant.
    #[schema(required = true, format = "uuid")]
    tenant_id: Option<String>,
    /// At most 200 characters, unique in the tenant.
    #[schema(required = true)]
    name: Option<String>,
    /// `email` (default), `sms`, `whatsapp`, `push` or `voice`.
    channel: Option<String>,
    /// The subject line of an email (at most 300 characters); no other
    /// channel has one.
    subject: Option<String>,
    /// The message (at most 20000 characters).
    #[schema(required = true)]
    body: Option<String>,
}

/// Creates a message template.
#[utoipa::path(post, path = "/api/sequences/templates", tag = "sdk-sequence", request_body = NewTemplate,
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "body": { "tenant_id": "{tenant_id}", "name": "t-{unique}", "subject": "race", "body": "hello" } }))),
    responses((status = 201, description = "the template", body = Data<Template>)))]
async fn create_template(State(state): State<AppState>, Tenant(ctx): Tenant, Lenient(body): Lenient<NewTemplate>) -> ApiResult<Response> {
    let mut check = Check::new();
    check.required("tenant_id", &body.tenant_id);
    let name = check.required("name", &body.name);
    if name.chars().count() > 200 {
        check.fail("name must be at most 200 characters");
    }
    let channel = Check::optional(&body.channel).unwrap_or_else(|| "email".to_string());
    check.one_of("channel", &channel, &CHANNELS);
    let subject = Check::optional(&body.subject);
    match &subject {
        Some(_) if channel != "email" && CHANNELS.contains(&channel.as_str()) => check.fail("subject is for the email channel only"),
        Some(s) if s.chars().count() > 300 => check.fail("subject must be at most 300 characters"),
        _ => {}
    }
    let text = check.required("body", &body.body);
    if text.chars().count() > 20_000 {
        check.fail("body must be at most 20000 characters");
    }
    check.finish()?;
    let mut tx = state.db.begin().await?;
    let sql = format!(
        "INSERT INTO sequence_template (template_id, tenant_id, name, channel, subject, body, created_by, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (tenant_id, name) DO NOTHING RETURNING {TEMPLATE_COLUMNS}"
    );
    let made: Option<Template> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(&name)
        .bind(&channel)
        .bind(&subject)
        .bind(&text)
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
    channel: Option<String>,
}

/// The tenant's templates, newest first.
#[utoipa::path(get, path = "/api/sequences/templates", tag = "sdk-sequence", params(TemplateFilter, Page),
    responses((status = 200, description = "one page of templates", body = ListOf<Template>)))]
async fn list_templates(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<TemplateFilter>, page: Page) -> ApiResult<Response> {
    let mut check = Check::new();
    let channel = Check::optional(&q.channel).unwrap_or_default();
    check.one_of("channel", &channel, &CHANNELS);
    check.finish()?;
    ctx.check_tenant(q.tenant_id.as_deref())?;
    let listing = Listing {
        table: "sequence_template",
        columns: TEMPLATE_COLUMNS,
        filter: "tenant_id = $1 AND ($2 = '' OR channel = $2)",
        order: "created_at DESC, template_id DESC",
    };
    page.list::<Template>(&state.db.read, &listing, &[&ctx.tenant_id, &channel]).await
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
struct Sequence {
    sequence_id: String,
    name: String,
    /// In order: `{ position, template_id, delay_seconds }`, the delay
    /// counted from the previous step (from enrolment for the first).
    #[sqlx(try_from = "String")]
    #[schema(value_type = Vec<Object>)]
    steps: JsonText,
    created_at: String,
}

const SEQUENCE_COLUMNS: &str = "sequence_id, name, steps, created_at";

#[derive(Deserialize, ToSchema)]
struct NewSequence {
    /// When given, the caller's tenant (checked by `Body`).
    #[schema(format = "uuid")]
    #[allow(dead_code)]
    tenant_id: Option<String>,
    /// At most 200 characters, unique in the tenant.
    #[schema(required = true)]
    name: Option<String>,
    /// 1 to 50 of `{ template_id, delay_seconds? }`: a template of the
    /// tenant, and the wait before it (0 to 7776000 seconds, default 0).
    #[schema(required = true, value_type = Vec<Object>)]
    steps: Option<Value>,
}

/// Creates a sequence of template steps.
#[utoipa::path(post, path = "/api/sequences", tag = "sdk-sequence", request_body = NewSequence,
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/api/sequences/templates", { "tenant_id": "{tenant_id}", "name": "t-{unique}", "body": "hello" }]], "body": { "name": "s-{unique}", "steps": [{ "template_id": "{template_id}", "delay_seconds": 60 }] } }))),
    responses((status = 201, description = "the sequence", body = Data<Sequence>)))]
async fn create_sequence(State(state): State<AppState>, Tenant(ctx): Tenant, Lenient(body): Lenient<NewSequence>) -> ApiResult<Response> {
    let mut check = Check::new();
    let name = check.required("name", &body.name);
    if name.chars().count() > 200 {
        check.fail("name must be at most 200 characters");
    }
    let mut steps = Vec::new();
    match &body.steps {
        Some(Value::Array(items)) if (1..=MAX_STEPS).contains(&items.len()) => {
            for (i, item) in items.iter().enumerate() {
                let at = format!("steps[{i}]");
                if !item.is_object() {
                    check.fail(format!("{at} must be an object"));
                    continue;
                }
                let template = check.required_uuid(&format!("{at}.template_id"), &item.get("template_id").and_then(Value::as_str).map(str::to_string));
                let delay = check.optional_int(&format!("{at}.delay_seconds"), item.get("delay_seconds"), 0, MAX_DELAY_SECONDS).unwrap_or(0);
                if let Some(t) = template {
                    steps.push(json!({ "position": i + 1, "template_id": t.to_string(), "delay_seconds": delay }));
                }
            }
        }
        _ => check.fail(format!("steps must be an array of 1 to {MAX_STEPS} steps")),
    }
    check.finish()?;
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
        .bind(&name)
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
async fn list_sequences(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<SequenceFilter>, page: Page) -> ApiResult<Response> {
    ctx.check_tenant(q.tenant_id.as_deref())?;
    let listing = Listing { table: "sequence_sequence", columns: SEQUENCE_COLUMNS, filter: "tenant_id = $1", order: "created_at DESC, sequence_id DESC" };
    page.list::<Sequence>(&state.db.read, &listing, &[&ctx.tenant_id]).await
}
