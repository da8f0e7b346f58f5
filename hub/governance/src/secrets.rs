//! sdk-secrets: references to secrets that live in a KMS or secret
//! manager. A reference records where the secret is (`kms_key_id`), who
//! may use it (`scope`) and its rotation (version, period, last and next
//! rotation); the secret itself never reaches the hub. Every lookup is
//! audited; the list shows rotations, not where secrets live.

use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(create, list)).routes(routes!(get_reference, delete_reference, update_reference)).routes(routes!(rotate))
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = SecretReference)]
struct Reference {
    r#ref: String,
    scope: Scope,
    kms_key_id: String,
    /// 1 at creation, one more each rotation.
    version: i64,
    rotation_period_days: Option<i64>,
    last_rotated_at: Timestamp,
    /// `last_rotated_at` plus the period; null without a period.
    #[sqlx(skip)]
    next_rotation_at: Option<Timestamp>,
    /// Whether `next_rotation_at` has passed.
    #[sqlx(skip)]
    rotation_due: bool,
    created_at: Timestamp,
    updated_at: Timestamp,
}

const COLUMNS: &str = "ref, scope, kms_key_id, version, rotation_period_days, last_rotated_at, created_at, updated_at";

impl Reference {
    /// Writes the reference's `next_rotation_at` (what the list's
    /// `rotation_due` filter reads) from what the write before it in this
    /// transaction left (the row is the transaction's until it commits),
    /// and answers it with its schedule.
    async fn scheduled(self, tx: &mut Tx, tenant_id: &str) -> ApiResult<Self> {
        let r = self.with_schedule();
        sqlx::query("UPDATE secrets_reference SET next_rotation_at = $3 WHERE tenant_id = $1 AND ref = $2")
            .bind(tenant_id)
            .bind(&r.r#ref)
            .bind(r.next_rotation_at)
            .execute(&mut **tx)
            .await?;
        Ok(r)
    }

    fn with_schedule(mut self) -> Self {
        let next = self.rotation_period_days.and_then(|days| self.last_rotated_at.plus_seconds(days.saturating_mul(86_400)));
        self.rotation_due = next.is_some_and(|n| n <= Timestamp::now());
        self.next_rotation_at = next;
        self
    }
}

fn valid_ref(r: &str) -> bool {
    (1..=256).contains(&r.len()) && r.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'/' | b':'))
}

stored_enum! {
    /// Who may use a secret.
    #[schema(as = SecretScope)]
    enum Scope { Tenant = "tenant", App = "app", Service = "service", AppUser = "app_user" }
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewSecretReference)]
struct NewReference {
    /// 1 to 256 of letters, digits, `.`, `_`, `-`, `/`, `:`; unique in the
    /// tenant.
    #[schema(max_length = 256)]
    r#ref: String,
    /// `tenant` when absent.
    scope: Option<Scope>,
    /// The KMS key (or secret manager path) holding the secret.
    #[schema(max_length = 512)]
    kms_key_id: String,
    /// Rotate every this many days; none when absent.
    #[schema(minimum = 1, maximum = 3650)]
    rotation_period_days: Option<i64>,
    /// When the secret was last rotated (not in the future); now when absent.
    #[schema(format = DateTime)]
    last_rotated_at: Option<String>,
}

/// Registers a secret reference.
#[utoipa::path(post, path = "/api/secrets/refs", tag = "sdk-secrets", request_body = NewReference,
    extensions(("x-concurrency" = json!({"outcome": "one-wins", "body": {"ref": "r-{unique}", "kms_key_id": "kms/races"}}))),
    responses((status = 201, description = "the reference", body = Data<Reference>)))]
