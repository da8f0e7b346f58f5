//! Role templates and role grants, and the resolution of a persona's
//! effective permissions at request time.
//!
//! A template is keyed on (tenant, app, name): tenant NULL is the platform
//! default for the app, a tenant's template of the same name overrides it.
//! `parent_role_template_id` gives inheritance. Permissions are a JSON map
//! of scope pattern to `true`. Nothing here is carried in a token, so a
//! revoked grant takes effect on the next request.
//!
//! This module owns tenant_role_template and persona_role_assignment; the
//! personas it grants roles to are read through personas.

use std::collections::{HashMap, HashSet};

use serde_json::Map;
use sqlx::AssertSqlSafe;

use crate::{
    personas::{self, Persona, PersonaStatus},
    tenancy,
};
use hub_kernel::prelude::*;
use hub_kernel::{
    gate::{keys, scope},
    state::Invalidation,
};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_template, list_templates))
        .routes(routes!(get_template, update_template, delete_template))
        .routes(routes!(assign, list_assignments))
        .routes(routes!(revoke))
}

pub const OWNER: &str = "owner";
pub const MEMBER: &str = "member";

/// Creates the platform default templates of a new app: `owner` (every
/// scope) and `member` (nothing until granted). Returns the owner's id.
pub async fn seed_platform_defaults(tx: &mut Tx, app_id: &str) -> ApiResult<String> {
    let now = db::now();
    let mut owner = String::new();
    for (name, perms) in [(OWNER, json!({ "*": true })), (MEMBER, json!({}))] {
        let id = db::new_id();
        sqlx::query(
            "INSERT INTO tenant_role_template (role_template_id, tenant_id, tenant_key, app_id, name, permissions, created_at) \
             VALUES ($1, NULL, '', $2, $3, $4, $5)",
        )
        .bind(&id)
        .bind(app_id)
        .bind(name)
        .bind(perms.to_string())
        .bind(&now)
        .execute(&mut **tx)
        .await?;
        if name == OWNER {
            owner = id;
        }
    }
    Ok(owner)
}

/// The template `name` of an app kept under `tenant_key` (a tenant's id, or
/// '' for the platform default), if there is one.
async fn template_named(tx: &mut Tx, tenant_key: &str, app_id: &str, name: &str) -> ApiResult<Option<String>> {
    Ok(sqlx::query_scalar("SELECT role_template_id FROM tenant_role_template WHERE tenant_key = $1 AND app_id = $2 AND name = $3")
        .bind(tenant_key)
        .bind(app_id)
        .bind(name)
        .fetch_optional(&mut **tx)
        .await?)
}

/// The platform default template `name` of an app.
pub async fn platform_template(tx: &mut Tx, app_id: &str, name: &str) -> ApiResult<String> {
    template_named(tx, "", app_id, name).await?.ok_or_else(|| ApiError::Internal(anyhow::anyhow!("app {app_id} has no platform template {name}")))
}

/// Whether a template may be used by a tenant of `app_id`: a platform
/// default of that app or the tenant's own.
pub async fn visible_template<'e, E>(exec: E, tenant_id: &str, app_id: &str, role_template_id: &str) -> ApiResult<bool>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let found: Option<String> =
        sqlx::query_scalar("SELECT role_template_id FROM tenant_role_template WHERE role_template_id = $1 AND app_id = $2 AND tenant_key IN ('', $3)")
            .bind(role_template_id)
            .bind(app_id)
            .bind(tenant_id)
            .fetch_optional(exec)
            .await?;
    Ok(found.is_some())
}

/// Whether `role_template_id` is a template named `owner` (the platform
/// default or a tenant's own of that name).
pub async fn is_owner_template(tx: &mut Tx, role_template_id: &str) -> ApiResult<bool> {
    let name: Option<String> =
        sqlx::query_scalar("SELECT name FROM tenant_role_template WHERE role_template_id = $1").bind(role_template_id).fetch_optional(&mut **tx).await?;
    Ok(name.as_deref() == Some(OWNER))
}

/// The names of the templates `ids`, by id, in one read.
pub async fn template_names(pool: &sqlx::AnyPool, ids: &[&str]) -> ApiResult<HashMap<String, String>> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let marks: Vec<String> = (1..=ids.len()).map(|n| format!("${n}")).collect();
    let sql = format!("SELECT role_template_id, name FROM tenant_role_template WHERE role_template_id IN ({})", marks.join(", "));
    let mut query = sqlx::query_as::<_, (String, String)>(AssertSqlSafe(sql));
    for id in ids {
        query = query.bind(*id);
    }
    Ok(query.fetch_all(pool).await?.into_iter().collect())
}

