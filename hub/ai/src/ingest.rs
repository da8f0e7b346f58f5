//! sdk-ingest: a batch of records into one entity of the tenant, in one
//! transaction. Entities: `crm.contact` (matched by email address) and
//! `crm.lead` (matched by `lead_id`), each record checked as its create
//! route checks it (the crm module's own functions write it). `insert`
//! skips a record that matches one already there; `upsert` updates it. A
//! record's problems go to `errors[]` and the others are imported all the
//! same. The tenant's `idempotency_key` names one batch: a replay answers
//! the first result (the same body), another batch under the key is 409.
//! Each written record keeps its provenance (the batch, the SHA-256 of the
//! record as received); the batch records one audit entry.

use hub_crm::crm;
use hub_kernel::{crypto, prelude::*};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(ingest, list)).routes(routes!(get_batch))
}

stored_enum! {
    /// The entity a batch writes.
    #[schema(as = IngestEntity)]
    pub enum Entity { Contact = "crm.contact", Lead = "crm.lead" }
}

stored_enum! {
    /// What a batch does with a record matching one already there.
    #[schema(as = IngestMode)]
    pub enum Mode { Upsert = "upsert", Insert = "insert" }
}

stored_enum! {
    /// What became of one record of a batch.
    #[schema(as = IngestRecordOutcome)]
    pub enum RecordOutcome { Inserted = "inserted", Updated = "updated", Skipped = "skipped", Error = "error" }
}

/// A record not written, with its problems.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = IngestRecordError)]
struct RecordError {
    /// Its place in `records`.
    index: usize,
    details: Vec<String>,
}

/// What became of one record.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = IngestRecordResult)]
struct RecordResult {
    /// Its place in `records`.
    index: usize,
    outcome: RecordOutcome,
    /// The entity written or matched (null for an `error`).
    id: Option<String>,
}

#[derive(Deserialize, ToSchema)]
#[schema(as = IngestBatch)]
struct Batch {
    entity: Entity,
    mode: Mode,
    /// Unique per batch in the tenant.
    #[schema(max_length = 255)]
    idempotency_key: String,
    /// Objects, each with the fields of the entity's create route (`POST
    /// /api/crm/contacts`, `POST /api/crm/leads`; a lead may carry its
    /// `lead_id` to be matched by). An item that is not an object, like a
    /// record with problems, is reported in `errors` and the others are
    /// imported.
    #[schema(value_type = Vec<Value>, min_items = 1, max_items = 1000)]
    records: Vec<Value>,
}

#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = IngestResult)]
struct Outcome {
    batch_id: Id,
    entity: Entity,
    mode: Mode,
    /// Records written (inserted or updated).
    imported: i64,
    /// Records matching one already there, in `insert` mode.
    skipped: i64,
    /// One per record not written.
    errors: Vec<RecordError>,
    /// One per record, in order.
    results: Vec<RecordResult>,
}

enum Written {
    Inserted(String),
    Updated(String),
    Skipped(String),
}

/// A record's fate: written or skipped (`Ok`), or its problems (`Err`);
/// the outer error (the database's) fails the batch.
type Fate = ApiResult<Result<Written, Vec<String>>>;

/// A refusal of the crm module as the record's problems.
fn refused<T>(r: ApiResult<T>) -> ApiResult<Result<T, Vec<String>>> {
    match r {
        Ok(v) => Ok(Ok(v)),
        Err(ApiError::Validation(d)) => Ok(Err(d)),
        Err(ApiError::Conflict(m)) => Ok(Err(vec![m])),
        Err(e) => Err(e),
    }
}

async fn contact(tx: &mut Tx, ctx: &TenantCtx, upsert: bool, record: &Value) -> Fate {
    let input = match crm::contact_record(record) {
        Ok(i) => i,
        Err(d) => return Ok(Err(d)),
    };
    let matched = crm::contacts_with_emails(tx, &ctx.tenant_id, &input.emails).await?;
    Ok(match matched.as_slice() {
        [] => refused(crm::insert_contact(tx, ctx, &input).await)?.map(|c| Written::Inserted(c.contact_id.to_string())),
        [one] if !upsert => Ok(Written::Skipped(one.clone())),
        [one] => refused(crm::update_contact(tx, ctx, one, &input).await)?.map(|_| Written::Updated(one.clone())),
        _ => Err(vec![format!("the emails name {} different contacts", matched.len())]),
    })
}

