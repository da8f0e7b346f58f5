//! sdk-engagement: encounters (a visit, a session, a case worked with a
//! customer) from `open` through `closed` to `sealed`. Closing stamps the
//! retention deadline from the encounter's retention policy; sealing makes
//! it final (nothing changes a sealed encounter). The content of an
//! encounter lives elsewhere, encrypted under the key `vault_key_ref`
//! names; the hub keeps the reference only.

use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(open, list)).routes(routes!(get_encounter, update)).routes(routes!(close)).routes(routes!(seal))
}

/// How long each retention policy keeps a closed encounter, in days:
/// `operational` 90 days, `regulated` seven years (as the audit retention
/// classes of the same names), `custom` the body's `retention_days`.
const REGULATED_DAYS: i64 = 2557;
const OPERATIONAL_DAYS: i64 = 90;

stored_enum! {
    /// How long a closed encounter is kept.
    #[schema(as = EngagementRetentionPolicy)]
    pub enum Policy { Operational = "operational", Regulated = "regulated", Custom = "custom" }
}

stored_enum! {
    /// Where an encounter is in its life.
    #[schema(as = EngagementEncounterState)]
    pub enum EncounterState { Open = "open", Closed = "closed", Sealed = "sealed" }
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = EngagementEncounter)]
struct Encounter {
    encounter_id: Id,
    state: EncounterState,
    /// What the encounter is about (at most 64 of `a-z 0-9 . _ -`: `visit`, `consultation`, ...).
    kind: String,
    /// The key (an sdk-vault or sdk-secrets reference) the encounter's content is encrypted under.
    vault_key_ref: Option<String>,
    retention_policy: Policy,
    /// Days the encounter is kept after it closes.
    retention_days: i64,
    /// `closed_at` plus `retention_days` (null while open).
    retention_expires_at: Option<Timestamp>,
    /// The encounter this one follows up (same tenant).
    parent_encounter_id: Option<Id>,
    /// A canonical address of the tenant (sdk-geo).
    address_id: Option<Id>,
    /// The billing account or order the encounter is charged to (opaque).
    billing_ref: Option<String>,
    /// A contact of the tenant's CRM.
    contact_id: Option<Id>,
    opened_by: String,
    opened_at: Timestamp,
    closed_at: Option<Timestamp>,
    sealed_at: Option<Timestamp>,
    updated_at: Timestamp,
}

const COLUMNS: &str = "encounter_id, state, kind, vault_key_ref, retention_policy, retention_days, retention_expires_at, parent_encounter_id, \
                       address_id, billing_ref, contact_id, opened_by, opened_at, closed_at, sealed_at, updated_at";

fn valid_kind(s: &str) -> bool {
    (1..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-'))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewEngagementEncounter)]
struct NewEncounter {
    /// At most 64 of `a-z 0-9 . _ -`; `visit` when absent.
    kind: Option<String>,
    #[schema(max_length = 256)]
    vault_key_ref: Option<String>,
    /// `operational` (default: 90 days), `regulated` (seven years) or `custom` (with `retention_days`).
    retention_policy: Option<Policy>,
    /// Required with `custom`, refused otherwise.
    #[schema(minimum = 1, maximum = 36500)]
    retention_days: Option<i64>,
    #[schema(format = "uuid")]
    parent_encounter_id: Option<String>,
    #[schema(format = "uuid")]
    address_id: Option<String>,
    #[schema(max_length = 256)]
    billing_ref: Option<String>,
    #[schema(format = "uuid")]
    contact_id: Option<String>,
}

async fn exists(tx: &mut Tx, sql: &'static str, tenant: &str, id: &Option<String>) -> ApiResult<bool> {
    let Some(id) = id else { return Ok(true) };
    let found: Option<i64> = sqlx::query_scalar(sql).bind(tenant).bind(id).fetch_optional(&mut **tx).await?;
    Ok(found.is_some())
}

/// Opens an encounter.
#[utoipa::path(post, path = "/api/engagement/encounters", tag = "sdk-engagement", request_body = NewEncounter,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "body": {} }))),
    responses((status = 201, description = "the encounter, open", body = Data<Encounter>)))]
