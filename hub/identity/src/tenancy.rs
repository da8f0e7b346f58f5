//! sdk-tenant spine: tenants (with their org and app rows), memberships
//! binding people to tenants, and app identities binding people to apps.
//!
//! This module owns tenant_org, tenant_app, tenant_tenant,
//! tenant_membership and identity_app_identity: other modules reach them
//! through its functions, never with SQL of their own. The one piece of its
//! SQL that runs inside other modules' queries is `own_or_sandbox`, a
//! condition that spares them a read of the tenant before each such query.

use crate::{auth, personas, roles};
use hub_kernel::prelude::*;
use hub_kernel::{
    body::TargetTenantBody,
    gate::{Person, Tenant as TenantCaller, keys},
};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_tenant, list_tenants))
        .routes(routes!(get_tenant, update_tenant))
        .routes(routes!(create_membership, list_memberships))
        .routes(routes!(list_tenant_memberships))
        .routes(routes!(update_membership))
        .routes(routes!(revoke_membership))
        .routes(routes!(create_app_identity))
        .routes(routes!(get_app_identity))
        .routes(routes!(membership_for_app_identity))
}

stored_enum! {
    /// Where a tenant is in its life: `trial` when created; `offboarding`
    /// once its offboarding started, `offboarded` when its deadline has
    /// passed.
    #[schema(as = TenantStatus)]
    pub enum TenantStatus { Trial = "trial", Offboarding = "offboarding", Offboarded = "offboarded" }
}

stored_enum! {
    /// How a tenant's data is isolated: `S` shared, `P` private, `G` dedicated.
    #[schema(as = TenantIsolationTier)]
    pub enum IsolationTier { S = "S", P = "P", G = "G" }
}

/// A tenant as the API shows it.
#[derive(Debug, FromRow, Serialize, ToSchema)]
pub struct Tenant {
    pub tenant_id: String,
    /// The tenant's app (text, one app per tenant).
    pub app_id: String,
    pub org_id: String,
    pub display_name: String,
    pub isolation_tier: IsolationTier,
    pub status: TenantStatus,
    pub parent_tenant_id: Option<String>,
    pub root_tenant_id: String,
    pub reseller_id: Option<String>,
    pub admin_pool_index: i64,
    /// The pool each app writes to, by app_id.
    #[sqlx(try_from = "String")]
    #[schema(value_type = HashMap<String, i64>)]
    pub app_pool_index: JsonText,
    pub region: Option<String>,
    pub brand_domain: Option<String>,
    #[sqlx(try_from = "String")]
    #[schema(value_type = Vec<String>)]
    pub module_subscriptions: JsonText,
    pub created_at: Timestamp,
}

pub(crate) const TENANT_COLUMNS: &str = "tenant_id, app_id, org_id, display_name, isolation_tier, status, parent_tenant_id, root_tenant_id, \
                              reseller_id, admin_pool_index, app_pool_index, region, brand_domain, module_subscriptions, created_at";

/// The tenant `tenant_id`, if it exists.
pub async fn find<'e, E>(exec: E, tenant_id: &str) -> ApiResult<Option<Tenant>>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let sql = format!("SELECT {TENANT_COLUMNS} FROM tenant_tenant WHERE tenant_id = $1");
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).fetch_optional(exec).await?)
}

stored_enum! {
    /// Whether a membership admits its person to the tenant: `active` when
    /// admitted, `revoked` once the person is removed (their personas in
    /// the tenant are revoked with it and hold no permission).
    #[schema(as = MembershipStatus)]
    pub enum MembershipStatus { Active = "active", Revoked = "revoked" }
}

impl PartialEq<&str> for MembershipStatus {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// A person's membership of a tenant.
#[derive(Debug, FromRow, Serialize, ToSchema)]
pub struct Membership {
    pub membership_id: String,
    pub person_id: String,
    pub tenant_id: String,
    pub bu_id: Option<String>,
    /// The membership's role: the primary role of the personas admitted
    /// with it.
    pub role_template_id: Option<String>,
    pub status: MembershipStatus,
    pub joined_at: Timestamp,
}

const MEMBERSHIP_COLUMNS: &str = "membership_id, person_id, tenant_id, bu_id, role_template_id, status, joined_at";

/// The membership of `tenant_id` whose `column` (a column name written in
/// this module, never request text) is `value`.
async fn membership_where<'e, E>(exec: E, column: &str, value: &str, tenant_id: &str) -> ApiResult<Option<Membership>>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let sql = format!("SELECT {MEMBERSHIP_COLUMNS} FROM tenant_membership WHERE {column} = $1 AND tenant_id = $2");
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(value).bind(tenant_id).fetch_optional(exec).await?)
}

/// The membership of `person_id` in `tenant_id` (in any status), if any.
pub async fn person_membership<'e, E>(exec: E, tenant_id: &str, person_id: &str) -> ApiResult<Option<Membership>>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    membership_where(exec, "person_id", person_id, tenant_id).await
}

/// The membership `membership_id` of `tenant_id`, if it is one.
pub async fn find_membership<'e, E>(exec: E, tenant_id: &str, membership_id: &str) -> ApiResult<Option<Membership>>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    membership_where(exec, "membership_id", membership_id, tenant_id).await
}

/// The membership of `person_id` in `tenant_id`, if they are a member.
pub async fn membership_of<'e, E>(exec: E, tenant_id: &str, person_id: &str) -> ApiResult<Option<String>>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    Ok(person_membership(exec, tenant_id, person_id).await?.map(|m| m.membership_id))
}

