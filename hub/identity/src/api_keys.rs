//! sdk-api-keys: applications (API-key client registrations) and their keys:
//! issue, list, rotate, revoke, disable; and the key rows the gate's
//! `KeyDirectory` reads (verification and rate limits live in the gate).
//!
//! Only a SHA-256 hash of a key is stored. Credential management takes a
//! human tenant JWT and refuses API keys (Authentication 4).
//!
//! This module owns credential_application and credential_api_key: no other
//! module's SQL names them. A key's synthetic persona and a test key's
//! sandbox tenant come from personas and tenancy.

use std::sync::Arc;

use crate::{personas, roles, tenancy};
use hub_kernel::prelude::*;
use hub_kernel::{
    crypto,
    gate::{
        HumanTenant,
        keys::{self, KeyRecord},
    },
    state::Invalidation,
};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_application, list_applications))
        .routes(routes!(get_application, update_application))
        .routes(routes!(issue, list_keys))
        .routes(routes!(disable_application))
        .routes(routes!(enable_application))
        .routes(routes!(issue_for_tenant))
        .routes(routes!(get_key, update_key))
        .routes(routes!(rotate))
        .routes(routes!(revoke))
}

/// A new API key of an application.
#[derive(Deserialize, ToSchema)]
struct NewApiKey {
    name: String,
    /// Scopes the caller holds, each `<domain>.<resource>.<action>` or a tail
    /// wildcard (`crm.*`, `crm.contact.*`, `*`).
    #[schema(min_items = 1, pattern = r"^(?:\*|[a-z0-9_-]+\.\*|[a-z0-9_-]+\.[a-z0-9_-]+\.\*|[a-z0-9_-]+\.[a-z0-9_-]+\.[a-z0-9_-]+)$")]
    scopes: Vec<String>,
    /// Requests per minute (beyond it: 429 with `Retry-After`); no limit when absent.
    #[schema(minimum = 1)]
    rate_limit_rpm: Option<i64>,
    /// RFC 3339, in the future; the key never expires when absent.
    #[schema(format = DateTime)]
    expires_at: Option<String>,
}

/// A new API key of the caller's tenant.
#[derive(Deserialize, ToSchema)]
struct NewTenantApiKey {
    /// The caller's tenant (required: the key is issued in the tenant it
    /// names, which must be the caller's).
    #[schema(format = "uuid")]
    tenant_id: String,
    /// An application of the tenant; when absent, the tenant's `default`
    /// live application (created on first use).
    #[schema(format = "uuid")]
    application_id: Option<String>,
    name: String,
    /// Scopes the caller holds, each `<domain>.<resource>.<action>` or a tail
    /// wildcard (`crm.*`, `crm.contact.*`, `*`).
    #[schema(min_items = 1, pattern = r"^(?:\*|[a-z0-9_-]+\.\*|[a-z0-9_-]+\.[a-z0-9_-]+\.\*|[a-z0-9_-]+\.[a-z0-9_-]+\.[a-z0-9_-]+)$")]
    scopes: Vec<String>,
    /// Requests per minute (beyond it: 429 with `Retry-After`); no limit when absent.
    #[schema(minimum = 1)]
    rate_limit_rpm: Option<i64>,
    /// RFC 3339, in the future; the key never expires when absent.
    #[schema(format = DateTime)]
    expires_at: Option<String>,
}

/// The gate's key lookup: a key with its application's status and
/// environment and its tenant's context. It is the one query here that
/// names a table of another module (tenant_tenant, owned by tenancy): it
/// runs whenever the gate meets a key it has not cached, on the request's
/// own path, and asking tenancy for the tenant would add a second read to
/// every such request.
macro_rules! key_select {
    () => {
        "SELECT k.key_id, k.key_hash, k.application_id, k.tenant_id, k.prefix, k.last4, k.scopes, \
    k.rate_limit_rpm, k.expires_at, k.status, k.synthetic_persona_id, k.rotated_at, a.status AS application_status, a.environment, \
    t.app_id, t.org_id, t.parent_tenant_id, t.root_tenant_id, t.reseller_id, t.admin_pool_index, t.app_pool_index \
    FROM credential_api_key k JOIN credential_application a ON a.application_id = k.application_id \
    JOIN tenant_tenant t ON t.tenant_id = k.tenant_id"
    };
}

/// A row of `key_select!`, turned into the gate's `KeyRecord`.
#[derive(Debug, FromRow)]
struct KeyRow {
    key_id: String,
    key_hash: String,
    application_id: String,
    tenant_id: String,
    prefix: String,
    last4: String,
    scopes: String,
    rate_limit_rpm: Option<i64>,
    expires_at: Option<String>,
    status: String,
    synthetic_persona_id: String,
    rotated_at: Option<String>,
    application_status: String,
    environment: String,
    app_id: String,
    org_id: String,
    parent_tenant_id: Option<String>,
    root_tenant_id: Option<String>,
    reseller_id: Option<String>,
    admin_pool_index: i64,
    #[sqlx(try_from = "String")]
    app_pool_index: JsonText,
}

