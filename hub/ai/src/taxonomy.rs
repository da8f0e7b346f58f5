//! sdk-taxonomy: extraction schemas, the fields an extractor pulls out of
//! a kind of document. Each publication is the (tenant, kind)'s next
//! version and its active one; the lookup answers the tenant's active
//! schema for a kind, else the platform's default (`tenant_id` NULL,
//! maintained by the operator), else 404.

use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(publish)).routes(routes!(active))
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = ExtractionSchema)]
struct Schema {
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
struct NewSchema {
    /// 1–64 of `a-z 0-9 . _ -` (`invoice`, `receipt`, …).
    #[schema(max_length = 64)]
    document_kind: String,
    #[schema(min_items = 1, max_items = 200)]
    fields: Vec<NewField>,
    #[schema(max_length = 500)]
    description: Option<String>,
}

/// Publishes the tenant's next schema version for a document kind and
/// makes it the active one (the previous one is retired).
#[utoipa::path(post, path = "/api/taxonomy/extraction-schemas", tag = "sdk-taxonomy", request_body = NewSchema,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "body": { "document_kind": "race-{unique}", "fields": [{ "name": "n", "type": "string" }] } }))),
    responses((status = 201, description = "the schema, active", body = Data<Schema>)))]
async fn publish(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewSchema>) -> ApiResult<Created<Schema>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let kind = body.document_kind.trim().to_string();
    if !valid_kind(&kind) {
        check.fail("document_kind must be 1 to 64 of a-z, 0-9, '.', '_', '-'");
    }
    let fields = fields(&mut check, &body.fields);
    let description = Check::optional(&body.description);
    check.finish()?;
    let mut tx = state.db.begin().await?;
    // Concurrent publishes of one kind each get a version of their own and
    // queue on the sequence, so each retires the version before it.
    let floor = "SELECT MAX(version) FROM taxonomy_schema WHERE tenant_id = $1 AND document_kind = $3";
    let version = next_number(&mut tx, &ctx.tenant_id, &format!("taxonomy_schema {kind}"), floor, &kind).await?;
    sqlx::query("UPDATE taxonomy_schema SET status = 'retired' WHERE tenant_id = $1 AND document_kind = $2 AND status = 'active'")
        .bind(&ctx.tenant_id)
        .bind(&kind)
        .execute(&mut *tx)
        .await?;
    let sql = format!(
        "INSERT INTO taxonomy_schema (schema_id, tenant_id, document_kind, version, description, fields, status, created_by, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, 'active', $7, $8) RETURNING {COLUMNS}"
    );
    let schema: Schema = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(&kind)
        .bind(version)
        .bind(&description)
        .bind(Value::from(fields).to_string())
        .bind(audit::actor_of(&ctx).1)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
    let payload = json!({ "schema_id": schema.schema_id, "document_kind": kind, "version": version });
    audit::record(&mut tx, &ctx, events::TAXONOMY_SCHEMA_PUBLISHED, payload.clone()).await?;
    let default: Option<String> =
        sqlx::query_scalar("SELECT schema_id FROM taxonomy_schema WHERE tenant_id IS NULL AND document_kind = $1 AND status = 'active'")
            .bind(&kind)
            .fetch_optional(&mut *tx)
            .await?;
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
