//! sdk-tenant: the tenant's residency tree. Nodes are regions, countries,
//! states, cities and localities; a node's parent, when it has one, is a
//! node of the same tenant at a higher level (levels may be skipped: a city
//! straight under a country without states). `residency_class` says how
//! data placed there may travel; `open` by default.

use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_nodes, create_node)).routes(routes!(get_node, update_node, delete_node))
}

stored_enum! {
    /// A node's level in the tree, highest first.
    #[schema(as = ResidencyNodeKind)]
    pub enum Kind { Region = "region", Country = "country", State = "state", City = "city", Locality = "locality" }
}

stored_enum! {
    /// How data under a node may move.
    #[schema(as = ResidencyClass)]
    pub enum Class { Open = "open", Restricted = "restricted", Sovereign = "sovereign" }
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = ResidencyNode)]
struct Node {
    geo_node_id: Id,
    kind: Kind,
    name: String,
    code: Option<String>,
    parent_geo_node_id: Option<Id>,
    residency_class: Class,
    created_at: Timestamp,
}

const COLUMNS: &str = "geo_node_id, kind, name, code, parent_geo_node_id, residency_class, created_at";
const NODES: Listing = Listing {
    table: "residency_node",
    columns: COLUMNS,
    filter: "tenant_id = $1 AND ($2 = '' OR parent_geo_node_id = $2) AND ($3 = '' OR kind = $3)",
    order: "created_at, geo_node_id",
};

#[derive(Deserialize, ToSchema)]
#[schema(as = NewResidencyNode)]
struct NewNode {
    #[schema(max_length = 200)]
    name: String,
    kind: Kind,
    /// A code (ISO 3166 and the like).
    #[schema(max_length = 32)]
    code: Option<String>,
    /// A node of this tenant at a higher level.
    #[schema(format = "uuid")]
    parent_geo_node_id: Option<String>,
    /// `open` when absent.
    residency_class: Option<Class>,
}

/// A kind's level in the tree: 0 at the top.
fn level(kind: Kind) -> usize {
    kind as usize
}

/// Creates a node of the residency tree.
#[utoipa::path(post, path = "/api/residency/nodes", tag = "sdk-tenant", request_body = NewNode,
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "body": { "name": "race-{unique}", "kind": "region" } }))),
    responses((status = 201, description = "the node", body = Data<Node>)))]
async fn create_node(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewNode>) -> ApiResult<Created<Node>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let name = body.name.trim().to_string();
    let kind = body.kind;
    let code = Check::optional(&body.code);
    let class = body.residency_class.unwrap_or(Class::Open);
    let parent = check.optional_uuid("parent_geo_node_id", &body.parent_geo_node_id).map(|u| u.to_string());
    check.finish()?;
    let mut tx = state.db.begin().await?;
    if let Some(parent) = &parent {
        let parent_kind: Option<Kind> = sqlx::query_scalar("SELECT kind FROM residency_node WHERE tenant_id = $1 AND geo_node_id = $2")
            .bind(&ctx.tenant_id)
            .bind(parent)
            .fetch_optional(&mut *tx)
            .await?;
        match parent_kind {
            None => return Err(ApiError::invalid("parent_geo_node_id names no node of this tenant")),
            Some(p) if level(p) >= level(kind) => return Err(ApiError::invalid(format!("a {kind} cannot be placed under a {p}"))),
            Some(_) => {}
        }
    }
    let sql = format!(
        "INSERT INTO residency_node (geo_node_id, tenant_id, kind, name, code, parent_geo_node_id, residency_class, created_by, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING {COLUMNS}"
    );
    let node: Node = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(kind)
        .bind(&name)
        .bind(&code)
        .bind(&parent)
        .bind(class)
        .bind(&ctx.persona_id)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
    let fact = json!({ "geo_node_id": node.geo_node_id, "kind": kind, "parent_geo_node_id": parent, "residency_class": class });
    audit::record(&mut tx, &ctx, events::RESIDENCY_NODE_CREATED, fact).await?;
    tx.commit().await?;
    Ok(created(node))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct NodeQuery {
    /// Only the children of this node.
    #[param(format = "uuid")]
    parent_geo_node_id: Option<String>,
    /// Only nodes of this kind.
    #[param(inline)]
    kind: Option<Kind>,
}

/// The tenant's residency nodes, oldest first.
#[utoipa::path(get, path = "/api/residency/nodes", tag = "sdk-tenant", params(NodeQuery, Page),
    responses((status = 200, description = "the nodes", body = ListOf<Node>)))]
async fn list_nodes(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<NodeQuery>, page: Page) -> ApiResult<ListOf<Node>> {
    let parent = canonical_uuid_opt(&q.parent_geo_node_id).unwrap_or_default();
    let kind = q.kind.map_or("", Kind::as_str);
    page.list::<Node>(&state.db.read, &NODES, &[&ctx.tenant_id, &parent, kind]).await
}

/// The tenant's node `id`.
async fn find<'e, E>(exec: E, tenant_id: &str, id: &str) -> ApiResult<Node>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let sql = format!("SELECT {COLUMNS} FROM residency_node WHERE tenant_id = $1 AND geo_node_id = $2");
    let found: Option<Node> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(id).fetch_optional(exec).await?;
    found.ok_or(ApiError::NotFound)
}

