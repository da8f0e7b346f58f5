//! The outbox: events the app records offline, drained locally (`hdk-diagnostic`)
//! and pushed to the hub by the sync.

use rusqlite::{Connection, OptionalExtension, params};

use super::{Store, require};
use crate::error::DeviceError;

/// One event to enqueue.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "ffi", derive(uniffi::Record))]
pub struct NewEvent {
    pub event_type: String,
    /// JSON text.
    pub payload_json: String,
    pub idempotency_key: String,
}

/// What an enqueue did: `inserted` is false when the key was already there,
/// and `event_id` is then the id of the stored event.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "ffi", derive(uniffi::Record))]
pub struct EnqueueOutcome {
    pub event_id: String,
    pub idempotency_key: String,
    pub inserted: bool,
}

/// A row as drained.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "ffi", derive(uniffi::Record))]
pub struct OutboxRow {
    pub event_id: String,
    pub idempotency_key: String,
    pub event_type: String,
    pub payload_json: String,
    pub received_at: String,
    pub drained_at: Option<String>,
}

/// `hdk-diagnostic`'s answer: the claimed rows and their count.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "ffi", derive(uniffi::Record))]
pub struct DrainResult {
    pub rows: Vec<OutboxRow>,
    pub count: u32,
}

/// Counts by state, for the app's diagnostics and for tests.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "ffi", derive(uniffi::Record))]
pub struct OutboxStats {
    pub total: u64,
    pub undrained: u64,
    pub sync_pending: u64,
    pub sync_accepted: u64,
    pub sync_rejected: u64,
}

/// A validated event: blank fields refused, payload re-serialised compactly.
struct Checked {
    event_type: String,
    payload: String,
    key: String,
}

fn check(event: &NewEvent) -> Result<Checked, DeviceError> {
    require("event_type", &event.event_type)?;
    require("idempotency_key", &event.idempotency_key)?;
    // Validate without building a tree (the hot path of batched enqueue);
    // the payload is stored as the app wrote it.
    serde_json::from_str::<serde::de::IgnoredAny>(&event.payload_json).map_err(|e| DeviceError::validation(format!("payload is not valid JSON: {e}")))?;
    let payload = event.payload_json.trim().to_string();
    Ok(Checked { event_type: event.event_type.clone(), payload, key: event.idempotency_key.clone() })
}

fn insert(conn: &Connection, event: &Checked, now: &str) -> Result<EnqueueOutcome, DeviceError> {
    let event_id = uuid::Uuid::now_v7().to_string();
    let inserted = conn
        .prepare_cached(
            "INSERT INTO outbox (event_id, idempotency_key, event_type, payload, received_at)
             VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (idempotency_key) DO NOTHING",
        )?
        .execute(params![event_id, event.key, event.event_type, event.payload, now])?
        == 1;
    let event_id = if inserted {
        event_id
    } else {
        conn.prepare_cached("SELECT event_id FROM outbox WHERE idempotency_key = ?1")?.query_row([&event.key], |r| r.get(0))?
    };
    Ok(EnqueueOutcome { event_id, idempotency_key: event.key.clone(), inserted })
}

impl Store {
    /// Enqueues one event. It is committed (and fsynced) before this
    /// returns; a repeated idempotency key stores nothing and returns the
    /// stored event's id.
    pub fn enqueue(&self, event: &NewEvent) -> Result<EnqueueOutcome, DeviceError> {
        let checked = check(event)?;
        let conn = self.conn();
        insert(&conn, &checked, &crate::time::now())
    }

    /// Enqueues many events in one transaction: all or none (a malformed
    /// event fails the whole batch before anything is written). Keys
    /// repeated within the batch are stored once.
    pub fn enqueue_batch(&self, events: &[NewEvent]) -> Result<Vec<EnqueueOutcome>, DeviceError> {
        let checked = events.iter().map(check).collect::<Result<Vec<_>, _>>()?;
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        let now = crate::time::now();
        let outcomes = checked.iter().map(|e| insert(&tx, e, &now)).collect::<Result<Vec<_>, _>>()?;
        tx.commit()?;
        Ok(outcomes)
    }

    /// Claims up to `limit` undrained rows, oldest `received_at` first,
    /// stamps their `drained_at` and returns them with their count. Claiming
    /// and stamping are one statement in one transaction, so two drains never
    /// return the same row.
    pub fn drain(&self, limit: u32) -> Result<DrainResult, DeviceError> {
        if limit == 0 {
            return Err(DeviceError::validation("limit must be at least 1"));
        }
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let now = crate::time::now();
        let mut rows = {
            let mut stmt = tx.prepare_cached(
                "UPDATE outbox SET drained_at = ?1
                 WHERE seq IN (SELECT seq FROM outbox WHERE drained_at IS NULL
                               ORDER BY received_at, seq LIMIT ?2)
                 RETURNING seq, event_id, idempotency_key, event_type, payload, received_at, drained_at",
            )?;
            let mapped = stmt.query_map(params![now, limit], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    OutboxRow {
                        event_id: r.get(1)?,
                        idempotency_key: r.get(2)?,
                        event_type: r.get(3)?,
                        payload_json: r.get(4)?,
                        received_at: r.get(5)?,
                        drained_at: r.get(6)?,
                    },
                ))
            })?;
            mapped.collect::<Result<Vec<_>, _>>()?
        };
        tx.commit()?;
        // RETURNING gives no order guarantee; restore oldest-first.
        rows.sort_by(|a, b| (&a.1.received_at, a.0).cmp(&(&b.1.received_at, b.0)));
        let rows: Vec<OutboxRow> = rows.into_iter().map(|(_, row)| row).collect();
        Ok(DrainResult { count: rows.len() as u32, rows })
    }

    /// Counts rows by drain and sync state.
    pub fn outbox_stats(&self) -> Result<OutboxStats, DeviceError> {
        let conn = self.conn();
        Ok(conn.query_row(
            "SELECT COUNT(*),
                    COUNT(*) FILTER (WHERE drained_at IS NULL),
                    COUNT(*) FILTER (WHERE sync_state = 'pending'),
                    COUNT(*) FILTER (WHERE sync_state = 'accepted'),
                    COUNT(*) FILTER (WHERE sync_state = 'rejected')
             FROM outbox",
            [],
            |r| {
                Ok(OutboxStats {
                    total: r.get::<_, i64>(0)? as u64,
                    undrained: r.get::<_, i64>(1)? as u64,
                    sync_pending: r.get::<_, i64>(2)? as u64,
                    sync_accepted: r.get::<_, i64>(3)? as u64,
                    sync_rejected: r.get::<_, i64>(4)? as u64,
                })
            },
        )?)
    }

    /// The stored event for an idempotency key, if any.
    pub fn outbox_event(&self, idempotency_key: &str) -> Result<Option<OutboxRow>, DeviceError> {
        let conn = self.conn();
        Ok(conn
            .query_row(
                "SELECT event_id, idempotency_key, event_type, payload, received_at, drained_at
                 FROM outbox WHERE idempotency_key = ?1",
                [idempotency_key],
                |r| {
                    Ok(OutboxRow {
                        event_id: r.get(0)?,
                        idempotency_key: r.get(1)?,
                        event_type: r.get(2)?,
                        payload_json: r.get(3)?,
                        received_at: r.get(4)?,
                        drained_at: r.get(5)?,
                    })
                },
            )
            .optional()?)
    }
}
