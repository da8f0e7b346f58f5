//! sdk-api-keys: applications (API-key client registrations) and their keys:
//! issue, list, rotate, revoke, disable; and the key rows the gate's
//! `KeyDirectory` reads (verification and rate limits live in the gate).
//!
//! Only a SHA-256 hash of a key is stored. Credential management takes a
//! human tenant JWT and refuses API keys (Authentication 4).

use std::sync::Arc;

use axum::{
    Router,
    extract::{Path, State},
    response::Response,
    routing::{get, post},
};
use serde::Deserialize;
use serde_json::{Value, json};
use sqlx::{FromRow, Row};

use crate::{personas, roles, tenancy};
use hub_kernel::{
    audit::{self, events},
    crypto,
    db::{self, Db, Tx},
    error::{ApiError, ApiResult, Body, created, ok},
    gate::{
        HumanTenant, TenantCtx,
        keys::{self, KeyRecord},
        scope,
    },
    state::{AppState, Invalidation},
    validate::{Check, path_id},
};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/applications", post(create_application).get(list_applications))
        .route("/api/applications/{application_id}", get(get_application))
        .route("/api/applications/{application_id}/keys", post(issue).get(list_keys))
        .route("/api/applications/{application_id}/disable", post(disable_application))
        .route("/api/api-keys", post(issue_for_tenant))
        .route("/api/api-keys/{key_id}/rotate", post(rotate))
        .route("/api/api-keys/{key_id}/revoke", post(revoke))
}

macro_rules! key_select {
    () => {
        "SELECT k.key_id, k.key_hash, k.application_id, k.tenant_id, k.prefix, k.last4, k.scopes, \
    k.rate_limit_rpm, k.expires_at, k.status, k.synthetic_persona_id, k.rotated_at, a.status AS application_status, a.environment, \
    t.app_id, t.org_id, t.parent_tenant_id, t.root_tenant_id, t.reseller_id, t.admin_pool_index, t.app_pool_index \
    FROM credential_api_key k JOIN credential_application a ON a.application_id = k.application_id \
    JOIN tenant_tenant t ON t.tenant_id = k.tenant_id"
    };
}

fn key_from_row(row: &sqlx::any::AnyRow) -> Result<KeyRecord, sqlx::Error> {
    let scopes: String = row.try_get("scopes")?;
    let pools: String = row.try_get("app_pool_index")?;
    let expires: Option<String> = row.try_get("expires_at")?;
    Ok(KeyRecord {
        key_id: row.try_get("key_id")?,
        key_hash: row.try_get("key_hash")?,
        application_id: row.try_get("application_id")?,
        tenant_id: row.try_get("tenant_id")?,
        app_id: row.try_get("app_id")?,
        org_id: row.try_get("org_id")?,
        prefix: row.try_get("prefix")?,
        last4: row.try_get("last4")?,
        scopes: serde_json::from_str(&scopes).unwrap_or_default(),
        rate_limit_rpm: row.try_get("rate_limit_rpm")?,
        expires_at: expires.as_deref().and_then(db::parse_time),
        status: row.try_get("status")?,
        application_status: row.try_get("application_status")?,
        environment: row.try_get("environment")?,
        synthetic_persona_id: row.try_get("synthetic_persona_id")?,
        parent_tenant_id: row.try_get("parent_tenant_id")?,
        root_tenant_id: row.try_get("root_tenant_id")?,
        reseller_id: row.try_get("reseller_id")?,
        admin_pool_index: row.try_get("admin_pool_index")?,
        app_pool_index: serde_json::from_str(&pools).unwrap_or(Value::Null),
        rotated_at: row.try_get("rotated_at")?,
    })
}

/// The key whose secret hashes to `key_hash` (the gate's lookup).
pub async fn by_hash(db: &Db, key_hash: &str) -> ApiResult<Option<KeyRecord>> {
    let row = sqlx::query(concat!(key_select!(), " WHERE k.key_hash = $1")).bind(key_hash).fetch_optional(&db.read).await?;
    Ok(row.as_ref().map(key_from_row).transpose()?)
}

/// The key `key_id` (the gate's lookup behind an exchanged token).
pub async fn by_id(db: &Db, key_id: &str) -> ApiResult<Option<KeyRecord>> {
    let row = sqlx::query(concat!(key_select!(), " WHERE k.key_id = $1")).bind(key_id).fetch_optional(&db.read).await?;
    Ok(row.as_ref().map(key_from_row).transpose()?)
}

