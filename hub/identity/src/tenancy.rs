//! sdk-tenant spine: tenants (with their app row), memberships binding
//! people to tenants, and app identities binding people to apps.

use axum::{
    Router,
    extract::{Path, State},
    response::Response,
    routing::{get, post},
};
use serde::Deserialize;
use serde_json::{Value, json};
use sqlx::Row;

use crate::{personas, roles};
use hub_kernel::{
    audit::{self, events},
    db::{self, Tx},
    error::{ApiError, ApiResult, Body, TargetTenantBody, created, ok},
    gate::{Person, Tenant, TenantCtx, keys},
    state::AppState,
    validate::{Check, path_id},
};

/// The membership of `person_id` in `tenant_id`, if they are a member.
pub async fn membership_of<'e, E>(exec: E, tenant_id: &str, person_id: &str) -> ApiResult<Option<String>>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    Ok(sqlx::query_scalar("SELECT membership_id FROM tenant_membership WHERE person_id = $1 AND tenant_id = $2")
        .bind(person_id)
        .bind(tenant_id)
        .fetch_optional(exec)
        .await?)
}

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/tenants", post(create_tenant))
        .route("/api/memberships", post(create_membership).get(list_memberships))
        .route("/api/app-identities", post(create_app_identity))
        .route("/api/app-identities/{app_identity_id}", get(get_app_identity))
        .route("/api/app-identities/{app_identity_id}/memberships", post(membership_for_app_identity))
}

/// Fields of a new tenant row.
pub struct NewTenantRow<'a> {
    pub tenant_id: &'a str,
    pub app_id: &'a str,
    pub org_id: &'a str,
    pub display_name: &'a str,
    pub parent_tenant_id: Option<&'a str>,
    pub root_tenant_id: &'a str,
    pub reseller_id: Option<&'a str>,
    pub region: Option<&'a str>,
    pub brand_domain: Option<&'a str>,
    pub module_subscriptions: &'a Value,
}

/// Inserts an app row with its platform default role templates, and the
/// tenant on it (`trial`, tier `S`, pool 0). Returns the owner template.
pub async fn insert_app_and_tenant(tx: &mut Tx, t: NewTenantRow<'_>) -> ApiResult<String> {
    let taken: Option<String> = sqlx::query_scalar("SELECT app_id FROM tenant_app WHERE app_id = $1").bind(t.app_id).fetch_optional(&mut **tx).await?;
    if taken.is_some() {
        return Err(ApiError::Conflict(format!("app_id '{}' is already taken", t.app_id)));
    }
    let now = db::now();
    sqlx::query("INSERT INTO tenant_app (app_id, org_id, display_name, status, created_at) VALUES ($1, $2, $3, 'active', $4)")
        .bind(t.app_id)
        .bind(t.org_id)
        .bind(t.display_name)
        .bind(&now)
        .execute(&mut **tx)
        .await?;
    let owner = roles::seed_platform_defaults(tx, t.app_id).await?;
    sqlx::query(
        "INSERT INTO tenant_tenant (tenant_id, app_id, org_id, display_name, isolation_tier, status, parent_tenant_id, \
         root_tenant_id, reseller_id, admin_pool_index, app_pool_index, region, brand_domain, module_subscriptions, created_at) \
         VALUES ($1, $2, $3, $4, 'S', 'trial', $5, $6, $7, 0, $8, $9, $10, $11, $12)",
    )
    .bind(t.tenant_id)
    .bind(t.app_id)
    .bind(t.org_id)
    .bind(t.display_name)
    .bind(t.parent_tenant_id)
    .bind(t.root_tenant_id)
    .bind(t.reseller_id)
    .bind(json!({ t.app_id: 0 }).to_string())
    .bind(t.region)
    .bind(t.brand_domain)
    .bind(t.module_subscriptions.to_string())
    .bind(&now)
    .execute(&mut **tx)
    .await?;
    Ok(owner)
}

