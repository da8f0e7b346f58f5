//! sdk-identity-resolver: proposals that two persons of a tenant are one
//! human, decided by a steward. A link is `proposed`, `in_review` once a
//! steward review step is open, then `merged` or `rejected` by the
//! steward's verdict; a merge may be undone (`unmerged`).
//!
//! A merge is a recorded, reversible equivalence on the global person
//! record (gateway rule 7): person_id_a survives, person_id_b is marked
//! `merged` (its prior status kept in the merge record), and nothing of
//! either moves (aliases, credentials, memberships), so login is unchanged
//! and an unmerge restores exactly what was. An absorbed person takes part
//! in no new link until unmerged, and a survivor is never absorbed: the
//! canonical person is always one step away.
//!
//! This module owns identity_link, identity_link_step and
//! identity_person_merge.

use crate::{auth, personas, tenancy};
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(propose, list_links))
        .routes(routes!(get_link))
        .routes(routes!(steward_review))
        .routes(routes!(verdict))
        .routes(routes!(unmerge))
}

/// A steward's verdict on a review step: `approve` merges the pair,
/// `reject` closes the link.
#[derive(Clone, Copy, PartialEq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = StewardDecision)]
enum Decision {
    Approve,
    Reject,
}

stored_enum! {
    /// Where a link is in its life.
    #[schema(as = IdentityLinkStatus)]
    enum LinkStatus { Proposed = "proposed", InReview = "in_review", Merged = "merged", Rejected = "rejected", Unmerged = "unmerged" }
}

stored_enum! {
    /// Where a review step is: `open` until the steward's verdict.
    #[schema(as = IdentityLinkStepStatus)]
    enum StepStatus { Open = "open", Approved = "approved", Rejected = "rejected" }
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = IdentityLink)]
struct Link {
    link_id: Id,
    /// The survivor, should the pair be merged.
    person_id_a: String,
    /// The person a merge absorbs.
    person_id_b: String,
    #[sqlx(try_from = "String")]
    #[schema(value_type = Object)]
    evidence: JsonText,
    confidence: Option<f64>,
    status: LinkStatus,
    /// The canonical person while the pair is merged (person_id_a).
    survivor_person_id: Option<String>,
    proposed_by: String,
    created_at: Timestamp,
    updated_at: Timestamp,
    decided_at: Option<Timestamp>,
    unmerged_at: Option<Timestamp>,
    /// Its review steps, oldest first.
    #[sqlx(skip)]
    steps: Vec<Step>,
}

const COLUMNS: &str = "link_id, person_id_a, person_id_b, evidence, confidence, status, survivor_person_id, proposed_by, created_at, updated_at, \
                       decided_at, unmerged_at";

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = IdentityLinkStep)]
struct Step {
    step_id: Id,
    link_id: Id,
    /// The steward persona whose verdict the step waits for.
    approver_persona_id: String,
    status: StepStatus,
    acting_persona_id: Option<String>,
    opened_by: String,
    opened_at: Timestamp,
    decided_at: Option<Timestamp>,
}

const STEP_COLUMNS: &str = "step_id, link_id, approver_persona_id, status, acting_persona_id, opened_by, opened_at, decided_at";

/// A link as guarded writes name it.
const LINK: Stateful = Stateful { noun: "link", table: "identity_link", key: "link_id", state: "status" };

/// The link of the caller's tenant, with its steps.
async fn find(tx: &mut Tx, tenant_id: &str, id: &str) -> ApiResult<Link> {
    let id = path_id(id)?.to_string();
    let sql = format!("SELECT {COLUMNS} FROM identity_link WHERE tenant_id = $1 AND link_id = $2");
    let mut link: Link = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(&id).fetch_optional(&mut **tx).await?.ok_or(ApiError::NotFound)?;
    let sql = format!("SELECT {STEP_COLUMNS} FROM identity_link_step WHERE link_id = $1 ORDER BY opened_at, step_id");
    link.steps = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&id).fetch_all(&mut **tx).await?;
    Ok(link)
}

