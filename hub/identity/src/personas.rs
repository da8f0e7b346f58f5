//! sdk-persona: personas (everything downstream keys on persona_id), their
//! roles, and crypto-shredding. Each persona has its own data key; its
//! attributes are sealed under it, so destroying the key makes them
//! unreadable without touching the person.
//!
//! This module owns persona_persona: other modules read and write personas
//! through its functions.

use sqlx::AssertSqlSafe;

use crate::{
    roles::{self, HeldRole},
    tenancy,
};
use hub_kernel::prelude::*;
use hub_kernel::{
    crypto::{DataKey, MasterKey},
    gate::keys,
    state::Invalidation,
};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create))
        .routes(routes!(get_one))
        .routes(routes!(shred))
        .routes(routes!(roles_of))
        .routes(routes!(create_under_membership))
}

stored_enum! {
    /// What a persona acts for: `human`, `service` (a key's synthetic
    /// persona) or `agent`.
    #[schema(as = PersonaKind)]
    pub enum PersonaKind { Human = "human", Service = "service", Agent = "agent" }
}

stored_enum! {
    /// Whether a persona still acts: `shredded` once its key is destroyed.
    #[schema(as = PersonaStatus)]
    pub enum PersonaStatus { Active = "active", Shredded = "shredded" }
}

/// A persona: what everything downstream keys on.
// A persona row. Its key and sealed attributes stay out of every answer:
// the attributes are shown opened, beside the row (`Described`).
#[derive(Debug, FromRow, Serialize, ToSchema)]
pub struct Persona {
    pub persona_id: String,
    pub tenant_id: String,
    /// Null for a key's synthetic persona.
    pub membership_id: Option<String>,
    pub kind: PersonaKind,
    pub primary_role_template_id: Option<String>,
    #[serde(skip)]
    pub data_key_id: String,
    #[serde(skip)]
    pub attributes_envelope: Option<Vec<u8>>,
    pub status: PersonaStatus,
    pub created_at: Timestamp,
    pub shredded_at: Option<Timestamp>,
}

const COLUMNS: &str = "persona_id, tenant_id, membership_id, kind, primary_role_template_id, data_key_id, attributes_envelope, status, created_at, shredded_at";

/// The personas matching `filter`, a condition over `$1..$n` written in
/// this crate (never request text).
fn select(filter: &str) -> AssertSqlSafe<String> {
    AssertSqlSafe(format!("SELECT {COLUMNS} FROM persona_persona WHERE {filter}"))
}

/// The persona `persona_id`, in whichever tenant.
pub async fn find<'e, E>(exec: E, persona_id: &str) -> ApiResult<Option<Persona>>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    Ok(sqlx::query_as(select("persona_id = $1")).bind(persona_id).fetch_optional(exec).await?)
}

/// The persona `persona_id` of `tenant_id`, if it is one.
async fn find_in_tenant<'e, E>(exec: E, tenant_id: &str, persona_id: &str) -> ApiResult<Option<Persona>>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    Ok(sqlx::query_as(select("persona_id = $1 AND tenant_id = $2")).bind(persona_id).bind(tenant_id).fetch_optional(exec).await?)
}

/// A persona as guarded writes name it: a grant to it locks its row, so a
/// shred and a grant never both pass.
pub const PERSONA: Stateful = Stateful { noun: "persona", table: "persona_persona", key: "persona_id", state: "status" };

/// The persona `persona_id` if `tenant_id` administers it: the tenant's
/// own, or a test key's in the tenant's sandbox.
pub async fn find_administered<'e, E>(exec: E, tenant_id: &str, persona_id: &str) -> ApiResult<Option<Persona>>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let filter = format!("persona_id = $1 AND {}", tenancy::own_or_sandbox("tenant_id", 2));
    Ok(sqlx::query_as(select(&filter)).bind(persona_id).bind(tenant_id).fetch_optional(exec).await?)
}

/// Whether `persona_id` is a persona of `tenant_id` (in any status).
pub async fn exists_in_tenant<'e, E>(exec: E, tenant_id: &str, persona_id: &str) -> ApiResult<bool>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    Ok(find_in_tenant(exec, tenant_id, persona_id).await?.is_some())
}

/// The active personas of a membership, oldest first (the first is the
/// person's primary persona in the tenant).
pub async fn active_of_membership<'e, E>(exec: E, membership_id: &str) -> ApiResult<Vec<String>>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    Ok(sqlx::query_scalar("SELECT persona_id FROM persona_persona WHERE membership_id = $1 AND status = 'active' ORDER BY created_at, persona_id")
        .bind(membership_id)
        .fetch_all(exec)
        .await?)
}