/// A persona's effective permissions (the gate's `KeyDirectory` lookup;
/// the gate caches them until a role changes).
pub async fn resolve(pool: &sqlx::AnyPool, persona_id: &str) -> ApiResult<Vec<String>> {
    let Some(persona) = personas::find(pool, persona_id).await? else { return Ok(Vec::new()) };
    if persona.status != PersonaStatus::Active {
        return Ok(Vec::new());
    }
    let mut templates: Vec<String> = persona.primary_role_template_id.into_iter().collect();
    let granted: Vec<String> = sqlx::query_scalar("SELECT role_template_id FROM persona_role_assignment WHERE persona_id = $1 AND revoked_at IS NULL")
        .bind(persona_id)
        .fetch_all(pool)
        .await?;
    templates.extend(granted);
    expand(pool, &persona.tenant_id, templates).await
}

/// The permissions that `templates` confer in `tenant_id`: each template's
/// own and its parents', with the tenant's overrides applied.
async fn expand(pool: &sqlx::AnyPool, tenant_id: &str, templates: Vec<String>) -> ApiResult<Vec<String>> {
    let mut perms: Vec<String> = Vec::new();
    let mut seen = HashSet::new();
    for start in templates {
        let mut next = Some(start);
        let mut depth = 0;
        while let Some(id) = next.take() {
            depth += 1;
            if depth > 16 || !seen.insert(id.clone()) {
                break;
            }
            let Some(t) = effective_template(pool, tenant_id, &id).await? else { break };
            perms.extend(granted_scopes(&t.permissions));
            next = t.parent;
        }
    }
    perms.sort();
    perms.dedup();
    Ok(perms)
}

/// The scopes a template's permission map grants (those mapped to `true`).
fn granted_scopes(permissions: &str) -> Vec<String> {
    match serde_json::from_str::<Value>(permissions) {
        Ok(Value::Object(map)) => map.into_iter().filter(|(_, v)| v.as_bool() == Some(true)).map(|(k, _)| k).collect(),
        _ => Vec::new(),
    }
}

/// The permissions that holding `role_template_id` confers in `tenant_id`.
pub async fn template_permissions(state: &AppState, tenant_id: &str, role_template_id: &str) -> ApiResult<Vec<String>> {
    expand(&state.db.read, tenant_id, vec![role_template_id.to_string()]).await
}

/// Containment: nobody hands on a permission they do not hold. `wanted`
/// (the scopes of a key, or the permissions a role, template or membership
/// carries) must each be covered by the acting persona's effective
/// permissions and, for a machine caller, by its own scopes too; otherwise
/// 403 naming the scopes not held.
pub async fn contain(state: &AppState, ctx: &TenantCtx, wanted: &[String], what: &str) -> ApiResult<()> {
    let held = keys::permissions(state, &ctx.persona_id).await?;
    let missing: Vec<String> =
        wanted.iter().filter(|w| !scope::any_covers(&held, w) || ctx.key_scopes.as_ref().is_some_and(|k| !scope::any_covers(k, w))).cloned().collect();
    if missing.is_empty() {
        return Ok(());
    }
    let granted = match &ctx.key_scopes {
        Some(k) => scope::intersect(&held, k),
        None => held.to_vec(),
    };
    Err(ApiError::Forbidden {
        details: vec![format!("{what} would grant permissions the caller does not hold: {}", missing.join(", "))],
        scopes: Some((missing, granted)),
    })
}

/// A template as a tenant sees it: its permission map and its parent.
#[derive(Debug, FromRow)]
struct EffectiveTemplate {
    permissions: String,
    parent: Option<String>,
}

/// A template as the tenant sees it: a platform default is replaced by the
/// tenant's template of the same name, if the tenant has one.
async fn effective_template(pool: &sqlx::AnyPool, tenant_id: &str, id: &str) -> ApiResult<Option<EffectiveTemplate>> {
    Ok(sqlx::query_as(
        "SELECT COALESCE(o.permissions, t.permissions) AS permissions, \
                CASE WHEN o.role_template_id IS NULL THEN t.parent_role_template_id ELSE o.parent_role_template_id END AS parent \
         FROM tenant_role_template t \
         LEFT JOIN tenant_role_template o ON t.tenant_key = '' AND o.tenant_key = $2 AND o.app_id = t.app_id AND o.name = t.name \
         WHERE t.role_template_id = $1",
    )
    .bind(id)
    .bind(tenant_id)
    .fetch_optional(pool)
    .await?)
}

