//! connector-<provider>-voice: call legs a voice provider reports through
//! the signed inbound webhook of kind `voice`
//! (`POST /api/webhooks/inbound/voice/{provider}`), one leg per message:
//! `{ "call_id", "leg_id", "direction", "status", "is_voicemail",
//! "from_number", "to_number", "started_at", "ended_at",
//! "duration_seconds" }`. A leg is kept once per (tenant, provider,
//! `leg_id`): a later report moves it forward, so a provider may report
//! `ringing`, then `answered`, then `completed` (or `no_answer`, `busy`,
//! `failed`). A leg that ends is a logged call: the report that ends it
//! records `crm.call.logged.v1`, and `crm.call.missed.v1` as well when it
//! ended `no_answer`, `busy` or `failed` (the Events table's rule for a
//! call's disposition), once: one guarded statement takes a leg from
//! ringing or answered to its end, so a repeated or concurrent report
//! finds it ended and records nothing. An ended leg keeps its status.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use hub_kernel::{inbound::InboundHandler, prelude::*, types::CallDisposition};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list)).routes(routes!(get_leg))
}

/// The kind whose inbound webhooks carry call legs.
pub const KIND: &str = "voice";

stored_enum! {
    /// Which way a call leg goes.
    #[schema(as = VoiceDirection)]
    enum Direction { Inbound = "inbound", Outbound = "outbound" }
}

stored_enum! {
    /// Where a call leg is, as its provider last reported it.
    #[schema(as = VoiceCallStatus)]
    enum CallStatus { Ringing = "ringing", Answered = "answered", Completed = "completed", NoAnswer = "no_answer", Busy = "busy", Failed = "failed" }
}

impl CallStatus {
    /// The statuses a leg moves to this one from (SQL list): forward only,
    /// and never out of an ending.
    fn from(self) -> &'static str {
        match self {
            CallStatus::Ringing => "'ringing'",
            _ => "'ringing', 'answered'",
        }
    }

    /// The call's disposition, in sdk-crm's words (`crm.call.logged.v1`
    /// carries it as `POST /api/crm/calls` does); None while ringing or
    /// answered.
    fn disposition(self, is_voicemail: bool) -> Option<CallDisposition> {
        Some(match self {
            CallStatus::Ringing | CallStatus::Answered => return None,
            CallStatus::Completed if is_voicemail => CallDisposition::Voicemail,
            CallStatus::Completed => CallDisposition::Answered,
            CallStatus::NoAnswer => CallDisposition::NoAnswer,
            CallStatus::Busy => CallDisposition::Busy,
            CallStatus::Failed => CallDisposition::Failed,
        })
    }
}

/// The words of a set, for a check naming them.
fn words<T: Copy>(all: &[T], word: fn(T) -> &'static str) -> Vec<&'static str> {
    all.iter().map(|t| word(*t)).collect()
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = VoiceCallLeg)]
struct CallLeg {
    call_leg_id: Id,
    /// The provider, as in the inbound path.
    provider: String,
    /// The provider's call, which may have several legs.
    call_id: String,
    /// The provider's leg, unique per provider in the tenant.
    leg_id: String,
    direction: Direction,
    status: CallStatus,
    /// Whether the call reached voicemail.
    #[sqlx(try_from = "i64")]
    #[schema(value_type = bool)]
    is_voicemail: Flag,
    from_number: String,
    to_number: String,
    started_at: Timestamp,
    ended_at: Option<Timestamp>,
    duration_seconds: Option<i64>,
    created_at: Timestamp,
    updated_at: Timestamp,
}

const COLUMNS: &str = "call_leg_id, provider, call_id, leg_id, direction, status, is_voicemail, from_number, to_number, started_at, ended_at, duration_seconds, created_at, updated_at";

#[derive(Deserialize)]
struct Payload {
    call_id: Option<String>,
    leg_id: Option<String>,
    direction: Option<String>,
    status: Option<String>,
    is_voicemail: Option<bool>,
    from_number: Option<String>,
    to_number: Option<String>,
    started_at: Option<String>,
    ended_at: Option<String>,
    duration_seconds: Option<i64>,
}

/// The handler registered for kind `voice`.
pub struct CallLegs;

impl CallLegs {
    pub fn new() -> Arc<Self> {
        Arc::new(Self)
    }
}

impl InboundHandler for CallLegs {
    fn handle<'a>(&'a self, tx: &'a mut Tx, tenant_id: &'a str, provider: &'a str, payload: &'a Value) -> BoxFuture<'a, ApiResult<Value>> {
        Box::pin(record(tx, tenant_id, provider, payload))
    }
}

