//! `GET /api/commands/watch`: a read-only observer's view of the tenant's
//! commands as Server-Sent Events, for people and tenant keys (the
//! console's robot page). Unlike the robot's own stream
//! (`/api/commands/stream/{asset_id}`, `sse`), it never writes: watching
//! marks nothing delivered.
//!
//! On connecting, the observer is sent every command not yet in a final
//! state (`awaiting_approval`, `queued`, `delivered`), oldest first; from
//! then on, each command of the tenant as it stands after each change of
//! state (created, decided, delivered, acknowledged, expired, cancelled).
//! Events carry no `id`: there is no resume point other than this
//! snapshot, so a client that reconnects gets the open commands again and
//! reads what ended while it was away from `GET /api/commands`. Changes
//! that follow one another before the observer looks again (a delivery and
//! its ack within milliseconds) may come as one event with the later state.
//!
//! Wake-ups are the command bus's (`hub_kernel::bus::command_changed`,
//! carried between replicas by PostgreSQL NOTIFY); a look reads the
//! commands changed since a little before the previous look (`OVERLAP`,
//! for a change whose transaction committed after a later one) and sends
//! those whose change it has not sent yet.

use std::{collections::HashMap, convert::Infallible, time::Duration};

use axum::response::{
    IntoResponse,
    sse::{Event, KeepAlive, Sse},
};
use tokio::sync::watch;
use tokio_stream::wrappers::ReceiverStream;

use crate::command::{self, Command};
use hub_kernel::bus::{BATCH, SAFETY_RECHECK};
use hub_kernel::prelude::*;

/// How far back each look reads before the previous one began.
const OVERLAP: Duration = Duration::from_secs(10);

/// How long one observer stream stays open: the credential is checked
/// when it connects, so a stream ends after this and the client
/// reconnects (checked again).
const LIFETIME: Duration = Duration::from_secs(15 * 60);

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct WatchFilter {
    /// Only commands to this asset (of the caller's tenant; another
    /// tenant's asset is 404).
    #[param(format = "uuid")]
    asset_id: Option<String>,
}

/// The tenant's commands as they change, as Server-Sent Events (read-only).
///
/// First every command not yet in a final state, oldest first; then each
/// command of the tenant (or of `asset_id`) each time it changes state.
/// Each event is `event: command` with the command as `GET
/// /api/commands/{command_id}` answers it; no event `id` (a reconnect
/// starts with the open commands again). Watching changes nothing: the
/// robot's own stream still delivers. A credential holds at most
/// `HUB_MAX_SSE_PER_CREDENTIAL` of these open at once on a hub (429
/// beyond); a stream ends after 15 minutes and the client reconnects.
#[utoipa::path(get, path = "/api/commands/watch", tag = "sdk-command", params(WatchFilter),
    responses((status = 200, description = "an event stream: `event: command`, `data:` the command (as `GET /api/commands/{command_id}` answers it), first the open ones, then each change",
        content_type = "text/event-stream", body = String),
        (status = 404, description = "NotFound: asset_id names no asset of the caller's tenant", body = ErrorBody)))]
pub async fn watch(State(state): State<AppState>, Tenant(ctx): Tenant, Params(q): Params<WatchFilter>) -> ApiResult<Response> {
    let asset_id = canonical_uuid_opt(&q.asset_id).unwrap_or_default();
    if !asset_id.is_empty() && !command::tenant_has_asset(&state, &ctx.tenant_id, &asset_id).await? {
        return Err(ApiError::NotFound);
    }
    let max = state.config.max_sse_per_credential;
    let slot = state.streams.open_watch(&ctx.persona_id, max).ok_or(ApiError::TooManyWatches(max))?;
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Event, Infallible>>(64);
    let mut closing = state.streams.closing();
    let wake = state.streams.subscribe_tenant(&ctx.tenant_id);
    let mut watcher = Watcher { state, tenant_id: ctx.tenant_id, asset_id, wake, seen: HashMap::new(), since: None };
    tokio::spawn(async move {
        // Held until the stream ends: the task ends with it.
        let _slot = slot;
        let end = tokio::time::sleep(LIFETIME);
        tokio::pin!(end);
        loop {
            let batch = tokio::select! {
                batch = watcher.next() => batch,
                _ = tx.closed() => return,
                _ = closing.wait_for(|c| *c) => return,
                _ = &mut end => return,
            };
            for c in batch {
                let event = Event::default().event("command").json_data(&c).expect("commands serialise");
                if tx.send(Ok(event)).await.is_err() {
                    return;
                }
            }
        }
    });
    Ok(Sse::new(ReceiverStream::new(rx)).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))).into_response())
}

struct Watcher {
    state: AppState,
    tenant_id: String,
    asset_id: String,
    wake: watch::Receiver<u64>,
    /// The last change sent of each command changed since `since`.
    seen: HashMap<Id, Timestamp>,
    /// Where the next look starts reading (`None`: the snapshot is next).
    since: Option<chrono::DateTime<chrono::Utc>>,
}

impl Watcher {
    /// The next commands to send, waiting until there are some. Reads
    /// only; a database error is retried after a second.
    async fn next(&mut self) -> Vec<Command> {
        loop {
            self.wake.borrow_and_update();
            let begun = chrono::Utc::now();
            let read = match self.since {
                None => self.first(begun).await,
                Some(since) => self.changes(since).await.map(|batch| batch.into_iter().filter(|c| self.record(c)).collect()),
            };
            let batch = match read {
                Ok(batch) => batch,
                Err(e) => {
                    tracing::warn!(error = %e, "reading the commands an observer watches");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            let since = begun - OVERLAP;
            self.since = Some(since);
            // What is older than the next look's start is never read again.
            self.seen.retain(|_, at| at.0 >= since);
            if !batch.is_empty() {
                return batch;
            }
            tokio::select! {
                _ = self.wake.changed() => {}
                _ = tokio::time::sleep(SAFETY_RECHECK) => {}
            }
        }
    }

    /// Notes a command's change as sent; false when it was already.
    fn record(&mut self, c: &Command) -> bool {
        let (id, at) = c.change();
        self.seen.insert(id, at) != Some(at)
    }

    /// The first look: the open commands, all sent; the changes of the
    /// overlap before it are noted as sent without sending them (a command
    /// that ended just before the observer came is not news). The changes
    /// are read first: a command that ends between the two reads is not in
    /// the snapshot and not noted, so the next look sends it.
    async fn first(&mut self, begun: chrono::DateTime<chrono::Utc>) -> ApiResult<Vec<Command>> {
        let recent = self.changes(begun - OVERLAP).await?;
        let open = self.snapshot().await?;
        for c in recent.iter().chain(&open) {
            let (id, at) = c.change();
            self.seen.insert(id, at);
        }
        Ok(open)
    }

    async fn snapshot(&self) -> ApiResult<Vec<Command>> {
        let mut out: Vec<Command> = Vec::new();
        loop {
            let page = command::open_for_tenant(&self.state, &self.tenant_id, &self.asset_id, out.last(), BATCH).await?;
            let full = page.len() as i64 == BATCH;
            out.extend(page);
            if !full {
                return Ok(out);
            }
        }
    }

    async fn changes(&self, since: chrono::DateTime<chrono::Utc>) -> ApiResult<Vec<Command>> {
        let since = db::format_time(since);
        let mut out: Vec<Command> = Vec::new();
        loop {
            let page = command::changed_for_tenant(&self.state, &self.tenant_id, &self.asset_id, &since, out.last(), BATCH).await?;
            let full = page.len() as i64 == BATCH;
            out.extend(page);
            if !full {
                return Ok(out);
            }
        }
    }
}
