//! sdk-policy: versioned, immutable policy bundles whose `iql_source` is
//! Cedar policy text, validated by the Cedar parser on create; the
//! evaluation of a request against a bundle; and the gate's ABAC step,
//! which evaluates the tenant's one active bundle on each of its requests.
//! The active bundle is compiled once per tenant and kept in the state's
//! `policies` cache, dropped on every replica when activation changes.

use std::{
    any::Any,
    str::FromStr,
    sync::{Arc, LazyLock},
};

use cedar_policy::{Authorizer, Context, Decision, Entities, EntityId, EntityTypeName, EntityUid, PolicyId, PolicySet, Request, RestrictedExpression};
use hub_kernel::{
    gate::directory::{AbacRequest, Lookup, PolicyDirectory},
    prelude::*,
    state::Invalidation,
};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list))
        .routes(routes!(get_bundle))
        .routes(routes!(activate))
        .routes(routes!(deactivate))
        .routes(routes!(evaluate))
}

/// Cedar text above this is refused (a bundle is policy, not data).
const MAX_SOURCE: usize = 256 * 1024;

/// How deeply Cedar text may nest brackets and `if` expressions. Cedar's
/// parser and the conversion of its syntax tree recurse once per level
/// through a dozen grammar rules, without a bound of their own: about 150
/// parentheses overflowed a worker's stack and aborted the process.
const MAX_NESTING: usize = 32;

/// How many operators (`.`, `+`, `-`, `*`, comparisons, `in`, `has`,
/// `like`, `is`) one path into Cedar text may chain: each is a level of the
/// syntax tree, walked recursively as well. `&&` and `||` are not counted:
/// Cedar keeps their chains flat.
const MAX_CHAIN: usize = 1024;

/// The stack of the thread that parses Cedar text: with the bounds above,
/// room for an unoptimised build's frames many times over.
const PARSE_STACK: usize = 32 * 1024 * 1024;

/// How deeply the JSON of an evaluation's context and entities may nest
/// (Cedar converts it recursively too).
const MAX_JSON_NESTING: usize = 32;

/// Checks Cedar text against [`MAX_NESTING`] and [`MAX_CHAIN`] by reading
/// its tokens, before any parser sees it. String literals and `//`
/// comments are skipped; brackets that do not match are left for the
/// parser to report.
fn within_bounds(source: &str) -> Result<(), String> {
    /// One open bracket (or the text outside any): the `if`s and the
    /// chained operators met in it so far.
    #[derive(Default)]
    struct Level {
        ifs: usize,
        chain: usize,
    }
    let bytes = source.as_bytes();
    let mut levels = vec![Level::default()];
    let (mut nesting, mut chain) = (0usize, 0usize);
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'(' | b'[' | b'{' => {
                levels.push(Level::default());
                nesting += 1;
            }
            b')' | b']' | b'}' if levels.len() > 1 => {
                let closed = levels.pop().expect("more than one level");
                nesting -= 1 + closed.ifs;
                chain -= closed.chain;
            }
            // A policy's end, or an element's: what follows starts afresh.
            b';' | b',' => {
                let top = levels.last_mut().expect("the outer level");
                nesting -= top.ifs;
                chain -= top.chain;
                *top = Level::default();
            }
            // A two-character operator (`==`, `<=`, `!=`) counts once.
            b'=' if i > 0 && matches!(bytes[i - 1], b'=' | b'<' | b'>' | b'!') => {}
            b'.' | b'+' | b'-' | b'*' | b'<' | b'>' | b'=' | b'!' => {
                levels.last_mut().expect("a level").chain += 1;
                chain += 1;
            }
            b if b.is_ascii_alphabetic() || b == b'_' => {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                let top = levels.last_mut().expect("a level");
                match &source[start..i] {
                    "if" => {
                        top.ifs += 1;
                        nesting += 1;
                    }
                    "in" | "has" | "like" | "is" => {
                        top.chain += 1;
                        chain += 1;
                    }
                    _ => {}
                }
                if nesting > MAX_NESTING || chain > MAX_CHAIN {
                    break;
                }
                continue;
            }
            _ => {}
        }
        if nesting > MAX_NESTING || chain > MAX_CHAIN {
            break;
        }
        i += 1;
    }
    if nesting > MAX_NESTING {
        Err(format!("iql_source nests brackets and if-expressions more than {MAX_NESTING} levels deep"))
    } else if chain > MAX_CHAIN {
        Err(format!("iql_source chains more than {MAX_CHAIN} operators in one expression"))
    } else {
        Ok(())
    }
}