/// Refuses (409) a pair a merge cannot join: neither may be absorbed by a
/// live merge, and person `b`, the one a merge absorbs, may not be a survivor.
async fn check_mergeable(tx: &mut Tx, a: &str, b: &str) -> ApiResult<()> {
    for person in [a, b] {
        let into: Option<String> =
            sqlx::query_scalar("SELECT survivor_person_id FROM identity_person_merge WHERE absorbed_person_id = $1 AND unmerged_at IS NULL")
                .bind(person)
                .fetch_optional(&mut **tx)
                .await?;
        if let Some(survivor) = into {
            return Err(ApiError::Conflict(format!("person {person} is merged into {survivor}: unmerge that first")));
        }
    }
    let absorbs: Option<String> = sqlx::query_scalar("SELECT merge_id FROM identity_person_merge WHERE survivor_person_id = $1 AND unmerged_at IS NULL")
        .bind(b)
        .fetch_optional(&mut **tx)
        .await?;
    match absorbs {
        Some(_) => Err(ApiError::Conflict(format!("person {b} survives another merge: it cannot be absorbed (propose it as person_id_a)"))),
        None => Ok(()),
    }
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewIdentityLink)]
struct NewLink {
    /// A member of the caller's tenant; the survivor of a merge.
    #[schema(format = "uuid")]
    person_id_a: String,
    /// Another member of the caller's tenant (not person_id_a); absorbed by
    /// a merge.
    #[schema(format = "uuid")]
    person_id_b: String,
    /// Why they are thought one human (`{}` when absent).
    #[schema(value_type = Option<Object>)]
    evidence: Option<serde_json::Map<String, Value>>,
    #[schema(minimum = 0, maximum = 1)]
    confidence: Option<f64>,
}

/// Proposes that two members of the caller's tenant are one human.
#[utoipa::path(post, path = "/api/identity-resolver/links", tag = "sdk-identity-resolver", request_body = NewLink,
    responses((status = 201, description = "the link, proposed", body = Data<Link>)),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/api/auth/register", { "email": "m-{unique}@races.example.com", "password": "correct horse battery", "display_name": "Twin" }], ["POST", "/api/memberships", { "person_id": "{person_id}" }]], "body": { "person_id_a": "{owner_person_id}", "person_id_b": "{person_id}" } }))))]
async fn propose(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewLink>) -> ApiResult<Created<Link>> {
    let body = body.checked()?;
    let (a, b) = (canonical_uuid(&body.person_id_a), canonical_uuid(&body.person_id_b));
    if a == b {
        return Err(ApiError::invalid("person_id_a and person_id_b must be two persons"));
    }
    let evidence = Value::Object(body.evidence.unwrap_or_default());
    let confidence = body.confidence;
    let mut tx = state.db.begin().await?;
    let mut check = Check::new();
    for (name, person) in [("person_id_a", &a), ("person_id_b", &b)] {
        if tenancy::membership_of(&mut *tx, &ctx.tenant_id, person).await?.is_none() {
            check.fail(format!("{name} is not a member of this tenant"));
        }
    }
    check.finish()?;
    check_mergeable(&mut tx, &a, &b).await?;
    let pair = if a < b { format!("{a}:{b}") } else { format!("{b}:{a}") };
    let now = db::now();
    // The unique live pair decides: of two proposals at once, one inserts
    // and the other finds the live link and answers 409 naming its state.
    let sql = format!(
        "INSERT INTO identity_link (link_id, tenant_id, person_id_a, person_id_b, pair_key, evidence, confidence, status, proposed_by, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, 'proposed', $8, $9, $9) \
         ON CONFLICT (pair_key) WHERE status IN ('proposed', 'in_review', 'merged') DO NOTHING RETURNING {COLUMNS}"
    );
    let link: Option<Link> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(&ctx.tenant_id)
        .bind(&a)
        .bind(&b)
        .bind(&pair)
        .bind(evidence.to_string())
        .bind(hub_kernel::db::rows::Real(confidence))
        .bind(audit::actor_of(&ctx).1)
        .bind(&now)
        .fetch_optional(&mut *tx)
        .await?;
    let Some(link) = link else {
        let live: LinkStatus = sqlx::query_scalar("SELECT status FROM identity_link WHERE pair_key = $1 AND status IN ('proposed', 'in_review', 'merged')")
            .bind(&pair)
            .fetch_one(&mut *tx)
            .await?;
        return Err(ApiError::Conflict(format!("the pair already has a link that is {live}")));
    };
    let payload = json!({ "link_id": link.link_id, "person_id_a": a, "person_id_b": b, "confidence": confidence });
    audit::record(&mut tx, &ctx, events::LINK_PROPOSED, payload).await?;
    tx.commit().await?;
    Ok(created(link))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct LinkFilter {
    #[param(inline)]
    status: Option<LinkStatus>,
    /// Links naming this person, as person_id_a or person_id_b.
    #[param(format = "uuid")]
    person_id: Option<String>,
    /// Links with a review step waiting for, or decided by, this steward
    /// persona (the steward's queue: with `status=in_review`).
    #[param(format = "uuid")]
    approver_persona_id: Option<String>,
}

/// The links of the caller's tenant, each with its review steps, newest
/// first.
#[utoipa::path(get, path = "/api/identity-resolver/links", tag = "sdk-identity-resolver", params(LinkFilter, Page),
    responses((status = 200, description = "one page of links", body = ListOf<Link>)))]