/// Inserts an active membership of `person_id` in `tenant_id` holding
/// `role_template_id`, or re-admits a person whose membership was revoked
/// (the same membership, active again with the new role; their revoked
/// personas stay revoked). The caller has checked that the role may be
/// handed on.
pub async fn insert_membership(tx: &mut Tx, person_id: &str, tenant_id: &str, bu_id: Option<&str>, role_template_id: &str) -> ApiResult<Membership> {
    // The unique (person, tenant) decides: of two admissions of one person
    // at once, one is made and the other is 409.
    let sql = format!(
        "INSERT INTO tenant_membership (membership_id, person_id, tenant_id, bu_id, role_template_id, status, joined_at) \
         VALUES ($1, $2, $3, $4, $5, 'active', $6) ON CONFLICT (person_id, tenant_id) DO UPDATE SET bu_id = excluded.bu_id, \
         role_template_id = excluded.role_template_id, status = 'active', joined_at = excluded.joined_at \
         WHERE tenant_membership.status = 'revoked' RETURNING {MEMBERSHIP_COLUMNS}"
    );
    let made: Option<Membership> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(person_id)
        .bind(tenant_id)
        .bind(bu_id)
        .bind(role_template_id)
        .bind(db::now())
        .fetch_optional(&mut **tx)
        .await?;
    made.ok_or_else(|| ApiError::Conflict("the person is already a member of this tenant".into()))
}

/// Inserts an org; returns its id.
pub async fn insert_org(tx: &mut Tx, name: &str) -> ApiResult<String> {
    let org_id = db::new_id();
    sqlx::query("INSERT INTO tenant_org (org_id, name, created_at) VALUES ($1, $2, $3)").bind(&org_id).bind(name).bind(db::now()).execute(&mut **tx).await?;
    Ok(org_id)
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
/// tenant on it (`trial`, tier `S`, pool 0). Returns the tenant and the
/// app's owner template.
pub async fn insert_app_and_tenant(tx: &mut Tx, t: NewTenantRow<'_>) -> ApiResult<(Tenant, String)> {
    let now = db::now();
    // The app_id decides: of two tenants claiming one app_id at once, one
    // takes it and the other is 409.
    let made = sqlx::query(
        "INSERT INTO tenant_app (app_id, org_id, display_name, status, created_at) VALUES ($1, $2, $3, 'active', $4) ON CONFLICT (app_id) DO NOTHING",
    )
    .bind(t.app_id)
    .bind(t.org_id)
    .bind(t.display_name)
    .bind(&now)
    .execute(&mut **tx)
    .await?;
    if made.rows_affected() == 0 {
        return Err(ApiError::Conflict(format!("app_id '{}' is already taken", t.app_id)));
    }
    let owner = roles::seed_platform_defaults(tx, t.app_id).await?;
    let sql = format!(
        "INSERT INTO tenant_tenant (tenant_id, app_id, org_id, display_name, isolation_tier, status, parent_tenant_id, \
         root_tenant_id, reseller_id, admin_pool_index, app_pool_index, region, brand_domain, module_subscriptions, created_at) \
         VALUES ($1, $2, $3, $4, 'S', 'trial', $5, $6, $7, 0, $8, $9, $10, $11, $12) RETURNING {TENANT_COLUMNS}"
    );
    let tenant = sqlx::query_as(sqlx::AssertSqlSafe(sql))
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
        .fetch_one(&mut **tx)
        .await?;
    Ok((tenant, owner))
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
/// credential-management rows a tenant administers in both. It is this
/// module's SQL, handed to the modules that own those rows so that their
/// one query needs no read of the tenant first.
pub fn own_or_sandbox(column: &str, n: usize) -> String {
    format!("{column} IN (${n}, (SELECT s.tenant_id FROM tenant_tenant s WHERE s.sandbox_of = ${n}))")
}

/// The SQL condition "`column` is tenant `$n`, or the tenant whose
/// sandbox `$n` is": what stands for a tenant stands for its sandbox too.
pub fn own_or_sandbox_owner(column: &str, n: usize) -> String {
    format!("{column} IN (${n}, (SELECT s.sandbox_of FROM tenant_tenant s WHERE s.tenant_id = ${n}))")
}

/// Sets the status of a tenant and of its sandbox.
pub async fn set_status(tx: &mut Tx, tenant_id: &str, status: TenantStatus) -> ApiResult<()> {
    sqlx::query("UPDATE tenant_tenant SET status = $1 WHERE tenant_id = $2 OR sandbox_of = $2").bind(status).bind(tenant_id).execute(&mut **tx).await?;
    Ok(())
}

/// An app as the operator sees it.
#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = AdminApp)]
pub struct App {
    pub app_id: String,
    pub org_id: String,
    pub display_name: String,
    /// `active`.
    pub status: String,
    pub created_at: Timestamp,
}

const APP_COLUMNS: &str = "app_id, org_id, display_name, status, created_at";

/// The app `app_id`, if it exists.
pub async fn find_app<'e, E>(exec: E, app_id: &str) -> ApiResult<Option<App>>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let sql = format!("SELECT {APP_COLUMNS} FROM tenant_app WHERE app_id = $1");
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(app_id).fetch_optional(exec).await?)
}

/// The app `app_id`, created (in a new org named `org_name`, with the
/// platform's default role templates) unless it exists; an existing app is
/// answered unchanged. True when this call created it.
pub async fn ensure_app(db: &Db, app_id: &str, display_name: &str, org_name: &str) -> ApiResult<(App, bool)> {
    if let Some(app) = find_app(&db.read, app_id).await? {
        return Ok((app, false));
    }
    let mut tx = db.begin().await?;
    let org_id = insert_org(&mut tx, org_name).await?;
    let sql = format!(
        "INSERT INTO tenant_app (app_id, org_id, display_name, status, created_at) VALUES ($1, $2, $3, 'active', $4) \
         ON CONFLICT (app_id) DO NOTHING RETURNING {APP_COLUMNS}"
    );
    let made: Option<App> =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(app_id).bind(&org_id).bind(display_name).bind(db::now()).fetch_optional(&mut *tx).await?;
    let Some(app) = made else {
        // Created meanwhile by a concurrent request: that one stands.
        tx.rollback().await?;
        return Ok((find_app(db.writer(), app_id).await?.ok_or(ApiError::NotFound)?, false));
    };
    roles::seed_platform_defaults(&mut tx, app_id).await?;
    tx.commit().await?;
    Ok((app, true))
}

