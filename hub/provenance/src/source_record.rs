//! sdk-source-record: claims about a subject, as a source stated them
//! (`attribute` = `value`, from `source`). A claim is never changed or
//! deleted: a new statement supersedes it, the successor inserted and the
//! claim stamped `SUPERSEDED` (with `superseded_by`, `superseded_at`) in
//! one transaction. Triggers on the table refuse any other update and
//! every delete, whoever attempts them.

use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(assert_claim, list_claims)).routes(routes!(get_claim)).routes(routes!(supersede))
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = SourceClaim)]
struct Claim {
    claim_id: Id,
    subject_id: String,
    attribute: String,
    /// Any JSON value, as asserted.
    #[sqlx(try_from = "String")]
    value: JsonText,
    source: String,
    source_ref: Option<String>,
    status: ClaimStatus,
    /// The claim this one replaced.
    supersedes: Option<Id>,
    superseded_by: Option<Id>,
    superseded_at: Option<Timestamp>,
    observed_at: Timestamp,
    recorded_by: String,
    recorded_at: Timestamp,
}

stored_enum! {
    /// Whether a claim stands: `ACTIVE` until a successor supersedes it.
    #[schema(as = SourceClaimStatus)]
    enum ClaimStatus { Active = "ACTIVE", Superseded = "SUPERSEDED" }
}

/// A time `Check` normalised, as the instant it names.
fn checked_time(text: &str) -> ApiResult<Timestamp> {
    text.parse().map_err(ApiError::invalid)
}

const COLUMNS: &str =
    "claim_id, subject_id, attribute, value, source, source_ref, status, supersedes, superseded_by, superseded_at, observed_at, recorded_by, recorded_at";

/// A claim's value (present and not null: the schema says so): at most
/// 64 KiB of JSON.
fn bounded_value(check: &mut Check, value: &Value) {
    if value.to_string().len() > 64 * 1024 {
        check.fail("value must be at most 64 KiB of JSON");
    }
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewSourceClaim)]
struct NewClaim {
    /// Whom the claim is about.
    #[schema(max_length = 128)]
    subject_id: String,
    /// What it states: `email`, `address`, ...
    #[schema(max_length = 128)]
    attribute: String,
    /// The stated value: any JSON but null, at most 64 KiB.
    #[schema(value_type = Value)]
    value: Value,
    /// Who stated it: a system, a form, a person.
    #[schema(max_length = 128)]
    source: String,
    /// Where in the source.
    #[schema(max_length = 256)]
    source_ref: Option<String>,
    /// When the source stated it (not more than 5 minutes ahead); now when
    /// absent.
    #[schema(format = DateTime)]
    observed_at: Option<String>,
}

async fn insert(tx: &mut Tx, ctx: &TenantCtx, c: &Claim) -> ApiResult<Claim> {
    let sql =
        format!("INSERT INTO source_claim (tenant_id, {COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) RETURNING {COLUMNS}");
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&ctx.tenant_id)
        .bind(c.claim_id)
        .bind(&c.subject_id)
        .bind(&c.attribute)
        .bind(c.value.0.to_string())
        .bind(&c.source)
        .bind(&c.source_ref)
        .bind(c.status)
        .bind(c.supersedes)
        .bind(c.superseded_by)
        .bind(c.superseded_at)
        .bind(c.observed_at)
        .bind(&c.recorded_by)
        .bind(c.recorded_at)
        .fetch_one(&mut **tx)
        .await?)
}

/// Records a claim a source made.
#[utoipa::path(post, path = "/api/source-records/claims", tag = "sdk-source-record", request_body = NewClaim,
    extensions(("x-concurrency" = json!({"outcome": "independent", "body": {"subject_id": "s-{unique}", "attribute": "colour", "value": {"name": "red"}, "source": "race"}}))),
    responses((status = 201, description = "the claim, active", body = Data<Claim>)))]