/// A role template of a tenant.
#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = RoleTemplate)]
struct Template {
    role_template_id: Id,
    /// Null for a platform default of the app.
    tenant_id: Option<String>,
    app_id: String,
    name: String,
    parent_role_template_id: Option<String>,
    /// Scope pattern to boolean: `true` grants.
    #[sqlx(try_from = "String")]
    #[schema(value_type = HashMap<String, bool>)]
    permissions: JsonText,
    created_at: Timestamp,
}

const TEMPLATE_COLUMNS: &str = "role_template_id, tenant_id, app_id, name, parent_role_template_id, permissions, created_at";

/// A new role template of the caller's tenant.
#[derive(Deserialize, ToSchema)]
#[schema(as = NewRoleTemplate)]
struct NewTemplate {
    /// Unique in the tenant; a platform default's name (`owner`, `member`)
    /// replaces that default for the tenant.
    name: String,
    /// The caller's tenant's app (the default).
    app_id: Option<String>,
    /// A role template of the app whose permissions this one inherits.
    #[schema(format = "uuid")]
    parent_role_template_id: Option<String>,
    /// Scope pattern (`<domain>.<resource>.<action>` or a tail wildcard) to
    /// boolean: `true` grants; `{}` when absent. Only permissions the caller
    /// holds may be granted.
    // A map, not a `HashMap`, so the stored text keeps the body's order;
    // the schema has the contract check that every value is a boolean.
    #[schema(value_type = Option<HashMap<String, bool>>)]
    permissions: Option<Map<String, Value>>,
}

/// The permissions of a template whose body matched its schema (every
/// value a boolean): each key must be a scope.
fn parse_permissions(value: Option<Map<String, Value>>, check: &mut Check) -> Map<String, Value> {
    let map = value.unwrap_or_default();
    let bad: Vec<&str> = map.iter().filter(|(k, v)| !scope::is_valid(k) || !v.is_boolean()).map(|(k, _)| k.as_str()).collect();
    if !bad.is_empty() {
        check.fail(format!("permissions must map scopes (<domain>.<resource>.<action> or a tail wildcard) to booleans; bad entries: {}", bad.join(", ")));
    }
    map
}

/// Defines a role template of the caller's tenant.
#[utoipa::path(post, path = "/api/role-templates", tag = "sdk-persona", request_body = NewTemplate,
    responses((status = 201, description = "the template", body = Data<Template>)),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "body": { "name": "t-{unique}", "permissions": { "crm.contact.read": true } }, "events": 0 }))))]
async fn create_template(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewTemplate>) -> ApiResult<Created<Template>> {
    keys::require_grant(&state, &ctx, "role-template.role-template.write").await?;
    let body = body.checked()?;
    let mut check = Check::new();
    let name = body.name.trim().to_string();
    let parent = canonical_uuid_opt(&body.parent_role_template_id);
    let permissions = parse_permissions(body.permissions, &mut check);
    let app_id = Check::optional(&body.app_id).unwrap_or_else(|| ctx.app_id.clone());
    if app_id != ctx.app_id {
        check.fail("app_id must be the app_id of the caller's tenant");
    }
    check.finish()?;
    let mut tx = state.db.begin().await?;
    if let Some(parent) = &parent
        && !visible_template(&mut *tx, &ctx.tenant_id, &app_id, parent).await?
    {
        return Err(ApiError::invalid("parent_role_template_id does not name a role template of this app"));
    }
    // What the template will confer: its own grants and its parent's. A
    // template named after a platform default replaces that default for
    // the tenant, which edits every holder's roles: the caller must also
    // hold what the default grants today.
    let permissions = Value::Object(permissions).to_string();
    let mut confers = granted_scopes(&permissions);
    if let Some(parent) = &parent {
        confers.extend(template_permissions(&state, &ctx.tenant_id, parent).await?);
    }
    if let Some(replaced) = template_named(&mut tx, "", &app_id, &name).await? {
        confers.extend(template_permissions(&state, &ctx.tenant_id, &replaced).await?);
    }
    contain(&state, &ctx, &confers, "the role template").await?;
    // The unique name decides: of two templates of one name at once, one
    // is made and the other is 409.
    let sql = format!(
        "INSERT INTO tenant_role_template (role_template_id, tenant_id, tenant_key, app_id, name, parent_role_template_id, permissions, created_at) \
         VALUES ($1, $2, $2, $3, $4, $5, $6, $7) ON CONFLICT (tenant_key, app_id, name) DO NOTHING RETURNING {TEMPLATE_COLUMNS}"
    );
    let template: Option<Template> = sqlx::query_as(AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(&app_id)
        .bind(&name)
        .bind(&parent)
        .bind(permissions)
        .bind(db::now())
        .fetch_optional(&mut *tx)
        .await?;
    let template = template.ok_or_else(|| ApiError::Conflict(format!("the tenant already has a role template named '{name}'")))?;
    tx.commit().await?;
    // A new template may override a platform default in force.
    state.invalidate(Invalidation::Roles).await;
    Ok(created(template))
}

const TEMPLATES: Listing = Listing {
    table: "tenant_role_template",
    columns: TEMPLATE_COLUMNS,
    filter: "app_id = $1 AND tenant_key IN ('', $2) AND ($3 = '' OR name = $3) \
             AND ($4 = '' OR ($4 = 'platform' AND tenant_key = '') OR ($4 = 'tenant' AND tenant_key <> ''))",
    order: "created_at DESC, role_template_id DESC",
};

stored_enum! {
    /// Whose a role template is: the platform's default for the app, or
    /// the tenant's own.
    #[schema(as = RoleTemplateOwner)]
    enum TemplateOwner { Platform = "platform", Tenant = "tenant" }
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct TemplateFilter {
    /// Only templates of this name.
    #[param(max_length = 200)]
    name: Option<String>,
    /// Only the platform's defaults, or only the tenant's own.
    #[param(inline)]
    owner: Option<TemplateOwner>,
}

/// The role templates the caller's tenant may use, newest first: the
/// platform defaults of its app and its own (a tenant's template named
/// after a default replaces that default for the tenant).
#[utoipa::path(get, path = "/api/role-templates", tag = "sdk-persona", params(TemplateFilter, Page),
    responses((status = 200, description = "one page of role templates", body = ListOf<Template>)))]