impl From<KeyRow> for KeyRecord {
    fn from(r: KeyRow) -> Self {
        KeyRecord {
            scopes: scope_list(&r.scopes),
            expires_at: r.expires_at.as_deref().and_then(db::parse_time),
            app_pool_index: r.app_pool_index.0,
            key_id: r.key_id,
            key_hash: r.key_hash,
            application_id: r.application_id,
            tenant_id: r.tenant_id,
            app_id: r.app_id,
            org_id: r.org_id,
            prefix: r.prefix,
            last4: r.last4,
            rate_limit_rpm: r.rate_limit_rpm,
            status: r.status,
            application_status: r.application_status,
            environment: r.environment,
            synthetic_persona_id: r.synthetic_persona_id,
            parent_tenant_id: r.parent_tenant_id,
            root_tenant_id: r.root_tenant_id,
            reseller_id: r.reseller_id,
            admin_pool_index: r.admin_pool_index,
            rotated_at: r.rotated_at,
        }
    }
}

/// A key's scopes, stored as a JSON array of strings.
fn scope_list(text: &str) -> Vec<String> {
    serde_json::from_str(text).unwrap_or_default()
}

/// The key whose secret hashes to `key_hash` (the gate's lookup).
pub async fn by_hash(db: &Db, key_hash: &str) -> ApiResult<Option<KeyRecord>> {
    let row: Option<KeyRow> = sqlx::query_as(concat!(key_select!(), " WHERE k.key_hash = $1")).bind(key_hash).fetch_optional(&db.read).await?;
    Ok(row.map(KeyRecord::from))
}

/// The key `key_id` (the gate's lookup behind an exchanged token).
pub async fn by_id(db: &Db, key_id: &str) -> ApiResult<Option<KeyRecord>> {
    let row: Option<KeyRow> = sqlx::query_as(concat!(key_select!(), " WHERE k.key_id = $1")).bind(key_id).fetch_optional(&db.read).await?;
    Ok(row.map(KeyRecord::from))
}

stored_enum! {
    /// Whether an application may still issue keys.
    #[schema(as = ApplicationStatus)]
    enum ApplicationStatus { Active = "active", Disabled = "disabled" }
}

stored_enum! {
    /// Where an API key is in its life.
    #[schema(as = ApiKeyStatus)]
    enum ApiKeyStatus { Active = "active", Disabled = "disabled", Revoked = "revoked" }
}

/// An application: a client registration whose keys a tenant issues.
#[derive(Debug, FromRow, Serialize, ToSchema)]
struct Application {
    application_id: Id,
    tenant_id: String,
    name: String,
    slug: String,
    description: Option<String>,
    /// A test application's keys act in the tenant's sandbox.
    environment: Environment,
    status: ApplicationStatus,
    created_at: Timestamp,
}

const APPLICATION_COLUMNS: &str = "application_id, tenant_id, name, slug, description, environment, status, created_at";

/// The applications matching `filter`, a condition over `$1..$n` written in
/// this module (never request text).
fn applications(filter: &str) -> sqlx::AssertSqlSafe<String> {
    sqlx::AssertSqlSafe(format!("SELECT {APPLICATION_COLUMNS} FROM credential_application WHERE {filter}"))
}

/// The caller's tenant's application with this id (404 otherwise).
async fn find_application<'e, E>(exec: E, tenant_id: &str, application_id: &str) -> ApiResult<Application>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let id = path_id(application_id)?;
    sqlx::query_as(applications("application_id = $1 AND tenant_id = $2"))
        .bind(id.to_string())
        .bind(tenant_id)
        .fetch_optional(exec)
        .await?
        .ok_or(ApiError::NotFound)
}

/// An application as guarded writes name it: its row owns the right to
/// issue keys under it.
const APPLICATION: Stateful = Stateful { noun: "application", table: "credential_application", key: "application_id", state: "status" };

/// A key as guarded writes name it (`tenant_id` is the tenant the key acts
/// in: its application's, or that tenant's sandbox).
const KEY: Stateful = Stateful { noun: "key", table: "credential_api_key", key: "key_id", state: "status" };

/// A new application.
#[derive(Deserialize, ToSchema)]
struct NewApplication {
    name: String,
    /// Unique in the tenant.
    #[schema(pattern = r"^[a-z0-9_][a-z0-9_-]{0,63}$")]
    slug: String,
    description: Option<String>,
    environment: Environment,
}

stored_enum! {
    /// Where an application's keys act.
    #[schema(as = ApplicationEnvironment)]
    enum Environment { Live = "live", Test = "test" }
}

fn valid_slug(s: &str) -> bool {
    (1..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_') && !s.starts_with('-')
}

/// Creates an application of the caller's tenant and records its event,
/// or finds the one that has the slug already (no event). The unique slug
/// decides: of two creations at once, one makes the application.
async fn insert_application(
    tx: &mut Tx,
    ctx: &TenantCtx,
    name: &str,
    slug: &str,
    description: Option<&str>,
    environment: Environment,
) -> ApiResult<(Application, Written)> {
    let tenant_id = ctx.tenant_id.as_str();
    let sql = format!(
        "INSERT INTO credential_application (application_id, tenant_id, name, slug, description, environment, status, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, 'active', $7) ON CONFLICT (tenant_id, slug) DO NOTHING RETURNING {APPLICATION_COLUMNS}"
    );
    let (app, written): (Application, _) = insert_or_read(
        tx,
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(db::new_id()).bind(tenant_id).bind(name).bind(slug).bind(description).bind(environment).bind(db::now()),
        sqlx::query_as(applications("tenant_id = $1 AND slug = $2")).bind(tenant_id).bind(slug),
    )
    .await?;
    if written == Written::Made {
        let payload = json!({ "application_id": app.application_id, "slug": slug, "environment": environment });
        audit::record(tx, ctx, events::APPLICATION_CREATED, payload).await?;
    }
    Ok((app, written))
}

/// Registers an application (an API-key client) of the caller's tenant.
#[utoipa::path(post, path = "/api/applications", tag = "sdk-api-keys", request_body = NewApplication,
    responses((status = 201, description = "the application", body = Data<Application>)),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "body": { "name": "Races", "slug": "r-{unique}", "environment": "live" } }))))]