/// Inserts a root tenant on an existing app (the operator's `POST
/// /admin/tenants`): `trial`, pool 0, the app writing to pool 0.
pub async fn insert_tenant(tx: &mut Tx, app: &App, t: NewTenantRow<'_>, isolation_tier: &str) -> ApiResult<Tenant> {
    let sql = format!(
        "INSERT INTO tenant_tenant (tenant_id, app_id, org_id, display_name, isolation_tier, status, parent_tenant_id, \
         root_tenant_id, reseller_id, admin_pool_index, app_pool_index, region, brand_domain, module_subscriptions, created_at) \
         VALUES ($1, $2, $3, $4, $5, 'trial', $6, $7, $8, 0, $9, $10, $11, $12, $13) RETURNING {TENANT_COLUMNS}"
    );
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(t.tenant_id)
        .bind(&app.app_id)
        .bind(&app.org_id)
        .bind(t.display_name)
        .bind(isolation_tier)
        .bind(t.parent_tenant_id)
        .bind(t.root_tenant_id)
        .bind(t.reseller_id)
        .bind(json!({ app.app_id.as_str(): 0 }).to_string())
        .bind(t.region)
        .bind(t.brand_domain)
        .bind(t.module_subscriptions.to_string())
        .bind(db::now())
        .fetch_one(&mut **tx)
        .await?)
}

/// Where a tenant's data goes: its admin (audit) pool, its evidence pool,
/// each app's pool, its region, and the map's standing.
#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = AdminPoolMap)]
pub struct PoolMap {
    pub tenant_id: String,
    pub admin_pool_index: i64,
    pub evidence_pool_index: Option<i64>,
    /// The pool each app writes to, by app_id.
    #[sqlx(try_from = "String")]
    #[schema(value_type = HashMap<String, i64>)]
    pub app_pool_index: JsonText,
    pub region: Option<String>,
    /// `ACTIVE`, `MIGRATING` or `QUARANTINED`.
    pub status: String,
}

const POOL_MAP_COLUMNS: &str = "tenant_id, admin_pool_index, evidence_pool_index, app_pool_index, region, pool_status AS status";

/// A change of a tenant's pool map; `None` keeps the current value.
pub struct PoolMapChange<'a> {
    pub admin_pool_index: i64,
    pub region: &'a str,
    pub evidence_pool_index: Option<i64>,
    pub app_pool_index: Option<&'a Value>,
    pub status: Option<&'a str>,
}

/// Sets a tenant's pool map (the pools were checked by the caller); `None`
/// for an unknown tenant. The tenant's sandbox follows it.
pub async fn set_pool_map(tx: &mut Tx, tenant_id: &str, c: PoolMapChange<'_>) -> ApiResult<Option<PoolMap>> {
    let sql = format!(
        "UPDATE tenant_tenant SET admin_pool_index = $2, region = $3, evidence_pool_index = COALESCE($4, evidence_pool_index), \
         app_pool_index = COALESCE($5, app_pool_index), pool_status = COALESCE($6, pool_status) WHERE tenant_id = $1 RETURNING {POOL_MAP_COLUMNS}"
    );
    let map: Option<PoolMap> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(tenant_id)
        .bind(c.admin_pool_index)
        .bind(c.region)
        .bind(c.evidence_pool_index)
        .bind(c.app_pool_index.map(Value::to_string))
        .bind(c.status)
        .fetch_optional(&mut **tx)
        .await?;
    if map.is_some() {
        sqlx::query(
            "UPDATE tenant_tenant SET admin_pool_index = $2, region = $3, evidence_pool_index = COALESCE($4, evidence_pool_index), \
             pool_status = COALESCE($5, pool_status) WHERE sandbox_of = $1",
        )
        .bind(tenant_id)
        .bind(c.admin_pool_index)
        .bind(c.region)
        .bind(c.evidence_pool_index)
        .bind(c.status)
        .execute(&mut **tx)
        .await?;
    }
    Ok(map)
}

pub fn valid_app_id(s: &str) -> bool {
    (1..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

/// A new child tenant of the caller's tenant.
#[derive(Deserialize, ToSchema)]
struct NewTenant {
    /// The new app's id: 1-64 letters, digits, `-`, `_` or `.`, unique on
    /// the platform.
    #[schema(pattern = r"^[A-Za-z0-9._-]{1,64}$")]
    app_id: String,
    display_name: String,
    region: Option<String>,
    /// When given, the caller's tenant (the new tenant is always its child).
    #[schema(format = "uuid")]
    parent_tenant_id: Option<String>,
    brand_domain: Option<String>,
    reseller_id: Option<String>,
    /// `[]` when absent.
    module_subscriptions: Option<Vec<String>>,
    /// Refused (400): people are bound with `POST /api/memberships`.
    #[schema(ignore)]
    person_id: Option<Value>,
}

/// Creates a child tenant of the caller's tenant, with its own app row.
#[utoipa::path(post, path = "/api/tenants", tag = "sdk-tenant", request_body = NewTenant,
    extensions(("x-concurrency" = json!({"outcome": "one-wins", "body": {"app_id": "a-{unique}", "display_name": "Races child"}}))),
    responses((status = 201, description = "the tenant", body = Data<Tenant>)))]
