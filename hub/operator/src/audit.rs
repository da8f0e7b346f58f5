//! Operator audit routes ("Audit and invoices"): list entries across
//! tenants with filters, read one entry whole, and verify every chain of a
//! tenant.

use std::collections::HashMap;

use hub_kernel::prelude::*;
use hub_kernel::{audit::chain, gate::Operator, validate::query_int};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list)).routes(routes!(get_one)).routes(routes!(verify))
}

/// The filters of the entry list.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
struct EntryFilter {
    #[param(format = "uuid")]
    tenant_id: Option<String>,
    actor_id: Option<String>,
    /// RFC 3339; entries at or after.
    #[param(format = DateTime)]
    from: Option<String>,
    /// RFC 3339; entries at or before.
    #[param(format = DateTime)]
    to: Option<String>,
    /// Entries at most: default 100; larger than 500 is reduced to 500.
    limit: Option<i64>,
}

/// The tenant whose chains to verify.
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
struct VerifyQuery {
    #[param(required = true, format = "uuid")]
    tenant_id: Option<String>,
}

/// The verdict on one chain of the tenant.
// The kernel's `Verdict` (its Options skipped when None).
#[derive(ToSchema)]
#[allow(dead_code)]
struct AdminChainVerdict {
    pool_index: i64,
    ok: bool,
    entries_checked: i64,
    /// Where the chain breaks (only when it does).
    failed_seq: Option<i64>,
    /// `gap`, `wrong-prev` or `wrong-hash` (only when the chain breaks).
    reason: Option<String>,
}

/// Every chain of a tenant verified.
#[derive(ToSchema)]
#[allow(dead_code)]
struct AdminTenantVerification {
    tenant_id: String,
    /// Whether every chain verified.
    verified: bool,
    /// Entries checked across the chains.
    entry_count: i64,
    /// One verdict per pool the tenant wrote to.
    chains: Vec<AdminChainVerdict>,
    /// The first failing chain's pool (only on a failure).
    pool_index: Option<i64>,
    /// The first failing chain's `failed_seq` (only on a failure).
    failed_seq: Option<i64>,
    /// The first failing chain's reason (only on a failure).
    reason: Option<String>,
}

const LIMIT_DEFAULT: i64 = 100;
const LIMIT_MAX: i64 = 500;

fn param<'a>(q: &'a HashMap<String, String>, name: &str) -> Option<&'a str> {
    q.get(name).map(|s| s.trim()).filter(|s| !s.is_empty())
}

/// A parameter with a format: absent, or of its format (blank is not).
fn formatted<'a>(q: &'a HashMap<String, String>, name: &str) -> Option<&'a str> {
    q.get(name).map(|s| s.trim())
}

fn uuid_param(q: &HashMap<String, String>, name: &str, errors: &mut Vec<String>) -> Option<String> {
    let v = formatted(q, name)?;
    match uuid::Uuid::parse_str(v) {
        Ok(id) => Some(id.to_string()),
        Err(_) => {
            errors.push(format!("{name} must be a UUID"));
            None
        }
    }
}

fn time_param(q: &HashMap<String, String>, name: &str, errors: &mut Vec<String>) -> Option<String> {
    let v = formatted(q, name)?;
    match db::parse_time(v) {
        Some(t) => Some(db::format_time(t)),
        None => {
            errors.push(format!("{name} must be an RFC 3339 timestamp"));
            None
        }
    }
}

/// An entry as the list shows it: who did what and when, and where it
/// stands in which chain.
#[derive(Debug, FromRow, Serialize, ToSchema)]
struct AuditEntrySummary {
    entry_id: String,
    tenant_id: String,
    pool_index: i64,
    actor_kind: String,
    actor_id: String,
    event_type: String,
    occurred_at: String,
    seq: i64,
}

/// One entry whole, hashes as lowercase hex.
#[derive(Debug, FromRow, Serialize, ToSchema)]
struct AuditEntry {
    entry_id: String,
    tenant_id: String,
    pool_index: i64,
    seq: i64,
    event_type: String,
    actor_kind: String,
    actor_id: String,
    #[sqlx(try_from = "Option<String>")]
    #[schema(value_type = Option<Value>)]
    actor_chain: Document,
    occurred_at: String,
    retention_class: String,
    #[sqlx(try_from = "Option<String>")]
    #[schema(value_type = Option<Value>)]
    payload: Document,
    #[sqlx(try_from = "Vec<u8>")]
    #[schema(value_type = String)]
    payload_digest: Hex,
    shredded_at: Option<String>,
    #[sqlx(try_from = "Vec<u8>")]
    #[schema(value_type = String)]
    prev_hash: Hex,
    #[sqlx(try_from = "Vec<u8>")]
    #[schema(value_type = String)]
    entry_hash: Hex,
}

/// A JSON document stored as text, shown as the document; text that is not
/// JSON is shown as the text itself (the operator sees what is stored), and
/// an absent one (a shredded payload) as null.
#[derive(Debug, Serialize)]
#[serde(transparent)]
struct Document(Option<Value>);

impl From<Option<String>> for Document {
    fn from(text: Option<String>) -> Self {
        Document(text.map(|s| serde_json::from_str(&s).unwrap_or(Value::String(s))))
    }
}

/// Bytes shown as lowercase hex.
#[derive(Debug, Serialize)]
#[serde(transparent)]
struct Hex(String);

impl From<Vec<u8>> for Hex {
    fn from(bytes: Vec<u8>) -> Self {
        Hex(hex::encode(bytes))
    }
}

/// Audit entries across tenants, newest first, filtered.
///
/// Filtered by tenant, actor and time range; limit default 100, larger than
/// 500 silently reduced, no offset or cursor.
#[utoipa::path(get, path = "/admin/audit/entries", tag = "admin-audit", params(EntryFilter),
    responses((status = 200, description = "the entries", body = Data<Vec<AuditEntrySummary>>)))]
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
    let entries: Vec<AuditEntrySummary> = sqlx::query_as(
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
    Ok(ok(entries))
}

/// One audit entry whole.
///
/// Hashes as lowercase hex; a shredded payload is null with its
/// `shredded_at`.
#[utoipa::path(get, path = "/admin/audit/entries/{entry_id}", tag = "admin-audit", params(("entry_id" = String, Path, description = "the entry")),
    responses((status = 200, description = "the entry", body = Data<AuditEntry>)))]
async fn get_one(State(state): State<AppState>, _: Operator, Path(id): Path<String>) -> ApiResult<Response> {
    let id = path_id(&id)?.to_string();
    let entry: AuditEntry = sqlx::query_as(
        "SELECT entry_id, tenant_id, pool_index, seq, event_type, actor_kind, actor_id, actor_chain, occurred_at, retention_class, \
         payload, payload_digest, shredded_at, prev_hash, entry_hash FROM audit_entry WHERE entry_id = $1",
    )
    .bind(&id)
    .fetch_optional(&state.db.read)
    .await?
    .ok_or(ApiError::NotFound)?;
    Ok(ok(entry))
}

/// Verifies every audit chain of a tenant.
///
/// One chain per pool the tenant wrote to, each streamed; the first
/// failure is reported with its pool.
#[utoipa::path(post, path = "/admin/audit/verify", tag = "admin-audit", params(VerifyQuery),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "events": 0, "query": "tenant_id={tenant_id}" }))),
    responses((status = 200, description = "the verdicts", body = Data<AdminTenantVerification>)))]
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
