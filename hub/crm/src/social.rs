//! sdk-social: social-network handles the tenant has authorised, each bound
//! to the persona that authorised it (once per network and handle). A
//! handle is revoked (de-authorised), not deleted; authorising a revoked
//! handle again brings its row back to `authorised`.

use hub_identity::personas;
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(authorise, list)).routes(routes!(get_handle, update_handle)).routes(routes!(revoke))
}

stored_enum! {
    /// A social network.
    #[schema(as = SocialNetwork)]
    pub enum Network {
        X = "x",
        Linkedin = "linkedin",
        Facebook = "facebook",
        Instagram = "instagram",
        Tiktok = "tiktok",
        Youtube = "youtube",
        Threads = "threads",
        Bluesky = "bluesky",
        Mastodon = "mastodon",
    }
}

stored_enum! {
    /// Where a handle stands: `authorised` until revoked.
    #[schema(as = SocialHandleStatus)]
    pub enum HandleStatus { Authorised = "authorised", Revoked = "revoked" }
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = SocialHandle)]
struct Handle {
    handle_id: Id,
    tenant_id: String,
    network: Network,
    /// The network's own id of the handle.
    external_handle_id: String,
    display_name: Option<String>,
    authorized_persona_id: String,
    status: HandleStatus,
    authorized_at: Timestamp,
    /// When it was revoked (null while authorised).
    revoked_at: Option<Timestamp>,
}

const COLUMNS: &str = "handle_id, tenant_id, network, external_handle_id, display_name, authorized_persona_id, status, authorized_at, revoked_at";

const HANDLES: Listing = Listing {
    table: "social_handle",
    columns: COLUMNS,
    filter: "tenant_id = $1 AND ($2 = '' OR network = $2) AND ($3 = '' OR authorized_persona_id = $3) AND ($4 = '' OR status = $4)",
    order: "authorized_at DESC, handle_id DESC",
};

#[derive(Deserialize, ToSchema)]
#[schema(as = NewSocialHandle)]
struct NewHandle {
    /// The caller's tenant (required here; `Body` refuses another tenant's).
    #[schema(format = "uuid")]
    #[allow(dead_code)]
    tenant_id: String,
    network: Network,
    /// Once per network in a tenant (409).
    #[schema(max_length = 256)]
    external_handle_id: String,
    /// The persona of the tenant that authorised the handle.
    #[schema(format = "uuid")]
    authorized_persona_id: String,
    /// `@acme`.
    #[schema(max_length = 200)]
    display_name: Option<String>,
}

/// Authorises a handle and binds it to the persona that authorised it. A
/// handle the tenant revoked is authorised again in its row (its id
/// stays); one still authorised is 409.
#[utoipa::path(post, path = "/api/social/handles", tag = "sdk-social", request_body = NewHandle,
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "body": { "tenant_id": "{tenant_id}", "network": "x", "external_handle_id": "h-{unique}", "authorized_persona_id": "{owner_persona_id}" } }))),
    responses((status = 201, description = "the handle", body = Data<Handle>)))]