async fn create(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewReference>) -> ApiResult<Created<Reference>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let reference = body.r#ref.trim();
    if !valid_ref(reference) {
        check.fail("ref must be 1 to 256 of letters, digits, '.', '_', '-', '/' or ':'");
    }
    let scope = body.scope.unwrap_or(Scope::Tenant);
    let kms = body.kms_key_id.trim();
    let period = body.rotation_period_days;
    let last = check.time_or_now("last_rotated_at", &body.last_rotated_at);
    check.finish()?;
    let now = db::now();
    let mut tx = state.db.begin().await?;
    let sql = format!(
        "INSERT INTO secrets_reference (tenant_id, ref, scope, kms_key_id, version, rotation_period_days, last_rotated_at, created_by, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, 1, $5, $6, $7, $8, $8) ON CONFLICT (tenant_id, ref) DO NOTHING RETURNING {COLUMNS}"
    );
    let made: Option<Reference> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&ctx.tenant_id)
        .bind(reference)
        .bind(scope)
        .bind(kms)
        .bind(period)
        .bind(&last)
        .bind(audit::actor_of(&ctx).1)
        .bind(&now)
        .fetch_optional(&mut *tx)
        .await?;
    let made =
        made.ok_or_else(|| ApiError::Conflict(format!("the reference {reference} exists; rotate it instead")))?.scheduled(&mut tx, &ctx.tenant_id).await?;
    audit::record(&mut tx, &ctx, events::SECRETS_REFERENCE_CREATED, json!({ "ref": reference, "scope": scope, "kms_key_id": kms })).await?;
    tx.commit().await?;
    Ok(created(made))
}

async fn find(tx: &mut Tx, tenant_id: &str, reference: &str) -> ApiResult<Reference> {
    if !valid_ref(reference) {
        return Err(ApiError::NotFound);
    }
    let sql = format!("SELECT {COLUMNS} FROM secrets_reference WHERE tenant_id = $1 AND ref = $2");
    let found: Option<Reference> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(reference).fetch_optional(&mut **tx).await?;
    found.ok_or(ApiError::NotFound)
}

/// A secret reference by its ref (URL-encoded in the path): where the
/// secret lives and its rotation, never the secret. Audited.
#[utoipa::path(get, path = "/api/secrets/refs/{ref}", tag = "sdk-secrets", params(("ref" = String, Path, description = "the reference, URL-encoded")),
    responses((status = 200, description = "the reference", body = Data<Reference>)))]
async fn get_reference(State(state): State<AppState>, Tenant(ctx): Tenant, Path(reference): Path<String>) -> ApiResult<Data<Reference>> {
    let mut tx = state.db.begin().await?;
    let found = find(&mut tx, &ctx.tenant_id, &reference).await?;
    audit::record(&mut tx, &ctx, events::SECRETS_REFERENCE_ACCESSED, json!({ "ref": reference, "version": found.version })).await?;
    tx.commit().await?;
    Ok(ok(found.with_schedule()))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = SecretRotation)]
struct Rotation {
    /// The key the new version lives under; unchanged when absent.
    #[schema(max_length = 512)]
    kms_key_id: Option<String>,
}

/// Records a rotation: the next version, rotated now.
#[utoipa::path(post, path = "/api/secrets/refs/{ref}/rotate", tag = "sdk-secrets", request_body = Rotation,
    params(("ref" = String, Path, description = "the reference, URL-encoded")),
    extensions(("x-concurrency" = json!({"outcome": "independent", "given": [["POST", "/api/secrets/refs", {"ref": "r-{unique}", "kms_key_id": "kms/races"}]], "body": {}}))),
    responses((status = 200, description = "the reference, rotated", body = Data<Reference>)))]
