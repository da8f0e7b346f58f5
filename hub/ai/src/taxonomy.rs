//! sdk-taxonomy: extraction schemas, the fields an extractor pulls out of
//! a kind of document. Each publication is the (tenant, kind)'s next
//! version and its active one; the lookup answers the tenant's active
//! schema for a kind, else the platform's default (`tenant_id` NULL,
//! maintained by the operator), else 404.

use hub_kernel::db::change::serialize;
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list, publish)).routes(routes!(active)).routes(routes!(get_schema)).routes(routes!(retire)).routes(routes!(activate))
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = ExtractionSchema)]
pub struct Schema {
    schema_id: Id,
    document_kind: String,
    version: i64,
    description: Option<String>,
    /// `[{ name, type, required, values?, description? }]`.
    #[sqlx(try_from = "String")]
    #[schema(value_type = Vec<Object>)]
    fields: JsonText,
    status: SchemaStatus,
    source: SchemaSource,
    created_at: Timestamp,
}

const COLUMNS: &str = "schema_id, document_kind, version, description, fields, status, \
     CASE WHEN tenant_id IS NULL THEN 'platform' ELSE 'tenant' END AS source, created_at";

/// A document kind: 1–64 of `a-z 0-9 . _ -`.
fn valid_kind(k: &str) -> bool {
    (1..=64).contains(&k.len()) && k.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-'))
}

stored_enum! {
    /// Whether a schema is the one in force for its kind.
    #[schema(as = ExtractionSchemaStatus)]
    pub enum SchemaStatus { Active = "active", Retired = "retired" }
}

stored_enum! {
    /// Whose a schema is: the tenant's own, or the platform's default.
    #[schema(as = ExtractionSchemaSource)]
    pub enum SchemaSource { Tenant = "tenant", Platform = "platform" }
}

stored_enum! {
    /// The type of a field's value.
    #[schema(as = ExtractionFieldType)]
    pub enum FieldType {
        String = "string",
        Number = "number",
        Integer = "integer",
        Boolean = "boolean",
        Date = "date",
        Money = "money",
        Enum = "enum",
    }
}

/// One field of a new schema.
#[derive(Deserialize, ToSchema)]
#[schema(as = NewExtractionField)]
struct NewField {
    /// 1–128 letters, digits or `_`, unique in the schema.
    #[schema(max_length = 128)]
    name: String,
    #[serde(rename = "type")]
    #[schema(rename = "type")]
    kind: FieldType,
    /// False when absent.
    required: Option<bool>,
    /// The values an `enum` takes (at least one); ignored for other types.
    values: Option<Vec<String>>,
    description: Option<String>,
}

/// Every field checked, each problem named by its index.
fn fields(check: &mut Check, list: &[NewField]) -> Vec<Value> {
    let mut names = std::collections::HashSet::new();
    let mut out = Vec::new();
    for (i, f) in list.iter().enumerate() {
        let name = f.name.as_str();
        if !(1..=128).contains(&name.len()) || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            check.fail(format!("fields[{i}].name must be 1 to 128 letters, digits or '_'"));
        } else if !names.insert(name.to_string()) {
            check.fail(format!("fields[{i}].name {name} is given twice"));
        }
        let kind = f.kind;
        let values = f.values.as_ref().filter(|v| !v.is_empty());
        if f.kind == FieldType::Enum && values.is_none() {
            check.fail(format!("fields[{i}].values must be a non-empty array of strings for an enum"));
        }
        let mut field = json!({ "name": name, "type": kind, "required": f.required.unwrap_or(false) });
        if f.kind == FieldType::Enum {
            field["values"] = json!(values);
        }
        if let Some(d) = &f.description {
            field["description"] = json!(d);
        }
        out.push(field);
    }
    out
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewExtractionSchema)]
pub struct NewSchema {
    /// 1–64 of `a-z 0-9 . _ -` (`invoice`, `receipt`, …).
    #[schema(max_length = 64)]
    document_kind: String,
    #[schema(min_items = 1, max_items = 200)]
    fields: Vec<NewField>,
    #[schema(max_length = 500)]
    description: Option<String>,
}

/// A new schema checked: its kind, its fields as stored and its
/// description; every problem in one 400.
fn checked(body: &NewSchema) -> ApiResult<(String, Vec<Value>, Option<String>)> {
    let mut check = Check::new();
    let kind = body.document_kind.trim().to_string();
    if !valid_kind(&kind) {
        check.fail("document_kind must be 1 to 64 of a-z, 0-9, '.', '_', '-'");
    }
    let fields = fields(&mut check, &body.fields);
    let description = Check::optional(&body.description);
    check.finish()?;
    Ok((kind, fields, description))
}

