//! sdk-rebac: relationship-based access, after Zanzibar (SpiceDB,
//! OpenFGA). A tenant writes tuples `(subject persona, relation, object
//! persona)`; a check asks whether the subject reaches the target through
//! relationships of one kind, walking breadth first within a budget
//! (depth and personas visited), so cycles and wide graphs stay bounded.
//! The gate asks the same question (see `Relations`) where a route names a
//! persona the caller's roles do not cover.

use std::collections::{BTreeMap, HashMap};

use axum::response::IntoResponse;
use hub_identity::{personas, roles};
use hub_kernel::{
    db::{Backend, Db},
    gate::{
        directory::{Lookup, RelationDirectory},
        scope,
    },
    prelude::*,
};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(write, list)).routes(routes!(delete)).routes(routes!(check))
}

pub const DEFAULT_MAX_DEPTH: i64 = 25;
pub const DEFAULT_MAX_NODES: i64 = 10_000;
/// Subjects per query of one step of the walk.
const CHUNK: usize = 500;

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = RebacRelationship)]
struct Relationship {
    subject_persona_id: Id,
    relation: String,
    object_persona_id: Id,
    created_by: String,
    created_at: Timestamp,
}

const COLUMNS: &str = "subject_persona_id, relation, object_persona_id, created_by, created_at";

/// A relation kind: 1–128 of `a-z 0-9 . _ -` (a scope such as
/// `persona.persona.read` is one).
fn valid_relation(r: &str) -> bool {
    (1..=128).contains(&r.len()) && r.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-'))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = RebacTuple)]
struct Tuple {
    #[schema(format = "uuid")]
    subject_persona_id: String,
    /// 1–128 of `a-z 0-9 . _ -`.
    #[schema(max_length = 128)]
    relation: String,
    #[schema(format = "uuid")]
    object_persona_id: String,
}

/// A relation the contract found present, trimmed, or its problem.
fn relation_of(check: &mut Check, raw: &str) -> String {
    let relation = raw.trim().to_string();
    if !valid_relation(&relation) {
        check.fail("relation must be 1 to 128 of a-z, 0-9, '.', '_', '-'");
    }
    relation
}

/// The tuple's three fields, checked: a relation of the allowed form
/// between personas of the tenant.
async fn parse(tx: &mut Tx, ctx: &TenantCtx, body: &Tuple) -> ApiResult<(String, String, String)> {
    let mut check = Check::new();
    let relation = relation_of(&mut check, &body.relation);
    check.finish()?;
    let (subject, object) = (canonical_uuid(&body.subject_persona_id), canonical_uuid(&body.object_persona_id));
    let mut check = Check::new();
    for (field, persona) in [("subject_persona_id", &subject), ("object_persona_id", &object)] {
        if !personas::exists_in_tenant(&mut **tx, &ctx.tenant_id, persona).await? {
            check.fail(format!("{field} is not a persona of this tenant"));
        }
    }
    check.finish()?;
    Ok((subject, relation, object))
}

/// Containment for relationships: the gate lets a person act on a persona
/// they reach through relationships whose kind is the scope the route
/// needs, so a relation shaped like a permission is a grant of it. Writing
/// or deleting one takes holding that permission, as a role grant does;
/// other relation kinds (`manages`, `team-lead`) confer nothing at the gate.
async fn contain(state: &AppState, ctx: &TenantCtx, relation: &str) -> ApiResult<()> {
    if scope::is_valid(relation) { roles::contain(state, ctx, &[relation.to_string()], "the relationship").await } else { Ok(()) }
}

/// Writes a relationship: 201 when new, 200 when it was already there.
#[utoipa::path(post, path = "/api/rebac/relationships", tag = "sdk-rebac", request_body = Tuple,
    responses((status = 201, description = "the relationship, new", body = Data<Relationship>), (status = 200, description = "the relationship, already there", body = Data<Relationship>)),
    extensions(("x-concurrency" = json!({ "outcome": "first-creates", "given": [["POST", "/api/personas", { "kind": "human" }]], "body": { "subject_persona_id": "{owner_persona_id}", "relation": "manages", "object_persona_id": "{persona_id}" }, "events": 1 }))))]