fn time(check: &mut Check, name: &str, raw: &Option<String>) -> Option<String> {
    let raw = Check::optional(raw)?;
    let parsed = db::parse_time(&raw).map(db::format_time);
    if parsed.is_none() {
        check.fail(format!("{name} must be an RFC 3339 timestamp"));
    }
    parsed
}

async fn record(tx: &mut Tx, tenant_id: &str, provider: &str, payload: &Value) -> ApiResult<Value> {
    let p: Payload = serde_json::from_value(payload.clone())
        .map_err(|_| ApiError::invalid("the payload must be an object of strings, is_voicemail a boolean, duration_seconds an integer"))?;
    let mut check = Check::new();
    let call_id = check.required("call_id", &p.call_id);
    let leg_id = check.required("leg_id", &p.leg_id);
    let direction = check.required("direction", &p.direction);
    check.one_of("direction", &direction, &words(Direction::ALL, Direction::as_str));
    let status = check.required("status", &p.status);
    check.one_of("status", &status, &words(CallStatus::ALL, CallStatus::as_str));
    let from = check.required("from_number", &p.from_number);
    let to = check.required("to_number", &p.to_number);
    for (name, v, most) in [("call_id", &call_id, 256), ("leg_id", &leg_id, 256), ("from_number", &from, 64), ("to_number", &to, 64)] {
        if v.chars().count() > most {
            check.fail(format!("{name} must be at most {most} characters"));
        }
    }
    if p.started_at.is_none() {
        check.fail("started_at is required");
    }
    let started_at = time(&mut check, "started_at", &p.started_at);
    let ended_at = time(&mut check, "ended_at", &p.ended_at);
    if let (Some(s), Some(e)) = (&started_at, &ended_at)
        && e < s
    {
        check.fail("ended_at must not be before started_at");
    }
    if p.duration_seconds.is_some_and(|d| !(0..=86_400).contains(&d)) {
        check.fail("duration_seconds must be 0 to 86400");
    }
    check.finish()?;
    let direction: Direction = direction.parse().map_err(ApiError::invalid)?;
    let status: CallStatus = status.parse().map_err(ApiError::invalid)?;
    let is_voicemail = p.is_voicemail.unwrap_or(false);
    let now = db::now();
    // The first report of a leg inserts it; any other, concurrent or later,
    // finds it (PostgreSQL waits for the transaction that inserted it).
    let sql = format!(
        "INSERT INTO voice_call_leg (call_leg_id, tenant_id, provider, call_id, leg_id, direction, status, is_voicemail, from_number, to_number, \
         started_at, ended_at, duration_seconds, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $14) \
         ON CONFLICT (tenant_id, provider, leg_id) DO NOTHING RETURNING {COLUMNS}"
    );
    let inserted: Option<CallLeg> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(tenant_id)
        .bind(provider)
        .bind(&call_id)
        .bind(&leg_id)
        .bind(direction)
        .bind(status)
        .bind(i64::from(is_voicemail))
        .bind(&from)
        .bind(&to)
        .bind(started_at.unwrap_or_default())
        .bind(&ended_at)
        .bind(p.duration_seconds)
        .bind(&now)
        .fetch_optional(&mut **tx)
        .await?;
    // An ended leg's voicemail flag is frozen: it decided the disposition
    // its event recorded. (`status` on the right is the stored one.)
    let set = "status = $4, is_voicemail = CASE WHEN status IN ('ringing', 'answered') THEN COALESCE($5, is_voicemail) ELSE is_voicemail END, \
               ended_at = COALESCE($6, ended_at), duration_seconds = COALESCE($7, duration_seconds), updated_at = $8";
    // No report stores an ended_at before the stored started_at (such a
    // report is refused below, 400).
    let update = |guard: &str| {
        let sql = format!(
            "UPDATE voice_call_leg SET {set} WHERE tenant_id = $1 AND provider = $2 AND leg_id = $3 AND ($6 IS NULL OR $6 >= started_at) AND {guard} RETURNING {COLUMNS}"
        );
        sqlx::query_as::<_, CallLeg>(sqlx::AssertSqlSafe(sql))
            .bind(tenant_id)
            .bind(provider)
            .bind(leg_id.clone())
            .bind(status)
            .bind(p.is_voicemail.map(i64::from))
            .bind(ended_at.clone())
            .bind(p.duration_seconds)
            .bind(now.clone())
    };
    // One statement moves the leg forward; the report that ends it is the
    // one that finds it ringing or answered (a concurrent one waits for the
    // row and then finds it ended).
    let (leg, existed, moved) = match inserted {
        Some(leg) => (leg, false, true),
        None => match update(&format!("status IN ({})", status.from())).fetch_optional(&mut **tx).await? {
            Some(leg) => (leg, true, true),
            // The leg is there already, or past it: a repeat of its status
            // updates the ended_at and duration_seconds it gives (and the
            // voicemail flag while the leg has not ended), and records
            // nothing; an older report changes nothing.
            None => {
                let leg = match update("status = $4").fetch_optional(&mut **tx).await? {
                    Some(leg) => leg,
                    None => {
                        let sql = format!("SELECT {COLUMNS} FROM voice_call_leg WHERE tenant_id = $1 AND provider = $2 AND leg_id = $3");
                        let leg: CallLeg = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(provider).bind(&leg_id).fetch_one(&mut **tx).await?;
                        if ended_at.as_deref().is_some_and(|e| e < leg.started_at.to_string().as_str()) {
                            return Err(ApiError::invalid("ended_at must not be before the leg's stored started_at"));
                        }
                        leg
                    }
                };
                (leg, true, false)
            }
        },
    };
    // A leg ending is a logged call, and a missed one when nobody took it;
    // the numbers are personal data and stay out of the events.
    if moved && let Some(disposition) = leg.status.disposition(leg.is_voicemail.0) {
        // The key set of `POST /api/crm/calls`'s event too: what a
        // provider does not give is null.
        let payload = json!({
            "call_id": null, "call_leg_id": leg.call_leg_id, "contact_id": null, "lead_id": null, "provider": provider,
            "provider_call_id": leg.call_id, "direction": leg.direction, "status": leg.status, "disposition": disposition,
            "is_voicemail": leg.is_voicemail, "duration_seconds": leg.duration_seconds, "recording_consent": null,
            "occurred_at": leg.started_at, "ended_at": leg.ended_at,
        });
        let actor = format!("{KIND}:{provider}");
        audit::record_system(tx, tenant_id, &actor, events::CRM_CALL_LOGGED, payload.clone()).await?;
        if disposition.missed() {
            audit::record_system(tx, tenant_id, &actor, events::CRM_CALL_MISSED, payload).await?;
        }
    }
    Ok(json!({ "recorded": true, "call_leg_id": leg.call_leg_id, "updated": existed, "status": leg.status }))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct Filter {
    /// The caller's tenant.
    #[param(format = "uuid")]
    tenant_id: String,
    #[param(inline)]
    status: Option<CallStatus>,
    #[param(inline)]
    direction: Option<Direction>,
    /// `true` (only the legs that reached voicemail) or `false`.
    is_voicemail: Option<bool>,
    /// Only the legs of this provider call.
    #[param(max_length = 256)]
    call_id: Option<String>,
}

/// The tenant's call legs, newest first.
#[utoipa::path(get, path = "/api/voice/call-legs", tag = "connector-voice", params(Filter, Page),
    responses((status = 200, description = "one page of call legs", body = ListOf<CallLeg>)))]
