//! connector-<provider>-voice: call legs a voice provider reports through
//! the signed inbound webhook of kind `voice`
//! (`POST /api/webhooks/inbound/voice/{provider}`), one leg per message:
//! `{ "call_id", "leg_id", "direction", "status", "is_voicemail",
//! "from_number", "to_number", "started_at", "ended_at",
//! "duration_seconds" }`. A leg is kept once per (tenant, provider,
//! `leg_id`): a repeat updates its status, voicemail flag and ending, so a
//! provider may report `ringing`, then `answered`, then `completed`.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use hub_kernel::{inbound::InboundHandler, prelude::*};

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
    let existing: Option<String> = sqlx::query_scalar("SELECT call_leg_id FROM voice_call_leg WHERE tenant_id = $1 AND provider = $2 AND leg_id = $3")
        .bind(tenant_id)
        .bind(provider)
        .bind(&leg_id)
        .fetch_optional(&mut **tx)
        .await?;
    let call_leg_id = existing.clone().unwrap_or_else(db::new_id);
    sqlx::query(
        "INSERT INTO voice_call_leg (call_leg_id, tenant_id, provider, call_id, leg_id, direction, status, is_voicemail, from_number, to_number, \
         started_at, ended_at, duration_seconds, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $14) \
         ON CONFLICT (tenant_id, provider, leg_id) DO UPDATE SET status = $7, is_voicemail = $8, ended_at = COALESCE($12, voice_call_leg.ended_at), \
         duration_seconds = COALESCE($13, voice_call_leg.duration_seconds), updated_at = $14",
    )
    .bind(&call_leg_id)
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
    .execute(&mut **tx)
    .await?;
    // An inbound call nobody took is missed; the numbers are personal data
    // and stay out of the event.
    let missed = direction == Direction::Inbound && (is_voicemail || matches!(status, CallStatus::NoAnswer | CallStatus::Busy));
    let event = if missed { events::CRM_CALL_MISSED } else { events::CRM_CALL_LOGGED };
    let payload = json!({ "call_leg_id": call_leg_id, "provider": provider, "direction": direction, "status": status, "is_voicemail": is_voicemail });
    audit::record_system(tx, tenant_id, &format!("{KIND}:{provider}"), event, payload).await?;
    Ok(json!({ "recorded": true, "call_leg_id": call_leg_id, "updated": existing.is_some() }))
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
