//! The offline store: one SQLite file (WAL) holding the outbox, the event
//! type registry, review items, identity claims and permission snapshots.

mod crypto;
mod identity;
mod outbox;
mod permissions;
mod registry;
mod schema;
mod sync;

use std::sync::{Mutex, MutexGuard};

use rusqlite::{Connection, OptionalExtension, params};

use crate::error::DeviceError;
use crypto::Sealer;

pub use identity::IdentityClaim;
pub use outbox::{DrainResult, EnqueueOutcome, NewEvent, OutboxRow, OutboxStats};
pub use permissions::PermissionSnapshot;
pub use registry::{ConflictField, EventTypeRecord, ResolutionRecord, ReviewChoice, ReviewItem};
pub use schema::SCHEMA_VERSION;
pub use sync::{HttpRequest, HttpResponse, HttpTransport, PullReport, SyncReport};

/// An open store. `Send + Sync`: one SQLite connection behind a mutex, so
/// the app may call it from any thread; SQLite work is short, and the sync
/// never holds the lock while the app's transport runs.
pub struct Store {
    conn: Mutex<Connection>,
    sealer: Sealer,
    // Serialises pushes so two concurrent syncs do not send the same rows;
    // they would be harmless (idempotency keys) but wasteful.
    sync_lock: Mutex<()>,
}

const KEY_CHECK_PLAINTEXT: &[u8] = b"device-core key check";

impl Store {
    /// Opens (creating if needed) a store whose encryption key is kept in the
    /// store file itself. See README: this protects claims copied out of the
    /// database row by row, not a stolen file; apps that can should use
    /// [`Store::open_with_key`] with a key from the Keychain / Keystore.
    pub fn open(path: &str) -> Result<Self, DeviceError> {
        Self::open_inner(path, None)
    }

    /// Opens (creating if needed) a store whose 32-byte encryption key the
    /// app keeps (Keychain, Keystore). A wrong key is refused at open.
    pub fn open_with_key(path: &str, key: &[u8]) -> Result<Self, DeviceError> {
        if key.len() != 32 {
            return Err(DeviceError::validation("the store key must be 32 bytes"));
        }
        Self::open_inner(path, Some(key))
    }

    fn open_inner(path: &str, app_key: Option<&[u8]>) -> Result<Self, DeviceError> {
        let mut conn = Connection::open(path)?;
        // WAL lets readers run beside the writer; synchronous=FULL fsyncs
        // every commit so an enqueue that returned survives power loss, not
        // only an app crash.
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        schema::migrate(&mut conn)?;
        let sealer = Self::load_key(&conn, app_key)?;
        Ok(Store { conn: Mutex::new(conn), sealer, sync_lock: Mutex::new(()) })
    }

    fn load_key(conn: &Connection, app_key: Option<&[u8]>) -> Result<Sealer, DeviceError> {
        let meta = |key: &str| -> Result<Option<Vec<u8>>, DeviceError> {
            Ok(conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0)).optional()?)
        };
        let stored_key = meta("store_key")?;
        let check = meta("key_check")?;
        let sealer = match (app_key, stored_key) {
            (None, Some(key)) => Sealer::new(&key)?,
            (Some(_), Some(_)) => {
                return Err(DeviceError::Crypto { reason: "this store keeps its own key; open it without a key".into() });
            }
            (None, None) if check.is_some() => {
                return Err(DeviceError::Crypto { reason: "this store was created with an app-held key; open it with that key".into() });
            }
            (None, None) => {
                let key = crypto::random_key();
                conn.execute("INSERT INTO meta (key, value) VALUES ('store_key', ?1)", params![key.to_vec()])?;
                Sealer::new(&key)?
            }
            (Some(key), None) => Sealer::new(key)?,
        };
        match check {
            Some(sealed) => {
                let plain = sealer.open(&sealed, b"key_check").map_err(|_| DeviceError::Crypto { reason: "wrong store key".into() })?;
                if plain != KEY_CHECK_PLAINTEXT {
                    return Err(DeviceError::Crypto { reason: "wrong store key".into() });
                }
            }
            None => {
                let sealed = sealer.seal(KEY_CHECK_PLAINTEXT, b"key_check")?;
                conn.execute("INSERT INTO meta (key, value) VALUES ('key_check', ?1)", params![sealed])?;
            }
        }
        Ok(sealer)
    }

    /// The schema version of the open file.
    pub fn schema_version(&self) -> Result<u32, DeviceError> {
        Ok(self.conn().pragma_query_value(None, "user_version", |r| r.get(0))?)
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves SQLite consistent (every
        // write is a transaction), so a poisoned lock is safe to reuse.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Parses a UUID field, answering a validation error that names it.
pub(crate) fn parse_uuid(name: &str, value: &str) -> Result<String, DeviceError> {
    uuid::Uuid::parse_str(value.trim())
        .map(|u| u.hyphenated().to_string())
        .map_err(|_| DeviceError::validation(format!("{name} must be a UUID, got `{value}`")))
}

/// Rejects an absent-in-spirit field: empty or blank text.
pub(crate) fn require(name: &str, value: &str) -> Result<(), DeviceError> {
    if value.trim().is_empty() { Err(DeviceError::validation(format!("{name} is required"))) } else { Ok(()) }
}

/// Parses JSON text handed over by the app.
pub(crate) fn parse_json(name: &str, text: &str) -> Result<serde_json::Value, DeviceError> {
    serde_json::from_str(text).map_err(|e| DeviceError::validation(format!("{name} is not valid JSON: {e}")))
}
