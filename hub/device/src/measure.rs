//! hdk-measure: the measurements a device takes of a capture, read back by
//! capture.

use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(record, list_by_capture))
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
struct Measurement {
    measurement_id: Id,
    capture_id: String,
    kind: String,
    value: f64,
    unit: String,
    created_at: Timestamp,
}

const COLUMNS: &str = "measurement_id, capture_id, kind, value, unit, created_at";
const LISTING: Listing =
    Listing { table: "hdk_measurement", columns: COLUMNS, filter: "tenant_id = $1 AND capture_id = $2", order: "created_at, measurement_id" };

#[derive(Deserialize, ToSchema)]
struct NewMeasurement {
    capture_id: String,
    kind: String,
    value: f64,
    unit: String,
}

/// Records a measurement of a capture.
#[utoipa::path(post, path = "/api/hdk/measure/measurements", tag = "hdk-measure", request_body = NewMeasurement,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "events": 0, "body": { "capture_id": "c-{unique}", "kind": "length", "value": 1.5, "unit": "m" } }))),
    responses((status = 201, description = "the measurement", body = Data<Measurement>)))]
async fn record(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewMeasurement>) -> ApiResult<Created<Measurement>> {
    let body = body.checked()?;
    let (capture, kind, unit) = (body.capture_id.trim(), body.kind.trim(), body.unit.trim());
    let value = body.value;
    let sql = format!(
        "INSERT INTO hdk_measurement (measurement_id, tenant_id, capture_id, kind, value, unit, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING {COLUMNS}"
    );
    let row: Measurement = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(capture)
        .bind(kind)
        .bind(value)
        .bind(unit)
        .bind(db::now())
        .fetch_one(state.db.writer())
        .await?;
    Ok(created(row))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ByCapture {
    /// The capture whose measurements to list.
    capture_id: String,
}

/// Measurements of a capture, oldest first; an unknown capture is an empty
/// list.
#[utoipa::path(get, path = "/api/hdk/measure/measurements", tag = "hdk-measure", params(ByCapture, Page),
    responses((status = 200, description = "a page of the capture's measurements", body = ListOf<Measurement>)))]
async fn list_by_capture(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<ByCapture>, page: Page) -> ApiResult<ListOf<Measurement>> {
    page.list::<Measurement>(&state.db.read, &LISTING, &[&ctx.tenant_id, q.capture_id.trim()]).await
}
