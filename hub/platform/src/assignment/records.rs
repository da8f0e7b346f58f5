//! Assignment records: a subject offered to a primary persona, falling to
//! the backup when the primary declines or lets the acceptance window
//! pass, with every step kept as history. The states (docs/
//! compatibility.md has the table):
//!
//! - `offered`: with `current_persona_id` until `offer_expires_at`; with
//!   both primary and backup at once (stage `simultaneous`) when the
//!   window is 0, then without expiry.
//! - `reassigned`: offered to the persona a manager chose.
//! - `accepted`, `declined`, `expired`: settled; a reassignment reopens any
//!   of them.
//!
//! Every transition is a compare-and-set on `revision`: of two at once,
//! one wins and the other is 409.

use std::collections::HashMap;

use chrono::{DateTime, TimeDelta, Utc};
use hub_kernel::prelude::*;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create, list_records))
        .routes(routes!(get_record))
        .routes(routes!(accept))
        .routes(routes!(decline))
        .routes(routes!(reassign))
        .routes(routes!(sweep))
}

/// The acceptance window when none is given, minutes.
const DEFAULT_WINDOW_MINUTES: i64 = 30;

stored_enum! {
    /// Where an assignment record is: offered (to its primary or backup),
    /// reassigned by a manager, or settled.
    #[schema(as = AssignmentRecordState)]
    pub enum RecordState { Offered = "offered", Reassigned = "reassigned", Accepted = "accepted", Declined = "declined", Expired = "expired" }
}

stored_enum! {
    /// Whom a record is with: the primary, the backup, both at once
    /// (`simultaneous`), or the persona a manager reassigned it to.
    #[schema(as = AssignmentRecordStage)]
    pub enum RecordStage { Primary = "primary", Backup = "backup", Simultaneous = "simultaneous", Reassigned = "reassigned" }
}

stored_enum! {
    /// What happened at a step of a record's history.
    #[schema(as = AssignmentStepEvent)]
    pub enum StepEvent { Offered = "offered", Accepted = "accepted", Declined = "declined", Reassigned = "reassigned", Expired = "expired" }
}

#[derive(Clone, Debug, FromRow, Serialize, ToSchema)]
#[schema(as = AssignmentRecord)]
struct Record {
    record_id: Id,
    subject_ref: String,
    state: RecordState,
    stage: RecordStage,
    primary_persona_id: String,
    backup_persona_id: Option<String>,
    manager_persona_id: Option<String>,
    /// The persona the offer is with, or who accepted it.
    current_persona_id: Option<String>,
    acceptance_window_minutes: i64,
    offer_expires_at: Option<Timestamp>,
    routing_decision_id: Option<String>,
    #[sqlx(try_from = "String")]
    #[schema(value_type = Object)]
    metadata: JsonText,
    source_timestamp: Option<Timestamp>,
    revision: i64,
    created_by: String,
    created_at: Timestamp,
    updated_at: Timestamp,
    /// Every step, oldest first.
    #[sqlx(skip)]
    history: Vec<Step>,
}

const COLUMNS: &str = "record_id, subject_ref, state, stage, primary_persona_id, backup_persona_id, manager_persona_id, current_persona_id, \
     acceptance_window_minutes, offer_expires_at, routing_decision_id, metadata, source_timestamp, revision, created_by, created_at, updated_at";
const RECORDS: Listing = Listing {
    table: "assignment_record",
    columns: COLUMNS,
    filter: "tenant_id = $1 AND ($2 = '' OR state = $2) AND ($3 = '' OR subject_ref = $3) \
             AND ($4 = '' OR current_persona_id = $4 OR (stage = 'simultaneous' AND state IN ('offered', 'reassigned') AND (primary_persona_id = $4 OR backup_persona_id = $4)))",
    order: "created_at DESC, record_id DESC",
};

