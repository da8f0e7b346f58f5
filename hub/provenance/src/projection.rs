//! sdk-projection: what is known of a subject, folded from an append-only
//! log of assertions (`attribute` = `value`, as of `asserted_at`). A
//! rebuild takes the latest assertion of each attribute (by `asserted_at`,
//! then the order they were recorded in; a `null` value retracts the
//! attribute) and keeps the result as the subject's snapshot, with the
//! SHA-256 of its canonical JSON; a rebuild that finds the same content
//! writes nothing. Subjects are named by the tenant and registered first,
//! so that a path names an existing subject of the caller's tenant (any
//! other is 404, another tenant's too, and a mistyped name is not a new
//! subject).

use hub_kernel::{crypto, prelude::*};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(register, list_subjects))
        .routes(routes!(get_snapshot))
        .routes(routes!(record, list_assertions))
        .routes(routes!(rebuild))
}

/// The largest assertion value, as JSON text.
const MAX_VALUE_BYTES: usize = 64 * 1024;

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = ProjectionSubject)]
struct Subject {
    subject_id: String,
    /// Assertions recorded so far.
    assertion_count: i64,
    created_at: Timestamp,
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = ProjectionAssertion)]
struct Assertion {
    assertion_id: Id,
    subject_id: String,
    /// The order it was recorded in, from 1 per subject.
    seq: i64,
    attribute: String,
    /// Any JSON; `null` retracts the attribute.
    #[sqlx(try_from = "String")]
    value: JsonText,
    source: Option<String>,
    asserted_at: Timestamp,
    recorded_by: String,
    recorded_at: Timestamp,
}

const ASSERTION_COLUMNS: &str = "assertion_id, subject_id, seq, attribute, value, source, asserted_at, recorded_by, recorded_at";

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = ProjectionSnapshot)]
struct Snapshot {
    subject_id: String,
    /// Attribute to its latest value.
    #[sqlx(try_from = "String")]
    #[schema(value_type = Object)]
    state: JsonText,
    /// SHA-256 (hex) of `state` as canonical JSON: keys sorted, no spaces.
    content_hash: String,
    /// The assertions of the log when this snapshot was written.
    assertion_count: i64,
    rebuilt_at: Timestamp,
}

const SNAPSHOT_COLUMNS: &str = "subject_id, state, content_hash, assertion_count, rebuilt_at";

/// A rebuild's answer: the snapshot, and whether the rebuild changed it.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ProjectionRebuild)]
struct Rebuilt {
    #[serde(flatten)]
    snapshot: Snapshot,
    /// False when the content was the snapshot's already (nothing written).
    changed: bool,
}

/// A subject name: 1 to 128 characters, no control character, no
/// surrounding space.
fn subject_name(s: &str) -> bool {
    (1..=128).contains(&s.chars().count()) && !s.chars().any(char::is_control) && s.trim() == s
}

/// JSON with object keys sorted (by code point) and no insignificant space:
/// the same content is the same text, whatever order it was written in.
fn canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                out.push_str(if i == 0 { "" } else { "," });
                out.push_str(&Value::from(k.as_str()).to_string());
                out.push(':');
                canonical(&m[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                out.push_str(if i == 0 { "" } else { "," });
                canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewProjectionSubject)]
struct NewSubject {
    /// The tenant's own name for it: no control character, no
    /// surrounding space.
    #[schema(max_length = 128)]
    subject_id: String,
}

/// Registers a subject (a name already registered is 409).
#[utoipa::path(post, path = "/api/projections", tag = "sdk-projection", request_body = NewSubject,
    extensions(("x-concurrency" = json!({"outcome": "one-wins", "events": 0, "body": {"subject_id": "s-{unique}"}}))),
    responses((status = 201, description = "the subject, with no assertion yet", body = Data<Subject>)))]
async fn register(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewSubject>) -> ApiResult<Created<Subject>> {
    let subject = body.checked()?.subject_id;
    if !subject_name(&subject) {
        return Err(ApiError::invalid("subject_id must be 1 to 128 characters, without control characters or surrounding spaces"));
    }
    let mut tx = state.db.begin().await?;
    let subject: Subject = sqlx::query_as(
        "INSERT INTO projection_subject (tenant_id, subject_id, assertion_count, created_by, created_at) VALUES ($1, $2, 0, $3, $4) \
         RETURNING subject_id, assertion_count, created_at",
    )
    .bind(&ctx.tenant_id)
    .bind(&subject)
    .bind(audit::actor_of(&ctx).1)
    .bind(db::now())
    .fetch_one(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(created(subject))
}

/// The tenant's registered subjects, newest first.
#[utoipa::path(get, path = "/api/projections", tag = "sdk-projection", params(Page),
    responses((status = 200, description = "one page of subjects", body = ListOf<Subject>)))]