async fn list_templates(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page, Params(q): Params<TemplateFilter>) -> ApiResult<ListOf<Template>> {
    let name = Check::optional(&q.name).unwrap_or_default();
    let owner = q.owner.map_or("", TemplateOwner::as_str);
    page.list::<Template>(&state.db.read, &TEMPLATES, &[&ctx.app_id, &ctx.tenant_id, &name, owner]).await
}

/// The template `id` if the caller's tenant may use it.
async fn visible<'e, E>(exec: E, ctx: &TenantCtx, id: &str) -> ApiResult<Option<Template>>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let sql = format!("SELECT {TEMPLATE_COLUMNS} FROM tenant_role_template WHERE role_template_id = $1 AND app_id = $2 AND tenant_key IN ('', $3)");
    Ok(sqlx::query_as(AssertSqlSafe(sql)).bind(id).bind(&ctx.app_id).bind(&ctx.tenant_id).fetch_optional(exec).await?)
}

/// A role template the caller's tenant may use.
#[utoipa::path(get, path = "/api/role-templates/{role_template_id}", tag = "sdk-persona",
    params(("role_template_id" = String, Path, description = "the role template")),
    responses((status = 200, description = "the template", body = Data<Template>)))]
async fn get_template(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Template>> {
    let id = path_id(&id)?.to_string();
    Ok(ok(visible(&state.db.read, &ctx, &id).await?.ok_or(ApiError::NotFound)?))
}

/// The tenant's own template `id`, locked for the rest of the transaction;
/// 409 for a platform default (which no tenant changes: a template of the
/// same name replaces it), 404 for any other.
async fn own_template(tx: &mut Tx, ctx: &TenantCtx, id: &str) -> ApiResult<Template> {
    const TEMPLATE: Stateful = Stateful { noun: "role template", table: "tenant_role_template", key: "role_template_id", state: "name" };
    if TEMPLATE.lock::<String>(tx, &ctx.tenant_id, id).await?.is_none() {
        return Err(match visible(&mut **tx, ctx, id).await? {
            Some(t) => ApiError::Conflict(format!("'{}' is a platform default: define a template of the same name to replace it for the tenant", t.name)),
            None => ApiError::NotFound,
        });
    }
    visible(&mut **tx, ctx, id).await?.ok_or(ApiError::NotFound)
}

/// A change of a role template: what is absent stays.
#[derive(Deserialize, ToSchema)]
#[schema(as = RoleTemplateChange)]
struct TemplateChange {
    /// A role template of the app whose permissions this one inherits
    /// (never itself or a template inheriting from it).
    #[schema(format = "uuid")]
    parent_role_template_id: Option<String>,
    /// Replaces the permission map: scope pattern to boolean, `true`
    /// grants. Only permissions the caller holds may be granted.
    #[schema(value_type = Option<HashMap<String, bool>>)]
    permissions: Option<Map<String, Value>>,
}

/// Whether `parent`'s chain of parents reaches `id` (so that `id`
/// inheriting from `parent` would make a circle).
async fn inherits_from(tx: &mut Tx, parent: &str, id: &str) -> ApiResult<bool> {
    let mut next = Some(parent.to_string());
    for _ in 0..32 {
        let Some(at) = next.take() else { return Ok(false) };
        if at == id {
            return Ok(true);
        }
        next = sqlx::query_scalar::<_, Option<String>>("SELECT parent_role_template_id FROM tenant_role_template WHERE role_template_id = $1")
            .bind(&at)
            .fetch_optional(&mut **tx)
            .await?
            .flatten();
    }
    Ok(true)
}

/// Changes a role template of the caller's tenant: its permissions or its
/// parent (at least one is given). Every holder's authority follows on the
/// next request; the caller must hold what the template confers now and
/// what it will confer (403 otherwise). A platform default is 409.
#[utoipa::path(patch, path = "/api/role-templates/{role_template_id}", tag = "sdk-persona", request_body = TemplateChange,
    params(("role_template_id" = String, Path, description = "the role template")),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/role-templates", { "name": "t-{unique}", "permissions": { "crm.contact.read": true } }]],
        "body": { "permissions": { "crm.contact.read": true, "crm.contact.write": true } } }))),
    responses((status = 200, description = "the template", body = Data<Template>),
        (status = 409, description = "Conflict: the template is a platform default", body = ErrorBody)))]