/// One step of a record's history.
#[derive(Clone, Debug, FromRow, Serialize, ToSchema)]
#[schema(as = AssignmentHistoryStep)]
struct Step {
    seq: i64,
    event: StepEvent,
    from_state: Option<RecordState>,
    to_state: RecordState,
    /// The persona the step concerns (who accepted, declined, let the
    /// window pass, or was reassigned to).
    persona_id: Option<String>,
    actor: String,
    reason: Option<String>,
    at: Timestamp,
}

impl Record {
    fn pending(&self) -> bool {
        matches!(self.state, RecordState::Offered | RecordState::Reassigned)
    }

    fn deadline(&self, now: DateTime<Utc>) -> Option<Timestamp> {
        (self.acceptance_window_minutes > 0).then(|| Timestamp(now + TimeDelta::minutes(self.acceptance_window_minutes)))
    }

    /// Moves to `state` with the offer at `stage`/`current`, noting the step.
    fn step(&mut self, event: StepEvent, to: RecordState, persona: Option<String>, actor: &str, reason: Option<String>, now: DateTime<Utc>) {
        let seq = self.history.last().map_or(1, |s| s.seq + 1);
        self.history.push(Step {
            seq,
            event,
            from_state: Some(self.state),
            to_state: to,
            persona_id: persona,
            actor: actor.into(),
            reason,
            at: Timestamp(now),
        });
        self.state = to;
    }

    /// The primary's offer passing to the backup (after a decline or a
    /// window that passed), if there is a backup to pass it to.
    fn pass_to_backup(&mut self, now: DateTime<Utc>) -> bool {
        match (&self.backup_persona_id, self.stage) {
            (Some(backup), RecordStage::Primary) => {
                self.current_persona_id = Some(backup.clone());
                self.stage = RecordStage::Backup;
                self.state = RecordState::Offered;
                self.offer_expires_at = self.deadline(now);
                true
            }
            _ => false,
        }
    }

    /// A pending offer whose window passed: to the backup, or expired.
    /// True when something changed.
    fn expire_if_due(&mut self, actor: &str, now: DateTime<Utc>) -> bool {
        let due = self.offer_expires_at.is_some_and(|t| t.0 <= now);
        if !self.pending() || !due {
            return false;
        }
        let lapsed = self.current_persona_id.clone();
        let from = self.state;
        if self.pass_to_backup(now) {
            self.state = from;
            self.step(StepEvent::Expired, RecordState::Offered, lapsed, actor, Some("the acceptance window passed: offered to the backup".into()), now);
        } else {
            self.offer_expires_at = None;
            self.step(StepEvent::Expired, RecordState::Expired, lapsed, actor, Some("the acceptance window passed".into()), now);
        }
        true
    }

    fn with(&self, persona: &str) -> bool {
        match self.stage {
            RecordStage::Simultaneous => persona == self.primary_persona_id || Some(persona) == self.backup_persona_id.as_deref(),
            _ => Some(persona) == self.current_persona_id.as_deref(),
        }
    }
}

/// 404 unless the record is the tenant's: checked before the body, so
/// another tenant learns nothing from a validation answer.
async fn ensure_exists(state: &AppState, tenant_id: &str, id: &str) -> ApiResult<()> {
    let id = path_id(id)?.to_string();
    let found: Option<String> = sqlx::query_scalar("SELECT record_id FROM assignment_record WHERE tenant_id = $1 AND record_id = $2")
        .bind(tenant_id)
        .bind(&id)
        .fetch_optional(&state.db.read)
        .await?;
    found.map(|_| ()).ok_or(ApiError::NotFound)
}

async fn load(tx: &mut Tx, tenant_id: &str, id: &str) -> ApiResult<Record> {
    let id = path_id(id)?.to_string();
    let sql = format!("SELECT {COLUMNS} FROM assignment_record WHERE tenant_id = $1 AND record_id = $2");
    let mut rec: Record = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(&id).fetch_optional(&mut **tx).await?.ok_or(ApiError::NotFound)?;
    rec.history =
        sqlx::query_as("SELECT seq, event, from_state, to_state, persona_id, actor, reason, at FROM assignment_history WHERE record_id = $1 ORDER BY seq")
            .bind(&id)
            .fetch_all(&mut **tx)
            .await?;
    Ok(rec)
}