async fn assert_claim(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewClaim>) -> ApiResult<Created<Claim>> {
    let body = body.checked()?;
    let mut check = Check::new();
    bounded_value(&mut check, &body.value);
    let observed = check.time_or_now("observed_at", &body.observed_at);
    check.finish()?;
    let claim = Claim {
        claim_id: Id::new(),
        subject_id: body.subject_id.trim().to_string(),
        attribute: body.attribute.trim().to_string(),
        value: JsonText(body.value),
        source: body.source.trim().to_string(),
        source_ref: Check::optional(&body.source_ref),
        status: ClaimStatus::Active,
        supersedes: None,
        superseded_by: None,
        superseded_at: None,
        observed_at: checked_time(&observed)?,
        recorded_by: audit::actor_of(&ctx).1.to_string(),
        recorded_at: Timestamp::now(),
    };
    let mut tx = state.db.begin().await?;
    let claim = insert(&mut tx, &ctx, &claim).await?;
    let payload = json!({ "claim_id": claim.claim_id, "subject_id": claim.subject_id, "attribute": claim.attribute, "source": claim.source });
    audit::record(&mut tx, &ctx, events::SOURCE_CLAIM_ASSERTED, payload).await?;
    tx.commit().await?;
    Ok(created(claim))
}

async fn find(exec: &mut Tx, tenant_id: &str, id: &str) -> ApiResult<Claim> {
    let id = path_id(id)?.to_string();
    let sql = format!("SELECT {COLUMNS} FROM source_claim WHERE tenant_id = $1 AND claim_id = $2");
    let found: Option<Claim> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(&id).fetch_optional(&mut **exec).await?;
    found.ok_or(ApiError::NotFound)
}

/// The filters of the claim list (exact matches).
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ClaimFilter {
    /// Only the claims about this subject.
    #[param(max_length = 128)]
    subject_id: Option<String>,
    /// Only the claims of this attribute.
    #[param(max_length = 128)]
    attribute: Option<String>,
    /// Only the claims in this status.
    #[param(inline)]
    status: Option<ClaimStatus>,
    /// Only the claims this source stated.
    #[param(max_length = 128)]
    source: Option<String>,
}

/// The tenant's claims, most recently recorded first.
const CLAIMS: Listing = Listing {
    table: "source_claim",
    columns: COLUMNS,
    filter: "tenant_id = $1 AND ($2 = '' OR subject_id = $2) AND ($3 = '' OR attribute = $3) AND ($4 = '' OR status = $4) AND ($5 = '' OR source = $5)",
    order: "recorded_at DESC, claim_id DESC",
};

/// The tenant's claims, active and superseded, most recently recorded
/// first (`status=ACTIVE` and a subject: what is believed of it now).
#[utoipa::path(get, path = "/api/source-records/claims", tag = "sdk-source-record", params(ClaimFilter, Page),
    responses((status = 200, description = "one page of claims", body = ListOf<Claim>)))]
async fn list_claims(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page, Params(q): Params<ClaimFilter>) -> ApiResult<ListOf<Claim>> {
    let text = |v: &Option<String>| v.as_deref().map(str::trim).unwrap_or_default().to_string();
    let status = q.status.map(ClaimStatus::as_str).unwrap_or_default();
    page.list::<Claim>(&state.db.read, &CLAIMS, &[&ctx.tenant_id, &text(&q.subject_id), &text(&q.attribute), status, &text(&q.source)]).await
}

/// A claim, active or superseded.
#[utoipa::path(get, path = "/api/source-records/claims/{claim_id}", tag = "sdk-source-record", params(("claim_id" = String, Path, description = "the claim")),
    responses((status = 200, description = "the claim", body = Data<Claim>)))]
async fn get_claim(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Claim>> {
    let mut tx = state.db.read.begin().await?;
    let claim = find(&mut tx, &ctx.tenant_id, &id).await?;
    tx.commit().await?;
    Ok(ok(claim))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = SourceClaimSuccessor)]
