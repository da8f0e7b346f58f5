//! sdk-profile: the bands of an app identity (layer 2): `profile`,
//! `preference` and `notification_routing`, each a JSON object sealed under
//! its person's data key, so erasing the person's key makes every band of
//! theirs unreadable. A band is read by every tenant its person is a member
//! of, and written, whole, by the tenants of the identity's own app.
//!
//! This module owns profile_band: signup writes an identity's first
//! `profile` band through `insert_first`.

use std::collections::BTreeSet;

use axum::response::IntoResponse;

use crate::{
    auth,
    tenancy::{self, AppIdentity},
};
use hub_kernel::crypto::DataKey;
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_bands)).routes(routes!(get_band, put_band, delete_band))
}

stored_enum! {
    /// The bands of an app identity.
    #[schema(as = ProfileBandKind)]
    pub enum BandKind { Profile = "profile", Preference = "preference", NotificationRouting = "notification_routing" }
}

/// What one band may hold: its fields as JSON text, their number, the
/// length of a field's name.
const MAX_BYTES: usize = 64 * 1024;
const MAX_FIELDS: usize = 100;
const MAX_NAME: usize = 128;

#[derive(Debug, FromRow)]
struct Row {
    band_id: Id,
    app_identity_id: String,
    band_kind: BandKind,
    fields_envelope: Vec<u8>,
    created_at: Timestamp,
    updated_at: Timestamp,
}

const COLUMNS: &str = "band_id, app_identity_id, band_kind, fields_envelope, created_at, updated_at";

/// A band with its fields opened.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ProfileBand)]
struct Band {
    band_id: Id,
    app_identity_id: String,
    band_kind: BandKind,
    /// The band's fields; null once its person's data key is destroyed.
    #[schema(value_type = Option<Object>)]
    fields: Option<Value>,
    created_at: Timestamp,
    updated_at: Timestamp,
}

/// The document's answer: `{ band }`.
#[derive(Debug, Serialize, ToSchema)]
struct ProfileBandAnswer {
    band: Band,
}

/// The fields of a band, opened with its person's key (none once the key
/// is destroyed). They are bound to the app identity, as signup sealed them.
fn open(row: &Row, key: Option<&DataKey>) -> ApiResult<Option<Value>> {
    let Some(key) = key else { return Ok(None) };
    let plain = key.open(&row.fields_envelope, row.app_identity_id.as_bytes())?;
    Ok(Some(serde_json::from_slice(&plain).unwrap_or(Value::Null)))
}

fn answer(row: Row, fields: Option<Value>) -> ProfileBandAnswer {
    let Row { band_id, app_identity_id, band_kind, created_at, updated_at, .. } = row;
    ProfileBandAnswer { band: Band { band_id, app_identity_id, band_kind, fields, created_at, updated_at } }
}

/// Writes the first `profile` band of a new app identity, unless it has one.
pub async fn insert_first(tx: &mut Tx, key: &DataKey, app_identity_id: &str, fields: &Value) -> ApiResult<()> {
    sqlx::query(
        "INSERT INTO profile_band (band_id, app_identity_id, band_kind, fields_envelope, created_at, updated_at) \
         VALUES ($1, $2, 'profile', $3, $4, $4) ON CONFLICT (app_identity_id, band_kind) DO NOTHING",
    )
    .bind(db::new_id())
    .bind(app_identity_id)
    .bind(key.seal(fields.to_string().as_bytes(), app_identity_id.as_bytes()))
    .bind(db::now())
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The app identity of the path if the caller's tenant may see it.
async fn visible(tx: &mut Tx, ctx: &TenantCtx, id: &str) -> ApiResult<AppIdentity> {
    let id = path_id(id)?.to_string();
    tenancy::visible_app_identity(&mut **tx, &ctx.tenant_id, &id).await?.ok_or(ApiError::NotFound)
}

/// The band kind a path names (a problem when it names none).
fn band_kind(check: &mut Check, raw: &str) -> Option<BandKind> {
    let words: Vec<&str> = BandKind::ALL.iter().map(|k| k.as_str()).collect();
    check.one_of("band_kind", raw, &words);
    raw.parse().ok()
}

async fn find(tx: &mut Tx, app_identity_id: &str, kind: BandKind) -> ApiResult<Option<Row>> {
    let sql = format!("SELECT {COLUMNS} FROM profile_band WHERE app_identity_id = $1 AND band_kind = $2");
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(app_identity_id).bind(kind).fetch_optional(&mut **tx).await?)
}

