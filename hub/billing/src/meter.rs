//! sdk-meter: usage events of a tenant's assets (an idempotency key repeated
//! within 24 hours counts once), rolled up in the same transaction per
//! (asset, sensor, UTC day, sku) and per (sku, UTC month), the monthly hard
//! caps on that usage, and the operator's overrides of them. Invoices rate
//! the daily roll-up, never the raw events.

use std::collections::{BTreeMap, HashMap};

use chrono::{NaiveDate, TimeDelta, Utc};
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(record)).routes(routes!(usage)).routes(routes!(tenant_usage)).routes(routes!(hardcaps))
}

/// Events of one batch, at most.
pub const MAX_BATCH: usize = 1000;
/// How long an idempotency key names its first event.
const KEY_WINDOW_HOURS: i64 = 24;

/// Rows per multi-row statement of a batch. sqlx's SQLite driver looks up
/// each numbered parameter's name with a linear search of the statement's
/// names, so binding one statement costs the square of its parameters: a
/// batch of 1,000 events in one 7,000-parameter insert spent two thirds of
/// the ingest's time there. Statements of 64 rows keep it negligible.
const ROWS_PER_STATEMENT: usize = 64;

#[derive(Debug, Clone, FromRow, Serialize, ToSchema)]
#[schema(as = MeterUsageEvent)]
struct UsageEvent {
    event_id: Id,
    asset_id: String,
    sensor_id: Option<String>,
    sku: String,
    /// Whole units of the sku (a smaller unit carries fractions: bytes, ms).
    quantity: i64,
    occurred_at: Timestamp,
    idempotency_key: String,
    recorded_at: Timestamp,
}

const COLUMNS: &str = "event_id, asset_id, sensor_id, sku, quantity, occurred_at, idempotency_key, recorded_at";

/// A usage rollup row: one asset's (or sensor's) usage of a sku on a day.
#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = MeterUsageRollup)]
struct Rollup {
    asset_id: String,
    /// Null for asset-level usage.
    sensor_id: Option<String>,
    /// The UTC day, `YYYY-MM-DD`.
    day: String,
    sku: String,
    units: i64,
    /// Usage events counted (calls).
    events: i64,
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewMeterUsageEvent)]
struct NewEvent {
    /// The asset that used it: any UUID the tenant names its asset by.
    #[schema(format = "uuid")]
    asset_id: String,
    #[schema(format = "uuid")]
    sensor_id: Option<String>,
    /// Letters, digits and `. _ : / -`, at most 128 characters.
    #[schema(pattern = r"^[A-Za-z0-9._:/-]{1,128}$")]
    sku: String,
    #[schema(minimum = 0, maximum = 1000000000000.0)]
    quantity: i64,
    /// Now when absent; at most 5 minutes ahead.
    #[schema(format = DateTime)]
    occurred_at: Option<String>,
    /// No control characters: a repeat within 24 hours counts once.
    #[schema(max_length = 200)]
    idempotency_key: String,
}

/// A batch of up to 1000 events.
#[derive(Deserialize, ToSchema)]
#[schema(as = NewMeterUsageBatch)]
#[allow(dead_code)]
struct UsageBatch {
    /// Each a `NewMeterUsageEvent`; an event that is not one is answered
    /// in its own result (`invalid`), not by refusing the batch, so the
    /// batch takes any items.
    #[schema(value_type = Vec<Value>, min_items = 1, max_items = 1000)]
    events: Vec<NewEvent>,
}

/// One event, or a batch of up to 1000 under `events` (what the document
/// says the body is; the handler reads it as JSON and tells them apart).
#[derive(Deserialize, ToSchema)]
#[schema(as = MeterUsageRequest)]
#[serde(untagged)]
#[allow(dead_code)]
enum UsageRequest {
    Batch(UsageBatch),
    One(NewEvent),
}

/// The outcome of one event of a batch: the status a lone event would
/// answer (201 recorded, 200 a repeat, 400 invalid, 429 over its hard cap).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = MeterUsageOutcome)]
struct Outcome {
    index: usize,
    status: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    event: Option<UsageEvent>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sku: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = MeterUsageBatch)]
struct BatchResult {
    recorded: usize,
    repeated: usize,
    refused: usize,
    invalid: usize,
    results: Vec<Outcome>,
}

/// A valid event, before the transaction decides its fate.
struct Valid {
    index: usize,
    event: UsageEvent,
    day: String,
    period: String,
}

/// 1 to 128 letters, digits or `. _ : / -` (skus and capabilities).
pub fn valid_sku(s: &str) -> bool {
    (1..=128).contains(&s.len()) && s.chars().all(|c| c.is_ascii_alphanumeric() || "._:/-".contains(c))
}

pub fn check_sku(check: &mut Check, sku: &str) {
    if !sku.is_empty() && !valid_sku(sku) {
        check.fail("sku must be 1 to 128 letters, digits or . _ : / -");
    }
}

