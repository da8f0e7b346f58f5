//! sdk-config: values by key at four scopes, `platform`, `tenant`, `app`
//! and `app_user`; `resolve` answers the most specific one (app_user, then
//! app, then tenant, then platform). A key has one active row per scope and
//! scope id: setting it again replaces the value (its version goes up),
//! `revoke` ends it, `rotate` swaps its value for a `secret_ref` (the
//! secret itself is never stored here nor answered). Platform values are
//! the operator's: a tenant credential reads them but never writes them;
//! the operator's `/admin/config` routes write them through this module's
//! own set and revoke, given the writer (`crate::layer::Writer`).

use axum::response::IntoResponse;

use hub_kernel::prelude::*;

use crate::layer::Writer;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_values, set_value))
        .routes(routes!(get_value))
        .routes(routes!(history))
        .routes(routes!(resolve))
        .routes(routes!(revoke))
        .routes(routes!(rotate))
}

stored_enum! {
    /// Where a value applies.
    #[schema(as = ConfigScope)]
    pub enum Scope { Platform = "platform", Tenant = "tenant", App = "app", AppUser = "app_user" }
}

stored_enum! {
    /// Whether a config row is the key's value at its scope: `revoked`
    /// once ended (history stays).
    #[schema(as = ConfigValueStatus)]
    enum Status { Active = "active", Revoked = "revoked" }
}

/// A config row.
#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = ConfigValue)]
pub struct Row {
    config_id: String,
    scope: Scope,
    scope_id: String,
    key: String,
    /// Any JSON; null once rotated to a `secret_ref`.
    #[sqlx(try_from = "String")]
    value: JsonText,
    /// Where the secret lives, once rotated; never the secret.
    secret_ref: Option<String>,
    status: Status,
    version: i64,
    created_at: Timestamp,
    updated_at: Timestamp,
    revoked_at: Option<Timestamp>,
}

const COLUMNS: &str = "config_id, scope, scope_id, key, value, secret_ref, status, version, created_at, updated_at, revoked_at";
/// Active rows a tenant sees at one scope: its own, and the platform's.
const ACTIVE: Listing = Listing {
    table: "config_value",
    columns: COLUMNS,
    filter: "(tenant_id = $1 OR (tenant_id IS NULL AND scope = 'platform')) AND scope = $2 AND scope_id = $3 AND status = 'active'",
    order: "key, config_id",
};

/// Where a row lives: scope and scope id, checked.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct Address {
    /// Where the values apply.
    #[param(inline)]
    scope: Scope,
    /// `platform` for the platform scope; the caller's tenant for `tenant`
    /// (the default); an app id for `app`; a person id for `app_user`.
    scope_id: Option<String>,
}

/// The scope id of `scope` a request names (or its default), or what is
/// wrong with it.
fn scope_id_of(scope: Scope, scope_id: &Option<String>, check: &mut Check, ctx: &TenantCtx) -> Option<String> {
    match (scope, Check::optional(scope_id)) {
        (Scope::Platform, None) => Some("platform".to_string()),
        (Scope::Tenant, None) => Some(ctx.tenant_id.clone()),
        (_, Some(id)) if id.len() <= 128 => Some(id),
        (_, Some(_)) => {
            check.fail("scope_id must be at most 128 characters");
            None
        }
        (_, None) => {
            check.required("scope_id", &None);
            None
        }
    }
}

/// A tenant never names another tenant's scope (404 as for any resource of
/// another tenant) nor the platform's as anything but `platform`.
fn visible(ctx: &TenantCtx, scope: Scope, scope_id: &str) -> ApiResult<()> {
    match scope {
        Scope::Tenant if scope_id != ctx.tenant_id => Err(ApiError::NotFound),
        Scope::Platform if scope_id != "platform" => Err(ApiError::NotFound),
        _ => Ok(()),
    }
}

/// The scope id of the platform scope.
pub const PLATFORM: &str = "platform";

fn owner(scope: Scope, ctx: &TenantCtx) -> Option<String> {
    (scope != Scope::Platform).then(|| ctx.tenant_id.clone())
}

fn valid_key(key: &str) -> bool {
    (1..=200).contains(&key.len()) && key.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'/' | b':'))
}

const KEY_RULE: &str = "key must be 1 to 200 letters, digits, '.', '_', '-', '/' or ':'";

/// A request's key, or what is wrong with it.
fn checked_key(check: &mut Check, key: &str) -> String {
    let key = check.required("key", &Some(key.to_string()));
    if !key.is_empty() && !valid_key(&key) {
        check.fail(KEY_RULE);
    }
    key
}

