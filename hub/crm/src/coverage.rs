//! sdk-coverage: who covers a kind of work. A rule names, for one
//! `subject_kind` of the tenant (a queue, a task type: `support.vip`,
//! `field.install`, ...), the primary persona, the backup persona and the
//! acceptance window: how long the primary has before the work falls to the
//! backup (0: both are notified at once).
//!
//! The assignment group's offers (`POST /api/assignments`) take a primary,
//! a backup and an acceptance window; a caller that knows the kind of its
//! subject can read them from here first: [`rule_for`] is the lookup
//! another crate calls (with its own transaction or pool). The assignment
//! group itself does not consult it.

use axum::response::IntoResponse;
use hub_identity::personas;
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(set_rule, list_rules)).routes(routes!(get_rule, remove_rule))
}

/// The window when none is given, as an assignment offer's.
const DEFAULT_WINDOW_MINUTES: i64 = 30;

/// The coverage of one kind of work.
#[derive(Debug, Clone, FromRow, Serialize, ToSchema)]
pub struct CoverageRule {
    pub rule_id: Id,
    /// The rule's key in the tenant: 1–64 of `a-z 0-9 . _ -`.
    pub subject_kind: String,
    pub primary_persona_id: String,
    pub backup_persona_id: String,
    /// Minutes the primary has before the work falls to the backup; 0
    /// notifies both at once.
    pub acceptance_window_minutes: i64,
    pub created_by: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

const COLUMNS: &str = "rule_id, subject_kind, primary_persona_id, backup_persona_id, acceptance_window_minutes, created_by, created_at, updated_at";

const RULES: Listing = Listing {
    table: "coverage_rule",
    columns: COLUMNS,
    filter: "tenant_id = $1 AND ($2 = '' OR primary_persona_id = $2 OR backup_persona_id = $2)",
    order: "subject_kind",
};

/// The tenant's coverage rule for a kind of work, if it has one: the
/// lookup for other groups (the assignment group's offers, a queue's
/// router), which take the primary, the backup and the window from it.
pub async fn rule_for<'e, E>(exec: E, tenant_id: &str, subject_kind: &str) -> ApiResult<Option<CoverageRule>>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let sql = format!("SELECT {COLUMNS} FROM coverage_rule WHERE tenant_id = $1 AND subject_kind = $2");
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(subject_kind).fetch_optional(exec).await?)
}

fn valid_kind(s: &str) -> bool {
    (1..=64).contains(&s.len()) && s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewCoverageRule)]
struct NewRule {
    /// The kind of work covered: 1–64 of `a-z 0-9 . _ -`. A kind that has a
    /// rule has it replaced.
    subject_kind: String,
    /// A persona of the tenant.
    #[schema(format = "uuid")]
    primary_persona_id: String,
    /// Another persona of the tenant.
    #[schema(format = "uuid")]
    backup_persona_id: String,
    /// Minutes, at most a week as an assignment offer's; 30 when absent; 0
    /// notifies both at once.
    #[schema(minimum = 0, maximum = 10080)]
    acceptance_window_minutes: Option<i64>,
}

/// Sets the coverage of a kind of work: 201 for a new kind, 200 when its
/// rule is replaced.
#[utoipa::path(post, path = "/api/coverage/rules", tag = "sdk-coverage", request_body = NewRule,
    extensions(("x-concurrency" = json!({ "outcome": "first-creates", "given": [["POST", "/api/personas", { "kind": "service" }]], "body": { "subject_kind": "race-{unique}", "primary_persona_id": "{owner_persona_id}", "backup_persona_id": "{persona_id}" } }))),
    responses((status = 201, description = "the rule, new", body = Data<CoverageRule>), (status = 200, description = "the rule, replaced", body = Data<CoverageRule>)))]