async fn create_tenant(State(state): State<AppState>, TenantCaller(ctx): TenantCaller, body: Body<NewTenant>) -> ApiResult<Created<Tenant>> {
    keys::require_grant(&state, &ctx, "tenant.tenant.write").await?;
    let body = body.checked()?;
    let mut check = Check::new();
    if body.person_id.is_some() {
        check.fail("person_id is not accepted: bind people with POST /api/memberships");
    }
    static APP_ID: Pattern = Pattern::of::<NewTenant>("app_id");
    let app_id = body.app_id.clone();
    if !APP_ID.is_match(&app_id) {
        check.fail("app_id must be 1-64 characters of letters, digits, '-', '_' or '.'");
    }
    check.finish()?;
    let display_name = body.display_name.trim().to_string();
    let modules = json!(body.module_subscriptions.clone().unwrap_or_default());
    if let Some(p) = canonical_uuid_opt(&body.parent_tenant_id) {
        ctx.check_tenant(Some(&p))?;
    }
    let mut tx = state.db.begin().await?;
    let root = find(&mut *tx, &ctx.tenant_id).await?.ok_or(sqlx::Error::RowNotFound)?.root_tenant_id;
    let (tenant, _) = insert_app_and_tenant(
        &mut tx,
        NewTenantRow {
            tenant_id: &db::new_id(),
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
    // Recorded in the parent's chain, where the creator acts.
    audit::record(
        &mut tx,
        &ctx,
        events::TENANT_CREATED,
        json!({
            "tenant_id": tenant.tenant_id, "parent_tenant_id": ctx.tenant_id, "org_id": ctx.org_id, "app_id": app_id,
            "status": tenant.status, "isolation_tier": tenant.isolation_tier,
        }),
    )
    .await?;
    tx.commit().await?;
    Ok(created(tenant))
}

/// The target tenant of a membership request: the caller's own, or a
/// direct child of it (a parent tenant administers its children).
async fn target_tenant(tx: &mut Tx, ctx: &TenantCtx, claimed: Option<String>) -> ApiResult<Tenant> {
    let tenant_id = claimed.unwrap_or_else(|| ctx.tenant_id.clone());
    if uuid::Uuid::parse_str(&tenant_id).is_err() {
        return Err(ApiError::invalid("tenant_id must be a UUID"));
    }
    let Some(tenant) = find(&mut **tx, &tenant_id).await? else { return Err(ApiError::TenantMismatch) };
    if tenant.tenant_id != ctx.tenant_id && tenant.parent_tenant_id.as_deref() != Some(ctx.tenant_id.as_str()) {
        return Err(ApiError::TenantMismatch);
    }
    Ok(tenant)
}

/// A membership to admit: who, where, and with which role (the platform
/// `member` template when none).
struct NewMember<'a> {
    person_id: &'a str,
    tenant: &'a Tenant,
    bu_id: Option<&'a str>,
    role_template_id: Option<String>,
}

/// A new membership and the person's first persona in it.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = AdmittedMembership)]
struct Admitted {
    #[serde(flatten)]
    membership: Membership,
    persona_id: String,
}

/// Inserts a membership and the person's first persona in it.
async fn admit(state: &AppState, ctx: &TenantCtx, tx: &mut Tx, m: NewMember<'_>) -> ApiResult<Admitted> {
    let NewMember { person_id, tenant, bu_id, role_template_id } = m;
    let (tenant_id, app_id) = (tenant.tenant_id.as_str(), tenant.app_id.as_str());
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
    let membership = insert_membership(tx, person_id, tenant_id, bu_id, &template).await?;
    let persona = personas::insert(tx, &state.master, tenant_id, Some(&membership.membership_id), personas::PersonaKind::Human, Some(&template), None).await?;
    let payload = json!({
        "membership_id": membership.membership_id, "tenant_id": tenant_id, "person_id": person_id, "role_template_id": template, "persona_id": persona.persona_id,
    });
    audit::record(tx, ctx, events::MEMBERSHIP_CREATED, payload).await?;
    Ok(Admitted { membership, persona_id: persona.persona_id })
}

/// A new membership of an existing person.
#[derive(Deserialize, ToSchema)]
struct NewMembership {
    #[schema(format = "uuid")]
    person_id: String,
    /// The caller's tenant (when absent) or a direct child of it.
    #[schema(format = "uuid")]
    tenant_id: Option<String>,
    bu_id: Option<String>,
    /// A role template of the tenant's app; the platform `member` template
    /// when absent.
    #[schema(format = "uuid")]
    role_template_id: Option<String>,
}

/// Binds an existing person to the caller's tenant or a child tenant.
#[utoipa::path(post, path = "/api/memberships", tag = "sdk-tenant", request_body = NewMembership,
    extensions(("x-concurrency" = json!({"outcome": "one-wins", "given": [["POST", "/api/auth/register", {"email": "m-{unique}@races.example.com", "password": "correct horse battery", "display_name": "Twin"}]], "body": {"person_id": "{person_id}"}}))),
    responses((status = 201, description = "the membership and its persona", body = Data<Admitted>)))]
async fn create_membership(
    State(state): State<AppState>,
    TenantCaller(ctx): TenantCaller,
    TargetTenantBody(body): TargetTenantBody<NewMembership>,
) -> ApiResult<Created<Admitted>> {
    keys::require_grant(&state, &ctx, "membership.membership.write").await?;
    let person = canonical_uuid(&body.person_id);
    let template = canonical_uuid_opt(&body.role_template_id);
    let mut tx = state.db.begin().await?;
    let tenant = target_tenant(&mut tx, &ctx, Check::optional(&body.tenant_id)).await?;
    if !auth::person_exists(&mut *tx, &person).await? {
        return Err(ApiError::invalid("person_id does not name a person"));
    }
    let bu_id = Check::optional(&body.bu_id);
    let new = NewMember { person_id: &person, tenant: &tenant, bu_id: bu_id.as_deref(), role_template_id: template };
    let admitted = admit(&state, &ctx, &mut tx, new).await?;
    tx.commit().await?;
    Ok(created(admitted))
}

/// A membership of the calling person, with its tenant's and app's names,
/// its role's name and whether the person has an identity in the app.
#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = PersonMembership)]
struct MembershipEntry {
    membership_id: String,
    tenant_id: String,
    tenant_display_name: String,
    app_id: String,
    app_display_name: String,
    bu_id: Option<String>,
    #[serde(skip)]
    role_template_id: Option<String>,
    /// The name of the membership's role template.
    // Filled from roles, which owns the templates.
    #[sqlx(skip)]
    role_template_name: Option<String>,
    #[sqlx(try_from = "i64")]
    has_app_identity: Flag,
    joined_at: Timestamp,
    status: MembershipStatus,
}

/// The calling person's memberships, across tenants, oldest first.
///
/// Takes a person's token; a key has no memberships (403).
#[utoipa::path(get, path = "/api/memberships", tag = "sdk-tenant",
    responses((status = 200, description = "the memberships", body = Data<Vec<MembershipEntry>>)))]