/// The name that queues the writes of one (owner, kind)'s versions: a
/// publication, an activation (the one active version is the database's
/// unique index, so two writers that each retire "the" active version and
/// make another active would collide).
fn queue(tenant_id: Option<&str>, kind: &str) -> String {
    format!("taxonomy_schema {} {kind}", tenant_id.unwrap_or("platform"))
}

/// Inserts the (owner, kind)'s next version as its active one, retiring
/// the previous one, in `tx`: the tenant's (`tenant_id`) or the
/// platform's default (`None`).
async fn publish_in(tx: &mut Tx, tenant_id: Option<&str>, kind: &str, fields: Vec<Value>, description: Option<String>, created_by: &str) -> ApiResult<Schema> {
    serialize(tx, &queue(tenant_id, kind)).await?;
    // Each publication gets a version of its own from the sequence (the
    // platform's under the empty tenant), so each retires the one before.
    let floor = match tenant_id {
        Some(_) => "SELECT MAX(version) FROM taxonomy_schema WHERE tenant_id = $1 AND document_kind = $3",
        None => "SELECT MAX(version) FROM taxonomy_schema WHERE tenant_id IS NULL AND document_kind = $3",
    };
    let version = next_number(tx, tenant_id.unwrap_or(""), &format!("taxonomy_schema {kind}"), floor, kind).await?;
    sqlx::query("UPDATE taxonomy_schema SET status = 'retired' WHERE COALESCE(tenant_id, '') = $1 AND document_kind = $2 AND status = 'active'")
        .bind(tenant_id.unwrap_or(""))
        .bind(kind)
        .execute(&mut **tx)
        .await?;
    let sql = format!(
        "INSERT INTO taxonomy_schema (schema_id, tenant_id, document_kind, version, description, fields, status, created_by, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, 'active', $7, $8) RETURNING {COLUMNS}"
    );
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(tenant_id)
        .bind(kind)
        .bind(version)
        .bind(&description)
        .bind(Value::from(fields).to_string())
        .bind(created_by)
        .bind(db::now())
        .fetch_one(&mut **tx)
        .await?)
}

/// Publishes the platform's next default schema for a document kind and
/// makes it the platform's active one (`POST
/// /admin/taxonomy/extraction-schemas`' work; no tenant route writes a
/// default): every tenant without an active schema of its own for the
/// kind reads it. Records `taxonomy.schema.published.v1` in the platform
/// chain, `actor` (the operator credential) as its actor.
pub async fn publish_default_as(db: &Db, actor: &str, body: &NewSchema, operator_id: &str) -> ApiResult<Schema> {
    let (kind, fields, description) = checked(body)?;
    let mut tx = db.begin().await?;
    let schema = publish_in(&mut tx, None, &kind, fields, description, operator_id).await?;
    let payload = json!({ "schema_id": schema.schema_id, "document_kind": kind, "version": schema.version, "source": "platform", "operator_id": operator_id });
    audit::record_operator(&mut tx, actor, events::TAXONOMY_SCHEMA_PUBLISHED, payload).await?;
    tx.commit().await?;
    Ok(schema)
}

/// The platform's active default of a kind, if any.
async fn platform_default(tx: &mut Tx, kind: &str) -> ApiResult<Option<String>> {
    Ok(sqlx::query_scalar("SELECT schema_id FROM taxonomy_schema WHERE tenant_id IS NULL AND document_kind = $1 AND status = 'active'")
        .bind(kind)
        .fetch_optional(&mut **tx)
        .await?)
}

/// Publishes the tenant's next schema version for a document kind and
/// makes it the active one (the previous one is retired).
#[utoipa::path(post, path = "/api/taxonomy/extraction-schemas", tag = "sdk-taxonomy", request_body = NewSchema,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "body": { "document_kind": "race-{unique}", "fields": [{ "name": "n", "type": "string" }] } }))),
    responses((status = 201, description = "the schema, active", body = Data<Schema>)))]