/// One band of an app identity whose person is a member of the caller's tenant.
#[utoipa::path(get, path = "/api/profiles/{app_identity_id}/bands/{band_kind}", tag = "sdk-profile",
    params(("app_identity_id" = String, Path, description = "the app identity"),
        ("band_kind" = String, Path, description = "`profile`, `preference` or `notification_routing`")),
    responses((status = 200, description = "the band", body = Data<ProfileBandAnswer>)))]
async fn get_band(State(state): State<AppState>, Tenant(ctx): Tenant, Path((id, kind)): Path<(String, String)>) -> ApiResult<Data<ProfileBandAnswer>> {
    let mut tx = state.db.read.begin().await?;
    let identity = visible(&mut tx, &ctx, &id).await?;
    let mut check = Check::new();
    let kind = band_kind(&mut check, &kind);
    check.finish()?;
    let kind = kind.ok_or(ApiError::NotFound)?;
    let row = find(&mut tx, &identity.app_identity_id, kind).await?.ok_or(ApiError::NotFound)?;
    let key = auth::person_key(&mut tx, &state.master, &identity.person_id).await?;
    tx.commit().await?;
    let fields = open(&row, key.as_ref())?;
    Ok(ok(answer(row, fields)))
}

/// The bands of an app identity whose person is a member of the caller's
/// tenant, newest first (at most one of each kind).
#[utoipa::path(get, path = "/api/profiles/{app_identity_id}/bands", tag = "sdk-profile",
    params(("app_identity_id" = String, Path, description = "the app identity"), Page),
    responses((status = 200, description = "one page of the identity's bands", body = ListOf<Band>)))]
async fn list_bands(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, page: Page) -> ApiResult<ListOf<Band>> {
    let mut tx = state.db.read.begin().await?;
    let identity = visible(&mut tx, &ctx, &id).await?;
    let total: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM profile_band WHERE app_identity_id = $1").bind(&identity.app_identity_id).fetch_one(&mut *tx).await?;
    let sql = format!("SELECT {COLUMNS} FROM profile_band WHERE app_identity_id = $1 ORDER BY created_at DESC, band_id DESC LIMIT $2 OFFSET $3");
    let rows: Vec<Row> =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&identity.app_identity_id).bind(page.limit).bind(page.offset).fetch_all(&mut *tx).await?;
    let key = auth::person_key(&mut tx, &state.master, &identity.person_id).await?;
    tx.commit().await?;
    let mut bands = Vec::with_capacity(rows.len());
    for row in rows {
        let fields = open(&row, key.as_ref())?;
        bands.push(answer(row, fields).band);
    }
    Ok(list(bands, total))
}

/// A band of an app identity, cleared.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ProfileBandDeleted)]
struct Cleared {
    app_identity_id: String,
    band_kind: BandKind,
    /// The band that was removed.
    band_id: Id,
    /// `true`: the band and its sealed fields are gone (a later read is 404).
    deleted: bool,
}

/// Clears one band of an app identity of the caller's tenant's app: the
/// band and its sealed fields are deleted (the audit chain keeps only that
/// it was cleared). A band the identity does not have is 404.
#[utoipa::path(delete, path = "/api/profiles/{app_identity_id}/bands/{band_kind}", tag = "sdk-profile",
    params(("app_identity_id" = String, Path, description = "the app identity"),
        ("band_kind" = String, Path, description = "`profile`, `preference` or `notification_routing`")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "losers": 404, "params": { "band_kind": "preference" },
        "given": [["PUT", "/api/profiles/{app_identity_id}/bands/preference", { "fields": { "theme": "dark" } }]] }))),
    responses((status = 200, description = "the band, deleted", body = Data<Cleared>)))]
