//! sdk-command: robot commands with risk classes, human approval of the
//! risky ones, delivery to the asset's stream and idempotent acks.
//!
//! States: `awaiting_approval` (high/critical until decided), `queued`
//! (ready for the robot; low/medium start here), `delivered` (sent on a
//! stream, not yet acknowledged), `acknowledged_ok`, `acknowledged_failed`,
//! `rejected` (a decision said no; never delivered) and `expired` (its time
//! to live ran out before delivery; never delivered).
//!
//! A command gets its stream position `seq` when it becomes `queued`, so the
//! stream order is the order in which commands became deliverable, and an
//! SSE `Last-Event-ID` never skips a command approved late.

use axum::{
    Router,
    extract::{Path, State},
    response::Response,
    routing::{get, post},
};
use serde::Deserialize;
use serde_json::{Value, json};
use sqlx::Row;

use crate::{asset, sse};
use hub_kernel::{
    audit::{self, events},
    bus,
    db::{self, Tx},
    error::{ApiError, ApiResult, Body, created, ok},
    gate::{
        Tenant, TenantCtx, keys,
        robots::{Robot, RobotCredential},
    },
    state::AppState,
    validate::{Check, path_id},
};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/commands", post(create))
        .route("/api/commands/{command_id}", get(get_command))
        .route("/api/commands/{command_id}/decision", post(decide))
        .route("/api/commands/{command_id}/ack", post(ack))
        .route("/api/commands/stream/{asset_id}", get(sse::stream))
}

pub const STATES: &[&str] = &["awaiting_approval", "queued", "delivered", "acknowledged_ok", "acknowledged_failed", "rejected", "expired"];
const RISKS: &[&str] = &["low", "medium", "high", "critical"];

/// The grant a person's persona needs to decide on a high or critical command.
pub const APPROVE_PERMISSION: &str = "command.command.approve";

/// Default and bounds of a command's time to live.
const DEFAULT_TTL: i64 = 3600;
const MAX_TTL: i64 = 7 * 24 * 3600;

const SELECT: &str = "SELECT command_id, tenant_id, target_asset_id, target_component_id, type, params, risk_class, status, seq, \
    ttl_seconds, expires_at, created_by, actor_kind, decided_by, decision_approved, decision_reason, decided_at, queued_at, \
    delivered_at, ack_ok, ack_code, ack_message, ack_data, acked_at, created_at, updated_at FROM command_command";

fn parse_json(text: Option<String>) -> Value {
    text.and_then(|t| serde_json::from_str(&t).ok()).unwrap_or(Value::Null)
}

/// The status as callers see it: a command still waiting whose time to live
/// has run out is expired, even before the sweeper has written it.
fn effective_status(status: &str, expires_at: &str, now: &str) -> String {
    if matches!(status, "awaiting_approval" | "queued") && expires_at <= now { "expired".into() } else { status.into() }
}

fn command_json(r: &sqlx::any::AnyRow) -> ApiResult<Value> {
    let status: String = r.try_get("status")?;
    let expires_at: String = r.try_get("expires_at")?;
    let decision = match r.try_get::<Option<i64>, _>("decision_approved")? {
        None => Value::Null,
        Some(a) => json!({
            "approved": a == 1,
            "reason": r.try_get::<Option<String>, _>("decision_reason")?,
            "decided_by": r.try_get::<Option<String>, _>("decided_by")?,
            "decided_at": r.try_get::<Option<String>, _>("decided_at")?,
        }),
    };
    let ack = match r.try_get::<Option<i64>, _>("ack_ok")? {
        None => Value::Null,
        Some(a) => json!({
            "ok": a == 1,
            "code": r.try_get::<Option<String>, _>("ack_code")?,
            "message": r.try_get::<Option<String>, _>("ack_message")?,
            "data": parse_json(r.try_get("ack_data")?),
            "acked_at": r.try_get::<Option<String>, _>("acked_at")?,
        }),
    };
    Ok(json!({
        "command_id": r.try_get::<String, _>("command_id")?,
        "tenant_id": r.try_get::<String, _>("tenant_id")?,
        "target_asset_id": r.try_get::<String, _>("target_asset_id")?,
        "target_component_id": r.try_get::<Option<String>, _>("target_component_id")?,
        "type": r.try_get::<String, _>("type")?,
        "params": parse_json(r.try_get("params")?),
        "risk_class": r.try_get::<String, _>("risk_class")?,
        "status": effective_status(&status, &expires_at, &db::now()),
        "seq": r.try_get::<Option<i64>, _>("seq")?,
        "ttl_seconds": r.try_get::<i64, _>("ttl_seconds")?,
        "expires_at": expires_at,
        "created_by": r.try_get::<String, _>("created_by")?,
        "actor_kind": r.try_get::<String, _>("actor_kind")?,
        "decision": decision,
        "queued_at": r.try_get::<Option<String>, _>("queued_at")?,
        "delivered_at": r.try_get::<Option<String>, _>("delivered_at")?,
        "ack": ack,
        "created_at": r.try_get::<String, _>("created_at")?,
        "updated_at": r.try_get::<String, _>("updated_at")?,
    }))
}

