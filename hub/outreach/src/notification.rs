//! sdk-notification: notifications sent through a provider, and the
//! delivery receipts providers send back. `POST /api/notifications` hands
//! the message to a [`NotificationProvider`] (the default, `log`, writes
//! ids to the log) and keeps the notification `sent` with the provider's
//! message id, or `failed` with the provider's error; the content goes to
//! the provider and is not kept. Receipts arrive through the signed inbound
//! webhook of kind `notification`, one per message:
//! `{ "message_id", "status", "reason", "occurred_at" }`; one matching a
//! notification of the tenant sent through that provider moves it to
//! `delivered`, `failed` or `bounced`.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use hub_kernel::{inbound::InboundHandler, prelude::*};

use crate::sequence::Channel;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(send, list)).routes(routes!(list_receipts)).routes(routes!(get_notification)).routes(routes!(receipts_of))
}

/// The kind whose inbound webhooks carry receipts.
pub const KIND: &str = "notification";

stored_enum! {
    /// Where a notification is: `sent` or `failed` at sending, then as
    /// its receipts settle it.
    #[schema(as = NotificationStatus)]
    enum Status { Sent = "sent", Failed = "failed", Delivered = "delivered", Bounced = "bounced" }
}

stored_enum! {
    /// What a provider's receipt reports of a message.
    #[schema(as = NotificationReceiptStatus)]
    enum ReceiptStatus {
        Delivered = "delivered",
        Deferred = "deferred",
        Failed = "failed",
        Bounced = "bounced",
        Opened = "opened",
        Clicked = "clicked",
    }
}

impl ReceiptStatus {
    /// The notification's status a receipt settles, if it settles one.
    fn settles(self) -> Option<Status> {
        match self {
            ReceiptStatus::Delivered => Some(Status::Delivered),
            ReceiptStatus::Failed => Some(Status::Failed),
            ReceiptStatus::Bounced => Some(Status::Bounced),
            ReceiptStatus::Deferred | ReceiptStatus::Opened | ReceiptStatus::Clicked => None,
        }
    }
}

/// One message handed to a provider.
pub struct Outgoing<'a> {
    pub notification_id: &'a str,
    pub tenant_id: &'a str,
    pub channel: &'a str,
    pub recipient: &'a str,
    pub subject: Option<&'a str>,
    pub body: &'a str,
}

/// Sends notifications: answers the provider's message id, or why not.
pub trait NotificationProvider: Send + Sync {
    fn name(&self) -> &'static str;
    fn send<'a>(&'a self, message: &'a Outgoing<'a>) -> BoxFuture<'a, Result<String, String>>;
}

/// The default provider: writes the notification's ids (never its
/// recipient or content) to the log.
pub struct LogProvider;

impl NotificationProvider for LogProvider {
    fn name(&self) -> &'static str {
        "log"
    }

    fn send<'a>(&'a self, m: &'a Outgoing<'a>) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async move {
            let message_id = format!("log-{}", db::new_id());
            tracing::info!(notification_id = m.notification_id, tenant_id = m.tenant_id, channel = m.channel, message_id, "notification sent");
            Ok(message_id)
        })
    }
}

/// The providers a notification may name.
fn providers() -> Vec<Arc<dyn NotificationProvider>> {
    vec![Arc::new(LogProvider)]
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
struct Notification {
    notification_id: Id,
    channel: Channel,
    recipient: String,
    provider: String,
    provider_message_id: Option<String>,
    status: Status,
    /// The provider's error when `failed` at sending.
    error: Option<String>,
    created_at: Timestamp,
    updated_at: Timestamp,
}

const COLUMNS: &str = "notification_id, channel, recipient, provider, provider_message_id, status, error, created_at, updated_at";

#[derive(Deserialize, ToSchema)]
struct NewNotification {
    channel: Channel,
    /// The address on that channel.
    #[schema(max_length = 320)]
    recipient: String,
    #[schema(max_length = 300)]
    subject: Option<String>,
    /// Handed to the provider, not kept.
    #[schema(max_length = 20000)]
    body: String,
    /// `log` when absent.
    provider: Option<ProviderName>,
}

/// The providers a notification may name.
#[derive(Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = NotificationProviderName)]
enum ProviderName {
    Log,
}

impl ProviderName {
    fn as_str(self) -> &'static str {
        match self {
            ProviderName::Log => "log",
        }
    }
}

/// Sends a notification through a provider and keeps it, `sent` or `failed`.
#[utoipa::path(post, path = "/api/notifications", tag = "sdk-notification", request_body = NewNotification,
    extensions(("x-concurrency" = json!({ "outcome": "independent", "body": { "channel": "email", "recipient": "n-{unique}@races.example.com", "subject": "race", "body": "hello" } }))),
    responses((status = 201, description = "the notification, sent or failed", body = Data<Notification>)))]
