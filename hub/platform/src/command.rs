//! sdk-command: robot commands with risk classes, human approval of the
//! risky ones, delivery to the asset's stream and idempotent acks.
//!
//! States: `awaiting_approval` (high/critical until decided), `queued`
//! (ready for the robot; low/medium start here), `delivered` (sent on a
//! stream, not yet acknowledged), `acknowledged_ok`, `acknowledged_failed`,
//! `rejected` (a decision said no; never delivered), `expired` (its time
//! to live ran out before delivery; never delivered) and `cancelled`
//! (withdrawn by its tenant, or by the asset's retirement, while it waited
//! for approval or delivery; never delivered).
//!
//! A command gets its stream position `seq` when it becomes `queued`, so the
//! stream order is the order in which commands became deliverable, and an
//! SSE `Last-Event-ID` never skips a command approved late.

use crate::{
    asset,
    robots::{Robot, RobotCredential},
    sse, watch,
};
use hub_kernel::prelude::*;
use hub_kernel::{bus, gate::keys};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list_commands))
        .routes(routes!(get_command))
        .routes(routes!(decide))
        .routes(routes!(cancel))
        .routes(routes!(ack))
        .routes(routes!(sse::stream))
        .routes(routes!(watch::watch))
}

/// A robot's acknowledgement of a command.
#[derive(Deserialize, ToSchema)]
struct NewCommandAck {
    /// Whether the robot carried the command out.
    ok: bool,
    code: Option<String>,
    message: Option<String>,
    /// Any JSON the robot reports.
    data: Option<Value>,
}

/// Every state of a command, as stored and answered (the metrics name them).
pub const STATES: &[&str] = &["awaiting_approval", "queued", "delivered", "acknowledged_ok", "acknowledged_failed", "rejected", "expired", "cancelled"];

stored_enum! {
    /// Where a command is in its life.
    #[schema(as = CommandState)]
    pub enum CommandState {
        AwaitingApproval = "awaiting_approval",
        Queued = "queued",
        Delivered = "delivered",
        AcknowledgedOk = "acknowledged_ok",
        AcknowledgedFailed = "acknowledged_failed",
        Rejected = "rejected",
        Expired = "expired",
        Cancelled = "cancelled",
    }
}

stored_enum! {
    /// A command's risk class: high and critical wait for a person's decision.
    #[schema(as = CommandRiskClass)]
    pub enum RiskClass { Low = "low", Medium = "medium", High = "high", Critical = "critical" }
}

/// The grant a person's persona needs to decide on a high or critical command.
pub const APPROVE_PERMISSION: &str = "command.command.approve";

/// A command's time to live by default (its bounds are `NewCommand`'s).
const DEFAULT_TTL: i64 = 3600;

/// A command as stored. It serialises as [`CommandView`], the shape callers
/// see (and the schema the document gives it).
#[derive(Clone, Debug, FromRow, Serialize)]
#[serde(into = "CommandView")]
pub struct Command {
    command_id: Id,
    tenant_id: String,
    target_asset_id: String,
    target_component_id: Option<String>,
    #[sqlx(rename = "type")]
    kind: String,
    #[sqlx(try_from = "String")]
    params: JsonText,
    risk_class: RiskClass,
    status: CommandState,
    seq: Option<i64>,
    ttl_seconds: i64,
    expires_at: Timestamp,
    created_by: String,
    actor_kind: String,
    decided_by: Option<String>,
    decision_approved: Option<i64>,
    decision_reason: Option<String>,
    decided_at: Option<Timestamp>,
    queued_at: Option<Timestamp>,
    delivered_at: Option<Timestamp>,
    ack_ok: Option<i64>,
    ack_code: Option<String>,
    ack_message: Option<String>,
    #[sqlx(try_from = "Option<String>")]
    ack_data: JsonText,
    acked_at: Option<Timestamp>,
    created_at: Timestamp,
    updated_at: Timestamp,
}

const COLUMNS: &str = "command_id, tenant_id, target_asset_id, target_component_id, type, params, risk_class, status, seq, \
    ttl_seconds, expires_at, created_by, actor_kind, decided_by, decision_approved, decision_reason, decided_at, queued_at, \
    delivered_at, ack_ok, ack_code, ack_message, ack_data, acked_at, created_at, updated_at";
