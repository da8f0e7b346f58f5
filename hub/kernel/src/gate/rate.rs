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
//!
//! A replica has at most one claim per key on its way: the request that
//! finds the lease empty claims, and the others wait for its answer instead
//! of each queueing an upsert on the same row (two busy replicas doing that
//! put hundreds of milliseconds on one request in a hundred). The next
//! block is claimed when half of the last one is left, in a task of
//! its own beside a request already admitted, so a busy key rarely waits
//! at all.

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant},
};

use tokio::sync::Notify;

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
    /// One claim of this replica is on its way to the counter: the other
    /// requests wait for it instead of each sending their own.
    claiming: bool,
    /// The size of the last block granted: the next claim goes out when a
    /// half of it is left, so that busy keys rarely wait (a commit slowed
    /// by a checkpoint has half a block's time to land).
    last_block: i64,
}

impl Lease {
    fn new(window: i64) -> Lease {
        Lease { window, left: 0, known: 0, spent_until: None, last_use: Instant::now(), claiming: false, last_block: 0 }
    }

    /// Takes one hit, or says what to do.
    fn take(&mut self, limit: i64) -> Take {
        let now = Instant::now();
        self.last_use = now;
        let block = ((limit - self.known) / 16).clamp(1, MAX_BLOCK);
        if self.left > 0 {
            self.left -= 1;
            if !self.claiming && self.left < self.last_block / 2 && self.known < limit {
                self.claiming = true;
                return Take::AdmitAndRefill(block);
            }
            return Take::Admit;
        }
        if self.spent_until.is_some_and(|t| t > now) {
            return Take::Refuse;
        }
        if self.claiming {
            return Take::Wait;
        }
        self.claiming = true;
        Take::Claim(block)
    }
}

/// The leases of one replica, by credential id.
#[derive(Default)]
pub struct RateLeases {
    leases: Mutex<HashMap<String, Lease>>,
    /// Woken whenever a claim ends.
    claimed: Notify,
}

/// How long a spent window is refused from memory before asking again.
const SPENT_RECHECK: Duration = Duration::from_millis(100);
/// How long an unused lease is kept before it goes back to the counter.
const IDLE: Duration = Duration::from_secs(1);
const MAX_BLOCK: i64 = 1_000;

/// What one request does with the lease.
#[derive(Debug, PartialEq)]
enum Take {
    /// Admitted from the lease.
    Admit,
    /// Admitted from the lease, and the lease is running low: this request
    /// claims the next block (of this size) before it goes on.
    AdmitAndRefill(i64),
    /// The lease is empty: this request claims a block of this size, its
    /// own hit included.
    Claim(i64),
    /// The lease is empty and another request's claim is on its way.
    Wait,
    /// The counter is spent.
    Refuse,
}

impl RateLeases {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Lease>> {
        self.leases.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes one hit from the lease of `id` in `window`, or says what to do,
    /// with the window it counts in: a request that read the clock just
    /// before the minute turned, and reaches the lease after another turned
    /// it, counts in the new window (turning the lease back would drop the
    /// new window's lease and claim, and the two windows would take turns).
    fn take(&self, id: &str, window: i64, limit: i64) -> (i64, Take) {
        let mut leases = self.lock();
        let lease = match leases.get_mut(id) {
            Some(l) => l,
            None => leases.entry(id.to_string()).or_insert_with(|| Lease::new(window)),
        };
        if lease.window < window {
            *lease = Lease::new(window);
        }
        let window = lease.window;
        (window, lease.take(limit))
    }

    /// Records a claim's outcome: `granted` hits with the counter now at
    /// `counter`; with `own`, one of them is the claiming request's (it
    /// was not admitted yet). Answers whether that request is admitted.
    fn claimed(&self, id: &str, window: i64, granted: i64, counter: i64, own: bool) -> bool {
        let mut leases = self.lock();
        let lease = leases.entry(id.to_string()).or_insert_with(|| Lease::new(window));
        if lease.window != window {
            // A claim for a window that has ended since: the new one's
            // lease is not this claim's business.
            return granted > 0;
        }
        lease.claiming = false;
        lease.known = counter;
        if granted == 0 {
            lease.spent_until = Some(Instant::now() + SPENT_RECHECK);
            return false;
        }
        lease.spent_until = None;
        lease.last_block = granted;
        lease.left += granted - i64::from(own);
        true
    }

    /// A claim that ended without an answer (a database error, or its
    /// request went away): the next request claims again.
    fn abandoned(&self, id: &str, window: i64) {
        if let Some(lease) = self.lock().get_mut(id).filter(|l| l.window == window) {
            lease.claiming = false;
        }
    }

