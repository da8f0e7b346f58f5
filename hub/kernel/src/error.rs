//! `ApiError`: every failure a handler can answer, and the only place that
//! writes the platform's error envelope `{ success: false, error, ... }`.

use axum::{
    Json,
    body::Bytes,
    extract::{FromRequest, Request, rejection::JsonRejection},
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// An HTTP answer other than success. Variants name what happened; the
/// status code and body follow from the variant alone.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("validation failed: {0:?}")]
    Validation(Vec<String>),
    #[error("unauthorized")]
    Unauthorized(&'static str),
    #[error("forbidden: {details:?}")]
    Forbidden {
        details: Vec<String>,
        /// Present when the refusal is about an API key's scopes.
        scopes: Option<(Vec<String>, Vec<String>)>,
    },
    #[error("not found")]
    NotFound,
    /// 423: the tenant of the credential is suspended by the operator.
    #[error("locked: {0}")]
    Locked(&'static str),
    /// 404 with a reason the documents give (`no active model`, `token
    /// not found or already revoked`).
    #[error("not found: {0}")]
    Missing(&'static str),
    #[error("conflict: {0}")]
    Conflict(String),
    /// 409: key material cannot be unwrapped (a customer-managed key whose
    /// grant is revoked, or a rotation from a key no longer in use).
    #[error("undecryptable: {0}")]
    Undecryptable(String),
    #[error("tenant mismatch")]
    TenantMismatch,
    #[error("no membership")]
    NoMembership,
    #[error("person exists")]
    PersonExists,
    #[error("invalid_client")]
    InvalidClient,
    #[error("invalid_scope: {0:?}")]
    InvalidScope(Vec<String>),
    #[error("unsupported_grant_type")]
    UnsupportedGrantType,
    #[error("rate limited, retry after {0}s")]
    RateLimited(u64),
    /// The tenant's hard cap on a metered sku is reached for the period
    /// (a UTC month, `YYYY-MM`): usage of that sku is refused until the
    /// period ends, the cap is raised or an operator override is active.
    #[error("hard cap reached for {sku} in {period}")]
    HardCapReached { sku: String, period: String },
    /// The hub is at a bound it keeps to stay up (password hashes in
    /// flight): the client should retry after the given seconds.
    #[error("busy, retry after {0}s")]
    Busy(u64),
    /// Uploaded content above its own limit (sdk-media), in bytes.
    #[error("content above {0} bytes")]
    ContentTooLarge(u64),
    /// A service this hub is not configured for (verification email).
    #[error("service unavailable: {0}")]
    Unavailable(&'static str),
    /// A service the hub called on the caller's behalf failed (a model
    /// provider, after its retries): 502 naming what went wrong.
    #[error("upstream failure: {0}")]
    Upstream(String),
    /// A robot credential already holds this many command streams open.
    #[error("too many open streams (at most {0})")]
    TooManyStreams(u64),
    /// A request body over the API's limit (`BODY_LIMIT`).
    #[error("payload too large")]
    PayloadTooLarge,
    /// A path that exists, with a method it does not take.
    #[error("method not allowed")]
    MethodNotAllowed,
    /// 413: a request body over a route's own limit, below `BODY_LIMIT`.
    #[error("payload above {0} bytes")]
    BodyTooLarge(usize),
    /// 408: a request body still incomplete when the body read timeout
    /// (milliseconds) ran out.
    #[error("request body incomplete after {0} ms")]
    BodyTimeout(u64),
    /// 503: the request bodies being received already hold the memory the
    /// hub allows them; retry after the given seconds.
    #[error("request body memory exhausted, retry after {0}s")]
    BodyMemory(u64),
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
    #[error("internal error: {0:#}")]
    Internal(#[from] anyhow::Error),
}

pub type ApiResult<T> = Result<T, ApiError>;

/// The one limit on request bodies across the API, in bytes.
pub const BODY_LIMIT: usize = 2 * 1024 * 1024;

/// The body limit of the public routes that take a small form (sign-up,
/// login, the token exchange): before a credential can be checked, a
/// request may make the hub read no more than this.
pub const PUBLIC_BODY_LIMIT: usize = 64 * 1024;

/// A route layer that bounds request bodies to `MAX` bytes (below
/// [`BODY_LIMIT`]): a declared length above it is refused before a byte of
/// the body is read, and a body that grows past it while read is refused
/// by the extractor, answered with this limit.
pub async fn limit_body<const MAX: usize>(req: Request, next: axum::middleware::Next) -> Response {
    let declared = req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX as u64) {
        return ApiError::BodyTooLarge(MAX).into_response();
    }
    let limited = tower::Layer::layer(&axum::extract::DefaultBodyLimit::max(MAX), next);
    let res = tower::ServiceExt::oneshot(limited, req).await.unwrap_or_else(|never| match never {});
    // The extractor's 413 names the API's limit; this route's is lower.
    if res.status() == StatusCode::PAYLOAD_TOO_LARGE { ApiError::BodyTooLarge(MAX).into_response() } else { res }
}

/// Writes the envelope over the framework's own error answers (a 405 with
/// an empty body, a plain-text 413 or 400 from an extractor), keeping their
/// status and headers (`Allow` of a 405): every error a client sees has the
/// platform's shape.
pub async fn envelope_framework_errors(res: Response) -> Response {
    let status = res.status();
    let is_json = res.headers().get(header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !status.is_client_error() || is_json {
        return res;
    }
    let error = match status {
        StatusCode::METHOD_NOT_ALLOWED => ApiError::MethodNotAllowed,
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge,
        StatusCode::NOT_FOUND => ApiError::NotFound,
        _ => ApiError::invalid(format!("the request could not be read ({status})")),
    };
    let (mut parts, _) = res.into_parts();
    let fresh = error.into_response();
    parts.status = fresh.status();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Response::from_parts(parts, fresh.into_body())
}

impl From<crate::crypto::password::Error> for ApiError {
    fn from(e: crate::crypto::password::Error) -> Self {
        match e {
            crate::crypto::password::Error::Busy => ApiError::Busy(1),
            crate::crypto::password::Error::Failed(e) => ApiError::Internal(e),
        }
    }
}

impl ApiError {
    /// A single-message validation error.
    pub fn invalid(msg: impl Into<String>) -> Self {
        ApiError::Validation(vec![msg.into()])
    }

    pub fn forbidden(msg: impl Into<String>) -> Self {
        ApiError::Forbidden { details: vec![msg.into()], scopes: None }
    }

    fn status(&self) -> StatusCode {
        use ApiError::*;
        match self {
            Validation(_) | InvalidScope(_) | UnsupportedGrantType => StatusCode::BAD_REQUEST,
            Unauthorized(_) | InvalidClient => StatusCode::UNAUTHORIZED,
            Forbidden { .. } | TenantMismatch | NoMembership => StatusCode::FORBIDDEN,
            Locked(_) => StatusCode::LOCKED,
            NotFound | Missing(_) => StatusCode::NOT_FOUND,
            Conflict(_) | PersonExists | Undecryptable(_) => StatusCode::CONFLICT,
            RateLimited(_) | TooManyStreams(_) | HardCapReached { .. } => StatusCode::TOO_MANY_REQUESTS,
            Busy(_) | BodyMemory(_) => StatusCode::SERVICE_UNAVAILABLE,
            BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            PayloadTooLarge | ContentTooLarge(_) | BodyTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Db(e) => match db_error_kind(e) {
                Some(DbKind::Unique) => StatusCode::CONFLICT,
                Some(DbKind::ForeignKey) => StatusCode::BAD_REQUEST,
                None => StatusCode::INTERNAL_SERVER_ERROR,
            },
            Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Upstream(_) => StatusCode::BAD_GATEWAY,
        }
    }

    /// The envelope's JSON, as the response carries it.
    pub fn body(&self) -> Value {
        use ApiError::*;
        match self {
            Validation(details) => json!({ "success": false, "error": "ValidationError", "details": details }),
            Unauthorized(why) => json!({ "success": false, "error": "Unauthorized", "details": [why] }),
            Forbidden { details, scopes: Some((required, granted)) } => json!({
                "success": false, "error": "Forbidden", "details": details,
                "required_scopes": required, "granted_scopes": granted,
            }),
            Forbidden { details, scopes: None } => json!({ "success": false, "error": "Forbidden", "details": details }),
            NotFound => json!({ "success": false, "error": "NotFound" }),
            Locked(why) => json!({ "success": false, "error": "Locked", "details": [why] }),
            Missing(why) => json!({ "success": false, "error": "NotFound", "details": [why] }),
            Conflict(what) => json!({ "success": false, "error": "Conflict", "details": [what] }),
            Undecryptable(what) => json!({ "success": false, "error": "UndecryptableError", "details": [what] }),
            TenantMismatch => json!({
                "success": false, "error": "TenantMismatch",
                "details": ["tenant_id does not match the credential's tenant"],
            }),
            NoMembership => json!({
                "success": false, "error": "NoMembership",
                "details": ["the person has no membership in this tenant"],
            }),
            PersonExists => json!({
                "success": false, "error": "PersonExistsError",
                "details": ["a person with this email already exists; sign in and send that person's token to reuse it"],
            }),
            InvalidClient => json!({ "success": false, "error": "invalid_client" }),
            InvalidScope(bad) => json!({ "success": false, "error": "invalid_scope", "details": bad }),
            UnsupportedGrantType => json!({
                "success": false, "error": "unsupported_grant_type",
                "details": ["grant_type must be client_credentials"],
            }),
            RateLimited(_) => json!({ "success": false, "error": "RateLimited", "details": ["rate limit exceeded"] }),
            HardCapReached { sku, period } => json!({
                "success": false, "error": "HardCapReached", "sku": sku, "period": period,
                "details": [format!("the tenant's hard cap for sku {sku} is reached for {period}")],
            }),
            Busy(_) => json!({ "success": false, "error": "ServiceUnavailable", "details": ["the hub is busy; retry shortly"] }),
            BodyMemory(_) => json!({
                "success": false, "error": "ServiceUnavailable",
                "details": ["the hub is receiving as many request bodies as its memory bound allows; retry shortly"],
            }),
            BodyTimeout(ms) => json!({
                "success": false, "error": "RequestTimeout",
                "details": [format!("the request body did not arrive in full within {ms} ms")],
            }),
            PayloadTooLarge => json!({
                "success": false, "error": "PayloadTooLarge",
                "details": [format!("request bodies are limited to {} bytes", BODY_LIMIT)],
            }),
            BodyTooLarge(max) => json!({
                "success": false, "error": "PayloadTooLarge",
                "details": [format!("request bodies of this route are limited to {max} bytes")],
            }),
            ContentTooLarge(max) => json!({
                "success": false, "error": "PayloadTooLarge",
                "details": [format!("blob content is limited to {max} bytes")],
            }),
            MethodNotAllowed => {
                json!({ "success": false, "error": "MethodNotAllowed", "details": ["the path does not take this method; see the Allow header"] })
            }
            TooManyStreams(max) => json!({
                "success": false, "error": "TooManyStreams",
                "details": [format!("at most {max} command streams may be open at once per robot credential")],
            }),
            Db(e) => match db_error_kind(e) {
                Some(DbKind::Unique) => json!({ "success": false, "error": "Conflict", "details": ["a record with this key already exists"] }),
                Some(DbKind::ForeignKey) => json!({ "success": false, "error": "ValidationError", "details": ["a referenced record does not exist"] }),
                None => json!({ "success": false, "error": "InternalError" }),
            },
            Internal(_) => json!({ "success": false, "error": "InternalError" }),
            Unavailable(why) => json!({ "success": false, "error": "ServiceUnavailable", "details": [why] }),
            Upstream(why) => json!({ "success": false, "error": "BadGateway", "details": [why] }),
        }
    }
}

enum DbKind {
    Unique,
    ForeignKey,
}

fn db_error_kind(e: &sqlx::Error) -> Option<DbKind> {
    let sqlx::Error::Database(db) = e else { return None };
    match db.kind() {
        sqlx::error::ErrorKind::UniqueViolation => Some(DbKind::Unique),
        sqlx::error::ErrorKind::ForeignKeyViolation => Some(DbKind::ForeignKey),
        _ => None,
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        if status.is_server_error() && !matches!(self, ApiError::Busy(_) | ApiError::BodyMemory(_)) {
            // The cause goes to the log only; the client sees an opaque body.
            tracing::error!(error = %self, "request failed");
        }
        let mut res = (status, Json(self.body())).into_response();
        if let ApiError::RateLimited(secs) | ApiError::Busy(secs) | ApiError::BodyMemory(secs) = self {
            res.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
        }
        res
    }
}

/// `Json<T>` whose rejections are the platform's 400 `ValidationError`
/// (malformed JSON, wrong types, missing content type) instead of axum's
/// plain-text defaults.
pub struct Body<T>(pub T);

/// Gateway rule 6: a `tenant_id` a body carries must be the caller's
/// (400 when it is not a UUID, 403 `TenantMismatch` when another tenant's),
/// whatever the route's request type, so a foreign one is never dropped
/// silently. Public routes and the operator's carry no tenant credential.
impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let tenant = crate::gate::body_tenant_check(&req);
        if !plain_json(&req) {
            return Body::checked(tenant, json_value(req, state).await?);
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|e| body_refusal(e.status(), e.body_text()))?;
        if is_empty(&bytes) {
            return Body::checked(tenant, Value::Object(Default::default()));
        }
        crate::nesting::check_json(&bytes, "request body")?;
        // The common case in one pass: an object that is `T` as it stands.
        // Anything else (a type error, a repeated key, not an object, a NUL
        // in some string) takes the path through a `Value`, whose answers
        // it keeps and which names where the NUL is.
        if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
            && !crate::nul::in_json_text(&bytes)
            && let Ok(parsed) = serde_json::from_slice::<T>(&bytes)
            && let Ok(probe) = TenantProbe::of(&bytes)
        {
            if let Some(ctx) = tenant {
                check_body_tenant(&ctx, probe.tenant_id.as_ref())?;
            }
            return Ok(Body(parsed));
        }
        let Json(value) = Json::<Value>::from_bytes(&bytes).map_err(|e| body_refusal(e.status(), e.body_text()))?;
        Body::checked(tenant, value)
    }
}

impl<T: DeserializeOwned> Body<T> {
    /// Gateway rule 6 on a parsed body, then `T` from it.
    fn checked(tenant: Option<crate::gate::TenantCtx>, value: Value) -> ApiResult<Body<T>> {
        if let Some(ctx) = tenant {
            check_body_tenant(&ctx, value.get("tenant_id"))?;
        }
        parse_body(value).map(Body)
    }
}

/// A body's `tenant_id` against the caller's tenant.
fn check_body_tenant(ctx: &crate::gate::TenantCtx, tenant_id: Option<&Value>) -> ApiResult<()> {
    match tenant_id {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(t)) => ctx.check_tenant(Some(t)),
        Some(_) => Err(ApiError::invalid("tenant_id must be a UUID")),
    }
}

/// The one field of a body the gate reads, the rest skipped unparsed.
#[derive(serde::Deserialize)]
struct TenantProbe {
    tenant_id: Option<Value>,
}

impl TenantProbe {
    /// The body's `tenant_id`, parsed only when the body could hold one: a
    /// key is written either as it is or with escapes (`\u…`), so a body
    /// with neither `tenant_id` nor a backslash in it has no such key.
    fn of(bytes: &[u8]) -> serde_json::Result<TenantProbe> {
        if memchr::memchr(b'\\', bytes).is_none() && memchr::memmem::find(bytes, b"tenant_id").is_none() {
            return Ok(TenantProbe { tenant_id: None });
        }
        serde_json::from_slice(bytes)
    }
}

/// Whether the request says `Content-Type: application/json` exactly (the
/// fast path of [`Body`]); any other spelling goes through axum's `Json`,
/// which decides whether it is JSON.
fn plain_json(req: &Request) -> bool {
    req.headers().get(header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"application/json"))
}

/// A body that could not be read or parsed: 413 when too large, otherwise
/// 400 with the reason.
fn body_refusal(status: StatusCode, why: String) -> ApiError {
    match status {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge,
        _ => ApiError::invalid(format!("request body must be a JSON object: {why}")),
    }
}

/// `Body<T>` for the routes whose `tenant_id` may name another tenant than
/// the caller's and that check it themselves (a parent tenant admitting
/// members into a child tenant).
pub struct TargetTenantBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for TargetTenantBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        parse_body(json_value(req, state).await?).map(TargetTenantBody)
    }
}

