//! Event types and their conflict policies, resolution through the registry,
//! and the human-review queue.

use rusqlite::{OptionalExtension, params};

use super::{Store, parse_json, require};
use crate::error::DeviceError;
use crate::policy::{self, ConflictPolicy, Resolution};

/// A registered event type.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "ffi", derive(uniffi::Record))]
pub struct EventTypeRecord {
    pub event_type: String,
    pub conflict_policy: ConflictPolicy,
    pub retention_class: Option<String>,
    pub schema_version: u32,
    /// `local` (registered on the device) or `hub` (pulled by the sync).
    pub source: String,
    pub registered_at: String,
}

/// One field a `merge` had to decide, with both sides as JSON text.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "ffi", derive(uniffi::Record))]
pub struct ConflictField {
    pub field: String,
    pub input_a_json: String,
    pub input_b_json: String,
}

/// The outcome of resolving a conflict through the registry.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "ffi", derive(uniffi::Record))]
pub struct ResolutionRecord {
    pub event_type: String,
    pub policy: ConflictPolicy,
    /// `resolved` or `pending_review`.
    pub status: String,
    /// The resolved value as JSON text; absent while pending review.
    pub result_json: Option<String>,
    pub conflicts: Vec<ConflictField>,
    /// Set for `human-review`: the parked item to decide later.
    pub review_id: Option<String>,
}

/// Which side a person chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "ffi", derive(uniffi::Enum))]
pub enum ReviewChoice {
    A,
    B,
}

/// A conflict parked for a person.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "ffi", derive(uniffi::Record))]
pub struct ReviewItem {
    pub review_id: String,
    pub event_type: String,
    pub input_a_json: String,
    pub input_b_json: String,
    pub created_at: String,
    pub decided_at: Option<String>,
    pub choice: Option<ReviewChoice>,
}

fn policy_column(text: String) -> rusqlite::Result<ConflictPolicy> {
    // The CHECK constraint admits only the five names, so this never fails
    // on a file this library wrote.
    ConflictPolicy::parse(&text).map_err(|e| rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e)))
}

impl Store {
    /// Registers an event type with its policy. Answers `true` when it is
    /// new; registering again updates the policy and answers `false`.
    pub fn register_event_type(&self, event_type: &str, policy: ConflictPolicy) -> Result<bool, DeviceError> {
        require("event_type", event_type)?;
        self.upsert_event_type(event_type, policy, None, 1, "local")
    }

    pub(super) fn upsert_event_type(
        &self,
        event_type: &str,
        policy: ConflictPolicy,
        retention_class: Option<&str>,
        schema_version: u32,
        source: &str,
    ) -> Result<bool, DeviceError> {
        let conn = self.conn();
        let existed: bool = conn.query_row("SELECT EXISTS (SELECT 1 FROM event_type WHERE event_type = ?1)", [event_type], |r| r.get(0))?;
        conn.execute(
            "INSERT INTO event_type (event_type, conflict_policy, retention_class, schema_version, source, registered_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (event_type) DO UPDATE SET conflict_policy = excluded.conflict_policy,
                 retention_class = COALESCE(excluded.retention_class, event_type.retention_class),
                 schema_version = excluded.schema_version, source = excluded.source",
            params![event_type, policy.as_str(), retention_class, schema_version, source, crate::time::now()],
        )?;
        Ok(!existed)
    }