async fn fetch<'e, E>(exec: E, command_id: &str) -> ApiResult<Option<sqlx::any::AnyRow>>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    Ok(sqlx::query(sqlx::AssertSqlSafe(format!("{SELECT} WHERE command_id = $1"))).bind(command_id).fetch_optional(exec).await?)
}

/// The tenant's command with this path id (404 otherwise).
async fn find<'e, E>(exec: E, tenant_id: &str, command_id: &str) -> ApiResult<sqlx::any::AnyRow>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let id = path_id(command_id)?.to_string();
    let row = fetch(exec, &id).await?.ok_or(ApiError::NotFound)?;
    if row.try_get::<String, _>("tenant_id")? != tenant_id {
        return Err(ApiError::NotFound);
    }
    Ok(row)
}

#[derive(Deserialize)]
struct NewCommand {
    tenant_id: Option<String>,
    target_asset_id: Option<String>,
    target_component_id: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    params: Option<Value>,
    risk_class: Option<String>,
    ttl_seconds: Option<Value>,
}

/// Makes a command deliverable: takes the asset's next stream position and
/// tells the streams (on PostgreSQL through the database, at commit, so
/// every hub replica hears it).
async fn enqueue(state: &AppState, tx: &mut Tx, command_id: &str, asset_id: &str, now: &str) -> ApiResult<i64> {
    let seq = asset::next_queue_seq(tx, asset_id).await?;
    sqlx::query("UPDATE command_command SET status = 'queued', seq = $1, queued_at = $2, updated_at = $2 WHERE command_id = $3")
        .bind(seq)
        .bind(now)
        .bind(command_id)
        .execute(&mut **tx)
        .await?;
    bus::notify(state.db.backend, tx, asset_id).await?;
    Ok(seq)
}

