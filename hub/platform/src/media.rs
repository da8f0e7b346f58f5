//! sdk-media: blobs uploaded in three steps. `POST /api/media/blobs`
//! starts one (`pending`); `PUT …/content` streams the bytes to the object
//! store (`HUB_MEDIA_STORE`) in parts, never whole in memory, up to
//! `HUB_MEDIA_MAX_BYTES`; `POST …/commit` reads the stored bytes back,
//! compares their SHA-256 with `checksum_hex`, and only then makes the
//! blob `ready`. Every upload is a new object: a commit names the one it
//! verified, so a later upload can never change a committed blob.

use aws_lc_rs::digest;
use axum::{
    body::Body as RawBody,
    http::{HeaderMap, HeaderValue, header},
    response::IntoResponse,
};
use futures_util::{StreamExt, TryStreamExt};
use hub_kernel::prelude::*;
use object_store::{ObjectStore, PutPayload, WriteMultipart, path::Path as ObjectPath};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(start, list_blobs))
        .routes(routes!(get_blob, delete_blob))
        .routes(routes!(put_content, get_content))
        .routes(routes!(commit))
}

/// Parts of an upload in flight to the store at once (each up to the
/// store's part size, 5 MiB): what an upload holds in memory at most.
const PARTS_IN_FLIGHT: usize = 2;

stored_enum! {
    /// `pending` until a commit verified the content, then `ready`.
    #[schema(as = MediaBlobStatus)]
    enum BlobStatus { Pending = "pending", Ready = "ready" }
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = MediaBlob)]
struct Blob {
    blob_id: Id,
    status: BlobStatus,
    content_type: String,
    filename: Option<String>,
    /// The size the upload was started with, when one was given.
    declared_bytes: Option<i64>,
    /// The size of the uploaded content.
    size_bytes: Option<i64>,
    /// Lowercase hex SHA-256 of the content, once committed.
    sha256: Option<String>,
    #[serde(skip)]
    object_key: Option<String>,
    created_by: String,
    created_at: Timestamp,
    uploaded_at: Option<Timestamp>,
    committed_at: Option<Timestamp>,
}

const COLUMNS: &str =
    "blob_id, status, content_type, filename, declared_bytes, size_bytes, sha256, object_key, created_by, created_at, uploaded_at, committed_at";
const BLOBS: Listing = Listing {
    table: "media_blob",
    columns: COLUMNS,
    filter: "tenant_id = $1 AND ($2 = '' OR status = $2) AND ($3 = '' OR content_type = $3)",
    order: "created_at DESC, blob_id DESC",
};

async fn find(db: &Db, tenant_id: &str, id: &str) -> ApiResult<Blob> {
    let id = path_id(id)?.to_string();
    let sql = format!("SELECT {COLUMNS} FROM media_blob WHERE tenant_id = $1 AND blob_id = $2");
    let found: Option<Blob> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(&id).fetch_optional(&db.read).await?;
    found.ok_or(ApiError::NotFound)
}

/// 503 with `Retry-After` when the store cannot serve, else a 500.
fn storage_error(e: object_store::Error) -> ApiError {
    hub_kernel::storage::failure(e, "the media store")
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewMediaBlob)]
struct NewBlob {
    /// A media type, `type/subtype` with optional parameters;
    /// `application/octet-stream` when absent.
    #[schema(max_length = 255)]
    content_type: Option<String>,
    /// No control characters.
    #[schema(max_length = 255)]
    filename: Option<String>,
    /// The size the content will have: the upload must match it. At most
    /// the hub's largest content (`max_bytes` of the answer).
    #[schema(minimum = 0)]
    size_bytes: Option<i64>,
}

#[derive(Serialize, ToSchema)]
#[schema(as = MediaUploadStarted)]
struct Started {
    #[serde(flatten)]
    blob: Blob,
    /// Where to `PUT` the content.
    upload_path: String,
    /// The largest content this hub accepts, bytes.
    max_bytes: u64,
}

fn valid_content_type(s: &str) -> bool {
    let essence = s.split(';').next().unwrap_or_default().trim();
    s.len() <= 255
        && s.bytes().all(|b| (0x20..0x7f).contains(&b))
        && essence.split_once('/').is_some_and(|(t, sub)| !t.is_empty() && !sub.is_empty() && !sub.contains('/') && !essence.contains(' '))
}