/// Stores `rec`'s new state and the history steps after `known` steps,
/// each with its event; 409 when another transition came first.
async fn save(tx: &mut Tx, ctx: &TenantCtx, rec: &mut Record, known: usize) -> ApiResult<()> {
    let now = Timestamp::now();
    let done = sqlx::query(
        "UPDATE assignment_record SET state = $3, stage = $4, current_persona_id = $5, offer_expires_at = $6, revision = revision + 1, updated_at = $7 \
         WHERE record_id = $1 AND revision = $2",
    )
    .bind(rec.record_id)
    .bind(rec.revision)
    .bind(rec.state)
    .bind(rec.stage)
    .bind(&rec.current_persona_id)
    .bind(rec.offer_expires_at)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    if done.rows_affected() == 0 {
        return Err(ApiError::Conflict("the assignment changed meanwhile; read it and try again".into()));
    }
    rec.revision += 1;
    rec.updated_at = now;
    append(tx, ctx, rec, known).await
}

async fn append(tx: &mut Tx, ctx: &TenantCtx, rec: &Record, known: usize) -> ApiResult<()> {
    for s in &rec.history[known..] {
        sqlx::query(
            "INSERT INTO assignment_history (record_id, seq, tenant_id, event, from_state, to_state, persona_id, actor, reason, at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(rec.record_id)
        .bind(s.seq)
        .bind(&ctx.tenant_id)
        .bind(s.event)
        .bind(s.from_state)
        .bind(s.to_state)
        .bind(&s.persona_id)
        .bind(&s.actor)
        .bind(&s.reason)
        .bind(s.at)
        .execute(&mut **tx)
        .await?;
        let event = match s.event {
            StepEvent::Offered => events::ASSIGNMENT_OFFER_CREATED,
            StepEvent::Accepted => events::ASSIGNMENT_OFFER_ACCEPTED,
            StepEvent::Declined => events::ASSIGNMENT_OFFER_DECLINED,
            StepEvent::Reassigned => events::ASSIGNMENT_OFFER_REASSIGNED,
            StepEvent::Expired => events::ASSIGNMENT_OFFER_EXPIRED,
        };
        let payload = json!({
            "record_id": rec.record_id, "seq": s.seq, "from_state": s.from_state, "to_state": s.to_state,
            "persona_id": s.persona_id, "stage": rec.stage, "current_persona_id": rec.current_persona_id,
        });
        audit::record(tx, ctx, event, payload).await?;
    }
    Ok(())
}

fn actor(ctx: &TenantCtx, given: &Option<String>) -> String {
    Check::optional(given).unwrap_or_else(|| audit::actor_of(ctx).1.to_string())
}

#[derive(Deserialize, ToSchema)]
#[schema(as = NewAssignmentRecord)]
struct NewRecord {
    /// What is being assigned.
    subject_ref: String,
    /// The persona offered it first, of this tenant.
    #[schema(format = "uuid")]
    primary_persona_id: String,
    /// Offered it when the primary declines or lets the window pass; not
    /// the primary.
    #[schema(format = "uuid")]
    backup_persona_id: Option<String>,
    #[schema(format = "uuid")]
    manager_persona_id: Option<String>,
    /// How long the primary has, in minutes (30 when absent); 0 offers it
    /// to primary and backup at once, without expiry.
    #[schema(minimum = 0, maximum = 10080)]
    acceptance_window_minutes: Option<i64>,
    /// The decision the record follows, of this tenant.
    #[schema(format = "uuid")]
    routing_decision_id: Option<String>,
    /// `{}` when absent.
    metadata: Option<serde_json::Map<String, Value>>,
    /// When the source system produced the subject; at most 5 minutes
    /// ahead.
    #[schema(format = DateTime)]
    source_timestamp: Option<String>,
    /// Who acts; the caller when absent.
    actor: Option<String>,
}

/// Offers a subject to its primary persona (and backup, at once, when the
/// window is 0).
#[utoipa::path(post, path = "/api/assignments", tag = "sdk-assignment", request_body = NewRecord,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "body": { "subject_ref": "race-{unique}", "primary_persona_id": "{persona_id}" } }))),
    responses((status = 201, description = "the record, offered", body = Data<Record>)))]
