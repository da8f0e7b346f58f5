//! sdk-conversation: whether the tenant may compose to a subject on each
//! channel, for one consent purpose, at one time. Three rules, in this
//! order, each giving a reason: consent (hub-governance's consent records
//! for the purpose), the tenant's suppression list (addresses never to be
//! written to on a channel), and the tenant's quiet hours. A channel's
//! decision is the strictest of its rules': `deny` over `review` over
//! `allow`. A suppression is lifted by deleting it; the quiet hours are
//! replaced or cleared.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use hub_kernel::prelude::*;

use crate::sequence::{CHANNELS, Channel};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(compose_check)).routes(routes!(suppress, list_suppressions)).routes(routes!(lift_suppression)).routes(routes!(
        set_quiet_hours,
        get_quiet_hours,
        clear_quiet_hours
    ))
}

/// Channels that interrupt: quiet hours cover them unless the tenant says otherwise.
const INTERRUPTING: [Channel; 4] = [Channel::Sms, Channel::Whatsapp, Channel::Push, Channel::Voice];

stored_enum! {
    /// Whether the tenant may compose on a channel: `review` means a
    /// person decides.
    #[schema(as = ConversationDecision)]
    enum Decision { Allow = "allow", Review = "review", Deny = "deny" }
}

/// The strictness of a decision, for taking the strictest.
fn rank(decision: Decision) -> u8 {
    match decision {
        Decision::Deny => 2,
        Decision::Review => 1,
        Decision::Allow => 0,
    }
}

/// An address as it is matched: trimmed, an email's lower-cased.
fn normal_address(channel: Option<Channel>, address: &str) -> String {
    if channel == Some(Channel::Email) { address.trim().to_lowercase() } else { address.trim().to_string() }
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = ConversationSuppression)]
pub(crate) struct Suppression {
    pub(crate) suppression_id: Id,
    channel: Channel,
    address: String,
    reason: Option<String>,
    created_at: Timestamp,
}

const SUPPRESSION_COLUMNS: &str = "suppression_id, channel, address, reason, created_at";

#[derive(Deserialize, ToSchema)]
#[schema(as = NewConversationSuppression)]
struct NewSuppression {
    channel: Channel,
    /// The address never to write to on that channel.
    #[schema(max_length = 320)]
    address: String,
    /// Why: a bounce, a complaint, a request.
    #[schema(max_length = 500)]
    reason: Option<String>,
}

/// Adds an address of a channel to the tenant's suppression list.
#[utoipa::path(post, path = "/api/conversations/suppressions", tag = "sdk-conversation", request_body = NewSuppression,
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "body": { "channel": "email", "address": "s-{unique}@races.example.com", "reason": "race" } }))),
    responses((status = 201, description = "the suppression", body = Data<Suppression>)))]
async fn suppress(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewSuppression>) -> ApiResult<Created<Suppression>> {
    let body = body.checked()?;
    let channel = body.channel;
    let address = normal_address(Some(channel), &body.address);
    let reason = Check::optional(&body.reason);
    let mut tx = state.db.begin().await?;
    let made = add_suppression(&mut tx, &ctx.tenant_id, channel, &address, reason.as_deref(), audit::actor_of(&ctx).1).await?;
    let made = made.ok_or_else(|| ApiError::Conflict(format!("the address is suppressed on {channel} already")))?;
    // The address is personal data: the event names the row, not the address.
    audit::record(&mut tx, &ctx, events::ADDRESS_SUPPRESSED, json!({ "suppression_id": made.suppression_id, "channel": channel })).await?;
    tx.commit().await?;
    Ok(created(made))
}