/// Starts an upload: a `pending` blob to `PUT` the content to.
#[utoipa::path(post, path = "/api/media/blobs", tag = "sdk-media", request_body = NewBlob,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "body": { "content_type": "text/plain", "filename": "race.txt" } }))),
    responses((status = 201, description = "the blob, pending", body = Data<Started>)))]
async fn start(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewBlob>) -> ApiResult<Created<Started>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let content_type = Check::optional(&body.content_type).unwrap_or_else(|| "application/octet-stream".into());
    if !valid_content_type(&content_type) {
        check.fail("content_type must be a media type such as image/png, at most 255 characters");
    }
    let filename = Check::optional(&body.filename);
    if filename.as_ref().is_some_and(|f| f.chars().count() > 255 || f.chars().any(char::is_control)) {
        check.fail("filename must be at most 255 characters, none of them control characters");
    }
    let max = state.config.media_max_bytes;
    let declared = body.size_bytes;
    if declared.is_some_and(|n| n > i64::try_from(max).unwrap_or(i64::MAX)) {
        check.fail(format!("size_bytes must be an integer from 0 to {max}"));
    }
    check.finish()?;
    let mut tx = state.db.begin().await?;
    let sql = format!(
        "INSERT INTO media_blob (blob_id, tenant_id, status, content_type, filename, declared_bytes, created_by, created_at) \
         VALUES ($1, $2, 'pending', $3, $4, $5, $6, $7) RETURNING {COLUMNS}"
    );
    let blob: Blob = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(&content_type)
        .bind(&filename)
        .bind(declared)
        .bind(audit::actor_of(&ctx).1)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
    let payload = json!({ "blob_id": blob.blob_id, "content_type": content_type, "declared_bytes": declared });
    audit::record(&mut tx, &ctx, events::MEDIA_UPLOAD_STARTED, payload).await?;
    tx.commit().await?;
    let upload_path = format!("/api/media/blobs/{}/content", blob.blob_id);
    Ok(created(Started { blob, upload_path, max_bytes: max }))
}

/// A blob's metadata.
#[utoipa::path(get, path = "/api/media/blobs/{blob_id}", tag = "sdk-media", params(("blob_id" = String, Path, description = "the blob")),
    responses((status = 200, description = "the blob", body = Data<Blob>)))]
async fn get_blob(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Blob>> {
    Ok(ok(find(&state.db, &ctx.tenant_id, &id).await?))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct BlobFilter {
    /// Only blobs in this status (`pending`: uploads not committed).
    #[param(inline)]
    status: Option<BlobStatus>,
    /// Only blobs of exactly this content type.
    #[param(max_length = 255)]
    content_type: Option<String>,
}

/// The caller's tenant's blobs, newest first.
#[utoipa::path(get, path = "/api/media/blobs", tag = "sdk-media", params(BlobFilter, Page),
    responses((status = 200, description = "a page of blobs", body = ListOf<Blob>)))]
async fn list_blobs(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<BlobFilter>, page: Page) -> ApiResult<ListOf<Blob>> {
    let status = q.status.map_or("", BlobStatus::as_str);
    let content_type = Check::optional(&q.content_type).unwrap_or_default();
    page.list::<Blob>(&state.db.read, &BLOBS, &[&ctx.tenant_id, status, &content_type]).await
}

/// The answer of a blob's delete.
#[derive(Serialize, ToSchema)]
#[schema(as = MediaBlobDeleted)]
struct Deleted {
    blob_id: Id,
    deleted: bool,
}

/// Deletes a blob, pending or ready: its stored content is erased from the
/// object store and its metadata removed (the audit chain keeps that it
/// existed: id, size, checksum, never the name). When the store cannot
/// erase the content now, nothing is deleted (503, retry).
#[utoipa::path(delete, path = "/api/media/blobs/{blob_id}", tag = "sdk-media", params(("blob_id" = String, Path, description = "the blob")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "losers": 404, "given": [["POST", "/api/media/blobs", { "content_type": "text/plain" }]] }))),
    responses((status = 200, description = "deleted, content included", body = Data<Deleted>),
        (status = 503, description = "ServiceUnavailable: the object store cannot serve now; retry after Retry-After seconds", body = ErrorBody, headers(("Retry-After" = u64, description = "seconds to wait before retrying")))))]