async fn create(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewRecord>) -> ApiResult<Created<Record>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let subject_ref = body.subject_ref.trim().to_string();
    let primary = check.required_uuid("primary_persona_id", &Some(body.primary_persona_id.clone())).map(|u| u.to_string());
    let backup = check.optional_uuid("backup_persona_id", &body.backup_persona_id).map(|u| u.to_string());
    let manager = check.optional_uuid("manager_persona_id", &body.manager_persona_id).map(|u| u.to_string());
    let decision = check.optional_uuid("routing_decision_id", &body.routing_decision_id).map(|u| u.to_string());
    let window = body.acceptance_window_minutes.unwrap_or(DEFAULT_WINDOW_MINUTES);
    let metadata = Value::Object(body.metadata.clone().unwrap_or_default());
    let source_timestamp = check.optional_time("source_timestamp", &body.source_timestamp).as_deref().and_then(Timestamp::parse);
    if backup.is_some() && backup == primary {
        check.fail("backup_persona_id must differ from primary_persona_id");
    }
    check.finish()?;
    let primary = primary.unwrap_or_default();
    let mut tx = state.db.begin().await?;
    let mut named = vec![("primary_persona_id", primary.as_str())];
    named.extend(backup.as_deref().map(|b| ("backup_persona_id", b)));
    named.extend(manager.as_deref().map(|m| ("manager_persona_id", m)));
    super::check_personas(&mut tx, &ctx.tenant_id, &named).await?;
    if let Some(d) = &decision {
        let found: Option<String> = sqlx::query_scalar("SELECT decision_id FROM assignment_decision WHERE tenant_id = $1 AND decision_id = $2")
            .bind(&ctx.tenant_id)
            .bind(d)
            .fetch_optional(&mut *tx)
            .await?;
        found.ok_or_else(|| ApiError::invalid("routing_decision_id is not a decision of this tenant"))?;
    }
    let now = Utc::now();
    let stage = if window == 0 && backup.is_some() { RecordStage::Simultaneous } else { RecordStage::Primary };
    let mut rec = Record {
        record_id: Id::new(),
        subject_ref,
        state: RecordState::Offered,
        stage,
        primary_persona_id: primary.clone(),
        backup_persona_id: backup,
        manager_persona_id: manager,
        current_persona_id: (stage == RecordStage::Primary).then(|| primary.clone()),
        acceptance_window_minutes: window,
        offer_expires_at: None,
        routing_decision_id: decision,
        metadata: JsonText(metadata),
        source_timestamp,
        revision: 0,
        created_by: actor(&ctx, &body.actor),
        created_at: Timestamp(now),
        updated_at: Timestamp(now),
        history: Vec::new(),
    };
    rec.offer_expires_at = rec.deadline(now);
    rec.history.push(Step {
        seq: 1,
        event: StepEvent::Offered,
        from_state: None,
        to_state: RecordState::Offered,
        persona_id: rec.current_persona_id.clone(),
        actor: rec.created_by.clone(),
        reason: None,
        at: rec.created_at,
    });
    let sql = format!(
        "INSERT INTO assignment_record (tenant_id, {COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)"
    );
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(&ctx.tenant_id)
        .bind(rec.record_id)
        .bind(&rec.subject_ref)
        .bind(rec.state)
        .bind(rec.stage)
        .bind(&rec.primary_persona_id)
        .bind(&rec.backup_persona_id)
        .bind(&rec.manager_persona_id)
        .bind(&rec.current_persona_id)
        .bind(rec.acceptance_window_minutes)
        .bind(rec.offer_expires_at)
        .bind(&rec.routing_decision_id)
        .bind(rec.metadata.0.to_string())
        .bind(rec.source_timestamp)
        .bind(rec.revision)
        .bind(&rec.created_by)
        .bind(rec.created_at)
        .bind(rec.updated_at)
        .execute(&mut *tx)
        .await?;
    append(&mut tx, &ctx, &rec, 0).await?;
    tx.commit().await?;
    Ok(created(rec))
}