async fn list_memberships(State(state): State<AppState>, Person(claims): Person) -> ApiResult<Data<Vec<MembershipEntry>>> {
    let mut entries: Vec<MembershipEntry> = sqlx::query_as(
        "SELECT m.membership_id, m.tenant_id, t.display_name AS tenant_display_name, t.app_id, a.display_name AS app_display_name, \
         m.bu_id, m.role_template_id, m.joined_at, m.status, \
         (SELECT COUNT(*) FROM identity_app_identity i WHERE i.person_id = m.person_id AND i.app_id = t.app_id) AS has_app_identity \
         FROM tenant_membership m JOIN tenant_tenant t ON t.tenant_id = m.tenant_id JOIN tenant_app a ON a.app_id = t.app_id \
         WHERE m.person_id = $1 ORDER BY m.joined_at",
    )
    .bind(&claims.sub)
    .fetch_all(&state.db.read)
    .await?;
    let ids: Vec<&str> = entries.iter().filter_map(|e| e.role_template_id.as_deref()).collect();
    let names = roles::template_names(&state.db.read, &ids).await?;
    for e in &mut entries {
        e.role_template_name = e.role_template_id.as_ref().and_then(|id| names.get(id).cloned());
    }
    Ok(ok(entries))
}

/// A person's identity in an app.
#[derive(Debug, FromRow, Serialize, ToSchema)]
pub struct AppIdentity {
    pub app_identity_id: String,
    pub person_id: String,
    pub app_id: String,
    pub created_at: Timestamp,
}

const APP_IDENTITY_COLUMNS: &str = "app_identity_id, person_id, app_id, created_at";

/// The app identity of (person, app), if there is one.
async fn app_identity_of(tx: &mut Tx, person_id: &str, app_id: &str) -> ApiResult<Option<AppIdentity>> {
    let sql = format!("SELECT {APP_IDENTITY_COLUMNS} FROM identity_app_identity WHERE person_id = $1 AND app_id = $2");
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(person_id).bind(app_id).fetch_optional(&mut **tx).await?)
}

/// A new app identity.
#[derive(Deserialize, ToSchema)]
struct NewAppIdentity {
    #[schema(format = "uuid")]
    person_id: String,
    /// The caller's tenant's app.
    app_id: String,
}

/// Creates a person's identity in the caller's tenant's app.
#[utoipa::path(post, path = "/api/app-identities", tag = "sdk-tenant", request_body = NewAppIdentity,
    extensions(("x-concurrency" = json!({"outcome": "one-wins", "events": 0, "given": [["GET", "/api/app-identities/{app_identity_id}", null], ["POST", "/api/auth/register", {"email": "m-{unique}@races.example.com", "password": "correct horse battery", "display_name": "Twin"}]], "body": {"person_id": "{person_id}", "app_id": "{app_id}"}}))),
    responses((status = 201, description = "the app identity", body = Data<AppIdentity>)))]
async fn create_app_identity(State(state): State<AppState>, TenantCaller(ctx): TenantCaller, body: Body<NewAppIdentity>) -> ApiResult<Created<AppIdentity>> {
    keys::require_grant(&state, &ctx, "app-identity.app-identity.write").await?;
    let body = body.checked()?;
    let person = canonical_uuid(&body.person_id);
    let app_id = body.app_id.trim().to_string();
    if app_id != ctx.app_id {
        return Err(ApiError::invalid("app_id must be the app_id of the caller's tenant"));
    }
    let mut tx = state.db.begin().await?;
    if !auth::person_exists(&mut *tx, &person).await? {
        return Err(ApiError::invalid("person_id does not name a person"));
    }
    // The unique (person, app) decides: of two creations at once, one is
    // made and the other is 409.
    let sql = format!(
        "INSERT INTO identity_app_identity (app_identity_id, person_id, app_id, created_at) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (person_id, app_id) DO NOTHING RETURNING {APP_IDENTITY_COLUMNS}"
    );
    let identity: Option<AppIdentity> =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(db::new_id()).bind(&person).bind(&app_id).bind(db::now()).fetch_optional(&mut *tx).await?;
    let identity = identity.ok_or_else(|| ApiError::Conflict("the person already has an app identity for this app".into()))?;
    tx.commit().await?;
    Ok(created(identity))
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
    Ok(app_identity_of(tx, person_id, app_id).await?.ok_or(sqlx::Error::RowNotFound)?.app_identity_id)
}

/// An app identity of a member of the caller's tenant.
///
/// An app identity is visible only to tenants its person is a member of
/// (RULINGS 1: the lookup compares the tenant).
#[utoipa::path(get, path = "/api/app-identities/{app_identity_id}", tag = "sdk-persona",
    params(("app_identity_id" = String, Path, description = "the app identity")),
    responses((status = 200, description = "the app identity", body = Data<AppIdentity>)))]
async fn get_app_identity(State(state): State<AppState>, TenantCaller(ctx): TenantCaller, Path(id): Path<String>) -> ApiResult<Data<AppIdentity>> {
    let id = path_id(&id)?.to_string();
    Ok(ok(visible_app_identity(&state.db.read, &ctx.tenant_id, &id).await?.ok_or(ApiError::NotFound)?))
}

/// The app identity `app_identity_id` if `tenant_id` may see it: its
/// person is a member of the tenant (RULINGS 1).
pub async fn visible_app_identity<'e, E>(exec: E, tenant_id: &str, app_identity_id: &str) -> ApiResult<Option<AppIdentity>>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    Ok(sqlx::query_as(
        "SELECT i.app_identity_id, i.person_id, i.app_id, i.created_at FROM identity_app_identity i \
         WHERE i.app_identity_id = $1 AND EXISTS (SELECT 1 FROM tenant_membership m WHERE m.person_id = i.person_id AND m.tenant_id = $2)",
    )
    .bind(app_identity_id)
    .bind(tenant_id)
    .fetch_optional(exec)
    .await?)
}

/// A new membership of an app identity's person.
#[derive(Deserialize, ToSchema)]
#[schema(as = NewAppIdentityMembership)]
struct NewIdentityMembership {
    /// The caller's tenant (when absent) or a direct child of it, on the
    /// identity's app.
    #[schema(format = "uuid")]
    tenant_id: Option<String>,
    bu_id: Option<String>,
    /// A role template of the tenant's app; the platform `member` template
    /// when absent.
    #[schema(format = "uuid")]
    role_template_id: Option<String>,
}