async fn create(State(state): State<AppState>, Tenant(ctx): Tenant, Body(body): Body<NewCommand>) -> ApiResult<Response> {
    let mut check = Check::new();
    let kind = check.required("type", &body.kind);
    let risk = check.required("risk_class", &body.risk_class);
    check.one_of("risk_class", &risk, RISKS);
    let asset_id = check.required_uuid("target_asset_id", &body.target_asset_id);
    let component = Check::optional(&body.target_component_id);
    let params = match &body.params {
        None | Some(Value::Null) => json!({}),
        Some(v @ Value::Object(_)) => v.clone(),
        Some(_) => {
            check.fail("params must be an object");
            json!({})
        }
    };
    let ttl = check.optional_seconds("ttl_seconds", body.ttl_seconds.as_ref(), MAX_TTL).unwrap_or(DEFAULT_TTL);
    check.finish()?;
    ctx.check_tenant(body.tenant_id.as_deref())?;
    let asset_id = asset_id.expect("checked").to_string();
    let mut tx = state.db.begin().await?;
    // An asset of another tenant is as unknown as a missing one: 400 for a body field.
    let asset_row = asset::find(&mut *tx, &ctx.tenant_id, &asset_id).await.map_err(|e| match e {
        ApiError::NotFound => ApiError::invalid("target_asset_id does not name an asset of this tenant"),
        other => other,
    })?;
    if let Some(c) = &component {
        let components: String = asset_row.try_get("components")?;
        let known = asset::component_ids(&serde_json::from_str(&components).unwrap_or(Value::Null));
        if !known.is_empty() && !known.contains(c) {
            return Err(ApiError::invalid(format!("target_component_id must be one of the asset's components: {}", known.join(", "))));
        }
    }
    let command_id = db::new_id();
    let now_t = chrono::Utc::now();
    let now = db::format_time(now_t);
    let expires_at = db::format_time(db::add_seconds(now_t, ttl).ok_or_else(|| anyhow::anyhow!("command expiry out of range"))?);
    let needs_approval = matches!(risk.as_str(), "high" | "critical");
    sqlx::query(
        "INSERT INTO command_command (command_id, tenant_id, target_asset_id, target_component_id, type, params, risk_class, status, \
         ttl_seconds, expires_at, created_by, actor_kind, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, 'awaiting_approval', $8, $9, $10, $11, $12, $12)",
    )
    .bind(&command_id)
    .bind(&ctx.tenant_id)
    .bind(&asset_id)
    .bind(&component)
    .bind(&kind)
    .bind(params.to_string())
    .bind(&risk)
    .bind(ttl)
    .bind(&expires_at)
    .bind(&ctx.persona_id)
    .bind(ctx.actor_kind)
    .bind(&now)
    .execute(&mut *tx)
    .await?;
    if !needs_approval {
        enqueue(&state, &mut tx, &command_id, &asset_id, &now).await?;
    }
    let row = fetch(&mut *tx, &command_id).await?.ok_or(ApiError::NotFound)?;
    audit::record(
        &mut tx,
        &ctx,
        events::COMMAND_ISSUED,
        json!({
            "command_id": command_id, "target_asset_id": asset_id, "target_component_id": component, "type": kind,
            "risk_class": risk, "status": row.try_get::<String, _>("status")?, "expires_at": expires_at,
        }),
    )
    .await?;
    tx.commit().await?;
    if !needs_approval {
        state.streams.wake(&asset_id);
    }
    Ok(created(command_json(&row)?))
}

