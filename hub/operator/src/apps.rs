//! "Apps, tenants and routing": apps (an idempotent 201), the tenant list
//! (newest first, 200) and the operator's tenant creation on an existing
//! app, each tenant's pool map, and the pools themselves (RULINGS 3:
//! `{ pool_index, kind, region }`; pool 0 exists from the first
//! migration). Apps and tenants are the identity area's
//! (`tenancy::{ensure_app, insert_tenant, set_pool_map, ..}`); this module
//! owns `platform_pool`.

use hub_identity::tenancy::{self, App, IsolationTier, NewTenantRow, PoolMap, PoolMapChange, Tenant};
use hub_identity::tenant_lifecycle::{self, ListedTenant};
use hub_kernel::gate::Operator;
use hub_kernel::prelude::*;
use hub_kernel::state::Invalidation;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_app))
        .routes(routes!(list_tenants, create_tenant))
        .routes(routes!(pool_map))
        .routes(routes!(list_pools, create_pool))
}

/// Tenants listed at most.
const TENANTS_CAP: i64 = 200;
/// The largest pool index.
const MAX_POOL: i64 = 1_000_000;

stored_enum! {
    /// What a routing pool holds.
    #[schema(as = AdminPoolKind)]
    enum PoolKind { Admin = "admin", App = "app", Evidence = "evidence" }
}

stored_enum! {
    /// The status of a tenant's pool map.
    #[schema(as = AdminPoolMapStatus)]
    enum PoolStatus { Active = "ACTIVE", Migrating = "MIGRATING", Quarantined = "QUARANTINED" }
}

#[derive(Deserialize, ToSchema)]
#[schema(as = AdminNewApp)]
struct NewApp {
    /// 1–64 letters, digits, `-`, `_` or `.`.
    #[schema(max_length = 64, pattern = r"^[A-Za-z0-9._-]{1,64}$")]
    app_id: String,
    #[schema(max_length = 200)]
    display_name: String,
    /// The new org's name, at first creation only (default: display_name).
    #[schema(max_length = 200)]
    org_name: Option<String>,
}

#[derive(Serialize, ToSchema)]
#[schema(as = AdminAppAnswer)]
struct AppAnswer {
    app: App,
}

/// Creates an app with its org, or answers the existing one unchanged;
/// 201 either way.
#[utoipa::path(post, path = "/admin/apps", tag = "admin-apps", request_body = NewApp,
    extensions(("x-concurrency" = json!({ "outcome": "same-answer", "events": 0, "body": { "app_id": "r-{unique}", "display_name": "Races" } }))),
    responses((status = 201, description = "the app, new or as it was", body = Data<AppAnswer>)))]
async fn create_app(State(state): State<AppState>, Operator(who): Operator, body: Body<NewApp>) -> ApiResult<Created<AppAnswer>> {
    let body = body.checked()?;
    static APP_ID: Pattern = Pattern::of::<NewApp>("app_id");
    let app_id = body.app_id.as_str();
    if !APP_ID.is_match(app_id) {
        return Err(ApiError::invalid("app_id must be 1-64 characters of letters, digits, '-', '_' or '.'"));
    }
    let display_name = body.display_name.trim();
    let org_name = Check::optional(&body.org_name);
    let (app, made) = tenancy::ensure_app(&state.db, app_id, display_name, org_name.as_deref().unwrap_or(display_name)).await?;
    if made {
        tracing::info!(app_id, operator = %who, "app created");
    }
    Ok(created(AppAnswer { app }))
}

#[derive(Serialize, ToSchema)]
#[schema(as = AdminTenantList)]
struct TenantList {
    /// Newest first, at most 200, each with its `suspension` (null when
    /// none).
    tenants: Vec<ListedTenant>,
}

/// Every tenant, newest first, at most 200 (no paging; a query is
/// ignored), each with the suspension it stands under: its own, or for a
/// sandbox its tenant's (`suspension.tenant_id` names which; null when
/// none). The suspension is beyond the operator document: see
/// docs/compatibility.md.
#[utoipa::path(get, path = "/admin/tenants", tag = "admin-tenants",
    responses((status = 200, description = "the tenants", body = Data<TenantList>)))]
async fn list_tenants(State(state): State<AppState>, _: Operator) -> ApiResult<Data<TenantList>> {
    Ok(ok(TenantList { tenants: tenant_lifecycle::listed(&state.db, TENANTS_CAP).await? }))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = AdminNewTenant)]