/// [`compile`], after the bounds, on a thread of its own with a stack
/// sized for Cedar's recursion: a tokio worker's stack is small, and an
/// overflow there aborts every tenant's requests.
fn compile_bounded(source: &str) -> Result<(PolicySet, Vec<String>), Vec<String>> {
    if source.len() > MAX_SOURCE {
        return Err(vec![format!("iql_source must be at most {MAX_SOURCE} bytes")]);
    }
    within_bounds(source).map_err(|e| vec![e])?;
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("cedar-parse".into())
            .stack_size(PARSE_STACK)
            .spawn_scoped(scope, || compile(source))
            .map_err(|e| vec![format!("iql_source could not be parsed now: {e}")])?
            .join()
            .unwrap_or_else(|_| Err(vec!["iql_source could not be parsed".into()]))
    })
}

/// How deeply a JSON value nests, walked without recursion.
fn json_depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(value, 1usize)];
    while let Some((v, depth)) = stack.pop() {
        deepest = deepest.max(depth);
        match v {
            Value::Array(items) => stack.extend(items.iter().map(|i| (i, depth + 1))),
            Value::Object(fields) => stack.extend(fields.values().map(|i| (i, depth + 1))),
            _ => {}
        }
    }
    deepest
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = PolicyBundle)]
struct Bundle {
    bundle_id: Id,
    name: String,
    version: String,
    /// The Cedar policies, as given.
    iql_source: String,
    /// Each policy's id: its `@id("…")` annotation, else `policy<N>` by position.
    #[sqlx(try_from = "String")]
    #[schema(value_type = Vec<String>)]
    policy_ids: JsonText,
    #[sqlx(try_from = "String")]
    #[schema(value_type = Object)]
    obligations: JsonText,
    status: BundleStatus,
    created_by: String,
    created_at: Timestamp,
    activated_at: Option<Timestamp>,
}

stored_enum! {
    /// Whether a bundle is the tenant's active one (at most one a tenant).
    #[schema(as = PolicyBundleStatus)]
    enum BundleStatus { Inactive = "inactive", Active = "active" }
}

stored_enum! {
    /// What an evaluation decided.
    #[schema(as = PolicyOutcome)]
    enum Outcome { Allow = "allow", Deny = "deny" }
}

const COLUMNS: &str = "bundle_id, name, version, iql_source, policy_ids, obligations, status, created_by, created_at, activated_at";

/// Parses Cedar text into a policy set whose ids are the policies'
/// `@id` annotations (else `policy<N>`), or every parser message.
fn compile(source: &str) -> Result<(PolicySet, Vec<String>), Vec<String>> {
    let parsed = PolicySet::from_str(source).map_err(|errors| errors.iter().map(|e| format!("iql_source: {e}")).collect::<Vec<_>>())?;
    if parsed.templates().next().is_some() {
        return Err(vec!["iql_source: policy templates (with ?principal or ?resource slots) are not supported".into()]);
    }
    let mut set = PolicySet::new();
    let mut ids = Vec::new();
    let mut problems = Vec::new();
    for (n, policy) in parsed.policies().enumerate() {
        let id = policy.annotation("id").map(str::to_string).unwrap_or_else(|| format!("policy{n}"));
        if let Err(e) = set.add(policy.new_id(PolicyId::new(&id))) {
            problems.push(format!("iql_source: policy id {id}: {e}"));
        }
        ids.push(id);
    }
    if ids.is_empty() {
        problems.push("iql_source must hold at least one policy".into());
    }
    if problems.is_empty() { Ok((set, ids)) } else { Err(problems) }
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewPolicyBundle)]
struct NewBundle {
    #[schema(max_length = 128)]
    name: String,
    /// A positive integer, or a string of 1–64 characters (`3`,
    /// `2026.11.1`, …) without control characters.
    #[schema(value_type = Value)]
    version: Value,
    /// Cedar policies (at most 256 KiB).
    iql_source: String,
    /// What a caller must do when the bundle allows (opaque to the hub);
    /// `{}` when absent.
    #[schema(value_type = Option<Object>)]
    obligations: Option<serde_json::Map<String, Value>>,
    /// Make it the tenant's active bundle at once (default false).
    activate: Option<bool>,
}

