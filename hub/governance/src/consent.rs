//! sdk-consent: the tenant's catalogue of consent purposes (with their
//! legal basis and default jurisdictions), and each subject's grants and
//! withdrawals as an append-only history: nothing is updated or deleted,
//! the latest record for a purpose decides. A retired purpose takes no new
//! grant; its records stay and withdrawals are still recorded.

use hub_kernel::prelude::*;
use serde_json::Map;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_purpose, list_purposes))
        .routes(routes!(get_purpose))
        .routes(routes!(retire_purpose))
        .routes(routes!(record, history))
}

/// The catalogue answers at most this many purposes (the document's cap).
const PURPOSE_CAP: i64 = 200;

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = ConsentPurpose)]
struct Purpose {
    purpose_id: String,
    app_id: String,
    description: String,
    legal_basis: LegalBasis,
    /// ISO 3166-1 alpha-2 codes.
    #[sqlx(try_from = "String")]
    #[schema(value_type = Vec<String>)]
    default_jurisdictions: JsonText,
    /// `active` while offered; `retired`: no new grant, its records stay.
    status: PurposeStatus,
    retired_at: Option<Timestamp>,
    created_at: Timestamp,
}

const PURPOSE_COLUMNS: &str = "purpose_id, app_id, description, legal_basis, default_jurisdictions, status, retired_at, created_at";

stored_enum! {
    /// Whether a purpose is offered.
    #[schema(as = ConsentPurposeStatus)]
    enum PurposeStatus { Active = "active", Retired = "retired" }
}

fn valid_id(s: &str) -> bool {
    (1..=128).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-'))
}

fn jurisdiction(s: &str) -> bool {
    s.len() == 2 && s.bytes().all(|b| b.is_ascii_uppercase())
}

stored_enum! {
    /// A purpose's legal basis (GDPR Art. 6).
    #[schema(as = ConsentLegalBasis)]
    enum LegalBasis {
        Consent = "consent",
        Contract = "contract",
        LegalObligation = "legal_obligation",
        VitalInterests = "vital_interests",
        PublicTask = "public_task",
        LegitimateInterests = "legitimate_interests",
    }
}

stored_enum! {
    /// A subject's decision on a purpose.
    #[schema(as = ConsentAction)]
    enum Action { Granted = "granted", Withdrawn = "withdrawn" }
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewConsentPurpose)]
struct NewPurpose {
    /// 1 to 128 of `a-z 0-9 . _ -`, unique in the tenant.
    #[schema(max_length = 128)]
    purpose_id: String,
    /// What the subject agrees to.
    #[schema(max_length = 2000)]
    description: String,
    legal_basis: LegalBasis,
    /// ISO 3166-1 alpha-2 codes; none when absent.
    #[schema(max_items = 50)]
    default_jurisdictions: Option<Vec<String>>,
    /// The application it belongs to; the caller's when absent.
    #[schema(max_length = 128)]
    app_id: Option<String>,
}

/// Adds a purpose to the tenant's catalogue.
#[utoipa::path(post, path = "/api/consent/purposes", tag = "sdk-consent", request_body = NewPurpose,
    extensions(("x-concurrency" = json!({"outcome": "one-wins", "body": {"purpose_id": "p-{unique}", "description": "races", "legal_basis": "consent"}}))),
    responses((status = 201, description = "the purpose", body = Data<Purpose>)))]
async fn create_purpose(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewPurpose>) -> ApiResult<Created<Purpose>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let id = body.purpose_id.trim().to_string();
    if !valid_id(&id) {
        check.fail("purpose_id must be 1 to 128 of a-z, 0-9, '.', '_' or '-'");
    }
    let description = body.description.trim();
    let basis = body.legal_basis;
    let jurisdictions = body.default_jurisdictions.unwrap_or_default();
    if !jurisdictions.iter().all(|j| jurisdiction(j)) {
        check.fail("default_jurisdictions must be an array of at most 50 ISO 3166-1 alpha-2 codes (NL, DE, ...)");
    }
    let app_id = Check::optional(&body.app_id).unwrap_or_else(|| ctx.app_id.clone());
    check.finish()?;
    let mut tx = state.db.begin().await?;
    let sql = format!(
        "INSERT INTO consent_purpose (tenant_id, purpose_id, app_id, description, legal_basis, default_jurisdictions, created_by, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (tenant_id, purpose_id) DO NOTHING RETURNING {PURPOSE_COLUMNS}"
    );
    let made: Option<Purpose> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&ctx.tenant_id)
        .bind(&id)
        .bind(&app_id)
        .bind(description)
        .bind(basis)
        .bind(json!(jurisdictions).to_string())
        .bind(audit::actor_of(&ctx).1)
        .bind(db::now())
        .fetch_optional(&mut *tx)
        .await?;
    let made = made.ok_or_else(|| ApiError::Conflict(format!("the purpose {id} exists")))?;
    audit::record(&mut tx, &ctx, events::CONSENT_PURPOSE_CREATED, json!({ "purpose_id": id, "legal_basis": basis })).await?;
    tx.commit().await?;
    Ok(created(made))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct CatalogueQuery {
    /// The caller's tenant.
    #[param(format = "uuid")]
    tenant_id: String,
}