#[derive(Debug, FromRow)]
struct Application {
    application_id: String,
    tenant_id: String,
    name: String,
    slug: String,
    description: Option<String>,
    environment: String,
    status: String,
    created_at: String,
}

impl Application {
    fn json(&self) -> Value {
        json!({
            "application_id": self.application_id, "tenant_id": self.tenant_id, "name": self.name,
            "slug": self.slug, "description": self.description, "environment": self.environment,
            "status": self.status, "created_at": self.created_at,
        })
    }
}

macro_rules! app_select {
    () => {
        "SELECT application_id, tenant_id, name, slug, description, environment, status, created_at FROM credential_application"
    };
}

/// The caller's tenant's application with this id (404 otherwise).
async fn find_application<'e, E>(exec: E, tenant_id: &str, application_id: &str) -> ApiResult<Application>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let id = path_id(application_id)?;
    sqlx::query_as::<_, Application>(concat!(app_select!(), " WHERE application_id = $1 AND tenant_id = $2"))
        .bind(id.to_string())
        .bind(tenant_id)
        .fetch_optional(exec)
        .await?
        .ok_or(ApiError::NotFound)
}

#[derive(Deserialize)]
struct NewApplication {
    name: Option<String>,
    slug: Option<String>,
    description: Option<String>,
    environment: Option<String>,
}

