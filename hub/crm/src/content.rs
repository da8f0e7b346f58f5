//! sdk-content: content items and their numbered versions. Archiving is a
//! soft state change: an archived item and its versions stay readable, but
//! it takes no new version and no change until restored; archiving an
//! archived item (or restoring an active one) changes nothing and answers
//! the same.

use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_item, list_items))
        .routes(routes!(get_item, update_item))
        .routes(routes!(add_version))
        .routes(routes!(archive))
        .routes(routes!(restore))
}

stored_enum! {
    /// What a content item is.
    #[schema(as = ContentKind)]
    pub enum Kind { Article = "article", Email = "email", Page = "page", Snippet = "snippet", SocialPost = "social_post", Document = "document" }
}

stored_enum! {
    /// Whether a content item still takes new versions.
    #[schema(as = ContentItemStatus)]
    pub enum ItemStatus { Active = "active", Archived = "archived" }
}

/// The largest version body, as JSON text.
const MAX_BODY_BYTES: usize = 256 * 1024;

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = ContentItem)]
struct Item {
    item_id: Id,
    title: String,
    kind: Kind,
    status: ItemStatus,
    /// The number of its newest version (0 before the first).
    latest_version: i64,
    created_by: String,
    created_at: Timestamp,
    updated_at: Timestamp,
    archived_at: Option<Timestamp>,
    /// Its versions, oldest first.
    #[sqlx(skip)]
    #[schema(value_type = Vec<Version>)]
    versions: Vec<Version>,
}

const ITEM_COLUMNS: &str = "item_id, title, kind, status, latest_version, created_by, created_at, updated_at, archived_at";

/// A content item as lists show it: without its versions.
#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = ContentItemSummary)]
struct ItemSummary {
    item_id: Id,
    title: String,
    kind: Kind,
    status: ItemStatus,
    /// The number of its newest version (0 before the first).
    latest_version: i64,
    created_by: String,
    created_at: Timestamp,
    updated_at: Timestamp,
    archived_at: Option<Timestamp>,
}

/// The tenant's items, of one kind and one status when `$2` and `$3` are
/// not empty; newest first.
const ITEMS: Listing = Listing {
    table: "content_item",
    columns: ITEM_COLUMNS,
    filter: "tenant_id = $1 AND ($2 = '' OR kind = $2) AND ($3 = '' OR status = $3)",
    order: "created_at DESC, item_id DESC",
};

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = ContentVersion)]
struct Version {
    version_id: Id,
    item_id: Id,
    /// 1, 2, ... within the item.
    version: i64,
    /// The content, as given (any JSON value).
    #[sqlx(try_from = "String")]
    body: JsonText,
    note: Option<String>,
    created_by: String,
    created_at: Timestamp,
}

const VERSION_COLUMNS: &str = "version_id, item_id, version, body, note, created_by, created_at";

/// A version's body (any JSON but null, which its schema has refused) as
/// its stored text, at most 256 KiB.
fn version_text(check: &mut Check, body: &Value) -> String {
    let text = body.to_string();
    if text.len() > MAX_BODY_BYTES {
        check.fail(format!("body must be at most {MAX_BODY_BYTES} bytes of JSON"));
    }
    text
}

/// Inserts version `version` of an item and records its event.
async fn insert_version(tx: &mut Tx, ctx: &TenantCtx, item_id: &str, version: i64, body: &str, note: &Option<String>) -> ApiResult<Version> {
    let sql = format!(
        "INSERT INTO content_version (version_id, item_id, tenant_id, version, body, note, created_by, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) \
         RETURNING {VERSION_COLUMNS}"
    );
    let v: Version = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(item_id)
        .bind(&ctx.tenant_id)
        .bind(version)
        .bind(body)
        .bind(note)
        .bind(audit::actor_of(ctx).1)
        .bind(db::now())
        .fetch_one(&mut **tx)
        .await?;
    audit::record(tx, ctx, events::CONTENT_ITEM_VERSIONED, json!({ "item_id": item_id, "version_id": v.version_id, "version": version })).await?;
    Ok(v)
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewContentItem)]
struct NewItem {
    #[schema(max_length = 200)]
    title: String,
    /// `article` when absent.
    kind: Option<Kind>,
    /// When given (not null), the item's version 1: any JSON value, at most
    /// 256 KiB as JSON text.
    #[schema(value_type = Value, required = false)]
    body: Option<Value>,
    /// The first version's note (kept only with a body).
    #[schema(max_length = 500)]
    note: Option<String>,
}

