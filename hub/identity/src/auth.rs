//! sdk-identity: the authentication bootstrap. Tenant signup, person
//! registration, email verification, password login (minting the six-layer
//! JWT), the client-credentials token exchange, the caller's own identity,
//! and the JWKS document.
//!
//! This module owns identity_person, identity_credential, identity_alias
//! and identity_verification. The tenant, membership and personas a signup
//! creates, and those a tenant token names, come from tenancy and personas;
//! its first profile band from profiles.

use axum::{
    Json,
    extract::Request,
    http::{HeaderValue, StatusCode, header},
    response::IntoResponse,
};

use crate::{
    api_keys, personas, profiles,
    tenancy::{self, IsolationTier, Membership, Tenant, TenantStatus},
};
use hub_kernel::prelude::*;
use hub_kernel::{
    crypto::{self, DataKey, password},
    gate::{
        BasicCredentials, Caller, ClientAddr, MaybeCaller, Person,
        keys::{self, KeyRecord},
        rate, scope, throttle,
        tokens::{self, Actor, Claims, TenantClaims},
    },
};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(signup_tenant))
        .routes(routes!(register))
        .routes(routes!(login))
        .routes(routes!(token))
        .routes(routes!(send_verification_email))
        .routes(routes!(verify_email))
        .routes(routes!(verification_status))
        .routes(routes!(request_password_reset))
        .routes(routes!(confirm_password_reset))
        // The public forms above take small bodies: before any credential
        // is known, none makes the hub read more than that.
        .route_layer(axum::middleware::from_fn(hub_kernel::error::limit_body::<{ hub_kernel::error::PUBLIC_BODY_LIMIT }>))
        .routes(routes!(me, update_me))
        .routes(routes!(change_password))
        .routes(routes!(jwks))
}

/// Machine tokens from the exchange live 900 seconds (Authentication 9).
pub const EXCHANGE_TTL_SECONDS: i64 = 900;
/// Verification tokens live 15 minutes (RULINGS 3).
const VERIFICATION_TTL_MINUTES: i64 = 15;
/// Wrong passwords an account may take before its logins slow down.
const LOGIN_FREE_PER_ACCOUNT: i64 = 5;
/// Failed logins and exchanges one client address may make before it slows down.
const FREE_PER_ADDRESS: i64 = 20;
/// Verification emails one address may ask for an account before they slow down.
const VERIFY_FREE_PER_ACCOUNT: i64 = 3;
/// Password-reset emails one may ask for an account before they slow down
/// (as verification emails).
const RESET_FREE_PER_ACCOUNT: i64 = VERIFY_FREE_PER_ACCOUNT;
/// Wrong current passwords a person may give before their changes slow down.
const CHANGE_FREE_PER_ACCOUNT: i64 = LOGIN_FREE_PER_ACCOUNT;
/// The purpose of a password-reset token in identity_verification.
const PASSWORD_RESET: &str = "password-reset";

fn normalise_email(raw: &str) -> Option<String> {
    let e = raw.trim().to_lowercase();
    let (local, domain) = e.split_once('@')?;
    (!local.is_empty() && domain.contains('.') && !domain.starts_with('.') && !domain.ends_with('.') && !e.contains(char::is_whitespace)).then_some(e)
}

/// A present email's form (what its schema's `format: email` cannot
/// enforce): normalised (trimmed, lower case), or a problem.
fn email_form(check: &mut Check, raw: &str) -> String {
    normalise_email(raw).unwrap_or_else(|| {
        check.fail("email must be an email address");
        String::new()
    })
}

/// An email alias: whose it is and when it was verified.
#[derive(Debug, FromRow)]
struct Alias {
    alias_id: String,
    person_id: String,
    verified_at: Option<Timestamp>,
}

/// The email alias of `email`, if any person has it.
async fn person_by_email<'e, E>(exec: E, state: &AppState, email: &str) -> ApiResult<Option<Alias>>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let hash = state.master.alias_hash("email", email);
    Ok(sqlx::query_as("SELECT alias_id, person_id, verified_at FROM identity_alias WHERE kind = 'email' AND value_hash = $1")
        .bind(hash)
        .fetch_optional(exec)
        .await?)
}

/// Whether `person_id` names a person who has not been erased.
pub async fn person_exists<'e, E>(exec: E, person_id: &str) -> ApiResult<bool>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let found: Option<String> =
        sqlx::query_scalar("SELECT person_id FROM identity_person WHERE person_id = $1 AND erased_at IS NULL").bind(person_id).fetch_optional(exec).await?;
    Ok(found.is_some())
}

/// The data key of `person_id`, under which their personal data is sealed;
/// `None` for an unknown person or once the key is destroyed.
pub async fn person_key(conn: &mut sqlx::AnyConnection, master: &crypto::MasterKey, person_id: &str) -> ApiResult<Option<DataKey>> {
    let key_ref: Option<String> =
        sqlx::query_scalar("SELECT person_key_ref FROM identity_person WHERE person_id = $1").bind(person_id).fetch_optional(&mut *conn).await?;
    match key_ref {
        Some(k) => Ok(DataKey::load(conn, master, &k).await?),
        None => Ok(None),
    }
}

/// The status of `person_id` (`active`, or `merged` while absorbed by an
/// identity merge), if the person exists.
pub async fn person_status<'e, E>(exec: E, person_id: &str) -> ApiResult<Option<String>>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    Ok(sqlx::query_scalar("SELECT status FROM identity_person WHERE person_id = $1").bind(person_id).fetch_optional(exec).await?)
}