struct NewTenant {
    /// An existing app.
    app_id: String,
    #[schema(max_length = 200)]
    display_name: String,
    #[schema(max_length = 64)]
    region: String,
    /// `S` (default), `P` or `G`.
    isolation_tier: Option<IsolationTier>,
    /// Strings of 1 to 128 characters; `[]` by default.
    #[schema(max_items = 100, max_length = 128, pattern = r"[\s\S]")]
    module_subscriptions: Option<Vec<String>>,
    #[schema(max_length = 253)]
    brand_domain: Option<String>,
}

#[derive(Serialize, ToSchema)]
#[schema(as = AdminTenantAnswer)]
struct TenantAnswer {
    tenant: Tenant,
}

/// Creates a root tenant on an existing app (not idempotent). Event
/// `tenant.tenant.created.v1` in the new tenant's chain.
#[utoipa::path(post, path = "/admin/tenants", tag = "admin-tenants", request_body = NewTenant,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/admin/apps", { "app_id": "r-{unique}", "display_name": "Races" }]], "body": { "app_id": "r-{unique}", "display_name": "Races", "region": "eu-west-1" } }))),
    responses((status = 201, description = "the tenant", body = Data<TenantAnswer>)))]
async fn create_tenant(State(state): State<AppState>, Operator(who): Operator, body: Body<NewTenant>) -> ApiResult<Created<TenantAnswer>> {
    let body = body.checked()?;
    let (app_id, display_name, region) = (body.app_id.trim(), body.display_name.trim(), body.region.trim());
    let tier = body.isolation_tier.unwrap_or(IsolationTier::S).as_str();
    static MODULE: Pattern = Pattern::of::<NewTenant>("module_subscriptions[]");
    let modules = body.module_subscriptions.unwrap_or_default();
    if modules.iter().any(|m| !MODULE.is_match(m) || m.chars().count() > 128) {
        return Err(ApiError::invalid("module_subscriptions must be an array of at most 100 strings of 1-128 characters"));
    }
    let modules = json!(modules);
    let brand = Check::optional(&body.brand_domain);
    let mut tx = state.db.begin().await?;
    let app = tenancy::find_app(&mut *tx, app_id).await?.ok_or_else(|| ApiError::invalid("app_id must name an existing app"))?;
    let id = db::new_id();
    let row = NewTenantRow {
        tenant_id: &id,
        app_id: &app.app_id,
        org_id: &app.org_id,
        display_name,
        parent_tenant_id: None,
        root_tenant_id: &id,
        reseller_id: None,
        region: Some(region),
        brand_domain: brand.as_deref(),
        module_subscriptions: &modules,
    };
    let tenant = tenancy::insert_tenant(&mut tx, &app, row, tier).await?;
    let payload = json!({ "tenant_id": tenant.tenant_id, "org_id": tenant.org_id, "app_id": tenant.app_id, "status": tenant.status,
        "isolation_tier": tenant.isolation_tier, "region": tenant.region });
    audit::record_operator_in(&mut tx, &tenant.tenant_id, &who, events::TENANT_CREATED, payload).await?;
    tx.commit().await?;
    Ok(created(TenantAnswer { tenant }))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = AdminNewPoolMap)]
struct NewPoolMap {
    /// An existing pool.
    #[schema(minimum = 0, maximum = 1_000_000)]
    admin_pool_index: i64,
    #[schema(max_length = 64)]
    region: String,
    /// An existing pool; absent keeps the current one.
    #[schema(minimum = 0, maximum = 1_000_000)]
    evidence_pool_index: Option<i64>,
    /// `{ app_id: pool_index }` of at most 1000 existing pools (0 to
    /// 1000000); absent keeps the current map.
    #[schema(value_type = Option<HashMap<String, i64>>)]
    app_pool_index: Option<serde_json::Map<String, Value>>,
    /// Absent keeps the current status.
    status: Option<PoolStatus>,
}

/// Sets a tenant's pool map (one row a tenant; an upsert): 201. The
/// pools named must exist (400); a path id that is not a UUID is 400
/// 'tenant_id must be a UUID' as documented, an unknown tenant 404. Event
/// `tenant.pool_map.changed.v1` in the tenant's chain (in its new admin
/// pool).
#[utoipa::path(post, path = "/admin/tenants/{tenant_id}/pool-map", tag = "admin-tenants", request_body = NewPoolMap,
    params(("tenant_id" = String, Path, format = "uuid", description = "the tenant")),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/admin/apps", { "app_id": "r-{unique}", "display_name": "Races" }], ["POST", "/admin/tenants", { "app_id": "r-{unique}", "display_name": "Races", "region": "eu-west-1" }]], "params": { "tenant_id": "{tenant.tenant_id}" }, "body": { "admin_pool_index": 0, "region": "eu-west-1" } }))),
    responses((status = 201, description = "the pool map", body = Data<PoolMap>)))]