async fn list_links(State(state): State<AppState>, Tenant(ctx): Tenant, page: Page, Params(q): Params<LinkFilter>) -> ApiResult<ListOf<Link>> {
    let status = q.status.map_or("", LinkStatus::as_str);
    let person = canonical_uuid_opt(&q.person_id).unwrap_or_default();
    let approver = canonical_uuid_opt(&q.approver_persona_id).unwrap_or_default();
    let listing = Listing {
        table: "identity_link",
        columns: COLUMNS,
        filter: "tenant_id = $1 AND ($2 = '' OR status = $2) AND ($3 = '' OR person_id_a = $3 OR person_id_b = $3) \
                 AND ($4 = '' OR link_id IN (SELECT link_id FROM identity_link_step WHERE approver_persona_id = $4))",
        order: "created_at DESC, link_id DESC",
    };
    let mut links = page.list::<Link>(&state.db.read, &listing, &[&ctx.tenant_id, status, &person, &approver]).await?;
    // The page's steps in one read.
    if !links.data.is_empty() {
        let ids: Vec<String> = links.data.iter().map(|l| l.link_id.to_string()).collect();
        let marks = (1..=ids.len()).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ");
        let sql = format!("SELECT {STEP_COLUMNS} FROM identity_link_step WHERE link_id IN ({marks}) ORDER BY opened_at, step_id");
        let mut query = sqlx::query_as::<_, Step>(sqlx::AssertSqlSafe(sql));
        for id in &ids {
            query = query.bind(id);
        }
        let steps = query.fetch_all(&state.db.read).await?;
        for step in steps {
            if let Some(link) = links.data.iter_mut().find(|l| l.link_id == step.link_id) {
                link.steps.push(step);
            }
        }
    }
    Ok(links)
}

/// A link of the caller's tenant, with its review steps.
#[utoipa::path(get, path = "/api/identity-resolver/links/{link_id}", tag = "sdk-identity-resolver", params(("link_id" = String, Path, description = "the link")),
    responses((status = 200, description = "the link", body = Data<Link>)))]
async fn get_link(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Link>> {
    let mut tx = state.db.read.begin().await?;
    let link = find(&mut tx, &ctx.tenant_id, &id).await?;
    tx.commit().await?;
    Ok(ok(link))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewStewardReview)]
struct NewReview {
    /// An active persona of the caller's tenant: the steward who decides.
    #[schema(format = "uuid")]
    approver_persona_id: String,
}

/// Opens the review step of a proposed link: the link is `in_review`
/// until the named steward's verdict.
#[utoipa::path(post, path = "/api/identity-resolver/links/{link_id}/steward-review", tag = "sdk-identity-resolver", request_body = NewReview,
    params(("link_id" = String, Path, description = "the link")),
    responses((status = 201, description = "the review step, open", body = Data<Step>)),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/api/auth/register", { "email": "m-{unique}@races.example.com", "password": "correct horse battery", "display_name": "Twin" }], ["POST", "/api/memberships", { "person_id": "{person_id}" }], ["POST", "/api/identity-resolver/links", { "person_id_a": "{owner_person_id}", "person_id_b": "{person_id}" }]], "body": { "approver_persona_id": "{owner_persona_id}" } }))))]
