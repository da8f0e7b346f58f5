//! sdk-assignment: who gets the work. Versioned rule sets route a subject
//! to a persona (`route`, with `dry_run`); assign-by-task gates candidates
//! on skills, availability and per-day capacity, then a strategy picks
//! (`default`, `round_robin` with a persisted cursor per pool,
//! `fair_share`); every decision is recorded; simulations replay recorded
//! decisions through a candidate version; `records` holds the offers.
//! The decisions themselves are in `engine`, free of I/O.

mod engine;
mod records;

use std::collections::{HashMap, HashSet};

use axum::response::IntoResponse;
use chrono::Utc;
use hub_kernel::{db::Backend, prelude::*};

use crate::dispatch::Point;
use engine::{Candidate, Outcome, Recorded, Routed, Rule, Strategy, Workload};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(publish, list_rule_sets))
        .routes(routes!(activate))
        .routes(routes!(route))
        .routes(routes!(assign_by_task))
        .routes(routes!(list_decisions))
        .routes(routes!(rotation))
        .routes(routes!(put_workload, get_workload, delete_workload))
        .routes(routes!(simulate))
        .routes(routes!(list_simulations))
        .routes(routes!(get_simulation))
        .merge(records::routes())
}

/// Candidates a decision weighs at most.
const MAX_CANDIDATES: usize = 100;

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = AssignmentRuleSet)]
struct RuleSet {
    rule_set_id: Id,
    name: String,
    version: i64,
    /// The rules, in the order they are tried.
    #[sqlx(try_from = "String")]
    #[schema(value_type = Vec<Object>)]
    rules: JsonText,
    #[sqlx(try_from = "i64")]
    #[schema(value_type = bool)]
    active: Flag,
    published_by: String,
    created_at: Timestamp,
    activated_at: Option<Timestamp>,
}

const RULE_SET_COLUMNS: &str = "rule_set_id, name, version, rules, active, published_by, created_at, activated_at";

/// A rule of a rule set. The rules are kept as given, so this is their
/// schema only (`engine::parse_rules` reads them).
#[derive(ToSchema)]
#[schema(as = AssignmentRule)]
#[allow(dead_code)]
struct RuleSchema {
    #[schema(max_length = 128)]
    name: String,
    /// Maps a subject field to the value it must have (or an array of the
    /// values it may have).
    when: Option<serde_json::Map<String, Value>>,
    /// What a candidate must hold for an `assign` rule; any candidate
    /// when absent.
    specialty: Option<String>,
    /// `assign` when absent.
    action: Option<RuleAction>,
}

/// What a matching rule does.
#[derive(ToSchema)]
#[schema(as = AssignmentRuleAction, rename_all = "snake_case")]
#[allow(dead_code)]
enum RuleAction {
    Assign,
    Review,
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewAssignmentRuleSet)]
struct NewRuleSet {
    /// The rule set's name: 1 to 128 letters, digits, `.`, `_` or `-`.
    #[schema(max_length = 128)]
    name: String,
    /// The rules, tried in order.
    #[schema(value_type = Vec<RuleSchema>, min_items = 1, max_items = 100)]
    rules: Vec<serde_json::Map<String, Value>>,
    /// Make this version the active one (default false).
    activate: Option<bool>,
    /// Who published it; the caller when absent.
    published_by: Option<String>,
}

fn valid_name(s: &str) -> bool {
    (1..=128).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

async fn rule_set(tx: &mut Tx, tenant_id: &str, filter: &str, arg: &str) -> ApiResult<Option<RuleSet>> {
    let sql = format!("SELECT {RULE_SET_COLUMNS} FROM assignment_rule_set WHERE tenant_id = $1 AND {filter}");
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(arg).fetch_optional(&mut **tx).await?)
}

/// Makes `rule_set_id` the active version of its name.
async fn make_active(tx: &mut Tx, tenant_id: &str, set: &RuleSet) -> ApiResult<RuleSet> {
    queue_on_name(tx, tenant_id, &set.name).await?;
    sqlx::query("UPDATE assignment_rule_set SET active = 0 WHERE tenant_id = $1 AND name = $2 AND active = 1")
        .bind(tenant_id)
        .bind(&set.name)
        .execute(&mut **tx)
        .await?;
    let sql = format!("UPDATE assignment_rule_set SET active = 1, activated_at = $2 WHERE rule_set_id = $1 RETURNING {RULE_SET_COLUMNS}");
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(set.rule_set_id).bind(db::now()).fetch_one(&mut **tx).await?)
}

/// Publishes the next version of a rule set, active at once when asked.
#[utoipa::path(post, path = "/api/assignment/routes", tag = "sdk-assignment", request_body = NewRuleSet,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "body": { "name": "race-{unique}", "rules": [{ "name": "any" }], "activate": true } }))),
    responses((status = 201, description = "the version published", body = Data<RuleSet>)))]
