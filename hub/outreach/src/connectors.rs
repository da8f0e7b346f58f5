//! sdk-connectors: what a tenant's connectors (a CRM, a calendar, a
//! billing system, each a `connector_kind`) report of the items they sync.
//! A failed item is dead-lettered: one open dead letter per item, which a
//! replay resolves by putting the item back to `pending` for its connector
//! to sync again. A replay takes one dead letter or every one still open
//! of the tenant (optionally of one kind); replaying never touches a dead
//! letter twice, and a replay with an `idempotency_key` answers its first
//! result again on a repeat.

use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(report, list_items))
        .routes(routes!(get_item))
        .routes(routes!(list_deadletters))
        .routes(routes!(get_deadletter))
        .routes(routes!(replay))
}

stored_enum! {
    /// Where a sync item is: `pending` when a replay put it back to be
    /// synced again.
    #[schema(as = ConnectorSyncItemStatus)]
    enum ItemStatus { Synced = "synced", DeadLettered = "dead_lettered", Pending = "pending" }
}

stored_enum! {
    /// Where a dead letter is: open (`dead_lettered`), `replayed`, or
    /// `resolved` when the item synced without a replay.
    #[schema(as = ConnectorDeadLetterStatus)]
    enum DeadLetterStatus { DeadLettered = "dead_lettered", Replayed = "replayed", Resolved = "resolved" }
}

/// The largest payload an item carries, in bytes of JSON.
const MAX_PAYLOAD: usize = 64 * 1024;

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = ConnectorSyncItem)]
struct SyncItem {
    item_id: Id,
    connector_kind: String,
    external_id: String,
    direction: Direction,
    #[sqlx(try_from = "String")]
    #[schema(value_type = Object)]
    payload: JsonText,
    status: ItemStatus,
    /// Outcomes reported.
    attempts: i64,
    /// Times the item was replayed.
    replays: i64,
    last_error: Option<String>,
    created_at: Timestamp,
    updated_at: Timestamp,
}

const ITEM_COLUMNS: &str = "item_id, connector_kind, external_id, direction, payload, status, attempts, replays, last_error, created_at, updated_at";

#[derive(Debug, FromRow, Serialize, ToSchema)]
struct ConnectorDeadLetter {
    deadletter_id: Id,
    item_id: Id,
    connector_kind: String,
    external_id: String,
    /// The latest failure's error.
    error: String,
    /// Failures reported while the dead letter was open.
    failures: i64,
    status: DeadLetterStatus,
    dead_lettered_at: Timestamp,
    replayed_at: Option<Timestamp>,
    updated_at: Timestamp,
}

const DEADLETTER_COLUMNS: &str = "deadletter_id, item_id, connector_kind, external_id, error, failures, status, dead_lettered_at, replayed_at, updated_at";

fn valid_kind(s: &str) -> bool {
    (1..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-'))
}

#[derive(Deserialize, ToSchema)]
struct NewSyncItem {
    /// The connector: 1 to 64 of `a-z 0-9 . _ -` (`hubspot`, `google-calendar`, ...).
    #[schema(max_length = 64)]
    connector_kind: String,
    /// The item's id in the other system: one item per (connector_kind, external_id).
    #[schema(max_length = 256)]
    external_id: String,
    outcome: Outcome,
    /// Why it failed; required with `failed`.
    #[schema(max_length = 2000)]
    error: Option<String>,
    /// `inbound` when absent.
    direction: Option<Direction>,
    /// What was synced (at most 64 KiB of JSON); `{}` when absent.
    payload: Option<serde_json::Map<String, Value>>,
}

/// How syncing an item went.
#[derive(Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = ConnectorSyncOutcome)]
enum Outcome {
    Succeeded,
    Failed,
}

stored_enum! {
    /// Which way an item was synced: `inbound` (into the hub's tenant) or
    /// `outbound`.
    #[schema(as = ConnectorSyncDirection)]
    enum Direction { Inbound = "inbound", Outbound = "outbound" }
}

/// The item as recorded, with the dead letter a failure opened or kept open.
#[derive(Serialize, ToSchema)]
struct SyncReport {
    #[serde(flatten)]
    item: SyncItem,
    /// The item's open dead letter (null when it synced).
    deadletter_id: Option<Id>,
}

/// Records a sync outcome of an item: 201 for a new item, 200 for one
/// reported before. A failure dead-letters the item (one open dead letter
/// per item); a success resolves an open one.
#[utoipa::path(post, path = "/api/connectors/sync-items", tag = "sdk-connectors", request_body = NewSyncItem,
    extensions(("x-concurrency" = json!({ "outcome": "first-creates", "events": 9, "body": { "connector_kind": "race", "external_id": "e-{unique}", "outcome": "failed", "error": "timeout" } }))),
    responses((status = 201, description = "the item, first reported", body = Data<SyncReport>),
              (status = 200, description = "the item, reported again", body = Data<SyncReport>)))]