/// The sandbox tenant of `tenant_id`, created on first use: a child
/// tenant on the same app in which the keys of the tenant's test
/// applications act (Authentication 10), so a `pk_test_` credential never
/// reads or writes the tenant's live data.
pub async fn sandbox(tx: &mut Tx, tenant_id: &str) -> ApiResult<String> {
    if let Some(id) =
        sqlx::query_scalar::<_, String>("SELECT tenant_id FROM tenant_tenant WHERE sandbox_of = $1").bind(tenant_id).fetch_optional(&mut **tx).await?
    {
        return Ok(id);
    }
    let id = db::new_id();
    sqlx::query(
        "INSERT INTO tenant_tenant (tenant_id, app_id, org_id, display_name, isolation_tier, status, parent_tenant_id, \
         root_tenant_id, reseller_id, admin_pool_index, app_pool_index, region, brand_domain, module_subscriptions, created_at, sandbox_of) \
         SELECT $1, app_id, org_id, display_name || ' (sandbox)', isolation_tier, status, tenant_id, root_tenant_id, reseller_id, \
                admin_pool_index, app_pool_index, region, NULL, module_subscriptions, $2, tenant_id \
         FROM tenant_tenant WHERE tenant_id = $3",
    )
    .bind(&id)
    .bind(db::now())
    .bind(tenant_id)
    .execute(&mut **tx)
    .await?;
    Ok(id)
}

/// The SQL condition "`column` is tenant `$n` or its sandbox", for the
/// credential-management rows a tenant administers in both.
pub fn own_or_sandbox(column: &str, n: usize) -> String {
    format!("{column} IN (${n}, (SELECT s.tenant_id FROM tenant_tenant s WHERE s.sandbox_of = ${n}))")
}

/// A tenant row as JSON.
pub async fn tenant_json<'e, E>(exec: E, tenant_id: &str) -> ApiResult<Value>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let r = sqlx::query(
        "SELECT tenant_id, app_id, org_id, display_name, isolation_tier, status, parent_tenant_id, root_tenant_id, \
         reseller_id, admin_pool_index, app_pool_index, region, brand_domain, module_subscriptions, created_at \
         FROM tenant_tenant WHERE tenant_id = $1",
    )
    .bind(tenant_id)
    .fetch_optional(exec)
    .await?
    .ok_or(ApiError::NotFound)?;
    let pools: String = r.try_get("app_pool_index")?;
    let modules: String = r.try_get("module_subscriptions")?;
    Ok(json!({
        "tenant_id": r.try_get::<String, _>("tenant_id")?,
        "app_id": r.try_get::<String, _>("app_id")?,
        "org_id": r.try_get::<String, _>("org_id")?,
        "display_name": r.try_get::<String, _>("display_name")?,
        "isolation_tier": r.try_get::<String, _>("isolation_tier")?,
        "status": r.try_get::<String, _>("status")?,
        "parent_tenant_id": r.try_get::<Option<String>, _>("parent_tenant_id")?,
        "root_tenant_id": r.try_get::<String, _>("root_tenant_id")?,
        "reseller_id": r.try_get::<Option<String>, _>("reseller_id")?,
        "admin_pool_index": r.try_get::<i64, _>("admin_pool_index")?,
        "app_pool_index": serde_json::from_str::<Value>(&pools).unwrap_or(Value::Null),
        "region": r.try_get::<Option<String>, _>("region")?,
        "brand_domain": r.try_get::<Option<String>, _>("brand_domain")?,
        "module_subscriptions": serde_json::from_str::<Value>(&modules).unwrap_or(Value::Null),
        "created_at": r.try_get::<String, _>("created_at")?,
    }))
}

