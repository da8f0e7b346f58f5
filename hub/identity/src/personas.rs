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
        .routes(routes!(create, list))
        .routes(routes!(get_one, update))
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
    /// Whether a persona still acts: `revoked` once its membership is
    /// revoked (it holds no permission), `shredded` once its key is
    /// destroyed.
    #[schema(as = PersonaStatus)]
    pub enum PersonaStatus { Active = "active", Revoked = "revoked", Shredded = "shredded" }
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

/// Queues the changes of a tenant's owners one after another (PostgreSQL's
/// transaction lock on the tenant's name; SQLite has one writer): a route
/// that may remove or demote an owner takes it before any row lock, so that
/// two removals at once cannot each leave the other as the last owner.
pub async fn queue_owner_changes(tx: &mut Tx, tenant_id: &str) -> ApiResult<()> {
    db::change::serialize(tx, &format!("tenant-owners:{tenant_id}")).await
}

/// The personas a change takes the owner role from.
pub enum Owners<'a> {
    /// Every persona of a membership (its removal).
    OfMembership(&'a str),
    /// The personas of a membership whose primary role is the template (a
    /// change of the membership's role).
    OfMembershipWithRole(&'a str, &'a str),
    /// One persona (a change of its primary role).
    Persona(&'a str),
}

/// Refuses (409) a change that takes the owner role from the tenant's last
/// owners. An owner is an active persona of an active membership whose
/// primary role is a template named `owner` (the platform default or the
/// tenant's own). Call after [`queue_owner_changes`], in the same
/// transaction.
pub async fn keep_an_owner(tx: &mut Tx, tenant_id: &str, owners: Owners<'_>) -> ApiResult<()> {
    let (targeted, binds): (&str, Vec<&str>) = match owners {
        Owners::OfMembership(m) => ("p.membership_id = $2", vec![m]),
        Owners::OfMembershipWithRole(m, r) => ("p.membership_id = $2 AND p.primary_role_template_id = $3", vec![m, r]),
        Owners::Persona(p) => ("p.persona_id = $2", vec![p]),
    };
    let sql = format!(
        "SELECT COALESCE(SUM(CASE WHEN {targeted} THEN 1 ELSE 0 END), 0) AS targeted, COALESCE(SUM(CASE WHEN {targeted} THEN 0 ELSE 1 END), 0) AS others \
         FROM persona_persona p JOIN tenant_membership m ON m.membership_id = p.membership_id \
         JOIN tenant_role_template t ON t.role_template_id = p.primary_role_template_id \
         WHERE p.tenant_id = $1 AND p.status = 'active' AND m.status = 'active' AND t.name = '{}'",
        roles::OWNER
    );
    let mut query = sqlx::query_as::<_, (i64, i64)>(AssertSqlSafe(sql)).bind(tenant_id);
    for b in binds {
        query = query.bind(b);
    }
    let (targeted, others) = query.fetch_one(&mut **tx).await?;
    if targeted > 0 && others == 0 {
        return Err(ApiError::Conflict("the tenant's last owner cannot be removed or demoted: make another member an owner first".into()));
    }
    Ok(())
}

/// Revokes the active personas of a membership (its removal from the
/// tenant); answers their ids, in order.
pub async fn revoke_of_membership(tx: &mut Tx, membership_id: &str) -> ApiResult<Vec<String>> {
    let mut ids: Vec<String> =
        sqlx::query_scalar("UPDATE persona_persona SET status = 'revoked' WHERE membership_id = $1 AND status = 'active' RETURNING persona_id")
            .bind(membership_id)
            .fetch_all(&mut **tx)
            .await?;
    ids.sort();
    Ok(ids)
}

/// Gives the active personas of a membership whose primary role is `old`
/// the primary role `new` (a change of the membership's role).
pub async fn reassign_primary(tx: &mut Tx, membership_id: &str, old: &str, new: &str) -> ApiResult<()> {
    sqlx::query("UPDATE persona_persona SET primary_role_template_id = $3 WHERE membership_id = $1 AND status = 'active' AND primary_role_template_id = $2")
        .bind(membership_id)
        .bind(old)
        .bind(new)
        .execute(&mut **tx)
        .await?;
    Ok(())
}

const PERSONAS: Listing = Listing {
    table: "persona_persona",
    columns: COLUMNS,
    filter: "tenant_id = $1 AND ($2 = '' OR kind = $2) AND ($3 = '' OR membership_id = $3) AND ($4 = '' OR status = $4)",
    order: "created_at DESC, persona_id DESC",
};

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct PersonaFilter {
    /// Only personas of this kind.
    #[param(inline)]
    kind: Option<PersonaKind>,
    /// Only the personas of this membership.
    #[param(format = "uuid")]
    membership_id: Option<String>,
    /// Only personas in this status.
    #[param(inline)]
    status: Option<PersonaStatus>,
}

/// The personas of the caller's tenant, newest first. Their attributes are
/// not listed: `GET /api/personas/{persona_id}` opens them one at a time.
#[utoipa::path(get, path = "/api/personas", tag = "sdk-persona", params(PersonaFilter, Page),
    responses((status = 200, description = "one page of personas", body = ListOf<Persona>)))]