const BY_ASSET: Listing = Listing {
    table: "command_command",
    columns: COLUMNS,
    filter: "target_asset_id = $1 AND tenant_id = $2 AND ($3 = '' OR status = $3)",
    order: "created_at DESC, command_id DESC",
};
const BY_TENANT: Listing = Listing {
    table: "command_command",
    columns: COLUMNS,
    filter: "tenant_id = $1 AND ($2 = '' OR status = $2) AND ($3 = '' OR target_asset_id = $3) AND ($4 = '' OR risk_class = $4)",
    order: "created_at DESC, command_id DESC",
};

impl Command {
    /// The status as callers see it: a command still waiting whose time to
    /// live has run out is expired, even before the sweeper has written it.
    pub fn status(&self) -> CommandState {
        if matches!(self.status, CommandState::AwaitingApproval | CommandState::Queued) && self.expires_at <= Timestamp::now() {
            CommandState::Expired
        } else {
            self.status
        }
    }
}

/// A command as callers see it: the decision and the ack as nested objects
/// (null until there is one) and the effective status.
#[derive(Serialize, ToSchema)]
pub struct CommandView {
    command_id: Id,
    tenant_id: String,
    target_asset_id: String,
    target_component_id: Option<String>,
    #[serde(rename = "type")]
    kind: String,
    params: JsonText,
    risk_class: RiskClass,
    status: CommandState,
    /// The position on the asset's stream, from when the command is queued.
    seq: Option<i64>,
    ttl_seconds: i64,
    expires_at: Timestamp,
    created_by: String,
    actor_kind: String,
    decision: Option<CommandDecision>,
    queued_at: Option<Timestamp>,
    delivered_at: Option<Timestamp>,
    ack: Option<CommandAck>,
    created_at: Timestamp,
    updated_at: Timestamp,
}

/// A person's decision on a high or critical command.
#[derive(Serialize, ToSchema)]
struct CommandDecision {
    approved: bool,
    reason: Option<String>,
    decided_by: Option<String>,
    decided_at: Option<Timestamp>,
}

/// The robot's acknowledgement.
#[derive(Serialize, ToSchema)]
struct CommandAck {
    ok: bool,
    code: Option<String>,
    message: Option<String>,
    /// What the robot reported, or null.
    data: JsonText,
    acked_at: Option<Timestamp>,
}

impl From<Command> for CommandView {
    fn from(c: Command) -> Self {
        let status = c.status();
        CommandView {
            decision: c.decision_approved.map(|a| CommandDecision {
                approved: a == 1,
                reason: c.decision_reason,
                decided_by: c.decided_by,
                decided_at: c.decided_at,
            }),
            ack: c.ack_ok.map(|a| CommandAck { ok: a == 1, code: c.ack_code, message: c.ack_message, data: c.ack_data, acked_at: c.acked_at }),
            command_id: c.command_id,
            tenant_id: c.tenant_id,
            target_asset_id: c.target_asset_id,
            target_component_id: c.target_component_id,
            kind: c.kind,
            params: c.params,
            risk_class: c.risk_class,
            status,
            seq: c.seq,
            ttl_seconds: c.ttl_seconds,
            expires_at: c.expires_at,
            created_by: c.created_by,
            actor_kind: c.actor_kind,
            queued_at: c.queued_at,
            delivered_at: c.delivered_at,
            created_at: c.created_at,
            updated_at: c.updated_at,
        }
    }
}

async fn fetch<'e, E>(exec: E, command_id: &str) -> ApiResult<Option<Command>>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!("SELECT {COLUMNS} FROM command_command WHERE command_id = $1")))
        .bind(command_id)
        .fetch_optional(exec)
        .await?)
}

/// The tenant's command with this path id (404 otherwise).
async fn find<'e, E>(exec: E, tenant_id: &str, command_id: &str) -> ApiResult<Command>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let id = path_id(command_id)?.to_string();
    fetch(exec, &id).await?.filter(|c| c.tenant_id == tenant_id).ok_or(ApiError::NotFound)
}

#[derive(Deserialize, ToSchema)]
struct NewCommand {
    #[serde(rename = "type")]
    kind: String,
    /// High and critical wait for a person's decision.
    #[schema(inline)]
    risk_class: RiskClass,
    /// An asset of the caller's tenant.
    #[schema(format = "uuid")]
    target_asset_id: String,
    /// One of the asset's components, when it declares any.
    target_component_id: Option<String>,
    /// `{}` when absent.
    params: Option<serde_json::Map<String, Value>>,
    /// Seconds; 3600 when absent.
    #[schema(minimum = 1, maximum = 604800)]
    ttl_seconds: Option<i64>,
}