async fn rotate(State(state): State<AppState>, Tenant(ctx): Tenant, Path(reference): Path<String>, body: Body<Rotation>) -> ApiResult<Data<Reference>> {
    let mut tx = state.db.begin().await?;
    let current = find(&mut tx, &ctx.tenant_id, &reference).await?;
    let body = body.checked()?;
    let kms = Check::optional(&body.kms_key_id).unwrap_or(current.kms_key_id);
    let now = db::now();
    let sql = format!(
        "UPDATE secrets_reference SET version = version + 1, kms_key_id = $3, last_rotated_at = $4, updated_at = $4 \
         WHERE tenant_id = $1 AND ref = $2 RETURNING {COLUMNS}"
    );
    let rotated: Reference = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&reference).bind(&kms).bind(&now).fetch_one(&mut *tx).await?;
    let rotated = rotated.scheduled(&mut tx, &ctx.tenant_id).await?;
    audit::record(&mut tx, &ctx, events::SECRETS_REFERENCE_ROTATED, json!({ "ref": reference, "version": rotated.version, "kms_key_id": kms })).await?;
    tx.commit().await?;
    Ok(ok(rotated))
}

/// A reference as the list shows it: its rotation, not where the secret
/// lives (`kms_key_id` is answered by the audited read of one reference).
#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = SecretReferenceSummary)]
struct Summary {
    r#ref: String,
    scope: Scope,
    version: i64,
    rotation_period_days: Option<i64>,
    last_rotated_at: Timestamp,
    /// `last_rotated_at` plus the period; null without a period.
    next_rotation_at: Option<Timestamp>,
    /// Whether `next_rotation_at` has passed.
    #[sqlx(skip)]
    rotation_due: bool,
    created_at: Timestamp,
    updated_at: Timestamp,
}

const SUMMARY_COLUMNS: &str = "ref, scope, version, rotation_period_days, last_rotated_at, next_rotation_at, created_at, updated_at";

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ReferenceFilter {
    #[param(inline)]
    scope: Option<Scope>,
    /// `true`: only the references whose rotation is due; `false`: only
    /// those not due (no period, or not yet).
    rotation_due: Option<bool>,
}

/// The tenant's secret references, newest first, with their rotation
/// schedule; filtered by scope and by whether a rotation is due.
#[utoipa::path(get, path = "/api/secrets/refs", tag = "sdk-secrets", params(ReferenceFilter, Page),
    responses((status = 200, description = "one page of references", body = ListOf<Summary>)))]
async fn list(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<ReferenceFilter>, page: Page) -> ApiResult<ListOf<Summary>> {
    let scope = q.scope.map_or("", Scope::as_str);
    let due = q.rotation_due.map_or("", |d| if d { "true" } else { "false" });
    let now = db::now();
    let listing = Listing {
        table: "secrets_reference",
        columns: SUMMARY_COLUMNS,
        filter: "tenant_id = $1 AND ($2 = '' OR scope = $2) AND ($3 = '' OR ($3 = 'true' AND next_rotation_at <= $4) \
                 OR ($3 = 'false' AND (next_rotation_at IS NULL OR next_rotation_at > $4)))",
        order: "created_at DESC, ref DESC",
    };
    let mut refs = page.list::<Summary>(&state.db.read, &listing, &[&ctx.tenant_id, scope, due, &now]).await?;
    let now = Timestamp::parse(&now).unwrap_or_else(Timestamp::now);
    for r in &mut refs.data {
        r.rotation_due = r.next_rotation_at.is_some_and(|n| n <= now);
    }
    Ok(refs)
}

/// A deleted reference.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = SecretReferenceDeleted)]
struct Deleted {
    r#ref: String,
    deleted: bool,
}

/// Retires a reference: the row goes (its history stays in the audit
/// chain) and the ref may be registered again. What sealed a credential
/// under it before keeps it; new uses of the ref are refused.
#[utoipa::path(delete, path = "/api/secrets/refs/{ref}", tag = "sdk-secrets", params(("ref" = String, Path, description = "the reference, URL-encoded")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "losers": 404, "given": [["POST", "/api/secrets/refs", { "ref": "r-{unique}", "kms_key_id": "kms/races" }]] }))),
    responses((status = 200, description = "deleted", body = Data<Deleted>)))]
