//! sdk-import: the mapping templates imports use (which source column or
//! path fills which field of an entity). A template is versioned per slug:
//! publishing adds the next version, immutable, and (unless published
//! inactive) makes it the slug's one active version.

use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(publish, list))
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