async fn open(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewEncounter>) -> ApiResult<Created<Encounter>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let kind = Check::optional(&body.kind).unwrap_or_else(|| "visit".to_string());
    if !valid_kind(&kind) {
        check.fail("kind must be 1 to 64 of a-z, 0-9, '.', '_' or '-'");
    }
    let vault_key_ref = Check::optional(&body.vault_key_ref);
    let retention = body.retention_policy.unwrap_or(Policy::Operational);
    let policy = retention;
    let days = match (retention, body.retention_days) {
        (Policy::Custom, Some(d)) => d,
        (Policy::Custom, None) => {
            check.fail("retention_days is required with retention_policy custom");
            0
        }
        (_, Some(_)) => {
            check.fail("retention_days is only for retention_policy custom");
            0
        }
        (Policy::Regulated, None) => REGULATED_DAYS,
        (Policy::Operational, None) => OPERATIONAL_DAYS,
    };
    let parent = canonical_uuid_opt(&body.parent_encounter_id);
    let address = canonical_uuid_opt(&body.address_id);
    let billing_ref = Check::optional(&body.billing_ref);
    let contact = canonical_uuid_opt(&body.contact_id);
    check.finish()?;
    let mut tx = state.db.begin().await?;
    let mut check = Check::new();
    if !exists(&mut tx, "SELECT 1 FROM engagement_encounter WHERE tenant_id = $1 AND encounter_id = $2", &ctx.tenant_id, &parent).await? {
        check.fail("parent_encounter_id is not an encounter of this tenant");
    }
    if !exists(&mut tx, "SELECT 1 FROM geo_address WHERE tenant_id = $1 AND address_id = $2", &ctx.tenant_id, &address).await? {
        check.fail("address_id is not an address of this tenant");
    }
    if !exists(&mut tx, "SELECT 1 FROM crm_contact WHERE tenant_id = $1 AND contact_id = $2 AND erased_at IS NULL", &ctx.tenant_id, &contact).await? {
        check.fail("contact_id is not a contact of this tenant");
    }
    check.finish()?;
    let now = db::now();
    let sql = format!(
        "INSERT INTO engagement_encounter (encounter_id, tenant_id, state, kind, vault_key_ref, retention_policy, retention_days, parent_encounter_id, \
         address_id, billing_ref, contact_id, opened_by, opened_at, updated_at) VALUES ($1, $2, 'open', $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12) \
         RETURNING {COLUMNS}"
    );
    let encounter: Encounter = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(&kind)
        .bind(&vault_key_ref)
        .bind(policy)
        .bind(days)
        .bind(&parent)
        .bind(&address)
        .bind(&billing_ref)
        .bind(&contact)
        .bind(audit::actor_of(&ctx).1)
        .bind(&now)
        .fetch_one(&mut *tx)
        .await?;
    let payload = json!({ "encounter_id": encounter.encounter_id, "kind": kind, "retention_policy": policy, "parent_encounter_id": parent });
    audit::record(&mut tx, &ctx, events::ENGAGEMENT_ENCOUNTER_OPENED, payload).await?;
    tx.commit().await?;
    Ok(created(encounter))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct Filter {
    /// Only the encounters in this state.
    #[param(inline)]
    state: Option<EncounterState>,
    /// Only the encounters of this contact.
    #[param(format = "uuid")]
    contact_id: Option<String>,
}

/// The tenant's encounters, most recently opened first.
#[utoipa::path(get, path = "/api/engagement/encounters", tag = "sdk-engagement", params(Filter, Page),
    responses((status = 200, description = "one page of encounters", body = ListOf<Encounter>)))]
async fn list(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page, Params(q): Params<Filter>) -> ApiResult<ListOf<Encounter>> {
    let st = q.state.map(EncounterState::as_str).unwrap_or_default();
    let contact = canonical_uuid_opt(&q.contact_id).unwrap_or_default();
    let listing = Listing {
        table: "engagement_encounter",
        columns: COLUMNS,
        filter: "tenant_id = $1 AND ($2 = '' OR state = $2) AND ($3 = '' OR contact_id = $3)",
        order: "opened_at DESC, encounter_id DESC",
    };
    page.list::<Encounter>(&state.db.read, &listing, &[&ctx.tenant_id, st, &contact]).await
}

async fn find<'e, E>(exec: E, tenant_id: &str, id: &str) -> ApiResult<Encounter>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    let id = path_id(id)?.to_string();
    let sql = format!("SELECT {COLUMNS} FROM engagement_encounter WHERE tenant_id = $1 AND encounter_id = $2");
    let found: Option<Encounter> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(&id).fetch_optional(exec).await?;
    found.ok_or(ApiError::NotFound)
}

/// One encounter.
#[utoipa::path(get, path = "/api/engagement/encounters/{encounter_id}", tag = "sdk-engagement",
    params(("encounter_id" = String, Path, description = "the encounter")),
    responses((status = 200, description = "the encounter", body = Data<Encounter>)))]