/// Admits the person of an app identity into a tenant of that app.
#[utoipa::path(post, path = "/api/app-identities/{app_identity_id}/memberships", tag = "sdk-tenant",
    params(("app_identity_id" = String, Path, description = "the app identity")), request_body = NewIdentityMembership,
    extensions(("x-concurrency" = json!({"outcome": "one-wins", "given": [["GET", "/api/app-identities/{app_identity_id}", null], ["POST", "/api/auth/register", {"email": "m-{unique}@races.example.com", "password": "correct horse battery", "display_name": "Twin"}], ["POST", "/api/app-identities", {"person_id": "{person_id}", "app_id": "{app_id}"}]], "body": {}}))),
    responses((status = 201, description = "the membership and its persona", body = Data<Admitted>)))]
async fn membership_for_app_identity(
    State(state): State<AppState>,
    TenantCaller(ctx): TenantCaller,
    Path(id): Path<String>,
    TargetTenantBody(body): TargetTenantBody<NewIdentityMembership>,
) -> ApiResult<Created<Admitted>> {
    keys::require_grant(&state, &ctx, "app-identity.app-identity.write").await?;
    let id = path_id(&id)?.to_string();
    let template = canonical_uuid_opt(&body.role_template_id);
    let mut tx = state.db.begin().await?;
    let tenant = target_tenant(&mut tx, &ctx, Check::optional(&body.tenant_id)).await?;
    let sql = format!("SELECT {APP_IDENTITY_COLUMNS} FROM identity_app_identity WHERE app_identity_id = $1");
    let identity: AppIdentity = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&id).fetch_optional(&mut *tx).await?.ok_or(ApiError::NotFound)?;
    if identity.app_id != tenant.app_id {
        // Another app's identity is none of this tenant's business.
        return Err(ApiError::NotFound);
    }
    let bu_id = Check::optional(&body.bu_id);
    let new = NewMember { person_id: &identity.person_id, tenant: &tenant, bu_id: bu_id.as_deref(), role_template_id: template };
    let admitted = admit(&state, &ctx, &mut tx, new).await?;
    tx.commit().await?;
    Ok(created(admitted))
}

/// The tenant `tenant_id` if the caller administers it: the caller's own
/// tenant or a direct child of it (not its sandbox); `None` otherwise, which
/// every route answers 404.
async fn administered<'e, E>(exec: E, ctx: &TenantCtx, tenant_id: &str) -> ApiResult<Option<Tenant>>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let sql = format!("SELECT {TENANT_COLUMNS} FROM tenant_tenant WHERE tenant_id = $1 AND (tenant_id = $2 OR (parent_tenant_id = $2 AND sandbox_of IS NULL))");
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(&ctx.tenant_id).fetch_optional(exec).await?)
}

/// The caller's tenant or one of its children.
#[utoipa::path(get, path = "/api/tenants/{tenant_id}", tag = "sdk-tenant",
    params(("tenant_id" = String, Path, description = "the caller's tenant or a direct child of it")),
    responses((status = 200, description = "the tenant", body = Data<Tenant>)))]
async fn get_tenant(State(state): State<AppState>, TenantCaller(ctx): TenantCaller, Path(id): Path<String>) -> ApiResult<Data<Tenant>> {
    let id = path_id(&id)?.to_string();
    Ok(ok(administered(&state.db.read, &ctx, &id).await?.ok_or(ApiError::NotFound)?))
}

const CHILDREN: Listing = Listing {
    table: "tenant_tenant",
    columns: TENANT_COLUMNS,
    filter: "parent_tenant_id = $1 AND sandbox_of IS NULL AND ($2 = '' OR status = $2)",
    order: "created_at DESC, tenant_id DESC",
};

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct TenantFilter {
    /// Only tenants in this status.
    #[param(inline)]
    status: Option<TenantStatus>,
}

/// The child tenants of the caller's tenant, newest first (its sandbox is
/// not one of them).
#[utoipa::path(get, path = "/api/tenants", tag = "sdk-tenant", params(TenantFilter, Page),
    responses((status = 200, description = "one page of child tenants", body = ListOf<Tenant>)))]
async fn list_tenants(
    State(state): State<AppState>,
    TenantCaller(ctx): TenantCaller,
    page: Page,
    Params(q): Params<TenantFilter>,
) -> ApiResult<ListOf<Tenant>> {
    let status = q.status.map_or("", TenantStatus::as_str);
    page.list::<Tenant>(&state.db.read, &CHILDREN, &[&ctx.tenant_id, status]).await
}

/// A change of a tenant: what is absent stays.
#[derive(Deserialize, ToSchema)]
#[schema(as = TenantChange)]
struct TenantChange {
    #[schema(min_length = 1, max_length = 200)]
    display_name: Option<String>,
    #[schema(min_length = 1, max_length = 253)]
    brand_domain: Option<String>,
    /// Replaces the tenant's module subscriptions: at most 100 names of
    /// 1-128 characters.
    #[schema(max_items = 100)]
    module_subscriptions: Option<Vec<String>>,
}

/// Changes the display name, brand domain or module subscriptions of the
/// caller's tenant or a child of it (what is absent stays; at least one is
/// given). The tenant's sandbox follows its name and subscriptions.
#[utoipa::path(patch, path = "/api/tenants/{tenant_id}", tag = "sdk-tenant", request_body = TenantChange,
    params(("tenant_id" = String, Path, description = "the caller's tenant or a direct child of it")),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/tenants", { "app_id": "a-{unique}", "display_name": "Races child" }]],
        "body": { "display_name": "Races child, renamed", "module_subscriptions": ["crm"] } }))),
    responses((status = 200, description = "the tenant", body = Data<Tenant>)))]