/// Inserts a persona with a fresh data key; `attributes` are sealed under it.
pub async fn insert(
    tx: &mut Tx,
    master: &MasterKey,
    tenant_id: &str,
    membership_id: Option<&str>,
    kind: PersonaKind,
    role_template_id: Option<&str>,
    attributes: Option<&Value>,
) -> ApiResult<Persona> {
    let key = DataKey::create(tx, master).await?;
    let persona_id = db::new_id();
    let sealed = attributes.map(|a| key.seal(a.to_string().as_bytes(), persona_id.as_bytes()));
    let sql = format!(
        "INSERT INTO persona_persona (persona_id, tenant_id, membership_id, kind, primary_role_template_id, data_key_id, \
         attributes_envelope, status, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, 'active', $8) RETURNING {COLUMNS}"
    );
    Ok(sqlx::query_as(AssertSqlSafe(sql))
        .bind(&persona_id)
        .bind(tenant_id)
        .bind(membership_id)
        .bind(kind)
        .bind(role_template_id)
        .bind(&key.key_id)
        .bind(sealed)
        .bind(db::now())
        .fetch_one(&mut **tx)
        .await?)
}

/// A persona and its attributes.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = DescribedPersona)]
struct Described {
    #[serde(flatten)]
    persona: Persona,
    /// The persona's attributes, opened: null when it has none or once it
    /// is shredded.
    #[schema(value_type = Option<Object>)]
    attributes: Option<Value>,
}

impl Described {
    /// Opens the persona's attributes with its key, if the key still exists.
    async fn open(state: &AppState, persona: Persona) -> ApiResult<Described> {
        let attributes = match (&persona.attributes_envelope, DataKey::load(&state.db.read, &state.master, &persona.data_key_id).await?) {
            (Some(sealed), Some(key)) => Some(serde_json::from_slice::<Value>(&key.open(sealed, persona.persona_id.as_bytes())?).unwrap_or(Value::Null)),
            _ => None,
        };
        Ok(Described { persona, attributes })
    }
}

/// A new persona.
#[derive(Deserialize, ToSchema)]
struct NewPersona {
    kind: PersonaKind,
    /// A role template of the tenant's app, conferring only permissions the
    /// caller holds.
    #[schema(format = "uuid")]
    primary_role_template_id: Option<String>,
    /// Sealed under the persona's own data key (what shredding destroys).
    #[schema(value_type = Option<Object>)]
    attributes: Option<serde_json::Map<String, Value>>,
}

/// Validates a persona request against the tenant's role templates; the
/// primary role may carry only permissions the caller holds.
async fn validated(state: &AppState, tx: &mut Tx, ctx: &TenantCtx, body: &NewPersona) -> ApiResult<(PersonaKind, Option<String>)> {
    let kind = body.kind;
    let template = canonical_uuid_opt(&body.primary_role_template_id);
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

/// The event of a persona created through the API (never its attributes,
/// which are sealed and shreddable).
async fn record_created(tx: &mut Tx, ctx: &TenantCtx, persona: &Persona) -> ApiResult<()> {
    let payload = json!({ "persona_id": persona.persona_id, "membership_id": persona.membership_id, "kind": persona.kind });
    audit::record(tx, ctx, events::PERSONA_CREATED, payload).await?;
    Ok(())
}

/// Creates a persona in the caller's tenant (under the caller's membership, for a person).
#[utoipa::path(post, path = "/api/personas", tag = "sdk-persona", request_body = NewPersona,
    extensions(("x-concurrency" = json!({"outcome": "independent", "body": {"kind": "human"}}))),
    responses((status = 201, description = "the persona", body = Data<Described>)))]
async fn create(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewPersona>) -> ApiResult<Created<Described>> {
    keys::require_grant(&state, &ctx, "persona.persona.write").await?;
    let body = body.checked()?;
    let mut tx = state.db.begin().await?;
    let (kind, template) = validated(&state, &mut tx, &ctx, &body).await?;
    let membership = caller_membership(&mut tx, &ctx).await?;
    let attributes = body.attributes.map(Value::Object);
    let attributes = attributes.as_ref();
    let persona = insert(&mut tx, &state.master, &ctx.tenant_id, membership.as_deref(), kind, template.as_deref(), attributes).await?;
    record_created(&mut tx, &ctx, &persona).await?;
    tx.commit().await?;
    // The attributes just sealed are the ones the persona holds.
    Ok(created(Described { persona, attributes: attributes.cloned() }))
}

/// Creates a further persona under a membership of the caller's tenant.
#[utoipa::path(post, path = "/api/memberships/{membership_id}/personas", tag = "sdk-persona",
    params(("membership_id" = String, Path, description = "the membership")), request_body = NewPersona,
    extensions(("x-concurrency" = json!({"outcome": "independent", "given": [["POST", "/api/auth/register", {"email": "m-{unique}@races.example.com", "password": "correct horse battery", "display_name": "Twin"}], ["POST", "/api/memberships", {"person_id": "{person_id}"}]], "body": {"kind": "human"}}))),
    responses((status = 201, description = "the persona", body = Data<Described>)))]
