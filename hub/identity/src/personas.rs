//! sdk-persona: personas (everything downstream keys on persona_id), their
//! roles, and crypto-shredding. Each persona has its own data key; its
//! attributes are sealed under it, so destroying the key makes them
//! unreadable without touching the person.

use axum::{
    Router,
    extract::{Path, State},
    response::Response,
    routing::{get, post},
};
use serde::Deserialize;
use serde_json::{Value, json};
use sqlx::{AssertSqlSafe, Row};

use crate::{roles, tenancy};
use hub_kernel::{
    audit::{self, events},
    crypto::{DataKey, MasterKey},
    db::{self, Tx},
    error::{ApiError, ApiResult, Body, created, ok},
    gate::{Tenant, TenantCtx, keys},
    state::{AppState, Invalidation},
    validate::{Check, path_id},
};

/// Whether `persona_id` is a persona of `tenant_id` (in any status).
pub async fn exists_in_tenant<'e, E>(exec: E, tenant_id: &str, persona_id: &str) -> ApiResult<bool>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let found: Option<String> = sqlx::query_scalar("SELECT persona_id FROM persona_persona WHERE persona_id = $1 AND tenant_id = $2")
        .bind(persona_id)
        .bind(tenant_id)
        .fetch_optional(exec)
        .await?;
    Ok(found.is_some())
}

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/personas", post(create))
        .route("/api/personas/{persona_id}", get(get_one))
        .route("/api/personas/{persona_id}/shred", post(shred))
        .route("/api/personas/{persona_id}/roles", get(roles_of))
        .route("/api/memberships/{membership_id}/personas", post(create_under_membership))
}

pub const KINDS: &[&str] = &["human", "service", "agent"];

/// Inserts a persona with a fresh data key; `attributes` are sealed under it.
pub async fn insert(
    tx: &mut Tx,
    master: &MasterKey,
    tenant_id: &str,
    membership_id: Option<&str>,
    kind: &str,
    role_template_id: Option<&str>,
    attributes: Option<&Value>,
) -> ApiResult<String> {
    let key = DataKey::create(tx, master).await?;
    let persona_id = db::new_id();
    let sealed = attributes.map(|a| key.seal(a.to_string().as_bytes(), persona_id.as_bytes()));
    sqlx::query(
        "INSERT INTO persona_persona (persona_id, tenant_id, membership_id, kind, primary_role_template_id, data_key_id, \
         attributes_envelope, status, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, 'active', $8)",
    )
    .bind(&persona_id)
    .bind(tenant_id)
    .bind(membership_id)
    .bind(kind)
    .bind(role_template_id)
    .bind(&key.key_id)
    .bind(sealed)
    .bind(db::now())
    .execute(&mut **tx)
    .await?;
    Ok(persona_id)
}

#[derive(Deserialize)]
struct NewPersona {
    kind: Option<String>,
    primary_role_template_id: Option<String>,
    attributes: Option<Value>,
}

/// Validates a persona request against the tenant's role templates; the
/// primary role may carry only permissions the caller holds.
async fn validated(state: &AppState, tx: &mut Tx, ctx: &TenantCtx, body: &NewPersona) -> ApiResult<(String, Option<String>)> {
    let mut check = Check::new();
    let kind = check.required("kind", &body.kind);
    check.one_of("kind", &kind, KINDS);
    let template = check.optional_uuid("primary_role_template_id", &body.primary_role_template_id);
    if body.attributes.as_ref().is_some_and(|a| !a.is_object() && !a.is_null()) {
        check.fail("attributes must be an object");
    }
    check.finish()?;
    let template = template.map(|t| t.to_string());
    if let Some(t) = &template {
        if !roles::visible_template(&mut **tx, &ctx.tenant_id, &ctx.app_id, t).await? {
            return Err(ApiError::invalid("primary_role_template_id does not name a role template of this tenant's app"));
        }
        let confers = roles::template_permissions(state, &ctx.tenant_id, t).await?;
        roles::contain(state, ctx, &confers, "the persona's primary role").await?;
    }
    Ok((kind, template))
}

/// The caller's membership in its tenant, if the caller is a person.
async fn caller_membership(tx: &mut Tx, ctx: &TenantCtx) -> ApiResult<Option<String>> {
    let Some(person) = &ctx.person_id else { return Ok(None) };
    tenancy::membership_of(&mut **tx, &ctx.tenant_id, person).await
}

async fn create(State(state): State<AppState>, Tenant(ctx): Tenant, Body(body): Body<NewPersona>) -> ApiResult<Response> {
    keys::require_grant(&state, &ctx, "persona.persona.write").await?;
    let mut tx = state.db.begin().await?;
    let (kind, template) = validated(&state, &mut tx, &ctx, &body).await?;
    let membership = caller_membership(&mut tx, &ctx).await?;
    let attributes = body.attributes.as_ref().filter(|a| a.is_object());
    let id = insert(&mut tx, &state.master, &ctx.tenant_id, membership.as_deref(), &kind, template.as_deref(), attributes).await?;
    tx.commit().await?;
    Ok(created(describe(&state, &ctx.tenant_id, &id).await?))
}

