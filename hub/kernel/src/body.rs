//! Request bodies. `Body<T>`: the JSON body as the type the route
//! declares, checked against the type's published schema
//! ([`crate::contract`]), which names every problem at once, before it is
//! deserialised. `Lenient<T>`: the same reading without the schema, for
//! the request types not yet typed. Both bound the body's size and
//! nesting, refuse a NUL, and check a `tenant_id` it carries against the
//! caller (gateway rule 6).

use axum::{
    Json,
    body::Bytes,
    extract::{FromRequest, Request, rejection::JsonRejection},
    http::{StatusCode, header},
};
use serde::de::DeserializeOwned;
use serde_json::Value;
use utoipa::ToSchema;

use crate::error::{ApiError, ApiResult};

/// The JSON body of a request as the route's request type `T`. A body that
/// cannot be read or is not JSON is refused at once (400, 413), as is a
/// `tenant_id` that is not the caller's (gateway rule 6); the rest waits
/// for [`Body::checked`]: a body that is not an object, a NUL, and every
/// field that breaks `T`'s schema, named at once ([`crate::contract`]). So
/// a handler on a resource's path answers 404 for a resource the caller
/// cannot see before it looks at the body, and `T` cannot be had without
/// the check. A POST without a body is the empty object.
pub struct Body<T>(ApiResult<T>);

impl<T> Body<T> {
    /// The body as `T`, or 400 `ValidationError` naming every problem.
    pub fn checked(self) -> ApiResult<T> {
        self.0
    }
}

impl<S: Send + Sync, T: DeserializeOwned + ToSchema + 'static> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let tenant = crate::gate::body_tenant_check(&req);
        let value = json_value(req, state).await?;
        if let Some(ctx) = tenant {
            check_body_tenant(&ctx, value.get("tenant_id"))?;
        }
        Ok(Body(typed(value)))
    }
}

fn typed<T: DeserializeOwned + ToSchema + 'static>(value: Value) -> ApiResult<T> {
    if !value.is_object() {
        return Err(ApiError::invalid("request body must be a JSON object"));
    }
    crate::nul::check_value(&value)?;
    crate::contract::parse(value)
}

/// A body read as [`Body`] reads it (size, nesting, NUL, content type,
/// gateway rule 6), then deserialised into `T` as serde reads it, without
/// `T`'s schema: the request types not yet typed, whose fields are
/// `Option`s their handler checks with `Check`. Each is moved to [`Body`]
/// once its type says what the handler checks (issue 36).
pub struct Lenient<T>(pub T);

/// Gateway rule 6: a `tenant_id` a body carries must be the caller's
/// (400 when it is not a UUID, 403 `TenantMismatch` when another tenant's),
/// whatever the route's request type, so a foreign one is never dropped
/// silently. Public routes and the operator's carry no tenant credential.
impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Lenient<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let tenant = crate::gate::body_tenant_check(&req);
        if !plain_json(&req) {
            return Lenient::checked(tenant, json_value(req, state).await?);
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|e| body_refusal(e.status(), e.body_text()))?;
        if is_empty(&bytes) {
            return Lenient::checked(tenant, Value::Object(Default::default()));
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
            return Ok(Lenient(parsed));
        }
        let Json(value) = Json::<Value>::from_bytes(&bytes).map_err(|e| body_refusal(e.status(), e.body_text()))?;
        Lenient::checked(tenant, value)
    }
}

impl<T: DeserializeOwned> Lenient<T> {
    /// Gateway rule 6 on a parsed body, then `T` from it.
    fn checked(tenant: Option<crate::gate::TenantCtx>, value: Value) -> ApiResult<Lenient<T>> {
        if let Some(ctx) = tenant {
            check_body_tenant(&ctx, value.get("tenant_id"))?;
        }
        parse_body(value).map(Lenient)
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
/// fast path of [`Lenient`]); any other spelling goes through axum's `Json`,
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

impl<S: Send + Sync, T: DeserializeOwned + ToSchema + 'static> FromRequest<S> for TargetTenantBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        typed(json_value(req, state).await?).map(TargetTenantBody)
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
    // No bytes but whitespace is the empty object, without a content type
    // or with `application/json`.
    let headers = req.headers().clone();
    let plain = plain_json(&req);
    let bytes = Bytes::from_request(req, state).await.map_err(|e| body_refusal(e.status(), e.body_text()))?;
    if is_empty(&bytes) && (plain || headers.get(header::CONTENT_TYPE).is_none()) {
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