async fn publish(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewSchema>) -> ApiResult<Created<Schema>> {
    let body = body.checked()?;
    let (kind, fields, description) = checked(&body)?;
    let mut tx = state.db.begin().await?;
    let schema = publish_in(&mut tx, Some(&ctx.tenant_id), &kind, fields, description, audit::actor_of(&ctx).1).await?;
    let version = schema.version;
    let payload = json!({ "schema_id": schema.schema_id, "document_kind": kind, "version": version });
    audit::record(&mut tx, &ctx, events::TAXONOMY_SCHEMA_PUBLISHED, payload.clone()).await?;
    let default = platform_default(&mut tx, &kind).await?;
    if version == 1
        && let Some(default) = default
    {
        audit::record(
            &mut tx,
            &ctx,
            events::TAXONOMY_SCHEMA_OVERRIDDEN,
            json!({ "schema_id": schema.schema_id, "document_kind": kind, "platform_schema_id": default }),
        )
        .await?;
    }
    tx.commit().await?;
    Ok(created(schema))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct KindQuery {
    /// The document kind.
    document_kind: String,
}

/// The schema in force for a document kind: the tenant's own active one,
/// else the platform's default.
#[utoipa::path(get, path = "/api/taxonomy/extraction-schemas/active", tag = "sdk-taxonomy", params(KindQuery),
    responses((status = 200, description = "the schema in force", body = Data<Schema>), (status = 404, description = "NotFound: no schema of the kind, the tenant's or the platform's", body = ErrorBody)))]
async fn active(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<KindQuery>) -> ApiResult<Data<Schema>> {
    let kind = q.document_kind.trim();
    // The tenant's row sorts first (its tenant_id is not null).
    let sql = format!(
        "SELECT {COLUMNS} FROM taxonomy_schema WHERE (tenant_id = $1 OR tenant_id IS NULL) AND document_kind = $2 AND status = 'active' \
         ORDER BY CASE WHEN tenant_id IS NULL THEN 1 ELSE 0 END LIMIT 1"
    );
    let found: Option<Schema> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(kind).fetch_optional(&state.db.read).await?;
    Ok(ok(found.ok_or(ApiError::NotFound)?))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct Filter {
    /// Only this document kind's versions.
    #[param(max_length = 64)]
    document_kind: Option<String>,
    #[param(inline)]
    status: Option<SchemaStatus>,
    /// Only the tenant's own versions, or only the platform's defaults.
    #[param(inline)]
    source: Option<SchemaSource>,
}

const SCHEMAS: Listing = Listing {
    table: "taxonomy_schema",
    columns: COLUMNS,
    filter: "(tenant_id = $1 OR tenant_id IS NULL) AND ($2 = '' OR document_kind = $2) AND ($3 = '' OR status = $3) \
             AND ($4 = '' OR ($4 = 'tenant' AND tenant_id = $1) OR ($4 = 'platform' AND tenant_id IS NULL))",
    order: "created_at DESC, schema_id DESC",
};

/// The schema versions the tenant sees: its own, every status, and the
/// platform's defaults (`source` tells them apart), newest first.
#[utoipa::path(get, path = "/api/taxonomy/extraction-schemas", tag = "sdk-taxonomy", params(Filter, Page),
    responses((status = 200, description = "one page of schema versions", body = ListOf<Schema>)))]
async fn list(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page, Params(q): Params<Filter>) -> ApiResult<ListOf<Schema>> {
    let kind = q.document_kind.as_deref().map(str::trim).unwrap_or("");
    if !kind.is_empty() && !valid_kind(kind) {
        return Err(ApiError::invalid("document_kind must be 1 to 64 of a-z, 0-9, '.', '_', '-'"));
    }
    let status = q.status.map_or("", SchemaStatus::as_str);
    let source = q.source.map_or("", SchemaSource::as_str);
    page.list::<Schema>(&state.db.read, &SCHEMAS, &[&ctx.tenant_id, kind, status, source]).await
}

/// One schema version: the tenant's own or a platform default; another
/// tenant's is 404.
#[utoipa::path(get, path = "/api/taxonomy/extraction-schemas/{schema_id}", tag = "sdk-taxonomy", params(("schema_id" = String, Path, description = "the schema version")),
    responses((status = 200, description = "the schema version", body = Data<Schema>)))]
async fn get_schema(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Schema>> {
    let id = path_id(&id)?.to_string();
    let sql = format!("SELECT {COLUMNS} FROM taxonomy_schema WHERE (tenant_id = $1 OR tenant_id IS NULL) AND schema_id = $2");
    let found: Option<Schema> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&state.db.read).await?;
    Ok(ok(found.ok_or(ApiError::NotFound)?))
}