async fn update_template(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<TemplateChange>) -> ApiResult<Data<Template>> {
    keys::require_grant(&state, &ctx, "role-template.role-template.write").await?;
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    let current = own_template(&mut tx, &ctx, &id).await?;
    let body = body.checked()?;
    let mut check = Check::new();
    let parent = canonical_uuid_opt(&body.parent_role_template_id);
    let given = body.permissions.is_some();
    let permissions = body.permissions.map(|p| Value::Object(parse_permissions(Some(p), &mut check)).to_string());
    if !given && parent.is_none() {
        check.fail("give at least one of permissions, parent_role_template_id");
    }
    check.finish()?;
    if let Some(p) = &parent {
        if !visible_template(&mut *tx, &ctx.tenant_id, &ctx.app_id, p).await? {
            return Err(ApiError::invalid("parent_role_template_id does not name a role template of this app"));
        }
        if inherits_from(&mut tx, p, &id).await? {
            return Err(ApiError::invalid("parent_role_template_id would make the template inherit from itself"));
        }
    }
    // What holders lose and what they gain: the caller holds both.
    let mut confers = template_permissions(&state, &ctx.tenant_id, &id).await?;
    confers.extend(granted_scopes(permissions.as_deref().unwrap_or(&current.permissions.0.to_string())));
    if let Some(p) = parent.as_ref().or(current.parent_role_template_id.as_ref()) {
        confers.extend(template_permissions(&state, &ctx.tenant_id, p).await?);
    }
    contain(&state, &ctx, &confers, "the role template").await?;
    let sql = format!(
        "UPDATE tenant_role_template SET permissions = COALESCE($3, permissions), parent_role_template_id = COALESCE($4, parent_role_template_id) \
         WHERE role_template_id = $1 AND tenant_key = $2 RETURNING {TEMPLATE_COLUMNS}"
    );
    let template: Template = sqlx::query_as(AssertSqlSafe(sql)).bind(&id).bind(&ctx.tenant_id).bind(&permissions).bind(&parent).fetch_one(&mut *tx).await?;
    let payload = json!({ "role_template_id": id, "name": template.name, "permissions": given.then(|| template.permissions.0.clone()), "parent_role_template_id": parent });
    audit::record(&mut tx, &ctx, events::ROLE_TEMPLATE_UPDATED, payload).await?;
    tx.commit().await?;
    state.invalidate(Invalidation::Roles).await;
    Ok(ok(template))
}

/// A deleted role template.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = DeletedRoleTemplate)]
struct DeletedTemplate {
    role_template_id: Id,
    deleted: bool,
}

/// Whether a database error is a foreign-key violation (a row referencing
/// the one being deleted was written meanwhile).
fn referenced(e: &sqlx::Error) -> bool {
    e.as_database_error().is_some_and(|d| d.kind() == sqlx::error::ErrorKind::ForeignKeyViolation)
}

