//! sdk-geo: canonical addresses. A posted address is normalised (spaces
//! collapsed, postal code and country upper-cased, empty parts dropped) and
//! stored once per tenant and canonical form: posting the same address
//! again, however spelt, answers the stored one. Addresses are scoped to
//! the caller's tenant: they are personal data, so "not tenant-scoped"
//! would let any tenant read another's customers' addresses.

use axum::response::IntoResponse;
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(canonicalise, list_addresses)).routes(routes!(get_address, delete_address))
}

/// An address as stored.
#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = GeoAddress)]
struct Address {
    address_id: Id,
    /// The normalised one-line form the address is known by.
    canonical: String,
    #[sqlx(try_from = "String")]
    #[schema(value_type = Vec<String>)]
    lines: JsonText,
    locality: Option<String>,
    region: Option<String>,
    postal_code: Option<String>,
    country_code: String,
    created_at: Timestamp,
}

const COLUMNS: &str = "address_id, canonical, lines, locality, region, postal_code, country_code, created_at";
const ADDRESSES: Listing = Listing {
    table: "geo_address",
    columns: COLUMNS,
    filter: "tenant_id = $1 AND ($2 = '' OR country_code = $2) AND ($3 = '' OR postal_code = $3)",
    order: "created_at DESC, address_id DESC",
};

/// The answer of an address's delete.
#[derive(Serialize, ToSchema)]
#[schema(as = GeoAddressDeleted)]
struct Deleted {
    address_id: Id,
    deleted: bool,
}

/// The answer: `{ address }`, with `created` on a post.
#[derive(Serialize, ToSchema)]
#[schema(as = GeoAddressAnswer)]
struct Answer {
    address: Address,
    #[serde(skip_serializing_if = "Option::is_none")]
    created: Option<bool>,
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewGeoAddress)]
struct NewAddress {
    /// Street lines, at least one of them not blank.
    #[schema(min_items = 1, max_items = 4)]
    lines: Vec<String>,
    locality: Option<String>,
    region: Option<String>,
    postal_code: Option<String>,
    /// ISO 3166-1 alpha-2.
    country_code: String,
}

/// Spaces collapsed; empty is absent.
fn tidy(s: &str) -> Option<String> {
    let t = s.split_whitespace().collect::<Vec<_>>().join(" ");
    (!t.is_empty()).then_some(t)
}

/// Canonicalises and stores an address (201), or answers the stored one
/// with the same canonical form (200).
#[utoipa::path(post, path = "/api/geo/addresses", tag = "sdk-geo", request_body = NewAddress,
    extensions(("x-concurrency" = json!({ "outcome": "first-creates", "events": 1, "body": { "lines": ["{unique} Race Lane"], "locality": "Amsterdam", "country_code": "NL" } }))),
    responses((status = 201, description = "stored", body = Data<Answer>), (status = 200, description = "already stored", body = Data<Answer>)))]
async fn canonicalise(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewAddress>) -> ApiResult<Response> {
    let body = body.checked()?;
    let mut check = Check::new();
    let lines: Vec<String> = body.lines.iter().filter_map(|l| tidy(l)).collect();
    if lines.is_empty() {
        check.fail("lines must hold 1 to 4 non-empty street lines");
    }
    let country = tidy(&body.country_code).map(|c| c.to_ascii_uppercase()).unwrap_or_default();
    if country.len() != 2 || !country.bytes().all(|b| b.is_ascii_uppercase()) {
        check.fail("country_code must be an ISO 3166-1 alpha-2 code");
    }
    check.finish()?;
    let locality = body.locality.as_deref().and_then(tidy);
    let region = body.region.as_deref().and_then(tidy);
    let postal = body.postal_code.as_deref().and_then(tidy).map(|p| p.to_ascii_uppercase());
    let place = [postal.clone(), locality.clone()].into_iter().flatten().collect::<Vec<_>>().join(" ");
    let mut parts: Vec<String> = lines.clone();
    parts.extend([Some(place).filter(|p| !p.is_empty()), region.clone(), Some(country.clone())].into_iter().flatten());
    let canonical = parts.join(", ");
    let key = canonical.to_lowercase();
    let mut tx = state.db.begin().await?;
    let sql = format!("SELECT {COLUMNS} FROM geo_address WHERE tenant_id = $1 AND lower(canonical) = $2");
    let stored: Option<Address> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&key).fetch_optional(&mut *tx).await?;
    if let Some(address) = stored {
        return Ok(ok(Answer { address, created: Some(false) }).into_response());
    }
    // The first store of a canonical form inserts it (201); any other,
    // concurrent or later, finds it (the unique canonical form) and
    // answers it (200), never a unique violation.
    let insert = format!(
        "INSERT INTO geo_address (address_id, tenant_id, canonical, lines, locality, region, postal_code, country_code, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (tenant_id, canonical) DO NOTHING RETURNING {COLUMNS}"
    );
    let read = format!("SELECT {COLUMNS} FROM geo_address WHERE tenant_id = $1 AND canonical = $2");
    let (address, written): (Address, _) = insert_or_read(
        &mut tx,
        sqlx::query_as(sqlx::AssertSqlSafe(insert))
            .bind(db::new_id())
            .bind(&ctx.tenant_id)
            .bind(&canonical)
            .bind(json!(lines).to_string())
            .bind(&locality)
            .bind(&region)
            .bind(&postal)
            .bind(&country)
            .bind(db::now()),
        sqlx::query_as(sqlx::AssertSqlSafe(read)).bind(&ctx.tenant_id).bind(&canonical),
    )
    .await?;
    if written == Written::Found {
        return Ok(ok(Answer { address, created: Some(false) }).into_response());
    }
    // The event names the address, never its text (personal data).
    audit::record(&mut tx, &ctx, events::ADDRESS_CANONICALISED, json!({ "address_id": address.address_id, "country_code": country })).await?;
    tx.commit().await?;
    Ok(created(Answer { address, created: Some(true) }).into_response())
}