async fn get_encounter(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Encounter>> {
    Ok(ok(find(&state.db.read, &ctx.tenant_id, &id).await?))
}

/// The encounter as guarded writes name it.
const ENCOUNTER: Stateful = Stateful { noun: "encounter", table: "engagement_encounter", key: "encounter_id", state: "state" };

/// Moves an encounter from `from` to `to` in one guarded statement,
/// stamping the time (and, on closing, the retention deadline), with its
/// event: 404 unknown, 409 in any other state. Of several requests at
/// once, one moves it and records the event.
async fn transition(state: &AppState, ctx: &TenantCtx, id: &str, from: EncounterState, to: EncounterState, event: &'static str) -> ApiResult<Data<Encounter>> {
    let id = path_id(id)?.to_string();
    let mut tx = state.db.begin().await?;
    let now = chrono::Utc::now();
    let at = db::format_time(now);
    // Closing stamps the retention deadline. `retention_days` never changes
    // once the encounter is opened, so it may come from a read; the state
    // is decided by the statement below. Sealing needs no read.
    let expires = match to {
        EncounterState::Closed => {
            let encounter = find(&mut *tx, &ctx.tenant_id, &id).await?;
            db::add_seconds(now, encounter.retention_days * 86_400).map(db::format_time)
        }
        _ => None,
    };
    let sql = if to == EncounterState::Closed {
        format!(
            "UPDATE engagement_encounter SET state = 'closed', closed_at = $4, retention_expires_at = $5, updated_at = $4 \
             WHERE tenant_id = $1 AND encounter_id = $2 AND state = $3 RETURNING {COLUMNS}"
        )
    } else {
        format!(
            "UPDATE engagement_encounter SET state = 'sealed', sealed_at = $4, updated_at = $4 \
             WHERE tenant_id = $1 AND encounter_id = $2 AND state = $3 RETURNING {COLUMNS}"
        )
    };
    let mut query = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).bind(from).bind(&at);
    if to == EncounterState::Closed {
        query = query.bind(expires);
    }
    let moved: Option<Encounter> = query.fetch_optional(&mut *tx).await?;
    let updated = ENCOUNTER.settle(&mut tx, &ctx.tenant_id, &id, moved, &format!("only {from} encounters can be {to}")).await?;
    let payload = json!({ "encounter_id": updated.encounter_id, "state": to, "retention_expires_at": updated.retention_expires_at });
    audit::record(&mut tx, ctx, event, payload).await?;
    tx.commit().await?;
    Ok(ok(updated))
}

/// Closes an open encounter and stamps its retention deadline; 409 unless open.
#[utoipa::path(post, path = "/api/engagement/encounters/{encounter_id}/close", tag = "sdk-engagement",
    params(("encounter_id" = String, Path, description = "the encounter")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/api/engagement/encounters", {}]] }))),
    responses((status = 200, description = "the encounter, closed", body = Data<Encounter>)))]
async fn close(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Encounter>> {
    transition(&state, &ctx, &id, EncounterState::Open, EncounterState::Closed, events::ENGAGEMENT_ENCOUNTER_CLOSED).await
}

/// Seals a closed encounter: final; 409 unless closed.
#[utoipa::path(post, path = "/api/engagement/encounters/{encounter_id}/seal", tag = "sdk-engagement",
    params(("encounter_id" = String, Path, description = "the encounter")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/api/engagement/encounters", {}], ["POST", "/api/engagement/encounters/{encounter_id}/close", null]] }))),
    responses((status = 200, description = "the encounter, sealed", body = Data<Encounter>)))]
async fn seal(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Encounter>> {
    transition(&state, &ctx, &id, EncounterState::Closed, EncounterState::Sealed, events::ENGAGEMENT_ENCOUNTER_SEALED).await
}

/// A change of an open encounter: the given fields replace the stored
/// ones, absent fields stay; at least one is required.
#[derive(Deserialize, ToSchema)]
#[schema(as = EngagementEncounterChange)]
struct Change {
    #[schema(max_length = 256)]
    vault_key_ref: Option<String>,
    /// Another encounter of the tenant, not one that follows up this one.
    #[schema(format = "uuid")]
    parent_encounter_id: Option<String>,
    #[schema(format = "uuid")]
    address_id: Option<String>,
    #[schema(max_length = 256)]
    billing_ref: Option<String>,
    #[schema(format = "uuid")]
    contact_id: Option<String>,
}

/// Whether `parent` (or an encounter it follows up) is `id` itself: the
/// change would make the follow-up chain a cycle.
async fn follows_up(tx: &mut Tx, tenant: &str, id: &str, parent: &str) -> ApiResult<bool> {
    let mut at = Some(parent.to_string());
    // A chain longer than any real one ends the walk.
    for _ in 0..1000 {
        let Some(current) = at else { return Ok(false) };
        if current == id {
            return Ok(true);
        }
        at = sqlx::query_scalar("SELECT parent_encounter_id FROM engagement_encounter WHERE tenant_id = $1 AND encounter_id = $2")
            .bind(tenant)
            .bind(&current)
            .fetch_optional(&mut **tx)
            .await?
            .flatten();
    }
    Ok(true)
}

/// Changes an open encounter's references and vault key reference (kind
/// and retention are fixed at opening); 409 unless open.
#[utoipa::path(patch, path = "/api/engagement/encounters/{encounter_id}", tag = "sdk-engagement", request_body = Change,
    params(("encounter_id" = String, Path, description = "the encounter")),
    extensions(("x-concurrency" = json!({ "outcome": "independent", "given": [["POST", "/api/engagement/encounters", {}]], "body": { "billing_ref": "race" } }))),
    responses((status = 200, description = "the encounter, changed", body = Data<Encounter>)))]