/// Sets the status of `person_id` if it is `from`; whether it was.
pub async fn set_person_status(tx: &mut Tx, person_id: &str, from: &str, to: &str) -> ApiResult<bool> {
    let done = sqlx::query("UPDATE identity_person SET status = $1 WHERE person_id = $2 AND status = $3")
        .bind(to)
        .bind(person_id)
        .bind(from)
        .execute(&mut **tx)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Creates person, data key, email alias and password credential.
async fn insert_person(state: &AppState, tx: &mut Tx, email: &str, password_hash: &str, display_name: &str, region: Option<&str>) -> ApiResult<String> {
    let key = DataKey::create(tx, &state.master).await?;
    let person_id = db::new_id();
    let now = db::now();
    let profile = key.seal(json!({ "display_name": display_name }).to_string().as_bytes(), person_id.as_bytes());
    sqlx::query(
        "INSERT INTO identity_person (person_id, home_region, person_key_ref, status, profile_envelope, created_at) \
         VALUES ($1, $2, $3, 'active', $4, $5)",
    )
    .bind(&person_id)
    .bind(region)
    .bind(&key.key_id)
    .bind(profile)
    .bind(&now)
    .execute(&mut **tx)
    .await?;
    let alias_id = db::new_id();
    // The unique (kind, value_hash) decides: of two registrations of one
    // email at once, the one that did not see the other's person meets it
    // here, and is answered as any registration of a known email is.
    sqlx::query("INSERT INTO identity_alias (alias_id, person_id, kind, value_hash, value_enc, created_at) VALUES ($1, $2, 'email', $3, $4, $5)")
        .bind(&alias_id)
        .bind(&person_id)
        .bind(state.master.alias_hash("email", email))
        .bind(key.seal(email.as_bytes(), alias_id.as_bytes()))
        .bind(&now)
        .execute(&mut **tx)
        .await
        .map_err(|e| match &e {
            sqlx::Error::Database(d) if d.kind() == sqlx::error::ErrorKind::UniqueViolation => ApiError::PersonExists,
            _ => ApiError::from(e),
        })?;
    sqlx::query("INSERT INTO identity_credential (person_id, kind, secret_hash, created_at, updated_at) VALUES ($1, 'password', $2, $3, $3)")
        .bind(&person_id)
        .bind(password_hash)
        .bind(&now)
        .execute(&mut **tx)
        .await?;
    Ok(person_id)
}

/// A tenant signup: its owner and the tenant's org and app.
#[derive(Deserialize, ToSchema)]
#[schema(as = TenantSignup)]
struct Signup {
    #[schema(format = "email")]
    email: String,
    /// At least 8 characters besides leading and trailing blanks; used as
    /// sent (never trimmed).
    #[schema(min_length = 8)]
    password: String,
    org_name: String,
    /// The new app's id (text, unique on the platform).
    app_id: String,
    display_name: String,
    region: String,
}

/// A signed-up tenant: the spine just created and its owner's token.
#[derive(Serialize, ToSchema)]
struct SignedUpTenant {
    tenant_id: String,
    person_id: String,
    org_id: String,
    app_id: String,
    membership_id: String,
    persona_id: String,
    app_identity_id: String,
    /// `trial`.
    status: TenantStatus,
    /// `S`.
    isolation_tier: IsolationTier,
    /// The owner's tenant JWT (ES256).
    token: String,
}

/// Provisions a whole tenant and its owner in one transaction.
///
/// Person, alias, credential, org, app, tenant (`trial`, tier `S`),
/// membership, persona, app identity and profile band. With a valid token
/// of the alias's own person the person is reused; otherwise an existing
/// alias is 409 `PersonExistsError`.
#[utoipa::path(post, path = "/api/auth/signup-tenant", tag = "sdk-identity", request_body = Signup,
    extensions(("x-concurrency" = json!({"outcome": "one-wins", "given": [["GET", "/api/me", null]], "body": {"email": "{email}", "password": "correct horse battery", "org_name": "Races", "app_id": "a-{unique}", "display_name": "Racer", "region": "eu-west-1"}}))),
    responses((status = 201, description = "the tenant's spine and the owner's token", body = Data<SignedUpTenant>), (status = 409, description = "Conflict: the app_id is taken; PersonExistsError: a person has the email (log in and create the tenant instead)", body = ErrorBody)))]
async fn signup_tenant(State(state): State<AppState>, MaybeCaller(caller): MaybeCaller, body: Body<Signup>) -> ApiResult<Created<SignedUpTenant>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let email = email_form(&mut check, &body.email);
    check.finish()?;
    let pw = body.password;
    let org_name = body.org_name.trim().to_string();
    let app_id = body.app_id.trim().to_string();
    let display_name = body.display_name.trim().to_string();
    let region = body.region.trim().to_string();

    let existing = person_by_email(&state.db.read, &state, &email).await?;
    let reuse = match (&existing, &caller) {
        (None, _) => None,
        (Some(alias), Some(Caller::Human(claims))) if claims.sub == alias.person_id => Some(alias.person_id.clone()),
        (Some(_), _) => return Err(ApiError::PersonExists),
    };
    let hash = match reuse {
        None => Some(password::hash(pw).await?),
        Some(_) => None,
    };

    let mut tx = state.db.begin().await?;
    let person_id = match (reuse, hash) {
        (Some(p), _) => p,
        (None, Some(h)) => {
            // Re-checked inside the transaction: a concurrent signup of the
            // same email meets the UNIQUE (kind, value_hash) constraint
            // (answered alike, `PersonExists`).
            if person_by_email(&mut *tx, &state, &email).await?.is_some() {
                return Err(ApiError::PersonExists);
            }
            insert_person(&state, &mut tx, &email, &h, &display_name, Some(&region)).await?
        }
        (None, None) => unreachable!("a new person always has a hash"),
    };
    let org_id = tenancy::insert_org(&mut tx, &org_name).await?;
    let tenant_id = db::new_id();
    let (tenant, owner) = tenancy::insert_app_and_tenant(
        &mut tx,
        tenancy::NewTenantRow {
            tenant_id: &tenant_id,
            app_id: &app_id,
            org_id: &org_id,
            display_name: &org_name,
            parent_tenant_id: None,
            root_tenant_id: &tenant_id,
            reseller_id: None,
            region: Some(&region),
            brand_domain: None,
            module_subscriptions: &json!([]),
        },
    )
    .await?;
    let membership = tenancy::insert_membership(&mut tx, &person_id, &tenant_id, None, &owner).await?;
    let persona =
        personas::insert(&mut tx, &state.master, &tenant_id, Some(&membership.membership_id), personas::PersonaKind::Human, Some(&owner), None).await?;
    let app_identity_id = tenancy::ensure_app_identity(&mut tx, &person_id, &app_id).await?;
    let key = person_key(&mut tx, &state.master, &person_id).await?.ok_or(ApiError::Conflict("the person has been erased".into()))?;
    profiles::insert_first(&mut tx, &key, &app_identity_id, &json!({ "display_name": display_name })).await?;
    hub_kernel::audit::record_event(
        &mut tx,
        hub_kernel::audit::Event {
            tenant_id: &tenant_id,
            pool_index: None,
            event_type: events::TENANT_CREATED,
            actor_kind: "human",
            actor_id: &person_id,
            actor_chain: None,
            payload: &json!({ "tenant_id": tenant_id, "org_id": org_id, "app_id": app_id, "person_id": person_id, "status": "trial", "isolation_tier": "S" }),
            retention_class: None,
            occurred_at: None,
        },
    )
    .await?;
    tx.commit().await?;

    let token = tenant_token(&state, &membership, &tenant, vec!["pwd".into()]).await?;
    Ok(created(SignedUpTenant {
        tenant_id: tenant.tenant_id,
        person_id,
        org_id,
        app_id,
        membership_id: membership.membership_id,
        persona_id: persona.persona_id,
        app_identity_id,
        status: tenant.status,
        isolation_tier: tenant.isolation_tier,
        token,
    }))
}

/// An end user's registration.
#[derive(Deserialize, ToSchema)]
#[schema(as = Registration)]
struct Register {
    #[schema(format = "email")]
    email: String,
    /// At least 8 characters besides leading and trailing blanks; used as
    /// sent (never trimmed).
    #[schema(min_length = 8)]
    password: String,
    display_name: String,
}

/// A registered person.
#[derive(Serialize, ToSchema)]
struct RegisteredPerson {
    person_id: String,
}