fn validate(index: usize, raw: Value, recorded_at: Timestamp) -> Result<Valid, Vec<String>> {
    if !raw.is_object() {
        return Err(vec!["an event must be a JSON object".to_string()]);
    }
    // The event against its schema (every problem at once), then what
    // the schema cannot say.
    let body: NewEvent = hub_kernel::contract::parse(raw).map_err(|e| match e {
        ApiError::Validation(d) => d,
        other => vec![other.to_string()],
    })?;
    let mut check = Check::new();
    let asset = check.required_uuid("asset_id", &Some(body.asset_id));
    let sensor = check.optional_uuid("sensor_id", &body.sensor_id);
    static SKU: Pattern = Pattern::of::<NewEvent>("sku");
    let sku = body.sku.clone();
    check.matches(&sku, &SKU, "sku must be 1 to 128 letters, digits or . _ : / -");
    let quantity = body.quantity;
    let occurred_at = check.time_or_now("occurred_at", &body.occurred_at);
    let key = body.idempotency_key.trim().to_string();
    if key.chars().any(char::is_control) {
        check.fail("idempotency_key must be at most 200 characters, none of them control characters");
    }
    check.finish().map_err(|e| match e {
        ApiError::Validation(d) => d,
        other => vec![other.to_string()],
    })?;
    let (day, period) = (occurred_at[..10].to_string(), occurred_at[..7].to_string());
    let occurred_at = occurred_at.parse::<Timestamp>().map_err(|e| vec![e])?;
    let event = UsageEvent {
        event_id: Id::new(),
        asset_id: asset.map(|a| a.to_string()).unwrap_or_default(),
        sensor_id: sensor.map(|s| s.to_string()),
        sku,
        quantity,
        occurred_at,
        idempotency_key: key,
        recorded_at,
    };
    Ok(Valid { index, event, day, period })
}

/// The 200 of `POST /api/meter/usage`: a repeated event's first record, or
/// a batch's outcomes.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[schema(as = MeterUsageRepeatOrBatch)]
enum RepeatOrBatch {
    Event(UsageEvent),
    Batch(BatchResult),
}

/// Records usage: one event (201; a repeated key 200 with its first
/// record; 429 naming the sku over its hard cap) or `{ events: [...] }`
/// (200 with each event's outcome).
#[utoipa::path(post, path = "/api/meter/usage", tag = "sdk-meter", request_body = UsageRequest,
    extensions(("x-concurrency" = json!({ "outcome": "first-creates", "events": 1, "given": [],
        "body": { "asset_id": "{unique}", "sku": "race.units", "quantity": 1, "idempotency_key": "k-{unique}" } }))),
    responses((status = 201, description = "the event, recorded", body = Data<UsageEvent>),
        (status = 200, description = "a repeated event's first record, or a batch's outcomes", body = Data<RepeatOrBatch>)))]
async fn record(State(state): State<AppState>, Tenant(ctx): Tenant, Lenient(mut body): Lenient<Value>) -> ApiResult<Response> {
    use axum::response::IntoResponse;
    let stamp = Timestamp::now();
    let now = stamp.to_string();
    let single = body.get("events").is_none();
    let raws = match body.get_mut("events").map(Value::take) {
        None => vec![body],
        Some(Value::Array(events)) if (1..=MAX_BATCH).contains(&events.len()) => events,
        Some(_) => return Err(ApiError::invalid(format!("events must be an array of 1 to {MAX_BATCH} events"))),
    };
    let mut outcomes: Vec<Option<Outcome>> = (0..raws.len()).map(|_| None).collect();
    let mut valid = Vec::new();
    for (i, raw) in raws.into_iter().enumerate() {
        match validate(i, raw, stamp) {
            Ok(v) => valid.push(v),
            Err(details) => {
                if single {
                    return Err(ApiError::Validation(details));
                }
                outcomes[i] = Some(Outcome { index: i, status: 400, event: None, error: Some("ValidationError"), details: Some(details), sku: None });
            }
        }
    }
    let mut tx = state.db.begin().await?;
    let decided = ingest(&mut tx, &ctx, valid, &now).await?;
    tx.commit().await?;
    if single {
        let one = decided.into_iter().next().ok_or_else(|| ApiError::Internal(anyhow::anyhow!("a valid event has an outcome")))?;
        return match one.refused {
            Some(period) => Err(ApiError::HardCapReached { sku: one.event.sku, period }),
            None if one.status == 201 => Ok(created(one.event).into_response()),
            None => Ok(ok(RepeatOrBatch::Event(one.event)).into_response()),
        };
    }
    for d in decided {
        outcomes[d.index] = Some(match d.refused {
            Some(period) => Outcome {
                index: d.index,
                status: 429,
                error: Some("HardCapReached"),
                details: Some(vec![format!("the tenant's hard cap for sku {} is reached for {period}", d.event.sku)]),
                sku: Some(d.event.sku),
                event: None,
            },
            None => Outcome { index: d.index, status: d.status, event: Some(d.event), error: None, details: None, sku: None },
        });
    }
    let results: Vec<Outcome> = outcomes.into_iter().flatten().collect();
    let count = |s: u16| results.iter().filter(|o| o.status == s).count();
    Ok(ok(RepeatOrBatch::Batch(BatchResult { recorded: count(201), repeated: count(200), refused: count(429), invalid: count(400), results })).into_response())
}