/// Deletes a role template of the caller's tenant that nothing uses: no
/// membership, persona or role grant (live or revoked, which the audit
/// trail names) and no other template refers to it (409 otherwise; a
/// platform default is 409 too). Deleting a tenant's template named after
/// a platform default restores the default for the tenant, so the caller
/// must hold what the default grants.
#[utoipa::path(delete, path = "/api/role-templates/{role_template_id}", tag = "sdk-persona",
    params(("role_template_id" = String, Path, description = "the role template")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "losers": 404, "given": [["POST", "/api/role-templates", { "name": "t-{unique}", "permissions": { "crm.contact.read": true } }]] }))),
    responses((status = 200, description = "deleted", body = Data<DeletedTemplate>),
        (status = 409, description = "Conflict: the template is in use, or a platform default", body = ErrorBody)))]
async fn delete_template(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<DeletedTemplate>> {
    keys::require_grant(&state, &ctx, "role-template.role-template.write").await?;
    let id = Id(path_id(&id)?);
    let mut tx = state.db.begin().await?;
    let current = own_template(&mut tx, &ctx, &id.to_string()).await?;
    let mut confers = template_permissions(&state, &ctx.tenant_id, &id.to_string()).await?;
    if let Some(default) = template_named(&mut tx, "", &ctx.app_id, &current.name).await? {
        confers.extend(template_permissions(&state, "", &default).await?);
    }
    contain(&state, &ctx, &confers, "deleting the role template").await?;
    let deleted: Result<Option<String>, sqlx::Error> = sqlx::query_scalar(
        "DELETE FROM tenant_role_template WHERE role_template_id = $1 AND tenant_key = $2 \
         AND NOT EXISTS (SELECT 1 FROM tenant_membership m WHERE m.role_template_id = $1) \
         AND NOT EXISTS (SELECT 1 FROM persona_persona p WHERE p.primary_role_template_id = $1) \
         AND NOT EXISTS (SELECT 1 FROM persona_role_assignment a WHERE a.role_template_id = $1) \
         AND NOT EXISTS (SELECT 1 FROM tenant_role_template c WHERE c.parent_role_template_id = $1) RETURNING role_template_id",
    )
    .bind(id)
    .bind(&ctx.tenant_id)
    .fetch_optional(&mut *tx)
    .await;
    let in_use = || ApiError::Conflict("the role template is in use: memberships, personas, role grants or other templates refer to it".into());
    match deleted {
        Ok(Some(_)) => {}
        Ok(None) => return Err(in_use()),
        Err(e) if referenced(&e) => return Err(in_use()),
        Err(e) => return Err(e.into()),
    }
    audit::record(&mut tx, &ctx, events::ROLE_TEMPLATE_DELETED, json!({ "role_template_id": id, "name": current.name })).await?;
    tx.commit().await?;
    state.invalidate(Invalidation::Roles).await;
    Ok(ok(DeletedTemplate { role_template_id: id, deleted: true }))
}

/// A role grant of a persona.
// A role assignment as revoke answers it (without `granted_by`, which that
// answer has never carried).
#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = RoleGrant)]
struct Grant {
    assignment_id: Id,
    persona_id: String,
    role_template_id: String,
    granted_at: Timestamp,
    /// Null while the grant is live.
    revoked_at: Option<Timestamp>,
}

const GRANT_COLUMNS: &str = "assignment_id, persona_id, role_template_id, granted_at, revoked_at";

/// A role assignment: the grant and who made it.
#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = RoleAssignment)]
struct Assignment {
    #[sqlx(flatten)]
    #[serde(flatten)]
    grant: Grant,
    /// The persona that granted it.
    granted_by: Option<String>,
}

/// A role to grant a persona beyond its starting template.
#[derive(Deserialize, ToSchema)]
#[schema(as = NewRoleAssignment)]
struct NewAssignment {
    /// An active persona of the tenant (or of a test key in its sandbox).
    #[schema(format = "uuid")]
    persona_id: String,
    /// A role template of the tenant's app, conferring only permissions the
    /// caller holds.
    #[schema(format = "uuid")]
    role_template_id: String,
}

/// Grants a role to a persona.
#[utoipa::path(post, path = "/api/role-assignments", tag = "sdk-persona", request_body = NewAssignment,
    extensions(("x-concurrency" = json!({"outcome": "independent", "given": [["POST", "/api/personas", {"kind": "human"}], ["POST", "/api/role-templates", {"name": "t-{unique}", "permissions": {"crm.contact.read": true}}]], "body": {"persona_id": "{persona_id}", "role_template_id": "{role_template_id}"}}))),
    responses((status = 201, description = "the assignment", body = Data<Assignment>)))]