async fn create_application(State(state): State<AppState>, HumanTenant(ctx, _): HumanTenant, body: Body<NewApplication>) -> ApiResult<Created<Application>> {
    let body = body.checked()?;
    let (name, slug, environment) = (body.name.trim(), body.slug.trim(), body.environment);
    let mut check = Check::new();
    if !valid_slug(slug) {
        check.fail("slug must be 1-64 characters of a-z, 0-9, '-' or '_'");
    }
    check.finish()?;
    let mut tx = state.db.begin().await?;
    let (app, written) = insert_application(&mut tx, &ctx, name, slug, Check::optional(&body.description).as_deref(), environment).await?;
    if written == Written::Found {
        return Err(ApiError::Conflict(format!("an application with slug '{slug}' already exists")));
    }
    tx.commit().await?;
    Ok(created(app))
}

/// The applications of the caller's tenant, oldest first.
#[utoipa::path(get, path = "/api/applications", tag = "sdk-api-keys", params(Page),
    responses((status = 200, description = "one page of applications", body = ListOf<Application>)))]
async fn list_applications(State(state): State<AppState>, HumanTenant(ctx, _): HumanTenant, page: Page) -> ApiResult<ListOf<Application>> {
    let listing = Listing { table: "credential_application", columns: APPLICATION_COLUMNS, filter: "tenant_id = $1", order: "created_at, application_id" };
    page.list::<Application>(&state.db.read, &listing, &[&ctx.tenant_id]).await
}

/// An application of the caller's tenant.
#[utoipa::path(get, path = "/api/applications/{application_id}", tag = "sdk-api-keys",
    params(("application_id" = String, Path, description = "the application")),
    responses((status = 200, description = "the application", body = Data<Application>)))]
async fn get_application(State(state): State<AppState>, HumanTenant(ctx, _): HumanTenant, Path(id): Path<String>) -> ApiResult<Data<Application>> {
    Ok(ok(find_application(&state.db.read, &ctx.tenant_id, &id).await?))
}

/// A validated key request.
struct KeySpec {
    name: String,
    scopes: Vec<String>,
    rate_limit_rpm: Option<i64>,
    expires_at: Option<String>,
}

/// A key request whose body matched its schema: what the schema cannot
/// say (each scope's form, an expiry in the future), every problem at once.
fn key_spec(name: &str, requested: &[String], form: &Pattern, rate_limit_rpm: Option<i64>, expires_at: &Option<String>) -> ApiResult<KeySpec> {
    let mut check = Check::new();
    let mut scopes = Vec::new();
    let mut bad = Vec::new();
    for s in requested {
        if form.is_match(s) {
            scopes.push(s.clone());
        } else {
            bad.push(s.as_str());
        }
    }
    if !bad.is_empty() {
        check.fail(format!("invalid scopes (each must be <domain>.<resource>.<action> or a tail wildcard such as crm.* or *): {}", bad.join(", ")));
    }
    let expires_at = check.optional_future_time("expires_at", expires_at.as_ref().map(|e| Value::String(e.trim().to_string())).as_ref());
    check.finish()?;
    scopes.dedup();
    Ok(KeySpec { name: name.trim().to_string(), scopes, rate_limit_rpm, expires_at })
}

fn new_secret(environment: Environment) -> (String, String, String) {
    let prefix = match environment {
        Environment::Live => "pk_live_",
        Environment::Test => "pk_test_",
    };
    let secret = format!("{prefix}{}", crypto::random_base62(32));
    let last4 = secret[secret.len() - 4..].to_string();
    (prefix.to_string(), secret, last4)
}

/// An API key as it was issued (never its hash).
#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = ApiKey)]
struct IssuedKey {
    key_id: Id,
    /// `pk_live_` or `pk_test_`.
    prefix: String,
    name: String,
    #[sqlx(try_from = "String")]
    #[schema(value_type = Vec<String>)]
    scopes: JsonText,
    application_id: Id,
    created_at: Timestamp,
    synthetic_persona_id: String,
    rate_limit_rpm: Option<i64>,
    expires_at: Option<Timestamp>,
    /// `active`.
    status: ApiKeyStatus,
    /// The tenant the key acts in: the application's, or its sandbox for a
    /// test application.
    tenant_id: String,
}

const ISSUED_COLUMNS: &str = "key_id, prefix, name, scopes, application_id, created_at, synthetic_persona_id, rate_limit_rpm, expires_at, status, tenant_id";

/// A new API key and its secret.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = IssuedApiKey)]
struct Issued {
    #[serde(flatten)]
    key: IssuedKey,
    /// The secret, shown this once: only its hash is stored.
    api_key: String,
}

impl Issued {
    /// What the audit entry of an issued key records: never the secret.
    fn audit_payload(&self) -> Value {
        let k = &self.key;
        json!({
            "key_id": k.key_id, "application_id": k.application_id, "prefix": k.prefix,
            "scopes": k.scopes, "synthetic_persona_id": k.synthetic_persona_id,
        })
    }
}

