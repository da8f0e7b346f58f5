//! sdk-geo: canonical addresses. A posted address is normalised (spaces
//! collapsed, postal code and country upper-cased, empty parts dropped) and
//! stored once per tenant and canonical form: posting the same address
//! again, however spelt, answers the stored one. Addresses are scoped to
//! the caller's tenant: they are personal data, so "not tenant-scoped"
//! would let any tenant read another's customers' addresses.

use axum::response::IntoResponse;
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(canonicalise)).routes(routes!(get_address))
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