/// Creates an end user's person, alias and credential (no tenant).
#[utoipa::path(post, path = "/api/auth/register", tag = "sdk-identity", request_body = Register,
    extensions(("x-concurrency" = json!({"outcome": "one-wins", "loser_error": "PersonExistsError", "events": 0, "body": {"email": "m-{unique}@races.example.com", "password": "correct horse battery", "display_name": "Twin"}}))),
    responses((status = 201, description = "the new person", body = Data<RegisteredPerson>), (status = 409, description = "PersonExistsError: a person has the email", body = ErrorBody)))]
async fn register(State(state): State<AppState>, body: Body<Register>) -> ApiResult<Created<RegisteredPerson>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let email = email_form(&mut check, &body.email);
    check.finish()?;
    let pw = body.password;
    let display_name = body.display_name.trim().to_string();
    if person_by_email(&state.db.read, &state, &email).await?.is_some() {
        return Err(ApiError::PersonExists);
    }
    let hash = password::hash(pw).await?;
    let mut tx = state.db.begin().await?;
    if person_by_email(&mut *tx, &state, &email).await?.is_some() {
        return Err(ApiError::PersonExists);
    }
    let person_id = insert_person(&state, &mut tx, &email, &hash, &display_name, None).await?;
    tx.commit().await?;
    Ok(created(RegisteredPerson { person_id }))
}

/// A password login.
#[derive(Deserialize, ToSchema)]
#[schema(as = LoginRequest)]
struct Login {
    email: String,
    password: String,
    /// A tenant the person is a member of: the token is minted against that
    /// membership (403 `NoMembership` otherwise); a person-level token
    /// without tenant claims when absent.
    #[schema(format = "uuid")]
    tenant_id: Option<String>,
    /// With `tenant_id`: the tenant's app; the person's identity in it is
    /// created on first login.
    app_id: Option<String>,
}

/// A person's token.
#[derive(Serialize, ToSchema)]
struct LoginToken {
    /// An ES256 JWT.
    token: String,
    /// `Bearer`.
    token_type: &'static str,
    /// Seconds the token lives.
    expires_in: i64,
}

/// Password login: a person token, or a tenant token with `tenant_id`.
#[utoipa::path(post, path = "/api/auth/login", tag = "sdk-identity", request_body = Login,
    extensions(("x-concurrency" = json!({"outcome": "independent", "events": 0, "given": [["POST", "/api/auth/register", {"email": "m-{unique}@races.example.com", "password": "correct horse battery", "display_name": "Twin"}]], "body": {"email": "m-{unique}@races.example.com", "password": "correct horse battery"}}))),
    responses((status = 200, description = "the token", body = Data<LoginToken>), (status = 401, description = "Unauthorized: invalid email or password", body = ErrorBody), (status = 403, description = "NoMembership: the person is no active member of the tenant", body = ErrorBody), (status = 429, description = "RateLimited: too many failed logins from the address or for the account (Retry-After)", body = ErrorBody), (status = 503, description = "Busy: password checks are at their bound (Retry-After)", body = ErrorBody)))]
async fn login(State(state): State<AppState>, ClientAddr(addr): ClientAddr, body: Body<Login>) -> ApiResult<Data<LoginToken>> {
    let body = body.checked()?;
    let email = body.email.trim().to_string();
    let pw = body.password.clone();
    let tenant_id = canonical_uuid_opt(&body.tenant_id);
    let email = normalise_email(&email).unwrap_or(email);
    // The account and its password hash, in one read.
    let account: Option<Account> = sqlx::query_as(
        "SELECT a.person_id, c.secret_hash FROM identity_alias a LEFT JOIN identity_credential c ON c.person_id = a.person_id \
         WHERE a.kind = 'email' AND a.value_hash = $1",
    )
    .bind(state.master.alias_hash("email", &email))
    .fetch_optional(&state.db.read)
    .await?;
    let (person, stored) = match account {
        Some(a) => (Some(a.person_id), a.secret_hash),
        None => (None, None),
    };
    // A guess at an unknown account can never succeed: while the hashing
    // queue is full it is refused before any further work.
    if person.is_none() && password::saturated() {
        return Err(ApiError::Busy(1));
    }
    // Blocked guesses are refused before any hashing work.
    let keys = [throttle::Key::address("login", addr, FREE_PER_ADDRESS), throttle::Key::account(&state, "login", &email, LOGIN_FREE_PER_ACCOUNT)];
    let failed_before = throttle::check(&state, &keys).await?;
    // A login to an existing account with no failures on record may use the
    // hashing thread kept for clean logins; guesses at unknown accounts
    // (never a success) and repeat offenders queue with everyone.
    let lane = if failed_before || person.is_none() { password::Lane::Shared } else { password::Lane::Clean };
    let valid = password::verify(lane, pw, stored.clone()).await?;
    let (Some(person_id), true, Some(_)) = (person, valid, stored) else {
        throttle::fail(&state, &keys).await?;
        return Err(ApiError::Unauthorized("invalid email or password"));
    };
    if failed_before {
        throttle::clear(&state, &keys[1]).await?;
    }
    let Some(tenant_id) = tenant_id else {
        let token = person_token(&state, &person_id).await?;
        return Ok(ok(LoginToken { token, token_type: "Bearer", expires_in: state.config.token_ttl_seconds }));
    };
    let membership = tenancy::person_membership(&state.db.read, &tenant_id, &person_id).await?;
    let membership = membership.filter(|m| m.status == "active").ok_or(ApiError::NoMembership)?;
    let tenant = tenancy::find(&state.db.read, &tenant_id).await?.ok_or(ApiError::NoMembership)?;
    // The gate would refuse the token: none is minted.
    keys::tenant_open(&state, &tenant_id).await?;
    if let Some(app_id) = Check::optional(&body.app_id) {
        if tenant.app_id != app_id {
            return Err(ApiError::invalid("app_id is not the app of this tenant"));
        }
        let mut tx = state.db.begin().await?;
        tenancy::ensure_app_identity(&mut tx, &person_id, &app_id).await?;
        tx.commit().await?;
    }
    let token = tenant_token(&state, &membership, &tenant, vec!["pwd".into()]).await?;
    Ok(ok(LoginToken { token, token_type: "Bearer", expires_in: state.config.token_ttl_seconds }))
}

/// A login's account: the person of the email alias and their password
/// hash (none when they have no password credential).
#[derive(Debug, FromRow)]
struct Account {
    person_id: String,
    secret_hash: Option<String>,
}

/// What a token tells of its person, still sealed: the profile and the
/// email alias.
#[derive(Debug, FromRow)]
struct SealedAttributes {
    person_key_ref: String,
    profile_envelope: Option<Vec<u8>>,
    alias_id: Option<String>,
    value_enc: Option<Vec<u8>>,
}