async fn write(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<Tuple>) -> ApiResult<Response> {
    let body = body.checked()?;
    let mut tx = state.db.begin().await?;
    let (subject, relation, object) = parse(&mut tx, &ctx, &body).await?;
    contain(&state, &ctx, &relation).await?;
    let sql = format!(
        "INSERT INTO rebac_relationship (tenant_id, relation, subject_persona_id, object_persona_id, created_by, created_at) VALUES ($1, $2, $3, $4, $5, $6) \
         ON CONFLICT (tenant_id, relation, subject_persona_id, object_persona_id) DO NOTHING RETURNING {COLUMNS}"
    );
    let new: Option<Relationship> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&ctx.tenant_id)
        .bind(&relation)
        .bind(&subject)
        .bind(&object)
        .bind(audit::actor_of(&ctx).1)
        .bind(db::now())
        .fetch_optional(&mut *tx)
        .await?;
    let Some(new) = new else {
        let existing = find(&mut tx, &ctx.tenant_id, &subject, &relation, &object).await?.ok_or(ApiError::NotFound)?;
        tx.commit().await?;
        return Ok(ok(existing).into_response());
    };
    let payload = json!({ "subject_persona_id": subject, "relation": relation, "object_persona_id": object });
    audit::record(&mut tx, &ctx, events::REBAC_RELATIONSHIP_CREATED, payload).await?;
    tx.commit().await?;
    Ok(created(new).into_response())
}

async fn find(tx: &mut Tx, tenant: &str, subject: &str, relation: &str, object: &str) -> ApiResult<Option<Relationship>> {
    let sql = format!("SELECT {COLUMNS} FROM rebac_relationship WHERE tenant_id = $1 AND relation = $2 AND subject_persona_id = $3 AND object_persona_id = $4");
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant).bind(relation).bind(subject).bind(object).fetch_optional(&mut **tx).await?)
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct RelationshipFilter {
    #[param(format = "uuid")]
    subject_persona_id: Option<String>,
    /// 1–128 of `a-z 0-9 . _ -`.
    #[param(max_length = 128)]
    relation: Option<String>,
    #[param(format = "uuid")]
    object_persona_id: Option<String>,
}

/// The tenant's relationships, newest first: what widens a persona's
/// reach at the gate, listed to be audited.
#[utoipa::path(get, path = "/api/rebac/relationships", tag = "sdk-rebac", params(RelationshipFilter, Page),
    responses((status = 200, description = "one page of relationships", body = ListOf<Relationship>)))]
async fn list(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<RelationshipFilter>, page: Page) -> ApiResult<ListOf<Relationship>> {
    let mut check = Check::new();
    let relation = Check::optional(&q.relation).unwrap_or_default();
    if !relation.is_empty() && !valid_relation(&relation) {
        check.fail("relation must be 1 to 128 of a-z, 0-9, '.', '_', '-'");
    }
    check.finish()?;
    let subject = canonical_uuid_opt(&q.subject_persona_id).unwrap_or_default();
    let object = canonical_uuid_opt(&q.object_persona_id).unwrap_or_default();
    let listing = Listing {
        table: "rebac_relationship",
        columns: COLUMNS,
        filter: "tenant_id = $1 AND ($2 = '' OR subject_persona_id = $2) AND ($3 = '' OR relation = $3) AND ($4 = '' OR object_persona_id = $4)",
        order: "created_at DESC, relation DESC, subject_persona_id DESC, object_persona_id DESC",
    };
    page.list::<Relationship>(&state.db.read, &listing, &[&ctx.tenant_id, &subject, &relation, &object]).await
}

/// Deletes a relationship (404 when there is none).
#[utoipa::path(post, path = "/api/rebac/relationships/delete", tag = "sdk-rebac", request_body = Tuple,
    extensions(("x-concurrency" = json!({"outcome": "one-wins", "losers": 404, "given": [["POST", "/api/personas", {"kind": "human"}], ["POST", "/api/rebac/relationships", {"subject_persona_id": "{owner_persona_id}", "relation": "manages", "object_persona_id": "{persona_id}"}]], "body": {"subject_persona_id": "{owner_persona_id}", "relation": "manages", "object_persona_id": "{persona_id}"}}))),
    responses((status = 200, description = "the relationship deleted", body = Data<Relationship>),
        (status = 404, description = "NotFound: the tenant has no such relationship", body = ErrorBody)))]
