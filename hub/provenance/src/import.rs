//! sdk-import: the mapping templates imports use (which source column or
//! path fills which field of an entity). A template is versioned per slug:
//! publishing adds the next version, immutable, and (unless published
//! inactive) makes it the slug's one active version.

use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(publish, list)).routes(routes!(get_template)).routes(routes!(activate)).routes(routes!(deactivate))
}

/// Fields a mapping holds at most.
const MAX_FIELDS: usize = 500;

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = ImportTemplate)]
struct Template {
    template_id: Id,
    slug: String,
    version: i64,
    kind: Kind,
    /// What the rows become (`contact`, `account`, ...).
    entity: String,
    /// Target field to source column (or path).
    #[sqlx(try_from = "String")]
    #[schema(value_type = Object)]
    mapping: JsonText,
    #[sqlx(try_from = "i64")]
    #[schema(value_type = bool)]
    active: Flag,
    created_at: Timestamp,
}

const COLUMNS: &str = "template_id, slug, version, kind, entity, mapping, active, created_at";

fn valid_slug(s: &str) -> bool {
    (1..=128).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-'))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewImportTemplate)]
struct NewTemplate {
    /// 1 to 128 of `a-z 0-9 . _ -`.
    #[schema(max_length = 128)]
    slug: String,
    kind: Kind,
    #[schema(max_length = 64)]
    entity: String,
    /// 1 to 500 entries: target field (at most 128 characters) to a
    /// non-empty source column or path (at most 256 characters). Kept in
    /// the order written.
    #[schema(value_type = std::collections::HashMap<String, String>)]
    mapping: serde_json::Map<String, Value>,
    /// Make this version the slug's active one (default true).
    active: Option<bool>,
}

stored_enum! {
    /// A source format.
    #[schema(as = ImportKind)]
    enum Kind { Csv = "csv", Json = "json", Xlsx = "xlsx", Xml = "xml" }
}

/// Publishes the next version of a template.
#[utoipa::path(post, path = "/api/import/templates", tag = "sdk-import", request_body = NewTemplate,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "body": { "slug": "race-{unique}", "kind": "csv", "entity": "contact", "mapping": { "name": "Name" } } }))),
    responses((status = 201, description = "the version published", body = Data<Template>)))]
async fn publish(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewTemplate>) -> ApiResult<Created<Template>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let slug = body.slug.trim().to_string();
    if !valid_slug(&slug) {
        check.fail("slug must be 1 to 128 of a-z, 0-9, '.', '_' or '-'");
    }
    let kind = body.kind;
    let entity = body.entity.trim();
    if (1..=MAX_FIELDS).contains(&body.mapping.len()) {
        for (field, source) in &body.mapping {
            if source.as_str().is_none_or(|s| s.trim().is_empty() || s.len() > 256) || field.is_empty() || field.len() > 128 {
                check.fail(format!("mapping.{field} must map a field name (at most 128 characters) to a source column of 1 to 256 characters"));
            }
        }
    } else {
        check.fail(format!("mapping must be an object of 1 to {MAX_FIELDS} fields"));
    }
    check.finish()?;
    let active = body.active != Some(false);
    let mut tx = state.db.begin().await?;
    // Concurrent publishes of one slug each get a version of their own.
    let floor = "SELECT MAX(version) FROM import_template WHERE tenant_id = $1 AND slug = $3";
    let version = next_number(&mut tx, &ctx.tenant_id, &format!("import_template {slug}"), floor, &slug).await?;
    if active {
        sqlx::query("UPDATE import_template SET active = 0 WHERE tenant_id = $1 AND slug = $2 AND active = 1")
            .bind(&ctx.tenant_id)
            .bind(&slug)
            .execute(&mut *tx)
            .await?;
    }
    let sql = format!(
        "INSERT INTO import_template (template_id, tenant_id, slug, version, kind, entity, mapping, active, created_by, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING {COLUMNS}"
    );
    let template: Template = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(&slug)
        .bind(version)
        .bind(kind)
        .bind(entity)
        .bind(Value::Object(body.mapping).to_string())
        .bind(i64::from(active))
        .bind(audit::actor_of(&ctx).1)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
    let payload = json!({ "template_id": template.template_id, "slug": slug, "version": version, "active": active });
    audit::record(&mut tx, &ctx, events::IMPORT_TEMPLATE_PUBLISHED, payload).await?;
    tx.commit().await?;
    Ok(created(template))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct Filter {
    /// The caller's tenant.
    #[param(format = "uuid")]
    tenant_id: String,
    slug: Option<String>,
    #[param(inline)]
    kind: Option<Kind>,
    active: Option<bool>,
}

/// The document says this list's `limit` is clamped to 1..500.
type ClampedPage = Page<50, 500, true>;

/// Templates grouped by slug, newest version first.
#[utoipa::path(get, path = "/api/import/templates", tag = "sdk-import", params(Filter, ClampedPage),
    responses((status = 200, description = "one page of templates", body = ListOf<Template>)))]
async fn list(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<Filter>, page: ClampedPage) -> ApiResult<ListOf<Template>> {
    let active = match q.active {
        None => "",
        Some(true) => "1",
        Some(false) => "0",
    };
    let kind = q.kind.map_or("", Kind::as_str);
    ctx.check_tenant(Some(&q.tenant_id))?;
    let slug = Check::optional(&q.slug).unwrap_or_default();
    let listing = Listing {
        table: "import_template",
        columns: COLUMNS,
        filter: "tenant_id = $1 AND ($2 = '' OR slug = $2) AND ($3 = '' OR kind = $3) AND ($4 = '' OR CAST(active AS TEXT) = $4)",
        order: "slug, version DESC",
    };
    page.list::<Template>(&state.db.read, &listing, &[&ctx.tenant_id, &slug, kind, active]).await
}