/// Makes a command deliverable: takes the asset's next stream position and
/// tells the streams (on PostgreSQL through the database, at commit, so
/// every hub replica hears it). Answers the command as it now stands.
async fn enqueue(state: &AppState, tx: &mut Tx, command_id: &str, asset_id: &str, now: &str) -> ApiResult<Command> {
    let seq = asset::next_queue_seq(tx, asset_id).await?;
    // As in `create`, the update itself tells the streams.
    let notify = bus::notify_item(state, asset_id, 4);
    let sql = format!(
        "UPDATE command_command SET status = 'queued', seq = $1, queued_at = $2, updated_at = $2 WHERE command_id = $3 RETURNING {COLUMNS}{}",
        notify.as_ref().map_or(String::new(), |(item, _)| format!(", {item}"))
    );
    let mut update = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(seq).bind(now).bind(command_id);
    if let Some((_, [channel, payload])) = &notify {
        update = update.bind(channel).bind(payload);
    }
    Ok(update.fetch_one(&mut **tx).await?)
}

/// Issues a command to one of the tenant's assets.
///
/// Low and medium risk are queued at once; high and critical wait for a
/// person's decision.
#[utoipa::path(post, path = "/api/commands", tag = "sdk-command", request_body = NewCommand,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/assets", { "display_name": "race robot" }]],
        "body": { "type": "move", "risk_class": "low", "target_asset_id": "{asset_id}" } }))),
    responses((status = 201, description = "the command", body = Data<CommandView>)))]
async fn create(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewCommand>) -> ApiResult<Created<CommandView>> {
    let body = body.checked()?;
    let kind = body.kind.trim().to_string();
    let risk = body.risk_class;
    let asset_id = path_id(&body.target_asset_id)?.to_string();
    let component = Check::optional(&body.target_component_id);
    let params = Value::Object(body.params.unwrap_or_default());
    let ttl = body.ttl_seconds.unwrap_or(DEFAULT_TTL);
    let needs_approval = matches!(body.risk_class, RiskClass::High | RiskClass::Critical);
    let mut tx = state.db.begin().await?;
    // Low and medium risk go in queued, at the asset's next stream
    // position; high and critical only lock the asset, so its retirement
    // either comes first (409 here) or finds this command to cancel.
    let positioned = asset::take_position(&mut tx, &ctx.tenant_id, &asset_id, !needs_approval)
        .await
        // An asset of another tenant is as unknown as a missing one: 400 for a body field.
        .map_err(|e| match e {
            ApiError::NotFound => ApiError::invalid("target_asset_id does not name an asset of this tenant"),
            other => other,
        })?;
    let (target, seq) = (positioned.asset, (!needs_approval).then_some(positioned.queue_seq));
    if target.retired() {
        return Err(ApiError::Conflict("the asset is retired: it takes no new command".into()));
    }
    if let Some(c) = &component {
        let known = target.component_ids();
        if !known.is_empty() && !known.contains(c) {
            return Err(ApiError::invalid(format!("target_component_id must be one of the asset's components: {}", known.join(", "))));
        }
    }
    let command_id = db::new_id();
    let now_t = chrono::Utc::now();
    let now = db::format_time(now_t);
    let expires_at = db::format_time(db::add_seconds(now_t, ttl).ok_or_else(|| anyhow::anyhow!("command expiry out of range"))?);
    let (status, queued_at) = if needs_approval { (CommandState::AwaitingApproval, None) } else { (CommandState::Queued, Some(&now)) };
    // A queued command tells the streams from within its insert.
    let notify = if needs_approval { None } else { bus::notify_item(&state, &asset_id, 16) };
    let sql = format!(
        "INSERT INTO command_command (command_id, tenant_id, target_asset_id, target_component_id, type, params, risk_class, status, \
         ttl_seconds, expires_at, created_by, actor_kind, created_at, updated_at, seq, queued_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13, $14, $15) RETURNING {COLUMNS}{}",
        notify.as_ref().map_or(String::new(), |(item, _)| format!(", {item}"))
    );
    let mut insert = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&command_id)
        .bind(&ctx.tenant_id)
        .bind(&asset_id)
        .bind(&component)
        .bind(&kind)
        .bind(params.to_string())
        .bind(risk)
        .bind(status)
        .bind(ttl)
        .bind(&expires_at)
        .bind(&ctx.persona_id)
        .bind(ctx.actor_kind)
        .bind(&now)
        .bind(seq)
        .bind(queued_at);
    if let Some((_, [channel, payload])) = &notify {
        insert = insert.bind(channel).bind(payload);
    }
    let row: Command = insert.fetch_one(&mut *tx).await?;
    audit::record(
        &mut tx,
        &ctx,
        events::COMMAND_ISSUED,
        json!({
            "command_id": command_id, "target_asset_id": asset_id, "target_component_id": component, "type": kind,
            "risk_class": risk, "status": row.status, "expires_at": expires_at,
        }),
    )
    .await?;
    tx.commit().await?;
    if !needs_approval {
        state.streams.wake(&asset_id);
    }
    bus::command_changed(&state, &ctx.tenant_id).await;
    entered(status, 1);
    Ok(created(row.into()))
}

