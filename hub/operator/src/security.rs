//! "Key management and security": database operator tokens, minted with
//! an operator credential (the plaintext shown once) and revoked by id.
//! The tokens themselves, their cache and the platform chain their events
//! go to are the kernel's (`gate::ops_tokens`). And the emergency rotation
//! of the token signing key (`crypto::signing`).

use hub_kernel::gate::{Operator, ops_tokens};
use hub_kernel::prelude::*;

use crate::fields::stored;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list, mint)).routes(routes!(revoke)).routes(routes!(rotate_signing_key))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewAdminOpsToken)]
struct NewToken {
    /// Trimmed; labels need not be unique.
    #[schema(max_length = 200)]
    label: String,
    /// Seconds until it expires (1 to ten years); null or absent: never.
    #[schema(minimum = 1, maximum = 315_360_000)]
    ttl_seconds: Option<i64>,
    /// Why it is minted.
    #[schema(max_length = 500)]
    reason: Option<String>,
    /// Who asked for it.
    #[schema(max_length = 200)]
    created_by: Option<String>,
}

/// A minted token: the plaintext `token` appears here only.
#[derive(Serialize, ToSchema)]
#[schema(as = MintedAdminOpsToken)]
struct Minted {
    id: Id,
    label: String,
    token: String,
    expires_at: Option<Timestamp>,
}

/// The filter of the token list.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct TokenFilter {
    /// Only the tokens in this state (`expired`: past their `expires_at`
    /// and never revoked).
    #[param(inline)]
    status: Option<ops_tokens::TokenState>,
}

/// The database operator tokens, newest first: what each is and where it
/// stands, never its secret or its hash (the break-glass secret is no
/// row). Not in the operator document: see docs/compatibility.md.
#[utoipa::path(get, path = "/admin/security/ops-tokens", tag = "admin-security", params(TokenFilter, Page),
    responses((status = 200, description = "a page of the tokens", body = ListOf<ops_tokens::Listed>)))]
async fn list(State(state): State<AppState>, _: Operator, page: Page, Params(q): Params<TokenFilter>) -> ApiResult<ListOf<ops_tokens::Listed>> {
    ops_tokens::list(&state.db, page, q.status).await
}

/// Mints a database operator token.
#[utoipa::path(post, path = "/admin/security/ops-tokens", tag = "admin-security", request_body = NewToken,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "body": { "label": "race" } }))),
    responses((status = 201, description = "the token, its plaintext shown once", body = Data<Minted>)))]
async fn mint(State(state): State<AppState>, Operator(who): Operator, body: Body<NewToken>) -> ApiResult<Created<Minted>> {
    // RULINGS 1: 0 or a negative TTL would mint an expired token (the
    // schema's minimum).
    let body = body.checked()?;
    let label = body.label.trim();
    let (reason, created_by) = (Check::optional(&body.reason), Check::optional(&body.created_by));
    let (token, plaintext) = ops_tokens::mint(&state, &who, label, body.ttl_seconds, reason, created_by).await?;
    let (id, expires_at) = (stored(&token.id)?, token.expires_at.as_deref().map(stored).transpose()?);
    Ok(created(Minted { id, label: token.label, token: plaintext, expires_at }))
}

#[derive(Serialize, ToSchema)]
#[schema(as = RevokedAdminOpsToken)]
struct Revoked {
    id: Id,
    /// `revoked`.
    status: TokenStatus,
}

stored_enum! {
    /// Whether a database operator token still opens.
    #[schema(as = AdminOpsTokenStatus)]
    enum TokenStatus { Active = "active", Revoked = "revoked" }
}

/// Revokes a database operator token, on every replica at once.
#[utoipa::path(delete, path = "/admin/security/ops-tokens/{id}", tag = "admin-security", params(("id" = String, Path, description = "the token")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "losers": 404, "given": [["POST", "/admin/security/ops-tokens", { "label": "race" }]] }))),
    responses((status = 200, description = "the token, revoked", body = Data<Revoked>)))]
async fn revoke(State(state): State<AppState>, Operator(who): Operator, Path(id): Path<String>) -> ApiResult<Data<Revoked>> {
    let id = path_id(&id).map_err(|_| ApiError::Missing("token not found or already revoked"))?.to_string();
    let token = ops_tokens::revoke(&state, &who, &id).await?;
    Ok(ok(Revoked { id: stored(&token.id)?, status: stored(&token.status)? }))
}

/// Defaults of the rotation's optional fields.
const DEFAULT_REASON: &str = "manual emergency rotation";
const DEFAULT_ACTOR: &str = "ops-emergency";

/// A string field of a lenient body, trimmed and cut to `max`
/// characters; blank, absent, not a string or holding a NUL: `default`.
fn or_default(body: &Value, name: &str, max: usize, default: &str) -> String {
    // An emergency rotation is never refused: a value holding a NUL, which
    // the audit chain's text columns cannot store, falls back as a blank one.
    match body.get(name).and_then(Value::as_str).map(str::trim).filter(|v| !v.is_empty() && !v.contains('\0')) {
        Some(v) => v.chars().take(max).collect(),
        None => default.to_string(),
    }
}

/// Rotates the token signing key now: a new key signs, the retired one
/// verifies for the human token lifetime (so every token minted before
/// stays valid until it expires). Every call rotates again. The body is
/// optional and never refused (no 400). Event
/// `security.signing_key.rotated.v1` in the platform chain.
#[utoipa::path(post, path = "/admin/security/rotate-signing-key", tag = "admin-security", request_body(content = Value, description = "optional and never refused: `{ reason?, actor_id? }`, strings (defaults `manual emergency rotation` and `ops-emergency`; at most 500 and 200 characters kept); any other body, or a field that is not a non-blank string, takes the defaults"),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "body": { "reason": "race" } }))),
    responses((status = 200, description = "the rotation", body = Data<hub_kernel::crypto::signing::Rotation>)))]
async fn rotate_signing_key(
    State(state): State<AppState>,
    Operator(who): Operator,
    raw: axum::body::Bytes,
) -> ApiResult<Data<hub_kernel::crypto::signing::Rotation>> {
    hub_kernel::nesting::check_json(&raw, "request body")?;
    let body: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    let reason = or_default(&body, "reason", 500, DEFAULT_REASON);
    let actor_id = or_default(&body, "actor_id", 200, DEFAULT_ACTOR);
    Ok(ok(state.rotate_signing_key_recorded(&who, &reason, &actor_id).await?))
}