/// Creates a content item, with its version 1 when a body is given.
#[utoipa::path(post, path = "/api/content/items", tag = "sdk-content", request_body = NewItem,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "events": 16, "body": { "title": "race", "body": "v1" } }))),
    responses((status = 201, description = "the item with its versions", body = Data<Item>)))]
async fn create_item(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewItem>) -> ApiResult<Created<Item>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let title = body.title.trim();
    let kind = body.kind.unwrap_or(Kind::Article);
    let first = match &body.body {
        None | Some(Value::Null) => None,
        Some(given) => Some((version_text(&mut check, given), Check::optional(&body.note))),
    };
    check.finish()?;
    let now = db::now();
    let mut tx = state.db.begin().await?;
    let sql = format!(
        "INSERT INTO content_item (item_id, tenant_id, title, kind, status, latest_version, created_by, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, 'active', $5, $6, $7, $7) RETURNING {ITEM_COLUMNS}"
    );
    let mut item: Item = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(title)
        .bind(kind)
        .bind(i64::from(first.is_some()))
        .bind(audit::actor_of(&ctx).1)
        .bind(&now)
        .fetch_one(&mut *tx)
        .await?;
    audit::record(&mut tx, &ctx, events::CONTENT_ITEM_CREATED, json!({ "item_id": item.item_id, "kind": kind })).await?;
    if let Some((text, note)) = &first {
        item.versions.push(insert_version(&mut tx, &ctx, &item.item_id.to_string(), 1, text, note).await?);
    }
    index(&mut tx, &ctx.tenant_id, &item, first.as_ref().map(|f| f.0.as_str()), &now).await?;
    tx.commit().await?;
    Ok(created(item))
}

/// The item in the search index (sdk-search): its title, kind and latest
/// version's text, in the write's transaction.
async fn index(tx: &mut Tx, tenant_id: &str, item: &Item, latest: Option<&str>, now: &str) -> ApiResult<()> {
    let text = latest.and_then(|t| serde_json::from_str::<Value>(t).ok()).map(|v| hub_kernel::search::text_of(&v)).unwrap_or_default();
    hub_kernel::search::index(tx, tenant_id, "content_item", &item.item_id.to_string(), &item.title, &format!("{} {text}", item.kind), now).await
}

async fn find(tx: &mut Tx, tenant_id: &str, id: &str) -> ApiResult<Item> {
    let id = path_id(id)?.to_string();
    let sql = format!("SELECT {ITEM_COLUMNS} FROM content_item WHERE tenant_id = $1 AND item_id = $2");
    let found: Option<Item> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(&id).fetch_optional(&mut **tx).await?;
    found.ok_or(ApiError::NotFound)
}

/// An item with its versions, oldest first.
async fn with_versions(tx: &mut Tx, tenant_id: &str, id: &str) -> ApiResult<Item> {
    let mut item = find(tx, tenant_id, id).await?;
    let sql = format!("SELECT {VERSION_COLUMNS} FROM content_version WHERE item_id = $1 ORDER BY version");
    item.versions = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(item.item_id).fetch_all(&mut **tx).await?;
    Ok(item)
}

/// A content item with its versions (archived or not).
#[utoipa::path(get, path = "/api/content/items/{item_id}", tag = "sdk-content", params(("item_id" = String, Path, description = "the item")),
    responses((status = 200, description = "the item with its versions", body = Data<Item>)))]