async fn steward_review(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<NewReview>) -> ApiResult<Created<Step>> {
    let mut tx = state.db.begin().await?;
    let link = find(&mut tx, &ctx.tenant_id, &id).await?;
    let body = body.checked()?;
    let approver = canonical_uuid(&body.approver_persona_id);
    let persona = personas::find(&mut *tx, &approver).await?.filter(|p| p.tenant_id == ctx.tenant_id && p.status == personas::PersonaStatus::Active);
    persona.ok_or_else(|| ApiError::invalid("approver_persona_id is not an active persona of this tenant"))?;
    let now = db::now();
    let moved: Option<String> = sqlx::query_scalar(
        "UPDATE identity_link SET status = 'in_review', updated_at = $3 WHERE tenant_id = $1 AND link_id = $2 AND status = 'proposed' RETURNING link_id",
    )
    .bind(&ctx.tenant_id)
    .bind(link.link_id)
    .bind(&now)
    .fetch_optional(&mut *tx)
    .await?;
    LINK.settle(&mut tx, &ctx.tenant_id, &link.link_id.to_string(), moved, "a review opens on a proposed link only").await?;
    let sql = format!(
        "INSERT INTO identity_link_step (step_id, link_id, approver_persona_id, status, opened_by, opened_at) VALUES ($1, $2, $3, 'open', $4, $5) \
         RETURNING {STEP_COLUMNS}"
    );
    let step: Step = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(link.link_id)
        .bind(&approver)
        .bind(audit::actor_of(&ctx).1)
        .bind(&now)
        .fetch_one(&mut *tx)
        .await?;
    let payload = json!({ "link_id": link.link_id, "step_id": step.step_id, "approver_persona_id": approver });
    audit::record(&mut tx, &ctx, events::LINK_REVIEW_OPENED, payload).await?;
    tx.commit().await?;
    Ok(created(step))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = StewardVerdict)]
struct Verdict {
    /// The link's open review step.
    #[schema(format = "uuid")]
    step_id: String,
    decision: Decision,
    /// When given, the caller's own persona (a person's primary persona, a
    /// key's synthetic persona): 403 otherwise.
    #[schema(format = "uuid")]
    acting_persona_id: Option<String>,
}

/// Records the steward's verdict on a link's review step: `approve`
/// merges the pair (person_id_a survives), `reject` closes the link.
#[utoipa::path(post, path = "/api/identity-resolver/links/{link_id}/verdict", tag = "sdk-identity-resolver", request_body = Verdict,
    params(("link_id" = String, Path, description = "the link")),
    responses((status = 200, description = "the link, decided", body = Data<Link>)),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/api/auth/register", { "email": "m-{unique}@races.example.com", "password": "correct horse battery", "display_name": "Twin" }], ["POST", "/api/memberships", { "person_id": "{person_id}" }], ["POST", "/api/identity-resolver/links", { "person_id_a": "{owner_person_id}", "person_id_b": "{person_id}" }], ["POST", "/api/identity-resolver/links/{link_id}/steward-review", { "approver_persona_id": "{owner_persona_id}" }]], "body": { "step_id": "{step_id}", "decision": "approve" } }))))]