/// A command of the caller's tenant.
#[utoipa::path(get, path = "/api/commands/{command_id}", tag = "sdk-command", params(("command_id" = String, Path, description = "the command")),
    responses((status = 200, description = "the command", body = Data<CommandView>)))]
async fn get_command(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<CommandView>> {
    Ok(ok(find(&state.db.read, &ctx.tenant_id, &id).await?.into()))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct CommandFilter {
    /// Only commands in this (stored) state: `awaiting_approval` is the
    /// approvers' queue.
    #[param(inline)]
    status: Option<CommandState>,
    /// Only commands to this asset.
    #[param(format = "uuid")]
    asset_id: Option<String>,
    /// Only commands of this risk class.
    #[param(inline)]
    risk_class: Option<RiskClass>,
}

/// The caller's tenant's commands to all its assets, newest first.
#[utoipa::path(get, path = "/api/commands", tag = "sdk-command", params(CommandFilter, Page),
    responses((status = 200, description = "a page of commands", body = ListOf<CommandView>)))]
async fn list_commands(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<CommandFilter>, page: Page) -> ApiResult<ListOf<CommandView>> {
    let status = q.status.map_or("", CommandState::as_str);
    let asset_id = q.asset_id.as_deref().map(canonical_uuid).unwrap_or_default();
    let risk = q.risk_class.map_or("", RiskClass::as_str);
    let rows = page.list::<Command>(&state.db.read, &BY_TENANT, &[&ctx.tenant_id, status, &asset_id, risk]).await?;
    Ok(list(rows.data.into_iter().map(CommandView::from).collect(), rows.total))
}

/// Cancels a command still waiting for approval or delivery
/// (`awaiting_approval` or `queued`): it is never delivered, and an ack of
/// it is refused. One guarded statement decides against a decision, a
/// delivery or an ack at the same moment: whichever writes first wins.
/// Cancelling it again answers the same command without a second event;
/// a delivered, acknowledged, rejected or expired command is 409.
#[utoipa::path(post, path = "/api/commands/{command_id}/cancel", tag = "sdk-command", params(("command_id" = String, Path, description = "the command")),
    extensions(("x-concurrency" = json!({ "outcome": "same-answer", "given": [
        ["POST", "/api/assets", { "display_name": "race robot" }],
        ["POST", "/api/commands", { "type": "move", "risk_class": "low", "target_asset_id": "{asset_id}" }]] }))),
    responses((status = 200, description = "the command, cancelled", body = Data<CommandView>)))]
async fn cancel(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<CommandView>> {
    let command_id = path_id(&id)?.to_string();
    let now = db::now();
    let mut tx = state.db.begin().await?;
    let sql = format!(
        "UPDATE command_command SET status = 'cancelled', updated_at = $3 \
         WHERE tenant_id = $1 AND command_id = $2 AND status IN ('awaiting_approval', 'queued') AND expires_at > $3 RETURNING {COLUMNS}"
    );
    let cancelled: Option<Command> =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&command_id).bind(&now).fetch_optional(&mut *tx).await?;
    let Some(row) = cancelled else {
        let command = find(&mut *tx, &ctx.tenant_id, &command_id).await?;
        return match command.status {
            CommandState::Cancelled => Ok(ok(command.into())),
            CommandState::AwaitingApproval | CommandState::Queued => {
                // Its time to live ran out: written down as expired here,
                // before the sweeper does.
                let expired = sqlx::query(
                    "UPDATE command_command SET status = 'expired', updated_at = $3 \
                     WHERE tenant_id = $1 AND command_id = $2 AND status IN ('awaiting_approval', 'queued') AND expires_at <= $3",
                )
                .bind(&ctx.tenant_id)
                .bind(&command_id)
                .bind(&now)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                if expired.rows_affected() > 0 {
                    bus::command_changed(&state, &ctx.tenant_id).await;
                }
                entered(CommandState::Expired, expired.rows_affected());
                Err(ApiError::Conflict("the command is expired: only a command awaiting approval or delivery can be cancelled".into()))
            }
            other => Err(ApiError::Conflict(format!("the command is {other}: only a command awaiting approval or delivery can be cancelled"))),
        };
    };
    let payload = json!({ "command_id": command_id, "target_asset_id": row.target_asset_id, "from": command_from(&row), "reason": "cancelled" });
    audit::record(&mut tx, &ctx, events::COMMAND_CANCELLED, payload).await?;
    tx.commit().await?;
    bus::command_changed(&state, &ctx.tenant_id).await;
    entered(CommandState::Cancelled, 1);
    Ok(ok(row.into()))
}