fn valid_app_id(s: &str) -> bool {
    (1..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

#[derive(Deserialize)]
struct NewTenant {
    app_id: Option<String>,
    display_name: Option<String>,
    region: Option<String>,
    parent_tenant_id: Option<String>,
    brand_domain: Option<String>,
    reseller_id: Option<String>,
    module_subscriptions: Option<Value>,
    person_id: Option<Value>,
}

/// Creates a child tenant of the caller's tenant, with its own app row.
async fn create_tenant(State(state): State<AppState>, Tenant(ctx): Tenant, Body(body): Body<NewTenant>) -> ApiResult<Response> {
    keys::require_grant(&state, &ctx, "tenant.tenant.write").await?;
    let mut check = Check::new();
    if body.person_id.is_some() {
        check.fail("person_id is not accepted: bind people with POST /api/memberships");
    }
    let app_id = check.required("app_id", &body.app_id);
    if !app_id.is_empty() && !valid_app_id(&app_id) {
        check.fail("app_id must be 1-64 characters of letters, digits, '-', '_' or '.'");
    }
    let display_name = check.required("display_name", &body.display_name);
    let parent = check.optional_uuid("parent_tenant_id", &body.parent_tenant_id);
    let modules = body.module_subscriptions.clone().unwrap_or(json!([]));
    if !modules.as_array().is_some_and(|a| a.iter().all(Value::is_string)) {
        check.fail("module_subscriptions must be an array of strings");
    }
    check.finish()?;
    if let Some(p) = parent {
        ctx.check_tenant(Some(&p.to_string()))?;
    }
    let mut tx = state.db.begin().await?;
    let root: String = sqlx::query_scalar("SELECT root_tenant_id FROM tenant_tenant WHERE tenant_id = $1").bind(&ctx.tenant_id).fetch_one(&mut *tx).await?;
    let tenant_id = db::new_id();
    insert_app_and_tenant(
        &mut tx,
        NewTenantRow {
            tenant_id: &tenant_id,
            app_id: &app_id,
            org_id: &ctx.org_id,
            display_name: &display_name,
            parent_tenant_id: Some(&ctx.tenant_id),
            root_tenant_id: &root,
            reseller_id: Check::optional(&body.reseller_id).as_deref(),
            region: Check::optional(&body.region).as_deref(),
            brand_domain: Check::optional(&body.brand_domain).as_deref(),
            module_subscriptions: &modules,
        },
    )
    .await?;
    let tenant = tenant_json(&mut *tx, &tenant_id).await?;
    // Recorded in the parent's chain, where the creator acts.
    audit::record(
        &mut tx,
        &ctx,
        events::TENANT_CREATED,
        json!({
            "tenant_id": tenant_id, "parent_tenant_id": ctx.tenant_id, "org_id": ctx.org_id, "app_id": app_id,
            "status": tenant["status"], "isolation_tier": tenant["isolation_tier"],
        }),
    )
    .await?;
    tx.commit().await?;
    Ok(created(tenant))
}

/// The target tenant of a membership request: the caller's own, or a
/// direct child of it (a parent tenant administers its children).
async fn target_tenant(tx: &mut Tx, ctx: &TenantCtx, claimed: Option<String>) -> ApiResult<(String, String)> {
    let tenant_id = claimed.unwrap_or_else(|| ctx.tenant_id.clone());
    if uuid::Uuid::parse_str(&tenant_id).is_err() {
        return Err(ApiError::invalid("tenant_id must be a UUID"));
    }
    let row = sqlx::query("SELECT app_id, parent_tenant_id FROM tenant_tenant WHERE tenant_id = $1").bind(&tenant_id).fetch_optional(&mut **tx).await?;
    let Some(row) = row else { return Err(ApiError::TenantMismatch) };
    let parent: Option<String> = row.try_get("parent_tenant_id")?;
    if tenant_id != ctx.tenant_id && parent.as_deref() != Some(ctx.tenant_id.as_str()) {
        return Err(ApiError::TenantMismatch);
    }
    Ok((tenant_id, row.try_get("app_id")?))
}

/// A membership to insert: who, where (tenant and its app), and with which
/// role (the platform `member` template when none).
struct NewMember<'a> {
    person_id: &'a str,
    tenant_id: &'a str,
    app_id: &'a str,
    bu_id: Option<&'a str>,
    role_template_id: Option<String>,
}

/// Inserts a membership and the person's first persona in it.
async fn insert_membership(state: &AppState, ctx: &TenantCtx, tx: &mut Tx, m: NewMember<'_>) -> ApiResult<Value> {
    let NewMember { person_id, tenant_id, app_id, bu_id, role_template_id } = m;
    let template = match role_template_id {
        Some(t) => {
            if !roles::visible_template(&mut **tx, tenant_id, app_id, &t).await? {
                return Err(ApiError::invalid("role_template_id does not name a role template of the tenant's app"));
            }
            t
        }
        None => roles::platform_template(tx, app_id, roles::MEMBER).await?,
    };
    // Containment: the membership's role may carry only what the caller holds.
    let confers = roles::template_permissions(state, tenant_id, &template).await?;
    roles::contain(state, ctx, &confers, "the membership's role").await?;
    if membership_of(&mut **tx, tenant_id, person_id).await?.is_some() {
        return Err(ApiError::Conflict("the person is already a member of this tenant".into()));
    }
    let membership_id = db::new_id();
    let now = db::now();
    sqlx::query(
        "INSERT INTO tenant_membership (membership_id, person_id, tenant_id, bu_id, role_template_id, status, joined_at) \
         VALUES ($1, $2, $3, $4, $5, 'active', $6)",
    )
    .bind(&membership_id)
    .bind(person_id)
    .bind(tenant_id)
    .bind(bu_id)
    .bind(&template)
    .bind(&now)
    .execute(&mut **tx)
    .await?;
    let persona_id = personas::insert(tx, &state.master, tenant_id, Some(&membership_id), "human", Some(&template), None).await?;
    Ok(json!({
        "membership_id": membership_id, "person_id": person_id, "tenant_id": tenant_id, "bu_id": bu_id,
        "role_template_id": template, "status": "active", "joined_at": now, "persona_id": persona_id,
    }))
}

async fn person_exists(tx: &mut Tx, person_id: &str) -> ApiResult<bool> {
    let found: Option<String> = sqlx::query_scalar("SELECT person_id FROM identity_person WHERE person_id = $1 AND erased_at IS NULL")
        .bind(person_id)
        .fetch_optional(&mut **tx)
        .await?;
    Ok(found.is_some())
}

#[derive(Deserialize)]
struct NewMembership {
    person_id: Option<String>,
    tenant_id: Option<String>,
    bu_id: Option<String>,
    role_template_id: Option<String>,
}

async fn create_membership(State(state): State<AppState>, Tenant(ctx): Tenant, TargetTenantBody(body): TargetTenantBody<NewMembership>) -> ApiResult<Response> {
    keys::require_grant(&state, &ctx, "membership.membership.write").await?;
    let mut check = Check::new();
    let person = check.required_uuid("person_id", &body.person_id);
    let template = check.optional_uuid("role_template_id", &body.role_template_id);
    check.finish()?;
    let person = person.expect("checked").to_string();
    let mut tx = state.db.begin().await?;
    let (tenant_id, app_id) = target_tenant(&mut tx, &ctx, Check::optional(&body.tenant_id)).await?;
    if !person_exists(&mut tx, &person).await? {
        return Err(ApiError::invalid("person_id does not name a person"));
    }
    let m = insert_membership(
        &state,
        &ctx,
        &mut tx,
        NewMember {
            person_id: &person,
            tenant_id: &tenant_id,
            app_id: &app_id,
            bu_id: Check::optional(&body.bu_id).as_deref(),
            role_template_id: template.map(|t| t.to_string()),
        },
    )
    .await?;
    tx.commit().await?;
    Ok(created(m))
}

/// The memberships of the calling person, across tenants.
async fn list_memberships(State(state): State<AppState>, Person(claims): Person) -> ApiResult<Response> {
    let rows = sqlx::query(
        "SELECT m.membership_id, m.tenant_id, t.display_name AS tenant_display_name, t.app_id, a.display_name AS app_display_name, \
         m.bu_id, r.name AS role_template_name, m.joined_at, m.status, \
         (SELECT COUNT(*) FROM identity_app_identity i WHERE i.person_id = m.person_id AND i.app_id = t.app_id) AS app_identities \
         FROM tenant_membership m JOIN tenant_tenant t ON t.tenant_id = m.tenant_id JOIN tenant_app a ON a.app_id = t.app_id \
         LEFT JOIN tenant_role_template r ON r.role_template_id = m.role_template_id \
         WHERE m.person_id = $1 ORDER BY m.joined_at",
    )
    .bind(&claims.sub)
    .fetch_all(&state.db.read)
    .await?;
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        out.push(json!({
            "membership_id": r.try_get::<String, _>("membership_id")?,
            "tenant_id": r.try_get::<String, _>("tenant_id")?,
            "tenant_display_name": r.try_get::<String, _>("tenant_display_name")?,
            "app_id": r.try_get::<String, _>("app_id")?,
            "app_display_name": r.try_get::<String, _>("app_display_name")?,
            "bu_id": r.try_get::<Option<String>, _>("bu_id")?,
            "role_template_name": r.try_get::<Option<String>, _>("role_template_name")?,
            "has_app_identity": r.try_get::<i64, _>("app_identities")? > 0,
            "joined_at": r.try_get::<String, _>("joined_at")?,
            "status": r.try_get::<String, _>("status")?,
        }));
    }
    Ok(ok(out))
}