/// A tenant's schema version as guarded writes name it (a platform
/// default is no tenant's: 404 to a tenant's retire or activate).
const SCHEMA: Stateful = Stateful { noun: "extraction schema", table: "taxonomy_schema", key: "schema_id", state: "status" };

/// Retires the tenant's active version of a kind: the tenant then reads
/// the platform's default for the kind again (or 404 where none exists),
/// until it publishes or activates a version. 409 when the version is
/// retired already; a platform default (the operator's) or another
/// tenant's version is 404.
#[utoipa::path(post, path = "/api/taxonomy/extraction-schemas/{schema_id}/retire", tag = "sdk-taxonomy", params(("schema_id" = String, Path, description = "the schema version")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/api/taxonomy/extraction-schemas", { "document_kind": "race-{unique}", "fields": [{ "name": "n", "type": "string" }] }]], "params": { "schema_id": "{schema_id}" } }))),
    responses((status = 200, description = "the schema version, retired", body = Data<Schema>)))]
async fn retire(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Schema>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    let sql = format!("UPDATE taxonomy_schema SET status = 'retired' WHERE tenant_id = $1 AND schema_id = $2 AND status = 'active' RETURNING {COLUMNS}");
    let retired: Option<Schema> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&mut *tx).await?;
    let schema = SCHEMA.settle(&mut tx, &ctx.tenant_id, &id, retired, "only an active schema can be retired").await?;
    let default = platform_default(&mut tx, &schema.document_kind).await?;
    let payload = json!({ "schema_id": schema.schema_id, "document_kind": schema.document_kind, "version": schema.version, "platform_schema_id": default });
    audit::record(&mut tx, &ctx, events::TAXONOMY_SCHEMA_RETIRED, payload).await?;
    tx.commit().await?;
    Ok(ok(schema))
}

/// Makes one of the tenant's retired versions the active one of its kind
/// again (a roll-back); the version active until then, if any, is retired.
/// 409 when the version is active already; a platform default or another
/// tenant's version is 404.
#[utoipa::path(post, path = "/api/taxonomy/extraction-schemas/{schema_id}/activate", tag = "sdk-taxonomy", params(("schema_id" = String, Path, description = "the schema version")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/api/taxonomy/extraction-schemas", { "document_kind": "race-{unique}", "fields": [{ "name": "n", "type": "string" }] }], ["POST", "/api/taxonomy/extraction-schemas/{schema_id}/retire", null]], "params": { "schema_id": "{schema_id}" } }))),
    responses((status = 200, description = "the schema version, active", body = Data<Schema>)))]
async fn activate(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Schema>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    let kind: Option<String> = sqlx::query_scalar("SELECT document_kind FROM taxonomy_schema WHERE tenant_id = $1 AND schema_id = $2")
        .bind(&ctx.tenant_id)
        .bind(&id)
        .fetch_optional(&mut *tx)
        .await?;
    let kind = kind.ok_or(ApiError::NotFound)?;
    // One writer of the (tenant, kind)'s versions at a time: the kind has
    // at most one active version (a unique index).
    serialize(&mut tx, &queue(Some(&ctx.tenant_id), &kind)).await?;
    let previous: Option<String> = sqlx::query_scalar(
        "UPDATE taxonomy_schema SET status = 'retired' WHERE tenant_id = $1 AND document_kind = $2 AND status = 'active' \
         AND EXISTS (SELECT 1 FROM taxonomy_schema t WHERE t.tenant_id = $1 AND t.schema_id = $3 AND t.status = 'retired') RETURNING schema_id",
    )
    .bind(&ctx.tenant_id)
    .bind(&kind)
    .bind(&id)
    .fetch_optional(&mut *tx)
    .await?;
    let sql = format!("UPDATE taxonomy_schema SET status = 'active' WHERE tenant_id = $1 AND schema_id = $2 AND status = 'retired' RETURNING {COLUMNS}");
    let activated: Option<Schema> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&mut *tx).await?;
    let schema = SCHEMA.settle(&mut tx, &ctx.tenant_id, &id, activated, "only a retired schema can be activated").await?;
    let payload = json!({ "schema_id": schema.schema_id, "document_kind": kind, "version": schema.version, "retired_schema_id": previous });
    audit::record(&mut tx, &ctx, events::TAXONOMY_SCHEMA_ACTIVATED, payload).await?;
    tx.commit().await?;
    Ok(ok(schema))
}
