//! The gateway: default-deny authentication of every request, the operator
//! header on `/admin/*`, scope and role authority checks, rate limits, and
//! the extractors through which handlers receive their caller.
//!
//! Two layers: `authenticate` runs before routing (so an unknown path is
//! still refused without a credential) and puts a `Caller` in the request;
//! `authorize` runs after routing, where the matched route template gives
//! the scope the request needs.

pub mod directory;
pub mod keys;
pub mod ops_tokens;
pub mod rate;
pub mod scope;
pub mod throttle;
pub mod tokens;

use std::{
    net::{IpAddr, SocketAddr},
    sync::Arc,
};

use axum::{
    extract::{ConnectInfo, FromRequestParts, MatchedPath, Request, State},
    http::{HeaderMap, Method, header, request::Parts},
    middleware::Next,
    response::{IntoResponse, Response},
};

use crate::{
    config::GateMode,
    error::{ApiError, ApiResult},
    state::AppState,
};
use keys::KeyRecord;
use tokens::Claims;

/// Who is calling, as established by the gate.
#[derive(Clone)]
pub enum Caller {
    /// A person, by JWT (with or without tenant context).
    Human(Arc<Claims>),
    /// A tenant application, by API key or by a token exchanged for one.
    Machine { key: Arc<KeyRecord>, scopes: Arc<Vec<String>> },
    /// The platform operator on `/admin/*`: `break-glass` (the environment
    /// secret) or a database token's `label (id)`.
    Operator(Arc<str>),
}

/// Paths that need no credential (gateway rules 1–2, Authentication 2).
pub fn is_public(path: &str) -> bool {
    const EXACT: &[&str] = &[
        "/api/auth/signup-tenant",
        "/api/auth/login",
        "/api/auth/register",
        "/api/auth/token",
        "/api/auth/send-verification-email",
        "/api/auth/verify-email",
        "/api/auth/verification-status",
        "/api/auth/password-reset",
        "/api/auth/password-reset/confirm",
        "/ready",
        "/openapi.json",
        "/capabilities.json",
    ];
    const PREFIX: &[&str] = &["/.well-known/", "/api/saml/", "/api/oauth/callback", "/api/webhooks/inbound/"];
    path.ends_with("/health") || path == "/health" || EXACT.contains(&path) || PREFIX.iter().any(|p| path.starts_with(p)) || is_robot_route(path)
}

/// Routes for the platform operator: `/admin/*` and, unless the setting
/// makes it public, `/metrics`.
pub fn is_operator_route(path: &str) -> bool {
    path == "/admin" || path.starts_with("/admin/") || path == "/metrics"
}

/// Routes that carry a per-robot credential instead of a JWT or API key
/// (the command stream and command acks): the gate lets them through and
/// their handlers verify the robot credential (RULINGS 1 and 3).
pub fn is_robot_route(path: &str) -> bool {
    // Asked up to three times a request: no allocation.
    let Some(rest) = path.trim_end_matches('/').strip_prefix("/api/commands/") else { return false };
    let mut segments = rest.split('/');
    matches!((segments.next(), segments.next(), segments.next()), (Some("stream"), Some(_), None) | (Some(_), Some("ack"), None))
}

/// The value of the single `Authorization: Bearer` header, if any.
pub fn bearer(headers: &HeaderMap) -> Option<Result<&str, ()>> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let first = values.next()?;
    if values.next().is_some() {
        return Some(Err(()));
    }
    let Ok(text) = first.to_str() else { return Some(Err(())) };
    let Some((scheme, value)) = text.split_once(' ') else { return Some(Err(())) };
    if !scheme.eq_ignore_ascii_case("bearer") || value.trim().is_empty() {
        return Some(Err(()));
    }
    Some(Ok(value.trim()))
}