/// The state a command was cancelled from: a queued one has its stream
/// position.
fn command_from(c: &Command) -> CommandState {
    if c.queued_at.is_some() { CommandState::Queued } else { CommandState::AwaitingApproval }
}

/// Cancels the asset's commands still waiting for approval or delivery, as
/// part of its retirement (the caller holds the asset's row), each with
/// its event. Answers their ids.
pub async fn cancel_for_retired_asset(tx: &mut Tx, ctx: &TenantCtx, asset_id: &str, now: &str) -> ApiResult<Vec<String>> {
    let sql = format!(
        "UPDATE command_command SET status = 'cancelled', updated_at = $2 \
         WHERE target_asset_id = $1 AND status IN ('awaiting_approval', 'queued') RETURNING {COLUMNS}"
    );
    let rows: Vec<Command> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(asset_id).bind(now).fetch_all(&mut **tx).await?;
    for row in &rows {
        let payload = json!({ "command_id": row.command_id, "target_asset_id": asset_id, "from": command_from(row), "reason": "asset_retired" });
        audit::record(tx, ctx, events::COMMAND_CANCELLED, payload).await?;
    }
    entered(CommandState::Cancelled, rows.len() as u64);
    Ok(rows.into_iter().map(|r| r.command_id.to_string()).collect())
}

#[derive(Deserialize, ToSchema)]
struct NewCommandDecision {
    approved: bool,
    reason: Option<String>,
}

/// Approves or rejects a high or critical command.
///
/// Only a person decides (an API key is refused), and only one whose
/// persona holds a grant covering `command.command.approve` (the owner
/// role's `*` does).
#[utoipa::path(post, path = "/api/commands/{command_id}/decision", tag = "sdk-command", params(("command_id" = String, Path, description = "the command")),
    request_body = NewCommandDecision,
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [
        ["POST", "/api/assets", { "display_name": "race robot" }],
        ["POST", "/api/commands", { "type": "unlock", "risk_class": "high", "target_asset_id": "{asset_id}" }]],
        "body": { "approved": true } }))), responses((status = 200, description = "the command, queued or rejected", body = Data<CommandView>)))]
async fn decide(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<NewCommandDecision>) -> ApiResult<Data<CommandView>> {
    let mut tx = state.db.begin().await?;
    // Not found comes first, so another tenant's id is never confirmed.
    let command = find(&mut *tx, &ctx.tenant_id, &id).await?;
    let body = body.checked()?;
    let approved = body.approved;
    let reason = Check::optional(&body.reason);
    if ctx.actor_kind != "human" {
        return Err(ApiError::forbidden("a person decides on commands: this route requires a human JWT; API keys are rejected"));
    }
    keys::require_grant(&state, &ctx, APPROVE_PERMISSION).await?;
    let Command { command_id, target_asset_id: asset_id, risk_class: risk, .. } = command;
    let command_id = command_id.to_string();
    // The risk class never changes: a low or medium command never waits.
    if matches!(risk, RiskClass::Low | RiskClass::Medium) {
        return Err(ApiError::Conflict(format!("a {risk}-risk command needs no decision")));
    }
    let now = db::now();
    // The decision is one guarded statement: of two decisions at once, one
    // moves the command out of `awaiting_approval` and the other finds it
    // decided. An approval keeps the state until `enqueue` queues it below.
    let sql = format!(
        "UPDATE command_command SET status = $3, decided_by = $4, decision_approved = $5, decision_reason = $6, decided_at = $7, updated_at = $7 \
         WHERE tenant_id = $1 AND command_id = $2 AND status = 'awaiting_approval' AND expires_at > $7 RETURNING {COLUMNS}"
    );
    let decided: Option<Command> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&ctx.tenant_id)
        .bind(&command_id)
        .bind(if approved { CommandState::AwaitingApproval } else { CommandState::Rejected })
        .bind(&ctx.persona_id)
        .bind(approved as i64)
        .bind(&reason)
        .bind(&now)
        .fetch_optional(&mut *tx)
        .await?;
    if decided.is_none() {
        // A waiting command whose time to live ran out is written down as
        // expired here, before the sweeper does.
        let expired = sqlx::query(
            "UPDATE command_command SET status = 'expired', updated_at = $3 WHERE tenant_id = $1 AND command_id = $2 AND status = 'awaiting_approval' AND expires_at <= $3",
        )
        .bind(&ctx.tenant_id)
        .bind(&command_id)
        .bind(&now)
        .execute(&mut *tx)
        .await?;
        if expired.rows_affected() > 0 {
            tx.commit().await?;
            bus::command_changed(&state, &ctx.tenant_id).await;
            entered(CommandState::Expired, 1);
            return Err(ApiError::Conflict("the command expired before a decision".into()));
        }
    }
    let mut row = COMMAND.settle(&mut tx, &ctx.tenant_id, &command_id, decided, "only a command awaiting approval can be decided").await?;
    if approved {
        row = enqueue(&state, &mut tx, &command_id, &asset_id, &now).await?;
    }
    let event = if approved { events::COMMAND_APPROVED } else { events::COMMAND_REJECTED };
    audit::record(&mut tx, &ctx, event, json!({ "command_id": command_id, "target_asset_id": asset_id, "reason": reason })).await?;
    tx.commit().await?;
    if approved {
        state.streams.wake(&asset_id);
    }
    bus::command_changed(&state, &ctx.tenant_id).await;
    entered(if approved { CommandState::Queued } else { CommandState::Rejected }, 1);
    Ok(ok(row.into()))
}

