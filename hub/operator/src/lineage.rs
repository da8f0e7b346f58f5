//! Lineage backfill: copies the audit entries of the lineage-tracked
//! producers into lineage records, resumably.
//!
//! Each (pool_index, event_type) has a checkpoint: the (occurred_at,
//! entry_id) of the last entry a run processed. A run takes, for each
//! pair, at most `batch_size` entries after the checkpoint in that order
//! (within `from`/`to` when given), writes a record for each one not yet
//! recorded, and advances the checkpoint, all in one transaction; a dry
//! run reports the same counts and writes nothing. A pool unknown to the
//! hub yields zero counts. A run with `from` moves the checkpoint past the
//! entries before it for good.

use hub_kernel::gate::Operator;
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(backfill))
}

/// The same list as the partial index `audit_entry_lineage` states it:
/// the scan repeats it so both databases can use the index.
const TYPES_SQL: &str =
    "event_type IN ('parsing.field.extracted.v1', 'recommendation.suggestion.generated.v1', 'semantic.intent.planned.v1', 'ai-gateway.complete.v1')";
const DEFAULT_BATCH: i64 = 1000;
/// Larger batch sizes are reduced to this.
const MAX_BATCH: i64 = 10_000;

#[derive(Deserialize, ToSchema)]
#[schema(as = LineageBackfillRequest)]
struct Request {
    /// One pool (default: every pool).
    #[schema(minimum = 0, maximum = 2_147_483_647)]
    pool_index: Option<i64>,
    /// One of the lineage event types (default: all four).
    event_type: Option<EventType>,
    /// Entries per (pool_index, event_type) this run (default 1000; more
    /// than 10000 is reduced to 10000).
    #[schema(minimum = 1)]
    batch_size: Option<i64>,
    /// Default false: true reports the counts and writes nothing.
    dry_run: Option<bool>,
    /// Only entries that occurred at or after it.
    #[schema(format = DateTime)]
    from: Option<String>,
    /// Only entries that occurred at or before it.
    #[schema(format = DateTime)]
    to: Option<String>,
}

stored_enum! {
    /// A lineage-tracked event type (the documents' enumeration).
    #[schema(as = LineageEventType)]
    enum EventType {
        FieldExtracted = "parsing.field.extracted.v1",
        SuggestionGenerated = "recommendation.suggestion.generated.v1",
        IntentPlanned = "semantic.intent.planned.v1",
        AiGatewayComplete = "ai-gateway.complete.v1",
    }
}

#[derive(Serialize, ToSchema)]
#[schema(as = LineageCheckpointCounts)]
struct PairCounts {
    pool_index: i64,
    event_type: EventType,
    /// Entries taken after the checkpoint.
    scanned: i64,
    /// Records written (a dry run: that would be written).
    backfilled: i64,
    /// Entries already recorded.
    already_present: i64,
    /// No entry is left after this run's last.
    complete: bool,
    /// The checkpoint after this run (a dry run: where it would be).
    last_occurred_at: Option<Timestamp>,
    last_entry_id: Option<Id>,
}

#[derive(Serialize, ToSchema)]
#[schema(as = LineageBackfillCounts)]
struct Counts {
    dry_run: bool,
    batch_size: i64,
    scanned: i64,
    backfilled: i64,
    already_present: i64,
    complete: bool,
    checkpoints: Vec<PairCounts>,
}

#[derive(FromRow)]
struct Entry {
    entry_id: Id,
    tenant_id: String,
    occurred_at: Timestamp,
    actor_kind: String,
    actor_id: String,
    payload_digest: Vec<u8>,
}

/// An optional time its schema checked, in the stored form; blank is
/// absent.
fn time(name: &str, value: &Option<String>) -> ApiResult<Option<Timestamp>> {
    Check::optional(value).map(|v| crate::fields::time(name, &v).map(Timestamp)).transpose()
}

/// Backfills lineage records from the audit chains, resumably.
#[utoipa::path(post, path = "/admin/lineage/backfill", tag = "admin-lineage", request_body = Request,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "body": { "batch_size": 100 } }))),
    responses((status = 200, description = "the counts", body = Data<Counts>)))]