/// A record with its history.
#[utoipa::path(get, path = "/api/assignments/{record_id}", tag = "sdk-assignment",
    params(("record_id" = String, Path, description = "the record")),
    responses((status = 200, description = "the record", body = Data<Record>)))]
async fn get_record(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Record>> {
    let mut tx = state.db.read.begin().await?;
    let rec = load(&mut tx, &ctx.tenant_id, &id).await?;
    tx.commit().await?;
    Ok(ok(rec))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct RecordFilter {
    /// Only records in this (stored) state: `offered` with `persona_id` is
    /// a worker's open offers.
    #[param(inline)]
    state: Option<RecordState>,
    /// Only records with this persona: offered to it now (alone, or with
    /// the other persona in stage `simultaneous`), or accepted by it.
    #[param(format = "uuid")]
    persona_id: Option<String>,
    /// Only records of this subject.
    #[param(max_length = 500)]
    subject_ref: Option<String>,
}

/// The tenant's assignment records with their history, newest first.
#[utoipa::path(get, path = "/api/assignments", tag = "sdk-assignment", params(RecordFilter, Page),
    responses((status = 200, description = "a page of records", body = ListOf<Record>)))]
async fn list_records(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<RecordFilter>, page: Page) -> ApiResult<ListOf<Record>> {
    let record_state = q.state.map_or("", RecordState::as_str);
    let persona = q.persona_id.as_deref().map(canonical_uuid).unwrap_or_default();
    let subject = q.subject_ref.as_deref().map(str::trim).unwrap_or_default();
    let mut records = page.list::<Record>(&state.db.read, &RECORDS, &[&ctx.tenant_id, record_state, subject, &persona]).await?;
    // Their histories in one query (a history only grows).
    if !records.data.is_empty() {
        let ids: Vec<String> = records.data.iter().map(|r| r.record_id.to_string()).collect();
        let sql = format!(
            "SELECT record_id, seq, event, from_state, to_state, persona_id, actor, reason, at FROM assignment_history \
             WHERE tenant_id = $1 AND record_id IN ({}) ORDER BY record_id, seq",
            db::placeholders(2, ids.len())
        );
        let mut query = sqlx::query_as::<_, RecordStep>(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id);
        for id in &ids {
            query = query.bind(id);
        }
        let mut steps: HashMap<String, Vec<Step>> = HashMap::new();
        for s in query.fetch_all(&state.db.read).await? {
            steps.entry(s.record_id).or_default().push(s.step);
        }
        for r in &mut records.data {
            r.history = steps.remove(&r.record_id.to_string()).unwrap_or_default();
        }
    }
    Ok(records)
}

/// A history step with the record it belongs to.
#[derive(FromRow)]
struct RecordStep {
    record_id: String,
    #[sqlx(flatten)]
    step: Step,
}

/// Runs `act` on a record whose window passing was applied first; the
/// expiry is kept even when `act` then refuses.
async fn transition(
    state: &AppState,
    ctx: &TenantCtx,
    id: &str,
    actor_name: &str,
    act: impl FnOnce(&mut Record, DateTime<Utc>) -> ApiResult<()>,
) -> ApiResult<Data<Record>> {
    let mut tx = state.db.begin().await?;
    let mut rec = load(&mut tx, &ctx.tenant_id, id).await?;
    let now = Utc::now();
    let known = rec.history.len();
    if rec.expire_if_due(actor_name, now) {
        save(&mut tx, ctx, &mut rec, known).await?;
    }
    let known = rec.history.len();
    if let Err(refused) = act(&mut rec, now) {
        tx.commit().await?;
        return Err(refused);
    }
    save(&mut tx, ctx, &mut rec, known).await?;
    tx.commit().await?;
    Ok(ok(rec))
}

