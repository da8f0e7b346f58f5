//! Operator audit routes ("Audit and invoices"): list entries across
//! tenants with filters, read one entry whole, and verify every chain of a
//! tenant.

use hub_kernel::prelude::*;
use hub_kernel::{
    audit::{
        chain,
        entry::{self, AuditEntry},
    },
    gate::Operator,
};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list)).routes(routes!(get_one)).routes(routes!(verify))
}

/// The filters of the entry list.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct EntryFilter {
    #[param(format = "uuid")]
    tenant_id: Option<String>,
    actor_id: Option<String>,
    /// RFC 3339; entries at or after.
    #[param(value_type = Option<String>, format = DateTime)]
    from: Option<Timestamp>,
    /// RFC 3339; entries at or before.
    #[param(value_type = Option<String>, format = DateTime)]
    to: Option<Timestamp>,
    /// Entries at most: default 100; larger than 500 is reduced to 500.
    #[param(minimum = 0)]
    limit: Option<i64>,
}

/// The tenant whose chains to verify.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct VerifyQuery {
    #[param(format = "uuid")]
    tenant_id: String,
}

stored_enum! {
    /// Why a chain fails verification.
    #[schema(as = AdminChainBreak)]
    enum Break { Gap = "gap", WrongPrev = "wrong-prev", WrongHash = "wrong-hash" }
}

impl From<audit::Reason> for Break {
    fn from(reason: audit::Reason) -> Self {
        match reason {
            audit::Reason::Gap => Break::Gap,
            audit::Reason::WrongPrev => Break::WrongPrev,
            audit::Reason::WrongHash => Break::WrongHash,
        }
    }
}

/// The verdict on one chain of the tenant.
#[derive(Serialize, ToSchema)]
struct AdminChainVerdict {
    pool_index: i64,
    ok: bool,
    entries_checked: i64,
    /// Where the chain breaks (only when it does).
    #[serde(skip_serializing_if = "Option::is_none")]
    failed_seq: Option<i64>,
    /// Why it breaks (only when it does).
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<Break>,
}

impl From<&audit::Verdict> for AdminChainVerdict {
    fn from(v: &audit::Verdict) -> Self {
        AdminChainVerdict {
            pool_index: v.pool_index,
            ok: v.ok,
            entries_checked: v.entries_checked,
            failed_seq: v.failed_seq,
            reason: v.reason.map(Break::from),
        }
    }
}

/// Every chain of a tenant verified.
#[derive(Serialize, ToSchema)]
struct AdminTenantVerification {
    tenant_id: String,
    /// Whether every chain verified.
    verified: bool,
    /// Entries checked across the chains.
    entry_count: i64,
    /// One verdict per pool the tenant wrote to.
    chains: Vec<AdminChainVerdict>,
    /// The first failing chain's pool (only on a failure).
    #[serde(skip_serializing_if = "Option::is_none")]
    pool_index: Option<i64>,
    /// The first failing chain's `failed_seq` (only on a failure).
    #[serde(skip_serializing_if = "Option::is_none")]
    failed_seq: Option<i64>,
    /// The first failing chain's reason (only on a failure).
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<Break>,
}

const LIMIT_DEFAULT: i64 = 100;
const LIMIT_MAX: i64 = 500;

/// An entry as the list shows it: who did what and when, and where it
/// stands in which chain.
#[derive(Debug, FromRow, Serialize, ToSchema)]
struct AuditEntrySummary {
    entry_id: Id,
    tenant_id: String,
    pool_index: i64,
    actor_kind: String,
    actor_id: String,
    event_type: String,
    occurred_at: Timestamp,
    seq: i64,
}

/// Audit entries across tenants, newest first, filtered.
///
/// Filtered by tenant, actor and time range; limit default 100, larger than
/// 500 silently reduced, no offset or cursor.
#[utoipa::path(get, path = "/admin/audit/entries", tag = "admin-audit", params(EntryFilter),
    responses((status = 200, description = "the entries", body = Data<Vec<AuditEntrySummary>>)))]
async fn list(State(state): State<AppState>, _: Operator, Params(q): Params<EntryFilter>) -> ApiResult<Data<Vec<AuditEntrySummary>>> {
    let tenant = canonical_uuid_opt(&q.tenant_id);
    let limit = q.limit.unwrap_or(LIMIT_DEFAULT).clamp(1, LIMIT_MAX);
    let actor = Check::optional(&q.actor_id);
    let entries: Vec<AuditEntrySummary> = sqlx::query_as(
        "SELECT entry_id, tenant_id, pool_index, actor_kind, actor_id, event_type, occurred_at, seq FROM audit_entry \
         WHERE ($1 IS NULL OR tenant_id = $1) AND ($2 IS NULL OR actor_id = $2) \
         AND ($3 IS NULL OR occurred_at >= $3) AND ($4 IS NULL OR occurred_at <= $4) \
         ORDER BY occurred_at DESC, entry_id DESC LIMIT $5",
    )
    .bind(&tenant)
    .bind(&actor)
    .bind(q.from)
    .bind(q.to)
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
async fn get_one(State(state): State<AppState>, _: Operator, Path(id): Path<String>) -> ApiResult<Data<AuditEntry>> {
    let id = path_id(&id).map_err(|_| ApiError::Missing("entry not found"))?.to_string();
    Ok(ok(entry::find(&state.db.read, &id, None).await?.ok_or(ApiError::Missing("entry not found"))?))
}

/// Verifies every audit chain of a tenant.
///
/// One chain per pool the tenant wrote to, each streamed; the first
/// failure is reported with its pool.
#[utoipa::path(post, path = "/admin/audit/verify", tag = "admin-audit", params(VerifyQuery),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "events": 0, "query": "tenant_id={tenant_id}" }))),
    responses((status = 200, description = "the verdicts", body = Data<AdminTenantVerification>)))]
async fn verify(State(state): State<AppState>, _: Operator, Params(q): Params<VerifyQuery>) -> ApiResult<Data<AdminTenantVerification>> {
    let tenant = canonical_uuid(&q.tenant_id);
    let mut entry_count = 0;
    let mut chains = Vec::new();
    let mut failure: Option<audit::Verdict> = None;
    for pool in chain::pools_of(&state.db.read, &tenant).await? {
        let v = audit::verify(&state.db, &tenant, pool).await?;
        entry_count += v.entries_checked;
        if !v.ok && failure.is_none() {
            failure = Some(v.clone());
        }
        chains.push(AdminChainVerdict::from(&v));
    }
    Ok(ok(AdminTenantVerification {
        tenant_id: tenant,
        verified: failure.is_none(),
        entry_count,
        chains,
        pool_index: failure.as_ref().map(|f| f.pool_index),
        failed_seq: failure.as_ref().and_then(|f| f.failed_seq),
        reason: failure.as_ref().and_then(|f| f.reason).map(Break::from),
    }))
}