/// Email and display name of a person, opened with the person's key.
async fn person_attributes(state: &AppState, person_id: &str) -> ApiResult<(Option<String>, Option<String>)> {
    let sealed: SealedAttributes = sqlx::query_as(
        "SELECT p.person_key_ref, p.profile_envelope, a.alias_id, a.value_enc FROM identity_person p \
         LEFT JOIN identity_alias a ON a.person_id = p.person_id AND a.kind = 'email' WHERE p.person_id = $1",
    )
    .bind(person_id)
    .fetch_optional(&state.db.read)
    .await?
    .ok_or(ApiError::Unauthorized("unknown person"))?;
    let Some(key) = DataKey::load(&state.db.read, &state.master, &sealed.person_key_ref).await? else {
        return Ok((None, None));
    };
    let email = match (sealed.alias_id, sealed.value_enc) {
        (Some(alias_id), Some(enc)) => Some(String::from_utf8(key.open(&enc, alias_id.as_bytes())?).map_err(anyhow::Error::from)?),
        _ => None,
    };
    let display_name = match sealed.profile_envelope {
        Some(enc) => serde_json::from_slice::<Value>(&key.open(&enc, person_id.as_bytes())?)
            .ok()
            .and_then(|v| v.get("display_name").and_then(Value::as_str).map(str::to_string)),
        None => None,
    };
    Ok((email, display_name))
}

fn base_claims(sub: &str, email: Option<String>, display_name: Option<String>, kind: &str, amr: Vec<String>) -> Claims {
    Claims {
        iss: String::new(),
        sub: sub.to_string(),
        iat: 0,
        exp: 0,
        jti: String::new(),
        email,
        display_name,
        tenant: None,
        actor: Actor { kind: kind.to_string() },
        amr,
        scopes: None,
        key_id: None,
        application_id: None,
        key_rotated_at: None,
    }
}

/// A person-level token: no tenant claims.
async fn person_token(state: &AppState, person_id: &str) -> ApiResult<String> {
    let (email, display_name) = person_attributes(state, person_id).await?;
    let claims = base_claims(person_id, email, display_name, "human", vec!["pwd".into()]);
    let (token, _) = tokens::mint(&state.keys(), &state.config.public_url, state.config.token_ttl_seconds, claims)?;
    Ok(token)
}

/// A token minted against a person's membership of a tenant, naming the
/// membership's active personas (the oldest is the primary one).
async fn tenant_token(state: &AppState, membership: &Membership, tenant: &Tenant, amr: Vec<String>) -> ApiResult<String> {
    let person_id = &membership.person_id;
    let (email, display_name) = person_attributes(state, person_id).await?;
    let personas = personas::active_of_membership(&state.db.read, &membership.membership_id).await?;
    let primary = personas.first().cloned().ok_or_else(|| ApiError::forbidden("the membership has no active persona"))?;
    let mut claims = base_claims(person_id, email, display_name, "human", amr);
    claims.tenant = Some(TenantClaims {
        org_id: tenant.org_id.clone(),
        app_id: tenant.app_id.clone(),
        tenant_id: tenant.tenant_id.clone(),
        bu_id: membership.bu_id.clone(),
        parent_tenant_id: tenant.parent_tenant_id.clone(),
        root_tenant_id: Some(tenant.root_tenant_id.clone()),
        reseller_id: tenant.reseller_id.clone(),
        primary_persona_id: primary,
        all_persona_ids: personas,
        admin_pool_index: tenant.admin_pool_index,
        app_pool_index: tenant.app_pool_index.0.clone(),
    });
    let (token, _) = tokens::mint(&state.keys(), &state.config.public_url, state.config.token_ttl_seconds, claims)?;
    Ok(token)
}

/// A client-credentials token request (RFC 6749 4.4), as JSON or a form.
#[derive(Deserialize, ToSchema)]
#[schema(as = ClientCredentialsRequest)]
struct TokenRequest {
    /// `client_credentials` (anything else is 400 `unsupported_grant_type`).
    grant_type: String,
    /// The key's application: its slug or its application_id (never an app_id).
    client_id: Option<String>,
    /// The API key; required unless sent with HTTP Basic authentication
    /// (client_id as the user, the key as the password).
    client_secret: Option<String>,
    /// Space-delimited scopes, each held by the key: they may only narrow
    /// its scopes (all of them when absent).
    scope: Option<String>,
}

/// A machine token (RFC 6749 5.1), with the envelope's `success` beside it.
#[derive(Serialize, ToSchema)]
struct ClientCredentialsToken {
    success: bool,
    /// An ES256 JWT acting as the key's synthetic persona.
    access_token: String,
    /// `Bearer`.
    token_type: &'static str,
    /// 900.
    expires_in: i64,
    /// The token's scopes, space-delimited.
    scope: String,
    /// The tenant the key acts in.
    tenant_id: String,
    application_id: String,
}

/// Reads the exchange's fields from JSON or a form body (RFC 6749 4.4);
/// client credentials sent with HTTP Basic take precedence.
///
/// Either way the fields are checked against the request's schema
/// (`TokenRequest`, every problem at once); `client_secret`, which the
/// schema cannot require (HTTP Basic may carry it), is named missing with
/// them.
async fn token_request(req: Request, basic: Option<(String, String)>) -> ApiResult<TokenRequest> {
    let is_form = req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|ct| ct.starts_with("application/x-www-form-urlencoded"));
    let bytes = axum::body::to_bytes(req.into_body(), 64 * 1024).await.map_err(|_| ApiError::invalid("request body too large or unreadable"))?;
    let mut value = if is_form {
        let malformed = |e: serde_urlencoded::de::Error| ApiError::invalid(format!("malformed form body: {e}"));
        let pairs: Vec<(String, String)> = serde_urlencoded::from_bytes(&bytes).map_err(malformed)?;
        hub_kernel::nul::check_pairs(&pairs, "form field")?;
        let mut fields = serde_json::Map::new();
        for (name, v) in pairs {
            if fields.insert(name.clone(), Value::String(v)).is_some() {
                return Err(ApiError::invalid(format!("malformed form body: duplicate field `{name}`")));
            }
        }
        Value::Object(fields)
    } else if bytes.is_empty() {
        json!({})
    } else {
        let value = hub_kernel::nesting::parse_json(&bytes, "request body")?;
        if !value.is_object() {
            return Err(ApiError::invalid("request body must be a JSON object"));
        }
        hub_kernel::nul::check_value(&value)?;
        value
    };
    if let (Some((id, secret)), Some(fields)) = (basic, value.as_object_mut()) {
        fields.insert("client_id".into(), Value::String(id));
        fields.insert("client_secret".into(), Value::String(secret));
    }
    let mut problems = hub_kernel::contract::check::<TokenRequest>(&value);
    if value.get("client_secret").is_none_or(|s| s.is_null() || s.as_str().is_some_and(|s| s.trim().is_empty())) {
        problems.push("client_secret is required".into());
    }
    if !problems.is_empty() {
        return Err(ApiError::Validation(problems));
    }
    hub_kernel::contract::parse(value)
}