/// Whether a body is absent: no bytes but whitespace. A POST without a
/// body (and so without a content type) is the empty object, so a route
/// whose every field is optional takes it, and a route with required
/// fields names each one missing rather than the content type.
fn is_empty(bytes: &[u8]) -> bool {
    bytes.iter().all(u8::is_ascii_whitespace)
}

async fn json_value<S: Send + Sync>(req: Request, state: &S) -> ApiResult<Value> {
    // The bytes first, for the nesting bound; then axum's `Json` on them
    // with the request's headers, which decides on the content type.
    let headers = req.headers().clone();
    let bytes = Bytes::from_request(req, state).await.map_err(|e| body_refusal(e.status(), e.body_text()))?;
    if is_empty(&bytes) && headers.get(header::CONTENT_TYPE).is_none() {
        return Ok(Value::Object(Default::default()));
    }
    crate::nesting::check_json(&bytes, "request body")?;
    let mut again = Request::new(axum::body::Body::from(bytes));
    *again.headers_mut() = headers;
    let Json(value) = Json::<Value>::from_request(again, state).await.map_err(|e: JsonRejection| body_refusal(e.status(), e.body_text()))?;
    Ok(value)
}

/// Turns a JSON value into `T`, reporting a type error as a 400 naming the
/// offending field. A NUL in any string or key of the body is 400 naming
/// where, whether `T` reads that field or keeps it as a `Value` to store.
pub fn parse_body<T: DeserializeOwned>(value: Value) -> ApiResult<T> {
    if !value.is_object() {
        return Err(ApiError::invalid("request body must be a JSON object"));
    }
    crate::nul::check_value(&value)?;
    serde_json::from_value(value).map_err(|e| ApiError::invalid(e.to_string()))
}

/// A 200 answer in the success envelope.
pub fn ok(data: impl serde::Serialize) -> Response {
    (StatusCode::OK, Json(crate::catalogue::Data { success: true, data })).into_response()
}

/// A 201 answer in the success envelope.
pub fn created(data: impl serde::Serialize) -> Response {
    (StatusCode::CREATED, Json(crate::catalogue::Data { success: true, data })).into_response()
}
