//! Throttles of the routes that take a secret without a credential
//! (password login, the client-credentials exchange, verification email):
//! failures are counted per account and per client address in the
//! database, so every hub replica sees the same counts, and a key that has
//! used up its free allowance is blocked for a time that doubles with each
//! further failure, up to a cap. Nothing is ever locked for good: the block
//! ends, and a quiet hour forgets the failures.

use std::net::IpAddr;

use crate::{
    error::{ApiError, ApiResult},
    state::AppState,
};

/// The longest block, however many failures.
pub const MAX_BLOCK_SECONDS: i64 = 900;
/// Failures older than this are forgotten: the count starts again.
pub const FORGET_AFTER_SECONDS: i64 = 3600;

/// One throttled subject and how many failures it may have before blocks
/// begin.
pub struct Key {
    key: String,
    free: i64,
}

impl Key {
    /// An account of a route (`login`, `verify`), keyed by a hash of the
    /// account name under the master key, so the table holds no email.
    pub fn account(state: &AppState, route: &str, account: &str, free: i64) -> Self {
        Key { key: format!("{route}:acct:{}", state.master.alias_hash("throttle", account)), free }
    }

    /// A client address of a route; IPv6 clients are counted by their /64,
    /// the smallest block a single client usually holds.
    pub fn address(route: &str, addr: IpAddr, free: i64) -> Self {
        let addr = match addr {
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => v4.to_string(),
                None => {
                    let s = v6.segments();
                    format!("{:x}:{:x}:{:x}:{:x}::/64", s[0], s[1], s[2], s[3])
                }
            },
            IpAddr::V4(v4) => v4.to_string(),
        };
        Key { key: format!("{route}:addr:{addr}"), free }
    }
}

/// Unix milliseconds: blocks start at one second, so seconds would round
/// the first ones away.
fn now() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Refuses with 429 and `Retry-After` while any of `keys` (one or two) is
/// blocked; otherwise tells whether any of them has failures on record.
/// One statement, so a refused flood costs the database one read.
pub async fn check(state: &AppState, keys: &[Key]) -> ApiResult<bool> {
    let (first, second) = match keys {
        [one] => (one, one),
        [one, two] => (one, two),
        _ => return Err(ApiError::Internal(anyhow::anyhow!("throttle::check takes one or two keys"))),
    };
    let now = now();
    let rows: Vec<i64> = sqlx::query_scalar("SELECT blocked_until FROM auth_throttle WHERE throttle_key = $1 OR throttle_key = $2")
        .bind(&first.key)
        .bind(&second.key)
        .fetch_all(&state.db.read)
        .await?;
    if let Some(until) = rows.iter().copied().filter(|u| *u > now).max() {
        return Err(ApiError::RateLimited(((until - now) as u64).div_ceil(1000)));
    }
    Ok(!rows.is_empty())
}

/// How long a key is blocked after its `failures`-th failure.
pub fn block_seconds(failures: i64, free: i64) -> i64 {
    let over = failures - free;
    if over <= 0 {
        return 0;
    }
    // 1 s, 2 s, 4 s, ... capped; the shift is bounded so it cannot overflow.
    (1i64 << (over - 1).min(20)).min(MAX_BLOCK_SECONDS)
}

/// Counts one failure against each of `keys`, blocking those past their
/// allowance.
pub async fn fail(state: &AppState, keys: &[Key]) -> ApiResult<()> {
    let now = now();
    for k in keys {
        let failures: i64 = sqlx::query_scalar(
            "INSERT INTO auth_throttle (throttle_key, failures, last_failure_at, blocked_until) VALUES ($1, 1, $2, 0) \
             ON CONFLICT (throttle_key) DO UPDATE SET \
               failures = CASE WHEN auth_throttle.last_failure_at < $3 THEN 1 ELSE auth_throttle.failures + 1 END, \
               last_failure_at = $2 \
             RETURNING failures",
        )
        .bind(&k.key)
        .bind(now)
        .bind(now - FORGET_AFTER_SECONDS * 1000)
        .fetch_one(state.db.writer())
        .await?;
        let block = block_seconds(failures, k.free);
        if block > 0 {
            sqlx::query("UPDATE auth_throttle SET blocked_until = $1 WHERE throttle_key = $2")
                .bind(now + block * 1000)
                .bind(&k.key)
                .execute(state.db.writer())
                .await?;
        }
    }
    Ok(())
}