/// Issues a key and its synthetic persona in one transaction.
async fn insert_key(state: &AppState, tx: &mut Tx, app: &Application, spec: KeySpec) -> ApiResult<Issued> {
    // The application's row stays locked until the key is committed: a
    // disable waits for the key and then disables it too, or goes first
    // and this issue sees the application disabled.
    let status: Option<ApplicationStatus> = APPLICATION.lock(tx, &app.tenant_id, &app.application_id.to_string()).await?;
    if status != Some(ApplicationStatus::Active) {
        return Err(ApiError::Conflict("the application is disabled".into()));
    }
    // A test application's keys act in the tenant's sandbox (Authentication 10).
    let key_tenant = match app.environment {
        Environment::Test => tenancy::sandbox(tx, &app.tenant_id).await?,
        Environment::Live => app.tenant_id.clone(),
    };
    let persona = personas::insert(tx, &state.master, &key_tenant, None, personas::PersonaKind::Service, None, None).await?;
    let (prefix, secret, last4) = new_secret(app.environment);
    let sql = format!(
        "INSERT INTO credential_api_key (key_id, application_id, tenant_id, name, prefix, key_hash, last4, scopes, \
         rate_limit_rpm, expires_at, status, synthetic_persona_id, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'active', $11, $12) RETURNING {ISSUED_COLUMNS}"
    );
    let key: IssuedKey = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(app.application_id)
        .bind(&key_tenant)
        .bind(&spec.name)
        .bind(&prefix)
        .bind(crypto::sha256_hex(secret.as_bytes()))
        .bind(&last4)
        .bind(serde_json::to_string(&spec.scopes).expect("strings serialise"))
        .bind(spec.rate_limit_rpm)
        .bind(&spec.expires_at)
        .bind(&persona.persona_id)
        .bind(db::now())
        .fetch_one(&mut **tx)
        .await?;
    Ok(Issued { key, api_key: secret })
}

/// Issues a key of the application: the secret is shown this once.
#[utoipa::path(post, path = "/api/applications/{application_id}/keys", tag = "sdk-api-keys",
    params(("application_id" = String, Path, description = "the application")), request_body = NewApiKey,
    extensions(("x-concurrency" = json!({"outcome": "independent", "given": [["POST", "/api/applications", {"name": "Races", "slug": "r-{unique}", "environment": "live"}]], "body": {"name": "k", "scopes": ["crm.*"]}}))),
    responses((status = 201, description = "the key and its secret", body = Data<Issued>)))]
async fn issue(State(state): State<AppState>, HumanTenant(ctx, _): HumanTenant, Path(id): Path<String>, body: Body<NewApiKey>) -> ApiResult<Created<Issued>> {
    let mut tx = state.db.begin().await?;
    let app = find_application(&mut *tx, &ctx.tenant_id, &id).await?;
    let body = body.checked()?;
    static SCOPE: Pattern = Pattern::of::<NewApiKey>("scopes[]");
    let spec = key_spec(&body.name, &body.scopes, &SCOPE, body.rate_limit_rpm, &body.expires_at)?;
    roles::contain(&state, &ctx, &spec.scopes, "the key's scopes").await?;
    let issued = insert_key(&state, &mut tx, &app, spec).await?;
    audit::record(&mut tx, &ctx, events::API_KEY_ISSUED, issued.audit_payload()).await?;
    tx.commit().await?;
    Ok(created(issued))
}

/// Issues a key of the caller's tenant: the secret is shown this once.
///
/// `tenant_id` is required and must be the caller's; `application_id`
/// defaults to the tenant's `default` live application, created on first use.
#[utoipa::path(post, path = "/api/api-keys", tag = "sdk-api-keys", request_body = NewTenantApiKey,
    extensions(("x-concurrency" = json!({"outcome": "independent", "given": [["POST", "/api/api-keys", {"tenant_id": "{tenant_id}", "name": "k", "scopes": ["crm.*"]}]], "body": {"tenant_id": "{owner_tenant_id}", "name": "k", "scopes": ["crm.*"]}}))),
    responses((status = 201, description = "the key and its secret", body = Data<Issued>)))]
async fn issue_for_tenant(State(state): State<AppState>, HumanTenant(ctx, _): HumanTenant, body: Body<NewTenantApiKey>) -> ApiResult<Created<Issued>> {
    let body = body.checked()?;
    let application_id = canonical_uuid_opt(&body.application_id);
    static SCOPE: Pattern = Pattern::of::<NewTenantApiKey>("scopes[]");
    let spec = key_spec(&body.name, &body.scopes, &SCOPE, body.rate_limit_rpm, &body.expires_at)?;
    ctx.check_tenant(Some(body.tenant_id.trim()))?;
    roles::contain(&state, &ctx, &spec.scopes, "the key's scopes").await?;
    let mut tx = state.db.begin().await?;
    let app = match application_id {
        Some(id) => find_application(&mut *tx, &ctx.tenant_id, &id)
            .await
            .map_err(|_| ApiError::invalid("application_id does not name an application of this tenant"))?,
        None => default_application(&mut tx, &ctx).await?,
    };
    let issued = insert_key(&state, &mut tx, &app, spec).await?;
    audit::record(&mut tx, &ctx, events::API_KEY_ISSUED, issued.audit_payload()).await?;
    tx.commit().await?;
    Ok(created(issued))
}