/// What became of a valid event: recorded (201), a repeat answered with
/// the first record (200), or refused over the hard cap of a period.
struct Decided {
    index: usize,
    status: u16,
    event: UsageEvent,
    refused: Option<String>,
}

/// Records the valid events of a request in `tx`: claims their keys, keeps
/// each capped (sku, month) within its cap, inserts the fresh events and
/// adds them to the daily and monthly roll-ups, a few statements a batch.
async fn ingest(tx: &mut Tx, ctx: &TenantCtx, valid: Vec<Valid>, now: &str) -> ApiResult<Vec<Decided>> {
    if valid.is_empty() {
        return Ok(Vec::new());
    }
    let tenant = ctx.tenant_id.as_str();
    // A key repeated within the batch: its first event decides for all.
    let mut first: HashMap<String, usize> = HashMap::new();
    for (i, v) in valid.iter().enumerate() {
        first.entry(v.event.idempotency_key.clone()).or_insert(i);
    }
    // In key order, so that concurrent batches sharing keys wait for each
    // other instead of deadlocking.
    let mut leaders: Vec<usize> = first.values().copied().collect();
    leaders.sort_unstable_by(|&x, &y| valid[x].event.idempotency_key.cmp(&valid[y].event.idempotency_key));
    // Claim each key: a new key, or one whose 24 hours are over, is fresh.
    let cutoff = db::format_time(Utc::now() - TimeDelta::hours(KEY_WINDOW_HOURS));
    let mut fresh: std::collections::HashSet<String> = std::collections::HashSet::new();
    for chunk in leaders.chunks(ROWS_PER_STATEMENT) {
        let values: Vec<String> = (0..chunk.len()).map(|i| format!("($1, ${}, ${}, $2)", 4 + 2 * i, 5 + 2 * i)).collect();
        let sql = format!(
            "INSERT INTO meter_usage_key (tenant_id, idempotency_key, event_id, recorded_at) VALUES {} \
             ON CONFLICT (tenant_id, idempotency_key) DO UPDATE SET event_id = excluded.event_id, recorded_at = excluded.recorded_at \
             WHERE meter_usage_key.recorded_at < $3 RETURNING idempotency_key",
            values.join(", ")
        );
        let mut claim = sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(sql)).bind(tenant).bind(now).bind(&cutoff);
        for &i in chunk {
            claim = claim.bind(&valid[i].event.idempotency_key).bind(valid[i].event.event_id);
        }
        fresh.extend(claim.fetch_all(&mut **tx).await?);
    }
    let (mut fresh_leaders, repeats): (Vec<usize>, Vec<usize>) = leaders.iter().partition(|&&i| fresh.contains(&valid[i].event.idempotency_key));
    // Caps take the events in the batch's order.
    fresh_leaders.sort_unstable();

    // Hard caps: each capped (sku, month) row is locked, then its events
    // are taken in order while they fit.
    let caps: HashMap<String, i64> = sqlx::query_as::<_, (String, i64)>(
        "SELECT sku, monthly_units FROM meter_hardcap c WHERE tenant_id = $1 \
         AND NOT EXISTS (SELECT 1 FROM meter_hardcap_override o WHERE o.tenant_id = c.tenant_id AND o.sku = c.sku AND o.until > $2)",
    )
    .bind(tenant)
    .bind(now)
    .fetch_all(&mut **tx)
    .await?
    .into_iter()
    .collect();
    let mut groups: BTreeMap<(&str, &str), Vec<usize>> = BTreeMap::new();
    for &i in &fresh_leaders {
        groups.entry((valid[i].event.sku.as_str(), valid[i].period.as_str())).or_default().push(i);
    }
    let mut refused: HashMap<usize, String> = HashMap::new();
    for ((sku, period), members) in &groups {
        let Some(&cap) = caps.get(*sku) else { continue };
        let (mut used, reached): (i64, Option<String>) = sqlx::query_as(
            "INSERT INTO meter_period_usage (tenant_id, sku, period, units) VALUES ($1, $2, $3, 0) \
             ON CONFLICT (tenant_id, sku, period) DO UPDATE SET units = meter_period_usage.units RETURNING units, cap_reached_at",
        )
        .bind(tenant)
        .bind(*sku)
        .bind(*period)
        .fetch_one(&mut **tx)
        .await?;
        let mut over = false;
        for &i in members {
            if used + valid[i].event.quantity <= cap {
                used += valid[i].event.quantity;
            } else {
                over = true;
                refused.insert(i, period.to_string());
            }
        }
        if over && reached.is_none() {
            sqlx::query("UPDATE meter_period_usage SET cap_reached_at = $4 WHERE tenant_id = $1 AND sku = $2 AND period = $3")
                .bind(tenant)
                .bind(*sku)
                .bind(*period)
                .bind(now)
                .execute(&mut **tx)
                .await?;
            audit::record(tx, ctx, events::METER_HARDCAP_REACHED, json!({ "sku": sku, "period": period, "monthly_units": cap, "units": used })).await?;
        }
    }
    // A refused event's key is released: its repeat is judged afresh.
    let released: Vec<&str> = refused.keys().map(|&i| valid[i].event.idempotency_key.as_str()).collect();
    for keys in released.chunks(ROWS_PER_STATEMENT) {
        let sql = format!("DELETE FROM meter_usage_key WHERE tenant_id = $1 AND idempotency_key IN ({})", db::placeholders(2, keys.len()));
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(tenant);
        for k in keys {
            q = q.bind(*k);
        }
        q.execute(&mut **tx).await?;
    }
    let accepted: Vec<&Valid> = fresh_leaders.iter().filter(|i| !refused.contains_key(i)).map(|&i| &valid[i]).collect();
    if !accepted.is_empty() {
        store(tx, ctx, &accepted, now).await?;
    }

    // The first records of repeated keys.
    let mut known: HashMap<String, UsageEvent> = HashMap::new();
    for chunk in repeats.chunks(ROWS_PER_STATEMENT) {
        let sql = format!(
            "SELECT {COLUMNS} FROM meter_usage_event WHERE event_id IN \
             (SELECT event_id FROM meter_usage_key WHERE tenant_id = $1 AND idempotency_key IN ({}))",
            db::placeholders(2, chunk.len())
        );
        let mut q = sqlx::query_as::<_, UsageEvent>(sqlx::AssertSqlSafe(sql)).bind(tenant);
        for &i in chunk {
            q = q.bind(&valid[i].event.idempotency_key);
        }
        known.extend(q.fetch_all(&mut **tx).await?.into_iter().map(|e| (e.idempotency_key.clone(), e)));
    }
    let mut decided = Vec::with_capacity(valid.len());
    for (i, v) in valid.iter().enumerate() {
        let lead = first[&v.event.idempotency_key];
        let (status, event, refusal) = if let Some(period) = refused.get(&lead) {
            (429, v.event.clone(), Some(period.clone()))
        } else if fresh.contains(&v.event.idempotency_key) {
            (if lead == i { 201 } else { 200 }, valid[lead].event.clone(), None)
        } else {
            let e = known.get(&v.event.idempotency_key).cloned().ok_or_else(|| ApiError::Internal(anyhow::anyhow!("a claimed key names no event")))?;
            (200, e, None)
        };
        decided.push(Decided { index: v.index, status, event, refused: refusal });
    }
    Ok(decided)
}