async fn report(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewSyncItem>) -> ApiResult<Response> {
    use axum::response::IntoResponse;
    let body = body.checked()?;
    let mut check = Check::new();
    let kind = body.connector_kind.trim().to_string();
    if !valid_kind(&kind) {
        check.fail("connector_kind must be 1 to 64 of a-z, 0-9, '.', '_' or '-'");
    }
    let external = body.external_id.trim().to_string();
    let error = Check::optional(&body.error);
    let failed = body.outcome == Outcome::Failed;
    if failed && error.is_none() {
        check.fail("error is required when the outcome is failed");
    }
    let direction = body.direction.unwrap_or(Direction::Inbound);
    let payload = Value::Object(body.payload.unwrap_or_default()).to_string();
    if payload.len() > MAX_PAYLOAD {
        check.fail(format!("payload must be at most {MAX_PAYLOAD} bytes of JSON"));
    }
    check.finish()?;
    let status = if failed { ItemStatus::DeadLettered } else { ItemStatus::Synced };
    let error = if failed { error } else { None };
    let now = db::now();
    let mut tx = state.db.begin().await?;
    // The first report of an item inserts it (201); any other, concurrent
    // or later, finds it and records another attempt (200). Either way the
    // item's row stays locked until the commit, so the reports of one item
    // open and resolve its dead letter one after another.
    let insert = format!(
        "INSERT INTO connector_sync_item (item_id, tenant_id, connector_kind, external_id, direction, payload, status, attempts, replays, \
         last_error, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, 1, 0, $8, $9, $9) \
         ON CONFLICT (tenant_id, connector_kind, external_id) DO NOTHING RETURNING {ITEM_COLUMNS}"
    );
    let again = format!(
        "UPDATE connector_sync_item SET direction = $4, payload = $5, status = $6, attempts = attempts + 1, last_error = $7, updated_at = $8 \
         WHERE tenant_id = $1 AND connector_kind = $2 AND external_id = $3 RETURNING {ITEM_COLUMNS}"
    );
    let (item, written): (SyncItem, _) = insert_or_read(
        &mut tx,
        sqlx::query_as(sqlx::AssertSqlSafe(insert))
            .bind(db::new_id())
            .bind(&ctx.tenant_id)
            .bind(&kind)
            .bind(&external)
            .bind(direction)
            .bind(&payload)
            .bind(status)
            .bind(&error)
            .bind(&now),
        sqlx::query_as(sqlx::AssertSqlSafe(again))
            .bind(&ctx.tenant_id)
            .bind(&kind)
            .bind(&external)
            .bind(direction)
            .bind(&payload)
            .bind(status)
            .bind(&error)
            .bind(&now),
    )
    .await?;
    let is_new = written == Written::Made;
    let open: Option<Id> =
        sqlx::query_scalar("SELECT deadletter_id FROM connector_deadletter WHERE tenant_id = $1 AND item_id = $2 AND status = 'dead_lettered'")
            .bind(&ctx.tenant_id)
            .bind(item.item_id)
            .fetch_optional(&mut *tx)
            .await?;
    let payload = json!({ "item_id": item.item_id, "connector_kind": kind, "external_id": external, "attempts": item.attempts });
    let deadletter = match (failed, open) {
        (false, open) => {
            if let Some(d) = open {
                sqlx::query("UPDATE connector_deadletter SET status = 'resolved', updated_at = $3 WHERE tenant_id = $1 AND deadletter_id = $2")
                    .bind(&ctx.tenant_id)
                    .bind(d)
                    .bind(&now)
                    .execute(&mut *tx)
                    .await?;
            }
            audit::record(&mut tx, &ctx, events::CONNECTOR_SYNC_COMPLETED, payload).await?;
            None
        }
        (true, Some(d)) => {
            sqlx::query("UPDATE connector_deadletter SET error = $3, failures = failures + 1, updated_at = $4 WHERE tenant_id = $1 AND deadletter_id = $2")
                .bind(&ctx.tenant_id)
                .bind(d)
                .bind(&error)
                .bind(&now)
                .execute(&mut *tx)
                .await?;
            audit::record(&mut tx, &ctx, events::CONNECTOR_SYNC_FAILED, payload).await?;
            Some(d)
        }
        (true, None) => {
            let d = Id::new();
            sqlx::query(
                "INSERT INTO connector_deadletter (deadletter_id, tenant_id, item_id, connector_kind, external_id, error, failures, status, \
                 dead_lettered_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, 1, 'dead_lettered', $7, $7)",
            )
            .bind(d)
            .bind(&ctx.tenant_id)
            .bind(item.item_id)
            .bind(&kind)
            .bind(&external)
            .bind(&error)
            .bind(&now)
            .execute(&mut *tx)
            .await?;
            audit::record(&mut tx, &ctx, events::CONNECTOR_SYNC_FAILED, payload.clone()).await?;
            let mut dead = payload;
            dead["deadletter_id"] = json!(d);
            audit::record(&mut tx, &ctx, events::CONNECTOR_ITEM_DEAD_LETTERED, dead).await?;
            Some(d)
        }
    };
    tx.commit().await?;
    let report = SyncReport { item, deadletter_id: deadletter };
    Ok(if is_new { created(report).into_response() } else { ok(report).into_response() })
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ItemFilter {
    connector_kind: Option<String>,
    #[param(inline)]
    status: Option<ItemStatus>,
}

/// The tenant's sync items, most recently reported first (`status=pending`:
/// what replays put back for the connectors).
#[utoipa::path(get, path = "/api/connectors/sync-items", tag = "sdk-connectors", params(ItemFilter, Page),
    responses((status = 200, description = "one page of items", body = ListOf<SyncItem>)))]