/// A validated acknowledgement.
pub struct AckBody {
    pub ok: bool,
    pub code: Option<String>,
    pub message: Option<String>,
    pub data: Option<Value>,
}

/// The command as guarded writes name it.
const COMMAND: Stateful = Stateful { noun: "command", table: "command_command", key: "command_id", state: "status" };

/// Records a robot's ack. The command must target the credential's asset
/// (otherwise 404, as if unknown). The first ack wins: the same ack again
/// changes nothing and answers the same; a different one is 409.
pub async fn apply_ack(state: &AppState, cred: &RobotCredential, command_id: &str, ack: AckBody) -> ApiResult<Command> {
    let id = path_id(command_id)?.to_string();
    // An ack also comes in a QUIC frame, which no JSON extractor sees; its
    // `data` is stored as JSON text, where a NUL is an escape.
    let mut check = Check::new();
    for (name, text) in [("code", &ack.code), ("message", &ack.message)] {
        if text.as_deref().is_some_and(|t| t.contains('\0')) {
            check.fail(hub_kernel::nul::refusal(name));
        }
    }
    check.finish()?;
    let mut tx = state.db.begin().await?;
    // The first ack is one guarded statement: of two acks at once, one
    // moves the command out of `queued`/`delivered` and the other reads the
    // ack it stored, below.
    let sql = format!(
        "UPDATE command_command SET status = $1, ack_ok = $2, ack_code = $3, ack_message = $4, ack_data = $5, acked_at = $6, \
         delivered_at = COALESCE(delivered_at, $6), updated_at = $6 \
         WHERE command_id = $7 AND target_asset_id = $8 AND status IN ('queued', 'delivered') RETURNING {COLUMNS}"
    );
    let acked: Option<Command> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(if ack.ok { CommandState::AcknowledgedOk } else { CommandState::AcknowledgedFailed })
        .bind(ack.ok as i64)
        .bind(&ack.code)
        .bind(&ack.message)
        .bind(ack.data.as_ref().map(Value::to_string))
        .bind(db::now())
        .bind(&id)
        .bind(&cred.asset_id)
        .fetch_optional(&mut *tx)
        .await?;
    let Some(row) = acked else {
        // Not acknowledgeable: the command as committed says why.
        let command = fetch(&mut *tx, &id).await?.filter(|c| c.target_asset_id == cred.asset_id).ok_or(ApiError::NotFound)?;
        return match command.status {
            CommandState::AcknowledgedOk | CommandState::AcknowledgedFailed => {
                let same = command.ack_ok == Some(ack.ok as i64)
                    && command.ack_code == ack.code
                    && command.ack_message == ack.message
                    && command.ack_data.0 == ack.data.unwrap_or(Value::Null);
                if same { Ok(command) } else { Err(ApiError::Conflict("the command was already acknowledged with a different outcome".into())) }
            }
            other => Err(ApiError::Conflict(format!("the command is {other} and cannot be acknowledged"))),
        };
    };
    // The robot acts through its credential.
    audit::record_event(
        &mut tx,
        audit::Event {
            tenant_id: &cred.tenant_id,
            pool_index: None,
            event_type: events::COMMAND_ACKNOWLEDGED,
            actor_kind: "robot",
            actor_id: &cred.credential_id,
            actor_chain: None,
            payload: &json!({ "command_id": id, "asset_id": cred.asset_id, "ok": ack.ok, "code": ack.code }),
            retention_class: None,
            occurred_at: None,
        },
    )
    .await?;
    tx.commit().await?;
    bus::command_changed(state, &cred.tenant_id).await;
    entered(if ack.ok { CommandState::AcknowledgedOk } else { CommandState::AcknowledgedFailed }, 1);
    Ok(row)
}