async fn publish(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewRuleSet>) -> ApiResult<Created<RuleSet>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let name = body.name.trim().to_string();
    if !valid_name(&name) {
        check.fail("name must be 1 to 128 letters, digits, '.', '_' or '-'");
    }
    let rules = Value::Array(body.rules.into_iter().map(Value::Object).collect());
    engine::parse_rules(&mut check, Some(&rules));
    check.finish()?;
    let published_by = Check::optional(&body.published_by).unwrap_or_else(|| audit::actor_of(&ctx).1.to_string());
    let mut tx = state.db.begin().await?;
    // Concurrent publishes of one name each get a version of their own.
    let floor = "SELECT MAX(version) FROM assignment_rule_set WHERE tenant_id = $1 AND name = $3";
    let version = next_number(&mut tx, &ctx.tenant_id, &format!("assignment_rule_set {name}"), floor, &name).await?;
    let sql = format!(
        "INSERT INTO assignment_rule_set (rule_set_id, tenant_id, name, version, rules, active, published_by, created_at) \
         VALUES ($1, $2, $3, $4, $5, 0, $6, $7) RETURNING {RULE_SET_COLUMNS}"
    );
    let mut set: RuleSet = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(&name)
        .bind(version)
        .bind(rules.to_string())
        .bind(&published_by)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
    if body.activate == Some(true) {
        set = make_active(&mut tx, &ctx.tenant_id, &set).await?;
    }
    let payload = json!({ "rule_set_id": set.rule_set_id, "name": name, "version": version, "active": set.active.0 });
    audit::record(&mut tx, &ctx, events::ASSIGNMENT_RULE_SET_PUBLISHED, payload).await?;
    tx.commit().await?;
    Ok(created(set))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct RuleSetFilter {
    /// Only this rule set's versions.
    name: Option<String>,
}

/// The rule set versions, newest first.
#[utoipa::path(get, path = "/api/assignment/routes", tag = "sdk-assignment", params(RuleSetFilter, Page),
    responses((status = 200, description = "one page of versions", body = ListOf<RuleSet>)))]
async fn list_rule_sets(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<RuleSetFilter>, page: Page) -> ApiResult<ListOf<RuleSet>> {
    let name = Check::optional(&q.name).unwrap_or_default();
    let listing =
        Listing { table: "assignment_rule_set", columns: RULE_SET_COLUMNS, filter: "tenant_id = $1 AND ($2 = '' OR name = $2)", order: "name, version DESC" };
    page.list::<RuleSet>(&state.db.read, &listing, &[&ctx.tenant_id, &name]).await
}

/// The first version of a rule set name, as activations lock it.
const RULE_SET_NAME: Stateful = Stateful { noun: "rule set", table: "assignment_rule_set", key: "rule_set_id", state: "active" };

/// Locks the first version of the name, which owns "one active version":
/// activations of the name (the activate route, and publishes that
/// activate) queue one after another, so each reads what the previous one
/// committed and none meets the one-active index.
async fn queue_on_name(tx: &mut Tx, tenant_id: &str, name: &str) -> ApiResult<()> {
    let first: String = sqlx::query_scalar("SELECT rule_set_id FROM assignment_rule_set WHERE tenant_id = $1 AND name = $2 ORDER BY version LIMIT 1")
        .bind(tenant_id)
        .bind(name)
        .fetch_one(&mut **tx)
        .await?;
    RULE_SET_NAME.lock::<i64>(tx, tenant_id, &first).await?;
    Ok(())
}

/// Makes a published version the active one (a rollback, or a version
/// published inactive and simulated first).
#[utoipa::path(post, path = "/api/assignment/routes/{rule_set_id}/activate", tag = "sdk-assignment",
    params(("rule_set_id" = String, Path, description = "the version to activate")),
    extensions(("x-concurrency" = json!({ "outcome": "same-answer", "given": [
        ["POST", "/api/assignment/routes", { "name": "race-{unique}", "rules": [{ "name": "any" }], "activate": true }],
        ["POST", "/api/assignment/routes", { "name": "race-{unique}", "rules": [{ "name": "any" }] }]] }))),
    responses((status = 200, description = "the version, now active", body = Data<RuleSet>)))]
async fn activate(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<RuleSet>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    let set = rule_set(&mut tx, &ctx.tenant_id, "rule_set_id = $2", &id).await?.ok_or(ApiError::NotFound)?;
    queue_on_name(&mut tx, &ctx.tenant_id, &set.name).await?;
    let set = rule_set(&mut tx, &ctx.tenant_id, "rule_set_id = $2", &id).await?.ok_or(ApiError::NotFound)?;
    if set.active.0 {
        return Ok(ok(set));
    }
    let set = make_active(&mut tx, &ctx.tenant_id, &set).await?;
    let payload = json!({ "rule_set_id": set.rule_set_id, "name": set.name, "version": set.version });
    audit::record(&mut tx, &ctx, events::ASSIGNMENT_RULE_SET_ACTIVATED, payload).await?;
    tx.commit().await?;
    Ok(ok(set))
}

stored_enum! {
    /// What a decision routed: a subject through a rule set (`route`), or a
    /// task through the gates and a strategy (`task`).
    #[schema(as = AssignmentDecisionKind)]
    pub enum DecisionKind { Route = "route", Task = "task" }
}

/// A recorded decision (`decision_id` null: a dry run, not recorded).
#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = AssignmentDecision)]
struct Decision {
    decision_id: Option<Id>,
    kind: DecisionKind,
    strategy: Strategy,
    outcome: Outcome,
    persona_id: Option<String>,
    rule_set_name: Option<String>,
    rule_version: Option<i64>,
    matched_rule: Option<String>,
    subject_ref: Option<String>,
    #[sqlx(try_from = "String")]
    #[schema(value_type = Object)]
    subject: JsonText,
    task_id: Option<String>,
    pool_key: Option<String>,
    #[sqlx(try_from = "String")]
    #[schema(value_type = Vec<String>)]
    candidates: JsonText,
    #[sqlx(try_from = "String")]
    #[schema(value_type = Object)]
    persona_specialties: JsonText,
    /// assign-by-task: each candidate's gate and distance.
    #[sqlx(try_from = "String")]
    #[schema(value_type = Vec<engine::Evaluation>)]
    evaluation: JsonText,
    created_by: String,
    created_at: Timestamp,
}