async fn get_command(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Response> {
    Ok(ok(command_json(&find(&state.db.read, &ctx.tenant_id, &id).await?)?))
}

#[derive(Deserialize)]
struct Decision {
    approved: Option<Value>,
    reason: Option<String>,
}

/// Approves or rejects a high or critical command. Only a person decides
/// (an API key is refused), and only one whose persona holds a grant
/// covering `command.command.approve` (the owner role's `*` does).
async fn decide(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, Body(body): Body<Decision>) -> ApiResult<Response> {
    let approved = match body.approved {
        Some(Value::Bool(b)) => b,
        None | Some(Value::Null) => return Err(ApiError::invalid("approved is required")),
        Some(_) => return Err(ApiError::invalid("approved must be a boolean")),
    };
    let reason = Check::optional(&body.reason);
    let mut tx = state.db.begin().await?;
    // Not found comes first, so another tenant's id is never confirmed.
    let row = find(&mut *tx, &ctx.tenant_id, &id).await?;
    if ctx.actor_kind != "human" {
        return Err(ApiError::forbidden("a person decides on commands: this route requires a human JWT; API keys are rejected"));
    }
    keys::require_grant(&state, &ctx, APPROVE_PERMISSION).await?;
    let command_id: String = row.try_get("command_id")?;
    let asset_id: String = row.try_get("target_asset_id")?;
    let status: String = row.try_get("status")?;
    let now = db::now();
    let expires_at: String = row.try_get("expires_at")?;
    if status == "awaiting_approval" && expires_at <= now {
        sqlx::query("UPDATE command_command SET status = 'expired', updated_at = $1 WHERE command_id = $2")
            .bind(&now)
            .bind(&command_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        return Err(ApiError::Conflict("the command expired before a decision".into()));
    }
    if status != "awaiting_approval" {
        let risk: String = row.try_get("risk_class")?;
        return Err(ApiError::Conflict(if matches!(risk.as_str(), "low" | "medium") {
            format!("a {risk}-risk command needs no decision")
        } else {
            format!("the command is already {status}")
        }));
    }
    sqlx::query(
        "UPDATE command_command SET status = $1, decided_by = $2, decision_approved = $3, decision_reason = $4, decided_at = $5, updated_at = $5 \
         WHERE command_id = $6",
    )
    .bind(if approved { "awaiting_approval" } else { "rejected" })
    .bind(&ctx.persona_id)
    .bind(approved as i64)
    .bind(&reason)
    .bind(&now)
    .bind(&command_id)
    .execute(&mut *tx)
    .await?;
    if approved {
        enqueue(&state, &mut tx, &command_id, &asset_id, &now).await?;
    }
    let row = fetch(&mut *tx, &command_id).await?.ok_or(ApiError::NotFound)?;
    let event = if approved { events::COMMAND_APPROVED } else { events::COMMAND_REJECTED };
    audit::record(&mut tx, &ctx, event, json!({ "command_id": command_id, "target_asset_id": asset_id, "reason": reason })).await?;
    tx.commit().await?;
    if approved {
        state.streams.wake(&asset_id);
    }
    Ok(ok(command_json(&row)?))
}

/// A validated acknowledgement.
pub struct AckBody {
    pub ok: bool,
    pub code: Option<String>,
    pub message: Option<String>,
    pub data: Option<Value>,
}

fn parse_ack(body: &Value) -> ApiResult<AckBody> {
    let mut check = Check::new();
    let ok = match body.get("ok") {
        Some(Value::Bool(b)) => *b,
        None | Some(Value::Null) => {
            check.fail("ok is required");
            false
        }
        Some(_) => {
            check.fail("ok must be a boolean");
            false
        }
    };
    let text = |name: &str, check: &mut Check| match body.get(name) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            check.fail(format!("{name} must be a string"));
            None
        }
    };
    let code = text("code", &mut check);
    let message = text("message", &mut check);
    let data = body.get("data").filter(|v| !v.is_null()).cloned();
    check.finish()?;
    Ok(AckBody { ok, code, message, data })
}

/// Records a robot's ack. The command must target the credential's asset
/// (otherwise 404, as if unknown). The first ack wins: the same ack again
/// changes nothing and answers the same; a different one is 409.
pub async fn apply_ack(state: &AppState, cred: &RobotCredential, command_id: &str, ack: AckBody) -> ApiResult<Value> {
    let id = path_id(command_id)?.to_string();
    let mut tx = state.db.begin().await?;
    let row = fetch(&mut *tx, &id).await?.ok_or(ApiError::NotFound)?;
    if row.try_get::<String, _>("target_asset_id")? != cred.asset_id {
        return Err(ApiError::NotFound);
    }
    let status: String = row.try_get("status")?;
    let data_text = ack.data.as_ref().map(Value::to_string);
    match status.as_str() {
        "queued" | "delivered" => {
            let now = db::now();
            sqlx::query(
                "UPDATE command_command SET status = $1, ack_ok = $2, ack_code = $3, ack_message = $4, ack_data = $5, acked_at = $6, \
                 delivered_at = COALESCE(delivered_at, $6), updated_at = $6 WHERE command_id = $7",
            )
            .bind(if ack.ok { "acknowledged_ok" } else { "acknowledged_failed" })
            .bind(ack.ok as i64)
            .bind(&ack.code)
            .bind(&ack.message)
            .bind(&data_text)
            .bind(&now)
            .bind(&id)
            .execute(&mut *tx)
            .await?;
            let row = fetch(&mut *tx, &id).await?.ok_or(ApiError::NotFound)?;
            // The robot acts through its credential.
            audit::emit(
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
            command_json(&row)
        }
        "acknowledged_ok" | "acknowledged_failed" => {
            let same = row.try_get::<Option<i64>, _>("ack_ok")? == Some(ack.ok as i64)
                && row.try_get::<Option<String>, _>("ack_code")? == ack.code
                && row.try_get::<Option<String>, _>("ack_message")? == ack.message
                && parse_json(row.try_get("ack_data")?) == ack.data.clone().unwrap_or(Value::Null);
            if same { command_json(&row) } else { Err(ApiError::Conflict("the command was already acknowledged with a different outcome".into())) }
        }
        other => Err(ApiError::Conflict(format!("the command is {other} and cannot be acknowledged"))),
    }
}

async fn ack(State(state): State<AppState>, Robot(cred): Robot, Path(id): Path<String>, Body(body): Body<Value>) -> ApiResult<Response> {
    let parsed = parse_ack(&body)?;
    Ok(ok(apply_ack(&state, &cred, &id, parsed).await?))
}

/// The asset's commands, newest first, and how many match in all.
pub async fn list_for_asset(state: &AppState, ctx: &TenantCtx, asset_id: &str, status: Option<&str>, limit: i64, offset: i64) -> ApiResult<(Vec<Value>, i64)> {
    let filter = "WHERE target_asset_id = $1 AND tenant_id = $2 AND ($3 = '' OR status = $3)";
    let total: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM command_command {filter}")))
        .bind(asset_id)
        .bind(&ctx.tenant_id)
        .bind(status.unwrap_or(""))
        .fetch_one(&state.db.read)
        .await?;
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!("{SELECT} {filter} ORDER BY created_at DESC, command_id DESC LIMIT $4 OFFSET $5")))
        .bind(asset_id)
        .bind(&ctx.tenant_id)
        .bind(status.unwrap_or(""))
        .bind(limit)
        .bind(offset)
        .fetch_all(&state.db.read)
        .await?;
    Ok((rows.iter().map(command_json).collect::<ApiResult<_>>()?, total))
}

