//! sdk-deliverability: bounces and complaints an email provider reports
//! through the signed inbound webhook of kind `email`
//! (`POST /api/webhooks/inbound/email/{provider}`). The payload is
//! provider-neutral, one event per message:
//! `{ "type": "bounce" | "complaint" | "delivery", "bounce_type": "permanent" | "transient",
//! "email", "message_id", "occurred_at" }` (`bounce_type` for a bounce only,
//! `message_id` optional, `occurred_at` RFC 3339, now when absent). A
//! permanent bounce is classified `hard`, a transient one `soft`, a
//! complaint `complaint`; a delivery is acknowledged and not kept. A hard
//! bounce or a complaint puts the address on the tenant's suppression list,
//! which the compose check reads.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use hub_kernel::{inbound::InboundHandler, prelude::*};

use crate::{conversation, sequence::Channel};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list)).routes(routes!(get_event))
}

/// The kind whose inbound webhooks this group handles.
pub const KIND: &str = "email";

const TYPES: [&str; 3] = ["bounce", "complaint", "delivery"];
const BOUNCE_TYPES: [&str; 2] = ["permanent", "transient"];

stored_enum! {
    /// What a provider's report was: a permanent bounce (`hard`), a
    /// transient one (`soft`) or a complaint.
    #[schema(as = DeliverabilityClassification)]
    enum Classification { Hard = "hard", Soft = "soft", Complaint = "complaint" }
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = DeliverabilityEvent)]
struct Event {
    event_id: Id,
    /// The provider, as in the inbound path.
    provider: String,
    classification: Classification,
    /// The address that bounced or complained (lower case).
    email: String,
    /// The provider's id of the message concerned.
    message_id: Option<String>,
    /// The suppression it caused (hard bounces and complaints only).
    suppression_id: Option<Id>,
    occurred_at: Timestamp,
    received_at: Timestamp,
}

const COLUMNS: &str = "event_id, provider, classification, email, message_id, suppression_id, occurred_at, received_at";

/// The provider-neutral payload of kind `email`.
#[derive(Deserialize)]
struct Payload {
    #[serde(rename = "type")]
    kind: Option<String>,
    bounce_type: Option<String>,
    email: Option<String>,
    message_id: Option<String>,
    occurred_at: Option<String>,
}

/// The handler registered for kind `email`.
pub struct EmailEvents;

impl EmailEvents {
    pub fn new() -> Arc<Self> {
        Arc::new(Self)
    }
}

impl InboundHandler for EmailEvents {
    fn handle<'a>(&'a self, tx: &'a mut Tx, tenant_id: &'a str, provider: &'a str, payload: &'a Value) -> BoxFuture<'a, ApiResult<Value>> {
        Box::pin(record(tx, tenant_id, provider, payload))
    }
}