const DECISION_COLUMNS: &str = "decision_id, kind, strategy, outcome, persona_id, rule_set_name, rule_version, matched_rule, subject_ref, subject, \
     task_id, pool_key, candidates, persona_specialties, evaluation, created_by, created_at";

/// Records `d` with its event (a fresh id), answering it as stored.
async fn record_decision(tx: &mut Tx, ctx: &TenantCtx, mut d: Decision) -> ApiResult<Decision> {
    d.decision_id = Some(Id::new());
    let sql = format!(
        "INSERT INTO assignment_decision (tenant_id, {DECISION_COLUMNS}) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)"
    );
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(&ctx.tenant_id)
        .bind(d.decision_id)
        .bind(d.kind)
        .bind(d.strategy)
        .bind(d.outcome)
        .bind(&d.persona_id)
        .bind(&d.rule_set_name)
        .bind(d.rule_version)
        .bind(&d.matched_rule)
        .bind(&d.subject_ref)
        .bind(d.subject.0.to_string())
        .bind(&d.task_id)
        .bind(&d.pool_key)
        .bind(d.candidates.0.to_string())
        .bind(d.persona_specialties.0.to_string())
        .bind(d.evaluation.0.to_string())
        .bind(&d.created_by)
        .bind(d.created_at)
        .execute(&mut **tx)
        .await?;
    let payload = json!({
        "decision_id": d.decision_id, "kind": d.kind, "strategy": d.strategy, "outcome": d.outcome,
        "persona_id": d.persona_id, "rule_set_name": d.rule_set_name, "task_id": d.task_id,
    });
    audit::record(tx, ctx, events::ASSIGNMENT_DECISION_RECORDED, payload).await?;
    Ok(d)
}

/// A list of persona ids (at most `MAX_CANDIDATES`, as its schema says):
/// UUIDs, no repeats.
fn persona_list(check: &mut Check, name: &str, items: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match uuid::Uuid::parse_str(item.trim()).ok() {
            Some(id) if !out.contains(&id.to_string()) => out.push(id.to_string()),
            Some(_) => check.fail(format!("{name}[{i}] repeats a persona")),
            None => check.fail(format!("{name}[{i}] must be a UUID")),
        }
    }
    out
}

/// `persona_specialties`: persona id to specialty strings, for at most
/// `MAX_CANDIDATES` personas.
fn specialties(check: &mut Check, value: Option<HashMap<String, Vec<String>>>) -> HashMap<String, Vec<String>> {
    let map = value.unwrap_or_default();
    if map.len() > MAX_CANDIDATES {
        check.fail(format!("persona_specialties must be an object of at most {MAX_CANDIDATES} personas"));
    }
    map
}

/// A list of at most 100 strings (as its schema says), none of them blank
/// (`form`: the items' pattern, a character that is not white space).
fn string_list(check: &mut Check, name: &str, value: Option<Vec<String>>, form: &Pattern) -> Vec<String> {
    let list = value.unwrap_or_default();
    if list.iter().any(|s| !form.is_match(s)) {
        check.fail(format!("{name} must be an array of at most 100 non-blank strings"));
    }
    list.iter().map(|s| s.trim().to_string()).collect()
}

/// Refuses persona ids that are not the tenant's (the same answer for an
/// unknown persona and another tenant's).
async fn check_personas(tx: &mut Tx, tenant_id: &str, named: &[(&str, &str)]) -> ApiResult<()> {
    if named.is_empty() {
        return Ok(());
    }
    let sql = format!("SELECT persona_id FROM persona_persona WHERE tenant_id = $1 AND persona_id IN ({})", db::placeholders(2, named.len()));
    let mut q = sqlx::query_scalar::<_, String>(sqlx::AssertSqlSafe(sql)).bind(tenant_id);
    for (_, id) in named {
        q = q.bind(*id);
    }
    let known: HashSet<String> = q.fetch_all(&mut **tx).await?.into_iter().collect();
    let problems: Vec<String> =
        named.iter().filter(|(_, id)| !known.contains(*id)).map(|(field, _)| format!("{field} is not a persona of this tenant")).collect();
    if problems.is_empty() { Ok(()) } else { Err(ApiError::Validation(problems)) }
}

fn named<'a>(field: &'a str, ids: &'a [String]) -> Vec<(String, &'a str)> {
    ids.iter().enumerate().map(|(i, id)| (format!("{field}[{i}]"), id.as_str())).collect()
}

async fn check_candidates(tx: &mut Tx, tenant_id: &str, ids: &[String]) -> ApiResult<()> {
    let named = named("candidate_persona_ids", ids);
    let refs: Vec<(&str, &str)> = named.iter().map(|(f, id)| (f.as_str(), *id)).collect();
    check_personas(tx, tenant_id, &refs).await
}

/// The start of today, UTC, in the stored form.
fn today() -> String {
    db::format_time(Utc::now().date_naive().and_hms_opt(0, 0, 0).expect("midnight exists").and_utc())
}