struct Successor {
    /// The value that replaces the claim's: any JSON but null, at most 64 KiB.
    #[schema(value_type = Value)]
    value: Value,
    /// The claim's source when absent.
    #[schema(max_length = 128)]
    source: Option<String>,
    #[schema(max_length = 256)]
    source_ref: Option<String>,
    /// When the source stated it (not more than 5 minutes ahead); now when
    /// absent.
    #[schema(format = DateTime)]
    observed_at: Option<String>,
}

#[derive(Serialize, ToSchema)]
#[schema(as = SourceClaimSuperseded)]
struct Superseded {
    superseded: Claim,
    successor: Claim,
}

/// A claim as supersedes lock it.
const CLAIM: Stateful = Stateful { noun: "claim", table: "source_claim", key: "claim_id", state: "status" };

/// Replaces an active claim: its successor is inserted and the claim
/// stamped `SUPERSEDED`, in one transaction (a claim already superseded
/// is 409).
#[utoipa::path(post, path = "/api/source-records/claims/{claim_id}/supersede", tag = "sdk-source-record", request_body = Successor,
    params(("claim_id" = String, Path, description = "the active claim")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins",
        "given": [["POST", "/api/source-records/claims", { "subject_id": "s-{unique}", "attribute": "colour", "value": { "name": "red" }, "source": "race" }]],
        "body": { "value": { "name": "blue" } } }))),
    responses((status = 201, description = "the superseded claim and its successor", body = Data<Superseded>)))]
async fn supersede(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<Successor>) -> ApiResult<Created<Superseded>> {
    let mut tx = state.db.begin().await?;
    // The prior claim's row is locked until its successor is committed:
    // supersedes of one claim check its status one after another, so of
    // two at once one supersedes it and the other finds it superseded.
    CLAIM.lock::<String>(&mut tx, &ctx.tenant_id, &id).await?;
    let prior = find(&mut tx, &ctx.tenant_id, &id).await?;
    let body = body.checked()?;
    let mut check = Check::new();
    bounded_value(&mut check, &body.value);
    let source = Check::optional(&body.source).unwrap_or_else(|| prior.source.clone());
    let source_ref = Check::optional(&body.source_ref);
    let observed = check.time_or_now("observed_at", &body.observed_at);
    check.finish()?;
    if prior.status != ClaimStatus::Active {
        let by = prior.superseded_by.map(|b| b.to_string()).unwrap_or_default();
        return Err(ApiError::Conflict(format!("the claim was superseded by {by}")));
    }
    let now = Timestamp::now();
    let successor = Claim {
        claim_id: Id::new(),
        subject_id: prior.subject_id.clone(),
        attribute: prior.attribute.clone(),
        value: JsonText(body.value),
        source,
        source_ref,
        status: ClaimStatus::Active,
        supersedes: Some(prior.claim_id),
        superseded_by: None,
        superseded_at: None,
        observed_at: checked_time(&observed)?,
        recorded_by: audit::actor_of(&ctx).1.to_string(),
        recorded_at: now,
    };
    let successor = insert(&mut tx, &ctx, &successor).await?;
    let sql = format!(
        "UPDATE source_claim SET status = 'SUPERSEDED', superseded_by = $2, superseded_at = $3 WHERE claim_id = $1 AND status = 'ACTIVE' RETURNING {COLUMNS}"
    );
    let stamped: Option<Claim> =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(prior.claim_id).bind(successor.claim_id).bind(now).fetch_optional(&mut *tx).await?;
    let stamped = stamped.ok_or_else(|| ApiError::Conflict("the claim was superseded meanwhile".into()))?;
    let payload =
        json!({ "claim_id": stamped.claim_id, "superseded_by": successor.claim_id, "subject_id": stamped.subject_id, "attribute": stamped.attribute });
    audit::record(&mut tx, &ctx, events::SOURCE_CLAIM_SUPERSEDED, payload).await?;
    tx.commit().await?;
    Ok(created(Superseded { superseded: stamped, successor }))
}