/// The client-credentials exchange (RFC 6749 4.4): an API key for a 900-second token.
///
/// The fields come as JSON or as a form; client credentials sent with HTTP
/// Basic authentication take precedence over the body's. The answers carry
/// `Cache-Control: no-store`.
#[utoipa::path(post, path = "/api/auth/token", tag = "sdk-identity",
    request_body(content((TokenRequest = "application/json"), (TokenRequest = "application/x-www-form-urlencoded"))),
    extensions(("x-concurrency" = json!({"outcome": "independent", "events": 0, "given": [["POST", "/api/applications", {"name": "Races", "slug": "r-{unique}", "environment": "live"}], ["POST", "/api/applications/{application_id}/keys", {"name": "k", "scopes": ["crm.*"]}]], "body": {"grant_type": "client_credentials", "client_secret": "{api_key}"}}))),
    responses(
        (status = 200, description = "the token (RFC 6749 5.1, not in the `data` envelope)", body = ClientCredentialsToken,
            headers(("Cache-Control" = String, description = "`no-store`"))),
        (status = 401, description = "`invalid_client`: the key is unknown, invalid, expired, revoked or disabled, or client_id is not its application",
            body = ErrorBody, headers(("Cache-Control" = String, description = "`no-store`"))),
        (status = 423, description = "Locked: the operator has suspended the key's tenant", body = ErrorBody),
        (status = 429, description = "RateLimited: too many failed exchanges from the address (Retry-After)", body = ErrorBody)))]
async fn token(State(state): State<AppState>, ClientAddr(addr): ClientAddr, BasicCredentials(basic): BasicCredentials, req: Request) -> Response {
    let result = exchange(&state, addr, basic, req).await;
    let mut res = match result {
        Ok(body) => (StatusCode::OK, Json(body)).into_response(),
        Err(e) => e.into_response(),
    };
    res.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

async fn exchange(state: &AppState, addr: std::net::IpAddr, basic: Option<(String, String)>, req: Request) -> ApiResult<ClientCredentialsToken> {
    let address = || throttle::Key::address("token", addr, FREE_PER_ADDRESS);
    throttle::check(state, &[address()]).await?;
    let body = token_request(req, basic).await?;
    let grant_type = body.grant_type.trim();
    let secret = Check::optional(&body.client_secret).unwrap_or_default();
    if grant_type != "client_credentials" {
        return Err(ApiError::UnsupportedGrantType);
    }
    let key = match api_keys::for_exchange(state, &secret).await {
        Err(ApiError::InvalidClient) => {
            throttle::fail(state, &[address()]).await?;
            return Err(ApiError::InvalidClient);
        }
        other => other?,
    };
    if let Some(client_id) = Check::optional(&body.client_id)
        && client_id != key.application_id
        && client_id != api_keys::application_slug(state, &key.application_id).await?
    {
        return Err(ApiError::InvalidClient);
    }
    rate::count_use(state, &key.key_id, key.rate_limit_rpm).await?;
    let scopes: Vec<String> = match Check::optional(&body.scope) {
        None => key.scopes.clone(),
        Some(requested) => {
            let requested: Vec<String> = requested.split_whitespace().map(str::to_string).collect();
            let bad: Vec<String> = requested.iter().filter(|s| !scope::is_valid(s) || !key.scopes.iter().any(|g| scope::covers(g, s))).cloned().collect();
            if !bad.is_empty() {
                return Err(ApiError::InvalidScope(bad.iter().map(|s| format!("scope not held by the key: {s}")).collect()));
            }
            requested
        }
    };
    let mut claims = base_claims(&key.synthetic_persona_id, None, None, "service", Vec::new());
    claims.tenant = Some(machine_tenant_claims(&key));
    claims.scopes = Some(scopes.clone());
    claims.key_id = Some(key.key_id.clone());
    claims.application_id = Some(key.application_id.clone());
    claims.key_rotated_at = key.rotated_at.clone();
    let (access_token, _) = tokens::mint(&state.keys(), &state.config.public_url, EXCHANGE_TTL_SECONDS, claims)?;
    Ok(ClientCredentialsToken {
        success: true,
        access_token,
        token_type: "Bearer",
        expires_in: EXCHANGE_TTL_SECONDS,
        scope: scopes.join(" "),
        tenant_id: key.tenant_id.clone(),
        application_id: key.application_id.clone(),
    })
}

fn machine_tenant_claims(key: &KeyRecord) -> TenantClaims {
    TenantClaims {
        org_id: key.org_id.clone(),
        app_id: key.app_id.clone(),
        tenant_id: key.tenant_id.clone(),
        bu_id: None,
        parent_tenant_id: key.parent_tenant_id.clone(),
        root_tenant_id: key.root_tenant_id.clone(),
        reseller_id: key.reseller_id.clone(),
        primary_persona_id: key.synthetic_persona_id.clone(),
        all_persona_ids: vec![key.synthetic_persona_id.clone()],
        admin_pool_index: key.admin_pool_index,
        app_pool_index: key.app_pool_index.clone(),
    }
}

/// A request for a verification email.
#[derive(Deserialize, ToSchema)]
#[schema(as = VerificationEmailRequest)]
struct SendVerification {
    #[schema(format = "email")]
    email: String,
}

/// A verification email's answer: the same whether or not the email is known.
#[derive(Serialize, ToSchema)]
struct VerificationSent {
    /// `true`.
    sent: bool,
    /// When the token expires (15 minutes from now).
    expires_at: Timestamp,
    /// In development mode, for a known email only: the token itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    dev_token: Option<String>,
}

/// Issues a purpose-scoped verification token for an email (15 minutes).
///
/// The answer is the same whether or not the email is known, so it cannot
/// be used to probe for accounts; in development mode a known email's token
/// is also returned as `dev_token`.
#[utoipa::path(post, path = "/api/auth/send-verification-email", tag = "sdk-identity", request_body = SendVerification,
    extensions(("x-concurrency" = json!({"outcome": "capacity", "wins": 4, "losers": 429, "events": 0, "given": [["POST", "/api/auth/register", {"email": "m-{unique}@races.example.com", "password": "correct horse battery", "display_name": "Twin"}]], "body": {"email": "m-{unique}@races.example.com"}}))),
    responses((status = 200, description = "sent (or not, for an unknown email: the answer is the same)", body = Data<VerificationSent>), (status = 429, description = "RateLimited: too many verification emails for the address or the account (Retry-After)", body = ErrorBody), (status = 503, description = "Unavailable: no mail sender is configured", body = ErrorBody)))]
async fn send_verification_email(
    State(state): State<AppState>,
    ClientAddr(addr): ClientAddr,
    body: Body<SendVerification>,
) -> ApiResult<Data<VerificationSent>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let email = email_form(&mut check, &body.email);
    check.finish()?;
    let mail = state.mailer()?;
    // Every request counts, known email or not, so the throttle's answers
    // tell nothing about which accounts exist.
    let keys = [throttle::Key::address("verify", addr, FREE_PER_ADDRESS), throttle::Key::account(&state, "verify", &email, VERIFY_FREE_PER_ACCOUNT)];
    throttle::take(&state, &keys).await?;
    let expires_at = Timestamp(chrono::Utc::now() + chrono::Duration::minutes(VERIFICATION_TTL_MINUTES));
    let mut data = VerificationSent { sent: true, expires_at, dev_token: None };
    if let Some(alias) = person_by_email(&state.db.read, &state, &email).await? {
        let token = crypto::random_base62(32);
        sqlx::query("INSERT INTO identity_verification (token_hash, alias_id, purpose, expires_at, created_at) VALUES ($1, $2, 'verify-email', $3, $4)")
            .bind(crypto::sha256_hex(token.as_bytes()))
            .bind(&alias.alias_id)
            .bind(expires_at)
            .bind(db::now())
            .execute(state.db.writer())
            .await?;
        mail.send_verification(&email, &token, &expires_at.to_string());
        if state.config.dev {
            data.dev_token = Some(token);
        }
    }
    Ok(ok(data))
}

