//! Operator audit routes ("Audit and invoices"): list entries across
//! tenants with filters, read one entry whole, and verify every chain of a
//! tenant.

use std::collections::HashMap;

use axum::{
    Router,
    extract::{Path, State},
    response::Response,
    routing::{get, post},
};
use serde_json::{Value, json};
use sqlx::Row;

use hub_kernel::{
    audit::{self, chain},
    db,
    error::{ApiError, ApiResult, ok},
    extract::Params,
    gate::Operator,
    state::AppState,
    validate::{path_id, query_int},
};

pub fn routes() -> Router<AppState> {
    Router::new().route("/admin/audit/entries", get(list)).route("/admin/audit/entries/{entry_id}", get(get_one)).route("/admin/audit/verify", post(verify))
}

const LIMIT_DEFAULT: i64 = 100;
const LIMIT_MAX: i64 = 500;

fn param<'a>(q: &'a HashMap<String, String>, name: &str) -> Option<&'a str> {
    q.get(name).map(|s| s.trim()).filter(|s| !s.is_empty())
}

fn uuid_param(q: &HashMap<String, String>, name: &str, errors: &mut Vec<String>) -> Option<String> {
    let v = param(q, name)?;
    match uuid::Uuid::parse_str(v) {
        Ok(id) => Some(id.to_string()),
        Err(_) => {
            errors.push(format!("{name} must be a UUID"));
            None
        }
    }
}

fn time_param(q: &HashMap<String, String>, name: &str, errors: &mut Vec<String>) -> Option<String> {
    let v = param(q, name)?;
    match db::parse_time(v) {
        Some(t) => Some(db::format_time(t)),
        None => {
            errors.push(format!("{name} must be an RFC 3339 timestamp"));
            None
        }
    }
}

/// Entries newest first, filtered by tenant, actor and time range; limit
/// default 100, larger than 500 silently reduced, no offset or cursor.
async fn list(State(state): State<AppState>, _: Operator, Params(q): Params<HashMap<String, String>>) -> ApiResult<Response> {
    let mut errors = Vec::new();
    let tenant = uuid_param(&q, "tenant_id", &mut errors);
    let from = time_param(&q, "from", &mut errors);
    let to = time_param(&q, "to", &mut errors);
    let limit = match query_int("limit", param(&q, "limit"), LIMIT_DEFAULT) {
        Ok(n) => n.clamp(1, LIMIT_MAX),
        Err(ApiError::Validation(mut d)) => {
            errors.append(&mut d);
            LIMIT_DEFAULT
        }
        Err(e) => return Err(e),
    };
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let actor = param(&q, "actor_id").map(str::to_string);
    let rows = sqlx::query(
        "SELECT entry_id, tenant_id, pool_index, actor_kind, actor_id, event_type, occurred_at, seq FROM audit_entry \
         WHERE ($1 IS NULL OR tenant_id = $1) AND ($2 IS NULL OR actor_id = $2) \
         AND ($3 IS NULL OR occurred_at >= $3) AND ($4 IS NULL OR occurred_at <= $4) \
         ORDER BY occurred_at DESC, entry_id DESC LIMIT $5",
    )
    .bind(&tenant)
    .bind(&actor)
    .bind(&from)
    .bind(&to)
    .bind(limit)
    .fetch_all(&state.db.read)
    .await?;
    let mut data = Vec::with_capacity(rows.len());
    for r in rows {
        data.push(json!({
            "entry_id": r.try_get::<String, _>("entry_id")?,
            "tenant_id": r.try_get::<String, _>("tenant_id")?,
            "pool_index": r.try_get::<i64, _>("pool_index")?,
            "actor_kind": r.try_get::<String, _>("actor_kind")?,
            "actor_id": r.try_get::<String, _>("actor_id")?,
            "event_type": r.try_get::<String, _>("event_type")?,
            "occurred_at": r.try_get::<String, _>("occurred_at")?,
            "seq": r.try_get::<i64, _>("seq")?,
        }));
    }
    Ok(ok(data))
}

/// One entry whole, hashes as lowercase hex; a shredded payload is null
/// with its `shredded_at`.
async fn get_one(State(state): State<AppState>, _: Operator, Path(id): Path<String>) -> ApiResult<Response> {
    let id = path_id(&id)?.to_string();
    let r = sqlx::query(
        "SELECT entry_id, tenant_id, pool_index, seq, event_type, actor_kind, actor_id, actor_chain, occurred_at, retention_class, \
         payload, payload_digest, shredded_at, prev_hash, entry_hash FROM audit_entry WHERE entry_id = $1",
    )
    .bind(&id)
    .fetch_optional(&state.db.read)
    .await?
    .ok_or(ApiError::NotFound)?;
    let parse = |s: Option<String>| s.map(|s| serde_json::from_str::<Value>(&s).unwrap_or(Value::String(s)));
    Ok(ok(json!({
        "entry_id": r.try_get::<String, _>("entry_id")?,
        "tenant_id": r.try_get::<String, _>("tenant_id")?,
        "pool_index": r.try_get::<i64, _>("pool_index")?,
        "seq": r.try_get::<i64, _>("seq")?,
        "event_type": r.try_get::<String, _>("event_type")?,
        "actor_kind": r.try_get::<String, _>("actor_kind")?,
        "actor_id": r.try_get::<String, _>("actor_id")?,
        "actor_chain": parse(r.try_get("actor_chain")?),
        "occurred_at": r.try_get::<String, _>("occurred_at")?,
        "retention_class": r.try_get::<String, _>("retention_class")?,
        "payload": parse(r.try_get("payload")?),
        "payload_digest": hex::encode(r.try_get::<Vec<u8>, _>("payload_digest")?),
        "shredded_at": r.try_get::<Option<String>, _>("shredded_at")?,
        "prev_hash": hex::encode(r.try_get::<Vec<u8>, _>("prev_hash")?),
        "entry_hash": hex::encode(r.try_get::<Vec<u8>, _>("entry_hash")?),
    })))
}

/// Verifies every chain of a tenant (one per pool it wrote to), each
/// streamed; the first failure is reported with its pool.
async fn verify(State(state): State<AppState>, _: Operator, Params(q): Params<HashMap<String, String>>) -> ApiResult<Response> {
    let Some(raw) = param(&q, "tenant_id") else {
        return Err(ApiError::invalid("tenant_id is required (query parameter)"));
    };
    let tenant = uuid::Uuid::parse_str(raw).map_err(|_| ApiError::invalid("tenant_id must be a UUID"))?.to_string();
    let mut entry_count = 0;
    let mut chains = Vec::new();
    let mut failure: Option<audit::Verdict> = None;
    for pool in chain::pools_of(&state.db.read, &tenant).await? {
        let v = audit::verify(&state.db, &tenant, pool).await?;
        entry_count += v.entries_checked;
        if !v.ok && failure.is_none() {
            failure = Some(v.clone());
        }
        chains.push(v);
    }
    let mut data = json!({ "tenant_id": tenant, "verified": failure.is_none(), "entry_count": entry_count, "chains": chains });
    if let Some(f) = failure {
        data["pool_index"] = json!(f.pool_index);
        data["failed_seq"] = json!(f.failed_seq);
        data["reason"] = json!(f.reason);
    }
    Ok(ok(data))
}