/// The tenant's purposes by purpose_id, at most 200 (`total` counts all).
#[utoipa::path(get, path = "/api/consent/purposes", tag = "sdk-consent", params(CatalogueQuery),
    responses((status = 200, description = "the catalogue", body = ListOf<Purpose>)))]
async fn list_purposes(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<CatalogueQuery>) -> ApiResult<ListOf<Purpose>> {
    ctx.check_tenant(Some(&q.tenant_id))?;
    let listing = Listing { table: "consent_purpose", columns: PURPOSE_COLUMNS, filter: "tenant_id = $1", order: "purpose_id" };
    Page::<PURPOSE_CAP, PURPOSE_CAP> { limit: PURPOSE_CAP, offset: 0 }.list::<Purpose>(&state.db.read, &listing, &[&ctx.tenant_id]).await
}

/// One purpose of the tenant's catalogue.
#[utoipa::path(get, path = "/api/consent/purposes/{purpose_id}", tag = "sdk-consent", params(("purpose_id" = String, Path, description = "the purpose")),
    responses((status = 200, description = "the purpose", body = Data<Purpose>)))]
async fn get_purpose(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Purpose>> {
    if !valid_id(&id) {
        return Err(ApiError::NotFound);
    }
    let sql = format!("SELECT {PURPOSE_COLUMNS} FROM consent_purpose WHERE tenant_id = $1 AND purpose_id = $2");
    let found: Option<Purpose> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&state.db.read).await?;
    Ok(ok(found.ok_or(ApiError::NotFound)?))
}

/// Retires a purpose: it is no longer offered and takes no new grant; its
/// records stay, withdrawals are still recorded, and a subject's standing
/// is read as before. Retiring a retired purpose answers it as it is and
/// records no event.
#[utoipa::path(post, path = "/api/consent/purposes/{purpose_id}/retire", tag = "sdk-consent", params(("purpose_id" = String, Path, description = "the purpose")),
    extensions(("x-concurrency" = json!({ "outcome": "same-answer", "given": [["POST", "/api/consent/purposes", { "purpose_id": "p-{unique}", "description": "races", "legal_basis": "consent" }]] }))),
    responses((status = 200, description = "the purpose, retired", body = Data<Purpose>)))]
async fn retire_purpose(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Purpose>> {
    if !valid_id(&id) {
        return Err(ApiError::NotFound);
    }
    let mut tx = state.db.begin().await?;
    // Guarded by the status: of two retirements at once one moves the
    // purpose (and records the event), the other finds it retired.
    let sql = format!(
        "UPDATE consent_purpose SET status = 'retired', retired_at = $3 WHERE tenant_id = $1 AND purpose_id = $2 AND status = 'active' RETURNING {PURPOSE_COLUMNS}"
    );
    let moved: Option<Purpose> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).bind(db::now()).fetch_optional(&mut *tx).await?;
    let purpose = match moved {
        Some(p) => {
            audit::record(&mut tx, &ctx, events::CONSENT_PURPOSE_RETIRED, json!({ "purpose_id": id })).await?;
            p
        }
        None => {
            let sql = format!("SELECT {PURPOSE_COLUMNS} FROM consent_purpose WHERE tenant_id = $1 AND purpose_id = $2");
            let found: Option<Purpose> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&mut *tx).await?;
            found.ok_or(ApiError::NotFound)?
        }
    };
    tx.commit().await?;
    Ok(ok(purpose))
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = ConsentRecord)]
struct Record {
    record_id: Id,
    subject: String,
    purpose_id: String,
    action: Action,
    jurisdiction: Option<String>,
    /// How the decision was captured (form, version, channel, ...).
    #[sqlx(try_from = "String")]
    #[schema(value_type = Object)]
    evidence: JsonText,
    recorded_by: String,
    recorded_at: Timestamp,
}

const RECORD_COLUMNS: &str = "record_id, subject, purpose_id, action, jurisdiction, evidence, recorded_by, recorded_at";

#[derive(Deserialize, ToSchema)]
#[schema(as = NewConsentRecord)]
struct NewRecord {
    /// Whose consent: an identifier of the tenant's choosing.
    #[schema(max_length = 256)]
    subject: String,
    /// A purpose of the tenant's catalogue.
    purpose_id: String,
    /// `granted` when absent.
    action: Option<Action>,
    /// ISO 3166-1 alpha-2.
    jurisdiction: Option<String>,
    /// How the decision was captured (form, version, channel, ...); `{}`
    /// when absent.
    #[schema(value_type = Option<Object>)]
    evidence: Option<Map<String, Value>>,
}

/// Records a subject's grant or withdrawal for a purpose (appended to the
/// history; the latest decides).
#[utoipa::path(post, path = "/api/consent/grants", tag = "sdk-consent", request_body = NewRecord,
    extensions(("x-concurrency" = json!({"outcome": "independent", "given": [["POST", "/api/consent/purposes", {"purpose_id": "p-{unique}", "description": "races", "legal_basis": "consent"}]], "body": {"subject": "s-{unique}", "purpose_id": "{purpose_id}"}}))),
    responses((status = 201, description = "the record", body = Data<Record>)))]