async fn assign(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewAssignment>) -> ApiResult<Created<Assignment>> {
    keys::require_grant(&state, &ctx, "role-assignment.role-assignment.write").await?;
    let body = body.checked()?;
    let (persona, template) = (canonical_uuid(&body.persona_id), canonical_uuid(&body.role_template_id));
    let mut tx = state.db.begin().await?;
    // The persona is the tenant's own, or a test key's in its sandbox.
    let Some(Persona { tenant_id: persona_tenant, .. }) = personas::find_administered(&mut *tx, &ctx.tenant_id, &persona).await? else {
        return Err(ApiError::invalid("persona_id does not name a persona of this tenant"));
    };
    // The persona's row stays locked until the grant is committed: a shred
    // at the same time waits for it (and the grant dies with the persona),
    // or goes first and the grant is refused.
    let status: PersonaStatus = personas::PERSONA.lock(&mut tx, &persona_tenant, &persona).await?.ok_or(ApiError::NotFound)?;
    if status != PersonaStatus::Active {
        return Err(ApiError::Conflict(format!("the persona is {status}")));
    }
    if !visible_template(&mut *tx, &ctx.tenant_id, &ctx.app_id, &template).await? {
        return Err(ApiError::invalid("role_template_id does not name a role template of this tenant's app"));
    }
    contain(&state, &ctx, &template_permissions(&state, &persona_tenant, &template).await?, "the role").await?;
    let sql = format!(
        "INSERT INTO persona_role_assignment (assignment_id, tenant_id, persona_id, role_template_id, granted_by, granted_at) \
         VALUES ($1, $2, $3, $4, $5, $6) RETURNING {GRANT_COLUMNS}, granted_by"
    );
    let assignment: Assignment = sqlx::query_as(AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&persona_tenant)
        .bind(&persona)
        .bind(&template)
        .bind(&ctx.persona_id)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
    let g = &assignment.grant;
    audit::record(
        &mut tx,
        &ctx,
        events::ROLE_GRANTED,
        json!({ "assignment_id": g.assignment_id, "persona_id": g.persona_id, "role_template_id": g.role_template_id }),
    )
    .await?;
    tx.commit().await?;
    state.invalidate(Invalidation::Roles).await;
    Ok(created(assignment))
}

/// Withdraws a role grant; repeating it answers the same.
#[utoipa::path(post, path = "/api/role-assignments/{assignment_id}/revoke", tag = "sdk-persona",
    params(("assignment_id" = String, Path, description = "the assignment")),
    responses((status = 200, description = "the assignment, revoked", body = Data<Grant>)),
    extensions(("x-concurrency" = json!({ "outcome": "same-answer", "given": [["POST", "/api/personas", { "kind": "human" }], ["POST", "/api/role-templates", { "name": "t-{unique}", "permissions": { "crm.contact.read": true } }], ["POST", "/api/role-assignments", { "persona_id": "{persona_id}", "role_template_id": "{role_template_id}" }]] }))))]