/// Creates a policy bundle version (immutable: a taken version is 409).
#[utoipa::path(post, path = "/api/policies/bundles", tag = "sdk-policy", request_body = NewBundle,
    extensions(("x-concurrency" = json!({"outcome": "one-wins", "body": {"name": "p-{unique}", "version": 1, "iql_source": "permit (principal, action, resource);"}}))),
    responses((status = 201, description = "the bundle", body = Data<Bundle>)))]
async fn create(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewBundle>) -> ApiResult<Created<Bundle>> {
    let body = body.checked()?;
    let name = body.name.trim();
    let version = match &body.version {
        Value::Number(n) if n.as_u64().is_some_and(|v| v > 0) => n.to_string(),
        Value::String(s) if (1..=64).contains(&s.trim().chars().count()) && !s.chars().any(char::is_control) => s.trim().to_string(),
        _ => return Err(ApiError::Validation(vec!["version must be a positive integer or a string of 1 to 64 characters".into()])),
    };
    let source = body.iql_source.trim();
    let obligations = Value::Object(body.obligations.unwrap_or_default());
    let (_, ids) = compile_bounded(source).map_err(ApiError::Validation)?;
    let now = db::now();
    let activate = body.activate.unwrap_or(false);
    let mut tx = state.db.begin().await?;
    if activate {
        sqlx::query("UPDATE policy_bundle SET status = 'inactive' WHERE tenant_id = $1 AND status = 'active'").bind(&ctx.tenant_id).execute(&mut *tx).await?;
    }
    let sql = format!(
        "INSERT INTO policy_bundle (bundle_id, tenant_id, name, version, iql_source, policy_ids, obligations, status, created_by, created_at, activated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (tenant_id, name, version) DO NOTHING RETURNING {COLUMNS}"
    );
    let bundle: Option<Bundle> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(name)
        .bind(&version)
        .bind(source)
        .bind(json!(ids).to_string())
        .bind(obligations.to_string())
        .bind(if activate { BundleStatus::Active } else { BundleStatus::Inactive })
        .bind(audit::actor_of(&ctx).1)
        .bind(&now)
        .bind(activate.then_some(&now))
        .fetch_optional(&mut *tx)
        .await?;
    let bundle = bundle.ok_or_else(|| ApiError::Conflict(format!("bundle {name} version {version} exists: bundles are immutable")))?;
    let payload = json!({ "bundle_id": bundle.bundle_id, "name": name, "version": version, "policy_ids": ids });
    audit::record(&mut tx, &ctx, events::POLICY_BUNDLE_CREATED, payload).await?;
    if activate {
        audit::record(&mut tx, &ctx, events::POLICY_BUNDLE_ACTIVATED, json!({ "bundle_id": bundle.bundle_id, "name": name, "version": version })).await?;
    }
    tx.commit().await?;
    if activate {
        state.invalidate(Invalidation::Policies(ctx.tenant_id.clone())).await;
    }
    Ok(created(bundle))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct BundleQuery {
    /// Only the versions of this bundle name.
    name: Option<String>,
}

/// The tenant's bundles, newest first.
#[utoipa::path(get, path = "/api/policies/bundles", tag = "sdk-policy", params(BundleQuery, Page),
    responses((status = 200, description = "one page of bundles", body = ListOf<Bundle>)))]