async fn create_under_membership(
    State(state): State<AppState>,
    Tenant(ctx): Tenant,
    Path(id): Path<String>,
    body: Body<NewPersona>,
) -> ApiResult<Created<Described>> {
    keys::require_grant(&state, &ctx, "membership.membership.write").await?;
    let membership_id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    tenancy::find_membership(&mut *tx, &ctx.tenant_id, &membership_id).await?.ok_or(ApiError::NotFound)?;
    let body = body.checked()?;
    let (kind, template) = validated(&state, &mut tx, &ctx, &body).await?;
    let attributes = body.attributes.map(Value::Object);
    let attributes = attributes.as_ref();
    let persona = insert(&mut tx, &state.master, &ctx.tenant_id, Some(&membership_id), kind, template.as_deref(), attributes).await?;
    record_created(&mut tx, &ctx, &persona).await?;
    tx.commit().await?;
    Ok(created(Described { persona, attributes: attributes.cloned() }))
}

/// A persona of the caller's tenant, with its attributes (null once shredded).
#[utoipa::path(get, path = "/api/personas/{persona_id}", tag = "sdk-persona",
    params(("persona_id" = String, Path, description = "the persona")),
    responses((status = 200, description = "the persona", body = Data<Described>)))]
async fn get_one(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Described>> {
    let id = path_id(&id)?.to_string();
    let persona = find_in_tenant(&state.db.read, &ctx.tenant_id, &id).await?.ok_or(ApiError::NotFound)?;
    Ok(ok(Described::open(&state, persona).await?))
}

/// Crypto-shreds a persona without erasing its person.
///
/// Its data key is destroyed (so its sealed data can never be read again)
/// and it loses every authority. The person and their other personas are
/// untouched. Repeating it answers the same.
#[utoipa::path(post, path = "/api/personas/{persona_id}/shred", tag = "sdk-persona",
    params(("persona_id" = String, Path, description = "the persona")),
    responses((status = 200, description = "the persona, shredded (its attributes null)", body = Data<Described>)),
    extensions(("x-concurrency" = json!({ "outcome": "same-answer", "given": [["POST", "/api/personas", { "kind": "human" }]] }))))]
async fn shred(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Described>> {
    keys::require_grant(&state, &ctx, "persona.persona.write").await?;
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    // The persona is shredded once: of several shreds at once, the one that
    // moves it destroys its key and records the event; the others, like a
    // repeat, answer the persona as that one left it.
    let sql = format!(
        "UPDATE persona_persona SET status = 'shredded', shredded_at = $3 WHERE tenant_id = $1 AND persona_id = $2 AND status <> 'shredded' RETURNING {COLUMNS}"
    );
    let moved: Option<Persona> = sqlx::query_as(AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).bind(db::now()).fetch_optional(&mut *tx).await?;
    let persona = match moved {
        Some(persona) => {
            DataKey::destroy(&mut tx, &persona.data_key_id).await?;
            audit::record(&mut tx, &ctx, events::PERSONA_SHREDDED, json!({ "persona_id": id })).await?;
            persona
        }
        None => find_in_tenant(&mut *tx, &ctx.tenant_id, &id).await?.ok_or(ApiError::NotFound)?,
    };
    tx.commit().await?;
    state.invalidate(Invalidation::Roles).await;
    // A shredded persona's key is gone: its attributes can never be opened.
    Ok(ok(Described { persona, attributes: None }))
}

/// The roles a persona holds and the permissions they add up to.
#[derive(Serialize, ToSchema)]
struct PersonaRoles {
    persona_id: String,
    /// Its primary template, then its live grants, oldest first.
    roles: Vec<HeldRole>,
    /// The scopes its roles grant, inherited ones included (none once shredded).
    effective_permissions: Vec<String>,
}

/// A persona's roles and effective permissions (read-only).
#[utoipa::path(get, path = "/api/personas/{persona_id}/roles", tag = "sdk-persona",
    params(("persona_id" = String, Path, description = "the persona")),
    responses((status = 200, description = "the persona's roles", body = Data<PersonaRoles>)))]
async fn roles_of(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<PersonaRoles>> {
    let id = path_id(&id)?.to_string();
    // The tenant's own personas, and its test keys' in its sandbox.
    let persona = find_administered(&state.db.read, &ctx.tenant_id, &id).await?.ok_or(ApiError::NotFound)?;
    let roles = roles::held_by(&state.db.read, &persona).await?;
    let effective = keys::permissions(&state, &id).await?;
    Ok(ok(PersonaRoles { persona_id: id, roles, effective_permissions: effective.to_vec() }))
}

#[cfg(test)]
mod tests {
    use utoipa::PartialSchema;

    use super::*;

    #[test]
    fn the_documented_kinds_are_the_validated_ones() {
        let words: Vec<&str> = PersonaKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(serde_json::to_value(PersonaKind::schema()).unwrap()["enum"], json!(words));
    }
}