fn not_pending(rec: &Record) -> ApiError {
    ApiError::Conflict(format!("the assignment is {}, not open for this", rec.state))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = AssignmentAccept)]
struct Accept {
    /// The persona accepting: the one the offer is with.
    #[schema(format = "uuid")]
    persona_id: String,
    actor: Option<String>,
}

/// The persona the offer is with accepts it.
#[utoipa::path(post, path = "/api/assignments/{record_id}/accept", tag = "sdk-assignment", request_body = Accept,
    params(("record_id" = String, Path, description = "the record")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins",
        "given": [["POST", "/api/assignments", { "subject_ref": "race-{unique}", "primary_persona_id": "{persona_id}" }]],
        "body": { "persona_id": "{persona_id}" } }))),
    responses((status = 200, description = "the record, accepted", body = Data<Record>)))]
async fn accept(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<Accept>) -> ApiResult<Data<Record>> {
    ensure_exists(&state, &ctx.tenant_id, &id).await?;
    let body = body.checked()?;
    let persona = path_id(&body.persona_id)?.to_string();
    let who = actor(&ctx, &body.actor);
    transition(&state, &ctx, &id, &who.clone(), move |rec, now| {
        if !rec.pending() {
            return Err(not_pending(rec));
        }
        if !rec.with(&persona) {
            return Err(ApiError::Conflict("persona_id is not the persona the offer is with".into()));
        }
        rec.current_persona_id = Some(persona.clone());
        rec.offer_expires_at = None;
        rec.step(StepEvent::Accepted, RecordState::Accepted, Some(persona), &who, None, now);
        Ok(())
    })
    .await
}

#[derive(Deserialize, ToSchema)]
#[schema(as = AssignmentDecline)]
struct Decline {
    reason: Option<String>,
    actor: Option<String>,
}

/// The persona the offer is with declines: the primary's offer passes to
/// the backup; otherwise the record is declined.
#[utoipa::path(post, path = "/api/assignments/{record_id}/decline", tag = "sdk-assignment", request_body = Decline,
    params(("record_id" = String, Path, description = "the record")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins",
        "given": [["POST", "/api/assignments", { "subject_ref": "race-{unique}", "primary_persona_id": "{persona_id}" }]], "body": {} }))),
    responses((status = 200, description = "the record: offered to the backup, or declined", body = Data<Record>)))]
async fn decline(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<Decline>) -> ApiResult<Data<Record>> {
    ensure_exists(&state, &ctx.tenant_id, &id).await?;
    let body = body.checked()?;
    let who = actor(&ctx, &body.actor);
    let reason = Check::optional(&body.reason);
    transition(&state, &ctx, &id, &who.clone(), move |rec, now| {
        if !rec.pending() {
            return Err(not_pending(rec));
        }
        let decliner = rec.current_persona_id.clone();
        let from = rec.state;
        if rec.pass_to_backup(now) {
            rec.state = from;
            rec.step(StepEvent::Declined, RecordState::Offered, decliner, &who, reason, now);
        } else {
            rec.offer_expires_at = None;
            rec.step(StepEvent::Declined, RecordState::Declined, decliner, &who, reason, now);
        }
        Ok(())
    })
    .await
}

#[derive(Deserialize, ToSchema)]
#[schema(as = AssignmentReassign)]
struct Reassign {
    /// The persona the record goes to, of this tenant.
    #[schema(format = "uuid")]
    to_persona_id: String,
    reason: Option<String>,
    actor: Option<String>,
}