async fn delete_band(State(state): State<AppState>, Tenant(ctx): Tenant, Path((id, kind)): Path<(String, String)>) -> ApiResult<Data<Cleared>> {
    let mut tx = state.db.begin().await?;
    let identity = visible(&mut tx, &ctx, &id).await?;
    if identity.app_id != ctx.app_id {
        // Another app's identity: its bands are that app's to clear.
        return Err(ApiError::NotFound);
    }
    let mut check = Check::new();
    let kind = band_kind(&mut check, &kind);
    check.finish()?;
    let kind = kind.ok_or(ApiError::NotFound)?;
    // The delete says whether this request removed the band: of two at
    // once, the other finds none (404).
    let band_id: Id = sqlx::query_scalar("DELETE FROM profile_band WHERE app_identity_id = $1 AND band_kind = $2 RETURNING band_id")
        .bind(&identity.app_identity_id)
        .bind(kind)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or(ApiError::NotFound)?;
    let payload = json!({ "app_identity_id": identity.app_identity_id, "band_id": band_id, "band_kind": kind });
    audit::record(&mut tx, &ctx, events::PROFILE_BAND_CLEARED, payload).await?;
    tx.commit().await?;
    Ok(ok(Cleared { app_identity_id: identity.app_identity_id, band_kind: kind, band_id, deleted: true }))
}

/// A band's new content.
#[derive(Deserialize, ToSchema)]
#[schema(as = ProfileBandWrite)]
struct Write {
    /// The band's whole content, replacing what it held: an object of at
    /// most 100 fields (names of 1 to 128 characters), 64 KiB as JSON.
    #[schema(value_type = Object)]
    fields: serde_json::Map<String, Value>,
}

/// The fields of a write whose body matched its schema, checked for what
/// the schema cannot say (their number, their names, their size).
fn checked_fields(check: &mut Check, map: serde_json::Map<String, Value>) -> Value {
    if map.len() > MAX_FIELDS {
        check.fail(format!("fields must hold at most {MAX_FIELDS} fields"));
    }
    if map.keys().any(|k| k.trim().is_empty() || k.chars().count() > MAX_NAME) {
        check.fail(format!("every field name must be 1 to {MAX_NAME} characters"));
    }
    let v = Value::Object(map);
    if v.to_string().len() > MAX_BYTES {
        check.fail("fields must be at most 64 KiB as JSON");
    }
    v
}

/// The names of the fields whose value differs between two objects
/// (added, removed or changed), in order.
fn changed(before: &Value, after: &Value) -> Vec<String> {
    let (empty, mut names) = (serde_json::Map::new(), BTreeSet::new());
    let (b, a) = (before.as_object().unwrap_or(&empty), after.as_object().unwrap_or(&empty));
    names.extend(b.keys().chain(a.keys()).filter(|n| b.get(*n) != a.get(*n)).cloned());
    names.into_iter().collect()
}

/// Replaces one band of an app identity of the caller's tenant's app: 201
/// when it is the band's first content, 200 after.
#[utoipa::path(put, path = "/api/profiles/{app_identity_id}/bands/{band_kind}", tag = "sdk-profile", request_body = Write,
    params(("app_identity_id" = String, Path, description = "the app identity"),
        ("band_kind" = String, Path, description = "`profile`, `preference` or `notification_routing`")),
    extensions(("x-concurrency" = json!({ "outcome": "first-creates", "events": 2, "params": { "band_kind": "preference" }, "body": { "fields": { "theme": "dark" } } }))),
    responses((status = 200, description = "the band, replaced", body = Data<ProfileBandAnswer>),
        (status = 201, description = "the band, written for the first time", body = Data<ProfileBandAnswer>)))]