/// What each of `personas` was given today (assigned or fallen back to),
/// by any decision of the tenant.
async fn given_today(tx: &mut Tx, tenant_id: &str, personas: &[String]) -> ApiResult<HashMap<String, i64>> {
    if personas.is_empty() {
        return Ok(HashMap::new());
    }
    let sql = format!(
        "SELECT persona_id, COUNT(*) FROM assignment_decision WHERE tenant_id = $1 AND created_at >= $2 AND persona_id IN ({}) GROUP BY persona_id",
        db::placeholders(3, personas.len())
    );
    let mut q = sqlx::query_as::<_, (String, i64)>(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(today());
    for p in personas {
        q = q.bind(p);
    }
    Ok(q.fetch_all(&mut **tx).await?.into_iter().collect())
}

#[derive(Deserialize, ToSchema)]
#[schema(as = AssignmentRouteRequest)]
struct RouteRequest {
    /// The rule set whose active version routes the subject.
    rule_set_name: String,
    /// The subject's fields, matched by the rules' `when`; `{}` when
    /// absent.
    subject: Option<serde_json::Map<String, Value>>,
    subject_ref: Option<String>,
    /// Personas of the tenant that may be given the subject.
    #[schema(max_items = 100, format = "uuid")]
    candidate_persona_ids: Option<Vec<String>>,
    /// Persona id to its specialties (at most 100 personas).
    persona_specialties: Option<HashMap<String, Vec<String>>>,
    /// Decide without recording (default false).
    dry_run: Option<bool>,
}

/// Routes a subject through the active version of a rule set; recorded
/// unless `dry_run`.
#[utoipa::path(post, path = "/api/assignment/route", tag = "sdk-assignment", request_body = RouteRequest,
    extensions(("x-concurrency" = json!({ "outcome": "independent",
        "given": [["POST", "/api/assignment/routes", { "name": "race-{unique}", "rules": [{ "name": "any" }], "activate": true }]],
        "body": { "rule_set_name": "race-{unique}", "subject": { "topic": "race" }, "candidate_persona_ids": ["{owner_persona_id}"] } }))),
    responses((status = 201, description = "the decision, recorded", body = Data<Decision>), (status = 200, description = "a dry run's decision, not recorded", body = Data<Decision>)))]
async fn route(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<RouteRequest>) -> ApiResult<Response> {
    let body = body.checked()?;
    let mut check = Check::new();
    let name = body.rule_set_name.trim().to_string();
    let subject = Value::Object(body.subject.clone().unwrap_or_default());
    let candidates = persona_list(&mut check, "candidate_persona_ids", body.candidate_persona_ids.as_deref().unwrap_or_default());
    let specialties = specialties(&mut check, body.persona_specialties.clone());
    check.finish()?;
    let mut tx = state.db.begin().await?;
    let set = rule_set(&mut tx, &ctx.tenant_id, "name = $2 AND active = 1", &name)
        .await?
        .ok_or_else(|| ApiError::invalid(format!("rule_set_name: no active rule set is named {name}")))?;
    check_candidates(&mut tx, &ctx.tenant_id, &candidates).await?;
    let rules = stored_rules(&set);
    let load = given_today(&mut tx, &ctx.tenant_id, &candidates).await?;
    let Routed { outcome, persona_id, matched_rule } = engine::route(&rules, &subject, &candidates, &specialties, &load);
    let decision = Decision {
        decision_id: None,
        kind: DecisionKind::Route,
        strategy: Strategy::Default,
        outcome,
        persona_id,
        rule_set_name: Some(set.name.clone()),
        rule_version: Some(set.version),
        matched_rule,
        subject_ref: Check::optional(&body.subject_ref),
        subject: JsonText(subject),
        task_id: None,
        pool_key: None,
        candidates: JsonText(json!(candidates)),
        persona_specialties: JsonText(json!(specialties)),
        evaluation: JsonText(json!([])),
        created_by: audit::actor_of(&ctx).1.to_string(),
        created_at: Timestamp::now(),
    };
    if body.dry_run == Some(true) {
        return Ok(ok(decision).into_response());
    }
    let decision = record_decision(&mut tx, &ctx, decision).await?;
    tx.commit().await?;
    Ok(created(decision).into_response())
}

fn stored_rules(set: &RuleSet) -> Vec<Rule> {
    let mut check = Check::new();
    engine::parse_rules(&mut check, Some(&set.rules.0))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = AssignByTaskRequest)]
struct TaskRequest {
    /// The task being assigned.
    task_id: String,
    /// Personas of the tenant to choose from, primary first, then backup.
    #[schema(max_items = 100, format = "uuid")]
    candidate_persona_ids: Vec<String>,
    /// Skills the winner must hold, all of them (none blank).
    #[schema(max_items = 100, pattern = r"[^\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]")]
    required_skills: Option<Vec<String>>,
    /// `default` when absent.
    strategy: Option<Strategy>,
    /// The rotation pool of `round_robin`: 1 to 128 letters, digits, `.`,
    /// `_` or `-`; `default` when absent.
    pool_key: Option<String>,
    /// Where the task is; `default` prefers the nearest.
    location: Option<Location>,
}

/// A place.
#[derive(Clone, Copy, Deserialize, ToSchema)]
#[schema(as = AssignmentLocation)]
struct Location {
    /// Degrees.
    #[schema(minimum = -90, maximum = 90)]
    lat: f64,
    /// Degrees.
    #[schema(minimum = -180, maximum = 180)]
    lng: f64,
}

impl From<Location> for Point {
    fn from(l: Location) -> Point {
        Point { lat: l.lat, lng: l.lng }
    }
}

/// Assigns a task: the gates (skills, availability window, capacity left
/// today) first, then the strategy picks among those left.
#[utoipa::path(post, path = "/api/assignment/assign-by-task", tag = "sdk-assignment", request_body = TaskRequest,
    extensions(("x-concurrency" = json!({ "outcome": "independent",
        "body": { "task_id": "t-{unique}", "candidate_persona_ids": ["{owner_persona_id}"], "strategy": "round_robin", "pool_key": "race-{unique}" } }))),
    responses((status = 201, description = "the decision, recorded: ASSIGNED, or UNROUTABLE when no candidate passed the gates", body = Data<Decision>)))]