async fn record(tx: &mut Tx, tenant_id: &str, provider: &str, payload: &Value) -> ApiResult<Value> {
    let p: Payload = serde_json::from_value(payload.clone()).map_err(|_| ApiError::invalid("the payload must be an object of string fields"))?;
    let mut check = Check::new();
    let kind = check.required("type", &p.kind);
    check.one_of("type", &kind, &TYPES);
    let bounce_type = Check::optional(&p.bounce_type).unwrap_or_default();
    if kind == "bounce" && bounce_type.is_empty() {
        check.fail("bounce_type is required for a bounce");
    }
    check.one_of("bounce_type", &bounce_type, &BOUNCE_TYPES);
    let email = check.required("email", &p.email).to_lowercase();
    if !email.is_empty() && (!email.contains('@') || email.chars().count() > 320) {
        check.fail("email must be an address of at most 320 characters");
    }
    let message_id = Check::optional(&p.message_id);
    if message_id.as_ref().is_some_and(|m| m.len() > 256) {
        check.fail("message_id must be at most 256 characters");
    }
    let occurred_at = match Check::optional(&p.occurred_at) {
        None => db::now(),
        Some(raw) => db::parse_time(&raw).map(db::format_time).unwrap_or_else(|| {
            check.fail("occurred_at must be an RFC 3339 timestamp");
            String::new()
        }),
    };
    check.finish()?;
    let classification = match (kind.as_str(), bounce_type.as_str()) {
        ("bounce", "permanent") => Classification::Hard,
        ("bounce", _) => Classification::Soft,
        ("complaint", _) => Classification::Complaint,
        _ => return Ok(json!({ "recorded": false, "reason": "deliveries are not kept" })),
    };
    let actor = format!("{KIND}:{provider}");
    let mut suppression_id = None;
    if classification != Classification::Soft {
        let reason = format!("{} reported by {provider}", if classification == Classification::Hard { "hard bounce" } else { "complaint" });
        if let Some(made) = conversation::add_suppression(tx, tenant_id, Channel::Email, &email, Some(&reason), &actor).await? {
            let payload = json!({ "suppression_id": made.suppression_id, "channel": KIND, "cause": classification });
            audit::record_system(tx, tenant_id, &actor, events::ADDRESS_SUPPRESSED, payload).await?;
            suppression_id = Some(made.suppression_id);
        }
    }
    let event_id = Id::new();
    sqlx::query(
        "INSERT INTO deliverability_event (event_id, tenant_id, provider, classification, email, message_id, suppression_id, occurred_at, received_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(event_id)
    .bind(tenant_id)
    .bind(provider)
    .bind(classification)
    .bind(&email)
    .bind(&message_id)
    .bind(suppression_id)
    .bind(&occurred_at)
    .bind(db::now())
    .execute(&mut **tx)
    .await?;
    // The address is personal data: the event names the row only.
    let event_type = if classification == Classification::Complaint { events::COMPLAINT_PROCESSED } else { events::BOUNCE_PROCESSED };
    audit::record_system(tx, tenant_id, &actor, event_type, json!({ "event_id": event_id, "classification": classification, "provider": provider })).await?;
    Ok(json!({ "recorded": true, "event_id": event_id, "classification": classification, "suppressed": suppression_id.is_some() }))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct Filter {
    /// The caller's tenant.
    #[param(format = "uuid")]
    tenant_id: String,
    #[param(inline)]
    classification: Option<Classification>,
    /// Only the events of this address (any case): why it is suppressed.
    #[param(max_length = 320)]
    email: Option<String>,
}

/// The tenant's processed bounces and complaints, newest first.
#[utoipa::path(get, path = "/api/deliverability/events", tag = "sdk-deliverability", params(Filter, Page),
    responses((status = 200, description = "one page of bounce and complaint events", body = ListOf<Event>)))]
async fn list(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<Filter>, page: Page) -> ApiResult<ListOf<Event>> {
    ctx.check_tenant(Some(&q.tenant_id))?;
    let classification = q.classification.map_or("", Classification::as_str);
    // Addresses are kept in lower case.
    let email = Check::optional(&q.email).unwrap_or_default().to_lowercase();
    let listing = Listing {
        table: "deliverability_event",
        columns: COLUMNS,
        filter: "tenant_id = $1 AND ($2 = '' OR classification = $2) AND ($3 = '' OR email = $3)",
        order: "occurred_at DESC, event_id DESC",
    };
    page.list::<Event>(&state.db.read, &listing, &[&ctx.tenant_id, classification, &email]).await
}

/// One processed bounce or complaint of the tenant.
#[utoipa::path(get, path = "/api/deliverability/events/{event_id}", tag = "sdk-deliverability",
    params(("event_id" = String, Path, description = "the event")),
    responses((status = 200, description = "the event", body = Data<Event>)))]
async fn get_event(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Event>> {
    let id = path_id(&id)?.to_string();
    let sql = format!("SELECT {COLUMNS} FROM deliverability_event WHERE tenant_id = $1 AND event_id = $2");
    let event: Option<Event> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(&ctx.tenant_id).bind(&id).fetch_optional(&state.db.read).await?;
    Ok(ok(event.ok_or(ApiError::NotFound)?))
}