async fn put_band(State(state): State<AppState>, Tenant(ctx): Tenant, Path((id, kind)): Path<(String, String)>, body: Body<Write>) -> ApiResult<Response> {
    let mut tx = state.db.begin().await?;
    let identity = visible(&mut tx, &ctx, &id).await?;
    if identity.app_id != ctx.app_id {
        // Visible through a membership, but another app's identity: its
        // bands are that app's to write.
        return Err(ApiError::NotFound);
    }
    // The path's band kind and the body's schema, named together.
    let mut check = Check::new();
    let kind = band_kind(&mut check, &kind);
    let body = match (body.checked(), check.finish()) {
        (Ok(body), Ok(())) => body,
        (Err(ApiError::Validation(problems)), Err(ApiError::Validation(mut path))) => {
            path.extend(problems);
            return Err(ApiError::Validation(path));
        }
        (Err(e), _) | (_, Err(e)) => return Err(e),
    };
    let kind = kind.ok_or(ApiError::NotFound)?;
    let mut check = Check::new();
    let fields = checked_fields(&mut check, body.fields);
    check.finish()?;
    let key = auth::person_key(&mut tx, &state.master, &identity.person_id).await?;
    let key = key.ok_or_else(|| ApiError::Conflict("the person's data key is destroyed: their bands can no longer be written".into()))?;
    let sealed = key.seal(fields.to_string().as_bytes(), identity.app_identity_id.as_bytes());
    let now = db::now();
    // The band's first content is a first write: of two at once, one
    // inserts it (201) and the other finds it and replaces it as any later
    // write would (200), never a 409 from the unique (identity, kind).
    let insert = format!(
        "INSERT INTO profile_band (band_id, app_identity_id, band_kind, fields_envelope, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $5) \
         ON CONFLICT (app_identity_id, band_kind) DO NOTHING RETURNING {COLUMNS}"
    );
    let stored = format!("SELECT {COLUMNS} FROM profile_band WHERE app_identity_id = $1 AND band_kind = $2");
    let (row, written): (Row, _) = insert_or_read(
        &mut tx,
        sqlx::query_as(sqlx::AssertSqlSafe(insert)).bind(db::new_id()).bind(&identity.app_identity_id).bind(kind).bind(sealed.clone()).bind(&now),
        sqlx::query_as(sqlx::AssertSqlSafe(stored)).bind(&identity.app_identity_id).bind(kind),
    )
    .await?;
    let first = written == Written::Made;
    let (row, names) = if first {
        (row, changed(&json!({}), &fields))
    } else {
        let before = open(&row, Some(&key))?.unwrap_or_else(|| json!({}));
        let names = changed(&before, &fields);
        if names.is_empty() {
            // The same content again: nothing is written, nothing recorded.
            return Ok(ok(answer(row, Some(fields))).into_response());
        }
        // Replaced only if nobody replaced it since it was read (each
        // envelope has a fresh nonce), so the recorded names are right.
        let sql = format!("UPDATE profile_band SET fields_envelope = $1, updated_at = $2 WHERE band_id = $3 AND fields_envelope = $4 RETURNING {COLUMNS}");
        let replaced: Option<Row> =
            sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(sealed).bind(&now).bind(row.band_id).bind(&row.fields_envelope).fetch_optional(&mut *tx).await?;
        (replaced.ok_or_else(|| ApiError::Conflict("the band was replaced meanwhile: read it and try again".into()))?, names)
    };
    // Names of the fields, never their values.
    let payload = json!({ "app_identity_id": row.app_identity_id, "band_id": row.band_id, "band_kind": kind, "changed_fields": names });
    audit::record(&mut tx, &ctx, events::PROFILE_BAND_UPDATED, payload.clone()).await?;
    let also = match kind {
        BandKind::Preference => Some(events::PROFILE_PREFERENCE_CHANGED),
        BandKind::NotificationRouting => Some(events::PROFILE_NOTIFICATION_ROUTING_CHANGED),
        BandKind::Profile => None,
    };
    if let Some(event) = also {
        audit::record(&mut tx, &ctx, event, payload).await?;
    }
    tx.commit().await?;
    let band = answer(row, Some(fields));
    Ok(if first { created(band).into_response() } else { ok(band).into_response() })
}