async fn authorise(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewHandle>) -> ApiResult<Created<Handle>> {
    // `Body` has refused another tenant's id already.
    let body = body.checked()?;
    let network = body.network;
    let external = body.external_handle_id.trim();
    let persona = canonical_uuid(&body.authorized_persona_id);
    let display = Check::optional(&body.display_name);
    let mut tx = state.db.begin().await?;
    if !personas::exists_in_tenant(&mut *tx, &ctx.tenant_id, &persona).await? {
        return Err(ApiError::invalid("authorized_persona_id is not a persona of this tenant"));
    }
    // One statement decides: a new handle is inserted, a revoked one
    // authorised again, an authorised one left as it is (409).
    let sql = format!(
        "INSERT INTO social_handle (handle_id, tenant_id, network, external_handle_id, display_name, authorized_persona_id, status, authorized_by, \
         authorized_at) VALUES ($1, $2, $3, $4, $5, $6, 'authorised', $7, $8) \
         ON CONFLICT (tenant_id, network, external_handle_id) DO UPDATE SET display_name = excluded.display_name, \
         authorized_persona_id = excluded.authorized_persona_id, status = 'authorised', authorized_by = excluded.authorized_by, \
         authorized_at = excluded.authorized_at, revoked_by = NULL, revoked_at = NULL WHERE social_handle.status = 'revoked' RETURNING {COLUMNS}"
    );
    let handle: Option<Handle> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(network)
        .bind(external)
        .bind(&display)
        .bind(&persona)
        .bind(audit::actor_of(&ctx).1)
        .bind(db::now())
        .fetch_optional(&mut *tx)
        .await?;
    let handle = handle.ok_or_else(|| ApiError::Conflict(format!("this tenant has authorised the {network} handle {external} already")))?;
    let payload = json!({ "handle_id": handle.handle_id, "network": network, "authorized_persona_id": persona });
    audit::record(&mut tx, &ctx, events::SOCIAL_HANDLE_AUTHORISED, payload).await?;
    tx.commit().await?;
    Ok(created(handle))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct HandleQuery {
    /// Only the handles of this network.
    #[param(inline)]
    network: Option<Network>,
    /// Only the handles this persona authorised.
    #[param(format = "uuid")]
    authorized_persona_id: Option<String>,
    /// Only the handles in this status.
    #[param(inline)]
    status: Option<HandleStatus>,
}

/// The tenant's handles (authorised and revoked), most recently
/// authorised first.
#[utoipa::path(get, path = "/api/social/handles", tag = "sdk-social", params(HandleQuery, Page),
    responses((status = 200, description = "one page of handles", body = ListOf<Handle>)))]
async fn list(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page, Params(q): Params<HandleQuery>) -> ApiResult<ListOf<Handle>> {
    let network = q.network.map(Network::as_str).unwrap_or_default();
    let persona = canonical_uuid_opt(&q.authorized_persona_id).unwrap_or_default();
    let status = q.status.map(HandleStatus::as_str).unwrap_or_default();
    page.list::<Handle>(&state.db.read, &HANDLES, &[&ctx.tenant_id, network, &persona, status]).await
}

async fn find<'e, E>(exec: E, tenant_id: &str, id: &str) -> ApiResult<Handle>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let id = path_id(id)?.to_string();
    let sql = format!("SELECT {COLUMNS} FROM social_handle WHERE tenant_id = $1 AND handle_id = $2");
    let found: Option<Handle> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(&id).fetch_optional(exec).await?;
    found.ok_or(ApiError::NotFound)
}

/// One handle, authorised or revoked.
#[utoipa::path(get, path = "/api/social/handles/{handle_id}", tag = "sdk-social", params(("handle_id" = String, Path, description = "the handle")),
    responses((status = 200, description = "the handle", body = Data<Handle>)))]
async fn get_handle(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Handle>> {
    Ok(ok(find(&state.db.read, &ctx.tenant_id, &id).await?))
}

/// A handle as guarded writes name it.
const HANDLE: Stateful = Stateful { noun: "handle", table: "social_handle", key: "handle_id", state: "status" };

/// A change of an authorised handle: what is absent stays; at least one
/// field.
#[derive(Deserialize, ToSchema)]
#[schema(as = SocialHandleUpdate)]
struct HandleUpdate {
    /// `@acme`; blank clears it.
    #[schema(max_length = 200)]
    display_name: Option<String>,
    /// Rebinds the handle to another persona of the tenant (when staff
    /// leave).
    #[schema(format = "uuid")]
    authorized_persona_id: Option<String>,
}

/// Changes an authorised handle's display name or rebinds it to another
/// persona of the tenant (what is absent stays; at least one is given). A
/// revoked handle is 409.
#[utoipa::path(patch, path = "/api/social/handles/{handle_id}", tag = "sdk-social", request_body = HandleUpdate,
    params(("handle_id" = String, Path, description = "the handle")),
    extensions(("x-concurrency" = json!({ "outcome": "independent",
        "given": [["POST", "/api/social/handles", { "tenant_id": "{tenant_id}", "network": "x", "external_handle_id": "h-{unique}", "authorized_persona_id": "{owner_persona_id}" }]],
        "body": { "display_name": "race", "authorized_persona_id": "{owner_persona_id}" } }))),
    responses((status = 200, description = "the handle", body = Data<Handle>)))]
