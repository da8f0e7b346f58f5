//! Retention: a sweeper shreds the payloads of entries whose retention
//! class has run out. Only the payload goes; its digest stays in the row
//! and in the hash, so the chain still verifies after shredding.
//!
//! Periods: `transient` 7 days (short-lived operational noise such as
//! query and delivery receipts: a week covers incident follow-up),
//! `operational` 90 days ("Events" 5), `regulated` seven years ("Events" 5;
//! shredded only after that).

use chrono::{DateTime, Duration, Utc};

use crate::db::{self, Db};

pub const TRANSIENT_DAYS: i64 = 7;
pub const OPERATIONAL_DAYS: i64 = 90;
/// Seven years, counting leap days generously.
pub const REGULATED_DAYS: i64 = 7 * 365 + 2;

/// Rows shredded per write transaction, so the sweeper never holds the
/// (SQLite) writer for long.
const BATCH: i64 = 1000;

/// Shreds every expired payload as of `now`; returns how many.
pub async fn sweep(db: &Db, now: DateTime<Utc>) -> Result<u64, sqlx::Error> {
    let cutoff = |days: i64| db::format_time(now - Duration::days(days));
    let (transient, operational, regulated) = (cutoff(TRANSIENT_DAYS), cutoff(OPERATIONAL_DAYS), cutoff(REGULATED_DAYS));
    let stamp = db::format_time(now);
    let mut total = 0;
    loop {
        let done = sqlx::query(
            "UPDATE audit_entry SET payload = NULL, shredded_at = $1 WHERE entry_id IN ( \
               SELECT entry_id FROM audit_entry WHERE payload IS NOT NULL AND ( \
                 (retention_class = 'transient' AND occurred_at < $2) OR \
                 (retention_class = 'operational' AND occurred_at < $3) OR \
                 (retention_class = 'regulated' AND occurred_at < $4)) \
               LIMIT $5) AND payload IS NOT NULL",
        )
        .bind(&stamp)
        .bind(&transient)
        .bind(&operational)
        .bind(&regulated)
        .bind(BATCH)
        .execute(db.writer())
        .await?
        .rows_affected();
        total += done;
        if done < BATCH as u64 {
            return Ok(total);
        }
    }
}