async fn list(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<Filter>, page: Page) -> ApiResult<ListOf<CallLeg>> {
    ctx.check_tenant(Some(&q.tenant_id))?;
    let status = q.status.map_or("", CallStatus::as_str);
    let direction = q.direction.map_or("", Direction::as_str);
    let voicemail = q.is_voicemail.map_or("", |v| if v { "true" } else { "false" });
    let call_id = Check::optional(&q.call_id).unwrap_or_default();
    let listing = Listing {
        table: "voice_call_leg",
        columns: COLUMNS,
        filter: "tenant_id = $1 AND ($2 = '' OR status = $2) AND ($3 = '' OR direction = $3) \
                 AND ($4 = '' OR is_voicemail = CASE WHEN $4 = 'true' THEN 1 ELSE 0 END) AND ($5 = '' OR call_id = $5)",
        order: "started_at DESC, call_leg_id DESC",
    };
    page.list::<CallLeg>(&state.db.read, &listing, &[&ctx.tenant_id, status, direction, voicemail, &call_id]).await
}

/// One call leg of the tenant.
#[utoipa::path(get, path = "/api/voice/call-legs/{call_leg_id}", tag = "connector-voice",
    params(("call_leg_id" = String, Path, description = "the call leg")),
    responses((status = 200, description = "the call leg", body = Data<CallLeg>)))]
async fn get_leg(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<CallLeg>> {
    let id = path_id(&id)?.to_string();
    let sql = format!("SELECT {COLUMNS} FROM voice_call_leg WHERE tenant_id = $1 AND call_leg_id = $2");
    let leg: Option<CallLeg> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&state.db.read).await?;
    Ok(ok(leg.ok_or(ApiError::NotFound)?))
}