async fn list_items(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<ItemFilter>, page: Page) -> ApiResult<ListOf<SyncItem>> {
    let status = q.status.map_or("", ItemStatus::as_str);
    let kind = Check::optional(&q.connector_kind).unwrap_or_default();
    let listing = Listing {
        table: "connector_sync_item",
        columns: ITEM_COLUMNS,
        filter: "tenant_id = $1 AND ($2 = '' OR connector_kind = $2) AND ($3 = '' OR status = $3)",
        order: "updated_at DESC, item_id DESC",
    };
    page.list::<SyncItem>(&state.db.read, &listing, &[&ctx.tenant_id, &kind, status]).await
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct DeadLetterFilter {
    /// The caller's tenant.
    #[param(format = "uuid")]
    tenant_id: String,
    connector_kind: Option<String>,
    /// `dead_lettered` (the ones still open) when absent.
    #[param(inline)]
    status: Option<DeadLetterStatus>,
}

/// The tenant's dead letters, newest first; by default those still open.
#[utoipa::path(get, path = "/api/connectors/deadletters", tag = "sdk-connectors", params(DeadLetterFilter, Page),
    responses((status = 200, description = "one page of dead letters", body = ListOf<ConnectorDeadLetter>)))]
async fn list_deadletters(
    State(state): State<AppState>,
    Tenant(ctx): Tenant,
    Params(q): Params<DeadLetterFilter>,
    page: Page,
) -> ApiResult<ListOf<ConnectorDeadLetter>> {
    ctx.check_tenant(Some(&q.tenant_id))?;
    let status = q.status.unwrap_or(DeadLetterStatus::DeadLettered).as_str();
    let kind = Check::optional(&q.connector_kind).unwrap_or_default();
    let listing = Listing {
        table: "connector_deadletter",
        columns: DEADLETTER_COLUMNS,
        filter: "tenant_id = $1 AND status = $2 AND ($3 = '' OR connector_kind = $3)",
        order: "dead_lettered_at DESC, deadletter_id DESC",
    };
    page.list::<ConnectorDeadLetter>(&state.db.read, &listing, &[&ctx.tenant_id, status, &kind]).await
}

