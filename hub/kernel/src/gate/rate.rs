//! Per-minute rate limits of credentials (`rate_limit_rpm`), shared by
//! every hub replica through `credential_rate_window`, without a database
//! write per request.
//!
//! Each replica leases hits from the window's shared counter in blocks:
//! a claim adds the block to the counter (one upsert) and the replica then
//! admits that many requests from memory. A block is a sixteenth of what
//! the window has left (at least 1, at most 1,000), so blocks shrink as
//! the limit nears and the last hits are claimed one by one: the counter
//! never grants more than the limit, whatever the number of replicas.
//! The price is the other way round: hits leased by a replica and not yet
//! used are unavailable to the others. A replica returns a lease it has
//! not drawn on for a second (`return_idle`), so the early refusals this
//! can cause are bounded by the leases of replicas busy with that very key
//! in the last second; a replica that crashes keeps its lease until the
//! window ends. Once the counter is spent, a replica refuses from memory
//! and asks the database again at most every 100 ms.

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant},
};

use crate::{
    error::{ApiError, ApiResult},
    state::AppState,
};

/// A replica's share of one credential's current window.
struct Lease {
    window: i64,
    /// Hits claimed from the shared counter and not yet used.
    left: i64,
    /// The shared counter as of this replica's last claim.
    known: i64,
    /// Refuse from memory until then (the counter was spent).
    spent_until: Option<Instant>,
    last_use: Instant,
}

impl Lease {
    fn new(window: i64) -> Lease {
        Lease { window, left: 0, known: 0, spent_until: None, last_use: Instant::now() }
    }
}

/// The leases of one replica, by credential id.
#[derive(Default)]
pub struct RateLeases(Mutex<HashMap<String, Lease>>);

/// How long a spent window is refused from memory before asking again.
const SPENT_RECHECK: Duration = Duration::from_millis(100);
/// How long an unused lease is kept before it goes back to the counter.
const IDLE: Duration = Duration::from_secs(1);
const MAX_BLOCK: i64 = 1_000;

impl RateLeases {
    /// Takes one hit from the lease of `id` in `window`, or says how many
    /// hits to claim (None: refuse from memory).
    fn take(&self, id: &str, window: i64, limit: i64) -> Result<(), Option<i64>> {
        let mut leases = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let lease = match leases.get_mut(id) {
            Some(l) => l,
            None => leases.entry(id.to_string()).or_insert_with(|| Lease::new(window)),
        };
        if lease.window != window {
            *lease = Lease::new(window);
        }
        let now = Instant::now();
        lease.last_use = now;
        if lease.left > 0 {
            lease.left -= 1;
            return Ok(());
        }
        if lease.spent_until.is_some_and(|t| t > now) {
            return Err(None);
        }
        Err(Some(((limit - lease.known) / 16).clamp(1, MAX_BLOCK)))
    }

    /// Records a claim's outcome: `granted` hits (one of them for the
    /// request at hand) with the counter now at `counter`.
    fn claimed(&self, id: &str, window: i64, granted: i64, counter: i64) -> bool {
        let mut leases = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let lease = leases.entry(id.to_string()).or_insert_with(|| Lease::new(window));
        if lease.window != window {
            *lease = Lease::new(window);
        }
        lease.known = counter;
        if granted == 0 {
            lease.spent_until = Some(Instant::now() + SPENT_RECHECK);
            return false;
        }
        lease.spent_until = None;
        lease.left += granted - 1;
        true
    }

    /// Removes the leases idle for `IDLE` or of past windows, answering the
    /// unused hits of the current window's ones to give back.
    fn drain_idle(&self, window: i64) -> Vec<(String, i64)> {
        let mut leases = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let mut back = Vec::new();
        leases.retain(|id, l| {
            if l.window != window {
                return false;
            }
            if l.last_use.elapsed() < IDLE {
                return true;
            }
            if l.left > 0 {
                back.push((id.clone(), l.left));
            }
            false
        });
        back
    }
}

/// Counts one use of the credential `id` in its current one-minute window
/// and refuses it over `limit` with 429 and the seconds to the next
/// window. No limit: nothing is counted.
pub async fn count_use(state: &AppState, id: &str, limit: Option<i64>) -> ApiResult<()> {
    let Some(limit) = limit else { return Ok(()) };
    let now = chrono::Utc::now().timestamp();
    let window = now / 60;
    let refused = || ApiError::RateLimited((60 - now % 60) as u64);
    let block = match state.rate.take(id, window, limit) {
        Ok(()) => return Ok(()),
        Err(None) => return Err(refused()),
        Err(Some(block)) => block,
    };
    let counter: i64 = sqlx::query_scalar(
        "INSERT INTO credential_rate_window (key_id, window_start, hits) VALUES ($1, $2, $3) \
         ON CONFLICT (key_id, window_start) DO UPDATE SET hits = credential_rate_window.hits + $3 RETURNING hits",
    )
    .bind(id)
    .bind(window)
    .bind(block)
    .fetch_one(state.db.writer())
    .await?;
    // What the claim took beyond the limit is not granted (and stays on
    // the counter, which is spent either way).
    let granted = (block - (counter - limit).max(0)).max(0);
    if state.rate.claimed(id, window, granted, counter) { Ok(()) } else { Err(refused()) }
}

/// Gives the unused hits of idle leases back to their windows' counters.
pub async fn return_idle(state: &AppState) -> Result<(), sqlx::Error> {
    let window = chrono::Utc::now().timestamp() / 60;
    let back = state.rate.drain_idle(window);
    if back.is_empty() {
        return Ok(());
    }
    let mut tx = state.db.writer().begin().await?;
    for (id, unused) in back {
        sqlx::query("UPDATE credential_rate_window SET hits = hits - $3 WHERE key_id = $1 AND window_start = $2")
            .bind(id)
            .bind(window)
            .bind(unused)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_shrink_as_the_limit_nears_and_a_spent_window_refuses_from_memory() {
        let leases = RateLeases::default();
        // 1,000 a minute: the first claim asks for 62.
        assert_eq!(leases.take("k", 7, 1000), Err(Some(62)));
        assert!(leases.claimed("k", 7, 62, 62));
        for _ in 0..61 {
            assert_eq!(leases.take("k", 7, 1000), Ok(()));
        }
        // Spent: the next claim is sized on what the counter has left.
        assert_eq!(leases.take("k", 7, 1000), Err(Some(58)));
        // Near the limit, one hit at a time.
        assert!(leases.claimed("k", 7, 1, 995));
        assert_eq!(leases.take("k", 7, 1000), Err(Some(1)));
        // Nothing granted: refused from memory for a while.
        assert!(!leases.claimed("k", 7, 0, 1001));
        assert_eq!(leases.take("k", 7, 1000), Err(None));
        // A new window starts afresh.
        assert_eq!(leases.take("k", 8, 1000), Err(Some(62)));
    }

    #[test]
    fn idle_leases_go_back_and_past_windows_are_dropped() {
        let leases = RateLeases::default();
        assert!(leases.claimed("busy", 3, 10, 10));
        assert!(leases.claimed("idle", 3, 10, 20));
        assert!(leases.claimed("old", 2, 10, 10));
        leases.0.lock().unwrap().get_mut("idle").unwrap().last_use -= IDLE;
        assert_eq!(leases.drain_idle(3), vec![("idle".to_string(), 9)]);
        let left: Vec<String> = leases.0.lock().unwrap().keys().cloned().collect();
        assert_eq!(left, vec!["busy".to_string()]);
    }
}