/// Outer layer: establishes the caller.
pub async fn authenticate(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    let mode = state.config.gate_mode;

    if is_operator_route(&path) {
        if path == "/metrics" && state.config.metrics_public {
            return next.run(req).await;
        }
        return match ops_tokens::operator(&state, req.headers()).await {
            Some(who) => {
                req.extensions_mut().insert(Caller::Operator(who));
                next.run(req).await
            }
            None => refuse("admin token required"),
        };
    }
    // Health paths answer whatever the Authorization header holds.
    if path.ends_with("/health") {
        return next.run(req).await;
    }
    let public = is_public(&path);
    let mut outcome = match bearer(req.headers()) {
        None => Err("missing bearer token"),
        Some(Err(())) => Err("malformed Authorization header"),
        Some(Ok(value)) => resolve(&state, value).await,
    };
    // Every credential of a tenant past its offboarding deadline is refused,
    // whatever its kind; checked here, once, where the tenant is known.
    if let Ok(caller) = &outcome
        && let Some(tenant_id) = tenant_id_of(caller)
    {
        match keys::tenant_open(&state, tenant_id).await {
            Ok(()) => {}
            Err(ApiError::Unauthorized(why)) => outcome = Err(why),
            Err(e) => return e.into_response(),
        }
    }
    match outcome {
        Ok(caller) => {
            if let Caller::Machine { key, .. } = &caller
                && let Err(e) = rate::count_use(&state, &key.key_id, key.rate_limit_rpm).await
            {
                if matches!(e, ApiError::RateLimited(_)) {
                    metrics::counter!("hub_gate_refusals_total", "reason" => "rate limit").increment(1);
                }
                return e.into_response();
            }
            req.extensions_mut().insert(caller);
        }
        Err(_) if public || mode == GateMode::Off => {}
        Err(why) if mode == GateMode::Report => {
            tracing::warn!(path = %path, reason = why, "gate (report mode): would refuse with 401");
        }
        Err(why) => return refuse(why),
    }
    next.run(req).await
}

/// The tenant a caller acts in, if any.
fn tenant_id_of(caller: &Caller) -> Option<&str> {
    match caller {
        Caller::Human(claims) => claims.tenant.as_ref().map(|t| t.tenant_id.as_str()),
        Caller::Machine { key, .. } => Some(&key.tenant_id),
        Caller::Operator(_) => None,
    }
}

/// A 401, counted by its reason (a fixed set of texts: bounded labels).
fn refuse(why: &'static str) -> Response {
    metrics::counter!("hub_gate_refusals_total", "reason" => why).increment(1);
    ApiError::Unauthorized(why).into_response()
}

/// Verifies a bearer value: an API key by its prefix, otherwise a JWT.
async fn resolve(state: &AppState, value: &str) -> Result<Caller, &'static str> {
    if value.starts_with("pk_live_") || value.starts_with("pk_test_") {
        let key = keys::authenticate(state, value).await.map_err(|_| "invalid API key")?;
        let scopes = Arc::new(key.scopes.clone());
        return Ok(Caller::Machine { key, scopes });
    }
    let claims = match state.tokens.get(value) {
        Some(c) => c,
        None => {
            let verified = match tokens::verify(&state.keys(), &state.config.public_url, value) {
                Err(tokens::Refusal::UnknownKey) if state.reload_keys().await => tokens::verify(&state.keys(), &state.config.public_url, value),
                other => other,
            };
            let claims = Arc::new(verified.map_err(|_| "invalid or expired token")?);
            state.tokens.put(value, claims.clone());
            claims
        }
    };
    if claims.is_machine() {
        // An exchanged token lives no longer than the key it came from.
        let key_id = claims.key_id.as_deref().ok_or("invalid token")?;
        let key = keys::by_id(state, key_id).await.map_err(|_| "invalid token")?;
        if !key.is_usable() {
            return Err("the API key behind this token is no longer active");
        }
        // Rotating a key also ends the tokens exchanged for its old secret.
        if claims.key_rotated_at != key.rotated_at {
            return Err("the API key behind this token was rotated");
        }
        let scopes = Arc::new(claims.scopes.clone().unwrap_or_default());
        return Ok(Caller::Machine { key, scopes });
    }
    Ok(Caller::Human(claims))
}

/// Routes about the calling person themselves.
const SELF_ROUTES: &[&str] = &["/api/me", "/api/memberships"];
/// The writes a person makes to their own identity (display name,
/// password), whatever their roles in the token's tenant.
const SELF_WRITES: &[(&str, &str)] = &[("PATCH", "/api/me"), ("POST", "/api/me/password")];

tokio::task_local! {
    /// The matched route template of the request being answered, for the
    /// metrics layer, which runs outside routing: that layer opens the slot
    /// around the request (when metrics are on) and reads it once the
    /// answer is made; [`authorize`] fills it. A task-local rather than an
    /// extension of the answer, which would allocate the answer's
    /// extension map on every request, and rather than a route layer of
    /// its own, which would clone the route's service stack on every
    /// request.
    pub static MATCHED_ROUTE: std::cell::Cell<Option<MatchedPath>>;
}

