//! `ApiError`: every failure a handler can answer, and the only place that
//! writes the platform's error envelope `{ success: false, error, ... }`.

use axum::{
    Json,
    extract::Request,
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
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
    /// 503: the object store cannot serve now (`storage`, which logs the
    /// cause once); retry after the given seconds.
    #[error("the object store is unavailable, retry after {0}s")]
    StoreUnavailable(u64),
    /// A service the hub called on the caller's behalf failed (a model
    /// provider, after its retries): 502 naming what went wrong.
    #[error("upstream failure: {0}")]
    Upstream(String),
    /// A robot credential already holds this many command streams open.
    #[error("too many open streams (at most {0})")]
    TooManyStreams(u64),
    /// A credential already holds this many observer streams of its
    /// tenant's commands (`GET /api/commands/watch`) open.
    #[error("too many open observer streams (at most {0})")]
    TooManyWatches(u64),
    /// A request body over the API's limit (`BODY_LIMIT`).
    #[error("payload too large")]
    PayloadTooLarge,
    /// A path that exists, with a method it does not take.
    #[error("method not allowed")]
    MethodNotAllowed,
    /// 406: the request's `Accept` admits none of the media types the
    /// route answers in (the reason names them).
    #[error("not acceptable: {0}")]
    NotAcceptable(&'static str),
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
        StatusCode::NOT_ACCEPTABLE => ApiError::NotAcceptable("the Accept header admits no media type this route answers in"),
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
            RateLimited(_) | TooManyStreams(_) | TooManyWatches(_) | HardCapReached { .. } => StatusCode::TOO_MANY_REQUESTS,
            Busy(_) | BodyMemory(_) => StatusCode::SERVICE_UNAVAILABLE,
            BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            PayloadTooLarge | ContentTooLarge(_) | BodyTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            NotAcceptable(_) => StatusCode::NOT_ACCEPTABLE,
            Db(e) => match db_error_kind(e) {
                Some(DbKind::Unique) => StatusCode::CONFLICT,
                Some(DbKind::ForeignKey) => StatusCode::BAD_REQUEST,
                None => StatusCode::INTERNAL_SERVER_ERROR,
            },
            Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Unavailable(_) | StoreUnavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
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
            NotAcceptable(why) => json!({ "success": false, "error": "NotAcceptable", "details": [why] }),
            TooManyStreams(max) => json!({
                "success": false, "error": "TooManyStreams",
                "details": [format!("at most {max} command streams may be open at once per robot credential")],
            }),
            TooManyWatches(max) => json!({
                "success": false, "error": "TooManyStreams",
                "details": [format!("at most {max} command watch streams may be open at once per credential")],
            }),
            Db(e) => match db_error_kind(e) {
                Some(DbKind::Unique) => json!({ "success": false, "error": "Conflict", "details": ["a record with this key already exists"] }),
                Some(DbKind::ForeignKey) => json!({ "success": false, "error": "ValidationError", "details": ["a referenced record does not exist"] }),
                None => json!({ "success": false, "error": "InternalError" }),
            },
            Internal(_) => json!({ "success": false, "error": "InternalError" }),
            Unavailable(why) => json!({ "success": false, "error": "ServiceUnavailable", "details": [why] }),
            StoreUnavailable(_) => json!({
                "success": false, "error": "ServiceUnavailable",
                "details": ["the object store is unavailable; retry after the time in Retry-After"],
            }),
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
        if status.is_server_error() && !matches!(self, ApiError::Busy(_) | ApiError::BodyMemory(_) | ApiError::StoreUnavailable(_)) {
            // The cause goes to the log only; the client sees an opaque body.
            tracing::error!(error = %self, "request failed");
        }
        let mut res = (status, Json(self.body())).into_response();
        if let ApiError::RateLimited(secs) | ApiError::Busy(secs) | ApiError::BodyMemory(secs) | ApiError::StoreUnavailable(secs) = self {
            res.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
        }
        res
    }
}

/// A 200 answer in the success envelope.
pub fn ok<T: serde::Serialize>(data: T) -> crate::catalogue::Data<T> {
    crate::catalogue::Data { success: true, data }
}

/// A 201 answer in the success envelope.
pub fn created<T: serde::Serialize>(data: T) -> crate::catalogue::Created<T> {
    crate::catalogue::Created(data)
}