async fn delete_blob(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Deleted>> {
    let blob_id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    // The delete itself says whether this request removed the blob: of two
    // deletes at once, the other finds nothing (404). An upload finishing
    // meanwhile finds no pending blob and discards its object.
    let sql = format!("DELETE FROM media_blob WHERE tenant_id = $1 AND blob_id = $2 RETURNING {COLUMNS}");
    let blob: Blob = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&blob_id).fetch_optional(&mut *tx).await?.ok_or(ApiError::NotFound)?;
    let payload = json!({
        "blob_id": blob.blob_id, "status": blob.status, "content_type": blob.content_type, "size_bytes": blob.size_bytes, "sha256": blob.sha256,
        "content_erased": blob.object_key.is_some(),
    });
    audit::record(&mut tx, &ctx, events::MEDIA_BLOB_DELETED, payload).await?;
    // The content goes before the row does: while the store cannot erase
    // it, the blob stays (the transaction rolls back).
    if let Some(key) = &blob.object_key {
        match state.media.delete(&ObjectPath::from(key.as_str())).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(storage_error(e)),
        }
    }
    tx.commit().await?;
    Ok(ok(Deleted { blob_id: blob.blob_id, deleted: true }))
}

/// Streams `body` into a new object at `key`, at most `max` bytes; the
/// object is removed again when anything fails.
async fn store(store: &dyn ObjectStore, key: &ObjectPath, body: RawBody, max: u64) -> ApiResult<u64> {
    let mut writer = WriteMultipart::new(store.put_multipart(key).await.map_err(storage_error)?);
    let mut stream = body.into_data_stream();
    let mut total: u64 = 0;
    while let Some(chunk) = stream.next().await {
        let failure = match chunk {
            Ok(bytes) => {
                total += bytes.len() as u64;
                if total > max {
                    Some(ApiError::ContentTooLarge(max))
                } else {
                    match writer.wait_for_capacity(PARTS_IN_FLIGHT).await {
                        Ok(()) => {
                            writer.write(&bytes);
                            None
                        }
                        Err(e) => Some(storage_error(e)),
                    }
                }
            }
            Err(e) => Some(ApiError::invalid(format!("the content could not be read: {e}"))),
        };
        if let Some(e) = failure {
            writer.abort().await.ok();
            return Err(e);
        }
    }
    if total == 0 {
        // A multipart upload of no parts is not an object everywhere.
        writer.abort().await.ok();
        store.put(key, PutPayload::default()).await.map_err(storage_error)?;
    } else {
        writer.finish().await.map_err(storage_error)?;
    }
    Ok(total)
}

/// Uploads the content of a pending blob, streamed to the store; a second
/// upload replaces the first. At most `HUB_MEDIA_MAX_BYTES` (413 above
/// it); when the start declared `size_bytes`, exactly that many.
#[utoipa::path(put, path = "/api/media/blobs/{blob_id}/content", tag = "sdk-media",
    params(("blob_id" = String, Path, description = "a pending blob")),
    request_body(content = inline(hub_kernel::types::BinaryContent), content_type = "application/octet-stream", description = "the content, any media type"),
    extensions(("x-concurrency" = json!({ "outcome": "exempt", "reason": "the content is a raw body of any media type, streamed to the store; this harness sends JSON bodies only" }))),
    responses((status = 200, description = "the blob, content uploaded and still pending", body = Data<Blob>),
        (status = 503, description = "ServiceUnavailable: the object store cannot serve now; retry after Retry-After seconds", body = ErrorBody, headers(("Retry-After" = u64, description = "seconds to wait before retrying")))))]
