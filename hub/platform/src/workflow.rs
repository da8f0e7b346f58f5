//! sdk-workflow: versioned workflow definitions, registered or upserted
//! per (tenant, namespace, name, version): registering the same steps again
//! answers the stored one, other steps under a stored version replace its
//! steps (no run can reference a version: the hub runs no workflows), and a
//! registration without a version takes the next one.

use axum::response::IntoResponse;
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(register, list_definitions)).routes(routes!(get_definition))
}

/// A stored definition.
#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = WorkflowDefinition)]
struct Definition {
    definition_id: Id,
    tenant_id: String,
    namespace: String,
    name: String,
    version: i64,
    #[sqlx(try_from = "String")]
    #[schema(value_type = Vec<Object>)]
    step_specs: JsonText,
    created_by: String,
    created_at: Timestamp,
    /// When the steps last changed (`created_at` until they do).
    updated_at: Timestamp,
}

const COLUMNS: &str = "definition_id, tenant_id, namespace, name, version, step_specs, created_by, created_at, updated_at";

/// A registration's answer: the definition, and whether this call stored it.
#[derive(Serialize, ToSchema)]
#[schema(as = WorkflowRegistered)]
struct Registered {
    #[serde(flatten)]
    definition: Definition,
    created: bool,
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewWorkflowDefinition)]
struct NewDefinition {
    /// 1 to 128 characters of letters, digits, `.`, `_` or `-`.
    #[schema(max_length = 128)]
    name: String,
    /// Absent: the next version of the name.
    #[schema(minimum = 1, maximum = 2_147_483_647)]
    version: Option<i64>,
    /// As `name`; `default` when absent.
    #[schema(max_length = 128)]
    namespace: Option<String>,
    /// The steps, each an object with a non-blank string `name`, stored as
    /// given.
    #[schema(min_items = 1, max_items = 500)]
    step_specs: Vec<serde_json::Map<String, Value>>,
}

fn valid_name(s: &str) -> bool {
    (1..=128).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

fn check_name(check: &mut Check, field: &str, value: &str) {
    if !value.is_empty() && !valid_name(value) {
        check.fail(format!("{field} must be 1 to 128 letters, digits, '.', '_' or '-'"));
    }
}

/// The step list; each step needs a name (its other fields are free, so
/// its schema is any object). Stored in one spelling: the order of the
/// steps kept, the keys of every object sorted, so that the same steps
/// are the same text whatever order a client wrote their keys in (the
/// upsert compares the texts).
fn check_steps(check: &mut Check, steps: Vec<serde_json::Map<String, Value>>) -> Vec<Value> {
    for (i, step) in steps.iter().enumerate() {
        if step.get("name").and_then(Value::as_str).is_none_or(|n| n.trim().is_empty()) {
            check.fail(format!("step_specs[{i}] must be an object with a string name"));
        }
    }
    steps.into_iter().map(|step| sorted(Value::Object(step))).collect()
}

/// `value` with the keys of each of its objects in sorted order.
fn sorted(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}

async fn find(exec: &mut Tx, tenant_id: &str, namespace: &str, name: &str, version: Option<i64>) -> ApiResult<Option<Definition>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM workflow_definition WHERE tenant_id = $1 AND namespace = $2 AND name = $3 AND ($4 = 0 OR version = $4) \
         ORDER BY version DESC LIMIT 1"
    );
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(namespace).bind(name).bind(version.unwrap_or(0)).fetch_optional(&mut **exec).await?)
}

/// The next version of a name: the name's sequence (concurrent
/// registrations queue on it, each taking a version of its own), moved past
/// a version registered explicitly ahead of it.
async fn next_version(tx: &mut Tx, tenant_id: &str, namespace: &str, name: &str) -> ApiResult<i64> {
    let floor = "SELECT MAX(version) FROM workflow_definition WHERE tenant_id = $1 AND namespace || '/' || name = $3";
    let sequence = format!("workflow_definition {namespace}/{name}");
    let next = next_number(tx, tenant_id, &sequence, floor, &format!("{namespace}/{name}")).await?;
    let highest: Option<i64> = sqlx::query_scalar("SELECT MAX(version) FROM workflow_definition WHERE tenant_id = $1 AND namespace = $2 AND name = $3")
        .bind(tenant_id)
        .bind(namespace)
        .bind(name)
        .fetch_one(&mut **tx)
        .await?;
    match highest {
        Some(h) if h >= next => {
            sqlx::query("UPDATE tenant_sequence SET last = $3 WHERE tenant_id = $1 AND name = $2")
                .bind(tenant_id)
                .bind(&sequence)
                .bind(h + 1)
                .execute(&mut **tx)
                .await?;
            Ok(h + 1)
        }
        _ => Ok(next),
    }
}

/// Registers a definition (201), or upserts a stored version: other steps
/// replace its steps (200, `updated_at` moves, an event), the same steps
/// answer it unchanged (200, no event).
#[utoipa::path(post, path = "/api/workflows/definitions", tag = "sdk-workflow", request_body = NewDefinition,
    extensions(("x-concurrency" = json!({ "outcome": "same-answer", "events": 1,
        "given": [["POST", "/api/workflows/definitions", { "name": "race-{unique}", "version": 1, "step_specs": [{ "name": "one" }] }]],
        "body": { "name": "race-{unique}", "version": 1, "step_specs": [{ "name": "two" }] } }))),
    responses((status = 201, description = "stored", body = Data<Registered>),
        (status = 200, description = "a stored version: its steps replaced, or the same steps, unchanged", body = Data<Registered>)))]