/// A value to store, as JSON text, or what is wrong with it.
fn checked_value(check: &mut Check, value: &Value) -> String {
    let value = value.to_string();
    if value.len() > 64 * 1024 {
        check.fail("value must be at most 64 KiB of JSON");
    }
    value
}

/// A request naming one row: key, scope, scope id.
#[derive(Deserialize, ToSchema)]
#[schema(as = ConfigKey)]
struct KeyBody {
    /// 1 to 200 letters, digits, `.`, `_`, `-`, `/` or `:`.
    #[schema(max_length = 200)]
    key: String,
    scope: Scope,
    /// `platform` for the platform scope; the caller's tenant for `tenant`
    /// (the default); an app id for `app`; a person id for `app_user`
    /// (required for these two).
    #[schema(max_length = 128)]
    scope_id: Option<String>,
}

/// A value to set at a key and scope.
#[derive(Deserialize, ToSchema)]
#[schema(as = ConfigSet)]
struct SetBody {
    #[serde(flatten)]
    row: KeyBody,
    /// Any JSON but null, at most 64 KiB of it.
    #[schema(value_type = Value)]
    value: Value,
}

/// A key and scope whose value becomes a `secret_ref`.
#[derive(Deserialize, ToSchema)]
#[schema(as = ConfigRotation)]
struct RotateBody {
    #[serde(flatten)]
    row: KeyBody,
    /// Where the secret now lives.
    #[schema(max_length = 512)]
    secret_ref: String,
}

/// Key, scope and scope id of a request, checked with whatever `check`
/// already holds against the rest of the request: every problem in one 400.
fn target(ctx: &TenantCtx, key: &str, scope: Scope, scope_id: &Option<String>, mut check: Check, writes: bool) -> ApiResult<(String, Scope, String)> {
    let key = checked_key(&mut check, key);
    let scope_id = scope_id_of(scope, scope_id, &mut check, ctx);
    check.finish()?;
    let scope_id = scope_id.expect("checked");
    visible(ctx, scope, &scope_id)?;
    if writes && scope == Scope::Platform {
        return Err(ApiError::Forbidden { details: vec!["platform values are written by the platform operator only".into()], scopes: None });
    }
    Ok((key, scope, scope_id))
}

async fn active(tx: &mut Tx, ctx: &TenantCtx, key: &str, scope: Scope, scope_id: &str) -> ApiResult<Option<Row>> {
    let sql =
        format!("SELECT {COLUMNS} FROM config_value WHERE COALESCE(tenant_id, '') = $1 AND scope = $2 AND scope_id = $3 AND key = $4 AND status = 'active'");
    let owner = owner(scope, ctx).unwrap_or_default();
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(owner).bind(scope).bind(scope_id).bind(key).fetch_optional(&mut **tx).await?)
}

/// A page of the active rows a tenant sees at one scope, by key (the
/// platform's at `platform`); `tenant_id` None: the platform's rows only
/// (the operator's list, at `platform`).
pub async fn active_rows(db: &Db, page: Page, tenant_id: Option<&str>, scope: Scope, scope_id: &str) -> ApiResult<ListOf<Row>> {
    page.list::<Row>(&db.read, &ACTIVE, &[tenant_id.unwrap_or(""), scope.as_str(), scope_id]).await
}

/// The active rows at one scope (the platform's included at `platform`).
#[utoipa::path(get, path = "/api/config", tag = "sdk-config", params(Address),
    responses((status = 200, description = "the active rows, by key", body = ListOf<Row>),
        (status = 404, description = "NotFound: the scope names nothing this caller can see", body = ErrorBody)))]
async fn list_values(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<Address>, page: Page) -> ApiResult<ListOf<Row>> {
    let mut check = Check::new();
    let scope_id = scope_id_of(q.scope, &q.scope_id, &mut check, &ctx);
    check.finish()?;
    let scope_id = scope_id.expect("checked");
    visible(&ctx, q.scope, &scope_id)?;
    active_rows(&state.db, page, Some(&ctx.tenant_id), q.scope, &scope_id).await
}

/// Sets a value: a new active row (201), or a new version of the active
/// one (200).
#[utoipa::path(post, path = "/api/config", tag = "sdk-config", request_body = SetBody,
    extensions(("x-concurrency" = json!({ "outcome": "first-creates", "given": [],
        "body": { "key": "race.{unique}", "scope": "tenant", "value": { "on": true } } }))),
    responses((status = 201, description = "a new key at this scope", body = Data<Row>), (status = 200, description = "a new version of the value", body = Data<Row>),
        (status = 404, description = "NotFound: the scope is not the caller's (another tenant, or the platform's)", body = ErrorBody)))]