async fn send(State(state): State<AppState>, Tenant(ctx): Tenant, body: Body<NewNotification>) -> ApiResult<Created<Notification>> {
    let body = body.checked()?;
    let channel = body.channel.as_str();
    let recipient = body.recipient.trim();
    let subject = Check::optional(&body.subject);
    let content = body.body.trim();
    let name = body.provider.unwrap_or(ProviderName::Log).as_str();
    let provider = providers().into_iter().find(|p| p.name() == name).ok_or_else(|| ApiError::invalid(format!("provider {name} is not configured")))?;
    let notification_id = Id::new();
    let id_text = notification_id.to_string();
    let message = Outgoing { notification_id: &id_text, tenant_id: &ctx.tenant_id, channel, recipient, subject: subject.as_deref(), body: content };
    let sent = provider.send(&message).await;
    let (status, message_id, error) = match sent {
        Ok(id) => (Status::Sent, Some(id), None),
        Err(e) => (Status::Failed, None, Some(e.chars().take(500).collect::<String>())),
    };
    let mut tx = state.db.begin().await?;
    let sql = format!(
        "INSERT INTO notification_notification (notification_id, tenant_id, channel, recipient, provider, provider_message_id, status, error, created_by, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10) RETURNING {COLUMNS}"
    );
    let made: Notification = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(notification_id)
        .bind(&ctx.tenant_id)
        .bind(channel)
        .bind(recipient)
        .bind(name)
        .bind(&message_id)
        .bind(status)
        .bind(&error)
        .bind(audit::actor_of(&ctx).1)
        .bind(db::now())
        .fetch_one(&mut *tx)
        .await?;
    let event = if status == Status::Sent { events::NOTIFICATION_SENT } else { events::NOTIFICATION_FAILED };
    audit::record(&mut tx, &ctx, event, json!({ "notification_id": notification_id, "channel": channel, "provider": name, "status": status })).await?;
    tx.commit().await?;
    Ok(created(made))
}

#[derive(Debug, FromRow, Serialize, ToSchema)]
#[schema(as = NotificationReceipt)]
struct Receipt {
    receipt_id: Id,
    /// The notification it matched; null when none of the tenant's has that provider message id.
    notification_id: Option<Id>,
    provider: String,
    provider_message_id: String,
    status: ReceiptStatus,
    reason: Option<String>,
    occurred_at: Timestamp,
    received_at: Timestamp,
}

const RECEIPT_COLUMNS: &str = "receipt_id, notification_id, provider, provider_message_id, status, reason, occurred_at, received_at";

#[derive(Deserialize)]
struct ReceiptPayload {
    message_id: Option<String>,
    status: Option<String>,
    reason: Option<String>,
    occurred_at: Option<String>,
}

/// The handler registered for kind `notification`.
pub struct Receipts;

impl InboundHandler for Receipts {
    fn handle<'a>(&'a self, tx: &'a mut Tx, tenant_id: &'a str, provider: &'a str, payload: &'a Value) -> BoxFuture<'a, ApiResult<Value>> {
        Box::pin(record_receipt(tx, tenant_id, provider, payload))
    }
}

async fn record_receipt(tx: &mut Tx, tenant_id: &str, provider: &str, payload: &Value) -> ApiResult<Value> {
    let p: ReceiptPayload = serde_json::from_value(payload.clone()).map_err(|_| ApiError::invalid("the payload must be an object of string fields"))?;
    let mut check = Check::new();
    let message_id = check.required("message_id", &p.message_id);
    if message_id.len() > 256 {
        check.fail("message_id must be at most 256 characters");
    }
    let status = check.required("status", &p.status);
    let words: Vec<&str> = ReceiptStatus::ALL.iter().map(|s| s.as_str()).collect();
    check.one_of("status", &status, &words);
    let reason = Check::optional(&p.reason).map(|r| r.chars().take(500).collect::<String>());
    let occurred_at = match Check::optional(&p.occurred_at) {
        None => db::now(),
        Some(raw) => db::parse_time(&raw).map(db::format_time).unwrap_or_else(|| {
            check.fail("occurred_at must be an RFC 3339 timestamp");
            String::new()
        }),
    };
    check.finish()?;
    let status: ReceiptStatus = status.parse().map_err(ApiError::invalid)?;
    let notification_id: Option<String> =
        sqlx::query_scalar("SELECT notification_id FROM notification_notification WHERE tenant_id = $1 AND provider = $2 AND provider_message_id = $3")
            .bind(tenant_id)
            .bind(provider)
            .bind(&message_id)
            .fetch_optional(&mut **tx)
            .await?;
    let receipt_id = Id::new();
    sqlx::query(
        "INSERT INTO notification_receipt (receipt_id, tenant_id, provider, provider_message_id, notification_id, status, reason, occurred_at, received_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(receipt_id)
    .bind(tenant_id)
    .bind(provider)
    .bind(&message_id)
    .bind(&notification_id)
    .bind(status)
    .bind(&reason)
    .bind(&occurred_at)
    .bind(db::now())
    .execute(&mut **tx)
    .await?;
    if let (Some(id), Some(settled)) = (notification_id.as_ref(), status.settles()) {
        sqlx::query("UPDATE notification_notification SET status = $1, updated_at = $2 WHERE notification_id = $3")
            .bind(settled)
            .bind(db::now())
            .bind(id)
            .execute(&mut **tx)
            .await?;
        let event = if settled == Status::Delivered { events::NOTIFICATION_DELIVERED } else { events::NOTIFICATION_FAILED };
        let payload = json!({ "notification_id": id, "receipt_id": receipt_id, "provider": provider, "status": status });
        audit::record_system(tx, tenant_id, &format!("{KIND}:{provider}"), event, payload).await?;
    }
    Ok(json!({ "recorded": true, "receipt_id": receipt_id, "notification_id": notification_id }))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ReceiptFilter {
    /// The caller's tenant.
    #[param(format = "uuid")]
    tenant_id: String,
    #[param(inline)]
    status: Option<ReceiptStatus>,
}

/// The tenant's delivery receipts, newest first.
#[utoipa::path(get, path = "/api/notifications/receipts", tag = "sdk-notification", params(ReceiptFilter, Page),
    responses((status = 200, description = "one page of delivery receipts", body = ListOf<Receipt>)))]