async fn list(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<BundleQuery>, page: Page) -> ApiResult<ListOf<Bundle>> {
    let order = "created_at DESC, bundle_id DESC";
    match Check::optional(&q.name) {
        None => {
            page.list::<Bundle>(&state.db.read, &Listing { table: "policy_bundle", columns: COLUMNS, filter: "tenant_id = $1", order }, &[&ctx.tenant_id]).await
        }
        Some(name) => {
            let listing = Listing { table: "policy_bundle", columns: COLUMNS, filter: "tenant_id = $1 AND name = $2", order };
            page.list::<Bundle>(&state.db.read, &listing, &[&ctx.tenant_id, &name]).await
        }
    }
}

/// The tenant as activations of its bundles lock it.
const TENANT: Stateful = Stateful { noun: "tenant", table: "tenant_tenant", key: "tenant_id", state: "status" };

/// Makes a bundle the tenant's active one (the one before it becomes
/// inactive); activating the active bundle changes nothing.
#[utoipa::path(post, path = "/api/policies/bundles/{bundle_id}/activate", tag = "sdk-policy", params(("bundle_id" = String, Path, description = "the bundle")),
    responses((status = 200, description = "the bundle, active", body = Data<Bundle>)),
    extensions(("x-concurrency" = json!({ "outcome": "same-answer", "given": [["POST", "/api/policies/bundles", { "name": "p-{unique}", "version": 1, "iql_source": "permit (principal, action, resource);" }]] }))))]
async fn activate(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Bundle>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    // The tenant's row owns "one active bundle": activations of the
    // tenant's bundles queue on it, so of several at once for one bundle
    // the first activates it (and records the event) and the others find
    // it active, and activations of two bundles never both deactivate the
    // same predecessor.
    TENANT.lock::<String>(&mut tx, &ctx.tenant_id, &ctx.tenant_id).await?;
    let select = format!("SELECT {COLUMNS} FROM policy_bundle WHERE tenant_id = $1 AND bundle_id = $2");
    let bundle: Bundle =
        sqlx::query_as(sqlx::AssertSqlSafe(select.as_str())).bind(&ctx.tenant_id).bind(&id).fetch_optional(&mut *tx).await?.ok_or(ApiError::NotFound)?;
    if bundle.status == BundleStatus::Active {
        return Ok(ok(bundle));
    }
    sqlx::query("UPDATE policy_bundle SET status = 'inactive' WHERE tenant_id = $1 AND status = 'active'").bind(&ctx.tenant_id).execute(&mut *tx).await?;
    sqlx::query("UPDATE policy_bundle SET status = 'active', activated_at = $2 WHERE bundle_id = $1").bind(&id).bind(db::now()).execute(&mut *tx).await?;
    let payload = json!({ "bundle_id": id, "name": bundle.name, "version": bundle.version });
    audit::record(&mut tx, &ctx, events::POLICY_BUNDLE_ACTIVATED, payload).await?;
    let bundle: Bundle = sqlx::query_as(sqlx::AssertSqlSafe(select)).bind(&ctx.tenant_id).bind(&id).fetch_one(&mut *tx).await?;
    tx.commit().await?;
    state.invalidate(Invalidation::Policies(ctx.tenant_id.clone())).await;
    Ok(ok(bundle))
}

/// One of the tenant's bundles.
#[utoipa::path(get, path = "/api/policies/bundles/{bundle_id}", tag = "sdk-policy", params(("bundle_id" = String, Path, description = "the bundle")),
    responses((status = 200, description = "the bundle", body = Data<Bundle>)))]
async fn get_bundle(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Bundle>> {
    let id = path_id(&id)?.to_string();
    let sql = format!("SELECT {COLUMNS} FROM policy_bundle WHERE tenant_id = $1 AND bundle_id = $2");
    let bundle: Option<Bundle> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&state.db.read).await?;
    Ok(ok(bundle.ok_or(ApiError::NotFound)?))
}