#[derive(Deserialize, ToSchema)]
struct ConnectorReplayRequest {
    /// One dead letter to replay (404 when unknown or no longer open).
    #[schema(format = "uuid")]
    deadletter_id: Option<String>,
    /// Without `deadletter_id`: replay every open dead letter of this tenant (the caller's).
    #[schema(format = "uuid")]
    tenant_id: Option<String>,
    /// With `tenant_id`: only this connector's.
    connector_kind: Option<String>,
    /// A repeat with the same key answers the first replay's result and replays nothing.
    #[schema(max_length = 128)]
    idempotency_key: Option<String>,
}

/// What a replay did.
#[derive(Serialize, Deserialize, ToSchema)]
struct ConnectorReplay {
    replay_id: Id,
    /// How many dead letters it replayed.
    replayed: i64,
    deadletter_ids: Vec<Id>,
    /// Whether this answer repeats an earlier replay with the same idempotency_key.
    #[serde(default)]
    repeated: bool,
}

/// Replays dead letters: one by `deadletter_id`, or every open one of the
/// tenant (optionally of one `connector_kind`); each replayed item goes
/// back to `pending`.
#[utoipa::path(post, path = "/api/connectors/deadletters/replay", tag = "sdk-connectors", request_body = ConnectorReplayRequest,
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "losers": 404, "given": [["POST", "/api/connectors/sync-items", { "connector_kind": "race", "external_id": "e-{unique}", "outcome": "failed", "error": "timeout" }]], "body": { "deadletter_id": "{deadletter_id}" } }))),
    responses((status = 200, description = "what was replayed", body = Data<ConnectorReplay>),
        (status = 404, description = "NotFound: no dead letter of this tenant with that id", body = ErrorBody)))]