/// Adds an address (normalised here) to the tenant's suppression list, in
/// the caller's transaction; `None` when it is suppressed on the channel
/// already. sdk-deliverability suppresses hard bounces and complaints
/// through it.
pub(crate) async fn add_suppression(
    tx: &mut Tx,
    tenant_id: &str,
    channel: Channel,
    address: &str,
    reason: Option<&str>,
    created_by: &str,
) -> ApiResult<Option<Suppression>> {
    let sql = format!(
        "INSERT INTO conversation_suppression (suppression_id, tenant_id, channel, address, reason, created_by, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (tenant_id, channel, address) DO NOTHING RETURNING {SUPPRESSION_COLUMNS}"
    );
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(db::new_id())
        .bind(tenant_id)
        .bind(channel)
        .bind(normal_address(Some(channel), address))
        .bind(reason)
        .bind(created_by)
        .bind(db::now())
        .fetch_optional(&mut **tx)
        .await?)
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct SuppressionFilter {
    #[param(inline)]
    channel: Option<Channel>,
    /// One address (matched as stored: an email's in lower case).
    address: Option<String>,
}

/// The tenant's suppression list, newest first.
#[utoipa::path(get, path = "/api/conversations/suppressions", tag = "sdk-conversation", params(SuppressionFilter, Page),
    responses((status = 200, description = "one page of suppressions", body = ListOf<Suppression>)))]
async fn list_suppressions(
    State(state): State<AppState>,
    Tenant(ctx): Tenant,
    Params(q): Params<SuppressionFilter>,
    page: Page,
) -> ApiResult<ListOf<Suppression>> {
    let address = Check::optional(&q.address).map(|a| normal_address(q.channel, &a)).unwrap_or_default();
    let channel = q.channel.map_or("", Channel::as_str);
    let listing = Listing {
        table: "conversation_suppression",
        columns: SUPPRESSION_COLUMNS,
        filter: "tenant_id = $1 AND ($2 = '' OR channel = $2) AND ($3 = '' OR address = $3 OR address = LOWER($3))",
        order: "created_at DESC, suppression_id DESC",
    };
    page.list::<Suppression>(&state.db.read, &listing, &[&ctx.tenant_id, channel, &address]).await
}

/// The answer of a suppression's lifting.
#[derive(Serialize, ToSchema)]
#[schema(as = ConversationSuppressionLifted)]
struct Lifted {
    suppression_id: Id,
    deleted: bool,
}

/// Lifts a suppression: the address may be written to on the channel
/// again (a mistaken bounce, a subject who asked again). The row is
/// deleted, the address with it; the event keeps the suppression's id and
/// channel, never the address.
#[utoipa::path(delete, path = "/api/conversations/suppressions/{suppression_id}", tag = "sdk-conversation",
    params(("suppression_id" = String, Path, description = "the suppression")),
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "losers": 404,
        "given": [["POST", "/api/conversations/suppressions", { "channel": "email", "address": "s-{unique}@races.example.com", "reason": "race" }]] }))),
    responses((status = 200, description = "deleted", body = Data<Lifted>)))]
async fn lift_suppression(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Lifted>> {
    let id = path_id(&id)?.to_string();
    let mut tx = state.db.begin().await?;
    // The delete itself says whether this request removed the row: of two
    // at once, the other finds nothing (404).
    let gone: Option<(Id, Channel)> =
        sqlx::query_as("DELETE FROM conversation_suppression WHERE tenant_id = $1 AND suppression_id = $2 RETURNING suppression_id, channel")
            .bind(&ctx.tenant_id)
            .bind(&id)
            .fetch_optional(&mut *tx)
            .await?;
    let (suppression_id, channel) = gone.ok_or(ApiError::NotFound)?;
    audit::record(&mut tx, &ctx, events::ADDRESS_UNSUPPRESSED, json!({ "suppression_id": suppression_id, "channel": channel })).await?;
    tx.commit().await?;
    Ok(ok(Lifted { suppression_id, deleted: true }))
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
struct QuietHours {
    /// An IANA time zone (`Europe/Amsterdam`).
    timezone: String,
    /// `HH:MM`, local time: quiet from here...
    starts: String,
    /// ...until here (past midnight when earlier than `starts`).
    ends: String,
    /// The channels they cover.
    #[sqlx(try_from = "String")]
    #[schema(value_type = Vec<String>)]
    channels: JsonText,
    updated_at: Timestamp,
}

const QUIET_COLUMNS: &str = "timezone, starts, ends, channels, updated_at";

/// Minutes after midnight of an `HH:MM` time.
fn minutes(hhmm: &str) -> Option<u32> {
    let (h, m) = hhmm.split_once(':')?;
    let (h, m): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
    (hhmm.len() == 5 && h < 24 && m < 60).then_some(h * 60 + m)
}

#[derive(Deserialize, ToSchema)]
#[schema(as = ConversationQuietHoursSetting)]
struct QuietHoursSetting {
    /// An IANA time zone (`Europe/Amsterdam`).
    timezone: String,
    /// `HH:MM`, local time: quiet from here...
    #[schema(pattern = r"^(?:[01][0-9]|2[0-3]):[0-5][0-9]$")]
    starts: String,
    /// ...until here (past midnight when earlier than `starts`); not
    /// `starts`.
    #[schema(pattern = r"^(?:[01][0-9]|2[0-3]):[0-5][0-9]$")]
    ends: String,
    /// The channels they cover; `sms`, `whatsapp`, `push`, `voice` when
    /// absent.
    #[schema(min_items = 1)]
    channels: Option<Vec<Channel>>,
}

/// Sets (replaces) the tenant's quiet hours.
#[utoipa::path(put, path = "/api/conversations/quiet-hours", tag = "sdk-conversation", request_body = QuietHoursSetting,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "body": { "timezone": "Europe/Amsterdam", "starts": "22:00", "ends": "07:00", "channels": ["voice"] } }))),
    responses((status = 200, description = "the quiet hours", body = Data<QuietHours>)))]