async fn delete_reference(State(state): State<AppState>, Tenant(ctx): Tenant, Path(reference): Path<String>) -> ApiResult<Data<Deleted>> {
    if !valid_ref(&reference) {
        return Err(ApiError::NotFound);
    }
    let mut tx = state.db.begin().await?;
    // The delete decides: of two at once, one removes the row (and records
    // the event), the other finds none (404).
    let gone: Option<(String, i64)> = sqlx::query_as("DELETE FROM secrets_reference WHERE tenant_id = $1 AND ref = $2 RETURNING scope, version")
        .bind(&ctx.tenant_id)
        .bind(&reference)
        .fetch_optional(&mut *tx)
        .await?;
    let (scope, version) = gone.ok_or(ApiError::NotFound)?;
    audit::record(&mut tx, &ctx, events::SECRETS_REFERENCE_DELETED, json!({ "ref": reference, "scope": scope, "version": version })).await?;
    tx.commit().await?;
    Ok(ok(Deleted { r#ref: reference, deleted: true }))
}

/// A change of a reference: what is absent stays.
#[derive(Deserialize, ToSchema)]
#[schema(as = SecretReferenceChange)]
struct Change {
    scope: Option<Scope>,
    /// Rotate every this many days.
    #[schema(minimum = 1, maximum = 3650)]
    rotation_period_days: Option<i64>,
}

/// Changes who may use a reference or its rotation period (the next
/// rotation follows from the last and the new period). A change to what
/// is stored already answers the reference and records no event.
#[utoipa::path(patch, path = "/api/secrets/refs/{ref}", tag = "sdk-secrets", request_body = Change,
    params(("ref" = String, Path, description = "the reference, URL-encoded")),
    extensions(("x-concurrency" = json!({ "outcome": "same-answer", "given": [["POST", "/api/secrets/refs", { "ref": "r-{unique}", "kms_key_id": "kms/races" }]], "body": { "scope": "service", "rotation_period_days": 30 } }))),
    responses((status = 200, description = "the reference", body = Data<Reference>)))]
async fn update_reference(State(state): State<AppState>, Tenant(ctx): Tenant, Path(reference): Path<String>, body: Body<Change>) -> ApiResult<Data<Reference>> {
    let mut tx = state.db.begin().await?;
    // The reference first (another tenant's is 404 whatever the body), then the body.
    find(&mut tx, &ctx.tenant_id, &reference).await?;
    let body = body.checked()?;
    if body.scope.is_none() && body.rotation_period_days.is_none() {
        return Err(ApiError::invalid("give at least one of scope, rotation_period_days"));
    }
    let scope = body.scope.map(Scope::as_str);
    let period = body.rotation_period_days;
    // Only a change that changes something writes: of identical changes
    // at once one records the event and the others find it done.
    let sql = format!(
        "UPDATE secrets_reference SET scope = COALESCE($3, scope), \
         rotation_period_days = COALESCE($4, rotation_period_days), updated_at = $5 \
         WHERE tenant_id = $1 AND ref = $2 AND (scope <> COALESCE($3, scope) \
         OR rotation_period_days IS NULL AND $4 IS NOT NULL OR rotation_period_days <> COALESCE($4, rotation_period_days)) RETURNING {COLUMNS}"
    );
    let changed: Option<Reference> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&ctx.tenant_id)
        .bind(&reference)
        .bind(scope)
        .bind(period)
        .bind(db::now())
        .fetch_optional(&mut *tx)
        .await?;
    let answer = match changed {
        Some(r) => {
            let r = r.scheduled(&mut tx, &ctx.tenant_id).await?;
            let payload = json!({ "ref": reference, "scope": r.scope, "rotation_period_days": r.rotation_period_days });
            audit::record(&mut tx, &ctx, events::SECRETS_REFERENCE_UPDATED, payload).await?;
            r
        }
        None => find(&mut tx, &ctx.tenant_id, &reference).await?.with_schedule(),
    };
    tx.commit().await?;
    Ok(ok(answer))
}