async fn verdict(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<Verdict>) -> ApiResult<Data<Link>> {
    let mut tx = state.db.begin().await?;
    let link = find(&mut tx, &ctx.tenant_id, &id).await?;
    let body = body.checked()?;
    let decision = body.decision;
    if canonical_uuid_opt(&body.acting_persona_id).is_some_and(|a| a != ctx.persona_id) {
        return Err(ApiError::forbidden(format!("acting_persona_id must be the caller's own persona {}", ctx.persona_id)));
    }
    let step_id = canonical_uuid(&body.step_id);
    let step = link.steps.iter().find(|s| s.step_id == step_id).ok_or_else(|| ApiError::invalid("step_id is not a review step of this link"))?;
    if step.approver_persona_id != ctx.persona_id {
        return Err(ApiError::forbidden(format!("the acting persona {} is not the step's approver", ctx.persona_id)));
    }
    let now = db::now();
    let status = if decision == Decision::Approve { StepStatus::Approved } else { StepStatus::Rejected };
    let decided = sqlx::query("UPDATE identity_link_step SET status = $2, acting_persona_id = $3, decided_at = $4 WHERE step_id = $1 AND status = 'open'")
        .bind(&step_id)
        .bind(status)
        .bind(&ctx.persona_id)
        .bind(&now)
        .execute(&mut *tx)
        .await?;
    if decided.rows_affected() == 0 {
        // A step row has no tenant column of its own (its link has), so
        // this is `settle` by hand: the state read after the write is the
        // one the winning verdict committed, not the one read before it.
        let current: StepStatus = sqlx::query_scalar("SELECT status FROM identity_link_step WHERE step_id = $1").bind(&step_id).fetch_one(&mut *tx).await?;
        return Err(ApiError::Conflict(format!("the step is already {current}")));
    }
    let (a, b) = (&link.person_id_a, &link.person_id_b);
    let mut payload = json!({ "link_id": link.link_id, "step_id": step_id, "acting_persona_id": ctx.persona_id });
    if decision == Decision::Approve {
        check_mergeable(&mut tx, a, b).await?;
        let prior = auth::person_status(&mut *tx, b).await?.ok_or(sqlx::Error::RowNotFound)?;
        sqlx::query(
            "INSERT INTO identity_person_merge (merge_id, link_id, survivor_person_id, absorbed_person_id, absorbed_prior_status, merged_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(db::new_id())
        .bind(link.link_id)
        .bind(a)
        .bind(b)
        .bind(&prior)
        .bind(&now)
        .execute(&mut *tx)
        .await?;
        auth::set_person_status(&mut tx, b, &prior, "merged").await?;
        sqlx::query("UPDATE identity_link SET status = 'merged', survivor_person_id = $2, decided_at = $3, updated_at = $3 WHERE link_id = $1")
            .bind(link.link_id)
            .bind(a)
            .bind(&now)
            .execute(&mut *tx)
            .await?;
        payload["survivor_person_id"] = json!(a);
        payload["absorbed_person_id"] = json!(b);
        audit::record(&mut tx, &ctx, events::MERGE_APPROVED, payload).await?;
    } else {
        sqlx::query("UPDATE identity_link SET status = 'rejected', decided_at = $2, updated_at = $2 WHERE link_id = $1")
            .bind(link.link_id)
            .bind(&now)
            .execute(&mut *tx)
            .await?;
        audit::record(&mut tx, &ctx, events::MERGE_REJECTED, payload).await?;
    }
    let link = find(&mut tx, &ctx.tenant_id, &id).await?;
    tx.commit().await?;
    Ok(ok(link))
}

/// Reverses the merge of a merged link: the absorbed person gets its
/// prior status back; nothing else had moved.
#[utoipa::path(post, path = "/api/identity-resolver/links/{link_id}/unmerge", tag = "sdk-identity-resolver",
    params(("link_id" = String, Path, description = "the link")),
    responses((status = 200, description = "the link, unmerged", body = Data<Link>)),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [["POST", "/api/auth/register", { "email": "m-{unique}@races.example.com", "password": "correct horse battery", "display_name": "Twin" }], ["POST", "/api/memberships", { "person_id": "{person_id}" }], ["POST", "/api/identity-resolver/links", { "person_id_a": "{owner_person_id}", "person_id_b": "{person_id}" }], ["POST", "/api/identity-resolver/links/{link_id}/steward-review", { "approver_persona_id": "{owner_persona_id}" }], ["POST", "/api/identity-resolver/links/{link_id}/verdict", { "step_id": "{step_id}", "decision": "approve" }]] }))))]
async fn unmerge(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Link>> {
    let mut tx = state.db.begin().await?;
    let link = find(&mut tx, &ctx.tenant_id, &id).await?;
    let now = db::now();
    let moved: Option<String> = sqlx::query_scalar(
        "UPDATE identity_link SET status = 'unmerged', survivor_person_id = NULL, unmerged_at = $3, updated_at = $3 \
         WHERE tenant_id = $1 AND link_id = $2 AND status = 'merged' RETURNING link_id",
    )
    .bind(&ctx.tenant_id)
    .bind(link.link_id)
    .bind(&now)
    .fetch_optional(&mut *tx)
    .await?;
    LINK.settle(&mut tx, &ctx.tenant_id, &link.link_id.to_string(), moved, "only a merged link is unmerged").await?;
    let (absorbed, prior): (String, String) = sqlx::query_as(
        "UPDATE identity_person_merge SET unmerged_at = $2 WHERE link_id = $1 AND unmerged_at IS NULL RETURNING absorbed_person_id, absorbed_prior_status",
    )
    .bind(link.link_id)
    .bind(&now)
    .fetch_one(&mut *tx)
    .await?;
    auth::set_person_status(&mut tx, &absorbed, "merged", &prior).await?;
    let payload = json!({ "link_id": link.link_id, "survivor_person_id": link.person_id_a, "absorbed_person_id": absorbed });
    audit::record(&mut tx, &ctx, events::MERGE_REVERTED, payload).await?;
    let link = find(&mut tx, &ctx.tenant_id, &id).await?;
    tx.commit().await?;
    Ok(ok(link))
}