async fn set_value(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<SetBody>) -> ApiResult<Response> {
    let body = body.checked()?;
    let mut check = Check::new();
    let value = checked_value(&mut check, &body.value);
    let (key, scope, scope_id) = target(&ctx, &body.row.key, body.row.scope, &body.row.scope_id, check, true)?;
    let (row, written) = set_as(&state.db, &Writer::Tenant(&ctx), &key, scope, &scope_id, &value).await?;
    Ok(if written == Written::Made { created(row).into_response() } else { ok(row).into_response() })
}

/// Sets a checked value in the writer's layer: the tenant's rows at a
/// scope of its own, the operator's at `platform` (the tenant route's and
/// the operator's one implementation). `Written::Made`: the key's first
/// active row at the scope; `Found`: its next version.
async fn set_as(db: &Db, w: &Writer<'_>, key: &str, scope: Scope, scope_id: &str, value: &str) -> ApiResult<(Row, Written)> {
    let now = db::now();
    let owner = w.tenant_id();
    let mut tx = db.begin().await?;
    // The first set of a key at a scope inserts its active row (201); any
    // other, concurrent or later, finds it (the unique index on the active
    // row) and writes the next version over it (200).
    let insert = format!(
        "INSERT INTO config_value (config_id, tenant_id, scope, scope_id, key, value, status, version, updated_by, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, 'active', 1, $7, $8, $8) ON CONFLICT DO NOTHING RETURNING {COLUMNS}"
    );
    let next = format!(
        "UPDATE config_value SET value = $5, secret_ref = NULL, version = version + 1, updated_by = $6, updated_at = $7 \
         WHERE COALESCE(tenant_id, '') = $1 AND scope = $2 AND scope_id = $3 AND key = $4 AND status = 'active' RETURNING {COLUMNS}"
    );
    let (row, written): (Row, _) = insert_or_read(
        &mut tx,
        sqlx::query_as(sqlx::AssertSqlSafe(insert))
            .bind(db::new_id())
            .bind(owner)
            .bind(scope)
            .bind(scope_id)
            .bind(key)
            .bind(value)
            .bind(w.actor_id())
            .bind(&now),
        sqlx::query_as(sqlx::AssertSqlSafe(next)).bind(w.owner()).bind(scope).bind(scope_id).bind(key).bind(value).bind(w.actor_id()).bind(&now),
    )
    .await?;
    // The event names the row, never its value.
    let fact = json!({ "config_id": row.config_id, "key": key, "scope": scope, "scope_id": scope_id, "version": row.version });
    w.record(&mut tx, events::CONFIG_SET, fact).await?;
    tx.commit().await?;
    Ok((row, written))
}

/// Sets the platform's value of a key (scope `platform`, which every
/// tenant's `resolve` reads after its own scopes): the operator's write.
/// Every problem of the key and value in one 400.
pub async fn set_platform(db: &Db, operator: &str, key: &str, value: &Value) -> ApiResult<(Row, Written)> {
    // The value's problem first, then the key's, as the tenant's write.
    let mut check = Check::new();
    let value = checked_value(&mut check, value);
    let key = checked_key(&mut check, key);
    check.finish()?;
    set_as(db, &Writer::Operator(operator), &key, Scope::Platform, PLATFORM, &value).await
}

/// Query of one row.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct OneQuery {
    /// 1 to 200 letters, digits, `.`, `_`, `-`, `/` or `:`.
    key: String,
    /// Where the value applies.
    #[param(inline)]
    scope: Scope,
    /// `platform` for the platform scope; the caller's tenant for `tenant`
    /// (the default); an app id for `app`; a person id for `app_user`.
    scope_id: Option<String>,
}

/// One active row.
#[utoipa::path(get, path = "/api/config/value", tag = "sdk-config", params(OneQuery),
    responses((status = 200, description = "the active row", body = Data<Row>),
        (status = 404, description = "NotFound: no active row of the key at that scope", body = ErrorBody)))]
async fn get_value(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<OneQuery>) -> ApiResult<Data<Row>> {
    let (key, scope, scope_id) = target(&ctx, &q.key, q.scope, &q.scope_id, Check::new(), false)?;
    let mut tx = state.db.begin().await?;
    let row = active(&mut tx, &ctx, &key, scope, &scope_id).await?.ok_or(ApiError::NotFound)?;
    tx.commit().await?;
    Ok(ok(row))
}

