//! hdk-watermark: the watermark applications a device records for an
//! image variant, read back by variant.

use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(record, list_by_variant))
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = WatermarkApplication)]
struct Application {
    application_id: Id,
    variant_id: String,
    watermark_kind: Kind,
    asset_ref: Option<String>,
    #[sqlx(try_from = "String")]
    payload: JsonText,
    applied_at: Timestamp,
}

const COLUMNS: &str = "application_id, variant_id, watermark_kind, asset_ref, payload, applied_at";
const LISTING: Listing =
    Listing { table: "hdk_watermark_application", columns: COLUMNS, filter: "tenant_id = $1 AND variant_id = $2", order: "applied_at, application_id" };

stored_enum! {
    /// How a watermark shows.
    #[schema(as = WatermarkKind)]
    enum Kind { Visible = "visible", Invisible = "invisible", Forensic = "forensic" }
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewWatermarkApplication)]
struct NewApplication {
    variant_id: String,
    watermark_kind: Kind,
    asset_ref: Option<String>,
    /// `{}` when absent.
    payload: Option<serde_json::Map<String, Value>>,
    /// When it was applied (not more than 5 minutes ahead); now when
    /// absent.
    #[schema(format = DateTime)]
    applied_at: Option<String>,
}

/// Records a watermark application to an image variant.
#[utoipa::path(post, path = "/api/hdk/watermark/applications", tag = "hdk-watermark", request_body = NewApplication,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "events": 0, "body": { "variant_id": "v-{unique}", "watermark_kind": "visible" } }))),
    responses((status = 201, description = "the application", body = Data<Application>)))]
async fn record(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewApplication>) -> ApiResult<Created<Application>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let variant = body.variant_id.trim();
    let kind = body.watermark_kind;
    let payload = Value::Object(body.payload.clone().unwrap_or_default());
    let applied_at = check.time_or_now("applied_at", &body.applied_at);
    check.finish()?;
    let sql = format!(
        "INSERT INTO hdk_watermark_application (application_id, tenant_id, variant_id, watermark_kind, asset_ref, payload, applied_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING {COLUMNS}"
    );
    let row: Application = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(variant)
        .bind(kind)
        .bind(Check::optional(&body.asset_ref))
        .bind(payload.to_string())
        .bind(&applied_at)
        .fetch_one(state.db.writer())
        .await?;
    Ok(created(row))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ByVariant {
    /// The variant.
    variant_id: String,
}

/// Watermark applications of a variant, oldest first; an unknown variant
/// is an empty list.
#[utoipa::path(get, path = "/api/hdk/watermark/applications", tag = "hdk-watermark", params(ByVariant, Page),
    responses((status = 200, description = "a page of the variant's applications", body = ListOf<Application>)))]
async fn list_by_variant(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<ByVariant>, page: Page) -> ApiResult<ListOf<Application>> {
    page.list::<Application>(&state.db.read, &LISTING, &[&ctx.tenant_id, q.variant_id.trim()]).await
}