#[derive(Deserialize)]
struct NewAppIdentity {
    person_id: Option<String>,
    app_id: Option<String>,
}

async fn create_app_identity(State(state): State<AppState>, Tenant(ctx): Tenant, Body(body): Body<NewAppIdentity>) -> ApiResult<Response> {
    keys::require_grant(&state, &ctx, "app-identity.app-identity.write").await?;
    let mut check = Check::new();
    let person = check.required_uuid("person_id", &body.person_id);
    let app_id = check.required("app_id", &body.app_id);
    if !app_id.is_empty() && app_id != ctx.app_id {
        check.fail("app_id must be the app_id of the caller's tenant");
    }
    check.finish()?;
    let person = person.expect("checked").to_string();
    let mut tx = state.db.begin().await?;
    if !person_exists(&mut tx, &person).await? {
        return Err(ApiError::invalid("person_id does not name a person"));
    }
    let exists: Option<String> = sqlx::query_scalar("SELECT app_identity_id FROM identity_app_identity WHERE person_id = $1 AND app_id = $2")
        .bind(&person)
        .bind(&app_id)
        .fetch_optional(&mut *tx)
        .await?;
    if exists.is_some() {
        return Err(ApiError::Conflict("the person already has an app identity for this app".into()));
    }
    let id = db::new_id();
    let now = db::now();
    sqlx::query("INSERT INTO identity_app_identity (app_identity_id, person_id, app_id, created_at) VALUES ($1, $2, $3, $4)")
        .bind(&id)
        .bind(&person)
        .bind(&app_id)
        .bind(&now)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(created(json!({ "app_identity_id": id, "person_id": person, "app_id": app_id, "created_at": now })))
}