/// A verification token to redeem.
#[derive(Deserialize, ToSchema)]
#[schema(as = EmailVerificationRequest)]
struct VerifyEmail {
    /// The token a verification email carried (single use, 15 minutes).
    token: String,
}

/// A verified email.
#[derive(Serialize, ToSchema)]
struct EmailVerified {
    /// `true`.
    verified: bool,
    /// When the email was first verified.
    verified_at: Timestamp,
}

/// Redeems a verification token: its email is verified.
#[utoipa::path(post, path = "/api/auth/verify-email", tag = "sdk-identity", request_body = VerifyEmail,
    extensions(("x-concurrency" = json!({"outcome": "one-wins", "losers": 400, "events": 0, "given": [["POST", "/api/auth/register", {"email": "m-{unique}@races.example.com", "password": "correct horse battery", "display_name": "Twin"}], ["POST", "/api/auth/send-verification-email", {"email": "m-{unique}@races.example.com"}]], "body": {"token": "{dev_token}"}}))),
    responses((status = 200, description = "the email, verified", body = Data<EmailVerified>)))]
async fn verify_email(State(state): State<AppState>, body: Body<VerifyEmail>) -> ApiResult<Data<EmailVerified>> {
    let body = body.checked()?;
    let token = body.token.trim();
    let mut tx = state.db.begin().await?;
    let token_hash = crypto::sha256_hex(token.as_bytes());
    let now = db::now();
    // The token is spent by the write that checks it: of two redemptions
    // at once, one verifies and the other finds it used.
    let alias: Option<String> = sqlx::query_scalar(
        "UPDATE identity_verification SET used_at = $1 WHERE token_hash = $2 AND purpose = 'verify-email' AND used_at IS NULL AND expires_at > $1 \
         RETURNING alias_id",
    )
    .bind(&now)
    .bind(&token_hash)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(alias_id) = alias else {
        return Err(ApiError::invalid("token is invalid, expired or already used"));
    };
    let verified_at: Timestamp =
        sqlx::query_scalar("UPDATE identity_alias SET verified_at = COALESCE(verified_at, $1) WHERE alias_id = $2 RETURNING verified_at")
            .bind(&now)
            .bind(&alias_id)
            .fetch_one(&mut *tx)
            .await?;
    tx.commit().await?;
    Ok(ok(EmailVerified { verified: true, verified_at }))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct StatusQuery {
    /// The email to look up.
    #[param(format = "email")]
    email: String,
}

/// An email's verification state.
#[derive(Serialize, ToSchema)]
struct VerificationStatus {
    /// The email, normalised (trimmed, lower case).
    email: String,
    verified: bool,
    /// Null while the email is unverified or unknown.
    verified_at: Option<Timestamp>,
}

/// Whether an email is verified.
#[utoipa::path(get, path = "/api/auth/verification-status", tag = "sdk-identity", params(StatusQuery),
    responses((status = 200, description = "the email's verification state", body = Data<VerificationStatus>)))]
async fn verification_status(State(state): State<AppState>, Params(q): Params<StatusQuery>) -> ApiResult<Data<VerificationStatus>> {
    let mut check = Check::new();
    let email = email_form(&mut check, &q.email);
    check.finish()?;
    let verified_at = person_by_email(&state.db.read, &state, &email).await?.and_then(|a| a.verified_at);
    Ok(ok(VerificationStatus { email, verified: verified_at.is_some(), verified_at }))
}

/// A request to reset a forgotten password.
#[derive(Deserialize, ToSchema)]
#[schema(as = PasswordResetRequest)]
struct ResetRequest {
    #[schema(format = "email")]
    email: String,
}

/// A password-reset request's answer: the same whether or not the email is known.
#[derive(Serialize, ToSchema)]
struct PasswordResetSent {
    /// `true`.
    sent: bool,
    /// When the token expires (15 minutes from now).
    expires_at: Timestamp,
    /// In development mode, for a known email only: the token itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    dev_token: Option<String>,
}

/// Issues a purpose-scoped password-reset token for an email (15 minutes,
/// single use), delivered by the mail sender.
///
/// The answer is the same whether or not the email is known, so it cannot
/// be used to probe for accounts; requests are limited per client address
/// and per account as verification emails are. In development mode a
/// known email's token is also returned as `dev_token`.
#[utoipa::path(post, path = "/api/auth/password-reset", tag = "sdk-identity", request_body = ResetRequest,
    extensions(("x-concurrency" = json!({"outcome": "capacity", "wins": 4, "losers": 429, "events": 0, "given": [["POST", "/api/auth/register", {"email": "m-{unique}@races.example.com", "password": "correct horse battery", "display_name": "Twin"}]], "body": {"email": "m-{unique}@races.example.com"}}))),
    responses((status = 200, description = "sent (or not, for an unknown email: the answer is the same)", body = Data<PasswordResetSent>), (status = 429, description = "RateLimited: too many password-reset emails for the address or the account (Retry-After)", body = ErrorBody), (status = 503, description = "Unavailable: no mail sender is configured", body = ErrorBody)))]
async fn request_password_reset(State(state): State<AppState>, ClientAddr(addr): ClientAddr, body: Body<ResetRequest>) -> ApiResult<Data<PasswordResetSent>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let email = email_form(&mut check, &body.email);
    check.finish()?;
    let mail = state.mailer()?;
    // Every request counts, known email or not, so the throttle's answers
    // tell nothing about which accounts exist.
    let keys = [throttle::Key::address("reset", addr, FREE_PER_ADDRESS), throttle::Key::account(&state, "reset", &email, RESET_FREE_PER_ACCOUNT)];
    throttle::take(&state, &keys).await?;
    let expires_at = Timestamp(chrono::Utc::now() + chrono::Duration::minutes(VERIFICATION_TTL_MINUTES));
    let mut data = PasswordResetSent { sent: true, expires_at, dev_token: None };
    if let Some(alias) = person_by_email(&state.db.read, &state, &email).await? {
        let token = crypto::random_base62(32);
        // Only the token's SHA-256 is stored; the purpose keeps it from
        // verifying an email, and a verification token from resetting.
        sqlx::query("INSERT INTO identity_verification (token_hash, alias_id, purpose, expires_at, created_at) VALUES ($1, $2, $3, $4, $5)")
            .bind(crypto::sha256_hex(token.as_bytes()))
            .bind(&alias.alias_id)
            .bind(PASSWORD_RESET)
            .bind(expires_at)
            .bind(db::now())
            .execute(state.db.writer())
            .await?;
        mail.send_password_reset(&email, &token, &expires_at.to_string());
        if state.config.dev {
            data.dev_token = Some(token);
        }
    }
    Ok(ok(data))
}

/// A password-reset token to redeem, with the new password.
#[derive(Deserialize, ToSchema)]
#[schema(as = PasswordResetConfirmation)]
struct ConfirmReset {
    /// The token a password-reset email carried (single use, 15 minutes).
    token: String,
    /// At least 8 characters besides leading and trailing blanks; used as
    /// sent (never trimmed).
    #[schema(min_length = 8)]
    new_password: String,
}