async fn get_item(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Item>> {
    let mut tx = state.db.read.begin().await?;
    let item = with_versions(&mut tx, &ctx.tenant_id, &id).await?;
    tx.commit().await?;
    Ok(ok(item))
}

/// The filters of the item list.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ItemFilter {
    /// Only the items of this kind.
    #[param(inline)]
    kind: Option<Kind>,
    /// Only the items in this status.
    #[param(inline)]
    status: Option<ItemStatus>,
}

/// The tenant's content items (without their versions: read one), newest
/// first.
#[utoipa::path(get, path = "/api/content/items", tag = "sdk-content", params(ItemFilter, Page),
    responses((status = 200, description = "one page of items", body = ListOf<ItemSummary>)))]
async fn list_items(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page, Params(q): Params<ItemFilter>) -> ApiResult<ListOf<ItemSummary>> {
    let kind = q.kind.map(Kind::as_str).unwrap_or_default();
    let status = q.status.map(ItemStatus::as_str).unwrap_or_default();
    page.list::<ItemSummary>(&state.db.read, &ITEMS, &[&ctx.tenant_id, kind, status]).await
}

/// A change of an active item: what is absent stays; at least one field.
#[derive(Deserialize, ToSchema)]
#[schema(as = ContentItemUpdate)]
struct ItemUpdate {
    #[schema(max_length = 200)]
    title: Option<String>,
    kind: Option<Kind>,
}

/// Changes an active item's title or kind (what is absent stays; at least
/// one is given); its versions stay as they are. An archived item is 409.
#[utoipa::path(patch, path = "/api/content/items/{item_id}", tag = "sdk-content", request_body = ItemUpdate,
    params(("item_id" = String, Path, description = "the item")),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/content/items", { "title": "race", "body": "v1" }]], "body": { "title": "race 2", "kind": "page" } }))),
    responses((status = 200, description = "the item with its versions", body = Data<Item>)))]
async fn update_item(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<ItemUpdate>) -> ApiResult<Data<Item>> {
    let mut tx = state.db.begin().await?;
    // Another tenant's item is not found, whatever the body.
    let item = find(&mut tx, &ctx.tenant_id, &id).await?;
    let body = body.checked()?;
    let mut check = Check::new();
    let title = match &body.title {
        None => None,
        Some(_) => Some(check.required("title", &body.title)),
    };
    let kind = body.kind;
    if title.is_none() && kind.is_none() {
        check.fail("give at least one of: title, kind");
    }
    check.finish()?;
    let now = db::now();
    let sql = format!(
        "UPDATE content_item SET title = COALESCE($1, title), kind = COALESCE($2, kind), updated_at = $3 \
         WHERE tenant_id = $4 AND item_id = $5 AND status = 'active' RETURNING {ITEM_COLUMNS}"
    );
    let changed: Option<Item> =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&title).bind(kind).bind(&now).bind(&ctx.tenant_id).bind(item.item_id).fetch_optional(&mut *tx).await?;
    let Some(changed) = changed else { return Err(ApiError::Conflict("the item is archived: it cannot be changed".to_string())) };
    let payload = json!({ "item_id": changed.item_id, "title_changed": title.is_some(), "kind": kind });
    audit::record(&mut tx, &ctx, events::CONTENT_ITEM_UPDATED, payload).await?;
    let item = with_versions(&mut tx, &ctx.tenant_id, &changed.item_id.to_string()).await?;
    // The search index follows the new title and kind.
    let latest = item.versions.last().map(|v| v.body.0.to_string());
    index(&mut tx, &ctx.tenant_id, &item, latest.as_deref(), &now).await?;
    tx.commit().await?;
    Ok(ok(item))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewContentVersion)]
struct NewVersion {
    /// The content: any JSON value but null, at most 256 KiB as JSON text.
    #[schema(value_type = Value)]
    body: Value,
    #[schema(max_length = 500)]
    note: Option<String>,
}

/// Adds the next version of an item; an archived item takes none (409).
#[utoipa::path(post, path = "/api/content/items/{item_id}/versions", tag = "sdk-content", request_body = NewVersion,
    params(("item_id" = String, Path, description = "the item")),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/content/items", { "title": "race", "body": "v1" }]], "body": { "body": "v2" } }))),
    responses((status = 201, description = "the version", body = Data<Version>)))]