async fn lead(tx: &mut Tx, ctx: &TenantCtx, upsert: bool, record: &Value) -> Fate {
    let input = match crm::lead_record(record) {
        Ok(i) => i,
        Err(d) => return Ok(Err(d)),
    };
    let Some(id) = record.get("lead_id").filter(|v| !v.is_null()) else {
        return Ok(refused(crm::insert_lead(tx, ctx, &input).await)?.map(|l| Written::Inserted(l.lead_id.to_string())));
    };
    let Some(id) = id.as_str().filter(|s| uuid::Uuid::parse_str(s).is_ok()) else {
        return Ok(Err(vec!["lead_id must be a UUID".to_string()]));
    };
    if !crm::lead_exists(tx, &ctx.tenant_id, id).await? {
        return Ok(Err(vec![format!("lead_id {id} is not a lead of this tenant")]));
    }
    if !upsert {
        return Ok(Ok(Written::Skipped(id.to_string())));
    }
    Ok(refused(crm::update_lead(tx, ctx, id, &input).await)?.map(|_| Written::Updated(id.to_string())))
}

/// Imports a batch of records into one entity.
#[utoipa::path(post, path = "/api/ingest/batches", tag = "sdk-ingest", request_body = Batch,
    extensions(("x-concurrency" = json!({ "outcome": "same-answer", "body": { "entity": "crm.lead", "mode": "insert", "idempotency_key": "k-{unique}", "records": [{ "name": "race" }] } }))),
    responses((status = 200, description = "what became of each record (a replay: the first answer)", body = Data<Outcome>)))]
async fn ingest(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<Batch>) -> ApiResult<Data<Outcome>> {
    let body = body.checked()?;
    let entity = body.entity;
    let mode = body.mode;
    let key = body.idempotency_key.trim();
    let records = &body.records;
    let hash = crypto::sha256_hex(json!({ "entity": entity, "mode": mode, "records": records }).to_string().as_bytes());
    let now = db::now();
    let batch_id = Id::new();
    let mut tx = state.db.begin().await?;
    // The key first: a concurrent batch under it waits here, then replays.
    let claimed = sqlx::query(
        "INSERT INTO ingest_batch (batch_id, tenant_id, idempotency_key, request_hash, entity, mode, record_count, result, created_by, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, '{}', $8, $9) ON CONFLICT (tenant_id, idempotency_key) DO NOTHING",
    )
    .bind(batch_id)
    .bind(&ctx.tenant_id)
    .bind(key)
    .bind(&hash)
    .bind(entity)
    .bind(mode)
    .bind(records.len() as i64)
    .bind(audit::actor_of(&ctx).1)
    .bind(&now)
    .execute(&mut *tx)
    .await?;
    if claimed.rows_affected() == 0 {
        let (first_hash, result): (String, String) =
            sqlx::query_as("SELECT request_hash, result FROM ingest_batch WHERE tenant_id = $1 AND idempotency_key = $2")
                .bind(&ctx.tenant_id)
                .bind(key)
                .fetch_one(&mut *tx)
                .await?;
        if first_hash != hash {
            return Err(ApiError::Conflict(format!("idempotency_key {key} was used for another batch")));
        }
        let first: Outcome = serde_json::from_str(&result).map_err(|e| ApiError::Internal(e.into()))?;
        return Ok(ok(first));
    }
    let upsert = mode == Mode::Upsert;
    let mut out = Outcome { batch_id, entity, mode, imported: 0, skipped: 0, errors: Vec::new(), results: Vec::new() };
    for (index, record) in records.iter().enumerate() {
        let written = if !record.is_object() {
            Err(vec!["the record must be an object".to_string()])
        } else if entity == Entity::Contact {
            contact(&mut tx, &ctx, upsert, record).await?
        } else {
            lead(&mut tx, &ctx, upsert, record).await?
        };
        let (outcome, id) = match written {
            Ok(Written::Inserted(id)) => (RecordOutcome::Inserted, id),
            Ok(Written::Updated(id)) => (RecordOutcome::Updated, id),
            Ok(Written::Skipped(id)) => {
                out.skipped += 1;
                out.results.push(RecordResult { index, outcome: RecordOutcome::Skipped, id: Some(id) });
                continue;
            }
            Err(details) => {
                out.errors.push(RecordError { index, details });
                out.results.push(RecordResult { index, outcome: RecordOutcome::Error, id: None });
                continue;
            }
        };
        out.imported += 1;
        sqlx::query(
            "INSERT INTO ingest_record (batch_id, record_index, tenant_id, entity, entity_id, outcome, record_hash, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(batch_id)
        .bind(index as i64)
        .bind(&ctx.tenant_id)
        .bind(entity)
        .bind(&id)
        .bind(outcome)
        .bind(crypto::sha256_hex(record.to_string().as_bytes()))
        .bind(&now)
        .execute(&mut *tx)
        .await?;
        out.results.push(RecordResult { index, outcome, id: Some(id) });
    }
    let result = serde_json::to_string(&out).map_err(|e| ApiError::Internal(e.into()))?;
    sqlx::query("UPDATE ingest_batch SET result = $2 WHERE batch_id = $1").bind(batch_id).bind(&result).execute(&mut *tx).await?;
    let payload = json!({ "batch_id": batch_id, "entity": entity, "mode": mode, "idempotency_key": key, "records": records.len(),
        "imported": out.imported, "skipped": out.skipped, "errors": out.errors.len() });
    audit::record(&mut tx, &ctx, events::INGEST_BATCH_RECEIVED, payload).await?;
    tx.commit().await?;
    Ok(ok(out))
}

/// A batch as listed: what it was asked to do and how many records it
/// wrote.
#[derive(FromRow, Serialize, ToSchema)]
#[schema(as = IngestBatchSummary)]
struct Summary {
    batch_id: Id,
    idempotency_key: String,
    entity: Entity,
    mode: Mode,
    /// Records received.
    record_count: i64,
    /// Records written (inserted or updated).
    imported: i64,
    created_by: String,
    created_at: Timestamp,
}

const SUMMARY_COLUMNS: &str = "batch_id, idempotency_key, entity, mode, record_count, \
    (SELECT COUNT(*) FROM ingest_record r WHERE r.batch_id = ingest_batch.batch_id) AS imported, created_by, created_at";

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct BatchFilter {
    #[param(inline)]
    entity: Option<Entity>,
    #[param(inline)]
    mode: Option<Mode>,
    /// The batch sent under this key.
    #[param(max_length = 255)]
    idempotency_key: Option<String>,
}

/// The tenant's batches, newest first.
#[utoipa::path(get, path = "/api/ingest/batches", tag = "sdk-ingest", params(BatchFilter, Page),
    responses((status = 200, description = "one page of batches", body = ListOf<Summary>)))]