async fn register(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewDefinition>) -> ApiResult<Response> {
    let body = body.checked()?;
    let mut check = Check::new();
    let name = body.name.trim().to_string();
    check_name(&mut check, "name", &name);
    let namespace = Check::optional(&body.namespace).unwrap_or_else(|| "default".into());
    check_name(&mut check, "namespace", &namespace);
    let version = body.version;
    let steps = check_steps(&mut check, body.step_specs);
    check.finish()?;
    let steps = Value::Array(steps);
    let mut tx = state.db.begin().await?;
    let (version, on_conflict) = match version {
        // A version named: one statement stores it, or replaces the steps
        // of the stored one when they differ (concurrent upserts queue on
        // the row; each answers the steps it wrote). When workflow runs
        // exist, a version a run references will be kept out of the
        // update here (and answered 409); the hub runs none today.
        Some(v) => (
            v,
            "DO UPDATE SET step_specs = excluded.step_specs, updated_at = excluded.updated_at \
             WHERE workflow_definition.step_specs <> excluded.step_specs",
        ),
        // The next version: it never replaces a version registered by name
        // at the same moment (that one is found, below).
        None => (next_version(&mut tx, &ctx.tenant_id, &namespace, &name).await?, "DO NOTHING"),
    };
    // Stored (201: the row carries this call's id), replaced (200: the
    // stored id, an event), or found unchanged (200, no event): never a
    // unique violation.
    let insert = format!(
        "INSERT INTO workflow_definition (definition_id, tenant_id, namespace, name, version, step_specs, created_by, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8) ON CONFLICT (tenant_id, namespace, name, version) {on_conflict} RETURNING {COLUMNS}"
    );
    let read = format!("SELECT {COLUMNS} FROM workflow_definition WHERE tenant_id = $1 AND namespace = $2 AND name = $3 AND version = $4");
    let id = db::new_id();
    let (definition, written): (Definition, _) = insert_or_read(
        &mut tx,
        sqlx::query_as(sqlx::AssertSqlSafe(insert))
            .bind(&id)
            .bind(&ctx.tenant_id)
            .bind(&namespace)
            .bind(&name)
            .bind(version)
            .bind(steps.to_string())
            .bind(audit::actor_of(&ctx).1)
            .bind(db::now()),
        sqlx::query_as(sqlx::AssertSqlSafe(read)).bind(&ctx.tenant_id).bind(&namespace).bind(&name).bind(version),
    )
    .await?;
    if written == Written::Found {
        if definition.step_specs.0 == steps {
            return Ok(ok(Registered { definition, created: false }).into_response());
        }
        // Only a registration without a version gets here: the version it
        // was given was registered by name meanwhile.
        return Err(ApiError::Conflict(format!("{namespace}/{name} version {version} was registered meanwhile with other steps; register again")));
    }
    // Stored: `registered`; its steps replaced: `updated`.
    let stored = definition.definition_id == id;
    let payload = json!({ "definition_id": definition.definition_id, "namespace": namespace, "name": name, "version": version, "created": stored });
    let event = if stored { events::WORKFLOW_DEFINITION_REGISTERED } else { events::WORKFLOW_DEFINITION_UPDATED };
    audit::record(&mut tx, &ctx, event, payload).await?;
    tx.commit().await?;
    let answer = Registered { definition, created: stored };
    Ok(if stored { created(answer).into_response() } else { ok(answer).into_response() })
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct DefinitionQuery {
    /// Only this namespace's (every namespace when absent).
    #[param(max_length = 128)]
    namespace: Option<String>,
    /// Only the versions of this name.
    #[param(max_length = 128)]
    name: Option<String>,
}

/// A page of the caller's tenant's definitions, every version, newest
/// first.
#[utoipa::path(get, path = "/api/workflows/definitions", tag = "sdk-workflow", params(DefinitionQuery, Page),
    responses((status = 200, description = "a page of definitions", body = ListOf<Definition>)))]
async fn list_definitions(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<DefinitionQuery>, page: Page) -> ApiResult<ListOf<Definition>> {
    let mut check = Check::new();
    let namespace = Check::optional(&q.namespace).unwrap_or_default();
    check_name(&mut check, "namespace", &namespace);
    let name = Check::optional(&q.name).unwrap_or_default();
    check_name(&mut check, "name", &name);
    check.finish()?;
    let listing = Listing {
        table: "workflow_definition",
        columns: COLUMNS,
        filter: "tenant_id = $1 AND ($2 = '' OR namespace = $2) AND ($3 = '' OR name = $3)",
        order: "created_at DESC, definition_id DESC",
    };
    page.list::<Definition>(&state.db.read, &listing, &[&ctx.tenant_id, &namespace, &name]).await
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct Which {
    /// `default` when absent.
    namespace: Option<String>,
    /// Absent: the latest.
    #[param(minimum = 1)]
    version: Option<i64>,
}

/// A definition by name: the latest version, or the one asked for.
#[utoipa::path(get, path = "/api/workflows/definitions/{name}", tag = "sdk-workflow", params(("name" = String, Path, description = "the definition's name"), Which),
    responses((status = 200, description = "the definition", body = Data<Definition>)))]
async fn get_definition(State(state): State<AppState>, Tenant(ctx): Tenant, Path(name): Path<String>, Params(q): Params<Which>) -> ApiResult<Data<Definition>> {
    let namespace = Check::optional(&q.namespace).unwrap_or_else(|| "default".into());
    let version = q.version;
    if !valid_name(&name) || !valid_name(&namespace) {
        return Err(ApiError::NotFound);
    }
    let mut tx = state.db.begin().await?;
    let found = find(&mut tx, &ctx.tenant_id, &namespace, &name, version).await?;
    tx.commit().await?;
    Ok(ok(found.ok_or(ApiError::NotFound)?))
}