/// Makes the tenant's active bundle inactive: the gate's ABAC step then
/// evaluates no bundle until one is activated. Deactivating an inactive
/// bundle changes nothing and records no event.
#[utoipa::path(post, path = "/api/policies/bundles/{bundle_id}/deactivate", tag = "sdk-policy", params(("bundle_id" = String, Path, description = "the bundle")),
    responses((status = 200, description = "the bundle, inactive", body = Data<Bundle>)),
    extensions(("x-concurrency" = json!({ "outcome": "same-answer", "given": [["POST", "/api/policies/bundles", { "name": "p-{unique}", "version": 1, "iql_source": "permit (principal, action, resource);", "activate": true }]] }))))]
async fn deactivate(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Bundle>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    // Guarded by the status: of several deactivations at once one moves
    // the bundle (and records the event), the others find it inactive.
    let sql = format!("UPDATE policy_bundle SET status = 'inactive' WHERE tenant_id = $1 AND bundle_id = $2 AND status = 'active' RETURNING {COLUMNS}");
    let moved: Option<Bundle> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&mut *tx).await?;
    let Some(bundle) = moved else {
        let sql = format!("SELECT {COLUMNS} FROM policy_bundle WHERE tenant_id = $1 AND bundle_id = $2");
        let found: Option<Bundle> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&mut *tx).await?;
        tx.commit().await?;
        return Ok(ok(found.ok_or(ApiError::NotFound)?));
    };
    let payload = json!({ "bundle_id": id, "name": bundle.name, "version": bundle.version });
    audit::record(&mut tx, &ctx, events::POLICY_BUNDLE_DEACTIVATED, payload).await?;
    tx.commit().await?;
    state.invalidate(Invalidation::Policies(ctx.tenant_id.clone())).await;
    Ok(ok(bundle))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = PolicyEvaluation)]
struct Evaluation {
    /// A Cedar entity: `Persona::"…"`.
    principal: String,
    /// A Cedar entity: `Action::"crm.contact.write"`.
    action: String,
    /// A Cedar entity: `Route::"/api/crm/contacts"`.
    resource: String,
    /// The request's context; empty when absent.
    #[schema(value_type = Option<Object>)]
    context: Option<serde_json::Map<String, Value>>,
    /// Entities with attributes and parents, in Cedar's JSON entity format.
    #[schema(value_type = Option<Vec<Object>>)]
    entities: Option<Vec<Value>>,
    /// The bundle to evaluate; the tenant's active one when absent.
    #[schema(format = "uuid")]
    bundle_id: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = PolicyDecision)]
struct Verdict {
    decision: Outcome,
    /// The policies that decided: the permits that allowed, or the forbids
    /// that denied (empty when nothing permitted).
    determining_policies: Vec<String>,
    /// Policies that failed to evaluate (they count as not applying).
    errors: Vec<String>,
    bundle_id: Id,
    name: String,
    version: String,
}

/// Evaluates a request against a bundle and records the decision.
#[utoipa::path(post, path = "/api/policies/evaluate", tag = "sdk-policy", request_body = Evaluation,
    extensions(("x-concurrency" = json!({"outcome": "independent", "given": [["POST", "/api/policies/bundles", {"name": "p-{unique}", "version": 1, "iql_source": "permit (principal, action, resource);"}]], "body": {"principal": "Persona::\"a\"", "action": "Action::\"crm.contact.read\"", "resource": "Route::\"/api/crm/contacts\"", "bundle_id": "{bundle_id}"}}))),
    responses((status = 200, description = "the decision and the policies that determined it", body = Data<Verdict>)))]