async fn list_receipts(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<ReceiptFilter>, page: Page) -> ApiResult<ListOf<Receipt>> {
    ctx.check_tenant(Some(&q.tenant_id))?;
    let status = q.status.map_or("", ReceiptStatus::as_str);
    let listing = Listing {
        table: "notification_receipt",
        columns: RECEIPT_COLUMNS,
        filter: "tenant_id = $1 AND ($2 = '' OR status = $2)",
        order: "occurred_at DESC, receipt_id DESC",
    };
    page.list::<Receipt>(&state.db.read, &listing, &[&ctx.tenant_id, status]).await
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct Filter {
    #[param(inline)]
    status: Option<Status>,
    #[param(inline)]
    channel: Option<Channel>,
}

/// The tenant's notifications, newest first.
#[utoipa::path(get, path = "/api/notifications", tag = "sdk-notification", params(Filter, Page),
    responses((status = 200, description = "one page of notifications", body = ListOf<Notification>)))]
async fn list(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<Filter>, page: Page) -> ApiResult<ListOf<Notification>> {
    let status = q.status.map_or("", Status::as_str);
    let channel = q.channel.map_or("", Channel::as_str);
    let listing = Listing {
        table: "notification_notification",
        columns: COLUMNS,
        filter: "tenant_id = $1 AND ($2 = '' OR status = $2) AND ($3 = '' OR channel = $3)",
        order: "created_at DESC, notification_id DESC",
    };
    page.list::<Notification>(&state.db.read, &listing, &[&ctx.tenant_id, status, channel]).await
}

async fn find(db: &Db, tenant_id: &str, id: &str) -> ApiResult<Notification> {
    let id = path_id(id)?.to_string();
    let sql = format!("SELECT {COLUMNS} FROM notification_notification WHERE tenant_id = $1 AND notification_id = $2");
    let found: Option<Notification> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant_id).bind(&id).fetch_optional(&db.read).await?;
    found.ok_or(ApiError::NotFound)
}

/// One notification, with its delivery status as its receipts settled it.
#[utoipa::path(get, path = "/api/notifications/{notification_id}", tag = "sdk-notification",
    params(("notification_id" = String, Path, description = "the notification")),
    responses((status = 200, description = "the notification", body = Data<Notification>)))]
async fn get_notification(State(state): State<AppState>, Tenant(ctx): Tenant, Path(id): Path<String>) -> ApiResult<Data<Notification>> {
    Ok(ok(find(&state.db, &ctx.tenant_id, &id).await?))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ReceiptsOfFilter {
    #[param(inline)]
    status: Option<ReceiptStatus>,
}

/// The delivery receipts of one notification, newest first.
#[utoipa::path(get, path = "/api/notifications/{notification_id}/receipts", tag = "sdk-notification",
    params(("notification_id" = String, Path, description = "the notification"), ReceiptsOfFilter, Page),
    responses((status = 200, description = "one page of the notification's receipts", body = ListOf<Receipt>)))]
async fn receipts_of(
    State(state): State<AppState>,
    Tenant(ctx): Tenant,
    Path(id): Path<String>,
    Params(q): Params<ReceiptsOfFilter>,
    page: Page,
) -> ApiResult<ListOf<Receipt>> {
    let notification = find(&state.db, &ctx.tenant_id, &id).await?.notification_id.to_string();
    let status = q.status.map_or("", ReceiptStatus::as_str);
    let listing = Listing {
        table: "notification_receipt",
        columns: RECEIPT_COLUMNS,
        filter: "tenant_id = $1 AND notification_id = $2 AND ($3 = '' OR status = $3)",
        order: "occurred_at DESC, receipt_id DESC",
    };
    page.list::<Receipt>(&state.db.read, &listing, &[&ctx.tenant_id, &notification, status]).await
}