async fn revoke(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Grant>> {
    keys::require_grant(&state, &ctx, "role-assignment.role-assignment.write").await?;
    let id = Id(path_id(&id)?);
    let mut tx = state.db.begin().await?;
    // The grant is revoked once: of several revocations at once, the one
    // that stamps it records the event; the others, like a repeat, answer
    // the grant as that one left it.
    let now = Timestamp::now();
    let sql = format!(
        "UPDATE persona_role_assignment SET revoked_at = $3 WHERE assignment_id = $1 AND {} AND revoked_at IS NULL RETURNING {GRANT_COLUMNS}",
        tenancy::own_or_sandbox("tenant_id", 2)
    );
    let revoked: Option<Grant> = sqlx::query_as(AssertSqlSafe(sql)).bind(id).bind(&ctx.tenant_id).bind(now).fetch_optional(&mut *tx).await?;
    let grant = match revoked {
        Some(grant) => {
            audit::record(&mut tx, &ctx, events::ROLE_REVOKED, json!({ "assignment_id": id, "revoked_at": now })).await?;
            grant
        }
        None => {
            let sql = format!("SELECT {GRANT_COLUMNS} FROM persona_role_assignment WHERE assignment_id = $1 AND {}", tenancy::own_or_sandbox("tenant_id", 2));
            sqlx::query_as(AssertSqlSafe(sql)).bind(id).bind(&ctx.tenant_id).fetch_optional(&mut *tx).await?.ok_or(ApiError::NotFound)?
        }
    };
    tx.commit().await?;
    state.invalidate(Invalidation::Roles).await;
    Ok(ok(grant))
}

const ASSIGNMENTS: Listing = Listing {
    table: "persona_role_assignment",
    columns: "assignment_id, persona_id, role_template_id, granted_at, revoked_at, granted_by",
    filter: "tenant_id = $1 AND ($2 = '' OR persona_id = $2) AND ($3 = '' OR role_template_id = $3) \
             AND ($4 = '' OR ($4 = 'live' AND revoked_at IS NULL) OR ($4 = 'revoked' AND revoked_at IS NOT NULL))",
    order: "granted_at DESC, assignment_id DESC",
};

stored_enum! {
    /// Whether a grant still stands: `live`, or `revoked`.
    #[schema(as = RoleAssignmentStatus)]
    enum GrantStatus { Live = "live", Revoked = "revoked" }
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct AssignmentFilter {
    /// Only the grants of this persona.
    #[param(format = "uuid")]
    persona_id: Option<String>,
    /// Only the grants of this role (who holds it).
    #[param(format = "uuid")]
    role_template_id: Option<String>,
    /// Only live grants, or only revoked ones.
    #[param(inline)]
    status: Option<GrantStatus>,
}

/// The role grants of the caller's tenant, newest first.
#[utoipa::path(get, path = "/api/role-assignments", tag = "sdk-persona", params(AssignmentFilter, Page),
    responses((status = 200, description = "one page of role grants", body = ListOf<Assignment>)))]
async fn list_assignments(
    State(state): State<AppState>,
    Tenant(ctx): Tenant,
    page: Page,
    Params(q): Params<AssignmentFilter>,
) -> ApiResult<ListOf<Assignment>> {
    let persona = canonical_uuid_opt(&q.persona_id).unwrap_or_default();
    let template = canonical_uuid_opt(&q.role_template_id).unwrap_or_default();
    let status = q.status.map_or("", GrantStatus::as_str);
    page.list::<Assignment>(&state.db.read, &ASSIGNMENTS, &[&ctx.tenant_id, &persona, &template, status]).await
}

stored_enum! {
    /// Why a persona holds a role: `primary` (its primary template) or
    /// `assignment` (a grant).
    #[schema(as = HeldRoleSource)]
    pub enum HeldRoleSource { Primary = "primary", Assignment = "assignment" }
}

/// A role a persona holds, by its primary template or a live grant.
#[derive(Debug, FromRow, Serialize, ToSchema)]
pub struct HeldRole {
    source: HeldRoleSource,
    /// The grant's; null for the primary template.
    assignment_id: Option<Id>,
    role_template_id: String,
    name: String,
    app_id: String,
    /// Whether the template is a platform default of the app.
    #[sqlx(try_from = "i64")]
    platform_default: Flag,
    /// The template's own map of scope pattern to boolean (`true` grants).
    #[sqlx(try_from = "String")]
    #[schema(value_type = HashMap<String, bool>)]
    permissions: JsonText,
    /// For the primary template: when the persona was created.
    granted_at: Timestamp,
}

/// The roles a persona holds: its primary template (held since the
/// persona was created) and its live grants, oldest first.
pub async fn held_by(pool: &sqlx::AnyPool, persona: &Persona) -> ApiResult<Vec<HeldRole>> {
    Ok(sqlx::query_as(
        "SELECT 'primary' AS source, NULL AS assignment_id, t.role_template_id, t.name, t.app_id, \
                CASE WHEN t.tenant_id IS NULL THEN 1 ELSE 0 END AS platform_default, t.permissions, $2 AS granted_at \
         FROM tenant_role_template t WHERE t.role_template_id = $1 \
         UNION ALL \
         SELECT 'assignment' AS source, a.assignment_id, t.role_template_id, t.name, t.app_id, \
                CASE WHEN t.tenant_id IS NULL THEN 1 ELSE 0 END AS platform_default, t.permissions, a.granted_at \
         FROM persona_role_assignment a JOIN tenant_role_template t ON t.role_template_id = a.role_template_id \
         WHERE a.persona_id = $3 AND a.revoked_at IS NULL ORDER BY granted_at",
    )
    .bind(&persona.primary_role_template_id)
    .bind(persona.created_at)
    .bind(&persona.persona_id)
    .fetch_all(pool)
    .await?)
}