async fn assign_by_task(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<TaskRequest>) -> ApiResult<Created<Decision>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let task_id = body.task_id.trim().to_string();
    let candidates = persona_list(&mut check, "candidate_persona_ids", &body.candidate_persona_ids);
    static REQUIRED_SKILL: Pattern = Pattern::of::<TaskRequest>("required_skills[]");
    let required = string_list(&mut check, "required_skills", body.required_skills, &REQUIRED_SKILL);
    let strategy = body.strategy.unwrap_or(Strategy::Default);
    let pool_key = Check::optional(&body.pool_key).unwrap_or_else(|| "default".into());
    if !valid_name(&pool_key) {
        check.fail("pool_key must be 1 to 128 letters, digits, '.', '_' or '-'");
    }
    let at = body.location.map(Point::from);
    check.finish()?;
    let mut tx = state.db.begin().await?;
    check_candidates(&mut tx, &ctx.tenant_id, &candidates).await?;
    // PostgreSQL: lock the candidates' workloads (in one order), so two
    // assignments at once cannot both take a persona's last slot, and the
    // pool's cursor, so a turn is never handed out twice.
    let lock = if state.db.backend == Backend::Postgres { " FOR UPDATE" } else { "" };
    let workloads = workloads(&mut tx, &ctx.tenant_id, &candidates, lock).await?;
    let given = given_today(&mut tx, &ctx.tenant_id, &candidates).await?;
    let now = Utc::now();
    let mut cursor = None;
    if strategy == Strategy::RoundRobin {
        sqlx::query(
            "INSERT INTO assignment_rotation (tenant_id, pool_key, turns, updated_at) VALUES ($1, $2, 0, $3) ON CONFLICT (tenant_id, pool_key) DO NOTHING",
        )
        .bind(&ctx.tenant_id)
        .bind(&pool_key)
        .bind(db::now())
        .execute(&mut *tx)
        .await?;
        let sql = format!("SELECT last_persona_id FROM assignment_rotation WHERE tenant_id = $1 AND pool_key = $2{lock}");
        cursor = sqlx::query_scalar::<_, Option<String>>(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&pool_key).fetch_one(&mut *tx).await?;
    }
    let pool: Vec<Candidate> = candidates
        .iter()
        .map(|id| Candidate { persona_id: id.clone(), workload: workloads.get(id).cloned(), assigned_today: given.get(id).copied().unwrap_or(0) })
        .collect();
    let (winner, evaluation) = engine::assign(&pool, &required, strategy, at, cursor.as_deref(), now);
    if let (Some(w), Strategy::RoundRobin) = (&winner, strategy) {
        sqlx::query("UPDATE assignment_rotation SET last_persona_id = $3, turns = turns + 1, updated_at = $4 WHERE tenant_id = $1 AND pool_key = $2")
            .bind(&ctx.tenant_id)
            .bind(&pool_key)
            .bind(w)
            .bind(db::now())
            .execute(&mut *tx)
            .await?;
    }
    let decision = Decision {
        decision_id: None,
        kind: DecisionKind::Task,
        strategy,
        outcome: if winner.is_some() { Outcome::Assigned } else { Outcome::Unroutable },
        persona_id: winner,
        rule_set_name: None,
        rule_version: None,
        matched_rule: None,
        subject_ref: None,
        subject: JsonText(json!({ "required_skills": required, "location": at })),
        task_id: Some(task_id),
        pool_key: Some(pool_key),
        candidates: JsonText(json!(candidates)),
        persona_specialties: JsonText(json!({})),
        evaluation: JsonText(json!(evaluation)),
        created_by: audit::actor_of(&ctx).1.to_string(),
        created_at: Timestamp::now(),
    };
    let decision = record_decision(&mut tx, &ctx, decision).await?;
    tx.commit().await?;
    Ok(created(decision))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct DecisionFilter {
    /// Only this decision.
    #[param(format = "uuid")]
    decision_id: Option<String>,
    /// Only decisions of this subject.
    #[param(max_length = 500)]
    subject_ref: Option<String>,
    /// Only decisions with this outcome.
    #[param(inline)]
    outcome: Option<Outcome>,
    /// Only decisions of this rule set.
    #[param(max_length = 200)]
    rule_set_name: Option<String>,
}

const DECISIONS: Listing = Listing {
    table: "assignment_decision",
    columns: DECISION_COLUMNS,
    filter: "tenant_id = $1 AND ($2 = '' OR decision_id = $2) AND ($3 = '' OR subject_ref = $3) AND ($4 = '' OR outcome = $4) \
             AND ($5 = '' OR rule_set_name = $5)",
    order: "created_at DESC, decision_id DESC",
};

/// The tenant's recorded decisions, newest first; `decision_id` reads one
/// (a page of one, or none).
#[utoipa::path(get, path = "/api/assignment/decisions", tag = "sdk-assignment", params(DecisionFilter, Page),
    responses((status = 200, description = "a page of decisions", body = ListOf<Decision>)))]