async fn list_subjects(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page) -> ApiResult<ListOf<Subject>> {
    let listing = Listing {
        table: "projection_subject",
        columns: "subject_id, assertion_count, created_at",
        filter: "tenant_id = $1",
        order: "created_at DESC, subject_id DESC",
    };
    page.list::<Subject>(&state.db.read, &listing, &[&ctx.tenant_id]).await
}

/// Adds `appended` to the count of the caller's subject, which locks it
/// for the transaction (appends and rebuilds of one subject take turns),
/// and answers the new count; 404 when the tenant has no such subject.
async fn lock_subject(tx: &mut Tx, ctx: &TenantCtx, subject_id: &str, appended: i64) -> ApiResult<i64> {
    if !subject_name(subject_id) {
        return Err(ApiError::NotFound);
    }
    let count: Option<i64> = sqlx::query_scalar(
        "UPDATE projection_subject SET assertion_count = assertion_count + $3 WHERE tenant_id = $1 AND subject_id = $2 RETURNING assertion_count",
    )
    .bind(&ctx.tenant_id)
    .bind(subject_id)
    .bind(appended)
    .fetch_optional(&mut **tx)
    .await?;
    count.ok_or(ApiError::NotFound)
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewProjectionAssertion)]
struct NewAssertion {
    /// No control characters.
    #[schema(max_length = 128)]
    attribute: String,
    /// Required (400 when absent): any JSON of at most 64 KiB; `null`
    /// retracts the attribute. (The schema cannot say "required, and may
    /// be null" in a way the body's check reads, so the handler checks that
    /// it is present.)
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Value>)]
    value: Option<Value>,
    /// Who stated it.
    #[schema(max_length = 128)]
    source: Option<String>,
    /// When it held; now when absent.
    #[schema(format = DateTime)]
    asserted_at: Option<String>,
}

/// A field that is present, `null` included (absent stays `None`).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// Appends an assertion to the subject's log.
#[utoipa::path(post, path = "/api/projections/{subject_id}/assertions", tag = "sdk-projection", request_body = NewAssertion,
    params(("subject_id" = String, Path, description = "the tenant's subject")),
    extensions(("x-concurrency" = json!({"outcome": "independent", "given": [["POST", "/api/projections", {"subject_id": "s-{unique}"}]], "body": {"attribute": "colour", "value": "red"}}))),
    responses((status = 201, description = "the assertion, recorded", body = Data<Assertion>)))]
async fn record(State(state): State<AppState>, Tenant(ctx): Tenant, Path(subject_id): Path<String>, body: Body<NewAssertion>) -> ApiResult<Created<Assertion>> {
    let mut tx = state.db.begin().await?;
    let seq = lock_subject(&mut tx, &ctx, &subject_id, 1).await?;
    let body = body.checked()?;
    let mut check = Check::new();
    let attribute = body.attribute.trim().to_string();
    if attribute.chars().any(char::is_control) {
        check.fail("attribute must be at most 128 characters, without control characters");
    }
    match &body.value {
        None => check.fail("value is required"),
        Some(v) if v.to_string().len() > MAX_VALUE_BYTES => check.fail(format!("value must be at most {MAX_VALUE_BYTES} bytes of JSON")),
        Some(_) => {}
    }
    let source = Check::optional(&body.source);
    let asserted_at = check.time_or_now("asserted_at", &body.asserted_at);
    check.finish()?;
    let sql = format!(
        "INSERT INTO projection_assertion (tenant_id, {ASSERTION_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING {ASSERTION_COLUMNS}"
    );
    let assertion: Assertion = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&ctx.tenant_id)
        .bind(db::new_id())
        .bind(&subject_id)
        .bind(seq)
        .bind(&attribute)
        .bind(body.value.unwrap_or_default().to_string())
        .bind(&source)
        .bind(&asserted_at)
        .bind(audit::actor_of(&ctx).1)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
    let payload = json!({ "subject_id": subject_id, "assertion_id": assertion.assertion_id, "attribute": attribute, "seq": assertion.seq });
    audit::record(&mut tx, &ctx, events::PROJECTION_ASSERTION_RECORDED, payload).await?;
    tx.commit().await?;
    Ok(created(assertion))
}

/// The subject's log, in the order it was recorded.
#[utoipa::path(get, path = "/api/projections/{subject_id}/assertions", tag = "sdk-projection",
    params(("subject_id" = String, Path, description = "the tenant's subject"), Page),
    responses((status = 200, description = "one page of the log", body = ListOf<Assertion>)))]
async fn list_assertions(State(state): State<AppState>, Tenant(ctx): Tenant, Path(subject_id): Path<String>, page: Page) -> ApiResult<ListOf<Assertion>> {
    let known: Option<String> = sqlx::query_scalar("SELECT subject_id FROM projection_subject WHERE tenant_id = $1 AND subject_id = $2")
        .bind(&ctx.tenant_id)
        .bind(&subject_id)
        .fetch_optional(&state.db.read)
        .await?;
    known.ok_or(ApiError::NotFound)?;
    let listing = Listing { table: "projection_assertion", columns: ASSERTION_COLUMNS, filter: "tenant_id = $1 AND subject_id = $2", order: "seq" };
    page.list::<Assertion>(&state.db.read, &listing, &[&ctx.tenant_id, &subject_id]).await
}