/// Inserts accepted events and adds them to the roll-ups, in key order so
/// that concurrent batches lock shared rows in the same order.
async fn store(tx: &mut Tx, ctx: &TenantCtx, accepted: &[&Valid], now: &str) -> ApiResult<()> {
    let tenant = ctx.tenant_id.as_str();
    for chunk in accepted.chunks(ROWS_PER_STATEMENT) {
        let values: Vec<String> = (0..chunk.len())
            .map(|i| {
                let b = 3 + 7 * i;
                format!("(${b}, $1, ${}, ${}, ${}, ${}, ${}, ${}, $2)", b + 1, b + 2, b + 3, b + 4, b + 5, b + 6)
            })
            .collect();
        let sql = format!(
            "INSERT INTO meter_usage_event (event_id, tenant_id, asset_id, sensor_id, sku, quantity, occurred_at, idempotency_key, recorded_at) VALUES {}",
            values.join(", ")
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(tenant).bind(now);
        for v in chunk {
            let e = &v.event;
            q = q.bind(e.event_id).bind(&e.asset_id).bind(&e.sensor_id).bind(&e.sku).bind(e.quantity).bind(e.occurred_at).bind(&e.idempotency_key);
        }
        q.execute(&mut **tx).await?;
    }

    let mut daily: BTreeMap<(&str, &str, &str, &str), (i64, i64)> = BTreeMap::new();
    let mut monthly: BTreeMap<(&str, &str), i64> = BTreeMap::new();
    let mut by_sku: BTreeMap<&str, i64> = BTreeMap::new();
    for v in accepted {
        let e = &v.event;
        let d = daily.entry((e.asset_id.as_str(), v.day.as_str(), e.sku.as_str(), e.sensor_id.as_deref().unwrap_or(""))).or_default();
        d.0 += e.quantity;
        d.1 += 1;
        *monthly.entry((e.sku.as_str(), v.period.as_str())).or_default() += e.quantity;
        *by_sku.entry(e.sku.as_str()).or_default() += e.quantity;
    }
    let daily: Vec<_> = daily.into_iter().collect();
    for chunk in daily.chunks(ROWS_PER_STATEMENT) {
        let values: Vec<String> = (0..chunk.len())
            .map(|i| {
                let b = 3 + 6 * i;
                format!("($1, ${b}, ${}, ${}, ${}, ${}, ${}, $2)", b + 1, b + 2, b + 3, b + 4, b + 5)
            })
            .collect();
        let sql = format!(
            "INSERT INTO meter_usage_rollup (tenant_id, asset_id, day, sku, sensor_id, units, events, updated_at) VALUES {} \
             ON CONFLICT (tenant_id, asset_id, day, sku, sensor_id) DO UPDATE SET units = meter_usage_rollup.units + excluded.units, \
             events = meter_usage_rollup.events + excluded.events, updated_at = excluded.updated_at",
            values.join(", ")
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(tenant).bind(now);
        for ((asset, day, sku, sensor), (units, events)) in chunk {
            q = q.bind(*asset).bind(*day).bind(*sku).bind(*sensor).bind(*units).bind(*events);
        }
        q.execute(&mut **tx).await?;
    }

    let monthly: Vec<_> = monthly.into_iter().collect();
    for chunk in monthly.chunks(ROWS_PER_STATEMENT) {
        let values: Vec<String> = (0..chunk.len()).map(|i| format!("($1, ${}, ${}, ${})", 2 + 3 * i, 3 + 3 * i, 4 + 3 * i)).collect();
        let sql = format!(
            "INSERT INTO meter_period_usage (tenant_id, sku, period, units) VALUES {} \
             ON CONFLICT (tenant_id, sku, period) DO UPDATE SET units = meter_period_usage.units + excluded.units",
            values.join(", ")
        );
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(tenant);
        for ((sku, period), units) in chunk {
            q = q.bind(*sku).bind(*period).bind(*units);
        }
        q.execute(&mut **tx).await?;
    }
    audit::record(tx, ctx, events::METER_USAGE_RECORDED, json!({ "events": accepted.len(), "units_by_sku": by_sku })).await?;
    Ok(())
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct DayRange {
    /// The first UTC day, `YYYY-MM-DD` (inclusive).
    from: Option<String>,
    /// The last UTC day, `YYYY-MM-DD` (inclusive).
    to: Option<String>,
}

/// Parses a `YYYY-MM-DD` day, naming the field on failure.
pub fn parse_day(check: &mut Check, name: &str, value: &Option<String>) -> Option<NaiveDate> {
    let v = Check::optional(value)?;
    let day = NaiveDate::parse_from_str(&v, "%Y-%m-%d").ok().filter(|_| v.len() == 10);
    if day.is_none() {
        check.fail(format!("{name} must be a day, YYYY-MM-DD"));
    }
    day
}

/// One asset's usage per UTC day and sku, day descending then sku
/// ascending. An asset the tenant never metered is not found.
#[utoipa::path(get, path = "/api/meter/assets/{asset_id}/usage", tag = "sdk-meter", params(("asset_id" = String, Path, description = "the asset"), DayRange),
    responses((status = 200, description = "the daily roll-up", body = Data<Vec<Rollup>>)))]
async fn usage(State(state): State<AppState>, Tenant(ctx): Tenant, Path(asset): Path<String>, Params(q): Params<DayRange>) -> ApiResult<Data<Vec<Rollup>>> {
    let asset = path_id(&asset)?.to_string();
    let mut check = Check::new();
    let from = parse_day(&mut check, "from", &q.from).map(|d| d.to_string()).unwrap_or_else(|| "0000-01-01".to_string());
    let to = parse_day(&mut check, "to", &q.to).map(|d| d.to_string()).unwrap_or_else(|| "9999-12-31".to_string());
    check.finish()?;
    let mut tx = state.db.read.begin().await?;
    let metered: Option<i64> = sqlx::query_scalar("SELECT 1 FROM meter_usage_rollup WHERE tenant_id = $1 AND asset_id = $2 LIMIT 1")
        .bind(&ctx.tenant_id)
        .bind(&asset)
        .fetch_optional(&mut *tx)
        .await?;
    metered.ok_or(ApiError::NotFound)?;
    let rows: Vec<Rollup> = sqlx::query_as(
        "SELECT asset_id, NULLIF(sensor_id, '') AS sensor_id, day, sku, units, events FROM meter_usage_rollup \
         WHERE tenant_id = $1 AND asset_id = $2 AND day >= $3 AND day <= $4 ORDER BY day DESC, sku, sensor_id",
    )
    .bind(&ctx.tenant_id)
    .bind(&asset)
    .bind(&from)
    .bind(&to)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(ok(rows))
}

/// One row of a tenant's daily roll-up.
#[derive(Debug, Clone, FromRow, Serialize)]
pub struct DailyUsage {
    pub day: String,
    pub asset_id: String,
    pub sensor_id: Option<String>,
    pub sku: String,
    pub units: i64,
    pub events: i64,
}

/// The tenant's daily roll-up from `first` to `last` (UTC days, both
/// inclusive), by day, asset, sku and sensor; at most `limit` rows.
pub async fn daily_usage(tx: &mut Tx, tenant_id: &str, first: &str, last: &str, limit: i64) -> ApiResult<Vec<DailyUsage>> {
    Ok(sqlx::query_as(
        "SELECT day, asset_id, NULLIF(sensor_id, '') AS sensor_id, sku, units, events FROM meter_usage_rollup \
         WHERE tenant_id = $1 AND day >= $2 AND day <= $3 ORDER BY day, asset_id, sku, sensor_id LIMIT $4",
    )
    .bind(tenant_id)
    .bind(first)
    .bind(last)
    .bind(limit)
    .fetch_all(&mut **tx)
    .await?)
}

/// A tenant's usage of one sku over whole UTC days (both inclusive).
#[derive(Debug, Clone, FromRow)]
pub struct SkuUsage {
    pub sku: String,
    pub units: i64,
    /// Usage events (calls).
    pub events: i64,
}

/// The tenant's usage per sku from `first` to `last` (UTC days, both
/// inclusive), ordered by sku: read from the daily roll-up, so its cost
/// follows days and skus, not events.
pub async fn usage_by_sku(tx: &mut Tx, tenant_id: &str, first: &str, last: &str) -> ApiResult<Vec<SkuUsage>> {
    Ok(sqlx::query_as(
        "SELECT sku, CAST(SUM(units) AS BIGINT) AS units, CAST(SUM(events) AS BIGINT) AS events FROM meter_usage_rollup \
         WHERE tenant_id = $1 AND day >= $2 AND day <= $3 GROUP BY sku ORDER BY sku",
    )
    .bind(tenant_id)
    .bind(first)
    .bind(last)
    .fetch_all(&mut **tx)
    .await?)
}

/// A tenant's hard cap on a sku's usage in each UTC month.
#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = MeterHardcap)]
pub struct Hardcap {
    pub tenant_id: String,
    pub sku: String,
    pub monthly_units: i64,
    pub set_by: String,
    pub updated_at: Timestamp,
}

const HARDCAP_COLUMNS: &str = "tenant_id, sku, monthly_units, set_by, updated_at";

/// Sets (or replaces) a tenant's monthly hard cap on a sku (the library's
/// door: the operator named by `operator_id` is also the event's actor).
/// See [`set_hardcap_as`].
pub async fn set_hardcap(db: &Db, tenant_id: &str, sku: &str, monthly_units: i64, operator_id: &str) -> ApiResult<Hardcap> {
    Ok(set_hardcap_as(db, operator_id, tenant_id, sku, monthly_units, operator_id).await?.0)
}

/// Sets (or replaces) a tenant's monthly hard cap on a sku (`PUT
/// /admin/meter/hardcaps/{tenant_id}/{sku}`'s work; no tenant route sets a
/// cap): the first set of a (tenant, sku) inserts the cap
/// (`Written::Made`), any other, concurrent or later, replaces it
/// (`Written::Found`). Usage already recorded this month counts against
/// it. Records `billing.hardcap.set.v1` in the tenant's chain, `actor`
/// (the operator credential) as its actor. An unknown tenant is the
/// foreign key's 400.
pub async fn set_hardcap_as(db: &Db, actor: &str, tenant_id: &str, sku: &str, monthly_units: i64, operator_id: &str) -> ApiResult<(Hardcap, Written)> {
    let mut check = Check::new();
    if !valid_sku(sku) {
        check.fail("sku must be 1 to 128 letters, digits or . _ : / -");
    }
    if monthly_units < 0 {
        check.fail("monthly_units must be 0 or more");
    }
    if operator_id.trim().is_empty() {
        check.fail("operator_id is required");
    }
    check.finish()?;
    let now = db::now();
    let insert = format!(
        "INSERT INTO meter_hardcap (tenant_id, sku, monthly_units, set_by, updated_at) VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (tenant_id, sku) DO NOTHING RETURNING {HARDCAP_COLUMNS}"
    );
    let replace =
        format!("UPDATE meter_hardcap SET monthly_units = $3, set_by = $4, updated_at = $5 WHERE tenant_id = $1 AND sku = $2 RETURNING {HARDCAP_COLUMNS}");
    let mut tx = db.begin().await?;
    let (cap, written): (Hardcap, _) = insert_or_read(
        &mut tx,
        sqlx::query_as(sqlx::AssertSqlSafe(insert)).bind(tenant_id).bind(sku).bind(monthly_units).bind(operator_id).bind(&now),
        sqlx::query_as(sqlx::AssertSqlSafe(replace)).bind(tenant_id).bind(sku).bind(monthly_units).bind(operator_id).bind(&now),
    )
    .await?;
    let payload = json!({ "sku": sku, "monthly_units": monthly_units, "operator_id": operator_id, "replaced": written == Written::Found });
    hub_kernel::audit::record_operator_in(&mut tx, tenant_id, actor, events::BILLING_HARDCAP_SET, payload).await?;
    tx.commit().await?;
    Ok((cap, written))
}

/// Removes a tenant's hard cap on a sku (`DELETE
/// /admin/meter/hardcaps/{tenant_id}/{sku}`'s work): the cap row goes in
/// one `DELETE ... RETURNING` (the tenant's usage, its monthly roll-up and
/// the operator's overrides stay; the audit chain keeps the cap's history).
/// 404 when the tenant has no cap on the sku (of two removals at once, one
/// removes it). Records `billing.hardcap.removed.v1` in the tenant's chain.
pub async fn remove_hardcap_as(db: &Db, actor: &str, tenant_id: &str, sku: &str) -> ApiResult<Hardcap> {
    let mut tx = db.begin().await?;
    let sql = format!("DELETE FROM meter_hardcap WHERE tenant_id = $1 AND sku = $2 RETURNING {HARDCAP_COLUMNS}");
    let removed: Option<Hardcap> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(sku).fetch_optional(&mut *tx).await?;
    let cap = removed.ok_or(ApiError::NotFound)?;
    let payload = json!({ "sku": cap.sku, "monthly_units": cap.monthly_units });
    hub_kernel::audit::record_operator_in(&mut tx, tenant_id, actor, events::BILLING_HARDCAP_REMOVED, payload).await?;
    tx.commit().await?;
    Ok(cap)
}

/// One page of every tenant's hard caps (or one tenant's, or one sku's:
/// an empty filter matches all), by tenant then sku: the operator's `GET
/// /admin/meter/hardcaps`.
pub async fn hardcaps_across(db: &Db, page: Page, tenant_id: &str, sku: &str) -> ApiResult<ListOf<Hardcap>> {
    let listing =
        Listing { table: "meter_hardcap", columns: HARDCAP_COLUMNS, filter: "($1 = '' OR tenant_id = $1) AND ($2 = '' OR sku = $2)", order: "tenant_id, sku" };
    page.list::<Hardcap>(&db.read, &listing, &[tenant_id, sku]).await
}

/// A hard cap as its tenant reads it: the cap and what is left of it in
/// the current UTC month.
#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = MeterTenantHardcap)]
struct TenantHardcap {
    sku: String,
    monthly_units: i64,
    /// The current UTC month, `YYYY-MM`.
    period: String,
    /// Units of the sku recorded this month.
    used: i64,
    /// `monthly_units - used`, never below 0.
    remaining: i64,
    /// When this month's usage first met the cap (an event was refused).
    cap_reached_at: Option<Timestamp>,
    /// While an operator's override runs, the cap does not apply: its end.
    overridden_until: Option<Timestamp>,
    updated_at: Timestamp,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct HardcapFilter {
    /// Only this sku's cap.
    #[param(max_length = 128, pattern = r"^[A-Za-z0-9._:/-]{1,128}$")]
    sku: Option<String>,
}

/// The tenant's monthly hard caps, by sku, each with this UTC month's
/// usage and what is left (a usage event over a cap is 429); a cap under
/// an operator's override names its end.
#[utoipa::path(get, path = "/api/meter/hardcaps", tag = "sdk-meter", params(HardcapFilter, Page),
    responses((status = 200, description = "one page of caps", body = ListOf<TenantHardcap>)))]