/// One template version of the tenant.
#[utoipa::path(get, path = "/api/import/templates/{template_id}", tag = "sdk-import",
    params(("template_id" = String, Path, description = "the template version")),
    responses((status = 200, description = "the template version", body = Data<Template>)))]
async fn get_template(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Template>> {
    let id = path_id(&id)?.to_string();
    let sql = format!("SELECT {COLUMNS} FROM import_template WHERE tenant_id = $1 AND template_id = $2");
    let found: Option<Template> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&state.db.read).await?;
    Ok(ok(found.ok_or(ApiError::NotFound)?))
}

/// The first version of a slug, as activations lock it.
const SLUG: Stateful = Stateful { noun: "template", table: "import_template", key: "template_id", state: "active" };

/// Makes a version (an earlier one: a roll-back) its slug's one active
/// version; the version active before is not any more. Activating the
/// active version changes nothing and answers it as it is.
#[utoipa::path(post, path = "/api/import/templates/{template_id}/activate", tag = "sdk-import",
    params(("template_id" = String, Path, description = "the template version")),
    extensions(("x-concurrency" = json!({ "outcome": "same-answer", "given": [["POST", "/api/import/templates", { "slug": "race-{unique}", "kind": "csv", "entity": "contact", "mapping": { "name": "Name" } }], ["POST", "/api/import/templates", { "slug": "race-{unique}", "kind": "csv", "entity": "contact", "mapping": { "name": "Full name" } }], ["GET", "/api/import/templates?tenant_id={tenant_id}&slug=race-{unique}&active=false", null]], "params": { "template_id": "{0.template_id}" } }))),
    responses((status = 200, description = "the version, active", body = Data<Template>)))]
async fn activate(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Template>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    let slug: Option<String> = sqlx::query_scalar("SELECT slug FROM import_template WHERE tenant_id = $1 AND template_id = $2")
        .bind(&ctx.tenant_id)
        .bind(&id)
        .fetch_optional(&mut *tx)
        .await?;
    let slug = slug.ok_or(ApiError::NotFound)?;
    // The slug's first version owns "one active version": locking it
    // queues the activations and deactivations of the slug one after
    // another, so the version is read again as the previous one left it.
    let first: String = sqlx::query_scalar("SELECT template_id FROM import_template WHERE tenant_id = $1 AND slug = $2 ORDER BY version LIMIT 1")
        .bind(&ctx.tenant_id)
        .bind(&slug)
        .fetch_one(&mut *tx)
        .await?;
    SLUG.lock::<i64>(&mut tx, &ctx.tenant_id, &first).await?;
    let sql = format!("SELECT {COLUMNS} FROM import_template WHERE tenant_id = $1 AND template_id = $2");
    let template: Template = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_one(&mut *tx).await?;
    if template.active.0 {
        tx.rollback().await?;
        return Ok(ok(template));
    }
    let previous: Option<String> =
        sqlx::query_scalar("UPDATE import_template SET active = 0 WHERE tenant_id = $1 AND slug = $2 AND active = 1 RETURNING template_id")
            .bind(&ctx.tenant_id)
            .bind(&slug)
            .fetch_optional(&mut *tx)
            .await?;
    let sql = format!("UPDATE import_template SET active = 1 WHERE tenant_id = $1 AND template_id = $2 RETURNING {COLUMNS}");
    let template: Template = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_one(&mut *tx).await?;
    let payload = json!({ "template_id": template.template_id, "slug": slug, "version": template.version, "previous_template_id": previous });
    audit::record(&mut tx, &ctx, events::IMPORT_TEMPLATE_ACTIVATED, payload).await?;
    tx.commit().await?;
    Ok(ok(template))
}

/// Leaves the version's slug with no active version; deactivating an
/// inactive version changes nothing and answers it as it is.
#[utoipa::path(post, path = "/api/import/templates/{template_id}/deactivate", tag = "sdk-import",
    params(("template_id" = String, Path, description = "the template version")),
    extensions(("x-concurrency" = json!({ "outcome": "same-answer", "given": [["POST", "/api/import/templates", { "slug": "race-{unique}", "kind": "csv", "entity": "contact", "mapping": { "name": "Name" } }]] }))),
    responses((status = 200, description = "the version, inactive", body = Data<Template>)))]
async fn deactivate(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Template>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    let sql = format!("UPDATE import_template SET active = 0 WHERE tenant_id = $1 AND template_id = $2 AND active = 1 RETURNING {COLUMNS}");
    let changed: Option<Template> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&mut *tx).await?;
    let Some(template) = changed else {
        let sql = format!("SELECT {COLUMNS} FROM import_template WHERE tenant_id = $1 AND template_id = $2");
        let found: Option<Template> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&mut *tx).await?;
        tx.rollback().await?;
        return Ok(ok(found.ok_or(ApiError::NotFound)?));
    };
    let payload = json!({ "template_id": template.template_id, "slug": template.slug, "version": template.version });
    audit::record(&mut tx, &ctx, events::IMPORT_TEMPLATE_DEACTIVATED, payload).await?;
    tx.commit().await?;
    Ok(ok(template))
}