/// Inner layer (per route): the scope a machine needs, or the role
/// authority a person needs, for the matched route. The checks borrow the
/// request's parts (the caller and the template are not cloned: their
/// shared reference counts would move between the cores on every request),
/// and the template then goes to the metrics' slot, when there is one.
///
/// First of all, a path parameter holding a NUL is refused (400 naming
/// it), before the checks read the path and before any handler binds it.
pub async fn authorize(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let (mut parts, body) = req.into_parts();
    let matched = parts.extensions.remove::<MatchedPath>();
    let verdict = match nul_in_path(&mut parts).await {
        Ok(()) => check(&state, matched.as_ref().map(MatchedPath::as_str), &parts).await,
        Err(refused) => Err(refused.into_response()),
    };
    if let Some(route) = matched {
        // Outside the metrics layer's scope (metrics off) there is no slot.
        let _ = MATCHED_ROUTE.try_with(|slot| slot.set(Some(route)));
    }
    match verdict {
        Ok(()) => next.run(Request::from_parts(parts, body)).await,
        Err(refused) => refused,
    }
}

/// 400 when a path parameter holds a NUL once percent-decoded. A NUL in a
/// URI can only be written `%00` (hyper refuses the raw byte), and a literal
/// segment of a route never matches one, so only a path with `%00` in it
/// has its parameters decoded here.
async fn nul_in_path(parts: &mut Parts) -> ApiResult<()> {
    if !parts.uri.path().contains("%00") {
        return Ok(());
    }
    match axum::extract::RawPathParams::from_request_parts(parts, &()).await {
        Ok(params) => crate::nul::check_path_params(params.iter()),
        // A parameter that is not UTF-8 once decoded: the route's `Path`
        // refuses the request with its own 400.
        Err(_) => Ok(()),
    }
}

/// The checks of [`authorize`] for the matched route template `route`:
/// `Err` is the refusal to answer.
async fn check(state: &AppState, route: Option<&str>, req: &axum::http::request::Parts) -> Result<(), Response> {
    if state.config.gate_mode == GateMode::Off || is_public(req.uri.path()) {
        return Ok(());
    }
    let (Some(route), Some(caller)) = (route, req.extensions.get::<Caller>()) else {
        return Ok(());
    };
    let Some(required) = scope::required_for_route(req.method.as_str(), route) else {
        return Ok(());
    };
    let verdict = match caller {
        Caller::Machine { key, scopes } => {
            if scope::any_covers(scopes, &required) {
                Ok(())
            } else {
                Err(ApiError::Forbidden {
                    details: vec![format!("API key {} lacks the scope {required}", key.masked())],
                    scopes: Some((vec![required.to_string()], scopes.to_vec())),
                })
            }
        }
        // A person may always read their own identity, whatever their roles.
        Caller::Human(_) if req.method == Method::GET && SELF_ROUTES.contains(&route) => Ok(()),
        Caller::Human(_) if SELF_WRITES.iter().any(|(m, r)| *m == req.method.as_str() && *r == route) => Ok(()),
        Caller::Human(claims) => match &claims.tenant {
            Some(t) => person_may(state, t, &required, persona_in_path(route, req.uri.path())).await,
            // A person-level token reaches only the routes that take one;
            // their extractors refuse it everywhere else.
            None => Ok(()),
        },
        Caller::Operator(_) => Ok(()),
    };
    let verdict = match verdict {
        Ok(()) => abac(state, caller, &required, route, req.method.as_str(), req.uri.path()).await,
        refused => refused,
    };
    match verdict {
        Ok(()) => Ok(()),
        Err(e) if state.config.gate_mode == GateMode::Report && !matches!(e, ApiError::Db(_) | ApiError::Internal(_)) => {
            tracing::warn!(route = %route, scope = %required, "gate (report mode): would refuse with 403");
            Ok(())
        }
        Err(e) => {
            if matches!(e, ApiError::Forbidden { .. }) {
                let reason = match (&e, caller) {
                    (ApiError::Forbidden { scopes: None, .. }, _) => "policy",
                    (_, Caller::Machine { .. }) => "scope",
                    _ => "role",
                };
                metrics::counter!("hub_gate_refusals_total", "reason" => reason).increment(1);
            }
            Err(e.into_response())
        }
    }
}

/// The ABAC step: the tenant's active policy bundle, when it has one,
/// decides over a request its roles or scopes already allow. The policy
/// group's own routes are exempt, so no bundle can lock a tenant out of
/// the routes that change it.
async fn abac(state: &AppState, caller: &Caller, required: &str, route: &str, method: &str, path: &str) -> ApiResult<()> {
    if required.starts_with("policy.") {
        return Ok(());
    }
    let (tenant_id, persona_id, actor_kind) = match caller {
        Caller::Machine { key, .. } => (key.tenant_id.as_str(), key.synthetic_persona_id.as_str(), "service"),
        Caller::Human(claims) => match &claims.tenant {
            Some(t) => (t.tenant_id.as_str(), t.primary_persona_id.as_str(), "human"),
            None => return Ok(()),
        },
        Caller::Operator(_) => return Ok(()),
    };
    let request = directory::AbacRequest { tenant_id, persona_id, actor_kind, action: required, route, method, path };
    match state.directories.policies.refusal(state, request).await? {
        None => Ok(()),
        Some(reason) => Err(ApiError::Forbidden { details: vec![reason], scopes: None }),
    }
}