/// Creates the app identity of (person, app) if absent; returns its id.
pub async fn ensure_app_identity(tx: &mut Tx, person_id: &str, app_id: &str) -> ApiResult<String> {
    sqlx::query(
        "INSERT INTO identity_app_identity (app_identity_id, person_id, app_id, created_at) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (person_id, app_id) DO NOTHING",
    )
    .bind(db::new_id())
    .bind(person_id)
    .bind(app_id)
    .bind(db::now())
    .execute(&mut **tx)
    .await?;
    Ok(sqlx::query_scalar("SELECT app_identity_id FROM identity_app_identity WHERE person_id = $1 AND app_id = $2")
        .bind(person_id)
        .bind(app_id)
        .fetch_one(&mut **tx)
        .await?)
}

/// An app identity is visible only to tenants its person is a member of
/// (RULINGS 1: the lookup compares the tenant).
async fn get_app_identity(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Response> {
    let id = path_id(&id)?.to_string();
    let r = sqlx::query(
        "SELECT i.app_identity_id, i.person_id, i.app_id, i.created_at FROM identity_app_identity i \
         WHERE i.app_identity_id = $1 AND EXISTS (SELECT 1 FROM tenant_membership m WHERE m.person_id = i.person_id AND m.tenant_id = $2)",
    )
    .bind(&id)
    .bind(&ctx.tenant_id)
    .fetch_optional(&state.db.read)
    .await?
    .ok_or(ApiError::NotFound)?;
    Ok(ok(json!({
        "app_identity_id": r.try_get::<String, _>("app_identity_id")?,
        "person_id": r.try_get::<String, _>("person_id")?,
        "app_id": r.try_get::<String, _>("app_id")?,
        "created_at": r.try_get::<String, _>("created_at")?,
    })))
}

#[derive(Deserialize)]
struct NewIdentityMembership {
    tenant_id: Option<String>,
    bu_id: Option<String>,
    role_template_id: Option<String>,
}

/// Admits the person of an app identity into a tenant of that app.
async fn membership_for_app_identity(
    State(state): State<AppState>,
    Tenant(ctx): Tenant,
    Path(id): Path<String>,
    TargetTenantBody(body): TargetTenantBody<NewIdentityMembership>,
) -> ApiResult<Response> {
    keys::require_grant(&state, &ctx, "app-identity.app-identity.write").await?;
    let id = path_id(&id)?.to_string();
    let mut check = Check::new();
    let template = check.optional_uuid("role_template_id", &body.role_template_id);
    check.finish()?;
    let mut tx = state.db.begin().await?;
    let (tenant_id, app_id) = target_tenant(&mut tx, &ctx, Check::optional(&body.tenant_id)).await?;
    let row = sqlx::query("SELECT person_id, app_id FROM identity_app_identity WHERE app_identity_id = $1")
        .bind(&id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or(ApiError::NotFound)?;
    let identity_app: String = row.try_get("app_id")?;
    if identity_app != app_id {
        // Another app's identity is none of this tenant's business.
        return Err(ApiError::NotFound);
    }
    let person: String = row.try_get("person_id")?;
    let m = insert_membership(
        &state,
        &ctx,
        &mut tx,
        NewMember {
            person_id: &person,
            tenant_id: &tenant_id,
            app_id: &app_id,
            bu_id: Check::optional(&body.bu_id).as_deref(),
            role_template_id: template.map(|t| t.to_string()),
        },
    )
    .await?;
    tx.commit().await?;
    Ok(created(m))
}
