//! Permission-surface snapshots (`hdk-permissions`): recorded, and read back
//! newest first.

use rusqlite::{OptionalExtension, params};

use super::{Store, parse_json, parse_uuid};
use crate::error::DeviceError;

#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "ffi", derive(uniffi::Record))]
pub struct PermissionSnapshot {
    pub snapshot_id: String,
    pub device_uuid: String,
    pub tenant_id: String,
    pub persona_id: String,
    /// JSON text (object or array) as the app recorded it.
    pub permission_set_json: String,
    /// RFC 3339 UTC with microseconds.
    pub taken_at: String,
}

impl Store {
    /// Records a snapshot. `taken_at` defaults to now; any RFC 3339 offset
    /// is accepted and stored as UTC so snapshots order correctly.
    pub fn record_permission_snapshot(
        &self,
        device_uuid: &str,
        tenant_id: &str,
        persona_id: &str,
        permission_set_json: &str,
        taken_at: Option<&str>,
    ) -> Result<PermissionSnapshot, DeviceError> {
        let snapshot = PermissionSnapshot {
            snapshot_id: uuid::Uuid::now_v7().to_string(),
            device_uuid: parse_uuid("device_uuid", device_uuid)?,
            tenant_id: parse_uuid("tenant_id", tenant_id)?,
            persona_id: parse_uuid("persona_id", persona_id)?,
            permission_set_json: match parse_json("permission_set", permission_set_json)? {
                v @ (serde_json::Value::Object(_) | serde_json::Value::Array(_)) => v.to_string(),
                _ => return Err(DeviceError::validation("permission_set must be a JSON object or array")),
            },
            taken_at: match taken_at {
                Some(t) => crate::time::normalize(t)?,
                None => crate::time::now(),
            },
        };
        self.conn().execute(
            "INSERT INTO permission_snapshot (snapshot_id, device_uuid, tenant_id, persona_id, permission_set, taken_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![snapshot.snapshot_id, snapshot.device_uuid, snapshot.tenant_id, snapshot.persona_id, snapshot.permission_set_json, snapshot.taken_at],
        )?;
        Ok(snapshot)
    }

    /// The newest snapshot of a device by `taken_at` (ties: the later
    /// recorded), or none.
    pub fn latest_permission_snapshot(&self, device_uuid: &str) -> Result<Option<PermissionSnapshot>, DeviceError> {
        let device_uuid = parse_uuid("device_uuid", device_uuid)?;
        let conn = self.conn();
        Ok(conn
            .query_row(
                "SELECT snapshot_id, device_uuid, tenant_id, persona_id, permission_set, taken_at
                 FROM permission_snapshot WHERE device_uuid = ?1
                 ORDER BY taken_at DESC, snapshot_id DESC LIMIT 1",
                [&device_uuid],
                |r| {
                    Ok(PermissionSnapshot {
                        snapshot_id: r.get(0)?,
                        device_uuid: r.get(1)?,
                        tenant_id: r.get(2)?,
                        persona_id: r.get(3)?,
                        permission_set_json: r.get(4)?,
                        taken_at: r.get(5)?,
                    })
                },
            )
            .optional()?)
    }
}