async fn set_quiet_hours(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<QuietHoursSetting>) -> ApiResult<Data<QuietHours>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let timezone = body.timezone.trim().to_string();
    if jiff::tz::TimeZone::get(&timezone).is_err() {
        check.fail("timezone must be an IANA time zone (Europe/Amsterdam, ...)");
    }
    static STARTS: Pattern = Pattern::of::<QuietHoursSetting>("starts");
    static ENDS: Pattern = Pattern::of::<QuietHoursSetting>("ends");
    let (starts, ends) = (body.starts.clone(), body.ends.clone());
    for (name, v, form) in [("starts", &starts, &STARTS), ("ends", &ends, &ENDS)] {
        if !form.is_match(v) || minutes(v).is_none() {
            check.fail(format!("{name} must be a time HH:MM"));
        }
    }
    if starts == ends {
        check.fail("ends must differ from starts");
    }
    let channels: Vec<Channel> = body.channels.clone().unwrap_or_else(|| INTERRUPTING.to_vec());
    check.finish()?;
    let mut tx = state.db.begin().await?;
    let sql = format!(
        "INSERT INTO conversation_quiet_hours (tenant_id, timezone, starts, ends, channels, updated_by, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7) \
         ON CONFLICT (tenant_id) DO UPDATE SET timezone = $2, starts = $3, ends = $4, channels = $5, updated_by = $6, updated_at = $7 RETURNING {QUIET_COLUMNS}"
    );
    let set: QuietHours = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(&ctx.tenant_id)
        .bind(&timezone)
        .bind(&starts)
        .bind(&ends)
        .bind(json!(channels).to_string())
        .bind(audit::actor_of(&ctx).1)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
    let payload = json!({ "timezone": timezone, "starts": starts, "ends": ends, "channels": channels });
    audit::record(&mut tx, &ctx, events::QUIET_HOURS_SET, payload).await?;
    tx.commit().await?;
    Ok(ok(set))
}

async fn quiet_hours(db: &Db, tenant_id: &str) -> ApiResult<Option<QuietHours>> {
    let sql = format!("SELECT {QUIET_COLUMNS} FROM conversation_quiet_hours WHERE tenant_id = $1");
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).fetch_optional(&db.read).await?)
}

/// The tenant's quiet hours (404 when it has none).
#[utoipa::path(get, path = "/api/conversations/quiet-hours", tag = "sdk-conversation",
    responses((status = 200, description = "the quiet hours", body = Data<QuietHours>), (status = 404, description = "NotFound: the tenant has set no quiet hours", body = ErrorBody)))]
async fn get_quiet_hours(State(state): State<AppState>, Tenant(ctx): Tenant) -> ApiResult<Data<QuietHours>> {
    Ok(ok(quiet_hours(&state.db, &ctx.tenant_id).await?.ok_or(ApiError::NotFound)?))
}