async fn update_tenant(
    State(state): State<AppState>,
    TenantCaller(ctx): TenantCaller,
    Path(id): Path<String>,
    body: Body<TenantChange>,
) -> ApiResult<Data<Tenant>> {
    keys::require_grant(&state, &ctx, "tenant.tenant.write").await?;
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    administered(&mut *tx, &ctx, &id).await?.ok_or(ApiError::NotFound)?;
    let body = body.checked()?;
    let mut check = Check::new();
    let display_name = body.display_name.as_deref().map(str::trim);
    let brand_domain = body.brand_domain.as_deref().map(str::trim);
    if let Some(m) = &body.module_subscriptions
        && m.iter().any(|s| s.trim().is_empty() || s.chars().count() > 128)
    {
        check.fail("module_subscriptions must be names of 1-128 characters");
    }
    if display_name.is_none() && brand_domain.is_none() && body.module_subscriptions.is_none() {
        check.fail("give at least one of display_name, brand_domain, module_subscriptions");
    }
    check.finish()?;
    let modules = body.module_subscriptions.as_ref().map(|m| json!(m.iter().map(|s| s.trim()).collect::<Vec<_>>()).to_string());
    let sql = format!(
        "UPDATE tenant_tenant SET display_name = COALESCE($2, display_name), brand_domain = COALESCE($3, brand_domain), \
         module_subscriptions = COALESCE($4, module_subscriptions) WHERE tenant_id = $1 RETURNING {TENANT_COLUMNS}"
    );
    let tenant: Tenant = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&id).bind(display_name).bind(brand_domain).bind(&modules).fetch_one(&mut *tx).await?;
    sqlx::query(
        "UPDATE tenant_tenant SET display_name = COALESCE($2 || ' (sandbox)', display_name), module_subscriptions = COALESCE($3, module_subscriptions) \
         WHERE sandbox_of = $1",
    )
    .bind(&id)
    .bind(display_name)
    .bind(&modules)
    .execute(&mut *tx)
    .await?;
    let payload = json!({
        "tenant_id": id, "display_name": display_name, "brand_domain": brand_domain,
        "module_subscriptions": body.module_subscriptions.is_some().then(|| tenant.module_subscriptions.0.clone()),
    });
    audit::record(&mut tx, &ctx, events::TENANT_UPDATED, payload).await?;
    tx.commit().await?;
    Ok(ok(tenant))
}

const MEMBERS: Listing = Listing {
    table: "tenant_membership",
    columns: MEMBERSHIP_COLUMNS,
    filter: "tenant_id = $1 AND ($2 = '' OR bu_id = $2) AND ($3 = '' OR role_template_id = $3) AND ($4 = '' OR status = $4)",
    order: "joined_at DESC, membership_id DESC",
};

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct MemberFilter {
    /// Only members of this business unit.
    #[param(max_length = 200)]
    bu_id: Option<String>,
    /// Only members holding this role.
    #[param(format = "uuid")]
    role_template_id: Option<String>,
    /// Only memberships in this status.
    #[param(inline)]
    status: Option<MembershipStatus>,
}

/// The memberships of the caller's tenant or of a child of it, newest first.
#[utoipa::path(get, path = "/api/tenants/{tenant_id}/memberships", tag = "sdk-tenant", params(("tenant_id" = String, Path, description = "the caller's tenant or a direct child of it"), MemberFilter, Page),
    responses((status = 200, description = "one page of memberships", body = ListOf<Membership>)))]
async fn list_tenant_memberships(
    State(state): State<AppState>,
    TenantCaller(ctx): TenantCaller,
    Path(id): Path<String>,
    page: Page,
    q: Result<Params<MemberFilter>, ApiError>,
) -> ApiResult<ListOf<Membership>> {
    let id = path_id(&id)?.to_string();
    administered(&state.db.read, &ctx, &id).await?.ok_or(ApiError::NotFound)?;
    let Params(q) = q?;
    let bu_id = Check::optional(&q.bu_id).unwrap_or_default();
    let template = canonical_uuid_opt(&q.role_template_id).unwrap_or_default();
    let status = q.status.map_or("", MembershipStatus::as_str);
    page.list::<Membership>(&state.db.read, &MEMBERS, &[&id, &bu_id, &template, status]).await
}

/// The membership `membership_id` of a tenant the caller administers (its
/// own or a direct child).
async fn administered_membership(tx: &mut Tx, ctx: &TenantCtx, membership_id: &str) -> ApiResult<Membership> {
    let sql = format!(
        "SELECT {MEMBERSHIP_COLUMNS} FROM tenant_membership m WHERE membership_id = $1 AND (tenant_id = $2 OR EXISTS \
         (SELECT 1 FROM tenant_tenant t WHERE t.tenant_id = m.tenant_id AND t.parent_tenant_id = $2 AND t.sandbox_of IS NULL))"
    );
    let found: Option<Membership> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(membership_id).bind(&ctx.tenant_id).fetch_optional(&mut **tx).await?;
    found.ok_or(ApiError::NotFound)
}

/// Containment for a change to a member: the permissions the member's
/// active personas hold now must each be held by the caller too (nobody
/// takes away or rewrites an authority above their own).
async fn contain_member(state: &AppState, tx: &mut Tx, ctx: &TenantCtx, membership_id: &str) -> ApiResult<()> {
    let mut held = Vec::new();
    for persona in personas::active_of_membership(&mut **tx, membership_id).await? {
        held.extend(keys::permissions(state, &persona).await?.iter().cloned());
    }
    held.sort();
    held.dedup();
    roles::contain(state, ctx, &held, "the member's current roles").await
}

/// Removes a person from a tenant: the membership is `revoked` and every
/// persona of it is revoked with it, so the person's tokens for the tenant
/// hold no permission from the next request on, on every replica; they
/// can no longer log in to it. The tenant's last owner cannot be removed
/// (409). Repeating it answers the same. Only a member whose roles the
/// caller holds can be removed (403 otherwise). A revoked person may be
/// admitted again with `POST /api/memberships`.
#[utoipa::path(post, path = "/api/memberships/{membership_id}/revoke", tag = "sdk-tenant",
    params(("membership_id" = String, Path, description = "the membership")),
    extensions(("x-concurrency" = json!({ "outcome": "same-answer", "given": [["POST", "/api/auth/register", { "email": "m-{unique}@races.example.com", "password": "correct horse battery", "display_name": "Twin" }], ["POST", "/api/memberships", { "person_id": "{person_id}" }]] }))),
    responses((status = 200, description = "the membership, revoked", body = Data<Membership>),
        (status = 409, description = "Conflict: the membership holds the tenant's last owner", body = ErrorBody)))]