    /// Removes the leases idle for `IDLE` or of past windows, answering the
    /// unused hits of the current window's ones to give back. A lease with
    /// a claim on its way stays: the claim's answer is still to come.
    fn drain_idle(&self, window: i64) -> Vec<(String, i64)> {
        let mut back = Vec::new();
        self.lock().retain(|id, l| {
            if l.window != window {
                return false;
            }
            if l.claiming || l.last_use.elapsed() < IDLE {
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

/// Ends a claim however its request ends: the waiting requests are woken
/// to find the new block, or to claim again if this one failed.
struct Claiming<'a> {
    leases: &'a RateLeases,
    id: &'a str,
    window: i64,
    answered: bool,
}

impl Drop for Claiming<'_> {
    fn drop(&mut self) {
        if !self.answered {
            self.leases.abandoned(self.id, self.window);
        }
        self.leases.claimed.notify_waiters();
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
    loop {
        // Registered before the lease is read: a claim that ends between
        // the two still wakes this request.
        let woken = state.rate.claimed.notified();
        let (window, take) = state.rate.take(id, window, limit);
        match take {
            Take::Admit => return Ok(()),
            Take::Refuse => return Err(refused()),
            Take::Wait => woken.await,
            // The request goes on at once; the next block is claimed beside it.
            Take::AdmitAndRefill(block) => {
                let (state, id) = (state.clone(), id.to_string());
                tokio::spawn(async move {
                    if let Err(e) = claim(&state, &id, window, limit, block, false).await {
                        tracing::warn!(error = %e, "claiming a rate limit block");
                    }
                });
                return Ok(());
            }
            Take::Claim(block) => return if claim(state, id, window, limit, block, true).await? { Ok(()) } else { Err(refused()) },
        }
    }
}

/// Claims a block of `block` hits of `id`'s window from the shared counter
/// and adds what is granted to the lease; with `own`, one of them is the
/// claiming request's, and the answer says whether it is admitted.
async fn claim(state: &AppState, id: &str, window: i64, limit: i64, block: i64, own: bool) -> Result<bool, sqlx::Error> {
    let mut claim = Claiming { leases: &state.rate, id, window, answered: false };
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
    claim.answered = true;
    Ok(state.rate.claimed(id, window, granted, counter, own))
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
    fn one_claim_at_a_time_refilled_early_and_blocks_shrink_as_the_limit_nears() {
        let leases = RateLeases::default();
        // 1,000 a minute: the first request claims 62; the others wait for it.
        assert_eq!(leases.take("k", 7, 1000).1, Take::Claim(62));
        assert_eq!(leases.take("k", 7, 1000).1, Take::Wait);
        assert!(leases.claimed("k", 7, 62, 62, true));
        // 61 left: admitted from memory until half of the block is left,
        // then one request claims the next block while the rest go on.
        for _ in 0..30 {
            assert_eq!(leases.take("k", 7, 1000).1, Take::Admit);
        }
        assert_eq!(leases.take("k", 7, 1000).1, Take::AdmitAndRefill(58));
        for _ in 0..30 {
            assert_eq!(leases.take("k", 7, 1000).1, Take::Admit);
        }
        assert_eq!(leases.take("k", 7, 1000).1, Take::Wait);
        assert!(leases.claimed("k", 7, 58, 120, false));
        assert_eq!(leases.take("k", 7, 1000).1, Take::Admit);

        // Near the limit, one hit at a time; nothing granted: refused from
        // memory for a while.
        assert_eq!(leases.take("n", 7, 1000).1, Take::Claim(62));
        assert!(leases.claimed("n", 7, 1, 995, true));
        assert_eq!(leases.take("n", 7, 1000).1, Take::Claim(1));
        assert!(!leases.claimed("n", 7, 0, 1001, true));
        assert_eq!(leases.take("n", 7, 1000).1, Take::Refuse);
        // A new window starts afresh.
        assert_eq!(leases.take("n", 8, 1000).1, Take::Claim(62));
    }

    #[test]
    fn a_failed_claim_lets_the_next_request_claim_and_a_late_one_leaves_the_new_window_alone() {
        let leases = RateLeases::default();
        assert_eq!(leases.take("k", 7, 1000).1, Take::Claim(62));
        assert_eq!(leases.take("k", 7, 1000).1, Take::Wait);
        leases.abandoned("k", 7);
        assert_eq!(leases.take("k", 7, 1000).1, Take::Claim(62));
        // The window turns while that claim is out: the new window's lease
        // has a claim of its own, which the old answer does not end.
        assert_eq!(leases.take("k", 8, 1000).1, Take::Claim(62));
        assert!(leases.claimed("k", 7, 62, 62, true));
        assert_eq!(leases.take("k", 8, 1000).1, Take::Wait);
        // A request that read the clock before the turn counts in the new
        // window: it waits for that window's claim, which stays on its way.
        assert_eq!(leases.take("k", 7, 1000), (8, Take::Wait));
        assert!(leases.claimed("k", 8, 62, 62, true));
        assert_eq!(leases.take("k", 7, 1000), (8, Take::Admit));
    }

    #[test]
    fn idle_leases_go_back_and_past_windows_are_dropped() {
        let leases = RateLeases::default();
        assert!(leases.claimed("busy", 3, 10, 10, true));
        assert!(leases.claimed("idle", 3, 10, 20, true));
        assert!(leases.claimed("old", 2, 10, 10, true));
        assert_eq!(leases.take("claiming", 3, 1000).1, Take::Claim(62));
        for id in ["idle", "claiming"] {
            leases.lock().get_mut(id).unwrap().last_use -= IDLE;
        }
        assert_eq!(leases.drain_idle(3), vec![("idle".to_string(), 9)]);
        let mut left: Vec<String> = leases.lock().keys().cloned().collect();
        left.sort();
        assert_eq!(left, vec!["busy".to_string(), "claiming".to_string()]);
    }
}