/// One canonical address of the caller's tenant.
#[utoipa::path(get, path = "/api/geo/addresses/{address_id}", tag = "sdk-geo", params(("address_id" = String, Path, description = "the address")),
    responses((status = 200, description = "`{ address }`", body = Data<Answer>)))]
async fn get_address(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Answer>> {
    let id = path_id(&id)?.to_string();
    let sql = format!("SELECT {COLUMNS} FROM geo_address WHERE tenant_id = $1 AND address_id = $2");
    let address: Address =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&state.db.read).await?.ok_or(ApiError::NotFound)?;
    Ok(ok(Answer { address, created: None }))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct AddressQuery {
    /// Only addresses in this country (ISO 3166-1 alpha-2, any case).
    #[param(min_length = 2, max_length = 2)]
    country_code: Option<String>,
    /// Only addresses with this postal code (spaces and case as a post
    /// normalises them).
    #[param(max_length = 32)]
    postal_code: Option<String>,
}

/// A page of the caller's tenant's addresses, newest first.
#[utoipa::path(get, path = "/api/geo/addresses", tag = "sdk-geo", params(AddressQuery, Page),
    responses((status = 200, description = "a page of addresses", body = ListOf<Address>)))]
async fn list_addresses(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<AddressQuery>, page: Page) -> ApiResult<ListOf<Address>> {
    let country = q.country_code.as_deref().and_then(tidy).map(|c| c.to_ascii_uppercase());
    if country.as_ref().is_some_and(|c| c.len() != 2 || !c.bytes().all(|b| b.is_ascii_uppercase())) {
        return Err(ApiError::invalid("country_code must be an ISO 3166-1 alpha-2 code"));
    }
    let postal = q.postal_code.as_deref().and_then(tidy).map(|p| p.to_ascii_uppercase()).unwrap_or_default();
    page.list::<Address>(&state.db.read, &ADDRESSES, &[&ctx.tenant_id, &country.unwrap_or_default(), &postal]).await
}

/// Erases an address of the caller's tenant. The audit chain names
/// addresses by id only, so nothing of its text outlives the delete. An
/// address an encounter still refers to is kept (409).
#[utoipa::path(delete, path = "/api/geo/addresses/{address_id}", tag = "sdk-geo", params(("address_id" = String, Path, description = "the address")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "losers": 404, "params": { "address_id": "{address.address_id}" },
        "given": [["POST", "/api/geo/addresses", { "lines": ["{unique} Race Lane"], "locality": "Amsterdam", "country_code": "NL" }]] }))),
    responses((status = 200, description = "erased", body = Data<Deleted>),
        (status = 409, description = "an encounter refers to the address", body = ErrorBody)))]
async fn delete_address(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Deleted>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    // The row lock waits for an encounter being opened on the address (its
    // foreign key holds the row) and holds off any other until the delete
    // commits, so the check below sees every encounter that refers to it.
    // Of two deletes at once, the other finds nothing (404).
    let lock = if state.db.backend == db::Backend::Postgres { " FOR UPDATE" } else { "" };
    let sql = format!("SELECT address_id FROM geo_address WHERE tenant_id = $1 AND address_id = $2{lock}");
    let found: Option<Id> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&mut *tx).await?;
    let address_id = found.ok_or(ApiError::NotFound)?;
    let used: Option<i64> =
        sqlx::query_scalar("SELECT 1 FROM engagement_encounter WHERE address_id = $1 LIMIT 1").bind(address_id).fetch_optional(&mut *tx).await?;
    if used.is_some() {
        return Err(ApiError::Conflict("an encounter refers to this address; it is kept while the encounter is".into()));
    }
    sqlx::query("DELETE FROM geo_address WHERE tenant_id = $1 AND address_id = $2").bind(&ctx.tenant_id).bind(address_id).execute(&mut *tx).await?;
    audit::record(&mut tx, &ctx, events::ADDRESS_DELETED, json!({ "address_id": address_id })).await?;
    tx.commit().await?;
    Ok(ok(Deleted { address_id, deleted: true }))
}