async fn replay(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<ConnectorReplayRequest>) -> ApiResult<Data<ConnectorReplay>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let one = check.optional_uuid("deadletter_id", &body.deadletter_id).map(|u| u.to_string());
    let tenant = Check::optional(&body.tenant_id);
    let kind = Check::optional(&body.connector_kind);
    if one.is_none() && tenant.is_none() {
        check.fail("deadletter_id or tenant_id is required");
    }
    if one.is_some() && kind.is_some() {
        check.fail("connector_kind goes with tenant_id, not with deadletter_id");
    }
    let key = Check::optional(&body.idempotency_key);
    check.finish()?;
    let request = json!({ "deadletter_id": one, "connector_kind": kind }).to_string();
    let mut tx = state.db.begin().await?;
    let replay_id = Id::new();
    let now = db::now();
    if let Some(k) = &key {
        // The first replay with the key claims it (its result is written
        // below, in the same transaction); any other, concurrent or later,
        // finds the claim once that transaction committed, and answers its
        // result.
        let (stored, written): ((String, String), _) = insert_or_read(
            &mut tx,
            sqlx::query_as(
                "INSERT INTO connector_replay (replay_id, tenant_id, idempotency_key, request, result, created_at) VALUES ($1, $2, $3, $4, '{}', $5) \
                 ON CONFLICT (tenant_id, idempotency_key) DO NOTHING RETURNING request, result",
            )
            .bind(replay_id)
            .bind(&ctx.tenant_id)
            .bind(k)
            .bind(&request)
            .bind(&now),
            sqlx::query_as("SELECT request, result FROM connector_replay WHERE tenant_id = $1 AND idempotency_key = $2").bind(&ctx.tenant_id).bind(k),
        )
        .await?;
        if written == Written::Found {
            let (earlier, result) = stored;
            if earlier != request {
                return Err(ApiError::Conflict("idempotency_key was used for another replay".into()));
            }
            let mut answer: ConnectorReplay = serde_json::from_str(&result).map_err(|e| ApiError::Internal(e.into()))?;
            answer.repeated = true;
            return Ok(ok(answer));
        }
    }
    let replayed: Vec<(Id, Id, String)> = sqlx::query_as(
        "UPDATE connector_deadletter SET status = 'replayed', replay_id = $2, replayed_at = $3, updated_at = $3 \
         WHERE tenant_id = $1 AND status = 'dead_lettered' AND ($4 = '' OR deadletter_id = $4) AND ($5 = '' OR connector_kind = $5) \
         RETURNING deadletter_id, item_id, connector_kind",
    )
    .bind(&ctx.tenant_id)
    .bind(replay_id)
    .bind(&now)
    .bind(one.clone().unwrap_or_default())
    .bind(kind.clone().unwrap_or_default())
    .fetch_all(&mut *tx)
    .await?;
    if one.is_some() && replayed.is_empty() {
        return Err(ApiError::NotFound);
    }
    sqlx::query(
        "UPDATE connector_sync_item SET status = 'pending', replays = replays + 1, updated_at = $3 \
         WHERE tenant_id = $1 AND item_id IN (SELECT item_id FROM connector_deadletter WHERE tenant_id = $1 AND replay_id = $2)",
    )
    .bind(&ctx.tenant_id)
    .bind(replay_id)
    .bind(&now)
    .execute(&mut *tx)
    .await?;
    for (deadletter_id, item_id, connector_kind) in &replayed {
        let payload = json!({ "deadletter_id": deadletter_id, "item_id": item_id, "connector_kind": connector_kind, "replay_id": replay_id });
        audit::record(&mut tx, &ctx, events::CONNECTOR_ITEM_REPLAYED, payload).await?;
    }
    let mut ids: Vec<Id> = replayed.into_iter().map(|(d, _, _)| d).collect();
    ids.sort();
    let answer = ConnectorReplay { replay_id, replayed: ids.len() as i64, deadletter_ids: ids, repeated: false };
    if key.is_some() {
        sqlx::query("UPDATE connector_replay SET result = $3 WHERE tenant_id = $1 AND replay_id = $2")
            .bind(&ctx.tenant_id)
            .bind(replay_id)
            .bind(serde_json::to_string(&answer).map_err(|e| ApiError::Internal(e.into()))?)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(ok(answer))
}

/// One sync item of the tenant.
#[utoipa::path(get, path = "/api/connectors/sync-items/{item_id}", tag = "sdk-connectors",
    params(("item_id" = String, Path, description = "the sync item")),
    responses((status = 200, description = "the item", body = Data<SyncItem>)))]
async fn get_item(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<SyncItem>> {
    let id = path_id(&id)?.to_string();
    let sql = format!("SELECT {ITEM_COLUMNS} FROM connector_sync_item WHERE tenant_id = $1 AND item_id = $2");
    let item: Option<SyncItem> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&state.db.read).await?;
    Ok(ok(item.ok_or(ApiError::NotFound)?))
}

/// One dead letter of the tenant, in any status.
#[utoipa::path(get, path = "/api/connectors/deadletters/{deadletter_id}", tag = "sdk-connectors",
    params(("deadletter_id" = String, Path, description = "the dead letter")),
    responses((status = 200, description = "the dead letter", body = Data<ConnectorDeadLetter>)))]
async fn get_deadletter(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<ConnectorDeadLetter>> {
    let id = path_id(&id)?.to_string();
    let sql = format!("SELECT {DEADLETTER_COLUMNS} FROM connector_deadletter WHERE tenant_id = $1 AND deadletter_id = $2");
    let found: Option<ConnectorDeadLetter> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&state.db.read).await?;
    Ok(ok(found.ok_or(ApiError::NotFound)?))
}