async fn revoke_membership(State(state): State<AppState>, TenantCaller(ctx): TenantCaller, Path(id): Path<String>) -> ApiResult<Data<Membership>> {
    keys::require_grant(&state, &ctx, "membership.membership.write").await?;
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    let found = administered_membership(&mut tx, &ctx, &id).await?;
    let tenant_id = found.tenant_id;
    // Changes to a tenant's owners queue one after another, so two removals
    // at once cannot each leave the other as the last owner.
    personas::queue_owner_changes(&mut tx, &tenant_id).await?;
    contain_member(&state, &mut tx, &ctx, &id).await?;
    personas::keep_an_owner(&mut tx, &tenant_id, personas::Owners::OfMembership(&id)).await?;
    let sql = format!(
        "UPDATE tenant_membership SET status = 'revoked' WHERE membership_id = $1 AND tenant_id = $2 AND status = 'active' RETURNING {MEMBERSHIP_COLUMNS}"
    );
    let moved: Option<Membership> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&id).bind(&tenant_id).fetch_optional(&mut *tx).await?;
    let membership = match moved {
        Some(m) => {
            let revoked = personas::revoke_of_membership(&mut tx, &id).await?;
            let payload = json!({ "membership_id": id, "tenant_id": tenant_id, "person_id": m.person_id, "persona_ids": revoked });
            audit::record(&mut tx, &ctx, events::MEMBERSHIP_REVOKED, payload).await?;
            m
        }
        // Revoked already (by a repeat, or by a removal at the same time):
        // the membership as that one left it.
        None => find_membership(&mut *tx, &tenant_id, &id).await?.ok_or(ApiError::NotFound)?,
    };
    tx.commit().await?;
    // The revoked personas' cached permissions go on every replica.
    state.invalidate(hub_kernel::state::Invalidation::Roles).await;
    Ok(ok(membership))
}

/// A change of a membership: what is absent stays.
#[derive(Deserialize, ToSchema)]
#[schema(as = MembershipChange)]
struct MembershipChange {
    #[schema(min_length = 1, max_length = 200)]
    bu_id: Option<String>,
    /// A role template of the tenant's app, conferring only permissions
    /// the caller holds. The membership's personas whose primary role was
    /// the membership's role take the new one.
    #[schema(format = "uuid")]
    role_template_id: Option<String>,
}

/// Changes a member's business unit or role (at least one is given). A
/// change of role takes effect on the next request; the tenant's last owner
/// cannot be demoted (409), a revoked membership cannot be changed (409),
/// and the caller must hold both the member's current roles and the new
/// role (403 otherwise).
#[utoipa::path(patch, path = "/api/memberships/{membership_id}", tag = "sdk-tenant", request_body = MembershipChange,
    params(("membership_id" = String, Path, description = "the membership")),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/auth/register", { "email": "m-{unique}@races.example.com", "password": "correct horse battery", "display_name": "Twin" }], ["POST", "/api/memberships", { "person_id": "{person_id}" }]],
        "body": { "bu_id": "races" } }))),
    responses((status = 200, description = "the membership", body = Data<Membership>),
        (status = 409, description = "Conflict: the membership is revoked, or holds the tenant's last owner", body = ErrorBody)))]
async fn update_membership(
    State(state): State<AppState>,
    TenantCaller(ctx): TenantCaller,
    Path(id): Path<String>,
    body: Body<MembershipChange>,
) -> ApiResult<Data<Membership>> {
    keys::require_grant(&state, &ctx, "membership.membership.write").await?;
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    let tenant_id = administered_membership(&mut tx, &ctx, &id).await?.tenant_id;
    personas::queue_owner_changes(&mut tx, &tenant_id).await?;
    // Read again behind the queue: the role as the last change left it.
    let found = find_membership(&mut *tx, &tenant_id, &id).await?.ok_or(ApiError::NotFound)?;
    let body = body.checked()?;
    let mut check = Check::new();
    let bu_id = body.bu_id.as_deref().map(str::trim);
    let template = canonical_uuid_opt(&body.role_template_id);
    if bu_id.is_none() && template.is_none() {
        check.fail("give at least one of bu_id, role_template_id");
    }
    check.finish()?;
    let tenant = find(&mut *tx, &found.tenant_id).await?.ok_or(ApiError::NotFound)?;
    let changed_role = template.as_ref().filter(|t| found.role_template_id.as_ref() != Some(*t));
    if let Some(t) = changed_role {
        if !roles::visible_template(&mut *tx, &tenant.tenant_id, &tenant.app_id, t).await? {
            return Err(ApiError::invalid("role_template_id does not name a role template of the tenant's app"));
        }
        // What the member loses and what they gain: the caller holds both.
        let mut confers = roles::template_permissions(&state, &tenant.tenant_id, t).await?;
        if let Some(old) = &found.role_template_id {
            confers.extend(roles::template_permissions(&state, &tenant.tenant_id, old).await?);
        }
        roles::contain(&state, &ctx, &confers, "the membership's role").await?;
        // Demoting an owner: the tenant keeps one.
        if !roles::is_owner_template(&mut tx, t).await?
            && let Some(old) = &found.role_template_id
        {
            personas::keep_an_owner(&mut tx, &tenant.tenant_id, personas::Owners::OfMembershipWithRole(&id, old)).await?;
        }
    }
    let sql = format!(
        "UPDATE tenant_membership SET bu_id = COALESCE($3, bu_id), role_template_id = COALESCE($4, role_template_id) \
         WHERE membership_id = $1 AND tenant_id = $2 AND status = 'active' RETURNING {MEMBERSHIP_COLUMNS}"
    );
    let moved: Option<Membership> =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&id).bind(&tenant.tenant_id).bind(bu_id).bind(&template).fetch_optional(&mut *tx).await?;
    let Some(membership) = moved else {
        return Err(ApiError::Conflict("the membership is revoked: only an active membership can be changed".into()));
    };
    if let (Some(new), Some(old)) = (changed_role, &found.role_template_id) {
        personas::reassign_primary(&mut tx, &id, old, new).await?;
    }
    let payload = json!({ "membership_id": id, "tenant_id": tenant.tenant_id, "bu_id": bu_id, "role_template_id": changed_role });
    audit::record(&mut tx, &ctx, events::MEMBERSHIP_UPDATED, payload).await?;
    tx.commit().await?;
    if changed_role.is_some() {
        state.invalidate(hub_kernel::state::Invalidation::Roles).await;
    }
    Ok(ok(membership))
}