async fn hardcaps(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page, Params(q): Params<HardcapFilter>) -> ApiResult<ListOf<TenantHardcap>> {
    static SKU: Pattern = Pattern::query::<HardcapFilter>("sku");
    let mut check = Check::new();
    if let Some(sku) = &q.sku {
        check.matches(sku, &SKU, "sku must be 1 to 128 letters, digits or . _ : / -");
    }
    check.finish()?;
    let sku = q.sku.as_deref().unwrap_or("");
    let period = Utc::now().format("%Y-%m").to_string();
    let now = db::now();
    let filter = "tenant_id = $1 AND ($2 = '' OR sku = $2)";
    let total = hub_kernel::extract::count(&state.db.read, "meter_hardcap", filter, &[&ctx.tenant_id, sku]).await?;
    let rows: Vec<TenantHardcap> = sqlx::query_as(
        "SELECT c.sku, c.monthly_units, CAST($3 AS TEXT) AS period, COALESCE(u.units, 0) AS used, \
         CASE WHEN c.monthly_units > COALESCE(u.units, 0) THEN c.monthly_units - COALESCE(u.units, 0) ELSE 0 END AS remaining, \
         u.cap_reached_at, (SELECT MAX(o.until) FROM meter_hardcap_override o WHERE o.tenant_id = c.tenant_id AND o.sku = c.sku AND o.until > $4) \
         AS overridden_until, c.updated_at FROM meter_hardcap c \
         LEFT JOIN meter_period_usage u ON u.tenant_id = c.tenant_id AND u.sku = c.sku AND u.period = $3 \
         WHERE c.tenant_id = $1 AND ($2 = '' OR c.sku = $2) ORDER BY c.sku LIMIT $5 OFFSET $6",
    )
    .bind(&ctx.tenant_id)
    .bind(sku)
    .bind(&period)
    .bind(&now)
    .bind(page.limit)
    .bind(page.offset)
    .fetch_all(&state.db.read)
    .await?;
    Ok(list(rows, total))
}