async fn evaluate(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<Evaluation>) -> ApiResult<Data<Verdict>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let mut entity = |name: &str, raw: &str| match EntityUid::from_str(raw.trim()) {
        Ok(uid) => Some(uid),
        Err(_) => {
            check.fail(format!(r#"{name} must be a Cedar entity such as Type::"id""#));
            None
        }
    };
    let (principal, action, resource) = (entity("principal", &body.principal), entity("action", &body.action), entity("resource", &body.resource));
    let context = body.context.map(Value::Object);
    let entities = body.entities.map(Value::Array);
    let mut too_deep = false;
    for (field, value) in [("context", &context), ("entities", &entities)] {
        if value.as_ref().is_some_and(|v| json_depth(v) > MAX_JSON_NESTING) {
            check.fail(format!("{field} nests more than {MAX_JSON_NESTING} levels deep"));
            too_deep = true;
        }
    }
    let context = match context {
        _ if too_deep => None,
        None => Some(Context::empty()),
        Some(v) => Context::from_json_value(v, None).map_err(|e| check.fail(format!("context: {e}"))).ok(),
    };
    let entities = match entities {
        _ if too_deep => None,
        None => Some(Entities::empty()),
        Some(v) => Entities::from_json_value(v, None).map_err(|e| check.fail(format!("entities: {e}"))).ok(),
    };
    let bundle_id = check.optional_uuid("bundle_id", &body.bundle_id).map(|u| u.to_string());
    check.finish()?;
    let (Some(principal), Some(action), Some(resource), Some(context), Some(entities)) = (principal, action, resource, context, entities) else {
        return Err(ApiError::invalid("the request is incomplete"));
    };
    let request = Request::new(principal.clone(), action.clone(), resource.clone(), context, None).map_err(|e| ApiError::invalid(e.to_string()))?;
    let mut tx = state.db.begin().await?;
    let sql = format!("SELECT {COLUMNS} FROM policy_bundle WHERE tenant_id = $1 AND (bundle_id = $2 OR ($2 = '' AND status = 'active'))");
    let bundle: Option<Bundle> =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(bundle_id.clone().unwrap_or_default()).fetch_optional(&mut *tx).await?;
    let bundle = match (bundle, bundle_id) {
        (Some(b), _) => b,
        (None, Some(_)) => return Err(ApiError::invalid("bundle_id is not a policy bundle of this tenant")),
        (None, None) => return Err(ApiError::invalid("no policy bundle is active: name one with bundle_id")),
    };
    let (set, _) = compile_bounded(&bundle.iql_source).map_err(|e| ApiError::Internal(anyhow::anyhow!("a stored bundle no longer compiles: {e:?}")))?;
    let response = Authorizer::new().is_authorized(&request, &set, &entities);
    let mut determining: Vec<String> = response.diagnostics().reason().map(ToString::to_string).collect();
    determining.sort();
    let verdict = Verdict {
        decision: if response.decision() == Decision::Allow { Outcome::Allow } else { Outcome::Deny },
        determining_policies: determining,
        errors: response.diagnostics().errors().map(ToString::to_string).collect(),
        bundle_id: bundle.bundle_id,
        name: bundle.name,
        version: bundle.version,
    };
    let payload = json!({
        "bundle_id": verdict.bundle_id, "decision": verdict.decision, "determining_policies": verdict.determining_policies,
        "principal": principal.to_string(), "action": action.to_string(), "resource": resource.to_string(),
    });
    audit::record(&mut tx, &ctx, events::POLICY_DECISION_RECORDED, payload).await?;
    tx.commit().await?;
    Ok(ok(verdict))
}

/// A tenant's active bundle, compiled (None: no ABAC restriction).
struct Active(Option<(String, PolicySet)>, Decisions);

/// The gate's decisions under one compiled bundle. A decision is a pure
/// function of the bundle and the request (no entity store is consulted),
/// so it is kept until the bundle changes, which drops this whole value.
#[derive(Default)]
struct Decisions(std::sync::Mutex<std::collections::HashMap<String, Option<String>>>);

/// Decisions kept per tenant at most (then the map starts afresh).
const DECISIONS_CAP: usize = 10_000;

async fn active(state: &AppState, tenant_id: &str) -> ApiResult<Arc<Active>> {
    if let Some(found) = state.policies.get(tenant_id).and_then(|any| any.downcast::<Active>().ok()) {
        return Ok(found);
    }
    let generation = state.policies.generation();
    let row: Option<(String, String, String)> =
        sqlx::query_as("SELECT name, version, iql_source FROM policy_bundle WHERE tenant_id = $1 AND status = 'active'")
            .bind(tenant_id)
            .fetch_optional(&state.db.read)
            .await?;
    let compiled = match row {
        None => Active(None, Decisions::default()),
        Some((name, version, source)) => {
            let (set, _) = compile_bounded(&source).map_err(|e| ApiError::Internal(anyhow::anyhow!("a stored bundle no longer compiles: {e:?}")))?;
            Active(Some((format!("{name} version {version}"), set)), Decisions::default())
        }
    };
    let compiled = Arc::new(compiled);
    state.policies.put(generation, tenant_id.to_string(), compiled.clone() as Arc<dyn Any + Send + Sync>);
    Ok(compiled)
}

/// The entity types of the gate's requests, parsed once (parsing a type
/// name runs Cedar's parser).
static GATE_TYPES: LazyLock<(EntityTypeName, EntityTypeName, EntityTypeName)> =
    LazyLock::new(|| ["Persona", "Action", "Route"].map(|t| EntityTypeName::from_str(t).expect("a valid type name")).into());
static AUTHORIZER: LazyLock<Authorizer> = LazyLock::new(Authorizer::new);
static NO_ENTITIES: LazyLock<Entities> = LazyLock::new(Entities::empty);

/// The gate's ABAC step: principal `Persona::"<persona>"`, action
/// `Action::"<scope>"`, resource `Route::"<route template>"`, context
/// `{ tenant_id, actor_kind, method, path }`.
pub struct Policies;

impl PolicyDirectory for Policies {
    fn refusal<'a>(&'a self, state: &'a AppState, r: AbacRequest<'a>) -> Lookup<'a, Option<String>> {
        Box::pin(async move {
            let active = active(state, r.tenant_id).await?;
            let Some((label, set)) = &active.0 else { return Ok(None) };
            let key = [r.persona_id, r.actor_kind, r.action, r.method, r.route, r.path].join("\u{1f}");
            if let Some(known) = active.1.0.lock().expect("decisions").get(&key) {
                return Ok(known.clone());
            }
            let uid = |kind: &EntityTypeName, id: &str| EntityUid::from_type_name_and_id(kind.clone(), EntityId::new(id));
            let string = |v: &str| RestrictedExpression::new_string(v.to_string());
            let context = Context::from_pairs([
                ("tenant_id".to_string(), string(r.tenant_id)),
                ("actor_kind".to_string(), string(r.actor_kind)),
                ("method".to_string(), string(r.method)),
                ("path".to_string(), string(r.path)),
            ])
            .map_err(|e| ApiError::Internal(e.into()))?;
            let types = &*GATE_TYPES;
            let request = Request::new(uid(&types.0, r.persona_id), uid(&types.1, r.action), uid(&types.2, r.route), context, None)
                .map_err(|e| ApiError::Internal(e.into()))?;
            let response = AUTHORIZER.is_authorized(&request, set, &NO_ENTITIES);
            let refusal = (response.decision() != Decision::Allow).then(|| refusal(&response, label, &r));
            let mut kept = active.1.0.lock().expect("decisions");
            if kept.len() >= DECISIONS_CAP {
                kept.clear();
            }
            kept.insert(key, refusal.clone());
            Ok(refusal)
        })
    }
}

/// Why the bundle refuses: the forbidding policies, or that none permits.
fn refusal(response: &cedar_policy::Response, label: &str, r: &AbacRequest<'_>) -> String {
    let mut forbids: Vec<String> = response.diagnostics().reason().map(ToString::to_string).collect();
    forbids.sort();
    if forbids.is_empty() {
        format!("no policy of the tenant's bundle {label} permits {} on {}", r.action, r.route)
    } else {
        format!("the tenant's bundle {label} forbids {} on {} (policies {})", r.action, r.route, forbids.join(", "))
    }
}