async fn list(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page, Params(q): Params<PersonaFilter>) -> ApiResult<ListOf<Persona>> {
    let kind = q.kind.map_or("", PersonaKind::as_str);
    let membership = canonical_uuid_opt(&q.membership_id).unwrap_or_default();
    let status = q.status.map_or("", PersonaStatus::as_str);
    page.list::<Persona>(&state.db.read, &PERSONAS, &[&ctx.tenant_id, kind, &membership, status]).await
}

/// A change of a persona: what is absent stays.
#[derive(Deserialize, ToSchema)]
#[schema(as = PersonaChange)]
struct PersonaChange {
    /// A role template of the tenant's app; the caller must hold what it
    /// confers and what the persona's current primary role confers.
    #[schema(format = "uuid")]
    primary_role_template_id: Option<String>,
    /// Replaces the persona's attributes, sealed under its own data key.
    #[schema(value_type = Option<Object>)]
    attributes: Option<serde_json::Map<String, Value>>,
}

/// Changes an active persona's primary role or attributes (at least one is
/// given). A change of role takes effect on the next request; the tenant's
/// last owner cannot be demoted (409), a revoked or shredded persona cannot
/// be changed (409).
#[utoipa::path(patch, path = "/api/personas/{persona_id}", tag = "sdk-persona", request_body = PersonaChange,
    params(("persona_id" = String, Path, description = "the persona")),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/personas", { "kind": "human" }]], "body": { "attributes": { "title": "racer" } } }))),
    responses((status = 200, description = "the persona", body = Data<Described>),
        (status = 409, description = "Conflict: the persona is revoked or shredded, or is the tenant's last owner", body = ErrorBody)))]
async fn update(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<PersonaChange>) -> ApiResult<Data<Described>> {
    keys::require_grant(&state, &ctx, "persona.persona.write").await?;
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    queue_owner_changes(&mut tx, &ctx.tenant_id).await?;
    // The persona's row stays locked until the change is committed: a
    // shred or a grant at the same time queues behind it.
    let status: PersonaStatus = PERSONA.lock(&mut tx, &ctx.tenant_id, &id).await?.ok_or(ApiError::NotFound)?;
    let body = body.checked()?;
    let template = canonical_uuid_opt(&body.primary_role_template_id);
    if template.is_none() && body.attributes.is_none() {
        return Err(ApiError::invalid("give at least one of primary_role_template_id, attributes"));
    }
    if status != PersonaStatus::Active {
        return Err(ApiError::Conflict(format!("the persona is {status}: only an active persona can be changed")));
    }
    let persona = find_in_tenant(&mut *tx, &ctx.tenant_id, &id).await?.ok_or(ApiError::NotFound)?;
    let changed_role = template.filter(|t| persona.primary_role_template_id.as_ref() != Some(t));
    if let Some(t) = &changed_role {
        if !roles::visible_template(&mut *tx, &ctx.tenant_id, &ctx.app_id, t).await? {
            return Err(ApiError::invalid("primary_role_template_id does not name a role template of this tenant's app"));
        }
        // What the persona loses and what it gains: the caller holds both.
        let mut confers = roles::template_permissions(&state, &ctx.tenant_id, t).await?;
        if let Some(old) = &persona.primary_role_template_id {
            confers.extend(roles::template_permissions(&state, &ctx.tenant_id, old).await?);
        }
        roles::contain(&state, &ctx, &confers, "the persona's primary role").await?;
        if !roles::is_owner_template(&mut tx, t).await? {
            keep_an_owner(&mut tx, &ctx.tenant_id, Owners::Persona(&id)).await?;
        }
    }
    let attributes = body.attributes.map(Value::Object);
    let sealed = match &attributes {
        Some(a) => {
            let key = DataKey::load(&mut *tx, &state.master, &persona.data_key_id)
                .await?
                .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("the data key of active persona {id} is missing")))?;
            Some(key.seal(a.to_string().as_bytes(), id.as_bytes()))
        }
        None => None,
    };
    let sql = format!(
        "UPDATE persona_persona SET primary_role_template_id = COALESCE($3, primary_role_template_id), attributes_envelope = COALESCE($4, attributes_envelope) \
         WHERE tenant_id = $1 AND persona_id = $2 AND status = 'active' RETURNING {COLUMNS}"
    );
    let persona: Persona = sqlx::query_as(AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).bind(&changed_role).bind(sealed).fetch_one(&mut *tx).await?;
    let payload = json!({ "persona_id": id, "primary_role_template_id": changed_role, "attributes_changed": attributes.is_some() });
    audit::record(&mut tx, &ctx, events::PERSONA_UPDATED, payload).await?;
    tx.commit().await?;
    if changed_role.is_some() {
        state.invalidate(Invalidation::Roles).await;
    }
    match attributes {
        Some(attributes) => Ok(ok(Described { persona, attributes: Some(attributes) })),
        None => Ok(ok(Described::open(&state, persona).await?)),
    }
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