/// Every row a key has had at one scope, active and revoked, newest
/// first: a revoked row is kept as history and read here.
#[utoipa::path(get, path = "/api/config/history", tag = "sdk-config", params(OneQuery, Page),
    responses((status = 200, description = "the key's rows at that scope, newest first (empty when it never had one)", body = ListOf<Row>),
        (status = 404, description = "NotFound: the scope names nothing this caller can see", body = ErrorBody)))]
async fn history(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<OneQuery>, page: Page) -> ApiResult<ListOf<Row>> {
    let (key, scope, scope_id) = target(&ctx, &q.key, q.scope, &q.scope_id, Check::new(), false)?;
    history_of(&state.db, page, owner(scope, &ctx).as_deref(), &key, scope, &scope_id).await
}

/// A page of every row a key has had at one scope of a layer (the
/// tenant's, or `tenant_id` None the platform's), newest first.
async fn history_of(db: &Db, page: Page, tenant_id: Option<&str>, key: &str, scope: Scope, scope_id: &str) -> ApiResult<ListOf<Row>> {
    // One filter per layer, each able to use the key's index.
    const TENANT: Listing = Listing {
        table: "config_value",
        columns: COLUMNS,
        filter: "scope = $1 AND scope_id = $2 AND key = $3 AND tenant_id = $4",
        order: "created_at DESC, config_id DESC",
    };
    const PLATFORM_LAYER: Listing = Listing {
        table: "config_value",
        columns: COLUMNS,
        filter: "scope = $1 AND scope_id = $2 AND key = $3 AND tenant_id IS NULL",
        order: "created_at DESC, config_id DESC",
    };
    match tenant_id {
        Some(tenant_id) => page.list::<Row>(&db.read, &TENANT, &[scope.as_str(), scope_id, key, tenant_id]).await,
        None => page.list::<Row>(&db.read, &PLATFORM_LAYER, &[scope.as_str(), scope_id, key]).await,
    }
}

/// The platform's rows of a key, active and revoked, newest first (a
/// malformed key 400): the operator's history.
pub async fn platform_history(db: &Db, page: Page, key: &str) -> ApiResult<ListOf<Row>> {
    let mut check = Check::new();
    let key = checked_key(&mut check, key);
    check.finish()?;
    history_of(db, page, None, &key, Scope::Platform, PLATFORM).await
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ResolveQuery {
    /// 1 to 200 letters, digits, `.`, `_`, `-`, `/` or `:`.
    key: String,
    /// The app to look at; the caller's own by default.
    app_id: Option<String>,
    /// The person for the `app_user` scope; the calling person by default.
    person_id: Option<String>,
}

/// The value of a key as the most specific scope sets it: app_user, then
/// app, then tenant, then platform.
#[utoipa::path(get, path = "/api/config/resolve", tag = "sdk-config", params(ResolveQuery),
    responses((status = 200, description = "the winning row; `scope` says where it was found", body = Data<Row>),
        (status = 404, description = "NotFound: no row of the key applies to this caller", body = ErrorBody)))]
async fn resolve(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<ResolveQuery>) -> ApiResult<Data<Row>> {
    let mut check = Check::new();
    let key = check.required("key", &Some(q.key));
    if !key.is_empty() && !valid_key(&key) {
        check.fail(KEY_RULE);
    }
    check.finish()?;
    let app = Check::optional(&q.app_id).unwrap_or_else(|| ctx.app_id.clone());
    let person = Check::optional(&q.person_id).or_else(|| ctx.person_id.clone()).unwrap_or_default();
    // One query; the order of the walk is the CASE.
    let sql = format!(
        "SELECT {COLUMNS} FROM config_value WHERE key = $1 AND status = 'active' AND ( \
           (tenant_id = $2 AND ((scope = 'app_user' AND scope_id = $3) OR (scope = 'app' AND scope_id = $4) OR (scope = 'tenant' AND scope_id = $2))) \
           OR (tenant_id IS NULL AND scope = 'platform')) \
         ORDER BY CASE scope WHEN 'app_user' THEN 0 WHEN 'app' THEN 1 WHEN 'tenant' THEN 2 ELSE 3 END LIMIT 1"
    );
    let row: Row = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&key)
        .bind(&ctx.tenant_id)
        .bind(&person)
        .bind(&app)
        .fetch_optional(&state.db.read)
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok(ok(row))
}

