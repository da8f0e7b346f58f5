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

use crate::command;
use hub_kernel::prelude::*;
use hub_kernel::{
    bus::{BATCH, SAFETY_RECHECK},
    gate::robots::{self, Robot},
};

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
    let mut wake = state.streams.subscribe(&asset_id);
    let mut closing = state.streams.closing();
    tokio::spawn(async move {
        // Held until the stream ends: the task ends with it.
        let _slot = slot;
        loop {
            // Woken by a revocation as by a command: a credential revoked
            // or expired meanwhile ends the stream before anything more.
            match robots::still_usable(&state, &cred.credential_id).await {
                Ok(true) => {}
                Ok(false) => {
                    tracing::info!(asset_id = %asset_id, "SSE stream ends: the robot credential expired or was revoked");
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "checking a robot credential");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            }
            wake.borrow_and_update();
            let batch = match command::pending(&state, &asset_id, last, BATCH).await {
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!(error = %e, "reading pending commands for SSE");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            let full = batch.len() as i64 == BATCH;
            for c in &batch {
                let event = Event::default().event("command").id(c.seq.to_string()).json_data(c).expect("commands serialise");
                if tx.send(Ok(event)).await.is_err() {
                    return;
                }
                last = c.seq;
            }
            if !batch.is_empty()
                && let Err(e) = command::mark_delivered(&state, &asset_id, last).await
            {
                tracing::warn!(error = %e, "marking commands delivered");
            }
            if full {
                continue;
            }
            tokio::select! {
                _ = wake.changed() => {}
                _ = tx.closed() => return,
                _ = closing.wait_for(|c| *c) => return,
                _ = tokio::time::sleep(SAFETY_RECHECK) => {}
            }
        }
    });
    Ok(Sse::new(ReceiverStream::new(rx)).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))).into_response())
}