async fn delete(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<Tuple>) -> ApiResult<Data<Relationship>> {
    let body = body.checked()?;
    let mut tx = state.db.begin().await?;
    let (subject, relation, object) = parse(&mut tx, &ctx, &body).await?;
    contain(&state, &ctx, &relation).await?;
    // The delete decides: of two deletes at once, one removes the
    // relationship (and records the event), the other finds none (404).
    let sql = format!(
        "DELETE FROM rebac_relationship WHERE tenant_id = $1 AND relation = $2 AND subject_persona_id = $3 AND object_persona_id = $4 RETURNING {COLUMNS}"
    );
    let gone: Option<Relationship> =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&relation).bind(&subject).bind(&object).fetch_optional(&mut *tx).await?;
    let gone = gone.ok_or(ApiError::NotFound)?;
    let payload = json!({ "subject_persona_id": subject, "relation": relation, "object_persona_id": object });
    audit::record(&mut tx, &ctx, events::REBAC_RELATIONSHIP_DELETED, payload).await?;
    tx.commit().await?;
    Ok(ok(gone))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = RebacCheck)]
struct CheckRequest {
    #[schema(format = "uuid")]
    subject_persona_id: String,
    /// 1–128 of `a-z 0-9 . _ -`.
    #[schema(max_length = 128)]
    relation: String,
    #[schema(format = "uuid")]
    target_persona_id: String,
    /// The walk's budget; the defaults when absent.
    budget: Option<Budget>,
}

/// How far a check may walk.
#[derive(Deserialize, ToSchema)]
#[schema(as = RebacBudgetLimits)]
struct Budget {
    /// Relationships followed at most; 25 when absent.
    #[schema(minimum = 1, maximum = 100)]
    max_depth: Option<i64>,
    /// Personas reached at most; 10,000 when absent.
    #[schema(minimum = 1, maximum = 1_000_000)]
    max_nodes: Option<i64>,
}

/// The answer of a check.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = RebacDecision)]
pub struct Decision {
    pub decision: Reach,
    pub allowed: bool,
    /// The personas from subject to target, when allowed.
    pub path: Option<Vec<String>>,
    pub budget: BudgetUse,
}

stored_enum! {
    /// What a check found: `allow`, `deny`, or `indeterminate` when the
    /// budget ran out first (the gate treats it as `deny`).
    #[schema(as = RebacReach)]
    pub enum Reach { Allow = "allow", Deny = "deny", Indeterminate = "indeterminate" }
}

/// How much of its budget a check spent.
#[derive(Debug, Serialize, ToSchema)]
pub struct BudgetUse {
    pub max_depth: i64,
    pub max_nodes: i64,
    /// Relationships followed on the longest walk taken (the path's length when allowed).
    pub depth_used: i64,
    /// Personas reached, the subject included.
    pub nodes_visited: i64,
    pub exhausted: bool,
}

/// Whether the subject reaches the target through relationships of one kind.
#[utoipa::path(post, path = "/api/rebac/check", tag = "sdk-rebac", request_body = CheckRequest,
    extensions(("x-concurrency" = json!({"outcome": "independent", "events": 0, "given": [["POST", "/api/personas", {"kind": "human"}], ["POST", "/api/rebac/relationships", {"subject_persona_id": "{owner_persona_id}", "relation": "manages", "object_persona_id": "{persona_id}"}]], "body": {"subject_persona_id": "{owner_persona_id}", "relation": "manages", "target_persona_id": "{persona_id}"}}))),
    responses((status = 200, description = "the decision and the budget used", body = Data<Decision>)))]
async fn check(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<CheckRequest>) -> ApiResult<Data<Decision>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let relation = relation_of(&mut check, &body.relation);
    check.finish()?;
    let (subject, target) = (canonical_uuid(&body.subject_persona_id), canonical_uuid(&body.target_persona_id));
    let budget = body.budget.as_ref();
    let depth = budget.and_then(|b| b.max_depth).unwrap_or(DEFAULT_MAX_DEPTH);
    let nodes = budget.and_then(|b| b.max_nodes).unwrap_or(DEFAULT_MAX_NODES);
    let decision = reaches(&state.db, &ctx.tenant_id, &subject, &relation, &target, depth, nodes).await?;
    Ok(ok(decision))
}