async fn put_content(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, headers: HeaderMap, body: RawBody) -> ApiResult<Data<Blob>> {
    let blob = find(&state.db, &ctx.tenant_id, &id).await?;
    if blob.status != BlobStatus::Pending {
        return Err(ApiError::Conflict("the blob is committed; its content cannot change".into()));
    }
    let max = state.config.media_max_bytes;
    let announced = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if announced.is_some_and(|n| n > max) {
        return Err(ApiError::ContentTooLarge(max));
    }
    let key = format!("{}/{}/{}", ctx.tenant_id, blob.blob_id, db::new_id());
    let path = ObjectPath::from(key.as_str());
    let size = store(state.media.as_ref(), &path, body, max).await?;
    let discard = |why: ApiError| async {
        state.media.delete(&path).await.ok();
        Err(why)
    };
    if let Some(declared) = blob.declared_bytes
        && u64::try_from(declared).ok() != Some(size)
    {
        return discard(ApiError::invalid(format!("the content is {size} bytes; the upload was started with size_bytes {declared}"))).await;
    }
    let sql = format!(
        "UPDATE media_blob SET object_key = $3, size_bytes = $4, uploaded_at = $5 WHERE tenant_id = $1 AND blob_id = $2 AND status = 'pending' RETURNING {COLUMNS}"
    );
    let updated: Option<Blob> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&ctx.tenant_id)
        .bind(blob.blob_id)
        .bind(&key)
        .bind(i64::try_from(size).unwrap_or(i64::MAX))
        .bind(db::now())
        .fetch_optional(state.db.writer())
        .await?;
    let Some(updated) = updated else {
        return discard(ApiError::Conflict("the blob was committed meanwhile; its content cannot change".into())).await;
    };
    if let Some(previous) = blob.object_key {
        state.media.delete(&ObjectPath::from(previous.as_str())).await.ok();
    }
    Ok(ok(updated))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = MediaCommit)]
struct Commit {
    /// SHA-256 of the content: 64 hexadecimal characters, an optional
    /// `0x` prefix.
    #[schema(pattern = r"^(?:0[xX])?[0-9A-Fa-f]{64}$")]
    checksum_hex: String,
}

/// The checksum as lowercase hex, or `None` when it is not 64 hex
/// characters after an optional `0x`.
fn checksum(raw: &str) -> Option<String> {
    let hex = raw.strip_prefix("0x").or_else(|| raw.strip_prefix("0X")).unwrap_or(raw);
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())).then(|| hex.to_ascii_lowercase())
}

/// Commits an upload: the stored bytes are read back and their SHA-256
/// compared with `checksum_hex`; a match makes the blob `ready`, a
/// mismatch is 400 and the blob stays `pending`.
#[utoipa::path(post, path = "/api/media/blobs/{blob_id}/commit", tag = "sdk-media", request_body = Commit,
    params(("blob_id" = String, Path, description = "the blob")),
    extensions(("x-concurrency" = json!({ "outcome": "same-answer", "given": [["POST", "/api/media/blobs", { "content_type": "application/json" }], ["PUT", "/api/media/blobs/{blob_id}/content", "race"]], "body": { "checksum_hex": "6d221f60522398aa5026a27012f91c6dbdf26c4e6c36ff2e385380dea8eaa77d" } }))),
    responses((status = 200, description = "the blob, ready (again, for a repeated commit of the same checksum)", body = Data<Blob>),
        (status = 503, description = "ServiceUnavailable: the object store cannot serve now; retry after Retry-After seconds", body = ErrorBody, headers(("Retry-After" = u64, description = "seconds to wait before retrying")))))]
