//! Versioned schema migrations, tracked in SQLite's `PRAGMA user_version`.

use rusqlite::Connection;

use crate::error::DeviceError;

/// Migration `i` brings the schema from version `i` to `i + 1`. Released
/// entries are never edited; a change is a new entry.
const MIGRATIONS: &[&str] = &[
    // 1: the first schema.
    r#"
    CREATE TABLE meta (
        key   TEXT PRIMARY KEY,
        value BLOB NOT NULL
    );
    CREATE TABLE outbox (
        seq             INTEGER PRIMARY KEY AUTOINCREMENT,
        -- UUIDv7 made here: unique by construction, so no index to keep.
        event_id        TEXT NOT NULL,
        idempotency_key TEXT NOT NULL UNIQUE,
        event_type      TEXT NOT NULL,
        payload         TEXT NOT NULL,
        received_at     TEXT NOT NULL,
        drained_at      TEXT,
        sync_state      TEXT NOT NULL DEFAULT 'pending'
                        CHECK (sync_state IN ('pending', 'accepted', 'rejected')),
        sync_attempts   INTEGER NOT NULL DEFAULT 0,
        sync_error      TEXT,
        synced_at       TEXT
    );
    CREATE INDEX outbox_undrained ON outbox (received_at, seq) WHERE drained_at IS NULL;
    CREATE INDEX outbox_unsynced ON outbox (seq) WHERE sync_state = 'pending';
    CREATE TABLE event_type (
        event_type      TEXT PRIMARY KEY,
        conflict_policy TEXT NOT NULL
                        CHECK (conflict_policy IN ('crdt', 'lww', 'merge', 'event-sourcing', 'human-review')),
        retention_class TEXT,
        schema_version  INTEGER NOT NULL DEFAULT 1,
        source          TEXT NOT NULL CHECK (source IN ('local', 'hub')),
        registered_at   TEXT NOT NULL
    );
    CREATE TABLE review_item (
        review_id   TEXT PRIMARY KEY,
        event_type  TEXT NOT NULL,
        input_a     TEXT NOT NULL,
        input_b     TEXT NOT NULL,
        created_at  TEXT NOT NULL,
        decided_at  TEXT,
        choice      TEXT CHECK (choice IN ('a', 'b'))
    );
    CREATE TABLE identity_claim (
        device_uuid        TEXT NOT NULL,
        person_id          TEXT NOT NULL,
        biometric_envelope BLOB,
        pin_envelope       BLOB,
        created_at         TEXT NOT NULL,
        updated_at         TEXT NOT NULL,
        PRIMARY KEY (device_uuid, person_id)
    );
    CREATE TABLE permission_snapshot (
        snapshot_id    TEXT PRIMARY KEY,
        device_uuid    TEXT NOT NULL,
        tenant_id      TEXT NOT NULL,
        persona_id     TEXT NOT NULL,
        permission_set TEXT NOT NULL,
        taken_at       TEXT NOT NULL
    );
    CREATE INDEX permission_snapshot_latest ON permission_snapshot (device_uuid, taken_at DESC, snapshot_id DESC);
    "#,
];

/// The version a fully migrated store has.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// Applies every migration the file lacks, each in its own transaction
/// together with its version bump, so a crash mid-way leaves a file at a
/// whole version. A file newer than this library is refused, not touched.
pub(super) fn migrate(conn: &mut Connection) -> Result<(), DeviceError> {
    let current: u32 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if current > SCHEMA_VERSION {
        return Err(DeviceError::Storage { reason: format!("store schema version {current} is newer than this library's {SCHEMA_VERSION}") });
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        let tx = conn.transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", index as u32 + 1)?;
        tx.commit()?;
    }
    Ok(())
}