async fn pool_map(
    State(state): State<AppState>,
    Operator(who): Operator,
    Path(tenant_id): Path<String>,
    body: Body<NewPoolMap>,
) -> ApiResult<Created<PoolMap>> {
    let tenant_id = uuid::Uuid::parse_str(&tenant_id).map_err(|_| ApiError::invalid("tenant_id must be a UUID"))?.to_string();
    if tenancy::find(state.db.writer(), &tenant_id).await?.is_none() {
        return Err(ApiError::NotFound);
    }
    let body = body.checked()?;
    let (admin, region, evidence) = (body.admin_pool_index, body.region.trim(), body.evidence_pool_index);
    let apps = body.app_pool_index;
    if apps.as_ref().is_some_and(|m| m.len() > 1000 || !m.values().all(|v| v.as_i64().is_some_and(|p| (0..=MAX_POOL).contains(&p)))) {
        return Err(ApiError::invalid(format!("app_pool_index must be an object of app_id to a pool_index from 0 to {MAX_POOL}")));
    }
    let status = body.status.map(PoolStatus::as_str);
    let mut tx = state.db.begin().await?;
    let mut named: Vec<(&str, i64)> = vec![("admin_pool_index", admin)];
    named.extend(evidence.map(|e| ("evidence_pool_index", e)));
    named.extend(apps.iter().flat_map(|m| m.values().filter_map(Value::as_i64)).map(|p| ("app_pool_index", p)));
    let mut missing = Vec::new();
    for (field, pool) in named {
        let found: Option<i64> = sqlx::query_scalar("SELECT pool_index FROM platform_pool WHERE pool_index = $1").bind(pool).fetch_optional(&mut *tx).await?;
        if found.is_none() {
            missing.push(format!("{field} {pool} names no pool"));
        }
    }
    missing.dedup();
    if !missing.is_empty() {
        return Err(ApiError::Validation(missing));
    }
    let app_map = apps.map(Value::Object);
    let change = PoolMapChange { admin_pool_index: admin, region, evidence_pool_index: evidence, app_pool_index: app_map.as_ref(), status };
    let map = tenancy::set_pool_map(&mut tx, &tenant_id, change).await?.ok_or(ApiError::NotFound)?;
    audit::record_operator_in(&mut tx, &tenant_id, &who, events::TENANT_POOL_MAP_CHANGED, json!(map)).await?;
    tx.commit().await?;
    state.invalidate(Invalidation::Tenants).await;
    Ok(created(map))
}

/// A routing pool.
#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = AdminPool)]
struct Pool {
    pool_index: i64,
    kind: PoolKind,
    region: Option<String>,
    created_at: Timestamp,
}

/// Every pool, by index (beyond the documents: the pools a pool map can
/// name).
#[utoipa::path(get, path = "/admin/pools", tag = "admin-pools",
    responses((status = 200, description = "the pools", body = Data<Vec<Pool>>)))]
async fn list_pools(State(state): State<AppState>, _: Operator) -> ApiResult<Data<Vec<Pool>>> {
    let pools: Vec<Pool> =
        sqlx::query_as("SELECT pool_index, kind, region, created_at FROM platform_pool ORDER BY pool_index").fetch_all(&state.db.read).await?;
    Ok(ok(pools))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = AdminNewPool)]
struct NewPool {
    /// Unique (409 when taken).
    #[schema(minimum = 0, maximum = 1_000_000)]
    pool_index: i64,
    kind: PoolKind,
    #[schema(max_length = 64)]
    region: String,
}

/// Creates a pool (RULINGS 3): 201; a taken pool_index is 409.
#[utoipa::path(post, path = "/admin/pools", tag = "admin-pools", request_body = NewPool,
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "events": 0, "body": { "pool_index": 4242, "kind": "app", "region": "eu-west-1" } }))),
    responses((status = 201, description = "the pool", body = Data<Pool>)))]
async fn create_pool(State(state): State<AppState>, Operator(who): Operator, body: Body<NewPool>) -> ApiResult<Created<Pool>> {
    let body = body.checked()?;
    let (index, kind, region) = (body.pool_index, body.kind, body.region.trim());
    let pool: Option<Pool> = sqlx::query_as(
        "INSERT INTO platform_pool (pool_index, kind, region, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT (pool_index) DO NOTHING \
         RETURNING pool_index, kind, region, created_at",
    )
    .bind(index)
    .bind(kind)
    .bind(region)
    .bind(db::now())
    .fetch_optional(state.db.writer())
    .await?;
    let pool = pool.ok_or_else(|| ApiError::Conflict(format!("pool {index} exists")))?;
    tracing::info!(pool_index = pool.pool_index, kind = kind.as_str(), operator = %who, "pool created");
    Ok(created(pool))
}