/// The subject's latest snapshot (404 before its first rebuild).
#[utoipa::path(get, path = "/api/projections/{subject_id}", tag = "sdk-projection", params(("subject_id" = String, Path, description = "the tenant's subject")),
    responses((status = 200, description = "the snapshot", body = Data<Snapshot>)))]
async fn get_snapshot(State(state): State<AppState>, Tenant(ctx): Tenant, Path(subject_id): Path<String>) -> ApiResult<Data<Snapshot>> {
    let sql = format!("SELECT {SNAPSHOT_COLUMNS} FROM projection_snapshot WHERE tenant_id = $1 AND subject_id = $2");
    let found: Option<Snapshot> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&subject_id).fetch_optional(&state.db.read).await?;
    Ok(ok(found.ok_or(ApiError::NotFound)?))
}

/// Folds the subject's log into its snapshot. Idempotent: 200 every time;
/// the same content as the current snapshot writes nothing.
#[utoipa::path(post, path = "/api/projections/{subject_id}/rebuild", tag = "sdk-projection", params(("subject_id" = String, Path, description = "the tenant's subject")),
    extensions(("x-concurrency" = json!({"outcome": "independent", "events": 1, "given": [["POST", "/api/projections", {"subject_id": "s-{unique}"}], ["POST", "/api/projections/{subject_id}/assertions", {"attribute": "colour", "value": "red"}]]}))),
    responses((status = 200, description = "the snapshot, and whether it changed", body = Data<Rebuilt>)))]
async fn rebuild(State(state): State<AppState>, Tenant(ctx): Tenant, Path(subject_id): Path<String>) -> ApiResult<Data<Rebuilt>> {
    let mut tx = state.db.begin().await?;
    let count = lock_subject(&mut tx, &ctx, &subject_id, 0).await?;
    let latest: Vec<(String, String)> = sqlx::query_as(
        "SELECT attribute, value FROM (SELECT attribute, value, ROW_NUMBER() OVER (PARTITION BY attribute ORDER BY asserted_at DESC, seq DESC) AS rn \
         FROM projection_assertion WHERE tenant_id = $1 AND subject_id = $2) latest WHERE rn = 1",
    )
    .bind(&ctx.tenant_id)
    .bind(&subject_id)
    .fetch_all(&mut *tx)
    .await?;
    let mut content = serde_json::Map::new();
    for (attribute, value) in latest {
        let value = JsonText::from(value).0;
        if !value.is_null() {
            content.insert(attribute, value);
        }
    }
    let mut text = String::new();
    canonical(&Value::Object(content), &mut text);
    let hash = crypto::sha256_hex(text.as_bytes());
    let sql = format!("SELECT {SNAPSHOT_COLUMNS} FROM projection_snapshot WHERE tenant_id = $1 AND subject_id = $2");
    let current: Option<Snapshot> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&subject_id).fetch_optional(&mut *tx).await?;
    let previous = match current {
        Some(snapshot) if snapshot.content_hash == hash => {
            // Nothing to write; the rollback releases the subject.
            tx.rollback().await?;
            return Ok(ok(Rebuilt { snapshot, changed: false }));
        }
        other => other.map(|s| s.content_hash),
    };
    let sql = format!(
        "INSERT INTO projection_snapshot (tenant_id, {SNAPSHOT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (tenant_id, subject_id) DO UPDATE \
         SET state = excluded.state, content_hash = excluded.content_hash, assertion_count = excluded.assertion_count, rebuilt_at = excluded.rebuilt_at \
         RETURNING {SNAPSHOT_COLUMNS}"
    );
    let snapshot: Snapshot = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&ctx.tenant_id)
        .bind(&subject_id)
        .bind(&text)
        .bind(&hash)
        .bind(count)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
    let payload = json!({ "subject_id": subject_id, "content_hash": hash, "previous_hash": previous, "assertion_count": count });
    audit::record(&mut tx, &ctx, events::PROJECTION_SNAPSHOT_REBUILT, payload).await?;
    tx.commit().await?;
    Ok(ok(Rebuilt { snapshot, changed: true }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_json_sorts_keys_at_every_depth_and_keeps_arrays_in_order() {
        let mut text = String::new();
        canonical(&json!({ "b": [3, { "z": 1, "a": "é\"" }], "a": null, "ä": 1.5 }), &mut text);
        assert_eq!(text, r#"{"a":null,"b":[3,{"a":"é\"","z":1}],"ä":1.5}"#);
    }

    #[test]
    fn subject_names_are_the_tenants_within_bounds() {
        assert!(subject_name("customer 42/eu") && subject_name(&"é".repeat(128)));
        assert!(!subject_name("") && !subject_name(&"x".repeat(129)) && !subject_name(" x") && !subject_name("a\nb"));
    }
}