/// The persona a route names: the value of its `{persona_id}` segment.
fn persona_in_path<'a>(route: &str, path: &'a str) -> Option<&'a str> {
    let at = route.split('/').position(|seg| seg == "{persona_id}")?;
    path.split('/').nth(at).filter(|p| uuid::Uuid::parse_str(p).is_ok())
}

/// A person's authority in a tenant: RBAC, the roles of their persona;
/// then ReBAC: a route naming a persona the roles do not cover passes
/// when the caller reaches that persona through relationships whose kind
/// is the scope the route needs.
async fn person_may(state: &AppState, t: &tokens::TenantClaims, required: &str, named: Option<&str>) -> ApiResult<()> {
    let perms = keys::permissions(state, &t.primary_persona_id).await?;
    if scope::any_covers(&perms, required) {
        return Ok(());
    }
    if let Some(target) = named
        && state.directories.relations.reaches(&state.db, &t.tenant_id, &t.primary_persona_id, required, target).await?
    {
        return Ok(());
    }
    Err(ApiError::Forbidden {
        details: vec![format!("persona {} holds no role granting {required}", t.primary_persona_id)],
        scopes: Some((vec![required.to_string()], perms.to_vec())),
    })
}

/// The tenant context of a caller with one (a tenant JWT or an API key).
#[derive(Clone, Debug)]
pub struct TenantCtx {
    pub tenant_id: String,
    pub app_id: String,
    pub org_id: String,
    /// The acting persona (a person's primary persona, a key's synthetic one).
    pub persona_id: String,
    /// The person behind a human caller.
    pub person_id: Option<String>,
    /// `human` or `service`.
    pub actor_kind: &'static str,
    /// A machine caller's scopes (its key's, or its exchanged token's):
    /// what it may do is what both these and its persona's roles allow.
    pub key_scopes: Option<Arc<Vec<String>>>,
}

impl TenantCtx {
    /// RULINGS 1: a body or query `tenant_id` must be a UUID (400) and the
    /// credential's (403 `TenantMismatch`).
    pub fn check_tenant(&self, claimed: Option<&str>) -> ApiResult<()> {
        // Present is a UUID: blank included, which names no tenant.
        match claimed.map(str::trim) {
            Some(t) if uuid::Uuid::parse_str(t).is_err() => Err(ApiError::invalid("tenant_id must be a UUID")),
            Some(t) if t != self.tenant_id => Err(ApiError::TenantMismatch),
            _ => Ok(()),
        }
    }
}

impl TenantCtx {
    /// RULINGS 1, "tenant_id query required": missing or blank is 400,
    /// otherwise as [`TenantCtx::check_tenant`].
    pub fn required_tenant(&self, claimed: &Option<String>) -> ApiResult<()> {
        let mut check = crate::validate::Check::new();
        check.required("tenant_id", claimed);
        check.finish()?;
        self.check_tenant(claimed.as_deref())
    }
}

/// The tenant a request body's `tenant_id` is checked against: the
/// caller's, on a route that is not public.
pub fn body_tenant_check(req: &Request) -> Option<TenantCtx> {
    if is_public(req.uri().path()) {
        return None;
    }
    tenant_of(req.extensions().get::<Caller>()?).ok()
}

fn caller(parts: &Parts) -> ApiResult<Caller> {
    parts.extensions.get::<Caller>().cloned().ok_or(ApiError::Unauthorized("missing bearer token"))
}

fn tenant_of(caller: &Caller) -> ApiResult<TenantCtx> {
    match caller {
        Caller::Human(claims) => {
            let t = claims.tenant.as_ref().ok_or_else(|| ApiError::forbidden("this route needs a tenant token: log in with a tenant_id"))?;
            Ok(TenantCtx {
                tenant_id: t.tenant_id.clone(),
                app_id: t.app_id.clone(),
                org_id: t.org_id.clone(),
                persona_id: t.primary_persona_id.clone(),
                person_id: Some(claims.sub.clone()),
                actor_kind: "human",
                key_scopes: None,
            })
        }
        Caller::Machine { key, scopes } => Ok(TenantCtx {
            tenant_id: key.tenant_id.clone(),
            app_id: key.app_id.clone(),
            org_id: key.org_id.clone(),
            persona_id: key.synthetic_persona_id.clone(),
            person_id: None,
            actor_kind: "service",
            key_scopes: Some(scopes.clone()),
        }),
        Caller::Operator(_) => Err(ApiError::Unauthorized("tenant routes do not take the operator credential")),
    }
}