/// A node of the tenant's residency tree.
#[utoipa::path(get, path = "/api/residency/nodes/{geo_node_id}", tag = "sdk-tenant",
    params(("geo_node_id" = String, Path, description = "the node")),
    responses((status = 200, description = "the node", body = Data<Node>)))]
async fn get_node(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Node>> {
    let id = path_id(&id)?.to_string();
    Ok(ok(find(&state.db.read, &ctx.tenant_id, &id).await?))
}

/// A change of a node: what is absent stays. Its kind and place in the
/// tree stay as created.
#[derive(Deserialize, ToSchema)]
#[schema(as = ResidencyNodeChange)]
struct NodeChange {
    /// Unique among the node's siblings of its kind.
    #[schema(min_length = 1, max_length = 200)]
    name: Option<String>,
    /// A code (ISO 3166 and the like).
    #[schema(min_length = 1, max_length = 32)]
    code: Option<String>,
    residency_class: Option<Class>,
}

/// Renames a node, changes its code or its residency class (at least one
/// is given). A name a sibling of the same kind has is 409.
#[utoipa::path(patch, path = "/api/residency/nodes/{geo_node_id}", tag = "sdk-tenant", request_body = NodeChange,
    params(("geo_node_id" = String, Path, description = "the node")),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/residency/nodes", { "name": "race-{unique}", "kind": "region" }]],
        "body": { "residency_class": "restricted", "code": "RC" } }))),
    responses((status = 200, description = "the node", body = Data<Node>),
        (status = 409, description = "Conflict: a sibling of the same kind has the name", body = ErrorBody)))]
async fn update_node(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<NodeChange>) -> ApiResult<Data<Node>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    find(&mut *tx, &ctx.tenant_id, &id).await?;
    let body = body.checked()?;
    let mut check = Check::new();
    let name = body.name.as_deref().map(str::trim);
    let code = body.code.as_deref().map(str::trim);
    if name.is_none() && code.is_none() && body.residency_class.is_none() {
        check.fail("give at least one of name, code, residency_class");
    }
    check.finish()?;
    // The sibling index decides a name taken meanwhile (409).
    let sql = format!(
        "UPDATE residency_node SET name = COALESCE($3, name), code = COALESCE($4, code), residency_class = COALESCE($5, residency_class) \
         WHERE tenant_id = $1 AND geo_node_id = $2 RETURNING {COLUMNS}"
    );
    let node: Option<Node> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&ctx.tenant_id)
        .bind(&id)
        .bind(name)
        .bind(code)
        .bind(body.residency_class)
        .fetch_optional(&mut *tx)
        .await?;
    let node = node.ok_or(ApiError::NotFound)?;
    let fact = json!({ "geo_node_id": node.geo_node_id, "name": name, "code": code, "residency_class": body.residency_class });
    audit::record(&mut tx, &ctx, events::RESIDENCY_NODE_UPDATED, fact).await?;
    tx.commit().await?;
    Ok(ok(node))
}

/// A deleted node.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = DeletedResidencyNode)]
struct Deleted {
    geo_node_id: Id,
    deleted: bool,
}

/// Deletes a leaf node of the tree (a node with children is 409: delete
/// them first). The audit trail keeps its creation and deletion.
#[utoipa::path(delete, path = "/api/residency/nodes/{geo_node_id}", tag = "sdk-tenant",
    params(("geo_node_id" = String, Path, description = "the node")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "losers": 404, "given": [["POST", "/api/residency/nodes", { "name": "race-{unique}", "kind": "region" }]] }))),
    responses((status = 200, description = "deleted", body = Data<Deleted>),
        (status = 409, description = "Conflict: the node has child nodes", body = ErrorBody)))]
async fn delete_node(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Deleted>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    let node = find(&mut *tx, &ctx.tenant_id, &id).await?;
    let has_children = || ApiError::Conflict("the node has child nodes: delete them first".into());
    // The delete says whether this request removed the leaf: of two at
    // once, the other finds nothing (404). A child added meanwhile fails
    // the parent's foreign key (409).
    let deleted: Result<Option<String>, sqlx::Error> = sqlx::query_scalar(
        "DELETE FROM residency_node WHERE tenant_id = $1 AND geo_node_id = $2 \
         AND NOT EXISTS (SELECT 1 FROM residency_node c WHERE c.parent_geo_node_id = $2) RETURNING geo_node_id",
    )
    .bind(&ctx.tenant_id)
    .bind(&id)
    .fetch_optional(&mut *tx)
    .await;
    match deleted {
        Ok(Some(_)) => {}
        Ok(None) => {
            let children: Option<String> =
                sqlx::query_scalar("SELECT geo_node_id FROM residency_node WHERE parent_geo_node_id = $1 LIMIT 1").bind(&id).fetch_optional(&mut *tx).await?;
            return Err(if children.is_some() { has_children() } else { ApiError::NotFound });
        }
        Err(e) if e.as_database_error().is_some_and(|d| d.kind() == sqlx::error::ErrorKind::ForeignKeyViolation) => return Err(has_children()),
        Err(e) => return Err(e.into()),
    }
    let fact = json!({ "geo_node_id": node.geo_node_id, "kind": node.kind, "parent_geo_node_id": node.parent_geo_node_id });
    audit::record(&mut tx, &ctx, events::RESIDENCY_NODE_DELETED, fact).await?;
    tx.commit().await?;
    Ok(ok(Deleted { geo_node_id: node.geo_node_id, deleted: true }))
}