async fn list(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<BatchFilter>, page: Page) -> ApiResult<ListOf<Summary>> {
    let entity = q.entity.map_or("", Entity::as_str);
    let mode = q.mode.map_or("", Mode::as_str);
    let key = Check::optional(&q.idempotency_key).unwrap_or_default();
    let listing = Listing {
        table: "ingest_batch",
        columns: SUMMARY_COLUMNS,
        filter: "tenant_id = $1 AND ($2 = '' OR entity = $2) AND ($3 = '' OR mode = $3) AND ($4 = '' OR idempotency_key = $4)",
        order: "created_at DESC, batch_id DESC",
    };
    page.list::<Summary>(&state.db.read, &listing, &[&ctx.tenant_id, entity, mode, &key]).await
}

/// Where one written record came from.
#[derive(FromRow, Serialize, ToSchema)]
#[schema(as = IngestProvenance)]
struct Provenance {
    /// Its place in the batch's `records`.
    record_index: i64,
    /// The entity it wrote.
    entity_id: String,
    outcome: RecordOutcome,
    /// SHA-256 (hex) of the record as received.
    record_hash: String,
}

/// A batch with what became of each record and the provenance of each
/// record it wrote.
#[derive(Serialize, ToSchema)]
#[schema(as = IngestBatchDetail)]
struct Detail {
    #[serde(flatten)]
    summary: Summary,
    /// Records matching one already there, in `insert` mode.
    skipped: i64,
    /// One per record not written.
    errors: Vec<RecordError>,
    /// One per record, in order.
    results: Vec<RecordResult>,
    /// One per record written, in order.
    provenance: Vec<Provenance>,
}

/// One batch of the tenant: its results (as its answer gave them) and the
/// provenance of the records it wrote.
#[utoipa::path(get, path = "/api/ingest/batches/{batch_id}", tag = "sdk-ingest",
    params(("batch_id" = String, Path, description = "the batch")),
    responses((status = 200, description = "the batch", body = Data<Detail>)))]
async fn get_batch(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Detail>> {
    let id = path_id(&id)?.to_string();
    let sql = format!("SELECT {SUMMARY_COLUMNS} FROM ingest_batch WHERE tenant_id = $1 AND batch_id = $2");
    let summary: Option<Summary> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&state.db.read).await?;
    let summary = summary.ok_or(ApiError::NotFound)?;
    let result: String = sqlx::query_scalar("SELECT result FROM ingest_batch WHERE tenant_id = $1 AND batch_id = $2")
        .bind(&ctx.tenant_id)
        .bind(&id)
        .fetch_one(&state.db.read)
        .await?;
    let outcome: Outcome = serde_json::from_str(&result).map_err(|e| ApiError::Internal(e.into()))?;
    let provenance: Vec<Provenance> =
        sqlx::query_as("SELECT record_index, entity_id, outcome, record_hash FROM ingest_record WHERE tenant_id = $1 AND batch_id = $2 ORDER BY record_index")
            .bind(&ctx.tenant_id)
            .bind(&id)
            .fetch_all(&state.db.read)
            .await?;
    Ok(ok(Detail { summary, skipped: outcome.skipped, errors: outcome.errors, results: outcome.results, provenance }))
}