/// The answer of clearing the quiet hours.
#[derive(Serialize, ToSchema)]
#[schema(as = ConversationQuietHoursCleared)]
struct Cleared {
    deleted: bool,
}

/// Clears the tenant's quiet hours: no channel is quiet until they are set
/// again (404 when none are set).
#[utoipa::path(delete, path = "/api/conversations/quiet-hours", tag = "sdk-conversation",
    extensions(("x-concurrency" = json!({ "outcome": "one-wins", "losers": 404,
        "given": [["PUT", "/api/conversations/quiet-hours", { "timezone": "Europe/Amsterdam", "starts": "22:00", "ends": "07:00" }]] }))),
    responses((status = 200, description = "deleted", body = Data<Cleared>),
        (status = 404, description = "NotFound: the tenant has set no quiet hours", body = ErrorBody)))]
async fn clear_quiet_hours(State(state): State<AppState>, Tenant(ctx): Tenant) -> ApiResult<Data<Cleared>> {
    let mut tx = state.db.begin().await?;
    let gone: Option<String> = sqlx::query_scalar("DELETE FROM conversation_quiet_hours WHERE tenant_id = $1 RETURNING tenant_id")
        .bind(&ctx.tenant_id)
        .fetch_optional(&mut *tx)
        .await?;
    gone.ok_or(ApiError::NotFound)?;
    audit::record(&mut tx, &ctx, events::QUIET_HOURS_CLEARED, json!({ "cleared": true })).await?;
    tx.commit().await?;
    Ok(ok(Cleared { deleted: true }))
}

#[derive(Deserialize, ToSchema)]
#[schema(as = ConversationComposeCheck)]
struct ComposeCheck {
    /// The consent subject written to (as sdk-consent records it).
    subject: String,
    /// The purpose of the tenant's consent catalogue the message serves.
    purpose_id: String,
    /// Distinct channels, answered in this order.
    #[schema(min_items = 1, max_items = 5)]
    channels: Vec<Channel>,
    /// The subject's address on each channel, for the suppression list:
    /// keys are channels (`email`, `sms`, `whatsapp`, `push`, `voice`).
    addresses: Option<HashMap<String, String>>,
    /// When the message would go out; now when absent.
    #[schema(format = DateTime)]
    send_at: Option<String>,
}

#[derive(Serialize, ToSchema)]
#[schema(as = ConversationChannelDecision)]
struct ChannelDecision {
    channel: Channel,
    decision: Decision,
    /// Consent, suppression, quiet hours: one reason each, in that order.
    reasons: Vec<String>,
}

#[derive(Serialize, ToSchema)]
#[schema(as = ConversationComposeDecision)]
struct ComposeDecision {
    subject: String,
    purpose_id: String,
    send_at: Timestamp,
    channels: Vec<ChannelDecision>,
}

/// Decides, per channel, whether the tenant may compose to the subject.
#[utoipa::path(post, path = "/api/conversations/compose-check", tag = "sdk-conversation", request_body = ComposeCheck,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "events": 0, "given": [["POST", "/api/consent/purposes", { "purpose_id": "p-{unique}", "description": "race", "legal_basis": "contract" }]], "body": { "subject": "s-{unique}", "purpose_id": "p-{unique}", "channels": ["email", "sms"], "addresses": { "email": "s-{unique}@races.example.com" } } }))),
    responses((status = 200, description = "a decision per channel, with its reasons", body = Data<ComposeDecision>)))]