async fn list_decisions(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<DecisionFilter>, page: Page) -> ApiResult<ListOf<Decision>> {
    let id = q.decision_id.as_deref().map(canonical_uuid).unwrap_or_default();
    let subject = q.subject_ref.as_deref().map(str::trim).unwrap_or_default();
    let outcome = q.outcome.map_or("", Outcome::as_str);
    let rule_set = q.rule_set_name.as_deref().map(str::trim).unwrap_or_default();
    page.list::<Decision>(&state.db.read, &DECISIONS, &[&ctx.tenant_id, &id, subject, outcome, rule_set]).await
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = AssignmentRotationCursor)]
struct Cursor {
    pool_key: String,
    /// The persona given the pool's last turn.
    last_persona_id: Option<String>,
    /// Turns handed out in the pool.
    turns: i64,
    updated_at: Timestamp,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct RotationFilter {
    /// Only this pool's cursor.
    pool_key: Option<String>,
}

/// The round-robin cursors of the tenant's pools.
#[utoipa::path(get, path = "/api/assignment/rotation", tag = "sdk-assignment", params(RotationFilter, Page),
    responses((status = 200, description = "one page of cursors", body = ListOf<Cursor>)))]
async fn rotation(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<RotationFilter>, page: Page) -> ApiResult<ListOf<Cursor>> {
    let pool = Check::optional(&q.pool_key).unwrap_or_default();
    let listing = Listing {
        table: "assignment_rotation",
        columns: "pool_key, last_persona_id, turns, updated_at",
        filter: "tenant_id = $1 AND ($2 = '' OR pool_key = $2)",
        order: "pool_key",
    };
    page.list::<Cursor>(&state.db.read, &listing, &[&ctx.tenant_id, &pool]).await
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = AssignmentWorkload)]
struct WorkloadRow {
    persona_id: String,
    #[sqlx(try_from = "String")]
    #[schema(value_type = Vec<String>)]
    skills: JsonText,
    available_from: Option<Timestamp>,
    available_to: Option<Timestamp>,
    /// Assignments a day at most; null: no limit.
    capacity_per_day: Option<i64>,
    lat: Option<f64>,
    lng: Option<f64>,
    created_at: Timestamp,
    updated_at: Timestamp,
}

const WORKLOAD_COLUMNS: &str = "persona_id, skills, available_from, available_to, capacity_per_day, lat, lng, created_at, updated_at";

impl WorkloadRow {
    fn workload(&self) -> Workload {
        let skills = self.skills.0.as_array().map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect()).unwrap_or_default();
        Workload {
            skills,
            available_from: self.available_from.map(|t| t.0),
            available_to: self.available_to.map(|t| t.0),
            capacity_per_day: self.capacity_per_day,
            location: self.lat.zip(self.lng).map(|(lat, lng)| Point { lat, lng }),
        }
    }
}

async fn workloads(tx: &mut Tx, tenant_id: &str, ids: &[String], lock: &str) -> ApiResult<HashMap<String, Workload>> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let marks = db::placeholders(2, ids.len());
    let sql = format!("SELECT {WORKLOAD_COLUMNS} FROM assignment_workload WHERE tenant_id = $1 AND persona_id IN ({marks}) ORDER BY persona_id{lock}");
    let mut q = sqlx::query_as::<_, WorkloadRow>(sqlx::AssertSqlSafe(sql)).bind(tenant_id);
    for id in ids {
        q = q.bind(id);
    }
    Ok(q.fetch_all(&mut **tx).await?.into_iter().map(|w| (w.persona_id.clone(), w.workload())).collect())
}

#[derive(Deserialize, ToSchema)]
#[schema(as = AssignmentWorkloadUpdate)]
struct WorkloadUpdate {
    /// The persona's skills (none blank); none when absent.
    #[schema(max_items = 100, pattern = r"[^\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]")]
    skills: Option<Vec<String>>,
    /// Not available before; before `available_to`.
    #[schema(format = DateTime)]
    available_from: Option<String>,
    /// Not available from then on.
    #[schema(format = DateTime)]
    available_to: Option<String>,
    /// Assignments a day; absent or null: no limit.
    #[schema(minimum = 0, maximum = 100_000)]
    capacity_per_day: Option<i64>,
    /// Where the persona works from.
    location: Option<Location>,
}

/// Sets a persona's workload: skills, availability window, capacity a day
/// and location (the whole of it: what is absent is cleared).
#[utoipa::path(put, path = "/api/assignment/workload/{persona_id}", tag = "sdk-assignment", request_body = WorkloadUpdate,
    params(("persona_id" = String, Path, description = "a persona of the caller's tenant")),
    extensions(("x-concurrency" = json!({ "outcome": "first-creates", "given": [["POST", "/api/personas", { "kind": "service" }]], "body": { "skills": ["a"], "location": { "lat": 52.37, "lng": 4.89 } } }))),
    responses((status = 201, description = "the workload, first set", body = Data<WorkloadRow>), (status = 200, description = "the workload, replaced", body = Data<WorkloadRow>)))]