async fn update_handle(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<HandleUpdate>) -> ApiResult<Data<Handle>> {
    let mut tx = state.db.begin().await?;
    // Another tenant's handle is not found, whatever the body.
    let id = find(&mut *tx, &ctx.tenant_id, &id).await?.handle_id.to_string();
    let body = body.checked()?;
    let mut check = Check::new();
    let set_display = i64::from(body.display_name.is_some());
    let display = Check::optional(&body.display_name);
    let persona = canonical_uuid_opt(&body.authorized_persona_id);
    if set_display == 0 && persona.is_none() {
        check.fail("give at least one of: display_name, authorized_persona_id");
    }
    if let Some(p) = &persona
        && !personas::exists_in_tenant(&mut *tx, &ctx.tenant_id, p).await?
    {
        check.fail("authorized_persona_id is not a persona of this tenant");
    }
    check.finish()?;
    let sql = format!(
        "UPDATE social_handle SET display_name = CASE WHEN $1 = 1 THEN $2 ELSE display_name END, authorized_persona_id = COALESCE($3, authorized_persona_id) \
         WHERE tenant_id = $4 AND handle_id = $5 AND status = 'authorised' RETURNING {COLUMNS}"
    );
    let changed: Option<Handle> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(set_display)
        .bind(&display)
        .bind(&persona)
        .bind(&ctx.tenant_id)
        .bind(&id)
        .fetch_optional(&mut *tx)
        .await?;
    let handle = HANDLE.settle(&mut tx, &ctx.tenant_id, &id, changed, "only an authorised handle can be changed").await?;
    let payload = json!({ "handle_id": handle.handle_id, "display_name_changed": set_display == 1, "authorized_persona_id": persona });
    audit::record(&mut tx, &ctx, events::SOCIAL_HANDLE_UPDATED, payload).await?;
    tx.commit().await?;
    Ok(ok(handle))
}

/// Revokes (de-authorises) a handle: it stays readable as `revoked`, and
/// authorising it again brings it back. A revoked handle is 409.
#[utoipa::path(post, path = "/api/social/handles/{handle_id}/revoke", tag = "sdk-social", params(("handle_id" = String, Path, description = "the handle")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins",
        "given": [["POST", "/api/social/handles", { "tenant_id": "{tenant_id}", "network": "x", "external_handle_id": "h-{unique}", "authorized_persona_id": "{owner_persona_id}" }]] }))),
    responses((status = 200, description = "the handle, revoked", body = Data<Handle>)))]
async fn revoke(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Handle>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    let sql = format!(
        "UPDATE social_handle SET status = 'revoked', revoked_by = $3, revoked_at = $4 WHERE tenant_id = $1 AND handle_id = $2 AND status = 'authorised' \
         RETURNING {COLUMNS}"
    );
    let revoked: Option<Handle> =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).bind(audit::actor_of(&ctx).1).bind(db::now()).fetch_optional(&mut *tx).await?;
    let handle = HANDLE.settle(&mut tx, &ctx.tenant_id, &id, revoked, "only an authorised handle can be revoked").await?;
    let payload = json!({ "handle_id": handle.handle_id, "network": handle.network, "authorized_persona_id": handle.authorized_persona_id });
    audit::record(&mut tx, &ctx, events::SOCIAL_HANDLE_REVOKED, payload).await?;
    tx.commit().await?;
    Ok(ok(handle))
}