async fn create_under_membership(
    State(state): State<AppState>,
    Tenant(ctx): Tenant,
    Path(id): Path<String>,
    Body(body): Body<NewPersona>,
) -> ApiResult<Response> {
    keys::require_grant(&state, &ctx, "membership.membership.write").await?;
    let membership_id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    let found: Option<String> = sqlx::query_scalar("SELECT membership_id FROM tenant_membership WHERE membership_id = $1 AND tenant_id = $2")
        .bind(&membership_id)
        .bind(&ctx.tenant_id)
        .fetch_optional(&mut *tx)
        .await?;
    found.ok_or(ApiError::NotFound)?;
    let (kind, template) = validated(&state, &mut tx, &ctx, &body).await?;
    let attributes = body.attributes.as_ref().filter(|a| a.is_object());
    let id = insert(&mut tx, &state.master, &ctx.tenant_id, Some(&membership_id), &kind, template.as_deref(), attributes).await?;
    tx.commit().await?;
    Ok(created(describe(&state, &ctx.tenant_id, &id).await?))
}

/// A persona of `tenant_id` as JSON, its attributes opened when its key
/// still exists (404 for any other tenant's persona).
async fn describe(state: &AppState, tenant_id: &str, persona_id: &str) -> ApiResult<Value> {
    let row = sqlx::query(
        "SELECT persona_id, tenant_id, membership_id, kind, primary_role_template_id, data_key_id, attributes_envelope, \
         status, created_at, shredded_at FROM persona_persona WHERE persona_id = $1 AND tenant_id = $2",
    )
    .bind(persona_id)
    .bind(tenant_id)
    .fetch_optional(&state.db.read)
    .await?
    .ok_or(ApiError::NotFound)?;
    let key_id: String = row.try_get("data_key_id")?;
    let sealed: Option<Vec<u8>> = row.try_get("attributes_envelope")?;
    let attributes = match (sealed, DataKey::load(&state.db.read, &state.master, &key_id).await?) {
        (Some(sealed), Some(key)) => Some(serde_json::from_slice::<Value>(&key.open(&sealed, persona_id.as_bytes())?).unwrap_or(Value::Null)),
        _ => None,
    };
    Ok(json!({
        "persona_id": row.try_get::<String, _>("persona_id")?,
        "tenant_id": row.try_get::<String, _>("tenant_id")?,
        "membership_id": row.try_get::<Option<String>, _>("membership_id")?,
        "kind": row.try_get::<String, _>("kind")?,
        "primary_role_template_id": row.try_get::<Option<String>, _>("primary_role_template_id")?,
        "status": row.try_get::<String, _>("status")?,
        "attributes": attributes,
        "created_at": row.try_get::<String, _>("created_at")?,
        "shredded_at": row.try_get::<Option<String>, _>("shredded_at")?,
    }))
}

async fn get_one(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Response> {
    let id = path_id(&id)?.to_string();
    Ok(ok(describe(&state, &ctx.tenant_id, &id).await?))
}

/// Crypto-shreds a persona: its data key is destroyed (so its sealed data
/// can never be read again) and it loses every authority. The person and
/// their other personas are untouched. Repeating it answers the same.
async fn shred(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Response> {
    keys::require_grant(&state, &ctx, "persona.persona.write").await?;
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    let row = sqlx::query("SELECT data_key_id, status FROM persona_persona WHERE persona_id = $1 AND tenant_id = $2")
        .bind(&id)
        .bind(&ctx.tenant_id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or(ApiError::NotFound)?;
    let status: String = row.try_get("status")?;
    if status != "shredded" {
        let key_id: String = row.try_get("data_key_id")?;
        DataKey::destroy(&mut tx, &key_id).await?;
        sqlx::query("UPDATE persona_persona SET status = 'shredded', shredded_at = $1 WHERE persona_id = $2")
            .bind(db::now())
            .bind(&id)
            .execute(&mut *tx)
            .await?;
        audit::record(&mut tx, &ctx, events::PERSONA_SHREDDED, json!({ "persona_id": id })).await?;
    }
    tx.commit().await?;
    state.invalidate(Invalidation::Roles).await;
    Ok(ok(describe(&state, &ctx.tenant_id, &id).await?))
}

async fn roles_of(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Response> {
    let id = path_id(&id)?.to_string();
    // The tenant's own personas, and its test keys' in its sandbox.
    let exists: Option<String> = sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT persona_id FROM persona_persona WHERE persona_id = $1 AND {}",
        tenancy::own_or_sandbox("tenant_id", 2)
    )))
    .bind(&id)
    .bind(&ctx.tenant_id)
    .fetch_optional(&state.db.read)
    .await?;
    exists.ok_or(ApiError::NotFound)?;
    let held = roles::held_by(&state.db.read, &id).await?;
    let effective = keys::permissions(&state, &id).await?;
    Ok(ok(json!({ "persona_id": id, "roles": held, "effective_permissions": *effective })))
}
