//! hdk-permissions: the permission snapshots a device reports, and the
//! newest one of a device read back.

use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(record, history)).routes(routes!(latest))
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
struct Snapshot {
    snapshot_id: Id,
    tenant_id: String,
    device_uuid: Id,
    persona_id: Option<Id>,
    #[sqlx(try_from = "String")]
    permission_set: JsonText,
    taken_at: Timestamp,
}

const COLUMNS: &str = "snapshot_id, tenant_id, device_uuid, persona_id, permission_set, taken_at";

#[derive(Deserialize, ToSchema)]
struct NewSnapshot {
    #[schema(format = "uuid")]
    device_uuid: String,
    /// A persona of the caller's tenant.
    #[schema(format = "uuid")]
    persona_id: Option<String>,
    /// An object or an array (a value of another type is 400).
    #[schema(value_type = Value)]
    permission_set: Value,
    /// When the device took it (not more than 5 minutes ahead); now when
    /// absent.
    #[schema(format = DateTime)]
    taken_at: Option<String>,
}

/// Records a device's permission snapshot (`permission_set`: an object or
/// an array). A `persona_id` must name a persona of the caller's tenant,
/// as on every route that takes one. Event
/// `device.permission_snapshot.recorded.v1`.
#[utoipa::path(post, path = "/api/hdk/permissions/snapshots", tag = "hdk-permissions", request_body = NewSnapshot,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "body": { "device_uuid": "{unique}", "permission_set": { "camera": "granted" } } }))),
    responses((status = 201, description = "the snapshot", body = Data<Snapshot>)))]
async fn record(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewSnapshot>) -> ApiResult<Created<Snapshot>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let device = check.required_uuid("device_uuid", &Some(body.device_uuid.clone()));
    let persona = check.optional_uuid("persona_id", &body.persona_id);
    let set = match &body.permission_set {
        v @ (Value::Object(_) | Value::Array(_)) => v.to_string(),
        _ => {
            check.fail("permission_set must be an object or an array");
            String::new()
        }
    };
    let taken_at = check.time_or_now("taken_at", &body.taken_at);
    check.finish()?;
    let persona = persona.map(|p| p.to_string());
    let mut tx = state.db.begin().await?;
    if let Some(p) = &persona
        && !hub_identity::personas::exists_in_tenant(&mut *tx, &ctx.tenant_id, p).await?
    {
        return Err(ApiError::invalid("persona_id is not a persona of this tenant"));
    }
    let sql = format!(
        "INSERT INTO hdk_permission_snapshot (snapshot_id, tenant_id, device_uuid, persona_id, permission_set, taken_at, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING {COLUMNS}"
    );
    let row: Snapshot = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(device.map(|d| d.to_string()))
        .bind(&persona)
        .bind(set)
        .bind(&taken_at)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
    // What the device reported is in the row; the event says that it was
    // reported, for whom and when.
    let payload = json!({ "snapshot_id": row.snapshot_id, "device_uuid": row.device_uuid, "persona_id": row.persona_id, "taken_at": row.taken_at });
    audit::record(&mut tx, &ctx, events::DEVICE_PERMISSION_SNAPSHOT_RECORDED, payload).await?;
    tx.commit().await?;
    Ok(created(row))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ByDevice {
    /// The device.
    #[param(format = "uuid")]
    device_uuid: String,
}

/// The newest snapshot of a device by taken_at (404 when it has none).
#[utoipa::path(get, path = "/api/hdk/permissions/snapshots/latest", tag = "hdk-permissions", params(ByDevice),
    responses((status = 200, description = "the device's newest snapshot", body = Data<Snapshot>), (status = 404, description = "none")))]
async fn latest(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<ByDevice>) -> ApiResult<Data<Snapshot>> {
    let sql =
        format!("SELECT {COLUMNS} FROM hdk_permission_snapshot WHERE tenant_id = $1 AND device_uuid = $2 ORDER BY taken_at DESC, snapshot_id DESC LIMIT 1");
    let row: Snapshot = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&ctx.tenant_id)
        .bind(canonical_uuid(&q.device_uuid))
        .fetch_optional(&state.db.read)
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(ok(row))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct HistoryFilter {
    /// The device.
    #[param(format = "uuid")]
    device_uuid: String,
    /// Only snapshots taken at or after this time (RFC 3339).
    from: Option<String>,
    /// Only snapshots taken at or before this time (RFC 3339).
    to: Option<String>,
}

/// A device's snapshots, newest first by taken_at, within `from`..`to`
/// (inclusive).
#[utoipa::path(get, path = "/api/hdk/permissions/snapshots", tag = "hdk-permissions", params(HistoryFilter, Page),
    responses((status = 200, description = "one page of the device's snapshots", body = ListOf<Snapshot>)))]
async fn history(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<HistoryFilter>, page: Page) -> ApiResult<ListOf<Snapshot>> {
    let mut check = Check::new();
    let device = check.required_uuid("device_uuid", &Some(q.device_uuid.clone())).map(|d| d.to_string()).unwrap_or_default();
    // The stored form (RFC 3339, UTC, microseconds) orders as text.
    let from = check.optional_expiry("from", &q.from).unwrap_or_default();
    let to = check.optional_expiry("to", &q.to).unwrap_or_default();
    if !from.is_empty() && !to.is_empty() && from > to {
        check.fail("from must be on or before to");
    }
    check.finish()?;
    let listing = Listing {
        table: "hdk_permission_snapshot",
        columns: COLUMNS,
        filter: "tenant_id = $1 AND device_uuid = $2 AND ($3 = '' OR taken_at >= $3) AND ($4 = '' OR taken_at <= $4)",
        order: "taken_at DESC, snapshot_id DESC",
    };
    page.list::<Snapshot>(&state.db.read, &listing, &[&ctx.tenant_id, &device, &from, &to]).await
}