async fn backfill(State(state): State<AppState>, Operator(who): Operator, raw: axum::body::Bytes) -> ApiResult<Data<Counts>> {
    // Every field is optional, the body too.
    let value = if raw.iter().all(u8::is_ascii_whitespace) { json!({}) } else { hub_kernel::nesting::parse_json(&raw, "request body")? };
    if value.is_object() {
        hub_kernel::nul::check_value(&value)?;
    }
    let body: Request = hub_kernel::contract::parse(value)?;
    let pool = body.pool_index;
    let event_type = body.event_type;
    let batch = body.batch_size.map_or(DEFAULT_BATCH, |n| n.min(MAX_BATCH));
    let dry_run = body.dry_run.unwrap_or(false);
    let (from, to) = (time("from", &body.from)?, time("to", &body.to)?);
    if let (Some(f), Some(t)) = (&from, &to)
        && f > t
    {
        return Err(ApiError::invalid("from must not be after to"));
    }

    let mut tx = state.db.begin().await?;
    // Backfills queue: each reads the checkpoints the one before it moved,
    // so no entry is counted twice, whatever the number of replicas.
    db::change::serialize(&mut tx, "lineage backfill").await?;
    let pools: Vec<i64> = match pool {
        Some(p) => sqlx::query_scalar("SELECT pool_index FROM platform_pool WHERE pool_index = $1").bind(p).fetch_all(&mut *tx).await?,
        None => sqlx::query_scalar("SELECT pool_index FROM platform_pool ORDER BY pool_index").fetch_all(&mut *tx).await?,
    };
    let types: Vec<EventType> = match event_type {
        Some(t) => vec![t],
        None => EventType::ALL.to_vec(),
    };
    let now = db::now();
    let scan = format!(
        "SELECT entry_id, tenant_id, occurred_at, actor_kind, actor_id, payload_digest FROM audit_entry \
         WHERE pool_index = $1 AND event_type = $2 AND {TYPES_SQL} AND (occurred_at > $3 OR (occurred_at = $3 AND entry_id > $4)) \
         AND ($5 = '' OR occurred_at >= $5) AND ($6 = '' OR occurred_at <= $6) ORDER BY occurred_at, entry_id LIMIT $7"
    );
    let mut out = Vec::new();
    for &p in &pools {
        for &t in &types {
            let at: Option<(Timestamp, Id)> =
                sqlx::query_as("SELECT last_occurred_at, last_entry_id FROM lineage_checkpoint WHERE pool_index = $1 AND event_type = $2")
                    .bind(p)
                    .bind(t)
                    .fetch_optional(&mut *tx)
                    .await?;
            let (after_at, after_id) = at.map(|(t, id)| (t.to_string(), id.to_string())).unwrap_or_default();
            let mut entries: Vec<Entry> = sqlx::query_as(sqlx::AssertSqlSafe(scan.clone()))
                .bind(p)
                .bind(t)
                .bind(&after_at)
                .bind(&after_id)
                .bind(from.map(|t| t.to_string()).unwrap_or_default())
                .bind(to.map(|t| t.to_string()).unwrap_or_default())
                .bind(batch + 1)
                .fetch_all(&mut *tx)
                .await?;
            let complete = entries.len() as i64 <= batch;
            entries.truncate(batch as usize);
            let mut backfilled = 0;
            for e in &entries {
                let written = if dry_run {
                    let present: Option<i64> =
                        sqlx::query_scalar("SELECT 1 FROM lineage_record WHERE entry_id = $1").bind(e.entry_id).fetch_optional(&mut *tx).await?;
                    u64::from(present.is_none())
                } else {
                    sqlx::query(
                        "INSERT INTO lineage_record (entry_id, tenant_id, pool_index, event_type, occurred_at, actor_kind, actor_id, payload_digest, \
                         backfilled_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (entry_id) DO NOTHING",
                    )
                    .bind(e.entry_id)
                    .bind(&e.tenant_id)
                    .bind(p)
                    .bind(t)
                    .bind(e.occurred_at)
                    .bind(&e.actor_kind)
                    .bind(&e.actor_id)
                    .bind(hex::encode(&e.payload_digest))
                    .bind(&now)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected()
                };
                backfilled += written as i64;
            }
            let last = entries.last().map(|e| (e.occurred_at, e.entry_id)).or(at);
            if !dry_run && let Some(last_entry) = entries.last() {
                sqlx::query(
                    "INSERT INTO lineage_checkpoint (pool_index, event_type, last_occurred_at, last_entry_id, processed, updated_at) \
                     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (pool_index, event_type) DO UPDATE SET last_occurred_at = excluded.last_occurred_at, \
                     last_entry_id = excluded.last_entry_id, processed = lineage_checkpoint.processed + excluded.processed, updated_at = excluded.updated_at",
                )
                .bind(p)
                .bind(t)
                .bind(last_entry.occurred_at)
                .bind(last_entry.entry_id)
                .bind(entries.len() as i64)
                .bind(&now)
                .execute(&mut *tx)
                .await?;
            }
            let scanned = entries.len() as i64;
            out.push(PairCounts {
                pool_index: p,
                event_type: t,
                scanned,
                backfilled,
                already_present: scanned - backfilled,
                complete,
                last_occurred_at: last.map(|l| l.0),
                last_entry_id: last.map(|l| l.1),
            });
        }
    }
    let counts = Counts {
        dry_run,
        batch_size: batch,
        scanned: out.iter().map(|c| c.scanned).sum(),
        backfilled: out.iter().map(|c| c.backfilled).sum(),
        already_present: out.iter().map(|c| c.already_present).sum(),
        complete: out.iter().all(|c| c.complete),
        checkpoints: out,
    };
    if !dry_run {
        let payload = json!({
            "pool_index": pool, "event_type": event_type, "batch_size": batch, "from": from, "to": to,
            "scanned": counts.scanned, "backfilled": counts.backfilled,
        });
        audit::record_operator(&mut tx, &who, events::LINEAGE_BACKFILLED, payload).await?;
        tx.commit().await?;
    }
    Ok(ok(counts))
}
