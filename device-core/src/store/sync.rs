//! Sync with the hub through the app's HTTP transport: push the outbox in
//! idempotent batches, pull event types and their conflict policies.
//!
//! Resumption needs no bookkeeping beyond each row's `sync_state`: a row is
//! `pending` until the hub names its idempotency key as accepted, duplicate
//! or rejected. An interrupted push (lost request, lost answer, app killed)
//! leaves rows pending, and the next push sends them again under the same
//! keys, which the hub stores at most once.

use protocol::sync::{BATCHES_PATH, MAX_BATCH_EVENTS, POLICIES_PATH, SyncBatch, SyncBatchAck, SyncEvent, SyncPolicies};
use rusqlite::params;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{Store, parse_uuid};
use crate::error::DeviceError;
use crate::policy::ConflictPolicy;

/// A request the app's HTTP stack sends to the hub. `path` is relative to
/// the hub's base URL; the app adds the base URL and its credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "ffi", derive(uniffi::Record))]
pub struct HttpRequest {
    pub method: String,
    pub path: String,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
}

/// The hub's answer as the app received it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "ffi", derive(uniffi::Record))]
pub struct HttpResponse {
    pub status: u16,
    pub body: Vec<u8>,
}

/// The app's HTTP stack. The library opens no socket: phones own their
/// networking (proxies, certificate pinning, background sessions). A
/// failure to deliver is returned as `DeviceError::Transport`.
#[cfg_attr(feature = "ffi", uniffi::export(with_foreign))]
pub trait HttpTransport: Send + Sync {
    fn send(&self, request: HttpRequest) -> Result<HttpResponse, DeviceError>;
}

/// What one push did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "ffi", derive(uniffi::Record))]
pub struct SyncReport {
    pub batches: u32,
    pub accepted: u32,
    pub duplicates: u32,
    pub rejected: u32,
    /// Rows still waiting for an acknowledgement after the push.
    pub pending: u64,
}

/// What one pull did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "ffi", derive(uniffi::Record))]
pub struct PullReport {
    /// Event types inserted or updated.
    pub updated: u32,
    /// Event types skipped because their policy is unknown to this library.
    pub skipped: Vec<String>,
}

impl Store {
    /// Pushes every pending outbox row, oldest first, `batch_size` events per
    /// request. Stops early, with rows left pending, when the hub
    /// acknowledges nothing of a batch; fails with `Transport`/`Hub` when a
    /// request fails, keeping every acknowledgement received before it.
    pub fn push_outbox(&self, transport: &dyn HttpTransport, device_uuid: &str, batch_size: u32) -> Result<SyncReport, DeviceError> {
        let device_uuid = parse_uuid("device_uuid", device_uuid)?;
        if batch_size == 0 || batch_size as usize > MAX_BATCH_EVENTS {
            return Err(DeviceError::validation(format!("batch_size must be between 1 and {MAX_BATCH_EVENTS}")));
        }
        let _one_push_at_a_time = self.sync_lock.lock().unwrap_or_else(|p| p.into_inner());
        let mut report = SyncReport { batches: 0, accepted: 0, duplicates: 0, rejected: 0, pending: 0 };
        loop {
            let events = self.pending_events(batch_size)?;
            if events.is_empty() {
                break;
            }
            let batch = SyncBatch { batch_id: uuid::Uuid::now_v7().to_string(), device_uuid: device_uuid.clone(), events };
            let body = serde_json::to_vec(&batch).map_err(|e| DeviceError::validation(e.to_string()))?;
            // The lock on the connection is not held here: the app may keep
            // enqueueing while its transport waits on the network.
            let response =
                transport.send(HttpRequest { method: "POST".into(), path: BATCHES_PATH.into(), content_type: Some("application/json".into()), body })?;
            let ack: SyncBatchAck = read_answer(&response)?;
            report.batches += 1;
            let progress = self.apply_ack(&batch, &ack, &mut report)?;
            if progress == 0 {
                break;
            }
        }
        report.pending = self.outbox_stats()?.sync_pending;
        Ok(report)
    }