/// The tenant's `default` application, made by the first issue that needs
/// it: two first issues at once share the one made.
async fn default_application(tx: &mut Tx, ctx: &TenantCtx) -> ApiResult<Application> {
    Ok(insert_application(tx, ctx, "Default", "default", Some("created for tenant-level key issue"), Environment::Live).await?.0)
}

/// An API key as its application's list shows it: masked, never its hash.
#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = MaskedApiKey)]
struct ListedKey {
    key_id: Id,
    application_id: Id,
    name: String,
    /// `pk_live_` or `pk_test_`.
    prefix: String,
    /// The prefix, `…` and the secret's last four characters.
    masked_key: String,
    #[sqlx(try_from = "String")]
    #[schema(value_type = Vec<String>)]
    scopes: JsonText,
    rate_limit_rpm: Option<i64>,
    expires_at: Option<Timestamp>,
    status: ApiKeyStatus,
    synthetic_persona_id: String,
    created_at: Timestamp,
    rotated_at: Option<Timestamp>,
    revoked_at: Option<Timestamp>,
}

const LISTED_COLUMNS: &str = "key_id, application_id, name, prefix, prefix || '…' || last4 AS masked_key, scopes, rate_limit_rpm, expires_at, status, \
                              synthetic_persona_id, created_at, rotated_at, revoked_at";

/// The application's keys, masked, oldest first.
#[utoipa::path(get, path = "/api/applications/{application_id}/keys", tag = "sdk-api-keys",
    params(("application_id" = String, Path, description = "the application"), Page),
    responses((status = 200, description = "one page of the keys, never their secrets", body = ListOf<ListedKey>)))]
async fn list_keys(State(state): State<AppState>, HumanTenant(ctx, _): HumanTenant, Path(id): Path<String>, page: Page) -> ApiResult<ListOf<ListedKey>> {
    let app = find_application(&state.db.read, &ctx.tenant_id, &id).await?;
    let listing = Listing { table: "credential_api_key", columns: LISTED_COLUMNS, filter: "application_id = $1", order: "created_at, key_id" };
    page.list::<ListedKey>(&state.db.read, &listing, &[&app.application_id.to_string()]).await
}

/// The key `key_id` of an application of the caller's tenant, masked (404 otherwise).
async fn listed_key<'e, E>(exec: E, tenant_id: &str, key_id: &str) -> ApiResult<ListedKey>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let id = path_id(key_id)?;
    let sql = format!(
        "SELECT {LISTED_COLUMNS} FROM credential_api_key WHERE key_id = $1 \
         AND application_id IN (SELECT application_id FROM credential_application WHERE tenant_id = $2)"
    );
    sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(id.to_string()).bind(tenant_id).fetch_optional(exec).await?.ok_or(ApiError::NotFound)
}

/// One key of an application of the caller's tenant, masked: never its
/// secret or hash.
#[utoipa::path(get, path = "/api/api-keys/{key_id}", tag = "sdk-api-keys", params(("key_id" = String, Path, description = "the key")),
    responses((status = 200, description = "the key, never its secret", body = Data<ListedKey>)))]
async fn get_key(State(state): State<AppState>, HumanTenant(ctx, _): HumanTenant, Path(id): Path<String>) -> ApiResult<Data<ListedKey>> {
    Ok(ok(listed_key(&state.db.read, &ctx.tenant_id, &id).await?))
}

/// A change of a key's name, rate limit or expiry (absent fields stay).
#[derive(Deserialize, ToSchema)]
#[schema(as = ApiKeyUpdate)]
struct KeyChange {
    name: Option<String>,
    /// Requests per minute (beyond it: 429 with `Retry-After`).
    #[schema(minimum = 1)]
    rate_limit_rpm: Option<i64>,
    /// RFC 3339, in the future.
    #[schema(format = DateTime)]
    expires_at: Option<String>,
}

/// Changes a key's name, rate limit or expiry; its secret and scopes stay
/// (rotate for a new secret, issue a new key for other scopes). A revoked
/// key is 409.
#[utoipa::path(patch, path = "/api/api-keys/{key_id}", tag = "sdk-api-keys", params(("key_id" = String, Path, description = "the key")), request_body = KeyChange,
    responses((status = 200, description = "the key, changed", body = Data<ListedKey>)),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/applications", { "name": "Races", "slug": "r-{unique}", "environment": "live" }], ["POST", "/api/applications/{application_id}/keys", { "name": "k", "scopes": ["crm.*"] }]], "body": { "name": "renamed", "rate_limit_rpm": 600 } }))))]