async fn record(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewRecord>) -> ApiResult<Created<Record>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let subject = body.subject.trim();
    let purpose = body.purpose_id.trim();
    let action = body.action.unwrap_or(Action::Granted);
    let jurisdiction_code = Check::optional(&body.jurisdiction);
    if jurisdiction_code.as_deref().is_some_and(|j| !jurisdiction(j)) {
        check.fail("jurisdiction must be an ISO 3166-1 alpha-2 code (NL, DE, ...)");
    }
    let evidence = Value::Object(body.evidence.unwrap_or_default());
    check.finish()?;
    let mut tx = state.db.begin().await?;
    // One statement: a grant is appended only while the purpose is
    // offered; a withdrawal always is.
    let sql = format!(
        "INSERT INTO consent_record (record_id, tenant_id, subject, purpose_id, action, jurisdiction, evidence, recorded_by, recorded_at) \
         SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9 FROM consent_purpose WHERE tenant_id = $2 AND purpose_id = $4 AND (status = 'active' OR $5 = 'withdrawn') \
         RETURNING {RECORD_COLUMNS}"
    );
    let row: Option<Record> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(subject)
        .bind(purpose)
        .bind(action)
        .bind(&jurisdiction_code)
        .bind(evidence.to_string())
        .bind(audit::actor_of(&ctx).1)
        .bind(db::now())
        .fetch_optional(&mut *tx)
        .await?;
    let Some(row) = row else {
        let status: Option<String> = sqlx::query_scalar("SELECT status FROM consent_purpose WHERE tenant_id = $1 AND purpose_id = $2")
            .bind(&ctx.tenant_id)
            .bind(purpose)
            .fetch_optional(&mut *tx)
            .await?;
        return Err(match status {
            None => ApiError::invalid("purpose_id is not a purpose of this tenant's catalogue"),
            Some(_) => ApiError::Conflict(format!("the purpose {purpose} is retired: it takes withdrawals, no new grant")),
        });
    };
    let event = if action == Action::Granted { events::CONSENT_GRANTED } else { events::CONSENT_WITHDRAWN };
    audit::record(&mut tx, &ctx, event, json!({ "record_id": row.record_id, "subject": subject, "purpose_id": purpose })).await?;
    tx.commit().await?;
    Ok(created(row))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct HistoryQuery {
    /// Whose history.
    subject: String,
    /// Only this purpose's records.
    purpose_id: Option<String>,
}

/// A subject's grants and withdrawals, newest first.
#[utoipa::path(get, path = "/api/consent/grants", tag = "sdk-consent", params(HistoryQuery, Page),
    responses((status = 200, description = "one page of the history", body = ListOf<Record>)))]
async fn history(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<HistoryQuery>, page: Page) -> ApiResult<ListOf<Record>> {
    let subject = q.subject.trim();
    let purpose = Check::optional(&q.purpose_id).unwrap_or_default();
    let listing = Listing {
        table: "consent_record",
        columns: RECORD_COLUMNS,
        filter: "tenant_id = $1 AND subject = $2 AND ($3 = '' OR purpose_id = $3)",
        order: "recorded_at DESC, record_id DESC",
    };
    page.list::<Record>(&state.db.read, &listing, &[&ctx.tenant_id, subject, &purpose]).await
}

/// What decides whether a subject may be written to for a purpose: the
/// purpose's legal basis and the subject's latest decision on it.
pub struct Standing {
    /// One of the GDPR Art. 6 bases (`consent`, `contract`, ...).
    pub legal_basis: String,
    /// The latest record's action (`granted` or `withdrawn`) and time;
    /// `None` when the subject has none for the purpose.
    pub latest: Option<(String, String)>,
}

/// The standing of `subject` for `purpose_id` in the tenant's catalogue;
/// `None` when the catalogue has no such purpose. For other areas (the
/// conversation compose check), which never read the consent tables.
pub async fn standing(pool: &sqlx::AnyPool, tenant_id: &str, subject: &str, purpose_id: &str) -> ApiResult<Option<Standing>> {
    let basis: Option<String> = sqlx::query_scalar("SELECT legal_basis FROM consent_purpose WHERE tenant_id = $1 AND purpose_id = $2")
        .bind(tenant_id)
        .bind(purpose_id)
        .fetch_optional(pool)
        .await?;
    let Some(legal_basis) = basis else { return Ok(None) };
    let latest: Option<(String, String)> = sqlx::query_as(
        "SELECT action, recorded_at FROM consent_record WHERE tenant_id = $1 AND subject = $2 AND purpose_id = $3 \
         ORDER BY recorded_at DESC, record_id DESC LIMIT 1",
    )
    .bind(tenant_id)
    .bind(subject)
    .bind(purpose_id)
    .fetch_optional(pool)
    .await?;
    Ok(Some(Standing { legal_basis, latest }))
}