fn valid_slug(s: &str) -> bool {
    (1..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_') && !s.starts_with('-')
}

async fn insert_application(tx: &mut Tx, tenant_id: &str, name: &str, slug: &str, description: Option<&str>, environment: &str) -> ApiResult<Application> {
    let exists: Option<String> = sqlx::query_scalar("SELECT application_id FROM credential_application WHERE tenant_id = $1 AND slug = $2")
        .bind(tenant_id)
        .bind(slug)
        .fetch_optional(&mut **tx)
        .await?;
    if exists.is_some() {
        return Err(ApiError::Conflict(format!("an application with slug '{slug}' already exists")));
    }
    let app = Application {
        application_id: db::new_id(),
        tenant_id: tenant_id.to_string(),
        name: name.to_string(),
        slug: slug.to_string(),
        description: description.map(str::to_string),
        environment: environment.to_string(),
        status: "active".into(),
        created_at: db::now(),
    };
    sqlx::query(
        "INSERT INTO credential_application (application_id, tenant_id, name, slug, description, environment, status, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(&app.application_id)
    .bind(&app.tenant_id)
    .bind(&app.name)
    .bind(&app.slug)
    .bind(&app.description)
    .bind(&app.environment)
    .bind(&app.status)
    .bind(&app.created_at)
    .execute(&mut **tx)
    .await?;
    Ok(app)
}

async fn create_application(State(state): State<AppState>, HumanTenant(ctx, _): HumanTenant, Body(body): Body<NewApplication>) -> ApiResult<Response> {
    let mut check = Check::new();
    let name = check.required("name", &body.name);
    let slug = check.required("slug", &body.slug);
    let environment = check.required("environment", &body.environment);
    check.one_of("environment", &environment, &["live", "test"]);
    if !slug.is_empty() && !valid_slug(&slug) {
        check.fail("slug must be 1-64 characters of a-z, 0-9, '-' or '_'");
    }
    check.finish()?;
    let mut tx = state.db.begin().await?;
    let app = insert_application(&mut tx, &ctx.tenant_id, &name, &slug, Check::optional(&body.description).as_deref(), &environment).await?;
    tx.commit().await?;
    Ok(created(app.json()))
}

async fn list_applications(State(state): State<AppState>, HumanTenant(ctx, _): HumanTenant) -> ApiResult<Response> {
    let apps = sqlx::query_as::<_, Application>(concat!(app_select!(), " WHERE tenant_id = $1 ORDER BY created_at"))
        .bind(&ctx.tenant_id)
        .fetch_all(&state.db.read)
        .await?;
    Ok(ok(apps.iter().map(Application::json).collect::<Vec<_>>()))
}

async fn get_application(State(state): State<AppState>, HumanTenant(ctx, _): HumanTenant, Path(id): Path<String>) -> ApiResult<Response> {
    Ok(ok(find_application(&state.db.read, &ctx.tenant_id, &id).await?.json()))
}

/// A validated key request.
struct KeySpec {
    name: String,
    scopes: Vec<String>,
    rate_limit_rpm: Option<i64>,
    expires_at: Option<String>,
}

fn parse_key_spec(body: &Value, check: &mut Check) -> KeySpec {
    let name = check.required("name", &body.get("name").and_then(|v| v.as_str()).map(str::to_string));
    if body.get("name").is_some_and(|v| !v.is_string() && !v.is_null()) {
        check.fail("name must be a string");
    }
    let mut scopes = Vec::new();
    match body.get("scopes") {
        Some(Value::Array(items)) if !items.is_empty() => {
            let mut bad = Vec::new();
            for item in items {
                match item.as_str() {
                    Some(s) if scope::is_valid(s) => scopes.push(s.to_string()),
                    Some(s) => bad.push(s.to_string()),
                    None => bad.push(item.to_string()),
                }
            }
            if !bad.is_empty() {
                check.fail(format!("invalid scopes (each must be <domain>.<resource>.<action> or a tail wildcard such as crm.* or *): {}", bad.join(", ")));
            }
        }
        None | Some(Value::Null) => check.fail("scopes is required"),
        _ => check.fail("scopes must be a non-empty array of strings"),
    }
    let rate_limit_rpm = check.optional_positive_int("rate_limit_rpm", body.get("rate_limit_rpm"));
    let expires_at = check.optional_future_time("expires_at", body.get("expires_at"));
    scopes.dedup();
    KeySpec { name, scopes, rate_limit_rpm, expires_at }
}

fn new_secret(environment: &str) -> (String, String, String) {
    let prefix = if environment == "live" { "pk_live_" } else { "pk_test_" };
    let secret = format!("{prefix}{}", crypto::random_base62(32));
    let last4 = secret[secret.len() - 4..].to_string();
    (prefix.to_string(), secret, last4)
}

/// Issues a key and its synthetic persona in one transaction.
async fn insert_key(state: &AppState, tx: &mut Tx, app: &Application, spec: KeySpec) -> ApiResult<Value> {
    if app.status != "active" {
        return Err(ApiError::Conflict("the application is disabled".into()));
    }
    // A test application's keys act in the tenant's sandbox (Authentication 10).
    let key_tenant = match app.environment.as_str() {
        "test" => tenancy::sandbox(tx, &app.tenant_id).await?,
        _ => app.tenant_id.clone(),
    };
    let persona_id = personas::insert(tx, &state.master, &key_tenant, None, "service", None, None).await?;
    let (prefix, secret, last4) = new_secret(&app.environment);
    let key_id = db::new_id();
    let created_at = db::now();
    sqlx::query(
        "INSERT INTO credential_api_key (key_id, application_id, tenant_id, name, prefix, key_hash, last4, scopes, \
         rate_limit_rpm, expires_at, status, synthetic_persona_id, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'active', $11, $12)",
    )
    .bind(&key_id)
    .bind(&app.application_id)
    .bind(&key_tenant)
    .bind(&spec.name)
    .bind(&prefix)
    .bind(crypto::sha256_hex(secret.as_bytes()))
    .bind(&last4)
    .bind(serde_json::to_string(&spec.scopes).expect("strings serialise"))
    .bind(spec.rate_limit_rpm)
    .bind(&spec.expires_at)
    .bind(&persona_id)
    .bind(&created_at)
    .execute(&mut **tx)
    .await?;
    Ok(json!({
        "key_id": key_id, "api_key": secret, "prefix": prefix, "name": spec.name, "scopes": spec.scopes,
        "application_id": app.application_id, "created_at": created_at, "synthetic_persona_id": persona_id,
        "rate_limit_rpm": spec.rate_limit_rpm, "expires_at": spec.expires_at, "status": "active", "tenant_id": key_tenant,
    }))
}

async fn issue(State(state): State<AppState>, HumanTenant(ctx, _): HumanTenant, Path(id): Path<String>, Body(body): Body<Value>) -> ApiResult<Response> {
    let mut tx = state.db.begin().await?;
    let app = find_application(&mut *tx, &ctx.tenant_id, &id).await?;
    let mut check = Check::new();
    let spec = parse_key_spec(&body, &mut check);
    check.finish()?;
    roles::contain(&state, &ctx, &spec.scopes, "the key's scopes").await?;
    let data = insert_key(&state, &mut tx, &app, spec).await?;
    audit::record(&mut tx, &ctx, events::API_KEY_ISSUED, issued_payload(&data)).await?;
    tx.commit().await?;
    Ok(created(data))
}

/// What the audit entry of an issued key records: never the secret.
fn issued_payload(data: &Value) -> Value {
    json!({
        "key_id": data["key_id"], "application_id": data["application_id"], "prefix": data["prefix"],
        "scopes": data["scopes"], "synthetic_persona_id": data["synthetic_persona_id"],
    })
}

/// sdk-api-keys: tenant-level issue. `tenant_id` is required and must be the
/// caller's; `application_id` defaults to the tenant's default live
/// application, created on first use.
async fn issue_for_tenant(State(state): State<AppState>, HumanTenant(ctx, _): HumanTenant, Body(body): Body<Value>) -> ApiResult<Response> {
    let mut check = Check::new();
    let tenant_id = check.required("tenant_id", &body.get("tenant_id").and_then(|v| v.as_str()).map(str::to_string));
    let application_id = check.optional_uuid("application_id", &body.get("application_id").and_then(|v| v.as_str()).map(str::to_string));
    let spec = parse_key_spec(&body, &mut check);
    check.finish()?;
    ctx.check_tenant(Some(&tenant_id))?;
    roles::contain(&state, &ctx, &spec.scopes, "the key's scopes").await?;
    let mut tx = state.db.begin().await?;
    let app = match application_id {
        Some(id) => find_application(&mut *tx, &ctx.tenant_id, &id.to_string())
            .await
            .map_err(|_| ApiError::invalid("application_id does not name an application of this tenant"))?,
        None => default_application(&mut tx, &ctx).await?,
    };
    let data = insert_key(&state, &mut tx, &app, spec).await?;
    audit::record(&mut tx, &ctx, events::API_KEY_ISSUED, issued_payload(&data)).await?;
    tx.commit().await?;
    Ok(created(data))
}

async fn default_application(tx: &mut Tx, ctx: &TenantCtx) -> ApiResult<Application> {
    let found = sqlx::query_as::<_, Application>(concat!(app_select!(), " WHERE tenant_id = $1 AND slug = 'default'"))
        .bind(&ctx.tenant_id)
        .fetch_optional(&mut **tx)
        .await?;
    match found {
        Some(app) => Ok(app),
        None => insert_application(tx, &ctx.tenant_id, "Default", "default", Some("created for tenant-level key issue"), "live").await,
    }
}

async fn list_keys(State(state): State<AppState>, HumanTenant(ctx, _): HumanTenant, Path(id): Path<String>) -> ApiResult<Response> {
    let app = find_application(&state.db.read, &ctx.tenant_id, &id).await?;
    let rows = sqlx::query(
        "SELECT key_id, name, prefix, last4, scopes, rate_limit_rpm, expires_at, status, synthetic_persona_id, \
         created_at, rotated_at, revoked_at FROM credential_api_key WHERE application_id = $1 ORDER BY created_at",
    )
    .bind(&app.application_id)
    .fetch_all(&state.db.read)
    .await?;
    let mut keys = Vec::with_capacity(rows.len());
    for row in rows {
        let prefix: String = row.try_get("prefix")?;
        let last4: String = row.try_get("last4")?;
        let scopes: String = row.try_get("scopes")?;
        keys.push(json!({
            "key_id": row.try_get::<String, _>("key_id")?,
            "name": row.try_get::<String, _>("name")?,
            "prefix": prefix,
            "masked_key": format!("{prefix}…{last4}"),
            "scopes": serde_json::from_str::<Value>(&scopes).unwrap_or(Value::Null),
            "rate_limit_rpm": row.try_get::<Option<i64>, _>("rate_limit_rpm")?,
            "expires_at": row.try_get::<Option<String>, _>("expires_at")?,
            "status": row.try_get::<String, _>("status")?,
            "synthetic_persona_id": row.try_get::<String, _>("synthetic_persona_id")?,
            "created_at": row.try_get::<String, _>("created_at")?,
            "rotated_at": row.try_get::<Option<String>, _>("rotated_at")?,
            "revoked_at": row.try_get::<Option<String>, _>("revoked_at")?,
        }));
    }
    Ok(ok(keys))
}

async fn disable_application(State(state): State<AppState>, HumanTenant(ctx, _): HumanTenant, Path(id): Path<String>) -> ApiResult<Response> {
    let mut tx = state.db.begin().await?;
    let app = find_application(&mut *tx, &ctx.tenant_id, &id).await?;
    sqlx::query("UPDATE credential_application SET status = 'disabled' WHERE application_id = $1").bind(&app.application_id).execute(&mut *tx).await?;
    let disabled = sqlx::query("UPDATE credential_api_key SET status = 'disabled' WHERE application_id = $1 AND status = 'active'")
        .bind(&app.application_id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    audit::record(&mut tx, &ctx, events::APPLICATION_DISABLED, json!({ "application_id": app.application_id, "keys_disabled": disabled })).await?;
    tx.commit().await?;
    state.invalidate(Invalidation::ApiKeys).await;
    Ok(ok(json!({ "application_id": app.application_id, "status": "disabled", "keys_disabled": disabled })))
}

/// The caller's tenant's key with this id: its status, its application's
/// environment and its scopes (404 otherwise).
async fn find_key(tx: &mut Tx, tenant_id: &str, key_id: &str) -> ApiResult<FoundKey> {
    let id = path_id(key_id)?;
    let row = sqlx::query(
        "SELECT k.key_id, k.status, k.scopes, a.environment FROM credential_api_key k \
         JOIN credential_application a ON a.application_id = k.application_id WHERE k.key_id = $1 AND a.tenant_id = $2",
    )
    .bind(id.to_string())
    .bind(tenant_id)
    .fetch_optional(&mut **tx)
    .await?
    .ok_or(ApiError::NotFound)?;
    let scopes: String = row.try_get("scopes")?;
    Ok(FoundKey {
        key_id: row.try_get("key_id")?,
        status: row.try_get("status")?,
        environment: row.try_get("environment")?,
        scopes: serde_json::from_str(&scopes).unwrap_or_default(),
    })
}

struct FoundKey {
    key_id: String,
    status: String,
    environment: String,
    scopes: Vec<String>,
}

async fn rotate(State(state): State<AppState>, HumanTenant(ctx, _): HumanTenant, Path(id): Path<String>) -> ApiResult<Response> {
    let mut tx = state.db.begin().await?;
    let FoundKey { key_id, status, environment, scopes } = find_key(&mut tx, &ctx.tenant_id, &id).await?;
    if status != "active" {
        return Err(ApiError::Conflict(format!("a {status} key cannot be rotated")));
    }
    // A new secret is a new grant of the key's scopes.
    roles::contain(&state, &ctx, &scopes, "the key's scopes").await?;
    let (prefix, secret, last4) = new_secret(&environment);
    let now = db::now();
    sqlx::query("UPDATE credential_api_key SET key_hash = $1, last4 = $2, rotated_at = $3 WHERE key_id = $4")
        .bind(crypto::sha256_hex(secret.as_bytes()))
        .bind(&last4)
        .bind(&now)
        .bind(&key_id)
        .execute(&mut *tx)
        .await?;
    audit::record(&mut tx, &ctx, events::API_KEY_ROTATED, json!({ "key_id": key_id, "rotated_at": now })).await?;
    tx.commit().await?;
    state.invalidate(Invalidation::ApiKeys).await;
    Ok(ok(json!({ "key_id": key_id, "api_key": secret, "prefix": prefix, "rotated_at": now })))
}

async fn revoke(State(state): State<AppState>, HumanTenant(ctx, _): HumanTenant, Path(id): Path<String>) -> ApiResult<Response> {
    let mut tx = state.db.begin().await?;
    let FoundKey { key_id, status, .. } = find_key(&mut tx, &ctx.tenant_id, &id).await?;
    let now = db::now();
    if status != "revoked" {
        sqlx::query("UPDATE credential_api_key SET status = 'revoked', revoked_at = $1 WHERE key_id = $2").bind(&now).bind(&key_id).execute(&mut *tx).await?;
    }
    let revoked_at: Option<String> =
        sqlx::query_scalar("SELECT revoked_at FROM credential_api_key WHERE key_id = $1").bind(&key_id).fetch_one(&mut *tx).await?;
    if status != "revoked" {
        audit::record(&mut tx, &ctx, events::API_KEY_REVOKED, json!({ "key_id": key_id, "revoked_at": revoked_at })).await?;
    }
    tx.commit().await?;
    state.invalidate(Invalidation::ApiKeys).await;
    Ok(ok(json!({ "key_id": key_id, "status": "revoked", "revoked_at": revoked_at })))
}

/// The key (and its application) a token exchange presents.
pub async fn for_exchange(state: &AppState, secret: &str) -> ApiResult<Arc<KeyRecord>> {
    keys::authenticate(state, secret).await.map_err(|e| match e {
        ApiError::Unauthorized(_) => ApiError::InvalidClient,
        other => other,
    })
}

/// Slug of an application (client_id check of the token exchange).
pub async fn application_slug(state: &AppState, application_id: &str) -> ApiResult<String> {
    Ok(sqlx::query_scalar("SELECT slug FROM credential_application WHERE application_id = $1").bind(application_id).fetch_one(&state.db.read).await?)
}