async fn add_version(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<NewVersion>) -> ApiResult<Created<Version>> {
    let mut tx = state.db.begin().await?;
    let item = find(&mut tx, &ctx.tenant_id, &id).await?;
    let body = body.checked()?;
    let mut check = Check::new();
    let text = version_text(&mut check, &body.body);
    let note = Check::optional(&body.note);
    check.finish()?;
    // The item's number moves first, guarded by its status: two versions at
    // once get two numbers, and an archive in between stops the second.
    let next: Option<i64> = sqlx::query_scalar(
        "UPDATE content_item SET latest_version = latest_version + 1, updated_at = $2 WHERE item_id = $1 AND status = 'active' RETURNING latest_version",
    )
    .bind(item.item_id)
    .bind(db::now())
    .fetch_optional(&mut *tx)
    .await?;
    let Some(next) = next else { return Err(ApiError::Conflict("the item is archived: it takes no new version".to_string())) };
    let version = insert_version(&mut tx, &ctx, &item.item_id.to_string(), next, &text, &note).await?;
    index(&mut tx, &ctx.tenant_id, &item, Some(&text), &version.created_at.to_string()).await?;
    tx.commit().await?;
    Ok(created(version))
}

/// Archives an item (a soft state change: it and its versions stay
/// readable). Archiving an archived item changes nothing and answers 200.
#[utoipa::path(post, path = "/api/content/items/{item_id}/archive", tag = "sdk-content", params(("item_id" = String, Path, description = "the item")),
    extensions(("x-concurrency" = json!({ "outcome": "same-answer", "given": [["POST", "/api/content/items", { "title": "race", "body": "v1" }]] }))),
    responses((status = 200, description = "the item, archived, with its versions", body = Data<Item>)))]
async fn archive(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Item>> {
    let mut tx = state.db.begin().await?;
    let item = find(&mut tx, &ctx.tenant_id, &id).await?;
    let now = db::now();
    let moved = sqlx::query("UPDATE content_item SET status = 'archived', archived_at = $2, updated_at = $2 WHERE item_id = $1 AND status = 'active'")
        .bind(item.item_id)
        .bind(&now)
        .execute(&mut *tx)
        .await?;
    if moved.rows_affected() == 1 {
        audit::record(&mut tx, &ctx, events::CONTENT_ITEM_ARCHIVED, json!({ "item_id": item.item_id, "latest_version": item.latest_version })).await?;
    }
    let item = with_versions(&mut tx, &ctx.tenant_id, &item.item_id.to_string()).await?;
    tx.commit().await?;
    Ok(ok(item))
}

/// Restores an archived item: active again, it takes new versions and
/// changes. Restoring an active item changes nothing and answers 200.
#[utoipa::path(post, path = "/api/content/items/{item_id}/restore", tag = "sdk-content", params(("item_id" = String, Path, description = "the item")),
    extensions(("x-concurrency" = json!({ "outcome": "same-answer", "given": [
        ["POST", "/api/content/items", { "title": "race", "body": "v1" }],
        ["POST", "/api/content/items/{item_id}/archive", null]] }))),
    responses((status = 200, description = "the item, active, with its versions", body = Data<Item>)))]
async fn restore(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Item>> {
    let mut tx = state.db.begin().await?;
    let item = find(&mut tx, &ctx.tenant_id, &id).await?;
    let moved = sqlx::query("UPDATE content_item SET status = 'active', archived_at = NULL, updated_at = $2 WHERE item_id = $1 AND status = 'archived'")
        .bind(item.item_id)
        .bind(db::now())
        .execute(&mut *tx)
        .await?;
    if moved.rows_affected() == 1 {
        audit::record(&mut tx, &ctx, events::CONTENT_ITEM_RESTORED, json!({ "item_id": item.item_id, "latest_version": item.latest_version })).await?;
    }
    let item = with_versions(&mut tx, &ctx.tenant_id, &item.item_id.to_string()).await?;
    tx.commit().await?;
    Ok(ok(item))
}