async fn update_key(
    State(state): State<AppState>,
    HumanTenant(ctx, _): HumanTenant,
    Path(id): Path<String>,
    body: Body<KeyChange>,
) -> ApiResult<Data<ListedKey>> {
    let mut tx = state.db.begin().await?;
    let FoundKey { key_id, tenant_id, .. } = find_key(&mut tx, &ctx.tenant_id, &id).await?;
    let body = body.checked()?;
    let mut check = Check::new();
    let name = Check::optional(&body.name);
    let expires_at = check.optional_future_time("expires_at", body.expires_at.as_ref().map(|e| Value::String(e.trim().to_string())).as_ref());
    let mut changed = Vec::new();
    for (field, given) in [("name", name.is_some()), ("rate_limit_rpm", body.rate_limit_rpm.is_some()), ("expires_at", expires_at.is_some())] {
        if given {
            changed.push(field);
        }
    }
    if changed.is_empty() && body.expires_at.is_none() {
        check.fail("give at least one of: name, rate_limit_rpm, expires_at");
    }
    check.finish()?;
    // Changed only while not revoked, decided by the write itself.
    let sql = format!(
        "UPDATE credential_api_key SET name = COALESCE($3, name), rate_limit_rpm = COALESCE($4, rate_limit_rpm), expires_at = COALESCE($5, expires_at) \
         WHERE tenant_id = $1 AND key_id = $2 AND status <> 'revoked' RETURNING {LISTED_COLUMNS}"
    );
    let moved: Option<ListedKey> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&tenant_id)
        .bind(key_id)
        .bind(&name)
        .bind(body.rate_limit_rpm)
        .bind(&expires_at)
        .fetch_optional(&mut *tx)
        .await?;
    let key = KEY.settle(&mut tx, &tenant_id, &key_id.to_string(), moved, "only an active or disabled key can be changed").await?;
    let payload = json!({ "key_id": key_id, "changed": changed, "rate_limit_rpm": key.rate_limit_rpm, "expires_at": key.expires_at });
    audit::record(&mut tx, &ctx, events::API_KEY_UPDATED, payload).await?;
    tx.commit().await?;
    // Every replica's gate forgets the key's old limit and expiry.
    state.invalidate(Invalidation::ApiKeys).await;
    Ok(ok(key))
}

/// A disabled application.
#[derive(Serialize, ToSchema)]
struct DisabledApplication {
    application_id: Id,
    /// `disabled`.
    status: ApplicationStatus,
    /// The active keys this call disabled (none on a repeat).
    keys_disabled: u64,
}

/// Disables an application and every key of it.
#[utoipa::path(post, path = "/api/applications/{application_id}/disable", tag = "sdk-api-keys",
    params(("application_id" = String, Path, description = "the application")),
    responses((status = 200, description = "the application, disabled", body = Data<DisabledApplication>)),
    extensions(("x-concurrency" = json!({ "outcome": "same-answer", "given": [["POST", "/api/applications", { "name": "Races", "slug": "r-{unique}", "environment": "live" }]] }))))]
async fn disable_application(State(state): State<AppState>, HumanTenant(ctx, _): HumanTenant, Path(id): Path<String>) -> ApiResult<Data<DisabledApplication>> {
    let id = Id(path_id(&id)?);
    let mut tx = state.db.begin().await?;
    // The application moves once: of several disables at once, the one
    // that moves it disables its keys and records the event; the others,
    // like a repeat, answer it disabled with none of its keys.
    let moved: Option<Id> = sqlx::query_scalar(
        "UPDATE credential_application SET status = 'disabled' WHERE tenant_id = $1 AND application_id = $2 AND status = 'active' RETURNING application_id",
    )
    .bind(&ctx.tenant_id)
    .bind(id)
    .fetch_optional(&mut *tx)
    .await?;
    let mut disabled = 0;
    if moved.is_some() {
        disabled = sqlx::query("UPDATE credential_api_key SET status = 'disabled' WHERE application_id = $1 AND status = 'active'")
            .bind(id)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        audit::record(&mut tx, &ctx, events::APPLICATION_DISABLED, json!({ "application_id": id, "keys_disabled": disabled })).await?;
    } else if APPLICATION.state_of(&mut tx, &ctx.tenant_id, &id.to_string()).await?.is_none() {
        return Err(ApiError::NotFound);
    }
    tx.commit().await?;
    state.invalidate(Invalidation::ApiKeys).await;
    Ok(ok(DisabledApplication { application_id: id, status: ApplicationStatus::Disabled, keys_disabled: disabled }))
}

/// A change of an application's name or description (absent fields stay).
#[derive(Deserialize, ToSchema)]
#[schema(as = ApplicationUpdate)]
struct ApplicationChange {
    name: Option<String>,
    description: Option<String>,
}

/// Changes an application's name or description. Its slug (the `client_id`
/// of the token exchange) and environment stay; a disabled application may
/// be changed too.
#[utoipa::path(patch, path = "/api/applications/{application_id}", tag = "sdk-api-keys",
    params(("application_id" = String, Path, description = "the application")), request_body = ApplicationChange,
    responses((status = 200, description = "the application, changed", body = Data<Application>)),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/applications", { "name": "Races", "slug": "r-{unique}", "environment": "live" }]], "body": { "name": "Renamed", "description": "raced" } }))))]
async fn update_application(
    State(state): State<AppState>,
    HumanTenant(ctx, _): HumanTenant,
    Path(id): Path<String>,
    body: Body<ApplicationChange>,
) -> ApiResult<Data<Application>> {
    let id = Id(path_id(&id)?);
    let body = body.checked()?;
    let (name, description) = (Check::optional(&body.name), Check::optional(&body.description));
    let changed: Vec<&str> =
        [("name", name.is_some()), ("description", description.is_some())].into_iter().filter(|(_, given)| *given).map(|(f, _)| f).collect();
    if changed.is_empty() {
        return Err(ApiError::invalid("give at least one of: name, description"));
    }
    let mut tx = state.db.begin().await?;
    let sql = format!(
        "UPDATE credential_application SET name = COALESCE($3, name), description = COALESCE($4, description) \
         WHERE tenant_id = $1 AND application_id = $2 RETURNING {APPLICATION_COLUMNS}"
    );
    let app: Application = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&ctx.tenant_id)
        .bind(id)
        .bind(&name)
        .bind(&description)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or(ApiError::NotFound)?;
    audit::record(&mut tx, &ctx, events::APPLICATION_UPDATED, json!({ "application_id": id, "changed": changed })).await?;
    tx.commit().await?;
    Ok(ok(app))
}

