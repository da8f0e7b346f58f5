//! sdk-social: social-network handles the tenant has authorised, each bound
//! to the persona that authorised it (once per network and handle).

use hub_identity::personas;
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(authorise, list))
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
    /// Where an authorised handle stands (authorised is the only state kept).
    #[schema(as = SocialHandleStatus)]
    pub enum HandleStatus { Authorised = "authorised" }
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
}

const COLUMNS: &str = "handle_id, tenant_id, network, external_handle_id, display_name, authorized_persona_id, status, authorized_at";

const HANDLES: Listing = Listing {
    table: "social_handle",
    columns: COLUMNS,
    filter: "tenant_id = $1 AND ($2 = '' OR network = $2) AND ($3 = '' OR authorized_persona_id = $3)",
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

/// Authorises a handle and binds it to the persona that authorised it.
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
    let taken: Option<String> = sqlx::query_scalar("SELECT handle_id FROM social_handle WHERE tenant_id = $1 AND network = $2 AND external_handle_id = $3")
        .bind(&ctx.tenant_id)
        .bind(network)
        .bind(external)
        .fetch_optional(&mut *tx)
        .await?;
    if taken.is_some() {
        return Err(ApiError::Conflict(format!("this tenant has authorised the {network} handle {external} already")));
    }
    let sql = format!(
        "INSERT INTO social_handle (handle_id, tenant_id, network, external_handle_id, display_name, authorized_persona_id, status, authorized_by, \
         authorized_at) VALUES ($1, $2, $3, $4, $5, $6, 'authorised', $7, $8) RETURNING {COLUMNS}"
    );
    let handle: Handle = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(network)
        .bind(external)
        .bind(&display)
        .bind(&persona)
        .bind(audit::actor_of(&ctx).1)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
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
}

/// The tenant's authorised handles, newest first.
#[utoipa::path(get, path = "/api/social/handles", tag = "sdk-social", params(HandleQuery, Page),
    responses((status = 200, description = "one page of handles", body = ListOf<Handle>)))]
async fn list(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page, Params(q): Params<HandleQuery>) -> ApiResult<ListOf<Handle>> {
    let network = q.network.map(Network::as_str).unwrap_or_default();
    let persona = canonical_uuid_opt(&q.authorized_persona_id).unwrap_or_default();
    page.list::<Handle>(&state.db.read, &HANDLES, &[&ctx.tenant_id, network, &persona]).await
}