/// A password, set anew.
#[derive(Serialize, ToSchema)]
struct PasswordSet {
    /// `true`.
    changed: bool,
    /// When the password was set.
    updated_at: Timestamp,
}

const BAD_RESET_TOKEN: &str = "token is invalid, expired or already used";

/// Redeems a password-reset token: the person's password becomes `new_password`.
///
/// The token works once and for 15 minutes; redeeming it also spends the
/// person's other open reset tokens. Tokens already issued for the person
/// stay valid until they expire: tokens are not tracked by the hub.
#[utoipa::path(post, path = "/api/auth/password-reset/confirm", tag = "sdk-identity", request_body = ConfirmReset,
    extensions(("x-concurrency" = json!({"outcome": "one-wins", "losers": 400, "events": 0, "given": [["POST", "/api/auth/register", {"email": "m-{unique}@races.example.com", "password": "correct horse battery", "display_name": "Twin"}], ["POST", "/api/auth/password-reset", {"email": "m-{unique}@races.example.com"}]], "body": {"token": "{dev_token}", "new_password": "another horse battery"}}))),
    responses((status = 200, description = "the password, set", body = Data<PasswordSet>), (status = 503, description = "Busy: password hashing is at its bound (Retry-After)", body = ErrorBody)))]
async fn confirm_password_reset(State(state): State<AppState>, body: Body<ConfirmReset>) -> ApiResult<Data<PasswordSet>> {
    let body = body.checked()?;
    let token_hash = crypto::sha256_hex(body.token.trim().as_bytes());
    // The token is looked up by its SHA-256 (a 190-bit random token: the
    // lookup's timing tells nothing of it) and spent by the write that
    // checks it, before any hashing: of redemptions at once, one spends it
    // and the others find it used (400) without hashing. The new password
    // is hashed inside that transaction, so a refusal of the hashing queue
    // (503) rolls the spending back and the token can be tried again.
    let open = "token_hash = $2 AND purpose = $3 AND used_at IS NULL AND expires_at > $1";
    let mut tx = state.db.begin().await?;
    let now = Timestamp::now();
    let alias: Option<String> =
        sqlx::query_scalar(sqlx::AssertSqlSafe(format!("UPDATE identity_verification SET used_at = $1 WHERE {open} RETURNING alias_id")))
            .bind(now)
            .bind(&token_hash)
            .bind(PASSWORD_RESET)
            .fetch_optional(&mut *tx)
            .await?;
    let Some(alias_id) = alias else {
        return Err(ApiError::invalid(BAD_RESET_TOKEN));
    };
    let person: Option<String> = sqlx::query_scalar(
        "SELECT a.person_id FROM identity_alias a JOIN identity_person p ON p.person_id = a.person_id WHERE a.alias_id = $1 AND p.erased_at IS NULL",
    )
    .bind(&alias_id)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(person_id) = person else {
        return Err(ApiError::invalid(BAD_RESET_TOKEN));
    };
    let hash = password::hash(body.new_password).await?;
    let updated_at: Timestamp = sqlx::query_scalar(
        "INSERT INTO identity_credential (person_id, kind, secret_hash, created_at, updated_at) VALUES ($1, 'password', $2, $3, $3) \
         ON CONFLICT (person_id) DO UPDATE SET kind = 'password', secret_hash = excluded.secret_hash, updated_at = excluded.updated_at RETURNING updated_at",
    )
    .bind(&person_id)
    .bind(&hash)
    .bind(now)
    .fetch_one(&mut *tx)
    .await?;
    spend_reset_tokens(&mut tx, &person_id, now).await?;
    tx.commit().await?;
    Ok(ok(PasswordSet { changed: true, updated_at }))
}

/// Spends every open password-reset token of the person's aliases: once
/// the password is set, none of them may set it again.
async fn spend_reset_tokens(tx: &mut Tx, person_id: &str, now: Timestamp) -> ApiResult<()> {
    sqlx::query(
        "UPDATE identity_verification SET used_at = $1 WHERE purpose = $2 AND used_at IS NULL \
         AND alias_id IN (SELECT alias_id FROM identity_alias WHERE person_id = $3)",
    )
    .bind(now)
    .bind(PASSWORD_RESET)
    .bind(person_id)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// The caller: a person (by JWT) or a key (by API key or exchanged token).
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
enum CallerIdentity {
    Person(PersonCaller),
    Key(KeyCaller),
}

/// What kind of actor a caller is.
#[derive(Serialize, ToSchema)]
struct CallerActor {
    /// `human` for a person, `service` for a key.
    kind: String,
}

/// A person as their token names them.
#[derive(Serialize, ToSchema)]
struct PersonCaller {
    actor: CallerActor,
    person_id: String,
    email: Option<String>,
    display_name: Option<String>,
    /// Null for a person-level token (no tenant claims).
    tenant_id: Option<String>,
    /// The primary persona in the tenant; null for a person-level token.
    persona_id: Option<String>,
}

/// A key, by the key itself or a token exchanged for it.
#[derive(Serialize, ToSchema)]
struct KeyCaller {
    actor: CallerActor,
    key_id: String,
    application_id: String,
    /// The tenant the key acts in.
    tenant_id: String,
    /// The key's synthetic persona.
    persona_id: String,
    /// What the credential may do: the key's scopes, or an exchanged token's.
    scopes: Vec<String>,
    /// `live` or `test`.
    environment: String,
}

/// The caller as the gate sees it.
///
/// A cheap authenticated read that touches no table (used by clients to
/// check a credential, and by the benchmark).
#[utoipa::path(get, path = "/api/me", tag = "sdk-identity",
    responses((status = 200, description = "the caller: a person or a key", body = Data<CallerIdentity>)))]
async fn me(MaybeCaller(caller): MaybeCaller) -> ApiResult<Data<CallerIdentity>> {
    let data = match caller.ok_or(ApiError::Unauthorized("missing bearer token"))? {
        Caller::Human(claims) => CallerIdentity::Person(PersonCaller {
            actor: CallerActor { kind: claims.actor.kind.clone() },
            person_id: claims.sub.clone(),
            email: claims.email.clone(),
            display_name: claims.display_name.clone(),
            tenant_id: claims.tenant.as_ref().map(|t| t.tenant_id.clone()),
            persona_id: claims.tenant.as_ref().map(|t| t.primary_persona_id.clone()),
        }),
        Caller::Machine { key, scopes } => CallerIdentity::Key(KeyCaller {
            actor: CallerActor { kind: "service".into() },
            key_id: key.key_id.clone(),
            application_id: key.application_id.clone(),
            tenant_id: key.tenant_id.clone(),
            persona_id: key.synthetic_persona_id.clone(),
            scopes: scopes.to_vec(),
            environment: key.environment.clone(),
        }),
        Caller::Operator(_) => return Err(ApiError::Unauthorized("tenant routes do not take the operator credential")),
    };
    Ok(ok(data))
}