/// An enabled application.
#[derive(Serialize, ToSchema)]
struct EnabledApplication {
    application_id: Id,
    /// `active`.
    status: ApplicationStatus,
    /// The keys this call enabled again: those its disable had disabled
    /// (revoked keys stay revoked; none on a repeat).
    keys_enabled: u64,
}

/// Enables a disabled application and the keys its disable had disabled.
///
/// Enabling an active application changes nothing and records no event.
/// The keys enabled again grant their scopes anew: the caller must hold
/// them (403 otherwise, and nothing changes).
#[utoipa::path(post, path = "/api/applications/{application_id}/enable", tag = "sdk-api-keys",
    params(("application_id" = String, Path, description = "the application")),
    responses((status = 200, description = "the application, active", body = Data<EnabledApplication>)),
    extensions(("x-concurrency" = json!({ "outcome": "same-answer", "given": [["POST", "/api/applications", { "name": "Races", "slug": "r-{unique}", "environment": "live" }], ["POST", "/api/applications/{application_id}/disable", null]] }))))]
async fn enable_application(State(state): State<AppState>, HumanTenant(ctx, _): HumanTenant, Path(id): Path<String>) -> ApiResult<Data<EnabledApplication>> {
    let id = Id(path_id(&id)?);
    let mut tx = state.db.begin().await?;
    // The application moves once: of several enables at once, the one
    // that moves it enables its keys and records the event; the others,
    // like a repeat, answer it active with none of its keys.
    let moved: Option<Id> = sqlx::query_scalar(
        "UPDATE credential_application SET status = 'active' WHERE tenant_id = $1 AND application_id = $2 AND status = 'disabled' RETURNING application_id",
    )
    .bind(&ctx.tenant_id)
    .bind(id)
    .fetch_optional(&mut *tx)
    .await?;
    let mut enabled = 0;
    if moved.is_some() {
        let scopes: Vec<String> =
            sqlx::query_scalar("UPDATE credential_api_key SET status = 'active' WHERE application_id = $1 AND status = 'disabled' RETURNING scopes")
                .bind(id)
                .fetch_all(&mut *tx)
                .await?;
        enabled = scopes.len() as u64;
        let granted: Vec<String> = scopes.iter().flat_map(|s| scope_list(s)).collect();
        // Refused: the transaction, and the enable with it, is rolled back.
        roles::contain(&state, &ctx, &granted, "the keys' scopes").await?;
        audit::record(&mut tx, &ctx, events::APPLICATION_ENABLED, json!({ "application_id": id, "keys_enabled": enabled })).await?;
    } else if APPLICATION.state_of(&mut tx, &ctx.tenant_id, &id.to_string()).await?.is_none() {
        return Err(ApiError::NotFound);
    }
    tx.commit().await?;
    state.invalidate(Invalidation::ApiKeys).await;
    Ok(ok(EnabledApplication { application_id: id, status: ApplicationStatus::Active, keys_enabled: enabled }))
}

/// What rotate and revoke need of a key: its state, its application's
/// environment and its scopes.
#[derive(Debug, FromRow)]
struct FoundKey {
    key_id: Id,
    /// The tenant the key acts in (its application's, or that tenant's sandbox).
    tenant_id: String,
    revoked_at: Option<Timestamp>,
    environment: Environment,
    scopes: String,
}

/// The caller's tenant's key with this id (404 otherwise).
async fn find_key(tx: &mut Tx, tenant_id: &str, key_id: &str) -> ApiResult<FoundKey> {
    let id = path_id(key_id)?;
    sqlx::query_as(
        "SELECT k.key_id, k.tenant_id, k.revoked_at, a.environment, k.scopes FROM credential_api_key k \
         JOIN credential_application a ON a.application_id = k.application_id WHERE k.key_id = $1 AND a.tenant_id = $2",
    )
    .bind(id.to_string())
    .bind(tenant_id)
    .fetch_optional(&mut **tx)
    .await?
    .ok_or(ApiError::NotFound)
}

/// A rotated API key and its new secret.
#[derive(Serialize, ToSchema)]
struct RotatedApiKey {
    key_id: Id,
    /// The new secret, shown this once; the old one stops working.
    api_key: String,
    /// `pk_live_` or `pk_test_`.
    prefix: String,
    rotated_at: Timestamp,
}

/// Gives an active key a new secret: the secret is shown this once.
#[utoipa::path(post, path = "/api/api-keys/{key_id}/rotate", tag = "sdk-api-keys", params(("key_id" = String, Path, description = "the key")),
    responses((status = 200, description = "the key's new secret", body = Data<RotatedApiKey>)),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/applications", { "name": "Races", "slug": "r-{unique}", "environment": "live" }], ["POST", "/api/applications/{application_id}/keys", { "name": "k", "scopes": ["crm.*"] }]] }))))]