/// The tenant's usage of a sku on a UTC day, over all its assets.
#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = MeterTenantUsage)]
struct TenantUsage {
    /// The UTC day, `YYYY-MM-DD`.
    day: String,
    sku: String,
    units: i64,
    /// Usage events counted (calls).
    events: i64,
    /// Assets that used the sku that day.
    assets: i64,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct UsageFilter {
    /// The first UTC day, `YYYY-MM-DD` (inclusive).
    from: Option<String>,
    /// The last UTC day, `YYYY-MM-DD` (inclusive).
    to: Option<String>,
    /// Only this sku.
    #[param(max_length = 128, pattern = r"^[A-Za-z0-9._:/-]{1,128}$")]
    sku: Option<String>,
}

/// The tenant's usage per UTC day and sku over all its assets (the daily
/// roll-up summed), day descending then sku; `from`/`to` bound the days.
#[utoipa::path(get, path = "/api/meter/usage", tag = "sdk-meter", params(UsageFilter, Page),
    responses((status = 200, description = "one page of the tenant's daily usage", body = ListOf<TenantUsage>)))]
async fn tenant_usage(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page, Params(q): Params<UsageFilter>) -> ApiResult<ListOf<TenantUsage>> {
    let mut check = Check::new();
    let from = parse_day(&mut check, "from", &q.from).map(|d| d.to_string()).unwrap_or_else(|| "0000-01-01".to_string());
    let to = parse_day(&mut check, "to", &q.to).map(|d| d.to_string()).unwrap_or_else(|| "9999-12-31".to_string());
    static SKU: Pattern = Pattern::query::<UsageFilter>("sku");
    if let Some(sku) = &q.sku {
        check.matches(sku, &SKU, "sku must be 1 to 128 letters, digits or . _ : / -");
    }
    let sku = q.sku.as_deref().unwrap_or("");
    if from > to {
        check.fail("from must be on or before to");
    }
    check.finish()?;
    let filter = "tenant_id = $1 AND day >= $2 AND day <= $3 AND ($4 = '' OR sku = $4)";
    let groups = format!("(SELECT day, sku FROM meter_usage_rollup WHERE {filter} GROUP BY day, sku) g");
    let total = hub_kernel::extract::count(&state.db.read, &groups, "1 = 1", &[&ctx.tenant_id, &from, &to, sku]).await?;
    let sql = format!(
        "SELECT day, sku, CAST(SUM(units) AS BIGINT) AS units, CAST(SUM(events) AS BIGINT) AS events, COUNT(DISTINCT asset_id) AS assets \
         FROM meter_usage_rollup WHERE {filter} GROUP BY day, sku ORDER BY day DESC, sku LIMIT $5 OFFSET $6"
    );
    let rows: Vec<TenantUsage> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&ctx.tenant_id)
        .bind(&from)
        .bind(&to)
        .bind(sku)
        .bind(page.limit)
        .bind(page.offset)
        .fetch_all(&state.db.read)
        .await?;
    Ok(list(rows, total))
}