/// Offers the record to another persona, whatever its state, with a fresh
/// acceptance window.
#[utoipa::path(post, path = "/api/assignments/{record_id}/reassign", tag = "sdk-assignment", request_body = Reassign,
    params(("record_id" = String, Path, description = "the record")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "given": [
        ["POST", "/api/personas", { "kind": "service" }],
        ["POST", "/api/assignments", { "subject_ref": "race-{unique}", "primary_persona_id": "{owner_persona_id}" }]],
        "body": { "to_persona_id": "{persona_id}" } }))),
    responses((status = 200, description = "the record, reassigned", body = Data<Record>)))]
async fn reassign(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>, body: Body<Reassign>) -> ApiResult<Data<Record>> {
    ensure_exists(&state, &ctx.tenant_id, &id).await?;
    let body = body.checked()?;
    let to = path_id(&body.to_persona_id)?.to_string();
    {
        let mut tx = state.db.read.begin().await?;
        super::check_personas(&mut tx, &ctx.tenant_id, &[("to_persona_id", to.as_str())]).await?;
        tx.commit().await?;
    }
    let who = actor(&ctx, &body.actor);
    let reason = Check::optional(&body.reason);
    transition(&state, &ctx, &id, &who.clone(), move |rec, now| {
        if rec.pending() && rec.with(&to) && rec.stage != RecordStage::Simultaneous {
            return Err(ApiError::Conflict("the offer is already with to_persona_id".into()));
        }
        rec.current_persona_id = Some(to.clone());
        rec.stage = RecordStage::Reassigned;
        rec.offer_expires_at = rec.deadline(now);
        rec.step(StepEvent::Reassigned, RecordState::Reassigned, Some(to), &who, reason, now);
        Ok(())
    })
    .await
}

#[derive(Deserialize, ToSchema)]
#[schema(as = AssignmentSweep)]
struct Sweep {
    /// Records handled at most: 1 to 500, default 100.
    #[schema(minimum = 1, maximum = 500)]
    limit: Option<i64>,
}

#[derive(Serialize, ToSchema)]
#[schema(as = AssignmentSweepResult)]
struct Swept {
    /// Offers whose window had passed.
    swept: usize,
    /// Of those, passed to the backup.
    fell_to_backup: usize,
    /// Of those, expired.
    expired: usize,
    record_ids: Vec<String>,
}

/// Applies every passed acceptance window of the tenant's open offers,
/// oldest deadline first: the primary's offer falls to the backup, any
/// other expires.
#[utoipa::path(post, path = "/api/assignments/sweep", tag = "sdk-assignment", request_body = Sweep,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "events": 0, "body": {} }))),
    responses((status = 200, description = "what the sweep did", body = Data<Swept>)))]
async fn sweep(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<Sweep>) -> ApiResult<Data<Swept>> {
    let limit = body.checked()?.limit.unwrap_or(100);
    let now = Utc::now();
    let mut tx = state.db.begin().await?;
    // Sweeps at once (two replicas, or a retry) take disjoint records: a
    // record another sweep holds is left to it rather than answered 409
    // when its revision moves.
    let sql = format!(
        "SELECT record_id FROM assignment_record WHERE tenant_id = $1 AND state IN ('offered', 'reassigned') AND offer_expires_at <= $2 \
         ORDER BY offer_expires_at, record_id LIMIT $3{}",
        state.db.backend.skip_locked()
    );
    let due: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(db::format_time(now)).bind(limit).fetch_all(&mut *tx).await?;
    let mut out = Swept { swept: 0, fell_to_backup: 0, expired: 0, record_ids: Vec::new() };
    let sweeper = actor(&ctx, &None);
    for id in due {
        let mut rec = load(&mut tx, &ctx.tenant_id, &id).await?;
        let known = rec.history.len();
        if rec.expire_if_due(&sweeper, now) {
            save(&mut tx, &ctx, &mut rec, known).await?;
            out.swept += 1;
            if rec.state == RecordState::Expired {
                out.expired += 1;
            } else {
                out.fell_to_backup += 1;
            }
            out.record_ids.push(id);
        }
    }
    tx.commit().await?;
    Ok(ok(out))
}