async fn set_rule(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewRule>) -> ApiResult<Response> {
    let body = body.checked()?;
    let mut check = Check::new();
    let kind = body.subject_kind.trim().to_string();
    if !valid_kind(&kind) {
        check.fail("subject_kind must be 1 to 64 of a-z, 0-9, '.', '_', '-'");
    }
    let primary = canonical_uuid(&body.primary_persona_id);
    let backup = canonical_uuid(&body.backup_persona_id);
    if primary == backup {
        check.fail("backup_persona_id must be another persona than primary_persona_id");
    }
    let window = body.acceptance_window_minutes.unwrap_or(DEFAULT_WINDOW_MINUTES);
    check.finish()?;
    let mut tx = state.db.begin().await?;
    let mut check = Check::new();
    for (name, persona) in [("primary_persona_id", &primary), ("backup_persona_id", &backup)] {
        if !personas::exists_in_tenant(&mut *tx, &ctx.tenant_id, persona).await? {
            check.fail(format!("{name} is not a persona of this tenant"));
        }
    }
    check.finish()?;
    let now = db::now();
    // The first set of a kind inserts the rule (201); any other, concurrent
    // or later, finds it and replaces its personas and window (200).
    let insert = format!(
        "INSERT INTO coverage_rule (rule_id, tenant_id, subject_kind, primary_persona_id, backup_persona_id, acceptance_window_minutes, created_by, \
         created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8) ON CONFLICT (tenant_id, subject_kind) DO NOTHING RETURNING {COLUMNS}"
    );
    let replace = format!(
        "UPDATE coverage_rule SET primary_persona_id = $3, backup_persona_id = $4, acceptance_window_minutes = $5, updated_at = $6 \
         WHERE tenant_id = $1 AND subject_kind = $2 RETURNING {COLUMNS}"
    );
    let (rule, written): (CoverageRule, _) = insert_or_read(
        &mut tx,
        sqlx::query_as(sqlx::AssertSqlSafe(insert))
            .bind(db::new_id())
            .bind(&ctx.tenant_id)
            .bind(&kind)
            .bind(&primary)
            .bind(&backup)
            .bind(window)
            .bind(audit::actor_of(&ctx).1)
            .bind(&now),
        sqlx::query_as(sqlx::AssertSqlSafe(replace)).bind(&ctx.tenant_id).bind(&kind).bind(&primary).bind(&backup).bind(window).bind(&now),
    )
    .await?;
    let existed = written == Written::Found;
    let payload = json!({
        "rule_id": rule.rule_id, "subject_kind": kind, "primary_persona_id": primary, "backup_persona_id": backup,
        "acceptance_window_minutes": window, "replaced": existed,
    });
    audit::record(&mut tx, &ctx, events::COVERAGE_RULE_SET, payload).await?;
    tx.commit().await?;
    Ok(if existed { ok(rule).into_response() } else { created(rule).into_response() })
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct RuleQuery {
    /// Only the rules naming this persona, as primary or as backup.
    #[param(format = "uuid")]
    persona_id: Option<String>,
}

/// The tenant's coverage rules, by subject_kind.
#[utoipa::path(get, path = "/api/coverage/rules", tag = "sdk-coverage", params(RuleQuery, Page),
    responses((status = 200, description = "one page of rules", body = ListOf<CoverageRule>)))]
async fn list_rules(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page, Params(q): Params<RuleQuery>) -> ApiResult<ListOf<CoverageRule>> {
    let persona = canonical_uuid_opt(&q.persona_id).unwrap_or_default();
    page.list::<CoverageRule>(&state.db.read, &RULES, &[&ctx.tenant_id, &persona]).await
}

/// The kind of a path, or 404: a kind no rule can have names none.
fn path_kind(raw: &str) -> ApiResult<&str> {
    if valid_kind(raw) { Ok(raw) } else { Err(ApiError::NotFound) }
}

/// The coverage rule of one kind of work.
#[utoipa::path(get, path = "/api/coverage/rules/{subject_kind}", tag = "sdk-coverage",
    params(("subject_kind" = String, Path, description = "the kind of work")),
    responses((status = 200, description = "the rule", body = Data<CoverageRule>)))]
async fn get_rule(State(state): State<AppState>, Tenant(ctx): Tenant, Path(kind): Path<String>) -> ApiResult<Data<CoverageRule>> {
    let kind = path_kind(&kind)?;
    Ok(ok(rule_for(&state.db.read, &ctx.tenant_id, kind).await?.ok_or(ApiError::NotFound)?))
}

/// What removing a rule answers.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = CoverageRuleRemoved)]
struct Removed {
    rule_id: Id,
    subject_kind: String,
    /// Always `true`: the rule is erased (its last values stay in the
    /// `assignment.coverage_rule.removed.v1` event).
    deleted: bool,
}

/// Removes the coverage of a kind of work: the rule is erased, its values
/// kept in the event; 404 when the kind has no rule. Offers already made
/// from it are not touched.
#[utoipa::path(delete, path = "/api/coverage/rules/{subject_kind}", tag = "sdk-coverage",
    params(("subject_kind" = String, Path, description = "the kind of work")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "losers": 404, "given": [["POST", "/api/personas", { "kind": "service" }],
        ["POST", "/api/coverage/rules", { "subject_kind": "race-{unique}", "primary_persona_id": "{owner_persona_id}", "backup_persona_id": "{persona_id}" }]],
        "params": { "subject_kind": "{subject_kind}" } }))),
    responses((status = 200, description = "the rule, erased", body = Data<Removed>)))]
async fn remove_rule(State(state): State<AppState>, Tenant(ctx): Tenant, Path(kind): Path<String>) -> ApiResult<Data<Removed>> {
    let kind = path_kind(&kind)?;
    let mut tx = state.db.begin().await?;
    let sql = format!("DELETE FROM coverage_rule WHERE tenant_id = $1 AND subject_kind = $2 RETURNING {COLUMNS}");
    let rule: CoverageRule =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(kind).fetch_optional(&mut *tx).await?.ok_or(ApiError::NotFound)?;
    let payload = json!({
        "rule_id": rule.rule_id, "subject_kind": rule.subject_kind, "primary_persona_id": rule.primary_persona_id,
        "backup_persona_id": rule.backup_persona_id, "acceptance_window_minutes": rule.acceptance_window_minutes,
    });
    audit::record(&mut tx, &ctx, events::COVERAGE_RULE_REMOVED, payload).await?;
    tx.commit().await?;
    Ok(ok(Removed { rule_id: rule.rule_id, subject_kind: rule.subject_kind, deleted: true }))
}