    fn pending_events(&self, limit: u32) -> Result<Vec<SyncEvent>, DeviceError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "UPDATE outbox SET sync_attempts = sync_attempts + 1
             WHERE seq IN (SELECT seq FROM outbox WHERE sync_state = 'pending' ORDER BY seq LIMIT ?1)
             RETURNING seq, idempotency_key, event_id, event_type, payload, received_at",
        )?;
        let mut rows = stmt
            .query_map([limit], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, String>(5)?,
                ))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        rows.sort_by_key(|r| r.0);
        rows.into_iter()
            .map(|(_, idempotency_key, event_id, event_type, payload, occurred_at)| {
                let payload: Value = serde_json::from_str(&payload).map_err(|e| DeviceError::Storage { reason: format!("stored payload is not JSON: {e}") })?;
                Ok(SyncEvent { idempotency_key, event_id, event_type, payload, occurred_at })
            })
            .collect()
    }

    /// Records the hub's answer for the keys of this batch (keys it names
    /// that were not in the batch are ignored). Returns how many rows left
    /// the pending state.
    fn apply_ack(&self, batch: &SyncBatch, ack: &SyncBatchAck, report: &mut SyncReport) -> Result<u32, DeviceError> {
        let sent: std::collections::HashSet<&str> = batch.events.iter().map(|e| e.idempotency_key.as_str()).collect();
        let now = crate::time::now();
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        let mut progress = 0;
        {
            let mut done = tx.prepare_cached(
                "UPDATE outbox SET sync_state = 'accepted', synced_at = ?1, sync_error = NULL
                 WHERE idempotency_key = ?2 AND sync_state = 'pending'",
            )?;
            for (keys, counter) in [(&ack.accepted, &mut report.accepted), (&ack.duplicates, &mut report.duplicates)] {
                for key in keys.iter().filter(|k| sent.contains(k.as_str())) {
                    let n = done.execute(params![now, key])? as u32;
                    *counter += n;
                    progress += n;
                }
            }
            let mut refused = tx.prepare_cached(
                "UPDATE outbox SET sync_state = 'rejected', synced_at = ?1, sync_error = ?2
                 WHERE idempotency_key = ?3 AND sync_state = 'pending'",
            )?;
            for rejected in ack.rejected.iter().filter(|r| sent.contains(r.idempotency_key.as_str())) {
                let n = refused.execute(params![now, rejected.reason, rejected.idempotency_key])? as u32;
                report.rejected += n;
                progress += n;
            }
        }
        tx.commit()?;
        Ok(progress)
    }

    /// Pulls the tenant's event types and policies and registers them
    /// locally (source `hub`), replacing local policies of the same types.
    pub fn pull_policies(&self, transport: &dyn HttpTransport) -> Result<PullReport, DeviceError> {
        let response = transport.send(HttpRequest { method: "GET".into(), path: POLICIES_PATH.into(), content_type: None, body: Vec::new() })?;
        let policies: SyncPolicies = read_answer(&response)?;
        let mut report = PullReport { updated: 0, skipped: Vec::new() };
        for entry in policies.event_types {
            match ConflictPolicy::parse(&entry.conflict_policy) {
                Ok(policy) if !entry.event_type.trim().is_empty() => {
                    self.upsert_event_type(&entry.event_type, policy, entry.retention_class.as_deref(), entry.schema_version, "hub")?;
                    report.updated += 1;
                }
                _ => report.skipped.push(entry.event_type),
            }
        }
        Ok(report)
    }
}

/// Reads a 2xx JSON answer, bare or in the platform's `{ success, data }`
/// envelope; anything else is `DeviceError::Hub`.
fn read_answer<T: DeserializeOwned>(response: &HttpResponse) -> Result<T, DeviceError> {
    let text = String::from_utf8_lossy(&response.body);
    if !(200..300).contains(&response.status) {
        let reason: String = text.chars().take(500).collect();
        return Err(DeviceError::Hub { status: response.status, reason });
    }
    let mut value: Value = serde_json::from_str(&text).map_err(|e| DeviceError::Hub { status: response.status, reason: format!("answer is not JSON: {e}") })?;
    if value.get("success").is_some()
        && let Some(data) = value.get_mut("data")
    {
        value = data.take();
    }
    serde_json::from_value(value).map_err(|e| DeviceError::Hub { status: response.status, reason: format!("answer has an unexpected shape: {e}") })
}