/// The walk: breadth first from the subject along `relation`, level by
/// level, stopping at the target, at the end of the graph, or when the
/// budget is spent. A level that reaches the target allows, through the
/// smallest subject leading there; otherwise its new personas join the
/// walk (each with the smallest subject leading to it as parent), unless
/// they would pass `max_nodes`. PostgreSQL runs the walk as the function
/// `rebac_reaches` (migration 0055), one round trip per check; SQLite, in
/// process, runs it here with one query per level. Both answer alike.
pub async fn reaches(db: &Db, tenant: &str, subject: &str, relation: &str, target: &str, max_depth: i64, max_nodes: i64) -> ApiResult<Decision> {
    let answer = |decision: Reach, path: Option<Vec<String>>, depth_used: i64, nodes_visited: i64| Decision {
        decision,
        allowed: decision == Reach::Allow,
        path,
        budget: BudgetUse { max_depth, max_nodes, depth_used, nodes_visited, exhausted: decision == Reach::Indeterminate },
    };
    if db.backend == Backend::Postgres {
        let (decision, path, depth, nodes): (String, Option<String>, i64, i64) =
            sqlx::query_as("SELECT decision, path, depth_used, nodes_visited FROM rebac_reaches($1, $2, $3, $4, $5, $6)")
                .bind(tenant)
                .bind(subject)
                .bind(relation)
                .bind(target)
                .bind(max_depth)
                .bind(max_nodes)
                .fetch_one(&db.read)
                .await?;
        let decision = match decision.as_str() {
            "allow" => Reach::Allow,
            "deny" => Reach::Deny,
            _ => Reach::Indeterminate,
        };
        return Ok(answer(decision, path.map(|p| p.split(',').map(str::to_string).collect()), depth, nodes));
    }
    // persona -> the persona it was reached from (the subject has none).
    let mut parent: HashMap<String, Option<String>> = HashMap::from([(subject.to_string(), None)]);
    let mut frontier = vec![subject.to_string()];
    let mut depth = 0;
    while !frontier.is_empty() {
        if depth == max_depth {
            return Ok(answer(Reach::Indeterminate, None, depth, parent.len() as i64));
        }
        depth += 1;
        // object -> the smallest subject of this level leading to it.
        let mut level: BTreeMap<String, String> = BTreeMap::new();
        for chunk in frontier.chunks(CHUNK) {
            let sql = format!(
                "SELECT subject_persona_id, object_persona_id FROM rebac_relationship WHERE tenant_id = $1 AND relation = $2 AND subject_persona_id IN ({})",
                db::placeholders(3, chunk.len())
            );
            let mut q = sqlx::query_as::<_, (String, String)>(sqlx::AssertSqlSafe(sql)).bind(tenant).bind(relation);
            for s in chunk {
                q = q.bind(s);
            }
            for (from, to) in q.fetch_all(&db.read).await? {
                match level.get_mut(&to) {
                    Some(best) if *best <= from => {}
                    Some(best) => *best = from,
                    None => {
                        level.insert(to, from);
                    }
                }
            }
        }
        if let Some(hit) = level.get(target) {
            let mut path = vec![target.to_string()];
            let mut at = Some(hit.clone());
            while let Some(p) = at {
                at = parent.get(&p).cloned().flatten();
                path.push(p);
            }
            path.reverse();
            let nodes = parent.len() as i64 + i64::from(!parent.contains_key(target));
            return Ok(answer(Reach::Allow, Some(path), depth, nodes));
        }
        level.retain(|to, _| !parent.contains_key(to));
        if (parent.len() + level.len()) as i64 > max_nodes {
            return Ok(answer(Reach::Indeterminate, None, depth, max_nodes));
        }
        frontier = level.keys().cloned().collect();
        parent.extend(level.into_iter().map(|(to, from)| (to, Some(from))));
    }
    Ok(answer(Reach::Deny, None, depth, parent.len() as i64))
}

/// The gate's ReBAC step over this group's tuples.
pub struct Relations;

impl RelationDirectory for Relations {
    fn reaches<'a>(&'a self, db: &'a Db, tenant: &'a str, subject: &'a str, relation: &'a str, target: &'a str) -> Lookup<'a, bool> {
        Box::pin(async move {
            // A persona no longer active (revoked with its membership, or
            // shredded) reaches nothing: its relationships stay on record,
            // the authority they gave does not.
            let active = personas::find(&db.read, subject).await?.is_some_and(|p| p.tenant_id == tenant && p.status == personas::PersonaStatus::Active);
            if !active {
                return Ok(false);
            }
            Ok(reaches(db, tenant, subject, relation, target, DEFAULT_MAX_DEPTH, DEFAULT_MAX_NODES).await?.allowed)
        })
    }
}