async fn commit(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<Commit>) -> ApiResult<Data<Blob>> {
    let blob = find(&state.db, &ctx.tenant_id, &id).await?;
    let body = body.checked()?;
    static CHECKSUM_HEX: Pattern = Pattern::of::<Commit>("checksum_hex");
    let Some(wanted) = checksum(&body.checksum_hex).filter(|_| CHECKSUM_HEX.is_match(&body.checksum_hex)) else {
        return Err(ApiError::invalid("checksum_hex must be exactly 64 hexadecimal characters, with an optional 0x prefix"));
    };
    if blob.status == BlobStatus::Ready {
        return if blob.sha256.as_deref() == Some(wanted.as_str()) {
            Ok(ok(blob))
        } else {
            Err(ApiError::Conflict("the blob is committed with another checksum".into()))
        };
    }
    let Some(key) = blob.object_key.clone() else {
        return Err(ApiError::Conflict("no content has been uploaded for this blob".into()));
    };
    let mut context = digest::Context::new(&digest::SHA256);
    let mut stream = state.media.get(&ObjectPath::from(key.as_str())).await.map_err(storage_error)?.into_stream();
    while let Some(bytes) = stream.try_next().await.map_err(storage_error)? {
        context.update(&bytes);
    }
    let stored = hex::encode(context.finish());
    if stored != wanted {
        return Err(ApiError::invalid("checksum_hex does not match the SHA-256 of the uploaded content; the blob stays pending"));
    }
    let mut tx = state.db.begin().await?;
    let sql = format!(
        "UPDATE media_blob SET status = 'ready', sha256 = $4, committed_at = $5 \
         WHERE tenant_id = $1 AND blob_id = $2 AND status = 'pending' AND object_key = $3 RETURNING {COLUMNS}"
    );
    let committed: Option<Blob> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&ctx.tenant_id)
        .bind(blob.blob_id)
        .bind(&key)
        .bind(&stored)
        .bind(db::now())
        .fetch_optional(&mut *tx)
        .await?;
    let Some(committed) = committed else {
        // Another commit won: the same checksum answers its blob as a
        // repeated commit does, anything else changed meanwhile.
        let sql = format!("SELECT {COLUMNS} FROM media_blob WHERE tenant_id = $1 AND blob_id = $2");
        let now: Blob =
            sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(blob.blob_id).fetch_optional(&mut *tx).await?.ok_or(ApiError::NotFound)?;
        return if now.status == BlobStatus::Ready && now.sha256.as_deref() == Some(stored.as_str()) && now.object_key.as_deref() == Some(key.as_str()) {
            Ok(ok(now))
        } else {
            Err(ApiError::Conflict("the blob changed meanwhile (a new upload or a commit); read it and try again".into()))
        };
    };
    let payload = json!({ "blob_id": committed.blob_id, "size_bytes": committed.size_bytes, "sha256": stored });
    audit::record(&mut tx, &ctx, events::MEDIA_BLOB_COMMITTED, payload).await?;
    tx.commit().await?;
    Ok(ok(committed))
}

/// The content of a ready blob, streamed, as an attachment (never
/// rendered in a browser on the hub's origin).
#[utoipa::path(get, path = "/api/media/blobs/{blob_id}/content", tag = "sdk-media",
    params(("blob_id" = String, Path, description = "a ready blob")),
    responses((status = 200, description = "the content, with the blob's content type", content_type = "application/octet-stream", body = inline(hub_kernel::types::BinaryContent)), (status = 409, description = "Conflict: the blob is not committed yet", body = ErrorBody),
        (status = 503, description = "ServiceUnavailable: the object store cannot serve now; retry after Retry-After seconds", body = ErrorBody, headers(("Retry-After" = u64, description = "seconds to wait before retrying")))))]
async fn get_content(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Response> {
    let blob = find(&state.db, &ctx.tenant_id, &id).await?;
    let (true, Some(key)) = (blob.status == BlobStatus::Ready, blob.object_key.as_deref()) else {
        return Err(ApiError::Conflict("the blob is not committed yet".into()));
    };
    let stream = state.media.get(&ObjectPath::from(key)).await.map_err(storage_error)?.into_stream();
    let mut res = RawBody::from_stream(stream).into_response();
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_str(&blob.content_type).unwrap_or(HeaderValue::from_static("application/octet-stream")));
    h.insert(header::CONTENT_DISPOSITION, HeaderValue::from_static("attachment"));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static("sandbox"));
    if let Some(size) = blob.size_bytes {
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(size));
    }
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksums_are_64_hex_with_an_optional_prefix() {
        let h = "AB".repeat(32);
        assert_eq!(checksum(&h), Some("ab".repeat(32)));
        assert_eq!(checksum(&format!("0x{h}")), Some("ab".repeat(32)));
        assert_eq!(checksum(&format!("0X{h}")), Some("ab".repeat(32)));
        for bad in ["", "0x", &h[..62], &format!("{h}00"), &format!("0x0x{}", &h[4..]), &"zz".repeat(32)] {
            assert_eq!(checksum(bad), None, "{bad}");
        }
    }

    #[test]
    fn content_types_are_media_types() {
        for good in ["image/png", "text/plain; charset=utf-8", "application/vnd.api+json"] {
            assert!(valid_content_type(good), "{good}");
        }
        for bad in ["png", "/png", "image/", "image/png/x", "image /png", "image/pn\u{7}g"] {
            assert!(!valid_content_type(bad), "{bad}");
        }
    }
}