/// An operator's override: the tenant's hard cap on the sku does not apply
/// until `until`.
#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = MeterHardcapOverride)]
pub struct Override {
    pub override_id: Id,
    pub tenant_id: String,
    pub sku: String,
    pub until: Timestamp,
    pub operator_id: String,
    pub reason: String,
    pub trace_id: Option<String>,
    pub created_at: Timestamp,
}

/// An operator's hard-cap override as the operator route takes it.
pub struct NewOverride<'a> {
    pub tenant_id: &'a str,
    pub sku: &'a str,
    /// RFC 3339.
    pub until: &'a str,
    pub operator_id: &'a str,
    pub reason: &'a str,
    pub trace_id: Option<&'a str>,
}

/// Records an operator's hard-cap override (`POST
/// /admin/meter/hardcap/override`'s work) and its event in the tenant's
/// chain, `actor` (the operator credential) as its actor.
pub async fn override_hardcap(db: &Db, actor: &str, o: NewOverride<'_>) -> ApiResult<Override> {
    let mut check = Check::new();
    check_sku(&mut check, o.sku);
    let until = check.optional_expiry("until", &Some(o.until.to_string()));
    if o.operator_id.trim().is_empty() || o.reason.trim().is_empty() {
        check.fail("operator_id and reason are required");
    }
    check.finish()?;
    let mut tx = db.begin().await?;
    let row: Override = sqlx::query_as(
        "INSERT INTO meter_hardcap_override (override_id, tenant_id, sku, until, operator_id, reason, trace_id, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING override_id, tenant_id, sku, until, operator_id, reason, trace_id, created_at",
    )
    .bind(db::new_id())
    .bind(o.tenant_id)
    .bind(o.sku)
    .bind(&until)
    .bind(o.operator_id)
    .bind(o.reason)
    .bind(o.trace_id)
    .bind(db::now())
    .fetch_one(&mut *tx)
    .await?;
    let payload = json!({ "override_id": row.override_id, "sku": o.sku, "until": row.until, "operator_id": o.operator_id, "trace_id": o.trace_id });
    hub_kernel::audit::record_operator_in(&mut tx, o.tenant_id, actor, events::BILLING_HARDCAP_OVERRIDDEN, payload).await?;
    tx.commit().await?;
    Ok(row)
}