async fn update(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<Change>) -> ApiResult<Data<Encounter>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    // Another tenant's or an unknown encounter is 404 whatever the body.
    if !exists(&mut tx, "SELECT 1 FROM engagement_encounter WHERE tenant_id = $1 AND encounter_id = $2", &ctx.tenant_id, &Some(id.clone())).await? {
        return Err(ApiError::NotFound);
    }
    let body = body.checked()?;
    let mut check = Check::new();
    let vault_key_ref = Check::optional(&body.vault_key_ref);
    let parent = canonical_uuid_opt(&body.parent_encounter_id);
    let address = canonical_uuid_opt(&body.address_id);
    let billing_ref = Check::optional(&body.billing_ref);
    let contact = canonical_uuid_opt(&body.contact_id);
    if vault_key_ref.is_none() && parent.is_none() && address.is_none() && billing_ref.is_none() && contact.is_none() {
        check.fail("at least one of vault_key_ref, parent_encounter_id, address_id, billing_ref, contact_id is required");
    }
    if parent.as_deref() == Some(id.as_str()) {
        check.fail("parent_encounter_id must be another encounter");
    }
    check.finish()?;
    let mut check = Check::new();
    if !exists(&mut tx, "SELECT 1 FROM engagement_encounter WHERE tenant_id = $1 AND encounter_id = $2", &ctx.tenant_id, &parent).await? {
        check.fail("parent_encounter_id is not an encounter of this tenant");
    } else if let Some(p) = &parent
        && follows_up(&mut tx, &ctx.tenant_id, &id, p).await?
    {
        check.fail("parent_encounter_id must not be an encounter that follows up this one");
    }
    if !exists(&mut tx, "SELECT 1 FROM geo_address WHERE tenant_id = $1 AND address_id = $2", &ctx.tenant_id, &address).await? {
        check.fail("address_id is not an address of this tenant");
    }
    if !exists(&mut tx, "SELECT 1 FROM crm_contact WHERE tenant_id = $1 AND contact_id = $2 AND erased_at IS NULL", &ctx.tenant_id, &contact).await? {
        check.fail("contact_id is not a contact of this tenant");
    }
    check.finish()?;
    let sql = format!(
        "UPDATE engagement_encounter SET vault_key_ref = COALESCE($3, vault_key_ref), parent_encounter_id = COALESCE($4, parent_encounter_id), \
         address_id = COALESCE($5, address_id), billing_ref = COALESCE($6, billing_ref), contact_id = COALESCE($7, contact_id), updated_at = $8 \
         WHERE tenant_id = $1 AND encounter_id = $2 AND state = 'open' RETURNING {COLUMNS}"
    );
    let changed: Option<Encounter> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&ctx.tenant_id)
        .bind(&id)
        .bind(&vault_key_ref)
        .bind(&parent)
        .bind(&address)
        .bind(&billing_ref)
        .bind(&contact)
        .bind(db::now())
        .fetch_optional(&mut *tx)
        .await?;
    let updated = ENCOUNTER.settle(&mut tx, &ctx.tenant_id, &id, changed, "only open encounters can be changed").await?;
    // The names of the changed fields; their values (references, a key
    // reference) are in the row.
    let fields: Vec<&str> = [
        ("vault_key_ref", vault_key_ref.is_some()),
        ("parent_encounter_id", parent.is_some()),
        ("address_id", address.is_some()),
        ("billing_ref", billing_ref.is_some()),
        ("contact_id", contact.is_some()),
    ]
    .into_iter()
    .filter_map(|(name, given)| given.then_some(name))
    .collect();
    audit::record(&mut tx, &ctx, events::ENGAGEMENT_ENCOUNTER_UPDATED, json!({ "encounter_id": updated.encounter_id, "fields": fields })).await?;
    tx.commit().await?;
    Ok(ok(updated))
}