const HUMAN_ONLY: &str = "this route requires a human JWT; API keys are rejected";

/// Any tenant caller: a tenant JWT or an API key.
pub struct Tenant(pub TenantCtx);

impl<S: Send + Sync> FromRequestParts<S> for Tenant {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> ApiResult<Self> {
        tenant_of(&caller(parts)?).map(Tenant)
    }
}

/// A person with a tenant token (credential management: API keys refused).
pub struct HumanTenant(pub TenantCtx, pub Arc<Claims>);

impl<S: Send + Sync> FromRequestParts<S> for HumanTenant {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> ApiResult<Self> {
        match caller(parts)? {
            c @ Caller::Human(_) => {
                let ctx = tenant_of(&c)?;
                let Caller::Human(claims) = c else { unreachable!() };
                Ok(HumanTenant(ctx, claims))
            }
            _ => Err(ApiError::forbidden(HUMAN_ONLY)),
        }
    }
}

/// A person with any token (person-level or tenant).
pub struct Person(pub Arc<Claims>);

impl<S: Send + Sync> FromRequestParts<S> for Person {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> ApiResult<Self> {
        match caller(parts)? {
            Caller::Human(claims) => Ok(Person(claims)),
            _ => Err(ApiError::forbidden(HUMAN_ONLY)),
        }
    }
}

/// The caller if the gate established one (public routes that behave
/// differently for a signed-in person, such as signup).
pub struct MaybeCaller(pub Option<Caller>);

impl<S: Send + Sync> FromRequestParts<S> for MaybeCaller {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> ApiResult<Self> {
        Ok(MaybeCaller(parts.extensions.get::<Caller>().cloned()))
    }
}

/// The client's address as the connection shows it. No forwarding header
/// is trusted: behind a proxy every client shares the proxy's address.
pub struct ClientAddr(pub IpAddr);

impl<S: Send + Sync> FromRequestParts<S> for ClientAddr {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> ApiResult<Self> {
        match parts.extensions.get::<ConnectInfo<SocketAddr>>() {
            Some(ConnectInfo(addr)) => Ok(ClientAddr(addr.ip())),
            None => Err(ApiError::Internal(anyhow::anyhow!("the server was started without connection info"))),
        }
    }
}

/// HTTP Basic client credentials (RFC 6749 2.3.1: client_id as user, the
/// secret as password), when the request carries them.
pub struct BasicCredentials(pub Option<(String, String)>);

impl<S: Send + Sync> FromRequestParts<S> for BasicCredentials {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> ApiResult<Self> {
        use base64::Engine;
        let parse = || {
            let value = parts.headers.get(header::AUTHORIZATION)?.to_str().ok()?;
            let (scheme, encoded) = value.split_once(' ')?;
            if !scheme.eq_ignore_ascii_case("basic") {
                return None;
            }
            let decoded = base64::engine::general_purpose::STANDARD.decode(encoded.trim()).ok()?;
            let text = String::from_utf8(decoded).ok()?;
            let (id, secret) = text.split_once(':')?;
            Some((id.to_string(), secret.to_string()))
        };
        Ok(BasicCredentials(parse()))
    }
}

/// The platform operator (`/admin/*`, admitted by the gate's operator
/// header check). Anything else is 401, as the operator routes answer.
pub struct Operator(pub Arc<str>);

impl<S: Send + Sync> FromRequestParts<S> for Operator {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> ApiResult<Self> {
        match parts.extensions.get::<Caller>() {
            Some(Caller::Operator(who)) => Ok(Operator(who.clone())),
            _ => Err(ApiError::Unauthorized("admin token required")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::is_robot_route;

    #[test]
    fn robot_routes_are_the_stream_and_the_ack() {
        for path in ["/api/commands/stream/a1", "/api/commands/stream/a1/", "/api/commands/c1/ack", "/api/commands/c1/ack/", "/api/commands//ack"] {
            assert!(is_robot_route(path), "{path}");
        }
        for path in [
            "/api/commands",
            "/api/commands/stream",
            "/api/commands/c1",
            "/api/commands/c1/ack/x",
            "/api/commands/stream/a1/b",
            "/api/command/c1/ack",
            "/x/api/commands/c1/ack",
        ] {
            assert!(!is_robot_route(path), "{path}");
        }
    }
}