/// A change of the caller's own password.
#[derive(Deserialize, ToSchema)]
#[schema(as = PasswordChange)]
struct ChangePassword {
    /// The password in use now.
    current_password: String,
    /// At least 8 characters besides leading and trailing blanks; used as
    /// sent (never trimmed).
    #[schema(min_length = 8)]
    new_password: String,
}

/// Changes the calling person's password, given the current one.
///
/// A wrong current password is 400 and counts against the person (after
/// five, further attempts slow down: 429). Open password-reset tokens of the
/// person are spent. Tokens already issued stay valid until they expire.
#[utoipa::path(post, path = "/api/me/password", tag = "sdk-identity", request_body = ChangePassword,
    extensions(("x-concurrency" = json!({"outcome": "one-wins", "events": 0, "body": {"current_password": "correct horse battery", "new_password": "correct horse battery"}}))),
    responses((status = 200, description = "the password, changed", body = Data<PasswordSet>), (status = 503, description = "Busy: password hashing is at its bound (Retry-After)", body = ErrorBody)))]
async fn change_password(State(state): State<AppState>, Person(claims): Person, body: Body<ChangePassword>) -> ApiResult<Data<PasswordSet>> {
    let body = body.checked()?;
    let person_id = claims.sub.as_str();
    let keys = [throttle::Key::account(&state, "password", person_id, CHANGE_FREE_PER_ACCOUNT)];
    let failed_before = throttle::check(&state, &keys).await?;
    let stored: Option<String> = sqlx::query_scalar(
        "SELECT c.secret_hash FROM identity_credential c JOIN identity_person p ON p.person_id = c.person_id WHERE c.person_id = $1 AND p.erased_at IS NULL",
    )
    .bind(person_id)
    .fetch_optional(&state.db.read)
    .await?;
    let valid = password::verify(password::Lane::Shared, body.current_password, stored.clone()).await?;
    let (true, Some(stored)) = (valid, stored) else {
        throttle::fail(&state, &keys).await?;
        return Err(ApiError::invalid("current_password is not the person's password"));
    };
    if failed_before {
        throttle::clear(&state, &keys[0]).await?;
    }
    let mut tx = state.db.begin().await?;
    let now = Timestamp::now();
    // The credential is claimed, still holding the hash the current password
    // was checked against, before the new one is hashed: of changes at
    // once, one claims it and the others find it changed (409) without
    // hashing; a refusal of the hashing queue (503) rolls the claim back.
    let claimed: Option<String> =
        sqlx::query_scalar("UPDATE identity_credential SET updated_at = $1 WHERE person_id = $2 AND secret_hash = $3 RETURNING person_id")
            .bind(now)
            .bind(person_id)
            .bind(&stored)
            .fetch_optional(&mut *tx)
            .await?;
    claimed.ok_or_else(|| ApiError::Conflict("the password was changed meanwhile: give the current one again".into()))?;
    let hash = password::hash(body.new_password).await?;
    let updated_at: Timestamp = sqlx::query_scalar("UPDATE identity_credential SET secret_hash = $1 WHERE person_id = $2 RETURNING updated_at")
        .bind(&hash)
        .bind(person_id)
        .fetch_one(&mut *tx)
        .await?;
    spend_reset_tokens(&mut tx, person_id, now).await?;
    tx.commit().await?;
    Ok(ok(PasswordSet { changed: true, updated_at }))
}

/// A change of the caller's own person attributes.
#[derive(Deserialize, ToSchema)]
#[schema(as = PersonUpdate)]
struct UpdateMe {
    /// The name tokens carry from the next login on (1 to 200 characters,
    /// trimmed).
    #[schema(min_length = 1, max_length = 200)]
    display_name: Option<String>,
}

/// The calling person's attributes, as sealed on the person row.
#[derive(Serialize, ToSchema)]
struct PersonAttributes {
    person_id: String,
    email: Option<String>,
    display_name: Option<String>,
}

/// Changes the calling person's display name (sealed under the person's
/// data key; tokens carry it from the next login on).
///
/// Only a person's token: keys are refused (403). The tenants' profile
/// bands are theirs to write (`PUT /api/profiles/...`).
#[utoipa::path(patch, path = "/api/me", tag = "sdk-identity", request_body = UpdateMe,
    extensions(("x-concurrency" = json!({"outcome": "independent", "events": 0, "body": {"display_name": "Ada Admin"}}))),
    responses((status = 200, description = "the person", body = Data<PersonAttributes>)))]
async fn update_me(State(state): State<AppState>, Person(claims): Person, body: Body<UpdateMe>) -> ApiResult<Data<PersonAttributes>> {
    let body = body.checked()?;
    let person_id = claims.sub.as_str();
    let Some(display_name) = Check::optional(&body.display_name) else {
        return Err(ApiError::invalid("give at least one of: display_name"));
    };
    let mut tx = state.db.begin().await?;
    let key = person_key(&mut tx, &state.master, person_id).await?.ok_or_else(|| ApiError::Conflict("the person has been erased".into()))?;
    // The envelope holds the display name alone: it is replaced whole, in one statement.
    let profile = key.seal(json!({ "display_name": display_name }).to_string().as_bytes(), person_id.as_bytes());
    let done = sqlx::query("UPDATE identity_person SET profile_envelope = $1 WHERE person_id = $2 AND erased_at IS NULL")
        .bind(profile)
        .bind(person_id)
        .execute(&mut *tx)
        .await?;
    if done.rows_affected() == 0 {
        return Err(ApiError::Conflict("the person has been erased".into()));
    }
    tx.commit().await?;
    let (email, display_name) = person_attributes(&state, person_id).await?;
    Ok(ok(PersonAttributes { person_id: person_id.to_string(), email, display_name }))
}

/// A JSON Web Key Set (RFC 7517), not in the `data` envelope.
// Read from what the kernel's `KeySet::jwks` writes, so that what is sent
// is this type.
#[derive(Serialize, Deserialize, ToSchema)]
struct JwkSet {
    /// The current signing key first, then those still in their grace window.
    keys: Vec<Jwk>,
}

/// A public ES256 signing key.
#[derive(Serialize, Deserialize, ToSchema)]
struct Jwk {
    /// `EC`.
    kty: String,
    /// `P-256`.
    crv: String,
    /// base64url.
    x: String,
    /// base64url.
    y: String,
    /// The key's fingerprint (SHA-256 of its public key, hex), as in a token's header.
    kid: String,
    /// `ES256`.
    alg: String,
    /// `sig`.
    #[serde(rename = "use")]
    use_: String,
}

/// The public signing keys (RFC 7517), current and in grace.
#[utoipa::path(get, path = "/.well-known/jwks.json", tag = "sdk-identity",
    responses((status = 200, description = "the key set", body = JwkSet, headers(("Cache-Control" = String, description = "`public, max-age=300`")))))]
async fn jwks(State(state): State<AppState>) -> Response {
    let set: JwkSet = match serde_json::from_value(state.keys().jwks()) {
        Ok(set) => set,
        Err(e) => return ApiError::Internal(anyhow::Error::from(e)).into_response(),
    };
    let mut res = Json(set).into_response();
    res.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=300"));
    res
}