/// A robot acknowledges a command of its asset (per-robot credential).
///
/// The first ack wins: the same ack again answers the same; a different
/// one is 409.
#[utoipa::path(post, path = "/api/commands/{command_id}/ack", tag = "sdk-command", params(("command_id" = String, Path, description = "the command")),
    request_body = NewCommandAck,
    extensions(("x-concurrency" = json!({ "outcome": "exempt", "reason": "a robot acknowledges with its per-robot credential (rc_...), which this harness never sends: it sends the owner's JWT" }))),
    responses((status = 200, description = "the command, acknowledged", body = Data<CommandView>)))]
async fn ack(State(state): State<AppState>, Robot(cred): Robot, Path(id): Path<String>, body: Body<NewCommandAck>) -> ApiResult<Data<CommandView>> {
    // A command of another asset is not there, whatever the body.
    let command_id = path_id(&id)?.to_string();
    fetch(state.db.writer(), &command_id).await?.filter(|c| c.target_asset_id == cred.asset_id).ok_or(ApiError::NotFound)?;
    let NewCommandAck { ok: done, code, message, data } = body.checked()?;
    Ok(ok(apply_ack(&state, &cred, &id, AckBody { ok: done, code, message, data }).await?.into()))
}

/// A page of the asset's commands, newest first, optionally of one status,
/// as the list envelope.
pub async fn list_for_asset(state: &AppState, tenant_id: &str, asset_id: &str, status: Option<CommandState>, page: Page) -> ApiResult<ListOf<CommandView>> {
    let rows = page.list::<Command>(&state.db.read, &BY_ASSET, &[asset_id, tenant_id, status.map_or("", CommandState::as_str)]).await?;
    Ok(list(rows.data.into_iter().map(CommandView::from).collect(), rows.total))
}

/// What a stream sends of a deliverable command.
#[derive(FromRow)]
struct Deliverable {
    command_id: String,
    seq: i64,
    #[sqlx(rename = "type")]
    kind: String,
    #[sqlx(try_from = "String")]
    params: JsonText,
    risk_class: String,
    target_component_id: Option<String>,
    expires_at: String,
}

impl From<Deliverable> for protocol::command::Command {
    fn from(d: Deliverable) -> Self {
        protocol::command::Command {
            command_id: d.command_id,
            seq: d.seq,
            kind: d.kind,
            params: d.params.0,
            risk_class: d.risk_class,
            target_component_id: d.target_component_id,
            expires_at: d.expires_at,
        }
    }
}

/// The asset's deliverable commands after stream position `after`, in
/// stream order: queued or delivered (not yet acknowledged) and not expired.
pub async fn pending(state: &AppState, asset_id: &str, after: i64, limit: i64) -> ApiResult<Vec<protocol::command::Command>> {
    let rows: Vec<Deliverable> = sqlx::query_as(
        "SELECT command_id, seq, type, params, risk_class, target_component_id, expires_at FROM command_command \
         WHERE target_asset_id = $1 AND seq > $2 AND status IN ('queued', 'delivered') AND expires_at > $3 ORDER BY seq LIMIT $4",
    )
    .bind(asset_id)
    .bind(after)
    .bind(db::now())
    .bind(limit)
    .fetch_all(&state.db.read)
    .await?;
    Ok(rows.into_iter().map(protocol::command::Command::from).collect())
}

/// Marks the asset's queued commands up to `seq` as delivered.
pub async fn mark_delivered(state: &AppState, asset_id: &str, upto: i64) -> ApiResult<()> {
    let now = db::now();
    let tenants: Vec<String> = sqlx::query_scalar(
        "UPDATE command_command SET status = 'delivered', delivered_at = $1, updated_at = $1 \
         WHERE target_asset_id = $2 AND status = 'queued' AND seq <= $3 RETURNING tenant_id",
    )
    .bind(&now)
    .bind(asset_id)
    .bind(upto)
    .fetch_all(state.db.writer())
    .await?;
    entered(CommandState::Delivered, tenants.len() as u64);
    changed(state, tenants).await;
    Ok(())
}