async fn put_workload(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<WorkloadUpdate>) -> ApiResult<Response> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    let persona: Option<String> = sqlx::query_scalar("SELECT persona_id FROM persona_persona WHERE tenant_id = $1 AND persona_id = $2")
        .bind(&ctx.tenant_id)
        .bind(&id)
        .fetch_optional(&mut *tx)
        .await?;
    persona.ok_or(ApiError::NotFound)?;
    let body = body.checked()?;
    let mut check = Check::new();
    static SKILL: Pattern = Pattern::of::<WorkloadUpdate>("skills[]");
    let skills = string_list(&mut check, "skills", body.skills, &SKILL);
    let from = check.optional_expiry("available_from", &body.available_from);
    let to = check.optional_expiry("available_to", &body.available_to);
    if let (Some(f), Some(t)) = (&from, &to)
        && f >= t
    {
        check.fail("available_from must be before available_to");
    }
    let capacity = body.capacity_per_day;
    let at = body.location.map(Point::from);
    check.finish()?;
    let now = db::now();
    // The first set inserts the workload (201); any other, concurrent or
    // later, finds it and replaces the whole of it (200).
    let insert = format!(
        "INSERT INTO assignment_workload (persona_id, tenant_id, skills, available_from, available_to, capacity_per_day, lat, lng, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9) ON CONFLICT (persona_id) DO NOTHING RETURNING {WORKLOAD_COLUMNS}"
    );
    let replace = format!(
        "UPDATE assignment_workload SET skills = $3, available_from = $4, available_to = $5, capacity_per_day = $6, lat = $7, lng = $8, updated_at = $9 \
         WHERE persona_id = $1 AND tenant_id = $2 RETURNING {WORKLOAD_COLUMNS}"
    );
    let skills_text = json!(skills).to_string();
    let (lat, lng) = (db::rows::Real(at.map(|p| p.lat)), db::rows::Real(at.map(|p| p.lng)));
    let bind = |sql: String| {
        sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(id.clone())
            .bind(ctx.tenant_id.clone())
            .bind(skills_text.clone())
            .bind(from.clone())
            .bind(to.clone())
            .bind(capacity)
            .bind(lat)
            .bind(lng)
            .bind(now.clone())
    };
    let (row, written): (WorkloadRow, _) = insert_or_read(&mut tx, bind(insert), bind(replace)).await?;
    let existed = written == Written::Found;
    let payload = json!({ "persona_id": id, "skills": skills, "capacity_per_day": capacity });
    audit::record(&mut tx, &ctx, events::ASSIGNMENT_WORKLOAD_UPDATED, payload).await?;
    tx.commit().await?;
    Ok(if existed { ok(row).into_response() } else { created(row).into_response() })
}

/// A persona's workload.
#[utoipa::path(get, path = "/api/assignment/workload/{persona_id}", tag = "sdk-assignment",
    params(("persona_id" = String, Path, description = "a persona of the caller's tenant")),
    responses((status = 200, description = "the workload", body = Data<WorkloadRow>)))]
async fn get_workload(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<WorkloadRow>> {
    let id = path_id(&id)?.to_string();
    let sql = format!("SELECT {WORKLOAD_COLUMNS} FROM assignment_workload WHERE tenant_id = $1 AND persona_id = $2");
    let row: Option<WorkloadRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&state.db.read).await?;
    Ok(ok(row.ok_or(ApiError::NotFound)?))
}

/// The answer of a workload's delete.
#[derive(Serialize, ToSchema)]
#[schema(as = AssignmentWorkloadDeleted)]
struct WorkloadDeleted {
    persona_id: String,
    deleted: bool,
}

/// Clears a persona's workload: assign-by-task then knows no skills,
/// window, capacity or location of the persona (as before a first `PUT`).
/// Of two deletes at once, the other finds nothing (404).
#[utoipa::path(delete, path = "/api/assignment/workload/{persona_id}", tag = "sdk-assignment",
    params(("persona_id" = String, Path, description = "a persona of the caller's tenant")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "losers": 404, "given": [
        ["POST", "/api/personas", { "kind": "service" }],
        ["PUT", "/api/assignment/workload/{persona_id}", { "skills": ["a"] }]] }))),
    responses((status = 200, description = "deleted", body = Data<WorkloadDeleted>)))]
async fn delete_workload(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<WorkloadDeleted>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    let deleted: Option<String> = sqlx::query_scalar("DELETE FROM assignment_workload WHERE tenant_id = $1 AND persona_id = $2 RETURNING persona_id")
        .bind(&ctx.tenant_id)
        .bind(&id)
        .fetch_optional(&mut *tx)
        .await?;
    let persona_id = deleted.ok_or(ApiError::NotFound)?;
    audit::record(&mut tx, &ctx, events::ASSIGNMENT_WORKLOAD_UPDATED, json!({ "persona_id": persona_id, "cleared": true })).await?;
    tx.commit().await?;
    Ok(ok(WorkloadDeleted { persona_id, deleted: true }))
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = AssignmentSimulation)]
struct Simulation {
    simulation_id: Id,
    rule_set_name: String,
    candidate_version: i64,
    skew_tolerance: f64,
    #[sqlx(try_from = "i64")]
    #[schema(value_type = bool)]
    within_tolerance: Flag,
    #[sqlx(try_from = "String")]
    #[schema(value_type = engine::Report)]
    report: JsonText,
    created_by: String,
    created_at: Timestamp,
}

const SIMULATION_COLUMNS: &str = "simulation_id, rule_set_name, candidate_version, skew_tolerance, within_tolerance, report, created_by, created_at";

#[derive(Deserialize, ToSchema)]
#[schema(as = AssignmentSimulationRequest)]
struct SimulateRequest {
    /// The rule set whose recorded decisions are replayed.
    rule_set_name: String,
    /// The version to try; the active one when absent.
    #[schema(minimum = 1, maximum = 2_147_483_647)]
    candidate_version: Option<i64>,
    /// The newest recorded decisions replayed; 100 when absent.
    #[schema(minimum = 1, maximum = 1000)]
    limit: Option<i64>,
    /// The pool to replay with; each decision's own when absent.
    #[schema(max_items = 100, format = "uuid")]
    candidate_persona_ids: Option<Vec<String>>,
    /// Persona id to its specialties (at most 100 personas).
    persona_specialties: Option<HashMap<String, Vec<String>>>,
    /// The skew the report accepts; 0.2 when absent.
    #[schema(minimum = 0, maximum = 1)]
    skew_tolerance: Option<f64>,
}