/// Ends the active row of a key at a scope (history stays).
#[utoipa::path(post, path = "/api/config/revoke", tag = "sdk-config", request_body = KeyBody,
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "losers": 404,
        "given": [["POST", "/api/config", { "key": "race.{unique}", "scope": "tenant", "value": { "on": true } }]],
        "body": { "key": "race.{unique}", "scope": "tenant" } }))),
    responses((status = 200, description = "the revoked row", body = Data<Row>),
        (status = 404, description = "NotFound: no active row of the key at that scope", body = ErrorBody)))]
async fn revoke(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<KeyBody>) -> ApiResult<Data<Row>> {
    let body = body.checked()?;
    let (key, scope, scope_id) = target(&ctx, &body.key, body.scope, &body.scope_id, Check::new(), true)?;
    Ok(ok(revoke_as(&state.db, &Writer::Tenant(&ctx), &key, scope, &scope_id).await?))
}

/// Ends the writer's active row of a key at a scope (404 when there is
/// none): the tenant route's and the operator's one implementation.
async fn revoke_as(db: &Db, w: &Writer<'_>, key: &str, scope: Scope, scope_id: &str) -> ApiResult<Row> {
    let mut tx = db.begin().await?;
    // One guarded statement ends the active row: of two revokes at once,
    // one ends it and the other finds no active row (404, as after it).
    let sql = format!(
        "UPDATE config_value SET status = 'revoked', revoked_at = $5, updated_at = $5, updated_by = $6 \
         WHERE COALESCE(tenant_id, '') = $1 AND scope = $2 AND scope_id = $3 AND key = $4 AND status = 'active' RETURNING {COLUMNS}"
    );
    let row: Row = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(w.owner())
        .bind(scope)
        .bind(scope_id)
        .bind(key)
        .bind(db::now())
        .bind(w.actor_id())
        .fetch_optional(&mut *tx)
        .await?
        .ok_or(ApiError::NotFound)?;
    w.record(&mut tx, events::CONFIG_REVOKED, json!({ "config_id": row.config_id, "key": key, "scope": scope, "scope_id": scope_id })).await?;
    tx.commit().await?;
    Ok(row)
}

/// Ends the platform's active row of a key (a malformed key 400, as the
/// tenant's revoke; 404 when there is none): the operator's revoke.
pub async fn revoke_platform(db: &Db, operator: &str, key: &str) -> ApiResult<Row> {
    let mut check = Check::new();
    let key = checked_key(&mut check, key);
    check.finish()?;
    revoke_as(db, &Writer::Operator(operator), &key, Scope::Platform, PLATFORM).await
}

/// Swaps the active value of a key for a `secret_ref`: the value is
/// dropped, the reference answered from now on.
#[utoipa::path(post, path = "/api/config/rotate", tag = "sdk-config", request_body = RotateBody,
    extensions(("x-concurrency" = json!({ "outcome": "independent",
        "given": [["POST", "/api/config", { "key": "race.{unique}", "scope": "tenant", "value": { "on": true } }]],
        "body": { "key": "race.{unique}", "scope": "tenant", "secret_ref": "vault://race/{unique}" } }))),
    responses((status = 200, description = "the row, its value now a secret_ref", body = Data<Row>),
        (status = 404, description = "NotFound: no active row of the key at that scope", body = ErrorBody)))]
async fn rotate(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<RotateBody>) -> ApiResult<Data<Row>> {
    let body = body.checked()?;
    let secret_ref = body.secret_ref.trim().to_string();
    let (key, scope, scope_id) = target(&ctx, &body.row.key, body.row.scope, &body.row.scope_id, Check::new(), true)?;
    let mut tx = state.db.begin().await?;
    // Guarded by the active state, so a rotate racing a revoke never
    // writes a secret_ref onto the revoked row (404, as after the revoke).
    let sql = format!(
        "UPDATE config_value SET value = 'null', secret_ref = $5, version = version + 1, updated_at = $6, updated_by = $7 \
         WHERE COALESCE(tenant_id, '') = $1 AND scope = $2 AND scope_id = $3 AND key = $4 AND status = 'active' RETURNING {COLUMNS}"
    );
    let row: Row = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(owner(scope, &ctx).unwrap_or_default())
        .bind(scope)
        .bind(&scope_id)
        .bind(&key)
        .bind(&secret_ref)
        .bind(db::now())
        .bind(&ctx.persona_id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or(ApiError::NotFound)?;
    let fact = json!({ "config_id": row.config_id, "key": key, "scope": scope, "scope_id": scope_id, "version": row.version });
    audit::record(&mut tx, &ctx, events::CONFIG_ROTATED, fact).await?;
    tx.commit().await?;
    Ok(ok(row))
}