/// Writes `expired` on every waiting command whose time to live has run out.
pub async fn sweep_expired(state: &AppState) -> Result<u64, sqlx::Error> {
    let now = db::now();
    let tenants: Vec<String> = sqlx::query_scalar(
        "UPDATE command_command SET status = 'expired', updated_at = $1 WHERE status IN ('awaiting_approval', 'queued') AND expires_at <= $1 RETURNING tenant_id",
    )
    .bind(&now)
    .fetch_all(state.db.writer())
    .await?;
    let n = tenants.len() as u64;
    entered(CommandState::Expired, n);
    changed(state, tenants).await;
    Ok(n)
}

/// Tells the observers of each tenant (once each) that commands of it
/// changed state.
async fn changed(state: &AppState, mut tenants: Vec<String>) {
    tenants.sort_unstable();
    tenants.dedup();
    for tenant_id in &tenants {
        bus::command_changed(state, tenant_id).await;
    }
}

/// The states a command still leaves: what an observer is sent first.
const OPEN_STATES: &str = "('awaiting_approval', 'queued', 'delivered')";

impl Command {
    /// The command's id and when it last changed: what an observer has sent.
    pub(crate) fn change(&self) -> (Id, Timestamp) {
        (self.command_id, self.updated_at)
    }
}

/// Whether the tenant has this asset (an observer's filter names one).
pub(crate) async fn tenant_has_asset(state: &AppState, tenant_id: &str, asset_id: &str) -> ApiResult<bool> {
    let found: Option<String> = sqlx::query_scalar("SELECT asset_id FROM asset_asset WHERE asset_id = $1 AND tenant_id = $2")
        .bind(asset_id)
        .bind(tenant_id)
        .fetch_optional(&state.db.read)
        .await?;
    Ok(found.is_some())
}

/// A page of the tenant's commands not yet in a final state (of one asset
/// unless `asset_id` is blank), oldest first, after the command `after`
/// (its `created_at` and id).
pub(crate) async fn open_for_tenant(state: &AppState, tenant_id: &str, asset_id: &str, after: Option<&Command>, limit: i64) -> ApiResult<Vec<Command>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM command_command WHERE tenant_id = $1 AND ($2 = '' OR target_asset_id = $2) AND status IN {OPEN_STATES} \
         AND (created_at > $3 OR (created_at = $3 AND command_id > $4)) ORDER BY created_at, command_id LIMIT $5"
    );
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(tenant_id)
        .bind(asset_id)
        .bind(after.map_or(String::new(), |c| c.created_at.to_string()))
        .bind(after.map_or(String::new(), |c| c.command_id.to_string()))
        .bind(limit)
        .fetch_all(&state.db.read)
        .await?)
}

/// A page of the tenant's commands (of one asset unless `asset_id` is
/// blank) changed at `since` or later, in the order of their last change,
/// after the command `after` (its `updated_at` and id).
pub(crate) async fn changed_for_tenant(
    state: &AppState,
    tenant_id: &str,
    asset_id: &str,
    since: &str,
    after: Option<&Command>,
    limit: i64,
) -> ApiResult<Vec<Command>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM command_command WHERE tenant_id = $1 AND ($2 = '' OR target_asset_id = $2) AND updated_at >= $3 \
         AND (updated_at > $4 OR (updated_at = $4 AND command_id > $5)) ORDER BY updated_at, command_id LIMIT $6"
    );
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(tenant_id)
        .bind(asset_id)
        .bind(since)
        .bind(after.map_or(String::new(), |c| c.updated_at.to_string()))
        .bind(after.map_or(String::new(), |c| c.command_id.to_string()))
        .bind(limit)
        .fetch_all(&state.db.read)
        .await?)
}

/// Counts `n` commands entering `state` (`hub_command_transitions_total`).
fn entered(state: CommandState, n: u64) {
    if n > 0 {
        metrics::counter!("hub_command_transitions_total", "state" => state.as_str()).increment(n);
    }
}

/// Parses an ack sent as a frame into the validated form.
pub fn ack_from_frame(a: &protocol::command::Ack) -> AckBody {
    AckBody { ok: a.ok, code: a.code.clone(), message: a.message.clone(), data: a.data.clone() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::enum_values;

    #[test]
    fn the_documented_states_are_the_stored_ones() {
        assert_eq!(enum_values::<CommandState>(), STATES);
        assert_eq!(CommandState::ALL.iter().map(|s| s.as_str()).collect::<Vec<_>>(), STATES);
    }
}