async fn compose_check(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<ComposeCheck>) -> ApiResult<Data<ComposeDecision>> {
    let body = body.checked()?;
    let mut check = Check::new();
    let subject = body.subject.trim().to_string();
    let purpose = body.purpose_id.trim().to_string();
    let channels = body.channels.clone();
    let mut seen = HashSet::new();
    if !body.channels.iter().all(|c| seen.insert(*c)) {
        check.fail("channels must be distinct");
    }
    let addresses = body.addresses.unwrap_or_default();
    if addresses.keys().any(|k| !CHANNELS.contains(&k.as_str())) {
        check.fail(format!("addresses must map channels to address strings: its keys are among {}", CHANNELS.join(", ")));
    }
    let send_at = Check::optional(&body.send_at).and_then(|raw| db::parse_time(&raw)).unwrap_or_else(Utc::now);
    check.finish()?;
    let standing = hub_governance::consent::standing(&state.db.read, &ctx.tenant_id, &subject, &purpose)
        .await?
        .ok_or_else(|| ApiError::invalid("purpose_id is not a purpose of this tenant's catalogue"))?;
    let consent = match (standing.legal_basis.as_str(), standing.latest.as_ref()) {
        ("consent", Some((action, at))) if action == "granted" => (Decision::Allow, format!("consent to {purpose} granted at {at}")),
        ("consent", Some((_, at))) => (Decision::Deny, format!("consent to {purpose} withdrawn at {at}")),
        ("consent", None) => (Decision::Deny, format!("no consent to {purpose} recorded for the subject")),
        (basis, Some((action, at))) if action == "withdrawn" => {
            (Decision::Review, format!("the subject withdrew from {purpose} at {at}, which rests on {basis}: a person decides"))
        }
        (basis, _) => (Decision::Allow, format!("{purpose} rests on {basis}: no consent needed")),
    };
    let quiet = quiet_hours(&state.db, &ctx.tenant_id).await?;
    let mut decisions = Vec::new();
    for &channel in &channels {
        let mut rules = vec![consent.clone()];
        rules.push(match addresses.get(channel.as_str()) {
            None => (Decision::Review, format!("no {channel} address given: the suppression list was not consulted")),
            Some(a) => {
                let address = normal_address(Some(channel), a);
                let hit: Option<(Option<String>, String)> =
                    sqlx::query_as("SELECT reason, created_at FROM conversation_suppression WHERE tenant_id = $1 AND channel = $2 AND address = $3")
                        .bind(&ctx.tenant_id)
                        .bind(channel)
                        .bind(&address)
                        .fetch_optional(&state.db.read)
                        .await?;
                match hit {
                    Some((reason, since)) => {
                        (Decision::Deny, format!("the {channel} address is suppressed since {since}: {}", reason.unwrap_or("no reason given".into())))
                    }
                    None => (Decision::Allow, format!("the {channel} address is not suppressed")),
                }
            }
        });
        rules.push(quiet_rule(quiet.as_ref(), channel, send_at));
        let decision = rules.iter().map(|(d, _)| *d).max_by_key(|d| rank(*d)).unwrap_or(Decision::Allow);
        decisions.push(ChannelDecision { channel, decision, reasons: rules.into_iter().map(|(_, r)| r).collect() });
    }
    Ok(ok(ComposeDecision { subject, purpose_id: purpose, send_at: Timestamp(send_at), channels: decisions }))
}

/// Quiet hours: `review` when `send_at`, in the tenant's zone, falls in
/// [starts, ends) on a channel they cover.
fn quiet_rule(quiet: Option<&QuietHours>, channel: Channel, send_at: DateTime<Utc>) -> (Decision, String) {
    let Some(q) = quiet.filter(|q| q.channels.0.as_array().is_some_and(|c| c.iter().any(|c| c == channel.as_str()))) else {
        return (Decision::Allow, format!("no quiet hours cover {channel}"));
    };
    let local = jiff::tz::TimeZone::get(&q.timezone)
        .ok()
        .and_then(|tz| Some(jiff::Timestamp::from_microsecond(send_at.timestamp_micros()).ok()?.to_zoned_datetime(tz).time()));
    let Some(local) = local else {
        return (Decision::Review, format!("the time zone {} is not known here: quiet hours were not checked", q.timezone));
    };
    let now = local.hour() as u32 * 60 + local.minute() as u32;
    let (start, end) = (minutes(&q.starts).unwrap_or(0), minutes(&q.ends).unwrap_or(0));
    let inside = if start < end { start <= now && now < end } else { now >= start || now < end };
    let at = format!("{:02}:{:02} {}", local.hour(), local.minute(), q.timezone);
    if inside {
        (Decision::Review, format!("{at} is within the quiet hours {}-{} for {channel}", q.starts, q.ends))
    } else {
        (Decision::Allow, format!("{at} is outside the quiet hours {}-{}", q.starts, q.ends))
    }
}