/// `blocked_until` after a count of `failures` (an SQL expression) at
/// `now` (a parameter), as SQL: 0 within the allowance (never a block, so
/// a request stamped a millisecond earlier still passes), else `now` plus
/// `block_seconds` spelt out, since SQLite has no power function.
fn blocked_until_sql(failures: &str, free: i64, now: &str) -> String {
    let mut arms = String::new();
    let mut over = 1;
    while block_seconds(free + over, free) < MAX_BLOCK_SECONDS {
        arms.push_str(&format!(" WHEN {failures} - {free} = {over} THEN {now} + {}", block_seconds(free + over, free) * 1000));
        over += 1;
    }
    format!("(CASE WHEN {failures} <= {free} THEN 0{arms} ELSE {now} + {} END)", MAX_BLOCK_SECONDS * 1000)
}

/// Counts one request against each of `keys` and refuses it with 429 while
/// any of them is blocked, in one statement a key within one transaction
/// (for routes where every request counts, as the verification email):
/// requests at once queue on each key's row, so a burst is admitted
/// exactly as far as requests one after another would be. A refused
/// request counts against none of them.
pub async fn take(state: &AppState, keys: &[Key]) -> ApiResult<()> {
    let now = now();
    let forget = now - FORGET_AFTER_SECONDS * 1000;
    let mut tx = state.db.begin().await?;
    for k in keys {
        let counted = "(CASE WHEN auth_throttle.last_failure_at < $3 THEN 1 ELSE auth_throttle.failures + 1 END)";
        let sql = format!(
            "INSERT INTO auth_throttle (throttle_key, failures, last_failure_at, blocked_until) VALUES ($1, 1, $2, {first}) \
             ON CONFLICT (throttle_key) DO UPDATE SET failures = {counted}, last_failure_at = $2, blocked_until = {block} \
             WHERE auth_throttle.blocked_until <= $2 RETURNING failures",
            first = blocked_until_sql("1", k.free, "$2"),
            block = blocked_until_sql(counted, k.free, "$2"),
        );
        let admitted: Option<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(&k.key).bind(now).bind(forget).fetch_optional(&mut *tx).await?;
        if admitted.is_none() {
            let until: i64 = sqlx::query_scalar("SELECT blocked_until FROM auth_throttle WHERE throttle_key = $1").bind(&k.key).fetch_one(&mut *tx).await?;
            return Err(ApiError::RateLimited(((until - now).max(1) as u64).div_ceil(1000)));
        }
    }
    tx.commit().await?;
    Ok(())
}

/// Forgets the failures of `key` (an account after a correct password).
/// Address keys are never cleared this way, or one account an attacker
/// owns would reset the count of every guess made from their address.
pub async fn clear(state: &AppState, key: &Key) -> ApiResult<()> {
    sqlx::query("DELETE FROM auth_throttle WHERE throttle_key = $1").bind(&key.key).execute(state.db.writer()).await?;
    Ok(())
}

/// Deletes rows whose failures are forgotten and whose block has ended.
pub async fn sweep(state: &AppState) -> Result<u64, sqlx::Error> {
    let now = now();
    let done = sqlx::query("DELETE FROM auth_throttle WHERE last_failure_at < $1 AND blocked_until < $2")
        .bind(now - FORGET_AFTER_SECONDS * 1000)
        .bind(now)
        .execute(state.db.writer())
        .await?;
    Ok(done.rows_affected())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_double_after_the_allowance_and_stop_at_the_cap() {
        assert_eq!(block_seconds(5, 5), 0);
        assert_eq!(block_seconds(6, 5), 1);
        assert_eq!(block_seconds(7, 5), 2);
        assert_eq!(block_seconds(10, 5), 16);
        assert_eq!(block_seconds(15, 5), 512);
        assert_eq!(block_seconds(16, 5), MAX_BLOCK_SECONDS);
        assert_eq!(block_seconds(i64::MAX, 5), MAX_BLOCK_SECONDS);
    }

    #[test]
    fn the_block_in_sql_is_the_block_in_rust() {
        let sql = blocked_until_sql("f", 5, "$2");
        assert!(sql.starts_with("(CASE WHEN f <= 5 THEN 0 WHEN f - 5 = 1 THEN $2 + 1000 WHEN f - 5 = 2 THEN $2 + 2000"), "{sql}");
        assert!(sql.contains("WHEN f - 5 = 10 THEN $2 + 512000 ELSE $2 + 900000 END)"), "{sql}");
    }

    #[test]
    fn ipv6_clients_are_counted_by_their_64() {
        let a = Key::address("login", "2001:db8:1:2:aaaa::1".parse().unwrap(), 1);
        let b = Key::address("login", "2001:db8:1:2:bbbb::9".parse().unwrap(), 1);
        assert_eq!(a.key, b.key);
        assert_eq!(Key::address("login", "::ffff:10.0.0.1".parse().unwrap(), 1).key, "login:addr:10.0.0.1");
    }
}