/// The asset's deliverable commands after stream position `after`, in
/// stream order: queued or delivered (not yet acknowledged) and not expired.
pub async fn pending(state: &AppState, asset_id: &str, after: i64, limit: i64) -> ApiResult<Vec<protocol::command::Command>> {
    let rows = sqlx::query(
        "SELECT command_id, seq, type, params, risk_class, target_component_id, expires_at FROM command_command \
         WHERE target_asset_id = $1 AND seq > $2 AND status IN ('queued', 'delivered') AND expires_at > $3 ORDER BY seq LIMIT $4",
    )
    .bind(asset_id)
    .bind(after)
    .bind(db::now())
    .bind(limit)
    .fetch_all(&state.db.read)
    .await?;
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        out.push(protocol::command::Command {
            command_id: r.try_get("command_id")?,
            seq: r.try_get("seq")?,
            kind: r.try_get("type")?,
            params: parse_json(r.try_get("params")?),
            risk_class: r.try_get("risk_class")?,
            target_component_id: r.try_get("target_component_id")?,
            expires_at: r.try_get("expires_at")?,
        });
    }
    Ok(out)
}

/// Marks the asset's queued commands up to `seq` as delivered.
pub async fn mark_delivered(state: &AppState, asset_id: &str, upto: i64) -> ApiResult<()> {
    let now = db::now();
    sqlx::query(
        "UPDATE command_command SET status = 'delivered', delivered_at = $1, updated_at = $1 \
         WHERE target_asset_id = $2 AND status = 'queued' AND seq <= $3",
    )
    .bind(&now)
    .bind(asset_id)
    .bind(upto)
    .execute(state.db.writer())
    .await?;
    Ok(())
}

/// Writes `expired` on every waiting command whose time to live has run out.
pub async fn sweep_expired(state: &AppState) -> Result<u64, sqlx::Error> {
    let now = db::now();
    let done =
        sqlx::query("UPDATE command_command SET status = 'expired', updated_at = $1 WHERE status IN ('awaiting_approval', 'queued') AND expires_at <= $1")
            .bind(&now)
            .execute(state.db.writer())
            .await?;
    Ok(done.rows_affected())
}

/// Parses an ack sent as a frame into the validated form.
pub fn ack_from_frame(a: &protocol::command::Ack) -> AckBody {
    AckBody { ok: a.ok, code: a.code.clone(), message: a.message.clone(), data: a.data.clone() }
}
