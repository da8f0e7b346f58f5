//! `GET /api/commands/stream/{asset_id}`: the asset's command stream as
//! Server-Sent Events. Each event is `event: command`, `id: <seq>`, the
//! command as JSON; a client resumes with `Last-Event-ID`. Without it the
//! stream starts with every command not yet acknowledged. Acks go to
//! `POST /api/commands/{command_id}/ack`. A credential holds at most
//! `HUB_MAX_SSE_PER_CREDENTIAL` streams open at once on a hub; one more is
//! 429, so a leaked credential cannot pin an unbounded number of tasks.

use std::{convert::Infallible, time::Duration};

use axum::{
    http::HeaderMap,
    response::{
        IntoResponse,
        sse::{Event, KeepAlive, Sse},
    },
};
use tokio_stream::wrappers::ReceiverStream;

use crate::feed::Feed;
use crate::robots::Robot;
use hub_kernel::prelude::*;

/// The asset's command stream as Server-Sent Events (per-robot credential).
///
/// Each event is `event: command`, `id: <seq>`, and the command as JSON
/// data; the stream stays open (keep-alive every 15 s) until the client
/// leaves or the credential expires or is revoked.
#[utoipa::path(get, path = "/api/commands/stream/{asset_id}", tag = "sdk-command",
    params(("asset_id" = String, Path, description = "the asset the credential is bound to"),
        ("Last-Event-ID" = Option<i64>, Header, description = "resume after this stream position (a non-negative integer); without it, every command not yet acknowledged")),
    responses((status = 200, description = "an endless event stream: `event: command`, `id: <seq>`, `data: { command_id, seq, type, params, risk_class, target_component_id, expires_at }`",
        content_type = "text/event-stream", body = String)))]
pub async fn stream(State(state): State<AppState>, Robot(cred): Robot, Path(asset_id): Path<String>, headers: HeaderMap) -> ApiResult<Response> {
    let asset_id = path_id(&asset_id)?.to_string();
    if cred.asset_id != asset_id {
        return Err(ApiError::NotFound);
    }
    let mut last = match headers.get("last-event-id").map(|v| v.to_str().map(str::trim)) {
        None => 0,
        Some(Ok("")) => 0,
        Some(Ok(s)) => s.parse::<i64>().ok().filter(|n| *n >= 0).ok_or_else(|| ApiError::invalid("Last-Event-ID must be a non-negative integer"))?,
        Some(Err(_)) => return Err(ApiError::invalid("Last-Event-ID must be a non-negative integer")),
    };
    let max = state.config.max_sse_per_credential;
    let slot = state.streams.open_sse(&cred.credential_id, max).ok_or(ApiError::TooManyStreams(max))?;
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Event, Infallible>>(64);
    let mut closing = state.streams.closing();
    let mut feed = Feed::new(state, cred, last);
    tokio::spawn(async move {
        // Held until the stream ends: the task ends with it.
        let _slot = slot;
        loop {
            let next = tokio::select! {
                next = feed.next() => next,
                _ = tx.closed() => return,
                _ = closing.wait_for(|c| *c) => return,
            };
            let Some(batch) = next else {
                tracing::info!(asset_id = %asset_id, "SSE stream ends: the robot credential expired or was revoked");
                return;
            };
            for c in &batch {
                let event = Event::default().event("command").id(c.seq.to_string()).json_data(c).expect("commands serialise");
                if tx.send(Ok(event)).await.is_err() {
                    return;
                }
                last = c.seq;
            }
            feed.sent(last).await;
        }
    });
    Ok(Sse::new(ReceiverStream::new(rx)).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))).into_response())
}