async fn rotate(State(state): State<AppState>, HumanTenant(ctx, _): HumanTenant, Path(id): Path<String>) -> ApiResult<Data<RotatedApiKey>> {
    let mut tx = state.db.begin().await?;
    let FoundKey { key_id, tenant_id, environment, scopes, .. } = find_key(&mut tx, &ctx.tenant_id, &id).await?;
    let (prefix, secret, last4) = new_secret(environment);
    let now = Timestamp::now();
    // Only an active key takes a new secret, decided by the write itself:
    // a rotation racing a revocation never hands out a secret of a revoked
    // key. Rotations at once each take effect, the last one's secret stays.
    let moved: Option<Id> = sqlx::query_scalar(
        "UPDATE credential_api_key SET key_hash = $3, last4 = $4, rotated_at = $5 WHERE tenant_id = $1 AND key_id = $2 AND status = 'active' RETURNING key_id",
    )
    .bind(&tenant_id)
    .bind(key_id)
    .bind(crypto::sha256_hex(secret.as_bytes()))
    .bind(&last4)
    .bind(now)
    .fetch_optional(&mut *tx)
    .await?;
    KEY.settle(&mut tx, &tenant_id, &key_id.to_string(), moved, "only an active key can be rotated").await?;
    // A new secret is a new grant of the key's scopes (refused: the
    // transaction, and the new secret with it, is rolled back).
    roles::contain(&state, &ctx, &scope_list(&scopes), "the key's scopes").await?;
    audit::record(&mut tx, &ctx, events::API_KEY_ROTATED, json!({ "key_id": key_id, "rotated_at": now })).await?;
    tx.commit().await?;
    state.invalidate(Invalidation::ApiKeys).await;
    Ok(ok(RotatedApiKey { key_id, api_key: secret, prefix, rotated_at: now }))
}

/// A revoked API key.
#[derive(Serialize, ToSchema)]
struct RevokedApiKey {
    key_id: Id,
    /// `revoked`.
    status: ApiKeyStatus,
    /// When the key was first revoked.
    revoked_at: Option<Timestamp>,
}

/// Revokes a key; the application's other keys are unaffected.
///
/// Revoking it again answers the same, with the first revocation's time.
#[utoipa::path(post, path = "/api/api-keys/{key_id}/revoke", tag = "sdk-api-keys", params(("key_id" = String, Path, description = "the key")),
    responses((status = 200, description = "the key, revoked", body = Data<RevokedApiKey>)),
    extensions(("x-concurrency" = json!({ "outcome": "same-answer", "given": [["POST", "/api/applications", { "name": "Races", "slug": "r-{unique}", "environment": "live" }], ["POST", "/api/applications/{application_id}/keys", { "name": "k", "scopes": ["crm.*"] }]] }))))]
async fn revoke(State(state): State<AppState>, HumanTenant(ctx, _): HumanTenant, Path(id): Path<String>) -> ApiResult<Data<RevokedApiKey>> {
    let mut tx = state.db.begin().await?;
    let FoundKey { key_id, tenant_id, .. } = find_key(&mut tx, &ctx.tenant_id, &id).await?;
    // The key is revoked once: of several revocations at once, the one
    // that moves it records the event; the others, like a repeat, answer
    // the first revocation's time.
    let now = Timestamp::now();
    let moved: Option<Option<Timestamp>> = sqlx::query_scalar(
        "UPDATE credential_api_key SET status = 'revoked', revoked_at = $3 WHERE tenant_id = $1 AND key_id = $2 AND status <> 'revoked' RETURNING revoked_at",
    )
    .bind(&tenant_id)
    .bind(key_id)
    .bind(now)
    .fetch_optional(&mut *tx)
    .await?;
    let revoked_at = match moved {
        Some(at) => {
            audit::record(&mut tx, &ctx, events::API_KEY_REVOKED, json!({ "key_id": key_id, "revoked_at": now })).await?;
            at
        }
        None => find_key(&mut tx, &ctx.tenant_id, &key_id.to_string()).await?.revoked_at,
    };
    tx.commit().await?;
    state.invalidate(Invalidation::ApiKeys).await;
    Ok(ok(RevokedApiKey { key_id, status: ApiKeyStatus::Revoked, revoked_at }))
}

/// The key (and its application) a token exchange presents; a key of an
/// offboarded tenant is no client any more.
pub async fn for_exchange(state: &AppState, secret: &str) -> ApiResult<Arc<KeyRecord>> {
    let invalid = |e| match e {
        ApiError::Unauthorized(_) => ApiError::InvalidClient,
        other => other,
    };
    let key = keys::authenticate(state, secret).await.map_err(invalid)?;
    keys::tenant_open(state, &key.tenant_id).await.map_err(invalid)?;
    Ok(key)
}

/// Slug of an application (client_id check of the token exchange).
pub async fn application_slug(state: &AppState, application_id: &str) -> ApiResult<String> {
    Ok(sqlx::query_scalar("SELECT slug FROM credential_application WHERE application_id = $1").bind(application_id).fetch_one(&state.db.read).await?)
}

#[cfg(test)]
mod tests {
    use utoipa::PartialSchema;

    use super::*;

    #[test]
    fn the_documented_environments_are_the_validated_ones() {
        let words: Vec<&str> = Environment::ALL.iter().map(|e| e.as_str()).collect();
        assert_eq!(serde_json::to_value(Environment::schema()).unwrap()["enum"], json!(words));
    }
}
