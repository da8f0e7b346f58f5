//! sdk-evidence: what was captured during an encounter (photos, documents,
//! signatures, notes, ...). A capture may point at a committed media blob
//! of the tenant, whose verified SHA-256 it keeps, so the evidence can be
//! shown unaltered later.

use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(record, list)).routes(routes!(get_capture))
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = EvidenceCapture)]
struct Capture {
    capture_id: Id,
    encounter_id: String,
    kind: Kind,
    /// The media blob holding the capture, when there is one.
    blob_id: Option<Id>,
    /// The blob's SHA-256, as its commit verified it.
    sha256: Option<String>,
    note: Option<String>,
    #[sqlx(try_from = "String")]
    #[schema(value_type = Object)]
    metadata: JsonText,
    captured_at: Timestamp,
    captured_by: String,
    created_at: Timestamp,
}

const COLUMNS: &str = "capture_id, encounter_id, kind, blob_id, sha256, note, metadata, captured_at, captured_by, created_at";

fn valid_encounter(s: &str) -> bool {
    (1..=128).contains(&s.len()) && !s.chars().any(char::is_control)
}

stored_enum! {
    /// What kind of thing was captured.
    #[schema(as = EvidenceKind)]
    enum Kind {
        Photo = "photo",
        Video = "video",
        Audio = "audio",
        Document = "document",
        Signature = "signature",
        Note = "note",
        Measurement = "measurement",
    }
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewEvidenceCapture)]
struct NewCapture {
    /// The encounter (no control characters).
    #[schema(max_length = 128)]
    encounter_id: String,
    kind: Kind,
    /// A committed (`ready`) media blob of the tenant.
    #[schema(format = "uuid")]
    blob_id: Option<String>,
    /// Required when there is no blob.
    #[schema(max_length = 4000)]
    note: Option<String>,
    /// `{}` when absent.
    #[schema(value_type = Option<Object>)]
    metadata: Option<serde_json::Map<String, Value>>,
    /// When it was captured; now when absent.
    #[schema(format = DateTime)]
    captured_at: Option<String>,
}

/// Records a capture of an encounter.
#[utoipa::path(post, path = "/api/evidence/captures", tag = "sdk-evidence", request_body = NewCapture,
    extensions(("x-concurrency" = json!({"outcome": "independent", "body": {"encounter_id": "e-{unique}", "kind": "note", "note": "races"}}))),
    responses((status = 201, description = "the capture", body = Data<Capture>)))]
async fn record(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewCapture>) -> ApiResult<Created<Capture>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let encounter = body.encounter_id.trim();
    if !valid_encounter(encounter) {
        check.fail("encounter_id must be at most 128 characters, none of them control characters");
    }
    let kind = body.kind;
    let blob = check.optional_uuid("blob_id", &body.blob_id).map(|u| u.to_string());
    let note = Check::optional(&body.note);
    if blob.is_none() && note.is_none() {
        check.fail("a capture needs a blob_id or a note");
    }
    let metadata = Value::Object(body.metadata.unwrap_or_default());
    let captured_at = check.time_or_now("captured_at", &body.captured_at);
    check.finish()?;
    let mut tx = state.db.begin().await?;
    let sha256 = match &blob {
        None => None,
        Some(b) => {
            let row: Option<(String, Option<String>)> = sqlx::query_as("SELECT status, sha256 FROM media_blob WHERE tenant_id = $1 AND blob_id = $2")
                .bind(&ctx.tenant_id)
                .bind(b)
                .fetch_optional(&mut *tx)
                .await?;
            match row {
                Some((status, sha)) if status == "ready" => sha,
                Some(_) => return Err(ApiError::invalid("blob_id must be a committed blob (status ready)")),
                None => return Err(ApiError::invalid("blob_id is not a media blob of this tenant")),
            }
        }
    };
    let sql = format!(
        "INSERT INTO evidence_capture (capture_id, tenant_id, encounter_id, kind, blob_id, sha256, note, metadata, captured_at, captured_by, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING {COLUMNS}"
    );
    let capture: Capture = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(encounter)
        .bind(kind)
        .bind(&blob)
        .bind(&sha256)
        .bind(&note)
        .bind(metadata.to_string())
        .bind(&captured_at)
        .bind(audit::actor_of(&ctx).1)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
    let payload = json!({ "capture_id": capture.capture_id, "encounter_id": encounter, "kind": kind, "blob_id": blob, "sha256": sha256 });
    audit::record(&mut tx, &ctx, events::EVIDENCE_CAPTURE_RECORDED, payload).await?;
    tx.commit().await?;
    Ok(created(capture))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct EncounterQuery {
    /// The encounter whose captures to list.
    encounter_id: String,
}

/// The captures of one encounter, in the order they were captured.
#[utoipa::path(get, path = "/api/evidence/captures", tag = "sdk-evidence", params(EncounterQuery, Page),
    responses((status = 200, description = "one page of captures", body = ListOf<Capture>)))]
async fn list(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<EncounterQuery>, page: Page) -> ApiResult<ListOf<Capture>> {
    let encounter = q.encounter_id.trim();
    let listing = Listing { table: "evidence_capture", columns: COLUMNS, filter: "tenant_id = $1 AND encounter_id = $2", order: "captured_at, capture_id" };
    page.list::<Capture>(&state.db.read, &listing, &[&ctx.tenant_id, encounter]).await
}

/// One capture.
#[utoipa::path(get, path = "/api/evidence/captures/{capture_id}", tag = "sdk-evidence", params(("capture_id" = String, Path, description = "the capture")),
    responses((status = 200, description = "the capture", body = Data<Capture>)))]
async fn get_capture(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Capture>> {
    let id = path_id(&id)?.to_string();
    let sql = format!("SELECT {COLUMNS} FROM evidence_capture WHERE tenant_id = $1 AND capture_id = $2");
    let capture: Option<Capture> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&state.db.read).await?;
    Ok(ok(capture.ok_or(ApiError::NotFound)?))
}