#[derive(FromRow)]
struct Replayed {
    subject: String,
    candidates: String,
    persona_specialties: String,
    outcome: Outcome,
    persona_id: Option<String>,
}

/// Replays the newest recorded decisions of a rule set through a candidate
/// version and stores the report.
#[utoipa::path(post, path = "/api/assignment/simulate", tag = "sdk-assignment", request_body = SimulateRequest,
    extensions(("x-concurrency" = json!({ "outcome": "independent",
        "given": [["POST", "/api/assignment/routes", { "name": "race-{unique}", "rules": [{ "name": "any" }], "activate": true }]],
        "body": { "rule_set_name": "race-{unique}" } }))),
    responses((status = 201, description = "the simulation and its report", body = Data<Simulation>)))]
async fn simulate(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<SimulateRequest>) -> ApiResult<Created<Simulation>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let name = body.rule_set_name.trim().to_string();
    let version = body.candidate_version;
    let limit = body.limit.unwrap_or(100);
    let pool = persona_list(&mut check, "candidate_persona_ids", body.candidate_persona_ids.as_deref().unwrap_or_default());
    let specialties = specialties(&mut check, body.persona_specialties);
    let tolerance = body.skew_tolerance.unwrap_or(0.2);
    check.finish()?;
    let mut tx = state.db.begin().await?;
    let set = match version {
        Some(v) => version_of(&mut tx, &ctx.tenant_id, &name, v).await?,
        None => rule_set(&mut tx, &ctx.tenant_id, "name = $2 AND active = 1", &name)
            .await?
            .ok_or_else(|| ApiError::invalid(format!("rule_set_name: no active rule set is named {name}")))?,
    };
    check_candidates(&mut tx, &ctx.tenant_id, &pool).await?;
    let sql = "SELECT subject, candidates, persona_specialties, outcome, persona_id FROM assignment_decision \
               WHERE tenant_id = $1 AND kind = 'route' AND rule_set_name = $2 ORDER BY created_at DESC, decision_id DESC LIMIT $3";
    let mut rows: Vec<Replayed> = sqlx::query_as(sql).bind(&ctx.tenant_id).bind(&name).bind(limit).fetch_all(&mut *tx).await?;
    rows.reverse();
    let parse = |s: &str| serde_json::from_str::<Value>(s).unwrap_or(Value::Null);
    let recorded: Vec<Recorded> = rows
        .into_iter()
        .map(|r| Recorded {
            subject: parse(&r.subject),
            candidates: serde_json::from_str(&r.candidates).unwrap_or_default(),
            specialties: serde_json::from_str(&r.persona_specialties).unwrap_or_default(),
            outcome: r.outcome,
            persona_id: r.persona_id,
        })
        .collect();
    let given = (!pool.is_empty()).then_some((pool.as_slice(), &specialties));
    let report = engine::simulate(&stored_rules(&set), &recorded, given, tolerance);
    let sql = format!(
        "INSERT INTO assignment_simulation (simulation_id, tenant_id, rule_set_name, candidate_version, skew_tolerance, within_tolerance, report, created_by, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING {SIMULATION_COLUMNS}"
    );
    let sim: Simulation = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(&name)
        .bind(set.version)
        .bind(tolerance)
        .bind(i64::from(report.within_tolerance))
        .bind(json!(report).to_string())
        .bind(audit::actor_of(&ctx).1)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
    let payload = json!({ "simulation_id": sim.simulation_id, "rule_set_name": name, "candidate_version": set.version, "replayed": report.replayed, "skew": report.skew });
    audit::record(&mut tx, &ctx, events::ASSIGNMENT_SIMULATION_COMPLETED, payload).await?;
    tx.commit().await?;
    Ok(created(sim))
}

async fn version_of(tx: &mut Tx, tenant_id: &str, name: &str, version: i64) -> ApiResult<RuleSet> {
    let sql = format!("SELECT {RULE_SET_COLUMNS} FROM assignment_rule_set WHERE tenant_id = $1 AND name = $2 AND version = $3");
    let found: Option<RuleSet> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(name).bind(version).fetch_optional(&mut **tx).await?;
    found.ok_or_else(|| ApiError::invalid(format!("candidate_version: {name} has no version {version}")))
}

/// The stored simulations, newest first.
#[utoipa::path(get, path = "/api/assignment/simulations", tag = "sdk-assignment", params(Page),
    responses((status = 200, description = "one page of simulations", body = ListOf<Simulation>)))]
async fn list_simulations(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page) -> ApiResult<ListOf<Simulation>> {
    let listing =
        Listing { table: "assignment_simulation", columns: SIMULATION_COLUMNS, filter: "tenant_id = $1", order: "created_at DESC, simulation_id DESC" };
    page.list::<Simulation>(&state.db.read, &listing, &[&ctx.tenant_id]).await
}

/// One simulation with its report.
#[utoipa::path(get, path = "/api/assignment/simulations/{simulation_id}", tag = "sdk-assignment",
    params(("simulation_id" = String, Path, description = "the simulation")),
    responses((status = 200, description = "the simulation", body = Data<Simulation>)))]
async fn get_simulation(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Simulation>> {
    let id = path_id(&id)?.to_string();
    let sql = format!("SELECT {SIMULATION_COLUMNS} FROM assignment_simulation WHERE tenant_id = $1 AND simulation_id = $2");
    let found: Option<Simulation> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&state.db.read).await?;
    Ok(ok(found.ok_or(ApiError::NotFound)?))
}