    /// Every registered event type, by name.
    pub fn event_types(&self) -> Result<Vec<EventTypeRecord>, DeviceError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT event_type, conflict_policy, retention_class, schema_version, source, registered_at
             FROM event_type ORDER BY event_type",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(EventTypeRecord {
                event_type: r.get(0)?,
                conflict_policy: policy_column(r.get(1)?)?,
                retention_class: r.get(2)?,
                schema_version: r.get(3)?,
                source: r.get(4)?,
                registered_at: r.get(5)?,
            })
        })?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }

    /// The policy of a registered type; an unregistered one is
    /// `UnregisteredEventType`.
    pub fn policy_for(&self, event_type: &str) -> Result<ConflictPolicy, DeviceError> {
        let conn = self.conn();
        let text: Option<String> = conn.query_row("SELECT conflict_policy FROM event_type WHERE event_type = ?1", [event_type], |r| r.get(0)).optional()?;
        match text {
            Some(text) => ConflictPolicy::parse(&text),
            None => Err(DeviceError::UnregisteredEventType { event_type: event_type.to_string() }),
        }
    }

    /// Resolves two sides (JSON text) by the type's registered policy. A
    /// `human-review` type parks both sides as a review item.
    pub fn resolve(&self, event_type: &str, input_a_json: &str, input_b_json: &str) -> Result<ResolutionRecord, DeviceError> {
        let policy = self.policy_for(event_type)?;
        let a = parse_json("input_a", input_a_json)?;
        let b = parse_json("input_b", input_b_json)?;
        match policy::resolve(policy, &a, &b)? {
            Resolution::Resolved { value, conflicts } => Ok(ResolutionRecord {
                event_type: event_type.to_string(),
                policy,
                status: "resolved".into(),
                result_json: Some(value.to_string()),
                conflicts: conflicts
                    .into_iter()
                    .map(|c| ConflictField { field: c.field, input_a_json: c.input_a.to_string(), input_b_json: c.input_b.to_string() })
                    .collect(),
                review_id: None,
            }),
            Resolution::NeedsReview { input_a, input_b } => {
                let review_id = uuid::Uuid::now_v7().to_string();
                self.conn().execute(
                    "INSERT INTO review_item (review_id, event_type, input_a, input_b, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![review_id, event_type, input_a.to_string(), input_b.to_string(), crate::time::now()],
                )?;
                Ok(ResolutionRecord {
                    event_type: event_type.to_string(),
                    policy,
                    status: "pending_review".into(),
                    result_json: None,
                    conflicts: Vec::new(),
                    review_id: Some(review_id),
                })
            }
        }
    }

    /// Review items nobody has decided yet, oldest first.
    pub fn pending_reviews(&self) -> Result<Vec<ReviewItem>, DeviceError> {
        self.reviews_where("decided_at IS NULL")
    }

    /// One review item, decided or not.
    pub fn review(&self, review_id: &str) -> Result<ReviewItem, DeviceError> {
        self.reviews_where_id(review_id)?.ok_or_else(|| DeviceError::NotFound { reason: format!("review item {review_id}") })
    }

    /// Decides a review item by choosing a side; answers the chosen side's
    /// JSON. Deciding twice is a `Conflict`.
    pub fn decide_review(&self, review_id: &str, choice: ReviewChoice) -> Result<String, DeviceError> {
        let item = self.review(review_id)?;
        if item.decided_at.is_some() {
            return Err(DeviceError::Conflict { reason: format!("review item {review_id} is already decided") });
        }
        let (letter, chosen) = match choice {
            ReviewChoice::A => ("a", item.input_a_json),
            ReviewChoice::B => ("b", item.input_b_json),
        };
        // The `decided_at IS NULL` guard makes a racing second decision
        // change nothing, and we report it as the conflict it is.
        let changed = self.conn().execute(
            "UPDATE review_item SET decided_at = ?1, choice = ?2 WHERE review_id = ?3 AND decided_at IS NULL",
            params![crate::time::now(), letter, review_id],
        )?;
        if changed == 0 {
            return Err(DeviceError::Conflict { reason: format!("review item {review_id} is already decided") });
        }
        Ok(chosen)
    }

    fn reviews_where_id(&self, review_id: &str) -> Result<Option<ReviewItem>, DeviceError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(&format!("{REVIEW_SELECT} WHERE review_id = ?1"))?;
        Ok(stmt.query_row([review_id], review_row).optional()?)
    }

    fn reviews_where(&self, condition: &str) -> Result<Vec<ReviewItem>, DeviceError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(&format!("{REVIEW_SELECT} WHERE {condition} ORDER BY created_at, review_id"))?;
        let rows = stmt.query_map([], review_row)?;
        Ok(rows.collect::<Result<Vec<_>, _>>()?)
    }
}

const REVIEW_SELECT: &str = "SELECT review_id, event_type, input_a, input_b, created_at, decided_at, choice FROM review_item";

fn review_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ReviewItem> {
    let choice: Option<String> = r.get(6)?;
    Ok(ReviewItem {
        review_id: r.get(0)?,
        event_type: r.get(1)?,
        input_a_json: r.get(2)?,
        input_b_json: r.get(3)?,
        created_at: r.get(4)?,
        decided_at: r.get(5)?,
        choice: choice.map(|c| if c == "a" { ReviewChoice::A } else { ReviewChoice::B }),
    })
}
